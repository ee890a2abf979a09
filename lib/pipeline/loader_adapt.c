/*
 * loader_adapt.c - how many patches the loader reads at once.  Remote reads
 * are latency-bound: each reader mostly waits, so while the CPU has room
 * more readers mean proportionally more throughput and the controller
 * grows fast.  Once decoding keeps the cores busy, more readers only add
 * memory; it then holds, and now and then gives a few readers back to
 * find out whether it still needs them.
 *
 * Why idle CPU and not throughput decides: at 100+ ms per read, the
 * throughput of a quarter-second window varies by +-15% at a fixed
 * concurrency (measured on the 164 ms benchmark), so hill-climbing on it
 * random-walks, and below the knee every reader lost costs throughput
 * (32 readers gave 420 MB/s, 64 gave 610-680 there).  Idle cores are a
 * direct and far steadier sign that more patches in flight would help.
 */
#include "loader_adapt.h"

void cf__adapt_init(cf__adapt *a, int start, int max_conc) {
    if (max_conc < 1) max_conc = 1;
    if (start < 1) start = 1;
    if (start > max_conc) start = max_conc;
    a->conc = start;
    a->max_conc = max_conc;
    a->calm = 0;
}

int cf__adapt_step(cf__adapt *a, double busy, int retried,
                   int consumer_bound) {
    int c = a->conc;
    if (retried) {
        c = c * 3 / 4;
        a->calm = 0;
    } else if (consumer_bound) {
        /* hold: the ring is full, readers are ahead of the consumer */
        a->calm = 0;
    } else if (busy < 0.75) {
        c = c * 3 / 2 + 1;
        a->calm = 0;
    } else if (busy < 0.95) {
        c += c / 8 > 1 ? c / 8 : 1;
        a->calm = 0;
    } else if (++a->calm >= CF__ADAPT_CALM) {
        c -= c / 16 > 1 ? c / 16 : 1;
        a->calm = 0;
    }
    if (c < 1) c = 1;
    if (c > a->max_conc) c = a->max_conc;
    a->conc = c;
    return c;
}
