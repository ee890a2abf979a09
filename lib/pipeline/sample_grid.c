/*
 * sample_grid.c - every input of a loader sample placed on the sample's
 * target grid (sample_grid.h): the target of each sample file, the
 * checks that no input is ever placed silently (another CRS is reprojected
 * or refused naming both; an input without georeferencing is refused
 * unless the caller opts in and its size matches), and the per-sample
 * plan, which is read_grid.c's (cog.read(grid=...)) on the patch grid.
 */
#include "sample_grid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct cf__sg {
    size_t nfiles, ninputs;
    cf_grid *grids;            /* per sample file */
    cf_crs **crs;              /* per file: the reference its grid holds */
    uint8_t *georef;           /* per file: the target has a geotransform */
    uint8_t *own;              /* per file: the target is the image's own
                                  grid at the loader's level */
    cf__sg_input *in;          /* per input */
    int any_warp;
    /* The transformations, one per pair of CRS objects (files of one
     * archive share theirs: geokeys.c): inputs of one pair share one, so
     * that their positions, kept by a reader, are known to be the same
     * (cf__warp_pos). */
    struct sg_xf {
        const cf_crs *from, *to;
        cf__xform *xf;
    } *xfs;
    size_t nxfs, capxfs;
};

void cf__sg_free(cf__sg *sg) {
    if (!sg) return;
    for (size_t i = 0; i < sg->nxfs; i++) cf__xform_free(sg->xfs[i].xf);
    free(sg->xfs);
    for (size_t f = 0; sg->crs && f < sg->nfiles; f++) cf_crs_free(sg->crs[f]);
    free(sg->in);
    free(sg->crs);
    free(sg->grids);
    free(sg->georef);
    free(sg->own);
    free(sg);
}

const cf__sg_input *cf__sg_input_at(const cf__sg *sg, size_t slot) { return &sg->in[slot]; }

const cf_grid *cf__sg_grid(const cf__sg *sg, size_t f) {
    return sg->georef[f] ? &sg->grids[f] : NULL;
}

int cf__sg_any_warp(const cf__sg *sg) { return sg->any_warp; }

static void crs_text(const cf_crs *c, char *out, size_t n) {
    if (!c) snprintf(out, n, "no CRS");
    else cf__crs_label(c, out, n);
}

/* ------------------------------------------------------------ targets */

void cf__sg_outline(const cf_grid *g, int S, double *x, double *y) {
    const double *t = g->transform;
    for (int i = 0; i < S; i++) {
        double r = (double)i / (S - 1);
        double px[4] = {r * g->width, r * g->width, 0, (double)g->width};
        double py[4] = {0, (double)g->height, r * g->height, r * g->height};
        for (int k = 0; k < 4; k++) {
            x[4 * i + k] = t[0] + px[k] * t[1] + py[k] * t[2];
            y[4 * i + k] = t[3] + px[k] * t[4] + py[k] * t[5];
        }
    }
}

/* (sample_grid.h) 21 points along each edge of the image, as GDAL
 * samples a footprint. */
cf_status cf__sg_footprint(const cf_cog *img, const cf_crs *crs, double b[4], int *all,
                           cf_error *err) {
    cf_grid g;
    cf_status st = cf_cog_grid(img, 0, &g, err);
    CF__TRY(st);
    if (!img->crs)
        return cf__err(err, CF_E_STATE,
                       "loader: image %s has no CRS%s%s: it cannot be put on a grid in "
                       "another CRS",
                       img->name, img->crs_note[0] ? " (" : "", img->crs_note[0] ? ")" : "");
    *all = 1;
    if (cf_crs_equivalent(img->crs, crs)) {
        cf_grid_bounds(&g, b);
        return CF_OK;
    }
    cf__xform *xf;
    st = cf__xform_new(img->crs, crs, &xf, err);
    if (st) return cf__err_prefix(err, st, "loader: image %s", img->name);
    enum { S = 21 };
    double x[4 * S], y[4 * S];
    uint8_t ok[4 * S];
    cf__sg_outline(&g, S, x, y);
    cf__xform_run(xf, 4 * S, x, y, ok);
    cf__xform_free(xf);
    b[0] = b[1] = INFINITY;
    b[2] = b[3] = -INFINITY;
    for (int i = 0; i < 4 * S; i++) {
        if (!ok[i]) {
            *all = 0;
            continue;
        }
        b[0] = fmin(b[0], x[i]);
        b[1] = fmin(b[1], y[i]);
        b[2] = fmax(b[2], x[i]);
        b[3] = fmax(b[3], y[i]);
    }
    if (!(b[2] > b[0]) || !(b[3] > b[1])) {
        char a[96], c[96];
        crs_text(img->crs, a, sizeof a);
        crs_text(crs, c, sizeof c);
        return cf__err(err, CF_E_UNSUPPORTED, "loader: image %s (%s) has no footprint in %s",
                       img->name, a, c);
    }
    return CF_OK;
}

/* The image's footprint in `crs` at (xres, yres), snapped outwards to
 * multiples of the resolution (gdalwarp -t_srs -tr -tap). */
static cf_status footprint_grid(const cf_cog *img, const cf_crs *crs, const double res[2],
                                cf_grid *out, cf_error *err) {
    double b[4];
    int all;
    cf_status st = cf__sg_footprint(img, crs, b, &all, err);
    CF__TRY(st);
    b[0] = floor(b[0] / res[0]) * res[0];
    b[1] = floor(b[1] / res[1]) * res[1];
    b[2] = ceil(b[2] / res[0]) * res[0];
    b[3] = ceil(b[3] / res[1]) * res[1];
    st = cf_grid_from_bounds(crs, b, res[0], res[1], out, err);
    if (st) cf__err_prefix(err, st, "loader: target grid of image %s", img->name);
    return st;
}

/* File f's target; *georef 0 when it is the pixel space of an image
 * without a geotransform. */
static cf_status target_of(const cf_loader_options *o, const cf_cog *img, cf_grid *g,
                           uint8_t *georef, cf_error *err) {
    *georef = 1;
    if (o->grid) {
        *g = *o->grid;
        return CF_OK;
    }
    if (o->grid_crs) return footprint_grid(img, o->grid_crs, o->grid_res, g, err);
    cf_level_info li;
    cf_status st = cf_cog_level_info(img, o->level, &li, err);
    if (st) return cf__err_prefix(err, st, "loader");
    if (!cf__cog_has_geotransform(img)) {
        /* Pixel space only: inputs can be matched by size, nothing else. */
        memset(g, 0, sizeof *g);
        g->transform[1] = 1;
        g->transform[5] = 1;
        g->width = li.width;
        g->height = li.height;
        *georef = 0;
        return CF_OK;
    }
    return cf_cog_grid(img, o->level, g, err);
}

/* --------------------------------------------------------- placement */

static int close_to(double a, double b) {
    return fabs(a - b) <= 1e-9 * fmax(fmax(fabs(a), fabs(b)), 1e-300);
}

/* The input's level-L grid is the target's shifted by whole pixels. */
static int translation(const cf_grid *in, const cf_grid *t, int64_t *dx, int64_t *dy) {
    const double *a = in->transform, *b = t->transform;
    if (!close_to(a[1], b[1]) || !close_to(a[5], b[5])) return 0;
    if (fabs(a[2] - b[2]) > 1e-12 * fabs(b[1]) || fabs(a[4] - b[4]) > 1e-12 * fabs(b[5]))
        return 0;
    double inv[6];
    if (!cf__gt_invert(a, inv)) return 0;
    double x = inv[0] + b[0] * inv[1] + b[3] * inv[2];
    double y = inv[3] + b[0] * inv[4] + b[3] * inv[5];
    if (fabs(x - round(x)) > 1e-6 || fabs(y - round(y)) > 1e-6) return 0;
    if (fabs(x) > 1e15 || fabs(y) > 1e15) return 0;
    *dx = (int64_t)round(x);
    *dy = (int64_t)round(y);
    return 1;
}

/* Pixel for pixel: only when the input's size at the level is the
 * target's. */
static cf_status pixel_aligned(const cf_loader_options *o, const cf_cog *c, const cf_grid *t,
                               const char *what, const cf_cog *ref, cf__sg_input *in,
                               cf_error *err) {
    cf_level_info li;
    cf_status st = cf_cog_level_info(c, o->level, &li, err);
    if (st) {
        cf__err_prefix(err, st, "loader");
        if (o->level > 0) cf__err_hint(err, st, "a %s needs the overviews its image has", what);
        return st;
    }
    if (li.width != t->width || li.height != t->height) {
        cf__err(err, CF_E_ARG,
                "loader: %s %s is not aligned with image %s: size %ux%u vs %ux%u, and "
                "without georeferencing only the size can place it",
                what, c->name, ref->name, li.width, li.height, t->width, t->height);
        if (o->level)
            cf__err_hint(err, CF_E_ARG,
                         "at level %d (overviews made by different tools can round sizes "
                         "differently)", o->level);
        return CF_E_ARG;
    }
    in->how = CF__SG_DIRECT;
    in->dx = in->dy = 0;
    return CF_OK;
}

cf_status cf__sg_xform(cf__sg *sg, const cf_crs *from, const cf_crs *to, cf__xform **out,
                       cf_error *err) {
    for (size_t i = 0; i < sg->nxfs; i++)
        if (sg->xfs[i].from == from && sg->xfs[i].to == to) {
            *out = sg->xfs[i].xf;
            return CF_OK;
        }
    if (!cf__grow((void **)&sg->xfs, &sg->capxfs, sg->nxfs + 1, sizeof *sg->xfs, 8))
        return cf__err(err, CF_E_NOMEM, "loader: transformations");
    CF__TRY(cf__xform_new(from, to, out, err));
    sg->xfs[sg->nxfs++] = (struct sg_xf){from, to, *out};
    return CF_OK;
}

static cf_status place(cf__sg *sg, const cf_loader_options *o, const cf_cog *c,
                       const cf_grid *t, int georef, const char *what, const cf_cog *ref,
                       cf__sg_input *in, cf_error *err) {
    const char *hint = "ungeoreferenced=1 (Python: ungeoreferenced=True) reads an input of "
                       "the target's size pixel for pixel";
    if (!georef) {
        if (!o->ungeoreferenced) {
            cf__err(err, CF_E_ARG,
                    "loader: %s %s is not aligned with image %s: the image has no "
                    "georeferencing (no geotransform), so nothing says where the %s lies",
                    what, c->name, ref->name, what);
            return cf__err_hint(err, CF_E_ARG, "%s", hint);
        }
        return pixel_aligned(o, c, t, what, ref, in, err);
    }
    const char *missing = !cf__cog_has_geotransform(c) ? "no geotransform"
                          : (t->crs && !c->crs)      ? "no CRS"
                          : (!t->crs && c->crs)      ? "a CRS the target grid lacks"
                                                     : NULL;
    if (missing) {
        if (!o->ungeoreferenced) {
            char tc[96];
            crs_text(t->crs, tc, sizeof tc);
            cf__err(err, CF_E_ARG,
                    "loader: %s %s is not aligned with image %s: it has %s%s%s%s (the target "
                    "grid: %s), so it cannot be placed on the grid",
                    what, c->name, ref->name, missing, c->crs_note[0] ? " (" : "",
                    c->crs_note, c->crs_note[0] ? ")" : "", tc);
            return cf__err_hint(err, CF_E_ARG, "%s", hint);
        }
        return pixel_aligned(o, c, t, what, ref, in, err);
    }
    if (!t->crs || cf_crs_equivalent(t->crs, c->crs)) {
        cf_level_info li;
        cf_grid g;
        cf_error e2;
        if (cf_cog_level_info(c, o->level, &li, &e2) == CF_OK &&
            cf_cog_grid(c, o->level, &g, &e2) == CF_OK && translation(&g, t, &in->dx, &in->dy)) {
            in->how = CF__SG_DIRECT;
            return CF_OK;
        }
        in->how = CF__SG_WARP;
        return CF_OK;
    }
    if (!o->reproject) {
        char a[96], b[96];
        crs_text(c->crs, a, sizeof a);
        crs_text(t->crs, b, sizeof b);
        cf__err(err, CF_E_ARG,
                "loader: %s %s is not aligned with image %s: it is in %s, the target grid in "
                "%s, and reprojection is off",
                what, c->name, ref->name, a, b);
        return cf__err_hint(err, CF_E_ARG, "reproject=1 (Python: reproject=True) reads it "
                                           "reprojected onto the grid");
    }
    cf_status st = cf__sg_xform(sg, t->crs, c->crs, &in->xf, err);
    if (st) return cf__err_prefix(err, st, "loader: %s %s", what, c->name);
    in->how = CF__SG_WARP;
    return CF_OK;
}

size_t cf__sg_layer_files(const cf_loader_options *o) {
    if (!o->layers_per_step) return (size_t)o->nlayers;
    /* the output steps: one per step_scenes of a mosaic, else per scene */
    size_t K = !o->mosaic ? 1 : o->step_scenes ? o->step_scenes : (size_t)o->time_steps;
    return (size_t)o->nlayers * ((size_t)o->time_steps / K);
}

cf_status cf__sg_new(const cf_loader_options *o, cf_cog *const *img, cf_cog *const *msk,
                     cf_cog *const *lay, cf_cog *const *scm, cf__sg **out, cf_error *err) {
    *out = NULL;
    if (o->grid && o->grid_crs)
        return cf__err(err, CF_E_ARG, "loader: give grid or grid_crs, not both");
    if (o->grid) {
        const cf_grid *g = o->grid;
        if (!cf__grid_valid(g))
            return cf__err(err, CF_E_ARG, "loader: target grid of %ux%u pixels invalid (its "
                           "transform must be finite and invertible)", g->width, g->height);
    }
    if (o->grid_crs && !(o->grid_res[0] > 0 && o->grid_res[1] > 0 && isfinite(o->grid_res[0]) &&
                         isfinite(o->grid_res[1])))
        return cf__err(err, CF_E_ARG, "loader: grid resolution (%g, %g) must be > 0",
                       o->grid_res[0], o->grid_res[1]);
    /* error_threshold, resampling and mask_resampling: checked with the
     * other options (loader_options.h). */
    for (int l = 0; o->layer_resampling && l < o->nlayers; l++)
        if ((unsigned)o->layer_resampling[l] >= CF_RS_COUNT)
            return cf__err(err, CF_E_ARG, "loader: unknown resampling of layer %d", l);
    const size_t F = o->nfiles, T = (size_t)o->time_steps, L = cf__sg_layer_files(o);
    cf__sg *sg = cf__calloc(1, sizeof *sg);
    if (!sg) return cf__err(err, CF_E_NOMEM, "loader: grids");
    sg->nfiles = F;
    sg->ninputs = F * T + (msk ? F : 0) + F * L + (scm ? F * T : 0);
    sg->grids = cf__calloc(F, sizeof *sg->grids);
    sg->crs = cf__calloc(F, sizeof *sg->crs);
    sg->georef = cf__calloc(F, 1);
    sg->own = cf__calloc(F, 1);
    sg->in = cf__calloc(sg->ninputs, sizeof *sg->in);
    cf_status st = CF_OK;
    if (!sg->grids || !sg->crs || !sg->georef || !sg->own || !sg->in)
        st = cf__err(err, CF_E_NOMEM, "loader: grids");
    for (size_t f = 0; st == CF_OK && f < F; f++) {
        const cf_cog *ref = img[f * T];
        cf_grid *g = &sg->grids[f];
        st = target_of(o, ref, g, &sg->georef[f], err);
        if (st) break;
        /* The grid's CRS is held here: the caller's may go. */
        sg->crs[f] = g->crs ? cf_crs_ref(g->crs) : NULL;
        g->crs = sg->crs[f];
        const int own = !o->grid && !o->grid_crs;
        for (size_t t = 0; st == CF_OK && t < T; t++) {
            size_t slot = f * T + t;
            cf__sg_input *in = &sg->in[slot];
            in->rs = o->resampling;
            if (t == 0 && own) continue; /* the reference itself: DIRECT 0, 0 */
            st = place(sg, o, img[slot], g, sg->georef[f], t ? "scene" : "image", ref, in, err);
        }
        if (st == CF_OK && msk) {
            cf__sg_input *in = &sg->in[F * T + f];
            in->rs = o->mask_resampling;
            st = place(sg, o, msk[f], g, sg->georef[f], "mask", ref, in, err);
        }
        for (size_t l = 0; st == CF_OK && l < L; l++) {
            cf__sg_input *in = &sg->in[F * T + (msk ? F : 0) + f * L + l];
            const size_t kind = l % (size_t)o->nlayers; /* of the steps' own */
            in->rs = o->layer_resampling ? o->layer_resampling[kind] : o->resampling;
            st = place(sg, o, lay[f * L + l], g, sg->georef[f], "layer", ref, in, err);
        }
        /* Classes: nearest, as gdalwarp reads them. */
        for (size_t t = 0; st == CF_OK && scm && t < T; t++) {
            cf__sg_input *in = &sg->in[F * T + (msk ? F : 0) + F * L + f * T + t];
            in->rs = CF_RS_NEAREST;
            st = place(sg, o, scm[f * T + t], g, sg->georef[f], "scene mask", ref, in, err);
        }
        const cf__sg_input *i0 = &sg->in[f * T];
        cf_level_info li;
        cf_error e2;
        /* A file known from its description (tiles not known yet) is
         * sampled as any target grid: in patch-sized cells. */
        sg->own[f] = own || (i0->how == CF__SG_DIRECT && !i0->dx && !i0->dy &&
                             !cf__cog_declared(ref) &&
                             cf_cog_level_info(ref, o->level, &li, &e2) == CF_OK &&
                             li.width == g->width && li.height == g->height);
    }
    for (size_t i = 0; st == CF_OK && i < sg->ninputs; i++)
        sg->any_warp |= sg->in[i].how == CF__SG_WARP;
    if (st) {
        cf__sg_free(sg);
        return st;
    }
    *out = sg;
    return CF_OK;
}

/* -------------------------------------------------------------- reads */

int cf__sg_sampler_dims(const cf__sg *sg, size_t f, uint32_t patch, uint32_t *w, uint32_t *h,
                        uint32_t *tile_w, uint32_t *tile_h) {
    if (sg->own[f]) return 0;
    *w = sg->grids[f].width;
    *h = sg->grids[f].height;
    *tile_w = *tile_h = patch;
    return 1;
}

cf_status cf__sg_window_grid(const cf__sg *sg, size_t f, int64_t x, int64_t y, uint32_t w,
                             uint32_t h, cf_grid *out, cf_error *err) {
    if (f >= sg->nfiles) return cf__err(err, CF_E_ARG, "loader: file %zu out of range", f);
    if (!sg->georef[f])
        return cf__err(err, CF_E_STATE,
                       "loader: the target of file %zu is an image without georeferencing: "
                       "its patches have no grid", f);
    return cf_grid_window(&sg->grids[f], x, y, w, h, out, err);
}

cf_status cf__sg_plan(const cf__sg *sg, size_t slot, cf_cog *cog, size_t f, int64_t x, int64_t y,
                      uint32_t w, uint32_t h, int nb, const cf_loader_options *o,
                      cf__grid_plan *pl, cf_error *err) {
    const cf__sg_input *in = &sg->in[slot];
    cf_grid patch;
    CF__TRY(cf_grid_window(&sg->grids[f], x, y, w, h, &patch, err));
    cf_warp_options wo;
    cf_warp_options_init(&wo);
    wo.resampling = in->rs;
    wo.error_threshold = o->error_threshold;
    return cf__grid_plan_new(cog, &patch, &wo, nb, 1, in->xf, pl, err);
}

uint64_t cf__sg_typical_bytes(const cf__sg *sg, size_t slot, cf_cog *cog, size_t f, uint32_t patch,
                              int nb, const cf_loader_options *o) {
    const cf_grid *g = &sg->grids[f];
    int64_t x = g->width > patch ? (int64_t)(g->width - patch) / 2 : 0;
    int64_t y = g->height > patch ? (int64_t)(g->height - patch) / 2 : 0;
    uint64_t bps = cf_dtype_size(cog->dtype), sum = 0;
    if (cf__cog_declared(cog)) {
        /* Its overviews are not known yet: the patch's window at the
         * level GDAL's choice would take, which is at most twice as fine
         * as the target (in the same CRS: the pixel areas' ratio; across
         * CRSs, taken as 1), with half again for a rotation between the
         * grids and the kernel.  A sample needing more borrows
         * (loader_build.c). */
        const cf_grid *s = cf__cog_decl_grid(cog);
        double r = 1;
        if (cf_crs_equivalent(s->crs, g->crs)) {
            double at = fabs(g->transform[1] * g->transform[5] - g->transform[2] * g->transform[4]);
            double as = fabs(s->transform[1] * s->transform[5] - s->transform[2] * s->transform[4]);
            r = sqrt(at / as);
            if (!(r < 2)) r = 2;
        }
        double side = 1.5 * patch * r + 8;
        return (uint64_t)(side * side) * (uint64_t)nb * bps;
    }
    cf__grid_plan pl;
    cf_error e;
    if (cf__sg_plan(sg, slot, cog, f, x, y, patch, patch, nb, o, &pl, &e) != CF_OK)
        return (uint64_t)patch * patch * (uint64_t)nb * bps;
    for (size_t k = 0; k < pl.n; k++)
        sum += (uint64_t)pl.chunks[k].win.w * pl.chunks[k].win.h * (uint64_t)nb * bps;
    cf__grid_plan_free(&pl);
    return sum;
}
