/*
 * lzma.c - LZMA (TIFF 34925, GDAL's COMPRESS=LZMA) through liblzma, as
 * libtiff's tif_lzma.c reads it: each chunk is one .xz stream, decoded
 * until the chunk is full; bytes after the stream's end are ignored, and
 * a stream that ends before the chunk is full is corrupt data.
 *
 * The stream's header says how much memory its dictionary needs (up to
 * 1.5 GiB): a crafted chunk must not make a decoder thread allocate that,
 * so decoding stops with CF_E_LIMIT above CF_LZMA_MEMLIMIT (GDAL's
 * heaviest preset, 9, needs 65 MiB).  The lzma_stream lives in the codec
 * context and is reused, chunk after chunk.
 */
#include "codec_internal.h"

#ifdef CF_HAVE_LZMA
#include <lzma.h>
#include <stdlib.h>

#define CF_LZMA_MEMLIMIT ((uint64_t)128 << 20)

void cf__lzma_free(void *stream) {
    if (!stream) return;
    lzma_end(stream);
    free(stream);
}

cf_status cf__decode_lzma(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    (void)p;
    if (!ctx->lzma) {
        lzma_stream *z = cf__calloc(1, sizeof *z);
        if (!z) return cf__err(err, CF_E_NOMEM, "LZMA decoder state");
        lzma_stream init = LZMA_STREAM_INIT;
        *z = init;
        ctx->lzma = z;
    }
    lzma_stream *z = ctx->lzma;
    lzma_ret r = lzma_stream_decoder(z, CF_LZMA_MEMLIMIT, 0);
    if (r != LZMA_OK)
        return cf__err(err, r == LZMA_MEM_ERROR ? CF_E_NOMEM : CF_E_CODEC,
                       "cannot start the decoder (liblzma error %d)", (int)r);
    z->next_in = src;
    z->avail_in = src_len;
    z->next_out = dst;
    z->avail_out = dst_len;
    while (z->avail_out > 0) {
        r = lzma_code(z, LZMA_RUN);
        if (r == LZMA_STREAM_END) break;
        if (r == LZMA_OK) {
            if (z->avail_in == 0) break; /* input used up */
            continue;
        }
        size_t done = dst_len - z->avail_out;
        switch (r) {
        case LZMA_MEMLIMIT_ERROR:
            return cf__err(err, CF_E_LIMIT,
                           "stream needs %llu MiB of decoder memory (limit "
                           "%llu MiB)",
                           (unsigned long long)(lzma_memusage(z) >> 20),
                           (unsigned long long)(CF_LZMA_MEMLIMIT >> 20));
        case LZMA_MEM_ERROR:
            return cf__err(err, CF_E_NOMEM, "out of memory");
        case LZMA_FORMAT_ERROR:
            return cf__err(err, CF_E_CODEC, "not an .xz stream");
        case LZMA_OPTIONS_ERROR:
            return cf__err(err, CF_E_CODEC, "unsupported .xz options");
        case LZMA_BUF_ERROR:
            return cf__err(err, CF_E_CODEC,
                           "stream ends after %zu of %zu decoded bytes", done,
                           dst_len);
        default:
            return cf__err(err, CF_E_CODEC,
                           "corrupt data after %zu of %zu decoded bytes "
                           "(liblzma error %d)",
                           done, dst_len, (int)r);
        }
    }
    if (z->avail_out)
        return cf__err(err, CF_E_CODEC,
                       "stream ends after %zu of %zu decoded bytes",
                       dst_len - z->avail_out, dst_len);
    return CF_OK;
}
#else
void cf__lzma_free(void *stream) { (void)stream; }
#endif
