/*
 * test_pipeline_tile_cache.c - the tile-shuffle cache on its own: hits and
 * misses, least-recently-used eviction within the byte budget, cells in
 * use never evicted, the entry bound, failed loads dropped, and a reader
 * waiting for a cell another is loading instead of loading it twice.
 */
#include "cf_test.h"
#include "pipeline/tile_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int A, B, C; /* the "files" (owners) */

static cf__tcache_ent *load(cf__tcache *c, const void *owner, int64_t x, size_t bytes,
                            uint8_t v) {
    int ld = -1;
    cf__tcache_ent *e = cf__tcache_get(c, owner, x, 0, 8, 8, bytes, &ld);
    if (!e || ld != 1) return e;
    uint8_t *buf = malloc(bytes);
    memset(buf, v, bytes);
    cf__tcache_loaded(c, e, buf);
    return e;
}

static void test_hits_and_eviction(void) {
    cf__tcache c;
    cf__tcache_init(&c);
    CHECK(cf__tcache_alloc(&c, 100, 16, NULL) == CF_OK);
    int ld;
    cf__tcache_ent *a = load(&c, &A, 0, 40, 1);
    CHECK(a && a->buf[0] == 1);
    cf__tcache_put(&c, a);
    /* The same cell again: a hit, the same bytes. */
    cf__tcache_ent *a2 = cf__tcache_get(&c, &A, 0, 0, 8, 8, 40, &ld);
    CHECK(a2 == a && ld == 0 && a2->buf[39] == 1);
    cf__tcache_put(&c, a2);
    /* Another file, or another cell of the same file, is another entry. */
    cf__tcache_ent *b = load(&c, &B, 0, 40, 2);
    CHECK(b && b != a);
    cf__tcache_put(&c, b);
    uint64_t hits, misses, used, peak;
    cf__tcache_usage(&c, &hits, &misses, &used, &peak);
    CHECK(hits == 1 && misses == 2 && used == 80 && peak == 80);
    /* 40 more bytes do not fit in 100: A (least recently used) goes, B
     * (used after A's hit) stays. */
    cf__tcache_ent *c1 = load(&c, &C, 0, 40, 3);
    CHECK(c1 != NULL);
    cf__tcache_put(&c, c1);
    cf__tcache_usage(&c, &hits, &misses, &used, &peak);
    CHECK(used == 80 && peak == 80);
    cf__tcache_ent *b2 = cf__tcache_get(&c, &B, 0, 0, 8, 8, 40, &ld);
    CHECK(b2 == b && ld == 0 && b2->buf[0] == 2);
    cf__tcache_put(&c, b2);
    cf__tcache_ent *a3 = cf__tcache_get(&c, &A, 0, 0, 8, 8, 40, &ld);
    CHECK(a3 && ld == 1); /* evicted: loaded again (C goes now) */
    cf__tcache_loaded(&c, a3, calloc(1, 40));
    cf__tcache_put(&c, a3);
    /* Larger than the whole cache: not cached. */
    CHECK(cf__tcache_get(&c, &A, 64, 0, 8, 8, 101, &ld) == NULL && ld == 0);
    cf__tcache_clear(&c);
    cf__tcache_usage(&c, &hits, &misses, &used, &peak);
    CHECK(used == 0);
    cf__tcache_destroy(&c, 1);
}

static void test_in_use_not_evicted(void) {
    cf__tcache c;
    cf__tcache_init(&c);
    CHECK(cf__tcache_alloc(&c, 100, 16, NULL) == CF_OK);
    cf__tcache_ent *a = load(&c, &A, 0, 60, 1);
    int ld;
    /* A is held: 60 + 60 > 100 and nothing idle to evict. */
    CHECK(cf__tcache_get(&c, &B, 0, 0, 8, 8, 60, &ld) == NULL);
    cf__tcache_put(&c, a);
    cf__tcache_ent *b = load(&c, &B, 0, 60, 2);
    CHECK(b != NULL);
    cf__tcache_put(&c, b);
    uint64_t h, m, used, peak;
    cf__tcache_usage(&c, &h, &m, &used, &peak);
    CHECK(used == 60 && peak == 60);
    cf__tcache_destroy(&c, 1);
}

static void test_entry_bound_and_failure(void) {
    cf__tcache c;
    cf__tcache_init(&c);
    CHECK(cf__tcache_alloc(&c, 1000, 2, NULL) == CF_OK);
    cf__tcache_ent *a = load(&c, &A, 0, 10, 1), *b = load(&c, &A, 8, 10, 2);
    int ld;
    CHECK(a && b && cf__tcache_get(&c, &A, 16, 0, 8, 8, 10, &ld) == NULL);
    cf__tcache_put(&c, a);
    cf__tcache_put(&c, b);
    /* Entries are evicted for bytes only: with the table full the cell is
     * read without the cache (4,096 entries hold two sampler groups). */
    CHECK(cf__tcache_get(&c, &C, 0, 0, 8, 8, 10, &ld) == NULL);
    cf__tcache_destroy(&c, 1);
    /* A failed load drops its entry and gives its bytes back. */
    cf__tcache_init(&c);
    CHECK(cf__tcache_alloc(&c, 1000, 2, NULL) == CF_OK);
    cf__tcache_ent *e = cf__tcache_get(&c, &C, 0, 0, 8, 8, 10, &ld);
    CHECK(e && ld == 1);
    cf__tcache_loaded(&c, e, NULL);
    uint64_t h, m, used, peak;
    cf__tcache_usage(&c, &h, &m, &used, &peak);
    CHECK(used == 0 && peak == 10);
    e = cf__tcache_get(&c, &C, 0, 0, 8, 8, 10, &ld);
    CHECK(e && ld == 1); /* not cached: loaded again */
    cf__tcache_loaded(&c, e, calloc(1, 10));
    cf__tcache_put(&c, e);
    cf__tcache_destroy(&c, 1);
    /* Without cf__tcache_alloc nothing is cached. */
    cf__tcache_init(&c);
    CHECK(cf__tcache_get(&c, &A, 0, 0, 8, 8, 1, &ld) == NULL);
    cf__tcache_destroy(&c, 1);
}

typedef struct waiter {
    cf__tcache *c;
    cf__tcache_ent *got;
    int load;
    uint8_t first;
} waiter;

static void *wait_for_cell(void *p) {
    waiter *w = p;
    w->got = cf__tcache_get(w->c, &A, 0, 0, 8, 8, 16, &w->load);
    if (w->got) {
        w->first = w->got->buf[0];
        cf__tcache_put(w->c, w->got);
    }
    return NULL;
}

static void test_waits_for_loader(void) {
    cf__tcache c;
    cf__tcache_init(&c);
    CHECK(cf__tcache_alloc(&c, 100, 4, NULL) == CF_OK);
    int ld;
    cf__tcache_ent *e = cf__tcache_get(&c, &A, 0, 0, 8, 8, 16, &ld);
    CHECK(e && ld == 1);
    waiter w = {&c, NULL, -1, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_for_cell, &w) == 0);
    usleep(20000); /* (any order is correct: the waiter checks the bytes) */
    uint8_t *buf = malloc(16);
    memset(buf, 7, 16);
    cf__tcache_loaded(&c, e, buf);
    cf__tcache_put(&c, e);
    pthread_join(th, NULL);
    CHECK(w.got == e && w.load == 0 && w.first == 7);
    uint64_t h, m, used, peak;
    cf__tcache_usage(&c, &h, &m, &used, &peak);
    CHECK(h == 1 && m == 1);
    cf__tcache_destroy(&c, 1);
}

int main(void) {
    test_hits_and_eviction();
    test_in_use_not_evicted();
    test_entry_bound_and_failure();
    test_waits_for_loader();
    return CF_TEST_END();
}
