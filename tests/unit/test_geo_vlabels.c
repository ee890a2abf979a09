/*
 * test_geo_vlabels.c - vector labels in C (lib/geo/wkb.c, rtree.c,
 * rasterize.c, vlabels.c), so that the sanitizer builds run them: the
 * R-tree against a brute-force scan, squares and a square with a hole
 * burnt with the centre rule and all_touched, later features winning,
 * a grid in another CRS, and every truncation of a WKB geometry refused
 * without reading past it.  (Equality with gdal_rasterize:
 * tests/python/test_vector_labels.py.)
 */
#include "cf_test.h"
#include "geo/geo.h"

#include <math.h>
#include <string.h>

static void test_rtree(void) {
    enum { N = 5000 };
    static double boxes[4 * N];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double x = (double)(s >> 40) / (1 << 24) * 1000, y = (double)((s >> 16) & 0xffffff) / (1 << 24) * 1000;
        double w = (double)(s & 0xff) / 16, h = (double)((s >> 8) & 0xff) / 16;
        boxes[4 * i] = x;
        boxes[4 * i + 1] = y;
        boxes[4 * i + 2] = x + w;
        boxes[4 * i + 3] = y + h;
    }
    cf__rtree *t;
    cf_error e;
    CHECK(cf__rtree_new(boxes, N, &t, &e) == CF_OK);
    cf__ids ids = {0};
    int all_ok = 1;
    for (int q = 0; q < 200; q++) {
        double qb[4] = {q * 5.0, q * 4.0, q * 5.0 + 37, q * 4.0 + 23};
        CHECK(cf__rtree_query(t, qb, &ids, &e) == CF_OK);
        size_t k = 0;
        for (uint32_t i = 0; i < N; i++) {
            const double *b = boxes + 4 * i;
            if (b[0] <= qb[2] && b[2] >= qb[0] && b[1] <= qb[3] && b[3] >= qb[1]) {
                if (k >= ids.n || ids.v[k] != i) all_ok = 0;
                k++;
            }
        }
        if (k != ids.n) all_ok = 0;
    }
    CHECK(all_ok);
    free(ids.v);
    /* a query that meets nothing, into a list that has no array yet
     * (under UBSan the old code passed NULL to qsort) */
    double far[4] = {1e9, 1e9, 1e9 + 1, 1e9 + 1};
    cf__ids fresh = {0};
    CHECK(cf__rtree_query(t, far, &fresh, &e) == CF_OK && fresh.n == 0);
    free(fresh.v);
    cf__rtree_free(t);
    /* empty tree */
    CHECK(cf__rtree_new(NULL, 0, &t, &e) == CF_OK);
    double qb[4] = {0, 0, 1, 1};
    cf__ids none = {0};
    CHECK(cf__rtree_query(t, qb, &none, &e) == CF_OK && none.n == 0);
    cf__rtree_free(t);
}

/* Little-endian WKB polygon of rings given as (x, y) lists. */
static size_t wkb_polygon(uint8_t *out, const double *const *rings, const uint32_t *n,
                          uint32_t nrings) {
    size_t k = 0;
    out[k++] = 1;
    uint32_t t = 3;
    memcpy(out + k, &t, 4), k += 4;
    memcpy(out + k, &nrings, 4), k += 4;
    for (uint32_t r = 0; r < nrings; r++) {
        memcpy(out + k, &n[r], 4), k += 4;
        memcpy(out + k, rings[r], 16 * (size_t)n[r]), k += 16 * (size_t)n[r];
    }
    return k;
}

static size_t count(const uint8_t *m, size_t n, uint8_t v) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += m[i] == v;
    return c;
}

static void test_burn(cf_crs *utm) {
    /* grid: 100 x 100 px of 10 m from (500000, 4000000) */
    cf_grid g = {utm, {500000, 10, 0, 4000000, 0, -10}, 100, 100};
    /* square A: pixels 10..29 x 10..29 (corners on pixel edges), with a
     * hole 15..19 x 15..19; square B: pixels 25..44 x 25..44, later */
    const double a_out[] = {500100, 3999900, 500300, 3999900, 500300, 3999700,
                            500100, 3999700, 500100, 3999900};
    const double a_hole[] = {500150, 3999850, 500200, 3999850, 500200, 3999800,
                             500150, 3999800, 500150, 3999850};
    const double b_out[] = {500250, 3999750, 500450, 3999750, 500450, 3999550,
                            500250, 3999550, 500250, 3999750};
    /* C: a thin sliver between pixel centres (x 50.6 .. 50.9 px): no
     * centre inside, but it touches column 50 */
    const double c_out[] = {500506, 3999000, 500509, 3999000, 500509, 3998800,
                            500506, 3998800, 500506, 3999000};
    uint8_t wa[512], wb[256], wc[256];
    const double *ra[] = {a_out, a_hole}, *rb[] = {b_out}, *rc[] = {c_out};
    const uint32_t na[] = {5, 5}, nb[] = {5}, nc[] = {5};
    const uint8_t *wkb[3] = {wa, wb, wc};
    size_t len[3] = {wkb_polygon(wa, ra, na, 2), wkb_polygon(wb, rb, nb, 1),
                     wkb_polygon(wc, rc, nc, 1)};
    const double val[3] = {3, 7, 9};
    cf_error e;
    static uint8_t m[100 * 100];
    for (int at = 0; at < 2; at++) {
        cf_vlabels *vl;
        CHECK(cf_vlabels_new(3, wkb, len, val, utm, at, &vl, &e) == CF_OK);
        if (!vl) return;
        CHECK(cf_vlabels_count(vl) == 3 && cf_vlabels_dtype(vl) == CF_DT_U8);
        size_t nf = 0;
        CHECK(cf_vlabels_rasterize(vl, &g, CF_DT_U8, m, &nf, &e) == CF_OK);
        CHECK(nf == 3);
        CHECK(m[12 * 100 + 12] == 3);   /* A */
        CHECK(m[17 * 100 + 17] == 0);   /* A's hole */
        CHECK(m[27 * 100 + 27] == 7);   /* A and B: B, the later */
        CHECK(m[40 * 100 + 40] == 7);   /* B */
        CHECK(m[50 * 100 + 50] == 0);   /* outside */
        /* A: 400 - 25 (hole) - the 25 B took from it; all_touched adds
         * the pixels right of and below its edges that lie on pixel lines
         * (column 30, row 30: floor() of the edge) */
        if (!at) CHECK(count(m, sizeof m, 3) == 350);
        if (!at) CHECK(count(m, sizeof m, 7) == 400);
        if (at) CHECK(count(m, sizeof m, 3) > 350 && count(m, sizeof m, 7) > 400);
        /* the sliver: no centre inside; all_touched burns column 50 of
         * rows 100 .. 119 (its edges on row lines touch rows 100 and 120
         * only at their boundary: the walk burns floor(y)) */
        if (!at) CHECK(count(m, sizeof m, 9) == 0);
        /* (rows 100 .. 119 lie outside this 100-row grid: a grid there) */
        cf_grid g2 = {utm, {500000, 10, 0, 3999000, 0, -10}, 100, 30};
        static uint8_t m2[100 * 30];
        CHECK(cf_vlabels_rasterize(vl, &g2, CF_DT_U8, m2, &nf, &e) == CF_OK);
        CHECK(count(m2, sizeof m2, 9) == (at ? 21u : 0u));
        CHECK(m2[5 * 100 + 50] == (at ? 9 : 0));
        /* a wider type and a float type take the same values */
        static int32_t m32[100 * 100];
        CHECK(cf_vlabels_rasterize(vl, &g, CF_DT_I32, m32, NULL, &e) == CF_OK);
        CHECK(m32[27 * 100 + 27] == 7 && m32[12 * 100 + 12] == 3);
        /* the same labels on a lon/lat grid around them: A still there */
        cf_crs *ll = NULL;
        CHECK(cf_crs_from_epsg(4326, &ll, &e) == CF_OK);
        if (ll) {
            /* 500200 E, 3999800 N in UTM 33N is about 15.0022 E, 36.1392 N */
            cf_grid gl = {ll, {14.995, 0.0001, 0, 36.145, 0, -0.0001}, 200, 200};
            static uint8_t ml[200 * 200];
            CHECK(cf_vlabels_rasterize(vl, &gl, CF_DT_U8, ml, &nf, &e) == CF_OK);
            CHECK(count(ml, sizeof ml, 3) > 100 && count(ml, sizeof ml, 7) > 100);
            cf_crs_free(ll);
        }
        cf_vlabels_free(vl);
    }
    /* a non-integer or too large value is refused by feature */
    const double bad[1] = {1.5};
    cf_vlabels *vl = NULL;
    CHECK(cf_vlabels_new(1, wkb, len, bad, utm, 0, &vl, &e) == CF_E_ARG && !vl);
    CHECK(strstr(e.msg, "feature 0") != NULL);
}

static void test_truncations(void) {
    const double r[] = {0, 0, 1, 0, 1, 1, 0, 0};
    const double *rings[] = {r, r};
    const uint32_t n[] = {4, 4};
    uint8_t w[256];
    size_t len = wkb_polygon(w, rings, n, 2);
    int refused = 1;
    for (size_t cut = 0; cut < len; cut++) {
        /* a copy exactly as long as the cut, so that ASan sees any read
         * past it */
        uint8_t *c = malloc(cut ? cut : 1);
        memcpy(c, w, cut);
        cf__shapes s = {.max_xy = 1000};
        cf_error e;
        if (cf__wkb_polygons(c, cut, &s, "t", &e) != CF_E_FORMAT) refused = 0;
        free(s.x);
        free(s.y);
        free(s.ring_len);
        free(s.poly_rings);
        free(c);
    }
    CHECK(refused);
    cf__shapes s = {.max_xy = 1000};
    cf_error e;
    CHECK(cf__wkb_polygons(w, len, &s, "t", &e) == CF_OK);
    CHECK(s.nxy == 8 && s.nrings == 2 && s.npolys == 1 && s.poly_rings[0] == 2);
    free(s.x);
    free(s.y);
    free(s.ring_len);
    free(s.poly_rings);
    /* the vertex budget */
    cf__shapes small = {.max_xy = 5};
    CHECK(cf__wkb_polygons(w, len, &small, "t", &e) == CF_E_LIMIT);
    free(small.x);
    free(small.y);
    free(small.ring_len);
    free(small.poly_rings);
}

/* A ring left open (its last vertex not repeating the first) burns as
 * its closed twin, by both rules: the edge walk of all_touched closed it
 * not (the fill did), so a triangle lost the pixels along its last edge. */
static void test_open_ring(cf_crs *utm) {
    cf_grid g = {utm, {500000, 10, 0, 4000000, 0, -10}, 40, 40};
    const double closed[] = {500012, 3999988, 500333, 3999905, 500077, 3999651, 500012, 3999988};
    const double *rc[] = {closed}, *ro[] = {closed};
    const uint32_t nc[] = {4}, no[] = {3};
    uint8_t wc[128], wo[128];
    const uint8_t *w1[1] = {wc}, *w2[1] = {wo};
    size_t l1[1] = {wkb_polygon(wc, rc, nc, 1)}, l2[1] = {wkb_polygon(wo, ro, no, 1)};
    const double val[1] = {5};
    static uint8_t m1[40 * 40], m2[40 * 40];
    cf_error e;
    for (int at = 0; at < 2; at++) {
        cf_vlabels *a = NULL, *b = NULL;
        CHECK(cf_vlabels_new(1, w1, l1, val, utm, at, &a, &e) == CF_OK);
        CHECK(cf_vlabels_new(1, w2, l2, val, utm, at, &b, &e) == CF_OK);
        if (!a || !b) return;
        CHECK(cf_vlabels_rasterize(a, &g, CF_DT_U8, m1, NULL, &e) == CF_OK);
        CHECK(cf_vlabels_rasterize(b, &g, CF_DT_U8, m2, NULL, &e) == CF_OK);
        CHECK(count(m1, sizeof m1, 5) > 100);
        CHECK(memcmp(m1, m2, sizeof m1) == 0);
        cf_vlabels_free(a);
        cf_vlabels_free(b);
    }
}

int main(void) {
    cf_error e;
    cf_crs *utm = NULL;
    test_rtree();
    test_truncations();
    CHECK(cf_crs_from_epsg(32633, &utm, &e) == CF_OK);
    if (utm) test_burn(utm);
    if (utm) test_open_ring(utm);
    cf_crs_free(utm);
    return CF_TEST_END();
}
