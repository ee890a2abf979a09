/*
 * layout.c - what a chunk looks like before and after decoding: the
 * stored layout's size (libtiff's, subsampled YCbCr included) and the
 * layout, data type and size of what cf__codec_decode hands back.
 */
#include "codec_internal.h"

void cf__codec_out_layout(const cf__codec_params *p, uint32_t *samples,
                         uint32_t *bits) {
    switch (p->color) {
    case CF_COLOR_CMYK:
    case CF_COLOR_LAB:
        *samples = 4;
        *bits = 8;
        return;
    case CF_COLOR_YCBCR:
    case CF_COLOR_YCBCR_RAW:
        *samples = 3;
        *bits = 8;
        return;
    default: break;
    }
    *samples = p->samples;
    unsigned b = p->bits;
    if (p->sample_format == 3 && (b == 16 || b == 24)) *bits = 32;
    else if (b <= 1) *bits = 1;
    else if (b <= 8) *bits = 8;
    else if (b <= 16) *bits = 16;
    else if (b <= 32) *bits = 32;
    else *bits = b; /* 64, 128 */
}

cf_dtype cf__codec_dtype(const cf__codec_params *p) {
    if (p->color != CF_COLOR_RAW) return CF_DT_U8;
    unsigned b = p->bits;
    switch (p->sample_format) {
    case 0:
    case 1:
    case 2: {
        /* Odd depths read unsigned in GDAL whatever the SampleFormat,
         * except that a signed one of 1-8 bits is a signed byte (GDAL's
         * PIXELTYPE=SIGNEDBYTE): 0..2^bits-1 fits it either way. */
        int s = p->sample_format == 2;
        if (b <= 8) return s ? CF_DT_I8 : CF_DT_U8;
        if (b <= 16) return s && b == 16 ? CF_DT_I16 : CF_DT_U16;
        if (b <= 32) return s && b == 32 ? CF_DT_I32 : CF_DT_U32;
        if (b == 64) return s ? CF_DT_I64 : CF_DT_U64;
        return CF_DT_UNKNOWN;
    }
    case 3:
        return b == 16 || b == 24 || b == 32 ? CF_DT_F32
               : b == 64                     ? CF_DT_F64
                                             : CF_DT_UNKNOWN;
    case 5: return b == 32 ? CF_DT_CI16 : b == 64 ? CF_DT_CI32 : CF_DT_UNKNOWN;
    case 6: return b == 64 ? CF_DT_CF32 : b == 128 ? CF_DT_CF64 : CF_DT_UNKNOWN;
    default: return CF_DT_UNKNOWN;
    }
}

uint64_t cf__codec_chunk_bytes(const cf__codec_params *p) {
    if (!p) return 0;
    uint32_t samples, bits;
    cf__codec_out_layout(p, &samples, &bits);
    return cf__chunk_bytes(p->width, samples, bits, p->height);
}

uint64_t cf__codec_stored_bytes(const cf__codec_params *p) {
    if (!p) return 0;
    if (p->color == CF_COLOR_YCBCR || p->color == CF_COLOR_YCBCR_RAW) {
        /* libtiff's size of subsampled YCbCr: whole blocks of sub_h x
         * sub_v pixels, each sub_h*sub_v luma then Cb and Cr bytes. */
        unsigned sh = p->ycbcr_sub_h, sv = p->ycbcr_sub_v;
        if (!sh || !sv) return 0;
        uint64_t across = (p->width + sh - 1) / sh;
        uint64_t down = (p->height + sv - 1) / sv;
        return cf__chunk_bytes(across, sh * sv + 2, 8, down);
    }
    return cf__chunk_bytes(p->width, p->samples, p->bits, p->height);
}

