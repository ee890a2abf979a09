/*
 * tiff_ojpeg.c - old-style JPEG (compression 6): the JPEG header libtiff
 * would make for an IFD, and its chunks pointed at the entropy-coded data.
 */
#include "tiff_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static cf_status oj_refuse(cf__tiff_ifd *o, cf_status code, const char *fmt,
                           ...) CF__PRINTF(3, 4);
static cf_status oj_refuse(cf__tiff_ifd *o, cf_status code, const char *fmt,
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
    int g = cf__tiff_get(c, at, n, n > 4096 ? n : 4096, d);
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
static cf_status oj_walk(ctx *c, cf__tiff_ifd *o, oj_state *j, uint64_t start,
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
static cf_status oj_tables(ctx *c, int i, cf__tiff_ifd *o, oj_state *j) {
    static const int slot[3] = {S_JQTAB, S_JDCTAB, S_JACTAB};
    uint64_t fs = c->p->file_size;
    for (int t = 0; t < 3; t++) {
        const char *name = cf__tiff_slot_name(slot[t]);
        uint64_t off[3] = {0, 0, 0}, n = 0;
        if (!cf__tiff_has(c, i, slot[t]))
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
        cf_status st = cf__tiff_tag_uints(c, i, slot[t], 3, off, &n);
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
static cf_status oj_header(ctx *c, int i, cf__tiff_ifd *o, const oj_state *j,
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
    TRY(cf__tiff_charge(c, i, n, "old-style JPEG header"));
    uint8_t *h = cf__malloc(n), *w = h;
    if (!h) return cf__tiff_ferr(c, i, CF_E_NOMEM, "out of memory");
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

cf_status cf__tiff_parse_ojpeg(ctx *c, int i, cf__tiff_ifd *o) {
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
    TRY(cf__tiff_soft(c, cf__tiff_tag_u1(c, i, S_JPEGPROC, 1, &proc)));
    if (proc != 1)
        return oj_refuse(o, CF_E_UNSUPPORTED, "JPEGProc %llu (%s) is not "
                         "read; only baseline (1)", (unsigned long long)proc,
                         proc == 14 ? "lossless" : "unknown");
    TRY(cf__tiff_soft(c, cf__tiff_tag_u1(c, i, S_JRESTART, 0, &tag_ri)));
    if (o->nchunks == 0 || o->counts[0] == 0)
        return oj_refuse(o, CF_E_FORMAT, "strip 0 is empty");

    /* Where libtiff looks for markers: the JPEGInterchangeFormat stream
     * (clipped to the file as libtiff does), else the first strip. */
    uint64_t fs = c->p->file_size, jif = 0, jlen = 0, start, end;
    TRY(cf__tiff_soft(c, cf__tiff_tag_u1(c, i, S_JIF, 0, &jif)));
    TRY(cf__tiff_soft(c, cf__tiff_tag_u1(c, i, S_JIFLEN, 0, &jlen)));
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
