/*
 * lerc_enc.c - LERC, LERC_DEFLATE and LERC_ZSTD chunks written as
 * libtiff's tif_lerc.c writes them for GDAL, so that GDAL and lerc.c read
 * them back:
 *  - one Lerc2 blob of codec version 4 (LercParameters[0], the only
 *    version libtiff accepts to write), the chunk's samples as nDepth
 *    values per pixel, max_error as maxZError (0: lossless; liblerc takes
 *    integers at 0.5, i.e. exactly);
 *  - float NaNs go into the blob's mask (libtiff does so for one sample
 *    per pixel; the decoders put NaN back).  With several samples a pixel
 *    whose samples are all NaN is one masked pixel; when NaNs differ
 *    between a pixel's samples the samples go band-sequential, one band
 *    and mask each (the layout lerc.c and libtiff read as "nDim 1,
 *    nBands = samples"), since Lerc2 version 4 has no per-value mask;
 *  - then the optional layer: zlib-wrapped DEFLATE (libdeflate) or ZSTD at
 *    the writer's level (GDAL's ZLEVEL / ZSTD_LEVEL, defaults 6 and 9).
 * Samples go in native order: a little-endian host writes the "II" files
 * the writer makes; a big-endian host would need libtiff's swab first,
 * which is not done, so it is refused.
 */
#include "codec_internal.h"

#ifdef CF_HAVE_LERC
#include <Lerc_c_api.h>
#include <math.h>

/* libtiff's LERC_VERSION_2_4 */
#define CF__LERC_VERSION 4

static int is_nan(const uint8_t *v, unsigned bytes) {
    if (bytes == 4) {
        float f;
        memcpy(&f, v, 4);
        return isnan(f);
    }
    double d;
    memcpy(&d, v, 8);
    return isnan(d);
}

/* The mask of a float chunk: *masks 0 (no NaN), 1 (a pixel's samples all
 * NaN or none: mask[i] per pixel) or spp (NaNs differ within pixels:
 * mask[b * npix + i] per band). */
static cf_status nan_mask(cf__encoder *e, const cf__codec_params *p, const uint8_t *src,
                          int *masks, cf_error *err) {
    const size_t npix = (size_t)p->width * p->height;
    const unsigned spp = p->samples, bytes = p->bits / 8;
    *masks = 0;
    int any = 0, mixed = 0;
    for (size_t i = 0; i < npix && !mixed; i++) {
        unsigned n = 0;
        for (unsigned b = 0; b < spp; b++) n += (unsigned)is_nan(src + (i * spp + b) * bytes, bytes);
        any |= n > 0;
        mixed |= n > 0 && n < spp;
    }
    if (!any) return CF_OK;
    /* npix * spp cannot overflow: the chunk's bytes are at least that */
    CF__TRY(cf__scratch_reserve(&e->mask, npix * (mixed ? spp : 1), err));
    if (!mixed) {
        for (size_t i = 0; i < npix; i++) e->mask.p[i] = !is_nan(src + i * spp * bytes, bytes);
        *masks = 1;
        return CF_OK;
    }
    for (unsigned b = 0; b < spp; b++)
        for (size_t i = 0; i < npix; i++)
            e->mask.p[b * npix + i] = !is_nan(src + (i * spp + b) * bytes, bytes);
    *masks = (int)spp;
    return CF_OK;
}

cf_status cf__encode_lerc(cf__encoder *e, const cf__codec_params *p,
                          const cf__encode_opts *o, const uint8_t *src, size_t len,
                          const uint8_t **out, size_t *out_len, cf_error *err) {
    CF__TRY(cf__check_lerc(p, err));
    int dt = cf__lerc_type(p);
    if (!cf__host_is_le() && p->bits > 8)
        return cf__err(err, CF_E_UNSUPPORTED, "writing LERC on a big-endian host");
    if (p->lerc_sub > 2)
        return cf__err(err, CF_E_ARG, "LERC layer %u", (unsigned)p->lerc_sub);
    if (len > INT32_MAX || p->width > INT32_MAX || p->height > INT32_MAX ||
        p->samples > INT32_MAX)
        return cf__err(err, CF_E_LIMIT, "LERC chunk of %zu bytes", len);
    int masks = 0;
    if (p->sample_format == 3) CF__TRY(nan_mask(e, p, src, &masks, err));
    int depth = (int)p->samples, bands = 1;
    const uint8_t *data = src;
    if (masks > 1) {
        /* band-sequential: each sample its own band */
        const size_t npix = (size_t)p->width * p->height;
        const unsigned spp = p->samples, bytes = p->bits / 8;
        CF__TRY(cf__scratch_reserve(&e->work, len, err));
        for (unsigned b = 0; b < spp; b++)
            for (size_t i = 0; i < npix; i++)
                memcpy(e->work.p + (b * npix + i) * bytes, src + (i * spp + b) * bytes, bytes);
        data = e->work.p;
        depth = 1;
        bands = (int)spp;
    }
    /* A blob is at most the raw values plus its headers, masks and a byte
     * per 8x8 block; when liblerc still finds the buffer short, it says
     * how much it needs. */
    const size_t npix = (size_t)p->width * p->height;
    size_t cap = len + len / 8 + npix * (size_t)(masks ? masks : 1) / 4 + 4096;
    if (cap > UINT32_MAX) cap = UINT32_MAX;
    uint8_t *blob_buf = NULL;
    cf__scratch *dst = p->lerc_sub ? &e->blob : &e->out;
    CF__TRY(cf__scratch_reserve(dst, cap, err));
    unsigned nb = 0;
    lerc_status ls = lerc_encodeForVersion(data, CF__LERC_VERSION, (unsigned)dt, depth,
                                           (int)p->width, (int)p->height, bands, masks,
                                           masks ? e->mask.p : NULL, o->max_error, dst->p,
                                           (unsigned)cap, &nb);
    if (ls != 0) {
        unsigned need = 0;
        if (lerc_computeCompressedSizeForVersion(data, CF__LERC_VERSION, (unsigned)dt, depth,
                                                 (int)p->width, (int)p->height, bands, masks,
                                                 masks ? e->mask.p : NULL, o->max_error,
                                                 &need) != 0 ||
            need <= cap)
            return cf__err(err, CF_E_CODEC, "lerc_encode of %ux%u x %u failed (status %u)",
                           p->width, p->height, p->samples, ls);
        CF__TRY(cf__scratch_reserve(dst, need, err));
        ls = lerc_encodeForVersion(data, CF__LERC_VERSION, (unsigned)dt, depth, (int)p->width,
                                   (int)p->height, bands, masks, masks ? e->mask.p : NULL,
                                   o->max_error, dst->p, need, &nb);
        if (ls != 0)
            return cf__err(err, CF_E_CODEC, "lerc_encode of %ux%u x %u failed (status %u)",
                           p->width, p->height, p->samples, ls);
    }
    blob_buf = dst->p;
    if (p->lerc_sub == 0) {
        *out = blob_buf;
        *out_len = nb;
        return CF_OK;
    }
    cf_status st = cf__enc_compress(e, p->lerc_sub == 2, o->level, blob_buf, nb, out, out_len, err);
    if (st) return cf__err_prefix(err, st, "LERC's layer");
    return CF_OK;
}
#else
/* Built without liblerc: cf__codec_can_encode says no. */
typedef int cf__lerc_enc_absent;
#endif
