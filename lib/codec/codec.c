/*
 * codec.c - the codec layer's front door: context lifetime, decoded chunk
 * size, and cf_codec_decode, which picks the codec from the registry, then
 * applies libtiff's post-processing in libtiff's order (byte swap for
 * big-endian files, then predictor) and zeroes the output on any failure.
 */
#include "codec_internal.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <zstd.h>

/* Scratch buffers above this size shrink again when later chunks need far
 * less. */
#define CF__SCRATCH_KEEP ((size_t)64 << 20)

cf_codec_ctx *cf_codec_ctx_new(void) {
    return cf__calloc(1, sizeof(cf_codec_ctx));
}

void cf_codec_ctx_free(cf_codec_ctx *ctx) {
    if (!ctx) return;
    if (ctx->deflate) libdeflate_free_decompressor(ctx->deflate);
    if (ctx->zstd) ZSTD_freeDCtx(ctx->zstd);
    free(ctx->outer.p);
    free(ctx->aux.p);
    free(ctx->row.p);
    free(ctx->tile.p);
    free(ctx);
}

cf_status cf__scratch_reserve(cf__scratch *s, size_t n, cf_error *err) {
    /* Keep the buffer across calls, but do not let one huge chunk pin
     * memory for the rest of a thread's life. */
    if (s->cap >= n && !(s->cap > CF__SCRATCH_KEEP && s->cap / 4 > n))
        return CF_OK;
    /* Grow by half again so a run of slightly larger chunks does not
     * reallocate every time; free first, the old contents are not needed. */
    size_t want = n + n / 2;
    if (want < n) want = n;
    free(s->p);
    s->p = cf__malloc(want);
    if (!s->p) {
        s->cap = 0;
        return cf__err(err, CF_E_NOMEM, "codec scratch buffer of %zu bytes",
                       want);
    }
    s->cap = want;
    return CF_OK;
}

uint8_t *cf_codec_ctx_tile(cf_codec_ctx *ctx, size_t n, cf_error *err) {
    if (cf__scratch_reserve(&ctx->tile, n, err)) return NULL;
    return ctx->tile.p;
}

cf_status cf__ctx_deflate(cf_codec_ctx *ctx,
                          struct libdeflate_decompressor **out,
                          cf_error *err) {
    if (!ctx->deflate) ctx->deflate = libdeflate_alloc_decompressor();
    if (!ctx->deflate)
        return cf__err(err, CF_E_NOMEM, "cannot allocate deflate decoder");
    *out = ctx->deflate;
    return CF_OK;
}

cf_status cf__ctx_zstd(cf_codec_ctx *ctx, void **out, cf_error *err) {
    if (!ctx->zstd) ctx->zstd = ZSTD_createDCtx();
    if (!ctx->zstd)
        return cf__err(err, CF_E_NOMEM, "cannot allocate zstd decoder");
    *out = ctx->zstd;
    return CF_OK;
}

uint64_t cf_codec_chunk_bytes(const cf_codec_params *p) {
    return p ? cf__chunk_bytes(p->width, p->samples, p->bits, p->height) : 0;
}

/* Decoder states are opaque to us: libdeflate's is ~11 KiB, a zstd DCtx
 * ~160 KiB (ZSTD_sizeof_DCtx once made); these round them up. */
#define CF__DEFLATE_STATE ((uint64_t)32 << 10)
#define CF__ZSTD_STATE ((uint64_t)256 << 10)

uint64_t cf_codec_ctx_bytes(const cf_codec_ctx *ctx) {
    if (!ctx) return 0;
    uint64_t n = sizeof *ctx + ctx->outer.cap + ctx->aux.cap + ctx->row.cap +
                 ctx->tile.cap;
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

uint64_t cf_codec_ctx_growth(const cf_codec_ctx *ctx, const cf_codec_params *p,
                             uint64_t tile_bytes) {
    uint64_t n = cf_codec_chunk_bytes(p);
    uint64_t g = ctx ? 0 : sizeof(cf_codec_ctx);
    g += scratch_growth(ctx ? &ctx->tile : NULL, tile_bytes);
    if (p->predictor == 3) /* predictor.c: one row of staging */
        g += scratch_growth(ctx ? &ctx->row : NULL,
                            (uint64_t)p->width * p->samples * (p->bits / 8));
    int need_deflate = 0, need_zstd = 0;
    switch (p->compression) {
    case 8:
    case 32946: need_deflate = 1; break;
    case 50000: need_zstd = 1; break;
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
        g += n + npix; /* liblerc's own mask and staging */
        break;
    }
    case 7: /* jpeg.c: libjpeg's coefficients (progressive), ~2 B/sample */
        g += 2 * n + ((uint64_t)1 << 20);
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

int cf_codec_supported(uint16_t compression, uint16_t lerc_sub) {
    const cf__codec_entry *e = cf__codec_find(compression);
    if (!e || !e->decode) return 0;
    if (compression == 34887 && lerc_sub > 2) return 0;
    return 1;
}

/* In-place byte swap of `n` samples of `bytes` bytes each.  Goes through
 * memcpy because dst carries no alignment promise. */
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

static cf_status decode_inner(cf_codec_ctx *ctx, const cf_codec_params *p,
                              const uint8_t *src, size_t src_len,
                              uint8_t *dst, size_t dst_len, cf_error *err) {
    if (p->bits != 1 && p->bits != 8 && p->bits != 16 && p->bits != 32 &&
        p->bits != 64)
        return cf__err(err, CF_E_UNSUPPORTED, "%u bits per sample",
                       (unsigned)p->bits);
    uint64_t want = cf_codec_chunk_bytes(p);
    if (!want)
        return cf__err(err, CF_E_LIMIT,
                       "chunk of %ux%u x %u samples is empty or larger than "
                       "%llu bytes",
                       (unsigned)p->width, (unsigned)p->height,
                       (unsigned)p->samples, (unsigned long long)CF_MAX_CHUNK_BYTES);
    if (want != dst_len)
        return cf__err(err, CF_E_ARG,
                       "output buffer is %zu bytes, chunk needs %llu", dst_len,
                       (unsigned long long)want);
    const cf__codec_entry *e = cf__codec_find(p->compression);
    if (!e)
        return cf__err(err, CF_E_UNSUPPORTED, "unknown compression code %u",
                       (unsigned)p->compression);
    if (!e->decode)
        return cf__err(err, CF_E_UNSUPPORTED, "%s: not built with %s",
                       e->name, e->missing);
    if (p->bits == 1 && !(e->flags & CF__CODEC_BITS1))
        return cf__err(err, CF_E_UNSUPPORTED, "%s with 1-bit samples",
                       e->name);
    int pred = (e->flags & CF__CODEC_PREDICTOR) && p->predictor != 1;
    if (pred) {
        cf_status st = cf__predictor_check(p, err);
        if (st) return st;
    }
    if (!src && src_len) return cf__err(err, CF_E_ARG, "NULL input");
    cf_status st = e->decode(ctx, p, src, src_len, dst, dst_len, err);
    if (st) {
        return cf__err_prefix(err, st, "%s", e->name);
    }
    /* libtiff swabs raw samples before the horizontal predictor; the
     * floating-point predictor's byte planes are order-free and it
     * suppresses the swab. */
    if ((e->flags & CF__CODEC_RAW) && p->bits > 8 &&
        !!p->big_endian != host_big_endian() && !(pred && p->predictor == 3))
        swap_samples(dst, dst_len, p->bits / 8);
    if (pred) {
        /* checked above, and dst_len == the chunk's size */
        st = cf__predictor_apply(&ctx->row, p, dst, err);
        if (st) return st;
    }
    return CF_OK;
}

cf_status cf_codec_decode(cf_codec_ctx *ctx, const cf_codec_params *p,
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
