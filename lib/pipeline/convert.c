/*
 * convert.c - raw samples to float32 and the augmentations (convert.h).
 */
#include "convert.h"

/* dst[i] = src[i] * a + b, from any sample type. */
static void to_f32(const uint8_t *src, cf_dtype dt, size_t n, float *dst,
                   double a, double b) {
#define CONV(T)                                                      \
    do {                                                             \
        const T *s = (const T *)(const void *)src;                   \
        for (size_t i = 0; i < n; i++)                               \
            dst[i] = (float)((double)s[i] * a + b);                  \
    } while (0)
    switch (dt) {
    case CF_DT_U8: CONV(uint8_t); break;
    case CF_DT_I8: CONV(int8_t); break;
    case CF_DT_U16: CONV(uint16_t); break;
    case CF_DT_I16: CONV(int16_t); break;
    case CF_DT_U32: CONV(uint32_t); break;
    case CF_DT_I32: CONV(int32_t); break;
    case CF_DT_U64: CONV(uint64_t); break;
    case CF_DT_I64: CONV(int64_t); break;
    case CF_DT_F32: CONV(float); break;
    case CF_DT_F64: CONV(double); break;
    default: memset(dst, 0, n * sizeof *dst); break;
    }
#undef CONV
}

/* (convert.h) */
void cf__augment_plane(uint8_t *plane, size_t es, uint32_t P, uint32_t aug,
                          uint8_t *tmp) {
    size_t n = (size_t)P * P;
    memcpy(tmp, plane, n * es);
    const unsigned k = aug & 3, flip = (aug >> 2) & 1;
    for (uint32_t i = 0; i < P; i++) {
        for (uint32_t jj = 0; jj < P; jj++) {
            uint32_t j = flip ? P - 1 - jj : jj;
            uint32_t si, sj;
            switch (k) {
            case 0: si = i; sj = j; break;
            case 1: si = j; sj = P - 1 - i; break;
            case 2: si = P - 1 - i; sj = P - 1 - j; break;
            default: si = P - 1 - j; sj = i; break;
            }
            const uint8_t *s = tmp + ((size_t)si * P + sj) * es;
            uint8_t *d = plane + ((size_t)i * P + jj) * es;
            switch (es) {
            case 1: *d = *s; break;
            case 2: memcpy(d, s, 2); break;
            case 4: memcpy(d, s, 4); break;
            default: memcpy(d, s, es); break;
            }
        }
    }
}

void cf__convert_band(const uint8_t *src, cf_dtype dt, size_t n, double scale,
                      double offset, double mean, double std, float *dst) {
    /* One multiply-add per sample: (v * scale + offset - mean) / std. */
    to_f32(src, dt, n, dst, scale / std, (offset - mean) / std);
}
