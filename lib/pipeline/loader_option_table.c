/*
 * loader_option_table.c - cf_loader_option_table: the rows of
 * loader_options.h (scalars, then kernels) as public cf_option_info
 * entries, and cf_option_check for both tables (include/cogfeed.h).
 */
#include "loader_options.h"

#include <pthread.h>
#include <string.h>

#include "../common/common.h"
#include "../common/opt_table.h"
#include "../io/io_options.h"

enum {
#define X(f, def) CF__LDK_##f,
    CF__LOADER_KERNELS(X)
#undef X
    CF__LDK_COUNT
};

static cf_option_info table[CF__LDO_COUNT + CF__LDK_COUNT];
static const char *kernel_names[CF_RS_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (int r = 0; r < CF_RS_COUNT; r++) kernel_names[r] = cf_resampling_name((cf_resampling)r);
#define X(f, ctype, pytype, fmt, def, lo, hi, hint)                                        \
    table[CF__LDO_##f] = CF__OPT_INFO(cf_loader_options, "loader", CF__LDO_##f, f, ctype,  \
                                      pytype, def, lo, hi, hint);
    CF__LOADER_SCALARS(X)
#undef X
    table[CF__LDO_cache_bytes].flags = CF_OPTF_RUNTIME_DEFAULT;
    table[CF__LDO_cache_bytes].default_doc = CF__LD_DEFAULT_CACHE_BYTES_DOC;
#define X(f, def_)                                                                         \
    table[CF__LDO_COUNT + CF__LDK_##f] = (cf_option_info){                                 \
        .name = #f,                                                                        \
        .group = "loader",                                                                 \
        .id = CF__LDO_COUNT + CF__LDK_##f,                                                 \
        .type = CF_OPT_KERNEL,                                                             \
        .ctype = "cf_resampling",                                                          \
        .offset = offsetof(cf_loader_options, f),                                          \
        .size = sizeof(cf_resampling),                                                     \
        .def = {.i = (def_)},                                                               \
        .lo = {.i = 0},                                                                    \
        .hi = {.i = CF_RS_COUNT - 1},                                                      \
        .hint = "",                                                                        \
        .default_doc = "",                                                                 \
        .choices = kernel_names,                                                           \
        .nchoices = CF_RS_COUNT,                                                           \
    };
    CF__LOADER_KERNELS(X)
#undef X
}

const cf_option_info *cf_loader_option_table(size_t *n) {
    pthread_once(&table_once, build_table);
    if (n) *n = CF__LDO_COUNT + CF__LDK_COUNT;
    return table;
}

const cf_option_info *cf_option_by_name(const cf_option_info *tab, size_t n,
                                        const char *name) {
    if (!tab || !name) return NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(tab[i].name, name) == 0) return &tab[i];
    return NULL;
}

cf_status cf_option_check(const cf_option_info *opt, double v, cf_error *err) {
    if (!opt || !opt->group) return cf__err(err, CF_E_ARG, "cf_option_check: no option");
    if (strcmp(opt->group, "io") == 0) return cf__io_check(opt->id, v, err);
    if (strcmp(opt->group, "loader") != 0)
        return cf__err(err, CF_E_ARG, "cf_option_check: unknown group");
    if (opt->id < CF__LDO_COUNT) return cf__loader_check(opt->id, v, err);
    if (opt->type == CF_OPT_KERNEL && v >= 0 && v < CF_RS_COUNT && v == (int)v) return CF_OK;
    return cf__err(err, CF_E_ARG, "loader: %s %.17g is no resampling kernel", opt->name, v);
}
