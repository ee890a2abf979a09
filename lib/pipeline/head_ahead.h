/*
 * head_ahead.h - reading ahead of the TIFF parser while a file opens.
 *
 * The parser asks for one range at a time, and an IFD chain can only be
 * followed one IFD after the other: a file whose IFDs lie far apart (a
 * multi-page TIFF, each page's pixels after its IFD) cost one round trip
 * per IFD (255 IFDs 2 MiB apart: 255 requests one after the other, 42 s
 * at 164 ms).  When the parser's requests step through the file by a
 * constant stride, the next ones are probably there too: the opener
 * fetches that many guesses together with the range asked for, twice as
 * many each time the stride held, so a chain of n IFDs opens in about
 * log2(n) + 2 round trips.  Guesses wait here until the parser asks for
 * a byte they hold; those it never asks for are dropped with the cf__ahead
 * (and so never reach the parser's memory or the header cache).
 *
 * A file (or a server) can lay its IFDs out to defeat the guesses: gaps
 * that are all multiples of the stride but never the next one.  So the
 * guesses double only when every guess of the last round was used, and
 * the bytes of guesses never used may not pass the bytes the parser asked
 * for plus CF__AHEAD_SLACK: reading ahead costs at most about twice what
 * the open needs (43b28fd had no read-ahead; the first version fetched
 * 259 MB for 255 IFDs that needed 4 MB).
 */
#ifndef CF_HEAD_AHEAD_H
#define CF_HEAD_AHEAD_H

#include "../io/io.h"

/* Guesses per round, and bytes a round or a held guess may take. */
#define CF__AHEAD_MAX_GUESSES 64
#define CF__AHEAD_MAX_LEN ((uint64_t)1 << 20)
#define CF__AHEAD_MAX_ROUND ((uint64_t)4 << 20)
#define CF__AHEAD_MAX_HELD ((uint64_t)16 << 20)
/* Unused guess bytes allowed beyond the bytes the parser asked for. */
#define CF__AHEAD_SLACK ((uint64_t)1 << 20)

typedef struct cf__ahead_range {
    uint64_t off;
    size_t len;
    uint8_t *data;
} cf__ahead_range;

typedef struct cf__ahead {
    uint64_t size;         /* the file's */
    unsigned max_guesses;  /* per round */
    uint64_t last;         /* offset of the last range fetched on demand */
    uint64_t stride;       /* 0 while unknown */
    unsigned n;            /* guesses planned with the last demand */
    unsigned sent, used;   /* guesses that came back with the last demand,
                            * and how many of them the parser has taken */
    uint64_t demanded;     /* bytes of the ranges asked for and fetched */
    uint64_t taken;        /* bytes of guesses the parser took */
    uint64_t guessed;      /* bytes of guesses sent */
    cf__ahead_range held[CF__AHEAD_MAX_GUESSES * 2];
    unsigned nheld;
    uint64_t held_bytes;
} cf__ahead;

/* max_guesses: at most this many guesses per round (the io's in-flight
 * limit minus one keeps a round in one wave of requests). */
void cf__ahead_init(cf__ahead *a, uint64_t file_size, unsigned max_guesses);
void cf__ahead_free(cf__ahead *a);
/* A held guess containing byte off, removed from a: *r is the caller's to
 * hand to the parser and free.  0 when none. */
int cf__ahead_take(cf__ahead *a, uint64_t off, cf__ahead_range *r);
/* The parser asked for [off, off+len), which no guess holds: the guesses
 * to fetch with it, as requests with their buffers allocated (dst; err
 * NULL), into g (room for CF__AHEAD_MAX_GUESSES).  Returns their count. */
unsigned cf__ahead_plan(cf__ahead *a, uint64_t off, uint64_t len,
                        cf__range_req *g);
/* The guesses came back: keep those that arrived (their buffers are a's
 * now), free the others'. */
void cf__ahead_keep(cf__ahead *a, cf__range_req *g, unsigned n);

#endif
