"""cogfeed.Upload (cf_upload): one object uploaded by several processes,
to moto (S3 multipart, SigV4 enforced) and Azurite (block blobs) through
the fault proxy; plan_parts, which cuts an object whose byte runs belong
to processes into parts; and the layout writer (Writer(layout_only=True)),
whose header and offsets make the same file as a writer given the tiles.

Two cf_uploads in this process stand for two processes here (each has its
own connections and threads; the token and the receipts are all they
share); tests/python/test_predict_distributed.py runs real ranks."""

import os
import random
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))

import cogfeed  # noqa: E402
from cogfeed.upload import plan_parts  # noqa: E402
from upload_faults import Proxy  # noqa: E402
from test_writer_remote import (  # noqa: E402,F401  (fixtures)
    clean_env, moto, azurite, s3proxy, azproxy, to_store, fetched, assert_nothing_left,
    fast_io, assert_clean)

MiB = 1 << 20


# ---------------------------------------------------------------- plan_parts

def check_plan(runs, min_part, part_size):
    parts = plan_parts(runs, min_part, part_size)
    total = sum(n for _, n in runs)
    at = 0
    for k, p in enumerate(parts):
        assert p.number == k + 1 and p.start == at and p.end > p.start
        if k + 1 < len(parts):
            assert p.end - p.start >= min_part, p
        assert p.end - p.start <= max(part_size, 2 * min_part), p
        # pieces: contiguous runs of one owner, covering the part
        assert p.pieces[0][1] == p.start and p.pieces[-1][2] == p.end
        for (o1, a1, b1), (o2, a2, b2) in zip(p.pieces, p.pieces[1:]):
            assert b1 == a2 and o1 != o2
        owned = {}
        for o, a, b in p.pieces:
            owned[o] = owned.get(o, 0) + b - a
        assert owned[p.rank] == max(owned.values())
        at = p.end
    assert at == total
    # the owners of the pieces are the runs' owners, byte for byte
    flat = []
    pos = 0
    for o, n in runs:  # (adjacent runs of one owner are one)
        if n and flat and flat[-1][0] == o:
            flat[-1] = (o, flat[-1][1], pos + n)
        elif n:
            flat.append((o, pos, pos + n))
        pos += n
    for p in parts:
        for o, a, b in p.pieces:
            assert any(fo == o and fa <= a and b <= fb for fo, fa, fb in flat)
    return parts


def moved(parts):
    return sum(b - a for p in parts for o, a, b in p.pieces if o != p.rank)


def test_plan_parts_long_runs_go_up_from_their_owners():
    # header (rank 0), then per level: rank 0's rows, rank 1's rows; the
    # full resolution's runs are long
    runs = [(0, 20000), (0, 3000), (1, 2500), (0, 400000), (1, 380000),
            (0, 30 * MiB), (1, 28 * MiB)]
    parts = check_plan(runs, 5 * MiB, 8 * MiB)
    # only the bytes before the first part was full travel: at most one
    # min_part in all here (one boundary between short runs and long ones)
    assert moved(parts) <= 5 * MiB
    assert {p.rank for p in parts} == {0, 1}
    # rank 1's long run: its parts are its own but the one it starts in
    assert sum(p.end - p.start for p in parts if p.rank == 1) > 20 * MiB


def test_plan_parts_random():
    rng = random.Random(5)
    for _ in range(300):
        runs = [(rng.randrange(4), rng.choice([0, rng.randrange(1, 100),
                                               rng.randrange(1, 20 * MiB)]))
                for _ in range(rng.randrange(1, 12))]
        if not sum(n for _, n in runs):
            continue
        m = rng.choice([64 << 10, 5 * MiB])  # (at most 3,840 parts: none raised)
        parts = check_plan(runs, m, rng.choice([m, 2 * m, 8 * MiB]))
        # bytes that travel: at most a part's worth per run boundary
        assert moved(parts) <= max(8 * MiB, 2 * m) * len(runs)
    for _ in range(300):  # Azure: blocks of any size
        runs = [(rng.randrange(3), rng.randrange(0, 50)) for _ in range(rng.randrange(1, 9))]
        if sum(n for _, n in runs):
            check_plan(runs, 1, rng.choice([1, 7, 64]))


def test_plan_parts_moves_nothing_between_long_runs():
    """Runs of min_part or more go up from their owners alone: a long run
    is cut so that its rest is not left shorter than a part (the rest
    travelled with the next run's bytes)."""
    for runs in ([(0, 12 * MiB), (1, 25 * MiB), (2, 25 * MiB)],
                 [(0, 9 * MiB), (1, 9 * MiB)],
                 [(0, 5 * MiB), (1, 8 * MiB + 1), (0, 16 * MiB + 3)]):
        parts = check_plan(runs, 5 * MiB, 8 * MiB)
        assert moved(parts) == 0, parts


def test_plan_parts_stays_within_10000_parts():
    parts = plan_parts([(0, 60000 * MiB)], 5 * MiB, 5 * MiB)
    assert len(parts) <= 10000 and parts[-1].end == 60000 * MiB
    # many short runs of any size (Azure): parts span them
    parts = plan_parts([(i % 2, 1) for i in range(20001)], 1, 1)
    assert len(parts) <= 10000 and parts[-1].end == 20001


def test_plan_parts_refuses_bad_input():
    with pytest.raises(ValueError):
        plan_parts([(0, -1)], 5)
    with pytest.raises(ValueError):
        plan_parts([(0, 10)], 0)


# ---------------------------------------------------------------- the layout

@pytest.mark.parametrize("mask", [False, True])
def test_layout_writer_makes_the_file_of_a_writer(tmp_path, mask):
    rng = np.random.default_rng(2)
    W, H = 1300, 900
    a = (rng.random((2, H, W)) * 1000).astype(np.float32)
    valid = np.ones((H, W), np.uint8)
    valid[100:400, 200:700] = 0
    g = cogfeed.Grid(32633, width=W, height=H,
                     geotransform=(500000.0, 10.0, 0.0, 4100000.0, 0.0, -10.0))
    ref = tmp_path / "ref.tif"
    opts = dict(grid=g, bands=2, dtype="float32", compression="zstd", tile_size=256,
                nodata=-1.0, mask=mask)
    with cogfeed.Writer(ref, **opts) as w:
        w.write(a, mask=valid if mask else None)
    with cogfeed.open(str(ref)) as c:
        levels = 1 + len(c.overviews)
        sizes, spots = [], []
        for lv in range(levels):
            lw_, lh_ = (c.width, c.height) if lv == 0 else c.overviews[lv - 1]
            n = -(-lw_ // 256) * -(-lh_ // 256)
            for k in range(n):
                for m in ([False, True] if mask else [False]):
                    t = c.tile_info(k, lv, mask=m)
                    sizes.append(int(t["byte_count"]))
                    spots.append(int(t["offset"]))
    data = ref.read_bytes()
    lw = cogfeed.Writer(tmp_path / "never.tif", overviews_given=True, layout_only=True,
                        **opts)
    assert lw.levels == levels
    header, offsets = lw.layout(sizes)
    lw.close()
    assert "never.tif" not in os.listdir(tmp_path)
    out = bytearray(len(header) + sum(sizes))
    out[:len(header)] = header
    for n, o, at in zip(sizes, offsets, spots):
        if n:
            out[o:o + n] = data[at:at + n]
        else:
            assert o == 0
    assert bytes(out) == data


def test_layout_writer_refusals(tmp_path):
    g = cogfeed.Grid(32633, width=600, height=600,
                     geotransform=(500000.0, 10.0, 0.0, 4100000.0, 0.0, -10.0))
    with pytest.raises(cogfeed.ArgumentError, match="overviews_given"):
        cogfeed.Writer(tmp_path / "x.tif", grid=g, layout_only=True)
    lw = cogfeed.Writer(tmp_path / "x.tif", grid=g, overviews_given=True, layout_only=True,
                        mask=True)
    with pytest.raises(cogfeed.StateError, match="layout writer"):
        lw.write_tile(0, 0, np.zeros((1, 512, 512), np.uint8))
    n = 2 * (4 + 1)  # 2 x 2 tiles and one overview tile, each with its mask
    with pytest.raises(cogfeed.ArgumentError, match="sizes for"):
        lw.layout([10] * (n - 1))
    with pytest.raises(cogfeed.ArgumentError, match="no mask tile"):
        lw.layout([10, 0] + [10] * (n - 2))
    with pytest.raises(cogfeed.ArgumentError, match="a mask for a sparse tile"):
        lw.layout([0, 10] + [10] * (n - 2))
    with pytest.raises(cogfeed.LimitError, match="above"):
        lw.layout([1 << 40] + [10] * (n - 1))
    header, offsets = lw.layout([0] * n)
    assert header[:4] == b"II*\x00" and offsets == [0] * n
    lw.close()
    assert os.listdir(tmp_path) == []
    w = cogfeed.Writer(tmp_path / "y.tif", grid=g, overviews_given=True)
    with pytest.raises(cogfeed.StateError, match="layout writer"):
        w.layout([0] * 5)
    w.abort()
    # a layout writer has no spool: its abort leaves another writer's be
    spool = tmp_path / "z.tif.cogfeed-spool"
    spool.write_bytes(b"another writer's")
    lw = cogfeed.Writer(tmp_path / "z.tif", grid=g, overviews_given=True, layout_only=True)
    lw.abort()
    assert spool.read_bytes() == b"another writer's"


# ---------------------------------------------------------------- the upload

STORES = ["s3", "azure"]


def body(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("store", STORES)
def test_two_processes_put_one_object(store, moto, s3proxy, azurite, azproxy,
                                      monkeypatch):
    url, proxy = to_store(store, monkeypatch, moto, s3proxy, azproxy, "joint.tif")
    parts = [body(5 * MiB + 17, 1), body(5 * MiB, 2), body(5 * MiB + 3, 3), body(1234, 4)]
    first = cogfeed.Upload(url, io=fast_io())
    other = cogfeed.Upload(url, io=fast_io(), token=first.token)
    assert first.min_part == (5 * MiB if store == "s3" else 1)
    # each puts its own, in any order
    first.put(3, parts[2])
    other.put(2, parts[1])
    other.put(4, parts[3])
    first.put(1, parts[0])
    receipts = other.receipts()
    assert len(receipts.splitlines()) == 2 and receipts.startswith("2")
    other.free()
    first.complete([receipts])
    assert fetched(store, moto, azurite, "joint.tif") == b"".join(parts)
    if store == "s3":
        assert len(proxy.requests("POST", "uploads")) == 1  # one upload, begun once
        assert len(proxy.requests("POST", "uploadId")) == 1  # completed once
    with pytest.raises(RuntimeError, match="ended"):
        first.token


@pytest.mark.parametrize("store", STORES)
def test_a_joined_processs_failed_part_leaves_nothing(store, moto, s3proxy, azurite,
                                                      azproxy, monkeypatch):
    """The joined process's part fails every try: its receipts raise (the
    URL named, no secret); the first frees its upload: nothing is left."""
    key = "joint-fail.tif"
    url, proxy = to_store(store, monkeypatch, moto, s3proxy, azproxy, key)
    sel = "PUT?partNumber=2" if store == "s3" else "PUT?comp=block"
    first = cogfeed.Upload(url, io=fast_io())
    other = cogfeed.Upload(url, io=fast_io(), token=first.token)
    first.put(1, body(5 * MiB, 5))
    proxy.set_faults([(sel, 1, "503-always")])
    other.put(2, body(100, 6))
    with pytest.raises(cogfeed.Error) as e:
        other.receipts()
    other.free()
    proxy.set_faults([])
    first.free()
    assert_nothing_left(store, str(e.value), url.split("?")[0], moto, s3proxy, azurite,
                        azproxy, key)


@pytest.mark.parametrize("store", STORES)
def test_receipts_are_checked_before_any_is_taken(store, moto, s3proxy, azurite, azproxy,
                                                  monkeypatch):
    """Receipts come from other processes: malformed ones and a part put
    twice are refused, and the upload is aborted (nothing is left)."""
    key = "joint-receipts.tif"
    url, proxy = to_store(store, monkeypatch, moto, s3proxy, azproxy, key)
    bad = ["x\n", "0 abc\n" if store == "s3" else "0\n", "10001 a\n", "1",
           "2 a\x01b\n" if store == "s3" else "2 etag\n",
           "2\n" if store == "s3" else "2 x\n"]
    for r in bad + ["1 a\n" if store == "s3" else "1\n",
                    "2 a\n2 b\n" if store == "s3" else "2\n2\n"]:
        first = cogfeed.Upload(url, io=fast_io())
        first.put(1, body(5 * MiB, 7))
        with pytest.raises(cogfeed.ArgumentError) as e:
            first.complete([r])
        msg = str(e.value)
        assert "receipt" in msg or "put twice" in msg, msg
        assert_nothing_left(store, msg, url, moto, s3proxy, azurite, azproxy, key)


def test_tokens_are_checked(moto, s3proxy, azurite, azproxy, monkeypatch):
    url, _ = to_store("azure", monkeypatch, moto, s3proxy, azproxy, "t.tif")
    for t in ["", "xyz", "0123456g", "012345678", "ABCDEF01"]:
        with pytest.raises(cogfeed.ArgumentError, match="token"):
            cogfeed.Upload(url, token=t)
    url, _ = to_store("s3", monkeypatch, moto, s3proxy, azproxy, "t.tif")
    for t in ["", "a b", "a\nb", "x" * 1024]:
        with pytest.raises(cogfeed.ArgumentError, match="token"):
            cogfeed.Upload(url, token=t)
    # a token of no open upload: the first part fails, naming the URL
    u = cogfeed.Upload(url, io=fast_io(), token="no-such-upload")
    u.put(1, b"abc")
    with pytest.raises(cogfeed.Error) as e:
        u.receipts()
    assert "s3://out/t.tif" in str(e.value)
    assert_clean(str(e.value), moto.secret)
    u.free()


def test_roles_are_kept(moto, s3proxy, azurite, azproxy, monkeypatch):
    url, _ = to_store("s3", monkeypatch, moto, s3proxy, azproxy, "roles.tif")
    first = cogfeed.Upload(url, io=fast_io())
    other = cogfeed.Upload(url, io=fast_io(), token=first.token)
    with pytest.raises(cogfeed.StateError, match="completes it"):
        first.receipts()
    other.put(1, b"x" * 10)
    other.receipts()
    with pytest.raises(cogfeed.StateError, match="after the receipts"):
        other.put(2, b"y")
    with pytest.raises(cogfeed.StateError, match="only the process that began"):
        other.complete([])
    first.free()
    assert moto.s3.list_multipart_uploads(Bucket="out").get("Uploads", []) == []


@pytest.mark.parametrize("store", STORES)
def test_a_missing_part_is_refused(store, moto, s3proxy, azurite, azproxy, monkeypatch):
    """Parts 1..N without a gap, or the object would lack bytes: a receipt
    not given (here part 2's) is refused and the upload aborted."""
    key = "joint-gap.tif"
    url, proxy = to_store(store, monkeypatch, moto, s3proxy, azproxy, key)
    first = cogfeed.Upload(url, io=fast_io())
    other = cogfeed.Upload(url, io=fast_io(), token=first.token)
    first.put(1, body(5 * MiB, 8))
    other.put(2, body(5 * MiB, 9))
    first.put(3, body(10, 10))
    other.receipts()
    other.free()
    with pytest.raises(cogfeed.ArgumentError, match="part 2 of parts 1..3 missing") as e:
        first.complete([])
    assert_nothing_left(store, str(e.value), url, moto, s3proxy, azurite, azproxy, key)
    # no part at all: no empty object either
    first = cogfeed.Upload(url, io=fast_io())
    with pytest.raises(cogfeed.ArgumentError, match="no part"):
        first.complete([""])
    assert fetched(store, moto, azurite, key) is None


def test_part_numbers_are_checked(moto, s3proxy, azurite, azproxy, monkeypatch):
    url, _ = to_store("s3", monkeypatch, moto, s3proxy, azproxy, "n.tif")
    u = cogfeed.Upload(url, io=fast_io())
    for n in (0, 10001, -1, 2 ** 32 + 1):
        with pytest.raises(ValueError):
            u.put(n, b"x")
    # the binding itself never wraps a number onto another part
    with pytest.raises(OverflowError):
        u._c.put(2 ** 32 + 1, b"x")
    with pytest.raises(OverflowError):
        u._c.put(-1, b"x")
    u.free()
