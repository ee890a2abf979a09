/*
 * src.c - cf__src: one opened object.  Local files (plain paths, file://)
 * are read with pread on the calling thread; remote objects turn each
 * batch of ranges into as few HTTP requests as the io's merge_gap allows
 * and hand them to the io loop.  The blocking calls wait on a small
 * per-call completion counter, so many threads may read one src at once.
 */
#include "auth_int.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int cf__url_is_remote(const char *url) {
    size_t n = url ? cf__url_scheme_len(url) : 0;
    return n > 0 && !(n == 4 && strncasecmp(url, "file", 4) == 0);
}

/* file:///abs/path and file://localhost/abs/path -> /abs/path. */
static const char *local_path(const char *url) {
    if (strncasecmp(url, "file://", 7) != 0) return url;
    const char *p = url + 7;
    if (strncasecmp(p, "localhost/", 10) == 0) p += 9;
    return p;
}

/* path made absolute against the current directory (a copy; NULL when
 * out of memory), so that the pool's reopen finds the same file after
 * a chdir().  Symbolic links are kept as they are: the reopen checks the
 * file's identity anyway. */
static char *absolute(const char *path) {
    if (path[0] == '/') return cf__strdup(path);
    size_t cap = 4096;
    char *cwd = cf__malloc(cap);
    while (cwd && !getcwd(cwd, cap)) {
        free(cwd);
        /* ERANGE: a deeper directory; otherwise (the directory was
         * removed) the path as given is the best there is. */
        if (errno != ERANGE || cap >= ((size_t)1 << 20)) return cf__strdup(path);
        cap *= 2;
        cwd = cf__malloc(cap);
    }
    if (!cwd) return NULL;
    size_t a = strlen(cwd), b = strlen(path);
    char *out = cf__malloc(a + 1 + b + 1);
    if (out) {
        memcpy(out, cwd, a);
        out[a] = '/';
        memcpy(out + a + 1, path, b + 1);
    }
    free(cwd);
    return out;
}

cf_status cf__src_new(cf_io *io, const char *url, cf__src **out, cf_error *err) {
    if (!out) return cf__err(err, CF_E_ARG, "cf__src_new: out is NULL");
    *out = NULL;
    if (!url || !*url) return cf__err(err, CF_E_ARG, "empty URL or file name");
    /* A name holding a control character is refused (a URL list can be
     * hostile; ESC, BEL or CR must not reach a request line, a terminal
     * or a log); the message escapes it.  C1 controls in UTF-8 (C2 80..
     * C2 9F: CSI is C2 9B) too, which terminals act on like ESC [. */
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F)) {
            char shown[CF__NAME_MAX];
            cf__redact_url(url, shown, sizeof shown);
            return cf__err(err, CF_E_ARG,
                           "%s: a URL or file name holding a control character "
                           "(0x%02x at byte %zu) is refused",
                           shown, *p, (size_t)(p - (const unsigned char *)url));
        }
    int remote = cf__url_is_remote(url);
    char shown[CF__NAME_MAX];
    cf__redact_url(url, shown, sizeof shown);
    if (remote && !io)
        return cf__err(err, CF_E_ARG, "%s: a remote URL needs a cf_io", shown);
    cf__src *s = cf__calloc(1, sizeof *s);
    if (!s) return cf__err(err, CF_E_NOMEM, "%s: out of memory", shown);
    s->io = io;
    s->remote = remote;
    s->fd = -1;
    s->size = UINT64_MAX;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->sign_mu, NULL);
    atomic_init(&s->requests, 0);
    if (!(s->url = cf__strdup(url))) goto fail;
    if (remote) {
        cf_status st = cf__auth_new(url, &s->auth, err);
        if (st == CF_OK && !(s->name = cf__strdup(cf__auth_redacted(s->auth))))
            st = cf__err(err, CF_E_NOMEM, "%s: out of memory", shown);
        if (st == CF_OK && io->opts.sign) {
            /* Signed before the first request: the header read. */
            cf__auth *a;
            st = cf__src_sign(s, &a, &s->expires, &s->renew_at, err);
            if (st == CF_OK) {
                cf__auth_free(s->auth);
                s->auth = a;
            }
        }
        if (st != CF_OK) {
            cf__src_free(s);
            return st;
        }
    } else {
        const char *path = local_path(url);
        if (!(s->name = cf__name_dup(path)) || !(s->path = absolute(path)))
            goto fail;
        s->fd = open(path, O_RDONLY | O_CLOEXEC);
        cf_status st = CF_OK;
        struct stat stt;
        if (s->fd < 0) {
            int e = errno;
            st = cf__err(err, e == ENOENT ? CF_E_NOTFOUND : CF_E_IO,
                         "%s: cannot open: %s", s->name, strerror(e));
            cf__fdpool_limit_hint(io ? io->fdpool : NULL, e, err);
        } else if (fstat(s->fd, &stt) != 0 || !S_ISREG(stt.st_mode)) {
            st = cf__err(err, CF_E_IO, "%s: not a regular file", s->name);
        }
        if (st != CF_OK) {
            cf__src_free(s);
            return st;
        }
        s->size = (uint64_t)stt.st_size;
        s->dev = stt.st_dev;
        s->ino = stt.st_ino;
        s->mtime = stt.st_mtim;
        /* From now on the io's pool may close the descriptor (not the
         * pool of a parent process: see fdpool.c). */
        if (io && cf__fdpool_add(io->fdpool, s))
            s->pool = cf__fdpool_ref(io->fdpool);
    }
    *out = s;
    return CF_OK;
fail:
    cf__src_free(s);
    return cf__err(err, CF_E_NOMEM, "%s: out of memory", shown);
}

void cf__src_free(cf__src *s) {
    if (!s) return;
    if (s->pool) {
        cf__fdpool_remove(s->pool, s);
        cf__fdpool_unref(s->pool);
    } else if (s->fd >= 0) {
        close(s->fd);
    }
    cf__auth_free(s->auth);
    free(s->path);
    free(s->url);
    free(s->name);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->sign_mu);
    free(s);
}

void cf__src_assume(cf__src *s, uint64_t size, const char *etag) {
    if (!s || !s->remote) return;
    pthread_mutex_lock(&s->mu);
    s->size = size;
    snprintf(s->etag, sizeof s->etag, "%s", etag ? etag : "");
    pthread_mutex_unlock(&s->mu);
}

void cf__src_last_modified(const cf__src *s, char *out, size_t n) {
    cf__src *m = (cf__src *)s; /* the lock is not part of the value */
    pthread_mutex_lock(&m->mu);
    snprintf(out, n, "%s", s->last_modified);
    pthread_mutex_unlock(&m->mu);
}

void cf__src_assume_last_modified(cf__src *s, const char *date) {
    if (!s || !s->remote || !date) return;
    pthread_mutex_lock(&s->mu);
    /* It goes back to the server in a header: only a printable date that
     * fits, as http.c keeps of a response's. */
    size_t n = strlen(date);
    int ok = n < sizeof s->last_modified && curl_getdate(date, NULL) > 0;
    for (size_t i = 0; ok && i < n; i++) ok = date[i] >= 0x20 && date[i] < 0x7f;
    if (ok) memcpy(s->last_modified, date, n + 1);
    pthread_mutex_unlock(&s->mu);
}

uint64_t cf__src_size(const cf__src *s) {
    cf__src *m = (cf__src *)s; /* the lock is not part of the value */
    pthread_mutex_lock(&m->mu);
    uint64_t v = s->size;
    pthread_mutex_unlock(&m->mu);
    return v;
}

const char *cf__src_etag(const cf__src *s) {
    /* Written once (pinned) by the first response, before any caller can
     * ask: cf__src_read_head returns only after that. */
    return s->etag[0] ? s->etag : NULL;
}
const char *cf__src_name(const cf__src *s) { return s->name; }
const char *cf__src_url(const cf__src *s) { return s->url; }
int cf__src_is_remote(const cf__src *s) { return s->remote; }

/* Reads the credential fields of the auth handle (auth_int.h): only their
 * names (key id, account) leave, never a secret. */
char *cf__src_cache_identity(const cf__src *s, char *who, size_t n) {
    if (n) who[0] = 0;
    if (!s->remote) return NULL;
    cf__auth *a = cf__src_auth_now((cf__src *)s);
    if (!a) return NULL;
    switch (a->kind) {
    case CF_AUTH_S3:
        snprintf(who, n, "s3:%s", a->s3_signed ? a->access_key : "unsigned");
        break;
    case CF_AUTH_AZURE:
        snprintf(who, n, "azure:%s:%s", a->account ? a->account : "",
                 a->az_shared_key ? "shared-key"
                 : a->has_query   ? "sas"
                                  : "anonymous");
        break;
    case CF_AUTH_GCS:
        snprintf(who, n, "gcs:%s", a->bearer ? "bearer" : "anonymous");
        break;
    default:
        snprintf(who, n, "http");
        break;
    }
    char *url = cf__strdup(a->http_url);
    cf__auth_free(a);
    return url;
}
uint64_t cf__src_requests(const cf__src *s) {
    return atomic_load(&((cf__src *)s)->requests);
}
cf_io *cf__src_io(const cf__src *s) { return s->io; }

/* ---- local files ----------------------------------------------------- */

static cf_status local_read(cf__src *s, cf__range_req *r) {
    uint64_t end;
    if (!cf__add_u64(r->off, r->len, &end) || end > s->size) {
        r->status = cf__err(r->err, CF_E_RANGE,
                            "%s: bytes %" PRIu64 "+%" PRIu64
                            " lie past the end of the file (%" PRIu64 " bytes)",
                            s->name, r->off, r->len, s->size);
        return r->status;
    }
    uint64_t done = 0;
    if (!r->len) {
        r->status = CF_OK;
        if (r->err) cf__err_clear(r->err);
        return CF_OK;
    }
    atomic_fetch_add(&s->requests, 1);
    /* Local reads count in the io's statistics like remote ones, so a
     * loader's bytes_fetched / requests mean the same on either. */
    if (s->io) atomic_fetch_add(&s->io->n_requests, 1);
    int fd, owned = 0;
    if (s->pool) {
        /* s->fd changes under the pool's lock: not read here */
        r->status = cf__fdpool_acquire(s->pool, s, &fd, &owned, r->err);
        if (r->status) return r->status;
    } else {
        fd = s->fd;
    }
    while (done < r->len) {
        ssize_t k = pread(fd, r->dst + done, (size_t)(r->len - done),
                          (off_t)(r->off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            r->status = cf__err(r->err, CF_E_IO, "%s: read at %" PRIu64 ": %s",
                                s->name, r->off + done,
                                k < 0 ? strerror(errno) : "file shrank");
            if (s->pool) cf__fdpool_release(s->pool, s, fd, owned);
            return r->status;
        }
        done += (uint64_t)k;
        if (s->io) atomic_fetch_add(&s->io->n_bytes, (uint64_t)k);
    }
    if (s->pool) cf__fdpool_release(s->pool, s, fd, owned);
    r->status = CF_OK;
    if (r->err) cf__err_clear(r->err);
    return CF_OK;
}

/* ---- remote: batching ----------------------------------------------- */

static int cmp_req(const void *a, const void *b) {
    const cf__range_req *x = *(cf__range_req *const *)a, *y = *(cf__range_req *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static cf__xfer *xfer_new(cf__src *s, cf__range_req **rs, size_t n,
                          cf__range_cb cb, void *user) {
    cf__xfer *x = cf__calloc(1, sizeof *x);
    if (!x) return NULL;
    x->reqs = cf__calloc(n, sizeof *x->reqs);
    if (!x->reqs) {
        free(x);
        return NULL;
    }
    memcpy(x->reqs, rs, n * sizeof *rs);
    x->nreq = n;
    x->src = s;
    x->auth = cf__src_auth_now(s);
    x->cb = cb;
    x->user = user;
    x->off = rs[0]->off;
    uint64_t end = 0;
    for (size_t i = 0; i < n; i++)
        if (rs[i]->off + rs[i]->len > end) end = rs[i]->off + rs[i]->len;
    x->len = end - x->off;
    x->retry_after = -1;
    return x;
}

/* Group the non-empty, in-bounds requests into transfers and submit them.
 * Requests that fail before any I/O complete through cb right away. */
static cf_status remote_submit(cf__src *s, cf__range_req *reqs, size_t n,
                               cf__range_cb cb, void *user, cf_error *err) {
    const cf_io_options *o = &s->io->opts;
    CF__TRY(cf__src_fresh(s, err));
    uint64_t size = cf__src_size(s);
    cf__range_req **v = cf__calloc(n, sizeof *v);
    cf__range_req **imm = cf__calloc(n, sizeof *imm);
    cf__xfer **xs = cf__calloc(n, sizeof *xs);
    if (!v || !xs || !imm) {
        free(v);
        free(imm);
        free(xs);
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", s->name);
    }
    size_t nv = 0, nx = 0, ni = 0;
    for (size_t i = 0; i < n; i++) {
        cf__range_req *r = &reqs[i];
        uint64_t end;
        r->status = CF_OK;
        if (!cf__add_u64(r->off, r->len, &end) ||
            (size != UINT64_MAX && end > size)) {
            r->status = cf__err(r->err, CF_E_RANGE,
                                "%s: bytes %" PRIu64 "+%" PRIu64
                                " lie past the end of the object (%" PRIu64
                                " bytes)",
                                s->name, r->off, r->len, size);
            imm[ni++] = r;
            continue;
        }
        if (r->len)
            v[nv++] = r;
        else
            imm[ni++] = r;
    }
    qsort(v, nv, sizeof *v, cmp_req);
    cf_status st = CF_OK;
    for (size_t i = 0; i < nv && st == CF_OK;) {
        size_t j = i + 1;
        uint64_t end = v[i]->off + v[i]->len;
        while (j < nv && v[j]->off <= end + o->merge_gap) {
            uint64_t e2 = v[j]->off + v[j]->len;
            uint64_t nend = e2 > end ? e2 : end;
            if (nend - v[i]->off > CF__MERGE_MAX) break;
            end = nend;
            j++;
        }
        cf__xfer *x = xfer_new(s, v + i, j - i, cb, user);
        if (!x) {
            st = cf__err(err, CF_E_NOMEM, "%s: out of memory", s->name);
            break;
        }
        xs[nx++] = x;
        i = j;
    }
    if (st == CF_OK) st = cf__io_submit(s->io, xs, nx, err);
    if (st != CF_OK) {
        for (size_t i = 0; i < nx; i++) cf__xfer_free(xs[i]);
        free(v);
        free(imm);
        free(xs);
        return st;
    }
    /* Out-of-bounds and empty requests complete here, on the caller (the
     * others may already be completing on the loop thread). */
    for (size_t i = 0; i < ni; i++) cb(imm[i], user);
    free(v);
    free(imm);
    free(xs);
    return CF_OK;
}

/* ---- blocking reads -------------------------------------------------- */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
    cf__range_req *first_bad; /* lowest-indexed failure */
} waiter;

static void waiter_cb(cf__range_req *r, void *user) {
    waiter *w = user;
    pthread_mutex_lock(&w->mu);
    if (r->status != CF_OK && (!w->first_bad || r < w->first_bad))
        w->first_bad = r;
    if (--w->left == 0) pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void waiter_init(waiter *w, size_t n) {
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->left = n;
    w->first_bad = NULL;
}

/* Wait for every callback when `submitted`, then release w. */
static void waiter_finish(waiter *w, int submitted) {
    pthread_mutex_lock(&w->mu);
    while (submitted && w->left) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

/* Submit and wait.  Requests without an error slot borrow one from `errs`
 * so that the first failure's message can be returned. */
static cf_status remote_read(cf__src *s, cf__range_req *reqs, size_t n,
                             cf_error *err) {
    cf_error *errs = NULL;
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) nb += reqs[i].err == NULL;
    if (nb && !(errs = cf__calloc(nb, sizeof *errs)))
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", s->name);
    unsigned char *borrowed = cf__calloc(n, 1);
    if (!borrowed) {
        free(errs);
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", s->name);
    }
    for (size_t i = 0, k = 0; i < n; i++)
        if (!reqs[i].err) {
            reqs[i].err = &errs[k++];
            borrowed[i] = 1;
        }
    waiter w;
    waiter_init(&w, n);
    cf_status st = remote_submit(s, reqs, n, waiter_cb, &w, err);
    waiter_finish(&w, st == CF_OK);
    if (st == CF_OK && w.first_bad) {
        st = w.first_bad->status;
        if (err) *err = *w.first_bad->err;
    }
    for (size_t i = 0; i < n; i++)
        if (borrowed[i]) reqs[i].err = NULL;
    free(borrowed);
    free(errs);
    return st;
}

cf_status cf__src_read(cf__src *s, cf__range_req *reqs, size_t n, cf_error *err) {
    if (!s || (n && !reqs))
        return cf__err(err, CF_E_ARG, "cf__src_read: NULL argument");
    if (!n) return CF_OK;
    if (s->remote) return remote_read(s, reqs, n, err);
    cf_status first = CF_OK;
    for (size_t i = 0; i < n; i++) {
        /* A request without an error slot borrows one, so that the first
         * failure's message reaches err without reading again. */
        cf_error tmp;
        int borrowed = !reqs[i].err;
        if (borrowed) reqs[i].err = &tmp;
        cf_status st = local_read(s, &reqs[i]);
        if (st != CF_OK && first == CF_OK) {
            first = st;
            if (err) *err = *reqs[i].err;
        }
        if (borrowed) reqs[i].err = NULL;
    }
    return first;
}

cf_status cf__src_submit(cf__src *s, cf__range_req *reqs, size_t n, cf__range_cb cb,
                        void *user, cf_error *err) {
    if (!s || !cb || (n && !reqs))
        return cf__err(err, CF_E_ARG, "cf__src_submit: NULL argument");
    if (!n) return CF_OK;
    if (s->remote) return remote_submit(s, reqs, n, cb, user, err);
    for (size_t i = 0; i < n; i++) {
        local_read(s, &reqs[i]);
        cb(&reqs[i], user);
    }
    return CF_OK;
}

cf_status cf__src_submit_head(cf__src *s, cf__range_req *r, cf__range_cb cb,
                             void *user, cf_error *err) {
    if (!s || !r || !r->dst || !r->len || r->off || !cb)
        return cf__err(err, CF_E_ARG, "cf__src_submit_head: bad argument");
    uint64_t size = cf__src_size(s);
    if (!s->remote || size != UINT64_MAX) {
        /* Size known (a local file, or cf__src_assume): an ordinary read
         * of what the object has. */
        if (size < r->len) r->len = size;
        if (!r->len) {
            r->status = CF_OK;
            if (r->err) cf__err_clear(r->err);
            cb(r, user);
            return CF_OK;
        }
        return cf__src_submit(s, r, 1, cb, user, err);
    }
    CF__TRY(cf__src_fresh(s, err));
    cf__xfer *x = xfer_new(s, &r, 1, cb, user);
    if (!x) return cf__err(err, CF_E_NOMEM, "%s: out of memory", s->name);
    x->head = 1;
    cf_status st = cf__io_submit(s->io, &x, 1, err);
    if (st != CF_OK) cf__xfer_free(x);
    return st;
}

cf_status cf__src_read_head(cf__src *s, uint8_t *buf, size_t len, size_t *got,
                           cf_error *err) {
    if (got) *got = 0;
    if (!s || !buf || !len)
        return cf__err(err, CF_E_ARG, "cf__src_read_head: bad argument");
    cf_error e;
    cf__err_clear(&e);
    cf__range_req r = {0, len, buf, CF_OK, &e, NULL};
    waiter w;
    waiter_init(&w, 1);
    cf_status st = cf__src_submit_head(s, &r, waiter_cb, &w, err);
    waiter_finish(&w, st == CF_OK);
    if (st == CF_OK) {
        st = r.status;
        if (st != CF_OK) {
            if (err) *err = e;
        } else if (got) {
            *got = (size_t)r.len; /* the bytes the object really had */
        }
    }
    return st;
}
