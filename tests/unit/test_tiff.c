/*
 * test_tiff.c - the TIFF parser on files built in memory: classic/BigTIFF x
 * little/big endian, tiles and strips, planar 2, overviews and masks,
 * GeoTIFF and GDAL tags, the need-bytes protocol, and one test per
 * reliability item (1-14, 22-25) that the parser is responsible for.
 */
#include "tiff/tiff.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cf_test.h"
#include "test_tiff_writer.h"

#define NAME "bad.tif"

static cf_status parse(tw *w, cf__tiff **t, cf_error *err) {
    size_t len;
    const uint8_t *d = tw_finish(w, &len);
    cf__err_clear(err);
    return cf__tiff_parse_memory(d, len, NAME, t, err);
}

/* Parse a finished (maybe patched) file. */
static cf_status parse_buf(tw *w, cf__tiff **t, cf_error *err) {
    cf__err_clear(err);
    return cf__tiff_parse_memory(w->out, w->len, NAME, t, err);
}

/* The error is clean: expected code, message names the file and `word`. */
static int clean_error(cf_status st, const cf_error *err, cf_status want,
                       const char *word) {
    int ok = st == want && err->code == want &&
             strncmp(err->msg, NAME ": ", strlen(NAME) + 2) == 0 &&
             (!word || strstr(err->msg, word));
    if (!ok)
        fprintf(stderr, "  got status %d (want %d), msg \"%s\" (want \"%s\")\n",
                (int)st, (int)want, err->msg, word ? word : "");
    return ok;
}

/* One malformed image IFD built from `im`, expecting an error. */
static int image_error(tw_image im, cf_status want, const char *word) {
    tw w;
    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    cf__tiff *t = NULL;
    cf_error err;
    cf_status st = parse(&w, &t, &err);
    int ok = clean_error(st, &err, want, word) && t == NULL;
    cf__tiff_free(t);
    tw_free(&w);
    return ok;
}

static void test_matrix(void) {
    for (int big = 0; big < 2; big++)
        for (int be = 0; be < 2; be++)
            for (int tiled = 0; tiled < 2; tiled++) {
                tw w;
                tw_init(&w, big, be);
                tw_image im = tw_image_default(1000, 700);
                im.spp = 3;
                im.bits = 16;
                im.photometric = 2;
                if (!tiled) {
                    im.tw = 0;
                    im.th = 64;
                }
                tw_image_ifd(&w, &im);
                cf__tiff *t = NULL;
                cf_error err;
                cf_status st = parse(&w, &t, &err);
                CHECK(st == CF_OK);
                if (st != CF_OK) {
                    fprintf(stderr, "  %s\n", err.msg);
                    tw_free(&w);
                    continue;
                }
                const cf__tiff_ifd *d = &t->ifds[0];
                CHECK(t->bigtiff == big && t->big_endian == be);
                CHECK(t->nifds == 1 && t->nlevels == 1 && t->levels[0] == 0);
                CHECK(t->mask_of_level[0] == -1);
                CHECK(d->width == 1000 && d->height == 700);
                CHECK(d->tiled == tiled);
                if (tiled) {
                    CHECK(d->chunk_w == 256 && d->chunk_h == 256);
                    CHECK(d->chunks_across == 4 && d->chunks_down == 3);
                    CHECK(d->nchunks == 12);
                } else {
                    CHECK(d->chunk_w == 1000 && d->chunk_h == 64);
                    CHECK(d->chunks_across == 1 && d->chunks_down == 11);
                    CHECK(d->nchunks == 11);
                }
                uint64_t base = (big ? 16 : 8);
                CHECK(d->offsets[0] == base && d->counts[0] == 1);
                CHECK(d->offsets[d->nchunks - 1] == base + d->nchunks - 1);
                CHECK(d->samples == 3 && d->bits == 16);
                CHECK(d->sample_format == 1 && d->planar == 1);
                CHECK(d->compression == 8 && d->predictor == 1);
                CHECK(d->photometric == 2);
                CHECK(!strcmp(cf__tiff_compression_name(d), "DEFLATE"));
                CHECK(!t->has_geotransform && !t->has_nodata && t->epsg == 0);
                CHECK(t->scale[0] == 1 && t->offset[2] == 0);
                CHECK(t->header_end == w.len);
                cf__tiff_free(t);
                tw_free(&w);
            }
}

static void test_planar_and_types(void) {
    tw w;
    tw_init(&w, false, true);
    tw_image im = tw_image_default(300, 200);
    im.spp = 4;
    im.planar = 2;
    im.bits = 32;
    im.sf = 3;
    im.tw = 128;
    im.th = 128;
    tw_image_ifd(&w, &im);
    cf__tiff *t = NULL;
    cf_error err;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) {
        CHECK(t->ifds[0].planar == 2);
        CHECK(t->ifds[0].nchunks == 3 * 2 * 4);
        CHECK(t->ifds[0].bits == 32 && t->ifds[0].sample_format == 3);
        CHECK(t->ifds[0].photometric == 1);
    }
    cf__tiff_free(t);
    tw_free(&w);

    /* compression names. */
    cf__tiff_ifd d;
    memset(&d, 0, sizeof d);

    /* LERC sub-codec, JPEG tables, YCbCr, predictor via a real IFD. */
    static const struct {
        uint16_t comp;
        uint64_t lerc_sub;
        const char *name;
    } cases[] = {{34887, 2, "LERC_ZSTD"}, {34887, 1, "LERC_DEFLATE"},
                 {34887, 0, "LERC"},      {50000, 0, "ZSTD"},
                 {50001, 0, "WEBP"},      {5, 0, "LZW"},
                 {1, 0, "NONE"},          {32773, 0, "PACKBITS"},
                 {7, 0, "JPEG"},          {32946, 0, "DEFLATE"},
                 {2, 0, "CCITTRLE"},      {3, 0, "CCITTFAX3"},
                 {4, 0, "CCITTFAX4"},     {32771, 0, "CCITTRLEW"},
                 {9999, 0, "UNKNOWN(9999)"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tw_init(&w, true, false);
        im = tw_image_default(64, 64);
        im.compression = cases[k].comp;
        tw_image_ifd(&w, &im);
        uint64_t lp[2] = {4, cases[k].lerc_sub};
        if (cases[k].comp == 34887) tw_ints(&w, 50674, 4, 2, lp);
        if (cases[k].comp == 7) {
            static const uint8_t tables[40] = {0xff, 0xd8, 1, 2, 3};
            tw_raw(&w, 347, 7, sizeof tables, tables, sizeof tables);
            uint64_t sub[2] = {2, 1};
            tw_ints(&w, 530, 3, 2, sub);
            tw_int(&w, 317, 3, 2);
        }
        t = NULL;
        CHECK(parse(&w, &t, &err) == CF_OK);
        if (t) {
            CHECK(!strcmp(cf__tiff_compression_name(&t->ifds[0]),
                          cases[k].name));
            if (cases[k].comp == 34887) CHECK(t->ifds[0].lerc_version == 4);
            if (cases[k].comp == 7) {
                CHECK(t->ifds[0].jpeg_tables_len == 40);
                CHECK(t->ifds[0].jpeg_tables[0] == 0xff);
                CHECK(t->ifds[0].ycbcr_sub_h == 2 &&
                      t->ifds[0].ycbcr_sub_v == 1);
                CHECK(t->ifds[0].predictor == 2);
            } else {
                CHECK(t->ifds[0].jpeg_tables == NULL);
                CHECK(t->ifds[0].ycbcr_sub_h == 2 &&
                      t->ifds[0].ycbcr_sub_v == 2);
            }
        }
        cf__tiff_free(t);
        tw_free(&w);
    }
}

static void test_levels_and_masks(void) {
    tw w;
    tw_init(&w, false, false);
    tw_image full = tw_image_default(1024, 768);
    full.spp = 3;
    tw_image_ifd(&w, &full); /* 0 */
    tw_image m0 = tw_image_default(1024, 768);
    m0.subfile = 4;
    m0.photometric = 4;
    m0.bits = 1;
    tw_image_ifd(&w, &m0); /* 1: mask of level 0 */
    tw_image o2 = full;
    o2.width = 256; o2.height = 192; o2.subfile = 1;
    tw_image_ifd(&w, &o2); /* 2: smallest overview, listed first */
    tw_image o1 = full;
    o1.width = 512; o1.height = 384; o1.subfile = 1;
    tw_image_ifd(&w, &o1); /* 3 */
    tw_image m1 = m0;
    m1.width = 512; m1.height = 384; m1.subfile = 5; m1.bits = 8;
    tw_image_ifd(&w, &m1); /* 4: mask of the 512 overview */
    tw_image odd = full;
    odd.width = 128; odd.height = 96; odd.subfile = 1; odd.bits = 16;
    tw_image_ifd(&w, &odd); /* 5: different bits: not a level */
    tw_image page = full;
    page.subfile = 0;
    tw_image_ifd(&w, &page); /* 6: a second page: ignored */
    cf__tiff *t = NULL;
    cf_error err;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) {
        CHECK(t->nifds == 7);
        CHECK(t->nlevels == 3);
        CHECK(t->levels[0] == 0 && t->levels[1] == 3 && t->levels[2] == 2);
        CHECK(t->mask_of_level[0] == 1 && t->mask_of_level[1] == 4 &&
              t->mask_of_level[2] == -1);
        CHECK(t->ifds[1].bits == 1);
        CHECK(t->ifds[4].subfile_type == 5);
    }
    cf__tiff_free(t);
    tw_free(&w);

    /* A mask first in the file: level 0 is the first non-mask IFD. */
    tw_init(&w, true, true);
    tw_image_ifd(&w, &m0);
    tw_image_ifd(&w, &full);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->levels[0] == 1 && t->mask_of_level[0] == 0);
    cf__tiff_free(t);
    tw_free(&w);

    /* Only masks: error. */
    tw_init(&w, false, false);
    tw_image_ifd(&w, &m0);
    t = NULL;
    CHECK(clean_error(parse(&w, &t, &err), &err, CF_E_FORMAT, "mask"));
    tw_free(&w);
}

/* GeoKeyDirectory with the given (id, value) pairs stored inline. */
static void geokeys(tw *w, const uint64_t *kv, int nkeys, int claimed) {
    uint64_t k[4 + 4 * 8] = {1, 1, 0, (uint64_t)claimed};
    for (int i = 0; i < nkeys; i++) {
        k[4 + 4 * i] = kv[2 * i];
        k[5 + 4 * i] = 0;
        k[6 + 4 * i] = 1;
        k[7 + 4 * i] = kv[2 * i + 1];
    }
    tw_ints(w, 34735, 3, 4 + 4 * (uint64_t)nkeys, k);
}

static void test_geotiff(void) {
    tw w;
    cf__tiff *t;
    cf_error err;
    double scale[3] = {10, 20, 0}, tie[6] = {0, 0, 0, 500000, 4000000, 0};

    /* PixelIsArea, projected EPSG, GDAL nodata and scale/offset. */
    tw_init(&w, false, false);
    tw_image im = tw_image_default(100, 100);
    im.spp = 2;
    tw_image_ifd(&w, &im);
    tw_doubles(&w, 33550, 3, scale);
    tw_doubles(&w, 33922, 6, tie);
    uint64_t kv[] = {1024, 1, 1025, 1, 3072, 32633};
    geokeys(&w, kv, 3, 3);
    tw_ascii(&w, 42113, "-9999", true);
    tw_ascii(&w, 42112,
             "<GDALMetadata>\n  <Item name=\"STATS\">x</Item>\n"
             "  <Item name=\"OFFSET\" sample=\"0\" role=\"offset\">-5.5</Item>\n"
             "  <Item name=\"SCALE\" sample=\"0\" role=\"scale\">0.25</Item>\n"
             "  <Item name=\"SCALE\" sample=\"1\" role=\"scale\">2</Item>\n"
             "  <Item name=\"SCALE\" sample=\"7\" role=\"scale\">9</Item>\n"
             "  <Item name=\"SCALE\" sample=\"1\"/>\n"
             "</GDALMetadata>\n",
             true);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) {
        CHECK(t->has_geotransform);
        CHECK(t->geotransform[0] == 500000 && t->geotransform[1] == 10);
        CHECK(t->geotransform[2] == 0 && t->geotransform[3] == 4000000);
        CHECK(t->geotransform[4] == 0 && t->geotransform[5] == -20);
        CHECK(t->epsg == 32633 && !t->pixel_is_point);
        CHECK(t->has_nodata && t->nodata == -9999);
        CHECK(t->scale[0] == 0.25 && t->scale[1] == 2);
        CHECK(t->offset[0] == -5.5 && t->offset[1] == 0);
    }
    cf__tiff_free(t);
    tw_free(&w);

    /* PixelIsPoint (GDAL shifts by half a pixel), geographic EPSG, a
     * tiepoint not at (0,0), nodata "nan". */
    tw_init(&w, true, true);
    tw_image_ifd(&w, &im);
    double tie2[6] = {10, 20, 0, 100, 50, 0};
    tw_doubles(&w, 33550, 3, scale);
    tw_doubles(&w, 33922, 6, tie2);
    uint64_t kv2[] = {1025, 2, 2048, 4326};
    geokeys(&w, kv2, 2, 2);
    tw_ascii(&w, 42113, "nan", true);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) {
        CHECK(t->pixel_is_point && t->epsg == 4326);
        CHECK(t->geotransform[0] == 100 - 10 * 10 - 5);
        CHECK(t->geotransform[3] == 50 + 20 * 20 + 10);
        CHECK(t->has_nodata && isnan(t->nodata));
    }
    cf__tiff_free(t);
    tw_free(&w);

    /* Negative ScaleY is read as north-up, zero scale as no transform
     * (GDAL 3.6 gives (97, 2, 0, 204.5, 0, -3) and none for these). */
    double negs[3] = {2, -3, 0}, zeros[3] = {0, 3, 0};
    double tie3[6] = {1, 1, 0, 100, 200, 0};
    for (int k = 0; k < 2; k++) {
        tw_init(&w, false, false);
        tw_image_ifd(&w, &im);
        tw_doubles(&w, 33550, 3, k ? zeros : negs);
        tw_doubles(&w, 33922, 6, tie3);
        uint64_t kvp[] = {1025, 2};
        geokeys(&w, kvp, 1, 1);
        t = NULL;
        CHECK(parse(&w, &t, &err) == CF_OK);
        if (t && k == 0)
            CHECK(t->has_geotransform && t->geotransform[0] == 97 &&
                  t->geotransform[3] == 204.5 && t->geotransform[5] == -3);
        if (t && k == 1) CHECK(!t->has_geotransform);
        cf__tiff_free(t);
        tw_free(&w);
    }

    /* ModelTransformation, nodata "inf", user-defined projected CRS. */
    tw_init(&w, false, true);
    tw_image_ifd(&w, &im);
    double m[16] = {2, 0.5, 0, 1000, 0.25, -2, 0, 2000, 0, 0, 0, 0, 0, 0, 0, 1};
    tw_doubles(&w, 34264, 16, m);
    uint64_t kv3[] = {3072, 32767, 2048, 4326};
    geokeys(&w, kv3, 2, 2);
    tw_ascii(&w, 42113, " inf", true);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) {
        CHECK(t->has_geotransform);
        CHECK(t->geotransform[0] == 1000 && t->geotransform[1] == 2 &&
              t->geotransform[2] == 0.5 && t->geotransform[3] == 2000 &&
              t->geotransform[4] == 0.25 && t->geotransform[5] == -2);
        CHECK(t->epsg == 0);
        CHECK(t->has_nodata && isinf(t->nodata) && t->nodata > 0);
    }
    cf__tiff_free(t);
    tw_free(&w);
}

/* Feed only what the parser asks for; returns the number of requests after
 * the initial `first` bytes, or -1 on error. */
static int rounds(const uint8_t *d, size_t len, size_t first, bool size_known,
                  cf__tiff **out) {
    cf__tiff_parser *p =
        cf__tiff_parser_new(size_known ? len : UINT64_MAX, "r.tif");
    cf_error err;
    int n = 0;
    cf_status st = cf__tiff_parser_add(p, 0, d, first < len ? first : len, &err);
    if (!size_known) cf__tiff_parser_set_size(p, len); /* first response */
    while (st == CF_OK) {
        uint64_t off, nl;
        st = cf__tiff_parser_run(p, out, &off, &nl, &err);
        if (st != CF__NEED_BYTES) break;
        if (off >= len || nl == 0 || n > 50) {
            st = CF_E_STATE;
            break;
        }
        if (nl > len - off) nl = len - off;
        n++;
        st = cf__tiff_parser_add(p, off, d + off, (size_t)nl, &err);
    }
    cf__tiff_parser_free(p);
    if (st != CF_OK) fprintf(stderr, "  rounds: %d %s\n", (int)st, err.msg);
    return st == CF_OK ? n : -1;
}

static void test_need_bytes(void) {
    tw w;
    size_t len;
    cf__tiff *t = NULL;

    /* Compact header: 16 bytes, then one request. */
    tw_init(&w, false, false);
    tw_image im = tw_image_default(2048, 2048);
    tw_image_ifd(&w, &im);
    tw_image ov = im;
    ov.width = ov.height = 1024;
    ov.subfile = 1;
    tw_image_ifd(&w, &ov);
    const uint8_t *d = tw_finish(&w, &len);
    CHECK(rounds(d, len, 16, true, &t) == 1);
    CHECK(t && t->nlevels == 2);
    cf__tiff_free(t);
    /* The same with the file size unknown at the start. */
    t = NULL;
    CHECK(rounds(d, len, 16, false, &t) == 1);
    cf__tiff_free(t);
    /* Whole header in the first read: no request at all. */
    t = NULL;
    CHECK(rounds(d, len, 65536, true, &t) == 0);
    cf__tiff_free(t);
    tw_free(&w);

    /* Big offset arrays (200k tiles, 1.6 MB each) after the IFDs: walking
     * the chain and fetching all arrays takes few requests. */
    tw_init(&w, true, false);
    im = tw_image_default(400 * 256, 500 * 256);
    tw_image_ifd(&w, &im);
    ov = im;
    ov.width /= 2;
    ov.height /= 2;
    ov.subfile = 1;
    tw_image_ifd(&w, &ov);
    d = tw_finish(&w, &len);
    t = NULL;
    int n = rounds(d, len, 16384, true, &t);
    CHECK(n >= 1 && n <= 3);
    CHECK(t && t->ifds[0].nchunks == 200000 && t->ifds[1].nchunks == 50000);
    if (t) CHECK(t->ifds[1].offsets[49999] == 16 + 200001 + 49999);
    cf__tiff_free(t);

    /* Fed byte by byte in reverse order of need: the parser never loops
     * and never reads outside what it was given (ASan checks). */
    cf__tiff_parser *p = cf__tiff_parser_new(len, "r.tif");
    cf_error err;
    uint64_t off, nl;
    CHECK(cf__tiff_parser_run(p, &t, &off, &nl, &err) == CF__NEED_BYTES);
    CHECK(off == 0 && nl >= 16);
    /* Asking again without adding anything is an error, not a loop. */
    CHECK(cf__tiff_parser_run(p, &t, &off, &nl, &err) == CF_E_FORMAT);
    CHECK(strstr(err.msg, "r.tif") != NULL);
    /* Overlapping and adjacent adds merge. */
    CHECK(cf__tiff_parser_add(p, 100, d + 100, 50, &err) == CF_OK);
    CHECK(cf__tiff_parser_add(p, 0, d, 100, &err) == CF_OK);
    CHECK(cf__tiff_parser_add(p, 120, d + 120, 100, &err) == CF_OK);
    CHECK(cf__tiff_parser_run(p, &t, &off, &nl, &err) == CF__NEED_BYTES);
    CHECK(off == w.ifd_off[0]);
    cf__tiff_parser_free(p);
    tw_free(&w);

    /* IFD at the end of a file (libtiff layout): two requests at most. */
    tw_init(&w, false, true);
    tw_reserve(&w, 300000);
    im = tw_image_default(512, 512);
    im.tw = 0;
    im.th = 1;
    tw_image_ifd(&w, &im);
    d = tw_finish(&w, &len);
    t = NULL;
    n = rounds(d, len, 16, true, &t);
    CHECK(n >= 1 && n <= 2);
    CHECK(t && t->ifds[0].nchunks == 512);
    cf__tiff_free(t);
    tw_free(&w);
}

/* Pieces of random size added in random order must merge into exactly the
 * file: the parse then needs nothing more and gives the same result. */
static void test_merge_random(void) {
    tw w;
    tw_init(&w, true, true);
    tw_image im = tw_image_default(3000, 2000);
    tw_image_ifd(&w, &im);
    im.width /= 2;
    im.height /= 2;
    im.subfile = 1;
    tw_image_ifd(&w, &im);
    size_t len;
    const uint8_t *d = tw_finish(&w, &len);
    cf__tiff_parser *p = cf__tiff_parser_new(len, "m.tif");
    cf_error err;
    uint32_t seed = 12345;
    uint8_t *seen = calloc(len, 1);
    size_t covered = 0;
    for (int k = 0; k < 200000 && covered < len; k++) {
        seed = seed * 1103515245u + 12345u;
        size_t off = (seed >> 8) % len;
        seed = seed * 1103515245u + 12345u;
        size_t n = 1 + (seed >> 8) % 200;
        if (n > len - off) n = len - off;
        CHECK(cf__tiff_parser_add(p, off, d + off, n, &err) == CF_OK);
        for (size_t j = off; j < off + n; j++) covered += !seen[j], seen[j] = 1;
    }
    CHECK(covered == len);
    cf__tiff *t = NULL;
    uint64_t no, nl;
    CHECK(cf__tiff_parser_run(p, &t, &no, &nl, &err) == CF_OK);
    if (t) {
        CHECK(t->nlevels == 2 && t->ifds[0].nchunks == 12 * 8);
        CHECK(t->ifds[1].offsets[0] == 16 + 12 * 8 + 1);
        CHECK(t->header_end == len);
    }
    cf__tiff_free(t);
    cf__tiff_parser_free(p);
    free(seen);
    tw_free(&w);
}

/* ---- reliability items ------------------------------------------------ */

/* A parse that succeeds with `word` among its warnings; *t kept. */
static int parsed_with_warning(cf_status st, cf__tiff **tp, const cf_error *err,
                               const char *word) {
    cf__tiff *t = *tp; /* read after the parse (argument order is unspecified) */
    int ok = st == CF_OK && t && t->warnings && strstr(t->warnings, word);
    if (!ok)
        fprintf(stderr, "  status %d, msg \"%s\", warnings \"%s\" (want \"%s\")\n",
                (int)st, err->msg, t && t->warnings ? t->warnings : "", word);
    return ok;
}

static void item1_loops(void) {
    /* A chain that loops after the first IFD ends there, as GDAL reads it:
     * the IFDs before the loop are read, and a warning says why. */
    cf_error err;
    cf__tiff *t = NULL;
    for (int kind = 0; kind < 2; kind++) {
        tw w;
        tw_init(&w, kind == 1, false);
        tw_image im = tw_image_default(64, 64);
        tw_image_ifd(&w, &im);
        tw_image ov = tw_image_default(32, 32);
        ov.subfile = 1;
        tw_image_ifd(&w, &ov);
        size_t len;
        tw_finish(&w, &len);
        unsigned nsz = w.big ? 8 : 4;
        /* A -> B -> A */
        tw_patch(&w, tw_next_pos(&w, 1), w.ifd_off[0], nsz);
        CHECK(parsed_with_warning(parse_buf(&w, &t, &err), &t, &err, "loop"));
        if (t) CHECK(t->nifds == 2 && t->nlevels == 2);
        cf__tiff_free(t);
        /* self loop */
        tw_patch(&w, tw_next_pos(&w, 1), 0, nsz);
        tw_patch(&w, tw_next_pos(&w, 0), w.ifd_off[0], nsz);
        CHECK(parsed_with_warning(parse_buf(&w, &t, &err), &t, &err,
                                  "points back to IFD 0 (loop)"));
        if (t) CHECK(t->nifds == 1 && t->nlevels == 1);
        cf__tiff_free(t);
        tw_free(&w);
    }
    /* A long chain: read up to CF_MAX_IFDS, the rest left with a warning. */
    tw w;
    tw_init(&w, false, false);
    tw_image im = tw_image_default(16, 16);
    im.tw = 0;
    for (int i = 0; i < 1000; i++) tw_image_ifd(&w, &im);
    CHECK(parsed_with_warning(parse(&w, &t, &err), &t, &err, "256 IFDs (limit)"));
    if (t) CHECK(t->nifds == CF_MAX_IFDS);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item2_offsets_past_eof(void) {
    cf_error err;
    cf__tiff *t = NULL;
    tw w;
    tw_init(&w, false, false);
    tw_image im = tw_image_default(64, 64);
    tw_image_ifd(&w, &im);
    size_t len;
    tw_finish(&w, &len);
    /* a bad next pointer after the first IFD ends the chain */
    tw_patch(&w, tw_next_pos(&w, 0), len + 1000, 4);
    CHECK(parsed_with_warning(parse_buf(&w, &t, &err), &t, &err, "past end of file"));
    cf__tiff_free(t);
    tw_patch(&w, tw_next_pos(&w, 0), 2, 4); /* into the header */
    CHECK(parsed_with_warning(parse_buf(&w, &t, &err), &t, &err, "header"));
    cf__tiff_free(t);
    /* a bad first IFD is an error */
    tw_patch(&w, 4, len - 1, 4); /* first IFD whose count is cut off */
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT,
                      "past end of file"));
    tw_patch(&w, 4, 0, 4);
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT, "no IFD"));
    tw_free(&w);

    tw_init(&w, true, true);
    tw_image_ifd(&w, &im);
    tw_finish(&w, &len);
    tw_patch(&w, 8, UINT64_C(1) << 63, 8);
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT,
                      "past end of file"));
    tw_patch(&w, 8, UINT64_MAX, 8);
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT,
                      "past end of file"));
    /* Also when the size is not known yet. */
    cf__tiff_parser *p = cf__tiff_parser_new(UINT64_MAX, NAME);
    uint64_t off, nl;
    CHECK(cf__tiff_parser_add(p, 0, w.out, 16, &err) == CF_OK);
    CHECK(clean_error(cf__tiff_parser_run(p, &t, &off, &nl, &err), &err,
                      CF_E_FORMAT, "past end of file"));
    cf__tiff_parser_free(p);
    tw_free(&w);

    /* Truncated files and non-TIFFs. */
    static const uint8_t junk[] = "GIF89a....";
    CHECK(clean_error(cf__tiff_parse_memory(junk, sizeof junk, NAME, &t, &err),
                      &err, CF_E_FORMAT, "not a TIFF"));
    static const uint8_t shorty[] = {'I', 'I', 42};
    CHECK(clean_error(cf__tiff_parse_memory(shorty, 3, NAME, &t, &err), &err,
                      CF_E_FORMAT, "too small"));
    static const uint8_t bt[] = {'I', 'I', 43, 0, 8, 0, 0, 0, 1};
    CHECK(clean_error(cf__tiff_parse_memory(bt, sizeof bt, NAME, &t, &err),
                      &err, CF_E_FORMAT, "truncated"));
    static const uint8_t bt4[] = {'I', 'I', 43, 0, 4, 0, 0, 0,
                                  16, 0, 0, 0, 0, 0, 0, 0};
    CHECK(clean_error(cf__tiff_parse_memory(bt4, sizeof bt4, NAME, &t, &err),
                      &err, CF_E_FORMAT, "offset size"));
}

static void item3_entry_count(void) {
    cf_error err;
    cf__tiff *t = NULL;
    tw w;
    tw_init(&w, true, false);
    tw_image im = tw_image_default(64, 64);
    tw_image_ifd(&w, &im);
    size_t len;
    tw_finish(&w, &len);
    tw_patch(&w, w.ifd_off[0], 70000, 8);
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT, "absurd"));
    tw_patch(&w, w.ifd_off[0], UINT64_C(1) << 60, 8);
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT, "absurd"));
    tw_patch(&w, w.ifd_off[0], 0, 8);
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT,
                      "no entries"));
    tw_patch(&w, w.ifd_off[0], 60000, 8); /* plausible, but past EOF */
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT,
                      "past end of file"));
    tw_free(&w);
}

static void item4_tag_sizes(void) {
    cf_error err;
    cf__tiff *t = NULL;
    tw w;
    /* count x 8 overflows 64 bits */
    tw_init(&w, true, false);
    tw_image im = tw_image_default(64, 64);
    im.skip_tag = 324;
    tw_image_ifd(&w, &im);
    uint64_t dummy = 0;
    tw_raw(&w, 324, 16, UINT64_C(1) << 61, &dummy, 8);
    CHECK(clean_error(parse(&w, &t, &err), &err, CF_E_FORMAT, "TileOffsets"));
    tw_free(&w);
    /* tag data past end of file */
    tw_init(&w, false, false);
    im = tw_image_default(1024, 64);
    tw_image_ifd(&w, &im);
    size_t len;
    tw_finish(&w, &len);
    for (int k = 0; k < w.ifd[0].n; k++)
        if (w.ifd[0].t[k].tag == 325)
            tw_patch(&w, w.ifd[0].t[k].entry_pos + 8, len - 4, 4);
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT,
                      "IFD 0: TileByteCounts data"));
    tw_free(&w);
}

static void item5_array_lengths(void) {
    cf_error err;
    cf__tiff *t = NULL;
    tw_image im = tw_image_default(1000, 1000); /* 16 tiles */
    im.chunk_entries = 12;
    CHECK(image_error(im, CF_E_FORMAT, "IFD 0: TileOffsets has 12 entries, "
                                       "expected 16"));
    im = tw_image_default(1000, 1000);
    im.planar = 2;
    im.spp = 3;
    im.chunk_entries = 16;
    CHECK(image_error(im, CF_E_FORMAT, "expected 48"));
    /* different lengths */
    tw w;
    tw_init(&w, false, false);
    im = tw_image_default(1000, 1000);
    im.skip_tag = 325;
    tw_image_ifd(&w, &im);
    uint64_t cnt[15] = {1};
    tw_ints(&w, 325, 4, 15, cnt);
    CHECK(clean_error(parse(&w, &t, &err), &err, CF_E_FORMAT,
                      "TileOffsets has 16 entries but TileByteCounts has 15"));
    tw_free(&w);
}

static void item6_huge_counts(void) {
    /* 2^24 x 2^24 with 16x16 tiles: 2^40 tiles */
    tw_image im = tw_image_default(1u << 24, 1u << 24);
    im.tw = im.th = 16;
    im.chunk_entries = 1;
    CHECK(image_error(im, CF_E_LIMIT, "tiles exceed"));
    /* 4M tiles claimed by arrays of 4M entries in a tiny file */
    tw w;
    tw_init(&w, false, false);
    im = tw_image_default(2048 * 256, 2048 * 256);
    im.chunk_entries = 1;
    im.skip_tag = 324;
    tw_image_ifd(&w, &im);
    uint32_t four = 0;
    tw_raw(&w, 324, 4, 2048u * 2048u, &four, 4);
    cf__tiff *t = NULL;
    cf_error err;
    cf_status st = parse(&w, &t, &err);
    CHECK(clean_error(st, &err, CF_E_FORMAT, "IFD 0"));
    tw_free(&w);
}

static void item7_bytecounts(void) {
    tw_image im = tw_image_default(64, 64);
    im.skip_tag = 325;
    CHECK(image_error(im, CF_E_FORMAT, "missing required tag TileByteCounts"));
    im.tw = 0;
    im.skip_tag = 279;
    CHECK(image_error(im, CF_E_FORMAT, "missing required tag StripByteCounts"));
    im.skip_tag = 273;
    CHECK(image_error(im, CF_E_FORMAT, "missing required tag StripOffsets"));

    cf_error err;
    cf__tiff *t = NULL;
    tw w;
    tw_init(&w, false, false);
    im = tw_image_default(512, 256); /* 2 tiles */
    im.skip_tag = 325;
    tw_image_ifd(&w, &im);
    uint64_t cnt[2] = {0, 1u << 20}; /* sparse, then larger than the file */
    tw_ints(&w, 325, 4, 2, cnt);
    /* a truncated file opens (reading tile 1 fails, test_pipeline_read) */
    CHECK(parsed_with_warning(parse(&w, &t, &err), &t, &err,
                              "1 of 2 tiles lie past the end of the file"));
    cf__tiff_free(t);
    t = NULL;
    tw_free(&w);

    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    uint64_t sparse[2] = {0, 0};
    tw_ints(&w, 325, 4, 2, sparse);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->ifds[0].counts[0] == 0 && t->ifds[0].counts[1] == 0);
    cf__tiff_free(t);
    tw_free(&w);

    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    uint64_t huge[2] = {1, UINT64_C(3) << 30};
    tw_ints(&w, 325, 16, 2, huge);
    CHECK(clean_error(parse(&w, &t, &err), &err, CF_E_LIMIT, "tile 1"));
    tw_free(&w);
}

static void item8_corrupt_later_ifd(void) {
    cf_error err;
    cf__tiff *t = NULL;
    tw w;
    tw_init(&w, false, false);
    tw_image im = tw_image_default(2048, 2048);
    tw_image_ifd(&w, &im);
    for (int k = 1; k < 4; k++) {
        tw_image ov = im;
        ov.width >>= k;
        ov.height >>= k;
        ov.subfile = 1;
        tw_image_ifd(&w, &ov);
    }
    size_t len;
    tw_finish(&w, &len);
    for (int k = 0; k < w.ifd[2].n; k++)
        if (w.ifd[2].t[k].tag == 324)
            tw_patch(&w, w.ifd[2].t[k].entry_pos + 8, 0xfffffff0u, 4);
    /* IFD 2 cannot be read: it and the IFDs after it are left out, as GDAL
     * stops there; the full resolution and IFD 1 are read. */
    CHECK(parsed_with_warning(parse_buf(&w, &t, &err), &t, &err,
                              "IFD 2: TileOffsets"));
    if (t) CHECK(t->nifds == 2 && t->nlevels == 2);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item9_overlaps(void) {
    /* An IFD placed inside the data area and tiles that overlap each other
     * and the IFD: legal for a reader that copies its header bytes. */
    tw w;
    tw_init(&w, false, false);
    tw_image im = tw_image_default(64, 64); /* one tile: inline values */
    tw_reserve(&w, 4096);
    tw_image_ifd(&w, &im);
    tw_image_ifd(&w, &im);
    size_t len;
    tw_finish(&w, &len);
    cf__tiff *t = NULL;
    cf_error err;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < w.ifd[i].n; k++) {
            if (w.ifd[i].t[k].tag == 324) /* tile data = IFD 0 */
                tw_patch(&w, w.ifd[i].t[k].entry_pos + 8, w.ifd_off[0], 4);
            if (w.ifd[i].t[k].tag == 325)
                tw_patch(&w, w.ifd[i].t[k].entry_pos + 8, 100, 4);
        }
    /* IFD 1 starts inside the data area. */
    memcpy(w.out + 8, w.out + w.ifd_off[1], len - w.ifd_off[1]);
    tw_patch(&w, tw_next_pos(&w, 0), 8, 4);
    CHECK(parse_buf(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->nifds == 2 && t->ifds[1].ifd_offset == 8 &&
                 t->ifds[0].offsets[0] == w.ifd_off[0]);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item10_dimensions(void) {
    tw_image im = tw_image_default(1u << 25, 64);
    im.chunk_entries = 1;
    CHECK(image_error(im, CF_E_LIMIT, "image size"));
    im = tw_image_default(64, 64);
    im.spp = 65529;
    CHECK(image_error(im, CF_E_LIMIT, "SamplesPerPixel 65529"));
    im.spp = 0;
    CHECK(image_error(im, CF_E_FORMAT, "SamplesPerPixel is 0"));
    im = tw_image_default(0, 64);
    im.chunk_entries = 1;
    CHECK(image_error(im, CF_E_FORMAT, "image size is 0x64"));
}

static void item11_chunk_sizes(void) {
    tw_image im = tw_image_default(64, 64);
    im.tw = 0;
    im.th = 64;
    im.chunk_entries = 1;
    im.tw = 16;
    im.th = 0;
    CHECK(image_error(im, CF_E_FORMAT, "TileLength is 0"));
    im.tw = 0x7fffffff;
    im.th = 16;
    CHECK(image_error(im, CF_E_LIMIT, "tile size"));
    /* RowsPerStrip 0 */
    tw w;
    tw_init(&w, false, false);
    im = tw_image_default(64, 64);
    im.tw = 0;
    im.th = 64;
    tw_image_ifd(&w, &im);
    size_t len;
    tw_finish(&w, &len);
    for (int k = 0; k < w.ifd[0].n; k++)
        if (w.ifd[0].t[k].tag == 278) tw_patch(&w, w.ifd[0].t[k].entry_pos + 8,
                                               0, 4);
    cf__tiff *t = NULL;
    cf_error err;
    CHECK(clean_error(parse_buf(&w, &t, &err), &err, CF_E_FORMAT,
                      "RowsPerStrip is 0"));
    /* RowsPerStrip larger than the image (2^32-1): one strip. */
    for (int k = 0; k < w.ifd[0].n; k++)
        if (w.ifd[0].t[k].tag == 278) tw_patch(&w, w.ifd[0].t[k].entry_pos + 8,
                                               0xffffffffu, 4);
    CHECK(parse_buf(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->ifds[0].chunk_h == 64 && t->ifds[0].nchunks == 1);
    cf__tiff_free(t);
    tw_free(&w);
    /* A tile larger than the image and not a multiple of 16 is accepted. */
    im = tw_image_default(10, 10);
    im.tw = 100;
    im.th = 17;
    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->ifds[0].nchunks == 1 && t->ifds[0].chunk_w == 100);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item12_size_overflow(void) {
    tw_image im = tw_image_default(64, 64);
    im.tw = im.th = 65536;
    im.spp = 4;
    im.bits = 64;
    im.chunk_entries = 1;
    CHECK(image_error(im, CF_E_LIMIT, "exceeds the limit"));
    im.tw = im.th = 1u << 24;
    im.spp = 4096;
    CHECK(image_error(im, CF_E_LIMIT, "exceeds the limit"));
}

static void item13_bits(void) {
    static const struct {
        uint16_t bits;
        cf_status want;
    } cases[] = {{0, CF_E_FORMAT}, {65, CF_E_FORMAT}, {127, CF_E_FORMAT}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tw_image im = tw_image_default(64, 64);
        im.bits = cases[k].bits;
        char word[48];
        snprintf(word, sizeof word, "BitsPerSample %u", cases[k].bits);
        CHECK(image_error(im, cases[k].want, word));
    }
    /* different per sample */
    tw w;
    tw_init(&w, false, false);
    tw_image im = tw_image_default(64, 64);
    im.spp = 3;
    im.skip_tag = 258;
    tw_image_ifd(&w, &im);
    uint64_t b[3] = {8, 8, 16};
    tw_ints(&w, 258, 3, 3, b);
    cf__tiff *t = NULL;
    cf_error err;
    CHECK(clean_error(parse(&w, &t, &err), &err, CF_E_UNSUPPORTED,
                      "BitsPerSample differs"));
    tw_free(&w);
    /* Any depth of 1 to 64 bits parses (the codec layer decides which can
     * be read): 2, 7, 12, 24, 40, and 128 for complex floats. */
    static const uint16_t ok_bits[] = {2, 7, 12, 24, 40, 64};
    for (size_t k = 0; k < sizeof ok_bits / sizeof ok_bits[0]; k++) {
        tw_init(&w, false, false);
        im = tw_image_default(64, 64);
        im.bits = ok_bits[k];
        tw_image_ifd(&w, &im);
        t = NULL;
        CHECK(parse(&w, &t, &err) == CF_OK);
        if (t) CHECK(t->ifds[0].bits == ok_bits[k]);
        cf__tiff_free(t);
        tw_free(&w);
    }
}

static void item14_sample_format(void) {
    tw_image im = tw_image_default(64, 64);
    im.sf = 7;
    CHECK(image_error(im, CF_E_FORMAT, "SampleFormat 7"));
    im.bits = 128;
    im.sf = 5; /* 128 bits: complex float only */
    CHECK(image_error(im, CF_E_FORMAT, "BitsPerSample 128"));
    /* Missing SampleFormat: unsigned. */
    tw w;
    tw_init(&w, false, false);
    im = tw_image_default(64, 64);
    im.bits = 32;
    tw_image_ifd(&w, &im);
    cf__tiff *t = NULL;
    cf_error err;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->ifds[0].sample_format == 1 && t->ifds[0].bits == 32);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item22_nonfinite(void) {
    tw w;
    cf__tiff *t;
    cf_error err;
    double bad[3][3] = {{NAN, 1, 0}, {1, INFINITY, 0}, {1e308, 1e308, 0}};
    double tie[6] = {10, 10, 0, 1e308, -1e308, 0};
    for (int k = 0; k < 3; k++) {
        tw_init(&w, false, false);
        tw_image im = tw_image_default(64, 64);
        tw_image_ifd(&w, &im);
        tw_doubles(&w, 33550, 3, bad[k]);
        tw_doubles(&w, 33922, 6, tie);
        t = NULL;
        CHECK(parse(&w, &t, &err) == CF_OK);
        if (t) CHECK(!t->has_geotransform);
        cf__tiff_free(t);
        tw_free(&w);
    }
    /* Rational with a zero denominator where a double is expected. */
    tw_init(&w, false, false);
    tw_image im = tw_image_default(64, 64);
    tw_image_ifd(&w, &im);
    tw_rational(&w, 33550, 1, 0);
    tw_doubles(&w, 33922, 6, tie);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(!t->has_geotransform);
    cf__tiff_free(t);
    tw_free(&w);
    /* A NaN in a matrix */
    tw_init(&w, true, false);
    tw_image_ifd(&w, &im);
    double m[16] = {1, 0, 0, NAN, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    tw_doubles(&w, 34264, 16, m);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(!t->has_geotransform);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item23_ascii(void) {
    tw w;
    cf__tiff *t;
    cf_error err;
    tw_init(&w, false, false);
    tw_image im = tw_image_default(64, 64);
    tw_image_ifd(&w, &im);
    tw_ascii(&w, 42113, "-9999", false); /* no NUL */
    tw_ascii(&w, 42112, "<GDALMetadata><Item name=\"SCALE\" sample=\"0\">3",
             false); /* truncated XML */
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->has_nodata && t->nodata == -9999 && t->scale[0] == 1);
    cf__tiff_free(t);
    tw_free(&w);
    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    tw_raw(&w, 42113, 2, 0, NULL, 0); /* zero count */
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(!t->has_nodata);
    cf__tiff_free(t);
    tw_free(&w);
    /* Nodata that is not a number, metadata with attributes cut short. */
    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    tw_ascii(&w, 42113, "none", true);
    tw_ascii(&w, 42112, "<Item name=\"SCALE\" sample=\"0>2</Item><Item", true);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(!t->has_nodata && t->scale[0] == 1);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item24_geokeys(void) {
    tw w;
    cf__tiff *t;
    cf_error err;
    double scale[3] = {1, 1, 0}, tie[6] = {0, 0, 0, 5, 6, 0};
    tw_init(&w, false, false);
    tw_image im = tw_image_default(64, 64);
    tw_image_ifd(&w, &im);
    tw_doubles(&w, 33550, 3, scale);
    tw_doubles(&w, 33922, 6, tie);
    uint64_t kv[] = {3072, 32633, 1025, 2};
    geokeys(&w, kv, 2, 5000); /* claims 5000 keys, has 2 */
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) {
        CHECK(t->epsg == 0 && !t->pixel_is_point);
        CHECK(t->has_geotransform && t->geotransform[0] == 5);
    }
    cf__tiff_free(t);
    tw_free(&w);
    /* Key directory data past end of file: ignored as well. */
    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    uint16_t k4[4] = {1, 1, 0, 0};
    tw_raw(&w, 34735, 3, 100000, k4, sizeof k4);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->epsg == 0);
    cf__tiff_free(t);
    tw_free(&w);
}

static void item25_tags(void) {
    tw_image im = tw_image_default(64, 64);
    im.skip_tag = 256;
    CHECK(image_error(im, CF_E_FORMAT, "IFD 0: missing required tag "
                                       "ImageWidth"));
    im.skip_tag = 257;
    CHECK(image_error(im, CF_E_FORMAT, "ImageLength"));
    im = tw_image_default(64, 64);
    im.skip_tag = 324;
    CHECK(image_error(im, CF_E_FORMAT, "TileOffsets"));

    tw w;
    cf__tiff *t;
    cf_error err;
    /* Unknown type code: the entry is skipped, and a required tag with one
     * counts as missing. */
    tw_init(&w, false, true);
    im = tw_image_default(64, 64);
    tw_image_ifd(&w, &im);
    uint32_t v = 7;
    tw_raw(&w, 305, 99, 1, &v, 4);     /* Software, bogus type */
    tw_raw(&w, 65000, 200, 9, &v, 4);  /* unknown tag, unknown type */
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    cf__tiff_free(t);
    tw_free(&w);

    tw_init(&w, false, false);
    im = tw_image_default(64, 64);
    im.skip_tag = 256;
    tw_image_ifd(&w, &im);
    tw_raw(&w, 256, 99, 1, &v, 4);
    CHECK(clean_error(parse(&w, &t, &err), &err, CF_E_FORMAT, "ImageWidth"));
    tw_free(&w);

    /* Unsorted and duplicate tags: first occurrence wins. */
    tw_init(&w, false, false);
    tw_image_ifd(&w, &im); /* no ImageWidth yet; added last, twice */
    tw_int(&w, 256, 3, 40);
    tw_int(&w, 256, 3, 4000);
    t = NULL;
    CHECK(parse(&w, &t, &err) == CF_OK);
    if (t) CHECK(t->ifds[0].width == 40);
    cf__tiff_free(t);
    tw_free(&w);

    /* A wrong type for an integer tag is named. */
    tw_init(&w, false, false);
    tw_image_ifd(&w, &im);
    tw_ascii(&w, 256, "64", true);
    CHECK(clean_error(parse(&w, &t, &err), &err, CF_E_FORMAT,
                      "ImageWidth has field type 2"));
    tw_free(&w);
}

static void test_header_cap(void) {
    /* The byte budget: adding past CF_MAX_HEADER_BYTES fails cleanly. */
    cf__tiff_parser *p = cf__tiff_parser_new(UINT64_MAX, NAME);
    cf_error err;
    size_t n = 1u << 20;
    uint8_t *buf = calloc(n, 1);
    cf_status st = CF_OK;
    uint64_t i;
    for (i = 0; i <= CF_MAX_HEADER_BYTES / n && st == CF_OK; i++)
        st = cf__tiff_parser_add(p, i * n * 2, buf, n, &err);
    CHECK(i == CF_MAX_HEADER_BYTES / n + 1);
    CHECK(clean_error(st, &err, CF_E_LIMIT, "limit"));
    free(buf);
    cf__tiff_parser_free(p);
}

int main(void) {
    test_matrix();
    test_planar_and_types();
    test_levels_and_masks();
    test_geotiff();
    test_need_bytes();
    test_merge_random();
    item1_loops();
    item2_offsets_past_eof();
    item3_entry_count();
    item4_tag_sizes();
    item5_array_lengths();
    item6_huge_counts();
    item7_bytecounts();
    item8_corrupt_later_ifd();
    item9_overlaps();
    item10_dimensions();
    item11_chunk_sizes();
    item12_size_overflow();
    item13_bits();
    item14_sample_format();
    item22_nonfinite();
    item23_ascii();
    item24_geokeys();
    item25_tags();
    test_header_cap();
    return CF_TEST_END();
}
