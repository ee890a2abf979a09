/*
 * tiff_tags.c - what every part of the parse reads the file with: the
 * tags it knows (slots), the bytes it holds (or the range it must ask
 * for: CF__NEED_BYTES), errors and warnings that name the file and IFD,
 * the header memory budget, and the values of a tag as integers,
 * doubles, bytes or text.
 */
#include "tiff_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

const char *cf__tiff_slot_name(int s) { return slot_info[s].name; }

int cf__tiff_slot_of(uint16_t tag) {
    for (int i = 0; i < NSLOT; i++)
        if (slot_info[i].tag == tag) return i;
    return -1;
}

/* Bytes per value of a TIFF field type; 0 for codes we do not know, whose
 * entries are skipped. */
unsigned cf__tiff_type_size(uint16_t t) {
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

/* Index of the last range starting at or before `off`, or -1. */
static long find_range(const cf__tiff_parser *p, uint64_t off) {
    size_t lo = 0, hi = p->nr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->r[mid].off <= off) lo = mid + 1;
        else hi = mid;
    }
    return (long)lo - 1;
}

const uint8_t *cf__tiff_known(const cf__tiff_parser *p, uint64_t off,
                            uint64_t len) {
    long i = find_range(p, off);
    if (i < 0) return NULL;
    const range *r = &p->r[i];
    if (off - r->off > r->len || len > r->len - (off - r->off)) return NULL;
    return r->data + (off - r->off);
}

/* First byte of [off, end) that is not held (end when all are). */
uint64_t cf__tiff_first_unknown(const cf__tiff_parser *p, uint64_t off,
                              uint64_t end) {
    long i = find_range(p, off);
    if (i < 0) return off;
    uint64_t rend = p->r[i].off + p->r[i].len;
    if (rend <= off) return off;
    return rend < end ? rend : end;
}

/* Point *out at bytes [off, off+len).  On G_NEED the context holds the
 * range to fetch: from the first missing byte to at least off+want and at
 * least TIFF_MIN_READ long, within the file. */
int cf__tiff_get(ctx *c, uint64_t off, uint64_t len, uint64_t want,
               const uint8_t **out) {
    uint64_t end, fs = c->p->file_size;
    if (!cf__add_u64(off, len, &end) || end > TIFF_OFFSET_LIMIT) return G_EOF;
    if (fs != UINT64_MAX && end > fs) return G_EOF;
    const uint8_t *d = cf__tiff_known(c->p, off, len);
    if (d) {
        *out = d;
        if (end > c->hdr_end) c->hdr_end = end;
        return G_OK;
    }
    uint64_t first = cf__tiff_first_unknown(c->p, off, end);
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

cf_status cf__tiff_ferr(ctx *c, int ifd, cf_status code, const char *fmt, ...) {
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

const char *cf__tiff_eof_note(const ctx *c, char *buf, size_t n) {
    if (c->p->file_size == UINT64_MAX) snprintf(buf, n, "size unknown");
    else snprintf(buf, n, "%llu bytes", (unsigned long long)c->p->file_size);
    return buf;
}

void cf__tiff_warn(ctx *c, const char *fmt, ...) {
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

/* Count bytes pass 3 is about to allocate against the budget. */
cf_status cf__tiff_charge(ctx *c, int i, uint64_t bytes, const char *what) {
    uint64_t sum;
    if (!cf__add_u64(c->allocated, bytes, &sum) ||
        !cf__add_u64(sum, c->p->total, &sum) || sum > c->p->budget)
        return cf__tiff_ferr(c, i, CF_E_LIMIT,
                    "%s of %llu bytes would pass the header memory budget of "
                    "%llu (io option header_memory_max)",
                    what, (unsigned long long)bytes,
                    (unsigned long long)c->p->budget);
    c->allocated += bytes;
    return CF_OK;
}

static uint64_t val_u(const uint8_t *d, uint16_t type, bool be) {
    switch (cf__tiff_type_size(type)) {
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
cf_status cf__tiff_tag_data(ctx *c, int i, int s, uint64_t nvals,
                          const uint8_t **d) {
    const ent *e = &c->ifds[i].e[s];
    char note[48];
    uint64_t end;
    if (e->nbytes == UINT64_MAX || !cf__add_u64(e->off, e->nbytes, &end) ||
        end > TIFF_OFFSET_LIMIT)
        return cf__tiff_ferr(c, i, CF_E_FORMAT,
                    "%s has an absurd size (%llu values at offset %llu)",
                    slot_info[s].name, (unsigned long long)e->count,
                    (unsigned long long)e->off);
    if (c->p->file_size != UINT64_MAX && end > c->p->file_size)
        return cf__tiff_ferr(c, i, CF_E_FORMAT,
                    "%s data (%llu bytes at offset %llu) is past end of file "
                    "(%s)",
                    slot_info[s].name, (unsigned long long)e->nbytes,
                    (unsigned long long)e->off, cf__tiff_eof_note(c, note, sizeof note));
    uint64_t len = nvals * cf__tiff_type_size(e->type);
    if (len == 0) {
        *d = NULL;
        return CF_OK;
    }
    int g = cf__tiff_get(c, e->off, len, e->nbytes, d);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s data is past end of file",
                    slot_info[s].name);
    return CF_OK;
}

/* Read up to `maxn` integer values of a present tag into out. */
cf_status cf__tiff_tag_uints(ctx *c, int i, int s, uint64_t maxn, uint64_t *out,
                           uint64_t *n) {
    const ent *e = &c->ifds[i].e[s];
    if (!is_int_type(e->type))
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s has field type %u, not an integer",
                    slot_info[s].name, e->type);
    uint64_t k = e->count < maxn ? e->count : maxn;
    const uint8_t *d;
    TRY(cf__tiff_tag_data(c, i, s, k, &d));
    unsigned tsz = cf__tiff_type_size(e->type);
    for (uint64_t j = 0; j < k; j++) out[j] = val_u(d + j * tsz, e->type, c->be);
    *n = k;
    return CF_OK;
}

/* One integer: `def` when the tag is absent. */
cf_status cf__tiff_tag_u1(ctx *c, int i, int s, uint64_t def, uint64_t *v) {
    *v = def;
    if (!c->ifds[i].e[s].present) return CF_OK;
    uint64_t n;
    TRY(cf__tiff_tag_uints(c, i, s, 1, v, &n));
    if (n == 0)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s has no value", slot_info[s].name);
    return CF_OK;
}

cf_status cf__tiff_tag_doubles(ctx *c, int i, int s, uint64_t maxn, double *out,
                             uint64_t *n) {
    const ent *e = &c->ifds[i].e[s];
    if (e->type == 2 || e->type == 7)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s has field type %u, not a number",
                    slot_info[s].name, e->type);
    uint64_t k = e->count < maxn ? e->count : maxn;
    const uint8_t *d;
    TRY(cf__tiff_tag_data(c, i, s, k, &d));
    unsigned tsz = cf__tiff_type_size(e->type);
    for (uint64_t j = 0; j < k; j++) out[j] = val_d(d + j * tsz, e->type, c->be);
    *n = k;
    return CF_OK;
}

/* A copy of a byte or ASCII tag of at most `limit` bytes, NUL-terminated
 * even when the file's string is not; *len is its length (without the
 * NUL).  An empty tag gives an empty string. */
cf_status cf__tiff_tag_bytes(ctx *c, int i, int s, uint32_t limit, char **out,
                           size_t *len) {
    const ent *e = &c->ifds[i].e[s];
    *out = NULL;
    *len = 0;
    if (e->nbytes != UINT64_MAX && e->nbytes > limit)
        return cf__tiff_ferr(c, i, CF_E_LIMIT, "%s is %llu bytes (limit %u)",
                    slot_info[s].name, (unsigned long long)e->nbytes, limit);
    if (cf__tiff_type_size(e->type) != 1)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s has field type %u, not bytes or text",
                    slot_info[s].name, e->type);
    const uint8_t *d;
    TRY(cf__tiff_tag_data(c, i, s, e->count, &d));
    char *t = cf__malloc((size_t)e->count + 1);
    if (!t) return cf__tiff_ferr(c, i, CF_E_NOMEM, "out of memory");
    if (e->count) memcpy(t, d, (size_t)e->count);
    t[e->count] = 0;
    *out = t;
    *len = (size_t)e->count;
    return CF_OK;
}

cf_status cf__tiff_tag_text(ctx *c, int i, int s, char **out) {
    size_t len;
    return cf__tiff_tag_bytes(c, i, s, TIFF_MAX_TEXT, out, &len);
}

bool cf__tiff_has(const ctx *c, int i, int s) { return c->ifds[i].e[s].present; }

cf_status cf__tiff_missing(ctx *c, int i, int s) {
    return cf__tiff_ferr(c, i, CF_E_FORMAT, "missing required tag %s",
                slot_info[s].name);
}

/* Keep NEED_BYTES and memory errors; forget format errors of optional
 * metadata so that a bad GeoKeyDirectory does not hide the pixels. */
cf_status cf__tiff_soft(ctx *c, cf_status st) {
    if (st == CF__NEED_BYTES || st == CF_E_NOMEM) return st;
    if (st != CF_OK) cf__err_clear(c->err);
    return CF_OK;
}
