#!/usr/bin/env python3
"""The file graph of each layer of lib/, and its cycles (docs/internals.md,
"The files of a layer").

Inside one folder of lib/ (one layer), file A *uses* file B when A's code
names a function or a global variable that B defines (a non-static
definition), or when A includes B (a header of the folder).  A header
uses only the headers it includes; what its macros and static inline
functions name is named by each .c file that uses them, where they are
expanded.  A
cycle is a chain of uses that comes back to where it started (cog.c uses
read_plan.c, which uses cog.c); a layer whose files form a tree (a DAG)
has none.  Calls into other layers are not counted: the link graph keeps
those one-way already.

The parser is regex-level and fits this code base: comments, strings and
preprocessor lines other than #define/#include are dropped, then a
definition is a top-level `NAME(...) {` or `TYPE NAME[...] = ...` not
marked static, extern or typedef.

  python3 tools/source_tree.py [--root DIR] [--graph] [LAYER ...]

prints each layer's cycles (exit status 1 when there is any) and, with
--graph, each file's uses, one line per file.
"""

import argparse
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_]\w*")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do",
            "else", "case", "goto", "_Alignof", "_Static_assert",
            "__attribute__", "defined"}


def strip(text):
    """Comments, string and char literals out; line structure kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def logical_lines(text):
    """Lines with their backslash continuations joined."""
    return text.replace("\\\n", " ").split("\n")


class Source:
    """One file: what it includes, defines and names."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            raw = f.read()
        text = strip(raw)
        self.includes = re.findall(r'^\s*#\s*include\s*"([^"]+)"', raw, re.M)
        self.defines = set()    # non-static functions and variables
        self.names = set()      # identifiers that code (not a declaration) names
        self.declares = set()   # every identifier outside macro bodies
        self.expands = {}       # macro or function name -> names in its body
        code = []
        for line in logical_lines(text):
            s = line.strip()
            m = re.match(r"#\s*define\s+(\w+)(\([^)]*\))?", s)
            if m:
                # A macro's body is code, expanded where the macro is used.
                body = set(IDENT.findall(s[m.end():]))
                self.expands[m.group(1)] = body
                self.names |= body
                code.append("")
            elif s.startswith("#"):
                code.append("")
            else:
                code.append(line)
        self._scan("\n".join(code))

    def _scan(self, text):
        self.declares = set(IDENT.findall(text))
        depth = 0
        stmt_start = 0
        body_start = None
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c == "{":
                if depth == 0:
                    head = text[stmt_start:i]
                    self._head(head, text[stmt_start:i])
                    body_start = i
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    # A function body, or an initializer, or a struct body.
                    if body_start is not None and self._body_is_code:
                        body = set(IDENT.findall(text[body_start:i]))
                        self.names |= body
                        if self._fn:
                            self.expands[self._fn] = body
                    body_start = None
                    stmt_start = i + 1
            elif c == ";" and depth == 0:
                self._decl(text[stmt_start:i])
                stmt_start = i + 1
            i += 1

    _body_is_code = False
    _fn = None

    def _head(self, head, _raw):
        """The text before a top-level '{'."""
        words = IDENT.findall(head)
        self._body_is_code = False
        self._fn = None
        if not words or "typedef" in words or "extern" in words:
            return
        if "=" in head:
            # TYPE NAME[...] = { ... }: a variable with an initializer,
            # whose initializer may name functions (option tables).
            name = IDENT.findall(head.split("=")[0])[-1]
            if "static" not in words:
                self.defines.add(name)
            self._body_is_code = True
            return
        m = re.search(r"([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*"
                      r"(?:__attribute__\s*\(\(.*\)\)\s*)?$", head.strip(),
                      re.S)
        if m and m.group(1) not in KEYWORDS:
            if "static" not in words:
                self.defines.add(m.group(1))
            self._body_is_code = True
            self._fn = m.group(1)
            # Names in a static inline header function's signature are
            # types, not uses; the body is scanned when it closes.

    def _decl(self, stmt):
        """A top-level statement ending in ';': declaration or variable."""
        words = IDENT.findall(stmt)
        if (not words or "typedef" in words or "extern" in words
                or "static" in words or "(" in stmt.split("=")[0]):
            return
        if words[0] in ("struct", "union", "enum") and len(words) <= 2:
            return
        lhs = stmt.split("=")[0]
        names = IDENT.findall(re.sub(r"\[[^\]]*\]", "", lhs))
        if len(names) >= 2:
            self.defines.add(names[-1])
        if "=" in stmt:
            self.names.update(IDENT.findall(stmt.split("=", 1)[1]))


def public_names(folder):
    """The identifiers of include/cogfeed.h (next to lib/)."""
    path = os.path.join(folder, "..", "..", "include", "cogfeed.h")
    if not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as f:
        return set(IDENT.findall(strip(f.read())))


def layer_graph(folder):
    """{file: set(files it uses)} for the .c and .h files of one folder."""
    files = {}
    for entry in sorted(os.listdir(folder)):
        if entry.endswith((".c", ".h")):
            files[entry] = Source(os.path.join(folder, entry))
    # A definition is shared when a header declares it: one of the
    # folder's or the public include/cogfeed.h.  (This also drops
    # functions made static through a macro such as L2_INLINE.)
    declared = set()
    for f in files.values():
        if f.name.endswith(".h"):
            declared |= f.declares
    declared |= public_names(folder)
    owner = {}
    for f in files.values():
        if f.name.endswith(".c"):
            for d in f.defines & declared:
                owner.setdefault(d, set()).add(f.name)
    # What a header's macros and static inline functions name is named
    # by each file that uses them, where they are expanded.
    expands = {}
    for f in files.values():
        if f.name.endswith(".h"):
            expands.update(f.expands)
    graph = {}
    for f in files.values():
        uses = set()
        for inc in f.includes:
            if inc in files:
                uses.add(inc)
        if f.name.endswith(".c"):
            names, todo = set(), list(f.names)
            while todo:
                n = todo.pop()
                if n not in names:
                    names.add(n)
                    todo.extend(expands.get(n, ()))
            for name in names:
                for o in owner.get(name, ()):
                    if o != f.name:
                        uses.add(o)
        graph[f.name] = uses
    return graph


def cycles(graph):
    """The elementary cycles of a small graph, each once, smallest first
    (Johnson's idea, plainly: cycles through each node that use only nodes
    after it in order)."""
    order = sorted(graph)
    found = []
    for k, start in enumerate(order):
        allowed = set(order[k:])
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    found.append(path + [start])
                elif nxt in allowed and nxt not in path:
                    stack.append((nxt, path + [nxt]))
    found.sort(key=lambda c: (len(c), c))
    return found


def sccs(graph):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layers_of(graph):
    """Each .c file's level: 0 for a file that uses no other .c file of
    its folder, else one more than the highest it uses (needs no cycle)."""
    cs = {f: {u for u in graph[f] if u.endswith(".c")}
          for f in graph if f.endswith(".c")}
    # A .c file uses the .c files its headers' macros name too, but only
    # through names: the edges above already hold those.
    level = {}

    def lv(f, seen=()):
        if f not in level:
            level[f] = 1 + max((lv(u, seen + (f,)) for u in cs[f]), default=-1)
        return level[f]

    for f in cs:
        lv(f)
    return cs, level


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    ap.add_argument("--graph", action="store_true",
                    help="print each file's uses")
    ap.add_argument("--order", action="store_true",
                    help="print each layer's .c files bottom-up (level 0 "
                         "uses no other file of the layer) with the files "
                         "each uses: a reading order")
    ap.add_argument("layers", nargs="*")
    a = ap.parse_args(argv)
    layers = a.layers or sorted(
        d for d in os.listdir(a.root) if os.path.isdir(os.path.join(a.root, d)))
    total = 0
    for layer in layers:
        g = layer_graph(os.path.join(a.root, layer))
        if a.order and not sccs(g):
            cs, level = layers_of(g)
            for f in sorted(cs, key=lambda f: (level[f], f)):
                print(f"lib/{layer}/{f} [{level[f]}] -> "
                      f"{' '.join(sorted(cs[f])) or '-'}")
        if a.graph:
            for f in sorted(g):
                print(f"lib/{layer}/{f} -> {' '.join(sorted(g[f])) or '-'}")
        for comp in sccs(g):
            cyc = [c for c in cycles(g) if set(c) <= set(comp)]
            total += len(cyc)
            for c in cyc:
                print(f"lib/{layer}: cycle " + " -> ".join(c))
    print(f"{total} cycle(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
