/*
 * test_pipeline_chunk_cache.c - the loader's decoded-chunk cache on its
 * own: hits, LRU eviction reusing the evicted buffer, pending claims
 * counted in the budget, readers that miss a chunk together decoding it
 * once, a claimer that fails (its waiters fetch it themselves, a later
 * claim starts afresh), two readers each waiting on a chunk the other
 * claimed (no deadlock when each reads its own claims first), clear /
 * free while a claim is pending, and strips kept with the rows decoded.  Run under TSan by the suite's TSan stage.
 */
#include "cf_test.h"
#include "pipeline/chunk_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The "files": the cache only compares their uids. */
static cf_cog fa = {.uid = 1}, fb = {.uid = 2};
#define FA ((const cf_cog *)&fa)
#define FB ((const cf_cog *)&fb)

static cf__chunk chunk(uint64_t index) {
    cf__chunk c;
    memset(&c, 0, sizeof c);
    c.index = index;
    return c;
}

/* Claim and publish chunk i of f filled with v; 1 if it was claimed. */
static int put_chunk(cf__ccache *cc, const cf_cog *f, uint64_t i, size_t len, uint8_t v) {
    cf__chunk c = chunk(i);
    const uint8_t *d;
    void *h;
    if (cf__cc_claim(cc, f, &c, len, &d, &h) != CF__CC_CLAIMED) return 0;
    uint8_t buf[256];
    memset(buf, v, sizeof buf);
    cf__cc_publish(cc, h, buf);
    return 1;
}

static void test_hits_eviction_reuse(void) {
    cf__ccache *cc = cf__cc_new(100);
    CHECK(put_chunk(cc, FA, 1, 40, 7));
    cf__chunk c = chunk(1);
    const uint8_t *d;
    void *h;
    CHECK(cf__cc_claim(cc, FA, &c, 40, &d, &h) == CF__CC_HIT);
    CHECK(d && d[0] == 7 && d[39] == 7);
    const uint8_t *a_buf = d;
    cf__cc_put(cc, h);
    /* Another file's chunk of the same index is another entry. */
    CHECK(put_chunk(cc, FB, 1, 40, 8));
    /* A third does not fit 100 bytes: the oldest (FA's) goes, and its
     * buffer, of the same size, holds the new chunk (no fresh pages). */
    CHECK(put_chunk(cc, FA, 2, 40, 9));
    c = chunk(2);
    CHECK(cf__cc_claim(cc, FA, &c, 40, &d, &h) == CF__CC_HIT);
    CHECK(d == a_buf && d[0] == 9);
    cf__cc_put(cc, h);
    c = chunk(1);
    CHECK(cf__cc_claim(cc, FA, &c, 40, &d, &h) == CF__CC_CLAIMED); /* evicted */
    cf__cc_abandon(cc, h);
    uint64_t hits, misses;
    size_t used, peak;
    cf__cc_stats(cc, &hits, &misses, &used, &peak);
    CHECK(hits == 2 && misses == 4);
    CHECK(used <= 100 && peak == 80);
    /* Above the whole budget: nothing kept, nothing claimed. */
    c = chunk(3);
    CHECK(cf__cc_claim(cc, FA, &c, 101, &d, &h) == CF__CC_NONE && !h);
    cf__cc_free(cc, 1);
}

static void test_pending_counts_in_budget(void) {
    cf__ccache *cc = cf__cc_new(100);
    cf__chunk c1 = chunk(1), c2 = chunk(2);
    const uint8_t *d;
    void *h1, *h2;
    CHECK(cf__cc_claim(cc, FA, &c1, 60, &d, &h1) == CF__CC_CLAIMED);
    size_t used, peak;
    uint64_t hits, misses;
    cf__cc_stats(cc, &hits, &misses, &used, &peak);
    CHECK(used == 60);
    /* The pending 60 bytes are pinned: no room for 60 more. */
    CHECK(cf__cc_claim(cc, FA, &c2, 60, &d, &h2) == CF__CC_NONE);
    /* Clear leaves a pending entry to its claimer. */
    cf__cc_clear(cc);
    uint8_t buf[60];
    memset(buf, 3, sizeof buf);
    cf__cc_publish(cc, h1, buf);
    CHECK(cf__cc_claim(cc, FA, &c1, 60, &d, &h1) == CF__CC_HIT && d[59] == 3);
    cf__cc_put(cc, h1);
    /* Abandoned: out of the budget, and the next claim starts afresh. */
    CHECK(cf__cc_claim(cc, FA, &c2, 40, &d, &h2) == CF__CC_CLAIMED);
    cf__cc_abandon(cc, h2);
    cf__cc_stats(cc, &hits, &misses, &used, &peak);
    CHECK(used == 60);
    CHECK(cf__cc_claim(cc, FA, &c2, 40, &d, &h2) == CF__CC_CLAIMED);
    cf__cc_publish(cc, h2, buf);
    cf__cc_free(cc, 1);
}

/* Readers that miss chunk 5 together: one decodes, the others wait. */
typedef struct shared_run {
    cf__ccache *cc;
    pthread_mutex_t mu;
    int decodes, served, failed, fail_claimer;
    pthread_barrier_t go;
} shared_run;

static void *reader(void *arg) {
    shared_run *r = arg;
    cf__chunk c = chunk(5);
    const uint8_t *d;
    void *h;
    pthread_barrier_wait(&r->go);
    cf__cc_found f = cf__cc_claim(r->cc, FA, &c, 64, &d, &h);
    if (f == CF__CC_CLAIMED) {
        pthread_mutex_lock(&r->mu);
        r->decodes++;
        pthread_mutex_unlock(&r->mu);
        usleep(50000); /* the others arrive meanwhile (not required) */
        if (r->fail_claimer) {
            cf__cc_abandon(r->cc, h);
            return NULL;
        }
        uint8_t buf[64];
        memset(buf, 42, sizeof buf);
        cf__cc_publish(r->cc, h, buf);
        return NULL;
    }
    int ok = 0, gave_up = 0;
    if (f == CF__CC_WAIT) {
        d = cf__cc_wait(r->cc, h);
        ok = d && d[0] == 42 && d[63] == 42;
        gave_up = !d;
        cf__cc_put(r->cc, h);
    } else if (f == CF__CC_HIT) {
        ok = d[0] == 42;
        cf__cc_put(r->cc, h);
    }
    pthread_mutex_lock(&r->mu);
    r->served += ok;
    r->failed += gave_up;
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void run_shared(int fail_claimer, shared_run *r) {
    enum { N = 6 };
    memset(r, 0, sizeof *r);
    r->cc = cf__cc_new(1 << 20);
    r->fail_claimer = fail_claimer;
    pthread_mutex_init(&r->mu, NULL);
    pthread_barrier_init(&r->go, NULL, N);
    pthread_t th[N];
    for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, reader, r);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r->go);
    pthread_mutex_destroy(&r->mu);
}

static void test_one_decode(void) {
    shared_run r;
    run_shared(0, &r);
    CHECK(r.decodes == 1);
    CHECK(r.served == 5);
    cf__cc_free(r.cc, 1);
    /* The claimer fails: each waiter is told (it fetches the chunk itself,
     * with its own retries), none is served stale or empty bytes, and the
     * chunk can be claimed again. */
    run_shared(1, &r);
    CHECK(r.decodes >= 1); /* a late reader may claim it after the abandon */
    CHECK(r.served == 0);
    CHECK(r.failed + r.decodes - 1 == 5);
    uint64_t hits, misses;
    size_t used, peak;
    cf__cc_stats(r.cc, &hits, &misses, &used, &peak);
    CHECK(used == 0 && hits == 0);
    cf__chunk c = chunk(5);
    const uint8_t *d;
    void *h;
    cf__cc_found f = cf__cc_claim(r.cc, FA, &c, 64, &d, &h);
    CHECK(f == CF__CC_CLAIMED);
    if (f == CF__CC_CLAIMED) cf__cc_abandon(r.cc, h);
    cf__cc_free(r.cc, 1);
}

/* Two readers, each needing chunks 1 and 2, claim one each: following the
 * rule (read your own claims, then wait on the others'), both finish. */
typedef struct cross {
    cf__ccache *cc;
    pthread_barrier_t claimed, looked;
    int ok[2];
} cross;

typedef struct cross_arg {
    cross *x;
    int me;
} cross_arg;

static void *cross_reader(void *arg) {
    cross_arg *a = arg;
    cross *x = a->x;
    cf__chunk mine = chunk((uint64_t)a->me + 1), theirs = chunk((uint64_t)(1 - a->me) + 1);
    const uint8_t *d;
    void *hm, *ht;
    cf__cc_found f = cf__cc_claim(x->cc, FA, &mine, 32, &d, &hm);
    pthread_barrier_wait(&x->claimed); /* both hold a claim */
    cf__cc_found g = cf__cc_claim(x->cc, FA, &theirs, 32, &d, &ht);
    int ok = f == CF__CC_CLAIMED && g == CF__CC_WAIT;
    pthread_barrier_wait(&x->looked); /* each waits on the other's */
    uint8_t buf[32];
    memset(buf, 10 + a->me, sizeof buf);
    cf__cc_publish(x->cc, hm, buf); /* own claims first */
    d = cf__cc_wait(x->cc, ht);
    ok = ok && d && d[0] == 10 + (1 - a->me);
    cf__cc_put(x->cc, ht);
    x->ok[a->me] = ok;
    return NULL;
}

static void test_cross_claims(void) {
    cross x;
    memset(&x, 0, sizeof x);
    x.cc = cf__cc_new(1 << 20);
    pthread_barrier_init(&x.claimed, NULL, 2);
    pthread_barrier_init(&x.looked, NULL, 2);
    pthread_t th[2];
    cross_arg a[2] = {{&x, 0}, {&x, 1}};
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, cross_reader, &a[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(x.ok[0] && x.ok[1]);
    pthread_barrier_destroy(&x.claimed);
    pthread_barrier_destroy(&x.looked);
    cf__cc_free(x.cc, 1);
}

/* A reader waits on a pending claim while the loader is closed (clear)
 * and the claimer's fetch is cancelled (abandon): the waiter wakes, told
 * to read it itself. */
typedef struct closing {
    cf__ccache *cc;
    void *h;
    int woke, got_null;
} closing;

static void *close_waiter(void *arg) {
    closing *z = arg;
    const uint8_t *d = cf__cc_wait(z->cc, z->h);
    z->got_null = d == NULL;
    cf__cc_put(z->cc, z->h);
    z->woke = 1;
    return NULL;
}

static void test_close_while_pending(void) {
    closing z;
    memset(&z, 0, sizeof z);
    z.cc = cf__cc_new(1 << 20);
    cf__chunk c = chunk(9);
    const uint8_t *d;
    void *claim;
    CHECK(cf__cc_claim(z.cc, FA, &c, 16, &d, &claim) == CF__CC_CLAIMED);
    CHECK(cf__cc_claim(z.cc, FA, &c, 16, &d, &z.h) == CF__CC_WAIT);
    pthread_t th;
    pthread_create(&th, NULL, close_waiter, &z);
    usleep(20000);
    cf__cc_clear(z.cc); /* returns at once: pending entries stay */
    cf__cc_abandon(z.cc, claim);
    pthread_join(th, NULL);
    CHECK(z.woke && z.got_null);
    /* A forked child frees a cache with a pending claim (its claimer
     * thread does not exist there) without waiting. */
    CHECK(cf__cc_claim(z.cc, FA, &c, 16, &d, &claim) == CF__CC_CLAIMED);
    cf__cc_free(z.cc, 0);
}

/* Strips decoded down to a window's last row: an entry records its rows;
 * a reader needing fewer gets it, one needing more replaces it when idle
 * (and is told to decode the whole strip) or, when it is in use or still
 * pending, decodes without the cache. */
static void test_partial_rows(void) {
    cf__ccache *cc = cf__cc_new(1000);
    cf__chunk c = chunk(3);
    const uint8_t *d;
    void *h, *h2;
    uint32_t rows = 4; /* 4 of 10 rows of 10 bytes */
    CHECK(cf__cc_claim_rows(cc, FA, &c, 10, 3, 10, &rows, &d, &h) == CF__CC_CLAIMED);
    CHECK(rows == 4);
    /* pending with 4 rows: a reader needing 6 does not wait for it */
    rows = 6;
    CHECK(cf__cc_claim_rows(cc, FA, &c, 10, 6, 10, &rows, &d, &h2) == CF__CC_NONE);
    /* one needing 2 waits for it */
    rows = 2;
    CHECK(cf__cc_claim_rows(cc, FA, &c, 10, 2, 10, &rows, &d, &h2) == CF__CC_WAIT);
    CHECK(rows == 4);
    uint8_t buf[100];
    memset(buf, 5, sizeof buf);
    cf__cc_publish(cc, h, buf);
    d = cf__cc_wait(cc, h2);
    CHECK(d && d[39] == 5);
    uint64_t hits, misses;
    size_t used, peak;
    cf__cc_stats(cc, &hits, &misses, &used, &peak);
    CHECK(used == 40);
    /* in use (h2 pinned): a reader needing 8 rows decodes on its own */
    rows = 8;
    CHECK(cf__cc_claim_rows(cc, FA, &c, 10, 8, 10, &rows, &d, &h) == CF__CC_NONE);
    cf__cc_put(cc, h2);
    /* idle: replaced, and the whole strip is the claimer's to decode */
    rows = 8;
    CHECK(cf__cc_claim_rows(cc, FA, &c, 10, 8, 10, &rows, &d, &h) == CF__CC_CLAIMED);
    CHECK(rows == 10);
    cf__cc_stats(cc, &hits, &misses, &used, &peak);
    CHECK(used == 100);
    memset(buf, 6, sizeof buf);
    cf__cc_publish(cc, h, buf);
    rows = 9;
    CHECK(cf__cc_claim_rows(cc, FA, &c, 10, 10, 10, &rows, &d, &h) == CF__CC_HIT);
    CHECK(rows == 10 && d[99] == 6);
    cf__cc_put(cc, h);
    cf__cc_free(cc, 1);
}

int main(void) {
    test_hits_eviction_reuse();
    test_pending_counts_in_budget();
    test_one_decode();
    test_cross_claims();
    test_close_while_pending();
    test_partial_rows();
    return CF_TEST_END();
}
