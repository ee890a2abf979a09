/*
 * paste.c - decoded samples into the caller's buffer: the fill value of
 * pixels without data, and the paste kernels (strided copies, RGB/RGBA
 * planes split with SSSE3, 1-bit samples expanded) that put the part of a
 * decoded chunk inside a window into band-sequential output.
 */
#include "cog_internal.h"
#include "read_plan.h"

#include <math.h>
#include <string.h>

void cf__cog_fill_value(const cf_cog *cog, uint8_t out[CF__FILL_MAX]) {
    memset(out, 0, CF__FILL_MAX);
    const cf__tiff *t = cog->tiff;
    if (!t->has_nodata) return;
    double v = t->nodata;
    /* A complex sample's fill is the nodata value plus 0i. */
    switch (cog->dtype) {
#define CF_FILL(T, lo, hi)                                              \
    {                                                                   \
        T x = (T)0;                                                     \
        if (!isnan(v) && v >= (double)(lo) && v <= (double)(hi)) x = (T)v; \
        memcpy(out, &x, sizeof x);                                      \
        break;                                                          \
    }
    case CF_DT_U8: CF_FILL(uint8_t, 0, UINT8_MAX)
    case CF_DT_I8: CF_FILL(int8_t, INT8_MIN, INT8_MAX)
    case CF_DT_U16: CF_FILL(uint16_t, 0, UINT16_MAX)
    case CF_DT_I16:
    case CF_DT_CI16: CF_FILL(int16_t, INT16_MIN, INT16_MAX)
    case CF_DT_U32: CF_FILL(uint32_t, 0, UINT32_MAX)
    case CF_DT_I32:
    case CF_DT_CI32: CF_FILL(int32_t, INT32_MIN, INT32_MAX)
    case CF_DT_U64: CF_FILL(uint64_t, 0, 1.8446744073709550e19)
    case CF_DT_I64: CF_FILL(int64_t, -9.2233720368547758e18, 9.2233720368547748e18)
#undef CF_FILL
    case CF_DT_F32:
    case CF_DT_CF32: {
        float f = (float)v;
        memcpy(out, &f, 4);
        break;
    }
    case CF_DT_F64:
    case CF_DT_CF64: memcpy(out, &v, 8); break;
    default: break;
    }
}

void cf__cog_fill_samples(uint8_t *dst, size_t n, size_t bps, const uint8_t v[CF__FILL_MAX]) {
    int zero = 1;
    for (size_t i = 0; i < bps; i++) zero &= v[i] == 0;
    if (zero || bps == 1) {
        memset(dst, v[0], n * bps);
        return;
    }
    for (size_t i = 0; i < n; i++) memcpy(dst + i * bps, v, bps);
}

/* Bytes of one delivered sample of IFD ifdi (1 for bits, which paste
 * expands to a byte). */
size_t cf__cog_out_bps(const cf_cog *cog, int ifdi) {
    cf__chunk c;
    memset(&c, 0, sizeof c);
    c.ifd = ifdi;
    cf__codec_params p;
    cf__cog_chunk_params(cog, &c, &p);
    uint32_t samples, bits;
    cf__codec_out_layout(&p, &samples, &bits);
    return bits >= 8 ? bits / 8u : 1;
}

void cf__cog_fill(const cf_cog *cog, int ifdi, uint8_t *dst, size_t nsamples) {
    uint8_t v[CF__FILL_MAX];
    cf__cog_fill_value(cog, v);
    cf__cog_fill_samples(dst, nsamples, cf__cog_out_bps(cog, ifdi), v);
}

/* Copy `n` samples with a source stride of `stride` samples. */
static void copy_strided(uint8_t *d, const uint8_t *s, size_t n, size_t stride,
                         size_t bps) {
    if (stride == 1) {
        memcpy(d, s, n * bps);
        return;
    }
    switch (bps) {
    case 1:
        for (size_t i = 0; i < n; i++) d[i] = s[i * stride];
        break;
    case 2:
        for (size_t i = 0; i < n; i++) memcpy(d + 2 * i, s + 2 * i * stride, 2);
        break;
    case 4:
        for (size_t i = 0; i < n; i++) memcpy(d + 4 * i, s + 4 * i * stride, 4);
        break;
    default:
        for (size_t i = 0; i < n; i++) memcpy(d + bps * i, s + bps * i * stride, bps);
        break;
    }
}

/* Split n RGB pixels into three planes.  With SSSE3 (checked at run time)
 * 16 pixels take nine byte shuffles, as GDAL's GDALDeinterleave does. */
#if defined(__x86_64__) || defined(__i386__)
#include <tmmintrin.h>
__attribute__((target("ssse3"))) static size_t split3_ssse3(
    const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2, size_t n) {
    const __m128i ra = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i rb = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i rc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i ga = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i gb = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
    const __m128i gc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
    const __m128i ba = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i bb = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
    const __m128i bc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
    size_t i = 0;
    for (; i + 16 <= n; i += 16, s += 48) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i r = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ra), _mm_shuffle_epi8(b, rb)),
                                 _mm_shuffle_epi8(c, rc));
        __m128i g = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ga), _mm_shuffle_epi8(b, gb)),
                                 _mm_shuffle_epi8(c, gc));
        __m128i bl = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ba), _mm_shuffle_epi8(b, bb)),
                                  _mm_shuffle_epi8(c, bc));
        _mm_storeu_si128((__m128i *)(d0 + i), r);
        _mm_storeu_si128((__m128i *)(d1 + i), g);
        _mm_storeu_si128((__m128i *)(d2 + i), bl);
    }
    return i;
}
#endif

static void split3(const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2,
                   size_t n) {
    size_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("ssse3")) i = split3_ssse3(s, d0, d1, d2, n);
#endif
    for (s += 3 * i; i < n; i++, s += 3) {
        d0[i] = s[0];
        d1[i] = s[1];
        d2[i] = s[2];
    }
}

/* Split n pixels of 4 samples (bps 1 or 2 bytes each) into four planes
 * d[0..3].  SSE2 (always there on x86-64) transposes 16 8-bit or 8
 * 16-bit pixels with three rounds of unpacks; 4-band uint8 and uint16
 * (RGB + near infrared) is the commonest layout of EO imagery, and the
 * per-band strided copy was most of the CPU of an uncompressed read. */
static void split4(const uint8_t *s, uint8_t *const d[4], size_t n, size_t bps) {
    size_t i = 0;
#if defined(__SSE2__)
    if (bps == 1) {
        for (; i + 16 <= n; i += 16, s += 64) {
            __m128i v0 = _mm_loadu_si128((const __m128i *)s);
            __m128i v1 = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i v2 = _mm_loadu_si128((const __m128i *)(s + 32));
            __m128i v3 = _mm_loadu_si128((const __m128i *)(s + 48));
            /* pixels 0-3 | 4-7 | 8-11 | 12-15, bands interleaved */
            __m128i t0 = _mm_unpacklo_epi8(v0, v1), t1 = _mm_unpackhi_epi8(v0, v1);
            __m128i t2 = _mm_unpacklo_epi8(v2, v3), t3 = _mm_unpackhi_epi8(v2, v3);
            __m128i u0 = _mm_unpacklo_epi8(t0, t1), u1 = _mm_unpackhi_epi8(t0, t1);
            __m128i u2 = _mm_unpacklo_epi8(t2, t3), u3 = _mm_unpackhi_epi8(t2, t3);
            /* w0: band 0 then 1 of pixels 0-7; w1: bands 2, 3; w2, w3: 8-15 */
            __m128i w0 = _mm_unpacklo_epi8(u0, u1), w1 = _mm_unpackhi_epi8(u0, u1);
            __m128i w2 = _mm_unpacklo_epi8(u2, u3), w3 = _mm_unpackhi_epi8(u2, u3);
            _mm_storeu_si128((__m128i *)(d[0] + i), _mm_unpacklo_epi64(w0, w2));
            _mm_storeu_si128((__m128i *)(d[1] + i), _mm_unpackhi_epi64(w0, w2));
            _mm_storeu_si128((__m128i *)(d[2] + i), _mm_unpacklo_epi64(w1, w3));
            _mm_storeu_si128((__m128i *)(d[3] + i), _mm_unpackhi_epi64(w1, w3));
        }
    } else {
        for (; i + 8 <= n; i += 8, s += 64) {
            __m128i v0 = _mm_loadu_si128((const __m128i *)s);
            __m128i v1 = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i v2 = _mm_loadu_si128((const __m128i *)(s + 32));
            __m128i v3 = _mm_loadu_si128((const __m128i *)(s + 48));
            /* pixels 0-1 | 2-3 | 4-5 | 6-7 */
            __m128i t0 = _mm_unpacklo_epi16(v0, v1), t1 = _mm_unpackhi_epi16(v0, v1);
            __m128i t2 = _mm_unpacklo_epi16(v2, v3), t3 = _mm_unpackhi_epi16(v2, v3);
            /* u0: band 0 then 1 of pixels 0-3; u1: bands 2, 3; u2, u3: 4-7 */
            __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1);
            __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3);
            _mm_storeu_si128((__m128i *)(d[0] + 2 * i), _mm_unpacklo_epi64(u0, u2));
            _mm_storeu_si128((__m128i *)(d[1] + 2 * i), _mm_unpackhi_epi64(u0, u2));
            _mm_storeu_si128((__m128i *)(d[2] + 2 * i), _mm_unpacklo_epi64(u1, u3));
            _mm_storeu_si128((__m128i *)(d[3] + 2 * i), _mm_unpackhi_epi64(u1, u3));
        }
    }
#endif
    for (; i < n; i++, s += 4 * bps)
        for (int k = 0; k < 4; k++) memcpy(d[k] + bps * i, s + bps * k, bps);
}

void cf__cog_paste(const cf_cog *cog, const cf__chunk *c, const uint8_t *chunk,
                   int64_t x, int64_t y, uint32_t w, uint32_t h,
                   const int *bands, int nbands, uint8_t *dst,
                   int expand_bits) {
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[c->ifd];
    cf__codec_params p;
    cf__cog_chunk_params(cog, c, &p);
    cf__rect in;
    if (!cf__plan_chunk_rect(ifd, c, x, y, w, h, &in)) return;
    const int64_t px0 = (int64_t)c->cx * ifd->chunk_w, py0 = (int64_t)c->cy * ifd->chunk_h;
    const int64_t ix0 = in.x0, iy0 = in.y0, ix1 = in.x1, iy1 = in.y1;
    /* The decoded chunk's layout (widened depths, RGB(A) colours). */
    uint32_t osamp, obits;
    cf__codec_out_layout(&p, &osamp, &obits);
    size_t spp = osamp;
    size_t n = (size_t)(ix1 - ix0);
    size_t row_bytes = ((size_t)p.width * spp * obits + 7) / 8;
    size_t bps = obits >= 8 ? obits / 8u : 1;
    if (ifd->planar != 2 && (size_t)nbands == spp &&
        ((obits == 8 && (spp == 3 || spp == 4)) || (obits == 16 && spp == 4))) {
        /* all bands in file order of 8-bit RGB(A) (JPEG, WebP) or 4-band
         * 8/16-bit: split each row in one pass instead of one strided pass
         * per band */
        int inorder = 1;
        for (int k = 0; k < nbands; k++) inorder &= bands[k] == k;
        if (inorder) {
            size_t plane = (size_t)h * w * bps;
            for (int64_t r = iy0; r < iy1; r++) {
                const uint8_t *s = chunk + (size_t)(r - py0) * row_bytes +
                                   (size_t)(ix0 - px0) * spp * bps;
                uint8_t *d[4];
                d[0] = dst + ((size_t)(r - y) * w + (size_t)(ix0 - x)) * bps;
                for (size_t k = 1; k < spp; k++) d[k] = d[k - 1] + plane;
                if (spp == 3)
                    split3(s, d[0], d[1], d[2], n);
                else
                    split4(s, d, n, bps);
            }
            return;
        }
    }
    for (int k = 0; k < nbands; k++) {
        size_t s;
        if (ifd->planar == 2) {
            if ((uint32_t)bands[k] != c->plane) continue;
            s = 0;
        } else {
            s = (size_t)bands[k];
        }
        for (int64_t r = iy0; r < iy1; r++) {
            const uint8_t *srow = chunk + (size_t)(r - py0) * row_bytes;
            uint8_t *drow = dst + (((size_t)k * h + (size_t)(r - y)) * w +
                                   (size_t)(ix0 - x)) * bps;
            if (obits == 1 && spp == 1) {
                cf__bits_expand(srow, (size_t)(ix0 - px0), n, drow,
                                (uint8_t)expand_bits);
            } else if (obits == 1) {
                for (size_t i = 0; i < n; i++) {
                    size_t bit = ((size_t)(ix0 - px0) + i) * spp + s;
                    int on = (srow[bit >> 3] >> (7 - (bit & 7))) & 1;
                    drow[i] = on ? (uint8_t)expand_bits : 0;
                }
            } else {
                copy_strided(drow, srow + ((size_t)(ix0 - px0) * spp + s) * bps, n,
                             spp, bps);
            }
        }
    }
}
