/*
 * io_state.c - the reader's per-io state (see io_state.h) and the codec
 * context pool.
 */
#include "io_state.h"

#include <stdlib.h>

void cf__pool_init(cf_ctx_pool *p) {
    pthread_mutex_init(&p->mu, NULL);
    p->n = 0;
}

void cf__pool_destroy(cf_ctx_pool *p) {
    for (int i = 0; i < p->n; i++) cf_codec_ctx_free(p->idle[i]);
    p->n = 0;
    pthread_mutex_destroy(&p->mu);
}

cf_codec_ctx *cf__pool_get(cf_ctx_pool *p) {
    cf_codec_ctx *ctx = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n > 0) ctx = p->idle[--p->n];
    pthread_mutex_unlock(&p->mu);
    return ctx ? ctx : cf_codec_ctx_new();
}

void cf__pool_put(cf_ctx_pool *p, cf_codec_ctx *ctx) {
    if (!ctx) return;
    pthread_mutex_lock(&p->mu);
    if (p->n < CF__POOL_MAX_IDLE) {
        p->idle[p->n++] = ctx;
        ctx = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    cf_codec_ctx_free(ctx); /* pool full: free it */
}

static void *state_new(void) {
    cf_io_state *s = cf__calloc(1, sizeof *s);
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
    cf_io_state *s = p;
    cf__hc_table_free(atomic_load(&s->hc));
    cf__pool_destroy(&s->pool);
    free(s);
}

cf_io_state *cf__io_state(cf_io *io) {
    return cf_io_upper_state(io, state_new, state_free);
}
