/*
 * cog_read.c - cf_cog_read: the chunks a window touches (read_plan.c),
 * fetched in one batch or taken from the io's cache of decoded chunks,
 * decoded, and pasted (paste.c) into the caller's band-sequential buffer.
 */
#include "chunk_cache.h"
#include "cog_internal.h"
#include "read_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An uncompressed chunk already in host byte order needs no decode step
 * (the predictor tag does not apply to uncompressed data, as in libtiff):
 * whole-byte samples not widened or colour-converted, bits in the usual
 * order. */
static int raw_usable(const cf__codec_params *p, uint64_t have, size_t need) {
    const uint16_t probe = 1;
    int host_be = *(const uint8_t *)&probe == 0;
    uint32_t samples, bits;
    cf__codec_out_layout(p, &samples, &bits);
    return p->compression == CF_COMP_NONE && have >= need &&
           p->fill_order != 2 && bits == p->bits &&
           p->color == CF_COLOR_RAW &&
           (p->bits <= 8 || !!p->big_endian == host_be);
}

cf_status cf__cog_window_chunks(const cf_cog *cog, int ifdi, int64_t x, int64_t y,
                                uint32_t w, uint32_t h, const int *bands, int nb,
                                uint8_t *dst, const uint8_t fill[CF__FILL_MAX], cf__chunk **out,
                                size_t *nout, uint64_t *total, cf_error *err) {
    *out = NULL;
    *nout = 0;
    *total = 0;
    int planes[CF_MAX_BANDS];
    uint32_t np = cf__plan_planes(bands, nb, planes);
    cf__plan p;
    cf__plan_init(&p, cog, ifdi, x, y, w, h, planes, np);
    if (p.count > CF_MAX_CHUNKS)
        return cf__err(err, CF_E_LIMIT, "%s: window needs %llu tiles", cog->name,
                       (unsigned long long)p.count);
    if (p.prefill) cf__cog_fill_samples(dst, (size_t)w * h * (size_t)nb, cf__cog_out_bps(cog, ifdi), fill);
    if (!p.count) return CF_OK;
    cf__chunk *chunks = cf__calloc((size_t)p.count, sizeof *chunks);
    if (!chunks) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    size_t nc = 0;
    cf_status st = CF_OK;
    for (;;) {
        int has;
        st = cf__plan_peek(&p, &chunks[nc], &has, err);
        if (st || !has) break;
        cf__plan_take(&p);
        if (!cf__add_u64(*total, chunks[nc].len, total) || *total > (4ull << 30)) {
            st = cf__err(err, CF_E_LIMIT, "%s: window needs more than 4 GiB of tile data",
                         cog->name);
            break;
        }
        nc++;
    }
    if (st) {
        free(chunks);
        return st;
    }
    *out = chunks;
    *nout = nc;
    return CF_OK;
}

int cf__cog_chunk_raw(const cf_cog *cog, const cf__chunk *c) {
    cf__codec_params p;
    cf__cog_chunk_params(cog, c, &p);
    return raw_usable(&p, c->len, (size_t)cf__codec_chunk_bytes(&p));
}

/* Decode compressed bytes of a chunk (codec parameters p, from
 * cf__cog_chunk_params) into dst (size of cf__codec_chunk_bytes); errors
 * name the file and tile. */
static cf_status cf__cog_decode(cf_cog *cog, cf__codec_ctx *ctx, const cf__chunk *c,
                                const cf__codec_params *p, const uint8_t *src,
                                size_t len, uint8_t *dst, size_t dst_len,
                                cf_error *err) {
    cf_status st = cf__codec_decode(ctx, p, src, len, dst, dst_len, err);
    if (st)
        cf__err_prefix(err, st, "%s: tile %llu (col %u, row %u%s) of IFD %d",
                       cog->name, (unsigned long long)c->index, c->cx, c->cy,
                       cog->tiff->ifds[c->ifd].planar == 2 ? ", band plane" : "",
                       cog->tiff->ifds[c->ifd].index);
    return st;
}

/* Decode the first `rows` rows of fetched chunk c with ctx (rows: the
 * chunk's height, or cf__codec_stop_rows of it): *out is the context's
 * buffer, or src for uncompressed host-order chunks (whole, not decoded). */
static cf_status decode_rows(cf_cog *cog, cf__codec_ctx *ctx, const cf__chunk *c,
                             const uint8_t *src, uint32_t rows, const uint8_t **out,
                             cf_error *err) {
    cf__codec_params p;
    cf__cog_chunk_params(cog, c, &p);
    size_t len = (size_t)cf__codec_chunk_bytes(&p);
    if (!len)
        return cf__err(err, CF_E_LIMIT, "%s: tile %u,%u too large", cog->name,
                       c->cx, c->cy);
    if (raw_usable(&p, c->len, len)) {
        /* Uncompressed in host order: pasted from the fetched bytes. */
        *out = src;
        return CF_OK;
    }
    /* Every chunk of an IFD fits a full-height tile: the context's
     * buffer is sized for that, reused read after read (no fresh pages). */
    cf__codec_params p0 = p;
    p0.height = cog->tiff->ifds[c->ifd].chunk_h;
    uint64_t tile_bytes = cf__codec_chunk_bytes(&p0);
    if (!tile_bytes || tile_bytes < len)
        return cf__err(err, CF_E_LIMIT, "%s: tile of %ux%u x %u samples too large",
                       cog->name, p0.width, p0.height, p0.samples);
    if (!ctx) return cf__err(err, CF_E_NOMEM, "%s: no codec context", cog->name);
    uint8_t *tile = cf__codec_ctx_tile(ctx, (size_t)tile_bytes, err);
    if (!tile) {
        return cf__err_prefix(err, CF_E_NOMEM, "%s", cog->name);
    }
    cf_status st;
    if (rows < p.height) {
        size_t part = (size_t)rows * (len / p.height);
        st = cf__codec_decode_rows(ctx, &p, rows, src, (size_t)c->len, tile, part, err);
        if (st)
            cf__err_prefix(err, st, "%s: strip %llu of IFD %d (its first %u rows)", cog->name,
                           (unsigned long long)c->index, cog->tiff->ifds[c->ifd].index, rows);
        len = part;
    } else {
        st = cf__cog_decode(cog, ctx, c, &p, src, (size_t)c->len, tile, len, err);
    }
    if (!st) {
        *out = tile;
        atomic_fetch_add(&cog->n_decoded, 1);
        atomic_fetch_add(&cog->decoded_bytes, (uint64_t)len);
    }
    return st;
}

cf_status cf__cog_decode_chunk(cf_cog *cog, cf__codec_ctx *ctx, const cf__chunk *c,
                               const uint8_t *src, uint32_t rows, const uint8_t **out,
                               cf_error *err) {
    return decode_rows(cog, ctx, c, src, rows, out, err);
}

cf_status cf__cog_decode_paste(cf_cog *cog, cf__codec_ctx *ctx, const cf__chunk *c,
                               const uint8_t *src, int64_t x, int64_t y, uint32_t w,
                               uint32_t h, const int *bands, int nb, uint8_t *dst,
                               int expand_bits, cf_error *err) {
    const uint8_t *chunk = NULL;
    cf_status st = cf__cog_decode_chunk(cog, ctx, c, src, UINT32_MAX, &chunk, err);
    if (!st) cf__cog_paste(cog, c, chunk, x, y, w, h, bands, nb, dst, expand_bits);
    return st;
}

void cf__cog_chunk_reqs(const cf__chunk *chunks, size_t n, uint8_t *buf,
                        cf__range_req *reqs) {
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        reqs[i].off = chunks[i].off;
        reqs[i].len = chunks[i].len;
        reqs[i].dst = buf + pos;
        pos += (size_t)chunks[i].len;
    }
}

void cf__cog_prefault(const cf_cog *cog, uint8_t *buf, size_t len) {
    /* Remote bodies are written by the one I/O loop thread: fault the
     * fresh pages in here, on the calling thread, so that the loop does
     * not pay every reader's page faults one after another (they were a
     * fifth of its time on uncompressed tiles). */
    if (cog->src && cf__src_is_remote(cog->src))
        for (size_t o = 0; o < len; o += 4096) buf[o] = 0;
}

/* How read_ifd takes one chunk of its window. */
typedef struct rd_chunk {
    cf__cc_found found;        /* CF__CC_NONE: fetched and decoded here,
                                  kept nowhere */
    void *h;                   /* the cache entry (claimed, or waited on) */
    uint32_t rows;             /* rows decoded (or held by the entry) */
    int fetch;                 /* fetched in the window's batch */
} rd_chunk;

/* Which rows of chunk c the window needs from its top (down to the
 * window's last row), and whether the window covers the whole chunk (then
 * no later window is likely to need it again: it is not kept). */
static uint32_t rows_needed(const cf__tiff_ifd *ifd, const cf__chunk *c, const cf__codec_params *p,
                            int64_t x, int64_t y, uint32_t w, uint32_t h, int *covers) {
    cf__rect r;
    *covers = 0;
    if (!cf__plan_chunk_rect(ifd, c, x, y, w, h, &r)) return p->height;
    int64_t px0 = (int64_t)c->cx * ifd->chunk_w, py0 = (int64_t)c->cy * ifd->chunk_h;
    int64_t px1 = px0 + ifd->chunk_w, py1 = py0 + p->height;
    if (px1 > (int64_t)ifd->width) px1 = ifd->width;
    *covers = r.x0 == px0 && r.y0 == py0 && r.x1 == px1 && r.y1 == py1;
    return (uint32_t)(r.y1 - py0);
}

cf__chunk_rows cf__cog_chunk_rows(const cf_cog *cog, const cf__chunk *c, int64_t x, int64_t y,
                                  uint32_t w, uint32_t h) {
    cf__codec_params p;
    cf__cog_chunk_params(cog, c, &p);
    cf__chunk_rows r = {0};
    int covers;
    r.height = r.rows = p.height;
    r.need = rows_needed(&cog->tiff->ifds[c->ifd], c, &p, x, y, w, h, &covers);
    size_t len = (size_t)cf__codec_chunk_bytes(&p);
    r.row_bytes = p.height ? len / p.height : 0;
    if (len && !raw_usable(&p, c->len, len) && cf__codec_stop_pays(&p, r.need))
        r.rows = cf__codec_stop_rows(&p, r.need);
    return r;
}

/* Fetch chunks[i] alone and decode its first rows into ctx's buffer
 * (a chunk whose claimer gave it up). */
static cf_status fetch_one(cf_cog *cog, cf__codec_ctx *ctx, const cf__chunk *c, uint32_t rows,
                           uint8_t **buf, const uint8_t **out, cf_error *err) {
    const uint8_t *src = cog->mem ? cog->mem + c->off : NULL;
    *buf = NULL;
    if (!src) {
        *buf = cf__malloc((size_t)c->len);
        if (!*buf) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
        cf__range_req rq = {.off = c->off, .len = c->len, .dst = *buf, .err = err};
        cf_status st = cf__src_read(cog->src, &rq, 1, err);
        if (st) return cf__cog_fetch_failed(cog, st, err);
        src = *buf;
    }
    return decode_rows(cog, ctx, c, src, rows, out, err);
}

/* Read a window of IFD `ifdi` (an image level or a mask).
 *
 * Chunks the window needs only part of go through the io's cache of
 * decoded chunks (cf__io_read_cache): found there, they are pasted
 * without a fetch; claimed, they are fetched, decoded, kept and pasted;
 * pending in another reader's hands, they are waited for once this
 * reader's own claims are published (chunk_cache.h's order, so no two
 * readers wait on each other).  A chunk (tile or strip) whose codec can
 * stop early is decoded only down to the window's last row when that
 * costs less (cf__codec_stop_pays: a random patch over larger tiles needs
 * only the top rows of the tiles below it), and kept with that row count;
 * a later window needing more rows decodes it whole. */
static cf_status read_ifd(cf_cog *cog, int ifdi, int64_t x, int64_t y,
                          uint32_t w, uint32_t h, const int *bands, int nb,
                          uint8_t *dst, int expand_bits, const uint8_t fill[CF__FILL_MAX],
                          cf_error *err) {
    cf__chunk *chunks = NULL;
    size_t nreq = 0;
    uint64_t total = 0;
    cf_status st = cf__cog_window_chunks(cog, ifdi, x, y, w, h, bands, nb, dst, fill,
                                         &chunks, &nreq, &total, err);
    if (st || !nreq) {
        free(chunks);
        return st;
    }
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[ifdi];
    cf__ccache *cc = cog->src ? cf__io_read_cache(cog->io) : NULL;
    rd_chunk *rc = cf__calloc(nreq, sizeof *rc);
    cf__chunk *fc = cf__calloc(nreq, sizeof *fc); /* the ones fetched */
    cf__range_req *reqs = NULL; /* files only: in-memory chunks need none */
    uint8_t *fetched = NULL;
    void *gate = NULL; /* decode gate token (remote) */
    cf__codec_ctx *ctx = NULL;
    size_t nf = 0;
    uint64_t ftotal = 0;
    if (!rc || !fc) {
        free(rc);
        free(fc);
        free(chunks);
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    }

    /* Plan each chunk: rows to decode, and what the cache holds of it. */
    for (size_t i = 0; i < nreq; i++) {
        const cf__chunk *c = &chunks[i];
        cf__codec_params p;
        cf__cog_chunk_params(cog, c, &p);
        int covers;
        uint32_t need = rows_needed(ifd, c, &p, x, y, w, h, &covers);
        size_t len = (size_t)cf__codec_chunk_bytes(&p);
        /* Uncompressed host-order chunks are their own decoded form: kept
         * as fetched, and a strip's first rows are fetched alone. */
        int raw = len && raw_usable(&p, c->len, len);
        rc[i].rows = p.height;
        if (len && cf__codec_stop_pays(&p, need)) rc[i].rows = cf__codec_stop_rows(&p, need);
        rc[i].found = CF__CC_NONE;
        if (cc && len && !covers) {
            const uint8_t *d = NULL;
            rc[i].found = cf__cc_claim_rows(cc, cog, c, len / p.height, need, p.height,
                                            &rc[i].rows, &d, &rc[i].h);
            if (rc[i].found == CF__CC_HIT) {
                atomic_fetch_add(&cog->cache_hits, 1);
                cf__cog_paste(cog, c, d, x, y, w, h, bands, nb, dst, expand_bits);
                cf__cc_put(cc, rc[i].h);
                rc[i].h = NULL;
                continue;
            }
            if (rc[i].found != CF__CC_WAIT) atomic_fetch_add(&cog->cache_misses, 1);
        }
        if (rc[i].found == CF__CC_WAIT) continue;
        rc[i].fetch = 1;
        fc[nf] = *c;
        if (raw && rc[i].rows < p.height) fc[nf].len = (uint64_t)rc[i].rows * (len / p.height);
        ftotal += fc[nf++].len;
    }

    /* Fetch every chunk not found in one batch (merged and in flight
     * together). */
    if (cog->src && nf) {
        reqs = cf__calloc(nf, sizeof *reqs);
        fetched = cf__malloc((size_t)ftotal);
        if (!reqs || !fetched) {
            st = cf__err(err, CF_E_NOMEM, "%s: out of memory (%llu bytes)", cog->name,
                         (unsigned long long)ftotal);
            goto done;
        }
        cf__cog_chunk_reqs(fc, nf, fetched, reqs);
        cf__cog_prefault(cog, fetched, (size_t)ftotal);
        st = cf__src_read(cog->src, reqs, nf, err);
        if (st) {
            st = cf__cog_fetch_failed(cog, st, err);
            goto done;
        }
    }
    /* Remote: at most one decoder per CPU, see cf__io_decode_enter. */
    if (cog->src && cf__src_is_remote(cog->src)) gate = cf__io_decode_enter(cf__src_io(cog->src));
    ctx = cf__cog_ctx_get(cog);
    if (!ctx) {
        st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
        goto done;
    }
    for (size_t i = 0, k = 0; i < nreq && !st; i++) {
        if (!rc[i].fetch) continue;
        const uint8_t *src = reqs ? reqs[k].dst : cog->mem + chunks[i].off;
        k++;
        const uint8_t *d = NULL;
        st = decode_rows(cog, ctx, &chunks[i], src, rc[i].rows, &d, err);
        if (st) break;
        if (rc[i].found == CF__CC_CLAIMED) {
            cf__cc_publish(cc, rc[i].h, d);
            rc[i].h = NULL;
        }
        cf__cog_paste(cog, &chunks[i], d, x, y, w, h, bands, nb, dst, expand_bits);
    }
done:
    /* Claims not published (an error before or during the decodes): their
     * waiters fetch them themselves. */
    for (size_t i = 0; i < nreq; i++)
        if (rc[i].found == CF__CC_CLAIMED && rc[i].h) {
            cf__cc_abandon(cc, rc[i].h);
            rc[i].h = NULL;
        }
    cf__io_decode_leave(gate);
    gate = NULL;
    free(fetched);
    free(reqs);
    /* Chunks other readers claimed: waited for now that this reader's own
     * are settled. */
    for (size_t i = 0; i < nreq; i++) {
        if (rc[i].found != CF__CC_WAIT) continue;
        const uint8_t *d = st ? NULL : cf__cc_wait(cc, rc[i].h);
        if (d) {
            atomic_fetch_add(&cog->cache_hits, 1);
            cf__cog_paste(cog, &chunks[i], d, x, y, w, h, bands, nb, dst, expand_bits);
        } else if (!st) {
            /* its claimer gave it up: fetch it here */
            atomic_fetch_add(&cog->cache_misses, 1);
            if (!ctx && !(ctx = cf__cog_ctx_get(cog)))
                st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
            uint8_t *buf = NULL;
            if (!st) st = fetch_one(cog, ctx, &chunks[i], rc[i].rows, &buf, &d, err);
            if (!st) cf__cog_paste(cog, &chunks[i], d, x, y, w, h, bands, nb, dst, expand_bits);
            free(buf);
        }
        cf__cc_put(cc, rc[i].h);
    }
    cf__cog_ctx_put(cog, ctx);
    if (!st)
        atomic_fetch_add(&cog->delivered_bytes,
                         (uint64_t)w * h * (uint64_t)nb * cf__cog_out_bps(cog, ifdi));
    free(fc);
    free(rc);
    free(chunks);
    return st;
}

static cf_status check_window(const cf_cog *cog, int level, uint32_t w,
                              uint32_t h, int64_t x, int64_t y, cf_error *err) {
    CF__TRY(cf__cog_check_level(cog, level, err));
    if (w == 0 || h == 0 || w > CF_MAX_DIMENSION || h > CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "%s: window size %ux%u invalid", cog->name, w, h);
    if (x < -(int64_t)CF_MAX_DIMENSION || y < -(int64_t)CF_MAX_DIMENSION ||
        x > 2 * (int64_t)CF_MAX_DIMENSION || y > 2 * (int64_t)CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "%s: window origin (%lld, %lld) out of range",
                       cog->name, (long long)x, (long long)y);
    return CF_OK;
}

cf_status cf__cog_prepare_read(const cf_cog *cog, int level, int64_t x, int64_t y,
                               uint32_t w, uint32_t h, const int *bands, int nbands,
                               size_t dst_size, int *all, int *nb_out, int *ifdi_out,
                               uint8_t fill[CF__FILL_MAX], cf_error *err) {
    CF__TRY(check_window(cog, level, w, h, x, y, err));
    int ifdi = cog->tiff->levels[level];
    int count = (int)cf__cog_bands(cog);
    int nb = bands ? nbands : count;
    if (nb <= 0 || nb > CF_MAX_BANDS)
        return cf__err(err, CF_E_ARG, "%s: %d bands requested", cog->name, nb);
    for (int k = 0; k < nb; k++) {
        int b = bands ? bands[k] : k + 1;
        if (b < 1 || b > count)
            return cf__err(err, CF_E_ARG, "%s: band %d does not exist (file has %d)",
                           cog->name, b, count);
        all[k] = b - 1;
    }
    size_t need = (size_t)w * h * (size_t)nb * cf_dtype_size(cog->dtype);
    if (dst_size < need)
        return cf__err(err, CF_E_ARG, "%s: buffer of %zu bytes, window needs %zu",
                       cog->name, dst_size, need);
    cf__cog_fill_value(cog, fill);
    *nb_out = nb;
    *ifdi_out = ifdi;
    return CF_OK;
}

cf_status cf_cog_read(cf_cog *cog, int level, int64_t x, int64_t y, uint32_t w,
                      uint32_t h, const int *bands, int nbands, void *dst,
                      size_t dst_size, cf_error *err) {
    if (!cog || !dst) return cf__err(err, CF_E_ARG, "cf_cog_read: NULL argument");
    int all[CF_MAX_BANDS], nb = 0, ifdi = 0; /* set by the call (-O3 cannot tell) */
    uint8_t fill[CF__FILL_MAX];
    CF__TRY(cf__cog_prepare_read(cog, level, x, y, w, h, bands, nbands, dst_size,
                                 all, &nb, &ifdi, fill, err));
    return read_ifd(cog, ifdi, x, y, w, h, all, nb, dst, 1, fill, err);
}

cf_status cf_cog_read_mask(cf_cog *cog, int level, int64_t x, int64_t y,
                           uint32_t w, uint32_t h, uint8_t *dst,
                           size_t dst_size, cf_error *err) {
    if (!cog || !dst) return cf__err(err, CF_E_ARG, "cf_cog_read_mask: NULL argument");
    CF__TRY(check_window(cog, level, w, h, x, y, err));
    int mi = cog->tiff->mask_of_level[level];
    if (mi < 0)
        return cf__err(err, CF_E_STATE, "%s: no internal mask at level %d", cog->name,
                       level);
    if (dst_size < (size_t)w * h)
        return cf__err(err, CF_E_ARG, "%s: mask buffer too small", cog->name);
    const cf__tiff_ifd *m = &cog->tiff->ifds[mi];
    if (m->bits != 1 && m->bits != 8)
        return cf__err(err, CF_E_UNSUPPORTED, "%s: mask with %u bits per sample",
                       cog->name, m->bits);
    int band0 = 0;
    uint8_t fill[CF__FILL_MAX] = {0};
    return read_ifd(cog, mi, x, y, w, h, &band0, 1, dst, 255, fill, err);
}
