/*
 * test_cog_write.c - cf_writer written and read back by cogfeed's own
 * reader, in C (so that the sanitizer builds run the writer): pixels,
 * overview levels, nodata and the EPSG code; sparse tiles; the internal
 * mask band and its overviews; tiles given encoded (copied from another
 * file); tiles written from several threads, and the overview pass on
 * several, the same bytes as on one; the writer's refusals; abort leaving
 * nothing behind.
 * (GDAL's reading of the same files: tests/python/test_writer.py.)
 */
#include "cf_test.h"
#include "cogfeed.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/cf_write_XXXXXX";

static int exists(const char *p) { return access(p, F_OK) == 0; }

/* A 2-band uint16 image w x h: value from band, x, y. */
static uint16_t px(int b, int x, int y) { return (uint16_t)(b * 1000 + x * 3 + y * 7); }

static void tile_data(uint32_t tx, uint32_t ty, uint32_t t, uint32_t w, uint32_t h,
                      uint16_t *out, uint32_t *tw, uint32_t *th) {
    *tw = (tx + 1) * t <= w ? t : w - tx * t;
    *th = (ty + 1) * t <= h ? t : h - ty * t;
    for (int b = 0; b < 2; b++)
        for (uint32_t y = 0; y < *th; y++)
            for (uint32_t x = 0; x < *tw; x++)
                out[((size_t)b * *th + y) * *tw + x] =
                    px(b, (int)(tx * t + x), (int)(ty * t + y));
}

/* Options for a W x H image of px()'s 2 uint16 bands in T px tiles. */
static cf_writer_options two_u16(uint32_t W, uint32_t H, uint32_t T) {
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = W;
    o.height = H;
    o.bands = 2;
    o.dtype = CF_DT_U16;
    o.tile_size = T;
    return o;
}

static void test_round_trip(uint16_t comp) {
    cf_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/rt_%u.tif", dir, comp);
    const uint32_t W = 333, H = 200, T = 64;
    cf_crs *crs = NULL;
    CHECK(cf_crs_from_epsg(32633, &crs, &err) == CF_OK);
    cf_grid g = {crs, {500000, 10, 0, 4100000, 0, -10}, W, H};
    cf_writer_options o = two_u16(W, H, T);
    o.compression = comp;
    o.has_nodata = 1;
    o.nodata = 65535;
    o.grid = &g;
    cf_writer *w = NULL;
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_OK);
    uint32_t tx_n = 0, ty_n = 0;
    cf_writer_tiles(w, &tx_n, &ty_n);
    CHECK(tx_n == 6 && ty_n == 4);
    uint16_t *buf = malloc((size_t)2 * T * T * 2);
    /* bottom-up, right to left; tile (1, 1) never written */
    for (uint32_t ty = ty_n; ty-- > 0;)
        for (uint32_t tx = tx_n; tx-- > 0;) {
            if (tx == 1 && ty == 1) continue;
            uint32_t tw, th;
            tile_data(tx, ty, T, W, H, buf, &tw, &th);
            CHECK(cf_writer_write_tile(w, tx, ty, buf, (size_t)2 * tw * th * 2, &err) == CF_OK);
        }
    CHECK(cf_writer_close(w, &err) == CF_OK);
    cf_crs_free(crs);
    char spool[300];
    snprintf(spool, sizeof spool, "%s.cogfeed-spool", path);
    CHECK(exists(path) && !exists(spool));

    cf_cog *cog = NULL;
    CHECK(cf_cog_open(NULL, path, &cog, &err) == CF_OK);
    if (!cog) return;
    cf_cog_info info;
    cf_cog_get_info(cog, &info);
    CHECK(info.width == W && info.height == H && info.count == 2);
    CHECK(info.tile_width == T && info.nlevels == 4); /* 167x100, 84x50, 42x25 */
    CHECK(info.epsg == 32633 && info.has_nodata && info.nodata == 65535);
    uint16_t *img = malloc((size_t)2 * W * H * 2);
    CHECK(cf_cog_read(cog, 0, 0, 0, W, H, NULL, 0, img, (size_t)2 * W * H * 2, &err) == CF_OK);
    int bad = 0;
    for (int b = 0; b < 2; b++)
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x = 0; x < W; x++) {
                int sparse = x >= T && x < 2 * T && y >= T && y < 2 * T;
                uint16_t want = sparse ? 65535 : px(b, (int)x, (int)y);
                bad += img[((size_t)b * H + y) * W + x] != want;
            }
    CHECK(bad == 0);
    /* the first overview: 2 x 2 averages (even size: exact blocks) */
    uint16_t ov[2 * 4 * 4];
    CHECK(cf_cog_read(cog, 1, 0, 0, 4, 4, NULL, 0, ov, sizeof ov, &err) == CF_OK);
    CHECK(ov[0] == (uint16_t)((px(0, 0, 0) + px(0, 1, 0) + px(0, 0, 1) + px(0, 1, 1) + 2) / 4));
    CHECK(ov[16 + 5] ==
          (uint16_t)((px(1, 2, 2) + px(1, 3, 2) + px(1, 2, 3) + px(1, 3, 3) + 2) / 4));
    cf_cog_close(cog);
    free(img);
    free(buf);
}

static void test_failures(void) {
    cf_error err;
    char path[256], spool[300], tmp[300];
    snprintf(path, sizeof path, "%s/fail.tif", dir);
    snprintf(spool, sizeof spool, "%s.cogfeed-spool", path);
    snprintf(tmp, sizeof tmp, "%s.cogfeed-tmp", path);
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = 100;
    o.height = 50;
    cf_writer *w = NULL;
    o.tile_size = 40;
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_E_ARG && !w);
    o.tile_size = 32;
    o.compression = 5;
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_E_UNSUPPORTED);
    o.compression = 8;
    o.predictor = 3; /* floats only */
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_E_ARG);
    o.predictor = 0;
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_OK);
    uint8_t t[32 * 32] = {0};
    CHECK(cf_writer_write_tile(w, 4, 0, t, 4 * 32, &err) == CF_E_ARG); /* outside */
    CHECK(cf_writer_write_tile(w, 3, 0, t, 4 * 32, &err) == CF_OK);    /* 4 x 32 */
    CHECK(cf_writer_write_tile(w, 0, 0, t, 100, &err) == CF_E_ARG);    /* size */
    CHECK(exists(spool));
    cf_writer_abort(w);
    CHECK(!exists(spool) && !exists(path) && !exists(tmp));
    /* no folder for the spool: CF_E_IO naming it */
    char nowhere[300];
    snprintf(nowhere, sizeof nowhere, "%s/missing/out.tif", dir);
    CHECK(cf_writer_open(nowhere, &o, &w, &err) == CF_E_IO && !w);
    CHECK(strstr(err.msg, "missing/out.tif.cogfeed-spool") != NULL);
    /* a finished file replaces what was at the path */
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_OK);
    CHECK(cf_writer_write_tile(w, 0, 0, t, sizeof t, &err) == CF_OK);
    CHECK(cf_writer_close(w, &err) == CF_OK && exists(path) && !exists(spool) && !exists(tmp));
    unlink(path);
}

/* cf_stitcher: two overlapping patches, mean blend, float output read
 * back: the overlap is the mean of the two, the rest each patch's own,
 * the uncovered corner NaN; argmax output; refusals. */
static void test_stitcher(void) {
    cf_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/st.tif", dir);
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = 100;
    o.height = 40;
    o.tile_size = 32;
    const int64_t patches[] = {0, 0, 60, 40, 40, 0, 40, 32};
    cf_stitcher_options so;
    cf_stitcher_options_init(&so);
    so.channels = 2;
    so.blend = CF_BLEND_MEAN;
    so.patches = patches;
    so.npatches = 2;
    float *a = malloc(2 * 60 * 40 * sizeof(float)), *b = malloc(2 * 40 * 32 * sizeof(float));
    for (int i = 0; i < 60 * 40; i++) a[i] = 1, a[60 * 40 + i] = 4;
    for (int i = 0; i < 40 * 32; i++) b[i] = 3, b[40 * 32 + i] = 2;
    for (int argmax = 0; argmax < 2; argmax++) {
        so.argmax = argmax;
        cf_stitcher *st = NULL;
        CHECK(cf_stitcher_open(path, &o, &so, &st, &err) == CF_OK);
        CHECK(cf_stitcher_add(st, 40, 0, 40, 32, b, &err) == CF_OK);
        CHECK(cf_stitcher_add(st, 40, 0, 40, 32, b, &err) == CF_E_ARG); /* twice */
        CHECK(strstr(err.msg, "came already") != NULL);
        CHECK(cf_stitcher_add(st, 30, 0, 40, 32, b, &err) == CF_E_ARG); /* not listed */
        CHECK(strstr(err.msg, "not one of the listed") != NULL);
        CHECK(cf_stitcher_add(st, 90, 0, 40, 32, b, &err) == CF_E_ARG); /* outside */
        CHECK(cf_stitcher_add(st, 0, 0, 60, 40, a, &err) == CF_OK);
        CHECK(cf_stitcher_close(st, &err) == CF_OK);
        cf_cog *cog = NULL;
        CHECK(cf_cog_open(NULL, path, &cog, &err) == CF_OK);
        if (!cog) continue;
        if (!argmax) {
            float px[2 * 40 * 100];
            CHECK(cf_cog_read(cog, 0, 0, 0, 100, 40, NULL, 0, px, sizeof px, &err) == CF_OK);
            CHECK(px[10] == 1 && px[4000 + 10] == 4);        /* a alone */
            CHECK(px[50] == 2 && px[4000 + 50] == 3);        /* (1+3)/2, (4+2)/2 */
            CHECK(px[70] == 3 && px[4000 + 70] == 2);        /* b alone */
            CHECK(px[35 * 100 + 70] != px[35 * 100 + 70]);   /* NaN: nothing came */
        } else {
            uint8_t c[40 * 100];
            CHECK(cf_cog_read(cog, 0, 0, 0, 100, 40, NULL, 0, c, sizeof c, &err) == CF_OK);
            CHECK(c[10] == 1 && c[50] == 1 && c[70] == 0 && c[35 * 100 + 70] == 255);
        }
        cf_cog_close(cog);
    }
    /* Input validity: b's input had no data in its columns 0..9 (x 40..49,
     * where a alone then counts) and in its top-right corner (x 70..79,
     * y < 4: no other patch, so NaN and not valid in the mask); the mask
     * says where some patch came with valid input. */
    o.mask = 1;
    so.argmax = 0;
    uint8_t *vb = malloc(40 * 32);
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 40; x++) vb[y * 40 + x] = x >= 10 && !(x >= 30 && y < 4);
    cf_stitcher *st = NULL;
    CHECK(cf_stitcher_open(path, &o, &so, &st, &err) == CF_OK);
    CHECK(cf_stitcher_add_masked(st, 40, 0, 40, 32, b, vb, &err) == CF_OK);
    CHECK(cf_stitcher_add_masked(st, 0, 0, 60, 40, a, NULL, &err) == CF_OK);
    CHECK(cf_stitcher_close(st, &err) == CF_OK);
    cf_cog *cog = NULL;
    CHECK(cf_cog_open(NULL, path, &cog, &err) == CF_OK);
    if (cog) {
        float px[2 * 40 * 100];
        uint8_t m[40 * 100];
        CHECK(cf_cog_read(cog, 0, 0, 0, 100, 40, NULL, 0, px, sizeof px, &err) == CF_OK);
        CHECK(cf_cog_read_mask(cog, 0, 0, 0, 100, 40, m, sizeof m, &err) == CF_OK);
        CHECK(px[45] == 1 && m[45] == 255);          /* b not valid there: a alone */
        CHECK(px[55] == 2 && m[55] == 255);          /* both */
        CHECK(px[72] != px[72] && m[72] == 0);       /* b's hole, past a: NaN, masked */
        CHECK(px[10 * 100 + 72] == 3 && m[10 * 100 + 72] == 255);
        CHECK(m[35 * 100 + 70] == 0);                /* nothing came */
        cf_cog_close(cog);
    }
    unlink(path);
    free(vb);
    free(a);
    free(b);
}

/* Whether pixel (x, y) of the masked test image is valid. */
static int valid_at(uint32_t x, uint32_t y) { return (x / 3 + y / 5) % 2 == 0; }

/* An internal mask: each tile's given mask read back at full resolution,
 * a tile written without one all valid, one never written not valid; the
 * first overview's mask valid where any of its 2 x 2 pixels is, its
 * average of the valid pixels only (odd and even sizes; NEAREST's masks
 * come straight from the full resolution: the Python tests against GDAL
 * check those). */
static void test_mask(uint32_t W, uint32_t H) {
    cf_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/mask_%u.tif", dir, W);
    const uint32_t T = 32;
    cf_writer_options o = two_u16(W, H, T);
    o.mask = 1;
    cf_writer *w = NULL;
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_OK);
    if (!w) return;
    uint32_t tx_n = 0, ty_n = 0;
    cf_writer_tiles(w, &tx_n, &ty_n);
    uint16_t buf[2 * 32 * 32];
    uint8_t m[32 * 32];
    for (uint32_t ty = 0; ty < ty_n; ty++)
        for (uint32_t tx = 0; tx < tx_n; tx++) {
            uint32_t tw, th;
            tile_data(tx, ty, T, W, H, buf, &tw, &th);
            for (uint32_t y = 0; y < th; y++)
                for (uint32_t x = 0; x < tw; x++) m[y * tw + x] = valid_at(tx * T + x, ty * T + y) ? 7 : 0;
            size_t n = (size_t)2 * tw * th * 2;
            if (tx == 1 && ty == 0) CHECK(cf_writer_write_tile(w, tx, ty, buf, n, &err) == CF_OK);
            else if (!(tx == 0 && ty == 1))
                CHECK(cf_writer_write_tile_masked(w, tx, ty, buf, n, m, &err) == CF_OK);
        }
    CHECK(cf_writer_close(w, &err) == CF_OK);
    cf_cog *cog = NULL;
    CHECK(cf_cog_open(NULL, path, &cog, &err) == CF_OK);
    if (!cog) return;
    uint8_t *mk = malloc((size_t)W * H);
    CHECK(cf_cog_read_mask(cog, 0, 0, 0, W, H, mk, (size_t)W * H, &err) == CF_OK);
    int bad = 0;
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++) {
            uint32_t tx = x / T, ty = y / T;
            int want = tx == 1 && ty == 0 ? 255 : tx == 0 && ty == 1 ? 0
                       : valid_at(x, y) ? 255 : 0;
            bad += mk[(size_t)y * W + x] != want;
        }
    CHECK(bad == 0);
    /* level 1, away from the special tiles: rows and columns 2T.. */
    const uint32_t w1 = (W + 1) / 2, h1 = (H + 1) / 2;
    uint8_t *m1 = malloc((size_t)w1 * h1);
    uint16_t *v1 = malloc((size_t)2 * w1 * h1 * 2);
    CHECK(cf_cog_read_mask(cog, 1, 0, 0, w1, h1, m1, (size_t)w1 * h1, &err) == CF_OK);
    CHECK(cf_cog_read(cog, 1, 0, 0, w1, h1, NULL, 0, v1, (size_t)2 * w1 * h1 * 2, &err) == CF_OK);
    bad = 0;
    int checked = 0;
    for (uint32_t y = T; W % 2 == 0 && H % 2 == 0 && y < h1; y++)
        for (uint32_t x = T; x < w1; x++) {
            double sum = 0;
            int n = 0;
            for (uint32_t dy = 0; dy < 2; dy++)
                for (uint32_t dx = 0; dx < 2; dx++)
                    if (valid_at(2 * x + dx, 2 * y + dy)) {
                        sum += px(0, (int)(2 * x + dx), (int)(2 * y + dy));
                        n++;
                    }
            bad += m1[(size_t)y * w1 + x] != (n ? 255 : 0);
            uint16_t want = n ? (uint16_t)(sum / n + 0.5) : 0;
            bad += v1[(size_t)y * w1 + x] != want;
            checked++;
        }
    CHECK(bad == 0);
    CHECK(W % 2 || H % 2 || checked > 0);
    /* a mask for a writer opened without one */
    o.mask = 0;
    char plain[300];
    snprintf(plain, sizeof plain, "%s/plain.tif", dir);
    CHECK(cf_writer_open(plain, &o, &w, &err) == CF_OK);
    CHECK(cf_writer_write_tile_masked(w, 0, 0, buf, (size_t)2 * T * T * 2, m, &err) == CF_E_ARG);
    cf_writer_abort(w);
    o.mask = 2;
    CHECK(cf_writer_open(plain, &o, &w, &err) == CF_E_ARG && !w);
    cf_cog_close(cog);
    free(mk);
    free(m1);
    free(v1);
    unlink(path);
}

/* The whole file at path (NULL when it cannot be read); *n its size. */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
    *n = b && fread(b, 1, (size_t)sz, f) == (size_t)sz ? (size_t)sz : 0;
    fclose(f);
    return b;
}

/* Whether files a and b hold the same bytes (and any). */
static int same_bytes(const char *a, const char *b) {
    size_t n1 = 0, n2 = 0;
    uint8_t *b1 = slurp(a, &n1), *b2 = slurp(b, &n2);
    int same = b1 && b2 && n1 == n2 && n1 > 0 && memcmp(b1, b2, n1) == 0;
    free(b1);
    free(b2);
    return same;
}

/* px()'s image of W x H in T px tiles (with `mask`: valid_at's mask), tile
 * (1, 1) never written, into `path` with o's options. */
static void write_px(const char *path, cf_writer_options o) {
    cf_error err;
    cf_writer *w = NULL;
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_OK);
    if (!w) return;
    uint32_t tx_n, ty_n, T = o.tile_size;
    cf_writer_tiles(w, &tx_n, &ty_n);
    uint16_t *buf = malloc((size_t)2 * T * T * 2);
    uint8_t *m = malloc((size_t)T * T);
    for (uint32_t ty = 0; ty < ty_n; ty++)
        for (uint32_t tx = 0; tx < tx_n; tx++) {
            if (tx == 1 && ty == 1) continue;
            uint32_t tw, th;
            tile_data(tx, ty, T, o.width, o.height, buf, &tw, &th);
            for (uint32_t y = 0; y < th; y++)
                for (uint32_t x = 0; x < tw; x++)
                    m[y * tw + x] = valid_at(tx * T + x, ty * T + y) ? 255 : 0;
            CHECK(cf_writer_write_tile_masked(w, tx, ty, buf, (size_t)2 * tw * th * 2,
                                              o.mask ? m : NULL, &err) == CF_OK ||
                  (!o.mask && cf_writer_write_tile(w, tx, ty, buf, (size_t)2 * tw * th * 2,
                                                   &err) == CF_OK));
        }
    CHECK(cf_writer_close(w, &err) == CF_OK);
    free(buf);
    free(m);
}

/* cf_writer_write_encoded_tile: a share written without overviews, its
 * tiles' stored bytes (cf_cog_chunk_info, cf_cog_mask_chunk_info) copied
 * into another writer in another order give the file written from the
 * pixels, byte for byte, overviews and masks included; and the copy's
 * refusals. */
static void test_encoded(uint16_t comp, int mask) {
    cf_error err;
    char share[256], direct[256], copy[256];
    snprintf(share, sizeof share, "%s/share_%u_%d.tif", dir, comp, mask);
    snprintf(direct, sizeof direct, "%s/direct_%u_%d.tif", dir, comp, mask);
    snprintf(copy, sizeof copy, "%s/copy_%u_%d.tif", dir, comp, mask);
    const uint32_t W = 201, H = 137, T = 32;
    cf_writer_options o = two_u16(W, H, T);
    o.compression = comp;
    o.mask = mask;
    write_px(direct, o);
    o.overviews = 0;
    write_px(share, o);
    o.overviews = -1;
    size_t fn = 0;
    uint8_t *file = slurp(share, &fn);
    cf_cog *cog = NULL;
    CHECK(file && cf_cog_open(NULL, share, &cog, &err) == CF_OK);
    if (!cog || !file) return;
    cf_chunk_info ci, mi;
    cf_writer *w = NULL;
    CHECK(cf_writer_open(copy, &o, &w, &err) == CF_OK);
    CHECK(cf_cog_chunk_info(cog, 0, 0, &ci, &err) == CF_OK);
    const uint64_t count = ci.count; /* 7 x 5 */
    CHECK(count == 35);
    for (uint64_t k = count; k-- > 0;) { /* last tile first */
        CHECK(cf_cog_chunk_info(cog, 0, k, &ci, &err) == CF_OK);
        memset(&mi, 0, sizeof mi);
        if (mask) CHECK(cf_cog_mask_chunk_info(cog, 0, k, &mi, &err) == CF_OK);
        CHECK((ci.byte_count == 0) == (k == 7 + 1));
        CHECK(cf_writer_write_encoded_tile(w, ci.col, ci.row, file + ci.offset, ci.byte_count,
                                           mi.byte_count ? file + mi.offset : NULL,
                                           mi.byte_count, &err) == CF_OK);
    }
    CHECK(cf_writer_close(w, &err) == CF_OK);
    CHECK(same_bytes(direct, copy));

    CHECK(cf_cog_chunk_info(cog, 0, 0, &ci, &err) == CF_OK);
    const uint8_t *t0 = file + ci.offset;
    const size_t n0 = ci.byte_count;
    if (mask) {
        /* the mask's stored bits decode to valid_at's */
        CHECK(cf_cog_mask_chunk_info(cog, 0, 0, &mi, &err) == CF_OK);
        CHECK(mi.bits == 1 && mi.width == T && mi.size == (size_t)T * T / 8);
        uint8_t bits[32 * 32 / 8];
        CHECK(cf_cog_decode_mask_chunk(cog, 0, 0, file + mi.offset, mi.byte_count, bits,
                                       sizeof bits, &err) == CF_OK);
        int bad = 0;
        for (uint32_t y = 0; y < T; y++)
            for (uint32_t x = 0; x < T; x++)
                bad += ((bits[(y * T + x) / 8] >> (7 - (x % 8))) & 1) != valid_at(x, y);
        CHECK(bad == 0);
        CHECK(cf_cog_decode_mask_chunk(cog, 0, 8, NULL, 0, bits, sizeof bits, &err) == CF_OK);
        CHECK(bits[0] == 0); /* sparse: not valid */
        /* a mask is required, and only where the writer has one */
        CHECK(cf_writer_open(copy, &o, &w, &err) == CF_OK);
        CHECK(cf_writer_write_encoded_tile(w, 0, 0, t0, n0, NULL, 0, &err) == CF_E_ARG);
        CHECK(cf_writer_write_encoded_tile(w, 0, 0, NULL, 0, file + mi.offset, mi.byte_count,
                                           &err) == CF_E_ARG);
        cf_writer_abort(w);
        o.mask = 0;
        CHECK(cf_writer_open(copy, &o, &w, &err) == CF_OK);
        CHECK(cf_writer_write_encoded_tile(w, 0, 0, t0, n0, file + mi.offset, mi.byte_count,
                                           &err) == CF_E_ARG);
        CHECK(strstr(err.msg, "without one") != NULL);
        cf_writer_abort(w);
    } else {
        CHECK(cf_cog_mask_chunk_info(cog, 0, 0, &mi, &err) == CF_E_ARG);
        CHECK(strstr(err.msg, "no internal mask") != NULL);
        /* foreign bytes, no overviews: refused at once, the writer goes on */
        uint8_t junk[64];
        memset(junk, 0x5a, sizeof junk);
        o.overviews = 0;
        CHECK(cf_writer_open(copy, &o, &w, &err) == CF_OK);
        cf_status st = cf_writer_write_encoded_tile(w, 0, 0, junk, sizeof junk, NULL, 0, &err);
        CHECK(st == CF_E_CODEC || st == CF_E_FORMAT);
        CHECK(strstr(err.msg, "tile 0,0, given encoded") != NULL);
        CHECK(cf_writer_write_encoded_tile(w, 0, 0, t0, n0, NULL, 0, &err) == CF_OK);
        /* above twice a raw tile */
        uint8_t *big = calloc(1, (size_t)2 * T * T * 4 + 2048);
        CHECK(cf_writer_write_encoded_tile(w, 1, 0, big, (size_t)2 * T * T * 4 + 2048, NULL, 0,
                                           &err) == CF_E_LIMIT);
        free(big);
        CHECK(cf_writer_write_encoded_tile(w, 7, 0, t0, n0, NULL, 0, &err) == CF_E_ARG);
        CHECK(cf_writer_close(w, &err) == CF_OK);
        /* with overviews: decoded on the overview pass, which names it */
        unlink(copy);
        o.overviews = -1;
        CHECK(cf_writer_open(copy, &o, &w, &err) == CF_OK);
        CHECK(cf_writer_write_encoded_tile(w, 2, 1, junk, sizeof junk, NULL, 0, &err) == CF_OK);
        st = cf_writer_close(w, &err);
        CHECK(st == CF_E_CODEC || st == CF_E_FORMAT);
        CHECK(strstr(err.msg, "tile 2,1 of level 0, read back") != NULL);
        CHECK(!exists(copy));
    }
    cf_cog_close(cog);
    free(file);
    unlink(share);
    unlink(direct);
    unlink(copy);
}

/* Tiles written from several threads at once (each encoded in a slot of
 * its own, more threads than slots): the file is byte for byte the one
 * written from one thread. */
typedef struct thr_arg {
    cf_writer *w;
    cf_writer_options o;
    int k, n, fails;
} thr_arg;

static void *write_share(void *p) {
    thr_arg *a = p;
    cf_error err;
    uint32_t tx_n, ty_n, T = a->o.tile_size;
    cf_writer_tiles(a->w, &tx_n, &ty_n);
    uint16_t *buf = malloc((size_t)2 * T * T * 2);
    uint8_t *m = malloc((size_t)T * T);
    for (uint32_t i = (uint32_t)a->k; i < tx_n * ty_n; i += (uint32_t)a->n) {
        uint32_t tx = i % tx_n, ty = i / tx_n, tw, th;
        if (tx == 1 && ty == 1) continue;
        tile_data(tx, ty, T, a->o.width, a->o.height, buf, &tw, &th);
        for (uint32_t y = 0; y < th; y++)
            for (uint32_t x = 0; x < tw; x++)
                m[y * tw + x] = valid_at(tx * T + x, ty * T + y) ? 255 : 0;
        a->fails += cf_writer_write_tile_masked(a->w, tx, ty, buf, (size_t)2 * tw * th * 2, m,
                                                &err) != CF_OK;
    }
    free(buf);
    free(m);
    return NULL;
}

/* write_px with this process on one CPU: one encoding slot, and the
 * overview pass (ov_pass.c) on one thread.  (Where the affinity cannot be
 * set, on every CPU: the checks that use it are then weaker.) */
static void write_pinned(const char *path, cf_writer_options o) {
    cpu_set_t all, cpu0;
    int pinned = sched_getaffinity(0, sizeof all, &all) == 0;
    CPU_ZERO(&cpu0);
    for (int c = 0; pinned && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &cpu0);
            break;
        }
    pinned = pinned && sched_setaffinity(0, sizeof cpu0, &cpu0) == 0;
    write_px(path, o);
    if (pinned) CHECK(sched_setaffinity(0, sizeof all, &all) == 0);
}

/* Overview rows wider than a wave (ov_pass.c encodes a row's tiles in
 * waves of 4 MiB a worker): 1024 px tiles of 4 MiB, 5 across, so that each
 * level's row takes several waves on one thread or on several; the same
 * bytes either way. */
static void test_waves(void) {
    char one[256], many[256];
    snprintf(one, sizeof one, "%s/wave1.tif", dir);
    snprintf(many, sizeof many, "%s/waves.tif", dir);
    cf_writer_options o = two_u16(5100, 2058, 1024);
    o.compression = 1;
    o.mask = 1;
    write_pinned(one, o);
    write_px(many, o);
    CHECK(same_bytes(one, many));
    cf_error err;
    cf_cog *cog = NULL;
    CHECK(cf_cog_open(NULL, many, &cog, &err) == CF_OK);
    if (cog) { /* level 1, where tile (1, 1) was left unwritten: nothing */
        cf_level_info li;
        CHECK(cf_cog_level_info(cog, 1, &li, &err) == CF_OK && li.width == 2550);
        uint16_t v[2];
        CHECK(cf_cog_read(cog, 1, 2400, 10, 1, 1, NULL, 0, v, sizeof v, &err) == CF_OK);
        CHECK(v[0] == (uint16_t)((px(0, 4800, 20) + px(0, 4801, 20) + px(0, 4800, 21) +
                                  px(0, 4801, 21) + 2) / 4));
        cf_cog_close(cog);
    }
    unlink(one);
    unlink(many);
}

static void test_threads(void) {
    cf_error err;
    char one[256], many[256];
    snprintf(one, sizeof one, "%s/one.tif", dir);
    snprintf(many, sizeof many, "%s/many.tif", dir);
    cf_writer_options o = two_u16(301, 170, 32);
    o.compression = 8;
    o.mask = 1;
    /* The reference written on one CPU (one encoding slot, the overview
     * pass on one thread); the other with every CPU, from 5 threads. */
    write_pinned(one, o);
    cf_writer *w = NULL;
    CHECK(cf_writer_open(many, &o, &w, &err) == CF_OK);
    if (!w) return;
    enum { N = 5 };
    pthread_t t[N];
    thr_arg a[N];
    for (int k = 0; k < N; k++) {
        a[k] = (thr_arg){w, o, k, N, 0};
        CHECK(pthread_create(&t[k], NULL, write_share, &a[k]) == 0);
    }
    int fails = 0;
    for (int k = 0; k < N; k++) {
        pthread_join(t[k], NULL);
        fails += a[k].fails;
    }
    CHECK(fails == 0);
    CHECK(cf_writer_close(w, &err) == CF_OK);
    CHECK(same_bytes(one, many));
    unlink(one);
    unlink(many);
}

/* Threads the library starts: this test is linked with
 * -Wl,--wrap=pthread_create (tests/CMakeLists.txt), so every thread the
 * writer or the stitcher starts passes here. */
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg);
static atomic_int started;
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg) {
    atomic_fetch_add(&started, 1);
    return __real_pthread_create(t, a, fn, arg);
}

/* A stitcher over 4 x 2 patches of 256 px (1024 px tiles of 256: four
 * across a row), patch i's channel c all i + c. */
static void stitch_ramp(const char *path, int threads) {
    cf_error err;
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = 1024;
    o.height = 512;
    o.tile_size = 256;
    o.threads = threads;
    int64_t p[8 * 4];
    for (int i = 0; i < 8; i++) {
        p[4 * i] = (i % 4) * 256;
        p[4 * i + 1] = (i / 4) * 256;
        p[4 * i + 2] = p[4 * i + 3] = 256;
    }
    cf_stitcher_options so;
    cf_stitcher_options_init(&so);
    so.channels = 2;
    so.blend = CF_BLEND_MEAN;
    so.patches = p;
    so.npatches = 8;
    cf_stitcher *st = NULL;
    CHECK(cf_stitcher_open(path, &o, &so, &st, &err) == CF_OK);
    if (!st) return;
    float *pred = malloc((size_t)2 * 256 * 256 * sizeof *pred);
    for (int i = 0; pred && i < 8; i++) {
        for (size_t k = 0; k < (size_t)2 * 256 * 256; k++)
            pred[k] = (float)(i + (int)(k / (256 * 256)));
        CHECK(cf_stitcher_add(st, p[4 * i], p[4 * i + 1], 256, 256, pred, &err) == CF_OK);
    }
    free(pred);
    CHECK(cf_stitcher_close(st, &err) == CF_OK);
}

/* The `threads` option: at most that many threads in each of the
 * writer's parallel stages.  With 1, neither the overview pass (several
 * tiles across, several waves) nor the stitcher's rows start a thread;
 * without it, on two CPUs or more, both do (so the count can fail); the
 * same bytes either way.  A negative count is refused. */
static void test_threads_option(void) {
    cf_error err;
    char one[256], all[256];
    snprintf(one, sizeof one, "%s/thr1.tif", dir);
    snprintf(all, sizeof all, "%s/thr0.tif", dir);
    cf_writer_options o = two_u16(5100, 2058, 1024);
    o.compression = 8;
    o.threads = 1;
    atomic_store(&started, 0);
    write_px(one, o);
    CHECK(atomic_load(&started) == 0);
    o.threads = 0;
    atomic_store(&started, 0);
    write_px(all, o);
    const int many = sysconf(_SC_NPROCESSORS_ONLN) > 1;
    cpu_set_t cpus;
    const int usable = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    if (many && usable > 1) CHECK(atomic_load(&started) > 0);
    CHECK(same_bytes(one, all));
    unlink(one);
    unlink(all);

    atomic_store(&started, 0);
    stitch_ramp(one, 1);
    CHECK(atomic_load(&started) == 0);
    atomic_store(&started, 0);
    stitch_ramp(all, 0);
    if (many && usable > 1) CHECK(atomic_load(&started) > 0);
    CHECK(same_bytes(one, all));
    unlink(one);
    unlink(all);

    o.threads = -1;
    cf_writer *w = NULL;
    CHECK(cf_writer_open(one, &o, &w, &err) == CF_E_ARG && !w);
    CHECK(strstr(err.msg, "threads -1") != NULL);
}

/* close while another thread is still encoding a tile: close waits for
 * it, and the tile is in the file (it freed the encoder under the tile
 * before: a use after free). */
typedef struct big_arg {
    cf_writer *w;
    double *px;
    size_t n;
    cf_status st;
} big_arg;

static void *write_big(void *p) {
    big_arg *a = p;
    cf_error err;
    a->st = cf_writer_write_tile(a->w, 0, 0, a->px, a->n, &err);
    return NULL;
}

static void test_close_waits(void) {
    cf_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/big.tif", dir);
    const uint32_t T = 1024;
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = o.height = o.tile_size = T;
    o.dtype = CF_DT_F64;
    o.compression = 8;
    o.level = 9; /* slow: the tile is still encoding when close comes */
    o.overviews = 0;
    cf_writer *w = NULL;
    CHECK(cf_writer_open(path, &o, &w, &err) == CF_OK);
    if (!w) return;
    big_arg a = {w, malloc((size_t)T * T * 8), (size_t)T * T * 8, CF_E_STATE};
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)T * T; i++) { /* noise: slow to compress */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        a.px[i] = (double)(x % 100000) / 7.0;
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, write_big, &a) == 0);
    usleep(20000);
    CHECK(cf_writer_close(w, &err) == CF_OK);
    pthread_join(t, NULL);
    CHECK(a.st == CF_OK);
    cf_cog *cog = NULL;
    CHECK(cf_cog_open(NULL, path, &cog, &err) == CF_OK);
    if (cog) {
        double v[4];
        CHECK(cf_cog_read(cog, 0, 100, 200, 4, 1, NULL, 0, v, sizeof v, &err) == CF_OK);
        CHECK(v[0] == a.px[200 * T + 100] && v[3] == a.px[200 * T + 103]);
        cf_cog_close(cog);
    }
    free(a.px);
    unlink(path);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    test_mask(200, 136);
    test_mask(201, 137);
    test_round_trip(1);
    test_round_trip(8);
    test_round_trip(50000);
    test_failures();
    test_stitcher();
    test_encoded(8, 0);
    test_encoded(8, 1);
    test_encoded(50000, 1);
    test_encoded(1, 0);
    test_threads();
    test_threads_option();
    test_waves();
    test_close_waits();
    rmdir(dir);
    return CF_TEST_END();
}
