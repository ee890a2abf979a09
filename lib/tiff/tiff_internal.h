/*
 * tiff_internal.h - what the parser (tiff.c) shares with the files that
 * read one group of tags for it: old-style JPEG (tiff_ojpeg.c) and the
 * GeoTIFF tags and GDAL metadata (tiff_geo.c).  The tag slots, the raw
 * IFD entries, the parse context, and the helpers that read tag values
 * (each one answers CF__NEED_BYTES with a range when its bytes are not
 * there yet).  Private to lib/tiff.
 */
#ifndef CF_TIFF_INTERNAL_H
#define CF_TIFF_INTERNAL_H

#include "tiff.h"

#include <stdbool.h>

/* Smallest range worth a request: an IFD plus its small arrays. */
#define TIFF_MIN_READ (16u << 10)
/* Missing tag data closer than this is fetched in one request. */
#define TIFF_CLUSTER_GAP (1u << 20)
#define TIFF_MAX_ENTRIES 65535u
#define TIFF_MAX_JPEGTABLES (1u << 20)
#define TIFF_MAX_TEXT (16u << 20)
#define TIFF_MAX_GEOKEYS (4u * 65536u)
#define TIFF_MAX_GEODOUBLES 65536u
#define TIFF_MAX_GEOASCII (1u << 20)
#define TIFF_OFFSET_LIMIT (UINT64_C(1) << 63)

typedef struct range {
    uint64_t off;
    size_t len;
    uint8_t *data;
} range;

struct cf__tiff_parser {
    uint64_t file_size; /* UINT64_MAX while unknown */
    char *name;
    range *r;           /* sorted by off, never overlapping or adjacent */
    size_t nr, cap;
    uint64_t total;     /* bytes held */
    uint64_t budget;    /* header bytes held + what parsing allocates */
    bool have_last_need;
    uint64_t last_need_off;
};

/* Tags the parser reads.  Only the first occurrence of a tag counts, so
 * duplicate tags resolve the same way every time. */
enum {
    S_SUBFILE, S_WIDTH, S_HEIGHT, S_BITS, S_COMP, S_PHOTO, S_STRIPOFF, S_SPP,
    S_RPS, S_STRIPCNT, S_PLANAR, S_PRED, S_TW, S_TL, S_TILEOFF, S_TILECNT,
    S_SFMT, S_JPEGTAB, S_YCBCR, S_LERC, S_PSCALE, S_TIE, S_TRANS,
    S_GEOKEYS, S_GDALMD, S_NODATA, S_GEODBL, S_GEOASCII,
    /* How samples are stored (tag interpretation for the codec layer). */
    S_FILLORDER, S_INKSET, S_EXTRA, S_WHITEPT, S_YCBCRCOEF, S_REFBW, S_T4OPT,
    S_T6OPT, S_SUBIFDS,
    /* Old-style JPEG (compression 6, ojpeg section below). */
    S_JPEGPROC, S_JIF, S_JIFLEN, S_JRESTART, S_JQTAB, S_JDCTAB, S_JACTAB,
    /* Metadata only (GDAL's TIFFTAG_* items): fetched with the first IFD. */
    S_DOCNAME, S_DESCRIPTION, S_MAKE, S_MODEL, S_SOFTWARE, S_DATETIME,
    S_ARTIST, S_HOSTCOMPUTER, S_COPYRIGHT, S_XRES, S_YRES, S_RESUNIT,
    S_MINSAMPLE, S_MAXSAMPLE, NSLOT
};
/* Slots from here on are metadata: pass 2 fetches them for IFD 0 only. */
#define S_FIRST_META S_DOCNAME

typedef struct ent {
    bool present;
    uint16_t type;
    uint64_t count;
    uint64_t off;    /* file offset of the data (of the entry's value field
                        when the data is inline) */
    uint64_t nbytes; /* UINT64_MAX when count x size overflows */
} ent;

typedef struct rawifd {
    uint64_t off, end, next; /* [off, end): count, entries, next pointer */
    bool sub; /* listed in IFD 0's SubIFDs, not in the main chain */
    ent e[NSLOT];
} rawifd;

/* Room for the problems a parse tolerates (reported by `info`). */
#define TIFF_WARN_MAX 2048

typedef struct ctx {
    cf__tiff_parser *p;
    cf_error *err;
    bool be, big;
    uint64_t need_off, need_len;
    uint64_t hdr_end;
    rawifd *ifds;
    int nifds;
    uint64_t allocated; /* tile indexes and JPEGTables made by pass 3 */
    char warn[TIFF_WARN_MAX]; /* one problem a line, cut when full */
    size_t nwarn;
} ctx;

#define TRY(x)                                                            \
    do {                                                                  \
        cf_status s_ = (x);                                               \
        if (s_ != CF_OK) return s_;                                       \
    } while (0)

/* tiff_tags.c: what the parse reads the file with.  A tag's name, the
 * slot of a tag (-1: not one the parser reads), bytes per value of a
 * field type (0: unknown type). */
const char *cf__tiff_slot_name(int s);
int cf__tiff_slot_of(uint16_t tag);
unsigned cf__tiff_type_size(uint16_t t);
/* The bytes held at [off, off + len), NULL when not all are; the first
 * byte of [off, end) not held (end when all are). */
const uint8_t *cf__tiff_known(const cf__tiff_parser *p, uint64_t off, uint64_t len);
uint64_t cf__tiff_first_unknown(const cf__tiff_parser *p, uint64_t off, uint64_t end);
/* What cf__tiff_get answers. */
enum { G_OK, G_NEED, G_EOF };
/* Point *out at bytes [off, off+len), or G_NEED with the range to fetch
 * in the context (from the first missing byte to at least off+want), or
 * G_EOF past the file's end. */
int cf__tiff_get(ctx *c, uint64_t off, uint64_t len, uint64_t want, const uint8_t **out);
/* A format error of IFD ifd (-1: the file), the message naming the file. */
cf_status cf__tiff_ferr(ctx *c, int ifd, cf_status code, const char *fmt, ...)
    CF__PRINTF(4, 5);
/* The file's size for messages: "N bytes", or "size unknown"; returns buf. */
const char *cf__tiff_eof_note(const ctx *c, char *buf, size_t n);
/* Note a problem the parse tolerates: one line of the file's warnings. */
void cf__tiff_warn(ctx *c, const char *fmt, ...) CF__PRINTF(2, 3);
bool cf__tiff_has(const ctx *c, int i, int s);
cf_status cf__tiff_missing(ctx *c, int i, int s);
/* Count `bytes` that pass 3 allocates for IFD i against the budget. */
cf_status cf__tiff_charge(ctx *c, int i, uint64_t bytes, const char *what);
/* Tag values of slot s of IFD i: up to maxn integers (*n of them), the
 * first one (def when absent), up to maxn doubles, the raw bytes (up to
 * limit), the text. */
cf_status cf__tiff_tag_uints(ctx *c, int i, int s, uint64_t maxn, uint64_t *out,
                             uint64_t *n);
cf_status cf__tiff_tag_u1(ctx *c, int i, int s, uint64_t def, uint64_t *v);
cf_status cf__tiff_tag_doubles(ctx *c, int i, int s, uint64_t maxn, double *out,
                               uint64_t *n);
cf_status cf__tiff_tag_bytes(ctx *c, int i, int s, uint32_t limit, char **out,
                             uint64_t *n);
cf_status cf__tiff_tag_text(ctx *c, int i, int s, char **out);
/* The nvals values of slot s of IFD i, *d pointing at their bytes. */
cf_status cf__tiff_tag_data(ctx *c, int i, int s, uint64_t nvals, const uint8_t **d);

/* tiff_chunks.c */
/* The chunk offsets and byte counts of IFD i into o. */
cf_status cf__tiff_parse_chunks(ctx *c, int i, cf__tiff_ifd *o);

/* tiff_ojpeg.c: old-style JPEG's header and chunks of IFD i. */
cf_status cf__tiff_parse_ojpeg(ctx *c, int i, cf__tiff_ifd *o);

/* Keep NEED_BYTES and memory errors, forget format errors of optional
 * tags. */
cf_status cf__tiff_soft(ctx *c, cf_status st);

/* tiff_geo.c: GeoTIFF tags, GDAL_NODATA and GDAL_METADATA of IFD i, best
 * effort. */
cf_status cf__tiff_parse_geo(ctx *c, int i, cf__tiff *t);
cf_status cf__tiff_parse_nodata(ctx *c, int i, cf__tiff *t);
cf_status cf__tiff_parse_meta(ctx *c, int i, cf__tiff *t, uint16_t spp);

#endif
