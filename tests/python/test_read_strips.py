"""Window reads over strip files (issue 25 item 10): decoded strips kept in
the IO's cache of decoded chunks, and strips decoded only down to the last
row a window needs.

- Every window of strip files of each codec (DEFLATE, LZW, JPEG, old-style
  JPEG, PackBits, ZSTD, uncompressed; strips of 16 rows and one strip of the
  whole image) equals GDAL's, with the cache and without it (cache_bytes=-1),
  in an order that meets partial strips cached and then needed lower down.
- A second window over the same strips decodes no strip again (the
  chunks_decoded and cache_hits statistics of Cog.stats()).
- A window near the top of a tall DEFLATE, LZW, JPEG or old-style JPEG strip
  decodes fewer bytes than the strip (decoded_bytes): its first rows,
  rounded up to 32; a window lower down decodes the whole strip once, after
  which the windows beside it decode nothing.
- Threads reading windows over the same strips together decode each strip
  once (the cache's claim protocol), with the right pixels.
"""
import os
import sys
import threading

import numpy as np
import pytest
import rasterio
from rasterio.windows import Window

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import format_fixtures as F  # noqa: E402

import cogfeed  # noqa: E402

W, H = 300, 1000


def _image(nb=3, dtype="uint8"):
    y, x = np.mgrid[0:H, 0:W]
    bands = [(x * 3 + y) % 251, (x * y // 7) % 253, ((x // 9 + y // 11) % 8) * 31]
    return np.stack(bands[:nb]).astype(dtype)


CODECS = [
    ("DEFLATE", {"predictor": 2}),
    ("LZW", {"predictor": 2}),
    ("JPEG", {}),
    ("PACKBITS", {}),
    ("ZSTD", {}),
    ("NONE", {}),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("strips")
    out = {}
    img = _image()
    for comp, extra in CODECS:
        for rps in (16, H):
            p = str(d / ("%s_%d.tif" % (comp, rps)))
            with rasterio.open(p, "w", driver="GTiff", width=W, height=H, count=3,
                               dtype="uint8", tiled=False, blockysize=rps, compress=comp,
                               **extra) as f:
                f.write(img)
            out[(comp, rps)] = p
    # 16-bit LZW with the horizontal predictor: the predictor undone on the
    # rows decoded only
    p = str(d / "LZW16_whole.tif")
    with rasterio.open(p, "w", driver="GTiff", width=W, height=H, count=1, dtype="uint16",
                       tiled=False, blockysize=H, compress="LZW", predictor=2) as f:
        f.write((_image(1, "uint16") * 257).astype("uint16"))
    out[("LZW16", H)] = p
    # old-style JPEG, one strip of the whole image (nothing writes it: built
    # from GDAL's JPEG strips, format_fixtures.ojpeg_file)
    p = str(d / "OJPEG_whole.tif")
    F.ojpeg_file((3, 400, 200), "whole", data=_image()[:, :400, :200])(p)
    out[("OJPEG", 400)] = p
    return out


def _gdal(path, win):
    x, y, w, h = win
    with rasterio.open(path) as r:
        return r.read(window=Window(x, y, w, h), boundless=True, fill_value=0)


# windows over a tall strip in an order that meets a partial strip cached
# (the first), then one needing lower rows of it, then their neighbours
WINDOWS = [(0, 0, 100, 40), (100, 10, 100, 30), (50, 300, 120, 90), (0, 700, 300, 300),
           (200, 950, 100, 50), (250, 0, 100, 100), (-20, 990, 60, 30)]


@pytest.mark.parametrize("comp", [c for c, _ in CODECS] + ["LZW16", "OJPEG"])
@pytest.mark.parametrize("rps", [16, H])
@pytest.mark.parametrize("cache", [0, -1])
def test_windows_match_gdal(files, comp, rps, cache):
    if comp in ("LZW16", "OJPEG"):
        if rps == 16:
            pytest.skip("one tall strip only")
        rps = 400 if comp == "OJPEG" else H
    path = files[(comp, rps)]
    io = cogfeed.IO(cache_bytes=cache)
    with cogfeed.open(path, io) as c:
        for win in WINDOWS:
            a = c.read(win)
            b = _gdal(path, win)
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b, err_msg="%s %s" % (os.path.basename(path), win))
        s = c.stats()
        if cache < 0:
            assert s["cache_hits"] == 0 and s["cache_misses"] == 0


def test_second_window_decodes_no_strip_again(files):
    io = cogfeed.IO()
    with cogfeed.open(files[("DEFLATE", 16)], io) as c:
        c.read((0, 0, 100, 64))
        s1 = c.stats()
        assert s1["chunks_decoded"] == 4 and s1["cache_misses"] == 4
        # the same strips, other columns
        b = c.read((100, 0, 150, 64))
        s2 = c.stats()
        assert s2["chunks_decoded"] == 4, s2
        assert s2["cache_hits"] == 4, s2
        np.testing.assert_array_equal(b, _gdal(files[("DEFLATE", 16)], (100, 0, 150, 64)))
        # a window reaching one strip further decodes that one only
        c.read((0, 8, 100, 64))
        s3 = c.stats()
        assert s3["chunks_decoded"] == 5 and s3["cache_hits"] == 8, s3
        assert s3["delivered_bytes"] == 3 * (100 * 64 + 150 * 64 + 100 * 64)
    # without the cache every window decodes its strips again
    with cogfeed.open(files[("DEFLATE", 16)], cogfeed.IO(cache_bytes=-1)) as c:
        c.read((0, 0, 100, 64))
        c.read((100, 0, 150, 64))
        assert c.stats()["chunks_decoded"] == 8


@pytest.mark.parametrize("comp", ["DEFLATE", "LZW", "JPEG", "LZW16", "OJPEG"])
def test_top_window_decodes_part_of_a_tall_strip(files, comp):
    rows = 400 if comp == "OJPEG" else H
    path = files[(comp, rows)]
    with cogfeed.open(path, cogfeed.IO()) as c:
        nb = c.count
        bps = 2 if comp == "LZW16" else 1
        width = c.width
        strip = width * rows * nb * bps
        before = c.stats()["decoded_bytes"]
        a = c.read((10, 5, 50, 60))  # rows 5..64: 65 rounded up to 96
        s = c.stats()
        assert s["decoded_bytes"] - before == width * 96 * nb * bps, s
        assert s["decoded_bytes"] < strip
        np.testing.assert_array_equal(a, _gdal(path, (10, 5, 50, 60)))
        # a window beside it within those rows: from the cache
        np.testing.assert_array_equal(c.read((100, 0, 80, 90)), _gdal(path, (100, 0, 80, 90)))
        assert c.stats()["chunks_decoded"] == s["chunks_decoded"]
        # lower in the same strip: the cached part falls short, the strip
        # is decoded whole this time ...
        low = (20, rows - 100, 60, 80)
        b = c.read(low)
        s2 = c.stats()
        assert s2["decoded_bytes"] - s["decoded_bytes"] == strip, s2
        np.testing.assert_array_equal(b, _gdal(path, low))
        # ... and the windows beside it decode nothing
        for win in [(100, rows - 300, 50, 200), (0, 0, 40, 40)]:
            np.testing.assert_array_equal(c.read(win), _gdal(path, win))
        assert c.stats()["chunks_decoded"] == s2["chunks_decoded"]


def test_threads_decode_each_strip_once(files):
    path = files[("LZW", 16)]
    wins = [(x, y, 100, 64) for y in range(0, H - 64, 64) for x in (0, 100, 200)]
    want = {w: _gdal(path, w) for w in wins}
    with cogfeed.open(path, cogfeed.IO()) as c:
        errors = []

        def work(k):
            try:
                for w in wins[k::4] + wins[::-1][k::4]:
                    np.testing.assert_array_equal(c.read(w), want[w])
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[0]
        s = c.stats()
        # the windows cover rows 0 .. max y + 64: each strip decoded once
        assert s["chunks_decoded"] == (max(w[1] for w in wins) + 64) // 16, s
        assert s["cache_hits"] + s["cache_misses"] == 2 * len(wins) * 4


def test_cache_bytes_checked():
    with pytest.raises(ValueError):
        cogfeed.IO(cache_bytes=-2)


def test_uncompressed_strip_rows_read_once(files):
    """Uncompressed strips are their own decoded form: a window at the top
    of a tall one reads its first rows only, and the window beside it
    reads nothing (kept in the cache as read)."""
    path = files[("NONE", H)]
    io = cogfeed.IO()
    with cogfeed.open(path, io) as c:
        b0 = io.stats()["bytes_fetched"]
        a = c.read((0, 0, 100, 40))  # 40 rows, rounded up to 32: 64
        b1 = io.stats()["bytes_fetched"]
        assert b1 - b0 == 64 * W * 3
        np.testing.assert_array_equal(a, _gdal(path, (0, 0, 100, 40)))
        np.testing.assert_array_equal(c.read((150, 10, 100, 50)), _gdal(path, (150, 10, 100, 50)))
        assert io.stats()["bytes_fetched"] == b1
        assert c.stats()["cache_hits"] == 1
    # uncompressed strips of 16 rows: each read from the file once
    path = files[("NONE", 16)]
    io = cogfeed.IO()
    with cogfeed.open(path, io) as c:
        b0 = io.stats()["bytes_fetched"]
        for x in (0, 100, 200):
            np.testing.assert_array_equal(c.read((x, 0, 100, 64)), _gdal(path, (x, 0, 100, 64)))
        assert io.stats()["bytes_fetched"] - b0 == 64 * W * 3
