/*
 * test_pipeline_loader_options.c - the Loader's option table
 * (lib/pipeline/loader_options.h) through loader_build.c: the defaults
 * cf_loader_options_init sets, every scalar's range accepted at its ends
 * and refused just past them by cf__loader_check and by cf_loader_new
 * (naming the option, before any file is opened), and the old name of
 * concurrency.
 */
#include "cf_test.h"
#include "pipeline/loader_options.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static void test_defaults(void) {
    cf_loader_options o;
    memset(&o, 0xAB, sizeof o);
    cf_loader_options_init(&o);
    CHECK(o.struct_size == sizeof o);
    CHECK(o.time_steps == 1 && o.patch_size == 256 && o.batch_size == 32);
    CHECK(o.sampler == CF_SAMPLER_RANDOM && o.world_size == 1 && o.rank == 0);
    CHECK(o.apply_scale_offset == 1 && o.skip_limit == 0.5);
    /* cache_bytes: GDAL_CACHEMAX's default, 5% of the memory, at least
     * 256 MiB. */
    {
        uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t want = ram / 20 > ((uint64_t)256 << 20) ? ram / 20 : (uint64_t)256 << 20;
        CHECK(o.cache_bytes == cf__ld_default_cache_bytes());
        CHECK(o.cache_bytes >= (size_t)256 << 20 && o.cache_bytes <= want);
    }
    CHECK(o.inflight_bytes == 0);
    CHECK(o.prefetch == 0 && o.threads == 0 && o.concurrency == 0);
    CHECK(o.mean == NULL && o.nmean == 0 && o.io == NULL && o.images == NULL);
    CHECK(o.reproject == 1 && o.ungeoreferenced == 0 && o.error_threshold == 0.125);
    CHECK(o.resampling == CF_RS_BILINEAR && o.mask_resampling == CF_RS_NEAREST);
    CHECK(o.grid == NULL && o.grid_crs == NULL && o.layer_resampling == NULL);
    /* Every default lies in its own range. */
#define X(f, ...) CHECK(cf__loader_check(CF__LDO_##f, (double)o.f, NULL) == CF_OK);
    CF__LOADER_SCALARS(X)
#undef X
    /* The old name is the same member. */
    o.max_inflight = 7;
    CHECK(o.concurrency == 7);
}

typedef struct edge {
    int id;
    double lo, hi;
    const char *name;
} edge;

static void test_ranges(void) {
    const edge e[] = {
        {CF__LDO_time_steps, 1, 1 << 20, "time_steps"},
        {CF__LDO_nlayers, 0, 64, "nlayers"},
        {CF__LDO_patch_size, 1, 65536, "patch_size"},
        {CF__LDO_batch_size, 1, 65536, "batch_size"},
        {CF__LDO_prefetch, 0, 64, "prefetch"},
        {CF__LDO_threads, 0, 1024, "threads"},
        {CF__LDO_concurrency, 0, 1024, "concurrency"},
        {CF__LDO_skip_limit, 0, 1, "skip_limit"},
    };
    for (size_t i = 0; i < sizeof e / sizeof *e; i++) {
        cf_error err;
        CHECK(cf__loader_check(e[i].id, e[i].lo, NULL) == CF_OK);
        CHECK(cf__loader_check(e[i].id, e[i].hi, NULL) == CF_OK);
        double step = e[i].id == CF__LDO_skip_limit ? 0.01 : 1;
        CHECK(cf__loader_check(e[i].id, e[i].lo - step, &err) == CF_E_ARG &&
              strstr(err.msg, e[i].name) && strstr(err.msg, "not in ["));
        CHECK(cf__loader_check(e[i].id, e[i].hi + step, &err) == CF_E_ARG &&
              strstr(err.msg, e[i].name));
    }
    cf_error err;
    CHECK(cf__loader_check(CF__LDO_skip_limit, NAN, &err) == CF_E_ARG);
    CHECK(cf__loader_check(CF__LDO_error_threshold, 0, NULL) == CF_OK);
    CHECK(cf__loader_check(CF__LDO_error_threshold, -0.01, &err) == CF_E_ARG &&
          strstr(err.msg, "error_threshold -0.01 not in [0, "));
    CHECK(cf__loader_check(CF__LDO_error_threshold, NAN, &err) == CF_E_ARG);
    CHECK(cf__loader_check(CF__LDO_error_threshold, INFINITY, &err) == CF_E_ARG);
    CHECK(cf__loader_check(CF__LDO_inflight_bytes, -1, &err) == CF_E_ARG &&
          strstr(err.msg, "inflight_bytes -1 not in [0, "));
    CHECK(cf__loader_check(CF__LDO_level, -1, &err) == CF_E_ARG &&
          strstr(err.msg, "level -1") && strstr(err.msg, "(0 is full resolution"));
    CHECK(cf__loader_check(CF__LDO_COUNT, 0, &err) == CF_E_ARG);
    /* Flags are C ints: any nonzero value is yes. */
    CHECK(cf__loader_check(CF__LDO_drop_last, 2, NULL) == CF_OK);
}

/* cf_loader_new refuses each bad value by name before opening a file. */
static void test_new_checks(void) {
    const char *imgs[] = {"/nonexistent/never-opened.tif"};
    cf_loader_options o;
    cf_loader *ld = (cf_loader *)&o;
    cf_error e;
#define BAD(field, v, name)                                                           \
    do {                                                                              \
        cf_loader_options_init(&o);                                                   \
        o.images = imgs;                                                              \
        o.nfiles = 1;                                                                 \
        o.field = v;                                                                  \
        CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG && ld == NULL &&                 \
              strstr(e.msg, name " ") && !strstr(e.msg, "never-opened"));             \
    } while (0)
    BAD(time_steps, 0, "time_steps");
    BAD(batch_size, 70000, "batch_size");
    BAD(patch_size, 0, "patch_size");
    BAD(level, -2, "level");
    BAD(world_size, 0, "world_size");
    BAD(rank, -1, "rank");
    BAD(prefetch, -1, "prefetch");
    BAD(prefetch, 65, "prefetch");
    BAD(threads, 1025, "threads");
    BAD(concurrency, -1, "concurrency");
    BAD(max_inflight, 2000, "concurrency");
    BAD(skip_limit, -0.5, "skip_limit");
    BAD(error_threshold, -1, "error_threshold");
    BAD(resampling, (cf_resampling)CF_RS_COUNT, "resampling");
    BAD(mask_resampling, (cf_resampling)-1, "mask_resampling");
#undef BAD
    /* A mosaic's step may hold up to 2^20 scenes; a sample at most 1024
     * time steps. */
    cf_loader_options_init(&o);
    o.images = imgs;
    o.nfiles = 1;
    o.time_steps = 1025;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG && ld == NULL &&
          strstr(e.msg, "1025 time steps (at most 1024") && !strstr(e.msg, "never-opened"));
    o.mosaic = 1;
    o.step_scenes = 1;
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_ARG && strstr(e.msg, "1025 time steps"));
    /* In range, the file is what fails (opened, and named). */
    cf_loader_options_init(&o);
    o.images = imgs;
    o.nfiles = 1;
    o.concurrency = 1024;
    CHECK(cf_loader_new(&o, &ld, &e) != CF_OK && strstr(e.msg, "never-opened"));
}

int main(void) {
    test_defaults();
    test_ranges();
    test_new_checks();
    return CF_TEST_END();
}
