/*
 * registry.c - the table from TIFF compression codes to decoders, with the
 * post-processing libtiff applies to each (swab, predictor, bit reversal)
 * and the sample depths each can carry.  Codecs whose library was missing
 * at build time keep their row with a NULL decoder so errors can say what
 * is missing; codecs cogfeed never reads have a row too, so that a file
 * using one is refused at open by name and reason, not as "unknown".
 */
#include "codec_internal.h"

#define RAWP (CF__CODEC_RAW | CF__CODEC_PREDICTOR | CF__CODEC_BITS1 | \
              CF__CODEC_ANYBITS)
/* libtiff's CCITT decoders read FillOrder 2 themselves, which comes to
 * the same as reversing the input first, as done for the others. */
#define CCITT CF__CODEC_BITS1

/* Named but not read: libtiff-only or rare codecs GDAL reads through
 * libtiff builds that have them. */
#define NOT_READ(code, name, why) {code, name, NULL, NULL, 0, NULL, why}

static const cf__codec_entry cf__codecs[] = {
    {1, "NONE", cf__decode_none, NULL,
     CF__CODEC_RAW | CF__CODEC_BITS1 | CF__CODEC_ANYBITS, NULL, NULL},
    {5, "LZW", cf__decode_lzw, NULL, RAWP, NULL, NULL},
    {8, "ADOBE_DEFLATE", cf__decode_deflate, NULL, RAWP, NULL, NULL},
    {32946, "DEFLATE", cf__decode_deflate, NULL, RAWP, NULL, NULL},
    {32773, "PACKBITS", cf__decode_packbits, NULL,
     CF__CODEC_RAW | CF__CODEC_BITS1 | CF__CODEC_ANYBITS, NULL, NULL},
    {50000, "ZSTD", cf__decode_zstd, NULL, RAWP, NULL, NULL},
    /* CCITT decoders write 1-bit rows; libtiff runs no predictor or swab
     * for them. */
    {2, "CCITTRLE", cf__decode_ccitt, NULL, CCITT, cf__check_ccitt, NULL},
    {32771, "CCITTRLEW", cf__decode_ccitt, NULL, CCITT, cf__check_ccitt, NULL},
    {3, "CCITTFAX3", cf__decode_ccitt, NULL, CCITT, cf__check_ccitt, NULL},
    {4, "CCITTFAX4", cf__decode_ccitt, NULL, CCITT, cf__check_ccitt, NULL},
#ifdef CF_HAVE_LZMA
    {34925, "LZMA", cf__decode_lzma, "liblzma", RAWP, NULL, NULL},
#else
    {34925, "LZMA", NULL, "liblzma", RAWP, NULL, NULL},
#endif
    /* LERC is RAW too: libtiff swabs big-endian samples before encoding and
     * after decoding LERC, so a big-endian file's LERC blob holds
     * byte-swapped values (tests/python/test_conformance.py, gtiff_be_lerc_*). */
#ifdef CF_HAVE_LERC
    {34887, "LERC", cf__decode_lerc, "LERC", CF__CODEC_RAW, cf__check_lerc,
     NULL},
#else
    {34887, "LERC", NULL, "LERC", CF__CODEC_RAW, NULL, NULL},
#endif
#ifdef CF_HAVE_JPEG
    {7, "JPEG", cf__decode_jpeg, "JPEG", CF__CODEC_NOBITREV, cf__check_jpeg,
     NULL},
    /* libtiff's tif_ojpeg.c reads the file's bytes itself: no bit
     * reversal, no predictor */
    {6, "OJPEG", cf__decode_ojpeg, "JPEG", CF__CODEC_NOBITREV,
     cf__check_ojpeg, NULL},
#else
    {7, "JPEG", NULL, "JPEG", CF__CODEC_NOBITREV, NULL, NULL},
    {6, "OJPEG", NULL, "JPEG", CF__CODEC_NOBITREV, NULL, NULL},
#endif
#ifdef CF_HAVE_WEBP
    {50001, "WEBP", cf__decode_webp, "WebP", 0, cf__check_webp, NULL},
#else
    {50001, "WEBP", NULL, "WebP", 0, NULL, NULL},
#endif
    NOT_READ(34712, "JPEG2000", "GDAL's GTiff driver does not read it "
             "either"),
    NOT_READ(50002, "JXL", "JPEG XL in TIFF is not read (Debian's GDAL "
             "3.6 is built without it too)"),
    NOT_READ(34661, "JBIG", "JBIG is not read"),
    NOT_READ(32766, "NEXT", "NeXT 2-bit RLE is not read"),
    NOT_READ(32809, "THUNDERSCAN", "ThunderScan 4-bit RLE is not read"),
    NOT_READ(32908, "PIXARFILM", "Pixar companded 10-bit data is not read"),
    NOT_READ(32909, "PIXARLOG", "Pixar companded 11-bit data is not read"),
    NOT_READ(34676, "SGILOG", "SGI LogL/LogLuv data is not read"),
    NOT_READ(34677, "SGILOG24", "SGI LogLuv data is not read"),
    NOT_READ(32947, "DCS", "Kodak DCS data is not read"),
    NOT_READ(34892, "LOSSY_JPEG", "DNG lossy JPEG is not read"),
};

const cf__codec_entry *cf__codec_find(uint16_t compression) {
    for (size_t i = 0; i < sizeof cf__codecs / sizeof cf__codecs[0]; i++)
        if (cf__codecs[i].compression == compression) return &cf__codecs[i];
    return NULL;
}
