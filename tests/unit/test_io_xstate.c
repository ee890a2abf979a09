/*
 * test_io_xstate.c - the states of one transfer (lib/io/xstate.c): the
 * paths a transfer really takes (docs/internals.md, "A transfer's
 * states") are legal, the moves that would be bugs are not, the graph has
 * no state a transfer can get stuck in, and cf__xfer_move stops the
 * process on an illegal move in checked builds (counting it in the io and
 * making it otherwise).  The moves of real transfers (retries, resumes,
 * redirects, hedges, cancellation) are checked by test_io_core and the
 * Python fault tests, whose checked (ASan, TSan) runs stop at any
 * illegal one.
 */
#include "cf_test.h"
#include "io/io.h"
#include "io/io_internal.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N CF__XS_COUNT

static int terminal(cf__xstate s) {
    return s == CF__XS_DONE || s == CF__XS_FAILED || s == CF__XS_CANCELLED ||
           s == CF__XS_DROPPED;
}

/* Every move of `path` (n states) is legal. */
static int path_legal(const cf__xstate *path, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (!cf__xstate_legal(path[i], path[i + 1])) {
            fprintf(stderr, "  illegal: %s -> %s (step %zu)\n",
                    cf__xstate_name(path[i]), cf__xstate_name(path[i + 1]), i);
            return 0;
        }
    return 1;
}
#define PATH(...)                                                            \
    path_legal((const cf__xstate[]){__VA_ARGS__},                            \
               sizeof((const cf__xstate[]){__VA_ARGS__}) / sizeof(cf__xstate))

static void test_names(void) {
    for (int a = 0; a < N; a++) {
        CHECK(strcmp(cf__xstate_name((cf__xstate)a), "?") != 0);
        for (int b = 0; b < a; b++)
            CHECK(strcmp(cf__xstate_name((cf__xstate)a), cf__xstate_name((cf__xstate)b)) != 0);
    }
    CHECK(strcmp(cf__xstate_name(CF__XS_COUNT), "?") == 0);
    CHECK(!cf__xstate_legal(CF__XS_COUNT, CF__XS_DONE) &&
          !cf__xstate_legal(CF__XS_BODY, CF__XS_COUNT));
}

/* The lives transfers lead (each one is a test of io.c / http.c). */
static void test_paths(void) {
    /* One request, answered at once. */
    CHECK(PATH(CF__XS_NEW, CF__XS_QUEUED, CF__XS_SENDING, CF__XS_HEADERS,
               CF__XS_HEADERS_END, CF__XS_BODY, CF__XS_DONE));
    /* 100 Continue, then the response. */
    CHECK(PATH(CF__XS_SENDING, CF__XS_HEADERS, CF__XS_HEADERS_END, CF__XS_HEADERS,
               CF__XS_HEADERS_END, CF__XS_BODY, CF__XS_DONE));
    /* Refused, 503 with a body, 503 without, a body cut short twice (each
     * time after bringing bytes), then the rest. */
    CHECK(PATH(CF__XS_QUEUED, CF__XS_SENDING, CF__XS_BACKOFF, CF__XS_SENDING,
               CF__XS_HEADERS, CF__XS_HEADERS_END, CF__XS_BODY, CF__XS_BACKOFF,
               CF__XS_SENDING, CF__XS_HEADERS, CF__XS_HEADERS_END, CF__XS_BACKOFF,
               CF__XS_SENDING, CF__XS_HEADERS, CF__XS_HEADERS_END, CF__XS_BODY,
               CF__XS_RESUME, CF__XS_SENDING, CF__XS_HEADERS, CF__XS_HEADERS_END,
               CF__XS_BODY, CF__XS_RESUME, CF__XS_SENDING, CF__XS_HEADERS,
               CF__XS_HEADERS_END, CF__XS_BODY, CF__XS_DONE));
    /* Cut off inside the headers, retried; then a redirect without and one
     * with a body, then 404. */
    CHECK(PATH(CF__XS_SENDING, CF__XS_HEADERS, CF__XS_BACKOFF, CF__XS_SENDING,
               CF__XS_HEADERS, CF__XS_HEADERS_END, CF__XS_REDIRECT, CF__XS_SENDING,
               CF__XS_HEADERS, CF__XS_HEADERS_END, CF__XS_BODY, CF__XS_REDIRECT,
               CF__XS_SENDING, CF__XS_HEADERS, CF__XS_HEADERS_END, CF__XS_FAILED));
    /* An empty 200 (validated when it ends), a 404 with an error body. */
    CHECK(PATH(CF__XS_HEADERS_END, CF__XS_BODY, CF__XS_DONE));
    CHECK(PATH(CF__XS_HEADERS_END, CF__XS_BODY, CF__XS_FAILED));
    /* The deadline passed while it waited for its retry time. */
    CHECK(PATH(CF__XS_BACKOFF, CF__XS_FAILED));
    CHECK(PATH(CF__XS_RESUME, CF__XS_FAILED));
    CHECK(PATH(CF__XS_QUEUED, CF__XS_FAILED));
    /* Hedging: the second leg starts at once; the loser is LOST then
     * DROPPED whatever it was doing; a leg that failed is DROPPED while
     * the other goes on; a second leg that could not start is DROPPED. */
    CHECK(PATH(CF__XS_NEW, CF__XS_SENDING, CF__XS_HEADERS, CF__XS_HEADERS_END,
               CF__XS_BODY, CF__XS_DONE));
    const cf__xstate active[] = {CF__XS_SENDING, CF__XS_HEADERS, CF__XS_HEADERS_END,
                                 CF__XS_BODY};
    for (size_t i = 0; i < 4; i++) {
        CHECK(PATH(active[i], CF__XS_LOST, CF__XS_DROPPED));
        CHECK(PATH(active[i], CF__XS_DROPPED));
        CHECK(PATH(active[i], CF__XS_CANCELLED)); /* cf__io_cancel, close */
        CHECK(PATH(active[i], CF__XS_FAILED));
    }
    CHECK(PATH(CF__XS_NEW, CF__XS_DROPPED));
    /* Cancelled or closed while waiting. */
    const cf__xstate waiting[] = {CF__XS_QUEUED, CF__XS_BACKOFF, CF__XS_RESUME,
                                  CF__XS_REDIRECT};
    for (size_t i = 0; i < 4; i++) {
        CHECK(PATH(waiting[i], CF__XS_CANCELLED));
        CHECK(PATH(waiting[i], CF__XS_SENDING));
    }
}

/* Moves that would be bugs. */
static void test_illegal(void) {
    /* Nothing leaves an end; nothing goes back to NEW or into QUEUED but
     * a new transfer. */
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            if (terminal((cf__xstate)a)) CHECK(!cf__xstate_legal(a, b));
            if (b == CF__XS_NEW) CHECK(!cf__xstate_legal(a, b));
            if (b == CF__XS_QUEUED && a != CF__XS_NEW) CHECK(!cf__xstate_legal(a, b));
        }
    /* Success only after a validated body; a resume only after a body
     * brought bytes; a redirect only after its headers ended. */
    for (int a = 0; a < N; a++) {
        CHECK(cf__xstate_legal(a, CF__XS_DONE) == (a == CF__XS_BODY));
        CHECK(cf__xstate_legal(a, CF__XS_RESUME) == (a == CF__XS_BODY));
        CHECK(cf__xstate_legal(a, CF__XS_REDIRECT) ==
              (a == CF__XS_HEADERS_END || a == CF__XS_BODY));
        /* Bytes reach the callers only from a started response. */
        CHECK(cf__xstate_legal(a, CF__XS_BODY) == (a == CF__XS_HEADERS_END));
    }
    /* A lost leg writes nothing and ends nowhere but DROPPED: no result,
     * no callbacks, no retry. */
    for (int b = 0; b < N; b++) CHECK(cf__xstate_legal(CF__XS_LOST, b) == (b == CF__XS_DROPPED));
    /* Only legs in curl can lose; waiting ones are not in a hedge. */
    CHECK(!cf__xstate_legal(CF__XS_QUEUED, CF__XS_LOST) &&
          !cf__xstate_legal(CF__XS_BACKOFF, CF__XS_LOST) &&
          !cf__xstate_legal(CF__XS_NEW, CF__XS_LOST));
    /* A waiting transfer is sent before anything can arrive. */
    CHECK(!cf__xstate_legal(CF__XS_BACKOFF, CF__XS_HEADERS) &&
          !cf__xstate_legal(CF__XS_QUEUED, CF__XS_BODY) &&
          !cf__xstate_legal(CF__XS_RESUME, CF__XS_BODY));
    /* Validated headers are not read again (a trailer's status line). */
    CHECK(!cf__xstate_legal(CF__XS_BODY, CF__XS_HEADERS) &&
          !cf__xstate_legal(CF__XS_BODY, CF__XS_HEADERS_END));
    /* A response that did not get past SENDING is no redirect or body. */
    CHECK(!cf__xstate_legal(CF__XS_SENDING, CF__XS_REDIRECT) &&
          !cf__xstate_legal(CF__XS_SENDING, CF__XS_DONE));
}

/* No state a transfer can be stuck in: every state is reachable from NEW
 * and every one that is not an end reaches an end. */
static void test_graph(void) {
    int reach[N] = {0};
    reach[CF__XS_NEW] = 1;
    for (int round = 0; round < N; round++)
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                if (reach[a] && cf__xstate_legal(a, b)) reach[b] = 1;
    for (int a = 0; a < N; a++) {
        if (!reach[a]) fprintf(stderr, "  unreachable: %s\n", cf__xstate_name(a));
        CHECK(reach[a]);
    }
    int ends[N] = {0};
    for (int a = 0; a < N; a++) ends[a] = terminal((cf__xstate)a);
    for (int round = 0; round < N; round++)
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                if (ends[b] && cf__xstate_legal(a, b)) ends[a] = 1;
    for (int a = 0; a < N; a++) {
        if (!ends[a]) fprintf(stderr, "  cannot end: %s\n", cf__xstate_name(a));
        CHECK(ends[a]);
    }
    /* Each waiting or active state can be cancelled (cf__io_cancel and
     * closing reach every transfer). */
    for (int a = CF__XS_QUEUED; a <= CF__XS_BODY; a++)
        CHECK(cf__xstate_legal(a, CF__XS_CANCELLED));
}

/* cf__xfer_move on a transfer of a real src (nothing is sent). */
static void test_move(void) {
    cf_io *io = NULL;
    cf__src *s = NULL;
    cf_error e;
    CHECK(cf_io_new(NULL, &io, &e) == CF_OK &&
          cf__src_new(io, "http://127.0.0.1:9/x.tif", &s, &e) == CF_OK);
    if (!s) return;
    cf__xfer x;
    memset(&x, 0, sizeof x);
    x.src = s;
    CHECK(x.state == CF__XS_NEW);
    cf__xfer_move(&x, CF__XS_QUEUED);
    int line = __LINE__ - 1;
    CHECK(x.state == CF__XS_QUEUED && x.moved_line == line &&
          strstr(x.moved_file, "test_io_xstate.c"));
    cf__xfer_move(&x, CF__XS_SENDING);
    CHECK(x.state == CF__XS_SENDING && atomic_load(&io->n_bad_moves) == 0);

    /* An illegal move, in a child: checked builds stop there with the
     * states and places in the message; release builds count it and make
     * it anyway (behaviour as before the state machine). */
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        cf__xfer_move(&x, CF__XS_DONE); /* SENDING -> DONE: no body */
        int ok = x.state == CF__XS_DONE && atomic_load(&io->n_bad_moves) == 1;
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    char msg[512] = "";
    ssize_t k, got = 0;
    while ((k = read(fds[0], msg + got, sizeof msg - 1 - (size_t)got)) > 0) got += k;
    msg[got > 0 ? got : 0] = 0;
    close(fds[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    if (cf__xstate_checked()) {
        CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT);
        CHECK(strstr(msg, "illegal state move SENDING -> DONE") &&
              strstr(msg, "test_io_xstate.c"));
    } else {
        CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && !msg[0]);
    }
    CHECK(x.state == CF__XS_SENDING); /* the parent's copy is untouched */
    cf__src_free(s);
    cf_io_free(io);
}

int main(void) {
    test_names();
    test_paths();
    test_illegal();
    test_graph();
    test_move();
    return CF_TEST_END();
}
