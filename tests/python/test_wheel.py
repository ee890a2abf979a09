"""The wheel on its own: installed into a fresh virtual environment that
holds nothing else but numpy, it imports, opens and reads a COG, and its
`cogfeed` command works; auditwheel has put every C library it links
inside it.

$CF_WHEEL is the repaired wheel (run.sh test builds it; ctest passes it
with -DCF_TEST_WHEEL).  Without it (a plain build tree's run) these tests
are skipped: the build tree is not a wheel.
"""
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import conformance as C  # noqa: E402  (GDAL through rasterio)

WHEEL = os.environ.get("CF_WHEEL")
pytestmark = pytest.mark.skipif(not WHEEL, reason="no wheel given (CF_WHEEL)")


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s" % (
        " ".join(map(str, cmd)), r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A new venv from Debian's python3 with numpy and the wheel only."""
    d = str(tmp_path_factory.mktemp("wheelenv") / "venv")
    sh(["/usr/bin/python3", "-m", "venv", d])
    py = os.path.join(d, "bin", "python")
    links = ["--find-links", "/opt/wheels"] if os.path.isdir("/opt/wheels") else []
    sh([py, "-m", "pip", "install", "-q"] + links + [WHEEL, "numpy"],
       env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    return d


@pytest.fixture(scope="module")
def cog(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheelcog")
    a = ((np.arange(3 * 300 * 400).reshape(3, 300, 400) * 7) % 65521).astype(np.uint16)
    return C.write_array(d / "w.tif", a, "COG", BLOCKSIZE=128, COMPRESS="DEFLATE",
                         PREDICTOR=2), a


def test_wheel_is_repaired_and_carries_its_libraries():
    names = zipfile.ZipFile(WHEEL).namelist()
    assert "manylinux" in os.path.basename(WHEEL), WHEEL
    libs = [n for n in names if n.startswith("cogfeed.libs/")]
    for lib in ("libcurl", "libdeflate", "libzstd"):
        assert any(os.path.basename(n).startswith(lib) for n in libs), (lib, libs)
    assert "cogfeed/bin/cogfeed-c" in names and "cogfeed/py.typed" in names
    assert any(n.startswith("cogfeed/_cogfeed") and n.endswith(".pyi") for n in names)
    assert any(n.endswith("share/man/man1/cogfeed.1") for n in names)


def test_only_numpy_and_the_wheel(env):
    py = os.path.join(env, "bin", "python")
    dists = sh([py, "-m", "pip", "list", "--format=json"])
    names = {d["name"].lower() for d in json.loads(dists)}
    assert names - {"pip", "setuptools"} == {"cogfeed", "numpy"}, names


def test_import_and_read_a_cog(env, cog):
    path, a = cog
    py = os.path.join(env, "bin", "python")
    code = (
        "import sys, numpy as np, cogfeed\n"
        "c = cogfeed.open(sys.argv[1])\n"
        "w = c.read(window=(50, 60, 200, 100), bands=[3, 1])\n"
        "sys.stdout.buffer.write(w.tobytes())\n"
        "assert cogfeed.__file__.startswith(sys.prefix), cogfeed.__file__\n")
    r = subprocess.run([py, "-c", code, path], capture_output=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr.decode()
    got = np.frombuffer(r.stdout, np.uint16).reshape(2, 100, 200)
    np.testing.assert_array_equal(got, a[[2, 0], 60:160, 50:250])


def test_extension_links_only_what_the_wheel_carries(env):
    py = os.path.join(env, "bin", "python")
    ext = sh([py, "-c", "import cogfeed._cogfeed as e; print(e.__file__)"]).strip()
    ldd = sh(["ldd", ext])
    assert "not found" not in ldd, ldd
    for lib in ("libcurl", "libdeflate", "libzstd"):
        line = [ln for ln in ldd.splitlines() if lib in ln]
        assert line and "cogfeed.libs" in line[0], (lib, ldd)


def test_console_script(env, cog, tmp_path):
    path, a = cog
    exe = os.path.join(env, "bin", "cogfeed")
    envv = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    info = json.loads(sh([exe, "info", path, "--json"], env=envv))
    assert (info["width"], info["height"], info["count"]) == (400, 300, 3)
    out = tmp_path / "w.npy"
    sh([exe, "read", path, "--window", "10,20,30,40", "--bands", "2", "-o", str(out)], env=envv)
    np.testing.assert_array_equal(np.load(out), a[1:2, 20:60, 10:40])
    assert "usage: cogfeed COMMAND" in sh([exe, "--help"], env=envv)
    # The research commands need the experiments extra, and say so.
    r = subprocess.run([exe, "tune", "x"], capture_output=True, text=True, env=envv)
    assert r.returncode != 0 and "cogfeed[experiments]" in r.stderr, r.stderr
