/*
 * zstd.c - ZSTD chunks, one-shot with the context's reusable ZSTD_DCtx.
 * One-shot decoding writes straight into the caller's buffer and needs no
 * window buffer, so a frame header claiming a huge window allocates
 * nothing; output is capped at the expected size.
 *
 * The first rows of a chunk (cf__codec_decode_rows) go through zstd's
 * buffer-less API instead, block by block (128 KiB at most each), and stop
 * at the block that holds the last row needed: a random 256 px patch over
 * 512 px tiles needs only the top rows of the tiles below it, and those
 * cost what they hold (measured here: 128 of 512 rows in a quarter of the
 * one-shot time; all of them in the same time).  Buffer-less decoding
 * keeps no window either: earlier blocks are read where they were written.
 */
#define ZSTD_STATIC_LINKING_ONLY /* the buffer-less API (exported by libzstd) */
#include "codec_internal.h"

#include <zstd.h>
#include <zstd_errors.h>

/* The first dst_len bytes of the frames in src.  Blocks go straight into
 * dst while a whole block fits; from the first that may not, into the
 * context's zblock buffer, contiguously (zstd refers back to one earlier
 * segment besides the current one: dst before, zblock after), and the
 * bytes needed are copied over at the end. */
static cf_status decode_prefix(cf__codec_ctx *ctx, ZSTD_DCtx *d, const uint8_t *src,
                               size_t src_len, uint8_t *dst, size_t dst_len,
                               cf_error *err) {
    size_t ip = 0, op = 0;    /* consumed, bytes of dst written directly */
    size_t tail = 0, tcap = 0; /* bytes in zblock, its size */
    uint8_t *tb = NULL;
    int in_frame = 0;
    while (op + tail < dst_len) {
        if (!in_frame) {
            if (ip >= src_len) break;
            size_t r = ZSTD_decompressBegin(d);
            if (ZSTD_isError(r))
                return cf__err(err, CF_E_CODEC, "%s", ZSTD_getErrorName(r));
            in_frame = 1;
        }
        size_t k = ZSTD_nextSrcSizeToDecompress(d);
        if (k == 0) { /* this frame is done; the next one may go on */
            in_frame = 0;
            continue;
        }
        if (k > src_len - ip) break;
        uint8_t *out;
        size_t room;
        if (!tb && dst_len - op >= ZSTD_BLOCKSIZE_MAX) {
            out = dst + op;
            room = dst_len - op;
        } else {
            if (!tb) {
                tcap = dst_len - op + ZSTD_BLOCKSIZE_MAX;
                CF__TRY(cf__scratch_reserve(&ctx->zblock, tcap, err));
                tb = ctx->zblock.p;
            }
            out = tb + tail;
            room = tcap - tail;
        }
        size_t r = ZSTD_decompressContinue(d, out, room, src + ip, k);
        if (ZSTD_isError(r))
            return cf__err(err, CF_E_CODEC, "%s after %zu bytes",
                           ZSTD_getErrorName(r), op + tail);
        ip += k;
        if (tb) tail += r;
        else op += r;
    }
    if (op + tail < dst_len)
        return cf__err(err, CF_E_CODEC, "stream ends before %zu bytes", dst_len);
    if (tb) memcpy(dst + op, tb, dst_len - op);
    return CF_OK;
}

cf_status cf__decode_zstd(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    void *dctx;
    CF__TRY(cf__ctx_zstd(ctx, &dctx, err));
    if (p->full_height > p->height)
        return decode_prefix(ctx, dctx, src, src_len, dst, dst_len, err);
    size_t r = ZSTD_decompressDCtx(dctx, dst, dst_len, src, src_len);
    if (ZSTD_isError(r)) {
        if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
            return cf__err(err, CF_E_CODEC,
                           "frame decompresses to more than the chunk's %zu "
                           "bytes",
                           dst_len);
        return cf__err(err, CF_E_CODEC, "%s (%zu bytes)",
                       ZSTD_getErrorName(r), src_len);
    }
    if (r != dst_len)
        return cf__err(err, CF_E_CODEC,
                       "frame decompresses to %zu bytes, chunk needs %zu", r,
                       dst_len);
    return CF_OK;
}
