/*
 * header_cache.h - header bytes of remote files kept per cf_io (in memory)
 * and optionally on disk (io option header_cache_dir), keyed by URL, with
 * the object's size and ETag.  A hit opens a file with no request; later
 * tile reads still send If-Match with the cached ETag, so a changed object
 * is reported as changed rather than read with a stale index.
 */
#ifndef CF_HEADER_CACHE_H
#define CF_HEADER_CACHE_H

#include "../io/io.h"

typedef struct cf_hc_range {
    uint64_t off;
    size_t len;
    uint8_t *data;
} cf_hc_range;

typedef struct cf_hc_entry {
    uint64_t size;
    char *etag;
    cf_hc_range *ranges;
    size_t nranges, cap;
    size_t bytes;
    int incomplete;       /* a range was left out (too many, or no memory):
                           * such an entry is never stored */
} cf_hc_entry;

/* Most ranges an entry keeps: a header more scattered is not cached. */
#define HC_MAX_RANGES 64

cf_hc_entry *cf__hc_entry_new(void);
void cf__hc_entry_free(cf_hc_entry *e);
/* Append a copy of one header range.  Past HC_MAX_RANGES ranges (a header
 * too scattered to be worth keeping) or out of memory the range is left
 * out, the entry marked incomplete, and CF_E_LIMIT / CF_E_NOMEM returned:
 * recording for the cache never fails an open. */
cf_status cf__hc_add_range(cf_hc_entry *e, uint64_t off, const uint8_t *data,
                           size_t len);
/* A private copy of the cached entry for url, or NULL. */
cf_hc_entry *cf__hc_lookup(cf_io *io, const char *url);
/* Remember e (copied) for url with the given ETag (may be NULL); an
 * incomplete entry is not stored, and one already stored is dropped, so
 * that every open does not copy and write it again for nothing.  Without
 * an ETag the entry stays in memory only: a later process could not tell
 * a changed object (no If-Match to fail) and would read it with a stale
 * header. */
void cf__hc_store(cf_io *io, const char *url, const cf_hc_entry *e,
                  const char *etag);
/* Drop url's entry from memory and disk (a stale one: the object changed). */
void cf__hc_forget(cf_io *io, const char *url);

#endif
