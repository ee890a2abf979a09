/*
 * loader_adapt.h - the loader's concurrency controller as a pure state
 * machine (no clock, no io), so that its decisions can be unit-tested:
 * the loader feeds it one measurement per control window.
 */
#ifndef CF_PIPELINE_LOADER_ADAPT_H
#define CF_PIPELINE_LOADER_ADAPT_H

typedef struct cf__adapt {
    int conc;          /* patches read at once now */
    int max_conc;      /* upper bound (threads, byte budget) */
    int dir;           /* +1 / -1: direction of the next small step */
    double last_rate;  /* samples/s of the previous window (0: none) */
} cf__adapt;

void cf__adapt_init(cf__adapt *a, int start, int max_conc);

/* One control window: `rate` samples/s delivered by the readers, `cpu`
 * the process's CPU use as a fraction of all cores (0..1), `retried`
 * whether the io retried requests (throttling, errors), `consumer_bound`
 * whether readers waited for a free ring slot.  Returns the new
 * concurrency (also in a->conc), in [1, max_conc]:
 *  - retries: back off by a quarter;
 *  - consumer-bound: hold (more readers cannot help);
 *  - CPU below 75%: readers wait on latency, not on work: x1.5 + 1;
 *  - CPU busy (decode-bound): steps of conc/8 (at least 1), up while the
 *    rate grows by more than 2%, down while it falls by less than 2%, so
 *    that it settles at the fewest readers that give the full rate. */
int cf__adapt_step(cf__adapt *a, double rate, double cpu, int retried,
                   int consumer_bound);

#endif
