/*
 * jpeg_internal.h - one libjpeg decompression session with cogfeed's error
 * handling (jpeg.c), shared by the JPEG (7) and old-style JPEG (6)
 * decoders.  Private to lib/codec; only built with libjpeg.
 */
#ifndef CF_JPEG_INTERNAL_H
#define CF_JPEG_INTERNAL_H

#include "codec_internal.h"

#include <setjmp.h>
#include <stdio.h>

#include <jpeglib.h>

/* Rows handed to jpeg_read_scanlines at a time. */
#define CF_JPEG_ROWS 16

typedef struct cf__jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int corrupt; /* a data-corruption warning was seen */
} cf__jpeg_err;

/* libjpeg's error_exit for a cf__jpeg_err: the message kept, then
 * longjmp to its jmp_buf (the decoders' and the encoder's). */
void cf__jpeg_error_exit(j_common_ptr ci);

/* State the setjmp'ed region modifies lives in this struct, reached through
 * a pointer, so nothing needs `volatile`. */
typedef struct cf__jpeg_job {
    struct jpeg_decompress_struct ci;
    cf__jpeg_err jerr;
    struct jpeg_progress_mgr progress; /* set ci.progress to it to cap the
                                          scans of a multi-scan stream */
    cf_status code; /* of a failure the body reports (CF_E_CODEC default) */
    int created, ok;
    char why[JMSG_LENGTH_MAX + 40];
} cf__jpeg_job;

/* Decodes with the created decompressor j->ci: 1 on success, else 0 with
 * j->why (and j->code) set.  libjpeg's fatal errors longjmp out of it. */
typedef int (*cf__jpeg_body)(cf__jpeg_job *j, const cf__codec_params *p,
                             const uint8_t *src, size_t src_len, uint8_t *dst,
                             size_t dst_len);

/* Run `body` in a session: libjpeg's fatal errors and corrupt-data
 * warnings (premature end, bad Huffman code, ...) become errors with
 * libjpeg's message, never exit() or gray-filled pixels. */
cf_status cf__jpeg_session(cf__jpeg_body body, const cf__codec_params *p,
                           const uint8_t *src, size_t src_len, uint8_t *dst,
                           size_t dst_len, cf_error *err);

#endif
