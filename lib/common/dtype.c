/* dtype.c - names and sizes of the public sample types, and the widening
 * of complex integers (which NumPy lacks) to complex floats. */
#include "common.h"

size_t cf_dtype_size(cf_dtype t) {
    switch (t) {
    case CF_DT_U8: case CF_DT_I8: return 1;
    case CF_DT_U16: case CF_DT_I16: return 2;
    case CF_DT_U32: case CF_DT_I32: case CF_DT_F32: case CF_DT_CI16: return 4;
    case CF_DT_U64: case CF_DT_I64: case CF_DT_F64: case CF_DT_CI32:
    case CF_DT_CF32: return 8;
    case CF_DT_CF64: return 16;
    default: return 0;
    }
}

const char *cf_dtype_name(cf_dtype t) {
    static const char *const names[] = {
        "unknown", "uint8",   "int8",          "uint16",        "int16",
        "uint32",  "int32",   "uint64",        "int64",         "float32",
        "float64", "complex_int16", "complex_int32", "complex64",
        "complex128"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

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
