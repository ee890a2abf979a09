/*
 * io.h - the read-ranges interface every backend sits behind.
 *
 * A cf__src is one opened object (local file, or HTTP/S3/Azure/GCS object).
 * Callers ask for byte ranges; local files are served with pread on the
 * calling thread, remote ones by the cf_io's single libcurl-multi loop
 * thread with many requests in flight.  Knows nothing of TIFF.
 *
 * Validation lives here: range responses are checked against the request
 * (206 + matching Content-Range, exact length), the ETag of the first
 * response is pinned and sent as If-Match afterwards, truncated bodies are
 * resumed, retries follow the io's backoff and shared retry budget.
 */
#ifndef CF_IO_H
#define CF_IO_H

#include "../common/common.h"

typedef struct cf__src cf__src;

/* One byte range to read.  The caller owns dst (len bytes). */
typedef struct cf__range_req {
    uint64_t off, len;
    uint8_t *dst;
    cf_status status;   /* set on completion */
    cf_error *err;      /* optional: filled on failure */
    void *user;         /* caller's tag, untouched */
} cf__range_req;

/* 1 when `url` names a remote object, 0 for a local path: the one rule
 * of the library (cf__src_new, the loader).  Remote: an RFC 3986 scheme
 * (a letter, then letters, digits, '+', '-', '.') followed by "://",
 * other than file (in any case); cf__src_new then takes http(s), s3, az
 * and gs and refuses other schemes by name.  Everything else is a path:
 * "file://" URLs, "s3:/x" (one slash), "./a://b", "3d://x" (a scheme
 * starts with a letter), "". */
int cf__url_is_remote(const char *url);

/* Parse the URL, pick the backend and credentials (from the environment
 * variables in design.md).  Local files are opened (size known); remote
 * objects are not contacted yet.  io (NULL only for local files) must
 * outlive the src.  A local file of an io may have its descriptor closed
 * by the io's pool (max_open_files) and reopened at its next read, which
 * fails with CF_E_CHANGED if it is no longer the same file.  Without an io
 * the descriptor stays open.  Thread-safe. */
cf_status cf__src_new(cf_io *io, const char *url, cf__src **out, cf_error *err);
void cf__src_free(cf__src *src);

/* First request: read [0, len) (fewer bytes when the object is shorter),
 * learning the object's size and ETag (which is then pinned).  Exactly one
 * request unless retried.  *got receives the byte count. */
cf_status cf__src_read_head(cf__src *src, uint8_t *buf, size_t len, size_t *got,
                           cf_error *err);
/* Use a size and ETag known from a header cache instead of a first request. */
void cf__src_assume(cf__src *src, uint64_t size, const char *etag);
/* The Last-Modified pinned by the first response that had one, into out
 * (n bytes; "" when none); and, with a header cache hit, the one known
 * from the cache: the validator when there is no strong ETag, checked by
 * every later response and sent as If-Unmodified-Since (http.c). */
void cf__src_last_modified(const cf__src *src, char *out, size_t n);
void cf__src_assume_last_modified(cf__src *src, const char *date);

uint64_t cf__src_size(const cf__src *src);      /* UINT64_MAX until known */
const char *cf__src_etag(const cf__src *src);   /* NULL if none */
const char *cf__src_name(const cf__src *src);   /* redacted URL */
const char *cf__src_url(const cf__src *src);    /* full URL (may hold secrets:
                                                 never print it) */
int cf__src_is_remote(const cf__src *src);
/* For a cache that outlives the process (the reader's header cache): a
 * copy (the caller frees it; NULL also when out of memory) of the URL a
 * remote src requests -- scheme, endpoint, store and key, its query as
 * sent (it may hold a SAS: never print or store it in clear) -- and,
 * in who (n bytes, NUL-terminated), whom its credentials name: "s3:" and
 * the access key id, "azure:ACCOUNT:" and "shared-key" / "sas" /
 * "anonymous", "gcs:" and "bearer" / "anonymous", or "http".  Never a
 * secret.  NULL (who empty) for a local file. */
char *cf__src_cache_identity(const cf__src *src, char *who, size_t n);
uint64_t cf__src_requests(const cf__src *src);  /* requests sent for this src */
cf_io *cf__src_io(const cf__src *src);

/* Read every range, blocking until all are done.  Nearby ranges (gap below
 * the io's merge_gap) are fetched as one request.  Returns CF_OK when all
 * succeeded, else the first failure (each req carries its own status).
 * Thread-safe: many threads may read one src at once. */
cf_status cf__src_read(cf__src *src, cf__range_req *reqs, size_t n,
                      cf_error *err);

/* Asynchronous form: `cb` runs once per request when it completes, on the
 * io loop thread for remote sources (keep it short: hand work to a pool) or
 * on the calling thread for local ones.  Ranges submitted together may be
 * merged.  The reqs array must stay valid until every callback ran. */
typedef void (*cf__range_cb)(cf__range_req *req, void *user);
cf_status cf__src_submit(cf__src *src, cf__range_req *reqs, size_t n,
                        cf__range_cb cb, void *user, cf_error *err);
/* Asynchronous form of cf__src_read_head, for many opens on one loop: r
 * asks for [0, r->len) (r->off 0, r->dst r->len bytes); cb(r, user) runs
 * once when it is done, as cf__src_submit's (the io loop thread for a
 * remote object, the calling thread for a local file), with r->len set to
 * the bytes the object had and its size and ETag learnt.  On an error
 * return cb never runs. */
cf_status cf__src_submit_head(cf__src *src, cf__range_req *r, cf__range_cb cb,
                             void *user, cf_error *err);

/* Decode gate.  Callers may wait on the network in any number, but only
 * as many as there are CPUs decode at once: a crowd of runnable decoders
 * starves the one I/O loop thread of CPU, so bodies sit in socket buffers
 * and every window waits longer.  Enter after the bytes arrived, leave when
 * decoded; the token goes to cf__io_decode_leave (NULL: no gate, fine to
 * pass back).  Per process: a forked child gets its own gate. */
void *cf__io_decode_enter(cf_io *io);
void cf__io_decode_leave(void *token);

/* io options as given (defaults filled), for the layers above. */
const cf_io_options *cf__io_opts(const cf_io *io);
/* Per-io state of the layers above (the reader's header cache): the first
 * call creates it with create(); cf_io_free destroys it with destroy().
 * Thread-safe. */
void *cf__io_upper_state(cf_io *io, void *(*create)(void),
                        void (*destroy)(void *));
/* Count a header-cache hit in the io's stats. */
void cf__io_note_cache_hit(cf_io *io);
/* on = 1: fail every request of this process's loop now in flight or
 * waiting (a retry's backoff included), and each one submitted while it
 * stays on, at once with CF_E_STATE; on = 0: back to normal.  For an
 * owner that is closing and must not wait out 164 ms round trips, or a
 * hung server's request_timeout_s. */
void cf__io_cancel(cf_io *io, int on);
/* Make io keep its local files' descriptors in from's pool (fdpool.c),
 * so that several ios of one owner stay within one max_open_files.  Call
 * before io opens any file. */
void cf__io_share_fdpool(cf_io *io, cf_io *from);

#endif
