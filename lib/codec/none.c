/*
 * none.c - uncompressed chunks.  A chunk shorter than its decoded size is an
 * error (libtiff: "Not enough data"); bytes past it are ignored, as libtiff
 * ignores them.
 */
#include "codec_internal.h"

cf_status cf__decode_none(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    if (src_len < dst_len)
        return cf__err(err, CF_E_CODEC,
                       "uncompressed chunk has %zu bytes, needs %zu", src_len,
                       dst_len);
    if (dst_len) memcpy(dst, src, dst_len);
    return CF_OK;
}
