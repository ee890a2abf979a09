"""cogfeed.Writer(mask=True) / cogfeed.write(mask=): an internal mask band
as GDAL writes one (GDAL_TIFF_INTERNAL_MASK, `gdal_translate -mask`, the
COG driver): every level's mask and pixels equal, bit for bit, what GDAL
3.10 (rasterio's wheel) makes of the same image and mask, overviews
included (average leaves masked pixels out, the mask's own overview is
resampled by the same kernel, nearest masks straight from the full
resolution); the layout is the COG driver's (directories image, mask,
overviews, overview masks; each mask tile right after its image tile);
cogfeed reads the masks back; rio-cogeo says it is a valid COG."""

import struct

import numpy as np
import pytest

import cogfeed

rasterio = pytest.importorskip("rasterio")

from test_writer import grid, is_valid_cog  # noqa: E402


def scene(dtype, h, w, seed=0):
    """Noise (so that any pixel taken from the wrong place shows) and a
    mask: a disc with holes."""
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        a = rng.normal(0, 100, (2, h, w)).astype(dtype)
    else:
        a = rng.integers(0, 250 if dtype == "uint8" else 5000, (2, h, w)).astype(dtype)
    yy, xx = np.ogrid[:h, :w]
    m = ((yy - h / 2) ** 2 + (xx - w / 3) ** 2 < (h / 3) ** 2) & (rng.random((h, w)) > 0.3)
    return a, m


def gdal_reference(path, a, m, tile, resampling, levels):
    """GDAL's file of the same image and mask: a tiled GTiff with an
    internal mask, overviews built by GDAL (gdaladdo's sizes, as the
    writer's)."""
    from rasterio.enums import Resampling
    b, h, w = a.shape
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with rasterio.open(path, "w", driver="GTiff", width=w, height=h, count=b,
                           dtype=a.dtype, tiled=True, blockxsize=tile,
                           blockysize=tile) as d:
            d.write(a)
            d.write_mask(np.where(m, 255, 0).astype(np.uint8))
        with rasterio.open(path, "r+") as d:
            d.build_overviews([2 ** (k + 1) for k in range(levels)],
                              getattr(Resampling, resampling))


def levels_equal(ours, ref, n):
    for k in [None] + list(range(n)):
        kw = {} if k is None else {"overview_level": k}
        with rasterio.open(ours, **kw) as x, rasterio.open(ref, **kw) as y:
            np.testing.assert_array_equal(x.read_masks(1), y.read_masks(1),
                                          err_msg="mask, level %s" % k)
            np.testing.assert_array_equal(x.read(), y.read(), err_msg="pixels, level %s" % k)
    with rasterio.open(ours) as x:
        assert all([f.name for f in b] == ["per_dataset"] for b in x.mask_flag_enums)


@pytest.mark.parametrize("size", [(1200, 1000), (1201, 999), (300, 170)])
@pytest.mark.parametrize("resampling", ["average", "nearest", "mode"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "float32"])
def test_mask_and_overviews_equal_gdal(tmp_path, size, resampling, dtype):
    w, h = size
    a, m = scene(dtype, h, w)
    tile = 256 if w > 500 else 64
    ours, ref = tmp_path / "ours.tif", tmp_path / "ref.tif"
    cogfeed.write(ours, a, mask=m, grid=grid(w, h), tile_size=tile,
                  overview_resampling=resampling)
    with rasterio.open(ours) as x:
        n = len(x.overviews(1))
    assert n >= 2
    gdal_reference(ref, a, m, tile, resampling, n)
    levels_equal(ours, ref, n)
    ok, why = is_valid_cog(ours)
    assert ok, why
    # cogfeed reads its masks back, every level
    with cogfeed.open(str(ours)) as c:
        assert c.has_mask
        for k in range(n + 1):
            with rasterio.open(ours, **({} if not k else {"overview_level": k - 1})) as x:
                np.testing.assert_array_equal(c.read_mask(level=k), x.read_masks(1))


@pytest.mark.parametrize("w,h,valid", [(1999, 1, (0, 1)), (1999, 2, (0, 1)), (63, 1, (0, 1)),
                                        (1999, 1, (0, 998)), (1999, 1999, (100, 100))])
def test_lone_valid_pixel_at_a_window_edge(tmp_path, w, h, valid):
    """An odd size spreads an overview pixel over source pixels it covers
    only in part: where the only valid one is such an edge pixel, GDAL
    still calls the overview pixel valid (a weighted mean of 0 / 255
    rounded would lose it: the writer's first version did)."""
    a = np.full((1, h, w), 100, np.uint8)
    m = np.zeros((h, w), bool)
    if valid[0] == 0:
        m[:, valid[1]] = True       # one column
    else:
        m[:valid[0], :valid[1]] = True  # a block: its corner at a window edge
    ours, ref = tmp_path / "ours.tif", tmp_path / "ref.tif"
    cogfeed.write(ours, a, mask=m, grid=grid(w, h), tile_size=16 if h < 16 else 256)
    with rasterio.open(ours) as x:
        n = len(x.overviews(1))
    gdal_reference(ref, a, m, 16 if h < 16 else 256, "average", n)
    levels_equal(ours, ref, n)


def test_even_size_equals_gdal_cog_driver(tmp_path):
    """On an even size the COG driver's overviews (its sizes round down,
    gdaladdo's up) are the writer's: the same levels, masks and pixels as
    `gdal_translate -of COG` of the same image and mask."""
    from rasterio.shutil import copy as rcopy
    a, m = scene("uint8", 1000, 1200, seed=2)
    ours, src, ref = tmp_path / "ours.tif", tmp_path / "src.tif", tmp_path / "ref.tif"
    cogfeed.write(ours, a, mask=m, tile_size=256, overview_resampling="average")
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with rasterio.open(src, "w", driver="GTiff", width=1200, height=1000, count=2,
                           dtype="uint8", tiled=True) as d:
            d.write(a)
            d.write_mask(np.where(m, 255, 0).astype(np.uint8))
        rcopy(src, ref, driver="COG", compress="DEFLATE", blocksize=256,
              resampling="AVERAGE")
    with rasterio.open(ref) as y:
        n = len(y.overviews(1))
    levels_equal(ours, ref, n)


def tiff_dirs(path):
    """Each directory's NewSubfileType and (offsets, byte counts), of a
    little-endian classic TIFF."""
    b = open(path, "rb").read()
    assert b[:4] == b"II*\0"
    off = struct.unpack("<I", b[4:8])[0]
    out = []
    size = {3: 2, 4: 4}
    while off:
        n = struct.unpack("<H", b[off:off + 2])[0]
        tags = {}
        for e in range(n):
            tag, typ, cnt = struct.unpack("<HHI", b[off + 2 + 12 * e:off + 10 + 12 * e])
            raw = b[off + 10 + 12 * e:off + 14 + 12 * e]
            if typ in size and cnt * size[typ] > 4:
                at = struct.unpack("<I", raw)[0]
                raw = b[at:at + cnt * size[typ]]
            if typ in size:
                tags[tag] = struct.unpack("<%d%s" % (cnt, "H" if typ == 3 else "I"),
                                          raw[:cnt * size[typ]])
        out.append((tags.get(254, (0,))[0], tags[324], tags[325], tags[258], tags[259]))
        off = struct.unpack("<I", b[off + 2 + 12 * n:off + 6 + 12 * n])[0]
    return out


def test_layout_is_the_cog_drivers(tmp_path):
    """Directories: image, its mask (NewSubfileType 4), the overviews (1),
    their masks (5), as GDAL's COG driver orders them; masks 1 bit
    DEFLATE; each mask tile right after its image tile, the smallest
    level first: the bytes of a tile and its mask are one range."""
    a, m = scene("uint16", 700, 900, seed=1)
    p = tmp_path / "m.tif"
    cogfeed.write(p, a, mask=m, tile_size=128, compression="zstd")
    dirs = tiff_dirs(p)
    kinds = [d[0] for d in dirs]
    assert kinds == [0, 4, 1, 1, 1, 5, 5, 5], kinds
    for d in dirs:
        if d[0] in (4, 5):
            assert d[3] == (1,) and d[4] == (8,)
    nlev = len(dirs) // 2
    image = [dirs[0]] + dirs[2:2 + nlev - 1]
    masks = [dirs[1]] + dirs[2 + nlev - 1:]
    prev_end = None
    for lvl in reversed(range(nlev)):  # file order: smallest level first
        io, ic = image[lvl][1], image[lvl][2]
        mo, mc = masks[lvl][1], masks[lvl][2]
        for i in range(len(io)):
            assert mo[i] == io[i] + ic[i], (lvl, i)
            if prev_end is not None:
                assert io[i] == prev_end, (lvl, i)
            prev_end = mo[i] + mc[i]
    ok, why = is_valid_cog(p)
    assert ok, why


def test_jpeg_rgb_with_a_mask(tmp_path):
    """GDAL's usual pairing: JPEG (YCbCr) imagery, where no nodata value
    survives the codec, with a 1-bit mask: GDAL reads the mask exactly and
    the pixels within JPEG's error; a valid COG."""
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:600, 0:800]
    a = np.stack([(np.sin(x / 30 + b) * 80 + 120 + y / 20) for b in range(3)])
    a = (a + rng.normal(0, 2, a.shape)).clip(0, 255).astype("uint8")
    m = (x - 400) ** 2 + (y - 300) ** 2 < 280 ** 2
    p = tmp_path / "rgb.tif"
    cogfeed.write(p, a, mask=m, compression="jpeg", tile_size=256, grid=grid(800, 600))
    with rasterio.open(p) as r:
        np.testing.assert_array_equal(r.read_masks(1), np.where(m, 255, 0))
        assert np.abs(r.read().astype(int) - a).mean() < 3
        assert r.compression.name == "jpeg"
    ok, why = is_valid_cog(p)
    assert ok, why


def test_tiles_with_and_without_masks_and_never_written(tmp_path):
    """A tile written without a mask is all valid, one never written is
    not valid (and sparse); masked arrays bring their mask; masks are
    refused on a writer without one, and of the wrong shape."""
    a, m = scene("uint8", 256, 256, seed=3)
    p = tmp_path / "t.tif"
    with cogfeed.Writer(p, 256, 256, 2, "uint8", tile_size=128, mask=True) as w:
        w.write_tile(0, 0, a[:, :128, :128], mask=m[:128, :128])
        w.write_tile(1, 0, a[:, :128, 128:])
        w.write_tile(0, 1, a[:, 128:, :128], mask=np.zeros((128, 128), bool))
        with pytest.raises(ValueError, match="shape"):
            w.write_tile(1, 1, a[:, 128:, 128:], mask=m[:127, :128])
    with rasterio.open(p) as r:
        got = r.read_masks(1)
    want = np.zeros((256, 256), np.uint8)
    want[:128, :128] = np.where(m[:128, :128], 255, 0)
    want[:128, 128:] = 255
    np.testing.assert_array_equal(got, want)
    with cogfeed.Writer(tmp_path / "u.tif", 256, 256, 2, "uint8") as w:
        with pytest.raises(ValueError, match="without one"):
            w.write_tile(0, 0, a[:, :128, :128], mask=m[:128, :128])
        w.abort()
    ma = np.ma.masked_array(a, mask=np.broadcast_to(~m, a.shape).copy())
    ma.mask[1, 10, 10] = True  # one band masked: the pixel is not valid
    cogfeed.write(tmp_path / "ma.tif", ma, tile_size=128)
    with rasterio.open(tmp_path / "ma.tif") as r:
        want = np.where(m, 255, 0)
        want[10, 10] = 0
        np.testing.assert_array_equal(r.read_masks(1), want)
        np.testing.assert_array_equal(r.read(), a)


def test_masked_arrays_everywhere_and_never_dropped(tmp_path):
    """A masked array's mask is taken by write_tile as by write; a writer
    without a mask refuses masked pixels rather than writing the data
    under them as valid; cogfeed.write(..., mask=False) writes the data
    with no mask band; the binding takes only byte masks."""
    a = np.arange(64 * 64, dtype=np.uint8).reshape(64, 64)
    ma = np.ma.masked_array(a, mask=a < 100)
    with cogfeed.Writer(tmp_path / "t.tif", 64, 64, 1, "uint8", tile_size=64, mask=True) as w:
        w.write_tile(0, 0, ma)
    with rasterio.open(tmp_path / "t.tif") as r:
        np.testing.assert_array_equal(r.read_masks(1), np.where(a < 100, 0, 255))
    with cogfeed.Writer(tmp_path / "n.tif", 64, 64, 1, "uint8", tile_size=32) as w:
        with pytest.raises(ValueError, match="1600 masked pixels"):
            w.write(ma)
        with pytest.raises(ValueError, match="masked pixels"):
            w.write_tile(0, 0, ma[:32, :32])
        w.write(np.ma.masked_array(a))  # nothing masked: its data
    with rasterio.open(tmp_path / "n.tif") as r:
        np.testing.assert_array_equal(r.read(1), a)
    cogfeed.write(tmp_path / "f.tif", ma, mask=False, tile_size=32)
    with rasterio.open(tmp_path / "f.tif") as r:
        assert all([f.name for f in b] == ["all_valid"] for b in r.mask_flag_enums)
        np.testing.assert_array_equal(r.read(1), a)
    w = cogfeed.Writer(tmp_path / "b.tif", 64, 64, 1, "uint8", tile_size=64, mask=True)
    with pytest.raises(ValueError, match="2-byte items"):
        w._c.write_tile(0, 0, a, np.ones((64, 32), np.uint16))
    w.abort()
