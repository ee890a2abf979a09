/*
 * io_state.h - what the reader keeps per cf_io (through the io's slot for
 * the layers above): the header cache and a pool of codec contexts.  The
 * pool lives on the io, not on each file, so that the contexts in use are
 * bounded by how many reads run at once, not by files x threads.
 */
#ifndef CF_IO_STATE_H
#define CF_IO_STATE_H

#include <pthread.h>
#include <stdatomic.h>

#include "../codec/codec.h"
#include "../io/io.h"

/* Idle contexts kept per pool; more are freed when given back. */
#define CF__POOL_MAX_IDLE 64

typedef struct cf__ctx_pool {
    pthread_mutex_t mu;
    cf__codec_ctx *idle[CF__POOL_MAX_IDLE];
    int n;
} cf__ctx_pool;

void cf__pool_init(cf__ctx_pool *p);
void cf__pool_destroy(cf__ctx_pool *p);
/* A context from the pool, or a new one (NULL when out of memory). */
cf__codec_ctx *cf__pool_get(cf__ctx_pool *p);
void cf__pool_put(cf__ctx_pool *p, cf__codec_ctx *ctx);

struct cf__hc_table;
struct cf__ccache;
typedef struct cf__io_state {
    /* This process's header cache (a forked child swaps in its own:
     * header_cache.c). */
    _Atomic(struct cf__hc_table *) hc;
    cf__ctx_pool pool;
    /* Decoded chunks of window reads (cf_io_options.cache_bytes), made on
     * first use; a forked child makes its own (cf__io_read_cache). */
    _Atomic(struct cf__ccache *) cc;
} cf__io_state;

/* The io's state, created on first use; NULL when out of memory. */
cf__io_state *cf__io_state_of(cf_io *io);

/* The io's cache of decoded chunks for window reads, made on first use
 * within cf_io_options.cache_bytes; NULL when that is < 0 or out of
 * memory.  A forked child (a DataLoader's worker) gets a fresh one: the
 * parent's lock may have been copied held; its copy is left alone
 * (copy-on-write pages of the parent's, never freed in the child, so that
 * no thread of the child can meet it freed). */
struct cf__ccache *cf__io_read_cache(cf_io *io);

/* hc_table.c */
struct cf__hc_table *cf__hc_table_new(void);
void cf__hc_table_free(struct cf__hc_table *t);

#endif
