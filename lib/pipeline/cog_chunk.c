/*
 * cog_chunk.c - one chunk (tile or strip) at a time, for callers that fetch
 * the compressed bytes themselves: cf_cog_chunk_info says where a chunk's
 * bytes lie and what it decodes to, cf_cog_decode_chunk decodes bytes the
 * caller hands over, with the same codec path as cf_cog_read; the mask_
 * variants do the same for a level's internal mask.
 */
#include "cog_internal.h"

#include <stdio.h>

/* Chunk `index` of level `level` (of its internal mask when `mask`) as a
 * cf__chunk (no file-range check: the bytes may come from anywhere).
 * CF_E_ARG for a level, mask or index that does not exist. */
static cf_status locate(const cf_cog *cog, int level, int mask, uint64_t index,
                        cf__chunk *c, uint64_t *count, cf_error *err) {
    CF__TRY(cf__cog_check_level(cog, level, err));
    int ifdi = mask ? cog->tiff->mask_of_level[level] : cog->tiff->levels[level];
    if (ifdi < 0)
        return cf__err(err, CF_E_ARG, "%s: level %d has no internal mask", cog->name, level);
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[ifdi];
    uint64_t per_plane = (uint64_t)ifd->chunks_across * ifd->chunks_down;
    *count = ifd->nchunks;
    if (!per_plane || index >= ifd->nchunks)
        return cf__err(err, CF_E_ARG, "%s: level %d has %llu %s (0..%llu): no %s %llu",
                       cog->name, level, (unsigned long long)ifd->nchunks,
                       ifd->tiled ? "tiles" : "strips",
                       (unsigned long long)(ifd->nchunks ? ifd->nchunks - 1 : 0),
                       ifd->tiled ? "tile" : "strip", (unsigned long long)index);
    memset(c, 0, sizeof *c);
    c->ifd = ifdi;
    c->index = index;
    c->plane = (uint32_t)(index / per_plane);
    uint64_t rem = index % per_plane;
    c->cy = (uint32_t)(rem / ifd->chunks_across);
    c->cx = (uint32_t)(rem % ifd->chunks_across);
    c->off = ifd->offsets[index];
    c->len = ifd->counts[index];
    return CF_OK;
}

/* The decoded layout of chunk c: its codec parameters, dtype and size
 * (0 when it is above CF_MAX_CHUNK_BYTES: refused by both callers). */
static void layout(const cf_cog *cog, const cf__chunk *c, cf__codec_params *p,
                   cf_chunk_info *o) {
    cf__cog_chunk_params(cog, c, p);
    uint32_t samples, bits;
    cf__codec_out_layout(p, &samples, &bits);
    o->col = c->cx;
    o->row = c->cy;
    o->plane = c->plane;
    o->offset = c->off;
    o->byte_count = c->len;
    o->width = p->width;
    o->height = p->height;
    o->samples = samples;
    o->bits = bits;
    o->dtype = cf__codec_dtype(p);
    o->size = (size_t)cf__codec_chunk_bytes(p);
}

static cf_status chunk_info(const cf_cog *cog, int level, int mask, uint64_t index,
                            cf_chunk_info *out, cf_error *err) {
    if (!cog || !out) return cf__err(err, CF_E_ARG, "cf_cog_chunk_info: NULL argument");
    memset(out, 0, sizeof *out);
    cf__chunk c;
    uint64_t count;
    CF__TRY(locate(cog, level, mask, index, &c, &count, err));
    cf__codec_params p;
    layout(cog, &c, &p, out);
    out->count = count;
    if (!out->size) {
        /* Never a size a caller would allocate before learning it is
         * refused (the layout stays filled in, for the message). */
        char where[96];
        return cf__err(err, CF_E_LIMIT, "%s: %s: decoded size above %llu bytes", cog->name,
                       cf__cog_chunk_where(cog, &c, where, sizeof where),
                       (unsigned long long)CF_MAX_CHUNK_BYTES);
    }
    /* The range check a read makes; *out is filled even when it fails, for
     * a caller whose bytes come from elsewhere. */
    uint64_t size = cog->src ? cf__src_size(cog->src) : cog->mem_size;
    if (c.len && (c.off == 0 || c.off >= size || c.len > size - c.off)) {
        char where[96];
        return cf__err(err, CF_E_FORMAT,
                       "%s: %s: bytes [%llu, +%llu) lie outside the file (size %llu)",
                       cog->name, cf__cog_chunk_where(cog, &c, where, sizeof where),
                       (unsigned long long)c.off, (unsigned long long)c.len,
                       (unsigned long long)size);
    }
    return CF_OK;
}

cf_status cf_cog_chunk_info(const cf_cog *cog, int level, uint64_t index,
                            cf_chunk_info *out, cf_error *err) {
    return chunk_info(cog, level, 0, index, out, err);
}

cf_status cf_cog_mask_chunk_info(const cf_cog *cog, int level, uint64_t index,
                                 cf_chunk_info *out, cf_error *err) {
    return chunk_info(cog, level, 1, index, out, err);
}

static cf_status decode_chunk(cf_cog *cog, int level, int mask, uint64_t index,
                              const void *src, size_t n, void *dst, size_t dst_size,
                              cf_error *err) {
    if (!cog || (!src && n) || !dst)
        return cf__err(err, CF_E_ARG, "cf_cog_decode_chunk: NULL argument");
    cf__chunk c;
    uint64_t count;
    cf_status st = locate(cog, level, mask, index, &c, &count, err);
    CF__TRY(st);
    cf__codec_params p;
    cf_chunk_info o;
    layout(cog, &c, &p, &o);
    char where[96];
    cf__cog_chunk_where(cog, &c, where, sizeof where);
    if (!o.size)
        return cf__err(err, CF_E_LIMIT, "%s: %s: decoded size above %llu bytes", cog->name,
                       where, (unsigned long long)CF_MAX_CHUNK_BYTES);
    if (dst_size < o.size)
        return cf__err(err, CF_E_ARG, "%s: %s: dst holds %zu bytes, the chunk decodes to %zu",
                       cog->name, where, dst_size, o.size);
    if (n == 0 && c.len == 0) {
        /* Sparse: what a read gives for it (a mask's: not valid).  1-bit
         * chunks stay packed. */
        if (mask) {
            memset(dst, 0, o.size);
        } else if (o.bits == 1) {
            uint8_t v[CF__FILL_MAX];
            cf__cog_fill_value(cog, v);
            memset(dst, v[0] ? 0xff : 0, o.size);
        } else {
            cf__cog_fill(cog, c.ifd, dst, o.size / (o.bits / 8));
        }
        return CF_OK;
    }
    cf__codec_ctx *ctx = cf__cog_ctx_get(cog);
    if (!ctx) {
        memset(dst, 0, o.size);
        return cf__err(err, CF_E_NOMEM, "%s: %s: no codec context", cog->name, where);
    }
    st = cf__codec_decode(ctx, &p, src, n, dst, o.size, err);
    cf__cog_ctx_put(cog, ctx);
    if (st) cf__err_prefix(err, st, "%s: %s", cog->name, where);
    return st;
}

cf_status cf_cog_decode_chunk(cf_cog *cog, int level, uint64_t index, const void *src,
                              size_t n, void *dst, size_t dst_size, cf_error *err) {
    return decode_chunk(cog, level, 0, index, src, n, dst, dst_size, err);
}

cf_status cf_cog_decode_mask_chunk(cf_cog *cog, int level, uint64_t index, const void *src,
                                   size_t n, void *dst, size_t dst_size, cf_error *err) {
    return decode_chunk(cog, level, 1, index, src, n, dst, dst_size, err);
}
