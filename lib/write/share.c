/*
 * share.c - a share writer: one process's rows of an image whose COG
 * several processes make together (cogfeed.h, cf_writer_share_build).
 *
 * An overview row belongs to the share that holds the last row of its
 * window in the level above; so each level's rows split into one range
 * per share, [own0, own1), in share order.  The windows of the first rows
 * of a range can begin in the share before (at most a couple of rows:
 * windows span at most 3 rows), and those rows' own rows in the next
 * level too; so share_build, which every process runs at once, makes
 * [fed0, own1) of each level from its own rows, and the carry from the
 * share before, which passes from process to process in share order,
 * brings the last rows of every level there, from which the few rows
 * [own0, fed0) are made.  The carry also brings the rows of a row of
 * overview tiles that the share before began and could not finish (its
 * last row is in this share or a later one): a row of tiles is encoded by
 * the share that holds its last row.  What passes from share to share is
 * a few rows a level and at most a row of tiles a level; what each share
 * decodes and encodes is its own part of the work, so the processes do it
 * at once, and the file assembled from the shares' tiles is the one a
 * single writer makes (the same rows from the same windows, the same
 * encoder).
 *
 * The carry, in the byte order of the machine (the shares of one job run
 * one build):
 *   u32 magic "CFCY", u32 version, u32 failed
 *   u32 levels, width, height, tile size, bytes a pixel, mask, data type,
 *     bands, overview resampling, nodata or not, the row of tiles where
 *     the shares so far end (the next share's first)
 *   per overview level l (1 ..): u32 n, then n rows of level l-1 (the
 *     last made by the shares so far): u32 index, the row, its mask row;
 *     u32 m, then m rows of level l of an unfinished row of tiles.
 */
#include "writer_state.h"

#include <stdlib.h>
#include <string.h>

#define CARRY_MAGIC 0x59434643u /* "CFCY" */
#define CARRY_VERSION 1u
#define CARRY_TAIL 3            /* rows of a level passed on: a window's */

static const uint32_t failed_carry[3] = {CARRY_MAGIC, CARRY_VERSION, 1};

#define CARRY_HEAD 14 /* u32s before the levels */

/* The carry's first words as this share writes them (and, but for the
 * last, as it expects them of the share before). */
static void head_words(const cf_writer *w, uint32_t h[CARRY_HEAD]) {
    const uint32_t v[CARRY_HEAD] = {CARRY_MAGIC,
                                    CARRY_VERSION,
                                    0,
                                    (uint32_t)w->nlev,
                                    w->lev[0].w,
                                    w->lev[0].h,
                                    w->o.tile_size,
                                    (uint32_t)w->px,
                                    (uint32_t)w->o.mask,
                                    (uint32_t)w->o.dtype,
                                    w->o.bands,
                                    (uint32_t)w->o.overview_resampling,
                                    (uint32_t)w->o.has_nodata,
                                    w->o.share_row0 + w->o.share_rows};
    memcpy(h, v, sizeof v);
}

void cf_writer_share_failed(const void **out, size_t *out_n) {
    if (out) *out = failed_carry;
    if (out_n) *out_n = sizeof failed_carry;
}

/* ------------------------------------------------------------- ranges */

/* The first of v[0 .. n) (non-decreasing: an axis's window starts x0 or
 * ends x1) at least `key`; n when none. */
static uint32_t first_at_least(const uint32_t *v, uint32_t n, uint32_t key) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid] >= key) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The first row of axis a whose window's last row is at least y. */
static uint32_t first_ending_at(const cf__ov_axis *a, uint32_t y) {
    return first_at_least(a->x1, a->dst, y + 1);
}

cf_status cf__w_share_init(cf_writer *w, cf_error *err) {
    const uint32_t T = w->o.tile_size;
    w_level *L0 = &w->lev[0];
    L0->own0 = L0->fed0 = w->o.share_row0 * T;
    uint64_t end = (uint64_t)(w->o.share_row0 + w->o.share_rows) * T;
    L0->own1 = end < L0->h ? (uint32_t)end : L0->h;
    for (int l = 1; l < w->nlev; l++) {
        w_level *L = &w->lev[l], *up = &w->lev[l - 1];
        L->own0 = first_ending_at(&L->ay, up->own0);
        L->own1 = up->own1 == up->h ? L->h : first_ending_at(&L->ay, up->own1);
        uint32_t f = first_at_least(L->ay.x0, L->h, up->fed0); /* windows from fed0 on */
        L->fed0 = f < L->own0 ? L->own0 : f > L->own1 ? L->own1 : f;
        L->next_out = L->fed0;
        L->acc_ty = L->fed0 / T;
        L->acc_rows = 0;
        if (L->fed0 - L->own0 > CF__SHARE_HEAD / 2)
            return cf__err(err, CF_E_STATE, "writer: %s: level %d: %u rows of the share's "
                           "first windows reach into the share before", w->path, l,
                           L->fed0 - L->own0);
    }
    for (int l = 0; l + 1 < w->nlev; l++) {
        w_level *L = &w->lev[l];
        L->head = cf__malloc((size_t)CF__SHARE_HEAD * L->w * w->px);
        if (!L->head || (w->o.mask && !(L->mhead = cf__malloc((size_t)CF__SHARE_HEAD * L->w))))
            return cf__err(err, CF_E_NOMEM, "writer: %s: a share's first rows", w->path);
    }
    return CF_OK;
}

cf_status cf_writer_share_tiles(const cf_writer *w, int level, uint32_t *ty0, uint32_t *ty1,
                                cf_error *err) {
    if (ty0) *ty0 = 0;
    if (ty1) *ty1 = 0;
    if (!w || !ty0 || !ty1) return cf__err(err, CF_E_ARG, "writer: NULL argument");
    if (!w->share) return cf__err(err, CF_E_ARG, "writer: %s: not a share writer", w->path);
    if (level < 0 || level >= w->nlev)
        return cf__err(err, CF_E_ARG, "writer: %s: level %d of %d", w->path, level, w->nlev);
    if (w->share < SH_BUILT && level > 0)
        return cf__err(err, CF_E_STATE, "writer: %s: the share's overview rows are known "
                       "once cf_writer_share_build ran", w->path);
    if (level == 0) {
        *ty0 = w->o.share_row0;
        *ty1 = w->o.share_row0 + w->o.share_rows;
        return CF_OK;
    }
    const w_level *L = &w->lev[level];
    const uint32_t T = w->o.tile_size;
    if (L->own0 == L->own1) return CF_OK;
    /* a row of tiles is the share's that holds its last row */
    uint32_t a = L->own0 / T, b = L->own1 == L->h ? L->ty : L->own1 / T;
    if (b > a) *ty0 = a, *ty1 = b;
    return CF_OK;
}

/* ------------------------------------------------------------- build */

/* w a share writer, open, at step `want` (w->mu held). */
static cf_status at_step(const cf_writer *w, w_share_step want, cf_error *err) {
    if (!w->share) return cf__err(err, CF_E_ARG, "writer: %s: not a share writer", w->path);
    CF__TRY(cf__w_check_open(w, err));
    if (w->share == want) return CF_OK;
    return cf__err(err, CF_E_STATE, "writer: %s: %s", w->path,
                   w->share < want       ? "cf_writer_share_build first"
                   : want == SH_TILES    ? "cf_writer_share_build ran already"
                                         : "the carry came already");
}

cf_status cf_writer_share_build(cf_writer *w, cf_error *err) {
    if (!w) return cf__err(err, CF_E_ARG, "writer: NULL");
    pthread_mutex_lock(&w->mu);
    cf__w_wait_idle(w);
    cf_status st = at_step(w, SH_TILES, err);
    if (st) {
        pthread_mutex_unlock(&w->mu);
        return st;
    }
    /* No tile comes any more: the write slots go before the pass's
     * workers take theirs (one budget). */
    cf__w_slots_free(w);
    w->share = SH_BUILT;
    if (w->nlev > 1) {
        st = cf__w_init_overviews(w, err);
        if (!st) st = cf__w_share_init(w, err);
        for (uint32_t ty = w->o.share_row0; !st && ty < w->o.share_row0 + w->o.share_rows; ty++)
            st = cf__w_feed_row0(w, ty, err);
        /* each level's last row of tiles, unfinished unless the level ends
         * in this share: held for the carry */
        for (int l = 1; !st && l < w->nlev; l++) {
            w_level *L = &w->lev[l];
            const uint32_t first = L->acc_ty * w->o.tile_size;
            if (L->next_out > first && L->next_out > L->fed0)
                st = cf__w_share_hold_acc(w, l, L->next_out - 1, err);
        }
    }
    if (st) cf__w_fail(w, st);
    pthread_mutex_unlock(&w->mu);
    return st;
}

/* ------------------------------------------------------------- carry */

typedef struct c_row {
    uint32_t j;
    const uint8_t *px, *m;
} c_row;

/* A carry read: per overview level l, the rows of level l-1 it passes on
 * (tail) and the rows of level l of an unfinished row of tiles. */
typedef struct c_in {
    c_row tail[CF__WRITER_MAX_LEVELS][CARRY_TAIL];
    uint32_t ntail[CF__WRITER_MAX_LEVELS];
    c_row *rows[CF__WRITER_MAX_LEVELS];
    uint32_t nrows[CF__WRITER_MAX_LEVELS];
} c_in;

static void c_in_free(c_in *c) {
    for (int l = 0; l < CF__WRITER_MAX_LEVELS; l++) free(c->rows[l]);
}

/* A reader over the carry's bytes: each read checked against what is
 * left. */
typedef struct c_buf {
    const uint8_t *p;
    size_t left;
} c_buf;

static int take(c_buf *b, size_t n, const uint8_t **out) {
    if (n > b->left) return 0;
    *out = b->p;
    b->p += n;
    b->left -= n;
    return 1;
}

static int take_u32(c_buf *b, uint32_t *v) {
    const uint8_t *p;
    if (!take(b, 4, &p)) return 0;
    memcpy(v, p, 4);
    return 1;
}

static cf_status bad_carry(const cf_writer *w, const char *what, cf_error *err) {
    return cf__err(err, CF_E_FORMAT, "writer: %s: the carry of the share before does not fit "
                   "this share (%s)", w->path, what);
}

/* Read the carry `in`: every size checked against this writer's options
 * and every index against its level. */
static cf_status parse(const cf_writer *w, const uint8_t *in, size_t n, c_in *c,
                       cf_error *err) {
    memset(c, 0, sizeof *c);
    c_buf b = {in, n};
    uint32_t h[CARRY_HEAD];
    for (int k = 0; k < 3; k++)
        if (!take_u32(&b, &h[k])) return bad_carry(w, "short", err);
    if (h[0] != CARRY_MAGIC || h[1] != CARRY_VERSION)
        return bad_carry(w, "not a carry of this version", err);
    if (h[2])
        return cf__err(err, CF_E_STATE, "writer: %s: a share before this one failed (its "
                       "error is its process's)", w->path);
    for (int k = 3; k < CARRY_HEAD; k++)
        if (!take_u32(&b, &h[k])) return bad_carry(w, "short", err);
    uint32_t mine[CARRY_HEAD];
    head_words(w, mine);
    if (memcmp(h + 3, mine + 3, 10 * sizeof *h))
        return bad_carry(w, "another image, tile size, data type, bands, mask, nodata or "
                         "overview resampling", err);
    if (h[13] != w->o.share_row0) {
        return cf__err(err, CF_E_FORMAT, "writer: %s: the carry is of shares ending at row of "
                       "tiles %u; this share begins at %u (shares must follow each other)",
                       w->path, h[13], w->o.share_row0);
    }
    const size_t T = w->o.tile_size;
    for (int l = 1; l < w->nlev; l++) {
        const w_level *up = &w->lev[l - 1], *L = &w->lev[l];
        uint32_t nt, nr;
        if (!take_u32(&b, &nt) || nt > CARRY_TAIL) return bad_carry(w, "its rows", err);
        c->ntail[l] = nt;
        for (uint32_t k = 0; k < nt; k++) {
            c_row *r = &c->tail[l][k];
            if (!take_u32(&b, &r->j) || r->j >= up->own0 ||
                !take(&b, (size_t)up->w * w->px, &r->px) ||
                (w->o.mask && !take(&b, up->w, &r->m)))
                return bad_carry(w, "a row of the level above", err);
        }
        if (!take_u32(&b, &nr) || nr > T) return bad_carry(w, "a row of tiles", err);
        c->nrows[l] = nr;
        if (nr && !(c->rows[l] = cf__calloc(nr, sizeof *c->rows[l])))
            return cf__err(err, CF_E_NOMEM, "writer: %s: the carry", w->path);
        for (uint32_t k = 0; k < nr; k++) {
            c_row *r = &c->rows[l][k];
            /* (an unfinished row of tiles is the one this share's first
             * row is in; none when that row begins a row of tiles) */
            if (!take_u32(&b, &r->j) || r->j >= L->own0 || L->own0 % T == 0 ||
                r->j / T != L->own0 / T ||
                !take(&b, (size_t)L->w * w->px, &r->px) ||
                (w->o.mask && !take(&b, L->w, &r->m)))
                return bad_carry(w, "a row of an unfinished row of tiles", err);
        }
    }
    if (b.left) return bad_carry(w, "bytes after its end", err);
    return CF_OK;
}

/* Row i of level l-1 for a window of level l: the carry's (a row of a
 * share before) or this share's first rows. */
static int source_row(cf_writer *w, const c_in *c, int l, uint32_t i, const uint8_t **px,
                      const uint8_t **m) {
    const w_level *up = &w->lev[l - 1];
    if (i >= up->own0) {
        if (i - up->own0 >= CF__SHARE_HEAD || i >= up->own1) return 0;
        *px = up->head + (size_t)(i - up->own0) * up->w * w->px;
        *m = up->mhead ? up->mhead + (size_t)(i - up->own0) * up->w : NULL;
        return 1;
    }
    for (uint32_t k = 0; k < c->ntail[l]; k++)
        if (c->tail[l][k].j == i) {
            *px = c->tail[l][k].px;
            *m = c->tail[l][k].m;
            return 1;
        }
    return 0;
}

/* Row i of level l-1 as this share leaves it to the next: its own (first
 * rows, or the last the build fed to level l, in that level's ring), or
 * the carry's. */
static int last_row(cf_writer *w, const c_in *c, int l, uint32_t i, const uint8_t **px,
                    const uint8_t **m) {
    const w_level *up = &w->lev[l - 1], *L = &w->lev[l];
    if (i >= up->fed0 && i < up->own1 && up->own1 - i <= CF__RING) {
        *px = L->ring + (size_t)(i % CF__RING) * up->w * w->px;
        *m = L->mring ? L->mring + (size_t)(i % CF__RING) * up->w : NULL;
        return 1;
    }
    return source_row(w, c, l, i, px, m);
}

/* The carry out, grown as it is written. */
typedef struct c_out {
    uint8_t *p;
    size_t n, cap;
    int ok;
} c_out;

static void put(c_out *o, const void *b, size_t n) {
    if (!o->ok || !n) return;
    if (!cf__grow((void **)&o->p, &o->cap, o->n + n, 1, 1 << 16)) {
        o->ok = 0;
        return;
    }
    memcpy(o->p + o->n, b, n);
    o->n += n;
}

static void put_u32(c_out *o, uint32_t v) { put(o, &v, 4); }

static void put_row(c_out *o, const cf_writer *w, uint32_t j, const uint8_t *px,
                    const uint8_t *m, uint32_t width) {
    put_u32(o, j);
    put(o, px, (size_t)width * w->px);
    if (w->o.mask) put(o, m, width);
}

/* This share's carry for the next: per level, the last rows of the level
 * above (its own, or the carry's where it has fewer) and the rows of the
 * unfinished row of tiles that ends in a later share. */
static cf_status write_carry(cf_writer *w, const c_in *c, c_out *o, cf_error *err) {
    const uint32_t T = w->o.tile_size;
    uint32_t h[CARRY_HEAD];
    head_words(w, h);
    put(o, h, sizeof h);
    for (int l = 1; l < w->nlev; l++) {
        w_level *up = &w->lev[l - 1], *L = &w->lev[l];
        uint32_t from = up->own1 > CARRY_TAIL ? up->own1 - CARRY_TAIL : 0, n = 0;
        const uint8_t *px[CARRY_TAIL], *m[CARRY_TAIL];
        uint32_t idx[CARRY_TAIL];
        for (uint32_t i = from; i < up->own1; i++) {
            if (!last_row(w, c, l, i, &px[n], &m[n])) {
                if (i >= up->own0) /* (a share before has them all, or none is) */
                    return cf__err(err, CF_E_STATE, "writer: %s: level %d: row %u not kept "
                                   "for the carry", w->path, l - 1, i);
                continue;
            }
            idx[n++] = i;
        }
        put_u32(o, n);
        for (uint32_t k = 0; k < n; k++) put_row(o, w, idx[k], px[k], m[k], up->w);
        /* the row of tiles that ends in a later share: its rows so far */
        w_held *open = NULL;
        for (int k = 0; k < CF__SHARE_HELD; k++) {
            w_held *hd = &L->held[k];
            if (!hd->used || cf__w_held_whole(w, L, hd)) continue;
            uint32_t last = hd->ty * T + cf__w_tile_rows(L, hd->ty, T) - 1;
            if (last < L->own1 || open)
                return cf__err(err, CF_E_STATE, "writer: %s: level %d: row of tiles %u "
                               "unfinished", w->path, l, hd->ty);
            open = hd;
        }
        uint32_t nr = 0;
        for (uint32_t r = 0; open && r < T; r++) nr += open->have[r];
        put_u32(o, nr);
        for (uint32_t r = 0; open && r < T; r++)
            if (open->have[r])
                put_row(o, w, open->ty * T + r, open->px + (size_t)r * L->w * w->px,
                        open->m ? open->m + (size_t)r * L->w : NULL, L->w);
    }
    return o->ok ? CF_OK : cf__err(err, CF_E_NOMEM, "writer: %s: the carry", w->path);
}

/* The rows [own0, fed0) of every level, from the carry and the share's
 * first rows, level by level (a level's made rows are the next level's
 * first rows); and the carry's rows of unfinished rows of tiles added to
 * this share's. */
static cf_status make_carried(cf_writer *w, const c_in *c, cf_error *err) {
    if (w->nlev < 2) return CF_OK;
    /* a row of the widest overview, level 1, serves every level */
    uint8_t *row = cf__malloc((size_t)w->lev[1].w * w->px);
    uint8_t *mrow = w->o.mask ? cf__malloc(w->lev[1].w) : NULL;
    cf_status st = CF_OK;
    if (!row || (w->o.mask && !mrow)) st = cf__err(err, CF_E_NOMEM, "writer: %s: a row", w->path);
    for (int l = 1; !st && l < w->nlev; l++) {
        w_level *L = &w->lev[l];
        for (uint32_t j = L->own0; !st && j < L->fed0; j++) {
            const uint8_t *rows[CF__RING], *mrows[CF__RING];
            for (uint32_t i = L->ay.x0[j]; i < L->ay.x1[j]; i++)
                if (!source_row(w, c, l, i, &rows[i - L->ay.x0[j]], &mrows[i - L->ay.x0[j]]))
                    st = cf__err(err, CF_E_FORMAT, "writer: %s: level %d: row %u of the level "
                                 "above is neither this share's nor in the carry of the share "
                                 "before", w->path, l, i);
            if (st) break;
            cf__w_make_row(w, l, j, rows, w->o.mask ? mrows : NULL, row, mrow);
            cf__w_share_head(w, l, j, row, mrow);
            st = cf__w_hold_row(w, l, j, row, mrow, err);
        }
        for (uint32_t k = 0; !st && k < c->nrows[l]; k++)
            st = cf__w_hold_row(w, l, c->rows[l][k].j, c->rows[l][k].px, c->rows[l][k].m, err);
    }
    free(row);
    free(mrow);
    return st;
}

cf_status cf_writer_share_carry(cf_writer *w, const void *in, size_t n, const void **out,
                                size_t *out_n, cf_error *err) {
    if (out) *out = NULL;
    if (out_n) *out_n = 0;
    if (!w || !out || !out_n || (!in && n)) return cf__err(err, CF_E_ARG, "writer: NULL argument");
    pthread_mutex_lock(&w->mu);
    cf_status st = at_step(w, SH_BUILT, err);
    if (!st && (!in || !n) && w->o.share_row0 > 0)
        st = cf__err(err, CF_E_ARG, "writer: %s: the share from row of tiles %u needs the "
                     "carry of the share before", w->path, w->o.share_row0);
    if (st) {
        pthread_mutex_unlock(&w->mu);
        return st;
    }
    c_in c;
    memset(&c, 0, sizeof c);
    if (in && n) st = parse(w, in, n, &c, err);
    if (!st) st = make_carried(w, &c, err);
    c_out o = {NULL, 0, 0, 1};
    if (!st) st = write_carry(w, &c, &o, err);
    c_in_free(&c);
    if (st || !o.ok) {
        free(o.p);
        if (!st) st = cf__err(err, CF_E_NOMEM, "writer: %s: the carry", w->path);
        cf__w_fail(w, st);
    } else {
        w->carry = o.p;
        *out = o.p;
        *out_n = o.n;
        w->share = SH_CARRIED;
    }
    pthread_mutex_unlock(&w->mu);
    return st;
}

/* ------------------------------------------------------------- close */

cf_status cf__w_share_close(cf_writer *w, cf_error *err) {
    if (w->share != SH_CARRIED)
        return cf__err(err, CF_E_STATE, "writer: %s: a share writer closes after "
                       "cf_writer_share_build and cf_writer_share_carry", w->path);
    const uint32_t T = w->o.tile_size;
    for (int l = 1; l < w->nlev; l++) {
        w_level *L = &w->lev[l];
        for (int k = 0; k < CF__SHARE_HELD; k++) {
            w_held *h = &L->held[k];
            if (!h->used || !cf__w_held_whole(w, L, h)) continue; /* (the next share's) */
            uint32_t rows = cf__w_tile_rows(L, h->ty, T);
            memcpy(L->acc, h->px, (size_t)rows * L->w * w->px);
            if (w->o.mask) memcpy(L->macc, h->m, (size_t)rows * L->w);
            L->acc_ty = h->ty;
            L->acc_rows = rows;
            CF__TRY(cf__w_flush_acc(w, l, err));
        }
    }
    return CF_OK;
}
