/*
 * chunk_cache.c - decoded chunks kept for the next patches (chunk_cache.h):
 * a hash table of (file, IFD, chunk index) over a doubly linked LRU list,
 * under one mutex (lookups are a hash and a few pointer moves; the copy in
 * and the paste out happen outside it, the entry pinned).
 */
#include "chunk_cache.h"

#include <pthread.h>
#include <stdlib.h>

#define CC_BUCKETS 4096

typedef struct cc_ent {
    const cf_cog *cog;
    int ifd;
    uint64_t index;
    uint8_t *data;
    size_t len;
    int refs;
    struct cc_ent *hnext;      /* hash chain */
    struct cc_ent *prev, *next; /* LRU: most recent at head */
} cc_ent;

struct cf__ccache {
    pthread_mutex_t mu;
    size_t cap, used, peak;
    cc_ent *table[CC_BUCKETS];
    cc_ent *head, *tail;
    uint64_t hits, misses;
};

cf__ccache *cf__cc_new(size_t cap) {
    cf__ccache *cc = cf__calloc(1, sizeof *cc);
    if (!cc) return NULL;
    pthread_mutex_init(&cc->mu, NULL);
    cc->cap = cap;
    return cc;
}

void cf__cc_free(cf__ccache *cc, int lock) {
    if (!cc) return;
    for (cc_ent *e = cc->head, *n; e; e = n) {
        n = e->next;
        free(e->data);
        free(e);
    }
    if (lock) pthread_mutex_destroy(&cc->mu);
    free(cc);
}

static size_t bucket(const cf_cog *cog, int ifd, uint64_t index) {
    uint64_t h = (uint64_t)(uintptr_t)cog * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(unsigned)ifd * 0xC2B2AE3D27D4EB4Full + index * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    return (size_t)(h % CC_BUCKETS);
}

static cc_ent *find(cf__ccache *cc, const cf_cog *cog, int ifd, uint64_t index) {
    for (cc_ent *e = cc->table[bucket(cog, ifd, index)]; e; e = e->hnext)
        if (e->cog == cog && e->ifd == ifd && e->index == index) return e;
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

static void drop(cf__ccache *cc, cc_ent *e) {
    cc_ent **pp = &cc->table[bucket(e->cog, e->ifd, e->index)];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    unlink_lru(cc, e);
    cc->used -= e->len;
    free(e->data);
    free(e);
}

const uint8_t *cf__cc_get(cf__ccache *cc, const cf_cog *cog, const cf_chunk *c, void **h) {
    pthread_mutex_lock(&cc->mu);
    cc_ent *e = find(cc, cog, c->ifd, c->index);
    if (e) {
        e->refs++;
        unlink_lru(cc, e);
        push_front(cc, e);
        cc->hits++;
    } else {
        cc->misses++;
    }
    pthread_mutex_unlock(&cc->mu);
    *h = e;
    return e ? e->data : NULL;
}

void cf__cc_put(cf__ccache *cc, void *h) {
    if (!h) return;
    pthread_mutex_lock(&cc->mu);
    ((cc_ent *)h)->refs--;
    pthread_mutex_unlock(&cc->mu);
}

void cf__cc_add(cf__ccache *cc, const cf_cog *cog, const cf_chunk *c, const uint8_t *data,
                size_t len) {
    if (!len || len > cc->cap) return;
    /* The copy is made before taking the lock (a tile is ~100 KB). */
    uint8_t *copy = cf__malloc(len);
    cc_ent *e = cf__calloc(1, sizeof *e);
    if (!copy || !e) {
        free(copy);
        free(e);
        return;
    }
    memcpy(copy, data, len);
    e->cog = cog;
    e->ifd = c->ifd;
    e->index = c->index;
    e->data = copy;
    e->len = len;
    pthread_mutex_lock(&cc->mu);
    int keep = !find(cc, cog, c->ifd, c->index); /* another reader was first */
    for (cc_ent *v = cc->tail; keep && cc->used + len > cc->cap;) {
        while (v && v->refs) v = v->prev;
        if (!v) {
            keep = 0; /* everything left is pinned */
            break;
        }
        cc_ent *p = v->prev;
        drop(cc, v);
        v = p;
    }
    if (keep) {
        size_t b = bucket(cog, c->ifd, c->index);
        e->hnext = cc->table[b];
        cc->table[b] = e;
        push_front(cc, e);
        cc->used += len;
        if (cc->used > cc->peak) cc->peak = cc->used;
    }
    pthread_mutex_unlock(&cc->mu);
    if (!keep) {
        free(copy);
        free(e);
    }
}

void cf__cc_clear(cf__ccache *cc) {
    pthread_mutex_lock(&cc->mu);
    for (cc_ent *e = cc->head, *n; e; e = n) {
        n = e->next;
        if (!e->refs) drop(cc, e);
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
