/*
 * ojpeg.c - old-style JPEG (TIFF 6), decoded the way libtiff's tif_ojpeg.c
 * decodes it for GDAL.
 *
 * The TIFF layer (lib/tiff/tiff.c, parse_ojpeg) has already built the JPEG
 * header libtiff writes in front of the entropy-coded data -- SOI, SOF,
 * DRI, DQT, DHT, SOS made from the file's JPEGInterchangeFormat stream or
 * its table tags -- and pointed the chunk at entropy data that decodes on
 * its own (a strip that is one restart interval, or the whole stream).
 * Here the chunk becomes header + data + EOI, with the SOF's height set to
 * the chunk's rows, and goes through libjpeg with jpeg.c's session (its
 * error handling: corrupt data is an error, never gray pixels).
 *
 * libtiff reads YCbCr with raw_data_out: the components as decoded, not
 * upsampled nor converted, interleaved into TIFF's YCbCr data units
 * (OJPEGDecodeRaw), which GDAL then turns to RGB through libtiff's RGBA
 * interface.  This writes the same data units; codec.c's colour step
 * (photometric.c) does the RGBA interface's part.  Other old-style JPEG
 * GDAL does not read (the TIFF layer refuses it by name).
 */
#include "codec_internal.h"

#ifdef CF_HAVE_JPEG
#include "jpeg_internal.h"

#include <string.h>

/* The header's SOF is at byte 2 (after SOI), its height at bytes 7-8. */
#define OJ_SOF_AT 2
#define OJ_HEADER_MIN (2 + 19 + 14)

cf_status cf__check_ojpeg(const cf__codec_params *p, cf_error *err) {
    if (p->refuse)
        return cf__err(err, p->refuse_code ? (cf_status)p->refuse_code
                                           : CF_E_UNSUPPORTED,
                       "%s", p->refuse);
    const uint8_t *h = p->jpeg_tables;
    if (!h || p->jpeg_tables_len < OJ_HEADER_MIN || h[0] != 0xFF ||
        h[1] != 0xD8 || h[OJ_SOF_AT] != 0xFF ||
        (h[OJ_SOF_AT + 1] != 0xC0 && h[OJ_SOF_AT + 1] != 0xC1))
        return cf__err(err, CF_E_UNSUPPORTED,
                       "old-style JPEG without the JPEG header the TIFF "
                       "layer makes");
    if (p->color == CF_COLOR_YCBCR_RAW)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "old-style JPEG is not read raw (GDAL's GTIFF_RAW: "
                       "refuses it too: libtiff reads it only through its "
                       "RGBA interface)");
    if (p->bits != 8 || p->samples != 3 || p->color != CF_COLOR_YCBCR)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "old-style JPEG is read as 8-bit YCbCr only, as GDAL "
                       "reads it");
    return CF_OK;
}

/* Decode p->height rows as TIFF YCbCr data units (OJPEGDecodeRaw). */
static int raw_body(cf__jpeg_job *j, const cf__codec_params *p,
                    const uint8_t *src, size_t src_len, uint8_t *dst,
                    size_t dst_len) {
    j_decompress_ptr ci = &j->ci;
    unsigned sh = p->ycbcr_sub_h, sv = p->ycbcr_sub_v;
    jpeg_mem_src(ci, src, (unsigned long)src_len);
    if (jpeg_read_header(ci, TRUE) != JPEG_HEADER_OK) {
        snprintf(j->why, sizeof j->why, "no image in the stream");
        return 0;
    }
    int ok = ci->num_components == 3 && ci->image_width == p->width &&
             ci->image_height >= p->height &&
             ci->comp_info[0].h_samp_factor == (int)sh &&
             ci->comp_info[0].v_samp_factor == (int)sv;
    for (int c = 1; ok && c < 3; c++)
        ok = ci->comp_info[c].h_samp_factor == 1 &&
             ci->comp_info[c].v_samp_factor == 1;
    if (!ok) { /* the TIFF layer made the header: cannot happen */
        j->code = CF_E_FORMAT;
        snprintf(j->why, sizeof j->why, "the stream's frame does not match "
                 "the tags");
        return 0;
    }
    ci->raw_data_out = TRUE;
    ci->do_fancy_upsampling = FALSE;
    ci->mem->max_memory_to_use = (long)(dst_len * 4 + (16 << 20));
    jpeg_start_decompress(ci);
    /* libtiff's buffers (OJPEGWriteHeaderInfo): one iMCU row */
    size_t ylen = ((size_t)p->width + 8 * sh - 1) / (8 * sh) * (8 * sh);
    size_t clen = ylen / sh;
    JSAMPARRAY y = (*ci->mem->alloc_sarray)((j_common_ptr)ci, JPOOL_IMAGE,
                                            (JDIMENSION)ylen, 8 * sv);
    JSAMPARRAY cb = (*ci->mem->alloc_sarray)((j_common_ptr)ci, JPOOL_IMAGE,
                                             (JDIMENSION)clen, 8);
    JSAMPARRAY cr = (*ci->mem->alloc_sarray)((j_common_ptr)ci, JPOOL_IMAGE,
                                             (JDIMENSION)clen, 8);
    for (unsigned r = 0; r < 8 * sv; r++) memset(y[r], 0, ylen);
    for (unsigned r = 0; r < 8; r++) {
        memset(cb[r], 0, clen);
        memset(cr[r], 0, clen);
    }
    size_t across = ((size_t)p->width + sh - 1) / sh, unit = sh * sv + 2;
    size_t lines = ((size_t)p->height + sv - 1) / sv, bpl = across * unit;
    if (lines * bpl != dst_len) {
        j->code = CF_E_ARG;
        snprintf(j->why, sizeof j->why, "output of %zu bytes, expected %zu",
                 dst_len, lines * bpl);
        return 0;
    }
    JSAMPARRAY planes[3] = {y, cb, cr};
    unsigned state = 0; /* chroma row within the iMCU row */
    for (size_t l = 0; l < lines; l++) {
        if (state == 0 && jpeg_read_raw_data(ci, planes, 8 * sv) == 0) {
            snprintf(j->why, sizeof j->why, "stream ends at row %zu", l * sv);
            return 0;
        }
        uint8_t *o = dst + l * bpl;
        const uint8_t *b = cb[state], *r = cr[state];
        for (size_t q = 0; q < across; q++) {
            for (unsigned sy = 0; sy < sv; sy++) {
                const uint8_t *yy = y[state * sv + sy] + q * sh;
                for (unsigned sx = 0; sx < sh; sx++) *o++ = yy[sx];
            }
            *o++ = b[q];
            *o++ = r[q];
        }
        if (++state == 8) state = 0;
    }
    return 1;
}

cf_status cf__decode_ojpeg(cf__codec_ctx *ctx, const cf__codec_params *p,
                           const uint8_t *src, size_t src_len, uint8_t *dst,
                           size_t dst_len, cf_error *err) {
    CF__TRY(cf__check_ojpeg(p, err));
    if (src_len == 0) return cf__err(err, CF_E_CODEC, "empty strip");
    if (p->height > 0xffff || p->width > 0xffff)
        return cf__err(err, CF_E_FORMAT, "chunk of %ux%u, larger than JPEG "
                       "allows", (unsigned)p->width, (unsigned)p->height);
    size_t hl = p->jpeg_tables_len, n;
    if (src_len > SIZE_MAX - hl - 2)
        return cf__err(err, CF_E_LIMIT, "stream of %zu bytes", src_len);
    n = hl + src_len + 2;
    CF__TRY(cf__scratch_reserve(&ctx->ojpeg, n, err));
    uint8_t *s = ctx->ojpeg.p;
    memcpy(s, p->jpeg_tables, hl);
    s[OJ_SOF_AT + 5] = (uint8_t)(p->height >> 8);
    s[OJ_SOF_AT + 6] = (uint8_t)p->height;
    memcpy(s + hl, src, src_len);
    s[hl + src_len] = 0xFF;
    s[hl + src_len + 1] = 0xD9;
    return cf__jpeg_session(raw_body, p, s, n, dst, dst_len, err);
}
#else
typedef int cf__ojpeg_absent;
#endif
