/*
 * cog_internal.h - the reader's internals shared inside lib/pipeline: the
 * cf_cog struct and chunk-level helpers the loader uses to fetch, decode
 * and paste tiles itself (so that one decoded tile can feed many patches).
 */
#ifndef CF_COG_INTERNAL_H
#define CF_COG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "../codec/codec.h"
#include "../geo/geo.h"
#include "../io/io.h"
#include "../tiff/tiff.h"
#include "io_state.h"

struct cf_cog {
    cf_io *io;
    int own_io;
    cf__src *src;               /* NULL for in-memory files */
    const uint8_t *mem;        /* in-memory file, not owned */
    size_t mem_size;
    cf__tiff *tiff;
    cf_dtype dtype;
    char name[CF__NAME_MAX];   /* redacted URL, fitted for messages */
    char *etag;
    uint64_t header_bytes;
    uint32_t header_requests;
    int from_cache;            /* header from the header cache (no request) */
    _Atomic int cache_dropped; /* that entry was found stale and dropped */
    /* Codec contexts reused across reads: the io's pool (shared by every
     * file opened with it), or own_pool for in-memory files. */
    cf__ctx_pool *pool;
    cf__ctx_pool own_pool;
    int raw_color;             /* cf_open_options.raw_color */
    uint16_t *color;           /* per IFD: CF_COLOR_* it is read with */
    cf_crs *crs;               /* from the GeoKeys; NULL: none */
    char crs_note[160];        /* why there is none, when keys exist */
    uint64_t uid;              /* never reused in the process: the chunk
                                  cache's key (chunk_cache.h) */
    /* CF__COG_OPEN for every cog but a declared one (cog_declare.c),
     * which holds its description in decl until its header is read. */
    _Atomic int state;
    struct cf__cog_decl *decl;
    /* cf_cog_get_stats's counters */
    _Atomic uint64_t n_decoded, decoded_bytes, delivered_bytes, cache_hits,
        cache_misses;
};

/* A cog's state (cf_cog.state). */
enum { CF__COG_OPEN = 0, CF__COG_DECLARED = 1, CF__COG_FAILED = 2 };

/* Declared cogs (cog_declare.c): a cog made from a description of the
 * file (cf_input_desc: its grid, dtype and bands, e.g. a STAC item's)
 * without a request.  Until cf__cog_load reads its header it answers
 * cf_cog_get_info (the described fields; no tiles, one level),
 * cf_cog_level_info and cf_cog_grid at level 0, its name, dtype and CRS;
 * nothing else may be asked of it.  cf__cog_load opens it on first call
 * (thread-safe: one request, others wait) and checks the header agrees
 * with the description; a failure of the file's own (its bytes or its
 * description wrong) is kept and returned again, any other is returned
 * again until its backoff (0.5 s, doubling, at most 60 s) has passed and
 * then tried again by one caller (cog_declare.c, kept()). */
typedef struct cf__cog_decl {
    char *url;                 /* as given: cf_cog_open's */
    cf_grid grid;              /* level 0; grid.crs is the cog's crs */
    uint32_t count;
    pthread_mutex_t mu;        /* one header read at a time */
    cf_status st;              /* the last failure (CF__COG_FAILED: why) */
    cf_error err;
    unsigned fails;            /* failures in a row tried again later */
    double retry_at;           /* cf__now() before which none is tried */
} cf__cog_decl;
cf_status cf__cog_declare(cf_io *io, const char *url, const cf_input_desc *d, cf_cog **out,
                          cf_error *err);
cf_status cf__cog_load(cf_cog *cog, cf_error *err);
/* The declared cogs among cogs[0..n) that no other thread is reading
 * (at most 64 of them) opened together, their requests in flight at once;
 * each outcome is kept for cf__cog_load to report. */
void cf__cog_load_many(cf_cog *const *cogs, size_t n);
/* The description (cog_desc.c): 1 while cog's header is not read
 * (declared, or failed to load). */
int cf__cog_declared(const cf_cog *cog);
/* Its level-0 grid as described (cf_cog_grid's, for a declared cog). */
const cf_grid *cf__cog_decl_grid(const cf_cog *cog);
uint32_t cf__cog_decl_count(const cf_cog *cog);
void cf__cog_decl_free(cf_cog *cog);
/* The file has a geotransform (a declared one always has). */
int cf__cog_has_geotransform(const cf_cog *cog);

/* Room for one fill sample of any dtype (a complex float64 is 16 bytes). */
#define CF__FILL_MAX 16

/* One chunk (tile or strip) of an IFD. */
typedef struct cf__chunk {
    int ifd;                   /* index into tiff->ifds */
    uint32_t cx, cy;           /* chunk column / row */
    uint32_t plane;            /* band plane (planar 2), else 0 */
    uint64_t index;            /* index into offsets/counts */
    uint64_t off, len;         /* compressed bytes; len 0 = sparse */
} cf__chunk;

/* A cog of no file yet, named for messages by the redacted name. */
cf_status cf__cog_alloc(const char *name, cf_cog **out, cf_error *err);

/* Opening (cog.c; open_many.c drives it): a cog for url with its source
 * made, from the header cache when it has the file (*fetch 0: parsed,
 * no request made), else *fetch 1: its header is to be read and parsed
 * into cog->tiff (header_requests, header_bytes counted).  Then
 * cf__cog_open_end checks every IFD a read can touch and takes the CRS
 * and ETag.  On failure the caller closes the cog. */
cf_status cf__cog_open_begin(cf_io *io, const char *url,
                             const cf_open_options *opt, cf_cog **out,
                             int *fetch, cf_error *err);
cf_status cf__cog_open_end(cf_cog *cog, cf_error *err);

/* A fetch of cog's tiles failed with st (message in err).  When the object
 * changed and cog's header came from the header cache, that entry is stale:
 * it is dropped (once: a fresh entry another process stored since is not
 * the stale one), so that the next open reads the header afresh, and err
 * says so.  Thread-safe; returns st. */
cf_status cf__cog_fetch_failed(cf_cog *cog, cf_status st, cf_error *err);

/* CF_E_ARG unless level is one of cog's: 0 (full resolution) and its
 * overviews; the message names the file and the levels it has. */
cf_status cf__cog_check_level(const cf_cog *cog, int level, cf_error *err);

/* Describe chunk (cx, cy, plane) of IFD `ifd`, validating its byte range
 * against the file size. */
cf_status cf__cog_chunk(const cf_cog *cog, int ifd, uint32_t cx, uint32_t cy,
                        uint32_t plane, cf__chunk *out, cf_error *err);
/* "level L, tile N (col X, row Y)" (or "strip N", "mask of level L",
 * "band plane P") for messages about chunk c; returns buf. */
const char *cf__cog_chunk_where(const cf_cog *cog, const cf__chunk *c, char *buf,
                                size_t n);
/* Codec parameters for a chunk and its decoded size in bytes. */
void cf__cog_chunk_params(const cf_cog *cog, const cf__chunk *c,
                          cf__codec_params *p);
/* Take / give back a codec context from the cog's pool (get: NULL when
 * out of memory). */
cf__codec_ctx *cf__cog_ctx_get(cf_cog *cog);
void cf__cog_ctx_put(cf_cog *cog, cf__codec_ctx *ctx);

/* Paste the part of decoded chunk `c` (buffer `chunk`) that falls inside
 * the window (x, y, w, h) into band-sequential dst for the 0-based file
 * bands `bands[0..nbands)`.  `expand_bits` maps 1-bit samples to 0/1 (1)
 * or 0/255 (255). */
void cf__cog_paste(const cf_cog *cog, const cf__chunk *c, const uint8_t *chunk,
                   int64_t x, int64_t y, uint32_t w, uint32_t h,
                   const int *bands, int nbands, uint8_t *dst,
                   int expand_bits);

/* Bands a read of the cog gives (the file's samples, or 4 for CMYK and
 * CIELab read as RGBA, 3 for YCbCr read as RGB). */
uint32_t cf__cog_bands(const cf_cog *cog);

/* Fill value for pixels without data, as one sample of the cog's dtype. */
void cf__cog_fill_value(const cf_cog *cog, uint8_t out[CF__FILL_MAX]);

/* Bytes of one delivered sample of IFD ifdi (1 for bits, which the paste
 * expands to a byte). */
size_t cf__cog_out_bps(const cf_cog *cog, int ifdi);
/* n samples of bps bytes, each the fill sample v. */
void cf__cog_fill_samples(uint8_t *dst, size_t n, size_t bps, const uint8_t v[CF__FILL_MAX]);

/* Fill nsamples samples of dst with the fill value (samples of IFD
 * ifdi's size: 1 byte for 1-bit data, expanded by the paste). */
void cf__cog_fill(const cf_cog *cog, int ifdi, uint8_t *dst, size_t nsamples);

/* Check a cf_cog_read request; on success all[0..*nb) are the 0-based
 * bands, *ifdi the level's IFD and fill the nodata sample. */
cf_status cf__cog_prepare_read(const cf_cog *cog, int level, int64_t x, int64_t y,
                               uint32_t w, uint32_t h, const int *bands, int nbands,
                               size_t dst_size, int *all, int *nb_out, int *ifdi_out,
                               uint8_t fill[CF__FILL_MAX], cf_error *err);

/* The chunks a window of IFD `ifdi` needs (planned by read_plan.h), with
 * their compressed bytes summed in *total; dst is first filled with
 * `fill` where the window lies outside the image or a chunk is sparse.
 * *out (malloc'd, the caller frees) lists the non-sparse chunks. */
cf_status cf__cog_window_chunks(const cf_cog *cog, int ifdi, int64_t x, int64_t y,
                                uint32_t w, uint32_t h, const int *bands, int nb,
                                uint8_t *dst, const uint8_t fill[CF__FILL_MAX], cf__chunk **out,
                                size_t *nout, uint64_t *total, cf_error *err);

/* Point reqs[0..n) at the chunks' bytes, packed one after another in buf
 * (a buffer of their summed lengths); other fields are left alone. */
void cf__cog_chunk_reqs(const cf__chunk *chunks, size_t n, uint8_t *buf,
                        cf__range_req *reqs);
/* For a remote cog, touch every page of a fresh fetch buffer (see cog.c). */
void cf__cog_prefault(const cf_cog *cog, uint8_t *buf, size_t len);

/* Whether chunk c is uncompressed in host order: pasted straight from its
 * fetched bytes, with no decode step (and no codec context). */
int cf__cog_chunk_raw(const cf_cog *cog, const cf__chunk *c);

/* What a window (x, y, w, h) of chunk c's IFD needs of it: `need` rows
 * from its top (down to the window's last row), of `height`, each
 * row_bytes decoded; and the rows to decode: height, or fewer when the
 * window ends above the chunk's last row and stopping there costs less
 * (cf__codec_stop_pays: a random patch over larger tiles needs only the
 * top rows of the tiles below it).  Uncompressed host-order chunks: all. */
typedef struct cf__chunk_rows {
    uint32_t need, rows, height;
    size_t row_bytes;
} cf__chunk_rows;
cf__chunk_rows cf__cog_chunk_rows(const cf_cog *cog, const cf__chunk *c, int64_t x, int64_t y,
                                  uint32_t w, uint32_t h);

/* Decode the first `rows` rows (cf__cog_chunk_rows; UINT32_MAX or the
 * chunk's height: all) of one fetched chunk with `ctx`: *out is then the
 * decoded chunk (the context's buffer, valid until the context's next
 * use, or src itself for uncompressed host-order chunks, which need no
 * ctx). */
cf_status cf__cog_decode_chunk(cf_cog *cog, cf__codec_ctx *ctx, const cf__chunk *c,
                               const uint8_t *src, uint32_t rows, const uint8_t **out,
                               cf_error *err);
/* Decode one fetched chunk with `ctx` and paste its part of the window
 * (uncompressed host-order chunks are pasted straight from src; ctx may
 * then be NULL). */
cf_status cf__cog_decode_paste(cf_cog *cog, cf__codec_ctx *ctx, const cf__chunk *c,
                               const uint8_t *src, int64_t x, int64_t y, uint32_t w,
                               uint32_t h, const int *bands, int nb, uint8_t *dst,
                               int expand_bits, cf_error *err);

/* A read onto a grid, planned (read_grid.c): the coordinate map, the
 * source level (GDAL's overview choice), GDAL's chunks (each a target
 * window and the source window it needs) and the nodata rules.  Shared by
 * cf_cog_read_grid and the loader (sample_grid.c), so that both compute
 * the same pixels. */
typedef struct cf__grid_plan {
    cf__warp *w;
    cf__xform *xf_own;
    int level;
    cf__warp_chunk *chunks;
    size_t n;
    cf__warp_src proto;         /* dtype, bands, source nodata */
    cf__warp_dst out;           /* target nodata, band stride */
    double fill;               /* what pixels without a value hold */
    cf__warp_pos *pos;          /* borrowed: positions kept across plans
                                  (a loader reader's; NULL: none) */
} cf__grid_plan;
/* xf_known: xf is the grid CRS -> cog CRS transformation (NULL: the same
 * CRS), else it is worked out here.  nb bands are resampled. */
cf_status cf__grid_plan_new(cf_cog *cog, const cf_grid *grid, const cf_warp_options *o, int nb,
                            int xf_known, cf__xform *xf, cf__grid_plan *pl, cf_error *err);
void cf__grid_plan_free(cf__grid_plan *pl);
/* Resample chunk k from its source window (band-sequential, the cog's
 * dtype; valid: its internal mask or NULL) into dst, the whole target
 * grid (band-sequential, rows row_stride samples apart). */
cf_status cf__grid_resample(const cf_cog *cog, const cf__grid_plan *pl, size_t k,
                            const void *src_data, const uint8_t *valid, void *dst,
                            size_t row_stride, cf_error *err);
/* valid_mask (cf_loader_options): 1 in dst (the whole target grid, rows
 * row_stride apart, filled with 0 first) where chunk k's warp finds a
 * source pixel valid in every band (mask: the internal mask, or NULL; not
 * the plan's source nodata in any band of src_data), as gdalwarp
 * -dstalpha's alpha. */
cf_status cf__grid_resample_valid(const cf_cog *cog, const cf__grid_plan *pl, size_t k,
                                  const void *src_data, const uint8_t *mask, uint8_t *dst,
                                  size_t row_stride, cf_error *err);
/* Clear valid[i] (n pixels) where any of nb band-sequential planes of
 * dtype dt holds `nodata` (NaN: a NaN). */
void cf__valid_nodata(uint8_t *valid, const void *data, cf_dtype dt, uint32_t nb, size_t n,
                      double nodata);
/* Clear valid[i] (n pixels) where sample i of data (dtype dt) equals one
 * of the nclasses values of classes. */
void cf__valid_classes(uint8_t *valid, const void *data, cf_dtype dt, size_t n,
                       const double *classes, uint32_t nclasses);
/* Clear valid over a w x h window at (x, y) of level `level` where it
 * lies outside the level, or where the level's internal mask is 0. */
cf_status cf__valid_window(cf_cog *cog, int level, int64_t x, int64_t y, uint32_t w,
                           uint32_t h, uint8_t *valid, cf_error *err);
/* n samples of dtype t set to v, stored as the warper stores values. */
void cf__grid_fill(void *dst, size_t n, cf_dtype t, double v);

#endif
