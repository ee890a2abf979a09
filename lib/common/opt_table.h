/*
 * opt_table.h - building a public option table (cf_option_info,
 * include/cogfeed.h) from the rows of an X-macro option list
 * (lib/io/io_options.h, lib/pipeline/loader_options.h):
 *
 *   X(field, ctype, pytype, fmt, default, lo, hi, hint)
 *
 * The row's pytype (what the extension parsed it into) gives the type:
 * long long a signed integer, unsigned long long a uint64_t, double a
 * float, int a flag.  Values are converted once, to that type, so that
 * INT64_MAX and UINT64_MAX stay exact.
 */
#ifndef CF_OPT_TABLE_H
#define CF_OPT_TABLE_H

#include <stddef.h>

#include "cogfeed.h"

static inline cf_option_value cf__optv_ll(long long v) {
    cf_option_value r = {.i = v};
    return r;
}
static inline cf_option_value cf__optv_ull(unsigned long long v) {
    cf_option_value r = {.u = v};
    return r;
}
static inline cf_option_value cf__optv_d(double v) {
    cf_option_value r = {.d = v};
    return r;
}
static inline cf_option_value cf__optv_flag(int v) {
    cf_option_value r = {.i = v != 0};
    return r;
}

#define CF__OPT_TYPE(pytype)                                                              \
    _Generic((pytype)0, long long: CF_OPT_INT, unsigned long long: CF_OPT_UINT,           \
             double: CF_OPT_FLOAT, int: CF_OPT_BOOL)
#define CF__OPTV(pytype, x)                                                               \
    _Generic((pytype)0, long long: cf__optv_ll, unsigned long long: cf__optv_ull,         \
             double: cf__optv_d, int: cf__optv_flag)((pytype)(x))

/* One cf_option_info of row (f, ctype, pytype, fmt, def, lo, hi, hint) of
 * the options struct S, at index i of group grp.  Flags take any int
 * (nonzero is yes): their range reads [0, 1]. */
#define CF__OPT_INFO(S, grp, i, f, ctype_, pytype, def_, lo_, hi_, hint_)                      \
    ((cf_option_info){                                                                    \
        .name = #f,                                                                       \
        .group = grp,                                                                     \
        .id = (i),                                                                        \
        .type = CF__OPT_TYPE(pytype),                                                     \
        .ctype = #ctype_,                                                                  \
        .offset = offsetof(S, f),                                                         \
        .size = sizeof(((S *)0)->f),                                                      \
        .def = CF__OPTV(pytype, def_),                                                     \
        .lo = CF__OPT_TYPE(pytype) == CF_OPT_BOOL ? cf__optv_ll(0) : CF__OPTV(pytype, lo_),  \
        .hi = CF__OPT_TYPE(pytype) == CF_OPT_BOOL ? cf__optv_ll(1) : CF__OPTV(pytype, hi_),  \
        .hint = hint_,                                                                     \
        .default_doc = "",                                                                \
    })

#endif
