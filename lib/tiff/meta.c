/*
 * meta.c - an image's metadata as GDAL presents it: "KEY=VALUE" items by
 * domain for the dataset and for each band, band descriptions and units.
 *
 * It comes from the TIFF text tags (TIFFTAG_DATETIME and the others, set
 * by tiff.c through cf__meta_set) and from GDAL_METADATA, the XML that
 * GDAL writes:
 *
 *   <GDALMetadata>
 *     <Item name="KEY" [domain="D"] [sample="N"] [role="R"]>value</Item>
 *   </GDALMetadata>
 *
 * read the way GDAL reads it: an item with a sample attribute belongs to
 * band N+1 (ignored when there is no such band), one without to the
 * dataset; a band item's role "scale", "offset", "unittype" or
 * "description" sets that property instead of a metadata item.  Values
 * are unescaped twice, as GDAL does (it escapes them once itself before
 * its XML writer escapes them again).
 *
 * The XML comes from the file: the text is capped by the caller
 * (TIFF_MAX_TEXT), and every item copied out of it is bounded by it.
 */
#include "tiff.h"

#include <stdio.h>
#include <stdlib.h>

struct cf__tiff_mdomain {
    char *name;          /* "" for the default domain */
    char **items;        /* "KEY=VALUE", NULL-terminated */
    int n, cap;
};

typedef struct mset {    /* the dataset's, or one band's */
    struct cf__tiff_mdomain *dom;
    int ndom;
    char **names;        /* domain names, NULL-terminated (for listing) */
    char *description;
    char *unit;
} mset;

struct cf__tiff_meta {
    int nbands;
    mset *sets;          /* [0] the dataset, [1..nbands] the bands */
};

cf__tiff_meta *cf__meta_new(int nbands) {
    if (nbands < 0 || nbands > CF_MAX_BANDS) return NULL;
    cf__tiff_meta *m = cf__calloc(1, sizeof *m);
    if (!m) return NULL;
    m->sets = cf__calloc((size_t)nbands + 1, sizeof *m->sets);
    if (!m->sets) {
        free(m);
        return NULL;
    }
    m->nbands = nbands;
    return m;
}

void cf__tiff_meta_free(cf__tiff_meta *m) {
    if (!m) return;
    for (int b = 0; b <= m->nbands; b++) {
        mset *s = &m->sets[b];
        for (int d = 0; d < s->ndom; d++) {
            for (int k = 0; k < s->dom[d].n; k++) free(s->dom[d].items[k]);
            free(s->dom[d].items);
            free(s->dom[d].name);
        }
        free(s->dom);
        free(s->names);
        free(s->description);
        free(s->unit);
    }
    free(m->sets);
    free(m);
}

static mset *set_of(const cf__tiff_meta *m, int band) {
    return m && band >= 0 && band <= m->nbands ? &m->sets[band] : NULL;
}

static struct cf__tiff_mdomain *find_domain(const mset *s, const char *name) {
    for (int d = 0; d < s->ndom; d++)
        if (!strcmp(s->dom[d].name, name)) return &s->dom[d];
    return NULL;
}

static cf_status add_domain(mset *s, const char *name,
                            struct cf__tiff_mdomain **out) {
    struct cf__tiff_mdomain *nd =
        cf__realloc(s->dom, (size_t)(s->ndom + 1) * sizeof *nd);
    if (!nd) return CF_E_NOMEM;
    s->dom = nd;
    char **nn = cf__realloc(s->names, (size_t)(s->ndom + 2) * sizeof *nn);
    if (!nn) return CF_E_NOMEM;
    s->names = nn;
    struct cf__tiff_mdomain *d = &s->dom[s->ndom];
    memset(d, 0, sizeof *d);
    d->name = cf__strdup(name);
    if (!d->name) return CF_E_NOMEM;
    /* names point into dom[], which may move: rebuilt each time. */
    s->ndom++;
    for (int k = 0; k < s->ndom; k++) s->names[k] = s->dom[k].name;
    s->names[s->ndom] = NULL;
    *out = d;
    return CF_OK;
}

cf_status cf__meta_set(cf__tiff_meta *m, int band, const char *domain,
                       const char *key, const char *value) {
    mset *s = set_of(m, band);
    if (!s || !key || !*key || !value) return CF_OK; /* nothing to keep */
    if (!domain) domain = "";
    struct cf__tiff_mdomain *d = find_domain(s, domain);
    if (!d && add_domain(s, domain, &d)) return CF_E_NOMEM;
    size_t kl = strlen(key), vl = strlen(value);
    char *item = cf__malloc(kl + vl + 2);
    if (!item) return CF_E_NOMEM;
    memcpy(item, key, kl);
    item[kl] = '=';
    memcpy(item + kl + 1, value, vl + 1);
    for (int k = 0; k < d->n; k++) /* a key set again replaces its value */
        if (!strncmp(d->items[k], key, kl) && d->items[k][kl] == '=') {
            free(d->items[k]);
            d->items[k] = item;
            return CF_OK;
        }
    if (d->n + 2 > d->cap) {
        int nc = d->cap ? d->cap * 2 : 8;
        char **ni = cf__realloc(d->items, (size_t)nc * sizeof *ni);
        if (!ni) {
            free(item);
            return CF_E_NOMEM;
        }
        d->items = ni;
        d->cap = nc;
    }
    d->items[d->n++] = item;
    d->items[d->n] = NULL;
    return CF_OK;
}

const char *const *cf__tiff_meta_items(const cf__tiff_meta *m, int band,
                                      const char *domain) {
    const mset *s = set_of(m, band);
    if (!s) return NULL;
    const struct cf__tiff_mdomain *d = find_domain(s, domain ? domain : "");
    return d && d->n ? (const char *const *)d->items : NULL;
}

const char *const *cf__tiff_meta_domains(const cf__tiff_meta *m, int band) {
    const mset *s = set_of(m, band);
    return s && s->ndom ? (const char *const *)s->names : NULL;
}

const char *cf__tiff_meta_description(const cf__tiff_meta *m, int band) {
    const mset *s = set_of(m, band);
    return s && s->description ? s->description : "";
}

const char *cf__tiff_meta_unit(const cf__tiff_meta *m, int band) {
    const mset *s = set_of(m, band);
    return s && s->unit ? s->unit : "";
}

/* ------------------------------------------------------------ XML */

/* Append the UTF-8 form of code point u to out (room checked by caller:
 * at most 4 bytes, never more than the entity it replaces). */
static size_t put_utf8(char *out, unsigned long u) {
    if (u < 0x80) {
        out[0] = (char)u;
        return 1;
    }
    if (u < 0x800) {
        out[0] = (char)(0xC0 | (u >> 6));
        out[1] = (char)(0x80 | (u & 0x3F));
        return 2;
    }
    if (u < 0x10000) {
        out[0] = (char)(0xE0 | (u >> 12));
        out[1] = (char)(0x80 | ((u >> 6) & 0x3F));
        out[2] = (char)(0x80 | (u & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (u >> 18));
    out[1] = (char)(0x80 | ((u >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((u >> 6) & 0x3F));
    out[3] = (char)(0x80 | (u & 0x3F));
    return 4;
}

/* Decode XML entities of s[0..n) into a new string (never longer than n:
 * every entity is longer than what it stands for); NULL on no memory. */
static char *unescape(const char *s, size_t n) {
    char *out = cf__malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '&') {
            out[o++] = s[i++];
            continue;
        }
        static const struct {
            const char *ent;
            char c;
        } named[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'},
                     {"&quot;", '"'}, {"&apos;", '\''}};
        size_t k, el = 0;
        for (k = 0; k < sizeof named / sizeof named[0]; k++) {
            el = strlen(named[k].ent);
            if (el <= n - i && !memcmp(s + i, named[k].ent, el)) break;
        }
        if (k < sizeof named / sizeof named[0]) {
            out[o++] = named[k].c;
            i += el;
            continue;
        }
        /* &#NNN; and &#xHH; (at most 8 digits) */
        if (i + 3 < n && s[i + 1] == '#') {
            int hex = s[i + 2] == 'x' || s[i + 2] == 'X';
            size_t j = i + 2 + (size_t)hex;
            unsigned long u = 0;
            size_t nd = 0;
            for (; j < n && nd < 8; j++, nd++) {
                char ch = s[j];
                int v = ch >= '0' && ch <= '9'                 ? ch - '0'
                        : hex && ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                        : hex && ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                          : -1;
                if (v < 0) break;
                u = u * (hex ? 16 : 10) + (unsigned long)v;
            }
            if (nd && j < n && s[j] == ';' && u > 0 && u <= 0x10FFFF &&
                j + 1 - i >= 4) {
                o += put_utf8(out + o, u);
                i = j + 1;
                continue;
            }
        }
        out[o++] = s[i++]; /* a lone '&' stays */
    }
    out[o] = 0;
    return out;
}

/* Both unescapes GDAL applies (the XML parser's, then its own). */
static char *unescape2(const char *s, size_t n) {
    char *once = unescape(s, n);
    if (!once) return NULL;
    char *twice = unescape(once, strlen(once));
    free(once);
    return twice;
}

/* The value of attribute `key` in the start tag [a, e), unescaped; NULL
 * (and *nomem 0) when absent. */
static char *attr(const char *a, const char *e, const char *key, int *nomem) {
    size_t kl = strlen(key);
    for (const char *q = a; q + kl + 2 < e; q++) {
        bool start = q == a || q[-1] == ' ' || q[-1] == '\t' ||
                     q[-1] == '\n' || q[-1] == '\r';
        if (!start || memcmp(q, key, kl)) continue;
        const char *v = q + kl;
        while (v < e && (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r'))
            v++;
        if (v >= e || *v != '=') continue;
        v++;
        while (v < e && (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r'))
            v++;
        if (v >= e || (*v != '"' && *v != '\'')) continue;
        char quote = *v++;
        const char *ve = v;
        while (ve < e && *ve != quote) ve++;
        if (ve >= e) return NULL;
        char *r = unescape(v, (size_t)(ve - v));
        if (!r) *nomem = 1;
        return r;
    }
    return NULL;
}

/* C's strtod with GDAL's CPLAtofM tolerance: the number at the start,
 * 0 when there is none. */
static double atof_prefix(const char *s) {
    char *end;
    double v = strtod(s, &end);
    return end == s ? 0 : v;
}

static cf_status set_string(char **dst, const char *v) {
    char *c = cf__strdup(v);
    if (!c) return CF_E_NOMEM;
    free(*dst);
    *dst = c;
    return CF_OK;
}

/* One <Item>: its start tag is [a, gt], its text [gt+1, close). */
static cf_status apply_item(cf__tiff_meta *m, const char *a, const char *gt,
                            const char *text, size_t tlen, double *scale,
                            double *offset) {
    int nomem = 0;
    char *name = attr(a, gt, "name", &nomem);
    char *domain = attr(a, gt, "domain", &nomem);
    char *sample = attr(a, gt, "sample", &nomem);
    char *role = attr(a, gt, "role", &nomem);
    char *value = nomem ? NULL : unescape2(text, tlen);
    cf_status st = nomem || !value ? CF_E_NOMEM : CF_OK;
    long band = 0;
    if (sample) {
        char *end;
        long v = strtol(sample, &end, 10); /* atoi, as GDAL */
        band = end == sample || v < -1 || v > 65535 ? -1 : v + 1;
    }
    if (st == CF_OK && name && band >= 0 && band <= m->nbands) {
        mset *s = &m->sets[band];
        const char *r = role ? role : "";
        if (band > 0 && !strcmp(r, "scale")) {
            scale[band - 1] = atof_prefix(value);
        } else if (band > 0 && !strcmp(r, "offset")) {
            offset[band - 1] = atof_prefix(value);
        } else if (band > 0 && !strcmp(r, "unittype")) {
            st = set_string(&s->unit, value);
        } else if (band > 0 && !strcmp(r, "description")) {
            st = set_string(&s->description, value);
        } else if (band > 0 && !strcmp(r, "colorinterp")) {
            /* a band property cogfeed does not expose */
        } else {
            st = cf__meta_set(m, (int)band, domain, name, value);
        }
    }
    free(name);
    free(domain);
    free(sample);
    free(role);
    free(value);
    return st;
}

cf_status cf__meta_gdal(cf__tiff_meta *m, const char *xml, double *scale,
                        double *offset) {
    const char *s = strstr(xml, "<GDALMetadata");
    if (!s) return CF_OK; /* GDAL reads only this root element */
    while ((s = strstr(s, "<Item")) != NULL) {
        const char *a = s + 5;
        if (*a != ' ' && *a != '\t' && *a != '\n' && *a != '\r' && *a != '>' &&
            *a != '/') {
            s = a;
            continue;
        }
        const char *gt = strchr(a, '>');
        if (!gt) break;
        cf_status st = CF_OK;
        if (gt > a && gt[-1] == '/') { /* <Item name="x"/>: no value, */
            s = gt + 1;                 /* which GDAL skips */
        } else {
            const char *close = strstr(gt, "</Item>");
            if (!close) break;
            if (close > gt + 1) /* an empty one too */
                st = apply_item(m, a, gt, gt + 1, (size_t)(close - gt - 1),
                                scale, offset);
            s = close + 7;
        }
        CF__TRY(st);
    }
    return CF_OK;
}
