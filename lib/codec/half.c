/*
 * half.c - floating-point samples narrower than float32, which GDAL reads
 * as float32 (its NBITS=16 option writes float16, the usual compact form
 * of feature maps and DEMs):
 *  - float16 (IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits),
 *  - float24 (1 sign, 7 exponent with bias 63, 16 mantissa bits: the
 *    format libtiff's floating-point predictor and GDAL call "Float24").
 * The conversion is exact (every such value is a float32), denormals come
 * out normalised, and NaN payloads are kept bit for bit, a signalling NaN
 * staying signalling as in GDAL's CPLHalfToFloat (a hardware conversion,
 * F16C, would quiet it).  Input is in native order: codec.c has swabbed
 * it, or the floating-point predictor rebuilt it so.
 */
#include "codec_internal.h"

static uint32_t half_to_bits(uint32_t h) {
    uint32_t sign = (h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 31) return sign | 0x7f800000u | man << 13;
    if (exp) return sign | (exp + 112) << 23 | man << 13;
    if (!man) return sign;
    exp = 113; /* 127 - 15 + 1, less one per shift below */
    while (!(man & 0x400)) {
        man <<= 1;
        exp--;
    }
    return sign | exp << 23 | (man & 0x3ff) << 13;
}

static uint32_t triple_to_bits(uint32_t t) {
    uint32_t sign = (t >> 23) << 31, exp = (t >> 16) & 0x7f, man = t & 0xffff;
    if (exp == 0x7f) return sign | 0x7f800000u | man << 7;
    if (exp) return sign | (exp + 64) << 23 | man << 7;
    if (!man) return sign;
    exp = 65; /* 127 - 63 + 1, less one per shift below */
    while (!(man & 0x10000)) {
        man <<= 1;
        exp--;
    }
    return sign | exp << 23 | (man & 0xffff) << 7;
}

void cf__half_to_float(const cf__codec_params *p, const uint8_t *src,
                       uint8_t *dst) {
    size_t n = (size_t)p->width * p->samples * p->height;
    if (p->bits == 16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            uint32_t f = half_to_bits(h);
            memcpy(dst + 4 * i, &f, 4);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) { /* 24: native little-endian triples */
        const uint8_t *s = src + 3 * i;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        uint32_t t = (uint32_t)s[0] << 16 | (uint32_t)s[1] << 8 | s[2];
#else
        uint32_t t = (uint32_t)s[2] << 16 | (uint32_t)s[1] << 8 | s[0];
#endif
        uint32_t f = triple_to_bits(t);
        memcpy(dst + 4 * i, &f, 4);
    }
}
