/*
 * loader_adapt.c - how many patches the loader reads at once.  Remote reads
 * are latency-bound: each reader mostly waits, so while the CPU has room
 * more readers mean proportionally more throughput and the controller
 * grows fast.  Once decoding keeps the cores busy, more readers only add
 * memory and contention: it then hill-climbs on measured throughput with
 * small steps, preferring fewer readers on a plateau.  Throughput alone is
 * too noisy a signal at 100+ ms per read to drive the fast phase, which is
 * why CPU use decides which phase applies.
 */
#include "loader_adapt.h"

void cf__adapt_init(cf__adapt *a, int start, int max_conc) {
    if (max_conc < 1) max_conc = 1;
    if (start < 1) start = 1;
    if (start > max_conc) start = max_conc;
    a->conc = start;
    a->max_conc = max_conc;
    a->dir = 1;
    a->last_rate = 0;
}

int cf__adapt_step(cf__adapt *a, double rate, double cpu, int retried,
                   int consumer_bound) {
    int c = a->conc;
    if (retried) {
        c = c * 3 / 4;
        a->dir = -1;
        a->last_rate = 0;
    } else if (consumer_bound) {
        /* hold: the ring is full, readers are ahead of the consumer */
    } else if (cpu < 0.75) {
        c = c * 3 / 2 + 1;
        a->dir = 1;
        a->last_rate = rate;
    } else {
        /* Going up must pay (+2%), going down may cost nothing (-2%). */
        if (a->last_rate > 0) {
            if (a->dir > 0 && !(rate > a->last_rate * 1.02)) a->dir = -1;
            else if (a->dir < 0 && rate < a->last_rate * 0.98) a->dir = 1;
        }
        int step = c / 8 > 1 ? c / 8 : 1;
        c += a->dir * step;
        a->last_rate = rate;
    }
    if (c < 1) c = 1;
    if (c > a->max_conc) c = a->max_conc;
    a->conc = c;
    return c;
}
