/*
 * loader_internal.h - what the pieces of the Loader share (docs/internals.md
 * draws them):
 *
 *   loader_open.c   opening the inputs from many threads, placing each on
 *                   its sample's target grid (sample_grid.c)
 *   loader_build.c  options, channels, the sampler, the budget, the ring;
 *                   freeing it all
 *   sample_read.c   one sample: plan (read_plan.c), fetch, decode and paste
 *                   its files' chunks, crop cells of the tile cache
 *                   (tile_cache.c), resample inputs that are not on the
 *                   sample's grid (read_grid.c's plan, their decoded
 *                   chunks kept in chunk_cache.c), convert and augment
 *                   (convert.c)
 *   loader.c        the ring of batch slots, the reader threads, the
 *                   consumer's calls, stats, close
 */
#ifndef CF_LOADER_INTERNAL_H
#define CF_LOADER_INTERNAL_H

#include <pthread.h>
#include <sys/types.h>

#include "../common/common.h"
#include "budget.h"
#include "chunk_cache.h"
#include "cog_internal.h"
#include "footprint.h"
#include "../geo/geo.h"
#include "loader_adapt.h"
#include "loader_options.h"
#include "read_plan.h"
#include "sample_grid.h"
#include "sampler.h"
#include "tile_cache.h"

#define LD_MAX_THREADS CF__LD_MAX_THREADS
#define LD_MAX_PREFETCH CF__LD_MAX_PREFETCH
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
    uint8_t *valid;           /* valid_mask: always the loader's own */
    int own_buffers;
    cf_window *windows;
    uint8_t *ok;              /* per sample: 1 read fine */
    cf_error err;             /* first failure of the batch */
    int fatal;                /* a failure skip_errors must not hide */
    cf_error fatal_err;       /* the first of those */
} ld_slot;

/* n rounded up to a multiple of 16: where regions of the readers'
 * scratch start, so that typed reads of any sample type are aligned. */
#define CF__ALIGN16(n) (((n) + 15) & ~(__typeof__(n))15)

/* ld_member.layer of a scene's classification mask (scene_masks). */
#define LD_SCENE_MASK (-2)

/* One member of a sample: an image scene or an extra layer, read into a
 * range of output channels; or a scene's classification mask, read for
 * validity only. */
typedef struct ld_member {
    int t;                    /* scene (images[f * time_steps + t]) */
    int step;                 /* output step: t / ld->step_scenes */
    int later;                /* a mosaic's scene after its step's first
                                 (or its scene mask): fills that step */
    int layer;                /* -1: the image, LD_SCENE_MASK, else layer
                                 index */
    uint32_t channel;         /* first output channel */
    uint32_t nb;              /* bands read */
    size_t soff;              /* float32 output: its raw block's place in
                                 a reader's scratch */
} ld_member;

typedef struct ld_worker {
    cf_loader *ld;
    pthread_t th;
    uint8_t *scratch;         /* raw member blocks, then one output plane */
    size_t scratch_bytes;
    uint64_t *cov;            /* mosaic, per output step: which of 8 x 8
                                 pixels of the sample the footprints of
                                 the scenes looked at so far reach
                                 (cf__fp_points; made when first needed) */
    cf__warp_pos *pos;        /* positions across CRSs kept for the
                                 sample's next scene of the same grid
                                 (made when first needed) */
    /* One batch of chunks (read_parts): fetched together into buf. */
    cf__chunk chunks[LD_PART_CHUNKS];
    int cpart[LD_PART_CHUNKS]; /* the part each chunk belongs to */
    cf__range_req reqs[LD_PART_CHUNKS];
    cf_error errs[LD_PART_CHUNKS];
    void *claim[LD_PART_CHUNKS]; /* its chunk cache claim, or NULL */
    uint32_t crows[LD_PART_CHUNKS]; /* rows to decode (cf__cog_chunk_rows) */
    size_t cbytes[LD_PART_CHUNKS];  /* what decoding them writes */
    /* Chunks other readers claimed (chunk_cache.h), waited on once this
     * reader's own fetches are done; and those whose claimer gave up,
     * fetched by this reader. */
    cf__chunk wchunks[LD_PART_CHUNKS];
    int wpart[LD_PART_CHUNKS];
    void *wh[LD_PART_CHUNKS];
    cf__chunk rchunks[LD_PART_CHUNKS];
    int rpart[LD_PART_CHUNKS];
    uint64_t chunk_bytes;     /* decoded by the codecs for the sample being
                                 read (cf_loader_stats.chunk_bytes_decoded) */
    uint64_t rounds;          /* its rounds of reads (read_rounds) */
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
    cf__plan plan;            /* its chunks (read_plan.h) */
} ld_part;

struct cf_loader {
    cf_loader_options o;      /* pointer fields below are owned copies */
    char **urls;              /* images then masks then layers */
    size_t nurls;
    int *bands, *bands0;      /* as given (1-based), and 0-based */
    int *planes0, nplanes0;   /* bands0 without repeats (planar files) */
    float *mean, *std;
    cf__sg *sg;               /* each input on its sample's target grid */
    size_t valid_bytes;       /* valid_mask: batch_size x valid_steps x
                                 P x P per slot */
    size_t valid_off;         /* valid_mask, mosaic: an input's P x P
                                 validity in the readers' scratch */
    size_t mosaic_off;        /* mosaic: a later scene's raw block, the
                                 patch's filled plane and the scene's
                                 valid plane, in the readers' scratch */
    size_t filled_off, scene_valid_off; /* filled: a plane per step;
                                 scene_valid: one per mosaic slot */
    uint32_t mosaic_slots;    /* later scenes read at once (of different
                                 steps), each in its slot of mosaic_bytes */
    size_t mosaic_bytes;
    uint32_t step_scenes;     /* scenes per output step (mosaic: the
                                 option, or every scene; else 1) */
    uint32_t valid_steps;     /* valid planes per sample (valid_per_step:
                                 the steps; else 1) */
    size_t warp_off, warp_bytes; /* warped inputs' source windows: this
                                    region of each reader's scratch */
    cf__ccache *cc;           /* decoded chunks of warped inputs, kept for
                                 the neighbouring patches (cache_bytes) */
    int cc_direct;            /* inputs read as they lie go through cc too
                                 (random patches; grid patches sharing
                                 tiles) */
    cf_io *io;                /* ios[0] */
    cf_io *ios[LD_MAX_IOS];   /* files are spread over these */
    int nios, own_io, remote;
    cf_cog **img;             /* nfiles * T */
    cf_cog **msk;             /* nfiles or NULL */
    cf_vlabels *vl;           /* labels from polygons (a reference), or NULL */
    cf_cog **lay;             /* nfiles * nlf or NULL */
    size_t nlf;               /* layer files per sample file (nlayers, per
                                 output step with layers_per_step) */
    cf_cog **scm;             /* scene masks, nfiles * T, or NULL */
    uint8_t *repeats;         /* nfiles * T: a mosaic's scene that repeats
                                 an earlier one of its step (not read) */
    int has_scm;
    cf_dtype scm_dt;
    double *classes;          /* invalid_classes (o.ninvalid_classes) */
    size_t scm_off;           /* scene masks' raw blocks in the readers'
                                 scratch, scm_per_group of them */
    size_t scm_bytes;         /* one of them (aligned) */
    uint32_t scm_per_group;
    cf__fp *fp;               /* skip_empty: the scenes' footprints */
    cf__fp *scene_fp;         /* a mosaic with described scenes (not
                                 opened yet): each scene's footprint, so
                                 that a later scene is opened only for a
                                 patch it meets */
    size_t ndeclared;         /* inputs opened at first read */
    cf__roi **roi;            /* the region of interest in each file's
                                 target pixels (roi_nrings), or NULL */
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
    cf__budget borrow;        /* source windows of resampled inputs that
                                 do not fit a reader's warp scratch (an
                                 eighth of inflight_bytes; 0: none) */
    int budgets;              /* fetch and kits initialised */
    uint64_t ring_bytes;      /* the ring's slots, fixed */
    int ident[CF_MAX_BANDS];  /* 0, 1, 2, ...: "all bands" for the paste */

    cf__tcache cache;         /* tile-shuffle cells (tile_cache.h) */

    /* skip_errors: outcomes of the last skip_window samples delivered or
     * dropped, in order (1: dropped), under mu. */
    uint8_t *skip_hist;
    uint32_t skip_window, skip_pos, skip_dropped;

    /* After cf_loader_close: the files and the loader's own io loops are
     * gone (their sockets and descriptors with them); io_final keeps the
     * io counters for stats. */
    int released;
    cf_io_stats io_final;

    /* stats (under mu; the cache counts its own) */
    uint64_t st_samples, st_batches, st_skipped, st_decoded, st_delivered;
    uint64_t st_chunks;       /* bytes the codecs wrote for them */
    uint64_t st_rounds;       /* their rounds of reads */
    uint64_t st_read_ok;      /* samples read (cf_loader_stats.samples_read) */
    uint64_t st_redrawn;      /* skip_empty: windows drawn again */
    double st_wait, st_read, st_convert, t_start;
};

/* loader_open.c: open every input (images, masks, layers) from many
 * threads, then place each on its sample's target grid (ld->sg), refusing
 * what cannot be placed. */
cf_status cf__ld_open_inputs(cf_loader *ld, cf_error *err);
/* The file of input i (images, then masks, then layers). */
cf_cog **cf__ld_url_slot(cf_loader *ld, size_t i);
/* The loader's level of c, errors prefixed "loader". */
cf_status cf__ld_level(const cf_loader *ld, const cf_cog *c, cf_level_info *li,
                       cf_error *err);

/* sample_read.c: raw bytes of member m for a w x h window. */
size_t cf__ld_member_bytes(const cf_loader *ld, const ld_member *m, uint64_t w,
                           uint64_t h);
/* Whether member mb is part of the output (an image scene or a layer
 * that makes channels): not a mosaic's later scene, not a scene mask. */
int cf__ld_member_output(const cf_loader *ld, const ld_member *mb);
/* Whether member mb is a later scene of a mosaic (cf_loader_options.
 * mosaic): read into the mosaic scratch to fill the first scene's pixels
 * without data, no output of its own. */
int cf__ld_member_fills(const cf_loader *ld, const ld_member *mb);
/* The index in ld->lay of layer member mb of sample file f. */
size_t cf__ld_layer_file(const cf_loader *ld, size_t f, const ld_member *mb);
/* The input (url) index of member mb of sample file f. */
size_t cf__ld_member_slot(const cf_loader *ld, size_t f, const ld_member *mb);

/* sample_read.c: read, convert and augment sample j of `epoch` into
 * position i of slot s; *decoded, *t_read and *t_conv are added to. */
cf_status cf__ld_read_sample(cf_loader *ld, ld_worker *wk, ld_slot *s, uint32_t i,
                             uint64_t epoch, uint64_t j, uint64_t *decoded, double *t_read,
                             double *t_conv, cf_error *err);

#endif
