"""cogfeed.torch.CogDataset with torch.utils.data.DataLoader and
torch.distributed (gloo, CPU): shards are disjoint and cover the epoch."""
import os
import socket
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as tmp
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "servers"))
from servers import Nginx  # noqa: E402
from test_loader import check_batch, expected, make_cog, make_pair  # noqa: E402

import cogfeed  # noqa: E402
from cogfeed.torch import CogDataset  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("torch"))
    a = make_pair(d, "a", 260, 200)
    b = make_pair(d, "b", 150, 170, shift=1000)
    return {"images": [a[0], b[0]], "masks": [a[1], b[1]],
            "shifts": [0, 1000]}


def all_grid_windows(data, P):
    ld = cogfeed.Loader(data["images"], patch_size=P, batch_size=5,
                        sampler="grid")
    return [w for b in ld for w in b["windows"]]


def test_dataloader_main_process(data):
    ds = CogDataset(data["images"], data["masks"], patch_size=32,
                    batch_size=4, epoch_length=16, flip=True)
    dl = DataLoader(ds, batch_size=None)
    n = 0
    for batch in dl:
        img, msk = batch["image"], batch["mask"]
        # uint16 is widened losslessly, on every torch: 1.13 has no uint16,
        # and 2.3+ has it but few operations accept it
        assert img.dtype == torch.int32 and msk.dtype == torch.uint8
        assert img.shape == (4, 3, 32, 32) and msk.shape == (4, 1, 32, 32)
        # mask aligned with the image through the flips
        assert (msk[:, 0].int() == (img[:, 0] & 0xFF)).all()
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            if batch["augment"][i] == 0:
                np.testing.assert_array_equal(
                    img[i].numpy(), expected(32, 32, x + data["shifts"][f], y))
        n += img.shape[0]
    assert n == 16


def test_float32_tensors_are_views(data):
    # One ring slot: the second batch is written where the first was, so a
    # tensor that views the ring (no copy) shows the second batch's pixels.
    ds = CogDataset(data["images"], patch_size=16, batch_size=2,
                    epoch_length=4, dtype="float32", prefetch=1)
    it = iter(DataLoader(ds, batch_size=None))
    first = next(it)
    t0, kept = first["image"], first["image"].clone()
    assert t0.dtype == torch.float32 and t0.shape == (2, 3, 16, 16)
    f, x, y, w, h = first["windows"][0]
    np.testing.assert_array_equal(
        kept[0].numpy(), expected(16, 16, x + data["shifts"][f], y))
    second = next(it)
    assert torch.equal(t0, second["image"])
    assert not torch.equal(kept, second["image"])


def test_workers_get_disjoint_shards(data):
    P = 40
    full = all_grid_windows(data, P)
    ds = CogDataset(data["images"], patch_size=P, batch_size=3,
                    sampler="grid")
    dl = DataLoader(ds, batch_size=None, num_workers=2,
                    multiprocessing_context="fork")
    got = []
    for batch in dl:
        got += [tuple(w) for w in batch["windows"]]
        f, x, y, w, h = batch["windows"][0]
        # workers copy their batches: the pixels survive the trip
        np.testing.assert_array_equal(
            batch["image"][0].numpy(),
            expected(P, P, x + data["shifts"][f], y))
    assert len(got) == len(set(got)) == len(full)
    assert set(got) == set(map(tuple, full))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dist_worker(rank, world, port, images, P, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        ds = CogDataset(images, patch_size=P, batch_size=4, sampler="grid",
                        drop_last=False)
        assert ds.shard() == (rank, world)
        wins = [w for b in DataLoader(ds, batch_size=None)
                for w in b["windows"]]
        # DataLoader workers are outside the process group: they shard by
        # the rank the main process saw (fork and spawn alike).
        by_workers = {}
        for ctx in ("fork", "spawn"):
            by_workers[ctx] = [
                tuple(w) for b in DataLoader(ds, batch_size=None,
                                             num_workers=2,
                                             multiprocessing_context=ctx)
                for w in b["windows"]]
        gathered = [None] * world
        dist.all_gather_object(gathered, (wins, by_workers))
        if rank == 0:
            torch.save(gathered, out)
    finally:
        dist.destroy_process_group()


def test_distributed_two_processes_cover_epoch(data, tmp_path):
    P = 48
    out = str(tmp_path / "windows.pt")
    tmp.spawn(_dist_worker, args=(2, _free_port(), data["images"], P, out),
              nprocs=2, join=True)
    gathered = torch.load(out)
    shards = [g[0] for g in gathered]
    a, b = (set(map(tuple, s)) for s in shards)
    assert a and b and not (a & b)
    full = set(map(tuple, all_grid_windows(data, P)))
    assert a | b == full
    assert len(shards[0]) + len(shards[1]) == len(full)
    for ctx in ("fork", "spawn"):
        wa, wb = (g[1][ctx] for g in gathered)
        assert not (set(wa) & set(wb)), ctx
        assert len(wa) + len(wb) == len(full) and set(wa) | set(wb) == full


def test_rank_from_environment(data, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    ds = CogDataset(data["images"], patch_size=32, batch_size=2,
                    sampler="grid")
    assert ds.shard() == (1, 3)
    ld = ds.make_loader()
    ref = cogfeed.Loader(data["images"], patch_size=32, batch_size=2,
                         sampler="grid")
    full = [w for b in ref for w in b["windows"]]
    mine = [w for b in ld for w in b["windows"]]
    assert mine == full[1::3]


def test_set_epoch_changes_samples(data):
    ds = CogDataset(data["images"], patch_size=32, batch_size=4,
                    epoch_length=8)
    e0 = [w for b in DataLoader(ds, batch_size=None) for w in b["windows"]]
    ds.set_epoch(1)
    e1 = [w for b in DataLoader(ds, batch_size=None) for w in b["windows"]]
    ds.set_epoch(0)
    again = [w for b in DataLoader(ds, batch_size=None) for w in b["windows"]]
    assert e0 != e1 and e0 == again
    with pytest.raises(ValueError, match="rank"):
        CogDataset(data["images"], rank=1)


def test_state_dict_resumes_mid_epoch(data):
    import json
    kw = dict(patch_size=32, batch_size=4, epoch_length=40, flip=True,
              seed=3)

    def windows(batches):
        return [(list(map(tuple, b["windows"])), list(b["augment"]))
                for b in batches]

    ref = windows(DataLoader(CogDataset(data["images"], **kw),
                             batch_size=None))
    assert len(ref) == 10
    ds = CogDataset(data["images"], **kw)
    assert ds.state_dict() == {"epoch": 0, "batch": 0}
    it = iter(DataLoader(ds, batch_size=None))
    first = windows([next(it) for _ in range(3)])
    state = json.loads(json.dumps(ds.state_dict()))  # a checkpoint
    assert state["epoch"] == 0 and state["batch"] == 3
    again = CogDataset(data["images"], **kw)
    again.load_state_dict(state)
    assert again.state_dict()["batch"] == 3
    rest = windows(DataLoader(again, batch_size=None))
    assert first + rest == ref
    # DataLoader workers split the epoch themselves: not mid-epoch.
    workers = CogDataset(data["images"], **kw)
    workers.load_state_dict(state)
    with pytest.raises(Exception, match="num_workers=0"):
        list(DataLoader(workers, batch_size=None, num_workers=1,
                        multiprocessing_context="fork"))
    # A state of another dataset is refused at once (as the Loader does),
    # not at the first batch, and leaves the dataset as it was.
    other = CogDataset(data["images"], **dict(kw, seed=4))
    with pytest.raises(ValueError, match="seed=3"):
        other.load_state_dict(state)
    assert other.state_dict()["batch"] == 0
    assert windows(DataLoader(other, batch_size=None)) != ref
    files = CogDataset(data["images"][::-1], **kw)
    with pytest.raises(ValueError, match="files"):
        files.load_state_dict(state)
    with pytest.raises(ValueError, match="no 'epoch'"):
        files.load_state_dict({"batch": 3})
    for d in (ds, again, workers, other, files):
        d.close()


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_persistent_workers_follow_set_epoch(data, ctx):
    ds = CogDataset(data["images"], patch_size=32, batch_size=4,
                    epoch_length=8)
    dl = DataLoader(ds, batch_size=None, num_workers=1,
                    persistent_workers=True, multiprocessing_context=ctx)

    def epoch(e):
        ds.set_epoch(e)
        bs = list(dl)
        assert {b["epoch"] for b in bs} == {e}
        return [tuple(w) for b in bs for w in b["windows"]]

    e0, e1, again = epoch(0), epoch(1), epoch(0)
    assert e0 != e1 and e0 == again
    import pickle
    pickle.loads(pickle.dumps(ds))  # plain pickling still works


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_device_without_cuda_is_a_clear_error(data):
    ds = CogDataset(data["images"], patch_size=8, batch_size=2,
                    epoch_length=2, dtype="float32", device="cuda")
    with pytest.raises(ValueError, match="no CUDA device"):
        next(iter(ds))
    # device="cpu" is the plain CPU path
    ds = CogDataset(data["images"], patch_size=8, batch_size=2,
                    epoch_length=2, dtype="float32", device="cpu")
    assert next(iter(ds))["image"].device.type == "cpu"


def check_batches(data, batches, P):
    """Every patch (kept on the GPU or CPU) holds its window's pixels and
    its mask the image's low byte, flips and rotations undone: the loader
    tests' check_batch on the copies."""
    for img, msk, windows, augs in batches:
        check_batch(data, {"image": img.cpu().numpy().astype(np.int64),
                           "mask": msk.cpu().numpy(), "windows": windows,
                           "augment": augs}, P)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_pin_memory_cuda_copies_are_intact(data):
    # The documented pattern: pinned ring slots, non_blocking copies, and a
    # slow GPU step queued after each copy.  The ring has 2 slots, so a
    # slot is refilled right after the next batch is asked for: a copy
    # still in flight then would show another batch's pixels.
    P = 32
    ds = CogDataset(data["images"], data["masks"], patch_size=P,
                    batch_size=4, epoch_length=64, flip=True,
                    dtype="float32", pin_memory=True, prefetch=2)
    kept = []
    big = torch.randn(4096, 4096, device="cuda")
    for b in DataLoader(ds, batch_size=None):
        assert b["image"].is_pinned() and b["mask"].is_pinned()
        x = b["image"].cuda(non_blocking=True)
        y = b["mask"].cuda(non_blocking=True)
        big = big @ big / 4096  # keeps the stream busy after the copy
        kept.append((x, y, b["windows"], b["augment"]))
    torch.cuda.synchronize()
    assert len(kept) == 16
    check_batches(data, kept, P)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_cuda_batches_arrive_on_the_gpu(data):
    P = 32
    ds = CogDataset(data["images"], data["masks"], patch_size=P,
                    batch_size=4, epoch_length=64, rot90=True,
                    dtype="float32", device="cuda", prefetch=2)
    kept = []
    big = torch.randn(4096, 4096, device="cuda")
    for b in DataLoader(ds, batch_size=None):
        assert b["image"].device.type == "cuda"
        assert b["mask"].device.type == "cuda"
        big = big @ big / 4096
        # used on the consumer's stream right away: must see the copy
        kept.append((b["image"] * 1, b["mask"] * 1, b["windows"], b["augment"]))
    torch.cuda.synchronize()
    assert len(kept) == 16
    check_batches(data, kept, P)


def test_epochs_keep_one_loader_in_the_main_process(data):
    # The main process keeps its loader between epochs (so its readers run
    # into the next epoch); each epoch still equals a fresh loader's, a
    # repeated epoch repeats, and a broken-off epoch restarts from its start.
    kw = dict(patch_size=16, batch_size=3, epoch_length=7, seed=3)
    ds = CogDataset(data["images"], **kw)

    def windows(it):
        return [tuple(int(v) for v in w) for b in it for w in b["windows"]]

    def fresh(e):
        return windows(cogfeed.Loader(data["images"], epoch=e, **kw))

    dl = DataLoader(ds, batch_size=None)
    ds.set_epoch(0)
    assert windows(dl) == fresh(0)
    first = ds._ld
    ds.set_epoch(1)
    assert windows(dl) == fresh(1)
    assert ds._ld is first
    assert windows(dl) == fresh(1)  # set_epoch not called: same epoch again
    it = iter(dl)
    next(it)
    del it
    assert windows(dl) == fresh(1)
    # Two iterators at once do not share a loader.
    a, b = iter(ds), iter(ds)
    assert next(a)["windows"] == next(b)["windows"]
    a.close()
    b.close()
    import pickle
    assert pickle.loads(pickle.dumps(ds))._ld is None
    ds.close()
    assert ds._ld is None


def test_expired_credentials_raise_through_the_dataloader(tmp_path):
    """skip_errors=True through CogDataset and a DataLoader: once the server
    answers 403 AccessDenied (credentials expiring mid-run, here after 20
    requests), iteration raises cogfeed.Error with CF_E_AUTH instead of
    yielding empty batches for ever; no batch before it is empty."""
    make_cog(str(tmp_path / "cog.tif"), expected(512, 512, 0, 0, 1), block=64)
    with Nginx(str(tmp_path)) as srv:
        url = srv.url("cog.tif", fault="after-403-20")
        ds = CogDataset([url], patch_size=64, batch_size=8, sampler="grid",
                        skip_errors=True)
        sizes = []
        with pytest.raises(cogfeed.Error) as err:
            for epoch in range(3):
                ds.set_epoch(epoch)
                for batch in DataLoader(ds, batch_size=None):
                    sizes.append(batch["image"].shape[0])
        ds.close()
    assert isinstance(err.value, PermissionError), err.value
    assert err.value.code == cogfeed.Status.AUTH and "403" in str(err.value), err.value
    assert 0 not in sizes and sum(sizes) < 20, sizes
