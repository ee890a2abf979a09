/*
 * test_geo_roi.c - regions of interest in a grid's pixels (lib/geo/roi.c):
 * a square with a square hole on the grid's own CRS, which windows meet
 * it (inside, across an edge, in the hole, outside the bounds, touching
 * only an edge), a concave ring, the same region given in longitude /
 * latitude, and bad rings.
 */
#include "cf_test.h"
#include "geo/geo.h"

#include <math.h>

/* UTM 33N, 10 m pixels, top-left corner at (500000, 4000000). */
static cf_grid utm_grid(cf_crs *crs) {
    cf_grid g = {.crs = crs, .transform = {500000, 10, 0, 4000000, 0, -10}, .width = 1000,
                 .height = 1000};
    return g;
}

static void test_square_with_hole(cf_crs *utm) {
    cf_grid g = utm_grid(utm);
    /* Pixels [100, 500) x [100, 500), hole [200, 300) x [200, 300). */
    const double xy[] = {501000, 3999000, 505000, 3999000, 505000, 3995000, 501000, 3995000,
                         502000, 3998000, 503000, 3998000, 503000, 3997000, 502000, 3997000};
    const uint32_t rings[] = {4, 4};
    cf__roi *r;
    cf_error e;
    CHECK(cf__roi_new(xy, rings, 2, NULL, 0, NULL, &g, &r, &e) == CF_OK);
    if (!r) return;
    double b[4];
    cf__roi_bounds(r, b);
    CHECK(fabs(b[0] - 100) < 1e-9 && fabs(b[1] - 100) < 1e-9 && fabs(b[2] - 500) < 1e-9 &&
          fabs(b[3] - 500) < 1e-9);
    CHECK(cf__roi_meets(r, 120, 120, 150, 150));  /* inside */
    CHECK(cf__roi_meets(r, 80, 80, 120, 120));    /* across a corner */
    CHECK(!cf__roi_meets(r, 220, 220, 280, 280)); /* in the hole */
    CHECK(cf__roi_meets(r, 180, 220, 220, 240));  /* across the hole's edge */
    CHECK(!cf__roi_meets(r, 600, 600, 700, 700)); /* outside the bounds */
    CHECK(!cf__roi_meets(r, 0, 0, 100, 100));     /* touching a corner only */
    CHECK(!cf__roi_meets(r, 500, 200, 550, 250)); /* touching an edge only */
    CHECK(cf__roi_meets(r, 0, 0, 1000, 1000));    /* the region inside the window */
    CHECK(cf__roi_meets(r, 190, 190, 310, 310));  /* the hole inside the window */
    cf__roi_free(r);
}

static void test_concave(cf_crs *utm) {
    cf_grid g = utm_grid(utm);
    /* A "U": pixels x in [100, 400), y in [100, 400), minus the notch
     * x in [200, 300), y in [100, 300). */
    const double px[][2] = {{100, 100}, {200, 100}, {200, 300}, {300, 300},
                            {300, 100}, {400, 100}, {400, 400}, {100, 400}};
    double xy[16];
    for (int i = 0; i < 8; i++) {
        xy[2 * i] = 500000 + 10 * px[i][0];
        xy[2 * i + 1] = 4000000 - 10 * px[i][1];
    }
    const uint32_t rings[] = {8};
    cf__roi *r;
    cf_error e;
    CHECK(cf__roi_new(xy, rings, 1, NULL, 0, NULL, &g, &r, &e) == CF_OK);
    if (!r) return;
    CHECK(!cf__roi_meets(r, 220, 120, 280, 280)); /* in the notch, within the bounds */
    CHECK(cf__roi_meets(r, 150, 120, 180, 150));  /* a leg */
    CHECK(cf__roi_meets(r, 220, 280, 280, 320));  /* across the notch's floor */
    cf__roi_free(r);
}

static void test_longitude_latitude(cf_crs *utm) {
    cf_grid g = utm_grid(utm);
    cf_crs *wgs;
    cf_error e;
    CHECK(cf_crs_from_epsg(4326, &wgs, &e) == CF_OK);
    /* A box around UTM 33N's central meridian (15 E), about 36.1 N. */
    const double xy[] = {14.999, 36.12, 15.02, 36.12, 15.02, 36.10, 14.999, 36.10};
    const uint32_t rings[] = {4};
    cf__roi *r;
    CHECK(cf__roi_new(xy, rings, 1, NULL, 0, wgs, &g, &r, &e) == CF_OK);
    if (r) {
        double b[4];
        cf__roi_bounds(r, b);
        /* 0.021 degrees of longitude: about 1.9 km = 189 px; 0.02 of
         * latitude: about 2.2 km = 222 px. */
        CHECK(b[2] - b[0] > 180 && b[2] - b[0] < 200);
        CHECK(b[3] - b[1] > 215 && b[3] - b[1] < 230);
        CHECK(cf__roi_meets(r, b[0] + 2, b[1] + 2, b[0] + 5, b[1] + 5));
        CHECK(!cf__roi_meets(r, b[2] + 1, b[1], b[2] + 50, b[3]));
        cf__roi_free(r);
    }
    /* A point the target CRS has no place for. */
    const double far[] = {15, 36, 15, 95, 16, 36};
    const uint32_t three[] = {3};
    CHECK(cf__roi_new(far, three, 1, NULL, 0, wgs, &g, &r, &e) == CF_E_ARG);
    cf_crs_free(wgs);
}

static void test_bad_rings(cf_crs *utm) {
    cf_grid g = utm_grid(utm);
    cf__roi *r;
    cf_error e;
    const double xy[] = {0, 0, 1, 1, NAN, 2};
    const uint32_t two[] = {2}, three[] = {3};
    CHECK(cf__roi_new(xy, two, 1, NULL, 0, NULL, &g, &r, &e) == CF_E_ARG &&
          strstr(e.msg, "ring 0"));
    CHECK(cf__roi_new(xy, three, 1, NULL, 0, NULL, &g, &r, &e) == CF_E_ARG &&
          strstr(e.msg, "finite"));
    CHECK(cf__roi_new(xy, three, 0, NULL, 0, NULL, &g, &r, &e) == CF_E_ARG);
}

/* Two overlapping squares as two polygons: their union (the overlap is
 * in the region, not a hole); as one polygon of two rings, even-odd makes
 * the overlap a hole.  A region with a CRS on a grid without one. */
static void test_overlapping_parts(cf_crs *utm) {
    cf_grid g = utm_grid(utm);
    /* Pixels [100, 300) and [200, 400) squared. */
    const double xy[] = {501000, 3999000, 503000, 3999000, 503000, 3997000, 501000, 3997000,
                         502000, 3998000, 504000, 3998000, 504000, 3996000, 502000, 3996000};
    const uint32_t rings[] = {4, 4}, polys[] = {1, 1}, bad[] = {1, 2};
    cf__roi *r;
    cf_error e;
    CHECK(cf__roi_new(xy, rings, 2, polys, 2, NULL, &g, &r, &e) == CF_OK);
    if (r) {
        CHECK(cf__roi_meets(r, 240, 240, 260, 260)); /* the overlap */
        CHECK(cf__roi_meets(r, 120, 120, 140, 140));
        CHECK(cf__roi_meets(r, 360, 360, 380, 380));
        CHECK(!cf__roi_meets(r, 320, 120, 380, 180));
        cf__roi_free(r);
    }
    CHECK(cf__roi_new(xy, rings, 2, NULL, 0, NULL, &g, &r, &e) == CF_OK);
    if (r) {
        CHECK(!cf__roi_meets(r, 240, 240, 260, 260)); /* even-odd: a hole */
        cf__roi_free(r);
    }
    CHECK(cf__roi_new(xy, rings, 2, bad, 2, NULL, &g, &r, &e) == CF_E_ARG &&
          strstr(e.msg, "polygons hold 3 rings"));
    cf_grid nocrs = utm_grid(NULL);
    CHECK(cf__roi_new(xy, rings, 2, NULL, 0, utm, &nocrs, &r, &e) == CF_E_ARG &&
          strstr(e.msg, "has none"));
}

int main(void) {
    cf_crs *utm;
    cf_error e;
    CHECK(cf_crs_from_epsg(32633, &utm, &e) == CF_OK);
    test_square_with_hole(utm);
    test_concave(utm);
    test_longitude_latitude(utm);
    test_bad_rings(utm);
    test_overlapping_parts(utm);
    cf_crs_free(utm);
    return CF_TEST_END();
}
