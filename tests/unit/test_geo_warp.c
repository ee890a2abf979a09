/*
 * test_geo_warp.c - the resampler on buffers built here: the separable
 * fast path gives the general path's values bit for bit (every kernel,
 * dtype and ratio), whole-pixel shifts copy, nearest replicates, nodata
 * never contributes and a pixel without a valid source keeps its fill,
 * bilinear renormalises next to nodata, the reprojection lattice stays
 * within its error bound of PROJ, GDAL's overview rule, GDAL's chunks, and
 * many threads sharing one map.  (Against gdalwarp itself:
 * tests/python/test_geo_warp.py.)
 */
#include "cf_test.h"
#include "geo/geo.h"
#include "geo/warp_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static cf_crs *utm33;

static cf_grid grid(double x0, double y0, double res, uint32_t w, uint32_t h) {
    cf_grid g = {utm33, {x0, res, 0, y0, 0, -res}, w, h};
    return g;
}

/* Resample the whole source level (the "file") onto dst with kernel rs,
 * through the chunk planner, as cf_cog_read_grid does. */
static void run(const cf_grid *src, const void *data, cf_dtype t, int nb, const cf_grid *dst,
                cf_resampling rs, int general, const cf__warp_src *proto, void *out,
                double fill) {
    cf__warp *w = NULL;
    cf_error err = {0};
    CHECK(cf__warp_new(src, dst, NULL, 0.125, &w, &err) == CF_OK);
    size_t bps = cf_dtype_size(t), n = (size_t)nb * dst->width * dst->height;
    for (size_t i = 0; i < n; i++) cf__rs_store(t, out, i, fill, 0, 0);
    cf__warp_req rq = {0, 0, dst->width, dst->height, rs, 0, src->width, src->height,
                      src->width, src->height, general, NULL};
    cf__warp_cost cost = {8.0 * bps * nb, 8.0 * bps * nb, 64.0 * 1024 * 1024};
    cf__warp_chunk *ch = NULL;
    size_t nch = 0;
    CHECK(cf__warp_chunks(w, &rq, &cost, &ch, &nch, &err) == CF_OK);
    for (size_t k = 0; k < nch; k++) {
        const cf__warp_win *win = &ch[k].win;
        size_t wn = (size_t)win->w * win->h;
        uint8_t *buf = malloc(wn * nb * bps);
        for (int b = 0; b < nb; b++)
            for (uint32_t y = 0; y < win->h; y++)
                memcpy(buf + ((size_t)b * wn + (size_t)y * win->w) * bps,
                       (const uint8_t *)data +
                           (((size_t)b * src->height + (size_t)(win->y + y)) * src->width +
                            (size_t)win->x) * bps,
                       win->w * bps);
        cf__warp_src s = *proto;
        s.data = buf;
        cf__warp_dst d = {(uint8_t *)out + ((size_t)ch[k].rq.ty * dst->width + ch[k].rq.tx) * bps,
                         (size_t)dst->width * dst->height, dst->width, proto->has_nodata,
                         proto->nodata};
        CHECK(cf__warp_resample(w, &ch[k].rq, win, &s, &d, &err) == CF_OK);
        free(buf);
    }
    free(ch);
    cf__warp_free(w);
}

static void *make_data(cf_dtype t, size_t n) {
    size_t bps = cf_dtype_size(t);
    uint8_t *p = malloc(n * bps);
    for (size_t i = 0; i < n; i++) {
        double v = (double)(rnd() % 20000) - (t == CF_DT_I16 || t == CF_DT_F32 ? 10000 : 0);
        if (t == CF_DT_U8) v = (double)(rnd() % 7); /* labels: many ties */
        if (t == CF_DT_F32) v += (double)(rnd() % 1000) / 1000.0;
        cf__rs_store(t, p, i, v, 0, 0);
    }
    return p;
}

static void test_fast_equals_general(void) {
    const cf_dtype types[] = {CF_DT_U8, CF_DT_U16, CF_DT_I16, CF_DT_F32};
    /* target resolution, origin shift (m): up, down, non-integer, shifted,
     * crossing the edges */
    const double cases[][3] = {{10, 0, 0}, {5, 0, 0}, {3.3, 1.7, -2.1}, {20, 0, 0},
                               {35, 7, 3}, {60, 0, 0}, {13, -250, 240}, {7.5, 130, -170}};
    int mismatches = 0, compared = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        cf_dtype t = types[ti];
        size_t bps = cf_dtype_size(t);
        cf_grid src = grid(0, 3000, 20, 150, 150);
        void *data = make_data(t, 2 * 150 * 150);
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            double res = cases[ci][0];
            uint32_t n = (uint32_t)(2000 / res);
            cf_grid dst = grid(500 + cases[ci][1], 2500 + cases[ci][2], res, n, n);
            for (int rs = 0; rs < CF_RS_COUNT; rs++)
                for (int with_nd = 0; with_nd < 3; with_nd++) {
                    /* nodata 3 is in the data (masks), 25000 is not (GDAL's
                     * real-case formulas without masks) */
                    cf__warp_src proto = {NULL, t, 2, NULL, with_nd > 0, with_nd == 1 ? 3 : 25000};
                    size_t sz = 2 * (size_t)n * n * bps;
                    uint8_t *a = malloc(sz), *b = malloc(sz);
                    run(&src, data, t, 2, &dst, (cf_resampling)rs, 0, &proto, a, 77);
                    run(&src, data, t, 2, &dst, (cf_resampling)rs, 1, &proto, b, 77);
                    compared++;
                    if (memcmp(a, b, sz)) {
                        mismatches++;
                        fprintf(stderr, "fast != general: dtype %s res %g kernel %s nodata %d\n",
                                cf_dtype_name(t), res, cf_resampling_name((cf_resampling)rs),
                                with_nd);
                    }
                    free(a);
                    free(b);
                }
        }
        free(data);
    }
    CHECK(compared == 4 * 8 * 5 * 3);
    CHECK(mismatches == 0);
}

/* A nodata that no source pixel holds but bilinear computes: the fast
 * path's table moves it off as the general path does (GDAL's real case),
 * at 2:1 and 6:1 up and a non-integer ratio. */
static void test_fast_nudge(void) {
    cf_grid src = grid(0, 3000, 60, 50, 50);
    uint16_t *data = malloc(50 * 50 * sizeof *data);
    for (int i = 0; i < 50 * 50; i++) data[i] = rnd() % 2 ? 10 : 20;
    const double res[] = {30, 10, 17};
    cf__warp_src proto = {NULL, CF_DT_U16, 1, NULL, 1, 13};
    for (int k = 0; k < 3; k++) {
        uint32_t n = (uint32_t)(2400 / res[k]);
        cf_grid dst = grid(300, 2700, res[k], n, n);
        uint16_t *a = malloc((size_t)n * n * 2), *b = malloc((size_t)n * n * 2);
        run(&src, data, CF_DT_U16, 1, &dst, CF_RS_BILINEAR, 0, &proto, a, 13);
        run(&src, data, CF_DT_U16, 1, &dst, CF_RS_BILINEAR, 1, &proto, b, 13);
        CHECK(memcmp(a, b, (size_t)n * n * 2) == 0);
        int moved = 0, thirteen = 0;
        for (size_t i = 0; i < (size_t)n * n; i++) {
            moved += a[i] == 12;
            thirteen += a[i] == 13;
        }
        CHECK(moved > 0);
        CHECK(thirteen == 0); /* the whole target lies inside the source */
        free(a);
        free(b);
    }
    free(data);
}

static void test_translation_and_replication(void) {
    cf_grid src = grid(0, 1000, 10, 100, 100);
    uint16_t *data = make_data(CF_DT_U16, 100 * 100);
    cf__warp_src proto = {NULL, CF_DT_U16, 1, NULL, 0, 0};
    /* Shifted by whole pixels: every kernel copies. */
    cf_grid dst = grid(230, 770, 10, 40, 30);
    uint16_t out[40 * 30];
    for (int rs = 0; rs < CF_RS_COUNT; rs++) {
        run(&src, data, CF_DT_U16, 1, &dst, (cf_resampling)rs, 0, &proto, out, 0);
        int same = 1;
        for (int y = 0; y < 30; y++)
            for (int x = 0; x < 40; x++) same &= out[y * 40 + x] == data[(y + 23) * 100 + x + 23];
        CHECK(same);
    }
    /* 20 m -> 10 m (here 10 -> 5), aligned: nearest and mode replicate. */
    cf_grid up = grid(100, 900, 5, 60, 60);
    uint16_t o2[60 * 60];
    for (int rs = 0; rs < CF_RS_COUNT; rs += 4) {
        run(&src, data, CF_DT_U16, 1, &up, (cf_resampling)rs, 0, &proto, o2, 0);
        int same = 1;
        for (int y = 0; y < 60; y++)
            for (int x = 0; x < 60; x++)
                same &= o2[y * 60 + x] == data[(y / 2 + 10) * 100 + x / 2 + 10];
        CHECK(same);
    }
    free(data);
}

static void test_nodata(void) {
    /* 4 x 4 source of 100s, one 200, nodata 0 at (0,0) and (2,2). */
    cf_grid src = grid(0, 40, 10, 4, 4);
    uint16_t data[16];
    for (int i = 0; i < 16; i++) data[i] = 100;
    data[1] = 200;
    data[0] = data[10] = 0;
    cf__warp_src proto = {NULL, CF_DT_U16, 1, NULL, 1, 0};
    /* Shifted half a pixel: target centres on source pixel corners. */
    cf_grid dst = grid(5, 35, 10, 3, 3);
    uint16_t out[9];
    run(&src, data, CF_DT_U16, 1, &dst, CF_RS_BILINEAR, 0, &proto, out, 0);
    /* (0,0): taps (0,0) nodata, (1,0) 200, (0,1) 100, (1,1) 100: the
     * valid three renormalised, 133.3 -> 133 */
    CHECK(out[0] == 133);
    /* (1,1): the pixel under its centre, (2,2), is nodata: GDAL skips it */
    CHECK(out[4] == 0);
    for (int i = 0; i < 9; i++) CHECK(out[i] == 0 || (out[i] >= 100 && out[i] <= 200));
    /* Average onto one 40 m pixel: the 14 valid pixels only. */
    cf_grid one = grid(0, 40, 40, 1, 1);
    uint16_t avg = 1;
    run(&src, data, CF_DT_U16, 1, &one, CF_RS_AVERAGE, 0, &proto, &avg, 0);
    CHECK(avg == 107); /* 1500 / 14 */
    /* No valid source at all: the fill stays. */
    uint16_t zeros[16] = {0};
    for (int k = 0; k < CF_RS_COUNT; k++) {
        uint16_t o[9];
        run(&src, zeros, CF_DT_U16, 1, &dst, (cf_resampling)k, 0, &proto, o, 9);
        int all = 1;
        for (int i = 0; i < 9; i++) all &= o[i] == 9;
        CHECK(all);
    }
    /* A computed value equal to the nodata moves off it by one (GDAL). */
    uint16_t stripes[16];
    for (int i = 0; i < 16; i++) stripes[i] = i % 2 ? 8 : 6;
    cf__warp_src p7 = {NULL, CF_DT_U16, 1, NULL, 1, 7};
    uint16_t o7[9];
    run(&src, stripes, CF_DT_U16, 1, &dst, CF_RS_BILINEAR, 0, &p7, o7, 7);
    CHECK(o7[0] == 6); /* (6 + 8) / 2 = 7 = nodata -> 6 */
    /* Without a nodata, 7 is a value like any other. */
    cf__warp_src pn = {NULL, CF_DT_U16, 1, NULL, 0, 0};
    run(&src, stripes, CF_DT_U16, 1, &dst, CF_RS_BILINEAR, 0, &pn, o7, 0);
    CHECK(o7[0] == 7);
}

/* cf__warp_row's n positions of row py from px0 equal cf__warp_points'
 * (lattice_at's) to the bit, and their flags. */
static int row_is_points(const cf__warp *w, uint32_t lw, uint32_t lh, double py, double px0,
                         uint32_t n) {
    double inv[6];
    double *v = malloc((size_t)n * 6 * sizeof *v);
    uint8_t *ok = malloc((size_t)n * 2);
    if (!v || !ok) {
        free(v);
        free(ok);
        return 0;
    }
    double *ax = v, *ay = v + n, *bx = v + 2 * n, *by = v + 3 * n, *px = v + 4 * n,
           *pys = v + 5 * n;
    cf__warp_level_inverse(w, lw, lh, inv);
    cf__warp_row(w, inv, px0, py, n, ax, ay, ok);
    for (uint32_t i = 0; i < n; i++) px[i] = px0 + i, pys[i] = py;
    cf__warp_points(w, inv, n, px, pys, bx, by, ok + n);
    int same = !memcmp(ax, bx, n * sizeof *v) && !memcmp(ay, by, n * sizeof *v) &&
               !memcmp(ok, ok + n, n);
    free(v);
    free(ok);
    return same;
}

/* The same where the lattice has exact blocks (a polar stereographic grid
 * around the pole, read from WGS 84: PROJ at every pixel there) and where
 * longitudes wrap (a UTM 60 grid across the antimeridian). */
static void test_row_polar_and_antimeridian(void) {
    cf_crs *wgs = NULL, *ps = NULL, *u60 = NULL;
    CHECK(cf_crs_from_epsg(4326, &wgs, NULL) == CF_OK);
    CHECK(cf_crs_from_epsg(3413, &ps, NULL) == CF_OK);
    CHECK(cf_crs_from_epsg(32660, &u60, NULL) == CF_OK);
    cf_grid src = {wgs, {-180, 0.05, 0, 90, 0, -0.05}, 7200, 800};
    cf_grid polar = {ps, {-1500000, 2500, 0, 1500000, 0, -2500}, 1200, 1200};
    cf_grid seam = {u60, {600000, 100, 0, 7500000, 0, -100}, 3000, 1000};
    cf__xform *xp = NULL, *xu = NULL;
    CHECK(cf__xform_new(ps, wgs, &xp, NULL) == CF_OK);
    CHECK(cf__xform_new(u60, wgs, &xu, NULL) == CF_OK);
    cf__warp *wp = NULL, *wu = NULL;
    CHECK(cf__warp_new(&src, &polar, xp, 0.125, &wp, NULL) == CF_OK);
    CHECK(cf__warp_new(&src, &seam, xu, 0.125, &wu, NULL) == CF_OK);
    int exact = 0;
    for (int64_t i = 0; wp && i < wp->nbx * wp->nby; i++) exact += wp->blocks[i].exact;
    CHECK(exact > 0 && wp->wrap && wu->wrap);
    int same = 1;
    for (double y = -80.5; y < 1300; y += 7.25)
        for (double x0 = -133.75; x0 < 200; x0 += 61.5)
            same &= row_is_points(wp, 7200, 800, y, x0, 1500);
    same &= row_is_points(wp, 900, 100, 599.5, -0.5, 1300); /* an overview's */
    for (double y = -3.5; y < 1100; y += 13.5) same &= row_is_points(wu, 7200, 800, y, -65.25, 3200);
    CHECK(same);
    cf__warp_free(wp);
    cf__warp_free(wu);
    cf__xform_free(xp);
    cf__xform_free(xu);
    cf_crs_free(wgs);
    cf_crs_free(ps);
    cf_crs_free(u60);
}

static void test_lattice_bound(void) {
    /* A 120 km UTM grid read from WGS 84: lattice vs every pixel through
     * PROJ, both in source pixels. */
    cf_crs *wgs = NULL;
    CHECK(cf_crs_from_epsg(4326, &wgs, NULL) == CF_OK);
    cf_grid src = {wgs, {12.0, 0.001, 0, 47.0, 0, -0.001}, 6000, 2000};
    cf_grid dst = grid(400000, 5200000, 100, 1200, 1200);
    cf__xform *xf = NULL;
    cf_error err = {0};
    CHECK(cf__xform_new(utm33, wgs, &xf, &err) == CF_OK);
    cf__warp *approx = NULL, *exact = NULL;
    CHECK(cf__warp_new(&src, &dst, xf, 0.125, &approx, &err) == CF_OK);
    CHECK(cf__warp_new(&src, &dst, xf, 0, &exact, &err) == CF_OK);
    CHECK(approx && exact && !cf__warp_is_affine(approx));
    /* A row's positions are lattice_at's pixel by pixel, to the bit
     * (cf__warp_row hoists what a row shares): rows across block edges,
     * starting before the grid and running past it. */
    {
        const double rows[] = {0, 0.5, 63.5, 64, 64.5, 700.25, 1199.5, 1300};
        const double starts[] = {-70.5, 0.5, 63.5, 100};
        int same = 1;
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            for (size_t k = 0; k < sizeof starts / sizeof *starts; k++)
                same &= row_is_points(approx, 6000, 2000, rows[r], starts[k], 1400);
        CHECK(same);
    }
    /* Sample pixels of both maps through the window planner: the source
     * windows agree within a pixel. */
    cf__warp_req rq = {100, 100, 500, 500, CF_RS_NEAREST, 0, 6000, 2000, 6000, 2000, 0, NULL};
    cf__warp_win wa, we;
    CHECK(cf__warp_window(approx, &rq, &wa, &err) == CF_OK);
    CHECK(cf__warp_window(exact, &rq, &we, &err) == CF_OK);
    CHECK(!wa.empty && llabs(wa.x - we.x) <= 1 && llabs(wa.y - we.y) <= 1);
    /* Nearest through both: positions within 0.125 px change at most the
     * pixels within 0.125 px of an edge. */
    uint8_t *data = malloc((size_t)6000 * 2000);
    for (size_t i = 0; i < (size_t)6000 * 2000; i++) data[i] = (uint8_t)(i % 251);
    cf__warp_src proto = {NULL, CF_DT_U8, 1, NULL, 0, 0};
    uint8_t *a = malloc(500 * 500), *b = malloc(500 * 500);
    CHECK(cf__warp_window(approx, &rq, &wa, &err) == CF_OK);
    uint8_t *buf = malloc((size_t)wa.w * wa.h);
    for (uint32_t y = 0; y < wa.h; y++)
        memcpy(buf + (size_t)y * wa.w, data + (size_t)(wa.y + y) * 6000 + wa.x, wa.w);
    cf__warp_src s = proto;
    s.data = buf;
    cf__warp_dst da = {a, 0, 0, 0, 0}, db = {b, 0, 0, 0, 0};
    memset(a, 0, 500 * 500);
    memset(b, 0, 500 * 500);
    CHECK(cf__warp_resample(approx, &rq, &wa, &s, &da, &err) == CF_OK);
    CHECK(cf__warp_resample(exact, &rq, &wa, &s, &db, &err) == CF_OK);
    int differ = 0;
    for (int i = 0; i < 500 * 500; i++) differ += a[i] != b[i];
    /* 0.125 px of error at most: well under a quarter of the pixels */
    CHECK(differ < 500 * 500 / 4);
    free(buf);
    free(a);
    free(b);
    free(data);
    cf__warp_free(approx);
    cf__warp_free(exact);
    cf__xform_free(xf);
    cf_crs_free(wgs);
}

/* One resampling of w (request rq, kernel rs) of src_data (a whole source
 * level w0 x h0) into out, with positions kept in pos (or none). */
static void resample_kept(const cf__warp *w, cf__warp_req rq, const uint8_t *src_data,
                          uint32_t w0, cf__warp_pos *pos, uint8_t *out) {
    cf__warp_win win;
    cf_error err = {0};
    CHECK(cf__warp_window(w, &rq, &win, &err) == CF_OK && !win.empty);
    uint8_t *buf = malloc((size_t)win.w * win.h);
    for (uint32_t y = 0; y < win.h; y++)
        memcpy(buf + (size_t)y * win.w, src_data + (size_t)(win.y + y) * w0 + win.x, win.w);
    cf__warp_src s = {buf, CF_DT_U8, 1, NULL, 0, 0};
    cf__warp_dst d = {out, 0, 0, 0, 0};
    memset(out, 0, (size_t)rq.tw * rq.th); /* rows of rq.tw */
    rq.pos = pos;
    CHECK(cf__warp_resample(w, &rq, &win, &s, &d, &err) == CF_OK);
    free(buf);
}

/* Positions kept across requests (cf__warp_pos): a request of another map
 * built the same (same transformation object, grids and bound) and the
 * same window gets them, and its pixels are those computed afresh; a map
 * of another target grid, another transformation object, another bound,
 * another window or the corners of average instead of centres does not. */
static void test_kept_positions(void) {
    cf_crs *wgs = NULL;
    CHECK(cf_crs_from_epsg(4326, &wgs, NULL) == CF_OK);
    const uint32_t SW = 900, SH = 600;
    cf_grid src = {wgs, {14.0, 0.0005, 0, 46.2, 0, -0.0005}, SW, SH};
    cf_grid dst = grid(420000, 5115000, 30, 200, 200);
    cf_grid moved = grid(420030, 5115000, 30, 200, 200);
    cf__xform *xf = NULL, *xf2 = NULL;
    CHECK(cf__xform_new(utm33, wgs, &xf, NULL) == CF_OK);
    CHECK(cf__xform_new(utm33, wgs, &xf2, NULL) == CF_OK);
    cf__warp *a = NULL, *b = NULL, *m = NULL, *other = NULL, *bound = NULL;
    cf_error err = {0};
    CHECK(cf__warp_new(&src, &dst, xf, 0.125, &a, &err) == CF_OK);
    CHECK(cf__warp_new(&src, &dst, xf, 0.125, &b, &err) == CF_OK);
    CHECK(cf__warp_new(&src, &moved, xf, 0.125, &m, &err) == CF_OK);
    CHECK(cf__warp_new(&src, &dst, xf2, 0.125, &other, &err) == CF_OK);
    CHECK(cf__warp_new(&src, &dst, xf, 0.5, &bound, &err) == CF_OK);
    uint8_t *d1 = malloc((size_t)SW * SH), *d2 = malloc((size_t)SW * SH);
    for (size_t i = 0; i < (size_t)SW * SH; i++) {
        d1[i] = (uint8_t)(i % 251);
        d2[i] = (uint8_t)((i * 7 + i / SW) % 253);
    }
    const cf_resampling kinds[] = {CF_RS_NEAREST, CF_RS_BILINEAR, CF_RS_AVERAGE};
    uint8_t *got = malloc(200 * 200), *want = malloc(200 * 200);
    size_t npx = 150 * 150;
    double *px = malloc(2 * npx * sizeof *px), *py = malloc(2 * npx * sizeof *py);
    uint8_t *ok = malloc(2 * npx);
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        cf__warp_pos *pos = cf__warp_pos_new();
        CHECK(pos != NULL);
        cf__warp_req rq = {20, 30, 150, 150, kinds[k], 0, SW, SH, SW, SH, 1, NULL};
        const int corners = kinds[k] == CF_RS_AVERAGE;
        const size_t n = corners ? 2 * npx : npx;
        double inv[6];
        cf__warp_level_inverse(a, SW, SH, inv);
        /* Nothing kept yet. */
        CHECK(!cf__warp_pos_get(pos, a, inv, &rq, corners, n, px, py, ok));
        /* a keeps them; b (built the same) gets them, m and other not. */
        const cf__warp *maps[] = {a, b, m, other, bound, a};
        const uint8_t *datas[] = {d1, d2, d2, d1, d2, d1};
        for (size_t j = 0; j < sizeof maps / sizeof *maps; j++) {
            cf__warp_req r = rq;
            if (j == 5) r.tx += 1; /* another window of a */
            resample_kept(maps[j], r, datas[j], SW, pos, got);
            resample_kept(maps[j], r, datas[j], SW, NULL, want);
            CHECK(!memcmp(got, want, npx));
            /* what is kept now: maps[j]'s, for b as well when j is a or b */
            CHECK(cf__warp_pos_get(pos, maps[j], inv, &r, corners, n, px, py, ok));
            CHECK(cf__warp_pos_get(pos, b, inv, &r, corners, n, px, py, ok) == (j <= 1 || j == 5));
            CHECK(!cf__warp_pos_get(pos, m, inv, &r, corners, n, px, py, ok) || j == 2);
            CHECK(!cf__warp_pos_get(pos, other, inv, &r, corners, n, px, py, ok) || j == 3);
            CHECK(!cf__warp_pos_get(pos, bound, inv, &r, corners, n, px, py, ok) || j == 4);
            CHECK(!cf__warp_pos_get(pos, maps[j], inv, &r, !corners, corners ? npx : 2 * npx,
                                    px, py, ok));
        }
        cf__warp_pos_free(pos);
    }
    cf__warp_pos_free(NULL);
    free(px);
    free(py);
    free(ok);
    free(got);
    free(want);
    free(d1);
    free(d2);
    cf__warp_free(a);
    cf__warp_free(b);
    cf__warp_free(m);
    cf__warp_free(other);
    cf__warp_free(bound);
    cf__xform_free(xf);
    cf__xform_free(xf2);
    cf_crs_free(wgs);
}

static void test_level_and_chunks(void) {
    cf_grid src = grid(0, 100000, 10, 10000, 10000);
    const uint32_t sizes[][2] = {{10000, 10000}, {5000, 5000}, {2500, 2500}, {1250, 1250}};
    struct {
        double res;
        int level;
    } want[] = {{5, 0}, {10, 0}, {15, 0}, {19.5, 0}, {20, 1}, {30, 1}, {40, 2}, {60, 2},
                {80, 3}, {300, 3}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        uint32_t n = (uint32_t)(20000 / want[i].res);
        cf_grid dst = grid(1000, 99000, want[i].res, n, n);
        cf__warp *w = NULL;
        CHECK(cf__warp_new(&src, &dst, NULL, 0.125, &w, NULL) == CF_OK);
        int l = cf__warp_pick_level(w, 0, 0, n, n, sizes, 4);
        if (l != want[i].level) fprintf(stderr, "res %g: level %d\n", want[i].res, l);
        CHECK(l == want[i].level);
        cf__warp_free(w);
    }
    /* A target three quarters outside the image: GDAL's halving leaves
     * the outside chunks out. */
    cf_grid small = grid(0, 1000, 10, 100, 100);
    cf_grid dst = grid(500, 1500, 10, 200, 200);
    cf__warp *w = NULL;
    CHECK(cf__warp_new(&small, &dst, NULL, 0.125, &w, NULL) == CF_OK);
    cf__warp_req rq = {0, 0, 200, 200, CF_RS_BILINEAR, 0, 100, 100, 100, 100, 0, NULL};
    cf__warp_cost cost = {16, 16, 64.0 * 1024 * 1024};
    cf__warp_chunk *ch = NULL;
    size_t nch = 0;
    CHECK(cf__warp_chunks(w, &rq, &cost, &ch, &nch, NULL) == CF_OK);
    uint64_t covered = 0;
    for (size_t k = 0; k < nch; k++) covered += (uint64_t)ch[k].rq.tw * ch[k].rq.th;
    CHECK(nch >= 1 && covered < 200 * 200);
    free(ch);
    cf__warp_free(w);
    /* A small memory limit splits by size alone. */
    cf_grid same = grid(0, 1000, 10, 100, 100);
    CHECK(cf__warp_new(&small, &same, NULL, 0.125, &w, NULL) == CF_OK);
    cf__warp_req inside = {0, 0, 100, 100, CF_RS_BILINEAR, 0, 100, 100, 100, 100, 0, NULL};
    cost.memory = 20000;
    CHECK(cf__warp_chunks(w, &inside, &cost, &ch, &nch, NULL) == CF_OK);
    CHECK(nch > 1);
    covered = 0;
    for (size_t k = 0; k < nch; k++) covered += (uint64_t)ch[k].rq.tw * ch[k].rq.th;
    CHECK(covered == 100 * 100);
    free(ch);
    cf__warp_free(w);
}

/* Threads sharing one map (TSan). */
typedef struct job {
    const cf__warp *w;
    const uint16_t *data;
    uint16_t out[64 * 64];
    int failures;              /* CHECK's counters are the main thread's */
} job;

static void *worker(void *arg) {
    job *j = arg;
    cf__warp_req rq = {0, 0, 64, 64, CF_RS_CUBIC, 0, 100, 100, 100, 100, 0, NULL};
    cf__warp_win win;
    if (cf__warp_window(j->w, &rq, &win, NULL) != CF_OK || win.empty) {
        j->failures++;
        return NULL;
    }
    uint16_t *buf = malloc((size_t)win.w * win.h * 2);
    for (uint32_t y = 0; y < win.h; y++)
        memcpy(buf + (size_t)y * win.w, j->data + (size_t)(win.y + y) * 100 + win.x, win.w * 2);
    cf__warp_src s = {buf, CF_DT_U16, 1, NULL, 0, 0};
    cf__warp_dst d = {j->out, 0, 0, 0, 0};
    for (int k = 0; k < 20; k++)
        j->failures += cf__warp_resample(j->w, &rq, &win, &s, &d, NULL) != CF_OK;
    free(buf);
    return NULL;
}

static void test_threads(void) {
    cf_grid src = grid(0, 1000, 10, 100, 100);
    cf_grid dst = grid(123, 877, 7, 64, 64);
    cf__warp *w = NULL;
    CHECK(cf__warp_new(&src, &dst, NULL, 0.125, &w, NULL) == CF_OK);
    uint16_t *data = make_data(CF_DT_U16, 100 * 100);
    static job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].w = w;
        jobs[i].data = data;
        jobs[i].failures = 0;
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].failures == 0);
    }
    for (int i = 1; i < 4; i++) CHECK(!memcmp(jobs[0].out, jobs[i].out, sizeof jobs[0].out));
    free(data);
    cf__warp_free(w);
}

int main(void) {
    CHECK(cf_crs_from_epsg(32633, &utm33, NULL) == CF_OK);
    test_fast_equals_general();
    test_fast_nudge();
    test_translation_and_replication();
    test_nodata();
    test_row_polar_and_antimeridian();
    test_lattice_bound();
    test_kept_positions();
    test_level_and_chunks();
    test_threads();
    cf_crs_free(utm33);
    return CF_TEST_END();
}
