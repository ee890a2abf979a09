/*
 * test_tiff_malformed.c - the parser on every file that
 * tests/python/make_malformed.py crafts (the same files the Python test
 * feeds the whole reader).  Files marked "open" must fail to parse with a
 * message that starts with the file name; the others have valid headers
 * (their damage is in tile data or optional tags) and must parse.  Each
 * file is parsed through the need-bytes protocol with a 16-byte first read
 * and with the size unknown, as a remote open would.
 */
#include "tiff/tiff.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cf_test.h"

/* Remote-style parse: 16 bytes first, size learnt from that response. */
static cf_status parse_remote(const uint8_t *d, size_t len, const char *name,
                              cf_error *err) {
    cf__tiff_parser *p = cf__tiff_parser_new(UINT64_MAX, name);
    cf__tiff *t = NULL;
    cf_status st = cf__tiff_parser_add(p, 0, d, len < 16 ? len : 16, err);
    cf__tiff_parser_set_size(p, len);
    for (int round = 0; st == CF_OK && round < 100; round++) {
        uint64_t off, nl;
        st = cf__tiff_parser_run(p, &t, &off, &nl, err);
        if (st != CF__NEED_BYTES) break;
        if (off >= len || nl > len - off) {
            st = CF_E_STATE;
            break;
        }
        st = cf__tiff_parser_add(p, off, d + off, (size_t)nl, err);
    }
    cf__tiff_free(t);
    cf__tiff_parser_free(p);
    return st;
}

/* The file mapped read-only (*len bytes; NULL when it cannot be read).
 * Mapped rather than read: the crafted index files are 256 MiB, mostly a
 * hole, and parsing touches only their first pages. */
static const uint8_t empty_file[1];
static const uint8_t *map_file(const char *path, size_t *len) {
    *len = 0;
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0) return NULL;
    const uint8_t *d = NULL;
    if (fstat(fd, &st) == 0) {
        *len = (size_t)st.st_size;
        d = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : empty_file;
        if (d == MAP_FAILED) d = NULL;
    }
    close(fd);
    return d;
}

int main(void) {
    const char *src = getenv("CF_SOURCE_DIR");
    const char *base = getenv("CF_TEST_DATA");
    char dir[512], cmd[1400], list[600];
    snprintf(dir, sizeof dir, "%s/tiff_malformed",
             base && *base ? base : "/tmp");
    if (base && *base) mkdir(base, 0755);
    snprintf(list, sizeof list, "%s.list", dir);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/tests/python/make_malformed.py %s > %s",
             src && *src ? src : ".", dir, list);
    CHECK(system(cmd) == 0);
    FILE *f = fopen(list, "r");
    CHECK(f != NULL);
    if (!f) return CF_TEST_END();
    char line[512], name[128], expect[16];
    int item, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%127s item %d %15s", name, &item, expect) != 3)
            continue;
        n++;
        char path[800], fname[200];
        snprintf(fname, sizeof fname, "malformed_%s.tif", name);
        snprintf(path, sizeof path, "%s/%s", dir, fname);
        size_t len = 0;
        const uint8_t *d = map_file(path, &len);
        CHECK(d != NULL); /* every listed fixture exists (empty ones too) */
        if (!d) continue;
        cf__tiff *t = NULL;
        cf_error err;
        cf__err_clear(&err);
        cf_status st = cf__tiff_parse_memory(d, len, fname, &t, &err);
        cf_error err2;
        cf__err_clear(&err2);
        cf_status st2 = parse_remote(d, len, fname, &err2);
        int ok;
        if (!strcmp(expect, "open") && st == CF_OK && t &&
            t->ifds[0].ojpeg_status) {
            /* old-style JPEG the parser cannot lay out as libtiff does:
             * the IFD carries the refusal, which cf_cog_open's codec
             * check makes (test_malformed_tiff.py checks that) */
            ok = st2 == CF_OK && t->ifds[0].ojpeg_why[0];
        } else if (!strcmp(expect, "open")) {
            ok = st != CF_OK && st != CF__NEED_BYTES && t == NULL &&
                 !strncmp(err.msg, fname, strlen(fname)) && st2 == st;
        } else {
            ok = st == CF_OK && t != NULL && st2 == CF_OK;
        }
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  %s (item %d, %s): %d \"%s\" / remote %d \"%s\"\n",
                    name, item, expect, (int)st, err.msg, (int)st2, err2.msg);
        cf__tiff_free(t);
        if (len) munmap((void *)d, len);
    }
    fclose(f);
    CHECK(n >= 40);
    return CF_TEST_END();
}
