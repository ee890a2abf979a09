/*
 * test_pipeline_header_cache.c - the header cache, in memory and on disk.
 *
 * Store and lookup: a complete entry comes back byte for byte (from memory,
 * and from disk through a fresh io); an entry recording had to leave
 * ranges out of is not stored and replaces what was stored; an entry
 * without an ETag stays in memory only; cf__hc_forget drops both.
 *
 * Keys: a SAS or presigned URL's rotating parameters do not make a new
 * entry, a plain server's own query parameters do; two endpoints, two
 * access keys, two Azure accounts never share an entry.
 *
 * The folder and file rules (docs/reader.md, "Header cache security"),
 * with another user simulated by chown (the suite runs as root; the
 * checks that need it are skipped otherwise): a folder owned by another
 * uid, a group-writable one and another user's symbolic link are refused
 * with one message on stderr; a new folder is 0700, an entry 0600; a
 * symbolic link at an entry's name is neither read nor followed; an entry
 * owned by another uid is ignored; 200 random bit flips are all caught;
 * the least recently used entries are evicted past the cap.
 */
#include "cf_test.h"
#include "pipeline/header_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OTHER_UID 4242 /* "another user" */


static int files_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Path of the one entry file in dir ("" if none). */
static void the_entry(const char *dir, char *out, size_t n) {
    out[0] = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".cfh") && !strstr(e->d_name, ".tmp"))
            snprintf(out, n, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
}

static cf__hc_entry *entry(int nranges) {
    cf__hc_entry *e = cf__hc_entry_new();
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

static cf__src *src_of(cf_io *io, const char *url) {
    cf__src *s = NULL;
    cf_error err = {0};
    cf_status st = cf__src_new(io, url, &s, &err);
    CHECK(st == CF_OK);
    if (st) fprintf(stderr, "%s: %s\n", url, err.msg);
    return s;
}

static cf_io *io_with(const char *dir, uint64_t cap) {
    cf_io_options o;
    cf_io_options_init(&o);
    o.header_cache_dir = dir;
    o.header_cache_max_bytes = cap;
    cf_io *io = NULL;
    CHECK(cf_io_new(&o, &io, NULL) == CF_OK);
    return io;
}

/* What a fresh io (another process) finds on disk for url. */
static int on_disk(const char *dir, const char *url) {
    cf_io *io = io_with(dir, 0);
    cf__src *s = src_of(io, url);
    cf__hc_entry *e = s ? cf__hc_lookup(io, s) : NULL;
    int found = e != NULL;
    cf__hc_entry_free(e);
    cf__src_free(s);
    cf_io_free(io);
    return found;
}

/* Store `e` for url through a fresh io. */
static void put(const char *dir, uint64_t cap, const char *url,
                const cf__hc_entry *e, const char *etag) {
    cf_io *io = io_with(dir, cap);
    cf__src *s = src_of(io, url);
    if (s) cf__hc_store(io, s, e, etag);
    cf__src_free(s);
    cf_io_free(io);
}

static uint8_t *slurp(const char *path, size_t *n) {
    return cf_test_slurp(path, n);
}

static void spit(const char *path, const uint8_t *b, size_t n) {
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(write(fd, b, n) == (ssize_t)n);
        close(fd);
    }
}

/* Recompute an entry's trailing SHA-256, as a forger would. */
static void reseal(uint8_t *b, size_t n) { SHA256(b, n - 32, b + n - 32); }

static void basics(const char *dir) {
    cf_io *io = io_with(dir, 0);
    const char *url = "http://127.0.0.1:1/scene.tif?token=A";
    cf__src *src = src_of(io, url);

    /* Scattered: not stored anywhere. */
    cf__hc_entry *big = entry(HC_MAX_RANGES + 6);
    cf__hc_store(io, src, big, "\"e1\"");
    CHECK(cf__hc_lookup(io, src) == NULL);
    CHECK(files_in(dir) == 0);

    /* Complete: back from memory, and from disk through a fresh io. */
    cf__hc_entry *ok = entry(HC_MAX_RANGES);
    cf__hc_store(io, src, ok, "\"e2\"");
    CHECK(files_in(dir) == 1);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    char path[4096];
    the_entry(dir, path, sizeof path);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 &&
          st.st_uid == geteuid());
    cf__hc_entry *got = cf__hc_lookup(io, src);
    CHECK(got && got->nranges == HC_MAX_RANGES && got->size == ok->size &&
          got->etag && !strcmp(got->etag, "\"e2\"") && !got->incomplete);
    for (size_t i = 0; got && i < got->nranges; i++)
        CHECK(got->ranges[i].off == i * 1000 && got->ranges[i].len == 100 &&
              got->ranges[i].data[99] == (uint8_t)i);
    cf__hc_entry_free(got);
    cf_io *io2 = io_with(dir, 0);
    cf__src *src2 = src_of(io2, url);
    got = cf__hc_lookup(io2, src2);
    CHECK(got && got->nranges == HC_MAX_RANGES && !strcmp(got->etag, "\"e2\""));
    cf__hc_entry_free(got);
    /* A plain server's own query parameter names another object. */
    CHECK(!on_disk(dir, "http://127.0.0.1:1/scene.tif?token=B"));
    CHECK(!on_disk(dir, "http://127.0.0.1:1/scene.tif"));

    /* The object changed and its header now overflows: the old entry is
     * dropped from memory and disk rather than kept beside a re-read. */
    cf__hc_store(io, src, big, "\"e3\"");
    CHECK(cf__hc_lookup(io, src) == NULL);
    CHECK(files_in(dir) == 0);

    /* No ETag: memory only. */
    cf__hc_store(io, src, ok, NULL);
    got = cf__hc_lookup(io, src);
    CHECK(got && got->nranges == HC_MAX_RANGES && !got->etag);
    cf__hc_entry_free(got);
    CHECK(files_in(dir) == 0);
    CHECK(!on_disk(dir, url));

    /* No ETag but a Last-Modified: on disk too, with its date (the
     * validator a later process checks the object with). */
    ok->last_modified = strdup("Mon, 01 Jan 2024 00:00:00 GMT");
    cf__hc_store(io, src, ok, NULL);
    CHECK(files_in(dir) == 1);
    cf_io *io3 = io_with(dir, 0);
    cf__src *src3 = src_of(io3, url);
    got = cf__hc_lookup(io3, src3);
    cf__src_free(src3);
    cf_io_free(io3);
    CHECK(got && !got->etag && got->last_modified &&
          !strcmp(got->last_modified, "Mon, 01 Jan 2024 00:00:00 GMT"));
    cf__hc_entry_free(got);
    cf__hc_forget(io, src);
    free(ok->last_modified);
    ok->last_modified = NULL;

    /* Stale: forgotten in memory and on disk. */
    cf__hc_store(io, src, ok, "\"e4\"");
    CHECK(files_in(dir) == 1 && on_disk(dir, url));
    cf__hc_forget(io, src);
    CHECK(cf__hc_lookup(io, src) == NULL);
    CHECK(files_in(dir) == 0 && !on_disk(dir, url));

    /* An entry without an ETag (sealed properly) is not used: it could
     * not be checked against the object by If-Match.  Layout: magic(8)
     * key(32) size(8) elen(4) etag lmlen(4) lm ... sha256(32). */
    cf__hc_store(io, src, ok, "\"e5\"");
    the_entry(dir, path, sizeof path);
    size_t n;
    uint8_t *b = slurp(path, &n);
    CHECK(b && n > 100);
    if (b) {
        uint32_t elen = (uint32_t)b[48] | (uint32_t)b[49] << 8;
        memmove(b + 52, b + 52 + elen, n - 52 - elen);
        n -= elen;
        memset(b + 48, 0, 4);
        reseal(b, n);
        spit(path, b, n);
        CHECK(!on_disk(dir, url));
        free(b);
    }
    cf__hc_forget(io, src);

    cf__hc_entry_free(big);
    cf__hc_entry_free(ok);
    cf__src_free(src2);
    cf__src_free(src);
    cf_io_free(io2);
    cf_io_free(io);
}

/* ---------------------------------------------------------------- keys */

static void stable(const char *url, const char *want, const char *want_who) {
    char who[256];
    char *s = cf__hc_stable_url(url, who, sizeof who);
    CHECK(s && !strcmp(s, want));
    CHECK(!strcmp(who, want_who));
    if (s && (strcmp(s, want) || strcmp(who, want_who)))
        fprintf(stderr, "  %s -> %s [%s]\n", url, s, who);
    free(s);
}

static void keys(const char *dir) {
    stable("https://a.blob.core.windows.net/c/x.tif?sv=2021-08-06&se=2030-01-01"
           "&sp=r&sr=b&sig=AAA%3D",
           "https://a.blob.core.windows.net/c/x.tif", "sas ");
    stable("https://h/x.tif?versionId=7&X-Amz-Algorithm=AWS4-HMAC-SHA256"
           "&X-Amz-Credential=AKIDEXAMPLE%2F20240101%2Fus-east-1%2Fs3%2Faws4_request"
           "&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600"
           "&X-Amz-SignedHeaders=host&X-Amz-Signature=abcdef#frag",
           "https://h/x.tif?versionId=7", "amz:AKIDEXAMPLE ");
    stable("https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256"
           "&X-Goog-Credential=sa%40p.iam.gserviceaccount.com%2F20240101%2Fauto"
           "&X-Goog-Signature=00",
           "https://storage.googleapis.com/b/o", "goog:sa%40p.iam.gserviceaccount.com ");
    stable("https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKID&Expires=1&Signature=x",
           "https://b.s3.amazonaws.com/k", "v2:AKID ");
    /* Without the rest of a SAS, "st" and "sp" are a server's own. */
    stable("http://h/render?st=1&sp=2", "http://h/render?st=1&sp=2", "");
    stable("http://h/x.tif?", "http://h/x.tif", "");

    cf__hc_entry *ok = entry(3);
    /* One SAS, rotated: one entry. */
    put(dir, 0, "https://acct.blob.core.windows.net/c/x.tif?sv=1&se=2030&sp=r&sig=ONE",
        ok, "\"s\"");
    CHECK(on_disk(dir, "https://acct.blob.core.windows.net/c/x.tif?sv=1&se=2031&sp=r&sig=TWO"));
    CHECK(files_in(dir) == 1);
    CHECK(!on_disk(dir, "https://other.blob.core.windows.net/c/x.tif?sv=1&se=2031&sp=r&sig=TWO"));

    /* S3: another endpoint or another access key id is another entry;
     * another secret of the same key id is not (the secret is not in the
     * key: rotating it keeps the cache). */
    setenv("AWS_ACCESS_KEY_ID", "AKIAONE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secret1", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
    put(dir, 0, "s3://bucket/x.tif", ok, "\"s3\"");
    CHECK(on_disk(dir, "s3://bucket/x.tif"));
    setenv("AWS_SECRET_ACCESS_KEY", "secret2", 1);
    CHECK(on_disk(dir, "s3://bucket/x.tif"));
    setenv("AWS_ACCESS_KEY_ID", "AKIATWO", 1);
    CHECK(!on_disk(dir, "s3://bucket/x.tif"));
    setenv("AWS_ACCESS_KEY_ID", "AKIAONE", 1);
    setenv("AWS_ENDPOINT_URL", "http://localhost:1", 1);
    CHECK(!on_disk(dir, "s3://bucket/x.tif"));
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
    CHECK(!on_disk(dir, "s3://other/x.tif"));
    CHECK(on_disk(dir, "s3://bucket/x.tif"));
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_ENDPOINT_URL");

    /* Azure: the same container and blob in two accounts. */
    setenv("AZURE_STORAGE_ACCOUNT", "acctone", 1);
    setenv("AZURE_STORAGE_ACCESS_KEY", "c2VjcmV0", 1);
    put(dir, 0, "az://c/x.tif", ok, "\"az\"");
    CHECK(on_disk(dir, "az://c/x.tif"));
    setenv("AZURE_STORAGE_ACCOUNT", "accttwo", 1);
    CHECK(!on_disk(dir, "az://c/x.tif"));
    unsetenv("AZURE_STORAGE_ACCOUNT");
    unsetenv("AZURE_STORAGE_ACCESS_KEY");
    cf__hc_entry_free(ok);
}

/* -------------------------------------------------------- folder rules */

/* Run f(dir) with stderr captured; returns how many times it said
 * `phrase`. */
static int said(void (*f)(const char *), const char *dir, const char *phrase) {
    char log[] = "/tmp/cf_hc_err_XXXXXX";
    int lfd = mkstemp(log);
    CHECK(lfd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(lfd, 2);
    f(dir);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(lfd);
    size_t n;
    char *t = (char *)cf_test_slurp(log, &n);
    unlink(log);
    int lines = 0;
    for (char *p = t; p && (p = strstr(p, phrase)); p++)
        lines++;
    if (t) fputs(t, stderr);
    free(t);
    return lines;
}

/* How many lines of f(dir) mention the folder's refusal. */
static int refusals_said(void (*f)(const char *), const char *dir) {
    return said(f, dir, "the on-disk header cache is off");
}

static const char *expect_why; /* substring the refusal must hold */

/* One io: two lookups and two stores; nothing may reach the folder. */
static void use_refused(const char *dir) {
    cf_io *io = io_with(dir, 0);
    cf__src *s = src_of(io, "http://127.0.0.1:1/r.tif");
    cf__hc_entry *ok = entry(2);
    for (int i = 0; i < 2; i++) {
        cf__hc_entry *got = cf__hc_lookup(io, s);
        CHECK((got != NULL) == (i == 1)); /* from memory after the store */
        cf__hc_entry_free(got);
        cf__hc_store(io, s, ok, "\"r\"");
    }
    const char *why = cf__hc_disk_refusal(io);
    CHECK(why && strstr(why, expect_why));
    if (why && !strstr(why, expect_why)) fprintf(stderr, "why: %s\n", why);
    cf__hc_entry_free(ok);
    cf__src_free(s);
    cf_io_free(io);
}

static void path_rules(const char *tmp);

static void folder_rules(const char *tmp) {
    char dir[256];
    /* Created 0700 with its missing parents. */
    snprintf(dir, sizeof dir, "%s/new/deeper/hc", tmp);
    cf__hc_entry *one = entry(1);
    put(dir, 0, "http://127.0.0.1:1/a.tif", one, "\"a\"");
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700 && files_in(dir) == 1);

    /* Group- and world-writable: refused, said once per io. */
    snprintf(dir, sizeof dir, "%s/groupw", tmp);
    mkdir(dir, 0700);
    chmod(dir, 0770);
    expect_why = "writable by its group";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(dir) == 0);
    chmod(dir, 01777);
    expect_why = "writable by every user";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(dir) == 0);

    /* Cannot be created: said too. */
    char file[256];
    snprintf(file, sizeof file, "%s/afile", tmp);
    spit(file, (const uint8_t *)"x", 1);
    snprintf(dir, sizeof dir, "%s/afile/hc", tmp);
    expect_why = "cannot be created";
    CHECK(refusals_said(use_refused, dir) == 1);

    if (geteuid() != 0) {
        printf("not root: the other-user checks are skipped\n");
        cf__hc_entry_free(one);
        return;
    }
    /* Owned by another user (who made it first, 0777 or not). */
    snprintf(dir, sizeof dir, "%s/theirs", tmp);
    mkdir(dir, 0700);
    CHECK(chown(dir, OTHER_UID, OTHER_UID) == 0);
    expect_why = "owned by uid 4242";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(dir) == 0);

    /* Another user's symbolic link to a folder of ours. */
    char target[256];
    snprintf(target, sizeof target, "%s/target", tmp);
    mkdir(target, 0700);
    snprintf(dir, sizeof dir, "%s/link", tmp);
    CHECK(symlink(target, dir) == 0);
    CHECK(lchown(dir, OTHER_UID, OTHER_UID) == 0);
    expect_why = "symbolic link owned by uid 4242";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(target) == 0);
    /* Our own link is followed. */
    CHECK(lchown(dir, 0, 0) == 0);
    put(dir, 0, "http://127.0.0.1:1/a.tif", one, "\"a\"");
    CHECK(files_in(target) == 1);
    cf__hc_entry_free(one);
    path_rules(tmp);
}

/* The folders on the way to the cache folder: whoever may rename what is
 * in them can swap the cache folder for another of the user's folders,
 * or for a folder of a file system they control (where every file can
 * claim to be the user's).  43b28fd and the first hardening checked only
 * the last folder and the last link, so each case below was used. */
static void path_rules(const char *tmp) {
    char dir[256], mid[256], target[256];
    cf__hc_entry *one = entry(1);
    /* A folder above that every user may write to, without the sticky
     * bit: refused, and nothing written below it. */
    snprintf(mid, sizeof mid, "%s/open", tmp);
    mkdir(mid, 0700);
    chmod(mid, 0777);
    snprintf(dir, sizeof dir, "%s/open/hc", tmp);
    expect_why = "open, which every user may write to";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(mid) == 0);
    /* Group-writable: the same. */
    chmod(mid, 0770);
    expect_why = "open, which its group may write to";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(mid) == 0);
    /* With the sticky bit (as /tmp), others may not rename what is not
     * theirs: accepted. */
    chmod(mid, 01777);
    put(dir, 0, "http://127.0.0.1:1/a.tif", one, "\"a\"");
    CHECK(files_in(dir) == 1);

    if (geteuid() != 0) {
        cf__hc_entry_free(one);
        return;
    }
    /* Another user's link on the way (old: followed, and the cache made
     * in the folder it leads to). */
    snprintf(target, sizeof target, "%s/elsewhere", tmp);
    mkdir(target, 0700);
    snprintf(mid, sizeof mid, "%s/via", tmp);
    CHECK(symlink(target, mid) == 0);
    CHECK(lchown(mid, OTHER_UID, OTHER_UID) == 0);
    snprintf(dir, sizeof dir, "%s/via/hc", tmp);
    expect_why = "via, a symbolic link owned by uid 4242";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(target) == 0);
    /* Ours (or root's): followed. */
    CHECK(lchown(mid, 0, 0) == 0);
    put(dir, 0, "http://127.0.0.1:1/a.tif", one, "\"a\"");
    snprintf(mid, sizeof mid, "%s/elsewhere/hc", tmp);
    CHECK(files_in(mid) == 1);
    /* A folder above owned by another user, even 0755: they may rename
     * the cache folder away and put anything in its place. */
    snprintf(mid, sizeof mid, "%s/theirs2", tmp);
    mkdir(mid, 0755);
    snprintf(dir, sizeof dir, "%s/theirs2/hc", tmp);
    mkdir(dir, 0700);
    CHECK(chown(mid, OTHER_UID, OTHER_UID) == 0);
    expect_why = "theirs2, which is owned by uid 4242";
    CHECK(refusals_said(use_refused, dir) == 1);
    CHECK(files_in(dir) == 0);
    /* A link inside the path that leads through such a folder: the
     * folders are checked where the path really goes. */
    snprintf(mid, sizeof mid, "%s/tolink", tmp);
    CHECK(symlink("theirs2", mid) == 0);
    snprintf(dir, sizeof dir, "%s/tolink/hc", tmp);
    CHECK(refusals_said(use_refused, dir) == 1);
    snprintf(dir, sizeof dir, "%s/theirs2/hc", tmp);
    CHECK(files_in(dir) == 0);
    cf__hc_entry_free(one);
}

/* --------------------------------------------------------- file rules */

static void file_rules(const char *tmp) {
    char dir[256], victim[256], path[4096];
    snprintf(dir, sizeof dir, "%s/files", tmp);
    snprintf(victim, sizeof victim, "%s/victim", tmp);
    const uint8_t secret[] = "root's private file\n";
    spit(victim, secret, sizeof secret - 1);
    const char *url = "http://127.0.0.1:1/f.tif";
    cf__hc_entry *ok = entry(5);
    put(dir, 0, url, ok, "\"f\"");
    the_entry(dir, path, sizeof path);
    CHECK(path[0] && on_disk(dir, url));
    size_t n;
    uint8_t *good = slurp(path, &n);
    CHECK(good != NULL);

    /* A symbolic link at the entry's name: not read (O_NOFOLLOW), and a
     * store replaces the link itself, never the file it points to. */
    unlink(path);
    CHECK(symlink(victim, path) == 0);
    CHECK(!on_disk(dir, url));
    put(dir, 0, url, ok, "\"f\"");
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
    size_t vn;
    uint8_t *v = slurp(victim, &vn);
    CHECK(v && vn == sizeof secret - 1 && !memcmp(v, secret, vn));
    free(v);
    CHECK(on_disk(dir, url));

    /* Another user's entry, even well sealed, is ignored. */
    if (geteuid() == 0) {
        CHECK(chown(path, OTHER_UID, OTHER_UID) == 0);
        CHECK(!on_disk(dir, url));
        CHECK(chown(path, 0, 0) == 0);
        CHECK(on_disk(dir, url));
    }

    /* A second name for the entry elsewhere (a hard link, which
     * O_NOFOLLOW does not see): not the cache's alone, so ignored (old:
     * used); used again once the link is gone. */
    char hard[4096];
    snprintf(hard, sizeof hard, "%s/hardlink", tmp);
    CHECK(link(path, hard) == 0);
    CHECK(!on_disk(dir, url));
    unlink(hard);
    CHECK(on_disk(dir, url));

    /* Random bit flips anywhere in the entry: each is caught and the
     * entry dropped. */
    srand(12345);
    int served = 0, dropped = 0;
    for (int t = 0; t < 200 && good; t++) {
        uint8_t *b = malloc(n);
        memcpy(b, good, n);
        size_t at = (size_t)rand() % n;
        b[at] ^= (uint8_t)(1u << (rand() % 8));
        spit(path, b, n);
        free(b);
        served += on_disk(dir, url);
        dropped += access(path, F_OK) != 0;
    }
    CHECK(served == 0 && dropped == 200);
    /* A cut-off entry and trailing garbage: the same. */
    if (good) {
        spit(path, good, n - 1);
        CHECK(!on_disk(dir, url));
        uint8_t *b = malloc(n + 1);
        memcpy(b, good, n);
        b[n] = 0;
        spit(path, b, n + 1);
        CHECK(!on_disk(dir, url));
        free(b);
        /* Another key's entry copied to this name: its key is inside. */
        put(dir, 0, "http://127.0.0.1:1/g.tif", ok, "\"g\"");
        char other[4096];
        spit(path, good, n);
        CHECK(on_disk(dir, url));
        DIR *d = opendir(dir);
        other[0] = 0;
        for (struct dirent *e; d && (e = readdir(d));)
            if (strstr(e->d_name, ".cfh") && strcmp(strrchr(path, '/') + 1, e->d_name))
                snprintf(other, sizeof other, "%s/%s", dir, e->d_name);
        if (d) closedir(d);
        CHECK(other[0] && rename(other, path) == 0);
        CHECK(!on_disk(dir, url));
    }
    free(good);
    cf__hc_entry_free(ok);

    /* Left-over temp files of a crashed writer go at the next listing;
     * other files are left alone. */
    char stale[4096], mine[4096];
    snprintf(stale, sizeof stale, "%s/%064d.cfh.0123456789abcdef.tmp", dir, 0);
    snprintf(mine, sizeof mine, "%s/notes.txt", dir);
    spit(stale, (const uint8_t *)"x", 1);
    spit(mine, (const uint8_t *)"x", 1);
    struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    utimensat(AT_FDCWD, stale, old, 0);
    ok = entry(1);
    put(dir, 0, url, ok, "\"h\""); /* first use of an io: lists */
    cf__hc_entry_free(ok);
    CHECK(access(stale, F_OK) != 0 && access(mine, F_OK) == 0);
}

/* ------------------------------------------------------ store failures */

/* One io stores four entries and finds each again (from memory). */
static void store_some(const char *dir) {
    cf_io *io = io_with(dir, 0);
    cf__hc_entry *e = entry(20); /* 2.4 KB a file */
    char url[64];
    for (int i = 0; i < 4; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:1/w%d.tif", i);
        cf__src *s = src_of(io, url);
        cf__hc_store(io, s, e, "\"w\"");
        cf__hc_entry *got = cf__hc_lookup(io, s);
        CHECK(got != NULL);
        cf__hc_entry_free(got);
        cf__src_free(s);
    }
    cf__hc_entry_free(e);
    cf_io_free(io);
}

/* Run f in a child process (its CHECKs count there); 1 when they held. */
static int in_child(void (*f)(const char *), const char *arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        f(arg);
        fflush(stdout);
        _exit(cf_test_fail_ ? 1 : 0);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* A full disk (here a file size limit: writes past 1000 bytes fail with
 * EFBIG; the captured stderr stays below it). */
static void when_full(const char *dir) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1000, 1000};
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    CHECK(said(store_some, dir, "could not be stored (File too large)") == 1);
}

/* As another user, in a folder of theirs they may not write to (a
 * read-only copy of a cache): its entries are read, stores said once. */
static void when_read_only(const char *dir) {
    CHECK(setgid(OTHER_UID) == 0 && setuid(OTHER_UID) == 0);
    CHECK(said(store_some, dir, "cannot be written to (Permission denied)") == 1);
    CHECK(on_disk(dir, "http://127.0.0.1:1/ro.tif"));
}

/* Stores that fail are said once per io (43b28fd and the first
 * hardening: nothing said, the cache silently off); opens go on and
 * entries stay in memory. */
static void store_failures(const char *tmp) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/full", tmp);
    CHECK(in_child(when_full, dir));
    CHECK(files_in(dir) == 0); /* no temp file left behind */
    if (geteuid() != 0) return;
    snprintf(dir, sizeof dir, "%s/ro", tmp);
    cf__hc_entry *e = entry(2);
    put(dir, 0, "http://127.0.0.1:1/ro.tif", e, "\"ro\"");
    cf__hc_entry_free(e);
    char path[4096];
    the_entry(dir, path, sizeof path);
    CHECK(chown(path, OTHER_UID, OTHER_UID) == 0);
    CHECK(chown(dir, OTHER_UID, OTHER_UID) == 0 && chmod(dir, 0500) == 0);
    CHECK(chmod(tmp, 0711) == 0);
    CHECK(in_child(when_read_only, dir));
    CHECK(files_in(dir) == 1);
    chmod(tmp, 0700);
    chmod(dir, 0700);
}

/* ---------------------------------------------------------------- fork */

/* A DataLoader forks its workers while other threads of the parent may be
 * using the io: a lock such a thread held at the fork stays held in the
 * child for ever.  Here a thread keeps looking up a 32 MiB entry (the
 * table's lock is held while it is copied) while the main thread forks;
 * each child looks the entry up once.  Old: most children hung on the
 * lock (6 of 8, killed by their alarm).  Now a child takes a table of
 * its own. */
typedef struct spinner {
    cf_io *io;
    cf__src *src;
    atomic_int stop;
} spinner;

static void *spin(void *arg) {
    spinner *sp = arg;
    while (!atomic_load(&sp->stop)) cf__hc_entry_free(cf__hc_lookup(sp->io, sp->src));
    return NULL;
}

static void fork_while_busy(void) {
    spinner sp = {io_with("", 0), NULL, 0};
    sp.src = src_of(sp.io, "http://127.0.0.1:1/big.tif");
    cf__hc_entry *big = cf__hc_entry_new();
    uint8_t *b = calloc(1, 32u << 20);
    CHECK(cf__hc_add_range(big, 0, b, 32u << 20) == CF_OK);
    free(b);
    cf__hc_store(sp.io, sp.src, big, NULL); /* no validator: memory only */
    cf__hc_entry_free(big);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, spin, &sp) == 0);
    int hung = 0, ok = 0;
    for (int i = 0; i < 8; i++) {
        usleep(2000);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20);
            cf__hc_entry_free(cf__hc_lookup(sp.io, sp.src));
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        hung += WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    atomic_store(&sp.stop, 1);
    pthread_join(th, NULL);
    CHECK(hung == 0 && ok == 8);
    if (hung || ok != 8) fprintf(stderr, "  forks: %d hung, %d ok of 8\n", hung, ok);
    /* Forked while nothing else ran: the child keeps the parent's
     * entries (a worker opens the files its parent opened with no
     * request), and the parent keeps them too. */
    pid_t pid = fork();
    if (pid == 0) {
        cf__hc_entry *e = cf__hc_lookup(sp.io, sp.src);
        _exit(e && e->nranges == 1 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
    cf__hc_entry *e = cf__hc_lookup(sp.io, sp.src);
    CHECK(e != NULL);
    cf__hc_entry_free(e);
    cf__src_free(sp.src);
    cf_io_free(sp.io);
}

/* ------------------------------------------------------------ eviction */

/* The entry file names in dir, into names (up to max); their count. */
static int entry_names(const char *dir, char names[][80], int max) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) && n < max;)
        if (strlen(de->d_name) == 68) snprintf(names[n++], 80, "%s", de->d_name);
    if (d) closedir(d);
    return n;
}

static void set_mtime(const char *dir, const char *name, time_t t) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct timespec tt[2] = {{t, 0}, {t, 0}};
    CHECK(utimensat(AT_FDCWD, p, tt, 0) == 0);
}

static void eviction(const char *tmp) {
    char dir[256], url[64], names[16][80], path[4096];
    snprintf(dir, sizeof dir, "%s/lru", tmp);
    cf__hc_entry *e = entry(40); /* 40 x 100 bytes: ~4.8 KB a file */
    put(dir, 0, "http://127.0.0.1:1/0.tif", e, "\"0\"");
    the_entry(dir, path, sizeof path);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    uint64_t one = (uint64_t)st.st_size, cap = 4 * one + one / 2;
    /* 0..3 stored (older and older in this order), 0 used again (a hit
     * makes it the newest), then 4, 5 and 6: 1, 2 and 3, the least
     * recently used, go; at most `cap` bytes remain. */
    time_t base = time(NULL) - 100;
    set_mtime(dir, strrchr(path, '/') + 1, base);
    for (int i = 1; i < 4; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:1/%d.tif", i);
        int before = entry_names(dir, names, 16);
        put(dir, cap, url, e, "\"x\"");
        /* the new name is the one not listed before */
        char now[16][80];
        int k = entry_names(dir, now, 16);
        CHECK(k == before + 1);
        for (int a = 0; a < k; a++) {
            int old = 0;
            for (int b = 0; b < before; b++) old |= !strcmp(now[a], names[b]);
            if (!old) set_mtime(dir, now[a], base + i);
        }
    }
    CHECK(files_in(dir) == 4);
    CHECK(on_disk(dir, "http://127.0.0.1:1/0.tif")); /* a hit: newest */
    for (int i = 4; i < 7; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:1/%d.tif", i);
        put(dir, cap, url, e, "\"x\"");
    }
    uint64_t total = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.' && stat(path, &st) == 0) total += (uint64_t)st.st_size;
    }
    if (d) closedir(d);
    CHECK(total <= cap);
    CHECK(files_in(dir) == 4);
    for (int i = 0; i < 7; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:1/%d.tif", i);
        int want = i == 0 || i >= 4;
        CHECK(on_disk(dir, url) == want);
    }
    cf__hc_entry_free(e);
}

int main(void) {
    char tmp[] = "/tmp/cf_hc_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    char dir[64];
    snprintf(dir, sizeof dir, "%s/hc", tmp);
    basics(dir);
    snprintf(dir, sizeof dir, "%s/keys", tmp);
    keys(dir);
    folder_rules(tmp);
    file_rules(tmp);
    store_failures(tmp);
    fork_while_busy();
    eviction(tmp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0);
    return CF_TEST_END();
}
