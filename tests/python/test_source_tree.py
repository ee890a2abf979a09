"""The files of each layer of lib/ form a tree: no include/use cycle.

tools/source_tree.py builds, per folder of lib/, the graph "file A uses
file B" (A names a function or global that B defines and a header
declares, or A includes B; docs/internals.md, "The files of a layer") and
lists its cycles.  This test fails naming each cycle, and checks that the
checker itself sees the cycles it must see (a checker that found nothing
could not fail).
"""
import os
import sys

import pytest

SOURCE = os.environ.get("CF_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tools"))
import source_tree  # noqa: E402

LIB = os.path.join(SOURCE, "lib")
LAYERS = sorted(d for d in os.listdir(LIB)
                if os.path.isdir(os.path.join(LIB, d)))


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_has_no_cycle(layer):
    g = source_tree.layer_graph(os.path.join(LIB, layer))
    found = []
    for comp in source_tree.sccs(g):
        found += [" -> ".join(c) for c in source_tree.cycles(g)
                  if set(c) <= set(comp)]
    assert not found, "lib/%s has include/use cycles:\n  %s" % (
        layer, "\n  ".join(found))


def write(folder, name, text):
    with open(os.path.join(folder, name), "w") as f:
        f.write(text)


def test_checker_sees_cycles(tmp_path):
    """A two-file cycle through a shared header, a three-file one through
    a global table and a macro, and a static function (not shared), in a
    made-up layer."""
    lay = tmp_path / "lib" / "x"
    lay.mkdir(parents=True)
    write(lay, "x.h", "#ifndef X_H\n#define X_H\n"
          "int cf__a(int v);\nint cf__b(int v);\nextern const int cf__tab[];\n"
          "#define X_C(v) cf__c(v)\nint cf__c(int v);\n"
          "int cf__d(void);\n#endif\n")
    write(lay, "a.c", '#include "x.h"\n/* cf__b( in a comment */\n'
          'int cf__a(int v) { return v ? cf__b(v - 1) : "cf__d"[0]; }\n')
    write(lay, "b.c", '#include "x.h"\nint cf__b(int v) { return cf__a(v); }\n')
    write(lay, "c.c", '#include "x.h"\n'
          'const int cf__tab[] = { 1, 2 };\n'
          'int cf__c(int v) { return v + cf__d(); }\n')
    write(lay, "d.c", '#include "x.h"\n'
          'static int helper(void) { return cf__tab[0]; }\n'
          'int cf__d(void) { return helper() + X_C(0); }\n')
    write(lay, "e.c", '#include "x.h"\n'
          'static int cf__a(int v) { return v; }\n'
          'int e(void) { return cf__a(1); }\n')
    g = source_tree.layer_graph(str(lay))
    assert g["a.c"] == {"x.h", "b.c"}        # the comment and string do not count
    assert g["d.c"] == {"x.h", "c.c"}        # cf__tab, and cf__c through X_C
    assert g["x.h"] == set()                 # a header uses only what it includes
    assert "a.c" in g["e.c"]                 # it names cf__a (its own, static...)
    cyc = {" -> ".join(c) for c in source_tree.cycles(g)}
    assert "a.c -> b.c -> a.c" in cyc
    assert "c.c -> d.c -> c.c" in cyc
    assert len(source_tree.sccs(g)) == 2
