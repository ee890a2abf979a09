/*
 * stac_index.c - the STAC index's memory, its search (an R-tree of the
 * items' bboxes, then dates and cloud cover) and the choice of an item's
 * asset by key or common name (stac.h).
 */
#include "stac.h"
#include "../geo/geo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cf__stac_init(cf__stac *ix) { memset(ix, 0, sizeof *ix); }

void cf__stac_drop_tree(cf__stac *ix) {
    cf__rtree_free(ix->tree);
    free(ix->tree_item);
    ix->tree = NULL;
    ix->tree_item = NULL;
}

void cf__stac_free(cf__stac *ix) {
    cf__stac_drop_tree(ix);
    free(ix->items);
    free(ix->assets);
    free(ix->bands);
    free(ix->grids);
    free(ix->intern);
    free(ix->arena);
    memset(ix, 0, sizeof *ix);
}

/* stac.py's _bbox_parts of an item's bbox: 0, 1 or 2 boxes (none for a
 * bbox that is not one: not finite, south above north). */
static int parts(const cf__stac_item *it, double out[8]) {
    if (it->nbbox != 4 && it->nbbox != 6) return 0;
    const double *b = it->bbox;
    double w = b[0], s = b[1], e = it->nbbox == 6 ? b[3] : b[2], n = it->nbbox == 6 ? b[4] : b[3];
    if (!isfinite(w) || !isfinite(s) || !isfinite(e) || !isfinite(n) || s > n) return 0;
    if (w > e) {
        double v[8] = {w, s, 180.0, n, -180.0, s, e, n};
        memcpy(out, v, sizeof v);
        return 2;
    }
    out[0] = w, out[1] = s, out[2] = e, out[3] = n;
    return 1;
}

static cf_status build_tree(cf__stac *ix, cf_error *err) {
    size_t nb = 0;
    double *boxes = malloc(ix->nitems * 8 * sizeof *boxes + 1);
    uint32_t *owner = malloc(ix->nitems * 2 * sizeof *owner + 1);
    if (!boxes || !owner) {
        free(boxes);
        free(owner);
        return cf__err(err, CF_E_NOMEM, "stac: out of memory for the index of %zu items", ix->nitems);
    }
    for (size_t i = 0; i < ix->nitems; i++) {
        int k = parts(&ix->items[i], boxes + nb * 4);
        for (int j = 0; j < k; j++) owner[nb + (size_t)j] = (uint32_t)i;
        nb += (size_t)k;
    }
    cf_status st = cf__rtree_new(boxes, nb, &ix->tree, err);
    free(boxes);
    if (st != CF_OK) {
        free(owner);
        return st;
    }
    ix->tree_item = owner;
    return CF_OK;
}

cf_status cf__stac_match(cf__stac *ix, const double *boxes, size_t nbox, int64_t t_lo,
                         int64_t t_hi, double max_cloud, uint8_t *match, cf_error *err) {
    if (nbox) {
        memset(match, 0, ix->nitems);
        if (!ix->tree) CF__TRY(build_tree(ix, err));
        cf__ids ids = {0};
        for (size_t k = 0; k < nbox; k++) {
            const double *q = boxes + 4 * k;
            if (q[0] > q[2] || q[1] > q[3]) continue; /* meets nothing (as _bbox_meets) */
            ids.n = 0;
            cf_status st = cf__rtree_query(ix->tree, boxes + 4 * k, &ids, err);
            if (st != CF_OK) {
                free(ids.v);
                return st;
            }
            for (size_t i = 0; i < ids.n; i++) match[ix->tree_item[ids.v[i]]] = 1;
        }
        free(ids.v);
    } else {
        memset(match, 1, ix->nitems);
    }
    int timed = t_lo != CF__NO_TIME || t_hi != CF__NO_TIME;
    for (size_t i = 0; i < ix->nitems; i++) {
        if (!match[i]) continue;
        const cf__stac_item *it = &ix->items[i];
        if (!isnan(max_cloud) && (isnan(it->cloud) || it->cloud > max_cloud)) match[i] = 0;
        if (timed && (it->t0 == CF__NO_TIME || it->t1 == CF__NO_TIME ||
                      (t_hi != CF__NO_TIME && it->t0 > t_hi) || (t_lo != CF__NO_TIME && it->t1 < t_lo)))
            match[i] = 0;
    }
    return CF_OK;
}

static int str_is(const cf__stac *ix, cf__sref r, const char *s, size_t n) {
    return !cf__sref_none(r) && cf__sref_len(r) == n && memcmp(cf__stac_str(ix, r), s, n) == 0;
}

static int carries(const cf__stac *ix, const cf__stac_asset *a, const char *name, size_t n) {
    if (n == 0) return 0; /* an empty common name is none (stac.py's common_names) */
    for (uint32_t b = 0; b < a->nbands; b++)
        if (str_is(ix, ix->bands[a->first_band + b].common_name, name, n)) return 1;
    return 0;
}

static int has_role(const cf__stac *ix, const cf__stac_asset *a, const char *role) {
    const char *p = cf__stac_str(ix, a->roles);
    for (uint32_t i = 0; i < a->nroles; i++) {
        if (!strcmp(p, role)) return 1;
        p += strlen(p) + 1;
    }
    return 0;
}

int64_t cf__stac_pick(const cf__stac *ix, size_t i, const char *name, size_t n) {
    const cf__stac_item *it = &ix->items[i];
    const cf__stac_asset *as = ix->assets + it->first_asset;
    for (uint32_t k = 0; k < it->nassets; k++)
        if (str_is(ix, as[k].key, name, n)) return (int64_t)(it->first_asset + k);
    /* By common name: one asset, else the one GeoTIFF, else the one of
     * role "data" (stac.py's _pick). */
    int64_t found = -1, tif = -1, data = -1;
    int nf = 0, nt = 0, nd = 0;
    for (uint32_t k = 0; k < it->nassets; k++) {
        const cf__stac_asset *a = &as[k];
        if (!carries(ix, a, name, n)) continue;
        int64_t id = (int64_t)(it->first_asset + k);
        if (!nf++) found = id;
        if (!cf__sref_none(a->type) && cf__sref_len(a->type) >= 10 && !memcmp(cf__stac_str(ix, a->type), "image/tiff", 10))
            if (!nt++) tif = id;
        if (has_role(ix, a, "data"))
            if (!nd++) data = id;
    }
    if (nf <= 1) return found;
    if (nt) return nt == 1 ? tif : -2;
    if (nd) return nd == 1 ? data : -2;
    return -2;
}
