/*
 * warp_pos.c - source positions kept from one resampling for the next of
 * the same map and window (geo.h, cf__warp_pos).
 *
 * A loader reads the dates of one place onto each sample's grid: their
 * files share a grid and a CRS, so the positions across CRSs (the
 * lattice's interpolation, a fifth of a mosaic's read across two UTM
 * zones) are the same for every date.  Two requests get the same
 * positions when everything the positions are computed from is equal:
 * the transformation (one object: the loader shares one among the inputs
 * of one CRS pair), both grids, the lattice's error bound, the source
 * level and the target window; the key holds all of it, so a hit gives
 * the same bits as computing them again.
 */
#include "warp_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct pos_key {
    const cf__xform *xf;
    double src_gt[6], dst_gt[6], inv[6], max_err, wrap_c;
    uint32_t sw, sh, dw, dh;
    int affine, exact, rows_approx, wrap, corners;
    int64_t tx, ty;
    uint32_t tw, th;
    size_t n;
} pos_key;

struct cf__warp_pos {
    int held;
    pos_key key;
    size_t cap;
    double *px, *py;
    uint8_t *ok;
};

cf__warp_pos *cf__warp_pos_new(void) { return cf__calloc(1, sizeof(cf__warp_pos)); }

void cf__warp_pos_free(cf__warp_pos *p) {
    if (!p) return;
    free(p->px);
    free(p->py);
    free(p->ok);
    free(p);
}

/* Zeroed first: the padding compares equal too (memcmp). */
static void make_key(pos_key *k, const cf__warp *w, const double inv[6], const cf__warp_req *rq,
                     int corners, size_t n) {
    memset(k, 0, sizeof *k);
    k->xf = w->xf;
    memcpy(k->src_gt, w->src_gt, sizeof k->src_gt);
    memcpy(k->dst_gt, w->dst_gt, sizeof k->dst_gt);
    memcpy(k->inv, inv, sizeof k->inv);
    k->max_err = w->max_err;
    k->wrap_c = w->wrap_c;
    k->sw = w->sw;
    k->sh = w->sh;
    k->dw = w->dw;
    k->dh = w->dh;
    k->affine = w->affine;
    k->exact = w->exact;
    k->rows_approx = w->rows_approx;
    k->wrap = w->wrap;
    k->corners = corners;
    k->tx = rq->tx;
    k->ty = rq->ty;
    k->tw = rq->tw;
    k->th = rq->th;
    k->n = n;
}

int cf__warp_pos_get(const cf__warp_pos *p, const cf__warp *w, const double inv[6],
                     const cf__warp_req *rq, int corners, size_t n, double *px, double *py,
                     uint8_t *ok) {
    if (!p || !p->held) return 0;
    pos_key k;
    make_key(&k, w, inv, rq, corners, n);
    if (memcmp(&k, &p->key, sizeof k)) return 0;
    memcpy(px, p->px, n * sizeof *px);
    memcpy(py, p->py, n * sizeof *py);
    memcpy(ok, p->ok, n);
    return 1;
}

void cf__warp_pos_put(cf__warp_pos *p, const cf__warp *w, const double inv[6],
                      const cf__warp_req *rq, int corners, size_t n, const double *px,
                      const double *py, const uint8_t *ok) {
    if (!p) return;
    if (n > p->cap) {
        double *x = cf__realloc(p->px, n * sizeof *x);
        if (x) p->px = x;
        double *y = x ? cf__realloc(p->py, n * sizeof *y) : NULL;
        if (y) p->py = y;
        uint8_t *o = y ? cf__realloc(p->ok, n) : NULL;
        if (o) p->ok = o;
        if (!o) {
            p->held = 0; /* kept nothing: the next request computes them */
            return;
        }
        p->cap = n;
    }
    make_key(&p->key, w, inv, rq, corners, n);
    memcpy(p->px, px, n * sizeof *px);
    memcpy(p->py, py, n * sizeof *py);
    memcpy(p->ok, ok, n);
    p->held = 1;
}
