/*
 * jpeg_enc.c - JPEG chunks (TIFF 7) through libjpeg(-turbo), set up as
 * libtiff's tif_jpeg.c sets up its compressor for GDAL:
 *  - 8-bit samples; one (grayscale) or three; with PhotometricInterpretation
 *    YCbCr (6, GDAL's default for 3 bands) libjpeg converts RGB to YCbCr
 *    and subsamples the chroma by the YCbCrSubSampling the tags give
 *    (JPEGCOLORMODE_RGB); otherwise the samples are stored as they are;
 *  - jpeg_set_quality(quality, FALSE), GDAL's JPEG_QUALITY (default 75);
 *  - no JFIF or Adobe marker (libtiff writes neither: the TIFF tags say
 *    what the samples are), the default integer DCT, and optimised Huffman
 *    tables, which libtiff asks for when the Huffman tables are not shared
 *    in JPEGTables (GDAL's JPEGTABLESMODE=1).
 * Each chunk is a whole stream with its own quantisation and Huffman
 * tables, so no JPEGTables tag is needed (libtiff and jpeg.c read the
 * tables from the chunk when there is none); that costs ~140 bytes a tile.
 *
 * libjpeg's fatal errors longjmp back here (jpeg_internal.h's handler
 * shape), so nothing calls exit().
 */
#include "codec_internal.h"

#ifdef CF_HAVE_JPEG
#include <stdlib.h>

#include "jpeg_internal.h"

static void on_emit(j_common_ptr ci, int level) {
    (void)ci;
    (void)level; /* the compressor's warnings concern nothing we feed it */
}

/* State the setjmp'ed region modifies, reached through a pointer so that
 * nothing needs to be volatile. */
typedef struct enc_job {
    struct jpeg_compress_struct ci;
    cf__jpeg_err jerr;
    unsigned char *buf; /* libjpeg's memory destination */
    unsigned long size;
    int created;
} enc_job;

static void run(enc_job *j, const cf__codec_params *p, int quality, const uint8_t *src) {
    struct jpeg_compress_struct *ci = &j->ci;
    jpeg_create_compress(ci);
    j->created = 1;
    jpeg_mem_dest(ci, &j->buf, &j->size);
    ci->image_width = p->width;
    ci->image_height = p->height;
    ci->input_components = (int)p->samples;
    ci->in_color_space = p->samples == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(ci);
    if (p->samples == 3 && p->photometric == 6) {
        jpeg_set_colorspace(ci, JCS_YCbCr);
        ci->comp_info[0].h_samp_factor = p->ycbcr_sub_h;
        ci->comp_info[0].v_samp_factor = p->ycbcr_sub_v;
        for (int c = 1; c < 3; c++) ci->comp_info[c].h_samp_factor = ci->comp_info[c].v_samp_factor = 1;
    } else {
        jpeg_set_colorspace(ci, p->samples == 1 ? JCS_GRAYSCALE : JCS_RGB);
    }
    ci->write_JFIF_header = FALSE;
    ci->write_Adobe_marker = FALSE;
    jpeg_set_quality(ci, quality, FALSE);
    ci->optimize_coding = TRUE;
    jpeg_start_compress(ci, TRUE);
    const size_t pitch = (size_t)p->width * p->samples;
    while (ci->next_scanline < ci->image_height) {
        JSAMPROW rows[CF_JPEG_ROWS];
        unsigned n = 0;
        while (n < CF_JPEG_ROWS && ci->next_scanline + n < ci->image_height) {
            rows[n] = (JSAMPROW)(uintptr_t)(src + (size_t)(ci->next_scanline + n) * pitch);
            n++;
        }
        jpeg_write_scanlines(ci, rows, n);
    }
    jpeg_finish_compress(ci);
}

cf_status cf__encode_jpeg(cf__encoder *e, const cf__codec_params *p,
                          const cf__encode_opts *o, const uint8_t *src, size_t len,
                          const uint8_t **out, size_t *out_len, cf_error *err) {
    (void)len;
    if (p->bits != 8 || p->sample_format == 3 || (p->samples != 1 && p->samples != 3))
        return cf__err(err, CF_E_UNSUPPORTED,
                       "JPEG of %u samples of %u bits (it takes 1 or 3 of 8)",
                       (unsigned)p->samples, (unsigned)p->bits);
    int ycbcr = p->samples == 3 && p->photometric == 6;
    if (ycbcr && ((p->ycbcr_sub_h != 1 && p->ycbcr_sub_h != 2 && p->ycbcr_sub_h != 4) ||
                  (p->ycbcr_sub_v != 1 && p->ycbcr_sub_v != 2 && p->ycbcr_sub_v != 4)))
        return cf__err(err, CF_E_ARG, "JPEG YCbCr subsampling %ux%u (1, 2 or 4 each)",
                       (unsigned)p->ycbcr_sub_h, (unsigned)p->ycbcr_sub_v);
    if (p->width > JPEG_MAX_DIMENSION || p->height > JPEG_MAX_DIMENSION)
        return cf__err(err, CF_E_LIMIT, "JPEG chunk of %ux%u", p->width, p->height);
    int quality = o->quality ? o->quality : 75; /* GDAL's JPEG_QUALITY */
    enc_job *j = cf__calloc(1, sizeof *j);
    if (!j) return cf__err(err, CF_E_NOMEM, "JPEG encoder state");
    /* libjpeg writes into our buffer and, should a chunk not fit, into
     * one it mallocs (ours stays ours): a generous start makes that rare */
    size_t cap = (size_t)p->width * p->height * p->samples + 65536;
    cf_status st = cf__scratch_reserve(&e->out, cap, err);
    if (st) {
        free(j);
        return st;
    }
    j->buf = e->out.p;
    j->size = (unsigned long)e->out.cap;
    j->ci.err = jpeg_std_error(&j->jerr.pub);
    j->jerr.pub.error_exit = cf__jpeg_error_exit;
    j->jerr.pub.emit_message = on_emit;
    int ok = 0;
    if (setjmp(j->jerr.jb) == 0) {
        run(j, p, quality, src);
        ok = 1;
    }
    if (j->created) jpeg_destroy_compress(&j->ci);
    if (!ok) {
        if (j->buf != e->out.p) free(j->buf);
        st = cf__err(err, CF_E_CODEC, "JPEG encoder: %s", j->jerr.msg);
    } else if (j->buf != e->out.p) {
        /* libjpeg outgrew our buffer: keep its larger one instead */
        free(e->out.p);
        e->out.p = j->buf;
        e->out.cap = j->size;
    }
    if (!st) {
        *out = e->out.p;
        *out_len = j->size;
    }
    free(j);
    return st;
}
#else
/* Built without libjpeg: cf__codec_can_encode says no. */
typedef int cf__jpeg_enc_absent;
#endif
