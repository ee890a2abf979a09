/*
 * tiff.c - TIFF / BigTIFF / GeoTIFF header parser fed by byte ranges.
 *
 * The parser keeps every byte range it was given (sorted and merged) and
 * re-parses from the top on each run.  Parsing happens in three passes so
 * that a file needs few round trips:
 *   1. walk the IFD chain (header, entry tables, next pointers),
 *   2. list the out-of-line data of the tags we use in every IFD and ask for
 *      the missing ones in one clustered request,
 *   3. decode every IFD, then build levels, masks and georeferencing.
 * Any read outside the known bytes stops the pass with CF__NEED_BYTES and a
 * generous range to fetch.  Every size that comes from the file is checked
 * against the file size and the caps of cogfeed.h before it is used.
 */
#include "tiff.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

struct cf_tiff_parser {
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

static const struct {
    uint16_t tag;
    const char *name;
} slot_info[NSLOT] = {
    {254, "NewSubfileType"},  {256, "ImageWidth"},
    {257, "ImageLength"},     {258, "BitsPerSample"},
    {259, "Compression"},     {262, "PhotometricInterpretation"},
    {273, "StripOffsets"},    {277, "SamplesPerPixel"},
    {278, "RowsPerStrip"},    {279, "StripByteCounts"},
    {284, "PlanarConfiguration"}, {317, "Predictor"},
    {322, "TileWidth"},       {323, "TileLength"},
    {324, "TileOffsets"},     {325, "TileByteCounts"},
    {339, "SampleFormat"},
    {347, "JPEGTables"},      {530, "YCbCrSubsampling"},
    {50674, "LercParameters"}, {33550, "ModelPixelScale"},
    {33922, "ModelTiepoint"}, {34264, "ModelTransformation"},
    {34735, "GeoKeyDirectory"}, {42112, "GDAL_METADATA"},
    {42113, "GDAL_NODATA"}, {34736, "GeoDoubleParams"},
    {34737, "GeoAsciiParams"},
    {266, "FillOrder"},       {332, "InkSet"},
    {338, "ExtraSamples"},    {318, "WhitePoint"},
    {529, "YCbCrCoefficients"}, {532, "ReferenceBlackWhite"},
    {292, "T4Options"},       {293, "T6Options"},
    {330, "SubIFDs"},
    {512, "JPEGProc"},        {513, "JPEGInterchangeFormat"},
    {514, "JPEGInterchangeFormatLength"}, {515, "JPEGRestartInterval"},
    {519, "JPEGQTables"},     {520, "JPEGDCTables"},
    {521, "JPEGACTables"},
    {269, "DocumentName"},    {270, "ImageDescription"},
    {271, "Make"},            {272, "Model"},
    {305, "Software"},        {306, "DateTime"},
    {315, "Artist"},          {316, "HostComputer"},
    {33432, "Copyright"},     {282, "XResolution"},
    {283, "YResolution"},     {296, "ResolutionUnit"},
    {280, "MinSampleValue"},  {281, "MaxSampleValue"},
};

static int slot_of(uint16_t tag) {
    for (int i = 0; i < NSLOT; i++)
        if (slot_info[i].tag == tag) return i;
    return -1;
}

/* Bytes per value of a TIFF field type; 0 for codes we do not know, whose
 * entries are skipped. */
static unsigned type_size(uint16_t t) {
    switch (t) {
    case 1: case 2: case 6: case 7: return 1;  /* BYTE ASCII SBYTE UNDEF */
    case 3: case 8: return 2;                  /* SHORT SSHORT */
    case 4: case 9: case 11: case 13: return 4; /* LONG SLONG FLOAT IFD */
    case 5: case 10: case 12: return 8;        /* RATIONAL SRATIONAL DOUBLE */
    case 16: case 17: case 18: return 8;       /* LONG8 SLONG8 IFD8 */
    default: return 0;
    }
}

static bool is_int_type(uint16_t t) {
    return t == 1 || t == 3 || t == 4 || t == 6 || t == 8 || t == 9 ||
           t == 13 || t == 16 || t == 17 || t == 18;
}

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
    cf_tiff_parser *p;
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

/* ------------------------------------------------------------------ */
/* Byte ranges                                                          */
/* ------------------------------------------------------------------ */

/* Index of the last range starting at or before `off`, or -1. */
static long find_range(const cf_tiff_parser *p, uint64_t off) {
    size_t lo = 0, hi = p->nr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->r[mid].off <= off) lo = mid + 1;
        else hi = mid;
    }
    return (long)lo - 1;
}

static const uint8_t *known(const cf_tiff_parser *p, uint64_t off,
                            uint64_t len) {
    long i = find_range(p, off);
    if (i < 0) return NULL;
    const range *r = &p->r[i];
    if (off - r->off > r->len || len > r->len - (off - r->off)) return NULL;
    return r->data + (off - r->off);
}

/* First byte of [off, end) that is not held (end when all are). */
static uint64_t first_unknown(const cf_tiff_parser *p, uint64_t off,
                              uint64_t end) {
    long i = find_range(p, off);
    if (i < 0) return off;
    uint64_t rend = p->r[i].off + p->r[i].len;
    if (rend <= off) return off;
    return rend < end ? rend : end;
}

enum { G_OK, G_NEED, G_EOF };

/* Point *out at bytes [off, off+len).  On G_NEED the context holds the
 * range to fetch: from the first missing byte to at least off+want and at
 * least TIFF_MIN_READ long, within the file. */
static int get(ctx *c, uint64_t off, uint64_t len, uint64_t want,
               const uint8_t **out) {
    uint64_t end, fs = c->p->file_size;
    if (!cf__add_u64(off, len, &end) || end > TIFF_OFFSET_LIMIT) return G_EOF;
    if (fs != UINT64_MAX && end > fs) return G_EOF;
    const uint8_t *d = known(c->p, off, len);
    if (d) {
        *out = d;
        if (end > c->hdr_end) c->hdr_end = end;
        return G_OK;
    }
    uint64_t first = first_unknown(c->p, off, end);
    uint64_t nend = end, w;
    if (want > len && cf__add_u64(off, want, &w) && w > nend) nend = w;
    if (nend - first < TIFF_MIN_READ &&
        cf__add_u64(first, TIFF_MIN_READ, &w))
        nend = w;
    if (nend > TIFF_OFFSET_LIMIT) nend = TIFF_OFFSET_LIMIT;
    if (fs != UINT64_MAX && nend > fs) nend = fs;
    c->need_off = first;
    c->need_len = nend - first;
    return G_NEED;
}

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

static cf_status ferr(ctx *c, int ifd, cf_status code, const char *fmt, ...)
    CF__PRINTF(4, 5);
static cf_status ferr(ctx *c, int ifd, cf_status code, const char *fmt, ...) {
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ifd >= 0)
        return cf__err(c->err, code, "%s: IFD %d: %s", c->p->name, ifd,
                       buf);
    return cf__err(c->err, code, "%s: %s", c->p->name, buf);
}

static const char *eof_note(const ctx *c, char *buf, size_t n) {
    if (c->p->file_size == UINT64_MAX) snprintf(buf, n, "size unknown");
    else snprintf(buf, n, "%llu bytes", (unsigned long long)c->p->file_size);
    return buf;
}

/* Note a problem the parse tolerates: one line of the file's warnings. */
static void warn(ctx *c, const char *fmt, ...) CF__PRINTF(2, 3);
static void warn(ctx *c, const char *fmt, ...) {
    size_t room = sizeof c->warn - c->nwarn;
    if (room < 2) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->warn + c->nwarn, room - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    c->nwarn += (size_t)n < room - 1 ? (size_t)n : room - 2;
    c->warn[c->nwarn++] = '\n';
    c->warn[c->nwarn] = 0;
}

#define TRY(x)                                                            \
    do {                                                                  \
        cf_status s_ = (x);                                               \
        if (s_ != CF_OK) return s_;                                       \
    } while (0)

/* ------------------------------------------------------------------ */
/* Pass 1: the IFD chain                                               */
/* ------------------------------------------------------------------ */

static void read_entries(ctx *c, rawifd *ri, const uint8_t *d, uint64_t n,
                         unsigned cntsz) {
    unsigned esz = c->big ? 20 : 12, inl = c->big ? 8 : 4;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *q = d + cntsz + i * esz;
        int s = slot_of(cf__rd16(q, c->be));
        if (s < 0 || ri->e[s].present) continue;
        uint16_t type = cf__rd16(q + 2, c->be);
        unsigned tsz = type_size(type);
        if (!tsz) continue; /* unknown type code: the entry is skipped */
        ent *e = &ri->e[s];
        e->present = true;
        e->type = type;
        e->count = c->big ? cf__rd64(q + 4, c->be) : cf__rd32(q + 4, c->be);
        if (!cf__mul_u64(e->count, tsz, &e->nbytes)) e->nbytes = UINT64_MAX;
        if (e->nbytes <= inl)
            e->off = ri->off + cntsz + i * esz + (c->big ? 12 : 8);
        else
            e->off = c->big ? cf__rd64(q + 12, c->be) : cf__rd32(q + 8, c->be);
    }
}

/* Read the entry table of the IFD at `off` into c->ifds[c->nifds] (and
 * count it).  CF__NEED_BYTES, CF_OK, or CF_E_FORMAT with the reason in
 * `why` and nothing added. */
static cf_status read_ifd_at(ctx *c, uint64_t off, bool sub, char *why,
                             size_t whylen) {
    unsigned cntsz = c->big ? 8 : 2, esz = c->big ? 20 : 12;
    unsigned nextsz = c->big ? 8 : 4;
    uint64_t hsize = c->big ? 16 : 8;
    char note[48];
    for (int k = 0; k < c->nifds; k++)
        if (c->ifds[k].off == off) {
            snprintf(why, whylen, "offset %llu points back to IFD %d (loop)",
                     (unsigned long long)off, k);
            return CF_E_FORMAT;
        }
    if (off < hsize) {
        snprintf(why, whylen, "offset %llu points into the file header",
                 (unsigned long long)off);
        return CF_E_FORMAT;
    }
    const uint8_t *d;
    int g = get(c, off, cntsz, TIFF_MIN_READ, &d);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF) {
        snprintf(why, whylen, "offset %llu is past end of file (%s)",
                 (unsigned long long)off, eof_note(c, note, sizeof note));
        return CF_E_FORMAT;
    }
    uint64_t n = c->big ? cf__rd64(d, c->be) : cf__rd16(d, c->be);
    if (n == 0) {
        snprintf(why, whylen, "IFD at offset %llu has no entries",
                 (unsigned long long)off);
        return CF_E_FORMAT;
    }
    if (n > TIFF_MAX_ENTRIES) {
        snprintf(why, whylen, "entry count %llu is absurd (more than %u)",
                 (unsigned long long)n, TIFF_MAX_ENTRIES);
        return CF_E_FORMAT;
    }
    uint64_t tot = cntsz + n * esz + nextsz;
    g = get(c, off, tot, tot + TIFF_MIN_READ, &d);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF) {
        snprintf(why, whylen,
                 "%llu entries at offset %llu run past end of file (%s)",
                 (unsigned long long)n, (unsigned long long)off,
                 eof_note(c, note, sizeof note));
        return CF_E_FORMAT;
    }
    rawifd *ri = &c->ifds[c->nifds];
    memset(ri, 0, sizeof *ri);
    ri->off = off;
    ri->end = off + tot;
    ri->sub = sub;
    c->nifds++;
    read_entries(c, ri, d, n, cntsz);
    const uint8_t *q = d + cntsz + n * esz;
    ri->next = c->big ? cf__rd64(q, c->be) : cf__rd32(q, c->be);
    return CF_OK;
}

static cf_status tag_uints(ctx *c, int i, int s, uint64_t maxn, uint64_t *out,
                           uint64_t *n);

/* IFD 0's SubIFDs (DNG, some scanners and GDAL-read files keep overviews
 * there): each listed IFD is read, not their chains, as GDAL does; a bad
 * one ends the list with a warning. */
static cf_status walk_subifds(ctx *c) {
    const ent *e = &c->ifds[0].e[S_SUBIFDS];
    if (!e->present || e->count == 0) return CF_OK;
    uint64_t want = e->count, room = (uint64_t)(CF_MAX_IFDS - c->nifds);
    if (want > room) {
        warn(c, "IFD 0 lists %llu SubIFDs: only %llu are read (limit of %d "
             "IFDs)", (unsigned long long)e->count, (unsigned long long)room,
             CF_MAX_IFDS);
        want = room;
    }
    uint64_t offs[CF_MAX_IFDS], n = 0;
    cf_error e1;
    cf_error *saved = c->err;
    c->err = &e1;
    cf_status st = tag_uints(c, 0, S_SUBIFDS, want, offs, &n);
    c->err = saved;
    if (st == CF__NEED_BYTES || st == CF_E_NOMEM) return st;
    if (st) {
        warn(c, "IFD 0: SubIFDs ignored: %s", e1.msg);
        return CF_OK;
    }
    for (uint64_t k = 0; k < n; k++) {
        char why[200];
        st = read_ifd_at(c, offs[k], true, why, sizeof why);
        if (st == CF__NEED_BYTES) return st;
        if (st) {
            warn(c, "SubIFD %llu of IFD 0: %s; it and the SubIFDs after it "
                 "are ignored, as GDAL does", (unsigned long long)k, why);
            break;
        }
    }
    return CF_OK;
}

static cf_status walk(ctx *c) {
    const uint8_t *h;
    char note[48];
    int g = get(c, 0, 8, TIFF_MIN_READ, &h);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF)
        return ferr(c, -1, CF_E_FORMAT, "too small to be a TIFF file (%s)",
                    eof_note(c, note, sizeof note));
    if (h[0] == 'I' && h[1] == 'I') c->be = false;
    else if (h[0] == 'M' && h[1] == 'M') c->be = true;
    else return ferr(c, -1, CF_E_FORMAT, "not a TIFF file (no II/MM mark)");
    uint16_t magic = cf__rd16(h + 2, c->be);
    uint64_t first;
    if (magic == 42) {
        c->big = false;
        first = cf__rd32(h + 4, c->be);
    } else if (magic == 43) {
        c->big = true;
        g = get(c, 0, 16, TIFF_MIN_READ, &h);
        if (g == G_NEED) return CF__NEED_BYTES;
        if (g == G_EOF)
            return ferr(c, -1, CF_E_FORMAT, "BigTIFF header is truncated (%s)",
                        eof_note(c, note, sizeof note));
        if (cf__rd16(h + 4, c->be) != 8 || cf__rd16(h + 6, c->be) != 0)
            return ferr(c, -1, CF_E_FORMAT,
                        "BigTIFF header has offset size %u, expected 8",
                        cf__rd16(h + 4, c->be));
        first = cf__rd64(h + 8, c->be);
    } else {
        return ferr(c, -1, CF_E_FORMAT, "not a TIFF file (version %u)", magic);
    }
    if (first == 0) return ferr(c, -1, CF_E_FORMAT, "the file has no IFD");

    /* The first IFD must be sound; a broken link after it ends the chain
     * there, and the IFDs before it are read, as GDAL reads them. */
    uint64_t off = first;
    while (off != 0) {
        int idx = c->nifds;
        if (idx >= CF_MAX_IFDS) {
            warn(c, "the IFD chain goes on after %d IFDs (limit): the rest "
                 "is ignored", CF_MAX_IFDS);
            break;
        }
        char why[200];
        cf_status st = read_ifd_at(c, off, false, why, sizeof why);
        if (st == CF__NEED_BYTES) return st;
        if (st && idx == 0) return ferr(c, 0, CF_E_FORMAT, "%s", why);
        if (st) {
            warn(c, "IFD %d (next of IFD %d): %s; the IFD chain ends there, "
                 "as GDAL reads it", idx, idx - 1, why);
            break;
        }
        off = c->ifds[idx].next;
    }
    return walk_subifds(c);
}

/* ------------------------------------------------------------------ */
/* Pass 2: fetch missing tag data in clustered requests                */
/* ------------------------------------------------------------------ */

typedef struct span {
    uint64_t lo, hi;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* What an IFD's chunk arrays are: tiles when any tile tag is present. */
static void chunk_slots(const ctx *c, int i, int *so, int *sc) {
    const ent *e = c->ifds[i].e;
    bool tiled = e[S_TW].present || e[S_TL].present || e[S_TILEOFF].present ||
                 e[S_TILECNT].present;
    *so = tiled ? S_TILEOFF : S_STRIPOFF;
    *sc = tiled ? S_TILECNT : S_STRIPCNT;
}

/* An entry's out-of-line data [*lo, *hi) when it lies within the file
 * (false for inline, absent or impossible data, which pass 3 reports). */
static bool data_span(const ctx *c, const ent *e, uint64_t *lo, uint64_t *hi) {
    unsigned inl = c->big ? 8 : 4;
    uint64_t fs = c->p->file_size;
    if (!e->present || e->nbytes <= inl || e->nbytes == UINT64_MAX ||
        !cf__add_u64(e->off, e->nbytes, hi) || *hi > TIFF_OFFSET_LIMIT ||
        (fs != UINT64_MAX && *hi > fs))
        return false;
    *lo = e->off;
    return true;
}

typedef struct owned {
    uint64_t lo, hi;
    int ifd, slot; /* slot -1: the IFD's own entries */
} owned;

static int owned_cmp(const void *a, const void *b) {
    const owned *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static const char *owned_name(const owned *o) {
    return o->slot < 0 ? "entries" : slot_info[o->slot].name;
}

/* Before any tag data is fetched:
 *  - no two IFDs' entries, chunk offset arrays or byte count arrays share
 *    bytes.  No writer does that, and it is how a tiny file declares a
 *    huge index: 2^26 tiles whose offsets and counts are one array of
 *    BYTEs that 256 IFDs all point at;
 *  - the memory the parse will take (header bytes held and still to
 *    fetch, 16 bytes per chunk indexed, JPEGTables) is within the
 *    budget, so a file over it is refused before its arrays are fetched
 *    or anything that large is allocated. */
/* a + b, or UINT64_MAX when that overflows: sums of sizes a file
 * declares must not wrap round to something small. */
static uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t s;
    return cf__add_u64(a, b, &s) ? s : UINT64_MAX;
}

/* Bytes pass 2 will fetch: the out-of-line data of every tag the parser
 * reads, in every IFD, that is not held yet -- the union, so that data
 * two IFDs share counts once.  (It fetches a tag's data whole even where
 * pass 3 reads only a few values, as of BitsPerSample or a GeoKey
 * directory: those count whole, as they would be held whole.) */
static cf_status tag_bytes_to_fetch(ctx *c, uint64_t *out) {
    *out = 0;
    span *v = cf__malloc((size_t)c->nifds * NSLOT * sizeof *v);
    if (!v) return ferr(c, -1, CF_E_NOMEM, "out of memory");
    size_t n = 0;
    for (int i = 0; i < c->nifds; i++)
        for (int s = 0; s < NSLOT; s++) {
            uint64_t lo, hi;
            if (data_span(c, &c->ifds[i].e[s], &lo, &hi) && !known(c->p, lo, hi - lo))
                v[n++] = (span){lo, hi};
        }
    qsort(v, n, sizeof *v, span_cmp);
    uint64_t sum = 0, end = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t lo = v[k].lo > end ? v[k].lo : end;
        if (v[k].hi > lo) sum = sat_add(sum, v[k].hi - lo);
        if (v[k].hi > end) end = v[k].hi;
    }
    free(v);
    *out = sum;
    return CF_OK;
}

static cf_status check_arrays(ctx *c) {
    uint64_t fetch = 0, index = 0, chunks = 0;
    TRY(tag_bytes_to_fetch(c, &fetch));
    owned *v = cf__malloc((size_t)c->nifds * 3 * sizeof *v);
    if (!v) return ferr(c, -1, CF_E_NOMEM, "out of memory");
    size_t n = 0;
    for (int i = 0; i < c->nifds; i++) {
        const rawifd *r = &c->ifds[i];
        v[n++] = (owned){r->off, r->end, i, -1};
        int so, sc;
        chunk_slots(c, i, &so, &sc);
        int slots[3] = {so, sc, S_JPEGTAB};
        uint64_t lo, hi, k = UINT64_MAX;
        for (int j = 0; j < 3; j++) {
            const ent *e = &r->e[slots[j]];
            bool in_file = data_span(c, e, &lo, &hi);
            if (j == 2) {
                if (in_file) index = sat_add(index, hi - lo); /* copied */
                continue;
            }
            if (in_file) v[n++] = (owned){lo, hi, i, slots[j]};
            /* Inline arrays (one or two values) count too; arrays that
             * cannot be read are reported by pass 3. */
            if (e->present && (in_file || e->nbytes <= (c->big ? 8u : 4u)))
                k = e->count < k ? e->count : k;
            else
                k = 0;
        }
        if (k == UINT64_MAX) k = 0;
        chunks = sat_add(chunks, k);
        index = sat_add(index, k > UINT64_MAX / 16 ? UINT64_MAX : 16 * k);
    }
    qsort(v, n, sizeof *v, owned_cmp);
    cf_status st = CF_OK;
    size_t top = 0; /* the span reaching furthest so far */
    for (size_t k = 1; k < n && st == CF_OK; k++) {
        if (v[k].lo < v[top].hi)
            st = ferr(c, v[k].ifd, CF_E_FORMAT,
                      "%s data [%llu, %llu) overlaps the %s of IFD %d "
                      "[%llu, %llu): tag arrays may not share bytes",
                      owned_name(&v[k]), (unsigned long long)v[k].lo,
                      (unsigned long long)v[k].hi, owned_name(&v[top]),
                      v[top].ifd, (unsigned long long)v[top].lo,
                      (unsigned long long)v[top].hi);
        if (v[k].hi > v[top].hi) top = k;
    }
    free(v);
    uint64_t need = sat_add(sat_add(c->p->total, fetch), index);
    if (st == CF_OK && need > c->p->budget)
        st = ferr(c, -1, CF_E_LIMIT,
                  "parsing its header needs %s%llu bytes of memory (%llu tiles "
                  "or strips indexed at 16 bytes each, %llu header bytes), "
                  "above the budget of %llu (io option header_memory_max)",
                  need == UINT64_MAX ? "more than " : "",
                  (unsigned long long)need, (unsigned long long)chunks,
                  (unsigned long long)sat_add(c->p->total, fetch),
                  (unsigned long long)c->p->budget);
    return st;
}

/* Count bytes pass 3 is about to allocate against the budget. */
static cf_status charge(ctx *c, int i, uint64_t bytes, const char *what) {
    uint64_t sum;
    if (!cf__add_u64(c->allocated, bytes, &sum) ||
        !cf__add_u64(sum, c->p->total, &sum) || sum > c->p->budget)
        return ferr(c, i, CF_E_LIMIT,
                    "%s of %llu bytes would pass the header memory budget of "
                    "%llu (io option header_memory_max)",
                    what, (unsigned long long)bytes,
                    (unsigned long long)c->p->budget);
    c->allocated += bytes;
    return CF_OK;
}

static cf_status fetch_tag_data(ctx *c) {
    size_t nmiss = 0;
    span *miss = cf__malloc((size_t)c->nifds * NSLOT * sizeof *miss);
    if (!miss) return ferr(c, -1, CF_E_NOMEM, "out of memory");
    uint64_t fs = c->p->file_size;
    for (int i = 0; i < c->nifds; i++) {
        for (int s = 0; s < NSLOT; s++) {
            const ent *e = &c->ifds[i].e[s];
            uint64_t end;
            if (!e->present || e->nbytes == 0 || e->nbytes == UINT64_MAX ||
                (s >= S_FIRST_META && i > 0))
                continue;
            if (!cf__add_u64(e->off, e->nbytes, &end) ||
                end > TIFF_OFFSET_LIMIT || (fs != UINT64_MAX && end > fs))
                continue; /* reported when the tag is decoded */
            if (known(c->p, e->off, e->nbytes)) continue;
            miss[nmiss].lo = first_unknown(c->p, e->off, end);
            miss[nmiss].hi = end;
            nmiss++;
        }
    }
    if (!nmiss) {
        free(miss);
        return CF_OK;
    }
    qsort(miss, nmiss, sizeof *miss, span_cmp);
    uint64_t lo = miss[0].lo, hi = miss[0].hi;
    for (size_t k = 1; k < nmiss; k++) {
        if (miss[k].lo > hi && miss[k].lo - hi > TIFF_CLUSTER_GAP) break;
        if (miss[k].hi > hi) hi = miss[k].hi;
    }
    free(miss);
    const uint8_t *d;
    int g = get(c, lo, hi - lo, hi - lo, &d);
    if (g != G_NEED) /* cannot happen: some byte in it is missing */
        return ferr(c, -1, CF_E_FORMAT, "inconsistent tag data ranges");
    return CF__NEED_BYTES;
}

/* ------------------------------------------------------------------ */
/* Tag values                                                           */
/* ------------------------------------------------------------------ */

static uint64_t val_u(const uint8_t *d, uint16_t type, bool be) {
    switch (type_size(type)) {
    case 1: return d[0];
    case 2: return cf__rd16(d, be);
    case 4: return cf__rd32(d, be);
    default: return cf__rd64(d, be);
    }
}

static double val_d(const uint8_t *d, uint16_t type, bool be) {
    switch (type) {
    case 11: {
        uint32_t u = cf__rd32(d, be);
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case 12: {
        uint64_t u = cf__rd64(d, be);
        double f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case 5: { /* zero denominators give NaN, never a trap */
        uint32_t n = cf__rd32(d, be), m = cf__rd32(d + 4, be);
        return m ? (double)n / m : NAN;
    }
    case 10: {
        int32_t n = (int32_t)cf__rd32(d, be), m = (int32_t)cf__rd32(d + 4, be);
        return m ? (double)n / m : NAN;
    }
    case 6: return (int8_t)d[0];
    case 8: return (int16_t)cf__rd16(d, be);
    case 9: return (int32_t)cf__rd32(d, be);
    case 17: return (double)(int64_t)cf__rd64(d, be);
    default: return (double)val_u(d, type, be);
    }
}

/* Locate the data of a present tag, checking that all of it lies in the
 * file.  *d points at the first `nvals` values. */
static cf_status tag_data(ctx *c, int i, int s, uint64_t nvals,
                          const uint8_t **d) {
    const ent *e = &c->ifds[i].e[s];
    char note[48];
    uint64_t end;
    if (e->nbytes == UINT64_MAX || !cf__add_u64(e->off, e->nbytes, &end) ||
        end > TIFF_OFFSET_LIMIT)
        return ferr(c, i, CF_E_FORMAT,
                    "%s has an absurd size (%llu values at offset %llu)",
                    slot_info[s].name, (unsigned long long)e->count,
                    (unsigned long long)e->off);
    if (c->p->file_size != UINT64_MAX && end > c->p->file_size)
        return ferr(c, i, CF_E_FORMAT,
                    "%s data (%llu bytes at offset %llu) is past end of file "
                    "(%s)",
                    slot_info[s].name, (unsigned long long)e->nbytes,
                    (unsigned long long)e->off, eof_note(c, note, sizeof note));
    uint64_t len = nvals * type_size(e->type);
    if (len == 0) {
        *d = NULL;
        return CF_OK;
    }
    int g = get(c, e->off, len, e->nbytes, d);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF)
        return ferr(c, i, CF_E_FORMAT, "%s data is past end of file",
                    slot_info[s].name);
    return CF_OK;
}

/* Read up to `maxn` integer values of a present tag into out. */
static cf_status tag_uints(ctx *c, int i, int s, uint64_t maxn, uint64_t *out,
                           uint64_t *n) {
    const ent *e = &c->ifds[i].e[s];
    if (!is_int_type(e->type))
        return ferr(c, i, CF_E_FORMAT, "%s has field type %u, not an integer",
                    slot_info[s].name, e->type);
    uint64_t k = e->count < maxn ? e->count : maxn;
    const uint8_t *d;
    TRY(tag_data(c, i, s, k, &d));
    unsigned tsz = type_size(e->type);
    for (uint64_t j = 0; j < k; j++) out[j] = val_u(d + j * tsz, e->type, c->be);
    *n = k;
    return CF_OK;
}

/* One integer: `def` when the tag is absent. */
static cf_status tag_u1(ctx *c, int i, int s, uint64_t def, uint64_t *v) {
    *v = def;
    if (!c->ifds[i].e[s].present) return CF_OK;
    uint64_t n;
    TRY(tag_uints(c, i, s, 1, v, &n));
    if (n == 0)
        return ferr(c, i, CF_E_FORMAT, "%s has no value", slot_info[s].name);
    return CF_OK;
}

static cf_status tag_doubles(ctx *c, int i, int s, uint64_t maxn, double *out,
                             uint64_t *n) {
    const ent *e = &c->ifds[i].e[s];
    if (e->type == 2 || e->type == 7)
        return ferr(c, i, CF_E_FORMAT, "%s has field type %u, not a number",
                    slot_info[s].name, e->type);
    uint64_t k = e->count < maxn ? e->count : maxn;
    const uint8_t *d;
    TRY(tag_data(c, i, s, k, &d));
    unsigned tsz = type_size(e->type);
    for (uint64_t j = 0; j < k; j++) out[j] = val_d(d + j * tsz, e->type, c->be);
    *n = k;
    return CF_OK;
}

/* A copy of a byte or ASCII tag of at most `limit` bytes, NUL-terminated
 * even when the file's string is not; *len is its length (without the
 * NUL).  An empty tag gives an empty string. */
static cf_status tag_bytes(ctx *c, int i, int s, uint32_t limit, char **out,
                           size_t *len) {
    const ent *e = &c->ifds[i].e[s];
    *out = NULL;
    *len = 0;
    if (e->nbytes != UINT64_MAX && e->nbytes > limit)
        return ferr(c, i, CF_E_LIMIT, "%s is %llu bytes (limit %u)",
                    slot_info[s].name, (unsigned long long)e->nbytes, limit);
    if (type_size(e->type) != 1)
        return ferr(c, i, CF_E_FORMAT, "%s has field type %u, not bytes or text",
                    slot_info[s].name, e->type);
    const uint8_t *d;
    TRY(tag_data(c, i, s, e->count, &d));
    char *t = cf__malloc((size_t)e->count + 1);
    if (!t) return ferr(c, i, CF_E_NOMEM, "out of memory");
    if (e->count) memcpy(t, d, (size_t)e->count);
    t[e->count] = 0;
    *out = t;
    *len = (size_t)e->count;
    return CF_OK;
}

static cf_status tag_text(ctx *c, int i, int s, char **out) {
    size_t len;
    return tag_bytes(c, i, s, TIFF_MAX_TEXT, out, &len);
}

/* ------------------------------------------------------------------ */
/* Pass 3: one IFD                                                      */
/* ------------------------------------------------------------------ */

static bool has(const ctx *c, int i, int s) { return c->ifds[i].e[s].present; }

static cf_status missing(ctx *c, int i, int s) {
    return ferr(c, i, CF_E_FORMAT, "missing required tag %s",
                slot_info[s].name);
}

/* All values of a per-sample tag must agree; *v gets the value. */
static cf_status per_sample(ctx *c, int i, int s, uint64_t spp, uint64_t def,
                            uint64_t *v) {
    *v = def;
    if (!has(c, i, s)) return CF_OK;
    uint64_t *vals = cf__malloc((size_t)spp * sizeof *vals), n = 0;
    if (!vals) return ferr(c, i, CF_E_NOMEM, "out of memory");
    cf_status st = tag_uints(c, i, s, spp, vals, &n);
    if (st == CF_OK && n == 0)
        st = ferr(c, i, CF_E_FORMAT, "%s has no value", slot_info[s].name);
    for (uint64_t k = 1; st == CF_OK && k < n; k++)
        if (vals[k] != vals[0])
            st = ferr(c, i, CF_E_UNSUPPORTED,
                      "%s differs between samples (%llu for sample 0, %llu "
                      "for sample %llu)",
                      slot_info[s].name, (unsigned long long)vals[0],
                      (unsigned long long)vals[k], (unsigned long long)k);
    if (st == CF_OK) *v = vals[0];
    free(vals);
    return st;
}

static void set_comp_name(cf_tiff_ifd *o) {
    const char *n = NULL;
    switch (o->compression) {
    case CF_COMP_NONE: n = "NONE"; break;
    /* GDAL's names (COMPRESSION metadata); 32771 as the registry has it */
    case 2: n = "CCITTRLE"; break;
    case 3: n = "CCITTFAX3"; break;
    case 4: n = "CCITTFAX4"; break;
    case 32771: n = "CCITTRLEW"; break;
    case CF_COMP_LZW: n = "LZW"; break;
    case CF_COMP_OJPEG: n = "OJPEG"; break;
    case CF_COMP_JPEG: n = "JPEG"; break;
    /* GDAL writes 8 and calls both codes DEFLATE. */
    case CF_COMP_ADOBE_DEFLATE: n = "DEFLATE"; break;
    case CF_COMP_DEFLATE: n = "DEFLATE"; break;
    case CF_COMP_PACKBITS: n = "PACKBITS"; break;
    case CF_COMP_LERC:
        n = o->lerc_sub == CF_LERC_DEFLATE ? "LERC_DEFLATE"
            : o->lerc_sub == CF_LERC_ZSTD  ? "LERC_ZSTD"
                                           : "LERC";
        break;
    case CF_COMP_ZSTD: n = "ZSTD"; break;
    case CF_COMP_WEBP: n = "WEBP"; break;
    case 34925: n = "LZMA"; break;
    case 34712: n = "JPEG2000"; break;
    default: break;
    }
    if (n) snprintf(o->comp_name, sizeof o->comp_name, "%s", n);
    else snprintf(o->comp_name, sizeof o->comp_name, "UNKNOWN(%u)",
                  (unsigned)o->compression);
}

/* libtiff's size of uncompressed chunk k (TIFFVStripSize64 with the
 * strip's rows, TIFFTileSize64). */
static uint64_t none_bytes(const cf_tiff_ifd *o, uint64_t k, uint64_t spc) {
    uint64_t rows = o->chunk_h;
    if (!o->tiled) {
        uint64_t row0 = (k % o->chunks_down) * o->chunk_h;
        if (o->height - row0 < rows) rows = o->height - row0;
    }
    return cf__chunk_bytes(o->chunk_w, spc, o->bits, rows);
}

static cf_status parse_chunks(ctx *c, int i, cf_tiff_ifd *o) {
    int so, sc;
    uint64_t cw, ch;
    /* As libtiff: the tile size makes a file tiled, and the offsets and
     * byte counts are one field whichever tag holds them (some writers put
     * tile offsets in StripOffsets), TileOffsets winning when both are. */
    o->tiled = has(c, i, S_TW) || has(c, i, S_TL);
    so = has(c, i, S_TILEOFF) ? S_TILEOFF : S_STRIPOFF;
    sc = has(c, i, S_TILECNT) ? S_TILECNT : S_STRIPCNT;
    if (o->tiled) {
        if (!has(c, i, S_TW)) return missing(c, i, S_TW);
        if (!has(c, i, S_TL)) return missing(c, i, S_TL);
        TRY(tag_u1(c, i, S_TW, 0, &cw));
        TRY(tag_u1(c, i, S_TL, 0, &ch));
        /* The spec wants multiples of 16; like GDAL we accept any size. */
        if (cw == 0 || ch == 0)
            return ferr(c, i, CF_E_FORMAT, "%s is 0",
                        cw == 0 ? "TileWidth" : "TileLength");
        if (cw > CF_MAX_DIMENSION || ch > CF_MAX_DIMENSION)
            return ferr(c, i, CF_E_LIMIT, "tile size %llux%llu exceeds the "
                        "limit of %u", (unsigned long long)cw,
                        (unsigned long long)ch, CF_MAX_DIMENSION);
    } else {
        cw = o->width;
        TRY(tag_u1(c, i, S_RPS, o->height, &ch));
        if (ch == 0) return ferr(c, i, CF_E_FORMAT, "RowsPerStrip is 0");
        if (ch > o->height) ch = o->height; /* 2^32-1 means one strip */
    }
    if (!has(c, i, so)) return missing(c, i, o->tiled ? S_TILEOFF : so);
    if (!has(c, i, sc)) return missing(c, i, o->tiled ? S_TILECNT : sc);
    o->chunk_w = (uint32_t)cw;
    o->chunk_h = (uint32_t)ch;
    o->chunks_across = (uint32_t)((o->width + cw - 1) / cw);
    o->chunks_down = (uint32_t)((o->height + ch - 1) / ch);

    /* Decoded bytes of one chunk, rows padded to whole bytes. */
    uint64_t spc = o->planar == 2 ? 1 : o->samples;
    if (!cf__chunk_bytes(cw, spc, o->bits, ch))
        return ferr(c, i, CF_E_LIMIT,
                    "a %s of %llux%llu pixels x %llu samples x %u bits "
                    "exceeds the limit of %llu bytes",
                    o->tiled ? "tile" : "strip", (unsigned long long)cw,
                    (unsigned long long)ch, (unsigned long long)spc, o->bits,
                    (unsigned long long)CF_MAX_CHUNK_BYTES);

    uint64_t n = (uint64_t)o->chunks_across * o->chunks_down;
    if (o->planar == 2) n *= o->samples;
    if (n > CF_MAX_CHUNKS)
        return ferr(c, i, CF_E_LIMIT, "%llu %s exceed the limit of %llu",
                    (unsigned long long)n, o->tiled ? "tiles" : "strips",
                    (unsigned long long)CF_MAX_CHUNKS);
    const ent *eo = &c->ifds[i].e[so], *ec = &c->ifds[i].e[sc];
    if (eo->count != ec->count)
        return ferr(c, i, CF_E_FORMAT, "%s has %llu entries but %s has %llu",
                    slot_info[so].name, (unsigned long long)eo->count,
                    slot_info[sc].name, (unsigned long long)ec->count);
    if (eo->count < n)
        return ferr(c, i, CF_E_FORMAT, "%s has %llu entries, expected %llu",
                    slot_info[so].name, (unsigned long long)eo->count,
                    (unsigned long long)n);
    /* Each chunk takes at least 4 bytes of the file (two SHORT entries): a
     * huge tile count in a small file fails here, and both arrays must be
     * in the file, before anything is allocated. */
    uint64_t fs = c->p->file_size;
    if (fs != UINT64_MAX && n > fs / 4)
        return ferr(c, i, CF_E_FORMAT,
                    "%llu %s cannot fit in a file of %llu bytes",
                    (unsigned long long)n, o->tiled ? "tiles" : "strips",
                    (unsigned long long)fs);
    const uint8_t *dd;
    TRY(tag_data(c, i, so, n, &dd));
    TRY(tag_data(c, i, sc, n, &dd));
    TRY(charge(c, i, n * 2 * sizeof(uint64_t), "the tile index"));
    o->nchunks = n;
    o->offsets = cf__malloc((size_t)n * sizeof *o->offsets);
    o->counts = cf__malloc((size_t)n * sizeof *o->counts);
    if (!o->offsets || !o->counts)
        return ferr(c, i, CF_E_NOMEM, "out of memory for %llu chunk offsets",
                    (unsigned long long)n);
    uint64_t got;
    TRY(tag_uints(c, i, so, n, o->offsets, &got));
    TRY(tag_uints(c, i, sc, n, o->counts, &got));
    /* An uncompressed chunk is read as libtiff reads it: its decoded size
     * from its offset, whatever its byte count says (TIFFReadEncodedStrip
     * and TIFFReadEncodedTile read uncompressed data straight into the
     * caller's buffer, the strip or tile size, and GDAL reads through
     * them); so a byte count too small or too large for the bits per
     * sample is ignored.  A count of 0 stays a sparse chunk.  Not for
     * what GDAL reads through libtiff's RGBA interface (YCbCr, 8-bit CMYK
     * and CIELab): there a short count fails GDAL's read, and cogfeed's. */
    int rgba = o->photometric == 6 ||
               (o->bits == 8 && (o->photometric == 5 || o->photometric == 8));
    if (o->compression == CF_COMP_NONE && !rgba)
        for (uint64_t k = 0; k < n; k++)
            if (o->counts[k]) o->counts[k] = none_bytes(o, k, spc);
    const char *what = o->tiled ? "tile" : "strip";
    uint64_t past = 0, first_past = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t cnt = o->counts[k], end;
        if (cnt == 0) continue; /* sparse chunk: reads as nodata or 0 */
        if (cnt > CF_MAX_CHUNK_BYTES)
            return ferr(c, i, CF_E_LIMIT,
                        "%s %llu is %llu bytes, above the limit of %llu", what,
                        (unsigned long long)k, (unsigned long long)cnt,
                        (unsigned long long)CF_MAX_CHUNK_BYTES);
        if (!cf__add_u64(o->offsets[k], cnt, &end) ||
            end > TIFF_OFFSET_LIMIT || (fs != UINT64_MAX && end > fs)) {
            if (!past++) first_past = k;
        }
    }
    /* A truncated file opens, as in GDAL: the chunks it still holds read,
     * and a read that needs a missing one fails naming it. */
    if (past)
        warn(c, "IFD %d: %llu of %llu %ss lie past the end of the file "
             "(truncated?), the first is %s %llu: reading them fails", i,
             (unsigned long long)past, (unsigned long long)n, what, what,
             (unsigned long long)first_past);
    return CF_OK;
}

static cf_status soft(ctx *c, cf_status st);

/* Up to n numbers of an optional tag into out, which keeps its defaults
 * when the tag is absent or has too few values (libtiff then ignores it
 * with a warning). */
static cf_status tag_floats(ctx *c, int i, int s, uint64_t n, float *out) {
    if (!has(c, i, s)) return CF_OK;
    double d[6];
    uint64_t got = 0;
    cf_status st = tag_doubles(c, i, s, n, d, &got);
    if (st) return soft(c, st); /* a malformed one is ignored */
    if (got == n)
        for (uint64_t k = 0; k < n; k++) out[k] = (float)d[k];
    return CF_OK;
}

/* Tags that say how samples are laid out or coloured, with libtiff's
 * defaults (tif_aux.c) where they are absent. */
static cf_status parse_sample_tags(ctx *c, int i, cf_tiff_ifd *o) {
    uint64_t v;
    TRY(tag_u1(c, i, S_FILLORDER, 1, &v));
    o->fill_order = v == 2 ? 2 : 1; /* libtiff ignores other values */
    TRY(tag_u1(c, i, S_INKSET, 1, &v));
    o->inkset = v > 0xffff ? 0 : (uint16_t)v;
    o->extra_samples = 0;
    if (has(c, i, S_EXTRA)) {
        uint64_t n = c->ifds[i].e[S_EXTRA].count;
        o->extra_samples = n < o->samples ? (uint16_t)n : o->samples;
    }
    TRY(tag_u1(c, i, S_T4OPT, 0, &v));
    o->t4_options = (uint32_t)v;
    TRY(tag_u1(c, i, S_T6OPT, 0, &v));
    o->t6_options = (uint32_t)v;
    /* D50, computed in float as libtiff's default is. */
    const float x0 = 96.4250F, y0 = 100.0F, z0 = 82.4680F;
    o->white_point[0] = x0 / (x0 + y0 + z0);
    o->white_point[1] = y0 / (x0 + y0 + z0);
    TRY(tag_floats(c, i, S_WHITEPT, 2, o->white_point));
    o->ycbcr_coef[0] = 0.299f;
    o->ycbcr_coef[1] = 0.587f;
    o->ycbcr_coef[2] = 0.114f;
    TRY(tag_floats(c, i, S_YCBCRCOEF, 3, o->ycbcr_coef));
    float top = o->bits < 32 ? (float)((1u << o->bits) - 1) : 255.0f;
    for (int k = 0; k < 3; k++) {
        o->ref_bw[2 * k] = 0;
        o->ref_bw[2 * k + 1] = top;
    }
    if (o->photometric == 6) {
        o->ref_bw[1] = o->ref_bw[3] = o->ref_bw[5] = 255.0f;
        o->ref_bw[2] = o->ref_bw[4] = 128.0f;
    }
    return tag_floats(c, i, S_REFBW, 6, o->ref_bw);
}

/* ------------------------------------------------------------------ */
/* Old-style JPEG (compression 6)                                       */
/* ------------------------------------------------------------------ */

/* libtiff's tif_ojpeg.c (what GDAL reads these files with) does not hand
 * libjpeg the file's bytes: it collects the tables, restart interval and
 * frame from the JPEGInterchangeFormat stream -- or from the first strip,
 * or from the JPEG*Tables tags -- and writes a JPEG header of its own
 * (SOI, DQT, DHT, DRI, SOF, SOS) in front of the entropy-coded data, which
 * it reads from the end of that header on, strip after strip, with an
 * RSTn marker between strips.  For several strips it sets the restart
 * interval to the MCUs of one strip (unless the stream has a DRI), so
 * every strip is one restart interval and decodes on its own.
 *
 * This section makes the same header, once per IFD, into jpeg_tables
 * (SOF first, its height patched per chunk by the codec) and points the
 * chunks at the entropy data: the strips themselves, or, when the
 * JPEGInterchangeFormat stream holds the entropy data, that stream as one
 * chunk of the whole image (libjpeg reads it all from there before it
 * ever gets to the strips).  Layouts it cannot read the way libtiff does
 * are not errors of the parse: the reason goes to ojpeg_why, and the
 * codec check refuses the IFD with it when a read can touch it. */

#define OJ_MAX_HEADER (1u << 20) /* bytes of markers before the SOS */

typedef struct oj_seg {
    const uint8_t *d; /* a marker segment in held bytes, or NULL */
    size_t n;
    uint64_t off;     /* or: table data in the file (tables tags) */
    unsigned kind;    /* tables tags: 0 DQT, 1 DC, 2 AC */
} oj_seg;

typedef struct oj_state {
    oj_seg q[4], dc[4], ac[4];
    int have_ri, sof, sos;
    uint16_t ri;
    uint8_t sof_id, nc, c[3], hv[3], tq[3], cs[3], tda[3];
    uint16_t sof_y, sof_x;
} oj_state;

static cf_status oj_refuse(cf_tiff_ifd *o, cf_status code, const char *fmt,
                           ...) CF__PRINTF(3, 4);
static cf_status oj_refuse(cf_tiff_ifd *o, cf_status code, const char *fmt,
                           ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(o->ojpeg_why, sizeof o->ojpeg_why,
                     "old-style JPEG (OJPEG): ");
    vsnprintf(o->ojpeg_why + n, sizeof o->ojpeg_why - (size_t)n, fmt, ap);
    va_end(ap);
    o->ojpeg_status = code;
    return CF_OK;
}

/* Bytes [at, at+n) of the stream that ends at `end`: CF_OK, CF__NEED_BYTES,
 * or 1 when they are not there (past `end` or the file). */
static cf_status oj_bytes(ctx *c, uint64_t at, uint64_t n, uint64_t end,
                          const uint8_t **d) {
    uint64_t e;
    if (!cf__add_u64(at, n, &e) || e > end) return (cf_status)1;
    int g = get(c, at, n, n > 4096 ? n : 4096, d);
    if (g == G_NEED) return CF__NEED_BYTES;
    return g == G_EOF ? (cf_status)1 : CF_OK;
}

#define OJ_GET(at, n, end, d, what)                                        \
    do {                                                                  \
        cf_status s_ = oj_bytes(c, at, n, end, d);                        \
        if (s_ == CF__NEED_BYTES) return s_;                              \
        if (s_)                                                           \
            return oj_refuse(o, CF_E_FORMAT, "%s runs past the end of %s",\
                             what, src);                                  \
    } while (0)

/* The markers of the stream at [start, end) up to its SOS, as
 * OJPEGReadHeaderInfoSec reads them; *hdr_end is where the SOS ends
 * (start when the stream holds no marker: tables come from the tags).
 * libtiff reads the JPEGInterchangeFormat stream on into strip 0 when it
 * ends between two markers before the SOS: so does this, with `more`
 * ([more[0], more[1]), strip 0; NULL when there is none), and *in_more
 * is then set: the SOS ends in strip 0. */
static cf_status oj_walk(ctx *c, cf_tiff_ifd *o, oj_state *j, uint64_t start,
                         uint64_t end, const char *src, const uint64_t *more,
                         uint64_t *hdr_end, int *in_more) {
    uint64_t at = start;
    const uint8_t *d;
    *hdr_end = start;
    *in_more = 0;
    if (end - start > OJ_MAX_HEADER) end = start + OJ_MAX_HEADER;
    for (;;) {
        if (at == end && more && !*in_more && at > start) {
            at = more[0];
            end = more[1];
            if (end - at > OJ_MAX_HEADER) end = at + OJ_MAX_HEADER;
            src = "strip 0 (where the JPEGInterchangeFormat stream goes on)";
            *in_more = 1;
        }
        OJ_GET(at, 1, end, &d, "the JPEG header");
        if (d[0] != 0xFF) break;
        unsigned m = 0xFF;
        while (m == 0xFF) {
            at++;
            OJ_GET(at, 1, end, &d, "the JPEG header");
            m = d[0];
        }
        at++;
        if (m == 0xD8) continue; /* SOI */
        OJ_GET(at, 2, end, &d, "the JPEG header");
        unsigned len = (unsigned)d[0] << 8 | d[1];
        if (len < 2)
            return oj_refuse(o, CF_E_FORMAT, "marker 0x%02X of %s has length "
                             "%u", m, src, len);
        const uint8_t *s;
        OJ_GET(at - 2, len + 2, end, &s, "a JPEG marker segment");
        const uint8_t *b = s + 4;
        unsigned bn = len - 2;
        if (m == 0xFE || (m >= 0xE0 && m <= 0xEF)) { /* COM, APPn */
        } else if (m == 0xDD) { /* DRI */
            if (len != 4)
                return oj_refuse(o, CF_E_FORMAT, "corrupt DRI marker in %s",
                                 src);
            j->have_ri = 1;
            j->ri = (uint16_t)(b[0] << 8 | b[1]);
        } else if (m == 0xDB) { /* DQT: 8-bit tables, one or more */
            if (bn == 0 || bn % 65)
                return oj_refuse(o, CF_E_FORMAT, "corrupt DQT marker in %s "
                                 "(%u bytes; 16-bit tables are not baseline)",
                                 src, bn);
            for (unsigned k = 0; k < bn; k += 65) {
                if (b[k] > 3)
                    return oj_refuse(o, CF_E_FORMAT, "corrupt DQT marker in "
                                     "%s (table %u)", src, b[k]);
                j->q[b[k]] = (oj_seg){b + k, 65, 0, 0};
            }
        } else if (m == 0xC4) { /* DHT: kept whole, filed by its first table */
            /* A table is a class/id byte and 16 code counts at least. */
            if (bn < 17)
                return oj_refuse(o, CF_E_FORMAT, "corrupt DHT marker in %s "
                                 "(%u bytes)", src, bn);
            unsigned cls = b[0] >> 4, id = b[0] & 15;
            if (cls > 1 || id > 3)
                return oj_refuse(o, CF_E_FORMAT, "corrupt DHT marker in %s",
                                 src);
            (cls ? j->ac : j->dc)[id] = (oj_seg){s, len + 2, 0, 0};
        } else if (m == 0xC0 || m == 0xC1 || m == 0xC3) {
            if (j->sof)
                return oj_refuse(o, CF_E_FORMAT, "two SOF markers in %s", src);
            if (m == 0xC3)
                return oj_refuse(o, CF_E_UNSUPPORTED, "lossless JPEG (SOF3) "
                                 "is not supported (libjpeg-turbo 2 does not "
                                 "decode it)");
            if (len < 11 || (len - 8) % 3 || (len - 8) / 3 != 3 || b[5] != 3)
                return oj_refuse(o, CF_E_FORMAT, "the SOF marker of %s does not "
                                 "describe 3 components (the tags say 3 "
                                 "samples)", src);
            if (b[0] != 8)
                return oj_refuse(o, CF_E_FORMAT, "%s has %u-bit samples, the "
                                 "tags 8", src, b[0]);
            j->sof = 1;
            j->sof_id = (uint8_t)m;
            j->sof_y = (uint16_t)(b[1] << 8 | b[2]);
            j->sof_x = (uint16_t)(b[3] << 8 | b[4]);
            for (int k = 0; k < 3; k++) {
                j->c[k] = b[6 + 3 * k];
                j->hv[k] = b[7 + 3 * k];
                j->tq[k] = b[8 + 3 * k];
            }
        } else if (m == 0xDA) { /* SOS: the header ends with it */
            if (!j->sof || len != 12 || b[0] != 3)
                return oj_refuse(o, CF_E_FORMAT, "corrupt SOS marker in %s",
                                 src);
            for (int k = 0; k < 3; k++) {
                j->cs[k] = b[1 + 2 * k];
                j->tda[k] = b[2 + 2 * k];
            }
            j->sos = 1;
            *hdr_end = at + len;
            return CF_OK;
        } else {
            return oj_refuse(o, CF_E_FORMAT, "unknown marker type 0x%02X in %s "
                             "(libtiff refuses it too)", m, src);
        }
        at += len;
    }
    if (j->sof)
        return oj_refuse(o, CF_E_FORMAT, "%s has a SOF but no SOS marker", src);
    return CF_OK;
}

/* The JPEGQTables, JPEGDCTables and JPEGACTables tags, as
 * OJPEGReadHeaderInfoSecTables*Table reads them: one file offset per
 * component, 0 or a repeat of the previous one meaning "same table". */
static cf_status oj_tables(ctx *c, int i, cf_tiff_ifd *o, oj_state *j) {
    static const int slot[3] = {S_JQTAB, S_JDCTAB, S_JACTAB};
    uint64_t fs = c->p->file_size;
    for (int t = 0; t < 3; t++) {
        const char *name = slot_info[slot[t]].name;
        uint64_t off[3] = {0, 0, 0}, n = 0;
        if (!has(c, i, slot[t]))
            return oj_refuse(o, CF_E_FORMAT, "no JPEG header in the stream "
                             "and no %s tag (missing JPEG tables)", name);
        uint64_t cnt = c->ifds[i].e[slot[t]].count;
        if (cnt == 0 || cnt > 3)
            return oj_refuse(o, CF_E_FORMAT, "%s has %llu values, expected 1 "
                             "to 3 (one per component)", name,
                             (unsigned long long)cnt);
        cf_error e1;
        cf_error *saved = c->err;
        c->err = &e1;
        cf_status st = tag_uints(c, i, slot[t], 3, off, &n);
        c->err = saved;
        if (st == CF__NEED_BYTES || st == CF_E_NOMEM) return st;
        if (st) return oj_refuse(o, CF_E_FORMAT, "%s", e1.msg);
        if (off[0] == 0)
            return oj_refuse(o, CF_E_FORMAT, "%s has no first table", name);
        for (int m = 0; m < 3; m++) {
            uint8_t *sel = t == 0 ? &j->tq[m] : &j->tda[m];
            if (off[m] == 0 || (m > 0 && off[m] == off[m - 1])) {
                /* the previous component's table */
                if (t == 0) *sel = j->tq[m - 1];
                else if (t == 1) *sel = j->tda[m - 1] & 0xF0;
                else *sel = (uint8_t)(*sel | (j->tda[m - 1] & 15));
                continue;
            }
            if (m == 2 && off[2] == off[0])
                return oj_refuse(o, CF_E_FORMAT, "corrupt %s value", name);
            const uint8_t *d;
            uint64_t end = fs == UINT64_MAX ? TIFF_OFFSET_LIMIT : fs;
            char src[64];
            snprintf(src, sizeof src, "the file (%s table %d)", name, m);
            uint64_t len = 64;
            if (t > 0) { /* 16 counts, then their sum of values */
                OJ_GET(off[m], 16, end, &d, "a table");
                len = 16;
                for (int k = 0; k < 16; k++) len += d[k];
                if (len > 16 + 256)
                    return oj_refuse(o, CF_E_FORMAT, "%s table %d has %llu "
                                     "codes, more than 256", name, m,
                                     (unsigned long long)(len - 16));
            }
            OJ_GET(off[m], len, end, &d, "a table");
            oj_seg *g = t == 0 ? &j->q[m] : t == 1 ? &j->dc[m] : &j->ac[m];
            *g = (oj_seg){d, (size_t)len, off[m], (unsigned)t};
            if (t == 0) *sel = (uint8_t)m;
            else if (t == 1) *sel = (uint8_t)(m << 4);
            else *sel = (uint8_t)(*sel | m);
        }
    }
    return CF_OK;
}

static uint8_t *oj_put(uint8_t *w, const void *d, size_t n) {
    memcpy(w, d, n);
    return w + n;
}

/* The header libtiff writes (OJPEGWriteStream*), SOF first. */
static cf_status oj_header(ctx *c, int i, cf_tiff_ifd *o, const oj_state *j,
                           uint16_t ri) {
    size_t n = 2 + 19 + (ri ? 6 : 0) + 14;
    const oj_seg *all[12];
    for (int k = 0; k < 4; k++) {
        all[k] = &j->q[k];
        all[4 + k] = &j->dc[k];
        all[8 + k] = &j->ac[k];
    }
    for (int k = 0; k < 12; k++)
        if (all[k]->d) n += all[k]->off || k < 4 ? 5 + all[k]->n : all[k]->n;
    TRY(charge(c, i, n, "old-style JPEG header"));
    uint8_t *h = cf__malloc(n), *w = h;
    if (!h) return ferr(c, i, CF_E_NOMEM, "out of memory");
    uint8_t sof[19] = {0xFF, j->sof_id, 0, 17, 8,
                       (uint8_t)(j->sof_y >> 8), (uint8_t)j->sof_y,
                       (uint8_t)(j->sof_x >> 8), (uint8_t)j->sof_x, 3};
    for (int k = 0; k < 3; k++) {
        sof[10 + 3 * k] = j->c[k];
        sof[11 + 3 * k] = j->hv[k];
        sof[12 + 3 * k] = j->tq[k];
    }
    w = oj_put(w, "\xFF\xD8", 2);
    w = oj_put(w, sof, 19);
    if (ri) {
        uint8_t dri[6] = {0xFF, 0xDD, 0, 4, (uint8_t)(ri >> 8), (uint8_t)ri};
        w = oj_put(w, dri, 6);
    }
    for (int k = 0; k < 12; k++) {
        const oj_seg *g = all[k];
        if (!g->d) continue;
        if (k < 4) { /* DQT of one table: id byte + 64 values */
            uint8_t m[5] = {0xFF, 0xDB, 0, 67, (uint8_t)k};
            w = oj_put(w, m, g->off ? 5 : 4);
            w = oj_put(w, g->d, g->n);
        } else if (g->off) { /* DHT from a tag */
            size_t len = 2 + 1 + g->n;
            uint8_t m[5] = {0xFF, 0xC4, (uint8_t)(len >> 8), (uint8_t)len,
                            (uint8_t)(k < 8 ? k - 4 : 16 | (k - 8))};
            w = oj_put(w, m, 5);
            w = oj_put(w, g->d, g->n);
        } else {
            w = oj_put(w, g->d, g->n);
        }
    }
    uint8_t sos[14] = {0xFF, 0xDA, 0, 12, 3};
    for (int k = 0; k < 3; k++) {
        sos[5 + 2 * k] = j->cs[k];
        sos[6 + 2 * k] = j->tda[k];
    }
    sos[11] = 0;
    sos[12] = 63;
    sos[13] = 0;
    w = oj_put(w, sos, 14);
    free(o->jpeg_tables);
    o->jpeg_tables = h;
    o->jpeg_tables_len = (size_t)(w - h);
    return CF_OK;
}

static cf_status parse_ojpeg(ctx *c, int i, cf_tiff_ifd *o) {
    /* What GDAL reads: YCbCr through libtiff's RGBA interface; it refuses
     * other old-style JPEG ("only supported through RGBA interface"). */
    /* Tiles: libtiff's frame is one tile wide and as tall as the image's
     * tile rows, every tile one restart interval (OJPEGReadHeaderInfo's
     * strile_width and strile_length_total), so one column of tiles reads
     * like strips; tiles of further columns fall outside that frame and
     * come out wrong, without an error, in GDAL. */
    if (o->tiled && o->chunks_across > 1)
        return oj_refuse(o, CF_E_UNSUPPORTED, "tiled with %u tiles across "
                         "(libtiff decodes a frame one tile wide: GDAL reads "
                         "only the first column of tiles right)",
                         o->chunks_across);
    if (o->photometric != 6 || o->samples != 3)
        return oj_refuse(o, CF_E_UNSUPPORTED, "PhotometricInterpretation %u "
                         "with %u samples (GDAL reads only 3-sample YCbCr, "
                         "through libtiff's RGBA interface)",
                         (unsigned)o->photometric, (unsigned)o->samples);
    if (o->planar != 1)
        return oj_refuse(o, CF_E_UNSUPPORTED, "band-interleaved files are "
                         "not read");
    if (o->bits != 8)
        return oj_refuse(o, CF_E_UNSUPPORTED, "%u-bit samples",
                         (unsigned)o->bits);
    uint64_t proc, tag_ri;
    TRY(soft(c, tag_u1(c, i, S_JPEGPROC, 1, &proc)));
    if (proc != 1)
        return oj_refuse(o, CF_E_UNSUPPORTED, "JPEGProc %llu (%s) is not "
                         "read; only baseline (1)", (unsigned long long)proc,
                         proc == 14 ? "lossless" : "unknown");
    TRY(soft(c, tag_u1(c, i, S_JRESTART, 0, &tag_ri)));
    if (o->nchunks == 0 || o->counts[0] == 0)
        return oj_refuse(o, CF_E_FORMAT, "strip 0 is empty");

    /* Where libtiff looks for markers: the JPEGInterchangeFormat stream
     * (clipped to the file as libtiff does), else the first strip. */
    uint64_t fs = c->p->file_size, jif = 0, jlen = 0, start, end;
    TRY(soft(c, tag_u1(c, i, S_JIF, 0, &jif)));
    TRY(soft(c, tag_u1(c, i, S_JIFLEN, 0, &jlen)));
    if (fs != UINT64_MAX && jif >= fs) jif = 0;
    const char *src = "the JPEGInterchangeFormat stream";
    if (jif) {
        if (jlen == 0 || jif > UINT64_MAX - jlen ||
            (fs != UINT64_MAX && jif + jlen > fs))
            jlen = fs == UINT64_MAX ? OJ_MAX_HEADER : fs - jif;
        start = jif;
        end = jif + jlen;
    } else {
        src = "strip 0";
        start = o->offsets[0];
        if (!cf__add_u64(start, o->counts[0], &end))
            return oj_refuse(o, CF_E_FORMAT, "strip 0 has an absurd size");
    }
    oj_state j;
    memset(&j, 0, sizeof j);
    uint64_t hdr_end, strip0[2] = {o->offsets[0], 0};
    int in_strip0;
    if (!cf__add_u64(strip0[0], o->counts[0], &strip0[1]))
        return oj_refuse(o, CF_E_FORMAT, "strip 0 has an absurd size");
    TRY(oj_walk(c, o, &j, start, end, src, jif ? strip0 : NULL, &hdr_end,
                &in_strip0));
    if (o->ojpeg_status) return CF_OK;
    if (in_strip0) src = "strip 0";

    /* The sampling: the SOF's when it has one TIFF can say (libtiff's
     * OJPEGSubsamplingCorrect), else the tag's (2x2 by default). */
    unsigned sh = o->ycbcr_sub_h, sv = o->ycbcr_sub_v;
    if (j.sof) {
        sh = j.hv[0] >> 4;
        sv = j.hv[0] & 15;
        if ((sh != 1 && sh != 2 && sh != 4) || (sv != 1 && sv != 2 &&
            sv != 4) || j.hv[1] != 0x11 || j.hv[2] != 0x11)
            return oj_refuse(o, CF_E_UNSUPPORTED, "sampling factors %u, %u, "
                             "%u of %s, which TIFF's YCbCrSubsampling cannot "
                             "express", j.hv[0], j.hv[1], j.hv[2], src);
        /* OJPEGReadHeaderInfoSecStreamSof */
        if (j.sof_y < o->height)
            return oj_refuse(o, CF_E_FORMAT, "the JPEG data of %s is %u rows "
                             "high, the image %u (libtiff: unexpected height)",
                             src, j.sof_y, o->height);
        if (j.sof_x != o->chunk_w)
            return oj_refuse(o, CF_E_FORMAT, "the JPEG data of %s is %u "
                             "columns wide, the %s %u", src, j.sof_x,
                             o->tiled ? "tiles" : "image", o->chunk_w);
    } else {
        if (jif)
            return oj_refuse(o, CF_E_FORMAT, "the JPEGInterchangeFormat "
                             "stream does not start with a JPEG marker");
        j.sof_id = 0xC0;
        j.sof_x = (uint16_t)o->chunk_w; /* the image's, or a tile's */
        j.sof_y = (uint16_t)o->height;
        if (o->chunk_w > 65535 || o->height > 65535)
            return oj_refuse(o, CF_E_FORMAT, "image larger than JPEG allows");
        j.c[0] = 0;
        j.c[1] = 1;
        j.c[2] = 2;
        j.hv[0] = (uint8_t)(sh << 4 | sv);
        j.hv[1] = j.hv[2] = 0x11;
        j.cs[0] = 0;
        j.cs[1] = 1;
        j.cs[2] = 2;
        TRY(oj_tables(c, i, o, &j));
        if (o->ojpeg_status) return CF_OK;
    }
    /* A frame whose quantization tables the stream never defines (its
     * tables were left in a JPEGTables tag, which old-style JPEG ignores)
     * fails in libjpeg, under GDAL too: say so now. */
    for (int k = 0; k < 3; k++)
        if (j.tq[k] > 3 || !j.q[j.tq[k]].d)
            return oj_refuse(o, CF_E_FORMAT, "component %d uses quantization "
                             "table %u, which %s does not define", k, j.tq[k],
                             src);
    o->ycbcr_sub_h = (uint16_t)sh;
    o->ycbcr_sub_v = (uint16_t)sv;

    /* The restart interval (OJPEGReadHeaderInfo): the strips' own when
     * there are several, unless the stream sets one with DRI. */
    uint64_t ri = tag_ri > 0xffff ? 0 : tag_ri;
    uint64_t mcus = 0;
    int several = o->chunk_h < o->height;
    if (several) {
        if (o->chunk_h % (8 * sv))
            return oj_refuse(o, CF_E_FORMAT, "RowsPerStrip %u is not a "
                             "multiple of the MCU height %u (libtiff: "
                             "incompatible vertical subsampling and strip "
                             "length)", o->chunk_h, 8 * sv);
        mcus = (uint64_t)((o->chunk_w + 8 * sh - 1) / (8 * sh)) *
               (o->chunk_h / (8 * sv));
        ri = (uint16_t)mcus;
    }
    if (j.have_ri) ri = j.ri;
    else if (several && mcus > 0xffff)
        /* DRI's field is 16 bits: such strips cannot each be one interval. */
        return oj_refuse(o, CF_E_UNSUPPORTED, "strips of %llu MCUs (a JPEG "
                         "restart interval holds at most 65535)",
                         (unsigned long long)mcus);

    if (jif && !in_strip0 && hdr_end < end) {
        /* The stream holds the entropy data: libjpeg reads the whole image
         * from it, so it is read as one chunk. */
        if (o->tiled)
            return oj_refuse(o, CF_E_UNSUPPORTED, "tiles whose entropy data "
                             "is in the JPEGInterchangeFormat stream");
        if (several) {
            /* libtiff's RGBA strip reader drops bytes at the end of each
             * strip when a block row does not divide by sv (photometric.c),
             * which one chunk would not reproduce. */
            uint64_t unit = (uint64_t)sh * sv + 2,
                     across = (o->width + sh - 1) / sh;
            if (across * unit % sv)
                return oj_refuse(o, CF_E_UNSUPPORTED, "%ux%u subsampling in "
                                 "strips of an odd number of blocks across",
                                 sh, sv);
        }
        o->offsets[0] = hdr_end;
        o->counts[0] = end - hdr_end;
        o->nchunks = 1;
        o->chunks_down = 1;
        o->chunk_h = o->height;
        if (o->counts[0] > CF_MAX_CHUNK_BYTES)
            return oj_refuse(o, CF_E_LIMIT, "a stream of %llu bytes",
                             (unsigned long long)o->counts[0]);
        /* The whole image is one chunk now: its decoded size gets the
         * check parse_chunks gave the strips. */
        if (!cf__chunk_bytes(o->width, 3, 8, o->height))
            return oj_refuse(o, CF_E_LIMIT, "the image decodes as one chunk "
                             "of %ux%u RGB pixels, above %llu bytes",
                             o->width, o->height,
                             (unsigned long long)CF_MAX_CHUNK_BYTES);
    } else {
        /* Entropy data in the strips, each one restart interval. */
        if (several && ri != mcus)
            return oj_refuse(o, CF_E_FORMAT, "restart interval %llu of %s "
                             "does not match the strips (%llu MCUs each)",
                             (unsigned long long)ri, src,
                             (unsigned long long)mcus);
        if ((!jif || in_strip0) && j.sos) { /* strip 0 starts with (the
                                                end of) the header */
            o->counts[0] -= hdr_end - o->offsets[0];
            o->offsets[0] = hdr_end;
            if (o->counts[0] == 0)
                return oj_refuse(o, CF_E_FORMAT, "strip 0 ends with its JPEG "
                                 "header");
        }
    }
    return oj_header(c, i, o, &j, (uint16_t)ri);
}

static cf_status parse_ifd(ctx *c, int i, cf_tiff_ifd *o) {
    uint64_t v, w, h, spp;
    o->ifd_offset = c->ifds[i].off;
    TRY(tag_u1(c, i, S_SUBFILE, 0, &v));
    o->subfile_type = (uint32_t)v;
    if (!has(c, i, S_WIDTH)) return missing(c, i, S_WIDTH);
    if (!has(c, i, S_HEIGHT)) return missing(c, i, S_HEIGHT);
    TRY(tag_u1(c, i, S_WIDTH, 0, &w));
    TRY(tag_u1(c, i, S_HEIGHT, 0, &h));
    if (w == 0 || h == 0)
        return ferr(c, i, CF_E_FORMAT, "image size is %llux%llu",
                    (unsigned long long)w, (unsigned long long)h);
    if (w > CF_MAX_DIMENSION || h > CF_MAX_DIMENSION)
        return ferr(c, i, CF_E_LIMIT,
                    "image size %llux%llu exceeds the limit of %u",
                    (unsigned long long)w, (unsigned long long)h,
                    CF_MAX_DIMENSION);
    o->width = (uint32_t)w;
    o->height = (uint32_t)h;
    TRY(tag_u1(c, i, S_COMP, 1, &v));
    if (v > 0xffff) return ferr(c, i, CF_E_FORMAT, "Compression %llu is "
                                "invalid", (unsigned long long)v);
    o->compression = (uint16_t)v;
    bool ojpeg = o->compression == CF_COMP_OJPEG;
    /* Old-style JPEG files often lack these tags; libtiff (and so GDAL)
     * supplies them: YCbCr (also for a tag that says RGB), 8 bits, and 3
     * samples for YCbCr/RGB, 1 for grey. */
    uint64_t photo;
    TRY(tag_u1(c, i, S_PHOTO, ojpeg ? 6 : UINT64_MAX, &photo));
    if (ojpeg && photo == 2) photo = 6;
    if (photo != UINT64_MAX && photo > 0xffff)
        return ferr(c, i, CF_E_FORMAT, "PhotometricInterpretation %llu is "
                    "invalid", (unsigned long long)photo);
    uint64_t spp_def = 1;
    if (ojpeg && (photo == 2 || photo == 6)) spp_def = 3;
    TRY(tag_u1(c, i, S_SPP, spp_def, &spp));
    if (spp == 0) return ferr(c, i, CF_E_FORMAT, "SamplesPerPixel is 0");
    if (spp > CF_MAX_BANDS)
        return ferr(c, i, CF_E_LIMIT, "SamplesPerPixel %llu exceeds the "
                    "limit of %d", (unsigned long long)spp, CF_MAX_BANDS);
    o->samples = (uint16_t)spp;
    if (photo == UINT64_MAX) photo = spp >= 3 ? 2 : 1;
    o->photometric = (uint16_t)photo;

    /* Any depth the TIFF format allows is parsed; which ones can be read
     * (and how) is the codec layer's call, made when the file opens. */
    uint64_t bits, sf;
    TRY(per_sample(c, i, S_BITS, spp, ojpeg ? 8 : 1, &bits));
    if (bits == 0 || (bits > 64 && bits != 128))
        return ferr(c, i, CF_E_FORMAT, "BitsPerSample %llu is invalid",
                    (unsigned long long)bits);
    o->bits = (uint16_t)bits;
    TRY(per_sample(c, i, S_SFMT, spp, 1, &sf));
    if (sf == 4) sf = 1; /* "void": read as unsigned, like libtiff */
    if (sf == 0 || sf > 6)
        return ferr(c, i, CF_E_FORMAT, "SampleFormat %llu is invalid",
                    (unsigned long long)sf);
    if (bits == 128 && sf != 6)
        return ferr(c, i, CF_E_FORMAT, "BitsPerSample 128 is only valid for "
                    "complex floating point (SampleFormat 6)");
    o->sample_format = (uint16_t)sf;

    TRY(tag_u1(c, i, S_PLANAR, 1, &v));
    if (v != 1 && v != 2)
        return ferr(c, i, CF_E_FORMAT, "PlanarConfiguration %llu is invalid",
                    (unsigned long long)v);
    o->planar = spp == 1 ? 1 : (uint16_t)v;
    TRY(tag_u1(c, i, S_PRED, 1, &v));
    if (v < 1 || v > 3)
        return ferr(c, i, CF_E_UNSUPPORTED, "Predictor %llu is not supported",
                    (unsigned long long)v);
    o->predictor = (uint16_t)v;

    o->ycbcr_sub_h = o->ycbcr_sub_v = 2;
    if (has(c, i, S_YCBCR)) {
        uint64_t sub[2] = {2, 2}, n;
        TRY(tag_uints(c, i, S_YCBCR, 2, sub, &n));
        if (n == 2 && (sub[0] == 1 || sub[0] == 2 || sub[0] == 4) &&
            (sub[1] == 1 || sub[1] == 2 || sub[1] == 4)) {
            o->ycbcr_sub_h = (uint16_t)sub[0];
            o->ycbcr_sub_v = (uint16_t)sub[1];
        } else if (o->photometric == 6) {
            return ferr(c, i, CF_E_FORMAT, "YCbCrSubsampling is invalid");
        }
    }
    if (has(c, i, S_LERC)) {
        uint64_t lp[2] = {0, 0}, n;
        TRY(tag_uints(c, i, S_LERC, 2, lp, &n));
        if (n >= 1) o->lerc_version = (uint32_t)lp[0];
        if (n >= 2) o->lerc_sub = (uint32_t)lp[1];
    }
    if (has(c, i, S_JPEGTAB)) {
        char *t;
        size_t len;
        const ent *e = &c->ifds[i].e[S_JPEGTAB];
        if (e->nbytes <= TIFF_MAX_JPEGTABLES)
            TRY(charge(c, i, e->nbytes, "JPEGTables"));
        TRY(tag_bytes(c, i, S_JPEGTAB, TIFF_MAX_JPEGTABLES, &t, &len));
        if (len) {
            o->jpeg_tables = (uint8_t *)t;
            o->jpeg_tables_len = len;
        } else {
            free(t);
        }
    }
    TRY(parse_sample_tags(c, i, o));
    set_comp_name(o);
    TRY(parse_chunks(c, i, o));
    return ojpeg ? parse_ojpeg(c, i, o) : CF_OK;
}

/* ------------------------------------------------------------------ */
/* GeoTIFF and GDAL metadata (best effort: a malformed tag is ignored)  */
/* ------------------------------------------------------------------ */

/* Keep NEED_BYTES and memory errors; forget format errors of optional
 * metadata so that a bad GeoKeyDirectory does not hide the pixels. */
static cf_status soft(ctx *c, cf_status st) {
    if (st == CF__NEED_BYTES || st == CF_E_NOMEM) return st;
    if (st != CF_OK) cf__err_clear(c->err);
    return CF_OK;
}

static bool all_finite(const double *v, int n) {
    for (int k = 0; k < n; k++)
        if (!isfinite(v[k])) return false;
    return true;
}

static cf_status parse_geo(ctx *c, int i, cf_tiff *t) {
    double sc[3] = {0}, tp[6] = {0}, tr[16] = {0};
    uint64_t nsc = 0, ntp = 0, ntr = 0;
    cf_status st;
    if (has(c, i, S_PSCALE) && has(c, i, S_TIE)) {
        TRY(soft(c, st = tag_doubles(c, i, S_PSCALE, 3, sc, &nsc)));
        if (st) nsc = 0;
        TRY(soft(c, st = tag_doubles(c, i, S_TIE, 6, tp, &ntp)));
        if (st) ntp = 0;
    }
    if (has(c, i, S_TRANS)) {
        TRY(soft(c, st = tag_doubles(c, i, S_TRANS, 16, tr, &ntr)));
        if (st) ntr = 0;
    }
    double *gt = t->geotransform;
    /* Like GDAL: a zero scale means no geotransform, and a negative ScaleY
     * is taken as north-up (GTIFF_HONOUR_NEGATIVE_SCALEY=NO). */
    if (nsc >= 2 && ntp >= 6 && sc[0] != 0 && sc[1] != 0) {
        gt[1] = sc[0];
        gt[2] = 0;
        gt[4] = 0;
        gt[5] = -fabs(sc[1]);
        gt[0] = tp[3] - tp[0] * gt[1];
        gt[3] = tp[4] - tp[1] * gt[5];
        t->has_geotransform = 1;
    } else if (ntr >= 16) {
        gt[0] = tr[3];
        gt[1] = tr[0];
        gt[2] = tr[1];
        gt[3] = tr[7];
        gt[4] = tr[4];
        gt[5] = tr[5];
        t->has_geotransform = 1;
    }

    if (has(c, i, S_GEOKEYS)) {
        const ent *e = &c->ifds[i].e[S_GEOKEYS];
        uint64_t n = 0, cap = e->count < TIFF_MAX_GEOKEYS ? e->count
                                                          : TIFF_MAX_GEOKEYS;
        uint64_t *k = cf__malloc((size_t)cap * sizeof *k);
        if (!k) return ferr(c, i, CF_E_NOMEM, "out of memory");
        st = soft(c, tag_uints(c, i, S_GEOKEYS, cap, k, &n));
        /* A directory whose key count runs past its data is ignored. */
        if (st == CF_OK && n >= 4 && k[3] <= (n - 4) / 4) {
            /* The raw keys for lib/geo, which builds the CRS from them. */
            t->geokeys = cf__malloc((size_t)n * sizeof *t->geokeys);
            if (!t->geokeys) {
                free(k);
                return ferr(c, i, CF_E_NOMEM, "out of memory");
            }
            for (uint64_t j = 0; j < n; j++) t->geokeys[j] = (uint16_t)k[j];
            t->ngeokeys = (size_t)n;
            uint64_t pcs = 0, gcs = 0;
            for (uint64_t j = 0; j < k[3]; j++) {
                const uint64_t *key = k + 4 + 4 * j;
                if (key[1] != 0) continue; /* value stored elsewhere */
                if (key[0] == 1025) t->pixel_is_point = key[3] == 2;
                else if (key[0] == 3072) pcs = key[3];
                else if (key[0] == 2048) gcs = key[3];
            }
            if (pcs >= 1 && pcs < 32767) t->epsg = (int)pcs;
            else if (pcs == 0 && gcs >= 1 && gcs < 32767) t->epsg = (int)gcs;
        }
        free(k);
        TRY(st);
    }
    if (t->geokeys && has(c, i, S_GEODBL)) {
        uint64_t cnt = c->ifds[i].e[S_GEODBL].count, n = 0;
        if (cnt > TIFF_MAX_GEODOUBLES) cnt = TIFF_MAX_GEODOUBLES;
        t->geodoubles = cf__malloc((size_t)cnt * sizeof *t->geodoubles);
        if (!t->geodoubles) return ferr(c, i, CF_E_NOMEM, "out of memory");
        TRY(soft(c, st = tag_doubles(c, i, S_GEODBL, cnt, t->geodoubles, &n)));
        t->ngeodoubles = st ? 0 : (size_t)n;
    }
    if (t->geokeys && has(c, i, S_GEOASCII)) {
        size_t len = 0;
        TRY(soft(c, st = tag_bytes(c, i, S_GEOASCII, TIFF_MAX_GEOASCII, &t->geoascii, &len)));
        t->ngeoascii = st ? 0 : len;
    }
    /* GDAL's default (GTIFF_POINT_GEO_IGNORE=FALSE): PixelIsPoint moves the
     * origin from the pixel centre to its corner. */
    if (t->has_geotransform && t->pixel_is_point) {
        gt[0] -= gt[1] * 0.5 + gt[2] * 0.5;
        gt[3] -= gt[4] * 0.5 + gt[5] * 0.5;
    }
    if (t->has_geotransform && !all_finite(gt, 6)) {
        t->has_geotransform = 0;
        memset(gt, 0, 6 * sizeof *gt);
    }
    return CF_OK;
}

static cf_status parse_nodata(ctx *c, int i, cf_tiff *t) {
    if (!has(c, i, S_NODATA)) return CF_OK;
    char *s = NULL;
    cf_status st = soft(c, tag_text(c, i, S_NODATA, &s));
    if (st != CF_OK || !s) return st;
    const char *q = s;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    char *end;
    double v = strtod(q, &end);
    if (end != q) {
        t->has_nodata = 1;
        t->nodata = v;
    }
    free(s);
    return CF_OK;
}

/* GDAL's TIFFTAG_* metadata items from the TIFF text tags. */
static const struct {
    int slot;
    const char *key;
} text_items[] = {
    {S_DOCNAME, "TIFFTAG_DOCUMENTNAME"},
    {S_DESCRIPTION, "TIFFTAG_IMAGEDESCRIPTION"},
    {S_SOFTWARE, "TIFFTAG_SOFTWARE"},
    {S_DATETIME, "TIFFTAG_DATETIME"},
    {S_ARTIST, "TIFFTAG_ARTIST"},
    {S_HOSTCOMPUTER, "TIFFTAG_HOSTCOMPUTER"},
    {S_COPYRIGHT, "TIFFTAG_COPYRIGHT"},
};

/* Metadata of IFD i as GDAL gives it: the TIFF text tags, the raster
 * type, then GDAL_METADATA (whose band scale/offset go to t->scale and
 * t->offset).  Malformed tags are skipped, never an error. */
static cf_status parse_meta(ctx *c, int i, cf_tiff *t, uint16_t spp) {
    t->meta = cf__meta_new(spp);
    if (!t->meta) return ferr(c, -1, CF_E_NOMEM, "out of memory");
    cf_status st = CF_OK;
    for (size_t k = 0; st == CF_OK && k < sizeof text_items / sizeof *text_items;
         k++) {
        char *s = NULL;
        if (!has(c, i, text_items[k].slot)) continue;
        st = soft(c, tag_text(c, i, text_items[k].slot, &s));
        if (st == CF_OK && s && cf__meta_set(t->meta, 0, "", text_items[k].key, s))
            st = ferr(c, -1, CF_E_NOMEM, "out of memory");
        free(s);
    }
    /* Resolutions are floats in libtiff, printed as GDAL prints them. */
    static const struct {
        int slot;
        const char *key;
    } res[] = {{S_XRES, "TIFFTAG_XRESOLUTION"}, {S_YRES, "TIFFTAG_YRESOLUTION"}};
    for (int k = 0; st == CF_OK && k < 2; k++) {
        double d;
        uint64_t n = 0;
        if (!has(c, i, res[k].slot)) continue;
        cf_status s2 = tag_doubles(c, i, res[k].slot, 1, &d, &n);
        st = soft(c, s2);
        if (st || s2 || n != 1) continue;
        char buf[64];
        snprintf(buf, sizeof buf, "%.8g", (double)(float)d);
        if (cf__meta_set(t->meta, 0, "", res[k].key, buf))
            st = ferr(c, -1, CF_E_NOMEM, "out of memory");
    }
    if (st == CF_OK && has(c, i, S_RESUNIT)) {
        uint64_t u = 0;
        cf_status s2 = tag_u1(c, i, S_RESUNIT, 0, &u);
        st = soft(c, s2);
        if (st == CF_OK && s2 == CF_OK && u <= 0xffff) {
            char buf[48];
            snprintf(buf, sizeof buf, "%u%s", (unsigned)u,
                     u == 1 ? " (unitless)" : u == 2 ? " (pixels/inch)"
                     : u == 3 ? " (pixels/cm)" : "");
            if (cf__meta_set(t->meta, 0, "", "TIFFTAG_RESOLUTIONUNIT", buf))
                st = ferr(c, -1, CF_E_NOMEM, "out of memory");
        }
    }
    if (st == CF_OK && has(c, i, S_GEOKEYS) &&
        cf__meta_set(t->meta, 0, "", "AREA_OR_POINT",
                     t->pixel_is_point ? "Point" : "Area"))
        st = ferr(c, -1, CF_E_NOMEM, "out of memory");
    if (st == CF_OK && has(c, i, S_GDALMD)) {
        char *s = NULL;
        st = soft(c, tag_text(c, i, S_GDALMD, &s));
        if (st == CF_OK && s && cf__meta_gdal(t->meta, s, t->scale, t->offset))
            st = ferr(c, -1, CF_E_NOMEM, "out of memory");
        free(s);
    }
    return st;
}

/* ------------------------------------------------------------------ */
/* Levels and the whole file                                            */
/* ------------------------------------------------------------------ */

static bool is_mask(const cf_tiff_ifd *d) {
    return (d->subfile_type & 4) && d->photometric == 4 && d->samples == 1 &&
           (d->bits == 1 || d->bits == 8);
}

/* GDAL opens at most this many overviews (a guard against files with
 * thousands of reduced IFDs). */
#define TIFF_MAX_OVERVIEWS 30

/* Levels and masks as GDAL finds them: level 0 is the first image IFD;
 * overviews and masks come from IFD 0's SubIFDs when it has any, else
 * from the rest of the main chain.  Other IFDs are pages, not read. */
static cf_status build_levels(ctx *c, cf_tiff *t) {
    int l0 = -1;
    bool subs = false;
    for (int i = 0; i < t->nifds; i++) {
        if (l0 < 0 && !t->ifds[i].sub && !(t->ifds[i].subfile_type & 4))
            l0 = i;
        subs |= t->ifds[i].sub != 0;
    }
    if (l0 < 0)
        return ferr(c, -1, CF_E_FORMAT, "no image IFD (every IFD is a mask)");
    t->levels = cf__malloc((size_t)t->nifds * sizeof *t->levels);
    t->mask_of_level = cf__malloc((size_t)t->nifds * sizeof *t->mask_of_level);
    if (!t->levels || !t->mask_of_level)
        return ferr(c, -1, CF_E_NOMEM, "out of memory");
    const cf_tiff_ifd *b = &t->ifds[l0];
    t->levels[0] = l0;
    t->nlevels = 1;
    for (int i = 0; i < t->nifds; i++) {
        const cf_tiff_ifd *d = &t->ifds[i];
        if (i == l0 || (d->subfile_type & 5) != 1 || !d->sub != !subs)
            continue;
        if (d->samples != b->samples || d->bits != b->bits ||
            d->sample_format != b->sample_format || d->width > b->width ||
            d->height > b->height)
            continue;
        if (t->nlevels > TIFF_MAX_OVERVIEWS) {
            warn(c, "more than %d overviews: IFD %d and the ones after it "
                 "are not used, as in GDAL", TIFF_MAX_OVERVIEWS, d->index);
            break;
        }
        /* Stable insertion by decreasing width, level 0 stays first. */
        int k = t->nlevels++;
        while (k > 1 && t->ifds[t->levels[k - 1]].width < d->width) {
            t->levels[k] = t->levels[k - 1];
            k--;
        }
        t->levels[k] = i;
    }
    for (int l = 0; l < t->nlevels; l++) t->mask_of_level[l] = -1;
    for (int i = 0; i < t->nifds; i++) {
        const cf_tiff_ifd *d = &t->ifds[i];
        if (!is_mask(d) || !d->sub != !subs) continue;
        for (int l = 0; l < t->nlevels; l++) {
            const cf_tiff_ifd *lv = &t->ifds[t->levels[l]];
            if (t->mask_of_level[l] < 0 && lv->width == d->width &&
                lv->height == d->height) {
                t->mask_of_level[l] = i;
                break;
            }
        }
    }
    return CF_OK;
}

static void free_ifd(cf_tiff_ifd *d) {
    free(d->offsets);
    free(d->counts);
    free(d->jpeg_tables);
    memset(d, 0, sizeof *d);
}

/* Parse every IFD into t->ifds.  The first must parse.  One after it that
 * does not ends its list there, as GDAL stops at the first directory
 * libtiff cannot read: the rest of the main chain, or of IFD 0's SubIFDs,
 * is left out with a warning. */
static cf_status parse_ifds(ctx *c, cf_tiff *t) {
    bool ended[2] = {false, false}; /* main chain, SubIFDs */
    size_t namelen = strlen(c->p->name);
    for (int i = 0; i < c->nifds; i++) {
        bool sub = c->ifds[i].sub;
        if (ended[sub]) continue;
        cf_tiff_ifd *o = &t->ifds[t->nifds];
        cf_error e1;
        memset(&e1, 0, sizeof e1);
        cf_error *saved = c->err;
        c->err = &e1;
        cf_status st = parse_ifd(c, i, o);
        c->err = saved;
        if (st == CF_OK) {
            o->index = i;
            o->sub = sub;
            t->nifds++;
            continue;
        }
        free_ifd(o);
        /* Running out of memory or of the header budget is no broken
         * directory to step over: the file fails. */
        if (st == CF__NEED_BYTES || st == CF_E_NOMEM || st == CF_E_LIMIT ||
            i == 0) {
            if (saved) *saved = e1;
            return st;
        }
        /* The message without the file name ferr put first. */
        const char *m = e1.msg;
        if (!strncmp(m, c->p->name, namelen) && !strncmp(m + namelen, ": ", 2))
            m += namelen + 2;
        warn(c, "%s; it and the %s after it are ignored, as GDAL does", m,
             sub ? "SubIFDs" : "IFDs");
        ended[sub] = true;
    }
    return CF_OK;
}

static cf_status parse_all(ctx *c, cf_tiff **out) {
    TRY(walk(c));
    TRY(check_arrays(c));
    TRY(fetch_tag_data(c));
    cf_tiff *t = cf__calloc(1, sizeof *t);
    if (!t) return ferr(c, -1, CF_E_NOMEM, "out of memory");
    t->bigtiff = c->big;
    t->big_endian = c->be;
    t->file_size = c->p->file_size;
    t->ifds = cf__calloc((size_t)c->nifds, sizeof *t->ifds);
    cf_status st = CF_OK;
    if (!t->ifds) st = ferr(c, -1, CF_E_NOMEM, "out of memory");
    if (st == CF_OK) st = parse_ifds(c, t);
    if (st == CF_OK) st = build_levels(c, t);
    if (st == CF_OK) {
        int l0 = t->levels[0];
        uint16_t spp = t->ifds[l0].samples;
        t->scale = cf__malloc(spp * sizeof *t->scale);
        t->offset = cf__malloc(spp * sizeof *t->offset);
        if (!t->scale || !t->offset) st = ferr(c, -1, CF_E_NOMEM, "out of memory");
        for (int k = 0; st == CF_OK && k < spp; k++) {
            t->scale[k] = 1;
            t->offset[k] = 0;
        }
        int r0 = t->ifds[l0].index; /* its entries in c->ifds */
        if (st == CF_OK) st = parse_geo(c, r0, t);
        if (st == CF_OK) st = parse_nodata(c, r0, t);
        if (st == CF_OK) st = parse_meta(c, r0, t, spp);
    }
    if (st == CF_OK && c->nwarn) {
        t->warnings = cf__strdup(c->warn);
        if (!t->warnings) st = ferr(c, -1, CF_E_NOMEM, "out of memory");
    }
    if (st != CF_OK) {
        cf_tiff_free(t);
        return st;
    }
    t->header_end = c->hdr_end;
    *out = t;
    return CF_OK;
}

/* ------------------------------------------------------------------ */
/* Public API                                                           */
/* ------------------------------------------------------------------ */

cf_tiff_parser *cf_tiff_parser_new(uint64_t file_size, const char *name) {
    cf_tiff_parser *p = cf__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->file_size = file_size;
    p->budget = CF_HEADER_MEMORY_DEFAULT;
    p->name = cf__name_dup(name ? name : "(unnamed)");
    if (!p->name) {
        free(p);
        return NULL;
    }
    return p;
}

void cf_tiff_parser_free(cf_tiff_parser *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nr; i++) free(p->r[i].data);
    free(p->r);
    free(p->name);
    free(p);
}

void cf_tiff_parser_set_size(cf_tiff_parser *p, uint64_t file_size) {
    if (p) p->file_size = file_size;
}

void cf_tiff_parser_set_budget(cf_tiff_parser *p, uint64_t bytes) {
    if (p) p->budget = bytes ? bytes : CF_HEADER_MEMORY_DEFAULT;
}

cf_status cf_tiff_parser_add(cf_tiff_parser *p, uint64_t off,
                             const uint8_t *data, size_t len, cf_error *err) {
    if (!p || (!data && len))
        return cf__err(err, CF_E_ARG, "cf_tiff_parser_add: bad argument");
    uint64_t end;
    if (!cf__add_u64(off, len, &end))
        return cf__err(err, CF_E_ARG, "%s: range at %llu overflows",
                       p->name, (unsigned long long)off);
    if (p->file_size != UINT64_MAX && end > p->file_size) {
        if (off >= p->file_size) return CF_OK;
        end = p->file_size;
        len = (size_t)(end - off);
    }
    if (len == 0) return CF_OK;
    /* Ranges [a, b) that overlap or touch the new one are merged into it. */
    size_t a = 0;
    while (a < p->nr && p->r[a].off + p->r[a].len < off) a++;
    size_t b = a;
    while (b < p->nr && p->r[b].off <= end) b++;
    uint64_t lo = off, hi = end, old = 0;
    if (b > a) {
        if (p->r[a].off < lo) lo = p->r[a].off;
        if (p->r[b - 1].off + p->r[b - 1].len > hi)
            hi = p->r[b - 1].off + p->r[b - 1].len;
    }
    for (size_t k = a; k < b; k++) old += p->r[k].len;
    uint64_t total = p->total - old + (hi - lo);
    if (total > CF_MAX_HEADER_BYTES)
        return cf__err(err, CF_E_LIMIT,
                       "%s: header needs more than %llu bytes (limit)",
                       p->name, (unsigned long long)CF_MAX_HEADER_BYTES);
    if (b == a + 1 && p->r[a].off <= off) {
        /* Extending one range (the usual case: the next request follows
         * the bytes already held): grow it in place, so that many small
         * adds do not copy the whole header each time. */
        range *r = &p->r[a];
        if (hi - lo > r->len) {
            uint8_t *nd = cf__realloc(r->data, (size_t)(hi - lo));
            if (!nd)
                return cf__err(err, CF_E_NOMEM, "%s: out of memory",
                               p->name);
            r->data = nd;
            r->len = (size_t)(hi - lo);
        }
        memcpy(r->data + (off - lo), data, len);
        p->total = total;
        return CF_OK;
    }
    uint8_t *buf = cf__malloc((size_t)(hi - lo));
    if (!buf) return cf__err(err, CF_E_NOMEM, "%s: out of memory", p->name);
    for (size_t k = a; k < b; k++)
        memcpy(buf + (p->r[k].off - lo), p->r[k].data, p->r[k].len);
    memcpy(buf + (off - lo), data, len);
    if (b == a) { /* insert a new slot at a */
        if (p->nr == p->cap) {
            size_t nc = p->cap ? p->cap * 2 : 8;
            range *nr = cf__realloc(p->r, nc * sizeof *nr);
            if (!nr) {
                free(buf);
                return cf__err(err, CF_E_NOMEM, "%s: out of memory",
                               p->name);
            }
            p->r = nr;
            p->cap = nc;
        }
        memmove(p->r + a + 1, p->r + a, (p->nr - a) * sizeof *p->r);
        p->nr++;
    } else {
        for (size_t k = a; k < b; k++) free(p->r[k].data);
        memmove(p->r + a + 1, p->r + b, (p->nr - b) * sizeof *p->r);
        p->nr -= b - a - 1;
    }
    p->r[a].off = lo;
    p->r[a].len = (size_t)(hi - lo);
    p->r[a].data = buf;
    p->total = total;
    return CF_OK;
}

cf_status cf_tiff_parser_run(cf_tiff_parser *p, cf_tiff **out,
                             uint64_t *need_off, uint64_t *need_len,
                             cf_error *err) {
    if (!p || !out || !need_off || !need_len)
        return cf__err(err, CF_E_ARG, "cf_tiff_parser_run: bad argument");
    *out = NULL;
    *need_off = *need_len = 0;
    ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.err = err;
    c.ifds = cf__malloc(CF_MAX_IFDS * sizeof *c.ifds);
    if (!c.ifds) return cf__err(err, CF_E_NOMEM, "%s: out of memory", p->name);
    cf_status st = parse_all(&c, out);
    free(c.ifds);
    if (st != CF__NEED_BYTES) {
        p->have_last_need = false;
        return st;
    }
    /* The same first missing byte twice in a row: the caller could not
     * provide it (file truncated or changed), so stop instead of looping. */
    if (p->have_last_need && p->last_need_off == c.need_off) {
        p->have_last_need = false;
        return cf__err(err, CF_E_FORMAT,
                       "%s: header bytes at offset %llu are missing (file "
                       "shorter than its header says?)",
                       p->name, (unsigned long long)c.need_off);
    }
    /* Never ask for more than the budget lets the parser hold: what the
     * declared sizes tell is refused before (check_arrays), and what they
     * cannot tell (the IFD tables of a long chain) stops here. */
    uint64_t cap = p->budget < CF_MAX_HEADER_BYTES ? p->budget : CF_MAX_HEADER_BYTES;
    uint64_t room = p->total < cap ? cap - p->total : 0;
    if (room == 0 && cap < CF_MAX_HEADER_BYTES)
        return cf__err(err, CF_E_LIMIT,
                       "%s: parsing its header needs more than %llu bytes of "
                       "memory, the budget (io option header_memory_max)",
                       p->name, (unsigned long long)cap);
    if (room == 0)
        return cf__err(err, CF_E_LIMIT,
                       "%s: header needs more than %llu bytes (limit)",
                       p->name, (unsigned long long)CF_MAX_HEADER_BYTES);
    if (c.need_len > room) c.need_len = room;
    p->have_last_need = true;
    p->last_need_off = c.need_off;
    *need_off = c.need_off;
    *need_len = c.need_len;
    return CF__NEED_BYTES;
}

cf_status cf_tiff_parse_memory(const uint8_t *data, size_t len,
                               const char *name, cf_tiff **out, cf_error *err) {
    if (!out || (!data && len))
        return cf__err(err, CF_E_ARG, "cf_tiff_parse_memory: bad argument");
    *out = NULL;
    cf_tiff_parser *p = cf_tiff_parser_new(len, name);
    if (!p) return cf__err(err, CF_E_NOMEM, "out of memory");
    /* Fed through the same protocol as remote files so that both paths
     * are exercised by the same tests and fuzzers. */
    size_t first = len < 65536 ? len : 65536;
    cf_status st = cf_tiff_parser_add(p, 0, data, first, err);
    while (st == CF_OK) {
        uint64_t no, nl;
        st = cf_tiff_parser_run(p, out, &no, &nl, err);
        if (st != CF__NEED_BYTES) break;
        if (no >= len) nl = 0;
        else if (nl > len - no) nl = len - no;
        st = cf_tiff_parser_add(p, no, data + (nl ? no : 0), (size_t)nl, err);
    }
    cf_tiff_parser_free(p);
    return st;
}

void cf_tiff_free(cf_tiff *t) {
    if (!t) return;
    for (int i = 0; i < t->nifds; i++) free_ifd(&t->ifds[i]);
    free(t->warnings);
    free(t->ifds);
    free(t->levels);
    free(t->mask_of_level);
    free(t->scale);
    free(t->offset);
    cf_tiff_meta_free(t->meta);
    free(t->geokeys);
    free(t->geodoubles);
    free(t->geoascii);
    free(t);
}

const char *cf_tiff_compression_name(const cf_tiff_ifd *ifd) {
    if (!ifd) return "UNKNOWN";
    return ifd->comp_name[0] ? ifd->comp_name : "UNKNOWN";
}
