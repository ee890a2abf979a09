/*
 * fuzz_tiff.c - libFuzzer target for the TIFF parser.  The input is a whole
 * file; it is fed through the need-bytes protocol the way a remote reader
 * would (a small first read, size unknown until the first response), then
 * once more through cf__tiff_parse_memory.  A parsed result is walked so
 * that inconsistent fields show up as ASan/UBSan reports.
 */
#include "tiff/tiff.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const cf__tiff *t) {
    if (t->nlevels < 1 || t->nlevels > t->nifds) abort();
    uint64_t sum = 0;
    for (int l = 0; l < t->nlevels; l++) {
        if (t->levels[l] < 0 || t->levels[l] >= t->nifds) abort();
        int m = t->mask_of_level[l];
        if (m < -1 || m >= t->nifds) abort();
    }
    for (int i = 0; i < t->nifds; i++) {
        const cf__tiff_ifd *d = &t->ifds[i];
        uint64_t n = (uint64_t)d->chunks_across * d->chunks_down *
                     (d->planar == 2 ? d->samples : 1);
        if (n != d->nchunks || !d->chunk_w || !d->chunk_h) abort();
        for (uint64_t k = 0; k < d->nchunks; k++)
            sum += d->offsets[k] ^ d->counts[k];
        if (d->jpeg_tables_len) sum += d->jpeg_tables[d->jpeg_tables_len - 1];
        if (!cf__tiff_compression_name(d)[0]) abort();
        if (!d->bits || (d->bits > 64 && d->bits != 128)) abort();
        if (d->fill_order != 1 && d->fill_order != 2) abort();
    }
    uint16_t spp = t->ifds[t->levels[0]].samples;
    for (int k = 0; k < spp; k++) sum += (uint64_t)(t->scale[k] + t->offset[k]);
    if (sum == 42) fprintf(stderr, "%s", ""); /* keep the reads */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cf_error err;
    cf__tiff *t = NULL;
    cf__tiff_parser *p = cf__tiff_parser_new(UINT64_MAX, "fuzz.tif");
    if (!p) return 0;
    size_t first = size < 16 ? size : 16;
    cf_status st = cf__tiff_parser_add(p, 0, data, first, &err);
    cf__tiff_parser_set_size(p, size);
    for (int round = 0; st == CF_OK; round++) {
        uint64_t off, len;
        st = cf__tiff_parser_run(p, &t, &off, &len, &err);
        if (st != CF__NEED_BYTES) break;
        /* The parser clamps requests to the file once the size is known. */
        if (off >= size || len == 0 || len > size - off || round > 10000)
            abort();
        st = cf__tiff_parser_add(p, off, data + off, (size_t)len, &err);
    }
    cf__tiff_parser_free(p);
    if (st == CF_OK) check(t);
    else if (strncmp(err.msg, "fuzz.tif: ", 10) != 0) abort();
    cf__tiff_free(t);

    t = NULL;
    cf_status st2 = cf__tiff_parse_memory(data, size, "mem.tif", &t, &err);
    /* Both paths see the same bytes: same verdict. */
    if ((st == CF_OK) != (st2 == CF_OK)) abort();
    if (t) check(t);
    cf__tiff_free(t);
    return 0;
}
