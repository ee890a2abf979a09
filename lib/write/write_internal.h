/*
 * write_internal.h - the writer's parts: the TIFF directories it lays out
 * (ifd_out.c) and the overview reduction (overview.c).  writer.c ties
 * them to the public cf_writer.
 */
#ifndef CF_WRITE_INTERNAL_H
#define CF_WRITE_INTERNAL_H

#include "../common/common.h"

/* ---- writer.c ---- */

/* The caller's options as this build knows them: what its struct_size
 * covers, the defaults for the rest (fields added later).  CF_E_ARG when
 * struct_size is below the first release's. */
cf_status cf__writer_options_copy(const cf_writer_options *in, cf_writer_options *out,
                                  cf_error *err);
/* Tile (tx, ty) of level 0 stays sparse: for an object, it counts as
 * written, so the rows after it need not wait for close (the stitcher's
 * rows that no patch reaches).  A no-op for a local file, or for a tile
 * written already. */
cf_status cf__writer_skip_tile(cf_writer *w, uint32_t tx, uint32_t ty, cf_error *err);

/* The memory of the tiles the writer's slots (about three tiles each: the
 * pixels and two encoders' output) and the stitcher's row threads (one
 * output tile each) hold at most, so that large tiles on many CPUs do not
 * take a tile per CPU they cannot use. */
#define CF__WRITE_THREADS_BUDGET ((size_t)256 << 20)

/* Threads (or encoding slots) that hold `per` bytes each: one per CPU
 * this process may use (at most `cap` when it is not 0: the writer's
 * `threads` option), within CF__WRITE_THREADS_BUDGET, at most `most`, at
 * least 1. */
static inline int cf__write_threads(int cap, size_t per, size_t most) {
    size_t n = cf__ncpu_usable();
    if (cap > 0 && n > (size_t)cap) n = (size_t)cap;
    if (per && n > CF__WRITE_THREADS_BUDGET / per) n = CF__WRITE_THREADS_BUDGET / per;
    if (n > most) n = most;
    return n < 1 ? 1 : (int)n;
}

/* ---- mask.c: the internal mask's tiles ---- */

/* Rows [0, h) x [0, w) of m (a byte a pixel, rows `stride` apart; NULL:
 * all valid) as a T x T tile of 1-bit rows (padding not valid). */
void cf__mask_pack(const uint8_t *m, size_t stride, uint32_t w, uint32_t h, uint32_t T,
                   uint8_t *out);
/* The first h rows and w pixels of a packed T x T tile as bytes, 0 or
 * 255, into rows `stride` apart. */
void cf__mask_unpack(const uint8_t *bits, uint32_t T, uint32_t w, uint32_t h, uint8_t *out,
                     size_t stride);

/* ---- ifd_out.c: one TIFF directory, serialised ---- */

/* TIFF field types the writer uses. */
enum {
    CF__T_ASCII = 2,
    CF__T_SHORT = 3,
    CF__T_LONG = 4,
    CF__T_RATIONAL = 5, /* values given as numerator, denominator uint32s */
    CF__T_DOUBLE = 12,
    CF__T_LONG8 = 16
};

/* One entry: `count` values of `type`, native order, at `data`
 * (borrowed until the directory is written). */
typedef struct cf__tag {
    uint16_t tag, type;
    uint64_t count;
    const void *data;
} cf__tag;

/* A directory under construction: at most CF__MAX_TAGS entries, added in
 * any order, written sorted by tag (TIFF requires it). */
#define CF__MAX_TAGS 32
typedef struct cf__ifd_out {
    cf__tag tags[CF__MAX_TAGS];
    int n;
} cf__ifd_out;

/* Add an entry (CF_E_LIMIT past CF__MAX_TAGS: a programming error). */
cf_status cf__ifd_add(cf__ifd_out *d, uint16_t tag, uint16_t type, uint64_t count,
                      const void *data, cf_error *err);
/* Bytes the directory takes with its out-of-line values (even-aligned),
 * classic TIFF or BigTIFF. */
uint64_t cf__ifd_size(const cf__ifd_out *d, int big);
/* Serialise it little-endian at file offset `at` into out (cf__ifd_size
 * bytes), its next-directory link set to `next` (0: the last). */
void cf__ifd_write(const cf__ifd_out *d, int big, uint64_t at, uint64_t next, uint8_t *out);

/* ---- overview.c: one overview level from the level above ---- */

typedef enum cf__ov_kind { CF__OV_AVERAGE, CF__OV_NEAREST, CF__OV_MODE } cf__ov_kind;

/* One axis of a level: destination pixel i reads source [x0[i], x1[i])
 * (average, mode; the ends weighted w0[i], w1[i] by how much of them it
 * covers) or near[i] (nearest), over ratio = src / dst (at most 2).
 * all2: every window is exactly 2 wide (GDAL's fast path applies). */
typedef struct cf__ov_axis {
    uint32_t src, dst;
    double ratio;
    uint32_t *x0, *x1, *near;
    double *w0, *w1;
    int all2;
} cf__ov_axis;
cf_status cf__ov_axis_init(cf__ov_axis *a, uint32_t src, uint32_t dst, cf_error *err);
void cf__ov_axis_free(cf__ov_axis *a);

/* One output row (ax->dst pixels of spp samples of dtype dt,
 * pixel-interleaved) from the nrows source rows of its window (rows[0]
 * its first, weighted wy0; the last weighted wy1) and, for nearest, the
 * source row near_row.  Average leaves nodata out (nodata where nothing
 * is left) and NaN in; mode leaves nodata out.  mrows (NULL: none): the
 * rows' internal mask, a byte a pixel (0: masked), which average and mode
 * leave out too (0 where nothing is left, or nodata). */
void cf__ov_row(cf__ov_kind kind, cf_dtype dt, uint32_t spp, const uint8_t *const *rows,
                uint32_t nrows, double wy0, double wy1, const cf__ov_axis *ax, uint8_t *out,
                int has_nodata, double nodata, const uint8_t *near_row,
                const uint8_t *const *mrows);

/* ---- stream.c: tile data to object storage as parts ---- */

#define CF__WSTREAM_MAX_LEVELS 24
#define CF__WSTREAM_DEFAULT_PART ((uint64_t)8 << 20)
/* A level's first part holds its head plus what came before it (the
 * header, small levels, a tail): up to about 4 parts, which S3 (5 GiB)
 * and Azure (4000 MiB) must take. */
#define CF__WSTREAM_MAX_PART ((uint64_t)900 << 20)
#define CF__WSTREAM_INFLIGHT 4 /* parts being sent at once */

typedef struct cf__wstream cf__wstream;
/* Start uploading `url` (the io's options; NULL: defaults; `name` the
 * URL for messages, redacted) for a file of nlev levels (0 the full
 * resolution) whose tile data may take up to bound[l] bytes each: the
 * part size is part_size (0: 8 MiB; at least 5 MiB, at most
 * CF__WSTREAM_MAX_PART), raised until the bounds fit S3's 10,000 parts. */
cf_status cf__wstream_new(cf_io *io, const char *url, const char *name, uint64_t part_size,
                          int nlev, const uint64_t *bound, cf__wstream **out, cf_error *err);
uint64_t cf__wstream_part_size(const cf__wstream *s);
/* Append n bytes to level l's data (in the level's file order). */
cf_status cf__wstream_put(cf__wstream *s, int l, const uint8_t *data, size_t n, cf_error *err);
/* Send the header (hlen bytes: it holds every tile's offset) and the
 * bytes still held, and make the object.  Frees s, aborting the upload
 * on failure. */
cf_status cf__wstream_finish(cf__wstream *s, const uint8_t *header, size_t hlen,
                             cf_error *err);
/* Give up: abort the upload (nothing is left), free s. */
void cf__wstream_abort(cf__wstream *s);

#endif
