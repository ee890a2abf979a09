/*
 * tiff_chunks.c - the chunks of an IFD: tiles or strips as libtiff reads
 * them (their offsets and byte counts, the counts libtiff makes up for
 * uncompressed files that lack them), checked against the file and the
 * header memory budget.
 */
#include "tiff_internal.h"

#include <stdlib.h>
#include <string.h>

/* libtiff's size of uncompressed chunk k (TIFFVStripSize64 with the
 * strip's rows, TIFFTileSize64). */
static uint64_t none_bytes(const cf__tiff_ifd *o, uint64_t k, uint64_t spc) {
    uint64_t rows = o->chunk_h;
    if (!o->tiled) {
        uint64_t row0 = (k % o->chunks_down) * o->chunk_h;
        if (o->height - row0 < rows) rows = o->height - row0;
    }
    return cf__chunk_bytes(o->chunk_w, spc, o->bits, rows);
}

cf_status cf__tiff_parse_chunks(ctx *c, int i, cf__tiff_ifd *o) {
    int so, sc;
    uint64_t cw, ch;
    /* As libtiff: the tile size makes a file tiled, and the offsets and
     * byte counts are one field whichever tag holds them (some writers put
     * tile offsets in StripOffsets), TileOffsets winning when both are. */
    o->tiled = cf__tiff_has(c, i, S_TW) || cf__tiff_has(c, i, S_TL);
    so = cf__tiff_has(c, i, S_TILEOFF) ? S_TILEOFF : S_STRIPOFF;
    sc = cf__tiff_has(c, i, S_TILECNT) ? S_TILECNT : S_STRIPCNT;
    if (o->tiled) {
        if (!cf__tiff_has(c, i, S_TW)) return cf__tiff_missing(c, i, S_TW);
        if (!cf__tiff_has(c, i, S_TL)) return cf__tiff_missing(c, i, S_TL);
        TRY(cf__tiff_tag_u1(c, i, S_TW, 0, &cw));
        TRY(cf__tiff_tag_u1(c, i, S_TL, 0, &ch));
        /* The spec wants multiples of 16; like GDAL we accept any size. */
        if (cw == 0 || ch == 0)
            return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s is 0",
                        cw == 0 ? "TileWidth" : "TileLength");
        if (cw > CF_MAX_DIMENSION || ch > CF_MAX_DIMENSION)
            return cf__tiff_ferr(c, i, CF_E_LIMIT, "tile size %llux%llu exceeds the "
                        "limit of %u", (unsigned long long)cw,
                        (unsigned long long)ch, CF_MAX_DIMENSION);
    } else {
        cw = o->width;
        TRY(cf__tiff_tag_u1(c, i, S_RPS, o->height, &ch));
        if (ch == 0) return cf__tiff_ferr(c, i, CF_E_FORMAT, "RowsPerStrip is 0");
        if (ch > o->height) ch = o->height; /* 2^32-1 means one strip */
    }
    if (!cf__tiff_has(c, i, so)) return cf__tiff_missing(c, i, o->tiled ? S_TILEOFF : so);
    if (!cf__tiff_has(c, i, sc)) return cf__tiff_missing(c, i, o->tiled ? S_TILECNT : sc);
    o->chunk_w = (uint32_t)cw;
    o->chunk_h = (uint32_t)ch;
    o->chunks_across = (uint32_t)((o->width + cw - 1) / cw);
    o->chunks_down = (uint32_t)((o->height + ch - 1) / ch);

    /* Decoded bytes of one chunk, rows padded to whole bytes. */
    uint64_t spc = o->planar == 2 ? 1 : o->samples;
    if (!cf__chunk_bytes(cw, spc, o->bits, ch))
        return cf__tiff_ferr(c, i, CF_E_LIMIT,
                    "a %s of %llux%llu pixels x %llu samples x %u bits "
                    "exceeds the limit of %llu bytes",
                    o->tiled ? "tile" : "strip", (unsigned long long)cw,
                    (unsigned long long)ch, (unsigned long long)spc, o->bits,
                    (unsigned long long)CF_MAX_CHUNK_BYTES);

    uint64_t n = (uint64_t)o->chunks_across * o->chunks_down;
    if (o->planar == 2) n *= o->samples;
    if (n > CF_MAX_CHUNKS)
        return cf__tiff_ferr(c, i, CF_E_LIMIT, "%llu %s exceed the limit of %llu",
                    (unsigned long long)n, o->tiled ? "tiles" : "strips",
                    (unsigned long long)CF_MAX_CHUNKS);
    const ent *eo = &c->ifds[i].e[so], *ec = &c->ifds[i].e[sc];
    if (eo->count != ec->count)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s has %llu entries but %s has %llu",
                    cf__tiff_slot_name(so), (unsigned long long)eo->count,
                    cf__tiff_slot_name(sc), (unsigned long long)ec->count);
    if (eo->count < n)
        return cf__tiff_ferr(c, i, CF_E_FORMAT, "%s has %llu entries, expected %llu",
                    cf__tiff_slot_name(so), (unsigned long long)eo->count,
                    (unsigned long long)n);
    /* Each chunk takes at least 4 bytes of the file (two SHORT entries): a
     * huge tile count in a small file fails here, and both arrays must be
     * in the file, before anything is allocated. */
    uint64_t fs = c->p->file_size;
    if (fs != UINT64_MAX && n > fs / 4)
        return cf__tiff_ferr(c, i, CF_E_FORMAT,
                    "%llu %s cannot fit in a file of %llu bytes",
                    (unsigned long long)n, o->tiled ? "tiles" : "strips",
                    (unsigned long long)fs);
    const uint8_t *dd;
    TRY(cf__tiff_tag_data(c, i, so, n, &dd));
    TRY(cf__tiff_tag_data(c, i, sc, n, &dd));
    TRY(cf__tiff_charge(c, i, n * 2 * sizeof(uint64_t), "the tile index"));
    o->nchunks = n;
    o->offsets = cf__malloc((size_t)n * sizeof *o->offsets);
    o->counts = cf__malloc((size_t)n * sizeof *o->counts);
    if (!o->offsets || !o->counts)
        return cf__tiff_ferr(c, i, CF_E_NOMEM, "out of memory for %llu chunk offsets",
                    (unsigned long long)n);
    uint64_t got;
    TRY(cf__tiff_tag_uints(c, i, so, n, o->offsets, &got));
    TRY(cf__tiff_tag_uints(c, i, sc, n, o->counts, &got));
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
            return cf__tiff_ferr(c, i, CF_E_LIMIT,
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
        cf__tiff_warn(c, "IFD %d: %llu of %llu %ss lie past the end of the file "
             "(truncated?), the first is %s %llu: reading them fails", i,
             (unsigned long long)past, (unsigned long long)n, what, what,
             (unsigned long long)first_past);
    return CF_OK;
}
