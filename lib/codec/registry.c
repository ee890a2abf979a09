/*
 * registry.c - the table from TIFF compression codes to decoders, with the
 * post-processing libtiff applies to each (swab, predictor) and whether the
 * codec can carry 1-bit data.  Codecs whose library was missing at build
 * time keep their row with a NULL decoder so errors can say what is missing.
 */
#include "codec_internal.h"

#define RAWP (CF__CODEC_RAW | CF__CODEC_PREDICTOR | CF__CODEC_BITS1)

static const cf__codec_entry cf__codecs[] = {
    {1, "NONE", cf__decode_none, NULL, CF__CODEC_RAW | CF__CODEC_BITS1},
    {5, "LZW", cf__decode_lzw, NULL, RAWP},
    {8, "ADOBE_DEFLATE", cf__decode_deflate, NULL, RAWP},
    {32946, "DEFLATE", cf__decode_deflate, NULL, RAWP},
    {32773, "PACKBITS", cf__decode_packbits, NULL,
     CF__CODEC_RAW | CF__CODEC_BITS1},
    {50000, "ZSTD", cf__decode_zstd, NULL, RAWP},
    /* LERC is RAW too: libtiff swabs big-endian samples before encoding and
     * after decoding LERC, so a big-endian file's LERC blob holds
     * byte-swapped values (tests/python/test_conformance.py, gtiff_be_lerc_*). */
#ifdef CF_HAVE_LERC
    {34887, "LERC", cf__decode_lerc, "LERC", CF__CODEC_RAW},
#else
    {34887, "LERC", NULL, "LERC", CF__CODEC_RAW},
#endif
#ifdef CF_HAVE_JPEG
    {7, "JPEG", cf__decode_jpeg, "JPEG", 0},
#else
    {7, "JPEG", NULL, "JPEG", 0},
#endif
#ifdef CF_HAVE_WEBP
    {50001, "WEBP", cf__decode_webp, "WebP", 0},
#else
    {50001, "WEBP", NULL, "WebP", 0},
#endif
};

const cf__codec_entry *cf__codec_find(uint16_t compression) {
    for (size_t i = 0; i < sizeof cf__codecs / sizeof cf__codecs[0]; i++)
        if (cf__codecs[i].compression == compression) return &cf__codecs[i];
    return NULL;
}
