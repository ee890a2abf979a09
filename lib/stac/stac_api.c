/*
 * stac_api.c - cogfeed.h's cf_stac_* over the index of stac.h: the
 * handle, and views of its items, assets and bands.
 */
#include "stac.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

cf_status cf_stac_new(cf_stac **out, cf_error *err) {
    if (!out) return cf__err(err, CF_E_ARG, "cf_stac_new: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return cf__err(err, CF_E_NOMEM, "cf_stac_new: out of memory");
    cf__stac_init(*out);
    return CF_OK;
}

void cf_stac_free(cf_stac *ix) {
    if (!ix) return;
    cf__stac_free(ix);
    free(ix);
}

cf_status cf_stac_add_json(cf_stac *ix, const char *json, size_t len, const char *base,
                           const cf_stac_limits *lim, int *had_items, cf_error *err) {
    if (!ix || (!json && len) || !lim || !had_items)
        return cf__err(err, CF_E_ARG, "cf_stac_add_json: NULL argument");
    cf__stac_doc kind;
    CF__TRY(cf__stac_add_json(ix, json ? json : "", len, base, lim, &kind, err));
    *had_items = kind == CF__STAC_ITEMS;
    return CF_OK;
}

size_t cf_stac_count(const cf_stac *ix) { return ix ? ix->nitems : 0; }

static cf_stac_text text(const cf_stac *ix, cf__sref r) {
    cf_stac_text t = {NULL, 0};
    if (!cf__sref_none(r)) {
        t.p = cf__stac_str(ix, r);
        t.len = cf__sref_len(r);
    }
    return t;
}

void cf_stac_item(const cf_stac *ix, size_t i, cf_stac_item_info *out) {
    const cf__stac_item *it = &ix->items[i];
    memset(out, 0, sizeof *out);
    out->id = text(ix, it->id);
    out->collection = text(ix, it->collection);
    out->properties = text(ix, it->properties);
    out->geometry = text(ix, it->geometry);
    out->self_href = text(ix, it->base);
    out->datetime = text(ix, it->dt[0]);
    out->start_datetime = text(ix, it->dt[1]);
    out->end_datetime = text(ix, it->dt[2]);
    out->when = it->when;
    out->t0 = it->t0;
    out->t1 = it->t1;
    out->cloud_cover = it->cloud;
    memcpy(out->bbox, it->bbox, sizeof out->bbox);
    out->nbbox = it->nbbox;
    out->nassets = it->nassets;
    out->doc = it->doc;
    out->feature = it->feature;
}

void cf_stac_asset(const cf_stac *ix, size_t i, size_t k, cf_stac_asset_info *out) {
    const cf__stac_asset *a = &ix->assets[ix->items[i].first_asset + k];
    memset(out, 0, sizeof *out);
    out->key = text(ix, a->key);
    out->href = text(ix, a->href);
    out->type = text(ix, a->type);
    out->href_relative = a->href_kind == CF__HREF_REL;
    out->roles = text(ix, a->roles);
    out->nroles = a->nroles;
    out->crs = text(ix, a->crs);
    if (a->grid != CF__NO_GRID) {
        const cf__stac_grid *g = &ix->grids[a->grid];
        out->has_transform = g->has_transform;
        out->has_shape = g->has_shape;
        out->has_proj_bbox = g->has_proj_bbox;
        memcpy(out->transform, g->transform, sizeof out->transform);
        memcpy(out->shape, g->shape, sizeof out->shape);
        memcpy(out->proj_bbox, g->proj_bbox, sizeof out->proj_bbox);
    }
    out->nbands = a->nbands;
}

void cf_stac_band(const cf_stac *ix, size_t i, size_t k, size_t b, cf_stac_band_info *out) {
    const cf__stac_band *s = &ix->bands[ix->assets[ix->items[i].first_asset + k].first_band + b];
    memset(out, 0, sizeof *out);
    out->name = text(ix, s->name);
    out->common_name = text(ix, s->common_name);
    out->data_type = text(ix, s->data_type);
    out->has_nodata = s->has_nodata;
    out->has_scale = s->has_scale;
    out->has_offset = s->has_offset;
    out->nodata = s->nodata;
    out->scale = s->scale;
    out->offset = s->offset;
}

cf_status cf_stac_match(cf_stac *ix, const double *boxes, size_t nbox, int64_t t_lo, int64_t t_hi,
                        double max_cloud, uint8_t *match, cf_error *err) {
    if (!ix || (nbox && !boxes) || (!match && ix->nitems))
        return cf__err(err, CF_E_ARG, "cf_stac_match: NULL argument");
    for (size_t k = 0; k < nbox; k++) {
        const double *b = boxes + 4 * k;
        if (isnan(b[0]) || isnan(b[1]) || isnan(b[2]) || isnan(b[3]))
            return cf__err(err, CF_E_ARG, "cf_stac_match: box %zu holds NaN", k);
    }
    return cf__stac_match(ix, boxes, nbox, t_lo, t_hi, max_cloud, match, err);
}

int64_t cf_stac_pick(const cf_stac *ix, size_t i, const char *name) {
    int64_t a = cf__stac_pick(ix, i, name, strlen(name));
    return a < 0 ? a : a - (int64_t)ix->items[i].first_asset;
}
