/*
 * http.c - one HTTP range transfer on the io loop thread: building the
 * request (Range, If-Match, auth headers), checking the response against
 * what was asked (status, Content-Range, length, pinned ETag and size)
 * before a single byte reaches a caller's buffer, and deciding after each
 * attempt whether to finish, resume, retry, follow a redirect or fail.
 *
 * Bodies are scattered straight into the callers' buffers; a merged
 * request skips the gap bytes.  A truncated body is resumed from the first
 * missing byte with If-Match, so a caller never sees a short buffer; a
 * resume of a body that made progress is no retry (the request's deadline
 * bounds it), so that a link that cuts every response short still
 * delivers.
 *
 * Change detection: the first response pins the object's size, its ETag
 * and its Last-Modified.  Later requests carry If-Match with a strong ETag,
 * else If-Unmodified-Since with the Last-Modified (a weak ETag cannot be
 * used with If-Match); every response must show the same validators: one
 * that differs, or that is missing where the first response had one, is
 * "object changed while reading" (a server that drops its ETag mid-read
 * cannot be trusted to be serving the same object).
 */
#include "io_internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static int ieq_prefix(const char *s, size_t n, const char *name) {
    size_t k = strlen(name);
    return n > k && s[k] == ':' && strncasecmp(s, name, k) == 0;
}

/* Header value without surrounding blanks / CRLF, copied into out (cut
 * to fit).  Returns 0 when it was cut or holds control characters: not
 * fit to be sent back to the server in a header of ours. */
static int header_value(const char *s, size_t n, size_t skip, char *out,
                        size_t outlen) {
    size_t a = skip, b = n;
    while (a < b && (s[a] == ' ' || s[a] == '\t')) a++;
    while (b > a && (s[b - 1] == '\r' || s[b - 1] == '\n' || s[b - 1] == ' '))
        b--;
    size_t k = b - a;
    int whole = k < outlen;
    if (!whole) k = outlen - 1;
    memcpy(out, s + a, k);
    out[k] = 0;
    for (size_t i = 0; i < k; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f) whole = 0;
    return whole;
}

static int parse_u64(const char **p, uint64_t *v) {
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return 0;
    uint64_t r = 0;
    while (isdigit((unsigned char)*s)) {
        if (r > (UINT64_MAX - 9) / 10) return 0;
        r = r * 10 + (uint64_t)(*s - '0');
        s++;
    }
    *p = s;
    *v = r;
    return 1;
}

/* "bytes A-B/T", or "bytes A-B/" followed by a star (T = UINT64_MAX). */
static int parse_content_range(const char *v, uint64_t *a, uint64_t *b,
                               uint64_t *t) {
    if (strncasecmp(v, "bytes", 5) != 0) return 0;
    v += 5;
    while (*v == ' ') v++;
    if (!parse_u64(&v, a) || *v++ != '-' || !parse_u64(&v, b) || *v++ != '/')
        return 0;
    if (*v == '*') {
        *t = UINT64_MAX;
        v++;
    } else if (!parse_u64(&v, t)) {
        return 0;
    }
    return *v == 0 && *a <= *b && (*t == UINT64_MAX || *b < *t);
}

/* Forget what the last response's headers said (a new attempt, or a new
 * response within one, e.g. after 100 Continue). */
static void reset_response(cf__xfer *x) {
    x->status = 0;
    x->have_cr = 0;
    x->content_length = -1;
    x->etag[0] = x->last_modified[0] = x->ms_code[0] = x->location[0] = 0;
    x->location_long = 0;
    x->retry_after = -1;
    x->hdr_bytes = 0;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud) {
    cf__xfer *x = ud;
    size_t n = size * nitems;
    char v[1024];
    if (x->state == CF__XS_LOST) return 0; /* its twin answered first: abort */
    if (x->state == CF__XS_SENDING) {
        cf__xfer_move(x, CF__XS_HEADERS);
        cf__hedge_note_ttfb(&x->lp->hedge, cf__now() - x->t_start);
    }
    if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        /* A new response (e.g. after 100 Continue): forget the last.  (A
         * status line among a chunked body's trailers leaves BODY as it
         * is: the headers were validated.) */
        const char *sp = memchr(buf, ' ', n);
        reset_response(x);
        if (x->state == CF__XS_HEADERS_END) cf__xfer_move(x, CF__XS_HEADERS);
        x->hdr_bytes = n;
        if (sp && (size_t)(sp - buf) + 4 <= n && isdigit((unsigned char)sp[1]) &&
            isdigit((unsigned char)sp[2]) && isdigit((unsigned char)sp[3]))
            x->status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
        return n;
    }
    x->hdr_bytes += n;
    if (buf[0] == '\r' || buf[0] == '\n') { /* the blank line: headers end */
        if (x->state == CF__XS_HEADERS) cf__xfer_move(x, CF__XS_HEADERS_END);
        return n;
    }
    if (ieq_prefix(buf, n, "content-range")) {
        header_value(buf, n, 14, v, sizeof v);
        x->have_cr = parse_content_range(v, &x->cr_start, &x->cr_end,
                                         &x->cr_total);
        if (!x->have_cr) x->have_cr = -1; /* present but unreadable */
    } else if (ieq_prefix(buf, n, "content-length")) {
        header_value(buf, n, 15, v, sizeof v);
        const char *p = v;
        uint64_t cl;
        if (parse_u64(&p, &cl) && !*p && cl <= INT64_MAX)
            x->content_length = (int64_t)cl;
    } else if (ieq_prefix(buf, n, "etag")) {
        /* One we could not send back in If-Match as it came is no ETag:
         * change detection then rests on Last-Modified. */
        if (!header_value(buf, n, 5, x->etag, sizeof x->etag)) x->etag[0] = 0;
    } else if (ieq_prefix(buf, n, "last-modified")) {
        if (!header_value(buf, n, 14, x->last_modified, sizeof x->last_modified) ||
            curl_getdate(x->last_modified, NULL) <= 0)
            x->last_modified[0] = 0;
    } else if (ieq_prefix(buf, n, "retry-after")) {
        header_value(buf, n, 12, v, sizeof v);
        const char *p = v;
        uint64_t secs;
        /* Kept as asked, for the message; the wait is capped in retry(). */
        if (parse_u64(&p, &secs) && !*p) {
            x->retry_after = secs > 1e9 ? 1e9 : (double)secs;
        } else {
            time_t when = curl_getdate(v, NULL);
            time_t now = time(NULL);
            if (when > 0)
                x->retry_after = when > now ? (double)(when - now) : 0;
        }
    } else if (ieq_prefix(buf, n, "x-ms-error-code")) {
        header_value(buf, n, 16, x->ms_code, sizeof x->ms_code);
    } else if (ieq_prefix(buf, n, "location")) {
        header_value(buf, n, 9, x->location, sizeof x->location);
        if (n - 9 >= sizeof x->location) x->location_long = 1;
    }
    return n;
}

static void set_abort(cf__xfer *x, enum cf__abort why, const char *fmt, ...)
    CF__PRINTF(3, 4);
static void set_abort(cf__xfer *x, enum cf__abort why, const char *fmt, ...) {
    x->abort = why;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->abort_msg, sizeof x->abort_msg, fmt, ap);
    va_end(ap);
}

/* A strong ETag: one that If-Match can compare. */
static int strong_etag(const char *etag) {
    return etag[0] && strncmp(etag, "W/", 2) != 0;
}

/* The validator `what` (ETag, Last-Modified) was `was` in the first
 * response and is `now` ("" when missing) in this one. */
static void set_changed(cf__xfer *x, const char *what, const char *was,
                        const char *now) {
    if (now[0])
        set_abort(x, CF__AB_CHANGED,
                  "object changed while reading (%s was %.60s, now %.60s)",
                  what, was, now);
    else
        set_abort(x, CF__AB_CHANGED,
                  "object may have changed while reading: the first response "
                  "had %s %.60s, this one has none",
                  what, was);
}

/* Compare the response's ETag, Last-Modified and total size with what the
 * src pinned; pin them on the first response.  A validator the first
 * response had must be there, the same, in every later one. */
static int check_identity(cf__xfer *x, uint64_t total) {
    cf__src *s = x->src;
    int ok = 1;
    pthread_mutex_lock(&s->mu);
    if (s->etag[0] && strcmp(s->etag, x->etag) != 0) {
        set_changed(x, "ETag", s->etag, x->etag);
        ok = 0;
    } else if (!strong_etag(s->etag) && s->last_modified[0] &&
               strcmp(s->last_modified, x->last_modified) != 0) {
        /* Without a strong ETag, Last-Modified is the validator (a strong
         * ETag says more: replicas may disagree on the dates). */
        set_changed(x, "Last-Modified", s->last_modified, x->last_modified);
        ok = 0;
    } else if (total != UINT64_MAX && s->size != UINT64_MAX && total != s->size) {
        set_abort(x, CF__AB_CHANGED,
                  "object changed while reading (size was %" PRIu64
                  ", now %" PRIu64 ")",
                  s->size, total);
        ok = 0;
    } else {
        /* Only the first (header) read pins the ETag, so that
         * cf__src_etag never changes under a reader once it returned. */
        if (x->head && !s->etag[0] && x->etag[0]) {
            size_t k = strlen(x->etag);
            memcpy(s->etag, x->etag, k + 1);
        }
        /* Not cf__src_etag's pointer: pinned by any first response, also
         * after a header-cache hit (which knows no date). */
        if (!s->last_modified[0] && x->last_modified[0])
            memcpy(s->last_modified, x->last_modified, sizeof s->last_modified);
        if (s->size == UINT64_MAX && total != UINT64_MAX) s->size = total;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* Validate status and headers once, before the first body byte. */
static int check_headers(cf__xfer *x) {
    uint64_t want0 = x->off + x->got;
    if (x->status == 206) {
        if (x->have_cr != 1) {
            set_abort(x, CF__AB_MISMATCH,
                      "HTTP 206 without a readable Content-Range");
            return 0;
        }
        uint64_t want1 = x->off + x->len - 1;
        if (x->head && x->got == 0) {
            if (x->cr_total == UINT64_MAX) {
                set_abort(x, CF__AB_MISMATCH,
                          "Content-Range does not give the object size");
                return 0;
            }
            if (x->cr_total == 0) {
                set_abort(x, CF__AB_MISMATCH, "HTTP 206 for an empty object");
                return 0;
            }
            if (x->cr_total < x->len) want1 = x->cr_total - 1;
        }
        if (x->cr_total != UINT64_MAX && want1 >= x->cr_total) {
            set_abort(x, CF__AB_SHORT,
                      "object shorter than its header says, or it changed: "
                      "bytes=%" PRIu64 "-%" PRIu64 " asked, object has %" PRIu64
                      " bytes",
                      want0, want1, x->cr_total);
            return 0;
        }
        if (x->cr_start != want0 || x->cr_end != want1) {
            set_abort(x, CF__AB_MISMATCH,
                      "Content-Range bytes %" PRIu64 "-%" PRIu64
                      " does not match the requested bytes=%" PRIu64
                      "-%" PRIu64,
                      x->cr_start, x->cr_end, want0, want1);
            return 0;
        }
        if (x->content_length >= 0 &&
            (uint64_t)x->content_length != want1 - want0 + 1) {
            set_abort(x, CF__AB_MISMATCH,
                      "Content-Length %" PRId64 " does not match Content-Range",
                      x->content_length);
            return 0;
        }
        if (!check_identity(x, x->cr_total)) return 0;
        if (x->head && x->got == 0) x->len = want1 + 1;
        return 1;
    }
    if (x->status == 200) {
        uint64_t size;
        pthread_mutex_lock(&x->src->mu);
        size = x->src->size;
        pthread_mutex_unlock(&x->src->mu);
        int whole_ok = 0;
        if (x->got == 0 && x->off == 0) {
            if (x->head) {
                /* A small object sent whole is the answer to a header read
                 * when it fits in what was asked for. */
                if (x->content_length >= 0 &&
                    (uint64_t)x->content_length <= x->len) {
                    whole_ok = 1;
                    x->len = (uint64_t)x->content_length;
                } else if (x->content_length < 0) {
                    whole_ok = 1;
                    x->len_open = 1;
                }
            } else if (size != UINT64_MAX && x->len == size &&
                       (x->content_length < 0 ||
                        (uint64_t)x->content_length == size)) {
                whole_ok = 1;
            }
        }
        if (!whole_ok) {
            char cl[32] = "unknown";
            if (x->content_length >= 0)
                snprintf(cl, sizeof cl, "%" PRId64, x->content_length);
            set_abort(x, CF__AB_NORANGE,
                      "server ignored the Range header (not range-capable): "
                      "HTTP 200 with %s bytes for bytes=%" PRIu64 "-%" PRIu64,
                      cl, want0, x->off + x->len - 1);
            return 0;
        }
        if (!check_identity(x, x->content_length >= 0
                                   ? (uint64_t)x->content_length
                                   : UINT64_MAX))
            return 0;
        return 1;
    }
    return 1; /* error statuses: body is kept for the error code */
}

static size_t on_body(char *buf, size_t size, size_t nitems, void *ud) {
    cf__xfer *x = ud;
    size_t n = size * nitems;
    if (x->state == CF__XS_LOST) return 0; /* its twin wrote first: not a byte from here */
    if (x->state != CF__XS_BODY) {
        cf__xfer_move(x, CF__XS_BODY);
        if (!check_headers(x)) return 0; /* aborts the transfer */
        /* The first leg of a hedged request to start a good body is the
         * one that writes into the callers' buffers. */
        if (x->twin && (x->status == 200 || x->status == 206))
            cf__io_hedge_won(x);
    }
    if (x->status != 200 && x->status != 206) {
        size_t room = sizeof x->errbody - x->errbody_len;
        size_t k = n < room ? n : room;
        memcpy(x->errbody + x->errbody_len, buf, k);
        x->errbody_len += k;
        /* The status is the answer and the head of the body holds the
         * service's error code: stop there.  Reading on, an endless error
         * body (a hostile or broken server) would hold the request until
         * its deadline. */
        return k < n ? 0 : n;
    }
    if (x->got + n > x->len) {
        if (x->len_open)
            set_abort(x, CF__AB_NORANGE,
                      "server ignored the Range header (not range-capable): "
                      "HTTP 200 body longer than the %" PRIu64 " bytes asked for",
                      x->len);
        else
            set_abort(x, CF__AB_OVERFLOW,
                      "server sent more than the %" PRIu64 " bytes asked for",
                      x->len);
        return 0;
    }
    uint64_t p0 = x->off + x->got, p1 = p0 + n;
    for (size_t i = 0; i < x->nreq; i++) {
        cf__range_req *r = x->reqs[i];
        uint64_t a = r->off > p0 ? r->off : p0;
        uint64_t b = r->off + r->len < p1 ? r->off + r->len : p1;
        if (a < b) memcpy(r->dst + (a - r->off), buf + (a - p0), (size_t)(b - a));
    }
    x->got += n;
    x->attempt_got += n;
    atomic_fetch_add(&x->src->io->n_bytes, n);
    return n;
}

static const char *current_url(const cf__xfer *x) {
    return x->redirect_url ? x->redirect_url : cf__auth_http_url(x->auth);
}

/* A time in seconds as the long that curl takes, in units of `unit`
 * seconds (1e-3 for milliseconds), at least 1.  Options may say "no
 * bound" (request_timeout_s = inf, Python's float("inf")) or be huge: a
 * plain cast of those is undefined (LONG_MIN on x86-64, which made every
 * request time out after 1 ms), so they become INT_MAX units, 24 days
 * in milliseconds, longer than any request. */
static long curl_time(double secs, double unit) {
    double v = secs / unit;
    if (!(v >= 1.0)) return 1;
    return v >= (double)INT_MAX ? (long)INT_MAX : (long)v;
}

cf_status cf__xfer_start(cf__loop *lp, cf__xfer *x, cf_error *err) {
    cf__src *s = x->src;
    const cf_io_options *o = &lp->io->opts;
    cf__src_auth_latest(s, &x->auth);
    reset_response(x);
    x->lp = lp;
    x->t_start = cf__now();
    x->abort = CF__AB_NONE;
    x->abort_msg[0] = 0;
    x->errbody_len = 0;
    x->attempt_got = 0;

    /* The deadline runs from the first attempt, not from submission: time
     * spent queued behind max_inflight is not the request's fault. */
    if (x->attempts == 0) x->t0 = cf__now();
    double left = x->t0 + o->request_timeout_s - cf__now();
    if (left <= 0)
        return cf__err(err, CF_E_TIMEOUT,
                       "%s: request deadline of %g s reached", s->name,
                       o->request_timeout_s);

    char range[64], ifm[200] = "", ius[80] = "";
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64,
             x->off + x->got, x->off + x->len - 1);
    pthread_mutex_lock(&s->mu);
    /* A weak ETag can never match If-Match's strong comparison: without a
     * strong one, the date is the condition. */
    if (strong_etag(s->etag))
        snprintf(ifm, sizeof ifm, "%s", s->etag);
    else if (s->last_modified[0])
        snprintf(ius, sizeof ius, "%s", s->last_modified);
    pthread_mutex_unlock(&s->mu);

    struct curl_slist *h = NULL, *t;
    char line[256];
    snprintf(line, sizeof line, "Range: %s", range);
    if (!(t = curl_slist_append(h, line))) goto fail;
    h = t;
    if (ifm[0]) {
        snprintf(line, sizeof line, "If-Match: %s", ifm);
        if (!(t = curl_slist_append(h, line))) goto fail;
        h = t;
    }
    if (ius[0]) {
        snprintf(line, sizeof line, "If-Unmodified-Since: %s", ius);
        if (!(t = curl_slist_append(h, line))) goto fail;
        h = t;
    }
    /* Credentials never travel to a host the user did not name. */
    if (!x->foreign_host) {
        cf_status st = cf__auth_sign(x->auth, "GET", range, ifm[0] ? ifm : NULL,
                                     ius[0] ? ius : NULL, &h, err);
        if (st != CF_OK) { /* its message names the URL already */
            curl_slist_free_all(h);
            return st;
        }
    }

    CURL *e = lp->nspare ? lp->spare[--lp->nspare] : curl_easy_init();
    if (!e) goto fail;
    curl_easy_reset(e);
    x->easy = e;
    x->hdrs = h;
    curl_easy_setopt(e, CURLOPT_URL, current_url(x));
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)x);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    cf__loop_socket_hooks(lp, e);
    curl_easy_setopt(e, CURLOPT_SHARE, lp->share);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* handled below */
    /* A proxy's answer to CONNECT is not the server's response. */
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* Wait to learn whether a new connection multiplexes (HTTP/2) before
     * opening more, but not for a hedge: over HTTP/1.1 curl learns it
     * only from the first response, which is the one that is late.  (On
     * a connection known to multiplex, the hedge is another stream of it:
     * that helps against a slow server, not a stalled connection; a fresh
     * connection would cost two more round trips every time.) */
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, x->leg == CF__LEG_SECOND ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    /* Receive buffer sized to the body, from 64 KiB up to curl's 512 KiB
     * maximum: fewer recv calls, callbacks and window-update ACKs per tile.
     * Measured on loopback with 1.3 MB tiles: 0.6 CPU s less per GB
     * delivered (7%) than a fixed 64 KiB.  It never exceeds the transfer's
     * own length, so it at most doubles the memory of the bytes in flight. */
    uint64_t want = x->len - x->got;
    long bufsize = want < 65536 ? 65536L
                   : want > (512u << 10) ? (long)(512u << 10) : (long)want;
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, bufsize);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     curl_time(o->connect_timeout_s, 1e-3));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, curl_time(left, 1e-3));
    if (o->low_speed_time_s > 0 && o->low_speed_bytes > 0) {
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, o->low_speed_bytes);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                         curl_time(o->low_speed_time_s + 0.999, 1.0));
    }
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, o->verify_tls ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, o->verify_tls ? 2L : 0L);
    if (o->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
    if (curl_multi_add_handle(lp->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        x->easy = NULL;
        curl_slist_free_all(h);
        x->hdrs = NULL;
        return cf__err(err, CF_E_IO, "%s: could not start a transfer", s->name);
    }
    x->attempts++;
    atomic_fetch_add(&lp->io->n_requests, 1);
    atomic_fetch_add(&s->requests, 1);
    cf__xfer_move(x, CF__XS_SENDING);
    return CF_OK;
fail:
    curl_slist_free_all(h);
    return cf__err(err, CF_E_NOMEM, "%s: out of memory", s->name);
}

static void set_result(cf__xfer *x, cf_status code, const char *msg) {
    x->result = code;
    x->err.code = code;
    x->err.http_status = (int)x->status;
    snprintf(x->err.msg, sizeof x->err.msg, "%s", msg);
    cf__msg_escape(x->err.msg, sizeof x->err.msg);
}

void cf__xfer_fail(cf__xfer *x, cf_status code, const char *msg) {
    set_result(x, code, msg);
    cf__xfer_move(x, CF__XS_FAILED);
}

void cf__xfer_cancel(cf__xfer *x, const char *msg) {
    set_result(x, CF_E_STATE, msg);
    cf__xfer_move(x, CF__XS_CANCELLED);
}

static int fail(cf__xfer *x, cf_status code, const char *fmt, ...)
    CF__PRINTF(3, 4);
static int fail(cf__xfer *x, cf_status code, const char *fmt, ...) {
    char m[sizeof x->err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    cf__xfer_fail(x, code, m);
    return 1;
}

/* What a failed attempt was, for the retry rules. */
enum retry_kind {
    RETRY_ERROR,   /* an error answer, or a failure before any body byte */
    RETRY_TIMEOUT, /* a stall or a connect timeout: costs the quota more */
    RETRY_RESUME   /* a body that made progress, then broke off */
};

/* "45 s", "1.5 min", "2 h", "1 day": a wait a server asked for, for
 * people. */
static void human_secs(double secs, char *out, size_t n) {
    if (secs >= 86400)
        snprintf(out, n, "%.3g day%s", secs / 86400, secs >= 2 * 86400 ? "s" : "");
    else if (secs >= 3600)
        snprintf(out, n, "%.3g h", secs / 3600);
    else if (secs >= 120)
        snprintf(out, n, "%.3g min", secs / 60);
    else
        snprintf(out, n, "%.0f s", secs);
}

/* Schedule another attempt, or fail with `code` and `why` when the
 * request's retries, its deadline or the io's retry quota are spent.  A
 * resume of a body that made progress is no retry: neither max_retries
 * nor the quota count it, only the deadline bounds it. */
static int retry(cf__loop *lp, cf__xfer *x, cf_status code, const char *why,
                 enum retry_kind kind) {
    cf_io *io = lp->io;
    const cf_io_options *o = &io->opts;
    const char *n = x->src->name;
    char rng[64];
    snprintf(rng, sizeof rng, "bytes=%" PRIu64 "-%" PRIu64, x->off,
             x->off + x->len - 1);
    double now = cf__now(), deadline = x->t0 + o->request_timeout_s;
    if (kind == RETRY_RESUME) {
        /* The first backoff step only: it spaces out the connections to a
         * server that hands out a few bytes on each. */
        double delay = cf__io_backoff(lp, 0, -1);
        if (now + delay > deadline)
            return fail(x, CF_E_TIMEOUT,
                        "%s: %s: %s (request deadline of %g s reached after %d "
                        "attempts, %d of them resumes of a body cut short)",
                        n, rng, why, o->request_timeout_s, x->attempts,
                        x->resumes);
        x->resumes++;
        atomic_fetch_add(&io->n_retries, 1);
        x->due = now + delay;
        cf__xfer_move(x, CF__XS_RESUME);
        return 0;
    }
    if (x->retries >= o->max_retries)
        return fail(x, code, "%s: %s: %s (gave up after %d attempts)", n, rng,
                    why, x->attempts);
    if (x->retry_after > deadline - now) {
        char asked[32];
        human_secs(x->retry_after, asked, sizeof asked);
        return fail(x, CF_E_HTTP,
                    "%s: %s: %s: the server asked to wait %s (Retry-After) "
                    "before trying again, longer than the request deadline "
                    "of %g s allows",
                    n, rng, why, asked, o->request_timeout_s);
    }
    double ra = x->retry_after > 3600 ? 3600 : x->retry_after;
    double delay = cf__io_backoff(lp, x->retries, ra);
    if (now + delay > deadline)
        return fail(x, CF_E_TIMEOUT,
                    "%s: %s: %s (request deadline of %g s reached after %d "
                    "attempts)",
                    n, rng, why, o->request_timeout_s, x->attempts);
    double cost = kind == RETRY_TIMEOUT ? CF__QUOTA_TIMEOUT_COST
                                        : CF__QUOTA_RETRY_COST;
    if (!cf__quota_take(&lp->quota, cost, now))
        return fail(x, CF_E_TIMEOUT,
                    "%s: %s: %s (the I/O context's retry budget is used up: "
                    "at most %d retries at once, given back over %g s and by "
                    "requests that succeed)",
                    n, rng, why, o->retry_budget, CF__QUOTA_REFILL_S);
    x->quota_taken = cost;
    x->retries++;
    atomic_fetch_add(&io->n_retries, 1);
    x->due = now + delay;
    cf__xfer_move(x, CF__XS_BACKOFF);
    return 0;
}

/* Scheme, host and port (the scheme's default when absent) of the URL
 * held by u. */
static int url_parts(CURLU *u, char scheme[16], char host[256], char port[16]) {
    char *sc = NULL, *ho = NULL, *po = NULL;
    int ok = curl_url_get(u, CURLUPART_SCHEME, &sc, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_HOST, &ho, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_PORT, &po, CURLU_DEFAULT_PORT) == CURLUE_OK;
    if (ok) {
        snprintf(scheme, 16, "%s", sc);
        snprintf(host, 256, "%s", ho);
        snprintf(port, 16, "%s", po);
    }
    curl_free(sc);
    curl_free(ho);
    curl_free(po);
    return ok;
}

static int follow_redirect(cf__loop *lp, cf__xfer *x) {
    const char *n = x->src->name;
    if (!x->location[0] || x->location_long)
        return fail(x, CF_E_HTTP, "%s: HTTP %ld redirect without a usable Location",
                    n, x->status);
    if (++x->redirects > CF__MAX_REDIRECTS)
        return fail(x, CF_E_HTTP, "%s: more than %d redirects", n,
                    CF__MAX_REDIRECTS);
    /* One parse of the current URL: its parts, then the Location resolved
     * against it (relative ones included) and the target's parts. */
    CURLU *u = curl_url();
    char *target = NULL;
    char s0[16], h0[256], p0[16], s1[16], h1[256], p1[16];
    int ok = u && curl_url_set(u, CURLUPART_URL, current_url(x), 0) == CURLUE_OK &&
             url_parts(u, s0, h0, p0) &&
             curl_url_set(u, CURLUPART_URL, x->location, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_URL, &target, 0) == CURLUE_OK &&
             url_parts(u, s1, h1, p1);
    curl_url_cleanup(u);
    if (!ok) {
        curl_free(target);
        return fail(x, CF_E_HTTP, "%s: HTTP %ld redirect to an unreadable URL", n,
                    x->status);
    }
    int same = strcasecmp(s0, s1) == 0 && strcasecmp(h0, h1) == 0 &&
               strcmp(p0, p1) == 0;
    if (strcasecmp(s1, "https") != 0 && !same) {
        char red[CF__NAME_MAX];
        cf__redact_url(target, red, sizeof red);
        curl_free(target);
        return fail(x, CF_E_HTTP,
                    "%s: HTTP %ld redirect to %s refused (only https, or the "
                    "same scheme and host, is followed)",
                    n, x->status, red);
    }
    char *copy = cf__strdup(target);
    curl_free(target);
    if (!copy) return fail(x, CF_E_NOMEM, "%s: out of memory", n);
    free(x->redirect_url);
    x->redirect_url = copy;
    /* Once off the original host, stay without credentials. */
    if (strcasecmp(h0, h1) != 0 || strcmp(p0, p1) != 0) x->foreign_host = 1;
    x->due = 0;
    cf__xfer_move(x, CF__XS_REDIRECT);
    (void)lp;
    return 0;
}

void cf__xfer_release(cf__loop *lp, cf__xfer *x) {
    if (x->easy) {
        if (lp->nspare < CF_IO_MAX_INFLIGHT)
            lp->spare[lp->nspare++] = x->easy;
        else
            curl_easy_cleanup(x->easy);
        x->easy = NULL;
    }
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
}

/* FNV-1a of the host name of url (lowercase; up to ':', '/', '?', '#'
 * after the user info), 0 for none. */
static uint64_t host_hash(const char *url) {
    const char *h = url ? strstr(url, "://") : NULL;
    if (!h) return 0;
    h += 3;
    const char *end = h + strcspn(h, "/?#");
    for (const char *at = h; at < end; at++)
        if (*at == '@') h = at + 1;
    uint64_t v = 1469598103934665603ull;
    int any = 0;
    for (; h < end && *h != ':'; h++, any = 1) {
        unsigned char c = (unsigned char)*h;
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c + 32);
        v = (v ^ c) * 1099511628211ull;
    }
    return any ? (v ? v : 1) : 0;
}

static int host_answered(const cf__loop *lp, uint64_t h) {
    if (!h) return 0;
    for (size_t i = 0; i < sizeof lp->answered / sizeof *lp->answered; i++)
        if (lp->answered[i] == h) return 1;
    return 0;
}

/* x got an answer (its host's name resolved): remember the host. */
static void note_answered(cf__loop *lp, const cf__xfer *x) {
    lp->proxy_answered = 1; /* any answer came through the proxy, if one */
    uint64_t h = host_hash(current_url(x));
    if (!h || host_answered(lp, h)) return;
    size_t cap = sizeof lp->answered / sizeof *lp->answered;
    lp->answered[lp->answered_next++ % cap] = h;
}

/* What libcurl says of an attempt that has ended. */
typedef struct xfer_end {
    CURLcode rc;
    curl_off_t connect_us;
    long sent;   /* bytes of request sent */
    long tunnel; /* a proxy's answer to CONNECT (https through it) */
    char cerr[128];
} xfer_end;

/* An outcome step's answer when the outcome is not its own: the next
 * step decides. */
#define XFER_NEXT (-1)

static void end_facts(cf__xfer *x, CURLcode rc, xfer_end *e) {
    e->rc = rc;
    e->connect_us = 0;
    e->sent = 0;
    curl_easy_getinfo(x->easy, CURLINFO_CONNECT_TIME_T, &e->connect_us);
    /* Bytes of request sent: tells a reused keep-alive connection that
     * died (read failure) from a connect that never happened. */
    curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &e->sent);
    e->tunnel = 0;
    curl_easy_getinfo(x->easy, CURLINFO_HTTP_CONNECTCODE, &e->tunnel);
    snprintf(e->cerr, sizeof e->cerr, "%s", curl_easy_strerror(rc));
}

/* The transfer was stopped by our own checks of the response (write
 * callback): a range mismatch is retried once, the rest fail. */
static int end_aborted(cf__loop *lp, cf__xfer *x) {
    const char *n = x->src->name;
    char why[400];
    switch (x->abort) {
    case CF__AB_NONE: break;
    case CF__AB_MISMATCH:
        snprintf(why, sizeof why, "HTTP %ld: %s", x->status, x->abort_msg);
        if (x->mismatches++ == 0)
            return retry(lp, x, CF_E_RANGE, why, RETRY_ERROR);
        return fail(x, CF_E_RANGE, "%s: %s (again after a retry)", n, why);
    case CF__AB_NORANGE:
        return fail(x, CF_E_RANGE, "%s: %s", n, x->abort_msg);
    case CF__AB_CHANGED:
        return fail(x, CF_E_CHANGED, "%s: HTTP %ld: %s", n, x->status,
                    x->abort_msg);
    case CF__AB_SHORT:
    case CF__AB_OVERFLOW:
        return fail(x, CF_E_RANGE, "%s: HTTP %ld: %s", n, x->status,
                    x->abort_msg);
    }
    return XFER_NEXT;
}

/* Cut off inside the response's headers.  Beyond libcurl's limits (a
 * line of 100 KiB, 300 KiB in all) it is a broken or hostile server that
 * would do it again: no retry. */
static int end_in_headers(cf__loop *lp, cf__xfer *x, const xfer_end *e) {
    const char *n = x->src->name;
    char why[400];
    if (e->rc != CURLE_OK &&
        (x->state == CF__XS_SENDING || x->state == CF__XS_HEADERS)) {
        char hs[32] = "";
        if (x->status) snprintf(hs, sizeof hs, "HTTP %ld ", x->status);
        if (e->rc == CURLE_OUT_OF_MEMORY)
            return fail(x, CF_E_HTTP,
                        "%s: %sresponse with a header line too long for "
                        "libcurl (over 100 KiB; curl: %s): not retried",
                        n, hs, e->cerr);
        if (x->hdr_bytes >= ((size_t)256 << 10))
            return fail(x, CF_E_HTTP,
                        "%s: %sresponse headers larger than libcurl accepts "
                        "(%zu bytes so far; curl: %s): not retried",
                        n, hs, x->hdr_bytes, e->cerr);
        if (x->status) {
            atomic_fetch_add(&lp->io->n_read_fail, 1);
            snprintf(why, sizeof why, "HTTP %ld response cut off in its headers "
                     "(%s)", x->status, e->cerr);
            return retry(lp, x, CF_E_IO, why,
                         e->rc == CURLE_OPERATION_TIMEDOUT ? RETRY_TIMEOUT
                                                        : RETRY_ERROR);
        }
    }
    return XFER_NEXT;
}

/* libcurl failures that no retry fixes: the proxy's 407 to CONNECT, TLS
 * verification, a bad URL, a name that does not resolve. */
static int end_curl_error(cf__loop *lp, cf__xfer *x, const xfer_end *e) {
    const char *n = x->src->name;
    if (e->rc != CURLE_OK && e->tunnel == 407)
        return fail(x, CF_E_AUTH,
                    "%s: HTTP 407 from the proxy to CONNECT: the proxy wants "
                    "credentials (proxy authentication required)",
                    n);
    switch (e->rc) {
    /* Failures that a retry cannot fix. */
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
        /* CF_E_AUTH: the server could not be authenticated, which no
         * retry and no other sample fixes; the loader's skip_errors must
         * not drop it as if the file were bad. */
        return fail(x, CF_E_AUTH,
                    "%s: TLS certificate verification failed (%s): give the "
                    "server's CA with ca_file, or set verify_tls=0 to skip "
                    "the check",
                    n, e->cerr);
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return fail(x, CF_E_ARG, "%s: %s", n, e->cerr);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        /* A name that never resolved will not resolve in a second either:
         * permanent, no retry loop (it used to take 7 tries and 5.7 s).
         * The run's failure (CF_E_NOTFOUND): no other sample on that host
         * can be read.  But libcurl says the same of a resolver that
         * timed out or answered "try again" (a restart, a busy DNS
         * server): a name that answered before on this io is retried
         * like any transport failure, so a long run survives it. */
        if (e->rc == CURLE_COULDNT_RESOLVE_PROXY
                ? lp->proxy_answered
                : host_answered(lp, host_hash(current_url(x)))) {
            char why[400];
            atomic_fetch_add(&lp->io->n_connect_fail, 1);
            snprintf(why, sizeof why, "%s did not resolve, though it did before (%s)",
                     e->rc == CURLE_COULDNT_RESOLVE_PROXY ? "the proxy's host name"
                                                          : "the host name",
                     e->cerr);
            return retry(lp, x, CF_E_IO, why, RETRY_ERROR);
        }
        atomic_fetch_add(&lp->io->n_connect_fail, 1);
        return fail(x, CF_E_NOTFOUND, "%s: %s does not resolve (curl: %s): not retried", n,
                    e->rc == CURLE_COULDNT_RESOLVE_PROXY ? "the proxy's host name"
                                                      : "host name",
                    e->cerr);
    default: break;
    }
    return XFER_NEXT;
}

/* Transport failure, before a response or in its body: retried, resumed
 * from the next byte when part of the body arrived. */
static int end_transport(cf__loop *lp, cf__xfer *x, const xfer_end *e, int body_status) {
    char why[400];
    /* Transport failure.  Before any response it is a connect failure
     * unless a connection was made; after headers it is a read failure
     * and whatever arrived is kept (resumed from the next byte). */
    int connected = e->connect_us > 0 || e->sent > 0 || x->status != 0;
    int stalled = e->rc == CURLE_OPERATION_TIMEDOUT;
    if (connected)
        atomic_fetch_add(&lp->io->n_read_fail, 1);
    else
        atomic_fetch_add(&lp->io->n_connect_fail, 1);
    if (body_status)
        snprintf(why, sizeof why,
                 "HTTP %ld body %s after %" PRIu64 " of %" PRIu64
                 " bytes (%s)",
                 x->status, stalled ? "stalled" : "truncated", x->got,
                 x->len, e->cerr);
    else
        snprintf(why, sizeof why, "%s (%s)",
                 connected ? "no response" : "could not connect", e->cerr);
    return retry(lp, x, stalled ? CF_E_TIMEOUT : CF_E_IO, why,
                 body_status && x->attempt_got > 0 ? RETRY_RESUME
                 : stalled                         ? RETRY_TIMEOUT
                                                   : RETRY_ERROR);
}

/* A 200 or 206 response ended: done when every byte came, else retried
 * (resumed). */
static int end_body(cf__loop *lp, cf__xfer *x) {
    char why[400];
    if (x->len_open) {
        x->len = x->got;
        pthread_mutex_lock(&x->src->mu);
        if (x->src->size == UINT64_MAX) x->src->size = x->got;
        pthread_mutex_unlock(&x->src->mu);
    }
    if (x->got == x->len) {
        x->result = CF_OK;
        cf__xfer_move(x, CF__XS_DONE);
        /* AWS's rule: a success gives back what its last retry took,
         * or a token when it needed none. */
        cf__quota_give(&lp->quota,
                       x->quota_taken > 0 ? x->quota_taken : CF__QUOTA_SUCCESS,
                       cf__now());
        return 1;
    }
    atomic_fetch_add(&lp->io->n_read_fail, 1);
    snprintf(why, sizeof why,
             "HTTP %ld body truncated after %" PRIu64 " of %" PRIu64 " bytes",
             x->status, x->got, x->len);
    return retry(lp, x, CF_E_IO, why,
                 x->attempt_got > 0 ? RETRY_RESUME : RETRY_ERROR);
}

/* Any other HTTP status: a redirect followed, the retryable ones retried,
 * the rest fail with what the service said (its error code). */
static int end_status(cf__loop *lp, cf__xfer *x, const xfer_end *e) {
    const char *n = x->src->name;
    char why[400];
    char code[80] = "", codepart[96] = "";
    cf__auth_error_code(x->auth, x->errbody, x->errbody_len,
                        x->ms_code[0] ? x->ms_code : NULL, code, sizeof code);
    if (code[0]) snprintf(codepart, sizeof codepart, " (%s)", code);
    long st = x->status;
    switch (st) {
    case 301: case 302: case 303: case 307: case 308:
        return follow_redirect(lp, x);
    case 429: case 503: case 500: case 502: case 504: case 408:
        snprintf(why, sizeof why, "HTTP %ld%s", st, codepart);
        return retry(lp, x, CF_E_HTTP, why, RETRY_ERROR);
    case 416:
        if (x->head && x->got == 0)
            return fail(x, CF_E_RANGE,
                        "%s: HTTP 416 to the first bytes: the object is empty",
                        n);
        return fail(x, CF_E_RANGE,
                    "%s: HTTP 416: object shorter than its header says, or it "
                    "changed (bytes=%" PRIu64 "-%" PRIu64 ")",
                    n, x->off + x->got, x->off + x->len - 1);
    case 412: {
        pthread_mutex_lock(&x->src->mu);
        int by_etag = strong_etag(x->src->etag);
        pthread_mutex_unlock(&x->src->mu);
        return fail(x, CF_E_CHANGED,
                    "%s: HTTP 412: object changed while reading (it no longer "
                    "matches the %s of the first response)",
                    n, by_etag ? "ETag" : "Last-Modified");
    }
    case 401: case 403:
        return fail(x, CF_E_AUTH,
                    "%s: HTTP %ld%s: access denied (missing, wrong or expired "
                    "credentials)",
                    n, st, codepart);
    case 404:
        return fail(x, CF_E_NOTFOUND, "%s: HTTP 404%s: not found", n, codepart);
    /* The run's failures, like 401/403/404 (the loader's skip_errors
     * never drops them): a proxy that wants credentials and a legal
     * block are refusals no other sample gets past (CF_E_AUTH), an
     * object gone for good is not found (CF_E_NOTFOUND). */
    case 407:
        return fail(x, CF_E_AUTH,
                    "%s: HTTP 407%s: the proxy wants credentials (proxy "
                    "authentication required)",
                    n, codepart);
    case 410:
        return fail(x, CF_E_NOTFOUND, "%s: HTTP 410%s: gone (removed for good)", n,
                    codepart);
    case 451:
        return fail(x, CF_E_AUTH,
                    "%s: HTTP 451%s: unavailable for legal reasons (access "
                    "refused)",
                    n, codepart);
    default:
        if (st == 0)
            return fail(x, CF_E_IO, "%s: no HTTP response (%s)", n, e->cerr);
        return fail(x, CF_E_HTTP, "%s: HTTP %ld%s", n, st, codepart);
    }
}

int cf__xfer_done(cf__loop *lp, cf__xfer *x, CURLcode rc) {
    xfer_end e;
    end_facts(x, rc, &e);
    cf__xfer_release(lp, x);
    if (x->status != 0 || e.tunnel != 0) note_answered(lp, x);

    if (rc == CURLE_OK && x->state != CF__XS_BODY &&
        (x->status == 200 || x->status == 206)) {
        cf__xfer_move(x, CF__XS_BODY);
        check_headers(x); /* empty body: still validate */
    }
    int r, body_status = x->status == 200 || x->status == 206;
    if ((r = end_aborted(lp, x)) != XFER_NEXT) return r;
    if (rc != CURLE_OK) {
        if ((r = end_in_headers(lp, x, &e)) != XFER_NEXT) return r;
        if ((r = end_curl_error(lp, x, &e)) != XFER_NEXT) return r;
        if (body_status || x->status == 0)
            return end_transport(lp, x, &e, body_status);
    }
    if (body_status) return end_body(lp, x);
    return end_status(lp, x, &e);
}

cf__xfer *cf__xfer_hedge(const cf__xfer *x) {
    cf__xfer *h = cf__calloc(1, sizeof *h);
    if (!h) return NULL;
    h->reqs = cf__calloc(x->nreq ? x->nreq : 1, sizeof *h->reqs);
    if (x->redirect_url) h->redirect_url = cf__strdup(x->redirect_url);
    if (!h->reqs || (x->redirect_url && !h->redirect_url)) {
        cf__xfer_free(h);
        return NULL;
    }
    memcpy(h->reqs, x->reqs, x->nreq * sizeof *h->reqs);
    h->nreq = x->nreq;
    h->src = x->src;
    h->auth = cf__auth_ref(x->auth);
    h->off = x->off;
    h->len = x->len;
    h->head = x->head;
    h->cb = x->cb;
    h->user = x->user;
    h->got = x->got;
    /* The same attempt as x's, sent twice: cf__xfer_start counts it
     * again, and a hedge must not use up one of the request's retries. */
    h->attempts = x->attempts > 0 ? x->attempts - 1 : 0;
    h->retries = x->retries;
    h->resumes = x->resumes;
    h->quota_taken = x->quota_taken;
    h->mismatches = x->mismatches;
    h->redirects = x->redirects;
    h->t0 = x->t0;
    h->foreign_host = x->foreign_host;
    h->leg = CF__LEG_SECOND;
    return h;
}

void cf__xfer_free(cf__xfer *x) {
    if (!x) return;
    if (x->easy) curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->hdrs);
    free(x->redirect_url);
    free(x->reqs);
    cf__auth_free(x->auth);
    free(x);
}

void cf__xfer_finish(cf__xfer *x) {
    for (size_t i = 0; i < x->nreq; i++) {
        cf__range_req *r = x->reqs[i];
        r->status = x->result;
        if (x->head) r->len = x->len; /* the bytes the object really had */
        if (r->err) {
            if (x->result == CF_OK)
                cf__err_clear(r->err);
            else
                *r->err = x->err;
        }
    }
    cf__range_cb cb = x->cb;
    void *user = x->user;
    cf__range_req **rs = x->reqs;
    size_t nr = x->nreq;
    x->reqs = NULL;
    cf__xfer_free(x);
    for (size_t i = 0; i < nr; i++) cb(rs[i], user);
    free(rs);
}
