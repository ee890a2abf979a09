/*
 * test_pipeline_loader.c - the loader end to end on small tiled TIFFs
 * written here (uncompressed, so pixel values are known exactly): image
 * values match their windows, masks stay aligned through augmentation,
 * resume continues exactly, a slow consumer bounds the work done ahead, a
 * bad tile fails its batch or is skipped and counted.
 */
#include "cf_test.h"
#include "common/common.h"

#include <dirent.h>
#include <libdeflate.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[512];

/* Image value of band b at (x, y); the mask is its low byte, so that any
 * misalignment or differing augmentation between the two shows. */
static uint16_t F(int64_t x, int64_t y, int b) {
    return (uint16_t)(x * 7 + y * 131 + b * 10007);
}

static void put16(FILE *f, uint16_t v) { fwrite(&v, 2, 1, f); }
static void put32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void entry(FILE *f, uint16_t tag, uint16_t type, uint32_t n,
                  uint32_t v) {
    put16(f, tag);
    put16(f, type);
    put32(f, n);
    put32(f, v);
}

/* A little-endian tiled TIFF: spp 2 x uint16 (image) or spp 1 x uint8
 * (mask); tile `bad_tile` (if >= 0) points past the end of the file;
 * tiles DEFLATE-compressed (zlib, compression 8) when `deflate`. */
/* With geo_res > 0, write_tiff_ex adds a geotransform: pixel size
 * geo_res, top-left corner (geo_x0, geo_y0), no CRS. */
static double geo_res, geo_x0, geo_y0;

static void write_tiff_ex(const char *path, uint32_t W, uint32_t H, uint32_t T,
                          int mask, int bad_tile, int deflate) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    uint32_t spp = mask ? 1 : 2, bps = mask ? 8 : 16, es = bps / 8;
    uint32_t ta = (W + T - 1) / T, td = (H + T - 1) / T, n = ta * td;
    const int geo = geo_res > 0;
    uint32_t ntags = (mask ? 12 : 13) + (geo ? 2 : 0);
    uint32_t ifd = 8, arrays = ifd + 2 + ntags * 12 + 4;
    uint32_t doubles = arrays + 8 * n; /* 9 doubles of the geotransform */
    uint32_t data = doubles + (geo ? 72 : 0);
    uint32_t tile_bytes = T * T * spp * es;
    /* The tiles first (their sizes go into the header). */
    uint8_t *raw = malloc(tile_bytes);
    size_t cap = tile_bytes + tile_bytes / 8 + 1024;
    uint8_t *tiles = malloc((size_t)n * cap);
    uint32_t *len = calloc(n, sizeof *len);
    struct libdeflate_compressor *z = deflate ? libdeflate_alloc_compressor(6) : NULL;
    if (!raw || !tiles || !len || (deflate && !z)) exit(2);
    for (uint32_t t = 0; t < n; t++) {
        uint32_t tx = t % ta, ty = t / ta;
        uint8_t *o = raw;
        for (uint32_t r = 0; r < T; r++)
            for (uint32_t c = 0; c < T; c++) {
                int64_t x = tx * T + c, y = ty * T + r;
                for (uint32_t b = 0; b < spp; b++) {
                    uint16_t v = F(x, y, (int)b);
                    if (mask) {
                        *o++ = (uint8_t)(v & 0xff);
                    } else {
                        memcpy(o, &v, 2);
                        o += 2;
                    }
                }
            }
        uint8_t *dst = tiles + (size_t)t * cap;
        if (z) {
            len[t] = (uint32_t)libdeflate_zlib_compress(z, raw, tile_bytes, dst, cap);
            if (!len[t]) exit(2);
        } else {
            memcpy(dst, raw, tile_bytes);
            len[t] = tile_bytes;
        }
    }
    fwrite("II*\0", 1, 4, f);
    put32(f, ifd);
    put16(f, (uint16_t)ntags);
    entry(f, 256, 4, 1, W);
    entry(f, 257, 4, 1, H);
    entry(f, 258, 3, spp, spp == 1 ? bps : (bps | bps << 16));
    entry(f, 259, 3, 1, deflate ? 8 : 1);
    entry(f, 262, 3, 1, 1);
    entry(f, 277, 3, 1, spp);
    entry(f, 284, 3, 1, 1);
    entry(f, 322, 3, 1, T);
    entry(f, 323, 3, 1, T);
    entry(f, 324, 4, n, arrays);
    entry(f, 325, 4, n, arrays + 4 * n);
    if (!mask) entry(f, 338, 3, 1, 0);
    entry(f, 339, 3, spp, spp == 1 ? 1 : (1 | 1 << 16));
    if (geo) {
        entry(f, 33550, 12, 3, doubles);
        entry(f, 33922, 12, 6, doubles + 24);
    }
    put32(f, 0);
    uint32_t at = data, total = 0;
    for (uint32_t i = 0; i < n; i++) total += len[i];
    for (uint32_t i = 0; i < n; i++) {
        put32(f, (int)i == bad_tile ? data + total + 4096 : at);
        at += len[i];
    }
    for (uint32_t i = 0; i < n; i++) put32(f, len[i]);
    if (geo) {
        double d[9] = {geo_res, geo_res, 0, 0, 0, 0, geo_x0, geo_y0, 0};
        fwrite(d, sizeof d, 1, f);
    }
    for (uint32_t t = 0; t < n; t++) fwrite(tiles + (size_t)t * cap, 1, len[t], f);
    fclose(f);
    libdeflate_free_compressor(z);
    free(raw);
    free(tiles);
    free(len);
}

static void write_tiff(const char *path, uint32_t W, uint32_t H, uint32_t T,
                       int mask, int bad_tile) {
    write_tiff_ex(path, W, H, T, mask, bad_tile, 0);
}

static char img_a[600], img_b[600], msk_a[600], msk_b[600], bad[600],
    bad_m[600], zimg_a[600], zimg_b[600], zmsk_a[600], zmsk_b[600];

static void fixtures(void) {
    const char *base = getenv("CF_TEST_DATA");
    snprintf(dir, sizeof dir, "%s/loader_c_%d", base ? base : "/tmp",
             (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0) exit(2);
    snprintf(img_a, sizeof img_a, "%s/a.tif", dir);
    snprintf(img_b, sizeof img_b, "%s/b.tif", dir);
    snprintf(msk_a, sizeof msk_a, "%s/a_mask.tif", dir);
    snprintf(msk_b, sizeof msk_b, "%s/b_mask.tif", dir);
    snprintf(bad, sizeof bad, "%s/bad.tif", dir);
    snprintf(bad_m, sizeof bad_m, "%s/bad_mask.tif", dir);
    write_tiff(img_a, 200, 150, 64, 0, -1);
    write_tiff(msk_a, 200, 150, 64, 1, -1);
    write_tiff(img_b, 130, 190, 32, 0, -1);
    write_tiff(msk_b, 130, 190, 32, 1, -1);

    write_tiff(bad_m, 128, 128, 32, 1, -1);
    snprintf(zimg_a, sizeof zimg_a, "%s/za.tif", dir);
    snprintf(zimg_b, sizeof zimg_b, "%s/zb.tif", dir);
    snprintf(zmsk_a, sizeof zmsk_a, "%s/za_mask.tif", dir);
    snprintf(zmsk_b, sizeof zmsk_b, "%s/zb_mask.tif", dir);
    write_tiff_ex(zimg_a, 200, 150, 64, 0, -1, 1);
    write_tiff_ex(zmsk_a, 200, 150, 64, 1, -1, 1);
    write_tiff_ex(zimg_b, 130, 190, 32, 0, -1, 1);
    write_tiff_ex(zmsk_b, 130, 190, 32, 1, -1, 1);
}

/* Options over two images and their masks: 24 px patches, batches of 5,
 * seed 7. */
static void base_options(cf_loader_options *o, const char **imgs,
                         const char **msks, cf_sampler_kind kind,
                         uint64_t len) {
    cf_loader_options_init(o);
    o->images = imgs;
    o->masks = msks;
    o->ungeoreferenced = 1; /* these test files have no geotransform */
    o->nfiles = 2;
    o->patch_size = 24;
    o->batch_size = 5;
    o->sampler = kind;
    o->seed = 7;
    o->epoch_length = len;
}

static cf_loader *make(cf_sampler_kind kind, unsigned aug, int threads,
                       int prefetch, uint64_t len) {
    const char *imgs[] = {img_a, img_b};
    const char *msks[] = {msk_a, msk_b};
    cf_loader_options o;
    base_options(&o, imgs, msks, kind, len);
    o.augment = aug;
    o.threads = threads;
    o.prefetch = prefetch;
    o.cache_bytes = 64 << 10;
    cf_loader *ld = NULL;
    cf_error e;
    cf_status st = cf_loader_new(&o, &ld, &e);
    if (st != CF_OK) fprintf(stderr, "loader_new: %s\n", e.msg);
    CHECK(st == CF_OK);
    return ld;
}

/* Every sample: image == F at its window (when not augmented), mask ==
 * low byte of band 0 pixel for pixel (always). */
static uint64_t check_epoch(cf_loader *ld, int exact, cf_window *log,
                            size_t logn) {
    cf_loader_layout L;
    cf_loader_get_layout(ld, &L);
    CHECK(L.channels == 2 && L.has_mask && L.dtype == CF_DT_U16);
    uint32_t P = L.patch_size;
    uint64_t got = 0;
    cf_batch b;
    cf_error e;
    cf_status st;
    while ((st = cf_loader_next(ld, &b, &e)) == CF_OK) {
        const uint16_t *img = b.image;
        const uint8_t *m = b.mask;
        for (uint32_t s = 0; s < b.n; s++) {
            const cf_window *w = &b.windows[s];
            if (got < logn) log[got] = *w;
            got++;
            for (uint32_t i = 0; i < P; i++)
                for (uint32_t j = 0; j < P; j++) {
                    uint16_t v0 = img[((size_t)s * 2 + 0) * P * P + i * P + j];
                    uint16_t v1 = img[((size_t)s * 2 + 1) * P * P + i * P + j];
                    uint8_t mv = m[(size_t)s * P * P + i * P + j];
                    CHECK(mv == (v0 & 0xff));
                    CHECK((uint16_t)(v1 - v0) == 10007);
                    if (exact && !w->aug)
                        CHECK(v0 == F(w->x + j, w->y + i, 0));
                    if (mv != (v0 & 0xff)) return got;
                }
        }
        cf_loader_release(ld, &b);
    }
    CHECK(st == CF_E_END);
    return got;
}

static void test_values_all_samplers(void) {
    for (int k = 0; k <= CF_SAMPLER_GRID; k++) {
        cf_loader *ld = make((cf_sampler_kind)k, 0, 3, 3, 37);
        if (!ld) continue;
        cf_loader_layout L;
        cf_loader_get_layout(ld, &L);
        uint64_t n = check_epoch(ld, 1, NULL, 0);
        CHECK(n == L.samples);
        CHECK(L.batches == (L.samples + 4) / 5);
        cf_loader_stats s;
        cf_loader_get_stats(ld, &s);
        CHECK(s.samples == n && s.skipped == 0);
        CHECK(s.bytes_decoded > 0 && s.bytes_delivered > 0);
        if (k == CF_SAMPLER_TILE_SHUFFLE) CHECK(s.cache_hits > 0);
        cf_loader_free(ld);
    }
}

static void test_augment_consistency(void) {
    cf_loader *ld = make(CF_SAMPLER_RANDOM, CF_AUG_FLIP | CF_AUG_ROT90, 2, 2,
                         60);
    if (!ld) return;
    cf_window log[60];
    uint64_t n = check_epoch(ld, 1, log, 60);
    CHECK(n == 60);
    int augmented = 0;
    for (int i = 0; i < 60; i++) augmented += log[i].aug != 0;
    CHECK(augmented > 30);
    cf_loader_free(ld);
}

/* Resuming at batch 3 gives exactly the windows of an uninterrupted run,
 * and the next epoch differs. */
static void test_resume(void) {
    cf_loader *a = make(CF_SAMPLER_RANDOM, CF_AUG_FLIP, 4, 4, 40);
    cf_loader *b = make(CF_SAMPLER_RANDOM, CF_AUG_FLIP, 1, 2, 40);
    if (!a || !b) return;
    cf_window wa[40], wb[40];
    CHECK(check_epoch(a, 1, wa, 40) == 40);
    cf_error e;
    CHECK(cf_loader_set_epoch(b, 0, 3, &e) == CF_OK);
    CHECK(check_epoch(b, 1, wb, 40) == 25);
    CHECK(memcmp(wa + 15, wb, 25 * sizeof *wa) == 0);
    uint64_t ep, nb;
    cf_loader_position(b, &ep, &nb);
    CHECK(ep == 0 && nb == 8);
    CHECK(cf_loader_set_epoch(a, 1, 0, &e) == CF_OK);
    CHECK(check_epoch(a, 1, wb, 40) == 40);
    CHECK(memcmp(wa, wb, sizeof wa) != 0);
    cf_loader_free(a);
    cf_loader_free(b);
}

/* With one batch held and the consumer asleep, readers stop after filling
 * the other slots: the work done ahead is bounded by prefetch. */
static void test_backpressure(void) {
    cf_loader *ld = make(CF_SAMPLER_RANDOM, 0, 4, 3, 500);
    if (!ld) return;
    cf_batch b;
    cf_error e;
    CHECK(cf_loader_next(ld, &b, &e) == CF_OK);
    usleep(300 * 1000);
    cf_loader_stats s;
    cf_loader_get_stats(ld, &s);
    size_t per_sample = 24 * 24 * (2 * 2 + 1);
    CHECK(s.bytes_decoded <= (uint64_t)3 * 5 * per_sample);
    CHECK(s.bytes_decoded >= (uint64_t)2 * 5 * per_sample);
    /* Holding every slot is refused instead of deadlocking. */
    cf_batch b2, b3;
    CHECK(cf_loader_next(ld, &b2, &e) == CF_OK);
    CHECK(cf_loader_next(ld, &b3, &e) == CF_OK);
    cf_batch b4;
    CHECK(cf_loader_next(ld, &b4, &e) == CF_E_STATE);
    cf_loader_release(ld, &b);
    cf_loader_release(ld, &b2);
    cf_loader_release(ld, &b3);
    cf_loader_free(ld); /* with readers mid-epoch */
}

/* The file goes bad after it was opened (truncated: its last 4 tiles are
 * gone), as when an object is replaced mid-epoch. */
/* cf_loader_wait: bounded waits, then the batch comes without blocking;
 * at the end of the epoch it reports "ready" (next returns CF_E_END). */
static void test_wait(void) {
    cf_loader *ld = make(CF_SAMPLER_GRID, 0, 2, 2, 0);
    if (!ld) return;
    cf_loader_layout L;
    cf_loader_get_layout(ld, &L);
    cf_batch b;
    cf_error e;
    for (uint64_t i = 0; i < L.batches; i++) {
        int spins = 0;
        while (!cf_loader_wait(ld, 0.001) && spins < 100000) spins++;
        CHECK(spins < 100000);
        CHECK(cf_loader_next(ld, &b, &e) == CF_OK && b.index == i);
        cf_loader_release(ld, &b);
    }
    CHECK(cf_loader_wait(ld, 10) == 1);
    CHECK(cf_loader_next(ld, &b, &e) == CF_E_END);
    cf_loader_free(ld);
}

/* cf_loader_close from another thread while the consumer takes batches
 * as fast as it can (TSan runs this): the consumer stops with CF_E_STATE,
 * nothing hangs, and what follows refuses politely. */
typedef struct consumer_arg {
    cf_loader *ld;
    cf_status last;
    int batches;
} consumer_arg;

static void *consume_all(void *p) {
    consumer_arg *a = p;
    cf_batch b;
    cf_error e;
    while ((a->last = cf_loader_next(a->ld, &b, &e)) == CF_OK) {
        a->batches++;
        cf_loader_release(a->ld, &b);
    }
    return NULL;
}

/* Open descriptors of this process (those of /proc/self/fd itself aside). */
static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;
}

/* close() while a consumer waits: it wakes with CF_E_STATE; the files are
 * closed at once (the process has the descriptors it had before the
 * loader), and stats keep their last counts. */
static void test_close_while_reading(void) {
    for (int round = 0; round < 3; round++) {
        int fds = count_fds();
        cf_loader *ld = make(CF_SAMPLER_RANDOM, 0, 4, 3, 1000000);
        if (!ld) return;
        consumer_arg a = {ld, CF_OK, 0};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, consume_all, &a) == 0);
        usleep((useconds_t)(20000 * round)); /* 0, 20, 40 ms in */
        cf_loader_close(ld);
        cf_loader_close(ld); /* twice is fine */
        pthread_join(th, NULL);
        CHECK(a.last == CF_E_STATE);
        cf_batch b;
        cf_error e;
        CHECK(cf_loader_next(ld, &b, &e) == CF_E_STATE && strstr(e.msg, "closed"));
        CHECK(cf_loader_wait(ld, 10) == 1);
        CHECK(cf_loader_set_epoch(ld, 1, 0, &e) == CF_E_STATE);
        CHECK(count_fds() == fds);
        cf_loader_stats s1, s2;
        cf_loader_get_stats(ld, &s1);
        cf_loader_get_stats(ld, &s2);
        CHECK(s1.requests == s2.requests && s1.io_inflight == 0);
        CHECK(round == 0 || s1.requests > 0);
        cf_loader_free(ld);
    }
}

static void test_bad_tile(int skip) {
    write_tiff(bad, 128, 128, 32, 0, -1);
    const char *imgs[] = {img_a, bad};
    const char *msks[] = {msk_a, bad_m};
    cf_loader_options o;
    cf_loader_options_init(&o);
    o.images = imgs;
    o.masks = msks;
    o.ungeoreferenced = 1;
    o.nfiles = 2;
    o.patch_size = 32;
    o.batch_size = 4;
    o.sampler = CF_SAMPLER_GRID;
    o.skip_errors = skip;
    o.threads = 2;
    cf_loader *ld;
    cf_error e;
    cf_status st = cf_loader_new(&o, &ld, &e);
    if (st != CF_OK) {
        fprintf(stderr, "loader_new: %s\n", e.msg);
        CHECK(st == CF_OK);
        return;
    }
    /* 16 tiles of 32x32x2x2 bytes end the file. */
    FILE *f = fopen(bad, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    CHECK(truncate(bad, size - 4 * 4096) == 0);
    cf_loader_layout L;
    cf_loader_get_layout(ld, &L);
    uint64_t ok = 0, failed_batches = 0;
    cf_batch b;
    for (;;) {
        st = cf_loader_next(ld, &b, &e);
        if (st == CF_E_END) break;
        if (st != CF_OK) {
            failed_batches++;
            CHECK(strstr(e.msg, "bad.tif") != NULL);
            CHECK(strstr(e.msg, "window") != NULL);
            continue;
        }
        ok += b.n;
        cf_loader_release(ld, &b);
    }
    cf_loader_stats s;
    cf_loader_get_stats(ld, &s);
    if (skip) {
        /* Grid 32 px over 32 px tiles: one window per tile; the 35
         * windows of a.tif come first, so samples 47..50 fail. */
        CHECK(failed_batches == 0 && s.skipped == 4);
        CHECK(ok + s.skipped == L.samples);
    } else {
        /* batches 11 (44..47) and 12 (48..50) fail */
        CHECK(L.samples == 51);
        CHECK(failed_batches == 2 && s.skipped == 0);
        CHECK(ok == 44);
    }
    cf_loader_free(ld);
}

/* A loader over the DEFLATE files with a given inflight_bytes. */
static cf_loader *make_z(cf_sampler_kind kind, size_t inflight, int skip,
                         double skip_limit, cf_error *e) {
    const char *imgs[] = {zimg_a, zimg_b};
    const char *msks[] = {zmsk_a, zmsk_b};
    cf_loader_options o;
    base_options(&o, imgs, msks, kind, 40);
    o.threads = 3;
    o.inflight_bytes = inflight;
    o.cache_bytes = 64 << 10;
    o.skip_errors = skip;
    o.skip_limit = skip_limit;
    cf_loader *ld = NULL;
    cf_status st = cf_loader_new(&o, &ld, e);
    if (st != CF_OK) fprintf(stderr, "loader_new: %s\n", e->msg);
    CHECK(st == CF_OK);
    return ld;
}

static void check_memory(cf_loader *ld) {
    cf_loader_stats s;
    cf_loader_get_stats(ld, &s);
    CHECK(s.memory_peak > 0 && s.memory_peak <= s.memory_budget);
    CHECK(s.memory_used <= s.memory_peak);
}

/* The memory budget.  A DEFLATE tile of za.tif (64 x 64 x 2 x uint16)
 * needs ~57 KB to decode (tile buffer, deflate state), one of zb.tif (32
 * px) ~38 KB; the loader gives decoding a quarter of inflight_bytes.
 * 232 KB: one decode at a time (kits wait for each other and free idle
 * contexts), every pixel still right and the buffers within the budget.
 * 200 KB: za's tiles can never be decoded: its samples fail with
 * CF_E_LIMIT naming za.tif, the level and the tile, before anything is
 * fetched, while zb's read; skip_errors (skip_limit 1) drops exactly
 * za's samples. */
static void test_budget(void) {
    cf_error e;
    for (int k = 0; k <= CF_SAMPLER_GRID; k++) {
        cf_loader *ld = make_z((cf_sampler_kind)k, 232 << 10, 0, 0.5, &e);
        if (!ld) continue;
        cf_loader_layout L;
        cf_loader_get_layout(ld, &L);
        CHECK(check_epoch(ld, 1, NULL, 0) == L.samples);
        check_memory(ld);
        cf_loader_free(ld);
    }
    cf_loader *ld = make_z(CF_SAMPLER_RANDOM, 200 << 10, 0, 0.5, &e);
    if (!ld) return;
    cf_batch b;
    cf_status st;
    int failed = 0, named = 0;
    while ((st = cf_loader_next(ld, &b, &e)) != CF_E_END) {
        if (st == CF_OK) {
            for (uint32_t i = 0; i < b.n; i++) CHECK(b.windows[i].file == 1);
            cf_loader_release(ld, &b);
            continue;
        }
        failed++;
        named += st == CF_E_LIMIT && strstr(e.msg, "za.tif") &&
                 strstr(e.msg, "level 0, tile ") && strstr(e.msg, "inflight_bytes") &&
                 !strstr(e.msg, "?");
    }
    CHECK(failed > 0 && named == failed);
    check_memory(ld);
    cf_loader_free(ld);

    ld = make_z(CF_SAMPLER_RANDOM, 200 << 10, 1, 1.0, &e);
    if (!ld) return;
    cf_loader_layout L;
    cf_loader_get_layout(ld, &L);
    uint64_t from_a = 0;
    for (uint64_t j = 0; j < L.samples; j++) {
        cf_window w;
        CHECK(cf_loader_window(ld, j, &w, &e) == CF_OK);
        from_a += w.file == 0;
    }
    uint64_t got = 0;
    while ((st = cf_loader_next(ld, &b, &e)) == CF_OK) {
        for (uint32_t i = 0; i < b.n; i++) CHECK(b.windows[i].file == 1);
        got += b.n;
        cf_loader_release(ld, &b);
    }
    CHECK(st == CF_E_END);
    cf_loader_stats s;
    cf_loader_get_stats(ld, &s);
    CHECK(from_a > 0 && s.skipped == from_a && got + from_a == L.samples);
    cf_loader_free(ld);
}

/* skip_errors with the default skip_limit (0.5): when most samples fail
 * (here every one of za.tif's, over half of them), batches fail with the
 * cause and say that skip_errors gave up, instead of coming out nearly
 * empty for ever; skip_limit outside [0, 1] is refused. */
static void test_skip_limit(void) {
    cf_error e;
    cf_loader *ld = make_z(CF_SAMPLER_GRID, 200 << 10, 1, 0.5, &e);
    if (!ld) return;
    cf_loader_layout L;
    cf_loader_get_layout(ld, &L);
    cf_batch b;
    cf_status st;
    int gave_up = 0;
    for (int epoch = 0; epoch < 4; epoch++) {
        while ((st = cf_loader_next(ld, &b, &e)) != CF_E_END) {
            if (st == CF_OK) {
                cf_loader_release(ld, &b);
                continue;
            }
            CHECK(st == CF_E_LIMIT && strstr(e.msg, "za.tif"));
            gave_up += strstr(e.msg, "skip_errors gave up") != NULL;
        }
        CHECK(cf_loader_set_epoch(ld, (uint64_t)epoch + 1, 0, &e) == CF_OK);
    }
    CHECK(gave_up > 0);
    cf_loader_free(ld);
    const char *imgs[] = {zimg_a};
    cf_loader_options o;
    cf_loader_options_init(&o);
    CHECK(o.skip_limit == 0.5);
    o.images = imgs;
    o.nfiles = 1;
    o.skip_limit = 1.5;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG && strstr(e.msg, "skip_limit"));
}

static void test_misaligned(void) {
    const char *imgs[] = {img_a};
    const char *msks[] = {msk_b};
    cf_loader_options o;
    cf_loader_options_init(&o);
    o.images = imgs;
    o.masks = msks;
    o.nfiles = 1;
    cf_loader *ld;
    cf_error e;
    /* Neither file is georeferenced: refused unless asked for, and then
     * only when the sizes agree. */
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG);
    CHECK(strstr(e.msg, "not aligned") && strstr(e.msg, "b_mask.tif") &&
          strstr(e.msg, "georeferencing"));
    const char *same[] = {msk_a};
    o.masks = same;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG && strstr(e.msg, "a_mask.tif"));
    o.ungeoreferenced = 1;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
    /* Its patches have no grid to say where they are. */
    cf_window win;
    memset(&win, 0, sizeof win);
    win.w = win.h = 8;
    cf_grid g;
    CHECK(cf_loader_window_grid(ld, &win, &g, &e) == CF_E_STATE &&
          strstr(e.msg, "georeferencing"));
    cf_loader_free(ld);
    o.masks = msks;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG);
    CHECK(strstr(e.msg, "not aligned") && strstr(e.msg, "b_mask.tif") && strstr(e.msg, "size"));
    /* A missing file names itself. */
    const char *missing[] = {"/nonexistent/x.tif"};
    o.images = missing;
    o.masks = NULL;
    CHECK(cf_loader_new(&o, &ld, &e) != CF_OK);
    CHECK(strstr(e.msg, "x.tif") != NULL);
    /* Long paths (three 200-byte folders deep) are cut in the middle: a
     * message that names two of them still says why. */
    char deep[1200], limg[1300], lmsk[1300];
    int n = snprintf(deep, sizeof deep, "%s", dir);
    for (int i = 0; i < 3; i++) {
        n += snprintf(deep + n, sizeof deep - (size_t)n, "/%0200d", i);
        mkdir(deep, 0700);
    }
    snprintf(limg, sizeof limg, "%s/img_a.tif", deep);
    snprintf(lmsk, sizeof lmsk, "%s/b_mask.tif", deep);
    CHECK(symlink(img_a, limg) == 0 && symlink(msk_b, lmsk) == 0);
    const char *limgs[] = {limg}, *lmsks[] = {lmsk};
    o.images = limgs;
    o.masks = lmsks;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG);
    CHECK(strstr(e.msg, "img_a.tif") && strstr(e.msg, "b_mask.tif") &&
          strstr(e.msg, "not aligned") && strstr(e.msg, dir) &&
          strlen(e.msg) < sizeof e.msg - 1);
    char gone[1300];
    snprintf(gone, sizeof gone, "%s/gone_1.tif", deep);
    const char *lmissing[] = {gone};
    o.images = lmissing;
    o.masks = NULL;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_NOTFOUND);
    CHECK(strstr(e.msg, "gone_1.tif: cannot open") != NULL);
}

/* A stack on one grid from files on others: a layer at twice the pixel
 * size and one shifted by half a pixel (resampled, bilinear), a mask
 * shifted by whole pixels (read as it is).  Every patch equals
 * cf_cog_read_grid of each input onto the patch's grid; many readers at
 * once share the decoded tiles of the coarse layer (the chunk cache). */
static void test_grids(void) {
    char img[600], coarse[600], half[600], msk[600];
    snprintf(img, sizeof img, "%s/g_img.tif", dir);
    snprintf(coarse, sizeof coarse, "%s/g_coarse.tif", dir);
    snprintf(half, sizeof half, "%s/g_half.tif", dir);
    snprintf(msk, sizeof msk, "%s/g_mask.tif", dir);
    geo_x0 = 1000, geo_y0 = 5000, geo_res = 10;
    write_tiff_ex(img, 160, 128, 32, 0, -1, 1);
    geo_res = 20;
    write_tiff_ex(coarse, 90, 70, 32, 0, -1, 1);
    geo_x0 = 1005, geo_res = 10;
    write_tiff_ex(half, 160, 128, 32, 0, -1, 0);
    geo_x0 = 1030, geo_y0 = 4980;
    write_tiff_ex(msk, 150, 120, 32, 1, -1, 0);
    geo_res = 0;
    const char *imgs[] = {img}, *msks[] = {msk}, *lays[] = {coarse, half};
    cf_loader_options o;
    cf_loader_options_init(&o);
    CHECK(o.resampling == CF_RS_BILINEAR && o.mask_resampling == CF_RS_NEAREST && o.reproject);
    o.images = imgs;
    o.masks = msks;
    o.layers = lays;
    o.nlayers = 2;
    o.nfiles = 1;
    o.patch_size = 24;
    o.batch_size = 4;
    o.sampler = CF_SAMPLER_RANDOM;
    o.epoch_length = 48;
    o.max_inflight = 6;
    o.seed = 5;
    cf_loader *ld;
    cf_error e;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
    if (!ld) return;
    cf_cog *cogs[4];
    const char *paths[4] = {img, coarse, half, msk};
    for (int k = 0; k < 4; k++) CHECK(cf_cog_open(NULL, paths[k], &cogs[k], &e) == CF_OK);
    uint16_t want[2 * 24 * 24];
    uint8_t wmask[24 * 24];
    cf_batch b;
    int n = 0, differ = 0;
    while (cf_loader_next(ld, &b, &e) == CF_OK) {
        for (uint32_t i = 0; i < b.n; i++, n++) {
            cf_grid g;
            CHECK(cf_loader_window_grid(ld, &b.windows[i], &g, &e) == CF_OK);
            const uint16_t *got = (const uint16_t *)b.image + (size_t)i * 6 * 24 * 24;
            for (int k = 0; k < 3; k++) {
                cf_warp_options wo;
                cf_warp_options_init(&wo);
                wo.resampling = CF_RS_BILINEAR;
                CHECK(cf_cog_read_grid(cogs[k], &g, NULL, 0, &wo, want, sizeof want, &e) ==
                      CF_OK);
                differ += memcmp(got + (size_t)k * 2 * 24 * 24, want, sizeof want) != 0;
            }
            CHECK(cf_cog_read_grid(cogs[3], &g, NULL, 0, NULL, wmask, sizeof wmask, &e) ==
                  CF_OK);
            differ += memcmp((const uint8_t *)b.mask + (size_t)i * 24 * 24, wmask,
                          sizeof wmask) != 0;
        }
        cf_loader_release(ld, &b);
    }
    CHECK(n == 48 && differ == 0);
    cf_loader_stats st;
    cf_loader_get_stats(ld, &st);
    CHECK(st.cache_hits > 0);
    for (int k = 0; k < 4; k++) cf_cog_close(cogs[k]);
    cf_loader_free(ld);
    /* The same files without reprojection allowed still load (one CRS). */
    o.reproject = 0;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
    cf_loader_free(ld);
}

static void test_float_normalise(void) {
    const char *imgs[] = {img_a};
    float mean[2] = {100, 200}, sd[2] = {2, 4};
    cf_loader_options o;
    cf_loader_options_init(&o);
    o.images = imgs;
    o.nfiles = 1;
    o.patch_size = 16;
    o.batch_size = 2;
    o.sampler = CF_SAMPLER_GRID;
    o.out_dtype = CF_DT_F32;
    o.mean = mean;
    o.std = sd;
    o.epoch_length = 4;
    cf_loader *ld;
    cf_error e;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
    cf_batch b;
    CHECK(cf_loader_next(ld, &b, &e) == CF_OK);
    const float *v = b.image;
    const cf_window *w = &b.windows[1];
    size_t P = 16;
    float want0 = ((float)F(w->x + 3, w->y + 2, 0) - 100) / 2;
    float want1 = ((float)F(w->x + 3, w->y + 2, 1) - 200) / 4;
    CHECK(fabsf(v[(2 + 0) * P * P + 2 * P + 3] - want0) < 1e-3f);
    CHECK(fabsf(v[(2 + 1) * P * P + 2 * P + 3] - want1) < 1e-3f);
    cf_loader_release(ld, &b);
    cf_loader_free(ld);
    /* With their lengths given, they must match the 2 channels. */
    o.nmean = o.nstd = 2;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
    cf_loader_free(ld);
    o.nmean = 3;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG &&
          strstr(e.msg, "one value per output channel (2), not 3 / 2"));
    /* A caller built before nmean / nstd: its struct ends before them, so
     * whatever lies there is not read (one value per channel, as then). */
    o.struct_size = offsetof(cf_loader_options, nmean);
    CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
    cf_loader_free(ld);
}

/* Where output pixel (c, r) of window w's P x P patch lies on the target
 * grid, its augmentation undone: rot90 k times, then flip (docs). */
static void grid_pixel(const cf_window *w, int P, int r, int c, int64_t *gx, int64_t *gy) {
    int k = (int)(w->aug & 3), rr = r, cc = (w->aug & 4) ? P - 1 - c : c;
    for (int q = 0; q < k; q++) {
        int t = rr;
        rr = cc;
        cc = P - 1 - t;
    }
    *gx = w->x + cc, *gy = w->y + rr;
}

/* n random 24 px patches of grid g, flipped and rotated, 6 readers. */
static void random_augmented(cf_loader_options *o, const cf_grid *g, uint64_t n) {
    o->grid = g;
    o->patch_size = 24;
    o->batch_size = 5;
    o->sampler = CF_SAMPLER_RANDOM;
    o->epoch_length = n;
    o->augment = CF_AUG_FLIP | CF_AUG_ROT90;
    o->threads = 6;
}

/* valid_mask and mosaic on a target grid larger than the scenes: scene
 * A (100 x 80 px) lies at target pixels (10, 10), scene B (same size) at
 * (60, 10); outside both, nothing.  valid is 1 exactly inside the scenes
 * read; a mosaic of A then B takes A where A lies, B elsewhere; many
 * readers at once (the sanitizer builds run this). */
static void test_valid_and_mosaic(void) {
    char va[600], vb[600], ma[600], mb[600];
    snprintf(va, sizeof va, "%s/v_a.tif", dir);
    snprintf(vb, sizeof vb, "%s/v_b.tif", dir);
    snprintf(ma, sizeof ma, "%s/v_ma.tif", dir);
    snprintf(mb, sizeof mb, "%s/v_mb.tif", dir);
    geo_res = 10, geo_y0 = 1000;
    geo_x0 = 0;
    write_tiff_ex(va, 100, 80, 32, 0, -1, 1);
    write_tiff_ex(ma, 100, 80, 16, 1, -1, 0); /* classes: F's low byte */
    geo_x0 = 500;
    write_tiff_ex(vb, 100, 80, 32, 0, -1, 0);
    write_tiff_ex(mb, 100, 80, 16, 1, -1, 1);
    geo_res = 0;
    /* Scene masks: classes below 50 are no data of their scene. */
    double classes[50];
    for (int c = 0; c < 50; c++) classes[c] = c;
    cf_grid g = {.crs = NULL, .transform = {-100, 10, 0, 1100, 0, -10}, .width = 180,
                 .height = 100};
    for (int variant = 0; variant < 3; variant++) {
        const int mosaic = variant > 0, scm = variant == 2;
        const char *one[] = {va}, *two[] = {va, vb}, *masks2[] = {ma, mb};
        cf_loader_options o;
        cf_loader_options_init(&o);
        CHECK(!o.valid_mask && !o.mosaic);
        o.images = mosaic ? two : one;
        o.nfiles = 1;
        o.time_steps = mosaic ? 2 : 1;
        o.mosaic = mosaic;
        o.valid_mask = 1;
        if (scm) {
            o.scene_masks = masks2;
            o.invalid_classes = classes;
            o.ninvalid_classes = 50;
        }
        random_augmented(&o, &g, 60);
        cf_loader *ld;
        cf_error e;
        CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
        if (!ld) continue;
        cf_loader_layout L;
        cf_loader_get_layout(ld, &L);
        CHECK(L.time_steps == 1 && L.channels == 2);
        cf_batch b;
        int n = 0, wrong = 0, holes = 0, from_b = 0;
        while (cf_loader_next(ld, &b, &e) == CF_OK) {
            const uint8_t *valid = cf_loader_batch_valid(ld, &b);
            CHECK(valid != NULL);
            for (uint32_t i = 0; valid && i < b.n; i++, n++) {
                const cf_window *w = &b.windows[i];
                const uint16_t *img = (const uint16_t *)b.image + (size_t)i * 2 * 24 * 24;
                for (int r = 0; r < 24; r++)
                    for (int c = 0; c < 24; c++) {
                        int64_t gx, gy; /* where output pixel (c, r) came from */
                        grid_pixel(w, 24, r, c, &gx, &gy);
                        int in_a = gx >= 10 && gx < 110 && gy >= 10 && gy < 90;
                        int in_b = mosaic && gx >= 60 && gx < 160 && gy >= 10 && gy < 90;
                        /* A scene's pixel is data when its class is not
                         * below 50. */
                        int ok_a = in_a && (!scm || (F(gx - 10, gy - 10, 0) & 0xff) >= 50);
                        int ok_b = in_b && (!scm || (F(gx - 60, gy - 10, 0) & 0xff) >= 50);
                        uint8_t v = valid[(size_t)i * 24 * 24 + (size_t)r * 24 + c];
                        uint16_t p0 = img[(size_t)r * 24 + c], p1 = img[576 + (size_t)r * 24 + c];
                        uint16_t w0 = 0, w1 = 0;
                        if (ok_a || (in_a && !ok_b))
                            w0 = F(gx - 10, gy - 10, 0), w1 = F(gx - 10, gy - 10, 1);
                        else if (ok_b) w0 = F(gx - 60, gy - 10, 0), w1 = F(gx - 60, gy - 10, 1);
                        wrong += v != (ok_a || ok_b) || p0 != w0 || p1 != w1;
                        holes += !v;
                        from_b += !ok_a && ok_b;
                    }
            }
            cf_loader_release(ld, &b);
        }
        CHECK(n == 60 && wrong == 0 && holes > 0 && (from_b > 0) == mosaic);
        cf_loader_free(ld);
    }
}

/* A time series of mosaics (step_scenes): three steps of two scenes each,
 * [A, B], [B, A] and [A, A] (a date of one scene, padded by repeating
 * it), with scene masks and one valid plane per step (valid_per_step).
 * Each step is its own mosaic: the first of its scenes with data gives a
 * pixel, else its first scene's own value; valid is per step.  Uses the
 * files of test_valid_and_mosaic. */
static void test_series_of_mosaics(void) {
    char va[600], vb[600], ma[600], mb[600];
    snprintf(va, sizeof va, "%s/v_a.tif", dir);
    snprintf(vb, sizeof vb, "%s/v_b.tif", dir);
    snprintf(ma, sizeof ma, "%s/v_ma.tif", dir);
    snprintf(mb, sizeof mb, "%s/v_mb.tif", dir);
    double classes[50];
    for (int c = 0; c < 50; c++) classes[c] = c;
    cf_grid g = {.crs = NULL, .transform = {-100, 10, 0, 1100, 0, -10}, .width = 180,
                 .height = 100};
    const char *imgs[] = {va, vb, vb, va, va, va}, *scms[] = {ma, mb, mb, ma, ma, ma};
    for (int f32 = 0; f32 < 2; f32++) {
        cf_loader_options o;
        cf_loader_options_init(&o);
        CHECK(o.step_scenes == 0 && !o.valid_per_step);
        o.images = imgs;
        o.nfiles = 1;
        o.time_steps = 6;
        o.mosaic = 1;
        o.step_scenes = 2;
        o.valid_mask = 1;
        o.valid_per_step = 1;
        o.scene_masks = scms;
        o.invalid_classes = classes;
        o.ninvalid_classes = 50;
        o.out_dtype = f32 ? CF_DT_F32 : CF_DT_UNKNOWN;
        random_augmented(&o, &g, 40);
        cf_loader *ld;
        cf_error e;
        CHECK(cf_loader_new(&o, &ld, &e) == CF_OK);
        if (!ld) continue;
        cf_loader_layout L;
        cf_loader_get_layout(ld, &L);
        CHECK(L.time_steps == 3 && L.channels == 2);
        cf_batch b;
        int n = 0, wrong = 0, differ = 0;
        while (cf_loader_next(ld, &b, &e) == CF_OK) {
            const uint8_t *valid = cf_loader_batch_valid(ld, &b);
            CHECK(valid != NULL);
            for (uint32_t i = 0; valid && i < b.n; i++, n++) {
                const cf_window *w = &b.windows[i];
                for (int r = 0; r < 24; r++)
                    for (int c = 0; c < 24; c++) {
                        int64_t gx, gy;
                        grid_pixel(w, 24, r, c, &gx, &gy);
                        /* scene 0 is A, 1 is B: where each lies and has
                         * data (its class not below 50) */
                        int64_t x0[2] = {10, 60};
                        int in[2], ok[2];
                        for (int s = 0; s < 2; s++) {
                            in[s] = gx >= x0[s] && gx < x0[s] + 100 && gy >= 10 && gy < 90;
                            ok[s] = in[s] && (F(gx - x0[s], gy - 10, 0) & 0xff) >= 50;
                        }
                        const int order[3][2] = {{0, 1}, {1, 0}, {0, 0}};
                        int v_step[3];
                        for (int t = 0; t < 3; t++) {
                            int s1 = order[t][0], s2 = order[t][1];
                            int from = ok[s1] ? s1 : ok[s2] ? s2 : in[s1] ? s1 : -1;
                            size_t px = (size_t)r * 24 + c;
                            size_t base = ((size_t)i * 3 + (size_t)t) * 2 * 576;
                            double p0, p1;
                            if (f32) {
                                const float *im = (const float *)b.image;
                                p0 = im[base + px], p1 = im[base + 576 + px];
                            } else {
                                const uint16_t *im = (const uint16_t *)b.image;
                                p0 = im[base + px], p1 = im[base + 576 + px];
                            }
                            double w0 = 0, w1 = 0;
                            if (from >= 0)
                                w0 = F(gx - x0[from], gy - 10, 0),
                                w1 = F(gx - x0[from], gy - 10, 1);
                            v_step[t] = valid[((size_t)i * 3 + (size_t)t) * 576 + px];
                            wrong += v_step[t] != (ok[s1] || ok[s2]) || p0 != w0 || p1 != w1;
                        }
                        differ += v_step[0] != v_step[2];
                    }
            }
            cf_loader_release(ld, &b);
        }
        CHECK(n == 40 && wrong == 0 && differ > 0);
        cf_loader_free(ld);
    }
    /* step_scenes needs mosaic and must divide time_steps; valid_per_step
     * needs valid_mask. */
    for (int wrong_opt = 0; wrong_opt < 3; wrong_opt++) {
        cf_loader_options o;
        cf_loader_options_init(&o);
        o.images = imgs;
        o.nfiles = 1;
        o.time_steps = 6;
        o.mosaic = wrong_opt != 0;
        o.step_scenes = wrong_opt == 1 ? 4 : 2;
        o.valid_per_step = wrong_opt == 2;
        cf_loader *ld = NULL;
        cf_error e;
        CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG);
        CHECK(strstr(e.msg, wrong_opt == 2 ? "valid_per_step" : "step_scenes") != NULL);
        cf_loader_free(ld);
    }
}


/* Described inputs (cf_loader_options.described): a mosaic of A, B and a
 * third scene C far outside the grid, each described (no header read as
 * the loader starts), gives the batches of the same mosaic with every
 * header read; C's path names no file at all, so the loader never opening
 * it is what lets the epoch succeed (its footprint misses every patch).
 * A description that disagrees with its file fails the sample reading it,
 * naming the file and the difference; a wrong count of descriptions is
 * refused.  Many readers open A and B at once (the sanitizer builds run
 * this).  Uses the files of test_valid_and_mosaic. */
static void test_described(void) {
    char va[600], vb[600], gone[600];
    snprintf(va, sizeof va, "%s/v_a.tif", dir);
    snprintf(vb, sizeof vb, "%s/v_b.tif", dir);
    snprintf(gone, sizeof gone, "%s/no_such_scene.tif", dir);
    cf_grid g = {.crs = NULL, .transform = {-100, 10, 0, 1100, 0, -10}, .width = 180,
                 .height = 100};
    cf_input_desc d[3];
    memset(d, 0, sizeof d);
    const double x0[3] = {0, 500, 90000};
    for (int k = 0; k < 3; k++) {
        d[k].grid = (cf_grid){.crs = NULL, .transform = {x0[k], 10, 0, 1000, 0, -10},
                              .width = 100, .height = 80};
        d[k].dtype = CF_DT_U16;
        d[k].count = 2;
    }
    const char *eager_imgs[] = {va, vb, vb}, *lazy_imgs[] = {va, vb, gone};
    cf_loader *ld[2] = {NULL, NULL};
    for (int lazy = 0; lazy < 2; lazy++) {
        cf_loader_options o;
        cf_loader_options_init(&o);
        o.images = lazy ? lazy_imgs : eager_imgs;
        o.nfiles = 1;
        o.time_steps = 3;
        o.mosaic = 1;
        o.valid_mask = 1;
        random_augmented(&o, &g, 80);
        o.threads = 8;
        o.described = lazy ? d : NULL;
        o.ndescribed = lazy ? 3 : 0;
        cf_error e;
        cf_status st = cf_loader_new(&o, &ld[lazy], &e);
        if (st != CF_OK) fprintf(stderr, "described: %s\n", e.msg);
        CHECK(st == CF_OK);
    }
    if (!ld[0] || !ld[1]) goto done;
    cf_batch b[2];
    cf_error e;
    int n = 0, differ = 0;
    for (;;) {
        cf_status s0 = cf_loader_next(ld[0], &b[0], &e);
        cf_status s1 = cf_loader_next(ld[1], &b[1], &e);
        if (s1 != CF_OK && s1 != CF_E_END) fprintf(stderr, "described: %s\n", e.msg);
        CHECK(s0 == s1);
        if (s0 != CF_OK || s1 != CF_OK) break;
        CHECK(b[0].n == b[1].n);
        const size_t px = (size_t)b[0].n * 24 * 24;
        differ += memcmp(b[0].image, b[1].image, px * 2 * 2) != 0;
        differ += memcmp(cf_loader_batch_valid(ld[0], &b[0]), cf_loader_batch_valid(ld[1], &b[1]),
                         px) != 0;
        differ += memcmp(b[0].windows, b[1].windows, b[0].n * sizeof *b[0].windows) != 0;
        n += (int)b[0].n;
        cf_loader_release(ld[0], &b[0]);
        cf_loader_release(ld[1], &b[1]);
    }
    CHECK(n == 80 && differ == 0);
    /* A described size the file does not have: the first sample fails,
     * naming the file and both sizes. */
    {
        cf_loader_free(ld[1]);
        ld[1] = NULL;
        d[0].grid.width = 99;
        cf_loader_options o;
        cf_loader_options_init(&o);
        o.images = lazy_imgs;
        o.nfiles = 1;
        o.time_steps = 3;
        o.mosaic = 1;
        random_augmented(&o, &g, 10);
        o.described = d;
        o.ndescribed = 3;
        CHECK(cf_loader_new(&o, &ld[1], &e) == CF_OK);
        cf_batch bb;
        cf_status st = ld[1] ? cf_loader_next(ld[1], &bb, &e) : CF_E_STATE;
        CHECK(st == CF_E_FORMAT && strstr(e.msg, "v_a.tif") &&
              strstr(e.msg, "100x80 pixels, described as 99x80"));
        d[0].grid.width = 100;
        /* One description per path, or none. */
        cf_loader *l2 = NULL;
        o.ndescribed = 2;
        CHECK(cf_loader_new(&o, &l2, &e) == CF_E_ARG && strstr(e.msg, "2 descriptions for 3"));
        cf_loader_free(l2);
    }
done:
    cf_loader_free(ld[0]);
    cf_loader_free(ld[1]);
}

int main(void) {
    fixtures();
    test_values_all_samplers();
    test_augment_consistency();
    test_resume();
    test_backpressure();
    test_wait();
    test_close_while_reading();
    test_bad_tile(0);
    test_bad_tile(1);
    test_misaligned();
    test_grids();
    test_float_normalise();
    test_valid_and_mosaic();
    test_series_of_mosaics();
    test_described();
    test_budget();
    test_skip_limit();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return CF_TEST_END();
}
