/*
 * grid.c - grids (CRS + geotransform + size), their constructors, the
 * affine inverse, and the kernel names.  Plain arithmetic: PROJ is not
 * called here.
 */
#include "geo.h"

#include <math.h>
#include <stdio.h>
#include <strings.h>

/* As GDALInvGeoTransform computes it (the north-up case without a
 * determinant), so that source positions come out with the same rounding
 * as in GDAL's warper. */
int cf__grid_valid(const cf_grid *g) {
    int finite = 1;
    for (int k = 0; k < 6; k++) finite &= isfinite(g->transform[k]) != 0;
    double det = g->transform[1] * g->transform[5] - g->transform[2] * g->transform[4];
    return g->width && g->height && g->width <= CF_MAX_DIMENSION &&
           g->height <= CF_MAX_DIMENSION && finite && det != 0;
}

int cf__gt_invert(const double g[6], double inv[6]) {
    if (g[2] == 0.0 && g[4] == 0.0 && g[1] != 0.0 && g[5] != 0.0) {
        inv[0] = -g[0] / g[1];
        inv[1] = 1.0 / g[1];
        inv[2] = 0.0;
        inv[3] = -g[3] / g[5];
        inv[4] = 0.0;
        inv[5] = 1.0 / g[5];
        return 1;
    }
    double det = g[1] * g[5] - g[2] * g[4];
    double mag = fmax(fmax(fabs(g[1]), fabs(g[2])), fmax(fabs(g[4]), fabs(g[5])));
    if (!(fabs(det) > 1e-10 * mag * mag)) return 0;
    double id = 1.0 / det;
    inv[1] = g[5] * id;
    inv[4] = -g[4] * id;
    inv[2] = -g[2] * id;
    inv[5] = g[1] * id;
    inv[0] = (g[2] * g[3] - g[0] * g[5]) * id;
    inv[3] = (-g[1] * g[3] + g[0] * g[4]) * id;
    return 1;
}

cf_status cf_grid_from_bounds(const cf_crs *crs, const double b[4], double xres,
                              double yres, cf_grid *out, cf_error *err) {
    if (!b || !out) return cf__err(err, CF_E_ARG, "cf_grid_from_bounds: NULL argument");
    for (int i = 0; i < 4; i++)
        if (!isfinite(b[i]))
            return cf__err(err, CF_E_ARG, "grid bounds must be finite numbers");
    if (!(xres > 0) || !(yres > 0) || !isfinite(xres) || !isfinite(yres))
        return cf__err(err, CF_E_ARG, "grid resolution (%g, %g) must be > 0", xres, yres);
    if (!(b[2] > b[0]) || !(b[3] > b[1]))
        return cf__err(err, CF_E_ARG, "grid bounds (%g, %g, %g, %g) are empty: want "
                       "xmin < xmax and ymin < ymax", b[0], b[1], b[2], b[3]);
    double w = (b[2] - b[0] + xres / 2.0) / xres, h = (b[3] - b[1] + yres / 2.0) / yres;
    if (!(w >= 1) || !(h >= 1) || w > CF_MAX_DIMENSION || h > CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG,
                       "grid of %.0f x %.0f pixels: each side must be 1..%u (bounds "
                       "%g, %g, %g, %g at resolution %g, %g)",
                       floor(w), floor(h), (unsigned)CF_MAX_DIMENSION, b[0], b[1], b[2], b[3],
                       xres, yres);
    out->crs = crs;
    out->width = (uint32_t)w;
    out->height = (uint32_t)h;
    out->transform[0] = b[0];
    out->transform[1] = xres;
    out->transform[2] = 0;
    out->transform[3] = b[3];
    out->transform[4] = 0;
    out->transform[5] = -yres;
    return CF_OK;
}

cf_status cf_grid_window(const cf_grid *g, int64_t x, int64_t y, uint32_t w, uint32_t h,
                         cf_grid *out, cf_error *err) {
    if (!g || !out) return cf__err(err, CF_E_ARG, "cf_grid_window: NULL argument");
    if (w == 0 || h == 0 || w > CF_MAX_DIMENSION || h > CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "window size %ux%u invalid", w, h);
    const double *t = g->transform;
    cf_grid o = *g;
    o.transform[0] = t[0] + (double)x * t[1] + (double)y * t[2];
    o.transform[3] = t[3] + (double)x * t[4] + (double)y * t[5];
    o.width = w;
    o.height = h;
    *out = o;
    return CF_OK;
}

void cf_grid_bounds(const cf_grid *g, double out[4]) {
    const double *t = g->transform;
    double xs[4], ys[4];
    for (int i = 0; i < 4; i++) {
        double px = (i & 1) ? g->width : 0, py = (i & 2) ? g->height : 0;
        xs[i] = t[0] + px * t[1] + py * t[2];
        ys[i] = t[3] + px * t[4] + py * t[5];
    }
    out[0] = fmin(fmin(xs[0], xs[1]), fmin(xs[2], xs[3]));
    out[1] = fmin(fmin(ys[0], ys[1]), fmin(ys[2], ys[3]));
    out[2] = fmax(fmax(xs[0], xs[1]), fmax(xs[2], xs[3]));
    out[3] = fmax(fmax(ys[0], ys[1]), fmax(ys[2], ys[3]));
}

static const char *const rs_names[CF_RS_COUNT] = {"nearest", "bilinear", "cubic", "average",
                                                  "mode"};

const char *cf_resampling_name(cf_resampling r) {
    return (unsigned)r < CF_RS_COUNT ? rs_names[r] : "unknown";
}

cf_status cf_resampling_from_name(const char *name, cf_resampling *out, cf_error *err) {
    if (!name || !out) return cf__err(err, CF_E_ARG, "cf_resampling_from_name: NULL argument");
    for (int i = 0; i < CF_RS_COUNT; i++)
        if (!strcasecmp(name, rs_names[i])) {
            *out = (cf_resampling)i;
            return CF_OK;
        }
    if (!strcasecmp(name, "near")) {
        *out = CF_RS_NEAREST;
        return CF_OK;
    }
    return cf__err(err, CF_E_ARG,
                   "unknown resampling '%.40s': use nearest, bilinear, cubic, average or "
                   "mode",
                   name);
}

void cf_warp_options_init(cf_warp_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->resampling = CF_RS_NEAREST;
    o->level = CF_LEVEL_AUTO;
    o->error_threshold = 0.125;
    o->src_nodata_set = -1;
    o->dst_nodata_set = -1;
    o->level_used = -1;
}
