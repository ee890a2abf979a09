"""CLI golden tests: `cogfeed info` and `cogfeed read` against GDAL.

Runs the built binary ($COGFEED_BIN) on conformance fixtures (see
conformance.py) and compares `info --json` with what GDAL reports, and the
.npy written by `read` bit for bit with GDAL's read of the same window
(nodata, or 0, outside the image).  Also checks exit codes and that error
messages name the file.
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance as C  # noqa: E402

BIN = os.environ.get("COGFEED_BIN", "cogfeed")

# A spread of features: codecs, dtypes, interleave, BigTIFF, big-endian,
# strips, sparse, nodata (incl. NaN), masks, many bands, non-square tiles.
CLI_NAMES = [
    "none_u8x3_t256", "deflate_i8_t256", "deflate_f32_p3_t256", "deflate32946_u16_p2_t256",
    "lzw_i16_p2_t128", "packbits_f32_t128", "zstd_i32_p2_t256", "lerc_zstd_f32_nan_t256",
    "lerc_deflate_i16_t512", "jpeg_u8x3_ycbcr_t256", "webp_u8x4_lossy_t256",
    "gtiff_nonsquare_256x128_u16", "gtiff_band_i16_zstd", "gtiff_bigtiff_be_i16_packbits",
    "gtiff_be_u16_deflate_p2", "strip_f32_lzw_band", "sparse_u16_nodata", "mask_u16_gtiff",
    "many_bands_u16_band", "deflate_i64_p2_t256",
]


@pytest.fixture(scope="module")
def paths():
    return C.generate_all(names=set(CLI_NAMES))


def run(*args, check=True):
    p = subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=120)
    if check and p.returncode != 0:
        raise AssertionError("cogfeed %s failed (%d): %s" % (" ".join(map(str, args)),
                                                            p.returncode, p.stderr))
    return p


@pytest.mark.parametrize("name", CLI_NAMES)
def test_info_json_matches_gdal(paths, name):
    info = json.loads(run("info", paths[name], "--json").stdout)
    ds = C.open_ref(paths[name])
    md = ds.tags(ns="IMAGE_STRUCTURE")
    assert (info["width"], info["height"], info["count"]) == (ds.width, ds.height, ds.count)
    assert info["dtype"] == str(C.numpy_dtype(ds))
    assert (info["tile_width"], info["tile_height"]) == C.block_size(ds)
    comp = C.gdal_compression(ds).upper()
    assert info["compression"].upper() == ("JPEG" if "JPEG" in comp else comp)
    # From the spec: GDAL 3.6 leaves PREDICTOR out of its metadata for the
    # legacy Deflate code 32946 (while applying it when reading).
    spec = C.FIXTURES_BY_NAME[name]
    assert info["predictor"] == int(C._opt(spec, "PREDICTOR", 1))
    if spec["patch_compression"] is None:
        assert info["predictor"] == int(md.get("PREDICTOR", 1))
    if ds.count > 1:  # GDAL calls every single-band file BAND
        assert info["interleave"].upper() == md["INTERLEAVE"]
    assert [tuple(o) for o in info["overviews"]] == C.overview_sizes(ds)
    assert info["geotransform"] == pytest.approx(list(ds.transform.to_gdal()), abs=1e-9)
    assert info["epsg"] == C.gdal_epsg(ds)
    nd = C.nodata_of(ds)
    if nd is None:
        assert info["nodata"] is None
    elif math.isnan(nd):
        assert str(info["nodata"]).lower() == "nan"
    else:
        assert float(info["nodata"]) == nd
    assert info["has_mask"] == C.has_dataset_mask(ds)
    assert info["bigtiff"] == ("BIGTIFF=YES" in spec["options"])
    assert info["byte_order"] == ("big" if "ENDIANNESS=BIG" in spec["options"] else "little")
    assert info["scale"] == list(ds.scales)
    assert info["offset"] == list(ds.offsets)
    assert info["file_size"] == os.path.getsize(paths[name])
    assert info["header_requests"] >= 1 and info["header_bytes"] > 0


def test_info_text(paths):
    p = paths["gtiff_band_i16_zstd"]
    out = run("info", p).stdout
    with C.open_ref(p) as ds:
        assert "%d x %d" % (ds.width, ds.height) in out
    assert "int16" in out and "ZSTD" in out and "EPSG:32633" in out


def _cli_read(tmp_path, path, win, bands=None, level=0):
    out = tmp_path / "out.npy"
    if out.exists():
        out.unlink()
    args = ["read", path, "--window", "%d,%d,%d,%d" % win, "-o", out]
    if level:
        args += ["--level", level]
    if bands:
        args += ["--bands", ",".join(map(str, bands))]
    run(*args)
    return np.load(out)


@pytest.mark.parametrize("name", CLI_NAMES)
def test_read_npy_matches_gdal(paths, name, tmp_path):
    ds = C.open_ref(paths[name])
    W, H = ds.width, ds.height
    tw, th = C.block_size(ds)
    n = ds.count
    cases = [
        ((0, 0, W, H), None, 0),
        ((tw - 7, th - 5, 40, 30), None, 0),
        ((W - 10, H - 6, 25, 20), [n], 0),  # partly outside, one band
        ((-4, -9, 12, 15), [n, 1] if n > 1 else None, 0),  # reordered
        ((W + 5, H + 5, 3, 4), None, 0),  # fully outside
        ((W // 2, H // 2, 1, 1), None, 0),
    ]
    nlev = C.overview_count(ds)
    if nlev:
        lw, lh = C.level_size(ds, nlev)
        cases.append(((0, 0, lw, lh), None, nlev))
        cases.append(((lw - 3, lh - 3, 9, 9), [1], 1 if nlev == 1 else nlev - 1))
    fails = []
    for win, bands, level in cases:
        got = _cli_read(tmp_path, paths[name], win, bands, level)
        exp = C.gdal_read(ds, win, bands, level)
        # .npy may carry an explicit byte order; compare values' bytes natively.
        got = got.astype(got.dtype.newbyteorder("="), copy=False)
        if got.shape != exp.shape or got.dtype != exp.dtype or \
                np.ascontiguousarray(got).tobytes() != exp.tobytes():
            fails.append("%s level %d window %s bands %s: got %s %s, expected %s %s%s" % (
                name, level, win, bands, got.shape, got.dtype, exp.shape, exp.dtype,
                "" if got.shape != exp.shape else " (values differ)"))
    assert not fails, "\n".join(fails)


def test_read_mask_flag(paths, tmp_path):
    p = paths["mask_u16_gtiff"]
    out = tmp_path / "m.npy"
    run("read", p, "--window", "100,200,300,100", "--mask", "-o", out)
    got = np.load(out)
    with C.open_ref(p) as ds:
        exp = C.gdal_read_mask(ds, (100, 200, 300, 100))
    assert got.reshape(exp.shape).tobytes() == exp.tobytes() and got.size == exp.size


def test_errors_exit_nonzero_and_name_the_file(paths, tmp_path):
    p = paths["mask_u16_gtiff"]
    r = run("read", p, "--window", "0,0,2,2", "--bands", "3", "-o", tmp_path / "x.npy", check=False)
    assert r.returncode != 0 and os.path.basename(p) in r.stderr
    assert not (tmp_path / "x.npy").exists()
    missing = str(tmp_path / "no-such-file.tif")
    r = run("info", missing, check=False)
    assert r.returncode != 0 and "no-such-file.tif" in r.stderr
    r = run("read", p, "--window", "0,0,abc", "-o", tmp_path / "y.npy", check=False)
    assert r.returncode != 0 and r.stderr
    r = run("read", p, "--window", "0,0,4,4", "--level", "9", "-o", tmp_path / "z.npy",
            check=False)
    assert r.returncode != 0 and r.stderr
    bad = tmp_path / "not-a-tiff.tif"
    bad.write_bytes(b"this is not a tiff file at all" * 10)
    r = run("info", bad, check=False)
    assert r.returncode != 0 and "not-a-tiff.tif" in r.stderr


def test_io_option_values_are_whole_numbers_in_range(paths):
    # A count is a whole number that fits its field: "2.5" used to become
    # 2 silently, and 1e10 was cast to int (undefined behaviour).
    p = paths["mask_u16_gtiff"]
    for opt, val in (("--max-inflight", "2.5"), ("--max-inflight", "1e10"),
                     ("--max-retries", "-1"), ("--max-inflight", "4294967297"),
                     ("--header-bytes", "99999999999999999999"), ("--timeout", "x")):
        r = run("info", "--json", opt, val, p, check=False)
        assert r.returncode == 2, (opt, val, r.returncode, r.stderr)
        assert "bad value for %s: '%s'" % (opt, val) in r.stderr, r.stderr
    r = run("info", "--json", "--max-inflight", "8", "--timeout", "2.5", p)
    assert '"width"' in r.stdout


def test_read_more_than_64_bands(paths, tmp_path):
    # --bands takes as many bands as a file may have (once capped at 64).
    p = paths["many_bands_u16_band"]
    with C.open_ref(p) as ds:
        n = ds.count
    assert n > 64
    order = list(range(n, 0, -1))
    out = tmp_path / "b.npy"
    run("read", p, "--window", "0,0,16,8", "--bands", ",".join(map(str, order)),
        "-o", out)
    with C.open_ref(p) as ds:
        want = C.gdal_read(ds, (0, 0, 16, 8), order)
    np.testing.assert_array_equal(np.load(out), want)


# -- help, the man page, the command as installed ---------------------------

def _commands():
    from cogfeed import cli
    return list(cli.commands())


def test_every_command_has_help():
    cmds = _commands()
    assert {"info", "read", "synth", "convert", "bench", "tune", "experiment",
            "demo"} <= set(cmds)
    for cmd in cmds:
        for exe in ([BIN], [sys.executable, "-m", "cogfeed.cli"]):
            p = subprocess.run(exe + [cmd, "--help"], capture_output=True, text=True,
                               timeout=120)
            assert p.returncode == 0, (exe, cmd, p.stderr)
            assert p.stdout.startswith("usage: cogfeed %s" % cmd), (exe, cmd, p.stdout[:200])


def test_top_level_help_lists_every_command():
    """The C tool's overview and the Python one (the installed command's)
    name the same commands."""
    for exe in ([BIN], [sys.executable, "-m", "cogfeed.cli"]):
        out = subprocess.run(exe + ["--help"], capture_output=True, text=True,
                             timeout=60).stdout
        listed = [ln.split()[0] for ln in out.splitlines() if ln.startswith("  ")]
        assert listed == _commands(), (exe, listed)


def test_version():
    import cogfeed
    out = run("--version").stdout
    assert out.strip() == "cogfeed %s" % cogfeed.__version__


def test_man_page_is_the_help():
    """docs/cogfeed.1 is what tools/manpage.py makes from the help now (run
    it after changing a command's options), with a section per command."""
    src = os.environ.get("CF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(src, "docs", "cogfeed.1")) as f:
        page = f.read()
    for cmd in _commands():
        assert "\n.SS %s\n" % cmd in page, cmd
    p = subprocess.run([sys.executable, os.path.join(src, "tools", "manpage.py")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == page, ("docs/cogfeed.1 is out of date: run "
                              "python tools/manpage.py -o docs/cogfeed.1")
