/*
 * share_rows.c - a share writer's kept rows (cogfeed.h,
 * cf_writer_share_build; share.c): its first rows of each level, which
 * the carry's rows of the next level read, and its rows of tiles held
 * unfinished (their other rows come from the carry, or go on in it).
 * Plain memory: the overview pass (ov_pass.c) and share.c both keep rows
 * here.
 */
#include "writer_state.h"

#include <stdlib.h>
#include <string.h>

void cf__w_share_head(cf_writer *w, int l, uint32_t y, const uint8_t *row, const uint8_t *mrow) {
    w_level *L = &w->lev[l];
    if (!L->head || y < L->own0 || y - L->own0 >= CF__SHARE_HEAD) return;
    size_t k = y - L->own0;
    memcpy(L->head + k * L->w * w->px, row, (size_t)L->w * w->px);
    if (mrow) memcpy(L->mhead + k * L->w, mrow, L->w);
}

/* The held row of tiles ty of level l, made (empty) when new; NULL: out
 * of memory, or more rows of tiles than a share holds. */
static w_held *held(cf_writer *w, int l, uint32_t ty) {
    w_level *L = &w->lev[l];
    const size_t T = w->o.tile_size;
    w_held *free_one = NULL;
    for (int k = 0; k < CF__SHARE_HELD; k++) {
        w_held *h = &L->held[k];
        if (h->used && h->ty == ty) return h;
        if (!h->used && !free_one) free_one = h;
    }
    if (!free_one) return NULL;
    w_held *h = free_one;
    if (!h->px) {
        h->px = cf__malloc(T * L->w * w->px);
        h->m = w->o.mask ? cf__malloc(T * L->w) : NULL;
        h->have = cf__malloc(T);
        if (!h->px || !h->have || (w->o.mask && !h->m)) return NULL;
    }
    memset(h->have, 0, T);
    h->used = 1;
    h->ty = ty;
    return h;
}

/* Row j of level l (and its mask row) into its held row of tiles. */
cf_status cf__w_hold_row(cf_writer *w, int l, uint32_t j, const uint8_t *row,
                          const uint8_t *mrow, cf_error *err) {
    w_level *L = &w->lev[l];
    const uint32_t T = w->o.tile_size;
    w_held *h = held(w, l, j / T);
    if (!h)
        return cf__err(err, CF_E_NOMEM, "writer: %s: level %d: a share's row of tiles",
                       w->path, l);
    memcpy(h->px + (size_t)(j % T) * L->w * w->px, row, (size_t)L->w * w->px);
    if (mrow) memcpy(h->m + (size_t)(j % T) * L->w, mrow, L->w);
    h->have[j % T] = 1;
    return CF_OK;
}

cf_status cf__w_share_hold_acc(cf_writer *w, int l, uint32_t last, cf_error *err) {
    w_level *L = &w->lev[l];
    const uint32_t T = w->o.tile_size, first = L->acc_ty * T;
    for (uint32_t j = first > L->fed0 ? first : L->fed0; j <= last; j++) {
        size_t at = (size_t)(j - first);
        CF__TRY(cf__w_hold_row(w, l, j, L->acc + at * L->w * w->px,
                         w->o.mask ? L->macc + at * L->w : NULL, err));
    }
    return CF_OK;
}

/* Held row of tiles h of level l: every one of its rows there. */
int cf__w_held_whole(const cf_writer *w, const w_level *L, const w_held *h) {
    const uint32_t n = cf__w_tile_rows(L, h->ty, w->o.tile_size);
    for (uint32_t r = 0; r < n; r++)
        if (!h->have[r]) return 0;
    return 1;
}

void cf__w_share_free(cf_writer *w) {
    for (int l = 0; l < w->nlev; l++) {
        w_level *L = &w->lev[l];
        free(L->head);
        free(L->mhead);
        for (int k = 0; k < CF__SHARE_HELD; k++) {
            free(L->held[k].px);
            free(L->held[k].m);
            free(L->held[k].have);
        }
    }
    free(w->carry);
}
