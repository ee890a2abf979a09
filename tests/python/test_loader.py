"""cogfeed.Loader on small COGs written here with GDAL.

Pixel values are a known function of (x, y, band) and every mask is the low
byte of band 1, so that windows, alignment and augmentation can be checked
pixel for pixel.
"""
import json
import multiprocessing as mp
import gc
import os
import sys
import time

import numpy as np
import pytest
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:  # GDAL through rasterio's wheel (docs/conformance.md)
    import rasterio
    from rasterio.windows import Window

    from conformance import write_array as gdal_write
except ImportError:  # a machine without rasterio (e.g. a CUDA box): tifffile
    rasterio = None

import cogfeed

SAMPLERS = ["random", "blocked", "tile-shuffle", "grid"]


def value(x, y, b):
    return ((x * 7 + y * 131 + b * 10007) % 65536).astype(np.uint16)


def make_cog(path, arr, block=128, compress="DEFLATE", gt=(500000, 10, 0,
                                                            4100000, 0, -10)):
    if rasterio is None:
        return make_tiff_without_gdal(path, arr, block, gt)
    return gdal_write(path, arr, "COG", gt, BLOCKSIZE=block,
                      COMPRESS=compress, OVERVIEWS="NONE")


def make_tiff_without_gdal(path, arr, block, gt):
    """The same pixels and geotransform as make_cog, written by tifffile
    (tiled, band-interleaved, uncompressed) where GDAL is missing."""
    import tifffile
    tags = [(33550, 12, 3, (gt[1], -gt[5], 0.0)),          # ModelPixelScale
            (33922, 12, 6, (0.0, 0.0, 0.0, gt[0], gt[3], 0.0))]  # Tiepoint
    if arr.shape[0] == 1:
        tifffile.imwrite(str(path), arr[0], tile=(block, block),
                         photometric="minisblack", extratags=tags)
    else:
        tifffile.imwrite(str(path), arr, tile=(block, block),
                         planarconfig="separate", photometric="minisblack",
                         extratags=tags)
    return str(path)


def expected(w, h, x0, y0, bands=3):
    y, x = np.mgrid[y0:y0 + h, x0:x0 + w]
    return np.stack([value(x, y, b) for b in range(bands)])


def make_pair(d, name, w, h, block=128, bands=3, shift=0):
    img = expected(w, h, shift, 0, bands)
    ip = make_cog(os.path.join(d, name + ".tif"), img, block)
    mp_ = make_cog(os.path.join(d, name + "_mask.tif"),
                   (img[:1] & 0xFF).astype(np.uint8), block)
    return ip, mp_


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("loader"))
    a = make_pair(d, "a", 300, 260)
    b = make_pair(d, "b", 200, 330, shift=1000)
    return {"dir": d, "images": [a[0], b[0]], "masks": [a[1], b[1]],
            "shifts": [0, 1000], "sizes": [(300, 260), (200, 330)]}


def undo_aug(arr, a):
    """The un-augmented patch from an augmented one (numpy reference)."""
    if a & 4:
        arr = np.flip(arr, -1)
    return np.rot90(arr, -(a & 3), axes=(-2, -1))


def check_batch(data, batch, P, exact=True):
    img, msk = batch["image"], batch["mask"]
    assert img.shape[1:] == (3, P, P) and msk.shape[1:] == (1, P, P)
    assert img.shape[0] == msk.shape[0] == len(batch["windows"])
    for i, (f, x, y, w, h) in enumerate(batch["windows"]):
        assert (w, h) == (P, P)
        # the mask is the low byte of band 1 wherever the pixels went
        np.testing.assert_array_equal(msk[i, 0], img[i, 0] & 0xFF)
        if exact:
            want = expected(P, P, x + data["shifts"][f], y)
            got = undo_aug(img[i], batch["augment"][i])
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_windows_in_bounds_deterministic_and_values(data, sampler):
    P = 48
    kw = dict(patch_size=P, batch_size=5, sampler=sampler, seed=3,
              epoch_length=60)
    a = cogfeed.Loader(data["images"], data["masks"], **kw)
    b = cogfeed.Loader(data["images"], data["masks"], **kw)
    wins_a = []
    for batch in a:
        check_batch(data, batch, P)
        wins_a += batch["windows"]
    assert len(wins_a) == a.layout["samples"]
    wins_b = [w for batch in b for w in batch["windows"]]
    assert wins_a == wins_b
    for j, (f, x, y, w, h) in enumerate(wins_a):
        W, H = data["sizes"][f]
        assert 0 <= x and x + w <= W and 0 <= y and y + h <= H
        if sampler in ("blocked", "tile-shuffle"):
            assert x // 128 == (x + w - 1) // 128
            assert y // 128 == (y + h - 1) // 128
    # window(j) predicts the stream without reading
    a.set_epoch(0)
    assert [a.window(j)[0] for j in range(len(wins_a))] == wins_a


def test_blocked_patch_larger_than_tile_is_grid_aligned(data):
    ld = cogfeed.Loader(data["images"], patch_size=256, batch_size=2,
                        sampler="blocked", epoch_length=10)
    for batch in ld:
        for f, x, y, w, h in batch["windows"]:
            assert x % 128 == 0 and y % 128 == 0


def test_grid_covers_every_pixel(data):
    P = 64
    ld = cogfeed.Loader(data["images"], data["masks"], patch_size=P,
                        batch_size=7, sampler="grid", stride=50)
    cover = [np.zeros((h, w), bool) for w, h in data["sizes"]]
    n = 0
    for batch in ld:
        check_batch(data, batch, P)
        for f, x, y, w, h in batch["windows"]:
            cover[f][y:y + h, x:x + w] = True
            n += 1
    assert all(c.all() for c in cover)
    assert n == ld.layout["samples"]


def test_augmentation_consistent_with_numpy(data):
    P = 40
    ld = cogfeed.Loader(data["images"], data["masks"], patch_size=P,
                        batch_size=8, flip=True, rot90=True, seed=5,
                        epoch_length=64)
    codes = set()
    for batch in ld:
        check_batch(data, batch, P)
        codes |= set(batch["augment"])
    assert codes == set(range(8))


def test_flip_only_uses_flips(data):
    ld = cogfeed.Loader(data["images"], data["masks"], patch_size=32,
                        batch_size=8, flip=True, epoch_length=64)
    codes = set()
    for batch in ld:
        check_batch(data, batch, 32)
        codes |= set(batch["augment"])
    assert codes == {0, 2, 4, 6}


def test_resume_continues_exactly(data):
    kw = dict(patch_size=32, batch_size=4, seed=11, epoch_length=40,
              flip=True)
    full = cogfeed.Loader(data["images"], data["masks"], **kw)
    ref = [(b["windows"], b["image"].copy()) for b in full]
    part = cogfeed.Loader(data["images"], data["masks"], **kw)
    it = iter(part)
    for _ in range(3):
        next(it)
    state = part.state_dict()
    assert state["batch"] == 3 and state["epoch"] == 0
    json.dumps(state)  # checkpointable
    resumed = cogfeed.Loader(data["images"], data["masks"], **kw)
    resumed.load_state_dict(state)
    rest = [(b["windows"], b["image"].copy()) for b in resumed]
    assert len(rest) == len(ref) - 3
    for (wa, ia), (wb, ib) in zip(ref[3:], rest):
        assert wa == wb
        np.testing.assert_array_equal(ia, ib)
    # A loader whose stream differs refuses the state, naming why.
    for change, why in ((dict(seed=12), "seed=11"),
                        (dict(batch_size=8), "batch_size=4"),
                        (dict(epoch_length=80), "epoch_length=40"),
                        (dict(flip=False), "flip=True")):
        other = cogfeed.Loader(data["images"], data["masks"],
                               **dict(kw, **change))
        with pytest.raises(ValueError, match=why):
            other.load_state_dict(state)
    swapped = cogfeed.Loader(data["images"][::-1], data["masks"][::-1], **kw)
    with pytest.raises(ValueError, match="the files"):
        swapped.load_state_dict(state)
    # A state from an older version (epoch and batch only) still loads.
    resumed = cogfeed.Loader(data["images"], data["masks"], **kw)
    resumed.load_state_dict({"epoch": 0, "batch": 3})
    assert [b["windows"] for b in resumed] == [w for w, _ in ref[3:]]


def test_epochs_advance_and_set_epoch_repeats(data):
    ld = cogfeed.Loader(data["images"], patch_size=32, batch_size=4,
                        epoch_length=20)
    e0 = [w for b in ld for w in b["windows"]]
    assert ld.epoch == 1
    e1 = [w for b in ld for w in b["windows"]]
    assert e0 != e1 and len(e0) == len(e1) == 20
    ld.set_epoch(0)
    assert [w for b in ld for w in b["windows"]] == e0
    assert len(ld) == 5


def test_float32_scale_and_normalisation(data):
    mean, std = [100.0, 200.0, 300.0], [2.0, 4.0, 8.0]
    ld = cogfeed.Loader(data["images"][:1], patch_size=16, batch_size=3,
                        dtype="float32", mean=mean, std=std, epoch_length=6)
    for batch in ld:
        assert batch["image"].dtype == np.float32
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            raw = expected(16, 16, x, y).astype(np.float32)
            want = (raw - np.array(mean, np.float32)[:, None, None]) / \
                np.array(std, np.float32)[:, None, None]
            np.testing.assert_allclose(batch["image"][i], want, rtol=1e-6)
    # Checked in C (the length of mean / std against the channels).
    with pytest.raises(cogfeed.Error, match="one value per output channel"):
        cogfeed.Loader(data["images"][:1], dtype="float32", mean=[1.0])
    with pytest.raises(cogfeed.Error, match=r"channel \(3\), not 3 / 4"):
        cogfeed.Loader(data["images"][:1], dtype="float32",
                       mean=[1.0, 2.0, 3.0], std=[1.0] * 4)
    with pytest.raises(cogfeed.Error, match="float32"):
        cogfeed.Loader(data["images"][:1], mean=[1.0, 2.0, 3.0])


def test_band_selection(data):
    ld = cogfeed.Loader(data["images"], patch_size=16, batch_size=2,
                        bands=[3, 1], epoch_length=4)
    for batch in ld:
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            e = expected(16, 16, x + data["shifts"][f], y)
            np.testing.assert_array_equal(batch["image"][i], e[[2, 0]])


def test_lists_changed_by_python_code_while_parsed(data):
    """The C constructor converts each path with __fspath__, which runs
    Python code: one that empties the list being read changes nothing (it
    used to read a freed list and crash).  cogfeed.Loader hands it lists
    of its own; this calls it with the caller's list directly."""
    from cogfeed import _cogfeed
    ref = cogfeed.Loader(data["images"], patch_size=16, batch_size=2,
                         epoch_length=4, seed=3)
    images = list(data["images"])

    class Path:
        def __init__(self, p):
            self.p = p

        def __fspath__(self):
            images.clear()
            gc.collect()
            return self.p

    images[0] = Path(images[0])
    kw = dict(ref._kw, images=images)
    ld = _cogfeed._Loader(**kw)
    assert not images
    assert ld.layout() == ref._ld.layout()
    ld.close()


def test_time_series_and_extra_layers(tmp_path):
    d = str(tmp_path)
    t0 = make_cog(os.path.join(d, "t0.tif"), expected(150, 140, 0, 0, 2))
    t1 = make_cog(os.path.join(d, "t1.tif"), expected(150, 140, 5000, 0, 2))
    dem = make_cog(os.path.join(d, "dem.tif"), expected(150, 140, 9, 9, 1))
    ld = cogfeed.Loader([[t0, t1]], layers=[[dem]], patch_size=20,
                        batch_size=3, epoch_length=6)
    assert ld.layout["channels"] == 3 and ld.layout["time_steps"] == 2
    for batch in ld:
        img = batch["image"]
        assert img.shape == (3, 2, 3, 20, 20)
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            np.testing.assert_array_equal(img[i, 0, :2],
                                          expected(20, 20, x, y, 2))
            np.testing.assert_array_equal(img[i, 1, :2],
                                          expected(20, 20, x + 5000, y, 2))
            for t in range(2):
                np.testing.assert_array_equal(
                    img[i, t, 2], expected(20, 20, x + 9, y + 9, 1)[0])
    # A layer of another dtype stacks only into float32 output.
    lc = make_cog(os.path.join(d, "lc.tif"),
                  (expected(150, 140, 0, 0, 1) & 0xFF).astype(np.uint8))
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.Loader([t0], layers=[[lc]], patch_size=20)
    assert ("layer 0 (%s) is uint8 but the images (%s) are uint16: use "
            "float32 output" % (lc, t0)) in str(ei.value)
    ld = cogfeed.Loader([t0], layers=[[lc]], patch_size=20, batch_size=2,
                        epoch_length=2, dtype="float32")
    for batch in ld:
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            np.testing.assert_array_equal(
                batch["image"][i, 2], expected(20, 20, x, y, 1)[0] & 0xFF)


@pytest.mark.parametrize("dtype", ["raw", "float32"])
def test_long_time_series_reads_in_groups(tmp_path, dtype):
    # 70 scenes and a mask are more chunks than one batch holds (64): they
    # go in several, and with patches crossing 16 px tiles a batch ends
    # where the next part's chunks no longer fit, at a varying part.
    d, T = str(tmp_path), 70
    steps = [make_cog(os.path.join(d, "t%02d.tif" % t),
                      expected(48, 40, 100 * t, 0, 1), block=16)
             for t in range(T)]
    mask = make_cog(os.path.join(d, "m.tif"),
                    (expected(48, 40, 0, 0, 1) & 0xFF).astype(np.uint8),
                    block=16)
    kw = dict(dtype="float32", mean=[3.0], std=[2.0]) if dtype == "float32" \
        else {}
    ld = cogfeed.Loader([steps], masks=[mask], patch_size=12, batch_size=4,
                        epoch_length=8, seed=3, **kw)
    assert ld.layout["time_steps"] == T
    n = 0
    for batch in ld:
        img = batch["image"]
        assert img.shape == (4, T, 1, 12, 12)
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            for t in range(T):
                want = expected(12, 12, x + 100 * t, y, 1)[0]
                if dtype == "float32":
                    want = (want.astype(np.float32) - 3) / 2
                np.testing.assert_array_equal(img[i, t, 0], want)
            np.testing.assert_array_equal(
                batch["mask"][i, 0], expected(12, 12, x, y, 1)[0] & 0xFF)
            n += 1
    assert n == 8


def test_misaligned_mask_is_read_onto_the_image_grid(tmp_path, data):
    """A mask 1 px (10 m) east of its image, and one of another size on
    the same grid, are read where they lie on the image's grid (old code:
    refused as "not aligned"); outside them the mask is 0 (no nodata)."""
    other = make_cog(os.path.join(str(tmp_path), "shifted.tif"),
                     expected(300, 260, 0, 0, 1),
                     gt=(500010, 10, 0, 4100000, 0, -10))
    smaller = data["masks"][1]  # 200 x 330, same origin as image a
    for mask, x0, (mw, mh) in ((other, -1, (300, 260)), (smaller, 0, (200, 330))):
        with cogfeed.Loader(data["images"][:1], masks=[mask], patch_size=32,
                            batch_size=8, sampler="grid") as ld:
            n = 0
            for batch in ld:
                for i, (f, x, y, w, h) in enumerate(batch["windows"]):
                    yy, xx = np.mgrid[y:y + h, x:x + w]
                    mx = xx + x0
                    inside = (mx >= 0) & (mx < mw) & (yy < mh)
                    src = expected(mw, mh, 0, 0, 1)[0]
                    if mask is smaller:
                        src = (expected(mw, mh, 1000, 0, 1)[0] & 0xFF)
                    want = np.where(inside, src[np.clip(yy, 0, mh - 1),
                                                np.clip(mx, 0, mw - 1)], 0)
                    np.testing.assert_array_equal(batch["mask"][i, 0], want)
                    n += 1
            assert n == len(ld) * 8 or n > 0
    with pytest.raises(ValueError, match="masks"):
        cogfeed.Loader(data["images"], masks=data["masks"][:1])


def _corrupt_tiles(path):
    """Overwrite the second half of the file's tile data with garbage (the
    header stays valid, so the file opens and goes bad on reading)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(bytes([0xA5]) * (size - size // 2))


def _drain(ld):
    """One epoch, going on past failed batches: the windows of every batch
    delivered, and the errors raised."""
    batches, errors = [], []
    it = iter(ld)
    while True:
        try:
            b = next(it)
        except StopIteration:
            return batches, errors
        except cogfeed.Error as e:
            errors.append(e)
            continue
        batches.append(list(b["windows"]))


@pytest.mark.parametrize("skip", [False, True])
def test_bad_file_mid_epoch(tmp_path, data, skip):
    if rasterio is None:
        pytest.skip("corrupts DEFLATE tiles: needs GDAL's writer")
    bad = make_cog(os.path.join(str(tmp_path), "bad.tif"),
                   expected(256, 256, 0, 0, 3))
    ld = cogfeed.Loader([data["images"][0], bad], patch_size=64,
                        batch_size=4, sampler="grid", skip_errors=skip)
    _corrupt_tiles(bad)
    batches, errs = _drain(ld)
    got = sum(len(w) for w in batches)
    errors = [str(e) for e in errs]
    st = ld.stats()
    if skip:
        assert not errors
        assert st["skipped"] > 0
        assert got + st["skipped"] == ld.layout["samples"]
    else:
        assert errors and st["skipped"] == 0
        assert all("bad.tif" in e and "window" in e for e in errors)
        assert got < ld.layout["samples"]


def _rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def test_slow_consumer_memory_bounded(tmp_path):
    big = make_cog(os.path.join(str(tmp_path), "big.tif"),
                   expected(1024, 1024, 0, 0, 3), block=256)
    P, B, prefetch = 128, 8, 3
    ld = cogfeed.Loader([big], patch_size=P, batch_size=B, prefetch=prefetch,
                        epoch_length=B * 120)
    batch_bytes = B * 3 * P * P * 2
    it = iter(ld)
    next(it)
    base = _rss_mb()
    peak = base
    taken = 1
    for b in it:
        taken += 1
        st = ld.stats()
        # readers never get more than the ring's worth ahead of the consumer
        assert st["bytes_decoded"] <= (taken + prefetch) * batch_bytes
        peak = max(peak, _rss_mb())
        if taken % 10 == 0:
            time.sleep(0.02)
    delivered = ld.stats()["bytes_delivered"] / 2**20
    assert delivered > 80
    assert peak - base < 40, (base, peak, delivered)


def test_copy_gives_independent_arrays(data):
    ld = cogfeed.Loader(data["images"], patch_size=16, batch_size=2,
                        epoch_length=8, copy=True)
    batches = list(ld)
    for b in batches:
        for i, (f, x, y, w, h) in enumerate(b["windows"]):
            np.testing.assert_array_equal(
                b["image"][i], expected(16, 16, x + data["shifts"][f], y))


def test_fixed_inflight_and_stats(data):
    ld = cogfeed.Loader(data["images"], data["masks"], patch_size=32,
                        batch_size=4, concurrency=2, epoch_length=16)
    n = sum(len(b["windows"]) for b in ld)
    st = ld.stats()
    assert n == 16 and st["samples"] == 16 and st["concurrency"] == 2
    # The old name of concurrency still works, and says it is old.
    with pytest.warns(DeprecationWarning, match="concurrency"):
        old = cogfeed.Loader(data["images"], patch_size=32, batch_size=4,
                             max_inflight=3, epoch_length=8)
    next(iter(old))
    assert old.stats()["concurrency"] == 3
    old.close()
    for k in ("bytes_fetched", "bytes_decoded", "bytes_delivered", "requests",
              "retries", "io_inflight", "cache_hit_rate", "wait_s",
              "read_busy_s", "convert_busy_s"):
        assert k in st
    assert st["bytes_delivered"] == 16 * (3 * 32 * 32 * 2 + 32 * 32)


def test_local_reads_are_counted(tmp_path):
    """Local files count in the io's and the loader's requests /
    bytes_fetched as remote ones do: one read of each tile's bytes."""
    if rasterio is None:
        pytest.skip("GDAL reports the tile byte counts")
    p = make_cog(tmp_path / "g.tif", expected(256, 256, 0, 0), 128)
    with rasterio.open(p) as ds:
        tile = [ds.block_size(1, y, x) for y in range(2) for x in range(2)]
    io = cogfeed.IO()
    cog = cogfeed.open(p, io=io)
    st0 = io.stats()
    assert st0["requests"] == 1
    assert st0["bytes_fetched"] == min(65536, os.path.getsize(p))  # header
    cog.read((0, 0, 256, 256))
    st1 = io.stats()
    assert st1["requests"] - st0["requests"] == 4 == cog.requests - 1
    assert st1["bytes_fetched"] - st0["bytes_fetched"] == sum(tile)
    # The loader's stats are its io's: the first tile, read at least once
    # (readers may already be reading the next epoch).
    ld = cogfeed.Loader([p], patch_size=128, batch_size=1, sampler="grid",
                        dtype="raw", epoch_length=1)
    st0 = ld.stats()
    assert [tuple(b["windows"][0]) for b in ld] == [(0, 0, 0, 128, 128)]
    st1 = ld.stats()
    assert st1["requests"] - st0["requests"] >= 1
    assert st1["bytes_fetched"] - st0["bytes_fetched"] >= tile[0]


def test_tile_shuffle_reuses_decoded_tiles(data):
    ld = cogfeed.Loader(data["images"], data["masks"], patch_size=32,
                        batch_size=8, sampler="tile-shuffle",
                        epoch_length=128)
    for batch in ld:
        check_batch(data, batch, 32)
    st = ld.stats()
    assert st["cache_hit_rate"] > 0.5


def test_from_config(tmp_path, data):
    cfg = {"images": data["images"], "masks": data["masks"],
           "patch_size": 32, "batch_size": 4, "sampler": "blocked",
           "concurrency": None, "decode_threads": 2, "cache_bytes": 1 << 24,
           "dtype": "float32", "prefetch": 2, "seed": 1,
           "variant": "/somewhere/lerc_zstd_512"}
    p = tmp_path / "best.json"
    p.write_text(json.dumps(cfg))
    ld = cogfeed.Loader.from_config(str(p), epoch_length=8)
    batches = list(ld)
    assert len(batches) == 2 and batches[0]["image"].dtype == np.float32
    assert batches[0]["image"].shape == (4, 3, 32, 32)
    with pytest.raises(ValueError, match="patch_sise"):
        cogfeed.Loader.from_config(dict(cfg, patch_sise=3))


def _child(images, q):
    try:
        ld = cogfeed.Loader(images, patch_size=16, batch_size=2,
                            epoch_length=6)
        q.put(sum(len(b["windows"]) for b in ld))
    except Exception as e:  # reported to the parent
        q.put(repr(e))


def test_loader_created_in_forked_child(data):
    parent = cogfeed.Loader(data["images"], patch_size=16, batch_size=2,
                            epoch_length=6)
    next(iter(parent))  # parent has running reader threads
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(data["images"], q))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert q.get(timeout=5) == 6
    assert sum(len(b["windows"]) for b in parent) == 4


_MANY_FILES_CHILD = r"""
import json, os, resource, sys
import numpy as np
import cogfeed
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
images, masks = json.loads(sys.argv[1])
ld = cogfeed.Loader(images, masks, patch_size=32, batch_size=8, seed=3,
                    epoch_length=400)
os.chdir("/")
most, out = 0, []
for b in ld:
    most = max(most, len(os.listdir("/proc/self/fd")))
    out.append([list(map(int, w)) + [int(b["image"][i].astype(np.int64).sum()),
                                     int(b["mask"][i].astype(np.int64).sum())]
                for i, w in enumerate(b["windows"])])
print(json.dumps({"most": most, "batches": out}))
"""


def test_more_files_than_descriptors(tmp_path, data):
    """600 local files under ulimit -n 128: the loader keeps at most a
    quarter of the limit open (32) and reads every patch right; before, it
    failed at open with "Too many open files".  The files alternate
    between two different scenes (and are given relative to a folder the
    child leaves after opening them), so a reopen of the wrong file or
    path would show in the pixels."""
    import shutil
    import subprocess
    import sys
    images, masks = [], []
    for i in range(300):
        images.append("a%03d.tif" % i)
        masks.append("a%03d_mask.tif" % i)
        shutil.copyfile(data["images"][i % 2], str(tmp_path / images[-1]))
        shutil.copyfile(data["masks"][i % 2], str(tmp_path / masks[-1]))
    r = subprocess.run([sys.executable, "-c", _MANY_FILES_CHILD,
                        json.dumps([images, masks])], cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(
                           os.path.dirname(os.path.abspath(cogfeed.__file__)))),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    # a few descriptors of Python's own, 32 files, one per reader at most
    assert got["most"] < 80, got["most"]
    files = set()
    for batch in got["batches"]:
        for f, x, y, w, h, isum, msum in batch:
            files.add(f)
            want = expected(w, h, x + data["shifts"][f % 2], y)
            assert isum == int(want.astype(np.int64).sum())
            assert msum == int((want[0] & 0xFF).astype(np.int64).sum())
    assert len(files) > 200  # most files were read, so most were reopened


def test_bad_arguments(data):
    with pytest.raises(ValueError, match="sampler"):
        cogfeed.Loader(data["images"], sampler="nope")
    with pytest.raises(cogfeed.Error, match="band 9"):
        cogfeed.Loader(data["images"], bands=[9])
    with pytest.raises(cogfeed.Error, match="rank"):
        cogfeed.Loader(data["images"], rank=2, world_size=2)
    with pytest.raises(cogfeed.Error, match="nope.tif"):
        cogfeed.Loader(["/nonexistent/nope.tif"])
    # Names that are not UTF-8 (POSIX paths are bytes), or long ones with
    # "..." cut between characters, still give cogfeed.Error naming them.
    with pytest.raises(cogfeed.Error, match="nope\ufffd.tif") as e:
        cogfeed.open("/nonexistent/nope\udcff.tif")
    assert e.value.code == cogfeed.Status.NOTFOUND
    assert isinstance(e.value, FileNotFoundError)
    with pytest.raises(cogfeed.Error, match="\\.\\.\\.\u00e9+/x.tif"):
        cogfeed.Loader(["/nonexistent/a" + "\u00e9" * 150 + "/x.tif"])
    # Values out of range are refused by the C side's one table, before
    # they are narrowed (unsigned fields: a stride of -5 used to wrap to a
    # huge one and skip pixels).
    for kw, msg in ((dict(stride=-5), "stride -5 not in"),
                    (dict(patch_size=-1), "patch_size -1 not in"),
                    (dict(batch_size=0), "batch_size 0 not in"),
                    (dict(prefetch=65), "prefetch 65 not in"),
                    (dict(inflight_bytes=-1), "inflight_bytes -1 not in"),
                    (dict(decode_threads=5000), "threads 5000 not in"),
                    (dict(concurrency=-2), "concurrency -2 not in"),
                    (dict(skip_limit=1.5), "skip_limit 1.5 not in"),
                    (dict(error_threshold=-1), "error_threshold -1 not in"),
                    # epochs are counted, not hashed: -1 used to wrap to
                    # 2^64 - 1 silently ("K")
                    (dict(epoch=-1), "epoch -1 not in"),
                    (dict(epoch_length=-3), "epoch_length -3 not in")):
        with pytest.raises(ValueError, match=msg):
            cogfeed.Loader(data["images"], sampler="grid", **kw)
    with pytest.raises(ValueError, match="weights: 1 values for 2 image"):
        cogfeed.Loader(data["images"], weights=[1.0])
    with cogfeed.Loader(data["images"], sampler="grid") as ld:
        with pytest.raises(ValueError, match="epoch -1 is negative"):
            ld.set_epoch(-1)
        with pytest.raises(ValueError, match="batch -2 is negative"):
            ld._ld.set_epoch(0, -2)
    # seed: any int, a negative one modulo 2^64 as torch.manual_seed does
    a = cogfeed.Loader(data["images"], seed=-1, batch_size=2)
    b = cogfeed.Loader(data["images"], seed=2 ** 64 - 1, batch_size=2)
    assert a.window(0) == b.window(0)
    a.close()
    b.close()
    with pytest.raises(ValueError, match="level -1 not in .*full resolution"):
        cogfeed.Loader(data["images"], level=-1)
    # A level the files lack: named once, with the levels they have.
    with pytest.raises(cogfeed.Error) as e:
        cogfeed.Loader(data["images"], level=2)
    msg = str(e.value)
    assert msg.count(data["images"][0]) == 1, msg
    assert "level 2 does not exist: the file has no overviews" in msg, msg


def test_masks_and_layers_need_the_overviews(tmp_path):
    if rasterio is None:
        pytest.skip("GDAL writes the overviews")
    img = expected(256, 256, 0, 0, 1)
    ip = str(tmp_path / "i.tif")
    gdal_write(ip, img[:1], "COG", BLOCKSIZE=128, OVERVIEWS="AUTO",
               OVERVIEW_COUNT=2)
    mp = make_cog(tmp_path / "m.tif", (img[:1] & 0xFF).astype(np.uint8), 128)
    with pytest.raises(cogfeed.Error, match="no georeferencing"):
        cogfeed.Loader([ip], [mp], patch_size=32, level=1)
    # Read pixel for pixel (the image has no geotransform), the mask needs
    # the level.
    with pytest.raises(cogfeed.Error) as e:
        cogfeed.Loader([ip], [mp], patch_size=32, level=1, ungeoreferenced=True)
    msg = str(e.value)
    assert "m.tif: level 1 does not exist: the file has no overviews" in msg
    assert "a mask needs the overviews its image has" in msg, msg
    with pytest.raises(cogfeed.Error, match="levels 0..2 \\(full resolution "
                       "and 2 overviews\\)"):
        cogfeed.open(ip).read((0, 0, 8, 8), level=3)
    # Overviews of an odd size made by two tools round differently (the COG
    # driver down, gdaladdo up): the message says at which level.
    gt = (500000, 10, 0, 4100000, 0, -10)
    odd = np.zeros((1, 777, 1000), np.uint8)
    oi, om = str(tmp_path / "oi.tif"), str(tmp_path / "om.tif")
    gdal_write(oi, odd, "COG", gt, BLOCKSIZE=128, OVERVIEWS="AUTO",
               OVERVIEW_COUNT=1)
    gdal_write(om, odd, "GTiff", gt, TILED="YES")
    with rasterio.open(om, "r+") as ds:
        ds.build_overviews([2], rasterio.enums.Resampling.nearest)
    # Georeferenced, the mask is read onto the image's level-1 grid (the
    # overview GDAL picks), as cog.read(grid=...) reads it.
    with cogfeed.Loader([oi], [om], patch_size=32, level=1, batch_size=4,
                        sampler="grid") as ld:
        b = next(iter(ld))
        with cogfeed.open(om) as c:
            for i in range(len(b["windows"])):
                exp = c.read(grid=b["grid"][i], resampling="nearest")
                np.testing.assert_array_equal(b["mask"][i], exp)
    # Pixel for pixel (ungeoreferenced), the sizes must agree: the message
    # says at which level.
    om2 = str(tmp_path / "om2.tif")
    gdal_write(om2, odd, "GTiff", None, TILED="YES")
    with rasterio.open(om2, "r+") as ds:
        ds.build_overviews([2], rasterio.enums.Resampling.nearest)
    with pytest.raises(cogfeed.Error) as e:
        cogfeed.Loader([oi], [om2], patch_size=32, level=1, ungeoreferenced=True)
    assert ("size 500x389 vs 500x388, and without georeferencing only the "
            "size can place it; at level 1 (overviews made by "
            "different tools") in str(e.value), str(e.value)


def test_one_bit_mask_file_reads_as_gdal_does(tmp_path):
    """A 1-bit mask file gives 0/1 bytes (as GDAL and rasterio read it)."""
    if rasterio is None:
        pytest.skip("GDAL writes 1-bit files")
    ip = make_cog(tmp_path / "i.tif", expected(256, 256, 0, 0, 1), 128)
    bits = (expected(256, 256, 0, 0, 1)[0] % 3 == 0).astype(np.uint8)
    mp = str(tmp_path / "m.tif")
    gdal_write(mp, bits[None], "GTiff", (500000, 10, 0, 4100000, 0, -10),
               TILED="YES", NBITS=1, BLOCKXSIZE=128, BLOCKYSIZE=128)
    with rasterio.open(mp) as ds:
        ref = ds.read(1)
    assert set(np.unique(ref)) == {0, 1}
    ld = cogfeed.Loader([ip], [mp], patch_size=64, batch_size=4,
                        sampler="grid", flip=True, rot90=True)
    n = 0
    for b in ld:
        for i, (f, x, y, w, h) in enumerate(b["windows"]):
            got = undo_aug(b["mask"][i], b["augment"][i])
            np.testing.assert_array_equal(got[0], ref[y:y + h, x:x + w])
            n += 1
    assert n == 16


def test_caller_buffers_receive_the_batches(data):
    P, B = 24, 3
    ld = cogfeed.Loader(data["images"], data["masks"], patch_size=P,
                        batch_size=B, prefetch=2, epoch_length=12)
    lay = ld.layout
    assert lay["image_bytes"] == B * 3 * P * P * 2
    bufs = [(np.zeros(lay["image_bytes"], np.uint8),
             np.zeros(lay["mask_bytes"], np.uint8)) for _ in range(2)]
    for slot, (im, mk) in enumerate(bufs):
        ld.set_buffers(slot, im, mk)
    with pytest.raises(ValueError, match="too small"):
        ld.set_buffers(0, np.zeros(10, np.uint8), bufs[0][1])
    for batch in ld:
        check_batch(data, batch, P)
        owner = bufs[batch["index"] % 2][0].view(np.uint16).reshape(
            B, 3, P, P)
        assert np.shares_memory(batch["image"], owner)
        np.testing.assert_array_equal(batch["image"], owner)
    with pytest.raises(cogfeed.Error, match="before reading"):
        ld2 = cogfeed.Loader(data["images"], patch_size=P, batch_size=B,
                             epoch_length=12)
        next(iter(ld2))
        ld2.set_buffers(1, bufs[1][0])


def test_weights_choose_files(data):
    ld = cogfeed.Loader(data["images"], patch_size=16, batch_size=10,
                        weights=[1.0, 1e-12], epoch_length=50)
    files = {w[0] for b in ld for w in b["windows"]}
    assert files == {0}
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.Loader(data["images"], weights=[1.0, 0.0])
    assert "weight of file 1 (%s) must be a finite number > 0, not 0" % \
        data["images"][1] in str(ei.value)


def _use_inherited(ld, q):
    try:
        next(iter(ld))
        q.put("no error")
    except cogfeed.Error as e:
        q.put(str(e))
    ld.close()  # and freeing it in the child must not hang
    del ld
    q.put("freed")


def test_inherited_loader_is_refused_in_child(data):
    ld = cogfeed.Loader(data["images"], patch_size=16, batch_size=2,
                        epoch_length=6)
    next(iter(ld))
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_use_inherited, args=(ld, q))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert "create a loader in each process" in q.get(timeout=5)
    assert q.get(timeout=5) == "freed"
    assert sum(len(b["windows"]) for b in ld) == 4


def test_overview_level_matches_gdal(tmp_path):
    if rasterio is None:
        pytest.skip("needs GDAL")
    p = os.path.join(str(tmp_path), "ov.tif")
    arr = expected(512, 400, 0, 0, 2)
    gdal_write(p, arr, "COG", BLOCKSIZE=128, COMPRESS="DEFLATE",
               OVERVIEWS="AUTO", OVERVIEW_COUNT=2)
    ov = rasterio.open(p, overview_level=0)
    ld = cogfeed.Loader([p], patch_size=32, batch_size=4, level=1,
                        sampler="grid")
    n = 0
    for batch in ld:
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            assert x + w <= ov.width and y + h <= ov.height
            np.testing.assert_array_equal(
                batch["image"][i], ov.read(window=Window(x, y, w, h)))
            n += 1
    assert n == ld.layout["samples"] > 0
    with pytest.raises(cogfeed.Error, match="level"):
        cogfeed.Loader([p], level=5)


# -- over HTTP (the project's nginx, 127.0.0.1) ----------------------------

def _servers():
    import sys
    d = os.path.join(os.environ.get(
        "CF_SOURCE_DIR",
        os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))), "tests", "servers")
    if d not in sys.path:
        sys.path.insert(0, d)
    import servers
    return servers


@pytest.fixture(scope="module")
def remote(data):
    import shutil
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        pytest.skip("nginx not installed")
    with _servers().Nginx(data["dir"], latency_ms=30) as srv:
        yield srv


def test_remote_values_and_adaptive_concurrency(data, remote):
    urls = [remote.url(os.path.basename(p)) for p in data["images"]]
    murls = [remote.url(os.path.basename(p)) for p in data["masks"]]
    # No decoded-tile cache: random patches of these small files would
    # soon all be served from it (no reads to wait on), and what is tested
    # here is the controller under latency-bound reads.
    ld = cogfeed.Loader(urls, murls, patch_size=32, batch_size=8,
                        epoch_length=8 * 60, flip=True, cache_bytes=0)
    # The controller's starting point (readers start with the first
    # batch), and the most it reached: it may grow before the first batch
    # and give a few readers back once the cores are busy.
    start = top = ld.stats()["concurrency"]
    cpu0 = _machine_cpu()
    for batch in ld:
        check_batch(data, batch, 32)
        top = max(top, ld.stats()["concurrency"])
    cpu1 = _machine_cpu()
    st = ld.stats()
    assert st["requests"] > 0 and st["bytes_fetched"] > 0
    # Latency-bound reads: the slow start raised the concurrency.  The
    # controller grows only while the machine's cores sit idle, so where
    # other processes (ctest -j) kept them busy it rightly holds.
    busy = ((cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1)
            if cpu0 and cpu1 else 0.0)
    if busy < 0.9:
        assert top > start, (st, start, busy)
    else:
        assert st["concurrency"] >= start * 3 // 4, (st, start, busy)


def test_remote_many_files_open_together_and_first_missing_is_named(
        data, remote):
    """Remote inputs are opened by many threads at once (one round trip
    each); with two missing files among 300 the error names the first in
    the list, whichever open failed first, every time."""
    good = remote.url("a.tif")
    ld = cogfeed.Loader([good] * 300, patch_size=32, batch_size=4,
                        epoch_length=40, sampler="blocked")
    files = set()
    for batch in ld:
        check_batch_image(data, batch, 32, 0)
        files.update(w[0] for w in batch["windows"])
    assert max(files) >= 100  # windows came from across the list
    urls = [good] * 300
    urls[150] = remote.url("missing_150.tif")
    urls[250] = remote.url("missing_250.tif")
    for _ in range(3):
        with pytest.raises(cogfeed.Error) as ei:
            cogfeed.Loader(urls, patch_size=32, batch_size=4)
        msg = str(ei.value)
        assert "opening inputs" in msg and "missing_150.tif" in msg, msg
        assert "missing_250" not in msg and "404" in msg, msg


def test_remote_and_local_files_share_one_descriptor_bound(
        tmp_path, data, remote):
    """With one remote input the loader runs an io loop per core and
    spreads its files over them; the local files of all the loops stay
    under one max_open_files bound (8 here, 16 if each loop kept its
    own), and every patch is right."""
    import shutil
    imgs = []
    for i in range(40):
        imgs.append(str(tmp_path / ("c%02d.tif" % i)))
        shutil.copyfile(data["images"][i % 2], imgs[-1])
    ld = cogfeed.Loader(imgs + [remote.url("a.tif")], patch_size=32,
                        batch_size=8, epoch_length=400,
                        io_options={"max_open_files": 8})
    most, files = 0, set()
    for batch in ld:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink("/proc/self/fd/" + fd).startswith(
                    str(tmp_path))
            except OSError:
                pass
        most = max(most, n)
        for i, (f, x, y, w, h) in enumerate(batch["windows"]):
            files.add(f)
            np.testing.assert_array_equal(
                batch["image"][i],
                expected(w, h, x + data["shifts"][f % 2 if f < 40 else 0], y))
    assert len(files) > 30
    # 8, and one more in use by a reader now and then
    assert most <= 11, most


def test_remote_slow_first_byte_is_hedged(data, remote):
    """The first request for a file (its header) gets no answer for 30 s:
    the loader's io sends it again after 100 ms and goes on with the
    second copy's answer; every patch is right."""
    remote.reset()
    url = remote.url(os.path.basename(data["images"][0]), fault="wait-30-1")
    ld = cogfeed.Loader([url], patch_size=32, batch_size=4, epoch_length=8,
                        sampler="grid", io_options={"hedge_after_ms": 100})
    for batch in ld:
        check_batch_image(data, batch, 32, 0)
    st = ld.stats()
    assert st["hedges"] >= 1 and st["hedge_wins"] >= 1, st
    ld.close()


def check_batch_image(data, batch, P, f):
    """Every patch of batch has file f's pixels at its window."""
    for i, (_, x, y, w, h) in enumerate(batch["windows"]):
        np.testing.assert_array_equal(
            batch["image"][i], expected(P, P, x + data["shifts"][f], y))


def _machine_cpu():
    """(busy, total) clock ticks of the whole machine, as the loader's
    controller reads them (lib/common/cpu.c), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return sum(v) - v[3] - v[4], sum(v)


def test_remote_object_changed_mid_epoch(data, remote):
    """The server changes a file's ETag after it was opened: its patches
    fail with "changed", with skip_errors too (an object replaced while it
    is read is the run's failure, not a bad sample's: it is never skipped).
    """
    good = remote.url(os.path.basename(data["images"][0]))
    for skip in (False, True):
        remote.reset()
        bad = remote.url(os.path.basename(data["images"][1]),
                         fault="etag-change")
        ld = cogfeed.Loader([good, bad], patch_size=32, batch_size=4,
                            sampler="grid", skip_errors=skip)
        batches, errors = _drain(ld)
        got = sum(len(w) for w in batches)
        assert all(w[0] == 0 for ws in batches for w in ws)
        n1 = sum(1 for j in range(ld.layout["samples"])
                 if ld.window(j)[0][0] == 1)
        assert n1 > 0 and errors and ld.stats()["skipped"] == 0
        assert all(isinstance(e, cogfeed.ObjectChangedError) and "b.tif" in str(e)
                   for e in errors)
        assert got <= ld.layout["samples"] - n1
        # Its readers are reading the next epoch ahead: stop them before
        # the server's fault counters are reset for the next loader.
        ld.close()


def _stream(ld):
    return [(list(b["windows"]), list(b["augment"]), b["image"].copy(),
             b["mask"].copy() if "mask" in b else None) for b in ld]


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_epochs_read_ahead_match_fresh_loaders(data, sampler):
    # One loader streamed over three epochs: its readers run into the next
    # epoch while this one is consumed (a 2-slot ring, a partial last
    # batch).  Every epoch equals what a fresh loader of that epoch gives.
    kw = dict(patch_size=32, batch_size=3, sampler=sampler, seed=5,
              flip=True, prefetch=2)
    if sampler != "grid":
        kw["epoch_length"] = 10
    ld = cogfeed.Loader(data["images"], data["masks"], **kw)
    streamed = []
    for e in range(3):
        assert ld.epoch == e
        streamed.append(_stream(ld))
    for e in range(3):
        fresh = _stream(cogfeed.Loader(data["images"], data["masks"],
                                       epoch=e, **kw))
        assert len(fresh) == len(streamed[e])
        for a, b in zip(streamed[e], fresh):
            assert a[0] == b[0] and a[1] == b[1]
            np.testing.assert_array_equal(a[2], b[2])
            np.testing.assert_array_equal(a[3], b[3])


def test_readers_read_ahead_into_the_next_epoch(data):
    # After the last batch of an epoch is taken, the readers go on with the
    # next epoch's first batches before it is asked for.
    ld = cogfeed.Loader(data["images"], patch_size=32, batch_size=4,
                        epoch_length=8, prefetch=4)
    batches = [b["image"].nbytes for b in ld]  # epoch 0, then set_epoch(1)
    per_epoch = sum(batches)
    deadline = time.time() + 30
    while ld.stats()["bytes_decoded"] < 2 * per_epoch and time.time() < deadline:
        time.sleep(0.01)
    assert ld.stats()["bytes_decoded"] >= 2 * per_epoch
    # and they are the right ones
    nxt = _stream(ld)
    ref = _stream(cogfeed.Loader(data["images"], patch_size=32, batch_size=4,
                                 epoch_length=8, epoch=1))
    assert [w for b in nxt for w in b[0]] == [w for b in ref for w in b[0]]
    # Jumping elsewhere (resume) discards the read-ahead and stays exact.
    ld.load_state_dict({"epoch": 5, "batch": 1})
    got = _stream(ld)
    ref = _stream(cogfeed.Loader(data["images"], patch_size=32, batch_size=4,
                                 epoch_length=8, epoch=5))[1:]
    assert [w for b in got for w in b[0]] == [w for b in ref for w in b[0]]


def test_many_bands_selected(tmp_path):
    # More than 64 selected bands: the same pixels as Cog.read, bands in
    # the order given.
    arr = expected(96, 80, 0, 0, 70)
    p = make_cog(os.path.join(str(tmp_path), "b70.tif"), arr, 32)
    bands = list(range(70, 0, -1))
    ld = cogfeed.Loader([p], patch_size=32, batch_size=4, sampler="grid",
                        bands=bands)
    c = cogfeed.open(p)
    n = 0
    for b in ld:
        for i, (f, x, y, w, h) in enumerate(b["windows"]):
            np.testing.assert_array_equal(
                b["image"][i], c.read(window=(x, y, w, h), bands=bands))
            n += 1
    assert n == ld.layout["samples"] > 0


def test_grid_patches_smaller_than_tiles_share_decoded_tiles(tmp_path):
    """The grid sampler's neighbouring patches share tiles when patches are
    smaller than tiles: each tile is fetched and decoded about once, as
    GDAL's block cache serves TorchGeo's GridGeoSampler.  Before, every
    patch fetched its tiles afresh (here 4 fetches of each tile, per image
    and mask); the pixels are the same either way."""
    ip, mp_ = make_pair(str(tmp_path), "g", 512, 512, block=256)
    runs = {}
    for cb in (0, 64 << 20):
        ld = cogfeed.Loader([ip], [mp_], patch_size=64, batch_size=4,
                            sampler="grid", cache_bytes=cb, epoch_length=64,
                            decode_threads=1, concurrency=1, prefetch=1)
        batches = [(b["image"].copy(), b["mask"].copy(), b["windows"])
                   for b in ld]
        runs[cb] = (batches, ld.stats())
        ld.close()
    (plain, st0), (cached, st1) = runs[0], runs[64 << 20]
    assert len(plain) == len(cached) == 16
    for (a, am, aw), (b, bm, bw) in zip(plain, cached):
        assert aw == bw
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(am, bm)
    # 64 patches of 64 px in 4 tiles of 256 px (image and mask): 16 reads
    # of each tile without the cache, a few with it
    assert st0["requests"] >= 4 * st1["requests"], (st0, st1)
    assert st1["cache_hits"] > 0


def test_decoded_bytes_per_byte_read(tmp_path):
    """stats()["chunk_bytes_decoded"] counts what the codecs wrote: a
    window decodes every tile it touches unless a cache holds it, so
    decoded_per_read is 1 for tile-sized grid patches, 4 for 256 px grid
    patches on 512 px tiles without a cache (each tile decoded 4 times),
    less with the chunk cache (neighbours share the decoded tile), and
    about 9 for random 256 px patches; the pixels are Cog.read's."""
    a = expected(1024, 1024, 0, 0, bands=2)
    p = make_cog(tmp_path / "d.tif", a, block=512, compress="DEFLATE")
    if rasterio is None:
        pytest.skip("the DEFLATE tiles are written by GDAL")
    cog = cogfeed.open(p)

    def run(dx=0, **kw):
        ld = cogfeed.Loader([p], batch_size=2, dtype="raw", **kw)
        for b in ld:
            for img, (f, x, y, w, h) in zip(b["image"], b["windows"]):
                assert np.array_equal(img, cog.read((x + dx, y + dx, w, h)))
        st = ld.stats()
        ld.close()
        assert st["chunk_bytes_decoded"] > 0 and st["bytes_decoded"] > 0
        assert st["decoded_per_read"] == st["chunk_bytes_decoded"] / st["bytes_decoded"]
        return st

    assert run(patch_size=512, sampler="grid", cache_bytes=0)["decoded_per_read"] == 1.0
    assert run(patch_size=256, sampler="grid", cache_bytes=0)["decoded_per_read"] == 4.0
    assert run(patch_size=256, sampler="grid")["decoded_per_read"] < 4.0
    # With the cache each 512 px tile is decoded once for its four 256 px
    # patches; on a target grid (grid=: here a window of the file's
    # own, 128 px in, so that every read is straight and cuts tiles) too (a read that cuts its tiles keeps them
    # for the neighbours; it used to decode them afresh, as without a
    # cache).
    assert a.nbytes == 4 * 512 * 512 * 2 * 2  # the 4 tiles, decoded once each
    assert run(patch_size=256, sampler="grid")["chunk_bytes_decoded"] == a.nbytes
    g = cog.grid()
    gt = g.geotransform
    g = cogfeed.Grid(g.crs, width=768, height=768,
                     geotransform=(gt[0] + 128 * gt[1], gt[1], 0.0, gt[3] + 128 * gt[5], 0.0,
                                   gt[5]))
    assert run(128, patch_size=256, sampler="grid", grid=g)["chunk_bytes_decoded"] == a.nbytes
    assert run(128, patch_size=256, sampler="grid", grid=g,
               cache_bytes=0)["chunk_bytes_decoded"] > 3 * a.nbytes
    rnd = run(patch_size=256, sampler="random", cache_bytes=0, epoch_length=64, seed=3)
    assert 5.0 < rnd["decoded_per_read"] < 13.0, rnd


def _rows_decoded(codec, need, tile=512):
    """Rows of a tile decoded for a window needing its first `need`: down
    to the window's last row rounded up to 32 for ZSTD, and for DEFLATE
    when that is at most 2/5 of the tile; LERC blobs whole."""
    if codec == "ZSTD" or (codec == "DEFLATE" and need * 5 <= 2 * tile):
        return min(tile, (need + 31) // 32 * 32)
    return tile


@pytest.mark.parametrize("codec", ["DEFLATE", "ZSTD", "LERC_ZSTD"])
def test_random_patches_decode_only_the_rows_they_need(tmp_path, codec):
    """Random 256 px patches on 512 px tiles: a tile below a patch's top
    is decoded only down to the patch's last row.  Each of the Loader's
    patches equals Cog.read's bit for bit, and Cog.read (no chunk cache)
    decodes exactly the rows _rows_decoded gives, which for DEFLATE and
    ZSTD is less than the whole tiles the old code decoded."""
    if rasterio is None:
        pytest.skip("the tiles are written by GDAL")
    a = expected(1536, 1536, 0, 0, bands=2)
    p = make_cog(tmp_path / "r.tif", a, block=512, compress=codec)
    cog = cogfeed.open(p, cogfeed.IO(cache_bytes=-1))
    row = 512 * 2 * 2  # a tile row: 512 px x 2 bands x uint16
    whole = part = 0
    with cogfeed.Loader([p], batch_size=4, dtype="raw", patch_size=256,
                        sampler="random", epoch_length=64, seed=5) as ld:
        for b in ld:
            for img, (f, x, y, w, h) in zip(b["image"], b["windows"]):
                before = cog.stats()["decoded_bytes"]
                assert np.array_equal(img, cog.read((x, y, w, h))), (x, y)
                got = cog.stats()["decoded_bytes"] - before
                want = 0
                for ty in range(y // 512, (y + h - 1) // 512 + 1):
                    ncols = (x + w - 1) // 512 - x // 512 + 1
                    need = min(y + h, ty * 512 + 512) - ty * 512
                    want += ncols * _rows_decoded(codec, need) * row
                    whole += ncols * 512 * row
                assert got == want, (x, y, got, want)
                part += want
    if codec == "LERC_ZSTD":
        assert part == whole
    else:
        assert part < 0.9 * whole, (part, whole)


@pytest.mark.parametrize("codec", ["DEFLATE", "ZSTD", "LERC_ZSTD"])
def test_loader_counts_the_rows_it_decodes(tmp_path, codec):
    """The Loader's own read path stops early too, and its stats count what
    the codecs wrote: random 128 px patches of a 512 x 128 image (one
    512 px tile) need the tile's first 128 rows, so decoded_per_read is 4
    (16 for LERC, decoded whole), however many patches the readers ran
    ahead."""
    if rasterio is None:
        pytest.skip("the tiles are written by GDAL")
    a = expected(512, 128, 0, 0, bands=2)
    p = make_cog(tmp_path / "g.tif", a, block=512, compress=codec)
    cog = cogfeed.open(p)
    with cogfeed.Loader([p], batch_size=4, dtype="raw", patch_size=128,
                        sampler="random", epoch_length=16, seed=2,
                        cache_bytes=0) as ld:
        for b in ld:
            for img, (f, x, y, w, h) in zip(b["image"], b["windows"]):
                assert np.array_equal(img, cog.read((x, y, w, h)))
        st = ld.stats()
    want = 16.0 if codec == "LERC_ZSTD" else 4.0
    assert st["decoded_per_read"] == want, st


def test_grid_patches_decode_each_tile_once(tmp_path):
    """Grid patches decode whole tiles even where a codec could stop: the
    next row of patches needs the rest, and a tile kept with its top rows
    only was fetched and decoded a second time (decoded_per_read 1.5 on
    ZSTD, requests per tile 2)."""
    if rasterio is None:
        pytest.skip("the tiles are written by GDAL")
    a = expected(1024, 1024, 0, 0, bands=2)
    p = make_cog(tmp_path / "z.tif", a, block=512, compress="ZSTD")
    with cogfeed.Loader([p], batch_size=4, dtype="raw", patch_size=256,
                        sampler="grid") as ld:
        n = sum(len(b["windows"]) for b in ld)
        st = ld.stats()
    assert n == 16
    assert st["decoded_per_read"] <= 1.0, st


def test_batch_kept_past_close_is_not_overwritten(tmp_path):
    """A batch taken, then close(): its arrays keep its own pixels.  The
    held ring slot used to be released before the readers stopped, so a
    reader could fill it with a later batch (the first window came back
    with the last window's pixels, about one run in six)."""
    p = make_cog(tmp_path / "k.tif", expected(384, 384, 0, 0, bands=1), block=128)
    cog = cogfeed.open(p)
    for _ in range(40):
        with cogfeed.Loader([p], patch_size=80, batch_size=6, sampler="grid",
                            dtype="raw") as ld:
            b = next(iter(ld))
        for img, (f, x, y, w, h) in zip(b["image"], b["windows"]):
            assert np.array_equal(img, cog.read((x, y, w, h))), (x, y)
