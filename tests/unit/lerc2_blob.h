/*
 * lerc2_blob.h - what the Lerc2 tests and fuzz target do to blobs:
 * Fletcher-32 written as the LERC specification has it (word by word, an
 * independent reference for lib/codec/lerc2.c's SSE2 closed form), the
 * blob size of a v3+ header, and resealing a changed blob so that its
 * damage reaches the blocks instead of stopping at the checksum.
 */
#ifndef CF_LERC2_BLOB_H
#define CF_LERC2_BLOB_H

#include <stdint.h>
#include <string.h>

static inline uint32_t lerc2_fletcher_ref(const uint8_t *p, size_t len) {
    uint32_t s1 = 0xffff, s2 = 0xffff;
    size_t words = len / 2;
    while (words) {
        size_t t = words >= 359 ? 359 : words;
        words -= t;
        do {
            s1 += (uint32_t)*p++ << 8;
            s2 += s1 += *p++;
        } while (--t);
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    if (len & 1) s2 += s1 += (uint32_t)*p << 8;
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    return s2 << 16 | s1;
}

/* The blob size a v3+ header states, or -1 (too short, older version).
 * Header ints after key, version and checksum: rows, cols, depth (v4+),
 * valid, block, blob size. */
static inline int32_t lerc2_blob_size(const uint8_t *b, size_t n) {
    int32_t version, blobsize;
    if (n < 14 + 6 * 4) return -1;
    memcpy(&version, b + 6, 4);
    if (version < 3) return -1;
    memcpy(&blobsize, b + 14 + 4 * (version >= 4 ? 5 : 4), 4);
    return blobsize;
}

/* Rewrite a v3+ blob's checksum for its current bytes (when its stated
 * size fits in n). */
static inline void lerc2_reseal(uint8_t *b, size_t n) {
    int32_t blobsize = lerc2_blob_size(b, n);
    if (blobsize < 14 || (size_t)blobsize > n) return;
    uint32_t c = lerc2_fletcher_ref(b + 14, (size_t)blobsize - 14);
    memcpy(b + 10, &c, 4);
}

#endif
