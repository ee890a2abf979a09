#!/usr/bin/env python3
"""Write the option tables of the docs from the C option tables.

    PYTHONPATH=build/python python tools/option_docs.py [--check]

The defaults, ranges and kernel names in docs/loader.md ("Parameters":
the Loader's signature line and its table of C defaults) and
docs/remote.md (cogfeed.IO's options) are generated from
cf_loader_option_table and cf_io_option_table (include/cogfeed.h, read
through cogfeed._cogfeed), between the markers

    <!-- option_docs.py: NAME -->  ...  <!-- /option_docs.py: NAME -->

The "meaning" column of the io table is prose written by hand: kept from
the file, row by row; rows of options that are not in the C table (the
two paths) are kept as they are, after the table's.  --check writes
nothing and exits 1, naming the blocks, when a file differs from what it
would write (tests/python/test_options.py runs it): change a default in
lib/io/io_options.h or lib/pipeline/loader_options.h, rebuild, and run
this script.
"""
import argparse
import inspect
import os
import re
import sys

from cogfeed import _cogfeed
from cogfeed.loader import Loader, _C_NAMES, _fmt, _range

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)

#: Loader members with no keyword of their own: where they come from.
_LOADER_FROM = {"time_steps": "(`images`: scenes per series)",
                "nlayers": "(`layers`: layers per file)",
                "step_scenes": "(`images`: scenes per date of a series)",
                "valid_per_step": "(`valid_mask` of a time series)",
                "layers_per_step": "(`date_layers`)",
                "mask_resampling": '`resampling={"mask": ...}`'}


def _default(o):
    if o["runtime_default"]:
        return o["default_doc"]
    return _fmt(o, o["default"])


def _accepted(o):
    r = _range(o)
    if o["hint"]:  # the hint may say the range itself ("> 0; inf: ...")
        r = o["hint"] if not r or o["hint"].startswith(r) else \
            "%s (%s)" % (r, o["hint"])
    return r or "any (nonzero: yes)" if o["type"] == "bool" else r


def loader_signature(old):
    """The first line of "Parameters": Loader's positional keywords."""
    ps = list(inspect.signature(Loader.__init__).parameters.values())[1:7]
    args = ", ".join(p.name if p.default is inspect.Parameter.empty
                     else "%s=%r" % (p.name, p.default) for p in ps)
    return ["Loader(%s, *, ...)" % args.replace("'", '"')]


def loader_table(old):
    """Every scalar and kernel of cf_loader_options: its keyword, member,
    C type, default and accepted values."""
    kw = {c: p for p, c in _C_NAMES.items()}
    rows = ["| keyword | `cf_loader_options` member | C type | default "
            "| accepted |", "|---|---|---|---|---|"]
    for o in _cogfeed.loader_options():
        name = _LOADER_FROM.get(o["name"]) or "`%s`" % kw.get(o["name"],
                                                              o["name"])
        rows.append("| %s | `%s` | `%s` | %s | %s |" % (
            name, o["name"], o["ctype"], _default(o), _accepted(o)))
    return rows


def io_table(old):
    """cf_io_options' scalars: option, default, accepted values, and the
    meaning kept from the file; then the file's other rows."""
    meaning, extra = {}, []
    for line in old:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.startswith("|") or \
                set(cells[0]) <= set("-") or cells[0] == "option":
            continue
        m = re.fullmatch(r"`(\w+)`", cells[0])
        names = {o["name"] for o in _cogfeed.io_options()}
        if m and m.group(1) in names:
            meaning[m.group(1)] = cells[-1]
        else:
            extra.append(line)
    rows = ["| option | default | accepted | meaning |",
            "|---|---|---|---|"]
    for o in _cogfeed.io_options():
        rows.append("| `%s` | %s | %s | %s |" % (
            o["name"], _default(o), _accepted(o), meaning.get(o["name"], "")))
    return rows + extra


BLOCKS = {"docs/loader.md": {"loader-signature": loader_signature,
                             "loader": loader_table},
          "docs/remote.md": {"io": io_table}}


def render(text, blocks):
    """text with every block of `blocks` regenerated; KeyError for a
    block whose markers are missing."""
    for name, fn in blocks.items():
        begin = "<!-- option_docs.py: %s -->" % name
        end = "<!-- /option_docs.py: %s -->" % name
        i, j = text.index(begin) + len(begin) + 1, text.index(end)
        old = text[i:j].rstrip("\n").split("\n")
        text = text[:i] + "\n".join(fn(old)) + "\n" + text[j:]
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if a file is out of date")
    p.add_argument("--root", default=ROOT, help="the source tree")
    a = p.parse_args(argv)
    stale = []
    for rel, blocks in BLOCKS.items():
        path = os.path.join(a.root, rel)
        with open(path) as f:
            text = f.read()
        new = render(text, blocks)
        if new == text:
            continue
        stale.append(rel)
        if not a.check:
            with open(path, "w") as f:
                f.write(new)
    if a.check and stale:
        print("out of date with the C option tables: %s; regenerate with "
              "PYTHONPATH=build/python python tools/option_docs.py"
              % ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
