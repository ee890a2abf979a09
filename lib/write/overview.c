/*
 * overview.c - one overview level from the level above, as gdaladdo
 * builds it (GDAL 3.10's overview.cpp, for a pixel-interleaved GeoTIFF):
 * each level from the one before it, over the exact size ratio
 * r = source / destination (at most 2: sizes round up), so that an odd
 * size spreads a destination pixel over up to 3 x 3 source pixels.
 *
 *  - windows: destination pixel i covers source [x0, x1) with
 *    x0 = (int)(i*r + 1e-8), x1 = ceil((i+1)*r - 1e-8) (at least x0 + 1, at
 *    most the width); average weighs the first and last pixel by how much
 *    of them the window covers;
 *  - average: in double, integers rounded to nearest (half away from
 *    zero), floats cast; except where a window is exactly 2 x 2 with no
 *    nodata, GDAL's fast path: (sum + 2) / 4 for 8- and 16-bit unsigned
 *    integers, ((a + c) + (b + d)) * 0.25f in float for float32 and int16
 *    (a, b the top row), but 0.25f * (a + b + c + d) for the last
 *    width % 4 pixels of a row (GDAL's vector loop takes 4 at a time); a
 *    result equal to nodata becomes the next value up;
 *  - nearest: the source pixel (int)(0.5 + i*r);
 *  - mode: the value whose running count, scanning the window row by row,
 *    first reaches the largest count; nodata left out.
 *
 * With an internal mask (GDAL 3.6 and 3.10 alike): average, and mode of
 * any type but 8-bit unsigned, leave masked pixels out as they leave
 * nodata out (0, or nodata, where none is left; never the fast path);
 * nearest, and mode of 8-bit data (GDAL's byte histogram path), take no
 * notice of it.  The mask's own overview (writer.c): average, valid
 * where any pixel of the window is, however little of it the window
 * covers; mode, the mask (0 / 255) by the same kernel; nearest, straight
 * from the full resolution.
 */
#include "write_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

static double get(cf_dtype dt, const uint8_t *p) {
    switch (dt) {
    case CF_DT_U8: return *p;
    case CF_DT_I8: return (int8_t)*p;
#define G(T)                                                                                   \
    {                                                                                          \
        T v;                                                                                   \
        memcpy(&v, p, sizeof v);                                                               \
        return (double)v;                                                                      \
    }
    case CF_DT_U16: G(uint16_t)
    case CF_DT_I16: G(int16_t)
    case CF_DT_U32: G(uint32_t)
    case CF_DT_I32: G(int32_t)
    case CF_DT_U64: G(uint64_t)
    case CF_DT_I64: G(int64_t)
    case CF_DT_F32: G(float)
    default: G(double)
#undef G
    }
}

static int is_float(cf_dtype dt) { return dt == CF_DT_F32 || dt == CF_DT_F64; }

/* v into the type: floats cast, integers rounded half away from zero and
 * clamped (GDALCopyWords). */
static void put(cf_dtype dt, uint8_t *p, double v) {
    if (!is_float(dt)) {
        v = v >= 0 ? floor(v + 0.5) : ceil(v - 0.5);
    }
    switch (dt) {
#define P(E, T, LO, HI)                                                                        \
    case E: {                                                                                  \
        T x = (T)(v < (LO) ? (LO) : v > (HI) ? (HI) : v);                                      \
        memcpy(p, &x, sizeof x);                                                               \
        return;                                                                                \
    }
        P(CF_DT_U8, uint8_t, 0, 255)
        P(CF_DT_I8, int8_t, -128, 127)
        P(CF_DT_U16, uint16_t, 0, 65535)
        P(CF_DT_I16, int16_t, -32768, 32767)
        P(CF_DT_U32, uint32_t, 0, 4294967295.0)
        P(CF_DT_I32, int32_t, -2147483648.0, 2147483647.0)
        P(CF_DT_U64, uint64_t, 0, 18446744073709549568.0)
        P(CF_DT_I64, int64_t, -9223372036854775808.0, 9223372036854774784.0)
#undef P
    case CF_DT_F32: {
        float x = (float)v;
        memcpy(p, &x, 4);
        return;
    }
    default: memcpy(p, &v, 8);
    }
}

cf_status cf__ov_axis_init(cf__ov_axis *a, uint32_t src, uint32_t dst, cf_error *err) {
    memset(a, 0, sizeof *a);
    a->src = src;
    a->dst = dst;
    a->ratio = (double)src / dst;
    a->x0 = cf__malloc(dst * sizeof *a->x0);
    a->x1 = cf__malloc(dst * sizeof *a->x1);
    a->near = cf__malloc(dst * sizeof *a->near);
    a->w0 = cf__malloc(dst * sizeof *a->w0);
    a->w1 = cf__malloc(dst * sizeof *a->w1);
    if (!a->x0 || !a->x1 || !a->near || !a->w0 || !a->w1) {
        cf__ov_axis_free(a);
        return cf__err(err, CF_E_NOMEM, "writer: overview of %u pixels", dst);
    }
    a->all2 = 1;
    for (uint32_t i = 0; i < dst; i++) {
        double d0 = i * a->ratio, d1 = (i + 1) * a->ratio;
        uint32_t x0 = (uint32_t)(d0 + 1e-8), x1 = (uint32_t)ceil(d1 - 1e-8);
        if (x1 == x0) x1++;
        if (x1 > src) x1 = src;
        a->x0[i] = x0;
        a->x1[i] = x1;
        a->w0[i] = x1 == x0 + 1 ? 1.0 : 1 - (d0 - x0);
        a->w1[i] = 1 - (x1 - d1);
        a->near[i] = (uint32_t)(0.5 + i * a->ratio);
        if (a->near[i] >= src) a->near[i] = src - 1;
        /* GDAL's fast path: windows 2 wide and side by side (3 -> 2
         * gives [0, 2) and [1, 3): 2 wide, but sharing a pixel) */
        if (x1 != x0 + 2 || (i && x0 != a->x1[i - 1])) a->all2 = 0;
    }
    return CF_OK;
}

void cf__ov_axis_free(cf__ov_axis *a) {
    free(a->x0);
    free(a->x1);
    free(a->near);
    free(a->w0);
    free(a->w1);
    memset(a, 0, sizeof *a);
}

/* Weight of source position k of window [x0, x1) (first, middle, last). */
static double weight(const cf__ov_axis *a, uint32_t i, uint32_t k) {
    if (k == a->x0[i]) return a->w0[i];
    if (k + 1 == a->x1[i]) return a->w1[i];
    return 1.0;
}

static int is_nodata(cf_dtype dt, double v, int has_nodata, double nodata) {
    if (!has_nodata) return 0;
    if (isnan(nodata)) return isnan(v);
    if (dt == CF_DT_F32) return fabs(v - nodata) < FLT_EPSILON * fabs(v + nodata) * 2 || v == nodata;
    return v == nodata;
}

/* GDAL's exact 2 x 2 average without nodata: a, b top row, c, d bottom. */
static void fast2(cf_dtype dt, uint8_t *o, double a, double b, double c, double d, int tail) {
    if (dt == CF_DT_U8 || dt == CF_DT_U16) {
        put(dt, o, floor((a + b + c + d + 2) / 4));
        return;
    }
    if (dt == CF_DT_F32 || dt == CF_DT_I16) {
        float fa = (float)a, fb = (float)b, fc = (float)c, fd = (float)d;
        float m = tail ? 0.25f * (fa + fb + fc + fd) : ((fa + fc) + (fb + fd)) * 0.25f;
        put(dt, o, m);
        return;
    }
    put(dt, o, (a + b + c + d) / 4);
}

void cf__ov_row(cf__ov_kind kind, cf_dtype dt, uint32_t spp, const uint8_t *const *rows,
                uint32_t nrows, double wy0, double wy1, const cf__ov_axis *ax, uint8_t *out,
                int has_nodata, double nodata, const uint8_t *near_row,
                const uint8_t *const *mrows) {
    const int excl = has_nodata || mrows; /* pixels left out of averages */
    size_t es = cf_dtype_size(dt), px = es * spp;
    uint32_t tail_from = ax->dst - ax->dst % 4;
    for (uint32_t i = 0; i < ax->dst; i++) {
        uint32_t x0 = ax->x0[i], x1 = ax->x1[i];
        for (uint32_t s = 0; s < spp; s++) {
            uint8_t *o = out + (size_t)i * px + s * es;
            if (kind == CF__OV_NEAREST) {
                memcpy(o, near_row + (size_t)ax->near[i] * px + s * es, es);
                continue;
            }
            if (kind == CF__OV_MODE) {
                /* running counts over the window, row by row */
                double val[9];
                int cnt[9], nv = 0, best = -1;
                for (uint32_t r = 0; r < nrows; r++)
                    for (uint32_t k = x0; k < x1; k++) {
                        double v = get(dt, rows[r] + (size_t)k * px + s * es);
                        if (is_nodata(dt, v, has_nodata, nodata)) continue;
                        if (mrows && !mrows[r][k]) continue;
                        int j = 0;
                        while (j < nv && !(val[j] == v || (isnan(val[j]) && isnan(v)))) j++;
                        if (j == nv) {
                            val[nv] = v;
                            cnt[nv++] = 0;
                        }
                        if (++cnt[j] > (best < 0 ? 0 : cnt[best])) best = j;
                    }
                /* (val keeps the first-seen value of each: -0.0 stays) */
                put(dt, o, best < 0 ? nodata : val[best]);
                continue;
            }
            if (!excl && nrows == 2 && ax->all2) {
                const uint8_t *t = rows[0] + (size_t)x0 * px + s * es;
                const uint8_t *b = rows[1] + (size_t)x0 * px + s * es;
                fast2(dt, o, get(dt, t), get(dt, t + px), get(dt, b), get(dt, b + px),
                      ax->all2 && i >= tail_from);
                continue;
            }
            /* each line's sums, then times its weight, as GDAL adds them
             * (pixel by pixel moves a float32 mean by an ulp) */
            double total = 0, wsum = 0;
            for (uint32_t r = 0; r < nrows; r++) {
                double wy = r == 0 ? wy0 : r + 1 == nrows ? wy1 : 1.0;
                double line = 0, lw = 0;
                for (uint32_t k = x0; k < x1; k++) {
                    double v = get(dt, rows[r] + (size_t)k * px + s * es);
                    double wx = weight(ax, i, k);
                    if (excl) {
                        if (mrows && !mrows[r][k]) continue;
                        if (is_nodata(dt, v, has_nodata, nodata)) continue;
                        lw += wx;
                    }
                    line += v * wx;
                }
                total += line * wy;
                wsum += lw * wy;
            }
            if (!excl) {
                /* the line's weight times the column's, as GDAL sums them */
                double lw = x1 == x0 + 1 ? ax->w0[i] : ax->w0[i] + (x1 - x0 - 2) + ax->w1[i];
                double cw = nrows == 1 ? wy0 : wy0 + (nrows - 2) + wy1;
                wsum = lw * cw;
            }
            if (wsum == 0) {
                put(dt, o, has_nodata ? nodata : 0);
                continue;
            }
            double m = total / wsum;
            if (dt == CF_DT_F32 || dt == CF_DT_I16) m = (float)m; /* GDAL's working type */
            if (has_nodata && !is_float(dt)) {
                /* a mean that lands on nodata moves one up (one down at
                 * the type's top); int16 compares its float, unrounded */
                double r = m >= 0 ? floor(m + 0.5) : ceil(m - 0.5);
                if (dt == CF_DT_I16 ? m == nodata : r == nodata) {
                    uint8_t chk[8];
                    put(dt, chk, nodata + 1);
                    put(dt, o, get(dt, chk) == nodata + 1 ? nodata + 1 : nodata - 1);
                    continue;
                }
            } else if (has_nodata && is_nodata(dt, m, 1, nodata)) {
                put(dt, o, dt == CF_DT_F32 ? nextafterf((float)nodata, FLT_MAX)
                                           : nextafter(nodata, DBL_MAX));
                continue;
            }
            put(dt, o, m);
        }
    }
}
