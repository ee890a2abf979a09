/*
 * io_option_table.c - cf_io_option_table: the rows of io_options.h as
 * public cf_option_info entries (include/cogfeed.h).
 */
#include "io_options.h"

#include <pthread.h>

#include "../common/opt_table.h"

static cf_option_info table[CF__IOO_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
#define X(f, ctype, pytype, fmt, def, lo, hi, hint)                                        \
    table[CF__IOO_##f] =                                                                   \
        CF__OPT_INFO(cf_io_options, "io", CF__IOO_##f, f, ctype, pytype, def, lo, hi, hint);
    CF__IO_SCALARS(X)
#undef X
}

const cf_option_info *cf_io_option_table(size_t *n) {
    pthread_once(&table_once, build_table);
    if (n) *n = CF__IOO_COUNT;
    return table;
}
