/*
 * chunk_cache.h - decoded tiles of the loader's resampled inputs, kept for
 * the next patches that need them.
 *
 * A 20 m band read onto 10 m patches needs, for each 256 px patch, a 130 px
 * window of the 20 m file: with the bilinear kernel's margin it touches up
 * to four 20 m tiles, each of which the neighbouring patches need again (a
 * 60 m tile serves 36 patches).  Decoding them once per patch made the
 * per-band stack decode four times what a pre-warped stack decodes.  The
 * cache holds decoded chunks (as cf__cog_paste takes them) within a byte
 * budget, least recently used first out; entries in use are pinned.
 * Thread-safe.
 */
#ifndef CF_CHUNK_CACHE_H
#define CF_CHUNK_CACHE_H

#include "cog_internal.h"

typedef struct cf__ccache cf__ccache;

/* A cache of at most cap bytes of decoded chunks (plus a small record
 * each); NULL on out of memory. */
cf__ccache *cf__cc_new(size_t cap);
/* lock 0: free the memory only (a forked child, where the lock may have
 * been copied while held). */
void cf__cc_free(cf__ccache *cc, int lock);

/* Chunk (cog, c->ifd, c->index) if cached, pinned until cf__cc_put(*h);
 * NULL otherwise. */
const uint8_t *cf__cc_get(cf__ccache *cc, const cf_cog *cog, const cf_chunk *c, void **h);
void cf__cc_put(cf__ccache *cc, void *h);
/* Keep a copy of a decoded chunk of len bytes (nothing when it cannot fit
 * beside the pinned entries, or is there already). */
void cf__cc_add(cf__ccache *cc, const cf_cog *cog, const cf_chunk *c, const uint8_t *data,
                size_t len);
/* Drop every entry not in use (the counters stay). */
void cf__cc_clear(cf__ccache *cc);
/* Counters and bytes held now / at most. */
void cf__cc_stats(cf__ccache *cc, uint64_t *hits, uint64_t *misses, size_t *used, size_t *peak);

#endif
