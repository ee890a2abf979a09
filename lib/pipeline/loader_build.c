/*
 * loader_build.c - making a Loader: its options checked and copied, the
 * channel layout of its inputs, the sampler over them, the memory budget
 * (docs/loader.md, "Memory") split between readers, decoding and fetching,
 * the ring of batch slots; and freeing it all.
 */
#include "loader_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void cf_loader_options_init(cf_loader_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->sampler = CF_SAMPLER_RANDOM;
#define X(f, ctype, pytype, fmt, def, lo, hi, hint) opt->f = (ctype)(def);
    CF__LOADER_SCALARS(X)
#undef X
#define X(f, def) opt->f = def;
    CF__LOADER_KERNELS(X)
#undef X
}

/* The scalar options' ranges, from the one table (loader_options.h). */
static const cf__opt_range scalars[CF__LDO_COUNT] = {
#define X(f, ctype, pytype, fmt, def, lo, hi, hint) {#f, (double)(lo), (double)(hi), hint},
    CF__LOADER_SCALARS(X)
#undef X
};

cf_status cf__loader_check(int id, double v, cf_error *err) {
    return cf__opt_check(scalars, CF__LDO_COUNT, id, v, "loader", err);
}

/* A step's scene, sorted by file and scene mask (then place) to find
 * repeats. */
typedef struct scene_key {
    const char *url, *scm;
    size_t at;
} scene_key;

static int scene_key_cmp(const void *a, const void *b) {
    const scene_key *p = a, *q = b;
    int c = strcmp(p->url, q->url);
    if (!c && p->scm) c = strcmp(p->scm, q->scm);
    return c ? c : (p->at > q->at) - (p->at < q->at);
}

/* A mosaic's scene that repeats an earlier scene of its step (the same
 * file, with the same scene mask) would fill nothing: a date of fewer
 * scenes than the others is padded so (cogfeed.Loader).  Not read.  Found
 * by sorting each step's scenes (a step may hold a region's thousands of
 * scenes: comparing each with every earlier one was quadratic). */
static cf_status mark_repeats(cf_loader *ld, size_t nimg, size_t scm0, cf_error *err) {
    ld->repeats = cf__calloc(nimg, 1);
    if (!ld->repeats) return cf__err(err, CF_E_NOMEM, "loader: scene table");
    const size_t K = ld->step_scenes;
    if (K < 2) return CF_OK;
    scene_key *keys = cf__calloc(K, sizeof *keys);
    if (!keys) return cf__err(err, CF_E_NOMEM, "loader: scene table");
    for (size_t t0 = 0; t0 < nimg; t0 += K) {
        for (size_t k = 0; k < K; k++)
            keys[k] = (scene_key){ld->urls[t0 + k], ld->has_scm ? ld->urls[scm0 + t0 + k] : NULL,
                                  t0 + k};
        qsort(keys, K, sizeof *keys, scene_key_cmp);
        for (size_t k = 1; k < K; k++)
            ld->repeats[keys[k].at] = !strcmp(keys[k].url, keys[k - 1].url) &&
                                      (!keys[k].scm || !strcmp(keys[k].scm, keys[k - 1].scm));
    }
    free(keys);
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
#define X(f, ...)                                                                          \
    CF__TRY(cf__loader_check(CF__LDO_##f, (double)o->f, err));
    CF__LOADER_SCALARS(X)
#undef X
#define X(f, def)                                                                          \
    if ((unsigned)o->f >= CF_RS_COUNT)                                                     \
        return cf__err(err, CF_E_ARG, "loader: " #f " %d is no resampling kernel", (int)o->f);
    CF__LOADER_KERNELS(X)
#undef X
    if (o->nlayers && !o->layers)
        return cf__err(err, CF_E_ARG, "loader: nlayers %d but no layers", o->nlayers);
    if (o->labels && o->masks)
        return cf__err(err, CF_E_ARG, "loader: labels and masks: give one of them");
    /* kept until cf_loader_free */
    ld->vl = o->labels ? cf__vlabels_ref(o->labels) : NULL;
    o->labels = ld->vl;
    if (o->nfiles > ((size_t)1 << 24))
        return cf__err(err, CF_E_LIMIT, "loader: %zu files (max %d)",
                       o->nfiles, 1 << 24);
    if (o->nmean > CF_MAX_BANDS || o->nstd > CF_MAX_BANDS)
        return cf__err(err, CF_E_ARG, "loader: %u mean / %u std values (max %d)", o->nmean,
                       o->nstd, CF_MAX_BANDS);
    if (o->out_dtype != CF_DT_UNKNOWN && o->out_dtype != CF_DT_F32)
        return cf__err(err, CF_E_ARG,
                       "loader: output dtype must be raw or float32");
    if ((o->mean || o->std) && o->out_dtype != CF_DT_F32)
        return cf__err(err, CF_E_ARG,
                       "loader: mean/std normalisation needs float32 output");
    if (o->nbands < 0 || o->nbands > CF_MAX_BANDS || (o->nbands && !o->bands))
        return cf__err(err, CF_E_ARG, "loader: nbands %d not in [0, %d]",
                       o->nbands, CF_MAX_BANDS);
    if (o->ninvalid_classes > 256 || (o->ninvalid_classes && !o->invalid_classes))
        return cf__err(err, CF_E_ARG, "loader: %u invalid classes (at most 256, and given)",
                       o->ninvalid_classes);
    /* Scene masks only count for validity: without valid_mask or mosaic
     * they would be opened and never read; classes need scene masks. */
    if (o->scene_masks && !o->valid_mask && !o->mosaic)
        return cf__err(err, CF_E_ARG, "loader: scene_masks need valid_mask or mosaic (they "
                                      "only say where a scene has data)");
    if (o->ninvalid_classes && !o->scene_masks)
        return cf__err(err, CF_E_ARG, "loader: invalid_classes without scene_masks");
    if (o->step_scenes && !o->mosaic)
        return cf__err(err, CF_E_ARG, "loader: step_scenes needs mosaic (the scenes of a "
                                      "step make one mosaic)");
    if (o->step_scenes && (uint32_t)o->time_steps % o->step_scenes)
        return cf__err(err, CF_E_ARG, "loader: time_steps %d is not a multiple of "
                                      "step_scenes %u", o->time_steps, o->step_scenes);
    if (o->valid_per_step && !o->valid_mask)
        return cf__err(err, CF_E_ARG, "loader: valid_per_step needs valid_mask");
    ld->step_scenes = !o->mosaic ? 1 : o->step_scenes ? o->step_scenes : (uint32_t)o->time_steps;
    if ((uint32_t)o->time_steps / ld->step_scenes > CF__LD_MAX_STEPS)
        return cf__err(err, CF_E_ARG, "loader: %u time steps (at most %d; a mosaic's step may "
                                      "hold more scenes)",
                       (uint32_t)o->time_steps / ld->step_scenes, CF__LD_MAX_STEPS);
    ld->valid_steps = o->valid_per_step ? (uint32_t)o->time_steps / ld->step_scenes : 1;
    if (o->layers_per_step && !o->nlayers)
        return cf__err(err, CF_E_ARG, "loader: layers_per_step without layers");
    ld->nlf = cf__sg_layer_files(o);
    /* Copy everything the caller may free after cf_loader_new. */
    size_t nimg = o->nfiles * (size_t)o->time_steps;
    const size_t nrest = (o->masks ? o->nfiles : 0) + o->nfiles * ld->nlf;
    ld->nurls = nimg + nrest + (o->scene_masks ? nimg : 0);
    ld->urls = cf__calloc(ld->nurls, sizeof *ld->urls);
    if (!ld->urls) return cf__err(err, CF_E_NOMEM, "loader: url table");
    for (size_t i = 0; i < ld->nurls; i++) {
        const char *u;
        if (i < nimg) u = o->images[i];
        else if (o->masks && i < nimg + o->nfiles) u = o->masks[i - nimg];
        else if (i < nimg + nrest) u = o->layers[i - nimg - (o->masks ? o->nfiles : 0)];
        else u = o->scene_masks[i - nimg - nrest];
        if (!u) return cf__err(err, CF_E_ARG, "loader: input %zu is NULL", i);
        ld->urls[i] = cf__strdup(u);
        if (!ld->urls[i]) return cf__err(err, CF_E_NOMEM, "loader: urls");
        if (cf__url_is_remote(u)) ld->remote = 1;
    }
    o->images = NULL;
    o->layers = NULL;
    ld->has_scm = o->scene_masks != NULL;
    CF__TRY(mark_repeats(ld, nimg, nimg + nrest, err));
    o->scene_masks = NULL;
    if (o->ninvalid_classes) {
        ld->classes = cf__calloc(o->ninvalid_classes, sizeof *ld->classes);
        if (!ld->classes) return cf__err(err, CF_E_NOMEM, "loader: classes");
        memcpy(ld->classes, o->invalid_classes, o->ninvalid_classes * sizeof *ld->classes);
    }
    o->invalid_classes = NULL;
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
        /* every sample file's (and with layers_per_step every step's) */
        for (size_t f = 0; f < o->nfiles * ld->nlf / (size_t)o->nlayers; f++) {
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
    /* A time series: every step's image and layers.  Mosaics: each
     * step's first scene and its layers (the output), then the later
     * scenes of every step, which fill what their step's first leaves
     * without data.  A scene's classes follow it.  Read in this order. */
    const int K = (int)ld->step_scenes, TO = o->time_steps / K;
    ld->nmembers = TO * (1 + o->nlayers) + (o->time_steps - TO) +
                   (ld->has_scm ? o->time_steps : 0);
    ld->members = cf__calloc((size_t)ld->nmembers, sizeof *ld->members);
    if (!ld->members) return cf__err(err, CF_E_NOMEM, "loader: members");
    int m = 0;
    /* the later scenes k-major (every step's second scene, then every
     * step's third...): a group reads one scene of each step at once */
    for (int i = 0; i < o->time_steps; i++) {
        const int later = i >= TO;
        const int t = later ? ((i - TO) % TO) * K + 1 + (i - TO) / TO : i * K;
        uint32_t ch = 0;
        const int nl = later ? 0 : o->nlayers;
        for (int l = -1; l < nl; l++) {
            ld_member *mb = &ld->members[m++];
            mb->t = t;
            mb->step = t / K;
            mb->later = later;
            mb->layer = l;
            mb->channel = ch;
            mb->nb = l < 0 ? ld->ci : ld->layer_bands[l];
            ch += mb->nb;
        }
        if (ld->has_scm) { /* the scene's classes, after its members */
            ld_member *mb = &ld->members[m++];
            mb->t = t;
            mb->step = t / K;
            mb->later = later;
            mb->layer = LD_SCENE_MASK;
            mb->nb = 1;
        }
    }
    for (size_t i = 0; ld->has_scm && i < o->nfiles * (size_t)o->time_steps; i++) {
        cf_cog_info si;
        cf_cog_get_info(ld->scm[i], &si);
        if (i == 0) ld->scm_dt = si.dtype;
        else if (si.dtype != ld->scm_dt)
            return cf__err(err, CF_E_ARG, "loader: scene mask %s is %s, not %s",
                           cf_cog_name(ld->scm[i]), cf_dtype_name(si.dtype),
                           cf_dtype_name(ld->scm_dt));
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
    if ((o->mean && o->nmean && o->nmean != C) || (o->std && o->nstd && o->nstd != C))
        return cf__err(err, CF_E_ARG,
                       "loader: mean and std need one value per output channel (%u), "
                       "not %u / %u",
                       C, o->mean ? o->nmean : C, o->std ? o->nstd : C);
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

/* The most decoding one of cog's chunks at the loader's level can take
 * from the kits' budget (a full tile, a new codec context). */
static uint64_t decode_need(const cf_loader *ld, const cf_cog *cog) {
    /* Tiles not known before the header is read: the share's cap
     * (split_budget). */
    if (cf__cog_declared(cog)) return UINT64_MAX / 2;
    /* An input without the loader's level is resampled from the levels it
     * has (sample_grid.c): the largest need of any of them then. */
    const int nl = cog->tiff->nlevels;
    int l0 = ld->o.level < nl ? ld->o.level : 0, l1 = ld->o.level < nl ? ld->o.level : nl - 1;
    uint64_t need = 0;
    for (int l = l0; l <= l1; l++) {
        cf__chunk c;
        memset(&c, 0, sizeof c);
        c.ifd = cog->tiff->levels[l];
        cf__codec_params p;
        cf__cog_chunk_params(cog, &c, &p);
        uint64_t n = cf__codec_ctx_growth(NULL, &p, cf__codec_chunk_bytes(&p), 0);
        if (n > need) need = n;
    }
    return need;
}

/* The source windows of a typical sample's warped inputs (file 0's, at
 * the centre of its target), twice over: each reader's scratch holds
 * them; a sample that needs more borrows the difference for its read. */
static cf_status warp_scratch(cf_loader *ld, size_t *out, cf_error *err) {
    *out = 0;
    if (!cf__sg_any_warp(ld->sg)) return CF_OK;
    /* A mosaic reads its later scenes (with their scene masks) in groups
     * of up to mosaic_slots of them, after everything else: its largest
     * such group, not the sum of every scene. */
    const uint32_t G = ld->mosaic_slots;
    uint64_t sum = 0, most = 0;
    uint64_t *win = cf__calloc(G, sizeof *win); /* the last G later scenes
                                                   (with their masks) */
    if (!win) return cf__err(err, CF_E_NOMEM, "loader: scratch plan");
    uint32_t nwin = 0;
    for (int m = 0; m <= ld->nmembers; m++) {
        if (m == ld->nmembers && !ld->msk) break;
        const ld_member *mb = m < ld->nmembers ? &ld->members[m] : NULL;
        size_t slot = mb ? cf__ld_member_slot(ld, 0, mb)
                         : ld->o.nfiles * (size_t)ld->o.time_steps;
        if (mb && cf__ld_member_fills(ld, mb)) /* a later scene's pair begins */
            win[nwin++ % G] = 0;
        if (cf__sg_input_at(ld->sg, slot)->how != CF__SG_WARP) continue;
        cf_cog *cog = *cf__ld_url_slot(ld, slot);
        uint64_t n = CF__ALIGN16(cf__sg_typical_bytes(ld->sg, slot, cog, 0, ld->o.patch_size,
                                                      mb ? (int)mb->nb : 1, &ld->o));
        if (mb && mb->later && nwin) {
            win[(nwin - 1) % G] += n;
            uint64_t g = 0;
            for (uint32_t k = 0; k < G; k++) g += win[k];
            if (g > most) most = g;
        } else {
            sum += n;
        }
    }
    free(win);
    if (most > sum) sum = most;
    *out = (size_t)(2 * sum + 64);
    return CF_OK;
}

/* The batch slot's layout (cf_loader_layout): its dtype, its image and
 * mask bytes. */
static cf_status lay_out(cf_loader *ld, cf_error *err) {
    cf_loader_options *o = &ld->o;
    const uint64_t P = o->patch_size, B = o->batch_size;
    ld->plane = (size_t)(P * P);
    cf_loader_layout *L = &ld->lay_out;
    L->batch_size = o->batch_size;
    L->patch_size = o->patch_size;
    L->time_steps = (uint32_t)o->time_steps / ld->step_scenes;
    L->dtype = o->out_dtype == CF_DT_F32 ? CF_DT_F32 : ld->raw_dt;
    ld->es = cf_dtype_size(L->dtype);
    for (size_t f = 0; ld->vl && f < o->nfiles; f++) {
        /* labels are burnt on each patch's grid: every target needs one */
        if (!cf__sg_grid(ld->sg, f))
            return cf__err(err, CF_E_ARG,
                           "loader: labels from polygons need georeferenced images; %s has "
                           "no georeferencing", cf_cog_name(ld->img[f * (size_t)o->time_steps]));
    }
    if (ld->vl) L->mask_dtype = cf_vlabels_dtype(ld->vl);
    L->has_mask = ld->msk != NULL || ld->vl != NULL;
    ld->mask_es = L->has_mask ? cf_dtype_size(L->mask_dtype) : 0;
    uint64_t img_bytes, mask_bytes;
    if (!cf__mul_u64(B * L->time_steps, L->channels, &img_bytes) ||
        !cf__mul_u64(img_bytes, P * P, &img_bytes) ||
        !cf__mul_u64(img_bytes, ld->es, &img_bytes) ||
        img_bytes > ((uint64_t)1 << 40))
        return cf__err(err, CF_E_LIMIT, "loader: batch slot too large");
    mask_bytes = B * P * P * ld->mask_es;
    L->image_bytes = (size_t)img_bytes;
    L->mask_bytes = (size_t)mask_bytes;
    ld->valid_bytes = o->valid_mask ? (size_t)(B * ld->valid_steps * P * P) : 0;
    return CF_OK;
}

/* skip_empty, roi: whether some scene of the file reaches the window, and
 * whether it meets the region of interest. */
static int covers(const void *user, size_t f, int64_t x, int64_t y, uint32_t w, uint32_t h) {
    const cf_loader *ld = user;
    if (ld->fp && !cf__fp_covers(ld->fp, f, x, y, w, h)) return 0;
    return !ld->roi || cf__roi_meets(ld->roi[f], (double)x, (double)y, (double)x + w,
                                     (double)y + h);
}

/* roi: when random's redraws run out, the window around a point of the
 * region's outline in the file (it meets the region). */
static void roi_fallback(const void *user, size_t f, uint64_t h, int64_t *x, int64_t *y) {
    const cf_loader *ld = user;
    const cf__samp_file *fi = &ld->samp.files[f];
    const double P = ld->o.patch_size;
    double px, py;
    cf__roi_point(ld->roi[f], h, fi->width, fi->height, &px, &py);
    double mx = fi->width > P ? fi->width - P : 0, my = fi->height > P ? fi->height - P : 0;
    *x = (int64_t)fmin(mx, fmax(0, floor(px - P / 2)));
    *y = (int64_t)fmin(my, fmax(0, floor(py - P / 2)));
}

/* The region of interest in file f's target pixels, and the window
 * origins that can meet it (random draws them; none: the file is not
 * drawn). */
static cf_status roi_of(cf_loader *ld, size_t f, cf__samp_file *sf, cf_error *err) {
    const cf_loader_options *o = &ld->o;
    const cf_grid *g = cf__sg_grid(ld->sg, f);
    if (!g)
        return cf__err(err, CF_E_ARG, "loader: roi: the target of %s has no georeferencing",
                       cf_cog_name(ld->img[f * (size_t)o->time_steps]));
    CF__TRY(cf__roi_new(o->roi_xy, o->roi_ring_len, o->roi_nrings, o->roi_poly_rings,
                        o->roi_npolys, o->roi_crs, g, &ld->roi[f], err));
    double b[4];
    cf__roi_bounds(ld->roi[f], b);
    const double P = o->patch_size;
    /* Origins x with [x, x + P) meeting [b0, b2), within [0, W - P]. */
    double wmax = sf->width > P ? sf->width - P : 0, hmax = sf->height > P ? sf->height - P : 0;
    double x0 = fmax(0, floor(b[0] - P) + 1), x1 = fmin(wmax, ceil(b[2]) - 1);
    double y0 = fmax(0, floor(b[1] - P) + 1), y1 = fmin(hmax, ceil(b[3]) - 1);
    if (!(x0 <= x1 && y0 <= y1)) {
        sf->weight = -1;
        return CF_OK;
    }
    sf->has_box = 1;
    /* The region's bounds within the file: its weight and share. */
    sf->area = fmax(1, (fmin(b[2], sf->width) - fmax(b[0], 0)) *
                           (fmin(b[3], sf->height) - fmax(b[1], 0)));
    sf->x0 = (uint32_t)x0;
    sf->x1 = (uint32_t)x1;
    sf->y0 = (uint32_t)y0;
    sf->y1 = (uint32_t)y1;
    return CF_OK;
}

/* The sampler over the files' sizes at the chosen level (or their target
 * grids); *tiles_shared when a tile is larger than a patch. */
static cf_status make_sampler(cf_loader *ld, int *tiles_shared, cf_error *err) {
    cf_loader_options *o = &ld->o;
    cf_loader_layout *L = &ld->lay_out;
    const uint64_t P = o->patch_size, B = o->batch_size;
    cf__samp_file *sf = cf__calloc(o->nfiles, sizeof *sf);
    if (!sf) return cf__err(err, CF_E_NOMEM, "loader: sampler files");
    uint64_t cell_bytes = 0;
    *tiles_shared = 0;
    cf_status st;
    for (size_t f = 0; f < o->nfiles; f++) {
        /* A target grid of its own (grid=): windows of it; else the
         * image's level. */
        if (!cf__sg_sampler_dims(ld->sg, f, o->patch_size, &sf[f].width, &sf[f].height,
                                 &sf[f].tile_w, &sf[f].tile_h)) {
            cf_level_info li;
            st = cf__ld_level(ld, ld->img[f * (size_t)o->time_steps], &li, err);
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
        if (sf[f].tile_w > P || sf[f].tile_h > P) *tiles_shared = 1;
        uint64_t cw = (P + sf[f].tile_w - 1) / sf[f].tile_w * sf[f].tile_w;
        uint64_t ch = (P + sf[f].tile_h - 1) / sf[f].tile_h * sf[f].tile_h;
        uint64_t cb = 0;
        for (int m = 0; m < ld->nmembers; m++)
            cb += cf__ld_member_bytes(ld, &ld->members[m], cw, ch);
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
    if (o->skip_empty) {
        st = cf__fp_new(ld->sg, ld->img, o->nfiles, (size_t)o->time_steps, o->level, &ld->fp,
                        err);
        if (st != CF_OK) {
            free(sf);
            return st;
        }
    }
    if (o->roi_nrings) {
        ld->roi = cf__calloc(o->nfiles, sizeof *ld->roi);
        st = ld->roi ? CF_OK : cf__err(err, CF_E_NOMEM, "loader: roi");
        for (size_t f = 0; st == CF_OK && f < o->nfiles; f++) st = roi_of(ld, f, &sf[f], err);
        if (st != CF_OK) {
            free(sf);
            return st;
        }
    }
    if (ld->fp || ld->roi) {
        sc.covers = covers;
        sc.covers_user = ld;
    }
    if (ld->roi) sc.fallback = roi_fallback;
    /* Two groups of cells must fit the cache, because readers cross from
     * one group into the next while the last crops of the first are read. */
    uint64_t k = cell_bytes ? o->cache_bytes / (2 * cell_bytes) : 1;
    sc.group_tiles = (uint32_t)(k < 1 ? 1 : k > LD_MAX_GROUP_TILES
                                                ? LD_MAX_GROUP_TILES
                                                : k);
    st = cf__sampler_init(&ld->samp, &sc, err);
    free(sf);
    CF__TRY(st);
    uint64_t cnt = ld->samp.count;
    L->samples = o->drop_last ? cnt / B * B : cnt;
    L->batches = o->drop_last ? cnt / B : (cnt + B - 1) / B;
    ld->total = L->samples;
    return CF_OK;
}

/* inflight_bytes, or its default: 256 MiB, 64 MiB per core on machines
 * of more than 4 cores; twice that when a file is remote.  A remote
 * reader holds its scratch through a round trip, so the patches in
 * flight, not the cores, set the rate: random geo-sampling of a mosaic
 * over 164 ms (bench/geo_sampling_bench.py, 2 cores) read 170 patches/s
 * with 256 MiB, 249-254 with 512 MiB and 269 with 1 GiB, the first
 * batch 0.43, 0.46-0.50 and 0.51 s after opening (warm rates over 30 s,
 * streaming past a 128 MiB chunk cache; first batches cold). */
static uint64_t inflight_of(const cf_loader *ld) {
    const uint64_t b = (uint64_t)64 << 20;
    if (ld->o.inflight_bytes) return ld->o.inflight_bytes;
    uint64_t n = cf__ncpu() > 4 ? b * (uint64_t)cf__ncpu() : 4 * b;
    return ld->remote ? 2 * n : n;
}

/* A reader's scratch: every raw member block of a sample (float32 output:
 * they are read at once, then converted), at least one output plane (for
 * augmentation), and the warped inputs' source windows; and whether
 * decoded chunks are kept for the next patches (the chunk cache). */
static cf_status plan_scratch(cf_loader *ld, int tiles_shared, cf_error *err) {
    cf_loader_options *o = &ld->o;
    const uint64_t P = o->patch_size;
    size_t sb = ld->plane * (ld->es > ld->mask_es ? ld->es : ld->mask_es);
    /* Every region starts 16-byte aligned: blocks of any sample type are
     * read through typed pointers. */
    size_t sum = 0;
    for (int m = 0; o->out_dtype == CF_DT_F32 && m < ld->nmembers; m++)
        if (cf__ld_member_output(ld, &ld->members[m])) {
            ld->members[m].soff = sum;
            sum += CF__ALIGN16(cf__ld_member_bytes(ld, &ld->members[m], P, P));
        }
    ld->scratch_bytes = CF__ALIGN16(sum > sb ? sum : sb);
    /* Mosaic: the later scenes' blocks (read at once: as many as 1/128
     * of inflight_bytes holds, at least one, at most one per later
     * scene), what each step has filled, each later scene's
     * valid.  More slots mean fewer rounds of requests but a larger
     * scratch, so fewer readers within the budget: a 12-date series of
     * two tiles (4 bands uint16, 256 px) over 164 ms read 12.9, 14.7,
     * 14.4 and 12.8 samples/s with 1, 2, 4 and 8 MiB of slots at the
     * default 256 MiB (2 MiB: 4 slots, 2.4 rounds a sample). */
    const uint32_t TO = ld->lay_out.time_steps;
    /* At most the later scenes there are: several of one step go in one
     * group when they are sure to be read (sample_read.c, sure_read). */
    uint32_t NL = (uint32_t)o->time_steps - TO;
    if (NL > LD_PART_CHUNKS) NL = LD_PART_CHUNKS; /* a group's inputs at most */
    if (NL < 1) NL = 1;
    ld->mosaic_bytes = CF__ALIGN16(cf__ld_member_bytes(ld, &ld->members[0], P, P));
    uint64_t slots = inflight_of(ld) / 128 / ld->mosaic_bytes;
    ld->mosaic_slots = slots < 1 ? 1 : slots > NL ? NL : (uint32_t)slots;
    ld->mosaic_off = ld->scratch_bytes;
    ld->filled_off = ld->mosaic_off + ld->mosaic_slots * ld->mosaic_bytes;
    ld->scene_valid_off = ld->filled_off + TO * CF__ALIGN16(ld->plane);
    if (o->mosaic)
        ld->scratch_bytes = ld->scene_valid_off + ld->mosaic_slots * CF__ALIGN16(ld->plane);
    /* valid_mask: one input's validity at a time, while the raw blocks
     * are still there (before float32 conversion). */
    ld->valid_off = ld->scratch_bytes;
    if (o->valid_mask || o->mosaic) ld->scratch_bytes += CF__ALIGN16(ld->plane);
    /* Scene masks: one per step in a group, as many as 2 MiB hold (at
     * least 8; more groups for a longer series); a mosaic's later scenes
     * come with theirs. */
    ld->scm_off = ld->scratch_bytes;
    ld->scm_bytes = ld->has_scm ? CF__ALIGN16(ld->plane * cf_dtype_size(ld->scm_dt)) : 0;
    size_t per = ld->scm_bytes ? ((size_t)2 << 20) / ld->scm_bytes : 8;
    if (per < 8) per = 8;
    /* (the first scenes' and, with them, the later scenes that are sure
     * to be read: sample_read.c) */
    const size_t scm_cap = TO + (o->mosaic ? ld->mosaic_slots : 0);
    ld->scm_per_group = per > scm_cap ? (uint32_t)scm_cap : (uint32_t)per;
    ld->scratch_bytes += ld->scm_per_group * ld->scm_bytes;
    ld->warp_off = ld->scratch_bytes;
    CF__TRY(warp_scratch(ld, &ld->warp_bytes, err));
    ld->scratch_bytes += ld->warp_bytes;
    /* The grid sampler visits neighbouring patches one after another: when
     * patches are smaller than tiles (or overlap), one decoded tile serves
     * several of them, as GDAL's block cache serves TorchGeo's
     * GridGeoSampler.  Without this each patch fetched and decoded its
     * tiles afresh (2 requests per 256 px patch of 512 px tiles, against
     * TorchGeo's 0.63: docs/performance.md, "Against the alternatives"). */
    if (o->stride && o->stride < P) tiles_shared = 1;
    /* Random patches straddle tiles, and over a dataset that partly fits
     * the cache they meet tiles decoded before, as GDAL's block cache
     * (GDAL_CACHEMAX) serves TorchGeo's RandomGeoSampler; when the
     * dataset is far larger the cache turns over, reusing its buffers
     * (docs/loader.md, "Decoded tiles kept"). */
    ld->cc_direct = o->cache_bytes && o->sampler != CF_SAMPLER_TILE_SHUFFLE &&
                    (tiles_shared || o->sampler == CF_SAMPLER_RANDOM);
    /* On a target grid (grid=) a patch's straight reads may cut their
     * source tiles whatever the sampler's stride: sample_read.c keeps
     * those tiles (cuts_tiles) for the neighbours. */
    int target = 0;
    for (size_t f = 0; f < o->nfiles && !target; f++) {
        uint32_t w, h, tw, th;
        target = cf__sg_sampler_dims(ld->sg, f, (uint32_t)P, &w, &h, &tw, &th);
    }
    if ((ld->warp_bytes || ld->cc_direct || target) && o->sampler != CF_SAMPLER_TILE_SHUFFLE &&
        o->cache_bytes) {
        ld->cc = cf__cc_new(o->cache_bytes);
        if (!ld->cc) return cf__err(err, CF_E_NOMEM, "loader: chunk cache");
    }
    for (int i = 0; i < CF_MAX_BANDS; i++) ld->ident[i] = i;
    return CF_OK;
}

/* Readers: fixed, or adaptive up to a cap set by the byte budget
 * (inflight_of); their scratch takes at most half of it.  Then the ring's length. */
static cf_status plan_readers(cf_loader *ld, cf_error *err) {
    cf_loader_options *o = &ld->o;
    cf_loader_layout *L = &ld->lay_out;
    const uint64_t B = o->batch_size;
    o->inflight_bytes = (size_t)inflight_of(ld);
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
    int want = o->threads > o->concurrency ? o->threads : o->concurrency;
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
    int start = o->concurrency ? o->concurrency
                                : ld->remote ? (want / 4 > 8 ? want / 4 : 8)
                                             : 8;
    cf__adapt_init(&ld->ctl, start, want);
    if (!o->prefetch) {
        /* Auto ring: batches are handed out in order, so the slots must
         * hold every patch being read plus the batch the consumer holds
         * and one ready to take, or readers idle behind a slow patch.
         * Capped at twice the in-flight byte budget, at least 4 slots. */
        uint64_t n = ((uint64_t)want + B - 1) / B + 2;
        uint64_t slot = (uint64_t)L->image_bytes + L->mask_bytes + ld->valid_bytes;
        uint64_t cap = slot ? 2 * I / slot : n;
        if (n > cap) n = cap;
        if (n < 4) n = 4;
        if (n > LD_MAX_PREFETCH) n = LD_MAX_PREFETCH;
        o->prefetch = (int)n;
    }
    L->prefetch = o->prefetch;
    ld->ring_bytes = (uint64_t)o->prefetch *
                     ((uint64_t)L->image_bytes + L->mask_bytes + ld->valid_bytes +
                      B * (sizeof(cf_window) + 1));
    return CF_OK;
}

/* The rest of inflight_bytes: decoding (kits: at most a quarter, and no
 * more than every kit decoding the largest tile of the inputs at once),
 * then fetching. */
static cf_status split_budget(cf_loader *ld, cf_error *err) {
    cf_loader_options *o = &ld->o;
    const uint64_t I = o->inflight_bytes;
    int nkits = (int)(2 * cf__ncpu() + 2);
    if (nkits > ld->nthreads) nkits = ld->nthreads;
    uint64_t need = 0;
    size_t ncogs = ld->nurls;
    for (size_t i = 0; i < ncogs; i++) {
        uint64_t n = decode_need(ld, *cf__ld_url_slot(ld, i));
        if (n > need) need = n;
    }
    uint64_t dec = (uint64_t)nkits * need;
    if (dec > I / 4 || dec / (uint64_t)nkits != need) dec = I / 4;
    /* Resampled inputs whose source windows outgrow a reader's warp
     * scratch (a steeper reprojection, a file without the overview the
     * first one has) borrow a buffer of their own; all such borrows
     * together stay within an eighth, taken from the fetch share. */
    uint64_t borrow = ld->warp_bytes ? I / 8 : 0;
    uint64_t fetch = I - (uint64_t)ld->nthreads * ld->scratch_bytes - dec - borrow;
    cf__budget_init(&ld->borrow, borrow);
    if (cf__bufpool_init(&ld->fetch, fetch, ld->nthreads) != CF_OK ||
        cf__kits_init(&ld->kits, nkits, dec) != CF_OK) {
        ld->budgets = 1;
        return cf__err(err, CF_E_NOMEM, "loader: budgets");
    }
    ld->budgets = 1;
    return CF_OK;
}

/* The ring of batch slots, tile-shuffle's cache, the readers' records. */
static cf_status make_ring(cf_loader *ld, cf_error *err) {
    cf_loader_options *o = &ld->o;
    cf_loader_layout *L = &ld->lay_out;
    const uint64_t B = o->batch_size;
    ld->slots = cf__calloc((size_t)o->prefetch, sizeof *ld->slots);
    if (!ld->slots) return cf__err(err, CF_E_NOMEM, "loader: ring");
    for (int i = 0; i < o->prefetch; i++) {
        ld_slot *s = &ld->slots[i];
        s->windows = cf__calloc(B, sizeof *s->windows);
        s->ok = cf__calloc(B, 1);
        s->image = cf__malloc(L->image_bytes);
        s->mask = L->mask_bytes ? cf__malloc(L->mask_bytes) : NULL;
        s->valid = ld->valid_bytes ? cf__malloc(ld->valid_bytes) : NULL;
        s->own_buffers = 1;
        if (!s->windows || !s->ok || !s->image ||
            (L->mask_bytes && !s->mask) || (ld->valid_bytes && !s->valid))
            return cf__err(err, CF_E_NOMEM,
                           "loader: ring slot %d (%zu bytes)", i,
                           L->image_bytes);
    }
    if (o->sampler == CF_SAMPLER_TILE_SHUFFLE &&
        cf__tcache_alloc(&ld->cache, o->cache_bytes, LD_MAX_CACHE_ENTRIES, err) != CF_OK)
        return CF_E_NOMEM;
    ld->skip_window = 2 * o->batch_size > LD_SKIP_WINDOW ? 2 * o->batch_size
                                                         : LD_SKIP_WINDOW;
    ld->skip_hist = cf__calloc(ld->skip_window, 1);
    ld->workers = cf__calloc((size_t)ld->nthreads, sizeof *ld->workers);
    if (!ld->workers || !ld->skip_hist)
        return cf__err(err, CF_E_NOMEM, "loader: workers");
    return CF_OK;
}

/* A loader whose inputs are open: its layout, sampler, memory plan and
 * ring, step by step. */
static cf_status build(cf_loader *ld, cf_error *err) {
    int tiles_shared = 0;
    cf_status st = plan_channels(ld, err);
    if (st == CF_OK) st = lay_out(ld, err);
    if (st == CF_OK) st = make_sampler(ld, &tiles_shared, err);
    if (st == CF_OK) st = plan_scratch(ld, tiles_shared, err);
    if (st == CF_OK) st = plan_readers(ld, err);
    if (st == CF_OK) st = split_budget(ld, err);
    if (st == CF_OK) st = make_ring(ld, err);
    return st;
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
    cf__tcache_init(&ld->cache);
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
            if (ld->o.io_options) io = *ld->o.io_options; /* strings: copied by cf_io_new */
            /* No chunk cache in the loader's own io loops: the loader keeps
             * decoded tiles in its own cache, within cache_bytes and its
             * budget; an io cache (5% of memory by default) would hold the
             * partial mask tiles of resampled inputs outside both. */
            io.cache_bytes = -1;
            for (int i = 0; i < k && st == CF_OK; i++) {
                st = cf_io_new(&io, &ld->ios[i], err);
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
        if (o->nlayers) ld->lay = cf__calloc(o->nfiles * ld->nlf, sizeof *ld->lay);
        if (ld->has_scm)
            ld->scm = cf__calloc(o->nfiles * (size_t)o->time_steps, sizeof *ld->scm);
        if (!ld->img || (opt->masks && !ld->msk) || (o->nlayers && !ld->lay) ||
            (ld->has_scm && !ld->scm))
            st = cf__err(err, CF_E_NOMEM, "loader: file table");
    }
    if (st == CF_OK) st = cf__ld_open_inputs(ld, err);
    if (st == CF_OK) st = build(ld, err);
    ld->o.masks = NULL; /* caller memory: not kept */
    ld->o.described = NULL;
    ld->o.ndescribed = 0;
    ld->o.weights = NULL;
    ld->o.grid = NULL;
    ld->o.grid_crs = NULL;
    ld->o.roi_xy = NULL;
    ld->o.roi_ring_len = NULL;
    ld->o.roi_poly_rings = NULL;
    ld->o.roi_crs = NULL;
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

void cf_loader_free(cf_loader *ld) {
    if (!ld) return;
    /* In a forked child there are no reader threads to stop, and a lock may
     * have been copied while held: free the memory only. */
    int child = ld->pid && getpid() != ld->pid;
    if (!child) cf_loader_close(ld);
    for (int t = 0; ld->workers && t < ld->nthreads; t++) {
        free(ld->workers[t].scratch);
        cf__warp_pos_free(ld->workers[t].pos);
        free(ld->workers[t].cov);
    }
    free(ld->workers);
    if (ld->budgets) {
        cf__bufpool_destroy(&ld->fetch, !child);
        cf__kits_destroy(&ld->kits, !child);
        cf__budget_destroy(&ld->borrow, !child);
    }
    free(ld->skip_hist);
    free(ld->planes0);
    for (int i = 0; ld->slots && i < ld->o.prefetch; i++) {
        if (ld->slots[i].own_buffers) {
            free(ld->slots[i].image);
            free(ld->slots[i].mask);
        }
        free(ld->slots[i].valid);
        free(ld->slots[i].windows);
        free(ld->slots[i].ok);
    }
    free(ld->slots);
    size_t nimg = ld->o.nfiles * (size_t)ld->o.time_steps;
    for (size_t i = 0; ld->img && i < nimg; i++) cf_cog_close(ld->img[i]);
    for (size_t i = 0; ld->msk && i < ld->o.nfiles; i++)
        cf_cog_close(ld->msk[i]);
    for (size_t i = 0; ld->lay && i < ld->o.nfiles * ld->nlf; i++) cf_cog_close(ld->lay[i]);
    for (size_t i = 0; ld->scm && i < nimg; i++) cf_cog_close(ld->scm[i]);
    free(ld->img);
    free(ld->msk);
    cf_vlabels_free(ld->vl);
    free(ld->lay);
    free(ld->scm);
    free(ld->repeats);
    free(ld->classes);
    cf__fp_free(ld->fp);
    cf__fp_free(ld->scene_fp);
    for (size_t f = 0; ld->roi && f < ld->o.nfiles; f++) cf__roi_free(ld->roi[f]);
    free(ld->roi);
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
    cf__cc_free(ld->cc, !child);
    cf__sampler_free(&ld->samp);
    if (!child) {
        pthread_mutex_destroy(&ld->mu);
        pthread_cond_destroy(&ld->work_cv);
        pthread_cond_destroy(&ld->ready_cv);
    }
    cf__tcache_destroy(&ld->cache, !child);
    free(ld);
}
