"""The C library as a C user gets it: `cmake --install` into a temporary
prefix, then tests/consumer/consumer.c built against that prefix once with
pkg-config (cogfeed.pc) and once with CMake's find_package(cogfeed) (both
the shared and the static target), each run on a COG with known pixels.

The build tree is $CF_BUILD_DIR (ctest sets it).
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import conformance as C  # noqa: E402  (GDAL through rasterio)

BUILD = os.environ["CF_BUILD_DIR"]
SOURCE = os.environ.get("CF_SOURCE_DIR", os.path.join(HERE, "..", ".."))
CONSUMER = os.path.join(SOURCE, "tests", "consumer")


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s" % (
        " ".join(map(str, cmd)), r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("prefix"))
    sh(["cmake", "--install", BUILD, "--prefix", p])
    return p


@pytest.fixture(scope="module")
def cog(tmp_path_factory):
    d = tmp_path_factory.mktemp("consumer")
    a = (np.arange(300 * 200 * 2, dtype=np.uint32).reshape(2, 200, 300) % 60000).astype(np.uint16)
    path = C.write_array(d / "c.tif", a, "COG", BLOCKSIZE=128, COMPRESS="ZSTD", PREDICTOR=2)
    return path, a


def _libdir(prefix):
    for d in ("lib", "lib64", os.path.join("lib", "x86_64-linux-gnu")):
        if os.path.exists(os.path.join(prefix, d, "libcogfeed.a")):
            return os.path.join(prefix, d)
    raise AssertionError("no libcogfeed.a under %s" % prefix)


def test_install_layout(prefix):
    lib = _libdir(prefix)
    names = set(os.listdir(lib))
    so = [n for n in names if n.startswith("libcogfeed.so.")]
    assert "libcogfeed.a" in names and "libcogfeed.so" in names and so, names
    major = [n for n in so if n.count(".") == 2]  # libcogfeed.so.MAJOR
    assert major and os.path.islink(os.path.join(lib, major[0]))
    assert os.path.exists(os.path.join(prefix, "include", "cogfeed.h"))
    assert os.path.exists(os.path.join(lib, "pkgconfig", "cogfeed.pc"))
    for f in ("cogfeedConfig.cmake", "cogfeedConfigVersion.cmake", "cogfeedTargets.cmake"):
        assert os.path.exists(os.path.join(lib, "cmake", "cogfeed", f)), f
    assert os.path.exists(os.path.join(prefix, "share", "man", "man1", "cogfeed.1"))
    # The C tool only: the `cogfeed` command is the Python package's.
    assert os.access(os.path.join(prefix, "bin", "cogfeed-c"), os.X_OK)
    assert not os.path.exists(os.path.join(prefix, "bin", "cogfeed"))


def _expect(cog):
    path, a = cog
    return "300 200 2 uint16 %d" % int(a[0, 20:120, 10:210].astype(np.uint64).sum())


def _run(exe, cog, env=None):
    return sh([exe, cog[0], "10", "20", "200", "100"], env=env).strip()


def test_consumer_with_pkg_config(prefix, cog, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(_libdir(prefix), "pkgconfig"))
    flags = sh(["pkg-config", "--cflags", "--libs", "cogfeed"], env=env).split()
    assert "-lcogfeed" in flags
    exe = str(tmp_path / "consumer_pc")
    sh([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Werror",
        os.path.join(CONSUMER, "consumer.c"), "-o", exe] + flags +
       ["-Wl,-rpath," + _libdir(prefix)], env=env)
    # It runs against the installed libcogfeed.so.MAJOR (its SONAME).
    needed = sh(["readelf", "-dW", exe])
    assert "[libcogfeed.so.0]" in needed
    assert _run(exe, cog) == _expect(cog)
    # The archive, with the (shared) system libraries cogfeed.pc names as
    # Requires.private and Libs.private (`pkg-config --static` would also
    # want static builds of libcurl's own dependencies).
    exe_s = str(tmp_path / "consumer_pc_static")
    req = sh(["pkg-config", "--print-requires-private", "cogfeed"], env=env).split()
    libs = sh(["pkg-config", "--libs"] + req, env=env).split() + ["-pthread", "-lm"]
    sh([os.environ.get("CC", "cc"), "-std=c11", os.path.join(CONSUMER, "consumer.c"),
        "-o", exe_s] + sh(["pkg-config", "--cflags", "cogfeed"], env=env).split() +
       [os.path.join(_libdir(prefix), "libcogfeed.a")] + libs, env=env)
    assert "libcogfeed" not in sh(["readelf", "-dW", exe_s])
    assert _run(exe_s, cog) == _expect(cog)


def test_consumer_with_find_package(prefix, cog, tmp_path):
    b = str(tmp_path / "b")
    sh(["cmake", "-S", CONSUMER, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix,
        "-DCMAKE_BUILD_TYPE=Release"])
    sh(["cmake", "--build", b])
    shared = os.path.join(b, "consumer_shared")
    static = os.path.join(b, "consumer_static")
    assert "[libcogfeed.so.0]" in sh(["readelf", "-dW", shared])
    assert "libcogfeed" not in sh(["readelf", "-dW", static])
    assert _run(shared, cog) == _expect(cog)
    assert _run(static, cog) == _expect(cog)


def test_installed_c_tool_runs_info_and_read_only(prefix, cog, tmp_path):
    """The installed cogfeed-c runs info and read itself, from a moved
    prefix too (no build path is compiled in), and never hands a command
    to Python: a research command is a usage error naming the Python
    `cogfeed` command, even with a python3 on PATH."""
    moved = str(tmp_path / "moved")
    shutil.copytree(prefix, moved, symlinks=True)
    exe = os.path.join(moved, "bin", "cogfeed-c")
    out = sh([exe, "info", "--help"])
    assert out.startswith("usage: cogfeed-c info")
    out = sh([exe, "info", "--json", cog[0]])
    assert '"width": 300, "height": 200, "count": 2' in out
    npy = str(tmp_path / "w.npy")
    sh([exe, "read", cog[0], "--window", "10,20,200,100", "-o", npy])
    np.testing.assert_array_equal(np.load(npy), cog[1][:, 20:120, 10:210])
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep +
               os.environ.get("PATH", ""))
    r = subprocess.run([exe, "synth", "--help"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert "run `cogfeed synth`" in r.stderr, r.stderr
