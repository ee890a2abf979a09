"""Conformance: cogfeed's reads are bit-exact with GDAL's, for every fixture.

Fixtures come from conformance.py (written by GDAL at test time, cached in
$CF_TEST_DATA/conformance).  For every fixture the suite checks the
metadata cogfeed reports against GDAL's, then reads a set of windows (tile
aligned, crossing tile edges, partial edge tiles, partly and fully outside
the image, single pixels, the whole image, bigger than the image) with band
subsets and reorderings, at full resolution and at every overview level,
and compares the bytes with GDAL's ReadAsArray of the same window (pixels
outside the image: nodata, or 0 without nodata).  Lossy codecs (JPEG, WebP,
LERC with MAX_Z_ERROR) are held to the same standard: both readers decode
the same compressed bits with the same libraries.

One test per fixture and kind collects every mismatching window, so a
failure lists file, level, window and bands with the first differing pixel.
"""

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance as C  # noqa: E402

import cogfeed  # noqa: E402  (PYTHONPATH points at BUILD/python)

NAMES = [f["name"] for f in C.FIXTURES]


@pytest.fixture(scope="module")
def paths():
    return C.generate_all()


def _describe(got, exp):
    if got.shape != exp.shape:
        return "shape %s, expected %s" % (got.shape, exp.shape)
    if got.dtype != exp.dtype:
        return "dtype %s, expected %s" % (got.dtype, exp.dtype)
    g = got.view(np.uint8).reshape(got.shape + (-1,))
    e = exp.view(np.uint8).reshape(exp.shape + (-1,))
    diff = np.any(g != e, axis=-1)
    idx = tuple(int(i) for i in np.argwhere(diff)[0])
    return "%d of %d samples differ; first at (band,row,col)=%s: got %r expected %r" % (
        int(diff.sum()), diff.size, idx, got[idx], exp[idx])


def bit_equal(got, exp):
    return (got.shape == exp.shape and got.dtype == exp.dtype and
            np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(exp).tobytes())


def _check_windows(cog, ds, level, windows, bandsets, name):
    failures = []
    for wname, win in windows:
        for bands in bandsets:
            exp = C.gdal_read(ds, win, bands, level)
            try:
                got = cog.read(window=win, bands=bands, level=level)
            except Exception as e:  # report every window, not only the first
                failures.append("%s level %d %s %s bands=%s: raised %r" % (
                    name, level, wname, win, bands, e))
                continue
            got = np.asarray(got)
            if not bit_equal(got, exp):
                failures.append("%s level %d %s %s bands=%s: %s" % (
                    name, level, wname, win, bands, _describe(got, exp)))
    return failures


@pytest.mark.parametrize("name", NAMES)
def test_metadata(paths, name):
    ds = C.open_ref(paths[name])
    cog = cogfeed.open(paths[name])
    assert (cog.width, cog.height, cog.count) == (ds.width, ds.height, ds.count)
    assert np.dtype(cog.dtype) == C.numpy_dtype(ds)
    assert (cog.tile_width, cog.tile_height) == C.block_size(ds)
    assert [tuple(o) for o in cog.overviews] == C.overview_sizes(ds)
    assert tuple(cog.geotransform) == pytest.approx(ds.transform.to_gdal(), rel=1e-12, abs=1e-9)
    assert cog.crs == C.gdal_epsg(ds)
    nd = C.nodata_of(ds)
    if nd is None:
        assert cog.nodata is None
    elif np.isnan(nd):
        assert cog.nodata is not None and np.isnan(cog.nodata)
    else:
        assert cog.nodata == nd
    exp = C.gdal_compression(ds).upper()
    exp = "JPEG" if "JPEG" in exp else exp
    assert str(cog.compression).upper() == exp
    # Per-band scale/offset from GDAL_METADATA (1 and 0 when absent).
    assert list(cog.scales) == list(ds.scales)
    assert list(cog.offsets) == list(ds.offsets)


@pytest.mark.parametrize("name", NAMES)
def test_read_full_resolution(paths, name):
    ds = C.open_ref(paths[name])
    cog = cogfeed.open(paths[name])
    tw, th = C.block_size(ds)
    wins = C.windows_for(ds.width, ds.height, tw, th)
    # Band subsets on a few windows only: the whole list on every window
    # would multiply the run time without testing anything new.
    fails = _check_windows(cog, ds, 0, wins, [None], name)
    subset_wins = [w for w in wins if w[0] in ("cross_edges", "out_right_bottom", "whole")]
    fails += _check_windows(cog, ds, 0, subset_wins, C.band_sets(ds.count)[1:], name)
    assert not fails, "\n".join(fails)


OVR_NAMES = [f["name"] for f in C.FIXTURES if f["driver"] == "COG" or f["overviews"]]


@pytest.mark.parametrize("name", OVR_NAMES)
def test_read_overviews(paths, name):
    ds = C.open_ref(paths[name])
    cog = cogfeed.open(paths[name])
    nlev = C.overview_count(ds)
    if C.FIXTURES_BY_NAME[name]["overviews"]:
        assert nlev > 0, "fixture %s should have overviews" % name
    fails = []
    for level in range(1, nlev + 1):
        tw, th = C.block_size(ds, level)
        wins = C.level_windows(*C.level_size(ds, level), tw, th)
        fails += _check_windows(cog, ds, level, wins, C.band_sets(ds.count)[:3], name)
    assert not fails, "\n".join(fails)


MASK_NAMES = [f["name"] for f in C.FIXTURES if f["mask"]]


@pytest.mark.parametrize("name", MASK_NAMES)
def test_read_mask(paths, name):
    ds = C.open_ref(paths[name])
    assert C.has_dataset_mask(ds)
    cog = cogfeed.open(paths[name])
    fails = []
    for level in range(0, C.overview_count(ds) + 1):
        W, H = C.level_size(ds, level)
        tw, th = C.block_size(ds)
        for wname, win in C.windows_for(W, H, tw, th):
            exp = C.gdal_read_mask(ds, win, level)
            got = np.asarray(cog.read_mask(window=win, level=level))
            got = got.reshape(exp.shape) if got.size == exp.size else got
            if not bit_equal(got, exp):
                fails.append("%s mask level %d %s %s: %s" % (
                    name, level, wname, win, _describe(got[None], exp[None])
                    if got.shape == exp.shape else "shape %s vs %s" % (got.shape, exp.shape)))
    assert not fails, "\n".join(fails)


def test_mask_absent_is_an_error(paths):
    cog = cogfeed.open(paths["deflate_u8_p2_t256"])
    with pytest.raises(Exception):
        cog.read_mask(window=(0, 0, 8, 8))


@pytest.mark.parametrize("name", ["zstd_f32_p3_t1024", "jpeg_u8x3_ycbcr_t256",
                                  "lerc_zstd_u16_t256", "gtiff_band_i16_zstd"])
def test_threaded_reads_match(paths, name):
    """Many threads reading one open file get exactly GDAL's bytes."""
    ds = C.open_ref(paths[name])
    cog = cogfeed.open(paths[name])
    W, H = ds.width, ds.height
    rng = np.random.default_rng(7)
    wins = [(int(rng.integers(-20, W)), int(rng.integers(-20, H)),
             int(rng.integers(1, 300)), int(rng.integers(1, 300))) for _ in range(48)]
    expected = [C.gdal_read(ds, w) for w in wins]
    lock = threading.Lock()
    bad = []

    def work(i):
        got = np.asarray(cog.read(window=wins[i]))
        if not bit_equal(got, expected[i]):
            with lock:
                bad.append("%s %s: %s" % (name, wins[i], _describe(got, expected[i])))

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(work, range(len(wins)) ))
    assert not bad, "\n".join(bad)


def test_bad_arguments_raise(paths):
    p = paths["deflate_u16_p2_t512"]
    cog = cogfeed.open(p)
    with pytest.raises(Exception):
        cog.read(window=(0, 0, 8, 8), bands=[3])  # the file has 2 bands
    with pytest.raises(Exception):
        cog.read(window=(0, 0, 8, 8), bands=[0])  # bands are 1-based
    with pytest.raises(Exception):
        cog.read(window=(0, 0, 8, 8), level=len(cog.overviews) + 1)
    with pytest.raises(Exception):
        cogfeed.open(p + ".does-not-exist")


def test_fixture_matrix_covers_the_brief():
    """The matrix itself: every codec, dtype, tile size and layout is present."""
    fx = C.FIXTURES
    codecs = {f["compress"] for f in fx}
    assert codecs >= {"NONE", "DEFLATE", "LZW", "PACKBITS", "ZSTD", "LERC", "LERC_DEFLATE",
                      "LERC_ZSTD", "JPEG", "WEBP"}
    assert any(f["patch_compression"] == 32946 for f in fx)
    assert {f["dtype"] for f in fx} >= {"uint8", "int8", "uint16", "int16", "uint32", "int32",
                                        "float32", "float64"}
    opts = [" ".join(f["options"]) for f in fx]
    for t in ("BLOCKSIZE=128", "BLOCKSIZE=256", "BLOCKSIZE=512", "BLOCKSIZE=1024",
              "BLOCKYSIZE=128", "INTERLEAVE=BAND", "BIGTIFF=YES", "ENDIANNESS=BIG",
              "TILED=NO", "PREDICTOR=2", "PREDICTOR=3", "SPARSE_OK=TRUE"):
        assert any(t in o for o in opts), t
    assert any(f["mask"] for f in fx) and any(f["bands"] >= 200 for f in fx)
    assert any(f["nodata"] == "nan" for f in fx)
    assert any(f["scale_offset"] and len(f["scale_offset"]) > 1 for f in fx)
    assert any("PHOTOMETRIC=YCBCR" in o for o in opts)


LOSSLESS_NAMES = [f["name"] for f in C.FIXTURES
                  if f["compress"] not in ("JPEG", "WEBP") and not f["sparse"]
                  and f["gdal_roundtrip"]
                  and not any(o.startswith("MAX_Z_ERROR") for o in f["options"])]


@pytest.mark.parametrize("name", LOSSLESS_NAMES)
def test_gdal_reference_is_lossless(paths, name):
    """The oracle itself: GDAL reads back exactly the pixels the generator wrote.

    Guards against GDAL writer/reader bugs (such as GDAL 3.6's big-endian
    floating-point predictor) silently becoming the "expected" answer.
    """
    ds = C.open_ref(paths[name])
    got = C.gdal_read(ds, (0, 0, ds.width, ds.height))
    assert bit_equal(got, C.make_pixels(C.FIXTURES_BY_NAME[name]))


def test_io_object_lifecycle(tmp_path):
    # Re-initialising an IO would free the context its open files use.
    io = cogfeed.IO(header_cache_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="already initialised"):
        io.__init__()
    with pytest.raises(ValueError, match="not initialised"):
        cogfeed.open("x.tif", io=cogfeed.IO.__new__(cogfeed.IO))
