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
    double det = g->transform[1] * g->transform[5] - g->transform[2] * g->transform[4];
    int finite = 1;
    for (int k = 0; k < 6; k++) finite &= isfinite(g->transform[k]) != 0;
    cf_cog *cog;
    CF__TRY(cf__cog_alloc(url, &cog, err));
    /* A description the loader could not place a file by is refused
     * here, as the file's own header would be when opened. */
    if (!g->width || !g->height || g->width > CF_MAX_DIMENSION ||
        g->height > CF_MAX_DIMENSION || !finite || !(det != 0) || !d->count ||
        d->count > CF_MAX_BANDS || cf_dtype_size(d->dtype) == 0) {
        cf_status st = cf__err(err, CF_E_ARG,
                               "%s: its description is not a grid of pixels: %ux%u, %u "
                               "bands of %s, geotransform %s",
                               cog->name, g->width, g->height, d->count,
                               cf_dtype_name(d->dtype), finite && det != 0 ? "ok" : "invalid");
        cf_cog_close(cog);
        return st;
    }
    cf__cog_decl *dc = cf__calloc(1, sizeof *dc);
    char *u = cf__strdup(url);
    if (!dc || !u) {
        free(dc);
        free(u);
        cf_cog_close(cog);
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", url);
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

/* Within a thousandth of a pixel: a description copied from the header
 * (as STAC's projection fields are) agrees to the last digit. */
static int same_transform(const double *a, const double *b) {
    const double px = fmax(fmax(fabs(b[1]), fabs(b[2])), fmax(fabs(b[4]), fabs(b[5])));
    for (int k = 0; k < 6; k++) {
        const double tol = (k == 0 || k == 3) ? 1e-3 * px : 1e-9 * fmax(fabs(a[k]), fabs(b[k]));
        if (!(fabs(a[k] - b[k]) <= tol)) return 0;
    }
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
 * cog keeps its own CRS (equivalent: the loader's placement was built
 * from it) and name (other readers may be naming it in a message). */
static void adopt(cf_cog *cog, cf_cog *h) {
    cog->src = h->src;
    h->src = NULL;
    cog->tiff = h->tiff;
    h->tiff = NULL;
    cog->color = h->color;
    h->color = NULL;
    cog->etag = h->etag;
    h->etag = NULL;
    cog->dtype = h->dtype;
    cog->header_bytes = h->header_bytes;
    cog->header_requests = h->header_requests;
    cog->from_cache = h->from_cache;
    cog->raw_color = h->raw_color;
    if (h->pool != &h->own_pool) cog->pool = h->pool;
}

/* Failures the next read may not meet: tried again then. */
static int transient(cf_status st) {
    return st == CF_E_IO || st == CF_E_HTTP || st == CF_E_TIMEOUT || st == CF_E_NOMEM;
}

/* The outcome of cog's header read (st, and h, the file opened, or
 * NULL), with cog's lock held: h's header taken when it agrees; a failure
 * kept unless transient. */
static void settle(cf_cog *cog, cf_status st, cf_cog *h) {
    cf__cog_decl *d = cog->decl;
    if (st == CF_OK) st = agree(cog, h, &d->err);
    if (st == CF_OK) adopt(cog, h);
    cf_cog_close(h);
    d->st = st;
    if (st == CF_OK)
        atomic_store_explicit(&cog->state, CF__COG_OPEN, memory_order_release);
    else if (!transient(st))
        atomic_store_explicit(&cog->state, CF__COG_FAILED, memory_order_relaxed);
}

cf_status cf__cog_load(cf_cog *cog, cf_error *err) {
    if (!cf__cog_declared(cog)) return CF_OK;
    cf__cog_decl *d = cog->decl;
    pthread_mutex_lock(&d->mu);
    cf_status st = CF_OK;
    switch (atomic_load_explicit(&cog->state, memory_order_relaxed)) {
    case CF__COG_DECLARED: {
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
        if (atomic_load_explicit(&c->state, memory_order_relaxed) == CF__COG_DECLARED)
            mine[k++] = c;
        else
            pthread_mutex_unlock(&c->decl->mu);
    }
    /* One cf_cog_open_many per io loop: their requests go out at once. */
    uint8_t done[LOAD_MANY_MAX] = {0};
    for (size_t a = 0; a < k; a++) {
        if (done[a]) continue;
        cf_open_req req[LOAD_MANY_MAX];
        size_t at[LOAD_MANY_MAX], m = 0;
        for (size_t b = a; b < k; b++) {
            if (done[b] || mine[b]->io != mine[a]->io) continue;
            cf__err_clear(&mine[b]->decl->err);
            req[m] = (cf_open_req){.url = mine[b]->decl->url, .err = &mine[b]->decl->err};
            at[m++] = b;
            done[b] = 1;
        }
        cf_cog_open_many(mine[a]->io, req, m, NULL, NULL);
        for (size_t j = 0; j < m; j++) settle(mine[at[j]], req[j].status, req[j].cog);
    }
    for (size_t a = 0; a < k; a++) pthread_mutex_unlock(&mine[a]->decl->mu);
}
