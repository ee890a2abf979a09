/*
 * loader_open.c - the Loader's inputs: every image, mask and layer opened
 * from many threads at once (remote opens are a round trip each), or,
 * described (cf_loader_options.described), declared now and opened when
 * a sample first reads it; then each placed on its sample's target grid
 * by sample_grid.c (read as it lies, shifted, resampled or reprojected;
 * or refused, naming the file).
 */
#include "loader_internal.h"

#include <stdatomic.h>

/* Files being opened by many threads at once: each takes the next
 * index.  A failure stops further claims; the one reported is the lowest
 * failing index, which is always tried (indices are claimed in order), so
 * the error names the first bad file of the list whatever the timing. */
typedef struct open_job {
    cf_loader *ld;
    const cf_input_desc *desc; /* per url, or NULL: every header read now */
    _Atomic size_t next;
    _Atomic int stop;
    pthread_mutex_t mu;
    size_t bad;
    cf_status st;
    cf_error err;
} open_job;

/* Remote opens are one round trip each, so opening takes files / threads
 * round trips: 2,000 files at 164 ms took 20.8 s from 16 threads, 2.9 s
 * from 128 (the io loops keep them all in flight; waiting threads cost
 * only their stacks). */
#define LD_OPEN_THREADS 128

cf_cog **cf__ld_url_slot(cf_loader *ld, size_t i) {
    size_t ni = ld->o.nfiles * (size_t)ld->o.time_steps;
    if (i < ni) return &ld->img[i];
    i -= ni;
    if (ld->msk) {
        if (i < ld->o.nfiles) return &ld->msk[i];
        i -= ld->o.nfiles;
    }
    size_t nl = ld->o.nfiles * ld->nlf;
    if (i < nl) return &ld->lay[i];
    return &ld->scm[i - nl];
}

/* Batches hold real numbers: a file of complex samples (CInt16, ...) is
 * refused, saying how to read it instead. */
static cf_status real_samples(const cf_cog *cog, cf_error *e) {
    cf_cog_info inf;
    cf_cog_get_info(cog, &inf);
    if (!cf_dtype_is_complex(inf.dtype)) return CF_OK;
    return cf__err(e, CF_E_UNSUPPORTED,
                   "loader: %s has complex samples (%s), and the Loader's "
                   "batches are real: read it with Cog.read (numpy complex), "
                   "or make files of its real and imaginary parts or its "
                   "amplitude first", cf_cog_name(cog), cf_dtype_name(inf.dtype));
}

static void *open_some(void *arg) {
    open_job *j = arg;
    cf_error e;
    cf__err_clear(&e);
    while (!atomic_load(&j->stop)) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->ld->nurls) break;
        cf_io *io = j->ld->ios[i % (size_t)j->ld->nios];
        const cf_input_desc *d = j->desc && j->desc[i].grid.width ? &j->desc[i] : NULL;
        cf_status st = d ? cf__cog_declare(io, j->ld->urls[i], d, cf__ld_url_slot(j->ld, i), &e)
                         : cf_cog_open(io, j->ld->urls[i], cf__ld_url_slot(j->ld, i), &e);
        if (st == CF_OK) st = real_samples(*cf__ld_url_slot(j->ld, i), &e);
        if (st != CF_OK) {
            pthread_mutex_lock(&j->mu);
            if (j->st == CF_OK || i < j->bad) {
                j->st = st;
                j->bad = i;
                j->err = e;
            }
            pthread_mutex_unlock(&j->mu);
            atomic_store(&j->stop, 1);
        }
    }
    return NULL;
}

/* Opening is latency-bound on remote storage (one header request each):
 * open files from many threads at once. */
static cf_status open_all(cf_loader *ld, const cf_input_desc *desc, cf_error *err) {
    size_t opened = 0; /* not described: their headers are read now */
    for (size_t i = 0; i < ld->nurls; i++) opened += !desc || !desc[i].grid.width;
    size_t k = ld->remote && opened > 1 ? LD_OPEN_THREADS : 1;
    if (k > ld->nurls) k = ld->nurls;
    open_job j;
    j.ld = ld;
    j.desc = desc;
    atomic_init(&j.next, 0);
    atomic_init(&j.stop, 0);
    pthread_mutex_init(&j.mu, NULL);
    j.bad = 0;
    j.st = CF_OK;
    cf__err_clear(&j.err);
    pthread_t th[LD_OPEN_THREADS];
    size_t started = 0;
    /* This thread is one of the k; fewer spawned threads only slow it. */
    while (started + 1 < k && pthread_create(&th[started], NULL, open_some, &j) == 0)
        started++;
    open_some(&j);
    for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&j.mu);
    if (j.st != CF_OK) {
        if (err) *err = j.err;
        return cf__err_prefix(err, j.st, "loader: opening inputs");
    }
    return CF_OK;
}

cf_status cf__ld_level(const cf_loader *ld, const cf_cog *c, cf_level_info *li,
                       cf_error *err) {
    cf_status st = cf_cog_level_info(c, ld->o.level, li, err);
    if (st != CF_OK) return cf__err_prefix(err, st, "loader");
    return CF_OK;
}

/* The descriptions the loader uses: with a target grid, at level 0, for
 * the random and grid samplers (cogfeed.h, cf_loader_options.described:
 * what placement and sampling need of a file is then in its description;
 * the blocked and tile-shuffle samplers need its tiles). */
static cf_status descriptions(const cf_loader *ld, const cf_input_desc **out, cf_error *err) {
    const cf_loader_options *o = &ld->o;
    *out = NULL;
    if (!o->described || !o->ndescribed) return CF_OK;
    if (o->ndescribed != ld->nurls)
        return cf__err(err, CF_E_ARG, "loader: %zu descriptions for %zu inputs (one per path: "
                       "images, masks, layers, scene masks)", o->ndescribed, ld->nurls);
    if ((o->grid || o->grid_crs) && o->level == 0 &&
        (o->sampler == CF_SAMPLER_RANDOM || o->sampler == CF_SAMPLER_GRID))
        *out = o->described;
    return CF_OK;
}

cf_status cf__ld_open_inputs(cf_loader *ld, cf_error *err) {
    const cf_input_desc *desc;
    cf_status st = descriptions(ld, &desc, err);
    if (st == CF_OK) st = open_all(ld, desc, err);
    for (size_t i = 0; st == CF_OK && desc && i < ld->nurls; i++)
        ld->ndeclared += cf__cog_declared(*cf__ld_url_slot(ld, i));
    /* Every input placed on its sample's target grid, or refused
     * (sample_grid.c). */
    if (st == CF_OK) st = cf__sg_new(&ld->o, ld->img, ld->msk, ld->lay, ld->scm, &ld->sg, err);
    /* A mosaic's footprints: a later scene is read (or its header, when
     * declared) only for the patches it meets. */
    if (st == CF_OK && ld->o.mosaic && ld->step_scenes > 1)
        st = cf__fp_new(ld->sg, ld->img, ld->o.nfiles, (size_t)ld->o.time_steps, ld->o.level,
                        &ld->scene_fp, err);
    return st;
}
