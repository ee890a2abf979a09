"""The option tables cross the boundary once: Python, the CLIs and the
docs read the C tables (cf_loader_option_table, cf_io_option_table in
include/cogfeed.h, through cogfeed._cogfeed.loader_options() and
io_options()) instead of restating defaults, ranges and kernel names.

- the Loader's signature defaults, help(cogfeed.Loader), IO's signature
  line, `cogfeed bench --help`, the C tool's --help and the docs' tables
  show what the C table says (the chain: test_prefetch_default_chain);
- the Literal of the kernels (type checkers need it in the source) names
  exactly the table's kernels, so the two cannot drift apart silently;
- the docs are what tools/option_docs.py generates, and a default changed
  in the table makes the generated docs differ (so the check fails and
  says to regenerate);
- the extension includes the public header only.
"""
import glob
import inspect
import os
import pydoc
import re
import shutil
import subprocess
import sys
import typing

import pytest

import cogfeed
from cogfeed import _cogfeed
from cogfeed import loader as loader_mod

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("CF_SOURCE_DIR", os.path.join(HERE, os.pardir, os.pardir))
TOOLS = os.path.join(SOURCE, "tools")


def _table(group="loader"):
    rows = _cogfeed.loader_options() if group == "loader" else _cogfeed.io_options()
    return {o["name"]: o for o in rows}


def _flat(text):
    return " ".join(text.split())


def _help(obj):
    """help(obj) as one line (pydoc's " | " margins dropped)."""
    return _flat(pydoc.render_doc(obj, renderer=pydoc.plaintext).replace("|", " "))


def test_tables_shape():
    lo, io = _table("loader"), _table("io")
    assert {"patch_size", "batch_size", "prefetch", "cache_bytes", "seed",
            "resampling", "mask_resampling"} <= set(lo)
    assert {"max_inflight", "request_timeout_s", "verify_tls", "cache_bytes"} <= set(io)
    assert lo["patch_size"]["type"] == "int" and lo["patch_size"]["ctype"] == "uint32_t"
    assert lo["seed"]["type"] == "uint" and lo["seed"]["max"] == 2**64 - 1
    assert lo["epoch"]["max"] == 2**63 - 1  # exact, not through a double
    assert lo["skip_limit"]["type"] == "float" and lo["skip_limit"]["max"] == 1.0
    assert lo["drop_last"]["type"] == "bool" and lo["drop_last"]["default"] is False
    assert lo["cache_bytes"]["runtime_default"] and "5%" in lo["cache_bytes"]["default_doc"]
    assert lo["resampling"]["choices"] == ("nearest", "bilinear", "cubic", "average", "mode")
    assert io["request_timeout_s"]["max"] == float("inf")
    for o in list(lo.values()) + list(io.values()):
        assert set(o) == {"name", "group", "id", "type", "ctype", "default", "min",
                          "max", "hint", "default_doc", "runtime_default", "choices"}


def test_resampling_literal_is_the_c_table():
    """loader.Resampling must list its names in the source for type
    checkers; they are the C table's kernels plus GDAL's alias "near"."""
    names = set(typing.get_args(loader_mod.Resampling))
    assert names == set(_table()["resampling"]["choices"]) | {"near"}
    assert loader_mod._RESAMPLING == _table()["resampling"]["choices"]


def test_loader_signature_defaults_are_the_tables():
    lo = _table()
    checked = 0
    for p in inspect.signature(cogfeed.Loader.__init__).parameters.values():
        c = loader_mod._C_NAMES.get(p.name, p.name)
        if c in lo and p.default is not None:
            assert p.default == lo[c]["default"], p.name
            assert type(p.default) is type(lo[c]["default"]), p.name
            checked += 1
    assert checked >= 14


def test_help_shows_the_tables_defaults():
    """help(cogfeed.Loader) shows each table-backed keyword's default and
    range as the table has them, under that keyword's entry."""
    doc = _help(cogfeed.Loader)
    lo = _table()
    for name in ("patch_size", "batch_size", "prefetch", "skip_limit", "error_threshold",
                 "concurrency", "cache_bytes", "apply_scale_offset", "threads"):
        assert _flat(loader_mod.option_summary(lo[name])) in doc, name
    assert 'C default "bilinear"' in doc and "one of nearest, bilinear, cubic" in doc
    entry = doc[doc.index("prefetch: batch slots"):doc.index("decode_threads: reader")]
    assert "C default %d; 0 to %d (0: auto)." % (lo["prefetch"]["default"],
                                                lo["prefetch"]["max"]) in entry


def test_io_signature_line_is_the_table():
    sig = cogfeed.IO.__doc__.split("\n", 1)[0]
    got = dict(re.findall(r"(\w+)=([^,)]+)", sig))
    io = _table("io")
    assert set(got) == set(io) | {"header_cache_dir", "ca_file", "sign"}
    for name, o in io.items():
        want = ({True: "True", False: "False"}[o["default"]] if o["type"] == "bool"
                else repr(o["default"]) if o["type"] != "float"
                else "%.17g" % o["default"])
        assert got[name] == want, name


def test_table_checks_the_keywords():
    """_Loader's and IO's keywords go through the table's check before
    anything is opened (the file does not exist)."""
    with pytest.raises(ValueError, match=r"loader: patch_size 0 not in \[1, 65536\]"):
        _cogfeed._Loader(["/nonexistent.tif"], patch_size=0)
    with pytest.raises(ValueError, match=r"prefetch 65 not in \[0, 64\] \(0: auto\)"):
        _cogfeed._Loader(["/nonexistent.tif"], prefetch=65)
    with pytest.raises(ValueError, match="bogus"):
        _cogfeed._Loader(["/nonexistent.tif"], resampling="bogus")
    with pytest.raises(TypeError):
        _cogfeed._Loader(["/nonexistent.tif"], batch_size=2.5)
    with pytest.raises(OverflowError):
        _cogfeed._Loader(["/nonexistent.tif"], inflight_bytes=2**70)
    with pytest.raises(TypeError, match="no_such"):
        _cogfeed._Loader(["/nonexistent.tif"], no_such=1)
    with pytest.raises(ValueError, match=r"cf_io_new: connect_timeout_s 0 not in \(0, inf\]"):
        cogfeed.IO(connect_timeout_s=0)
    with pytest.raises(TypeError, match="no_such"):
        cogfeed.IO(no_such=1)


def _run(args, **kw):
    env = dict(os.environ, COLUMNS="80", LC_ALL="C")
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120,
                          check=True, **kw).stdout


def test_prefetch_default_chain():
    """One default, read from the C table, as every reader shows it:
    help(cogfeed.Loader), `cogfeed bench --help`, docs/loader.md; and the
    io's max_inflight in the C tool's --help and docs/remote.md."""
    pf = _table()["prefetch"]
    said = "C default %d; 0 to %d (0: auto)" % (pf["default"], pf["max"])
    assert said in _help(cogfeed.Loader)
    bench = _flat(_run([sys.executable, "-m", "cogfeed.cli", "bench", "--help"]))
    assert "--prefetch PREFETCH batch slots in flight (%s)" % said in bench
    with open(os.path.join(SOURCE, "docs", "loader.md")) as f:
        assert "| `prefetch` | `prefetch` | `int` | %d | 0 to %d (0: auto) |" % (
            pf["default"], pf["max"]) in f.read()
    mi = _table("io")["max_inflight"]
    tool = os.environ.get("COGFEED_BIN")
    if tool and os.path.exists(tool):
        out = _run([tool, "info", "--help"])
        assert "  --max-inflight N      requests in flight at once (%d)\n" % mi["default"] in out
        t = _table("io")["request_timeout_s"]
        assert "deadline per request, retries included (%g)" % t["default"] in out
    with open(os.path.join(SOURCE, "docs", "remote.md")) as f:
        assert "| `max_inflight` | %d | at least %d" % (mi["default"], mi["min"]) in f.read()


def _option_docs():
    sys.path.insert(0, TOOLS)
    try:
        import option_docs
    finally:
        sys.path.remove(TOOLS)
    return option_docs


def test_docs_are_generated_from_the_tables():
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "option_docs.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_changed_default_makes_the_docs_stale(tmp_path, monkeypatch):
    """A default changed in the C table (here: the table as the extension
    would return it with prefetch 7 and io max_inflight 99) changes the
    generated tables, so --check fails and names what to run."""
    od = _option_docs()
    for rel in od.BLOCKS:
        os.makedirs(tmp_path / os.path.dirname(rel), exist_ok=True)
        shutil.copy(os.path.join(SOURCE, rel), tmp_path / rel)
    assert od.main(["--check", "--root", str(tmp_path)]) == 0
    lo, io = _cogfeed.loader_options(), _cogfeed.io_options()
    for o in lo:
        if o["name"] == "prefetch":
            o["default"] = 7
    for o in io:
        if o["name"] == "max_inflight":
            o["default"] = 99
    monkeypatch.setattr(od._cogfeed, "loader_options", lambda: lo)
    monkeypatch.setattr(od._cogfeed, "io_options", lambda: io)
    assert od.main(["--check", "--root", str(tmp_path)]) == 1
    assert od.main(["--root", str(tmp_path)]) == 0
    assert "| `prefetch` | `prefetch` | `int` | 7 |" in (tmp_path / "docs/loader.md").read_text()
    remote = (tmp_path / "docs/remote.md").read_text()
    assert "| `max_inflight` | 99 |" in remote
    # The hand-written meanings and the path rows survive regeneration.
    assert "TCP + TLS connect" in remote and "| `ca_file` | system |" in remote


def test_extension_includes_the_public_header_only():
    """python/*.c and *.h include no lib/ header, and CMake gives the
    extension no lib/ include folder: it is a client of cogfeed.h."""
    for path in glob.glob(os.path.join(SOURCE, "python", "*.[ch]")):
        with open(path) as f:
            for inc in re.findall(r'#include\s+"([^"]+)"', f.read()):
                assert inc in ("pymod.h", "cogfeed.h"), (path, inc)
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        cm = f.read()
    for line in cm.splitlines():
        if "target_include_directories(_cogfeed" in line:
            assert "/lib" not in line, line
