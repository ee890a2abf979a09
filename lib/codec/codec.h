/*
 * codec.h - decode one compressed TIFF chunk (tile or strip) to raw samples.
 *
 * Knows nothing of files or I/O: it gets the compressed bytes and the tag
 * values that describe them, and writes exactly the expected number of
 * bytes.  Output is capped at that size (decompression bombs stop there),
 * byte-swapped to native order and with the predictor undone.  On failure
 * the output is zeroed so no stale heap bytes can leak into a batch.
 */
#ifndef CF_CODEC_H
#define CF_CODEC_H

#include "../common/common.h"

typedef struct cf_codec_params {
    uint16_t compression;   /* TIFF code, see tiff.h CF_COMP_* */
    uint16_t lerc_sub;      /* LERC: 0 none, 1 deflate, 2 zstd */
    uint16_t predictor;     /* 1, 2, 3 */
    uint16_t bits;          /* bits per sample: 1, 8, 16, 32, 64 */
    uint16_t sample_format; /* 1 uint, 2 int, 3 float */
    uint16_t photometric;   /* for JPEG: 6 = YCbCr -> decoded to RGB */
    uint32_t width;         /* full chunk width (tile width, unclipped) */
    uint32_t height;        /* rows in this chunk */
    uint32_t samples;       /* samples per pixel in this chunk */
    int big_endian;         /* file byte order */
    const uint8_t *jpeg_tables;
    size_t jpeg_tables_len;
    uint16_t ycbcr_sub_h, ycbcr_sub_v;
} cf_codec_params;

/* Per-thread decoder state and scratch buffers.  Not thread-safe: give each
 * decoding thread its own. */
typedef struct cf_codec_ctx cf_codec_ctx;
cf_codec_ctx *cf_codec_ctx_new(void);
void cf_codec_ctx_free(cf_codec_ctx *ctx);
/* A buffer of at least n bytes owned by ctx, for the caller to decode a
 * chunk into: kept across calls (a fresh malloc of a 768 KB tile per read
 * costs ~190 page faults), invalidated by the next call; NULL and
 * CF_E_NOMEM in err if it cannot grow. */
uint8_t *cf_codec_ctx_tile(cf_codec_ctx *ctx, size_t n, cf_error *err);

/* Memory accounting, for callers that keep decoding within a byte budget
 * (the loader, cf_cog_read_many).  cf_codec_ctx_bytes: what ctx holds now
 * (its scratch buffers and decoder states; 0 for NULL).
 * cf_codec_ctx_growth: at most how much decoding one chunk of p with ctx
 * (NULL: a new context) can add to that, the caller also asking
 * cf_codec_ctx_tile for tile_bytes, plus the working memory the codec's
 * library allocates and frees within the call (an estimate: a progressive
 * JPEG's coefficients, LERC's and WebP's planes).  Kept next to the codecs
 * whose scratch it mirrors (lerc.c, predictor.c); test_codec.c checks it
 * against real decodes. */
uint64_t cf_codec_ctx_bytes(const cf_codec_ctx *ctx);
uint64_t cf_codec_ctx_growth(const cf_codec_ctx *ctx, const cf_codec_params *p,
                             uint64_t tile_bytes);

/* Bytes one decoded chunk occupies: rows of ceil(width*samples*bits/8)
 * bytes.  0 on overflow or above CF_MAX_CHUNK_BYTES. */
uint64_t cf_codec_chunk_bytes(const cf_codec_params *p);

/* Decode `src` into `dst` (dst_len must equal cf_codec_chunk_bytes(p)).
 *
 * Parameters as libtiff sees a chunk: width is the full tile width (or the
 * image width for strips), height the tile height (or the rows of this
 * strip, fewer for the last one), samples 1 for PlanarConfiguration 2.
 * Values match GDAL's bit for bit (tests/unit/test_codec_gdal.c), which
 * fixes some choices: the Predictor tag applies to LZW, DEFLATE and ZSTD
 * only (libtiff ignores it for the others); LERC float pixels that the
 * LERC mask marks invalid read as NaN (integer ones as 0); JPEG and WebP
 * carry 8-bit samples only, YCbCr JPEG comes out as RGB.
 *
 * Errors: CF_E_CODEC (corrupt data, message says why), CF_E_UNSUPPORTED
 * (unknown codec, or "not built with X"), CF_E_FORMAT (codec header
 * contradicts the tags), CF_E_NOMEM, CF_E_LIMIT (chunk larger than
 * CF_MAX_CHUNK_BYTES), CF_E_ARG (dst_len is not the chunk size). */
cf_status cf_codec_decode(cf_codec_ctx *ctx, const cf_codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err);

/* 1 if this build can decode `compression` (with lerc_sub for LERC). */
int cf_codec_supported(uint16_t compression, uint16_t lerc_sub);

/* Undo predictor 2 or 3 in place on a decoded chunk in native byte order
 * (predictor 3 expects the byte-planar layout as stored).  Exposed for
 * tests. */
cf_status cf_predictor_undo(const cf_codec_params *p, uint8_t *buf,
                            size_t len, cf_error *err);

#endif
