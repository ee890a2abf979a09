/*
 * read_grid.c - a cog read onto a grid: the file's grid and CRS, and
 * cf_cog_read_grid, which plans with lib/geo (the coordinate map, GDAL's
 * overview choice, the source window), reads that window with cf_cog_read
 * (one batch of tile requests), and resamples it into the caller's
 * buffer.  The Loader will use the same pieces per patch.
 */
#include "cog_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const cf_crs *cf_cog_crs(const cf_cog *cog) { return cog ? cog->crs : NULL; }

const char *cf_cog_crs_note(const cf_cog *cog) { return cog ? cog->crs_note : ""; }

static void level_size(const cf_cog *cog, int level, uint32_t *w, uint32_t *h) {
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[cog->tiff->levels[level]];
    *w = ifd->width;
    *h = ifd->height;
}

cf_status cf_cog_grid(const cf_cog *cog, int level, cf_grid *out, cf_error *err) {
    if (!cog || !out) return cf__err(err, CF_E_ARG, "cf_cog_grid: NULL argument");
    if (cf__cog_declared(cog)) {
        CF__TRY(cf__cog_check_level(cog, level, err));
        *out = *cf__cog_decl_grid(cog);
        return CF_OK;
    }
    const cf__tiff *t = cog->tiff;
    if (level < 0 || level >= t->nlevels)
        return cf__err(err, CF_E_ARG, "%s: level %d does not exist (levels 0..%d)", cog->name,
                       level, t->nlevels - 1);
    if (!t->has_geotransform)
        return cf__err(err, CF_E_STATE, "%s: no geotransform: the file has no grid", cog->name);
    uint32_t w0, h0, w, h;
    level_size(cog, 0, &w0, &h0);
    level_size(cog, level, &w, &h);
    memcpy(out->transform, t->geotransform, sizeof out->transform);
    /* As GDAL's overview datasets scale it. */
    double rx = (double)w0 / w, ry = (double)h0 / h;
    out->transform[1] *= rx;
    out->transform[2] *= ry;
    out->transform[4] *= rx;
    out->transform[5] *= ry;
    out->width = w;
    out->height = h;
    out->crs = cog->crs;
    return CF_OK;
}

/* n samples of dtype t set to v (GDAL's INIT_DEST: the nodata, or 0). */
void cf__grid_fill(void *dst, size_t n, cf_dtype t, double v) {
    size_t sz = cf_dtype_size(t);
    if (v == 0) {
        memset(dst, 0, n * sz);
        return;
    }
    uint8_t one[8];
    cf__rs_store(t, one, 0, v, 0, 0);
    for (size_t i = 0; i < n; i++) memcpy((uint8_t *)dst + i * sz, one, sz);
}

/* The source's CRS against the grid's: *xf stays NULL when they are the
 * same (an affine map). */
static cf_status crs_pair(const cf_cog *cog, const cf_grid *g, cf__xform **xf, cf_error *err) {
    *xf = NULL;
    if (!cog->crs && !g->crs) return CF_OK;
    if (!cog->crs)
        return cf__err(err, CF_E_STATE,
                       "%s has no CRS%s%s, the grid has one: it cannot be placed on the grid",
                       cog->name, cog->crs_note[0] ? " (" : "",
                       cog->crs_note[0] ? cog->crs_note : "");
    if (!g->crs) return cf__err(err, CF_E_STATE, "%s has a CRS, the grid has none", cog->name);
    if (cf_crs_equivalent(cog->crs, g->crs)) return CF_OK;
    cf_status st = cf__xform_new(g->crs, cog->crs, xf, err);
    if (st) cf__err_prefix(err, st, "%s", cog->name);
    return st;
}

static cf_status check_args(cf_cog *cog, const cf_grid *g, const cf_warp_options *o,
                            size_t dst_size, int nb, cf_error *err) {
    if (!g->width || !g->height || g->width > CF_MAX_DIMENSION || g->height > CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "%s: grid size %ux%u invalid", cog->name, g->width,
                       g->height);
    for (int k = 0; k < 6; k++)
        if (!isfinite(g->transform[k]))
            return cf__err(err, CF_E_ARG, "%s: grid transform is not finite", cog->name);
    double det = g->transform[1] * g->transform[5] - g->transform[2] * g->transform[4];
    if (!(det != 0))
        return cf__err(err, CF_E_ARG, "%s: grid transform is singular", cog->name);
    if ((unsigned)o->resampling >= CF_RS_COUNT)
        return cf__err(err, CF_E_ARG, "%s: unknown resampling %d", cog->name, o->resampling);
    if (!(o->error_threshold >= 0) || !isfinite(o->error_threshold))
        return cf__err(err, CF_E_ARG, "%s: error threshold must be >= 0", cog->name);
    if (o->level != CF_LEVEL_AUTO && (o->level < 0 || o->level >= cog->tiff->nlevels))
        return cf__err(err, CF_E_ARG, "%s: level %d does not exist (levels 0..%d)", cog->name,
                       o->level, cog->tiff->nlevels - 1);
    double need = (double)nb * g->width * g->height * cf_dtype_size(cog->dtype);
    if ((double)dst_size < need)
        return cf__err(err, CF_E_ARG, "%s: buffer of %zu bytes, the grid needs %.0f", cog->name,
                       dst_size, need);
    if (!cog->tiff->has_geotransform)
        return cf__err(err, CF_E_STATE,
                       "%s: no geotransform: it cannot be placed on a grid (read it by "
                       "pixel window instead)",
                       cog->name);
    return CF_OK;
}

/* Read one chunk's source window and resample it into dst. */
static cf_status read_chunk(cf_cog *cog, const cf__grid_plan *pl, size_t k, const int *bands,
                            int nb, void *dst, size_t row_stride, cf_error *err) {
    const cf__warp_win *win = &pl->chunks[k].win;
    const cf__warp_req *rq = &pl->chunks[k].rq;
    size_t bps = cf_dtype_size(cog->dtype);
    size_t npx = (size_t)win->w * win->h;
    size_t len = npx * (size_t)nb * bps;
    uint8_t *buf = cf__malloc(len), *valid = NULL;
    if (!buf) return cf__err(err, CF_E_NOMEM, "%s: out of memory (%zu bytes)", cog->name, len);
    cf_status st = cf_cog_read(cog, rq->level, win->x, win->y, win->w, win->h, bands, nb, buf,
                               len, err);
    if (!st && cog->tiff->mask_of_level[rq->level] >= 0) {
        /* The internal mask: GDAL's per-dataset validity. */
        valid = cf__malloc(npx);
        if (!valid) st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
        else
            st = cf_cog_read_mask(cog, rq->level, win->x, win->y, win->w, win->h, valid, npx,
                                  err);
    }
    if (!st) st = cf__grid_resample(cog, pl, k, buf, valid, dst, row_stride, err);
    free(valid);
    free(buf);
    return st;
}

void cf__grid_plan_free(cf__grid_plan *pl) {
    free(pl->chunks);
    cf__warp_free(pl->w);
    cf__xform_free(pl->xf_own);
    memset(pl, 0, sizeof *pl);
}

cf_status cf__grid_plan_new(cf_cog *cog, const cf_grid *grid, const cf_warp_options *o, int nb,
                            int xf_known, cf__xform *xf, cf__grid_plan *pl, cf_error *err) {
    const cf__tiff *t = cog->tiff;
    memset(pl, 0, sizeof *pl);
    cf_status st = CF_OK;
    if (!xf_known) {
        st = crs_pair(cog, grid, &pl->xf_own, err);
        CF__TRY(st);
        xf = pl->xf_own;
    }
    cf_grid src;
    st = cf_cog_grid(cog, 0, &src, err);
    if (!st) st = cf__warp_new(&src, grid, xf, o->error_threshold, &pl->w, err);
    if (st) {
        cf__grid_plan_free(pl);
        return st;
    }
    uint32_t sizes[CF_MAX_IFDS][2];
    for (int l = 0; l < t->nlevels; l++) level_size(cog, l, &sizes[l][0], &sizes[l][1]);
    int level = o->level;
    if (level == CF_LEVEL_AUTO)
        level = cf__warp_pick_level(pl->w, 0, 0, grid->width, grid->height,
                                    (const uint32_t(*)[2])sizes, t->nlevels);
    pl->level = level;

    /* Nodata: the file's unless overridden; the fill follows it. */
    cf__warp_src *proto = &pl->proto;
    proto->dtype = cog->dtype;
    proto->nbands = nb;
    if (o->src_nodata_set < 0) proto->has_nodata = t->has_nodata, proto->nodata = t->nodata;
    else if (o->src_nodata_set > 0) proto->has_nodata = 1, proto->nodata = o->src_nodata;
    cf__warp_dst *out = &pl->out;
    out->band_stride = (size_t)grid->width * grid->height;
    if (o->dst_nodata_set < 0) out->has_nodata = proto->has_nodata, out->nodata = proto->nodata;
    else if (o->dst_nodata_set > 0) out->has_nodata = 1, out->nodata = o->dst_nodata;
    pl->fill = out->has_nodata ? out->nodata : 0;

    cf__warp_req rq = {0};
    rq.rs = o->resampling;
    rq.level = level;
    rq.lw = sizes[level][0];
    rq.lh = sizes[level][1];
    rq.w0 = sizes[0][0];
    rq.h0 = sizes[0][1];
    rq.tw = grid->width;
    rq.th = grid->height;
    /* GDAL's chunks, with its cost model and its 64 MiB limit. */
    size_t bps = cf_dtype_size(cog->dtype);
    cf__warp_cost cost;
    cost.src_bits = 8.0 * bps * nb + (proto->has_nodata ? nb : 0) +
                    (t->mask_of_level[level] >= 0 ? 1 : 0);
    cost.dst_bits = 8.0 * bps * nb + (out->has_nodata ? nb : 0);
    cost.memory = 64.0 * 1024 * 1024;
    st = cf__warp_chunks(pl->w, &rq, &cost, &pl->chunks, &pl->n, err);
    if (st) cf__grid_plan_free(pl);
    return st;
}

/* rows x w samples of `sz` bytes each, copied into rows of w + 2 r with
 * the last r columns before them and the first r after them: a whole turn
 * of longitudes read on across the antimeridian. */
static void wrap_rows(const uint8_t *in, uint8_t *out, size_t rows, size_t w, size_t r,
                      size_t sz) {
    for (size_t y = 0; y < rows; y++) {
        const uint8_t *a = in + y * w * sz;
        uint8_t *b = out + y * (w + 2 * r) * sz;
        memcpy(b, a + (w - r) * sz, r * sz);
        memcpy(b + r * sz, a, w * sz);
        memcpy(b + (r + w) * sz, a, r * sz);
    }
}

/* Chunk k resampled from `src` (its data and validity set) into `part`
 * (its data the whole target grid's), through its window, widened across
 * the antimeridian where the window is a whole turn. */
static cf_status resample_chunk(const cf_cog *cog, const cf__grid_plan *pl, size_t k,
                                cf__warp_src src, cf__warp_dst part, size_t row_stride,
                                cf_error *err) {
    const cf__warp_req *c = &pl->chunks[k].rq;
    cf__warp_win win = pl->chunks[k].win;
    size_t bps = cf_dtype_size(src.dtype);
    part.data = (uint8_t *)part.data + ((size_t)c->ty * row_stride + (size_t)c->tx) * bps;
    part.row_stride = row_stride;
    uint8_t *ext = NULL, *extv = NULL;
    if (win.wrap) {
        /* Bilinear and cubic across the antimeridian: the window (a whole
         * turn) with its other end's columns on each side, so that taps
         * on either side of 180 degrees are read (gdalwarp leaves them
         * out, or widens the kernel by the whole width).  One copy of the
         * window: bounded as the window is. */
        size_t r = win.wrap, w = win.w, rows = (size_t)win.h * (size_t)src.nbands;
        ext = cf__malloc(rows * (w + 2 * r) * bps);
        extv = src.valid ? cf__malloc((size_t)win.h * (w + 2 * r)) : NULL;
        if (!ext || (src.valid && !extv)) {
            free(ext);
            free(extv);
            return cf__err(err, CF_E_NOMEM, "%s: out of memory (source window across the "
                           "antimeridian)", cog->name);
        }
        wrap_rows(src.data, ext, rows, w, r, bps);
        if (src.valid) wrap_rows(src.valid, extv, win.h, w, r, 1);
        src.data = ext;
        src.valid = extv;
        win.x -= (int64_t)r;
        win.w += 2 * (uint32_t)r;
        win.wrap = 0;
    }
    cf__warp_req rq = *c;
    rq.pos = pl->pos;
    cf_status st = cf__warp_resample(pl->w, &rq, &win, &src, &part, err);
    free(ext);
    free(extv);
    if (st) cf__err_prefix(err, st, "%s", cog->name);
    return st;
}

cf_status cf__grid_resample(const cf_cog *cog, const cf__grid_plan *pl, size_t k,
                            const void *src_data, const uint8_t *valid, void *dst,
                            size_t row_stride, cf_error *err) {
    cf__warp_src src = pl->proto;
    src.data = src_data;
    src.valid = valid;
    cf__warp_dst part = pl->out;
    part.data = dst;
    return resample_chunk(cog, pl, k, src, part, row_stride, err);
}

cf_status cf__grid_resample_valid(const cf_cog *cog, const cf__grid_plan *pl, size_t k,
                                  const void *src_data, const uint8_t *mask, uint8_t *dst,
                                  size_t row_stride, cf_error *err) {
    const cf__warp_win *win = &pl->chunks[k].win;
    if (win->empty) return CF_OK;
    size_t npx = (size_t)win->w * win->h;
    /* The source's validity for every band at once, as one byte band of
     * 1s where valid: warped with it as its own mask by the same kernel,
     * the band is 1 exactly where the kernel finds a valid source pixel
     * (a weighted mean of 1s is 1) and keeps the caller's 0 elsewhere. */
    uint8_t *sv = cf__malloc(npx ? npx : 1);
    if (!sv) return cf__err(err, CF_E_NOMEM, "%s: out of memory (validity)", cog->name);
    if (mask) memcpy(sv, mask, npx);
    else memset(sv, 1, npx);
    for (size_t i = 0; mask && i < npx; i++) sv[i] = sv[i] != 0;
    if (pl->proto.has_nodata)
        cf__valid_nodata(sv, src_data, pl->proto.dtype, (uint32_t)pl->proto.nbands, npx,
                         pl->proto.nodata);
    cf__warp_src src = {.data = sv, .dtype = CF_DT_U8, .nbands = 1, .valid = sv};
    cf__warp_dst part = {.data = dst, .band_stride = pl->out.band_stride};
    cf_status st = resample_chunk(cog, pl, k, src, part, row_stride, err);
    free(sv);
    return st;
}

cf_status cf_cog_grid_level(cf_cog *cog, const cf_grid *grid, const cf_warp_options *opt,
                            int *level, cf_error *err) {
    if (!cog || !grid || !level) return cf__err(err, CF_E_ARG, "cf_cog_grid_level: NULL argument");
    cf_warp_options defaults;
    cf_warp_options_init(&defaults);
    const cf_warp_options *o = opt ? opt : &defaults;
    CF__TRY(check_args(cog, grid, o, SIZE_MAX, 1, err));
    cf__grid_plan pl;
    CF__TRY(cf__grid_plan_new(cog, grid, o, 1, 0, NULL, &pl, err));
    *level = pl.level;
    cf__grid_plan_free(&pl);
    return CF_OK;
}

cf_status cf_cog_read_grid(cf_cog *cog, const cf_grid *grid, const int *bands, int nbands,
                           cf_warp_options *opt, void *dst, size_t dst_size, cf_error *err) {
    if (!cog || !grid || !dst) return cf__err(err, CF_E_ARG, "cf_cog_read_grid: NULL argument");
    cf_warp_options defaults;
    cf_warp_options_init(&defaults);
    cf_warp_options *o = opt ? opt : &defaults;
    const cf__tiff *t = cog->tiff;
    const cf__tiff_ifd *ifd0 = &t->ifds[t->levels[0]];
    int nb = bands ? nbands : ifd0->samples;
    if (nb <= 0 || nb > CF_MAX_BANDS)
        return cf__err(err, CF_E_ARG, "%s: %d bands requested", cog->name, nb);
    for (int k = 0; bands && k < nb; k++)
        if (bands[k] < 1 || bands[k] > ifd0->samples)
            return cf__err(err, CF_E_ARG, "%s: band %d does not exist (file has %u)", cog->name,
                           bands[k], ifd0->samples);
    cf_status st = check_args(cog, grid, o, dst_size, nb, err);
    CF__TRY(st);
    cf__grid_plan pl;
    st = cf__grid_plan_new(cog, grid, o, nb, 0, NULL, &pl, err);
    CF__TRY(st);
    o->level_used = pl.level;
    cf__grid_fill(dst, (size_t)nb * grid->width * grid->height, cog->dtype, pl.fill);
    for (size_t k = 0; !st && k < pl.n; k++)
        st = read_chunk(cog, &pl, k, bands, nb, dst, grid->width, err);
    cf__grid_plan_free(&pl);
    return st;
}
