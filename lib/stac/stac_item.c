/*
 * stac_item.c - one STAC document's items into the index (stac.h), by the
 * rules of stac.py's item_from_dict.  A field is parsed where it lies and
 * the item is finished once its object closes (an asset's href needs the
 * item's self link, which may come after the assets).  Anything the
 * reference would refuse, or reads in a way this file does not copy, ends
 * the document with CF_E_UNSUPPORTED: `refuse()` names why.
 */
#include "stac.h"
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A scalar seen in the document: kind, and its text or number. */
typedef struct jv {
    cf__jkind k; /* CF__J_BAD: absent */
    cf__jstr s;
    cf__jnum n;
} jv;

/* The projection fields of one object (item properties or asset). */
typedef struct proj {
    jv code, epsg, wkt2;
    int projjson;
    int has_t, has_s, has_b;
    double t[6], b[4];
    int64_t s[2];
} proj;

/* One band object of eo:bands, raster:bands or bands: every key any of
 * the three lists uses (each list's own keys are picked in merge()). */
typedef struct bandv {
    jv name, common, eo_common, nodata, scale, offset, r_scale, r_offset, dtype;
} bandv;

typedef struct blist {
    bandv *v;
    size_t n, cap;
    int present; /* the key is in the asset (even as null) */
} blist;

/* An asset being read: its fields, resolved at the item's end. */
typedef struct asset_in {
    cf__jstr key, href;
    jv type;
    proj pj;
    uint32_t first_band, nbands;
    cf__sref roles;
    uint32_t nroles;
} asset_in;

typedef struct ctx {
    cf__stac *ix;
    cf__json j;
    const cf__stac_limits *lim;
    const char *base; /* the document's location, or NULL */
    const char *why; /* the reason of a refusal */
    blist bl[3];     /* eo:bands, raster:bands, bands of the asset being read */
    size_t drop_every;  /* a memory-mapped document: let go of parsed pages */
    const char *dropped; /* up to here */
    asset_in *as;
    size_t nas, cap_as;
} ctx;

static int refuse(ctx *c, const char *why) {
    if (!c->why) c->why = why;
    return -1;
}

/* Room for `need` elements in a growing array, or the refusal "out of
 * memory" (which the caller reports as CF_E_NOMEM). */
static int room(ctx *c, void **p, size_t *cap, size_t need, size_t elem) {
    return cf__grow(p, cap, need, elem, 16) ? 0 : refuse(c, "out of memory");
}

/* The text of s into the arena. */
static int put(ctx *c, const cf__jstr *s, cf__sref *out) {
    cf__stac *ix = c->ix;
    if (room(c, (void **)&ix->arena, &ix->cap_arena, ix->arena_len + s->n, 1) < 0) return -1;
    size_t n = s->n;
    if (s->esc) {
        n = cf__js_decode(s, ix->arena + ix->arena_len, s->n);
        if (n == (size_t)-1) return refuse(c, "a string with a lone surrogate or NUL");
    } else if (memchr(s->p, 0, s->n)) {
        return refuse(c, "a string with NUL");
    } else {
        memcpy(ix->arena + ix->arena_len, s->p, n);
    }
    if (n > CF__SREF_MAX_LEN) return refuse(c, "a string longer than 16 MiB");
    *out = cf__sref_make(ix->arena_len, (uint32_t)n);
    ix->arena_len += n;
    return 0;
}

static uint64_t hash(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

/* The table of kept strings rebuilt with `cap` slots, holding those of
 * the old one that lie before arena offset `below` (open addressing
 * cannot blank slots).  0, or -1 when the new table cannot be had (the
 * old one is left as it was). */
static int rehash(cf__stac *ix, size_t cap, uint64_t below) {
    cf__sref *t = malloc(cap * sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < cap; i++) t[i] = CF__SREF_NONE;
    size_t kept = 0;
    for (size_t i = 0; i < ix->cap_intern; i++) {
        cf__sref r = ix->intern[i];
        if (cf__sref_none(r) || cf__sref_off(r) >= below) continue;
        size_t h = hash(cf__stac_str(ix, r), cf__sref_len(r)) & (cap - 1);
        while (!cf__sref_none(t[h])) h = (h + 1) & (cap - 1);
        t[h] = r;
        kept++;
    }
    free(ix->intern);
    ix->intern = t;
    ix->cap_intern = cap;
    ix->nintern = kept;
    return 0;
}

/* The text *out just added to the arena kept once however often it
 * comes (asset keys, media types, roles, CRSs, band fields: the same few
 * thousand strings in 100,000 items): dropped again, and *out pointed at
 * the earlier copy, when there is one. */
static int keep_once(ctx *c, cf__sref *out) {
    cf__stac *ix = c->ix;
    size_t mark = cf__sref_off(*out);
    uint32_t n = cf__sref_len(*out);
    if (n > 256) return 0;
    if (ix->nintern * 2 >= ix->cap_intern &&
        rehash(ix, ix->cap_intern ? ix->cap_intern * 2 : 1024, UINT64_MAX) < 0)
        return refuse(c, "out of memory");
    const char *p = ix->arena + mark;
    size_t h = hash(p, n) & (ix->cap_intern - 1);
    for (; !cf__sref_none(ix->intern[h]); h = (h + 1) & (ix->cap_intern - 1)) {
        cf__sref r = ix->intern[h];
        if (cf__sref_len(r) == n && memcmp(cf__stac_str(ix, r), p, n) == 0) {
            ix->arena_len = mark;
            *out = r;
            return 0;
        }
    }
    ix->intern[h] = *out;
    ix->nintern++;
    return 0;
}

static int put_once(ctx *c, const cf__jstr *s, cf__sref *out) {
    return put(c, s, out) < 0 ? -1 : keep_once(c, out);
}

/* Raw document bytes [a, b) into the arena (properties, geometry). */
static int put_raw(ctx *c, const char *a, const char *b, cf__sref *out) {
    cf__jstr s = {a, (size_t)(b - a), 0};
    if (memchr(a, 0, s.n)) return refuse(c, "a NUL byte");
    return put(c, &s, out);
}

static const cf__sref NONE = CF__SREF_NONE;

/* A scalar (or null) as jv; containers are refused (no field here takes
 * one where a scalar goes: the reference says what it wanted). */
static int scalar(ctx *c, jv *v) {
    v->k = cf__js_peek(&c->j);
    switch (v->k) {
    case CF__J_STR: return cf__js_str(&c->j, &v->s);
    case CF__J_NUM: return cf__js_num(&c->j, &v->n);
    case CF__J_TRUE:
    case CF__J_FALSE:
    case CF__J_NULL: return cf__js_lit(&c->j);
    default: return refuse(c, "an object or array where a value was expected");
    }
}

/* Whether v was in the document and not null (the reference's
 * `d.get(k) is not None`). */
static int given(const jv *v) { return v->k != CF__J_BAD && v->k != CF__J_NULL; }

/* A string of at most `chars` characters, or null (absent). */
static int str_ok(ctx *c, const jv *v, size_t chars) {
    if (!given(v)) return 0;
    if (v->k != CF__J_STR || cf__js_chars(&v->s) > chars)
        return refuse(c, "a string field of the wrong type or length");
    return 1;
}

static int num_ok(ctx *c, const jv *v, double *out) {
    if (!given(v)) return 0;
    if (v->k != CF__J_NUM || !isfinite(v->n.v)) return refuse(c, "a number field that is not a number");
    *out = v->n.v;
    return 1;
}

/* A list of numbers into out (at most `max`); their count, -1 refused. */
static int numbers(ctx *c, double *out, int max, int ints, int64_t *iout) {
    if (cf__js_arr_begin(&c->j) < 0) return -1;
    int n = 0, r;
    while ((r = cf__js_arr_next(&c->j)) == 1) {
        cf__jnum v;
        if (cf__js_peek(&c->j) != CF__J_NUM || n >= max) return refuse(c, "a list of numbers expected");
        if (cf__js_num(&c->j, &v) < 0) return -1;
        if (!isfinite(v.v) || (ints && !v.is_int)) return refuse(c, "a list of numbers expected");
        if (out) out[n] = v.v;
        if (iout) iout[n] = v.iv;
        n++;
    }
    return r < 0 ? -1 : n;
}

/* Bit of `key` in a table of known keys, or -1 (a key the reader ignores);
 * a known key seen twice is refused (Python's last-wins would need the
 * first value undone). */
#define NKEYS(tab) ((int)(sizeof tab / sizeof *tab))

static int known(ctx *c, const cf__jstr *key, const char *const *tab, int n, uint32_t *seen) {
    for (int i = 0; i < n; i++)
        if (cf__js_eq(key, tab[i])) {
            if (*seen & (1u << i)) return refuse(c, "a key given twice"), -2;
            *seen |= 1u << i;
            return i;
        }
    return -1;
}

/* Value of projection key k into pj: 0 proj:code, 1 proj:epsg, 2
 * proj:wkt2, 3 proj:projjson, 4 proj:transform, 5 proj:shape, 6
 * proj:bbox (the order of ASSET_KEYS' and PROP_KEYS' last seven). */
static int proj_field(ctx *c, int k, proj *pj) {
    if (k < 3) return scalar(c, k == 0 ? &pj->code : k == 1 ? &pj->epsg : &pj->wkt2);
    cf__jkind kind = cf__js_peek(&c->j);
    if (kind == CF__J_NULL) return cf__js_lit(&c->j);
    if (k == 3) {
        pj->projjson = 1;
        return cf__js_skip(&c->j);
    }
    if (kind != CF__J_ARR) return refuse(c, "a projection field that is not a list");
    if (k == 4) {
        double t[9];
        int n = numbers(c, t, 9, 0, NULL);
        if (n < 0) return -1;
        if (n != 6 && n != 9) return refuse(c, "proj:transform of neither 6 nor 9 numbers");
        if (n == 9 && (t[6] != 0.0 || t[7] != 0.0 || t[8] != 1.0))
            return refuse(c, "proj:transform's last row is not 0, 0, 1");
        memcpy(pj->t, t, sizeof pj->t);
        pj->has_t = 1;
    } else if (k == 5) {
        int64_t s[3];
        int n = numbers(c, NULL, 3, 1, s);
        if (n < 0) return -1;
        if (n != 2 || s[0] <= 0 || s[1] <= 0 || s[0] > c->lim->max_side || s[1] > c->lim->max_side)
            return refuse(c, "proj:shape is not two sizes in range");
        pj->s[0] = s[0], pj->s[1] = s[1];
        pj->has_s = 1;
    } else {
        double b[6];
        int n = numbers(c, b, 6, 0, NULL);
        if (n < 0) return -1;
        if (n != 4 && n != 6) return refuse(c, "proj:bbox of neither 4 nor 6 numbers");
        /* 3D: (west, south, low, east, north, high) */
        pj->b[0] = b[0], pj->b[1] = b[1], pj->b[2] = b[n == 6 ? 3 : 2], pj->b[3] = b[n == 6 ? 4 : 3];
        pj->has_b = 1;
    }
    return 0;
}

static int letter(char ch) { return (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'; }

/* [A-Za-z0-9_-], and '.' too with dot */
static int code_char(char ch, int dot) {
    return letter(ch) || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || (dot && ch == '.');
}

static int auth_code(const cf__jstr *s) {
    /* ^[A-Za-z][A-Za-z0-9_\-]{0,31}:[A-Za-z0-9_.\-]{1,32}$, unescaped */
    if (s->esc || s->n == 0 || s->n > 64) return 0; /* _str(..., 64) first */
    size_t i, n = s->n;
    const char *p = s->p;
    if (!letter(p[0])) return 0;
    for (i = 1; i < n && p[i] != ':'; i++)
        if (!code_char(p[i], 0) || i > 31) return 0;
    if (i >= n) return 0;
    size_t tail = n - i - 1;
    if (tail < 1 || tail > 32) return 0;
    for (i++; i < n; i++)
        if (!code_char(p[i], 1)) return 0;
    return 1;
}

/* The CRS text pj names, by stac.py's order (code, epsg, wkt2, projjson):
 * *out NONE when it names none. */
static int proj_crs(ctx *c, const proj *pj, cf__sref *out) {
    *out = NONE;
    if (given(&pj->code)) {
        if (pj->code.k != CF__J_STR || !auth_code(&pj->code.s)) return refuse(c, "proj:code is not AUTHORITY:CODE");
        return put_once(c, &pj->code.s, out);
    }
    if (given(&pj->epsg)) {
        if (pj->epsg.k != CF__J_NUM || !pj->epsg.n.is_int || pj->epsg.n.iv <= 0 || pj->epsg.n.iv >= 10000000)
            return refuse(c, "proj:epsg is not an EPSG code");
        char t[24];
        int n = snprintf(t, sizeof t, "EPSG:%lld", (long long)pj->epsg.n.iv);
        cf__jstr s = {t, (size_t)n, 0};
        return put_once(c, &s, out);
    }
    if (given(&pj->wkt2)) {
        if (str_ok(c, &pj->wkt2, 1 << 16) != 1) return -1;
        /* WKT holds quotes, so its JSON text is escaped: decoded first. */
        cf__sref r;
        if (put(c, &pj->wkt2.s, &r) < 0) return -1;
        const char *p = cf__stac_str(c->ix, r);
        size_t a = 0, n = cf__sref_len(r);
        /* .strip() of ASCII whitespace; Unicode spaces are the reference's */
        while (a < n && strchr(" \t\n\r\v\f\x1c\x1d\x1e\x1f", p[a]) && p[a]) a++;
        while (n > a && strchr(" \t\n\r\v\f\x1c\x1d\x1e\x1f", p[n - 1]) && p[n - 1]) n--;
        if (n == a || (unsigned char)p[a] >= 0x80 || (unsigned char)p[n - 1] >= 0x80)
            return refuse(c, "proj:wkt2 left to the reference");
        /* ^[A-Z][A-Z0-9_]*\s*\[ */
        size_t i = a;
        if (!(p[i] >= 'A' && p[i] <= 'Z')) return refuse(c, "proj:wkt2 is not WKT");
        for (i++; i < n && ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_'); i++) {}
        while (i < n && strchr(" \t\n\r\v\f", p[i]) && p[i]) i++;
        if (i >= n || p[i] != '[') return refuse(c, "proj:wkt2 is not WKT");
        /* The stripped text, moved to where the copy starts. */
        memmove((char *)p, p + a, n - a);
        c->ix->arena_len = cf__sref_off(r) + (n - a);
        *out = cf__sref_make(cf__sref_off(r), (uint32_t)(n - a));
        return keep_once(c, out);
    }
    if (pj->projjson) return refuse(c, "proj:projjson left to the reference");
    return 0;
}

/* ---- bands ---------------------------------------------------------- */

static const char *const BAND_KEYS[] = {"name",  "common_name",  "eo:common_name", "nodata",   "scale",
                                        "offset", "raster:scale", "raster:offset",  "data_type"};

static int band_list(ctx *c, blist *bl) {
    bl->present = 1;
    bl->n = 0;
    cf__jkind k = cf__js_peek(&c->j);
    if (k == CF__J_NULL) return cf__js_lit(&c->j);
    if (k != CF__J_ARR) return refuse(c, "a band list that is not a list");
    if (cf__js_arr_begin(&c->j) < 0) return -1;
    int r;
    while ((r = cf__js_arr_next(&c->j)) == 1) {
        if (bl->n >= c->lim->max_bands) return refuse(c, "more bands than max_bands");
        if (room(c, (void **)&bl->v, &bl->cap, bl->n + 1, sizeof *bl->v) < 0) return -1;
        bandv *b = &bl->v[bl->n++];
        memset(b, 0, sizeof *b);
        if (cf__js_peek(&c->j) != CF__J_OBJ) return refuse(c, "a band that is not an object");
        if (cf__js_obj_begin(&c->j) < 0) return -1;
        jv *slot[] = {&b->name,   &b->common,  &b->eo_common, &b->nodata, &b->scale,
                      &b->offset, &b->r_scale, &b->r_offset,  &b->dtype};
        uint32_t seen = 0;
        cf__jstr key;
        int q;
        while ((q = cf__js_obj_next(&c->j, &key)) == 1) {
            int f = known(c, &key, BAND_KEYS, NKEYS(BAND_KEYS), &seen);
            if (f == -2) return -1;
            if ((f >= 0 ? scalar(c, slot[f]) : cf__js_skip(&c->j)) < 0) return -1;
        }
        if (q < 0) return -1;
    }
    return r;
}

/* The first of a, b, c3 (each may be NULL) that is given. */
static const jv *first(const jv *a, const jv *b, const jv *c3) {
    if (a && given(a)) return a;
    if (b && given(b)) return b;
    if (c3 && given(c3)) return c3;
    return NULL;
}

/* stac.py's _bands: band i of eo:bands, raster:bands and bands merged,
 * with the asset's own nodata / raster:scale / raster:offset / data_type
 * last, into the index. */
static int merge_bands(ctx *c, const jv *a_nodata, const jv *a_scale, const jv *a_offset,
                       const jv *a_dtype, uint32_t *first_band, uint32_t *nbands) {
    cf__stac *ix = c->ix;
    *first_band = (uint32_t)ix->nbands;
    *nbands = 0;
    if (!c->bl[0].present && !c->bl[1].present && !c->bl[2].present) return 0;
    size_t n = c->bl[0].n;
    if (c->bl[1].n > n) n = c->bl[1].n;
    if (c->bl[2].n > n) n = c->bl[2].n;
    static const bandv empty;
    for (size_t i = 0; i < n; i++) {
        const bandv *e = i < c->bl[0].n ? &c->bl[0].v[i] : &empty;
        const bandv *r = i < c->bl[1].n ? &c->bl[1].v[i] : &empty;
        const bandv *b = i < c->bl[2].n ? &c->bl[2].v[i] : &empty;
        if (room(c, (void **)&ix->bands, &ix->cap_bands, ix->nbands + 1, sizeof *ix->bands) < 0) return -1;
        cf__stac_band *o = &ix->bands[ix->nbands];
        memset(o, 0, sizeof *o);
        o->name = o->common_name = o->data_type = NONE;
        const jv *v;
        if ((v = first(&b->name, &e->name, NULL))) {
            if (str_ok(c, v, 256) < 0 || put_once(c, &v->s, &o->name) < 0) return -1;
        }
        if ((v = first(&b->eo_common, &e->common, NULL))) {
            if (str_ok(c, v, 64) < 0 || put_once(c, &v->s, &o->common_name) < 0) return -1;
        }
        if ((v = first(&b->nodata, &r->nodata, a_nodata))) {
            if (v->k == CF__J_STR) {
                if (cf__js_eq(&v->s, "nan")) o->nodata = NAN;
                else if (cf__js_eq(&v->s, "inf")) o->nodata = INFINITY;
                else if (cf__js_eq(&v->s, "-inf")) o->nodata = -INFINITY;
                else return refuse(c, "a nodata that is not a number");
            } else if (num_ok(c, v, &o->nodata) < 0) {
                return -1;
            }
            o->has_nodata = 1;
        }
        if ((v = first(&b->r_scale, &r->scale, a_scale))) {
            if (num_ok(c, v, &o->scale) < 0) return -1;
            o->has_scale = 1;
        }
        if ((v = first(&b->r_offset, &r->offset, a_offset))) {
            if (num_ok(c, v, &o->offset) < 0) return -1;
            o->has_offset = 1;
        }
        if ((v = first(&b->dtype, &r->dtype, a_dtype))) {
            if (str_ok(c, v, 32) < 0 || put_once(c, &v->s, &o->data_type) < 0) return -1;
        }
        ix->nbands++;
        (*nbands)++;
    }
    return 0;
}

/* ---- assets and items ----------------------------------------------- */

static const char *const ASSET_KEYS[] = {
    "href",      "type",          "roles",         "eo:bands",  "raster:bands",   "bands",
    "nodata",    "raster:scale",  "raster:offset", "data_type", "proj:code",      "proj:epsg",
    "proj:wkt2", "proj:projjson", "proj:transform", "proj:shape", "proj:bbox"};

static int roles(ctx *c, asset_in *a) {
    cf__stac *ix = c->ix;
    if (cf__js_peek(&c->j) != CF__J_ARR) return refuse(c, "roles is not a list");
    if (cf__js_arr_begin(&c->j) < 0) return -1;
    size_t start = ix->arena_len;
    int r;
    while ((r = cf__js_arr_next(&c->j)) == 1) {
        cf__jstr s;
        if (cf__js_peek(&c->j) != CF__J_STR) return refuse(c, "a role that is not a string");
        if (cf__js_str(&c->j, &s) < 0) return -1;
        if (a->nroles >= 64) continue; /* the reference keeps 64 */
        cf__sref one; /* each role's text, then a NUL */
        if (put(c, &s, &one) < 0) return -1;
        if (room(c, (void **)&ix->arena, &ix->cap_arena, ix->arena_len + 1, 1) < 0) return -1;
        ix->arena[ix->arena_len++] = 0;
        a->nroles++;
    }
    if (r < 0) return -1;
    /* The roles as one text, kept once ("data\0", "data\0overview\0"...). */
    if (ix->arena_len - start > CF__SREF_MAX_LEN) return refuse(c, "roles longer than 16 MiB");
    a->roles = cf__sref_make(start, (uint32_t)(ix->arena_len - start));
    return keep_once(c, &a->roles);
}

static int asset(ctx *c, asset_in *a) {
    if (cf__js_peek(&c->j) != CF__J_OBJ) return refuse(c, "an asset that is not an object");
    if (cf__js_obj_begin(&c->j) < 0) return -1;
    jv href = {0}, nodata = {0}, scale = {0}, offset = {0}, dtype = {0};
    for (int i = 0; i < 3; i++) c->bl[i].present = 0, c->bl[i].n = 0;
    a->roles = NONE;
    uint32_t seen = 0;
    cf__jstr key;
    int r;
    while ((r = cf__js_obj_next(&c->j, &key)) == 1) {
        int f = known(c, &key, ASSET_KEYS, NKEYS(ASSET_KEYS), &seen), q;
        if (f == -2) return -1;
        switch (f) {
        case 0: q = scalar(c, &href); break;
        case 1: q = scalar(c, &a->type); break;
        case 2: q = roles(c, a); break;
        case 3:
        case 4:
        case 5: q = band_list(c, &c->bl[f - 3]); break;
        case 6: q = scalar(c, &nodata); break;
        case 7: q = scalar(c, &scale); break;
        case 8: q = scalar(c, &offset); break;
        case 9: q = scalar(c, &dtype); break;
        case -1: q = cf__js_skip(&c->j); break;
        default: q = proj_field(c, f - 10, &a->pj); break;
        }
        if (q < 0) return -1;
    }
    if (r < 0) return -1;
    if (href.k != CF__J_STR || href.s.n == 0 || cf__js_chars(&href.s) > 8192) return refuse(c, "an asset without a href");
    a->href = href.s;
    if (str_ok(c, &a->type, 256) < 0) return -1;
    return merge_bands(c, &nodata, &scale, &offset, &dtype, &a->first_band, &a->nbands);
}

static const char *const ITEM_KEYS[] = {"type", "id", "properties", "links", "assets", "geometry", "bbox", "collection"};
static const char *const PROP_KEYS[] = {"datetime",  "start_datetime", "end_datetime",  "eo:cloud_cover",
                                        "proj:code", "proj:epsg",      "proj:wkt2",     "proj:projjson",
                                        "proj:transform", "proj:shape", "proj:bbox"};

static int properties(ctx *c, cf__stac_item *it, proj *pj) {
    if (cf__js_peek(&c->j) != CF__J_OBJ) return refuse(c, "properties is not an object");
    const char *a = c->j.p;
    if (cf__js_obj_begin(&c->j) < 0) return -1;
    jv dt[3] = {{0}}, cc = {0};
    uint32_t seen = 0;
    cf__jstr key;
    int r;
    while ((r = cf__js_obj_next(&c->j, &key)) == 1) {
        int f = known(c, &key, PROP_KEYS, NKEYS(PROP_KEYS), &seen), q;
        if (f == -2) return -1;
        if (f < 0) q = cf__js_skip(&c->j);
        else if (f < 3) q = scalar(c, &dt[f]);
        else if (f == 3) q = scalar(c, &cc);
        else q = proj_field(c, f - 4, pj);
        if (q < 0) return -1;
    }
    if (r < 0) return -1;
    if (put_raw(c, a, c->j.p, &it->properties) < 0) return -1;
    int64_t t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = CF__NO_TIME;
        it->dt[i] = NONE;
        if (!given(&dt[i])) continue;
        if (dt[i].k != CF__J_STR || dt[i].s.esc || !cf__stac_rfc3339(dt[i].s.p, dt[i].s.n, &t[i])) return refuse(c, "a date-time left to the reference");
        if (put(c, &dt[i].s, &it->dt[i]) < 0) return -1;
    }
    it->when = t[0] != CF__NO_TIME ? t[0] : t[1];
    it->t0 = t[1] != CF__NO_TIME ? t[1] : t[0];
    it->t1 = t[2] != CF__NO_TIME ? t[2] : t[0];
    if (it->when == CF__NO_TIME) return refuse(c, "neither datetime nor start_datetime");
    it->cloud = NAN;
    if (num_ok(c, &cc, &it->cloud) < 0) return -1;
    return 0;
}

static int links(ctx *c, cf__jstr *self, int *has_self) {
    cf__jkind k = cf__js_peek(&c->j);
    if (k != CF__J_ARR) return refuse(c, "links is not a list");
    if (cf__js_arr_begin(&c->j) < 0) return -1;
    size_t i = 0;
    int r;
    for (; (r = cf__js_arr_next(&c->j)) == 1; i++) {
        if (cf__js_peek(&c->j) != CF__J_OBJ || i >= c->lim->max_links || *has_self) {
            if (cf__js_skip(&c->j) < 0) return -1;
            continue;
        }
        if (cf__js_obj_begin(&c->j) < 0) return -1;
        static const char *const LINK_KEYS[] = {"rel", "href"};
        jv v[2] = {{0}};
        uint32_t seen = 0;
        cf__jstr key;
        int q;
        while ((q = cf__js_obj_next(&c->j, &key)) == 1) {
            int f = known(c, &key, LINK_KEYS, NKEYS(LINK_KEYS), &seen);
            if (f == -2) return -1;
            if (f >= 0 && cf__js_peek(&c->j) == CF__J_STR) q = cf__js_str(&c->j, &v[f].s), v[f].k = CF__J_STR;
            else q = cf__js_skip(&c->j);
            if (q < 0) return -1;
        }
        if (q < 0) return -1;
        if (v[0].k == CF__J_STR && cf__js_eq(&v[0].s, "self") && v[1].k == CF__J_STR) {
            if (v[1].s.esc) return refuse(c, "an escaped self link left to the reference");
            if (cf__url_scheme_len_n(v[1].s.p, v[1].s.n) || (v[1].s.n && v[1].s.p[0] == '/')) {
                *self = v[1].s;
                *has_self = 1;
            }
        }
    }
    return r;
}

/* Ids of the item's assets seen so far: a key given twice is refused. */
static int dup_key(const ctx *c, size_t upto, const cf__jstr *k) {
    for (size_t i = 0; i < upto; i++)
        if (c->as[i].key.n == k->n && memcmp(c->as[i].key.p, k->p, k->n) == 0) return 1;
    return 0;
}

/* Finish asset a of an item of base `base` into the index. */
static int add_asset(ctx *c, const asset_in *a, const char *base, size_t bn, const proj *ipj,
                     cf__sref icrs, size_t first_grid) {
    cf__stac *ix = c->ix;
    if (room(c, (void **)&ix->assets, &ix->cap_assets, ix->nassets + 1, sizeof *ix->assets) < 0) return -1;
    cf__stac_asset *o = &ix->assets[ix->nassets];
    memset(o, 0, sizeof *o);
    /* The rule on the href's text (escapes decoded: PHP writes "\/"). */
    if (put_once(c, &a->key, &o->key) < 0 || put(c, &a->href, &o->href) < 0) return -1;
    const char *why = cf__stac_href_rule(cf__stac_str(ix, o->href), cf__sref_len(o->href), base, bn,
                                         &o->href_kind);
    if (why) return refuse(c, why);
    o->type = NONE;
    if (a->type.k == CF__J_STR && put_once(c, &a->type.s, &o->type) < 0) return -1;
    o->roles = a->roles;
    o->nroles = a->nroles;
    if (proj_crs(c, &a->pj, &o->crs) < 0) return -1;
    if (cf__sref_none(o->crs)) o->crs = icrs;
    const proj *t = a->pj.has_t ? &a->pj : ipj, *s = a->pj.has_s ? &a->pj : ipj, *b = a->pj.has_b ? &a->pj : ipj;
    cf__stac_grid g;
    memset(&g, 0, sizeof g);
    if ((g.has_transform = (uint8_t)t->has_t)) memcpy(g.transform, t->t, sizeof g.transform);
    if ((g.has_shape = (uint8_t)s->has_s)) memcpy(g.shape, s->s, sizeof g.shape);
    if ((g.has_proj_bbox = (uint8_t)b->has_b)) memcpy(g.proj_bbox, b->b, sizeof g.proj_bbox);
    o->grid = CF__NO_GRID;
    if (g.has_transform || g.has_shape || g.has_proj_bbox) {
        /* The item's assets mostly share one or two grids: look back at
         * the grids this item added. */
        size_t k = ix->ngrids;
        while (k > first_grid && memcmp(&ix->grids[k - 1], &g, sizeof g) != 0) k--;
        if (k > first_grid) {
            o->grid = (uint32_t)(k - 1);
        } else {
            if (ix->ngrids >= UINT32_MAX - 1) return refuse(c, "more grids than the index holds");
            if (room(c, (void **)&ix->grids, &ix->cap_grids, ix->ngrids + 1, sizeof *ix->grids) < 0) return -1;
            ix->grids[ix->ngrids] = g;
            o->grid = (uint32_t)ix->ngrids++;
        }
    }
    o->first_band = a->first_band;
    o->nbands = a->nbands;
    ix->nassets++;
    return 0;
}

/* One item object (the parser at its '{') into the index. */
static int item(ctx *c, int32_t feature) {
    cf__stac *ix = c->ix;
    if (ix->nitems >= c->lim->max_items) return refuse(c, "more items than max_items");
    if (ix->nitems >= UINT32_MAX - 1 || ix->ndocs >= UINT32_MAX) return refuse(c, "more items than the index holds");
    if (room(c, (void **)&ix->items, &ix->cap_items, ix->nitems + 1, sizeof *ix->items) < 0) return -1;
    cf__stac_item *it = &ix->items[ix->nitems];
    memset(it, 0, sizeof *it);
    it->id = it->collection = it->properties = it->geometry = it->base = NONE;
    it->doc = ix->ndocs;
    it->feature = feature;
    if (cf__js_peek(&c->j) != CF__J_OBJ) return refuse(c, "a feature that is not an object");
    if (cf__js_obj_begin(&c->j) < 0) return -1;
    jv type = {0}, id = {0}, col = {0};
    proj ipj;
    memset(&ipj, 0, sizeof ipj);
    cf__jstr self = {0};
    int has_self = 0, has_props = 0, has_assets = 0;
    c->nas = 0;
    uint32_t seen = 0;
    cf__jstr key;
    int r;
    while ((r = cf__js_obj_next(&c->j, &key)) == 1) {
        int f = known(c, &key, ITEM_KEYS, NKEYS(ITEM_KEYS), &seen), q = 0;
        if (f == -2) return -1;
        switch (f) {
        case 0: q = scalar(c, &type); break;
        case 1: q = scalar(c, &id); break;
        case 2: q = properties(c, it, &ipj), has_props = 1; break;
        case 3: q = links(c, &self, &has_self); break;
        case 4: {
            if (cf__js_peek(&c->j) != CF__J_OBJ) return refuse(c, "assets is not an object");
            if (cf__js_obj_begin(&c->j) < 0) return -1;
            cf__jstr ak;
            while ((q = cf__js_obj_next(&c->j, &ak)) == 1) {
                if (c->nas >= c->lim->max_assets) return refuse(c, "more assets than max_assets");
                if (ak.esc || dup_key(c, c->nas, &ak)) return refuse(c, "an asset key left to the reference");
                if (room(c, (void **)&c->as, &c->cap_as, c->nas + 1, sizeof *c->as) < 0) return -1;
                asset_in *a = &c->as[c->nas++];
                memset(a, 0, sizeof *a);
                a->key = ak;
                if (asset(c, a) < 0) return -1;
            }
            has_assets = 1;
            break;
        }
        case 5: {
            cf__jkind k = cf__js_peek(&c->j);
            if (k == CF__J_NULL) {
                q = cf__js_lit(&c->j);
            } else if (k == CF__J_OBJ) {
                const char *a = c->j.p;
                q = cf__js_skip(&c->j);
                if (q == 0) q = put_raw(c, a, c->j.p, &it->geometry);
            } else {
                return refuse(c, "geometry is not an object");
            }
            break;
        }
        case 6: {
            cf__jkind k = cf__js_peek(&c->j);
            if (k == CF__J_NULL) {
                q = cf__js_lit(&c->j);
            } else if (k == CF__J_ARR) {
                int n = numbers(c, it->bbox, 6, 0, NULL);
                if (n < 0) return -1;
                if (n != 4 && n != 6) return refuse(c, "bbox of neither 4 nor 6 numbers");
                it->nbbox = (uint8_t)n;
            } else {
                return refuse(c, "bbox is not a list");
            }
            break;
        }
        case 7:
            if (cf__js_peek(&c->j) == CF__J_STR) q = scalar(c, &col);
            else q = cf__js_skip(&c->j); /* not a string: no collection */
            break;
        default: q = cf__js_skip(&c->j); break;
        }
        if (q < 0) return -1;
    }
    if (r < 0) return -1;
    if (type.k != CF__J_STR || !cf__js_eq(&type.s, "Feature")) return refuse(c, "not a Feature");
    if (id.k != CF__J_STR || id.s.n == 0 || cf__js_chars(&id.s) > 1024) return refuse(c, "an item without a string id");
    if (!has_props) return refuse(c, "an item without properties");
    if (!has_assets) return refuse(c, "an item without assets");
    if (put(c, &id.s, &it->id) < 0) return -1;
    if (col.k == CF__J_STR && put_once(c, &col.s, &it->collection) < 0) return -1;
    const char *base = c->base;
    size_t bn = base ? strlen(base) : 0;
    if (!base && has_self) {
        if (put(c, &self, &it->base) < 0) return -1;
        base = self.p;
        bn = self.n;
    }
    cf__sref icrs;
    if (proj_crs(c, &ipj, &icrs) < 0) return -1;
    it->first_asset = (uint32_t)ix->nassets;
    it->nassets = (uint32_t)c->nas;
    size_t first_grid = ix->ngrids;
    for (size_t i = 0; i < c->nas; i++)
        if (add_asset(c, &c->as[i], base, bn, &ipj, icrs, first_grid) < 0) return -1;
    ix->nitems++;
    if (c->drop_every && (size_t)(c->j.p - c->dropped) >= c->drop_every) {
        /* Nothing before the parser is looked at again (the second pass
         * of an Item document re-reads it, faulting the pages back). */
        uintptr_t pg = 4096, end = (uintptr_t)c->j.p & ~(pg - 1);
        if (end > (uintptr_t)c->dropped) {
            madvise((void *)(uintptr_t)c->dropped, end - (uintptr_t)c->dropped, MADV_DONTNEED);
            c->dropped = (const char *)end;
        }
    }
    return 0;
}

/* Undo a document: its items, assets, bands, grids and strings, and the
 * strings it added to the table of kept ones. */
static void rollback(cf__stac *ix, size_t n_it, size_t n_as, size_t n_b, size_t n_g, size_t n_ar) {
    ix->nitems = n_it, ix->nassets = n_as, ix->nbands = n_b, ix->ngrids = n_g;
    if (ix->arena_len == n_ar) return;
    ix->arena_len = n_ar;
    if (ix->cap_intern && rehash(ix, ix->cap_intern, n_ar) < 0) {
        /* the table is only a saving: start it again */
        free(ix->intern);
        ix->intern = NULL, ix->cap_intern = ix->nintern = 0;
    }
}

static int at_end(ctx *c) {
    cf__js_peek(&c->j); /* skips whitespace */
    return c->j.why == NULL && c->j.p == c->j.end;
}

cf_status cf__stac_add_json(cf__stac *ix, const char *json, size_t len, const char *base,
                            const cf__stac_limits *lim, cf__stac_doc *kind, cf_error *err) {
    return cf__stac_add_mapped(ix, json, len, 0, base, lim, kind, err);
}

cf_status cf__stac_add_mapped(cf__stac *ix, const char *json, size_t len, size_t drop_every,
                              const char *base, const cf__stac_limits *lim, cf__stac_doc *kind,
                              cf_error *err) {
    size_t n_it = ix->nitems, n_as = ix->nassets, n_b = ix->nbands, n_g = ix->ngrids, n_ar = ix->arena_len;
    ctx c;
    memset(&c, 0, sizeof c);
    c.ix = ix;
    c.lim = lim;
    c.base = base;
    c.drop_every = drop_every;
    c.dropped = json; /* page-aligned: the start of a map */
    *kind = CF__STAC_OTHER;
    /* Deeper than Python's json can go is the reference's to refuse. */
    cf__js_init(&c.j, json, len, lim->max_nesting < 900 ? lim->max_nesting : 900);
    int ok = 0;
    if (len >= 3 && !memcmp(json, "\xEF\xBB\xBF", 3)) {
        refuse(&c, "a byte order mark");
    } else if (cf__js_peek(&c.j) != CF__J_OBJ) {
        refuse(&c, "not a JSON object");
    } else {
        /* One pass as a FeatureCollection (the type may come after the
         * features); a Feature is read again as an item (it is small). */
        jv type = {0};
        int nfeat = 0, feats_ok = 0, r;
        cf__jstr key;
        uint32_t seen = 0;
        static const char *const DOC_KEYS[] = {"type", "features"};
        if (cf__js_obj_begin(&c.j) == 0) {
            while ((r = cf__js_obj_next(&c.j, &key)) == 1) {
                int f = known(&c, &key, DOC_KEYS, NKEYS(DOC_KEYS), &seen), q;
                if (f == -2) break;
                if (f == 0) {
                    q = scalar(&c, &type);
                } else if (f == 1 && cf__js_peek(&c.j) == CF__J_ARR) {
                    feats_ok = 1;
                    q = cf__js_arr_begin(&c.j);
                    while (q == 0 && (q = cf__js_arr_next(&c.j)) == 1) q = item(&c, nfeat++);
                } else {
                    q = cf__js_skip(&c.j);
                }
                if (q < 0) break;
            }
        }
        int fc = type.k == CF__J_STR && cf__js_eq(&type.s, "FeatureCollection");
        int feature = type.k == CF__J_STR && cf__js_eq(&type.s, "Feature");
        if (!c.why && at_end(&c) && fc) {
            if (feats_ok) ok = 1;
            else refuse(&c, "a FeatureCollection without a features list");
        } else if (!c.why && at_end(&c) && feature) {
            rollback(ix, n_it, n_as, n_b, n_g, n_ar);
            cf__js_init(&c.j, json, len, c.j.max_depth);
            if (item(&c, -1) == 0 && at_end(&c)) ok = 1;
        } else if (!c.why && at_end(&c)) {
            rollback(ix, n_it, n_as, n_b, n_g, n_ar);
            free(c.as);
            for (int i = 0; i < 3; i++) free(c.bl[i].v);
            return CF_OK; /* a Catalog, Collection or another type */
        }
    }
    free(c.as);
    for (int i = 0; i < 3; i++) free(c.bl[i].v);
    if (!ok) {
        rollback(ix, n_it, n_as, n_b, n_g, n_ar);
        const char *why = c.why ? c.why : c.j.why ? c.j.why : "not read";
        if (!strcmp(why, "out of memory")) return cf__err(err, CF_E_NOMEM, "stac: out of memory");
        return cf__err(err, CF_E_UNSUPPORTED, "stac: %s (at byte %zu)", why,
                       (size_t)(c.j.p - c.j.start));
    }
    ix->ndocs++;
    cf__stac_drop_tree(ix);
    *kind = CF__STAC_ITEMS;
    return CF_OK;
}
