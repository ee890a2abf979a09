/*
 * fuzz_lerc2.c - libFuzzer target: cogfeed's own Lerc2 decoder
 * (lib/codec/lerc2.c) against liblerc on the same blob.
 *
 * Input: [0] data type (0-7), [1] depth - 1 (0-3), [2] cols - 1, [3] rows
 * - 1, [4] bit 0: a mask asked for, bit 1: leave the checksum as it is;
 * the rest is the blob.  Unless told not to, the blob's Fletcher-32 is
 * made valid for its bytes first, so that mutations reach the blocks
 * instead of stopping at the checksum.  Whenever lerc2.c decodes a blob,
 * liblerc must accept it too and give the same bytes and mask; a refusal
 * must name the reason.  Version 6 lossless floats are not given to
 * liblerc: it aborts on some corrupt ones (an assert in
 * fpl_Compression.cpp), and lerc2.c leaves them to it anyway.
 */
#include "codec/codec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CF_HAVE_LERC
#include <Lerc_c_api.h>

#include "lerc2_blob.h" /* tests/unit: the reference Fletcher-32, reseal */
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifdef CF_HAVE_LERC
    static const unsigned sz[8] = {1, 1, 2, 2, 4, 4, 4, 8};
    static cf__scratch scr;
    if (size < 5 + 14 + 24) return 0;
    int dt = data[0] % 8, depth = data[1] % 4 + 1;
    int cols = data[2] + 1, rows = data[3] + 1, with_mask = data[4] & 1;
    size_t n = size - 5;
    uint8_t *blob = malloc(n);
    if (!blob) return 0;
    memcpy(blob, data + 5, n);
    int32_t version = 0;
    memcpy(&version, blob + 6, 4);
    if (!(data[4] & 2)) lerc2_reseal(blob, n);
    /* lerc.c hands over exactly one blob (its size must be the chunk's):
     * liblerc would read bytes after it as the next band's header */
    int32_t blobsize = lerc2_blob_size(blob, n);
    if (blobsize > 0 && (size_t)blobsize < n) n = (size_t)blobsize;
    size_t npix = (size_t)cols * rows, bytes = npix * depth * sz[dt];
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    uint8_t *ma = malloc(npix), *mb = malloc(npix);
    cf_error err;
    memset(&err, 0, sizeof err);
    int done = 0;
    cf_status st = cf__lerc2_decode(&scr, blob, n, dt, depth, cols, rows, b,
                                    with_mask ? mb : NULL, &done, &err);
    if (st != CF_OK && st != CF_E_NOMEM && !err.msg[0]) abort();
    double maxz = 0;
    if (n >= 14 + 24 + 8 * 3 + 8) {
        size_t d0 = 14 + 4 * (6 + (version >= 4) + (version >= 6)) +
                    (version >= 6 ? 4 : 0);
        if (d0 + 8 <= n) memcpy(&maxz, blob + d0, 8);
    }
    int fpl = version >= 6 && dt >= 6 && maxz == 0;
    if (st == CF_OK && done && !fpl) {
        lerc_status ls = lerc_decode(blob, (unsigned)n, with_mask,
                                     with_mask ? ma : NULL, depth, cols, rows,
                                     1, (unsigned)dt, a);
        if (ls != 0 || memcmp(a, b, bytes) != 0 ||
            (with_mask && memcmp(ma, mb, npix) != 0)) {
            size_t i = 0;
            while (i < bytes && a[i] == b[i]) i++;
            fprintf(stderr, "lerc2 differs: liblerc %d, dt %d depth %d %dx%d v%d, first byte %zu of %zu: %02x vs %02x\n",
                    (int)ls, dt, depth, cols, rows, (int)version, i, bytes, i < bytes ? a[i] : 0, i < bytes ? b[i] : 0);
            abort();
        }
    }
    free(a);
    free(b);
    free(ma);
    free(mb);
    free(blob);
#else
    (void)data;
    (void)size;
#endif
    return 0;
}
