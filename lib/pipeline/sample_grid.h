/*
 * sample_grid.h - where each input of a loader sample lies on the
 * sample's target grid, decided once when the loader is made, and the
 * plan of reading one input onto one sample's patch of that grid.
 *
 * The loader keeps its read path (every file's tiles of a sample fetched
 * together); this module only says, per input, which source windows to
 * read (at which level) and how to turn them into the patch: a plain
 * copy when the input is on the target grid up to a whole-pixel shift,
 * else GDAL's warp of read_grid.c (the same code as cog.read(grid=...)).
 */
#ifndef CF_SAMPLE_GRID_H
#define CF_SAMPLE_GRID_H

#include "cog_internal.h"

typedef enum cf__sg_how {
    CF__SG_DIRECT = 0,         /* the sample's window shifted by (dx, dy),
                                  read at the loader's level */
    CF__SG_WARP = 1            /* resampled / reprojected onto the patch */
} cf__sg_how;

typedef struct cf__sg_input {
    cf__sg_how how;
    int64_t dx, dy;
    cf__xform *xf;              /* WARP across CRSs: target CRS -> input's (the
                                  sg's: inputs of one pair of CRSs share it) */
    cf_resampling rs;
} cf__sg_input;

typedef struct cf__sg cf__sg;

/* The target grid of every sample file and the placement of every input
 * (inputs indexed as the loader's urls: images [f * T + t], then masks
 * [f], then layers [f * L + l], then scene masks [f * T + t]: scm, or
 * NULL), with the checks: an input that cannot be
 * placed is refused, naming the file (and both CRSs when reprojection is
 * off).  `o` is the loader's options (its grid pointers still the
 * caller's: used during this call only). */
/* Layer files per sample file: nlayers, or nlayers per output step with
 * layers_per_step (layers[f * this + s * nlayers + l]). */
size_t cf__sg_layer_files(const cf_loader_options *o);

cf_status cf__sg_new(const cf_loader_options *o, cf_cog *const *img, cf_cog *const *msk,
                     cf_cog *const *lay, cf_cog *const *scm, cf__sg **out, cf_error *err);
void cf__sg_free(cf__sg *sg);

const cf__sg_input *cf__sg_input_at(const cf__sg *sg, size_t slot);
/* File f's target grid; NULL when it has no georeferencing. */
const cf_grid *cf__sg_grid(const cf__sg *sg, size_t f);
/* The bounds (xmin, ymin, xmax, ymax) in `crs` of img's footprint (its
 * outline transformed); *all 0 when some outline points did not
 * transform (a footprint past the CRS's area: the bounds are of the
 * rest).  CF_E_STATE without a CRS, CF_E_UNSUPPORTED without any point. */
cf_status cf__sg_footprint(const cf_cog *img, const cf_crs *crs, double b[4], int *all,
                           cf_error *err);
/* S points along each edge of grid g's outline (S >= 2), in its CRS:
 * point i of the top, bottom, left and right edges at x[4 i .. 4 i + 3]. */
void cf__sg_outline(const cf_grid *g, int S, double *x, double *y);
/* The transformation from CRS `from` to `to`: the one made for this pair
 * of objects (files of one archive share theirs: geokeys.c), or a new one
 * that the sg keeps; inputs of one pair share it, so that their positions,
 * kept by a reader, are known to be the same (cf__warp_pos).  Not
 * thread-safe: while the loader is built. */
cf_status cf__sg_xform(cf__sg *sg, const cf_crs *from, const cf_crs *to, cf__xform **out,
                       cf_error *err);
/* 1 when some input of the loader is warped (it needs source scratch). */
int cf__sg_any_warp(const cf__sg *sg);

/* Sampler dimensions of file f: its target grid's size, and the image's
 * tiles when the target is the image's own grid (else patch-sized cells,
 * so that "blocked" patches tile the target grid).  0, leaving the
 * values alone, when the target is the image at the loader's level. */
int cf__sg_sampler_dims(const cf__sg *sg, size_t f, uint32_t patch, uint32_t *w, uint32_t *h,
                        uint32_t *tile_w, uint32_t *tile_h);

/* The patch of file f's target grid under window (x, y, w, h). */
cf_status cf__sg_window_grid(const cf__sg *sg, size_t f, int64_t x, int64_t y, uint32_t w,
                             uint32_t h, cf_grid *out, cf_error *err);

/* Plan reading input `slot` (file `cog`, nb bands) onto the patch
 * (x, y, w, h) of file f's target grid; the caller reads each chunk's
 * source window (pl->chunks[k].win at pl->chunks[k].rq.level) and calls
 * cf__grid_resample.  Only for CF__SG_WARP inputs. */
cf_status cf__sg_plan(const cf__sg *sg, size_t slot, cf_cog *cog, size_t f, int64_t x, int64_t y,
                      uint32_t w, uint32_t h, int nb, const cf_loader_options *o,
                      cf__grid_plan *pl, cf_error *err);

/* Source bytes of one warped read of input `slot` of file f at a typical
 * place (the target's centre), for sizing the readers' scratch. */
uint64_t cf__sg_typical_bytes(const cf__sg *sg, size_t slot, cf_cog *cog, size_t f, uint32_t patch,
                              int nb, const cf_loader_options *o);

#endif
