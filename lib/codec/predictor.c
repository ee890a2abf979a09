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

cf_status cf__predictor_check(const cf__codec_params *p, cf_error *err) {
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

#if defined(__SSE2__)
#include <emmintrin.h>
/* The horizontal predictor 16 bytes at a time, for pixels of `pix` bytes
 * (1, 2, 4, 8 or 16: a power of two that divides the register) and
 * samples of `bps` bytes: a prefix sum of the block's pixels inside the
 * register (log2(16 / pix) shift-adds, lane-wise modulo 2^bits), plus the
 * last pixel of the block before, broadcast.  The scalar loop is one add
 * chain per sample; 4-band uint16 (pix 8) runs ~3x faster this way.
 * Returns the bytes done (whole blocks); the caller finishes the row. */
static inline __attribute__((always_inline)) __m128i
add_lanes(__m128i a, __m128i b, unsigned bps) {
    switch (bps) {
    case 1: return _mm_add_epi8(a, b);
    case 2: return _mm_add_epi16(a, b);
    case 4: return _mm_add_epi32(a, b);
    default: return _mm_add_epi64(a, b);
    }
}

static inline __attribute__((always_inline)) size_t
hor_simd(uint8_t *row, size_t len, unsigned pix, unsigned bps) {
    __m128i carry = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(row + i));
        if (pix <= 1) x = add_lanes(x, _mm_slli_si128(x, 1), bps);
        if (pix <= 2) x = add_lanes(x, _mm_slli_si128(x, 2), bps);
        if (pix <= 4) x = add_lanes(x, _mm_slli_si128(x, 4), bps);
        if (pix <= 8) x = add_lanes(x, _mm_slli_si128(x, 8), bps);
        x = add_lanes(x, carry, bps);
        _mm_storeu_si128((__m128i *)(row + i), x);
        switch (pix) { /* the block's last pixel, in every lane */
        case 1: carry = _mm_set1_epi8((char)(_mm_extract_epi16(x, 7) >> 8)); break;
        case 2: carry = _mm_set1_epi16((short)_mm_extract_epi16(x, 7)); break;
        case 4: carry = _mm_shuffle_epi32(x, 0xff); break;
        case 8: carry = _mm_unpackhi_epi64(x, x); break;
        default: carry = x; break;
        }
    }
    return i;
}

/* Bytes of the row done by hor_simd (0: this layout goes scalar). */
static size_t hor_fast(uint8_t *row, size_t len, size_t stride, size_t bps) {
    size_t pix = stride * bps;
#define CF_HOR(P, B) \
    if (pix == (P) && bps == (B)) return hor_simd(row, len, (P), (B));
    CF_HOR(1, 1) CF_HOR(2, 1) CF_HOR(4, 1) CF_HOR(8, 1) CF_HOR(16, 1)
    CF_HOR(2, 2) CF_HOR(4, 2) CF_HOR(8, 2) CF_HOR(16, 2)
    CF_HOR(4, 4) CF_HOR(8, 4) CF_HOR(16, 4)
    CF_HOR(8, 8) CF_HOR(16, 8)
#undef CF_HOR
    return 0;
}
#else
static size_t hor_fast(uint8_t *row, size_t len, size_t stride, size_t bps) {
    (void)row, (void)len, (void)stride, (void)bps;
    return 0;
}
#endif

/* Undo predictor 3 on one row of `wc` values of `bps` bytes, using `tmp`
 * (wc * bps bytes) as staging: the byte accumulation writes into tmp, then
 * each value is rebuilt from its plane bytes (plane 0 most significant)
 * and stored whole, which gives native order on any host. */
#if defined(__SSE2__)
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

cf_status cf__predictor_apply(cf__scratch *rowbuf, const cf__codec_params *p,
                              uint8_t *buf, cf_error *err) {
    if (p->predictor == 1) return CF_OK;
    size_t bps = p->bits / 8;
    size_t wc = (size_t)p->width * p->samples; /* values per row */
    size_t row_bytes = wc * bps;
    size_t stride = p->samples;
    if (p->predictor == 3) {
        CF__TRY(cf__scratch_reserve(rowbuf, row_bytes, err));
    }
    /* Rows are independent; the last ones the decoder wrote are the ones
     * still in cache (a 512 px tile of 4 uint16 bands is 2 MB, more than
     * a core's L2), so go from the bottom up. */
    for (uint32_t y = p->height; y-- > 0;) {
        uint8_t *row = buf + (size_t)y * row_bytes;
        if (p->predictor == 3) {
            fp_acc(row, rowbuf->p, wc, (unsigned)bps, stride);
            continue;
        }
        /* whole blocks in SIMD where the layout allows, the rest (and
         * other layouts: 3-band, 6-byte pixels, ...) one sample at a time
         * from the first not done, whose left neighbour is final */
        size_t done = hor_fast(row, row_bytes, stride, bps) / bps;
        size_t from = done > stride ? done - stride : 0;
        uint8_t *r0 = row + from * bps;
        switch (bps) {
        case 1: hor_acc_1(r0, wc - from, stride); break;
        case 2: hor_acc_2(r0, wc - from, stride); break;
        case 4: hor_acc_4(r0, wc - from, stride); break;
        default: hor_acc_8(r0, wc - from, stride); break;
        }
    }
    return CF_OK;
}

cf_status cf__predictor_undo(const cf__codec_params *p, uint8_t *buf,
                            size_t len, cf_error *err) {
    if (!p || (!buf && len))
        return cf__err(err, CF_E_ARG, "predictor: NULL argument");
    cf_status st = cf__predictor_check(p, err);
    if (st || p->predictor == 1) return st;
    uint64_t want = cf__codec_stored_bytes(p);
    if (!want || want != len)
        return cf__err(err, CF_E_ARG,
                       "predictor: buffer of %zu bytes for a %ux%u chunk", len,
                       (unsigned)p->width, (unsigned)p->height);
    cf__scratch row = {NULL, 0};
    st = cf__predictor_apply(&row, p, buf, err);
    free(row.p);
    return st;
}
