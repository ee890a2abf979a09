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
