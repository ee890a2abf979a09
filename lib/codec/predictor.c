/*
 * predictor.c - undo TIFF predictors on a decoded chunk, row by row over
 * the full (unclipped) chunk width, with libtiff's semantics:
 *  - 2, horizontal differencing: each sample adds the same sample of the
 *    pixel to its left, modulo 2^bits, for 8/16/32/64-bit samples (on the
 *    bit pattern, whatever the sample format); runs after the byte swap.
 *  - 3, floating point: each row is stored as byte planes, most significant
 *    byte plane first whatever the file's byte order, and differenced byte
 *    by byte with a stride of samples-per-pixel.  Undoing it accumulates
 *    the bytes, then gathers plane bytes into native-order values.
 */
#include "codec_internal.h"

#include <stdlib.h>

cf_status cf__predictor_check(const cf_codec_params *p, cf_error *err) {
    switch (p->predictor) {
    case 1: return CF_OK;
    case 2:
        if (p->bits == 8 || p->bits == 16 || p->bits == 32 || p->bits == 64)
            return CF_OK;
        return cf__err(err, CF_E_UNSUPPORTED,
                       "horizontal predictor with %u-bit samples",
                       (unsigned)p->bits);
    case 3:
        if (p->sample_format != 3)
            return cf__err(err, CF_E_UNSUPPORTED,
                           "floating-point predictor with sample format %u",
                           (unsigned)p->sample_format);
        if (p->bits == 16 || p->bits == 24 || p->bits == 32 || p->bits == 64)
            return CF_OK;
        return cf__err(err, CF_E_UNSUPPORTED,
                       "floating-point predictor with %u-bit samples",
                       (unsigned)p->bits);
    default:
        return cf__err(err, CF_E_UNSUPPORTED, "predictor %u",
                       (unsigned)p->predictor);
    }
}

#define HOR_ACC(T, BYTES)                                                    \
    static void hor_acc_##BYTES(uint8_t *row, size_t n, size_t stride) {     \
        for (size_t i = stride; i < n; i++) {                                \
            T a, b;                                                          \
            memcpy(&a, row + (i - stride) * BYTES, BYTES);                   \
            memcpy(&b, row + i * BYTES, BYTES);                              \
            b = (T)(a + b);                                                  \
            memcpy(row + i * BYTES, &b, BYTES);                              \
        }                                                                    \
    }
HOR_ACC(uint16_t, 2)
HOR_ACC(uint32_t, 4)
HOR_ACC(uint64_t, 8)

static void hor_acc_1(uint8_t *row, size_t n, size_t stride) {
    for (size_t i = stride; i < n; i++)
        row[i] = (uint8_t)(row[i] + row[i - stride]);
}

/* Undo predictor 3 on one row of `wc` values of `bps` bytes, using `tmp`
 * (wc * bps bytes) as staging: the byte accumulation writes into tmp, then
 * each value is rebuilt from its plane bytes (plane 0 most significant)
 * and stored whole, which gives native order on any host. */
#if defined(__SSE2__)
#include <emmintrin.h>
/* Running byte sum (mod 256) of row into tmp, 16 bytes at a time: a prefix
 * sum inside the register in four shift-adds, plus the carry of the block
 * before.  The scalar loop is one long add chain; this halves its cost for
 * the common single-band case (stride 1). */
static size_t prefix_sum_u8(const uint8_t *row, uint8_t *tmp, size_t n) {
    __m128i carry = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(row + i));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 1));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 2));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 4));
        x = _mm_add_epi8(x, _mm_slli_si128(x, 8));
        x = _mm_add_epi8(x, carry);
        _mm_storeu_si128((__m128i *)(tmp + i), x);
        carry = _mm_set1_epi8((char)(_mm_extract_epi16(x, 7) >> 8));
    }
    return i;
}
#endif

static void fp_acc(uint8_t *row, uint8_t *tmp, size_t wc, unsigned bps,
                   size_t stride) {
    size_t cc = wc * bps;
    size_t head = stride < cc ? stride : cc;
#if defined(__SSE2__)
    if (stride == 1 && cc >= 16) {
        head = prefix_sum_u8(row, tmp, cc);
    } else
#endif
        memcpy(tmp, row, head);
    for (size_t i = head; i < cc; i++)
        tmp[i] = (uint8_t)(row[i] + tmp[i - stride]);
    if (bps == 4) {
        const uint8_t *p0 = tmp, *p1 = tmp + wc, *p2 = tmp + 2 * wc,
                      *p3 = tmp + 3 * wc;
        for (size_t k = 0; k < wc; k++) {
            uint32_t v = (uint32_t)p0[k] << 24 | (uint32_t)p1[k] << 16 |
                         (uint32_t)p2[k] << 8 | p3[k];
            memcpy(row + 4 * k, &v, 4);
        }
    } else if (bps == 2) {
        const uint8_t *p0 = tmp, *p1 = tmp + wc;
        for (size_t k = 0; k < wc; k++) {
            uint16_t v = (uint16_t)(p0[k] << 8 | p1[k]);
            memcpy(row + 2 * k, &v, 2);
        }
    } else {
        for (size_t k = 0; k < wc; k++) {
            uint64_t v = 0;
            for (unsigned b = 0; b < bps; b++) v = v << 8 | tmp[b * wc + k];
            memcpy(row + bps * k, &v, bps);
        }
    }
}

cf_status cf__predictor_apply(cf__scratch *rowbuf, const cf_codec_params *p,
                              uint8_t *buf, cf_error *err) {
    if (p->predictor == 1) return CF_OK;
    size_t bps = p->bits / 8;
    size_t wc = (size_t)p->width * p->samples; /* values per row */
    size_t row_bytes = wc * bps;
    size_t stride = p->samples;
    if (p->predictor == 3) {
        cf_status st = cf__scratch_reserve(rowbuf, row_bytes, err);
        if (st) return st;
    }
    for (uint32_t y = 0; y < p->height; y++) {
        uint8_t *row = buf + (size_t)y * row_bytes;
        if (p->predictor == 3) {
            fp_acc(row, rowbuf->p, wc, (unsigned)bps, stride);
            continue;
        }
        switch (bps) {
        case 1: hor_acc_1(row, wc, stride); break;
        case 2: hor_acc_2(row, wc, stride); break;
        case 4: hor_acc_4(row, wc, stride); break;
        default: hor_acc_8(row, wc, stride); break;
        }
    }
    return CF_OK;
}

cf_status cf_predictor_undo(const cf_codec_params *p, uint8_t *buf,
                            size_t len, cf_error *err) {
    if (!p || (!buf && len))
        return cf__err(err, CF_E_ARG, "predictor: NULL argument");
    cf_status st = cf__predictor_check(p, err);
    if (st || p->predictor == 1) return st;
    uint64_t want = cf_codec_stored_bytes(p);
    if (!want || want != len)
        return cf__err(err, CF_E_ARG,
                       "predictor: buffer of %zu bytes for a %ux%u chunk", len,
                       (unsigned)p->width, (unsigned)p->height);
    cf__scratch row = {NULL, 0};
    st = cf__predictor_apply(&row, p, buf, err);
    free(row.p);
    return st;
}
