/*
 * test_pipeline_loader_adapt.c - the concurrency controller against
 * simulated storage: reads take `lat` seconds each and cost CPU; the CPU
 * saturates at `cap` samples/s (the knee).  Also throttling (retries) and
 * consumer-bound windows.
 */
#include "cf_test.h"
#include "pipeline/loader_adapt.h"

#include <stdio.h>

/* One window on the simulated storage; returns the new concurrency. */
static int window(cf__adapt *a, double lat, double cap) {
    double rate = a->conc / lat;
    if (rate > cap) rate = cap;
    return cf__adapt_step(a, rate, rate / cap, 0, 0);
}

static void test_finds_the_knee(void) {
    /* knee = cap * lat readers */
    const double caps[] = {20, 120, 300, 5000};
    for (int k = 0; k < 4; k++) {
        cf__adapt a;
        cf__adapt_init(&a, 8, 256);
        int hist[80];
        for (int w = 0; w < 80; w++) hist[w] = window(&a, 0.164, caps[k]);
        double knee = caps[k] * 0.164;
        if (knee > 256) knee = 256;
        /* Settled near the knee: not far below (throughput lost) nor far
         * above (threads and memory wasted). */
        for (int w = 40; w < 80; w++) {
            CHECK(hist[w] >= knee * 0.6 - 1);
            CHECK(hist[w] <= knee * 1.6 + 2);
        }
        /* Latency-bound storage is found fast: 40+ readers within 6
         * windows when the knee is that high. */
        if (knee >= 45) CHECK(hist[5] >= 40);
    }
}

static void test_retries_back_off(void) {
    cf__adapt a;
    cf__adapt_init(&a, 8, 256);
    for (int w = 0; w < 10; w++) window(&a, 0.1, 1e9);
    int before = a.conc;
    CHECK(before > 40);
    int after = cf__adapt_step(&a, a.conc * 10.0, 0.1, 1, 0);
    CHECK(after == before * 3 / 4);
    for (int w = 0; w < 20; w++) cf__adapt_step(&a, 100, 0.1, 1, 0);
    CHECK(a.conc == 1); /* persistent throttling: down to one */
}

static void test_consumer_bound_holds(void) {
    cf__adapt a;
    cf__adapt_init(&a, 8, 64);
    for (int w = 0; w < 20; w++)
        CHECK(cf__adapt_step(&a, 1e6, 0.1, 0, 1) == 8);
}

static void test_bounds(void) {
    cf__adapt a;
    cf__adapt_init(&a, 500, 16);
    CHECK(a.conc == 16);
    for (int w = 0; w < 50; w++) {
        int c = window(&a, 0.1, 1e9);
        CHECK(c >= 1 && c <= 16);
    }
    CHECK(a.conc == 16);
    cf__adapt_init(&a, 0, 0);
    CHECK(a.conc == 1 && a.max_conc == 1);
    CHECK(cf__adapt_step(&a, 0, 1, 0, 0) == 1);
}

int main(void) {
    test_finds_the_knee();
    test_retries_back_off();
    test_consumer_bound_holds();
    test_bounds();
    return CF_TEST_END();
}
