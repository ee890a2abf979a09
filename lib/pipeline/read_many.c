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
 * Memory is bounded: a window's compressed tiles occupy one buffer from
 * submission until its last tile is decoded, and the submitter waits while
 * the buffers in use exceed inflight_bytes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cog_internal.h"

#define RM_MAX_THREADS 256
#define RM_DEFAULT_INFLIGHT ((uint64_t)256 << 20)

typedef struct rm rm;
typedef struct rm_job rm_job;

typedef struct rm_win {
    cf_read_req *req;
    size_t at;                 /* index of req */
    int *bands, nb;
    cf_chunk *chunks;
    size_t nchunks, left;      /* left: chunks not decoded yet (under mu) */
    cf_range_req *rr;
    rm_job *jobs;
    cf_error *errs;            /* one per chunk: completions may race */
    uint8_t *fetched;
    uint64_t total;
    int failed;
} rm_win;

struct rm_job {
    rm_win *win;
    size_t k;                  /* chunk index in win */
    rm_job *next;              /* completion queue */
};

struct rm {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;    /* decoders: a job arrived, or stop */
    pthread_cond_t room_cv;    /* submitter: a window finished */
    rm_job *head, *tail;
    uint64_t inflight, cap;
    size_t busy;               /* windows submitted, not finished */
    int stop;
    cf_status first;           /* first failure, in window order */
    size_t first_at;
    cf_error *err;
};

static void win_free(rm_win *w) {
    free(w->bands);
    free(w->chunks);
    free(w->rr);
    free(w->jobs);
    free(w->errs);
    free(w->fetched);
    memset(w, 0, sizeof *w);
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

static void push(rm *r, rm_job *j) {
    pthread_mutex_lock(&r->mu);
    j->next = NULL;
    if (r->tail)
        r->tail->next = j;
    else
        r->head = j;
    r->tail = j;
    pthread_cond_signal(&r->work_cv);
    pthread_mutex_unlock(&r->mu);
}

/* Runs on an io loop thread (remote) or the submitter (local). */
static void on_fetched(cf_range_req *req, void *user) { push(user, req->user); }

static void *decoder(void *arg) {
    rm *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->head && !r->stop) pthread_cond_wait(&r->work_cv, &r->mu);
        rm_job *j = r->head;
        if (!j) {
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        r->head = j->next;
        if (!r->head) r->tail = NULL;
        pthread_mutex_unlock(&r->mu);

        rm_win *w = j->win;
        cf_read_req *q = w->req;
        cf_chunk *c = &w->chunks[j->k];
        cf_range_req *rr = &w->rr[j->k];
        cf_error *e = &w->errs[j->k];
        cf_status st = w->rr ? rr->status : CF_OK;
        if (st == CF_OK) {
            cf_codec_ctx *ctx = cf__cog_ctx_get(q->cog);
            if (!ctx) {
                st = cf__err(e, CF_E_NOMEM, "%s: out of memory", q->cog->name);
            } else {
                const uint8_t *src = w->rr ? rr->dst : q->cog->mem + c->off;
                st = cf__cog_decode_paste(q->cog, ctx, c, src, q->x, q->y, q->w, q->h,
                                          w->bands, w->nb, q->dst, 1, e);
                cf__cog_ctx_put(q->cog, ctx);
            }
        }
        pthread_mutex_lock(&r->mu);
        if (st != CF_OK && !w->failed) {
            w->failed = 1;
            note_result(r, q, w->at, st, e);
        }
        if (--w->left == 0) {
            r->inflight -= w->total;
            r->busy--;
            win_free(w);
            free(w);
            pthread_cond_broadcast(&r->room_cv);
        }
        pthread_mutex_unlock(&r->mu);
    }
}

/* Set up window i and hand its chunks to the io (or straight to the
 * decoders for in-memory files).  Returns the window's failure, if any,
 * before anything of it was queued. */
static cf_status submit_window(rm *r, cf_read_req *q, size_t i, cf_error *e) {
    cf_cog *cog = q->cog;
    if (!cog || !q->dst) return cf__err(e, CF_E_ARG, "cf_cog_read_many: window %zu: NULL cog or dst", i);
    int all[CF_MAX_BANDS], nb, ifdi;
    uint8_t fill[8];
    cf_status st = cf__cog_prepare_read(cog, q->level, q->x, q->y, q->w, q->h, q->bands,
                                        q->nbands, q->dst_size, all, &nb, &ifdi, fill, e);
    if (st) return st;
    rm_win *w = cf__calloc(1, sizeof *w);
    if (!w) return cf__err(e, CF_E_NOMEM, "%s: out of memory", cog->name);
    w->req = q;
    w->at = i;
    st = cf__cog_window_chunks(cog, ifdi, q->x, q->y, q->w, q->h, all, nb, q->dst, fill,
                               &w->chunks, &w->nchunks, &w->total, e);
    if (st || !w->nchunks) {
        win_free(w);
        free(w);
        return st;
    }
    w->nb = nb;
    w->left = w->nchunks;
    w->bands = cf__malloc((size_t)nb * sizeof *w->bands);
    w->jobs = cf__calloc(w->nchunks, sizeof *w->jobs);
    w->errs = cf__calloc(w->nchunks, sizeof *w->errs);
    if (cog->src) {
        w->rr = cf__calloc(w->nchunks, sizeof *w->rr);
        w->fetched = cf__malloc((size_t)w->total);
    }
    if (!w->bands || !w->jobs || !w->errs || (cog->src && (!w->rr || !w->fetched))) {
        unsigned long long total = w->total;
        win_free(w);
        free(w);
        return cf__err(e, CF_E_NOMEM, "%s: out of memory (%llu bytes of tiles)", cog->name,
                       total);
    }
    memcpy(w->bands, all, (size_t)nb * sizeof *w->bands);
    if (w->rr) {
        cf__cog_chunk_reqs(w->chunks, w->nchunks, w->fetched, w->rr);
        cf__cog_prefault(cog, w->fetched, (size_t)w->total);
    }
    for (size_t k = 0; k < w->nchunks; k++) {
        w->jobs[k].win = w;
        w->jobs[k].k = k;
        if (!w->rr) continue;
        w->rr[k].err = &w->errs[k];
        w->rr[k].user = &w->jobs[k];
    }

    pthread_mutex_lock(&r->mu);
    while (r->busy && r->inflight + w->total > r->cap)
        pthread_cond_wait(&r->room_cv, &r->mu);
    r->inflight += w->total;
    r->busy++;
    pthread_mutex_unlock(&r->mu);

    if (!cog->src) {
        /* The last push may let the decoders finish and free w. */
        size_t nchunks = w->nchunks;
        rm_job *jobs = w->jobs;
        for (size_t k = 0; k < nchunks; k++) push(r, &jobs[k]);
        return CF_OK;
    }
    /* After this call succeeds the window belongs to the decoders (the last
     * one frees it); on failure no callback ran and it is still ours. */
    st = cf_src_submit(cog->src, w->rr, w->nchunks, on_fetched, r, e);
    if (st) {
        pthread_mutex_lock(&r->mu);
        r->inflight -= w->total;
        r->busy--;
        pthread_mutex_unlock(&r->mu);
        win_free(w);
        free(w);
    }
    return st;
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

    pthread_t tid[RM_MAX_THREADS];
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, decoder, &r) != 0) break;
    cf_status st = CF_OK;
    if (!started) {
        st = cf__err(err, CF_E_NOMEM, "cf_cog_read_many: cannot start a decoder thread");
        for (size_t i = 0; i < n; i++) reqs[i].status = st;
    }
    for (size_t i = 0; started && i < n; i++) {
        cf_error e;
        cf__err_clear(&e);
        cf_status s = submit_window(&r, &reqs[i], i, &e);
        if (s != CF_OK) {
            pthread_mutex_lock(&r.mu);
            note_result(&r, &reqs[i], i, s, &e);
            pthread_mutex_unlock(&r.mu);
        }
    }
    pthread_mutex_lock(&r.mu);
    while (r.busy) pthread_cond_wait(&r.room_cv, &r.mu);
    r.stop = 1;
    pthread_cond_broadcast(&r.work_cv);
    pthread_mutex_unlock(&r.mu);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    if (started) st = r.first;
    pthread_cond_destroy(&r.room_cv);
    pthread_cond_destroy(&r.work_cv);
    pthread_mutex_destroy(&r.mu);
    return st;
}
