/*
 * xstate.c - the states of one HTTP range transfer (a cf__xfer: one
 * request, or one leg of a hedged request) and the one function that
 * moves a transfer between them.
 *
 * A transfer's life used to be spread over flags (ttfb_seen, hdr_done,
 * checked, lost, hedged, is_hedge, a due time, a result) whose
 * combinations said where it was, and hedging's bugs came from
 * combinations nobody had named.  As curl's multi.c does with mstate(),
 * each transfer now has one state, every change of it goes through
 * cf__xfer_move, and a table says which moves exist.  The picture is in
 * docs/internals.md ("A transfer's states").
 *
 * An illegal move is a bug in io.c or http.c, never the server's doing
 * (a hostile response only picks among legal moves).  Builds that check
 * (without NDEBUG, or under a sanitizer: the test suite's ASan+UBSan and
 * TSan runs) stop there with both states and where the move and the one
 * before it were made; release builds make the move anyway, as before,
 * and count it in the io (n_bad_moves) for the tests to look at.
 */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>

#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CF__XS_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CF__XS_CHECKED 1
#endif
#endif
#ifndef CF__XS_CHECKED
#define CF__XS_CHECKED 0
#endif

#define B(s) (1u << (s))

/* The moves out of each state.  Why each one exists:
 *  NEW       -> QUEUED (cf__io_submit), SENDING (a hedge leg starts at
 *               once), DROPPED (a hedge leg that could not start)
 *  QUEUED, BACKOFF, RESUME, REDIRECT
 *            -> SENDING (cf__xfer_start), FAILED (could not start: out of
 *               memory, the deadline passed while it waited), CANCELLED
 *  SENDING   -> HEADERS (first response byte), and the ends of an attempt
 *               with no response: BACKOFF (connect or send failed, no
 *               answer), FAILED, LOST (its twin answered), DROPPED (a
 *               failed leg forgotten while its twin goes on), CANCELLED
 *  HEADERS   -> HEADERS_END (the blank line), or cut off inside the
 *               headers: BACKOFF, FAILED; LOST, DROPPED, CANCELLED
 *  HEADERS_END
 *            -> HEADERS (that was a 1xx: the real response follows),
 *               BODY (first body byte, or an empty 200/206 validated when
 *               it ends), or ends without a body: FAILED (404, 416, ...),
 *               BACKOFF (503 ...), REDIRECT; LOST, DROPPED, CANCELLED
 *  BODY      -> DONE, RESUME (cut short after bringing bytes), BACKOFF,
 *               FAILED, REDIRECT (a 3xx with a body), LOST (an error
 *               body's leg whose twin started a good body), DROPPED,
 *               CANCELLED
 *  LOST      -> DROPPED (drop_lost takes it out of curl)
 *  DONE, FAILED, CANCELLED: callbacks run, then freed.  DROPPED: freed. */
static const uint32_t LEGAL[CF__XS_COUNT] = {
    [CF__XS_NEW] = B(CF__XS_QUEUED) | B(CF__XS_SENDING) | B(CF__XS_DROPPED),
    [CF__XS_QUEUED] = B(CF__XS_SENDING) | B(CF__XS_FAILED) | B(CF__XS_CANCELLED),
    [CF__XS_BACKOFF] = B(CF__XS_SENDING) | B(CF__XS_FAILED) | B(CF__XS_CANCELLED),
    [CF__XS_RESUME] = B(CF__XS_SENDING) | B(CF__XS_FAILED) | B(CF__XS_CANCELLED),
    [CF__XS_REDIRECT] = B(CF__XS_SENDING) | B(CF__XS_FAILED) | B(CF__XS_CANCELLED),
    [CF__XS_SENDING] = B(CF__XS_HEADERS) | B(CF__XS_BACKOFF) | B(CF__XS_FAILED) |
                       B(CF__XS_LOST) | B(CF__XS_DROPPED) | B(CF__XS_CANCELLED),
    [CF__XS_HEADERS] = B(CF__XS_HEADERS_END) | B(CF__XS_BACKOFF) | B(CF__XS_FAILED) |
                       B(CF__XS_LOST) | B(CF__XS_DROPPED) | B(CF__XS_CANCELLED),
    [CF__XS_HEADERS_END] = B(CF__XS_HEADERS) | B(CF__XS_BODY) | B(CF__XS_BACKOFF) |
                           B(CF__XS_FAILED) | B(CF__XS_REDIRECT) | B(CF__XS_LOST) |
                           B(CF__XS_DROPPED) | B(CF__XS_CANCELLED),
    [CF__XS_BODY] = B(CF__XS_DONE) | B(CF__XS_RESUME) | B(CF__XS_BACKOFF) |
                    B(CF__XS_FAILED) | B(CF__XS_REDIRECT) | B(CF__XS_LOST) |
                    B(CF__XS_DROPPED) | B(CF__XS_CANCELLED),
    [CF__XS_LOST] = B(CF__XS_DROPPED),
};

static const char *const NAMES[CF__XS_COUNT] = {
    [CF__XS_NEW] = "NEW",          [CF__XS_QUEUED] = "QUEUED",
    [CF__XS_BACKOFF] = "BACKOFF",  [CF__XS_RESUME] = "RESUME",
    [CF__XS_REDIRECT] = "REDIRECT", [CF__XS_SENDING] = "SENDING",
    [CF__XS_HEADERS] = "HEADERS",  [CF__XS_HEADERS_END] = "HEADERS_END",
    [CF__XS_BODY] = "BODY",        [CF__XS_LOST] = "LOST",
    [CF__XS_DONE] = "DONE",        [CF__XS_FAILED] = "FAILED",
    [CF__XS_CANCELLED] = "CANCELLED", [CF__XS_DROPPED] = "DROPPED",
};

const char *cf__xstate_name(cf__xstate s) {
    return (unsigned)s < CF__XS_COUNT ? NAMES[s] : "?";
}

int cf__xstate_legal(cf__xstate from, cf__xstate to) {
    return (unsigned)from < CF__XS_COUNT && (unsigned)to < CF__XS_COUNT &&
           (LEGAL[from] & B(to)) != 0;
}

int cf__xstate_checked(void) { return CF__XS_CHECKED; }

void cf__xfer_move_at(cf__xfer *x, cf__xstate to, const char *file, int line) {
    if (!cf__xstate_legal(x->state, to)) {
        cf_io *io = x->src ? x->src->io : NULL;
        if (io) atomic_fetch_add(&io->n_bad_moves, 1);
        if (CF__XS_CHECKED) {
            fprintf(stderr,
                    "cogfeed: io transfer %p: illegal state move %s -> %s at "
                    "%s:%d (the move before: %s:%d)\n",
                    (void *)x, cf__xstate_name(x->state), cf__xstate_name(to),
                    file, line, x->moved_file ? x->moved_file : "-",
                    x->moved_line);
            abort();
        }
    }
    x->state = to;
    x->moved_file = file;
    x->moved_line = line;
}
