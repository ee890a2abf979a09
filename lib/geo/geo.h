/*
 * geo.h - georeferencing: coordinate reference systems (PROJ), CRS-to-CRS
 * transformations, and resampling source pixels onto a target grid.
 *
 * Depends on lib/common and PROJ only: nothing here knows TIFF or I/O.
 * The pipeline hands it a file's raw GeoKeys (cf__geokeys) at open, and at
 * read time a decoded source window plus the target grid.
 *
 * Threads.  A PROJ context (PJ_CONTEXT) is not thread-safe, nor is a PJ
 * object used from two threads at once.  This layer therefore never lets a
 * PJ cross threads unguarded:
 *  - every PROJ call runs with a context borrowed from a small pool for the
 *    duration of the call (geo_internal.h: cf__proj_get / cf__proj_put), so
 *    no two threads ever share a context;
 *  - a cf_crs keeps its PJ behind its own mutex;
 *  - a cf__xform (one CRS-to-CRS operation) owns its PJ and its own context
 *    and serialises calls on a mutex;
 *  - a cf__warp (the coordinate map of one target grid onto one source grid)
 *    calls PROJ only while it is built; afterwards it is immutable and any
 *    number of threads may resample with it at once, without PROJ.
 */
#ifndef CF_GEO_H
#define CF_GEO_H

#include "../common/common.h"

/* ------------------------------------------------------------------ */
/* GeoKeys -> CRS                                                      */
/* ------------------------------------------------------------------ */

/* The georeferencing keys of a GeoTIFF as stored in the file: the
 * GeoKeyDirectory (tag 34735, SHORTs: a 4-entry header, then 4 per key),
 * GeoDoubleParams (34736) and GeoAsciiParams (34737).  Any pointer may be
 * NULL with count 0.  Nothing is trusted: every count and offset is checked
 * against the arrays. */
typedef struct cf__geokeys {
    const uint16_t *dir;
    size_t ndir;
    const double *dbl;
    size_t ndbl;
    const char *ascii;
    size_t nascii;
} cf__geokeys;

/* The CRS the keys describe, built as GDAL builds it (gt_wkt_srs.cpp):
 * an EPSG projected or geographic code (a deprecated code replaced by its
 * successor, the code as written kept: cf_crs_epsg_written), or a
 * user-defined CRS from the projection method and parameter keys, datum,
 * ellipsoid, prime meridian and units; a vertical EPSG code makes it a
 * compound CRS; an ESRI PE string citation is read as WKT.  *out is NULL
 * when the keys describe no CRS (no keys, or one that cannot be built):
 * `note` (may be NULL) then says why ("" when there are no keys).  Bad
 * keys never fail: the status is CF_OK or CF_E_NOMEM.  Results are
 * memoised by the keys' bytes (a bounded cache), so opening thousands of
 * files in the same CRS builds it once.  Thread-safe. */
cf_status cf__crs_from_geokeys(const cf__geokeys *k, cf_crs **out, char *note,
                               size_t notelen);

/* A CRS without an EPSG code as the GeoKeys GDAL writes for it
 * (geokeys_out.c): the key directory, its doubles and its ASCII values,
 * ready for tags 34735, 34736 and 34737.  CF_E_UNSUPPORTED, naming the
 * CRS and the projection method, for what cannot be written that way. */
#define CF__GEOKEYS_MAX 32
typedef struct cf__geokeys_out {
    int epsg;            /* > 0: write this EPSG code instead (the
                            horizontal part of a compound or bound CRS) */
    int geographic;      /* ... of a geographic CRS */
    uint16_t dir[4 + 4 * CF__GEOKEYS_MAX];
    size_t ndir;
    double dbl[CF__GEOKEYS_MAX];
    size_t ndbl;
    char ascii[1024];
    size_t nascii;       /* without the NUL after the last '|' */
} cf__geokeys_out;
cf_status cf__crs_to_geokeys(const cf_crs *crs, cf__geokeys_out *g, cf_error *err);

/* The CRS's horizontal part as a 2D CRS (itself unless compound), for
 * messages: "EPSG:32633" or its name. */
void cf__crs_label(const cf_crs *crs, char *out, size_t outlen);

/* ------------------------------------------------------------------ */
/* Transformations                                                     */
/* ------------------------------------------------------------------ */

/* One coordinate operation from CRS `from` to CRS `to` (their horizontal
 * parts), chosen by PROJ (proj_create_crs_to_crs: the best operation for
 * each point's area of use), in traditional GIS order (x = easting or
 * longitude, y = northing or latitude) as GeoTIFF stores coordinates. */
typedef struct cf__xform cf__xform;

cf_status cf__xform_new(const cf_crs *from, const cf_crs *to, cf__xform **out,
                        cf_error *err);
void cf__xform_free(cf__xform *t);
/* Transform n points in place; ok[i] = 0 where a point failed (its x, y
 * are then HUGE_VAL).  Thread-safe: calls are serialised on the object's
 * lock (make one per thread for heavy concurrent use). */
void cf__xform_run(cf__xform *t, size_t n, double *x, double *y, uint8_t *ok);

/* ------------------------------------------------------------------ */
/* Affine transforms (GDAL order)                                      */
/* ------------------------------------------------------------------ */

/* Inverse of a geotransform; 0 when it is singular. */
int cf__gt_invert(const double gt[6], double inv[6]);
/* 1 when g can be read onto: 1 .. CF_MAX_DIMENSION pixels each way, its
 * transform finite with a non-zero determinant. */
int cf__grid_valid(const cf_grid *g);

/* ------------------------------------------------------------------ */
/* Warping: a target grid read from a source grid                      */
/* ------------------------------------------------------------------ */

/* Where each pixel of a target grid lies in a source grid: the map from
 * target pixel coordinates to level-0 source pixel coordinates.  Same CRS
 * (cf_crs_equivalent): the exact affine map.  Another CRS: PROJ transforms
 * the pixel centres of a lattice, refined block by block until bilinear
 * interpolation between its nodes is within `max_err` source pixels (L1,
 * at the lattice's midpoints, as GDAL's approximate transformer measures
 * it); max_err 0 transforms every pixel centre.  Built once (PROJ only
 * here), then immutable: any number of threads may plan and resample with
 * one map at once. */
typedef struct cf__warp cf__warp;

/* `src` is the source's level-0 grid, `dst` the whole target grid (a
 * loader keeps one map per input and sample, and resamples windows of
 * it).  The CRSs must both be set; `xf` transforms dst CRS -> src CRS and
 * may be NULL when they are equivalent.  The map borrows xf: it must
 * outlive the map, because exact maps (max_err 0) and the blocks next to a
 * pole that transform every point do so when they are planned and
 * resampled (cf__xform_run serialises the threads that share it).
 * CF_E_LIMIT when the lattice would exceed 64 Mi nodes. */
cf_status cf__warp_new(const cf_grid *src, const cf_grid *dst, cf__xform *xf,
                       double max_err, cf__warp **out, cf_error *err);
void cf__warp_free(cf__warp *w);
/* 1 when the map is one affine transform (same CRS). */
int cf__warp_is_affine(const cf__warp *w);

/* The source positions of a resampling across CRSs, kept for the next
 * request of the same map and window (warp_pos.c): a loader's dates of
 * one place share their grid, so a sample's scenes of one tile need the
 * positions once, not once per date.  One thread's. */
typedef struct cf__warp_pos cf__warp_pos;
cf__warp_pos *cf__warp_pos_new(void);
void cf__warp_pos_free(cf__warp_pos *p);

/* A window of the target grid and the source level it is resampled
 * from. */
typedef struct cf__warp_req {
    int64_t tx, ty;            /* window origin in the target grid */
    uint32_t tw, th;
    cf_resampling rs;
    int level;                 /* source level (0: full resolution) */
    uint32_t lw, lh;           /* that level's size (pixels) */
    uint32_t w0, h0;           /* level 0's size */
    int general;               /* tests: skip the separable fast path */
    cf__warp_pos *pos;         /* positions kept from and for the caller's
                                  other requests (NULL: none) */
} cf__warp_req;

/* GDAL's overview choice for a target window (gdalwarp -ovr AUTO):
 * the ratio of source pixels per target pixel along x over the window
 * (a 10 x 10 point sample) picks the finer of the two levels around it,
 * or the level within 0.1 of it; none when it is at most 1.  sizes[i] is
 * level i's width and height, nlevels >= 1.  Returns the level. */
int cf__warp_pick_level(const cf__warp *w, int64_t tx, int64_t ty, uint32_t tw,
                        uint32_t th, const uint32_t (*sizes)[2], int nlevels);

/* The source pixels a request needs: the footprint of the target window
 * on the level plus the kernel's margin, clipped to the level.  `empty`
 * when no target pixel can get a value (the footprint misses the level).
 * xscale/yscale: target pixels per source pixel (GDAL's kernel scale). */
typedef struct cf__warp_win {
    int64_t x, y;
    uint32_t w, h;
    int empty;
    double xscale, yscale;
    double fill;               /* share of the footprint inside the level */
    uint32_t wrap;             /* the window is a whole turn of a global
                                  geographic source: resample it with this
                                  many columns of its other end added on
                                  each side (x - wrap, w + 2 wrap), so that
                                  kernels reach across the antimeridian */
} cf__warp_win;
cf_status cf__warp_window(const cf__warp *w, const cf__warp_req *rq,
                          cf__warp_win *out, cf_error *err);

/* What holding a chunk costs, as GDAL's warper counts it: bits per
 * source pixel (sample bits x bands, + 1 per band with nodata, + 1 with an
 * internal mask), per target pixel (sample bits x bands, + 1 per band
 * with a target nodata), and the limit in bytes (GDAL: 64 MiB). */
typedef struct cf__warp_cost {
    double src_bits, dst_bits, memory;
} cf__warp_cost;

/* One chunk of a target window and its source window. */
typedef struct cf__warp_chunk {
    cf__warp_req rq;
    cf__warp_win win;
} cf__warp_chunk;

/* The chunks GDAL's warper would warp the target window `rq` in
 * (GDALWarpOperation::CollectChunkList): a chunk with no source is
 * dropped, large or mostly-outside windows are halved.  GDAL's results at
 * the image's edges depend on this split, so cogfeed follows it.  *out is
 * malloc'd (the caller frees), *n may be 0. */
cf_status cf__warp_chunks(const cf__warp *w, const cf__warp_req *rq,
                          const cf__warp_cost *cost, cf__warp_chunk **out,
                          size_t *n, cf_error *err);

/* Decoded source pixels of a cf__warp_win, band-sequential (nbands, h, w)
 * of `dtype`, native order. */
typedef struct cf__warp_src {
    const void *data;
    cf_dtype dtype;
    int nbands;
    /* One byte per pixel of the window, 0 = invalid for every band (an
     * internal mask), or NULL. */
    const uint8_t *valid;
    int has_nodata;            /* samples equal to nodata are invalid */
    double nodata;             /* NaN: NaN samples are invalid */
} cf__warp_src;

/* The target window's output: band-sequential (nbands, th, tw), the
 * source's dtype (bands and rows as far apart as the strides say, so that
 * a window of a larger array can be written in place).  Pixels that get no value keep what the caller put
 * there (fill them first: nodata, or 0).  has_nodata: a computed value
 * equal to nodata is moved off it by one, as GDAL's warper does. */
typedef struct cf__warp_dst {
    void *data;
    size_t band_stride;        /* samples from one band to the next (0:
                                  th * tw) */
    size_t row_stride;         /* ... from one row to the next (0: tw) */
    int has_nodata;
    double nodata;
} cf__warp_dst;

/* A region of interest in the pixels of a target grid (roi.c): rings of
 * (x, y) vertices in CRS `from` (NULL: the grid's; CF_E_ARG when the grid
 * has none), ring_len[r] vertices each, consecutive in xy; polygons of
 * poly_rings[p] consecutive rings each (NULL, npolys 0: one of all), each
 * filled by the even-odd rule (its holes), their union the region (parts
 * may overlap); a ring need not repeat its first vertex.  CF_E_ARG for a
 * ring of fewer than 3 vertices, a point that does not transform. */
#define CF__ROI_MAX_VERTICES (1u << 20)
typedef struct cf__roi cf__roi;
cf_status cf__roi_new(const double *xy, const uint32_t *ring_len, uint32_t nrings,
                      const uint32_t *poly_rings, uint32_t npolys, const cf_crs *from,
                      const cf_grid *to, cf__roi **out, cf_error *err);
void cf__roi_free(cf__roi *r);
/* Whether the window [x0, x1) x [y0, y1) of target pixels meets the
 * region (shares an area with it). */
int cf__roi_meets(const cf__roi *r, double x0, double y0, double x1, double y1);
/* The region's bounds in target pixels: x0, y0, x1, y1. */
void cf__roi_bounds(const cf__roi *r, double b[4]);
/* A point of the region's outline inside [0, w) x [0, h) (a vertex,
 * from the h-th on; none there: the centre of the region's bounds within
 * it), into *x, *y: a window around it meets the region. */
void cf__roi_point(const cf__roi *r, uint64_t pick, double w, double h, double *x, double *y);

/* GDAL's nodata test (GDALWarpNoDataMasker): m[k] = 0 where sample k of
 * band (n samples of dtype) is nodata, else 1; 1 when any was.  Integers
 * compare with the nodata rounded down (none when it is outside the
 * type), floats with a relative tolerance of 1e-10, NaN matches NaN. */
int cf__warp_nodata_mask(cf_dtype dtype, double nodata, const void *band, size_t n, uint8_t *m);

/* Store value v into sample i of an array of dtype t as GDAL's warper
 * does: integers clamped to the type and rounded half up (floor(v + 0.5)),
 * moved off `nodata` by one when `nudge` (so that a valid pixel never
 * reads as nodata); floats cast. */
void cf__rs_store(cf_dtype t, void *band, size_t i, double v, int nudge, double nodata);

/* Resample (GDAL's warp kernels, docs/reader.md): nearest, bilinear,
 * cubic, average, mode, nodata-aware.  Allocates its scratch per call;
 * thread-safe. */
cf_status cf__warp_resample(const cf__warp *w, const cf__warp_req *rq,
                            const cf__warp_win *win, const cf__warp_src *src,
                            cf__warp_dst *dst, cf_error *err);

/* ------------------------------------------------------------------ */
/* Vector features: WKB polygons, their index, burning them            */
/* ------------------------------------------------------------------ */

/* Rings of polygons, vertex after vertex (wkb.c appends to it).  max_xy
 * bounds nxy (the caller's budget). */
typedef struct cf__shapes {
    double *x, *y;
    size_t nxy, cap_xy, cap_y, max_xy;
    uint32_t *ring_len;
    size_t nrings, cap_rings;
    uint32_t *poly_rings;      /* rings of each polygon (a MultiPolygon's
                                  parts are polygons of their own) */
    size_t npolys, cap_polys;
} cf__shapes;

/* Append the rings of a WKB Polygon or MultiPolygon (len bytes, any byte
 * order, ISO or EWKB Z / M ignored), and each polygon's ring count to
 * poly_rings; errors name `name`.  CF_E_FORMAT for
 * a malformed or truncated geometry, CF_E_UNSUPPORTED for another type,
 * CF_E_LIMIT past max_xy.  On failure s may hold part of the geometry. */
cf_status cf__wkb_polygons(const uint8_t *wkb, size_t len, cf__shapes *s, const char *name,
                           cf_error *err);

/* A packed Hilbert R-tree over n boxes (x0, y0, x1, y1 each); immutable,
 * queried by any number of threads. */
typedef struct cf__rtree cf__rtree;
typedef struct cf__ids {
    uint32_t *v;
    size_t n, cap;
} cf__ids;
cf_status cf__rtree_new(const double *boxes, size_t n, cf__rtree **out, cf_error *err);
void cf__rtree_free(cf__rtree *t);
/* The ids (0 .. n-1) of the boxes meeting q (edges included), ascending,
 * into ids (grown as needed; the caller frees ids->v). */
cf_status cf__rtree_query(const cf__rtree *t, const double q[4], cf__ids *ids, cf_error *err);

/* A raster to burn into: w x h samples of dt at out, row-major. */
typedef struct cf__burn {
    void *out;
    cf_dtype dt;
    uint32_t w, h;
    double value;
    int all_touched;
} cf__burn;
/* Burn one polygon, its rings (ring_len[r] vertices each, consecutive in
 * px / py, pixel coordinates) filled together by the even-odd rule, with
 * gdal_rasterize's rules (rasterize.c).  ints: scratch of as many ints as
 * the feature has vertices.  A feature with a non-finite vertex burns
 * nothing. */
void cf__burn_polygon(const cf__burn *b, const double *px, const double *py,
                      const uint32_t *ring_len, uint32_t nrings, int *ints);

/* A new reference to vl (cf_vlabels_free drops one). */
cf_vlabels *cf__vlabels_ref(const cf_vlabels *vl);

#endif
