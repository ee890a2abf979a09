/*
 * ov_pass.c - a writer's overview pass: the full resolution read back a
 * row of tiles at a time (a local file's spool at close; an object's
 * tiles held in memory, as each row completes), decoded, and every
 * overview level made from it in one pass, each level halving the one
 * above as its rows complete (memory: one row of tiles per level), the
 * overview tiles encoded and kept (sink.c).
 *
 * The work that costs, decoding level 0's tiles and encoding the
 * overviews', is spread over threads, each a worker of its own (a slot's
 * encoders and buffers, a decoder, a buffer for its share of a row's
 * encoded tiles): a row's tiles are divided among them, and their bytes
 * kept afterwards in the row's order, so the file is the same bytes
 * whatever the number of threads.  Making the overview rows from the rows
 * above is cheap and stays on the calling thread.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "writer_state.h"

/* ------------------------------------------------------------ workers */

static void worker_free(w_ovw *k) {
    cf__w_slot_free(&k->s);
    cf__codec_ctx_free(k->ctx);
    free(k->comp);
    free(k->out);
    memset(k, 0, sizeof *k);
}

void cf__w_overviews_free(cf_writer *w) {
    for (int k = 0; k < w->novw; k++) worker_free(&w->ovw[k]);
    free(w->ovw);
    free(w->ovt);
    w->ovw = NULL;
    w->ovt = NULL;
    w->novw = 0;
}

/* A worker's encoded tiles between keeps: its share of a wave of a row's
 * tiles (encode_row) is at most this many bytes of raw tiles (and one
 * tile, whatever its size), so that its buffer stays within twice that,
 * whatever the image's width. */
#define OV_WAVE_BYTES ((size_t)4 << 20)

/* One worker per CPU this process may use (at most a row's tiles, and
 * within the writers' thread budget: each holds about four tiles and its
 * share of a wave, OV_WAVE_BYTES). */
static cf_status make_workers(cf_writer *w, cf_error *err) {
    size_t n = (size_t)cf__write_threads(w->o.threads,
                                         4 * (w->tile_bytes + w->mtile_bytes) + 2 * OV_WAVE_BYTES,
                                         w->lev[0].tx < CF__WRITER_SLOTS ? w->lev[0].tx
                                                                         : CF__WRITER_SLOTS);
    if (!(w->ovw = cf__calloc(n, sizeof *w->ovw)))
        return cf__err(err, CF_E_NOMEM, "writer: %s: overview threads", w->path);
    for (size_t k = 0; k < n; k++) {
        w_ovw *o = &w->ovw[k];
        if (cf__w_slot_make(w, &o->s) || !(o->ctx = cf__codec_ctx_new())) {
            worker_free(o);
            if (k > 0) break; /* fewer threads still work */
            return cf__err(err, CF_E_NOMEM, "writer: %s: overview threads", w->path);
        }
        w->novw = (int)k + 1;
    }
    return CF_OK;
}

/* A share of the tiles tx0 .. tx1 - 1 of a row: the columns tx0 + k,
 * tx0 + k + n, ... of them, on worker k; the first failure's column and
 * error. */
typedef struct ov_part {
    cf_writer *w;
    int k, n, l;
    uint32_t ty, tx0, tx1;
    cf_status st;
    uint32_t bad_tx;
    cf_error err;
} ov_part;

/* fn on every share of the tiles tx0 .. tx1 - 1 of a row, the calling
 * thread taking the first (and any share whose thread could not start);
 * the failure of the smallest column is returned. */
static cf_status run_row(cf_writer *w, void *(*fn)(void *), int l, uint32_t ty, uint32_t tx0,
                         uint32_t tx1, cf_error *err) {
    int n = (uint32_t)w->novw < tx1 - tx0 ? w->novw : (int)(tx1 - tx0);
    ov_part one, *parts = n > 1 ? cf__calloc((size_t)n, sizeof *parts) : NULL;
    if (!parts) { /* (out of memory: one share, on this thread) */
        parts = &one;
        n = 1;
    }
    for (int k = 0; k < n; k++)
        parts[k] = (ov_part){.w = w, .k = k, .n = n, .l = l, .ty = ty, .tx0 = tx0, .tx1 = tx1};
    cf__run_parts(fn, parts, sizeof *parts, (size_t)n);
    int first = -1;
    for (int k = 0; k < n; k++)
        if (parts[k].st && (first < 0 || parts[k].bad_tx < parts[first].bad_tx)) first = k;
    cf_status st = first < 0 ? CF_OK : parts[first].st;
    if (st && err) *err = parts[first].err;
    if (parts != &one) free(parts);
    return st;
}

/* ------------------------------------------------------------- levels */

/* The overviews' row machinery, and one row of level 0 tiles to read
 * back into. */
cf_status cf__w_init_overviews(cf_writer *w, cf_error *err) {
    if (w->nlev < 2) return CF_OK; /* (an object without overviews) */
    const uint32_t T = w->o.tile_size;
    for (int l = 1; l < w->nlev; l++) {
        w_level *L = &w->lev[l], *up = &w->lev[l - 1];
        CF__TRY(cf__ov_axis_init(&L->ax, up->w, L->w, err));
        CF__TRY(cf__ov_axis_init(&L->ay, up->h, L->h, err));
        L->acc = cf__malloc((size_t)T * L->w * w->px);
        L->ring = cf__malloc((size_t)CF__RING * up->w * w->px);
        if (!L->acc || !L->ring)
            return cf__err(err, CF_E_NOMEM, "writer: %s: overview rows", w->path);
        if (w->o.mask && (!(L->macc = cf__malloc((size_t)T * L->w)) ||
                          !(L->mring = cf__malloc((size_t)CF__RING * up->w))))
            return cf__err(err, CF_E_NOMEM, "writer: %s: overview rows", w->path);
        if (w->o.mask && w->o.overview_resampling == CF_RS_NEAREST) {
            CF__TRY(cf__ov_axis_init(&L->n0x, w->lev[0].w, L->w, err));
            CF__TRY(cf__ov_axis_init(&L->n0y, w->lev[0].h, L->h, err));
            if (!(L->mnear = cf__malloc((size_t)CF__RING * L->w)))
                return cf__err(err, CF_E_NOMEM, "writer: %s: overview rows", w->path);
        }
    }
    w->band = cf__malloc((size_t)T * w->lev[0].w * w->px);
    w->ovt = cf__calloc(w->lev[0].tx, sizeof *w->ovt);
    if (!w->band || !w->ovt)
        return cf__err(err, CF_E_NOMEM, "writer: %s: a row of tiles", w->path);
    if (w->o.mask && !(w->mband = cf__malloc((size_t)T * w->lev[0].w)))
        return cf__err(err, CF_E_NOMEM, "writer: %s: a row of tiles", w->path);
    return make_workers(w, err);
}

static cf__ov_kind ov_kind(cf_resampling r) {
    return r == CF_RS_NEAREST ? CF__OV_NEAREST : r == CF_RS_MODE ? CF__OV_MODE : CF__OV_AVERAGE;
}

/* Worker k's share of level l's assembled row of tiles (acc_rows rows;
 * the rest padding): each tile encoded, its bytes (then its mask's)
 * appended to the worker's buffer. */
static void *encode_part(void *arg) {
    ov_part *P = arg;
    cf_writer *w = P->w;
    w_level *L = &w->lev[P->l];
    w_ovw *o = &w->ovw[P->k];
    const uint32_t T = w->o.tile_size;
    o->outlen = 0;
    for (uint32_t tx = P->tx0 + (uint32_t)P->k; tx < P->tx1 && !P->st; tx += (uint32_t)P->n) {
        uint32_t tw = tx + 1 < L->tx ? T : L->w - tx * T;
        if (tw < T || L->acc_rows < T) cf__w_fill_px(w, o->s.tile, (size_t)T * T);
        for (uint32_t y = 0; y < L->acc_rows; y++)
            memcpy(o->s.tile + (size_t)y * T * w->px,
                   L->acc + ((size_t)y * L->w + (size_t)tx * T) * w->px, (size_t)tw * w->px);
        if (w->o.mask)
            cf__mask_pack(L->macc + (size_t)tx * T, L->w, tw, L->acc_rows, T, o->s.mtile);
        const uint8_t *enc, *menc = NULL;
        size_t n, mn = 0;
        P->st = cf__w_encode_slot(w, &o->s, &enc, &n, &menc, &mn, &P->err);
        if (!P->st && o->outlen + n + mn > o->outcap) {
            size_t cap = 2 * (o->outlen + n + mn);
            uint8_t *b = cf__realloc(o->out, cap);
            if (!b) P->st = cf__err(&P->err, CF_E_NOMEM, "out of memory");
            else o->out = b, o->outcap = cap;
        }
        if (P->st) {
            cf__err_prefix(&P->err, P->st, "writer: %s: tile %u,%u of level %d", w->path, tx,
                           L->acc_ty, P->l);
            P->bad_tx = tx;
            break;
        }
        w_ovt *t = &w->ovt[tx];
        t->k = P->k;
        t->off = o->outlen;
        t->n = n;
        t->mn = mn;
        memcpy(o->out + o->outlen, enc, n);
        if (mn) memcpy(o->out + o->outlen + n, menc, mn);
        o->outlen += n + mn;
    }
    return NULL;
}

/* Encode level l's assembled row of tiles (on the workers, in waves of
 * at most OV_WAVE_BYTES of tiles each) and keep the tiles in the row's
 * order. */
cf_status cf__w_flush_acc(cf_writer *w, int l, cf_error *err) {
    w_level *L = &w->lev[l];
    size_t per = OV_WAVE_BYTES / (w->tile_bytes + w->mtile_bytes + 1);
    const uint32_t wave = (uint32_t)w->novw * (uint32_t)(per < 1 ? 1 : per > 4096 ? 4096 : per);
    for (uint32_t tx0 = 0; tx0 < L->tx; tx0 += wave) {
        const uint32_t tx1 = L->tx - tx0 > wave ? tx0 + wave : L->tx;
        CF__TRY(run_row(w, encode_part, l, L->acc_ty, tx0, tx1, err));
        for (uint32_t tx = tx0; tx < tx1; tx++) {
            const w_ovt *t = &w->ovt[tx];
            const uint8_t *b = w->ovw[t->k].out + t->off;
            size_t i = (size_t)L->acc_ty * L->tx + tx;
            cf_status st = cf__w_keep(w, l, i, 0, b, t->n, err);
            if (!st && w->o.mask) st = cf__w_keep(w, l, i, 1, b + t->n, t->mn, err);
            if (st) return cf__err_prefix(err, st, "writer: %s: tile %u,%u of level %d", w->path,
                                          tx, L->acc_ty, l);
        }
    }
    L->acc_rows = 0;
    L->acc_ty++;
    return CF_OK;
}

void cf__w_make_row(cf_writer *w, int l, uint32_t j, const uint8_t *const *rows,
                    const uint8_t *const *mrows, uint8_t *o, uint8_t *mo) {
    w_level *L = &w->lev[l];
    const uint32_t n = L->ay.x1[j] - L->ay.x0[j], near = L->ay.near[j] - L->ay.x0[j];
    const cf__ov_kind kind = ov_kind(w->o.overview_resampling);
    cf__ov_row(kind, w->o.dtype, w->o.bands, rows, n, L->ay.w0[j], L->ay.w1[j], &L->ax, o,
               w->o.has_nodata, w->o.nodata, rows[near],
               mrows && (kind == CF__OV_AVERAGE || (kind == CF__OV_MODE && w->o.dtype != CF_DT_U8))
                   ? mrows
                   : NULL);
    if (mo && L->mnear) { /* made from level 0 (near0) */
        memcpy(mo, L->mnear + (size_t)(j % CF__RING) * L->w, L->w);
    } else if (mo && kind == CF__OV_AVERAGE) {
        /* valid where any pixel of the window is, however little of
         * it the window covers (GDAL's: a weighted mean of 0 / 255
         * rounded would lose a lone valid edge pixel) */
        for (uint32_t x = 0; x < L->w; x++) {
            uint8_t any = 0;
            for (uint32_t r = 0; r < n && !any; r++)
                for (uint32_t k = L->ax.x0[x]; k < L->ax.x1[x] && !any; k++) any = mrows[r][k];
            mo[x] = any ? 255 : 0;
        }
    } else if (mo) { /* mode: the mask's own, the same tie rule */
        cf__ov_row(kind, CF_DT_U8, 1, mrows, n, L->ay.w0[j], L->ay.w1[j], &L->ax, mo, 0, 0,
                   mrows[near], NULL);
        for (uint32_t x = 0; x < L->w; x++) mo[x] = mo[x] ? 255 : 0;
    }
}

cf_status cf__w_row_made(cf_writer *w, int l, uint32_t j, cf_error *err) {
    w_level *L = &w->lev[l];
    const uint32_t T = w->o.tile_size;
    L->acc_rows = j - L->acc_ty * T + 1;
    if ((j + 1) % T && j + 1 != L->h) return CF_OK; /* its row of tiles goes on */
    /* A share's row of tiles whose first rows come from elsewhere waits
     * for them (share.c); one made here whole is encoded now. */
    if (w->share && L->acc_ty * T < L->fed0) {
        CF__TRY(cf__w_share_hold_acc(w, l, j, err));
        L->acc_rows = 0;
        L->acc_ty++;
        return CF_OK;
    }
    return cf__w_flush_acc(w, l, err);
}

/* Row y of level l-1 (and its mask row, with `mask`) arrives at level l:
 * kept in the ring, and every row of level l whose window ends there is
 * made (and passed down). */
static cf_status feed(cf_writer *w, int l, const uint8_t *row, const uint8_t *mrow,
                      uint32_t y, cf_error *err) {
    if (l >= w->nlev) return CF_OK;
    w_level *up = &w->lev[l - 1], *L = &w->lev[l];
    size_t rowb = (size_t)up->w * w->px;
    memcpy(L->ring + (size_t)(y % CF__RING) * rowb, row, rowb);
    if (mrow) memcpy(L->mring + (size_t)(y % CF__RING) * up->w, mrow, up->w);
    if (w->share) cf__w_share_head(w, l - 1, y, row, mrow);
    const uint32_t T = w->o.tile_size;
    while (L->next_out < L->h && L->ay.x1[L->next_out] - 1 <= y) {
        uint32_t j = L->next_out, y0 = L->ay.x0[j], n = L->ay.x1[j] - y0;
        const uint8_t *rows[CF__RING], *mrows[CF__RING];
        for (uint32_t r = 0; r < n; r++) {
            rows[r] = L->ring + (size_t)((y0 + r) % CF__RING) * rowb;
            mrows[r] = mrow ? L->mring + (size_t)((y0 + r) % CF__RING) * up->w : NULL;
        }
        const size_t at = (size_t)(j - L->acc_ty * T);
        uint8_t *o = L->acc + at * L->w * w->px;
        uint8_t *mo = mrow ? L->macc + at * L->w : NULL;
        cf__w_make_row(w, l, j, rows, mrow ? mrows : NULL, o, mo);
        L->next_out++;
        CF__TRY(feed(w, l + 1, o, mo, j, err));
        CF__TRY(cf__w_row_made(w, l, j, err));
    }
    return CF_OK;
}

/* Level 0's mask row y: every overview's nearest mask rows taken from it
 * (with `mask` and nearest overviews; they wait in mnear until their
 * image rows are made, a few rows of that level later at most). */
static void near0(cf_writer *w, const uint8_t *mrow, uint32_t y) {
    for (int l = 1; l < w->nlev; l++) {
        w_level *L = &w->lev[l];
        if (!L->mnear) return;
        while (L->mnext < L->h && L->n0y.near[L->mnext] == y) {
            uint8_t *o = L->mnear + (size_t)(L->mnext++ % CF__RING) * L->w;
            for (uint32_t x = 0; x < L->w; x++) o[x] = mrow[L->n0x.near[x]];
        }
    }
}

/* The n encoded bytes of a level-0 tile at spool offset `off` (a local
 * file) or at src (an object's, held in memory) decoded with p into out,
 * by worker o. */
static cf_status decode0(const cf_writer *w, w_ovw *o, const cf__codec_params *p,
                         const uint8_t *src, uint64_t off, size_t n, uint8_t *out,
                         size_t out_len, cf_error *err) {
    if (!w->ws) {
        if (n > o->compcap) {
            free(o->comp);
            o->compcap = 0;
            if (!(o->comp = cf__malloc(n))) return cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
            o->compcap = n;
        }
        CF__TRY(cf__w_pread(w->spool_fd, o->comp, n, off, w->spool_path, err));
        src = o->comp;
    }
    return cf__codec_decode(o->ctx, p, src, n, out, out_len, err);
}

/* Worker k's share of level 0's row ty: each tile read back (the
 * spool's, or the one held in memory), decoded, and put in the row's
 * band (and its mask in the row's mask band). */
static void *decode_part(void *arg) {
    ov_part *P = arg;
    cf_writer *w = P->w;
    w_ovw *o = &w->ovw[P->k];
    const uint32_t T = w->o.tile_size, ty = P->ty;
    const w_level *L0 = &w->lev[0];
    const uint32_t th = cf__w_tile_rows(L0, ty, T);
    for (uint32_t tx = P->tx0 + (uint32_t)P->k; tx < P->tx1 && !P->st; tx += (uint32_t)P->n) {
        uint32_t tw = tx + 1 < L0->tx ? T : L0->w - tx * T;
        size_t i = (size_t)ty * L0->tx + tx, n = (size_t)L0->len[i];
        size_t mn = w->o.mask ? (size_t)L0->mlen[i] : 0;
        const uint8_t *src = w->ws ? w->pend[i] : NULL;
        const int written = w->ws ? src != NULL : n != 0;
        cf_status st = CF_OK;
        if (!written) cf__w_fill_px(w, o->s.tile, (size_t)T * T);
        else st = decode0(w, o, &w->p, src, L0->off[i], n, o->s.tile, w->tile_bytes, &P->err);
        for (uint32_t y = 0; y < th; y++)
            memcpy(w->band + ((size_t)y * L0->w + (size_t)tx * T) * w->px,
                   o->s.tile + (size_t)y * T * w->px, (size_t)tw * w->px);
        if (w->o.mask && !written) { /* a tile never written is not valid */
            for (uint32_t y = 0; y < th; y++)
                memset(w->mband + (size_t)y * L0->w + (size_t)tx * T, 0, tw);
        } else if (w->o.mask && !st) {
            st = decode0(w, o, &w->mp, src ? src + n : NULL, L0->moff[i], mn, o->s.mtile,
                         w->mtile_bytes, &P->err);
            cf__mask_unpack(o->s.mtile, T, tw, th, w->mband + (size_t)tx * T, L0->w);
        }
        /* (a tile given encoded, cf_writer_write_encoded_tile, is first
         * decoded here) */
        if (st) {
            P->st = cf__err_prefix(&P->err, st, "writer: %s: tile %u,%u of level 0, read back "
                                   "for the overviews", w->path, tx, ty);
            P->bad_tx = tx;
        }
    }
    return NULL;
}

cf_status cf__w_feed_row0(cf_writer *w, uint32_t ty, cf_error *err) {
    const uint32_t T = w->o.tile_size;
    w_level *L0 = &w->lev[0];
    const uint32_t th = cf__w_tile_rows(L0, ty, T);
    /* (given overviews: nothing to make, nothing decoded) */
    const int make = w->nlev > 1 && !w->o.overviews_given;
    if (make) CF__TRY(run_row(w, decode_part, 0, ty, 0, L0->tx, err));
    for (uint32_t tx = 0; w->ws && tx < L0->tx; tx++) {
        size_t i = (size_t)ty * L0->tx + tx;
        if (!w->pend[i]) continue;
        size_t n = (size_t)L0->len[i] + (w->o.mask ? (size_t)L0->mlen[i] : 0);
        CF__TRY(cf__wstream_put(w->ws, 0, w->pend[i], n, err));
        free(w->pend[i]);
        w->pend[i] = NULL;
    }
    for (uint32_t y = 0; make && y < th; y++) {
        if (w->o.mask) near0(w, w->mband + (size_t)y * L0->w, ty * T + y);
        CF__TRY(feed(w, 1, w->band + (size_t)y * L0->w * w->px,
                     w->o.mask ? w->mband + (size_t)y * L0->w : NULL, ty * T + y, err));
    }
    return CF_OK;
}

cf_status cf__w_build_overviews(cf_writer *w, cf_error *err) {
    if (w->nlev < 2 || w->o.overviews_given) return CF_OK;
    CF__TRY(cf__w_init_overviews(w, err));
    for (uint32_t ty = 0; ty < w->lev[0].ty; ty++) CF__TRY(cf__w_feed_row0(w, ty, err));
    return CF_OK;
}
