/*
 * hc_entry.c - one header cache entry (the header bytes of a file, as
 * ranges, with its size and validators): made, filled, freed.  Used by
 * the table (header_cache.c), the disk folder (hc_disk.c) and the reader.
 */
#include "header_cache.h"

#include <stdlib.h>
#include <string.h>

cf__hc_entry *cf__hc_entry_new(void) { return cf__calloc(1, sizeof(cf__hc_entry)); }

void cf__hc_entry_free(cf__hc_entry *e) {
    if (!e) return;
    for (size_t i = 0; i < e->nranges; i++) free(e->ranges[i].data);
    free(e->ranges);
    free(e->etag);
    free(e->last_modified);
    free(e);
}

cf_status cf__hc_add_range(cf__hc_entry *e, uint64_t off, const uint8_t *data,
                           size_t len) {
    if (e->nranges >= HC_MAX_RANGES) {
        e->incomplete = 1;
        return CF_E_LIMIT;
    }
    if (e->nranges == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 4;
        cf__hc_range *r = cf__realloc(e->ranges, cap * sizeof *r);
        if (!r) {
            e->incomplete = 1;
            return CF_E_NOMEM;
        }
        e->ranges = r;
        e->cap = cap;
    }
    uint8_t *d = cf__malloc(len ? len : 1);
    if (!d) {
        e->incomplete = 1;
        return CF_E_NOMEM;
    }
    memcpy(d, data, len);
    e->ranges[e->nranges++] = (cf__hc_range){off, len, d};
    e->bytes += len;
    return CF_OK;
}
