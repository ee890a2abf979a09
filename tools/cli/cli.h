/*
 * cli.h - what the files of cogfeed-c share: the program's name, the
 * option ids, the I/O options of info and read, and the usage-error and
 * open helpers (args.c).  cogfeed-c is the C tool (info, read) on the
 * public header only; the `cogfeed` command is the Python package's
 * (python/cogfeed/cli.py), which runs this program for those two commands
 * and runs every other command itself.  This program never runs Python.
 */
#ifndef CF_TOOLS_CLI_H
#define CF_TOOLS_CLI_H

#include "cogfeed.h"

#include <getopt.h>

/* The name messages and help give the program: the last part of argv[0],
 * so `cogfeed info` (the Python command runs this program under that name)
 * and `cogfeed-c info` each speak of themselves. */
extern const char *cli_prog;

/* Long-only options: values above every character, so that getopt_long's
 * return tells them apart from -h and -o. */
enum {
    OPT_HEADER_BYTES = 256,
    OPT_MAX_INFLIGHT,
    OPT_HEADER_CACHE,
    OPT_MAX_RETRIES,
    OPT_TIMEOUT,
    OPT_CA_FILE,
    OPT_INSECURE,
    OPT_RAW_COLOR,
    OPT_JSON,
    OPT_WINDOW,
    OPT_LEVEL,
    OPT_BANDS,
    OPT_MASK,
};

/* The I/O options shared by info and read (cli_io_options_text). */
#define IO_LONG_OPTIONS                                              \
    {"header-bytes", required_argument, NULL, OPT_HEADER_BYTES},     \
    {"max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT},     \
    {"header-cache", required_argument, NULL, OPT_HEADER_CACHE},     \
    {"max-retries", required_argument, NULL, OPT_MAX_RETRIES},       \
    {"timeout", required_argument, NULL, OPT_TIMEOUT},               \
    {"ca-file", required_argument, NULL, OPT_CA_FILE},               \
    {"insecure", no_argument, NULL, OPT_INSECURE},                   \
    {"raw-color", no_argument, NULL, OPT_RAW_COLOR},                 \
    {"help", no_argument, NULL, 'h'}

/* A command's help on stdout: "usage: PROG CMD " and `usage` (each further
 * line of it indented to stand under the first), then `body`, then the I/O
 * options.  Returns 0. */
int cli_command_help(const char *cmd, const char *usage, const char *body);

/* "PROG CMD: message" for a failed call (the library's message, else
 * cf_strerror); returns 1. */
int cli_fail(const char *cmd, cf_status st, const cf_error *err);

/* A usage error: the message, a pointer to the command's help; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* getopt_long refused argv[optind - 1] (opterr is 0: the words are ours).
 * `missing`: the option needs a value and none came.  Returns 2. */
int cli_bad_option(const char *cmd, const struct option *lo, char **argv, int missing);

/* A refused value: which option, the value, and what it takes.  Returns 2. */
int cli_bad_value(const char *cmd, const struct option *lo, int opt, const char *v,
                  const char *wants);

/* An I/O option: 1 if `opt` was one (its value taken), 0 if not, -1 on a
 * bad value (reported, *rc set to the exit status). */
int cli_io_option(const char *cmd, const struct option *lo, int opt, const char *v,
                  cf_io_options *o, cf_open_options *oo, int *rc);

/* The one URL a command takes, from the operands getopt_long left at
 * argv[optind..]: NULL after reporting none or too many (*rc set). */
const char *cli_one_url(const char *cmd, int argc, char **argv, int *rc);

/* An io with options `o` and the cog at `url` on it; 0, or the exit code
 * after reporting the failure (nothing left open). */
int cli_open_cog(const char *cmd, const cf_io_options *o, const cf_open_options *oo,
                 const char *url, cf_io **io, cf_cog **cog);

/* The commands (info.c, read.c): argv[0] is the command's name. */
int cli_info(int argc, char **argv);
int cli_read(int argc, char **argv);

#endif
