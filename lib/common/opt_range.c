/*
 * opt_range.c - the range check of an option table (lib/io/io_options.h,
 * lib/pipeline/loader_options.h): one message for every option set.
 */
#include "common.h"

#include <float.h>

cf_status cf__opt_check(const cf__opt_range *tab, int n, int id, double v, const char *who,
                        cf_error *err) {
    if (id < 0 || id >= n) return cf__err(err, CF_E_ARG, "%s: unknown option %d", who, id);
    const cf__opt_range *r = &tab[id];
    if (v >= r->lo && v <= r->hi) return CF_OK;
    /* %.17g prints integers exactly (every integer option fits 2^53 or is
     * unbounded); the smallest positive double stands for "> 0". */
    int open_lo = r->lo == DBL_TRUE_MIN;
    return cf__err(err, CF_E_ARG, "%s: %s %.17g not in %c%.17g, %.17g]%s%s%s", who, r->name, v,
                   open_lo ? '(' : '[', open_lo ? 0.0 : r->lo, r->hi, r->hint[0] ? " (" : "",
                   r->hint, r->hint[0] ? ")" : "");
}
