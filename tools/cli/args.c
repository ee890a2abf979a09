/*
 * args.c - what info and read share: the I/O options, usage errors that
 * name the refused option or value, the one URL, opening a COG.
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cli_prog = "cogfeed-c";

/* The I/O options that set a scalar of cf_io_options: --help shows the
 * default of the C table (cf_io_option_table), not a copy of it. */
static const struct io_table_opt {
    const char *flag, *field, *help;
} io_table_opts[] = {
    {"header-bytes N", "header_bytes", "first speculative read of a remote file"},
    {"max-inflight N", "max_inflight", "requests in flight at once"},
    {"max-retries N", "max_retries", "retries per request"},
    {"timeout SECONDS", "request_timeout_s", "deadline per request, retries included"},
};

/* The other I/O options, after those. */
static const char *io_options_text =
    "  --header-cache DIR    keep parsed headers in DIR: a second open makes\n"
    "                        no request\n"
    "  --ca-file PEM         the CAs to trust instead of the system's\n"
    "  --insecure            do not verify TLS certificates\n"
    "  --raw-color           CMYK, CIELab and YCbCr as stored, like GDAL's\n"
    "                        GTIFF_RAW: prefix (by default they read as\n"
    "                        RGB(A), as in GDAL)\n"
    "\n"
    "URL: a path, file://, http(s)://, s3://bucket/key, az://container/blob\n"
    "(or https://ACCOUNT.blob.core.windows.net/...), gs://bucket/key.\n"
    "Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,\n"
    "AWS_REGION, AWS_ENDPOINT_URL, AWS_NO_SIGN_REQUEST; AZURE_STORAGE_ACCOUNT,\n"
    "AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_ACCESS_KEY,\n"
    "AZURE_STORAGE_CONNECTION_STRING; GOOGLE_OAUTH_ACCESS_TOKEN.\n";

int cli_command_help(const char *cmd, const char *usage, const char *body) {
    int indent = (int)(strlen("usage: ") + strlen(cli_prog) + 1 + strlen(cmd) + 1);
    printf("usage: %s %s ", cli_prog, cmd);
    for (const char *s = usage; *s;) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s + 1) : strlen(s);
        if (s != usage) printf("%*s", indent, "");
        fwrite(s, 1, n, stdout);
        s += n;
    }
    fputs(body, stdout);
    fputs("\nI/O options:\n", stdout);
    size_t n;
    const cf_option_info *tab = cf_io_option_table(&n);
    for (size_t i = 0; i < sizeof io_table_opts / sizeof *io_table_opts; i++) {
        const cf_option_info *o = cf_option_by_name(tab, n, io_table_opts[i].field);
        if (!o) continue; /* a row gone from the table: its option is too */
        char def[32];
        if (o->type == CF_OPT_FLOAT) snprintf(def, sizeof def, "%g", o->def.d);
        else if (o->type == CF_OPT_UINT) snprintf(def, sizeof def, "%llu", (unsigned long long)o->def.u);
        else snprintf(def, sizeof def, "%lld", (long long)o->def.i);
        printf("  --%-19s %s (%s)\n", io_table_opts[i].flag, io_table_opts[i].help, def);
    }
    fputs(io_options_text, stdout);
    return 0;
}

int cli_fail(const char *cmd, cf_status st, const cf_error *err) {
    fprintf(stderr, "%s %s: %s\n", cli_prog, cmd,
            err && err->msg[0] ? err->msg : cf_strerror(st));
    return 1;
}

/* The long name of the option getopt_long returned as `val`. */
static const char *option_name(const struct option *lo, int val) {
    for (; lo->name; lo++)
        if (lo->val == val) return lo->name;
    return "?";
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: ", cli_prog, cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s %s --help'.\n", cli_prog, cmd);
    return 2;
}

/* Did getopt_long refuse the long option arg?  optopt says: 0 for a
 * long option it does not know, the option's val for one missing its
 * value or given one it takes none; a character for a short option.  A
 * short option refused inside a cluster (-xy) leaves optind on its
 * argument, so argv[optind - 1], arg here, is the one before it, which
 * may be a long option: then optopt names the short one. */
static int long_option_refused(const struct option *lo, const char *arg) {
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) return 0;
    if (optopt == 0 || optopt >= 256) return 1;
    const char *name = arg + 2;
    size_t n = strcspn(name, "=");
    for (const struct option *o = lo; o->name; o++)
        if (!strncmp(o->name, name, n) && o->val == optopt) return 1;
    return 0;
}

int cli_bad_option(const char *cmd, const struct option *lo, char **argv, int missing) {
    const char *arg = argv[optind - 1];
    if (!long_option_refused(lo, arg)) {
        /* a short option: optopt is its character */
        if (missing) return cli_usage_error(cmd, "-%c needs a value", optopt);
        return cli_usage_error(cmd, "unknown option '-%c'", optopt);
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    const struct option *exact = NULL;
    int matches = 0;
    for (const struct option *o = lo; o->name; o++) {
        if (strncmp(o->name, name, n) != 0) continue;
        if (strlen(o->name) == n) exact = o;
        matches++;
    }
    if (exact || matches == 1) {
        const struct option *o = exact;
        for (const struct option *p = lo; !o && p->name; p++)
            if (!strncmp(p->name, name, n)) o = p;
        if (missing) return cli_usage_error(cmd, "--%s needs a value", o->name);
        if (eq && o->has_arg == no_argument)
            return cli_usage_error(cmd, "--%s takes no value (got '%s')", o->name, arg);
    }
    if (matches > 1 && !exact) {
        fprintf(stderr, "%s %s: ambiguous option '--%.*s' could be", cli_prog, cmd, (int)n,
                name);
        for (const struct option *o = lo; o->name; o++)
            if (!strncmp(o->name, name, n)) fprintf(stderr, " --%s", o->name);
        fprintf(stderr, "\nTry '%s %s --help'.\n", cli_prog, cmd);
        return 2;
    }
    return cli_usage_error(cmd, "unknown option '--%.*s'", (int)n, name);
}

int cli_bad_value(const char *cmd, const struct option *lo, int opt, const char *v,
                  const char *wants) {
    const char *name = opt == 'o' ? "output" : option_name(lo, opt);
    return cli_usage_error(cmd, "bad value for --%s: '%s' (%s)", name, v, wants);
}

int cli_io_option(const char *cmd, const struct option *lo, int opt, const char *v,
                  cf_io_options *o, cf_open_options *oo, int *rc) {
    char *end = NULL;
    switch (opt) {
    case OPT_INSECURE:
        o->verify_tls = 0;
        return 1;
    case OPT_RAW_COLOR:
        oo->raw_color = 1;
        return 1;
    case OPT_HEADER_CACHE:
        o->header_cache_dir = v;
        return 1;
    case OPT_CA_FILE:
        o->ca_file = v;
        return 1;
    case OPT_TIMEOUT: {
        errno = 0;
        double d = strtod(v, &end);
        if (errno || *end || end == v || !(d >= 0)) {
            *rc = cli_bad_value(cmd, lo, opt, v, "seconds, 0 or more");
            return -1;
        }
        o->request_timeout_s = d;
        return 1;
    }
    case OPT_HEADER_BYTES:
    case OPT_MAX_INFLIGHT:
    case OPT_MAX_RETRIES: {
        /* Whole numbers within the field's type: a double cast to int
         * beyond its range is undefined, and "2.5" is no count. */
        errno = 0;
        long long n = strtoll(v, &end, 10);
        int is_size = opt == OPT_HEADER_BYTES;
        if (errno || *end || end == v || n < 0 || (!is_size && n > INT_MAX)) {
            *rc = cli_bad_value(cmd, lo, opt, v, "a whole number, 0 or more");
            return -1;
        }
        if (is_size) o->header_bytes = (size_t)n;
        else if (opt == OPT_MAX_INFLIGHT) o->max_inflight = (int)n;
        else o->max_retries = (int)n;
        return 1;
    }
    default:
        return 0;
    }
}

const char *cli_one_url(const char *cmd, int argc, char **argv, int *rc) {
    if (optind >= argc) {
        *rc = cli_usage_error(cmd, "missing URL (%s takes one URL)", cmd);
        return NULL;
    }
    if (optind + 1 < argc) {
        *rc = cli_usage_error(cmd, "unexpected argument '%s' (%s takes one URL)",
                              argv[optind + 1], cmd);
        return NULL;
    }
    return argv[optind];
}

int cli_open_cog(const char *cmd, const cf_io_options *o, const cf_open_options *oo,
                 const char *url, cf_io **io, cf_cog **cog) {
    cf_error err = {0};
    cf_status st = cf_io_new(o, io, &err);
    if (st) return cli_fail(cmd, st, &err);
    st = cf_cog_open_ex(*io, url, oo, cog, &err);
    if (st) {
        cf_io_free(*io);
        *io = NULL;
        return cli_fail(cmd, st, &err);
    }
    return 0;
}

