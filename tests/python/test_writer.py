"""cogfeed.Writer / cogfeed.write (cf_writer): what it writes is read back
by GDAL (rasterio's wheel) bit for bit, with the CRS, transform, nodata,
band descriptions, scale/offset and overviews GDAL reports; rio-cogeo's
validator says it is a valid COG; cogfeed reads it back too.  Failures
leave nothing behind."""

import os

import numpy as np
import pytest

import cogfeed

rasterio = pytest.importorskip("rasterio")

UTM = dict(geotransform=(500000.0, 10.0, 0.0, 4100000.0, 0.0, -10.0))


def grid(w, h, crs=32633, gt=UTM["geotransform"]):
    return cogfeed.Grid(crs, width=w, height=h, geotransform=gt)


def image(dtype, bands, h, w, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        y, x = np.mgrid[0:h, 0:w]
        a = np.stack([np.sin(x / 17.0 + b) * 100 + y / 7.0 for b in range(bands)])
        return (a + rng.random(a.shape)).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -30000), min(info.max, 60000) + 1,
                        size=(bands, h, w)).astype(dtype)


def is_valid_cog(path):
    from rio_cogeo.cogeo import cog_validate
    ok, errors, warnings = cog_validate(str(path), quiet=True)
    return ok and not errors, (errors, warnings)


@pytest.mark.parametrize("compression", ["none", "deflate", "zstd"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint16", "int32",
                                   "float32", "float64"])
def test_round_trip_through_gdal(tmp_path, compression, dtype):
    """Every codec and dtype, an image that is not a multiple of the
    tile: GDAL and cogfeed read back exactly what was written, with the
    georeferencing, nodata and per-band metadata; a valid COG."""
    a = image(dtype, 3, 301, 517)
    p = tmp_path / ("w_%s_%s.tif" % (compression, dtype))
    cogfeed.write(p, a, grid=grid(517, 301), tile_size=128,
                  compression=compression, nodata=7,
                  descriptions=["blue", "green & <red>", None],
                  scales=[0.5, 1.0, 2.0], offsets=[1.0, 0.0, -3.0])
    with rasterio.open(p) as r:
        assert r.read().dtype == np.dtype(dtype)
        np.testing.assert_array_equal(r.read(), a)
        assert r.crs.to_epsg() == 32633
        assert r.transform.to_gdal() == UTM["geotransform"]
        assert r.nodata == 7
        assert r.descriptions == ("blue", "green & <red>", None)
        assert r.scales == (0.5, 1.0, 2.0) and r.offsets == (1.0, 0.0, -3.0)
        assert r.block_shapes[0] == (128, 128)
        assert r.compression is None if compression == "none" else \
            r.compression.name.lower() == compression
        # levels until one fits a tile, sizes rounded up as gdaladdo's
        assert r.overviews(1) == [2, 4, 8]
    for k, size in enumerate([(259, 151), (130, 76), (65, 38)]):
        with rasterio.open(p, overview_level=k) as o:
            assert (o.width, o.height) == size
    ok, why = is_valid_cog(p)
    assert ok, why
    with cogfeed.open(p) as c:
        np.testing.assert_array_equal(c.read(), a)
        assert c.epsg == 32633 and c.nodata == 7
        assert c.header_requests == 1


def test_geographic_crs_rotated_transform_and_no_georeferencing(tmp_path):
    a = image("uint16", 1, 100, 200)
    p = tmp_path / "geo.tif"
    cogfeed.write(p, a, grid=grid(200, 100, 4326, (10.0, 0.01, 0.0, 50.0, 0.0, -0.01)))
    with rasterio.open(p) as r:
        assert r.crs.to_epsg() == 4326
        assert r.transform.to_gdal() == (10.0, 0.01, 0.0, 50.0, 0.0, -0.01)
    p = tmp_path / "rot.tif"
    cogfeed.write(p, a, grid=grid(200, 100, 32633, (500000.0, 10.0, 2.0, 4100000.0, 1.0, -10.0)))
    with rasterio.open(p) as r:
        assert r.transform.to_gdal() == (500000.0, 10.0, 2.0, 4100000.0, 1.0, -10.0)
    p = tmp_path / "plain.tif"
    cogfeed.write(p, a)
    with rasterio.open(p) as r:
        assert r.crs is None
        np.testing.assert_array_equal(r.read(), a)


@pytest.mark.parametrize("size", [(1024, 768), (1001, 703), (37, 23), (6, 40)])
@pytest.mark.parametrize("resampling", ["average", "nearest", "mode"])
@pytest.mark.parametrize("dtype,nodata", [("uint8", None), ("uint8", 255),
                                          ("uint16", 0), ("int16", None),
                                          ("int16", -9999), ("float32", None),
                                          ("float32", -9999.0)])
def test_overviews_equal_gdal(tmp_path, size, resampling, dtype, nodata):
    """Levels 2 and 4 equal, bit for bit, what GDAL 3.10 (rasterio's wheel:
    build_overviews, gdaladdo's call) builds from the same full
    resolution: odd sizes spread over the exact ratio, weighted averages,
    GDAL's float 2 x 2 path, nodata left out (a mean landing on nodata
    moved), mode's tie rule.  (GDAL's mode turns an all-nodata window of
    an int16 image with a negative nodata into 0, a quirk not copied.)"""
    if resampling == "mode" and dtype == "int16" and nodata == -9999:
        pytest.skip("GDAL's int16 mode runs as uint16: nodata -9999 gives 0")
    from rasterio.enums import Resampling
    w, h = size
    rng = np.random.default_rng(3)
    lo = -100 if dtype in ("int16", "float32") else 0
    a = rng.integers(lo, 200, size=(2, h, w)).astype(dtype)
    if nodata is not None:
        a[:, rng.random((h, w)) < 0.3] = nodata
    if dtype == "float32":
        a += rng.random(a.shape).astype("float32")
    ours, ref = tmp_path / "ours.tif", tmp_path / "ref.tif"
    g = grid(w, h)
    tile = 16 if w < 64 else 256
    cogfeed.write(ours, a, grid=g, tile_size=tile, nodata=nodata,
                  overview_resampling=resampling, overviews=2)
    cogfeed.write(ref, a, grid=g, tile_size=tile, nodata=nodata, overviews=0)
    with rasterio.open(ref, "r+") as d:
        d.build_overviews([2, 4], getattr(Resampling, resampling))
    for k in range(2):
        with rasterio.open(ours, overview_level=k) as x, \
                rasterio.open(ref, overview_level=k) as y:
            np.testing.assert_array_equal(x.read(), y.read())


def test_mode_overviews_keep_classes(tmp_path):
    """mode: each overview pixel is the most frequent class of its 2 x 2
    block (nodata left out), so a class map stays a class map."""
    rng = np.random.default_rng(4)
    a = rng.integers(0, 5, size=(1, 512, 512)).astype("uint8")
    a[0, :256, :256] = 3
    p = tmp_path / "classes.tif"
    cogfeed.write(p, a, grid=grid(512, 512), tile_size=128, nodata=255,
                  overview_resampling="mode")
    with rasterio.open(p, overview_level=0) as r:
        o = r.read()[0]
    assert o.shape == (256, 256)
    assert (o[:128, :128] == 3).all()
    assert set(np.unique(o)) <= set(range(5))
    blocks = a[0].reshape(256, 2, 256, 2).transpose(0, 2, 1, 3).reshape(256, 256, 4)
    for y, x in [(200, 17), (140, 250), (255, 255)]:
        counts = np.bincount(blocks[y, x], minlength=5)
        assert counts[o[y, x]] == counts.max()


def test_tiles_in_any_order_and_sparse_tiles(tmp_path):
    """write_tile in shuffled order gives the same file; a tile never
    written reads as nodata."""
    a = image("uint16", 2, 600, 700)
    w1, w2 = tmp_path / "order.tif", tmp_path / "sparse.tif"
    with cogfeed.Writer(w1, grid=grid(700, 600), bands=2, dtype="uint16",
                        tile_size=256, nodata=9) as w:
        tiles = [(tx, ty) for ty in range(w.tiles[1]) for tx in range(w.tiles[0])]
        for i in np.random.default_rng(5).permutation(len(tiles)):
            tx, ty = tiles[i]
            x, y, tw, th = w.tile_window(tx, ty)
            w.write_tile(tx, ty, a[:, y:y + th, x:x + tw])
    with rasterio.open(w1) as r:
        np.testing.assert_array_equal(r.read(), a)
    with cogfeed.Writer(w2, grid=grid(700, 600), bands=2, dtype="uint16",
                        tile_size=256, nodata=9) as w:
        for tx, ty in tiles:
            if (tx, ty) != (1, 1):
                x, y, tw, th = w.tile_window(tx, ty)
                w.write_tile(tx, ty, a[:, y:y + th, x:x + tw])
    with rasterio.open(w2) as r:
        b = r.read()
    want = a.copy()
    want[:, 256:512, 256:512] = 9
    np.testing.assert_array_equal(b, want)


def test_like_a_file(tmp_path):
    """like=: the grid, band count, dtype and nodata of a file."""
    a = image("int16", 2, 300, 400)
    src = tmp_path / "src.tif"
    cogfeed.write(src, a, grid=grid(400, 300), nodata=-1)
    out = tmp_path / "pred.tif"
    with cogfeed.Writer(out, like=src) as w:
        assert (w.bands, w.dtype, w.width, w.height) == (2, np.int16, 400, 300)
        w.write(a)
    with rasterio.open(out) as r:
        assert r.nodata == -1 and r.crs.to_epsg() == 32633
        np.testing.assert_array_equal(r.read(), a)


def test_failures_leave_nothing(tmp_path):
    """An exception in the with block, a wrong array, a bad option, a CRS
    whose projection is not written as GeoKeys: clear errors, and neither the output nor the
    spool is left."""
    p = tmp_path / "out.tif"
    with pytest.raises(RuntimeError):
        with cogfeed.Writer(p, 300, 200, 1, "uint8") as w:
            w.write_tile(0, 0, np.zeros((1, 200, 300), "uint8"))
            raise RuntimeError("the model failed")
    assert os.listdir(tmp_path) == []
    with cogfeed.Writer(p, 300, 200, 1, "uint8", tile_size=256) as w:
        with pytest.raises(TypeError, match="uint16 array for a uint8"):
            w.write_tile(0, 0, np.zeros((1, 200, 256), "uint16"))
        with pytest.raises(cogfeed.ArgumentError, match="tile 0,0 takes 1 bands x 200 x 256"):
            w.write_tile(0, 0, np.zeros((1, 100, 256), "uint8"))
        with pytest.raises(cogfeed.ArgumentError, match="outside 2x1 tiles"):
            w.write_tile(2, 0, np.zeros((1, 200, 44), "uint8"))
        w.abort()
    assert os.listdir(tmp_path) == []
    with pytest.raises(cogfeed.ArgumentError, match="tile size 100"):
        cogfeed.Writer(p, 300, 200, tile_size=100)
    with pytest.raises(ValueError, match="compression 'lzw'"):
        cogfeed.Writer(p, 300, 200, compression="lzw")
    with pytest.raises(cogfeed.UnsupportedError, match="projection method Robinson"):
        cogfeed.Writer(p, grid=cogfeed.Grid(
            "+proj=robin +lon_0=0 +datum=WGS84",
            width=10, height=10, geotransform=(0, 1, 0, 0, 0, -1)))
    assert os.listdir(tmp_path) == []


def test_nodata_must_be_a_value_of_the_type(tmp_path):
    """A nodata the data type cannot hold is refused (it would be written
    as GDAL_NODATA but never appear in the pixels); like= a float scene
    with another dtype does not take the scene's NaN nodata."""
    p = tmp_path / "n.tif"
    for nd in (float("nan"), -9999, 255.5, 256):
        with pytest.raises(cogfeed.ArgumentError, match="not a uint8 value"):
            cogfeed.Writer(p, 10, 10, dtype="uint8", nodata=nd)
    src = tmp_path / "f.tif"
    cogfeed.write(src, np.zeros((1, 20, 20), np.float32), grid=grid(20, 20),
                  nodata=float("nan"))
    with cogfeed.Writer(p, like=src, dtype="uint8") as w:
        w.write(np.ones((1, 20, 20), np.uint8))
    with rasterio.open(p) as r:
        assert r.nodata is None and r.dtypes[0] == "uint8"


def test_planted_spool_link_is_not_followed(tmp_path):
    """A symlink planted where the spool goes (a shared output folder) is
    replaced, never written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    p = tmp_path / "out.tif"
    os.symlink(victim, str(p) + ".cogfeed-spool")
    os.symlink(victim, str(p) + ".cogfeed-tmp")
    cogfeed.write(p, image("uint8", 1, 64, 64))
    assert victim.read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["out.tif", "victim.txt"]


# ---- LERC, JPEG and WEBP (issue 29) ----

LERC_DTYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32",
               "float32", "float64"]


def smooth_u8(bands, h, w, seed=0):
    """An image a lossy codec is meant for: smooth, a little noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([(np.sin(x / 19.0 + b) + np.cos(y / 27.0 - b)) * 55 + 120
                  for b in range(bands)])
    return np.clip(a + rng.normal(0, 2, a.shape), 0, 255).astype(np.uint8)


def gdal_read(p, level=None):
    kw = {} if level is None else {"overview_level": level}
    with rasterio.open(p, **kw) as r:
        return r.read()


def cogfeed_read(p, level=0):
    with cogfeed.open(p) as c:
        return c.read(level=level)


def levels(p):
    with rasterio.open(p) as r:
        return len(r.overviews(1))


def lerc_params(p):
    """LercParameters (tag 50674) of the first directory, as read by
    cogfeed's own TIFF parser through the CLI-free route: the raw bytes."""
    import struct
    b = open(p, "rb").read(65536)
    assert b[:4] == b"II*\0"
    at = struct.unpack_from("<I", b, 4)[0]
    n = struct.unpack_from("<H", b, at)[0]
    for i in range(n):
        tag, typ, cnt, val = struct.unpack_from("<HHII", b, at + 2 + 12 * i)
        if tag == 50674:
            assert (typ, cnt) == (4, 2)
            return struct.unpack_from("<II", b, val)
    return None


@pytest.mark.parametrize("codec,layer", [("lerc", 0), ("lerc_deflate", 1),
                                         ("lerc_zstd", 2)])
@pytest.mark.parametrize("dtype", LERC_DTYPES)
def test_lerc_lossless_through_gdal(tmp_path, codec, layer, dtype):
    """LERC, LERC_DEFLATE and LERC_ZSTD of every type LERC takes, two tile
    sizes: GDAL and cogfeed read back exactly what was written (float NaNs
    included, whole pixels and single samples); LercParameters are GDAL's
    (version 4, the layer); a valid COG with its overviews, which GDAL
    and cogfeed read alike."""
    tile = 128 if LERC_DTYPES.index(dtype) % 2 else 256
    a = image(dtype, 2, 301, 517)
    if a.dtype.kind == "f":
        a[:, 10:20, 30:40] = np.nan       # whole pixels: one mask
        a[1, 200, 100:150] = np.nan       # one band only: a mask per band
    p = tmp_path / ("l_%s_%s.tif" % (codec, dtype))
    cogfeed.write(p, a, grid=grid(517, 301), tile_size=tile, compression=codec)
    g = gdal_read(p)
    np.testing.assert_array_equal(g, a)  # NaN where NaN
    np.testing.assert_array_equal(cogfeed_read(p), a)
    with rasterio.open(p) as r:
        assert r.compression.name.lower() == codec
        assert r.block_shapes[0] == (tile, tile)
    assert lerc_params(p) == (4, layer)
    assert levels(p) == (3 if tile == 128 else 2)
    for k in range(levels(p)):
        np.testing.assert_array_equal(gdal_read(p, k), cogfeed_read(p, k + 1))
    ok, why = is_valid_cog(p)
    assert ok, why


@pytest.mark.parametrize("dtype,max_error", [("float32", 0.5), ("float32", 0.01),
                                             ("float64", 0.001), ("int16", 2),
                                             ("uint16", 10)])
@pytest.mark.parametrize("tile", [128, 512])
def test_lerc_max_error(tmp_path, dtype, max_error, tile):
    """max_error (GDAL's MAX_Z_ERROR): every value read back, by GDAL and by
    cogfeed alike, is within max_error of what was written (plus the
    rounding to the float type: LERC's bound holds in double), and the
    file is smaller than the lossless one."""
    a = image(dtype, 3, 400, 300)
    p = tmp_path / "lossy.tif"
    q = tmp_path / "exact.tif"
    cogfeed.write(p, a, tile_size=tile, compression="lerc_zstd", max_error=max_error)
    cogfeed.write(q, a, tile_size=tile, compression="lerc_zstd")
    g = gdal_read(p)
    np.testing.assert_array_equal(g, cogfeed_read(p))
    err = np.abs(g.astype(np.float64) - a.astype(np.float64))
    slack = np.spacing(np.abs(a)).astype(np.float64) if a.dtype.kind == "f" else 0
    assert (err <= max_error + slack).all(), (err - max_error).max()
    assert err.max() > max_error / 4
    assert os.path.getsize(p) < os.path.getsize(q)
    ok, why = is_valid_cog(p)
    assert ok, why


def debian_read(p, level=0):
    """Debian's GDAL (libjpeg-turbo, as cogfeed) decoding p: the oracle
    for YCbCr JPEG (docs/conformance.md: rasterio's libjpeg 9 upsamples
    chroma differently)."""
    import conformance
    return conformance.debian_gdal_read(str(p), level)


@pytest.mark.parametrize("bands,photometric", [(1, None), (3, None), (3, "rgb")])
@pytest.mark.parametrize("tile,quality", [(128, None), (256, 90)])
def test_jpeg_through_gdal(tmp_path, bands, photometric, tile, quality):
    """JPEG of 1 band, of 3 as YCbCr (GDAL's default) and as RGB, two tile
    sizes and qualities: the same file decodes to the same pixels in GDAL
    (with libjpeg-turbo) and in cogfeed, at every level, and within a
    mean absolute error of the input that the quality allows; a valid COG
    whose photometric GDAL reports."""
    a = smooth_u8(bands, 300, 517)
    p = tmp_path / "j.tif"
    cogfeed.write(p, a, grid=grid(517, 300), tile_size=tile, compression="jpeg",
                  quality=quality, photometric=photometric)
    ycbcr = bands == 3 and photometric is None
    mine = cogfeed_read(p)
    np.testing.assert_array_equal(debian_read(p), mine)
    g = gdal_read(p)
    if ycbcr:  # rasterio's libjpeg 9 upsamples chroma its own way
        assert np.abs(g.astype(int) - mine).mean() < 1.0
    else:
        np.testing.assert_array_equal(g, mine)
    mae = np.abs(mine.astype(float) - a).mean()
    assert 0 < mae < (2.5 if quality == 90 else 3.5), mae
    with rasterio.open(p) as r:
        assert r.compression.name == "jpeg"
        st = r.tags(ns="IMAGE_STRUCTURE")
        if ycbcr:
            assert st.get("SOURCE_COLOR_SPACE") == "YCbCr"
        assert r.colorinterp[0].name == ("gray" if bands == 1 else "red")
    n = levels(p)
    assert n == (3 if tile == 128 else 2)
    for k in range(1, n + 1):
        np.testing.assert_array_equal(debian_read(p, k), cogfeed_read(p, k))
    ok, why = is_valid_cog(p)
    assert ok, why


@pytest.mark.parametrize("bands", [3, 4])
@pytest.mark.parametrize("tile", [128, 256])
@pytest.mark.parametrize("mode", ["lossy", "lossless", "quality100"])
def test_webp_through_gdal(tmp_path, bands, tile, mode):
    """WEBP of 3 and 4 bands, two tile sizes: lossy decodes to the same
    pixels in GDAL and cogfeed, within a mean absolute error of the
    input; lossless (lossless=True, or quality=100 as GDAL's COG driver)
    gives the input back bit for bit; a valid COG with its overviews."""
    a = smooth_u8(bands, 300, 517, seed=bands)
    if bands == 4:
        a[3] = 255
        a[3, :50, :50] = 0  # transparent corner: lossless keeps its colour
    kw = {"lossy": {}, "lossless": {"lossless": True}, "quality100": {"quality": 100}}[mode]
    p = tmp_path / "w.tif"
    cogfeed.write(p, a, grid=grid(517, 300), tile_size=tile, compression="webp", **kw)
    g = gdal_read(p)
    mine = cogfeed_read(p)
    np.testing.assert_array_equal(g, mine)
    if mode == "lossy":
        mae = np.abs(mine.astype(float) - a)[:3, 50:, 50:].mean()
        assert 0 < mae < 3.5, mae
    else:
        np.testing.assert_array_equal(g, a)
    with rasterio.open(p) as r:
        assert r.compression.name == "webp"
        assert r.colorinterp[:3] == tuple(
            getattr(rasterio.enums.ColorInterp, c) for c in ("red", "green", "blue"))
    n = levels(p)
    assert n == (3 if tile == 128 else 2)
    for k in range(n):
        np.testing.assert_array_equal(gdal_read(p, k), cogfeed_read(p, k + 1))
    ok, why = is_valid_cog(p)
    assert ok, why


def test_lossy_overviews_come_from_the_decoded_full_resolution(tmp_path):
    """Overviews of a lossy file are made from its full resolution as it
    decodes (what gdaladdo does on a JPEG file): level 1 is close to the
    2x2 average of the decoded level 0, nearer than the lossy error."""
    a = smooth_u8(3, 512, 512)
    p = tmp_path / "o.tif"
    cogfeed.write(p, a, tile_size=256, compression="jpeg", quality=95)
    full = cogfeed_read(p).astype(float)
    avg = (full[:, ::2, ::2] + full[:, 1::2, ::2] + full[:, ::2, 1::2] + full[:, 1::2, 1::2]) / 4
    ov = cogfeed_read(p, 1).astype(float)
    assert np.abs(ov - avg).mean() < 1.5


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(dtype="uint16", bands=3, compression="jpeg"), "UnsupportedError",
     "JPEG takes dtype uint8, not uint16"),
    (dict(bands=4, compression="jpeg"), "UnsupportedError", "JPEG takes 1 or 3 bands, not 4"),
    (dict(bands=1, compression="webp"), "UnsupportedError", "WEBP takes 3 or 4 bands, not 1"),
    (dict(dtype="float32", bands=3, compression="webp"), "UnsupportedError",
     "WEBP takes dtype uint8, not float32"),
    (dict(dtype="int64", compression="lerc_zstd"), "UnsupportedError",
     "LERC_ZSTD takes 8-, 16- and 32-bit integers and floats, not dtype int64"),
    (dict(compression="deflate", max_error=0.1), "ArgumentError",
     "max_error is for LERC; DEFLATE is lossless"),
    (dict(bands=3, compression="jpeg", max_error=1), "ArgumentError",
     "max_error is for LERC; JPEG takes quality"),
    (dict(compression="lerc", max_error=-1), "ArgumentError", "max_error -1"),
    (dict(compression="zstd", quality=80), "ArgumentError",
     "quality is for JPEG and WEBP, not ZSTD"),
    (dict(compression="lerc_zstd", quality=80), "ArgumentError",
     "quality is for JPEG and WEBP, not LERC_ZSTD .LERC takes max_error"),
    (dict(bands=3, compression="jpeg", lossless=True), "ArgumentError",
     "lossless is for WEBP; JPEG is always lossy"),
    (dict(bands=3, compression="jpeg", level=5), "ArgumentError",
     "level is for DEFLATE, ZSTD and LERC's layer, not JPEG"),
    (dict(compression="lerc", level=5), "ArgumentError",
     "level is for DEFLATE, ZSTD and LERC's layer, not LERC"),
    (dict(bands=3, compression="webp", predictor=2), "ArgumentError",
     "predictor 2 with WEBP"),
    (dict(bands=3, compression="zstd", photometric="ycbcr"), "ArgumentError",
     "photometric YCbCr .6. is written for JPEG of 3 bands only, not ZSTD of 3"),
    (dict(bands=1, compression="jpeg", photometric="rgb"), "ArgumentError",
     "photometric RGB .2. needs 3 bands or more, not 1"),
    (dict(bands=3, compression="webp", photometric="minisblack"), "ArgumentError",
     "photometric MinIsBlack .1. with WEBP"),
])
def test_codec_options_that_do_not_fit_are_refused(tmp_path, kwargs, exc, match):
    """Each option that does not fit the codec, dtype or bands is refused
    at open, the message naming the writer option; nothing is left."""
    kw = dict(bands=1, dtype="uint8")
    kw.update(kwargs)
    with pytest.raises(getattr(cogfeed, exc), match=match):
        cogfeed.Writer(tmp_path / "x.tif", 64, 64, **kw)
    for bad in (dict(quality=0), dict(quality=101), dict(photometric="cmyk")):
        with pytest.raises(ValueError):
            cogfeed.Writer(tmp_path / "x.tif", 64, 64, compression="jpeg", **bad)
    assert os.listdir(tmp_path) == []


def test_stitcher_writes_lerc_zstd(tmp_path):
    """The stitcher takes the LERC names and max_error too."""
    p = tmp_path / "s.tif"
    pred = np.linspace(0, 1, 2 * 64 * 64, dtype=np.float32).reshape(2, 64, 64)
    with cogfeed.Stitcher(p, [(0, 0, 64, 64)], 2, width=64, height=64,
                          blend="mean", tile_size=64, compression="lerc_zstd",
                          max_error=0.001) as st:
        st.add(pred, (0, 0, 64, 64))
    with rasterio.open(p) as r:
        assert r.compression.name == "lerc_zstd"
        assert np.abs(r.read() - pred).max() <= 0.001


# CRSs without an EPSG code, as EO products have them: written as GDAL's
# user-defined GeoKeys, read back by GDAL (and cogfeed) as the same CRS.
NO_EPSG = [
    # MODIS sinusoidal, on its sphere
    "+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181 +units=m +no_defs",
    # a transverse Mercator of one's own, WGS 84 (base CRS by EPSG code)
    "+proj=tmerc +lat_0=0 +lon_0=15.5 +k=0.9996 +x_0=500000 +y_0=0 +datum=WGS84 +units=m",
    # Lambert azimuthal on the GRS80 ellipsoid alone (user-defined datum)
    "+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m",
    # Albers, NAD83
    "+proj=aea +lat_0=23 +lon_0=-96 +lat_1=29.5 +lat_2=45.5 +x_0=0 +y_0=0 +datum=NAD83 +units=m",
    # polar stereographic, standard parallel 70 N (variant B; NSIDC's grids)
    "+proj=stere +lat_0=90 +lat_ts=70 +lon_0=-45 +x_0=0 +y_0=0 +datum=WGS84 +units=m",
    # polar stereographic at the pole with a scale (variant A)
    "+proj=stere +lat_0=-90 +lon_0=0 +k=0.994 +x_0=2000000 +y_0=2000000 +datum=WGS84 +units=m",
    # Lambert conic, two parallels
    "+proj=lcc +lat_0=46.5 +lon_0=3 +lat_1=49 +lat_2=44 +x_0=700000 +y_0=6600000 "
    "+ellps=GRS80 +units=m",
    # US survey feet
    "+proj=tmerc +lat_0=0 +lon_0=-120 +k=0.9999 +x_0=500000 +y_0=0 +datum=NAD83 +units=us-ft",
    # cylindrical equal area (EASE-Grid 2.0 style)
    "+proj=cea +lat_ts=30 +lon_0=0 +x_0=0 +y_0=0 +datum=WGS84 +units=m",
    # a geographic CRS on an ellipsoid of its own
    "+proj=longlat +a=6378140 +rf=298.257 +no_defs",
    # a Lambert conic on NTF (Paris), a base CRS whose unit is the grad:
    # the parameters (degrees) must not be read in grads
    'PROJCRS["NTF Paris custom",BASEGEOGCRS["NTF (Paris)",DATUM["Nouvelle Triangulation '
    'Francaise (Paris)",ELLIPSOID["Clarke 1880 (IGN)",6378249.2,293.466021293627]],'
    'PRIMEM["Paris",2.5969213,ANGLEUNIT["grad",0.0157079632679489]],ID["EPSG",4807]],'
    'CONVERSION["custom",METHOD["Lambert Conic Conformal (1SP)",ID["EPSG",9801]],'
    'PARAMETER["Latitude of natural origin",46.8,ANGLEUNIT["degree",0.0174532925199433],'
    'ID["EPSG",8801]],PARAMETER["Longitude of natural origin",0,ANGLEUNIT["degree",'
    '0.0174532925199433],ID["EPSG",8802]],PARAMETER["Scale factor at natural origin",'
    '0.99987742,SCALEUNIT["unity",1],ID["EPSG",8805]],PARAMETER["False easting",600000,'
    'LENGTHUNIT["metre",1],ID["EPSG",8806]],PARAMETER["False northing",2200000,'
    'LENGTHUNIT["metre",1],ID["EPSG",8807]]],CS[Cartesian,2],AXIS["easting",east,'
    'ORDER[1],LENGTHUNIT["metre",1]],AXIS["northing",north,ORDER[2],LENGTHUNIT["metre",1]]]',
    # a WKT1 unit without its authority
    'PROJCS["tm",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,'
    '298.257223563]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],'
    'PROJECTION["Transverse_Mercator"],PARAMETER["latitude_of_origin",0],'
    'PARAMETER["central_meridian",21],PARAMETER["scale_factor",0.9996],'
    'PARAMETER["false_easting",500000],PARAMETER["false_northing",0],UNIT["metre",1]]',
]


@pytest.mark.parametrize("crs", NO_EPSG, ids=lambda c: c.split()[0][6:] if c[0] == "+"
                         else c[:8])
def test_crs_without_epsg_code_through_gdal(tmp_path, crs):
    from pyproj import CRS, Transformer
    geographic = "longlat" in crs
    gt = (10.0, 0.001, 0.0, 50.0, 0.0, -0.001) if geographic else UTM["geotransform"]
    p = tmp_path / "custom.tif"
    a = image("uint8", 1, 100, 120)
    cogfeed.write(p, a, grid=cogfeed.Grid(crs, width=120, height=100, geotransform=gt))
    want = CRS.from_user_input(crs)
    with rasterio.open(p) as ds:
        assert ds.read().tobytes() == a.tobytes()
        assert ds.transform.to_gdal() == gt
        got = CRS.from_wkt(ds.crs.to_wkt())
    with cogfeed.open(p) as c:
        ours = CRS.from_wkt(c.crs.to_wkt())
    assert got.is_geographic == want.is_geographic
    # The same CRS, by what it does: the ellipsoid, and points mapped the
    # same (names and datum labels may differ: GDAL calls a user-defined
    # datum "unknown" / "Not specified").
    for other in (got, ours):
        e1, e2 = want.ellipsoid, other.ellipsoid
        assert abs(e1.semi_major_metre - e2.semi_major_metre) < 1e-6, (other, e2)
        assert abs(e1.inverse_flattening - e2.inverse_flattening) < 1e-6, (other, e2)
        if geographic:
            continue
        f1 = Transformer.from_crs(want.geodetic_crs, want, always_xy=True)
        f2 = Transformer.from_crs(want.geodetic_crs, other, always_xy=True)
        for lon, lat in [(-50, 75), (-20, 80), (5, 45), (15, 52), (-100, 35),
                         (10, -80), (120, -75), (2, 47), (-119, 38)]:
            x1, y1 = f1.transform(lon, lat)
            x2, y2 = f2.transform(lon, lat)
            if not (np.isfinite([x1, y1]).all()):
                continue
            assert abs(x1 - x2) < 1e-4 and abs(y1 - y2) < 1e-4, (other.to_wkt(), lon, lat)
    assert is_valid_cog(p)[0]


@pytest.mark.parametrize("crs,match", [
    ('GEOGCRS["g",DATUM["d",ELLIPSOID["e",6378140,298.257]],CS[ellipsoidal,2],'
     'AXIS["longitude",east,ANGLEUNIT["grad",0.0157079632679489]],'
     'AXIS["latitude",north,ANGLEUNIT["grad",0.0157079632679489]]]', "other than degrees"),
    ("+proj=eqc +lat_0=20 +lat_ts=0 +lon_0=0 +datum=WGS84", "Latitude of natural origin"),
    ("+proj=tmerc +lon_0=9 +ellps=bessel +towgs84=598.1,73.7,418.2 +units=m", "datum shift"),
])
def test_crs_the_keys_cannot_carry_is_refused(tmp_path, crs, match):
    """Written as GeoKeys these were read back elsewhere (5.6, 20 degrees
    off, or without the datum shift): refused, naming why."""
    with pytest.raises(cogfeed.UnsupportedError, match=match):
        cogfeed.Writer(tmp_path / "x.tif", grid=cogfeed.Grid(
            crs, width=10, height=10, geotransform=(0, 1, 0, 0, 0, -1)))
    assert os.listdir(tmp_path) == []


def test_compound_crs_writes_its_horizontal_code(tmp_path):
    p = tmp_path / "c.tif"
    g = cogfeed.Grid("EPSG:32633+5773", width=16, height=16, geotransform=UTM["geotransform"])
    cogfeed.write(p, np.zeros((1, 16, 16), "uint8"), grid=g)
    with rasterio.open(p) as ds:
        assert ds.crs.to_epsg() == 32633


def test_tiles_encoded_on_threads_give_the_same_bytes(tmp_path):
    """Writer.write encodes a window's tiles on `threads` threads (None:
    one per CPU; the writer encodes calls from several threads at once):
    the file is the same bytes with 1, 3 or the default; 0 is refused."""
    rng = np.random.default_rng(5)
    a = rng.integers(0, 4000, (2, 700, 900)).astype("uint16")
    m = rng.random((700, 900)) > 0.1
    out = []
    for t in (1, 3, None):
        p = tmp_path / ("t%s.tif" % t)
        cogfeed.write(p, a, mask=m, grid=grid(900, 700), tile_size=128, threads=t)
        out.append(p.read_bytes())
    assert out[0] == out[1] == out[2]
    with pytest.raises(ValueError, match="threads"):
        cogfeed.Writer(tmp_path / "x.tif", 10, 10, threads=0)
    # `threads` reaches the C writer (its encoding slots and overview
    # pass, cf_writer_options.threads; test_cog_write.c counts the threads
    # it starts): the extension passes what it is given, and C checks it
    from cogfeed._cogfeed import _Writer
    with pytest.raises(cogfeed.ArgumentError, match="threads -1"):
        _Writer(str(tmp_path / "x.tif"), 10, 10, 1, 1, 512, 8, 0, 0, -1, 0, None,
                None, None, None, None, threads=-1)
    assert not (tmp_path / "x.tif").exists()


def test_threaded_write_raises_the_tiles_own_error(tmp_path):
    """A write that fails on one tile's thread (the spool cannot grow:
    RLIMIT_FSIZE) raises that tile's error (InputOutputError, errno's
    words), not the StateError the other threads' tiles then meet ("an
    earlier call failed"): five runs on 4 threads, in a child process
    (the limit is its own)."""
    import subprocess
    import sys
    code = r'''
import resource, signal, sys, numpy as np, cogfeed
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (400000, 400000))
a = np.random.default_rng(0).integers(0, 60000, (1, 2048, 2048)).astype("uint16")
for rep in range(5):
    try:
        cogfeed.write(sys.argv[1] + "/x%d.tif" % rep, a, tile_size=128, threads=4)
        print("written")
    except cogfeed.Error as e:
        print(type(e).__name__, str(e)[:300].replace("\n", " "))
'''
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 5, r.stdout + r.stderr
    for ln in lines:
        assert ln.startswith("InputOutputError") and "File too large" in ln, ln
