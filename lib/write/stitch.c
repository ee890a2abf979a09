/*
 * stitch.c - cf_stitcher: predictions of overlapping patches, weighted
 * by a blending window, summed per pixel and written through a cf_writer.
 *
 * The sums live per row of output tiles, allocated when the first patch
 * over the row comes and freed when the last listed one has (the row is
 * then divided, turned into classes or float channels, and its tiles go
 * to the writer), so a scene predicted row of patches by row of patches
 * holds only the couple of tile rows its patches in flight cover.
 * Sums are double: the order patches come in (DataLoader workers, ranks)
 * moves a result by a rounding of a double, far below a float32 output's.
 */
#include "write_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define CF__STITCH_SPARES 2
/* Threads a finished row's tiles are divided and encoded on (at most one
 * per CPU): the writer encodes tiles written at once in parallel. */
#define CF__STITCH_THREADS 16

typedef struct st_row {
    double *sum;      /* channels x T x width, then wsum: one block */
    double *wsum;     /* T x width */
    uint32_t left;    /* listed patches over the row not yet come */
    int done;
} st_row;

/* A listed patch, sorted for lookup; `left` of its copies still to come
 * (a list may name a window more than once). */
typedef struct st_patch {
    int64_t r[4];
    uint32_t left;
} st_patch;

struct cf_stitcher {
    pthread_mutex_t mu;
    st_patch *list;   /* the listed patches, sorted, distinct */
    size_t nlist;
    cf_writer *w;
    cf_stitcher_options o;
    uint32_t width, height, T, tiles_x, tiles_y;
    uint32_t share0, share1;  /* the rows of tiles written: a share
                                 writer's, or all */
    st_row *rows;
    /* per thread of finish_row: one output tile, band-sequential, and its
     * mask (the writer's `mask`): some patch came with valid input there */
    int nthreads;
    float *tile[CF__STITCH_THREADS];
    uint8_t *mtile[CF__STITCH_THREADS];
    double *wx;       /* scratch: a patch's weights along x, then y */
    size_t wcap;
    /* Rows' blocks of sums kept for the next rows: a fresh block of
     * hundreds of MB costs the kernel's page zeroing and faults each
     * time (29% of a 16384-wide run); a kept one is cleared in place. */
    double *spare[CF__STITCH_SPARES];
    int nspare;
};

void cf_stitcher_options_init(cf_stitcher_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->channels = 1;
    o->blend = CF_BLEND_HANN;
}

/* The blending window at i of n (cogfeed.h). */
static double window(cf_blend b, uint32_t overlap, uint32_t i, uint32_t n) {
    switch (b) {
    case CF_BLEND_LINEAR: {
        if (!overlap) return 1.0;
        double d = (double)(i < n - 1 - i ? i : n - 1 - i) + 0.5;
        return d >= overlap ? 1.0 : d / overlap;
    }
    case CF_BLEND_HANN: {
        double s = sin(M_PI * (i + 0.5) / n);
        return s * s;
    }
    default: return 1.0;
    }
}

static int cmp_rect(const void *a, const void *b) {
    const int64_t *x = ((const st_patch *)a)->r, *y = ((const st_patch *)b)->r;
    for (int i = 0; i < 4; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

static void free_st(cf_stitcher *st) {
    if (st->rows)
        for (uint32_t r = 0; r < st->tiles_y; r++) free(st->rows[r].sum);
    for (int i = 0; i < st->nspare; i++) free(st->spare[i]);
    free(st->rows);
    free(st->list);
    for (int k = 0; k < st->nthreads; k++) {
        free(st->tile[k]);
        free(st->mtile[k]);
    }
    free(st->wx);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

cf_status cf_stitcher_open(const char *path, const cf_writer_options *wo,
                           const cf_stitcher_options *so, cf_stitcher **out, cf_error *err) {
    if (out) *out = NULL;
    if (!wo || !so || !out || so->struct_size < sizeof *so)
        return cf__err(err, CF_E_ARG, "stitcher: options not initialised");
    if (!so->channels || so->channels > 65535 || (so->argmax && so->channels > 255))
        return cf__err(err, CF_E_ARG, "stitcher: %u channels not in 1..%u", so->channels,
                       so->argmax ? 255 : 65535);
    if (so->blend != CF_BLEND_MEAN && so->blend != CF_BLEND_LINEAR && so->blend != CF_BLEND_HANN)
        return cf__err(err, CF_E_ARG, "stitcher: blend %d", (int)so->blend);
    if (!so->npatches || !so->patches) return cf__err(err, CF_E_ARG, "stitcher: no patches listed");
    cf_writer_options o;
    CF__TRY(cf__writer_options_copy(wo, &o, err)); /* the caller's may be older */
    o.bands = so->argmax ? 1 : so->channels;
    o.dtype = so->argmax ? CF_DT_U8 : CF_DT_F32;
    o.has_nodata = 1;
    o.nodata = so->argmax ? 255 : NAN;
    if (so->argmax && o.overview_resampling == CF_RS_AVERAGE) o.overview_resampling = CF_RS_MODE;
    o.descriptions = NULL;
    o.scales = o.offsets = NULL;
    cf_stitcher *st = cf__calloc(1, sizeof *st);
    if (!st) return cf__err(err, CF_E_NOMEM, "stitcher: out of memory");
    pthread_mutex_init(&st->mu, NULL);
    st->o = *so;
    st->o.patches = NULL;
    st->width = o.width;
    st->height = o.height;
    st->T = o.tile_size;
    cf_status s = CF_OK;
    for (size_t i = 0; i < so->npatches && !s; i++) {
        const int64_t *p = so->patches + 4 * i;
        /* (no sum that could overflow: p[2] <= width - p[0]) */
        if (p[2] <= 0 || p[3] <= 0 || p[0] < 0 || p[1] < 0 || p[0] > (int64_t)o.width ||
            p[1] > (int64_t)o.height || p[2] > (int64_t)o.width - p[0] ||
            p[3] > (int64_t)o.height - p[1])
            s = cf__err(err, CF_E_ARG, "stitcher: patch %zu (%lld, %lld, %lld, %lld) not inside %ux%u",
                        i, (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3],
                        o.width, o.height);
    }
    if (!s) s = cf_writer_open(path, &o, &st->w, err);
    if (s) {
        free_st(st);
        return s;
    }
    cf_writer_tiles(st->w, &st->tiles_x, &st->tiles_y);
    st->share0 = o.share_rows ? o.share_row0 : 0;
    st->share1 = o.share_rows ? o.share_row0 + o.share_rows : st->tiles_y;
    st->rows = cf__calloc(st->tiles_y, sizeof *st->rows);
    /* threads: one per CPU this process may use, at most a tile each of
     * the row, their tiles within the budget */
    st->nthreads = cf__write_threads(o.threads,
                                     (size_t)o.bands * st->T * st->T * sizeof(float) + 1,
                                     st->tiles_x < CF__STITCH_THREADS ? st->tiles_x
                                                                      : CF__STITCH_THREADS);
    int bufs = 1;
    for (int k = 0; k < st->nthreads; k++) {
        st->tile[k] = cf__malloc((size_t)o.bands * st->T * st->T * sizeof(float));
        st->mtile[k] = o.mask ? cf__malloc((size_t)st->T * st->T) : NULL;
        bufs &= st->tile[k] && (!o.mask || st->mtile[k]);
    }
    if (!st->rows || !bufs) {
        cf_writer_abort(st->w);
        free_st(st);
        return cf__err(err, CF_E_NOMEM, "stitcher: out of memory");
    }
    st->list = cf__malloc(so->npatches * sizeof *st->list);
    if (!st->list) {
        cf_writer_abort(st->w);
        free_st(st);
        return cf__err(err, CF_E_NOMEM, "stitcher: %zu patches", so->npatches);
    }
    for (size_t i = 0; i < so->npatches; i++) {
        const int64_t *p = so->patches + 4 * i;
        memcpy(st->list[i].r, p, sizeof st->list[i].r);
        st->list[i].left = 1;
        for (int64_t r = p[1] / st->T; r <= (p[1] + p[3] - 1) / st->T; r++) st->rows[r].left++;
    }
    qsort(st->list, so->npatches, sizeof *st->list, cmp_rect);
    for (size_t i = 0; i < so->npatches; i++) { /* merge repeats */
        if (st->nlist && !cmp_rect(&st->list[st->nlist - 1], &st->list[i]))
            st->list[st->nlist - 1].left++;
        else st->list[st->nlist++] = st->list[i];
    }
    /* Rows no patch reaches stay sparse: said now, so that an object's
     * rows after them go up without waiting for close. */
    for (uint32_t r = st->share0; r < st->share1 && !s; r++) {
        if (st->rows[r].left) continue;
        st->rows[r].done = 1;
        for (uint32_t tx = 0; tx < st->tiles_x && !s; tx++)
            s = cf__writer_skip_tile(st->w, tx, r, err);
    }
    if (s) {
        cf_writer_abort(st->w);
        free_st(st);
        return s;
    }
    *out = st;
    return CF_OK;
}

/* One thread's share of a finished row: tiles tx0, tx0 + step, ...
 * divided into its own buffers and written; the first failure stops it. */
typedef struct st_part {
    cf_stitcher *st;
    uint32_t r, tx0, step, failed_tx;
    int k;
    cf_status s;
    cf_error err;
} st_part;

static void *row_part(void *arg) {
    st_part *P = arg;
    cf_stitcher *st = P->st;
    const st_row *R = &st->rows[P->r];
    const uint32_t T = st->T, W = st->width, C = st->o.channels, r = P->r;
    const uint32_t th = (r + 1) * T <= st->height ? T : st->height - r * T;
    const size_t plane = (size_t)T * W;
    float *tile = st->tile[P->k];
    uint8_t *mtile = st->mtile[P->k];
    for (uint32_t tx = P->tx0; tx < st->tiles_x && !P->s; tx += P->step) {
        uint32_t tw = (tx + 1) * T <= W ? T : W - tx * T;
        uint8_t *cls = (uint8_t *)tile;
        for (uint32_t y = 0; y < th; y++)
            for (uint32_t x = 0; x < tw; x++) {
                size_t i = (size_t)y * W + tx * T + x, o = (size_t)y * tw + x;
                double ws = R->wsum[i];
                if (mtile) mtile[o] = ws > 0;
                if (st->o.argmax) {
                    uint32_t best = 0;
                    for (uint32_t c = 1; c < C; c++)
                        if (R->sum[c * plane + i] > R->sum[best * plane + i]) best = c;
                    /* (dividing by ws > 0 keeps the order: compare sums) */
                    cls[o] = ws > 0 ? (uint8_t)best : 255;
                } else {
                    for (uint32_t c = 0; c < C; c++)
                        tile[(size_t)c * th * tw + o] =
                            ws > 0 ? (float)(R->sum[c * plane + i] / ws) : NAN;
                }
            }
        size_t bytes = (size_t)(st->o.argmax ? 1 : C * sizeof(float)) * th * tw;
        P->s = mtile ? cf_writer_write_tile_masked(st->w, tx, r, tile, bytes, mtile, &P->err)
                     : cf_writer_write_tile(st->w, tx, r, tile, bytes, &P->err);
        P->failed_tx = tx;
    }
    return NULL;
}

/* Row R's block of sums kept for the next rows (or freed). */
static void release_sums(cf_stitcher *st, st_row *R) {
    if (st->nspare < CF__STITCH_SPARES) st->spare[st->nspare++] = R->sum;
    else free(R->sum);
    R->sum = R->wsum = NULL;
}

/* Divide row r's sums and write its tiles, on up to nthreads threads
 * (each a share of the tiles: the writer encodes them at once).  The
 * error is the failing tile's of the smallest column. */
static cf_status finish_row(cf_stitcher *st, uint32_t r, cf_error *err) {
    st_row *R = &st->rows[r];
    R->done = 1;
    if (!R->sum) return CF_OK; /* nothing came: its tiles stay sparse (nodata) */
    if (r < st->share0 || r >= st->share1) { /* another share's: dropped */
        release_sums(st, R);
        return CF_OK;
    }
    st_part parts[CF__STITCH_THREADS];
    const int n = st->nthreads;
    for (int k = 0; k < n; k++) {
        memset(&parts[k], 0, sizeof parts[k]);
        parts[k].st = st;
        parts[k].r = r;
        parts[k].tx0 = (uint32_t)k;
        parts[k].step = (uint32_t)n;
        parts[k].k = k;
    }
    cf__run_parts(row_part, parts, sizeof *parts, (size_t)n);
    cf_status s = CF_OK;
    int first = -1;
    /* the failure of the smallest column, a tile's own before one that
     * only found the writer failed by another (CF_E_STATE) */
    for (int k = 0; k < n; k++) {
        if (!parts[k].s) continue;
        int own = parts[k].s != CF_E_STATE, fown = first >= 0 && parts[first].s != CF_E_STATE;
        if (first < 0 || own > fown ||
            (own == fown && parts[k].failed_tx < parts[first].failed_tx))
            first = k;
    }
    if (first >= 0) {
        s = parts[first].s;
        if (err) *err = parts[first].err;
    }
    release_sums(st, R);
    return s;
}

cf_status cf_stitcher_add(cf_stitcher *st, int64_t x, int64_t y, uint32_t w, uint32_t h,
                          const float *pred, cf_error *err) {
    return cf_stitcher_add_masked(st, x, y, w, h, pred, NULL, err);
}

cf_status cf_stitcher_add_masked(cf_stitcher *st, int64_t x, int64_t y, uint32_t w, uint32_t h,
                                 const float *pred, const uint8_t *valid, cf_error *err) {
    if (!st || !pred) return cf__err(err, CF_E_ARG, "stitcher: NULL argument");
    if (!w || !h || x < 0 || y < 0 || x > (int64_t)st->width || y > (int64_t)st->height ||
        w > st->width - (uint64_t)x || h > st->height - (uint64_t)y)
        return cf__err(err, CF_E_ARG, "stitcher: patch (%lld, %lld, %u, %u) not inside %ux%u",
                       (long long)x, (long long)y, w, h, st->width, st->height);
    pthread_mutex_lock(&st->mu);
    cf_status s = CF_OK;
    const uint32_t T = st->T, W = st->width, C = st->o.channels;
    uint32_t r0 = (uint32_t)(y / T), r1 = (uint32_t)((y + h - 1) / T);
    st_patch key = {{x, y, w, h}, 0};
    st_patch *hit = bsearch(&key, st->list, st->nlist, sizeof *st->list, cmp_rect);
    if (!hit)
        s = cf__err(err, CF_E_ARG, "stitcher: patch (%lld, %lld, %u, %u) is not one of the "
                    "listed patches", (long long)x, (long long)y, w, h);
    else if (!hit->left)
        s = cf__err(err, CF_E_ARG, "stitcher: patch (%lld, %lld, %u, %u) came already",
                    (long long)x, (long long)y, w, h);
    size_t need = (size_t)w + h;
    if (!s && need > st->wcap) {
        free(st->wx);
        st->wx = cf__malloc(need * sizeof(double));
        st->wcap = st->wx ? need : 0;
        if (!st->wx) s = cf__err(err, CF_E_NOMEM, "stitcher: out of memory");
    }
    if (s) goto done;
    double *wx = st->wx, *wy = st->wx + w;
    for (uint32_t i = 0; i < w; i++) wx[i] = window(st->o.blend, st->o.overlap, i, w);
    for (uint32_t i = 0; i < h; i++) wy[i] = window(st->o.blend, st->o.overlap, i, h);
    size_t plane = (size_t)T * W;
    /* Every row's sums first: a failure then leaves the patch not come
     * (it can be sent again) and nothing half added. */
    for (uint32_t r = r0; r <= r1 && !s; r++) {
        st_row *R = &st->rows[r];
        if (!R->sum && st->nspare) {
            R->sum = st->spare[--st->nspare];
            memset(R->sum, 0, (size_t)(C + 1) * plane * sizeof(double));
        } else if (!R->sum) {
            R->sum = cf__calloc((size_t)(C + 1) * plane, sizeof(double));
        }
        R->wsum = R->sum ? R->sum + (size_t)C * plane : NULL;
        if (!R->sum)
            s = cf__err(err, CF_E_NOMEM, "stitcher: a row of tiles (%zu bytes)",
                        (size_t)(C + 1) * plane * sizeof(double));
    }
    if (s) goto done;
    hit->left--;
    for (uint32_t r = r0; r <= r1; r++) {
        st_row *R = &st->rows[r];
        int64_t ya = (int64_t)r * T > y ? (int64_t)r * T : y;
        int64_t yb = (int64_t)(r + 1) * T < y + h ? (int64_t)(r + 1) * T : y + h;
        for (int64_t yy = ya; yy < yb; yy++) {
            size_t py = (size_t)(yy - y), ry = (size_t)(yy - (int64_t)r * T);
            for (uint32_t xx = 0; xx < w; xx++) {
                if (valid && !valid[py * w + xx]) continue; /* its input had no data */
                double wt = wx[xx] * wy[py];
                size_t i = ry * W + (size_t)x + xx;
                R->wsum[i] += wt;
                for (uint32_t c = 0; c < C; c++)
                    R->sum[c * plane + i] += wt * pred[((size_t)c * h + py) * w + xx];
            }
        }
    }
    for (uint32_t r = r0; r <= r1 && !s; r++)
        if (--st->rows[r].left == 0) s = finish_row(st, r, err);
done:
    pthread_mutex_unlock(&st->mu);
    return s;
}

cf_status cf_stitcher_close(cf_stitcher *st, cf_error *err) {
    if (!st) return cf__err(err, CF_E_ARG, "stitcher: NULL");
    cf_status s = CF_OK;
    for (uint32_t r = 0; r < st->tiles_y && !s; r++)
        if (!st->rows[r].done) s = finish_row(st, r, err);
    if (s) {
        cf_writer_abort(st->w);
    } else {
        s = cf_writer_close(st->w, err);
    }
    free_st(st);
    return s;
}

cf_writer *cf_stitcher_writer(cf_stitcher *st) { return st ? st->w : NULL; }

void cf_stitcher_abort(cf_stitcher *st) {
    if (!st) return;
    cf_writer_abort(st->w);
    free_st(st);
}
