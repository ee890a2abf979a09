/*
 * fuzz_codec.h - shared driver of the codec fuzz targets.  The first 8
 * input bytes pick the chunk shape and how it is read:
 *   [0] width-1, [1] height-1, [2] samples-1, [3] bit depth (a table of
 *   16, odd depths and 128 included), [4] predictor (bits 0-1), complex
 *   sample formats or FillOrder 2 (bits 2-3), colour conversion (bits
 *   4-6), Group 3 2-D coding (bit 7), [5] byte order, sample format, LERC
 *   layer, photometric, YCbCr subsampling, [6-7] JPEGTables length (JPEG)
 *   or the strip flag (bit 15, other codecs);
 * the rest is the compressed chunk (after the JPEGTables bytes for JPEG).
 * So every decoder also runs through the sample conversions after it
 * (bit unpacking, float16/24, complex swabs, CMYK/CIELab/YCbCr).
 * Besides the sanitizers' checks, a failed decode must leave the output
 * all zero (reliability item 21).
 */
#ifndef CF_FUZZ_CODEC_H
#define CF_FUZZ_CODEC_H

#include "codec/codec.h"

#include <stdlib.h>
#include <string.h>

static int cf_fuzz_codec(const uint8_t *data, size_t size, uint16_t comp) {
    static cf__codec_ctx *ctx; /* reused like a decode thread reuses it */
    static const uint16_t bits_of[] = {1, 8, 16, 32, 64, 8, 8, 16,
                                       2, 4, 12, 24, 16, 7, 128, 31};
    if (size < 8) return 0;
    if (!ctx) ctx = cf__codec_ctx_new();
    if (!ctx) return 0;
    cf__codec_params p;
    memset(&p, 0, sizeof p);
    p.compression = comp;
    p.width = (uint32_t)(data[0] % 96) + 1;
    p.height = (uint32_t)(data[1] % 96) + 1;
    p.samples = (uint32_t)(data[2] % 4) + 1;
    p.bits = bits_of[data[3] % 16];
    p.predictor = (uint16_t)((data[4] & 3) % 3 + 1);
    p.big_endian = data[5] & 1;
    p.sample_format = (uint16_t)((data[5] >> 1) % 3 + 1);
    unsigned kind = (data[4] >> 2) & 3;
    if (kind == 1) p.sample_format = 5;
    if (kind == 2) p.sample_format = 6;
    if (kind == 3) p.fill_order = 2;
    p.color = (uint16_t)(((data[4] >> 4) & 7) % 5);
    p.t4_options = data[4] >> 7;
    p.lerc_sub = (uint16_t)((data[5] >> 3) % 3);
    p.photometric = (data[5] & 0x20) ? 6 : (p.samples >= 3 ? 2 : 1);
    p.ycbcr_sub_h = p.ycbcr_sub_v = (uint16_t)((data[5] & 0x40) ? 1 : 2);
    if (data[5] & 0x80) p.ycbcr_sub_h = 4;
    /* CIELab's white point and YCbCr's tags: libtiff's defaults */
    p.white_point[0] = 0.3457f;
    p.white_point[1] = 0.3585f;
    p.ycbcr_coef[0] = 0.299f;
    p.ycbcr_coef[1] = 0.587f;
    p.ycbcr_coef[2] = 0.114f;
    static const float rbw[6] = {0, 255, 128, 255, 128, 255};
    memcpy(p.ref_bw, rbw, sizeof rbw);
    size_t tables = (size_t)data[6] | (size_t)data[7] << 8;
    if (comp != 7) p.strip = (int)(tables >> 15);
    data += 8;
    size -= 8;
    if (comp == 7 && tables && tables <= size) {
        p.jpeg_tables = data;
        p.jpeg_tables_len = tables;
        data += tables;
        size -= tables;
    }
    size_t n = (size_t)cf__codec_chunk_bytes(&p);
    if (!n) return 0;
    uint8_t *dst = malloc(n);
    if (!dst) return 0;
    memset(dst, 0xa5, n);
    /* copy the chunk so reads past its end hit ASan's redzone */
    uint8_t *src = malloc(size ? size : 1);
    if (!src) {
        free(dst);
        return 0;
    }
    if (size) memcpy(src, data, size);
    cf_error err;
    memset(&err, 0, sizeof err);
    cf_status st = cf__codec_decode(ctx, &p, src, size, dst, n, &err);
    if (st != CF_OK) {
        for (size_t i = 0; i < n; i++)
            if (dst[i]) __builtin_trap();
        if (!err.msg[0]) __builtin_trap();
    }
    free(src);
    free(dst);
    return 0;
}

#endif
