/*
 * resample_sep.c - the fast path of the resampler: one CRS, north-up grids
 * (no rotation) and no invalid source pixel (nearest and the 2x2
 * bilinear also with invalid ones), which is every Sentinel-2 band onto
 * another band's grid.  Then a target column always samples the
 * same source columns with the same weights, and a target row the same
 * rows: indices and weights are computed once per column and per row
 * instead of once per pixel, and the kernels run in two passes (columns,
 * then rows) where that saves work (cubic, and the widened kernels of
 * coarser targets).  Nearest copies samples without converting them;
 * bilinear with a nodata takes its weights from a per-row table.
 *
 * The arithmetic is the general path's (resample.c), operation for
 * operation, so both give the same values; tests/unit/test_geo_warp.c
 * checks that they do.  Pixels at the window's border, where GDAL's cubic
 * falls back to bilinear, are left to the per-pixel bilinear functions.
 */
#include "resample_internal.h"

#include <stdlib.h>

/* Per-axis plan: for each target column (or row) the source position and
 * whether GDAL computes that column at all. */
typedef struct axis {
    double *pos;               /* source position of the pixel centre */
    uint8_t *in;               /* centre inside the window */
    int64_t *idx;              /* first tap */
    int *ntap;
    double *wt;                /* taps' weights, stride `stride` */
    double *sum;               /* sum of the weights */
    int stride;
} axis;

static void axis_free(axis *a) {
    free(a->pos);
    free(a->in);
    free(a->idx);
    free(a->ntap);
    free(a->wt);
    free(a->sum);
}

static int axis_alloc(axis *a, uint32_t n, int stride) {
    memset(a, 0, sizeof *a);
    a->stride = stride;
    a->pos = cf__malloc(n * sizeof *a->pos);
    a->in = cf__malloc(n);
    a->idx = cf__malloc(n * sizeof *a->idx);
    a->ntap = cf__malloc(n * sizeof *a->ntap);
    a->wt = cf__malloc((size_t)n * (size_t)stride * sizeof *a->wt);
    a->sum = cf__malloc(n * sizeof *a->sum);
    return a->pos && a->in && a->idx && a->ntap && a->wt && a->sum;
}

/* Centre test of one axis (GWKCheckAndComputeSrcOffsets). */
static int inside(double s, uint32_t size) { return s >= 0 && !(s + 1e-10 > size); }

/* Widened-kernel taps of one axis for a centre at s (GWKResampleNoMasksT
 * and, with `mask_start`, GWKResample's first tap; their extra tap has a
 * weight of exactly 0). */
static void wide_taps(double s, uint32_t size, int r, double scale, int mask_start,
                      rs_filter_fn f, int64_t *first, int *ntap, double *wt, double *sum,
                      int rad) {
    int64_t i = (int64_t)floor(s - 0.5);
    double d = s - 0.5 - i;
    int64_t a = mask_start ? ((rad + 1) % 2) - r : 1 - r, b = r;
    if (i + a < 0) a = -i;
    if (i + b >= (int64_t)size - 1) b = (int64_t)size - 1 - i;
    double sc = fmin(scale, 1.0), tot = 0;
    int n = 0;
    for (int64_t k = a; k <= b; k++, n++) {
        wt[n] = f((k - d) * sc);
        tot += wt[n];
    }
    *first = i + a;
    *ntap = n;
    *sum = tot;
}

static cf_status plan_axis(const rs_call *c, axis *a, const double *pos, uint32_t n,
                           uint32_t size, double scale, int r) {
    cf_resampling rs = c->rq->rs;
    int rad = cf__warp_radius(rs);
    rs_filter_fn f = rs == CF_RS_CUBIC ? rs_cubic_w : rs_bilinear_w;
    for (uint32_t k = 0; k < n; k++) {
        double s = pos[k];
        a->pos[k] = s;
        a->in[k] = (uint8_t)inside(s, size);
        a->ntap[k] = 0;
        if (!a->in[k]) continue;
        double *w = a->wt + (size_t)k * a->stride;
        if (rs == CF_RS_NEAREST) {
            int64_t i = (int64_t)(s + 1e-10);
            if (i == (int64_t)size) i--;
            a->idx[k] = i;
            a->ntap[k] = 1;
        } else if (rs == CF_RS_BILINEAR && c->use4) {
            int64_t i = (int64_t)floor(s - 0.5);
            a->idx[k] = i;
            w[0] = 1.5 - (s - i);
            w[1] = 1.0 - w[0];
            /* both taps inside: the 2x2 formula applies on this axis */
            a->ntap[k] = (i >= 0 && i + 1 < (int64_t)size) ? 2 : -1;
        } else if (rs == CF_RS_CUBIC && c->use4) {
            int64_t i = (int64_t)(s - 0.5);
            a->idx[k] = i - 1;
            rs_cubic_coeffs(s - 0.5 - i, w);
            w[4] = s - 0.5 - i; /* the fraction, for the no-mask formula */
            a->ntap[k] = (i - 1 >= 0 && i + 2 < (int64_t)size) ? 4 : -1;
        } else {
            if (r > 250) return CF_E_LIMIT;
            wide_taps(s, size, r, scale, c->realcase, f, &a->idx[k], &a->ntap[k], w, &a->sum[k],
                      rad);
        }
    }
    return CF_OK;
}

/* Nearest: copy samples of the element size. */
static void nearest(const rs_call *c, const axis *ax, const axis *ay) {
    size_t n = (size_t)c->W * c->H;
    for (int b = 0; b < c->src->nbands; b++) {
        const uint8_t *band = (const uint8_t *)c->src->data + (size_t)b * n * c->bps;
        uint8_t *out = (uint8_t *)c->dst->data + (size_t)b * c->ostride * c->bps;
        for (uint32_t j = 0; j < c->th; j++) {
            if (!ay->in[j]) continue;
            const uint8_t *row = band + (size_t)ay->idx[j] * c->W * c->bps;
            uint8_t *o = out + (size_t)j * c->orow * c->bps;
            /* GDAL: nothing where every band is invalid (unified), this
             * band's value only where it is valid. */
            const uint8_t *u = c->unified ? c->unified + (size_t)ay->idx[j] * c->W : NULL;
            const uint8_t *v = c->band ? c->band[b] + (size_t)ay->idx[j] * c->W : NULL;
#define NEAR_COPY(T)                                                            \
    if (!u && !v) {                                                             \
        for (uint32_t i = 0; i < c->tw; i++)                                    \
            if (ax->in[i]) ((T *)o)[i] = ((const T *)row)[ax->idx[i]];          \
    } else {                                                                    \
        for (uint32_t i = 0; i < c->tw; i++) {                                  \
            int64_t k = ax->idx[i];                                             \
            if (ax->in[i] && (!u || u[k]) && (!v || v[k]))                     \
                ((T *)o)[i] = ((const T *)row)[k];                              \
        }                                                                       \
    }                                                                           \
    break
            switch (c->bps) {
            case 1: NEAR_COPY(uint8_t);
            case 2: NEAR_COPY(uint16_t);
            case 4: NEAR_COPY(uint32_t);
            default: NEAR_COPY(uint64_t);
            }
#undef NEAR_COPY
        }
    }
}

/* Average: the footprint of each column and row, GDAL's overlap weights. */
typedef struct span {
    int64_t a, b;              /* source [a, b) */
    double f0, f1;             /* corners */
    uint8_t ok;
} span;

/* c0[k], c1[k]: the first and second corner of column (or row) k. */
static void plan_span(const double *c0, const double *c1, uint32_t n, uint32_t size,
                      double scale, span *sp) {
    int m = 2 * (int)fmax(1, ceil(1.0 / scale));
    for (uint32_t k = 0; k < n; k++) {
        double a = c0[k], b = c1[k];
        span *s = &sp[k];
        s->ok = a >= -m && b >= -m && a - size <= m && b - size <= m;
        if (a > b) {
            double t = a;
            a = b, b = t;
        }
        s->f0 = a, s->f1 = b;
        rs_span(a, b, size, &s->a, &s->b);
    }
}

static inline double span_w(const span *s, int64_t v, double w) {
    if (v == s->a) return s->a + 1 == s->b ? w : w * (1 - (s->f0 - s->a));
    if (v + 1 == s->b) return w * (1 - (s->b - s->f1));
    return w;
}

/* A target row computed into vals / set, then stored typed at once. */
typedef struct row_buf {
    double *vals;
    uint8_t *set;
} row_buf;

static void store_row(const rs_call *c, int b, uint32_t j, const row_buf *rb) {
    uint8_t *out = (uint8_t *)c->dst->data +
                   ((size_t)b * c->ostride + (size_t)j * c->orow) * c->bps;
    /* No-mask kernels never move a value off the nodata: there is none. */
    cf__rs_store_row(c->src->dtype, out, rb->vals, rb->set, c->tw,
                     c->realcase && c->dst->has_nodata, c->dst->nodata);
}

static void average(const rs_call *c, const double *P, int b, const span *sx, const span *sy,
                    row_buf *rb) {
    for (uint32_t j = 0; j < c->th; j++) {
        const span *ry = &sy[j];
        if (!ry->ok) continue;
        for (uint32_t i = 0; i < c->tw; i++) {
            const span *rx = &sx[i];
            rb->set[i] = 0;
            if (!rx->ok) continue;
            double tot = 0, tw = 0;
            for (int64_t y = ry->a; y < ry->b; y++) {
                double wy = y == ry->a ? (ry->a + 1 == ry->b ? 1.0 : 1 - (ry->f0 - ry->a))
                            : y + 1 == ry->b ? 1 - (ry->b - ry->f1)
                                             : 1.0;
                const double *p = P + (size_t)y * c->W;
                for (int64_t x = rx->a; x < rx->b; x++) {
                    double wt = span_w(rx, x, wy);
                    tw += wt;
                    tot += p[x] * wt;
                }
            }
            if (tw > 0) {
                rb->vals[i] = tot / tw;
                rb->set[i] = 1;
            }
        }
        /* Average is GDAL's "real case": a destination nodata is moved off. */
        uint8_t *out = (uint8_t *)c->dst->data +
                       ((size_t)b * c->ostride + (size_t)j * c->orow) * c->bps;
        cf__rs_store_row(c->src->dtype, out, rb->vals, rb->set, c->tw, c->dst->has_nodata,
                         c->dst->nodata);
    }
}

/* GDAL's 2x2 bilinear at a border pixel (a tap outside the window). */
static int border_bilinear(const rs_call *c, const double *P, double sx, double sy, double *v) {
    if (c->realcase) return cf__rs_bil4_mask(c, P, NULL, sx, sy, v);
    *v = cf__rs_bil4_nomask(c, P, sx, sy);
    return 1;
}

/* Bilinear (2x2) at one pixel of a row: the formula of each path, from
 * the tables; 0 when GDAL gives the pixel no value. */
static inline int bil_pixel(const rs_call *c, const double *P, const axis *ax, const axis *ay,
                            uint32_t i, uint32_t j, double *v) {
    if (ax->ntap[i] < 0 || ay->ntap[j] < 0) return border_bilinear(c, P, ax->pos[i], ay->pos[j], v);
    int64_t W = c->W;
    double ry = ay->wt[(size_t)j * ay->stride], ry1 = 1.0 - ry;
    double rx = ax->wt[(size_t)i * ax->stride], rx1 = 1.0 - rx;
    const double *p = P + ay->idx[j] * W + ax->idx[i];
    if (c->realcase) {
        double m1 = rx * ry, m2 = rx1 * ry, m3 = rx * ry1, m4 = rx1 * ry1;
        double div = m1 + m2 + m3 + m4;
        double acc = p[0] * m1 + p[1] * m2 + p[W] * m3 + p[W + 1] * m4;
        if (div < 0.00001) return 0;
        *v = div == 1.0 ? acc : acc / div;
    } else {
        *v = (p[0] * rx + p[1] * rx1) * ry + (p[W] * rx + p[W + 1] * rx1) * ry1;
    }
    return 1;
}

static void bilinear(const rs_call *c, const double *P, int b, const axis *ax, const axis *ay,
                     row_buf *rb) {
    for (uint32_t j = 0; j < c->th; j++) {
        if (!ay->in[j]) continue;
        for (uint32_t i = 0; i < c->tw; i++)
            rb->set[i] = ax->in[i] ? (uint8_t)bil_pixel(c, P, ax, ay, i, j, &rb->vals[i]) : 0;
        store_row(c, b, j, rb);
    }
}

/* Bilinear in GDAL's real case (a destination nodata, no mask: every
 * Sentinel-2 band) from a table.  A pixel's four weights are products of
 * its column's weight and its row's; an integer ratio (20 m or 60 m onto
 * 10 m) gives only as many distinct column weights as the ratio, so each
 * row computes the products of its weight with those few once (the same
 * products, hence the same bits) and the pixels only gather and sum.
 * Values go straight into the typed output. */
/* The pixel under a centre inside the window (GWKCheckAndComputeSrcOffsets). */
static inline int64_t centre_index(double s, uint32_t size) {
    int64_t k = (int64_t)(s + 1e-10);
    return k == (int64_t)size ? k - 1 : k;
}

typedef struct bil_tab {
    double m[4], div;
} bil_tab;

typedef struct bil_cols {
    int32_t *ph;               /* per column: its entry, -1 when the
                                  column is outside or at the border */
    int64_t *centre;           /* per column: the pixel under the centre */
    uint32_t ia, ib;           /* the interior: columns [ia, ib) all have
                                  an entry (none when they are not a run) */
    double *rx;                /* distinct column weights */
    bil_tab *tab;              /* per distinct weight, for the row */
    uint32_t n;
} bil_cols;

static int bil_cols_new(const rs_call *c, const axis *ax, bil_cols *bc) {
    bc->ph = cf__malloc(c->tw * sizeof *bc->ph);
    bc->rx = cf__malloc(c->tw * sizeof *bc->rx);
    bc->tab = cf__malloc(c->tw * sizeof *bc->tab);
    bc->centre = cf__malloc(c->tw * sizeof *bc->centre);
    bc->n = 0;
    if (!bc->ph || !bc->rx || !bc->tab || !bc->centre) return 0;
    for (uint32_t i = 0; i < c->tw; i++) {
        bc->ph[i] = -1;
        bc->centre[i] = ax->in[i] ? centre_index(ax->pos[i], c->W) : 0;
        if (!ax->in[i] || ax->ntap[i] != 2) continue;
        double rx = ax->wt[(size_t)i * ax->stride];
        uint32_t d = 0;
        /* Look among the first few only: a non-integer ratio lists each
         * column once, which costs what the per-pixel products did. */
        while (d < bc->n && d < 32 && bc->rx[d] != rx) d++;
        if (d == bc->n || d == 32) {
            d = bc->n++;
            bc->rx[d] = rx;
        }
        bc->ph[i] = (int32_t)d;
    }
    uint32_t ia = 0, ib = c->tw;
    while (ia < ib && bc->ph[ia] < 0) ia++;
    while (ib > ia && bc->ph[ib - 1] < 0) ib--;
    for (uint32_t i = ia; i < ib; i++)
        if (bc->ph[i] < 0) ia = ib = 0;
    bc->ia = ia;
    bc->ib = ib;
    return 1;
}

static void bil_cols_free(bil_cols *bc) {
    free(bc->ph);
    free(bc->rx);
    free(bc->tab);
    free(bc->centre);
}

/* With masks (GDAL's GWKBilinearResample4Sample after its centre test):
 * nothing where the pixel under the centre is invalid for every band,
 * else the valid taps renormalised. */
static inline int bil_pixel_mask(const rs_call *c, const double *P, const uint8_t *V,
                                 const uint8_t *urow, const axis *ax, const axis *ay,
                                 const bil_cols *bc, uint32_t i, uint32_t j, double *v) {
    if (urow && !urow[bc->centre[i]]) return 0;
    return cf__rs_bil4_mask(c, P, V, ax->pos[i], ay->pos[j], v);
}

/* A pixel the table does not cover (outside the interior columns, or a
 * tap invalid): GDAL's per-pixel formula, stored as store_row would. */
static void bil_slow(const rs_call *c, const double *P, const uint8_t *V, const uint8_t *urow,
                     const axis *ax, const axis *ay, const bil_cols *bc, uint32_t i, uint32_t j,
                     uint8_t *orow, int nudge, double nd) {
    double v;
    if (!ax->in[i]) return;
    if (V || urow ? bil_pixel_mask(c, P, V, urow, ax, ay, bc, i, j, &v)
                  : bil_pixel(c, P, ax, ay, i, j, &v))
        cf__rs_store(c->src->dtype, orow, i, v, nudge, nd);
}

/* One pixel of the interior from the table; MASKED: tested as GDAL does.
 * The nodata test is the integer one: (double)r == nd exactly when nd is
 * an integer of the type's range equal to r. */
#define BIL_PIX(T, lo, hi, is_signed, MASKED)                                       \
    do {                                                                            \
        int64_t k = idx[i];                                                         \
        if (MASKED) {                                                               \
            if (urow && !urow[centre[i]]) continue;                                 \
            if (V && !(v0[k] && v0[k + 1] && v1[k] && v1[k + 1])) {                 \
                bil_slow(c, P, V, urow, ax, ay, bc, i, j, orow, nudge, nd);         \
                continue;                                                           \
            }                                                                       \
        }                                                                           \
        const bil_tab *q = &tab[ph[i]];                                             \
        double acc = r0[k] * q->m[0] + r0[k + 1] * q->m[1] + r1[k] * q->m[2] +      \
                     r1[k + 1] * q->m[3];                                           \
        double v;                                                                   \
        if (allone) v = acc;                                                        \
        else if (q->div < 0.00001) continue;                                        \
        else v = q->div == 1.0 ? acc : acc / q->div;                                \
        T r;                                                                        \
        if (v >= (double)(lo) && v <= (double)(hi))                                 \
            r = is_signed ? (T)floor(v + 0.5) : (T)(v + 0.5);                       \
        else                                                                        \
            r = isnan(v) ? 0 : v < (double)(lo) ? (lo) : (hi);                      \
        if (nz && r == ndv) r = r == (lo) ? (T)((lo) + 1) : (T)(r - 1);             \
        o[i] = r;                                                                   \
    } while (0)

#define BIL_ROW(T, lo, hi, is_signed)                                               \
    do {                                                                            \
        T *o = (T *)orow;                                                           \
        int nz = nudge && nd >= (double)(lo) && nd <= (double)(hi) && nd == floor(nd); \
        T ndv = nz ? (T)nd : 0;                                                     \
        for (uint32_t i = 0; i < bc->ia; i++)                                       \
            bil_slow(c, P, V, urow, ax, ay, bc, i, j, orow, nudge, nd);             \
        for (uint32_t i = bc->ib; i < c->tw; i++)                                   \
            bil_slow(c, P, V, urow, ax, ay, bc, i, j, orow, nudge, nd);             \
        if (!V && !urow)                                                            \
            for (uint32_t i = bc->ia; i < bc->ib; i++) BIL_PIX(T, lo, hi, is_signed, 0); \
        else                                                                        \
            for (uint32_t i = bc->ia; i < bc->ib; i++) BIL_PIX(T, lo, hi, is_signed, 1); \
    } while (0)

static void bilinear_table(const rs_call *c, const double *P, int b, const axis *ax,
                           const axis *ay, bil_cols *bc, row_buf *rb) {
    cf_dtype t = c->src->dtype;
    int nudge = c->dst->has_nodata;
    double nd = c->dst->nodata;
    bil_tab *tab = bc->tab;
    /* Masks: tap validity V, and the unified mask at the centre. */
    const uint8_t *V = c->tapvalid ? c->tapvalid[b] : NULL;
    for (uint32_t j = 0; j < c->th; j++) {
        if (!ay->in[j]) continue;
        const uint8_t *urow =
            c->unified ? c->unified + centre_index(ay->pos[j], c->H) * (int64_t)c->W : NULL;
        if (ay->ntap[j] < 0 || (t != CF_DT_U8 && t != CF_DT_I8 && t != CF_DT_U16 &&
                                t != CF_DT_I16 && t != CF_DT_U32 && t != CF_DT_I32)) {
            for (uint32_t i = 0; i < c->tw; i++)
                rb->set[i] = !ax->in[i] ? 0
                             : V || urow
                                 ? (uint8_t)bil_pixel_mask(c, P, V, urow, ax, ay, bc, i, j,
                                                           &rb->vals[i])
                                 : (uint8_t)bil_pixel(c, P, ax, ay, i, j, &rb->vals[i]);
            store_row(c, b, j, rb);
            continue;
        }
        double ry = ay->wt[(size_t)j * ay->stride], ry1 = 1.0 - ry;
        int allone = 1;
        for (uint32_t d = 0; d < bc->n; d++) {
            double rx = bc->rx[d], rx1 = 1.0 - rx;
            bil_tab *q = &tab[d];
            q->m[0] = rx * ry;
            q->m[1] = rx1 * ry;
            q->m[2] = rx * ry1;
            q->m[3] = rx1 * ry1;
            q->div = q->m[0] + q->m[1] + q->m[2] + q->m[3];
            allone &= q->div == 1.0;
        }
        const double *r0 = P + ay->idx[j] * (int64_t)c->W, *r1 = r0 + c->W;
        const uint8_t *v0 = V ? V + ay->idx[j] * (int64_t)c->W : NULL, *v1 = V ? v0 + c->W : NULL;
        uint8_t *orow = (uint8_t *)c->dst->data +
                        ((size_t)b * c->ostride + (size_t)j * c->orow) * c->bps;
        const int32_t *ph = bc->ph;
        const int64_t *idx = ax->idx, *centre = bc->centre;
        switch (t) {
        case CF_DT_U8: BIL_ROW(uint8_t, 0, UINT8_MAX, 0); break;
        case CF_DT_I8: BIL_ROW(int8_t, INT8_MIN, INT8_MAX, 1); break;
        case CF_DT_U16: BIL_ROW(uint16_t, 0, UINT16_MAX, 0); break;
        case CF_DT_I16: BIL_ROW(int16_t, INT16_MIN, INT16_MAX, 1); break;
        case CF_DT_U32: BIL_ROW(uint32_t, 0, UINT32_MAX, 0); break;
        default: BIL_ROW(int32_t, INT32_MIN, INT32_MAX, 1); break;
        }
    }
}
#undef BIL_ROW
#undef BIL_PIX

/* Cubic (4x4) and the widened kernels: columns first into h (one row of
 * h per source row the target needs), then rows. */
static void two_pass(const rs_call *c, const double *P, int b, const axis *ax, const axis *ay,
                     double *h, int64_t r0, int64_t r1, row_buf *rb) {
    int cubic4 = c->rq->rs == CF_RS_CUBIC && c->use4;
    for (int64_t r = r0; r < r1; r++) {
        const double *p = P + (size_t)r * c->W;
        double *hr = h + (size_t)(r - r0) * c->tw;
        for (uint32_t i = 0; i < c->tw; i++) {
            if (!ax->in[i] || ax->ntap[i] <= 0) continue;
            const double *w = ax->wt + (size_t)i * ax->stride;
            const double *q = p + ax->idx[i];
            double acc = 0;
            if (cubic4) acc = w[0] * q[0] + w[1] * q[1] + w[2] * q[2] + w[3] * q[3];
            else
                for (int k = 0; k < ax->ntap[i]; k++) acc += q[k] * w[k];
            hr[i] = acc;
        }
    }
    size_t st = c->tw;
    for (uint32_t j = 0; j < c->th; j++) {
        if (!ay->in[j]) continue;
        const double *wy = ay->wt + (size_t)j * ay->stride;
        const double *hrow = ay->ntap[j] > 0 ? h + (size_t)(ay->idx[j] - r0) * c->tw : NULL;
        for (uint32_t i = 0; i < c->tw; i++) {
            rb->set[i] = 0;
            if (!ax->in[i]) continue;
            if (ax->ntap[i] <= 0 || !hrow) {
                /* cubic at the border: GDAL's bilinear */
                rb->set[i] = (uint8_t)border_bilinear(c, P, ax->pos[i], ay->pos[j], &rb->vals[i]);
                continue;
            }
            const double *hc = hrow + i;
            if (cubic4) {
                rb->vals[i] = c->realcase ? wy[0] * hc[0] + wy[1] * hc[st] + wy[2] * hc[2 * st] +
                                                wy[3] * hc[3 * st]
                                          : rs_cubic_conv(wy[4], hc[0], hc[st], hc[2 * st],
                                                          hc[3 * st]);
                rb->set[i] = 1;
                continue;
            }
            double acc = 0, accw = 0, sx = ax->sum[i];
            if (c->realcase) {
                for (int k = 0; k < ay->ntap[j]; k++) {
                    acc += hc[k * st] * wy[k];
                    accw += sx * wy[k];
                }
                if (accw < 0.000001) continue;
                rb->vals[i] = (accw < 0.99999 || accw > 1.00001) ? acc / accw : acc;
            } else {
                for (int k = 0; k < ay->ntap[j]; k++) acc += wy[k] * hc[k * st];
                rb->vals[i] = acc / (sx * ay->sum[j]);
            }
            rb->set[i] = 1;
        }
        store_row(c, b, j, rb);
    }
}

int cf__rs_separable(rs_call *c, cf_status *st, cf_error *err) {
    const cf__warp *w = c->w;
    cf_resampling rs = c->rq->rs;
    *st = CF_OK;
    if (!w->affine || w->dst_gt[2] != 0 || w->dst_gt[4] != 0 || w->src_gt[2] != 0 ||
        w->src_gt[4] != 0 || rs == CF_RS_MODE)
        return 0;
    int wide = (rs == CF_RS_BILINEAR || rs == CF_RS_CUBIC) && !c->use4;
    /* GDAL's no-mask widened kernel gives up on tiny windows (bilinear);
     * leave that to the general path. */
    if (wide && !c->realcase && (c->rx > (int)c->W || c->ry > (int)c->H)) return 0;
    uint32_t tw = c->tw, th = c->th;
    size_t n = (size_t)c->W * c->H;
    int corners = rs == CF_RS_AVERAGE;
    /* positions: centres, or first corners then (from tw / th on) second
     * corners */
    double *cx = cf__malloc(2 * (size_t)tw * sizeof *cx), *cy = cf__malloc(2 * (size_t)th * sizeof *cy);
    uint8_t *ok = cf__malloc(2 * (size_t)(tw > th ? tw : th));
    double *tmp = cf__malloc(2 * (size_t)(tw > th ? tw : th) * sizeof *tmp);
    axis ax, ay;
    memset(&ax, 0, sizeof ax);
    memset(&ay, 0, sizeof ay);
    span *spx = NULL, *spy = NULL;
    double *P = NULL, *h = NULL;
    bil_cols bc = {0};
    row_buf rb = {cf__malloc(tw * sizeof *rb.vals), cf__malloc(tw)};
    int stride = wide ? 2 * (c->rx > c->ry ? c->rx : c->ry) + 2 : 5;
    if (!cx || !cy || !ok || !tmp || !rb.vals || !rb.set) goto fail;
    /* Positions of the first row and the first column (axis-aligned:
     * the same for every row and column, bit for bit). */
    double tx = (double)c->rq->tx, ty = (double)c->rq->ty, off = corners ? 0.0 : 0.5;
    cf__warp_row(w, c->inv, tx + off, ty + off, tw, cx, tmp, ok);
    if (corners) cf__warp_row(w, c->inv, tx + 1, ty + 1, tw, cx + tw, tmp, ok);
    for (uint32_t i = 0; i < (corners ? 2 * tw : tw); i++) cx[i] -= (double)c->win->x;
    for (uint32_t j = 0; j < th; j++) {
        /* A row's y is that of its first point (the same all along). */
        double sx[6], sy[6];
        uint8_t o[6];
        cf__warp_row(w, c->inv, tx + off, ty + j + off, 1, sx, sy, o);
        cy[j] = sy[0] - (double)c->win->y;
        if (corners) {
            cf__warp_row(w, c->inv, tx + 1, ty + j + 1, 1, sx, sy, o);
            cy[th + j] = sy[0] - (double)c->win->y;
        }
    }
    if (corners) {
        spx = cf__malloc(tw * sizeof *spx);
        spy = cf__malloc(th * sizeof *spy);
        P = cf__malloc(n * sizeof *P);
        if (!spx || !spy || !P) goto fail;
        plan_span(cx, cx + tw, tw, c->W, c->xs, spx);
        plan_span(cy, cy + th, th, c->H, c->ys, spy);
        for (int b = 0; b < c->src->nbands; b++) {
            cf__rs_to_double(c->src->dtype, (const uint8_t *)c->src->data + (size_t)b * n * c->bps,
                             n, P);
            average(c, P, b, spx, spy, &rb);
        }
        goto done;
    }
    if (!axis_alloc(&ax, tw, stride) || !axis_alloc(&ay, th, stride)) goto fail;
    if (plan_axis(c, &ax, cx, tw, c->W, c->xs, c->rx) ||
        plan_axis(c, &ay, cy, th, c->H, c->ys, c->ry)) {
        *st = cf__err(err, CF_E_LIMIT, "resampling kernel too wide: read an overview");
        goto done;
    }
    if (rs == CF_RS_NEAREST) {
        nearest(c, &ax, &ay);
        goto done;
    }
    P = cf__malloc(n * sizeof *P);
    if (!P) goto fail;
    int64_t r0 = INT64_MAX, r1 = INT64_MIN;
    if (rs != CF_RS_BILINEAR || wide)
        for (uint32_t j = 0; j < th; j++)
            if (ay.in[j] && ay.ntap[j] > 0) {
                if (ay.idx[j] < r0) r0 = ay.idx[j];
                if (ay.idx[j] + ay.ntap[j] > r1) r1 = ay.idx[j] + ay.ntap[j];
            }
    if (rs == CF_RS_BILINEAR && !wide && c->realcase && !bil_cols_new(c, &ax, &bc)) goto fail;
    if (r1 > r0) {
        h = cf__malloc((size_t)(r1 - r0) * tw * sizeof *h);
        if (!h) goto fail;
    }
    for (int b = 0; b < c->src->nbands; b++) {
        cf__rs_to_double(c->src->dtype, (const uint8_t *)c->src->data + (size_t)b * n * c->bps, n,
                         P);
        if (rs == CF_RS_BILINEAR && !wide && bc.ph) bilinear_table(c, P, b, &ax, &ay, &bc, &rb);
        else if (rs == CF_RS_BILINEAR && !wide) bilinear(c, P, b, &ax, &ay, &rb);
        else two_pass(c, P, b, &ax, &ay, h, r1 > r0 ? r0 : 0, r1 > r0 ? r1 : 0, &rb);
    }
    goto done;
fail:
    *st = cf__err(err, CF_E_NOMEM, "out of memory (resampling %ux%u)", tw, th);
done:
    free(cx);
    free(cy);
    free(ok);
    free(tmp);
    free(spx);
    free(spy);
    free(P);
    free(h);
    free(rb.vals);
    free(rb.set);
    axis_free(&ax);
    axis_free(&ay);
    bil_cols_free(&bc);
    return 1;
}
