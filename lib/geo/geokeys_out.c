/*
 * geokeys_out.c - a CRS without an EPSG code as GeoKeys, the way GDAL's
 * GTiff driver writes one (gt_wkt_srs.cpp, GTIFSetFromOGISDefnEx): a
 * user-defined projected CRS (ProjectedCSTypeGeoKey 32767) with the
 * projection method (ProjCoordTransGeoKey) and its parameters in the keys
 * libgeotiff reads them from, the base geographic CRS by its EPSG code or,
 * without one, its ellipsoid and prime meridian; or a user-defined
 * geographic CRS.  geokeys.c reads them back, as GDAL does.
 *
 * Methods: those of the table below (the projections EO products use
 * that have no EPSG CRS: MODIS sinusoidal, custom transverse Mercator,
 * Lambert, Albers, azimuthal and polar grids ...); any other is refused
 * by name rather than written as something else.
 */
#include "geo_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

enum {
    K_MODEL = 1024, K_RASTER = 1025, K_CITATION = 1026,
    K_GCS = 2048, K_GEOG_CITATION = 2049, K_DATUM = 2050, K_PM = 2051,
    K_ANGULAR = 2054, K_ELLPS = 2056, K_SEMI_MAJOR = 2057, K_SEMI_MINOR = 2058,
    K_INV_FLAT = 2059, K_PM_LONG = 2061,
    K_PCS = 3072, K_PCS_CITATION = 3073, K_PROJECTION = 3074, K_CT = 3075,
    K_LINEAR = 3076, USER = 32767
};

/* Where a method's parameters go: EPSG parameter code -> GeoKey. */
typedef struct { int param, key; } pmap;
typedef struct {
    int epsg;            /* EPSG method code (0: matched by name) */
    const char *name;    /* PROJ's method name, for methods without one */
    int ct;              /* ProjCoordTransGeoKey */
    pmap p[7];
} method;

/* EPSG parameter codes */
#define LAT0 8801
#define LON0 8802
#define K0 8805
#define FE 8806
#define FN 8807
#define LATF 8821
#define LONF 8822
#define SP1 8823
#define SP2 8824
#define EF 8826
#define NF 8827
#define LATSP 8832
#define LONO 8833

/* GeoKeys of the parameters (libgeotiff's names in comments) */
#define NAT_LAT 3081  /* ProjNatOriginLat */
#define NAT_LON 3080  /* ProjNatOriginLong */
#define FO_LAT 3085   /* ProjFalseOriginLat */
#define FO_LON 3084   /* ProjFalseOriginLong */
#define FO_E 3086
#define FO_N 3087
#define STD1 3078
#define STD2 3079
#define C_LAT 3089    /* ProjCenterLat */
#define C_LON 3088    /* ProjCenterLong */
#define KFE 3082      /* ProjFalseEasting */
#define KFN 3083
#define SCALE 3092    /* ProjScaleAtNatOrigin */
#define POLE_LON 3095 /* ProjStraightVertPoleLong */

static const method METHODS[] = {
    {9807, NULL, 1, {{LAT0, NAT_LAT}, {LON0, NAT_LON}, {K0, SCALE}, {FE, KFE}, {FN, KFN}}},
    {9801, NULL, 9, {{LAT0, NAT_LAT}, {LON0, NAT_LON}, {K0, SCALE}, {FE, KFE}, {FN, KFN}}},
    {9802, NULL, 8, {{LATF, FO_LAT}, {LONF, FO_LON}, {SP1, STD1}, {SP2, STD2}, {EF, FO_E},
                     {NF, FO_N}}},
    {9822, NULL, 11, {{LATF, FO_LAT}, {LONF, FO_LON}, {SP1, STD1}, {SP2, STD2}, {EF, FO_E},
                      {NF, FO_N}}},
    {9820, NULL, 10, {{LAT0, C_LAT}, {LON0, C_LON}, {FE, KFE}, {FN, KFN}}},
    {9810, NULL, 15, {{LAT0, NAT_LAT}, {LON0, POLE_LON}, {K0, SCALE}, {FE, KFE}, {FN, KFN}}},
    /* variant B: the standard parallel as the origin's latitude, scale 1
     * (geokeys.c, like GDAL, reads that back as variant B) */
    {9829, NULL, 15, {{LATSP, NAT_LAT}, {LONO, POLE_LON}, {FE, KFE}, {FN, KFN}}},
    {9804, NULL, 7, {{LAT0, NAT_LAT}, {LON0, NAT_LON}, {K0, SCALE}, {FE, KFE}, {FN, KFN}}},
    {9805, NULL, 7, {{SP1, STD1}, {LON0, NAT_LON}, {FE, KFE}, {FN, KFN}}},
    {9809, NULL, 16, {{LAT0, NAT_LAT}, {LON0, NAT_LON}, {K0, SCALE}, {FE, KFE}, {FN, KFN}}},
    {1028, NULL, 17, {{SP1, STD1}, {LON0, NAT_LON}, {FE, KFE}, {FN, KFN}}},
    {9835, NULL, 28, {{SP1, STD1}, {LON0, NAT_LON}, {FE, KFE}, {FN, KFN}}},
    {1125, NULL, 12, {{LAT0, C_LAT}, {LON0, C_LON}, {FE, KFE}, {FN, KFN}}},
    {0, "Sinusoidal", 24, {{LON0, NAT_LON}, {FE, KFE}, {FN, KFN}}},
    {0, "Stereographic", 14, {{LAT0, NAT_LAT}, {LON0, NAT_LON}, {K0, SCALE}, {FE, KFE},
                              {FN, KFN}}},
};

typedef struct out {
    cf__geokeys_out *g;
    int nkeys;
    uint16_t keys[CF__GEOKEYS_MAX][4];
} out;

static int add_short(out *o, int key, int v) {
    if (o->nkeys >= CF__GEOKEYS_MAX) return 0;
    uint16_t *k = o->keys[o->nkeys++];
    k[0] = (uint16_t)key, k[1] = 0, k[2] = 1, k[3] = (uint16_t)v;
    return 1;
}

static int add_double(out *o, int key, double v) {
    if (o->nkeys >= CF__GEOKEYS_MAX || o->g->ndbl >= CF__GEOKEYS_MAX) return 0;
    uint16_t *k = o->keys[o->nkeys++];
    k[0] = (uint16_t)key, k[1] = 34736, k[2] = 1, k[3] = (uint16_t)o->g->ndbl;
    o->g->dbl[o->g->ndbl++] = v;
    return 1;
}

/* ASCII values end with '|' in GeoAsciiParams; a '|' inside becomes '/'. */
static int add_ascii(out *o, int key, const char *s) {
    size_t n = strlen(s), at = o->g->nascii;
    if (n > 255) n = 255;
    if (o->nkeys >= CF__GEOKEYS_MAX || at + n + 2 > sizeof o->g->ascii) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        o->g->ascii[at + i] = c == '|' || (unsigned char)c < 0x20 ? '/' : c;
    }
    o->g->ascii[at + n] = '|';
    o->g->nascii = at + n + 1;
    o->g->ascii[o->g->nascii] = 0;
    uint16_t *k = o->keys[o->nkeys++];
    k[0] = (uint16_t)key, k[1] = 34737, k[2] = (uint16_t)(n + 1), k[3] = (uint16_t)at;
    return 1;
}

static int has_key(const out *o, int key) {
    for (int i = 0; i < o->nkeys; i++)
        if (o->keys[i][0] == key) return 1;
    return 0;
}

static int epsg_of(PJ *obj) {
    const char *auth = proj_get_id_auth_name(obj, 0), *code = proj_get_id_code(obj, 0);
    if (!auth || !code || strcmp(auth, "EPSG") != 0) return 0;
    int v = atoi(code);
    return v > 0 && v < USER ? v : 0;
}

/* The geographic part: an EPSG code, else ellipsoid and prime meridian. */
static int put_geog(PJ_CONTEXT *ctx, out *o, PJ *geod) {
    int code = epsg_of(geod);
    if (code) return add_short(o, K_GCS, code);
    PJ *ell = proj_get_ellipsoid(ctx, geod), *pm = proj_get_prime_meridian(ctx, geod);
    /* the datum by its code where it has one (WGS 84's 6326, NAD83's
     * 6269 ...): readers rebuild the same datum, not a look-alike */
    PJ *datum = proj_crs_get_datum_forced(ctx, geod);
    int datum_code = datum ? epsg_of(datum) : 0;
    proj_destroy(datum);
    double a = 0, b = 0, rf = 0, pml = 0, pmf = 0;
    int computed = 0, ok = ell && proj_ellipsoid_get_parameters(ctx, ell, &a, &b, &computed, &rf);
    if (ok && pm) ok = proj_prime_meridian_get_parameters(ctx, pm, &pml, &pmf, NULL);
    const char *name = proj_get_name(geod);
    int ell_code = ell ? epsg_of(ell) : 0;
    if (ok)
        ok = add_short(o, K_GCS, USER) && add_ascii(o, K_GEOG_CITATION, name ? name : "unnamed") &&
             add_short(o, K_DATUM, datum_code ? datum_code : USER) &&
             add_short(o, K_ANGULAR, 9102) &&
             add_short(o, K_ELLPS, ell_code ? ell_code : USER) &&
             add_double(o, K_SEMI_MAJOR, a) &&
             (rf > 0 ? add_double(o, K_INV_FLAT, rf) : add_double(o, K_SEMI_MINOR, b));
    if (ok && pml != 0) /* in degrees: GeogAngularUnits */
        ok = add_short(o, K_PM, USER) && add_double(o, K_PM_LONG, pml * pmf * 180 / M_PI);
    proj_destroy(ell);
    proj_destroy(pm);
    return ok;
}

static const method *find_method(PJ_CONTEXT *ctx, PJ *conv, char *mname, size_t n) {
    const char *name = NULL, *auth = NULL, *code = NULL;
    if (!proj_coordoperation_get_method_info(ctx, conv, &name, &auth, &code)) return NULL;
    snprintf(mname, n, "%s%s%s%s", name ? name : "?", auth && code ? " (" : "",
             auth && code ? auth : "", auth && code ? ")" : "");
    int epsg = auth && code && !strcmp(auth, "EPSG") ? atoi(code) : 0;
    for (size_t i = 0; i < sizeof METHODS / sizeof *METHODS; i++) {
        const method *m = &METHODS[i];
        if ((m->epsg && m->epsg == epsg) || (!m->epsg && name && !strcmp(m->name, name)))
            return m;
    }
    return NULL;
}

/* The projection: method and parameters, angles in degrees, lengths in
 * the CRS's linear unit (lf metres each). */
static cf_status put_conversion(PJ_CONTEXT *ctx, out *o, PJ *conv, double lf, const char *crs,
                                cf_error *err) {
    char mname[160];
    const method *m = find_method(ctx, conv, mname, sizeof mname);
    if (!m)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "writer: CRS %s: its projection method %s is not written as GeoKeys "
                       "(give a CRS with an EPSG code, or one of: transverse Mercator, "
                       "Lambert conic, Albers, Lambert azimuthal, polar stereographic, "
                       "Mercator, oblique stereographic, equidistant cylindrical, "
                       "cylindrical equal area, azimuthal equidistant, sinusoidal, "
                       "stereographic)", crs, mname);
    if (!add_short(o, K_PROJECTION, USER) || !add_short(o, K_CT, m->ct))
        return cf__err(err, CF_E_LIMIT, "writer: CRS %s: too many GeoKeys", crs);
    int np = proj_coordoperation_get_param_count(ctx, conv);
    for (int j = 0; j < 7 && m->p[j].param; j++) {
        int found = 0;
        for (int i = 0; i < np && !found; i++) {
            const char *auth = NULL, *code = NULL, *utype = NULL;
            double v = 0, f = 1;
            if (!proj_coordoperation_get_param(ctx, conv, i, NULL, &auth, &code, &v, NULL, &f,
                                               NULL, NULL, NULL, &utype))
                continue;
            if (!auth || !code || strcmp(auth, "EPSG") || atoi(code) != m->p[j].param) continue;
            found = 1;
            double w = v * f; /* SI: radians, metres, or a scale */
            /* (PROJ's unit categories: "angular", "linear", "scale", ...) */
            if (utype && !strcasecmp(utype, "angular")) w *= 180 / M_PI;
            else if (utype && !strcasecmp(utype, "linear")) w /= lf;
            if (!add_double(o, m->p[j].key, w))
                return cf__err(err, CF_E_LIMIT, "writer: CRS %s: too many GeoKeys", crs);
        }
        if (!found && m->p[j].param != K0) /* a missing scale is 1 to readers */
            return cf__err(err, CF_E_UNSUPPORTED, "writer: CRS %s: method %s without its "
                           "parameter EPSG:%d", crs, mname, m->p[j].param);
    }
    /* A parameter the keys do not carry must be what readers assume
     * (0, or a scale of 1), or the CRS would be read as another. */
    for (int i = 0; i < np; i++) {
        const char *pname = NULL, *auth = NULL, *code = NULL;
        double v = 0;
        if (!proj_coordoperation_get_param(ctx, conv, i, &pname, &auth, &code, &v, NULL, NULL,
                                           NULL, NULL, NULL, NULL))
            continue;
        int pc = auth && code && !strcmp(auth, "EPSG") ? atoi(code) : 0, mapped = 0;
        for (int j = 0; j < 7 && m->p[j].param && !mapped; j++) mapped = m->p[j].param == pc;
        if (!mapped && v != (pc == K0 ? 1.0 : 0.0))
            return cf__err(err, CF_E_UNSUPPORTED, "writer: CRS %s: method %s with parameter "
                           "\"%s\" = %g, which its GeoKeys cannot carry", crs, mname,
                           pname ? pname : "?", v);
    }
    return CF_OK;
}

static int cmp_key(const void *a, const void *b) {
    return (int)((const uint16_t *)a)[0] - (int)((const uint16_t *)b)[0];
}

/* The keys of c's horizontal part h into o (or, when h has an EPSG code,
 * just that code in o->g); c's lock held. */
static cf_status keys_of(PJ_CONTEXT *ctx, const cf_crs *c, PJ *h, cf_crs_kind kind,
                         const char *label, out *o, cf_error *err) {
    int hcode = epsg_of(h);
    if (hcode) { /* a compound or bound CRS over an EPSG one: that code */
        PJ_TYPE t = proj_get_type(h);
        o->g->geographic = t == PJ_TYPE_GEOGRAPHIC_2D_CRS || t == PJ_TYPE_GEOGRAPHIC_3D_CRS;
        o->g->epsg = hcode;
        return CF_OK;
    }
    if (proj_get_type(c->pj) == PJ_TYPE_BOUND_CRS)
        return cf__err(err, CF_E_UNSUPPORTED, "writer: CRS %s carries a datum shift "
                       "(a BoundCRS, +towgs84) that its GeoKeys would lose; give it "
                       "without the shift, or one with an EPSG code", label);
    if (kind == CF_CRS_GEOGRAPHIC) { /* the transform is in its unit: degrees only */
        PJ *cs = proj_crs_get_coordinate_system(ctx, h);
        double af = 0;
        int okcs = cs && proj_cs_get_axis_info(ctx, cs, 0, NULL, NULL, NULL, &af, NULL, NULL,
                                               NULL);
        proj_destroy(cs);
        if (!okcs || fabs(af - M_PI / 180) > 1e-15)
            return cf__err(err, CF_E_UNSUPPORTED, "writer: geographic CRS %s in a unit "
                           "other than degrees is not written as GeoKeys", label);
    }
    const char *name = proj_get_name(h);
    cf_status st = CF_OK;
    int ok = add_short(o, K_MODEL, kind == CF_CRS_PROJECTED ? 1 : 2) &&
             add_short(o, K_RASTER, 1) && add_ascii(o, K_CITATION, name ? name : "unnamed");
    PJ *geod = ok ? proj_crs_get_geodetic_crs(ctx, h) : NULL;
    if (ok && kind == CF_CRS_GEOGRAPHIC) {
        ok = geod && put_geog(ctx, o, geod);
    } else if (ok) {
        PJ *conv = proj_crs_get_coordoperation(ctx, h);
        PJ *cs = proj_crs_get_coordinate_system(ctx, h);
        double lf = 1;
        const char *uauth = NULL, *ucode = NULL;
        ok = conv && cs && geod &&
             proj_cs_get_axis_info(ctx, cs, 0, NULL, NULL, NULL, &lf, NULL, &uauth, &ucode);
        int lcode = ok && uauth && ucode && !strcmp(uauth, "EPSG") ? atoi(ucode) : 0;
        /* a unit given without its id (WKT1 UNIT["metre",1]): by factor */
        if (ok && !lcode)
            lcode = fabs(lf - 1) < 1e-12 ? 9001 : fabs(lf - 0.3048) < 1e-12 ? 9002
                    : fabs(lf - 1200.0 / 3937) < 1e-12 ? 9003 : 0;
        if (ok && !lcode)
            st = cf__err(err, CF_E_UNSUPPORTED, "writer: CRS %s: its linear unit has no EPSG "
                         "code", label);
        if (ok && !st)
            ok = add_short(o, K_PCS, USER) && add_ascii(o, K_PCS_CITATION, name ? name : "")
                 && add_short(o, K_LINEAR, lcode) && put_geog(ctx, o, geod) &&
                 /* the parameters' angles are in degrees; libgeotiff reads
                  * them in the base CRS's unit (grads for EPSG:4807) unless
                  * told */
                 (has_key(o, K_ANGULAR) || add_short(o, K_ANGULAR, 9102));
        if (ok && !st) st = put_conversion(ctx, o, conv, lf > 0 ? lf : 1, label, err);
        proj_destroy(conv);
        proj_destroy(cs);
    }
    proj_destroy(geod);
    if (!st && !ok)
        st = cf__err(err, CF_E_UNSUPPORTED, "writer: CRS %s could not be taken apart into "
                     "GeoKeys", label);
    return st;
}

cf_status cf__crs_to_geokeys(const cf_crs *crs, cf__geokeys_out *g, cf_error *err) {
    memset(g, 0, sizeof *g);
    char label[160];
    cf__crs_label(crs, label, sizeof label);
    cf_crs_kind kind = cf_crs_kind_of(crs);
    if (kind != CF_CRS_PROJECTED && kind != CF_CRS_GEOGRAPHIC)
        return cf__err(err, CF_E_UNSUPPORTED, "writer: CRS %s is neither projected nor "
                       "geographic (not written as GeoKeys)", label);
    out o = {.g = g};
    PJ_CONTEXT *ctx = cf__proj_get();
    if (!ctx) return cf__err(err, CF_E_NOMEM, "writer: no PROJ context");
    cf_crs *c = (cf_crs *)crs;
    pthread_mutex_lock(&c->mu);
    cf_status st = keys_of(ctx, c, c->horiz ? c->horiz : c->pj, kind, label, &o, err);
    pthread_mutex_unlock(&c->mu);
    cf__proj_put(ctx);
    CF__TRY(st);
    if (g->epsg) return CF_OK;
    qsort(o.keys, (size_t)o.nkeys, sizeof o.keys[0], cmp_key); /* GeoTIFF wants them sorted */
    g->dir[0] = 1, g->dir[1] = 1, g->dir[2] = 0, g->dir[3] = (uint16_t)o.nkeys;
    memcpy(g->dir + 4, o.keys, (size_t)o.nkeys * sizeof o.keys[0]);
    g->ndir = 4 + 4 * (size_t)o.nkeys;
    return CF_OK;
}
