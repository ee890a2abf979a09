/*
 * tiff_geo.c - the GeoTIFF tags (GeoKeyDirectory, GeoDoubleParams,
 * GeoAsciiParams, the model tiepoints, scale and transformation),
 * GDAL_NODATA and GDAL_METADATA of an IFD, as raw values: lib/geo's
 * geokeys.c makes a CRS of the keys, meta.c GDAL's metadata of the text.
 */
#include "tiff_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* GeoTIFF and GDAL metadata (best effort: a malformed tag is ignored)  */
/* ------------------------------------------------------------------ */

static bool all_finite(const double *v, int n) {
    for (int k = 0; k < n; k++)
        if (!isfinite(v[k])) return false;
    return true;
}

cf_status cf__tiff_parse_geo(ctx *c, int i, cf__tiff *t) {
    double sc[3] = {0}, tp[6] = {0}, tr[16] = {0};
    uint64_t nsc = 0, ntp = 0, ntr = 0;
    cf_status st;
    if (cf__tiff_has(c, i, S_PSCALE) && cf__tiff_has(c, i, S_TIE)) {
        TRY(cf__tiff_soft(c, st = cf__tiff_tag_doubles(c, i, S_PSCALE, 3, sc, &nsc)));
        if (st) nsc = 0;
        TRY(cf__tiff_soft(c, st = cf__tiff_tag_doubles(c, i, S_TIE, 6, tp, &ntp)));
        if (st) ntp = 0;
    }
    if (cf__tiff_has(c, i, S_TRANS)) {
        TRY(cf__tiff_soft(c, st = cf__tiff_tag_doubles(c, i, S_TRANS, 16, tr, &ntr)));
        if (st) ntr = 0;
    }
    double *gt = t->geotransform;
    /* Like GDAL: a zero scale means no geotransform, and a negative ScaleY
     * is taken as north-up (GTIFF_HONOUR_NEGATIVE_SCALEY=NO). */
    if (nsc >= 2 && ntp >= 6 && sc[0] != 0 && sc[1] != 0) {
        gt[1] = sc[0];
        gt[2] = 0;
        gt[4] = 0;
        gt[5] = -fabs(sc[1]);
        gt[0] = tp[3] - tp[0] * gt[1];
        gt[3] = tp[4] - tp[1] * gt[5];
        t->has_geotransform = 1;
    } else if (ntr >= 16) {
        gt[0] = tr[3];
        gt[1] = tr[0];
        gt[2] = tr[1];
        gt[3] = tr[7];
        gt[4] = tr[4];
        gt[5] = tr[5];
        t->has_geotransform = 1;
    }

    if (cf__tiff_has(c, i, S_GEOKEYS)) {
        const ent *e = &c->ifds[i].e[S_GEOKEYS];
        uint64_t n = 0, cap = e->count < TIFF_MAX_GEOKEYS ? e->count
                                                          : TIFF_MAX_GEOKEYS;
        uint64_t *k = cf__malloc((size_t)cap * sizeof *k);
        if (!k) return cf__tiff_ferr(c, i, CF_E_NOMEM, "out of memory");
        st = cf__tiff_soft(c, cf__tiff_tag_uints(c, i, S_GEOKEYS, cap, k, &n));
        /* A directory whose key count runs past its data is ignored. */
        if (st == CF_OK && n >= 4 && k[3] <= (n - 4) / 4) {
            /* The raw keys for lib/geo, which builds the CRS from them. */
            t->geokeys = cf__malloc((size_t)n * sizeof *t->geokeys);
            if (!t->geokeys) {
                free(k);
                return cf__tiff_ferr(c, i, CF_E_NOMEM, "out of memory");
            }
            for (uint64_t j = 0; j < n; j++) t->geokeys[j] = (uint16_t)k[j];
            t->ngeokeys = (size_t)n;
            uint64_t pcs = 0, gcs = 0;
            for (uint64_t j = 0; j < k[3]; j++) {
                const uint64_t *key = k + 4 + 4 * j;
                if (key[1] != 0) continue; /* value stored elsewhere */
                if (key[0] == 1025) t->pixel_is_point = key[3] == 2;
                else if (key[0] == 3072) pcs = key[3];
                else if (key[0] == 2048) gcs = key[3];
            }
            if (pcs >= 1 && pcs < 32767) t->epsg = (int)pcs;
            else if (pcs == 0 && gcs >= 1 && gcs < 32767) t->epsg = (int)gcs;
        }
        free(k);
        TRY(st);
    }
    if (t->geokeys && cf__tiff_has(c, i, S_GEODBL)) {
        uint64_t cnt = c->ifds[i].e[S_GEODBL].count, n = 0;
        if (cnt > TIFF_MAX_GEODOUBLES) cnt = TIFF_MAX_GEODOUBLES;
        t->geodoubles = cf__malloc((size_t)cnt * sizeof *t->geodoubles);
        if (!t->geodoubles) return cf__tiff_ferr(c, i, CF_E_NOMEM, "out of memory");
        TRY(cf__tiff_soft(c, st = cf__tiff_tag_doubles(c, i, S_GEODBL, cnt, t->geodoubles, &n)));
        t->ngeodoubles = st ? 0 : (size_t)n;
    }
    if (t->geokeys && cf__tiff_has(c, i, S_GEOASCII)) {
        size_t len = 0;
        TRY(cf__tiff_soft(c, st = cf__tiff_tag_bytes(c, i, S_GEOASCII, TIFF_MAX_GEOASCII, &t->geoascii, &len)));
        t->ngeoascii = st ? 0 : len;
    }
    /* GDAL's default (GTIFF_POINT_GEO_IGNORE=FALSE): PixelIsPoint moves the
     * origin from the pixel centre to its corner. */
    if (t->has_geotransform && t->pixel_is_point) {
        gt[0] -= gt[1] * 0.5 + gt[2] * 0.5;
        gt[3] -= gt[4] * 0.5 + gt[5] * 0.5;
    }
    if (t->has_geotransform && !all_finite(gt, 6)) {
        t->has_geotransform = 0;
        memset(gt, 0, 6 * sizeof *gt);
    }
    return CF_OK;
}

cf_status cf__tiff_parse_nodata(ctx *c, int i, cf__tiff *t) {
    if (!cf__tiff_has(c, i, S_NODATA)) return CF_OK;
    char *s = NULL;
    cf_status st = cf__tiff_soft(c, cf__tiff_tag_text(c, i, S_NODATA, &s));
    if (st != CF_OK || !s) return st;
    const char *q = s;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    char *end;
    double v = strtod(q, &end);
    if (end != q) {
        t->has_nodata = 1;
        t->nodata = v;
    }
    free(s);
    return CF_OK;
}

/* GDAL's TIFFTAG_* metadata items from the TIFF text tags. */
static const struct {
    int slot;
    const char *key;
} text_items[] = {
    {S_DOCNAME, "TIFFTAG_DOCUMENTNAME"},
    {S_DESCRIPTION, "TIFFTAG_IMAGEDESCRIPTION"},
    {S_SOFTWARE, "TIFFTAG_SOFTWARE"},
    {S_DATETIME, "TIFFTAG_DATETIME"},
    {S_ARTIST, "TIFFTAG_ARTIST"},
    {S_HOSTCOMPUTER, "TIFFTAG_HOSTCOMPUTER"},
    {S_COPYRIGHT, "TIFFTAG_COPYRIGHT"},
};

/* Metadata of IFD i as GDAL gives it: the TIFF text tags, the raster
 * type, then GDAL_METADATA (whose band scale/offset go to t->scale and
 * t->offset).  Malformed tags are skipped, never an error. */
cf_status cf__tiff_parse_meta(ctx *c, int i, cf__tiff *t, uint16_t spp) {
    t->meta = cf__meta_new(spp);
    if (!t->meta) return cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    cf_status st = CF_OK;
    for (size_t k = 0; st == CF_OK && k < sizeof text_items / sizeof *text_items;
         k++) {
        char *s = NULL;
        if (!cf__tiff_has(c, i, text_items[k].slot)) continue;
        st = cf__tiff_soft(c, cf__tiff_tag_text(c, i, text_items[k].slot, &s));
        if (st == CF_OK && s && cf__meta_set(t->meta, 0, "", text_items[k].key, s))
            st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
        free(s);
    }
    /* Resolutions are floats in libtiff, printed as GDAL prints them. */
    static const struct {
        int slot;
        const char *key;
    } res[] = {{S_XRES, "TIFFTAG_XRESOLUTION"}, {S_YRES, "TIFFTAG_YRESOLUTION"}};
    for (int k = 0; st == CF_OK && k < 2; k++) {
        double d;
        uint64_t n = 0;
        if (!cf__tiff_has(c, i, res[k].slot)) continue;
        cf_status s2 = cf__tiff_tag_doubles(c, i, res[k].slot, 1, &d, &n);
        st = cf__tiff_soft(c, s2);
        if (st || s2 || n != 1) continue;
        char buf[64];
        snprintf(buf, sizeof buf, "%.8g", (double)(float)d);
        if (cf__meta_set(t->meta, 0, "", res[k].key, buf))
            st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    }
    if (st == CF_OK && cf__tiff_has(c, i, S_RESUNIT)) {
        uint64_t u = 0;
        cf_status s2 = cf__tiff_tag_u1(c, i, S_RESUNIT, 0, &u);
        st = cf__tiff_soft(c, s2);
        if (st == CF_OK && s2 == CF_OK && u <= 0xffff) {
            char buf[48];
            snprintf(buf, sizeof buf, "%u%s", (unsigned)u,
                     u == 1 ? " (unitless)" : u == 2 ? " (pixels/inch)"
                     : u == 3 ? " (pixels/cm)" : "");
            if (cf__meta_set(t->meta, 0, "", "TIFFTAG_RESOLUTIONUNIT", buf))
                st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
        }
    }
    if (st == CF_OK && cf__tiff_has(c, i, S_GEOKEYS) &&
        cf__meta_set(t->meta, 0, "", "AREA_OR_POINT",
                     t->pixel_is_point ? "Point" : "Area"))
        st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    if (st == CF_OK && cf__tiff_has(c, i, S_GDALMD)) {
        char *s = NULL;
        st = cf__tiff_soft(c, cf__tiff_tag_text(c, i, S_GDALMD, &s));
        if (st == CF_OK && s && cf__meta_gdal(t->meta, s, t->scale, t->offset))
            st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
        free(s);
    }
    return st;
}
