/*
 * read.c - `read`: a window (or the internal mask) of one level into a
 * NumPy .npy file, C order, shape (bands, H, W), the file's own data type.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *read_usage =
    "URL --window X,Y,W,H -o OUT.npy [--level N]\n"
    "[--bands 1,2,...] [--mask] [I/O options]\n";
static const char *read_text =
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


static const struct option read_options[] = {
    IO_LONG_OPTIONS,
    {"window", required_argument, NULL, OPT_WINDOW},
    {"output", required_argument, NULL, 'o'},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"bands", required_argument, NULL, OPT_BANDS},
    {"mask", no_argument, NULL, OPT_MASK},
    {NULL, 0, NULL, 0},
};

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
        fprintf(stderr, "%s read: big-endian hosts are not supported for .npy output\n",
                cli_prog);
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
        fprintf(stderr, "%s read: cannot write %s: %s\n", cli_prog, path, strerror(errno));
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
        fprintf(stderr, "%s read: writing %s failed: %s\n", cli_prog, path, strerror(errno));
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

int cli_read(int argc, char **argv) {
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
            return cli_command_help("read", read_usage, read_text);
        case '?':
        case ':':
            return cli_bad_option("read", read_options, argv, c == ':');
        case OPT_MASK:
            mask = 1;
            break;
        case 'o':
            out = v;
            break;
        case OPT_WINDOW:
            if (parse_ints(v, win, 4) != 4 || win[2] <= 0 || win[3] <= 0 ||
                win[2] > UINT32_MAX || win[3] > UINT32_MAX)
                return cli_bad_value("read", read_options, c, v,
                                 "X,Y,W,H: whole numbers, W and H above 0");
            have_win = 1;
            break;
        case OPT_LEVEL:
            if (parse_ints(v, &lv, 1) != 1 || lv < 0 || lv > 1000)
                return cli_bad_value("read", read_options, c, v, "a whole number, 0 or more");
            level = (int)lv;
            break;
        case OPT_BANDS:
            n = parse_ints(v, tmp, CF_MAX_BANDS);
            if (n <= 0)
                return cli_bad_value("read", read_options, c, v,
                                 "band numbers from 1, separated by commas");
            for (int k = 0; k < n; k++) {
                if (tmp[k] < 1 || tmp[k] > CF_MAX_BANDS)
                    return cli_bad_value("read", read_options, c, v, "band numbers from 1");
                bands[k] = (int)tmp[k];
            }
            nb = n;
            break;
        default:
            if (cli_io_option("read", read_options, c, v, &o, &oo, &rc) < 0) return rc;
        }
    }
    const char *url = cli_one_url("read", argc, argv, &rc);
    if (!url) return rc;
    if (!have_win) return cli_usage_error("read", "missing --window X,Y,W,H");
    if (!out) return cli_usage_error("read", "missing -o OUT.npy");
    cf_io *io = NULL;
    cf_cog *cog = NULL;
    rc = cli_open_cog("read", &o, &oo, url, &io, &cog);
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
        fprintf(stderr, "%s read: window of %ux%u x %d bands is larger than 16 GB\n", cli_prog,
                w, h, count);
        cf_cog_close(cog);
        cf_io_free(io);
        return 2;
    }
    void *buf = malloc(n ? n : 1);
    cf_error err = {0};
    cf_status st;
    rc = 1;
    if (!buf) {
        fprintf(stderr, "%s read: out of memory for %zu bytes\n", cli_prog, n);
    } else {
        st = mask ? cf_cog_read_mask(cog, level, win[0], win[1], w, h, buf, n, &err)
                  : cf_cog_read(cog, level, win[0], win[1], w, h, nb ? bands : NULL, nb, buf, n, &err);
        if (!st) cf_complex_widen(dt, buf, buf, samples);
        rc = st ? cli_fail("read", st, &err) : write_npy(out, npy_dt, count, h, w, buf, n);
    }
    free(buf);
    cf_cog_close(cog);
    cf_io_free(io);
    return rc;
}

