/*
 * roi.c - a region of interest (polygons, in any CRS) in the pixels of a
 * target grid, and whether a window of that grid meets it (geo.h): what
 * the Loader's samplers keep to (cf_loader_options.roi).
 *
 * Each polygon's rings are filled by the even-odd rule (its outer ring and
 * holes, as GeoJSON has them), and the region is the union of the
 * polygons (a MultiPolygon's parts may overlap, as unions of fields
 * often do).  Edges are densified before they are transformed, so
 * that a straight edge in one CRS stays close to the curve it becomes in
 * another (UTM <-> geographic: well under a pixel at 16 steps per edge of
 * a region a few hundred km across).
 */
#include "geo_internal.h"

#include <math.h>
#include <stdlib.h>

#define ROI_STEPS 16 /* points per edge when the CRS differs */

struct cf__roi {
    double *x, *y;             /* every ring's vertices, target pixels */
    uint32_t *start;           /* ring r: [start[r], start[r + 1]) */
    uint32_t nrings;
    uint32_t *poly;            /* polygon p: rings [poly[p], poly[p + 1]) */
    uint32_t npolys;
    double b[4];               /* bounds: x0, y0, x1, y1 */
};

void cf__roi_free(cf__roi *r) {
    if (!r) return;
    free(r->x);
    free(r->y);
    free(r->start);
    free(r->poly);
    free(r);
}

cf_status cf__roi_new(const double *xy, const uint32_t *ring_len, uint32_t nrings,
                      const uint32_t *poly_rings, uint32_t npolys, const cf_crs *from,
                      const cf_grid *to, cf__roi **out, cf_error *err) {
    *out = NULL;
    if (!xy || !ring_len || !nrings || !to)
        return cf__err(err, CF_E_ARG, "roi: no rings");
    if (from && !to->crs)
        return cf__err(err, CF_E_ARG, "roi: it has a CRS and the target grid has none");
    uint64_t in_polys = 0;
    for (uint32_t p = 0; poly_rings && p < npolys; p++) in_polys += poly_rings[p];
    if (poly_rings && (!npolys || in_polys != nrings))
        return cf__err(err, CF_E_ARG, "roi: the polygons hold %llu rings, not %u",
                       (unsigned long long)in_polys, nrings);
    const int reproject = from && to->crs && !cf_crs_equivalent(from, to->crs);
    const uint32_t steps = reproject ? ROI_STEPS : 1;
    uint64_t total = 0;
    for (uint32_t r = 0; r < nrings; r++) {
        if (ring_len[r] < 3 || ring_len[r] > CF__ROI_MAX_VERTICES)
            return cf__err(err, CF_E_ARG, "roi: ring %u has %u vertices (3 to %u)", r,
                           ring_len[r], (unsigned)CF__ROI_MAX_VERTICES);
        total += (uint64_t)ring_len[r] * steps;
    }
    if (total > (uint64_t)CF__ROI_MAX_VERTICES * 4)
        return cf__err(err, CF_E_LIMIT, "roi: %llu vertices (at most %u)",
                       (unsigned long long)total, (unsigned)CF__ROI_MAX_VERTICES * 4);
    cf__roi *g = cf__calloc(1, sizeof *g);
    if (g) {
        g->x = cf__malloc((size_t)total * sizeof *g->x);
        g->y = cf__malloc((size_t)total * sizeof *g->y);
        g->start = cf__calloc((size_t)nrings + 1, sizeof *g->start);
    }
    if (g) g->poly = cf__calloc((size_t)(poly_rings ? npolys : 1) + 1, sizeof *g->poly);
    if (!g || !g->x || !g->y || !g->start || !g->poly) {
        cf__roi_free(g);
        return cf__err(err, CF_E_NOMEM, "roi: %llu vertices", (unsigned long long)total);
    }
    g->nrings = nrings;
    g->npolys = poly_rings ? npolys : 1;
    for (uint32_t p = 0; p < g->npolys; p++)
        g->poly[p + 1] = g->poly[p] + (poly_rings ? poly_rings[p] : nrings);
    /* The rings, each edge cut in `steps` (a ring's last vertex joins its
     * first; a closing vertex equal to the first is kept: a zero edge). */
    size_t k = 0;
    const double *p = xy;
    for (uint32_t r = 0; r < nrings; r++) {
        g->start[r] = (uint32_t)k;
        uint32_t n = ring_len[r];
        for (uint32_t i = 0; i < n; i++) {
            double ax = p[2 * i], ay = p[2 * i + 1];
            double bx = p[2 * ((i + 1) % n)], by = p[2 * ((i + 1) % n) + 1];
            for (uint32_t s = 0; s < steps; s++) {
                /* (Not ax + (bx - ax) f: the difference of two huge
                 * coordinates may overflow.) */
                double f = (double)s / steps;
                g->x[k] = ax * (1 - f) + bx * f;
                g->y[k++] = ay * (1 - f) + by * f;
            }
        }
        p += 2 * (size_t)n;
    }
    g->start[nrings] = (uint32_t)k;
    for (size_t i = 0; i < k; i++)
        if (!isfinite(g->x[i]) || !isfinite(g->y[i])) {
            cf__roi_free(g);
            return cf__err(err, CF_E_ARG, "roi: a vertex is not a finite number");
        }
    if (reproject) {
        cf__xform *xf;
        cf_status st = cf__xform_new(from, to->crs, &xf, err);
        if (st) {
            cf__roi_free(g);
            return cf__err_prefix(err, st, "roi");
        }
        uint8_t *ok = cf__malloc(k ? k : 1);
        if (!ok) {
            cf__xform_free(xf);
            cf__roi_free(g);
            return cf__err(err, CF_E_NOMEM, "roi");
        }
        cf__xform_run(xf, k, g->x, g->y, ok);
        cf__xform_free(xf);
        size_t bad = 0;
        for (size_t i = 0; i < k; i++) bad += !ok[i];
        free(ok);
        if (bad) {
            cf__roi_free(g);
            return cf__err(err, CF_E_ARG,
                           "roi: %zu of its points have no place in the target grid's CRS",
                           bad);
        }
    }
    /* Into the grid's pixels: its inverse geotransform. */
    const double *t = to->transform;
    double det = t[1] * t[5] - t[2] * t[4];
    if (!(det != 0)) {
        cf__roi_free(g);
        return cf__err(err, CF_E_ARG, "roi: the target grid's transform is not invertible");
    }
    g->b[0] = g->b[1] = INFINITY;
    g->b[2] = g->b[3] = -INFINITY;
    for (size_t i = 0; i < k; i++) {
        double X = g->x[i] - t[0], Y = g->y[i] - t[3];
        g->x[i] = (t[5] * X - t[2] * Y) / det;
        g->y[i] = (t[1] * Y - t[4] * X) / det;
        g->b[0] = fmin(g->b[0], g->x[i]);
        g->b[1] = fmin(g->b[1], g->y[i]);
        g->b[2] = fmax(g->b[2], g->x[i]);
        g->b[3] = fmax(g->b[3], g->y[i]);
    }
    *out = g;
    return CF_OK;
}

void cf__roi_bounds(const cf__roi *r, double b[4]) { memcpy(b, r->b, sizeof r->b); }

void cf__roi_point(const cf__roi *r, uint64_t pick, double w, double h, double *x, double *y) {
    const uint32_t n = r->start[r->nrings];
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (uint32_t)((pick + k) % n);
        if (r->x[i] >= 0 && r->x[i] < w && r->y[i] >= 0 && r->y[i] < h) {
            *x = r->x[i];
            *y = r->y[i];
            return;
        }
    }
    *x = (fmax(r->b[0], 0) + fmin(r->b[2], w)) / 2;
    *y = (fmax(r->b[1], 0) + fmin(r->b[3], h)) / 2;
}

/* Whether (px, py) is inside: in some polygon, by the even-odd rule over
 * its rings. */
static int inside(const cf__roi *r, double px, double py) {
    for (uint32_t p = 0; p < r->npolys; p++) {
        int in = 0;
        for (uint32_t q = r->poly[p]; q < r->poly[p + 1]; q++) {
            uint32_t a = r->start[q], n = r->start[q + 1] - a;
            for (uint32_t i = 0, j = n - 1; i < n; j = i++) {
                double xi = r->x[a + i], yi = r->y[a + i], xj = r->x[a + j], yj = r->y[a + j];
                if ((yi > py) != (yj > py) && px < (xj - xi) * (py - yi) / (yj - yi) + xi)
                    in = !in;
            }
        }
        if (in) return 1;
    }
    return 0;
}

/* Whether segment (ax, ay)-(bx, by) meets the open rectangle (x0, y0,
 * x1, y1): Liang-Barsky clipping. */
static int segment_meets(double ax, double ay, double bx, double by, double x0, double y0,
                         double x1, double y1) {
    double t0 = 0, t1 = 1, dx = bx - ax, dy = by - ay;
    const double p[4] = {-dx, dx, -dy, dy}, q[4] = {ax - x0, x1 - ax, ay - y0, y1 - ay};
    for (int i = 0; i < 4; i++) {
        if (p[i] == 0) {
            if (q[i] <= 0) return 0;
            continue;
        }
        double u = q[i] / p[i];
        if (p[i] < 0) {
            if (u > t0) t0 = u;
        } else if (u < t1) {
            t1 = u;
        }
        if (t0 >= t1) return 0;
    }
    return 1;
}

int cf__roi_meets(const cf__roi *r, double x0, double y0, double x1, double y1) {
    if (x1 <= r->b[0] || r->b[2] <= x0 || y1 <= r->b[1] || r->b[3] <= y0) return 0;
    /* The window inside the region (its centre: no edge crosses it then),
     * or an edge of the region through the window. */
    if (inside(r, (x0 + x1) / 2, (y0 + y1) / 2)) return 1;
    for (uint32_t q = 0; q < r->nrings; q++) {
        uint32_t a = r->start[q], n = r->start[q + 1] - a;
        for (uint32_t i = 0, j = n - 1; i < n; j = i++)
            if (segment_meets(r->x[a + j], r->y[a + j], r->x[a + i], r->y[a + i], x0, y0, x1,
                              y1))
                return 1;
    }
    return 0;
}
