/*
 * io_options.h - the io's scalar options (cf_io_options), written once.
 * One row per member:
 *
 *   X(field, ctype, pytype, fmt, default, lo, hi, hint)
 *
 * field    the member, and the keyword of cogfeed.IO (and of a Loader's
 *          io_options)
 * ctype    its C type
 * pytype   what the extension parses it into, with PyArg format fmt:
 *          integers wide and signed where the field is narrower, so that
 *          -5 is refused by the range check rather than wrapped
 * default  what cf_io_options_init sets
 * lo, hi   what cf_io_new accepts: cf__io_check, the one place where they
 *          are checked (the extension calls it too, before narrowing).
 *          NaN is never in range.
 * hint     said after a value out of range ("" for none)
 *
 * From it come cf_io_options_init and the checks of cf_io_new (io.c), and
 * the public table cf_io_option_table (io_option_table.c), through which
 * the extension (cogfeed.IO's keywords, python/_cogfeed.c), the CLI's
 * --help (tools/cogfeed.c) and docs/remote.md's table
 * (tools/option_docs.py) read it.  The two paths (header_cache_dir,
 * ca_file) and the signing function (sign, sign_user) are converted by
 * hand.
 */
#ifndef CF_IO_OPTIONS_H
#define CF_IO_OPTIONS_H

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "cogfeed.h"

/* Timeouts: > 0; inf (or huge) is no bound (http.c). */
#define CF__IO_POSITIVE DBL_TRUE_MIN

#define CF__IO_SCALARS(X)                                                                 \
    X(max_inflight, int, long long, "L", 64, 1, INT_MAX,                                  \
      "more than CF_IO_MAX_INFLIGHT (1024) is taken as 1024")                             \
    X(header_bytes, size_t, long long, "L", 64 << 10, 16, CF_MAX_HEADER_BYTES,            \
      "a TIFF header needs 16")                                                           \
    X(merge_gap, size_t, long long, "L", 64 << 10, 0, INT64_MAX, "")                      \
    X(request_timeout_s, double, double, "d", 60, CF__IO_POSITIVE, INFINITY,              \
      "> 0; inf: no deadline")                                                            \
    X(connect_timeout_s, double, double, "d", 10, CF__IO_POSITIVE, INFINITY,              \
      "> 0; inf: no bound")                                                               \
    X(low_speed_time_s, double, double, "d", 15, 0, INFINITY, "0: no stall check")        \
    X(low_speed_bytes, long, long long, "L", 1024, 0, LONG_MAX, "")                       \
    X(max_retries, int, long long, "L", 6, 0, INT_MAX, "")                                \
    X(retry_budget, int, long long, "L", 1000, 0, INT_MAX, "0: no retries")               \
    X(retry_base_ms, double, double, "d", 100, 0, INFINITY, "")                           \
    X(retry_max_ms, double, double, "d", 10000, 0, INFINITY, "")                          \
    X(verify_tls, int, int, "p", 1, INT_MIN, INT_MAX, "")                                 \
    X(max_open_files, int, long long, "L", 0, 0, INT_MAX,                                 \
      "0: a quarter of RLIMIT_NOFILE")                                                    \
    X(hedge_after_ms, double, double, "d", 0, -INFINITY, INFINITY,                        \
      "0: adaptive, < 0: never")                                                          \
    X(header_cache_max_bytes, uint64_t, unsigned long long, "K", 0, 0, UINT64_MAX,        \
      "0: 1 GiB")                                                                         \
    X(header_memory_max, uint64_t, unsigned long long, "K", 0, 0, UINT64_MAX,             \
      "0: 256 MiB")                                                                       \
    X(cache_bytes, int64_t, long long, "L", 0, -1, INT64_MAX,                              \
      "0: 5% of the memory, -1: none")                                                    \
    X(sign_margin_s, double, double, "d", 300, 0, INFINITY,                               \
      "a signature is renewed this long before it expires")

enum {
#define CF__X(f, ...) CF__IOO_##f,
    CF__IO_SCALARS(CF__X)
#undef CF__X
    CF__IOO_COUNT
};

/* Whether v is a valid value of scalar option `id` (CF__IOO_*): CF_OK,
 * or CF_E_ARG with "cf_io_new: NAME V not in [LO, HI] (HINT)". */
cf_status cf__io_check(int id, double v, cf_error *err);

#endif
