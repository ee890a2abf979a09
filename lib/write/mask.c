/*
 * mask.c - the internal mask's tiles: a byte a pixel in the writer (0:
 * not valid), one bit a pixel in the file, as GDAL's 1-bit mask bands
 * store it (rows padded to whole bytes, the first pixel in the most
 * significant bit, 1: valid).
 */
#include "../codec/codec.h"
#include "write_internal.h"

void cf__mask_pack(const uint8_t *m, size_t stride, uint32_t w, uint32_t h, uint32_t T,
                   uint8_t *out) {
    const size_t rowb = ((size_t)T + 7) / 8;
    memset(out, 0, rowb * T);
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *s = m ? m + (size_t)y * stride : NULL;
        uint8_t *d = out + (size_t)y * rowb;
        for (uint32_t x = 0; x < w; x++)
            if (!s || s[x]) d[x >> 3] |= (uint8_t)(0x80u >> (x & 7));
    }
}

void cf__mask_unpack(const uint8_t *bits, uint32_t T, uint32_t w, uint32_t h, uint8_t *out,
                     size_t stride) {
    const size_t rowb = ((size_t)T + 7) / 8;
    for (uint32_t y = 0; y < h; y++)
        cf__bits_expand(bits + (size_t)y * rowb, 0, w, out + (size_t)y * stride, 255);
}
