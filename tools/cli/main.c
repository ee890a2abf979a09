/*
 * main.c - cogfeed-c, the C tool: `info` and `read` on the public header
 * only, for a C install without Python (cmake --install puts it in bin/).
 * The `cogfeed` command is the Python package's (python/cogfeed/cli.py,
 * the console script pip installs, and a build tree's BUILD/cogfeed): it
 * runs the research commands (synth, convert, bench, tune, experiment,
 * demo) itself and runs this program, carried inside the package as
 * cogfeed/bin/cogfeed-c, for info and read under the name "cogfeed".
 * This program never hands a command back to Python.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static int usage(int rc) {
    FILE *f = rc ? stderr : stdout;
    fprintf(f,
            "usage: %s COMMAND [ARGS...]\n"
            "\n"
            "The C tool of cogfeed (C library only, no Python).\n"
            "\n"
            "commands:\n"
            "  info        print a COG's structure and georeferencing (--json)\n"
            "  read        read a window (X,Y,W,H) into a NumPy .npy file\n"
            "\n"
            "`%s COMMAND --help` for a command's options (--opt VALUE or\n"
            "--opt=VALUE); `%s --version`.  Exit status: 0 success, 1 failure,\n"
            "2 bad usage.\n"
            "The research commands (synth, convert, bench, tune, experiment, demo)\n"
            "are the Python package's `cogfeed` command (pip install cogfeed),\n"
            "which runs info and read through this program.\n",
            cli_prog, cli_prog, cli_prog);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 0 && argv[0] && *argv[0]) {
        const char *slash = strrchr(argv[0], '/');
        cli_prog = slash ? slash + 1 : argv[0];
        if (!*cli_prog) cli_prog = "cogfeed-c";
    }
    if (argc < 2) {
        fprintf(stderr, "%s: missing COMMAND\n\n", cli_prog);
        return usage(2);
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) return usage(0);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("%s %s\n", cli_prog, CF_VERSION_STRING);
        return 0;
    }
    if (!strcmp(cmd, "info")) return cli_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "read")) return cli_read(argc - 1, argv + 1);
    static const char *const py_cmds[] = {"synth", "convert", "bench", "tune", "experiment", "demo"};
    for (size_t i = 0; i < sizeof py_cmds / sizeof *py_cmds; i++)
        if (!strcmp(cmd, py_cmds[i])) {
            fprintf(stderr,
                    "%s: '%s' is a command of the Python package: run `cogfeed %s` "
                    "(pip install 'cogfeed[experiments]')\n",
                    cli_prog, cmd, cmd);
            return 2;
        }
    fprintf(stderr, "%s: unknown command '%s'\n\n", cli_prog, cmd);
    return usage(2);
}
