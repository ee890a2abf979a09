"""The Python package as users get it: what `import cogfeed` pulls in,
its type information, and the numpy dtypes its arguments take.

Under run.sh test these tests run against the installed wheel (the
package's files come from the test venv's site-packages, not the source
tree); under a build tree's ctest, against BUILD/python.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import conformance as C  # noqa: E402

import cogfeed  # noqa: E402


def test_core_import_does_not_import_the_research_tools():
    """cogfeed's core never imports cogfeed.tools (Optuna, matplotlib, the
    UNet, bench) nor torch or GDAL: they are extras.  'osgeo' is GDAL's own
    Python bindings: the project no longer uses them (rasterio instead), but a
    user's environment may have them, and the core must not import them."""
    code = ("import sys, cogfeed, cogfeed.loader, cogfeed.cli\n"
            "heavy = [m for m in sys.modules if m == 'cogfeed.tools' or\n"
            "         m.startswith('cogfeed.tools.') or m.split('.')[0] in\n"
            "         ('torch', 'optuna', 'matplotlib', 'rasterio', 'osgeo')]\n"
            "print(','.join(sorted(heavy)))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", "import cogfeed imported %s" % r.stdout.strip()
    # ...and the check can fail: the tools do import them.
    r = subprocess.run([sys.executable, "-c", code.replace(
        "cogfeed.cli\n", "cogfeed.cli, cogfeed.tools.tune, cogfeed.tools.tune\n"
        "cogfeed.tools.tune.anova_importance()\n")], capture_output=True, text=True,
        timeout=120)
    assert "cogfeed.tools.tune" in r.stdout and "optuna" in r.stdout, r.stdout + r.stderr


def test_typed_package_and_stub_match_the_module():
    pkg = os.path.dirname(cogfeed.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    assert os.path.exists(os.path.join(pkg, "_cogfeed.pyi"))
    # mypy's stubtest imports cogfeed._cogfeed and compares every name,
    # class and (where the C code gives one) signature with the stub.
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "cogfeed._cogfeed"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_tests_use_the_installed_package():
    """With a wheel under test (run.sh test), cogfeed is the installed one."""
    if not os.environ.get("CF_WHEEL"):
        pytest.skip("testing a build tree (PYTHONPATH), not a wheel")
    f = os.path.realpath(cogfeed.__file__)
    assert "site-packages" in f, f
    for d in (os.environ.get("CF_SOURCE_DIR"), os.environ.get("CF_BUILD_DIR")):
        if d:
            assert not f.startswith(os.path.realpath(d) + os.sep) or \
                "testenv" in f, (f, d)


@pytest.fixture(scope="module")
def cog_path(tmp_path_factory):
    a = (np.arange(2 * 128 * 128).reshape(2, 128, 128) % 4000).astype(np.uint16)
    return C.write_array(tmp_path_factory.mktemp("pkg") / "p.tif", a, "COG",
                         BLOCKSIZE=64, COMPRESS="DEFLATE")


@pytest.mark.parametrize("dtype", ["float32", "f4", np.float32, np.dtype("float32"),
                                   np.dtype("<f4")])
def test_loader_takes_numpy_dtypes(cog_path, dtype):
    with cogfeed.Loader([cog_path], patch_size=32, batch_size=2, dtype=dtype,
                        epoch_length=2) as ld:
        assert next(iter(ld))["image"].dtype == np.float32


@pytest.mark.parametrize("dtype", [None, "raw"])
def test_loader_raw_dtype(cog_path, dtype):
    with cogfeed.Loader([cog_path], patch_size=32, batch_size=2, dtype=dtype,
                        epoch_length=2) as ld:
        assert next(iter(ld))["image"].dtype == np.uint16


@pytest.mark.parametrize("dtype", [np.float64, "uint8", np.int16, "nonsense"])
def test_loader_rejects_other_dtypes(cog_path, dtype):
    with pytest.raises(ValueError, match="dtype must be 'raw' or float32"):
        cogfeed.Loader([cog_path], patch_size=32, batch_size=2, dtype=dtype)


def test_io_options_checked_in_c_by_name():
    """cogfeed.IO's keywords come from C's one table (lib/io/io_options.h)
    and are checked there, before narrowing: the Python side used to
    check five of them with one message for all, and let NaN timeouts and
    a negative low_speed_bytes through to C's "an option is out of
    range"."""
    import math
    cases = {"max_inflight": 0, "header_bytes": -5, "merge_gap": -1,
             "request_timeout_s": 0.0, "retry_base_ms": math.nan,
             "low_speed_bytes": -1, "max_open_files": -2}
    for name, bad in cases.items():
        with pytest.raises(ValueError, match="%s .* not in" % name):
            cogfeed.IO(**{name: bad})
    cogfeed.IO(request_timeout_s=math.inf, hedge_after_ms=-1,
               header_cache_max_bytes=0)


# -- the typed API, as a user's type checker sees it -------------------------

DATA = os.path.join(HERE, "data")
PYRIGHT = os.path.join(HERE, os.pardir, "servers", "node_modules", ".bin", "pyright")


def _package_parent():
    """The folder holding the cogfeed package under test, or None where it
    is an installed one (site-packages: found by the checkers themselves,
    and mypy refuses site-packages in MYPYPATH)."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(cogfeed.__file__)))
    return None if os.path.basename(parent) in ("site-packages", "dist-packages") else parent


def _mypy(script, tmp_path):
    """mypy --strict on script: {line: [messages]}, and its output."""
    env = dict(os.environ)
    parent = _package_parent()
    if parent:
        env["MYPYPATH"] = parent  # the build tree's python/ (PYTHONPATH)
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict",
                        "--python-executable", sys.executable,
                        "--cache-dir", str(tmp_path / "mypy_cache"),
                        "--no-color-output", "--no-error-summary",
                        os.path.basename(script)],
                       cwd=os.path.dirname(script), env=env,
                       capture_output=True, text=True, timeout=600)
    errors = {}
    for ln in r.stdout.splitlines():
        parts = ln.split(":", 3)
        if len(parts) == 4 and parts[2].strip() == "error":
            # (an error in the package itself, checked from the build
            # tree, fails the test as well: line 0)
            line = int(parts[1]) if parts[0] == os.path.basename(script) else 0
            errors.setdefault(line, []).append(ln)
    assert r.returncode in (0, 1) and (r.returncode == 0) == (not errors), \
        r.stdout[-3000:] + r.stderr[-2000:]
    return errors, r.stdout + r.stderr


def _pyright(script, tmp_path):
    """pyright (strict) on script: {line: [messages]}, and its output."""
    import json
    assert os.path.exists(PYRIGHT), (
        "pyright is missing: ./run.sh build installs it (npm install --prefix "
        "tests/servers, tests/servers/package.json)")
    cfg = {"include": [os.path.basename(script)], "typeCheckingMode": "strict"}
    if _package_parent():
        cfg["extraPaths"] = [_package_parent()]
    conf = os.path.join(os.path.dirname(script), "pyrightconfig.json")
    with open(conf, "w") as f:
        json.dump(cfg, f)
    r = subprocess.run([PYRIGHT, "-p", conf, "--pythonpath", sys.executable,
                        "--outputjson"], cwd=os.path.dirname(script),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-2000:]
    out = json.loads(r.stdout)
    errors = {}
    for d in out["generalDiagnostics"]:
        if d["severity"] == "error":
            errors.setdefault(d["range"]["start"]["line"] + 1, []).append(d["message"])
    return errors, r.stdout


def _copy_script(name, tmp_path):
    import shutil
    d = tmp_path / name.replace(".py", "")
    d.mkdir()
    return shutil.copy(os.path.join(DATA, name), d / name)


def test_user_script_type_checks_and_runs(tmp_path):
    """A user's script (tests/python/data/typed_user.py: open and read, a
    Loader with its options, batches, states, a CogDataset in a DataLoader)
    passes mypy --strict and pyright's strict mode: no untyped calls, and
    its assert_type lines pin the types a user relies on (batch["image"]
    an NDArray, state_dict() a LoaderState, ...; Any would fail them).
    Then it runs, on two small COGs: the types describe what it gets."""
    script = _copy_script("typed_user.py", tmp_path)
    errors, out = _mypy(script, tmp_path)
    assert not errors, out[-4000:]
    errors, out = _pyright(script, tmp_path)
    assert not errors, errors
    from test_loader import make_pair
    img, msk = make_pair(str(tmp_path), "u", 200, 160)
    r = subprocess.run([sys.executable, script, img, msk], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "typed_user ok" in r.stdout, r.stdout + r.stderr


def _marked_lines(script):
    """{line: word} of the lines marked "# typo: word" ("# typo": the
    checkers print the value's type, not the word)."""
    import re
    marks = {}
    with open(script) as f:
        for i, ln in enumerate(f, 1):
            m = re.search(r"  # typo(?:: (\w+))?$", ln.rstrip())
            if m:
                marks[i] = m.group(1) or ""
    return marks


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_typos_are_type_errors(tmp_path, checker):
    """Misspelt sampler, kernel and dtype names, a misspelt keyword and
    state key, through Loader, CogDataset's **loader_kwargs and Cog.read:
    each checker reports an error on every such line of
    tests/python/data/typed_typos.py, naming the typo, and nowhere else."""
    script = _copy_script("typed_typos.py", tmp_path)
    marks = _marked_lines(script)
    assert {"randm", "bilinaer", "float23"} <= set(marks.values())
    errors, out = (_mypy if checker == "mypy" else _pyright)(script, tmp_path)
    assert set(errors) == set(marks), (sorted(errors), sorted(marks), out[-4000:])
    for line, word in marks.items():
        if word:
            assert any(word in m for m in errors[line]), (line, word, errors[line])


def test_option_types_follow_the_signatures():
    """LoaderOptions (CogDataset's **loader_kwargs) names every Loader
    keyword but the ones CogDataset sets itself, and IOOptions every
    cogfeed.IO keyword (its signature line)."""
    import inspect
    import re
    from cogfeed.loader import IOOptions, LoaderOptions
    params = set(inspect.signature(cogfeed.Loader.__init__).parameters)
    own = {"self", "images", "masks", "rank", "world_size", "epoch", "copy"}
    assert set(LoaderOptions.__annotations__) == params - own
    sig = cogfeed.IO.__doc__.split(")", 1)[0]
    assert set(IOOptions.__annotations__) == set(re.findall(r"(\w+)=", sig))
