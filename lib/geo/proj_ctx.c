/*
 * proj_ctx.c - the pool of PROJ contexts every PROJ call borrows one from.
 *
 * PROJ contexts are not thread-safe and each opens its own proj.db handle
 * on first use (~30 ms), so neither "one per call" nor "one per reader
 * thread" is right: a pool hands a context to one thread for one piece of
 * work and takes it back.  The pool holds at most as many contexts as were
 * ever in use at once.  It is process-wide because the contexts are a
 * cache of database handles, not state anyone observes; fork() leaves the
 * parent's contexts to the parent (a child starts empty and never closes
 * them: SQLite handles must not be used across fork).
 *
 * PROJ's network access (grids fetched from its CDN, a cache database
 * written in the home folder) is off in every context whatever
 * PROJ_NETWORK says: which grids a transformation wants depends on the
 * CRS a file names, and a file must not make the process reach a server
 * or write to disk.  The user turns it on with COGFEED_PROJ_NETWORK=ON,
 * read each time a context is lent, so that setting it late still works.
 */
#include "geo_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define POOL_MAX 64

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static PJ_CONTEXT *pool[POOL_MAX];
static int pool_n;
static pid_t pool_pid;

static void quiet(void *data, int level, const char *msg) {
    (void)data;
    (void)level;
    (void)msg;
}

int cf__proj_network_wanted(void) {
    const char *v = getenv("COGFEED_PROJ_NETWORK");
    return v && (!strcasecmp(v, "ON") || !strcasecmp(v, "YES") ||
                 !strcasecmp(v, "TRUE") || !strcmp(v, "1"));
}

PJ_CONTEXT *cf__proj_get(void) {
    PJ_CONTEXT *ctx = NULL;
    pthread_mutex_lock(&pool_mu);
    pid_t me = getpid();
    if (pool_pid != me) {
        /* A forked child: the parent's contexts are not ours to use. */
        pool_n = 0;
        pool_pid = me;
    }
    if (pool_n > 0) ctx = pool[--pool_n];
    pthread_mutex_unlock(&pool_mu);
    if (!ctx) {
        ctx = proj_context_create();
        if (ctx) proj_log_func(ctx, NULL, quiet);
    }
    if (ctx) proj_context_set_enable_network(ctx, cf__proj_network_wanted());
    return ctx;
}

void cf__proj_put(PJ_CONTEXT *ctx) {
    if (!ctx) return;
    pthread_mutex_lock(&pool_mu);
    int mine = pool_pid == getpid(), keep = mine && pool_n < POOL_MAX;
    if (keep) pool[pool_n++] = ctx;
    pthread_mutex_unlock(&pool_mu);
    /* A context from before a fork is left alone (its database handle
     * belongs to the parent); a surplus one is closed. */
    if (mine && !keep) proj_context_destroy(ctx);
}

const char *cf__proj_msg(PJ_CONTEXT *ctx) {
    int e = proj_context_errno(ctx);
    if (!e) return "";
    const char *s = proj_context_errno_string(ctx, e);
    return s ? s : "";
}
