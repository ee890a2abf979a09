/*
 * codec.c - the codec layer's front door: what a context will grow by for a
 * chunk, cf__codec_check, and cf__codec_decode, which picks the codec from the registry, then
 * applies libtiff's post-processing in libtiff's order (byte swap for
 * big-endian files, then predictor) and zeroes the output on any failure.
 */
#include "codec_internal.h"

#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

/* ------------------------------------------------------------ layout */

/* What happens between the codec and the caller's buffer. */
enum { POST_NONE, POST_UNPACK, POST_HALF, POST_COLOR };

static int whole_bytes(unsigned bits) {
    return bits == 8 || bits == 16 || bits == 32 || bits == 64 || bits == 128;
}

static int post_kind(const cf__codec_params *p) {
    if (p->color != CF_COLOR_RAW) return POST_COLOR;
    if (p->sample_format == 3 && (p->bits == 16 || p->bits == 24))
        return POST_HALF;
    if (p->bits != 1 && !whole_bytes(p->bits)) return POST_UNPACK;
    return POST_NONE;
}

/* Decoder states are opaque to us: libdeflate's is ~11 KiB, a zstd DCtx
 * ~160 KiB (ZSTD_sizeof_DCtx once made); these round them up. */
#define CF__DEFLATE_STATE ((uint64_t)32 << 10)
#define CF__ZSTD_STATE ((uint64_t)256 << 10)

uint64_t cf__codec_ctx_bytes(const cf__codec_ctx *ctx) {
    if (!ctx) return 0;
    uint64_t n = sizeof *ctx + ctx->outer.cap + ctx->aux.cap + ctx->row.cap +
                 ctx->tile.cap + ctx->ojpeg.cap + ctx->lerc2.cap + ctx->rev.cap +
                 ctx->stage.cap + ctx->runs.cap + ctx->zblock.cap;
    if (ctx->deflate) n += CF__DEFLATE_STATE;
    if (ctx->zstd) n += ZSTD_sizeof_DCtx(ctx->zstd);
    return n;
}

/* What cf__scratch_reserve(s, need) adds: it frees the old buffer first
 * and allocates need + need / 2. */
static uint64_t scratch_growth(const cf__scratch *s, uint64_t need) {
    uint64_t cap = s ? s->cap : 0;
    if (!need || cap >= need) return 0;
    uint64_t want = need + need / 2;
    return want > cap ? want - cap : 0;
}

uint64_t cf__codec_ctx_growth(const cf__codec_ctx *ctx, const cf__codec_params *p,
                             uint64_t tile_bytes, uint64_t src_bytes) {
    uint64_t n = cf__codec_chunk_bytes(p);
    uint64_t g = ctx ? 0 : sizeof(cf__codec_ctx);
    g += scratch_growth(ctx ? &ctx->tile : NULL, tile_bytes);
    if (p->predictor == 3) /* predictor.c: one row of staging */
        g += scratch_growth(ctx ? &ctx->row : NULL,
                            (uint64_t)p->width * p->samples * (p->bits / 8));
    /* decode_inner: the stored samples staged before they are widened or
     * converted; the input with its bits reversed (FillOrder 2) */
    if (post_kind(p) != POST_NONE)
        g += scratch_growth(ctx ? &ctx->stage : NULL, cf__codec_stored_bytes(p));
    const cf__codec_entry *e = cf__codec_find(p->compression);
    if (p->fill_order == 2 && e && !(e->flags & CF__CODEC_NOBITREV)) {
        uint64_t s = cf__codec_stored_bytes(p);
        g += scratch_growth(ctx ? &ctx->rev : NULL, src_bytes ? src_bytes : s + s / 8 + 4096);
    }
    /* ccitt.c (every CCITT scheme): run lengths of two rows, as many as
     * libtiff holds (w + 1 rounded up to 32, twice that for 2-D) */
    if (e && e->decode == cf__decode_ccitt)
        g += scratch_growth(ctx ? &ctx->runs : NULL,
                            2 * (((uint64_t)p->width + 32) / 32 * 64 + 8) * 4);
    int need_deflate = 0, need_zstd = 0;
    switch (p->compression) {
    case 8:
    case 32946: need_deflate = 1; break;
    case 50000: /* zstd.c: the tail of a chunk decoded through its first
                 * rows, under 2 blocks */
        need_zstd = 1;
        g += scratch_growth(ctx ? &ctx->zblock : NULL, 2 * 128 * 1024);
        break;
    case 34887: { /* lerc.c: outer layer, masks and staging */
        if (p->lerc_sub) {
            uint64_t cap = 256 + n + n / 3, zb = ZSTD_compressBound((size_t)n);
            g += scratch_growth(ctx ? &ctx->outer : NULL, zb > cap ? zb : cap);
            need_deflate = p->lerc_sub == 1;
            need_zstd = p->lerc_sub == 2;
        }
        /* Masks only for floats or 8-bit data with alpha, staging only for
         * band-sequential floats (lerc.c: mask_bytes + stage + 1). */
        uint64_t npix = (uint64_t)p->width * p->height;
        int is_float = p->sample_format == 3;
        int alpha = p->bits == 8 && p->sample_format != 2 && p->samples > 1;
        uint64_t masks = is_float ? npix * p->samples : alpha ? npix : 0;
        uint64_t stage = is_float && p->samples > 1 ? n : 0;
        g += scratch_growth(ctx ? &ctx->aux : NULL, masks + stage + 1);
        g += scratch_growth(ctx ? &ctx->lerc2 : NULL,
                            cf__lerc2_scratch_bytes(p->width, p->height,
                                                    p->samples));
        g += n + npix; /* liblerc's own mask and staging */
        break;
    }
    case 7: /* jpeg.c: libjpeg's coefficients (progressive), ~2 B/sample */
        g += 2 * n + ((uint64_t)1 << 20);
        break;
    case 6: /* ojpeg.c: the stream copied with its header, about the
             * chunk's size; libjpeg holds one iMCU row */
        g += scratch_growth(ctx ? &ctx->ojpeg : NULL, n + (64 << 10)) +
             ((uint64_t)1 << 20);
        break;
    case 50001: /* libwebp's planes (YUV or ARGB) */
        g += n + n / 2 + ((uint64_t)64 << 10);
        break;
    default: break;
    }
    if (need_deflate && !(ctx && ctx->deflate)) g += CF__DEFLATE_STATE;
    if (need_zstd && !(ctx && ctx->zstd)) g += CF__ZSTD_STATE;
    return g;
}

int cf__codec_supported(uint16_t compression, uint16_t lerc_sub) {
    const cf__codec_entry *e = cf__codec_find(compression);
    if (!e || !e->decode) return 0;
    if (compression == 34887 && lerc_sub > 2) return 0;
    return 1;
}

/* Why samples of this format and depth cannot be read, or NULL. */
static const char *format_problem(const cf__codec_params *p, char *buf,
                                  size_t n) {
    if (cf__codec_dtype(p) != CF_DT_UNKNOWN) return NULL;
    unsigned b = p->bits;
    switch (p->sample_format) {
    case 3:
        snprintf(buf, n, "floating-point samples of %u bits (GDAL reads 16, "
                 "24, 32 and 64)", b);
        break;
    case 5:
        snprintf(buf, n, "complex integer samples of %u bits (GDAL reads "
                 "CInt16 and CInt32: 32 and 64)", b);
        break;
    case 6:
        snprintf(buf, n, "complex floating-point samples of %u bits (GDAL "
                 "reads CFloat32 and CFloat64: 64 and 128)", b);
        break;
    default:
        snprintf(buf, n, "%u-bit integer samples (GDAL reads 1 to 32 and 64)",
                 b);
        break;
    }
    return buf;
}

cf_status cf__codec_check(const cf__codec_params *p, cf_error *err) {
    if (!p) return cf__err(err, CF_E_ARG, "codec: NULL parameters");
    const cf__codec_entry *e = cf__codec_find(p->compression);
    if (!e)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "compression %u is unknown (GDAL cannot read it either)",
                       (unsigned)p->compression);
    if (!e->decode && e->missing)
        return cf__err(err, CF_E_UNSUPPORTED, "%s: not built with %s", e->name,
                       e->missing);
    if (!e->decode)
        return cf__err(err, CF_E_UNSUPPORTED, "%s (compression %u) is not "
                       "supported: %s", e->name, (unsigned)p->compression,
                       e->why ? e->why : "no decoder");
    if (p->compression == 34887 && p->lerc_sub > 2)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "LERC with an unknown outer compression (%u)",
                       (unsigned)p->lerc_sub);
    char buf[160];
    const char *why = format_problem(p, buf, sizeof buf);
    if (why) return cf__err(err, CF_E_UNSUPPORTED, "%s", why);
    CF__TRY(cf__color_check(p, err));
    if (e->check) { /* first: it names what it refuses best (12-bit JPEG) */
        cf_status st = e->check(p, err);
        CF__TRY(st);
    }
    if (p->bits == 1 && !(e->flags & (CF__CODEC_BITS1 | CF__CODEC_ANYBITS)))
        return cf__err(err, CF_E_UNSUPPORTED, "%s with 1-bit samples",
                       e->name);
    if (p->bits != 1 && !whole_bytes(p->bits) && !(e->flags & CF__CODEC_ANYBITS))
        return cf__err(err, CF_E_UNSUPPORTED, "%s with %u-bit samples",
                       e->name, (unsigned)p->bits);
    if ((e->flags & CF__CODEC_PREDICTOR) && p->predictor != 1) {
        if (p->color == CF_COLOR_YCBCR || p->color == CF_COLOR_YCBCR_RAW)
            return cf__err(err, CF_E_UNSUPPORTED,
                           "a predictor on subsampled YCbCr");
        CF__TRY(cf__predictor_check(p, err));
    }
    if (!cf__codec_chunk_bytes(p) || !cf__codec_stored_bytes(p))
        return cf__err(err, CF_E_LIMIT,
                       "chunk of %ux%u x %u samples is empty or larger than "
                       "%llu bytes",
                       (unsigned)p->width, (unsigned)p->height,
                       (unsigned)p->samples,
                       (unsigned long long)CF_MAX_CHUNK_BYTES);
    return CF_OK;
}

/* In-place byte swap of the `bytes`-byte values of buf (2, 3, 4 or 8).
 * Goes through memcpy because buf carries no alignment promise. */
static void swap_samples(uint8_t *buf, size_t len, unsigned bytes) {
    size_t i;
    switch (bytes) {
    case 2:
        for (i = 0; i + 2 <= len; i += 2) {
            uint16_t v;
            memcpy(&v, buf + i, 2);
            v = __builtin_bswap16(v);
            memcpy(buf + i, &v, 2);
        }
        break;
    case 3:
        for (i = 0; i + 3 <= len; i += 3) {
            uint8_t t = buf[i];
            buf[i] = buf[i + 2];
            buf[i + 2] = t;
        }
        break;
    case 4:
        for (i = 0; i + 4 <= len; i += 4) {
            uint32_t v;
            memcpy(&v, buf + i, 4);
            v = __builtin_bswap32(v);
            memcpy(buf + i, &v, 4);
        }
        break;
    case 8:
        for (i = 0; i + 8 <= len; i += 8) {
            uint64_t v;
            memcpy(&v, buf + i, 8);
            v = __builtin_bswap64(v);
            memcpy(buf + i, &v, 8);
        }
        break;
    default: break;
    }
}

static int host_big_endian(void) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return 1;
#else
    return 0;
#endif
}

/* The width libtiff swabs a big-endian file's samples at (0: none):
 * 16/24/32/64-bit values whole, 128-bit ones as two 64-bit halves, and
 * complex values by component -- except under the horizontal predictor,
 * which swabs whole samples itself (bug-compatible: a CInt16 value is
 * swabbed as one 32-bit word there). */
static unsigned swab_width(const cf__codec_params *p, int pred2) {
    int cplx = p->sample_format == 5 || p->sample_format == 6;
    switch (p->bits) {
    case 16: return 2;
    case 24: return 3;
    case 32: return cplx && !pred2 ? 2 : 4;
    case 64: return cplx && !pred2 ? 4 : 8;
    case 128: return 8;
    default: return 0;
    }
}

static cf_status decode_inner(cf__codec_ctx *ctx, const cf__codec_params *p,
                              const uint8_t *src, size_t src_len,
                              uint8_t *dst, size_t dst_len, cf_error *err) {
    cf_status st = cf__codec_check(p, err);
    CF__TRY(st);
    uint64_t want = cf__codec_chunk_bytes(p);
    uint64_t stored = cf__codec_stored_bytes(p);
    if (want != dst_len)
        return cf__err(err, CF_E_ARG,
                       "output buffer is %zu bytes, chunk needs %llu", dst_len,
                       (unsigned long long)want);
    if (!src && src_len) return cf__err(err, CF_E_ARG, "NULL input");
    const cf__codec_entry *e = cf__codec_find(p->compression);
    /* libtiff reverses the bits of the raw bytes before the codec sees
     * them, except for codecs that do it themselves (or never). */
    if (p->fill_order == 2 && !(e->flags & CF__CODEC_NOBITREV) && src_len) {
        st = cf__scratch_reserve(&ctx->rev, src_len, err);
        CF__TRY(st);
        cf__bits_reverse(src, ctx->rev.p, src_len);
        src = ctx->rev.p;
    }
    int post = post_kind(p);
    uint8_t *out = dst;
    if (post != POST_NONE) {
        st = cf__scratch_reserve(&ctx->stage, (size_t)stored, err);
        CF__TRY(st);
        out = ctx->stage.p;
    }
    int pred = (e->flags & CF__CODEC_PREDICTOR) && p->predictor != 1;
    st = e->decode(ctx, p, src, src_len, out, (size_t)stored, err);
    if (st) {
        return cf__err_prefix(err, st, "%s", e->name);
    }
    /* libtiff swabs raw samples before the horizontal predictor; the
     * floating-point predictor's byte planes are order-free and it
     * suppresses the swab. */
    unsigned sw = swab_width(p, pred && p->predictor == 2);
    if ((e->flags & CF__CODEC_RAW) && sw &&
        !!p->big_endian != host_big_endian() && !(pred && p->predictor == 3))
        swap_samples(out, (size_t)stored, sw);
    if (pred) {
        /* checked above, and out holds the chunk's stored size */
        st = cf__predictor_apply(&ctx->row, p, out, err);
        CF__TRY(st);
    }
    switch (post) {
    case POST_UNPACK: cf__bits_unpack(p, out, dst); break;
    case POST_HALF: cf__half_to_float(p, out, dst); break;
    case POST_COLOR: cf__color_convert(p, out, dst); break;
    default: break;
    }
    return CF_OK;
}

cf_status cf__codec_decode(cf__codec_ctx *ctx, const cf__codec_params *p,
                          const uint8_t *src, size_t src_len, uint8_t *dst,
                          size_t dst_len, cf_error *err) {
    if (!ctx || !p || (!dst && dst_len)) {
        if (dst) memset(dst, 0, dst_len);
        return cf__err(err, CF_E_ARG, "codec: NULL context or parameters");
    }
    cf_status st = decode_inner(ctx, p, src, src_len, dst, dst_len, err);
    if (st) memset(dst, 0, dst_len);
    return st;
}

int cf__codec_can_stop(const cf__codec_params *p) {
    switch (p->compression) {
    case 1:     /* none */
    case 5:     /* LZW */
    case 6:     /* old-style JPEG */
    case 7:     /* JPEG */
    case 8:     /* DEFLATE */
    case 32946: /* DEFLATE (old code) */
    case 50000: /* ZSTD (zstd.c: block by block) */
        break;
    default: return 0;
    }
    /* subsampled YCbCr not in JPEG: whole blocks (cf__codec_stop_rows) */
    if ((p->color == CF_COLOR_YCBCR || p->color == CF_COLOR_YCBCR_RAW) &&
        (p->ycbcr_sub_v == 0 || 32 % p->ycbcr_sub_v))
        return 0;
    return 1;
}

uint32_t cf__codec_stop_rows(const cf__codec_params *p, uint32_t need) {
    uint64_t r = ((uint64_t)need + 31) / 32 * 32;
    return r >= p->height ? p->height : (uint32_t)r;
}

int cf__codec_stop_pays(const cf__codec_params *p, uint32_t need) {
    if (!cf__codec_can_stop(p) || cf__codec_stop_rows(p, need) >= p->height)
        return 0;
    switch (p->compression) {
    case 8:
    case 32946:
        /* zlib inflates a row in about twice libdeflate's time (measured
         * here on 512 px uint16 tiles: the first 256 rows cost what
         * libdeflate takes for all 512), so it pays up to 2/5. */
        return (uint64_t)need * 5 <= (uint64_t)p->height * 2;
    default:
        /* the codec that stops is the one that decodes the whole chunk */
        return 1;
    }
}

cf_status cf__codec_decode_rows(cf__codec_ctx *ctx, const cf__codec_params *p, uint32_t rows,
                               const uint8_t *src, size_t src_len, uint8_t *dst,
                               size_t dst_len, cf_error *err) {
    if (!p || rows >= p->height) return cf__codec_decode(ctx, p, src, src_len, dst, dst_len, err);
    if (!cf__codec_can_stop(p) || rows == 0 || rows % 32) {
        if (dst) memset(dst, 0, dst_len);
        return cf__err(err, CF_E_ARG, "codec: cannot decode %u of %u rows", rows, p->height);
    }
    cf__codec_params q = *p;
    q.full_height = p->full_height ? p->full_height : p->height;
    q.height = rows;
    return cf__codec_decode(ctx, &q, src, src_len, dst, dst_len, err);
}
