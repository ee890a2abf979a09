/*
 * tile_cache.c - the tile-shuffle cache of decoded cells (tile_cache.h).
 * A linear search over at most a few thousand entries: the cache holds
 * two sampler groups of cells, and a search costs far less than a tile.
 */
#include "tile_cache.h"

#include <stdlib.h>

void cf__tcache_init(cf__tcache *c) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

cf_status cf__tcache_alloc(cf__tcache *c, size_t cap, int max_entries, cf_error *err) {
    c->cap = cap;
    c->max = max_entries > 0 ? max_entries : 0;
    if (c->max) {
        c->ents = cf__calloc((size_t)c->max, sizeof *c->ents);
        if (!c->ents) return cf__err(err, CF_E_NOMEM, "loader: tile cache");
    }
    return CF_OK;
}

void cf__tcache_destroy(cf__tcache *c, int locks) {
    for (int i = 0; i < c->n; i++) free(c->ents[i].buf);
    free(c->ents);
    c->ents = NULL;
    c->n = 0;
    if (!locks) return;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static cf__tcache_ent *find(cf__tcache *c, const void *owner, int64_t x, int64_t y,
                            uint32_t w, uint32_t h) {
    for (int i = 0; i < c->n; i++) {
        cf__tcache_ent *e = &c->ents[i];
        if (e->owner == owner && e->x == x && e->y == y && e->w == w && e->h == h)
            return e;
    }
    return NULL;
}

/* Under c->mu: evict least recently used idle cells until `bytes` more
 * fit; 0 when they cannot. */
static int make_room(cf__tcache *c, size_t bytes) {
    while (c->used + bytes > c->cap) {
        cf__tcache_ent *victim = NULL;
        for (int i = 0; i < c->n; i++) {
            cf__tcache_ent *e = &c->ents[i];
            if (e->owner && !e->loading && !e->refs && (!victim || e->lru < victim->lru))
                victim = e;
        }
        if (!victim) return 0;
        free(victim->buf);
        c->used -= victim->bytes;
        memset(victim, 0, sizeof *victim);
    }
    return 1;
}

cf__tcache_ent *cf__tcache_get(cf__tcache *c, const void *owner, int64_t x, int64_t y,
                               uint32_t w, uint32_t h, size_t bytes, int *load) {
    *load = 0;
    if (!c->ents || bytes > c->cap) return NULL;
    pthread_mutex_lock(&c->mu);
    cf__tcache_ent *e;
    while ((e = find(c, owner, x, y, w, h)) && e->loading)
        pthread_cond_wait(&c->cv, &c->mu); /* it may fail and go: look again */
    if (e) {
        e->refs++;
        e->lru = ++c->tick;
        c->hits++;
        pthread_mutex_unlock(&c->mu);
        return e;
    }
    c->misses++;
    if (!make_room(c, bytes)) {
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    for (int i = 0; i < c->n && !e; i++)
        if (!c->ents[i].owner) e = &c->ents[i];
    if (!e && c->n < c->max) e = &c->ents[c->n++];
    if (e) {
        e->owner = owner;
        e->x = x;
        e->y = y;
        e->w = w;
        e->h = h;
        e->bytes = bytes;
        e->loading = 1;
        e->refs = 1;
        e->lru = ++c->tick;
        c->used += bytes;
        if (c->used > c->peak) c->peak = c->used;
        *load = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return e;
}

void cf__tcache_loaded(cf__tcache *c, cf__tcache_ent *e, uint8_t *buf) {
    pthread_mutex_lock(&c->mu);
    if (!buf) {
        c->used -= e->bytes;
        memset(e, 0, sizeof *e);
    } else {
        e->buf = buf;
        e->loading = 0;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void cf__tcache_put(cf__tcache *c, cf__tcache_ent *e) {
    pthread_mutex_lock(&c->mu);
    e->refs--;
    pthread_mutex_unlock(&c->mu);
}

void cf__tcache_clear(cf__tcache *c) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++) free(c->ents[i].buf);
    if (c->ents) memset(c->ents, 0, (size_t)c->n * sizeof *c->ents);
    c->n = 0;
    c->used = 0;
    pthread_mutex_unlock(&c->mu);
}

void cf__tcache_usage(cf__tcache *c, uint64_t *hits, uint64_t *misses, uint64_t *used,
                      uint64_t *peak) {
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    *used = c->used;
    *peak = c->peak;
    pthread_mutex_unlock(&c->mu);
}
