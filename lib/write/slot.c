/*
 * slot.c - a tile's buffers and encoders (w_slot: one per thread encoding
 * tiles at once), the wait for the slots in use, and the fill of pixels
 * no tile gave.
 */
#include <stdlib.h>
#include <string.h>

#include "writer_state.h"

void cf__w_slot_free(w_slot *s) {
    cf__encoder_free(s->enc);
    cf__encoder_free(s->menc);
    free(s->tile);
    free(s->mtile);
    memset(s, 0, sizeof *s);
}

/* A slot's encoders and buffers (with `mask`, the mask's too); CF_E_NOMEM
 * leaves it empty. */
cf_status cf__w_slot_make(const cf_writer *w, w_slot *s) {
    memset(s, 0, sizeof *s);
    s->enc = cf__encoder_new();
    s->tile = w->tile_bytes ? cf__malloc(w->tile_bytes) : NULL;
    if (w->o.mask) {
        s->menc = cf__encoder_new();
        s->mtile = cf__malloc(w->mtile_bytes);
    }
    if (s->enc && s->tile && (!w->o.mask || (s->menc && s->mtile))) return CF_OK;
    cf__w_slot_free(s);
    return CF_E_NOMEM;
}

/* Encode slot s's tile (pixel-interleaved, full tile) and, with `mask`,
 * its mask tile (s->mtile's bits): *enc, *n and *menc, *mn, in the
 * slot's encoders' buffers until their next use. */
cf_status cf__w_encode_slot(const cf_writer *w, w_slot *s, const uint8_t **enc, size_t *n,
                            const uint8_t **menc, size_t *mn, cf_error *err) {
    CF__TRY(cf__codec_encode(s->enc, &w->p, &w->eo, s->tile, w->tile_bytes, enc, n, err));
    if (!w->o.mask) return CF_OK;
    /* (NULL: every default, DEFLATE at GDAL's level 6) */
    return cf__codec_encode(s->menc, &w->mp, NULL, s->mtile, w->mtile_bytes, menc, mn, err);
}

/* The fill of padding and of tiles never written. */
void cf__w_fill_px(const cf_writer *w, uint8_t *dst, size_t npx) {
    if (!w->o.has_nodata) {
        memset(dst, 0, npx * w->px);
        return;
    }
    uint8_t one[8];
    long double v = w->o.nodata;
    switch (w->o.dtype) {
#define F(E, T)                                                                                \
    case E: {                                                                                  \
        T x = (T)v;                                                                            \
        memcpy(one, &x, sizeof x);                                                             \
        break;                                                                                 \
    }
        F(CF_DT_U8, uint8_t) F(CF_DT_I8, int8_t) F(CF_DT_U16, uint16_t) F(CF_DT_I16, int16_t)
        F(CF_DT_U32, uint32_t) F(CF_DT_I32, int32_t) F(CF_DT_U64, uint64_t)
        F(CF_DT_I64, int64_t) F(CF_DT_F32, float)
    default: {
        double x = w->o.nodata;
        memcpy(one, &x, 8);
    }
#undef F
    }
    for (size_t i = 0; i < npx * w->o.bands; i++) memcpy(dst + i * w->es, one, w->es);
}

void cf__w_wait_idle(cf_writer *w) {
    while (w->inflight) pthread_cond_wait(&w->idle_cv, &w->mu);
}

void cf__w_slots_free(cf_writer *w) {
    for (int k = 0; k < w->nslots; k++) cf__w_slot_free(&w->slots[k]);
    w->nslots = 0;
}
