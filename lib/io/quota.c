/*
 * quota.c - how an io loop retries: the backoff before a retry (at the
 * end), and the retry quota that all requests of the loop share: a
 * token bucket, as the AWS SDKs' "standard" retry mode keeps one
 * (botocore's RetryQuotaChecker, the Java SDK's TokenBucketRetryStrategy).
 *
 * A retry takes CF__QUOTA_RETRY_COST tokens, a retry after a timeout (a
 * stall, a connect timeout) CF__QUOTA_TIMEOUT_COST: a request that timed
 * out held a connection for long and says more about an overloaded server
 * than a quick 503.  A request that succeeds at its first attempt adds
 * CF__QUOTA_SUCCESS token; one that succeeds after retries gives back what
 * its last retry took.  These are the AWS SDKs' constants (5, 10 and 1), so
 * that the bucket drains and refills as their users know it to: a request
 * whose one retry worked costs nothing in the end, one that needed two
 * costs one retry, one that never worked all it took, and every request
 * that worked at once pays back a fifth of a retry.  Only a run of
 * failures drains it.
 *
 * Unlike the AWS SDKs the bucket also refills with time, from empty to
 * full in CF__QUOTA_REFILL_S seconds.  A training run may see nothing but
 * failures for a while (every reader waits on the same dead endpoint): on
 * successes alone it would never retry again, the lifetime counter that
 * this replaced was the extreme of that (issue 15: a 3-second outage used
 * 402 of 1000 retries, three outages left a run unable to retry for the
 * rest of its life).  With time, a retry storm is held to
 * capacity / CF__QUOTA_REFILL_S retries per second (16 a second at the
 * default retry_budget of 1000) however many requests fail, and a bucket
 * drained by an outage is full again a minute after it, before the next.
 *
 * The capacity is cf_io_options.retry_budget ordinary retries
 * (retry_budget x CF__QUOTA_RETRY_COST tokens); 0 turns retries off.
 *
 * Each process's io loop has its own bucket, used by its loop thread only
 * (a forked child starts with a full one): no lock.
 */
#include "io_internal.h"

#include <math.h>

void cf__quota_init(cf__quota *q, int retries, double now) {
    q->cap = retries > 0 ? (double)retries * CF__QUOTA_RETRY_COST : 0.0;
    q->tokens = q->cap;
    q->t_last = now;
}

/* Add what the time since the last look is worth. */
static void refill(cf__quota *q, double now) {
    if (now > q->t_last) {
        q->tokens += (now - q->t_last) * q->cap / CF__QUOTA_REFILL_S;
        if (q->tokens > q->cap) q->tokens = q->cap;
    }
    q->t_last = now;
}

int cf__quota_take(cf__quota *q, double cost, double now) {
    refill(q, now);
    if (q->tokens < cost) return 0;
    q->tokens -= cost;
    return 1;
}

void cf__quota_give(cf__quota *q, double tokens, double now) {
    refill(q, now);
    q->tokens += tokens;
    if (q->tokens > q->cap) q->tokens = q->cap;
}

double cf__quota_retries_left(cf__quota *q, double now) {
    refill(q, now);
    return q->tokens / CF__QUOTA_RETRY_COST;
}

/* ---- backoff ------------------------------------------------------- */

uint64_t cf__xorshift64s(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* only for jitter, run on the loop thread */
static uint64_t rng_next(cf__loop *lp) { return cf__xorshift64s(&lp->rng); }

double cf__backoff_delay(const cf_io_options *o, int attempt, double retry_after_s,
                         uint64_t random) {
    double d = o->retry_base_ms * ldexp(1.0, attempt > 30 ? 30 : attempt);
    if (d > o->retry_max_ms) d = o->retry_max_ms;
    /* "Equal jitter": half fixed, half random, so that clients that failed
     * together do not retry together. */
    double u = (double)(random >> 11) / 9007199254740992.0;
    d = d / 2 + u * d / 2;
    double s = d / 1000.0;
    if (retry_after_s > s) s = retry_after_s;
    return s;
}

double cf__io_backoff(cf__loop *lp, int attempt, double retry_after_s) {
    return cf__backoff_delay(&lp->io->opts, attempt, retry_after_s, rng_next(lp));
}
