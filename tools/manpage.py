#!/usr/bin/env python3
"""Write the man page cogfeed(1) from the commands' own --help.

    python tools/manpage.py [-o docs/cogfeed.1]     (cogfeed importable)

The page is `cogfeed --help` followed by `cogfeed COMMAND --help` for every
command, each in a section of its own, so it says exactly what the help
says.  docs/cogfeed.1 is checked in (cmake --install and the wheel install
it as share/man/man1/cogfeed.1); tests/python/test_cli.py regenerates it
and fails when it no longer matches the help.
"""
import argparse
import os
import subprocess
import sys


def _help(args):
    env = dict(os.environ, COLUMNS="80", LC_ALL="C")
    r = subprocess.run([sys.executable, "-m", "cogfeed.cli"] + args,
                       capture_output=True, text=True, env=env, check=True)
    return r.stdout


def _roff(text):
    """Help text as a no-fill block: backslashes escaped, and a line
    starting with . or ' made literal."""
    out = []
    for line in text.rstrip("\n").split("\n"):
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return ".nf\n" + "\n".join(out) + "\n.fi\n"


def manpage():
    from cogfeed import cli
    version = _help(["--version"]).split()[-1]
    parts = [
        '.TH COGFEED 1 "" "cogfeed %s" "User Commands"\n' % version,
        ".SH NAME\ncogfeed \\- stream training patches out of "
        "Cloud-Optimized GeoTIFFs\n",
        ".SH SYNOPSIS\n.B cogfeed\n\\fICOMMAND\\fR [\\fIARGS\\fR...]\n",
        ".SH DESCRIPTION\n", _roff(_help(["--help"])),
        ".SH COMMANDS\n",
    ]
    for name in cli.commands():
        parts.append(".SS %s\n" % name)
        parts.append(_roff(_help([name, "--help"])))
    parts.append(".SH SEE ALSO\nThe cogfeed documentation: README.md and "
                 "docs/*.md of the source tree.\n")
    return "".join(parts)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--output", default=None,
                   help="file to write (default: stdout)")
    a = p.parse_args()
    text = manpage()
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
