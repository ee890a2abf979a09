/*
 * head_ahead.c - see head_ahead.h.
 */
#include "head_ahead.h"

#include <stdlib.h>

void cf__ahead_init(cf__ahead *a, uint64_t file_size, unsigned max_guesses) {
    memset(a, 0, sizeof *a);
    a->size = file_size;
    a->max_guesses = max_guesses < CF__AHEAD_MAX_GUESSES ? max_guesses
                                                         : CF__AHEAD_MAX_GUESSES;
}

void cf__ahead_free(cf__ahead *a) {
    for (unsigned i = 0; i < a->nheld; i++) free(a->held[i].data);
    a->nheld = 0;
    a->held_bytes = 0;
}

/* Remove held[i], keeping the others in the order they came. */
static void drop(cf__ahead *a, unsigned i) {
    a->held_bytes -= a->held[i].len;
    memmove(&a->held[i], &a->held[i + 1], (a->nheld - i - 1) * sizeof a->held[0]);
    a->nheld--;
}

int cf__ahead_take(cf__ahead *a, uint64_t off, cf__ahead_range *r) {
    for (unsigned i = 0; i < a->nheld; i++) {
        const cf__ahead_range *h = &a->held[i];
        if (off >= h->off && off - h->off < h->len) {
            *r = *h;
            a->used++;
            a->taken += h->len;
            drop(a, i);
            return 1;
        }
    }
    return 0;
}

unsigned cf__ahead_plan(cf__ahead *a, uint64_t off, uint64_t len,
                        cf__range_req *g) {
    /* A demand a whole number of strides after the last one doubles the
     * guesses when every guess of the last round was used (the chain went
     * on at that stride past them); when only some were, it keeps that
     * many.  Any other demand learns a new stride and tries one guess. */
    a->demanded += len;
    if (a->last && off > a->last) {
        uint64_t d = off - a->last;
        if (a->stride && d % a->stride == 0 && a->used && a->used == a->sent) {
            a->n = a->sent * 2;
        } else if (a->stride && d % a->stride == 0 && a->used) {
            a->n = a->used;
        } else {
            a->stride = d;
            a->n = 1;
        }
    } else {
        a->stride = 0;
        a->n = 0;
    }
    a->last = off;
    a->sent = a->used = 0;
    if (a->n > a->max_guesses) a->n = a->max_guesses;
    /* A stride within the range itself reads on anyway; a long range is
     * the tag data of many IFDs at once, not worth repeating. */
    if (!a->stride || a->stride <= len || len > CF__AHEAD_MAX_LEN) return 0;
    unsigned k = 0;
    uint64_t round = 0;
    for (unsigned j = 1; j <= a->n; j++) {
        uint64_t at;
        if (!cf__mul_u64(a->stride, j, &at) || !cf__add_u64(at, off, &at) ||
            at >= a->size)
            break;
        uint64_t l = len < a->size - at ? len : a->size - at;
        /* Guess bytes not (yet) used stay within what the parser asked
         * for, plus a little. */
        if (round + l > CF__AHEAD_MAX_ROUND ||
            a->guessed - a->taken + round + l >
                a->demanded + a->taken + CF__AHEAD_SLACK)
            break;
        uint8_t *d = cf__malloc((size_t)l);
        if (!d) break;
        memset(&g[k], 0, sizeof g[k]);
        g[k].off = at;
        g[k].len = l;
        g[k].dst = d;
        round += l;
        k++;
    }
    a->guessed += round;
    return k;
}

void cf__ahead_keep(cf__ahead *a, cf__range_req *g, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        /* Room: the oldest guesses go first (they were not asked for). */
        while (a->nheld &&
               (a->nheld == sizeof a->held / sizeof a->held[0] ||
                a->held_bytes + g[i].len > CF__AHEAD_MAX_HELD)) {
            free(a->held[0].data);
            drop(a, 0);
        }
        if (g[i].status != CF_OK || a->held_bytes + g[i].len > CF__AHEAD_MAX_HELD) {
            free(g[i].dst);
            continue;
        }
        a->sent++;
        a->held[a->nheld++] = (cf__ahead_range){g[i].off, (size_t)g[i].len, g[i].dst};
        a->held_bytes += g[i].len;
    }
}
