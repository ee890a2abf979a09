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

/* What a decoded chunk becomes before it is handed out, as GDAL reads
 * it (photometric.c; cf__codec_color picks one for an IFD). */
enum {
    CF_COLOR_RAW = 0,       /* the stored samples */
    CF_COLOR_CMYK = 1,      /* 8-bit CMYK (InkSet 1) -> RGBA */
    CF_COLOR_LAB = 2,       /* 8-bit CIELab -> RGBA (libtiff's sRGB) */
    CF_COLOR_YCBCR = 3,     /* 8-bit YCbCr, not JPEG -> RGB */
    CF_COLOR_YCBCR_RAW = 4  /* 8-bit subsampled YCbCr -> Y, Cb, Cr per
                               pixel, unconverted (the raw option) */
};

typedef struct cf__codec_params {
    uint16_t compression;   /* TIFF code, see tiff.h CF_COMP_* */
    uint16_t lerc_sub;      /* LERC: 0 none, 1 deflate, 2 zstd */
    uint16_t predictor;     /* 1, 2, 3 */
    uint16_t bits;          /* stored bits per sample: 1..32, 64, 128 */
    uint16_t sample_format; /* 1 uint, 2 int, 3 float, 5 complex int,
                               6 complex float */
    uint16_t photometric;   /* for JPEG: 6 = YCbCr -> decoded to RGB */
    uint32_t width;         /* full chunk width (tile width, unclipped) */
    uint32_t height;        /* rows in this chunk */
    uint32_t samples;       /* samples per pixel in this chunk */
    int big_endian;         /* file byte order */
    const uint8_t *jpeg_tables; /* JPEG: JPEGTables; old-style JPEG: the
                                   header libtiff writes (tiff.h) */
    size_t jpeg_tables_len;
    const char *refuse;     /* old-style JPEG: why this layout is not read
                               (cf__codec_check fails with refuse_code and
                               it); NULL when it is */
    int refuse_code;
    uint16_t ycbcr_sub_h, ycbcr_sub_v;
    uint16_t fill_order;    /* 2: bits of each stored byte reversed
                               (FillOrder); 0 or 1: as usual */
    uint16_t color;         /* CF_COLOR_* */
    uint32_t t4_options;    /* CCITT Group 3: bit 0 2-D coding, bit 1
                               uncompressed mode, bit 2 fill bits */
    uint32_t t6_options;    /* CCITT Group 4: bit 1 uncompressed mode */
    int strip;              /* a strip, not a tile (matters to libtiff's
                               RGBA reading of subsampled YCbCr) */
    float white_point[2];   /* CIELab: the WhitePoint tag (x, y) */
    float ycbcr_coef[3];    /* YCbCr: YCbCrCoefficients */
    float ref_bw[6];        /* YCbCr: ReferenceBlackWhite */
    uint32_t full_height;   /* 0, or (set by cf__codec_decode_rows) the
                               chunk's rows when height is only its first
                               rows: a codec that can stop early stops
                               there (deflate.c goes straight to zlib's
                               streaming inflate) */
} cf__codec_params;

/* Per-thread decoder state and scratch buffers.  Not thread-safe: give each
 * decoding thread its own. */
typedef struct cf__codec_ctx cf__codec_ctx;
cf__codec_ctx *cf__codec_ctx_new(void);
void cf__codec_ctx_free(cf__codec_ctx *ctx);
/* A buffer of at least n bytes owned by ctx, for the caller to decode a
 * chunk into: kept across calls (a fresh malloc of a 768 KB tile per read
 * costs ~190 page faults), invalidated by the next call; NULL and
 * CF_E_NOMEM in err if it cannot grow. */
uint8_t *cf__codec_ctx_tile(cf__codec_ctx *ctx, size_t n, cf_error *err);

/* Memory accounting, for callers that keep decoding within a byte budget
 * (the loader, cf_cog_read_many).  cf__codec_ctx_bytes: what ctx holds now
 * (its scratch buffers and decoder states; 0 for NULL).
 * cf__codec_ctx_growth: at most how much decoding one chunk of p with ctx
 * (NULL: a new context) can add to that, the caller also asking
 * cf__codec_ctx_tile for tile_bytes, the chunk's compressed bytes being
 * src_bytes (a FillOrder 2 chunk is copied reversed; 0 when not known:
 * then the stored size plus an eighth stands in, an estimate that the
 * caller's budget corrects after the decode), plus the working memory the codec's
 * library allocates and frees within the call (an estimate: a progressive
 * JPEG's coefficients, LERC's and WebP's planes).  Kept next to the codecs
 * whose scratch it mirrors (lerc.c, predictor.c); test_codec.c checks it
 * against real decodes. */
uint64_t cf__codec_ctx_bytes(const cf__codec_ctx *ctx);
uint64_t cf__codec_ctx_growth(const cf__codec_ctx *ctx, const cf__codec_params *p,
                             uint64_t tile_bytes, uint64_t src_bytes);

/* How a decoded chunk is laid out (what cf__codec_decode writes): rows of
 * `width` pixels of *samples samples of *bits bits each, pixel-interleaved
 * and packed, rows padded to whole bytes.  Depths GDAL widens come out
 * widened (2-7 bits to 8, 9-15 to 16, 17-31 to 32, float16 and float24
 * to float32); 1-bit stays packed; complex samples are two numbers.
 * Colour conversions give 4 (RGBA) or 3 (RGB) 8-bit samples. */
void cf__codec_out_layout(const cf__codec_params *p, uint32_t *samples,
                         uint32_t *bits);
/* The sample type GDAL reads these samples as (CF_DT_U8 for 1-bit and
 * colour-converted samples; CF_DT_UNKNOWN for a combination
 * cf__codec_check refuses). */
cf_dtype cf__codec_dtype(const cf__codec_params *p);

/* Bytes one decoded chunk occupies in that layout.  0 on overflow or
 * above CF_MAX_CHUNK_BYTES. */
uint64_t cf__codec_chunk_bytes(const cf__codec_params *p);
/* Bytes of the chunk as stored (what the codec itself decompresses to):
 * rows of ceil(width*samples*bits/8) bytes, or for subsampled YCbCr not in
 * JPEG its data units (sub_h*sub_v luma + 2 chroma samples per block). */
uint64_t cf__codec_stored_bytes(const cf__codec_params *p);

/* Whether these parameters can be decoded: every refusal that decoding
 * would make without looking at the data (codec unknown or not built,
 * sample depth or format the codec or GDAL cannot read, predictor that
 * cannot apply, colour conversion that does not fit), with a message
 * naming the feature: "LZMA: not built with liblzma", "12-bit JPEG
 * (libjpeg-turbo decodes 8-bit JPEG only)", ...  Called when a file opens
 * for every IFD a read can touch, so that an unreadable file is refused
 * then and not in the middle of an epoch.  CF_E_UNSUPPORTED. */
cf_status cf__codec_check(const cf__codec_params *p, cf_error *err);

/* The tags that decide how GDAL presents an IFD's colours. */
typedef struct cf__color_tags {
    uint16_t photometric, compression, bits, sample_format;
    uint16_t samples, extra_samples, planar, inkset;
} cf__color_tags;
/* The CF_COLOR_* conversion GDAL (libtiff's RGBA interface) applies to an
 * IFD: 8-bit CMYK and CIELab become RGBA, 8-bit YCbCr not in JPEG becomes
 * RGB; everything else is read raw.  `raw` asks for the stored samples
 * instead (GDAL's GTIFF_RAW: prefix): subsampled YCbCr is then upsampled
 * but not converted.  CF_E_UNSUPPORTED for a layout GDAL converts but
 * cogfeed cannot (band-interleaved CMYK, CIELab or YCbCr without `raw`;
 * YCbCr of other depths or sample counts), with the reason in err. */
cf_status cf__codec_color(const cf__color_tags *t, int raw, uint16_t *color,
                         cf_error *err);

/* Decode `src` into `dst` (dst_len must equal cf__codec_chunk_bytes(p)).
 *
 * Parameters as libtiff sees a chunk: width is the full tile width (or the
 * image width for strips), height the tile height (or the rows of this
 * strip, fewer for the last one), samples 1 for PlanarConfiguration 2.
 * Values match GDAL's bit for bit (tests/unit/test_codec_gdal.c and the
 * conformance suite), which fixes some choices: the steps are libtiff's
 * (bit reversal for FillOrder 2, decompression, byte swap for big-endian
 * files, predictor) followed by GDAL's (widening odd depths and float16,
 * libtiff's RGBA conversion of CMYK, CIELab and YCbCr); the Predictor tag
 * applies to LZW, DEFLATE, ZSTD and LZMA only (libtiff ignores it for the
 * others); LERC float pixels that the LERC mask marks invalid read as NaN
 * (integer ones as 0); JPEG and WebP carry 8-bit samples only, YCbCr JPEG
 * comes out as RGB; CCITT codecs write 1-bit rows, white 0 and black 1.
 *
 * Errors: CF_E_CODEC (corrupt data, message says why), CF_E_UNSUPPORTED
 * (unknown codec, or "not built with X"), CF_E_FORMAT (codec header
 * contradicts the tags), CF_E_NOMEM, CF_E_LIMIT (chunk larger than
 * CF_MAX_CHUNK_BYTES), CF_E_ARG (dst_len is not the chunk size). */
cf_status cf__codec_decode(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err);

/* Whether a chunk of p can be decoded through its first rows only
 * (cf__codec_decode_rows): the codecs whose stream gives its rows in order
 * and that stop once the output is full (uncompressed, LZW, DEFLATE, JPEG,
 * old-style JPEG), with every step after them row by row (predictor,
 * swab, widening, colour conversion: subsampled YCbCr in blocks of
 * ycbcr_sub_v rows). */
int cf__codec_can_stop(const cf__codec_params *p);
/* Rows cf__codec_decode_rows decodes for a caller needing the first `need`
 * rows of a chunk of p: need rounded up to 32 (whole JPEG MCU rows, whole
 * YCbCr blocks), at most p->height. */
uint32_t cf__codec_stop_rows(const cf__codec_params *p, uint32_t need);
/* Whether decoding a chunk of p through its first `need` rows only
 * (cf__codec_decode_rows) costs less than decoding it whole: the codecs
 * that stop in their own decoder for any need short of the whole chunk;
 * DEFLATE, where stopping means zlib instead of libdeflate, only for at
 * most 2/5 of it. */
int cf__codec_stop_pays(const cf__codec_params *p, uint32_t need);
/* cf__codec_decode of the first `rows` rows of the chunk only (rows from
 * cf__codec_stop_rows, or p->height: then the whole chunk as
 * cf__codec_decode): dst_len is cf__codec_chunk_bytes of p with that
 * height.  The stream is read only as far as those rows need (a DEFLATE
 * or LZW strip of 4096 rows read for its first 512 inflates an eighth of
 * itself).  CF_E_ARG when p cannot stop early (cf__codec_can_stop) or
 * rows is not one cf__codec_stop_rows gives. */
cf_status cf__codec_decode_rows(cf__codec_ctx *ctx, const cf__codec_params *p, uint32_t rows,
                               const uint8_t *src, size_t src_len, uint8_t *dst,
                               size_t dst_len, cf_error *err);

/* n one-bit samples from bit `first` of src (most significant bit first,
 * as TIFF stores bilevel images and masks) to bytes of 0 or `on`
 * (bits.c). */
void cf__bits_expand(const uint8_t *src, size_t first, size_t n, uint8_t *d, uint8_t on);

/* Encoding (encode.c and one file per lossy or LERC codec), for the
 * writer.  An encoder keeps the codecs' state and its buffers from chunk
 * to chunk; one per thread. */
typedef struct cf__encoder cf__encoder;
cf__encoder *cf__encoder_new(void);
void cf__encoder_free(cf__encoder *e);
/* 1 if cf__codec_encode writes `compression` in this build: NONE (1),
 * DEFLATE (8), ZSTD (50000), and with their libraries LERC (34887),
 * JPEG (7), WEBP (50001). */
int cf__codec_can_encode(uint16_t compression);

/* What an encode may choose beyond the tags (the writer's options). */
typedef struct cf__encode_opts {
    int level;        /* DEFLATE, ZSTD and LERC's DEFLATE/ZSTD layer: 0 is
                         GDAL's default (6, 9) */
    double max_error; /* LERC: the largest difference allowed per value
                         (GDAL's MAX_Z_ERROR); 0 lossless */
    int quality;      /* JPEG, WEBP: 1..100, 0 GDAL's default 75 */
    int lossless;     /* WEBP: lossless (GDAL's WEBP_LOSSLESS) */
} cf__encode_opts;

/* Encode one chunk of p (len = cf__codec_chunk_bytes(p) bytes of
 * native-order samples, pixel-interleaved, full tile width and height)
 * with the options o (NULL: every default):
 *  - NONE, DEFLATE, ZSTD: predictor p->predictor applied, samples
 *    little-endian, then compressed at o->level;
 *  - LERC: a Lerc2 blob of version 4 (what libtiff writes), then
 *    p->lerc_sub's layer (0 none, 1 DEFLATE, 2 ZSTD); float NaNs go into
 *    the LERC mask;
 *  - JPEG: 8-bit, 1 sample, or 3 as RGB or (p->photometric 6) converted to
 *    YCbCr subsampled p->ycbcr_sub_h x p->ycbcr_sub_v, each chunk a whole
 *    stream with its tables (no JPEGTables needed);
 *  - WEBP: 8-bit RGB or RGBA.
 * The last three take predictor 1 only (libtiff ignores it for them).
 * *out is the encoder's buffer (or src itself for NONE on a little-endian
 * host without a predictor), valid until its next call.  CF_E_UNSUPPORTED
 * for other codecs, samples the codec cannot take or a predictor the
 * samples cannot take, CF_E_ARG when len is not the chunk's size, a
 * predictor comes without compression or an option is out of range. */
cf_status cf__codec_encode(cf__encoder *e, const cf__codec_params *p,
                           const cf__encode_opts *o, const uint8_t *src, size_t len,
                           const uint8_t **out, size_t *out_len, cf_error *err);

/* 1 if this build can decode `compression` (with lerc_sub for LERC). */
int cf__codec_supported(uint16_t compression, uint16_t lerc_sub);

/* Undo predictor 2 or 3 in place on a decoded chunk in native byte order
 * (predictor 3 expects the byte-planar layout as stored); len is
 * cf__codec_stored_bytes(p).  Exposed for tests. */
cf_status cf__predictor_undo(const cf__codec_params *p, uint8_t *buf,
                            size_t len, cf_error *err);

#endif
