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

import cogfeed

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
        # strict JSON has no NaN: null, with has_nodata saying there is one
        assert info["nodata"] is None and info["has_nodata"] is True
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


def test_one_program_whichever_way_it_is_run(tmp_path):
    """$COGFEED_BIN (a build tree's BUILD/cogfeed, or the console script
    pip installs) is `python -m cogfeed`: the same help byte for byte, and
    a research command runs with no python3 on PATH (nothing hands it to
    whatever interpreter PATH would find)."""
    py = subprocess.run([sys.executable, "-m", "cogfeed", "--help"],
                        capture_output=True, text=True, timeout=60)
    assert py.returncode == 0
    assert run("--help").stdout == py.stdout
    # (COGFEED_PYTHON named the interpreter the old C tool handed these
    # commands to; nothing reads it now.)
    env = {k: v for k, v in os.environ.items() if k != "COGFEED_PYTHON"}
    env.update(PATH=str(tmp_path), PYTHONWARNINGS="ignore")
    r = subprocess.run([BIN, "synth", "--help"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: cogfeed synth"), r.stdout[:200]


def test_c_tool_runs_info_and_read_only(paths, tmp_path):
    """cogfeed-c (inside the package: cogfeed.cli.c_tool()) is the one
    implementation of info and read, with the same output as `cogfeed
    info`; it never hands a command to Python: a research command is a
    usage error naming the Python command, even with python3 on PATH."""
    from cogfeed import cli
    exe = cli.c_tool()
    assert os.path.basename(exe) == "cogfeed-c" and os.access(exe, os.X_OK)
    out = subprocess.run([exe, "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    assert out.startswith("usage: cogfeed-c COMMAND")
    assert [ln.split()[0] for ln in out.splitlines()
            if ln.startswith("  ")] == ["info", "read"]
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep +
               os.environ.get("PATH", ""))
    for cmd in ("synth", "convert", "bench", "tune", "experiment", "demo"):
        r = subprocess.run([exe, cmd, "--help"], capture_output=True,
                           text=True, timeout=60, env=env)
        assert r.returncode == 2 and r.stdout == "", (cmd, r.stdout[:200])
        assert "run `cogfeed %s`" % cmd in r.stderr, r.stderr
    name = "deflate_f32_p3_t256"
    direct = subprocess.run([exe, "info", "--json", paths[name]],
                            capture_output=True, text=True, timeout=60)
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout == run("info", "--json", paths[name]).stdout
    assert direct.stdout.count("\n") == 1
    # Its messages name the program it was run as.
    r = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("cogfeed-c info: missing URL")
    assert run("info", check=False).stderr.startswith("cogfeed info: missing URL")


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


# -- one parser: --opt=value, argument counts, strict one-line JSON --------

def _strict_json(text):
    """json.loads that refuses NaN and Infinity (Python accepts them by
    default; JSON does not)."""
    def refuse(c):
        raise ValueError("not JSON: %s" % c)
    return json.loads(text, parse_constant=refuse)


# The C tool, and the command as `python -m cogfeed` runs it (the Python
# side, which execs the package's C tool for info and read).
EXES = [[BIN], [sys.executable, "-m", "cogfeed"]]


def run_exe(exe, *args):
    return subprocess.run(exe + [str(a) for a in args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("exe", EXES, ids=["c", "python-m"])
def test_options_take_equals_form(paths, tmp_path, exe):
    """--opt=value is the same as --opt value (the C commands refused it)."""
    p = paths["lerc_deflate_i16_t512"]
    spaced, joined = tmp_path / "a.npy", tmp_path / "b.npy"
    r = run_exe(exe, "read", p, "--window", "3,5,40,30", "--bands", "1", "--level", "0",
                "--output", spaced)
    assert r.returncode == 0, r.stderr
    r = run_exe(exe, "read", p, "--window=3,5,40,30", "--bands=1", "--level=0",
                "--output=%s" % joined, "--max-inflight=8", "--timeout=30")
    assert r.returncode == 0, r.stderr
    r = run_exe(exe, "read", p, "--window=3,5,40,30", "--bands=1", "-o%s" % (tmp_path / "c.npy"))
    assert r.returncode == 0, r.stderr
    a = np.load(spaced)
    assert a.shape == (1, 30, 40)
    np.testing.assert_array_equal(a, np.load(joined))
    np.testing.assert_array_equal(a, np.load(tmp_path / "c.npy"))
    r = run_exe(exe, "info", "--json", "--header-bytes=4096", p)
    assert r.returncode == 0, r.stderr
    assert _strict_json(r.stdout)["width"] > 0
    # the value check applies to the joined form too
    r = run_exe(exe, "info", "--max-inflight=2.5", p)
    assert r.returncode == 2 and "bad value for --max-inflight: '2.5'" in r.stderr, r.stderr


@pytest.mark.parametrize("exe", EXES, ids=["c", "python-m"])
def test_host_that_does_not_resolve_fails_at_once(exe):
    """A host name that does not resolve is permanent (exit 1, one
    message naming the URL without its query), not retried like a
    transient fault: it was tried 7 times (5.7 s).  A name under .invalid
    never resolves (RFC 6761).  The attempt count is checked by the io's
    statistics in test_remote_faults; here, the message says so."""
    url = "http://cogfeed-test.invalid/scene.tif?sig=S3CR3T"
    for args in (("info", "--max-retries=5", url),
                 ("read", url, "--window=0,0,4,4", "--max-retries=5", "-o", "never.npy")):
        r = run_exe(exe, *args)
        assert r.returncode == 1, (args, r.returncode, r.stderr)
        assert "cogfeed-test.invalid/scene.tif" in r.stderr and "S3CR3T" not in r.stderr, \
            r.stderr
        assert "does not resolve" in r.stderr and "not retried" in r.stderr, r.stderr
        assert not r.stdout and not os.path.exists("never.npy")


@pytest.mark.parametrize("exe", EXES, ids=["c", "python-m"])
def test_usage_errors_name_the_argument(paths, tmp_path, exe):
    """A wrong argument count or an unknown option gets exit status 2 and a
    message saying what is wrong, not the top-level usage."""
    p = paths["mask_u16_gtiff"]
    out = tmp_path / "o.npy"
    cases = [
        (("info", p, "b"), "cogfeed info: unexpected argument 'b' (info takes one URL)"),
        (("info",), "cogfeed info: missing URL"),
        (("info", "--json"), "cogfeed info: missing URL"),
        (("info", "--json=1", p), "cogfeed info: --json takes no value"),
        (("info", "--bogus", p), "cogfeed info: unknown option '--bogus'"),
        (("info", "-x", p), "cogfeed info: unknown option '-x'"),
        (("info", p, "--timeout"), "cogfeed info: --timeout needs a value"),
        (("info", "--max", "3", p), "ambiguous option '--max'"),
        (("read", p, "q", "--window", "0,0,4,4", "-o", out),
         "cogfeed read: unexpected argument 'q' (read takes one URL)"),
        (("read", "--window", "0,0,4,4", "-o", out), "cogfeed read: missing URL"),
        (("read", p, "-o", out), "cogfeed read: missing --window"),
        (("read", p, "--window=0,0,4,4"), "cogfeed read: missing -o OUT.npy"),
        (("read", p, "--window=0,0,4", "-o", out),
         "cogfeed read: bad value for --window: '0,0,4'"),
        (("read", p, "--window", "0,0,4,4", "--level=x", "-o", out),
         "cogfeed read: bad value for --level: 'x'"),
        (("read", p, "--window", "0,0,4,4", "--bands=0", "-o", out),
         "cogfeed read: bad value for --bands: '0'"),
        (("read", p, "--window", "0,0,4,4", "-o"), "cogfeed read: -o needs a value"),
        (("read", p, "--window", "0,0,4,4", "--mask=yes", "-o", out),
         "cogfeed read: --mask takes no value"),
        # a short option refused inside a cluster is named, not the
        # argument before it (it said "unknown option '--json'")
        (("info", "--json", "-xy", p), "cogfeed info: unknown option '-x'"),
        (("read", p, "--window=0,0,4,4", "-qz", "-o", out),
         "cogfeed read: unknown option '-q'"),
        ((), "cogfeed: missing COMMAND"),
        (("frobnicate",), "cogfeed: unknown command 'frobnicate'"),
    ]
    for args, msg in cases:
        r = run_exe(exe, *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert msg in r.stderr, (args, r.stderr)
        assert not r.stdout, (args, r.stdout)
        if args and args[0] in ("info", "read"):
            # one message and where to look, not the whole usage
            assert "Try 'cogfeed %s --help'." % args[0] in r.stderr and \
                "commands:" not in r.stderr, r.stderr
    assert not out.exists()


def test_info_json_is_one_line_of_strict_json(paths):
    """One line (line-oriented consumers), strict JSON (NaN nodata as null,
    not the string "nan"), PROJJSON embedded as a compact object."""
    for name in ("lerc_zstd_f32_nan_t256", "gtiff_band_i16_zstd"):
        out = run("info", paths[name], "--json").stdout
        assert out.endswith("\n") and out.count("\n") == 1, out[:400]
        info = _strict_json(out)
        assert isinstance(info["crs"]["projjson"], dict), info["crs"]
        assert info["crs"]["projjson"]["type"].endswith("CRS")
        assert '"nan"' not in out.lower() and "NaN" not in out
        if name.startswith("lerc_zstd_f32_nan"):
            assert info["has_nodata"] is True and info["nodata"] is None
            assert all(b["has_nodata"] and b["nodata"] is None for b in info["bands"])
        else:
            assert info["has_nodata"] == (info["nodata"] is not None)


# ESC, BEL, CR and a CSI (U+009B): a screen clear, a window title, a
# carriage return that would overwrite the line.
EVIL = "x\x1b[2J\x07y\rz\x1b]0;pwned\x07w\u009b31m"
CONTROL = set(chr(c) for c in range(0x20) if c != 0x0a) | {"\x7f"} | \
    set(chr(c) for c in range(0x80, 0xa0))


def _zeros_gtiff(path, width, height):
    """A uint8 GTiff of zeros in UTM 33N written by rasterio's GDAL, read
    back as (byte order, IFDs) for editing tags (format_fixtures)."""
    import rasterio
    from rasterio.transform import from_origin
    import format_fixtures as FF
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=1,
                       dtype="uint8", crs="EPSG:32633",
                       transform=from_origin(500000, 4000000, 10, 10)) as ds:
        ds.write(np.zeros((1, height, width), np.uint8))
    return FF.read_tiff(path)


@pytest.fixture(scope="module")
def hostile_tif(tmp_path_factory):
    """A GeoTIFF whose ImageDescription, Software and GDAL_METADATA (a
    dataset item and a band description) carry control characters, written
    byte by byte (GDAL would drop them from its XML)."""
    import format_fixtures as FF
    d = tmp_path_factory.mktemp("hostile")
    base, evil = d / "base.tif", d / "evil.tif"
    e, ifds = _zeros_gtiff(base, 16, 8)
    raw = EVIL.encode("utf-8")
    ref = "".join("&#%d;" % ord(c) if ord(c) < 0x20 else c for c in EVIL)
    xml = ('<GDALMetadata>\n  <Item name="EVIL">%s</Item>\n'
           '  <Item name="DESCRIPTION" sample="0" role="description">band %s</Item>\n'
           '</GDALMetadata>' % (ref, ref))
    ifds[0].set(270, 2, b"desc " + raw + b"\0")
    ifds[0].set(305, 2, b"soft " + raw + b"\0")
    ifds[0].set(42112, 2, xml.encode("utf-8") + b"\0")
    FF.write_tiff(evil, ifds, e)
    with cogfeed.open(str(evil)) as cog:  # the file carries what it should
        assert cog.metadata["TIFFTAG_IMAGEDESCRIPTION"] == "desc " + EVIL
        assert cog.metadata["EVIL"] == EVIL
        assert cog.descriptions[0] == "band " + EVIL
    return evil


@pytest.mark.parametrize("exe", EXES, ids=["c", "python-m"])
def test_info_escapes_bytes_that_are_not_utf8(tmp_path, exe):
    """Overlong forms (E0 82 9B is an overlong CSI), surrogates, bytes past
    U+10FFFF and F8 are not UTF-8: info writes them escaped, so its output
    stays valid UTF-8 (and strict JSON) and no terminal sees them raw."""
    import format_fixtures as FF
    base, bad = tmp_path / "base.tif", tmp_path / "bad.tif"
    e, ifds = _zeros_gtiff(base, 8, 8)
    ifds[0].set(305, 2, b"s \xe0\x82\x9b2J \xed\xa0\x80 \xf4\x90\x80\x80 \xf8\x80\x80 ok\0")
    FF.write_tiff(bad, ifds, e)
    r = subprocess.run(list(exe) + ["info", "--json", str(bad)], capture_output=True)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode("utf-8")  # strict: raises on what is not UTF-8
    _strict_json(out)
    assert r"s \u00e0\u0082\u009b2J \u00ed\u00a0\u0080 \u00f4\u0090\u0080\u0080" in out, out
    r = subprocess.run(list(exe) + ["info", str(bad)], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert r"s \xe0\x82\x9b2J \xed\xa0\x80 " in r.stdout.decode("utf-8"), r.stdout


@pytest.mark.parametrize("exe", EXES, ids=["c", "python-m"])
def test_info_escapes_control_characters(hostile_tif, exe):
    r = run_exe(exe, "info", hostile_tif)
    assert r.returncode == 0, r.stderr
    bad = sorted(set(r.stdout) & CONTROL)
    assert not bad, (bad, r.stdout)
    for item in ("TIFFTAG_IMAGEDESCRIPTION=desc ", "TIFFTAG_SOFTWARE=soft ", "EVIL=",
                 "band "):
        assert item + r"x\x1b[2J\x07y\x0dz\x1b]0;pwned\x07w\xc2\x9b31m" in r.stdout, \
            (item, r.stdout)
    r = run_exe(exe, "info", "--json", hostile_tif)
    assert r.returncode == 0, r.stderr
    assert not set(r.stdout) & CONTROL and r.stdout.count("\n") == 1, r.stdout
    # JSON escapes them (\u001b ...), and they come back exact
    assert r"x\u001b[2J\u0007y\rz" in r.stdout or r"x\u001b[2J\u0007y\u000dz" in r.stdout
    info = _strict_json(r.stdout)
    assert info["metadata"][""]["TIFFTAG_IMAGEDESCRIPTION"] == "desc " + EVIL
    assert info["metadata"][""]["TIFFTAG_SOFTWARE"] == "soft " + EVIL
    assert info["metadata"][""]["EVIL"] == EVIL
    assert info["bands"][0]["description"] == "band " + EVIL


@pytest.mark.parametrize("exe", EXES, ids=["c", "python-m"])
def test_info_json_escapes_the_crs_name_inside_projjson(tmp_path, exe):
    """A user-defined CRS takes its name from the file's citation, and
    PROJ copies it into the PROJJSON that info --json embeds: DEL and C1
    (CSI) there came out raw (only C0 was escaped inside it)."""
    import rasterio
    from rasterio.crs import CRS
    from rasterio.transform import from_origin
    wkt = ('PROJCS["EVILNAMEXXXXXXXXXX",GEOGCS["WGS 84",DATUM["WGS_1984",'
           'SPHEROID["WGS 84",6378137,298.257223563]],PRIMEM["Greenwich",0],'
           'UNIT["degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],'
           'PARAMETER["latitude_of_origin",0],PARAMETER["central_meridian",15.123],'
           'PARAMETER["scale_factor",0.9996],PARAMETER["false_easting",500000],'
           'PARAMETER["false_northing",0],UNIT["metre",1]]')
    base, evil = tmp_path / "base.tif", tmp_path / "evil.tif"
    with rasterio.open(base, "w", driver="GTiff", width=8, height=8, count=1,
                       dtype="uint8", crs=CRS.from_wkt(wkt),
                       transform=from_origin(500000, 4000000, 10, 10)) as ds:
        ds.write(np.zeros((1, 8, 8), np.uint8))
    blob = base.read_bytes()
    assert blob.count(b"EVILNAMEXXXXXXXXXX") == 1
    evil.write_bytes(blob.replace(b"EVILNAMEXXXXXXXXXX", b"EVIL\x7f\xc2\x9b2JXXXXXXXXXX"))
    with cogfeed.open(str(evil)) as cog:  # the name reaches the CRS
        assert cog.crs.name == "EVIL\x7f\u009b2JXXXXXXXXXX"
    r = run_exe(exe, "info", "--json", evil)
    assert r.returncode == 0, r.stderr
    assert not set(r.stdout) & CONTROL and r.stdout.count("\n") == 1, r.stdout
    info = _strict_json(r.stdout)
    assert info["crs"]["projjson"]["name"] == "EVIL\x7f\u009b2JXXXXXXXXXX"
    assert info["crs"]["name"] == "EVIL\x7f\u009b2JXXXXXXXXXX"


def test_python_m_cogfeed_is_the_command(paths):
    """`python -m cogfeed` works like `cogfeed` (cogfeed/__main__.py)."""
    r = run_exe([sys.executable, "-m", "cogfeed"], "--help")
    assert r.returncode == 0 and r.stdout == run("--help").stdout
    r = run_exe([sys.executable, "-m", "cogfeed"], "--version")
    assert r.returncode == 0 and r.stdout == run("--version").stdout
    p = paths["gtiff_band_i16_zstd"]
    r = run_exe([sys.executable, "-m", "cogfeed"], "info", "--json", p)
    assert r.returncode == 0 and r.stdout == run("info", "--json", p).stdout


def _man_section(page, name):
    start = page.index("\n.SH %s\n" % name)
    end = page.find("\n.SH ", start + 1)
    return page[start:end if end > 0 else len(page)]


def test_man_page_environment_lists_every_variable_read():
    """ENVIRONMENT names every variable the sources read (lib/, tools/,
    python/), EXIT STATUS gives 0, 1 and 2, and there are EXAMPLES."""
    import re
    src = os.environ.get("CF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(src, "docs", "cogfeed.1")) as f:
        page = f.read()
    env = _man_section(page, "ENVIRONMENT").replace("\\-", "-")
    pat = re.compile(r'(?:\bge|getenv|environ\.get|environ\.setdefault|environ\[)\(?\s*'
                     r'"([A-Za-z_][A-Za-z0-9_]*)"')
    names = set()
    for top in ("lib", "tools", "python"):
        for dirpath, _, files in os.walk(os.path.join(src, top)):
            for fn in files:
                if fn.endswith((".c", ".h", ".py")):
                    with open(os.path.join(dirpath, fn), errors="replace") as f:
                        names.update(pat.findall(f.read()))
    assert {"AWS_ACCESS_KEY_ID", "AZURE_STORAGE_ACCOUNT", "STORAGE_EMULATOR_HOST",
            "COGFEED_PROJ_NETWORK"} <= names, names
    missing = sorted(n for n in names if not re.search(r"\b%s\b" % n, env))
    assert not missing, "not in the man page's ENVIRONMENT: %s" % missing
    for proxy in ("https_proxy", "no_proxy"):  # libcurl reads these for us
        assert proxy in env
    status = _man_section(page, "EXIT STATUS")
    for code in ('.B "0"', '.B "1"', '.B "2"'):
        assert code in status, status
    assert "cogfeed read" in _man_section(page, "EXAMPLES")


def test_every_option_has_help_text():
    """Every option of every Python command's parser says what it does."""
    import argparse
    import contextlib
    import importlib
    import io
    missing = []
    orig = argparse._ActionsContainer.add_argument
    current = [None]

    def add(self, *args, **kw):
        act = orig(self, *args, **kw)
        if not act.help and not isinstance(act, argparse._HelpAction):
            missing.append((current[0], act.option_strings or act.dest))
        return act
    argparse._ActionsContainer.add_argument = add
    try:
        from cogfeed import cli
        for cmd, (mod, _, _) in cli.COMMANDS.items():
            current[0] = cmd
            m = importlib.import_module("cogfeed.tools." + mod)
            with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit):
                m.main(["--help"])
    finally:
        argparse._ActionsContainer.add_argument = orig
    assert not missing, missing
