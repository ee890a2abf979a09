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
 *      -lLerc -ljpeg -lwebp -ldl
 *   codec_floor CODEC DUMP WIDTH HEIGHT SAMPLES BYTES REPEAT [LERCTYPE [LIB]]
 *
 * DUMP: u32 jpegtables length, the tables, u32 tile count, then each tile
 * as u32 length + bytes.  Prints "MB/s" of decoded bytes, best of REPEAT.
 *
 * LIB: another build of the codec's library (a .so: imagecodecs ships its
 * libdeflate, zstd, lerc and libwebp as such), called in place of the
 * linked one through the same calls.  It is loaded with dlmopen into a
 * namespace of its own, so that its calls into itself do not land in
 * Debian's copy of the same symbols.  deflate, zstd, lerc and webp only
 * (libjpeg's API differs between the 6.2 and 8 builds; the LERC layers
 * would mix two libraries).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
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

/* The library calls timed, from the linked libraries or from LIB. */
static struct {
    struct libdeflate_decompressor *(*deflate_alloc)(void);
    enum libdeflate_result (*zlib_decompress)(struct libdeflate_decompressor *,
                                              const void *, size_t, void *,
                                              size_t, size_t *);
    ZSTD_DCtx *(*zstd_create)(void);
    size_t (*zstd_decompress)(ZSTD_DCtx *, void *, size_t, const void *,
                              size_t);
    unsigned (*zstd_is_error)(size_t);
    lerc_status (*lerc)(const unsigned char *, unsigned int, int,
                        unsigned char *, int, int, int, int, unsigned int,
                        void *);
    uint8_t *(*webp_rgb)(const uint8_t *, size_t, uint8_t *, size_t, int);
    uint8_t *(*webp_rgba)(const uint8_t *, size_t, uint8_t *, size_t, int);
} L = {libdeflate_alloc_decompressor, libdeflate_zlib_decompress,
       ZSTD_createDCtx, ZSTD_decompressDCtx, ZSTD_isError, lerc_decode,
       WebPDecodeRGBInto, WebPDecodeRGBAInto};

static void *sym(void *h, const char *lib, const char *name) {
    void *f = dlsym(h, name);
    if (!f) {
        fprintf(stderr, "codec_floor: %s has no %s\n", lib, name);
        exit(2);
    }
    return f;
}

/* Point the codec's calls at LIB's copies. */
static void use_lib(const char *codec, const char *lib) {
    void *h = dlmopen(LM_ID_NEWLM, lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "codec_floor: %s\n", dlerror());
        exit(2);
    }
    if (!strcmp(codec, "deflate")) {
        *(void **)&L.deflate_alloc = sym(h, lib, "libdeflate_alloc_decompressor");
        *(void **)&L.zlib_decompress = sym(h, lib, "libdeflate_zlib_decompress");
    } else if (!strcmp(codec, "zstd")) {
        *(void **)&L.zstd_create = sym(h, lib, "ZSTD_createDCtx");
        *(void **)&L.zstd_decompress = sym(h, lib, "ZSTD_decompressDCtx");
        *(void **)&L.zstd_is_error = sym(h, lib, "ZSTD_isError");
    } else if (!strcmp(codec, "lerc")) {
        *(void **)&L.lerc = sym(h, lib, "lerc_decode");
    } else if (!strcmp(codec, "webp")) {
        *(void **)&L.webp_rgb = sym(h, lib, "WebPDecodeRGBInto");
        *(void **)&L.webp_rgba = sym(h, lib, "WebPDecodeRGBAInto");
    } else {
        fprintf(stderr, "codec_floor: LIB is for deflate, zstd, lerc, webp\n");
        exit(2);
    }
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
        fprintf(stderr, "usage: codec_floor CODEC DUMP W H SAMPLES BYTES REPEAT "
                        "[LERCTYPE [LIB]]\n");
        return 2;
    }
    const char *codec = argv[1];
    size_t len;
    uint8_t *dump = slurp(argv[2], &len);
    if (!dump) return 2;
    unsigned w = (unsigned)atoi(argv[3]), h = (unsigned)atoi(argv[4]);
    unsigned spp = (unsigned)atoi(argv[5]), bps = (unsigned)atoi(argv[6]);
    int reps = atoi(argv[7]), lt = argc > 8 ? atoi(argv[8]) : 0;
    if (argc > 9) use_lib(codec, argv[9]);
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
    struct libdeflate_decompressor *dd = L.deflate_alloc();
    ZSTD_DCtx *zd = L.zstd_create();
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (uint32_t i = 0; i < nt; i++) {
            size_t got = 0;
            int bad = 0;
            if (!strcmp(codec, "deflate")) {
                bad = L.zlib_decompress(dd, src[i], sn[i], dst, out, &got) != 0;
            } else if (!strcmp(codec, "zstd")) {
                bad = L.zstd_is_error(L.zstd_decompress(zd, dst, out, src[i], sn[i]));
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
                    bad = L.lerc(blob, (unsigned)bn, 0, NULL, (int)spp, (int)w, (int)h, 1,
                                      (unsigned)lt, dst) != 0;
            } else if (!strcmp(codec, "jpeg")) {
                bad = jpeg(tables, tn, src[i], sn[i], dst, w, h, spp);
            } else if (!strcmp(codec, "webp")) {
                bad = (spp == 4 ? L.webp_rgba(src[i], sn[i], dst, out, (int)(w * spp))
                                : L.webp_rgb(src[i], sn[i], dst, out, (int)(w * spp))) ==
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
