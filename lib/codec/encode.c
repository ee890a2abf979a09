/*
 * encode.c - one chunk encoded for the writer: the inverse of
 * cf__codec_decode.  This file checks the request and encodes the
 * lossless byte codecs (NONE, DEFLATE, ZSTD), with the TIFF predictors
 * applied first as libtiff applies them:
 *  - 2, horizontal differencing: each sample minus the same sample of the
 *    pixel to its left, modulo 2^bits, on the bit pattern;
 *  - 3, floating point: each row's values split into byte planes, most
 *    significant plane first, then each byte minus the byte `samples`
 *    before it over the whole row of planes (libtiff's fpDiff).
 * Samples come in native order and are written little-endian (the writer
 * writes "II" files), so on a little-endian host the bytes go as they are.
 *
 * The same libraries as the decoders: libdeflate (zlib-wrapped, as GDAL
 * writes DEFLATE tiles) and libzstd, their state kept in the encoder and
 * reused chunk after chunk.  LERC, JPEG and WEBP have a file each
 * (lerc_enc.c, jpeg_enc.c, webp_enc.c); libtiff runs no predictor for
 * them, so neither do we.
 */
#include "codec_internal.h"

#include <math.h>
#include <stdlib.h>

int cf__codec_can_encode(uint16_t compression) {
    switch (compression) {
    case 1:
    case 8:
    case 50000: return 1;
#ifdef CF_HAVE_LERC
    case 34887: return 1;
#endif
#ifdef CF_HAVE_JPEG
    case 7: return 1;
#endif
#ifdef CF_HAVE_WEBP
    case 50001: return 1;
#endif
    default: return 0;
    }
}

/* Predictor 2 on one row of n samples of `bytes` each (native order). */
static void diff_row(uint8_t *r, size_t n, uint32_t spp, unsigned bytes) {
    for (size_t i = n; i-- > spp;) {
        switch (bytes) {
        case 1: r[i] = (uint8_t)(r[i] - r[i - spp]); break;
        case 2: {
            uint16_t a, b;
            memcpy(&a, r + 2 * i, 2);
            memcpy(&b, r + 2 * (i - spp), 2);
            a = (uint16_t)(a - b);
            memcpy(r + 2 * i, &a, 2);
            break;
        }
        case 4: {
            uint32_t a, b;
            memcpy(&a, r + 4 * i, 4);
            memcpy(&b, r + 4 * (i - spp), 4);
            a -= b;
            memcpy(r + 4 * i, &a, 4);
            break;
        }
        default: {
            uint64_t a, b;
            memcpy(&a, r + 8 * i, 8);
            memcpy(&b, r + 8 * (i - spp), 8);
            a -= b;
            memcpy(r + 8 * i, &a, 8);
        }
        }
    }
}

/* Predictor 3 on one row of n native-order values of `bytes` each: byte
 * planes (most significant first) into tmp, differenced, back into r. */
static void fp_diff_row(uint8_t *r, uint8_t *tmp, size_t n, uint32_t spp, unsigned bytes) {
    int le = cf__host_is_le();
    for (size_t k = 0; k < n; k++)
        for (unsigned j = 0; j < bytes; j++) /* j: plane, 0 = most significant */
            tmp[j * n + k] = r[k * bytes + (le ? bytes - 1 - j : j)];
    size_t total = n * bytes;
    for (size_t i = total; i-- > spp;) tmp[i] = (uint8_t)(tmp[i] - tmp[i - spp]);
    memcpy(r, tmp, total);
}

/* Native to little-endian, in place (a no-op on little-endian hosts). */
static void to_le(uint8_t *b, size_t len, unsigned bytes) {
    if (cf__host_is_le() || bytes < 2) return;
    for (size_t i = 0; i + bytes <= len; i += bytes)
        for (unsigned j = 0; j < bytes / 2; j++) {
            uint8_t t = b[i + j];
            b[i + j] = b[i + bytes - 1 - j];
            b[i + bytes - 1 - j] = t;
        }
}

cf_status cf__codec_encode(cf__encoder *e, const cf__codec_params *p,
                           const cf__encode_opts *o, const uint8_t *src, size_t len,
                           const uint8_t **out, size_t *out_len, cf_error *err) {
    static const cf__encode_opts defaults = {0, 0.0, 0, 0};
    if (!o) o = &defaults;
    *out = NULL;
    *out_len = 0;
    if (!cf__codec_can_encode(p->compression))
        return cf__err(err, CF_E_UNSUPPORTED, "writing compression %u", p->compression);
    uint64_t want = cf__codec_chunk_bytes(p);
    if (!want || want != len)
        return cf__err(err, CF_E_ARG, "chunk of %zu bytes, %ux%u x %u samples need %llu", len,
                       p->width, p->height, p->samples, (unsigned long long)want);
    if (o->level < 0 || o->level > 22 || o->quality < 0 || o->quality > 100 ||
        !(o->max_error >= 0 && o->max_error < HUGE_VAL))
        return cf__err(err, CF_E_ARG, "level %d, quality %d or max error %g out of range",
                       o->level, o->quality, o->max_error);
    int own = p->compression == 34887 || p->compression == 7 || p->compression == 50001;
    if (own && p->predictor != 1)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "predictor %u with compression %u (libtiff applies none to it)",
                       p->predictor, p->compression);
    /* (cf__codec_can_encode let only the codecs built here through) */
#ifdef CF_HAVE_LERC
    if (p->compression == 34887) return cf__encode_lerc(e, p, o, src, len, out, out_len, err);
#endif
#ifdef CF_HAVE_JPEG
    if (p->compression == 7) return cf__encode_jpeg(e, p, o, src, len, out, out_len, err);
#endif
#ifdef CF_HAVE_WEBP
    if (p->compression == 50001) return cf__encode_webp(e, p, o, src, len, out, out_len, err);
#endif
    const int level = o->level;
    CF__TRY(cf__predictor_check(p, err));
    if (p->compression == 1 && p->predictor != 1)
        return cf__err(err, CF_E_ARG, "predictor %u without compression (readers ignore it)",
                       p->predictor);
    unsigned bytes = p->bits / 8;
    const uint8_t *data = src;
    if (p->predictor != 1 || (!cf__host_is_le() && bytes > 1)) {
        CF__TRY(cf__scratch_reserve(&e->work, len, err));
        memcpy(e->work.p, src, len);
        size_t n = (size_t)p->width * p->samples, rowb = n * bytes;
        if (p->predictor == 3) CF__TRY(cf__scratch_reserve(&e->row, rowb, err));
        for (uint32_t y = 0; y < p->height; y++) {
            uint8_t *r = e->work.p + (size_t)y * rowb;
            if (p->predictor == 2) diff_row(r, n, p->samples, bytes);
            else if (p->predictor == 3) fp_diff_row(r, e->row.p, n, p->samples, bytes);
        }
        /* predictor 3 rows are byte planes already, in file order */
        if (p->predictor != 3) to_le(e->work.p, len, bytes);
        data = e->work.p;
    }
    switch (p->compression) {
    case 1:
        *out = data;
        *out_len = len;
        return CF_OK;
    default: /* 8 DEFLATE, 50000 ZSTD */
        return cf__enc_compress(e, p->compression == 50000, level, data, len, out, out_len, err);
    }
}
