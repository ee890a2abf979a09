/*
 * jpeg.c - JPEG (TIFF 7) through libjpeg(-turbo), set up as libtiff's
 * tif_jpeg.c does so that values match GDAL: JPEGTables (an abbreviated
 * table-only stream) are read first, then the chunk's stream; YCbCr data is
 * converted to RGB by libjpeg (GDAL's default); anything else is read with
 * colour conversion off.  Only 8-bit samples.
 *
 * libjpeg reports fatal errors through error_exit, which must not return:
 * ours longjmps back here with the message captured, so nothing calls
 * exit().  Corrupt-data warnings (premature end, bad Huffman code, ...) are
 * errors here too: libtiff only warns and hands out gray-filled pixels,
 * which would be a silent partial success.
 */
#include "codec_internal.h"

#ifdef CF_HAVE_JPEG
#include <stdlib.h>

#include "jpeg_internal.h"

#include <jerror.h>

/* Progressive streams rescan the coefficient buffer on every scan; a crafted
 * stream with thousands of tiny scans burns CPU (libjpeg-turbo's own
 * advice is to cap them). */
#define CF_JPEG_MAX_SCANS 500

/* For messages: the library's version as its headers give it. */
#if defined(LIBJPEG_TURBO_VERSION)
#define CF_JPEG_STR_(x) #x
#define CF_JPEG_STR(x) CF_JPEG_STR_(x)
#define CF_JPEG_LIB_VERSION CF_JPEG_STR(LIBJPEG_TURBO_VERSION)
#else
#define CF_JPEG_LIB_VERSION "(unknown version)"
#endif


void cf__jpeg_error_exit(j_common_ptr ci) {
    cf__jpeg_err *e = (cf__jpeg_err *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}

static void on_emit(j_common_ptr ci, int level) {
    cf__jpeg_err *e = (cf__jpeg_err *)ci->err;
    if (level >= 0) return; /* trace messages */
    switch (ci->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_MUST_RESYNC:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_EXTRANEOUS_DATA:
        if (!e->corrupt) (*ci->err->format_message)(ci, e->msg);
        e->corrupt = 1;
        break;
    default: break;
    }
}

static void on_progress(j_common_ptr ci) {
    if (!ci->is_decompressor) return;
    j_decompress_ptr d = (j_decompress_ptr)ci;
    if (d->input_scan_number > CF_JPEG_MAX_SCANS) {
        cf__jpeg_err *e = (cf__jpeg_err *)ci->err;
        snprintf(e->msg, sizeof e->msg, "more than %d progressive scans",
                 CF_JPEG_MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

/* The new-style JPEG decode, a session body. */
static int run(cf__jpeg_job *j, const cf__codec_params *p, const uint8_t *src,
               size_t src_len, uint8_t *dst, size_t dst_len) {
    j_decompress_ptr ci = &j->ci;
    if (p->jpeg_tables && p->jpeg_tables_len) {
        jpeg_mem_src(ci, p->jpeg_tables, (unsigned long)p->jpeg_tables_len);
        if (jpeg_read_header(ci, FALSE) != JPEG_HEADER_TABLES_ONLY) {
            snprintf(j->why, sizeof j->why,
                     "JPEGTables is not a tables-only stream");
            return 0;
        }
    }
    jpeg_mem_src(ci, src, (unsigned long)src_len);
    if (jpeg_read_header(ci, TRUE) != JPEG_HEADER_OK) {
        snprintf(j->why, sizeof j->why, "no image in the stream");
        return 0;
    }
    /* the scan cap only concerns multi-scan streams */
    if (jpeg_has_multiple_scans(ci)) ci->progress = &j->progress;
    if (ci->data_precision != 8) {
        j->code = CF_E_UNSUPPORTED;
        snprintf(j->why, sizeof j->why, "%d-bit JPEG", ci->data_precision);
        return 0;
    }
    if ((unsigned)ci->num_components != p->samples) {
        j->code = CF_E_FORMAT;
        snprintf(j->why, sizeof j->why,
                 "stream has %d components, tags say %u samples",
                 ci->num_components, (unsigned)p->samples);
        return 0;
    }
    if (ci->image_width != p->width || ci->image_height < p->height) {
        /* a taller stream is accepted like libtiff does for a last strip
         * written at full height; only the chunk's rows are read */
        j->code = CF_E_FORMAT;
        snprintf(j->why, sizeof j->why, "stream is %ux%u, chunk is %ux%u",
                 (unsigned)ci->image_width, (unsigned)ci->image_height,
                 (unsigned)p->width, (unsigned)p->height);
        return 0;
    }
    int ycbcr = p->photometric == 6 && p->samples == 3;
    for (int c = 0; c < ci->num_components; c++) {
        int h = ci->comp_info[c].h_samp_factor,
            v = ci->comp_info[c].v_samp_factor;
        int wh = 1, wv = 1;
        if (ycbcr && c == 0) {
            wh = p->ycbcr_sub_h ? p->ycbcr_sub_h : h;
            wv = p->ycbcr_sub_v ? p->ycbcr_sub_v : v;
        }
        if (h != wh || v != wv) {
            j->code = CF_E_FORMAT;
            snprintf(j->why, sizeof j->why,
                     "component %d sampled %dx%d, tags say %dx%d", c, h, v, wh,
                     wv);
            return 0;
        }
    }
    if (ycbcr) {
        ci->jpeg_color_space = JCS_YCbCr;
        ci->out_color_space = JCS_RGB;
    } else {
        ci->jpeg_color_space = JCS_UNKNOWN;
        ci->out_color_space = JCS_UNKNOWN;
    }
    /* bounded by the tile size checked above; the coefficient buffer of a
     * progressive stream is about 2 bytes per sample */
    ci->mem->max_memory_to_use = (long)(dst_len * 4 + (16 << 20));
    jpeg_start_decompress(ci);
    if (ci->output_width != p->width ||
        (unsigned)ci->output_components != p->samples) {
        j->code = CF_E_FORMAT;
        snprintf(j->why, sizeof j->why, "decoder output %ux%d, expected %ux%u",
                 (unsigned)ci->output_width, ci->output_components,
                 (unsigned)p->width, (unsigned)p->samples);
        return 0;
    }
    size_t pitch = (size_t)p->width * p->samples;
    while (ci->output_scanline < p->height) {
        JSAMPROW rows[CF_JPEG_ROWS];
        unsigned n = 0, y0 = ci->output_scanline;
        while (n < CF_JPEG_ROWS && y0 + n < p->height) {
            rows[n] = dst + (size_t)(y0 + n) * pitch;
            n++;
        }
        if (jpeg_read_scanlines(ci, rows, n) == 0) {
            snprintf(j->why, sizeof j->why, "stream ends at row %u",
                     (unsigned)ci->output_scanline);
            return 0;
        }
    }
    (void)dst_len;
    return 1;
}

cf_status cf__check_jpeg(const cf__codec_params *p, cf_error *err) {
    if (p->bits == 12)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "12-bit JPEG is not supported: this build's JPEG "
                       "library (libjpeg-turbo %s) decodes 8-bit JPEG only",
                       CF_JPEG_LIB_VERSION);
    if (p->bits != 8 || p->sample_format == 3)
        return cf__err(err, CF_E_UNSUPPORTED, "JPEG with %u-bit %s samples",
                       (unsigned)p->bits,
                       p->sample_format == 3 ? "floating-point" : "integer");
    return CF_OK;
}

cf_status cf__jpeg_session(cf__jpeg_body body, const cf__codec_params *p,
                           const uint8_t *src, size_t src_len, uint8_t *dst,
                           size_t dst_len, cf_error *err) {
    if (src_len > 0xffffffffu || p->jpeg_tables_len > 0xffffffffu)
        return cf__err(err, CF_E_LIMIT, "stream of %zu bytes", src_len);
    cf__jpeg_job *j = cf__calloc(1, sizeof *j);
    if (!j) return cf__err(err, CF_E_NOMEM, "JPEG decoder state");
    j->code = CF_E_CODEC;
    j->ci.err = jpeg_std_error(&j->jerr.pub);
    j->jerr.pub.error_exit = cf__jpeg_error_exit;
    j->jerr.pub.emit_message = on_emit;
    j->progress.progress_monitor = on_progress;
    if (setjmp(j->jerr.jb) == 0) {
        jpeg_create_decompress(&j->ci);
        j->created = 1;
        j->ok = body(j, p, src, src_len, dst, dst_len);
        if (j->ok && j->jerr.corrupt) {
            snprintf(j->why, sizeof j->why, "%s", j->jerr.msg);
            j->ok = 0;
        }
    } else {
        /* 12-bit streams are valid JPEG this build cannot decode */
        j->code = j->jerr.pub.msg_code == JERR_BAD_PRECISION ? CF_E_UNSUPPORTED
                                                             : CF_E_CODEC;
        snprintf(j->why, sizeof j->why, "%s", j->jerr.msg);
    }
    /* jpeg_destroy cannot fail; it frees whatever create/start allocated,
     * also after a longjmp out of the middle of decoding. */
    if (j->created) jpeg_destroy_decompress(&j->ci);
    cf_status st = j->ok ? CF_OK : cf__err(err, j->code, "%s", j->why);
    free(j);
    return st;
}

cf_status cf__decode_jpeg(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    (void)ctx;
    CF__TRY(cf__check_jpeg(p, err));
    if (p->jpeg_tables && p->jpeg_tables_len && p->jpeg_tables_len < 4)
        return cf__err(err, CF_E_CODEC, "JPEGTables of %zu bytes",
                       p->jpeg_tables_len);
    if (src_len < 4)
        return cf__err(err, CF_E_CODEC, "stream of %zu bytes", src_len);
    return cf__jpeg_session(run, p, src, src_len, dst, dst_len, err);
}
#else
/* Built without libjpeg: the registry reports "not built with JPEG". */
typedef int cf__jpeg_absent;
#endif
