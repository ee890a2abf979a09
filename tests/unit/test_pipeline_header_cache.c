/*
 * test_pipeline_header_cache.c - the header cache's store and lookup, in
 * memory and on disk: a complete entry comes back byte for byte; an entry
 * recording had to leave ranges out of (a header scattered over more
 * ranges than are kept) is not stored, and replaces what was stored for
 * its URL, so that opening such a file does not copy and write it again
 * on every open.  An entry without an ETag stays in memory only (a later
 * process could not tell that the object changed); cf__hc_forget drops a
 * stale entry from both.
 */
#include "cf_test.h"
#include "pipeline/header_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

static int files_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static cf_hc_entry *entry(int nranges) {
    cf_hc_entry *e = cf__hc_entry_new();
    CHECK(e != NULL);
    e->size = 1 << 20;
    uint8_t buf[100];
    for (int i = 0; i < nranges; i++) {
        memset(buf, i, sizeof buf);
        cf_status st = cf__hc_add_range(e, (uint64_t)i * 1000, buf, sizeof buf);
        CHECK(st == (i < HC_MAX_RANGES ? CF_OK : CF_E_LIMIT));
    }
    CHECK(e->incomplete == (nranges > HC_MAX_RANGES));
    return e;
}

/* Rewrite the one entry file in dir as if written without an ETag:
 * magic(8) size(8) elen(4) etag(elen) rest -> elen 0, no etag. */
static void strip_etag(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    char path[4096] = "";
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint32_t elen;
    CHECK(n > 20 && n < sizeof buf);
    memcpy(&elen, buf + 16, 4);
    CHECK(elen > 0 && 20 + elen < n);
    uint32_t zero = 0;
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(buf, 1, 16, f);
    fwrite(&zero, 4, 1, f);
    fwrite(buf + 20 + elen, 1, n - 20 - elen, f);
    fclose(f);
}

/* What a fresh io (another process) finds on disk for url. */
static int on_disk(const cf_io_options *o, const char *url) {
    cf_io *io = NULL;
    CHECK(cf_io_new(o, &io, NULL) == CF_OK);
    cf_hc_entry *e = io ? cf__hc_lookup(io, url) : NULL;
    int found = e != NULL;
    cf__hc_entry_free(e);
    cf_io_free(io);
    return found;
}

static void run(const char *dir) {
    cf_io_options o;
    cf_io_options_init(&o);
    o.header_cache_dir = dir;
    cf_io *io = NULL;
    CHECK(cf_io_new(&o, &io, NULL) == CF_OK);
    const char *url = "http://127.0.0.1:1/scene.tif?sig=SECRET";

    /* Scattered: not stored anywhere. */
    cf_hc_entry *big = entry(HC_MAX_RANGES + 6);
    cf__hc_store(io, url, big, "\"e1\"");
    CHECK(cf__hc_lookup(io, url) == NULL);
    CHECK(files_in(dir) == 0);

    /* Complete: back from memory, and from disk through a fresh io. */
    cf_hc_entry *ok = entry(HC_MAX_RANGES);
    cf__hc_store(io, url, ok, "\"e2\"");
    CHECK(files_in(dir) == 1);
    cf_hc_entry *got = cf__hc_lookup(io, url);
    CHECK(got && got->nranges == HC_MAX_RANGES && got->size == ok->size &&
          got->etag && !strcmp(got->etag, "\"e2\"") && !got->incomplete);
    for (size_t i = 0; got && i < got->nranges; i++)
        CHECK(got->ranges[i].off == i * 1000 && got->ranges[i].len == 100 &&
              got->ranges[i].data[99] == (uint8_t)i);
    cf__hc_entry_free(got);
    cf_io *io2 = NULL;
    CHECK(cf_io_new(&o, &io2, NULL) == CF_OK);
    got = cf__hc_lookup(io2, url);
    CHECK(got && got->nranges == HC_MAX_RANGES && !strcmp(got->etag, "\"e2\""));
    cf__hc_entry_free(got);

    /* The object changed and its header now overflows: the old entry is
     * dropped from memory and disk rather than kept beside a re-read. */
    cf__hc_store(io, url, big, "\"e3\"");
    CHECK(cf__hc_lookup(io, url) == NULL);
    CHECK(files_in(dir) == 0);

    /* No ETag: memory only. */
    cf__hc_store(io, url, ok, NULL);
    got = cf__hc_lookup(io, url);
    CHECK(got && got->nranges == HC_MAX_RANGES && !got->etag);
    cf__hc_entry_free(got);
    CHECK(files_in(dir) == 0);
    CHECK(!on_disk(&o, url));

    /* Stale: forgotten in memory and on disk. */
    cf__hc_store(io, url, ok, "\"e4\"");
    CHECK(files_in(dir) == 1 && on_disk(&o, url));
    cf__hc_forget(io, url);
    CHECK(cf__hc_lookup(io, url) == NULL);
    CHECK(files_in(dir) == 0 && !on_disk(&o, url));

    /* A file without an ETag (as older versions wrote them) is not used. */
    cf__hc_store(io, url, ok, "\"e5\"");
    CHECK(files_in(dir) == 1 && on_disk(&o, url));
    strip_etag(dir);
    CHECK(files_in(dir) == 1 && !on_disk(&o, url));

    cf__hc_entry_free(big);
    cf__hc_entry_free(ok);
    cf_io_free(io2);
    cf_io_free(io);
}

int main(void) {
    char tmp[] = "/tmp/cf_hc_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    char dir[64];
    snprintf(dir, sizeof dir, "%s/hc", tmp);
    run(dir);
    rmdir(dir);
    rmdir(tmp);
    return CF_TEST_END();
}
