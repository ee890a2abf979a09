/*
 * webp_enc.c - WebP chunks (TIFF 50001) through libwebp, set up as
 * libtiff's tif_webp.c sets up its encoder for GDAL:
 *  - 8-bit RGB (3 samples) or RGBA (4), imported as they are;
 *  - lossy: WEBP_PRESET_DEFAULT at the quality (GDAL's WEBP_LEVEL /
 *    QUALITY, default 75);
 *  - lossless (GDAL's WEBP_LOSSLESS, or the COG driver's QUALITY=100):
 *    libtiff then sets the quality, which lossless WebP takes as effort,
 *    to 100, encodes ARGB and keeps the exact colour of fully transparent
 *    pixels (its WEBP_LOSSLESS_EXACT default), so the samples come back
 *    bit for bit.
 * Lossy WebP with 4 samples treats the fourth as alpha: libwebp may change
 * the colour of pixels whose fourth sample is 0, as it does in GDAL.
 */
#include "codec_internal.h"

#ifdef CF_HAVE_WEBP
#include <stdlib.h>
#include <webp/encode.h>

/* The encoded stream, appended into the encoder's output buffer. */
typedef struct sink {
    cf__scratch *s;
    size_t n;
    int nomem;
} sink;

static int write_fn(const uint8_t *data, size_t size, const WebPPicture *pic) {
    sink *k = pic->custom_ptr;
    if (size > SIZE_MAX - k->n) return k->nomem = 1, 0;
    if (k->n + size > k->s->cap) {
        size_t want = (k->n + size) * 2;
        uint8_t *q = cf__realloc(k->s->p, want);
        if (!q) return k->nomem = 1, 0;
        k->s->p = q;
        k->s->cap = want;
    }
    memcpy(k->s->p + k->n, data, size);
    k->n += size;
    return 1;
}

cf_status cf__encode_webp(cf__encoder *e, const cf__codec_params *p,
                          const cf__encode_opts *o, const uint8_t *src, size_t len,
                          const uint8_t **out, size_t *out_len, cf_error *err) {
    (void)len;
    if (p->bits != 8 || p->sample_format == 3 || (p->samples != 3 && p->samples != 4))
        return cf__err(err, CF_E_UNSUPPORTED,
                       "WebP of %u samples of %u bits (it takes 3 or 4 of 8)",
                       (unsigned)p->samples, (unsigned)p->bits);
    if (p->width > WEBP_MAX_DIMENSION || p->height > WEBP_MAX_DIMENSION)
        return cf__err(err, CF_E_LIMIT, "WebP chunk of %ux%u (at most %d)", p->width,
                       p->height, WEBP_MAX_DIMENSION);
    int quality = o->quality ? o->quality : 75;
    int lossless = o->lossless != 0;
    WebPConfig cfg;
    if (!WebPConfigPreset(&cfg, WEBP_PRESET_DEFAULT, (float)(lossless ? 100 : quality)))
        return cf__err(err, CF_E_UNSUPPORTED, "libwebp: encoder version mismatch");
    cfg.lossless = lossless;
    if (lossless) cfg.exact = 1;
    if (!WebPValidateConfig(&cfg))
        return cf__err(err, CF_E_ARG, "libwebp refuses quality %d", quality);
    WebPPicture pic;
    if (!WebPPictureInit(&pic))
        return cf__err(err, CF_E_UNSUPPORTED, "libwebp: encoder version mismatch");
    pic.width = (int)p->width;
    pic.height = (int)p->height;
    pic.use_argb = lossless;
    sink k = {&e->out, 0, 0};
    pic.writer = write_fn;
    pic.custom_ptr = &k;
    int stride = (int)(p->width * p->samples);
    int ok = p->samples == 4 ? WebPPictureImportRGBA(&pic, src, stride)
                             : WebPPictureImportRGB(&pic, src, stride);
    if (!ok) {
        WebPPictureFree(&pic);
        return cf__err(err, CF_E_NOMEM, "WebP picture of %ux%u", p->width, p->height);
    }
    ok = WebPEncode(&cfg, &pic);
    int code = pic.error_code;
    WebPPictureFree(&pic);
    if (!ok || k.nomem)
        return cf__err(err, k.nomem || code == VP8_ENC_ERROR_OUT_OF_MEMORY ? CF_E_NOMEM
                                                                           : CF_E_CODEC,
                       "WebP encoder failed (libwebp error %d)", code);
    *out = e->out.p;
    *out_len = k.n;
    return CF_OK;
}
#else
/* Built without libwebp: cf__codec_can_encode says no. */
typedef int cf__webp_enc_absent;
#endif
