/*
 * codec_internal.h - what the codec files share: the per-thread context,
 * the registry entry shape and one decode function per codec family.
 * Private to lib/codec and its unit tests.
 */
#ifndef CF_CODEC_INTERNAL_H
#define CF_CODEC_INTERNAL_H

#include "codec.h"

struct libdeflate_decompressor;

/* Growable scratch buffer owned by a context; grown on demand, never past
 * the cap its user passes, reused across calls. */
typedef struct cf__scratch {
    uint8_t *p;
    size_t cap;
} cf__scratch;

struct cf_codec_ctx {
    struct libdeflate_decompressor *deflate; /* lazily allocated */
    void *zstd;                              /* ZSTD_DCtx, lazily */
    cf__scratch outer;  /* LERC: blob after the outer deflate/zstd layer */
    cf__scratch aux;    /* LERC masks, band-sequential staging */
    cf__scratch row;    /* predictor 3 row staging */
    cf__scratch tile;   /* cf_codec_ctx_tile: the caller's decode target */
};

/* Make `s` hold at least `n` bytes.  CF_E_NOMEM on failure. */
cf_status cf__scratch_reserve(cf__scratch *s, size_t n, cf_error *err);

/* Lazily created decoders (CF_E_NOMEM if allocation fails). */
cf_status cf__ctx_deflate(cf_codec_ctx *ctx,
                          struct libdeflate_decompressor **out, cf_error *err);
cf_status cf__ctx_zstd(cf_codec_ctx *ctx, void **out, cf_error *err);

/* Every decoder writes exactly dst_len bytes on success.  On failure it may
 * leave garbage: cf_codec_decode zeroes dst afterwards. */
typedef cf_status (*cf__decode_fn)(cf_codec_ctx *ctx, const cf_codec_params *p,
                                   const uint8_t *src, size_t src_len,
                                   uint8_t *dst, size_t dst_len,
                                   cf_error *err);

/* Flags of a registry entry. */
enum {
    /* Output is the file's raw sample bytes: swap to native order when the
     * file is big-endian (libtiff's post-decode swab). */
    CF__CODEC_RAW = 1,
    /* libtiff runs the predictor module for this codec; for the others the
     * Predictor tag is ignored, as libtiff (and so GDAL) ignores it. */
    CF__CODEC_PREDICTOR = 2,
    /* Can carry 1-bit (bilevel) data. */
    CF__CODEC_BITS1 = 4,
};

typedef struct cf__codec_entry {
    uint16_t compression;
    const char *name;
    cf__decode_fn decode; /* NULL: not built into this binary */
    const char *missing;  /* library name for "not built with X" */
    unsigned flags;
} cf__codec_entry;

/* Registry lookup; NULL for a code no entry has. */
const cf__codec_entry *cf__codec_find(uint16_t compression);

cf_status cf__decode_none(cf_codec_ctx *, const cf_codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_deflate(cf_codec_ctx *, const cf_codec_params *,
                             const uint8_t *, size_t, uint8_t *, size_t,
                             cf_error *);
cf_status cf__decode_lzw(cf_codec_ctx *, const cf_codec_params *,
                         const uint8_t *, size_t, uint8_t *, size_t,
                         cf_error *);
cf_status cf__decode_packbits(cf_codec_ctx *, const cf_codec_params *,
                              const uint8_t *, size_t, uint8_t *, size_t,
                              cf_error *);
cf_status cf__decode_zstd(cf_codec_ctx *, const cf_codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_lerc(cf_codec_ctx *, const cf_codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_jpeg(cf_codec_ctx *, const cf_codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_webp(cf_codec_ctx *, const cf_codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);

/* Check that predictor p->predictor can apply to these samples. */
cf_status cf__predictor_check(const cf_codec_params *p, cf_error *err);
/* Undo the predictor on a whole decoded chunk with a context-owned row
 * buffer, without the checks: for callers that made them
 * (cf__predictor_check, the chunk's size), as the decoder and
 * cf_predictor_undo do. */
cf_status cf__predictor_apply(cf__scratch *row, const cf_codec_params *p,
                              uint8_t *buf, cf_error *err);

#endif
