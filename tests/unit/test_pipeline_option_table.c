/*
 * test_pipeline_option_table.c - the public option tables
 * (cf_loader_option_table, cf_io_option_table, cf_option_by_name,
 * cf_option_check in include/cogfeed.h) against the rows they come from
 * (lib/pipeline/loader_options.h, lib/io/io_options.h): one entry per
 * row in order, each default equal to what cf_*_options_init puts at the
 * entry's offset, exact 64-bit ranges, kernels named as
 * cf_resampling_name names them, and the check giving cf_loader_new's
 * and cf_io_new's messages.
 */
#include "cf_test.h"
#include "io/io_options.h"
#include "pipeline/loader_options.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* The member at opt->offset of the options struct at base, widened. */
static cf_option_value member(const void *base, const cf_option_info *opt) {
    const unsigned char *p = (const unsigned char *)base + opt->offset;
    cf_option_value v = {.u = 0};
    if (opt->type == CF_OPT_FLOAT) {
        CHECK(opt->size == sizeof(double));
        memcpy(&v.d, p, sizeof v.d);
    } else if (opt->type == CF_OPT_UINT) {
        CHECK(opt->size == sizeof(uint64_t));
        memcpy(&v.u, p, sizeof v.u);
    } else if (opt->size == 4) {
        int32_t x;
        memcpy(&x, p, 4);
        /* uint32_t members hold values below 2^31 in these tests' defaults */
        v.i = x;
    } else {
        CHECK(opt->size == 8);
        int64_t x;
        memcpy(&x, p, 8);
        v.i = x;
    }
    if (opt->type == CF_OPT_BOOL) v.i = v.i != 0;
    return v;
}

static int same(const cf_option_info *o, cf_option_value a, cf_option_value b) {
    if (o->type == CF_OPT_FLOAT) return a.d == b.d;
    if (o->type == CF_OPT_UINT) return a.u == b.u;
    return a.i == b.i;
}

static void test_loader_table(void) {
    size_t n = 0;
    const cf_option_info *t = cf_loader_option_table(&n);
    CHECK(t != NULL && n == CF__LDO_COUNT + 2);
    CHECK(cf_loader_option_table(NULL) == t);
    const char *names[] = {
#define X(f, ...) #f,
        CF__LOADER_SCALARS(X)
#undef X
#define X(f, def) #f,
        CF__LOADER_KERNELS(X)
#undef X
    };
    CHECK(sizeof names / sizeof *names == n);
    cf_loader_options o;
    memset(&o, 0xAB, sizeof o);
    cf_loader_options_init(&o);
    for (size_t i = 0; i < n; i++) {
        CHECK(strcmp(t[i].name, names[i]) == 0);
        CHECK(strcmp(t[i].group, "loader") == 0 && t[i].id == (int)i);
        CHECK(t[i].offset + t[i].size <= sizeof o && t[i].hint && t[i].default_doc);
        CHECK(same(&t[i], member(&o, &t[i]), t[i].def));
        if (t[i].type == CF_OPT_KERNEL) continue;
        /* The default is in range; so are lo and hi. */
        double d = t[i].type == CF_OPT_FLOAT  ? t[i].def.d
                   : t[i].type == CF_OPT_UINT ? (double)t[i].def.u
                                              : (double)t[i].def.i;
        CHECK(cf_option_check(&t[i], d, NULL) == CF_OK);
    }
    const cf_option_info *ps = cf_option_by_name(t, n, "patch_size");
    CHECK(ps && ps->type == CF_OPT_INT && ps->def.i == 256 && ps->lo.i == 1 &&
          ps->hi.i == 65536 && strcmp(ps->ctype, "uint32_t") == 0);
    const cf_option_info *seed = cf_option_by_name(t, n, "seed");
    CHECK(seed && seed->type == CF_OPT_UINT && seed->hi.u == UINT64_MAX);
    const cf_option_info *ep = cf_option_by_name(t, n, "epoch");
    CHECK(ep && ep->type == CF_OPT_INT && ep->hi.i == INT64_MAX);
    const cf_option_info *sl = cf_option_by_name(t, n, "skip_limit");
    CHECK(sl && sl->type == CF_OPT_FLOAT && sl->def.d == 0.5 && sl->hi.d == 1);
    const cf_option_info *dl = cf_option_by_name(t, n, "drop_last");
    CHECK(dl && dl->type == CF_OPT_BOOL && dl->lo.i == 0 && dl->hi.i == 1 && dl->def.i == 0);
    const cf_option_info *pf = cf_option_by_name(t, n, "prefetch");
    CHECK(pf && strcmp(pf->hint, "0: auto") == 0 && pf->hi.i == CF__LD_MAX_PREFETCH);
    /* cache_bytes's default is this machine's. */
    const cf_option_info *cb = cf_option_by_name(t, n, "cache_bytes");
    CHECK(cb && (cb->flags & CF_OPTF_RUNTIME_DEFAULT) && strstr(cb->default_doc, "5%") &&
          cb->def.i == (int64_t)cf__ld_default_cache_bytes());
    CHECK(!(ps->flags & CF_OPTF_RUNTIME_DEFAULT) && ps->default_doc[0] == 0);
    /* The kernels: cf_resampling values named as cf_resampling_name does. */
    const cf_option_info *rs = cf_option_by_name(t, n, "resampling");
    const cf_option_info *mrs = cf_option_by_name(t, n, "mask_resampling");
    CHECK(rs && rs->type == CF_OPT_KERNEL && rs->def.i == CF_RS_BILINEAR);
    CHECK(mrs && mrs->type == CF_OPT_KERNEL && mrs->def.i == CF_RS_NEAREST);
    CHECK(rs->nchoices == CF_RS_COUNT && rs->lo.i == 0 && rs->hi.i == CF_RS_COUNT - 1);
    for (int r = 0; r < rs->nchoices; r++)
        CHECK(strcmp(rs->choices[r], cf_resampling_name((cf_resampling)r)) == 0);
    CHECK(strcmp(rs->choices[CF_RS_BILINEAR], "bilinear") == 0);
    CHECK(cf_option_by_name(t, n, "no_such_option") == NULL);
    CHECK(cf_option_by_name(t, n, NULL) == NULL && cf_option_by_name(NULL, 0, "seed") == NULL);
    /* Not listed: what is no scalar. */
    CHECK(cf_option_by_name(t, n, "images") == NULL && cf_option_by_name(t, n, "io") == NULL);
}

static void test_io_table(void) {
    size_t n = 0;
    const cf_option_info *t = cf_io_option_table(&n);
    CHECK(t != NULL && n == CF__IOO_COUNT);
    const char *names[] = {
#define X(f, ...) #f,
        CF__IO_SCALARS(X)
#undef X
    };
    cf_io_options o;
    memset(&o, 0xAB, sizeof o);
    cf_io_options_init(&o);
    for (size_t i = 0; i < n; i++) {
        CHECK(strcmp(t[i].name, names[i]) == 0);
        CHECK(strcmp(t[i].group, "io") == 0 && t[i].id == (int)i);
        CHECK(same(&t[i], member(&o, &t[i]), t[i].def));
        CHECK(!(t[i].flags & CF_OPTF_RUNTIME_DEFAULT));
    }
    const cf_option_info *mi = cf_option_by_name(t, n, "max_inflight");
    CHECK(mi && mi->type == CF_OPT_INT && mi->def.i == 64 && mi->lo.i == 1);
    const cf_option_info *rt = cf_option_by_name(t, n, "request_timeout_s");
    CHECK(rt && rt->type == CF_OPT_FLOAT && rt->def.d == 60 && rt->lo.d == DBL_TRUE_MIN &&
          isinf(rt->hi.d));
    const cf_option_info *vt = cf_option_by_name(t, n, "verify_tls");
    CHECK(vt && vt->type == CF_OPT_BOOL && vt->def.i == 1);
    const cf_option_info *hc = cf_option_by_name(t, n, "header_cache_max_bytes");
    CHECK(hc && hc->type == CF_OPT_UINT && hc->hi.u == UINT64_MAX);
    CHECK(cf_option_by_name(t, n, "ca_file") == NULL);
}

static void test_check(void) {
    size_t n, m;
    const cf_option_info *t = cf_loader_option_table(&n);
    const cf_option_info *io = cf_io_option_table(&m);
    cf_error e1, e2;
    const cf_option_info *ps = cf_option_by_name(t, n, "patch_size");
    CHECK(cf_option_check(ps, 1, NULL) == CF_OK && cf_option_check(ps, 65536, NULL) == CF_OK);
    CHECK(cf_option_check(ps, 65537, &e1) == CF_E_ARG);
    CHECK(cf__loader_check(CF__LDO_patch_size, 65537, &e2) == CF_E_ARG);
    CHECK(strcmp(e1.msg, e2.msg) == 0 && strstr(e1.msg, "loader: patch_size 65537 not in"));
    CHECK(cf_option_check(cf_option_by_name(t, n, "skip_limit"), NAN, &e1) == CF_E_ARG);
    /* Flags take any int. */
    CHECK(cf_option_check(cf_option_by_name(t, n, "drop_last"), -5, NULL) == CF_OK);
    const cf_option_info *rs = cf_option_by_name(t, n, "resampling");
    CHECK(cf_option_check(rs, CF_RS_MODE, NULL) == CF_OK);
    CHECK(cf_option_check(rs, CF_RS_COUNT, &e1) == CF_E_ARG &&
          strstr(e1.msg, "resampling 5 is no resampling kernel"));
    CHECK(cf_option_check(rs, -1, &e1) == CF_E_ARG);
    CHECK(cf_option_check(rs, 1.5, &e1) == CF_E_ARG);
    CHECK(cf_option_check(rs, 1e300, &e1) == CF_E_ARG);
    const cf_option_info *ct = cf_option_by_name(io, m, "connect_timeout_s");
    CHECK(cf_option_check(ct, INFINITY, NULL) == CF_OK);
    CHECK(cf_option_check(ct, 0, &e1) == CF_E_ARG &&
          strstr(e1.msg, "cf_io_new: connect_timeout_s 0 not in (0, inf]"));
    CHECK(cf_option_check(NULL, 0, &e1) == CF_E_ARG);
    cf_option_info bad = *ps;
    bad.group = "nothing";
    CHECK(cf_option_check(&bad, 1, &e1) == CF_E_ARG);
    bad = *ps;
    bad.id = 1000;
    CHECK(cf_option_check(&bad, 1, &e1) == CF_E_ARG);
}

/* The first calls race: every thread gets the one table, built once. */
static void *first_call(void *arg) {
    size_t n;
    *(const cf_option_info **)arg = cf_io_option_table(&n);
    return NULL;
}

static void test_threads(void) {
    pthread_t th[8];
    const cf_option_info *got[8];
    for (int i = 0; i < 8; i++) CHECK(pthread_create(&th[i], NULL, first_call, &got[i]) == 0);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    size_t n;
    const cf_option_info *t = cf_io_option_table(&n);
    for (int i = 0; i < 8; i++) CHECK(got[i] == t && strcmp(got[i][0].name, "max_inflight") == 0);
}

int main(void) {
    test_threads(); /* first: the tables are not built yet */
    test_loader_table();
    test_io_table();
    test_check();
    return CF_TEST_END();
}
