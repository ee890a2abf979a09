/*
 * warp_internal.h - the cf__warp struct and the coordinate helpers the
 * resampler (resample.c, resample_sep.c) shares with the planner (warp.c).
 */
#ifndef CF_WARP_INTERNAL_H
#define CF_WARP_INTERNAL_H

#include "geo.h"

/* One block of the reprojection lattice: n x n nodes `step` pixels apart,
 * from node `off` of the map's arrays. */
typedef struct cf__wblock {
    uint32_t step, n;
    size_t off;
    int exact;                 /* not within the error even at step 1 (a
                                  pole inside): every point through xf */
} cf__wblock;

struct cf__warp {
    int affine;                /* same CRS: no lattice */
    int exact;                 /* every pixel through xf (max_err 0) */
    int rows_approx;           /* affine rows interpolated as GDAL's
                                  approximate transformer does */
    cf__xform *xf;              /* borrowed (exact maps and exact blocks) */
    int wrap;                  /* geographic source: longitudes brought
                                  into [wrap_c - 180, wrap_c + 180] */
    double wrap_c;             /* centre of the source's longitudes */
    int npoles;                /* poles inside the target's CRS domain: */
    double pole_px[2], pole_py[2], pole_lat[2]; /* target pixel, latitude */
    double max_err;            /* the lattice's error bound */
    double src_gt[6], src_inv[6], dst_gt[6];
    uint32_t sw, sh;           /* source level 0 */
    uint32_t dw, dh;           /* target grid */
    uint32_t nbx, nby;
    cf__wblock *blocks;         /* nby x nbx */
    double *nx, *ny;           /* lattice nodes: source CRS coordinates,
                                  HUGE_VAL where PROJ failed */
    size_t nnodes, capnodes;
};

/* A longitude of the source CRS brought into the source's range, as
 * GDAL's transformer does with the source's centre longitude. */
double cf__warp_wrap(const cf__warp *w, double lon);
/* Inverse geotransform of the source level of size lw x lh. */
void cf__warp_level_inverse(const cf__warp *w, uint32_t lw, uint32_t lh, double inv[6]);
/* Source positions (pixels of the level whose inverse is inv) of target
 * positions (px[i], py[i]). */
void cf__warp_points(const cf__warp *w, const double inv[6], size_t n, const double *px,
                     const double *py, double *sx, double *sy, uint8_t *ok);
/* The same for the n positions (px0 + i, py) of one target row, computed
 * as GDAL's warper computes a row (one call of its transformer). */
void cf__warp_row(const cf__warp *w, const double inv[6], double px0, double py, uint32_t n,
                  double *sx, double *sy, uint8_t *ok);
/* The n source positions (and their ok flags) of request rq through w
 * (corners: average and mode's two per pixel) from p, when p holds those
 * of the same map and window: 1, copied; else 0. */
int cf__warp_pos_get(const cf__warp_pos *p, const cf__warp *w, const double inv[6],
                     const cf__warp_req *rq, int corners, size_t n, double *px, double *py,
                     uint8_t *ok);
/* Keep them in p for the next request (p as it was when memory runs out). */
void cf__warp_pos_put(cf__warp_pos *p, const cf__warp *w, const double inv[6],
                      const cf__warp_req *rq, int corners, size_t n, const double *px,
                      const double *py, const uint8_t *ok);
/* 1 when the target grid is the source level's shifted by whole pixels:
 * GDAL then copies pixels (nearest) whatever the kernel. */
int cf__warp_is_translation(const cf__warp *w, uint32_t lw, uint32_t lh);
/* GDAL's filter radius of a kernel (0 nearest/average/mode, 1 bilinear,
 * 2 cubic). */
int cf__warp_radius(cf_resampling rs);

#endif
