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

struct cf__codec_ctx {
    struct libdeflate_decompressor *deflate; /* lazily allocated */
    void *zstd;                              /* ZSTD_DCtx, lazily */
    cf__scratch outer;  /* LERC: blob after the outer deflate/zstd layer */
    cf__scratch aux;    /* LERC masks, band-sequential staging */
    cf__scratch row;    /* predictor 3 row staging */
    cf__scratch tile;   /* cf__codec_ctx_tile: the caller's decode target */
    cf__scratch rev;    /* FillOrder 2: the input with its bits reversed */
    cf__scratch stage;  /* the stored samples, before they are widened or
                           colour-converted into the caller's buffer */
    void *lzma;         /* lzma_stream, lazily (lzma.c) */
    cf__scratch runs;   /* CCITT run lengths of two rows (ccitt.c) */
    cf__scratch ojpeg;  /* old-style JPEG: header + chunk + EOI (ojpeg.c) */
    cf__scratch lerc2;  /* lerc2.c: its state, the mask bits, depth ranges */
    cf__scratch zblock; /* zstd.c: the block that crosses the last row of a
                           chunk decoded through its first rows */
};

/* Make `s` hold at least `n` bytes.  CF_E_NOMEM on failure. */
cf_status cf__scratch_reserve(cf__scratch *s, size_t n, cf_error *err);

/* Lazily created decoders (CF_E_NOMEM if allocation fails). */
cf_status cf__ctx_deflate(cf__codec_ctx *ctx,
                          struct libdeflate_decompressor **out, cf_error *err);
cf_status cf__ctx_zstd(cf__codec_ctx *ctx, void **out, cf_error *err);

/* Every decoder writes exactly dst_len bytes on success.  On failure it may
 * leave garbage: cf__codec_decode zeroes dst afterwards. */
typedef cf_status (*cf__decode_fn)(cf__codec_ctx *ctx, const cf__codec_params *p,
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
    /* Carries samples of any depth (2-7, 9-15, 17-31 bits too). */
    CF__CODEC_ANYBITS = 8,
    /* libtiff does not reverse the input bits for FillOrder 2 (JPEG), or
     * the decoder does it itself (CCITT, where it is the same thing). */
    CF__CODEC_NOBITREV = 16,
};

/* A codec's own refusals, made without data (bit depths, sample counts,
 * options); NULL when the flags say all. */
typedef cf_status (*cf__check_fn)(const cf__codec_params *p, cf_error *err);

typedef struct cf__codec_entry {
    uint16_t compression;
    const char *name;
    cf__decode_fn decode; /* NULL: not built into this binary, or a codec
                             cogfeed does not read (then `missing` is NULL
                             and `why` says so) */
    const char *missing;  /* library name for "not built with X" */
    unsigned flags;
    cf__check_fn check;
    const char *why;      /* for codecs never read: the reason */
} cf__codec_entry;

/* Registry lookup; NULL for a code no entry has. */
const cf__codec_entry *cf__codec_find(uint16_t compression);

cf_status cf__decode_none(cf__codec_ctx *, const cf__codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_deflate(cf__codec_ctx *, const cf__codec_params *,
                             const uint8_t *, size_t, uint8_t *, size_t,
                             cf_error *);
cf_status cf__decode_lzw(cf__codec_ctx *, const cf__codec_params *,
                         const uint8_t *, size_t, uint8_t *, size_t,
                         cf_error *);
cf_status cf__decode_packbits(cf__codec_ctx *, const cf__codec_params *,
                              const uint8_t *, size_t, uint8_t *, size_t,
                              cf_error *);
cf_status cf__decode_zstd(cf__codec_ctx *, const cf__codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_lerc(cf__codec_ctx *, const cf__codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
/* lerc2.c: decode one Lerc2 blob (one band) into out, and the validity
 * of each pixel into mask (0/1 bytes) when mask is not NULL, exactly as
 * lerc_decode(blob, len, mask ? 1 : 0, mask, depth, cols, rows, 1, dt, out)
 * would.  *done = 1 when it did; *done = 0 (and CF_OK) when the blob is of
 * a kind it leaves to liblerc (see lerc2.c).  CF_E_CODEC, with what is
 * wrong, for a malformed blob of the kinds it takes; CF_E_NOMEM. */
cf_status cf__lerc2_decode(cf__scratch *scratch, const uint8_t *blob,
                           size_t len, int dt, int depth, int cols, int rows,
                           uint8_t *out, uint8_t *mask, int *done,
                           cf_error *err);
/* The scratch cf__lerc2_decode reserves for a blob of this size. */
size_t cf__lerc2_scratch_bytes(uint64_t width, uint64_t height,
                               uint64_t depth);
cf_status cf__decode_jpeg(cf__codec_ctx *, const cf__codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_webp(cf__codec_ctx *, const cf__codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);

cf_status cf__decode_lzma(cf__codec_ctx *, const cf__codec_params *,
                          const uint8_t *, size_t, uint8_t *, size_t,
                          cf_error *);
cf_status cf__decode_ccitt(cf__codec_ctx *, const cf__codec_params *,
                           const uint8_t *, size_t, uint8_t *, size_t,
                           cf_error *);
/* Free a lazily made lzma_stream (NULL allowed). */
void cf__lzma_free(void *stream);
cf_status cf__decode_ojpeg(cf__codec_ctx *, const cf__codec_params *,
                           const uint8_t *, size_t, uint8_t *, size_t,
                           cf_error *);
cf_status cf__check_jpeg(const cf__codec_params *p, cf_error *err);
cf_status cf__check_ojpeg(const cf__codec_params *p, cf_error *err);
cf_status cf__check_webp(const cf__codec_params *p, cf_error *err);
cf_status cf__check_lerc(const cf__codec_params *p, cf_error *err);

/* 1 on a little-endian host (the encoders' byte swaps). */
static inline int cf__host_is_le(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}
cf_status cf__check_ccitt(const cf__codec_params *p, cf_error *err);

/* The encoder (encode.c): shared with the codec files that encode. */
struct libdeflate_compressor;
struct cf__encoder {
    struct libdeflate_compressor *deflate;
    int deflate_level;
    void *zstd;         /* ZSTD_CCtx, lazily */
    cf__scratch work;   /* the chunk after the predictor, or LERC's
                           band-sequential staging */
    cf__scratch row;    /* predictor 3: one row's byte planes */
    cf__scratch out;    /* the encoded chunk */
    cf__scratch blob;   /* LERC: the blob before its DEFLATE/ZSTD layer */
    cf__scratch mask;   /* LERC: validity of each pixel (float NaNs) */
};
/* len bytes of src zlib-wrapped DEFLATE (zstd 0) or ZSTD at level (0:
 * GDAL's default, 6 or 9; clamped to 12 or 22) into e->out: *out and
 * *out_len. */
cf_status cf__enc_compress(cf__encoder *e, int zstd, int level, const uint8_t *src, size_t len,
                           const uint8_t **out, size_t *out_len, cf_error *err);
/* One chunk, the predictor already ruled out (cf__codec_encode checked
 * the size and options): lerc_enc.c, jpeg_enc.c, webp_enc.c. */
cf_status cf__encode_lerc(cf__encoder *e, const cf__codec_params *p,
                          const cf__encode_opts *o, const uint8_t *src, size_t len,
                          const uint8_t **out, size_t *out_len, cf_error *err);
cf_status cf__encode_jpeg(cf__encoder *e, const cf__codec_params *p,
                          const cf__encode_opts *o, const uint8_t *src, size_t len,
                          const uint8_t **out, size_t *out_len, cf_error *err);
cf_status cf__encode_webp(cf__encoder *e, const cf__codec_params *p,
                          const cf__encode_opts *o, const uint8_t *src, size_t len,
                          const uint8_t **out, size_t *out_len, cf_error *err);
/* LERC's data type for the tags (liblerc's numbering), -1 if none
 * (lerc.c). */
int cf__lerc_type(const cf__codec_params *p);

/* bits.c: FillOrder 2 and depths that are not whole bytes. */
void cf__bits_reverse(const uint8_t *src, uint8_t *dst, size_t n);
/* Widen a stored chunk of 2-7, 9-15 or 17-31-bit samples (rows of
 * ceil(width*samples*bits/8) bytes, most significant bit first) to 8, 16
 * or 32-bit native integers, as GDAL does (no sign extension). */
void cf__bits_unpack(const cf__codec_params *p, const uint8_t *src,
                     uint8_t *dst);

/* half.c: float16 and float24 (native order after the swab) to float32,
 * bit-exact with GDAL (NaN payloads kept, denormals normalised). */
void cf__half_to_float(const cf__codec_params *p, const uint8_t *src,
                       uint8_t *dst);

/* photometric.c: the CF_COLOR_* conversion of a stored 8-bit chunk into
 * RGB(A) or per-pixel YCbCr, as libtiff's RGBA interface computes it. */
void cf__color_convert(const cf__codec_params *p, const uint8_t *src,
                       uint8_t *dst);
/* Whether p->color fits the samples (cf__codec_check's part). */
cf_status cf__color_check(const cf__codec_params *p, cf_error *err);

/* Check that predictor p->predictor can apply to these samples. */
cf_status cf__predictor_check(const cf__codec_params *p, cf_error *err);
/* Undo the predictor on a whole decoded chunk with a context-owned row
 * buffer, without the checks: for callers that made them
 * (cf__predictor_check, the chunk's size), as the decoder and
 * cf__predictor_undo do. */
cf_status cf__predictor_apply(cf__scratch *row, const cf__codec_params *p,
                              uint8_t *buf, cf_error *err);

#endif
