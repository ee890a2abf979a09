/*
 * writer.c - cf_writer: a tiled GeoTIFF written from tiles as they come,
 * finished as a COG in GDAL's layout.
 *
 * A COG puts every directory before any tile data and the overviews'
 * data before the full resolution's, so nothing of it can be placed until
 * the last tile is in.  Tiles are therefore encoded at once (the work that
 * costs) and appended to a spool file beside the output; close() then
 *  1. reads the full resolution back row of tiles by row of tiles and
 *     builds every overview level from it in one pass, each level halving
 *     the one above as its rows complete (memory: one row of tiles per
 *     level), appending the overview tiles to the spool (ov_pass.c: the
 *     decoding and encoding on a thread per CPU; the spool is sink.c's,
 *     a tile's encoders slot.c's);
 *  2. lays the file out (layout.c): header, the directories (full resolution, then
 *     each overview), then tile data from the smallest overview to the
 *     full resolution, row by row: classic TIFF, or BigTIFF when the file
 *     would pass 4 GiB;
 *  3. writes it under a temporary name, copying tile bytes from the spool,
 *     and renames it over the output, so that the output path never holds
 *     a partial file.
 *
 * An object in object storage (stream.c) has no spool and no rename:
 * level 0's tiles wait, encoded, in memory until their row and every row
 * above it are complete; then the row is decoded into the overviews'
 * rows (as step 1 does) and its tiles go to the stream, the overview
 * tiles too as they are made.  close() feeds what is left (tiles never
 * written are sparse), lays the header out as step 2 and sends it last.
 * The tile order and the encoders are the same, so the object is the
 * same bytes as the local file.
 *
 * State: OPEN until the first failure, then FAILED (every later call
 * returns that failure's status; close cleans up).  All calls hold the
 * writer's lock.
 */
#include "../codec/codec.h"
#include "../geo/geo.h"
#include "../io/io.h"
#include "write_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "writer_state.h"

void cf_writer_options_init(cf_writer_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->bands = 1;
    o->dtype = CF_DT_U8;
    o->tile_size = 512;
    o->compression = 8;
    o->overviews = -1;
    o->overview_resampling = CF_RS_AVERAGE;
    o->lerc_layer = 1;
}

cf_status cf__writer_options_copy(const cf_writer_options *in, cf_writer_options *out,
                                  cf_error *err) {
    if (!in || in->struct_size < offsetof(cf_writer_options, lerc_layer))
        return cf__err(err, CF_E_ARG, "writer: options not initialised (cf_writer_options_init)");
    cf_writer_options_init(out);
    memcpy(out, in, in->struct_size < sizeof *out ? in->struct_size : sizeof *out);
    out->struct_size = sizeof *out;
    return CF_OK;
}

static int is_float(cf_dtype d) { return d == CF_DT_F32 || d == CF_DT_F64; }

static uint16_t sample_format(cf_dtype d) {
    if (is_float(d)) return 3;
    return (d == CF_DT_I8 || d == CF_DT_I16 || d == CF_DT_I32 || d == CF_DT_I64) ? 2 : 1;
}


/* TIFF compression codes as GDAL's COMPRESS names them, for messages. */
static const char *comp_name(const cf_writer_options *o) {
    switch (o->compression) {
    case 1: return "NONE";
    case 8: return "DEFLATE";
    case 50000: return "ZSTD";
    case 7: return "JPEG";
    case 50001: return "WEBP";
    case 34887:
        return o->lerc_layer == 8 ? "LERC_DEFLATE" : o->lerc_layer == 50000 ? "LERC_ZSTD" : "LERC";
    default: return "?";
    }
}

/* The codec options against the compression, dtype and bands: every
 * combination GDAL would refuse or ignore is refused, naming the option. */
static cf_status check_codec(const cf_writer_options *o, cf_error *err) {
    const uint16_t c = o->compression;
    const int lerc = c == 34887, jpeg = c == 7, webp = c == 50001;
    const char *name = comp_name(o), *dt = cf_dtype_name(o->dtype);
    if (o->lerc_layer != 1 && o->lerc_layer != 8 && o->lerc_layer != 50000)
        return cf__err(err, CF_E_ARG,
                       "writer: lerc_layer %u (1 none, 8 DEFLATE, 50000 ZSTD)", o->lerc_layer);
    if (o->lerc_layer != 1 && !lerc)
        return cf__err(err, CF_E_ARG, "writer: lerc_layer is for compression LERC (34887), "
                       "not %s", name);
    if (!(o->max_error >= 0 && o->max_error < HUGE_VAL))
        return cf__err(err, CF_E_ARG, "writer: max_error %g is not a finite value >= 0",
                       o->max_error);
    if (o->max_error > 0 && !lerc)
        return cf__err(err, CF_E_ARG, "writer: max_error is for LERC; %s %s", name,
                       jpeg || webp ? "takes quality" : "is lossless");
    if (o->quality < 0 || o->quality > 100)
        return cf__err(err, CF_E_ARG, "writer: quality %d not in 1..100 (0: 75)", o->quality);
    if (o->quality && !jpeg && !webp)
        return cf__err(err, CF_E_ARG, "writer: quality is for JPEG and WEBP, not %s%s", name,
                       lerc ? " (LERC takes max_error)" : "");
    if (o->lossless != 0 && o->lossless != 1)
        return cf__err(err, CF_E_ARG, "writer: lossless %d (0 or 1)", o->lossless);
    if (o->lossless && !webp)
        return cf__err(err, CF_E_ARG, "writer: lossless is for WEBP; %s %s", name,
                       jpeg ? "is always lossy" : lerc ? "is lossless at max_error 0"
                                                   : "is lossless");
    if (o->level && (jpeg || webp || (lerc && o->lerc_layer == 1)))
        return cf__err(err, CF_E_ARG, "writer: level is for DEFLATE, ZSTD and LERC's layer, "
                       "not %s%s", name, jpeg || webp ? " (it takes quality)" : "");
    if ((lerc || jpeg || webp) && o->predictor > 1)
        return cf__err(err, CF_E_ARG, "writer: predictor %d with %s (libtiff applies none to it)",
                       o->predictor, name);
    if (lerc && (o->dtype == CF_DT_U64 || o->dtype == CF_DT_I64))
        return cf__err(err, CF_E_UNSUPPORTED,
                       "writer: %s takes 8-, 16- and 32-bit integers and floats, not dtype %s",
                       name, dt);
    if ((jpeg || webp) && o->dtype != CF_DT_U8)
        return cf__err(err, CF_E_UNSUPPORTED, "writer: %s takes dtype uint8, not %s", name, dt);
    if (jpeg && o->bands != 1 && o->bands != 3)
        return cf__err(err, CF_E_UNSUPPORTED, "writer: JPEG takes 1 or 3 bands, not %u",
                       o->bands);
    if (webp && o->bands != 3 && o->bands != 4)
        return cf__err(err, CF_E_UNSUPPORTED, "writer: WEBP takes 3 or 4 bands, not %u",
                       o->bands);
    const uint16_t ph = o->photometric;
    if (ph != 0 && ph != 1 && ph != 2 && ph != 6)
        return cf__err(err, CF_E_ARG, "writer: photometric %u (0 auto, 1 MinIsBlack, 2 RGB, "
                       "6 YCbCr)", ph);
    if (ph == 2 && o->bands < 3)
        return cf__err(err, CF_E_ARG, "writer: photometric RGB (2) needs 3 bands or more, "
                       "not %u", o->bands);
    if (ph == 6 && !(jpeg && o->bands == 3))
        return cf__err(err, CF_E_ARG, "writer: photometric YCbCr (6) is written for JPEG of 3 "
                       "bands only, not %s of %u", name, o->bands);
    if (ph == 1 && webp)
        return cf__err(err, CF_E_ARG, "writer: photometric MinIsBlack (1) with WEBP (it "
                       "stores RGB or RGBA)");
    return CF_OK;
}

static cf_status check_options(const cf_writer_options *o, cf_error *err) {
    if (!o->width || !o->height || o->width > CF_MAX_DIMENSION || o->height > CF_MAX_DIMENSION)
        return cf__err(err, CF_E_ARG, "writer: size %ux%u not in 1..%u", o->width, o->height,
                       CF_MAX_DIMENSION);
    if (!o->bands || o->bands > 65535)
        return cf__err(err, CF_E_ARG, "writer: %u bands not in 1..65535", o->bands);
    if (o->dtype < CF_DT_U8 || o->dtype > CF_DT_F64)
        return cf__err(err, CF_E_ARG, "writer: data type %d not in U8..F64", (int)o->dtype);
    if (o->tile_size < 16 || o->tile_size > 4096 || o->tile_size % 16)
        return cf__err(err, CF_E_ARG, "writer: tile size %u not a multiple of 16 in 16..4096",
                       o->tile_size);
    if (!cf__codec_can_encode(o->compression))
        return cf__err(err, CF_E_UNSUPPORTED,
                       "writer: compression %u (NONE 1, DEFLATE 8, ZSTD 50000, and in builds "
                       "with their libraries LERC 34887, JPEG 7, WEBP 50001 are written; "
                       "this build writes%s%s%s%s)",
                       o->compression, " NONE DEFLATE ZSTD",
                       cf__codec_can_encode(34887) ? " LERC" : "",
                       cf__codec_can_encode(7) ? " JPEG" : "",
                       cf__codec_can_encode(50001) ? " WEBP" : "");
    if (o->predictor < 0 || o->predictor > 3)
        return cf__err(err, CF_E_ARG, "writer: predictor %d not in 0..3", o->predictor);
    if (o->predictor == 3 && !is_float(o->dtype))
        return cf__err(err, CF_E_ARG, "writer: predictor 3 is for floating-point samples");
    if (o->predictor > 1 && o->compression == 1)
        return cf__err(err, CF_E_ARG, "writer: a predictor needs a compression");
    if (o->threads < 0)
        return cf__err(err, CF_E_ARG, "writer: threads %d (0: one per CPU, or at least 1)",
                       o->threads);
    if (o->overviews_given != 0 && o->overviews_given != 1)
        return cf__err(err, CF_E_ARG, "writer: overviews_given %d (0 or 1)", o->overviews_given);
    if (o->share_rows && o->overviews_given)
        return cf__err(err, CF_E_ARG, "writer: a share writer makes its overviews "
                       "(overviews_given is for the writer that assembles the shares)");
    if (o->share_rows && o->mask && o->overview_resampling == CF_RS_NEAREST)
        return cf__err(err, CF_E_UNSUPPORTED, "writer: a share writer with a mask makes "
                       "average or mode overviews (nearest takes the mask's from the full "
                       "resolution, which the shares do not pass on)");
    if (o->overviews < -1 || o->overviews > CF__WRITER_MAX_LEVELS - 1)
        return cf__err(err, CF_E_ARG, "writer: overviews %d not in -1..%d", o->overviews,
                       CF__WRITER_MAX_LEVELS - 1);
    if (o->overview_resampling != CF_RS_AVERAGE && o->overview_resampling != CF_RS_NEAREST &&
        o->overview_resampling != CF_RS_MODE)
        return cf__err(err, CF_E_ARG, "writer: overviews by %s (average, nearest or mode)",
                       cf_resampling_name(o->overview_resampling));
    if (o->level < 0 || o->level > 22)
        return cf__err(err, CF_E_ARG, "writer: level %d not in 0..22", o->level);
    if (o->mask != 0 && o->mask != 1)
        return cf__err(err, CF_E_ARG, "writer: mask %d: 0 or 1", o->mask);
    CF__TRY(check_codec(o, err));
    if (o->has_nodata && !is_float(o->dtype)) {
        /* the value must be one of the type's: GDAL_NODATA, the padding
         * and the overviews' empty windows all hold it */
        double lo = 0, hi = 0;
        switch (o->dtype) {
        case CF_DT_U8: hi = 255; break;
        case CF_DT_I8: lo = -128, hi = 127; break;
        case CF_DT_U16: hi = 65535; break;
        case CF_DT_I16: lo = -32768, hi = 32767; break;
        case CF_DT_U32: hi = 4294967295.0; break;
        case CF_DT_I32: lo = -2147483648.0, hi = 2147483647.0; break;
        case CF_DT_U64: hi = 18446744073709549568.0; break;
        default: lo = -9223372036854775808.0, hi = 9223372036854774784.0;
        }
        if (!(o->nodata >= lo && o->nodata <= hi) || o->nodata != floor(o->nodata))
            return cf__err(err, CF_E_ARG, "writer: nodata %g is not a %s value", o->nodata,
                           cf_dtype_name(o->dtype));
    }
    return CF_OK;
}

/* A file of ours at path: whatever was there removed first (a stale spool
 * of a crashed run, or a link planted to make us write elsewhere: unlink
 * removes the link, O_EXCL | O_NOFOLLOW then refuse to follow one). */
static int create_fresh(const char *path) {
    if (unlink(path) != 0 && errno != ENOENT) return -1;
    return open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

static void free_writer(cf_writer *w, int remove_spool) {
    if (w->ws) cf__wstream_abort(w->ws);
    if (w->pend)
        for (size_t i = 0; i < (size_t)w->lev[0].tx * w->lev[0].ty; i++) free(w->pend[i]);
    free(w->pend);
    free(w->have);
    free(w->row_have);
    free(w->band);
    free(w->mband);
    cf__w_overviews_free(w);
    cf__w_share_free(w);
    cf__codec_ctx_free(w->ctx);
    if (w->spool_fd >= 0) close(w->spool_fd);
    if (remove_spool && w->spool_path) unlink(w->spool_path);
    for (int l = 0; l < w->nlev; l++) {
        free(w->lev[l].off);
        free(w->lev[l].len);
        free(w->lev[l].moff);
        free(w->lev[l].mlen);
        free(w->lev[l].acc);
        free(w->lev[l].ring);
        free(w->lev[l].macc);
        free(w->lev[l].mring);
        free(w->lev[l].mnear);
        cf__ov_axis_free(&w->lev[l].n0x);
        cf__ov_axis_free(&w->lev[l].n0y);
        cf__ov_axis_free(&w->lev[l].ax);
        cf__ov_axis_free(&w->lev[l].ay);
    }
    if (w->desc)
        for (uint32_t b = 0; b < w->o.bands; b++) free(w->desc[b]);
    free(w->desc);
    free(w->gk);
    free(w->scales);
    free(w->offsets);
    free(w->path);
    free(w->spool_path);
    free(w->layout_hdr);
    cf__w_slot_free(&w->ov);
    cf__w_slots_free(w);
    pthread_cond_destroy(&w->slot_cv);
    pthread_cond_destroy(&w->idle_cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = cf__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* A URL as messages show it: no query, no userinfo. */
static char *redacted_dup(const char *url) {
    char b[CF__NAME_MAX];
    cf__redact_url(url, b, sizeof b);
    return dup_str(b);
}

/* The CRS as GeoKeys: an EPSG code, projected or geographic; else the
 * user-defined keys GDAL writes (geokeys_out.c). */
static cf_status take_grid(cf_writer *w, const cf_grid *g, cf_error *err) {
    if (!g) return CF_OK;
    for (int i = 0; i < 6; i++)
        if (!isfinite(g->transform[i]))
            return cf__err(err, CF_E_ARG, "writer: transform term %d is not finite", i);
    if (g->transform[1] == 0 || g->transform[5] == 0)
        return cf__err(err, CF_E_ARG, "writer: transform with a zero pixel size");
    memcpy(w->gt, g->transform, sizeof w->gt);
    w->has_gt = 1;
    if (!g->crs) return CF_OK;
    w->epsg = cf_crs_epsg(g->crs);
    cf_crs_kind k = cf_crs_kind_of(g->crs);
    w->geographic = k == CF_CRS_GEOGRAPHIC;
    if (w->epsg > 0 && (k == CF_CRS_GEOGRAPHIC || k == CF_CRS_PROJECTED)) return CF_OK;
    w->epsg = 0;
    w->gk = cf__malloc(sizeof *w->gk);
    if (!w->gk) return cf__err(err, CF_E_NOMEM, "writer: out of memory");
    CF__TRY(cf__crs_to_geokeys(g->crs, w->gk, err));
    if (w->gk->epsg > 0) { /* its horizontal part has a code */
        w->epsg = w->gk->epsg;
        w->geographic = w->gk->geographic;
        free(w->gk);
        w->gk = NULL;
    }
    return CF_OK;
}

/* An object: the stream, with each level's worst case (twice its raw
 * size: no codec here expands more) for its part numbers. */
static cf_status open_remote(cf_writer *w, const char *url, cf_error *err) {
    uint64_t bound[CF__WRITER_MAX_LEVELS];
    for (int l = 0; l < w->nlev; l++)
        bound[l] = (uint64_t)w->lev[l].tx * w->lev[l].ty *
                   (cf__w_tile_cap(w, 0) + cf__w_tile_cap(w, 1));
    size_t n = (size_t)w->lev[0].tx * w->lev[0].ty;
    w->pend = cf__calloc(n, sizeof *w->pend);
    w->have = cf__calloc(n, 1);
    w->row_have = cf__calloc(w->lev[0].ty, sizeof *w->row_have);
    if (!w->pend || !w->have || !w->row_have)
        return cf__err(err, CF_E_NOMEM, "writer: %s: out of memory (%zu tiles)", w->path, n);
    if (!w->o.overviews_given) CF__TRY(cf__w_init_overviews(w, err));
    return cf__wstream_new(w->o.io, url, w->path, w->o.part_size, w->nlev, bound, &w->ws,
                           err);
}

cf_status cf_writer_open(const char *path, const cf_writer_options *opt, cf_writer **out,
                         cf_error *err) {
    if (out) *out = NULL;
    if (!path || !*path || !out) return cf__err(err, CF_E_ARG, "writer: no path");
    const int remote = cf__url_is_remote(path); /* an object: stream.c */
    cf_writer_options oo;
    CF__TRY(cf__writer_options_copy(opt, &oo, err));
    CF__TRY(check_options(&oo, err));
    cf_writer *w = cf__calloc(1, sizeof *w);
    if (!w) return cf__err(err, CF_E_NOMEM, "writer: out of memory");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->slot_cv, NULL);
    pthread_cond_init(&w->idle_cv, NULL);
    w->spool_fd = -1;
    w->o = oo;
    opt = &w->o; /* what follows reads the copy: the caller's may be older */
    const char *const *opt_desc = oo.descriptions;
    const double *opt_scales = oo.scales, *opt_offsets = oo.offsets;
    const cf_grid *opt_grid = oo.grid;
    w->o.grid = NULL;
    w->o.descriptions = NULL;
    w->o.scales = w->o.offsets = NULL;
    cf_status st = take_grid(w, opt_grid, err);
    const uint32_t nb = opt->bands;
    if (!st && opt_desc) {
        w->desc = cf__calloc(nb, sizeof *w->desc);
        for (uint32_t b = 0; w->desc && b < nb && !st; b++)
            if (opt_desc[b] && !(w->desc[b] = dup_str(opt_desc[b])))
                st = cf__err(err, CF_E_NOMEM, "writer: out of memory");
        if (!w->desc) st = cf__err(err, CF_E_NOMEM, "writer: out of memory");
    }
    if (!st && (opt_scales || opt_offsets)) {
        w->scales = cf__malloc(nb * sizeof(double));
        w->offsets = cf__malloc(nb * sizeof(double));
        if (!w->scales || !w->offsets) st = cf__err(err, CF_E_NOMEM, "writer: out of memory");
        for (uint32_t b = 0; !st && b < nb; b++) {
            w->scales[b] = opt_scales ? opt_scales[b] : 1.0;
            w->offsets[b] = opt_offsets ? opt_offsets[b] : 0.0;
        }
    }
    w->es = cf_dtype_size(opt->dtype);
    w->px = w->es * nb;
    /* Levels: GDAL's COG driver halves until the level fits one tile. */
    uint32_t lw = opt->width, lh = opt->height;
    for (w->nlev = 0; !st && w->nlev < CF__WRITER_MAX_LEVELS; w->nlev++) {
        w_level *L = &w->lev[w->nlev];
        L->w = lw;
        L->h = lh;
        L->tx = (lw + opt->tile_size - 1) / opt->tile_size;
        L->ty = (lh + opt->tile_size - 1) / opt->tile_size;
        size_t n = (size_t)L->tx * L->ty;
        L->off = cf__calloc(n, sizeof *L->off);
        L->len = cf__calloc(n, sizeof *L->len);
        if (opt->mask) {
            L->moff = cf__calloc(n, sizeof *L->moff);
            L->mlen = cf__calloc(n, sizeof *L->mlen);
        }
        if (!L->off || !L->len || (opt->mask && (!L->moff || !L->mlen))) {
            w->nlev++;
            st = cf__err(err, CF_E_NOMEM, "writer: out of memory (%zu tiles)", n);
            break;
        }
        int more = opt->overviews < 0 ? (lw > opt->tile_size || lh > opt->tile_size)
                                      : w->nlev < opt->overviews;
        if (!more || (lw == 1 && lh == 1)) {
            w->nlev++;
            break;
        }
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    if (!st) {
        cf__codec_params *p = &w->p;
        memset(p, 0, sizeof *p);
        p->compression = opt->compression;
        p->bits = (uint16_t)(8 * w->es);
        p->sample_format = sample_format(opt->dtype);
        const uint16_t c = opt->compression;
        const int bytewise = c == 8 || c == 50000; /* the predictor's codecs */
        p->photometric = opt->photometric ? opt->photometric
                         : c == 7 && nb == 3 ? 6
                         : c == 50001 ? 2 : 1;
        if (p->photometric == 6) p->ycbcr_sub_h = p->ycbcr_sub_v = 2; /* GDAL's */
        p->lerc_sub = opt->lerc_layer == 8 ? 1 : opt->lerc_layer == 50000 ? 2 : 0;
        p->width = p->height = opt->tile_size;
        p->samples = nb;
        p->predictor = (uint16_t)(opt->predictor ? opt->predictor
                                  : !bytewise ? 1
                                  : is_float(opt->dtype) ? 3 : 2);
        w->eo.level = opt->level;
        w->eo.max_error = opt->max_error;
        w->eo.lossless = opt->lossless || (c == 50001 && opt->quality == 100);
        w->eo.quality = opt->quality;
        w->tile_bytes = (size_t)cf__codec_chunk_bytes(p);
        if (opt->mask) { /* GDAL's: 1 bit, DEFLATE, transparency mask */
            cf__codec_params *m = &w->mp;
            memset(m, 0, sizeof *m);
            m->compression = 8;
            m->bits = 1;
            m->sample_format = 1;
            m->photometric = 4;
            m->width = m->height = opt->tile_size;
            m->samples = 1;
            m->predictor = 1;
            w->mtile_bytes = (size_t)cf__codec_chunk_bytes(m);
        }
        st = cf__w_slot_make(w, &w->ov);
        /* Slots: one per CPU this process may use (at most `threads`),
         * within the budget. */
        w->maxslots = cf__write_threads(w->o.threads,
                                        3 * (w->tile_bytes + w->mtile_bytes) + 1,
                                        CF__WRITER_SLOTS);
        w->path = remote ? redacted_dup(path) : dup_str(path);
        size_t n = strlen(path) + 32;
        const int spool = !remote && !opt->layout_only; /* a layout writer has none */
        w->spool_path = spool ? cf__malloc(n) : NULL;
        if (st || !w->path || (spool && !w->spool_path))
            st = cf__err(err, CF_E_NOMEM, "writer: out of memory (a tile of %zu bytes)",
                         w->tile_bytes);
        else if (spool) snprintf(w->spool_path, n, "%s.cogfeed-spool", path);
    }
    if (!st && opt->share_rows) {
        const uint32_t rows = w->lev[0].ty;
        if (remote)
            st = cf__err(err, CF_E_ARG, "writer: %s: a share writer writes a local file (its "
                         "process's part, whose tiles the assembling writer takes)", w->path);
        else if (opt->share_row0 >= rows || opt->share_rows > rows - opt->share_row0)
            st = cf__err(err, CF_E_ARG, "writer: share of rows of tiles %u to %u outside the "
                         "image's %u", opt->share_row0, opt->share_row0 + opt->share_rows - 1,
                         rows);
        else w->share = SH_TILES;
    }
    if (!st && opt->layout_only && (!opt->overviews_given || opt->share_rows))
        st = cf__err(err, CF_E_ARG, "writer: %s: a layout writer (layout_only) is one with "
                     "overviews_given, not a share writer", w->path);
    if (st || opt->layout_only) {
        /* nothing to open: a layout writer writes nothing */
    } else if (remote) {
        st = open_remote(w, path, err);
    } else {
        w->spool_fd = create_fresh(w->spool_path);
        if (w->spool_fd < 0)
            st = cf__err(err, CF_E_IO, "writer: cannot create %s: %s", w->spool_path,
                         strerror(errno));
    }
    if (st) {
        free_writer(w, w->spool_fd >= 0);
        return st;
    }
    *out = w;
    return CF_OK;
}

void cf_writer_tiles(const cf_writer *w, uint32_t *tx, uint32_t *ty) {
    if (tx) *tx = w ? w->lev[0].tx : 0;
    if (ty) *ty = w ? w->lev[0].ty : 0;
}


/* The writer open and (tx, ty) a full-resolution tile of it. */
static cf_status check_tile(const cf_writer *w, uint32_t tx, uint32_t ty, cf_error *err) {
    const w_level *L = &w->lev[0];
    CF__TRY(cf__w_check_open(w, err));
    if (tx >= L->tx || ty >= L->ty)
        return cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u outside %ux%u tiles", w->path,
                       tx, ty, L->tx, L->ty);
    if (w->share && (ty < w->o.share_row0 || ty - w->o.share_row0 >= w->o.share_rows))
        return cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u outside the share (rows of "
                       "tiles %u to %u)", w->path, tx, ty, w->o.share_row0,
                       w->o.share_row0 + w->o.share_rows - 1);
    if (w->share > SH_TILES)
        return cf__err(err, CF_E_STATE, "writer: %s: tile %u,%u after cf_writer_share_build",
                       w->path, tx, ty);
    return CF_OK;
}

/* An object: tile i of level 0, in row ty, is there (written or to stay
 * sparse); then every row complete with those above it is sent. */
static cf_status have_tile(cf_writer *w, uint32_t ty, size_t i, cf_error *err) {
    const w_level *L = &w->lev[0];
    if (!w->have[i]) w->row_have[ty]++;
    w->have[i] = 1;
    cf_status st = CF_OK;
    while (!st && w->next_row < L->ty && w->row_have[w->next_row] == L->tx)
        st = cf__w_feed_row0(w, w->next_row++, err);
    return st;
}

/* n samples of es bytes from s into d, px bytes apart: copies of a
 * constant size, which the compiler turns into moves (a memcpy call per
 * sample took a fifth of a JPEG tile's time). */
static void interleave(uint8_t *d, size_t px, const uint8_t *s, uint32_t n, size_t es) {
#define IL(E)                                                                                  \
    for (uint32_t x = 0; x < n; x++) memcpy(d + x * px, s + (size_t)x * (E), (E));             \
    return;
    switch (es) {
    case 1: IL(1)
    case 2: IL(2)
    case 4: IL(4)
    case 8: IL(8)
    default: IL(es)
    }
#undef IL
}

/* A free slot (w->mu held): one made when all are busy and fewer than
 * maxslots exist, else the wait for one.  NULL: out of memory. */
static w_slot *take_slot(cf_writer *w) {
    for (;;) {
        for (int k = 0; k < w->nslots; k++)
            if (!w->slots[k].busy) {
                w->slots[k].busy = 1;
                return &w->slots[k];
            }
        if (w->nslots < w->maxslots) {
            w_slot *s = &w->slots[w->nslots];
            if (cf__w_slot_make(w, s)) return NULL;
            w->nslots++;
            s->busy = 1;
            return s;
        }
        pthread_cond_wait(&w->slot_cv, &w->mu);
    }
}

static void give_slot(cf_writer *w, w_slot *s) {
    s->busy = 0;
    pthread_cond_signal(&w->slot_cv);
    if (--w->inflight == 0) pthread_cond_broadcast(&w->idle_cv);
}

/* The checks of a tile about to be written (w->mu held): the writer open,
 * the tile inside it, and for an object its row not sent yet. */
static cf_status check_write(cf_writer *w, uint32_t tx, uint32_t ty, cf_error *err) {
    CF__TRY(check_tile(w, tx, ty, err));
    if (w->ws && ty < w->next_row)
        return cf__err(err, CF_E_STATE, "writer: %s: tile %u,%u: its row of tiles is uploaded "
                       "already (writing to object storage, a tile is final once the rows "
                       "above it and its own are complete)", w->path, tx, ty);
    return CF_OK;
}

/* cf_writer_write_tile(_masked): mask NULL is all valid.  The tile is
 * interleaved and encoded in a slot of its own without the writer's lock
 * (the work that costs: tiles written from several threads are encoded
 * at once), then kept under it, checked again (an object's row may have
 * gone up meanwhile, if this tile was written before). */
static cf_status write_tile(cf_writer *w, uint32_t tx, uint32_t ty, const void *data,
                            size_t size, const uint8_t *mask, cf_error *err) {
    if (!w || !data) return cf__err(err, CF_E_ARG, "writer: NULL argument");
    pthread_mutex_lock(&w->mu);
    const w_level *L = &w->lev[0];
    const uint32_t T = w->o.tile_size;
    w_slot *sl = NULL;
    cf_status st = check_write(w, tx, ty, err);
    if (st) goto done;
    uint32_t tw = tx + 1 < L->tx ? T : L->w - tx * T;
    const uint32_t th = cf__w_tile_rows(L, ty, T);
    size_t want = (size_t)w->o.bands * tw * th * w->es;
    if (size != want) {
        st = cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u takes %u bands x %u x %u = %zu bytes, "
                     "not %zu", w->path, tx, ty, w->o.bands, th, tw, want, size);
        goto done;
    }
    if (!(sl = take_slot(w))) {
        st = cf__w_fail(w, cf__err(err, CF_E_NOMEM, "writer: %s: a tile's encoder", w->path));
        goto done;
    }
    w->inflight++;
    /* (take_slot may have waited: the writer may have failed meanwhile) */
    if ((st = check_write(w, tx, ty, err))) goto done;
    pthread_mutex_unlock(&w->mu);
    if (tw < T || th < T) cf__w_fill_px(w, sl->tile, (size_t)T * T);
    /* band-sequential in, pixel-interleaved out */
    const uint8_t *src = data;
    const size_t es = w->es, nb = w->o.bands;
    for (uint32_t b = 0; b < nb; b++)
        for (uint32_t y = 0; y < th; y++) {
            const uint8_t *s = src + ((size_t)b * th + y) * tw * es;
            uint8_t *d = sl->tile + ((size_t)y * T) * w->px + b * es;
            if (nb == 1) memcpy(d, s, (size_t)tw * es);
            else interleave(d, w->px, s, tw, es);
        }
    const uint8_t *enc = NULL, *menc = NULL;
    size_t n = 0, mn = 0;
    if (w->o.mask) cf__mask_pack(mask, tw, tw, th, T, sl->mtile);
    st = cf__w_encode_slot(w, sl, &enc, &n, &menc, &mn, err);
    if (st) cf__err_prefix(err, st, "writer: %s: tile %u,%u of level 0", w->path, tx, ty);
    pthread_mutex_lock(&w->mu);
    if (st) { /* the encoder's failure is the writer's */
        cf__w_fail(w, st);
        goto done;
    }
    st = check_write(w, tx, ty, err);
    if (st) goto done;
    const size_t i = (size_t)ty * L->tx + tx;
    st = cf__w_keep(w, 0, i, 0, enc, n, err);
    if (!st && w->o.mask) st = cf__w_keep(w, 0, i, 1, menc, mn, err);
    if (st) cf__err_prefix(err, st, "writer: %s: tile %u,%u of level 0", w->path, tx, ty);
    if (!st && w->ws) st = have_tile(w, ty, i, err);
    if (st) cf__w_fail(w, st);
done:
    if (sl) give_slot(w, sl);
    pthread_mutex_unlock(&w->mu);
    return st;
}

cf_status cf_writer_write_tile(cf_writer *w, uint32_t tx, uint32_t ty, const void *data,
                               size_t size, cf_error *err) {
    return write_tile(w, tx, ty, data, size, NULL, err);
}

cf_status cf_writer_write_tile_masked(cf_writer *w, uint32_t tx, uint32_t ty, const void *data,
                                      size_t size, const uint8_t *mask, cf_error *err) {
    if (w && !w->o.mask)
        return cf__err(err, CF_E_ARG, "writer: %s: a mask for tile %u,%u, but the writer was "
                       "opened without one (the `mask` option)", w->path, tx, ty);
    return write_tile(w, tx, ty, data, size, mask, err);
}

/* The encoded bytes of a tile from elsewhere (cf_writer_write_encoded_tile)
 * checked before they are kept: within the bound the stream's part
 * numbers assume, and decoded once with this writer's parameters when no
 * overview pass will decode them (that pass fails naming a bad tile). */
static cf_status check_encoded(cf_writer *w, uint32_t tx, uint32_t ty, const uint8_t *data,
                               size_t n, const uint8_t *mask, size_t mn, cf_error *err) {
    const size_t cap = (size_t)cf__w_tile_cap(w, 0), mcap = (size_t)cf__w_tile_cap(w, 1);
    if (n > cap || (w->o.mask && mn > mcap))
        return cf__err(err, CF_E_LIMIT, "writer: %s: tile %u,%u: %zu encoded bytes (mask %zu), "
                       "above the %zu (%zu) a tile of this writer's can take", w->path, tx, ty,
                       n, mn, cap, w->o.mask ? mcap : 0);
    if (!w->o.mask && mn)
        return cf__err(err, CF_E_ARG, "writer: %s: a mask for tile %u,%u, but the writer was "
                       "opened without one (the `mask` option)", w->path, tx, ty);
    if (w->o.mask && !mn)
        return cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u: no mask tile (the writer has a "
                       "mask: each tile comes with its mask's encoded bytes)", w->path, tx, ty);
    if (w->nlev > 1 || w->o.overviews_given) return CF_OK; /* (decoded there, or never) */
    if (!w->ctx && !(w->ctx = cf__codec_ctx_new()))
        return cf__err(err, CF_E_NOMEM, "writer: %s: a codec context", w->path);
    cf_status st = cf__codec_decode(w->ctx, &w->p, data, n, w->ov.tile, w->tile_bytes, err);
    if (!st && w->o.mask)
        st = cf__codec_decode(w->ctx, &w->mp, mask, mn, w->ov.mtile, w->mtile_bytes, err);
    if (st) return cf__err_prefix(err, st, "writer: %s: tile %u,%u, given encoded", w->path,
                                  tx, ty);
    return CF_OK;
}

cf_status cf_writer_write_encoded_tile(cf_writer *w, uint32_t tx, uint32_t ty,
                                       const void *data, size_t n, const void *mask, size_t mn,
                                       cf_error *err) {
    if (!w || (!data && n) || (!mask && mn))
        return cf__err(err, CF_E_ARG, "writer: NULL argument");
    pthread_mutex_lock(&w->mu);
    const w_level *L = &w->lev[0];
    const size_t i = (size_t)ty * L->tx + tx;
    cf_status st = check_write(w, tx, ty, err);
    if (st) goto done;
    if (!n) { /* sparse, as a tile never written */
        if (mn) {
            st = cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u: a mask for a sparse tile",
                         w->path, tx, ty);
            goto done;
        }
        if (w->ws) {
            free(w->pend[i]);
            w->pend[i] = NULL;
        }
        w->lev[0].len[i] = 0;
        if (w->o.mask) w->lev[0].mlen[i] = 0;
        if (w->ws && !w->have[i]) st = have_tile(w, ty, i, err);
    } else {
        st = check_encoded(w, tx, ty, data, n, mask, mn, err);
        if (st) goto done; /* refused: the writer goes on */
        st = cf__w_keep(w, 0, i, 0, data, n, err);
        if (!st && w->o.mask) st = cf__w_keep(w, 0, i, 1, mask, mn, err);
        if (!st && w->ws) st = have_tile(w, ty, i, err);
    }
    if (st) cf__w_fail(w, st);
done:
    pthread_mutex_unlock(&w->mu);
    return st;
}

/* An overview tile given encoded (overviews_given): kept as it is; an
 * object's in row order, as its level's bytes go up. */
static cf_status encoded_overview(cf_writer *w, int l, uint32_t tx, uint32_t ty,
                                  const void *data, size_t n, const void *mask, size_t mn,
                                  cf_error *err) {
    w_level *L = &w->lev[l];
    CF__TRY(cf__w_check_open(w, err));
    if (tx >= L->tx || ty >= L->ty)
        return cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u outside level %d's %ux%u tiles",
                       w->path, tx, ty, l, L->tx, L->ty);
    const size_t i = (size_t)ty * L->tx + tx;
    if (w->ws && i != L->next_out)
        return cf__err(err, CF_E_STATE, "writer: %s: tile %u,%u of level %d out of row order "
                       "(writing to object storage, a level's tiles go up as they come: tile "
                       "%u,%u is next)", w->path, tx, ty, l, (uint32_t)(L->next_out % L->tx),
                       (uint32_t)(L->next_out / L->tx));
    if (!n && mn)
        return cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u of level %d: a mask for a sparse "
                       "tile", w->path, tx, ty, l);
    cf_status st = n ? check_encoded(w, tx, ty, data, n, mask, mn, err) : CF_OK;
    if (st) return cf__err_prefix(err, st, "writer: %s: level %d", w->path, l);
    st = n ? cf__w_keep(w, l, i, 0, data, n, err) : CF_OK;
    if (!st && n && w->o.mask) st = cf__w_keep(w, l, i, 1, mask, mn, err);
    if (!n) {
        L->len[i] = 0;
        if (w->o.mask) L->mlen[i] = 0;
    }
    if (st) return cf__w_fail(w, st);
    if (w->ws) L->next_out++;
    return CF_OK;
}

cf_status cf_writer_write_encoded_tile_at(cf_writer *w, int level, uint32_t tx, uint32_t ty,
                                          const void *data, size_t n, const void *mask,
                                          size_t mn, cf_error *err) {
    if (!w || (!data && n) || (!mask && mn))
        return cf__err(err, CF_E_ARG, "writer: NULL argument");
    if (level == 0) return cf_writer_write_encoded_tile(w, tx, ty, data, n, mask, mn, err);
    if (level < 0 || level >= w->nlev)
        return cf__err(err, CF_E_ARG, "writer: %s: level %d of %d", w->path, level, w->nlev);
    if (!w->o.overviews_given)
        return cf__err(err, CF_E_ARG, "writer: %s: tile %u,%u of level %d: this writer makes "
                       "its overviews (open it with overviews_given to give them)", w->path,
                       tx, ty, level);
    pthread_mutex_lock(&w->mu);
    cf_status st = encoded_overview(w, level, tx, ty, data, n, mask, mn, err);
    pthread_mutex_unlock(&w->mu);
    return st;
}

int cf_writer_levels(const cf_writer *w) { return w ? w->nlev : 0; }

cf_status cf__writer_skip_tile(cf_writer *w, uint32_t tx, uint32_t ty, cf_error *err) {
    pthread_mutex_lock(&w->mu);
    const w_level *L = &w->lev[0];
    cf_status st = check_tile(w, tx, ty, err);
    if (!st && w->ws && ty >= w->next_row && !w->have[(size_t)ty * L->tx + tx]) {
        st = have_tile(w, ty, (size_t)ty * L->tx + tx, err);
        if (st) cf__w_fail(w, st);
    }
    pthread_mutex_unlock(&w->mu);
    return st;
}

/* ---- close: overviews ---- */

/* Write the file to `tmp`: the header, then the tiles from the spool in
 * the header's order. */
static cf_status write_file(cf_writer *w, int fd, const char *tmp, cf_error *err) {
    uint8_t *hdr;
    uint64_t head;
    CF__TRY(cf__writer_header(w, &hdr, &head, err));
    cf_status st = cf__w_pwrite(fd, hdr, (size_t)head, 0, tmp, err);
    free(hdr);
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint64_t at = head;
    for (int l = w->nlev - 1; !st && l >= 0; l--) {
        w_level *L = &w->lev[l];
        for (size_t i = 0; !st && i < (size_t)L->tx * L->ty; i++) {
            for (int m = 0; !st && m <= w->o.mask; m++) { /* each tile, then its mask */
                size_t n = (size_t)(m ? L->mlen : L->len)[i];
                if (!n) continue;
                if (n > cap) {
                    free(buf);
                    cap = n;
                    buf = cf__malloc(cap);
                    if (!buf) {
                        st = cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
                        break;
                    }
                }
                st = cf__w_pread(w->spool_fd, buf, n, (m ? L->moff : L->off)[i], w->spool_path,
                                 err);
                if (!st) st = cf__w_pwrite(fd, buf, n, at, tmp, err);
                at += n;
            }
        }
    }
    free(buf);
    return st;
}

/* An object: what is left of level 0 (rows after one never completed:
 * their missing tiles are sparse), then the header, sent last. */
static cf_status finish_remote(cf_writer *w, cf_error *err) {
    while (w->next_row < w->lev[0].ty) CF__TRY(cf__w_feed_row0(w, w->next_row++, err));
    uint8_t *hdr;
    uint64_t head;
    CF__TRY(cf__writer_header(w, &hdr, &head, err));
    cf_status st = cf__wstream_finish(w->ws, hdr, (size_t)head, err);
    w->ws = NULL; /* gone, made or aborted */
    free(hdr);
    return st;
}

cf_status cf_writer_close(cf_writer *w, cf_error *err) {
    if (!w) return cf__err(err, CF_E_ARG, "writer: NULL");
    pthread_mutex_lock(&w->mu);
    cf__w_wait_idle(w);
    cf_status st = CF_OK;
    if (w->state != W_OPEN)
        st = cf__err(err, CF_E_STATE, "writer: %s: an earlier call failed (%s); nothing written",
                     w->path, cf_status_name(w->fail));
    if (w->ws || w->o.layout_only) {
        if (!st && w->ws) st = finish_remote(w, err);
        pthread_mutex_unlock(&w->mu);
        free_writer(w, 0);
        return st;
    }
    /* No tile comes any more: the write slots' memory goes before the
     * overview pass's workers take theirs (one budget, not two). */
    cf__w_slots_free(w);
    if (!st && w->share) st = cf__w_share_close(w, err);
    else if (!st) st = cf__w_build_overviews(w, err);
    char *tmp = NULL;
    int fd = -1;
    if (!st) {
        size_t n = strlen(w->path) + 32;
        tmp = cf__malloc(n);
        if (!tmp) st = cf__err(err, CF_E_NOMEM, "writer: %s", w->path);
        else snprintf(tmp, n, "%s.cogfeed-tmp", w->path);
    }
    if (!st && (fd = create_fresh(tmp)) < 0)
        st = cf__err(err, CF_E_IO, "writer: cannot create %s: %s", tmp, strerror(errno));
    if (!st) st = write_file(w, fd, tmp, err);
    /* on disk before it takes the name: a crash never leaves a short file
     * at path */
    if (!st && fsync(fd) != 0)
        st = cf__err(err, CF_E_IO, "writer: syncing %s: %s", tmp, strerror(errno));
    if (fd >= 0 && close(fd) != 0 && !st)
        st = cf__err(err, CF_E_IO, "writer: closing %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, w->path) != 0)
        st = cf__err(err, CF_E_IO, "writer: renaming %s to %s: %s", tmp, w->path,
                     strerror(errno));
    if (st && fd >= 0) unlink(tmp);
    free(tmp);
    pthread_mutex_unlock(&w->mu);
    free_writer(w, 1);
    return st;
}

void cf_writer_abort(cf_writer *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    cf__w_wait_idle(w);
    pthread_mutex_unlock(&w->mu);
    free_writer(w, 1);
}
