"""The Python half of the `cogfeed` command line.

The C tool runs `info` and `read` itself and hands the research commands
(synth, convert, bench, tune, experiment, demo) to this module with the
same argv:  /usr/bin/python3 -m cogfeed.cli SUBCOMMAND ARGS...
Each command lives in cogfeed.tools.<name> and is imported only when used,
so `cogfeed synth` does not pay for importing torch.
"""

import importlib
import signal
import sys

COMMANDS = {
    "synth": ("synth", "generate a labelled Sentinel-2-like dataset"),
    "convert": ("convert", "write COG variants (codec, tile size) with GDAL"),
    "bench": ("bench", "measure a loader's steady-state throughput"),
    "tune": ("tune", "Bayesian search (Optuna TPE) for the fastest settings"),
    "experiment": ("experiment", "train a UNet under four loader set-ups"),
    "demo": ("demo", "the whole story end to end in a few minutes"),
}


def usage(out):
    out.write("usage: cogfeed COMMAND [ARGS...]\n\ncommands:\n")
    out.write("  %-11s %s\n" % ("info", "print a COG's structure (C tool)"))
    out.write("  %-11s %s\n" % ("read", "read a window to .npy (C tool)"))
    for name, (_, what) in COMMANDS.items():
        out.write("  %-11s %s\n" % (name, what))
    out.write("\n`cogfeed COMMAND --help` for a command's options.\n")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        usage(sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    cmd = argv[0]
    if cmd not in COMMANDS:
        sys.stderr.write("cogfeed: unknown command %r\n" % cmd)
        usage(sys.stderr)
        return 2
    # SIGTERM unwinds like Ctrl-C, so that servers the command started
    # (nginx) and loader workers are stopped by their context managers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    mod = importlib.import_module("cogfeed.tools." + COMMANDS[cmd][0])
    return mod.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
