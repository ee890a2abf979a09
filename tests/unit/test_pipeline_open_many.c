/*
 * test_pipeline_open_many.c - cf_cog_open_many on local files (the
 * remote half, concurrency and the header cache, is
 * tests/python/test_open_many.py against nginx): every req gets its own
 * status, cog and error naming its file; one failing file does not lose
 * the others; the overall status is the first failure's, the message
 * says how many failed; the files open as cf_cog_open opens them, also
 * when headers take several reads (header_bytes 64) and there are more
 * files than slots (max_inflight 2: slots are reused).
 */
#include "cf_test.h"
#include "test_tiff_writer.h"

#include "cogfeed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[400];

/* A file of n IFDs (a full-resolution image and n - 1 overviews) of
 * width w, written under dir as name; returns its path (static). */
static const char *write_tiff(const char *name, uint32_t w, int n, int bytes_cut) {
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    tw t;
    tw_init(&t, false, false);
    for (int i = 0; i < n; i++) {
        tw_image im = tw_image_default(w >> i, (w >> i) / 2 + 1);
        im.tw = im.th = 16;
        im.subfile = i ? 1 : 0;
        tw_image_ifd(&t, &im);
    }
    size_t len;
    const uint8_t *b = tw_finish(&t, &len);
    if (bytes_cut) len = (size_t)bytes_cut;
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(b, 1, len, f) == len);
    if (f) fclose(f);
    tw_free(&t);
    return p;
}

static void same_info(cf_cog *a, cf_cog *b) {
    cf_cog_info x, y;
    cf_cog_get_info(a, &x);
    cf_cog_get_info(b, &y);
    CHECK(x.width == y.width && x.height == y.height && x.count == y.count);
    CHECK(x.dtype == y.dtype && x.tile_width == y.tile_width && x.nlevels == y.nlevels);
    CHECK(x.file_size == y.file_size && x.header_bytes == y.header_bytes);
    CHECK(x.header_requests == y.header_requests);
    CHECK(!strcmp(cf_cog_name(a), cf_cog_name(b)));
}

static void test_mix(void) {
    enum { N = 9 };
    const char *urls[N];
    urls[0] = write_tiff("om_a.tif", 200, 3, 0);
    urls[1] = write_tiff("om_b.tif", 64, 1, 0);
    urls[2] = "/no/such/dir/om_missing.tif";
    urls[3] = write_tiff("om_c.tif", 512, 5, 0);
    urls[4] = write_tiff("om_cut.tif", 200, 3, 40); /* IFDs cut off */
    urls[5] = NULL;
    char text[512];
    snprintf(text, sizeof text, "%s/om_text.tif", dir);
    FILE *f = fopen(text, "w");
    CHECK(f && fputs("plain words, not a TIFF\n", f) >= 0);
    if (f) fclose(f);
    urls[6] = text;
    urls[7] = write_tiff("om_d.tif", 128, 2, 0);
    urls[8] = write_tiff("om_e.tif", 96, 1, 0);

    /* header_bytes 64: every good file's IFDs take reads of their own;
     * max_inflight 2: two files at a time, the slots reused */
    cf_io_options o;
    cf_io_options_init(&o);
    o.header_bytes = 64;
    o.max_inflight = 2;
    cf_io *io = NULL;
    CHECK(cf_io_new(&o, &io, NULL) == CF_OK);
    cf_open_req reqs[N];
    cf_error errs[N];
    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < N; i++) {
        reqs[i].url = urls[i];
        reqs[i].err = &errs[i];
        reqs[i].status = CF_OK; /* overwritten */
        reqs[i].cog = (cf_cog *)&reqs; /* overwritten */
    }
    cf_error err;
    cf_status st = cf_cog_open_many(io, reqs, N, NULL, &err);
    CHECK(st == CF_E_NOTFOUND); /* urls[2]'s, the first failure */
    CHECK(strstr(err.msg, "4 of 9 files failed to open, the first: ") == err.msg);
    CHECK(strstr(err.msg, "om_missing.tif") != NULL);
    int bad[N] = {0, 0, 1, 0, 1, 1, 1, 0, 0};
    for (int i = 0; i < N; i++) {
        if (bad[i]) {
            CHECK(reqs[i].cog == NULL && reqs[i].status != CF_OK);
            CHECK(errs[i].code == reqs[i].status);
            if (urls[i]) CHECK(strstr(errs[i].msg, strrchr(urls[i], '/') + 1) != NULL);
            continue;
        }
        CHECK(reqs[i].status == CF_OK && reqs[i].cog != NULL);
        if (!reqs[i].cog) continue;
        cf_cog_info in;
        cf_cog_get_info(reqs[i].cog, &in);
        CHECK(in.header_requests >= 2); /* header_bytes 64: more reads */
        /* the same file as cf_cog_open opens it, with the same io settings */
        cf_cog *one = NULL;
        CHECK(cf_cog_open(io, urls[i], &one, NULL) == CF_OK);
        if (one) same_info(reqs[i].cog, one);
        cf_cog_close(one);
        cf_cog_close(reqs[i].cog);
    }
    CHECK(reqs[4].status == CF_E_FORMAT && reqs[5].status == CF_E_ARG);
    CHECK(reqs[6].status == CF_E_FORMAT);

    /* nothing to open; bad arguments */
    CHECK(cf_cog_open_many(io, NULL, 0, NULL, NULL) == CF_OK);
    CHECK(cf_cog_open_many(io, NULL, 3, NULL, &err) == CF_E_ARG);
    /* one file: err is that file's message, with no count */
    cf_open_req r = {urls[2], NULL, CF_OK, NULL};
    CHECK(cf_cog_open_many(io, &r, 1, NULL, &err) == CF_E_NOTFOUND);
    CHECK(strstr(err.msg, "files failed") == NULL && strstr(err.msg, "om_missing.tif"));
    /* no io: each file has its own, as cf_cog_open */
    cf_open_req two[2] = {{urls[0], NULL, CF_OK, NULL}, {urls[1], NULL, CF_OK, NULL}};
    CHECK(cf_cog_open_many(NULL, two, 2, NULL, NULL) == CF_OK);
    CHECK(two[0].cog && two[1].cog);
    cf_cog_close(two[0].cog);
    cf_cog_close(two[1].cog);
    cf_io_free(io);
}

int main(void) {
    const char *d = getenv("CF_TEST_DATA");
    snprintf(dir, sizeof dir, "%s", d && *d ? d : "/tmp");
    mkdir(dir, 0755);
    test_mix();
    return CF_TEST_END();
}
