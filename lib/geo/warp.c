/*
 * warp.c - the coordinate map of a target grid onto a source grid, and
 * the planning GDAL's warper does with it: which overview to read and
 * which source window a target window needs.
 *
 * Same CRS: the map is the target's geotransform followed by the inverse
 * of the source level's, computed in that order as GDAL's GenImgProj
 * transformer does (so that a target pixel centre falling exactly on a
 * source pixel edge lands on the same side).  Another CRS: the target is
 * cut into blocks of 64 x 64 pixels; in each, PROJ transforms a lattice of
 * points whose step halves until bilinear interpolation between them is
 * within the error bound at every midpoint of the next finer lattice (or
 * the step is one pixel).  Lattice nodes hold source CRS coordinates, so
 * one lattice serves every overview level (a level's geotransform is
 * affine).  PROJ is called only while the map is built.
 */
#include "warp_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define BLOCK 64
#define MAX_NODES (64u << 20)

double cf__warp_wrap(const cf__warp *w, double lon) {
    if (!w->wrap || !isfinite(lon)) return lon;
    double lo = w->wrap_c - 180, hi = w->wrap_c + 180;
    if (lon < lo) lon += 360 * ceil((lo - lon) / 360);
    else if (lon > hi) lon -= 360 * ceil((lon - hi) / 360);
    return lon;
}

/* Longitude b unwrapped next to a (within 180 degrees of it), so that
 * interpolating across the antimeridian stays continuous. */
static inline double near_lon(double a, double b) {
    if (b - a > 180) return b - 360;
    if (a - b > 180) return b + 360;
    return b;
}

/* Bilinear interpolation of four nodes (a b / c d) at (tx, ty); for a
 * geographic source the longitudes are unwrapped around a first. */
static inline double interp4(int wrap, double a, double b, double c, double d, double tx,
                             double ty) {
    if (wrap) {
        b = near_lon(a, b);
        c = near_lon(a, c);
        d = near_lon(a, d);
    }
    return (a * (1 - tx) + b * tx) * (1 - ty) + (c * (1 - tx) + d * tx) * ty;
}

/* Target pixel position (px, py) -> source CRS coordinates. */
static void lattice_at(const cf__warp *w, double px, double py, double *x, double *y,
                       int *ok) {
    double bxf = floor(px / BLOCK), byf = floor(py / BLOCK);
    int64_t bx = bxf < 0 ? 0 : bxf >= w->nbx ? w->nbx - 1 : (int64_t)bxf;
    int64_t by = byf < 0 ? 0 : byf >= w->nby ? w->nby - 1 : (int64_t)byf;
    const cf__wblock *b = &w->blocks[by * w->nbx + bx];
    if (b->exact) {
        /* Interpolation is not within the error here (a pole): PROJ. */
        const double *t = w->dst_gt;
        double gx = t[0] + px * t[1] + py * t[2], gy = t[3] + px * t[4] + py * t[5];
        uint8_t good;
        cf__xform_run(w->xf, 1, &gx, &gy, &good);
        *ok = good;
        *x = good ? cf__warp_wrap(w, gx) : HUGE_VAL;
        *y = good ? gy : HUGE_VAL;
        return;
    }
    double lx = (px - (double)bx * BLOCK) / b->step, ly = (py - (double)by * BLOCK) / b->step;
    int nm = (int)b->n - 1;
    double cxf = floor(lx), cyf = floor(ly);
    int cx = cxf < 0 ? 0 : cxf >= nm ? nm - 1 : (int)cxf;
    int cy = cyf < 0 ? 0 : cyf >= nm ? nm - 1 : (int)cyf;
    double fx = lx - cx, fy = ly - cy;
    size_t i00 = b->off + (size_t)cy * b->n + (size_t)cx;
    const double *X = w->nx, *Y = w->ny;
    if (X[i00] == HUGE_VAL || X[i00 + 1] == HUGE_VAL || X[i00 + b->n] == HUGE_VAL ||
        X[i00 + b->n + 1] == HUGE_VAL) {
        *ok = 0;
        *x = *y = HUGE_VAL;
        return;
    }
    *ok = 1;
    *x = cf__warp_wrap(w, interp4(w->wrap, X[i00], X[i00 + 1], X[i00 + b->n],
                                  X[i00 + b->n + 1], fx, fy));
    *y = interp4(0, Y[i00], Y[i00 + 1], Y[i00 + b->n], Y[i00 + b->n + 1], fx, fy);
}

/* lattice_at along a row, then the source's inverse geotransform: what
 * is the same along the row (its lattice block row, and within a block
 * the node row and its fraction) computed once, every pixel's own terms
 * with lattice_at's arithmetic, so each pixel gets the same bits (the
 * warps are compared with gdalwarp's cell for cell; test_geo_warp.c
 * compares the two).  The lattice was a sixth of a mosaic's read across
 * two UTM zones, every term per pixel. */
static void lattice_row(const cf__warp *w, const double inv[6], double px0, double py,
                        uint32_t n, double *sx, double *sy, uint8_t *ok) {
    double byf = floor(py / BLOCK);
    int64_t by = byf < 0 ? 0 : byf >= w->nby ? w->nby - 1 : (int64_t)byf;
    const double *X = w->nx, *Y = w->ny;
    const cf__wblock *b = NULL;
    int64_t bx_at = -1;
    int nm = 0, cy = 0;
    /* BLOCK and the steps are powers of two: multiplying by their
     * reciprocals gives the quotients' exact bits. */
    const double per_block = 1.0 / BLOCK;
    double fy = 0, per_step = 1;
    for (uint32_t i = 0; i < n; i++) {
        double px = px0 + i, gx, gy;
        double bxf = floor(px * per_block);
        int64_t bx = bxf < 0 ? 0 : bxf >= w->nbx ? w->nbx - 1 : (int64_t)bxf;
        if (bx != bx_at) {
            bx_at = bx;
            b = &w->blocks[by * w->nbx + bx];
            double ly = (py - (double)by * BLOCK) / b->step;
            nm = (int)b->n - 1;
            double cyf = floor(ly);
            cy = cyf < 0 ? 0 : cyf >= nm ? nm - 1 : (int)cyf;
            fy = ly - cy;
            per_step = 1.0 / b->step;
        }
        if (b->exact) {
            int good;
            lattice_at(w, px, py, &gx, &gy, &good);
            if (!good) {
                ok[i] = 0;
                sx[i] = sy[i] = HUGE_VAL;
                continue;
            }
        } else {
            double lx = (px - (double)bx * BLOCK) * per_step;
            double cxf = floor(lx);
            int cx = cxf < 0 ? 0 : cxf >= nm ? nm - 1 : (int)cxf;
            double fx = lx - cx;
            size_t i00 = b->off + (size_t)cy * b->n + (size_t)cx;
            if (X[i00] == HUGE_VAL || X[i00 + 1] == HUGE_VAL || X[i00 + b->n] == HUGE_VAL ||
                X[i00 + b->n + 1] == HUGE_VAL) {
                ok[i] = 0;
                sx[i] = sy[i] = HUGE_VAL;
                continue;
            }
            gx = cf__warp_wrap(w, interp4(w->wrap, X[i00], X[i00 + 1], X[i00 + b->n],
                                          X[i00 + b->n + 1], fx, fy));
            gy = interp4(0, Y[i00], Y[i00 + 1], Y[i00 + b->n], Y[i00 + b->n + 1], fx, fy);
        }
        ok[i] = 1;
        sx[i] = inv[0] + gx * inv[1] + gy * inv[2];
        sy[i] = inv[3] + gx * inv[4] + gy * inv[5];
    }
}

void cf__warp_level_inverse(const cf__warp *w, uint32_t lw, uint32_t lh, double inv[6]) {
    /* GDAL's overview dataset: the main geotransform with its terms
     * scaled by the size ratios (GDALOverviewDataset::GetGeoTransform,
     * including its choice of ratio for each term). */
    double g[6];
    memcpy(g, w->src_gt, sizeof g);
    double rx = (double)w->sw / lw, ry = (double)w->sh / lh;
    g[1] *= rx;
    g[2] *= ry;
    g[4] *= rx;
    g[5] *= ry;
    if (!cf__gt_invert(g, inv)) memset(inv, 0, 6 * sizeof *inv);
}

void cf__warp_points(const cf__warp *w, const double inv[6], size_t n, const double *px,
                     const double *py, double *sx, double *sy, uint8_t *ok) {
    if (w->exact) {
        const double *t = w->dst_gt;
        for (size_t i = 0; i < n; i++) { /* px, py may be sx, sy */
            double x = px[i], y = py[i];
            sx[i] = t[0] + x * t[1] + y * t[2];
            sy[i] = t[3] + x * t[4] + y * t[5];
        }
        cf__xform_run(w->xf, n, sx, sy, ok);
        for (size_t i = 0; i < n; i++) {
            if (!ok[i]) continue;
            double gx = cf__warp_wrap(w, sx[i]), gy = sy[i];
            sx[i] = inv[0] + gx * inv[1] + gy * inv[2];
            sy[i] = inv[3] + gx * inv[4] + gy * inv[5];
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double gx, gy;
        int good = 1;
        if (w->affine) {
            const double *t = w->dst_gt;
            gx = cf__warp_wrap(w, t[0] + px[i] * t[1] + py[i] * t[2]);
            gy = t[3] + px[i] * t[4] + py[i] * t[5];
        } else {
            lattice_at(w, px[i], py[i], &gx, &gy, &good);
        }
        if (!good) {
            ok[i] = 0;
            sx[i] = sy[i] = HUGE_VAL;
            continue;
        }
        ok[i] = 1;
        sx[i] = inv[0] + gx * inv[1] + gy * inv[2];
        sy[i] = inv[3] + gx * inv[4] + gy * inv[5];
    }
}

/* Whether a row of an affine map meets the source's wrap (a longitude
 * beyond wrap_c +- 180 at either end): it is then computed per pixel. */
static int row_wraps(const cf__warp *w, double px0, double py, uint32_t n) {
    if (!w->wrap) return 0;
    const double *t = w->dst_gt;
    double a = t[0] + px0 * t[1] + py * t[2], b = t[0] + (px0 + n - 1) * t[1] + py * t[2];
    return cf__warp_wrap(w, a) != a || cf__warp_wrap(w, b) != b;
}

void cf__warp_row(const cf__warp *w, const double inv[6], double px0, double py, uint32_t n,
                  double *sx, double *sy, uint8_t *ok) {
    if (w->affine && w->rows_approx && n > 5 && !row_wraps(w, px0, py, n)) {
        /* GDAL's approximate transformer, even for one CRS: the ends of
         * the row exactly, the rest on the line between them (the middle
         * is always within the error of a line).  The same rounding as
         * gdalwarp's, which decides exact ties of bilinear weights. */
        double ex[2] = {px0, px0 + (n - 1)}, ey[2] = {py, py}, fx[2], fy[2];
        uint8_t eok[2];
        cf__warp_points(w, inv, 2, ex, ey, fx, fy, eok);
        double span = ex[1] - ex[0];
        double dx = (fx[1] - fx[0]) / span, dy = (fy[1] - fy[0]) / span;
        for (uint32_t i = 0; i < n; i++) {
            double dist = (px0 + i) - ex[0];
            sx[i] = fx[0] + dx * dist;
            sy[i] = fy[0] + dy * dist;
            ok[i] = 1;
        }
        return;
    }
    if (w->affine) {
        const double *t = w->dst_gt;
        for (uint32_t i = 0; i < n; i++) {
            double x = px0 + i;
            double gx = cf__warp_wrap(w, t[0] + x * t[1] + py * t[2]);
            double gy = t[3] + x * t[4] + py * t[5];
            sx[i] = inv[0] + gx * inv[1] + gy * inv[2];
            sy[i] = inv[3] + gx * inv[4] + gy * inv[5];
            ok[i] = 1;
        }
        return;
    }
    if (w->exact) {
        /* Every pixel through PROJ (error_threshold 0). */
        for (uint32_t i = 0; i < n; i++) {
            sx[i] = px0 + i;
            sy[i] = py;
        }
        cf__warp_points(w, inv, n, sx, sy, sx, sy, ok);
        return;
    }
    lattice_row(w, inv, px0, py, n, sx, sy, ok);
}

/* ---------------------------------------------------------------- build */

/* Fill a block's nodes at `step` (n x n, row-major) with exact values. */
static void eval_nodes(const cf__warp *w, cf__xform *xf, int64_t bx, int64_t by, uint32_t step,
                       uint32_t n, double *x, double *y, uint8_t *ok) {
    const double *t = w->dst_gt;
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t i = 0; i < n; i++) {
            double px = (double)(bx * BLOCK + (int64_t)i * step);
            double py = (double)(by * BLOCK + (int64_t)j * step);
            x[j * n + i] = t[0] + px * t[1] + py * t[2];
            y[j * n + i] = t[3] + px * t[4] + py * t[5];
        }
    cf__xform_run(xf, (size_t)n * n, x, y, ok);
}

/* L1 distance between two source positions in level-0 pixels (for a
 * geographic source, the longitudes' difference taken modulo 360). */
static double err_px(const cf__warp *w, double x0, double y0, double x1, double y1) {
    const double *inv = w->src_inv;
    double dx = x1 - x0, dy = y1 - y0;
    if (w->wrap) dx = remainder(dx, 360.0);
    return fabs(dx * inv[1] + dy * inv[2]) + fabs(dx * inv[4] + dy * inv[5]);
}

/* Choose a block's step: the coarsest one whose interpolation is within
 * max_err at every node of the lattice twice as fine (keeping the finer
 * one, which costs no more PROJ calls).  Appends the nodes to the map. */
static cf_status build_block(cf__warp *w, cf__xform *xf, double max_err, int64_t bx, int64_t by,
                             cf_error *err) {
    uint32_t step = BLOCK;
    uint32_t n = 2;
    size_t cap = (size_t)(BLOCK + 1) * (BLOCK + 1);
    double *cx = cf__malloc(cap * sizeof *cx), *cy = cf__malloc(cap * sizeof *cy);
    double *fx = cf__malloc(cap * sizeof *fx), *fy = cf__malloc(cap * sizeof *fy);
    uint8_t *cok = cf__malloc(cap), *fok = cf__malloc(cap);
    cf_status st = CF_OK;
    if (!cx || !cy || !fx || !fy || !cok || !fok) {
        st = cf__err(err, CF_E_NOMEM, "out of memory (reprojection lattice)");
        goto done;
    }
    eval_nodes(w, xf, bx, by, step, n, cx, cy, cok);
    int converged = 0;
    for (;;) {
        uint32_t fstep = step / 2, fn = 2 * n - 1;
        if (fstep == 0) break; /* step 1: exact at every pixel corner */
        eval_nodes(w, xf, bx, by, fstep, fn, fx, fy, fok);
        int good = 1;
        for (uint32_t j = 0; j < fn && good; j++)
            for (uint32_t i = 0; i < fn && good; i++) {
                uint32_t ci = i / 2, cj = j / 2;
                if ((i & 1) == 0 && (j & 1) == 0) {
                    good = cok[cj * n + ci];
                    continue;
                }
                if (!fok[j * fn + i]) {
                    good = 0;
                    break;
                }
                uint32_t i1 = ci + (i & 1), j1 = cj + (j & 1);
                size_t a = cj * n + ci, b = cj * n + i1, c = j1 * n + ci, d = j1 * n + i1;
                if (!cok[a] || !cok[b] || !cok[c] || !cok[d]) {
                    good = 0;
                    break;
                }
                double tx = (i & 1) ? 0.5 : 0, ty = (j & 1) ? 0.5 : 0;
                double ix = interp4(w->wrap, cx[a], cx[b], cx[c], cx[d], tx, ty);
                double iy = interp4(0, cy[a], cy[b], cy[c], cy[d], tx, ty);
                if (err_px(w, ix, iy, fx[j * fn + i], fy[j * fn + i]) > max_err)
                    good = 0;
            }
        /* The finer lattice is known now: keep it either way. */
        step = fstep;
        n = fn;
        double *t;
        t = cx, cx = fx, fx = t;
        t = cy, cy = fy, fy = t;
        uint8_t *u = cok;
        cok = fok, fok = u;
        if (good) {
            converged = 1;
            break;
        }
    }
    size_t nn = (size_t)n * n;
    if (w->nnodes + nn > MAX_NODES) {
        st = cf__err(err, CF_E_LIMIT,
                     "reprojection lattice above %u nodes: the transformation is too "
                     "irregular at this grid size; read smaller windows",
                     (unsigned)MAX_NODES);
        goto done;
    }
    if (w->nnodes + nn > w->capnodes) {
        size_t c = w->capnodes ? w->capnodes : 4096;
        while (c < w->nnodes + nn) c *= 2;
        double *nx = cf__realloc(w->nx, c * sizeof *nx);
        if (nx) w->nx = nx;
        double *ny = nx ? cf__realloc(w->ny, c * sizeof *ny) : NULL;
        if (ny) w->ny = ny;
        if (!nx || !ny) {
            st = cf__err(err, CF_E_NOMEM, "out of memory (reprojection lattice)");
            goto done;
        }
        w->capnodes = c;
    }
    cf__wblock *b = &w->blocks[by * w->nbx + bx];
    /* Still not within the error between pixel corners: the block holds
     * a singularity of the map (a pole of a geographic source, where
     * longitudes turn round): its points go through PROJ one by one, as
     * GDAL's approximate transformer then transforms them exactly.  The
     * failures of a projection's edge stay interpolated (their pixels are
     * nodata, as before). */
    int anyfail = 0;
    for (size_t i = 0; i < (size_t)n * n; i++) anyfail |= !cok[i];
    b->exact = !converged && w->wrap && !anyfail;
    b->step = step;
    b->n = n;
    b->off = w->nnodes;
    for (size_t i = 0; i < nn; i++) {
        w->nx[b->off + i] = cok[i] ? cx[i] : HUGE_VAL;
        w->ny[b->off + i] = cok[i] ? cy[i] : HUGE_VAL;
    }
    w->nnodes += nn;
done:
    free(cx);
    free(cy);
    free(fx);
    free(fy);
    free(cok);
    free(fok);
    return st;
}

/* Where the poles of a geographic source fall in the target grid (its
 * pixel coordinates), for the source window of a target window that holds
 * one: every longitude meets there. */
static void find_poles(cf__warp *w, const cf_grid *src, const cf_grid *dst) {
    cf__xform *back;
    cf_error e;
    if (cf__xform_new(src->crs, dst->crs, &back, &e) != CF_OK) return;
    double x[2] = {w->wrap_c, w->wrap_c}, y[2] = {90, -90};
    uint8_t ok[2];
    cf__xform_run(back, 2, x, y, ok);
    cf__xform_free(back);
    double inv[6];
    if (!cf__gt_invert(dst->transform, inv)) return;
    for (int k = 0; k < 2; k++) {
        if (!ok[k]) continue;
        w->pole_px[w->npoles] = inv[0] + x[k] * inv[1] + y[k] * inv[2];
        w->pole_py[w->npoles] = inv[3] + x[k] * inv[4] + y[k] * inv[5];
        w->pole_lat[w->npoles++] = k ? -90 : 90;
    }
}

cf_status cf__warp_new(const cf_grid *src, const cf_grid *dst, cf__xform *xf, double max_err,
                       cf__warp **out, cf_error *err) {
    *out = NULL;
    if (!src->width || !src->height || !dst->width || !dst->height)
        return cf__err(err, CF_E_ARG, "empty grid");
    cf__warp *w = cf__calloc(1, sizeof *w);
    if (!w) return cf__err(err, CF_E_NOMEM, "out of memory");
    memcpy(w->src_gt, src->transform, sizeof w->src_gt);
    memcpy(w->dst_gt, dst->transform, sizeof w->dst_gt);
    w->sw = src->width;
    w->sh = src->height;
    w->dw = dst->width;
    w->dh = dst->height;
    if (!cf__gt_invert(w->src_gt, w->src_inv)) {
        free(w);
        return cf__err(err, CF_E_ARG, "source geotransform is not invertible");
    }
    w->affine = xf == NULL;
    w->rows_approx = max_err > 0;
    w->max_err = max_err;
    w->xf = xf;
    if (cf_crs_kind_of(src->crs) == CF_CRS_GEOGRAPHIC && src->transform[2] == 0 &&
        src->transform[4] == 0) {
        /* GDAL's transformer brings the longitudes it computes into the
         * 360 degrees around the centre of the source's (its "source
         * centre longitude"): a target east of 180 reads a -180..180
         * source's west, a 170..190 source is read past 180. */
        double b[4];
        cf_grid_bounds(src, b);
        w->wrap = 1;
        w->wrap_c = (b[0] + b[2]) / 2;
        if (xf) find_poles(w, src, dst);
    }
    cf_status st = CF_OK;
    if (!w->affine && !(max_err > 0)) {
        w->exact = 1;
    } else if (!w->affine) {
        w->nbx = (w->dw + BLOCK - 1) / BLOCK;
        w->nby = (w->dh + BLOCK - 1) / BLOCK;
        w->blocks = cf__calloc((size_t)w->nbx * w->nby, sizeof *w->blocks);
        if (!w->blocks) st = cf__err(err, CF_E_NOMEM, "out of memory");
        for (uint32_t by = 0; !st && by < w->nby; by++)
            for (uint32_t bx = 0; !st && bx < w->nbx; bx++)
                st = build_block(w, xf, max_err, bx, by, err);
    }
    if (st) {
        cf__warp_free(w);
        return st;
    }
    *out = w;
    return CF_OK;
}

void cf__warp_free(cf__warp *w) {
    if (!w) return;
    free(w->blocks);
    free(w->nx);
    free(w->ny);
    free(w);
}

int cf__warp_is_affine(const cf__warp *w) { return w->affine; }

/* ----------------------------------------------------------- planning */

/* The x extent of the valid points sx (source pixels of the level whose
 * inverse is inv): [*lo, *hi], and its width measured where it is valid:
 * for a geographic source, the narrower of the plain extent and the one
 * with the points west of its middle moved one turn (360 degrees) east,
 * so that a footprint across the antimeridian is not the whole width. */
static double x_extent(const cf__warp *w, const double inv[6], size_t n, const double *sx,
                       const uint8_t *ok, double *lo, double *hi) {
    double a = INFINITY, b = -INFINITY;
    for (size_t k = 0; k < n; k++)
        if (ok[k] && !isnan(sx[k])) {
            a = fmin(a, sx[k]);
            b = fmax(b, sx[k]);
        }
    *lo = a;
    *hi = b;
    if (!(b > a)) return 0;
    double turn = 360.0 * fabs(inv[1]);
    if (!w->wrap || !(b - a > turn / 2)) return b - a;
    double mid = (a + b) / 2, a2 = INFINITY, b2 = -INFINITY;
    for (size_t k = 0; k < n; k++)
        if (ok[k] && !isnan(sx[k])) {
            double x = sx[k] < mid ? sx[k] + turn : sx[k];
            a2 = fmin(a2, x);
            b2 = fmax(b2, x);
        }
    return fmin(b - a, b2 - a2);
}

int cf__warp_pick_level(const cf__warp *w, int64_t tx, int64_t ty, uint32_t tw, uint32_t th,
                        const uint32_t (*sizes)[2], int nlevels) {
    if (nlevels <= 1) return 0;
    /* gdalwarp (-ovr AUTO, target bounds given): 10 x 10 points over the
     * target window, in level-0 source pixels; the extent per target
     * pixel along x and along y, the smaller of the two is the ratio
     * (GDAL 3.7 on, its issue 7019: across the antimeridian the x extent
     * is the whole source).  The x extent is also measured where it is
     * valid (x_extent), which matters where y does not save it. */
    double px[100], py[100], sx[100], sy[100];
    uint8_t ok[100];
    int k = 0;
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++, k++) {
            px[k] = (double)tx + tw * (double)i / 9;
            py[k] = (double)ty + th * (double)j / 9;
        }
    cf__warp_points(w, w->src_inv, 100, px, py, sx, sy, ok);
    double lo, hi, ylo = INFINITY, yhi = -INFINITY;
    double wx = x_extent(w, w->src_inv, 100, sx, ok, &lo, &hi);
    for (k = 0; k < 100; k++)
        if (ok[k] && !isnan(sy[k])) {
            ylo = fmin(ylo, sy[k]);
            yhi = fmax(yhi, sy[k]);
        }
    double rx = wx > 0 ? wx / tw : 0, ry = yhi > ylo ? (yhi - ylo) / th : 0;
    double target = fmin(rx, ry);
    if (!(target > 1.0)) return 0;
    int lvl = 0; /* GDAL's iOvr + 1 */
    for (; lvl < nlevels - 1; lvl++) {
        double r = (double)sizes[0][0] / sizes[lvl][0];
        double next = (double)sizes[0][0] / sizes[lvl + 1][0];
        if (r < target && next > target) break;
        if (fabs(r - target) < 1e-1) break;
    }
    return lvl;
}

int cf__warp_is_translation(const cf__warp *w, uint32_t lw, uint32_t lh) {
    if (!w->affine) return 0;
    /* GDAL (GDALTransformIsTranslationOnPixelBoundaries): the same pixel
     * size and the target origin on a source pixel corner.  The warper then
     * copies pixels (nearest, whatever the kernel) and adds no margin. */
    double g[6], inv[6];
    memcpy(g, w->src_gt, sizeof g);
    double rx = (double)w->sw / lw, ry = (double)w->sh / lh;
    g[1] *= rx;
    g[2] *= ry;
    g[4] *= rx;
    g[5] *= ry;
    const double *d = w->dst_gt;
    if (g[1] != d[1] || g[5] != d[5] || g[2] != d[2] || g[4] != d[4]) return 0;
    if (!cf__gt_invert(g, inv)) return 0;
    double x = inv[0] + d[0] * inv[1] + d[3] * inv[2];
    double y = inv[3] + d[0] * inv[4] + d[3] * inv[5];
    return fabs(x - round(x)) <= 1e-6 && fabs(y - round(y)) <= 1e-6;
}

static double near_int(double v) {
    double r = round(v);
    return fabs(r - v) < 1e-6 ? r : v;
}

/* Filter radius of each kernel (GDAL's anGWKFilterRadius). */
int cf__warp_radius(cf_resampling rs) {
    return rs == CF_RS_BILINEAR ? 1 : rs == CF_RS_CUBIC ? 2 : 0;
}

/* GDAL's kernel scale (GDALWarpKernel::PerformWarp): target pixels per
 * source pixel of the footprint clipped at the level's far edge (`raw`),
 * 1 when the window holds the target at the same size, snapped to 1/n
 * when within 0.05 of it. */
static double kernel_scale(uint32_t tsize, double raw, uint32_t wsize) {
    double s = tsize / raw; /* inf for an empty footprint, as in GDAL */
    if (wsize >= tsize && wsize <= tsize + (wsize - raw)) s = 1.0;
    if (s < 1.0) {
        double rec = 1.0 / s;
        double n = (double)(int)(rec + 0.5);
        if (fabs(rec - n) < 0.05) s = 1.0 / n;
    }
    return s;
}

/* One axis of the source window: the footprint's pixels [i0, i1) plus
 * the margin r, clipped to the level's `size`; all of it when the
 * footprint covers more than 90 % (GDAL, for anti-meridian footprints). */
static void axis_window(int64_t i0, int64_t i1, int64_t r, uint32_t size, int64_t *off,
                        int64_t *len) {
    int64_t n = size;
    if (i1 - i0 > 0.9 * n) {
        *off = 0;
        *len = n;
        return;
    }
    *off = i0 - r < 0 ? 0 : i0 - r > n ? n : i0 - r;
    *len = i1 - *off + r;
    if (*len > n - *off) *len = n - *off;
    if (*len < 0) *len = 0;
}

cf_status cf__warp_window(const cf__warp *w, const cf__warp_req *rq, cf__warp_win *out,
                          cf_error *err) {
    memset(out, 0, sizeof *out);
    out->empty = 1;
    out->xscale = out->yscale = 1;
    if (!rq->tw || !rq->th || !rq->lw || !rq->lh)
        return cf__err(err, CF_E_ARG, "empty window or level");
    double inv[6];
    cf__warp_level_inverse(w, rq->lw, rq->lh, inv);
    /* GDAL (ComputeSourceWindow) samples 21 points along each edge, or a
     * grid when some fail or a pole of a geographic source lies inside
     * the window (its "special points"). */
    int pole = -1;
    for (int k = 0; k < w->npoles; k++)
        if (w->pole_px[k] >= (double)rq->tx && w->pole_px[k] <= (double)rq->tx + rq->tw &&
            w->pole_py[k] >= (double)rq->ty && w->pole_py[k] <= (double)rq->ty + rq->th)
            pole = k;
    enum { STEPS = 21, NP = 4 * STEPS, NG = (STEPS + 2) * (STEPS + 2) };
    double px[NG], py[NG], sx[NG], sy[NG];
    uint8_t ok[NG];
    int n = 0;
    for (int s = 0; s < STEPS; s++) {
        double r = (double)s / (STEPS - 1);
        double x = (double)rq->tx + r * rq->tw, y = (double)rq->ty + r * rq->th;
        px[n] = x, py[n++] = (double)rq->ty;
        px[n] = x, py[n++] = (double)rq->ty + rq->th;
        px[n] = (double)rq->tx, py[n++] = y;
        px[n] = (double)rq->tx + rq->tw, py[n++] = y;
    }
    cf__warp_points(w, inv, NP, px, py, sx, sy, ok);
    int failed = 0;
    for (int i = 0; i < NP; i++) failed += !ok[i];
    if (failed || pole >= 0) {
        n = 0;
        for (int j = 0; j < STEPS + 2; j++) {
            double ry = j == 0 ? 0.5 / rq->tw : j <= STEPS ? (j - 1) / (double)(STEPS - 1)
                                                            : 1 - 0.5 / rq->tw;
            for (int i = 0; i < STEPS + 2; i++) {
                double rx = i == 0 ? 0.5 / rq->tw : i <= STEPS ? (i - 1) / (double)(STEPS - 1)
                                                                : 1 - 0.5 / rq->tw;
                px[n] = (double)rq->tx + rx * rq->tw;
                py[n++] = (double)rq->ty + ry * rq->th;
            }
        }
        cf__warp_points(w, inv, NG, px, py, sx, sy, ok);
        failed = 0;
        for (int i = 0; i < NG; i++) failed += !ok[i];
    }
    double x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!ok[i] || isnan(sx[i]) || isnan(sy[i])) continue;
        x0 = fmin(x0, sx[i]);
        y0 = fmin(y0, sy[i]);
        x1 = fmax(x1, sx[i]);
        y1 = fmax(y1, sy[i]);
    }
    if (failed > n - 5) return CF_OK; /* nothing transforms: empty */
    double W = rq->lw, H = rq->lh;
    /* The width where it is valid (across the antimeridian: the two
     * sides, not the whole source between them); the window itself is
     * all of it then, as in GDAL (more than 90 % of the width). */
    double lo, hi, wx = x_extent(w, inv, (size_t)n, sx, ok, &lo, &hi);
    if (pole >= 0) {
        /* Every longitude meets at the pole: its row and the whole turn
         * (GDAL finds them from the source side,
         * ComputeSourceWindowStartingFromSource). */
        double c = w->wrap_c, lat = w->pole_lat[pole];
        double yp = inv[3] + c * inv[4] + lat * inv[5];
        double xa = inv[0] + (c - 180) * inv[1], xb = inv[0] + (c + 180) * inv[1];
        y0 = fmin(y0, yp);
        y1 = fmax(y1, yp);
        x0 = fmin(x0, fmin(xa, xb));
        x1 = fmax(x1, fmax(xa, xb));
        wx = x1 - x0;
    }
    if (x0 > W || x1 < 0 || y0 > H || y1 < 0) return CF_OK;
    x0 = near_int(x0), y0 = near_int(y0), x1 = near_int(x1), y1 = near_int(y1);
    /* The margin: the kernel's radius, widened by the ratio when
     * downsampling, 10 more pixels when some points failed, none for a
     * whole-pixel translation (copied). */
    int res = cf__warp_is_translation(w, rq->lw, rq->lh) ? 0 : cf__warp_radius(rq->rs);
    double xs = fmax(1e-3, rq->tw / wx), ys = fmax(1e-3, rq->th / (y1 - y0));
    int64_t rx = xs < 0.95 ? (int64_t)ceil(res / xs) : res;
    int64_t ry = ys < 0.95 ? (int64_t)ceil(res / ys) : res;
    if (failed) rx += 10, ry += 10;
    int64_t ix0 = (int64_t)fmax(0.0, x0), iy0 = (int64_t)fmax(0.0, y0);
    int64_t ix1 = (int64_t)fmin(ceil(x1), W), iy1 = (int64_t)fmin(ceil(y1), H);
    double rawx = fmax(0.0, fmin(W - (double)ix0, wx));
    double rawy = fmax(0.0, fmin(H - (double)iy0, y1 - y0));
    int64_t ox, oy, ow, oh;
    axis_window(ix0, ix1, rx, rq->lw, &ox, &ow);
    axis_window(iy0, iy1, ry, rq->lh, &oy, &oh);
    out->fill = (double)ow * oh / fmax(1.0, (x1 - x0 + 2 * rx) * (y1 - y0 + 2 * ry));
    if (ow <= 0 || oh <= 0) return CF_OK;
    out->x = ox;
    out->y = oy;
    out->w = (uint32_t)ow;
    out->h = (uint32_t)oh;
    out->xscale = kernel_scale(rq->tw, rawx, out->w);
    out->yscale = kernel_scale(rq->th, rawy, out->h);
    out->empty = 0;
    if (w->wrap && res > 0 && ox == 0 && ow == rq->lw && fabs(360.0 * fabs(inv[1]) - W) < 0.5) {
        /* The interpolating kernels' reach (resample.c's radius) and one
         * more: the columns the other end of the turn lends. */
        double r = (out->xscale < 1.0 ? ceil(res / out->xscale) : res) + 1;
        out->wrap = (uint32_t)fmin(r, W);
    }
    return CF_OK;
}

/* GDAL's split of a target window into chunks (GDALWarpOperation::
 * CollectChunkListInternal): halve the longer side while the source and
 * target buffers exceed the memory limit, or while the source covers less
 * than half the footprint and a side is above 100 pixels (the part beyond
 * the image then falls in chunks of its own, which have no source and are
 * skipped).  Each chunk keeps its own source window and kernel scale. */
static cf_status chunks(const cf__warp *w, const cf__warp_req *rq, const cf__warp_cost *cost,
                        cf__warp_chunk **list, size_t *n, size_t *cap, int depth, cf_error *err) {
    cf__warp_win win;
    cf_status st = cf__warp_window(w, rq, &win, err);
    CF__TRY(st);
    if (win.empty) return CF_OK;
    double mem = ((double)cost->src_bits * win.w * win.h +
                  (double)cost->dst_bits * rq->tw * rq->th) / 8.0;
    int split = (mem > cost->memory && (rq->tw > 2 || rq->th > 2)) ||
                (win.fill > 0 && win.fill < 0.5 && (rq->tw > 100 || rq->th > 100));
    if (split && depth < 64) {
        cf__warp_req a = *rq, b = *rq;
        if (rq->tw > rq->th) {
            a.tw = rq->tw / 2;
            b.tx = rq->tx + a.tw;
            b.tw = rq->tw - a.tw;
        } else {
            a.th = rq->th / 2;
            b.ty = rq->ty + a.th;
            b.th = rq->th - a.th;
        }
        st = chunks(w, &a, cost, list, n, cap, depth + 1, err);
        if (!st) st = chunks(w, &b, cost, list, n, cap, depth + 1, err);
        return st;
    }
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        cf__warp_chunk *l = cf__realloc(*list, c * sizeof *l);
        if (!l) return cf__err(err, CF_E_NOMEM, "out of memory");
        *list = l;
        *cap = c;
    }
    (*list)[*n].rq = *rq;
    (*list)[*n].win = win;
    (*n)++;
    return CF_OK;
}

cf_status cf__warp_chunks(const cf__warp *w, const cf__warp_req *rq, const cf__warp_cost *cost,
                          cf__warp_chunk **out, size_t *n, cf_error *err) {
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    cf_status st = chunks(w, rq, cost, out, n, &cap, 0, err);
    if (st) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return st;
}
