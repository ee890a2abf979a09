"""len(CogDataset) is the number of batches its DataLoader yields per
epoch (tqdm and OneCycleLR call it), whatever num_workers is: each worker
reads shard rank * W + w of world_size * W, and the length is the sum of
those shards' batches, computed from the sampler; and a DataLoader that
would stack the dataset's batches (batch_size not None) is an error."""
import os
import sys
import warnings

import pytest
import torch
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_loader import make_pair  # noqa: E402

from cogfeed.torch import CogDataset  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("torchlen"))
    return [make_pair(d, "a", 260, 200)[0], make_pair(d, "b", 150, 170, shift=1000)[0]]


# Sample counts that split unevenly over workers, with and without
# drop_last, and the tile-shuffle sampler (which shards in chunks).
CASES = [
    dict(patch_size=32, batch_size=4, epoch_length=50),
    dict(patch_size=32, batch_size=5, epoch_length=37, drop_last=True),
    dict(patch_size=16, batch_size=3, sampler="grid"),
    dict(patch_size=16, batch_size=4, sampler="tile-shuffle", epoch_length=61),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join("%s=%s" % i for i in kw.items()))
@pytest.mark.parametrize("workers", [0, 1, 3])
def test_len_is_the_batches_the_dataloader_yields(data, kw, workers):
    ds = CogDataset(data, **kw)
    dl = DataLoader(ds, batch_size=None, num_workers=workers)
    n = len(dl)
    assert n == len(ds)
    got = sum(1 for _ in dl)
    assert got == n, "len %d, DataLoader yielded %d batches" % (n, got)
    ds.close()


def test_len_depends_on_the_workers(data):
    """50 samples in batches of 4: one reader makes 13 batches, 3 workers
    (17, 17 and 16 samples) make 5 + 5 + 4: len follows the DataLoader
    holding the dataset."""
    ds = CogDataset(data, patch_size=32, batch_size=4, epoch_length=50)
    assert len(ds) == 13
    dl = DataLoader(ds, batch_size=None, num_workers=3)
    assert len(dl) == len(ds) == 14
    assert sum(1 for _ in dl) == 14
    del dl
    assert len(ds) == 13
    ds.close()


def test_torch_and_numpy_dtypes(data):
    import numpy as np
    for dt in (torch.float32, np.float32, np.dtype("float32"), "float32"):
        ds = CogDataset(data, patch_size=32, batch_size=4, epoch_length=4, dtype=dt)
        assert next(iter(DataLoader(ds, batch_size=None)))["image"].dtype == torch.float32
        ds.close()


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("batch_size", [1, 2])
def test_dataloader_batching_batches_is_an_error(data, batch_size, workers):
    """The dataset yields whole batches: a DataLoader with a batch_size
    (its default is 1) would stack them into (N, B, C, H, W).  Its first
    batch raises a TypeError that says to pass batch_size=None: plain
    next(iter(DataLoader(ds))) included (the old warning looked for the
    DataLoader through the garbage collector and missed that one), and
    in a worker too."""
    ds = CogDataset(data, patch_size=32, batch_size=4, epoch_length=8)
    kw = dict(num_workers=workers)
    if workers:
        kw["multiprocessing_context"] = "fork"
    dl = DataLoader(ds, **kw) if batch_size == 1 else DataLoader(ds, batch_size=batch_size, **kw)
    with pytest.raises(TypeError, match=r"batch_size=None.*stacks them into \(%d, 4, 3, 32, 32\)"
                       % batch_size):
        next(iter(dl))
    ds.close()


def test_dataloader_batch_size_none(data):
    ds = CogDataset(data, patch_size=32, batch_size=4, epoch_length=8)
    dl = DataLoader(ds, batch_size=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = next(iter(dl))
        assert tuple(b["image"].shape) == (4, 3, 32, 32)
        assert isinstance(b, dict) and len(b["grid"]) == 4
        assert len(dl) == 2
    ds.close()
