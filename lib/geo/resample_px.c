/*
 * resample_px.c - what the general resampler (resample.c) and the
 * separable fast path (resample_sep.c) both compute per pixel: a value
 * stored GDAL's way (rounded half up, clamped, moved off the destination
 * nodata), samples read as doubles, and GDAL's 2x2 bilinear kernels.
 */
#include "resample_internal.h"

#include <string.h>

/* ------------------------------------------------------------ values */

#define RS_STORE_INT(T, lo, hi, is_signed)                                       \
    do {                                                                         \
        T r;                                                                     \
        if (isnan(v)) r = 0;                                                     \
        else if (v < (double)(lo)) r = (lo);                                     \
        else if (v > (double)(hi)) r = (hi);                                     \
        else r = is_signed ? (T)floor(v + 0.5) : (T)(v + 0.5);                   \
        if (nudge && (double)r == nodata) r = r == (lo) ? (T)((lo) + 1) : (T)(r - 1); \
        ((T *)band)[i] = r;                                                      \
    } while (0)

void cf__rs_store(cf_dtype t, void *band, size_t i, double v, int nudge, double nodata) {
    switch (t) {
    case CF_DT_U8: RS_STORE_INT(uint8_t, 0, UINT8_MAX, 0); break;
    case CF_DT_I8: RS_STORE_INT(int8_t, INT8_MIN, INT8_MAX, 1); break;
    case CF_DT_U16: RS_STORE_INT(uint16_t, 0, UINT16_MAX, 0); break;
    case CF_DT_I16: RS_STORE_INT(int16_t, INT16_MIN, INT16_MAX, 1); break;
    case CF_DT_U32: RS_STORE_INT(uint32_t, 0, UINT32_MAX, 0); break;
    case CF_DT_I32: RS_STORE_INT(int32_t, INT32_MIN, INT32_MAX, 1); break;
    case CF_DT_U64: RS_STORE_INT(uint64_t, 0, UINT64_MAX, 0); break;
    case CF_DT_I64: RS_STORE_INT(int64_t, INT64_MIN, INT64_MAX, 1); break;
    case CF_DT_F32: ((float *)band)[i] = (float)v; break;
    case CF_DT_F64: ((double *)band)[i] = v; break;
    default: break;
    }
}

/* The row form of cf__rs_store: one switch per row, the loop typed. */
#define RS_ROW_INT(T, lo, hi, is_signed)                                         \
    do {                                                                         \
        T *o = (T *)band;                                                        \
        for (size_t k = 0; k < n; k++) {                                         \
            if (set && !set[k]) continue;                                        \
            double v = vals[k];                                                  \
            T r;                                                                 \
            if (v >= (double)(lo) && v <= (double)(hi))                          \
                r = is_signed ? (T)floor(v + 0.5) : (T)(v + 0.5);                \
            else                                                                 \
                r = isnan(v) ? 0 : v < (double)(lo) ? (lo) : (hi);               \
            if (nudge && (double)r == nodata) r = r == (lo) ? (T)((lo) + 1) : (T)(r - 1); \
            o[k] = r;                                                            \
        }                                                                        \
    } while (0)

void cf__rs_store_row(cf_dtype t, void *band, const double *vals, const uint8_t *set, size_t n,
                      int nudge, double nodata) {
    switch (t) {
    case CF_DT_U8: RS_ROW_INT(uint8_t, 0, UINT8_MAX, 0); break;
    case CF_DT_I8: RS_ROW_INT(int8_t, INT8_MIN, INT8_MAX, 1); break;
    case CF_DT_U16: RS_ROW_INT(uint16_t, 0, UINT16_MAX, 0); break;
    case CF_DT_I16: RS_ROW_INT(int16_t, INT16_MIN, INT16_MAX, 1); break;
    case CF_DT_U32: RS_ROW_INT(uint32_t, 0, UINT32_MAX, 0); break;
    case CF_DT_I32: RS_ROW_INT(int32_t, INT32_MIN, INT32_MAX, 1); break;
    case CF_DT_F32:
        for (size_t k = 0; k < n; k++)
            if (!set || set[k]) ((float *)band)[k] = (float)vals[k];
        break;
    case CF_DT_F64:
        for (size_t k = 0; k < n; k++)
            if (!set || set[k]) ((double *)band)[k] = vals[k];
        break;
    default: /* 64-bit integers: the scalar path's care with their range */
        for (size_t k = 0; k < n; k++)
            if (!set || set[k]) cf__rs_store(t, band, k, vals[k], nudge, nodata);
        break;
    }
}

void cf__rs_to_double(cf_dtype t, const void *src, size_t n, double *out) {
#define RS_CONV(T)                                                               \
    for (size_t k = 0; k < n; k++) out[k] = (double)((const T *)src)[k];         \
    break
    switch (t) {
    case CF_DT_U8: RS_CONV(uint8_t);
    case CF_DT_I8: RS_CONV(int8_t);
    case CF_DT_U16: RS_CONV(uint16_t);
    case CF_DT_I16: RS_CONV(int16_t);
    case CF_DT_U32: RS_CONV(uint32_t);
    case CF_DT_I32: RS_CONV(int32_t);
    case CF_DT_U64: RS_CONV(uint64_t);
    case CF_DT_I64: RS_CONV(int64_t);
    case CF_DT_F32: RS_CONV(float);
    case CF_DT_F64: RS_CONV(double);
    default: memset(out, 0, n * sizeof *out); break;
    }
#undef RS_CONV
}

/* ----------------------------------------------------------- kernels */

/* 2x2 bilinear without masks (GWKBilinearResampleNoMasks4SampleT). */
double cf__rs_bil4_nomask(const rs_call *c, const double *P, double sx, double sy) {
    int64_t W = c->W, H = c->H;
    int64_t ix = (int64_t)floor(sx - 0.5), iy = (int64_t)floor(sy - 0.5);
    double rx = 1.5 - (sx - ix), ry = 1.5 - (sy - iy);
    if (ix >= 0 && ix + 1 < W && iy >= 0 && iy + 1 < H) {
        const double *p = P + iy * W + ix;
        return (p[0] * rx + p[1] * (1.0 - rx)) * ry + (p[W] * rx + p[W + 1] * (1.0 - rx)) * (1.0 - ry);
    }
    double div = 0, acc = 0;
    int inx0 = ix >= 0 && ix < W, inx1 = ix + 1 >= 0 && ix + 1 < W;
    int iny0 = iy >= 0 && iy < H, iny1 = iy + 1 >= 0 && iy + 1 < H;
    if (inx0 && iny0) div += rx * ry, acc += P[iy * W + ix] * (rx * ry);
    if (inx1 && iny0) div += (1 - rx) * ry, acc += P[iy * W + ix + 1] * ((1 - rx) * ry);
    if (inx1 && iny1)
        div += (1 - rx) * (1 - ry), acc += P[(iy + 1) * W + ix + 1] * ((1 - rx) * (1 - ry));
    if (inx0 && iny1) div += rx * (1 - ry), acc += P[(iy + 1) * W + ix] * (rx * (1 - ry));
    if (div < 0.00001) return 0;
    return div == 1.0 ? acc : acc / div;
}

/* 2x2 bilinear with masks (GWKBilinearResample4Sample); 0 when no tap is
 * valid. */
int cf__rs_bil4_mask(const rs_call *c, const double *P, const uint8_t *V, double sx, double sy,
                     double *out) {
    int64_t W = c->W, H = c->H;
    int64_t ix = (int64_t)floor(sx - 0.5), iy = (int64_t)floor(sy - 0.5);
    double rx = 1.5 - (sx - ix), ry = 1.5 - (sy - iy);
    if (ix == -1) ix = 0, rx = 1;
    if (iy == -1) iy = 0, ry = 1;
    double div = 0, acc = 0;
#define TAP(xx, yy, wt)                                                         \
    if ((xx) >= 0 && (xx) < W && (yy) >= 0 && (yy) < H &&                       \
        (!V || V[(yy) * W + (xx)])) {                                           \
        double m_ = (wt);                                                       \
        div += m_;                                                              \
        acc += P[(yy) * W + (xx)] * m_;                                         \
    }
    TAP(ix, iy, rx * ry)
    TAP(ix + 1, iy, (1.0 - rx) * ry)
    TAP(ix, iy + 1, rx * (1.0 - ry))
    TAP(ix + 1, iy + 1, (1.0 - rx) * (1.0 - ry))
#undef TAP
    if (div < 0.00001) return 0;
    *out = div == 1.0 ? acc : acc / div;
    return 1;
}

