/*
 * test_pipeline_sampler.c - the samplers without any file: bounds,
 * determinism, blocked windows inside one tile, grid coverage, exact
 * sharding across ranks, tile-shuffle groups.
 */
#include "cf_test.h"
#include "pipeline/sampler.h"

#include <stdio.h>
#include <stdlib.h>

static const cf__samp_file FILES[3] = {
    {1000, 700, 256, 256, 0, 0, 0, 0, 0, 0, 0},
    {300, 1200, 128, 256, 0, 0, 0, 0, 0, 0, 0},
    {64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0}, /* smaller than most patches: padded windows */
};

static void init(cf__sampler *s, cf_sampler_kind kind, uint32_t patch,
                 int rank, int ws, uint64_t len, int nfiles) {
    cf__sampler_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.files = FILES;
    c.nfiles = (size_t)nfiles;
    c.patch = patch;
    c.seed = 42;
    c.epoch = 3;
    c.rank = rank;
    c.world_size = ws;
    c.length = len;
    c.group_tiles = 8;
    c.augment = CF_AUG_FLIP | CF_AUG_ROT90;
    cf_error e;
    cf_status st = cf__sampler_init(s, &c, &e);
    CHECK(st == CF_OK);
}

static void test_bounds_and_determinism(void) {
    const uint32_t patches[] = {32, 100, 128, 256, 300, 512};
    for (int kind = 0; kind <= CF_SAMPLER_GRID; kind++) {
        for (size_t pi = 0; pi < sizeof patches / sizeof *patches; pi++) {
            uint32_t P = patches[pi];
            cf__sampler a, b;
            init(&a, (cf_sampler_kind)kind, P, 0, 1, 2000, 3);
            init(&b, (cf_sampler_kind)kind, P, 0, 1, 2000, 3);
            CHECK(a.count == (kind == CF_SAMPLER_GRID ? a.length : 2000));
            for (uint64_t j = 0; j < a.count; j++) {
                cf_window w, w2;
                cf__sampler_window(&a, j, &w);
                cf__sampler_window(&b, j, &w2);
                CHECK(memcmp(&w, &w2, sizeof w) == 0);
                const cf__samp_file *f = &FILES[w.file];
                CHECK(w.w == P && w.h == P && w.aug < 8);
                CHECK(w.x >= 0 && w.y >= 0);
                if (f->width >= P) CHECK(w.x + P <= f->width);
                else CHECK(w.x == 0);
                if (f->height >= P) CHECK(w.y + P <= f->height);
                else CHECK(w.y == 0);
                if (kind == CF_SAMPLER_BLOCKED && f->width >= P &&
                    f->height >= P) {
                    if (P <= f->tile_w)
                        CHECK(w.x / f->tile_w == (w.x + P - 1) / f->tile_w);
                    else
                        CHECK(w.x % f->tile_w == 0 || P % f->tile_w);
                    if (P <= f->tile_h)
                        CHECK(w.y / f->tile_h == (w.y + P - 1) / f->tile_h);
                    else
                        CHECK(w.y % f->tile_h == 0 || P % f->tile_h);
                }
            }
            cf__sampler_free(&a);
            cf__sampler_free(&b);
        }
    }
}

static void test_epochs_differ(void) {
    cf__sampler s;
    init(&s, CF_SAMPLER_RANDOM, 64, 0, 1, 100, 2);
    cf_window a, b;
    int same = 0;
    for (uint64_t j = 0; j < 100; j++) {
        cf__sampler_set_epoch(&s, 1);
        cf__sampler_window(&s, j, &a);
        cf__sampler_set_epoch(&s, 2);
        cf__sampler_window(&s, j, &b);
        same += a.file == b.file && a.x == b.x && a.y == b.y;
    }
    CHECK(same < 5);
    cf__sampler_free(&s);
}

static void test_grid_covers(void) {
    const uint32_t patches[] = {50, 64, 256, 333};
    for (size_t pi = 0; pi < 4; pi++) {
        uint32_t P = patches[pi];
        cf__sampler s;
        init(&s, CF_SAMPLER_GRID, P, 0, 1, 0, 3);
        uint8_t *cov[3];
        for (int f = 0; f < 3; f++)
            cov[f] = calloc((size_t)FILES[f].width * FILES[f].height, 1);
        for (uint64_t j = 0; j < s.count; j++) {
            cf_window w;
            cf__sampler_window(&s, j, &w);
            const cf__samp_file *f = &FILES[w.file];
            for (int64_t y = w.y; y < w.y + P && y < f->height; y++)
                for (int64_t x = w.x; x < w.x + P && x < f->width; x++)
                    cov[w.file][y * f->width + x] = 1;
        }
        for (int f = 0; f < 3; f++) {
            size_t n = (size_t)FILES[f].width * FILES[f].height, miss = 0;
            for (size_t i = 0; i < n; i++) miss += !cov[f][i];
            CHECK(miss == 0);
            free(cov[f]);
        }
        cf__sampler_free(&s);
    }
}

/* Ranks get disjoint global indices that together are exactly [0, L). */
static void test_sharding(void) {
    for (int kind = 0; kind <= CF_SAMPLER_GRID; kind++) {
        for (int ws = 1; ws <= 5; ws++) {
            cf__sampler s0;
            init(&s0, (cf_sampler_kind)kind, 64, 0, 1, 1001, 3);
            uint64_t L = s0.length;
            uint8_t *seen = calloc(L, 1);
            uint64_t total = 0;
            for (int r = 0; r < ws; r++) {
                cf__sampler s;
                init(&s, (cf_sampler_kind)kind, 64, r, ws, 1001, 3);
                total += s.count;
                uint64_t prev = 0;
                for (uint64_t j = 0; j < s.count; j++) {
                    uint64_t g = cf__sampler_global(&s, j);
                    CHECK(g < L);
                    if (g >= L) break;
                    CHECK(!seen[g]);
                    seen[g] = 1;
                    CHECK(j == 0 || g > prev);
                    prev = g;
                    /* The window of a global index does not depend on who
                     * reads it: sharding never changes the data. */
                    cf_window a, b;
                    cf__sampler_window(&s, j, &a);
                    cf__sampler_window(&s0, g, &b);
                    CHECK(memcmp(&a, &b, sizeof a) == 0);
                }
                cf__sampler_free(&s);
            }
            CHECK(total == L);
            for (uint64_t g = 0; g < L; g++) CHECK(seen[g]);
            free(seen);
            cf__sampler_free(&s0);
        }
    }
}

static void test_drop_last_equal(void) {
    for (int ws = 1; ws <= 4; ws++) {
        uint64_t c0 = 0;
        for (int r = 0; r < ws; r++) {
            cf__sampler s;
            cf__sampler_config c;
            memset(&c, 0, sizeof c);
            c.kind = CF_SAMPLER_TILE_SHUFFLE;
            c.files = FILES;
            c.nfiles = 2;
            c.patch = 64;
            c.rank = r;
            c.world_size = ws;
            c.length = 997;
            c.drop_last = 1;
            c.group_tiles = 4;
            CHECK(cf__sampler_init(&s, &c, NULL) == CF_OK);
            if (r == 0) c0 = s.count;
            CHECK(s.count == c0 && s.count > 0);
            cf__sampler_free(&s);
        }
    }
}

/* A tile-shuffle group touches at most group_tiles cells, each window
 * lies inside its cell, and consecutive samples come from different
 * cells. */
static void test_tile_shuffle_groups(void) {
    cf__sampler s;
    init(&s, CF_SAMPLER_TILE_SHUFFLE, 64, 0, 1, 4000, 2);
    CHECK(s.crops_per_tile == 8); /* file 1: 128x256 tiles -> 2*4 crops */
    for (uint64_t q = 0; q * s.chunk < s.count; q++) {
        int64_t cells[64][3];
        int ncells = 0;
        for (uint64_t p = 0; p < s.chunk && q * s.chunk + p < s.count; p++) {
            cf_window w;
            cf__sampler_window(&s, q * s.chunk + p, &w);
            int64_t cx, cy;
            uint32_t cw, ch;
            cf__sampler_cell(&s, &w, &cx, &cy, &cw, &ch);
            CHECK(w.x >= cx && w.x + w.w <= cx + cw);
            CHECK(w.y >= cy && w.y + w.h <= cy + ch);
            int found = 0;
            for (int i = 0; i < ncells; i++)
                found |= cells[i][0] == w.file && cells[i][1] == cx &&
                         cells[i][2] == cy;
            if (!found && ncells < 64) {
                cells[ncells][0] = w.file;
                cells[ncells][1] = cx;
                cells[ncells][2] = cy;
                ncells++;
            }
        }
        CHECK(ncells <= 8);
    }
    cf__sampler_free(&s);
}

static void test_bad_args(void) {
    cf__sampler s;
    cf__sampler_config c;
    memset(&c, 0, sizeof c);
    c.files = FILES;
    c.nfiles = 1;
    c.patch = 64;
    c.world_size = 2;
    c.rank = 2;
    cf_error e;
    CHECK(cf__sampler_init(&s, &c, &e) == CF_E_ARG);
    CHECK(strstr(e.msg, "rank") != NULL);
    c.rank = 0;
    c.patch = 0;
    CHECK(cf__sampler_init(&s, &c, &e) == CF_E_ARG);
    c.patch = 64;
    c.nfiles = 0;
    CHECK(cf__sampler_init(&s, &c, &e) == CF_E_ARG);
}

/* skip_empty: a covers function keeping windows off a diagonal pattern.
 * The grid sampler gives exactly the kept windows, in order, across 3
 * ranks (disjoint, complete); random windows all pass it (the pattern
 * leaves plenty), redrawn ones counted; tile-shuffle is refused. */
static int pattern(const void *user, size_t f, int64_t x, int64_t y, uint32_t w, uint32_t h) {
    (void)user;
    (void)w;
    (void)h;
    return (int)((f + (uint64_t)x / 32 + (uint64_t)y / 32) % 3 != 0);
}

static void test_skip_empty(void) {
    const uint32_t P = 32;
    cf__sampler_config c;
    memset(&c, 0, sizeof c);
    c.kind = CF_SAMPLER_GRID;
    c.files = FILES;
    c.nfiles = 3;
    c.patch = P;
    c.seed = 9;
    c.world_size = 1;
    cf__sampler all, kept;
    cf_error e;
    CHECK(cf__sampler_init(&all, &c, &e) == CF_OK);
    c.covers = pattern;
    CHECK(cf__sampler_init(&kept, &c, &e) == CF_OK);
    uint64_t k = 0, bad = 0;
    for (uint64_t j = 0; j < all.count; j++) {
        cf_window a, b;
        cf__sampler_window(&all, j, &a);
        if (!pattern(NULL, a.file, a.x, a.y, a.w, a.h)) continue;
        if (k >= kept.count) {
            bad++;
            break;
        }
        cf__sampler_window(&kept, k++, &b);
        bad += a.file != b.file || a.x != b.x || a.y != b.y;
    }
    CHECK(bad == 0 && k == kept.count && kept.count + kept.left_out == all.count);
    CHECK(kept.left_out > 64); /* more than one word of the bitmap */
    /* Sharded: the ranks' windows together are the kept ones, once. */
    uint64_t seen = 0;
    for (int r = 0; r < 3; r++) {
        cf__sampler sh;
        c.rank = r;
        c.world_size = 3;
        CHECK(cf__sampler_init(&sh, &c, &e) == CF_OK);
        seen += sh.count;
        for (uint64_t j = 0; j < sh.count; j++) {
            cf_window w;
            cf__sampler_window(&sh, j, &w);
            bad += !pattern(NULL, w.file, w.x, w.y, w.w, w.h);
        }
        cf__sampler_free(&sh);
    }
    CHECK(seen == kept.count && bad == 0);
    cf__sampler_free(&all);
    cf__sampler_free(&kept);
    /* Random: every window passes, some drawn again. */
    c.kind = CF_SAMPLER_RANDOM;
    c.rank = 0;
    c.world_size = 1;
    c.length = 500;
    cf__sampler rnd;
    CHECK(cf__sampler_init(&rnd, &c, &e) == CF_OK);
    uint64_t again = 0;
    for (uint64_t j = 0; j < rnd.count; j++) {
        cf_window w;
        again += cf__sampler_window_at(&rnd, rnd.c.epoch, j, &w);
        bad += !pattern(NULL, w.file, w.x, w.y, w.w, w.h);
    }
    CHECK(bad == 0 && again > 0);
    cf__sampler_free(&rnd);
    c.kind = CF_SAMPLER_TILE_SHUFFLE;
    CHECK(cf__sampler_init(&rnd, &c, &e) == CF_E_ARG && strstr(e.msg, "tile-shuffle"));
}

int main(void) {
    test_bounds_and_determinism();
    test_epochs_differ();
    test_grid_covers();
    test_sharding();
    test_drop_last_equal();
    test_tile_shuffle_groups();
    test_bad_args();
    test_skip_empty();
    return CF_TEST_END();
}
