/*
 * loader_adapt.c - hill-climbing on throughput for the number of patches
 * the loader reads at once.  Latency-bound remote reads gain almost
 * linearly from more concurrency, so slow start finds the region fast;
 * decode- or bandwidth-bound reads stop gaining, and the small steps then
 * oscillate around the knee instead of piling up threads.
 */
#include "loader_adapt.h"

void cf__adapt_init(cf__adapt *a, int start, int max_conc) {
    if (max_conc < 1) max_conc = 1;
    if (start < 1) start = 1;
    if (start > max_conc) start = max_conc;
    a->conc = start;
    a->max_conc = max_conc;
    a->dir = 1;
    a->slow_start = 1;
    a->last_rate = 0;
}

int cf__adapt_step(cf__adapt *a, double rate, int retried,
                   int consumer_bound) {
    int c = a->conc;
    if (retried) {
        c = c * 3 / 4;
        a->slow_start = 0;
        a->dir = 1;
        a->last_rate = 0;
    } else if (!consumer_bound) {
        int better = a->last_rate == 0 || rate > a->last_rate * 1.05;
        if (a->slow_start && better) {
            c = c * 3 / 2 + 1;
        } else {
            /* Going up must pay (+2%), going down may cost nothing
             * (-2%): on a plateau this walks down to its left edge, the
             * fewest readers that give the full rate. */
            if (a->slow_start) {
                a->slow_start = 0;
                a->dir = -1;
            } else if (a->dir > 0 && !(rate > a->last_rate * 1.02)) {
                a->dir = -1;
            } else if (a->dir < 0 && rate < a->last_rate * 0.98) {
                a->dir = 1;
            }
            int step = c / 8 > 1 ? c / 8 : 1;
            c += a->dir * step;
        }
        a->last_rate = rate;
    }
    if (c < 1) c = 1;
    if (c > a->max_conc) c = a->max_conc;
    a->conc = c;
    return c;
}
