/*
 * fuzz_share_carry.c - libFuzzer target for a share writer's carry
 * (lib/write/share.c, cf_writer_share_carry): the bytes one process of a
 * distributed write receives from the one before it.  So that the
 * parser's deep paths are reached, the input edits a valid carry (share
 * 0's of the same image, made once): its first two bytes give the
 * carry's length (0: as made; longer: the input's bytes continue it),
 * the rest are (offset, value) edits of three bytes each.  With the
 * first byte's top bit set the input itself is the carry.  Share 1 then
 * takes it: refused or used, never read or written out of bounds.
 */
#include "cogfeed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 48 x 70 uint8 with a mask, 16 px tiles: 5 rows of tiles, 4 levels; a
 * share of rows [r0, r0 + n). */
static cf_writer *share(const char *path, uint32_t r0, uint32_t n) {
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = 48;
    o.height = 70;
    o.tile_size = 16;
    o.mask = 1;
    o.has_nodata = 1;
    o.nodata = 0;
    o.overview_resampling = CF_RS_AVERAGE;
    o.share_row0 = r0;
    o.share_rows = n;
    cf_writer *w = NULL;
    if (cf_writer_open(path, &o, &w, NULL) != CF_OK) return NULL;
    uint8_t px[16 * 16], m[16 * 16];
    for (uint32_t ty = r0; ty < r0 + n; ty++)
        for (uint32_t tx = 0; tx < 3; tx++) {
            uint32_t th = ty == 4 ? 6 : 16;
            for (uint32_t i = 0; i < 16 * th; i++) {
                px[i] = (uint8_t)(i * 7 + tx * 31 + ty * 11);
                m[i] = (uint8_t)((i / 5 + tx) % 3 ? 255 : 0);
            }
            (void)cf_writer_write_tile_masked(w, tx, ty, px, (size_t)16 * th, m, NULL);
        }
    if (cf_writer_share_build(w, NULL) != CF_OK) {
        cf_writer_abort(w);
        return NULL;
    }
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint8_t *valid;
    static size_t valid_n;
    static char path[64];
    if (!valid) { /* share 0's carry, made once */
        snprintf(path, sizeof path, "/tmp/cf_fuzz_share_%d.tif", (int)getpid());
        cf_writer *w0 = share(path, 0, 2);
        const void *c;
        size_t n;
        if (!w0 || cf_writer_share_carry(w0, NULL, 0, &c, &n, NULL) != CF_OK) abort();
        valid = malloc(n);
        memcpy(valid, c, n);
        valid_n = n;
        cf_writer_abort(w0);
    }
    if (size < 2) return 0;
    uint8_t *carry;
    size_t n;
    if (data[0] & 0x80) {
        n = size;
        carry = malloc(n);
        memcpy(carry, data, n);
    } else {
        n = (size_t)((data[0] << 8) | data[1]);
        if (!n) n = valid_n;
        carry = calloc(n, 1);
        memcpy(carry, valid, n < valid_n ? n : valid_n);
        for (size_t i = 2; i + 3 <= size; i += 3) {
            size_t at = (size_t)((data[i] << 8) | data[i + 1]);
            if (at < n) carry[at] = data[i + 2];
        }
    }
    cf_writer *w = share(path, 2, 3);
    if (w) {
        const void *out;
        size_t on;
        if (cf_writer_share_carry(w, carry, n, &out, &on, NULL) == CF_OK) {
            volatile uint8_t sink = 0;
            for (size_t i = 0; i < on; i++) sink ^= ((const uint8_t *)out)[i];
            (void)sink;
        }
        cf_writer_abort(w);
    }
    free(carry);
    return 0;
}
