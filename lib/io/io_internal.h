/*
 * io_internal.h - what io.c (the cf_io handle and its loop thread),
 * http.c (one HTTP range transfer: setup, validation, retry) and src.c
 * (cf__src: local files, range merging, blocking reads) share.  Not part of
 * any other layer's contract: use io.h.
 */
#ifndef CF_IO_INTERNAL_H
#define CF_IO_INTERNAL_H

#include "auth.h"
#include "io.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <time.h>

typedef struct cf__loop cf__loop;
typedef struct cf__xfer cf__xfer;

typedef struct cf__fdpool cf__fdpool;

struct cf_io {
    cf_io_options opts;       /* strings point at the copies below */
    char *header_cache_dir;
    char *ca_file;
    _Atomic uint64_t n_requests, n_retries, n_bytes, n_connect_fail,
        n_read_fail, n_cache_hits, n_hedges, n_hedge_wins;
    _Atomic uint64_t n_bad_moves; /* illegal transfer state moves (xstate.c) */
    _Atomic int inflight;
    _Atomic int peak_inflight; /* most of inflight so far (loop thread) */
    _Atomic int max_inflight;
    _Atomic int cancel;       /* cf__io_cancel */
    /* The loop of the current process.  Replaced (never freed) in a forked
     * child: its sockets belong to the parent. */
    _Atomic(cf__loop *) loop;
    /* State of the layers above (the header cache), see cf__io_upper_state
     * in upper.c; destroyed by cf_io_free through cf__io_upper_free. */
    _Atomic(void *) upper;
    void (*upper_destroy)(void *);
    cf__fdpool *fdpool;       /* its local files' descriptors */
};

/* upper.c: cf_io_free calls this before freeing the io. */
void cf__io_upper_free(cf_io *io);

/* hedge.c: when to send a slow request a second time.  First-byte times
 * go into a histogram of 1/8-octave buckets (1 ms .. 60 s) that halves
 * as it fills, so it follows the link; a token bucket keeps hedges to a
 * tenth of the requests.  Loop-thread only. */
#define CF__HEDGE_BUCKETS 128
typedef struct cf__hedge {
    uint32_t hist[CF__HEDGE_BUCKETS];
    uint32_t n;               /* samples in hist */
    double tokens;            /* hedges that may be sent now */
    double next_scan;         /* cf__now() of the next look at the slots */
} cf__hedge;
void cf__hedge_init(cf__hedge *h);
void cf__hedge_note_ttfb(cf__hedge *h, double seconds);
void cf__hedge_note_request(cf__hedge *h);
/* Seconds a request may wait for its first byte before it is hedged,
 * or < 0 for never (off, or too few samples yet). */
double cf__hedge_delay(const cf__hedge *h, double hedge_after_ms);
int cf__hedge_take(cf__hedge *h); /* 1: a token was taken */

/* quota.c: the retry quota of one io loop (a token bucket; the costs and
 * why are in quota.c).  Loop-thread only. */
#define CF__QUOTA_RETRY_COST 5.0    /* tokens a retry takes */
#define CF__QUOTA_TIMEOUT_COST 10.0 /* ... a retry after a timeout */
#define CF__QUOTA_SUCCESS 1.0       /* given by a first-attempt success */
#define CF__QUOTA_REFILL_S 60.0     /* empty to full with time alone */
typedef struct cf__quota {
    double cap, tokens;       /* retry_budget x CF__QUOTA_RETRY_COST */
    double t_last;            /* cf__now() of the last refill */
} cf__quota;
void cf__quota_init(cf__quota *q, int retries, double now);
/* Take `cost` tokens: 1, or 0 (nothing taken) when there are fewer. */
int cf__quota_take(cf__quota *q, double cost, double now);
void cf__quota_give(cf__quota *q, double tokens, double now);
double cf__quota_retries_left(cf__quota *q, double now);

/* One libcurl-multi loop thread, owned by the process that created it. */
struct cf__loop {
    cf_io *io;
    pid_t pid;
    cf__loop *abandoned;      /* the parent's loop, after a fork: kept
                                 reachable, never touched */
    pthread_t thread;
    pthread_mutex_t mu;       /* guards the submission queue and stop */
    pthread_cond_t room;      /* signalled when the queue drains */
    pthread_cond_t decode_room; /* signalled when a decoder leaves */
    int decoding, decode_max; /* callers inside cf__io_decode_enter/leave */
    cf__xfer *q_head, *q_tail; /* submitted by callers, not yet taken */
    size_t queued;
    int stop;
    CURLM *multi;
    CURLSH *share;
    int ep_fd;                /* epoll set: curl's sockets and wake_fd */
    int wake_fd;              /* eventfd that submitters write to */
    /* Loop-thread only. */
    cf__xfer *pending;        /* waiting for a slot or for their retry time */
    cf__xfer *pending_tail;
    int active;               /* easy handles inside multi */
    cf__xfer *slots[CF_IO_MAX_INFLIGHT]; /* the active transfers */
    CURL **spare;             /* reusable easy handles */
    int nspare;
    uint64_t rng;             /* backoff jitter */
    cf__hedge hedge;
    cf__quota quota;          /* retries left to all its requests */
    cf__xfer *lost;           /* hedge legs that lost, still in multi */
    /* Hosts that answered (hashes of their names; the oldest replaced),
     * and whether any transfer got through a proxy: a name that resolved
     * before and fails to now is a resolver's hiccup, retried; one that
     * never resolved is permanent (http.c). */
    uint64_t answered[64];
    unsigned answered_next;
    int proxy_answered;
    /* Socket numbers curl closed and has not watched since (sockets.c). */
    unsigned char *closed;
    size_t nclosed;
};

/* sockets.c: curl opens and closes its sockets through the loop, so that
 * a socket leaves the epoll set before its number can be given again;
 * the loop notes the numbers curl closed (closed 1) and forgets them when
 * curl opens or watches that number again (closed 0). */
void cf__loop_socket_hooks(cf__loop *lp, CURL *e);
void cf__loop_note_closed(cf__loop *lp, curl_socket_t s, int closed);
int cf__loop_was_closed(const cf__loop *lp, curl_socket_t s);

/* Most submitted-but-not-started transfers before submitters wait. */
#define CF__QUEUE_MAX ((size_t)CF_IO_MAX_INFLIGHT * 8)
/* Largest single merged request. */
#define CF__MERGE_MAX ((uint64_t)16 << 20)
/* Redirects followed per request. */
#define CF__MAX_REDIRECTS 5

/* fdpool.c: at most max_open descriptors of local files open per pool;
 * an io has one, shared by the loader's io loops. */
int cf__fdpool_auto_size(void);
cf__fdpool *cf__fdpool_new(int max_open); /* <= 0: auto */
cf__fdpool *cf__fdpool_ref(cf__fdpool *p);
void cf__fdpool_unref(cf__fdpool *p);
int cf__fdpool_max_open(const cf__fdpool *p);
uint64_t cf__fdpool_reopens(cf__fdpool *p);
/* s->fd open and idle: 1 added, 0 not (a forked child's pool) */
int cf__fdpool_add(cf__fdpool *p, cf__src *s);
/* A descriptor of s for one read; *owned: release closes it. */
cf_status cf__fdpool_acquire(cf__fdpool *p, cf__src *s, int *fd, int *owned,
                             cf_error *err);
void cf__fdpool_release(cf__fdpool *p, cf__src *s, int fd, int owned);
void cf__fdpool_remove(cf__fdpool *p, cf__src *s); /* closes s->fd */
/* After an open() that failed with errno e: for EMFILE / ENFILE, append
 * what the limits are and what to change (p may be NULL). */
void cf__fdpool_limit_hint(const cf__fdpool *p, int e, cf_error *err);

struct cf__src {
    cf_io *io;
    int remote;
    int fd;                   /* local files: -1 while closed by the pool */
    /* Local files under a pool (fdpool.c; guarded by its lock): the
     * identity checked when reopening, and the idle list links. */
    cf__fdpool *pool;
    char *path;               /* absolute at open time */
    dev_t dev;
    ino_t ino;
    struct timespec mtime;
    int fd_users, idle;
    int reopening;            /* a reader is opening it again */
    cf__src *idle_prev, *idle_next;
    char *url;                /* as given */
    char *name;               /* redacted, for messages */
    cf__auth *auth;           /* remote only; replaced (under mu) when the
                                 URL is signed again: cf__src_auth */
    pthread_mutex_t mu;       /* size/etag are written by the loop thread */
    /* Signed URLs (cf_io_options.sign): when to sign again and when the
     * signature in use expires (POSIX times; 0: never; under mu), and the
     * lock of the thread signing it. */
    double renew_at, expires;
    pthread_mutex_t sign_mu;
    uint64_t size;            /* UINT64_MAX until known */
    char etag[160];
    /* Last-Modified of the first response that had one: the validator
     * when there is no strong ETag (http.c). */
    char last_modified[64];
    _Atomic uint64_t requests;
};

/* src_sign.c: signed URLs (cf_io_options.sign).  cf__src_sign: s's URL
 * signed by the io's function, *out the handle to request it with,
 * *expires_at when the signature expires (0: never), *renew_at when to
 * sign again; refused when the signed URL is another object's, already
 * expired, or its expiry no time.  cf__src_fresh: before a request, the
 * signature renewed when due (a failed renewal while the one in use is
 * valid is tried again later).  cf__src_auth_now: s's current handle, a
 * reference the caller frees (NULL for a local file). */
cf_status cf__src_sign(cf__src *s, cf__auth **out, double *expires_at, double *renew_at,
                       cf_error *err);
cf_status cf__src_fresh(cf__src *s, cf_error *err);
cf__auth *cf__src_auth_now(cf__src *s);

/* Each attempt of a transfer of a signed object (cf_io_options.sign) is
 * sent with the object's latest signature: *a (a reference) is replaced
 * by the src's current handle when that is newer, so that a transfer
 * that waited in the queue or in a retry's backoff past a renewal is not
 * sent with the old one.  Nothing for an io without a signer. */
void cf__src_auth_latest(cf__src *s, cf__auth **a);

/* Why a transfer was cut short by our own callbacks. */
enum cf__abort {
    CF__AB_NONE = 0,
    CF__AB_MISMATCH,     /* 206 with the wrong Content-Range: retry once */
    CF__AB_NORANGE,      /* 200 instead of 206: not range-capable */
    CF__AB_CHANGED,      /* ETag or size differs from the pinned one */
    CF__AB_OVERFLOW,     /* more body than asked for */
    CF__AB_SHORT         /* object ends before the requested range does */
};

/* xstate.c: where one transfer is (docs/internals.md, "A transfer's
 * states").  The waiting states sit in the loop's queue or pending list,
 * the active ones (SENDING .. BODY, LOST) in curl and the loop's slots;
 * DONE, FAILED and CANCELLED have a result and run their callbacks;
 * DROPPED is a hedge leg freed without them. */
typedef enum cf__xstate {
    CF__XS_NEW = 0,      /* made, not handed to the loop yet */
    CF__XS_QUEUED,       /* submitted: waits for a slot, never sent */
    CF__XS_BACKOFF,      /* an attempt failed: waits for its retry time */
    CF__XS_RESUME,       /* a body was cut short after bringing bytes:
                            waits to ask for the rest (no retry) */
    CF__XS_REDIRECT,     /* answered 3xx: waits to go to the target */
    CF__XS_SENDING,      /* in curl: connecting, sending, no response
                            byte yet (a hedge may be sent) */
    CF__XS_HEADERS,      /* reading a response's header block */
    CF__XS_HEADERS_END,  /* the header block ended; no body byte yet */
    CF__XS_BODY,         /* headers validated (first body byte, or an
                            empty body): bytes go to the callers, or an
                            error body is kept for its code */
    CF__XS_LOST,         /* a hedge leg whose twin answered first:
                            writes nothing, taken out of curl next */
    CF__XS_DONE,         /* finished, result CF_OK */
    CF__XS_FAILED,       /* finished with an error */
    CF__XS_CANCELLED,    /* failed because the io was cancelled or closed */
    CF__XS_DROPPED,      /* a hedge leg freed without callbacks */
    CF__XS_COUNT
} cf__xstate;

/* Which copy of a request a transfer is (hedging, io.c). */
typedef enum cf__xleg {
    CF__LEG_ONLY = 0,    /* never sent twice */
    CF__LEG_FIRST,       /* the original of a request sent twice */
    CF__LEG_SECOND       /* the second copy */
} cf__xleg;

const char *cf__xstate_name(cf__xstate s);
int cf__xstate_legal(cf__xstate from, cf__xstate to);
/* 1 when an illegal move stops the process (builds without NDEBUG, and
 * sanitizer builds), 0 when it is counted in io->n_bad_moves and made. */
int cf__xstate_checked(void);
/* The one way a transfer changes state (loop thread, or the submitter
 * before the loop sees it). */
void cf__xfer_move_at(cf__xfer *x, cf__xstate to, const char *file, int line);
#define cf__xfer_move(x, to) cf__xfer_move_at((x), (to), __FILE__, __LINE__)

/* One HTTP GET for a byte range covering one or more callers' requests. */
struct cf__xfer {
    cf__xfer *next;
    cf__src *src;
    cf__range_req **reqs;      /* members, sorted by offset */
    size_t nreq;
    uint64_t off, len;        /* the range fetched; len may shrink (head) */
    int head;                 /* first read: size unknown, 200 may be fine */
    int len_open;             /* head read answered 200 without length */
    cf__range_cb cb;
    void *user;

    uint64_t got;             /* bytes received contiguously from off */
    int attempts;             /* requests sent */
    int retries;              /* retries used: at most max_retries */
    int resumes;              /* resumes of a body that made progress
                                 (not retries: the deadline bounds them) */
    double quota_taken;       /* tokens the last retry took (refunded on
                                 success), 0 when none */
    int mismatches;           /* Content-Range mismatches seen */
    int redirects;
    int slot;                 /* index in loop->slots while active */
    cf__loop *lp;
    cf__xstate state;         /* changed only by cf__xfer_move */
    const char *moved_file;   /* where the last move was made, for the */
    int moved_line;           /* message of an illegal one */
    /* Hedging (io.c): a request sent twice is two xfers, each a full
     * copy (own reqs array) linked as twins.  Only the first to start a
     * body (the winner) writes into the callers' buffers and finishes;
     * the other is LOST, then DROPPED without callbacks. */
    cf__xfer *twin;           /* the other leg while both run */
    cf__xleg leg;             /* not ONLY: never hedged again */
    double t_start;           /* this attempt's start */
    double t0;                /* first attempt's start: deadline base */
    double due;               /* not before (backoff) */
    char *redirect_url;       /* current redirect target, or NULL */
    cf__auth *auth;           /* src's when the transfer was made (a ref) */
    int foreign_host;         /* redirect_url is on another host */

    /* Per attempt. */
    CURL *easy;
    struct curl_slist *hdrs;
    long status;
    enum cf__abort abort;
    char abort_msg[256];
    int have_cr;
    uint64_t cr_start, cr_end, cr_total; /* cr_total UINT64_MAX for '*' */
    int64_t content_length;   /* -1 unknown */
    char etag[160];           /* "" when absent or unusable */
    char last_modified[64];   /* "" when absent or unusable */
    double retry_after;       /* seconds, <0 none; as asked, uncapped */
    size_t hdr_bytes;         /* header bytes of this response */
    char ms_code[64];
    char location[1024];
    int location_long;
    char errbody[2048];
    size_t errbody_len;
    uint64_t attempt_got;     /* bytes received in this attempt */

    cf_status result;
    cf_error err;
};

/* io.c */
cf_status cf__io_submit(cf_io *io, cf__xfer **xs, size_t n, cf_error *err);
/* quota.c: how long retry `attempt` waits (jittered exponential backoff,
 * at least the server's Retry-After). */
double cf__io_backoff(cf__loop *lp, int attempt, double retry_after_s);
/* xorshift64*: the jitter's random bits (state nonzero; not secret). */
uint64_t cf__xorshift64s(uint64_t *state);
/* The same delay from options and 64 random bits (the jitter): what
 * uploads, which run off the loop (upload.c), wait too. */
double cf__backoff_delay(const cf_io_options *o, int attempt, double retry_after_s,
                         uint64_t random);

/* http.c: loop-thread side of one transfer. */
cf_status cf__xfer_start(cf__loop *lp, cf__xfer *x, cf_error *err);
/* Called with the curl result when multi reports the transfer done.
 * Returns 1 when the transfer is finished (DONE or FAILED, x->result
 * set), 0 when it waits for another attempt (BACKOFF, RESUME or REDIRECT,
 * x->due set). */
int cf__xfer_done(cf__loop *lp, cf__xfer *x, CURLcode rc);
void cf__xfer_finish(cf__xfer *x); /* run callbacks, free x */
/* Its easy handle back to the loop's spares (or freed) and its headers
 * freed; x itself stays.  The handle must be out of multi. */
void cf__xfer_release(cf__loop *lp, cf__xfer *x);
void cf__xfer_free(cf__xfer *x);
/* Set the result and move to FAILED, or with cancelled to CANCELLED. */
void cf__xfer_fail(cf__xfer *x, cf_status code, const char *msg);
void cf__xfer_cancel(cf__xfer *x, const char *msg);
/* http.c: a second leg for x (hedging): the same ranges, callers and progress,
 * its own reqs array; not started.  NULL when out of memory. */
cf__xfer *cf__xfer_hedge(const cf__xfer *x);
/* hedge.c: x, one leg of a hedged request, started a body first: its twin
 * stops writing and is taken out of the loop after this callback. */
void cf__io_hedge_won(cf__xfer *x);

#endif
