/*
 * sampler.h - the loader's samplers: pure functions from (seed, epoch,
 * rank, world_size, sample index) to a window.  Nothing here reads a file,
 * so resuming (seek to sample j) and sharding (rank r takes its own chunks
 * of the global index space) are exact by construction.
 */
#ifndef CF_PIPELINE_SAMPLER_H
#define CF_PIPELINE_SAMPLER_H

#include "../common/common.h"

/* What a sampler needs to know about one sample file (level-0 or the
 * chosen overview level). */
typedef struct cf__samp_file {
    uint32_t width, height;
    uint32_t tile_w, tile_h;
    double weight;             /* 0: by area; < 0: never drawn (random,
                                  blocked: a region of interest misses it) */
    /* A region of interest's part of the file: random draws window
     * origins in [x0, x1] x [y0, y1], and the file's weight by area and
     * its share of the epoch count the region's area (area, in pixels). */
    int has_box;
    uint32_t x0, y0, x1, y1;
    double area;
} cf__samp_file;

typedef struct cf__sampler_config {
    cf_sampler_kind kind;
    const cf__samp_file *files;
    size_t nfiles;
    uint32_t patch, stride;
    uint64_t seed, epoch;
    int rank, world_size;
    uint64_t length;           /* 0: default */
    int drop_last;
    unsigned augment;
    uint32_t group_tiles;      /* tile-shuffle: tiles mixed per group (>=1) */
    /* skip_empty: whether a window may hold data (NULL: every window):
     * grid leaves out the windows it says no to, random and blocked draw
     * again (up to CF__SAMPLER_REDRAWS times).  A pure function. */
    int (*covers)(const void *user, size_t file, int64_t x, int64_t y, uint32_t w,
                  uint32_t h);
    const void *covers_user;
    /* When the redraws run out: a window of the file that covers surely
     * keeps, from 64 random bits h (NULL: the last draw stays).  Pure. */
    void (*fallback)(const void *user, size_t file, uint64_t h, int64_t *x, int64_t *y);
} cf__sampler_config;

#define CF__SAMPLER_REDRAWS 32

typedef struct cf__sampler {
    cf__sampler_config c;
    cf__samp_file *files;      /* owned copy */
    double *cum;               /* cumulative weights, nfiles */
    uint64_t *grid_cum;        /* cumulative grid windows, nfiles */
    uint64_t length;           /* global samples per epoch */
    uint64_t chunk;            /* sharding unit: consecutive global indices
                                  that go to one rank */
    uint32_t crops_per_tile;   /* tile-shuffle */
    uint64_t count;            /* samples of this rank */
    /* Grid with covers: bit k of `kept` says whether window k (of all
     * files, in order) is kept; kept_before[i] counts the kept windows of
     * words before word i; `left_out` those not kept. */
    uint64_t *kept, *kept_before;
    uint64_t left_out;
} cf__sampler;

cf_status cf__sampler_init(cf__sampler *s, const cf__sampler_config *cfg,
                           cf_error *err);
void cf__sampler_free(cf__sampler *s);
/* Samples that shard (rank, world_size) of this sampler's epoch gets, by
 * the rule the sampler itself shards with (any rank and world size, not
 * only its own): what a caller needs to know the length of other shards,
 * e.g. of each DataLoader worker's. */
uint64_t cf__sampler_shard_count(const cf__sampler *s, uint64_t rank, uint64_t world_size);
/* Change the epoch (everything else stays). */
void cf__sampler_set_epoch(cf__sampler *s, uint64_t epoch);
/* Global index of this rank's sample j (j < s->count). */
uint64_t cf__sampler_global(const cf__sampler *s, uint64_t j);
/* Window of this rank's sample j. */
void cf__sampler_window(const cf__sampler *s, uint64_t j, cf_window *out);
/* The same in epoch `epoch` (whatever the sampler's own epoch): readers
 * read ahead into the next epoch with it.  Returns how many times a
 * window was drawn again because covers said no (random, blocked). */
uint32_t cf__sampler_window_at(const cf__sampler *s, uint64_t epoch, uint64_t j,
                               cf_window *out);
/* Tile-shuffle only: the tile-aligned cell (file, x, y, w, h) a window was
 * cropped from, for the tile cache.  Same cell for every crop of it. */
void cf__sampler_cell(const cf__sampler *s, const cf_window *win, int64_t *cx,
                      int64_t *cy, uint32_t *cw, uint32_t *ch);

#endif
