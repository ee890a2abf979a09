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
 *
 * Two groups of tags are read in files of their own, through the helpers
 * of tiff_internal.h: old-style JPEG (tiff_ojpeg.c) and the GeoTIFF tags
 * and GDAL's nodata and metadata (tiff_geo.c).
 */
#include "tiff_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ */
/* Pass 1: the IFD chain                                               */
/* ------------------------------------------------------------------ */

static void read_entries(ctx *c, rawifd *ri, const uint8_t *d, uint64_t n,
                         unsigned cntsz) {
    unsigned esz = c->big ? 20 : 12, inl = c->big ? 8 : 4;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *q = d + cntsz + i * esz;
        int s = cf__tiff_slot_of(cf__rd16(q, c->be));
        if (s < 0 || ri->e[s].present) continue;
        uint16_t type = cf__rd16(q + 2, c->be);
        unsigned tsz = cf__tiff_type_size(type);
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
    int g = cf__tiff_get(c, off, cntsz, TIFF_MIN_READ, &d);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF) {
        snprintf(why, whylen, "offset %llu is past end of file (%s)",
                 (unsigned long long)off, cf__tiff_eof_note(c, note, sizeof note));
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
    g = cf__tiff_get(c, off, tot, tot + TIFF_MIN_READ, &d);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF) {
        snprintf(why, whylen,
                 "%llu entries at offset %llu run past end of file (%s)",
                 (unsigned long long)n, (unsigned long long)off,
                 cf__tiff_eof_note(c, note, sizeof note));
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


/* IFD 0's SubIFDs (DNG, some scanners and GDAL-read files keep overviews
 * there): each listed IFD is read, not their chains, as GDAL does; a bad
 * one ends the list with a warning. */
static cf_status walk_subifds(ctx *c) {
    const ent *e = &c->ifds[0].e[S_SUBIFDS];
    if (!e->present || e->count == 0) return CF_OK;
    uint64_t want = e->count, room = (uint64_t)(CF_MAX_IFDS - c->nifds);
    if (want > room) {
        cf__tiff_warn(c, "IFD 0 lists %llu SubIFDs: only %llu are read (limit of %d "
             "IFDs)", (unsigned long long)e->count, (unsigned long long)room,
             CF_MAX_IFDS);
        want = room;
    }
    uint64_t offs[CF_MAX_IFDS], n = 0;
    cf_error e1;
    cf_error *saved = c->err;
    c->err = &e1;
    cf_status st = cf__tiff_tag_uints(c, 0, S_SUBIFDS, want, offs, &n);
    c->err = saved;
    if (st == CF__NEED_BYTES || st == CF_E_NOMEM) return st;
    if (st) {
        cf__tiff_warn(c, "IFD 0: SubIFDs ignored: %s", e1.msg);
        return CF_OK;
    }
    for (uint64_t k = 0; k < n; k++) {
        char why[200];
        st = read_ifd_at(c, offs[k], true, why, sizeof why);
        if (st == CF__NEED_BYTES) return st;
        if (st) {
            cf__tiff_warn(c, "SubIFD %llu of IFD 0: %s; it and the SubIFDs after it "
                 "are ignored, as GDAL does", (unsigned long long)k, why);
            break;
        }
    }
    return CF_OK;
}

static cf_status walk(ctx *c) {
    const uint8_t *h;
    char note[48];
    int g = cf__tiff_get(c, 0, 8, TIFF_MIN_READ, &h);
    if (g == G_NEED) return CF__NEED_BYTES;
    if (g == G_EOF)
        return cf__tiff_ferr(c, -1, CF_E_FORMAT, "too small to be a TIFF file (%s)",
                    cf__tiff_eof_note(c, note, sizeof note));
    if (h[0] == 'I' && h[1] == 'I') c->be = false;
    else if (h[0] == 'M' && h[1] == 'M') c->be = true;
    else return cf__tiff_ferr(c, -1, CF_E_FORMAT, "not a TIFF file (no II/MM mark)");
    uint16_t magic = cf__rd16(h + 2, c->be);
    uint64_t first;
    if (magic == 42) {
        c->big = false;
        first = cf__rd32(h + 4, c->be);
    } else if (magic == 43) {
        c->big = true;
        g = cf__tiff_get(c, 0, 16, TIFF_MIN_READ, &h);
        if (g == G_NEED) return CF__NEED_BYTES;
        if (g == G_EOF)
            return cf__tiff_ferr(c, -1, CF_E_FORMAT, "BigTIFF header is truncated (%s)",
                        cf__tiff_eof_note(c, note, sizeof note));
        if (cf__rd16(h + 4, c->be) != 8 || cf__rd16(h + 6, c->be) != 0)
            return cf__tiff_ferr(c, -1, CF_E_FORMAT,
                        "BigTIFF header has offset size %u, expected 8",
                        cf__rd16(h + 4, c->be));
        first = cf__rd64(h + 8, c->be);
    } else {
        return cf__tiff_ferr(c, -1, CF_E_FORMAT, "not a TIFF file (version %u)", magic);
    }
    if (first == 0) return cf__tiff_ferr(c, -1, CF_E_FORMAT, "the file has no IFD");

    /* The first IFD must be sound; a broken link after it ends the chain
     * there, and the IFDs before it are read, as GDAL reads them. */
    uint64_t off = first;
    while (off != 0) {
        int idx = c->nifds;
        if (idx >= CF_MAX_IFDS) {
            cf__tiff_warn(c, "the IFD chain goes on after %d IFDs (limit): the rest "
                 "is ignored", CF_MAX_IFDS);
            break;
        }
        char why[200];
        cf_status st = read_ifd_at(c, off, false, why, sizeof why);
        if (st == CF__NEED_BYTES) return st;
        if (st && idx == 0) return cf__tiff_ferr(c, 0, CF_E_FORMAT, "%s", why);
        if (st) {
            cf__tiff_warn(c, "IFD %d (next of IFD %d): %s; the IFD chain ends there, "
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
    return o->slot < 0 ? "entries" : cf__tiff_slot_name(o->slot);
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
    if (!v) return cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    size_t n = 0;
    for (int i = 0; i < c->nifds; i++)
        for (int s = 0; s < NSLOT; s++) {
            uint64_t lo, hi;
            if (data_span(c, &c->ifds[i].e[s], &lo, &hi) && !cf__tiff_known(c->p, lo, hi - lo))
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
    if (!v) return cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
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
            st = cf__tiff_ferr(c, v[k].ifd, CF_E_FORMAT,
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
        st = cf__tiff_ferr(c, -1, CF_E_LIMIT,
                  "parsing its header needs %s%llu bytes of memory (%llu tiles "
                  "or strips indexed at 16 bytes each, %llu header bytes), "
                  "above the budget of %llu (io option header_memory_max)",
                  need == UINT64_MAX ? "more than " : "",
                  (unsigned long long)need, (unsigned long long)chunks,
                  (unsigned long long)sat_add(c->p->total, fetch),
                  (unsigned long long)c->p->budget);
    return st;
}

static cf_status fetch_tag_data(ctx *c) {
    size_t nmiss = 0;
    span *miss = cf__malloc((size_t)c->nifds * NSLOT * sizeof *miss);
    if (!miss) return cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
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
            if (cf__tiff_known(c->p, e->off, e->nbytes)) continue;
            miss[nmiss].lo = cf__tiff_first_unknown(c->p, e->off, end);
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
    int g = cf__tiff_get(c, lo, hi - lo, hi - lo, &d);
    if (g != G_NEED) /* cannot happen: some byte in it is missing */
        return cf__tiff_ferr(c, -1, CF_E_FORMAT, "inconsistent tag data ranges");
    return CF__NEED_BYTES;
}

/* ------------------------------------------------------------------ */
/* Pass 3: one IFD                                                      */
/* ------------------------------------------------------------------ */

/* All values of a per-sample tag must agree; *v gets the value. */
static cf_status per_sample(ctx *c, int i, int s, uint64_t spp, uint64_t def,
                            uint64_t *v) {
    *v = def;
    if (!cf__tiff_has(c, i, s)) return CF_OK;
    uint64_t *vals = cf__malloc((size_t)spp * sizeof *vals), n = 0;
    if (!vals) return cf__tiff_ferr(c, i, CF_E_NOMEM, "out of memory");
    cf_status st = cf__tiff_tag_uints(c, i, s, spp, vals, &n);
    if (st == CF_OK && n == 0)
        st = cf__tiff_ferr(c, i, CF_E_FORMAT, "%s has no value", cf__tiff_slot_name(s));
    for (uint64_t k = 1; st == CF_OK && k < n; k++)
        if (vals[k] != vals[0])
            st = cf__tiff_ferr(c, i, CF_E_UNSUPPORTED,
                      "%s differs between samples (%llu for sample 0, %llu "
                      "for sample %llu)",
                      cf__tiff_slot_name(s), (unsigned long long)vals[0],
                      (unsigned long long)vals[k], (unsigned long long)k);
    if (st == CF_OK) *v = vals[0];
    free(vals);
    return st;
}

static void set_comp_name(cf__tiff_ifd *o) {
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


/* Up to n numbers of an optional tag into out, which keeps its defaults
 * when the tag is absent or has too few values (libtiff then ignores it
 * with a warning). */
static cf_status tag_floats(ctx *c, int i, int s, uint64_t n, float *out) {
    if (!cf__tiff_has(c, i, s)) return CF_OK;
    double d[6];
    uint64_t got = 0;
    cf_status st = cf__tiff_tag_doubles(c, i, s, n, d, &got);
    if (st) return cf__tiff_soft(c, st); /* a malformed one is ignored */
    if (got == n)
        for (uint64_t k = 0; k < n; k++) out[k] = (float)d[k];
    return CF_OK;
}

/* Tags that say how samples are laid out or coloured, with libtiff's
 * defaults (tif_aux.c) where they are absent. */
static cf_status parse_sample_tags(ctx *c, int i, cf__tiff_ifd *o) {
    uint64_t v;
    TRY(cf__tiff_tag_u1(c, i, S_FILLORDER, 1, &v));
    o->fill_order = v == 2 ? 2 : 1; /* libtiff ignores other values */
    TRY(cf__tiff_tag_u1(c, i, S_INKSET, 1, &v));
    o->inkset = v > 0xffff ? 0 : (uint16_t)v;
    o->extra_samples = 0;
    if (cf__tiff_has(c, i, S_EXTRA)) {
        uint64_t n = c->ifds[i].e[S_EXTRA].count;
        o->extra_samples = n < o->samples ? (uint16_t)n : o->samples;
    }
    TRY(cf__tiff_tag_u1(c, i, S_T4OPT, 0, &v));
    o->t4_options = (uint32_t)v;
    TRY(cf__tiff_tag_u1(c, i, S_T6OPT, 0, &v));
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

static cf_status parse_ifd(ctx *c, int i, cf__tiff_ifd *o) {
    uint64_t v, w, h, spp;
    o->ifd_offset = c->ifds[i].off;
    TRY(cf__tiff_tag_u1(c, i, S_SUBFILE, 0, &v));
    o->subfile_type = (uint32_t)v;
    if (!cf__tiff_has(c, i, S_WIDTH)) return cf__tiff_missing(c, i, S_WIDTH);
    if (!cf__tiff_has(c, i, S_HEIGHT)) return cf__tiff_missing(c, i, S_HEIGHT);
    TRY(cf__tiff_tag_u1(c, i, S_WIDTH, 0, &w));
    TRY(cf__tiff_tag_u1(c, i, S_HEIGHT, 0, &h));
    if (w == 0 || h == 0)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "image size is %llux%llu",
                    (unsigned long long)w, (unsigned long long)h);
    if (w > CF_MAX_DIMENSION || h > CF_MAX_DIMENSION)
        return cf__tiff_ferr(c, i, CF_E_LIMIT,
                    "image size %llux%llu exceeds the limit of %u",
                    (unsigned long long)w, (unsigned long long)h,
                    CF_MAX_DIMENSION);
    o->width = (uint32_t)w;
    o->height = (uint32_t)h;
    TRY(cf__tiff_tag_u1(c, i, S_COMP, 1, &v));
    if (v > 0xffff) return cf__tiff_ferr(c, i, CF_E_FORMAT, "Compression %llu is "
                                "invalid", (unsigned long long)v);
    o->compression = (uint16_t)v;
    bool ojpeg = o->compression == CF_COMP_OJPEG;
    /* Old-style JPEG files often lack these tags; libtiff (and so GDAL)
     * supplies them: YCbCr (also for a tag that says RGB), 8 bits, and 3
     * samples for YCbCr/RGB, 1 for grey. */
    uint64_t photo;
    TRY(cf__tiff_tag_u1(c, i, S_PHOTO, ojpeg ? 6 : UINT64_MAX, &photo));
    if (ojpeg && photo == 2) photo = 6;
    if (photo != UINT64_MAX && photo > 0xffff)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "PhotometricInterpretation %llu is "
                    "invalid", (unsigned long long)photo);
    uint64_t spp_def = 1;
    if (ojpeg && (photo == 2 || photo == 6)) spp_def = 3;
    TRY(cf__tiff_tag_u1(c, i, S_SPP, spp_def, &spp));
    if (spp == 0) return cf__tiff_ferr(c, i, CF_E_FORMAT, "SamplesPerPixel is 0");
    if (spp > CF_MAX_BANDS)
        return cf__tiff_ferr(c, i, CF_E_LIMIT, "SamplesPerPixel %llu exceeds the "
                    "limit of %d", (unsigned long long)spp, CF_MAX_BANDS);
    o->samples = (uint16_t)spp;
    if (photo == UINT64_MAX) photo = spp >= 3 ? 2 : 1;
    o->photometric = (uint16_t)photo;

    /* Any depth the TIFF format allows is parsed; which ones can be read
     * (and how) is the codec layer's call, made when the file opens. */
    uint64_t bits, sf;
    TRY(per_sample(c, i, S_BITS, spp, ojpeg ? 8 : 1, &bits));
    if (bits == 0 || (bits > 64 && bits != 128))
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "BitsPerSample %llu is invalid",
                    (unsigned long long)bits);
    o->bits = (uint16_t)bits;
    TRY(per_sample(c, i, S_SFMT, spp, 1, &sf));
    if (sf == 4) sf = 1; /* "void": read as unsigned, like libtiff */
    if (sf == 0 || sf > 6)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "SampleFormat %llu is invalid",
                    (unsigned long long)sf);
    if (bits == 128 && sf != 6)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "BitsPerSample 128 is only valid for "
                    "complex floating point (SampleFormat 6)");
    o->sample_format = (uint16_t)sf;

    TRY(cf__tiff_tag_u1(c, i, S_PLANAR, 1, &v));
    if (v != 1 && v != 2)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "PlanarConfiguration %llu is invalid",
                    (unsigned long long)v);
    o->planar = spp == 1 ? 1 : (uint16_t)v;
    TRY(cf__tiff_tag_u1(c, i, S_PRED, 1, &v));
    if (v < 1 || v > 3)
        return cf__tiff_ferr(c, i, CF_E_UNSUPPORTED, "Predictor %llu is not supported",
                    (unsigned long long)v);
    o->predictor = (uint16_t)v;

    o->ycbcr_sub_h = o->ycbcr_sub_v = 2;
    if (cf__tiff_has(c, i, S_YCBCR)) {
        uint64_t sub[2] = {2, 2}, n;
        TRY(cf__tiff_tag_uints(c, i, S_YCBCR, 2, sub, &n));
        if (n == 2 && (sub[0] == 1 || sub[0] == 2 || sub[0] == 4) &&
            (sub[1] == 1 || sub[1] == 2 || sub[1] == 4)) {
            o->ycbcr_sub_h = (uint16_t)sub[0];
            o->ycbcr_sub_v = (uint16_t)sub[1];
        } else if (o->photometric == 6) {
            return cf__tiff_ferr(c, i, CF_E_FORMAT, "YCbCrSubsampling is invalid");
        }
    }
    if (cf__tiff_has(c, i, S_LERC)) {
        uint64_t lp[2] = {0, 0}, n;
        TRY(cf__tiff_tag_uints(c, i, S_LERC, 2, lp, &n));
        if (n >= 1) o->lerc_version = (uint32_t)lp[0];
        if (n >= 2) o->lerc_sub = (uint32_t)lp[1];
    }
    if (cf__tiff_has(c, i, S_JPEGTAB)) {
        char *t;
        size_t len;
        const ent *e = &c->ifds[i].e[S_JPEGTAB];
        if (e->nbytes <= TIFF_MAX_JPEGTABLES)
            TRY(cf__tiff_charge(c, i, e->nbytes, "JPEGTables"));
        TRY(cf__tiff_tag_bytes(c, i, S_JPEGTAB, TIFF_MAX_JPEGTABLES, &t, &len));
        if (len) {
            o->jpeg_tables = (uint8_t *)t;
            o->jpeg_tables_len = len;
        } else {
            free(t);
        }
    }
    TRY(parse_sample_tags(c, i, o));
    set_comp_name(o);
    TRY(cf__tiff_parse_chunks(c, i, o));
    return ojpeg ? cf__tiff_parse_ojpeg(c, i, o) : CF_OK;
}

/* ------------------------------------------------------------------ */
/* Levels and the whole file                                            */
/* ------------------------------------------------------------------ */

static bool is_mask(const cf__tiff_ifd *d) {
    return (d->subfile_type & 4) && d->photometric == 4 && d->samples == 1 &&
           (d->bits == 1 || d->bits == 8);
}

/* GDAL opens at most this many overviews (a guard against files with
 * thousands of reduced IFDs). */
#define TIFF_MAX_OVERVIEWS 30

/* Levels and masks as GDAL finds them: level 0 is the first image IFD;
 * overviews and masks come from IFD 0's SubIFDs when it has any, else
 * from the rest of the main chain.  Other IFDs are pages, not read. */
static cf_status build_levels(ctx *c, cf__tiff *t) {
    int l0 = -1;
    bool subs = false;
    for (int i = 0; i < t->nifds; i++) {
        if (l0 < 0 && !t->ifds[i].sub && !(t->ifds[i].subfile_type & 4))
            l0 = i;
        subs |= t->ifds[i].sub != 0;
    }
    if (l0 < 0)
        return cf__tiff_ferr(c, -1, CF_E_FORMAT, "no image IFD (every IFD is a mask)");
    t->levels = cf__malloc((size_t)t->nifds * sizeof *t->levels);
    t->mask_of_level = cf__malloc((size_t)t->nifds * sizeof *t->mask_of_level);
    if (!t->levels || !t->mask_of_level)
        return cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    const cf__tiff_ifd *b = &t->ifds[l0];
    t->levels[0] = l0;
    t->nlevels = 1;
    for (int i = 0; i < t->nifds; i++) {
        const cf__tiff_ifd *d = &t->ifds[i];
        if (i == l0 || (d->subfile_type & 5) != 1 || !d->sub != !subs)
            continue;
        if (d->samples != b->samples || d->bits != b->bits ||
            d->sample_format != b->sample_format || d->width > b->width ||
            d->height > b->height)
            continue;
        if (t->nlevels > TIFF_MAX_OVERVIEWS) {
            cf__tiff_warn(c, "more than %d overviews: IFD %d and the ones after it "
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
        const cf__tiff_ifd *d = &t->ifds[i];
        if (!is_mask(d) || !d->sub != !subs) continue;
        for (int l = 0; l < t->nlevels; l++) {
            const cf__tiff_ifd *lv = &t->ifds[t->levels[l]];
            if (t->mask_of_level[l] < 0 && lv->width == d->width &&
                lv->height == d->height) {
                t->mask_of_level[l] = i;
                break;
            }
        }
    }
    return CF_OK;
}

static void free_ifd(cf__tiff_ifd *d) {
    free(d->offsets);
    free(d->counts);
    free(d->jpeg_tables);
    memset(d, 0, sizeof *d);
}

/* Parse every IFD into t->ifds.  The first must parse.  One after it that
 * does not ends its list there, as GDAL stops at the first directory
 * libtiff cannot read: the rest of the main chain, or of IFD 0's SubIFDs,
 * is left out with a warning. */
static cf_status parse_ifds(ctx *c, cf__tiff *t) {
    bool ended[2] = {false, false}; /* main chain, SubIFDs */
    size_t namelen = strlen(c->p->name);
    for (int i = 0; i < c->nifds; i++) {
        bool sub = c->ifds[i].sub;
        if (ended[sub]) continue;
        cf__tiff_ifd *o = &t->ifds[t->nifds];
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
        cf__tiff_warn(c, "%s; it and the %s after it are ignored, as GDAL does", m,
             sub ? "SubIFDs" : "IFDs");
        ended[sub] = true;
    }
    return CF_OK;
}

static cf_status parse_all(ctx *c, cf__tiff **out) {
    TRY(walk(c));
    TRY(check_arrays(c));
    TRY(fetch_tag_data(c));
    cf__tiff *t = cf__calloc(1, sizeof *t);
    if (!t) return cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    t->bigtiff = c->big;
    t->big_endian = c->be;
    t->file_size = c->p->file_size;
    t->ifds = cf__calloc((size_t)c->nifds, sizeof *t->ifds);
    cf_status st = CF_OK;
    if (!t->ifds) st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    if (st == CF_OK) st = parse_ifds(c, t);
    if (st == CF_OK) st = build_levels(c, t);
    if (st == CF_OK) {
        int l0 = t->levels[0];
        uint16_t spp = t->ifds[l0].samples;
        t->scale = cf__malloc(spp * sizeof *t->scale);
        t->offset = cf__malloc(spp * sizeof *t->offset);
        if (!t->scale || !t->offset) st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
        for (int k = 0; st == CF_OK && k < spp; k++) {
            t->scale[k] = 1;
            t->offset[k] = 0;
        }
        int r0 = t->ifds[l0].index; /* its entries in c->ifds */
        if (st == CF_OK) st = cf__tiff_parse_geo(c, r0, t);
        if (st == CF_OK) st = cf__tiff_parse_nodata(c, r0, t);
        if (st == CF_OK) st = cf__tiff_parse_meta(c, r0, t, spp);
    }
    if (st == CF_OK && c->nwarn) {
        t->warnings = cf__strdup(c->warn);
        if (!t->warnings) st = cf__tiff_ferr(c, -1, CF_E_NOMEM, "out of memory");
    }
    if (st != CF_OK) {
        cf__tiff_free(t);
        return st;
    }
    t->header_end = c->hdr_end;
    *out = t;
    return CF_OK;
}

/* ------------------------------------------------------------------ */
/* Public API                                                           */
/* ------------------------------------------------------------------ */

cf__tiff_parser *cf__tiff_parser_new(uint64_t file_size, const char *name) {
    cf__tiff_parser *p = cf__calloc(1, sizeof *p);
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

void cf__tiff_parser_free(cf__tiff_parser *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nr; i++) free(p->r[i].data);
    free(p->r);
    free(p->name);
    free(p);
}

void cf__tiff_parser_set_size(cf__tiff_parser *p, uint64_t file_size) {
    if (p) p->file_size = file_size;
}

void cf__tiff_parser_set_budget(cf__tiff_parser *p, uint64_t bytes) {
    if (p) p->budget = bytes ? bytes : CF_HEADER_MEMORY_DEFAULT;
}

cf_status cf__tiff_parser_add(cf__tiff_parser *p, uint64_t off,
                             const uint8_t *data, size_t len, cf_error *err) {
    if (!p || (!data && len))
        return cf__err(err, CF_E_ARG, "cf__tiff_parser_add: bad argument");
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

cf_status cf__tiff_parser_run(cf__tiff_parser *p, cf__tiff **out,
                             uint64_t *need_off, uint64_t *need_len,
                             cf_error *err) {
    if (!p || !out || !need_off || !need_len)
        return cf__err(err, CF_E_ARG, "cf__tiff_parser_run: bad argument");
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

cf_status cf__tiff_parse_memory(const uint8_t *data, size_t len,
                               const char *name, cf__tiff **out, cf_error *err) {
    if (!out || (!data && len))
        return cf__err(err, CF_E_ARG, "cf__tiff_parse_memory: bad argument");
    *out = NULL;
    cf__tiff_parser *p = cf__tiff_parser_new(len, name);
    if (!p) return cf__err(err, CF_E_NOMEM, "out of memory");
    /* Fed through the same protocol as remote files so that both paths
     * are exercised by the same tests and fuzzers. */
    size_t first = len < 65536 ? len : 65536;
    cf_status st = cf__tiff_parser_add(p, 0, data, first, err);
    while (st == CF_OK) {
        uint64_t no, nl;
        st = cf__tiff_parser_run(p, out, &no, &nl, err);
        if (st != CF__NEED_BYTES) break;
        if (no >= len) nl = 0;
        else if (nl > len - no) nl = len - no;
        st = cf__tiff_parser_add(p, no, data + (nl ? no : 0), (size_t)nl, err);
    }
    cf__tiff_parser_free(p);
    return st;
}

void cf__tiff_free(cf__tiff *t) {
    if (!t) return;
    for (int i = 0; i < t->nifds; i++) free_ifd(&t->ifds[i]);
    free(t->warnings);
    free(t->ifds);
    free(t->levels);
    free(t->mask_of_level);
    free(t->scale);
    free(t->offset);
    cf__tiff_meta_free(t->meta);
    free(t->geokeys);
    free(t->geodoubles);
    free(t->geoascii);
    free(t);
}

const char *cf__tiff_compression_name(const cf__tiff_ifd *ifd) {
    if (!ifd) return "UNKNOWN";
    return ifd->comp_name[0] ? ifd->comp_name : "UNKNOWN";
}
