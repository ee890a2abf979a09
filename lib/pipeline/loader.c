/*
 * loader.c - the training data pipeline: a sampler hands out windows, a
 * pool of reader threads reads them (cf_cog_read is thread-safe and, for
 * remote files, puts every thread's tile requests on the io's one libcurl
 * multi loop, so N readers = N patches' requests in flight), converts and
 * augments them in C, and fills a ring of batch slots the consumer takes in
 * order.  Memory is bounded by the options, never by the input: the ring
 * and the tile-shuffle cache are sized at creation, and everything else
 * (reader scratch, fetched tiles, decode scratch) comes out of
 * inflight_bytes (budget.h); readers wait for it rather than allocate
 * beyond it.
 *
 * How many patches are read at once adapts to how busy the CPUs are
 * (loader_adapt.c) unless max_inflight fixes it.
 */
#include "../common/common.h"
#include "budget.h"
#include "chunk_cache.h"
#include "cog_internal.h"
#include "loader_adapt.h"
#include "sample_grid.h"
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LD_MAX_THREADS 1024
#define LD_MAX_PREFETCH 64
#define LD_MAX_CACHE_ENTRIES 4096
#define LD_MAX_GROUP_TILES 256
/* Default reader threads for remote files: 128, or 32 per core on bigger
 * machines.  A remote patch waits a round trip (164 ms to Azure) while its
 * reader thread sleeps, so hiding it at R patches/s needs R x 0.164
 * readers: ~400 for the 2,300 patches/s that 16 cores decode. */
#define LD_REMOTE_THREADS_MIN 128
#define LD_REMOTE_THREADS_PER_CORE 32
#define LD_MAX_IOS 8           /* io loops of a loader's own (remote) */
#define LD_PART_CHUNKS 64      /* chunks fetched together (one batch) */
/* skip_errors gives up when more than skip_limit of the last
 * max(LD_SKIP_WINDOW, 2 x batch_size) samples were dropped. */
#define LD_SKIP_WINDOW 64

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

typedef struct ld_slot {
    int state;
    uint64_t batch;           /* sequence number: see cf_loader.seq_base */
    uint32_t n, done, failed;
    uint8_t *image, *mask;
    int own_buffers;
    cf_window *windows;
    uint8_t *ok;              /* per sample: 1 read fine */
    cf_error err;             /* first failure of the batch */
    int fatal;                /* a failure skip_errors must not hide */
    cf_error fatal_err;       /* the first of those */
} ld_slot;

typedef struct ld_cache_ent {
    const cf_cog *cog;
    int64_t x, y;
    uint32_t w, h;
    uint8_t *buf;
    size_t bytes;
    int loading, refs;
    uint64_t lru;
} ld_cache_ent;

/* One member of a sample: an image scene or an extra layer, read into a
 * range of output channels. */
typedef struct ld_member {
    int t;                    /* time step */
    int layer;                /* -1: the image, else layer index */
    uint32_t channel;         /* first output channel */
    uint32_t nb;              /* bands read */
} ld_member;

typedef struct ld_worker {
    cf_loader *ld;
    pthread_t th;
    uint8_t *scratch;         /* raw member blocks, then one output plane */
    size_t scratch_bytes;
    /* One batch of chunks (read_parts): fetched together into buf. */
    cf_chunk chunks[LD_PART_CHUNKS];
    int cpart[LD_PART_CHUNKS]; /* the part each chunk belongs to */
    cf_range_req reqs[LD_PART_CHUNKS];
    cf_error errs[LD_PART_CHUNKS];
} ld_worker;

/* One file read of a sample: an image member, the mask, or (tile-shuffle)
 * a whole cell for the cache. */
typedef struct ld_part {
    cf_cog *cog;
    const int *bands0;        /* 0-based bands to produce (ident: all) */
    const int *planes;        /* the distinct ones in order (planar files) */
    uint32_t nbands, nplanes;
    cf_dtype dt;
    int level;                /* the level read (the loader's, or the one
                                 a warped input's plan picked) */
    int cache;                /* its decoded chunks go through ld->cc */
    int64_t x, y;             /* the window read, at that level */
    uint32_t w, h;
    uint8_t *dst;             /* raw, band-sequential */
    size_t bytes;
    /* Its chunks, planes x rows x columns of the grid under the window;
     * next is the first not yet fetched (part_begin / part_peek). */
    int ifdi;
    uint32_t cx0, cy0, cols, rows;
    uint64_t next, count;
} ld_part;

struct cf_loader {
    cf_loader_options o;      /* pointer fields below are owned copies */
    char **urls;              /* images then masks then layers */
    size_t nurls;
    int *bands, *bands0;      /* as given (1-based), and 0-based */
    int *planes0, nplanes0;   /* bands0 without repeats (planar files) */
    float *mean, *std;
    cf__sg *sg;               /* each input on its sample's target grid */
    size_t warp_off, warp_bytes; /* warped inputs' source windows: this
                                    region of each reader's scratch */
    cf__ccache *cc;           /* decoded chunks of warped inputs, kept for
                                 the neighbouring patches (cache_bytes) */
    cf_io *io;                /* ios[0] */
    cf_io *ios[LD_MAX_IOS];   /* files are spread over these */
    int nios, own_io, remote;
    cf_cog **img;             /* nfiles * T */
    cf_cog **msk;             /* nfiles or NULL */
    cf_cog **lay;             /* nfiles * nlayers or NULL */
    ld_member *members;
    int nmembers;
    uint32_t ci;              /* image channels */
    uint32_t *layer_bands;
    cf_dtype raw_dt;          /* of the image */
    cf_dtype *layer_dt;
    cf_loader_layout lay_out;
    size_t es;                /* output element size */
    size_t mask_es;
    size_t plane;             /* P*P */
    cf__sampler samp;
    uint64_t total;           /* samples to deliver this epoch (this rank) */
    pid_t pid;                /* creator: reader threads exist only there */

    ld_slot *slots;
    ld_worker *workers;
    int nthreads, running;
    size_t scratch_bytes;

    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv;
    int stop;
    int closed;               /* cf_loader_close: no reading from here on */
    uint64_t next_claim, next_batch, epoch;
    /* Readers claim samples of claim_epoch: the consumer's epoch, or the
     * next one once every sample of this one is claimed (read-ahead, so
     * the ring is full when the consumer turns the epoch).  Batches are
     * numbered across epochs: batch b of the consumer's epoch is sequence
     * number seq_base + b, batch b of the next one seq_base + batches + b;
     * a slot holds sequence number s at index s % prefetch. */
    uint64_t claim_epoch, seq_base;
    int reading;
    /* adaptive control window */
    double win_t0, win_cpu0;
    uint64_t win_sys_busy0, win_sys_total0; /* machine CPU ticks */
    int win_sys;                            /* 1: they were read */
    uint64_t win_done, win_retries;
    int win_backpressure;
    cf__adapt ctl;             /* ctl.conc: patches read at once */

    /* The memory budget (docs/loader.md, "Memory"): inflight_bytes is
     * split into the readers' scratch (nthreads x scratch_bytes, fixed),
     * the decode kits' budget and the fetch buffers' budget. */
    cf__bufpool fetch;        /* compressed tiles being read */
    cf__kits kits;            /* codec contexts lent to decoding readers */
    int budgets;              /* fetch and kits initialised */
    uint64_t ring_bytes;      /* the ring's slots, fixed */
    int ident[CF_MAX_BANDS];  /* 0, 1, 2, ...: "all bands" for the paste */

    pthread_mutex_t cache_mu;
    pthread_cond_t cache_cv;
    ld_cache_ent *cache;
    int ncache;
    size_t cache_used, cache_peak;
    uint64_t cache_tick;

    /* skip_errors: outcomes of the last skip_window samples delivered or
     * dropped, in order (1: dropped), under mu. */
    uint8_t *skip_hist;
    uint32_t skip_window, skip_pos, skip_dropped;

    /* After cf_loader_close: the files and the loader's own io loops are
     * gone (their sockets and descriptors with them); io_final keeps the
     * io counters for stats. */
    int released;
    cf_io_stats io_final;

    /* stats (under mu, except the cache counters under cache_mu) */
    uint64_t st_samples, st_batches, st_skipped, st_decoded, st_delivered;
    uint64_t st_hits, st_misses;
    double st_wait, st_read, st_convert, t_start;
};

void cf_loader_options_init(cf_loader_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->time_steps = 1;
    opt->patch_size = 256;
    opt->batch_size = 32;
    opt->sampler = CF_SAMPLER_RANDOM;
    opt->world_size = 1;
    opt->apply_scale_offset = 1;
    opt->prefetch = 0; /* auto: see build() */
    opt->inflight_bytes = 0; /* auto: see build() */
    opt->cache_bytes = (size_t)256 << 20;
    opt->skip_limit = 0.5;
    opt->resampling = CF_RS_BILINEAR;
    opt->mask_resampling = CF_RS_NEAREST;
    opt->reproject = 1;
    opt->error_threshold = 0.125;
}

static int is_remote_url(const char *u) {
    return cf__url_is_remote(u);
}

/* ------------------------------------------------------------------ */
/* opening and checking inputs                                          */
/* ------------------------------------------------------------------ */

/* Files being opened by many threads at once: each takes the next
 * index.  A failure stops further claims; the one reported is the lowest
 * failing index, which is always tried (indices are claimed in order), so
 * the error names the first bad file of the list whatever the timing. */
typedef struct open_job {
    cf_loader *ld;
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

static cf_cog **url_slot(cf_loader *ld, size_t i) {
    size_t ni = ld->o.nfiles * (size_t)ld->o.time_steps;
    if (i < ni) return &ld->img[i];
    i -= ni;
    if (ld->msk) {
        if (i < ld->o.nfiles) return &ld->msk[i];
        i -= ld->o.nfiles;
    }
    return &ld->lay[i];
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
        cf_status st = cf_cog_open(j->ld->ios[i % (size_t)j->ld->nios],
                                   j->ld->urls[i], url_slot(j->ld, i), &e);
        if (st == CF_OK) st = real_samples(*url_slot(j->ld, i), &e);
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
static cf_status open_all(cf_loader *ld, cf_error *err) {
    size_t k = ld->remote ? LD_OPEN_THREADS : 1;
    if (k > ld->nurls) k = ld->nurls;
    open_job j;
    j.ld = ld;
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

static cf_status level_of(const cf_loader *ld, const cf_cog *c,
                          cf_level_info *li, cf_error *err) {
    cf_status st = cf_cog_level_info(c, ld->o.level, li, err);
    if (st != CF_OK) return cf__err_prefix(err, st, "loader");
    return CF_OK;
}

static cf_status copy_options(cf_loader *ld, const cf_loader_options *opt,
                              cf_error *err) {
    size_t n = opt->struct_size < sizeof ld->o ? opt->struct_size
                                               : sizeof ld->o;
    cf_loader_options_init(&ld->o);
    memcpy(&ld->o, opt, n);
    ld->o.struct_size = sizeof ld->o;
    cf_loader_options *o = &ld->o;
    if (!o->images || !o->nfiles)
        return cf__err(err, CF_E_ARG, "loader: no images");
    if (o->time_steps < 1 || o->time_steps > 1024)
        return cf__err(err, CF_E_ARG, "loader: time_steps %d not in [1, 1024]",
                       o->time_steps);
    if (o->nlayers < 0 || o->nlayers > 64 || (o->nlayers && !o->layers))
        return cf__err(err, CF_E_ARG, "loader: nlayers %d not in [0, 64]",
                       o->nlayers);
    if (o->nfiles > ((size_t)1 << 24))
        return cf__err(err, CF_E_LIMIT, "loader: %zu files (max %d)",
                       o->nfiles, 1 << 24);
    if (o->batch_size < 1 || o->batch_size > 65536)
        return cf__err(err, CF_E_ARG, "loader: batch_size %u not in [1, 65536]",
                       o->batch_size);
    if (o->patch_size < 1 || o->patch_size > 65536)
        return cf__err(err, CF_E_ARG, "loader: patch_size %u not in [1, 65536]",
                       o->patch_size);
    if (o->prefetch < 0) o->prefetch = 1;
    /* 0 stays: auto, sized in build() once the reader count is known. */
    if (o->prefetch > LD_MAX_PREFETCH)
        return cf__err(err, CF_E_ARG, "loader: prefetch %d > %d", o->prefetch,
                       LD_MAX_PREFETCH);
    if (o->threads < 0 || o->threads > LD_MAX_THREADS ||
        o->max_inflight < 0 || o->max_inflight > LD_MAX_THREADS)
        return cf__err(err, CF_E_ARG,
                       "loader: threads / max_inflight not in [0, %d]",
                       LD_MAX_THREADS);
    if (o->out_dtype != CF_DT_UNKNOWN && o->out_dtype != CF_DT_F32)
        return cf__err(err, CF_E_ARG,
                       "loader: output dtype must be raw or float32");
    if ((o->mean || o->std) && o->out_dtype != CF_DT_F32)
        return cf__err(err, CF_E_ARG,
                       "loader: mean/std normalisation needs float32 output");
    if (o->level < 0)
        return cf__err(err, CF_E_ARG, "loader: level %d < 0 (0 is full "
                       "resolution, 1 the first overview)", o->level);
    if (o->nbands < 0 || o->nbands > CF_MAX_BANDS || (o->nbands && !o->bands))
        return cf__err(err, CF_E_ARG, "loader: nbands %d not in [0, %d]",
                       o->nbands, CF_MAX_BANDS);
    if (!(o->skip_limit >= 0 && o->skip_limit <= 1))
        return cf__err(err, CF_E_ARG, "loader: skip_limit %g not in [0, 1]",
                       o->skip_limit);
    /* Copy everything the caller may free after cf_loader_new. */
    size_t nimg = o->nfiles * (size_t)o->time_steps;
    ld->nurls = nimg + (o->masks ? o->nfiles : 0) +
                o->nfiles * (size_t)o->nlayers;
    ld->urls = cf__calloc(ld->nurls, sizeof *ld->urls);
    if (!ld->urls) return cf__err(err, CF_E_NOMEM, "loader: url table");
    for (size_t i = 0; i < ld->nurls; i++) {
        const char *u;
        if (i < nimg) u = o->images[i];
        else if (o->masks && i < nimg + o->nfiles) u = o->masks[i - nimg];
        else u = o->layers[i - nimg - (o->masks ? o->nfiles : 0)];
        if (!u) return cf__err(err, CF_E_ARG, "loader: input %zu is NULL", i);
        ld->urls[i] = cf__strdup(u);
        if (!ld->urls[i]) return cf__err(err, CF_E_NOMEM, "loader: urls");
        if (is_remote_url(u)) ld->remote = 1;
    }
    o->images = NULL;
    o->layers = NULL;
    if (o->nbands) {
        ld->bands = cf__calloc((size_t)o->nbands, sizeof *ld->bands);
        ld->bands0 = cf__calloc((size_t)o->nbands, sizeof *ld->bands0);
        if (!ld->bands || !ld->bands0)
            return cf__err(err, CF_E_NOMEM, "loader: bands");
        memcpy(ld->bands, opt->bands, (size_t)o->nbands * sizeof *ld->bands);
        for (int b = 0; b < o->nbands; b++) ld->bands0[b] = ld->bands[b] - 1;
        /* A band plane of a planar file is fetched once even when the
         * band is asked for twice. */
        ld->planes0 = cf__calloc((size_t)o->nbands, sizeof *ld->planes0);
        if (!ld->planes0) return cf__err(err, CF_E_NOMEM, "loader: bands");
        for (int b = 0; b < o->nbands; b++) {
            int dup = 0;
            for (int k = 0; k < ld->nplanes0; k++) dup |= ld->planes0[k] == ld->bands0[b];
            if (!dup) ld->planes0[ld->nplanes0++] = ld->bands0[b];
        }
    }
    o->bands = NULL;
    return CF_OK;
}

/* Bands, dtypes and channel layout; all files of a role must agree. */
static cf_status plan_channels(cf_loader *ld, cf_error *err) {
    cf_loader_options *o = &ld->o;
    cf_cog_info inf;
    cf_cog_get_info(ld->img[0], &inf);
    ld->raw_dt = inf.dtype;
    ld->ci = o->nbands ? (uint32_t)o->nbands : inf.count;
    for (size_t i = 0; i < o->nfiles * (size_t)o->time_steps; i++) {
        cf_cog_info b;
        cf_cog_get_info(ld->img[i], &b);
        if (b.dtype != ld->raw_dt)
            return cf__err(err, CF_E_ARG,
                           "loader: image %s is %s but %s is %s",
                           cf_cog_name(ld->img[i]), cf_dtype_name(b.dtype),
                           cf_cog_name(ld->img[0]), cf_dtype_name(ld->raw_dt));
        if (!o->nbands && b.count != inf.count)
            return cf__err(err, CF_E_ARG,
                           "loader: image %s has %u bands but %s has %u",
                           cf_cog_name(ld->img[i]), b.count,
                           cf_cog_name(ld->img[0]), inf.count);
        for (int k = 0; k < o->nbands; k++)
            if (ld->bands[k] < 1 || (uint32_t)ld->bands[k] > b.count)
                return cf__err(err, CF_E_ARG,
                               "loader: band %d not in image %s (1..%u)",
                               ld->bands[k], cf_cog_name(ld->img[i]), b.count);
    }
    uint32_t C = ld->ci;
    if (o->nlayers) {
        ld->layer_bands = cf__calloc((size_t)o->nlayers, sizeof(uint32_t));
        ld->layer_dt = cf__calloc((size_t)o->nlayers, sizeof(cf_dtype));
        if (!ld->layer_bands || !ld->layer_dt)
            return cf__err(err, CF_E_NOMEM, "loader: layers");
    }
    for (int l = 0; l < o->nlayers; l++) {
        for (size_t f = 0; f < o->nfiles; f++) {
            const cf_cog *c = ld->lay[f * (size_t)o->nlayers + (size_t)l];
            cf_cog_get_info(c, &inf);
            if (f == 0) {
                ld->layer_bands[l] = inf.count;
                ld->layer_dt[l] = inf.dtype;
            } else if (inf.count != ld->layer_bands[l] ||
                       inf.dtype != ld->layer_dt[l]) {
                return cf__err(err, CF_E_ARG,
                               "loader: layer %s differs (bands/dtype) from "
                               "layer %d of the first file",
                               cf_cog_name(c), l);
            }
        }
        if (o->out_dtype == CF_DT_UNKNOWN && ld->layer_dt[l] != ld->raw_dt)
            return cf__err(err, CF_E_ARG,
                           "loader: layer %d (%s) is %s but the images (%s) "
                           "are %s: use float32 output to stack them",
                           l, cf_cog_name(ld->lay[l]),
                           cf_dtype_name(ld->layer_dt[l]),
                           cf_cog_name(ld->img[0]), cf_dtype_name(ld->raw_dt));
        C += ld->layer_bands[l];
    }
    if (C > CF_MAX_BANDS)
        return cf__err(err, CF_E_LIMIT, "loader: %u channels (max %d)", C,
                       CF_MAX_BANDS);
    ld->nmembers = o->time_steps * (1 + o->nlayers);
    ld->members = cf__calloc((size_t)ld->nmembers, sizeof *ld->members);
    if (!ld->members) return cf__err(err, CF_E_NOMEM, "loader: members");
    int m = 0;
    for (int t = 0; t < o->time_steps; t++) {
        uint32_t ch = 0;
        for (int l = -1; l < o->nlayers; l++) {
            ld_member *mb = &ld->members[m++];
            mb->t = t;
            mb->layer = l;
            mb->channel = ch;
            mb->nb = l < 0 ? ld->ci : ld->layer_bands[l];
            ch += mb->nb;
        }
    }
    if (ld->msk) {
        cf_cog_info i0;
        cf_cog_get_info(ld->msk[0], &i0);
        /* 1-bit masks are expanded to 0/1 bytes by the reader. */
        ld->lay_out.mask_dtype = i0.dtype;
        for (size_t f = 1; f < o->nfiles; f++) {
            cf_cog_get_info(ld->msk[f], &inf);
            if (inf.dtype != i0.dtype)
                return cf__err(err, CF_E_ARG, "loader: mask %s is %s, not %s",
                               cf_cog_name(ld->msk[f]),
                               cf_dtype_name(inf.dtype),
                               cf_dtype_name(i0.dtype));
        }
    }
    if (o->mean || o->std) {
        ld->mean = cf__calloc(C, sizeof(float));
        ld->std = cf__calloc(C, sizeof(float));
        if (!ld->mean || !ld->std)
            return cf__err(err, CF_E_NOMEM, "loader: mean/std");
        for (uint32_t c = 0; c < C; c++) {
            ld->mean[c] = o->mean ? o->mean[c] : 0.0f;
            ld->std[c] = o->std ? o->std[c] : 1.0f;
            if (!(ld->std[c] != 0.0f) || !isfinite(ld->std[c]) ||
                !isfinite(ld->mean[c]))
                return cf__err(err, CF_E_ARG,
                               "loader: channel %u: std must be finite and "
                               "non-zero, mean finite",
                               c);
        }
    }
    o->mean = o->std = NULL;
    ld->lay_out.channels = C;
    return CF_OK;
}

/* The input (url) index of member m of sample file f. */
static size_t member_slot(const cf_loader *ld, size_t f, const ld_member *mb) {
    const size_t F = ld->o.nfiles, T = (size_t)ld->o.time_steps;
    if (mb->layer < 0) return f * T + (size_t)mb->t;
    return F * T + (ld->msk ? F : 0) + f * (size_t)ld->o.nlayers + (size_t)mb->layer;
}

static size_t raw_member_bytes(const cf_loader *ld, const ld_member *m,
                               uint64_t w, uint64_t h) {
    cf_dtype dt = m->layer < 0 ? ld->raw_dt : ld->layer_dt[m->layer];
    return (size_t)(m->nb * w * h * cf_dtype_size(dt));
}

/* The most decoding one of cog's chunks at the loader's level can take
 * from the kits' budget (a full tile, a new codec context). */
static uint64_t decode_need(const cf_loader *ld, const cf_cog *cog) {
    cf_chunk c;
    memset(&c, 0, sizeof c);
    c.ifd = cog->tiff->levels[ld->o.level];
    cf_codec_params p;
    cf__cog_chunk_params(cog, &c, &p);
    return cf_codec_ctx_growth(NULL, &p, cf_codec_chunk_bytes(&p));
}

/* The source windows of a typical sample's warped inputs (file 0's, at
 * the centre of its target), twice over: each reader's scratch holds
 * them; a sample that needs more borrows the difference for its read. */
static size_t warp_scratch(const cf_loader *ld) {
    if (!cf__sg_any_warp(ld->sg)) return 0;
    uint64_t sum = 0;
    for (int m = 0; m <= ld->nmembers; m++) {
        if (m == ld->nmembers && !ld->msk) break;
        const ld_member *mb = m < ld->nmembers ? &ld->members[m] : NULL;
        size_t slot = mb ? member_slot(ld, 0, mb) : ld->o.nfiles * (size_t)ld->o.time_steps;
        if (cf__sg_input_at(ld->sg, slot)->how != CF__SG_WARP) continue;
        cf_cog *cog = *url_slot((cf_loader *)ld, slot);
        sum += cf__sg_typical_bytes(ld->sg, slot, cog, 0, ld->o.patch_size,
                                    mb ? (int)mb->nb : 1, &ld->o);
    }
    return (size_t)(2 * sum + 64);
}

static cf_status build(cf_loader *ld, cf_error *err) {
    cf_loader_options *o = &ld->o;
    cf_status st = plan_channels(ld, err);
    if (st != CF_OK) return st;
    const uint64_t P = o->patch_size, B = o->batch_size;
    ld->plane = (size_t)(P * P);
    cf_loader_layout *L = &ld->lay_out;
    L->batch_size = o->batch_size;
    L->patch_size = o->patch_size;
    L->time_steps = (uint32_t)o->time_steps;
    L->dtype = o->out_dtype == CF_DT_F32 ? CF_DT_F32 : ld->raw_dt;
    ld->es = cf_dtype_size(L->dtype);
    L->has_mask = ld->msk != NULL;
    ld->mask_es = L->has_mask ? cf_dtype_size(L->mask_dtype) : 0;
    uint64_t img_bytes, mask_bytes;
    if (!cf__mul_u64(B * o->time_steps, L->channels, &img_bytes) ||
        !cf__mul_u64(img_bytes, P * P, &img_bytes) ||
        !cf__mul_u64(img_bytes, ld->es, &img_bytes) ||
        img_bytes > ((uint64_t)1 << 40))
        return cf__err(err, CF_E_LIMIT, "loader: batch slot too large");
    mask_bytes = B * P * P * ld->mask_es;
    L->image_bytes = (size_t)img_bytes;
    L->mask_bytes = (size_t)mask_bytes;

    /* Sampler over the files' sizes at the chosen level. */
    cf__samp_file *sf = cf__calloc(o->nfiles, sizeof *sf);
    if (!sf) return cf__err(err, CF_E_NOMEM, "loader: sampler files");
    uint64_t cell_bytes = 0;
    for (size_t f = 0; f < o->nfiles; f++) {
        cf_level_info li;
        if (!cf__sg_sampler_dims(ld->sg, f, o->patch_size, &sf[f].width, &sf[f].height,
                                 &sf[f].tile_w, &sf[f].tile_h)) {
            st = level_of(ld, ld->img[f * (size_t)o->time_steps], &li, err);
            if (st != CF_OK) {
                free(sf);
                return st;
            }
            sf[f].width = li.width;
            sf[f].height = li.height;
            sf[f].tile_w = li.tile_width ? li.tile_width : li.width;
            sf[f].tile_h = li.tile_height ? li.tile_height : li.height;
        }
        sf[f].weight = o->weights ? o->weights[f] : 0;
        if (o->weights && !(o->weights[f] > 0 && isfinite(o->weights[f]))) {
            free(sf);
            return cf__err(err, CF_E_ARG,
                           "loader: weight of file %zu (%s) must be a finite "
                           "number > 0, not %g",
                           f, cf_cog_name(ld->img[f * (size_t)o->time_steps]),
                           o->weights[f]);
        }
        uint64_t cw = (P + sf[f].tile_w - 1) / sf[f].tile_w * sf[f].tile_w;
        uint64_t ch = (P + sf[f].tile_h - 1) / sf[f].tile_h * sf[f].tile_h;
        uint64_t cb = 0;
        for (int m = 0; m < ld->nmembers; m++)
            cb += raw_member_bytes(ld, &ld->members[m], cw, ch);
        cb += cw * ch * ld->mask_es;
        if (cb > cell_bytes) cell_bytes = cb;
    }
    cf__sampler_config sc;
    memset(&sc, 0, sizeof sc);
    sc.kind = o->sampler;
    sc.files = sf;
    sc.nfiles = o->nfiles;
    sc.patch = o->patch_size;
    sc.stride = o->stride;
    sc.seed = o->seed;
    sc.epoch = o->epoch;
    sc.rank = o->rank;
    sc.world_size = o->world_size;
    sc.length = o->epoch_length;
    sc.drop_last = o->drop_last;
    sc.augment = o->augment;
    /* Two groups of cells must fit the cache, because readers cross from
     * one group into the next while the last crops of the first are read. */
    uint64_t k = cell_bytes ? o->cache_bytes / (2 * cell_bytes) : 1;
    sc.group_tiles = (uint32_t)(k < 1 ? 1 : k > LD_MAX_GROUP_TILES
                                                ? LD_MAX_GROUP_TILES
                                                : k);
    st = cf__sampler_init(&ld->samp, &sc, err);
    free(sf);
    if (st != CF_OK) return st;
    uint64_t cnt = ld->samp.count;
    L->samples = o->drop_last ? cnt / B * B : cnt;
    L->batches = o->drop_last ? cnt / B : (cnt + B - 1) / B;
    ld->total = L->samples;

    /* Scratch: every raw member block of a sample (float32 output: they
     * are read at once, then converted), at least one output plane (for
     * augmentation). */
    size_t sb = ld->plane * (ld->es > ld->mask_es ? ld->es : ld->mask_es);
    size_t sum = 0;
    for (int m = 0; o->out_dtype == CF_DT_F32 && m < ld->nmembers; m++)
        sum += raw_member_bytes(ld, &ld->members[m], P, P);
    ld->scratch_bytes = sum > sb ? sum : sb;
    ld->warp_off = ld->scratch_bytes;
    ld->warp_bytes = warp_scratch(ld);
    ld->scratch_bytes += ld->warp_bytes;
    if (ld->warp_bytes && o->sampler != CF_SAMPLER_TILE_SHUFFLE && o->cache_bytes) {
        ld->cc = cf__cc_new(o->cache_bytes);
        if (!ld->cc) return cf__err(err, CF_E_NOMEM, "loader: chunk cache");
    }
    for (int i = 0; i < CF_MAX_BANDS; i++) ld->ident[i] = i;

    /* Readers: fixed, or adaptive up to a cap set by the byte budget
     * (auto: 256 MiB, or 64 MiB per core on machines of more than 4); their
     * scratch takes at most half of it. */
    if (!o->inflight_bytes) {
        uint64_t b = (uint64_t)64 << 20;
        o->inflight_bytes = (size_t)(cf__ncpu() > 4 ? b * cf__ncpu() : 4 * b);
    }
    const uint64_t I = o->inflight_bytes;
    uint64_t by_budget = I / 2 / ld->scratch_bytes;
    if (by_budget < 1)
        return cf__err(err, CF_E_ARG,
                       "loader: inflight_bytes %llu is too small: a reader's "
                       "scratch for one patch is %zu bytes, and at most half "
                       "of inflight_bytes goes to scratch (at least %llu "
                       "needed)",
                       (unsigned long long)I, ld->scratch_bytes,
                       (unsigned long long)(4 * (uint64_t)ld->scratch_bytes));
    /* A reader thread reads and decodes one patch at a time, so patches
     * in flight need as many threads. */
    int want = o->threads > o->max_inflight ? o->threads : o->max_inflight;
    /* Remote: a reader spends ~2 round trips per patch (image, then mask)
     * waiting, so covering 164 ms at a few hundred patches/s takes 100+
     * patches in flight; waiting threads cost only their stacks. */
    if (!want) {
        size_t r = LD_REMOTE_THREADS_PER_CORE * cf__ncpu();
        want = ld->remote ? (int)(r > LD_REMOTE_THREADS_MIN ? r : LD_REMOTE_THREADS_MIN)
                          : (int)(2 * cf__ncpu() + 2);
    }
    if ((uint64_t)want > by_budget) want = (int)by_budget;
    if (want > LD_MAX_THREADS) want = LD_MAX_THREADS;
    ld->nthreads = want;
    /* Remote starts at a quarter of the readers: the fast phase of the
     * controller doubles from there within a second or two. */
    int start = o->max_inflight ? o->max_inflight
                                : ld->remote ? (want / 4 > 8 ? want / 4 : 8)
                                             : 8;
    cf__adapt_init(&ld->ctl, start, want);
    if (!o->prefetch) {
        /* Auto ring: batches are handed out in order, so the slots must
         * hold every patch being read plus the batch the consumer holds
         * and one ready to take, or readers idle behind a slow patch.
         * Capped at twice the in-flight byte budget, at least 4 slots. */
        uint64_t n = ((uint64_t)want + B - 1) / B + 2;
        uint64_t slot = img_bytes + mask_bytes;
        uint64_t cap = slot ? 2 * I / slot : n;
        if (n > cap) n = cap;
        if (n < 4) n = 4;
        if (n > LD_MAX_PREFETCH) n = LD_MAX_PREFETCH;
        o->prefetch = (int)n;
    }
    L->prefetch = o->prefetch;
    ld->ring_bytes = (uint64_t)o->prefetch *
                     (img_bytes + mask_bytes + B * (sizeof(cf_window) + 1));

    /* The rest of inflight_bytes: decoding (kits: at most a quarter, and
     * no more than every kit decoding the largest tile of the inputs at
     * once), then fetching. */
    int nkits = (int)(2 * cf__ncpu() + 2);
    if (nkits > ld->nthreads) nkits = ld->nthreads;
    uint64_t need = 0;
    size_t ncogs = ld->nurls;
    for (size_t i = 0; i < ncogs; i++) {
        uint64_t n = decode_need(ld, *url_slot(ld, i));
        if (n > need) need = n;
    }
    uint64_t dec = (uint64_t)nkits * need;
    if (dec > I / 4 || dec / (uint64_t)nkits != need) dec = I / 4;
    uint64_t fetch = I - (uint64_t)ld->nthreads * ld->scratch_bytes - dec;
    if (cf__bufpool_init(&ld->fetch, fetch, ld->nthreads) != CF_OK ||
        cf__kits_init(&ld->kits, nkits, dec) != CF_OK) {
        ld->budgets = 1;
        return cf__err(err, CF_E_NOMEM, "loader: budgets");
    }
    ld->budgets = 1;

    ld->slots = cf__calloc((size_t)o->prefetch, sizeof *ld->slots);
    if (!ld->slots) return cf__err(err, CF_E_NOMEM, "loader: ring");
    for (int i = 0; i < o->prefetch; i++) {
        ld_slot *s = &ld->slots[i];
        s->windows = cf__calloc(B, sizeof *s->windows);
        s->ok = cf__calloc(B, 1);
        s->image = cf__malloc(L->image_bytes);
        s->mask = L->mask_bytes ? cf__malloc(L->mask_bytes) : NULL;
        s->own_buffers = 1;
        if (!s->windows || !s->ok || !s->image ||
            (L->mask_bytes && !s->mask))
            return cf__err(err, CF_E_NOMEM,
                           "loader: ring slot %d (%zu bytes)", i,
                           L->image_bytes);
    }
    if (o->sampler == CF_SAMPLER_TILE_SHUFFLE) {
        ld->cache = cf__calloc(LD_MAX_CACHE_ENTRIES, sizeof *ld->cache);
        if (!ld->cache) return cf__err(err, CF_E_NOMEM, "loader: tile cache");
    }
    ld->skip_window = 2 * o->batch_size > LD_SKIP_WINDOW ? 2 * o->batch_size
                                                         : LD_SKIP_WINDOW;
    ld->skip_hist = cf__calloc(ld->skip_window, 1);
    ld->workers = cf__calloc((size_t)ld->nthreads, sizeof *ld->workers);
    if (!ld->workers || !ld->skip_hist)
        return cf__err(err, CF_E_NOMEM, "loader: workers");
    return CF_OK;
}

cf_status cf_loader_new(const cf_loader_options *opt, cf_loader **out,
                        cf_error *err) {
    *out = NULL;
    if (!opt || opt->struct_size < offsetof(cf_loader_options, io))
        return cf__err(err, CF_E_ARG,
                       "loader: options not initialised (call "
                       "cf_loader_options_init)");
    cf_loader *ld = cf__calloc(1, sizeof *ld);
    if (!ld) return cf__err(err, CF_E_NOMEM, "loader");
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->work_cv, NULL);
    /* Timed waits of cf_loader_next_wait run on the monotonic clock. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ld->ready_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&ld->cache_mu, NULL);
    pthread_cond_init(&ld->cache_cv, NULL);
    cf_status st = copy_options(ld, opt, err);
    if (st == CF_OK) {
        ld->io = ld->o.io;
        ld->ios[0] = ld->io;
        ld->nios = 1;
        if (!ld->io) {
            /* One io loop thread receives every response of its files: at
             * a few hundred MB/s it is a core's worth of recv() and copies,
             * and on a busy machine one thread gets one thread's share.
             * Remote files are spread over one loop per core. */
            cf_io_options io;
            cf_io_options_init(&io);
            int k = ld->remote ? (int)cf__ncpu() : 1;
            if (k < 1) k = 1;
            if (k > LD_MAX_IOS) k = LD_MAX_IOS;
            if ((size_t)k > ld->nurls) k = (int)ld->nurls;
            ld->nios = 0;
            const cf_io_options *io_o = ld->o.io_options ? ld->o.io_options
                                                          : &io;
            for (int i = 0; i < k && st == CF_OK; i++) {
                st = cf_io_new(io_o, &ld->ios[i], err);
                if (st == CF_OK) ld->nios++;
            }
            /* One bound on open local files for the whole loader. */
            for (int i = 1; i < ld->nios; i++)
                cf__io_share_fdpool(ld->ios[i], ld->ios[0]);
            ld->io = ld->ios[0];
            ld->own_io = ld->nios > 0;
            /* A bad option fails the first loop; fewer loops still work. */
            if (st != CF_OK && ld->nios) st = CF_OK;
        }
        ld->o.io_options = NULL; /* the caller's, read only here */
    }
    const cf_loader_options *o = &ld->o;
    if (st == CF_OK) {
        ld->img = cf__calloc(o->nfiles * (size_t)o->time_steps,
                             sizeof *ld->img);
        if (opt->masks) ld->msk = cf__calloc(o->nfiles, sizeof *ld->msk);
        if (o->nlayers)
            ld->lay = cf__calloc(o->nfiles * (size_t)o->nlayers,
                                 sizeof *ld->lay);
        if (!ld->img || (opt->masks && !ld->msk) || (o->nlayers && !ld->lay))
            st = cf__err(err, CF_E_NOMEM, "loader: file table");
    }
    if (st == CF_OK) st = open_all(ld, err);
    /* Every input placed on its sample's target grid, or refused. */
    if (st == CF_OK) st = cf__sg_new(o, ld->img, ld->msk, ld->lay, &ld->sg, err);
    if (st == CF_OK) st = build(ld, err);
    ld->o.masks = NULL; /* caller memory: not kept */
    ld->o.weights = NULL;
    ld->o.grid = NULL;
    ld->o.grid_crs = NULL;
    ld->o.layer_resampling = NULL;
    if (st != CF_OK) {
        cf_loader_free(ld);
        return st;
    }
    ld->epoch = ld->claim_epoch = o->epoch;
    ld->pid = getpid();
    *out = ld;
    return CF_OK;
}

void cf_loader_get_layout(const cf_loader *ld, cf_loader_layout *out) {
    *out = ld->lay_out;
}

cf_status cf_loader_shard_batches(const cf_loader *ld, int rank, int world_size,
                                  uint64_t *batches, cf_error *err) {
    if (!ld || !batches || world_size < 1 || rank < 0 || rank >= world_size)
        return cf__err(err, CF_E_ARG, "cf_loader_shard_batches: rank %d not in [0, world_size %d)",
                       rank, world_size);
    uint64_t B = ld->lay_out.batch_size;
    uint64_t cnt = cf__sampler_shard_count(&ld->samp, (uint64_t)rank, (uint64_t)world_size);
    *batches = ld->o.drop_last ? cnt / B : (cnt + B - 1) / B;
    return CF_OK;
}

/* ------------------------------------------------------------------ */
/* reading: a sample's chunks fetched together, within the budget       */
/* ------------------------------------------------------------------ */

/* Why not cf_cog_read per part: it reads one file at a time (image, then
 * mask: two round trips per patch on remote storage), allocates its fetch
 * and tile buffers on every call (page faults on every patch) and answers
 * to no budget.  Here every chunk of every part of a sample goes out
 * together (one round trip), in batches of at most LD_PART_CHUNKS chunks
 * that fit the fetch budget, into buffers kept from patch to patch, and
 * is decoded with a kit whose scratch is charged to the decode budget. */

typedef struct ld_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
} ld_wait;

static void wait_cb(cf_range_req *r, void *user) {
    ld_wait *w = user;
    (void)r;
    pthread_mutex_lock(&w->mu);
    if (--w->left == 0) pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Chunk i of part p's grid: its column, row and band plane. */
static void part_chunk_at(const ld_part *p, const cf_tiff_ifd *ifd, uint64_t i,
                          uint32_t *cx, uint32_t *cy, uint32_t *plane) {
    uint64_t per = (uint64_t)p->cols * p->rows, r = i % per;
    *cx = p->cx0 + (uint32_t)(r % p->cols);
    *cy = p->cy0 + (uint32_t)(r / p->cols);
    *plane = ifd->planar == 2 ? (uint32_t)p->planes[i / per] : 0;
}

/* Start reading part p: what no chunk covers (outside the image, sparse
 * chunks) gets the fill value, as cf_cog_read gives it, and the cursor
 * goes to the first chunk. */
static void part_begin(const cf_loader *ld, ld_part *p) {
    const cf_cog *cog = p->cog;
    (void)ld;
    p->ifdi = cog->tiff->levels[p->level];
    const cf_tiff_ifd *ifd = &cog->tiff->ifds[p->ifdi];
    p->next = p->count = 0;
    int64_t x0 = p->x < 0 ? 0 : p->x, y0 = p->y < 0 ? 0 : p->y;
    int64_t x1 = p->x + (int64_t)p->w, y1 = p->y + (int64_t)p->h;
    if (x1 > (int64_t)ifd->width) x1 = ifd->width;
    if (y1 > (int64_t)ifd->height) y1 = ifd->height;
    int inside = x0 == p->x && y0 == p->y && x1 == p->x + (int64_t)p->w &&
                 y1 == p->y + (int64_t)p->h;
    size_t n = (size_t)p->w * p->h * p->nbands;
    if (!inside) cf__cog_fill(cog, p->ifdi, p->dst, n);
    if (x0 >= x1 || y0 >= y1) return;
    p->cx0 = (uint32_t)(x0 / ifd->chunk_w);
    p->cy0 = (uint32_t)(y0 / ifd->chunk_h);
    p->cols = (uint32_t)((x1 - 1) / ifd->chunk_w) - p->cx0 + 1;
    p->rows = (uint32_t)((y1 - 1) / ifd->chunk_h) - p->cy0 + 1;
    p->count = (uint64_t)(ifd->planar == 2 ? p->nplanes : 1) * p->cols * p->rows;
    if (!inside) return;
    const uint64_t per_plane = (uint64_t)ifd->chunks_across * ifd->chunks_down;
    for (uint64_t i = 0; i < p->count; i++) {
        uint32_t cx, cy, pl;
        part_chunk_at(p, ifd, i, &cx, &cy, &pl);
        uint64_t idx = pl * per_plane + (uint64_t)cy * ifd->chunks_across + cx;
        if (idx < ifd->nchunks && ifd->counts[idx] == 0) {
            cf__cog_fill(cog, p->ifdi, p->dst, n);
            break;
        }
    }
}

/* Part p's next chunk to fetch in *c (*has 0: none left); sparse chunks
 * are passed over (part_begin filled them). */
static cf_status part_peek(ld_part *p, cf_chunk *c, int *has, cf_error *err) {
    const cf_tiff_ifd *ifd = &p->cog->tiff->ifds[p->ifdi];
    *has = 0;
    for (; p->next < p->count; p->next++) {
        uint32_t cx, cy, pl;
        part_chunk_at(p, ifd, p->next, &cx, &cy, &pl);
        cf_status st = cf__cog_chunk(p->cog, p->ifdi, cx, cy, pl, c, err);
        if (st != CF_OK) return st;
        if (c->len) {
            *has = 1;
            return CF_OK;
        }
    }
    return CF_OK;
}

/* Fetch the worker's k chunks (total compressed bytes) into a buffer of
 * the fetch budget, then decode and paste each into its part. */
static cf_status fetch_decode(cf_loader *ld, ld_worker *wk, ld_part *parts,
                              size_t k, uint64_t total, cf_cog **bad,
                              cf_error *err) {
    cf_cog *first = parts[wk->cpart[0]].cog;
    cf__buf buf;
    int fresh;
    cf_status st = cf__bufpool_get(&ld->fetch, (size_t)total, &buf, &fresh, err);
    if (st != CF_OK) {
        *bad = first;
        return cf__err_prefix(err, st, "%s: waiting for %llu bytes of tiles",
                              cf_cog_name(first), (unsigned long long)total);
    }
    if (fresh) cf__cog_prefault(first, buf.p, buf.cap);
    memset(wk->reqs, 0, k * sizeof *wk->reqs);
    cf__cog_chunk_reqs(wk->chunks, k, buf.p, wk->reqs);
    for (size_t i = 0; i < k; i++) {
        cf_range_req *r = &wk->reqs[i];
        r->err = &wk->errs[i];
        r->status = CF_E_IO;
        cf__err_clear(r->err);
    }
    /* Every part's chunks go out before waiting for any. */
    ld_wait wt;
    pthread_mutex_init(&wt.mu, NULL);
    pthread_cond_init(&wt.cv, NULL);
    wt.left = k;
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && wk->cpart[j] == wk->cpart[i]) j++;
        cf_cog *cog = parts[wk->cpart[i]].cog;
        cf_status s2 = cf_src_submit(cog->src, &wk->reqs[i], j - i, wait_cb,
                                     &wt, err);
        if (s2 != CF_OK) {
            /* Nothing of this run was submitted: no callbacks to wait. */
            pthread_mutex_lock(&wt.mu);
            wt.left -= j - i;
            pthread_mutex_unlock(&wt.mu);
            if (st == CF_OK) {
                st = s2;
                *bad = cog;
            }
        }
        i = j;
    }
    pthread_mutex_lock(&wt.mu);
    while (wt.left) pthread_cond_wait(&wt.cv, &wt.mu);
    pthread_mutex_unlock(&wt.mu);
    pthread_cond_destroy(&wt.cv);
    pthread_mutex_destroy(&wt.mu);
    cf__kit *kit = NULL;
    for (size_t i = 0; i < k && st == CF_OK; i++) {
        ld_part *p = &parts[wk->cpart[i]];
        const cf_chunk *c = &wk->chunks[i];
        cf_range_req *r = &wk->reqs[i];
        const uint8_t *chunk = NULL;
        if (r->status != CF_OK) {
            if (err) *err = *r->err;
            st = cf__cog_fetch_failed(p->cog, r->status, err);
        } else {
            /* A kit only for chunks that need decoding, borrowed once. */
            if (!kit && !cf__cog_chunk_raw(p->cog, c)) kit = cf__kits_get(&ld->kits);
            st = cf__kits_decode(&ld->kits, kit, p->cog, c, r->dst, &chunk, err);
            if (st == CF_OK) {
                cf__cog_paste(p->cog, c, chunk, p->x, p->y, p->w, p->h,
                              p->bands0, (int)p->nbands, p->dst, 1);
                if (p->cache) {
                    cf_codec_params cp;
                    cf__cog_chunk_params(p->cog, c, &cp);
                    size_t n = cf__cog_chunk_raw(p->cog, c) ? (size_t)c->len
                                                            : cf_codec_chunk_bytes(&cp);
                    cf__cc_add(ld->cc, p->cog, c, chunk, n);
                }
            }
        }
        if (st != CF_OK) *bad = p->cog;
    }
    cf__kits_put(&ld->kits, kit);
    cf__bufpool_put(&ld->fetch, &buf);
    return st;
}

/* Read parts[0..np): their chunks in order, in batches that fit the
 * fetch budget.  A chunk that can never fit (its compressed bytes above
 * the fetch budget, or its decode above the decode budget) fails the part
 * with CF_E_LIMIT before anything is allocated.  On failure *bad names the
 * part's file. */
static cf_status read_parts(cf_loader *ld, ld_worker *wk, ld_part *parts,
                            int np, cf_cog **bad, cf_error *err) {
    for (int i = 0; i < np; i++) part_begin(ld, &parts[i]);
    const uint64_t fcap = ld->fetch.b.cap, dcap = ld->kits.b.cap;
    int cur = 0;
    cf_status st = CF_OK;
    while (st == CF_OK) {
        size_t k = 0;
        uint64_t total = 0;
        while (cur < np && k < LD_PART_CHUNKS) {
            ld_part *p = &parts[cur];
            cf_chunk *c = &wk->chunks[k];
            int has;
            st = part_peek(p, c, &has, err);
            if (st != CF_OK) {
                *bad = p->cog;
                break;
            }
            if (!has) {
                cur++;
                continue;
            }
            if (p->cache) {
                void *h;
                const uint8_t *d = cf__cc_get(ld->cc, p->cog, c, &h);
                if (d) {
                    cf__cog_paste(p->cog, c, d, p->x, p->y, p->w, p->h, p->bands0,
                                  (int)p->nbands, p->dst, 1);
                    cf__cc_put(ld->cc, h);
                    p->next++;
                    continue;
                }
            }
            st = cf__budget_fits(p->cog, c, 1, fcap, dcap, "the loader",
                                 ld->o.inflight_bytes, err);
            if (st != CF_OK) {
                *bad = p->cog;
                break;
            }
            if (total + c->len > fcap) break; /* the next batch takes it */
            wk->cpart[k++] = cur;
            total += c->len;
            p->next++;
        }
        if (st != CF_OK || !k) break;
        st = fetch_decode(ld, wk, parts, k, total, bad, err);
    }
    return st;
}

/* ------------------------------------------------------------------ */
/* tile-shuffle cache: whole decoded cells, shared by the crops of them */
/* ------------------------------------------------------------------ */

/* The entry for (part p's file, cell) with a reference held, loading it
 * if needed; NULL when it cannot fit in the budget (the caller then reads
 * directly). */
static ld_cache_ent *cache_get(cf_loader *ld, ld_worker *wk, const ld_part *p,
                               size_t bytes, int64_t cx, int64_t cy,
                               uint32_t cw, uint32_t ch, int *loaded,
                               cf_status *st, cf_cog **bad, cf_error *err) {
    cf_cog *cog = p->cog;
    *st = CF_OK;
    *loaded = 0;
    if (!ld->cache || bytes > ld->o.cache_bytes) return NULL;
    pthread_mutex_lock(&ld->cache_mu);
    for (;;) {
        ld_cache_ent *hit = NULL;
        for (int i = 0; i < ld->ncache; i++) {
            ld_cache_ent *e = &ld->cache[i];
            if (e->cog == cog && e->x == cx && e->y == cy && e->w == cw &&
                e->h == ch) {
                hit = e;
                break;
            }
        }
        if (hit && hit->loading) {
            pthread_cond_wait(&ld->cache_cv, &ld->cache_mu);
            continue; /* it may have failed and gone: search again */
        }
        if (hit) {
            hit->refs++;
            hit->lru = ++ld->cache_tick;
            ld->st_hits++;
            pthread_mutex_unlock(&ld->cache_mu);
            return hit;
        }
        break;
    }
    ld->st_misses++;
    /* Evict least recently used idle entries until the cell fits. */
    while (ld->cache_used + bytes > ld->o.cache_bytes) {
        ld_cache_ent *victim = NULL;
        for (int i = 0; i < ld->ncache; i++) {
            ld_cache_ent *e = &ld->cache[i];
            if (e->cog && !e->loading && !e->refs &&
                (!victim || e->lru < victim->lru))
                victim = e;
        }
        if (!victim) {
            pthread_mutex_unlock(&ld->cache_mu);
            return NULL;
        }
        free(victim->buf);
        ld->cache_used -= victim->bytes;
        memset(victim, 0, sizeof *victim);
    }
    ld_cache_ent *e = NULL;
    for (int i = 0; i < ld->ncache && !e; i++)
        if (!ld->cache[i].cog) e = &ld->cache[i];
    if (!e && ld->ncache < LD_MAX_CACHE_ENTRIES) e = &ld->cache[ld->ncache++];
    if (!e) {
        pthread_mutex_unlock(&ld->cache_mu);
        return NULL;
    }
    e->cog = cog;
    e->x = cx;
    e->y = cy;
    e->w = cw;
    e->h = ch;
    e->bytes = bytes;
    e->loading = 1;
    e->refs = 1;
    e->lru = ++ld->cache_tick;
    ld->cache_used += bytes;
    if (ld->cache_used > ld->cache_peak) ld->cache_peak = ld->cache_used;
    pthread_mutex_unlock(&ld->cache_mu);

    uint8_t *buf = cf__malloc(bytes);
    if (!buf) {
        *st = cf__err(err, CF_E_NOMEM, "loader: %s: cache cell of %zu bytes",
                      cf_cog_name(cog), bytes);
        *bad = cog;
    } else {
        ld_part cell = *p;
        cell.x = cx;
        cell.y = cy;
        cell.w = cw;
        cell.h = ch;
        cell.dst = buf;
        cell.bytes = bytes;
        *st = read_parts(ld, wk, &cell, 1, bad, err);
    }
    pthread_mutex_lock(&ld->cache_mu);
    if (*st != CF_OK) {
        free(buf);
        ld->cache_used -= bytes;
        memset(e, 0, sizeof *e);
        e = NULL;
    } else {
        e->buf = buf;
        e->loading = 0;
        *loaded = 1;
    }
    pthread_cond_broadcast(&ld->cache_cv);
    pthread_mutex_unlock(&ld->cache_mu);
    return e;
}

static void cache_put(cf_loader *ld, ld_cache_ent *e) {
    pthread_mutex_lock(&ld->cache_mu);
    e->refs--;
    pthread_mutex_unlock(&ld->cache_mu);
}

/* Read part p (window `w` of the sample) on its own; with the
 * tile-shuffle sampler, crop it out of the cached cell.  *decoded
 * receives the raw bytes the reader produced. */
static cf_status read_block(cf_loader *ld, ld_worker *wk, ld_part *p,
                            const cf_window *w, uint64_t *decoded,
                            cf_cog **bad, cf_error *err) {
    size_t es = cf_dtype_size(p->dt);
    if (ld->o.sampler == CF_SAMPLER_TILE_SHUFFLE) {
        int64_t cx, cy;
        uint32_t cw, ch;
        cf__sampler_cell(&ld->samp, w, &cx, &cy, &cw, &ch);
        size_t bytes = (size_t)p->nbands * cw * ch * es;
        cf_status st;
        int loaded;
        ld_cache_ent *e = cache_get(ld, wk, p, bytes, cx, cy, cw, ch, &loaded,
                                    &st, bad, err);
        if (st != CF_OK) return st;
        if (e) {
            if (loaded) *decoded += bytes;
            size_t row = (size_t)w->w * es;
            for (uint32_t b = 0; b < p->nbands; b++)
                for (uint32_t r = 0; r < w->h; r++) {
                    const uint8_t *s =
                        e->buf + (((size_t)b * ch + (size_t)(w->y - cy + r)) *
                                      cw +
                                  (size_t)(w->x - cx)) *
                                     es;
                    memcpy(p->dst + ((size_t)b * w->h + r) * row, s, row);
                }
            cache_put(ld, e);
            return CF_OK;
        }
    }
    *decoded += p->bytes;
    return read_parts(ld, wk, p, 1, bad, err);
}

/* ------------------------------------------------------------------ */
/* conversion and augmentation                                          */
/* ------------------------------------------------------------------ */

/* dst[i] = src[i] * a + b, from any sample type. */
static void to_f32(const uint8_t *src, cf_dtype dt, size_t n, float *dst,
                   double a, double b) {
#define CONV(T)                                                      \
    do {                                                             \
        const T *s = (const T *)(const void *)src;                   \
        for (size_t i = 0; i < n; i++)                               \
            dst[i] = (float)((double)s[i] * a + b);                  \
    } while (0)
    switch (dt) {
    case CF_DT_U8: CONV(uint8_t); break;
    case CF_DT_I8: CONV(int8_t); break;
    case CF_DT_U16: CONV(uint16_t); break;
    case CF_DT_I16: CONV(int16_t); break;
    case CF_DT_U32: CONV(uint32_t); break;
    case CF_DT_I32: CONV(int32_t); break;
    case CF_DT_U64: CONV(uint64_t); break;
    case CF_DT_I64: CONV(int64_t); break;
    case CF_DT_F32: CONV(float); break;
    case CF_DT_F64: CONV(double); break;
    default: memset(dst, 0, n * sizeof *dst); break;
    }
#undef CONV
}

/* Rotate a P x P plane by aug&3 quarter turns counter-clockwise (numpy's
 * rot90), then flip it left-right when aug&4 (numpy's flip(axis=-1)). */
static void augment_plane(uint8_t *plane, size_t es, uint32_t P, uint32_t aug,
                          uint8_t *tmp) {
    size_t n = (size_t)P * P;
    memcpy(tmp, plane, n * es);
    const unsigned k = aug & 3, flip = (aug >> 2) & 1;
    for (uint32_t i = 0; i < P; i++) {
        for (uint32_t jj = 0; jj < P; jj++) {
            uint32_t j = flip ? P - 1 - jj : jj;
            uint32_t si, sj;
            switch (k) {
            case 0: si = i; sj = j; break;
            case 1: si = j; sj = P - 1 - i; break;
            case 2: si = P - 1 - i; sj = P - 1 - j; break;
            default: si = P - 1 - j; sj = i; break;
            }
            const uint8_t *s = tmp + ((size_t)si * P + sj) * es;
            uint8_t *d = plane + ((size_t)i * P + jj) * es;
            switch (es) {
            case 1: *d = *s; break;
            case 2: memcpy(d, s, 2); break;
            case 4: memcpy(d, s, 4); break;
            default: memcpy(d, s, es); break;
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* readers                                                              */
/* ------------------------------------------------------------------ */

/* Member mb's raw block `raw` to float32 planes at `out`, with the
 * file's scale/offset (when asked) and the channels' mean/std. */
static void convert_member(const cf_loader *ld, const ld_member *mb,
                           const cf_cog *cog, const uint8_t *raw,
                           uint8_t *out) {
    const cf_loader_options *o = &ld->o;
    cf_dtype dt = mb->layer < 0 ? ld->raw_dt : ld->layer_dt[mb->layer];
    const int *bands = mb->layer < 0 ? ld->bands : NULL;
    for (uint32_t b = 0; b < mb->nb; b++) {
        int band = bands ? bands[b] : (int)b + 1;
        double sc = 1, off = 0;
        if (o->apply_scale_offset) {
            sc = cf_cog_band_scale(cog, band);
            off = cf_cog_band_offset(cog, band);
        }
        uint32_t c = mb->channel + b;
        double mean = ld->mean ? ld->mean[c] : 0;
        double sd = ld->std ? ld->std[c] : 1;
        to_f32(raw + (size_t)b * ld->plane * cf_dtype_size(dt), dt, ld->plane,
               (float *)(void *)(out + b * ld->plane * 4), sc / sd,
               (off - mean) / sd);
    }
}

/* The file that member m of a sample of file f reads. */
static cf_cog *member_cog(const cf_loader *ld, size_t f, const ld_member *mb) {
    return mb->layer < 0
               ? ld->img[f * (size_t)ld->o.time_steps + (size_t)mb->t]
               : ld->lay[f * (size_t)ld->o.nlayers + (size_t)mb->layer];
}

/* One input of a sample (a member, or the mask) as it is read onto the
 * sample's target grid (sample_grid.h): one part read straight into its
 * block (shifted by whole pixels), or, warped, the parts of its source
 * windows, resampled into its block once they are read. */
typedef struct ld_input {
    cf_cog *cog;
    uint8_t *dst;             /* its raw block, nb x P x P */
    cf_dtype dt;
    uint32_t nb;
    int warped;
    int part0;                /* its first part (warped) */
    cf__grid_plan plan;       /* warped */
} ld_input;

/* The part of input m (a member, or the mask when m == nmembers) of
 * sample window w of file f, as the input lies on the image; *slot its
 * url index. */
static void input_part(const cf_loader *ld, ld_worker *wk, size_t f, const cf_window *w, int m,
                       uint8_t *img, uint8_t *mask, size_t off, ld_part *p, size_t *slot) {
    const size_t C = ld->lay_out.channels;
    memset(p, 0, sizeof *p);
    p->level = ld->o.level;
    p->x = w->x;
    p->y = w->y;
    p->w = w->w;
    p->h = w->h;
    if (m == ld->nmembers) {
        *slot = ld->o.nfiles * (size_t)ld->o.time_steps + f;
        p->cog = ld->msk[f];
        p->bands0 = p->planes = ld->ident;
        p->nbands = p->nplanes = 1;
        p->dt = ld->lay_out.mask_dtype;
        p->dst = mask;
        p->bytes = ld->plane * ld->mask_es;
        return;
    }
    const ld_member *mb = &ld->members[m];
    *slot = member_slot(ld, f, mb);
    p->cog = member_cog(ld, f, mb);
    int sel = mb->layer < 0 && ld->bands;
    p->bands0 = sel ? ld->bands0 : ld->ident;
    p->planes = sel ? ld->planes0 : ld->ident;
    p->nbands = mb->nb;
    p->nplanes = sel ? (uint32_t)ld->nplanes0 : mb->nb;
    p->dt = mb->layer < 0 ? ld->raw_dt : ld->layer_dt[mb->layer];
    p->bytes = raw_member_bytes(ld, mb, ld->o.patch_size, ld->o.patch_size);
    p->dst = ld->o.out_dtype == CF_DT_F32
                 ? wk->scratch + off
                 : img + ((size_t)mb->t * C + mb->channel) * ld->plane * ld->es;
}

/* The parts of inputs g, g+1, ... of a sample, as many as fit
 * LD_PART_CHUNKS parts: *ni inputs (whose warp plans the caller frees),
 * *np parts.  Warped inputs' source windows go to the reader's warp
 * scratch, or to *tmp (the caller frees it) when a sample needs more. */
static cf_status place_inputs(cf_loader *ld, ld_worker *wk, size_t f, const cf_window *w, int g,
                              int nall, uint8_t *img, uint8_t *mask, size_t *off,
                              ld_part *parts, int *np, ld_input *ins, int *ni, uint8_t **tmp,
                              cf_cog **bad, cf_error *err) {
    uint64_t need = 0;
    cf_status st = CF_OK;
    *np = *ni = 0;
    while (g + *ni < nall && *ni < LD_PART_CHUNKS) {
        const int m = g + *ni;
        ld_input *in = &ins[*ni];
        memset(in, 0, sizeof *in);
        ld_part p;
        size_t slot;
        input_part(ld, wk, f, w, m, img, mask, *off, &p, &slot);
        const cf__sg_input *how = cf__sg_input_at(ld->sg, slot);
        if (how->how == CF__SG_DIRECT) {
            if (*np == LD_PART_CHUNKS) break;
            p.x += how->dx;
            p.y += how->dy;
            parts[(*np)++] = p;
        } else {
            st = cf__sg_plan(ld->sg, slot, p.cog, f, w->x, w->y, w->w, w->h, (int)p.nbands,
                             &ld->o, &in->plan, err);
            if (st != CF_OK) {
                *bad = p.cog;
                break;
            }
            if (*np + in->plan.n > LD_PART_CHUNKS) {
                size_t n = in->plan.n;
                cf__grid_plan_free(&in->plan);
                if (*ni) break; /* the next group takes it */
                *bad = p.cog;
                st = cf__err(err, CF_E_LIMIT, "%s: %zu source windows for one patch (max %d)",
                             cf_cog_name(p.cog), n, LD_PART_CHUNKS);
                break;
            }
            in->warped = 1;
            in->part0 = *np;
            size_t bps = cf_dtype_size(p.dt);
            for (size_t k = 0; k < in->plan.n; k++) {
                const cf_warp_chunk *c = &in->plan.chunks[k];
                ld_part q = p;
                q.level = c->rq.level;
                q.x = c->win.x;
                q.y = c->win.y;
                q.w = c->win.w;
                q.h = c->win.h;
                q.bytes = (size_t)q.w * q.h * q.nbands * bps;
                q.cache = ld->cc != NULL;
                need += q.bytes;
                parts[(*np)++] = q;
            }
        }
        in->cog = p.cog;
        in->dst = p.dst;
        in->dt = p.dt;
        in->nb = p.nbands;
        if (m < ld->nmembers) *off += p.bytes;
        (*ni)++;
    }
    if (st != CF_OK || !need) return st;
    uint8_t *base = wk->scratch + ld->warp_off;
    if (need > ld->warp_bytes) {
        /* An unusual patch (a steeper reprojection, a missing overview):
         * its own buffer for this read, within a quarter of the budget. */
        cf_cog *first = NULL;
        for (int k = 0; k < *ni && !first; k++)
            if (ins[k].warped) first = ins[k].cog;
        if (need > ld->o.inflight_bytes / 4) {
            *bad = first;
            return cf__err(err, CF_E_LIMIT,
                           "source windows of %llu bytes for one patch, above a quarter of "
                           "inflight_bytes (%zu): add overviews or raise inflight_bytes",
                           (unsigned long long)need, ld->o.inflight_bytes);
        }
        *tmp = cf__malloc((size_t)need);
        if (!*tmp) {
            *bad = first;
            return cf__err(err, CF_E_NOMEM, "out of memory (%llu bytes of source windows)",
                           (unsigned long long)need);
        }
        base = *tmp;
    }
    size_t woff = 0;
    for (int k = 0; k < *ni; k++)
        for (size_t c = 0; ins[k].warped && c < ins[k].plan.n; c++) {
            ld_part *q = &parts[ins[k].part0 + (int)c];
            q->dst = base + woff;
            woff += q->bytes;
        }
    return CF_OK;
}

/* Resample the warped inputs of a group from their source windows (read)
 * into their blocks: GDAL's warp, as cog.read(grid=...) computes it. */
static cf_status finish_inputs(const cf_loader *ld, ld_input *ins, int ni, const ld_part *parts,
                               cf_cog **bad, cf_error *err) {
    for (int i = 0; i < ni; i++) {
        ld_input *in = &ins[i];
        if (!in->warped) continue;
        cf__grid_fill(in->dst, (size_t)in->nb * ld->plane, in->dt, in->plan.fill);
        for (size_t k = 0; k < in->plan.n; k++) {
            const ld_part *q = &parts[in->part0 + (int)k];
            uint8_t *valid = NULL;
            cf_status st = CF_OK;
            if (in->cog->tiff->mask_of_level[q->level] >= 0) {
                /* An internal mask is validity, as for GDAL (a second
                 * request: such files are rare in stacks). */
                size_t npx = (size_t)q->w * q->h;
                valid = cf__malloc(npx);
                st = valid ? cf_cog_read_mask(in->cog, q->level, q->x, q->y, q->w, q->h, valid,
                                              npx, err)
                           : cf__err(err, CF_E_NOMEM, "out of memory");
            }
            if (st == CF_OK)
                st = cf__grid_resample(in->cog, &in->plan, k, q->dst, valid, in->dst,
                                       ld->o.patch_size, err);
            free(valid);
            if (st != CF_OK) {
                *bad = in->cog;
                return st;
            }
        }
    }
    return CF_OK;
}

/* Read, convert and augment sample j into position i of slot s. */
static cf_status read_sample(cf_loader *ld, ld_worker *wk, ld_slot *s,
                             uint32_t i, uint64_t epoch, uint64_t j,
                             uint64_t *decoded,
                             double *t_read, double *t_conv, cf_error *err) {
    const cf_loader_options *o = &ld->o;
    const size_t T = (size_t)o->time_steps, C = ld->lay_out.channels;
    const uint32_t P = o->patch_size;
    const int f32 = o->out_dtype == CF_DT_F32;
    cf_window w;
    cf__sampler_window_at(&ld->samp, epoch, j, &w);
    s->windows[i] = w;
    const size_t f = w.file;
    uint8_t *img = s->image + (size_t)i * T * C * ld->plane * ld->es;
    uint8_t *mask = ld->msk ? s->mask + (size_t)i * ld->plane * ld->mask_es
                            : NULL;
    /* The parts: image members (raw into the slot, or into scratch when
     * converted to float32), then the mask, each on the sample's target
     * grid.  They go out together, up to LD_PART_CHUNKS parts at a time (a
     * long time series takes several groups). */
    const int nall = ld->nmembers + (mask != NULL);
    ld_part parts[LD_PART_CHUNKS];
    ld_input ins[LD_PART_CHUNKS];
    size_t off = 0;
    cf_status st = CF_OK;
    cf_cog *bad = NULL;
    double t0 = cf__now();
    for (int g = 0; g < nall && st == CF_OK;) {
        int np, ni;
        uint8_t *tmp = NULL;
        st = place_inputs(ld, wk, f, &w, g, nall, img, mask, &off, parts, &np, ins, &ni, &tmp,
                          &bad, err);
        if (st == CF_OK && o->sampler != CF_SAMPLER_TILE_SHUFFLE) {
            st = read_parts(ld, wk, parts, np, &bad, err);
            for (int k = 0; k < np && st == CF_OK; k++) *decoded += parts[k].bytes;
        } else {
            for (int k = 0; k < np && st == CF_OK; k++) {
                const ld_part *p = &parts[k];
                /* The shuffle cache holds cells of the loader's level,
                 * on the image's own pixels. */
                if (p->level == o->level && p->x == w.x && p->y == w.y)
                    st = read_block(ld, wk, &parts[k], &w, decoded, &bad, err);
                else if ((st = read_parts(ld, wk, &parts[k], 1, &bad, err)) == CF_OK)
                    *decoded += p->bytes;
            }
        }
        if (st == CF_OK) st = finish_inputs(ld, ins, ni, parts, &bad, err);
        for (int k = 0; k < ni; k++)
            if (ins[k].warped) cf__grid_plan_free(&ins[k].plan);
        free(tmp);
        g += ni;
    }
    *t_read += cf__now() - t0;
    /* The file whose read failed; the sample's image if none was named. */
    if (st != CF_OK)
        return cf__err_prefix(err, st,
                              "loader: sample %llu (%s, window %lld,%lld,%u,%u)",
                              (unsigned long long)w.index,
                              cf_cog_name(bad ? bad : ld->img[f * T]),
                              (long long)w.x, (long long)w.y, w.w, w.h);
    double t2 = cf__now();
    off = 0;
    for (int m = 0; f32 && m < ld->nmembers; m++) {
        const ld_member *mb = &ld->members[m];
        convert_member(ld, mb, member_cog(ld, f, mb), wk->scratch + off,
                       img + ((size_t)mb->t * C + mb->channel) * ld->plane *
                                 ld->es);
        off += raw_member_bytes(ld, mb, P, P);
    }
    if (w.aug) {
        for (size_t p = 0; p < T * C; p++)
            augment_plane(img + p * ld->plane * ld->es, ld->es, P, w.aug,
                          wk->scratch);
        if (mask) augment_plane(mask, ld->mask_es, P, w.aug, wk->scratch);
    }
    *t_conv += cf__now() - t2;
    return CF_OK;
}

/* The loader's io counters: the sum over its io loops. */
static void io_stats(cf_loader *ld, cf_io_stats *out) {
    memset(out, 0, sizeof *out);
    if (ld->released) {
        *out = ld->io_final;
        return;
    }
    for (int i = 0; i < ld->nios; i++) {
        cf_io_stats s;
        cf_io_get_stats(ld->ios[i], &s);
        out->requests += s.requests;
        out->retries += s.retries;
        out->hedges += s.hedges;
        out->hedge_wins += s.hedge_wins;
        out->bytes_fetched += s.bytes_fetched;
        out->connect_failures += s.connect_failures;
        out->read_failures += s.read_failures;
        out->header_cache_hits += s.header_cache_hits;
        out->inflight += s.inflight;
        out->max_inflight += s.max_inflight;
    }
}

static double process_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Feed the controller (loader_adapt.c) one window of at least 0.25 s and
 * `conc` samples: how busy the CPUs were, retries, whether the ring was
 * full.  Called under ld->mu after each sample. */
static void adapt(cf_loader *ld) {
    if (ld->o.max_inflight) return;
    double now = cf__now();
    int in_window = ld->win_t0 != 0; /* a window is running */
    if (in_window) {
        ld->win_done++;
        if (now - ld->win_t0 < 0.25 || ld->win_done < (uint64_t)ld->ctl.conc)
            return;
    }
    cf_io_stats ios;
    io_stats(ld, &ios);
    double cpu_now = process_cpu_s();
    uint64_t sb = 0, stot = 0;
    int sys = cf__cpu_ticks(&sb, &stot);
    if (in_window) {
        /* Busy: this process's share of all cores, or the whole machine's
         * where /proc/stat tells it (a local server, the training step and
         * other processes use the same cores), whichever is larger. */
        double busy = (cpu_now - ld->win_cpu0) /
                      ((now - ld->win_t0) * (double)cf__ncpu());
        if (sys && ld->win_sys && stot > ld->win_sys_total0) {
            double m = (double)(sb - ld->win_sys_busy0) /
                       (double)(stot - ld->win_sys_total0);
            if (m > busy) busy = m;
        }
        int before = ld->ctl.conc;
        int c = cf__adapt_step(&ld->ctl, busy, ios.retries > ld->win_retries,
                               ld->win_backpressure);
        if (c > before) pthread_cond_broadcast(&ld->work_cv);
        if (ld->own_io && ld->remote) {
            int io_n = c * 4 < 16 ? 16 : c * 4;
            for (int i = 0; i < ld->nios; i++)
                cf_io_set_max_inflight(ld->ios[i], io_n > CF_IO_MAX_INFLIGHT
                                                       ? CF_IO_MAX_INFLIGHT
                                                       : io_n);
        }
    }
    /* The next window starts here. */
    ld->win_t0 = now;
    ld->win_cpu0 = cpu_now;
    ld->win_sys = sys;
    ld->win_sys_busy0 = sb;
    ld->win_sys_total0 = stot;
    ld->win_done = 0;
    ld->win_retries = ios.retries;
    ld->win_backpressure = 0;
}

/* 1: sample next_claim may be read now; 0: wait; -1: epoch done. */
static uint64_t claim_seq(const cf_loader *ld) {
    uint64_t b = ld->next_claim / ld->o.batch_size;
    return ld->seq_base + b +
           (ld->claim_epoch != ld->epoch ? ld->lay_out.batches : 0);
}

static int claimable(cf_loader *ld) {
    if (ld->stop || ld->closed || !ld->total) return -1;
    if (ld->next_claim >= ld->total) {
        /* This epoch is all claimed: go on into the next one, which the
         * consumer starts with cf_loader_set_epoch(epoch + 1, 0); one
         * epoch ahead at most. */
        if (ld->claim_epoch != ld->epoch) return 0;
        ld->claim_epoch = ld->epoch + 1;
        ld->next_claim = 0;
    }
    if (ld->reading >= ld->ctl.conc) return 0;
    uint64_t q = claim_seq(ld);
    ld_slot *s = &ld->slots[q % (uint64_t)ld->o.prefetch];
    if (s->state == SLOT_FILLING && s->batch == q) return 1;
    if (s->state == SLOT_FREE) return 1;
    ld->win_backpressure = 1;
    return 0;
}

/* Failures that are not the sample's fault but the run's: expired or
 * wrong credentials (401/403), an object that was readable and is gone
 * (404, a deleted file), an object replaced while read (ETag, 412, a
 * rewritten file), no memory, a stopped loader.  skip_errors never drops
 * these: the batch fails with them.  Corrupt or oversized tiles, and
 * transport failures after the io layer's retries, are the sample's. */
static int fatal_error(cf_status st) {
    switch (st) {
    case CF_E_AUTH:
    case CF_E_NOTFOUND:
    case CF_E_CHANGED:
    case CF_E_NOMEM:
    case CF_E_STATE:
    case CF_E_ARG: return 1;
    default: return 0;
    }
}

static void *worker_main(void *arg) {
    ld_worker *wk = arg;
    cf__thread_name("cf-reader");
    cf_loader *ld = wk->ld;
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        int c;
        while ((c = claimable(ld)) == 0)
            pthread_cond_wait(&ld->work_cv, &ld->mu);
        if (c < 0) break;
        uint64_t q = claim_seq(ld), ep = ld->claim_epoch;
        uint64_t j = ld->next_claim++;
        uint64_t b = j / ld->o.batch_size;
        uint32_t i = (uint32_t)(j % ld->o.batch_size);
        ld_slot *s = &ld->slots[q % (uint64_t)ld->o.prefetch];
        if (s->state == SLOT_FREE) {
            uint64_t left = ld->total - b * ld->o.batch_size;
            s->state = SLOT_FILLING;
            s->batch = q;
            s->n = left < ld->o.batch_size ? (uint32_t)left : ld->o.batch_size;
            s->done = s->failed = 0;
            s->fatal = 0;
            cf__err_clear(&s->err);
        }
        ld->reading++;
        pthread_mutex_unlock(&ld->mu);

        cf_error e;
        cf__err_clear(&e);
        uint64_t decoded = 0;
        double tr = 0, tc = 0;
        cf_status st = read_sample(ld, wk, s, i, ep, j, &decoded, &tr, &tc, &e);

        pthread_mutex_lock(&ld->mu);
        ld->reading--;
        ld->st_decoded += decoded;
        ld->st_read += tr;
        ld->st_convert += tc;
        s->ok[i] = st == CF_OK;
        if (st != CF_OK && !s->failed++) s->err = e;
        if (st != CF_OK && !s->fatal && fatal_error(st)) {
            s->fatal = 1;
            s->fatal_err = e;
        }
        if (++s->done == s->n) {
            s->state = SLOT_READY;
            pthread_cond_broadcast(&ld->ready_cv);
        }
        adapt(ld);
        pthread_cond_signal(&ld->work_cv);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

static cf_status start_threads(cf_loader *ld, cf_error *err) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* Readers keep their buffers on the heap: small stacks let many
     * threads wait on the network cheaply. */
    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
    int started = 0;
    for (int t = 0; t < ld->nthreads; t++) {
        ld_worker *wk = &ld->workers[t];
        wk->ld = ld;
        if (!wk->scratch) {
            wk->scratch = cf__malloc(ld->scratch_bytes);
            wk->scratch_bytes = ld->scratch_bytes;
            if (!wk->scratch) break;
        }
        if (pthread_create(&wk->th, &attr, worker_main, wk) != 0) break;
        started++;
    }
    pthread_attr_destroy(&attr);
    ld->running = started;
    if (!started)
        return cf__err(err, CF_E_NOMEM, "loader: cannot start reader threads");
    /* Fewer threads than planned still work: cap the concurrency. */
    if (ld->ctl.max_conc > started) ld->ctl.max_conc = started;
    if (ld->ctl.conc > started) ld->ctl.conc = started;
    return CF_OK;
}

/* Called without ld->mu held.  The caller that sees the threads running
 * joins them (cf_loader_close may race a cf_loader_set_epoch). */
static void stop_threads(cf_loader *ld) {
    pthread_mutex_lock(&ld->mu);
    int n = ld->running;
    ld->running = 0;
    ld->stop = 1;
    pthread_cond_broadcast(&ld->work_cv);
    pthread_mutex_unlock(&ld->mu);
    /* Readers waiting for memory give up their patch (it is dropped). */
    cf__budget_abort(&ld->fetch.b, 1);
    cf__budget_abort(&ld->kits.b, 1);
    for (int t = 0; t < n; t++) pthread_join(ld->workers[t].th, NULL);
    cf__budget_abort(&ld->fetch.b, 0);
    cf__budget_abort(&ld->kits.b, 0);
    pthread_mutex_lock(&ld->mu);
    ld->stop = 0; /* a closed loader's readers stop on ld->closed */
    pthread_mutex_unlock(&ld->mu);
}

/* ------------------------------------------------------------------ */
/* consumer                                                             */
/* ------------------------------------------------------------------ */

/* After fork() the child has the loader's memory but not its threads
 * (and maybe a lock held by one of them): refuse to use it there. */
static cf_status check_pid(const cf_loader *ld, cf_error *err) {
    if (getpid() == ld->pid) return CF_OK;
    return cf__err(err, CF_E_STATE,
                   "loader: created in process %d, used in %d after fork(): "
                   "create a loader in each process",
                   (int)ld->pid, (int)getpid());
}

/* Under ld->mu, with skip_errors, for each batch in order: record its
 * samples' outcomes in the window of the last skip_window, and 1 when
 * more than skip_limit of that window failed (samples not seen yet count
 * as read): a run whose reads mostly fail then stops with the cause
 * instead of delivering empty batches. */
static int skip_record(cf_loader *ld, const ld_slot *s) {
    for (uint32_t i = 0; i < s->n; i++) {
        uint8_t *h = &ld->skip_hist[ld->skip_pos];
        ld->skip_dropped -= *h;
        *h = !s->ok[i];
        ld->skip_dropped += *h;
        ld->skip_pos = (ld->skip_pos + 1) % ld->skip_window;
    }
    return (double)ld->skip_dropped > ld->o.skip_limit * ld->skip_window;
}

/* Under ld->mu: slot s holds the consumer's next batch, complete. */
static int slot_ready(const cf_loader *ld, const ld_slot *s) {
    return s->state == SLOT_READY && s->batch == ld->seq_base + ld->next_batch;
}

/* Under ld->mu: 1 when cf_loader_next would return at once (batch ready,
 * end of epoch, or an error), else 0 after starting the readers if
 * needed.  *s receives the slot of the next batch. */
static int next_ready(cf_loader *ld, ld_slot **s, cf_status *st,
                      cf_error *err) {
    *st = CF_OK;
    if (ld->closed) {
        *st = cf__err(err, CF_E_STATE, "loader: closed");
        return 1;
    }
    if (ld->next_batch >= ld->lay_out.batches) {
        *st = cf__err(err, CF_E_END, "loader: end of epoch %llu",
                      (unsigned long long)ld->epoch);
        return 1;
    }
    *s = &ld->slots[(ld->seq_base + ld->next_batch) % (uint64_t)ld->o.prefetch];
    if ((*s)->state == SLOT_HELD) {
        *st = cf__err(err, CF_E_STATE,
                      "loader: all %d ring slots are held: release a batch "
                      "before taking the next",
                      ld->o.prefetch);
        return 1;
    }
    if (!ld->running) {
        if (ld->t_start == 0) ld->t_start = cf__now();
        *st = start_threads(ld, err);
        if (*st != CF_OK) return 1;
    }
    return slot_ready(ld, *s);
}

int cf_loader_wait(cf_loader *ld, double timeout_s) {
    if (getpid() != ld->pid) return 1; /* next() reports the misuse */
    pthread_mutex_lock(&ld->mu);
    ld_slot *s;
    cf_status st;
    int ready = next_ready(ld, &s, &st, NULL);
    if (!ready) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        double t0 = (double)until.tv_sec + until.tv_nsec * 1e-9;
        double end = t0 + (timeout_s > 0 ? timeout_s : 0);
        until.tv_sec = (time_t)end;
        until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
        while (!ready) {
            if (pthread_cond_timedwait(&ld->ready_cv, &ld->mu, &until) ==
                ETIMEDOUT) {
                ready = slot_ready(ld, s) || ld->closed;
                break;
            }
            ready = slot_ready(ld, s) || ld->closed;
        }
        ld->st_wait += cf__now() - t0;
    }
    pthread_mutex_unlock(&ld->mu);
    return ready;
}

cf_status cf_loader_next(cf_loader *ld, cf_batch *out, cf_error *err) {
    memset(out, 0, sizeof *out);
    out->slot = -1;
    if (check_pid(ld, err) != CF_OK) return CF_E_STATE;
    pthread_mutex_lock(&ld->mu);
    ld_slot *s = NULL;
    cf_status st;
    if (!next_ready(ld, &s, &st, err)) {
        double t0 = cf__now();
        while (!slot_ready(ld, s) && !ld->closed)
            pthread_cond_wait(&ld->ready_cv, &ld->mu);
        ld->st_wait += cf__now() - t0;
        if (ld->closed) {
            pthread_mutex_unlock(&ld->mu);
            return cf__err(err, CF_E_STATE, "loader: closed");
        }
    } else if (st != CF_OK) {
        pthread_mutex_unlock(&ld->mu);
        return st;
    }
    uint64_t b = ld->next_batch++;
    const cf_error *fail = NULL;
    cf_error gave_up;
    if (s->failed && (!ld->o.skip_errors || s->fatal))
        fail = s->fatal ? &s->fatal_err : &s->err;
    else if (ld->o.skip_errors && skip_record(ld, s) && s->failed) {
        gave_up = s->err;
        cf__err_hint(&gave_up, gave_up.code,
                     "skip_errors gave up: %u of the last %u samples failed "
                     "(skip_limit %g)",
                     ld->skip_dropped, ld->skip_window, ld->o.skip_limit);
        fail = &gave_up;
    }
    if (fail) {
        if (err) *err = *fail;
        cf_status code = fail->code ? fail->code : CF_E_IO;
        s->state = SLOT_FREE;
        pthread_cond_broadcast(&ld->work_cv);
        pthread_mutex_unlock(&ld->mu);
        return code;
    }
    const size_t img_b =
        (size_t)ld->o.time_steps * ld->lay_out.channels * ld->plane * ld->es;
    const size_t msk_b = ld->plane * ld->mask_es;
    if (s->failed) {
        /* Drop failed samples, keeping the order of the others. */
        uint32_t k = 0;
        for (uint32_t i = 0; i < s->n; i++) {
            if (!s->ok[i]) continue;
            if (k != i) {
                memmove(s->image + k * img_b, s->image + i * img_b, img_b);
                if (s->mask)
                    memmove(s->mask + k * msk_b, s->mask + i * msk_b, msk_b);
                s->windows[k] = s->windows[i];
            }
            k++;
        }
        ld->st_skipped += s->failed;
        s->n = k;
        s->failed = 0;
    }
    s->state = SLOT_HELD;
    ld->st_batches++;
    ld->st_samples += s->n;
    ld->st_delivered += (uint64_t)s->n * (img_b + msk_b);
    out->index = b;
    out->seq = s->batch;
    out->n = s->n;
    out->slot = (int)(s - ld->slots);
    out->image = s->image;
    out->mask = s->mask;
    out->windows = s->windows;
    pthread_mutex_unlock(&ld->mu);
    return CF_OK;
}

void cf_loader_release(cf_loader *ld, const cf_batch *b) {
    if (!ld || !b || b->slot < 0 || b->slot >= ld->o.prefetch) return;
    if (getpid() != ld->pid) return; /* forked child: see check_pid */
    pthread_mutex_lock(&ld->mu);
    ld_slot *s = &ld->slots[b->slot];
    if (s->state == SLOT_HELD && s->batch == b->seq) {
        s->state = SLOT_FREE;
        pthread_cond_broadcast(&ld->work_cv);
    }
    pthread_mutex_unlock(&ld->mu);
}

cf_status cf_loader_set_epoch(cf_loader *ld, uint64_t epoch, uint64_t batch,
                              cf_error *err) {
    if (check_pid(ld, err) != CF_OK) return CF_E_STATE;
    pthread_mutex_lock(&ld->mu);
    if (ld->closed) {
        pthread_mutex_unlock(&ld->mu);
        return cf__err(err, CF_E_STATE, "loader: closed");
    }
    if (ld->running && epoch == ld->epoch + 1 && batch == 0 &&
        ld->next_batch >= ld->lay_out.batches) {
        /* The usual turn of the epoch: every batch of this one was taken,
         * and the readers are already reading the next one.  Keep their
         * work; only the batches still held are given back (their views
         * end here, as documented). */
        for (int i = 0; i < ld->o.prefetch; i++)
            if (ld->slots[i].state == SLOT_HELD) ld->slots[i].state = SLOT_FREE;
        if (ld->claim_epoch != epoch) {
            ld->claim_epoch = epoch;
            ld->next_claim = 0;
        }
        ld->seq_base += ld->lay_out.batches;
        ld->epoch = epoch;
        cf__sampler_set_epoch(&ld->samp, epoch);
        ld->next_batch = 0;
        pthread_cond_broadcast(&ld->work_cv);
        pthread_mutex_unlock(&ld->mu);
        return CF_OK;
    }
    pthread_mutex_unlock(&ld->mu);
    stop_threads(ld);
    pthread_mutex_lock(&ld->mu);
    for (int i = 0; i < ld->o.prefetch; i++) ld->slots[i].state = SLOT_FREE;
    /* Past every sequence number in use (read-ahead reaches two epochs),
     * so that a stale release cannot match a new batch. */
    ld->seq_base += 2 * ld->lay_out.batches + 1;
    ld->epoch = ld->claim_epoch = epoch;
    cf__sampler_set_epoch(&ld->samp, epoch);
    if (batch > ld->lay_out.batches) batch = ld->lay_out.batches;
    ld->next_batch = batch;
    ld->next_claim = batch * ld->o.batch_size;
    if (ld->next_claim > ld->total) ld->next_claim = ld->total;
    ld->win_t0 = 0;
    pthread_mutex_unlock(&ld->mu);
    return CF_OK;
}

void cf_loader_position(const cf_loader *ld, uint64_t *epoch,
                        uint64_t *next_batch) {
    cf_loader *m = (cf_loader *)ld; /* the lock is not part of the value */
    int child = getpid() != ld->pid; /* a copied lock may be held forever */
    if (!child) pthread_mutex_lock(&m->mu);
    if (epoch) *epoch = ld->epoch;
    if (next_batch) *next_batch = ld->next_batch;
    if (!child) pthread_mutex_unlock(&m->mu);
}

cf_status cf_loader_set_buffers(cf_loader *ld, int slot, void *image,
                                void *mask, cf_error *err) {
    if (slot < 0 || slot >= ld->o.prefetch)
        return cf__err(err, CF_E_ARG, "loader: slot %d not in [0, %d)", slot,
                       ld->o.prefetch);
    if (!image || (ld->lay_out.mask_bytes && !mask))
        return cf__err(err, CF_E_ARG, "loader: slot %d: buffer missing", slot);
    pthread_mutex_lock(&ld->mu);
    ld_slot *s = &ld->slots[slot];
    if (ld->running || s->state != SLOT_FREE) {
        pthread_mutex_unlock(&ld->mu);
        return cf__err(err, CF_E_STATE,
                       "loader: buffers can only be set before reading "
                       "starts (or right after set_epoch)");
    }
    if (s->own_buffers) {
        free(s->image);
        free(s->mask);
    }
    s->own_buffers = 0;
    s->image = image;
    s->mask = ld->lay_out.mask_bytes ? mask : NULL;
    pthread_mutex_unlock(&ld->mu);
    return CF_OK;
}

cf_status cf_loader_window(const cf_loader *ld, uint64_t j, cf_window *out,
                           cf_error *err) {
    if (j >= ld->total)
        return cf__err(err, CF_E_ARG, "loader: sample %llu >= %llu",
                       (unsigned long long)j, (unsigned long long)ld->total);
    cf__sampler_window(&ld->samp, j, out);
    return CF_OK;
}

cf_status cf_loader_window_grid(const cf_loader *ld, const cf_window *w, cf_grid *out,
                                cf_error *err) {
    if (!ld || !w || !out) return cf__err(err, CF_E_ARG, "cf_loader_window_grid: NULL argument");
    return cf__sg_window_grid(ld->sg, w->file, w->x, w->y, w->w, w->h, out, err);
}

void cf_loader_get_stats(cf_loader *ld, cf_loader_stats *out) {
    memset(out, 0, sizeof *out);
    if (getpid() != ld->pid) return; /* forked child: see check_pid */
    cf_io_stats ios;
    pthread_mutex_lock(&ld->mu); /* the io loops may be going (close) */
    io_stats(ld, &ios);
    out->bytes_fetched = ios.bytes_fetched;
    out->requests = ios.requests;
    out->retries = ios.retries;
    out->io_inflight = ios.inflight;
    out->hedges = ios.hedges;
    out->hedge_wins = ios.hedge_wins;
    out->samples = ld->st_samples;
    out->batches = ld->st_batches;
    out->skipped = ld->st_skipped;
    out->bytes_decoded = ld->st_decoded;
    out->bytes_delivered = ld->st_delivered;
    out->concurrency = ld->ctl.conc;
    out->reading = ld->reading;
    out->wait_s = ld->st_wait;
    out->read_busy_s = ld->st_read;
    out->convert_busy_s = ld->st_convert;
    out->elapsed_s = ld->t_start ? cf__now() - ld->t_start : 0;
    pthread_mutex_unlock(&ld->mu);
    pthread_mutex_lock(&ld->cache_mu);
    out->cache_hits = ld->st_hits;
    out->cache_misses = ld->st_misses;
    uint64_t cache_used = ld->cache_used, cache_peak = ld->cache_peak;
    pthread_mutex_unlock(&ld->cache_mu);
    /* The budget (docs/loader.md, "Memory") and what is charged to it;
     * the peak adds the parts' own peaks, so it is an upper bound. */
    uint64_t fu, fp, du, dp;
    cf__budget_usage(&ld->fetch.b, &fu, &fp);
    cf__budget_usage(&ld->kits.b, &du, &dp);
    uint64_t fixed = ld->ring_bytes +
                     (uint64_t)ld->nthreads * ld->scratch_bytes;
    if (ld->cc) {
        uint64_t h, m;
        size_t u, pk;
        cf__cc_stats(ld->cc, &h, &m, &u, &pk);
        out->cache_hits += h;
        out->cache_misses += m;
        cache_used += u;
        cache_peak += pk;
    }
    out->memory_budget = ld->ring_bytes + ld->o.inflight_bytes +
                         (ld->cache || ld->cc ? ld->o.cache_bytes : 0);
    out->memory_used = fixed + cache_used + fu + du;
    out->memory_peak = fixed + cache_peak + fp + dp;
}

/* Close the files and the loader's own io loops now (their connections,
 * sockets and descriptors), not when the last batch view dies: nothing
 * reads after close.  The io counters are kept for stats; cf_loader_free
 * then finds nothing left to close. */
static void release_inputs(cf_loader *ld) {
    pthread_mutex_lock(&ld->mu);
    io_stats(ld, &ld->io_final);
    ld->io_final.inflight = 0;
    ld->released = 1;
    pthread_mutex_unlock(&ld->mu);
    size_t nimg = ld->o.nfiles * (size_t)ld->o.time_steps;
    for (size_t i = 0; ld->img && i < nimg; i++) {
        cf_cog_close(ld->img[i]);
        ld->img[i] = NULL;
    }
    for (size_t i = 0; ld->msk && i < ld->o.nfiles; i++) {
        cf_cog_close(ld->msk[i]);
        ld->msk[i] = NULL;
    }
    for (size_t i = 0; ld->lay && i < ld->o.nfiles * (size_t)ld->o.nlayers; i++) {
        cf_cog_close(ld->lay[i]);
        ld->lay[i] = NULL;
    }
    for (int i = 0; ld->own_io && i < ld->nios; i++) {
        cf_io_free(ld->ios[i]);
        ld->ios[i] = NULL;
    }
    ld->nios = 0;
    ld->io = NULL;
    /* The readers' memory too (the ring stays: batches may view it). */
    for (int t = 0; ld->workers && t < ld->nthreads; t++) {
        free(ld->workers[t].scratch);
        ld->workers[t].scratch = NULL;
    }
    if (ld->budgets) {
        cf__budget_trim(&ld->fetch.b);
        cf__budget_trim(&ld->kits.b);
    }
    if (ld->cc) cf__cc_clear(ld->cc);
    pthread_mutex_lock(&ld->cache_mu);
    for (int i = 0; i < ld->ncache; i++) free(ld->cache[i].buf);
    if (ld->cache) memset(ld->cache, 0, (size_t)ld->ncache * sizeof *ld->cache);
    ld->ncache = 0;
    ld->cache_used = 0;
    pthread_mutex_unlock(&ld->cache_mu);
}

void cf_loader_close(cf_loader *ld) {
    if (!ld || getpid() != ld->pid) return; /* forked child: no threads */
    pthread_mutex_lock(&ld->mu);
    int was = ld->closed;
    ld->closed = 1;
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->mu);
    if (was) return;
    if (!ld->workers) {
        release_inputs(ld);
        return;
    }
    /* Readers wait on their requests: fail those instead of waiting out
     * round trips or, on a hung server, request_timeout_s.  Not on an io
     * the caller shares with others. */
    for (int i = 0; ld->own_io && i < ld->nios; i++) cf__io_cancel(ld->ios[i], 1);
    stop_threads(ld);
    release_inputs(ld);
}

void cf_loader_free(cf_loader *ld) {
    if (!ld) return;
    /* In a forked child there are no reader threads to stop, and a lock may
     * have been copied while held: free the memory only. */
    int child = ld->pid && getpid() != ld->pid;
    if (!child) cf_loader_close(ld);
    for (int t = 0; ld->workers && t < ld->nthreads; t++)
        free(ld->workers[t].scratch);
    free(ld->workers);
    if (ld->budgets) {
        cf__bufpool_destroy(&ld->fetch, !child);
        cf__kits_destroy(&ld->kits, !child);
    }
    free(ld->skip_hist);
    free(ld->planes0);
    for (int i = 0; ld->slots && i < ld->o.prefetch; i++) {
        if (ld->slots[i].own_buffers) {
            free(ld->slots[i].image);
            free(ld->slots[i].mask);
        }
        free(ld->slots[i].windows);
        free(ld->slots[i].ok);
    }
    free(ld->slots);
    for (int i = 0; i < ld->ncache; i++) free(ld->cache[i].buf);
    free(ld->cache);
    size_t nimg = ld->o.nfiles * (size_t)ld->o.time_steps;
    for (size_t i = 0; ld->img && i < nimg; i++) cf_cog_close(ld->img[i]);
    for (size_t i = 0; ld->msk && i < ld->o.nfiles; i++)
        cf_cog_close(ld->msk[i]);
    for (size_t i = 0; ld->lay && i < ld->o.nfiles * (size_t)ld->o.nlayers;
         i++)
        cf_cog_close(ld->lay[i]);
    free(ld->img);
    free(ld->msk);
    free(ld->lay);
    for (int i = 0; ld->own_io && i < ld->nios; i++) cf_io_free(ld->ios[i]);
    for (size_t i = 0; ld->urls && i < ld->nurls; i++) free(ld->urls[i]);
    free(ld->urls);
    free(ld->bands);
    free(ld->bands0);
    free(ld->mean);
    free(ld->std);
    free(ld->members);
    free(ld->layer_bands);
    free(ld->layer_dt);
    cf__sg_free(ld->sg);
    cf__cc_free(ld->cc);
    cf__sampler_free(&ld->samp);
    if (!child) {
        pthread_mutex_destroy(&ld->mu);
        pthread_cond_destroy(&ld->work_cv);
        pthread_cond_destroy(&ld->ready_cv);
        pthread_mutex_destroy(&ld->cache_mu);
        pthread_cond_destroy(&ld->cache_cv);
    }
    free(ld);
}
