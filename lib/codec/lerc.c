/*
 * lerc.c - LERC, LERC_DEFLATE and LERC_ZSTD through liblerc, following
 * libtiff's tif_lerc.c so that values match GDAL bit for bit:
 *  - the outer deflate/zstd layer goes to a context scratch buffer capped
 *    like libtiff's (256 + n + n/3, or ZSTD_compressBound(n) if larger);
 *  - the blob header must agree with the tags: data type, nDim (samples,
 *    or 1 with one band per sample for float data), width, height, blob
 *    size (reliability item 19);
 *  - float pixels marked invalid in the LERC mask become NaN, as libtiff
 *    writes them; integer data asks for no mask, and any pixel LERC marks
 *    invalid reads as 0 (dst is zeroed first: liblerc leaves them alone);
 *  - 8-bit data with one LERC depth fewer than samples per pixel carries an
 *    alpha band as the LERC mask: alpha = 255 * valid.
 * libtiff swabs the decoded samples of a big-endian file like raw data
 * (its writer swabbed them before encoding), NaN fill included, so the
 * registry marks LERC as RAW; it runs no predictor for LERC.
 */
#include "codec_internal.h"

#ifdef CF_HAVE_LERC
#include <Lerc_c_api.h>
#include <libdeflate.h>
#include <zstd.h>
#include <zstd_errors.h>

int cf__lerc_type(const cf__codec_params *p) {
    int sf = p->sample_format ? p->sample_format : 1;
    switch (p->bits) {
    case 8: return sf == 2 ? 0 : sf == 1 ? 1 : -1;
    case 16: return sf == 2 ? 2 : sf == 1 ? 3 : -1;
    case 32: return sf == 2 ? 4 : sf == 1 ? 5 : sf == 3 ? 6 : -1;
    case 64: return sf == 3 ? 7 : -1;
    default: return -1;
    }
}

static cf_status outer_layer(cf__codec_ctx *ctx, const cf__codec_params *p,
                             const uint8_t *src, size_t src_len,
                             size_t dst_len, const uint8_t **blob,
                             size_t *blob_len, cf_error *err) {
    if (p->lerc_sub == 0) {
        *blob = src;
        *blob_len = src_len;
        return CF_OK;
    }
    size_t cap = 256 + dst_len + dst_len / 3;
    size_t zb = ZSTD_compressBound(dst_len);
    if (zb > cap) cap = zb;
    CF__TRY(cf__scratch_reserve(&ctx->outer, cap, err));
    if (p->lerc_sub == 1) {
        struct libdeflate_decompressor *d;
        CF__TRY(cf__ctx_deflate(ctx, &d, err));
        size_t got = 0;
        enum libdeflate_result r = libdeflate_zlib_decompress(
            d, src, src_len, ctx->outer.p, cap, &got);
        if (r == LIBDEFLATE_INSUFFICIENT_SPACE)
            return cf__err(err, CF_E_CODEC,
                           "deflate layer expands past %zu bytes", cap);
        if (r != LIBDEFLATE_SUCCESS)
            return cf__err(err, CF_E_CODEC, "corrupt deflate layer");
        *blob_len = got;
    } else if (p->lerc_sub == 2) {
        void *z;
        CF__TRY(cf__ctx_zstd(ctx, &z, err));
        size_t r = ZSTD_decompressDCtx(z, ctx->outer.p, cap, src, src_len);
        if (ZSTD_isError(r))
            return cf__err(err, CF_E_CODEC, "zstd layer: %s%s",
                           ZSTD_getErrorName(r),
                           ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall
                               ? " (expands past the cap)"
                               : "");
        *blob_len = r;
    } else {
        return cf__err(err, CF_E_UNSUPPORTED, "LERC sub-compression %u",
                       (unsigned)p->lerc_sub);
    }
    *blob = ctx->outer.p;
    return CF_OK;
}

cf_status cf__check_lerc(const cf__codec_params *p, cf_error *err) {
    if (cf__lerc_type(p) < 0)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "LERC with %u-bit samples of sample format %u",
                       (unsigned)p->bits, (unsigned)p->sample_format);
    return CF_OK;
}

cf_status cf__decode_lerc(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    CF__TRY(cf__check_lerc(p, err));
    int dt = cf__lerc_type(p);
    const uint8_t *blob = NULL;
    size_t blob_len = 0;
    CF__TRY(outer_layer(ctx, p, src, src_len, dst_len, &blob,
                        &blob_len, err));
    if (blob_len > UINT32_MAX)
        return cf__err(err, CF_E_LIMIT, "blob of %zu bytes", blob_len);

    unsigned info[9] = {0};
    if (lerc_getBlobInfo(blob, (unsigned)blob_len, info, NULL, 9, 0) != 0)
        return cf__err(err, CF_E_CODEC, "unreadable blob header (%zu bytes)",
                       blob_len);
    unsigned ndim = info[2], ncols = info[3], nrows = info[4],
             nbands = info[5], nvalid = info[6], bsize = info[7],
             nmasks = info[8];
    int is_float = p->sample_format == 3;
    unsigned spp = p->samples;
    int alpha_mask = dt == 1 && spp > 1 && ndim == spp - 1;
    if (info[1] != (unsigned)dt)
        return cf__err(err, CF_E_FORMAT,
                       "blob data type %u, tags say %d", info[1], dt);
    if (ncols != p->width || nrows != p->height)
        return cf__err(err, CF_E_FORMAT, "blob is %ux%u, tags say %ux%u",
                       ncols, nrows, (unsigned)p->width, (unsigned)p->height);
    int band_seq = is_float && spp > 1 && ndim == 1;
    if (!alpha_mask && ndim != spp && !band_seq)
        return cf__err(err, CF_E_FORMAT,
                       "blob has %u values per pixel, tags say %u", ndim, spp);
    if (band_seq ? nbands != spp : nbands != 1)
        return cf__err(err, CF_E_FORMAT, "blob has %u bands, expected %u",
                       nbands, band_seq ? spp : 1);
    if (bsize != blob_len)
        return cf__err(err, CF_E_FORMAT, "blob says %u bytes, chunk has %zu",
                       bsize, blob_len);
    if (band_seq ? (nmasks != 0 && nmasks != spp) : nmasks > 1)
        return cf__err(err, CF_E_FORMAT, "blob has %u masks", nmasks);

    size_t npix = (size_t)ncols * nrows;
    size_t vbytes = p->bits / 8;
    int want_mask = alpha_mask || (is_float && nmasks > 0);
    size_t mask_bytes = want_mask ? npix * (band_seq ? spp : 1) : 0;
    /* staging for band-sequential float data with per-band masks */
    size_t stage = band_seq ? dst_len : 0;
    CF__TRY(cf__scratch_reserve(&ctx->aux, mask_bytes + stage + 1, err));
    uint8_t *mask = want_mask ? ctx->aux.p : NULL;
    uint8_t *out = band_seq ? ctx->aux.p + mask_bytes : dst;
    /* One band: cogfeed's own decoder (lerc2.c) takes the blobs it knows,
     * liblerc the rest, with the same values either way. */
    int done = 0;
    if (!band_seq) {
        CF__TRY(cf__lerc2_decode(&ctx->lerc2, blob, blob_len, dt, (int)ndim,
                                 (int)ncols, (int)nrows, out, mask, &done, err));
    }
    if (!done) {
        if (!want_mask && nvalid != npix) memset(dst, 0, dst_len);
        lerc_status ls = lerc_decode(
            blob, (unsigned)blob_len,
            want_mask ? (int)(band_seq ? nmasks : 1) : 0, mask, (int)ndim,
            (int)ncols, (int)nrows, (int)nbands, (unsigned)dt, out);
        if (ls != 0)
            return cf__err(err, CF_E_CODEC, "lerc_decode failed (status %u)",
                           ls);
    }

    if (alpha_mask) {
        /* Spread (spp-1)-sample pixels to spp samples, back to front so it
         * works in place. */
        size_t sstride = spp - 1;
        for (size_t i = npix; i-- > 0;) {
            memmove(dst + i * spp, dst + i * sstride, sstride);
            dst[i * spp + spp - 1] = (uint8_t)(mask[i] ? 255 : 0);
        }
        return CF_OK;
    }
    if (!is_float) return CF_OK;
    const float nanf_ = __builtin_nanf("");
    const double nand_ = (double)nanf_;
    if (band_seq) {
        /* interleave bands; invalid -> NaN (all valid when nmasks == 0) */
        for (size_t i = 0; i < npix; i++)
            for (unsigned b = 0; b < spp; b++) {
                uint8_t *d = dst + (i * spp + b) * vbytes;
                if (nmasks && !mask[b * npix + i]) {
                    if (vbytes == 4) memcpy(d, &nanf_, 4);
                    else memcpy(d, &nand_, 8);
                } else {
                    memcpy(d, out + (b * npix + i) * vbytes, vbytes);
                }
            }
        return CF_OK;
    }
    if (want_mask) {
        for (size_t i = 0; i < npix; i++) {
            if (mask[i]) continue;
            for (unsigned b = 0; b < spp; b++) {
                uint8_t *d = dst + (i * spp + b) * vbytes;
                if (vbytes == 4) memcpy(d, &nanf_, 4);
                else memcpy(d, &nand_, 8);
            }
        }
    }
    return CF_OK;
}
#else
/* Built without liblerc: the registry reports "not built with LERC". */
typedef int cf__lerc_absent;
#endif
