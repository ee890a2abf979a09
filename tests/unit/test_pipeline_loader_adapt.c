/*
 * test_pipeline_loader_adapt.c - the concurrency controller against
 * simulated storage: reads take `lat` seconds each and cost CPU; the CPU
 * saturates at `cap` samples/s (the knee, cap x lat readers).  Also
 * measurement noise, too many readers to begin with, throttling (retries)
 * and consumer-bound windows.
 */
#include "cf_test.h"
#include "pipeline/loader_adapt.h"

#include <stdio.h>

/* How busy the CPU is with `conc` readers: rate / cap, at most 1, with
 * `noise` (a fraction) added by a fixed pseudo-random sequence. */
static double busy_at(int conc, double lat, double cap, double noise,
                      unsigned *rng) {
    double rate = conc / lat;
    if (rate > cap) rate = cap;
    *rng = *rng * 1103515245u + 12345u;
    double u = (double)((*rng >> 8) & 0xffff) / 65535.0; /* 0..1 */
    double b = rate / cap + noise * (2 * u - 1);
    return b < 0 ? 0 : b > 1 ? 1 : b;
}

/* Run `n` windows from `start`; hist[w] = the concurrency after window w. */
static void run(int start, int max_conc, double lat, double cap, double noise,
                int n, int *hist) {
    cf__adapt a;
    unsigned rng = 1;
    cf__adapt_init(&a, start, max_conc);
    for (int w = 0; w < n; w++)
        hist[w] = cf__adapt_step(&a, busy_at(a.conc, lat, cap, noise, &rng),
                                 0, 0);
}

static void test_finds_the_knee(void) {
    const double caps[] = {20, 120, 300, 5000};
    const double noises[] = {0, 0.02};
    for (int k = 0; k < 4; k++) {
        for (int z = 0; z < 2; z++) {
            int hist[200];
            run(8, 256, 0.164, caps[k], noises[z], 200, hist);
            double knee = caps[k] * 0.164;
            if (knee > 256) knee = 256;
            /* Settled near the knee, at most 15% below it: below it
             * throughput is lost (the cores idle), far above it memory is
             * wasted. */
            for (int w = 40; w < 200; w++) {
                CHECK(hist[w] >= knee * 0.85 - 1);
                CHECK(hist[w] <= knee * 1.6 + 2);
            }
            /* Latency-bound storage is found fast: 40+ readers within 6
             * windows when the knee is that high. */
            if (knee >= 45) CHECK(hist[5] >= 40);
        }
    }
}

static void test_gives_readers_back(void) {
    /* Far more readers than the knee (49): given back within 300 windows
     * (a minute or so of quarter-second windows), never more than 15%
     * below the knee. */
    int hist[300];
    run(250, 256, 0.164, 300, 0, 300, hist);
    for (int w = 0; w < 300; w++) CHECK(hist[w] >= 49 * 0.85);
    CHECK(hist[299] <= 49 * 1.6 + 2);
}

static void test_retries_back_off(void) {
    cf__adapt a;
    cf__adapt_init(&a, 8, 256);
    for (int w = 0; w < 10; w++) cf__adapt_step(&a, 0.1, 0, 0);
    int before = a.conc;
    CHECK(before > 40);
    int after = cf__adapt_step(&a, 0.1, 1, 0);
    CHECK(after == before * 3 / 4);
    for (int w = 0; w < 20; w++) cf__adapt_step(&a, 0.1, 1, 0);
    CHECK(a.conc == 1); /* persistent throttling: down to one */
}

static void test_consumer_bound_holds(void) {
    cf__adapt a;
    cf__adapt_init(&a, 8, 64);
    for (int w = 0; w < 20; w++) CHECK(cf__adapt_step(&a, 0.1, 0, 1) == 8);
}

static void test_bounds(void) {
    cf__adapt a;
    cf__adapt_init(&a, 500, 16);
    CHECK(a.conc == 16);
    for (int w = 0; w < 50; w++) {
        int c = cf__adapt_step(&a, 0.1, 0, 0);
        CHECK(c >= 1 && c <= 16);
    }
    CHECK(a.conc == 16);
    cf__adapt_init(&a, 0, 0);
    CHECK(a.conc == 1 && a.max_conc == 1);
    CHECK(cf__adapt_step(&a, 1, 0, 0) == 1);
}

int main(void) {
    test_finds_the_knee();
    test_gives_readers_back();
    test_retries_back_off();
    test_consumer_bound_holds();
    test_bounds();
    return CF_TEST_END();
}
