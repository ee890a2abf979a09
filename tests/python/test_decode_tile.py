"""Cog.decode_tile and Cog.tile_info (cf_cog_decode_chunk, cf_cog_chunk_info):
decoding compressed tile bytes the caller fetched itself.

Every fixture of the conformance matrix (every codec, dtype, tile size,
interleave, endianness, strips, sparse tiles, overviews) and every readable
fixture of the format matrix (colour spaces, odd depths, float16, complex,
LZMA, CCITT, FillOrder 2): tiles of every level are fetched by their
tile_info range and decoded with decode_tile, and must equal, bit for bit,
what Cog.read gives for the tile's window (itself bit-exact with GDAL: the
conformance suite).  Bad input: short, garbage and empty bytes, indices and
levels that do not exist, arguments of the wrong kind -- each an error
naming the file, level and tile, never a crash or stale bytes.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance as C  # noqa: E402
import format_fixtures as F  # noqa: E402

import cogfeed  # noqa: E402

NAMES = [f["name"] for f in C.FIXTURES]
FORMATS = [f.name for f in F.FIXTURES if f.expect == "read"]


@pytest.fixture(scope="module")
def paths():
    return C.generate_all()


@pytest.fixture(scope="module")
def format_paths():
    return F.generate_all()


def _indices(count, most=10):
    """Every tile of small levels; for larger ones the first, the last and
    an even spread between."""
    if count <= most:
        return list(range(count))
    return sorted(set(np.linspace(0, count - 1, most).astype(int).tolist()))


def _check_file(path, raw_color=False):
    cog = cogfeed.open(path, raw_color=raw_color) if raw_color else cogfeed.open(path)
    with open(path, "rb") as f:
        blob = f.read()
    bad = []
    pixel = cog.interleave == "pixel"
    for level in range(1 + len(cog.overviews)):
        li = cog.level_info(level)
        tw, th = li["tile_width"], li["tile_height"]
        across = (li["width"] + tw - 1) // tw
        down = (li["height"] + th - 1) // th
        count = cog.tile_info(0, level)["count"]
        assert count == across * down * (1 if pixel else cog.count)
        for k in _indices(count):
            try:
                ti = cog.tile_info(k, level)
            except cogfeed.Error as e:
                # a truncated file: the read fails too, and both name the tile
                assert "level %d, tile %d" % (level, k) in str(e) and "outside the file" in str(e)
                row, col = divmod(k % (across * down), across)
                with pytest.raises(cogfeed.Error):
                    cog.read(window=(col * tw, row * th, tw, th), level=level)
                continue
            plane, rest = divmod(k, across * down)
            row, col = divmod(rest, across)
            assert (ti["plane"], ti["row"], ti["col"]) == (plane, row, col)
            data = blob[ti["offset"]:ti["offset"] + ti["byte_count"]]
            try:
                got = cog.decode_tile(data, k, level=level)
            except cogfeed.Error as e:
                # a chunk that cannot be decoded (an uncompressed CMYK strip
                # shorter than its size, which GDAL fails on too): reading
                # it fails as well, and both name the chunk
                assert "level %d, %s %d" % (level, "tile" if li["tiled"] else "strip",
                                            k) in str(e), e
                with pytest.raises(type(e)):
                    cog.read(window=(col * tw, row * th, tw, th), level=level,
                             bands=None if pixel else [plane + 1])
                continue
            assert got.shape == ti["shape"], (path, level, k)
            h, w, s = got.shape
            assert w == tw and h == (th if li["tiled"] else min(th, li["height"] - row * th))
            bands = None if pixel else [plane + 1]
            exp = cog.read(window=(col * tw, row * th, tw, h), bands=bands, level=level)
            exp = np.moveaxis(exp, 0, -1)
            vw = min(tw, li["width"] - col * tw)
            vh = min(h, li["height"] - row * th)
            assert got.dtype == exp.dtype and s == exp.shape[2], (path, level, k)
            a = np.ascontiguousarray(got[:vh, :vw])
            b = np.ascontiguousarray(exp[:vh, :vw])
            if a.tobytes() != b.tobytes():
                bad.append("%s level %d tile %d: %d samples differ" % (
                    os.path.basename(path), level, k, int((a != b).sum())))
    cog.close()
    return bad


@pytest.mark.parametrize("name", NAMES)
def test_decode_tile_matches_read(paths, name):
    bad = _check_file(paths[name])
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", FORMATS)
def test_decode_tile_matches_read_formats(format_paths, name):
    fx = F.FIXTURES_BY_NAME[name]
    bad = _check_file(format_paths[name])
    if fx.raw:
        bad += _check_file(format_paths[name], raw_color=True)
    assert not bad, "\n".join(bad)


def test_sparse_tile_reads_as_nodata(paths):
    cog = cogfeed.open(paths["sparse_u16_nodata"])
    n = cog.tile_info(0)["count"]
    sparse = [k for k in range(n) if cog.tile_info(k)["byte_count"] == 0]
    assert sparse, "the fixture should have sparse tiles"
    got = cog.decode_tile(b"", sparse[0])
    assert np.all(got == cog.nodata)


def _deflate(paths):
    p = paths["deflate_u16_p2_t512"]
    cog = cogfeed.open(p)
    ti = cog.tile_info(1)
    with open(p, "rb") as f:
        f.seek(ti["offset"])
        data = f.read(ti["byte_count"])
    return cog, data


def test_bad_bytes_name_file_level_and_tile(paths):
    cog, data = _deflate(paths)
    name = os.path.basename(paths["deflate_u16_p2_t512"])
    for bad in (data[: len(data) // 2], b"\x00" * 100, os.urandom(len(data)), b"", b"x"):
        with pytest.raises(cogfeed.Error) as e:
            cog.decode_tile(bad, 1)
        msg = str(e.value)
        assert name in msg and "level 0" in msg and "tile 1" in msg, msg
    # good bytes still decode after failures (no state left behind)
    assert cog.decode_tile(data, 1).shape == (512, 512, 2)


def test_every_codec_refuses_garbage(paths):
    """Short and garbage bytes for every codec of the matrix: an error or a
    tile, never a crash (run under ASan in the sanitizer suite)."""
    rng = np.random.default_rng(3)
    for name in NAMES:
        p = paths[name]
        cog = cogfeed.open(p)
        ti = cog.tile_info(0)
        with open(p, "rb") as f:
            f.seek(ti["offset"])
            data = f.read(ti["byte_count"])
        if not data:
            continue
        for bad in (data[: len(data) // 3], data[:-1], bytes(rng.integers(0, 256, len(data), dtype=np.uint8)),
                    data[:8] + bytes(len(data))):
            try:
                got = cog.decode_tile(bad, 0)
            except cogfeed.Error as e:
                assert "level 0" in str(e), (name, str(e))
            else:
                assert got.shape == ti["shape"]
        cog.close()


def test_wrong_index_and_level(paths):
    cog, data = _deflate(paths)
    n = cog.tile_info(0)["count"]
    with pytest.raises(cogfeed.Error, match=r"level 0 has %d tiles .*no tile %d" % (n, n)):
        cog.decode_tile(data, n)
    with pytest.raises(cogfeed.Error, match="level 0 has"):
        cog.tile_info(n)
    with pytest.raises(cogfeed.Error, match="level 9 does not exist"):
        cog.decode_tile(data, 0, level=9)
    with pytest.raises(OverflowError):
        cog.decode_tile(data, -1)
    with pytest.raises(TypeError):
        cog.decode_tile("not bytes", 0)
    # any buffer works: bytearray, memoryview, numpy
    a = cog.decode_tile(data, 1)
    for buf in (bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert np.array_equal(cog.decode_tile(buf, 1), a)
    # out=: decoded into the caller's array (reused), checked first
    buf = np.full(a.shape, 7, a.dtype)
    assert cog.decode_tile(data, 1, out=buf) is buf and np.array_equal(buf, a)
    for bad in (np.zeros(a.shape, np.float32), np.zeros((512, 512, 1), a.dtype),
                np.zeros(a.shape, a.dtype)[:, ::-1], "x"):
        with pytest.raises(ValueError, match="out must be"):
            cog.decode_tile(data, 1, out=bad)
    ro = np.zeros(a.shape, a.dtype)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out must be"):
        cog.decode_tile(data, 1, out=ro)
    # byte-swapped or misaligned arrays pass a type-number check but would
    # get native bytes (wrong values) or typed stores at odd addresses
    if a.dtype.itemsize > 1:
        with pytest.raises(ValueError, match="native-order"):
            cog.decode_tile(data, 1, out=np.zeros(a.shape, a.dtype.newbyteorder()))
        raw = np.zeros(a.size * a.dtype.itemsize + 1, np.uint8)
        odd = raw[1:].view(a.dtype).reshape(a.shape)
        assert not odd.flags.aligned
        with pytest.raises(ValueError, match="aligned"):
            cog.decode_tile(data, 1, out=odd)
        with pytest.raises(ValueError, match="native-order"):
            cog.read(out=np.zeros((cog.count, cog.height, cog.width), a.dtype.newbyteorder()))
    # a failed decode into out leaves zeros, never the previous tile
    with pytest.raises(cogfeed.Error):
        cog.decode_tile(data[:100], 1, out=buf)
    assert not buf.any()
    cog.close()
    with pytest.raises(ValueError, match="closed"):
        cog.decode_tile(data, 1)


def test_threads_decode_one_cog(paths):
    """Many threads decoding tiles of one open file (the codec contexts
    come from the file's pool) get what one thread gets."""
    from concurrent.futures import ThreadPoolExecutor
    p = paths["zstd_u16_p2_t256"]
    cog = cogfeed.open(p)
    with open(p, "rb") as f:
        blob = f.read()
    n = cog.tile_info(0)["count"]
    segs = []
    for k in range(n):
        ti = cog.tile_info(k)
        segs.append(blob[ti["offset"]:ti["offset"] + ti["byte_count"]])
    want = [cog.decode_tile(segs[k], k).tobytes() for k in range(n)]
    jobs = [k % n for k in range(8 * n)]
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda k: cog.decode_tile(segs[k], k).tobytes(), jobs))
    assert all(g == want[k] for g, k in zip(got, jobs))
