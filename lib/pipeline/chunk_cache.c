/*
 * chunk_cache.c - decoded chunks kept for the next patches, and shared by
 * the readers that miss them together (chunk_cache.h): a hash table of
 * (file, IFD, chunk index) over a doubly linked LRU list, under one mutex
 * (lookups are a hash and a few pointer moves; the copy in and the paste
 * out happen outside it, the entry pinned).  Waiters of pending entries
 * sleep on one condition variable, woken only when an entry they wait on
 * settles.
 */
#include "chunk_cache.h"
#include "loader_options.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CC_BUCKETS 4096

typedef enum cc_state {
    CC_PENDING, /* claimed, being fetched and decoded; in the table */
    CC_READY,   /* data holds the chunk; in the table */
    CC_FAILED   /* abandoned: out of the table, freed by its last ref */
} cc_state;

typedef struct cc_ent {
    uint64_t uid;               /* the file's cf_cog uid (never reused, so a
                                   closed file's entries are never met by
                                   another file: they age out) */
    int ifd;
    uint64_t index;
    uint32_t rows;              /* rows of the chunk held, from its top (a
                                   strip decoded only as far as a window
                                   needed); the whole chunk otherwise */
    cc_state state;
    uint8_t *data;              /* len bytes once READY (NULL while PENDING
                                   unless an evicted buffer was reused) */
    size_t len;                 /* counted in used while in the table */
    int refs;                   /* pins: readers, the claimer, waiters */
    int waiters;                /* in cf__cc_wait on it */
    struct cc_ent *hnext;       /* hash chain */
    struct cc_ent *prev, *next; /* LRU: most recent at head */
} cc_ent;

struct cf__ccache {
    pthread_mutex_t mu;
    pthread_cond_t settled; /* a pending entry with waiters settled */
    size_t cap, used, peak;
    cc_ent *table[CC_BUCKETS];
    cc_ent *head, *tail;
    uint64_t hits, misses;
    pid_t pid;              /* the process that made it */
};

cf__ccache *cf__cc_new(size_t cap) {
    cf__ccache *cc = cf__calloc(1, sizeof *cc);
    if (!cc) return NULL;
    pthread_mutex_init(&cc->mu, NULL);
    pthread_cond_init(&cc->settled, NULL);
    cc->cap = cap;
    cc->pid = getpid();
    return cc;
}

pid_t cf__cc_pid(const cf__ccache *cc) { return cc->pid; }

void cf__cc_free(cf__ccache *cc, int lock) {
    if (!cc) return;
    for (cc_ent *e = cc->head, *n; e; e = n) {
        n = e->next;
        free(e->data);
        free(e);
    }
    if (lock) {
        pthread_cond_destroy(&cc->settled);
        pthread_mutex_destroy(&cc->mu);
    }
    free(cc);
}

static size_t bucket(uint64_t uid, int ifd, uint64_t index) {
    uint64_t h = uid * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(unsigned)ifd * 0xC2B2AE3D27D4EB4Full + index * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    return (size_t)(h % CC_BUCKETS);
}

static cc_ent *find(cf__ccache *cc, uint64_t uid, int ifd, uint64_t index) {
    for (cc_ent *e = cc->table[bucket(uid, ifd, index)]; e; e = e->hnext)
        if (e->uid == uid && e->ifd == ifd && e->index == index) return e;
    return NULL;
}

static void unlink_lru(cf__ccache *cc, cc_ent *e) {
    if (e->prev) e->prev->next = e->next;
    else cc->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else cc->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(cf__ccache *cc, cc_ent *e) {
    e->prev = NULL;
    e->next = cc->head;
    if (cc->head) cc->head->prev = e;
    cc->head = e;
    if (!cc->tail) cc->tail = e;
}

/* Take e out of the table and the LRU list (its bytes leave the budget). */
static void unlink_ent(cf__ccache *cc, cc_ent *e) {
    cc_ent **pp = &cc->table[bucket(e->uid, e->ifd, e->index)];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    unlink_lru(cc, e);
    cc->used -= e->len;
}

/* Make room for len more bytes by evicting unpinned entries, oldest
 * first; the first evicted buffer of exactly len bytes goes to *reuse
 * (the caller's, NULL if none).  0: the pinned ones leave no room. */
static int make_room(cf__ccache *cc, size_t len, uint8_t **reuse) {
    *reuse = NULL;
    for (cc_ent *v = cc->tail; cc->used + len > cc->cap;) {
        while (v && v->refs) v = v->prev;
        if (!v) return 0;
        cc_ent *p = v->prev;
        unlink_ent(cc, v);
        if (!*reuse && v->len == len) *reuse = v->data;
        else free(v->data);
        free(v);
        v = p;
    }
    return 1;
}

cf__cc_found cf__cc_claim(cf__ccache *cc, const cf_cog *cog, const cf__chunk *c, size_t len,
                          const uint8_t **data, void **h) {
    uint32_t rows = 1;
    return cf__cc_claim_rows(cc, cog, c, len, 1, 1, &rows, data, h);
}

cf__cc_found cf__cc_claim_rows(cf__ccache *cc, const cf_cog *cog, const cf__chunk *c,
                               size_t row_bytes, uint32_t need, uint32_t full, uint32_t *rows,
                               const uint8_t **data, void **h) {
    *data = NULL;
    *h = NULL;
    /* The record is made before taking the lock (usually needed: a miss). */
    cc_ent *fresh = row_bytes && row_bytes <= cc->cap ? cf__calloc(1, sizeof *fresh) : NULL;
    cf__cc_found r = CF__CC_NONE;
    uint8_t *spare = NULL;
    pthread_mutex_lock(&cc->mu);
    cc_ent *e = find(cc, cog->uid, c->ifd, c->index);
    if (e && e->rows < need) {
        /* A strip decoded through fewer rows than this reader needs: an
         * idle one is replaced by the whole strip (a reader that went
         * further down once goes on), one in use is left to its readers
         * (this one decodes without the cache). */
        if (e->state != CC_READY || e->refs) {
            cc->misses++;
            pthread_mutex_unlock(&cc->mu);
            free(fresh);
            return CF__CC_NONE;
        }
        unlink_ent(cc, e);
        free(e->data);
        free(e);
        e = NULL;
        *rows = full;
    }
    if (e) {
        e->refs++;
        unlink_lru(cc, e);
        push_front(cc, e);
        *h = e;
        *rows = e->rows;
        if (e->state == CC_READY) {
            cc->hits++;
            *data = e->data;
            r = CF__CC_HIT;
        } else {
            r = CF__CC_WAIT; /* counted when it settles */
        }
    } else {
        cc->misses++;
        size_t len = (size_t)*rows * row_bytes;
        if (fresh && len <= cc->cap && make_room(cc, len, &spare)) {
            e = fresh;
            fresh = NULL;
            e->uid = cog->uid;
            e->ifd = c->ifd;
            e->index = c->index;
            e->state = CC_PENDING;
            e->len = len;
            e->rows = *rows;
            e->data = spare;
            spare = NULL;
            e->refs = 1; /* the claimer's */
            size_t b = bucket(cog->uid, c->ifd, c->index);
            e->hnext = cc->table[b];
            cc->table[b] = e;
            push_front(cc, e);
            cc->used += len;
            if (cc->used > cc->peak) cc->peak = cc->used;
            *h = e;
            r = CF__CC_CLAIMED;
        }
    }
    pthread_mutex_unlock(&cc->mu);
    free(fresh);
    free(spare);
    return r;
}

/* Drop one pin of e, under the lock; a FAILED entry goes with its last. */
static void unpin(cc_ent *e) {
    if (--e->refs == 0 && e->state == CC_FAILED) {
        free(e->data);
        free(e);
    }
}

void cf__cc_publish(cf__ccache *cc, void *h, const uint8_t *data) {
    cc_ent *e = h;
    /* The entry is the claimer's alone until it is READY: fill it
     * outside the lock. */
    if (!e->data) e->data = cf__malloc(e->len);
    if (!e->data) {
        cf__cc_abandon(cc, h);
        return;
    }
    memcpy(e->data, data, e->len);
    pthread_mutex_lock(&cc->mu);
    e->state = CC_READY;
    if (e->waiters) pthread_cond_broadcast(&cc->settled);
    unpin(e);
    pthread_mutex_unlock(&cc->mu);
}

void cf__cc_abandon(cf__ccache *cc, void *h) {
    cc_ent *e = h;
    pthread_mutex_lock(&cc->mu);
    unlink_ent(cc, e);
    e->state = CC_FAILED;
    if (e->waiters) pthread_cond_broadcast(&cc->settled);
    unpin(e);
    pthread_mutex_unlock(&cc->mu);
}

const uint8_t *cf__cc_wait(cf__ccache *cc, void *h) {
    cc_ent *e = h;
    pthread_mutex_lock(&cc->mu);
    e->waiters++;
    while (e->state == CC_PENDING) pthread_cond_wait(&cc->settled, &cc->mu);
    e->waiters--;
    const uint8_t *d = NULL;
    if (e->state == CC_READY) {
        d = e->data;
        cc->hits++;
    } else {
        cc->misses++;
    }
    pthread_mutex_unlock(&cc->mu);
    return d;
}

void cf__cc_put(cf__ccache *cc, void *h) {
    if (!h) return;
    pthread_mutex_lock(&cc->mu);
    unpin(h);
    pthread_mutex_unlock(&cc->mu);
}

void cf__cc_clear(cf__ccache *cc) {
    pthread_mutex_lock(&cc->mu);
    for (cc_ent *e = cc->head, *n; e; e = n) {
        n = e->next;
        if (!e->refs) {
            unlink_ent(cc, e);
            free(e->data);
            free(e);
        }
    }
    pthread_mutex_unlock(&cc->mu);
}

void cf__cc_stats(cf__ccache *cc, uint64_t *hits, uint64_t *misses, size_t *used, size_t *peak) {
    pthread_mutex_lock(&cc->mu);
    *hits = cc->hits;
    *misses = cc->misses;
    *used = cc->used;
    *peak = cc->peak;
    pthread_mutex_unlock(&cc->mu);
}

/* The cgroup's memory limit (v2, then v1), 0 if none or unreadable. */
static uint64_t cgroup_limit(void) {
    static const char *const files[] = {"/sys/fs/cgroup/memory.max",
                                        "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        FILE *f = fopen(files[i], "r");
        if (!f) continue;
        unsigned long long v = 0;
        int n = fscanf(f, "%llu", &v); /* "max": no limit */
        fclose(f);
        if (n == 1 && v) return v;
    }
    return 0;
}

size_t cf__ld_default_cache_bytes(void) {
    const uint64_t floor = (uint64_t)256 << 20;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    uint64_t lim = cgroup_limit();
    if (lim && (!ram || lim < ram)) ram = lim;
    uint64_t b = ram / 20;
    if (b < floor) b = floor;
    if (b > SIZE_MAX / 2) b = SIZE_MAX / 2;
    return (size_t)b;
}
