/*
 * test_pipeline_read_plan.c - the one read planner (lib/pipeline/
 * read_plan.h) on files built in memory: the chunk grid under a window,
 * the order chunks come in, edge tiles and strips clipped, windows partly
 * or wholly outside the image, sparse chunks passed over (and the window
 * pre-filled), planar files read per distinct band, peek without take,
 * and a chunk whose bytes lie outside the file.
 */
#include "cf_test.h"
#include "test_tiff_writer.h"

#define CF_STATIC_LINKING_ONLY /* cf_cog_open_memory */
#include "pipeline/read_plan.h"

/* A w x h uint8 file of spp samples, tiles tw x th (tw 0: strips of th
 * rows), planar 1 or 2; chunk `sparse` has byte count 0, chunk `bad` an
 * offset past the end. */
static uint8_t *build(uint32_t w, uint32_t h, uint32_t tw_, uint32_t th, uint16_t spp,
                      uint16_t planar, int64_t sparse, int64_t bad, size_t *len) {
    tw t;
    tw_init(&t, false, false);
    uint32_t cw = tw_ ? tw_ : w;
    uint64_t across = (w + cw - 1) / cw, down = (h + th - 1) / th;
    uint64_t n = across * down * (planar == 2 ? spp : 1);
    uint64_t off[256], cnt[256], bits[4] = {8, 8, 8, 8};
    for (uint64_t k = 0; k < n; k++) {
        size_t bytes = (size_t)cw * th * (planar == 2 ? 1 : spp);
        off[k] = tw_reserve(&t, bytes);
        cnt[k] = (int64_t)k == sparse ? 0 : bytes;
        if ((int64_t)k == bad) off[k] = 1u << 30;
    }
    tw_new_ifd(&t);
    tw_int(&t, 256, 4, w);
    tw_int(&t, 257, 4, h);
    tw_ints(&t, 258, 3, spp, bits);
    tw_int(&t, 259, 3, 1);
    tw_int(&t, 262, 3, 1);
    tw_int(&t, 277, 3, spp);
    tw_int(&t, 284, 3, planar);
    if (tw_) {
        tw_int(&t, 322, 4, tw_);
        tw_int(&t, 323, 4, th);
        tw_ints(&t, 324, 4, n, off);
        tw_ints(&t, 325, 4, n, cnt);
    } else {
        tw_ints(&t, 273, 4, n, off);
        tw_int(&t, 278, 4, th);
        tw_ints(&t, 279, 4, n, cnt);
    }
    tw_finish(&t, len);
    uint8_t *out = malloc(*len);
    memcpy(out, t.out, *len);
    tw_free(&t);
    return out;
}

/* All chunks of plan p as (cx, cy, plane) triples; returns how many. */
static int drain(cf__plan *p, uint32_t got[][3], int max) {
    int n = 0;
    for (;;) {
        cf__chunk c;
        int has;
        if (cf__plan_peek(p, &c, &has, NULL) != CF_OK || !has || n == max) break;
        cf__plan_take(p);
        got[n][0] = c.cx;
        got[n][1] = c.cy;
        got[n][2] = c.plane;
        n++;
    }
    return n;
}

static cf_cog *open_mem(uint8_t *file, size_t len) {
    cf_cog *cog = NULL;
    CHECK(cf_cog_open_memory(file, len, "plan.tif", &cog, NULL) == CF_OK);
    return cog;
}

static void test_tiles(void) {
    size_t len;
    /* 100 x 70 in 32 x 32 tiles: 4 x 3, edge tiles padded. */
    uint8_t *file = build(100, 70, 32, 32, 1, 1, 11, -1, &len);
    cf_cog *cog = open_mem(file, len);
    const int zero = 0;
    cf__plan p;
    uint32_t got[64][3];
    /* Inside, no sparse tile under it: columns 0..2, rows 0..1, row-major. */
    cf__plan_init(&p, cog, 0, 30, 20, 40, 20, &zero, 1);
    CHECK(p.count == 6 && !p.prefill);
    CHECK(drain(&p, got, 64) == 6);
    CHECK(got[0][0] == 0 && got[0][1] == 0 && got[2][0] == 2 && got[2][1] == 0 &&
          got[3][0] == 0 && got[3][1] == 1 && got[5][0] == 2 && got[5][1] == 1);
    /* Over the sparse tile 11 (column 3, row 2): pre-filled, passed over. */
    cf__plan_init(&p, cog, 0, 90, 60, 10, 10, &zero, 1);
    CHECK(p.count == 4 && p.prefill);
    int n = drain(&p, got, 64);
    CHECK(n == 3);
    for (int i = 0; i < n; i++) CHECK(!(got[i][0] == 3 && got[i][1] == 2));
    /* Partly outside (top-left): one tile, pre-filled. */
    cf__plan_init(&p, cog, 0, -5, -5, 10, 10, &zero, 1);
    CHECK(p.count == 1 && p.prefill && drain(&p, got, 64) == 1);
    /* Wholly outside: nothing to fetch, all fill. */
    cf__plan_init(&p, cog, 0, 200, 0, 10, 10, &zero, 1);
    CHECK(p.count == 0 && p.prefill && drain(&p, got, 64) == 0);
    /* The edge tile (3, 2) covers [96, 100) x [64, 70) only. */
    cf__chunk c;
    CHECK(cf__cog_chunk(cog, 0, 3, 2, 0, &c, NULL) == CF_OK);
    cf__rect r;
    CHECK(cf__plan_chunk_rect(&cog->tiff->ifds[0], &c, 90, 60, 20, 20, &r));
    CHECK(r.x0 == 96 && r.x1 == 100 && r.y0 == 64 && r.y1 == 70);
    CHECK(cf__plan_chunk_rect(&cog->tiff->ifds[0], &c, 97, 65, 2, 2, &r));
    CHECK(r.x0 == 97 && r.x1 == 99 && r.y0 == 65 && r.y1 == 67);
    CHECK(!cf__plan_chunk_rect(&cog->tiff->ifds[0], &c, 0, 0, 96, 70, &r));
    /* Peek without take gives the same chunk again. */
    cf__plan_init(&p, cog, 0, 40, 40, 1, 1, &zero, 1);
    int has;
    cf__chunk c1, c2;
    CHECK(cf__plan_peek(&p, &c1, &has, NULL) == CF_OK && has);
    CHECK(cf__plan_peek(&p, &c2, &has, NULL) == CF_OK && has && c1.index == c2.index);
    cf__plan_take(&p);
    CHECK(cf__plan_peek(&p, &c2, &has, NULL) == CF_OK && !has);
    cf_cog_close(cog);
    free(file);
}

static void test_strips_planar_bad(void) {
    size_t len;
    /* Strips of 16 rows of a 50 x 40 file: the last one is 8 rows. */
    uint8_t *file = build(50, 40, 0, 16, 1, 1, -1, -1, &len);
    cf_cog *cog = open_mem(file, len);
    const int zero = 0;
    cf__plan p;
    uint32_t got[64][3];
    cf__plan_init(&p, cog, 0, 10, 10, 30, 30, &zero, 1);
    CHECK(p.count == 3 && !p.prefill && drain(&p, got, 64) == 3);
    cf__chunk c;
    cf__rect r;
    CHECK(cf__cog_chunk(cog, 0, 0, 2, 0, &c, NULL) == CF_OK);
    CHECK(cf__plan_chunk_rect(&cog->tiff->ifds[0], &c, 0, 0, 50, 50, &r));
    CHECK(r.y0 == 32 && r.y1 == 40 && r.x0 == 0 && r.x1 == 50);
    cf_cog_close(cog);
    free(file);

    /* Planar, 3 bands in 16 x 16 tiles of a 40 x 20 file: bands {2, 0, 2}
     * read planes 2 then 0, each once. */
    file = build(40, 20, 16, 16, 3, 2, -1, -1, &len);
    cog = open_mem(file, len);
    int bands0[3] = {2, 0, 2}, planes[3];
    uint32_t np = cf__plan_planes(bands0, 3, planes);
    CHECK(np == 2 && planes[0] == 2 && planes[1] == 0);
    cf__plan_init(&p, cog, 0, 0, 0, 40, 20, planes, np);
    /* 3 columns x 2 rows per plane. */
    CHECK(p.count == 12 && drain(&p, got, 64) == 12);
    CHECK(got[0][2] == 2 && got[5][2] == 2 && got[6][2] == 0 && got[11][2] == 0);
    cf_cog_close(cog);
    free(file);

    /* A tile whose bytes lie past the end of the file: named, refused. */
    file = build(64, 64, 32, 32, 1, 1, -1, 3, &len);
    cog = open_mem(file, len);
    cf__plan_init(&p, cog, 0, 0, 0, 64, 64, &zero, 1);
    cf_error e;
    int has;
    cf__chunk cc;
    cf_status st = CF_OK;
    for (int i = 0; i < 4 && st == CF_OK; i++) {
        st = cf__plan_peek(&p, &cc, &has, &e);
        if (st == CF_OK) cf__plan_take(&p);
    }
    CHECK(st == CF_E_FORMAT && strstr(e.msg, "plan.tif") && strstr(e.msg, "tile 3"));
    cf_cog_close(cog);
    free(file);
}

int main(void) {
    test_tiles();
    test_strips_planar_bad();
    return CF_TEST_END();
}
