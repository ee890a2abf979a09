/*
 * footprint.h - where each scene of a loader's sample files has pixels on
 * the file's target grid, known from the headers alone, so that the
 * sampler can leave out (grid) or draw again (random, blocked) a patch
 * that no scene reaches (cf_loader_options.skip_empty).
 */
#ifndef CF_FOOTPRINT_H
#define CF_FOOTPRINT_H

#include "sample_grid.h"

typedef struct cf__fp cf__fp;

/* The footprints of the scenes img[f * T + t] (placed by sg), in pixels of
 * each file's target grid at `level`: exact for a scene read as it lies,
 * the bounds of its transformed outline (padded by the kernels' reach)
 * for a resampled one, everything where the outline does not transform.
 * Conservative: a patch outside every footprint has no scene pixel.
 * The transformations are sg's (cf__sg_xform). */
cf_status cf__fp_new(cf__sg *sg, cf_cog *const *img, size_t nfiles, size_t T, int level,
                     cf__fp **out, cf_error *err);
void cf__fp_free(cf__fp *fp);

/* Whether scene t of file f may have pixels in window (x, y, w, h) of its
 * target grid. */
int cf__fp_meets(const cf__fp *fp, size_t f, size_t t, int64_t x, int64_t y, uint32_t w,
                 uint32_t h);
/* 1 when some scene of file f may have pixels in the window. */
int cf__fp_covers(const cf__fp *fp, size_t f, int64_t x, int64_t y, uint32_t w, uint32_t h);
/* Which of 8 x 8 pixels spread over the window (bit j * 8 + i: the pixel
 * at ((i + 0.5) w / 8, (j + 0.5) h / 8)) scene t's footprint may reach:
 * a pixel outside the footprints of a mosaic's scenes before another is
 * left without data by them, so that scene is read whatever they hold. */
uint64_t cf__fp_points(const cf__fp *fp, size_t f, size_t t, int64_t x, int64_t y, uint32_t w,
                       uint32_t h);

#endif
