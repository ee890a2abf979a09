/*
 * footprint.c - where each scene of a sample file has pixels on the
 * file's target grid (footprint.h): a rectangle of target pixels per
 * scene, from its placement (read as it lies: exact) or its outline
 * transformed into the target's CRS (resampled: the outline's bounds,
 * padded by the kernels' reach), so that a patch no scene reaches is known
 * before anything is read (cf_loader_options.skip_empty).
 */
#include "footprint.h"

#include <math.h>
#include <stdlib.h>

/* Target pixels around a resampled scene's outline that may still get a
 * value: the widest kernel's reach (cubic, 2 source pixels) at up to 4x
 * downsampling, and the outline sampled at 21 points per edge. */
#define FP_PAD 8.0

struct cf__fp {
    size_t nfiles, T;
    double *rect;              /* [f][t][4]: x0, y0, x1, y1, target pixels */
};

/* A rectangle covering everything: where the footprint is not known. */
static void whole(double *r) {
    r[0] = r[1] = -INFINITY;
    r[2] = r[3] = INFINITY;
}

/* Scene img (placed as `in` on target grid g, pixels of `level`) as a
 * rectangle of target pixels. */
static cf_status scene_rect(const cf_cog *img, const cf__sg_input *in, const cf_grid *g,
                            int level, double *r, cf_error *err) {
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
    double b[4];
    int all;
    cf_error e2;
    /* Outline points that fail to transform (a scene past the target
     * CRS's area): not known, never skipped. */
    if (!g || !g->crs || cf__sg_footprint(img, g->crs, b, &all, &e2) != CF_OK || !all) {
        whole(r);
        return CF_OK;
    }
    /* The bounds' corners in target pixels (the inverse geotransform). */
    const double *t = g->transform;
    double det = t[1] * t[5] - t[2] * t[4];
    r[0] = r[1] = INFINITY;
    r[2] = r[3] = -INFINITY;
    for (int k = 0; k < 4; k++) {
        double X = b[k & 1 ? 2 : 0] - t[0], Y = b[k & 2 ? 3 : 1] - t[3];
        double px = (t[5] * X - t[2] * Y) / det, py = (t[1] * Y - t[4] * X) / det;
        r[0] = fmin(r[0], px);
        r[1] = fmin(r[1], py);
        r[2] = fmax(r[2], px);
        r[3] = fmax(r[3], py);
    }
    r[0] -= FP_PAD;
    r[1] -= FP_PAD;
    r[2] += FP_PAD;
    r[3] += FP_PAD;
    return CF_OK;
}

cf_status cf__fp_new(const cf__sg *sg, cf_cog *const *img, size_t nfiles, size_t T, int level,
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
            cf_status st = scene_rect(img[i], cf__sg_input_at(sg, i), cf__sg_grid(sg, f),
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
