/*
 * rasterize.c - burning a polygon into a raster with GDAL's rules
 * (gdal_rasterize), so that labels drawn from vector files equal what
 * users get from GDAL on the same grid.
 *
 * Coordinates are pixel coordinates of the raster (x right, y down, pixel
 * (i, j) covering [i, i+1) x [j, j+1)).  The rings of one polygon are
 * filled together by the even-odd rule (holes are holes); the parts of a
 * MultiPolygon are burnt one after the other, so that where they overlap
 * the pixels are burnt (their union), as gdal_rasterize does.
 *
 * Default rule: a pixel is burnt when its centre is inside.  Each row's
 * centre line y + 0.5 is cut with every edge that spans it (an edge owns
 * its lower end, not its upper one, so that a vertex on the line counts
 * once), each crossing rounded to the pixel whose centre lies at or after
 * it (floor(x + 0.5)), and the pixels between pairs of crossings are
 * burnt.  A horizontal edge lying exactly on a centre line is burnt when
 * it runs right to left (the bottom edge of a ring drawn clockwise in
 * pixel space), as GDAL does.
 *
 * all_touched: also every pixel an edge passes through (gdal_rasterize
 * -at): the edge is walked from pixel to pixel left to right; an edge
 * within 0.01 pixel of vertical burns one column, within 0.01 pixel of
 * horizontal one row, as GDAL's walk does.
 */
#include "geo_internal.h"

#include <math.h>
#include <stdlib.h>

/* Crossings far outside any raster are clamped before the cast to int
 * (a vertex may lie anywhere; the cast of a huge double is undefined). */
#define BURN_FAR 1073741824.0

static int round_px(double v) {
    v = floor(v + 0.5);
    if (v < -BURN_FAR) v = -BURN_FAR;
    if (v > BURN_FAR) v = BURN_FAR;
    return (int)v;
}

static int floor_px(double v) {
    v = floor(v);
    if (v < -BURN_FAR) v = -BURN_FAR;
    if (v > BURN_FAR) v = BURN_FAR;
    return (int)v;
}

static void put(const cf__burn *b, uint32_t x, uint32_t y) {
    size_t i = (size_t)y * b->w + x;
    switch (b->dt) {
    case CF_DT_U8: ((uint8_t *)b->out)[i] = (uint8_t)b->value; break;
    case CF_DT_U16: ((uint16_t *)b->out)[i] = (uint16_t)b->value; break;
    case CF_DT_I16: ((int16_t *)b->out)[i] = (int16_t)b->value; break;
    case CF_DT_U32: ((uint32_t *)b->out)[i] = (uint32_t)b->value; break;
    case CF_DT_I32: ((int32_t *)b->out)[i] = (int32_t)b->value; break;
    case CF_DT_F32: ((float *)b->out)[i] = (float)b->value; break;
    case CF_DT_F64: ((double *)b->out)[i] = b->value; break;
    default: ((uint8_t *)b->out)[i] = (uint8_t)b->value; break;
    }
}

/* Burn pixels x0..x1 (inclusive) of row y, clipped to the raster. */
static void span(const cf__burn *b, int y, int x0, int x1) {
    if (y < 0 || (uint32_t)y >= b->h) return;
    if (x0 < 0) x0 = 0;
    if (x1 >= (int)b->w) x1 = (int)b->w - 1;
    for (int x = x0; x <= x1; x++) put(b, (uint32_t)x, (uint32_t)y);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void fill(const cf__burn *b, const double *px, const double *py, const uint32_t *ring_len,
                 uint32_t nrings, size_t n, int *ints) {
    double lo = py[0], hi = py[0];
    for (size_t i = 1; i < n; i++) {
        if (py[i] < lo) lo = py[i];
        if (py[i] > hi) hi = py[i];
    }
    /* Rows whose centre line the polygon may span (truncation, as GDAL:
     * the rows are clipped to the raster below anyway). */
    if (hi < 0 || lo >= (double)b->h) return;
    int y0 = lo < 0 ? 0 : (int)lo;
    int y1 = hi >= (double)b->h ? (int)b->h - 1 : (int)hi;
    for (int y = y0; y <= y1; y++) {
        const double cy = y + 0.5;
        size_t nint = 0, start = 0;
        for (uint32_t r = 0; r < nrings; start += ring_len[r++]) {
            const size_t m = ring_len[r];
            for (size_t k = 0; k < m; k++) {
                /* the edge into vertex k (from the ring's last vertex
                 * for k = 0: rings need not be closed) */
                size_t a = start + (k ? k - 1 : m - 1), c = start + k;
                double ya = py[a], yc = py[c];
                if ((ya < cy && yc < cy) || (ya > cy && yc > cy)) continue;
                if (ya == yc) {
                    /* on the centre line: burnt when drawn right to left */
                    if (px[a] > px[c]) {
                        int h0 = round_px(px[c]), h1 = round_px(px[a]);
                        if (h0 < (int)b->w && h1 > 0) span(b, y, h0, h1 - 1);
                    }
                    continue;
                }
                double xl = px[a], xh = px[c];
                if (ya > yc) {
                    double t = ya;
                    ya = yc;
                    yc = t;
                    xl = px[c];
                    xh = px[a];
                }
                if (cy >= ya && cy < yc)
                    ints[nint++] = round_px((cy - ya) * (xh - xl) / (yc - ya) + xl);
            }
        }
        qsort(ints, nint, sizeof *ints, cmp_int);
        for (size_t i = 0; i + 1 < nint; i += 2)
            if (ints[i] < (int)b->w && ints[i + 1] > 0) span(b, y, ints[i], ints[i + 1] - 1);
    }
}

/* Every pixel the edge (x0, y0) - (x1, y1) passes through. */
static void touch_edge(const cf__burn *b, double x0, double y0, double x1, double y1) {
    const double W = b->w, H = b->h;
    if ((y0 < 0 && y1 < 0) || (y0 > H && y1 > H) || (x0 < 0 && x1 < 0) || (x0 > W && x1 > W))
        return;
    if (x0 > x1) {
        double t = x0;
        x0 = x1;
        x1 = t;
        t = y0;
        y0 = y1;
        y1 = t;
    }
    if (floor(x0) == floor(x1) || fabs(x0 - x1) < .01) {
        /* one column: the right end's */
        int ix = floor_px(x1);
        if (ix < 0 || ix >= (int)b->w) return;
        double lo = y0 < y1 ? y0 : y1, hi = y0 < y1 ? y1 : y0;
        int iy0 = floor_px(lo), iy1 = floor_px(hi);
        if (iy0 < 0) iy0 = 0;
        if (iy1 >= (int)b->h) iy1 = (int)b->h - 1;
        for (int iy = iy0; iy <= iy1; iy++) put(b, (uint32_t)ix, (uint32_t)iy);
        return;
    }
    if (floor(y0) == floor(y1) || fabs(y0 - y1) < .01) {
        /* one row: the left end's */
        span(b, floor_px(y0), floor_px(x0), floor_px(x1));
        return;
    }
    const double slope = (y1 - y0) / (x1 - x0);
    /* Clip to the raster: right and left, then the end that leaves it
     * at the top or bottom. */
    if (x1 > W) {
        y1 -= (x1 - W) * slope;
        x1 = W;
    }
    if (x0 < 0) {
        y0 -= x0 * slope;
        x0 = 0;
    }
    if (y1 > y0) {
        if (y0 < 0) {
            x0 -= y0 / slope;
            y0 = 0;
        }
        if (y1 >= H) x1 += (y1 - H) / slope;
    } else {
        if (y0 >= H) {
            x0 += (H - y0) / slope;
            y0 = H;
        }
        if (y1 < 0) x1 -= y1 / slope;
    }
    /* Walk: to the next column boundary when the row does not change on
     * the way, else to the next row boundary (nudged past it by 1e-9, so
     * that the walk always advances). */
    while (x0 >= 0 && x0 < x1) {
        const int ix = floor_px(x0), iy = floor_px(y0);
        if (iy >= 0 && iy < (int)b->h && ix < (int)b->w) put(b, (uint32_t)ix, (uint32_t)iy);
        double dx = floor(x0 + 1.0) - x0, dy = dx * slope;
        if (floor_px(y0 + dy) != iy) {
            if (slope < 0) {
                dy = iy - y0;
                if (dy > -1e-9) dy = -1e-9;
            } else {
                dy = (iy + 1) - y0;
                if (dy < 1e-9) dy = 1e-9;
            }
            dx = dy / slope;
        }
        x0 += dx;
        y0 += dy;
    }
}

void cf__burn_polygon(const cf__burn *b, const double *px, const double *py,
                      const uint32_t *ring_len, uint32_t nrings, int *ints) {
    size_t n = 0;
    for (uint32_t r = 0; r < nrings; r++) n += ring_len[r];
    if (!n || !b->w || !b->h) return;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(px[i]) || !isfinite(py[i])) return;
    if (b->all_touched) {
        size_t start = 0;
        for (uint32_t r = 0; r < nrings; start += ring_len[r++]) {
            const size_t m = ring_len[r], last = start + m - 1;
            for (size_t k = 1; k < m; k++)
                touch_edge(b, px[start + k - 1], py[start + k - 1], px[start + k], py[start + k]);
            /* a ring left open is closed, as fill() closes it */
            if (m > 1 && (px[last] != px[start] || py[last] != py[start]))
                touch_edge(b, px[last], py[last], px[start], py[start]);
        }
    }
    fill(b, px, py, ring_len, nrings, n, ints);
}
