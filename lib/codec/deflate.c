/*
 * deflate.c - DEFLATE and ADOBE_DEFLATE (both zlib-wrapped) through
 * libdeflate, one-shot straight into the caller's buffer.  The output
 * buffer is exactly the expected size, so a stream that would expand past
 * it (a bomb, or a writer that stored too many rows) stops there with an
 * error instead of allocating.
 */
#include "codec_internal.h"

#include <libdeflate.h>

cf_status cf__decode_deflate(cf_codec_ctx *ctx, const cf_codec_params *p,
                             const uint8_t *src, size_t src_len, uint8_t *dst,
                             size_t dst_len, cf_error *err) {
    struct libdeflate_decompressor *d;
    cf_status st = cf__ctx_deflate(ctx, &d, err);
    if (st) return st;
    size_t got = 0;
    enum libdeflate_result r =
        libdeflate_zlib_decompress(d, src, src_len, dst, dst_len, &got);
    switch (r) {
    case LIBDEFLATE_SUCCESS:
        if (got != dst_len)
            return cf__err(err, CF_E_CODEC,
                           "stream decompresses to %zu bytes, chunk needs %zu",
                           got, dst_len);
        return CF_OK;
    case LIBDEFLATE_INSUFFICIENT_SPACE:
        return cf__err(err, CF_E_CODEC,
                       "stream decompresses to more than the chunk's %zu "
                       "bytes",
                       dst_len);
    case LIBDEFLATE_SHORT_OUTPUT:
        return cf__err(err, CF_E_CODEC, "stream ends before %zu bytes",
                       dst_len);
    default:
        return cf__err(err, CF_E_CODEC, "corrupt zlib stream (%zu bytes)",
                       src_len);
    }
}
