"""The `cogfeed` command: the console script pip installs, `python -m
cogfeed`, and a build tree's BUILD/cogfeed (a launcher CMake writes) are
all this module.

Each command runs in one place.  `info` and `read` are the C tool
cogfeed-c, which the package carries (cogfeed/bin/cogfeed-c): this module
replaces itself with it (exec, same argv, program name "cogfeed"), so their
output is the C library's own.  The research commands (synth, convert,
bench, tune, experiment, demo) live in cogfeed.tools.<name> and are
imported only when used, so `cogfeed synth` does not pay for importing
torch.  The C tool never runs Python.
"""

import importlib
import os
import signal
import sys

# The C tool's commands: run by cogfeed/bin/cogfeed-c.
C_COMMANDS = {
    "info": "print a COG's structure and georeferencing (--json)",
    "read": "read a window (X,Y,W,H) into a NumPy .npy file",
}

# name: (module in cogfeed.tools, one line, extra it needs)
COMMANDS = {
    "synth": ("synth", "generate a labelled Sentinel-2-like dataset", "experiments"),
    "convert": ("convert", "write COG variants (codec, tile size) with GDAL", "experiments"),
    "bench": ("bench", "measure a loader's steady-state throughput", "experiments"),
    "tune": ("tune", "Bayesian search (Optuna TPE) for the fastest settings", "experiments"),
    "experiment": ("experiment", "train a UNet under four loader set-ups", "experiments"),
    "demo": ("demo", "the whole story end to end in a few minutes", "experiments"),
}


# The modules each extra brings (pyproject.toml), for the error that names
# the extra: an ImportError of anything else is reported as it is.
EXTRA_MODULES = {
    "experiments": ("torch", "optuna", "matplotlib", "rasterio"),
}


def commands():
    """Every command with its one-line description, in the order of help."""
    out = dict(C_COMMANDS)
    out.update((k, v[1]) for k, v in COMMANDS.items())
    return out


def usage(out):
    out.write("usage: cogfeed COMMAND [ARGS...]\n\n"
              "Stream training patches out of Cloud-Optimized GeoTIFFs.\n\n"
              "commands:\n")
    for name, what in commands().items():
        out.write("  %-11s %s\n" % (name, what))
    out.write("\n`cogfeed COMMAND --help` for a command's options (--opt "
              "VALUE or\n--opt=VALUE); `cogfeed --version`.  Exit status: 0 "
              "success, 1 failure,\n2 bad usage.\n"
              "URL: a path, file://, http(s)://, s3://bucket/key, "
              "az://container/blob,\n"
              "gs://bucket/key; credentials from the usual environment "
              "variables\n(AWS_*, AZURE_STORAGE_*, GOOGLE_OAUTH_ACCESS_TOKEN).\n")


def c_tool():
    """Path of the C tool cogfeed-c inside this package (a wheel's, or a
    build tree's BUILD/python/cogfeed/bin, a link to BUILD/cogfeed-c)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin",
                        "cogfeed-c")


def _run_c(argv):
    exe = c_tool()
    if not os.access(exe, os.X_OK):
        sys.stderr.write("cogfeed: the C tool is missing (%s); reinstall "
                         "cogfeed\n" % exe)
        return 1
    sys.stdout.flush()
    # Its messages and help name the program as argv[0]: "cogfeed", the
    # command the user ran.
    os.execv(exe, ["cogfeed"] + argv)
    return 1  # not reached


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        sys.stderr.write("cogfeed: missing COMMAND\n\n")
        usage(sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        usage(sys.stdout)
        return 0
    cmd = argv[0]
    if cmd in ("--version", "version"):
        from importlib.metadata import PackageNotFoundError, version
        try:
            v = version("cogfeed")
        except PackageNotFoundError:  # a build tree on PYTHONPATH
            v = importlib.import_module("cogfeed._cogfeed").__version__
        print("cogfeed %s" % v)
        return 0
    if cmd in C_COMMANDS:
        return _run_c(argv)
    if cmd not in COMMANDS:
        sys.stderr.write("cogfeed: unknown command %r\n\n" % cmd)
        usage(sys.stderr)
        return 2
    # SIGTERM unwinds like Ctrl-C, so that servers the command started
    # (nginx) and loader workers are stopped by their context managers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modname, _, extra = COMMANDS[cmd]
    try:
        mod = importlib.import_module("cogfeed.tools." + modname)
        return mod.main(argv[1:])
    except ImportError as e:
        if extra is None or e.name is None or e.name.startswith("cogfeed"):
            raise
        top = e.name.split(".")[0]
        if top in EXTRA_MODULES.get(extra, ()):
            sys.stderr.write("cogfeed %s: %s is not installed: pip install "
                             "'cogfeed[%s]'\n" % (cmd, top, extra))
        else:  # not something the extra brings: say what failed
            sys.stderr.write("cogfeed %s: cannot import %s (%s)\n"
                             % (cmd, e.name, e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
