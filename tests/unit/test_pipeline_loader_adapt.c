/*
 * test_pipeline_loader_adapt.c - the concurrency controller against
 * simulated storage: latency-bound (throughput grows with concurrency up
 * to a knee), throttling (retries), consumer-bound windows.
 */
#include "pipeline/loader_adapt.h"

#include <stdio.h>

static int failures;
#define CHECK(c)                                                             \
    do {                                                                     \
        if (!(c)) {                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #c);                                                     \
            failures++;                                                      \
        }                                                                    \
    } while (0)

/* Throughput of storage whose reads take `lat` s each, until `knee`
 * reads at once saturate the link or the decoder. */
static double storage(int conc, int knee, double lat) {
    return (conc < knee ? conc : knee) / lat;
}

static void test_finds_the_knee(void) {
    const int knees[] = {3, 20, 45, 200};
    for (int k = 0; k < 4; k++) {
        cf__adapt a;
        cf__adapt_init(&a, 8, 128);
        int hist[60];
        for (int w = 0; w < 60; w++)
            hist[w] = cf__adapt_step(&a, storage(a.conc, knees[k], 0.164), 0,
                                     0);
        int knee = knees[k] < 128 ? knees[k] : 128;
        /* After settling, it stays close to the knee: never far below
         * (throughput lost) nor far above (threads wasted). */
        for (int w = 30; w < 60; w++) {
            CHECK(hist[w] >= knee * 3 / 4 - 1);
            CHECK(hist[w] <= knee * 3 / 2 + 2);
        }
        /* Slow start: latency-bound storage reaches 40+ in a few windows. */
        if (knees[k] >= 45) CHECK(hist[5] >= 40);
    }
}

static void test_retries_back_off(void) {
    cf__adapt a;
    cf__adapt_init(&a, 8, 256);
    for (int w = 0; w < 10; w++) cf__adapt_step(&a, a.conc * 10.0, 0, 0);
    int before = a.conc;
    CHECK(before > 40);
    int after = cf__adapt_step(&a, a.conc * 10.0, 1, 0);
    CHECK(after == before * 3 / 4);
    for (int w = 0; w < 20; w++) cf__adapt_step(&a, 100, 1, 0);
    CHECK(a.conc == 1); /* persistent throttling: down to one */
}

static void test_consumer_bound_holds(void) {
    cf__adapt a;
    cf__adapt_init(&a, 8, 64);
    for (int w = 0; w < 20; w++) CHECK(cf__adapt_step(&a, 1e6, 0, 1) == 8);
}

static void test_bounds(void) {
    cf__adapt a;
    cf__adapt_init(&a, 500, 16);
    CHECK(a.conc == 16);
    for (int w = 0; w < 50; w++) {
        int c = cf__adapt_step(&a, storage(a.conc, 1000, 0.1), 0, 0);
        CHECK(c >= 1 && c <= 16);
    }
    CHECK(a.conc >= 14);
    cf__adapt_init(&a, 0, 0);
    CHECK(a.conc == 1 && a.max_conc == 1);
    CHECK(cf__adapt_step(&a, 0, 0, 0) == 1);
}

int main(void) {
    test_finds_the_knee();
    test_retries_back_off();
    test_consumer_bound_holds();
    test_bounds();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("loader_adapt: all tests passed\n");
    return 0;
}
