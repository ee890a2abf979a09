/*
 * header_cache.h - header bytes of remote files kept per cf_io (in memory)
 * and optionally on disk (io option header_cache_dir), with the object's
 * size, ETag and Last-Modified.  A hit opens a file with no request; later
 * tile reads still send If-Match with the cached ETag (or, without a
 * strong one, If-Unmodified-Since with the cached date), so a changed
 * object is reported as changed rather than read with a stale index.
 *
 * Entries are keyed by what names the object and who asks for it (hc_key.c:
 * scheme, endpoint, store, key and credential identity, without the query
 * parameters that sign or expire); the disk half (hc_disk.c) keeps its
 * folder and files private to the user, checksums every entry and evicts
 * the least recently used past a size cap.  docs/reader.md, "Header cache
 * security", states the rules.
 */
#ifndef CF_HEADER_CACHE_H
#define CF_HEADER_CACHE_H

#include "../io/io.h"

typedef struct cf__hc_range {
    uint64_t off;
    size_t len;
    uint8_t *data;
} cf__hc_range;

typedef struct cf__hc_entry {
    uint64_t size;
    char *etag;
    /* The object's Last-Modified when the header was read (NULL: none):
     * without a strong ETag it is what a later read is checked against
     * (If-Unmodified-Since), as lib/io/http.c does within one open. */
    char *last_modified;
    cf__hc_range *ranges;
    size_t nranges, cap;
    size_t bytes;
    int incomplete;       /* a range was left out (too many, or no memory):
                           * such an entry is never stored */
} cf__hc_entry;

/* Most ranges an entry keeps: a header more scattered is not cached. */
#define HC_MAX_RANGES 64

cf__hc_entry *cf__hc_entry_new(void);
void cf__hc_entry_free(cf__hc_entry *e);
/* Append a copy of one header range.  Past HC_MAX_RANGES ranges (a header
 * too scattered to be worth keeping) or out of memory the range is left
 * out, the entry marked incomplete, and CF_E_LIMIT / CF_E_NOMEM returned:
 * recording for the cache never fails an open. */
cf_status cf__hc_add_range(cf__hc_entry *e, uint64_t off, const uint8_t *data,
                           size_t len);
/* A private copy of the cached entry for src's object, or NULL. */
cf__hc_entry *cf__hc_lookup(cf_io *io, const cf__src *src);
/* Remember e (copied, with its last_modified) for src's object with the
 * given ETag (may be NULL); an incomplete entry is not stored, and one
 * already stored is dropped, so that every open does not copy and write
 * it again for nothing.  Without an ETag or a Last-Modified the entry
 * stays in memory only: a later process could not tell a changed object
 * (no If-Match or If-Unmodified-Since to fail) and would read it with a
 * stale header. */
void cf__hc_store(cf_io *io, const cf__src *src, const cf__hc_entry *e,
                  const char *etag);
/* Drop src's entry from memory and disk (a stale one: the object changed). */
void cf__hc_forget(cf_io *io, const cf__src *src);
/* Why io's on-disk cache is off ("header cache folder ... is writable by
 * others ..."), or NULL while it works or was never asked for.  The same
 * sentence went to stderr once when the folder was refused. */
const char *cf__hc_disk_refusal(cf_io *io);

/* ---- between header_cache.c, hc_key.c and hc_disk.c ------------------ */

/* SHA-256 of the key material: names disk entries and memory items. */
typedef struct cf__hc_key {
    uint8_t b[32];
} cf__hc_key;

/* hc_key.c: src's key.  0 for a local file or out of memory. */
int cf__hc_key_of(const cf__src *src, cf__hc_key *out);
/* The part of a request URL that names the object (exposed for tests):
 * the URL without its fragment and without the query parameters of a SAS
 * (sig=, se=, st=, ...) or a presigned URL (X-Amz-*, X-Goog-*, Signature
 * and Expires), which change at every rotation; `who` gets the identity
 * those parameters name (the key id of X-Amz-Credential, a SAS's skoid),
 * never a signature.  malloc'ed, NULL when out of memory. */
char *cf__hc_stable_url(const char *url, char *who, size_t n);

/* hc_folder.c: open dir, creating what is missing (0700), when it and the
 * way to it are private to this user: a descriptor to read it by, or -1
 * with why (n bytes) saying what is wrong ("is owned by uid 1001, not by
 * this user (uid 0)", "is below /shared, which every user may write to
 * ..."). */
int cf__hc_folder_open(const char *dir, char *why, size_t n);

/* hc_disk.c: the folder of one io (created on first use, from its
 * options); every call is thread-safe. */
typedef struct cf__hc_disk cf__hc_disk;
cf__hc_disk *cf__hc_disk_new(const char *dir, uint64_t max_bytes);
void cf__hc_disk_free(cf__hc_disk *d);
cf__hc_entry *cf__hc_disk_load(cf__hc_disk *d, const cf__hc_key *k);
void cf__hc_disk_store(cf__hc_disk *d, const cf__hc_key *k,
                       const cf__hc_entry *e);
void cf__hc_disk_drop(cf__hc_disk *d, const cf__hc_key *k);
const char *cf__hc_disk_why_off(cf__hc_disk *d);

#endif
