/*
 * stac_arrow.c - cf_stac_add_arrow: a record batch of a STAC GeoParquet
 * table (stac-geoparquet's layout) into the index.  Each row is written
 * as the JSON of its item, as stac.py's _geoparquet builds it from the
 * row (nulls dropped from objects, timestamps as RFC 3339 in UTC, the WKB
 * geometry as GeoJSON), and the rows go through the JSON parser as one
 * FeatureCollection: one set of reading rules for both forms.  Anything
 * JSON cannot say as the reference's dicts say it (NaN, bytes, dates,
 * maps, dictionary columns) refuses the batch, and the reference reads
 * it.
 */
#include "stac.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct out {
    char *p;
    size_t n, cap;
    const char *why; /* the refusal, NULL while fine */
} out;

static int refuse(out *o, const char *why) {
    if (!o->why) o->why = why;
    return -1;
}

static int put(out *o, const char *s, size_t n) {
    if (!cf__grow((void **)&o->p, &o->cap, o->n + n, 1, 1 << 16)) return refuse(o, "out of memory");
    memcpy(o->p + o->n, s, n);
    o->n += n;
    return 0;
}

static int puts_(out *o, const char *s) { return put(o, s, strlen(s)); }

static int jstring(out *o, const char *s, size_t n) {
    if (put(o, "\"", 1) < 0) return -1;
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        char e[8];
        if (c == '"' || c == '\\') snprintf(e, sizeof e, "\\%c", c);
        else snprintf(e, sizeof e, "\\u%04x", c);
        if (put(o, s + a, i - a) < 0 || puts_(o, e) < 0) return -1;
        a = i + 1;
    }
    return put(o, s + a, n - a) < 0 ? -1 : put(o, "\"", 1);
}

/* A double as Python's json.dumps of a float reads back: the same value,
 * and a float (an integral value keeps its ".0": proj:epsg 32633.0 is
 * not an EPSG code to the reference). */
static int jdouble(out *o, double v) {
    if (!isfinite(v)) return refuse(o, "a number that is not finite");
    char t[40];
    int n = snprintf(t, sizeof t, "%.17g", v);
    if (!strpbrk(t, ".e")) n += snprintf(t + n, sizeof t - (size_t)n, ".0");
    return put(o, t, (size_t)n);
}

/* ---- Arrow values ---------------------------------------------------- */

static int valid(const struct ArrowArray *a, int64_t i) {
    const uint8_t *bits = a->n_buffers > 0 ? a->buffers[0] : NULL;
    if (!bits) return 1;
    int64_t k = a->offset + i;
    return (bits[k >> 3] >> (k & 7)) & 1;
}

/* [start, end) of element i of a list (or string / binary) array:
 * 32- or 64-bit offsets. */
static void range(const struct ArrowArray *a, int64_t i, int large, int64_t *s, int64_t *e) {
    int64_t k = a->offset + i;
    if (large) {
        const int64_t *off = a->buffers[1];
        *s = off[k], *e = off[k + 1];
    } else {
        const int32_t *off = a->buffers[1];
        *s = off[k], *e = off[k + 1];
    }
}

static int is(const char *fmt, const char *f) { return strcmp(fmt, f) == 0; }

/* Whether value i of a column is there: not null, and not of the null
 * type (an all-null column of an inferred schema: no buffers at all).  A
 * union's first buffer is its type ids, not validity: refused. */
static int present(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i, int *p) {
    *p = 0;
    if (is(s->format, "n")) return 0;
    if (!strncmp(s->format, "+u", 2)) return refuse(o, "a union column");
    if (a->n_buffers < 1) return refuse(o, "an array without its buffers");
    *p = valid(a, i);
    return 0;
}

/* The buffers a format's array holds: checked before they are read. */
static int buffers_ok(const struct ArrowSchema *s, const struct ArrowArray *a) {
    const char *f = s->format;
    int64_t need = (is(f, "u") || is(f, "U") || is(f, "z") || is(f, "Z")) ? 3 : is(f, "+s") ? 1 : 2;
    if (a->n_buffers < need) return 0;
    for (int64_t b = 1; b < need; b++)
        if (!a->buffers[b]) return 0;
    return 1;
}

/* An RFC 3339 text of a timestamp (unit: 's', 'm', 'u'), as _plain
 * writes one: UTC, microseconds when there are any, "Z". */
static int jtime(out *o, int64_t v, char unit) {
    /* years 1..9999 are within +-2^58 microseconds: a value past that is
     * refused before it is scaled (and could overflow) */
    int64_t per = unit == 's' ? 1000000 : unit == 'm' ? 1000 : 1, lim = ((int64_t)1 << 58) / per;
    if (v > lim || v < -lim) return refuse(o, "a timestamp outside years 1 to 9999");
    int64_t us = v * per;
    int64_t sec = us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000);
    int64_t frac = us - sec * 1000000;
    int64_t days = sec >= 0 ? sec / 86400 : -((-sec + 86399) / 86400);
    int64_t rem = sec - days * 86400;
    /* civil_from_days (Howard Hinnant) */
    int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097, yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp + (mp < 10 ? 3 : -9);
    y += m <= 2;
    if (y < 1 || y > 9999) return refuse(o, "a timestamp outside years 1 to 9999");
    char t[48];
    int n = snprintf(t, sizeof t, "\"%04d-%02d-%02dT%02d:%02d:%02d", (int)y, (int)m, (int)d,
                     (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60));
    if (frac) n += snprintf(t + n, sizeof t - (size_t)n, ".%06d", (int)frac);
    n += snprintf(t + n, sizeof t - (size_t)n, "Z\"");
    return put(o, t, (size_t)n);
}

static int value(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i, int depth);

/* The members of struct row i whose values are not null (_plain drops
 * the others), `skip` naming columns left out (the item's own fields). */
static int members(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i,
                   int depth, const char *const *skip, int first) {
    if (s->n_children != a->n_children) return refuse(o, "a struct whose schema and array differ");
    for (int64_t c = 0; c < s->n_children; c++) {
        const struct ArrowSchema *cs = s->children[c];
        const struct ArrowArray *ca = a->children[c];
        int skipped = 0, here;
        for (const char *const *k = skip; k && *k; k++) skipped |= cs->name && !strcmp(cs->name, *k);
        if (skipped) continue;
        if (present(o, cs, ca, a->offset + i, &here) < 0) return -1;
        if (!here) continue; /* _plain drops None members */
        if (!first && put(o, ",", 1) < 0) return -1;
        first = 0;
        const char *name = cs->name ? cs->name : "";
        if (jstring(o, name, strlen(name)) < 0 || put(o, ":", 1) < 0) return -1;
        if (value(o, cs, ca, a->offset + i, depth + 1) < 0) return -1;
    }
    return 0;
}

/* Value i of array a (not null: checked by the caller where it matters). */
static int value(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i, int depth) {
    if (depth > 64) return refuse(o, "columns nested deeper than 64 levels");
    int here;
    if (present(o, s, a, i, &here) < 0) return -1;
    if (!here) return puts_(o, "null");
    if (s->dictionary) return refuse(o, "a dictionary-encoded column");
    if (!buffers_ok(s, a)) return refuse(o, "an array without the buffers its type needs");
    const char *f = s->format;
    int64_t k = a->offset + i;
    char t[32];
    if (is(f, "b")) {
        const uint8_t *bits = a->buffers[1];
        return puts_(o, (bits[k >> 3] >> (k & 7)) & 1 ? "true" : "false");
    }
    if (strlen(f) == 1 && strchr("cCsSiIlL", f[0])) {
        long long v = 0;
        unsigned long long u = 0;
        switch (f[0]) {
        case 'c': v = ((const int8_t *)a->buffers[1])[k]; break;
        case 'C': v = ((const uint8_t *)a->buffers[1])[k]; break;
        case 's': v = ((const int16_t *)a->buffers[1])[k]; break;
        case 'S': v = ((const uint16_t *)a->buffers[1])[k]; break;
        case 'i': v = ((const int32_t *)a->buffers[1])[k]; break;
        case 'I': v = ((const uint32_t *)a->buffers[1])[k]; break;
        case 'l': v = ((const int64_t *)a->buffers[1])[k]; break;
        default: u = ((const uint64_t *)a->buffers[1])[k]; break;
        }
        int n = f[0] == 'L' ? snprintf(t, sizeof t, "%llu", u) : snprintf(t, sizeof t, "%lld", v);
        return put(o, t, (size_t)n);
    }
    if (is(f, "f")) return jdouble(o, ((const float *)a->buffers[1])[k]);
    if (is(f, "g")) return jdouble(o, ((const double *)a->buffers[1])[k]);
    if (is(f, "u") || is(f, "U")) {
        int64_t b, e;
        range(a, i, f[0] == 'U', &b, &e);
        return jstring(o, (const char *)a->buffers[2] + b, (size_t)(e - b));
    }
    if (!strncmp(f, "ts", 2) && strlen(f) >= 4 && f[3] == ':' && strchr("smu", f[2]))
        return jtime(o, ((const int64_t *)a->buffers[1])[k], f[2]);
    if (is(f, "+l") || is(f, "+L")) {
        if (a->n_children != 1 || s->n_children != 1) return refuse(o, "a list without its values");
        int64_t b, e;
        range(a, i, f[1] == 'L', &b, &e);
        if (b < 0 || e < b || e > a->children[0]->length) return refuse(o, "list offsets past the values");
        if (put(o, "[", 1) < 0) return -1;
        for (int64_t j = b; j < e; j++) {
            if (j > b && put(o, ",", 1) < 0) return -1;
            if (value(o, s->children[0], a->children[0], j, depth + 1) < 0) return -1;
        }
        return put(o, "]", 1);
    }
    if (is(f, "+s")) {
        if (put(o, "{", 1) < 0 || members(o, s, a, i, depth, NULL, 1) < 0) return -1;
        return put(o, "}", 1);
    }
    return refuse(o, "a column of a type JSON does not hold as the reference reads it");
}

/* ---- WKB ------------------------------------------------------------- */

typedef struct wkb {
    const uint8_t *p;
    size_t n, at;
} wkb;

static int take(wkb *w, void *v, size_t n) {
    if (n > w->n - w->at) return -1;
    memcpy(v, w->p + w->at, n);
    w->at += n;
    return 0;
}

static int u32(wkb *w, int le, uint32_t *v) {
    uint8_t b[4];
    if (take(w, b, 4) < 0) return -1;
    *v = cf__rd32(b, !le);
    return 0;
}

static int f64(wkb *w, int le, double *v) {
    uint8_t b[8];
    if (take(w, b, 8) < 0) return -1;
    uint64_t u = cf__rd64(b, !le);
    memcpy(v, &u, sizeof *v);
    return 0;
}

static int point(out *o, wkb *w, int le, int dims) {
    double v[4];
    for (int d = 0; d < dims; d++)
        if (f64(w, le, &v[d]) < 0) return refuse(o, "geometry WKB cut short");
    if (put(o, "[", 1) < 0 || jdouble(o, v[0]) < 0 || put(o, ",", 1) < 0 || jdouble(o, v[1]) < 0)
        return -1;
    return put(o, "]", 1);
}

static int count(out *o, wkb *w, int le, uint32_t limit, uint32_t *n) {
    if (u32(w, le, n) < 0) return refuse(o, "geometry WKB cut short");
    if (*n > limit || (uint64_t)*n * 16 > w->n - w->at) return refuse(o, "geometry WKB count beyond its bytes");
    return 0;
}

/* One geometry of stac.py's _wkb: Point, Polygon, MultiPolygon (of
 * Polygons), 2D or with Z / M dropped; its coordinates into o, its type
 * into *kind. */
static int geom(out *o, wkb *w, int depth, int *kind) {
    uint8_t order;
    uint32_t t;
    if (take(w, &order, 1) < 0) return refuse(o, "geometry WKB cut short");
    int le = order == 1;
    if (u32(w, le, &t) < 0) return refuse(o, "geometry WKB cut short");
    int dims = 2;
    if (t & 0x80000000u || t & 0x40000000u) {
        dims += !!(t & 0x80000000u) + !!(t & 0x40000000u);
        t &= 0xFFFF;
    } else if (t >= 1000) {
        dims += (t / 1000 == 1 || t / 1000 == 2) ? 1 : 2;
        t %= 1000;
    }
    if (t & 0x20000000u || t & 0xFFFF0000u) return refuse(o, "geometry WKB with an SRID or unknown type");
    *kind = (int)t;
    if (t == 1) return point(o, w, le, dims);
    if (t == 3) {
        uint32_t nr, np;
        if (count(o, w, le, 1u << 16, &nr) < 0 || put(o, "[", 1) < 0) return -1;
        for (uint32_t r = 0; r < nr; r++) {
            if ((r && put(o, ",", 1) < 0) || count(o, w, le, 1u << 24, &np) < 0 || put(o, "[", 1) < 0) return -1;
            for (uint32_t q = 0; q < np; q++)
                if ((q && put(o, ",", 1) < 0) || point(o, w, le, dims) < 0) return -1;
            if (put(o, "]", 1) < 0) return -1;
        }
        return put(o, "]", 1);
    }
    if (t == 6 && depth == 0) {
        uint32_t np;
        if (count(o, w, le, 1u << 16, &np) < 0 || put(o, "[", 1) < 0) return -1;
        for (uint32_t q = 0; q < np; q++) {
            int k;
            if ((q && put(o, ",", 1) < 0) || geom(o, w, depth + 1, &k) < 0) return -1;
            if (k != 3) return refuse(o, "a MultiPolygon holding another type");
        }
        return put(o, "]", 1);
    }
    return refuse(o, "a geometry WKB type the reference reads (or refuses)");
}

static int geometry(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i) {
    int here;
    if (present(o, s, a, i, &here) < 0) return -1;
    if (!here) return puts_(o, "null");
    if (!is(s->format, "z") && !is(s->format, "Z")) {
        /* other bytes (views, fixed size) are WKB to the reference too */
        if (!strncmp(s->format, "vz", 2) || !strncmp(s->format, "w:", 2)) return refuse(o, "a geometry column of binary views");
        return puts_(o, "null"); /* not bytes: no geometry, as the reference */
    }
    if (!buffers_ok(s, a)) return refuse(o, "an array without the buffers its type needs");
    int64_t b, e;
    range(a, i, s->format[0] == 'Z', &b, &e);
    wkb w = {(const uint8_t *)a->buffers[2] + b, (size_t)(e - b), 0};
    int kind;
    size_t mark = o->n;
    if (puts_(o, "{\"type\":\"\",\"coordinates\":") < 0 || geom(o, &w, 0, &kind) < 0) return -1;
    if (put(o, "}", 1) < 0) return -1;
    /* the type, now that it is known, into its place */
    const char *name = kind == 1 ? "Point" : kind == 3 ? "Polygon" : "MultiPolygon";
    size_t nn = strlen(name), at = mark + strlen("{\"type\":\"");
    if (put(o, name, nn) < 0) return -1; /* grow by nn, then shift */
    memmove(o->p + at + nn, o->p + at, o->n - nn - at);
    memcpy(o->p + at, name, nn);
    return 0;
}

/* ---- rows ------------------------------------------------------------ */

static const char *const ITEM_COLUMNS[] = {"type", "stac_version", "stac_extensions", "id", "geometry",
                                           "bbox", "links", "assets", "collection", NULL};

static int64_t column(const struct ArrowSchema *s, const char *name) {
    for (int64_t c = 0; c < s->n_children; c++)
        if (s->children[c]->name && !strcmp(s->children[c]->name, name)) return c;
    return -1;
}

/* A field of the item: the column's value, `absent` when the column is
 * missing or null. */
static int field(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i,
                 const char *name, const char *absent) {
    int64_t c = column(s, name), here = 0;
    if (c >= 0) {
        int h;
        if (present(o, s->children[c], a->children[c], a->offset + i, &h) < 0) return -1;
        here = h;
    }
    if (!here) return puts_(o, absent);
    return value(o, s->children[c], a->children[c], a->offset + i, 1);
}

static int bbox(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i) {
    int64_t c = column(s, "bbox");
    int here = 0;
    if (c >= 0 && present(o, s->children[c], a->children[c], a->offset + i, &here) < 0) return -1;
    if (!here) return puts_(o, "null");
    const struct ArrowSchema *bs = s->children[c];
    const struct ArrowArray *ba = a->children[c];
    if (!is(bs->format, "+s")) return value(o, bs, ba, a->offset + i, 1);
    /* {xmin, ymin, xmax, ymax} as [xmin, ymin, xmax, ymax] */
    static const char *const k[] = {"xmin", "ymin", "xmax", "ymax"};
    if (put(o, "[", 1) < 0) return -1;
    for (int j = 0; j < 4; j++) {
        int64_t q = column(bs, k[j]);
        if (j && put(o, ",", 1) < 0) return -1;
        if (q < 0) {
            if (puts_(o, "null") < 0) return -1;
        } else if (value(o, bs->children[q], ba->children[q], ba->offset + a->offset + i, 2) < 0) {
            return -1;
        }
    }
    return put(o, "]", 1);
}

static int row(out *o, const struct ArrowSchema *s, const struct ArrowArray *a, int64_t i) {
    if (puts_(o, "{\"type\":\"Feature\",\"id\":") < 0 || field(o, s, a, i, "id", "null") < 0) return -1;
    int64_t g = column(s, "geometry");
    if (puts_(o, ",\"geometry\":") < 0) return -1;
    if (g < 0 ? puts_(o, "null") < 0 : geometry(o, s->children[g], a->children[g], a->offset + i) < 0) return -1;
    if (puts_(o, ",\"bbox\":") < 0 || bbox(o, s, a, i) < 0) return -1;
    if (puts_(o, ",\"links\":") < 0 || field(o, s, a, i, "links", "[]") < 0) return -1;
    if (puts_(o, ",\"assets\":") < 0 || field(o, s, a, i, "assets", "{}") < 0) return -1;
    if (puts_(o, ",\"collection\":") < 0 || field(o, s, a, i, "collection", "null") < 0) return -1;
    if (puts_(o, ",\"properties\":{") < 0 || members(o, s, a, i, 1, ITEM_COLUMNS, 1) < 0) return -1;
    return puts_(o, "}}");
}

cf_status cf_stac_add_arrow(cf_stac *ix, const struct ArrowSchema *schema, const struct ArrowArray *batch,
                            const char *base, const cf_stac_limits *lim, cf_error *err) {
    if (!ix || !schema || !batch || !lim) return cf__err(err, CF_E_ARG, "cf_stac_add_arrow: NULL argument");
    if (!schema->format || !is(schema->format, "+s") || schema->n_children != batch->n_children)
        return cf__err(err, CF_E_ARG, "cf_stac_add_arrow: a record batch (a struct array) is needed");
    if ((uint64_t)batch->length > lim->max_items)
        return cf__err(err, CF_E_UNSUPPORTED, "stac: a batch of %" PRId64 " rows, more than max_items",
                       batch->length);
    out o = {0};
    int ok = puts_(&o, "{\"type\":\"FeatureCollection\",\"features\":[") == 0;
    for (int64_t i = 0; ok && i < batch->length; i++)
        ok = (!i || put(&o, ",", 1) == 0) && row(&o, schema, batch, i) == 0;
    ok = ok && puts_(&o, "]}") == 0;
    cf_status st;
    if (!ok) {
        st = !strcmp(o.why, "out of memory") ? cf__err(err, CF_E_NOMEM, "stac: out of memory")
                                             : cf__err(err, CF_E_UNSUPPORTED, "stac: %s", o.why);
    } else {
        cf__stac_doc kind;
        st = cf__stac_add_json(ix, o.p, o.n, base, lim, &kind, err);
    }
    free(o.p);
    return st;
}
