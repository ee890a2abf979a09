/*
 * stac.h - STAC Items read from JSON into a compact index (the layer of
 * python/cogfeed/stac.py's fast path, docs/datasets.md "STAC in").
 *
 * A 100,000-item ItemCollection is 150-250 MB of JSON; parsed into
 * Python dicts it takes 15 s and 860 MB.  Here each document is parsed
 * once, in place, and only what datasets use is kept: per item its id,
 * dates, cloud cover, bbox, the raw text of its properties and geometry
 * (for the rare reader who wants them), and per asset its href, type,
 * roles, projection fields and bands; strings live in one arena.  The
 * items' bboxes are then indexed by a packed Hilbert R-tree (geo.h) and
 * searched with dates and cloud cover in C.
 *
 * The reading rules are python/cogfeed/stac.py's item_from_dict, which
 * stays the reference: a document this parser does not take as it is (a
 * broken item, or a form it leaves to the reference, such as proj:projjson
 * or duplicate keys) is refused whole with CF_E_UNSUPPORTED and the
 * reason, and the caller reads that document with the reference, which
 * either names the fault precisely or builds the items.  Nothing is added
 * to the index by a refused document.
 */
#ifndef CF_STAC_H
#define CF_STAC_H

#include "../common/common.h"

typedef cf_stac_limits cf__stac_limits;

/* A string of the index: its offset in the arena (high 40 bits) and
 * length (low 24 bits; all ones: absent), in 8 bytes, as an index of
 * 100,000 items holds a few million of them. */
typedef uint64_t cf__sref;
#define CF__SREF_NONE ((cf__sref)0xFFFFFF)
#define CF__SREF_MAX_LEN 0xFFFFFEu
static inline cf__sref cf__sref_make(uint64_t off, uint32_t len) { return off << 24 | len; }
static inline uint64_t cf__sref_off(cf__sref r) { return r >> 24; }
static inline uint32_t cf__sref_len(cf__sref r) { return (uint32_t)(r & 0xFFFFFF); }
static inline int cf__sref_none(cf__sref r) { return (r & 0xFFFFFF) == 0xFFFFFF; }

typedef struct cf__stac_band {
    cf__sref name, common_name, data_type;
    double nodata, scale, offset;
    uint8_t has_nodata, has_scale, has_offset;
} cf__stac_band;

enum { CF__HREF_ABS = 0, CF__HREF_REL = 1 }; /* REL: resolve against the base */

/* An asset's projection-extension grid fields; the assets of an item
 * that share them share one (most items: one or two grids). */
typedef struct cf__stac_grid {
    double transform[6], proj_bbox[4];
    int64_t shape[2]; /* rows, columns */
    uint8_t has_transform, has_shape, has_proj_bbox;
} cf__stac_grid;
#define CF__NO_GRID UINT32_MAX

typedef struct cf__stac_asset {
    cf__sref key, href, type, roles; /* roles: NUL-terminated, nroles of them */
    cf__sref crs;                    /* "EPSG:32633", AUTH:CODE or WKT2 */
    uint32_t grid;                   /* in grids, or CF__NO_GRID */
    uint32_t first_band, nbands;
    uint8_t nroles, href_kind;
} cf__stac_asset;

#define CF__NO_TIME CF_STAC_NO_TIME

typedef struct cf__stac_item {
    cf__sref id, collection, properties, geometry, base;
    cf__sref dt[3];     /* datetime, start_datetime, end_datetime (raw text) */
    int64_t t0, t1;     /* UTC microseconds: start (or datetime), end (or datetime) */
    int64_t when;       /* datetime, else start_datetime (UTC microseconds) */
    double cloud;       /* NaN: none */
    double bbox[6];
    uint32_t first_asset, nassets, doc;
    int32_t feature;    /* index in its FeatureCollection, -1 for an Item document */
    uint8_t nbbox;      /* 0, 4 or 6 */
} cf__stac_item;

/* cogfeed.h's cf_stac. */
typedef struct cf_stac {
    cf__stac_item *items;
    cf__stac_asset *assets;
    cf__stac_band *bands;
    cf__stac_grid *grids;
    char *arena;
    size_t nitems, nassets, nbands, ngrids, arena_len;
    size_t cap_items, cap_assets, cap_bands, cap_grids, cap_arena;
    /* Short strings that repeat (asset keys, media types, roles, CRSs,
     * band names) are kept once: an open-addressing table of srefs. */
    cf__sref *intern;
    size_t nintern, cap_intern;
    uint32_t ndocs;
    struct cf__rtree *tree; /* built on the first search, dropped when items are added */
    uint32_t *tree_item;    /* box -> item */
} cf__stac;

void cf__stac_init(cf__stac *ix);
void cf__stac_free(cf__stac *ix);
/* The bytes of a string of the index (not NUL-terminated). */
static inline const char *cf__stac_str(const cf__stac *ix, cf__sref r) { return ix->arena + cf__sref_off(r); }

typedef enum cf__stac_doc {
    CF__STAC_ITEMS = 0,  /* the document's items were added */
    CF__STAC_OTHER = 1   /* a Catalog, Collection or another type: not read */
} cf__stac_doc;

/* Add the items of one document (an Item, or a FeatureCollection whose
 * features are items): base (may be NULL) is the document's location for
 * relative hrefs and the rules on where hrefs may point; without one an
 * item's absolute self link is its base.  *kind tells whether it held
 * items.  CF_E_UNSUPPORTED: refused whole (read it with the reference);
 * CF_E_LIMIT: more items than max_items; CF_E_NOMEM. */
cf_status cf__stac_add_json(cf__stac *ix, const char *json, size_t len, const char *base,
                            const cf__stac_limits *lim, cf__stac_doc *kind, cf_error *err);
/* The same over a memory map: after each item, pages before the parser
 * more than `drop_every` bytes behind it are let go (0: never). */
cf_status cf__stac_add_mapped(cf__stac *ix, const char *json, size_t len, size_t drop_every,
                              const char *base, const cf__stac_limits *lim, cf__stac_doc *kind,
                              cf_error *err);

/* Which items meet a search, by the rules of stac.py's Items.search:
 * match[i] 1 or 0 for every item.  `boxes`: nbox lon/lat boxes (one whose
 * west is past its east meets nothing; nbox 0: no spatial condition), looked up in an R-tree of the
 * items' bboxes (split at the antimeridian) built on the first search;
 * [t_lo, t_hi] UTC microseconds (CF__NO_TIME: open) against each item's
 * [start, end]; max_cloud (NaN: none) against eo:cloud_cover. */
cf_status cf__stac_match(cf__stac *ix, const double *boxes, size_t nbox, int64_t t_lo,
                         int64_t t_hi, double max_cloud, uint8_t *match, cf_error *err);
/* The R-tree is dropped when items are added (and rebuilt when needed). */
void cf__stac_drop_tree(cf__stac *ix);

/* An RFC 3339 date-time of len bytes at p, as stac.py's _time reads it
 * (fractions of any length, a leap second as :59, an offset of less than
 * a day), into UTC microseconds: 1, or 0 when it is not one (the
 * reference then refuses it, or reads a form this does not). */
int cf__stac_rfc3339(const char *p, size_t len, int64_t *us);
/* Asset href h of a document at base (NULL: none): NULL with *kind
 * CF__HREF_ABS (h as it is) or CF__HREF_REL (to be joined with the
 * base: a relative href stays on its base's store), or why it is
 * refused. */
const char *cf__stac_href_rule(const char *h, size_t hn, const char *base, size_t bn, uint8_t *kind);

/* The asset of item i picked by `name` (stac.py's _pick): its index in
 * ix->assets, -1 when none, -2 when several assets carry that common name
 * and neither the GeoTIFF nor the data role tells them apart. */
int64_t cf__stac_pick(const cf__stac *ix, size_t i, const char *name, size_t name_len);

#endif
