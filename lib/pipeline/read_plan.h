/*
 * read_plan.h - the one read planner: which chunks (tiles or strips) a
 * window of one IFD needs, which of them hold no data (sparse, or outside
 * the image: the window is pre-filled there), and where each chunk's
 * decoded part goes in the window.  cf_cog_read, cf_cog_read_mask,
 * cf_cog_read_many (through cf__cog_window_chunks), the Loader's per-sample
 * read and cf_cog_read_grid's source window (through cf_cog_read) all
 * plan here; the paste (cf__cog_paste) places a chunk with
 * cf__plan_chunk_rect.
 *
 * A plan is a cursor and allocates nothing: the Loader keeps dozens per
 * sample on its readers' stacks.
 */
#ifndef CF_READ_PLAN_H
#define CF_READ_PLAN_H

#include "cog_internal.h"

/* A rectangle of pixels of an IFD: [x0, x1) x [y0, y1). */
typedef struct cf__rect {
    int64_t x0, y0, x1, y1;
} cf__rect;

typedef struct cf__plan {
    const cf_cog *cog;
    int ifdi;                  /* the IFD read: a level, or a mask */
    int64_t x, y;              /* the window, in the IFD's pixels */
    uint32_t w, h;
    const int *planes;         /* band planes fetched (planar 2), distinct */
    uint32_t nplanes;          /* (pixel interleave: the one plane 0) */
    /* The chunk grid under the window clipped to the image: columns
     * cx0.., rows cy0.., `count` chunks (planes x rows x columns, in that
     * order); next is the cursor. */
    uint32_t cx0, cy0, cols, rows;
    uint64_t count, next;
    int prefill;               /* 1: fill the window before pasting */
} cf__plan;

/* The distinct 0-based bands of bands0[0..nb) in order, into planes: the
 * band planes a planar (configuration 2) IFD is read from; returns their
 * number.  planes must hold nb entries. */
uint32_t cf__plan_planes(const int *bands0, int nb, int *planes);

/* Plan the window (x, y, w, h) of IFD ifdi for the band planes
 * planes[0..nplanes) (ignored for pixel-interleaved IFDs; the array must
 * outlive the plan).  Sets prefill when part of the window lies outside
 * the image or on a sparse chunk (byte count 0): the caller fills the
 * window with the fill value before any paste. */
void cf__plan_init(cf__plan *p, const cf_cog *cog, int ifdi, int64_t x, int64_t y,
                   uint32_t w, uint32_t h, const int *planes, uint32_t nplanes);

/* The next chunk holding data in *c (*has 1), validated against the
 * file's size; *has 0 when none is left.  Sparse chunks are passed over.
 * The cursor stays on it until cf__plan_take (a reader that cannot take
 * it into this batch of fetches peeks it again for the next one). */
cf_status cf__plan_peek(cf__plan *p, cf__chunk *c, int *has, cf_error *err);
static inline void cf__plan_take(cf__plan *p) { p->next++; }

/* Where chunk c of IFD ifd meets the window (x, y, w, h), in the IFD's
 * pixels (the chunk's own pixels start at cx * chunk_w, cy * chunk_h; the
 * window's at x, y).  0 when they do not meet. */
int cf__plan_chunk_rect(const cf__tiff_ifd *ifd, const cf__chunk *c, int64_t x, int64_t y,
                        uint32_t w, uint32_t h, cf__rect *r);

#endif
