/*
 * test_codec.c - codec layer round trips and edge streams: every codec
 * with an encoder at hand (libdeflate, zstd, liblerc, libwebp, libjpeg, a
 * libtiff-style LZW encoder and a PackBits encoder written here), the
 * predictors against forward implementations for every bit depth and both
 * file byte orders, and the parameter checks of cf__codec_decode.
 */
#include "codec/codec.h"
#include "codec/codec_internal.h"
#include "cf_test.h"

#include <libdeflate.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_c_targetCBlockSize */
#include <zstd.h>

#ifdef CF_HAVE_LERC
#include <Lerc_c_api.h>
#endif
#ifdef CF_HAVE_WEBP
#include <webp/decode.h>
#include <webp/encode.h>
#endif
#ifdef CF_HAVE_JPEG
#include <jpeglib.h>
#endif

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static int all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

static cf__codec_params params(uint16_t comp, uint16_t bits, uint32_t w,
                              uint32_t h, uint32_t spp) {
    cf__codec_params p;
    memset(&p, 0, sizeof p);
    p.compression = comp;
    p.predictor = 1;
    p.bits = bits;
    p.sample_format = 1;
    p.photometric = 1;
    p.width = w;
    p.height = h;
    p.samples = spp;
    return p;
}

/* ---- LZW encoder, libtiff's (tif_lzw.c LZWEncode) code-width rules ---- */

typedef struct lzw_enc {
    uint8_t *out;
    size_t n, cap;
    uint64_t acc;
    unsigned nacc;
    unsigned nbits;
} lzw_enc;

/* Old-style (pre-TIFF 6) LZW: LSB-first codes, widened one entry later. */
static int lzw_old_style;

static void put_code(lzw_enc *e, unsigned code) {
    if (lzw_old_style) {
        e->acc |= (uint64_t)code << e->nacc;
        e->nacc += e->nbits;
        while (e->nacc >= 8) {
            e->out[e->n++] = (uint8_t)e->acc;
            e->acc >>= 8;
            e->nacc -= 8;
        }
        return;
    }
    e->acc = (e->acc << e->nbits) | code;
    e->nacc += e->nbits;
    while (e->nacc >= 8) {
        e->out[e->n++] = (uint8_t)(e->acc >> (e->nacc - 8));
        e->nacc -= 8;
    }
}

static void lzw_flush(lzw_enc *e) {
    if (e->nacc)
        e->out[e->n++] =
            lzw_old_style ? (uint8_t)e->acc : (uint8_t)(e->acc << (8 - e->nacc));
    e->nacc = 0;
}

/* Encode `in`.  no_clear: never reset the table (it stops growing at 4096
 * entries); eoi: write the EOI code.  *switched_at_end is set when the
 * last data code widened the code size just before EOI. */
static size_t lzw_encode(const uint8_t *in, size_t len, uint8_t *out,
                         int no_clear, int eoi, int *switched_at_end) {
    static int16_t table[4096][256]; /* child code or -1 */
    lzw_enc e = {out, 0, 0, 0, 0, 9};
    unsigned free_ent = 258, maxcode = 511;
    memset(table, 0xff, sizeof table);
    put_code(&e, 256);
    if (switched_at_end) *switched_at_end = 0;
    if (len == 0) {
        if (eoi) put_code(&e, 257);
        lzw_flush(&e);
        return e.n;
    }
    unsigned ent = in[0];
    for (size_t i = 1; i <= len; i++) {
        if (i < len && table[ent][in[i]] >= 0) {
            ent = (unsigned)table[ent][in[i]];
            continue;
        }
        put_code(&e, ent);
        unsigned before = e.nbits;
        if (free_ent < 4096 && i < len) table[ent][in[i]] = (int16_t)free_ent;
        if (free_ent < 4096 || !no_clear) free_ent++;
        if (!no_clear && free_ent == 4094) {
            put_code(&e, 256);
            memset(table, 0xff, sizeof table);
            e.nbits = 9;
            maxcode = 511;
            free_ent = 258;
        } else if (free_ent > maxcode + (unsigned)lzw_old_style && e.nbits < 12) {
            e.nbits++;
            maxcode = (1u << e.nbits) - 1;
        }
        if (i == len && switched_at_end) *switched_at_end = e.nbits != before;
        if (i < len) ent = in[i];
    }
    if (eoi) put_code(&e, 257);
    lzw_flush(&e);
    return e.n;
}

static size_t packbits_encode(const uint8_t *in, size_t len, uint8_t *out) {
    size_t i = 0, n = 0;
    while (i < len) {
        size_t run = 1;
        while (i + run < len && run < 128 && in[i + run] == in[i]) run++;
        if (run >= 2) {
            out[n++] = (uint8_t)(int8_t)(1 - (int)run);
            out[n++] = in[i];
            i += run;
            continue;
        }
        size_t lit = 1;
        while (i + lit < len && lit < 128 &&
               !(i + lit + 1 < len && in[i + lit] == in[i + lit + 1]))
            lit++;
        out[n++] = (uint8_t)(lit - 1);
        memcpy(out + n, in + i, lit);
        n += lit;
        i += lit;
    }
    return n;
}

/* Test data with some structure so that every codec compresses it. */
static void fill(uint8_t *p, size_t n, int mode) {
    for (size_t i = 0; i < n; i++)
        p[i] = mode == 0 ? (uint8_t)(rnd() & 7)
               : mode == 1 ? (uint8_t)rnd()
                           : (uint8_t)((i / 7) ^ (i % 13));
}

/* The LZW stream enc[0..n) decodes to want[0..len) as a 1-row chunk, into a
 * buffer of exactly len bytes (a write past it fails under ASan). */
static int lzw_decodes_exact(cf__codec_ctx *ctx, const uint8_t *enc, size_t n,
                             const uint8_t *want, size_t len) {
    cf_error err;
    cf__codec_params p = params(5, 8, (uint32_t)len, 1, 1);
    uint8_t *exact = malloc(len);
    int ok = exact && cf__codec_decode(ctx, &p, enc, n, exact, len, &err) == CF_OK &&
             memcmp(want, exact, len) == 0;
    free(exact);
    return ok;
}

static void test_lzw(cf__codec_ctx *ctx) {
    cf_error err;
    size_t cap = 1 << 20;
    uint8_t *in = malloc(cap), *enc = malloc(2 * cap + 64), *out = malloc(cap);
    /* every length around the 9->10 and 10->11 bit switches, so one of them
     * widens the code right before EOI */
    int saw_switch_at_end = 0;
    int fails = 0;
    for (size_t len = 1; len < 1400; len++) {
        fill(in, len, 1);
        int sw;
        size_t n = lzw_encode(in, len, enc, 0, 1, &sw);
        saw_switch_at_end |= sw;
        cf__codec_params p = params(5, 8, (uint32_t)len, 1, 1);
        memset(out, 0xee, len);
        cf_status st = cf__codec_decode(ctx, &p, enc, n, out, len, &err);
        if (st != CF_OK || memcmp(in, out, len)) fails++;
    }
    CHECK(fails == 0);
    CHECK(saw_switch_at_end);

    /* long streams: with CLEAR codes, and with the table full and no CLEAR */
    for (int mode = 0; mode < 3; mode++)
        for (int no_clear = 0; no_clear < 2; no_clear++) {
            size_t len = 256 * 1024;
            fill(in, len, mode);
            size_t n = lzw_encode(in, len, enc, no_clear, 1, NULL);
            cf__codec_params p = params(5, 8, 1024, 256, 1);
            CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
            CHECK(memcmp(in, out, len) == 0);
        }

    /* runs of one byte: every code after the first is KwKwK and one byte
     * longer than the last, so strings cross the decoder's 8-byte inline
     * limit, and the chunk ends at every offset of them; then runs of
     * random lengths and bytes, which mix the two cases */
    int run_fails = 0;
    for (size_t len = 1; len < 300; len++) {
        memset(in, 'A' + (int)(len % 3), len);
        size_t n = lzw_encode(in, len, enc, 0, 1, NULL);
        run_fails += !lzw_decodes_exact(ctx, enc, n, in, len);
    }
    for (int round = 0; round < 50; round++) {
        size_t len = 0;
        while (len < 20000) {
            size_t run = 1 + rnd() % 40;
            memset(in + len, (int)(rnd() & 3), run);
            len += run;
        }
        size_t n = lzw_encode(in, len, enc, round & 1, 1, NULL);
        /* the whole stream, and cut to end inside a string */
        for (size_t cut = 0; cut < 40; cut += 39)
            run_fails += !lzw_decodes_exact(ctx, enc, n, in, len - cut);
    }
    CHECK(run_fails == 0);

    /* missing EOI: decodes; data after EOI: ignored */
    fill(in, 5000, 0);
    size_t n = lzw_encode(in, 5000, enc, 0, 0, NULL);
    cf__codec_params p = params(5, 8, 100, 50, 1);
    CHECK(cf__codec_decode(ctx, &p, enc, n, out, 5000, &err) == CF_OK);
    CHECK(memcmp(in, out, 5000) == 0);
    n = lzw_encode(in, 5000, enc, 0, 1, NULL);
    memset(enc + n, 0xa5, 64);
    CHECK(cf__codec_decode(ctx, &p, enc, n + 64, out, 5000, &err) == CF_OK);
    CHECK(memcmp(in, out, 5000) == 0);
    /* more data than the chunk holds: output stops at the chunk size */
    fill(in, 6000, 0);
    n = lzw_encode(in, 6000, enc, 0, 1, NULL);
    CHECK(cf__codec_decode(ctx, &p, enc, n, out, 5000, &err) == CF_OK);
    CHECK(memcmp(in, out, 5000) == 0);

    /* truncated: error, output zeroed */
    n = lzw_encode(in, 5000, enc, 0, 1, NULL);
    memset(out, 0x77, 5000);
    CHECK(cf__codec_decode(ctx, &p, enc, n / 2, out, 5000, &err) == CF_E_CODEC);
    CHECK(all_zero(out, 5000));
    CHECK(strstr(err.msg, "LZW") != NULL);
    /* a 1-byte strip */
    uint8_t one = 0x80;
    memset(out, 0x77, 5000);
    CHECK(cf__codec_decode(ctx, &p, &one, 1, out, 5000, &err) == CF_E_CODEC);
    CHECK(all_zero(out, 5000));
    /* empty input */
    CHECK(cf__codec_decode(ctx, &p, NULL, 0, out, 5000, &err) == CF_E_CODEC);
    /* a code far beyond the table: CLEAR, 'A', then 600 */
    lzw_enc e = {enc, 0, 0, 0, 0, 9};
    put_code(&e, 256);
    put_code(&e, 'A');
    put_code(&e, 300);
    put_code(&e, 257);
    lzw_flush(&e);
    p = params(5, 8, 4, 1, 1);
    CHECK(cf__codec_decode(ctx, &p, enc, e.n, out, 4, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "beyond") != NULL);
    /* KwKwK: CLEAR, 'A', 258 -> "AAA" */
    e = (lzw_enc){enc, 0, 0, 0, 0, 9};
    put_code(&e, 256);
    put_code(&e, 'A');
    put_code(&e, 258);
    put_code(&e, 257);
    lzw_flush(&e);
    p = params(5, 8, 3, 1, 1);
    CHECK(cf__codec_decode(ctx, &p, enc, e.n, out, 3, &err) == CF_OK);
    CHECK(memcmp(out, "AAA", 3) == 0);
    /* first code after CLEAR must be a literal */
    e = (lzw_enc){enc, 0, 0, 0, 0, 9};
    put_code(&e, 256);
    put_code(&e, 258);
    lzw_flush(&e);
    CHECK(cf__codec_decode(ctx, &p, enc, e.n, out, 3, &err) == CF_E_CODEC);
    /* old-style LZW (LSB-first, late widening) round trips too, with the
     * table reset and without */
    lzw_old_style = 1;
    for (int mode = 0; mode < 3; mode++) {
        size_t len = 64 * 1024;
        fill(in, len, mode);
        n = lzw_encode(in, len, enc, mode == 2, 1, NULL);
        CHECK(enc[0] == 0 && (enc[1] & 1));
        cf__codec_params q = params(5, 8, 256, 256, 1);
        CHECK(cf__codec_decode(ctx, &q, enc, n, out, len, &err) == CF_OK);
        CHECK(memcmp(in, out, len) == 0);
    }
    int old_fails = 0;
    for (size_t len = 1; len < 1100; len += 3) {
        fill(in, len, 1);
        n = lzw_encode(in, len, enc, 0, 1, NULL);
        cf__codec_params q = params(5, 8, (uint32_t)len, 1, 1);
        if (cf__codec_decode(ctx, &q, enc, n, out, len, &err) != CF_OK ||
            memcmp(in, out, len))
            old_fails++;
    }
    CHECK(old_fails == 0);
    lzw_old_style = 0;
    /* 1-bit data decodes with packed rows */
    p = params(5, 1, 13, 7, 1); /* 2 bytes per row */
    fill(in, 14, 1);
    n = lzw_encode(in, 14, enc, 0, 1, NULL);
    CHECK(cf__codec_chunk_bytes(&p) == 14);
    CHECK(cf__codec_decode(ctx, &p, enc, n, out, 14, &err) == CF_OK);
    CHECK(memcmp(in, out, 14) == 0);
    free(in);
    free(enc);
    free(out);
}

static void test_packbits(cf__codec_ctx *ctx) {
    cf_error err;
    uint8_t in[4096], enc[8192], out[4096];
    for (int mode = 0; mode < 3; mode++) {
        fill(in, sizeof in, mode);
        size_t n = packbits_encode(in, sizeof in, enc);
        cf__codec_params p = params(32773, 8, 64, 64, 1);
        CHECK(cf__codec_decode(ctx, &p, enc, n, out, sizeof out, &err) == CF_OK);
        CHECK(memcmp(in, out, sizeof in) == 0);
    }
    cf__codec_params p = params(32773, 8, 4, 1, 1);
    /* -128 is a no-op; a repeat run past the output end is cut */
    uint8_t s1[] = {0x80, 0xfd, 'x', 0xff, 'y'};
    CHECK(cf__codec_decode(ctx, &p, s1, sizeof s1, out, 4, &err) == CF_OK);
    CHECK(memcmp(out, "xxxx", 4) == 0);
    /* literal run past the end of the input */
    uint8_t s2[] = {0x05, 'a', 'b'};
    memset(out, 0x55, 4);
    CHECK(cf__codec_decode(ctx, &p, s2, sizeof s2, out, 4, &err) == CF_E_CODEC);
    CHECK(all_zero(out, 4));
    /* literal run past the end of the output: cut */
    uint8_t s3[] = {0x05, 'a', 'b', 'c', 'd', 'e', 'f'};
    CHECK(cf__codec_decode(ctx, &p, s3, sizeof s3, out, 4, &err) == CF_OK);
    CHECK(memcmp(out, "abcd", 4) == 0);
    /* repeat with nothing to repeat; input shorter than the chunk */
    uint8_t s4[] = {0x01, 'a', 'b', 0xfe};
    CHECK(cf__codec_decode(ctx, &p, s4, sizeof s4, out, 4, &err) == CF_E_CODEC);
    uint8_t s5[] = {0x01, 'a', 'b'};
    CHECK(cf__codec_decode(ctx, &p, s5, sizeof s5, out, 4, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "PACKBITS") != NULL);
}

static void test_deflate_zstd(cf__codec_ctx *ctx) {
    cf_error err;
    size_t len = 256 * 256 * 2;
    uint8_t *in = malloc(len), *enc = malloc(2 * len + 1024),
            *out = malloc(len), *big = calloc(1, 4 * len);
    fill(in, len, 2);
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    for (int adobe = 0; adobe < 2; adobe++) {
        size_t n = libdeflate_zlib_compress(c, in, len, enc, 2 * len + 1024);
        cf__codec_params p = params(adobe ? 8 : 32946, 16, 256, 256, 1);
        CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
        CHECK(memcmp(in, out, len) == 0);
        /* truncated */
        memset(out, 1, len);
        CHECK(cf__codec_decode(ctx, &p, enc, n / 2, out, len, &err) ==
              CF_E_CODEC);
        CHECK(all_zero(out, len));
        /* short: stream of fewer bytes than the chunk */
        size_t m = libdeflate_zlib_compress(c, in, len - 2, enc, 2 * len);
        CHECK(cf__codec_decode(ctx, &p, enc, m, out, len, &err) == CF_E_CODEC);
        /* A stream of more than the chunk (a bomb, or a last strip written
         * with all its RowsPerStrip rows) gives its first bytes and stops
         * there, as libtiff reads it. */
        memcpy(big, in, len);
        memcpy(big + len, in, len);
        m = libdeflate_zlib_compress(c, big, 4 * len, enc, 2 * len);
        memset(out, 1, len);
        CHECK(cf__codec_decode(ctx, &p, enc, m, out, len, &err) == CF_OK);
        CHECK(memcmp(in, out, len) == 0);
        memset(big, 0, 4 * len);
        /* bytes after the stream's end are ignored, as libtiff ignores them */
        n = libdeflate_zlib_compress(c, in, len, enc, 2 * len + 1024);
        memcpy(enc + n, "\x13\x37junk", 6);
        CHECK(cf__codec_decode(ctx, &p, enc, n + 6, out, len, &err) == CF_OK);
        CHECK(memcmp(in, out, len) == 0);
        /* garbage */
        CHECK(cf__codec_decode(ctx, &p, in, 100, out, len, &err) == CF_E_CODEC);
    }
    libdeflate_free_compressor(c);

    size_t n = ZSTD_compress(enc, 2 * len + 1024, in, len, 3);
    cf__codec_params p = params(50000, 32, 128, 128, 2);
    CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
    CHECK(memcmp(in, out, len) == 0);
    CHECK(cf__codec_decode(ctx, &p, enc, n - 5, out, len, &err) == CF_E_CODEC);
    CHECK(all_zero(out, len));
    size_t m = ZSTD_compress(enc, 2 * len, big, 4 * len, 3);
    CHECK(cf__codec_decode(ctx, &p, enc, m, out, len, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "more than") != NULL);
    m = ZSTD_compress(enc, 2 * len, in, len / 2, 3);
    CHECK(cf__codec_decode(ctx, &p, enc, m, out, len, &err) == CF_E_CODEC);
    /* ZSTD with 1-bit data */
    p = params(50000, 1, 16, 4, 1);
    m = ZSTD_compress(enc, 2 * len, in, 8, 3);
    CHECK(cf__codec_decode(ctx, &p, enc, m, out, 8, &err) == CF_OK);
    CHECK(memcmp(in, out, 8) == 0);

    /* NONE: exact copy, short input is an error, extra bytes ignored */
    p = params(1, 8, 100, 10, 1);
    CHECK(cf__codec_decode(ctx, &p, in, 1000, out, 1000, &err) == CF_OK);
    CHECK(memcmp(in, out, 1000) == 0);
    CHECK(cf__codec_decode(ctx, &p, in, 1001, out, 1000, &err) == CF_OK);
    CHECK(cf__codec_decode(ctx, &p, in, 999, out, 1000, &err) == CF_E_CODEC);
    CHECK(all_zero(out, 1000));
    free(in);
    free(enc);
    free(out);
    free(big);
}

/* ---- predictors: forward transforms as a writer applies them ---- */

static void store_be_or_le(uint8_t *p, uint64_t v, unsigned bytes, int be) {
    for (unsigned i = 0; i < bytes; i++)
        p[be ? bytes - 1 - i : i] = (uint8_t)(v >> (8 * i));
}
static uint64_t load_native(const uint8_t *p, unsigned bytes) {
    uint64_t v = 0;
    memcpy(&v, p, bytes); /* little-endian hosts only, checked in main */
    return v;
}

/* Native values `vals` (w*h*spp) -> file bytes with predictor 2 applied
 * in file byte order. */
static void forward_pred2(const uint64_t *vals, uint8_t *out, uint32_t w,
                          uint32_t h, uint32_t spp, unsigned bytes, int be) {
    uint64_t mask = bytes == 8 ? ~0ull : ((1ull << (8 * bytes)) - 1);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t i = 0; i < w * spp; i++) {
            size_t k = (size_t)y * w * spp + i;
            uint64_t d = i < spp ? vals[k] : (vals[k] - vals[k - spp]) & mask;
            store_be_or_le(out + k * bytes, d, bytes, be);
        }
}

/* libtiff fpDiff: per row, split values into byte planes (most significant
 * first), then difference bytes with stride spp, right to left. */
static void forward_pred3(const uint8_t *native, uint8_t *out, uint32_t w,
                          uint32_t h, uint32_t spp, unsigned bytes) {
    size_t wc = (size_t)w * spp, cc = wc * bytes;
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *src = native + y * cc;
        uint8_t *row = out + y * cc;
        for (size_t k = 0; k < wc; k++)
            for (unsigned b = 0; b < bytes; b++)
                row[b * wc + k] = src[k * bytes + (bytes - 1 - b)];
        for (size_t i = cc; i-- > spp;) row[i] = (uint8_t)(row[i] - row[i - spp]);
    }
}

/* float16 bits to float32 bits from the format's definition (NaN
 * payloads kept, not quieted). */
static uint32_t ref_half(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, m = h & 1023u;
    int e = (h >> 10) & 31;
    if (e == 31) return sign | 0x7f800000u | m << 13;
    float f = e ? ldexpf(1.0f + (float)m / 1024.0f, e - 15) : ldexpf((float)m, -24);
    uint32_t u;
    memcpy(&u, &f, 4);
    return sign | u;
}

static void test_predictors(cf__codec_ctx *ctx) {
    cf_error err;
    uint32_t w = 37;
    const uint32_t h = 5, wmax = 133; /* odd widths: edge tiles keep full width */
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(1);
    uint64_t *vals = malloc(sizeof(uint64_t) * wmax * h * 4);
    uint8_t *file = malloc(wmax * h * 4 * 8), *enc = malloc(wmax * h * 64 + 1024),
            *out = malloc(wmax * h * 4 * 8), *native = malloc(wmax * h * 4 * 8);
    unsigned bits_list[] = {8, 16, 32, 64};
    /* Every sample size and 1-4 samples per pixel (the SIMD paths take
     * pixels of 1, 2, 4, 8 and 16 bytes, the others go scalar), widths of
     * less than one 16-byte block up to many blocks and a tail. */
    const uint32_t widths[] = {1, 3, 37, 133};
    for (int wi = 0; wi < 4; wi++)
    for (int bi = 0; bi < 4; bi++)
        for (uint32_t spp = 1; spp <= 4; spp++)
            for (int be = 0; be < 2; be++) {
                w = widths[wi];
                unsigned bytes = bits_list[bi] / 8;
                size_t nv = (size_t)w * h * spp, len = nv * bytes;
                for (size_t i = 0; i < nv; i++) {
                    uint64_t v = ((uint64_t)rnd() << 32) | rnd();
                    vals[i] = bytes == 8 ? v : v & ((1ull << (8 * bytes)) - 1);
                }
                forward_pred2(vals, file, w, h, spp, bytes, be);
                size_t n = libdeflate_zlib_compress(c, file, len, enc,
                                                    wmax * h * 64 + 1024);
                cf__codec_params p = params(32946, (uint16_t)(bytes * 8), w, h, spp);
                p.predictor = 2;
                p.big_endian = be;
                CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
                int bad = 0;
                for (size_t i = 0; i < nv; i++)
                    if (load_native(out + i * bytes, bytes) != vals[i]) bad++;
                CHECK(bad == 0);
                /* the same bytes without predictor are only swapped */
                p.predictor = 1;
                CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
                bad = 0;
                for (size_t i = 0; i < nv; i++) {
                    uint64_t v = 0;
                    for (unsigned b = 0; b < bytes; b++)
                        v |= (uint64_t)file[i * bytes + (be ? bytes - 1 - b : b)]
                             << (8 * b);
                    if (load_native(out + i * bytes, bytes) != v) bad++;
                }
                CHECK(bad == 0);
            }
    /* predictor 3 for float16/32/64; file byte order does not matter */
    w = 37;
    for (unsigned bytes = 2; bytes <= 8; bytes *= 2)
        for (uint32_t spp = 1; spp <= 3; spp += 2)
            for (int be = 0; be < 2; be++) {
                size_t len = (size_t)w * h * spp * bytes;
                for (size_t i = 0; i < len; i++) native[i] = (uint8_t)rnd();
                forward_pred3(native, file, w, h, spp, bytes);
                size_t n = ZSTD_compress(enc, w * h * 64 + 1024, file, len, 1);
                cf__codec_params p = params(50000, (uint16_t)(bytes * 8), w, h, spp);
                p.predictor = 3;
                p.sample_format = 3;
                p.big_endian = be;
                if (bytes == 2) {
                    /* float16 comes out as float32, as GDAL reads it */
                    CHECK(cf__codec_decode(ctx, &p, enc, n, out, 2 * len, &err) ==
                          CF_OK);
                    int bad = 0;
                    for (size_t i = 0; i < len / 2; i++) {
                        uint16_t hv;
                        uint32_t fv;
                        memcpy(&hv, native + 2 * i, 2);
                        memcpy(&fv, out + 4 * i, 4);
                        bad += fv != ref_half(hv);
                    }
                    CHECK(bad == 0);
                } else {
                    CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
                    CHECK(memcmp(out, native, len) == 0);
                }
                /* the exposed entry point does the same in place */
                memcpy(out, file, len);
                CHECK(cf__predictor_undo(&p, out, len, &err) == CF_OK);
                CHECK(memcmp(out, native, len) == 0);
            }
    /* predictor that cannot apply */
    cf__codec_params p = params(32946, 1, 64, 1, 1);
    p.predictor = 2;
    CHECK(cf__codec_decode(ctx, &p, enc, 10, out, 8, &err) == CF_E_UNSUPPORTED);
    CHECK(all_zero(out, 8));
    p = params(32946, 32, 4, 1, 1);
    p.predictor = 3; /* on integer data */
    CHECK(cf__codec_decode(ctx, &p, enc, 10, out, 16, &err) == CF_E_UNSUPPORTED);
    p.predictor = 7;
    CHECK(cf__codec_decode(ctx, &p, enc, 10, out, 16, &err) == CF_E_UNSUPPORTED);
    /* NONE ignores the Predictor tag, as libtiff does */
    p = params(1, 8, 4, 1, 1);
    p.predictor = 2;
    uint8_t raw[4] = {1, 2, 3, 4};
    CHECK(cf__codec_decode(ctx, &p, raw, 4, out, 4, &err) == CF_OK);
    CHECK(memcmp(out, raw, 4) == 0);
    libdeflate_free_compressor(c);
    free(vals);
    free(file);
    free(enc);
    free(out);
    free(native);
}

static void test_params(cf__codec_ctx *ctx) {
    cf_error err;
    uint8_t out[64];
    cf__codec_params p = params(1, 8, 4, 4, 1);
    CHECK(cf__codec_chunk_bytes(&p) == 16);
    p.bits = 1;
    p.width = 9;
    CHECK(cf__codec_chunk_bytes(&p) == 8); /* 2 bytes per row */
    p = params(1, 64, 1u << 24, 1u << 24, 4096);
    CHECK(cf__codec_chunk_bytes(&p) == 0);
    p = params(1, 8, 0, 4, 1);
    CHECK(cf__codec_chunk_bytes(&p) == 0);
    p = params(1, 8, 4, 4, 1);
    memset(out, 9, sizeof out);
    CHECK(cf__codec_decode(ctx, &p, out, 64, out, 15, &err) == CF_E_ARG);
    p = params(12345, 8, 4, 4, 1);
    CHECK(cf__codec_decode(ctx, &p, out, 64, out, 16, &err) == CF_E_UNSUPPORTED);
    p = params(1, 40, 4, 1, 1); /* no GDAL type has 40 bits */
    CHECK(cf__codec_decode(ctx, &p, out, 64, out, 20, &err) == CF_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "40-bit"));
    p = params(1, 8, 4, 1, 1);
    p.sample_format = 3; /* float of 8 bits */
    CHECK(cf__codec_decode(ctx, &p, out, 64, out, 4, &err) == CF_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "floating-point samples of 8 bits"));
    p = params(7, 1, 8, 1, 1); /* JPEG cannot carry 1-bit data */
    CHECK(cf__codec_decode(ctx, &p, out, 64, out, 1, &err) == CF_E_UNSUPPORTED);
    CHECK(cf__codec_supported(1, 0) && cf__codec_supported(5, 0) &&
          cf__codec_supported(8, 0) && cf__codec_supported(32946, 0) &&
          cf__codec_supported(32773, 0) && cf__codec_supported(50000, 0));
#ifdef CF_HAVE_JPEG
    CHECK(cf__codec_supported(6, 0)); /* old-style JPEG (ojpeg.c) */
#else
    CHECK(!cf__codec_supported(6, 0));
#endif
    CHECK(!cf__codec_supported(34712, 0));
#ifdef CF_HAVE_LERC
    CHECK(cf__codec_supported(34887, 2) && !cf__codec_supported(34887, 3));
#else
    CHECK(!cf__codec_supported(34887, 0));
#endif
    CHECK(cf__codec_decode(NULL, &p, out, 64, out, 16, &err) == CF_E_ARG);
    /* without an error struct the status is still the codec's */
    p = params(5, 8, 4, 4, 1);
    uint8_t one = 0x80;
    CHECK(cf__codec_decode(ctx, &p, &one, 1, out, 16, NULL) == CF_E_CODEC);
}

#ifdef CF_HAVE_LERC
static void test_lerc(cf__codec_ctx *ctx) {
    cf_error err;
    const int w = 64, h = 32;
    float *f = malloc(sizeof(float) * w * h * 3), *out = malloc(sizeof(float) * w * h * 4);
    uint8_t *blob = malloc(1 << 20), *enc = malloc(1 << 20);
    for (int i = 0; i < w * h * 3; i++) f[i] = (float)(i % 97) * 0.5f - 3.0f;
    unsigned nb = 0;
    CHECK(lerc_encode(f, 6, 3, w, h, 1, 0, NULL, 0.0, blob, 1 << 20, &nb) == 0);
    size_t len = sizeof(float) * w * h * 3;
    for (int sub = 0; sub < 3; sub++) {
        const uint8_t *src = blob;
        size_t n = nb;
        if (sub == 1) {
            struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
            n = libdeflate_zlib_compress(c, blob, nb, enc, 1 << 20);
            libdeflate_free_compressor(c);
            src = enc;
        } else if (sub == 2) {
            n = ZSTD_compress(enc, 1 << 20, blob, nb, 3);
            src = enc;
        }
        cf__codec_params p = params(34887, 32, w, h, 3);
        p.sample_format = 3;
        p.lerc_sub = (uint16_t)sub;
        CHECK(cf__codec_decode(ctx, &p, src, n, (uint8_t *)out, len, &err) == CF_OK);
        CHECK(memcmp(f, out, len) == 0);
        /* header contradicting the tags: wrong width, wrong type, wrong bands */
        p.width = w / 2;
        memset(out, 1, len / 2);
        CHECK(cf__codec_decode(ctx, &p, src, n, (uint8_t *)out, len / 2, &err) ==
              CF_E_FORMAT);
        CHECK(all_zero((uint8_t *)out, len / 2));
        p.width = w;
        p.sample_format = 1;
        CHECK(cf__codec_decode(ctx, &p, src, n, (uint8_t *)out, len, &err) ==
              CF_E_FORMAT);
        p.sample_format = 3;
        p.samples = 4;
        CHECK(cf__codec_decode(ctx, &p, src, n, (uint8_t *)out, len / 3 * 4, &err) ==
              CF_E_FORMAT);
        p.samples = 3;
        CHECK(cf__codec_decode(ctx, &p, src, n - 7, (uint8_t *)out, len, &err) != CF_OK);
    }
    /* float with a mask: invalid pixels read as NaN (libtiff's choice) */
    uint8_t *valid = malloc((size_t)w * h);
    for (int i = 0; i < w * h; i++) valid[i] = (uint8_t)(i % 5 != 0);
    CHECK(lerc_encode(f, 6, 1, w, h, 1, 1, valid, 0.0, blob, 1 << 20, &nb) == 0);
    cf__codec_params p = params(34887, 32, w, h, 1);
    p.sample_format = 3;
    CHECK(cf__codec_decode(ctx, &p, blob, nb, (uint8_t *)out, len / 3, &err) == CF_OK);
    int bad = 0;
    for (int i = 0; i < w * h; i++) {
        if (valid[i] ? out[i] != f[i] : out[i] == out[i]) bad++;
    }
    CHECK(bad == 0);
    /* uint8 with an alpha band carried as the LERC mask */
    uint8_t *rgb = malloc((size_t)w * h * 3), *rgba = malloc((size_t)w * h * 4);
    for (int i = 0; i < w * h * 3; i++) rgb[i] = (uint8_t)(i * 7);
    CHECK(lerc_encode(rgb, 1, 3, w, h, 1, 1, valid, 0.0, blob, 1 << 20, &nb) == 0);
    p = params(34887, 8, w, h, 4);
    CHECK(cf__codec_decode(ctx, &p, blob, nb, rgba, (size_t)w * h * 4, &err) == CF_OK);
    bad = 0;
    for (int i = 0; i < w * h; i++) {
        if (rgba[i * 4 + 3] != (valid[i] ? 255 : 0)) bad++;
        if (valid[i] && memcmp(rgba + i * 4, rgb + i * 3, 3)) bad++;
    }
    CHECK(bad == 0);
    /* outer-layer bomb: deflate expanding far past the cap */
    uint8_t *zeros = calloc(1, 4 << 20);
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    size_t n = libdeflate_zlib_compress(c, zeros, 4 << 20, enc, 1 << 20);
    libdeflate_free_compressor(c);
    p = params(34887, 8, 16, 16, 1);
    p.lerc_sub = 1;
    CHECK(cf__codec_decode(ctx, &p, enc, n, rgba, 256, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "expands") != NULL);
    CHECK(all_zero(rgba, 256));
    /* garbage blob */
    p.lerc_sub = 0;
    CHECK(cf__codec_decode(ctx, &p, zeros, 300, rgba, 256, &err) == CF_E_CODEC);
    free(zeros);
    free(valid);
    free(rgb);
    free(rgba);
    free(f);
    free(out);
    free(blob);
    free(enc);
}
#endif

#ifdef CF_HAVE_WEBP
static void test_webp(cf__codec_ctx *ctx) {
    cf_error err;
    const int w = 48, h = 40;
    uint8_t *rgba = malloc((size_t)w * h * 4), *out = malloc((size_t)w * h * 4);
    /* alpha never 0: lossless WebP may rewrite colours under alpha 0 */
    for (int i = 0; i < w * h * 4; i++)
        rgba[i] = (uint8_t)(i % 4 == 3 ? 0x80 | i : i * 13 / 7);
    for (int spp = 3; spp <= 4; spp++) {
        uint8_t *enc = NULL;
        size_t n = spp == 4 ? WebPEncodeLosslessRGBA(rgba, w, h, w * 4, &enc)
                            : WebPEncodeLosslessRGB(rgba, w, h, w * 3, &enc);
        CHECK(n > 0);
        cf__codec_params p = params(50001, 8, w, h, (uint32_t)spp);
        size_t len = (size_t)w * h * spp;
        CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
        CHECK(memcmp(out, rgba, len) == 0);
        p.height = h - 1;
        CHECK(cf__codec_decode(ctx, &p, enc, n, out, len - (size_t)w * spp, &err) ==
              CF_E_FORMAT);
        p.height = h;
        CHECK(cf__codec_decode(ctx, &p, enc, n / 2, out, len, &err) == CF_E_CODEC);
        CHECK(all_zero(out, len));
        WebPFree(enc);
    }
    cf__codec_params p = params(50001, 8, w, h, 1);
    CHECK(cf__codec_decode(ctx, &p, rgba, 100, out, (size_t)w * h, &err) ==
          CF_E_UNSUPPORTED);
    free(rgba);
    free(out);
}
#endif

#ifdef CF_HAVE_JPEG
/* Encode an abbreviated JPEG pair the way libtiff writes it: tables in one
 * stream (JPEGTables), the image without tables in the other. */
static void jpeg_encode(const uint8_t *px, int w, int h, int comps, int ycbcr,
                        uint8_t **tables, unsigned long *tlen, uint8_t **img,
                        unsigned long *ilen) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = comps;
    ci.in_color_space = comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    if (comps == 3 && !ycbcr) {
        jpeg_set_colorspace(&ci, JCS_RGB);
    }
    jpeg_set_quality(&ci, 90, TRUE);
    *tables = NULL;
    *tlen = 0;
    jpeg_mem_dest(&ci, tables, tlen);
    jpeg_write_tables(&ci);
    *img = NULL;
    *ilen = 0;
    jpeg_mem_dest(&ci, img, ilen);
    jpeg_suppress_tables(&ci, TRUE);
    jpeg_start_compress(&ci, FALSE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW r = (JSAMPROW)(px + (size_t)ci.next_scanline * w * comps);
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
}

/* A complete (non-abbreviated) grayscale JPEG; progressive with libjpeg's
 * simple script, or with one scan per coefficient and bit (about 700
 * scans) when many_scans is set. */
static void jpeg_encode_progressive(const uint8_t *px, int w, int h,
                                    int many_scans, uint8_t **img,
                                    unsigned long *ilen) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    static jpeg_scan_info scans[1 + 63 * 11];
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 1;
    ci.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    if (many_scans) {
        int n = 0;
        scans[n++] = (jpeg_scan_info){1, {0}, 0, 0, 0, 0};
        for (int k = 1; k < 64; k++) {
            scans[n++] = (jpeg_scan_info){1, {0}, k, k, 0, 10};
            for (int al = 9; al >= 0; al--)
                scans[n++] = (jpeg_scan_info){1, {0}, k, k, al + 1, al};
        }
        ci.scan_info = scans;
        ci.num_scans = n;
    } else {
        jpeg_simple_progression(&ci);
    }
    *img = NULL;
    *ilen = 0;
    jpeg_mem_dest(&ci, img, ilen);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW r = (JSAMPROW)(px + (size_t)ci.next_scanline * w);
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
}

/* Old-style JPEG: the header tiff.c builds (SOF first) in front of a
 * strip's entropy data.  One flat 16x16 MCU of YCbCr 2x2: every block's DC
 * and AC are one 2-bit code each (category 0, end of block), so 3 zero
 * bytes code Y = Cb = Cr = 128, which libtiff's YCbCr-to-RGB makes 128. */
static void test_ojpeg(cf__codec_ctx *ctx) {
    static const uint8_t hdr[] = {
        0xFF, 0xD8,
        0xFF, 0xC0, 0, 17, 8, 0, 16, 0, 16, 3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0,
        0xFF, 0xDB, 0, 67, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        0xFF, 0xC4, 0, 20, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0xFF, 0xC4, 0, 20, 0x10, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0xFF, 0xDA, 0, 12, 3, 1, 0, 2, 0, 3, 0, 0, 63, 0};
    cf_error err;
    uint8_t data[3] = {0, 0, 0}, out[16 * 16 * 3];
    cf__codec_params p = params(6, 8, 16, 16, 3);
    p.photometric = 6;
    p.color = CF_COLOR_YCBCR;
    p.ycbcr_sub_h = p.ycbcr_sub_v = 2;
    p.strip = 1;
    const float coef[3] = {0.299f, 0.587f, 0.114f};
    const float refbw[6] = {0, 255, 128, 255, 128, 255};
    memcpy(p.ycbcr_coef, coef, sizeof coef);
    memcpy(p.ref_bw, refbw, sizeof refbw);
    /* no header: refused (the TIFF layer always makes one) */
    CHECK(cf__codec_check(&p, &err) == CF_E_UNSUPPORTED);
    p.jpeg_tables = hdr;
    p.jpeg_tables_len = sizeof hdr;
    CHECK(cf__codec_check(&p, &err) == CF_OK);
    CHECK(cf__codec_chunk_bytes(&p) == sizeof out);
    CHECK(cf__codec_decode(ctx, &p, data, 3, out, sizeof out, &err) == CF_OK);
    int flat = 1;
    for (size_t i = 0; i < sizeof out; i++) flat &= out[i] == 128;
    CHECK(flat);
    /* fewer rows than the frame (a last strip): the SOF gets its height */
    p.height = 5;
    CHECK(cf__codec_decode(ctx, &p, data, 3, out, 16 * 5 * 3, &err) == CF_OK);
    CHECK(out[0] == 128 && out[16 * 5 * 3 - 1] == 128);
    p.height = 16;
    /* truncated or empty data is an error, never gray pixels */
    CHECK(cf__codec_decode(ctx, &p, data, 1, out, sizeof out, &err) == CF_E_CODEC);
    CHECK(cf__codec_decode(ctx, &p, data, 0, out, sizeof out, &err) == CF_E_CODEC);
    /* what the TIFF layer refuses comes through with its status */
    p.refuse = "old-style JPEG (OJPEG): tiled files are not read";
    p.refuse_code = CF_E_UNSUPPORTED;
    CHECK(cf__codec_check(&p, &err) == CF_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "tiled files"));
    p.refuse = NULL;
    /* raw YCbCr is not read (GDAL's GTIFF_RAW: refuses it too) */
    p.color = CF_COLOR_YCBCR_RAW;
    CHECK(cf__codec_check(&p, &err) == CF_E_UNSUPPORTED);
}

static void test_jpeg(cf__codec_ctx *ctx) {
    cf_error err;
    const int w = 64, h = 48;
    uint8_t *px = malloc((size_t)w * h * 3), *out = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * 3; x++) px[y * w * 3 + x] = (uint8_t)(x / 3 * 2 + 2 * y + x % 3 * 10);
    for (int mode = 0; mode < 3; mode++) { /* gray, RGB, YCbCr */
        int comps = mode ? 3 : 1;
        uint8_t *t, *im;
        unsigned long tl, il;
        jpeg_encode(px, w, h, comps, mode == 2, &t, &tl, &im, &il);
        cf__codec_params p = params(7, 8, w, h, (uint32_t)comps);
        p.photometric = mode == 2 ? 6 : mode == 1 ? 2 : 1;
        p.ycbcr_sub_h = p.ycbcr_sub_v = 2;
        p.jpeg_tables = t;
        p.jpeg_tables_len = tl;
        size_t len = (size_t)w * h * comps;
        CHECK(cf__codec_decode(ctx, &p, im, il, out, len, &err) == CF_OK);
        int maxd = 0;
        for (size_t i = 0; i < len; i++) {
            int d = abs((int)out[i] - (int)px[i]);
            if (d > maxd) maxd = d;
        }
        CHECK(maxd < 40); /* lossy, but the shape and colours are right */
        /* without tables the abbreviated stream cannot decode */
        p.jpeg_tables = NULL;
        p.jpeg_tables_len = 0;
        CHECK(cf__codec_decode(ctx, &p, im, il, out, len, &err) == CF_E_CODEC);
        CHECK(all_zero(out, len));
        /* JPEGTables of length 1, and garbage tables */
        uint8_t junk[64];
        memset(junk, 0x42, sizeof junk);
        p.jpeg_tables = junk;
        p.jpeg_tables_len = 1;
        CHECK(cf__codec_decode(ctx, &p, im, il, out, len, &err) == CF_E_CODEC);
        p.jpeg_tables_len = sizeof junk;
        CHECK(cf__codec_decode(ctx, &p, im, il, out, len, &err) == CF_E_CODEC);
        /* truncated stream: an error, not gray pixels */
        p.jpeg_tables = t;
        p.jpeg_tables_len = tl;
        CHECK(cf__codec_decode(ctx, &p, im, il / 2, out, len, &err) == CF_E_CODEC);
        CHECK(all_zero(out, len));
        /* size contradicting the tags */
        p.width = w * 2;
        uint8_t *big = malloc(len * 2);
        CHECK(cf__codec_decode(ctx, &p, im, il, big, len * 2, &err) == CF_E_FORMAT);
        free(big);
        p.width = w;
        if (mode == 2) { /* subsampling mismatch: stream is 2x2 */
            p.ycbcr_sub_h = p.ycbcr_sub_v = 1;
            CHECK(cf__codec_decode(ctx, &p, im, il, out, len, &err) == CF_E_FORMAT);
            CHECK(strstr(err.msg, "sampled") != NULL);
        }
        free(t);
        free(im);
    }
    /* progressive: a normal script decodes; ~700 scans hit the scan cap */
    for (int many = 0; many < 2; many++) {
        uint8_t *im;
        unsigned long il;
        jpeg_encode_progressive(px, 32, 16, many, &im, &il);
        cf__codec_params p = params(7, 8, 32, 16, 1);
        memset(out, 0x33, 512);
        cf_status st = cf__codec_decode(ctx, &p, im, il, out, 512, &err);
        if (many) {
            CHECK(st == CF_E_CODEC);
            CHECK(strstr(err.msg, "progressive scans") != NULL);
            CHECK(all_zero(out, 512));
        } else {
            CHECK(st == CF_OK);
            /* the same stream claiming 12-bit precision: unsupported */
            for (unsigned long k = 0; k + 4 < il; k++)
                if (im[k] == 0xff && (im[k + 1] == 0xc0 || im[k + 1] == 0xc2)) {
                    im[k + 4] = 12;
                    break;
                }
            CHECK(cf__codec_decode(ctx, &p, im, il, out, 512, &err) ==
                  CF_E_UNSUPPORTED);
        }
        free(im);
    }
    free(px);
    free(out);
}
#endif

/* ---- memory accounting ------------------------------------------------ */

/* Decode src as the reader does (the context's tile buffer as target) and
 * check that cf__codec_ctx_growth bounded what cf__codec_ctx_bytes grew by:
 * the loader charges its decode budget with that bound, so memory the
 * bound misses is memory over budget. */
static int decode_within(cf__codec_ctx *ctx, const cf__codec_params *p,
                         const uint8_t *src, size_t n) {
    cf_error err;
    uint64_t tile = cf__codec_chunk_bytes(p);
    uint64_t before = cf__codec_ctx_bytes(ctx), g = cf__codec_ctx_growth(ctx, p, tile, n);
    uint64_t fresh = cf__codec_ctx_growth(NULL, p, tile, n);
    uint8_t *dst = cf__codec_ctx_tile(ctx, (size_t)tile, &err);
    cf_status st = dst ? cf__codec_decode(ctx, p, src, n, dst, (size_t)tile, &err) : CF_E_NOMEM;
    uint64_t after = cf__codec_ctx_bytes(ctx);
    if (st != CF_OK) fprintf(stderr, "decode: %s\n", err.msg);
    if (after > before + g)
        fprintf(stderr, "compression %u: %llu bytes after, bound %llu + %llu\n",
                p->compression, (unsigned long long)after,
                (unsigned long long)before, (unsigned long long)g);
    return st == CF_OK && after <= before + g && g <= fresh && fresh >= after - before;
}

/* On a fresh context, after decoding `warm` (NULL: nothing) so that the
 * codec's state and the tile buffer are there already: decode_within p,
 * and cf__codec_ctx_bytes grew by at least the `scratch` bytes the decoder
 * holds on to for it. */
static int holds_scratch(const cf__codec_params *warm, const uint8_t *wsrc, size_t wn,
                         const cf__codec_params *p, const uint8_t *src, size_t n,
                         uint64_t scratch) {
    cf__codec_ctx *ctx = cf__codec_ctx_new();
    int ok = !warm || decode_within(ctx, warm, wsrc, wn);
    uint64_t before = cf__codec_ctx_bytes(ctx);
    ok = ok && decode_within(ctx, p, src, n);
    uint64_t held = cf__codec_ctx_bytes(ctx) - before;
    if (held < scratch)
        fprintf(stderr, "compression %u: context counts %llu more bytes, holds %llu\n",
                p->compression, (unsigned long long)held, (unsigned long long)scratch);
    cf__codec_ctx_free(ctx);
    return ok && held >= scratch;
}

static void test_accounting(void) {
    enum { W = 64, H = 48 };
    uint8_t *raw = malloc(W * H * 16), *enc = malloc(1 << 21), *enc2 = malloc(1 << 21);
    fill(raw, W * H * 16, 2);
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    /* deflate, 2 x uint16, predictor 2 */
    cf__codec_params pd = params(8, 16, W, H, 2);
    pd.predictor = 2;
    size_t nd = libdeflate_zlib_compress(c, raw, W * H * 4, enc, 1 << 21);
    /* zstd, float32, predictor 3 (a row of staging) */
    cf__codec_params pz = params(50000, 32, W, H, 1);
    pz.sample_format = 3;
    pz.predictor = 3;
    size_t nz = ZSTD_compress(enc2, 1 << 21, raw, W * H * 4, 3);
    /* a larger deflate tile: the tile buffer grows */
    cf__codec_params pb = params(32946, 8, 4 * W, 4 * H, 4);
    uint8_t *big = malloc((size_t)16 * W * H * 4), *encb = malloc(1 << 22);
    fill(big, (size_t)16 * W * H * 4, 1);
    size_t nb = libdeflate_zlib_compress(c, big, (size_t)16 * W * H * 4, encb, 1 << 22);
    /* 12-bit samples (staged, then unpacked), and a FillOrder 2 chunk
     * (its bits reversed into scratch first) */
    cf__codec_params p12 = params(8, 12, W, H, 1);
    size_t n12 = libdeflate_zlib_compress(c, raw, (size_t)cf__codec_stored_bytes(&p12), encb + (1 << 21), 1 << 21);
    cf__codec_params pf = pd;
    pf.fill_order = 2;
    uint8_t *encf = malloc(nd);
    cf__bits_reverse(enc, encf, nd);
    libdeflate_free_compressor(c);
    CHECK(nd && nz && nb && n12 && !ZSTD_isError(nz));
    cf__codec_ctx *ctx = cf__codec_ctx_new();
    CHECK(decode_within(ctx, &pd, enc, nd));
    CHECK(decode_within(ctx, &pz, enc2, nz));
    CHECK(decode_within(ctx, &pb, encb, nb));
    CHECK(decode_within(ctx, &pd, enc, nd));
    CHECK(decode_within(ctx, &p12, encb + (1 << 21), n12));
    CHECK(decode_within(ctx, &pf, encf, nd));
    cf__codec_ctx_free(ctx);
    /* the staging and the reversed input are counted, not only bounded */
    CHECK(holds_scratch(&pd, enc, nd, &p12, encb + (1 << 21), n12,
                        cf__codec_stored_bytes(&p12)));
    CHECK(holds_scratch(&pd, enc, nd, &pf, encf, nd, nd));
    /* FillOrder 2 with far more bytes than the chunk stores (an LZW
     * stream, then slack after its EOI): the reversed copy is the whole
     * input, which the growth bound takes from the chunk's byte count */
    cf__codec_params pl2 = params(5, 8, W, H, 1);
    pl2.fill_order = 2;
    uint8_t *encl2 = malloc((size_t)66 * W * H);
    size_t nl2 = lzw_encode(raw, W * H, encl2, 0, 1, NULL);
    memset(encl2 + nl2, 0x5a, 64 * W * H);
    cf__bits_reverse(encl2, encl2, nl2);
    ctx = cf__codec_ctx_new();
    CHECK(decode_within(ctx, &pl2, encl2, nl2 + 64 * W * H));
    cf__codec_ctx_free(ctx);
    free(encl2);
    free(encf);
#ifdef CF_HAVE_LERC
    /* LERC: float 3-band band-sequential with masks (aux staging), under
     * zstd and deflate outer layers, after and before the others */
    float *f = malloc(sizeof(float) * W * H * 3);
    uint8_t *valid = malloc((size_t)W * H * 3), *blob = malloc(1 << 20);
    for (int i = 0; i < W * H * 3; i++) f[i] = (float)(i % 89) * 0.25f;
    for (int i = 0; i < W * H * 3; i++) valid[i] = (uint8_t)(i % 7 != 0);
    unsigned nl = 0;
    CHECK(lerc_encode(f, 6, 1, W, H, 3, 3, valid, 0.0, blob, 1 << 20, &nl) == 0);
    uint8_t *encl = malloc(1 << 20);
    size_t nlz = ZSTD_compress(encl, 1 << 20, blob, nl, 3);
    cf__codec_params pl = params(34887, 32, W, H, 3);
    pl.sample_format = 3;
    pl.lerc_sub = 2;
    /* uint8 RGB with the alpha band carried as the LERC mask */
    uint8_t *rgb = malloc((size_t)W * H * 3), *blob8 = malloc(1 << 20);
    for (int i = 0; i < W * H * 3; i++) rgb[i] = (uint8_t)(i * 7);
    unsigned n8 = 0;
    CHECK(lerc_encode(rgb, 1, 3, W, H, 1, 1, valid, 0.0, blob8, 1 << 20, &n8) == 0);
    cf__codec_params p8 = params(34887, 8, W, H, 4);
    for (int order = 0; order < 2; order++) {
        ctx = cf__codec_ctx_new();
        if (order) CHECK(decode_within(ctx, &pb, encb, nb));
        CHECK(decode_within(ctx, &p8, blob8, n8));
        CHECK(decode_within(ctx, &pl, encl, nlz));
        CHECK(decode_within(ctx, &pd, enc, nd));
        pl.lerc_sub = 0;
        CHECK(decode_within(ctx, &pl, blob, nl));
        pl.lerc_sub = 2;
        cf__codec_ctx_free(ctx);
    }
    free(f);
    free(valid);
    free(blob);
    free(encl);
    free(rgb);
    free(blob8);
#endif
    CHECK(cf__codec_ctx_bytes(NULL) == 0);
    free(raw);
    free(enc);
    free(enc2);
    free(big);
    free(encb);
}

/* ---- issue 19: CCITT, LZMA, odd depths, float24, complex, colour ---- */

/* Bits written most significant first from strings of '0' and '1'. */
typedef struct bitw {
    uint8_t b[256];
    size_t n; /* bits */
} bitw;

static void put_bits(bitw *w, const char *bits) {
    for (; *bits; bits++) {
        if (*bits == ' ') continue;
        if (*bits == '1') w->b[w->n >> 3] |= (uint8_t)(0x80 >> (w->n & 7));
        w->n++;
    }
}

static void test_ccitt(cf__codec_ctx *ctx) {
    cf_error err;
    uint8_t out[4];
    /* Group 3 1-D, width 8: EOL, white 3 black 2 white 3; then EOL, white
     * 3 and an EOL too soon: the row is completed in white (libtiff). */
    bitw w = {{0}, 0};
    put_bits(&w, "000000000001 1000 11 1000");
    put_bits(&w, "000000000001 1000 000000000001");
    cf__codec_params p = params(3, 1, 8, 2, 1);
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18 && out[1] == 0x00);
    /* The same rows as RLE (Modified Huffman, rows on byte boundaries). */
    memset(&w, 0, sizeof w);
    put_bits(&w, "1000 11 000111 0000"); /* white 3, black 2, white 1; pad */
    put_bits(&w, "0111 11 0111");        /* white 2, black 2, white 2 */
    p = params(2, 1, 6, 2, 1);
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18); /* 000110.. */
    CHECK(out[1] == 0x30); /* 001100.. */
    /* Group 4, width 8: horizontal (white 3, black 2) then V0 to the end;
     * the second row repeats the first with three V0 codes. */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 1000 11 1");
    put_bits(&w, "1 1 1");
    p = params(4, 1, 8, 2, 1);
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18 && out[1] == 0x18);
    /* A row coded past the width (horizontal: white 0, black 10 in a row
     * of 8) is cleaned up as libtiff does: the black run is dropped, the
     * row is white, and the reference keeps a zero black run at 0 -- a
     * changing element: the next row's V0 V0 make it all black (libtiff
     * 4.5's TIFFReadEncodedStrip gives 00 ff; it was 00 00 here, and the
     * rows after fell out of step with libtiff's). */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 00110101 0000100");
    put_bits(&w, "1 1");
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x00 && out[1] == 0xff);
    /* its run ends are memory the loader's budget accounts for */
    CHECK(holds_scratch(NULL, NULL, 0, &p, w.b, (w.n + 7) / 8,
                        2 * (8 + 6) * sizeof(uint32_t)));
    /* ... and so are those of every CCITT scheme: RLE with rows on 16-bit
     * words (CCITTRLEW, 32771), the RLE rows above each padded to a word */
    memset(&w, 0, sizeof w);
    put_bits(&w, "1000 11 000111 0000");
    put_bits(&w, "0111 11 0111 000000");
    cf__codec_params pw = params(32771, 1, 6, 2, 1);
    CHECK(cf__codec_decode(ctx, &pw, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18 && out[1] == 0x30);
    CHECK(holds_scratch(NULL, NULL, 0, &pw, w.b, (w.n + 7) / 8,
                        2 * (6 + 6) * sizeof(uint32_t)));
    /* ... and vertical codes against it: VR1 VR1 (black 4..5), V0 */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 1000 11 1");
    put_bits(&w, "011 011 1");
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18 && out[1] == 0x0c);
    /* VL: black 1..2 from the reference's 3..4 (VL2 VL2), then V0 */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 1000 11 1");
    put_bits(&w, "000010 000010 1");
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18 && out[1] == 0x60);
    /* pass mode: row 2 all white passes the black run, V0 to the end */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 1000 11 1");
    put_bits(&w, "0001 1");
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18 && out[1] == 0x00);
    /* An end of block (EOL) before the last row is an error, zeroed. */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 1000 11 1");
    put_bits(&w, "000000000001 000000000001");
    memset(out, 0xee, sizeof out);
    CHECK(cf__codec_decode(ctx, &p, w.b, (w.n + 7) / 8, out, 2, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "end of block") && all_zero(out, 2));
    /* Uncompressed mode (2-D extension 0000001xxx) is not supported. */
    memset(&w, 0, sizeof w);
    put_bits(&w, "0000001 111");
    CHECK(cf__codec_decode(ctx, &p, w.b, 2, out, 2, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "uncompressed mode"));
    /* Data that ends before the rows do. */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 1000 11 1");
    CHECK(cf__codec_decode(ctx, &p, w.b, 1, out, 2, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "data ends"));
    /* FillOrder 2 on the same stream, bits reversed. */
    memset(&w, 0, sizeof w);
    put_bits(&w, "001 1000 11 1");
    put_bits(&w, "1 1 1");
    uint8_t rev[2];
    cf__bits_reverse(w.b, rev, 2);
    p.fill_order = 2;
    CHECK(cf__codec_decode(ctx, &p, rev, 2, out, 2, &err) == CF_OK);
    CHECK(out[0] == 0x18 && out[1] == 0x18);
    /* CCITT codes 1-bit images only. */
    p = params(4, 8, 8, 2, 1);
    CHECK(cf__codec_check(&p, &err) == CF_E_UNSUPPORTED);
    /* bit reversal itself */
    uint8_t r1[4] = {0x01, 0x80, 0xf0, 0x35}, r2[4];
    cf__bits_reverse(r1, r2, 4);
    CHECK(r2[0] == 0x80 && r2[1] == 0x01 && r2[2] == 0x0f && r2[3] == 0xac);
}

static void test_odd_depths(cf__codec_ctx *ctx) {
    cf_error err;
    uint8_t out[64];
    /* 12-bit: 3 values per row of 4.5 bytes (padded to 5) */
    uint8_t in12[10] = {0xAB, 0xCD, 0xEF, 0x12, 0x30, 0xFF, 0xF0, 0x01, 0x80, 0x00};
    cf__codec_params p = params(1, 12, 3, 2, 1);
    CHECK(cf__codec_chunk_bytes(&p) == 12 && cf__codec_stored_bytes(&p) == 10);
    CHECK(cf__codec_dtype(&p) == CF_DT_U16);
    CHECK(cf__codec_decode(ctx, &p, in12, 10, out, 12, &err) == CF_OK);
    uint16_t v[6];
    memcpy(v, out, 12);
    CHECK(v[0] == 0xABC && v[1] == 0xDEF && v[2] == 0x123);
    CHECK(v[3] == 0xFFF && v[4] == 0x001 && v[5] == 0x800);
    /* 4-bit, signed: an int8 of 0..15 as GDAL gives it */
    uint8_t in4[2] = {0x9F, 0x70};
    p = params(1, 4, 3, 1, 1);
    p.sample_format = 2;
    CHECK(cf__codec_dtype(&p) == CF_DT_I8);
    CHECK(cf__codec_decode(ctx, &p, in4, 2, out, 3, &err) == CF_OK);
    CHECK(out[0] == 9 && out[1] == 15 && out[2] == 7);
    /* 24-bit: the bit stream of the bytes, swabbed first in a big-endian
     * file (GDAL's reading) */
    uint8_t in24[3] = {0x01, 0x02, 0x03};
    p = params(1, 24, 1, 1, 1);
    CHECK(cf__codec_decode(ctx, &p, in24, 3, out, 4, &err) == CF_OK);
    uint32_t u;
    memcpy(&u, out, 4);
    CHECK(u == 0x010203);
    p.big_endian = 1;
    CHECK(cf__codec_decode(ctx, &p, in24, 3, out, 4, &err) == CF_OK);
    memcpy(&u, out, 4);
    CHECK(u == 0x030201);
    /* float24: 1.0 (exponent 63), -2.5, and a denormal, native order */
    uint8_t f24[9] = {0x00, 0x00, 0x3f, 0x00, 0x40, 0xc0, 0x01, 0x00, 0x00};
    p = params(1, 24, 3, 1, 1);
    p.sample_format = 3;
    CHECK(cf__codec_dtype(&p) == CF_DT_F32);
    CHECK(cf__codec_decode(ctx, &p, f24, 9, out, 12, &err) == CF_OK);
    float f[3];
    memcpy(f, out, 12);
    CHECK(f[0] == 1.0f && f[1] == -2.5f && f[2] == ldexpf(1.0f, -78));
    /* 40 bits and 2-bit predictor 2 are refused */
    p = params(8, 12, 8, 1, 1);
    p.predictor = 2;
    CHECK(cf__codec_check(&p, &err) == CF_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "horizontal predictor with 12-bit"));
}

static void test_complex(cf__codec_ctx *ctx) {
    cf_error err;
    /* CInt16 in a big-endian file: each part swabbed on its own */
    uint8_t be[8] = {0x00, 0x01, 0xff, 0xfe, 0x12, 0x34, 0x80, 0x00};
    uint8_t out[16];
    cf__codec_params p = params(1, 32, 2, 1, 1);
    p.sample_format = 5;
    p.big_endian = 1;
    CHECK(cf__codec_dtype(&p) == CF_DT_CI16);
    CHECK(cf__codec_decode(ctx, &p, be, 8, out, 8, &err) == CF_OK);
    int16_t v[4];
    memcpy(v, out, 8);
    CHECK(v[0] == 1 && v[1] == -2 && v[2] == 0x1234 && v[3] == -32768);
    /* widened to complex64 in place, exactly */
    uint8_t buf[16];
    memcpy(buf, out, 8);
    cf_complex_widen(CF_DT_CI16, buf, buf, 2);
    float c[4];
    memcpy(c, buf, 16);
    CHECK(c[0] == 1.0f && c[1] == -2.0f && c[2] == 4660.0f && c[3] == -32768.0f);
    CHECK(cf_dtype_complex_float(CF_DT_CI32) == CF_DT_CF64);
    CHECK(cf_dtype_size(CF_DT_CF64) == 16 && cf_dtype_is_complex(CF_DT_CF32));
    CHECK(!strcmp(cf_dtype_name(CF_DT_CI16), "complex_int16"));
    /* CFloat64: 128 bits, swabbed as two doubles */
    p = params(1, 128, 1, 1, 1);
    p.sample_format = 6;
    CHECK(cf__codec_dtype(&p) == CF_DT_CF64);
    p.sample_format = 5; /* no complex integer of 128 bits */
    CHECK(cf__codec_check(&p, &err) == CF_E_UNSUPPORTED);
}

#ifdef CF_HAVE_LZMA
#include <lzma.h>
static void test_lzma(cf__codec_ctx *ctx) {
    cf_error err;
    size_t len = 64 * 64 * 2;
    uint8_t *in = malloc(len), *enc = malloc(2 * len + 1024), *out = malloc(len);
    fill(in, len, 2);
    size_t n = 0;
    CHECK(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, in, len, enc, &n,
                                  2 * len + 1024) == LZMA_OK);
    cf__codec_params p = params(34925, 16, 64, 64, 1);
    for (int k = 0; k < 2; k++) { /* the context's stream is reused */
        CHECK(cf__codec_decode(ctx, &p, enc, n, out, len, &err) == CF_OK);
        CHECK(memcmp(in, out, len) == 0);
    }
    memcpy(enc + n, "junk", 4); /* after the stream's end: ignored */
    CHECK(cf__codec_decode(ctx, &p, enc, n + 4, out, len, &err) == CF_OK);
    memset(out, 1, len);
    CHECK(cf__codec_decode(ctx, &p, enc, n / 2, out, len, &err) == CF_E_CODEC);
    CHECK(all_zero(out, len));
    CHECK(cf__codec_decode(ctx, &p, in, 100, out, len, &err) == CF_E_CODEC);
    CHECK(strstr(err.msg, "LZMA") && strstr(err.msg, ".xz"));
    free(in);
    free(enc);
    free(out);
}
#endif

static void test_color_checks(cf__codec_ctx *ctx) {
    cf_error err;
    uint16_t color = 99;
    cf__color_tags t = {5, 1, 8, 1, 4, 0, 1, 1}; /* CMYK */
    CHECK(cf__codec_color(&t, 0, &color, &err) == CF_OK && color == CF_COLOR_CMYK);
    CHECK(cf__codec_color(&t, 1, &color, &err) == CF_OK && color == CF_COLOR_RAW);
    t.planar = 2;
    CHECK(cf__codec_color(&t, 0, &color, &err) == CF_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "band-interleaved 8-bit CMYK"));
    t = (cf__color_tags){6, 5, 8, 1, 3, 0, 1, 1}; /* YCbCr in LZW */
    CHECK(cf__codec_color(&t, 0, &color, &err) == CF_OK && color == CF_COLOR_YCBCR);
    CHECK(cf__codec_color(&t, 1, &color, &err) == CF_OK && color == CF_COLOR_YCBCR_RAW);
    t.compression = 7; /* JPEG converts it itself */
    CHECK(cf__codec_color(&t, 0, &color, &err) == CF_OK && color == CF_COLOR_RAW);
    t = (cf__color_tags){6, 1, 16, 1, 3, 0, 1, 1};
    CHECK(cf__codec_color(&t, 0, &color, &err) == CF_E_UNSUPPORTED);
    t = (cf__color_tags){8, 1, 8, 1, 3, 0, 1, 1}; /* CIELab */
    CHECK(cf__codec_color(&t, 0, &color, &err) == CF_OK && color == CF_COLOR_LAB);
    t.bits = 16;
    CHECK(cf__codec_color(&t, 0, &color, &err) == CF_OK && color == CF_COLOR_RAW);
    /* a zero white point is refused as libtiff refuses it */
    cf__codec_params p = params(1, 8, 4, 4, 3);
    p.color = CF_COLOR_LAB;
    p.white_point[0] = 0.3f;
    CHECK(cf__codec_check(&p, &err) == CF_E_FORMAT);
    /* CMYK -> RGBA arithmetic: R = (255-K)(255-C)/255 */
    p = params(1, 8, 1, 1, 4);
    p.color = CF_COLOR_CMYK;
    uint8_t cmyk[4] = {100, 0, 255, 50}, rgba[4];
    CHECK(cf__codec_decode(ctx, &p, cmyk, 4, rgba, 4, &err) == CF_OK);
    CHECK(rgba[0] == 205 * 155 / 255 && rgba[1] == 205 && rgba[2] == 0 && rgba[3] == 255);
}

/* cf__codec_decode_rows: the first rows of a DEFLATE / LZW strip (16-bit,
 * big-endian, horizontal predictor) are exactly the first rows of the whole
 * decode; rows not rounded to 32, and codecs that cannot stop, are refused;
 * a corrupt stream after the rows asked for is not met. */
static void test_decode_rows(cf__codec_ctx *ctx) {
    cf_error err;
    const uint32_t w = 45, h = 200, spp = 2;
    size_t nv = (size_t)w * h * spp, len = nv * 2;
    uint64_t *vals = malloc(sizeof(uint64_t) * nv);
    uint8_t *file = malloc(len), *enc = malloc(4 * len + 1024), *full = malloc(len),
            *part = malloc(len);
    for (size_t i = 0; i < nv; i++) vals[i] = rnd() & 0xffff;
    forward_pred2(vals, file, w, h, spp, 2, 1);
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    for (int codec = 0; codec < 2; codec++) {
        size_t n = codec ? lzw_encode(file, len, enc, 0, 1, NULL)
                         : libdeflate_zlib_compress(c, file, len, enc, 4 * len + 1024);
        cf__codec_params p = params(codec ? 5 : 8, 16, w, h, spp);
        p.predictor = 2;
        p.big_endian = 1;
        CHECK(cf__codec_can_stop(&p));
        CHECK(cf__codec_decode(ctx, &p, enc, n, full, len, &err) == CF_OK);
        CHECK(cf__codec_stop_rows(&p, 1) == 32 && cf__codec_stop_rows(&p, 190) == 192 &&
              cf__codec_stop_rows(&p, 193) == h);
        size_t row = (size_t)w * spp * 2;
        CHECK(cf__codec_decode_rows(ctx, &p, 64, enc, n, part, 64 * row, &err) == CF_OK);
        CHECK(memcmp(part, full, 64 * row) == 0);
        /* the stream cut after a third: the first 32 rows still decode */
        CHECK(cf__codec_decode_rows(ctx, &p, 32, enc, n / 3, part, 32 * row, &err) == CF_OK);
        CHECK(memcmp(part, full, 32 * row) == 0);
        CHECK(cf__codec_decode(ctx, &p, enc, n / 3, full, len, &err) == CF_E_CODEC);
        CHECK(cf__codec_decode_rows(ctx, &p, 40, enc, n, part, 40 * row, &err) == CF_E_ARG);
    }
    cf__codec_params z = params(34887, 16, w, h, spp); /* LERC: whole blobs */
    CHECK(!cf__codec_can_stop(&z));
    CHECK(cf__codec_decode_rows(ctx, &z, 32, enc, 10, part, 32 * (size_t)w * spp * 2, &err) ==
          CF_E_ARG);
    libdeflate_free_compressor(c);
    free(vals);
    free(file);
    free(enc);
    free(full);
    free(part);
}

/* ZSTD through its first rows (zstd.c's buffer-less path): a 512 x 512
 * uint16 tile with the horizontal predictor, as one frame of 128 KiB
 * blocks, as one frame of small blocks (the rows' end then falls in a run
 * of blocks decoded into the context's zblock buffer, each referring back
 * across the switch), and as two frames; every row count gives exactly the
 * first rows of the whole decode.  The stream may end, or be corrupt,
 * after the block holding the last row asked for; ending before it is an
 * error.  Whether stopping pays: always for ZSTD, up to 2/5 for DEFLATE. */
static void test_decode_rows_zstd(cf__codec_ctx *ctx) {
    cf_error err;
    const uint32_t w = 512, h = 512;
    size_t nv = (size_t)w * h, len = nv * 2, row = (size_t)w * 2;
    uint64_t *vals = malloc(sizeof(uint64_t) * nv);
    uint8_t *file = malloc(len), *full = malloc(len), *part = malloc(len);
    size_t cap = ZSTD_compressBound(len) + 64;
    uint8_t *enc = malloc(2 * cap);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            vals[(size_t)y * w + x] = (uint64_t)(1000 + 3 * x + 2 * y + (rnd() & 15)) & 0xffff;
    forward_pred2(vals, file, w, h, 1, 2, 0);
    cf__codec_params p = params(50000, 16, w, h, 1);
    p.predictor = 2;
    CHECK(cf__codec_can_stop(&p));
    CHECK(cf__codec_stop_pays(&p, 1) && cf__codec_stop_pays(&p, 480) &&
          !cf__codec_stop_pays(&p, 481) && !cf__codec_stop_pays(&p, h));
    cf__codec_params dfl = p;
    dfl.compression = 8;
    CHECK(cf__codec_stop_pays(&dfl, 204) && !cf__codec_stop_pays(&dfl, 205));
    for (int form = 0; form < 3; form++) {
        size_t n;
        if (form == 0) {
            n = ZSTD_compress(enc, cap, file, len, 9);
        } else if (form == 1) {
            ZSTD_CCtx *cc = ZSTD_createCCtx();
            ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 9);
            ZSTD_CCtx_setParameter(cc, ZSTD_c_targetCBlockSize, 1340);
            n = ZSTD_compress2(cc, enc, cap, file, len);
            ZSTD_freeCCtx(cc);
        } else {
            n = ZSTD_compress(enc, cap, file, len / 2, 9);
            n += ZSTD_compress(enc + n, cap, file + len / 2, len / 2, 9);
        }
        CHECK(!ZSTD_isError(n));
        CHECK(cf__codec_decode(ctx, &p, enc, n, full, len, &err) == CF_OK);
        for (uint32_t rows = 32; rows < h; rows += 32) {
            memset(part, 0xee, len);
            CHECK(cf__codec_decode_rows(ctx, &p, rows, enc, n, part, rows * row, &err) == CF_OK);
            CHECK(memcmp(part, full, rows * row) == 0);
        }
        /* a stream that ends, or is corrupt, after the rows asked for */
        size_t cut = form == 2 ? n / 2 + 64 : n * 3 / 4;
        uint8_t keep = enc[n - 8];
        enc[n - 8] ^= 0x5a;
        CHECK(cf__codec_decode_rows(ctx, &p, 64, enc, cut, part, 64 * row, &err) == CF_OK);
        CHECK(memcmp(part, full, 64 * row) == 0);
        enc[n - 8] = keep;
        CHECK(cf__codec_decode_rows(ctx, &p, 480, enc, n / 8, part, 480 * row, &err) ==
              CF_E_CODEC);
    }
    free(vals);
    free(file);
    free(full);
    free(part);
    free(enc);
}

/* cf__codec_encode then cf__codec_decode gives the samples back, bit for
 * bit, for every codec and predictor the writer writes, 8- to 64-bit,
 * integer and float, 1 and 3 samples per pixel, odd widths; what it
 * cannot write is refused with CF_E_UNSUPPORTED, a wrong size or a
 * predictor without compression with CF_E_ARG. */
static void test_encode_round_trip(cf__codec_ctx *ctx) {
    cf_error err;
    cf__encoder *e = cf__encoder_new();
    CHECK(e != NULL);
    const uint16_t comps[] = {1, 8, 50000};
    const struct { uint16_t bits, fmt, pred; } kinds[] = {
        {8, 1, 1}, {8, 1, 2}, {16, 1, 2}, {16, 2, 2}, {32, 1, 2}, {64, 1, 2},
        {32, 3, 1}, {32, 3, 3}, {64, 3, 3},
    };
    for (size_t c = 0; c < sizeof comps / sizeof *comps; c++)
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
            for (uint32_t spp = 1; spp <= 3; spp += 2) {
                const uint32_t w = 37, h = 11;
                cf__codec_params p = params(comps[c], kinds[k].bits, w, h, spp);
                p.sample_format = kinds[k].fmt;
                p.predictor = kinds[k].pred;
                size_t len = (size_t)cf__codec_chunk_bytes(&p);
                if (comps[c] == 1 && p.predictor != 1) {
                    /* a predictor goes with a compression (libtiff's rule) */
                    const uint8_t *o;
                    size_t on;
                    uint8_t *z = calloc(1, len);
                    CHECK(cf__codec_encode(e, &p, NULL, z, len, &o, &on, &err) == CF_E_ARG);
                    free(z);
                    continue;
                }
                uint8_t *src = malloc(len), *back = malloc(len);
                for (size_t i = 0; i < len; i++) src[i] = (uint8_t)(rnd() >> 3);
                if (kinds[k].fmt == 3 && kinds[k].bits == 32) /* smooth floats */
                    for (size_t i = 0; i < len / 4; i++) {
                        float f = (float)(i % 97) * 0.25f - 3.0f;
                        memcpy(src + 4 * i, &f, 4);
                    }
                const uint8_t *enc = NULL;
                size_t n = 0;
                CHECK(cf__codec_encode(e, &p, NULL, src, len, &enc, &n, &err) == CF_OK);
                CHECK(n > 0);
                CHECK(cf__codec_decode(ctx, &p, enc, n, back, len, &err) == CF_OK);
                CHECK(memcmp(src, back, len) == 0);
                CHECK(cf__codec_encode(e, &p, NULL, src, len - 1, &enc, &n, &err) == CF_E_ARG);
                free(src);
                free(back);
            }
    cf__codec_params bad = params(5, 16, 8, 8, 1); /* LZW: not written */
    uint8_t buf[128] = {0};
    const uint8_t *enc;
    size_t n;
    CHECK(!cf__codec_can_encode(5) && cf__codec_can_encode(50000));
    CHECK(cf__codec_encode(e, &bad, NULL, buf, 128, &enc, &n, &err) == CF_E_UNSUPPORTED);
    bad = params(8, 16, 8, 8, 1);
    bad.predictor = 3; /* floating point predictor on integers */
    CHECK(cf__codec_encode(e, &bad, NULL, buf, 128, &enc, &n, &err) == CF_E_UNSUPPORTED);
    cf__encoder_free(e);
}

#if defined(CF_HAVE_LERC) && defined(CF_HAVE_JPEG) && defined(CF_HAVE_WEBP)
/* The LERC, JPEG and WEBP encoders: LERC lossless gives the samples back
 * bit for bit (a float NaN as NaN), within max_error when lossy; WEBP
 * lossless bit for bit; JPEG and lossy WEBP decode back close to the
 * input; what a codec cannot take, and a predictor, are refused. */
static void test_encode_lossy_and_lerc(cf__codec_ctx *ctx) {
    cf_error err;
    cf__encoder *e = cf__encoder_new();
    const uint32_t w = 64, h = 48;
    for (uint16_t sub = 0; sub <= 2; sub++)
        for (uint32_t spp = 1; spp <= 3; spp += 2) {
            cf__codec_params p = params(34887, 32, w, h, spp);
            p.sample_format = 3;
            p.lerc_sub = sub;
            size_t len = (size_t)cf__codec_chunk_bytes(&p);
            float *src = malloc(len), *back = malloc(len);
            for (size_t i = 0; i < len / 4; i++) src[i] = (float)(i % 61) * 0.37f - 5.0f;
            src[7 * spp] = __builtin_nanf(""); /* one sample: a mask per band */
            const uint8_t *enc;
            size_t n;
            CHECK(cf__codec_encode(e, &p, NULL, (uint8_t *)src, len, &enc, &n, &err) == CF_OK);
            CHECK(cf__codec_decode(ctx, &p, enc, n, (uint8_t *)back, len, &err) == CF_OK);
            for (size_t i = 0; i < len / 4; i++)
                CHECK(isnan(src[i]) ? isnan(back[i]) : src[i] == back[i]);
            cf__encode_opts o = {0, 0.25, 0, 0};
            CHECK(cf__codec_encode(e, &p, &o, (uint8_t *)src, len, &enc, &n, &err) == CF_OK);
            CHECK(cf__codec_decode(ctx, &p, enc, n, (uint8_t *)back, len, &err) == CF_OK);
            for (size_t i = 0; i < len / 4; i++)
                CHECK(isnan(src[i]) ? isnan(back[i]) : fabsf(src[i] - back[i]) <= 0.25f + 1e-5f);
            free(src);
            free(back);
        }
    for (int webp = 0; webp <= 1; webp++)
        for (int lossless = 0; lossless <= webp; lossless++) {
            uint32_t spp = webp ? 4 : 3;
            cf__codec_params p = params(webp ? 50001 : 7, 8, w, h, spp);
            if (!webp) p.photometric = 6, p.ycbcr_sub_h = p.ycbcr_sub_v = 2;
            size_t len = (size_t)cf__codec_chunk_bytes(&p);
            uint8_t *src = malloc(len), *back = malloc(len);
            for (size_t i = 0; i < len; i++) src[i] = (uint8_t)(100 + (i / spp) % 50 + i % spp);
            cf__encode_opts o = {0, 0, 0, lossless};
            const uint8_t *enc;
            size_t n;
            CHECK(cf__codec_encode(e, &p, &o, src, len, &enc, &n, &err) == CF_OK);
            CHECK(cf__codec_decode(ctx, &p, enc, n, back, len, &err) == CF_OK);
            double sum = 0;
            for (size_t i = 0; i < len; i++) sum += fabs((double)src[i] - back[i]);
            CHECK(lossless ? sum == 0 : sum / (double)len < 4.0);
            free(src);
            free(back);
        }
    uint8_t buf[64 * 48 * 8] = {0};
    const uint8_t *enc;
    size_t n;
    cf__codec_params bad = params(7, 16, w, h, 1); /* JPEG of 16 bits */
    CHECK(cf__codec_encode(e, &bad, NULL, buf, (size_t)cf__codec_chunk_bytes(&bad), &enc, &n,
                           &err) == CF_E_UNSUPPORTED);
    bad = params(50001, 8, w, h, 1); /* WEBP of one sample */
    CHECK(cf__codec_encode(e, &bad, NULL, buf, (size_t)cf__codec_chunk_bytes(&bad), &enc, &n,
                           &err) == CF_E_UNSUPPORTED);
    bad = params(34887, 64, w, h, 1); /* LERC of int64 */
    CHECK(cf__codec_encode(e, &bad, NULL, buf, (size_t)cf__codec_chunk_bytes(&bad), &enc, &n,
                           &err) == CF_E_UNSUPPORTED);
    bad = params(34887, 16, w, h, 1);
    bad.predictor = 2; /* libtiff applies none to LERC */
    CHECK(cf__codec_encode(e, &bad, NULL, buf, (size_t)cf__codec_chunk_bytes(&bad), &enc, &n,
                           &err) == CF_E_UNSUPPORTED);
    cf__encoder_free(e);
}
#endif

int main(void) {
    uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    if (!first) {
        printf("tests assume a little-endian host\n");
        return 1;
    }
    cf__codec_ctx *ctx = cf__codec_ctx_new();
    CHECK(ctx != NULL);
    test_params(ctx);
    test_lzw(ctx);
    test_packbits(ctx);
    test_deflate_zstd(ctx);
    test_predictors(ctx);
    test_decode_rows(ctx);
    test_decode_rows_zstd(ctx);
    test_encode_round_trip(ctx);
#if defined(CF_HAVE_LERC) && defined(CF_HAVE_JPEG) && defined(CF_HAVE_WEBP)
    test_encode_lossy_and_lerc(ctx);
#endif
#ifdef CF_HAVE_LERC
    test_lerc(ctx);
#endif
#ifdef CF_HAVE_WEBP
    test_webp(ctx);
#endif
#ifdef CF_HAVE_JPEG
    test_jpeg(ctx);
    test_ojpeg(ctx);
#endif
    test_ccitt(ctx);
    test_odd_depths(ctx);
    test_complex(ctx);
#ifdef CF_HAVE_LZMA
    test_lzma(ctx);
#endif
    test_color_checks(ctx);
    cf__codec_ctx_free(ctx);
    cf__codec_ctx_free(NULL);
    test_accounting();
    return CF_TEST_END();
}
