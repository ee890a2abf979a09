/*
 * crs.c - cf_crs: a PROJ CRS behind a lock, reference counted.
 *
 * Every use of the PJ happens under the object's mutex with a context
 * borrowed from the pool and assigned to the PJ first (a PJ remembers the
 * context it was made with, which by then may serve another thread).
 * Identity is PROJ's equivalence, never a comparison of codes: two files
 * in "EPSG:32633" and in a user-defined UTM zone 33N on WGS 84 are the
 * same CRS.  The EPSG codes kept here are for people and for round trips.
 */
#include "geo_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static char *dup_or_empty(const char *s) { return cf__strdup(s ? s : ""); }

static void crs_destroy(cf_crs *c) {
    PJ_CONTEXT *ctx = cf__proj_get();
    if (c->horiz && c->horiz != c->pj) {
        if (ctx) proj_assign_context(c->horiz, ctx);
        proj_destroy(c->horiz);
    }
    if (c->pj) {
        if (ctx) proj_assign_context(c->pj, ctx);
        proj_destroy(c->pj);
    }
    cf__proj_put(ctx);
    pthread_mutex_destroy(&c->mu);
    free(c->name);
    free(c->wkt);
    free(c->projjson);
    free(c->str);
    free(c);
}

static int code_of(const PJ *pj, const char *auth) {
    const char *a = proj_get_id_auth_name(pj, 0);
    const char *k = proj_get_id_code(pj, 0);
    if (!a || !k || strcmp(a, auth) != 0) return 0;
    char *end;
    long v = strtol(k, &end, 10);
    return (*end || v <= 0 || v > 0x7fffffff) ? 0 : (int)v;
}

/* The EPSG code of an equivalent EPSG CRS of the same name (PROJ's
 * confidence 100), for CRSs built from GeoKeys or WKT without an ID. */
static int identify_epsg(PJ_CONTEXT *ctx, PJ *pj) {
    int *conf = NULL, code = 0;
    PJ_OBJ_LIST *l = proj_identify(ctx, pj, "EPSG", NULL, &conf);
    if (l && conf && proj_list_get_count(l) > 0 && conf[0] == 100) {
        PJ *o = proj_list_get(ctx, l, 0);
        if (o) code = code_of(o, "EPSG");
        proj_destroy(o);
    }
    proj_int_list_destroy(conf);
    proj_list_destroy(l);
    return code;
}

static cf_crs_kind kind_of(PJ_TYPE t) {
    switch (t) {
    case PJ_TYPE_GEOGRAPHIC_2D_CRS:
    case PJ_TYPE_GEOGRAPHIC_3D_CRS: return CF_CRS_GEOGRAPHIC;
    case PJ_TYPE_PROJECTED_CRS: return CF_CRS_PROJECTED;
    case PJ_TYPE_ENGINEERING_CRS: return CF_CRS_ENGINEERING;
    default: return CF_CRS_OTHER;
    }
}

static double unit_of(PJ_CONTEXT *ctx, PJ *crs) {
    PJ *cs = proj_crs_get_coordinate_system(ctx, crs);
    double f = 0;
    if (cs && proj_cs_get_axis_count(ctx, cs) >= 1)
        proj_cs_get_axis_info(ctx, cs, 0, NULL, NULL, NULL, &f, NULL, NULL, NULL);
    proj_destroy(cs);
    return isfinite(f) && f > 0 ? f : 0;
}

/* Whether the projected CRS `crs` is based on a geographic CRS, the only
 * base a map projection has a meaning on. */
static int geographic_base(PJ_CONTEXT *ctx, PJ *crs) {
    PJ *base = proj_get_source_crs(ctx, crs);
    PJ_TYPE t = base ? proj_get_type(base) : PJ_TYPE_UNKNOWN;
    proj_destroy(base);
    return t == PJ_TYPE_GEOGRAPHIC_2D_CRS || t == PJ_TYPE_GEOGRAPHIC_3D_CRS;
}

cf_status cf__crs_wrap(PJ_CONTEXT *ctx, PJ *pj, int written, cf_crs **out,
                       cf_error *err) {
    *out = NULL;
    if (!pj) return cf__err(err, CF_E_ARG, "no CRS");
    if (!proj_is_crs(pj)) {
        proj_destroy(pj);
        return cf__err(err, CF_E_ARG, "not a coordinate reference system");
    }
    /* GDAL (importFromEPSG, OSR_USE_NON_DEPRECATED=YES) reads a
     * deprecated code as its one successor. */
    if (proj_is_deprecated(pj)) {
        PJ_OBJ_LIST *l = proj_get_non_deprecated(ctx, pj);
        if (l && proj_list_get_count(l) == 1) {
            PJ *nd = proj_list_get(ctx, l, 0);
            if (nd) {
                proj_destroy(pj);
                pj = nd;
            }
        }
        proj_list_destroy(l);
    }
    cf_crs *c = cf__calloc(1, sizeof *c);
    if (!c) {
        proj_destroy(pj);
        return cf__err(err, CF_E_NOMEM, "out of memory");
    }
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->mu, NULL);
    c->pj = pj;
    PJ_TYPE t = proj_get_type(pj);
    if (t == PJ_TYPE_BOUND_CRS) c->horiz = proj_get_source_crs(ctx, pj);
    else if (t == PJ_TYPE_COMPOUND_CRS) c->horiz = proj_crs_get_sub_crs(ctx, pj, 0);
    if (c->horiz && proj_get_type(c->horiz) == PJ_TYPE_BOUND_CRS) {
        PJ *h = proj_get_source_crs(ctx, c->horiz);
        proj_destroy(c->horiz);
        c->horiz = h;
    }
    if (!c->horiz) c->horiz = pj;
    c->kind = kind_of(proj_get_type(c->horiz));
    if (c->kind == CF_CRS_PROJECTED && !geographic_base(ctx, c->horiz)) {
        /* WKT (BASEGEODCRS with a Cartesian CS) and GeoKeys can put a
         * projection on a geocentric CRS; PROJ 9 builds it, then crashes
         * on it (proj_identify dereferences the base as geographic). */
        crs_destroy(c);
        return cf__err(err, CF_E_ARG,
                       "a projected CRS whose base CRS is not geographic (lat/lon)");
    }
    c->linear_unit = c->kind == CF_CRS_GEOGRAPHIC ? 0 : unit_of(ctx, c->horiz);
    c->epsg = code_of(pj, "EPSG");
    if (!c->epsg && (c->kind == CF_CRS_PROJECTED || c->kind == CF_CRS_GEOGRAPHIC))
        c->epsg = identify_epsg(ctx, pj);
    c->epsg_written = written;
    c->name = dup_or_empty(proj_get_name(pj));
    if (!c->name) {
        crs_destroy(c);
        return cf__err(err, CF_E_NOMEM, "out of memory");
    }
    *out = c;
    return CF_OK;
}

/* "EPSG:n", a bare code, or anything proj_create reads.  A PROJ string
 * without +type=crs would be an operation, not a CRS. */
cf_status cf_crs_from_string(const char *text, cf_crs **out, cf_error *err) {
    if (!text || !out) return cf__err(err, CF_E_ARG, "cf_crs_from_string: NULL argument");
    *out = NULL;
    while (*text == ' ' || *text == '\t' || *text == '\n') text++;
    if (!*text) return cf__err(err, CF_E_ARG, "empty CRS definition");
    char *end;
    long code = strtol(text, &end, 10);
    if (end != text && !*end) {
        if (code <= 0 || code > 0x7fffffff)
            return cf__err(err, CF_E_ARG, "CRS code %s out of range", text);
        return cf_crs_from_epsg((int)code, out, err);
    }
    int written = 0;
    if (!strncasecmp(text, "EPSG:", 5)) {
        long v = strtol(text + 5, &end, 10);
        if (end != text + 5 && !*end && v > 0 && v <= 0x7fffffff) written = (int)v;
    }
    char *buf = NULL;
    if (text[0] == '+' && !strstr(text, "type=crs")) {
        size_t n = strlen(text);
        buf = cf__malloc(n + 12);
        if (!buf) return cf__err(err, CF_E_NOMEM, "out of memory");
        memcpy(buf, text, n);
        memcpy(buf + n, " +type=crs", 11);
    }
    PJ_CONTEXT *ctx = cf__proj_get();
    if (!ctx) {
        free(buf);
        return cf__err(err, CF_E_NOMEM, "out of memory (PROJ context)");
    }
    PJ *pj = proj_create(ctx, buf ? buf : text);
    cf_status st;
    if (!pj) {
        char head[64];
        cf__name_fit(text, strlen(text), head, sizeof head);
        const char *why = cf__proj_msg(ctx);
        st = cf__err(err, CF_E_ARG, "not a CRS PROJ can read: '%s'%s%s", head,
                     *why ? ": " : "", why);
    } else {
        st = cf__crs_wrap(ctx, pj, written, out, err);
        if (st == CF_E_ARG) cf__err_prefix(err, st, "'%.60s'", text);
    }
    cf__proj_put(ctx);
    free(buf);
    return st;
}

cf_status cf_crs_from_epsg(int code, cf_crs **out, cf_error *err) {
    if (!out) return cf__err(err, CF_E_ARG, "cf_crs_from_epsg: NULL argument");
    *out = NULL;
    if (code <= 0) return cf__err(err, CF_E_ARG, "EPSG code %d out of range", code);
    PJ_CONTEXT *ctx = cf__proj_get();
    if (!ctx) return cf__err(err, CF_E_NOMEM, "out of memory (PROJ context)");
    char k[16];
    snprintf(k, sizeof k, "%d", code);
    PJ *pj = proj_create_from_database(ctx, "EPSG", k, PJ_CATEGORY_CRS, 0, NULL);
    cf_status st = pj ? cf__crs_wrap(ctx, pj, code, out, err)
                      : cf__err(err, CF_E_ARG, "EPSG:%d is not a CRS in PROJ's database",
                                code);
    cf__proj_put(ctx);
    return st;
}

cf_crs *cf_crs_ref(const cf_crs *crs) {
    cf_crs *c = (cf_crs *)crs;
    if (c) atomic_fetch_add(&c->refs, 1);
    return c;
}

void cf_crs_free(cf_crs *crs) {
    if (crs && atomic_fetch_sub(&crs->refs, 1) == 1) crs_destroy(crs);
}

int cf_crs_epsg(const cf_crs *crs) { return crs ? crs->epsg : 0; }
int cf_crs_epsg_written(const cf_crs *crs) { return crs ? crs->epsg_written : 0; }
const char *cf_crs_name(const cf_crs *crs) { return crs ? crs->name : ""; }
cf_crs_kind cf_crs_kind_of(const cf_crs *crs) { return crs ? crs->kind : CF_CRS_OTHER; }
double cf_crs_linear_unit(const cf_crs *crs) { return crs ? crs->linear_unit : 0; }

enum { S_WKT, S_JSON, S_STR };

/* One of the strings, made on first use under the lock. */
static const char *lazy(const cf_crs *crs, int which) {
    if (!crs) return "";
    cf_crs *c = (cf_crs *)crs;
    char **slot = which == S_WKT ? &c->wkt : which == S_JSON ? &c->projjson : &c->str;
    pthread_mutex_lock(&c->mu);
    if (!*slot) {
        if (which == S_STR && c->epsg) {
            char b[24];
            snprintf(b, sizeof b, "EPSG:%d", c->epsg);
            *slot = cf__strdup(b);
        } else {
            PJ_CONTEXT *ctx = cf__proj_get();
            const char *s = NULL;
            if (ctx) {
                proj_assign_context(c->pj, ctx);
                s = which == S_JSON ? proj_as_projjson(ctx, c->pj, NULL)
                                    : proj_as_wkt(ctx, c->pj, PJ_WKT2_2019, NULL);
                *slot = s ? cf__strdup(s) : NULL;
            }
            cf__proj_put(ctx);
        }
    }
    const char *r = *slot ? *slot : "";
    pthread_mutex_unlock(&c->mu);
    return r;
}

const char *cf_crs_wkt(const cf_crs *crs) { return lazy(crs, S_WKT); }
const char *cf_crs_projjson(const cf_crs *crs) { return lazy(crs, S_JSON); }
const char *cf_crs_to_string(const cf_crs *crs) { return lazy(crs, S_STR); }

int cf_crs_equivalent(const cf_crs *a, const cf_crs *b) {
    if (a == b) return 1;
    if (!a || !b) return 0;
    /* One code is one definition in PROJ's database. */
    if (a->epsg && a->epsg == b->epsg && a->epsg_written == a->epsg &&
        b->epsg_written == b->epsg)
        return 1;
    cf_crs *x = (cf_crs *)(a < b ? a : b), *y = (cf_crs *)(a < b ? b : a);
    pthread_mutex_lock(&x->mu);
    pthread_mutex_lock(&y->mu);
    PJ_CONTEXT *ctx = cf__proj_get();
    int eq = 0;
    if (ctx) {
        proj_assign_context(x->horiz, ctx);
        proj_assign_context(y->horiz, ctx);
        eq = proj_is_equivalent_to_with_ctx(ctx, x->horiz, y->horiz,
                                            PJ_COMP_EQUIVALENT_EXCEPT_AXIS_ORDER_GEOGCRS);
    }
    cf__proj_put(ctx);
    pthread_mutex_unlock(&y->mu);
    pthread_mutex_unlock(&x->mu);
    return eq;
}

void cf__crs_label(const cf_crs *crs, char *out, size_t outlen) {
    if (!crs) snprintf(out, outlen, "no CRS");
    else if (crs->epsg) snprintf(out, outlen, "EPSG:%d (%s)", crs->epsg, crs->name);
    else snprintf(out, outlen, "'%s' (user-defined)", crs->name);
}
