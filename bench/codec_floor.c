/*
 * codec_floor.c - the bare library call of each codec, on the tile bytes
 * bench/codec_floor.py dumps, with the C libraries cogfeed links (Debian's
 * libdeflate, zstd, lerc, libjpeg-turbo, libwebp): no predictor, no
 * Python, no allocation in the timed loop.  Its MB/s is the floor of what
 * cogfeed's decode_tile can reach with these libraries; codec_floor.py
 * sets it beside imagecodecs' own call of its (newer, bundled) libraries
 * and beside decode_tile, which separates the library's version from our
 * code.  Not part of the build:
 *
 *   cc -O2 -o build/codec_floor bench/codec_floor.c -ldeflate -lzstd \
 *      -lLerc -ljpeg -lwebp
 *   codec_floor CODEC DUMP WIDTH HEIGHT SAMPLES BYTES REPEAT [LERCTYPE]
 *
 * DUMP: u32 jpegtables length, the tables, u32 tile count, then each tile
 * as u32 length + bytes.  Prints "MB/s" of decoded bytes, best of REPEAT.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <Lerc_c_api.h>
#include <jpeglib.h>
#include <libdeflate.h>
#include <webp/decode.h>
#include <zstd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); /* CPU time: less moved by other load */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) exit(2);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static uint32_t u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static int jpeg(const uint8_t *tables, size_t tn, const uint8_t *src, size_t n,
                uint8_t *dst, unsigned w, unsigned h, unsigned spp) {
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&ci);
    if (tn) {
        jpeg_mem_src(&ci, tables, (unsigned long)tn);
        jpeg_read_header(&ci, FALSE);
    }
    jpeg_mem_src(&ci, src, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    if (spp == 3) ci.out_color_space = JCS_RGB;
    jpeg_start_decompress(&ci);
    while (ci.output_scanline < h) {
        JSAMPROW rows[16];
        unsigned k = 0;
        while (k < 16 && ci.output_scanline + k < h) {
            rows[k] = dst + (size_t)(ci.output_scanline + k) * w * spp;
            k++;
        }
        jpeg_read_scanlines(&ci, rows, k);
    }
    jpeg_abort_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: codec_floor CODEC DUMP W H SAMPLES BYTES REPEAT [LERCTYPE]\n");
        return 2;
    }
    const char *codec = argv[1];
    size_t len;
    uint8_t *dump = slurp(argv[2], &len);
    if (!dump) return 2;
    unsigned w = (unsigned)atoi(argv[3]), h = (unsigned)atoi(argv[4]);
    unsigned spp = (unsigned)atoi(argv[5]), bps = (unsigned)atoi(argv[6]);
    int reps = atoi(argv[7]), lt = argc > 8 ? atoi(argv[8]) : 0;
    size_t out = (size_t)w * h * spp * bps;
    uint32_t tn = u32(dump);
    const uint8_t *tables = dump + 4, *p = dump + 4 + tn;
    uint32_t nt = u32(p);
    p += 4;
    const uint8_t **src = calloc(nt, sizeof *src);
    size_t *sn = calloc(nt, sizeof *sn);
    for (uint32_t i = 0; i < nt; i++) {
        sn[i] = u32(p);
        src[i] = p + 4;
        p += 4 + sn[i];
    }
    uint8_t *dst = malloc(out), *outer = malloc(2 * out + 4096);
    memset(dst, 1, out);
    struct libdeflate_decompressor *dd = libdeflate_alloc_decompressor();
    ZSTD_DCtx *zd = ZSTD_createDCtx();
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (uint32_t i = 0; i < nt; i++) {
            size_t got = 0;
            int bad = 0;
            if (!strcmp(codec, "deflate")) {
                bad = libdeflate_zlib_decompress(dd, src[i], sn[i], dst, out, &got) != 0;
            } else if (!strcmp(codec, "zstd")) {
                bad = ZSTD_isError(ZSTD_decompressDCtx(zd, dst, out, src[i], sn[i]));
            } else if (!strncmp(codec, "lerc", 4)) {
                const uint8_t *blob = src[i];
                size_t bn = sn[i];
                if (!strcmp(codec, "lerc_deflate")) {
                    bad = libdeflate_zlib_decompress(dd, src[i], sn[i], outer, 2 * out + 4096,
                                                     &bn) != 0;
                    blob = outer;
                } else if (!strcmp(codec, "lerc_zstd")) {
                    bn = ZSTD_decompressDCtx(zd, outer, 2 * out + 4096, src[i], sn[i]);
                    bad = ZSTD_isError(bn);
                    blob = outer;
                }
                if (!bad)
                    bad = lerc_decode(blob, (unsigned)bn, 0, NULL, (int)spp, (int)w, (int)h, 1,
                                      (unsigned)lt, dst) != 0;
            } else if (!strcmp(codec, "jpeg")) {
                bad = jpeg(tables, tn, src[i], sn[i], dst, w, h, spp);
            } else if (!strcmp(codec, "webp")) {
                bad = (spp == 4 ? WebPDecodeRGBAInto(src[i], sn[i], dst, out, (int)(w * spp))
                                : WebPDecodeRGBInto(src[i], sn[i], dst, out, (int)(w * spp))) ==
                      NULL;
            } else {
                fprintf(stderr, "codec_floor: unknown codec %s\n", codec);
                return 2;
            }
            if (bad) {
                fprintf(stderr, "codec_floor: %s tile %u failed\n", codec, i);
                return 1;
            }
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("%.1f\n", (double)nt * (double)out / best / 1e6);
    return 0;
}
