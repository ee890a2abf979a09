/*
 * read_many.c - many windows at once (cf_cog_read_many).
 *
 * cf_cog_read blocks its thread for a whole round trip, so reading many
 * remote windows that way takes a crowd of threads, each waking to decode
 * one window: on a small machine the crowd's switching and the decoders'
 * competition with the io loop cost more than the decoding.  Here the
 * calling thread requests every window's tiles (remote ones go into flight
 * on their io loops, local ones are read right away), completions are
 * queued, and a pool of one thread per CPU decodes them straight into the
 * windows' buffers in the order they arrive.
 *
 * A tile several windows need (crops of one tile, overlapping windows) is
 * fetched once and decoded once, then pasted into each of them: the
 * windows' tiles are listed first, identical ones (same cog, IFD and
 * chunk) merged, and the tiles requested in the order of the first window
 * that needs them, in batches of neighbours the io can merge into one
 * request.
 *
 * Memory is bounded by inflight_bytes (budget.h): a batch's compressed
 * tiles occupy one buffer from submission until its last tile is decoded,
 * taken from the fetch share (the submitter waits for room before it
 * allocates), and the decoders' codec contexts are charged to the decode
 * share (a quarter at most).  A tile that can never fit fails its windows
 * with CF_E_LIMIT naming the file, level and tile.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "cog_internal.h"

#define RM_MAX_THREADS 256
#define RM_DEFAULT_INFLIGHT ((uint64_t)256 << 20)
#define RM_BATCH_TILES 64      /* tiles per submission (merged by the io) */

typedef struct rm_win {
    cf_read_req *req;
    size_t at;                 /* index of req */
    int *bands, nb;
    size_t left;               /* tiles not pasted yet (under mu) */
    int failed;
} rm_win;

typedef struct rm_batch {
    uint8_t *fetched;
    uint64_t total;
    size_t left;               /* tiles not decoded yet (under mu) */
} rm_batch;

typedef struct rm_tile {
    cf_cog *cog;
    size_t i;                  /* index in chunks / rr / errs */
    rm_win **uses;             /* the windows it is pasted into */
    size_t nuses;
    size_t first;              /* lowest index of those windows */
    uint64_t off;              /* file offset (submission order) */
    rm_batch *batch;           /* NULL: in-memory file */
    struct rm_tile *next;      /* completion queue */
} rm_tile;

/* One (window, tile) need, before identical tiles are merged. */
typedef struct rm_need {
    cf_cog *cog;
    cf__chunk c;
    rm_win *win;
} rm_need;

typedef struct rm {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;    /* decoders: a tile arrived, or stop */
    pthread_cond_t room_cv;    /* submitter: the last tile done */
    rm_tile *head, *tail;
    uint64_t cap;              /* inflight_bytes */
    cf__budget fetch;          /* batches' compressed tiles */
    cf__kits kits;             /* one codec context per decoder */
    size_t pending;            /* tiles not finished */
    int stop;
    cf_status first;           /* first failure, in window order */
    size_t first_at;
    cf_error *err;
    cf__chunk *chunks;          /* per tile, in submission order */
    cf__range_req *rr;
    cf_error *errs;            /* per tile: completions may race */
} rm;

static void win_free(rm_win *w) {
    free(w->bands);
    free(w);
}

/* Under r->mu: record a window's result; the lowest window index wins. */
static void note_result(rm *r, cf_read_req *req, size_t at, cf_status st,
                        const cf_error *e) {
    req->status = st;
    if (st == CF_OK) return;
    if (req->err && e) *req->err = *e;
    if (r->first == CF_OK || at < r->first_at) {
        r->first = st;
        r->first_at = at;
        if (r->err && e) *r->err = *e;
    }
}

/* Under r->mu (or before any thread starts): one of window w's tiles is
 * finished, pasted or failed with st / e; the last one frees w. */
static void win_tile_done(rm *r, rm_win *w, cf_status st, const cf_error *e) {
    if (st != CF_OK && !w->failed) {
        w->failed = 1;
        note_result(r, w->req, w->at, st, e);
    }
    if (--w->left == 0) win_free(w);
}

/* Under r->mu: tile t is finished (pasted, or failed with st / e). */
static void tile_done(rm *r, rm_tile *t, cf_status st, const cf_error *e) {
    for (size_t u = 0; u < t->nuses; u++) win_tile_done(r, t->uses[u], st, e);
    rm_batch *b = t->batch;
    if (b && --b->left == 0) {
        free(b->fetched);
        cf__budget_give(&r->fetch, b->total);
        free(b);
    }
    if (--r->pending == 0) pthread_cond_broadcast(&r->room_cv);
}

static void push(rm *r, rm_tile *t) {
    pthread_mutex_lock(&r->mu);
    t->next = NULL;
    if (r->tail)
        r->tail->next = t;
    else
        r->head = t;
    r->tail = t;
    pthread_cond_signal(&r->work_cv);
    pthread_mutex_unlock(&r->mu);
}

/* Runs on an io loop thread (remote) or the submitter (local). */
static void on_fetched(cf__range_req *req, void *user) { push(user, req->user); }

static void *decoder(void *arg) {
    rm *r = arg;
    cf__thread_name("cf-decode");
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->head && !r->stop) pthread_cond_wait(&r->work_cv, &r->mu);
        rm_tile *t = r->head;
        if (!t) {
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        r->head = t->next;
        if (!r->head) r->tail = NULL;
        pthread_mutex_unlock(&r->mu);

        const cf__chunk *c = &r->chunks[t->i];
        cf_error *e = &r->errs[t->i];
        cf_status st = t->batch ? r->rr[t->i].status : CF_OK;
        if (st != CF_OK) st = cf__cog_fetch_failed(t->cog, st, e);
        if (st == CF_OK) {
            /* A context of this call's own, its scratch charged to the
             * decode share (the io's pool would keep it past the call). */
            cf__kit *kit = cf__kits_get(&r->kits);
            const uint8_t *src = t->batch ? r->rr[t->i].dst : t->cog->mem + c->off;
            const uint8_t *chunk = NULL;
            st = cf__kits_decode(&r->kits, kit, t->cog, c, src, UINT32_MAX, &chunk, e);
            /* Each window gets its own part of the tile: disjoint regions
             * of different buffers, no lock needed. */
            for (size_t u = 0; st == CF_OK && u < t->nuses; u++) {
                const rm_win *w = t->uses[u];
                const cf_read_req *q = w->req;
                cf__cog_paste(t->cog, c, chunk, q->x, q->y, q->w, q->h, w->bands,
                              w->nb, q->dst, 1);
            }
            cf__kits_put(&r->kits, kit);
        }
        pthread_mutex_lock(&r->mu);
        tile_done(r, t, st, e);
        pthread_mutex_unlock(&r->mu);
    }
}

/* Check window i, pre-fill what has no tile, and append its tile needs.
 * Returns the window's failure, if any (then nothing of it was added). */
static cf_status list_window(cf_read_req *q, size_t i, rm_need **needs, size_t *nneeds,
                             size_t *cap, cf_error *e) {
    cf_cog *cog = q->cog;
    if (!cog || !q->dst) return cf__err(e, CF_E_ARG, "cf_cog_read_many: window %zu: NULL cog or dst", i);
    int all[CF_MAX_BANDS], nb, ifdi;
    uint8_t fill[CF__FILL_MAX];
    cf_status st = cf__cog_prepare_read(cog, q->level, q->x, q->y, q->w, q->h, q->bands,
                                        q->nbands, q->dst_size, all, &nb, &ifdi, fill, e);
    CF__TRY(st);
    cf__chunk *chunks = NULL;
    size_t n = 0;
    uint64_t total = 0;
    st = cf__cog_window_chunks(cog, ifdi, q->x, q->y, q->w, q->h, all, nb, q->dst, fill,
                               &chunks, &n, &total, e);
    if (st || !n) {
        free(chunks);
        return st;
    }
    rm_win *w = cf__calloc(1, sizeof *w);
    if (w) w->bands = cf__malloc((size_t)nb * sizeof *w->bands);
    if (*nneeds + n > *cap) {
        size_t nc = (*nneeds + n) * 2;
        rm_need *p = cf__realloc(*needs, nc * sizeof *p);
        if (p) {
            *needs = p;
            *cap = nc;
        }
    }
    if (!w || !w->bands || *nneeds + n > *cap) {
        free(chunks);
        if (w) win_free(w);
        return cf__err(e, CF_E_NOMEM, "%s: out of memory", cog->name);
    }
    memcpy(w->bands, all, (size_t)nb * sizeof *w->bands);
    w->nb = nb;
    w->req = q;
    w->at = i;
    w->left = n;
    for (size_t k = 0; k < n; k++) (*needs)[(*nneeds)++] = (rm_need){cog, chunks[k], w};
    free(chunks);
    return CF_OK;
}

static int same_tile(const rm_need *x, const rm_need *y) {
    return x->cog == y->cog && x->c.ifd == y->c.ifd && x->c.index == y->c.index;
}

/* Needs grouped by tile, each tile's windows in window order. */
static int cmp_need(const void *a, const void *b) {
    const rm_need *x = a, *y = b;
    uintptr_t cx = (uintptr_t)x->cog, cy = (uintptr_t)y->cog;
    if (cx != cy) return cx < cy ? -1 : 1;
    if (x->c.ifd != y->c.ifd) return x->c.ifd < y->c.ifd ? -1 : 1;
    if (x->c.index != y->c.index) return x->c.index < y->c.index ? -1 : 1;
    return x->win->at < y->win->at ? -1 : x->win->at > y->win->at;
}

/* Tiles in the order of the first window needing them; then by file and
 * offset, so that a batch holds neighbours the io can merge. */
static int cmp_tile(const void *a, const void *b) {
    const rm_tile *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    uintptr_t cx = (uintptr_t)x->cog, cy = (uintptr_t)y->cog;
    if (cx != cy) return cx < cy ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Merge identical needs into tiles, ordered for submission: fills
 * r->chunks / rr / errs (tile k's at index k), *tiles and *uses (the
 * tiles' window lists).  CF_E_NOMEM leaves nothing allocated. */
static cf_status plan(rm *r, rm_need *needs, size_t nneeds, rm_tile **tiles_out,
                      size_t *ntiles_out, rm_win ***uses_out) {
    qsort(needs, nneeds, sizeof *needs, cmp_need);
    size_t nt = 0;
    for (size_t k = 0; k < nneeds; k++) nt += !k || !same_tile(&needs[k - 1], &needs[k]);
    rm_tile *tiles = cf__calloc(nt, sizeof *tiles);
    rm_win **uses = cf__calloc(nneeds, sizeof *uses);
    cf__chunk *by_tile = cf__calloc(nt, sizeof *by_tile);
    r->chunks = cf__calloc(nt, sizeof *r->chunks);
    r->rr = cf__calloc(nt, sizeof *r->rr);
    r->errs = cf__calloc(nt, sizeof *r->errs);
    if (!tiles || !uses || !by_tile || !r->chunks || !r->rr || !r->errs) {
        free(tiles);
        free(uses);
        free(by_tile);
        return CF_E_NOMEM; /* r's arrays are freed by the caller */
    }
    size_t t = 0;
    for (size_t k = 0; k < nneeds; k++) {
        const rm_need *n = &needs[k];
        if (k && !same_tile(&needs[k - 1], n)) t++;
        if (!tiles[t].nuses) {
            tiles[t].cog = n->cog;
            tiles[t].i = t;
            tiles[t].uses = &uses[k];
            tiles[t].first = n->win->at;
            tiles[t].off = n->c.off;
            by_tile[t] = n->c;
        }
        uses[k] = n->win;
        tiles[t].nuses++;
    }
    qsort(tiles, nt, sizeof *tiles, cmp_tile);
    for (size_t k = 0; k < nt; k++) {
        r->chunks[k] = by_tile[tiles[k].i];
        tiles[k].i = k;
        r->rr[k].user = &tiles[k];
        r->rr[k].err = &r->errs[k];
    }
    free(by_tile);
    *tiles_out = tiles;
    *ntiles_out = nt;
    *uses_out = uses;
    return CF_OK;
}

/* Tiles [t, end) are finished with st / e (none of them was queued). */
static void fail_tiles(rm *r, rm_tile *tiles, size_t t, size_t end, cf_status st,
                       const cf_error *e) {
    pthread_mutex_lock(&r->mu);
    for (size_t k = t; k < end; k++) tile_done(r, &tiles[k], st, e);
    pthread_mutex_unlock(&r->mu);
}

/* Submit tiles [t, end) of one file (remote or local) as one batch; on
 * failure they are finished with the error (none of them was queued). */
static void submit_batch(rm *r, rm_tile *tiles, size_t t, size_t end, uint64_t total) {
    cf_cog *cog = tiles[t].cog;
    cf_error e;
    cf__err_clear(&e);
    /* Room first (decoders give it back as batches finish), then memory. */
    cf_status st = cf__budget_take(&r->fetch, total, &e);
    if (st) {
        cf__err_prefix(&e, st, "%s", cog->name);
        fail_tiles(r, tiles, t, end, st, &e);
        return;
    }
    rm_batch *b = cf__calloc(1, sizeof *b);
    uint8_t *buf = b ? cf__malloc((size_t)total) : NULL;
    if (!buf) {
        free(b);
        cf__budget_give(&r->fetch, total);
        cf__err(&e, CF_E_NOMEM, "%s: out of memory (%llu bytes of tiles)", cog->name,
                (unsigned long long)total);
        fail_tiles(r, tiles, t, end, CF_E_NOMEM, &e);
        return;
    }
    b->fetched = buf;
    b->total = total;
    b->left = end - t;
    cf__cog_chunk_reqs(&r->chunks[t], end - t, buf, &r->rr[t]);
    cf__cog_prefault(cog, buf, (size_t)total);
    for (size_t k = t; k < end; k++) tiles[k].batch = b;
    /* Once this call succeeds the tiles belong to the decoders (the last
     * one frees the batch); on failure no callback ran. */
    st = cf__src_submit(cog->src, &r->rr[t], end - t, on_fetched, r, &e);
    if (st) fail_tiles(r, tiles, t, end, st, &e);
}

cf_status cf_cog_read_many(cf_read_req *reqs, size_t n, int threads,
                           size_t inflight_bytes, cf_error *err) {
    if (n && !reqs) return cf__err(err, CF_E_ARG, "cf_cog_read_many: NULL reqs");
    if (threads < 0 || threads > RM_MAX_THREADS)
        return cf__err(err, CF_E_ARG, "cf_cog_read_many: threads %d not in [0, %d]",
                       threads, RM_MAX_THREADS);
    if (!n) return CF_OK;
    if (!threads) threads = (int)(cf__ncpu() < RM_MAX_THREADS ? cf__ncpu() : RM_MAX_THREADS);
    rm r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.work_cv, NULL);
    pthread_cond_init(&r.room_cv, NULL);
    r.cap = inflight_bytes ? inflight_bytes : RM_DEFAULT_INFLIGHT;
    r.err = err;
    for (size_t i = 0; i < n; i++) reqs[i].status = CF_OK; /* failures overwrite */

    /* 1. Every window's tiles (windows without any are done here). */
    rm_need *needs = NULL;
    size_t nneeds = 0, cap = 0;
    for (size_t i = 0; i < n; i++) {
        cf_error e;
        cf__err_clear(&e);
        cf_status s = list_window(&reqs[i], i, &needs, &nneeds, &cap, &e);
        if (s != CF_OK) note_result(&r, &reqs[i], i, s, &e);
    }
    /* 2. One tile per distinct chunk, in submission order. */
    rm_tile *tiles = NULL;
    rm_win **uses = NULL;
    size_t nt = 0;
    cf_status st = nneeds ? plan(&r, needs, nneeds, &tiles, &nt, &uses) : CF_OK;
    if (st != CF_OK) {
        cf_error e;
        cf__err(&e, CF_E_NOMEM, "cf_cog_read_many: out of memory (%zu tiles)", nneeds);
        for (size_t k = 0; k < nneeds; k++) win_tile_done(&r, needs[k].win, st, &e);
        nt = 0;
    }
    free(needs);
    r.pending = nt;
    /* The budget: decoding gets at most a quarter (no more than every
     * decoder on the largest tile at once), fetching the rest. */
    uint64_t need = 0;
    for (size_t k = 0; k < nt; k++) {
        uint64_t d = cf__kits_need(tiles[k].cog, &r.chunks[k]);
        if (d > need) need = d;
    }
    uint64_t dec = (uint64_t)threads * need;
    if (dec > r.cap / 4 || dec / (uint64_t)threads != need) dec = r.cap / 4;
    cf__budget_init(&r.fetch, r.cap - dec);
    if (cf__kits_init(&r.kits, threads, dec) != CF_OK) {
        cf_error e;
        cf__err(&e, CF_E_NOMEM, "cf_cog_read_many: out of memory (%d decoders)", threads);
        fail_tiles(&r, tiles, 0, nt, CF_E_NOMEM, &e);
        nt = 0;
    }

    /* 3. Decoders, then the tiles: remote and local ones in batches through
     * their sources, in-memory ones straight to the decoders. */
    pthread_t tid[RM_MAX_THREADS];
    int started = 0;
    for (; nt && started < threads; started++)
        if (pthread_create(&tid[started], NULL, decoder, &r) != 0) break;
    if (nt && !started) {
        cf_error e;
        cf__err(&e, CF_E_NOMEM, "cf_cog_read_many: cannot start a decoder thread");
        for (size_t k = 0; k < nt; k++) tile_done(&r, &tiles[k], CF_E_NOMEM, &e);
    }
    const uint64_t fcap = r.fetch.cap, dcap = r.kits.b.cap;
    for (size_t t = 0; started && t < nt;) {
        cf_cog *cog = tiles[t].cog;
        cf_error e;
        if (cf__budget_fits(cog, &r.chunks[t], cog->src != NULL, fcap, dcap,
                            "cf_cog_read_many", r.cap, &e) != CF_OK) {
            fail_tiles(&r, tiles, t, t + 1, CF_E_LIMIT, &e);
            t++;
            continue;
        }
        if (!cog->src) {
            push(&r, &tiles[t++]);
            continue;
        }
        /* A batch: up to RM_BATCH_TILES tiles of one cog, within half the
         * fetch share (at least one tile), so that batches overlap. */
        size_t end = t + 1;
        uint64_t total = r.chunks[t].len;
        while (end < nt && tiles[end].cog == cog && end - t < RM_BATCH_TILES &&
               total + r.chunks[end].len <= fcap / 2 &&
               cf__budget_fits(cog, &r.chunks[end], 1, fcap, dcap, "", 0, NULL) == CF_OK)
            total += r.chunks[end++].len;
        submit_batch(&r, tiles, t, end, total);
        t = end;
    }
    pthread_mutex_lock(&r.mu);
    while (r.pending) pthread_cond_wait(&r.room_cv, &r.mu);
    r.stop = 1;
    pthread_cond_broadcast(&r.work_cv);
    pthread_mutex_unlock(&r.mu);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    st = r.first;
    cf__kits_destroy(&r.kits, 1);
    cf__budget_destroy(&r.fetch, 1);
    free(tiles);
    free(uses);
    free(r.chunks);
    free(r.rr);
    free(r.errs);
    pthread_cond_destroy(&r.room_cv);
    pthread_cond_destroy(&r.work_cv);
    pthread_mutex_destroy(&r.mu);
    return st;
}
