/*
 * vlabels.c - cf_vlabels: polygons with class values, burnt into the
 * label mask of any grid (a patch of the Loader, a whole scene) with
 * gdal_rasterize's rules (rasterize.c).
 *
 * Built once: every feature's rings (wkb.c) in the features' own CRS, its
 * bounds, and a packed Hilbert R-tree over the bounds (rtree.c).  A grid
 * then selects the features its bounds meet (its outline transformed into
 * the features' CRS when the two differ), transforms only their vertices
 * to the grid's pixels, and burns them in the order they were given: a
 * later feature overwrites an earlier one, as in gdal_rasterize.
 *
 * Immutable after cf_vlabels_new except for the cache of transformations
 * (one pair per target CRS, behind a lock), so that the Loader's readers
 * burn patches at once.  Reference-counted: the Loader keeps its own.
 */
#include "geo_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Budget of vertices over all features: 2^28 (4 GiB of coordinates) is
 * far beyond any labels file that fits a machine. */
#define VL_MAX_VERTICES ((size_t)1 << 28)
/* Target CRSs whose transformations are kept (one per distinct UTM zone of
 * a dataset, typically one or two). */
#define VL_XFORMS 16
/* Points per outline edge when the grid's bounds go into another CRS. */
#define VL_STEPS 16

typedef struct vl_xf {
    cf_crs *to;           /* the grid's CRS */
    cf__xform *fwd, *inv; /* features -> grid, grid -> features */
} vl_xf;

struct cf_vlabels {
    atomic_int refs;
    size_t n;
    cf__shapes s;         /* all rings, feature after feature */
    uint32_t *first_ring; /* feature f: rings [first_ring[f], first_ring[f + 1]) */
    size_t *first_poly;   /* and polygons [first_poly[f], first_poly[f + 1]) */
    size_t *first_xy;     /* and its vertices from first_xy[f] */
    double *value;
    double bounds[4];
    cf_dtype dtype;
    cf_crs *crs;
    int all_touched;
    size_t max_ring_xy;   /* the most vertices of one feature */
    cf__rtree *tree;
    pthread_mutex_t mu;
    vl_xf xf[VL_XFORMS];
    int nxf;
};

static void shapes_free(cf__shapes *s) {
    free(s->x);
    free(s->y);
    free(s->ring_len);
    free(s->poly_rings);
}

static void vl_destroy(cf_vlabels *vl) {
    shapes_free(&vl->s);
    free(vl->first_ring);
    free(vl->first_poly);
    free(vl->first_xy);
    free(vl->value);
    cf__rtree_free(vl->tree);
    for (int i = 0; i < vl->nxf; i++) {
        cf_crs_free(vl->xf[i].to);
        cf__xform_free(vl->xf[i].fwd);
        cf__xform_free(vl->xf[i].inv);
    }
    cf_crs_free(vl->crs);
    pthread_mutex_destroy(&vl->mu);
    free(vl);
}

void cf_vlabels_free(cf_vlabels *vl) {
    if (vl && atomic_fetch_sub(&vl->refs, 1) == 1) vl_destroy(vl);
}

cf_vlabels *cf__vlabels_ref(const cf_vlabels *vl) {
    cf_vlabels *v = (cf_vlabels *)vl;
    if (v) atomic_fetch_add(&v->refs, 1);
    return v;
}

static cf_dtype pick_dtype(const double *v, size_t n) {
    double lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < lo) lo = v[i];
        if (v[i] > hi) hi = v[i];
    }
    if (lo >= 0 && hi <= 255) return CF_DT_U8;
    if (lo >= 0 && hi <= 65535) return CF_DT_U16;
    return CF_DT_I32;
}

cf_status cf_vlabels_new(size_t n, const uint8_t *const *wkb, const size_t *wkb_len,
                         const double *values, const cf_crs *crs, int all_touched,
                         cf_vlabels **out, cf_error *err) {
    if (!out) return cf__err(err, CF_E_ARG, "vector labels: NULL out");
    *out = NULL;
    if (n && (!wkb || !wkb_len || !values))
        return cf__err(err, CF_E_ARG, "vector labels: NULL features or values");
    if (n > UINT32_MAX - 1)
        return cf__err(err, CF_E_LIMIT, "vector labels: %zu features (at most 2^32 - 2)", n);
    for (size_t i = 0; i < n; i++)
        if (!(values[i] == floor(values[i])) || values[i] < -2147483648.0 ||
            values[i] > 2147483647.0)
            return cf__err(err, CF_E_ARG,
                           "vector labels: feature %zu has value %g; class values are "
                           "integers that fit int32", i, values[i]);
    cf_vlabels *vl = cf__calloc(1, sizeof *vl);
    if (!vl) return cf__err(err, CF_E_NOMEM, "vector labels: out of memory");
    atomic_init(&vl->refs, 1);
    pthread_mutex_init(&vl->mu, NULL);
    vl->n = n;
    vl->all_touched = all_touched != 0;
    vl->crs = crs ? cf_crs_ref(crs) : NULL;
    vl->s.max_xy = VL_MAX_VERTICES;
    vl->first_ring = cf__malloc((n + 1) * sizeof *vl->first_ring);
    vl->first_xy = cf__malloc((n + 1) * sizeof *vl->first_xy);
    vl->first_poly = cf__malloc((n + 1) * sizeof *vl->first_poly);
    vl->value = cf__malloc((n ? n : 1) * sizeof *vl->value);
    double *boxes = cf__malloc((n ? n : 1) * 4 * sizeof *boxes);
    cf_status st = CF_OK;
    if (!vl->first_ring || !vl->first_xy || !vl->first_poly || !vl->value || !boxes)
        st = cf__err(err, CF_E_NOMEM, "vector labels: out of memory for %zu features", n);
    vl->bounds[0] = vl->bounds[1] = HUGE_VAL;
    vl->bounds[2] = vl->bounds[3] = -HUGE_VAL;
    for (size_t i = 0; i < n && st == CF_OK; i++) {
        char name[48];
        snprintf(name, sizeof name, "vector labels: feature %zu", i);
        vl->first_ring[i] = (uint32_t)vl->s.nrings;
        vl->first_xy[i] = vl->s.nxy;
        vl->first_poly[i] = vl->s.npolys;
        if (vl->s.nrings > UINT32_MAX - 65536) {
            st = cf__err(err, CF_E_LIMIT, "%s: more than 2^32 rings in all", name);
            break;
        }
        st = cf__wkb_polygons(wkb[i], wkb_len[i], &vl->s, name, err);
        if (st != CF_OK) break;
        double *b = boxes + 4 * i;
        b[0] = b[1] = HUGE_VAL;
        b[2] = b[3] = -HUGE_VAL;
        for (size_t k = vl->first_xy[i]; k < vl->s.nxy; k++) {
            const double x = vl->s.x[k], y = vl->s.y[k];
            if (!isfinite(x) || !isfinite(y)) {
                st = cf__err(err, CF_E_FORMAT, "%s: a vertex is not a finite number", name);
                break;
            }
            if (x < b[0]) b[0] = x;
            if (y < b[1]) b[1] = y;
            if (x > b[2]) b[2] = x;
            if (y > b[3]) b[3] = y;
        }
        for (int c = 0; c < 2; c++) {
            if (b[c] < vl->bounds[c]) vl->bounds[c] = b[c];
            if (b[c + 2] > vl->bounds[c + 2]) vl->bounds[c + 2] = b[c + 2];
        }
        if (vl->s.nxy - vl->first_xy[i] > vl->max_ring_xy)
            vl->max_ring_xy = vl->s.nxy - vl->first_xy[i];
        vl->value[i] = values[i];
    }
    if (st == CF_OK) {
        vl->first_ring[n] = (uint32_t)vl->s.nrings;
        vl->first_xy[n] = vl->s.nxy;
        vl->first_poly[n] = vl->s.npolys;
        vl->dtype = pick_dtype(values, n);
        st = cf__rtree_new(boxes, n, &vl->tree, err);
    }
    free(boxes);
    if (st != CF_OK) {
        vl_destroy(vl);
        return st;
    }
    *out = vl;
    return CF_OK;
}

size_t cf_vlabels_count(const cf_vlabels *vl) { return vl ? vl->n : 0; }
cf_dtype cf_vlabels_dtype(const cf_vlabels *vl) { return vl ? vl->dtype : CF_DT_U8; }

void cf_vlabels_bounds(const cf_vlabels *vl, double b[4]) {
    memcpy(b, vl->bounds, sizeof vl->bounds);
}

/* The transformations between the features' CRS and `to`, made once per
 * target CRS: none (fwd and inv NULL) when the two are equivalent, so that
 * a patch costs a lookup, not a PROJ comparison. */
static cf_status get_xf(cf_vlabels *vl, const cf_crs *to, vl_xf *out, int *shared,
                        cf_error *err) {
    pthread_mutex_lock(&vl->mu);
    for (int i = 0; i < vl->nxf; i++)
        if (vl->xf[i].to == to || cf_crs_equivalent(vl->xf[i].to, to)) {
            *out = vl->xf[i];
            *shared = 1;
            pthread_mutex_unlock(&vl->mu);
            return CF_OK;
        }
    pthread_mutex_unlock(&vl->mu);
    vl_xf x = {0};
    cf_status st = CF_OK;
    if (!cf_crs_equivalent(vl->crs, to)) {
        st = cf__xform_new(vl->crs, to, &x.fwd, err);
        if (st == CF_OK) st = cf__xform_new(to, vl->crs, &x.inv, err);
    }
    if (st != CF_OK) {
        cf__xform_free(x.fwd);
        return cf__err_prefix(err, st, "vector labels");
    }
    x.to = cf_crs_ref(to);
    pthread_mutex_lock(&vl->mu);
    if (vl->nxf < VL_XFORMS) {
        vl->xf[vl->nxf++] = x;
        *shared = 1;
    } else {
        *shared = 0; /* the caller frees it */
    }
    pthread_mutex_unlock(&vl->mu);
    *out = x;
    return CF_OK;
}

static void xf_drop(vl_xf *x) {
    cf_crs_free(x->to);
    cf__xform_free(x->fwd);
    cf__xform_free(x->inv);
}

/* The grid's bounds in the features' CRS: its outline, densified when
 * transformed; 0 when a point of it does not transform (then every
 * feature is a candidate). */
static int query_box(const cf_grid *g, cf__xform *inv, double q[4]) {
    const double W = g->width, H = g->height;
    const int steps = inv ? VL_STEPS : 1;
    double x[4 * VL_STEPS], y[4 * VL_STEPS];
    uint8_t ok[4 * VL_STEPS];
    int m = 0;
    for (int e = 0; e < 4; e++)
        for (int k = 0; k < steps; k++) {
            double t = (double)k / steps, c, r;
            switch (e) {
            case 0: c = t * W, r = 0; break;
            case 1: c = W, r = t * H; break;
            case 2: c = W - t * W, r = H; break;
            default: c = 0, r = H - t * H; break;
            }
            x[m] = g->transform[0] + c * g->transform[1] + r * g->transform[2];
            y[m] = g->transform[3] + c * g->transform[4] + r * g->transform[5];
            m++;
        }
    if (inv) cf__xform_run(inv, (size_t)m, x, y, ok);
    q[0] = q[1] = HUGE_VAL;
    q[2] = q[3] = -HUGE_VAL;
    for (int i = 0; i < m; i++) {
        if (inv && !ok[i]) return 0;
        if (x[i] < q[0]) q[0] = x[i];
        if (y[i] < q[1]) q[1] = y[i];
        if (x[i] > q[2]) q[2] = x[i];
        if (y[i] > q[3]) q[3] = y[i];
    }
    if (inv) {
        /* between the outline's points an edge may bulge outwards */
        const double px = (q[2] - q[0]) / VL_STEPS, py = (q[3] - q[1]) / VL_STEPS;
        q[0] -= px;
        q[2] += px;
        q[1] -= py;
        q[3] += py;
    }
    return 1;
}

cf_status cf_vlabels_rasterize(const cf_vlabels *vlc, const cf_grid *g, cf_dtype dtype, void *out,
                               size_t *nfeatures, cf_error *err) {
    cf_vlabels *vl = (cf_vlabels *)vlc;
    if (nfeatures) *nfeatures = 0;
    if (!vl || !g || !out) return cf__err(err, CF_E_ARG, "cf_vlabels_rasterize: NULL argument");
    if (dtype != CF_DT_U8 && dtype != CF_DT_U16 && dtype != CF_DT_I16 && dtype != CF_DT_U32 &&
        dtype != CF_DT_I32 && dtype != CF_DT_F32 && dtype != CF_DT_F64)
        return cf__err(err, CF_E_ARG, "vector labels: cannot burn into %s", cf_dtype_name(dtype));
    if (!g->width || !g->height)
        return cf__err(err, CF_E_ARG, "vector labels: empty grid");
    double inv[6];
    if (!cf__gt_invert(g->transform, inv))
        return cf__err(err, CF_E_ARG, "vector labels: the grid's transform is singular");
    memset(out, 0, (size_t)g->width * g->height * cf_dtype_size(dtype));
    vl_xf x = {0};
    int shared = 1;
    if (vl->crs && g->crs) CF__TRY(get_xf(vl, g->crs, &x, &shared, err));
    const int reproject = x.fwd != NULL;
    cf__ids ids = {0};
    double q[4];
    cf_status st = CF_OK;
    if (query_box(g, reproject ? x.inv : NULL, q)) {
        st = cf__rtree_query(vl->tree, q, &ids, err);
    } else {
        ids.v = cf__malloc((vl->n ? vl->n : 1) * sizeof *ids.v);
        if (!ids.v) st = cf__err(err, CF_E_NOMEM, "vector labels: out of memory");
        for (size_t i = 0; ids.v && i < vl->n; i++) ids.v[ids.n++] = (uint32_t)i;
    }
    double *px = NULL, *py = NULL;
    uint8_t *ok = NULL;
    int *ints = NULL;
    if (st == CF_OK && ids.n) {
        const size_t m = vl->max_ring_xy ? vl->max_ring_xy : 1;
        px = cf__malloc(m * sizeof *px);
        py = cf__malloc(m * sizeof *py);
        ok = cf__malloc(m);
        ints = cf__malloc(m * sizeof *ints);
        if (!px || !py || !ok || !ints) st = cf__err(err, CF_E_NOMEM, "vector labels: out of memory");
    }
    cf__burn b = {out, dtype, g->width, g->height, 0, vl->all_touched};
    for (size_t k = 0; k < ids.n && st == CF_OK; k++) {
        const uint32_t f = ids.v[k];
        const size_t x0 = vl->first_xy[f], nv = vl->first_xy[f + 1] - x0;
        memcpy(px, vl->s.x + x0, nv * sizeof *px);
        memcpy(py, vl->s.y + x0, nv * sizeof *py);
        if (reproject) {
            cf__xform_run(x.fwd, nv, px, py, ok);
            size_t bad = 0;
            for (size_t i = 0; i < nv; i++) bad += !ok[i];
            if (bad) continue; /* a vertex outside the grid CRS's domain */
        }
        /* as GDAL: pixel = inverse geotransform applied term by term */
        for (size_t i = 0; i < nv; i++) {
            const double X = px[i], Y = py[i];
            px[i] = inv[0] + X * inv[1] + Y * inv[2];
            py[i] = inv[3] + X * inv[4] + Y * inv[5];
        }
        b.value = vl->value[f];
        /* each polygon of the feature on its own (a MultiPolygon's parts
         * burn their union) */
        size_t ring = vl->first_ring[f], v = 0;
        for (size_t p = vl->first_poly[f]; p < vl->first_poly[f + 1]; p++) {
            const uint32_t nr = vl->s.poly_rings[p];
            cf__burn_polygon(&b, px + v, py + v, vl->s.ring_len + ring, nr, ints);
            for (uint32_t r = 0; r < nr; r++) v += vl->s.ring_len[ring + r];
            ring += nr;
        }
    }
    if (nfeatures) *nfeatures = ids.n;
    free(px);
    free(py);
    free(ok);
    free(ints);
    free(ids.v);
    if (!shared) xf_drop(&x);
    return st;
}
