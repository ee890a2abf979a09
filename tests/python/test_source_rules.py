"""Rules of the sources that a compiler does not check (docs/internals.md,
"Naming" and "The error idiom"):

- libuv's naming rule: `cf_` is public, `cf__` internal.  No function,
  type (typedef name, struct/union/enum tag) or file-scope variable defined
  under lib/, python/*.[ch] or tools/*.[ch], tools/cli/*.[ch] carries the public prefix cf_
  unless include/cogfeed.h declares it.  A name that does is renamed by
  tools/seams/rename_internal.py (cf_x -> cf__x, every use).
- One forwarding idiom: a failure is passed up with CF__TRY
  (lib/common/common.h), never with `if (st) return st;`,
  `if (st != CF_OK) return st;` or `if ((st = f()) != CF_OK) return st;`
  (tools/seams/error_idiom.py rewrites them).
- One cleanup idiom: cleanup runs under the label `done:` (every exit) or
  `fail:` (failures only); the other labels of lib/ are jumps of a
  decoder's state machine, listed below with their reason.

Each check names every offender (file:line), so that the fix is a rerun
of the script or an edit at that place.  Pure text: no build needed.
"""
import os
import re
import sys

SOURCE = os.environ.get("CF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tools", "seams"))
import csource  # noqa: E402
import error_idiom  # noqa: E402

CLEANUP_LABELS = {"done", "fail"}
# Labels that are not cleanup: a decoder's jumps.  (file, label): reason.
OTHER_LABELS = {
    ("lib/codec/lzw.c", "restart"): "a Clear code restarts the LZW string table",
    ("lib/codec/lerc2.c", "short_block"): "a Lerc2 block shorter than its header says",
}


def lib_sources():
    for rel in csource.tracked_files(SOURCE):
        if re.match(r"^lib/.*\.[ch]$", rel):
            with open(os.path.join(SOURCE, rel), encoding="utf-8") as f:
                yield rel, f.read()


def test_parser_sees_definitions():
    # The scanner finds each kind of definition, so the rule can fail.
    code = csource.strip_c(
        "typedef struct cf_a { int x; } cf_a;\n"
        "typedef struct cf_b cf_b;\n"
        "typedef void (*cf_c)(int);\n"
        "enum cf_d { CF_D0 };\n"
        "static inline int cf_e(void) { return cf_f(1); }\n"
        "const char *const *cf_g(int n,\n    int m);\n"
        "extern int *cf_h;\n"
        "cf_status cf__ok(void);\n"
        "/* cf_comment(x) */ const char *s = \"cf_string(\";\n"
        "    return cf_call(x) * cf_call2(y);\n")
    names = {n: k for n, k, _ in csource.definitions(code)}
    assert names == {"cf_a": "type", "cf_b": "type", "cf_c": "type", "cf_d": "type",
                     "cf_e": "function", "cf_g": "function", "cf_h": "variable"}, names
    pub = csource.public_names("CF_API cf_status cf_x(cf_y *p); /* cf_z */\n")
    assert {"cf_x", "cf_y"} <= pub and "cf_z" not in pub


def test_internal_names_are_cf__():
    bad = csource.internal_cf_names(SOURCE)
    assert not bad, (
        "defined with the public prefix cf_ but not declared in include/cogfeed.h "
        "(internal names are cf__; run tools/seams/rename_internal.py):\n" +
        "\n".join("  %s %s (%s)" % (w, n, k) for n, (k, w) in sorted(bad.items(), key=lambda x: x[1][1])))


def test_failures_forwarded_with_cf__try():
    bad = []
    for rel, text in lib_sources():
        for i, line in enumerate(text.split("\n")):
            m = error_idiom.FWD.match(line)
            if m and error_idiom.is_status(text, m.group(2)):
                bad.append("%s:%d: %s" % (rel, i + 1, line.strip()))
            if error_idiom.FWD_ASSIGN.match(line):
                bad.append("%s:%d: %s" % (rel, i + 1, line.strip()))
    assert not bad, ("failures forwarded by hand (use CF__TRY; "
                     "tools/seams/error_idiom.py rewrites these):\n  " + "\n  ".join(bad))


def test_forwarding_check_can_fail():
    text = "cf_status f(void) {\n    cf_status st = g();\n    if (st) return st;\n}\n"
    assert error_idiom.FWD.match(text.split("\n")[2]) and error_idiom.is_status(text, "st")
    # an int code is not a status (lerc2.c's internal codes)
    assert not error_idiom.is_status("int r = g();\nif (r) return r;\n", "r")
    assert error_idiom.FWD_ASSIGN.match("    if ((st = f(x)) != CF_OK) return st;")


# Type names that start a line of a _Generic selection as "double: f",
# which reads like a label to the regex.
C_TYPE_WORDS = {"char", "short", "int", "long", "float", "double", "signed", "unsigned",
                "void", "_Bool", "bool", "const", "volatile"}


def test_cleanup_labels():
    bad = []
    for rel, text in lib_sources():
        code = csource.strip_c(text)
        for m in re.finditer(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*:(?!:)", code, re.M):
            name = m.group(1)
            # "case" too: a case of a character literal ('x') loses the
            # literal when comments and strings are stripped.
            if name in ("default", "public", "private", "case") or name in CLEANUP_LABELS:
                continue
            if name in C_TYPE_WORDS:  # a _Generic association ("double: f")
                continue
            if (rel, name) in OTHER_LABELS:
                continue
            # "case X:" lines and bit-fields ("unsigned x : 1") do not
            # start with the name alone.
            bad.append("%s:%d: %s:" % (rel, csource.line_of(code, m.start(1)), name))
    assert not bad, ("cleanup labels other than done: (every exit) and fail: (failures "
                     "only); rename them (tools/seams/error_idiom.py) or list a "
                     "non-cleanup jump in OTHER_LABELS:\n  " + "\n  ".join(bad))
    gone = [k for k in OTHER_LABELS
            if not re.search(r"^\s*%s:" % k[1], open(os.path.join(SOURCE, k[0])).read(), re.M)]
    assert not gone, "OTHER_LABELS lists labels that are gone: %s" % gone
