/*
 * test_cog_share.c - one COG made by share writers (cogfeed.h,
 * cf_writer_share_build): an image's rows of tiles split into shares,
 * each share written by a writer of its own that makes the overview rows
 * it owns, the carries passed from share to share, and the shares' tiles
 * of every level copied into a writer with overviews_given: the file is
 * the one a single writer makes, byte for byte.  Sizes odd at many levels
 * (windows of 3 rows across share boundaries), tiny tiles (many levels,
 * deep levels whose rows of tiles span many shares), more shares than
 * rows of tiles (empty shares pass the carry on), masks, nodata, NaN,
 * average, mode and nearest; and the refusals.
 */
#include "cf_test.h"
#include "cogfeed.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/cf_share_XXXXXX";

typedef struct tcase {
    uint32_t W, H, T, bands;
    cf_dtype dt;
    uint16_t comp;
    cf_resampling rs;
    int mask, has_nodata;
    double nodata;
} tcase;

/* Band b's value at (x, y): smooth with edges, the nodata (or NaN) here
 * and there; classes for uint8. */
static double val(const tcase *c, uint32_t b, uint32_t x, uint32_t y) {
    if ((x * 7 + y * 13) % 29 == 0 && c->has_nodata) return c->nodata;
    if (c->dt == CF_DT_U8) return (double)((x / 7 + y / 5 + b) % 5);
    if (c->dt == CF_DT_F32) return sin(x * 0.05 + b) * cos(y * 0.031) * 100.0;
    return (double)((x * 3 + y * 7 + b * 1000) % 60000);
}

static int valid_px(uint32_t x, uint32_t y) { return (x / 3 + y / 5) % 4 != 0; }

/* Tile (tx, ty) band-sequential into buf, its mask into m. */
static size_t fill(const tcase *c, uint32_t tx, uint32_t ty, uint8_t *buf, uint8_t *m) {
    const uint32_t T = c->T;
    uint32_t tw = (tx + 1) * T <= c->W ? T : c->W - tx * T;
    uint32_t th = (ty + 1) * T <= c->H ? T : c->H - ty * T;
    size_t es = cf_dtype_size(c->dt), k = 0;
    for (uint32_t b = 0; b < c->bands; b++)
        for (uint32_t y = 0; y < th; y++)
            for (uint32_t x = 0; x < tw; x++, k++) {
                double v = val(c, b, tx * T + x, ty * T + y);
                if (c->dt == CF_DT_F32) {
                    float f = (float)v;
                    memcpy(buf + k * es, &f, 4);
                } else if (c->dt == CF_DT_U16) {
                    uint16_t u = (uint16_t)v;
                    memcpy(buf + k * es, &u, 2);
                } else {
                    buf[k] = (uint8_t)v;
                }
            }
    for (uint32_t y = 0; y < th; y++)
        for (uint32_t x = 0; x < tw; x++)
            m[y * tw + x] = valid_px(tx * T + x, ty * T + y) ? 255 : 0;
    return k * es;
}

static cf_writer_options opts(const tcase *c) {
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = c->W;
    o.height = c->H;
    o.tile_size = c->T;
    o.bands = c->bands;
    o.dtype = c->dt;
    o.compression = c->comp;
    o.overview_resampling = c->rs;
    o.mask = c->mask;
    o.has_nodata = c->has_nodata;
    o.nodata = c->nodata;
    return o;
}

/* Rows of tiles [ty0, ty1) into w (tile (1, 1) left sparse). */
static void write_rows(cf_writer *w, const tcase *c, uint32_t ty0, uint32_t ty1) {
    cf_error err;
    uint32_t ntx, nty;
    cf_writer_tiles(w, &ntx, &nty);
    uint8_t *buf = malloc((size_t)c->T * c->T * c->bands * 8), *m = malloc((size_t)c->T * c->T);
    for (uint32_t ty = ty0; ty < ty1; ty++)
        for (uint32_t tx = 0; tx < ntx; tx++) {
            if (tx == 1 && ty == 1) continue;
            size_t n = fill(c, tx, ty, buf, m);
            CHECK((c->mask ? cf_writer_write_tile_masked(w, tx, ty, buf, n, m, &err)
                           : cf_writer_write_tile(w, tx, ty, buf, n, &err)) == CF_OK);
        }
    free(buf);
    free(m);
}

static uint8_t *read_at(int fd, uint64_t off, size_t n) {
    uint8_t *b = malloc(n ? n : 1);
    if (b && n && pread(fd, b, n, (off_t)off) != (ssize_t)n) {
        free(b);
        return NULL;
    }
    return b;
}

/* Share k's tiles of rows [ty0, ty1) of `level` from its file into the
 * assembling writer. */
static void copy_tiles(cf_writer *out, const char *path, int mask, int level, uint32_t ty0,
                       uint32_t ty1) {
    cf_error err;
    cf_cog *cog = NULL;
    CHECK(cf_cog_open(NULL, path, &cog, &err) == CF_OK);
    int fd = open(path, O_RDONLY);
    if (!cog || fd < 0) return;
    cf_level_info li;
    CHECK(cf_cog_level_info(cog, level, &li, &err) == CF_OK);
    uint32_t ntx = (li.width + li.tile_width - 1) / li.tile_width;
    for (uint32_t ty = ty0; ty < ty1; ty++)
        for (uint32_t tx = 0; tx < ntx; tx++) {
            cf_chunk_info ci, mi;
            memset(&mi, 0, sizeof mi);
            uint64_t i = (uint64_t)ty * ntx + tx;
            CHECK(cf_cog_chunk_info(cog, level, i, &ci, &err) == CF_OK);
            if (mask) CHECK(cf_cog_mask_chunk_info(cog, level, i, &mi, &err) == CF_OK);
            uint8_t *b = read_at(fd, ci.offset, ci.byte_count);
            uint8_t *mb = read_at(fd, mi.offset, mi.byte_count);
            CHECK(cf_writer_write_encoded_tile_at(out, level, tx, ty, b, ci.byte_count, mb,
                                                  mi.byte_count, &err) == CF_OK);
            free(b);
            free(mb);
        }
    close(fd);
    cf_cog_close(cog);
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb, ca, cb;
    long n = 0;
    while (same) {
        ca = fgetc(fa);
        cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF) break;
        n++;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same && n > 0;
}

#define MAX_SHARES 64

static uint8_t *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        b = len > 0 ? malloc((size_t)len) : NULL;
        if (b && fseek(f, 0, SEEK_SET) == 0 && fread(b, 1, (size_t)len, f) == (size_t)len)
            *n = (size_t)len;
    }
    if (f) fclose(f);
    return b;
}

/* The shares' tiles put where a layout writer (layout_only) says, after
 * its header, as processes uploading their own parts of one object do:
 * the file the single writer made (ref), byte for byte. */
static void layout_case(const tcase *c, const cf_writer_options *o, int nshares,
                        char sp[][256], cf_writer *const *sw, uint32_t tr[][24][2], int nlev,
                        const char *ref) {
    cf_error err;
    cf_writer_options lo = *o;
    lo.overviews_given = 1;
    lo.layout_only = 1;
    cf_writer *lw = NULL;
    CHECK(cf_writer_open("s3://never/written.tif", &lo, &lw, &err) == CF_OK);
    cf_cog *rc = NULL;
    CHECK(cf_cog_open(NULL, ref, &rc, &err) == CF_OK);
    if (!lw || !rc) return;
    const size_t m = c->mask ? 2 : 1;
    size_t base[24], ntx[24], n = 0;
    for (int l = 0; l < nlev; l++) {
        cf_level_info li;
        CHECK(cf_cog_level_info(rc, l, &li, &err) == CF_OK);
        ntx[l] = (li.width + li.tile_width - 1) / li.tile_width;
        base[l] = n;
        n += m * ntx[l] * ((li.height + li.tile_height - 1) / li.tile_height);
    }
    cf_cog_close(rc);
    uint64_t *sizes = calloc(n, 8), *offs = calloc(n, 8), *from = calloc(n, 8);
    int *share = calloc(n, sizeof *share);
    for (int k = 0; k < nshares; k++) {
        cf_cog *cog = NULL;
        if (!sw[k] || cf_cog_open(NULL, sp[k], &cog, &err) != CF_OK) continue;
        for (int l = 0; l < nlev; l++)
            for (size_t i = tr[k][l][0] * ntx[l]; i < tr[k][l][1] * ntx[l]; i++)
                for (size_t j = 0; j < m; j++) {
                    cf_chunk_info ci;
                    CHECK((j ? cf_cog_mask_chunk_info(cog, l, i, &ci, &err)
                             : cf_cog_chunk_info(cog, l, i, &ci, &err)) == CF_OK);
                    size_t x = base[l] + m * i + j;
                    sizes[x] = ci.byte_count;
                    from[x] = ci.offset;
                    share[x] = k;
                }
        cf_cog_close(cog);
    }
    const void *hdr = NULL;
    size_t hn = 0, total = 0;
    CHECK(cf_writer_layout(lw, sizes, n, offs, &hdr, &hn, &err) == CF_OK);
    for (size_t x = 0; x < n; x++) total += sizes[x];
    uint8_t *img = calloc(hn + total + 1, 1);
    if (hdr) memcpy(img, hdr, hn);
    for (size_t x = 0; x < n; x++) {
        if (!sizes[x]) {
            CHECK(offs[x] == 0);
            continue;
        }
        CHECK(offs[x] >= hn && offs[x] + sizes[x] <= hn + total);
        int fd = open(sp[share[x]], O_RDONLY);
        uint8_t *b = read_at(fd, from[x], sizes[x]);
        if (b && offs[x] + sizes[x] <= hn + total) memcpy(img + offs[x], b, sizes[x]);
        free(b);
        close(fd);
    }
    CHECK(cf_writer_close(lw, &err) == CF_OK);
    size_t rn = 0;
    uint8_t *want = file_bytes(ref, &rn);
    CHECK(rn == hn + total && want && !memcmp(want, img, rn));
    free(want);
    free(img);
    free(sizes);
    free(offs);
    free(from);
    free(share);
}

/* The image of case c in `nshares` shares, assembled, against one writer. */
static void run_case(const tcase *c, int nshares) {
    cf_error err;
    char ref[256], outp[256], sp[MAX_SHARES][256];
    snprintf(ref, sizeof ref, "%s/ref.tif", dir);
    snprintf(outp, sizeof outp, "%s/out.tif", dir);
    cf_writer_options o = opts(c);
    cf_writer *w = NULL;
    CHECK(cf_writer_open(ref, &o, &w, &err) == CF_OK);
    if (!w) return;
    uint32_t ntx, nty;
    cf_writer_tiles(w, &ntx, &nty);
    const int nlev = cf_writer_levels(w);
    write_rows(w, c, 0, nty);
    CHECK(cf_writer_close(w, &err) == CF_OK);

    cf_writer *sw[MAX_SHARES] = {0};
    uint32_t r0[MAX_SHARES], rn[MAX_SHARES], tr[MAX_SHARES][24][2];
    uint32_t at = 0;
    for (int k = 0; k < nshares; k++) {
        rn[k] = nty / (uint32_t)nshares + ((uint32_t)k < nty % (uint32_t)nshares);
        r0[k] = at;
        at += rn[k];
        snprintf(sp[k], sizeof sp[k], "%s/share%d.tif", dir, k);
        if (!rn[k]) continue; /* (an empty share has no writer) */
        cf_writer_options so = o;
        so.share_row0 = r0[k];
        so.share_rows = rn[k];
        CHECK(cf_writer_open(sp[k], &so, &sw[k], &err) == CF_OK);
        if (!sw[k]) return;
        write_rows(sw[k], c, r0[k], r0[k] + rn[k]);
        CHECK(cf_writer_share_build(sw[k], &err) == CF_OK);
    }
    const void *carry = NULL;
    size_t carry_n = 0;
    for (int k = 0; k < nshares; k++) {
        if (!sw[k]) continue; /* an empty share passes the carry on */
        const void *out = NULL;
        size_t out_n = 0;
        cf_status s = cf_writer_share_carry(sw[k], carry, carry_n, &out, &out_n, &err);
        if (s) fprintf(stderr, "share %d: %s\n", k, err.msg);
        CHECK(s == CF_OK);
        carry = out;
        carry_n = out_n;
        for (int l = 0; l < nlev; l++)
            CHECK(cf_writer_share_tiles(sw[k], l, &tr[k][l][0], &tr[k][l][1], &err) == CF_OK);
    }
    /* every row of tiles of every level made by exactly one share */
    for (int l = 0; l < nlev; l++) {
        uint32_t next = 0;
        for (int k = 0; k < nshares; k++)
            if (sw[k] && tr[k][l][1] > tr[k][l][0]) {
                CHECK(tr[k][l][0] == next);
                next = tr[k][l][1];
            }
        cf_cog *rc = NULL;
        cf_level_info li;
        CHECK(cf_cog_open(NULL, ref, &rc, &err) == CF_OK);
        if (rc && cf_cog_level_info(rc, l, &li, &err) == CF_OK)
            CHECK(next == (li.height + li.tile_height - 1) / li.tile_height);
        cf_cog_close(rc);
    }
    for (int k = 0; k < nshares; k++)
        if (sw[k]) CHECK(cf_writer_close(sw[k], &err) == CF_OK);
    layout_case(c, &o, nshares, sp, sw, tr, nlev, ref);

    cf_writer_options ao = o;
    ao.overviews_given = 1;
    cf_writer *aw = NULL;
    CHECK(cf_writer_open(outp, &ao, &aw, &err) == CF_OK);
    if (!aw) return;
    for (int k = 0; k < nshares; k++)
        for (int l = 0; sw[k] && l < nlev; l++)
            copy_tiles(aw, sp[k], c->mask, l, tr[k][l][0], tr[k][l][1]);
    CHECK(cf_writer_close(aw, &err) == CF_OK);
    int same = same_file(ref, outp);
    if (!same)
        fprintf(stderr, "case %ux%u T%u dtype %d rs %d mask %d, %d shares: differs\n", c->W,
                c->H, c->T, (int)c->dt, (int)c->rs, c->mask, nshares);
    CHECK(same);
    unlink(ref);
    unlink(outp);
    for (int k = 0; k < nshares; k++) unlink(sp[k]);
}

/* What a share writer refuses, and a carry that does not fit. */
static void test_refusals(void) {
    cf_error err;
    char p[256], q[256];
    snprintf(p, sizeof p, "%s/r.tif", dir);
    snprintf(q, sizeof q, "%s/q.tif", dir);
    tcase c = {200, 300, 64, 1, CF_DT_U16, 8, CF_RS_AVERAGE, 0, 0, 0};
    cf_writer_options o = opts(&c);
    cf_writer *w = NULL;
    o.share_row0 = 4;
    o.share_rows = 2; /* 5 rows of tiles */
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_E_ARG && !w);
    CHECK(strstr(err.msg, "outside") != NULL);
    o.share_row0 = 1;
    CHECK(cf_writer_open("s3://bucket/x.tif", &o, &w, &err) == CF_E_ARG && !w);
    o.mask = 1;
    o.overview_resampling = CF_RS_NEAREST;
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_E_UNSUPPORTED && !w);
    o.mask = 0;
    o.overview_resampling = CF_RS_AVERAGE;
    o.overviews_given = 1;
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_E_ARG && !w);
    o.overviews_given = 0;
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_OK);
    if (!w) return;
    uint8_t buf[64 * 64 * 2] = {0};
    CHECK(cf_writer_write_tile(w, 0, 0, buf, sizeof buf, &err) == CF_E_ARG); /* row 0 */
    CHECK(cf_writer_write_tile(w, 0, 1, buf, sizeof buf, &err) == CF_OK);
    const void *out;
    size_t n;
    CHECK(cf_writer_share_carry(w, NULL, 0, &out, &n, &err) == CF_E_STATE); /* build first */
    CHECK(cf_writer_share_build(w, &err) == CF_OK);
    CHECK(cf_writer_write_tile(w, 1, 1, buf, sizeof buf, &err) == CF_E_STATE);
    CHECK(cf_writer_share_carry(w, NULL, 0, &out, &n, &err) == CF_E_ARG); /* not the first */
    /* a carry of another image, a short one, a failed share's */
    cf_writer_options o2 = opts(&c);
    o2.width = 201;
    o2.share_rows = 1;
    cf_writer *w2 = NULL;
    CHECK(cf_writer_open(q, &o2, &w2, &err) == CF_OK);
    if (w2) {
        CHECK(cf_writer_share_build(w2, &err) == CF_OK);
        const void *c2;
        size_t n2;
        CHECK(cf_writer_share_carry(w2, NULL, 0, &c2, &n2, &err) == CF_OK);
        CHECK(cf_writer_share_carry(w, c2, n2, &out, &n, &err) == CF_E_FORMAT);
        CHECK(strstr(err.msg, "does not fit") != NULL);
        cf_writer_abort(w2);
    }
    cf_writer_abort(w);
    o.share_row0 = 1;
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_OK);
    if (!w) return;
    CHECK(cf_writer_share_build(w, &err) == CF_OK);
    /* a carry of shares that end elsewhere (a gap), and of an image of
     * another data type with the same bytes a pixel */
    {
        cf_writer_options o3 = opts(&c);
        o3.share_rows = 1; /* row 0; w takes rows 1, 2 */
        char r3[256];
        snprintf(r3, sizeof r3, "%s/r3.tif", dir);
        cf_writer *w3 = NULL;
        const void *c3;
        size_t n3;
        CHECK(cf_writer_open(r3, &o3, &w3, &err) == CF_OK);
        if (w3 && cf_writer_share_build(w3, &err) == CF_OK &&
            cf_writer_share_carry(w3, NULL, 0, &c3, &n3, &err) == CF_OK) {
            cf_writer_options o4 = opts(&c);
            o4.share_row0 = 2;
            o4.share_rows = 1;
            cf_writer *w4 = NULL;
            CHECK(cf_writer_open(q, &o4, &w4, &err) == CF_OK);
            if (w4) {
                CHECK(cf_writer_share_build(w4, &err) == CF_OK);
                CHECK(cf_writer_share_carry(w4, c3, n3, &out, &n, &err) == CF_E_FORMAT);
                CHECK(strstr(err.msg, "ending at row of tiles 1; this share begins at 2"));
                cf_writer_abort(w4);
            }
            o4 = opts(&c);
            o4.dtype = CF_DT_I16;
            o4.share_row0 = 1;
            o4.share_rows = 1;
            CHECK(cf_writer_open(q, &o4, &w4, &err) == CF_OK);
            if (w4) {
                CHECK(cf_writer_share_build(w4, &err) == CF_OK);
                CHECK(cf_writer_share_carry(w4, c3, n3, &out, &n, &err) == CF_E_FORMAT);
                CHECK(strstr(err.msg, "data type") != NULL);
                cf_writer_abort(w4);
            }
        }
        cf_writer_abort(w3);
        /* an empty carry is none: the first share takes it */
        CHECK(cf_writer_open(r3, &o3, &w3, &err) == CF_OK);
        if (w3) {
            CHECK(cf_writer_share_build(w3, &err) == CF_OK);
            CHECK(cf_writer_share_carry(w3, "", 0, &c3, &n3, &err) == CF_OK);
            cf_writer_abort(w3);
        }
    }
    uint8_t junk[20] = {'C', 'F', 'C', 'Y'};
    CHECK(cf_writer_share_carry(w, junk, sizeof junk, &out, &n, &err) == CF_E_FORMAT);
    cf_writer_abort(w);
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_OK);
    if (!w) return;
    CHECK(cf_writer_share_build(w, &err) == CF_OK);
    const void *f;
    size_t fn;
    cf_writer_share_failed(&f, &fn);
    CHECK(cf_writer_share_carry(w, f, fn, &out, &n, &err) == CF_E_STATE);
    CHECK(strstr(err.msg, "failed") != NULL);
    CHECK(cf_writer_close(w, &err) == CF_E_STATE); /* failed: nothing written */
    CHECK(access(p, F_OK) != 0);
    /* a writer that makes its overviews takes no overview tile */
    o = opts(&c);
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_OK);
    if (!w) return;
    CHECK(cf_writer_write_encoded_tile_at(w, 1, 0, 0, buf, 10, NULL, 0, &err) == CF_E_ARG);
    uint64_t sz[4] = {1, 2, 3, 4}, of[4];
    const void *h;
    size_t hn;
    CHECK(cf_writer_layout(w, sz, 4, of, &h, &hn, &err) == CF_E_STATE); /* not a layout one */
    cf_writer_abort(w);
    /* a layout writer: only with overviews_given, takes no tile, opens nothing */
    o.layout_only = 1;
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_E_ARG);
    o.overviews_given = 1;
    CHECK(cf_writer_open(p, &o, &w, &err) == CF_OK);
    if (!w) return;
    CHECK(cf_writer_write_encoded_tile(w, 0, 0, buf, 10, NULL, 0, &err) == CF_E_STATE);
    CHECK(cf_writer_layout(w, sz, 4, of, &h, &hn, &err) == CF_E_ARG); /* not its count */
    CHECK(cf_writer_close(w, &err) == CF_OK);
    CHECK(access(p, F_OK) != 0);
    char spool[300];
    snprintf(spool, sizeof spool, "%s.cogfeed-spool", p);
    CHECK(access(spool, F_OK) != 0);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    const double nan = NAN;
    const tcase cases[] = {
        /* odd sizes at many levels, 2 bands */
        {333, 1001, 32, 2, CF_DT_U16, 8, CF_RS_AVERAGE, 0, 0, 0},
        /* tiny tiles: deep levels over many shares; NaN nodata */
        {500, 777, 16, 1, CF_DT_F32, 50000, CF_RS_AVERAGE, 0, 1, nan},
        /* classes by mode with a mask */
        {301, 613, 16, 1, CF_DT_U8, 8, CF_RS_MODE, 1, 1, 255},
        /* a mask with average, nodata 0 */
        {270, 515, 32, 1, CF_DT_U16, 8, CF_RS_AVERAGE, 1, 1, 0},
        /* nearest */
        {129, 387, 16, 3, CF_DT_U8, 8, CF_RS_NEAREST, 0, 0, 0},
    };
    const int shares[] = {1, 2, 3, 7, 40};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t k = 0; k < sizeof shares / sizeof *shares; k++)
            run_case(&cases[i], shares[k]);
    test_refusals();
    rmdir(dir);
    return CF_TEST_END();
}
