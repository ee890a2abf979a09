/*
 * read_plan.c - the one read planner (read_plan.h): from a window of an
 * IFD to the chunks it needs and where each one's pixels go.
 */
#include "read_plan.h"

uint32_t cf__plan_planes(const int *bands0, int nb, int *planes) {
    uint32_t n = 0;
    for (int k = 0; k < nb; k++) {
        int dup = 0;
        for (uint32_t j = 0; j < n; j++) dup |= planes[j] == bands0[k];
        if (!dup) planes[n++] = bands0[k];
    }
    return n;
}

/* Chunk i of the plan's grid: its column, row and band plane. */
static void chunk_at(const cf__plan *p, const cf__tiff_ifd *ifd, uint64_t i, uint32_t *cx,
                     uint32_t *cy, uint32_t *plane) {
    uint64_t per = (uint64_t)p->cols * p->rows, r = i % per;
    *cx = p->cx0 + (uint32_t)(r % p->cols);
    *cy = p->cy0 + (uint32_t)(r / p->cols);
    *plane = ifd->planar == 2 ? (uint32_t)p->planes[i / per] : 0;
}

void cf__plan_init(cf__plan *p, const cf_cog *cog, int ifdi, int64_t x, int64_t y,
                   uint32_t w, uint32_t h, const int *planes, uint32_t nplanes) {
    const cf__tiff_ifd *ifd = &cog->tiff->ifds[ifdi];
    memset(p, 0, sizeof *p);
    p->cog = cog;
    p->ifdi = ifdi;
    p->x = x;
    p->y = y;
    p->w = w;
    p->h = h;
    p->planes = planes;
    p->nplanes = ifd->planar == 2 ? nplanes : 1;
    /* Clip the window to the image; what lies outside is fill. */
    int64_t x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    int64_t x1 = x + (int64_t)w, y1 = y + (int64_t)h;
    if (x1 > (int64_t)ifd->width) x1 = ifd->width;
    if (y1 > (int64_t)ifd->height) y1 = ifd->height;
    int inside = x0 == x && y0 == y && x1 == x + (int64_t)w && y1 == y + (int64_t)h;
    p->prefill = !inside;
    if (x0 >= x1 || y0 >= y1) return;
    p->cx0 = (uint32_t)(x0 / ifd->chunk_w);
    p->cy0 = (uint32_t)(y0 / ifd->chunk_h);
    p->cols = (uint32_t)((x1 - 1) / ifd->chunk_w) - p->cx0 + 1;
    p->rows = (uint32_t)((y1 - 1) / ifd->chunk_h) - p->cy0 + 1;
    p->count = (uint64_t)p->nplanes * p->cols * p->rows;
    if (p->prefill) return;
    /* A sparse chunk reads as the fill value: fill first, paste over it. */
    const uint64_t per_plane = (uint64_t)ifd->chunks_across * ifd->chunks_down;
    for (uint64_t i = 0; i < p->count; i++) {
        uint32_t cx, cy, pl;
        chunk_at(p, ifd, i, &cx, &cy, &pl);
        uint64_t idx = pl * per_plane + (uint64_t)cy * ifd->chunks_across + cx;
        if (idx < ifd->nchunks && ifd->counts[idx] == 0) {
            p->prefill = 1;
            return;
        }
    }
}

cf_status cf__plan_peek(cf__plan *p, cf__chunk *c, int *has, cf_error *err) {
    const cf__tiff_ifd *ifd = &p->cog->tiff->ifds[p->ifdi];
    *has = 0;
    for (; p->next < p->count; p->next++) {
        uint32_t cx, cy, pl;
        chunk_at(p, ifd, p->next, &cx, &cy, &pl);
        CF__TRY(cf__cog_chunk(p->cog, p->ifdi, cx, cy, pl, c, err));
        if (c->len) {
            *has = 1;
            return CF_OK;
        }
    }
    return CF_OK;
}

int cf__plan_chunk_rect(const cf__tiff_ifd *ifd, const cf__chunk *c, int64_t x, int64_t y,
                        uint32_t w, uint32_t h, cf__rect *r) {
    /* The chunk's pixels, clipped to the image (edge tiles are padded,
     * the last strip is short). */
    int64_t px0 = (int64_t)c->cx * ifd->chunk_w, py0 = (int64_t)c->cy * ifd->chunk_h;
    int64_t px1 = px0 + ifd->chunk_w, py1 = py0 + ifd->chunk_h;
    if (px1 > (int64_t)ifd->width) px1 = ifd->width;
    if (py1 > (int64_t)ifd->height) py1 = ifd->height;
    r->x0 = px0 > x ? px0 : x;
    r->y0 = py0 > y ? py0 : y;
    r->x1 = px1 < x + (int64_t)w ? px1 : x + (int64_t)w;
    r->y1 = py1 < y + (int64_t)h ? py1 : y + (int64_t)h;
    return r->x0 < r->x1 && r->y0 < r->y1;
}
