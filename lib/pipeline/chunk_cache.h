/*
 * chunk_cache.h - decoded tiles of the loader's inputs, kept for the next
 * patches that need them, and shared by the readers that need them at the
 * same time.
 *
 * A 20 m band read onto 10 m patches needs, for each 256 px patch, a 130 px
 * window of the 20 m file: with the bilinear kernel's margin it touches up
 * to four 20 m tiles, each of which the neighbouring patches need again (a
 * 60 m tile serves 36 patches).  Grid patches smaller than tiles share
 * tiles the same way, and random patches over a dataset that partly fits
 * in memory meet tiles decoded before (GDAL's block cache gives TorchGeo's
 * workers the same).  The cache holds decoded chunks (as cf__cog_paste
 * takes them) within a byte budget, least recently used first out; entries
 * in use are pinned.
 *
 * In-flight sharing: many patches are read at once (100+ over a 164 ms
 * link), and neighbours miss the same tile together.  The first reader to
 * miss a chunk claims it: a pending entry (its bytes counted in the
 * budget) that the others wait on instead of fetching and decoding it
 * again.  Each entry is a small state machine:
 *
 *     (absent) --claim--> PENDING --publish--> READY --evict--> (absent)
 *                            |
 *                            +--abandon--> FAILED (out of the table; freed
 *                                          by its last waiter)
 *
 * A waiter of a FAILED entry fetches the chunk itself: the claimer's fetch
 * error may be transient (its own retries spent, a connection reset), and
 * another sample must not fail of it without its own attempt.
 *
 * No deadlock, by the callers' order: a reader sends (and finishes) the
 * fetches of every chunk it claimed before it waits on a chunk another
 * reader claimed, so every pending entry belongs to a reader that is
 * fetching, decoding or publishing it, never to one that waits.
 * Thread-safe.
 */
#ifndef CF_CHUNK_CACHE_H
#define CF_CHUNK_CACHE_H

#include <sys/types.h>

#include "cog_internal.h"

typedef struct cf__ccache cf__ccache;

/* What cf__cc_claim found. */
typedef enum cf__cc_found {
    CF__CC_HIT,     /* ready: *data pinned until cf__cc_put(*h) */
    CF__CC_CLAIMED, /* absent, now pending and the caller's: it must fetch
                       it, then cf__cc_publish or cf__cc_abandon(*h) */
    CF__CC_WAIT,    /* pending, another reader's: pinned; cf__cc_wait(*h),
                       then cf__cc_put(*h) */
    CF__CC_NONE     /* absent and no room (pinned entries fill the budget,
                       or len is above it): fetch it, keep nothing */
} cf__cc_found;

/* A cache of at most cap bytes of decoded chunks (plus a small record
 * each); NULL on out of memory. */
cf__ccache *cf__cc_new(size_t cap);
/* The process that made cc (a forked child makes its own). */
pid_t cf__cc_pid(const cf__ccache *cc);
/* lock 0: free the memory only (a forked child, where the lock may have
 * been copied while held; pending entries of the parent's readers are
 * freed without waiting: those readers do not exist in the child). */
void cf__cc_free(cf__ccache *cc, int lock);

/* Chunk (cog->uid, c->ifd, c->index), of len bytes decoded: see cf__cc_found.
 * A claim evicts what it needs (reusing an evicted buffer of the same
 * size: no fresh pages to fault in when the cache turns over). */
cf__cc_found cf__cc_claim(cf__ccache *cc, const cf_cog *cog, const cf__chunk *c, size_t len,
                          const uint8_t **data, void **h);
/* cf__cc_claim for a chunk whose decoded rows are row_bytes each, of
 * which the caller needs the first `need` (of `full`) and would decode
 * *rows (need <= *rows <= full: a strip decoded only down to the window,
 * cf__codec_decode_rows).  An entry holding fewer than `need` rows is a
 * miss: when idle it is dropped and the claim is the caller's with *rows
 * set to full (a reader that went further down once goes on: the strip
 * is decoded whole the second time, not once more per window), else
 * CF__CC_NONE.  On CF__CC_HIT and CF__CC_WAIT *rows is the entry's (at
 * least need); on CF__CC_CLAIMED the rows to decode and publish. */
cf__cc_found cf__cc_claim_rows(cf__ccache *cc, const cf_cog *cog, const cf__chunk *c,
                               size_t row_bytes, uint32_t need, uint32_t full, uint32_t *rows,
                               const uint8_t **data, void **h);
/* The caller's claim h, decoded: copy its len bytes in and wake its
 * waiters (out of memory: abandoned instead). */
void cf__cc_publish(cf__ccache *cc, void *h, const uint8_t *data);
/* The caller's claim h could not be read: its waiters fetch it
 * themselves, a later claim starts afresh. */
void cf__cc_abandon(cf__ccache *cc, void *h);
/* Wait for the pending entry h (CF__CC_WAIT): its data (pinned), or NULL
 * when its claimer abandoned it.  Either way cf__cc_put(h) after. */
const uint8_t *cf__cc_wait(cf__ccache *cc, void *h);
/* Unpin h (CF__CC_HIT, or CF__CC_WAIT after cf__cc_wait). */
void cf__cc_put(cf__ccache *cc, void *h);
/* Drop every entry not in use (pending ones stay: their readers publish
 * or abandon them; the counters stay). */
void cf__cc_clear(cf__ccache *cc);
/* Counters and bytes held now / at most.  A chunk served by another
 * reader's fetch counts as a hit. */
void cf__cc_stats(cf__ccache *cc, uint64_t *hits, uint64_t *misses, size_t *used, size_t *peak);

#endif
