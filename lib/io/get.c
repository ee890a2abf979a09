/*
 * get.c - cf_io_get: one whole (small) object into memory, through the
 * same cf__src path every read takes (credential routing, retries, the
 * ETag pinned by the first response, redacted names), for the JSON a STAC
 * catalog is made of.  The size is learnt from the first response (a
 * range read of the io's header_bytes) and checked against the caller's
 * cap before anything more is fetched or allocated.
 */
#include "io_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A server that ignores Range answers the first read with the whole
 * object (HTTP 200): accepted when it fits the buffer, refused by the
 * transfer with CF_E_RANGE otherwise.  Then the read is tried once more
 * with room for max_bytes + 1, so that such a server (most STAC APIs
 * generate their JSON) still works within the cap. */
static cf_status head(cf__src *s, uint8_t **buf, size_t *cap, size_t max_bytes,
                      size_t *got, cf_error *err) {
    cf_status st = cf__src_read_head(s, *buf, *cap, got, err);
    if (st != CF_E_RANGE || !cf__src_is_remote(s) || *cap > max_bytes) return st;
    uint64_t size = cf__src_size(s);
    if (size != UINT64_MAX && size > max_bytes) return st; /* caller says */
    size_t want = size != UINT64_MAX ? (size_t)size : max_bytes + 1;
    if (want == 0) want = 1;
    uint8_t *b = realloc(*buf, want);
    if (!b) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cf__src_name(s));
    *buf = b;
    *cap = want;
    cf__err_clear(err);
    return cf__src_read_head(s, *buf, *cap, got, err);
}

cf_status cf_io_get(cf_io *io, const char *url, size_t max_bytes, void **data,
                    size_t *len, cf_error *err) {
    cf_error own; /* the reason is looked at below */
    if (!err) err = &own;
    if (data) *data = NULL;
    if (len) *len = 0;
    if (!data || !len || !url)
        return cf__err(err, CF_E_ARG, "cf_io_get: data, len and url are required");
    if (max_bytes == 0 || max_bytes > CF_IO_GET_MAX)
        return cf__err(err, CF_E_ARG,
                       "cf_io_get: max_bytes %zu is out of range 1..%llu",
                       max_bytes, (unsigned long long)CF_IO_GET_MAX);
    cf__src *s = NULL;
    cf_status st = cf__src_new(io, url, &s, err);
    CF__TRY(st);
    size_t hb = io ? cf__io_opts(io)->header_bytes : 0;
    if (hb == 0) hb = 65536;
    size_t cap = max_bytes < hb ? max_bytes + 1 : hb;
    uint8_t *buf = malloc(cap);
    size_t got = 0;
    if (!buf) {
        st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cf__src_name(s));
        goto done;
    }
    st = head(s, &buf, &cap, max_bytes, &got, err);
    uint64_t size = cf__src_size(s);
    if ((st == CF_OK || st == CF_E_RANGE) && size != UINT64_MAX && size > max_bytes) {
        st = cf__err(err, CF_E_LIMIT,
                     "%s: %" PRIu64 " bytes, more than the %zu allowed (max_bytes)",
                     cf__src_name(s), size, max_bytes);
        goto done;
    }
    if (st == CF_E_RANGE && cf__src_is_remote(s) &&
        strstr(err->msg, "not range-capable")) {
        /* The transfer refused a whole-object answer longer than the room
         * given, and that room was max_bytes + 1 (head()).  The server's
         * status (200) stays with the error. */
        int status = err->http_status;
        st = cf__err(err, CF_E_LIMIT,
                     "%s: more than the %zu bytes allowed (max_bytes; the server "
                     "ignores Range and sends the whole object)",
                     cf__src_name(s), max_bytes);
        err->http_status = status;
        goto done;
    }
    if (st != CF_OK) goto done;
    if (size == UINT64_MAX) size = got; /* a local file always knows */
    if (size > got) {
        /* The rest, as range reads pinned to the first response's ETag:
         * an object that changes in between fails with CF_E_CHANGED. */
        uint8_t *b = realloc(buf, (size_t)size);
        if (!b) {
            st = cf__err(err, CF_E_NOMEM, "%s: out of memory for %" PRIu64 " bytes",
                         cf__src_name(s), size);
            goto done;
        }
        buf = b;
        cap = (size_t)size;
        cf__range_req r = {got, size - got, buf + got, CF_OK, NULL, NULL};
        st = cf__src_read(s, &r, 1, err);
        if (st != CF_OK) goto done;
    }
    /* Fit to the object, a NUL after it (so text can be used as is). */
    uint8_t *b = realloc(buf, (size_t)size + 1);
    if (b) buf = b;
    else if (cap < (size_t)size + 1) {
        st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cf__src_name(s));
        goto done;
    }
    buf[size] = 0;
    *data = buf;
    *len = (size_t)size;
    buf = NULL;
done:
    free(buf);
    cf__src_free(s);
    return st;
}

void cf_io_get_free(void *data) { free(data); }
