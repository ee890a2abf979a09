/*
 * zstd.c - ZSTD chunks, one-shot with the context's reusable ZSTD_DCtx.
 * One-shot decoding writes straight into the caller's buffer and needs no
 * window buffer, so a frame header claiming a huge window allocates
 * nothing; output is capped at the expected size.
 */
#include "codec_internal.h"

#include <zstd.h>
#include <zstd_errors.h>

cf_status cf__decode_zstd(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    void *dctx;
    CF__TRY(cf__ctx_zstd(ctx, &dctx, err));
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
