/*
 * ctx.c - the codec context one thread decodes with: its decoder states
 * (libdeflate, zstd, lzma), made on first use, and its scratch buffers,
 * kept across chunks but shrunk after a huge one.
 */
#include "codec_internal.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <zstd.h>

/* Scratch buffers above this size shrink again when later chunks need far
 * less. */
#define CF__SCRATCH_KEEP ((size_t)64 << 20)

cf__codec_ctx *cf__codec_ctx_new(void) {
    return cf__calloc(1, sizeof(cf__codec_ctx));
}

void cf__codec_ctx_free(cf__codec_ctx *ctx) {
    if (!ctx) return;
    if (ctx->deflate) libdeflate_free_decompressor(ctx->deflate);
    if (ctx->zstd) ZSTD_freeDCtx(ctx->zstd);
    cf__lzma_free(ctx->lzma);
    free(ctx->outer.p);
    free(ctx->aux.p);
    free(ctx->row.p);
    free(ctx->tile.p);
    free(ctx->rev.p);
    free(ctx->stage.p);
    free(ctx->runs.p);
    free(ctx->ojpeg.p);
    free(ctx->lerc2.p);
    free(ctx->zblock.p);
    free(ctx);
}

cf_status cf__scratch_reserve(cf__scratch *s, size_t n, cf_error *err) {
    /* Keep the buffer across calls, but do not let one huge chunk pin
     * memory for the rest of a thread's life. */
    if (s->cap >= n && !(s->cap > CF__SCRATCH_KEEP && s->cap / 4 > n))
        return CF_OK;
    /* Grow by half again so a run of slightly larger chunks does not
     * reallocate every time; free first, the old contents are not needed. */
    size_t want = n + n / 2;
    if (want < n) want = n;
    free(s->p);
    s->p = cf__malloc(want);
    if (!s->p) {
        s->cap = 0;
        return cf__err(err, CF_E_NOMEM, "codec scratch buffer of %zu bytes",
                       want);
    }
    s->cap = want;
    return CF_OK;
}

uint8_t *cf__codec_ctx_tile(cf__codec_ctx *ctx, size_t n, cf_error *err) {
    if (cf__scratch_reserve(&ctx->tile, n, err)) return NULL;
    return ctx->tile.p;
}

cf_status cf__ctx_deflate(cf__codec_ctx *ctx,
                          struct libdeflate_decompressor **out,
                          cf_error *err) {
    if (!ctx->deflate) ctx->deflate = libdeflate_alloc_decompressor();
    if (!ctx->deflate)
        return cf__err(err, CF_E_NOMEM, "cannot allocate deflate decoder");
    *out = ctx->deflate;
    return CF_OK;
}

cf_status cf__ctx_zstd(cf__codec_ctx *ctx, void **out, cf_error *err) {
    if (!ctx->zstd) ctx->zstd = ZSTD_createDCtx();
    if (!ctx->zstd)
        return cf__err(err, CF_E_NOMEM, "cannot allocate zstd decoder");
    *out = ctx->zstd;
    return CF_OK;
}
