/*
 * test_tiff_budget.c - the header memory budget (cf__tiff_parser_set_budget)
 * against crafted headers whose declared sizes are far larger than the
 * bytes they take: the parser must refuse them before it asks for more
 * bytes than the budget, whatever makes the bytes (tile arrays, tags it
 * reads only a little of, IFD tables), and whatever sums the sizes overflow.
 *
 * The files are virtual: a few real bytes at the start and zeros up to a
 * declared size (what a hostile server can answer), fed through the
 * need-bytes protocol as cog.c does; each test counts the bytes the
 * parser asked for.
 */
#include "tiff/tiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cf_test.h"

#define MIB ((uint64_t)1 << 20)

typedef struct vfile {
    uint8_t *head; /* real bytes [0, nhead); zeros after, up to size */
    size_t nhead;
    uint64_t size;
} vfile;

static void put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

typedef struct tag {
    uint16_t tag, type;
    uint64_t count, value; /* value: inline, or the data's offset */
} tag;

/* An IFD at `at` (classic TIFF when !big) with the given tags and next
 * pointer; returns its end. */
static size_t ifd(vfile *f, int big, size_t at, const tag *t, size_t n,
                  uint64_t next) {
    uint8_t *p = f->head + at;
    size_t esz = big ? 20 : 12, cnt = big ? 8 : 2;
    put(p, n, (int)cnt);
    for (size_t i = 0; i < n; i++) {
        uint8_t *e = p + cnt + i * esz;
        put(e, t[i].tag, 2);
        put(e + 2, t[i].type, 2);
        put(e + 4, t[i].count, big ? 8 : 4);
        put(e + (big ? 12 : 8), t[i].value, big ? 8 : 4);
    }
    put(p + cnt + n * esz, next, big ? 8 : 4);
    return at + cnt + n * esz + (big ? 8 : 4);
}

static void header(vfile *f, int big, uint64_t first) {
    memcpy(f->head, "II", 2);
    if (big) {
        put(f->head + 2, 43, 2);
        put(f->head + 4, 8, 2);
        put(f->head + 8, first, 8);
    } else {
        put(f->head + 2, 42, 2);
        put(f->head + 4, first, 4);
    }
}

/* Most bytes a test lets the parser fetch: past it the parse is stopped
 * (CF_E_STATE) -- the old code asked for 256 MiB of zeros here. */
#define FETCH_STOP (64 * MIB)

/* Parse f as cog.c does (64 KiB first, then what the parser asks for)
 * under `budget`; *fetched gets the bytes handed to the parser. */
static cf_status drive(const vfile *f, uint64_t budget, uint64_t *fetched,
                       cf_error *err) {
    cf__tiff_parser *p = cf__tiff_parser_new(f->size, "crafted.tif");
    cf__tiff_parser_set_budget(p, budget);
    cf__tiff *t = NULL;
    uint64_t first = f->size < 65536 ? f->size : 65536;
    *fetched = first;
    cf_status st = cf__tiff_parser_add(p, 0, f->head, (size_t)first, err);
    while (st == CF_OK) {
        uint64_t off, len;
        st = cf__tiff_parser_run(p, &t, &off, &len, err);
        if (st != CF__NEED_BYTES) break;
        if (len > FETCH_STOP - *fetched || off > f->size || len > f->size - off) {
            *fetched += len;
            st = CF_E_STATE;
            break;
        }
        uint8_t *b = calloc(1, (size_t)len ? (size_t)len : 1);
        if (off < f->nhead)
            memcpy(b, f->head + off, (size_t)(f->nhead - off < len ? f->nhead - off : len));
        *fetched += len;
        st = cf__tiff_parser_add(p, off, b, (size_t)len, err);
        free(b);
    }
    cf__tiff_free(t);
    cf__tiff_parser_free(p);
    return st;
}

static void expect_refused(const char *what, cf_status st, const cf_error *err,
                           uint64_t fetched, uint64_t most) {
    CHECK(st == CF_E_LIMIT);
    CHECK(strstr(err->msg, "header_memory_max") != NULL);
    CHECK(fetched <= most);
    if (st != CF_E_LIMIT || fetched > most || !strstr(err->msg, "header_memory_max"))
        fprintf(stderr, "  %s: status %d, %llu bytes fetched (at most %llu): %s\n",
                what, (int)st, (unsigned long long)fetched,
                (unsigned long long)most, err->msg);
}

/* A one-tile 16x16 image plus `extra` tags. */
static size_t image(vfile *f, size_t at, const tag *extra, size_t nextra) {
    tag t[24] = {
        {256, 4, 1, 16}, {257, 4, 1, 16}, {258, 3, 1, 8}, {259, 3, 1, 1},
        {262, 3, 1, 1}, {277, 3, 1, 1}, {322, 4, 1, 16}, {323, 4, 1, 16},
        {324, 4, 1, 4096}, {325, 4, 1, 256},
    };
    size_t n = 10;
    for (size_t i = 0; i < nextra; i++) t[n++] = extra[i];
    return ifd(f, 0, at, t, n, 0);
}

/* Tags the parser reads only a little of, or skips when huge, were not
 * counted before their data was fetched: a 32 MiB GDAL_METADATA under an
 * 8 MiB budget was fetched whole, then refused (and a 2^31-value
 * GeoKeyDirectory took the 256 MiB header cap).  Now refused first. */
static void big_tags(void) {
    vfile f = {calloc(1, 65536), 65536, 0};
    header(&f, 0, 8);
    tag md = {42112, 2, 32 * MIB, MIB}; /* ASCII, 32 MiB at 1 MiB */
    image(&f, 8, &md, 1);
    f.size = 40 * MIB;
    uint64_t fetched;
    cf_error err = {0};
    cf_status st = drive(&f, 8 * MIB, &fetched, &err);
    expect_refused("GDAL_METADATA", st, &err, fetched, 8 * MIB);

    memset(f.head, 0, f.nhead);
    header(&f, 0, 8);
    tag gk = {34735, 3, (uint64_t)1 << 31, MIB}; /* 2^31 SHORTs: 4 GiB */
    image(&f, 8, &gk, 1);
    f.size = (uint64_t)8 << 30;
    st = drive(&f, 0, &fetched, &err);
    expect_refused("GeoKeyDirectory", st, &err, fetched, 65536);
    free(f.head);
}

/* The IFD tables themselves: 256 IFDs of 4000 entries (12 MB) under a
 * 4 MiB budget.  Old: the whole chain was fetched, then refused. */
static void big_ifds(void) {
    size_t per = 2 + 4000 * 12 + 4, n = 256;
    vfile f = {calloc(1, 8 + n * per), 8 + n * per, 8 + n * per};
    header(&f, 0, 8);
    tag *t = calloc(4000, sizeof *t);
    for (int i = 0; i < 4000; i++) t[i] = (tag){65000, 1, 1, 0};
    for (size_t k = 0; k < n; k++)
        ifd(&f, 0, 8 + k * per, t, 4000, k + 1 < n ? 8 + (k + 1) * per : 0);
    free(t);
    uint64_t fetched;
    cf_error err = {0};
    cf_status st = drive(&f, 4 * MIB, &fetched, &err);
    expect_refused("256 IFDs of 4000 entries", st, &err, fetched, 4 * MIB);
    free(f.head);
}

/* The declared sizes summed past 2^64: four IFDs whose BYTE tile arrays
 * declare k tiles each, so that 18 x (the sum of k) -- 2 array bytes and
 * 16 index bytes a tile -- is 2^64 + 2.  Old: the check saw 2 bytes plus
 * the header, let it through, and the parser asked for 256 MiB of
 * arrays. */
static void sums_that_wrap(void) {
    vfile f = {calloc(1, 65536), 65536, (uint64_t)1 << 62};
    header(&f, 1, 16);
    const uint64_t k[4] = {256204778801521550ull, 256204778801521550ull,
                           256204778801521550ull, 256204778801521551ull};
    uint64_t sum = 0;
    for (int i = 0; i < 4; i++) sum += k[i];
    CHECK(sum * 18 == 2); /* wraps to 2, as the old check saw it */
    size_t at = 16;
    uint64_t data = MIB;
    for (int i = 0; i < 4; i++) {
        tag t[] = {
            {256, 4, 1, 1}, {257, 4, 1, 1}, {258, 3, 1, 8}, {259, 3, 1, 1},
            {262, 3, 1, 1}, {277, 3, 1, 1}, {322, 4, 1, 16}, {323, 4, 1, 16},
            {324, 1, k[i], data}, {325, 1, k[i], data + k[i]},
        };
        data += 2 * k[i];
        size_t next = at + 8 + 10 * 20 + 8;
        at = ifd(&f, 1, at, t, 10, i < 3 ? next : 0);
    }
    uint64_t fetched;
    cf_error err = {0};
    cf_status st = drive(&f, 0, &fetched, &err);
    expect_refused("wrapped sums", st, &err, fetched, 65536);
    CHECK(strstr(err.msg, "parsing its header needs") != NULL);
    free(f.head);
}

int main(void) {
    big_tags();
    big_ifds();
    sums_that_wrap();
    return CF_TEST_END();
}
