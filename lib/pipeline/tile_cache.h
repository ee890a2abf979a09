/*
 * tile_cache.h - the tile-shuffle sampler's cache: whole decoded cells
 * (a few tiles of one file), shared by the crops readers cut out of them.
 * Bounded by bytes (`cap`) and by entries; least recently used idle cells
 * are evicted to make room.  A cell being loaded is visible to the other
 * readers, who wait for it instead of reading it twice.  Thread-safe.
 */
#ifndef CF_TILE_CACHE_H
#define CF_TILE_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

typedef struct cf__tcache_ent {
    const void *owner;         /* the file the cell is of; NULL: free */
    int64_t x, y;              /* the cell, in the file's pixels */
    uint32_t w, h;
    uint8_t *buf;              /* bytes of decoded cell, owned */
    size_t bytes;
    int loading, refs;
    uint64_t lru;
} cf__tcache_ent;

typedef struct cf__tcache {
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* a load finished (or failed) */
    cf__tcache_ent *ents;      /* max entries; NULL: no cache */
    int n, max;                /* entries used so far, at most */
    size_t cap, used, peak;    /* bytes */
    uint64_t tick, hits, misses;
} cf__tcache;

/* An empty cache that caches nothing (every get returns NULL) until
 * cf__tcache_alloc gives it at most cap bytes in at most max_entries
 * cells. */
void cf__tcache_init(cf__tcache *c);
cf_status cf__tcache_alloc(cf__tcache *c, size_t cap, int max_entries, cf_error *err);
/* Free the cells and the table; locks 0 (a forked child, whose copy of
 * the lock may be held) leaves the lock alone. */
void cf__tcache_destroy(cf__tcache *c, int locks);

/* The cell (owner, x, y, w, h) of `bytes` bytes, with a reference held.
 * A hit (*load 0) waits while another thread loads it.  A miss (*load 1)
 * reserves an entry and its bytes, evicting idle cells as needed: the
 * caller reads the cell into a buffer of its own (cf__malloc) and hands it
 * over with cf__tcache_loaded.  NULL when the cell cannot fit (larger than
 * the cache, or every cell in use): the caller reads without the cache. */
cf__tcache_ent *cf__tcache_get(cf__tcache *c, const void *owner, int64_t x, int64_t y,
                               uint32_t w, uint32_t h, size_t bytes, int *load);
/* The load of e ended: buf (taken over) holds the cell, or NULL when the
 * load failed (the entry is dropped, with the caller's reference). */
void cf__tcache_loaded(cf__tcache *c, cf__tcache_ent *e, uint8_t *buf);
/* Give back a reference of cf__tcache_get. */
void cf__tcache_put(cf__tcache *c, cf__tcache_ent *e);
/* Free every cell (none may be in use). */
void cf__tcache_clear(cf__tcache *c);
void cf__tcache_usage(cf__tcache *c, uint64_t *hits, uint64_t *misses, uint64_t *used,
                      uint64_t *peak);

#endif
