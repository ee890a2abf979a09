/*
 * resample.c - source pixels onto target pixels, kernel by kernel, as
 * GDAL's warp kernel computes them (alg/gdalwarpkernel.cpp, GDAL 3.6 is
 * the oracle of tests/python/test_geo_warp.py):
 *
 *  - a target pixel is computed only when its centre falls inside the
 *    source window (which is clipped to the raster), and, when a mask
 *    exists, on a valid source pixel (nearest, bilinear, cubic);
 *  - nearest copies the sample under the centre;
 *  - bilinear and cubic use GDAL's 2x2 and 4x4 kernels while the target
 *    is not coarser (scale >= 0.95); cubic falls back to bilinear at the
 *    window's border and, with masks, when any tap is invalid; coarser
 *    targets widen the kernel by the ratio and weigh every tap;
 *  - taps outside the window or invalid do not contribute: the weights of
 *    the others are renormalised;
 *  - average weighs each source pixel by its overlap with the target
 *    pixel's footprint (from two transformed corners), mode takes the most
 *    frequent value (first to lead wins; GDAL's exact procedure for float
 *    and 32-bit data);
 *  - values are rounded half up, clamped, and moved off the destination
 *    nodata (cf__rs_store, in resample_px.c).
 *
 * Arithmetic is double, in GDAL's order of operations, so results match
 * GDAL's bit for bit for nearest and mode and to within a unit of the
 * last place otherwise (docs/conformance.md has the measured differences).
 * The affine no-mask case (and nearest and 2x2 bilinear with masks) goes
 * to the separable fast path (resample_sep.c).
 */
#include "resample_internal.h"

#include <limits.h>
#include <stdlib.h>

/* ------------------------------------------------------------- masks */

/* The range of an integer type of up to 32 bits (nodata tests of
 * nodata_mask and has_nodata_int); 0 for other types. */
static int int32_range(cf_dtype t, double *lo, double *hi) {
    switch (t) {
    case CF_DT_U8: *lo = 0, *hi = UINT8_MAX; return 1;
    case CF_DT_I8: *lo = INT8_MIN, *hi = INT8_MAX; return 1;
    case CF_DT_U16: *lo = 0, *hi = UINT16_MAX; return 1;
    case CF_DT_I16: *lo = INT16_MIN, *hi = INT16_MAX; return 1;
    case CF_DT_U32: *lo = 0, *hi = UINT32_MAX; return 1;
    case CF_DT_I32: *lo = INT32_MIN, *hi = INT32_MAX; return 1;
    default: return 0;
    }
}

/* (geo.h) */
int cf__warp_nodata_mask(cf_dtype dtype, double nd, const void *band, size_t n, uint8_t *m) {
    int invalid = 0;
    if (dtype == CF_DT_F32 || dtype == CF_DT_F64) {
        int is_nan = isnan(nd);
        float fnd = (float)nd;
        for (size_t k = 0; k < n; k++) {
            double v = dtype == CF_DT_F32 ? ((const float *)band)[k] : ((const double *)band)[k];
            double ref = dtype == CF_DT_F32 ? (double)fnd : nd;
            int bad = is_nan ? isnan(v)
                             : (v == ref || fabs(v - ref) < 1e-10 ||
                                (ref != 0 && fabs(1 - v / ref) < 1e-10));
            m[k] = (uint8_t)!bad;
            invalid |= bad;
        }
        return invalid;
    }
    double lo, hi;
    if (!int32_range(dtype, &lo, &hi)) lo = -9.2e18, hi = 1.8e19;
    if (isnan(nd) || nd < lo || nd > hi + 0.000001) {
        memset(m, 1, n);
        return 0;
    }
    double want = floor(nd + 0.000001);
    /* Integers of up to 32 bits hold `want` exactly (in range, checked
     * above): one typed comparison per sample. */
#define ND_MASK(T)                                                               \
    do {                                                                         \
        const T *p = band, v = (T)want;                                          \
        for (size_t k = 0; k < n; k++) {                                         \
            int bad = p[k] == v;                                                 \
            m[k] = (uint8_t)!bad;                                                \
            invalid |= bad;                                                      \
        }                                                                        \
        return invalid;                                                          \
    } while (0)
    if (want <= hi) switch (dtype) {
        case CF_DT_U8: ND_MASK(uint8_t);
        case CF_DT_I8: ND_MASK(int8_t);
        case CF_DT_U16: ND_MASK(uint16_t);
        case CF_DT_I16: ND_MASK(int16_t);
        case CF_DT_U32: ND_MASK(uint32_t);
        case CF_DT_I32: ND_MASK(int32_t);
        default: break;
        }
#undef ND_MASK
    for (size_t k = 0; k < n; k += 4096) {
        double buf[4096];
        size_t c = n - k < 4096 ? n - k : 4096;
        cf__rs_to_double(dtype, (const uint8_t *)band + k * cf_dtype_size(dtype), c, buf);
        for (size_t q = 0; q < c; q++) {
            int bad = buf[q] == want;
            m[k + q] = (uint8_t)!bad;
            invalid |= bad;
        }
    }
    return invalid;
}

/* The masks GDAL's warper builds (GDALWarpOperation::WarpRegionInternal):
 * per-band nodata masks, dropped when every pixel is valid; one band's
 * mask becomes the unified one, several bands' are OR-ed into it (a pixel
 * is invalid only when every band is nodata) and kept per band; the
 * internal mask is the unified mask only when nodata made none. */
/* 1 when some sample of an integer band up to 32 bits equals the nodata
 * as cf__warp_nodata_mask() tests it (those types hold the nodata exactly, so the
 * typed comparison is the double one); -1 for other types (not known). */
static int has_nodata_int(const cf__warp_src *s, const void *band, size_t n) {
    double nd = s->nodata, lo, hi;
    if (!int32_range(s->dtype, &lo, &hi)) return -1;
    if (isnan(nd) || nd < lo || nd > hi + 0.000001) return 0;
    double want = floor(nd + 0.000001);
    if (want > hi) return 0; /* no sample can equal it */
    int found = 0;
#define ND_SCAN(T)                                                               \
    do {                                                                         \
        const T *p = band, v = (T)want;                                          \
        for (size_t k = 0; k < n; k++) found |= p[k] == v;                       \
    } while (0)
    switch (s->dtype) {
    case CF_DT_U8: ND_SCAN(uint8_t); break;
    case CF_DT_I8: ND_SCAN(int8_t); break;
    case CF_DT_U16: ND_SCAN(uint16_t); break;
    case CF_DT_I16: ND_SCAN(int16_t); break;
    case CF_DT_U32: ND_SCAN(uint32_t); break;
    default: ND_SCAN(int32_t); break;
    }
#undef ND_SCAN
    return found;
}

static cf_status build_masks(rs_call *c, cf_error *err) {
    const cf__warp_src *s = c->src;
    size_t n = (size_t)c->W * c->H;
    int nb = s->nbands;
    int scan = s->has_nodata;
    /* The usual window holds no nodata at all: one typed pass says so,
     * and no mask is built (the masks would be dropped below). */
    for (int b = 0; scan && b < nb; b++)
        scan = has_nodata_int(s, (const uint8_t *)s->data + (size_t)b * n * c->bps, n) == 0;
    if (s->has_nodata && !scan) {
        c->band = cf__calloc((size_t)nb, sizeof *c->band);
        if (!c->band) return cf__err(err, CF_E_NOMEM, "out of memory");
        int any = 0;
        for (int b = 0; b < nb; b++) {
            c->band[b] = cf__malloc(n);
            if (!c->band[b]) return cf__err(err, CF_E_NOMEM, "out of memory");
            const uint8_t *band = (const uint8_t *)s->data + (size_t)b * n * c->bps;
            any |= cf__warp_nodata_mask(s->dtype, s->nodata, band, n, c->band[b]);
        }
        if (!any) {
            for (int b = 0; b < nb; b++) free(c->band[b]);
            free(c->band);
            c->band = NULL;
        } else if (nb == 1) {
            c->unified = c->band[0];
            free(c->band);
            c->band = NULL;
        } else {
            c->unified = cf__calloc(n, 1);
            if (!c->unified) return cf__err(err, CF_E_NOMEM, "out of memory");
            for (int b = 0; b < nb; b++)
                for (size_t k = 0; k < n; k++) c->unified[k] |= c->band[b][k];
        }
    }
    if (!c->unified && s->valid) {
        int any = 0;
        for (size_t k = 0; k < n && !any; k++) any = !s->valid[k];
        if (any) {
            c->unified = cf__malloc(n);
            if (!c->unified) return cf__err(err, CF_E_NOMEM, "out of memory");
            for (size_t k = 0; k < n; k++) c->unified[k] = s->valid[k] != 0;
        }
    }
    c->masks = c->unified || c->band;
    if (!c->masks) return CF_OK;
    c->tapvalid = cf__calloc((size_t)nb, sizeof *c->tapvalid);
    if (!c->tapvalid) return cf__err(err, CF_E_NOMEM, "out of memory");
    for (int b = 0; b < nb; b++) {
        if (!c->band) {
            c->tapvalid[b] = c->unified;
            continue;
        }
        c->tapvalid[b] = cf__malloc(n);
        if (!c->tapvalid[b]) return cf__err(err, CF_E_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) c->tapvalid[b][k] = c->band[b][k] & c->unified[k];
    }
    return CF_OK;
}

static void free_masks(rs_call *c) {
    int nb = c->src->nbands;
    if (c->tapvalid && c->band)
        for (int b = 0; b < nb; b++) free(c->tapvalid[b]);
    free(c->tapvalid);
    if (c->band)
        for (int b = 0; b < nb; b++) free(c->band[b]);
    free(c->band);
    free(c->unified);
}

/* ----------------------------------------------------------- kernels */

/* GDAL's test that a centre lies in the window, and the pixel under it
 * (GWKCheckAndComputeSrcOffsets). */
static int centre_pixel(const rs_call *c, double sx, double sy, size_t *off) {
    if (sx < 0 || sy < 0) return 0;
    if (sx + 1e-10 > c->W || sy + 1e-10 > c->H) return 0;
    uint32_t ix = (uint32_t)(sx + 1e-10), iy = (uint32_t)(sy + 1e-10);
    if (ix == c->W) ix--;
    if (iy == c->H) iy--;
    *off = (size_t)iy * c->W + ix;
    return 1;
}

/* 4x4 cubic without masks (GWKCubicResampleNoMasks4SampleT). */
static double cub4_nomask(const rs_call *c, const double *P, double sx, double sy) {
    int64_t W = c->W, H = c->H;
    int64_t ix = (int64_t)(sx - 0.5), iy = (int64_t)(sy - 0.5);
    if (ix - 1 < 0 || ix + 2 >= W || iy - 1 < 0 || iy + 2 >= H) return cf__rs_bil4_nomask(c, P, sx, sy);
    double dx = sx - 0.5 - ix, dy = sy - 0.5 - iy;
    double cx[4], v[4];
    rs_cubic_coeffs(dx, cx);
    for (int r = 0; r < 4; r++) {
        const double *p = P + (iy - 1 + r) * W + ix - 1;
        v[r] = cx[0] * p[0] + cx[1] * p[1] + cx[2] * p[2] + cx[3] * p[3];
    }
    return rs_cubic_conv(dy, v[0], v[1], v[2], v[3]);
}

/* 4x4 cubic with masks (GWKCubicResample4Sample): bilinear unless all 16
 * taps are valid. */
static int cub4_mask(const rs_call *c, const double *P, const uint8_t *V, double sx, double sy,
                     double *out) {
    int64_t W = c->W, H = c->H;
    int64_t ix = (int64_t)(sx - 0.5), iy = (int64_t)(sy - 0.5);
    if (ix - 1 < 0 || ix + 2 >= W || iy - 1 < 0 || iy + 2 >= H)
        return cf__rs_bil4_mask(c, P, V, sx, sy, out);
    if (V)
        for (int r = 0; r < 4; r++)
            for (int q = 0; q < 4; q++)
                if (!V[(iy - 1 + r) * W + ix - 1 + q]) return cf__rs_bil4_mask(c, P, V, sx, sy, out);
    double cx[4], cy[4], v[4];
    rs_cubic_coeffs(sx - 0.5 - ix, cx);
    rs_cubic_coeffs(sy - 0.5 - iy, cy);
    for (int r = 0; r < 4; r++) {
        const double *p = P + (iy - 1 + r) * W + ix - 1;
        v[r] = cx[0] * p[0] + cx[1] * p[1] + cx[2] * p[2] + cx[3] * p[3];
    }
    *out = cy[0] * v[0] + cy[1] * v[1] + cy[2] * v[2] + cy[3] * v[3];
    return 1;
}

/* Widened kernel without masks, for coarser targets (GWKResampleNoMasksT). */
static double wide_nomask(const rs_call *c, const double *P, double sx, double sy) {
    int64_t W = c->W, H = c->H;
    int64_t ix = (int64_t)floor(sx - 0.5), iy = (int64_t)floor(sy - 0.5);
    if (ix >= W || iy >= H || c->rx > W || c->ry > H) return cf__rs_bil4_nomask(c, P, sx, sy);
    rs_filter_fn f = c->rq->rs == CF_RS_CUBIC ? rs_cubic_w : rs_bilinear_w;
    double dx = sx - 0.5 - ix, dy = sy - 0.5 - iy;
    double xs = fmin(c->xs, 1.0), ys = fmin(c->ys, 1.0);
    int64_t i0 = 1 - c->rx, i1 = c->rx, j0 = 1 - c->ry, j1 = c->ry;
    if (ix + i0 < 0) i0 = -ix;
    if (ix + i1 >= W - 1) i1 = W - 1 - ix;
    if (iy + j0 < 0) j0 = -iy;
    if (iy + j1 >= H - 1) j1 = H - 1 - iy;
    double wx[512], sumx = 0, sumy = 0, acc = 0;
    for (int64_t i = i0; i <= i1; i++) sumx += wx[i - i0] = f((i - dx) * xs);
    for (int64_t j = j0; j <= j1; j++) {
        const double *p = P + (iy + j) * W + ix;
        double local = 0;
        for (int64_t i = i0; i <= i1; i++) local += p[i] * wx[i - i0];
        double wy = f((j - dy) * ys);
        acc += wy * local;
        sumy += wy;
    }
    return acc / (sumx * sumy);
}

/* Widened kernel with masks (GWKResample): every valid tap weighed, the
 * sum renormalised unless it is within 1e-5 of 1. */
static int wide_mask(const rs_call *c, const double *P, const uint8_t *V, double sx, double sy,
                     double *out) {
    int64_t W = c->W, H = c->H;
    int64_t ix = (int64_t)floor(sx - 0.5), iy = (int64_t)floor(sy - 0.5);
    rs_filter_fn f = c->rq->rs == CF_RS_CUBIC ? rs_cubic_w : rs_bilinear_w;
    int rad = cf__warp_radius(c->rq->rs);
    double dx = sx - 0.5 - ix, dy = sy - 0.5 - iy;
    int64_t i0 = ((rad + 1) % 2) - c->rx, i1 = c->rx, j0 = ((rad + 1) % 2) - c->ry, j1 = c->ry;
    if (iy + j0 < 0) j0 = -iy;
    if (iy + j1 >= H) j1 = H - iy - 1;
    if (ix + i0 < 0) i0 = -ix;
    if (ix + i1 >= W) i1 = W - ix - 1;
    double wx[512];
    for (int64_t i = i0; i <= i1; i++)
        wx[i - i0] = c->xs < 1.0 ? f((i - dx) * c->xs) : f(i - dx);
    double acc = 0, accw = 0, accd = 0;
    for (int64_t j = j0; j <= j1; j++) {
        const double *p = P + (iy + j) * W + ix;
        const uint8_t *v = V ? V + (iy + j) * W + ix : NULL;
        double wy = c->ys < 1.0 ? f((j - dy) * c->ys) : f(j - dy);
        double lacc = 0, lw = 0, ld = 0;
        for (int64_t i = i0; i <= i1; i++) {
            if (v && !v[i]) continue;
            int64_t k = i - i0;
            lacc += p[i] * wx[k];
            ld += wx[k];
            lw += wx[k];
        }
        acc += lacc * wy;
        accd += ld * wy;
        accw += lw * wy;
    }
    if (accw < 0.000001 || (c->masks && accd < 0.000001)) return 0;
    *out = (accw < 0.99999 || accw > 1.00001) ? acc / accw : acc;
    return 1;
}

/* Average and mode: the footprint of target pixel (i, j) from its two
 * transformed corners (GWKAverageOrModeThread); 0 when GDAL skips it. */
typedef struct foot {
    int64_t x0, x1, y0, y1;    /* source pixels [x0, x1) x [y0, y1) */
    double fx0, fx1, fy0, fy1; /* the corners */
    int wrap;                  /* columns from W on are columns - W */
} foot;

/* Column x of a footprint in the window (past its end when it goes round
 * the antimeridian). */
static inline size_t fcol(const rs_call *c, const foot *f, int64_t x) {
    return (size_t)(f->wrap && x >= (int64_t)c->W ? x - c->W : x);
}

/* (x0, y0): the pixel's top-left corner, (x1, y1) its bottom-right one,
 * each from its own row of corners as GDAL transforms them. */
static int footprint(const rs_call *c, double x0, double y0, int ok0, double x1, double y1,
                     int ok1, foot *f) {
    if (!ok0 || !ok1) return 0;
    double W = c->W, H = c->H;
    int mx = c->mx, my = c->my;
    if (!(x0 >= -mx && x1 >= -mx && y0 >= -my && y1 >= -my && x0 - W <= mx && x1 - W <= mx &&
          y0 - H <= my && y1 - H <= my))
        return 0;
    if (x0 > x1) {
        double t = x0;
        x0 = x1, x1 = t;
    }
    if (y0 > y1) {
        double t = y0;
        y0 = y1, y1 = t;
    }
    f->wrap = 0;
    if (c->wrapx && W - (x1 - x0) <= c->mx) {
        /* Corners at the two ends of a whole turn, closer the short way
         * round than GDAL's margin (a pixel's footprint): the pixel lies
         * across the antimeridian, its footprint goes from x1 to x0 one
         * turn further; columns past the window's end are read from its
         * start.  (gdalwarp takes the long way, every column between the
         * corners: the mode or average of a whole band of latitude.) */
        double t = x0;
        x0 = x1, x1 = t + W;
        f->wrap = 1;
    }
    f->fx0 = x0, f->fx1 = x1, f->fy0 = y0, f->fy1 = y1;
    rs_span(x0, x1, f->wrap ? 2 * c->W : c->W, &f->x0, &f->x1);
    rs_span(y0, y1, c->H, &f->y0, &f->y1);
    return 1;
}

/* GDAL's overlap weights: the first and last row and column count the
 * covered fraction (computed from the unclamped corner, as GDAL does). */
static inline double weight_y(const foot *f, int64_t y) {
    if (y == f->y0) return f->y0 + 1 == f->y1 ? 1.0 : 1 - (f->fy0 - f->y0);
    if (y + 1 == f->y1) return 1 - (f->y1 - f->fy1);
    return 1.0;
}
static inline double weight_x(const foot *f, int64_t x, double wy) {
    if (x == f->x0) return f->x0 + 1 == f->x1 ? wy : wy * (1 - (f->fx0 - f->x0));
    if (x + 1 == f->x1) return wy * (1 - (f->x1 - f->fx1));
    return wy;
}

static int average(const rs_call *c, const double *P, const uint8_t *V, const foot *f,
                   double *out) {
    double tot = 0, tw = 0;
    for (int64_t y = f->y0; y < f->y1; y++) {
        double wy = weight_y(f, y);
        for (int64_t x = f->x0; x < f->x1; x++) {
            size_t o = (size_t)y * c->W + fcol(c, f, x);
            if (V && !V[o]) continue;
            double wt = weight_x(f, x, wy);
            tw += wt;
            tot += P[o] * wt;
        }
    }
    if (!(tw > 0)) return 0;
    *out = tot / tw;
    return 1;
}

/* Mode scratch: a histogram for 8/16-bit integers, value/count lists for
 * the rest. */
typedef struct mode_buf {
    int *bins;
    float *vals;
    int *sums;
    size_t cap;
} mode_buf;

static int mode_int(const rs_call *c, const double *P, const uint8_t *V, const foot *f,
                    mode_buf *m, int offset, double *out) {
    int best = 0, ind = -1;
    if ((f->x1 - f->x0) * (f->y1 - f->y0) <= 32) {
        /* A small footprint (up- or slightly downsampling, the usual case
         * for labels): the same counting on a short list instead of the
         * histogram, whose clearing would cost more than the count. */
        int vals[32], counts[32], n = 0;
        for (int64_t y = f->y0; y < f->y1; y++)
            for (int64_t x = f->x0; x < f->x1; x++) {
                size_t o = (size_t)y * c->W + fcol(c, f, x);
                if (V && !V[o]) continue;
                int v = (int)P[o], k = 0;
                while (k < n && vals[k] != v) k++;
                if (k == n) vals[n] = v, counts[n++] = 0;
                if (++counts[k] > best) {
                    ind = v;
                    best = counts[k];
                }
            }
        if (ind == -1) return 0;
        *out = ind;
        return 1;
    }
    for (int64_t y = f->y0; y < f->y1; y++)
        for (int64_t x = f->x0; x < f->x1; x++) {
            size_t o = (size_t)y * c->W + fcol(c, f, x);
            if (V && !V[o]) continue;
            int v = (int)P[o];
            if (++m->bins[v + offset] > best) {
                ind = v;
                best = m->bins[v + offset];
            }
        }
    /* Clear only what was touched. */
    for (int64_t y = f->y0; y < f->y1; y++)
        for (int64_t x = f->x0; x < f->x1; x++)
            m->bins[(int)P[(size_t)y * c->W + fcol(c, f, x)] + offset] = 0;
    if (ind == -1) return 0;
    *out = ind;
    return 1;
}

/* GDAL's mode for other types, step by step: a value found again bumps
 * every entry holding it until one passes the leader, otherwise it is
 * listed again; the leader changes only when passed. */
static int mode_float(const rs_call *c, const double *P, const uint8_t *V, const foot *f,
                      mode_buf *m, double *out) {
    size_t need = (size_t)(f->x1 - f->x0) * (size_t)(f->y1 - f->y0);
    if (need > m->cap) {
        float *nv = realloc(m->vals, need * sizeof *nv);
        if (nv) m->vals = nv;
        int *ns = nv ? realloc(m->sums, need * sizeof *ns) : NULL;
        if (ns) m->sums = ns;
        if (!nv || !ns) return -1;
        m->cap = need;
    }
    int n = 0, lead = -1;
    for (int64_t y = f->y0; y < f->y1; y++)
        for (int64_t x = f->x0; x < f->x1; x++) {
            size_t o = (size_t)y * c->W + fcol(c, f, x);
            if (V && !V[o]) continue;
            float v = (float)P[o];
            int i;
            for (i = 0; i < n; i++)
                if (m->vals[i] == v && ++m->sums[i] > m->sums[lead]) {
                    lead = i;
                    break;
                }
            if (i == n) {
                m->vals[n] = v;
                m->sums[n] = 1;
                if (lead < 0) lead = n;
                n++;
            }
        }
    if (lead < 0) return 0;
    *out = m->vals[lead];
    return 1;
}

/* ------------------------------------------------------- general path */

static cf_status general(rs_call *c, cf_error *err) {
    const cf__warp_src *s = c->src;
    cf_resampling rs = c->rq->rs;
    uint32_t tw = c->tw, th = c->th;
    size_t n = (size_t)c->W * c->H, tn = (size_t)tw * th;
    int corners = rs == CF_RS_AVERAGE || rs == CF_RS_MODE;
    size_t npos = corners ? 2 * tn : tn;
    double *px = cf__malloc(npos * sizeof *px), *py = cf__malloc(npos * sizeof *py);
    uint8_t *pok = cf__malloc(npos);
    double *P = rs == CF_RS_NEAREST ? NULL : cf__malloc(n * sizeof *P);
    mode_buf mb = {0};
    cf_status st = CF_OK;
    int imode = rs == CF_RS_MODE && (s->dtype == CF_DT_U8 || s->dtype == CF_DT_U16 ||
                                     s->dtype == CF_DT_I16);
    if (imode) mb.bins = cf__calloc(65536, sizeof *mb.bins);
    if (!px || !py || !pok || (rs != CF_RS_NEAREST && !P) || (imode && !mb.bins)) {
        st = cf__err(err, CF_E_NOMEM, "out of memory (resampling %ux%u)", tw, th);
        goto done;
    }
    /* Source positions, relative to the window, once for all bands:
     * pixel centres, or (average, mode) each pixel's top-left corner and,
     * from tn on, its bottom-right one, a row at a time as GDAL does. */
    double tx = (double)c->rq->tx, ty = (double)c->rq->ty;
    /* Across CRSs, kept for the caller's next request of the same map and
     * window (an affine map's rows cost less than the copy). */
    cf__warp_pos *keep = c->w->affine ? NULL : c->rq->pos;
    int kept = cf__warp_pos_get(keep, c->w, c->inv, c->rq, corners, npos, px, py, pok);
    for (uint32_t j = 0; j < th && !kept; j++) {
        size_t o = (size_t)j * tw;
        if (corners) {
            cf__warp_row(c->w, c->inv, tx, ty + j, tw, px + o, py + o, pok + o);
            cf__warp_row(c->w, c->inv, tx + 1, ty + j + 1, tw, px + tn + o, py + tn + o,
                         pok + tn + o);
        } else {
            cf__warp_row(c->w, c->inv, tx + 0.5, ty + j + 0.5, tw, px + o, py + o, pok + o);
        }
    }
    if (keep && !kept) cf__warp_pos_put(keep, c->w, c->inv, c->rq, corners, npos, px, py, pok);
    for (size_t k = 0; k < npos; k++) {
        px[k] -= (double)c->win->x;
        py[k] -= (double)c->win->y;
    }
    double *vals = cf__malloc(tw * sizeof *vals);
    uint8_t *set = cf__malloc(tw);
    if (!vals || !set) {
        free(vals);
        free(set);
        st = cf__err(err, CF_E_NOMEM, "out of memory (resampling %ux%u)", tw, th);
        goto done;
    }
    for (int b = 0; b < s->nbands && !st; b++) {
        const uint8_t *band = (const uint8_t *)s->data + (size_t)b * n * c->bps;
        uint8_t *out = (uint8_t *)c->dst->data + (size_t)b * c->ostride * c->bps;
        const uint8_t *V = c->tapvalid ? c->tapvalid[b] : NULL;
        if (P) cf__rs_to_double(s->dtype, band, n, P);
        for (uint32_t j = 0; j < th && !st; j++) {
            uint8_t *orow = out + (size_t)j * c->orow * c->bps;
            for (uint32_t i = 0; i < tw; i++) {
                size_t t = (size_t)j * tw + i;
                double *v = &vals[i];
                int have = 0;
                set[i] = 0;
                if (corners) {
                    foot f;
                    if (!footprint(c, px[t], py[t], pok[t], px[tn + t], py[tn + t],
                                   pok[tn + t], &f))
                        continue;
                    if (rs == CF_RS_AVERAGE) have = average(c, P, V, &f, v);
                    else if (imode)
                        have = mode_int(c, P, V, &f, &mb, s->dtype == CF_DT_I16 ? 32768 : 0, v);
                    else have = mode_float(c, P, V, &f, &mb, v);
                    if (have < 0) {
                        st = cf__err(err, CF_E_NOMEM, "out of memory (mode)");
                        break;
                    }
                    set[i] = (uint8_t)have;
                    continue;
                }
                size_t o;
                if (!pok[t] || !centre_pixel(c, px[t], py[t], &o)) continue;
                if (c->unified && !c->unified[o]) continue;
                if (rs == CF_RS_NEAREST) {
                    if (c->band && !c->band[b][o]) continue;
                    memcpy(orow + i * c->bps, band + o * c->bps, c->bps);
                    continue;
                }
                if (c->realcase) {
                    if (c->W == 1 || c->H == 1) {
                        if (V && !V[o]) continue;
                        *v = P[o];
                        have = 1;
                    } else if (c->use4) {
                        have = rs == CF_RS_BILINEAR ? cf__rs_bil4_mask(c, P, V, px[t], py[t], v)
                                                    : cub4_mask(c, P, V, px[t], py[t], v);
                    } else {
                        have = wide_mask(c, P, V, px[t], py[t], v);
                    }
                } else {
                    *v = c->use4 ? (rs == CF_RS_BILINEAR ? cf__rs_bil4_nomask(c, P, px[t], py[t])
                                                         : cub4_nomask(c, P, px[t], py[t]))
                                 : wide_nomask(c, P, px[t], py[t]);
                    have = 1;
                }
                set[i] = (uint8_t)have;
            }
            /* Without masks or a destination nodata there is nothing to
             * move a value off, as in GDAL's no-mask kernels. */
            if (rs != CF_RS_NEAREST && !st)
                cf__rs_store_row(s->dtype, orow, vals, set, tw, c->dst->has_nodata,
                                 c->dst->nodata);
        }
    }
    free(vals);
    free(set);
done:
    free(px);
    free(py);
    free(pok);
    free(P);
    free(mb.bins);
    free(mb.vals);
    free(mb.sums);
    return st;
}

/* ---------------------------------------------------------- dispatch */

cf_status cf__warp_resample(const cf__warp *w, const cf__warp_req *rq, const cf__warp_win *win,
                            const cf__warp_src *src, cf__warp_dst *dst, cf_error *err) {
    if (win->empty) return CF_OK;
    if (!cf_dtype_size(src->dtype) || src->nbands < 1)
        return cf__err(err, CF_E_ARG, "resampling: bad source description");
    rs_call c;
    memset(&c, 0, sizeof c);
    cf__warp_req copy = *rq;
    if (cf__warp_is_translation(w, rq->lw, rq->lh)) copy.rs = CF_RS_NEAREST;
    rq = &copy;
    c.w = w;
    c.rq = rq;
    c.win = win;
    c.src = src;
    c.dst = dst;
    c.W = win->w;
    c.H = win->h;
    c.tw = rq->tw;
    c.th = rq->th;
    c.bps = cf_dtype_size(src->dtype);
    c.ostride = dst->band_stride ? dst->band_stride : (size_t)rq->tw * rq->th;
    c.orow = dst->row_stride ? dst->row_stride : rq->tw;
    c.xs = win->xscale;
    c.ys = win->yscale;
    c.use4 = c.xs >= 0.95 && c.ys >= 0.95;
    c.mx = 2 * (int)fmax(1, ceil(1.0 / c.xs));
    c.my = 2 * (int)fmax(1, ceil(1.0 / c.ys));
    int rad = cf__warp_radius(rq->rs);
    c.rx = c.xs < 1.0 ? (int)ceil(rad / c.xs) : rad;
    c.ry = c.ys < 1.0 ? (int)ceil(rad / c.ys) : rad;
    if (c.rx > 255 || c.ry > 255)
        return cf__err(err, CF_E_LIMIT,
                       "resampling: the target is %.0f times coarser than the source level: "
                       "read an overview (level) instead",
                       1.0 / fmin(c.xs, c.ys));
    cf__warp_level_inverse(w, rq->lw, rq->lh, c.inv);
    c.wrapx = w->wrap && win->x == 0 && win->w == rq->lw &&
              fabs(360.0 * fabs(c.inv[1]) - rq->lw) < 0.5;
    cf_status st = build_masks(&c, err);
    c.realcase = c.masks || dst->has_nodata;
    /* The fast path takes masks for nearest (a lookup per pixel) and the
     * 2x2 bilinear (its table where all four taps are valid, GDAL's
     * per-pixel formula where some are not). */
    int fast_ok = !c.masks || rq->rs == CF_RS_NEAREST ||
                  (rq->rs == CF_RS_BILINEAR && c.use4 && c.W > 1 && c.H > 1);
    if (!st && (!fast_ok || rq->general || !cf__rs_separable(&c, &st, err))) st = general(&c, err);
    free_masks(&c);
    return st;
}
