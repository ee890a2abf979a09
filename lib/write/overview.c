/*
 * overview.c - one overview row from two rows of the level above, for
 * the writer's overviews (each level halves the one before it, as
 * `gdaladdo` builds levels 2, 4, 8... from each other).  Samples are
 * read and written through double (every type the writer takes is exact
 * in double except 64-bit integers beyond 2^53, which average through
 * long double).
 */
#include "write_internal.h"

#include <math.h>

static long double get(cf_dtype dt, const uint8_t *p) {
    switch (dt) {
    case CF_DT_U8: return *p;
    case CF_DT_I8: return (int8_t)*p;
#define G(T)                                                                                   \
    {                                                                                          \
        T v;                                                                                   \
        memcpy(&v, p, sizeof v);                                                               \
        return v;                                                                              \
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

static void put(cf_dtype dt, uint8_t *p, long double v) {
    switch (dt) {
    case CF_DT_U8: *p = (uint8_t)v; return;
    case CF_DT_I8: *p = (uint8_t)(int8_t)v; return;
#define P(T)                                                                                   \
    {                                                                                          \
        T x = (T)v;                                                                            \
        memcpy(p, &x, sizeof x);                                                               \
        return;                                                                                \
    }
    case CF_DT_U16: P(uint16_t)
    case CF_DT_I16: P(int16_t)
    case CF_DT_U32: P(uint32_t)
    case CF_DT_I32: P(int32_t)
    case CF_DT_U64: P(uint64_t)
    case CF_DT_I64: P(int64_t)
    case CF_DT_F32: P(float)
    default: P(double)
#undef P
    }
}

static int is_float(cf_dtype dt) { return dt == CF_DT_F32 || dt == CF_DT_F64; }

void cf__ov_row(cf__ov_kind kind, cf_dtype dt, uint32_t spp, const uint8_t *r0,
                const uint8_t *r1, uint32_t sw, uint8_t *out, uint32_t ow, int has_nodata,
                double nodata) {
    size_t es = cf_dtype_size(dt), px = es * spp;
    for (uint32_t x = 0; x < ow; x++) {
        uint32_t sx = 2 * x, nx = sx + 1 < sw ? 2 : 1;
        const uint8_t *rows[2] = {r0, r1};
        for (uint32_t s = 0; s < spp; s++) {
            uint8_t *o = out + x * px + s * es;
            if (kind == CF__OV_NEAREST) {
                memcpy(o, r0 + sx * px + s * es, es);
                continue;
            }
            long double v[4];
            int n = 0;
            for (int r = 0; r < 2; r++) {
                if (!rows[r]) continue;
                for (uint32_t k = 0; k < nx; k++) {
                    long double a = get(dt, rows[r] + (sx + k) * px + s * es);
                    if (is_float(dt) && isnan((double)a)) continue;
                    if (has_nodata && a == (long double)nodata) continue;
                    v[n++] = a;
                }
            }
            if (!n) {
                /* no valid sample: nodata, or (no nodata) the NaN / 0 seen */
                if (has_nodata) put(dt, o, nodata);
                else memcpy(o, r0 + sx * px + s * es, es);
                continue;
            }
            if (kind == CF__OV_MODE) {
                int best = 0, bestc = 0;
                for (int i = 0; i < n; i++) {
                    int c = 0;
                    for (int j = 0; j < n; j++) c += v[j] == v[i];
                    if (c > bestc) {
                        bestc = c;
                        best = i;
                    }
                }
                put(dt, o, v[best]);
                continue;
            }
            long double sum = 0;
            for (int i = 0; i < n; i++) sum += v[i];
            if (is_float(dt)) {
                put(dt, o, (double)(sum / n));
            } else {
                /* GDAL's integer average: (sum + n/2) / n, rounded half up */
                long double m = floorl((sum + (long double)(n / 2)) / n);
                put(dt, o, m);
            }
        }
    }
}
