/*
 * write_internal.h - the writer's parts: the TIFF directories it lays out
 * (ifd_out.c) and the overview reduction (overview.c).  writer.c ties
 * them to the public cf_writer.
 */
#ifndef CF_WRITE_INTERNAL_H
#define CF_WRITE_INTERNAL_H

#include "../common/common.h"

/* ---- ifd_out.c: one TIFF directory, serialised ---- */

/* TIFF field types the writer uses. */
enum { CF__T_ASCII = 2, CF__T_SHORT = 3, CF__T_LONG = 4, CF__T_DOUBLE = 12, CF__T_LONG8 = 16 };

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

/* ---- overview.c: halving rows ---- */

typedef enum cf__ov_kind { CF__OV_AVERAGE, CF__OV_NEAREST, CF__OV_MODE } cf__ov_kind;

/* One output row of width ow from source rows r0 and r1 (r1 NULL at an
 * odd bottom edge) of width sw, pixel-interleaved, `spp` samples of dtype
 * `dt`: each output pixel from the source's 2 x 2 block (fewer at the
 * right or bottom edge).  Average: the mean of the samples that are not
 * nodata (nodata where none is), integers rounded half up as GDAL's
 * average does, floats in double; NaN never counts.  Nearest: the block's
 * top-left pixel.  Mode: the most frequent value that is not nodata, the
 * first met on a tie. */
void cf__ov_row(cf__ov_kind kind, cf_dtype dt, uint32_t spp, const uint8_t *r0,
                const uint8_t *r1, uint32_t sw, uint8_t *out, uint32_t ow, int has_nodata,
                double nodata);

#endif
