/*
 * test_pipeline_open_many.c - cf_cog_open_many on local files (the
 * remote half, concurrency and the header cache, is
 * tests/python/test_open_many.py against nginx): every req gets its own
 * status, cog and error naming its file; one failing file does not lose
 * the others; the overall status is the first failure's, the message
 * says how many failed; the files open as cf_cog_open opens them, also
 * when headers take several reads (header_bytes 64) and there are more
 * files than slots (max_inflight 2: slots are reused).  Then the same
 * over an in-process HTTP range server with a delay, so that completions
 * come from the io loop thread (the suite's TSan stage runs this): the
 * server sees the opens' requests in flight together, never more than
 * max_inflight, and a 404 names its URL.
 */
#include "cf_test.h"
#include "test_tiff_writer.h"

#include "cogfeed.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- a tiny range server: every path is the same object, but paths
 * with "missing" in them, which are 404 ---------------------------------- */

typedef struct server {
    int lfd, port, delay_ms;
    pthread_t th;
    pthread_t conns[256];
    int nconns;
    const uint8_t *obj;
    size_t size;
    _Atomic int gets, inflight, max_inflight;
} server;

typedef struct conn {
    server *s;
    int fd;
} conn;

static void *conn_main(void *arg) {
    conn *c = arg;
    server *s = c->s;
    char buf[8192];
    size_t have = 0;
    for (;;) {
        char *end = NULL;
        while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
            if (have == sizeof buf) goto done;
            ssize_t k = recv(c->fd, buf + have, sizeof buf - have, 0);
            if (k <= 0) goto done;
            have += (size_t)k;
        }
        *end = 0;
        atomic_fetch_add(&s->gets, 1);
        int now = atomic_fetch_add(&s->inflight, 1) + 1;
        for (int m = atomic_load(&s->max_inflight);
             now > m && !atomic_compare_exchange_weak(&s->max_inflight, &m, now);) {
        }
        usleep((useconds_t)s->delay_ms * 1000);
        atomic_fetch_sub(&s->inflight, 1);
        unsigned long long a = 0, b = 0;
        const char *r = strstr(buf, "Range: bytes=");
        char hdr[256];
        int n;
        size_t len = 0;
        if (strstr(buf, "missing")) {
            n = snprintf(hdr, sizeof hdr, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        } else if (r && sscanf(r, "Range: bytes=%llu-%llu", &a, &b) == 2 && a < s->size) {
            if (b >= s->size) b = s->size - 1;
            len = (size_t)(b + 1 - a);
            n = snprintf(hdr, sizeof hdr,
                         "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes "
                         "%llu-%llu/%zu\r\nContent-Length: %zu\r\nETag: \"e1\"\r\n\r\n",
                         a, b, s->size, len);
        } else {
            n = snprintf(hdr, sizeof hdr,
                         "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\n\r\n");
        }
        if (send(c->fd, hdr, (size_t)n, MSG_NOSIGNAL) != n) goto done;
        for (size_t off = 0; off < len;) {
            ssize_t k = send(c->fd, s->obj + a + off, len - off, MSG_NOSIGNAL);
            if (k <= 0) goto done;
            off += (size_t)k;
        }
        size_t used = (size_t)(end + 4 - buf);
        memmove(buf, buf + used, have - used);
        have -= used;
    }
done:
    close(c->fd);
    free(c);
    return NULL;
}

static void *accept_main(void *arg) {
    server *s = arg;
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) break;
        if (s->nconns == 256) {
            close(fd);
            continue;
        }
        conn *c = malloc(sizeof *c);
        c->s = s;
        c->fd = fd;
        pthread_create(&s->conns[s->nconns++], NULL, conn_main, c);
    }
    return NULL;
}

static void server_start(server *s, const uint8_t *obj, size_t size, int delay_ms) {
    memset(s, 0, sizeof *s);
    s->obj = obj;
    s->size = size;
    s->delay_ms = delay_ms;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    socklen_t sl = sizeof sa;
    getsockname(s->lfd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    listen(s->lfd, 256);
    pthread_create(&s->th, NULL, accept_main, s);
}

/* After every cf_io using it is freed (its connections then close). */
static void server_stop(server *s) {
    shutdown(s->lfd, SHUT_RDWR);
    close(s->lfd);
    pthread_join(s->th, NULL);
    for (int i = 0; i < s->nconns; i++) pthread_join(s->conns[i], NULL);
}

/* n URLs of the server, one "missing" at index bad (-1: none); opened
 * through an io of max_inflight m and header_bytes 64 (two reads a file). */
static void remote_round(server *s, int n, int bad, int m) {
    char urls[64][96];
    cf_open_req reqs[64];
    cf_error errs[64];
    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < n; i++) {
        snprintf(urls[i], sizeof urls[i], "http://127.0.0.1:%d/%s%d.tif", s->port,
                 i == bad ? "missing" : "f", i);
        reqs[i].url = urls[i];
        reqs[i].err = &errs[i];
    }
    cf_io_options o;
    cf_io_options_init(&o);
    o.header_bytes = 64;
    o.max_inflight = m;
    o.hedge_after_ms = -1;
    cf_io *io = NULL;
    CHECK(cf_io_new(&o, &io, NULL) == CF_OK);
    atomic_store(&s->gets, 0);
    atomic_store(&s->max_inflight, 0);
    cf_error err;
    cf_status st = cf_cog_open_many(io, reqs, (size_t)n, NULL, &err);
    CHECK(st == (bad >= 0 ? CF_E_NOTFOUND : CF_OK));
    uint64_t sent = 0;
    for (int i = 0; i < n; i++) {
        if (i == bad) {
            CHECK(!reqs[i].cog && reqs[i].status == CF_E_NOTFOUND);
            CHECK(strstr(errs[i].msg, urls[i]) != NULL && errs[i].http_status == 404);
            sent += 1;
            continue;
        }
        CHECK(reqs[i].status == CF_OK && reqs[i].cog);
        if (!reqs[i].cog) continue;
        cf_cog_info in;
        cf_cog_get_info(reqs[i].cog, &in);
        CHECK(in.header_requests >= 2 && in.nlevels == 3 && in.width == 200);
        sent += in.header_requests;
    }
    cf_io_stats io_st;
    cf_io_get_stats(io, &io_st);
    CHECK((uint64_t)atomic_load(&s->gets) == sent && io_st.requests == sent);
    int most = atomic_load(&s->max_inflight);
    /* together (a new io's first request goes alone: libcurl's PIPEWAIT),
     * and never more than max_inflight */
    CHECK(most <= m && io_st.peak_inflight <= m);
    CHECK(most >= (n < m ? n : m) / 2);
    CHECK(io_st.peak_inflight == (n < m ? n : m));
    for (int i = 0; i < n; i++) cf_cog_close(reqs[i].cog);
    cf_io_free(io);
}

static void test_remote(void) {
    tw t;
    tw_init(&t, false, false);
    for (int i = 0; i < 3; i++) {
        tw_image im = tw_image_default(200 >> i, (200 >> i) / 2 + 1);
        im.tw = im.th = 16;
        im.subfile = i ? 1 : 0;
        tw_image_ifd(&t, &im);
    }
    size_t len;
    const uint8_t *obj = tw_finish(&t, &len);
    server s;
    server_start(&s, obj, len, 40);
    remote_round(&s, 40, 7, 64);
    remote_round(&s, 40, -1, 8);
    server_stop(&s);
    tw_free(&t);
}

int main(void) {
    const char *d = getenv("CF_TEST_DATA");
    snprintf(dir, sizeof dir, "%s", d && *d ? d : "/tmp");
    mkdir(dir, 0755);
    test_mix();
    test_remote();
    return CF_TEST_END();
}
