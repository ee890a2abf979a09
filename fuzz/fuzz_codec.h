/*
 * fuzz_codec.h - shared driver of the codec fuzz targets.  The first 8
 * input bytes pick the chunk shape (width, height, samples, bits,
 * predictor, byte order, sample format, LERC layer, JPEGTables length);
 * the rest is the compressed chunk (after the JPEGTables bytes for JPEG).
 * Besides the sanitizers' checks, a failed decode must leave the output
 * all zero (reliability item 21).
 */
#ifndef CF_FUZZ_CODEC_H
#define CF_FUZZ_CODEC_H

#include "codec/codec.h"

#include <stdlib.h>
#include <string.h>

static int cf_fuzz_codec(const uint8_t *data, size_t size, uint16_t comp) {
    static cf_codec_ctx *ctx; /* reused like a decode thread reuses it */
    static const uint16_t bits_of[] = {1, 8, 16, 32, 64, 8, 8, 16};
    if (size < 8) return 0;
    if (!ctx) ctx = cf_codec_ctx_new();
    if (!ctx) return 0;
    cf_codec_params p;
    memset(&p, 0, sizeof p);
    p.compression = comp;
    p.width = (uint32_t)(data[0] % 96) + 1;
    p.height = (uint32_t)(data[1] % 96) + 1;
    p.samples = (uint32_t)(data[2] % 4) + 1;
    p.bits = bits_of[data[3] % 8];
    p.predictor = (uint16_t)(data[4] % 3 + 1);
    p.big_endian = data[5] & 1;
    p.sample_format = (uint16_t)((data[5] >> 1) % 3 + 1);
    p.lerc_sub = (uint16_t)((data[5] >> 3) % 3);
    p.photometric = (data[5] & 0x20) ? 6 : (p.samples >= 3 ? 2 : 1);
    p.ycbcr_sub_h = p.ycbcr_sub_v = (uint16_t)((data[5] & 0x40) ? 1 : 2);
    size_t tables = (size_t)data[6] | (size_t)data[7] << 8;
    data += 8;
    size -= 8;
    if (comp == 7 && tables && tables <= size) {
        p.jpeg_tables = data;
        p.jpeg_tables_len = tables;
        data += tables;
        size -= tables;
    }
    size_t n = (size_t)cf_codec_chunk_bytes(&p);
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
    cf_status st = cf_codec_decode(ctx, &p, src, size, dst, n, &err);
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
