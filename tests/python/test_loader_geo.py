"""The Loader reads every input of a sample onto the sample's target grid
(issue 18): a Sentinel-2-like per-band stack (10/20/60 m bands, the SCL
mask at 20 m, a DEM in EPSG:4326, labels on a 15 m grid) checked against
cog.read(grid=...) of each input (the one implementation), against
gdalwarp for the mask (nearest) and a 20 m band (bilinear), locally and
over HTTP; the silent mismatches of old (a layer in another CRS on the
same numeric grid, a mask without georeferencing) are now reprojected or
refused, naming the file."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

rasterio = pytest.importorskip("rasterio")

BIN = os.environ.get("COGFEED_BIN", "cogfeed")
SIZE = 384
LAYERS = [("B03", "bilinear"), ("B04", "bilinear"), ("B08", "bilinear"),
          ("B05", "bilinear"), ("B06", "bilinear"), ("B07", "bilinear"),
          ("B8A", "bilinear"), ("B11", "bilinear"), ("B12", "bilinear"),
          ("B01", "cubic"), ("B09", "cubic"), ("DEM", "bilinear"),
          ("LABELS", "mode")]


@pytest.fixture(scope="module")
def tile(tmp_path_factory):
    d = tmp_path_factory.mktemp("s2stack")
    subprocess.run([BIN, "synth", str(d), "--layout", "s2", "--size", str(SIZE), "--tile", "128",
                    "--seed", "5", "--quiet"], check=True, capture_output=True)
    from cogfeed.tools import synth_s2
    t = synth_s2.layout(str(d))
    t["root"] = str(d)
    return t


def stack(tile, url=lambda p: p, **kw):
    args = dict(patch_size=80, batch_size=6, sampler="grid", dtype="float32",
                scale_offset=False,
                resampling={"image": "bilinear", "layers": [r for _, r in LAYERS]})
    args.update(kw)
    return cogfeed.Loader(url(tile["B02"]), masks=url(tile["SCL"]),
                          layers=[[url(tile[n]) for n, _ in LAYERS]], **args)


def check_batch(tile, b, kernels=None):
    kernels = kernels or [("B02", "bilinear")] + LAYERS
    for i, g in enumerate(b["grid"]):
        f, x, y, w, h = b["windows"][i]
        assert g.crs == 32633 and (g.width, g.height) == (w, h)
        for c, (name, rs) in enumerate(kernels):
            with cogfeed.open(tile[name]) as cog:
                exp = cog.read(grid=g, resampling=rs).astype(np.float32)[0]
            np.testing.assert_array_equal(b["image"][i, c], exp, err_msg="%s at %s" % (name, g))
        with cogfeed.open(tile["SCL"]) as cog:
            np.testing.assert_array_equal(b["mask"][i], cog.read(grid=g, resampling="nearest"))


def test_s2_stack_is_cog_read_grid_of_each_input(tile):
    with stack(tile) as ld:
        assert ld.layout["channels"] == 1 + len(LAYERS)
        n = 0
        for b in ld:
            check_batch(tile, b)
            n += len(b["windows"])
        assert n == ld.layout["samples"] == 25  # 5 x 5 windows, the last moved back


def test_s2_stack_matches_gdalwarp(tile, tmp_path):
    """The oracle itself: nearest on the SCL mask, bilinear on a 20 m band
    (and cubic on a 60 m one), onto two patches of the batch."""
    with stack(tile, sampler="blocked", patch_size=96) as ld:
        b = next(iter(ld))
    for i in (0, 3):
        g = b["grid"][i]
        exp = F.gdalwarp(tile["SCL"], str(tmp_path / "m.tif"), g, "near")
        np.testing.assert_array_equal(b["mask"][i], exp)
        exp = F.gdalwarp(tile["B05"], str(tmp_path / "b5.tif"), g, "bilinear")
        np.testing.assert_array_equal(b["image"][i, 1 + 3], exp[0].astype(np.float32))
        exp = F.gdalwarp(tile["B01"], str(tmp_path / "b1.tif"), g, "cubic")
        np.testing.assert_array_equal(b["image"][i, 1 + 9], exp[0].astype(np.float32))


def test_target_grid_option(tile):
    """grid= puts every input, the image included, on another grid: a
    20 m grid of bounds (one grid), the grid of the 20 m band (like=), and
    a 30 m grid from the image's footprint (crs + res)."""
    with cogfeed.open(tile["B02"]) as c:
        bounds = c.bounds
    g20 = cogfeed.Grid.from_bounds(32633, bounds, 20)
    for grid in ({"crs": "EPSG:32633", "res": 20, "bounds": bounds}, tile["B05"],
                 {"like": tile["B05"]}, g20):
        with stack(tile, grid=grid, patch_size=64, batch_size=4) as ld:
            assert ld.layout["samples"] == (SIZE // 2 // 64) ** 2
            b = next(iter(ld))
            assert b["grid"][0] == g20.window(0, 0, 64, 64)
            check_batch(tile, b)
    with stack(tile, grid={"crs": 32633, "res": 30}, patch_size=64, batch_size=4) as ld:
        b = next(iter(ld))
        g = b["grid"][0]
        assert g.res == (30, 30) and g.geotransform[0] == 500000 - 500000 % 30
        check_batch(tile, b)
    with pytest.raises(ValueError, match="grid: a dict needs crs and res"):
        stack(tile, grid={"crs": 32633})


def test_default_kernels_are_read_grid_with_the_kernel_named(tile):
    """The Loader's defaults (no resampling=): images and layers bilinear,
    as TorchGeo reads images; masks nearest.  cog.read(grid=)'s default is
    nearest, as gdalwarp's and rasterio's reproject's, so the "same array"
    holds with the kernel passed: read(grid=g, resampling="bilinear") for a
    resampled image or layer, read(grid=g) (nearest) for a mask."""
    with cogfeed.Loader(tile["B02"], masks=tile["SCL"], layers=[[tile["B05"]]],
                        patch_size=80, batch_size=6, sampler="grid", dtype="float32",
                        scale_offset=False) as ld:
        b = next(iter(ld))
    differs = 0
    for i, g in enumerate(b["grid"]):
        with cogfeed.open(tile["B02"]) as c:  # the image's own grid: a plain read
            np.testing.assert_array_equal(b["image"][i, 0], c.read(grid=g)[0])
        with cogfeed.open(tile["B05"]) as c:  # 20 m onto 10 m: resampled
            exp = c.read(grid=g, resampling="bilinear").astype(np.float32)[0]
            np.testing.assert_array_equal(b["image"][i, 1], exp, err_msg=str(g))
            differs += not np.array_equal(b["image"][i, 1], c.read(grid=g)[0])
        with cogfeed.open(tile["SCL"]) as c:  # 20 m mask: nearest, read's default
            np.testing.assert_array_equal(b["mask"][i], c.read(grid=g))
    # the kernel matters: read(grid=)'s nearest is not the Loader's bilinear
    assert differs == len(b["grid"])


def _retag(src, dst, crs=None, transform=True):
    """src's pixels and nodata with another CRS, or no georeferencing."""
    with rasterio.open(src) as s:
        prof = s.profile.copy()
        data = s.read()
    prof.update(driver="GTiff", tiled=True, blockxsize=128, blockysize=128)
    prof.pop("crs", None)
    if crs is not None:
        prof["crs"] = crs
    if not transform:
        prof.pop("transform", None)
    with rasterio.open(dst, "w", **prof) as d:
        d.write(data)
    return str(dst)


def test_layer_in_another_crs_on_the_same_numeric_grid(tile, tmp_path):
    """B03's pixels and geotransform labelled UTM 34N: the same numbers,
    166 km and more away.  Old code read its pixels as if it lay on the
    image; now it is reprojected (here: nothing of it under the image, so
    nodata), or refused naming both CRSs."""
    other = _retag(tile["B03"], tmp_path / "b03_utm34.tif", crs="EPSG:32634")
    kw = dict(patch_size=64, batch_size=4, sampler="grid", dtype="float32",
              scale_offset=False)
    with cogfeed.Loader(tile["B02"], layers=[[other]], **kw) as ld:
        b = next(iter(ld))
    with cogfeed.open(other) as c:
        raw = c.read((0, 0, 64, 64))[0]
        assert not np.array_equal(b["image"][0, 1], raw.astype(np.float32))
        for i, g in enumerate(b["grid"]):
            exp = c.read(grid=g, resampling="bilinear").astype(np.float32)[0]
            np.testing.assert_array_equal(b["image"][i, 1], exp)
    with pytest.raises(cogfeed.Error) as e:
        cogfeed.Loader(tile["B02"], layers=[[other]], reproject=False, **kw)
    msg = str(e.value)
    assert "b03_utm34.tif" in msg and "EPSG:32634" in msg and "EPSG:32633" in msg, msg


def test_mask_without_georeferencing_is_refused(tile, tmp_path):
    """Old code accepted a mask without any georeferencing.  Now: refused
    naming it; with ungeoreferenced=True read pixel for pixel when its size
    is the image's, refused otherwise."""
    plain = _retag(tile["SCL"], tmp_path / "scl_plain.tif", transform=False)
    with pytest.raises(cogfeed.Error, match="scl_plain.tif.*no geotransform"):
        cogfeed.Loader(tile["B02"], masks=[plain], patch_size=64)
    with pytest.raises(cogfeed.Error, match="scl_plain.tif.*size 192x192 vs 384x384"):
        cogfeed.Loader(tile["B02"], masks=[plain], patch_size=64, ungeoreferenced=True)
    same = _retag(tile["B04"], tmp_path / "b04_plain.tif", transform=False)
    with pytest.raises(cogfeed.Error, match="b04_plain.tif"):
        cogfeed.Loader(tile["B02"], masks=[same], patch_size=64)
    with cogfeed.Loader(tile["B02"], masks=[same], patch_size=64, batch_size=2,
                        sampler="grid", ungeoreferenced=True) as ld:
        b = next(iter(ld))
        with cogfeed.open(tile["B04"]) as c:
            for i, (f, x, y, w, h) in enumerate(b["windows"]):
                np.testing.assert_array_equal(b["mask"][i], c.read((x, y, w, h)))


def test_remote_stack_over_http(tile):
    """The same stack over the test nginx: the same batches."""
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        pytest.skip("nginx not installed")
    sys.path.insert(0, os.path.join(os.environ.get("CF_SOURCE_DIR", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")), "tests", "servers"))
    import servers
    root = tile["root"]
    with servers.Nginx(root, latency_ms=20) as srv:
        url = lambda p: srv.url(os.path.relpath(p, root))  # noqa: E731
        with stack(tile, url=url, batch_size=8) as rl, stack(tile, batch_size=8) as ll:
            for rb, lb in zip(rl, ll):
                assert rb["windows"] == lb["windows"] and rb["grid"] == lb["grid"]
                np.testing.assert_array_equal(rb["image"], lb["image"])
                np.testing.assert_array_equal(rb["mask"], lb["mask"])


def test_torch_batches_carry_their_grid(tile):
    torch = pytest.importorskip("torch")
    from cogfeed.torch import CogDataset
    ds = CogDataset(tile["B02"], tile["SCL"], patch_size=64, batch_size=4, sampler="grid",
                    layers=[[tile["B05"]]], dtype="float32")
    b = next(iter(torch.utils.data.DataLoader(ds, batch_size=None)))
    with cogfeed.open(tile["B05"]) as c:
        for i, g in enumerate(b["grid"]):
            assert g == cogfeed.Grid.like(tile["B02"]).window(*b["windows"][i][1:])
            exp = c.read(grid=g, resampling="bilinear").astype(np.float32)[0]
            np.testing.assert_array_equal(b["image"][i, 1].numpy(), exp)


def test_decoded_tiles_of_resampled_inputs_are_kept(tile):
    """A 20 m / 60 m tile serves several 10 m patches: it is decoded once
    and kept (cache_bytes) for the next, with the same pixels as without
    the cache."""
    kw = dict(sampler="blocked", patch_size=64, batch_size=8, seed=3)
    with stack(tile, **kw) as a, stack(tile, cache_bytes=0, **kw) as b:
        for ba, bb in zip(a, b):
            assert ba["windows"] == bb["windows"]
            np.testing.assert_array_equal(ba["image"], bb["image"])
            np.testing.assert_array_equal(ba["mask"], bb["mask"])
        sa, sb = a.stats(), b.stats()
    assert sa["cache_hits"] > sa["cache_misses"] > 0, sa
    assert sb["cache_hits"] == sb["cache_misses"] == 0, sb
    assert sa["bytes_decoded"] < sb["bytes_decoded"] or sa["requests"] < sb["requests"]


def test_tile_shuffle_and_time_steps(tile):
    """tile-shuffle keeps the image's cells in its cache and reads
    resampled inputs per patch; a second time step at 20 m is a scene read
    onto the first's grid."""
    with stack(tile, sampler="tile-shuffle", patch_size=64, batch_size=8,
               epoch_length=32) as ld:
        for b in ld:
            check_batch(tile, b)
    with cogfeed.Loader([[tile["B02"], tile["B05"]]], masks=[tile["SCL"]], patch_size=64,
                        batch_size=4, sampler="random", epoch_length=8, seed=2,
                        dtype="float32", scale_offset=False) as ld:
        for b in ld:
            assert b["image"].shape == (4, 2, 1, 64, 64)
            for i, g in enumerate(b["grid"]):
                for tt, n in enumerate(("B02", "B05")):
                    with cogfeed.open(tile[n]) as c:
                        exp = c.read(grid=g, resampling="bilinear").astype(np.float32)[0]
                    np.testing.assert_array_equal(b["image"][i, tt, 0], exp)


@pytest.mark.parametrize("rs", ["nearest", "bilinear", "average"])
def test_dates_of_one_place_across_crss(tmp_path, rs):
    """A time series whose dates share a grid in another CRS (WGS 84 read
    onto UTM 33N): a reader computes the reprojected positions of a patch
    once for those dates (warp_pos.c); every date is still its own
    cog.read(grid=), also a date half a pixel off among them (another map:
    not shared)."""
    rng = np.random.default_rng(3)
    paths = []
    for k, x0 in enumerate((14.0, 14.0, 14.0, 14.00025, 14.0)):
        p = str(tmp_path / ("d%d.tif" % k))
        g = cogfeed.Grid(4326, (0.0005, 0, x0, 0, -0.0005, 46.2), 900, 600)
        with cogfeed.Writer(p, 900, 600, 1, "uint16", grid=g, tile_size=128,
                            overviews=0) as w:
            w.write(rng.integers(1, 4000, (1, 600, 900), np.uint16))
        paths.append(p)
    order = [paths[0], paths[1], paths[2], paths[3], paths[4], paths[1]]
    grid = {"crs": 32633, "res": 30.0, "bounds": (423000.0, 5090000.0, 441000.0, 5110000.0)}
    n = 0
    with cogfeed.Loader([order], grid=grid, patch_size=128, batch_size=4, sampler="grid",
                        resampling=rs) as ld:
        for b in ld:
            assert b["image"].shape[1:] == (len(order), 1, 128, 128)
            for i, g in enumerate(b["grid"]):
                for t, p in enumerate(order):
                    with cogfeed.open(p) as c:
                        exp = c.read(grid=g, resampling=rs)[0]
                    np.testing.assert_array_equal(b["image"][i, t, 0], exp,
                                                  err_msg="date %d at %s" % (t, g))
                n += 1
    assert n == ld.layout["samples"] > 20
