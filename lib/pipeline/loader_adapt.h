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
    int calm;          /* busy windows in a row since the last change */
} cf__adapt;

void cf__adapt_init(cf__adapt *a, int start, int max_conc);

/* One control window: `busy` the fraction of the machine's CPU time that
 * was used (0..1: the larger of the whole machine's and this process's
 * share), `retried` whether the io retried requests (throttling, errors),
 * `consumer_bound` whether readers waited for a free ring slot.  Returns
 * the new concurrency (also in a->conc), in [1, max_conc]:
 *  - retries: back off by a quarter;
 *  - consumer-bound: hold (more readers cannot help);
 *  - busy below 75%: readers wait on latency, not on work: x1.5 + 1;
 *  - busy below 95%: cores still idle now and then: up by conc/8;
 *  - busy (decode-bound): hold, and every CF__ADAPT_CALM windows in a row
 *    step down by conc/16, so that readers beyond what keeps the cores
 *    busy are given back; the first window with idle cores steps up
 *    again (by twice as much), so it settles near the knee (a few
 *    readers below it at times: 45-50 for a knee of 49 in the tests). */
int cf__adapt_step(cf__adapt *a, double busy, int retried, int consumer_bound);

#define CF__ADAPT_CALM 8

#endif
