/*
 * sample_read.c - one sample of the Loader: the windows of its files
 * (image scenes, layers, the mask) planned by read_plan.c, every chunk of
 * every file fetched together in batches within the fetch budget, decoded
 * with a kit of the decode budget and pasted into the slot (or the
 * reader's scratch, for float32 output); with the tile-shuffle sampler,
 * crops of cells kept in tile_cache.c.  Each input is read onto the
 * sample's target grid (sample_grid.c): as it lies or shifted by whole
 * pixels, else through the source windows of read_grid.c's warp plan,
 * resampled into its block.  Decoded chunks are kept for the next
 * patches, and shared by readers that miss them together, in
 * chunk_cache.c (random patches, grid patches sharing tiles, resampled
 * inputs); then converted and augmented (convert.c).
 */
#include "loader_internal.h"

#include "convert.h"

#include <stdlib.h>

/* The raw dtype of member mb's file. */
static cf_dtype member_dt(const cf_loader *ld, const ld_member *mb) {
    if (mb->layer == LD_SCENE_MASK) return ld->scm_dt;
    return mb->layer < 0 ? ld->raw_dt : ld->layer_dt[mb->layer];
}

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

static void wait_cb(cf__range_req *r, void *user) {
    ld_wait *w = user;
    (void)r;
    pthread_mutex_lock(&w->mu);
    if (--w->left == 0) pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Start reading part p: plan its window (read_plan.h); what no chunk
 * covers (outside the image, sparse chunks) gets the fill value, as
 * cf_cog_read gives it. */
static void part_begin(ld_part *p) {
    const cf_cog *cog = p->cog;
    int ifdi = cog->tiff->levels[p->level];
    cf__plan_init(&p->plan, cog, ifdi, p->x, p->y, p->w, p->h, p->planes, p->nplanes);
    if (p->plan.prefill) cf__cog_fill(cog, ifdi, p->dst, (size_t)p->w * p->h * p->nbands);
}

/* Give up the claims of chunks [from, k) of the batch (not read). */
static void abandon_claims(cf_loader *ld, ld_worker *wk, size_t from, size_t k) {
    for (size_t i = from; i < k; i++)
        if (wk->claim[i]) {
            cf__cc_abandon(ld->cc, wk->claim[i]);
            wk->claim[i] = NULL;
        }
}

/* Fetch the worker's k chunks (total compressed bytes) into a buffer of
 * the fetch budget, then decode and paste each into its part, publishing
 * the claimed ones in the chunk cache (and abandoning, on failure, those
 * not read). */
static cf_status fetch_decode(cf_loader *ld, ld_worker *wk, ld_part *parts,
                              size_t k, uint64_t total, cf_cog **bad,
                              cf_error *err) {
    cf_cog *first = parts[wk->cpart[0]].cog;
    cf__buf buf;
    int fresh;
    cf_status st = cf__bufpool_get(&ld->fetch, (size_t)total, &buf, &fresh, err);
    if (st != CF_OK) {
        abandon_claims(ld, wk, 0, k);
        *bad = first;
        return cf__err_prefix(err, st, "%s: waiting for %llu bytes of tiles",
                              cf_cog_name(first), (unsigned long long)total);
    }
    if (fresh) cf__cog_prefault(first, buf.p, buf.cap);
    memset(wk->reqs, 0, k * sizeof *wk->reqs);
    cf__cog_chunk_reqs(wk->chunks, k, buf.p, wk->reqs);
    for (size_t i = 0; i < k; i++) {
        cf__range_req *r = &wk->reqs[i];
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
        cf_status s2 = cf__src_submit(cog->src, &wk->reqs[i], j - i, wait_cb,
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
        const cf__chunk *c = &wk->chunks[i];
        cf__range_req *r = &wk->reqs[i];
        const uint8_t *chunk = NULL;
        if (r->status != CF_OK) {
            if (err) *err = *r->err;
            st = cf__cog_fetch_failed(p->cog, r->status, err);
        } else {
            /* A kit only for chunks that need decoding, borrowed once. */
            if (!kit && !cf__cog_chunk_raw(p->cog, c)) kit = cf__kits_get(&ld->kits);
            st = cf__kits_decode(&ld->kits, kit, p->cog, c, r->dst, wk->crows[i], &chunk,
                                 err);
            if (st == CF_OK && !cf__cog_chunk_raw(p->cog, c)) wk->chunk_bytes += wk->cbytes[i];
            if (st == CF_OK) {
                cf__cog_paste(p->cog, c, chunk, p->x, p->y, p->w, p->h,
                              p->bands0, (int)p->nbands, p->dst, 1);
                if (wk->claim[i]) {
                    cf__cc_publish(ld->cc, wk->claim[i], chunk);
                    wk->claim[i] = NULL;
                }
            }
        }
        if (st != CF_OK) *bad = p->cog;
    }
    abandon_claims(ld, wk, 0, k);
    cf__kits_put(&ld->kits, kit);
    cf__bufpool_put(&ld->fetch, &buf);
    return st;
}

/* Read parts[0..np): their chunks in order, in batches that fit the
 * fetch budget.  A chunk that can never fit (its compressed bytes above
 * the fetch budget, or its decode above the decode budget) fails the part
 * with CF_E_LIMIT before anything is allocated.  On failure *bad names the
 * part's file.
 *
 * Parts that go through the chunk cache: a chunk cached is pasted from
 * it; one no other reader is reading is claimed and joins the batch; one
 * another reader claimed is put aside (wchunks) and waited on only when
 * this reader holds no claim it has not read (after a batch): every
 * pending entry then belongs to a reader that is fetching, never waiting,
 * so waits always end.  A chunk whose claimer gave up is fetched here
 * (rchunks). */
static cf_status read_parts(cf_loader *ld, ld_worker *wk, ld_part *parts,
                            int np, cf_cog **bad, cf_error *err) {
    for (int i = 0; i < np; i++) part_begin(&parts[i]);
    const uint64_t fcap = ld->fetch.b.cap, dcap = ld->kits.b.cap;
    int cur = 0;
    size_t nw = 0, nr = 0; /* put aside, to fetch here */
    cf_status st = CF_OK;
    for (;;) {
        size_t k = 0;
        uint64_t total = 0;
        while (k < LD_PART_CHUNKS) {
            cf__chunk c;
            int pi, retry = nr > 0;
            if (retry) {
                c = wk->rchunks[nr - 1];
                pi = wk->rpart[nr - 1];
            } else {
                if (cur >= np || nw == LD_PART_CHUNKS) break;
                int has;
                st = cf__plan_peek(&parts[cur].plan, &c, &has, err);
                if (st != CF_OK) {
                    *bad = parts[cur].cog;
                    break;
                }
                if (!has) {
                    cur++;
                    continue;
                }
                pi = cur;
            }
            ld_part *p = &parts[pi];
            st = cf__budget_fits(p->cog, &c, 1, fcap, dcap, "the loader",
                                 ld->o.inflight_bytes, err);
            if (st != CF_OK) {
                *bad = p->cog;
                break;
            }
            if (total + c.len > fcap) break; /* the next batch takes it */
            if (retry) nr--;
            else cf__plan_take(&p->plan);
            cf__cc_found found = CF__CC_NONE;
            const uint8_t *d = NULL;
            void *h = NULL;
            /* A tile below the patch's top is decoded down to its last row
             * only; the cache keeps it with that row count. */
            cf__chunk_rows cr = cf__cog_chunk_rows(p->cog, &c, p->x, p->y, p->w, p->h);
            /* Grid patches walk down the tiles: the next row of patches
             * needs the rest of each tile, which a short cache entry
             * would turn into a second fetch and decode (over HTTP on
             * ZSTD: 1.5 requests a patch instead of 0.5). */
            if (ld->o.sampler == CF_SAMPLER_GRID) cr.rows = cr.height;
            if (p->cache)
                found = cf__cc_claim_rows(ld->cc, p->cog, &c, cr.row_bytes, cr.need, cr.height,
                                          &cr.rows, &d, &h);
            if (found == CF__CC_HIT) {
                /* A decoded chunk kept by a neighbouring patch. */
                cf__cog_paste(p->cog, &c, d, p->x, p->y, p->w, p->h, p->bands0,
                              (int)p->nbands, p->dst, 1);
                cf__cc_put(ld->cc, h);
                continue;
            }
            if (found == CF__CC_WAIT && !retry) {
                wk->wchunks[nw] = c;
                wk->wpart[nw] = pi;
                wk->wh[nw++] = h;
                continue;
            }
            if (found == CF__CC_WAIT) {
                /* Claimed afresh after its claimer gave up: read it here
                 * rather than wait twice. */
                cf__cc_put(ld->cc, h);
                h = NULL;
            }
            wk->chunks[k] = c;
            wk->crows[k] = cr.rows;
            wk->cbytes[k] = (size_t)cr.rows * cr.row_bytes;
            wk->cpart[k] = pi;
            wk->claim[k++] = found == CF__CC_CLAIMED ? h : NULL;
            total += c.len;
        }
        if (st != CF_OK) {
            abandon_claims(ld, wk, 0, k);
            break;
        }
        if (k) {
            st = fetch_decode(ld, wk, parts, k, total, bad, err);
            if (st != CF_OK) break;
            continue;
        }
        /* Nothing to fetch now (a chunk always fits an empty batch,
         * cf__budget_fits saw to it, so only chunks put aside are left):
         * every claim of this reader is read, its waits can begin. */
        if (!nw) break;
        for (size_t i = 0; i < nw; i++) {
            ld_part *p = &parts[wk->wpart[i]];
            const uint8_t *d = cf__cc_wait(ld->cc, wk->wh[i]);
            if (d)
                cf__cog_paste(p->cog, &wk->wchunks[i], d, p->x, p->y, p->w, p->h,
                              p->bands0, (int)p->nbands, p->dst, 1);
            else {
                wk->rchunks[nr] = wk->wchunks[i];
                wk->rpart[nr++] = wk->wpart[i];
            }
            cf__cc_put(ld->cc, wk->wh[i]);
        }
        nw = 0;
    }
    for (size_t i = 0; i < nw; i++) cf__cc_put(ld->cc, wk->wh[i]);
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
        CF__TRY(st);
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
    cf_dtype dt = member_dt(ld, mb);
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
    const size_t scene = f * (size_t)ld->o.time_steps + (size_t)mb->t;
    if (mb->layer == LD_SCENE_MASK) return ld->scm[scene];
    return mb->layer < 0 ? ld->img[scene] : ld->lay[cf__ld_layer_file(ld, f, mb)];
}

/* Input m of a sample of file f (member m, or the mask when m is
 * nmembers): the part that reads window w of it, raw and band-sequential,
 * into dst, as the input lies on the image.  place_inputs then puts it on
 * the sample's target grid: shifted, or read through the source windows
 * of a warp plan. */
static void input_part(const cf_loader *ld, size_t f, const cf_window *w, int m,
                       uint8_t *dst, ld_part *p) {
    memset(p, 0, sizeof *p);
    p->level = ld->o.level;
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
    int sel = mb->layer == -1 && ld->bands;
    p->bands0 = sel ? ld->bands0 : ld->ident;
    p->planes = sel ? ld->planes0 : ld->ident;
    p->nbands = mb->nb;
    p->nplanes = sel ? (uint32_t)ld->nplanes0 : mb->nb;
    p->dt = member_dt(ld, mb);
    p->bytes = cf__ld_member_bytes(ld, mb, ld->o.patch_size, ld->o.patch_size);
}

/* Whether window p leaves part of a source tile it touches to other
 * windows (it starts off the tiles' corners or ends inside one, short of
 * the image's edge): on a target grid, patches smaller than the tiles or
 * off their corners, whose neighbours need the rest of those tiles. */
static int cuts_tiles(const ld_part *p) {
    cf_level_info li;
    if (cf_cog_level_info(p->cog, p->level, &li, NULL) != CF_OK || !li.tiled) return 0;
    const int64_t tw = li.tile_width, th = li.tile_height;
    const int64_t x1 = p->x + p->w, y1 = p->y + p->h;
    return p->x % tw || p->y % th || (x1 % tw && x1 < li.width) || (y1 % th && y1 < li.height);
}

/* One input of a sample (a member, or the mask) as it is read onto the
 * sample's target grid (sample_grid.h): one part read straight into its
 * block (shifted by whole pixels), or, warped, the parts of its source
 * windows, resampled into its block once they are read. */
typedef struct ld_input {
    cf_cog *cog;
    uint8_t *dst;             /* its raw block, nb x P x P */
    cf_dtype dt;
    uint32_t nb;
    int warped;
    int classes;              /* a scene mask: its invalid classes clear
                                 vplane */
    uint8_t *vplane;          /* its validity is AND-ed into this P x P
                                 plane (valid_mask, mosaic), or NULL */
    int part0;                /* its part, or (warped) its first */
    int fill;                 /* a mosaic's later scene: fills its step */
    int slot;                 /* its mosaic slot (and its scene mask's) */
    int step;
    cf__grid_plan plan;       /* warped */
} ld_input;

/* The input (a member, or the mask when nmembers) read k-th: members in
 * order, then the mask; mosaics read each step's first scene (its layers
 * and scene mask) and the mask first, the later scenes last (read only
 * while needed). */
static int input_at(const cf_loader *ld, int k) {
    const int nout = ld->o.mosaic ? (int)ld->lay_out.time_steps * (1 + ld->o.nlayers + ld->has_scm)
                                  : ld->nmembers;
    if (k < nout) return k;
    if (ld->msk) return k == nout ? ld->nmembers : k - 1;
    return k;
}

/* A mosaic's later scene whose step has data in every pixel already: not
 * read (nor its scene mask). */
static int step_full(const cf_loader *ld, const ld_worker *wk, const ld_member *mb) {
    const uint8_t *filled = wk->scratch + ld->filled_off + (size_t)mb->step * CF__ALIGN16(ld->plane);
    return !memchr(filled, 0, ld->plane);
}

/* A mosaic's later scene whose footprint (from its header, or from its
 * description when not opened yet) misses the window: it would fill
 * nothing, and is neither read nor opened for it (a region's step may
 * hold thousands of scenes, each a plane's work and a header's request
 * when read). */
static int unmet(const cf_loader *ld, size_t f, const ld_member *mb, const cf_window *w) {
    return ld->scene_fp && !cf__fp_meets(ld->scene_fp, f, (size_t)mb->t, w->x, w->y, w->w, w->h);
}

/* A mosaic's later scene that will be read whatever the scenes before it
 * hold: some pixel of the window lies outside all their footprints, so
 * the step cannot be full before it (8 x 8 pixels tried).  Read in the
 * round of the first scenes, not a round trip after them.  Notes its own
 * footprint for the scenes after it (looked at in order: a scene looked
 * at again, by the next group, sees its own and is not sure then). */
static int sure_read(const cf_loader *ld, ld_worker *wk, size_t f, const ld_member *mb,
                     const cf_window *w) {
    if (!wk->cov) return 0;
    uint64_t *c = &wk->cov[mb->step];
    const int sure = *c != UINT64_MAX;
    *c |= cf__fp_points(ld->scene_fp, f, (size_t)mb->t, w->x, w->y, w->w, w->h);
    return sure;
}

/* A sample's described files not opened yet, their headers read together
 * before its parts are placed (else each would cost a round trip of its
 * own, one after another): every input it may read, a mosaic's later
 * scenes (with their scene masks) where their footprints meet the window
 * (also those whose pixels the earlier scenes then leave unread: a
 * header each, which saves a round trip per group of later scenes),
 * except repeats of an earlier scene of their step. */
static void open_ahead(const cf_loader *ld, size_t f, const cf_window *w) {
    cf_cog *list[64];
    size_t n = 0;
    const int nall = ld->nmembers + (ld->msk != NULL);
    for (int m = 0; m < nall; m++) {
        const ld_member *mb = m < ld->nmembers ? &ld->members[m] : NULL;
        if (mb && mb->later &&
            (unmet(ld, f, mb, w) || ld->repeats[f * (size_t)ld->o.time_steps + (size_t)mb->t]))
            continue;
        cf_cog *c = mb ? member_cog(ld, f, mb) : ld->msk[f];
        if (!cf__cog_declared(c)) continue;
        list[n++] = c;
        if (n == sizeof list / sizeof *list) {
            cf__cog_load_many(list, n);
            n = 0;
        }
    }
    if (n) cf__cog_load_many(list, n);
}

/* The parts of inputs g, g+1, ... of a sample of file f (window w), as
 * many as fit LD_PART_CHUNKS parts: *used inputs taken, of which *ni are
 * read (whose warp plans the caller frees; the others, skipped, are later
 * scenes of steps already full or repeating an earlier scene of their
 * step), *np parts.  Member blocks go to the slot
 * (img), or to the reader's scratch for float32 output; the mask's to
 * mask; a mosaic's later scenes to mosaic slots of the scratch, at most
 * one per step in a group (each fills what the scenes before it left),
 * each with its scene mask.  Warped inputs' source windows go to the
 * reader's warp scratch, or to *tmp (the caller frees it) when a sample
 * needs more. */
static cf_status place_inputs(cf_loader *ld, ld_worker *wk, size_t f, const cf_window *w, int g,
                              int nall, uint8_t *img, uint8_t *mask, uint8_t *valid,
                              ld_part *parts, int *np, ld_input *ins, int *ni, int *used,
                              uint8_t **tmp, uint64_t *tmp_bytes, cf_cog **bad, cf_error *err) {
    const size_t C = ld->lay_out.channels;
    const int f32 = ld->o.out_dtype == CF_DT_F32;
    uint64_t need = 0;
    cf_status st = CF_OK;
    *np = *ni = *used = 0;
    uint32_t nscm = 0;   /* scene masks in this group */
    uint32_t nlater = 0; /* a mosaic's later scenes in this group */
    /* A later scene and its scene mask are read in one group: where the
     * mask does not fit, both go to the next (what the group held before
     * the scene). */
    struct {
        int on, np, ni, used;
        uint64_t need;
    } pair = {0};
    while (g + *used < nall && *ni < LD_PART_CHUNKS) {
        const int m = input_at(ld, g + *used);
        const ld_member *mb = m < ld->nmembers ? &ld->members[m] : NULL;
        const int fills = mb && cf__ld_member_fills(ld, mb);
        const int classes = mb && mb->layer == LD_SCENE_MASK;
        if (fills) {
            /* Later scenes are read in groups of their own, once the
             * first scenes, which they fill, are in, one per step; but
             * those sure to be read go with the first ones (the fills
             * follow the scenes' order within a group). */
            const int repeat = ld->repeats[f * (size_t)ld->o.time_steps + (size_t)mb->t];
            const int misses = !repeat && unmet(ld, f, mb, w);
            const int sure = !repeat && !misses && sure_read(ld, wk, f, mb, w);
            if (*ni && !ins[0].fill && !sure) break;
            /* The footprint and repeat tests first: a scan of the
             * step's plane costs more. */
            if (!sure && (repeat || misses || step_full(ld, wk, mb))) {
                *used += 1 + ld->has_scm;
                continue;
            }
            int taken = 0;
            for (int k = 0; k < *ni && !taken && !sure; k++)
                taken = ins[k].fill && ins[k].step == mb->step;
            if (taken || nlater == ld->mosaic_slots ||
                (ld->has_scm && nscm == ld->scm_per_group))
                break;
            pair = (__typeof__(pair)){1, *np, *ni, *used, need};
        } else if (classes && nscm == ld->scm_per_group) {
            break;
        }
        ld_input *in = &ins[*ni];
        memset(in, 0, sizeof *in);
        uint8_t *dst = mask, *vp = NULL;
        size_t slot = ld->o.nfiles * (size_t)ld->o.time_steps + f;
        if (mb) {
            const size_t fstride = CF__ALIGN16(ld->plane);
            /* a later scene's mosaic slot (its scene mask takes its
             * scene's) */
            const uint32_t ms = fills ? nlater++ : nlater ? nlater - 1 : 0;
            dst = fills ? wk->scratch + ld->mosaic_off + ms * ld->mosaic_bytes
                  : classes ? wk->scratch + ld->scm_off + nscm++ * ld->scm_bytes
                  : f32 ? wk->scratch + mb->soff
                        : img + ((size_t)mb->step * C + mb->channel) * ld->plane * ld->es;
            slot = cf__ld_member_slot(ld, f, mb);
            /* Validity: a mosaic's scenes (and their scene masks) into the
             * plane of what its step has filled (the first scene) or of
             * the later scene being read (its mosaic slot's); the rest
             * into the sample's (its step's, one plane per step). */
            vp = valid ? valid + (ld->valid_steps > 1 ? (size_t)mb->step * ld->plane : 0) : NULL;
            if (ld->o.mosaic && mb->layer < 0)
                vp = wk->scratch + (mb->later ? ld->scene_valid_off + ms * fstride
                                              : ld->filled_off + (size_t)mb->step * fstride);
            if (fills) memset(vp, 1, ld->plane);
            in->classes = classes;
            in->fill = fills;
            in->slot = (int)ms;
            in->step = mb->step;
        }
        ld_part p;
        input_part(ld, f, w, m, dst, &p);
        /* A described input's header is read by the first sample that
         * reads it (cf_loader_options.described). */
        st = cf__cog_load(p.cog, err);
        if (st != CF_OK) {
            *bad = p.cog;
            break;
        }
        const cf__sg_input *how = cf__sg_input_at(ld->sg, slot);
        int fits = 1;
        if (how->how == CF__SG_DIRECT) {
            fits = *np < LD_PART_CHUNKS;
            if (fits) {
                p.x += how->dx;
                p.y += how->dy;
                p.cache = ld->cc_direct || (ld->cc && cuts_tiles(&p));
                in->part0 = *np;
                parts[(*np)++] = p;
            }
        } else {
            st = cf__sg_plan(ld->sg, slot, p.cog, f, w->x, w->y, w->w, w->h, (int)p.nbands,
                             &ld->o, &in->plan, err);
            if (st != CF_OK) {
                *bad = p.cog;
                break;
            }
            /* The sample's scenes of one grid (a place's dates) share
             * their positions (none kept when there is no memory). */
            if (!wk->pos) wk->pos = cf__warp_pos_new();
            in->plan.pos = wk->pos;
            fits = *np + in->plan.n <= LD_PART_CHUNKS;
            if (fits) {
                in->warped = 1;
                in->part0 = *np;
                size_t bps = cf_dtype_size(p.dt);
                for (size_t k = 0; k < in->plan.n; k++) {
                    const cf__warp_chunk *c = &in->plan.chunks[k];
                    ld_part q = p;
                    q.level = c->rq.level;
                    q.x = c->win.x;
                    q.y = c->win.y;
                    q.w = c->win.w;
                    q.h = c->win.h;
                    q.bytes = (size_t)q.w * q.h * q.nbands * bps;
                    q.cache = ld->cc != NULL;
                    need += CF__ALIGN16(q.bytes);
                    parts[(*np)++] = q;
                }
            } else {
                cf__grid_plan_free(&in->plan);
            }
        }
        if (!fits) {
            /* the next group takes it (a later scene's mask takes its
             * scene along: below) */
            if (!*used) { /* not even alone */
                *bad = p.cog;
                st = cf__err(err, CF_E_LIMIT, "%s: more source windows for one patch than "
                             "one read takes (%d)", cf_cog_name(p.cog), LD_PART_CHUNKS);
            }
            break;
        }
        in->cog = p.cog;
        in->vplane = vp;
        in->dst = p.dst;
        in->dt = p.dt;
        in->nb = p.nbands;
        (*ni)++;
        (*used)++;
        if (!fills || !ld->has_scm) pair.on = 0;
    }
    if (st == CF_OK && pair.on) {
        /* A later scene whose scene mask did not fit the group: both go
         * to the next. */
        for (int k = pair.ni; k < *ni; k++)
            if (ins[k].warped) cf__grid_plan_free(&ins[k].plan);
        *np = pair.np, *ni = pair.ni, *used = pair.used, need = pair.need;
        if (!*used) {
            *bad = ins[0].cog;
            st = cf__err(err, CF_E_LIMIT, "%s: more source windows for one patch, with its "
                         "scene mask, than one read takes (%d)", cf_cog_name(ins[0].cog),
                         LD_PART_CHUNKS);
        }
    }
    if (st != CF_OK || !need) return st;
    uint8_t *base = wk->scratch + ld->warp_off;
    if (need > ld->warp_bytes) {
        /* An unusual patch (a steeper reprojection, a missing overview):
         * its own buffer for this read, within a quarter of the budget. */
        cf_cog *first = NULL;
        for (int k = 0; k < *ni && !first; k++)
            if (ins[k].warped) first = ins[k].cog;
        /* Charged to the loader's borrow budget (waiting, in turn, while
         * other readers' borrows fill it); a reader holds nothing else of
         * it meanwhile, so the wait ends as theirs finish. */
        cf_status bst = cf__budget_take(&ld->borrow, need, err);
        if (bst != CF_OK) {
            *bad = first;
            if (bst != CF_E_LIMIT) return bst;
            return cf__err(err, CF_E_LIMIT,
                           "source windows of %llu bytes for one patch, above an eighth of "
                           "inflight_bytes (%zu): add overviews or raise inflight_bytes",
                           (unsigned long long)need, ld->o.inflight_bytes);
        }
        *tmp = cf__malloc((size_t)need);
        if (!*tmp) {
            cf__budget_give(&ld->borrow, need);
            *bad = first;
            return cf__err(err, CF_E_NOMEM, "out of memory (%llu bytes of source windows)",
                           (unsigned long long)need);
        }
        *tmp_bytes = need;
        base = *tmp;
    }
    size_t woff = 0;
    for (int k = 0; k < *ni; k++)
        for (size_t c = 0; ins[k].warped && c < ins[k].plan.n; c++) {
            ld_part *q = &parts[ins[k].part0 + (int)c];
            q->dst = base + woff;
            woff += CF__ALIGN16(q->bytes);
        }
    return CF_OK;
}

/* valid_mask: clear `valid` (the sample's P x P plane) where input `in`
 * (read as it lies, part q) has no data: outside its file, its internal
 * mask, its nodata in any band. */
static cf_status direct_valid(const cf_loader *ld, const ld_input *in, const ld_part *q,
                              uint8_t *valid, cf_error *err) {
    const cf__tiff *t = in->cog->tiff;
    CF__TRY(cf__valid_window(in->cog, q->level, q->x, q->y, q->w, q->h, valid, err));
    if (t->has_nodata) cf__valid_nodata(valid, in->dst, in->dt, in->nb, ld->plane, t->nodata);
    return CF_OK;
}

/* A scene mask read: its invalid classes are no data of its scene. */
static void scene_classes(const cf_loader *ld, const ld_input *in) {
    cf__valid_classes(in->vplane, in->dst, in->dt, ld->plane, ld->classes,
                      ld->o.ninvalid_classes);
}

/* Resample the warped inputs of a group from their source windows (read)
 * into their blocks: GDAL's warp, as cog.read(grid=...) computes it.
 * Each input's validity, where wanted, is AND-ed into its vplane; a
 * warped one's is built in the reader's scratch first. */
static cf_status finish_inputs(const cf_loader *ld, ld_worker *wk, ld_input *ins, int ni,
                               const ld_part *parts, cf_cog **bad, cf_error *err) {
    for (int i = 0; i < ni; i++) {
        ld_input *in = &ins[i];
        uint8_t *iv = in->vplane ? wk->scratch + ld->valid_off : NULL;
        cf_status st = CF_OK;
        if (!in->warped) {
            if (iv) st = direct_valid(ld, in, &parts[in->part0], in->vplane, err);
            if (st != CF_OK) {
                *bad = in->cog;
                return st;
            }
            if (in->classes) scene_classes(ld, in);
            continue;
        }
        cf__grid_fill(in->dst, (size_t)in->nb * ld->plane, in->dt, in->plan.fill);
        /* With a target nodata the warper moves every value it computes
         * off it, so the output itself says where it wrote (below);
         * without one, the sources' validity is warped, chunk by chunk,
         * into a plane of 0s. */
        const int warp_valid = iv && !in->plan.out.has_nodata;
        if (warp_valid) memset(iv, 0, ld->plane);
        for (size_t k = 0; k < in->plan.n; k++) {
            const ld_part *q = &parts[in->part0 + (int)k];
            uint8_t *mask = NULL;
            if (in->cog->tiff->mask_of_level[q->level] >= 0) {
                /* An internal mask is validity, as for GDAL (a second
                 * request: such files are rare in stacks). */
                size_t npx = (size_t)q->w * q->h;
                mask = cf__malloc(npx);
                st = mask ? cf_cog_read_mask(in->cog, q->level, q->x, q->y, q->w, q->h, mask,
                                             npx, err)
                          : cf__err(err, CF_E_NOMEM, "out of memory");
            }
            if (st == CF_OK)
                st = cf__grid_resample(in->cog, &in->plan, k, q->dst, mask, in->dst,
                                       ld->o.patch_size, err);
            if (st == CF_OK && warp_valid)
                st = cf__grid_resample_valid(in->cog, &in->plan, k, q->dst, mask, iv,
                                             ld->o.patch_size, err);
            free(mask);
            if (st != CF_OK) {
                *bad = in->cog;
                return st;
            }
        }
        if (!iv) continue;
        /* Every band at the target nodata where the warp wrote nothing,
         * or where a band had no valid tap while another had one. */
        if (in->plan.out.has_nodata) {
            memset(iv, 1, ld->plane);
            cf__valid_nodata(iv, in->dst, in->dt, in->nb, ld->plane, in->plan.out.nodata);
        }
        for (size_t k = 0; k < ld->plane; k++) in->vplane[k] &= iv[k];
        if (in->classes) scene_classes(ld, in);
    }
    return CF_OK;
}

/* Mosaic: the later scene just read into mosaic slot `ms` (raw, its
 * validity in the slot's plane) fills the pixels of its step's first
 * scene's block `out` that no scene before it had data for (`filled`,
 * the step's plane). */
static void fill_from_scene(const cf_loader *ld, const ld_worker *wk, int ms, uint8_t *out,
                            uint8_t *filled) {
    const uint8_t *scene = wk->scratch + ld->mosaic_off + (size_t)ms * ld->mosaic_bytes;
    const size_t es = cf_dtype_size(ld->raw_dt), n = ld->plane;
    const uint8_t *sv = wk->scratch + ld->scene_valid_off + (size_t)ms * CF__ALIGN16(n);
    /* Band by band, a constant sample size per loop (the copy becomes a
     * move): a pixel's bands all come from this scene. */
#define FILL(S)                                                                    \
    do {                                                                           \
        for (uint32_t b = 0; b < ld->ci; b++) {                                    \
            uint8_t *o = out + b * n * (S);                                        \
            const uint8_t *sc = scene + b * n * (S);                               \
            for (size_t i = 0; i < n; i++)                                         \
                if (!filled[i] && sv[i]) memcpy(o + i * (S), sc + i * (S), (S));   \
        }                                                                          \
    } while (0)
    switch (es) {
    case 1: FILL(1); break;
    case 2: FILL(2); break;
    case 4: FILL(4); break;
    default: FILL(8); break; /* complex types are refused at open */
    }
#undef FILL
    for (size_t i = 0; i < n; i++) filled[i] |= sv[i];
}

/* Read, convert and augment sample j into position i of slot s. */
cf_status cf__ld_read_sample(cf_loader *ld, ld_worker *wk, ld_slot *s, uint32_t i,
                             uint64_t epoch, uint64_t j, uint64_t *decoded, double *t_read,
                             double *t_conv, cf_error *err) {
    const cf_loader_options *o = &ld->o;
    /* T scenes in, TO time steps out (one per step_scenes of a mosaic). */
    const size_t T = (size_t)o->time_steps, TO = ld->lay_out.time_steps;
    const size_t C = ld->lay_out.channels;
    const uint32_t P = o->patch_size;
    const int f32 = o->out_dtype == CF_DT_F32;
    cf_window w;
    if (cf__sampler_window_at(&ld->samp, epoch, j, &w)) {
        pthread_mutex_lock(&ld->mu);
        ld->st_redrawn++;
        pthread_mutex_unlock(&ld->mu);
    }
    s->windows[i] = w;
    const size_t f = w.file;
    uint8_t *img = s->image + (size_t)i * TO * C * ld->plane * ld->es;
    uint8_t *mask = ld->msk || ld->vl ? s->mask + (size_t)i * ld->plane * ld->mask_es : NULL;
    const size_t VS = ld->valid_steps;
    uint8_t *valid = s->valid ? s->valid + (size_t)i * VS * ld->plane : NULL;
    if (valid) memset(valid, 1, VS * ld->plane);
    /* Mosaic: which pixels each step had data for so far (its first
     * scene's validity, then filled by the later ones), and each later
     * scene's validity. */
    uint8_t *filled = NULL;
    const size_t fstride = CF__ALIGN16(ld->plane);
    if (o->mosaic) {
        filled = wk->scratch + ld->filled_off;
        memset(filled, 1, TO * fstride);
        /* What each step's first scene may reach (sure_read). */
        if (ld->scene_fp && !wk->cov) wk->cov = cf__calloc(TO, sizeof *wk->cov);
        for (size_t t = 0; wk->cov && t < TO; t++)
            wk->cov[t] = cf__fp_points(ld->scene_fp, f, t * ld->step_scenes, w.x, w.y, w.w,
                                       w.h);
    }
    /* The parts: image members (raw into the slot, or into scratch when
     * converted to float32), then the mask, each on the sample's target
     * grid.  They go out together, up to LD_PART_CHUNKS parts at a time (a
     * long time series takes several groups). */
    const int nall = ld->nmembers + (ld->msk != NULL);
    if (ld->ndeclared) open_ahead(ld, f, &w);
    ld_part parts[LD_PART_CHUNKS];
    ld_input ins[LD_PART_CHUNKS];
    cf_status st = CF_OK;
    cf_cog *bad = NULL;
    double t0 = cf__now();
    for (int g = 0; g < nall && st == CF_OK;) {
        int np, ni, used;
        uint8_t *tmp = NULL;
        uint64_t tmp_bytes = 0;
        st = place_inputs(ld, wk, f, &w, g, nall, img, mask, valid, parts, &np, ins, &ni, &used,
                          &tmp, &tmp_bytes, &bad, err);
        if (st == CF_OK && np) wk->rounds++;
        if (st == CF_OK && o->sampler != CF_SAMPLER_TILE_SHUFFLE) {
            st = read_parts(ld, wk, parts, np, &bad, err);
            for (int k = 0; k < np && st == CF_OK; k++) *decoded += parts[k].bytes;
        } else {
            for (int k = 0; k < np && st == CF_OK; k++) {
                const ld_part *p = &parts[k];
                /* The shuffle cache holds cells of the loader's level,
                 * on the image's own pixels. */
                if (p->level == o->level && p->x == w.x && p->y == w.y)
                    st = read_block(ld, wk, &parts[k], &w, decoded, &bad, err);
                else if ((st = read_parts(ld, wk, &parts[k], 1, &bad, err)) == CF_OK)
                    *decoded += p->bytes;
            }
        }
        if (st == CF_OK) st = finish_inputs(ld, wk, ins, ni, parts, &bad, err);
        /* The later scenes read (with their scene masks: both in this
         * group) fill their steps: each into its step's first scene, raw
         * in the slot, or in the scratch (float32 output, converted
         * later). */
        for (int k = 0; k < ni && st == CF_OK; k++) {
            if (!ins[k].fill) continue;
            const size_t t = (size_t)ins[k].step;
            const ld_member *fm = &ld->members[t * (size_t)(1 + o->nlayers + ld->has_scm)];
            uint8_t *first = f32 ? wk->scratch + fm->soff : img + t * C * ld->plane * ld->es;
            fill_from_scene(ld, wk, ins[k].slot, first, filled + t * fstride);
        }
        for (int k = 0; k < ni; k++)
            if (ins[k].warped) cf__grid_plan_free(&ins[k].plan);
        free(tmp);
        if (tmp) cf__budget_give(&ld->borrow, tmp_bytes);
        g += used;
    }
    *t_read += cf__now() - t0;
    /* The file whose read failed; the sample's image if none was named. */
    if (st != CF_OK)
        return cf__err_prefix(err, st,
                              "loader: sample %llu (%s, window %lld,%lld,%u,%u)",
                              (unsigned long long)w.index,
                              cf_cog_name(bad ? bad : ld->img[f * T]),
                              (long long)w.x, (long long)w.y, w.w, w.h);
    /* A mosaic's pixels no scene had data for are not valid (with one
     * plane for all steps: in any step). */
    for (size_t t = 0; valid && filled && t < TO; t++) {
        uint8_t *v = valid + (VS > 1 ? t * ld->plane : 0);
        const uint8_t *fl = filled + t * fstride;
        for (size_t k = 0; k < ld->plane; k++) v[k] &= fl[k];
    }
    if (ld->vl) {
        /* labels from polygons: burnt on the patch's target grid */
        cf_grid pg;
        st = cf__sg_window_grid(ld->sg, f, w.x, w.y, P, P, &pg, err);
        if (st == CF_OK)
            st = cf_vlabels_rasterize(ld->vl, &pg, ld->lay_out.mask_dtype, mask, NULL, err);
        if (st != CF_OK)
            return cf__err_prefix(err, st, "loader: sample %llu (%s, window %lld,%lld): labels",
                                  (unsigned long long)w.index, cf_cog_name(ld->img[f * T]),
                                  (long long)w.x, (long long)w.y);
    }
    double t2 = cf__now();
    for (int m = 0; f32 && m < ld->nmembers; m++) {
        const ld_member *mb = &ld->members[m];
        if (!cf__ld_member_output(ld, mb)) continue;
        convert_member(ld, mb, member_cog(ld, f, mb), wk->scratch + mb->soff,
                       img + ((size_t)mb->step * C + mb->channel) * ld->plane * ld->es);
    }
    if (w.aug) {
        for (size_t p = 0; p < TO * C; p++)
            cf__augment_plane(img + p * ld->plane * ld->es, ld->es, P, w.aug,
                          wk->scratch);
        if (mask) cf__augment_plane(mask, ld->mask_es, P, w.aug, wk->scratch);
        for (size_t v = 0; valid && v < VS; v++)
            cf__augment_plane(valid + v * ld->plane, 1, P, w.aug, wk->scratch);
    }
    *t_conv += cf__now() - t2;
    return CF_OK;
}

/* ------------------------------------------------ a member's place */

size_t cf__ld_member_bytes(const cf_loader *ld, const ld_member *m, uint64_t w,
                           uint64_t h) {
    return (size_t)(m->nb * w * h * cf_dtype_size(member_dt(ld, m)));
}

int cf__ld_member_fills(const cf_loader *ld, const ld_member *mb) {
    (void)ld;
    return mb->later && mb->layer == -1;
}

int cf__ld_member_output(const cf_loader *ld, const ld_member *mb) {
    return mb->layer != LD_SCENE_MASK && !cf__ld_member_fills(ld, mb);
}

size_t cf__ld_layer_file(const cf_loader *ld, size_t f, const ld_member *mb) {
    const size_t L = (size_t)ld->o.nlayers;
    const size_t s = ld->o.layers_per_step ? (size_t)mb->step : 0;
    return f * ld->nlf + s * L + (size_t)mb->layer;
}

size_t cf__ld_member_slot(const cf_loader *ld, size_t f, const ld_member *mb) {
    const size_t F = ld->o.nfiles, T = (size_t)ld->o.time_steps;
    const size_t M = ld->msk ? F : 0;
    if (mb->layer == LD_SCENE_MASK) return F * T + M + F * ld->nlf + f * T + (size_t)mb->t;
    if (mb->layer < 0) return f * T + (size_t)mb->t;
    return F * T + M + cf__ld_layer_file(ld, f, mb);
}
