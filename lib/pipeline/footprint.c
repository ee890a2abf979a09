/*
 * footprint.c - where each scene of a sample file has pixels on the
 * file's target grid (footprint.h): a rectangle of target pixels per
 * scene, from its placement (read as it lies: exact) or its outline
 * transformed into the target's CRS (resampled: the outline's bounds,
 * padded by the kernels' reach and by how much the outline bends between
 * its samples), so that a patch no scene reaches is known before anything
 * is read (cf_loader_options.skip_empty; a mosaic's later scenes).  Where
 * that cannot be sure, the footprint is everything: a footprint too small
 * would drop pixels.
 */
#include "footprint.h"

#include <math.h>
#include <stdlib.h>

/* Target pixels around a resampled scene's outline that may still get a
 * value: the widest kernel's reach (cubic, 2 source pixels) at up to 4x
 * downsampling. */
#define FP_PAD 8.0
/* Points along each edge of a scene's outline (the even ones are the
 * coarse outline whose bend the odd ones measure). */
#define FP_EDGE 41

struct cf__fp {
    size_t nfiles, T;
    double *rect;              /* [f][t][4]: x0, y0, x1, y1, target pixels */
};

/* A rectangle covering everything: where the footprint is not known. */
static void whole(double *r) {
    r[0] = r[1] = -INFINITY;
    r[2] = r[3] = INFINITY;
}

/* Longitudes x[0..n) brought within 180 degrees of the first (an outline
 * across the antimeridian is not the whole world); 0 when they then span
 * more than 180 degrees (not known). */
static int unwrap_lons(double *x, int n) {
    double lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        x[i] = x[0] + remainder(x[i] - x[0], 360.0);
        lo = fmin(lo, x[i]);
        hi = fmax(hi, x[i]);
    }
    return hi - lo <= 180;
}

/* The bounds of n target CRS points in pixels of grid g, padded by
 * FP_PAD and by `bend` pixels; on a geographic grid, the copy of the
 * rectangle, 360 degrees apart, that the grid meets (the warp reads
 * longitudes past 180 round the world).  0 when not known: a rotated
 * geographic grid, or several copies in the grid. */
static int bounds_rect(const cf_grid *g, const double *x, const double *y, int n, double bend,
                       double *r) {
    const int geo = cf_crs_kind_of(g->crs) == CF_CRS_GEOGRAPHIC;
    const double *d = g->transform;
    if (geo && (d[2] != 0 || d[4] != 0)) return 0;
    double det = d[1] * d[5] - d[2] * d[4];
    r[0] = r[1] = INFINITY;
    r[2] = r[3] = -INFINITY;
    for (int i = 0; i < n; i++) {
        double X = x[i] - d[0], Y = y[i] - d[3];
        double px = (d[5] * X - d[2] * Y) / det, py = (d[1] * Y - d[4] * X) / det;
        r[0] = fmin(r[0], px);
        r[1] = fmin(r[1], py);
        r[2] = fmax(r[2], px);
        r[3] = fmax(r[3], py);
    }
    r[0] -= FP_PAD + bend;
    r[1] -= FP_PAD + bend;
    r[2] += FP_PAD + bend;
    r[3] += FP_PAD + bend;
    if (geo) {
        const double turn = 360.0 / fabs(d[1]);
        int met = 0;
        double at = 0;
        for (int k = -2; k <= 2; k++) {
            double s = k * turn;
            if (r[0] + s < g->width && r[2] + s > 0) met++, at = s;
        }
        if (met > 1) return 0;
        r[0] += at;
        r[2] += at;
    }
    return 1;
}

/* Scene img's outline in target pixels of grid g (xf: its CRS -> the
 * grid's; NULL: the same CRS): FP_EDGE points an edge, padded by the most
 * any odd point strays from the chord of its even neighbours (the bend
 * the coarse outline misses; the bounds of the fine one miss about a
 * quarter of it).  0 when not known: a point that does not transform or
 * is not finite, an outline wider than 180 degrees on a geographic grid. */
static int outline_rect(const cf_cog *img, const cf_grid *g, cf__xform *xf, double *r) {
    cf_grid sg;
    cf_error e;
    if (cf_cog_grid(img, 0, &sg, &e) != CF_OK) return 0;
    enum { S = FP_EDGE };
    double x[4 * S], y[4 * S];
    uint8_t ok[4 * S];
    cf__sg_outline(&sg, S, x, y);
    if (xf) cf__xform_run(xf, 4 * S, x, y, ok);
    for (int i = 0; i < 4 * S; i++)
        if ((xf && !ok[i]) || !isfinite(x[i]) || !isfinite(y[i])) return 0;
    if (cf_crs_kind_of(g->crs) == CF_CRS_GEOGRAPHIC && !unwrap_lons(x, 4 * S)) return 0;
    const double *d = g->transform;
    const double res = fmin(hypot(d[1], d[4]), hypot(d[2], d[5]));
    double bend = 0;
    for (int i = 4; i < 4 * S - 4; i++)
        if ((i / 4) % 2 == 1) /* odd: against the chord of its neighbours */
            bend = fmax(bend, fmax(fabs(x[i] - (x[i - 4] + x[i + 4]) / 2),
                                   fabs(y[i] - (y[i - 4] + y[i + 4]) / 2)) / res);
    return isfinite(bend) && bounds_rect(g, x, y, 4 * S, bend, r);
}

/* Scene img (placed as `in` on target grid g, pixels of `level`) as a
 * rectangle of target pixels. */
static cf_status scene_rect(cf__sg *sg, const cf_cog *img, const cf__sg_input *in,
                            const cf_grid *g, int level, double *r, cf_error *err) {
    if (in->how == CF__SG_DIRECT) {
        /* Its pixel x + dx is the target's x. */
        cf_level_info li;
        CF__TRY(cf_cog_level_info(img, level, &li, err));
        r[0] = (double)-in->dx;
        r[1] = (double)-in->dy;
        r[2] = r[0] + li.width;
        r[3] = r[1] + li.height;
        return CF_OK;
    }
    /* Where not known, everything (never skipped): no CRS, an outline
     * that does not transform (a scene past the target CRS's area). */
    whole(r);
    if (!g || !g->crs || !img->crs) return CF_OK;
    cf__xform *xf = NULL;
    cf_error e2;
    if (!cf_crs_equivalent(img->crs, g->crs) &&
        cf__sg_xform(sg, img->crs, g->crs, &xf, &e2) != CF_OK)
        return CF_OK;
    double o[4];
    if (outline_rect(img, g, xf, o)) memcpy(r, o, sizeof o);
    return CF_OK;
}

cf_status cf__fp_new(cf__sg *sg, cf_cog *const *img, size_t nfiles, size_t T, int level,
                     cf__fp **out, cf_error *err) {
    *out = NULL;
    cf__fp *fp = cf__calloc(1, sizeof *fp);
    if (fp) fp->rect = cf__calloc(nfiles * T * 4, sizeof *fp->rect);
    if (!fp || !fp->rect) {
        cf__fp_free(fp);
        return cf__err(err, CF_E_NOMEM, "loader: footprints of %zu scenes", nfiles * T);
    }
    fp->nfiles = nfiles;
    fp->T = T;
    for (size_t f = 0; f < nfiles; f++)
        for (size_t t = 0; t < T; t++) {
            size_t i = f * T + t;
            cf_status st = scene_rect(sg, img[i], cf__sg_input_at(sg, i), cf__sg_grid(sg, f),
                                      level, fp->rect + 4 * i, err);
            if (st != CF_OK) {
                cf__fp_free(fp);
                return cf__err_prefix(err, st, "loader: footprint of %s", cf_cog_name(img[i]));
            }
        }
    *out = fp;
    return CF_OK;
}

void cf__fp_free(cf__fp *fp) {
    if (!fp) return;
    free(fp->rect);
    free(fp);
}

int cf__fp_meets(const cf__fp *fp, size_t f, size_t t, int64_t x, int64_t y, uint32_t w,
                 uint32_t h) {
    const double x0 = (double)x, y0 = (double)y, x1 = x0 + w, y1 = y0 + h;
    const double *r = fp->rect + 4 * (f * fp->T + t);
    return x0 < r[2] && r[0] < x1 && y0 < r[3] && r[1] < y1;
}

uint64_t cf__fp_points(const cf__fp *fp, size_t f, size_t t, int64_t x, int64_t y, uint32_t w,
                       uint32_t h) {
    const double *r = fp->rect + 4 * (f * fp->T + t);
    uint64_t bits = 0;
    for (uint32_t j = 0; j < 8; j++) {
        /* the pixel under the point (its left / top edge) */
        const double py = (double)y + floor((j + 0.5) * h / 8.0);
        if (!(py + 1 > r[1] && py < r[3])) continue;
        for (uint32_t i = 0; i < 8; i++) {
            const double px = (double)x + floor((i + 0.5) * w / 8.0);
            if (px + 1 > r[0] && px < r[2]) bits |= (uint64_t)1 << (j * 8 + i);
        }
    }
    return bits;
}

int cf__fp_covers(const cf__fp *fp, size_t f, int64_t x, int64_t y, uint32_t w, uint32_t h) {
    for (size_t t = 0; t < fp->T; t++)
        if (cf__fp_meets(fp, f, t, x, y, w, h)) return 1;
    return 0;
}
