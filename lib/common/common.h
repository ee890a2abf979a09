/*
 * common.h - internal helpers shared by every layer: error filling, checked
 * size arithmetic, byte-order reads, monotonic time.  Depends on nothing but
 * libc and the public header.
 */
#ifndef CF_COMMON_H
#define CF_COMMON_H

#include "cogfeed.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Internal status (never returned by public functions): the TIFF parser
 * needs more bytes of the file.  Outside the public enum's range. */
#define CF__NEED_BYTES ((cf_status)100)

#if defined(__GNUC__)
#define CF__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define CF__UNUSED __attribute__((unused))
#else
#define CF__PRINTF(a, b)
#define CF__UNUSED
#endif

/* Fill `err` (may be NULL) and return `code`. */
cf_status cf__err(cf_error *err, cf_status code, const char *fmt, ...)
    CF__PRINTF(3, 4);
/* Prefix the existing message with "prefix: " and return `st`, the status
 * of the failure being described: err may be NULL (cogfeed.h promises it
 * everywhere), and then only the status tells the caller what happened. */
cf_status cf__err_prefix(cf_error *err, cf_status st, const char *fmt, ...)
    CF__PRINTF(3, 4);
/* Append "; hint" to the existing message (cut to fit) and return `st`. */
cf_status cf__err_hint(cf_error *err, cf_status st, const char *fmt, ...)
    CF__PRINTF(3, 4);

/* Forward a failure (zstd's FORWARD_IF_ERROR): evaluate `expr`, a
 * cf_status, once, and return it from the calling function unless it is
 * CF_OK.  Its message was written where the failure was found; a caller
 * that knows more context forwards with cf__err_prefix instead.  Any
 * status but CF_OK goes up, CF_E_END and CF__NEED_BYTES included.  Where
 * cleanup must run first, the function keeps `cf_status st`, sets it and
 * jumps to `done:` (docs/internals.md, "The error idiom"). */
#define CF__TRY(expr)                                 \
    do {                                              \
        cf_status cf__try_st_ = (expr);               \
        if (cf__try_st_ != CF_OK) return cf__try_st_; \
    } while (0)

void cf__err_clear(cf_error *err);
/* Escape, in place, the control characters (bytes below 0x20 and 0x7f) of
 * the message in msg[cap] as "\xNN", cutting the end when it no longer
 * fits (never inside an escape).  A message quotes URLs, names and
 * servers' answers, and must not carry a raw ESC, BEL or CR to a
 * terminal or a log.  cf__err, cf__err_prefix and cf__err_hint do it. */
void cf__msg_escape(char *msg, size_t cap);

/* One row of an option table (io_options.h, loader_options.h): the
 * option's name, its accepted range [lo, hi] (lo DBL_TRUE_MIN: > 0) and a
 * hint said after a value out of range ("" for none). */
typedef struct cf__opt_range {
    const char *name;
    double lo, hi;
    const char *hint;
} cf__opt_range;
/* CF_OK when v is in tab[id]'s range (NaN never is), else CF_E_ARG with
 * "WHO: NAME V not in [LO, HI] (HINT)". */
cf_status cf__opt_check(const cf__opt_range *tab, int n, int id, double v, const char *who,
                        cf_error *err);

/* Checked arithmetic: return false on overflow. */
static inline bool cf__mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool cf__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool cf__mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* Byte-order reads from unaligned memory. */
static inline uint16_t cf__rd16(const uint8_t *p, bool be) {
    return be ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}
static inline uint32_t cf__rd32(const uint8_t *p, bool be) {
    return be ? ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                 (uint32_t)p[2] << 8 | p[3])
              : ((uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[1] << 8 | p[0]);
}
static inline uint64_t cf__rd64(const uint8_t *p, bool be) {
    uint64_t a = cf__rd32(p, be), b = cf__rd32(p + 4, be);
    return be ? (a << 32 | b) : (b << 32 | a);
}

/* Decoded bytes of a chunk (tile or strip) of width x height pixels of
 * `samples` samples of `bits` bits, rows padded to whole bytes; 0 when
 * a factor is 0, on overflow, or above CF_MAX_CHUNK_BYTES.  The one rule
 * the TIFF parser checks against and the codecs size buffers by. */
static inline uint64_t cf__chunk_bytes(uint64_t width, uint64_t samples,
                                       uint64_t bits, uint64_t height) {
    uint64_t rowbits, total;
    if (!width || !samples || !bits || !height ||
        !cf__mul_u64(width, samples, &rowbits) ||
        !cf__mul_u64(rowbits, bits, &rowbits) ||
        !cf__mul_u64(rowbits / 8 + (rowbits % 8 != 0), height, &total) ||
        total > CF_MAX_CHUNK_BYTES)
        return 0;
    return total;
}

/* Seconds from a monotonic clock. */
double cf__now(void);

/* CPUs online (at least 1). */
size_t cf__ncpu(void);
/* The CPUs this process may run on (its affinity mask: a container's or
 * taskset's share of the machine), at least 1. */
size_t cf__ncpu_usable(void);
/* fn(parts + k * size) for k = 0 .. n - 1, each on a thread of its own
 * but the first, which runs on the calling thread (as does any part
 * whose thread cannot start); returns when every part has run. */
void cf__run_parts(void *(*fn)(void *), void *parts, size_t size, size_t n);

/* The whole machine's CPU time so far, in clock ticks: *busy (all but
 * idle and iowait) and *total.  0 where it cannot be read (no /proc/stat):
 * callers then fall back to their own process's CPU time. */
int cf__cpu_ticks(uint64_t *busy, uint64_t *total);

/* Name the calling thread ("cf-io", "cf-reader", ...) for top and perf;
 * at most 15 characters.  No-op where unsupported. */
void cf__thread_name(const char *name);

/* The most bytes (with the NUL) a file or URL name takes in messages.
 * cf_error.msg holds 768: a message with two names still keeps its
 * reason, which a longer name would push off the end. */
#define CF__NAME_MAX 200

/* Copy the n bytes at s into out as a name for messages: whole when they
 * fit in outlen - 1 bytes, else the head and the tail with "..." between
 * (the tail holds the file name, the head the host), cut between UTF-8
 * characters.  Always NUL-terminates when outlen > 0. */
void cf__name_fit(const char *s, size_t n, char *out, size_t outlen);

/* cf__name_fit of a NUL-terminated name into CF__NAME_MAX bytes, on the
 * heap; NULL when out of memory. */
char *cf__name_dup(const char *name);

/* Copy `url` into `out` without userinfo, query string or fragment, so
 * that it can appear in messages; a long one keeps its head and tail
 * (cf__name_fit).  Always NUL-terminates. */
void cf__redact_url(const char *url, char *out, size_t outlen);
/* Length of "scheme" when url starts with "scheme://" (RFC 3986: a
 * letter, then letters, digits, '+', '-', '.'), else 0; _n: of the n
 * bytes at url (not NUL-terminated). */
size_t cf__url_scheme_len(const char *url);
size_t cf__url_scheme_len_n(const char *url, size_t n);

/* Thin wrappers that make failed allocations testable in one place. */
void *cf__malloc(size_t n);
void *cf__calloc(size_t n, size_t sz);
void *cf__realloc(void *p, size_t n);
char *cf__strdup(const char *s);
/* A growing array *p of *cap elements of elem bytes made to hold `need`:
 * capacity doubled from `first` (realloc'd; *p and *cap updated).  false
 * on overflow or a failed allocation (*p left as it was). */
bool cf__grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);

#endif
