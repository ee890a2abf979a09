/*
 * cog_locate.c - where a chunk (tile or strip) of an IFD lies in the file
 * and what it decodes to: its byte range checked against the file's size,
 * its codec parameters, the words that name it in messages; and the codec
 * contexts of the io's pool that decode it.
 */
#include "cog_internal.h"

#include <stdio.h>
#include <string.h>

cf_status cf__cog_chunk(const cf_cog *cog, int ifdi, uint32_t cx, uint32_t cy,
                        uint32_t plane, cf__chunk *c, cf_error *err) {
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[ifdi];
    uint64_t per_plane = (uint64_t)ifd->chunks_across * ifd->chunks_down;
    uint64_t idx = (uint64_t)plane * per_plane + (uint64_t)cy * ifd->chunks_across + cx;
    if (cx >= ifd->chunks_across || cy >= ifd->chunks_down || idx >= ifd->nchunks)
        return cf__err(err, CF_E_FORMAT, "%s: tile (%u, %u) plane %u out of range",
                       cog->name, cx, cy, plane);
    c->ifd = ifdi;
    c->cx = cx;
    c->cy = cy;
    c->plane = plane;
    c->index = idx;
    c->off = ifd->offsets[idx];
    c->len = ifd->counts[idx];
    uint64_t size = cog->src ? cf__src_size(cog->src) : cog->mem_size;
    if (c->len == 0) return CF_OK; /* sparse: reads as nodata */
    if (c->len > CF_MAX_CHUNK_BYTES)
        return cf__err(err, CF_E_LIMIT, "%s: tile %llu: byte count %llu above the cap",
                       cog->name, (unsigned long long)idx, (unsigned long long)c->len);
    if (c->off == 0 || c->off >= size || c->len > size - c->off)
        return cf__err(err, CF_E_FORMAT,
                       "%s: tile %llu: bytes [%llu, +%llu) lie outside the file "
                       "(size %llu)",
                       cog->name, (unsigned long long)idx, (unsigned long long)c->off,
                       (unsigned long long)c->len, (unsigned long long)size);
    return CF_OK;
}

const char *cf__cog_chunk_where(const cf_cog *cog, const cf__chunk *c, char *buf,
                                size_t n) {
    const cf__tiff *t = cog->tiff;
    const cf__tiff_ifd *ifd = &t->ifds[c->ifd];
    int level = -1, mask = 0;
    for (int l = 0; l < t->nlevels && level < 0; l++) {
        if (t->levels[l] == c->ifd) level = l;
        else if (t->mask_of_level[l] == c->ifd) level = l, mask = 1;
    }
    char lv[48];
    if (level < 0)
        snprintf(lv, sizeof lv, "IFD %d", c->ifd);
    else
        snprintf(lv, sizeof lv, "%slevel %d", mask ? "mask of " : "", level);
    if (ifd->tiled)
        snprintf(buf, n, "%s, tile %llu (col %u, row %u%s)", lv,
                 (unsigned long long)c->index, c->cx, c->cy,
                 ifd->planar == 2 ? ", band plane" : "");
    else
        snprintf(buf, n, "%s, strip %llu", lv, (unsigned long long)c->index);
    return buf;
}

void cf__cog_chunk_params(const cf_cog *cog, const cf__chunk *c,
                          cf__codec_params *p) {
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[c->ifd];
    memset(p, 0, sizeof *p);
    p->compression = ifd->compression;
    p->lerc_sub = (uint16_t)ifd->lerc_sub;
    p->predictor = ifd->predictor;
    p->bits = ifd->bits;
    p->sample_format = ifd->sample_format;
    p->photometric = ifd->photometric;
    p->width = ifd->chunk_w;
    p->height = ifd->chunk_h;
    if (!ifd->tiled) {
        /* The last strip holds only the rows that remain. */
        uint64_t y0 = (uint64_t)c->cy * ifd->chunk_h;
        if (y0 + ifd->chunk_h > ifd->height) p->height = (uint32_t)(ifd->height - y0);
    }
    p->samples = ifd->planar == 2 ? 1 : ifd->samples;
    p->big_endian = cog->tiff->big_endian;
    p->jpeg_tables = ifd->jpeg_tables;
    p->jpeg_tables_len = ifd->jpeg_tables_len;
    if (ifd->ojpeg_status) {
        p->refuse = ifd->ojpeg_why;
        p->refuse_code = ifd->ojpeg_status;
    }
    p->ycbcr_sub_h = ifd->ycbcr_sub_h;
    p->ycbcr_sub_v = ifd->ycbcr_sub_v;
    p->fill_order = ifd->fill_order;
    p->strip = !ifd->tiled;
    p->color = cog->color ? cog->color[c->ifd] : CF_COLOR_RAW;
    p->t4_options = ifd->t4_options;
    p->t6_options = ifd->t6_options;
    memcpy(p->white_point, ifd->white_point, sizeof p->white_point);
    memcpy(p->ycbcr_coef, ifd->ycbcr_coef, sizeof p->ycbcr_coef);
    memcpy(p->ref_bw, ifd->ref_bw, sizeof p->ref_bw);
}

cf__codec_ctx *cf__cog_ctx_get(cf_cog *cog) { return cf__pool_get(cog->pool); }

void cf__cog_ctx_put(cf_cog *cog, cf__codec_ctx *ctx) { cf__pool_put(cog->pool, ctx); }
