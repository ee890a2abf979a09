"""Tiles copied from one COG into another without encoding them again:
Cog.tile_info / decode_tile with mask=True (cf_cog_mask_chunk_info,
cf_cog_decode_mask_chunk) and Writer.write_encoded_tile
(cf_writer_write_encoded_tile), as predict assembles a distributed run's
shares.  The copy is byte for byte the file written from the pixels (every
codec the writer has); GDAL reads it; bad bytes are refused naming the
tile.  (An object store: tests/python/test_writer_remote.py.)"""

import time

import numpy as np
import pytest

import cogfeed

rasterio = pytest.importorskip("rasterio")

W, H, T = 300, 200, 64
GRID = cogfeed.Grid(32633, width=W, height=H,
                    geotransform=(500000.0, 10.0, 0.0, 4100000.0, 0.0, -10.0))


def image(dtype, bands):
    y, x = np.mgrid[0:H, 0:W]
    a = np.stack([(x * (b + 1) + y * 3 + (x * y) % 17) % 251 for b in range(bands)])
    return a.astype(dtype)


def mask_of():
    y, x = np.mgrid[0:H, 0:W]
    return ((x // 9 + y // 7) % 3 != 0) & (x < 250)


def stored(path, mask):
    data = open(path, "rb").read()
    out = {}
    with cogfeed.open(path) as c:
        for k in range(c.tile_info(0)["count"]):
            ti = c.tile_info(k)
            b = data[ti["offset"]:ti["offset"] + ti["byte_count"]]
            mb = None
            if mask and b:
                mi = c.tile_info(k, mask=True)
                assert mi["bits"] == 1 and mi["shape"] == (T, T, 1)
                mb = data[mi["offset"]:mi["offset"] + mi["byte_count"]]
            out[ti["col"], ti["row"]] = (b, mb)
    return out


CODECS = [("deflate", "uint16", 2, {}), ("zstd", "float32", 1, {}),
          ("lerc_zstd", "float32", 1, {"max_error": 0.5}), ("jpeg", "uint8", 3, {}),
          ("webp", "uint8", 3, {"quality": 80}), ("none", "int16", 2, {})]


@pytest.mark.parametrize("compression,dtype,bands,extra", CODECS)
@pytest.mark.parametrize("mask", [False, True])
def test_copy_equals_the_write_from_pixels(tmp_path, compression, dtype, bands, extra,
                                           mask):
    a = image(dtype, bands)
    m = mask_of() if mask else None
    ref, share, copy = (str(tmp_path / n) for n in ("ref.tif", "share.tif", "copy.tif"))
    kw = dict(grid=GRID, compression=compression, tile_size=T, **extra)
    cogfeed.write(ref, a, mask=m, **kw)
    cogfeed.write(share, a, mask=m, overviews=0, **kw)
    tiles = stored(share, mask)
    with cogfeed.Writer(copy, W, H, bands, dtype, mask=mask, **kw) as w:
        for (tx, ty), (b, mb) in sorted(tiles.items(), reverse=True):
            w.write_encoded_tile(tx, ty, b, mb)
    assert open(copy, "rb").read() == open(ref, "rb").read()
    with rasterio.open(copy) as r:
        assert r.overviews(1)
        if not mask:
            with rasterio.open(ref) as q:
                np.testing.assert_array_equal(r.read(), q.read())


def test_decode_mask_tile_gives_the_mask(tmp_path):
    a, m = image("uint8", 1), mask_of()
    p = str(tmp_path / "m.tif")
    cogfeed.write(p, a, mask=m, grid=GRID, tile_size=T)
    data = open(p, "rb").read()
    with cogfeed.open(p) as c:
        k = 1 * c.tile_info(0)["count"] // 4 + 1  # some inner tile
        mi = c.tile_info(k, mask=True)
        t = c.decode_tile(data[mi["offset"]:mi["offset"] + mi["byte_count"]], k, mask=True)
        x0, y0 = mi["col"] * T, mi["row"] * T
        want = c.read_mask(window=(x0, y0, T, T))
        assert t.shape == (T, T, 1) and t.dtype == np.uint8
        np.testing.assert_array_equal(t[:, :, 0], want)
    plain = str(tmp_path / "plain.tif")
    cogfeed.write(plain, a, grid=GRID, tile_size=T)
    with cogfeed.open(plain) as c:
        with pytest.raises(cogfeed.Error, match="no internal mask"):
            c.tile_info(0, mask=True)


def test_bad_encoded_tiles_are_refused(tmp_path):
    a = image("uint16", 2)
    share = str(tmp_path / "share.tif")
    cogfeed.write(share, a, grid=GRID, tile_size=T, overviews=0)
    tiles = stored(share, False)
    junk = b"\x5a" * 100
    # no overviews: checked at once, the writer goes on
    p = str(tmp_path / "flat.tif")
    with cogfeed.Writer(p, W, H, 2, "uint16", grid=GRID, tile_size=T, overviews=0) as w:
        with pytest.raises(cogfeed.Error, match=r"tile 1,2, given encoded"):
            w.write_encoded_tile(1, 2, junk)
        with pytest.raises(cogfeed.Error, match="without one"):
            w.write_encoded_tile(0, 0, tiles[0, 0][0], b"\x01")
        with pytest.raises(cogfeed.Error, match="above"):
            w.write_encoded_tile(0, 0, bytes(2 * T * T * 4 + 2000))
        for (tx, ty), (b, _) in tiles.items():
            w.write_encoded_tile(tx, ty, b)
    with cogfeed.open(p) as c:
        np.testing.assert_array_equal(c.read(), a)
    # with overviews: the overview pass decodes it and names it; nothing left
    p2 = tmp_path / "ov.tif"
    w = cogfeed.Writer(str(p2), W, H, 2, "uint16", grid=GRID, tile_size=T)
    w.write_encoded_tile(2, 1, junk)
    with pytest.raises(cogfeed.Error, match=r"tile 2,1 of level 0, read back"):
        w.close()
    assert not p2.exists() and not list(tmp_path.glob("ov.tif*"))
    # a writer with a mask wants the mask's bytes with each tile
    with pytest.raises(cogfeed.Error, match="no mask tile"):
        with cogfeed.Writer(str(tmp_path / "m.tif"), W, H, 2, "uint16", grid=GRID,
                            tile_size=T, mask=True) as w:
            w.write_encoded_tile(0, 0, tiles[0, 0][0])


def test_tiles_of_a_gdal_cog_copied(tmp_path):
    """Tiles GDAL wrote (its COG driver: DEFLATE, predictor 2, an internal
    mask) copied into a Writer with the same parameters: GDAL reads the
    copy pixel for pixel and mask for mask (its bytes are GDAL's, so the
    file is not cogfeed's own write; its overviews are cogfeed's)."""
    a, m = image("uint16", 2), mask_of()
    src = str(tmp_path / "gdal.tif")
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with rasterio.open(src, "w", driver="COG", width=W, height=H, count=2,
                           dtype="uint16", crs="EPSG:32633",
                           transform=rasterio.Affine(10, 0, 500000, 0, -10, 4100000),
                           blocksize=T, compress="DEFLATE", predictor=2) as r:
            r.write(a)
            r.write_mask(m.astype(np.uint8) * 255)
    tiles = stored(src, True)
    out = str(tmp_path / "copy.tif")
    with cogfeed.Writer(out, W, H, 2, "uint16", grid=GRID, tile_size=T,
                        compression="deflate", mask=True) as w:
        for (tx, ty), (b, mb) in tiles.items():
            w.write_encoded_tile(tx, ty, b, mb)
    with rasterio.open(out) as r, rasterio.open(src) as q:
        np.testing.assert_array_equal(r.read(), q.read())
        np.testing.assert_array_equal(r.read_masks(1), q.read_masks(1))
        assert r.overviews(1)


def test_decode_an_8_bit_mask_tile(tmp_path):
    """An 8-bit internal mask (a TIFF's, as GDAL and the reader accept):
    decode_tile(mask=True) gives its bytes as read_mask does (255 gave
    255 * 255 mod 256 = 1 before)."""
    import struct
    t = 16
    img = (np.arange(t * t) % 251).astype(np.uint8).reshape(t, t)
    msk = np.zeros((t, t), np.uint8)
    msk[:, :8] = 255
    msk[3, 10] = 7  # any non-zero is valid

    def ifd(sub, phot, data_off, nxt):
        e = [(256, 3, 1, t), (257, 3, 1, t), (258, 3, 1, 8), (259, 3, 1, 1),
             (262, 3, 1, phot), (277, 3, 1, 1), (284, 3, 1, 1), (322, 3, 1, t),
             (323, 3, 1, t), (324, 4, 1, data_off), (325, 4, 1, t * t), (339, 3, 1, 1)]
        if sub:
            e.append((254, 4, 1, sub))
        b = struct.pack("<H", len(e))
        for tag, typ, cnt, val in sorted(e):
            b += struct.pack("<HHII", tag, typ, cnt, val)
        return b + struct.pack("<I", nxt)
    i1 = 8 + 2 + 12 * 12 + 4
    d0 = i1 + 2 + 13 * 12 + 4
    buf = (b"II*\0" + struct.pack("<I", 8) + ifd(0, 1, d0, i1) + ifd(4, 4, d0 + t * t, 0)
           + img.tobytes() + msk.tobytes())
    p = tmp_path / "m8.tif"
    p.write_bytes(buf)
    with cogfeed.open(str(p)) as c:
        mi = c.tile_info(0, mask=True)
        assert mi["bits"] == 8
        got = c.decode_tile(buf[mi["offset"]:mi["offset"] + mi["byte_count"]], 0, mask=True)
        np.testing.assert_array_equal(got[:, :, 0], c.read_mask())
        np.testing.assert_array_equal(got[:, :, 0], msk)


def test_empty_mask_bytes_are_none_and_tile_indices_are_checked(tmp_path):
    a = image("uint16", 2)
    share = str(tmp_path / "share.tif")
    cogfeed.write(share, a, grid=GRID, tile_size=T, overviews=0)
    tiles = stored(share, False)
    with cogfeed.Writer(str(tmp_path / "o.tif"), W, H, 2, "uint16", grid=GRID,
                        tile_size=T, overviews=0) as w:
        w.write_encoded_tile(0, 0, tiles[0, 0][0], b"")  # b"": no mask, as None
        with pytest.raises(OverflowError):
            w.write_encoded_tile(2 ** 32 + 1, 0, tiles[1, 0][0])
        with pytest.raises(OverflowError):
            w.write_tile(2 ** 32, 0, a[:, :T, :T])
        with pytest.raises(OverflowError):
            w.write_encoded_tile(-1, 0, tiles[1, 0][0])
        for (tx, ty), (b, _) in tiles.items():
            w.write_encoded_tile(tx, ty, b)


def level_tiles(path, level, mask):
    """{(tx, ty): (bytes, mask bytes)} of a level's stored tiles."""
    data = open(path, "rb").read()
    out = {}
    with cogfeed.open(path) as c:
        w = c.width if level == 0 else c.overviews[level - 1][0]
        ntx = -(-w // c.tile_width)
        for k in range(c.tile_info(0, level)["count"]):
            ti = c.tile_info(k, level)
            b = data[ti["offset"]:ti["offset"] + ti["byte_count"]]
            mb = None
            if mask and b:
                mi = c.tile_info(k, level, mask=True)
                mb = data[mi["offset"]:mi["offset"] + mi["byte_count"]]
            out[(k % ntx, k // ntx)] = (b, mb)
    return out


@pytest.mark.parametrize("mask", [False, True])
def test_share_writers_assemble_the_one_writers_file(tmp_path, mask):
    """Writer(share=) for 3 shares of an image's rows of tiles (16 px
    tiles: 13 rows, 6 levels), their carries passed in share order, and
    each share's tiles of every level copied into a
    Writer(overviews_given=True): the file a single Writer writes, byte
    for byte (the C test, tests/unit/test_cog_share.c, runs many sizes,
    dtypes and kernels).  The assembling writer decodes nothing: tiles of
    garbage are kept as they are."""
    a = image("uint16", 2)
    m = mask_of() if mask else None
    opts = dict(grid=GRID, tile_size=16, compression="zstd", nodata=7, mask=mask)
    one = tmp_path / "one.tif"
    with cogfeed.Writer(one, bands=2, dtype="uint16", **opts) as w:
        w.write(a, mask=m)
        levels = w.levels
    assert levels == 6
    rows = -(-H // 16)
    shares = [(0, 4), (4, 5), (9, rows - 9)]
    writers, carry, made = [], None, []
    for k, (r0, n) in enumerate(shares):
        w = cogfeed.Writer(tmp_path / ("s%d.tif" % k), bands=2, dtype="uint16",
                           share=(r0, n), **opts)
        y0, y1 = r0 * 16, min((r0 + n) * 16, H)
        w.write(a[:, y0:y1], 0, y0, mask=None if m is None else m[y0:y1])
        w.share_build()
        writers.append(w)
    for w in writers:  # in share order
        carry = w.share_carry(carry)
        made.append([w.share_tiles(level) for level in range(levels)])
        w.close()
    two = tmp_path / "two.tif"
    with cogfeed.Writer(two, bands=2, dtype="uint16", overviews_given=True, **opts) as w:
        for k in range(len(shares)):
            for level in range(levels):
                t0, t1 = made[k][level]
                for (tx, ty), (b, mb) in level_tiles(tmp_path / ("s%d.tif" % k), level,
                                                     mask).items():
                    if t0 <= ty < t1:
                        w.write_encoded_tile(tx, ty, b, mb, level=level)
    assert two.read_bytes() == one.read_bytes()
    # every row of tiles of a level from exactly one share, in order
    for level in range(levels):
        ends = [made[k][level] for k in range(len(shares)) if made[k][level][1] >
                made[k][level][0]]
        assert all(a1 == b0 for (_, a1), (b0, _) in zip(ends, ends[1:]))
    bad = tmp_path / "bad.tif"
    with cogfeed.Writer(bad, 64, 64, tile_size=16, overviews_given=True) as w:
        w.write_encoded_tile(0, 0, b"not deflate at all", level=1)
    assert bad.exists()


def test_share_steps_hold_off_close_from_another_thread(tmp_path):
    """close() (or abort()) while another thread is inside share_build is
    refused (RuntimeError), as while it is inside write_tile: it would
    free the writer under the build (and, under share_carry, the carry
    being copied out)."""
    import threading
    rng = np.random.default_rng(1)
    a = rng.random((1, 4096, 4096), dtype=np.float32)
    w = cogfeed.Writer(tmp_path / "big.tif", 4096, 4096, 1, "float32", share=(0, 8),
                       compression="deflate", level=9)
    w.write(a)
    started, errs = threading.Event(), []

    def build():
        started.set()
        try:
            w.share_build()
        except BaseException as e:  # (reported below)
            errs.append(e)
    t = threading.Thread(target=build)
    t.start()
    started.wait()
    time.sleep(0.05)
    with pytest.raises(RuntimeError, match="another thread is inside"):
        w.close()
    with pytest.raises(RuntimeError, match="another thread is inside"):
        w.abort()
    t.join()
    assert not errs
    w.share_carry(None)
    w.close()
    assert (tmp_path / "big.tif").exists()


def test_share_writer_refusals(tmp_path):
    """A tile outside the share, a tile after share_build, a later share
    without the carry before it, a carry of another image, a failed
    share's carry, close before the carry, and an overview tile for a
    writer that makes its overviews: refused, naming what."""
    p = tmp_path / "s.tif"
    w = cogfeed.Writer(p, 100, 100, tile_size=16, share=(2, 3))
    z = np.zeros((16, 16), np.uint8)
    with pytest.raises(cogfeed.ArgumentError, match="outside the share"):
        w.write_tile(0, 0, z)
    w.write_tile(0, 2, z)
    with pytest.raises(cogfeed.StateError, match="share_build first"):
        w.share_carry(None)
    w.share_build()
    with pytest.raises(cogfeed.StateError, match="after cf_writer_share_build"):
        w.write_tile(1, 2, z)
    with pytest.raises(cogfeed.ArgumentError, match="needs the carry"):
        w.share_carry(None)
    other = cogfeed.Writer(tmp_path / "o.tif", 101, 100, tile_size=16, share=(0, 2))
    other.share_build()
    with pytest.raises(cogfeed.FormatError, match="does not fit"):
        w.share_carry(other.share_carry(None))
    other.abort()
    w.abort()
    w = cogfeed.Writer(p, 100, 100, tile_size=16, share=(2, 3))
    w.share_build()
    from cogfeed._cogfeed import SHARE_FAILED_CARRY
    with pytest.raises(cogfeed.StateError, match="share before this one failed"):
        w.share_carry(SHARE_FAILED_CARRY)
    w.abort()
    w = cogfeed.Writer(p, 100, 100, tile_size=16, share=(0, 3))
    w.share_build()
    with pytest.raises(cogfeed.StateError, match="closes after"):
        w.close()
    assert not p.exists()
    with pytest.raises(ValueError, match="share"):
        cogfeed.Writer(p, 100, 100, tile_size=16, share=(0, 0))
    # past 2**32: refused, not wrapped onto another share
    for bad in ((2 ** 32 + 1, 2), (1, 2 ** 32 + 2)):
        with pytest.raises(OverflowError):
            cogfeed.Writer(p, 64, 64, tile_size=16, share=bad)
        with pytest.raises(OverflowError):
            cogfeed.Stitcher(p, [(0, 0, 16, 16)], 1, width=64, height=64, tile_size=16,
                             share=bad)
    with pytest.raises(cogfeed.ArgumentError, match="overviews_given"):
        cogfeed.Writer(p, 100, 100, tile_size=16, share=(0, 1), overviews_given=True)
    with cogfeed.Writer(p, 100, 100, tile_size=16) as w:
        with pytest.raises(cogfeed.ArgumentError, match="makes its overviews"):
            w.write_encoded_tile(0, 0, b"x", level=1)
        w.write(np.zeros((100, 100), np.uint8))
