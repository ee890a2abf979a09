/*
 * bits.c - stored bytes that are not whole samples.
 *  - FillOrder 2: libtiff reverses the bits of every stored byte before a
 *    codec sees them (cf__bits_reverse; codec.c decides for which codecs).
 *  - Depths of 2-7, 9-15 and 17-31 bits (GDAL's NBITS, 2- and 4-bit
 *    palettes, 12- and 14-bit sensor data): GDAL reads them widened to 8,
 *    16 or 32-bit unsigned integers, taken from a bit stream that starts
 *    each row on a byte boundary, most significant bit first, the samples
 *    of a pixel one after another.  A 24-bit file is swabbed by libtiff
 *    first like any 3-byte sample, and GDAL reads the same bit stream from
 *    the swabbed bytes (bug-compatible: a little-endian file's 24-bit
 *    value 1, stored 01 00 00, reads as 0x010000).  No sign extension:
 *    GDAL reads odd depths as unsigned whatever the SampleFormat.
 *  - One-bit samples (bilevel images, masks) to bytes: cf__bits_expand.
 */
#include "codec_internal.h"

#include <pthread.h>

static const uint8_t *rev_table(void) {
    /* Built at compile time: bit i of b goes to bit 7-i. */
#define R2(n) n, n + 2 * 64, n + 1 * 64, n + 3 * 64
#define R4(n) R2(n), R2(n + 2 * 16), R2(n + 1 * 16), R2(n + 3 * 16)
#define R6(n) R4(n), R4(n + 2 * 4), R4(n + 1 * 4), R4(n + 3 * 4)
    static const uint8_t t[256] = {R6(0), R6(2), R6(1), R6(3)};
#undef R2
#undef R4
#undef R6
    return t;
}

void cf__bits_reverse(const uint8_t *src, uint8_t *dst, size_t n) {
    const uint8_t *t = rev_table();
    for (size_t i = 0; i < n; i++) dst[i] = t[src[i]];
}

/* n values of `bits` bits (2..31) from the stream at s into out_bytes-byte
 * native integers at d.  The accumulator never holds more than 38 bits;
 * only the low `have` bits matter. */
static void unpack_row(const uint8_t *s, size_t n, unsigned bits,
                       uint8_t *d, unsigned out_bytes) {
    uint64_t acc = 0;
    unsigned have = 0;
    const uint32_t mask = (uint32_t)((1ull << bits) - 1);
    for (size_t i = 0; i < n; i++) {
        while (have < bits) {
            acc = acc << 8 | *s++;
            have += 8;
        }
        have -= bits;
        uint32_t v = (uint32_t)(acc >> have) & mask;
        if (out_bytes == 1) {
            d[i] = (uint8_t)v;
        } else if (out_bytes == 2) {
            uint16_t w = (uint16_t)v;
            memcpy(d + 2 * i, &w, 2);
        } else {
            memcpy(d + 4 * i, &v, 4);
        }
    }
}

/* 12-bit samples, the commonest odd depth: two per three bytes. */
static void unpack_row12(const uint8_t *s, size_t n, uint8_t *d) {
    size_t i = 0;
    for (; i + 2 <= n; i += 2, s += 3) {
        uint16_t a = (uint16_t)(s[0] << 4 | s[1] >> 4);
        uint16_t b = (uint16_t)((s[1] & 15) << 8 | s[2]);
        memcpy(d + 2 * i, &a, 2);
        memcpy(d + 2 * i + 2, &b, 2);
    }
    if (i < n) {
        uint16_t a = (uint16_t)(s[0] << 4 | s[1] >> 4);
        memcpy(d + 2 * i, &a, 2);
    }
}

void cf__bits_unpack(const cf__codec_params *p, const uint8_t *src,
                     uint8_t *dst) {
    unsigned bits = p->bits;
    unsigned ob = bits <= 8 ? 1 : bits <= 16 ? 2 : 4;
    size_t n = (size_t)p->width * p->samples; /* values per row */
    size_t in_row = (n * bits + 7) / 8;
    for (uint32_t y = 0; y < p->height; y++) {
        const uint8_t *s = src + (size_t)y * in_row;
        uint8_t *d = dst + (size_t)y * n * ob;
        if (bits == 12) unpack_row12(s, n, d);
        else unpack_row(s, n, bits, d, ob);
    }
}

/* byte b -> its 8 bits as 0/1 bytes, a whole source byte at a time */
static uint64_t bits_to_01[256];
static pthread_once_t bits_once = PTHREAD_ONCE_INIT;

static void bits_init(void) {
    for (unsigned b = 0; b < 256; b++) {
        uint8_t e[8];
        for (unsigned k = 0; k < 8; k++) e[k] = (uint8_t)((b >> (7 - k)) & 1);
        memcpy(&bits_to_01[b], e, 8);
    }
}

void cf__bits_expand(const uint8_t *src, size_t first, size_t n, uint8_t *d, uint8_t on) {
    size_t i = 0;
    for (; i < n && ((first + i) & 7); i++)
        d[i] = (src[(first + i) >> 3] >> (7 - ((first + i) & 7))) & 1 ? on : 0;
    if (n - i >= 8) {
        pthread_once(&bits_once, bits_init);
        const uint8_t *s = src + ((first + i) >> 3);
        for (; i + 8 <= n; i += 8) {
            uint64_t v = bits_to_01[*s++] * on; /* each byte 0 or on */
            memcpy(d + i, &v, 8);
        }
    }
    for (; i < n; i++)
        d[i] = (src[(first + i) >> 3] >> (7 - ((first + i) & 7))) & 1 ? on : 0;
}
