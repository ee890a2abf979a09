/*
 * test_pipeline_read.c - the reader's window logic on files built in
 * memory with known pixel values: tiles and strips, pixel and band
 * interleave, edge tiles, windows crossing tiles and lying outside the
 * image, band subsets, sparse tiles with nodata, bad requests, and many
 * threads reading one cog; cf_cog_read_many on the same windows.  (Bit-exactness against GDAL for every codec is
 * tests/python/test_conformance.py.)
 */
#include "cf_test.h"
#include "test_tiff_writer.h"

#define CF_STATIC_LINKING_ONLY /* cf_cog_open_memory */
#include "cogfeed.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define GARBAGE 0xABCD

static uint16_t val(int b, int64_t x, int64_t y) {
    return (uint16_t)((b * 7919 + x * 31 + y * 17) & 0x7fff);
}

typedef struct spec {
    uint32_t w, h, tw, th; /* tw = 0: strips of th rows */
    uint16_t spp, planar;
    int64_t sparse;        /* chunk index stored with byte count 0, or -1 */
    const char *nodata;    /* GDAL_NODATA or NULL */
    int64_t bad_offset;    /* chunk index given an offset past EOF, or -1 */
} spec;

/* Build an uncompressed uint16 TIFF; chunk padding holds GARBAGE so that
 * clipping mistakes show. */
static uint8_t *build(const spec *s, size_t *len) {
    tw w;
    tw_init(&w, false, false);
    uint32_t cw = s->tw ? s->tw : s->w, ch = s->th;
    uint32_t across = (s->w + cw - 1) / cw, down = (s->h + ch - 1) / ch;
    uint32_t planes = s->planar == 2 ? s->spp : 1, spc = s->planar == 2 ? 1 : s->spp;
    uint64_t n = (uint64_t)across * down * planes;
    uint64_t *off = calloc(n, 8), *cnt = calloc(n, 8);
    size_t *rows_of = calloc(n, sizeof *rows_of);
    for (uint64_t k = 0; k < n; k++) {
        uint32_t cy = (uint32_t)((k % ((uint64_t)across * down)) / across);
        uint32_t rows = ch;
        if (!s->tw && (uint64_t)cy * ch + ch > s->h) rows = s->h - cy * ch;
        rows_of[k] = rows;
        size_t bytes = (size_t)cw * rows * spc * 2;
        off[k] = tw_reserve(&w, bytes);
        cnt[k] = (int64_t)k == s->sparse ? 0 : bytes;
        if ((int64_t)k == s->bad_offset) off[k] = 1u << 30;
    }
    tw_new_ifd(&w);
    uint64_t bits[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    tw_int(&w, 256, 4, s->w);
    tw_int(&w, 257, 4, s->h);
    tw_ints(&w, 258, 3, s->spp, bits);
    tw_int(&w, 259, 3, 1);
    tw_int(&w, 262, 3, s->spp >= 3 ? 2 : 1);
    if (!s->tw) tw_ints(&w, 273, 4, n, off);
    tw_int(&w, 277, 3, s->spp);
    if (!s->tw) tw_int(&w, 278, 4, ch);
    if (!s->tw) tw_ints(&w, 279, 4, n, cnt);
    tw_int(&w, 284, 3, s->planar);
    if (s->tw) {
        tw_int(&w, 322, 4, s->tw);
        tw_int(&w, 323, 4, s->th);
        tw_ints(&w, 324, 4, n, off);
        tw_ints(&w, 325, 4, n, cnt);
    }
    if (s->nodata) tw_ascii(&w, 42113, s->nodata, true);
    size_t flen;
    tw_finish(&w, &flen);
    for (uint64_t k = 0; k < n; k++) {
        if ((int64_t)k == s->bad_offset) continue;
        uint64_t per_plane = (uint64_t)across * down;
        uint32_t plane = (uint32_t)(k / per_plane);
        uint32_t cx = (uint32_t)(k % per_plane % across), cy = (uint32_t)(k % per_plane / across);
        uint8_t *p = w.out + off[k];
        for (uint32_t r = 0; r < rows_of[k]; r++)
            for (uint32_t c = 0; c < cw; c++)
                for (uint32_t sm = 0; sm < spc; sm++) {
                    int64_t x = (int64_t)cx * cw + c, y = (int64_t)cy * ch + r;
                    int b = s->planar == 2 ? (int)plane : (int)sm;
                    uint16_t v = (x < s->w && y < s->h) ? val(b, x, y) : GARBAGE;
                    size_t i = (((size_t)r * cw + c) * spc + sm) * 2;
                    p[i] = (uint8_t)v;
                    p[i + 1] = (uint8_t)(v >> 8);
                }
    }
    uint8_t *out = malloc(flen);
    memcpy(out, w.out, flen);
    *len = flen;
    free(off);
    free(cnt);
    free(rows_of);
    tw_free(&w);
    return out;
}

/* Expected value of output band k at (x, y), given the file's layout. */
static uint16_t expect(const spec *s, const int *bands, int k, int64_t x, int64_t y,
                       uint16_t fill) {
    if (x < 0 || y < 0 || x >= s->w || y >= s->h) return fill;
    if (s->sparse >= 0) {
        uint32_t cw = s->tw ? s->tw : s->w;
        uint32_t across = (s->w + cw - 1) / cw, down = (s->h + s->th - 1) / s->th;
        uint64_t idx = (uint64_t)(y / s->th) * across + (uint64_t)(x / cw);
        if (s->planar == 2) idx += (uint64_t)(bands[k] - 1) * across * down;
        if ((int64_t)idx == s->sparse) return fill;
    }
    return val(bands[k] - 1, x, y);
}

/* Whether buf holds window (x, y, w, h) of bands. */
static int verify(const spec *s, int64_t x, int64_t y, uint32_t w, uint32_t h,
                  const int *bands, int nb, uint16_t fill, const uint16_t *buf) {
    int bad = 0;
    for (int k = 0; k < nb && !bad; k++)
        for (uint32_t r = 0; r < h && !bad; r++)
            for (uint32_t c = 0; c < w && !bad; c++) {
                uint16_t got = buf[((size_t)k * h + r) * w + c];
                uint16_t want = expect(s, bands, k, x + c, y + r, fill);
                if (got != want) {
                    fprintf(stderr, "window (%lld,%lld,%u,%u) band %d at (%u,%u): %u != %u\n",
                            (long long)x, (long long)y, w, h, bands[k], c, r, got, want);
                    bad = 1;
                }
            }
    return !bad;
}

static int check_window(cf_cog *cog, const spec *s, int64_t x, int64_t y, uint32_t w,
                        uint32_t h, const int *bands, int nb, uint16_t fill) {
    size_t n = (size_t)w * h * (size_t)nb;
    uint16_t *buf = malloc(n * 2);
    cf_error err = {0};
    cf_status st = cf_cog_read(cog, 0, x, y, w, h, bands, nb, buf, n * 2, &err);
    if (st) fprintf(stderr, "read failed: %s\n", err.msg);
    int ok = !st && verify(s, x, y, w, h, bands, nb, fill, buf);
    free(buf);
    return ok;
}

/* cf_cog_read_many: 40 windows of one file at once (edges, outside, band
 * subsets), with 1 and 3 decoders and an in-flight budget of one chunk (a
 * file's tiles then go one per batch; in-memory files need no budget); one
 * bad window fails alone; a budget one byte short of a chunk fails every
 * window that needs one with CF_E_LIMIT naming the file, level and chunk,
 * before reading it (in-memory files fetch nothing: they still read). */
static void check_many(cf_cog *cog, const spec *s, uint16_t fill, const char *label,
                       int in_memory) {
    enum { N = 40 };
    static const int all[3] = {1, 2, 3}, rev[2] = {3, 1}, bad[1] = {9};
    cf_read_req q[N];
    uint16_t *bufs[N];
    const uint32_t cw = s->tw ? s->tw : s->w;
    const size_t chunk = (size_t)cw * s->th * (s->planar == 2 ? 1 : s->spp) * 2;
    for (int run = 0; run < 4; run++) {
        memset(q, 0, sizeof q);
        cf_error errs[N], err = {0};
        for (int i = 0; i < N; i++) {
            cf_read_req *r = &q[i];
            r->cog = cog;
            r->x = (int64_t)((i * 37) % (s->w + 20)) - 10;
            r->y = (int64_t)((i * 23) % (s->h + 20)) - 10;
            r->w = 1 + (uint32_t)(i * 7) % 45;
            r->h = 1 + (uint32_t)(i * 11) % 33;
            r->bands = i % 3 == 0 ? NULL : i % 3 == 1 ? rev : all;
            r->nbands = i % 3 == 0 ? 0 : i % 3 == 1 ? 2 : s->spp;
            if (run == 2 && i == 17) {
                r->bands = bad;
                r->nbands = 1;
            }
            r->dst_size = (size_t)r->w * r->h * 3 * 2;
            r->dst = bufs[i] = malloc(r->dst_size);
            r->err = &errs[i];
        }
        int threads = run == 1 ? 1 : 3;
        size_t budget = run == 1 ? chunk : run == 3 ? chunk - 1 : 0;
        cf_status st = cf_cog_read_many(q, N, threads, budget, &err);
        if (run == 3) {
            int limited = 0;
            for (int i = 0; i < N; i++) {
                if (q[i].status == CF_E_LIMIT) {
                    limited++;
                    CHECK(strstr(errs[i].msg, label) && strstr(errs[i].msg, "level 0, ") &&
                          (strstr(errs[i].msg, "tile ") || strstr(errs[i].msg, "strip ")) &&
                          strstr(errs[i].msg, "inflight_bytes"));
                } else {
                    CHECK(q[i].status == CF_OK);
                    CHECK(verify(s, q[i].x, q[i].y, q[i].w, q[i].h,
                                 q[i].bands ? q[i].bands : all,
                                 q[i].bands ? q[i].nbands : s->spp, fill, bufs[i]));
                }
                free(bufs[i]);
            }
            CHECK(in_memory ? limited == 0 && st == CF_OK : limited > 0 && st == CF_E_LIMIT);
            continue;
        }
        CHECK(st == (run == 2 ? CF_E_ARG : CF_OK));
        if (run == 2) CHECK(strstr(err.msg, label) && strstr(err.msg, "band 9"));
        for (int i = 0; i < N; i++) {
            if (run == 2 && i == 17) {
                CHECK(q[i].status == CF_E_ARG && strstr(errs[i].msg, "band 9"));
            } else {
                CHECK(q[i].status == CF_OK);
                CHECK(verify(s, q[i].x, q[i].y, q[i].w, q[i].h, q[i].bands ? q[i].bands : all,
                             q[i].bands ? q[i].nbands : s->spp, fill, bufs[i]));
            }
            free(bufs[i]);
        }
    }
    cf_error err = {0};
    CHECK(cf_cog_read_many(NULL, 0, 0, 0, &err) == CF_OK);
    CHECK(cf_cog_read_many(q, 1, -1, 0, &err) == CF_E_ARG);
}

static void run_layout(const spec *s, const char *label) {
    size_t len;
    uint8_t *file = build(s, &len);
    cf_cog *cog = NULL;
    cf_error err = {0};
    cf_status st = cf_cog_open_memory(file, len, label, &cog, &err);
    CHECK(st == CF_OK);
    if (st) {
        fprintf(stderr, "%s: %s\n", label, err.msg);
        free(file);
        return;
    }
    cf_cog_info in;
    cf_cog_get_info(cog, &in);
    CHECK(in.width == s->w && in.height == s->h && in.count == s->spp);
    CHECK(in.dtype == CF_DT_U16);
    uint16_t fill = s->nodata ? (uint16_t)atoi(s->nodata) : 0;
    int all[3] = {1, 2, 3}, rev[2] = {3, 1}, one[1] = {2};
    CHECK(check_window(cog, s, 0, 0, s->w, s->h, all, s->spp, fill));
    CHECK(check_window(cog, s, 5, 7, 40, 30, all, s->spp, fill));
    CHECK(check_window(cog, s, s->w - 9, s->h - 4, 9, 4, all, s->spp, fill));
    CHECK(check_window(cog, s, -10, -5, 30, 30, all, s->spp, fill));
    CHECK(check_window(cog, s, s->w - 5, 3, 20, 8, rev, 2, fill));
    CHECK(check_window(cog, s, 200, 200, 5, 5, one, 1, fill));
    CHECK(check_window(cog, s, 33, 17, 1, 1, one, 1, fill));
    CHECK(check_window(cog, s, -3, -3, s->w + 6, s->h + 6, rev, 2, fill));
    check_many(cog, s, fill, label, 1);
    cf_cog_close(cog);
    /* The same windows through a file: read_many's batches then go through
     * the io source (read by the calling thread), not straight to the
     * decoders. */
    const char *dir = getenv("CF_TEST_DATA");
    char path[512];
    snprintf(path, sizeof path, "%s/read_many_%s", dir && *dir ? dir : "/tmp", label);
    if (dir && *dir) mkdir(dir, 0755);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(file, 1, len, f) == len);
    if (f) fclose(f);
    cf_cog *fc = NULL;
    CHECK(cf_cog_open(NULL, path, &fc, &err) == CF_OK);
    if (fc) check_many(fc, s, fill, label, 0);
    cf_cog_close(fc);
    unlink(path);
    free(file);
}

typedef struct thread_arg {
    cf_cog *cog;
    const spec *s;
    int seed, ok;
} thread_arg;

static void *reader(void *p) {
    thread_arg *a = p;
    int bands[3] = {1, 2, 3};
    a->ok = 1;
    for (int i = 0; i < 50; i++) {
        int64_t x = (a->seed * 37 + i * 13) % 90 - 5, y = (a->seed * 11 + i * 7) % 60 - 5;
        a->ok &= check_window(a->cog, a->s, x, y, 17, 23, bands, 3, 0);
    }
    return NULL;
}

/* Four threads reading windows of cog at once, each checked. */
static void read_in_four_threads(cf_cog *cog, const spec *s) {
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){cog, s, i, 0};
        pthread_create(&th[i], NULL, reader, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
}

static void test_threads(void) {
    spec s = {100, 70, 32, 16, 3, 1, -1, NULL, -1};
    size_t len;
    uint8_t *file = build(&s, &len);
    cf_cog *cog = NULL;
    CHECK(cf_cog_open_memory(file, len, "threads.tif", &cog, NULL) == CF_OK);
    read_in_four_threads(cog, &s);
    cf_cog_close(cog);
    free(file);
}

/* Threads reading windows of one strip file through a file (so through
 * the io's cache of decoded chunks, chunk_cache.h's claim protocol: run
 * under TSan by the suite's TSan stage), then the cache's counters: a
 * window beside one read before reads no strip again. */
static void test_threads_strips_cached(void) {
    spec s = {100, 70, 0, 16, 3, 1, -1, NULL, -1};
    size_t len;
    uint8_t *file = build(&s, &len);
    /* CF_TEST_DATA (ctest sets it), else a private folder: never a fixed
     * name in the shared /tmp, where another user could plant a link. */
    const char *dir = getenv("CF_TEST_DATA");
    char tmp[] = "/tmp/cf_read_XXXXXX", path[512];
    if (dir && *dir) mkdir(dir, 0755);
    else dir = mkdtemp(tmp);
    CHECK(dir != NULL);
    snprintf(path, sizeof path, "%s/read_strips_threads.tif", dir ? dir : ".");
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(file, 1, len, f) == len);
    if (f) fclose(f);
    cf_cog *cog = NULL;
    cf_error err = {0};
    CHECK(cf_cog_open(NULL, path, &cog, &err) == CF_OK);
    if (cog) {
        read_in_four_threads(cog, &s);
        cf_cog_stats st0, st1;
        cf_cog_get_stats(cog, &st0);
        CHECK(st0.cache_hits > 0);
        CHECK(st0.delivered_bytes == 4 * 50 * 17 * 23 * 3 * 2);
        int bands[3] = {1, 2, 3};
        /* strips 0-1 were read by the threads' windows: kept */
        CHECK(check_window(cog, &s, 60, 0, 30, 32, bands, 3, 0));
        cf_cog_get_stats(cog, &st1);
        CHECK(st1.cache_hits == st0.cache_hits + 2);
        CHECK(st1.cache_misses == st0.cache_misses);
        cf_cog_close(cog);
    }
    unlink(path);
    if (dir == tmp) rmdir(tmp);
    free(file);
}

static void test_errors(void) {
    /* A tile whose bytes lie past the end of the file (a truncated file):
     * it opens as in GDAL, with a warning naming the tile; windows that do
     * not need it read, one that does fails naming it. */
    spec bad = {100, 70, 32, 16, 3, 1, -1, NULL, 5};
    size_t len;
    uint8_t *file = build(&bad, &len);
    cf_cog *cog = NULL;
    cf_error err = {0};
    CHECK(cf_cog_open_memory(file, len, "bad.tif", &cog, &err) == CF_OK);
    const char *warn = cf_cog_warnings(cog);
    CHECK(warn && strstr(warn, "tile 5") && strstr(warn, "past the end"));
    int all3[3] = {1, 2, 3};
    CHECK(check_window(cog, &bad, 0, 0, 32, 16, all3, 3, 0));   /* tile 0 */
    CHECK(check_window(cog, &bad, 64, 48, 36, 22, all3, 3, 0)); /* others */
    uint16_t one[4 * 4 * 3];
    CHECK(cf_cog_read(cog, 0, 40, 20, 4, 4, NULL, 0, one, sizeof one, &err) ==
          CF_E_FORMAT);
    CHECK(strstr(err.msg, "bad.tif") && strstr(err.msg, "tile 5"));
    cf_cog_close(cog);
    cog = NULL;
    free(file);

    spec s = {100, 70, 32, 16, 3, 1, -1, NULL, -1};
    file = build(&s, &len);
    CHECK(cf_cog_open_memory(file, len, "args.tif", &cog, &err) == CF_OK);
    uint16_t buf[64 * 64 * 3];
    int b0[1] = {0}, b4[1] = {4}, b1[1] = {1};
    CHECK(cf_cog_read(cog, 0, 0, 0, 8, 8, b0, 1, buf, sizeof buf, &err) == CF_E_ARG);
    CHECK(strstr(err.msg, "args.tif") != NULL);
    CHECK(cf_cog_read(cog, 0, 0, 0, 8, 8, b4, 1, buf, sizeof buf, &err) == CF_E_ARG);
    CHECK(cf_cog_read(cog, 1, 0, 0, 8, 8, b1, 1, buf, sizeof buf, &err) == CF_E_ARG);
    CHECK(cf_cog_read(cog, 0, 0, 0, 8, 8, b1, 1, buf, 10, &err) == CF_E_ARG);
    CHECK(cf_cog_read(cog, 0, 0, 0, 0, 8, b1, 1, buf, sizeof buf, &err) == CF_E_ARG);
    CHECK(cf_cog_read(cog, 0, 0, 0, 8, 8, b1, 1, buf, sizeof buf, &err) == CF_OK);
    CHECK(cf_cog_read_mask(cog, 0, 0, 0, 8, 8, (uint8_t *)buf, sizeof buf, &err) == CF_E_STATE);
    cf_cog_close(cog);
    free(file);
}

/* cf_cog_chunk_info and cf_cog_decode_chunk: every chunk of the file,
 * decoded from its bytes, is the chunk as stored (padding included), and
 * bad arguments fail naming the file, level and chunk. */
static void test_decode_chunks(const spec *s, const char *label) {
    size_t len;
    uint8_t *file = build(s, &len);
    cf_cog *cog = NULL;
    cf_error err = {0};
    CHECK(cf_cog_open_memory(file, len, label, &cog, &err) == CF_OK);
    if (!cog) {
        free(file);
        return;
    }
    uint32_t cw = s->tw ? s->tw : s->w, ch = s->th;
    uint32_t across = (s->w + cw - 1) / cw, down = (s->h + ch - 1) / ch;
    uint32_t spc = s->planar == 2 ? 1 : s->spp;
    uint64_t n = (uint64_t)across * down * (s->planar == 2 ? s->spp : 1);
    uint16_t *buf = malloc((size_t)cw * ch * spc * 2 + 64);
    for (uint64_t k = 0; k < n; k++) {
        cf_chunk_info ci;
        CHECK(cf_cog_chunk_info(cog, 0, k, &ci, &err) == CF_OK);
        CHECK(ci.count == n && ci.dtype == CF_DT_U16 && ci.bits == 16 && ci.samples == spc);
        uint32_t plane = (uint32_t)(k / ((uint64_t)across * down));
        CHECK(ci.plane == plane && ci.col == k % across && ci.row == k % (across * down) / across);
        uint32_t rows = ch;
        if (!s->tw && (uint64_t)ci.row * ch + ch > s->h) rows = s->h - ci.row * ch;
        CHECK(ci.width == cw && ci.height == rows && ci.size == (size_t)cw * rows * spc * 2);
        CHECK(cf_cog_decode_chunk(cog, 0, k, file + ci.offset, (size_t)ci.byte_count, buf,
                                  ci.size + 64, &err) == CF_OK);
        int ok = 1;
        for (uint32_t r = 0; r < rows && ok; r++)
            for (uint32_t c = 0; c < cw && ok; c++)
                for (uint32_t sm = 0; sm < spc; sm++) {
                    int64_t x = (int64_t)ci.col * cw + c, y = (int64_t)ci.row * ch + r;
                    int b = s->planar == 2 ? (int)plane : (int)sm;
                    uint16_t want = (int64_t)k == s->sparse ? (s->nodata ? (uint16_t)atoi(s->nodata) : 0)
                                    : (x < s->w && y < s->h) ? val(b, x, y) : GARBAGE;
                    if (buf[((size_t)r * cw + c) * spc + sm] != want) ok = 0;
                }
        CHECK(ok);
    }
    /* dst too small: refused before anything is written */
    cf_chunk_info ci;
    uint64_t last = n - 1;
    CHECK(cf_cog_chunk_info(cog, 0, last, &ci, &err) == CF_OK);
    buf[0] = 0x5a5a;
    CHECK(cf_cog_decode_chunk(cog, 0, last, file + ci.offset, (size_t)ci.byte_count, buf,
                              ci.size - 1, &err) == CF_E_ARG);
    CHECK(strstr(err.msg, label) && strstr(err.msg, "level 0") && strstr(err.msg, "dst holds"));
    CHECK(buf[0] == 0x5a5a);
    /* short bytes: a codec error naming the chunk, dst zeroed */
    if (ci.byte_count) {
        CHECK(cf_cog_decode_chunk(cog, 0, last, file + ci.offset, (size_t)ci.byte_count - 1,
                                  buf, ci.size, &err) == CF_E_CODEC);
        char want[64];
        snprintf(want, sizeof want, "level 0, %s %llu", s->tw ? "tile" : "strip",
                 (unsigned long long)last);
        CHECK(strstr(err.msg, label) && strstr(err.msg, want));
        CHECK(buf[0] == 0 && buf[ci.size / 2 - 1] == 0);
    }
    /* chunks and levels that do not exist, NULL arguments */
    CHECK(cf_cog_chunk_info(cog, 0, n, &ci, &err) == CF_E_ARG);
    CHECK(strstr(err.msg, label) && strstr(err.msg, "level 0 has"));
    CHECK(cf_cog_decode_chunk(cog, 0, UINT64_MAX, file, 8, buf, ci.size, &err) == CF_E_ARG);
    CHECK(cf_cog_decode_chunk(cog, 1, 0, file, 8, buf, ci.size, &err) == CF_E_ARG);
    CHECK(strstr(err.msg, "level 1 does not exist"));
    CHECK(cf_cog_decode_chunk(cog, -1, 0, file, 8, buf, ci.size, &err) == CF_E_ARG);
    CHECK(cf_cog_decode_chunk(cog, 0, 0, NULL, 8, buf, ci.size, &err) == CF_E_ARG);
    CHECK(cf_cog_decode_chunk(cog, 0, 0, file, 8, NULL, ci.size, &err) == CF_E_ARG);
    CHECK(cf_cog_decode_chunk(NULL, 0, 0, file, 8, buf, ci.size, NULL) == CF_E_ARG);
    CHECK(cf_cog_chunk_info(cog, 0, 0, NULL, &err) == CF_E_ARG);
    free(buf);
    cf_cog_close(cog);
    free(file);
}

/* A chunk whose recorded range lies past the end of the file: its info is
 * an error naming it, but filled, and bytes from elsewhere decode. */
static void test_decode_chunk_truncated(void) {
    spec bad = {100, 70, 32, 16, 3, 1, -1, NULL, 5};
    size_t len;
    uint8_t *file = build(&bad, &len);
    cf_cog *cog = NULL;
    cf_error err = {0};
    CHECK(cf_cog_open_memory(file, len, "trunc.tif", &cog, &err) == CF_OK);
    cf_chunk_info ci;
    CHECK(cf_cog_chunk_info(cog, 0, 5, &ci, &err) == CF_E_FORMAT);
    CHECK(strstr(err.msg, "trunc.tif") && strstr(err.msg, "level 0, tile 5") &&
          strstr(err.msg, "outside the file"));
    CHECK(ci.size == 32 * 16 * 3 * 2 && ci.byte_count == ci.size && ci.col == 1 && ci.row == 1);
    uint8_t *src = calloc(1, ci.size), *dst = malloc(ci.size);
    src[0] = 7;
    CHECK(cf_cog_decode_chunk(cog, 0, 5, src, ci.size, dst, ci.size, &err) == CF_OK);
    CHECK(dst[0] == 7 && dst[1] == 0);
    free(src);
    free(dst);
    cf_cog_close(cog);
    free(file);
}

int main(void) {
    spec tiled = {100, 70, 32, 16, 3, 1, -1, NULL, -1};
    run_layout(&tiled, "tiled.tif");
    spec planar = {100, 70, 32, 16, 3, 2, -1, NULL, -1};
    run_layout(&planar, "planar.tif");
    spec strips = {100, 75, 0, 10, 3, 1, -1, NULL, -1};
    run_layout(&strips, "strips.tif");
    spec strips2 = {100, 75, 0, 10, 3, 2, -1, NULL, -1};
    run_layout(&strips2, "strips_planar.tif");
    spec sparse = {100, 70, 32, 16, 3, 1, 5, "9", -1};
    run_layout(&sparse, "sparse.tif");
    spec sparse2 = {100, 70, 32, 16, 3, 2, 5 + 20, "77", -1};
    run_layout(&sparse2, "sparse_planar.tif");
    spec one_tile = {20, 10, 64, 64, 3, 1, -1, NULL, -1};
    run_layout(&one_tile, "one_tile.tif");
    test_threads();
    test_threads_strips_cached();
    test_errors();
    test_decode_chunks(&tiled, "tiled.tif");
    test_decode_chunks(&planar, "planar.tif");
    test_decode_chunks(&strips, "strips.tif");
    test_decode_chunks(&strips2, "strips_planar.tif");
    test_decode_chunks(&sparse, "sparse.tif");
    test_decode_chunks(&sparse2, "sparse_planar.tif");
    test_decode_chunk_truncated();
    return CF_TEST_END();
}
