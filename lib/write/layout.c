/*
 * layout.c - a cf_writer's header laid out at close: the directories
 * (full resolution, its mask, each overview and its mask, in GDAL's COG
 * order), their tags (the codec's, the grid's GeoKeys, nodata,
 * GDAL_METADATA's descriptions, scales and offsets) and each tile's
 * offset in the order the tile data follows them.
 */
#include "writer_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* GDAL_METADATA: band descriptions, scales and offsets. */
static char *gdal_metadata(const cf_writer *w) {
    if (!w->desc && !w->scales) return NULL;
    size_t cap = 64, n = 0;
    for (uint32_t b = 0; b < w->o.bands; b++)
        cap += 256 + (w->desc && w->desc[b] ? 10 * strlen(w->desc[b]) : 0);
    char *s = cf__malloc(cap);
    if (!s) return NULL;
    n += (size_t)snprintf(s + n, cap - n, "<GDALMetadata>\n");
    for (uint32_t b = 0; b < w->o.bands; b++) {
        if (w->desc && w->desc[b]) {
            n += (size_t)snprintf(s + n, cap - n,
                                  "  <Item name=\"DESCRIPTION\" sample=\"%u\" role=\"description\">",
                                  b);
            for (const char *c = w->desc[b]; *c; c++) {
                /* escaped twice, as GDAL writes it (the value is escaped,
                 * then the XML it goes into): GDAL unescapes twice */
                const char *e = *c == '<' ? "&amp;lt;" : *c == '>' ? "&amp;gt;"
                                : *c == '&' ? "&amp;amp;" : *c == '"' ? "&amp;quot;" : NULL;
                if (e) n += (size_t)snprintf(s + n, cap - n, "%s", e);
                else s[n++] = *c;
            }
            n += (size_t)snprintf(s + n, cap - n, "</Item>\n");
        }
        if (w->scales) {
            n += (size_t)snprintf(s + n, cap - n,
                                  "  <Item name=\"OFFSET\" sample=\"%u\" role=\"offset\">%.17g</Item>\n"
                                  "  <Item name=\"SCALE\" sample=\"%u\" role=\"scale\">%.17g</Item>\n",
                                  b, w->offsets[b], b, w->scales[b]);
        }
    }
    snprintf(s + n, cap - n, "</GDALMetadata>");
    return s;
}

/* Directories in file order, as GDAL's COG driver writes them: the full
 * resolution, its mask, the overviews (largest first), their masks. */
#define CF__WRITER_MAX_DIRS (2 * CF__WRITER_MAX_LEVELS)

static int ndirs(const cf_writer *w) { return w->o.mask ? 2 * w->nlev : w->nlev; }

/* The directory number of level l's image (mask 0) or its mask's. */
static int dir_index(const cf_writer *w, int l, int mask) {
    if (!w->o.mask) return l;
    if (!l) return mask;
    return mask ? w->nlev + l : l + 1;
}

typedef struct w_layout {
    cf__ifd_out ifd[CF__WRITER_MAX_DIRS];
    uint64_t ifd_at[CF__WRITER_MAX_DIRS], ifd_size[CF__WRITER_MAX_DIRS];
    void *offs[CF__WRITER_MAX_DIRS], *lens[CF__WRITER_MAX_DIRS]; /* tag arrays */
    uint16_t *bps, *fmt, *extra;
    uint16_t geokeys[16];
    double scale[3], tie[6], mtx[16];
    char nodata[64];
    char *meta;
    uint16_t one16[8];
    uint32_t one32[8];
    uint16_t ycbcr_sub[2];
    uint32_t ref_bw[12];   /* ReferenceBlackWhite: 6 rationals */
    uint32_t lerc[2];      /* LercParameters: version, layer */
    uint16_t mask16[5];    /* a mask's bits, compression, photometric, spp, format */
    uint32_t mask_sub[2];  /* its NewSubfileType: full resolution, overview */
    uint32_t dims[CF__WRITER_MAX_DIRS][3]; /* width, height, tile size */
} w_layout;

static void layout_free(w_layout *y, int ndir) {
    for (int l = 0; l < ndir; l++) {
        free(y->offs[l]);
        free(y->lens[l]);
    }
    free(y->bps);
    free(y->fmt);
    free(y->extra);
    free(y->meta);
}

/* Directory k, the mask of level l (GDAL's tags for it); the tile arrays
 * come later. */
static cf_status make_mask_ifd(cf_writer *w, w_layout *y, int k, int l, int big,
                               cf_error *err) {
    cf__ifd_out *d = &y->ifd[k];
    w_level *L = &w->lev[l];
    uint64_t n = (uint64_t)L->tx * L->ty;
    uint16_t ot = big ? CF__T_LONG8 : CF__T_LONG;
    d->n = 0;
    CF__TRY(cf__ifd_add(d, 254, CF__T_LONG, 1, &y->mask_sub[l ? 1 : 0], err));
    CF__TRY(cf__ifd_add(d, 256, CF__T_LONG, 1, &y->dims[k][0], err));
    CF__TRY(cf__ifd_add(d, 257, CF__T_LONG, 1, &y->dims[k][1], err));
    CF__TRY(cf__ifd_add(d, 258, CF__T_SHORT, 1, &y->mask16[0], err));
    CF__TRY(cf__ifd_add(d, 259, CF__T_SHORT, 1, &y->mask16[1], err));
    CF__TRY(cf__ifd_add(d, 262, CF__T_SHORT, 1, &y->mask16[2], err));
    CF__TRY(cf__ifd_add(d, 277, CF__T_SHORT, 1, &y->mask16[3], err));
    CF__TRY(cf__ifd_add(d, 284, CF__T_SHORT, 1, &y->mask16[3], err));
    CF__TRY(cf__ifd_add(d, 322, CF__T_LONG, 1, &y->dims[k][2], err));
    CF__TRY(cf__ifd_add(d, 323, CF__T_LONG, 1, &y->dims[k][2], err));
    CF__TRY(cf__ifd_add(d, 324, ot, n, y->offs[k], err));
    CF__TRY(cf__ifd_add(d, 325, ot, n, y->lens[k], err));
    return cf__ifd_add(d, 339, CF__T_SHORT, 1, &y->mask16[4], err);
}

/* Directory k, of level l (its image, or with `mask` its mask's); the
 * tile arrays come later (the same size). */
static cf_status make_ifd(cf_writer *w, w_layout *y, int k, int l, int mask, int big,
                          cf_error *err) {
    cf__ifd_out *d = &y->ifd[k];
    w_level *L = &w->lev[l];
    const uint32_t nb = w->o.bands;
    uint64_t n = (uint64_t)L->tx * L->ty;
    d->n = 0;
    /* one16: compression, photometric, spp, planar, predictor, tile size;
     * one32: subfile type, width, height, [overview subfile type] */
    y->one16[0] = w->p.compression;
    y->one16[1] = w->p.photometric;
    y->one16[2] = (uint16_t)nb;
    y->one16[3] = 1;
    y->one16[4] = w->p.predictor;
    y->one32[0] = 0;
    y->one32[1] = 1;
    uint32_t *dims = y->dims[k];
    dims[0] = L->w;
    dims[1] = L->h;
    dims[2] = w->o.tile_size;
    free(y->offs[k]);
    free(y->lens[k]);
    y->offs[k] = cf__calloc(n ? n : 1, big ? 8 : 4);
    y->lens[k] = cf__calloc(n ? n : 1, big ? 8 : 4);
    if (!y->offs[k] || !y->lens[k]) return cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
    if (mask) return make_mask_ifd(w, y, k, l, big, err);
    uint16_t ot = big ? CF__T_LONG8 : CF__T_LONG;
    CF__TRY(cf__ifd_add(d, 254, CF__T_LONG, 1, &y->one32[l ? 1 : 0], err));
    CF__TRY(cf__ifd_add(d, 256, CF__T_LONG, 1, &dims[0], err));
    CF__TRY(cf__ifd_add(d, 257, CF__T_LONG, 1, &dims[1], err));
    CF__TRY(cf__ifd_add(d, 258, CF__T_SHORT, nb, y->bps, err));
    CF__TRY(cf__ifd_add(d, 259, CF__T_SHORT, 1, &y->one16[0], err));
    CF__TRY(cf__ifd_add(d, 262, CF__T_SHORT, 1, &y->one16[1], err));
    CF__TRY(cf__ifd_add(d, 277, CF__T_SHORT, 1, &y->one16[2], err));
    CF__TRY(cf__ifd_add(d, 284, CF__T_SHORT, 1, &y->one16[3], err));
    if (w->p.predictor != 1) CF__TRY(cf__ifd_add(d, 317, CF__T_SHORT, 1, &y->one16[4], err));
    CF__TRY(cf__ifd_add(d, 322, CF__T_LONG, 1, &dims[2], err));
    CF__TRY(cf__ifd_add(d, 323, CF__T_LONG, 1, &dims[2], err));
    CF__TRY(cf__ifd_add(d, 324, ot, n, y->offs[k], err));
    CF__TRY(cf__ifd_add(d, 325, ot, n, y->lens[k], err));
    /* samples past the colour ones are extra: unspecified (0), not alpha,
     * since nothing says they are (a 4th WEBP band is RGBA to libwebp) */
    uint32_t colour = w->p.photometric == 2 || w->p.photometric == 6 ? 3 : 1;
    if (nb > colour) CF__TRY(cf__ifd_add(d, 338, CF__T_SHORT, nb - colour, y->extra, err));
    CF__TRY(cf__ifd_add(d, 339, CF__T_SHORT, nb, y->fmt, err));
    if (w->p.photometric == 6) { /* as libtiff writes YCbCr JPEG for GDAL */
        CF__TRY(cf__ifd_add(d, 530, CF__T_SHORT, 2, y->ycbcr_sub, err));
        CF__TRY(cf__ifd_add(d, 532, CF__T_RATIONAL, 6, y->ref_bw, err));
    }
    if (w->p.compression == 34887) CF__TRY(cf__ifd_add(d, 50674, CF__T_LONG, 2, y->lerc, err));
    if (l == 0 && w->has_gt) {
        if (w->gt[2] == 0 && w->gt[4] == 0) {
            CF__TRY(cf__ifd_add(d, 33550, CF__T_DOUBLE, 3, y->scale, err));
            CF__TRY(cf__ifd_add(d, 33922, CF__T_DOUBLE, 6, y->tie, err));
        } else {
            CF__TRY(cf__ifd_add(d, 34264, CF__T_DOUBLE, 16, y->mtx, err));
        }
        if (w->epsg > 0) CF__TRY(cf__ifd_add(d, 34735, CF__T_SHORT, 16, y->geokeys, err));
        if (w->gk) {
            CF__TRY(cf__ifd_add(d, 34735, CF__T_SHORT, w->gk->ndir, w->gk->dir, err));
            if (w->gk->ndbl)
                CF__TRY(cf__ifd_add(d, 34736, CF__T_DOUBLE, w->gk->ndbl, w->gk->dbl, err));
            if (w->gk->nascii)
                CF__TRY(cf__ifd_add(d, 34737, CF__T_ASCII, w->gk->nascii + 1, w->gk->ascii,
                                    err));
        }
    }
    if (l == 0 && y->meta)
        CF__TRY(cf__ifd_add(d, 42112, CF__T_ASCII, strlen(y->meta) + 1, y->meta, err));
    if (w->o.has_nodata)
        CF__TRY(cf__ifd_add(d, 42113, CF__T_ASCII, strlen(y->nodata) + 1, y->nodata, err));
    return CF_OK;
}

static cf_status fill_common(cf_writer *w, w_layout *y, cf_error *err) {
    const uint32_t nb = w->o.bands;
    y->bps = cf__malloc(nb * sizeof(uint16_t));
    y->fmt = cf__malloc(nb * sizeof(uint16_t));
    y->extra = cf__calloc(nb, sizeof(uint16_t)); /* 0: unspecified */
    if (!y->bps || !y->fmt || !y->extra) return cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
    for (uint32_t b = 0; b < nb; b++) {
        y->bps[b] = w->p.bits;
        y->fmt[b] = w->p.sample_format;
    }
    y->ycbcr_sub[0] = w->p.ycbcr_sub_h;
    y->ycbcr_sub[1] = w->p.ycbcr_sub_v;
    /* libtiff's default for 8-bit YCbCr: {0, 255, 128, 255, 128, 255} */
    const uint32_t rbw[12] = {0, 1, 255, 1, 128, 1, 255, 1, 128, 1, 255, 1};
    memcpy(y->ref_bw, rbw, sizeof rbw);
    y->lerc[0] = 4; /* libtiff's LERC_VERSION_2_4 */
    y->lerc[1] = w->p.lerc_sub;
    const uint16_t m16[5] = {1, 8, 4, 1, 1};
    memcpy(y->mask16, m16, sizeof m16);
    y->mask_sub[0] = 4; /* a mask */
    y->mask_sub[1] = 5; /* a mask of a reduced-resolution image */
    double *g = w->gt;
    y->scale[0] = g[1];
    y->scale[1] = -g[5];
    y->scale[2] = 0;
    double tie[6] = {0, 0, 0, g[0], g[3], 0};
    memcpy(y->tie, tie, sizeof tie);
    double m[16] = {g[1], g[2], 0, g[0], g[4], g[5], 0, g[3], 0, 0, 0, 0, 0, 0, 0, 1};
    memcpy(y->mtx, m, sizeof m);
    uint16_t gk[16] = {1, 1, 0, 3, 1024, 0, 1, (uint16_t)(w->geographic ? 2 : 1),
                       1025, 0, 1, 1, (uint16_t)(w->geographic ? 2048 : 3072), 0, 1,
                       (uint16_t)w->epsg};
    memcpy(y->geokeys, gk, sizeof gk);
    double nd = w->o.nodata;
    if (isnan(nd)) snprintf(y->nodata, sizeof y->nodata, "nan");
    else if (isinf(nd)) snprintf(y->nodata, sizeof y->nodata, nd > 0 ? "inf" : "-inf");
    else snprintf(y->nodata, sizeof y->nodata, "%.18g", nd);
    if (w->desc || w->scales) {
        y->meta = gdal_metadata(w);
        if (!y->meta) return cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
    }
    return CF_OK;
}

static void put_arr(void *a, int big, uint64_t i, uint64_t v) {
    if (big) ((uint64_t *)a)[i] = v;
    else ((uint32_t *)a)[i] = (uint32_t)v;
}

/* (writer_state.h) */
cf_status cf__writer_header(cf_writer *w, uint8_t **hdr_out, uint64_t *head_out,
                           cf_error *err) {
    *hdr_out = NULL;
    w_layout *y = cf__calloc(1, sizeof *y);
    if (!y) return cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
    cf_status st = fill_common(w, y, err);
    const int nd = ndirs(w);
    int lev_of[CF__WRITER_MAX_DIRS], mask_of[CF__WRITER_MAX_DIRS]; /* dir_index inverted */
    for (int l = 0; l < w->nlev; l++)
        for (int m = 0; m <= w->o.mask; m++) {
            lev_of[dir_index(w, l, m)] = l;
            mask_of[dir_index(w, l, m)] = m;
        }
    uint64_t data = 0;
    for (int l = 0; l < w->nlev; l++)
        for (size_t i = 0; i < (size_t)w->lev[l].tx * w->lev[l].ty; i++)
            data += w->lev[l].len[i] + (w->o.mask ? w->lev[l].mlen[i] : 0);
    int big = 0;
    uint64_t head = 0;
    for (int pass = 0; !st && pass < 2; pass++) {
        head = big ? 16 : 8;
        for (int k = 0; !st && k < nd; k++) {
            st = make_ifd(w, y, k, lev_of[k], mask_of[k], big, err);
            y->ifd_at[k] = head;
            y->ifd_size[k] = cf__ifd_size(&y->ifd[k], big);
            head += y->ifd_size[k];
        }
        if (big || head + data < ((uint64_t)1 << 32) - 1) break;
        big = 1; /* 4 GiB or more: BigTIFF */
    }
    /* Tile data: the smallest overview first, full resolution last; each
     * mask tile right after its image tile (GDAL's
     * MASK_INTERLEAVED_WITH_IMAGERY). */
    uint64_t at = head;
    for (int l = w->nlev - 1; !st && l >= 0; l--) {
        w_level *L = &w->lev[l];
        const int ki = dir_index(w, l, 0), km = dir_index(w, l, 1);
        for (size_t i = 0; i < (size_t)L->tx * L->ty; i++) {
            put_arr(y->offs[ki], big, i, L->len[i] ? at : 0);
            put_arr(y->lens[ki], big, i, L->len[i]);
            at += L->len[i];
            if (!w->o.mask) continue;
            put_arr(y->offs[km], big, i, L->mlen[i] ? at : 0);
            put_arr(y->lens[km], big, i, L->mlen[i]);
            at += L->mlen[i];
        }
    }
    uint8_t *hdr = st ? NULL : cf__malloc((size_t)head);
    if (!st && !hdr) st = cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
    if (!st) {
        memset(hdr, 0, big ? 16 : 8);
        hdr[0] = hdr[1] = 'I';
        if (big) {
            hdr[2] = 43;
            hdr[4] = 8;
            hdr[8] = 16;
        } else {
            hdr[2] = 42;
            hdr[4] = 8;
        }
        for (int k = 0; k < nd; k++)
            cf__ifd_write(&y->ifd[k], big, y->ifd_at[k], k + 1 < nd ? y->ifd_at[k + 1] : 0,
                          hdr + y->ifd_at[k]);
    }
    layout_free(y, nd);
    free(y);
    if (st) {
        free(hdr);
        return st;
    }
    *hdr_out = hdr;
    *head_out = head;
    return CF_OK;
}


/* (cogfeed.h) Sizes come from other processes: each checked against what
 * a tile may take (check_encoded's bound) before the header is made. */
cf_status cf_writer_layout(cf_writer *w, const uint64_t *sizes, size_t n, uint64_t *offsets,
                           const void **header, size_t *header_len, cf_error *err) {
    if (!w || !sizes || !offsets || !header || !header_len)
        return cf__err(err, CF_E_ARG, "writer: NULL argument");
    *header = NULL;
    *header_len = 0;
    if (!w->o.layout_only)
        return cf__err(err, CF_E_STATE, "writer: %s: cf_writer_layout is a layout writer's "
                       "(layout_only)", w->path);
    const int m = w->o.mask ? 2 : 1;
    size_t want = 0;
    for (int l = 0; l < w->nlev; l++) want += (size_t)m * w->lev[l].tx * w->lev[l].ty;
    if (n != want)
        return cf__err(err, CF_E_ARG, "writer: %s: %zu sizes for %zu (every tile of %d levels%s)",
                       w->path, n, want, w->nlev, m == 2 ? ", each with its mask" : "");
    const uint64_t cap = cf__w_tile_cap(w, 0), mcap = cf__w_tile_cap(w, 1);
    size_t k = 0;
    for (int l = 0; l < w->nlev; l++) {
        w_level *L = &w->lev[l];
        for (size_t i = 0; i < (size_t)L->tx * L->ty; i++, k += (size_t)m) {
            const uint64_t s = sizes[k], ms = m == 2 ? sizes[k + 1] : 0;
            const uint32_t tx = (uint32_t)(i % L->tx), ty = (uint32_t)(i / L->tx);
            if (s > cap || ms > mcap)
                return cf__err(err, CF_E_LIMIT, "writer: %s: tile %u,%u of level %d: %llu "
                               "bytes (mask %llu), above the %llu (%llu) a tile may take",
                               w->path, tx, ty, l, (unsigned long long)s,
                               (unsigned long long)ms, (unsigned long long)cap,
                               (unsigned long long)(m == 2 ? mcap : 0));
            if (m == 2 && !s != !ms)
                return cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u of level %d: %s",
                               w->path, tx, ty, l, s ? "no mask tile (the writer has a mask)"
                                                     : "a mask for a sparse tile");
            L->len[i] = s;
            if (m == 2) L->mlen[i] = ms;
        }
    }
    uint8_t *hdr;
    uint64_t head;
    CF__TRY(cf__writer_header(w, &hdr, &head, err));
    free(w->layout_hdr);
    w->layout_hdr = hdr;
    /* the tiles follow the header as cf__writer_header laid them out:
     * the smallest overview first, each tile then its mask */
    uint64_t at = head;
    size_t base = n;
    for (int l = w->nlev - 1; l >= 0; l--) {
        const w_level *L = &w->lev[l];
        base -= (size_t)m * L->tx * L->ty;
        for (size_t j = base; j < base + (size_t)m * L->tx * L->ty; j++) {
            offsets[j] = sizes[j] ? at : 0;
            at += sizes[j];
        }
    }
    *header = hdr;
    *header_len = (size_t)head;
    return CF_OK;
}
