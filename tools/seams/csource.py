"""Shared helpers of the tools/seams scripts and of
tests/python/test_source_rules.py: read C sources without their comments
and string literals, and find the `cf_` names they define.

Stdlib only.  A "name defined" here is a function (declared or defined), a
type (typedef name, struct/union/enum tag) or a file-scope variable
(`extern` declaration or definition), found by regular expressions on the
code with comments and strings blanked out: the sources follow style.md,
so that is enough, and it needs no compiler.
"""
import os
import re
import subprocess

KEYWORDS = {
    "return", "sizeof", "case", "else", "do", "goto", "if", "while", "for",
    "switch", "typedef", "struct", "union", "enum", "_Alignof", "alignof",
}

_TOKEN = re.compile(r"""
    (?P<lc>//[^\n]*)
  | (?P<bc>/\*.*?\*/)
  | (?P<s>"(?:\\.|[^"\\\n])*")
  | (?P<c>'(?:\\.|[^'\\\n])*')
""", re.S | re.X)


def strip_c(text):
    """text with comments and string/char literals replaced by spaces
    (newlines kept, so offsets and line numbers stay)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return _TOKEN.sub(blank, text)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


_NAME = r"(cf_[A-Za-z0-9][A-Za-z0-9_]*)"
_TAG = re.compile(r"\b(?:struct|union|enum)\s+" + _NAME + r"\b")
_TD_FNPTR = re.compile(r"\btypedef\b[^;{}]*\(\s*\*\s*" + _NAME + r"\s*\)")
_TD_PLAIN = re.compile(r"\btypedef\b[^;{}(]*\b" + _NAME + r"\s*(?:\[[^\]]*\])?\s*;")
_TD_BODY = re.compile(r"\}\s*" + _NAME + r"\s*;")
# "type cf_x(" / "type *cf_x(" at the start of a line: a declaration or a
# definition (a call is never preceded by a type name).
_FUNC = re.compile(r"^[ \t]*(?:(?:static|inline|extern|const|unsigned|signed|struct|enum|CF_API|CF__UNUSED)\s+)*"
                   r"([A-Za-z_][A-Za-z0-9_]*)[\s\*]+(?:const\s*\**\s*)*" + _NAME + r"\s*\(", re.M)
_VAR = re.compile(r"^(?:(?:static|extern|const|_Thread_local|_Atomic)\s+)*"
                  r"([A-Za-z_][A-Za-z0-9_]*)[\s\*]+" + _NAME + r"\s*(?:\[[^\]]*\])?\s*[;=]", re.M)


def definitions(code):
    """[(name, kind, offset)] of the cf_ names (not cf__) that the
    stripped code `code` defines or declares."""
    out = []
    for m in _TAG.finditer(code):
        out.append((m.group(1), "type", m.start(1)))
    for rx in (_TD_FNPTR, _TD_PLAIN, _TD_BODY):
        for m in rx.finditer(code):
            if rx is _TD_BODY and not _in_typedef(code, m.start()):
                continue
            out.append((m.group(1), "type", m.start(1)))
    for m in _FUNC.finditer(code):
        if m.group(1) in KEYWORDS:
            continue
        out.append((m.group(2), "function", m.start(2)))
    for m in _VAR.finditer(code):
        if m.group(1) in KEYWORDS or m.group(1) == "return":
            continue
        out.append((m.group(2), "variable", m.start(2)))
    return [d for d in out if not d[0].startswith("cf__")]


def _in_typedef(code, close):
    """Whether the '}' at `close` ends a `typedef struct/union/enum {`."""
    depth = 0
    for i in range(close, -1, -1):
        ch = code[i]
        if ch == "}":
            depth += 1
        elif ch == "{":
            depth -= 1
            if depth == 0:
                head = code[max(0, i - 200):i]
                stmt = re.split(r"[;}]", head)[-1]
                return re.search(r"\btypedef\b", stmt) is not None
    return False


def public_names(header_text):
    """Every identifier in the code of cogfeed.h: what the public header
    declares (functions, types, tags, members, macros)."""
    return set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", strip_c(header_text)))


def tracked_files(root):
    """Files git tracks under root (relative paths); all files (without
    build folders and links) when root is not a git work tree."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "node_modules"]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(f for f in files
                  if os.path.isfile(os.path.join(root, f)) and not os.path.islink(os.path.join(root, f)))


# Where internal names may be defined: the library, the extension module
# and the command-line tool.
DEF_GLOBS = (re.compile(r"^lib/.*\.[ch]$"), re.compile(r"^python/[^/]*\.[ch]$"),
             re.compile(r"^tools/(cli/)?[^/]*\.[ch]$"))


def internal_cf_names(root):
    """{name: (kind, "path:line")} of the names defined under lib/,
    python/*.[ch] and tools/*.[ch], tools/cli/*.[ch] with the public prefix cf_ that
    include/cogfeed.h does not declare."""
    with open(os.path.join(root, "include", "cogfeed.h"), encoding="utf-8") as f:
        public = public_names(f.read())
    found = {}
    for rel in tracked_files(root):
        if not any(rx.match(rel) for rx in DEF_GLOBS):
            continue
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            code = strip_c(f.read())
        for name, kind, off in definitions(code):
            if name in public:
                continue
            prev = found.get(name)
            # a function or type beats a variable (a prototype parameter
            # can look like one); the first place is kept
            if prev is None or (prev[0] == "variable" and kind != "variable"):
                found[name] = (kind, "%s:%d" % (rel, line_of(code, off)))
    return found
