/*
 * sampler.c - index-addressable samplers.  Every window is computed from a
 * hash of (seed, epoch, global index), never from a running RNG state, so
 * sample j of an epoch can be produced by any thread, in any order, after
 * any resume, and ranks partition the global index space exactly.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

/* splitmix64 finaliser: a cheap, well-mixed 64-bit hash. */
static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

/* Uniform integer in [0, n) (n >= 1) from 64 random bits. */
static uint64_t below(uint64_t h, uint64_t n) {
    return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

static double unit(uint64_t h) { return (double)(h >> 11) * 0x1.0p-53; }

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* Grid windows along one axis of length n. */
static uint64_t grid_n(uint32_t n, uint32_t patch, uint32_t stride) {
    if (n <= patch) return 1;
    return ceil_div(n - patch, stride) + 1;
}

static uint32_t cell_len(uint32_t tile, uint32_t patch) {
    uint64_t c = (uint64_t)tile * ceil_div(patch, tile);
    return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

/* Grid window number g of all files' windows (row by row per file). */
static void grid_window(const cf__sampler *s, uint64_t g, cf_window *out) {
    const uint32_t P = s->c.patch;
    size_t lo = 0, hi = s->c.nfiles - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->grid_cum[mid] > g) hi = mid;
        else lo = mid + 1;
    }
    const cf__samp_file *fi = &s->files[lo];
    uint64_t local = g - (lo ? s->grid_cum[lo - 1] : 0);
    uint64_t nx = grid_n(fi->width, P, s->c.stride);
    uint64_t ix = local % nx, iy = local / nx;
    out->file = (uint32_t)lo;
    out->w = out->h = P;
    /* The last window of a row/column is moved back to end at the
     * edge, so that every pixel is covered without padding. */
    out->x = fi->width > P
                 ? (int64_t)(ix * s->c.stride < fi->width - P ? ix * s->c.stride
                                                              : fi->width - P)
                 : 0;
    out->y = fi->height > P
                 ? (int64_t)(iy * s->c.stride < fi->height - P ? iy * s->c.stride
                                                               : fi->height - P)
                 : 0;
}

/* skip_empty with the grid sampler: which of the n windows covers keeps,
 * as a bitmap with the count of kept windows before each word (a window
 * costs 2 bits: a billion windows, 256 MiB, is the limit); *kept_n. */
static cf_status keep_windows(cf__sampler *s, uint64_t n, uint64_t *kept_n, cf_error *err) {
    if (n > ((uint64_t)1 << 30))
        return cf__err(err, CF_E_LIMIT, "loader: skip_empty / roi over %llu grid windows (at "
                       "most 2^30): use a larger stride or fewer files", (unsigned long long)n);
    uint64_t words = (n + 63) / 64;
    s->kept = cf__calloc((size_t)words, sizeof *s->kept);
    s->kept_before = cf__calloc((size_t)words, sizeof *s->kept_before);
    if (!s->kept || !s->kept_before)
        return cf__err(err, CF_E_NOMEM, "loader: skip_empty: %llu windows",
                       (unsigned long long)n);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (i % 64 == 0) s->kept_before[i / 64] = k;
        cf_window w;
        grid_window(s, i, &w);
        if (s->c.covers(s->c.covers_user, w.file, w.x, w.y, w.w, w.h)) {
            s->kept[i / 64] |= (uint64_t)1 << (i % 64);
            k++;
        }
    }
    s->left_out = n - k;
    if (!k)
        return cf__err(err, CF_E_ARG, "loader: no grid window is left (skip_empty: the "
                                      "scenes' footprints miss the target grid; roi: the "
                                      "region misses it)");
    *kept_n = k;
    return CF_OK;
}

/* The window number of the g-th kept window. */
static uint64_t kept_window(const cf__sampler *s, uint64_t g) {
    uint64_t words = (s->grid_cum[s->c.nfiles - 1] + 63) / 64;
    uint64_t lo = 0, hi = words - 1;
    while (lo < hi) { /* the last word with kept_before <= g */
        uint64_t mid = (lo + hi + 1) / 2;
        if (s->kept_before[mid] <= g) lo = mid;
        else hi = mid - 1;
    }
    uint64_t bits = s->kept[lo], r = g - s->kept_before[lo];
    for (uint64_t b = 0; b < 64; b++)
        if (bits >> b & 1 && r-- == 0) return lo * 64 + b;
    return lo * 64; /* not reached: g < the kept count */
}

cf_status cf__sampler_init(cf__sampler *s, const cf__sampler_config *cfg,
                           cf_error *err) {
    memset(s, 0, sizeof *s);
    if (!cfg->nfiles || !cfg->files)
        return cf__err(err, CF_E_ARG, "loader: no input files");
    if (cfg->patch == 0 || cfg->patch > CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "loader: patch_size %u out of range",
                       cfg->patch);
    if (cfg->world_size < 1 || cfg->rank < 0 || cfg->rank >= cfg->world_size)
        return cf__err(err, CF_E_ARG,
                       "loader: rank %d not in [0, world_size %d)", cfg->rank,
                       cfg->world_size);
    if ((unsigned)cfg->kind > CF_SAMPLER_GRID)
        return cf__err(err, CF_E_ARG, "loader: unknown sampler %d",
                       (int)cfg->kind);
    s->c = *cfg;
    if (s->c.stride == 0) s->c.stride = s->c.patch;
    if (s->c.group_tiles == 0) s->c.group_tiles = 1;
    s->files = cf__calloc(cfg->nfiles, sizeof *s->files);
    s->cum = cf__calloc(cfg->nfiles, sizeof *s->cum);
    s->grid_cum = cf__calloc(cfg->nfiles, sizeof *s->grid_cum);
    if (!s->files || !s->cum || !s->grid_cum) {
        cf__sampler_free(s);
        return cf__err(err, CF_E_NOMEM, "loader: sampler tables");
    }
    memcpy(s->files, cfg->files, cfg->nfiles * sizeof *s->files);
    s->c.files = s->files;
    double tot = 0;
    uint64_t grid_tot = 0, natural = 0;
    uint32_t min_tw = UINT32_MAX, min_th = UINT32_MAX;
    const uint32_t P = s->c.patch;
    for (size_t f = 0; f < cfg->nfiles; f++) {
        cf__samp_file *fi = &s->files[f];
        if (!fi->width || !fi->height || !fi->tile_w || !fi->tile_h) {
            cf__sampler_free(s);
            return cf__err(err, CF_E_ARG, "loader: file %zu has no pixels", f);
        }
        const double area = fi->has_box ? fi->area : (double)fi->width * (double)fi->height;
        double w = fi->weight > 0 ? fi->weight : fi->weight < 0 ? 0 : area;
        if (!(w < 1e300)) w = 1e300; /* NaN or huge weights stay finite */
        tot += w;
        s->cum[f] = tot;
        grid_tot += grid_n(fi->width, P, s->c.stride) *
                    grid_n(fi->height, P, s->c.stride);
        s->grid_cum[f] = grid_tot;
        if (fi->has_box) { /* patches the region's area holds */
            double n = ceil(area / ((double)P * P));
            natural += n < 1 ? 1 : (uint64_t)n;
        } else if (fi->weight >= 0) {
            natural += ceil_div(fi->width, P) * ceil_div(fi->height, P);
        }
        uint32_t cw = cell_len(fi->tile_w, P), ch = cell_len(fi->tile_h, P);
        if (cw < min_tw) min_tw = cw;
        if (ch < min_th) min_th = ch;
    }
    if (s->c.covers && s->c.kind == CF_SAMPLER_TILE_SHUFFLE) {
        cf__sampler_free(s);
        return cf__err(err, CF_E_ARG, "loader: skip_empty and roi work with the random, "
                                      "blocked and grid samplers, not tile-shuffle");
    }
    if (s->c.covers && s->c.kind == CF_SAMPLER_GRID) {
        cf_status st = keep_windows(s, grid_tot, &grid_tot, err);
        if (st != CF_OK) {
            cf__sampler_free(s);
            return st;
        }
    }
    if (!(tot > 0)) {
        cf__sampler_free(s);
        return cf__err(err, CF_E_ARG, "loader: no file to draw patches from (the region of "
                                      "interest meets none)");
    }
    if (s->c.kind == CF_SAMPLER_GRID)
        s->length = s->c.length && s->c.length < grid_tot ? s->c.length
                                                          : grid_tot;
    else
        s->length = s->c.length ? s->c.length : natural;
    s->chunk = 1;
    if (s->c.kind == CF_SAMPLER_TILE_SHUFFLE) {
        /* Several crops per decoded tile make the tile read pay off; cap
         * it so one group still spans many tiles. */
        uint64_t m = (uint64_t)(min_tw / P) * (min_th / P);
        s->crops_per_tile = (uint32_t)(m < 1 ? 1 : m > 16 ? 16 : m);
        s->chunk = (uint64_t)s->c.group_tiles * s->crops_per_tile;
    }
    s->count = cf__sampler_shard_count(s, (uint64_t)s->c.rank, (uint64_t)s->c.world_size);
    return CF_OK;
}

uint64_t cf__sampler_shard_count(const cf__sampler *s, uint64_t r, uint64_t ws) {
    /* Rank r's chunks: r, r + ws, ... of ceil(length / chunk). */
    uint64_t c = s->chunk, L = s->length, n;
    if (ws < 1 || r >= ws) return 0;
    if (s->c.drop_last) return (L / c / ws) * c;
    uint64_t nch = ceil_div(L, c);
    uint64_t nr = nch > r ? (nch - 1 - r) / ws + 1 : 0;
    n = nr * c;
    if (nr && (nch - 1) % ws == r && L % c) n -= c - L % c;
    return n;
}

void cf__sampler_free(cf__sampler *s) {
    free(s->files);
    free(s->cum);
    free(s->grid_cum);
    free(s->kept);
    free(s->kept_before);
    s->files = NULL;
    s->cum = NULL;
    s->grid_cum = NULL;
    s->kept = s->kept_before = NULL;
}

void cf__sampler_set_epoch(cf__sampler *s, uint64_t epoch) {
    s->c.epoch = epoch;
}

uint64_t cf__sampler_global(const cf__sampler *s, uint64_t j) {
    uint64_t c = s->chunk;
    return ((j / c) * (uint64_t)s->c.world_size + (uint64_t)s->c.rank) * c +
           j % c;
}

static uint32_t pick_file(const cf__sampler *s, uint64_t h) {
    double u = unit(h) * s->cum[s->c.nfiles - 1];
    size_t lo = 0, hi = s->c.nfiles - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->cum[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return (uint32_t)lo;
}

/* A tile-aligned cell able to hold a patch, and the patch's offset in it,
 * along one axis: the paper's block sampling. */
static int64_t blocked_axis(uint32_t n, uint32_t tile, uint32_t P,
                            uint64_t h_cell, uint64_t h_off) {
    if (n <= P) return 0;
    uint64_t ncell = (uint64_t)(n - P) / tile + 1;
    uint64_t t = below(h_cell, ncell);
    uint64_t start = t * tile;
    uint64_t ext = n - start;
    uint32_t cl = cell_len(tile, P);
    if (ext > cl) ext = cl;
    return (int64_t)(start + below(h_off, ext - P + 1));
}

static uint32_t draw_aug(const cf__sampler *s, uint64_t ep, uint64_t g) {
    unsigned a = s->c.augment & (CF_AUG_FLIP | CF_AUG_ROT90);
    if (!a) return 0;
    uint64_t h = hash4(s->c.seed, ep, g, 0xa0a0);
    if (a == CF_AUG_ROT90) return (uint32_t)(h & 3);
    if (a == CF_AUG_FLIP) {
        /* identity, horizontal, vertical (= rot180 + h), both (= rot180) */
        static const uint32_t flips[4] = {0, 4, 2 | 4, 2};
        return flips[h & 3];
    }
    return (uint32_t)(h & 7);
}

void cf__sampler_window(const cf__sampler *s, uint64_t j, cf_window *out) {
    cf__sampler_window_at(s, s->c.epoch, j, out);
}

static void draw(const cf__sampler *s, uint64_t ep, uint64_t g, uint64_t seed,
                 cf_window *out);

uint32_t cf__sampler_window_at(const cf__sampler *s, uint64_t ep, uint64_t j,
                               cf_window *out) {
    uint64_t g = cf__sampler_global(s, j);
    uint32_t again = 0;
    /* Redraws hash the draw number into the seed: still a pure function
     * of (seed, epoch, index). */
    for (;;) {
        draw(s, ep, g, again ? s->c.seed ^ mix64(again) : s->c.seed, out);
        if (!s->c.covers || s->c.kind == CF_SAMPLER_GRID ||
            s->c.covers(s->c.covers_user, out->file, out->x, out->y, out->w, out->h))
            break;
        if (again == CF__SAMPLER_REDRAWS) {
            if (s->c.fallback)
                s->c.fallback(s->c.covers_user, out->file, hash4(s->c.seed, ep, g, 0xfa11),
                              &out->x, &out->y);
            break;
        }
        again++;
    }
    out->aug = draw_aug(s, ep, g);
    return again;
}

/* Window of global index g with `seed`. */
static void draw(const cf__sampler *s, uint64_t ep, uint64_t g, uint64_t seed,
                 cf_window *out) {
    const uint32_t P = s->c.patch;
    memset(out, 0, sizeof *out);
    out->index = g;
    out->w = out->h = P;
    switch (s->c.kind) {
    case CF_SAMPLER_RANDOM: {
        uint32_t f = pick_file(s, hash4(seed, ep, g, 1));
        const cf__samp_file *fi = &s->files[f];
        out->file = f;
        if (fi->has_box) { /* a box of origins */
            out->x = fi->x0 + (int64_t)below(hash4(seed, ep, g, 2), fi->x1 - fi->x0 + 1ull);
            out->y = fi->y0 + (int64_t)below(hash4(seed, ep, g, 3), fi->y1 - fi->y0 + 1ull);
            break;
        }
        out->x = fi->width > P
                     ? (int64_t)below(hash4(seed, ep, g, 2), fi->width - P + 1)
                     : 0;
        out->y = fi->height > P
                     ? (int64_t)below(hash4(seed, ep, g, 3), fi->height - P + 1)
                     : 0;
        break;
    }
    case CF_SAMPLER_BLOCKED: {
        uint32_t f = pick_file(s, hash4(seed, ep, g, 1));
        const cf__samp_file *fi = &s->files[f];
        out->file = f;
        out->x = blocked_axis(fi->width, fi->tile_w, P, hash4(seed, ep, g, 2),
                              hash4(seed, ep, g, 4));
        out->y = blocked_axis(fi->height, fi->tile_h, P,
                              hash4(seed, ep, g, 3), hash4(seed, ep, g, 5));
        break;
    }
    case CF_SAMPLER_TILE_SHUFFLE: {
        /* Group q holds group_tiles cells, each cropped crops_per_tile
         * times; consecutive samples come from different cells (p % K). */
        uint64_t q = g / s->chunk, p = g % s->chunk;
        uint64_t k = p % s->c.group_tiles;
        uint32_t f = pick_file(s, hash4(seed, ep, q, 0x100 + k * 8));
        const cf__samp_file *fi = &s->files[f];
        out->file = f;
        out->x = blocked_axis(fi->width, fi->tile_w, P,
                              hash4(seed, ep, q, 0x101 + k * 8),
                              hash4(seed, ep, g, 4));
        out->y = blocked_axis(fi->height, fi->tile_h, P,
                              hash4(seed, ep, q, 0x102 + k * 8),
                              hash4(seed, ep, g, 5));
        break;
    }
    case CF_SAMPLER_GRID:
        grid_window(s, s->kept ? kept_window(s, g) : g, out);
        break;
    }
}

void cf__sampler_cell(const cf__sampler *s, const cf_window *win, int64_t *cx,
                      int64_t *cy, uint32_t *cw, uint32_t *ch) {
    const cf__samp_file *fi = &s->files[win->file];
    const uint32_t P = s->c.patch;
    uint32_t lw = cell_len(fi->tile_w, P), lh = cell_len(fi->tile_h, P);
    *cx = win->x / fi->tile_w * fi->tile_w;
    *cy = win->y / fi->tile_h * fi->tile_h;
    uint64_t ew = fi->width > *cx ? fi->width - (uint64_t)*cx : 0;
    uint64_t eh = fi->height > *cy ? fi->height - (uint64_t)*cy : 0;
    if (ew < P) ew = P;
    if (eh < P) eh = P;
    *cw = ew < lw ? (uint32_t)ew : lw;
    *ch = eh < lh ? (uint32_t)eh : lh;
}
