/*
 * valid.c - the valid-pixel mask of an input read as it lies
 * (cf_loader_options.valid_mask): what is outside the file, its internal
 * mask and its nodata, as GDAL's mask band says it; and the invalid
 * classes of a scene mask.  Resampled inputs get
 * theirs from the warp (cf__grid_resample_valid, read_grid.c).
 */
#include "cog_internal.h"

#include <stdlib.h>

#include "../geo/geo.h"

/* (cog_internal.h) */
void cf__valid_nodata(uint8_t *valid, const void *data, cf_dtype dt, uint32_t nb, size_t n,
                      double nodata) {
    /* The warper's nodata test, so that a pixel read as it lies and one
     * resampled agree on what nodata is. */
    const size_t es = cf_dtype_size(dt);
    uint8_t m[4096];
    for (uint32_t b = 0; b < nb; b++) {
        const uint8_t *band = (const uint8_t *)data + (size_t)b * n * es;
        for (size_t k = 0; k < n; k += sizeof m) {
            size_t c = n - k < sizeof m ? n - k : sizeof m;
            if (!cf__warp_nodata_mask(dt, nodata, band + k * es, c, m)) continue;
            for (size_t q = 0; q < c; q++) valid[k + q] &= m[q];
        }
    }
}

/* (cog_internal.h) */
void cf__valid_classes(uint8_t *valid, const void *data, cf_dtype dt, size_t n,
                       const double *classes, uint32_t nclasses) {
    if (!nclasses) return;
    /* Classes are small integers: a table for 8-bit masks, a scan of the
     * list otherwise. */
    if (dt == CF_DT_U8) {
        uint8_t bad[256] = {0};
        for (uint32_t c = 0; c < nclasses; c++)
            if (classes[c] >= 0 && classes[c] <= 255 && classes[c] == (int)classes[c])
                bad[(int)classes[c]] = 1;
        const uint8_t *p = data;
        for (size_t i = 0; i < n; i++) valid[i] &= (uint8_t)!bad[p[i]];
        return;
    }
#define CLASSES(T)                                                                 \
    do {                                                                           \
        const T *p = data;                                                         \
        for (size_t i = 0; i < n; i++)                                             \
            for (uint32_t q = 0; q < nclasses; q++)                                \
                if ((double)p[i] == classes[q]) {                                  \
                    valid[i] = 0;                                                  \
                    break;                                                         \
                }                                                                  \
    } while (0)
    switch (dt) {
    case CF_DT_I8: CLASSES(int8_t); break;
    case CF_DT_U16: CLASSES(uint16_t); break;
    case CF_DT_I16: CLASSES(int16_t); break;
    case CF_DT_U32: CLASSES(uint32_t); break;
    case CF_DT_I32: CLASSES(int32_t); break;
    case CF_DT_U64: CLASSES(uint64_t); break;
    case CF_DT_I64: CLASSES(int64_t); break;
    case CF_DT_F32: CLASSES(float); break;
    case CF_DT_F64: CLASSES(double); break;
    default: break; /* complex: refused when the loader opens its inputs */
    }
#undef CLASSES
}

/* (cog_internal.h) */
cf_status cf__valid_window(cf_cog *cog, int level, int64_t x, int64_t y, uint32_t w,
                           uint32_t h, uint8_t *valid, cf_error *err) {
    const cf__tiff *t = cog->tiff;
    const cf__tiff_ifd *ifd = &t->ifds[t->levels[level]];
    const int64_t W = ifd->width, H = ifd->height;
    /* The part of the window inside the level: [x0, x1) x [y0, y1). */
    int64_t x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    int64_t x1 = x + (int64_t)w > W ? W : x + (int64_t)w;
    int64_t y1 = y + (int64_t)h > H ? H : y + (int64_t)h;
    if (x1 <= x0 || y1 <= y0) {
        memset(valid, 0, (size_t)w * h);
        return CF_OK;
    }
    for (uint32_t r = 0; r < h; r++) {
        uint8_t *row = valid + (size_t)r * w;
        int64_t yy = y + r;
        if (yy < y0 || yy >= y1) {
            memset(row, 0, w);
            continue;
        }
        memset(row, 0, (size_t)(x0 - x));
        memset(row + (x1 - x), 0, (size_t)(x + (int64_t)w - x1));
    }
    if (t->mask_of_level[level] < 0) return CF_OK;
    /* The internal mask of the part inside (a read of its own: files with
     * one are rare in stacks). */
    const uint32_t iw = (uint32_t)(x1 - x0), ih = (uint32_t)(y1 - y0);
    uint8_t *m = cf__malloc((size_t)iw * ih);
    if (!m) return cf__err(err, CF_E_NOMEM, "%s: out of memory (internal mask)", cog->name);
    cf_status st = cf_cog_read_mask(cog, level, x0, y0, iw, ih, m, (size_t)iw * ih, err);
    for (uint32_t r = 0; st == CF_OK && r < ih; r++) {
        uint8_t *row = valid + (size_t)(y0 - y + r) * w + (x0 - x);
        for (uint32_t i = 0; i < iw; i++) row[i] &= (uint8_t)(m[(size_t)r * iw + i] != 0);
    }
    free(m);
    return st;
}
