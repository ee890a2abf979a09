/*
 * budget.c - byte budgets, fetch buffers and decode kits (see budget.h).
 */
#include "budget.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- the byte semaphore ------------------------------------------------- */

void cf__budget_init(cf__budget *b, uint64_t cap) {
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->cap = cap;
}

void cf__budget_destroy(cf__budget *b, int locks) {
    if (!locks) return;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

static void charge(cf__budget *b, uint64_t n) {
    b->used += n;
    if (b->used > b->peak) b->peak = b->used;
}

cf_status cf__budget_take(cf__budget *b, uint64_t n, cf_error *err) {
    if (n > b->cap)
        return cf__err(err, CF_E_LIMIT, "needs %llu bytes, more than its "
                       "whole budget of %llu",
                       (unsigned long long)n, (unsigned long long)b->cap);
    pthread_mutex_lock(&b->mu);
    uint64_t me = b->ticket++;
    cf_status st = CF_OK;
    for (;;) {
        if (b->abort) {
            st = cf__err(err, CF_E_STATE, "stopped while waiting for memory");
            break;
        }
        if (b->serving == me) {
            if (b->used + n <= b->cap) {
                charge(b, n);
                b->serving++;
                pthread_cond_broadcast(&b->cv);
                break;
            }
            /* First free what is only kept for reuse. */
            uint64_t freed = b->trim ? b->trim(b->trim_user) : 0;
            if (freed) {
                b->used -= freed < b->used ? freed : b->used;
                continue;
            }
        }
        pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}

int cf__budget_try(cf__budget *b, uint64_t n) {
    if (!n) return 1;
    pthread_mutex_lock(&b->mu);
    int ok = !b->abort && b->serving == b->ticket && b->used + n <= b->cap;
    if (ok) charge(b, n);
    pthread_mutex_unlock(&b->mu);
    return ok;
}

void cf__budget_give(cf__budget *b, uint64_t n) {
    if (!n) return;
    pthread_mutex_lock(&b->mu);
    b->used -= n < b->used ? n : b->used;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

void cf__budget_abort(cf__budget *b, int on) {
    pthread_mutex_lock(&b->mu);
    b->abort = on;
    /* Takers that gave up left their tickets unserved: when turned off
     * (no taker is waiting then) the queue starts afresh. */
    if (!on) b->serving = b->ticket;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

void cf__budget_trim(cf__budget *b) {
    pthread_mutex_lock(&b->mu);
    uint64_t freed = b->trim ? b->trim(b->trim_user) : 0;
    b->used -= freed < b->used ? freed : b->used;
    pthread_mutex_unlock(&b->mu);
}

void cf__budget_usage(cf__budget *b, uint64_t *used, uint64_t *peak) {
    pthread_mutex_lock(&b->mu);
    if (used) *used = b->used;
    if (peak) *peak = b->peak;
    pthread_mutex_unlock(&b->mu);
}

cf_status cf__budget_fits(const cf_cog *cog, const cf__chunk *c, int counted,
                          uint64_t fetch_cap, uint64_t decode_cap,
                          const char *who, uint64_t inflight_bytes,
                          cf_error *err) {
    uint64_t dn = cf__kits_need(cog, c);
    if ((!counted || c->len <= fetch_cap) && dn <= decode_cap) return CF_OK;
    char where[128];
    return cf__err(err, CF_E_LIMIT,
                   "%s: %s: %llu compressed bytes and up to %llu to decode "
                   "never fit %s's memory budget (%llu for fetching, %llu for "
                   "decoding, out of inflight_bytes=%llu): raise inflight_bytes",
                   cog->name, cf__cog_chunk_where(cog, c, where, sizeof where),
                   (unsigned long long)c->len, (unsigned long long)dn, who,
                   (unsigned long long)fetch_cap, (unsigned long long)decode_cap,
                   (unsigned long long)inflight_bytes);
}

/* ---- fetch buffers ------------------------------------------------------ */

/* Under b.mu: free every spare (a taker needs their bytes). */
static uint64_t pool_trim(void *user) {
    cf__bufpool *p = user;
    uint64_t freed = 0;
    while (p->nspare) {
        cf__buf *s = &p->spare[--p->nspare];
        freed += s->cap;
        free(s->p);
    }
    return freed;
}

cf_status cf__bufpool_init(cf__bufpool *p, uint64_t cap, int maxspare) {
    memset(p, 0, sizeof *p);
    cf__budget_init(&p->b, cap);
    p->b.trim = pool_trim;
    p->b.trim_user = p;
    p->maxspare = maxspare > 0 ? maxspare : 1;
    p->spare = cf__calloc((size_t)p->maxspare, sizeof *p->spare);
    return p->spare ? CF_OK : CF_E_NOMEM;
}

void cf__bufpool_destroy(cf__bufpool *p, int locks) {
    if (p->spare) pool_trim(p);
    free(p->spare);
    cf__budget_destroy(&p->b, locks);
}

cf_status cf__bufpool_get(cf__bufpool *p, size_t n, cf__buf *out, int *fresh,
                          cf_error *err) {
    *fresh = 0;
    pthread_mutex_lock(&p->b.mu);
    int best = -1;
    for (int i = 0; i < p->nspare; i++)
        if (p->spare[i].cap >= n &&
            (best < 0 || p->spare[i].cap < p->spare[best].cap))
            best = i;
    if (best >= 0) {
        *out = p->spare[best];
        p->spare[best] = p->spare[--p->nspare];
        pthread_mutex_unlock(&p->b.mu);
        return CF_OK;
    }
    pthread_mutex_unlock(&p->b.mu);
    /* A little headroom, so that the next patch, a few KiB larger, can use
     * this buffer again; never past the budget. */
    uint64_t a = (uint64_t)n + n / 8;
    a = (a + 65535) & ~(uint64_t)65535;
    if (a > p->b.cap) a = n;
    CF__TRY(cf__budget_take(&p->b, a, err));
    out->p = cf__malloc((size_t)a);
    if (!out->p) {
        cf__budget_give(&p->b, a);
        return cf__err(err, CF_E_NOMEM, "out of memory (%llu bytes of tiles)",
                       (unsigned long long)a);
    }
    out->cap = (size_t)a;
    *fresh = 1;
    return CF_OK;
}

void cf__bufpool_put(cf__bufpool *p, cf__buf *buf) {
    if (!buf->p) return;
    pthread_mutex_lock(&p->b.mu);
    if (p->nspare < p->maxspare) {
        p->spare[p->nspare++] = *buf;
    } else {
        free(buf->p);
        p->b.used -= buf->cap < p->b.used ? buf->cap : p->b.used;
    }
    /* A waiting taker may now use (or free) these bytes. */
    pthread_cond_broadcast(&p->b.cv);
    pthread_mutex_unlock(&p->b.mu);
    buf->p = NULL;
    buf->cap = 0;
}

/* ---- decode kits -------------------------------------------------------- */

/* Under b.mu: free the contexts of idle kits (taking the kits' lock:
 * b.mu before mu, never the other way round). */
static uint64_t kits_trim(void *user) {
    cf__kits *k = user;
    uint64_t freed = 0;
    pthread_mutex_lock(&k->mu);
    for (int i = 0; i < k->nfree; i++) {
        cf__kit *kit = &k->kit[k->free_idx[i]];
        if (!kit->ctx) continue;
        cf__codec_ctx_free(kit->ctx);
        kit->ctx = NULL;
        freed += kit->charged;
        kit->charged = 0;
    }
    pthread_mutex_unlock(&k->mu);
    return freed;
}

cf_status cf__kits_init(cf__kits *k, int n, uint64_t cap) {
    memset(k, 0, sizeof *k);
    cf__budget_init(&k->b, cap);
    k->b.trim = kits_trim;
    k->b.trim_user = k;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if (n < 1) n = 1;
    k->kit = cf__calloc((size_t)n, sizeof *k->kit);
    k->free_idx = cf__calloc((size_t)n, sizeof *k->free_idx);
    if (!k->kit || !k->free_idx) return CF_E_NOMEM;
    k->n = n;
    /* Kit 0 on top: the same few are reused while the others stay cold. */
    for (int i = 0; i < n; i++) k->free_idx[i] = n - 1 - i;
    k->nfree = n;
    return CF_OK;
}

void cf__kits_destroy(cf__kits *k, int locks) {
    for (int i = 0; k->kit && i < k->n; i++) cf__codec_ctx_free(k->kit[i].ctx);
    free(k->kit);
    free(k->free_idx);
    if (locks) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
    }
    cf__budget_destroy(&k->b, locks);
}

cf__kit *cf__kits_get(cf__kits *k) {
    pthread_mutex_lock(&k->mu);
    while (!k->nfree) pthread_cond_wait(&k->cv, &k->mu);
    cf__kit *kit = &k->kit[k->free_idx[--k->nfree]];
    pthread_mutex_unlock(&k->mu);
    return kit;
}

void cf__kits_put(cf__kits *k, cf__kit *kit) {
    if (!kit) return;
    pthread_mutex_lock(&k->mu);
    k->free_idx[k->nfree++] = (int)(kit - k->kit);
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    /* Its context is idle now: a waiting decode may free it. */
    pthread_mutex_lock(&k->b.mu);
    pthread_cond_broadcast(&k->b.cv);
    pthread_mutex_unlock(&k->b.mu);
}

/* Codec parameters of chunk c and the size of the context's tile buffer
 * cf__cog_decode_chunk asks for (a full-height chunk). */
static uint64_t chunk_tile(const cf_cog *cog, const cf__chunk *c,
                           cf__codec_params *p) {
    cf__cog_chunk_params(cog, c, p);
    cf__codec_params p0 = *p;
    p0.height = cog->tiff->ifds[c->ifd].chunk_h;
    return cf__codec_chunk_bytes(&p0);
}

uint64_t cf__kits_need(const cf_cog *cog, const cf__chunk *c) {
    if (cf__cog_chunk_raw(cog, c)) return 0;
    cf__codec_params p;
    uint64_t tile = chunk_tile(cog, c, &p);
    return cf__codec_ctx_growth(NULL, &p, tile, c->len);
}

cf_status cf__kits_decode(cf__kits *k, cf__kit *kit, cf_cog *cog,
                          const cf__chunk *c, const uint8_t *src, uint32_t rows,
                          const uint8_t **out, cf_error *err) {
    if (cf__cog_chunk_raw(cog, c))
        return cf__cog_decode_chunk(cog, NULL, c, src, UINT32_MAX, out, err);
    cf__codec_params p;
    uint64_t tile = chunk_tile(cog, c, &p);
    uint64_t fresh = cf__codec_ctx_growth(NULL, &p, tile, c->len);
    char where[128];
    if (fresh > k->b.cap)
        return cf__err(err, CF_E_LIMIT,
                       "%s: %s: decoding it needs up to %llu bytes, more than "
                       "the decode budget of %llu (raise inflight_bytes)",
                       cog->name, cf__cog_chunk_where(cog, c, where, sizeof where),
                       (unsigned long long)fresh, (unsigned long long)k->b.cap);
    uint64_t g = cf__codec_ctx_growth(kit->ctx, &p, tile, c->len);
    if (!cf__budget_try(&k->b, g)) {
        /* Wait holding nothing of this budget: this kit's context goes
         * first (it was about to grow anyway). */
        cf__codec_ctx_free(kit->ctx);
        kit->ctx = NULL;
        cf__budget_give(&k->b, kit->charged);
        kit->charged = 0;
        g = fresh;
        cf_status st = cf__budget_take(&k->b, g, err);
        if (st != CF_OK)
            return cf__err_prefix(err, st, "%s: %s", cog->name,
                                  cf__cog_chunk_where(cog, c, where, sizeof where));
    }
    if (!kit->ctx) kit->ctx = cf__codec_ctx_new();
    cf_status st = kit->ctx ? cf__cog_decode_chunk(cog, kit->ctx, c, src, rows, out, err)
                            : cf__err(err, CF_E_NOMEM, "%s: no codec context",
                                      cog->name);
    /* Settle at what the context holds now (cf__codec_ctx_growth bounds
     * it: have >= now; the library's working memory is gone again). */
    uint64_t have = kit->charged + g, now = cf__codec_ctx_bytes(kit->ctx);
    if (now <= have) {
        cf__budget_give(&k->b, have - now);
    } else {
        pthread_mutex_lock(&k->b.mu);
        charge(&k->b, now - have);
        pthread_mutex_unlock(&k->b.mu);
    }
    kit->charged = now;
    return st;
}
