/*
 * budget.h - byte budgets for the buffers of the loader and of
 * cf_cog_read_many, so that their memory is bounded by an option and never
 * by what a file claims (a 4 KB sparse file whose tiles each "hold" 1 GiB
 * must not make anyone allocate 1 GiB).
 *
 *  - cf__budget: a counting semaphore of bytes.  Takers wait, in the order
 *    they came (a large need is not starved by small ones), instead of
 *    allocating past the cap; before waiting it asks its owner to free
 *    cached memory charged to it (trim).
 *  - cf__bufpool: fetch buffers charged to a budget; given back buffers
 *    are kept for the next taker (no fresh pages per patch) until a taker
 *    needs their bytes.
 *  - cf__kits: codec contexts lent to decoding threads, whose scratch is
 *    charged to a budget of its own: a decode first takes what it may add
 *    (cf__codec_ctx_growth), then settles at what the context holds.  Idle
 *    contexts are freed when a decode needs their bytes.
 *
 * Deadlock freedom: a thread never waits on a budget while holding bytes
 * of that same budget (a decode that must wait first frees its own
 * context), holders of fetch bytes wait only on the separate decode
 * budget, and decodes finish without waiting on fetch bytes.
 */
#ifndef CF_BUDGET_H
#define CF_BUDGET_H

#include <pthread.h>

#include "cog_internal.h"

typedef struct cf__budget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t cap, used, peak;
    uint64_t ticket, serving;  /* FIFO order of takers */
    int abort;                 /* takers give up with CF_E_STATE */
    /* Under mu: free cached memory charged to this budget; returns the
     * bytes freed (it must not call the budget's functions). */
    uint64_t (*trim)(void *user);
    void *trim_user;
} cf__budget;

void cf__budget_init(cf__budget *b, uint64_t cap);
/* locks 0: free the memory only (a forked child, where a lock may have
 * been copied while held); the same for the destroy functions below. */
void cf__budget_destroy(cf__budget *b, int locks);
/* Take n bytes, waiting (in turn) while they do not fit; CF_E_LIMIT when
 * n > cap (never fits), CF_E_STATE once aborted.  err gets a short reason
 * the caller prefixes with the file and tile. */
cf_status cf__budget_take(cf__budget *b, uint64_t n, cf_error *err);
/* Take n bytes only if that needs no wait (no one waiting, room now). */
int cf__budget_try(cf__budget *b, uint64_t n);
void cf__budget_give(cf__budget *b, uint64_t n);
/* Wake every taker with CF_E_STATE (on 1) until turned off again (0). */
void cf__budget_abort(cf__budget *b, int on);
/* Free now what is only cached (trim), e.g. once nobody reads any more. */
void cf__budget_trim(cf__budget *b);
/* used, peak (either may be NULL). */
void cf__budget_usage(cf__budget *b, uint64_t *used, uint64_t *peak);

/* CF_OK when chunk c of cog can fit: its compressed bytes within fetch_cap
 * (when fetched: counted) and its decode within decode_cap; else
 * CF_E_LIMIT naming the file, level and tile, `who` (the loader,
 * cf_cog_read_many) and its inflight_bytes. */
cf_status cf__budget_fits(const cf_cog *cog, const cf__chunk *c, int counted,
                          uint64_t fetch_cap, uint64_t decode_cap,
                          const char *who, uint64_t inflight_bytes,
                          cf_error *err);

/* ---- fetch buffers ---------------------------------------------------- */

typedef struct cf__buf {
    uint8_t *p;
    size_t cap;
} cf__buf;

typedef struct cf__bufpool {
    cf__budget b;
    cf__buf *spare;            /* given back, kept (charged to b) */
    int nspare, maxspare;
} cf__bufpool;

cf_status cf__bufpool_init(cf__bufpool *p, uint64_t cap, int maxspare);
void cf__bufpool_destroy(cf__bufpool *p, int locks);
/* A buffer of at least n bytes charged to the pool's budget (waiting for
 * room); *fresh is 1 when newly allocated (its pages not yet touched). */
cf_status cf__bufpool_get(cf__bufpool *p, size_t n, cf__buf *out, int *fresh,
                          cf_error *err);
/* Give a buffer back (kept as a spare, or freed). */
void cf__bufpool_put(cf__bufpool *p, cf__buf *buf);

/* ---- decode kits ------------------------------------------------------ */

typedef struct cf__kit {
    cf__codec_ctx *ctx;
    uint64_t charged;          /* bytes of b charged for ctx */
} cf__kit;

typedef struct cf__kits {
    cf__budget b;              /* decode scratch */
    pthread_mutex_t mu;        /* the free stack; taken inside b.mu by trim */
    pthread_cond_t cv;
    cf__kit *kit;
    int *free_idx, nfree, n;
} cf__kits;

cf_status cf__kits_init(cf__kits *k, int n, uint64_t cap);
void cf__kits_destroy(cf__kits *k, int locks);
/* A free kit (waits for one); give it back with cf__kits_put. */
cf__kit *cf__kits_get(cf__kits *k);
void cf__kits_put(cf__kits *k, cf__kit *kit);
/* The most a chunk's decode can need from the kits' budget (a new
 * context); 0 for chunks used as fetched (uncompressed, host order). */
uint64_t cf__kits_need(const cf_cog *cog, const cf__chunk *c);
/* Decode chunk c (fetched bytes src; its first `rows` rows, UINT32_MAX:
 * all) with kit, its scratch charged to the kits' budget: *out as
 * cf__cog_decode_chunk.  Errors name the file, the level and the tile
 * (CF_E_LIMIT when the decode can never fit). */
cf_status cf__kits_decode(cf__kits *k, cf__kit *kit, cf_cog *cog,
                          const cf__chunk *c, const uint8_t *src, uint32_t rows,
                          const uint8_t **out, cf_error *err);

#endif
