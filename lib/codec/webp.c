/*
 * webp.c - WebP chunks (TIFF 50001) through libwebp, decoded straight into
 * the caller's buffer as RGB (3 samples) or RGBA (4 samples), 8-bit, like
 * libtiff's tif_webp.c.  The bitstream's size must match the chunk
 * (reliability item 19); a 3-sample chunk holding a stream with alpha gets
 * the colour channels only.
 */
#include "codec_internal.h"

#ifdef CF_HAVE_WEBP
#include <webp/decode.h>

cf_status cf__check_webp(const cf__codec_params *p, cf_error *err) {
    if (p->bits != 8 || (p->samples != 3 && p->samples != 4))
        return cf__err(err, CF_E_UNSUPPORTED,
                       "%u samples of %u bits (WebP carries 3 or 4 of 8)",
                       (unsigned)p->samples, (unsigned)p->bits);
    return CF_OK;
}

cf_status cf__decode_webp(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    CF__TRY(cf__check_webp(p, err));
    WebPBitstreamFeatures f;
    VP8StatusCode vs = WebPGetFeatures(src, src_len, &f);
    if (vs != VP8_STATUS_OK)
        return cf__err(err, CF_E_CODEC, "unreadable bitstream header (status %d)",
                       (int)vs);
    if (f.has_animation)
        return cf__err(err, CF_E_FORMAT, "animated bitstream in a chunk");
    if ((uint32_t)f.width != p->width || (uint32_t)f.height != p->height)
        return cf__err(err, CF_E_FORMAT, "bitstream is %dx%d, chunk is %ux%u",
                       f.width, f.height, (unsigned)p->width,
                       (unsigned)p->height);
    int stride = (int)(p->width * p->samples);
    uint8_t *r = p->samples == 4
                     ? WebPDecodeRGBAInto(src, src_len, dst, dst_len, stride)
                     : WebPDecodeRGBInto(src, src_len, dst, dst_len, stride);
    if (!r)
        return cf__err(err, CF_E_CODEC, "corrupt bitstream (%zu bytes)",
                       src_len);
    return CF_OK;
}
#else
/* Built without libwebp: the registry reports "not built with WebP". */
typedef int cf__webp_absent;
#endif
