/*
 * cog.c - the reader: open a COG (header through the need-bytes parser,
 * from a header cache when possible) and read windows by fetching the
 * chunks they touch in one batch, decoding each, and pasting the visible
 * part into the caller's band-sequential buffer.
 *
 * Ties the lower layers together and is the only place that knows about
 * both TIFF structure and I/O.
 */
#include "chunk_cache.h"
#include "cog_internal.h"
#include "header_cache.h"
#include "read_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- open */

static cf_status cog_alloc(const char *name, cf_cog **out, cf_error *err) {
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
static int ifd_role(const cf_tiff *t, int i, char *buf, size_t n) {
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
static void ifd_params(const cf_cog *cog, int i, cf_codec_params *p) {
    cf_chunk c;
    memset(&c, 0, sizeof c);
    c.ifd = i;
    cf__cog_chunk_params(cog, &c, p);
    p->height = cog->tiff->ifds[i].chunk_h;
}

/* Everything after the header is known: decide how each IFD a read can
 * touch is read, refuse the file now if one cannot be (not in the middle
 * of an epoch), and derive what info needs. */
static cf_status cog_finish(cf_cog *cog, cf_error *err) {
    const cf_tiff *t = cog->tiff;
    if (t->nlevels < 1)
        return cf__err(err, CF_E_FORMAT, "%s: no image in file", cog->name);
    cog->color = cf__calloc((size_t)t->nifds, sizeof *cog->color);
    if (!cog->color) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    uint32_t samples0 = 0, bits0 = 0;
    for (int i = 0; i < t->nifds; i++) {
        char role[32];
        int kind = ifd_role(t, i, role, sizeof role);
        if (kind == ROLE_NONE) continue;
        const cf_tiff_ifd *d = &t->ifds[i];
        int mask = kind == ROLE_MASK;
        cf_status st = CF_OK;
        if (!mask) {
            cf_color_tags ct = {d->photometric, d->compression, d->bits,
                                d->sample_format, d->samples, d->extra_samples,
                                d->planar, d->inkset};
            st = cf_codec_color(&ct, cog->raw_color, &cog->color[i], err);
        }
        cf_codec_params p;
        if (!st) {
            ifd_params(cog, i, &p);
            st = cf_codec_check(&p, err);
        }
        if (!st && i == t->levels[0]) {
            cog->dtype = cf_codec_dtype(&p);
            cf_codec_out_layout(&p, &samples0, &bits0);
            if (d->planar == 2) samples0 = d->samples;
        } else if (!st && !mask) {
            uint32_t sm, bt;
            cf_codec_out_layout(&p, &sm, &bt);
            if (d->planar == 2) sm = d->samples;
            if (cf_codec_dtype(&p) != cog->dtype || sm != samples0 || bt != bits0)
                st = cf__err(err, CF_E_UNSUPPORTED,
                             "it reads as %u samples of %s, the full "
                             "resolution as %u of %s",
                             sm, cf_dtype_name(cf_codec_dtype(&p)), samples0,
                             cf_dtype_name(cog->dtype));
        }
        if (st)
            return cf__err_prefix(err, st, "%s: IFD %d (%s)", cog->name,
                                  d->index, role);
    }
    /* The CRS (memoised by its keys: a shared archive CRS is built once).
     * Keys PROJ cannot make a CRS of leave it unknown, never fail the
     * open: the pixels are still readable. */
    cf_geokeys k = {t->geokeys, t->ngeokeys, t->geodoubles, t->ngeodoubles,
                    t->geoascii, t->ngeoascii};
    if (cf__crs_from_geokeys(&k, &cog->crs, cog->crs_note, sizeof cog->crs_note))
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    return CF_OK;
}

/* Try the header cache: on a hit the file opens without any request. */
static int parse_from_cache(cf_cog *cog) {
    cf_hc_entry *e = cf__hc_lookup(cog->io, cog->src);
    if (!e) return 0;
    cf_tiff_parser *p = cf_tiff_parser_new(e->size, cog->name);
    cf_tiff_parser_set_budget(p, cf_io_opts(cog->io)->header_memory_max);
    int ok = p != NULL;
    for (size_t i = 0; ok && i < e->nranges; i++)
        ok = cf_tiff_parser_add(p, e->ranges[i].off, e->ranges[i].data,
                                e->ranges[i].len, NULL) == CF_OK;
    uint64_t off, len;
    if (ok) ok = cf_tiff_parser_run(p, &cog->tiff, &off, &len, NULL) == CF_OK;
    cf_tiff_parser_free(p);
    if (ok) {
        cf_src_assume(cog->src, e->size, e->etag);
        /* Without a strong ETag the date is what tells a changed object:
         * the first tile read must match the header's, not pin its own. */
        cf_src_assume_last_modified(cog->src, e->last_modified);
        cog->from_cache = 1;
        cog->header_requests = 0;
        cog->header_bytes = 0;
        cf_io_note_cache_hit(cog->io);
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

cf_status cf_cog_open(cf_io *io, const char *url, cf_cog **out,
                      cf_error *err) {
    return cf_cog_open_ex(io, url, NULL, out, err);
}

cf_status cf_cog_open_ex(cf_io *io, const char *url,
                         const cf_open_options *opt, cf_cog **out,
                         cf_error *err) {
    if (!url || !out) return cf__err(err, CF_E_ARG, "cf_cog_open: NULL argument");
    /* One file is many files with n = 1 (open_many.c drives the header
     * reads). */
    cf_open_req r = {.url = url, .err = err};
    cf_status st = cf_cog_open_many(io, &r, 1, opt, NULL);
    *out = r.cog;
    return st ? st : r.status;
}

cf_status cf__cog_open_begin(cf_io *io, const char *url,
                             const cf_open_options *opt, cf_cog **out,
                             int *fetch, cf_error *err) {
    *out = NULL;
    *fetch = 0;
    cf_cog *cog;
    cf_status st = cog_alloc(url, &cog, err);
    if (st) return st;
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
    cf_io_state *state = cf__io_state(io);
    if (state) cog->pool = &state->pool;
    st = cf_src_new(io, url, &cog->src, err);
    if (st) {
        cf_cog_close(cog);
        return st;
    }
    snprintf(cog->name, sizeof cog->name, "%s", cf_src_name(cog->src));
    *fetch = !(cf_src_is_remote(cog->src) && parse_from_cache(cog));
    *out = cog;
    return CF_OK;
}

cf_status cf__cog_open_end(cf_cog *cog, cf_error *err) {
    cf_status st = cog_finish(cog, err);
    if (!st && cf_src_etag(cog->src) &&
        !(cog->etag = cf__strdup(cf_src_etag(cog->src))))
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
    cf_status st = cog_alloc(name, &cog, err);
    if (st) return st;
    apply_options(cog, opt);
    cog->mem = data;
    cog->mem_size = size;
    st = cf_tiff_parse_memory(data, size, cog->name, &cog->tiff, err);
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
    cf__pool_destroy(&cog->own_pool);
    free(cog->color);
    cf_tiff_free(cog->tiff);
    cf_crs_free(cog->crs);
    cf_src_free(cog->src);
    if (cog->own_io) cf_io_free(cog->io);
    free(cog->etag);
    free(cog);
}

/* ---------------------------------------------------------------- info */

void cf_cog_get_info(const cf_cog *cog, cf_cog_info *o) {
    memset(o, 0, sizeof *o);
    if (!cog) return;
    const cf_tiff *t = cog->tiff;
    const cf_tiff_ifd *ifd = &t->ifds[t->levels[0]];
    o->width = ifd->width;
    o->height = ifd->height;
    o->count = cf__cog_bands(cog);
    o->dtype = cog->dtype;
    o->bits_per_sample = ifd->bits;
    o->tile_width = ifd->chunk_w;
    o->tile_height = ifd->chunk_h;
    o->tiled = ifd->tiled;
    o->compression = ifd->compression;
    o->compression_name = cf_tiff_compression_name(ifd);
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
    o->file_size = cog->src ? cf_src_size(cog->src) : cog->mem_size;
    o->header_bytes = cog->header_bytes;
    o->header_requests = cog->header_requests;
    o->etag = cog->etag;
}

cf_status cf__cog_check_level(const cf_cog *cog, int level, cf_error *err) {
    int n = cog->tiff->nlevels;
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
    cf_status st = cf__cog_check_level(cog, level, err);
    if (st != CF_OK) return st;
    const cf_tiff_ifd *ifd = &cog->tiff->ifds[cog->tiff->levels[level]];
    out->width = ifd->width;
    out->height = ifd->height;
    out->tile_width = ifd->chunk_w;
    out->tile_height = ifd->chunk_h;
    out->tiled = ifd->tiled;
    return CF_OK;
}

uint32_t cf__cog_bands(const cf_cog *cog) {
    const cf_tiff *t = cog->tiff;
    int l0 = t->levels[0];
    const cf_tiff_ifd *d = &t->ifds[l0];
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
    const cf_tiff *t = cog->tiff;
    int n = t->ifds[t->levels[0]].samples;
    return band >= 1 && band <= n && (uint32_t)band <= cf__cog_bands(cog);
}

double cf_cog_band_scale(const cf_cog *cog, int band) {
    const cf_tiff *t = cog->tiff;
    return (t->scale && tagged_band(cog, band)) ? t->scale[band - 1] : 1.0;
}

double cf_cog_band_offset(const cf_cog *cog, int band) {
    const cf_tiff *t = cog->tiff;
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
    return cf_tiff_meta_description(cog->tiff->meta, band);
}

const char *cf_cog_band_unit(const cf_cog *cog, int band) {
    if (!cog || !tagged_band(cog, band)) return "";
    return cf_tiff_meta_unit(cog->tiff->meta, band);
}

const char *const *cf_cog_metadata(const cf_cog *cog, int band,
                                   const char *domain) {
    if (!cog || (band != 0 && !tagged_band(cog, band))) return NULL;
    return cf_tiff_meta_items(cog->tiff->meta, band, domain);
}

const char *const *cf_cog_metadata_domains(const cf_cog *cog, int band) {
    if (!cog || (band != 0 && !tagged_band(cog, band))) return NULL;
    return cf_tiff_meta_domains(cog->tiff->meta, band);
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
    return cog && cog->src ? cf_src_requests(cog->src) : 0;
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

/* -------------------------------------------------------------- chunks */

cf_status cf__cog_chunk(const cf_cog *cog, int ifdi, uint32_t cx, uint32_t cy,
                        uint32_t plane, cf_chunk *c, cf_error *err) {
    const cf_tiff_ifd *ifd = &cog->tiff->ifds[ifdi];
    uint64_t per_plane = (uint64_t)ifd->chunks_across * ifd->chunks_down;
    uint64_t idx = (uint64_t)plane * per_plane + (uint64_t)cy * ifd->chunks_across + cx;
    if (cx >= ifd->chunks_across || cy >= ifd->chunks_down || idx >= ifd->nchunks)
        return cf__err(err, CF_E_FORMAT, "%s: tile (%u, %u) plane %u out of range",
                       cog->name, cx, cy, plane);
    c->ifd = ifdi;
    c->cx = cx;
    c->cy = cy;
    c->plane = plane;
    c->index = idx;
    c->off = ifd->offsets[idx];
    c->len = ifd->counts[idx];
    uint64_t size = cog->src ? cf_src_size(cog->src) : cog->mem_size;
    if (c->len == 0) return CF_OK; /* sparse: reads as nodata */
    if (c->len > CF_MAX_CHUNK_BYTES)
        return cf__err(err, CF_E_LIMIT, "%s: tile %llu: byte count %llu above the cap",
                       cog->name, (unsigned long long)idx, (unsigned long long)c->len);
    if (c->off == 0 || c->off >= size || c->len > size - c->off)
        return cf__err(err, CF_E_FORMAT,
                       "%s: tile %llu: bytes [%llu, +%llu) lie outside the file "
                       "(size %llu)",
                       cog->name, (unsigned long long)idx, (unsigned long long)c->off,
                       (unsigned long long)c->len, (unsigned long long)size);
    return CF_OK;
}

const char *cf__cog_chunk_where(const cf_cog *cog, const cf_chunk *c, char *buf,
                                size_t n) {
    const cf_tiff *t = cog->tiff;
    const cf_tiff_ifd *ifd = &t->ifds[c->ifd];
    int level = -1, mask = 0;
    for (int l = 0; l < t->nlevels && level < 0; l++) {
        if (t->levels[l] == c->ifd) level = l;
        else if (t->mask_of_level[l] == c->ifd) level = l, mask = 1;
    }
    char lv[48];
    if (level < 0)
        snprintf(lv, sizeof lv, "IFD %d", c->ifd);
    else
        snprintf(lv, sizeof lv, "%slevel %d", mask ? "mask of " : "", level);
    if (ifd->tiled)
        snprintf(buf, n, "%s, tile %llu (col %u, row %u%s)", lv,
                 (unsigned long long)c->index, c->cx, c->cy,
                 ifd->planar == 2 ? ", band plane" : "");
    else
        snprintf(buf, n, "%s, strip %llu", lv, (unsigned long long)c->index);
    return buf;
}

void cf__cog_chunk_params(const cf_cog *cog, const cf_chunk *c,
                          cf_codec_params *p) {
    const cf_tiff_ifd *ifd = &cog->tiff->ifds[c->ifd];
    memset(p, 0, sizeof *p);
    p->compression = ifd->compression;
    p->lerc_sub = (uint16_t)ifd->lerc_sub;
    p->predictor = ifd->predictor;
    p->bits = ifd->bits;
    p->sample_format = ifd->sample_format;
    p->photometric = ifd->photometric;
    p->width = ifd->chunk_w;
    p->height = ifd->chunk_h;
    if (!ifd->tiled) {
        /* The last strip holds only the rows that remain. */
        uint64_t y0 = (uint64_t)c->cy * ifd->chunk_h;
        if (y0 + ifd->chunk_h > ifd->height) p->height = (uint32_t)(ifd->height - y0);
    }
    p->samples = ifd->planar == 2 ? 1 : ifd->samples;
    p->big_endian = cog->tiff->big_endian;
    p->jpeg_tables = ifd->jpeg_tables;
    p->jpeg_tables_len = ifd->jpeg_tables_len;
    if (ifd->ojpeg_status) {
        p->refuse = ifd->ojpeg_why;
        p->refuse_code = ifd->ojpeg_status;
    }
    p->ycbcr_sub_h = ifd->ycbcr_sub_h;
    p->ycbcr_sub_v = ifd->ycbcr_sub_v;
    p->fill_order = ifd->fill_order;
    p->strip = !ifd->tiled;
    p->color = cog->color ? cog->color[c->ifd] : CF_COLOR_RAW;
    p->t4_options = ifd->t4_options;
    p->t6_options = ifd->t6_options;
    memcpy(p->white_point, ifd->white_point, sizeof p->white_point);
    memcpy(p->ycbcr_coef, ifd->ycbcr_coef, sizeof p->ycbcr_coef);
    memcpy(p->ref_bw, ifd->ref_bw, sizeof p->ref_bw);
}

/* Decode compressed bytes of a chunk (codec parameters p, from
 * cf__cog_chunk_params) into dst (size of cf_codec_chunk_bytes); errors
 * name the file and tile. */
static cf_status cf__cog_decode(cf_cog *cog, cf_codec_ctx *ctx, const cf_chunk *c,
                                const cf_codec_params *p, const uint8_t *src,
                                size_t len, uint8_t *dst, size_t dst_len,
                                cf_error *err) {
    cf_status st = cf_codec_decode(ctx, p, src, len, dst, dst_len, err);
    if (st)
        cf__err_prefix(err, st, "%s: tile %llu (col %u, row %u%s) of IFD %d",
                       cog->name, (unsigned long long)c->index, c->cx, c->cy,
                       cog->tiff->ifds[c->ifd].planar == 2 ? ", band plane" : "",
                       cog->tiff->ifds[c->ifd].index);
    return st;
}

cf_codec_ctx *cf__cog_ctx_get(cf_cog *cog) { return cf__pool_get(cog->pool); }

void cf__cog_ctx_put(cf_cog *cog, cf_codec_ctx *ctx) { cf__pool_put(cog->pool, ctx); }

/* --------------------------------------------------------------- paste */

void cf__cog_fill_value(const cf_cog *cog, uint8_t out[CF__FILL_MAX]) {
    memset(out, 0, CF__FILL_MAX);
    const cf_tiff *t = cog->tiff;
    if (!t->has_nodata) return;
    double v = t->nodata;
    /* A complex sample's fill is the nodata value plus 0i. */
    switch (cog->dtype) {
#define CF_FILL(T, lo, hi)                                              \
    {                                                                   \
        T x = (T)0;                                                     \
        if (!isnan(v) && v >= (double)(lo) && v <= (double)(hi)) x = (T)v; \
        memcpy(out, &x, sizeof x);                                      \
        break;                                                          \
    }
    case CF_DT_U8: CF_FILL(uint8_t, 0, UINT8_MAX)
    case CF_DT_I8: CF_FILL(int8_t, INT8_MIN, INT8_MAX)
    case CF_DT_U16: CF_FILL(uint16_t, 0, UINT16_MAX)
    case CF_DT_I16:
    case CF_DT_CI16: CF_FILL(int16_t, INT16_MIN, INT16_MAX)
    case CF_DT_U32: CF_FILL(uint32_t, 0, UINT32_MAX)
    case CF_DT_I32:
    case CF_DT_CI32: CF_FILL(int32_t, INT32_MIN, INT32_MAX)
    case CF_DT_U64: CF_FILL(uint64_t, 0, 1.8446744073709550e19)
    case CF_DT_I64: CF_FILL(int64_t, -9.2233720368547758e18, 9.2233720368547748e18)
#undef CF_FILL
    case CF_DT_F32:
    case CF_DT_CF32: {
        float f = (float)v;
        memcpy(out, &f, 4);
        break;
    }
    case CF_DT_F64:
    case CF_DT_CF64: memcpy(out, &v, 8); break;
    default: break;
    }
}

static void fill_samples(uint8_t *dst, size_t n, size_t bps, const uint8_t v[CF__FILL_MAX]) {
    int zero = 1;
    for (size_t i = 0; i < bps; i++) zero &= v[i] == 0;
    if (zero || bps == 1) {
        memset(dst, v[0], n * bps);
        return;
    }
    for (size_t i = 0; i < n; i++) memcpy(dst + i * bps, v, bps);
}

static size_t out_bps(const cf_cog *cog, int ifdi);

void cf__cog_fill(const cf_cog *cog, int ifdi, uint8_t *dst, size_t nsamples) {
    uint8_t v[CF__FILL_MAX];
    cf__cog_fill_value(cog, v);
    fill_samples(dst, nsamples, out_bps(cog, ifdi), v);
}

/* Copy `n` samples with a source stride of `stride` samples. */
static void copy_strided(uint8_t *d, const uint8_t *s, size_t n, size_t stride,
                         size_t bps) {
    if (stride == 1) {
        memcpy(d, s, n * bps);
        return;
    }
    switch (bps) {
    case 1:
        for (size_t i = 0; i < n; i++) d[i] = s[i * stride];
        break;
    case 2:
        for (size_t i = 0; i < n; i++) memcpy(d + 2 * i, s + 2 * i * stride, 2);
        break;
    case 4:
        for (size_t i = 0; i < n; i++) memcpy(d + 4 * i, s + 4 * i * stride, 4);
        break;
    default:
        for (size_t i = 0; i < n; i++) memcpy(d + bps * i, s + bps * i * stride, bps);
        break;
    }
}

/* Split n RGB pixels into three planes.  With SSSE3 (checked at run time)
 * 16 pixels take nine byte shuffles, as GDAL's GDALDeinterleave does. */
#if defined(__x86_64__) || defined(__i386__)
#include <tmmintrin.h>
__attribute__((target("ssse3"))) static size_t split3_ssse3(
    const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2, size_t n) {
    const __m128i ra = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i rb = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i rc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i ga = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i gb = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
    const __m128i gc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
    const __m128i ba = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i bb = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
    const __m128i bc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
    size_t i = 0;
    for (; i + 16 <= n; i += 16, s += 48) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i r = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ra), _mm_shuffle_epi8(b, rb)),
                                 _mm_shuffle_epi8(c, rc));
        __m128i g = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ga), _mm_shuffle_epi8(b, gb)),
                                 _mm_shuffle_epi8(c, gc));
        __m128i bl = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ba), _mm_shuffle_epi8(b, bb)),
                                  _mm_shuffle_epi8(c, bc));
        _mm_storeu_si128((__m128i *)(d0 + i), r);
        _mm_storeu_si128((__m128i *)(d1 + i), g);
        _mm_storeu_si128((__m128i *)(d2 + i), bl);
    }
    return i;
}
#endif

static void split3(const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2,
                   size_t n) {
    size_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("ssse3")) i = split3_ssse3(s, d0, d1, d2, n);
#endif
    for (s += 3 * i; i < n; i++, s += 3) {
        d0[i] = s[0];
        d1[i] = s[1];
        d2[i] = s[2];
    }
}

/* Split n pixels of 4 samples (bps 1 or 2 bytes each) into four planes
 * d[0..3].  SSE2 (always there on x86-64) transposes 16 8-bit or 8
 * 16-bit pixels with three rounds of unpacks; 4-band uint8 and uint16
 * (RGB + near infrared) is the commonest layout of EO imagery, and the
 * per-band strided copy was most of the CPU of an uncompressed read. */
static void split4(const uint8_t *s, uint8_t *const d[4], size_t n, size_t bps) {
    size_t i = 0;
#if defined(__SSE2__)
    if (bps == 1) {
        for (; i + 16 <= n; i += 16, s += 64) {
            __m128i v0 = _mm_loadu_si128((const __m128i *)s);
            __m128i v1 = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i v2 = _mm_loadu_si128((const __m128i *)(s + 32));
            __m128i v3 = _mm_loadu_si128((const __m128i *)(s + 48));
            /* pixels 0-3 | 4-7 | 8-11 | 12-15, bands interleaved */
            __m128i t0 = _mm_unpacklo_epi8(v0, v1), t1 = _mm_unpackhi_epi8(v0, v1);
            __m128i t2 = _mm_unpacklo_epi8(v2, v3), t3 = _mm_unpackhi_epi8(v2, v3);
            __m128i u0 = _mm_unpacklo_epi8(t0, t1), u1 = _mm_unpackhi_epi8(t0, t1);
            __m128i u2 = _mm_unpacklo_epi8(t2, t3), u3 = _mm_unpackhi_epi8(t2, t3);
            /* w0: band 0 then 1 of pixels 0-7; w1: bands 2, 3; w2, w3: 8-15 */
            __m128i w0 = _mm_unpacklo_epi8(u0, u1), w1 = _mm_unpackhi_epi8(u0, u1);
            __m128i w2 = _mm_unpacklo_epi8(u2, u3), w3 = _mm_unpackhi_epi8(u2, u3);
            _mm_storeu_si128((__m128i *)(d[0] + i), _mm_unpacklo_epi64(w0, w2));
            _mm_storeu_si128((__m128i *)(d[1] + i), _mm_unpackhi_epi64(w0, w2));
            _mm_storeu_si128((__m128i *)(d[2] + i), _mm_unpacklo_epi64(w1, w3));
            _mm_storeu_si128((__m128i *)(d[3] + i), _mm_unpackhi_epi64(w1, w3));
        }
    } else {
        for (; i + 8 <= n; i += 8, s += 64) {
            __m128i v0 = _mm_loadu_si128((const __m128i *)s);
            __m128i v1 = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i v2 = _mm_loadu_si128((const __m128i *)(s + 32));
            __m128i v3 = _mm_loadu_si128((const __m128i *)(s + 48));
            /* pixels 0-1 | 2-3 | 4-5 | 6-7 */
            __m128i t0 = _mm_unpacklo_epi16(v0, v1), t1 = _mm_unpackhi_epi16(v0, v1);
            __m128i t2 = _mm_unpacklo_epi16(v2, v3), t3 = _mm_unpackhi_epi16(v2, v3);
            /* u0: band 0 then 1 of pixels 0-3; u1: bands 2, 3; u2, u3: 4-7 */
            __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1);
            __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3);
            _mm_storeu_si128((__m128i *)(d[0] + 2 * i), _mm_unpacklo_epi64(u0, u2));
            _mm_storeu_si128((__m128i *)(d[1] + 2 * i), _mm_unpackhi_epi64(u0, u2));
            _mm_storeu_si128((__m128i *)(d[2] + 2 * i), _mm_unpacklo_epi64(u1, u3));
            _mm_storeu_si128((__m128i *)(d[3] + 2 * i), _mm_unpackhi_epi64(u1, u3));
        }
    }
#endif
    for (; i < n; i++, s += 4 * bps)
        for (int k = 0; k < 4; k++) memcpy(d[k] + bps * i, s + bps * k, bps);
}

/* n one-bit samples from bit `first` of src (most significant bit first)
 * to bytes of 0 or `on`: a whole source byte at a time through a table
 * of eight output bytes (bilevel CCITT images and masks are all bits). */
static uint64_t bits_to_01[256]; /* byte b -> its 8 bits as 0/1 bytes */
static pthread_once_t bits_once = PTHREAD_ONCE_INIT;

static void bits_init(void) {
    for (unsigned b = 0; b < 256; b++) {
        uint8_t e[8];
        for (unsigned k = 0; k < 8; k++) e[k] = (uint8_t)((b >> (7 - k)) & 1);
        memcpy(&bits_to_01[b], e, 8);
    }
}

static void expand_bits_row(const uint8_t *src, size_t first, size_t n,
                            uint8_t *d, uint8_t on) {
    size_t i = 0;
    for (; i < n && ((first + i) & 7); i++)
        d[i] = (src[(first + i) >> 3] >> (7 - ((first + i) & 7))) & 1 ? on : 0;
    if (n - i >= 8) {
        pthread_once(&bits_once, bits_init);
        const uint8_t *s = src + ((first + i) >> 3);
        for (; i + 8 <= n; i += 8) {
            uint64_t v = bits_to_01[*s++] * on; /* each byte 0 or on */
            memcpy(d + i, &v, 8);
        }
    }
    for (; i < n; i++)
        d[i] = (src[(first + i) >> 3] >> (7 - ((first + i) & 7))) & 1 ? on : 0;
}

void cf__cog_paste(const cf_cog *cog, const cf_chunk *c, const uint8_t *chunk,
                   int64_t x, int64_t y, uint32_t w, uint32_t h,
                   const int *bands, int nbands, uint8_t *dst,
                   int expand_bits) {
    const cf_tiff_ifd *ifd = &cog->tiff->ifds[c->ifd];
    cf_codec_params p;
    cf__cog_chunk_params(cog, c, &p);
    cf__rect in;
    if (!cf__plan_chunk_rect(ifd, c, x, y, w, h, &in)) return;
    const int64_t px0 = (int64_t)c->cx * ifd->chunk_w, py0 = (int64_t)c->cy * ifd->chunk_h;
    const int64_t ix0 = in.x0, iy0 = in.y0, ix1 = in.x1, iy1 = in.y1;
    /* The decoded chunk's layout (widened depths, RGB(A) colours). */
    uint32_t osamp, obits;
    cf_codec_out_layout(&p, &osamp, &obits);
    size_t spp = osamp;
    size_t n = (size_t)(ix1 - ix0);
    size_t row_bytes = ((size_t)p.width * spp * obits + 7) / 8;
    size_t bps = obits >= 8 ? obits / 8u : 1;
    if (ifd->planar != 2 && (size_t)nbands == spp &&
        ((obits == 8 && (spp == 3 || spp == 4)) || (obits == 16 && spp == 4))) {
        /* all bands in file order of 8-bit RGB(A) (JPEG, WebP) or 4-band
         * 8/16-bit: split each row in one pass instead of one strided pass
         * per band */
        int inorder = 1;
        for (int k = 0; k < nbands; k++) inorder &= bands[k] == k;
        if (inorder) {
            size_t plane = (size_t)h * w * bps;
            for (int64_t r = iy0; r < iy1; r++) {
                const uint8_t *s = chunk + (size_t)(r - py0) * row_bytes +
                                   (size_t)(ix0 - px0) * spp * bps;
                uint8_t *d[4];
                d[0] = dst + ((size_t)(r - y) * w + (size_t)(ix0 - x)) * bps;
                for (size_t k = 1; k < spp; k++) d[k] = d[k - 1] + plane;
                if (spp == 3)
                    split3(s, d[0], d[1], d[2], n);
                else
                    split4(s, d, n, bps);
            }
            return;
        }
    }
    for (int k = 0; k < nbands; k++) {
        size_t s;
        if (ifd->planar == 2) {
            if ((uint32_t)bands[k] != c->plane) continue;
            s = 0;
        } else {
            s = (size_t)bands[k];
        }
        for (int64_t r = iy0; r < iy1; r++) {
            const uint8_t *srow = chunk + (size_t)(r - py0) * row_bytes;
            uint8_t *drow = dst + (((size_t)k * h + (size_t)(r - y)) * w +
                                   (size_t)(ix0 - x)) * bps;
            if (obits == 1 && spp == 1) {
                expand_bits_row(srow, (size_t)(ix0 - px0), n, drow,
                                (uint8_t)expand_bits);
            } else if (obits == 1) {
                for (size_t i = 0; i < n; i++) {
                    size_t bit = ((size_t)(ix0 - px0) + i) * spp + s;
                    int on = (srow[bit >> 3] >> (7 - (bit & 7))) & 1;
                    drow[i] = on ? (uint8_t)expand_bits : 0;
                }
            } else {
                copy_strided(drow, srow + ((size_t)(ix0 - px0) * spp + s) * bps, n,
                             spp, bps);
            }
        }
    }
}

/* ---------------------------------------------------------------- read */

/* An uncompressed chunk already in host byte order needs no decode step
 * (the predictor tag does not apply to uncompressed data, as in libtiff):
 * whole-byte samples not widened or colour-converted, bits in the usual
 * order. */
static int raw_usable(const cf_codec_params *p, uint64_t have, size_t need) {
    const uint16_t probe = 1;
    int host_be = *(const uint8_t *)&probe == 0;
    uint32_t samples, bits;
    cf_codec_out_layout(p, &samples, &bits);
    return p->compression == CF_COMP_NONE && have >= need &&
           p->fill_order != 2 && bits == p->bits &&
           p->color == CF_COLOR_RAW &&
           (p->bits <= 8 || !!p->big_endian == host_be);
}

/* Bytes of one delivered sample of IFD ifdi (1 for bits, which paste
 * expands to a byte). */
static size_t out_bps(const cf_cog *cog, int ifdi) {
    cf_chunk c;
    memset(&c, 0, sizeof c);
    c.ifd = ifdi;
    cf_codec_params p;
    cf__cog_chunk_params(cog, &c, &p);
    uint32_t samples, bits;
    cf_codec_out_layout(&p, &samples, &bits);
    return bits >= 8 ? bits / 8u : 1;
}

cf_status cf__cog_window_chunks(const cf_cog *cog, int ifdi, int64_t x, int64_t y,
                                uint32_t w, uint32_t h, const int *bands, int nb,
                                uint8_t *dst, const uint8_t fill[CF__FILL_MAX], cf_chunk **out,
                                size_t *nout, uint64_t *total, cf_error *err) {
    *out = NULL;
    *nout = 0;
    *total = 0;
    int planes[CF_MAX_BANDS];
    uint32_t np = cf__plan_planes(bands, nb, planes);
    cf__plan p;
    cf__plan_init(&p, cog, ifdi, x, y, w, h, planes, np);
    if (p.count > CF_MAX_CHUNKS)
        return cf__err(err, CF_E_LIMIT, "%s: window needs %llu tiles", cog->name,
                       (unsigned long long)p.count);
    if (p.prefill) fill_samples(dst, (size_t)w * h * (size_t)nb, out_bps(cog, ifdi), fill);
    if (!p.count) return CF_OK;
    cf_chunk *chunks = cf__calloc((size_t)p.count, sizeof *chunks);
    if (!chunks) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    size_t nc = 0;
    cf_status st = CF_OK;
    for (;;) {
        int has;
        st = cf__plan_peek(&p, &chunks[nc], &has, err);
        if (st || !has) break;
        cf__plan_take(&p);
        if (!cf__add_u64(*total, chunks[nc].len, total) || *total > (4ull << 30)) {
            st = cf__err(err, CF_E_LIMIT, "%s: window needs more than 4 GiB of tile data",
                         cog->name);
            break;
        }
        nc++;
    }
    if (st) {
        free(chunks);
        return st;
    }
    *out = chunks;
    *nout = nc;
    return CF_OK;
}

int cf__cog_chunk_raw(const cf_cog *cog, const cf_chunk *c) {
    cf_codec_params p;
    cf__cog_chunk_params(cog, c, &p);
    return raw_usable(&p, c->len, (size_t)cf_codec_chunk_bytes(&p));
}

/* Decode the first `rows` rows of fetched chunk c with ctx (rows: the
 * chunk's height, or cf_codec_stop_rows of it): *out is the context's
 * buffer, or src for uncompressed host-order chunks (whole, not decoded). */
static cf_status decode_rows(cf_cog *cog, cf_codec_ctx *ctx, const cf_chunk *c,
                             const uint8_t *src, uint32_t rows, const uint8_t **out,
                             cf_error *err) {
    cf_codec_params p;
    cf__cog_chunk_params(cog, c, &p);
    size_t len = (size_t)cf_codec_chunk_bytes(&p);
    if (!len)
        return cf__err(err, CF_E_LIMIT, "%s: tile %u,%u too large", cog->name,
                       c->cx, c->cy);
    if (raw_usable(&p, c->len, len)) {
        /* Uncompressed in host order: pasted from the fetched bytes. */
        *out = src;
        return CF_OK;
    }
    /* Every chunk of an IFD fits a full-height tile: the context's
     * buffer is sized for that, reused read after read (no fresh pages). */
    cf_codec_params p0 = p;
    p0.height = cog->tiff->ifds[c->ifd].chunk_h;
    uint64_t tile_bytes = cf_codec_chunk_bytes(&p0);
    if (!tile_bytes || tile_bytes < len)
        return cf__err(err, CF_E_LIMIT, "%s: tile of %ux%u x %u samples too large",
                       cog->name, p0.width, p0.height, p0.samples);
    if (!ctx) return cf__err(err, CF_E_NOMEM, "%s: no codec context", cog->name);
    uint8_t *tile = cf_codec_ctx_tile(ctx, (size_t)tile_bytes, err);
    if (!tile) {
        return cf__err_prefix(err, CF_E_NOMEM, "%s", cog->name);
    }
    cf_status st;
    if (rows < p.height) {
        size_t part = (size_t)rows * (len / p.height);
        st = cf_codec_decode_rows(ctx, &p, rows, src, (size_t)c->len, tile, part, err);
        if (st)
            cf__err_prefix(err, st, "%s: strip %llu of IFD %d (its first %u rows)", cog->name,
                           (unsigned long long)c->index, cog->tiff->ifds[c->ifd].index, rows);
        len = part;
    } else {
        st = cf__cog_decode(cog, ctx, c, &p, src, (size_t)c->len, tile, len, err);
    }
    if (!st) {
        *out = tile;
        atomic_fetch_add(&cog->n_decoded, 1);
        atomic_fetch_add(&cog->decoded_bytes, (uint64_t)len);
    }
    return st;
}

cf_status cf__cog_decode_chunk(cf_cog *cog, cf_codec_ctx *ctx, const cf_chunk *c,
                               const uint8_t *src, const uint8_t **out,
                               cf_error *err) {
    return decode_rows(cog, ctx, c, src, UINT32_MAX, out, err);
}

cf_status cf__cog_decode_paste(cf_cog *cog, cf_codec_ctx *ctx, const cf_chunk *c,
                               const uint8_t *src, int64_t x, int64_t y, uint32_t w,
                               uint32_t h, const int *bands, int nb, uint8_t *dst,
                               int expand_bits, cf_error *err) {
    const uint8_t *chunk = NULL;
    cf_status st = cf__cog_decode_chunk(cog, ctx, c, src, &chunk, err);
    if (!st) cf__cog_paste(cog, c, chunk, x, y, w, h, bands, nb, dst, expand_bits);
    return st;
}

void cf__cog_chunk_reqs(const cf_chunk *chunks, size_t n, uint8_t *buf,
                        cf_range_req *reqs) {
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        reqs[i].off = chunks[i].off;
        reqs[i].len = chunks[i].len;
        reqs[i].dst = buf + pos;
        pos += (size_t)chunks[i].len;
    }
}

void cf__cog_prefault(const cf_cog *cog, uint8_t *buf, size_t len) {
    /* Remote bodies are written by the one I/O loop thread: fault the
     * fresh pages in here, on the calling thread, so that the loop does
     * not pay every reader's page faults one after another (they were a
     * fifth of its time on uncompressed tiles). */
    if (cog->src && cf_src_is_remote(cog->src))
        for (size_t o = 0; o < len; o += 4096) buf[o] = 0;
}

/* How read_ifd takes one chunk of its window. */
typedef struct rd_chunk {
    cf__cc_found found;        /* CF__CC_NONE: fetched and decoded here,
                                  kept nowhere */
    void *h;                   /* the cache entry (claimed, or waited on) */
    uint32_t rows;             /* rows decoded (or held by the entry) */
    int fetch;                 /* fetched in the window's batch */
} rd_chunk;

/* Which rows of chunk c the window needs from its top (a strip: down to
 * the window's last row; a tile: all), and whether the window covers the
 * whole chunk (then no later window is likely to need it again: it is
 * not kept). */
static uint32_t rows_needed(const cf_tiff_ifd *ifd, const cf_chunk *c, const cf_codec_params *p,
                            int64_t x, int64_t y, uint32_t w, uint32_t h, int *covers) {
    cf__rect r;
    *covers = 0;
    if (!cf__plan_chunk_rect(ifd, c, x, y, w, h, &r)) return p->height;
    int64_t px0 = (int64_t)c->cx * ifd->chunk_w, py0 = (int64_t)c->cy * ifd->chunk_h;
    int64_t px1 = px0 + ifd->chunk_w, py1 = py0 + p->height;
    if (px1 > (int64_t)ifd->width) px1 = ifd->width;
    *covers = r.x0 == px0 && r.y0 == py0 && r.x1 == px1 && r.y1 == py1;
    if (ifd->tiled) return p->height;
    return (uint32_t)(r.y1 - py0);
}

/* Fetch chunks[i] alone and decode its first rows into ctx's buffer
 * (a chunk whose claimer gave it up). */
static cf_status fetch_one(cf_cog *cog, cf_codec_ctx *ctx, const cf_chunk *c, uint32_t rows,
                           uint8_t **buf, const uint8_t **out, cf_error *err) {
    const uint8_t *src = cog->mem ? cog->mem + c->off : NULL;
    *buf = NULL;
    if (!src) {
        *buf = cf__malloc((size_t)c->len);
        if (!*buf) return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
        cf_range_req rq = {.off = c->off, .len = c->len, .dst = *buf, .err = err};
        cf_status st = cf_src_read(cog->src, &rq, 1, err);
        if (st) return cf__cog_fetch_failed(cog, st, err);
        src = *buf;
    }
    return decode_rows(cog, ctx, c, src, rows, out, err);
}

/* Read a window of IFD `ifdi` (an image level or a mask).
 *
 * Chunks the window needs only part of go through the io's cache of
 * decoded chunks (cf__io_read_cache): found there, they are pasted
 * without a fetch; claimed, they are fetched, decoded, kept and pasted;
 * pending in another reader's hands, they are waited for once this
 * reader's own claims are published (chunk_cache.h's order, so no two
 * readers wait on each other).  A strip whose codec can stop early is
 * decoded only down to the window's last row when that is at most half
 * of it (cf_codec_decode_rows), and kept with that row count. */
static cf_status read_ifd(cf_cog *cog, int ifdi, int64_t x, int64_t y,
                          uint32_t w, uint32_t h, const int *bands, int nb,
                          uint8_t *dst, int expand_bits, const uint8_t fill[CF__FILL_MAX],
                          cf_error *err) {
    cf_chunk *chunks = NULL;
    size_t nreq = 0;
    uint64_t total = 0;
    cf_status st = cf__cog_window_chunks(cog, ifdi, x, y, w, h, bands, nb, dst, fill,
                                         &chunks, &nreq, &total, err);
    if (st || !nreq) {
        free(chunks);
        return st;
    }
    const cf_tiff_ifd *ifd = &cog->tiff->ifds[ifdi];
    cf__ccache *cc = cog->src ? cf__io_read_cache(cog->io) : NULL;
    rd_chunk *rc = cf__calloc(nreq, sizeof *rc);
    cf_chunk *fc = cf__calloc(nreq, sizeof *fc); /* the ones fetched */
    cf_range_req *reqs = NULL; /* files only: in-memory chunks need none */
    uint8_t *fetched = NULL;
    void *gate = NULL; /* decode gate token (remote) */
    cf_codec_ctx *ctx = NULL;
    size_t nf = 0;
    uint64_t ftotal = 0;
    if (!rc || !fc) {
        free(rc);
        free(fc);
        free(chunks);
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
    }

    /* Plan each chunk: rows to decode, and what the cache holds of it. */
    for (size_t i = 0; i < nreq; i++) {
        const cf_chunk *c = &chunks[i];
        cf_codec_params p;
        cf__cog_chunk_params(cog, c, &p);
        int covers;
        uint32_t need = rows_needed(ifd, c, &p, x, y, w, h, &covers);
        size_t len = (size_t)cf_codec_chunk_bytes(&p);
        /* Uncompressed host-order chunks are their own decoded form: kept
         * as fetched, and a strip's first rows are fetched alone. */
        int raw = len && raw_usable(&p, c->len, len);
        rc[i].rows = p.height;
        if (len && !ifd->tiled && need * 2 <= p.height && cf_codec_can_stop(&p))
            rc[i].rows = cf_codec_stop_rows(&p, need);
        rc[i].found = CF__CC_NONE;
        if (cc && len && !covers) {
            const uint8_t *d = NULL;
            rc[i].found = cf__cc_claim_rows(cc, cog, c, len / p.height, need, p.height,
                                            &rc[i].rows, &d, &rc[i].h);
            if (rc[i].found == CF__CC_HIT) {
                atomic_fetch_add(&cog->cache_hits, 1);
                cf__cog_paste(cog, c, d, x, y, w, h, bands, nb, dst, expand_bits);
                cf__cc_put(cc, rc[i].h);
                rc[i].h = NULL;
                continue;
            }
            if (rc[i].found != CF__CC_WAIT) atomic_fetch_add(&cog->cache_misses, 1);
        }
        if (rc[i].found == CF__CC_WAIT) continue;
        rc[i].fetch = 1;
        fc[nf] = *c;
        if (raw && rc[i].rows < p.height) fc[nf].len = (uint64_t)rc[i].rows * (len / p.height);
        ftotal += fc[nf++].len;
    }

    /* Fetch every chunk not found in one batch (merged and in flight
     * together). */
    if (cog->src && nf) {
        reqs = cf__calloc(nf, sizeof *reqs);
        fetched = cf__malloc((size_t)ftotal);
        if (!reqs || !fetched) {
            st = cf__err(err, CF_E_NOMEM, "%s: out of memory (%llu bytes)", cog->name,
                         (unsigned long long)ftotal);
            goto done;
        }
        cf__cog_chunk_reqs(fc, nf, fetched, reqs);
        cf__cog_prefault(cog, fetched, (size_t)ftotal);
        st = cf_src_read(cog->src, reqs, nf, err);
        if (st) {
            st = cf__cog_fetch_failed(cog, st, err);
            goto done;
        }
    }
    /* Remote: at most one decoder per CPU, see cf_io_decode_enter. */
    if (cog->src && cf_src_is_remote(cog->src)) gate = cf_io_decode_enter(cf_src_io(cog->src));
    ctx = cf__cog_ctx_get(cog);
    if (!ctx) {
        st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
        goto done;
    }
    for (size_t i = 0, k = 0; i < nreq && !st; i++) {
        if (!rc[i].fetch) continue;
        const uint8_t *src = reqs ? reqs[k].dst : cog->mem + chunks[i].off;
        k++;
        const uint8_t *d = NULL;
        st = decode_rows(cog, ctx, &chunks[i], src, rc[i].rows, &d, err);
        if (st) break;
        if (rc[i].found == CF__CC_CLAIMED) {
            cf__cc_publish(cc, rc[i].h, d);
            rc[i].h = NULL;
        }
        cf__cog_paste(cog, &chunks[i], d, x, y, w, h, bands, nb, dst, expand_bits);
    }
done:
    /* Claims not published (an error before or during the decodes): their
     * waiters fetch them themselves. */
    for (size_t i = 0; i < nreq; i++)
        if (rc[i].found == CF__CC_CLAIMED && rc[i].h) {
            cf__cc_abandon(cc, rc[i].h);
            rc[i].h = NULL;
        }
    cf_io_decode_leave(gate);
    gate = NULL;
    free(fetched);
    free(reqs);
    /* Chunks other readers claimed: waited for now that this reader's own
     * are settled. */
    for (size_t i = 0; i < nreq; i++) {
        if (rc[i].found != CF__CC_WAIT) continue;
        const uint8_t *d = st ? NULL : cf__cc_wait(cc, rc[i].h);
        if (d) {
            atomic_fetch_add(&cog->cache_hits, 1);
            cf__cog_paste(cog, &chunks[i], d, x, y, w, h, bands, nb, dst, expand_bits);
        } else if (!st) {
            /* its claimer gave it up: fetch it here */
            atomic_fetch_add(&cog->cache_misses, 1);
            if (!ctx && !(ctx = cf__cog_ctx_get(cog)))
                st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
            uint8_t *buf = NULL;
            if (!st) st = fetch_one(cog, ctx, &chunks[i], rc[i].rows, &buf, &d, err);
            if (!st) cf__cog_paste(cog, &chunks[i], d, x, y, w, h, bands, nb, dst, expand_bits);
            free(buf);
        }
        cf__cc_put(cc, rc[i].h);
    }
    cf__cog_ctx_put(cog, ctx);
    if (!st)
        atomic_fetch_add(&cog->delivered_bytes,
                         (uint64_t)w * h * (uint64_t)nb * out_bps(cog, ifdi));
    free(fc);
    free(rc);
    free(chunks);
    return st;
}

static cf_status check_window(const cf_cog *cog, int level, uint32_t w,
                              uint32_t h, int64_t x, int64_t y, cf_error *err) {
    cf_status st = cf__cog_check_level(cog, level, err);
    if (st != CF_OK) return st;
    if (w == 0 || h == 0 || w > CF_MAX_DIMENSION || h > CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "%s: window size %ux%u invalid", cog->name, w, h);
    if (x < -(int64_t)CF_MAX_DIMENSION || y < -(int64_t)CF_MAX_DIMENSION ||
        x > 2 * (int64_t)CF_MAX_DIMENSION || y > 2 * (int64_t)CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "%s: window origin (%lld, %lld) out of range",
                       cog->name, (long long)x, (long long)y);
    return CF_OK;
}

cf_status cf__cog_prepare_read(const cf_cog *cog, int level, int64_t x, int64_t y,
                               uint32_t w, uint32_t h, const int *bands, int nbands,
                               size_t dst_size, int *all, int *nb_out, int *ifdi_out,
                               uint8_t fill[CF__FILL_MAX], cf_error *err) {
    cf_status st = check_window(cog, level, w, h, x, y, err);
    if (st) return st;
    int ifdi = cog->tiff->levels[level];
    int count = (int)cf__cog_bands(cog);
    int nb = bands ? nbands : count;
    if (nb <= 0 || nb > CF_MAX_BANDS)
        return cf__err(err, CF_E_ARG, "%s: %d bands requested", cog->name, nb);
    for (int k = 0; k < nb; k++) {
        int b = bands ? bands[k] : k + 1;
        if (b < 1 || b > count)
            return cf__err(err, CF_E_ARG, "%s: band %d does not exist (file has %d)",
                           cog->name, b, count);
        all[k] = b - 1;
    }
    size_t need = (size_t)w * h * (size_t)nb * cf_dtype_size(cog->dtype);
    if (dst_size < need)
        return cf__err(err, CF_E_ARG, "%s: buffer of %zu bytes, window needs %zu",
                       cog->name, dst_size, need);
    cf__cog_fill_value(cog, fill);
    *nb_out = nb;
    *ifdi_out = ifdi;
    return CF_OK;
}

cf_status cf_cog_read(cf_cog *cog, int level, int64_t x, int64_t y, uint32_t w,
                      uint32_t h, const int *bands, int nbands, void *dst,
                      size_t dst_size, cf_error *err) {
    if (!cog || !dst) return cf__err(err, CF_E_ARG, "cf_cog_read: NULL argument");
    int all[CF_MAX_BANDS], nb, ifdi;
    uint8_t fill[CF__FILL_MAX];
    cf_status st = cf__cog_prepare_read(cog, level, x, y, w, h, bands, nbands, dst_size,
                                        all, &nb, &ifdi, fill, err);
    if (st) return st;
    return read_ifd(cog, ifdi, x, y, w, h, all, nb, dst, 1, fill, err);
}

cf_status cf_cog_read_mask(cf_cog *cog, int level, int64_t x, int64_t y,
                           uint32_t w, uint32_t h, uint8_t *dst,
                           size_t dst_size, cf_error *err) {
    if (!cog || !dst) return cf__err(err, CF_E_ARG, "cf_cog_read_mask: NULL argument");
    cf_status st = check_window(cog, level, w, h, x, y, err);
    if (st) return st;
    int mi = cog->tiff->mask_of_level[level];
    if (mi < 0)
        return cf__err(err, CF_E_STATE, "%s: no internal mask at level %d", cog->name,
                       level);
    if (dst_size < (size_t)w * h)
        return cf__err(err, CF_E_ARG, "%s: mask buffer too small", cog->name);
    const cf_tiff_ifd *m = &cog->tiff->ifds[mi];
    if (m->bits != 1 && m->bits != 8)
        return cf__err(err, CF_E_UNSUPPORTED, "%s: mask with %u bits per sample",
                       cog->name, m->bits);
    int band0 = 0;
    uint8_t fill[CF__FILL_MAX] = {0};
    return read_ifd(cog, mi, x, y, w, h, &band0, 1, dst, 255, fill, err);
}
