/*
 * info.c - `info`: a COG's structure and georeferencing as text or as one
 * line of JSON.  Every string that may come from the file (or its URL) is
 * escaped on the way out: \xNN in text, \uNNNN in JSON.
 */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *info_usage = "URL [--json] [I/O options]\n";
static const char *info_text =
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


static const struct option info_options[] = {
    IO_LONG_OPTIONS,
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

/* Length of the valid UTF-8 sequence at s, 0 when there is none. */
static int utf8_len(const unsigned char *s) {
    int n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
            : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    for (int k = 1; k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    /* RFC 3629: no overlong forms (E0 80-9F, F0 80-8F: an overlong CSI
     * would reach a lenient terminal raw), no surrogates (ED A0-BF), nothing
     * past U+10FFFF (F4 90-BF) */
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) ||
        (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] > 0x8F))
        return 0;
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

int cli_info(int argc, char **argv) {
    int json = 0, rc = 0, c;
    cf_io_options o;
    cf_io_options_init(&o);
    cf_open_options oo;
    cf_open_options_init(&oo);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", info_options, NULL)) != -1) {
        if (c == 'h') return cli_command_help("info", info_usage, info_text);
        if (c == OPT_JSON) json = 1;
        else if (c == '?' || c == ':') return cli_bad_option("info", info_options, argv, c == ':');
        else if (cli_io_option("info", info_options, c, optarg, &o, &oo, &rc) < 0) return rc;
    }
    const char *url = cli_one_url("info", argc, argv, &rc);
    if (!url) return rc;
    cf_io *io = NULL;
    cf_cog *cog = NULL;
    rc = cli_open_cog("info", &o, &oo, url, &io, &cog);
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

