"""Every symbol the library exports carries the project prefix.

cogfeed is linked into other people's programs and Python processes next to
GDAL, libtiff and friends: an unprefixed global (a helper someone forgot to
make static) could clash with theirs.  Public API is cf_*, internal
cross-file helpers cf__* (double underscore); everything else must be
static.  The extension module may export only its init function.
"""
import glob
import os
import subprocess

import pytest

BUILD = os.path.dirname(os.environ["COGFEED_BIN"])


def defined_globals(path):
    out = subprocess.run(["nm", "-g", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRVWtdbr" and parts[1].isupper():
            syms.append(parts[2])
    return syms


LIBS = sorted(glob.glob(os.path.join(BUILD, "libcf_*.a")))


def test_libraries_found():
    names = {os.path.basename(p) for p in LIBS}
    for layer in ("common", "tiff", "codec", "io", "pipeline"):
        assert "libcf_%s.a" % layer in names
    # The parser of nm's output sees the public API (so the checks below
    # can fail).
    syms = defined_globals(os.path.join(BUILD, "libcf_pipeline.a"))
    assert "cf_cog_open" in syms and "cf_cog_read" in syms


@pytest.mark.parametrize("lib", LIBS, ids=os.path.basename)
def test_static_library_symbols_are_prefixed(lib):
    bad = [s for s in defined_globals(lib)
           if not s.startswith("cf_") and not s.startswith("__odr_asan")
           and not s.startswith("__asan") and not s.startswith("__sancov")]
    assert not bad, "unprefixed exported symbols in %s: %s" % (os.path.basename(lib), bad)


def test_extension_exports_only_its_init():
    so = glob.glob(os.path.join(BUILD, "python", "cogfeed", "_cogfeed*.so"))
    assert so
    out = subprocess.run(["nm", "-D", "--defined-only", so[0]], check=True,
                         capture_output=True, text=True).stdout
    exported = [l.split()[-1] for l in out.splitlines()
                if len(l.split()) == 3 and l.split()[1] in "TDB"]
    bad = [s for s in exported if s != "PyInit__cogfeed" and not s.startswith("cf_")
           and not s.startswith("_") and not s.startswith("__")]
    assert not bad, "the extension exports %s" % bad
