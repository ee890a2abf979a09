/*
 * geokeys.c - a GeoTIFF's GeoKeys as a PROJ CRS, following what GDAL's
 * GTiff driver builds from them (frmts/gtiff/gt_wkt_srs.cpp with
 * libgeotiff's geo_normalize.c):
 *
 *  - ProjectedCSTypeGeoKey with an EPSG code and nothing overriding it:
 *    that EPSG CRS (a deprecated code replaced by its successor, the
 *    written code kept), its linear unit changed when ProjLinearUnits
 *    says so;
 *  - a user-defined projected CRS: the base geographic CRS (an EPSG code,
 *    or datum / ellipsoid / semi-axes / prime meridian keys), the
 *    conversion (ProjectionGeoKey's EPSG code, or ProjCoordTransGeoKey
 *    and the projection parameter keys with libgeotiff's fallbacks and
 *    defaults), the linear unit, and the citation as its name;
 *  - GeographicTypeGeoKey with an EPSG code, or a user-defined one;
 *  - an "ESRI PE String = " citation read as WKT, and only as WKT: never
 *    a PROJ string, and never WKT that can name a file (see
 *    pe_string_refused);
 *  - a vertical EPSG code making a compound CRS;
 *  - any other keys: a local (engineering) CRS named by the citation.
 *
 * Nothing from the file is trusted: every key's location, count and
 * offset is checked against the arrays it points into.
 */
#include "geo_internal.h"

#include <proj_experimental.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

enum {
    K_MODEL = 1024, K_CITATION = 1026,
    K_GCS = 2048, K_GEOG_CITATION = 2049, K_DATUM = 2050, K_PM = 2051,
    K_ANGULAR = 2054, K_ANGULAR_SIZE = 2055, K_ELLPS = 2056,
    K_SEMI_MAJOR = 2057, K_SEMI_MINOR = 2058, K_INV_FLAT = 2059,
    K_PM_LONG = 2061,
    K_PCS = 3072, K_PCS_CITATION = 3073, K_PROJECTION = 3074, K_CT = 3075,
    K_LINEAR = 3076, K_LINEAR_SIZE = 3077,
    K_STD_PAR1 = 3078, K_STD_PAR2 = 3079,
    K_NAT_LON = 3080, K_NAT_LAT = 3081, K_FE = 3082, K_FN = 3083,
    K_FO_LON = 3084, K_FO_LAT = 3085, K_FO_E = 3086, K_FO_N = 3087,
    K_C_LON = 3088, K_C_LAT = 3089, K_C_E = 3090, K_C_N = 3091,
    K_SCALE_NAT = 3092, K_SCALE_C = 3093, K_AZIMUTH = 3094,
    K_POLE_LON = 3095, K_RECT_ANGLE = 3096,
    K_VERT_CS = 4096
};

enum { MODEL_PROJECTED = 1, MODEL_GEOGRAPHIC = 2, MODEL_GEOCENTRIC = 3 };
#define USER_DEFINED 32767

typedef struct keys {
    const cf__geokeys *k;
    size_t n;                  /* keys in the directory */
} keys;

static const uint16_t *find(const keys *ks, int id) {
    for (size_t i = 0; i < ks->n; i++) {
        const uint16_t *e = ks->k->dir + 4 + 4 * i;
        if (e[0] == id) return e;
    }
    return NULL;
}

/* A SHORT key (stored in the entry, or in the directory itself). */
static int get_short(const keys *ks, int id, int *v) {
    const uint16_t *e = find(ks, id);
    if (!e || e[2] < 1) return 0;
    if (e[1] == 0) {
        *v = e[3];
        return 1;
    }
    if (e[1] == 34735 && e[3] < ks->k->ndir) {
        *v = ks->k->dir[e[3]];
        return 1;
    }
    return 0;
}

static int get_double(const keys *ks, int id, double *v) {
    const uint16_t *e = find(ks, id);
    if (!e || e[1] != 34736 || e[2] < 1 || (size_t)e[3] >= ks->k->ndbl) return 0;
    double d = ks->k->dbl[e[3]];
    if (!isfinite(d)) return 0;
    *v = d;
    return 1;
}

/* An ASCII key without its '|' terminator, NUL-terminated in out. */
static int get_ascii(const keys *ks, int id, char *out, size_t outlen) {
    const uint16_t *e = find(ks, id);
    if (!e || e[1] != 34737 || !ks->k->ascii) return 0;
    size_t off = e[3], n = e[2];
    if (off >= ks->k->nascii) return 0;
    if (n > ks->k->nascii - off) n = ks->k->nascii - off;
    while (n && (ks->k->ascii[off + n - 1] == '|' || ks->k->ascii[off + n - 1] == 0)) n--;
    if (n >= outlen) n = outlen - 1;
    memcpy(out, ks->k->ascii + off, n);
    out[n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] < 0x20) out[i] = ' ';
    return n > 0;
}

static int valid_code(int v) { return v > 0 && v < USER_DEFINED; }

/* Copy s into out, cut to fit (names from files may be long). */
static void put(char *out, size_t outlen, const char *s) {
    size_t n = strlen(s);
    if (n >= outlen) n = outlen - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

/* The value after "Key = " up to the next '|' in a citation GDAL wrote
 * ("GCS Name = x|Datum = y|Ellipsoid = z|Primem = p|"). */
static int citation_field(const char *cit, const char *key, char *out, size_t outlen) {
    const char *p = strstr(cit, key);
    if (!p) return 0;
    p += strlen(key);
    while (*p == ' ') p++;
    if (*p != '=') return 0;
    p++;
    while (*p == ' ') p++;
    size_t n = strcspn(p, "|");
    if (n >= outlen) n = outlen - 1;
    memcpy(out, p, n);
    out[n] = 0;
    return n > 0;
}

static PJ *from_db(PJ_CONTEXT *ctx, int code, PJ_CATEGORY cat) {
    char k[16];
    snprintf(k, sizeof k, "%d", code);
    return proj_create_from_database(ctx, "EPSG", k, cat, 0, NULL);
}

typedef struct unit {
    char name[64];
    double factor;
} unit;

/* An EPSG unit of measure; 0 when unknown. */
static int uom(PJ_CONTEXT *ctx, int code, unit *u) {
    char k[16];
    const char *name = NULL;
    double f = 0;
    snprintf(k, sizeof k, "%d", code);
    if (!proj_uom_get_info_from_database(ctx, "EPSG", k, &name, &f, NULL) || !(f > 0))
        return 0;
    snprintf(u->name, sizeof u->name, "%s", name ? name : "unknown");
    u->factor = f;
    return 1;
}

static void angular_unit(PJ_CONTEXT *ctx, const keys *ks, unit *u) {
    int code;
    double size;
    snprintf(u->name, sizeof u->name, "degree");
    u->factor = M_PI / 180;
    if (get_short(ks, K_ANGULAR, &code) && valid_code(code) && uom(ctx, code, u)) return;
    if (get_double(ks, K_ANGULAR_SIZE, &size) && size > 0) {
        snprintf(u->name, sizeof u->name, "unknown");
        u->factor = size; /* radians per unit */
    }
}

static int linear_unit(PJ_CONTEXT *ctx, const keys *ks, unit *u) {
    int code;
    double size;
    snprintf(u->name, sizeof u->name, "metre");
    u->factor = 1;
    if (get_short(ks, K_LINEAR, &code) && valid_code(code) && uom(ctx, code, u)) return 1;
    if (get_double(ks, K_LINEAR_SIZE, &size) && size > 0) {
        snprintf(u->name, sizeof u->name, "unknown");
        u->factor = size;
        return 1;
    }
    return 0;
}

/* The base geographic CRS of the keys, or NULL when they name none. */
static PJ *build_geog(PJ_CONTEXT *ctx, const keys *ks, int *gcs_out) {
    int gcs = 0, datum = 0, ellps = 0, pm = 0;
    get_short(ks, K_GCS, &gcs);
    *gcs_out = valid_code(gcs) ? gcs : 0;
    get_short(ks, K_DATUM, &datum);
    get_short(ks, K_ELLPS, &ellps);
    get_short(ks, K_PM, &pm);
    if (valid_code(gcs)) {
        PJ *g = from_db(ctx, gcs, PJ_CATEGORY_CRS);
        if (g) return g;
    }
    double a = 0, b = 0, rf = 0, pm_long = 0;
    int have_axes = get_double(ks, K_SEMI_MAJOR, &a) && a > 0;
    if (!valid_code(datum) && !valid_code(ellps) && !have_axes && !valid_code(pm))
        return NULL;
    unit au;
    angular_unit(ctx, ks, &au);
    char cit[512] = "", gname[256] = "unknown", dname[256] = "unknown",
         ename[256] = "unknown", pname[128] = "Greenwich";
    if (get_ascii(ks, K_GEOG_CITATION, cit, sizeof cit)) {
        if (!citation_field(cit, "GCS Name", gname, sizeof gname))
            put(gname, sizeof gname, cit);
        citation_field(cit, "Datum", dname, sizeof dname);
        citation_field(cit, "Ellipsoid", ename, sizeof ename);
        citation_field(cit, "Primem", pname, sizeof pname);
    }
    PJ *cs = proj_create_ellipsoidal_2D_cs(ctx, PJ_ELLPS2D_LATITUDE_LONGITUDE,
                                           au.name, au.factor);
    PJ *g = NULL;
    if (valid_code(datum)) {
        PJ *d = from_db(ctx, datum, PJ_CATEGORY_DATUM);
        if (d && cs) g = proj_create_geographic_crs_from_datum(ctx, gname, d, cs);
        proj_destroy(d);
    }
    if (!g) {
        /* The ellipsoid: its code, or the axes (GDAL: WGS 84 when no
         * semi-major axis can be found). */
        rf = 0;
        if (valid_code(ellps)) {
            PJ *e = from_db(ctx, ellps, PJ_CATEGORY_ELLIPSOID);
            if (e) {
                proj_ellipsoid_get_parameters(ctx, e, &a, NULL, NULL, &rf);
                const char *n = proj_get_name(e);
                if (n) put(ename, sizeof ename, n);
            }
            proj_destroy(e);
        } else if (have_axes) {
            if (!get_double(ks, K_INV_FLAT, &rf) || !(rf > 0)) {
                rf = 0;
                if (get_double(ks, K_SEMI_MINOR, &b) && b > 0 && fabs(a - b) > 1e-9 * a)
                    rf = a / (a - b);
            }
        }
        if (!(a > 0)) {
            a = 6378137.0;
            rf = 298.257223563;
            snprintf(ename, sizeof ename, "WGS 84");
        }
        if (valid_code(pm)) {
            PJ *p = from_db(ctx, pm, PJ_CATEGORY_PRIME_MERIDIAN);
            double conv = 0;
            if (p) {
                proj_prime_meridian_get_parameters(ctx, p, &pm_long, &conv, NULL);
                if (conv > 0) pm_long = pm_long * conv / au.factor;
                const char *n = proj_get_name(p);
                if (n) put(pname, sizeof pname, n);
            }
            proj_destroy(p);
        } else {
            get_double(ks, K_PM_LONG, &pm_long); /* in the angular unit */
        }
        if (cs)
            g = proj_create_geographic_crs(ctx, gname, dname, ename, a, rf, pname, pm_long,
                                           au.name, au.factor, cs);
    }
    proj_destroy(cs);
    return g;
}

/* The projection parameters of libgeotiff's GTIFFetchProjParms: each is
 * the first of its keys present, else its default. */
typedef struct params {
    double lat0, lon0, sp1, sp2, k, fe, fn, az, rga;
    int have_sp1, have_k;
} params;

static int first_of(const keys *ks, const int *ids, int n, double *v) {
    for (int i = 0; i < n; i++)
        if (get_double(ks, ids[i], v)) return 1;
    return 0;
}

static void fetch_params(const keys *ks, int ct, params *p) {
    static const int fe[] = {K_FE, K_C_E, K_FO_E}, fn[] = {K_FN, K_C_N, K_FO_N};
    static const int lon[] = {K_NAT_LON, K_FO_LON, K_C_LON};
    static const int plon[] = {K_POLE_LON, K_NAT_LON, K_FO_LON, K_C_LON};
    static const int lat[] = {K_NAT_LAT, K_FO_LAT, K_C_LAT};
    static const int k[] = {K_SCALE_NAT, K_SCALE_C};
    memset(p, 0, sizeof *p);
    p->k = 1;
    p->rga = 90;
    first_of(ks, fe, 3, &p->fe);
    first_of(ks, fn, 3, &p->fn);
    if (ct == 15) first_of(ks, plon, 4, &p->lon0); /* polar stereographic */
    else first_of(ks, lon, 3, &p->lon0);
    first_of(ks, lat, 3, &p->lat0);
    p->have_k = first_of(ks, k, 2, &p->k);
    if (!p->have_k) p->k = 1;
    p->have_sp1 = get_double(ks, K_STD_PAR1, &p->sp1);
    get_double(ks, K_STD_PAR2, &p->sp2);
    get_double(ks, K_AZIMUTH, &p->az);
    get_double(ks, K_RECT_ANGLE, &p->rga);
}

/* The conversion of GeoTIFF projection method `ct` (ProjCoordTransGeoKey:
 * CT_* codes, with GDAL's choice of EPSG method for each). */
static PJ *ct_conversion(PJ_CONTEXT *ctx, int ct, const params *p, const unit *au,
                         const unit *lu, int *polar) {
    const char *an = au->name, *ln = lu->name;
    double af = au->factor, lf = lu->factor;
    *polar = 0;
    switch (ct) {
    case 1: /* TransverseMercator */
        return proj_create_conversion_transverse_mercator(ctx, p->lat0, p->lon0, p->k, p->fe,
                                                          p->fn, an, af, ln, lf);
    case 27: /* TransvMercator_SouthOriented */
        return proj_create_conversion_transverse_mercator_south_oriented(
            ctx, p->lat0, p->lon0, p->k, p->fe, p->fn, an, af, ln, lf);
    case 3: /* ObliqueMercator (Hotine, variant A) */
        return proj_create_conversion_hotine_oblique_mercator_variant_a(
            ctx, p->lat0, p->lon0, p->az, p->rga, p->k, p->fe, p->fn, an, af, ln, lf);
    case 9815: /* HotineObliqueMercatorAzimuthCenter (variant B) */
        return proj_create_conversion_hotine_oblique_mercator_variant_b(
            ctx, p->lat0, p->lon0, p->az, p->rga, p->k, p->fe, p->fn, an, af, ln, lf);
    case 4: /* ObliqueMercator_Laborde */
        return proj_create_conversion_laborde_oblique_mercator(ctx, p->lat0, p->lon0, p->az,
                                                               p->k, p->fe, p->fn, an, af, ln,
                                                               lf);
    case 7: /* Mercator: 2SP when a standard parallel is given */
        if (p->have_sp1)
            return proj_create_conversion_mercator_variant_b(ctx, p->sp1, p->lon0, p->fe, p->fn,
                                                             an, af, ln, lf);
        return proj_create_conversion_mercator_variant_a(ctx, p->lat0, p->lon0, p->k, p->fe,
                                                         p->fn, an, af, ln, lf);
    case 8: /* LambertConfConic_2SP */
        return proj_create_conversion_lambert_conic_conformal_2sp(
            ctx, p->lat0, p->lon0, p->sp1, p->sp2, p->fe, p->fn, an, af, ln, lf);
    case 9: /* LambertConfConic_1SP */
        return proj_create_conversion_lambert_conic_conformal_1sp(ctx, p->lat0, p->lon0, p->k,
                                                                  p->fe, p->fn, an, af, ln, lf);
    case 10: /* LambertAzimEqualArea */
        return proj_create_conversion_lambert_azimuthal_equal_area(ctx, p->lat0, p->lon0, p->fe,
                                                                   p->fn, an, af, ln, lf);
    case 11: /* AlbersEqualArea */
        return proj_create_conversion_albers_equal_area(ctx, p->lat0, p->lon0, p->sp1, p->sp2,
                                                        p->fe, p->fn, an, af, ln, lf);
    case 12: /* AzimuthalEquidistant */
        return proj_create_conversion_azimuthal_equidistant(ctx, p->lat0, p->lon0, p->fe, p->fn,
                                                            an, af, ln, lf);
    case 13: /* EquidistantConic */
        return proj_create_conversion_equidistant_conic(ctx, p->lat0, p->lon0, p->sp1, p->sp2,
                                                        p->fe, p->fn, an, af, ln, lf);
    case 14: /* Stereographic */
        return proj_create_conversion_stereographic(ctx, p->lat0, p->lon0, p->k, p->fe, p->fn,
                                                    an, af, ln, lf);
    case 15: /* PolarStereographic: variant B unless scaled or at the pole
                (GDAL's SetPS) */
        *polar = p->lat0 > 0 ? 1 : -1;
        if (p->k == 1.0 && fabs(fabs(p->lat0 * af * 180 / M_PI) - 90) > 1e-8)
            return proj_create_conversion_polar_stereographic_variant_b(
                ctx, p->lat0, p->lon0, p->fe, p->fn, an, af, ln, lf);
        return proj_create_conversion_polar_stereographic_variant_a(
            ctx, p->lat0, p->lon0, p->k, p->fe, p->fn, an, af, ln, lf);
    case 16: /* ObliqueStereographic */
        return proj_create_conversion_oblique_stereographic(ctx, p->lat0, p->lon0, p->k, p->fe,
                                                            p->fn, an, af, ln, lf);
    case 17: /* Equirectangular */
        return proj_create_conversion_equidistant_cylindrical(ctx, p->sp1, p->lon0, p->fe,
                                                              p->fn, an, af, ln, lf);
    case 18: /* CassiniSoldner */
        return proj_create_conversion_cassini_soldner(ctx, p->lat0, p->lon0, p->fe, p->fn, an,
                                                      af, ln, lf);
    case 19: /* Gnomonic */
        return proj_create_conversion_gnomonic(ctx, p->lat0, p->lon0, p->fe, p->fn, an, af, ln,
                                               lf);
    case 20: /* MillerCylindrical */
        return proj_create_conversion_miller_cylindrical(ctx, p->lon0, p->fe, p->fn, an, af,
                                                         ln, lf);
    case 21: /* Orthographic */
        return proj_create_conversion_orthographic(ctx, p->lat0, p->lon0, p->fe, p->fn, an, af,
                                                   ln, lf);
    case 22: /* Polyconic */
        return proj_create_conversion_american_polyconic(ctx, p->lat0, p->lon0, p->fe, p->fn,
                                                         an, af, ln, lf);
    case 23: /* Robinson */
        return proj_create_conversion_robinson(ctx, p->lon0, p->fe, p->fn, an, af, ln, lf);
    case 24: /* Sinusoidal */
        return proj_create_conversion_sinusoidal(ctx, p->lon0, p->fe, p->fn, an, af, ln, lf);
    case 25: /* VanDerGrinten */
        return proj_create_conversion_van_der_grinten(ctx, p->lon0, p->fe, p->fn, an, af, ln,
                                                      lf);
    case 26: /* NewZealandMapGrid */
        return proj_create_conversion_new_zealand_mapping_grid(ctx, p->lat0, p->lon0, p->fe,
                                                               p->fn, an, af, ln, lf);
    case 28: /* CylindricalEqualArea */
        return proj_create_conversion_lambert_cylindrical_equal_area(
            ctx, p->sp1, p->lon0, p->fe, p->fn, an, af, ln, lf);
    default:
        return NULL;
    }
}

/* The name GDAL gives a user-defined CRS: the citation without the
 * "PCS Name = " wrapping GDAL writes. */
static void crs_name(const keys *ks, int id, char *out, size_t outlen) {
    char cit[512];
    snprintf(out, outlen, "unnamed");
    if (!get_ascii(ks, id, cit, sizeof cit) && !get_ascii(ks, K_CITATION, cit, sizeof cit))
        return;
    if (!citation_field(cit, "PCS Name", out, outlen)) put(out, outlen, cit);
}

static PJ *build_projected(PJ_CONTEXT *ctx, const keys *ks, int pcs, char *note,
                           size_t notelen) {
    int gcs = 0, proj = 0, ct = 0;
    get_short(ks, K_PROJECTION, &proj);
    get_short(ks, K_CT, &ct);
    PJ *base = valid_code(pcs) ? from_db(ctx, pcs, PJ_CATEGORY_CRS) : NULL;
    PJ *geog = build_geog(ctx, ks, &gcs);
    if (!geog && base) geog = proj_crs_get_geodetic_crs(ctx, base);
    if (!geog) {
        /* GDAL: an unknown datum and no axes is WGS 84. */
        geog = from_db(ctx, 4326, PJ_CATEGORY_CRS);
    }
    unit au, lu;
    angular_unit(ctx, ks, &au);
    int have_unit = linear_unit(ctx, ks, &lu);
    PJ *conv = NULL;
    int polar = 0;
    if (valid_code(proj)) conv = from_db(ctx, proj, PJ_CATEGORY_COORDINATE_OPERATION);
    if (!conv && ct > 0 && ct != USER_DEFINED) {
        params p;
        fetch_params(ks, ct, &p);
        conv = ct_conversion(ctx, ct, &p, &au, &lu, &polar);
        if (!conv)
            snprintf(note, notelen, "projection method %d (ProjCoordTransGeoKey) is not "
                     "supported", ct);
    }
    if (!conv && base) conv = proj_crs_get_coordoperation(ctx, base);
    if (!conv && !*note)
        snprintf(note, notelen, "user-defined projected CRS without a projection "
                 "(ProjectionGeoKey or ProjCoordTransGeoKey)");
    PJ *cs = NULL;
    if (!have_unit && base) {
        /* The unit of the EPSG CRS the keys refine. */
        PJ *bcs = proj_crs_get_coordinate_system(ctx, base);
        double f = 0;
        const char *n = NULL;
        if (bcs) proj_cs_get_axis_info(ctx, bcs, 0, NULL, NULL, NULL, &f, &n, NULL, NULL);
        if (f > 0) {
            snprintf(lu.name, sizeof lu.name, "%s", n ? n : "unknown");
            lu.factor = f;
        }
        proj_destroy(bcs);
    }
    cs = proj_create_cartesian_2D_cs(ctx,
                                     polar > 0   ? PJ_CART2D_NORTH_POLE_EASTING_SOUTH_NORTHING_SOUTH
                                     : polar < 0 ? PJ_CART2D_SOUTH_POLE_EASTING_NORTH_NORTHING_NORTH
                                                 : PJ_CART2D_EASTING_NORTHING,
                                     lu.name, lu.factor);
    PJ *out = NULL;
    if (geog && conv && cs) {
        char name[256];
        crs_name(ks, K_PCS_CITATION, name, sizeof name);
        if (base && !strcmp(name, "unnamed")) {
            const char *bn = proj_get_name(base);
            if (bn) put(name, sizeof name, bn);
        }
        out = proj_create_projected_crs(ctx, name, geog, conv, cs);
    }
    /* Keys that only restate the EPSG CRS: that CRS, with its code. */
    if (out && base &&
        proj_is_equivalent_to_with_ctx(ctx, out, base, PJ_COMP_EQUIVALENT)) {
        proj_destroy(out);
        out = base;
        base = NULL;
    }
    proj_destroy(base);
    proj_destroy(geog);
    proj_destroy(conv);
    proj_destroy(cs);
    return out;
}

/* The EPSG CRS `code` with the file's linear unit when it overrides it. */
static PJ *epsg_with_unit(PJ_CONTEXT *ctx, const keys *ks, int code) {
    PJ *c = from_db(ctx, code, PJ_CATEGORY_CRS);
    unit lu;
    if (!c || !linear_unit(ctx, ks, &lu)) return c;
    PJ *cs = proj_crs_get_coordinate_system(ctx, c);
    double f = 0;
    if (cs) proj_cs_get_axis_info(ctx, cs, 0, NULL, NULL, NULL, &f, NULL, NULL, NULL);
    proj_destroy(cs);
    if (f > 0 && fabs(f - lu.factor) > 1e-15 * f) {
        PJ *alt = proj_crs_alter_cs_linear_unit(ctx, c, lu.name, lu.factor, NULL, NULL);
        if (alt) {
            proj_destroy(c);
            c = alt;
        }
    }
    return c;
}

/* A local CRS (no model, or a model GDAL treats as LOCAL_CS). */
static PJ *build_local(PJ_CONTEXT *ctx, const keys *ks) {
    char name[256], wkt[1024];
    unit lu;
    crs_name(ks, K_CITATION, name, sizeof name);
    for (char *q = name; *q; q++)
        if (*q == '"') *q = '\'';
    linear_unit(ctx, ks, &lu);
    snprintf(wkt, sizeof wkt,
             "ENGCRS[\"%s\",EDATUM[\"Unknown engineering datum\"],CS[Cartesian,2],"
             "AXIS[\"(E)\",east,ORDER[1],LENGTHUNIT[\"%s\",%.17g]],"
             "AXIS[\"(N)\",north,ORDER[2],LENGTHUNIT[\"%s\",%.17g]]]",
             name, lu.name, lu.factor, lu.name, lu.factor);
    return proj_create_from_wkt(ctx, wkt, NULL, NULL, NULL);
}

/* Why the text of an ESRI PE string citation cannot go to PROJ, or NULL
 * when it may.  proj_create() also reads PROJ strings, and those open
 * files: "+init=FILE:id" reads and parses any file (a FIFO or
 * /dev/stdin hangs the open), "+grids=", "+nadgrids=", "+geoidgrids="
 * open a path when the CRS is built or used.  WKT can carry PROJ strings
 * too: WKT1's EXTENSION["PROJ4", ...], a METHOD["PROJ-based operation
 * method: ..."], and WKT2's PARAMETERFILE names a grid file.  A file may
 * hold WKT and nothing else: it must start with a keyword, and no '='
 * (every PROJ string that names a file needs one), no EXTENSION and no
 * PARAMETERFILE anywhere, quoted names included (no real PE string has
 * them).  The WKT then goes to proj_create_from_wkt, which reads nothing
 * but WKT. */
static const char *pe_string_refused(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '=') return "it holds a PROJ string ('=')";
        if (c == '+' && ((p[1] | 0x20) >= 'a' && (p[1] | 0x20) <= 'z'))
            return "it holds a PROJ string ('+' and a name)";
        if (c < 0x20 && c != '\t' && c != '\r' && c != '\n')
            return "it holds control characters";
    }
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return "not WKT";
    static const char *const words[] = {"extension", "parameterfile", "proj-based"};
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t n = strlen(words[w]);
        for (const char *p = s; *p; p++)
            if (!strncasecmp(p, words[w], n))
                return w == 1 ? "it names a grid file (PARAMETERFILE)"
                              : "it holds a PROJ string (EXTENSION or PROJ-based method)";
    }
    return NULL;
}

/* Build the CRS; *written gets the EPSG code as written. */
static PJ *build(PJ_CONTEXT *ctx, const keys *ks, int *written, char *note,
                 size_t notelen) {
    int model = 0, pcs = 0, gcs = 0, proj = 0, ct = 0, datum = 0, ellps = 0, vert = 0;
    get_short(ks, K_MODEL, &model);
    get_short(ks, K_PCS, &pcs);
    get_short(ks, K_GCS, &gcs);
    get_short(ks, K_PROJECTION, &proj);
    get_short(ks, K_CT, &ct);
    get_short(ks, K_DATUM, &datum);
    get_short(ks, K_ELLPS, &ellps);
    get_short(ks, K_VERT_CS, &vert);
    /* GDAL: a PCS code without a model is projected; so is GCS alone. */
    if ((model == 0 || model == USER_DEFINED) && valid_code(pcs)) model = MODEL_PROJECTED;
    if (model == 0 && valid_code(gcs)) model = MODEL_GEOGRAPHIC;
    PJ *c = NULL;
    char pe[2400];
    if (get_ascii(ks, K_PCS_CITATION, pe, sizeof pe) && !strncmp(pe, "ESRI PE String = ", 17) &&
        model != MODEL_GEOGRAPHIC && !valid_code(pcs)) {
        const char *why = pe_string_refused(pe + 17);
        if (why) {
            snprintf(note, notelen,
                     "ESRI PE string citation refused: %s (a file's CRS must be "
                     "WKT that names no file)",
                     why);
            return NULL;
        }
        c = proj_create_from_wkt(ctx, pe + 17, NULL, NULL, NULL);
        if (!c) snprintf(note, notelen, "ESRI PE string citation PROJ cannot read");
    } else if (model == MODEL_PROJECTED) {
        if (valid_code(pcs) && !valid_code(proj) && !ct && !valid_code(gcs) &&
            !valid_code(datum) && !valid_code(ellps))
            c = epsg_with_unit(ctx, ks, pcs);
        if (!c) c = build_projected(ctx, ks, pcs, note, notelen);
        if (valid_code(pcs)) *written = pcs;
    } else if (model == MODEL_GEOGRAPHIC) {
        int g = 0;
        c = build_geog(ctx, ks, &g);
        if (g) *written = g;
        if (!c) {
            /* GDAL: no datum, no ellipsoid: WGS 84's numbers, datum unknown. */
            c = proj_create(ctx, "GEOGCRS[\"unknown\",DATUM[\"unknown\",ELLIPSOID[\"WGS 84\","
                                 "6378137,298.257223563]],CS[ellipsoidal,2],"
                                 "AXIS[\"lat\",north],AXIS[\"lon\",east],"
                                 "ANGLEUNIT[\"degree\",0.0174532925199433]]");
        }
    } else if (model == MODEL_GEOCENTRIC) {
        snprintf(note, notelen, "geocentric model (GTModelTypeGeoKey 3) is not a raster CRS");
        return NULL;
    } else {
        c = build_local(ctx, ks);
    }
    if (c && valid_code(vert)) {
        PJ *v = from_db(ctx, vert, PJ_CATEGORY_CRS);
        if (v && proj_get_type(v) == PJ_TYPE_VERTICAL_CRS) {
            char name[512];
            snprintf(name, sizeof name, "%s + %s", proj_get_name(c) ? proj_get_name(c) : "",
                     proj_get_name(v) ? proj_get_name(v) : "");
            PJ *cc = proj_create_compound_crs(ctx, name, c, v);
            if (cc) {
                proj_destroy(c);
                c = cc;
            }
        }
        proj_destroy(v);
    }
    if (!c && !*note) {
        const char *why = cf__proj_msg(ctx);
        snprintf(note, notelen, "GeoKeys describe no CRS PROJ can build%s%s", *why ? ": " : "",
                 why);
    }
    return c;
}

/* ------------------------------------------------------------ memo */

/* Thousands of files of one archive share a handful of CRSs: remember the
 * last few key sets.  The cache is a pure function's memo (keys bytes ->
 * CRS); its entries hold references. */
#define MEMO_N 32

typedef struct memo {
    uint8_t *bytes;
    size_t len;
    cf_crs *crs;               /* may be NULL: "no CRS" is remembered too */
    char note[160];
    uint64_t used;
} memo;

static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static memo memos[MEMO_N];
static uint64_t memo_clock;

static uint8_t *key_bytes(const cf__geokeys *k, size_t *len) {
    size_t a = k->ndir * 2, b = k->ndbl * 8, c = k->nascii;
    *len = 24 + a + b + c;
    uint8_t *p = cf__malloc(*len);
    if (!p) return NULL;
    uint64_t n[3] = {k->ndir, k->ndbl, k->nascii};
    memcpy(p, n, 24);
    if (a) memcpy(p + 24, k->dir, a);
    if (b) memcpy(p + 24 + a, k->dbl, b);
    if (c) memcpy(p + 24 + a + b, k->ascii, c);
    return p;
}

cf_status cf__crs_from_geokeys(const cf__geokeys *k, cf_crs **out, char *note,
                               size_t notelen) {
    char nbuf[160];
    if (!note || !notelen) {
        note = nbuf;
        notelen = sizeof nbuf;
    }
    *out = NULL;
    note[0] = 0;
    if (!k || !k->dir || k->ndir < 4) return CF_OK;
    keys ks = {k, k->dir[3]};
    if (ks.n == 0) return CF_OK;
    if (ks.n > (k->ndir - 4) / 4) {
        snprintf(note, notelen, "GeoKeyDirectory lists %zu keys but holds %zu", ks.n,
                 (k->ndir - 4) / 4);
        return CF_OK;
    }
    size_t len;
    uint8_t *bytes = key_bytes(k, &len);
    if (!bytes) return CF_E_NOMEM;
    pthread_mutex_lock(&memo_mu);
    for (int i = 0; i < MEMO_N; i++) {
        memo *m = &memos[i];
        if (m->bytes && m->len == len && !memcmp(m->bytes, bytes, len)) {
            m->used = ++memo_clock;
            *out = cf_crs_ref(m->crs);
            put(note, notelen, m->note);
            pthread_mutex_unlock(&memo_mu);
            free(bytes);
            return CF_OK;
        }
    }
    pthread_mutex_unlock(&memo_mu);

    cf_status st = CF_OK;
    PJ_CONTEXT *ctx = cf__proj_get();
    if (!ctx) {
        free(bytes);
        return CF_E_NOMEM;
    }
    int written = 0;
    PJ *pj = build(ctx, &ks, &written, note, notelen);
    if (pj) {
        cf_error e = {0};
        st = cf__crs_wrap(ctx, pj, written, out, &e);
        if (st == CF_E_NOMEM) {
            cf__proj_put(ctx);
            free(bytes);
            return st;
        }
        if (st) {
            put(note, notelen, e.msg);
            st = CF_OK;
        }
    }
    cf__proj_put(ctx);

    pthread_mutex_lock(&memo_mu);
    memo *victim = &memos[0];
    for (int i = 1; i < MEMO_N; i++)
        if (memos[i].used < victim->used) victim = &memos[i];
    cf_crs *old = victim->crs;
    free(victim->bytes);
    victim->bytes = bytes;
    victim->len = len;
    victim->crs = cf_crs_ref(*out);
    put(victim->note, sizeof victim->note, note);
    victim->used = ++memo_clock;
    pthread_mutex_unlock(&memo_mu);
    cf_crs_free(old);
    return CF_OK;
}
