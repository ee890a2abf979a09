/*
 * io_state.c - the reader's per-io state (see io_state.h) and the codec
 * context pool.
 */
#include "io_state.h"

#include <stdlib.h>
#include <unistd.h>

#include "chunk_cache.h"
#include "loader_options.h"

void cf__pool_init(cf__ctx_pool *p) {
    pthread_mutex_init(&p->mu, NULL);
    p->n = 0;
}

void cf__pool_destroy(cf__ctx_pool *p) {
    for (int i = 0; i < p->n; i++) cf__codec_ctx_free(p->idle[i]);
    p->n = 0;
    pthread_mutex_destroy(&p->mu);
}

cf__codec_ctx *cf__pool_get(cf__ctx_pool *p) {
    cf__codec_ctx *ctx = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n > 0) ctx = p->idle[--p->n];
    pthread_mutex_unlock(&p->mu);
    return ctx ? ctx : cf__codec_ctx_new();
}

void cf__pool_put(cf__ctx_pool *p, cf__codec_ctx *ctx) {
    if (!ctx) return;
    pthread_mutex_lock(&p->mu);
    if (p->n < CF__POOL_MAX_IDLE) {
        p->idle[p->n++] = ctx;
        ctx = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    cf__codec_ctx_free(ctx); /* pool full: free it */
}

static void *state_new(void) {
    cf__io_state *s = cf__calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->hc, cf__hc_table_new());
    if (!atomic_load(&s->hc)) {
        free(s);
        return NULL;
    }
    cf__pool_init(&s->pool);
    return s;
}

static void state_free(void *p) {
    cf__io_state *s = p;
    struct cf__ccache *cc = atomic_load(&s->cc);
    if (cc) cf__cc_free(cc, cf__cc_pid(cc) == getpid());
    cf__hc_table_free(atomic_load(&s->hc));
    cf__pool_destroy(&s->pool);
    free(s);
}

cf__io_state *cf__io_state_of(cf_io *io) {
    return cf__io_upper_state(io, state_new, state_free);
}

struct cf__ccache *cf__io_read_cache(cf_io *io) {
    cf__io_state *s = io ? cf__io_state_of(io) : NULL;
    if (!s) return NULL;
    cf__ccache *cc = atomic_load(&s->cc);
    pid_t me = getpid();
    if (cc && cf__cc_pid(cc) == me) return cc;
    int64_t want = cf__io_opts(io)->cache_bytes;
    if (want < 0) return NULL;
    size_t cap = want ? (size_t)want : cf__ld_default_cache_bytes();
    cf__ccache *fresh = cf__cc_new(cap);
    if (!fresh) return NULL;
    /* The first thread to install one wins; a parent's copy is left (see
     * io_state.h). */
    if (atomic_compare_exchange_strong(&s->cc, &cc, fresh)) return fresh;
    cf__cc_free(fresh, 1);
    return cc;
}
