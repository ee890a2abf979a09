/*
 * sample_read.c - one sample of the Loader: the windows of its files
 * (image scenes, layers, the mask) planned by read_plan.c, every chunk of
 * every file fetched together in batches within the fetch budget, decoded
 * with a kit of the decode budget and pasted into the slot (or the
 * reader's scratch, for float32 output); with the tile-shuffle sampler,
 * crops of cells kept in tile_cache.c; then converted and augmented
 * (convert.c).
 */
#include "loader_internal.h"

#include "convert.h"

#include <stdlib.h>

/* Why not cf_cog_read per part: it reads one file at a time (image, then
 * mask: two round trips per patch on remote storage), allocates its fetch
 * and tile buffers on every call (page faults on every patch) and answers
 * to no budget.  Here every chunk of every part of a sample goes out
 * together (one round trip), in batches of at most LD_PART_CHUNKS chunks
 * that fit the fetch budget, into buffers kept from patch to patch, and
 * is decoded with a kit whose scratch is charged to the decode budget. */

typedef struct ld_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
} ld_wait;

static void wait_cb(cf_range_req *r, void *user) {
    ld_wait *w = user;
    (void)r;
    pthread_mutex_lock(&w->mu);
    if (--w->left == 0) pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Start reading part p: plan its window (read_plan.h); what no chunk
 * covers (outside the image, sparse chunks) gets the fill value, as
 * cf_cog_read gives it. */
static void part_begin(const cf_loader *ld, ld_part *p) {
    const cf_cog *cog = p->cog;
    int ifdi = cog->tiff->levels[ld->o.level];
    cf__plan_init(&p->plan, cog, ifdi, p->x, p->y, p->w, p->h, p->planes, p->nplanes);
    if (p->plan.prefill) cf__cog_fill(cog, ifdi, p->dst, (size_t)p->w * p->h * p->nbands);
}

/* Fetch the worker's k chunks (total compressed bytes) into a buffer of
 * the fetch budget, then decode and paste each into its part. */
static cf_status fetch_decode(cf_loader *ld, ld_worker *wk, ld_part *parts,
                              size_t k, uint64_t total, cf_cog **bad,
                              cf_error *err) {
    cf_cog *first = parts[wk->cpart[0]].cog;
    cf__buf buf;
    int fresh;
    cf_status st = cf__bufpool_get(&ld->fetch, (size_t)total, &buf, &fresh, err);
    if (st != CF_OK) {
        *bad = first;
        return cf__err_prefix(err, st, "%s: waiting for %llu bytes of tiles",
                              cf_cog_name(first), (unsigned long long)total);
    }
    if (fresh) cf__cog_prefault(first, buf.p, buf.cap);
    memset(wk->reqs, 0, k * sizeof *wk->reqs);
    cf__cog_chunk_reqs(wk->chunks, k, buf.p, wk->reqs);
    for (size_t i = 0; i < k; i++) {
        cf_range_req *r = &wk->reqs[i];
        r->err = &wk->errs[i];
        r->status = CF_E_IO;
        cf__err_clear(r->err);
    }
    /* Every part's chunks go out before waiting for any. */
    ld_wait wt;
    pthread_mutex_init(&wt.mu, NULL);
    pthread_cond_init(&wt.cv, NULL);
    wt.left = k;
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && wk->cpart[j] == wk->cpart[i]) j++;
        cf_cog *cog = parts[wk->cpart[i]].cog;
        cf_status s2 = cf_src_submit(cog->src, &wk->reqs[i], j - i, wait_cb,
                                     &wt, err);
        if (s2 != CF_OK) {
            /* Nothing of this run was submitted: no callbacks to wait. */
            pthread_mutex_lock(&wt.mu);
            wt.left -= j - i;
            pthread_mutex_unlock(&wt.mu);
            if (st == CF_OK) {
                st = s2;
                *bad = cog;
            }
        }
        i = j;
    }
    pthread_mutex_lock(&wt.mu);
    while (wt.left) pthread_cond_wait(&wt.cv, &wt.mu);
    pthread_mutex_unlock(&wt.mu);
    pthread_cond_destroy(&wt.cv);
    pthread_mutex_destroy(&wt.mu);
    cf__kit *kit = NULL;
    for (size_t i = 0; i < k && st == CF_OK; i++) {
        ld_part *p = &parts[wk->cpart[i]];
        const cf_chunk *c = &wk->chunks[i];
        cf_range_req *r = &wk->reqs[i];
        const uint8_t *chunk = NULL;
        if (r->status != CF_OK) {
            if (err) *err = *r->err;
            st = cf__cog_fetch_failed(p->cog, r->status, err);
        } else {
            /* A kit only for chunks that need decoding, borrowed once. */
            if (!kit && !cf__cog_chunk_raw(p->cog, c)) kit = cf__kits_get(&ld->kits);
            st = cf__kits_decode(&ld->kits, kit, p->cog, c, r->dst, &chunk, err);
            if (st == CF_OK)
                cf__cog_paste(p->cog, c, chunk, p->x, p->y, p->w, p->h,
                              p->bands0, (int)p->nbands, p->dst, 1);
        }
        if (st != CF_OK) *bad = p->cog;
    }
    cf__kits_put(&ld->kits, kit);
    cf__bufpool_put(&ld->fetch, &buf);
    return st;
}

/* Read parts[0..np): their chunks in order, in batches that fit the
 * fetch budget.  A chunk that can never fit (its compressed bytes above
 * the fetch budget, or its decode above the decode budget) fails the part
 * with CF_E_LIMIT before anything is allocated.  On failure *bad names the
 * part's file. */
static cf_status read_parts(cf_loader *ld, ld_worker *wk, ld_part *parts,
                            int np, cf_cog **bad, cf_error *err) {
    for (int i = 0; i < np; i++) part_begin(ld, &parts[i]);
    const uint64_t fcap = ld->fetch.b.cap, dcap = ld->kits.b.cap;
    int cur = 0;
    cf_status st = CF_OK;
    while (st == CF_OK) {
        size_t k = 0;
        uint64_t total = 0;
        while (cur < np && k < LD_PART_CHUNKS) {
            ld_part *p = &parts[cur];
            cf_chunk *c = &wk->chunks[k];
            int has;
            st = cf__plan_peek(&p->plan, c, &has, err);
            if (st != CF_OK) {
                *bad = p->cog;
                break;
            }
            if (!has) {
                cur++;
                continue;
            }
            st = cf__budget_fits(p->cog, c, 1, fcap, dcap, "the loader",
                                 ld->o.inflight_bytes, err);
            if (st != CF_OK) {
                *bad = p->cog;
                break;
            }
            if (total + c->len > fcap) break; /* the next batch takes it */
            wk->cpart[k++] = cur;
            total += c->len;
            cf__plan_take(&p->plan);
        }
        if (st != CF_OK || !k) break;
        st = fetch_decode(ld, wk, parts, k, total, bad, err);
    }
    return st;
}

/* Part p's cell (cx, cy, cw, ch) from the tile cache, loading it on a
 * miss; NULL (and *st CF_OK) when the cache cannot take it. */
static cf__tcache_ent *cached_cell(cf_loader *ld, ld_worker *wk, const ld_part *p,
                                   size_t bytes, int64_t cx, int64_t cy, uint32_t cw,
                                   uint32_t ch, int *loaded, cf_status *st, cf_cog **bad,
                                   cf_error *err) {
    *st = CF_OK;
    cf__tcache_ent *e = cf__tcache_get(&ld->cache, p->cog, cx, cy, cw, ch, bytes, loaded);
    if (!e || !*loaded) return e;
    uint8_t *buf = cf__malloc(bytes);
    if (!buf) {
        *st = cf__err(err, CF_E_NOMEM, "loader: %s: cache cell of %zu bytes",
                      cf_cog_name(p->cog), bytes);
        *bad = p->cog;
    } else {
        ld_part cell = *p;
        cell.x = cx;
        cell.y = cy;
        cell.w = cw;
        cell.h = ch;
        cell.dst = buf;
        cell.bytes = bytes;
        *st = read_parts(ld, wk, &cell, 1, bad, err);
        if (*st != CF_OK) {
            free(buf);
            buf = NULL;
        }
    }
    cf__tcache_loaded(&ld->cache, e, buf);
    return buf ? e : NULL;
}

/* Read part p (window `w` of the sample) on its own; with the
 * tile-shuffle sampler, crop it out of the cached cell.  *decoded
 * receives the raw bytes the reader produced. */
static cf_status read_block(cf_loader *ld, ld_worker *wk, ld_part *p,
                            const cf_window *w, uint64_t *decoded,
                            cf_cog **bad, cf_error *err) {
    size_t es = cf_dtype_size(p->dt);
    if (ld->o.sampler == CF_SAMPLER_TILE_SHUFFLE) {
        int64_t cx, cy;
        uint32_t cw, ch;
        cf__sampler_cell(&ld->samp, w, &cx, &cy, &cw, &ch);
        size_t bytes = (size_t)p->nbands * cw * ch * es;
        cf_status st;
        int loaded;
        cf__tcache_ent *e = cached_cell(ld, wk, p, bytes, cx, cy, cw, ch, &loaded,
                                        &st, bad, err);
        if (st != CF_OK) return st;
        if (e) {
            if (loaded) *decoded += bytes;
            size_t row = (size_t)w->w * es;
            for (uint32_t b = 0; b < p->nbands; b++)
                for (uint32_t r = 0; r < w->h; r++) {
                    const uint8_t *s =
                        e->buf + (((size_t)b * ch + (size_t)(w->y - cy + r)) *
                                      cw +
                                  (size_t)(w->x - cx)) *
                                     es;
                    memcpy(p->dst + ((size_t)b * w->h + r) * row, s, row);
                }
            cf__tcache_put(&ld->cache, e);
            return CF_OK;
        }
    }
    *decoded += p->bytes;
    return read_parts(ld, wk, p, 1, bad, err);
}

/* Member mb's raw block `raw` to float32 planes at `out`, with the
 * file's scale/offset (when asked) and the channels' mean/std. */
static void convert_member(const cf_loader *ld, const ld_member *mb,
                           const cf_cog *cog, const uint8_t *raw,
                           uint8_t *out) {
    const cf_loader_options *o = &ld->o;
    cf_dtype dt = mb->layer < 0 ? ld->raw_dt : ld->layer_dt[mb->layer];
    const int *bands = mb->layer < 0 ? ld->bands : NULL;
    for (uint32_t b = 0; b < mb->nb; b++) {
        int band = bands ? bands[b] : (int)b + 1;
        double sc = 1, off = 0;
        if (o->apply_scale_offset) {
            sc = cf_cog_band_scale(cog, band);
            off = cf_cog_band_offset(cog, band);
        }
        uint32_t c = mb->channel + b;
        cf__convert_band(raw + (size_t)b * ld->plane * cf_dtype_size(dt), dt, ld->plane,
                         sc, off, ld->mean ? ld->mean[c] : 0, ld->std ? ld->std[c] : 1,
                         (float *)(void *)(out + b * ld->plane * 4));
    }
}

/* The file that member m of a sample of file f reads. */
static cf_cog *member_cog(const cf_loader *ld, size_t f, const ld_member *mb) {
    return mb->layer < 0
               ? ld->img[f * (size_t)ld->o.time_steps + (size_t)mb->t]
               : ld->lay[f * (size_t)ld->o.nlayers + (size_t)mb->layer];
}

/* Input m of a sample of file f (member m, or the mask when m is
 * nmembers): the part that reads window w of it, raw and band-sequential,
 * into dst.  One input, one part: an input that needs another way to the
 * sample's window is read by its own step here. */
static void input_part(const cf_loader *ld, size_t f, const cf_window *w, int m,
                       uint8_t *dst, ld_part *p) {
    memset(p, 0, sizeof *p);
    p->x = w->x;
    p->y = w->y;
    p->w = w->w;
    p->h = w->h;
    p->dst = dst;
    if (m == ld->nmembers) {
        p->cog = ld->msk[f];
        p->bands0 = p->planes = ld->ident;
        p->nbands = p->nplanes = 1;
        p->dt = ld->lay_out.mask_dtype;
        p->bytes = ld->plane * ld->mask_es;
        return;
    }
    const ld_member *mb = &ld->members[m];
    p->cog = member_cog(ld, f, mb);
    int sel = mb->layer < 0 && ld->bands;
    p->bands0 = sel ? ld->bands0 : ld->ident;
    p->planes = sel ? ld->planes0 : ld->ident;
    p->nbands = mb->nb;
    p->nplanes = sel ? (uint32_t)ld->nplanes0 : mb->nb;
    p->dt = mb->layer < 0 ? ld->raw_dt : ld->layer_dt[mb->layer];
    p->bytes = cf__ld_member_bytes(ld, mb, ld->o.patch_size, ld->o.patch_size);
}

/* Read, convert and augment sample j into position i of slot s. */
cf_status cf__ld_read_sample(cf_loader *ld, ld_worker *wk, ld_slot *s, uint32_t i,
                             uint64_t epoch, uint64_t j, uint64_t *decoded, double *t_read,
                             double *t_conv, cf_error *err) {
    const cf_loader_options *o = &ld->o;
    const size_t T = (size_t)o->time_steps, C = ld->lay_out.channels;
    const uint32_t P = o->patch_size;
    const int f32 = o->out_dtype == CF_DT_F32;
    cf_window w;
    cf__sampler_window_at(&ld->samp, epoch, j, &w);
    s->windows[i] = w;
    const size_t f = w.file;
    uint8_t *img = s->image + (size_t)i * T * C * ld->plane * ld->es;
    uint8_t *mask = ld->msk ? s->mask + (size_t)i * ld->plane * ld->mask_es
                            : NULL;
    /* The parts: image members (raw into the slot, or into scratch when
     * converted to float32), then the mask.  They go out together, up to
     * LD_PART_CHUNKS parts at a time (a long time series takes several
     * groups). */
    const int nall = ld->nmembers + (mask != NULL);
    ld_part parts[LD_PART_CHUNKS];
    size_t off = 0;
    cf_status st = CF_OK;
    cf_cog *bad = NULL;
    double t0 = cf__now();
    for (int g = 0; g < nall && st == CF_OK;) {
        int np = nall - g < LD_PART_CHUNKS ? nall - g : LD_PART_CHUNKS;
        for (int k = 0; k < np; k++) {
            int m = g + k;
            uint8_t *dst = mask;
            if (m < ld->nmembers) {
                const ld_member *mb = &ld->members[m];
                dst = f32 ? wk->scratch + off
                          : img + ((size_t)mb->t * C + mb->channel) * ld->plane * ld->es;
                off += cf__ld_member_bytes(ld, mb, P, P);
            }
            input_part(ld, f, &w, m, dst, &parts[k]);
        }
        if (o->sampler != CF_SAMPLER_TILE_SHUFFLE) {
            st = read_parts(ld, wk, parts, np, &bad, err);
            for (int k = 0; k < np && st == CF_OK; k++) *decoded += parts[k].bytes;
        } else {
            for (int k = 0; k < np && st == CF_OK; k++)
                st = read_block(ld, wk, &parts[k], &w, decoded, &bad, err);
        }
        g += np;
    }
    *t_read += cf__now() - t0;
    /* The file whose read failed; the sample's image if none was named. */
    if (st != CF_OK)
        return cf__err_prefix(err, st,
                              "loader: sample %llu (%s, window %lld,%lld,%u,%u)",
                              (unsigned long long)w.index,
                              cf_cog_name(bad ? bad : ld->img[f * T]),
                              (long long)w.x, (long long)w.y, w.w, w.h);
    double t2 = cf__now();
    off = 0;
    for (int m = 0; f32 && m < ld->nmembers; m++) {
        const ld_member *mb = &ld->members[m];
        convert_member(ld, mb, member_cog(ld, f, mb), wk->scratch + off,
                       img + ((size_t)mb->t * C + mb->channel) * ld->plane *
                                 ld->es);
        off += cf__ld_member_bytes(ld, mb, P, P);
    }
    if (w.aug) {
        for (size_t p = 0; p < T * C; p++)
            cf__augment_plane(img + p * ld->plane * ld->es, ld->es, P, w.aug,
                          wk->scratch);
        if (mask) cf__augment_plane(mask, ld->mask_es, P, w.aug, wk->scratch);
    }
    *t_conv += cf__now() - t2;
    return CF_OK;
}

