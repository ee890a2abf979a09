/*
 * tiff.h - TIFF / BigTIFF / GeoTIFF structure parsing on byte buffers.
 *
 * No I/O here.  The parser is fed byte ranges of the file; when it runs out
 * it answers CF__NEED_BYTES with the range [need_off, need_off+need_len) it
 * wants next, the caller fetches it (from disk or HTTP) and calls again.
 * Parsing restarts from the top on each call, which is cheap, and keeps the
 * code a plain recursive-descent reader.  A COG's header normally fits in
 * the first speculative read, so one request opens a file.
 *
 * Every count and size read from the file is checked against the caps in
 * cogfeed.h and against the file size before anything is allocated.
 */
#ifndef CF_TIFF_H
#define CF_TIFF_H

#include "../common/common.h"

/* TIFF compression codes used across the library. */
enum {
    CF_COMP_NONE = 1,
    CF_COMP_LZW = 5,
    CF_COMP_OJPEG = 6,
    CF_COMP_JPEG = 7,
    CF_COMP_ADOBE_DEFLATE = 8,
    CF_COMP_PACKBITS = 32773,
    CF_COMP_DEFLATE = 32946,
    CF_COMP_LERC = 34887,
    CF_COMP_ZSTD = 50000,
    CF_COMP_WEBP = 50001,
};

/* LERC sub-compression (LercParameters tag 50674, second value). */
enum { CF_LERC_NONE = 0, CF_LERC_DEFLATE = 1, CF_LERC_ZSTD = 2 };

/* One image file directory, reduced to what reading needs. */
typedef struct cf__tiff_ifd {
    uint64_t ifd_offset;
    uint32_t subfile_type;       /* NewSubfileType: 1 reduced, 4 mask */
    uint32_t width, height;
    uint32_t chunk_w, chunk_h;   /* tile size, or width x rows_per_strip */
    int tiled;
    uint32_t chunks_across, chunks_down;
    uint64_t nchunks;            /* across*down (* samples when planar 2) */
    uint64_t *offsets;           /* nchunks entries, owned */
    uint64_t *counts;            /* nchunks entries, owned */
    uint16_t samples;            /* SamplesPerPixel */
    uint16_t bits;               /* BitsPerSample (same for all samples) */
    uint16_t sample_format;      /* 1 uint, 2 int, 3 float */
    uint16_t compression;
    uint16_t predictor;          /* 1 none, 2 horizontal, 3 float */
    uint16_t photometric;
    uint16_t planar;             /* 1 contig, 2 separate */
    uint16_t ycbcr_sub_h, ycbcr_sub_v; /* YCbCrSubsampling (default 2,2) */
    uint8_t *jpeg_tables;        /* owned, NULL if absent; old-style
                                    JPEG: the header libtiff writes in
                                    front of the entropy data, SOF first
                                    (tiff.c, parse_ojpeg) */
    size_t jpeg_tables_len;
    uint32_t lerc_version;       /* LercParameters[0], 0 if absent */
    uint32_t lerc_sub;           /* LercParameters[1]: CF_LERC_* */
    char comp_name[24];          /* what cf__tiff_compression_name returns */
    /* How the samples are to be read (the codec layer acts on them). */
    uint16_t fill_order;         /* FillOrder: 1, or 2 (bits of each byte
                                    reversed) */
    uint16_t inkset;             /* InkSet (1: CMYK, the default) */
    uint16_t extra_samples;      /* ExtraSamples count */
    int index;                   /* position in the file's IFD list
                                    (main chain, then IFD 0's SubIFDs):
                                    messages say "IFD index" */
    int sub;                     /* reached through IFD 0's SubIFDs */
    uint32_t t4_options, t6_options; /* CCITT Group 3 / Group 4 */
    /* Colour tags, libtiff's defaults when absent: WhitePoint (D50),
     * YCbCrCoefficients (0.299, 0.587, 0.114), ReferenceBlackWhite
     * (YCbCr: 0 255 128 255 128 255; else 0, 2^bits-1 for each). */
    float white_point[2];
    float ycbcr_coef[3];
    float ref_bw[6];
    /* Old-style JPEG whose layout cannot be read as libtiff reads it: the
     * status and reason a read of this IFD fails with (0 and "" when it
     * can be read). */
    int ojpeg_status;
    char ojpeg_why[200];
} cf__tiff_ifd;

/* An image's metadata as GDAL presents it (meta.c): "KEY=VALUE" items by
 * domain ("" the default) for the dataset (band 0) and each band (1..),
 * band descriptions and units.  Lookups return NULL (or "") when there is
 * nothing; strings live as long as the cf__tiff_meta. */
typedef struct cf__tiff_meta cf__tiff_meta;
cf__tiff_meta *cf__meta_new(int nbands);
void cf__tiff_meta_free(cf__tiff_meta *m);
/* Set an item (a key set again replaces its value).  CF_E_NOMEM only. */
cf_status cf__meta_set(cf__tiff_meta *m, int band, const char *domain,
                       const char *key, const char *value);
/* Apply the items of a GDAL_METADATA text as GDAL does; per-band scale
 * and offset (role "scale"/"offset") go to scale[b-1], offset[b-1]. */
cf_status cf__meta_gdal(cf__tiff_meta *m, const char *xml, double *scale,
                        double *offset);
const char *const *cf__tiff_meta_items(const cf__tiff_meta *m, int band,
                                      const char *domain);
const char *const *cf__tiff_meta_domains(const cf__tiff_meta *m, int band);
const char *cf__tiff_meta_description(const cf__tiff_meta *m, int band);
const char *cf__tiff_meta_unit(const cf__tiff_meta *m, int band);

/* A parsed file: every IFD plus the GeoTIFF / GDAL metadata of the first. */
typedef struct cf__tiff {
    int bigtiff, big_endian;
    uint64_t file_size;
    int nifds;
    cf__tiff_ifd *ifds;           /* file order, owned */
    /* Image levels: levels[0] = full resolution (first non-mask IFD),
     * then reduced-resolution non-mask IFDs with the same band layout, in
     * decreasing size.  mask_of_level[i] is the IFD index of the internal
     * mask of level i, or -1. */
    int nlevels;
    int *levels;                 /* nlevels IFD indexes, owned */
    int *mask_of_level;          /* nlevels entries, owned */
    int has_geotransform;
    double geotransform[6];
    int pixel_is_point;
    int epsg;                    /* 0 if unknown */
    /* The GeoTIFF keys as stored, for lib/geo to build the CRS from: the
     * GeoKeyDirectory's SHORTs (header and keys, count checked),
     * GeoDoubleParams, GeoAsciiParams (NUL-terminated); NULL and 0 when
     * absent or malformed.  Owned. */
    uint16_t *geokeys;
    size_t ngeokeys;
    double *geodoubles;
    size_t ngeodoubles;
    char *geoascii;
    size_t ngeoascii;
    int has_nodata;
    double nodata;
    double *scale, *offset;      /* samples of level 0 entries, owned (1, 0 default) */
    uint64_t header_end;         /* one past the last header byte used */
    /* Problems the parse tolerated, as GDAL does (a broken IFD chain, IFDs
     * it cannot read, tiles past the end of the file): one a line, owned;
     * NULL when none. */
    char *warnings;
    cf__tiff_meta *meta;          /* metadata of level 0, owned */
} cf__tiff;

typedef struct cf__tiff_parser cf__tiff_parser;

/* `file_size` may be UINT64_MAX while unknown.  `name` (copied) prefixes
 * error messages. */
cf__tiff_parser *cf__tiff_parser_new(uint64_t file_size, const char *name);
void cf__tiff_parser_free(cf__tiff_parser *p);
/* Hand the parser bytes [off, off+len) of the file (copied).  Fails with
 * CF_E_LIMIT beyond CF_MAX_HEADER_BYTES in total. */
cf_status cf__tiff_parser_add(cf__tiff_parser *p, uint64_t off,
                             const uint8_t *data, size_t len, cf_error *err);
void cf__tiff_parser_set_size(cf__tiff_parser *p, uint64_t file_size);
/* Memory the parse may take: header bytes held plus the tile indexes
 * (16 bytes per tile or strip) and JPEGTables it builds (0: default
 * CF_HEADER_MEMORY_DEFAULT).  A file needing more fails with CF_E_LIMIT,
 * before its arrays are fetched when their sizes tell already. */
void cf__tiff_parser_set_budget(cf__tiff_parser *p, uint64_t bytes);
/* Parse.  CF_OK: *out is a new cf__tiff (free with cf__tiff_free).
 * CF__NEED_BYTES: fetch [*need_off, *need_off + *need_len) and call
 * cf__tiff_parser_add, then again.  Anything else: error in err.
 * Behaviour worth knowing:
 *  - The requested range is generous (>= 16 KiB, or all missing tag arrays
 *    of every IFD that lie within 1 MiB of each other) and clamped to the
 *    file size when known; a short response near EOF is fine as long as
 *    cf__tiff_parser_set_size is called.  Asking for the same first missing
 *    byte twice in a row (nothing useful added) is a CF_E_FORMAT error, so
 *    a truncated file can never make the caller loop.
 *  - Any malformed or unsupported IFD in the chain fails the whole parse
 *    (the message names "IFD n" and the tag).  Duplicate tags: the first
 *    wins; entries with unknown type codes are skipped.
 *  - IFD entries and the chunk offset / byte count arrays of all IFDs
 *    must not share bytes (CF_E_FORMAT), and the whole parse must fit the
 *    memory budget (cf__tiff_parser_set_budget, CF_E_LIMIT).
 *  - GeoTIFF and GDAL tags are best effort: a malformed ModelPixelScale,
 *    GeoKeyDirectory (e.g. more keys than data), GDAL_NODATA or
 *    GDAL_METADATA is ignored, never an error; a non-finite geotransform is
 *    reported as absent. */
cf_status cf__tiff_parser_run(cf__tiff_parser *p, cf__tiff **out,
                             uint64_t *need_off, uint64_t *need_len,
                             cf_error *err);
/* Convenience for a file held entirely in memory. */
cf_status cf__tiff_parse_memory(const uint8_t *data, size_t len,
                               const char *name, cf__tiff **out, cf_error *err);
void cf__tiff_free(cf__tiff *t);

/* Name for a compression code ("DEFLATE", "LERC_ZSTD" needs the ifd). */
const char *cf__tiff_compression_name(const cf__tiff_ifd *ifd);

#endif
