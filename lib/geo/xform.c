/*
 * xform.c - cf__xform: one PROJ coordinate operation between two CRSs.
 *
 * PROJ picks the operation (proj_create_crs_to_crs_from_pj keeps the
 * candidates and uses, for each point, the best one whose area of use
 * contains it, as GDAL's OGRCreateCoordinateTransformation does), and
 * proj_normalize_for_visualization makes it take and give x = easting or
 * longitude, y = northing or latitude: GeoTIFF's order, whatever the CRS's
 * official axis order.  Calls are serialised on the object's lock, each
 * with a context borrowed for the call.
 */
#include "geo_internal.h"

#include <math.h>
#include <stdlib.h>

struct cf__xform {
    pthread_mutex_t mu;
    PJ *op;
};

cf_status cf__xform_new(const cf_crs *from, const cf_crs *to, cf__xform **out,
                        cf_error *err) {
    *out = NULL;
    if (!from || !to) return cf__err(err, CF_E_ARG, "transformation needs two CRSs");
    cf__xform *t = cf__calloc(1, sizeof *t);
    PJ_CONTEXT *ctx = cf__proj_get();
    if (!t || !ctx) {
        free(t);
        cf__proj_put(ctx);
        return cf__err(err, CF_E_NOMEM, "out of memory");
    }
    pthread_mutex_init(&t->mu, NULL);
    cf_crs *a = (cf_crs *)from, *b = (cf_crs *)to;
    cf_crs *x = a < b ? a : b, *y = a < b ? b : a;
    pthread_mutex_lock(&x->mu);
    if (y != x) pthread_mutex_lock(&y->mu);
    proj_assign_context(a->horiz, ctx);
    proj_assign_context(b->horiz, ctx);
    PJ *op = proj_create_crs_to_crs_from_pj(ctx, a->horiz, b->horiz, NULL, NULL);
    if (y != x) pthread_mutex_unlock(&y->mu);
    pthread_mutex_unlock(&x->mu);
    PJ *norm = op ? proj_normalize_for_visualization(ctx, op) : NULL;
    proj_destroy(op);
    cf_status st = CF_OK;
    if (!norm) {
        char la[160], lb[160];
        cf__crs_label(from, la, sizeof la);
        cf__crs_label(to, lb, sizeof lb);
        const char *why = cf__proj_msg(ctx);
        st = cf__err(err, CF_E_UNSUPPORTED,
                     "PROJ has no transformation from %s to %s%s%s", la, lb,
                     *why ? ": " : "", why);
        pthread_mutex_destroy(&t->mu);
        free(t);
        t = NULL;
    } else {
        t->op = norm;
    }
    cf__proj_put(ctx);
    *out = t;
    return st;
}

void cf__xform_free(cf__xform *t) {
    if (!t) return;
    PJ_CONTEXT *ctx = cf__proj_get();
    if (ctx) proj_assign_context(t->op, ctx);
    proj_destroy(t->op);
    cf__proj_put(ctx);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void cf__xform_run(cf__xform *t, size_t n, double *x, double *y, uint8_t *ok) {
    if (!n) return;
    pthread_mutex_lock(&t->mu);
    PJ_CONTEXT *ctx = cf__proj_get();
    if (ctx) {
        proj_assign_context(t->op, ctx);
        proj_trans_generic(t->op, PJ_FWD, x, sizeof *x, n, y, sizeof *y, n, NULL, 0,
                           0, NULL, 0, 0);
    }
    cf__proj_put(ctx);
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        int good = ctx && isfinite(x[i]) && isfinite(y[i]) && x[i] != HUGE_VAL &&
                   y[i] != HUGE_VAL;
        ok[i] = (uint8_t)good;
        if (!good) x[i] = y[i] = HUGE_VAL;
    }
}
