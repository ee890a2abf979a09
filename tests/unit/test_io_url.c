/*
 * test_io_url.c - which names are remote URLs and which are local paths:
 * cf__url_is_remote, the one rule that cf__src_new and the loader use
 * (before, each had its own, and "FILE:///x" or "./a://b" was remote to
 * the loader and local to cf__src_new).  For odd inputs the rule's answer
 * must be what cf__src_new then does: open a local path (here a missing
 * one: CF_E_NOTFOUND "cannot open", naming the path) or parse a remote
 * URL (nothing is sent: a src, or CF_E_ARG naming what is wrong with it),
 * and what the message names (the redaction finds the same scheme).
 * Names holding control characters are refused, and no message carries
 * a raw control character (cf__msg_escape).
 */
#include "cf_test.h"
#include "io/io.h"

#include <string.h>

static const struct {
    const char *name;
    int remote;
} CASES[] = {
    {"/no/such/dir/x.tif", 0},
    {"no_such_dir/x.tif", 0},
    {"", 0},
    /* file:// is local whatever its case */
    {"file:///no/such/dir/x.tif", 0},
    {"FILE:///no/such/dir/x.tif", 0},
    {"File://localhost/no/such/dir/x.tif", 0},
    {"file:no_such_dir/x.tif", 0},
    /* a colon is not a scheme without "://" */
    {"s3:/no_such_bucket/k.tif", 0},
    {"s3:no_such_bucket/k.tif", 0},
    {"http:/no_such_host/x.tif", 0},
    {"C:/no/such/dir/x.tif", 0},
    {"no_such_dir/a:b.tif", 0},
    /* "://" after a '/', '.', ' ' or a leading digit is in a path */
    {"./no_such_dir://x.tif", 0},
    {"no_such_dir/a://b.tif", 0},
    {"no such://x.tif", 0},
    {"3d://no_such/x.tif", 0},
    {"://no_such/x.tif", 0},
    /* schemes in any case */
    {"http://127.0.0.1:9/x.tif", 1},
    {"HTTP://127.0.0.1:9/x.tif", 1},
    {"Https://127.0.0.1:9/x.tif", 1},
    {"s3://bucket/k.tif", 1},
    {"S3://bucket/k.tif", 1},
    {"az://container/b.tif", 1},
    {"GS://bucket/k.tif", 1},
    /* schemes cf__src_new does not take: remote, refused by name */
    {"ftp://127.0.0.1/x.tif", 1},
    {"filex://x.tif", 1},
    {"fil://x.tif", 1},
    {"x+y-z.w://h/x.tif", 1},
};

static void test_rule_and_src_agree(void) {
    cf_io_options o;
    cf_io_options_init(&o);
    cf_io *io = NULL;
    cf_error e;
    CHECK(cf_io_new(&o, &io, &e) == CF_OK);
    CHECK(cf__url_is_remote(NULL) == 0);
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const char *u = CASES[i].name;
        int got = cf__url_is_remote(u);
        if (got != CASES[i].remote) fprintf(stderr, "  rule: %s -> %d\n", u, got);
        CHECK(got == CASES[i].remote);
        if (!*u) continue; /* cf__src_new refuses "" before asking */
        cf__src *s = NULL;
        cf__err_clear(&e);
        cf_status st = cf__src_new(io, u, &s, &e);
        int ok;
        if (CASES[i].remote) {
            /* Parsed as a URL: a src (not contacted yet), or its scheme,
             * form or credentials refused -- never a file lookup. */
            ok = (st == CF_OK && cf__src_is_remote(s)) ||
                 ((st == CF_E_ARG || st == CF_E_AUTH) && !strstr(e.msg, "cannot open"));
        } else {
            ok = st == CF_E_NOTFOUND && strstr(e.msg, "cannot open") &&
                 strstr(e.msg, ".tif: cannot open");
        }
        if (!ok) fprintf(stderr, "  src: %s -> %d: %s\n", u, (int)st, e.msg);
        CHECK(ok);
        cf__src_free(s);
    }
    /* A remote URL needs an io; a local path does not. */
    cf__src *s = NULL;
    CHECK(cf__src_new(NULL, "HTTP://127.0.0.1:9/x.tif", &s, &e) == CF_E_ARG &&
          strstr(e.msg, "needs a cf_io"));
    /* Messages name the URL (redacted), never an internal function. */
    CHECK(cf__src_new(NULL, "https://user:SECRET@127.0.0.1:9/y.tif?sig=SECRET", &s, &e) ==
              CF_E_ARG &&
          strstr(e.msg, "127.0.0.1:9/y.tif: a remote URL needs a cf_io") &&
          !strstr(e.msg, "SECRET") && !strstr(e.msg, "cf__"));
    CHECK(cf__src_new(NULL, "", &s, &e) == CF_E_ARG && strstr(e.msg, "empty URL") &&
          !strstr(e.msg, "cf__"));
    CHECK(cf__src_new(NULL, "FILE:///no/such/dir/x.tif", &s, &e) == CF_E_NOTFOUND);
    cf_io_free(io);
}

/* The redaction (lib/common) reads the same scheme: a remote URL's user
 * info is dropped, and a path that only looks like one is left whole. */
static void test_redaction_agrees(void) {
    char out[CF__NAME_MAX];
    cf__redact_url("HTTPS://user:pw@h/x.tif?sig=S", out, sizeof out);
    CHECK(strcmp(out, "HTTPS://h/x.tif") == 0);
    CHECK(cf__url_is_remote("HTTPS://user:pw@h/x.tif?sig=S"));
    CHECK(cf__url_scheme_len("./a://b") == 0 && !cf__url_is_remote("./a://b"));
    CHECK(cf__url_scheme_len("3d://x") == 0 && cf__url_scheme_len("s3://b/k") == 2 &&
          cf__url_scheme_len("file:///x") == 4 && !cf__url_is_remote("file:///x"));
}

/* C0, DEL, and C1 in UTF-8 (C2 80..C2 9F). */
static int has_ctl(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F))
            return 1;
    return 0;
}

static void test_control_characters(void) {
    /* Refused before anything is sent or opened, escaped in the message,
     * the query (a secret) still dropped. */
    static const char *const names[] = {
        "http://127.0.0.1:9/a\x1b]0;pwned\x07.tif?sig=S3CR3T",
        "https://h/x\r\nX-Injected: 1/a.tif",
        "s3://bucket/key\x1b[2J.tif",
        "/tmp/no\x1b[31mred.tif",
        "http://h/del\x7f.tif",
        "https://h/a\xc2\x9b" "2J.tif", /* C1 CSI in UTF-8 */
        "/tmp/nel\xc2\x85.tif",         /* C1 NEL */
    };
    cf_io_options o;
    cf_io_options_init(&o);
    cf_io *io = NULL;
    CHECK(cf_io_new(&o, &io, NULL) == CF_OK);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        cf__src *s = NULL;
        cf_error e = {0};
        CHECK(cf__src_new(io, names[i], &s, &e) == CF_E_ARG && !s);
        CHECK(!has_ctl(e.msg) && strstr(e.msg, "control character") != NULL);
        CHECK(strstr(e.msg, "\\x") != NULL && strstr(e.msg, "S3CR3T") == NULL);
        if (has_ctl(e.msg) || !strstr(e.msg, "\\x")) fprintf(stderr, "  %zu: %s\n", i, e.msg);
        cf__src_free(s);
    }
    cf_io_free(io);

    /* Every message is escaped, and an escape is never cut. */
    cf_error e = {0};
    char big[sizeof e.msg + 8];
    cf__err(&e, CF_E_IO, "a\x1b[31mb\r\nc\x7f");
    CHECK(strcmp(e.msg, "a\\x1b[31mb\\x0d\\x0ac\\x7f") == 0);
    /* C1 in UTF-8: both bytes escaped; other UTF-8 (é, C3 A9) and a
     * lone continuation byte left as they are. */
    cf__err(&e, CF_E_IO, "a\xc2\x9b" "2J \xc3\xa9 \xc2\xa0 \x9b");
    CHECK(strcmp(e.msg, "a\\xc2\\x9b2J \xc3\xa9 \xc2\xa0 \x9b") == 0);
    /* A cut never splits a C1 pair's escape. */
    memset(big, 'a', sizeof big);
    big[sizeof e.msg - 6] = '\xc2';
    big[sizeof e.msg - 5] = '\x9b';
    big[sizeof big - 1] = 0;
    cf__err(&e, CF_E_IO, "%s", big);
    CHECK(!has_ctl(e.msg) && strlen(e.msg) == sizeof e.msg - 6 && !strchr(e.msg, 0x5c));
    memset(big, 'a', sizeof big);
    big[sizeof e.msg - 4] = '\x1b';
    big[sizeof big - 1] = 0;
    cf__err(&e, CF_E_IO, "%s", big);
    CHECK(!has_ctl(e.msg) && strlen(e.msg) == sizeof e.msg - 4 && !strchr(e.msg, 0x5c));
    /* A cut before UTF-8 continuation bytes that follow an escape. */
    memset(big, 'a', sizeof big);
    big[sizeof e.msg - 6] = '\x1b';
    memset(big + sizeof e.msg - 5, 0xa9, 5);
    big[sizeof e.msg] = 0;
    cf__err(&e, CF_E_IO, "%s", big);
    CHECK(!has_ctl(e.msg) && strlen(e.msg) == sizeof e.msg - 6);
    cf__err(&e, CF_E_IO, "x");
    cf__err_prefix(&e, CF_E_IO, "\x1bp");
    CHECK(strcmp(e.msg, "\\x1bp: x") == 0);
    cf__err_hint(&e, CF_E_IO, "\x07");
    CHECK(strcmp(e.msg, "\\x1bp: x; \\x07") == 0);
}

int main(void) {
    test_rule_and_src_agree();
    test_redaction_agrees();
    test_control_characters();
    return CF_TEST_END();
}
