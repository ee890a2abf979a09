/*
 * encoder.c - the encoder's state (struct cf__encoder in
 * codec_internal.h): its compressors, made once and reused chunk after
 * chunk, and its buffers.  Apart from encode.c so that the codec files
 * encode.c dispatches to can use it without a cycle.
 */
#include "codec_internal.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <zstd.h>

cf__encoder *cf__encoder_new(void) { return cf__calloc(1, sizeof(cf__encoder)); }

void cf__encoder_free(cf__encoder *e) {
    if (!e) return;
    if (e->deflate) libdeflate_free_compressor(e->deflate);
    if (e->zstd) ZSTD_freeCCtx(e->zstd);
    free(e->work.p);
    free(e->row.p);
    free(e->out.p);
    free(e->blob.p);
    free(e->mask.p);
    free(e);
}

/* Lazily made compressors at a level (CF_E_NOMEM). */
static cf_status enc_deflate(cf__encoder *e, int level, struct libdeflate_compressor **out,
                              cf_error *err) {
    if (!e->deflate || e->deflate_level != level) {
        if (e->deflate) libdeflate_free_compressor(e->deflate);
        e->deflate = libdeflate_alloc_compressor(level);
        e->deflate_level = level;
        if (!e->deflate) return cf__err(err, CF_E_NOMEM, "cannot start libdeflate");
    }
    *out = e->deflate;
    return CF_OK;
}

static cf_status enc_zstd(cf__encoder *e, void **out, cf_error *err) {
    if (!e->zstd) e->zstd = ZSTD_createCCtx();
    if (!e->zstd) return cf__err(err, CF_E_NOMEM, "cannot start zstd");
    *out = e->zstd;
    return CF_OK;
}

cf_status cf__enc_compress(cf__encoder *e, int zstd, int level, const uint8_t *src, size_t len,
                           const uint8_t **out, size_t *out_len, cf_error *err) {
    size_t n;
    if (!zstd) {
        int lv = level > 0 ? (level > 12 ? 12 : level) : 6; /* GDAL's default */
        struct libdeflate_compressor *c = NULL;
        CF__TRY(enc_deflate(e, lv, &c, err));
        size_t cap = libdeflate_zlib_compress_bound(c, len);
        CF__TRY(cf__scratch_reserve(&e->out, cap, err));
        n = libdeflate_zlib_compress(c, src, len, e->out.p, cap);
        if (!n) return cf__err(err, CF_E_CODEC, "DEFLATE of %zu bytes failed", len);
    } else {
        void *z = NULL;
        CF__TRY(enc_zstd(e, &z, err));
        int lv = level > 0 ? (level > 22 ? 22 : level) : 9; /* GDAL's default */
        size_t cap = ZSTD_compressBound(len);
        CF__TRY(cf__scratch_reserve(&e->out, cap, err));
        n = ZSTD_compressCCtx(z, e->out.p, cap, src, len, lv);
        if (ZSTD_isError(n))
            return cf__err(err, CF_E_CODEC, "ZSTD of %zu bytes: %s", len, ZSTD_getErrorName(n));
    }
    *out = e->out.p;
    *out_len = n;
    return CF_OK;
}
