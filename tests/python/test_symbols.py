"""What the library exports is exactly what cogfeed.h declares.

cogfeed is linked into other people's programs and Python processes next to
GDAL, libtiff and friends.  The library is built with -fvisibility=hidden
and cogfeed.h marks each public function CF_API, so:

- libcogfeed.so exports exactly the CF_API functions of cogfeed.h: a
  declaration someone added without CF_API (not exported) and a function
  marked CF_API that the header does not declare both fail here, by name;
- the static-linking-only section of cogfeed.h (CF_STATIC_LINKING_ONLY) is
  in libcogfeed.a but not exported by the .so;
- every global symbol of libcogfeed.a and of each layer's archive carries
  the project prefix, and all but the CF_API ones are hidden, so that a
  program linking the archive into a shared object does not re-export
  internals (internal cross-file helpers are cf__x, hidden: test_source_rules.py);
- the extension module exports only its init function.

The build tree is $CF_BUILD_DIR (ctest sets it).
"""
import glob
import os
import re
import subprocess

import pytest

BUILD = os.environ.get("CF_BUILD_DIR") or os.path.dirname(os.environ["COGFEED_BIN"])
SOURCE = os.environ.get("CF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(SOURCE, "include", "cogfeed.h")

# "cf_status cf_x(", "const char *cf_x(", "const char *const *cf_x(", ...
_DECL = re.compile(r"^(?!typedef\b)(CF_API\s+)?(?:const\s+)?[a-z0-9_]+(?:\s|\*|const\b)+(cf_[a-z0-9_]+)\s*\(", re.M)


def header_declarations(text):
    """(CF_API names, names declared without CF_API, static-linking-only
    names) of cogfeed.h's text."""
    cut = text.find("#if defined(CF_STATIC_LINKING_ONLY)")
    stable, experimental = (text, "") if cut < 0 else (text[:cut], text[cut:])
    api = {m.group(2) for m in _DECL.finditer(stable) if m.group(1)}
    bare = {m.group(2) for m in _DECL.finditer(stable) if not m.group(1)}
    exp = {m.group(2) for m in _DECL.finditer(experimental)}
    return api, bare, exp


def header():
    with open(HEADER) as f:
        return header_declarations(f.read())


def dynamic_exports(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    return {p[2] for p in (l.split() for l in out.splitlines())
            if len(p) == 3 and p[1] in "TDBRVWi"}


def archive_globals(path):
    """{name: visibility} of the defined global symbols of a static
    archive (readelf shows the visibility that nm does not)."""
    out = subprocess.run(["readelf", "-sW", path], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        p = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(p) == 8 and p[4] in ("GLOBAL", "WEAK") and p[6] != "UND" \
                and p[3] in ("FUNC", "OBJECT", "TLS", "IFUNC"):
            syms[p[7]] = p[5]
    return syms


def _sanitizer(name):
    return name.startswith(("__odr_asan", "__asan", "__sancov", "__tsan", "__ubsan"))


def test_header_parser_sees_the_api():
    api, bare, exp = header()
    # The parser sees the public API and the experimental section, so the
    # checks below can fail.
    assert {"cf_cog_open", "cf_cog_read", "cf_loader_new", "cf_strerror"} <= api
    assert "cf_cog_open_memory" in exp and "cf_cog_open_memory" not in api
    api2, bare2, _ = header_declarations(
        "CF_API int cf_a(void);\nvoid cf_b(int x);\nCF_API const char *cf_c(int);\n"
        "CF_API const char *const *cf_d(int);\n")
    assert api2 == {"cf_a", "cf_c", "cf_d"} and bare2 == {"cf_b"}


def test_every_header_function_has_cf_api():
    _, bare, _ = header()
    assert not bare, ("declared in cogfeed.h without CF_API (libcogfeed.so will "
                      "not export them): %s" % ", ".join(sorted(bare)))


def _shared():
    so = os.path.join(BUILD, "libcogfeed.so")
    assert os.path.exists(so), "%s not built" % so
    return so


def test_shared_library_has_soname():
    out = subprocess.run(["readelf", "-dW", _shared()], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[(.*)\]", out)
    with open(HEADER) as f:
        major = re.search(r"#define CF_VERSION_MAJOR (\d+)", f.read()).group(1)
    assert m and m.group(1) == "libcogfeed.so.%s" % major


def test_shared_library_exports_exactly_the_header():
    api, _, exp = header()
    got = {s for s in dynamic_exports(_shared()) if not _sanitizer(s)}
    missing = sorted(api - got)
    extra = sorted(got - api)
    assert not missing, ("declared CF_API in cogfeed.h but not exported by "
                         "libcogfeed.so (not defined?): %s" % ", ".join(missing))
    assert not extra, ("exported by libcogfeed.so but not declared CF_API in "
                       "cogfeed.h (make it static, or drop CF_API): %s" % ", ".join(extra))
    assert not (got & exp)


ARCHIVES = sorted(glob.glob(os.path.join(BUILD, "libcf_*.a"))) + \
    [os.path.join(BUILD, "libcogfeed.a")]


def test_archives_found():
    names = {os.path.basename(p) for p in ARCHIVES if os.path.exists(p)}
    for layer in ("common", "tiff", "codec", "io", "pipeline"):
        assert "libcf_%s.a" % layer in names
    assert "libcogfeed.a" in names


@pytest.mark.parametrize("lib", ARCHIVES, ids=os.path.basename)
def test_archive_symbols_are_prefixed_and_hidden(lib):
    api, _, exp = header()
    syms = {n: v for n, v in archive_globals(lib).items() if not _sanitizer(n)}
    bad = sorted(s for s in syms if not s.startswith("cf_"))
    assert not bad, "unprefixed global symbols in %s: %s" % (os.path.basename(lib), bad)
    visible = sorted(s for s, v in syms.items() if v == "DEFAULT" and s not in api)
    assert not visible, ("%s: visible symbols that cogfeed.h does not declare "
                         "CF_API: %s" % (os.path.basename(lib), visible))


def test_combined_archive_holds_everything():
    api, _, exp = header()
    syms = archive_globals(os.path.join(BUILD, "libcogfeed.a"))
    missing = sorted((api | exp) - set(syms))
    assert not missing, "libcogfeed.a lacks %s" % missing
    # One archive with every layer: each layer's globals are in it.
    for lib in glob.glob(os.path.join(BUILD, "libcf_*.a")):
        lost = sorted(set(archive_globals(lib)) - set(syms))
        assert not lost, "%s's %s are not in libcogfeed.a" % (os.path.basename(lib), lost)


def _extension():
    import cogfeed._cogfeed as ext  # the installed one when testing a wheel
    return ext.__file__


def test_extension_exports_only_its_init():
    exported = {s for s in dynamic_exports(_extension()) if not _sanitizer(s)}
    assert exported == {"PyInit__cogfeed"}, "the extension exports %s" % sorted(exported)
