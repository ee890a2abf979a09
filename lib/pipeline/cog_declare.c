/*
 * cog_declare.c - a cog known from a description before its header is
 * read (cog_internal.h, "Declared cogs"): the loader places thousands of
 * STAC assets from their projection and raster fields without a request,
 * and reads a file's header only when a sample first reads the file.
 *
 * The header, when it comes, must say what the description said: the
 * loader has already placed the file on its target grid (a whole-pixel
 * shift, or a reprojection built from the described CRS) and sized its
 * channels from the described dtype and bands, so a file that disagrees
 * would be read wrong without a word.  It fails instead, naming the file
 * and the difference.
 */
#include "cog_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

cf_status cf__cog_declare(cf_io *io, const char *url, const cf_input_desc *d, cf_cog **out,
                          cf_error *err) {
    *out = NULL;
    if (!io || !url || !d)
        return cf__err(err, CF_E_ARG, "cf__cog_declare: NULL argument");
    const cf_grid *g = &d->grid;
    cf_cog *cog;
    CF__TRY(cf__cog_alloc(url, &cog, err));
    /* A description the loader could not place a file by is refused
     * here, as the file's own header would be when opened. */
    if (!cf__grid_valid(g) || !d->count || d->count > CF_MAX_BANDS ||
        cf_dtype_size(d->dtype) == 0) {
        cf_status st = cf__err(err, CF_E_ARG,
                               "%s: its description is not a grid of pixels: %ux%u, %u "
                               "bands of %s (a grid needs a finite, invertible geotransform)",
                               cog->name, g->width, g->height, d->count,
                               cf_dtype_name(d->dtype));
        cf_cog_close(cog);
        return st;
    }
    cf__cog_decl *dc = cf__calloc(1, sizeof *dc);
    char *u = cf__strdup(url);
    if (!dc || !u) { /* (named as the cog is: its query string may sign it) */
        cf_status st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
        free(dc);
        free(u);
        cf_cog_close(cog);
        return st;
    }
    pthread_mutex_init(&dc->mu, NULL);
    dc->url = u;
    dc->grid = *g;
    dc->count = d->count;
    cog->io = io;
    cf__io_state *state = cf__io_state_of(io);
    if (state) cog->pool = &state->pool;
    cog->dtype = d->dtype;
    cog->crs = cf_crs_ref(g->crs);
    dc->grid.crs = cog->crs;
    cog->decl = dc;
    atomic_store(&cog->state, CF__COG_DECLARED);
    *out = cog;
    return CF_OK;
}

/* The same grid as placement tells grids apart (sample_grid.c's
 * translation(): pixel sizes to 1e-9 of themselves, rotation terms to
 * 1e-12 of the pixel, the origin to a millionth of a pixel), so that a
 * file is placed from its description exactly as from its header.  A
 * description copied from the header (as STAC's projection fields are)
 * agrees to the last digit. */
static int same_transform(const double *a, const double *b) {
    const double px = fmax(fabs(b[1]), fabs(b[5]));
    const double tol[6] = {1e-6 * fabs(b[1]), 1e-9 * fmax(fabs(a[1]), fabs(b[1])),
                           1e-12 * fabs(b[1]), 1e-6 * fabs(b[5]),
                           1e-12 * fabs(b[5]), 1e-9 * fmax(fabs(a[5]), fabs(b[5]))};
    for (int k = 0; k < 6; k++)
        if (!(fabs(a[k] - b[k]) <= (tol[k] > 0 ? tol[k] : 1e-12 * px))) return 0;
    return 1;
}

/* Whether the header h agrees with cog's description; CF_E_FORMAT naming
 * the first difference otherwise. */
static cf_status agree(const cf_cog *cog, const cf_cog *h, cf_error *err) {
    const cf__cog_decl *d = cog->decl;
    const cf__tiff *t = h->tiff;
    const cf__tiff_ifd *l0 = &t->ifds[t->levels[0]];
    char what[512];
    what[0] = 0;
    if (l0->width != d->grid.width || l0->height != d->grid.height)
        snprintf(what, sizeof what, "it is %ux%u pixels, described as %ux%u", l0->width,
                 l0->height, d->grid.width, d->grid.height);
    else if (!t->has_geotransform)
        snprintf(what, sizeof what, "it has no geotransform");
    else if (!same_transform(t->geotransform, d->grid.transform))
        snprintf(what, sizeof what,
                 "its geotransform is (%.10g, %.10g, %.10g, %.10g, %.10g, %.10g), described "
                 "as (%.10g, %.10g, %.10g, %.10g, %.10g, %.10g)",
                 t->geotransform[0], t->geotransform[1], t->geotransform[2],
                 t->geotransform[3], t->geotransform[4], t->geotransform[5],
                 d->grid.transform[0], d->grid.transform[1], d->grid.transform[2],
                 d->grid.transform[3], d->grid.transform[4], d->grid.transform[5]);
    else if (!cf_crs_equivalent(h->crs, cog->crs))
        snprintf(what, sizeof what, "its CRS is %s, described as %s",
                 h->crs ? cf_crs_name(h->crs) : "none", cog->crs ? cf_crs_name(cog->crs) : "none");
    else if (h->dtype != cog->dtype || cf__cog_bands(h) != d->count)
        snprintf(what, sizeof what, "it reads as %u bands of %s, described as %u of %s",
                 cf__cog_bands(h), cf_dtype_name(h->dtype), d->count,
                 cf_dtype_name(cog->dtype));
    if (!what[0]) return CF_OK;
    cf__err(err, CF_E_FORMAT, "%s: its header disagrees with its description (the catalog's): %s",
            h->name, what);
    return cf__err_hint(err, CF_E_FORMAT, "correct the catalog, or give the paths alone "
                                          "(their headers are then read)");
}

/* cog takes h's header and source; h is left a shell for cf_cog_close.
 * What a declared cog answers without its lock (its dtype, checked equal;
 * its CRS, equivalent, from which the loader's placement was built; its
 * name, which other readers may be putting in a message; its pool, the
 * same io's) is left as it is. */
static void adopt(cf_cog *cog, cf_cog *h) {
    cog->src = h->src;
    h->src = NULL;
    cog->tiff = h->tiff;
    h->tiff = NULL;
    cog->color = h->color;
    h->color = NULL;
    cog->etag = h->etag;
    h->etag = NULL;
    cog->header_bytes = h->header_bytes;
    cog->header_requests = h->header_requests;
    cog->from_cache = h->from_cache;
    cog->raw_color = h->raw_color;
}

/* A failure the file itself makes (its bytes, or its description, are
 * wrong): kept.  Any other (I/O, HTTP, a timeout, memory; a 404 or 403,
 * which a re-signed or re-uploaded file may not meet again) is tried again
 * once the backoff has passed, by one reader (the others, and the same
 * sample again, get the failure meanwhile): half a second, doubling with
 * each failure in a row, at most a minute. */
static int kept(cf_status st) {
    return st == CF_E_FORMAT || st == CF_E_UNSUPPORTED || st == CF_E_CODEC ||
           st == CF_E_LIMIT || st == CF_E_ARG;
}
#define RETRY_FIRST_S 0.5
#define RETRY_MAX_S 60.0

/* Whether a declared cog (lock held) is to be read now: not while a
 * failure's backoff runs. */
static int due(const cf__cog_decl *d) { return !d->fails || cf__now() >= d->retry_at; }

/* The outcome of cog's header read (st, and h, the file opened, or
 * NULL), with cog's lock held: h's header taken when it agrees; a failure
 * kept for good (kept()), or until its backoff has passed. */
static void settle(cf_cog *cog, cf_status st, cf_cog *h) {
    cf__cog_decl *d = cog->decl;
    if (st == CF_OK) st = agree(cog, h, &d->err);
    if (st == CF_OK) adopt(cog, h);
    cf_cog_close(h);
    d->st = st;
    if (st == CF_OK) {
        atomic_store_explicit(&cog->state, CF__COG_OPEN, memory_order_release);
    } else if (kept(st)) {
        atomic_store_explicit(&cog->state, CF__COG_FAILED, memory_order_relaxed);
    } else {
        double wait = RETRY_FIRST_S * ldexp(1.0, d->fails < 8 ? (int)d->fails : 8);
        d->fails++;
        d->retry_at = cf__now() + (wait < RETRY_MAX_S ? wait : RETRY_MAX_S);
    }
}

cf_status cf__cog_load(cf_cog *cog, cf_error *err) {
    if (!cf__cog_declared(cog)) return CF_OK;
    cf__cog_decl *d = cog->decl;
    pthread_mutex_lock(&d->mu);
    cf_status st = CF_OK;
    switch (atomic_load_explicit(&cog->state, memory_order_relaxed)) {
    case CF__COG_DECLARED: {
        if (!due(d)) { /* the last failure's backoff runs */
            st = d->st;
            break;
        }
        cf_cog *h = NULL;
        cf__err_clear(&d->err);
        settle(cog, cf_cog_open(cog->io, d->url, &h, &d->err), h);
        st = d->st;
        break;
    }
    case CF__COG_FAILED: st = d->st; break;
    default: break; /* opened by another thread meanwhile */
    }
    if (st != CF_OK && err) *err = d->err;
    pthread_mutex_unlock(&d->mu);
    return st;
}

/* Headers read together per call: a sample's scenes. */
#define LOAD_MANY_MAX 64

/* The cogs of one io loop read together, and their outcomes settled
 * (their locks held by the caller). */
typedef struct open_group {
    cf_io *io;
    size_t n;
    cf_open_req *req;
    cf_cog **cog;
} open_group;

static void *open_group_run(void *arg) {
    open_group *g = arg;
    cf_cog_open_many(g->io, g->req, g->n, NULL, NULL);
    for (size_t j = 0; j < g->n; j++) settle(g->cog[j], g->req[j].status, g->req[j].cog);
    return NULL;
}

void cf__cog_load_many(cf_cog *const *cogs, size_t n) {
    cf_cog *mine[LOAD_MANY_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n && k < LOAD_MANY_MAX; i++) {
        cf_cog *c = cogs[i];
        if (!c || atomic_load_explicit(&c->state, memory_order_acquire) != CF__COG_DECLARED)
            continue;
        /* Being read by another thread (or listed twice): left to
         * cf__cog_load, which waits for it. */
        if (pthread_mutex_trylock(&c->decl->mu)) continue;
        if (atomic_load_explicit(&c->state, memory_order_relaxed) == CF__COG_DECLARED &&
            due(c->decl))
            mine[k++] = c;
        else
            pthread_mutex_unlock(&c->decl->mu);
    }
    /* One cf_cog_open_many per io loop, each on a thread of its own (the
     * calling thread takes the first), so that every request goes out
     * at once. */
    cf_open_req req[LOAD_MANY_MAX];
    cf_cog *by_io[LOAD_MANY_MAX];
    open_group g[LOAD_MANY_MAX];
    size_t ng = 0, m = 0;
    uint8_t taken[LOAD_MANY_MAX] = {0};
    for (size_t a = 0; a < k; a++) { /* mine, grouped by io */
        if (taken[a]) continue;
        g[ng] = (open_group){.io = mine[a]->io, .req = req + m, .cog = by_io + m};
        for (size_t b = a; b < k; b++) {
            if (taken[b] || mine[b]->io != mine[a]->io) continue;
            taken[b] = 1;
            cf__err_clear(&mine[b]->decl->err);
            req[m] = (cf_open_req){.url = mine[b]->decl->url, .err = &mine[b]->decl->err};
            by_io[m++] = mine[b];
            g[ng].n++;
        }
        ng++;
    }
    cf__run_parts(open_group_run, g, sizeof *g, ng);
    for (size_t a = 0; a < k; a++) pthread_mutex_unlock(&mine[a]->decl->mu);
}
