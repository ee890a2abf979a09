#!/usr/bin/env python3
"""Bring lib/ to the one error idiom of docs/internals.md ("The error
idiom"): failures are forwarded with CF__TRY (lib/common/common.h), and
cleanup runs under `done:` (every exit; the function returns st there) or
`fail:` (failures only, after the success return).

    python3 tools/seams/error_idiom.py [--dry-run] [ROOT]

It rewrites the regular patterns of lib/**/*.[ch] and prints each change
(file:line, old -> new):

  cf_status st = f(...);         CF__TRY(f(...));
  if (st) return st;             (when st is not mentioned again in the
                                  function; st's declaration goes too when
                                  nothing else uses it)
  st = f(...);                   CF__TRY(f(...));
  if (st != CF_OK) return st;
  if ((st = f(...)) != CF_OK) return st;      CF__TRY(f(...));
  if (st) return st;             CF__TRY(st);   (st is read again later)
  goto out; out:   finish:       goto done; done:
  goto nomem; nomem:             goto fail; fail:

Only variables declared cf_status are touched (lerc2.c's int codes are
not statuses), a statement that is the body of an unbraced if/else/for is
left as it is, and a label keeps its name where the new one is already a
label of the function.  A second run changes nothing.  What it cannot
rewrite, tests/python/test_source_rules.py names (file:line); it is done by
hand.  After running it, build with -Werror: a declaration left unused
would fail the build.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csource  # noqa: E402

FWD = re.compile(r"^(\s*)if \((\w+)( != CF_OK)?\) return \2;\s*$")
FWD_ASSIGN = re.compile(r"^(\s*)if \(\((\w+) = (.*)\) != CF_OK\) return \2;(\s*\\)?\s*$")
LABELS = {"out": "done", "finish": "done", "nomem": "fail"}


def functions(lines):
    """[(first, last)] line index ranges: from just after the previous
    column-0 '}' (so the signature is in) to the function's column-0 '}'."""
    out, start = [], 0
    for i, l in enumerate(lines):
        if l.startswith("}"):
            out.append((start, i))
            start = i + 1
    return out


def mentions(lines, a, b, name):
    rx = re.compile(r"\b%s\b" % re.escape(name))
    return [i for i in range(a, b) if rx.search(csource.strip_c(lines[i]))]


def is_status(text, name):
    return re.search(r"\bcf_status\s+(?:\w+\s*(?:=[^;,]*)?,\s*)*\*?%s\b" % re.escape(name), text) is not None


def balanced(s):
    d = 0
    for ch in s:
        d += ch == "("
        d -= ch == ")"
        if d < 0:
            return False
    return d == 0


def statement_before(lines, a, i):
    """(s, text) of the statement ending on line i - 1 when it is one
    whole statement that a previous statement, block start or label ends
    before (not the body of an unbraced if/for/else), else None."""
    j = i - 1
    while j > a:
        prev = lines[j - 1].rstrip()
        if not prev.strip() or prev.endswith((";", "{", "}", ":")):
            break
        j -= 1
    if j <= a or j > i - 1:
        return None
    text = "\n".join(lines[j:i])
    if "//" in text or "/*" in text or "*/" in text or "#" in text:
        return None
    if not text.rstrip().endswith(";") or text.count(";") != 1:
        return None
    return j, text


def rewrite(lines, log, rel):
    changed = False
    for a, b in reversed(functions(lines)):
        body = "\n".join(lines[a:b + 1])
        i = b
        while i > a:
            i -= 1
            line = lines[i]
            m = FWD_ASSIGN.match(line)
            if m and is_status(body, m.group(2)) and balanced(m.group(3)):
                ind, x, e, cont = m.group(1), m.group(2), m.group(3), m.group(4) or ""
                rest = [k for k in mentions(lines, a, b + 1, x) if k != i]
                decl = [k for k in rest if re.match(r"^\s*cf_status %s( = CF_OK)?;\s*$" % x, lines[k])]
                new = "%sCF__TRY(%s);" % (ind, e if rest == decl else "%s = %s" % (x, e))
                if cont:
                    new = new.ljust(len(line.rstrip()) - 1) + "\\"
                log.append("%s:%d: %s -> %s" % (rel, i + 1, line.strip(), new.strip()))
                lines[i] = new
                if rest == decl and decl:
                    log.append("%s:%d: %s -> (removed: unused)" % (rel, decl[0] + 1, lines[decl[0]].strip()))
                    del lines[decl[0]]
                    b -= 1
                changed = True
                body = "\n".join(lines[a:b + 1])
                continue
            m = FWD.match(line)
            if not m or not is_status(body, m.group(2)):
                continue
            ind, x = m.group(1), m.group(2)
            later = mentions(lines, i + 1, b + 1, x)
            st = statement_before(lines, a, i)
            sm = st and re.match(r"^(\s*)(cf_status\s+)?%s\s*=\s*(.*);\s*$" % re.escape(x), st[1], re.S)
            if sm and balanced(sm.group(3)) and sm.group(1) == ind and not later:
                s = st[0]
                e = sm.group(3)
                first, *cont = e.split("\n")
                old_col = len(lines[s]) - len(lines[s].lstrip()) + lines[s].lstrip().index(first)
                new_col = len(ind) + len("CF__TRY(")
                shifted = []
                for c in cont:
                    lead = len(c) - len(c.lstrip())
                    if first.rstrip().endswith("("):
                        shifted.append(c)  # hanging indent: not aligned to the call
                    else:  # aligned to the call's arguments: move with them
                        shifted.append(" " * max(0, lead + new_col - old_col) + c.lstrip())
                new = ["%sCF__TRY(%s" % (ind, first)] + shifted
                new[-1] += ");"
                log.append("%s:%d: %s | %s -> %s" % (rel, s + 1, " ".join(l.strip() for l in lines[s:i]),
                                                     line.strip(), " ".join(l.strip() for l in new)))
                lines[s:i + 1] = new
                b -= (i + 1 - s) - len(new)
                i = s
                if not sm.group(2):
                    rest = mentions(lines, a, b + 1, x)
                    decl = [k for k in rest if re.match(r"^\s*cf_status %s( = CF_OK)?;\s*$" % x, lines[k])]
                    if rest == decl and decl:
                        log.append("%s:%d: %s -> (removed: unused)" % (rel, decl[0] + 1, lines[decl[0]].strip()))
                        del lines[decl[0]]
                        b -= 1
                        i -= 1
            else:
                new = "%sCF__TRY(%s);" % (ind, x)
                log.append("%s:%d: %s -> %s" % (rel, i + 1, line.strip(), new.strip()))
                lines[i] = new
            changed = True
            body = "\n".join(lines[a:b + 1])
        # labels
        body = "\n".join(lines[a:b + 1])
        have = set(re.findall(r"^\s*([a-z_0-9]+):\s*$", body, re.M))
        for old, new in LABELS.items():
            if old in have and new not in have:
                for k in range(a, b + 1):
                    l2 = re.sub(r"^(\s*)%s:(\s*)$" % old, r"\1%s:\2" % new, lines[k])
                    l2 = re.sub(r"\bgoto %s;" % old, "goto %s;" % new, l2)
                    if l2 != lines[k]:
                        log.append("%s:%d: %s -> %s" % (rel, k + 1, lines[k].strip(), l2.strip()))
                        lines[k] = l2
                        changed = True
                have.add(new)
                have.discard(old)
    return changed


def main(argv):
    dry = "--dry-run" in argv
    args = [x for x in argv if not x.startswith("--")]
    root = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    log, files = [], []
    for rel in csource.tracked_files(root):
        if not re.match(r"^lib/.*\.[ch]$", rel) or rel == "lib/common/common.h":
            continue
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.split("\n")
        if rewrite(lines, log, rel):
            new = "\n".join(lines)
            if new != text:
                files.append(rel)
                if not dry:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(new)
    for l in log:
        print(l)
    print("error_idiom: %d changes in %d files%s" % (len(log), len(files), " (dry run)" if dry else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
