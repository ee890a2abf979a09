/*
 * resample_internal.h - what the general resampler (resample.c) and the
 * separable fast path (resample_sep.c) share: one call's state, GDAL's
 * kernel weights and its rules for storing a computed value.
 */
#ifndef CF_RESAMPLE_INTERNAL_H
#define CF_RESAMPLE_INTERNAL_H

#include "warp_internal.h"

#include <math.h>

/* One cf__warp_resample call. */
typedef struct rs_call {
    const cf__warp *w;
    const cf__warp_req *rq;
    const cf__warp_win *win;
    const cf__warp_src *src;
    cf__warp_dst *dst;
    double inv[6];             /* the level's inverse geotransform */
    uint32_t W, H;             /* the source window */
    uint32_t tw, th;
    size_t bps;                /* bytes per sample */
    size_t ostride;            /* output samples from band to band */
    size_t orow;               /* ... and from row to row */
    /* GDAL's validity masks (1 valid), NULL when every pixel is valid:
     * unified (the internal mask, or "some band is valid" under nodata)
     * and, with nodata and several bands, one per band.  tapvalid[b] is
     * unified AND band b: what a kernel tap checks. */
    uint8_t *unified;
    uint8_t **band;
    uint8_t **tapvalid;
    int masks;                 /* any mask at all */
    /* GDAL's "real case" formulas (masks or a destination nodata) rather
     * than its no-mask fast kernels; they differ in rounding details. */
    int realcase;
    int use4;                  /* the 2x2 / 4x4 kernels (scale >= 0.95) */
    double xs, ys;             /* kernel scales */
    int rx, ry;                /* kernel radii in source pixels */
    int mx, my;                /* average/mode: GDAL's margin for corners
                                  outside the window */
    int wrapx;                 /* the window is a whole turn of a global
                                  geographic source: average and mode
                                  footprints may go round the antimeridian */
} rs_call;

typedef double (*rs_filter_fn)(double);

/* GDAL's first and end source pixel of a footprint [a, b) on an axis of
 * `size` pixels (GWKAverageOrModeThread): a = clamp(floor(a + 1e-10)),
 * b = min(ceil(b - 1e-10), size), one pixel at least when inside; empty
 * (hi = lo) when the footprint ends before the window starts, where GDAL's
 * loops do not run (a negative span was a huge size_t to mode's list:
 * "out of memory" next to the pole).  Plain comparisons, not fmin/fmax
 * calls: this runs per target pixel. */
static inline void rs_span(double a, double b, uint32_t size, int64_t *lo, int64_t *hi) {
    double l = floor(a + 1e-10), h = ceil(b - 1e-10);
    if (!(l > 0)) l = 0; /* also NaN */
    if (l > size) l = size;
    if (h > size) h = size;
    *lo = (int64_t)l;
    *hi = (int64_t)h;
    if (*lo == *hi && *hi < (int64_t)size) (*hi)++;
    if (*hi < *lo) *hi = *lo;
}

/* GDAL's filter functions (GWKBilinear, GWKCubic). */
static inline double rs_bilinear_w(double x) {
    double a = fabs(x);
    return a <= 1.0 ? 1 - a : 0.0;
}
static inline double rs_cubic_w(double x) {
    double a = fabs(x), x2 = x * x;
    if (a <= 1.0) return x2 * (1.5 * a - 2.5) + 1;
    if (a <= 2.0) return x2 * (-0.5 * a + 2.5) - 4 * a + 2;
    return 0.0;
}

/* Catmull-Rom weights of the four taps around a fraction d in [0, 1). */
static inline void rs_cubic_coeffs(double d, double c[4]) {
    double h = 0.5 * d, h2 = h * d;
    c[0] = h * (-1 + d * (2 - d));
    c[1] = 1 + h2 * (-5 + 3.0 * d);
    c[2] = h * (1 + d * (4 - 3.0 * d));
    c[3] = h2 * (-1 + d);
}

/* GDAL's cubic convolution along the second axis of the no-mask kernel. */
static inline double rs_cubic_conv(double d, double f0, double f1, double f2, double f3) {
    double d2 = d * d, d3 = d2 * d;
    return f1 + 0.5 * (d * (f2 - f0) + d2 * (2.0 * f0 - 5.0 * f1 + 4.0 * f2 - f3) +
                       d3 * (3.0 * (f1 - f2) + f3 - f0));
}

/* GDAL's 2x2 bilinear at one source position (window pixels) of plane P:
 * without masks (taps outside the window renormalised away), and with
 * tap validity V (0 when no tap is valid). */
double cf__rs_bil4_nomask(const rs_call *c, const double *P, double sx, double sy);
int cf__rs_bil4_mask(const rs_call *c, const double *P, const uint8_t *V, double sx, double sy,
                     double *out);

/* cf__rs_store of n values of a row into band[0..n), only where set[k]
 * (set NULL: all). */
void cf__rs_store_row(cf_dtype t, void *band, const double *vals, const uint8_t *set, size_t n,
                      int nudge, double nodata);

/* Convert a band of the source window to doubles. */
void cf__rs_to_double(cf_dtype t, const void *src, size_t n, double *out);

/* The separable fast path: axis-aligned same-CRS maps without masks
 * (nearest, bilinear, cubic, average; nearest and 2x2 bilinear with masks
 * too).  0 when it
 * does not apply (the caller then runs the general path); CF_E_NOMEM is
 * reported in err. */
int cf__rs_separable(rs_call *c, cf_status *st, cf_error *err);

#endif
