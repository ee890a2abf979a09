/*
 * io.c - the cf_io handle: options, statistics, and its one libcurl-multi
 * loop thread.
 *
 * Callers (any thread) hand transfers to the loop through a bounded queue
 * and wake it through an eventfd; only the loop thread touches curl
 * handles.  The loop starts lazily on the first remote request.
 *
 * The loop drives curl through its socket API (curl_multi_socket_action)
 * on an epoll set, not curl_multi_perform + curl_multi_poll: those walk
 * every transfer on every wakeup (and curl 7.x polls each socket again
 * inside), a cost that grows with the connections open (60-110 at 164 ms
 * on 2 cores, hundreds on larger machines).  With the socket API a wakeup
 * costs only the sockets that are ready (docs/performance.md: the io
 * thread's CPU per GB at 164 ms went from 0.26 to 0.23-0.24 s).
 *
 * A forked child sees a loop whose pid is not its own and builds a fresh
 * one, abandoning (not cleaning up) the parent's: its sockets and TLS
 * state belong to the parent process.
 */
#include "io_internal.h"
#include "io_options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

void cf_io_options_init(cf_io_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
#define X(f, ctype, pytype, fmt, def, lo, hi, hint) opt->f = (ctype)(def);
    CF__IO_SCALARS(X)
#undef X
}

/* The scalar options' ranges, from the one table (io_options.h). */
static const cf__opt_range scalars[CF__IOO_COUNT] = {
#define X(f, ctype, pytype, fmt, def, lo, hi, hint) {#f, (double)(lo), (double)(hi), hint},
    CF__IO_SCALARS(X)
#undef X
};

cf_status cf__io_check(int id, double v, cf_error *err) {
    return cf__opt_check(scalars, CF__IOO_COUNT, id, v, "cf_io_new", err);
}

static int clamp_inflight(int n) {
    if (n < 1) return 1;
    if (n > CF_IO_MAX_INFLIGHT) return CF_IO_MAX_INFLIGHT;
    return n;
}

cf_status cf_io_new(const cf_io_options *opt, cf_io **out, cf_error *err) {
    if (!out) return cf__err(err, CF_E_ARG, "cf_io_new: out is NULL");
    *out = NULL;
    cf_io_options o;
    cf_io_options_init(&o);
    if (opt) {
        if (opt->struct_size < offsetof(cf_io_options, max_inflight) ||
            opt->struct_size > sizeof o)
            return cf__err(err, CF_E_ARG,
                           "cf_io_new: options struct_size %zu unknown "
                           "(call cf_io_options_init)",
                           opt->struct_size);
        memcpy(&o, opt, opt->struct_size);
        o.struct_size = sizeof o;
    }
#define X(f, ...)                                                                          \
    CF__TRY(cf__io_check(CF__IOO_##f, (double)o.f, err));
    CF__IO_SCALARS(X)
#undef X
    /* libcurl would only say so at the first https transfer, as a TLS
     * error of that URL. */
    if (o.ca_file && access(o.ca_file, R_OK) != 0) {
        char name[CF__NAME_MAX];
        cf__name_fit(o.ca_file, strlen(o.ca_file), name, sizeof name);
        return cf__err(err, CF_E_ARG, "cf_io_new: ca_file %s: %s", name,
                       strerror(errno));
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return cf__err(err, CF_E_IO, "cf_io_new: libcurl failed to initialise");
    cf_io *io = cf__calloc(1, sizeof *io);
    if (!io) {
        curl_global_cleanup();
        return cf__err(err, CF_E_NOMEM, "cf_io_new: out of memory");
    }
    io->opts = o;
    if ((o.header_cache_dir &&
         !(io->header_cache_dir = cf__strdup(o.header_cache_dir))) ||
        (o.ca_file && !(io->ca_file = cf__strdup(o.ca_file)))) {
        free(io->header_cache_dir);
        free(io);
        curl_global_cleanup();
        return cf__err(err, CF_E_NOMEM, "cf_io_new: out of memory");
    }
    io->opts.header_cache_dir = io->header_cache_dir;
    io->opts.ca_file = io->ca_file;
    io->opts.max_inflight = clamp_inflight(o.max_inflight);
    atomic_init(&io->max_inflight, io->opts.max_inflight);
    atomic_init(&io->cancel, 0);
    atomic_init(&io->loop, NULL);
    atomic_init(&io->upper, NULL);
    if (!(io->fdpool = cf__fdpool_new(o.max_open_files))) {
        free(io->header_cache_dir);
        free(io->ca_file);
        free(io);
        curl_global_cleanup();
        return cf__err(err, CF_E_NOMEM, "cf_io_new: out of memory");
    }
    io->opts.max_open_files = cf__fdpool_max_open(io->fdpool);
    *out = io;
    return CF_OK;
}

void cf__io_share_fdpool(cf_io *io, cf_io *from) {
    cf__fdpool_unref(io->fdpool);
    io->fdpool = cf__fdpool_ref(from->fdpool);
    io->opts.max_open_files = from->opts.max_open_files;
}

const cf_io_options *cf__io_opts(const cf_io *io) { return &io->opts; }

void cf__io_note_cache_hit(cf_io *io) {
    if (io) atomic_fetch_add(&io->n_cache_hits, 1);
}

void cf_io_get_stats(cf_io *io, cf_io_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!io) return;
    out->requests = atomic_load(&io->n_requests);
    out->retries = atomic_load(&io->n_retries);
    out->bytes_fetched = atomic_load(&io->n_bytes);
    out->connect_failures = atomic_load(&io->n_connect_fail);
    out->read_failures = atomic_load(&io->n_read_fail);
    out->header_cache_hits = atomic_load(&io->n_cache_hits);
    out->inflight = atomic_load(&io->inflight);
    out->max_inflight = atomic_load(&io->max_inflight);
    out->hedges = atomic_load(&io->n_hedges);
    out->hedge_wins = atomic_load(&io->n_hedge_wins);
    out->peak_inflight = atomic_load(&io->peak_inflight);
}

/* Loop thread: one more request in flight. */
static void inflight_up(cf_io *io) {
    int now = atomic_fetch_add(&io->inflight, 1) + 1;
    if (now > atomic_load(&io->peak_inflight)) atomic_store(&io->peak_inflight, now);
}

/* Any thread: make the loop thread look at its queue and limits. */
static void loop_wake(cf__loop *lp) {
    uint64_t one = 1;
    /* EAGAIN means the counter is already non-zero: the loop will wake. */
    while (write(lp->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

void cf_io_set_max_inflight(cf_io *io, int n) {
    if (!io) return;
    atomic_store(&io->max_inflight, clamp_inflight(n));
    cf__loop *lp = atomic_load(&io->loop);
    /* Wake the loop so that a raised limit starts queued work now. */
    if (lp && lp->pid == getpid()) loop_wake(lp);
}

/* ---- the loop thread ----------------------------------------------- */

/* Append the list head..tail to the queue *qh..*qt. */
static void xq_append(cf__xfer **qh, cf__xfer **qt, cf__xfer *head,
                      cf__xfer *tail) {
    tail->next = NULL;
    if (*qt)
        (*qt)->next = head;
    else
        *qh = head;
    *qt = tail;
}

static void pending_push(cf__loop *lp, cf__xfer *x) {
    xq_append(&lp->pending, &lp->pending_tail, x, x);
}

/* Start pending transfers that are due while slots are free; return the
 * seconds until the next one is due (or 1 s). */
static double start_ready(cf__loop *lp) {
    double now = cf__now(), wait = 1.0;
    int started = 0;
    cf__xfer **pp = &lp->pending, *prev = NULL;
    while (*pp) {
        cf__xfer *x = *pp;
        int limit = atomic_load(&lp->io->max_inflight);
        if (x->due > now) {
            if (x->due - now < wait) wait = x->due - now;
            prev = x;
            pp = &x->next;
            continue;
        }
        if (lp->active >= limit) {
            wait = 1.0; /* a completion will wake us */
            break;
        }
        *pp = x->next;
        if (lp->pending_tail == x) lp->pending_tail = prev;
        x->next = NULL;
        cf_error e;
        cf__err_clear(&e);
        if (cf__xfer_start(lp, x, &e) != CF_OK) {
            cf__xfer_fail(x, e.code, e.msg);
            cf__xfer_finish(x);
            continue;
        }
        x->slot = lp->active;
        lp->slots[lp->active++] = x;
        inflight_up(lp->io);
        cf__hedge_note_request(&lp->hedge);
        started = 1;
    }
    /* What started now may need a hedge sooner than the next look the
     * last one planned (an idle loop plans one a second away). */
    double hedge_ms = lp->io->opts.hedge_after_ms;
    if (started && hedge_ms >= 0) {
        double d = cf__hedge_delay(&lp->hedge, hedge_ms);
        if (d >= 0 && now + d < lp->hedge.next_scan)
            lp->hedge.next_scan = now + d;
    }
    return wait;
}

/* Active transfers sit in slots[0, active): remove by moving the last. */
static void slot_remove(cf__loop *lp, cf__xfer *x) {
    int i = x->slot;
    lp->slots[i] = lp->slots[--lp->active];
    lp->slots[i]->slot = i;
    atomic_fetch_sub(&lp->io->inflight, 1);
}

/* ---- hedged requests (policy in hedge.c) --------------------------- */

/* Free leg x, already out of multi and the slots, without callbacks: its
 * twin answers for the request. */
static void leg_free(cf__loop *lp, cf__xfer *x) {
    cf__xfer_move(x, CF__XS_DROPPED);
    cf__xfer_release(lp, x);
    cf__xfer_free(x);
}

/* Take the legs that lost out of multi (outside any curl callback).
 * Removing a handle also drops a completion curl may have queued for it. */
static void drop_lost(cf__loop *lp) {
    while (lp->lost) {
        cf__xfer *t = lp->lost;
        lp->lost = t->next;
        t->next = NULL;
        curl_multi_remove_handle(lp->multi, t->easy);
        slot_remove(lp, t);
        leg_free(lp, t);
    }
}

/* Send a second copy of every request that has waited longer than the
 * hedge delay for its first byte, while slots and tokens last.  Looks
 * at most every 10 ms, when the first waiting request's time comes
 * (start_ready brings it forward for new ones); returns the seconds
 * until it should look again. */
static double hedge_scan(cf__loop *lp) {
    if (lp->io->opts.hedge_after_ms < 0) return 1.0;
    double now = cf__now();
    if (now < lp->hedge.next_scan) return lp->hedge.next_scan - now;
    double d = cf__hedge_delay(&lp->hedge, lp->io->opts.hedge_after_ms);
    /* No delay yet (too few first-byte times): the sample that makes it
     * known brings the next look forward (cf__hedge_note_ttfb), so an
     * idle loop keeps sleeping a second at a time. */
    double next = now + 1.0;
    /* Hedges may go an eighth over max_inflight: when the queue keeps
     * every slot busy, a late request is just when one is needed. */
    int limit = atomic_load(&lp->io->max_inflight);
    limit += limit / 8 + 1;
    int n = lp->active; /* legs started here are not looked at */
    for (int i = 0; d >= 0 && i < n; i++) {
        cf__xfer *x = lp->slots[i];
        /* Sent twice already, lost, or answering. */
        if (x->leg != CF__LEG_ONLY || x->state != CF__XS_SENDING) continue;
        double at = x->t_start + d;
        if (at > now) {
            if (at < next) next = at;
            continue;
        }
        if (lp->active >= limit || lp->active >= CF_IO_MAX_INFLIGHT) break;
        if (!cf__hedge_take(&lp->hedge)) break;
        x->leg = CF__LEG_FIRST; /* once per request, whatever happens next */
        cf__xfer *h = cf__xfer_hedge(x);
        cf_error e;
        cf__err_clear(&e);
        if (!h) continue;
        if (cf__xfer_start(lp, h, &e) != CF_OK) {
            leg_free(lp, h);
            continue;
        }
        h->slot = lp->active;
        lp->slots[lp->active++] = h;
        inflight_up(lp->io);
        atomic_fetch_add(&lp->io->n_hedges, 1);
        x->twin = h;
        h->twin = x;
    }
    if (next < now + 0.01) next = now + 0.01;
    lp->hedge.next_scan = next;
    return next - now;
}

/* Leg x of a hedged request ended (curl result rc) before any body byte.
 * 1: the server's answer stands (a good empty body, a redirect, 404, 403,
 * 412, a changed ETag or size, a Range ignored, an object too short) and
 * x wins, as a body would; 0: a failure its twin may not meet (a dropped
 * connection, 5xx, 429, a Content-Range off, which is retried), to be
 * forgotten while the twin goes on alone. */
static int leg_answered(const cf__xfer *x, CURLcode rc) {
    long hs = x->status;
    switch (x->abort) {
    case CF__AB_CHANGED:
    case CF__AB_NORANGE:
    case CF__AB_SHORT:
    case CF__AB_OVERFLOW: return 1;
    case CF__AB_MISMATCH: return 0;
    case CF__AB_NONE: break;
    }
    return hs >= 200 && hs < 500 && hs != 408 && hs != 429 &&
           (rc == CURLE_OK || (hs != 200 && hs != 206));
}

static void drain_done(cf__loop *lp) {
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(lp->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        CURL *e = m->easy_handle;
        CURLcode rc = m->data.result;
        cf__xfer *x = NULL;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
        curl_multi_remove_handle(lp->multi, e);
        slot_remove(lp, x);
        if (x->twin) {
            /* Ended before any body byte while its twin runs. */
            if (!leg_answered(x, rc)) {
                x->twin->twin = NULL;
                leg_free(lp, x);
                continue;
            }
            cf__io_hedge_won(x);
            drop_lost(lp);
        }
        if (cf__xfer_done(lp, x, rc)) {
            /* The answer came from the second copy (it was first, or the
             * first copy failed), whatever the answer is. */
            if (x->leg == CF__LEG_SECOND)
                atomic_fetch_add(&lp->io->n_hedge_wins, 1);
            cf__xfer_finish(x);
        } else {
            pending_push(lp, x);
        }
    }
}

static void fail_all(cf__xfer *list, const char *why) {
    while (list) {
        cf__xfer *n = list->next;
        cf__xfer_cancel(list, why);
        cf__xfer_finish(list);
        list = n;
    }
}

/* Fail every transfer in flight and waiting (pending: queued behind the
 * in-flight limit, or in a retry's backoff). */
static void abort_all(cf__loop *lp, const char *why) {
    drop_lost(lp);
    while (lp->active > 0) {
        cf__xfer *x = lp->slots[lp->active - 1];
        curl_multi_remove_handle(lp->multi, x->easy);
        slot_remove(lp, x);
        if (x->twin) { /* its twin fails for the request, once */
            x->twin->twin = NULL;
            leg_free(lp, x);
            continue;
        }
        curl_easy_cleanup(x->easy);
        x->easy = NULL;
        curl_slist_free_all(x->hdrs);
        x->hdrs = NULL;
        x->next = NULL;
        fail_all(x, why);
    }
    fail_all(lp->pending, why);
    lp->pending = lp->pending_tail = NULL;
}

/* CURLMOPT_SOCKETFUNCTION: keep the epoll set equal to what curl wants to
 * wait for on each socket. */
static int on_socket(CURL *e, curl_socket_t s, int what, void *ud, void *sp) {
    (void)e;
    (void)sp;
    cf__loop *lp = ud;
    if (what == CURL_POLL_REMOVE) {
        /* A socket curl closed itself left the set in on_close_socket;
         * others (the resolver's socket pair) are still open here. */
        if (!cf__loop_was_closed(lp, s)) epoll_ctl(lp->ep_fd, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    /* curl watches it: it is open, whatever was noted of its number. */
    cf__loop_note_closed(lp, s, 0);
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) |
                ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    ev.data.fd = s;
    if (epoll_ctl(lp->ep_fd, EPOLL_CTL_MOD, s, &ev) == 0) return 0;
    if (errno == ENOENT && epoll_ctl(lp->ep_fd, EPOLL_CTL_ADD, s, &ev) == 0)
        return 0;
    /* Only ENOMEM/ENOSPC are left.  Returning -1 would mark the whole
     * multi handle dead (every later call fails); unwatched, this socket's
     * transfer runs into its low-speed or request timeout instead and is
     * retried. */
    return 0;
}

/* Milliseconds until curl's next timer (connect and transfer timeouts,
 * handles just added), or -1 for none.  Asked each time rather than kept
 * from CURLMOPT_TIMERFUNCTION: curl skips that callback when the next
 * expiry equals the last one it reported, which a cleared timer would
 * then never hear of again. */
static long curl_timer_ms(cf__loop *lp) {
    long ms = -1;
    if (curl_multi_timeout(lp->multi, &ms) != CURLM_OK) ms = -1;
    return ms;
}

/* Wait for ready sockets, a wakeup or curl's next timer (at most wait_s,
 * which start_ready keeps to 1 s) and let curl act on them. */
static void loop_wait(cf__loop *lp, double wait_s) {
    long tmo = curl_timer_ms(lp);
    if (tmo >= 0 && tmo / 1000.0 < wait_s) wait_s = tmo / 1000.0;
    int ms = wait_s <= 0 ? 0 : (int)ceil(wait_s * 1000.0);
    struct epoll_event evs[64];
    int n = epoll_wait(lp->ep_fd, evs, 64, ms);
    int running;
    for (int i = 0; i < n; i++) {
        int fd = evs[i].data.fd;
        uint32_t ev = evs[i].events;
        if (fd == lp->wake_fd) {
            uint64_t v;
            while (read(fd, &v, sizeof v) < 0 && errno == EINTR) {
            }
            continue;
        }
        /* A hang-up is read as such by curl: report it readable. */
        int act = ((ev & (EPOLLIN | EPOLLHUP)) ? CURL_CSELECT_IN : 0) |
                  ((ev & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                  ((ev & EPOLLERR) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(lp->multi, fd, act, &running);
    }
    if (curl_timer_ms(lp) == 0)
        curl_multi_socket_action(lp->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    drop_lost(lp);
}

static void *loop_main(void *arg) {
    cf__loop *lp = arg;
    cf__thread_name("cf-io");
    for (;;) {
        pthread_mutex_lock(&lp->mu);
        int stop = lp->stop;
        cf__xfer *q = lp->q_head, *qt = lp->q_tail;
        lp->q_head = lp->q_tail = NULL;
        lp->queued = 0;
        pthread_cond_broadcast(&lp->room);
        pthread_mutex_unlock(&lp->mu);
        if (stop) {
            fail_all(q, "the I/O context was closed");
            break;
        }
        /* Append the new submissions after older pending work. */
        if (q) xq_append(&lp->pending, &lp->pending_tail, q, qt);
        if (atomic_load(&lp->io->cancel)) {
            abort_all(lp, "cancelled: its reader is closing");
            loop_wait(lp, 1.0); /* until woken by a submission */
            continue;
        }

        /* Adding a handle sets curl's timer to 0, so the wait below
         * returns at once and the timeout action starts it. */
        double wait = start_ready(lp);
        double hw = hedge_scan(lp);
        loop_wait(lp, hw < wait ? hw : wait);
        drain_done(lp);
    }
    /* Closing: fail whatever is still in flight or waiting. */
    abort_all(lp, "the I/O context was closed");
    return NULL;
}

static void loop_destroy(cf__loop *lp) {
    for (int i = 0; i < lp->nspare; i++) curl_easy_cleanup(lp->spare[i]);
    free(lp->spare);
    if (lp->multi) curl_multi_cleanup(lp->multi);
    if (lp->share) curl_share_cleanup(lp->share);
    free(lp->closed); /* after the last connection closed */
    if (lp->ep_fd >= 0) close(lp->ep_fd);
    if (lp->wake_fd >= 0) close(lp->wake_fd);
    pthread_cond_destroy(&lp->room);
    pthread_cond_destroy(&lp->decode_room);
    pthread_mutex_destroy(&lp->mu);
    free(lp);
}

/* NULL with *st and err set when it cannot be made. */
static cf__loop *loop_new(cf_io *io, pid_t pid, cf_status *st, cf_error *err) {
    cf__loop *lp = cf__calloc(1, sizeof *lp);
    if (!lp) {
        *st = cf__err(err, CF_E_NOMEM, "I/O loop: out of memory");
        return NULL;
    }
    lp->io = io;
    lp->pid = pid;
    lp->ep_fd = lp->wake_fd = -1;
    lp->rng = (uint64_t)(cf__now() * 1e9) ^ ((uint64_t)pid << 32) ^
              (uint64_t)(uintptr_t)lp;
    if (!lp->rng) lp->rng = 1;
    cf__hedge_init(&lp->hedge);
    cf__quota_init(&lp->quota, io->opts.retry_budget, cf__now());
    pthread_mutex_init(&lp->mu, NULL);
    pthread_cond_init(&lp->room, NULL);
    pthread_cond_init(&lp->decode_room, NULL);
    size_t ncpu = cf__ncpu();
    lp->decode_max = ncpu > 1024 ? 1024 : (int)ncpu;
    lp->spare = cf__calloc(CF_IO_MAX_INFLIGHT, sizeof *lp->spare);
    lp->multi = curl_multi_init();
    lp->share = curl_share_init();
    if (!lp->spare || !lp->multi || !lp->share) {
        loop_destroy(lp);
        *st = cf__err(err, CF_E_NOMEM,
                      "I/O loop: libcurl handles could not be created");
        return NULL;
    }
    lp->ep_fd = epoll_create1(EPOLL_CLOEXEC);
    lp->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event wev;
    memset(&wev, 0, sizeof wev);
    wev.events = EPOLLIN;
    wev.data.fd = lp->wake_fd;
    if (lp->ep_fd < 0 || lp->wake_fd < 0 ||
        epoll_ctl(lp->ep_fd, EPOLL_CTL_ADD, lp->wake_fd, &wev) != 0) {
        int e = errno;
        loop_destroy(lp);
        *st = cf__err(err, CF_E_IO,
                      "I/O loop: could not create its epoll set: %s",
                      strerror(e));
        return NULL;
    }
    curl_multi_setopt(lp->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(lp->multi, CURLMOPT_SOCKETDATA, lp);
    /* Handles of one loop share DNS answers and TLS sessions; only the loop
     * thread uses them, so no share lock callbacks are needed. */
    curl_share_setopt(lp->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(lp->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_multi_setopt(lp->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(lp->multi, CURLMOPT_MAXCONNECTS, (long)CF_IO_MAX_INFLIGHT);
    curl_multi_setopt(lp->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 256L);
    if (pthread_create(&lp->thread, NULL, loop_main, lp) != 0) {
        loop_destroy(lp);
        *st = cf__err(err, CF_E_IO, "I/O loop: could not start its thread");
        return NULL;
    }
    return lp;
}

void cf__io_cancel(cf_io *io, int on) {
    atomic_store(&io->cancel, on ? 1 : 0);
    cf__loop *lp = atomic_load(&io->loop);
    if (lp && lp->pid == getpid()) loop_wake(lp);
}

static void loop_stop(cf__loop *lp) {
    pthread_mutex_lock(&lp->mu);
    lp->stop = 1;
    pthread_mutex_unlock(&lp->mu);
    loop_wake(lp);
    pthread_join(lp->thread, NULL);
    loop_destroy(lp);
}

/* The loop of this process, created on first use or after a fork; NULL
 * with *st (and err, which may be NULL) set when it cannot be made. */
static cf__loop *get_loop(cf_io *io, cf_status *st, cf_error *err) {
    pid_t me = getpid();
    for (;;) {
        cf__loop *lp = atomic_load(&io->loop);
        if (lp && lp->pid == me) return lp;
        cf__loop *nl = loop_new(io, me, st, err);
        if (!nl) return NULL;
        nl->abandoned = lp;
        if (atomic_compare_exchange_strong(&io->loop, &lp, nl)) {
            /* A parent's loop (lp != NULL) is deliberately leaked: its
             * thread does not exist here and its connections are the
             * parent's.  Requests in flight there are not ours either. */
            if (lp) atomic_store(&io->inflight, 0);
            return nl;
        }
        loop_stop(nl); /* another thread won the race */
    }
}

static int on_loop_thread(cf__loop *lp) {
    return pthread_equal(pthread_self(), lp->thread);
}

cf_status cf__io_submit(cf_io *io, cf__xfer **xs, size_t n, cf_error *err) {
    if (!n) return CF_OK;
    cf_status st = CF_OK;
    cf__loop *lp = get_loop(io, &st, err);
    if (!lp) return st;
    double now = cf__now();
    pthread_mutex_lock(&lp->mu);
    /* Backpressure: wait while the queue is full, except on the loop
     * thread itself (a completion callback submitting more work). */
    while (!lp->stop && lp->queued >= CF__QUEUE_MAX && !on_loop_thread(lp))
        pthread_cond_wait(&lp->room, &lp->mu);
    if (lp->stop) {
        pthread_mutex_unlock(&lp->mu);
        return cf__err(err, CF_E_STATE, "the I/O context is closing");
    }
    for (size_t i = 0; i < n; i++) {
        cf__xfer *x = xs[i];
        x->t0 = now; /* reset when its first attempt starts */
        x->due = 0;
        cf__xfer_move(x, CF__XS_QUEUED);
        xq_append(&lp->q_head, &lp->q_tail, x, x);
        lp->queued++;
    }
    pthread_mutex_unlock(&lp->mu);
    loop_wake(lp);
    return CF_OK;
}

void *cf__io_decode_enter(cf_io *io) {
    if (!io) return NULL;
    cf_status st;
    cf__loop *lp = get_loop(io, &st, NULL);
    if (!lp) return NULL; /* no loop, nothing to protect */
    pthread_mutex_lock(&lp->mu);
    while (lp->decoding >= lp->decode_max && !lp->stop)
        pthread_cond_wait(&lp->decode_room, &lp->mu);
    lp->decoding++;
    pthread_mutex_unlock(&lp->mu);
    return lp;
}

void cf__io_decode_leave(void *token) {
    cf__loop *lp = token;
    if (!lp) return;
    pthread_mutex_lock(&lp->mu);
    lp->decoding--;
    pthread_cond_signal(&lp->decode_room);
    pthread_mutex_unlock(&lp->mu);
}

void cf_io_free(cf_io *io) {
    if (!io) return;
    cf__loop *lp = atomic_load(&io->loop);
    if (lp && lp->pid == getpid()) loop_stop(lp);
    cf__io_upper_free(io);
    cf__fdpool_unref(io->fdpool); /* its files hold their own references */
    free(io->header_cache_dir);
    free(io->ca_file);
    free(io);
    curl_global_cleanup();
}
