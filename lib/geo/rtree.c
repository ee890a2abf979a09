/*
 * rtree.c - a packed Hilbert R-tree over boxes (geo.h): built once from
 * all boxes, then only queried, by any number of threads at once.
 *
 * The boxes are sorted by the Hilbert index of their centres (on a
 * 65536 x 65536 lattice over the extent of all boxes), so that boxes near
 * each other in space sit near each other in the tree; the sorted boxes
 * are the leaves, and each level above holds one box per NODE children
 * of the level below, up to one root.  Every node but the last of a level
 * is full: the tree takes n * (1 + 1/NODE + ...) boxes and no pointers.
 * Querying a box visits the nodes that meet it and returns the ids of the
 * leaves that meet it in ascending order (the order features were given,
 * which is the order they are burnt in).
 */
#include "geo_internal.h"

#include <stdlib.h>
#include <string.h>

#define NODE 16

struct cf__rtree {
    size_t n;            /* leaves */
    int nlevels;
    size_t lvl_start[40]; /* level l's boxes: [lvl_start[l], lvl_start[l+1]) */
    double *box;          /* 4 per node: x0, y0, x1, y1; leaves first */
    uint32_t *id;         /* the leaves' ids */
};

/* Hilbert index of (x, y) on a 2^16 lattice (the classic rotate-and-flip
 * walk down the quadrants). */
static uint32_t hilbert(uint32_t x, uint32_t y) {
    uint32_t d = 0;
    for (uint32_t s = 1u << 15; s > 0; s >>= 1) {
        uint32_t rx = (x & s) > 0, ry = (y & s) > 0;
        d += s * s * ((3 * rx) ^ ry);
        if (!ry) {
            if (rx) {
                x = 65535 - x;
                y = 65535 - y;
            }
            uint32_t t = x;
            x = y;
            y = t;
        }
    }
    return d;
}

typedef struct key {
    uint32_t h, i;
} key;

static int cmp_key(const void *a, const void *b) {
    const key *p = a, *q = b;
    if (p->h != q->h) return p->h < q->h ? -1 : 1;
    return (p->i > q->i) - (p->i < q->i);
}

void cf__rtree_free(cf__rtree *t) {
    if (!t) return;
    free(t->box);
    free(t->id);
    free(t);
}

cf_status cf__rtree_new(const double *boxes, size_t n, cf__rtree **out, cf_error *err) {
    *out = NULL;
    if (n > UINT32_MAX - 1)
        return cf__err(err, CF_E_LIMIT, "rtree: %zu boxes (at most 2^32 - 2)", n);
    cf__rtree *t = cf__calloc(1, sizeof *t);
    size_t total = n, lv = n;
    while (lv > 1) {
        lv = (lv + NODE - 1) / NODE;
        total += lv;
    }
    key *k = n ? cf__malloc(n * sizeof *k) : NULL;
    if (t) {
        t->box = cf__malloc((total ? total : 1) * 4 * sizeof *t->box);
        t->id = cf__malloc((n ? n : 1) * sizeof *t->id);
    }
    if (!t || (n && !k) || !t->box || !t->id) {
        free(k);
        cf__rtree_free(t);
        return cf__err(err, CF_E_NOMEM, "rtree: out of memory for %zu boxes", n);
    }
    t->n = n;
    double ext[4] = {1e308, 1e308, -1e308, -1e308};
    for (size_t i = 0; i < n; i++) {
        const double *b = boxes + 4 * i;
        if (b[0] < ext[0]) ext[0] = b[0];
        if (b[1] < ext[1]) ext[1] = b[1];
        if (b[2] > ext[2]) ext[2] = b[2];
        if (b[3] > ext[3]) ext[3] = b[3];
    }
    const double sx = ext[2] > ext[0] ? 65535.0 / (ext[2] - ext[0]) : 0;
    const double sy = ext[3] > ext[1] ? 65535.0 / (ext[3] - ext[1]) : 0;
    for (size_t i = 0; i < n; i++) {
        const double *b = boxes + 4 * i;
        double cx = ((b[0] + b[2]) / 2 - ext[0]) * sx, cy = ((b[1] + b[3]) / 2 - ext[1]) * sy;
        /* NaN or overflowing centres go to a corner; their boxes still
         * answer queries by their own bounds */
        uint32_t hx = cx >= 0 && cx <= 65535 ? (uint32_t)cx : 0;
        uint32_t hy = cy >= 0 && cy <= 65535 ? (uint32_t)cy : 0;
        k[i].h = hilbert(hx, hy);
        k[i].i = (uint32_t)i;
    }
    if (n) qsort(k, n, sizeof *k, cmp_key);
    for (size_t i = 0; i < n; i++) {
        memcpy(t->box + 4 * i, boxes + 4 * (size_t)k[i].i, 4 * sizeof *t->box);
        t->id[i] = k[i].i;
    }
    free(k);
    /* the levels above, bottom up */
    size_t start = 0, cnt = n;
    t->lvl_start[0] = 0;
    t->nlevels = 1;
    while (cnt > 1) {
        size_t up = (cnt + NODE - 1) / NODE, at = start + cnt;
        for (size_t p = 0; p < up; p++) {
            double *pb = t->box + 4 * (at + p);
            pb[0] = pb[1] = 1e308;
            pb[2] = pb[3] = -1e308;
            for (size_t c = p * NODE; c < cnt && c < (p + 1) * NODE; c++) {
                const double *cb = t->box + 4 * (start + c);
                if (cb[0] < pb[0]) pb[0] = cb[0];
                if (cb[1] < pb[1]) pb[1] = cb[1];
                if (cb[2] > pb[2]) pb[2] = cb[2];
                if (cb[3] > pb[3]) pb[3] = cb[3];
            }
        }
        start = at;
        cnt = up;
        t->lvl_start[t->nlevels++] = start;
    }
    t->lvl_start[t->nlevels] = start + cnt;
    *out = t;
    return CF_OK;
}

static int meets(const double *b, const double *q) {
    return b[0] <= q[2] && b[2] >= q[0] && b[1] <= q[3] && b[3] >= q[1];
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

cf_status cf__rtree_query(const cf__rtree *t, const double q[4], cf__ids *ids, cf_error *err) {
    ids->n = 0;
    if (!t->n) return CF_OK;
    /* depth-first over (level, index) pairs; at most NODE per level */
    size_t stack_l[40 * NODE], stack_i[40 * NODE], sp = 0;
    const int top = t->nlevels - 1;
    stack_l[sp] = (size_t)top;
    stack_i[sp++] = 0;
    while (sp) {
        sp--;
        const size_t l = stack_l[sp], i = stack_i[sp];
        const double *b = t->box + 4 * (t->lvl_start[l] + i);
        if (!meets(b, q)) continue;
        if (l == 0) {
            if (ids->n == ids->cap) {
                size_t c = ids->cap ? ids->cap * 2 : 256;
                uint32_t *p = realloc(ids->v, c * sizeof *p);
                if (!p) return cf__err(err, CF_E_NOMEM, "rtree: out of memory");
                ids->v = p;
                ids->cap = c;
            }
            ids->v[ids->n++] = t->id[i];
            continue;
        }
        const size_t below = t->lvl_start[l] - t->lvl_start[l - 1];
        for (size_t c = i * NODE; c < below && c < (i + 1) * NODE; c++) {
            stack_l[sp] = l - 1;
            stack_i[sp++] = c;
        }
    }
    /* (a query that met nothing may hold no array yet: qsort(NULL) is UB) */
    if (ids->n > 1) qsort(ids->v, ids->n, sizeof *ids->v, cmp_u32);
    return CF_OK;
}
