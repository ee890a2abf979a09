/*
 * test_codec_lerc2.c - cogfeed's own Lerc2 decoder (lib/codec/lerc2.c)
 * against liblerc, the decoder it must equal.
 *
 * 1. Blobs liblerc's encoder writes (versions 3-6, the 8 data types, depth
 *    1-4, sizes from 1x1 to 130 px, no mask / a partial mask / no valid
 *    pixel, lossless and lossy, noise, gradients, 8-bit classes (lookup
 *    tables), constants) decode to liblerc's exact bytes and mask; every
 *    blob written in tiles is decoded by lerc2.c itself (not deferred).
 * 2. Corrupted blobs (random bytes changed, the checksum made valid again
 *    so that the damage reaches the blocks, or left invalid; truncated)
 *    are refused by name, or decode to liblerc's bytes.  A blob whose
 *    values liblerc would read past is refused.
 * 3. Through cf__codec_decode: LERC_ZSTD tiles equal lerc_decode's pixels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cf_test.h"
#include "codec/codec_internal.h"
#include "lerc2_blob.h"

#ifdef CF_HAVE_LERC
#include <Lerc_c_api.h>
#include <zstd.h>

static const unsigned SZ[8] = {1, 1, 2, 2, 4, 4, 4, 8};

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Pixel values of type dt: pattern 0 noise over the type's range (or
 * +-1e6 for floats), 1 a smooth gradient, 2 eight classes, 3 a constant
 * per depth, 4 noise around a large offset, 1 to 16 bits wide by rows. */
static void fill(uint8_t *d, int dt, size_t n, int depth, int pattern,
                 int cols) {
    for (size_t i = 0; i < n; i++) {
        size_t px = i / (size_t)depth;
        int dep = (int)(i % (size_t)depth);
        double v;
        switch (pattern) {
        case 0: v = (double)rnd(); break;
        case 1: v = (double)(px % (size_t)cols) * 3 + (double)(px / (size_t)cols) + dep * 50; break;
        case 2: v = (double)(((px % (size_t)cols) / 9 + (px / (size_t)cols) / 7) % 8) * 17; break;
        case 3: v = 40 + dep * 3; break;
        default: /* noise whose width changes every 8 rows: 1-16 bits */
            v = 1000 + (rnd() % (1u << (1 + (px / (size_t)cols / 8) % 16)));
            break;
        }
        switch (dt) {
        case 0: { int8_t x = (int8_t)((int)fmod(v, 256.0) - 128); memcpy(d + i, &x, 1); break; }
        case 1: { uint8_t x = (uint8_t)fmod(v, 256.0); memcpy(d + i, &x, 1); break; }
        case 2: { int16_t x = (int16_t)((int)fmod(v, 65536.0) - 32768); memcpy(d + 2 * i, &x, 2); break; }
        case 3: { uint16_t x = (uint16_t)fmod(v, 65536.0); memcpy(d + 2 * i, &x, 2); break; }
        case 4: { int32_t x = (int32_t)(fmod(v, 4294967296.0) - 2147483648.0); memcpy(d + 4 * i, &x, 4); break; }
        case 5: { uint32_t x = (uint32_t)fmod(v, 4294967296.0); memcpy(d + 4 * i, &x, 4); break; }
        case 6: { float x = (float)(pattern == 0 ? (v / 4294967296.0 - 0.5) * 2e6 : v * 0.37); memcpy(d + 4 * i, &x, 4); break; }
        default: { double x = pattern == 0 ? (v / 4294967296.0 - 0.5) * 2e6 : v * 0.37; memcpy(d + 8 * i, &x, 8); break; }
        }
    }
}

static int done_count, defer_count, refused_count, tiled_done_count;

/* Decode blob with lerc2.c, then (unless it refused) with liblerc, and
 * check the outcomes agree.  valid_blob: liblerc's encoder wrote it as it
 * is, so lerc2.c must not refuse it; must_take: lerc2.c may not defer it.
 * A blob lerc2.c refuses is not given to liblerc, which may crash on it;
 * nor, unless it is valid, one lerc2.c defers (Huffman or float coded: as
 * exposed to liblerc as every reader of such data).  Returns *done. */
static int compare(cf__scratch *scr, const uint8_t *blob, size_t n, int dt,
                   int depth, int cols, int rows, int with_mask,
                   int valid_blob, int must_take, const char *what) {
    size_t npix = (size_t)cols * rows, bytes = npix * depth * SZ[dt];
    uint8_t *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    uint8_t *ma = malloc(npix + 1), *mb = malloc(npix + 1);
    memset(a, 0x5a, bytes);
    memset(b, 0xa5, bytes);
    cf_error err;
    memset(&err, 0, sizeof err);
    int done = 0;
    cf_status st = cf__lerc2_decode(scr, blob, n, dt, depth, cols, rows, b,
                                    with_mask ? mb : NULL, &done, &err);
    int ok = 1;
    lerc_status ls = 0;
    if (st != CF_OK) {
        /* refused: never a blob liblerc's encoder wrote; always by name */
        ok = !valid_blob && strncmp(err.msg, "bl", 2) == 0;
    } else if (done || valid_blob) {
        ls = lerc_decode(blob, (unsigned)n, with_mask, with_mask ? ma : NULL,
                         depth, cols, rows, 1, (unsigned)dt, a);
        if (done)
            ok = ls == 0 && memcmp(a, b, bytes) == 0 &&
                 (!with_mask || memcmp(ma, mb, npix) == 0);
        else
            ok = !must_take;
    }
    if (!ok)
        fprintf(stderr, "%s: dt %d depth %d %dx%d mask %d: liblerc %d, "
                "lerc2 status %d done %d (%s)\n", what, dt, depth, cols, rows,
                with_mask, (int)ls, (int)st, done, err.msg);
    CHECK(ok);
    if (st == CF_OK) {
        if (done) done_count++;
        else defer_count++;
    } else {
        refused_count++;
    }
    free(a);
    free(b);
    free(ma);
    free(mb);
    return st == CF_OK && done;
}

static void test_encoded(cf__scratch *scr) {
    static const int sizes[][2] = {{1, 1}, {7, 5}, {64, 64}, {100, 37},
                                   {33, 130}, {9, 17}, {16, 128}};
    uint8_t *data = malloc(130 * 130 * 4 * 8);
    uint8_t *valid = malloc(130 * 130);
    size_t cap = 130 * 130 * 4 * 8 * 2 + 4096;
    uint8_t *blob = malloc(cap);
    int cases = 0;
    for (int version = 3; version <= 6; version++)
        for (int dt = 0; dt < 8; dt++)
            for (int depth = 1; depth <= 4; depth += (depth == 1 ? 1 : 2))
                for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
                    for (int pattern = 0; pattern < 5; pattern++)
                        for (int mk = 0; mk < 3; mk++)
                            for (int lossy = 0; lossy < 2; lossy++) {
        int cols = sizes[si][0], rows = sizes[si][1];
        size_t npix = (size_t)cols * rows;
        if (depth > 1 && version < 4) continue; /* depth came with v4 */
        fill(data, dt, npix * depth, depth, pattern, cols);
        /* mask: 0 none, 1 every third pixel and a hole, 2 none valid */
        for (size_t k = 0; k < npix; k++)
            valid[k] = mk == 2 ? 0 : (uint8_t)(k % 3 != 0 && !(k > 40 && k < 70));
        double maxz = dt < 6 ? (lossy ? 2.0 + (pattern & 1) : 0.5)
                             : (lossy ? 0.01 * (pattern + 1) : 0.0);
        unsigned nb = 0;
        lerc_status es = lerc_encodeForVersion(
            data, version, (unsigned)dt, depth, cols, rows, 1, mk ? 1 : 0,
            mk ? valid : NULL, maxz, blob, (unsigned)cap, &nb);
        if (es != 0) continue;
        cases++;
        /* the 8-bit lossless image may be Huffman coded (liblerc's), v6
         * lossless floats may use the float coder: those may defer */
        int huff = (dt <= 1 && maxz == 0.5) || (version >= 6 && dt >= 6 && maxz == 0);
        int must = !huff;
        char what[64];
        snprintf(what, sizeof what, "v%d pattern %d lossy %d", version,
                 pattern, lossy);
        /* a blob with a mask needs a mask asked for, as liblerc says */
        int took = compare(scr, blob, nb, dt, depth, cols, rows, 1, 1, must,
                           what);
        if (took && !huff) tiled_done_count++;
        compare(scr, blob, nb, dt, depth, cols, rows, 0, 1, 0, what);
    }
    printf("encoded: %d blobs, lerc2 decoded %d, deferred %d\n", cases,
           done_count, defer_count);
    CHECK(cases > 2000);
    CHECK(tiled_done_count > 1000);
    free(data);
    free(valid);
    free(blob);
}

static void test_corrupt(cf__scratch *scr) {
    uint8_t *data = malloc(64 * 64 * 4 * 8);
    uint8_t *valid = malloc(64 * 64);
    size_t cap = 64 * 64 * 4 * 8 * 2 + 4096;
    uint8_t *blob = malloc(cap), *bad = malloc(cap);
    int before = done_count;
    for (int round = 0; round < 3000; round++) {
        int dt = (int)(rnd() % 8), depth = 1 + (int)(rnd() % 3);
        int cols = 1 + (int)(rnd() % 64), rows = 1 + (int)(rnd() % 64);
        int version = 3 + (int)(rnd() % 4), mk = (int)(rnd() % 2);
        if (version < 4) depth = 1;
        size_t npix = (size_t)cols * rows;
        fill(data, dt, npix * depth, depth, (int)(rnd() % 5), cols);
        for (size_t k = 0; k < npix; k++) valid[k] = (uint8_t)(rnd() % 4 != 0);
        double maxz = dt < 6 ? 0.5 + (rnd() % 2) : 0.001 * (rnd() % 3);
        /* liblerc 4.0 aborts (an assert in fpl_Compression.cpp) on some
         * corrupt v6 lossless-float blobs: not those here */
        if (version == 6 && dt >= 6 && maxz == 0) version = 5;
        unsigned nb = 0;
        if (lerc_encodeForVersion(data, version, (unsigned)dt, depth, cols,
                                  rows, 1, mk, mk ? valid : NULL, maxz, blob,
                                  (unsigned)cap, &nb) != 0)
            continue;
        memcpy(bad, blob, nb);
        int flips = 1 + (int)(rnd() % 4);
        for (int f = 0; f < flips; f++) {
            /* mostly past the header, where the blocks are */
            size_t at = nb > 80 && rnd() % 4 ? 60 + rnd() % (nb - 60) : rnd() % nb;
            bad[at] ^= (uint8_t)(1u << (rnd() % 8));
            if (rnd() % 8 == 0) bad[at] = (uint8_t)rnd();
        }
        if (rnd() % 4) lerc2_reseal(bad, nb);
        compare(scr, bad, nb, dt, depth, cols, rows, 1, 0, 0, "corrupt");
        /* truncated */
        compare(scr, blob, nb - 1 - rnd() % nb, dt, depth, cols, rows, 1, 0,
                0, "truncated");
    }
    printf("corrupt: lerc2 decoded %d of them identically, refused %d\n",
           done_count - before, refused_count);
    CHECK(refused_count > 1000);
    free(data);
    free(valid);
    free(blob);
    free(bad);
}

/* A hand-made v3 blob: one 8x8 block of uint16 bit-stuffed with 63 values
 * for a mask of 64 valid pixels: liblerc would read past its 63 values;
 * lerc2.c refuses it by name.  Built from an encoded blob by patching the
 * block's count and resealing. */
static void test_short_block(cf__scratch *scr) {
    uint16_t v[64];
    for (int i = 0; i < 64; i++) v[i] = (uint16_t)(1000 + (i * 37) % 500);
    uint8_t blob[1024];
    unsigned nb = 0;
    CHECK(lerc_encodeForVersion(v, 3, 3, 1, 8, 8, 1, 0, NULL, 0.5, blob,
                                sizeof blob, &nb) == 0);
    /* v3 header: key 6, version 4, checksum 4, 6 ints, 3 doubles; mask int;
     * then the one-sweep flag, the block flag, the uint16 offset, and the
     * stuffer's head byte (bits 6-7: 2 -> a 1-byte count) */
    size_t at = 6 + 4 + 4 + 24 + 24 + 4;
    CHECK(blob[at] == 0);          /* not one sweep */
    CHECK((blob[at + 1] & 3) == 1); /* bit-stuffed block */
    size_t head = at + 2 + 2;
    CHECK((blob[head] >> 6) == 2);
    CHECK(blob[head + 1] == 64);
    blob[head + 1] = 63;
    lerc2_reseal(blob, nb);
    uint16_t out[64];
    cf_error err;
    memset(&err, 0, sizeof err);
    int done = 1;
    CHECK(cf__lerc2_decode(scr, blob, nb, 3, 1, 8, 8, (uint8_t *)out, NULL,
                           &done, &err) == CF_E_CODEC);
    CHECK(done == 0);
    CHECK(strstr(err.msg, "63 values") != NULL);
}

/* Review findings, each failing on the first version of lerc2.c:
 * a mask whose runs fill fewer bytes than the image's was deferred to
 * liblerc, which decoded it with bytes it never wrote (and an error was
 * left set with CF_OK); a block side over 32 was refused at the header,
 * where liblerc refuses it only when it reads blocks (a constant image
 * with one decodes). */
static void test_review(cf__scratch *scr) {
    enum { W = 40, H = 20 };
    uint16_t v[W * H], out[W * H];
    uint8_t valid[W * H], blob[8192], mask[W * H];
    for (int i = 0; i < W * H; i++) {
        v[i] = (uint16_t)(500 + (i * 37) % 300);
        valid[i] = (uint8_t)(i % 5 != 2);
    }
    unsigned nb = 0;
    CHECK(lerc_encodeForVersion(v, 4, 3, 1, W, H, 1, 1, valid, 0.5, blob,
                                sizeof blob, &nb) == 0);
    /* v4 header: key 6, version 4, checksum 4, 7 ints, 3 doubles; then
     * the mask's byte count and its runs: one run of 99 bytes for 100 */
    size_t at = 6 + 4 + 4 + 28 + 24;
    int32_t nmask;
    memcpy(&nmask, blob + at, 4);
    CHECK(nmask >= 5);
    int16_t run = -99, end = -32768;
    memcpy(blob + at + 4, &run, 2);
    blob[at + 6] = 0x55;
    memcpy(blob + at + 7, &end, 2);
    lerc2_reseal(blob, nb);
    cf_error err;
    memset(&err, 0, sizeof err);
    int done = 1;
    CHECK(cf__lerc2_decode(scr, blob, nb, 3, 1, W, H, (uint8_t *)out, mask,
                           &done, &err) == CF_E_CODEC);
    CHECK(done == 0);
    CHECK(strstr(err.msg, "mask") != NULL);
    /* a constant image whose header says 64-pixel blocks */
    for (int i = 0; i < W * H; i++) v[i] = 777;
    CHECK(lerc_encodeForVersion(v, 4, 3, 1, W, H, 1, 0, NULL, 0.5, blob,
                                sizeof blob, &nb) == 0);
    int32_t mb = 64;
    memcpy(blob + 14 + 4 * 4, &mb, 4); /* rows, cols, depth, valid, block */
    lerc2_reseal(blob, nb);
    uint16_t ref[W * H];
    CHECK(lerc_decode(blob, nb, 0, NULL, 1, W, H, 1, 3, ref) == 0);
    memset(&err, 0, sizeof err);
    done = 0;
    CHECK(cf__lerc2_decode(scr, blob, nb, 3, 1, W, H, (uint8_t *)out, NULL,
                           &done, &err) == CF_OK);
    CHECK(done == 1);
    CHECK(memcmp(out, ref, sizeof out) == 0 && out[0] == 777);
}

/* Through the codec: LERC_ZSTD 4-band uint16 tiles, as GDAL writes them
 * (libtiff: Lerc2 v4, depth = samples), equal lerc_decode's pixels. */
static void test_codec_path(void) {
    const int w = 256, h = 128, spp = 4;
    size_t n = (size_t)w * h * spp;
    uint16_t *px = malloc(n * 2), *ref = malloc(n * 2), *out = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        px[i] = (uint16_t)(300 + ((i / spp) % w) * 2 + (rnd() % 200));
    size_t cap = n * 4 + 4096;
    uint8_t *blob = malloc(cap), *z = malloc(cap);
    unsigned nb = 0;
    CHECK(lerc_encodeForVersion(px, 4, 3, spp, w, h, 1, 0, NULL, 0.5, blob,
                                (unsigned)cap, &nb) == 0);
    CHECK(lerc_decode(blob, nb, 0, NULL, spp, w, h, 1, 3, ref) == 0);
    size_t zn = ZSTD_compress(z, cap, blob, nb, 3);
    cf__codec_ctx *ctx = cf__codec_ctx_new();
    cf__codec_params p;
    memset(&p, 0, sizeof p);
    p.compression = 34887;
    p.bits = 16;
    p.samples = spp;
    p.width = w;
    p.height = h;
    p.sample_format = 1;
    p.predictor = 1;
    p.photometric = 1;
    p.lerc_sub = 2;
    cf_error err;
    CHECK(cf__codec_decode(ctx, &p, z, zn, (uint8_t *)out, n * 2, &err) == CF_OK);
    CHECK(memcmp(out, ref, n * 2) == 0);
    CHECK(memcmp(out, px, n * 2) == 0);
    cf__codec_ctx_free(ctx);
    free(px);
    free(ref);
    free(out);
    free(blob);
    free(z);
}
#endif

int main(void) {
#ifdef CF_HAVE_LERC
    cf__scratch scr = {NULL, 0};
    test_encoded(&scr);
    test_corrupt(&scr);
    test_short_block(&scr);
    test_review(&scr);
    test_codec_path();
    free(scr.p);
#else
    printf("built without liblerc: nothing to compare\n");
#endif
    return CF_TEST_END();
}
