/*
 * wkb.c - the rings of a Polygon or MultiPolygon in Well-Known Binary, as
 * GDAL/OGR, pyogrio, shapely and PostGIS write it (geo.h).
 *
 * A vector file may come from anyone: every count is checked against the
 * bytes left before anything is allocated, nesting is one level
 * (MultiPolygon of Polygons), and the vertices kept are bounded by the
 * caller's budget.  Both byte orders; ISO Z / M / ZM types (1003, 2003,
 * 3003 ...) and EWKB's flag bits (Z, M, SRID) are read, the extra
 * ordinates skipped.
 */
#include "geo_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct wkb_in {
    const uint8_t *p;
    size_t left;
} wkb_in;

static int take_u32(wkb_in *in, int le, uint32_t *v) {
    if (in->left < 4) return 0;
    *v = cf__rd32(in->p, !le);
    in->p += 4;
    in->left -= 4;
    return 1;
}

static double get_f64(const uint8_t *b, int le) {
    uint64_t u = cf__rd64(b, !le);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* Byte order and type of the geometry at in: the base type (1..7),
 * ordinates per vertex (2..4). */
static int header(wkb_in *in, int *le, uint32_t *base, uint32_t *dims) {
    if (in->left < 1 || in->p[0] > 1) return 0;
    *le = in->p[0] == 1;
    in->p++;
    in->left--;
    uint32_t t;
    if (!take_u32(in, *le, &t)) return 0;
    uint32_t d = 2;
    if (t & 0x80000000u) d++; /* EWKB Z */
    if (t & 0x40000000u) d++; /* EWKB M */
    if (t & 0x20000000u) {    /* EWKB SRID */
        uint32_t srid;
        if (!take_u32(in, *le, &srid)) return 0;
    }
    t &= 0x0fffffffu;
    if (t >= 1000 && t < 4000) {
        d = t / 1000 == 3 ? 4 : 3;
        t %= 1000;
    }
    *base = t;
    *dims = d;
    return 1;
}

static cf_status polygon(wkb_in *in, int le, uint32_t dims, cf__shapes *s, const char *name,
                         cf_error *err) {
    uint32_t nrings;
    if (!take_u32(in, le, &nrings))
        return cf__err(err, CF_E_FORMAT, "%s: WKB polygon cut short", name);
    /* a ring takes at least its 4-byte count */
    if (nrings > in->left / 4)
        return cf__err(err, CF_E_FORMAT, "%s: WKB polygon claims %u rings in %zu bytes", name,
                       nrings, in->left);
    if (!cf__grow((void **)&s->poly_rings, &s->cap_polys, s->npolys + 1, sizeof *s->poly_rings, 64))
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
    s->poly_rings[s->npolys++] = nrings;
    for (uint32_t r = 0; r < nrings; r++) {
        uint32_t npts;
        if (!take_u32(in, le, &npts))
            return cf__err(err, CF_E_FORMAT, "%s: WKB ring %u cut short", name, r);
        const size_t vb = (size_t)dims * 8;
        if (npts > in->left / vb)
            return cf__err(err, CF_E_FORMAT, "%s: WKB ring %u claims %u vertices in %zu bytes",
                           name, r, npts, in->left);
        if (s->nxy + npts > s->max_xy)
            return cf__err(err, CF_E_LIMIT,
                           "%s: more than %zu vertices in all (vector labels' budget)", name,
                           s->max_xy);
        if (!cf__grow((void **)&s->x, &s->cap_xy, s->nxy + npts, sizeof *s->x, 64) ||
            !cf__grow((void **)&s->y, &s->cap_y, s->nxy + npts, sizeof *s->y, 64) ||
            !cf__grow((void **)&s->ring_len, &s->cap_rings, s->nrings + 1, sizeof *s->ring_len, 64))
            return cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
        for (uint32_t k = 0; k < npts; k++) {
            s->x[s->nxy + k] = get_f64(in->p, le);
            s->y[s->nxy + k] = get_f64(in->p + 8, le);
            in->p += vb;
            in->left -= vb;
        }
        s->nxy += npts;
        s->ring_len[s->nrings++] = npts;
    }
    return CF_OK;
}

cf_status cf__wkb_polygons(const uint8_t *wkb, size_t len, cf__shapes *s, const char *name,
                           cf_error *err) {
    wkb_in in = {wkb, len};
    int le;
    uint32_t base, dims;
    if (!wkb || !header(&in, &le, &base, &dims))
        return cf__err(err, CF_E_FORMAT, "%s: not WKB (bad byte order or cut short)", name);
    if (base == 3) return polygon(&in, le, dims, s, name, err);
    if (base != 6)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "%s: WKB geometry type %u; labels are Polygon or MultiPolygon", name,
                       base);
    uint32_t nparts;
    if (!take_u32(&in, le, &nparts))
        return cf__err(err, CF_E_FORMAT, "%s: WKB multipolygon cut short", name);
    if (nparts > in.left / 9)
        return cf__err(err, CF_E_FORMAT, "%s: WKB multipolygon claims %u parts in %zu bytes",
                       name, nparts, in.left);
    for (uint32_t k = 0; k < nparts; k++) {
        int ple;
        uint32_t pbase, pdims;
        if (!header(&in, &ple, &pbase, &pdims))
            return cf__err(err, CF_E_FORMAT, "%s: WKB part %u: bad header", name, k);
        if (pbase != 3)
            return cf__err(err, CF_E_FORMAT, "%s: WKB part %u of a multipolygon is type %u",
                           name, k, pbase);
        CF__TRY(polygon(&in, ple, pdims, s, name, err));
    }
    return CF_OK;
}
