/*
 * hedge.c - when the io loop sends a slow request a second time.
 *
 * Object stores have a long tail: most GETs answer in one round trip, a
 * few in many (Amazon's S3 guidance is to track slow requests and send
 * them again; "The Tail at Scale", Dean & Barroso 2013, calls this a
 * hedged request).  The loader hands batches out in order, so one patch
 * whose request takes a second holds its batch back while the readers
 * behind it run out of ring slots: at 164 ms with 1% of the requests a
 * second late, the loader's throughput fell from 791 to 346 MB/s, and
 * was 625 MB/s hedged (docs/performance.md).
 *
 * A request that has seen no byte of a response after the 95th
 * percentile of the recent first-byte times, or twice their median if
 * that is longer, and at least 100 ms, is sent again; the first copy to
 * start a body wins and the other is dropped (io.c).  Only requests
 * waiting for their first byte are hedged, so a hedge costs a request,
 * not a second body.  The percentiles come from a
 * histogram of first-byte times in 1/8-octave buckets that halves every
 * CF__HEDGE_WINDOW samples, so it follows a link whose latency changes;
 * a token bucket (a tenth of a token per request sent, at most 20 saved)
 * keeps hedges to a tenth of the requests even when every request is
 * slow, where a second copy would only add load.
 */
#include "io_internal.h"

#include <math.h>

#define CF__HEDGE_WINDOW 4096    /* samples before the histogram halves */
#define CF__HEDGE_MIN_SAMPLES 32 /* below this, no percentile: no hedge */
#define CF__HEDGE_MIN_S 0.100
#define CF__HEDGE_SHARE 0.1      /* tokens per request sent */
#define CF__HEDGE_TOKENS_MAX 20.0

void cf__hedge_init(cf__hedge *h) {
    memset(h, 0, sizeof *h);
    h->tokens = 5.0; /* a few at once for the first slow requests */
}

/* Bucket b holds times in [2^(b/8), 2^((b+1)/8)) ms; the last bucket
 * everything from 2^(127/8) ms (60 s) on. */
static int bucket(double seconds) {
    double ms = seconds * 1000.0;
    if (!(ms > 1.0)) return 0;
    double b = floor(8.0 * log2(ms));
    return b >= CF__HEDGE_BUCKETS - 1 ? CF__HEDGE_BUCKETS - 1 : (int)b;
}

void cf__hedge_note_ttfb(cf__hedge *h, double seconds) {
    if (h->n >= CF__HEDGE_WINDOW) {
        uint32_t n = 0;
        for (int i = 0; i < CF__HEDGE_BUCKETS; i++) n += h->hist[i] /= 2;
        h->n = n;
    }
    h->hist[bucket(seconds)]++;
    /* The delay becomes known now: look at the waiting requests soon. */
    if (++h->n == CF__HEDGE_MIN_SAMPLES) h->next_scan = 0;
}

void cf__hedge_note_request(cf__hedge *h) {
    h->tokens += CF__HEDGE_SHARE;
    if (h->tokens > CF__HEDGE_TOKENS_MAX) h->tokens = CF__HEDGE_TOKENS_MAX;
}

/* The upper edge, in seconds, of the bucket holding quantile pct. */
static double quantile(const cf__hedge *h, unsigned pct) {
    uint64_t want = ((uint64_t)h->n * pct + 99) / 100, sum = 0;
    int b = 0;
    for (; b < CF__HEDGE_BUCKETS - 1; b++) {
        sum += h->hist[b];
        if (sum >= want) break;
    }
    return exp2((b + 1) / 8.0) / 1000.0;
}

double cf__hedge_delay(const cf__hedge *h, double hedge_after_ms) {
    if (hedge_after_ms < 0) return -1;
    if (hedge_after_ms > 0) return hedge_after_ms / 1000.0;
    if (h->n < CF__HEDGE_MIN_SAMPLES) return -1;
    /* Twice the median as well: where answers bunch up (64 sent at once,
     * all due after one round trip) the 95th percentile sits just above
     * them, and the last few would be sent again for nothing. */
    double s = quantile(h, 95), m = 2.0 * quantile(h, 50);
    if (m > s) s = m;
    return s < CF__HEDGE_MIN_S ? CF__HEDGE_MIN_S : s;
}

int cf__hedge_take(cf__hedge *h) {
    if (h->tokens < 1.0) return 0;
    h->tokens -= 1.0;
    return 1;
}

/* ---- the leg that won ---------------------------------------------- */

void cf__io_hedge_won(cf__xfer *x) {
    cf__xfer *t = x->twin;
    if (!t) return;
    cf__loop *lp = x->lp;
    x->twin = t->twin = NULL;
    cf__xfer_move(t, CF__XS_LOST);
    /* Not removed here: this runs inside a curl callback of x. */
    t->next = lp->lost;
    lp->lost = t;
}
