/*
 * deflate.c - DEFLATE and ADOBE_DEFLATE (both zlib-wrapped) through
 * libdeflate, one-shot straight into the caller's buffer.  The output
 * buffer is exactly the expected size, so a stream that would expand past
 * it (a bomb) stops there instead of allocating.
 *
 * What libtiff accepts, so does this: bytes after the stream's end are
 * ignored, and a stream that holds more than the chunk (some writers store
 * a last strip's full RowsPerStrip rows) gives its first bytes.  libdeflate
 * cannot stop early, so that case is decoded again with zlib's streaming
 * inflate, told to stop once the chunk is full, as libtiff's zlib path
 * does (libtiff's own libdeflate path would leave the chunk's last bytes
 * unwritten).  A stream that ends before the chunk is full is an error.
 * The same zlib path decodes the first rows of a strip alone
 * (cf__codec_decode_rows), stopping there.
 */
#include "codec_internal.h"

#include <libdeflate.h>
#include <limits.h>
#include <zlib.h>

/* The first dst_len bytes the stream decodes to. */
static cf_status inflate_prefix(const uint8_t *src, size_t src_len,
                                uint8_t *dst, size_t dst_len, cf_error *err) {
    if (src_len > UINT_MAX || dst_len > UINT_MAX)
        return cf__err(err, CF_E_LIMIT, "stream of %zu bytes", src_len);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return cf__err(err, CF_E_NOMEM, "cannot start zlib");
    z.next_in = (Bytef *)(uintptr_t)src;
    z.avail_in = (uInt)src_len;
    z.next_out = dst;
    z.avail_out = (uInt)dst_len;
    int r = Z_OK;
    while (z.avail_out > 0 && r == Z_OK) r = inflate(&z, Z_NO_FLUSH);
    size_t got = dst_len - z.avail_out;
    inflateEnd(&z);
    if (got == dst_len) return CF_OK;
    if (r == Z_DATA_ERROR)
        return cf__err(err, CF_E_CODEC, "corrupt zlib stream after %zu bytes",
                       got);
    return cf__err(err, CF_E_CODEC, "stream ends before %zu bytes", dst_len);
}

cf_status cf__decode_deflate(cf__codec_ctx *ctx, const cf__codec_params *p,
                             const uint8_t *src, size_t src_len, uint8_t *dst,
                             size_t dst_len, cf_error *err) {
    /* The first rows of a chunk only (cf__codec_decode_rows): libdeflate
     * would inflate up to the end of dst and then fail, zlib stops there. */
    if (p->full_height > p->height) return inflate_prefix(src, src_len, dst, dst_len, err);
    struct libdeflate_decompressor *d;
    CF__TRY(cf__ctx_deflate(ctx, &d, err));
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
        return inflate_prefix(src, src_len, dst, dst_len, err);
    case LIBDEFLATE_SHORT_OUTPUT:
        return cf__err(err, CF_E_CODEC, "stream ends before %zu bytes",
                       dst_len);
    default:
        return cf__err(err, CF_E_CODEC, "corrupt zlib stream (%zu bytes)",
                       src_len);
    }
}
