/*
 * cogfeed.c - the command-line tool.  `info` and `read` are C and use only
 * the public header; the research commands (synth, convert, bench, tune,
 * experiment, demo) live in the Python package and are handed over to
 * `python3 -m cogfeed.cli` with the same arguments.  The pip-installed
 * `cogfeed` is the Python side (cogfeed.cli), which runs this program,
 * carried inside the package as cogfeed/bin/cogfeed, for info and read.
 */
#include "cogfeed.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *usage_text =
    "usage: cogfeed COMMAND [ARGS...]\n"
    "\n"
    "Stream training patches out of Cloud-Optimized GeoTIFFs.\n"
    "\n"
    "commands:\n"
    "  info        print a COG's structure and georeferencing (--json)\n"
    "  read        read a window (X,Y,W,H) into a NumPy .npy file\n"
    "  synth       generate a labelled Sentinel-2-like dataset\n"
    "  convert     write COG variants (codec, tile size) with GDAL\n"
    "  bench       measure a loader's steady-state throughput\n"
    "  tune        Bayesian search (Optuna TPE) for the fastest settings\n"
    "  experiment  train a UNet under four loader set-ups\n"
    "  demo        the whole story end to end in a few minutes\n"
    "\n"
    "`cogfeed COMMAND --help` for a command's options (--opt VALUE or\n"
    "--opt=VALUE); `cogfeed --version`.  Exit status: 0 success, 1 failure,\n"
    "2 bad usage.\n"
    "URL: a path, file://, http(s)://, s3://bucket/key, az://container/blob,\n"
    "gs://bucket/key; credentials from the usual environment variables\n"
    "(AWS_*, AZURE_STORAGE_*, GOOGLE_OAUTH_ACCESS_TOKEN).\n";

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

static const char *info_text =
    "usage: cogfeed info URL [--json] [I/O options]\n"
    "\n"
    "Describe a (Geo)TIFF or COG: size, bands, data type, tiles or strips,\n"
    "compression and predictor, byte order, overviews, internal mask,\n"
    "geotransform, EPSG code, nodata, file size, and the requests and header\n"
    "bytes that opening it took.\n"
    "\n"
    "options:\n"
    "  -h, --help            show this help and exit\n"
    "  --json                one JSON object on one line instead of text:\n"
    "                        strict JSON (NaN and infinities are null;\n"
    "                        has_nodata tells a NaN nodata from none), the\n"
    "                        CRS's PROJJSON embedded as an object\n"
    "\n"
    "Text from the file (tags, metadata, names) is printed with control\n"
    "characters escaped as \\xNN, so that none reaches the terminal raw.\n";

static const char *read_text =
    "usage: cogfeed read URL --window X,Y,W,H -o OUT.npy [--level N]\n"
    "                    [--bands 1,2,...] [--mask] [I/O options]\n"
    "\n"
    "Read a window into a NumPy .npy file: C order, shape (bands, H, W), the\n"
    "file's own data type.  Pixels outside the image are the nodata value\n"
    "(0 without one).\n"
    "\n"
    "options:\n"
    "  -h, --help            show this help and exit\n"
    "  --window X,Y,W,H      the window, in pixels of the level read\n"
    "  -o, --output OUT.npy  where to write\n"
    "  --level N             overview level (0: full resolution)\n"
    "  --bands 1,2,...       bands to read, 1-based, in this order (all)\n"
    "  --mask                read the internal mask instead (uint8, 1 band)\n"
    "\n"
    "Complex samples are written as complex64/complex128 (CInt16 and CInt32\n"
    "widened exactly, as GDAL's ReadAsArray does).\n";

static int usage(int rc) {
    fputs(usage_text, rc ? stderr : stdout);
    return rc;
}

static int command_help(const char *text) {
    fputs(text, stdout);
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

static int fail(const char *what, cf_status st, const cf_error *err) {
    fprintf(stderr, "cogfeed %s: %s\n", what,
            err && err->msg[0] ? err->msg : cf_strerror(st));
    return 1;
}

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

/* The I/O options shared by info and read (io_options_text). */
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

static const struct option info_options[] = {
    IO_LONG_OPTIONS,
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

static const struct option read_options[] = {
    IO_LONG_OPTIONS,
    {"window", required_argument, NULL, OPT_WINDOW},
    {"output", required_argument, NULL, 'o'},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"bands", required_argument, NULL, OPT_BANDS},
    {"mask", no_argument, NULL, OPT_MASK},
    {NULL, 0, NULL, 0},
};

/* The long name of the option getopt_long returned as `val`. */
static const char *option_name(const struct option *lo, int val) {
    for (; lo->name; lo++)
        if (lo->val == val) return lo->name;
    return "?";
}

/* A usage error: the message, a pointer to the command's help, status 2. */
static int usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cogfeed %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'cogfeed %s --help'.\n", cmd);
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

/* getopt_long refused an option (opterr is 0: the words are ours).
 * `missing`: the option needs a value and none came. */
static int bad_option(const char *cmd, const struct option *lo, char **argv, int missing) {
    const char *arg = argv[optind - 1];
    if (!long_option_refused(lo, arg)) {
        /* a short option: optopt is its character */
        if (missing) return usage_error(cmd, "-%c needs a value", optopt);
        return usage_error(cmd, "unknown option '-%c'", optopt);
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
        if (missing) return usage_error(cmd, "--%s needs a value", o->name);
        if (eq && o->has_arg == no_argument)
            return usage_error(cmd, "--%s takes no value (got '%s')", o->name, arg);
    }
    if (matches > 1 && !exact) {
        fprintf(stderr, "cogfeed %s: ambiguous option '--%.*s' could be", cmd, (int)n, name);
        for (const struct option *o = lo; o->name; o++)
            if (!strncmp(o->name, name, n)) fprintf(stderr, " --%s", o->name);
        fprintf(stderr, "\nTry 'cogfeed %s --help'.\n", cmd);
        return 2;
    }
    return usage_error(cmd, "unknown option '--%.*s'", (int)n, name);
}

/* A refused value: which option, the value, and what it takes. */
static int bad_value(const char *cmd, const struct option *lo, int opt, const char *v,
                     const char *wants) {
    const char *name = opt == 'o' ? "output" : option_name(lo, opt);
    return usage_error(cmd, "bad value for --%s: '%s' (%s)", name, v, wants);
}

/* An I/O option: 1 if `opt` was one (its value taken), 0 if not, -1 on a
 * bad value (reported, *rc set to the exit status). */
static int io_option(const char *cmd, const struct option *lo, int opt, const char *v,
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
            *rc = bad_value(cmd, lo, opt, v, "seconds, 0 or more");
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
            *rc = bad_value(cmd, lo, opt, v, "a whole number, 0 or more");
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

/* The one URL a command takes, from the operands getopt_long left at
 * argv[optind..]: NULL after reporting none or too many. */
static const char *one_url(const char *cmd, int argc, char **argv, int *rc) {
    if (optind >= argc) {
        *rc = usage_error(cmd, "missing URL (%s takes one URL)", cmd);
        return NULL;
    }
    if (optind + 1 < argc) {
        *rc = usage_error(cmd, "unexpected argument '%s' (%s takes one URL)", argv[optind + 1],
                          cmd);
        return NULL;
    }
    return argv[optind];
}

/* Length of the valid UTF-8 sequence at s, 0 when there is none. */
static int utf8_len(const unsigned char *s) {
    int n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3
            : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    for (int k = 1; k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return n;
}

/* A JSON string; bytes that are not UTF-8 (TIFF text tags may be Latin-1)
 * are taken as Latin-1 so that the output stays valid JSON.  Control
 * characters, C0 and C1 (U+0080-U+009F: CSI among them) and DEL, are
 * \u escapes, so that a hostile file's text reaches no terminal raw. */
/* One character of a JSON string at s, but '"' and '\\': control
 * characters (C0, DEL, C1 in UTF-8) and bytes that are not UTF-8 as
 * \u00NN, other UTF-8 as it is.  Returns the bytes it took. */
static int json_char(FILE *f, const char *s) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c == 0x7f) {
        fprintf(f, "\\u%04x", c);
        return 1;
    }
    if (c < 0x80) {
        fputc(c, f);
        return 1;
    }
    int n = utf8_len((const unsigned char *)s);
    if (!n) {
        fprintf(f, "\\u%04x", c);
        return 1;
    }
    if (n == 2 && c == 0xC2 && (unsigned char)s[1] < 0xA0) {
        fprintf(f, "\\u%04x", (unsigned char)s[1]);
        return 2;
    }
    fwrite(s, 1, (size_t)n, f);
    return n;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    while (s && *s) {
        if (*s == '"' || *s == '\\') {
            fprintf(f, "\\%c", *s++);
            continue;
        }
        s += json_char(f, s);
    }
    fputc('"', f);
}

/* Text from a file (tags, metadata, names) for a terminal: control
 * characters (C0, DEL, C1 in UTF-8) and bytes that are not UTF-8 as \xNN,
 * so that ESC, BEL or CR in a hostile file can neither clear the screen,
 * retitle the window nor overwrite the line; each item stays on its line. */
static void text_strn(FILE *f, const char *s, size_t len) {
    const char *stop = s + len;
    for (; s < stop && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else if (c < 0x80) fputc(c, f);
        else {
            int n = utf8_len((const unsigned char *)s);
            if (!n) fprintf(f, "\\x%02x", c);
            else if (n == 2 && c == 0xC2 && (unsigned char)s[1] < 0xA0) {
                fprintf(f, "\\xc2\\x%02x", (unsigned char)s[1]);
                s++;
            } else {
                fwrite(s, 1, (size_t)n, f);
                s += n - 1;
            }
        }
    }
}

static void text_str(FILE *f, const char *s) {
    if (s) text_strn(f, s, strlen(s));
}

/* A number; JSON has no NaN or infinity, so those are null (strict JSON,
 * as Python's json.loads(..., parse_constant=...) and jq accept). */
static void json_num(FILE *f, double v) {
    if (!isfinite(v)) fputs("null", f);
    else fprintf(f, "%.17g", v);
}

/* JSON text that PROJ wrote (indented over many lines) as one line:
 * whitespace outside strings dropped, strings as json_str writes them. */
static void json_compact(FILE *f, const char *s) {
    int in_str = 0;
    for (; *s; s++) {
        char c = *s;
        if (in_str) {
            /* PROJ's escapes as they are; the text between them (a
             * file's citation can reach a CRS name) as json_str writes it */
            if (c == '\\' && s[1]) {
                fputc(c, f);
                fputc(*++s, f);
            } else if (c == '"') {
                fputc(c, f);
                in_str = 0;
            } else {
                s += json_char(f, s) - 1;
            }
        } else if (c == '"') {
            in_str = 1;
            fputc(c, f);
        } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
            fputc(c, f);
        }
    }
}

static const char *interleave_name(int planar) { return planar == 2 ? "band" : "pixel"; }

static const char *kind_name(cf_crs_kind k) {
    switch (k) {
    case CF_CRS_GEOGRAPHIC: return "geographic";
    case CF_CRS_PROJECTED: return "projected";
    case CF_CRS_ENGINEERING: return "engineering";
    default: return "other";
    }
}

/* "crs": the CRS as resolved (EPSG code after GDAL's replacement of a
 * deprecated one, and the code as written), its name, WKT2 and PROJJSON;
 * null, with "crs_note" saying why, when the file has none. */
static void json_crs(FILE *f, const cf_cog *cog) {
    const cf_crs *c = cf_cog_crs(cog);
    if (!c) {
        fputs(", \"crs\": null", f);
        if (cf_cog_crs_note(cog)[0]) {
            fputs(", \"crs_note\": ", f);
            json_str(f, cf_cog_crs_note(cog));
        }
        return;
    }
    fputs(", \"crs\": {\"epsg\": ", f);
    if (cf_crs_epsg(c)) fprintf(f, "%d", cf_crs_epsg(c));
    else fputs("null", f);
    fputs(", \"epsg_written\": ", f);
    if (cf_crs_epsg_written(c)) fprintf(f, "%d", cf_crs_epsg_written(c));
    else fputs("null", f);
    fputs(", \"name\": ", f);
    json_str(f, cf_crs_name(c));
    fprintf(f, ", \"kind\": \"%s\", \"string\": ", kind_name(cf_crs_kind_of(c)));
    json_str(f, cf_crs_to_string(c));
    fputs(", \"wkt\": ", f);
    json_str(f, cf_crs_wkt(c));
    /* PROJ writes PROJJSON: embed it as the object it is. */
    const char *pj = cf_crs_projjson(c);
    fputs(", \"projjson\": ", f);
    if (pj[0] == '{') json_compact(f, pj);
    else fputs("null", f);
    fputc('}', f);
}

/* "bounds" (xmin, ymin, xmax, ymax) and "res" of level 0, null without a
 * geotransform. */
static void json_grid(FILE *f, const cf_cog *cog, const cf_cog_info *in) {
    if (!in->has_geotransform) {
        fputs(", \"bounds\": null, \"res\": null", f);
        return;
    }
    cf_grid g;
    double b[4];
    cf_cog_grid(cog, 0, &g, NULL);
    cf_grid_bounds(&g, b);
    fputs(", \"bounds\": [", f);
    for (int k = 0; k < 4; k++) {
        if (k) fputs(", ", f);
        json_num(f, b[k]);
    }
    fputs("], \"res\": [", f);
    json_num(f, hypot(g.transform[1], g.transform[4]));
    fputs(", ", f);
    json_num(f, hypot(g.transform[2], g.transform[5]));
    fputc(']', f);
}

static void print_crs(FILE *f, const cf_cog *cog) {
    const cf_crs *c = cf_cog_crs(cog);
    if (!c) {
        const char *note = cf_cog_crs_note(cog);
        fputs("CRS:          none", f);
        if (note[0]) {
            fputs(" (", f);
            text_str(f, note);
            fputc(')', f);
        }
        fputc('\n', f);
        return;
    }
    if (cf_crs_epsg(c)) fprintf(f, "CRS:          EPSG:%d, ", cf_crs_epsg(c));
    else fprintf(f, "CRS:          user-defined %s, ", kind_name(cf_crs_kind_of(c)));
    text_str(f, cf_crs_name(c));
    if (cf_crs_epsg_written(c) && cf_crs_epsg_written(c) != cf_crs_epsg(c))
        fprintf(f, " (written as EPSG:%d)", cf_crs_epsg_written(c));
    fputc('\n', f);
}

/* An io with options `o` and the cog at `url` on it; 0, or the exit code
 * after reporting the failure (nothing left open). */
static int open_cog(const char *cmd, const cf_io_options *o,
                    const cf_open_options *oo, const char *url, cf_io **io,
                    cf_cog **cog) {
    cf_error err = {0};
    cf_status st = cf_io_new(o, io, &err);
    if (st) return fail(cmd, st, &err);
    st = cf_cog_open_ex(*io, url, oo, cog, &err);
    if (st) {
        cf_io_free(*io);
        *io = NULL;
        return fail(cmd, st, &err);
    }
    return 0;
}

/* "KEY=VALUE" items as a JSON object. */
static void json_items(FILE *f, const char *const *it) {
    fputc('{', f);
    for (int k = 0; it && it[k]; k++) {
        const char *eq = strchr(it[k], '=');
        if (!eq) continue;
        char key[256];
        size_t kl = (size_t)(eq - it[k]) < sizeof key - 1 ? (size_t)(eq - it[k])
                                                           : sizeof key - 1;
        memcpy(key, it[k], kl);
        key[kl] = 0;
        if (k) fputs(", ", f);
        json_str(f, key);
        fputs(": ", f);
        json_str(f, eq + 1);
    }
    fputc('}', f);
}

/* Metadata of the dataset (band 0) or a band: {"": {...}, "DOMAIN": {...}}
 * over every domain that has items. */
static void json_metadata(FILE *f, const cf_cog *cog, int band) {
    const char *const *dom = cf_cog_metadata_domains(cog, band);
    fputc('{', f);
    for (int d = 0; dom && dom[d]; d++) {
        if (d) fputs(", ", f);
        json_str(f, dom[d]);
        fputs(": ", f);
        json_items(f, cf_cog_metadata(cog, band, dom[d]));
    }
    fputc('}', f);
}

/* The warnings of the open, one a line, as a JSON list. */
static void json_lines(FILE *f, const char *s) {
    fputc('[', f);
    int first = 1;
    while (s && *s) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char line[1024];
        if (n >= sizeof line) n = sizeof line - 1;
        memcpy(line, s, n);
        line[n] = 0;
        if (!first) fputs(", ", f);
        json_str(f, line);
        first = 0;
        s = e ? e + 1 : s + n;
    }
    fputc(']', f);
}

static int cmd_info(int argc, char **argv) {
    int json = 0, rc = 0, c;
    cf_io_options o;
    cf_io_options_init(&o);
    cf_open_options oo;
    cf_open_options_init(&oo);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", info_options, NULL)) != -1) {
        if (c == 'h') return command_help(info_text);
        if (c == OPT_JSON) json = 1;
        else if (c == '?' || c == ':') return bad_option("info", info_options, argv, c == ':');
        else if (io_option("info", info_options, c, optarg, &o, &oo, &rc) < 0) return rc;
    }
    const char *url = one_url("info", argc, argv, &rc);
    if (!url) return rc;
    cf_io *io = NULL;
    cf_cog *cog = NULL;
    rc = open_cog("info", &o, &oo, url, &io, &cog);
    if (rc) return rc;
    cf_cog_info in;
    cf_cog_get_info(cog, &in);
    FILE *f = stdout;
    if (json) {
        fprintf(f, "{\"url\": ");
        json_str(f, cf_cog_name(cog));
        fprintf(f, ", \"width\": %u, \"height\": %u, \"count\": %u, \"dtype\": \"%s\"",
                in.width, in.height, in.count, cf_dtype_name(in.dtype));
        fprintf(f, ", \"bits_per_sample\": %u, \"tiled\": %s, \"tile_width\": %u, \"tile_height\": %u",
                in.bits_per_sample, in.tiled ? "true" : "false", in.tile_width, in.tile_height);
        fprintf(f, ", \"compression\": ");
        json_str(f, in.compression_name);
        fprintf(f, ", \"predictor\": %d, \"interleave\": \"%s\", \"photometric\": %d",
                in.predictor, interleave_name(in.planar), in.photometric);
        fprintf(f, ", \"bigtiff\": %s, \"byte_order\": \"%s\"", in.bigtiff ? "true" : "false",
                in.big_endian ? "big" : "little");
        fprintf(f, ", \"overviews\": [");
        for (int l = 1; l < in.nlevels; l++) {
            cf_level_info li;
            cf_cog_level_info(cog, l, &li, NULL);
            fprintf(f, "%s[%u, %u]", l > 1 ? ", " : "", li.width, li.height);
        }
        fprintf(f, "], \"has_mask\": %s, \"geotransform\": ", in.has_mask ? "true" : "false");
        if (in.has_geotransform) {
            fputc('[', f);
            for (int k = 0; k < 6; k++) {
                if (k) fputs(", ", f);
                json_num(f, in.geotransform[k]);
            }
            fputc(']', f);
        } else {
            fputs("null", f);
        }
        if (in.epsg) fprintf(f, ", \"epsg\": %d", in.epsg);
        else fputs(", \"epsg\": null", f);
        json_crs(f, cog);
        json_grid(f, cog, &in);
        /* NaN nodata (common in float files) is null in JSON: has_nodata
         * tells it from no nodata at all. */
        fprintf(f, ", \"has_nodata\": %s, \"nodata\": ", in.has_nodata ? "true" : "false");
        if (in.has_nodata) json_num(f, in.nodata);
        else fputs("null", f);
        fputs(", \"scale\": [", f);
        for (uint32_t b = 1; b <= in.count && b <= CF_MAX_BANDS; b++) {
            if (b > 1) fputs(", ", f);
            json_num(f, cf_cog_band_scale(cog, (int)b));
        }
        fputs("], \"offset\": [", f);
        for (uint32_t b = 1; b <= in.count && b <= CF_MAX_BANDS; b++) {
            if (b > 1) fputs(", ", f);
            json_num(f, cf_cog_band_offset(cog, (int)b));
        }
        fputs("], \"bands\": [", f);
        for (uint32_t b = 1; b <= in.count && b <= CF_MAX_BANDS; b++) {
            double nd;
            fprintf(f, "%s{\"band\": %u, \"description\": ", b > 1 ? ", " : "", b);
            json_str(f, cf_cog_band_description(cog, (int)b));
            fputs(", \"unit\": ", f);
            json_str(f, cf_cog_band_unit(cog, (int)b));
            int has_nd = cf_cog_band_nodata(cog, (int)b, &nd) != 0;
            fprintf(f, ", \"has_nodata\": %s, \"nodata\": ", has_nd ? "true" : "false");
            if (has_nd) json_num(f, nd);
            else fputs("null", f);
            fputs(", \"scale\": ", f);
            json_num(f, cf_cog_band_scale(cog, (int)b));
            fputs(", \"offset\": ", f);
            json_num(f, cf_cog_band_offset(cog, (int)b));
            fputs(", \"metadata\": ", f);
            json_metadata(f, cog, (int)b);
            fputc('}', f);
        }
        fputs("], \"metadata\": ", f);
        json_metadata(f, cog, 0);
        const char *dt = cf_cog_metadata_item(cog, 0, "", "TIFFTAG_DATETIME");
        fputs(", \"datetime\": ", f);
        if (dt) json_str(f, dt);
        else fputs("null", f);
        fputs(", \"warnings\": ", f);
        json_lines(f, cf_cog_warnings(cog));
        fprintf(f, ", \"file_size\": %" PRIu64 ", \"header_bytes\": %" PRIu64
                   ", \"header_requests\": %u}\n",
                in.file_size, in.header_bytes, in.header_requests);
    } else {
        /* Every string that may come from the file (or its URL) goes
         * through text_str. */
        fputs("URL:          ", f);
        text_str(f, cf_cog_name(cog));
        fputc('\n', f);
        fprintf(f, "Size:         %u x %u, %u band%s, %s\n", in.width, in.height, in.count,
                in.count == 1 ? "" : "s", in.bits_per_sample == 1 ? "1-bit" : cf_dtype_name(in.dtype));
        fprintf(f, "Layout:       %s %u x %u, %s interleave\n", in.tiled ? "tiles" : "strips",
                in.tile_width, in.tile_height, interleave_name(in.planar));
        fputs("Compression:  ", f);
        text_str(f, in.compression_name);
        fprintf(f, ", predictor %d\n", in.predictor);
        fprintf(f, "Format:       %s, %s-endian\n", in.bigtiff ? "BigTIFF" : "TIFF",
                in.big_endian ? "big" : "little");
        fprintf(f, "Overviews:    ");
        if (in.nlevels <= 1) fputs("none", f);
        for (int l = 1; l < in.nlevels; l++) {
            cf_level_info li;
            cf_cog_level_info(cog, l, &li, NULL);
            fprintf(f, "%s%ux%u", l > 1 ? ", " : "", li.width, li.height);
        }
        fprintf(f, "\nMask:         %s\n", in.has_mask ? "internal" : "none");
        if (in.has_geotransform)
            fprintf(f, "Geotransform: %.10g, %.10g, %.10g, %.10g, %.10g, %.10g\n",
                    in.geotransform[0], in.geotransform[1], in.geotransform[2],
                    in.geotransform[3], in.geotransform[4], in.geotransform[5]);
        else
            fprintf(f, "Geotransform: none\n");
        print_crs(f, cog);
        if (in.has_geotransform) {
            cf_grid g;
            double b[4];
            cf_cog_grid(cog, 0, &g, NULL);
            cf_grid_bounds(&g, b);
            fprintf(f, "Bounds:       %.10g, %.10g, %.10g, %.10g (xmin, ymin, xmax, ymax)\n", b[0],
                    b[1], b[2], b[3]);
            fprintf(f, "Resolution:   %.10g, %.10g\n", hypot(g.transform[1], g.transform[4]),
                    hypot(g.transform[2], g.transform[5]));
        }
        if (in.has_nodata) fprintf(f, "NoData:       %.17g\n", in.nodata);
        for (uint32_t b = 1; b <= in.count && b <= CF_MAX_BANDS; b++) {
            const char *d = cf_cog_band_description(cog, (int)b);
            const char *u = cf_cog_band_unit(cog, (int)b);
            if (!*d && !*u) continue;
            fprintf(f, "Band %-8u ", b);
            text_str(f, d);
            if (*u) {
                fputs(" (", f);
                text_str(f, u);
                fputc(')', f);
            }
            fputc('\n', f);
        }
        const char *const *md = cf_cog_metadata(cog, 0, "");
        for (int k = 0; md && md[k]; k++) {
            fprintf(f, "%-13s ", k ? "" : "Metadata:");
            text_str(f, md[k]);
            fputc('\n', f);
        }
        const char *warn = cf_cog_warnings(cog);
        while (warn && *warn) {
            const char *e = strchr(warn, '\n');
            size_t n = e ? (size_t)(e - warn) : strlen(warn);
            fputs("Warning:      ", f);
            text_strn(f, warn, n);
            fputc('\n', f);
            warn = e ? e + 1 : warn + strlen(warn);
        }
        fprintf(f, "File size:    %" PRIu64 " bytes\n", in.file_size);
        fprintf(f, "Opened with:  %u request%s, %" PRIu64 " header bytes\n", in.header_requests,
                in.header_requests == 1 ? "" : "s", in.header_bytes);
    }
    cf_cog_close(cog);
    cf_io_free(io);
    return 0;
}

static const char *npy_descr(cf_dtype t) {
    switch (t) {
    case CF_DT_U8: return "|u1";
    case CF_DT_I8: return "|i1";
    case CF_DT_U16: return "<u2";
    case CF_DT_I16: return "<i2";
    case CF_DT_U32: return "<u4";
    case CF_DT_I32: return "<i4";
    case CF_DT_U64: return "<u8";
    case CF_DT_I64: return "<i8";
    case CF_DT_F32: return "<f4";
    case CF_DT_F64: return "<f8";
    case CF_DT_CF32: return "<c8";
    case CF_DT_CF64: return "<c16";
    default: return NULL;
    }
}

/* NumPy .npy format 1.0: magic, header length, a dict padded so the data
 * starts on a 64-byte boundary.  Data is written as the host holds it; the
 * descriptor says little-endian, so refuse big-endian hosts plainly. */
static int write_npy(const char *path, cf_dtype t, int nb, uint32_t h, uint32_t w,
                     const void *data, size_t n) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) {
        fprintf(stderr, "cogfeed read: big-endian hosts are not supported for .npy output\n");
        return 1;
    }
    char hdr[256];
    int len = snprintf(hdr, sizeof hdr,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %u, %u), }",
                       npy_descr(t), nb, h, w);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cogfeed read: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint16_t hl = (uint16_t)(len + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)len, f) == (size_t)len;
    for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        fprintf(stderr, "cogfeed read: writing %s failed: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

static int parse_ints(const char *s, long long *out, int max) {
    int n = 0;
    while (*s && n < max) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s) return -1;
        out[n++] = v;
        if (*end == ',') s = end + 1;
        else if (*end == 0) s = end;
        else return -1;
    }
    return *s ? -1 : n;
}

static int cmd_read(int argc, char **argv) {
    const char *out = NULL;
    long long win[4];
    int have_win = 0, level = 0, mask = 0, nb = 0, rc = 0, c;
    static int bands[CF_MAX_BANDS];
    static long long tmp[CF_MAX_BANDS];
    cf_io_options o;
    cf_io_options_init(&o);
    cf_open_options oo;
    cf_open_options_init(&oo);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", read_options, NULL)) != -1) {
        const char *v = optarg;
        long long lv;
        int n;
        switch (c) {
        case 'h':
            return command_help(read_text);
        case '?':
        case ':':
            return bad_option("read", read_options, argv, c == ':');
        case OPT_MASK:
            mask = 1;
            break;
        case 'o':
            out = v;
            break;
        case OPT_WINDOW:
            if (parse_ints(v, win, 4) != 4 || win[2] <= 0 || win[3] <= 0 ||
                win[2] > UINT32_MAX || win[3] > UINT32_MAX)
                return bad_value("read", read_options, c, v,
                                 "X,Y,W,H: whole numbers, W and H above 0");
            have_win = 1;
            break;
        case OPT_LEVEL:
            if (parse_ints(v, &lv, 1) != 1 || lv < 0 || lv > 1000)
                return bad_value("read", read_options, c, v, "a whole number, 0 or more");
            level = (int)lv;
            break;
        case OPT_BANDS:
            n = parse_ints(v, tmp, CF_MAX_BANDS);
            if (n <= 0)
                return bad_value("read", read_options, c, v,
                                 "band numbers from 1, separated by commas");
            for (int k = 0; k < n; k++) {
                if (tmp[k] < 1 || tmp[k] > CF_MAX_BANDS)
                    return bad_value("read", read_options, c, v, "band numbers from 1");
                bands[k] = (int)tmp[k];
            }
            nb = n;
            break;
        default:
            if (io_option("read", read_options, c, v, &o, &oo, &rc) < 0) return rc;
        }
    }
    const char *url = one_url("read", argc, argv, &rc);
    if (!url) return rc;
    if (!have_win) return usage_error("read", "missing --window X,Y,W,H");
    if (!out) return usage_error("read", "missing -o OUT.npy");
    cf_io *io = NULL;
    cf_cog *cog = NULL;
    rc = open_cog("read", &o, &oo, url, &io, &cog);
    if (rc) return rc;
    cf_cog_info in;
    cf_cog_get_info(cog, &in);
    uint32_t w = (uint32_t)win[2], h = (uint32_t)win[3];
    cf_dtype dt = mask ? CF_DT_U8 : in.dtype;
    /* Complex integers go to .npy as the complex floats NumPy has. */
    cf_dtype npy_dt = cf_dtype_complex_float(dt);
    int count = mask ? 1 : (nb ? nb : (int)in.count);
    size_t samples = (size_t)w * h * (size_t)count;
    size_t n = samples * cf_dtype_size(npy_dt);
    if ((double)w * h * count * cf_dtype_size(npy_dt) > 16e9) {
        fprintf(stderr, "cogfeed read: window of %ux%u x %d bands is larger than 16 GB\n", w, h, count);
        cf_cog_close(cog);
        cf_io_free(io);
        return 2;
    }
    void *buf = malloc(n ? n : 1);
    cf_error err = {0};
    cf_status st;
    rc = 1;
    if (!buf) {
        fprintf(stderr, "cogfeed read: out of memory for %zu bytes\n", n);
    } else {
        st = mask ? cf_cog_read_mask(cog, level, win[0], win[1], w, h, buf, n, &err)
                  : cf_cog_read(cog, level, win[0], win[1], w, h, nb ? bands : NULL, nb, buf, n, &err);
        if (!st) cf_complex_widen(dt, buf, buf, samples);
        rc = st ? fail("read", st, &err) : write_npy(out, npy_dt, count, h, w, buf, n);
    }
    free(buf);
    cf_cog_close(cog);
    cf_io_free(io);
    return rc;
}

/* The folder holding the cogfeed package that belongs with this program,
 * found from where the program lies (never a path compiled in, so a moved
 * build or install still works): BUILD/python for a build tree's
 * BUILD/cogfeed, SITE for SITE/cogfeed/bin/cogfeed inside an installed
 * package.  NULL when neither (an installed C tool: python3 finds the
 * package among its own).  Returns a malloc'd string. */
static char *python_dir_near_exe(void) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = 0; /* exe is now the program's folder */
    static const char *const cand[] = {"%s/python", "%s/../.."};
    static const char *const probe[] = {"%s/python/cogfeed/cli.py", "%s/../cli.py"};
    for (int i = 0; i < 2; i++) {
        char p[4200];
        snprintf(p, sizeof p, probe[i], exe);
        if (access(p, R_OK) == 0) {
            char d[4200], *r;
            snprintf(d, sizeof d, cand[i], exe);
            if ((r = realpath(d, NULL))) return r;
        }
    }
    return NULL;
}

/* Hand a research command to the Python package, keeping argv as is:
 * $COGFEED_PYTHON (the pip-installed `cogfeed` sets it to its own
 * interpreter), else python3 on PATH. */
static int run_python(int argc, char **argv) {
    const char *py = getenv("COGFEED_PYTHON");
    if (!py || !*py) py = "python3";
    char *dir = python_dir_near_exe();
    if (dir) {
        const char *old = getenv("PYTHONPATH");
        size_t len = strlen(dir) + (old ? strlen(old) : 0) + 2;
        char *pp = malloc(len);
        if (pp) {
            snprintf(pp, len, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
            setenv("PYTHONPATH", pp, 1);
            free(pp);
        }
        free(dir);
    }
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) return 1;
    args[0] = (char *)py;
    args[1] = "-m";
    args[2] = "cogfeed.cli";
    for (int i = 0; i < argc; i++) args[3 + i] = argv[i];
    execvp(py, args);
    fprintf(stderr, "cogfeed: cannot run %s: %s (set COGFEED_PYTHON to a python3 "
                    "with the cogfeed package)\n", py, strerror(errno));
    free(args);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("cogfeed: missing COMMAND\n\n", stderr);
        return usage(2);
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) return usage(0);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("cogfeed %s\n", CF_VERSION_STRING);
        return 0;
    }
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "read")) return cmd_read(argc - 1, argv + 1);
    static const char *const py_cmds[] = {"synth", "convert", "bench", "tune", "experiment", "demo"};
    for (size_t i = 0; i < sizeof py_cmds / sizeof *py_cmds; i++)
        if (!strcmp(cmd, py_cmds[i])) return run_python(argc - 1, argv + 1);
    fprintf(stderr, "cogfeed: unknown command '%s'\n\n", cmd);
    return usage(2);
}
