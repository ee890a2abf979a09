/*
 * upload.c - one object written in parts to S3 (multipart upload), Cloud
 * Storage (its XML API's multipart upload, S3's protocol with a bearer
 * token) or Azure (block blob): the protocol, the retries and the
 * senders.
 *
 * State: OPEN (parts may come) -> FAILED (the first failure latched;
 * later parts are refused with it) -> ended by finish or abort.  Parts
 * wait in a queue of `inflight` slots for the sender threads; a caller
 * blocks while every slot is taken, so at most 2 x inflight parts are in
 * memory (queued and being sent).
 */
#include "upload.h"

#include "auth.h"
#include "io_internal.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { U_OPEN, U_FAILED } u_state;

typedef struct u_job {
    uint32_t number;
    uint8_t *data;
    size_t len;
} u_job;

#define U_MAX_SENDERS 64
#define U_BODY_MAX 65536 /* response bodies kept: XML answers and errors */
#define U_COMPLETE_S 600.0 /* the least deadline of a multipart Complete */

struct cf__upload {
    cf__auth *auth;
    cf_io_options o;
    char *ca_file;
    int azure;
    char upload_id[1024]; /* S3 */
    uint32_t nonce;       /* Azure: in the block ids, so that two uploads
                             to one blob never commit each other's blocks */
    int joined;           /* another process began it: this one puts parts
                             and leaves; it never completes nor aborts */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    u_state state;
    cf_error fail;
    u_job *q;             /* ring of nslots */
    int nslots, qhead, qlen, busy, stop;
    pthread_t th[U_MAX_SENDERS];
    int nth;
    char **etag;          /* per part number (S3: ETag; Azure: "" once put) */
    uint64_t rng;
    _Atomic uint64_t n_requests, n_retries;
};

/* ---- one request, retried ---- */

typedef struct u_resp {
    int retried;          /* an earlier attempt failed: its effect unknown */
    long status;
    char etag[256];
    char ms_code[64];
    char *body;
    size_t body_len;
    double retry_after;
} u_resp;

static size_t on_body(char *buf, size_t size, size_t n, void *ud) {
    u_resp *r = ud;
    size_t k = size * n, room = U_BODY_MAX - r->body_len;
    memcpy(r->body + r->body_len, buf, k < room ? k : room);
    r->body_len += k < room ? k : room;
    return k;
}

static void header_copy(const char *v, size_t n, char *out, size_t cap) {
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
    size_t k = n < cap - 1 ? n : cap - 1;
    for (size_t i = 0; i < k; i++) out[i] = (unsigned char)v[i] < 0x20 ? '?' : v[i];
    out[k] = 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud) {
    u_resp *r = ud;
    size_t k = size * n;
    if (k > 5 && !strncasecmp(buf, "HTTP/", 5)) { /* a new response (after 100) */
        r->etag[0] = r->ms_code[0] = 0;
        r->retry_after = 0;
    } else if (k > 5 && !strncasecmp(buf, "ETag:", 5)) {
        header_copy(buf + 5, k - 5, r->etag, sizeof r->etag);
    } else if (k > 16 && !strncasecmp(buf, "x-ms-error-code:", 16)) {
        header_copy(buf + 16, k - 16, r->ms_code, sizeof r->ms_code);
    } else if (k > 12 && !strncasecmp(buf, "Retry-After:", 12)) {
        char v[32];
        header_copy(buf + 12, k - 12, v, sizeof v);
        char *end;
        double s = strtod(v, &end);
        if (end != v && s >= 0 && s < 3600) r->retry_after = s;
    }
    return k;
}

/* The jitter's and the block ids' nonce's random bits (the senders share
 * the state). */
static uint64_t next_random(cf__upload *up) {
    pthread_mutex_lock(&up->mu);
    uint64_t x = cf__xorshift64s(&up->rng);
    pthread_mutex_unlock(&up->mu);
    return x;
}

static int transient_curl(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return 1;
    default:
        return 0;
    }
}

static int transient_status(long s) {
    return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

static cf_status status_code(long s) {
    return s == 401 || s == 403 ? CF_E_AUTH : s == 404 ? CF_E_NOTFOUND : CF_E_HTTP;
}

/* Send r (body: len bytes) until it succeeds, fails for good, or its
 * retries or deadline are spent.  `what` names it in messages. */
static cf_status request(cf__upload *up, const cf__auth_req *r, const uint8_t *body, size_t len,
                         u_resp *resp, const char *what, cf_error *err) {
    const char *name = cf__auth_redacted(up->auth);
    char *url = cf__auth_req_url(up->auth, r);
    CURL *e = curl_easy_init();
    resp->body = cf__malloc(U_BODY_MAX + 1);
    if (!url || !e || !resp->body) {
        free(url);
        if (e) curl_easy_cleanup(e);
        return cf__err(err, CF_E_NOMEM, "%s: %s: out of memory", name, what);
    }
    const double t0 = cf__now();
    /* A part's deadline grows with its size (request_timeout_s per 8 MiB):
     * a slow uplink still gets its retries; a stall is the low-speed
     * limit's to catch.  Completing a multipart upload "could take several
     * minutes" (S3's and Cloud Storage's docs): S3 sends whitespace while
     * it works, Cloud Storage is not said to, so neither a stall check nor
     * a deadline under U_COMPLETE_S cuts it short. */
    const int completing = !up->azure && !strcmp(r->method, "POST") && r->nparams == 1 &&
                           !strcmp(r->names[0], "uploadId");
    double limit = up->o.request_timeout_s *
                   (len > ((size_t)8 << 20) ? (double)len / (double)(8u << 20) : 1.0);
    if (completing && limit < U_COMPLETE_S) limit = U_COMPLETE_S;
    cf_status st = CF_OK;
    char why[256] = "";
    resp->retried = 0;
    for (int attempt = 0;; attempt++) {
        resp->status = 0;
        resp->body_len = 0;
        resp->etag[0] = resp->ms_code[0] = 0;
        resp->retry_after = 0;
        double left = t0 + limit - cf__now();
        if (left <= 0) {
            st = cf__err(err, CF_E_TIMEOUT, "%s: %s: request deadline of %g s reached%s%s",
                         name, what, limit, why[0] ? " after " : "", why);
            break;
        }
        struct curl_slist *h = NULL, *t;
        /* No Expect: 100-continue (a part is sent whole anyway) and no
         * Content-Type of curl's choosing: neither is signed. */
        if ((t = curl_slist_append(h, "Expect:"))) h = t;
        if ((t = curl_slist_append(h, "Content-Type:"))) h = t;
        st = cf__auth_sign_req(up->auth, time(NULL), r, &h, err);
        if (st) {
            curl_slist_free_all(h);
            break;
        }
        curl_easy_reset(e);
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
        if (!strcmp(r->method, "HEAD")) {
            curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        } else if (strcmp(r->method, "DELETE") != 0) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? (const char *)body : "");
        }
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* a write is never redirected */
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, resp);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(up->o.connect_timeout_s * 1e3));
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(left * 1e3) + 1);
        if (!completing && up->o.low_speed_time_s > 0 && up->o.low_speed_bytes > 0) {
            curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, up->o.low_speed_bytes);
            curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)ceil(up->o.low_speed_time_s));
        }
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, up->o.verify_tls ? 1L : 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, up->o.verify_tls ? 2L : 0L);
        if (up->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, up->ca_file);
        atomic_fetch_add(&up->n_requests, 1);
        CURLcode rc = curl_easy_perform(e);
        curl_slist_free_all(h);
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &resp->status);
        resp->body[resp->body_len] = 0;
        int again;
        if (rc != CURLE_OK) {
            snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
            again = transient_curl(rc);
            if (!again) {
                st = cf__err(err, CF_E_IO, "%s: %s: %s", name, what, why);
                break;
            }
        } else if (resp->status >= 200 && resp->status < 300) {
            /* S3's CompleteMultipartUpload may answer 200 and fail in the
             * body (it streams whitespace while it works). */
            if (!(resp->body_len && strstr(resp->body, "<Error>"))) break;
            char code[64];
            cf__auth_error_code(up->auth, resp->body, resp->body_len, NULL, code, sizeof code);
            snprintf(why, sizeof why, "HTTP 200 with error %s", code[0] ? code : "(no code)");
            again = !strcmp(code, "InternalError") || !strcmp(code, "SlowDown");
            if (!again) {
                st = cf__err(err, CF_E_HTTP, "%s: %s: %s", name, what, why);
                break;
            }
        } else {
            char code[64];
            cf__auth_error_code(up->auth, resp->body, resp->body_len,
                                resp->ms_code[0] ? resp->ms_code : NULL, code, sizeof code);
            snprintf(why, sizeof why, "HTTP %ld%s%s%s", resp->status, code[0] ? " (" : "",
                     code, code[0] ? ")" : "");
            /* S3's 400 RequestTimeout: the body came too slowly; the SDKs
             * send it again */
            again = transient_status(resp->status) ||
                    (resp->status == 400 && !strcmp(code, "RequestTimeout"));
            if (!again) {
                st = cf__err(err, status_code(resp->status), "%s: %s: %s", name, what, why);
                if (err) err->http_status = (int)resp->status;
                break;
            }
        }
        if (attempt >= up->o.max_retries) {
            st = cf__err(err, resp->status >= 400 ? CF_E_HTTP : CF_E_IO,
                         "%s: %s: %s (gave up after %d attempts)", name, what, why,
                         attempt + 1);
            if (err && resp->status >= 400) err->http_status = (int)resp->status;
            break;
        }
        double d = cf__backoff_delay(&up->o, attempt, resp->retry_after, next_random(up));
        if (cf__now() + d > t0 + limit) {
            st = cf__err(err, CF_E_TIMEOUT, "%s: %s: %s (request deadline of %g s reached "
                         "after %d attempts)", name, what, why, limit, attempt + 1);
            break;
        }
        atomic_fetch_add(&up->n_retries, 1);
        resp->retried = 1;
        struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
        nanosleep(&ts, NULL);
    }
    free(url);
    curl_easy_cleanup(e);
    return st;
}

static void resp_free(u_resp *r) {
    free(r->body);
    r->body = NULL;
}

/* <Tag>value</Tag> of an XML body, into out: 0 when missing, too long or
 * not fit for a URL parameter. */
static int xml_value(const char *body, const char *tag, char *out, size_t cap) {
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(body, open);
    if (!a) return 0;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b || b == a || (size_t)(b - a) >= cap) return 0;
    for (const char *c = a; c < b; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '<' || *c == '&') return 0;
    memcpy(out, a, (size_t)(b - a));
    out[b - a] = 0;
    return 1;
}

/* ---- parts ---- */

/* Azure block ids: one length for every block of a blob; base64 of
 * "cfNNNNNNNN-part-PPPPP" (21 bytes: no padding), N the upload's nonce. */
static void block_id(const cf__upload *up, uint32_t number, char out[32]) {
    char raw[32];
    snprintf(raw, sizeof raw, "cf%08x-part-%05u", up->nonce, number);
    static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i + 2 < 21; i += 3) {
        uint32_t v = (uint32_t)(uint8_t)raw[i] << 16 | (uint32_t)(uint8_t)raw[i + 1] << 8 |
                     (uint8_t)raw[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
    out[o] = 0;
}

static cf_status send_part(cf__upload *up, const u_job *j, cf_error *err) {
    char num[16], id[32], what[48], sha[65] = "";
    snprintf(num, sizeof num, "%u", j->number);
    snprintf(what, sizeof what, "part %u (%zu bytes)", j->number, j->len);
    cf__auth_req r = {.method = "PUT", .body_len = j->len};
    if (up->azure) {
        block_id(up, j->number, id);
        r.names[0] = "blockid", r.values[0] = id;
        r.names[1] = "comp", r.values[1] = "block";
        r.nparams = 2;
    } else {
        cf__sha256_hex(j->data, j->len, sha);
        r.body_sha256 = sha;
        r.names[0] = "partNumber", r.values[0] = num;
        r.names[1] = "uploadId", r.values[1] = up->upload_id;
        r.nparams = 2;
    }
    u_resp resp = {0};
    cf_status st = request(up, &r, j->data, j->len, &resp, what, err);
    if (!st && !up->azure && !resp.etag[0])
        st = cf__err(err, CF_E_HTTP, "%s: %s: the answer has no ETag", cf__upload_name(up),
                     what);
    if (!st) {
        char *tag = cf__strdup(up->azure ? "" : resp.etag);
        if (!tag) st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cf__upload_name(up));
        pthread_mutex_lock(&up->mu);
        if (tag) {
            free(up->etag[j->number - 1]);
            up->etag[j->number - 1] = tag;
        }
        pthread_mutex_unlock(&up->mu);
    }
    resp_free(&resp);
    return st;
}

static void latch(cf__upload *up, const cf_error *e, cf_status st) {
    if (up->state == U_OPEN) {
        up->state = U_FAILED;
        up->fail = *e;
        up->fail.code = st;
    }
}

static void *sender(void *arg) {
    cf__upload *up = arg;
    pthread_mutex_lock(&up->mu);
    for (;;) {
        while (!up->qlen && !up->stop) pthread_cond_wait(&up->cv, &up->mu);
        if (!up->qlen) break;
        u_job j = up->q[up->qhead];
        up->qhead = (up->qhead + 1) % up->nslots;
        up->qlen--;
        up->busy++;
        int skip = up->state != U_OPEN;
        pthread_cond_broadcast(&up->cv);
        pthread_mutex_unlock(&up->mu);
        cf_error e = {0};
        cf_status st = skip ? CF_OK : send_part(up, &j, &e);
        free(j.data);
        pthread_mutex_lock(&up->mu);
        if (st) latch(up, &e, st);
        up->busy--;
        pthread_cond_broadcast(&up->cv);
    }
    pthread_mutex_unlock(&up->mu);
    return NULL;
}

/* ---- the upload ---- */

static void free_upload(cf__upload *up) {
    if (up->etag)
        for (uint32_t i = 0; i < CF__UPLOAD_MAX_PARTS; i++) free(up->etag[i]);
    free(up->etag);
    for (int i = 0; i < up->qlen; i++) free(up->q[(up->qhead + i) % up->nslots].data);
    free(up->q);
    free(up->ca_file);
    if (up->auth) cf__auth_free(up->auth);
    pthread_mutex_destroy(&up->mu);
    pthread_cond_destroy(&up->cv);
    free(up);
    curl_global_cleanup();
}

static void stop_senders(cf__upload *up) {
    pthread_mutex_lock(&up->mu);
    up->stop = 1;
    pthread_cond_broadcast(&up->cv);
    pthread_mutex_unlock(&up->mu);
    for (int i = 0; i < up->nth; i++) pthread_join(up->th[i], NULL);
    up->nth = 0;
}

static cf_status create_s3(cf__upload *up, cf_error *err) {
    cf__auth_req r = {.method = "POST", .nparams = 1};
    r.names[0] = "uploads", r.values[0] = "";
    u_resp resp = {0};
    cf_status st = request(up, &r, NULL, 0, &resp, "starting the multipart upload", err);
    if (!st && !xml_value(resp.body, "UploadId", up->upload_id, sizeof up->upload_id))
        st = cf__err(err, CF_E_HTTP, "%s: starting the multipart upload: no usable UploadId "
                     "in the answer", cf__upload_name(up));
    resp_free(&resp);
    return st;
}

/* The token another process joins with: S3's upload id (the service's
 * text, ASCII without spaces), or Azure's nonce in 8 hex digits. */
static int token_ok(const char *t, int azure) {
    size_t n = strlen(t);
    if (azure) return n == 8 && strspn(t, "0123456789abcdef") == 8;
    if (n < 1 || n >= sizeof ((cf__upload *)0)->upload_id) return 0;
    for (; *t; t++)
        if (*t < 0x21 || *t > 0x7e) return 0;
    return 1;
}

/* new (token NULL: begin the upload) or join (token: another process's). */
static cf_status start(cf_io *io, const char *url, int inflight, const char *token,
                       cf__upload **out, cf_error *err) {
    *out = NULL;
    if (inflight < 1 || inflight > U_MAX_SENDERS)
        return cf__err(err, CF_E_ARG, "upload: %d parts in flight not in 1..%d", inflight,
                       U_MAX_SENDERS);
    cf__upload *up = cf__calloc(1, sizeof *up);
    if (!up) return cf__err(err, CF_E_NOMEM, "upload: out of memory");
    pthread_mutex_init(&up->mu, NULL);
    pthread_cond_init(&up->cv, NULL);
    /* libcurl's global state, counted: held while this upload's threads
     * use curl, whatever happens to the io lent for its options */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        pthread_mutex_destroy(&up->mu);
        pthread_cond_destroy(&up->cv);
        free(up);
        return cf__err(err, CF_E_NOMEM, "upload: libcurl could not start");
    }
    if (io) up->o = *cf__io_opts(io);
    else cf_io_options_init(&up->o);
    up->o.header_cache_dir = NULL;
    up->rng = (uint64_t)(uintptr_t)up ^ (uint64_t)(cf__now() * 1e9) ^ 0x9E3779B97F4A7C15ull;
    if (!up->rng) up->rng = 1;
    up->nonce = (uint32_t)(next_random(up) >> 32);
    cf_status st = cf__auth_new(url, &up->auth, err);
    if (!st) {
        const char *name = cf__auth_redacted(up->auth);
        cf__auth_kind k = cf__auth_kind_of(up->auth);
        /* gs://: Cloud Storage's XML API multipart upload, S3's protocol
         * (the same requests and answers) with its OAuth bearer token. */
        if (k != CF_AUTH_S3 && k != CF_AUTH_AZURE && k != CF_AUTH_GCS)
            st = cf__err(err, CF_E_UNSUPPORTED, "%s: writing takes s3://, gs:// and Azure "
                         "Blob URLs (az://, https://ACCOUNT.blob.core.windows.net/...); plain "
                         "HTTP(S) is not written to", name);
        up->azure = k == CF_AUTH_AZURE;
    }
    if (!st && up->o.ca_file && !(up->ca_file = cf__strdup(up->o.ca_file)))
        st = cf__err(err, CF_E_NOMEM, "upload: out of memory");
    up->o.ca_file = NULL;
    up->nslots = inflight;
    if (!st) {
        up->q = cf__calloc((size_t)inflight, sizeof *up->q);
        up->etag = cf__calloc(CF__UPLOAD_MAX_PARTS, sizeof *up->etag);
        if (!up->q || !up->etag) st = cf__err(err, CF_E_NOMEM, "upload: out of memory");
    }
    if (!st && token) {
        up->joined = 1;
        if (!token_ok(token, up->azure))
            st = cf__err(err, CF_E_ARG, "%s: not an upload token of this store (S3: the "
                         "upload id; Azure: 8 hex digits)", cf__upload_name(up));
        else if (up->azure) up->nonce = (uint32_t)strtoul(token, NULL, 16);
        else snprintf(up->upload_id, sizeof up->upload_id, "%s", token);
    } else if (!st && !up->azure) {
        st = create_s3(up, err);
    }
    for (int i = 0; !st && i < inflight; i++) {
        if (pthread_create(&up->th[i], NULL, sender, up) != 0) {
            st = cf__err(err, CF_E_NOMEM, "%s: cannot start an upload thread",
                         cf__upload_name(up));
            break;
        }
        up->nth++;
    }
    if (st) {
        cf__upload_abort(up);
        return st;
    }
    *out = up;
    return CF_OK;
}

cf_status cf__upload_new(cf_io *io, const char *url, int inflight, cf__upload **out,
                         cf_error *err) {
    return start(io, url, inflight, NULL, out, err);
}

cf_status cf__upload_join(cf_io *io, const char *url, int inflight, const char *token,
                          cf__upload **out, cf_error *err) {
    *out = NULL;
    if (!token) return cf__err(err, CF_E_ARG, "upload: no token to join");
    return start(io, url, inflight, token, out, err);
}

int cf__upload_joined(const cf__upload *up) { return up->joined; }

void cf__upload_token(const cf__upload *up, char *out, size_t cap) {
    if (up->azure) snprintf(out, cap, "%08x", up->nonce);
    else snprintf(out, cap, "%s", up->upload_id);
}

uint64_t cf__upload_min_part(const cf__upload *up) {
    return up->azure ? 1 : CF__UPLOAD_S3_MIN_PART;
}

const char *cf__upload_name(const cf__upload *up) {
    return up->auth ? cf__auth_redacted(up->auth) : "upload";
}

void cf__upload_counts(const cf__upload *up, uint64_t *requests, uint64_t *retries) {
    if (requests) *requests = atomic_load(&((cf__upload *)up)->n_requests);
    if (retries) *retries = atomic_load(&((cf__upload *)up)->n_retries);
}

static cf_status failed(cf__upload *up, cf_error *err) {
    if (err) *err = up->fail;
    return up->fail.code;
}

cf_status cf__upload_part(cf__upload *up, uint32_t number, uint8_t *data, size_t len,
                          cf_error *err) {
    pthread_mutex_lock(&up->mu);
    cf_status st = CF_OK;
    if (up->state != U_OPEN) st = failed(up, err);
    else if (number < 1 || number > CF__UPLOAD_MAX_PARTS)
        st = cf__err(err, CF_E_ARG, "%s: part number %u not in 1..%u", cf__upload_name(up),
                     number, CF__UPLOAD_MAX_PARTS);
    else if (len > CF__UPLOAD_S3_MAX_PART)
        st = cf__err(err, CF_E_LIMIT, "%s: part %u of %zu bytes (at most 5 GiB)",
                     cf__upload_name(up), number, len);
    if (!st) {
        while (up->qlen == up->nslots && up->state == U_OPEN) pthread_cond_wait(&up->cv, &up->mu);
        if (up->state != U_OPEN) st = failed(up, err);
    }
    if (st) {
        pthread_mutex_unlock(&up->mu);
        free(data);
        return st;
    }
    up->q[(up->qhead + up->qlen) % up->nslots] = (u_job){number, data, len};
    up->qlen++;
    pthread_cond_broadcast(&up->cv);
    pthread_mutex_unlock(&up->mu);
    return CF_OK;
}

/* The body that commits the object: the parts sent, in number order. */
static char *commit_body(cf__upload *up, size_t *len) {
    size_t cap = 128;
    for (uint32_t i = 0; i < CF__UPLOAD_MAX_PARTS; i++)
        if (up->etag[i]) cap += 96 + 6 * strlen(up->etag[i]);
    char *b = cf__malloc(cap);
    if (!b) return NULL;
    size_t n = (size_t)snprintf(b, cap, "%s", up->azure
                                ? "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>"
                                : "<CompleteMultipartUpload>");
    for (uint32_t i = 0; i < CF__UPLOAD_MAX_PARTS; i++) {
        if (!up->etag[i]) continue;
        if (up->azure) {
            char id[32];
            block_id(up, i + 1, id);
            n += (size_t)snprintf(b + n, cap - n, "<Latest>%s</Latest>", id);
            continue;
        }
        n += (size_t)snprintf(b + n, cap - n, "<Part><PartNumber>%u</PartNumber><ETag>", i + 1);
        for (const char *c = up->etag[i]; *c; c++) { /* the server's text, escaped */
            const char *e = *c == '&' ? "&amp;" : *c == '<' ? "&lt;" : *c == '>' ? "&gt;"
                            : *c == '"' ? "&quot;" : NULL;
            if (e) n += (size_t)snprintf(b + n, cap - n, "%s", e);
            else b[n++] = *c;
        }
        n += (size_t)snprintf(b + n, cap - n, "</ETag></Part>");
    }
    n += (size_t)snprintf(b + n, cap - n, "%s", up->azure ? "</BlockList>"
                                                           : "</CompleteMultipartUpload>");
    *len = n;
    return b;
}

/* S3, after a Complete that was sent more than once answered 404: the
 * first may have made the object and lost its answer.  It did when the
 * object now has a multipart ETag ("...-N") of our part count. */
static int completed_anyway(cf__upload *up, uint32_t nparts) {
    cf__auth_req r = {.method = "HEAD"};
    u_resp resp = {0};
    cf_error e = {0};
    int ok = 0;
    if (request(up, &r, NULL, 0, &resp, "checking the object", &e) == CF_OK) {
        char want[24];
        snprintf(want, sizeof want, "-%u\"", nparts);
        size_t n = strlen(resp.etag), k = strlen(want);
        ok = n > k && !strcmp(resp.etag + n - k, want);
    }
    resp_free(&resp);
    return ok;
}

/* Abort (S3: the DELETE; Azure: nothing was committed) and free; a
 * failed DELETE is told in note's message (NULL: not told). */
static void abort_upload(cf__upload *up, cf_error *note) {
    pthread_mutex_lock(&up->mu);
    if (up->state == U_OPEN) { /* parts still queued are not sent */
        up->state = U_FAILED;
        up->fail.code = CF_E_STATE;
        snprintf(up->fail.msg, sizeof up->fail.msg, "%s: upload aborted", cf__upload_name(up));
    }
    pthread_mutex_unlock(&up->mu);
    stop_senders(up);
    if (!up->azure && up->upload_id[0] && !up->joined) {
        /* Parts in flight have ended (the senders are joined), so the
         * abort is final: S3 keeps nothing of the upload. */
        cf__auth_req r = {.method = "DELETE", .nparams = 1};
        r.names[0] = "uploadId", r.values[0] = up->upload_id;
        u_resp resp = {0};
        cf_error e = {0};
        cf_status st = request(up, &r, NULL, 0, &resp, "aborting the multipart upload", &e);
        resp_free(&resp);
        if (st && st != CF_E_NOTFOUND && note) { /* 404: nothing left to abort */
            size_t n = strlen(note->msg);
            snprintf(note->msg + n, sizeof note->msg - n,
                     "; and the abort failed too (%s): its parts stay stored until a "
                     "lifecycle rule (AbortIncompleteMultipartUpload) removes them", e.msg);
        }
    }
    free_upload(up);
}

/* Every part queued has been sent (or the upload failed: its status). */
static cf_status wait_sent(cf__upload *up, cf_error *err) {
    pthread_mutex_lock(&up->mu);
    while ((up->qlen || up->busy) && up->state == U_OPEN) pthread_cond_wait(&up->cv, &up->mu);
    cf_status st = up->state != U_OPEN ? failed(up, err) : CF_OK;
    pthread_mutex_unlock(&up->mu);
    return st;
}

/* A receipt line: "NUMBER ETAG\n" (S3) or "NUMBER\n" (Azure, whose
 * blocks are named by number). */
#define U_RECEIPT_MAX 300

cf_status cf__upload_receipts(cf__upload *up, char **out, cf_error *err) {
    *out = NULL;
    CF__TRY(wait_sent(up, err));
    size_t cap = 1, n = 0;
    pthread_mutex_lock(&up->mu); /* (the senders write the table under it) */
    for (uint32_t i = 0; i < CF__UPLOAD_MAX_PARTS; i++) cap += up->etag[i] ? U_RECEIPT_MAX : 0;
    char *t = cf__malloc(cap);
    if (!t) {
        pthread_mutex_unlock(&up->mu);
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", cf__upload_name(up));
    }
    t[0] = 0;
    for (uint32_t i = 0; i < CF__UPLOAD_MAX_PARTS; i++)
        if (up->etag[i])
            n += (size_t)snprintf(t + n, cap - n, up->azure ? "%u\n" : "%u %s\n", i + 1,
                                  up->etag[i]);
    pthread_mutex_unlock(&up->mu);
    *out = t;
    return CF_OK;
}

/* Receipts come from other processes of the job: checked as input (each
 * number in range and put once, an ETag of printable ASCII within the
 * length this layer keeps) before any is taken (pass 0), then taken. */
static cf_status receipts_pass(cf__upload *up, const char *text, uint8_t *seen, int pass,
                               cf_error *err) {
    const char *name = cf__upload_name(up);
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol) return cf__err(err, CF_E_ARG, "%s: a receipt without its line end", name);
        char *end;
        unsigned long num = strtoul(p, &end, 10);
        const char *tag = end < eol && *end == ' ' ? end + 1 : eol;
        size_t tn = (size_t)(eol - tag);
        int bad = end == p || *p < '0' || *p > '9' || (end != eol && *end != ' ') || num < 1 ||
                  num > CF__UPLOAD_MAX_PARTS || tn >= 256 || (!up->azure && !tn) ||
                  (up->azure && tn);
        for (size_t k = 0; !bad && k < tn; k++) bad = tag[k] < 0x20 || tag[k] > 0x7e;
        if (bad)
            return cf__err(err, CF_E_ARG, "%s: a receipt that is not \"NUMBER%s\" with a "
                           "part number in 1..%u", name, up->azure ? "" : " ETAG",
                           CF__UPLOAD_MAX_PARTS);
        char **e = &up->etag[num - 1];
        if (pass == 0 && (*e || seen[num - 1]))
            return cf__err(err, CF_E_ARG, "%s: part %lu put twice (by two processes, or "
                           "receipts given twice)", name, num);
        seen[num - 1] = 1;
        if (pass == 1) {
            *e = cf__malloc(tn + 1);
            if (!*e) return cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
            memcpy(*e, tag, tn);
            (*e)[tn] = 0;
        }
        p = eol + 1;
    }
    return CF_OK;
}

cf_status cf__upload_add_receipts(cf__upload *up, const char *text, cf_error *err) {
    /* this process's own parts first: a receipt for one of them is then
     * seen as a part put twice, not overwritten when its answer comes */
    CF__TRY(wait_sent(up, err));
    uint8_t *seen = cf__calloc(CF__UPLOAD_MAX_PARTS, 1);
    if (!seen) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cf__upload_name(up));
    cf_status st = CF_OK;
    pthread_mutex_lock(&up->mu); /* (the senders write the table under it) */
    for (int pass = 0; !st && pass < 2; pass++) /* check all, then take all */
        st = receipts_pass(up, text, seen, pass, err);
    pthread_mutex_unlock(&up->mu);
    free(seen);
    return st;
}

cf_status cf__upload_check_whole(cf__upload *up, cf_error *err) {
    CF__TRY(wait_sent(up, err));
    pthread_mutex_lock(&up->mu);
    uint32_t n = 0, gap = 0;
    for (uint32_t i = 0; i < CF__UPLOAD_MAX_PARTS; i++) {
        if (!up->etag[i]) continue;
        if (n < i && !gap) gap = n + 1; /* the first number missing */
        n = i + 1;
    }
    pthread_mutex_unlock(&up->mu);
    if (!n)
        return cf__err(err, CF_E_ARG, "%s: no part was put (an empty object would be made)",
                       cf__upload_name(up));
    if (gap)
        return cf__err(err, CF_E_ARG, "%s: part %u of parts 1..%u missing (no process put it, "
                       "or its receipt was not given): the object would lack its bytes",
                       cf__upload_name(up), gap, n);
    return CF_OK;
}

cf_status cf__upload_finish(cf__upload *up, cf_error *err) {
    cf_status st = wait_sent(up, err);
    stop_senders(up);
    size_t len = 0;
    uint32_t nparts = 0;
    for (uint32_t i = 0; !st && i < CF__UPLOAD_MAX_PARTS; i++) nparts += up->etag[i] != NULL;
    char *body = st ? NULL : commit_body(up, &len);
    if (!st && !body) st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cf__upload_name(up));
    if (!st) {
        cf__auth_req r = {.method = up->azure ? "PUT" : "POST", .body_len = len, .nparams = 1};
        char sha[65];
        if (up->azure) {
            r.names[0] = "comp", r.values[0] = "blocklist";
        } else {
            cf__sha256_hex(body, len, sha);
            r.body_sha256 = sha;
            r.names[0] = "uploadId", r.values[0] = up->upload_id;
        }
        u_resp resp = {0};
        st = request(up, &r, (const uint8_t *)body, len, &resp,
                     up->azure ? "committing the block list" : "completing the multipart upload",
                     err);
        if (st == CF_E_NOTFOUND && resp.retried && !up->azure && completed_anyway(up, nparts))
            st = CF_OK;
        if (st && up->azure && err && strstr(err->msg, "(InvalidBlockList)")) {
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n,
                     ": another writer committed this blob while this one was writing "
                     "(Azure then drops the blocks it did not list); the blob is theirs");
        }
        resp_free(&resp);
    }
    free(body);
    if (st) {
        abort_upload(up, err);
        return st;
    }
    free_upload(up);
    return CF_OK;
}

void cf__upload_abort(cf__upload *up) {
    if (up) abort_upload(up, NULL);
}
