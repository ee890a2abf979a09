/*
 * encode.c - one chunk encoded for the writer: the inverse of
 * cf__codec_decode for the lossless codecs a user writes predictions and
 * rasters with (NONE, DEFLATE, ZSTD), with the TIFF predictors applied
 * first as libtiff applies them:
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
 * reused chunk after chunk.
 */
#include "codec_internal.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <zstd.h>

struct cf__encoder {
    struct libdeflate_compressor *deflate;
    int deflate_level;
    ZSTD_CCtx *zstd;
    cf__scratch work; /* the chunk after the predictor */
    cf__scratch row;  /* predictor 3: one row's byte planes */
    cf__scratch out;  /* the encoded chunk */
};

cf__encoder *cf__encoder_new(void) { return cf__calloc(1, sizeof(cf__encoder)); }

void cf__encoder_free(cf__encoder *e) {
    if (!e) return;
    if (e->deflate) libdeflate_free_compressor(e->deflate);
    if (e->zstd) ZSTD_freeCCtx(e->zstd);
    free(e->work.p);
    free(e->row.p);
    free(e->out.p);
    free(e);
}

int cf__codec_can_encode(uint16_t compression) {
    return compression == 1 || compression == 8 || compression == 50000;
}

static int host_is_le(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
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
    int le = host_is_le();
    for (size_t k = 0; k < n; k++)
        for (unsigned j = 0; j < bytes; j++) /* j: plane, 0 = most significant */
            tmp[j * n + k] = r[k * bytes + (le ? bytes - 1 - j : j)];
    size_t total = n * bytes;
    for (size_t i = total; i-- > spp;) tmp[i] = (uint8_t)(tmp[i] - tmp[i - spp]);
    memcpy(r, tmp, total);
}

/* Native to little-endian, in place (a no-op on little-endian hosts). */
static void to_le(uint8_t *b, size_t len, unsigned bytes) {
    if (host_is_le() || bytes < 2) return;
    for (size_t i = 0; i + bytes <= len; i += bytes)
        for (unsigned j = 0; j < bytes / 2; j++) {
            uint8_t t = b[i + j];
            b[i + j] = b[i + bytes - 1 - j];
            b[i + bytes - 1 - j] = t;
        }
}

cf_status cf__codec_encode(cf__encoder *e, const cf__codec_params *p, int level,
                           const uint8_t *src, size_t len, const uint8_t **out,
                           size_t *out_len, cf_error *err) {
    *out = NULL;
    *out_len = 0;
    if (!cf__codec_can_encode(p->compression))
        return cf__err(err, CF_E_UNSUPPORTED, "writing compression %u", p->compression);
    uint64_t want = cf__codec_chunk_bytes(p);
    if (!want || want != len)
        return cf__err(err, CF_E_ARG, "chunk of %zu bytes, %ux%u x %u samples need %llu", len,
                       p->width, p->height, p->samples, (unsigned long long)want);
    CF__TRY(cf__predictor_check(p, err));
    if (p->compression == 1 && p->predictor != 1)
        return cf__err(err, CF_E_ARG, "predictor %u without compression (readers ignore it)",
                       p->predictor);
    unsigned bytes = p->bits / 8;
    const uint8_t *data = src;
    if (p->predictor != 1 || (!host_is_le() && bytes > 1)) {
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
    case 8: {
        int lv = level > 0 ? (level > 12 ? 12 : level) : 6; /* GDAL's default */
        if (!e->deflate || e->deflate_level != lv) {
            if (e->deflate) libdeflate_free_compressor(e->deflate);
            e->deflate = libdeflate_alloc_compressor(lv);
            e->deflate_level = lv;
            if (!e->deflate) return cf__err(err, CF_E_NOMEM, "cannot start libdeflate");
        }
        size_t cap = libdeflate_zlib_compress_bound(e->deflate, len);
        CF__TRY(cf__scratch_reserve(&e->out, cap, err));
        size_t n = libdeflate_zlib_compress(e->deflate, data, len, e->out.p, cap);
        if (!n) return cf__err(err, CF_E_CODEC, "DEFLATE of %zu bytes failed", len);
        *out = e->out.p;
        *out_len = n;
        return CF_OK;
    }
    default: { /* 50000: ZSTD */
        if (!e->zstd) e->zstd = ZSTD_createCCtx();
        if (!e->zstd) return cf__err(err, CF_E_NOMEM, "cannot start zstd");
        int lv = level > 0 ? (level > 22 ? 22 : level) : 9; /* GDAL's default */
        size_t cap = ZSTD_compressBound(len);
        CF__TRY(cf__scratch_reserve(&e->out, cap, err));
        size_t n = ZSTD_compressCCtx(e->zstd, e->out.p, cap, data, len, lv);
        if (ZSTD_isError(n))
            return cf__err(err, CF_E_CODEC, "ZSTD of %zu bytes: %s", len, ZSTD_getErrorName(n));
        *out = e->out.p;
        *out_len = n;
        return CF_OK;
    }
    }
}
