#!/usr/bin/env python3
"""Rename the internal names that carry the public prefix: cf_x -> cf__x.

The naming rule (libuv's): `cf_` is public, `cf__` is internal.  A name
with the single-underscore prefix is public exactly when
include/cogfeed.h declares it; any other function, type (typedef name,
struct/union/enum tag) or file-scope variable that lib/, python/*.[ch] or
tools/*.[ch], tools/cli/*.[ch] defines as cf_x is renamed cf__x, and every use of it is
rewritten, as a whole word, in the C sources and headers, Python files,
docs and README of the tree (git's tracked files under lib/ python/ tools/
tests/ bench/ fuzz/ include/ docs/, and README.md).  Macros are not
touched: the public ones are CF_, the internal ones CF__ already.

    python3 tools/seams/rename_internal.py [--dry-run] [ROOT]

ROOT is the source tree (default: the one this script is in).  It prints
each name it renames with where it is defined, then the files it changed.
It is idempotent: on a tree that follows the rule it renames nothing and
changes no file, so it can be run again after merging branches that added
names (tests/python/test_source_rules.py fails, naming them, until it is).

Two kinds of text are left alone on purpose:
- in docs and README, the names of the CMake layer libraries (`cf_tiff`,
  the library of lib/tiff/, is also the name of a type): a Markdown mention
  of such a name is not rewritten (the type's mentions are fixed by hand);
- a cf__x that already exists stops the script before it writes anything
  (two names would become one), unless it is one of the accessor functions
  of FREE_FIRST below, named after the type they return: the function
  takes the name given there (cf__io_state() -> cf__io_state_of()) and
  the type then takes cf__x (C's typedef names and functions share one
  namespace).
Error messages that quote an internal function's name ("cf_src_new: empty
URL") are rewritten with it, so that they keep naming the real function.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csource  # noqa: E402

REWRITE_DIRS = ("lib/", "python/", "tools/", "tests/", "bench/", "fuzz/", "include/", "docs/")
REWRITE_EXT = (".c", ".h", ".py", ".pyi", ".md", ".txt", ".1")
EXTRA = ("README.md",)


# Functions that hold the cf__ name of a type to rename: their new name.
FREE_FIRST = {
    "cf__auth_kind": "cf__auth_kind_of",
    "cf__hc_key": "cf__hc_key_of",
    "cf__io_state": "cf__io_state_of",
}


def rewrite_targets(root):
    out = []
    for rel in csource.tracked_files(root):
        if rel in EXTRA or (rel.startswith(REWRITE_DIRS) and rel.endswith(REWRITE_EXT)):
            if rel.endswith("CMakeLists.txt"):
                continue  # target names (cf_tiff, cf_codec, ...) are not C names
            if rel.startswith("tools/seams/"):
                continue  # these scripts name the old names on purpose
            out.append(rel)
    return out


def layer_libraries(root):
    return {"cf_" + d for d in os.listdir(os.path.join(root, "lib"))
            if os.path.isdir(os.path.join(root, "lib", d))}


def main(argv):
    dry = "--dry-run" in argv
    args = [a for a in argv if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    names = csource.internal_cf_names(root)
    if not names:
        print("rename_internal: nothing to rename")
        return 0
    targets = rewrite_targets(root)
    texts = {}
    for rel in targets:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            texts[rel] = f.read()
    # A cf__x already in use would merge two names into one.
    clash = sorted(n for n in names
                   if any(re.search(r"\b%s\b" % re.escape("cf__" + n[3:]), t) for t in texts.values()))
    free = {"cf__" + n[3:]: FREE_FIRST["cf__" + n[3:]] for n in clash if "cf__" + n[3:] in FREE_FIRST}
    clash = [n for n in clash if "cf__" + n[3:] not in free]
    for old, new in sorted(free.items()):
        if any(re.search(r"\b%s\b" % re.escape(new), t) for t in texts.values()):
            clash.append(old)
    if clash:
        for n in clash:
            print("rename_internal: cf__%s already exists; not renaming %s" % (n[3:], n), file=sys.stderr)
        return 1
    for n in sorted(names):
        kind, where = names[n]
        print("%-32s -> cf__%-30s %-9s %s" % (n, n[3:], kind, where))
    rx = re.compile(r"\b(%s)\b" % "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    for old, new in sorted(free.items()):
        print("%-32s -> %-34s function  (frees the name for the type)" % (old, new))
    layers = layer_libraries(root)
    changed = []
    fx = re.compile(r"\b(%s)\b" % "|".join(re.escape(n) for n in free)) if free else None
    for rel in targets:
        text = texts[rel]
        if fx:
            text = fx.sub(lambda m: free[m.group(1)], text)
        if rel.endswith(".md"):
            new = rx.sub(lambda m: m.group(1) if m.group(1) in layers else "cf__" + m.group(1)[3:], text)
        else:
            new = rx.sub(lambda m: "cf__" + m.group(1)[3:], text)
        if new != texts[rel]:
            changed.append(rel)
            if not dry:
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(new)
    print("rename_internal: %d names, %d files %s" % (len(names), len(changed),
                                                       "would change" if dry else "changed"))
    for rel in changed:
        print("  " + rel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
