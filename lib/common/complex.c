/*
 * complex.c - complex samples (GDAL's CInt16, CInt32, CFloat32, CFloat64),
 * read as the file holds them: a real and an imaginary part per sample.
 * NumPy has no complex integers, so where NumPy types are needed (the
 * Python extension, the CLI's .npy files) CInt16 and CInt32 are widened to
 * complex64 and complex128, exactly, as GDAL's ReadAsArray widens them.
 * (The codec layer swabs big-endian complex samples part by part.)
 */
#include "common.h"

int cf_dtype_is_complex(cf_dtype t) {
    return t == CF_DT_CI16 || t == CF_DT_CI32 || t == CF_DT_CF32 ||
           t == CF_DT_CF64;
}

cf_dtype cf_dtype_complex_float(cf_dtype t) {
    return t == CF_DT_CI16 ? CF_DT_CF32 : t == CF_DT_CI32 ? CF_DT_CF64 : t;
}

void cf_complex_widen(cf_dtype t, const void *src, void *dst, size_t n) {
    const uint8_t *s = src;
    uint8_t *d = dst;
    /* From the last sample: each output sample is twice as wide as its
     * input, so in place nothing is overwritten before it is read. */
    if (t == CF_DT_CI16) {
        for (size_t i = n; i-- > 0;) {
            int16_t v[2];
            memcpy(v, s + 4 * i, 4);
            float f[2] = {(float)v[0], (float)v[1]};
            memcpy(d + 8 * i, f, 8);
        }
    } else if (t == CF_DT_CI32) {
        for (size_t i = n; i-- > 0;) {
            int32_t v[2];
            memcpy(v, s + 8 * i, 8);
            double f[2] = {(double)v[0], (double)v[1]};
            memcpy(d + 16 * i, f, 16);
        }
    }
}
