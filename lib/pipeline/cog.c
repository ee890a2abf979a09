/*
 * cog.c - the reader: open a COG (header through the need-bytes parser,
 * from a header cache when possible), what it holds (levels, bands,
 * metadata, stats), close.  Reading windows is cog_read.c's, where the
 * chunks lie cog_chunk.c's, the paste kernels paste.c's.
 *
 * With cog_read.c, the only place that knows about both TIFF structure
 * and I/O.
 */
#include "chunk_cache.h"
#include "cog_internal.h"
#include "header_cache.h"
#include "read_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- open */

cf_status cf__cog_alloc(const char *name, cf_cog **out, cf_error *err) {
    char red[CF__NAME_MAX];
    cf__redact_url(name, red, sizeof red);
    cf_cog *cog = cf__calloc(1, sizeof *cog);
    if (!cog) return cf__err(err, CF_E_NOMEM, "%s: out of memory", red);
    cf__pool_init(&cog->own_pool);
    cog->pool = &cog->own_pool;
    atomic_init(&cog->cache_dropped, 0);
    static _Atomic uint64_t next_uid = 1;
    cog->uid = atomic_fetch_add(&next_uid, 1);
    memcpy(cog->name, red, sizeof red);
    *out = cog;
    return CF_OK;
}

enum { ROLE_NONE, ROLE_LEVEL, ROLE_MASK };

/* What IFD i is to the reader (a page not read, a level or a level's
 * mask), and its name for messages. */
static int ifd_role(const cf__tiff *t, int i, char *buf, size_t n) {
    for (int l = 0; l < t->nlevels; l++) {
        if (t->levels[l] == i) {
            if (l == 0) snprintf(buf, n, "full resolution");
            else snprintf(buf, n, "overview %d", l);
            return ROLE_LEVEL;
        }
        if (t->mask_of_level[l] == i) {
            snprintf(buf, n, "mask of level %d", l);
            return ROLE_MASK;
        }
    }
    snprintf(buf, n, "not read");
    return ROLE_NONE;
}

/* Codec parameters of IFD i's first full chunk (to check it can be read). */
static void ifd_params(const cf_cog *cog, int i, cf__codec_params *p) {
    cf__chunk c;
    memset(&c, 0, sizeof c);
    c.ifd = i;
    cf__cog_chunk_params(cog, &c, p);
    p->height = cog->tiff->ifds[i].chunk_h;
}

/* Everything after the header is known: decide how each IFD a read can
 * touch is read, refuse the file now if one cannot be (not in the middle
 * of an epoch), and derive what info needs. */
static cf_status cog_finish(cf_cog *cog, cf_error *err) {
    const cf__tiff *t = cog->tiff;
    if (t->nlevels < 1)
        return cf__err(err, CF_E_FORMAT, "%s: no image in file", cog->name);
    cog->color = cf__calloc((size_t)t->nifds, sizeof *cog->color);
    if (!cog->color) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    uint32_t samples0 = 0, bits0 = 0;
    for (int i = 0; i < t->nifds; i++) {
        char role[32];
        int kind = ifd_role(t, i, role, sizeof role);
        if (kind == ROLE_NONE) continue;
        const cf__tiff_ifd *d = &t->ifds[i];
        int mask = kind == ROLE_MASK;
        cf_status st = CF_OK;
        if (!mask) {
            cf__color_tags ct = {d->photometric, d->compression, d->bits,
                                d->sample_format, d->samples, d->extra_samples,
                                d->planar, d->inkset};
            st = cf__codec_color(&ct, cog->raw_color, &cog->color[i], err);
        }
        cf__codec_params p;
        if (!st) {
            ifd_params(cog, i, &p);
            st = cf__codec_check(&p, err);
        }
        if (!st && i == t->levels[0]) {
            cog->dtype = cf__codec_dtype(&p);
            cf__codec_out_layout(&p, &samples0, &bits0);
            if (d->planar == 2) samples0 = d->samples;
        } else if (!st && !mask) {
            uint32_t sm, bt;
            cf__codec_out_layout(&p, &sm, &bt);
            if (d->planar == 2) sm = d->samples;
            if (cf__codec_dtype(&p) != cog->dtype || sm != samples0 || bt != bits0)
                st = cf__err(err, CF_E_UNSUPPORTED,
                             "it reads as %u samples of %s, the full "
                             "resolution as %u of %s",
                             sm, cf_dtype_name(cf__codec_dtype(&p)), samples0,
                             cf_dtype_name(cog->dtype));
        }
        if (st)
            return cf__err_prefix(err, st, "%s: IFD %d (%s)", cog->name,
                                  d->index, role);
    }
    /* The CRS (memoised by its keys: a shared archive CRS is built once).
     * Keys PROJ cannot make a CRS of leave it unknown, never fail the
     * open: the pixels are still readable. */
    cf__geokeys k = {t->geokeys, t->ngeokeys, t->geodoubles, t->ngeodoubles,
                    t->geoascii, t->ngeoascii};
    if (cf__crs_from_geokeys(&k, &cog->crs, cog->crs_note, sizeof cog->crs_note))
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    return CF_OK;
}

/* Try the header cache: on a hit the file opens without any request. */
static int parse_from_cache(cf_cog *cog) {
    cf__hc_entry *e = cf__hc_lookup(cog->io, cog->src);
    if (!e) return 0;
    cf__tiff_parser *p = cf__tiff_parser_new(e->size, cog->name);
    cf__tiff_parser_set_budget(p, cf__io_opts(cog->io)->header_memory_max);
    int ok = p != NULL;
    for (size_t i = 0; ok && i < e->nranges; i++)
        ok = cf__tiff_parser_add(p, e->ranges[i].off, e->ranges[i].data,
                                e->ranges[i].len, NULL) == CF_OK;
    uint64_t off, len;
    if (ok) ok = cf__tiff_parser_run(p, &cog->tiff, &off, &len, NULL) == CF_OK;
    cf__tiff_parser_free(p);
    if (ok) {
        cf__src_assume(cog->src, e->size, e->etag);
        /* Without a strong ETag the date is what tells a changed object:
         * the first tile read must match the header's, not pin its own. */
        cf__src_assume_last_modified(cog->src, e->last_modified);
        cog->from_cache = 1;
        cog->header_requests = 0;
        cog->header_bytes = 0;
        cf__io_note_cache_hit(cog->io);
    }
    cf__hc_entry_free(e);
    return ok;
}

cf_status cf__cog_fetch_failed(cf_cog *cog, cf_status st, cf_error *err) {
    if (st != CF_E_CHANGED || !cog->from_cache) return st;
    /* Without this, every later open would take the same stale header
     * and fail the same way until the cache directory is cleared. */
    if (!atomic_exchange(&cog->cache_dropped, 1))
        cf__hc_forget(cog->io, cog->src);
    return cf__err_hint(err, st, "its header came from the header cache, whose "
                        "entry is dropped now: open the file again");
}

void cf_open_options_init(cf_open_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
}

/* Copy what this build knows of the caller's options (struct_size). */
static void apply_options(cf_cog *cog, const cf_open_options *opt) {
    if (opt && opt->struct_size >= offsetof(cf_open_options, raw_color) +
                                       sizeof opt->raw_color)
        cog->raw_color = opt->raw_color != 0;
}

cf_status cf__cog_open_begin(cf_io *io, const char *url,
                             const cf_open_options *opt, cf_cog **out,
                             int *fetch, cf_error *err) {
    *out = NULL;
    *fetch = 0;
    cf_cog *cog;
    cf_status st = cf__cog_alloc(url, &cog, err);
    CF__TRY(st);
    apply_options(cog, opt);
    if (!io) {
        st = cf_io_new(NULL, &io, err);
        if (st) {
            cf_cog_close(cog);
            return st;
        }
        cog->own_io = 1;
    }
    cog->io = io;
    cf__io_state *state = cf__io_state_of(io);
    if (state) cog->pool = &state->pool;
    st = cf__src_new(io, url, &cog->src, err);
    if (st) {
        cf_cog_close(cog);
        return st;
    }
    snprintf(cog->name, sizeof cog->name, "%s", cf__src_name(cog->src));
    *fetch = !(cf__src_is_remote(cog->src) && parse_from_cache(cog));
    *out = cog;
    return CF_OK;
}

cf_status cf__cog_open_end(cf_cog *cog, cf_error *err) {
    cf_status st = cog_finish(cog, err);
    if (!st && cf__src_etag(cog->src) &&
        !(cog->etag = cf__strdup(cf__src_etag(cog->src))))
        st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    return st;
}

cf_status cf_cog_open_memory(const void *data, size_t size, const char *name,
                             cf_cog **out, cf_error *err) {
    return cf_cog_open_memory_ex(data, size, name, NULL, out, err);
}

cf_status cf_cog_open_memory_ex(const void *data, size_t size,
                                const char *name, const cf_open_options *opt,
                                cf_cog **out, cf_error *err) {
    if (!data || !out) return cf__err(err, CF_E_ARG, "cf_cog_open_memory: NULL argument");
    *out = NULL;
    if (!name) name = "<memory>";
    cf_cog *cog;
    cf_status st = cf__cog_alloc(name, &cog, err);
    CF__TRY(st);
    apply_options(cog, opt);
    cog->mem = data;
    cog->mem_size = size;
    st = cf__tiff_parse_memory(data, size, cog->name, &cog->tiff, err);
    if (!st) st = cog_finish(cog, err);
    if (st) {
        cf_cog_close(cog);
        return st;
    }
    cog->header_bytes = cog->tiff->header_end;
    *out = cog;
    return CF_OK;
}

void cf_cog_close(cf_cog *cog) {
    if (!cog) return;
    cf__cog_decl_free(cog);
    cf__pool_destroy(&cog->own_pool);
    free(cog->color);
    cf__tiff_free(cog->tiff);
    cf_crs_free(cog->crs);
    cf__src_free(cog->src);
    if (cog->own_io) cf_io_free(cog->io);
    free(cog->etag);
    free(cog);
}

/* ---------------------------------------------------------------- info */

void cf_cog_get_info(const cf_cog *cog, cf_cog_info *o) {
    memset(o, 0, sizeof *o);
    if (!cog) return;
    if (cf__cog_declared(cog)) { /* what the description says */
        const cf_grid *g = cf__cog_decl_grid(cog);
        o->width = g->width;
        o->height = g->height;
        o->count = cf__cog_decl_count(cog);
        o->dtype = cog->dtype;
        o->nlevels = 1;
        o->has_geotransform = 1;
        memcpy(o->geotransform, g->transform, sizeof o->geotransform);
        o->epsg = cf_crs_epsg(cog->crs);
        return;
    }
    const cf__tiff *t = cog->tiff;
    const cf__tiff_ifd *ifd = &t->ifds[t->levels[0]];
    o->width = ifd->width;
    o->height = ifd->height;
    o->count = cf__cog_bands(cog);
    o->dtype = cog->dtype;
    o->bits_per_sample = ifd->bits;
    o->tile_width = ifd->chunk_w;
    o->tile_height = ifd->chunk_h;
    o->tiled = ifd->tiled;
    o->compression = ifd->compression;
    o->compression_name = cf__tiff_compression_name(ifd);
    o->predictor = ifd->predictor;
    o->planar = ifd->planar;
    o->photometric = ifd->photometric;
    o->bigtiff = t->bigtiff;
    o->big_endian = t->big_endian;
    o->nlevels = t->nlevels;
    o->has_mask = t->mask_of_level[0] >= 0;
    o->has_geotransform = t->has_geotransform;
    memcpy(o->geotransform, t->geotransform, sizeof o->geotransform);
    o->epsg = cf_crs_epsg(cog->crs);
    o->has_nodata = t->has_nodata;
    o->nodata = t->nodata;
    o->file_size = cog->src ? cf__src_size(cog->src) : cog->mem_size;
    o->header_bytes = cog->header_bytes;
    o->header_requests = cog->header_requests;
    o->etag = cog->etag;
}

cf_status cf__cog_check_level(const cf_cog *cog, int level, cf_error *err) {
    if (cf__cog_declared(cog) && level != 0)
        return cf__err(err, CF_E_STATE, "%s: level %d: the file's header is not read yet",
                       cog->name, level);
    int n = cf__cog_declared(cog) ? 1 : cog->tiff->nlevels;
    if (level >= 0 && level < n) return CF_OK;
    if (n == 1)
        return cf__err(err, CF_E_ARG,
                       "%s: level %d does not exist: the file has no "
                       "overviews (level 0 only)",
                       cog->name, level);
    return cf__err(err, CF_E_ARG,
                   "%s: level %d does not exist: the file has levels 0..%d "
                   "(full resolution and %d overview%s)",
                   cog->name, level, n - 1, n - 1, n == 2 ? "" : "s");
}

cf_status cf_cog_level_info(const cf_cog *cog, int level, cf_level_info *out,
                            cf_error *err) {
    if (!cog || !out) return cf__err(err, CF_E_ARG, "cf_cog_level_info: NULL argument");
    CF__TRY(cf__cog_check_level(cog, level, err));
    if (cf__cog_declared(cog)) { /* level 0, tiles not known */
        memset(out, 0, sizeof *out);
        out->width = cf__cog_decl_grid(cog)->width;
        out->height = cf__cog_decl_grid(cog)->height;
        return CF_OK;
    }
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[cog->tiff->levels[level]];
    out->width = ifd->width;
    out->height = ifd->height;
    out->tile_width = ifd->chunk_w;
    out->tile_height = ifd->chunk_h;
    out->tiled = ifd->tiled;
    return CF_OK;
}

uint32_t cf__cog_bands(const cf_cog *cog) {
    if (cf__cog_declared(cog)) return cf__cog_decl_count(cog);
    const cf__tiff *t = cog->tiff;
    int l0 = t->levels[0];
    const cf__tiff_ifd *d = &t->ifds[l0];
    switch (cog->color ? cog->color[l0] : CF_COLOR_RAW) {
    case CF_COLOR_CMYK:
    case CF_COLOR_LAB: return 4;
    case CF_COLOR_YCBCR:
    case CF_COLOR_YCBCR_RAW: return 3;
    default: return d->samples;
    }
}

/* Band b (1-based) is one the file's tags describe (the file's samples;
 * the alpha band GDAL adds to RGBA is not). */
static int tagged_band(const cf_cog *cog, int band) {
    const cf__tiff *t = cog->tiff;
    int n = t->ifds[t->levels[0]].samples;
    return band >= 1 && band <= n && (uint32_t)band <= cf__cog_bands(cog);
}

double cf_cog_band_scale(const cf_cog *cog, int band) {
    const cf__tiff *t = cog->tiff;
    return (t->scale && tagged_band(cog, band)) ? t->scale[band - 1] : 1.0;
}

double cf_cog_band_offset(const cf_cog *cog, int band) {
    const cf__tiff *t = cog->tiff;
    return (t->offset && tagged_band(cog, band)) ? t->offset[band - 1] : 0.0;
}

int cf_cog_band_nodata(const cf_cog *cog, int band, double *value) {
    if (!cog || band < 1 || (uint32_t)band > cf__cog_bands(cog) ||
        !cog->tiff->has_nodata)
        return 0;
    if (value) *value = cog->tiff->nodata;
    return 1;
}

const char *cf_cog_band_description(const cf_cog *cog, int band) {
    if (!cog || !tagged_band(cog, band)) return "";
    return cf__tiff_meta_description(cog->tiff->meta, band);
}

const char *cf_cog_band_unit(const cf_cog *cog, int band) {
    if (!cog || !tagged_band(cog, band)) return "";
    return cf__tiff_meta_unit(cog->tiff->meta, band);
}

const char *const *cf_cog_metadata(const cf_cog *cog, int band,
                                   const char *domain) {
    if (!cog || (band != 0 && !tagged_band(cog, band))) return NULL;
    return cf__tiff_meta_items(cog->tiff->meta, band, domain);
}

const char *const *cf_cog_metadata_domains(const cf_cog *cog, int band) {
    if (!cog || (band != 0 && !tagged_band(cog, band))) return NULL;
    return cf__tiff_meta_domains(cog->tiff->meta, band);
}

const char *cf_cog_metadata_item(const cf_cog *cog, int band,
                                 const char *domain, const char *key) {
    const char *const *it = cf_cog_metadata(cog, band, domain);
    size_t kl = key ? strlen(key) : 0;
    for (; it && *it && kl; it++)
        if (!strncmp(*it, key, kl) && (*it)[kl] == '=') return *it + kl + 1;
    return NULL;
}

const char *cf_cog_warnings(const cf_cog *cog) {
    return cog ? cog->tiff->warnings : NULL;
}

const char *cf_cog_name(const cf_cog *cog) { return cog ? cog->name : ""; }

uint64_t cf_cog_requests(const cf_cog *cog) {
    return cog && cog->src ? cf__src_requests(cog->src) : 0;
}

void cf_cog_get_stats(const cf_cog *cog, cf_cog_stats *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    if (!cog) return;
    o->chunks_decoded = atomic_load(&cog->n_decoded);
    o->decoded_bytes = atomic_load(&cog->decoded_bytes);
    o->delivered_bytes = atomic_load(&cog->delivered_bytes);
    o->cache_hits = atomic_load(&cog->cache_hits);
    o->cache_misses = atomic_load(&cog->cache_misses);
}
