/*
 * writer_state.h - the state of a cf_writer, shared by the files that
 * make one: writer.c (tiles in, close, abort), slot.c (a tile's encoders
 * and buffers), sink.c (the spool or the stream), ov_pass.c (the
 * overviews) and layout.c (the header and directories laid out at
 * close).  Nothing else includes it.
 */
#ifndef CF_WRITER_STATE_H
#define CF_WRITER_STATE_H

#include "../codec/codec.h"
#include "../geo/geo.h"
#include "write_internal.h"

#include <pthread.h>
#include <stdint.h>

#define CF__WRITER_MAX_LEVELS 24

typedef enum { W_OPEN, W_FAILED } w_state;

/* A share writer's steps (cogfeed.h, cf_writer_share_build): tiles come,
 * then the share's own overview rows are built, then the carry of the
 * share before makes the rest, then close. */
typedef enum { SH_NONE, SH_TILES, SH_BUILT, SH_CARRIED } w_share_step;

/* A share writer's first rows of a level kept for the carry (the rows of
 * the next level whose windows begin in an earlier share end at most a
 * few rows into this one), and its rows of tiles held unfinished (the
 * first, whose rows begin in an earlier share or come from the carry,
 * the last, which ends in a later share, and one more where the carry's
 * rows reach back into the row of tiles before the first). */
#define CF__SHARE_HEAD 8
#define CF__SHARE_HELD 3
typedef struct w_held {
    int used;
    uint32_t ty;               /* the row of tiles */
    uint8_t *px, *m;           /* T rows of the level's width (and mask) */
    uint8_t *have;             /* T flags: the row is there */
} w_held;

typedef struct w_level {
    uint32_t w, h, tx, ty;  /* pixels, tiles across and down */
    uint64_t *off, *len;     /* each tile in the spool (len 0: sparse) */
    uint64_t *moff, *mlen;   /* its mask tile (with the `mask` option) */
    /* close(): the row of tiles being assembled; the windows over the
     * level above and its last CF__RING rows (a window spans at most 3) */
    uint8_t *acc;
    uint32_t acc_rows, acc_ty;
    cf__ov_axis ax, ay;
    uint8_t *ring;
    uint8_t *macc, *mring;    /* the same for the mask, a byte a pixel */
    /* nearest: GDAL takes a mask's overviews straight from the full
     * resolution (its images' from the level above): the axes from level
     * 0, and the rows made as level 0's pass, kept until used */
    cf__ov_axis n0x, n0y;
    uint8_t *mnear;
    uint32_t mnext;
    uint32_t next_out;        /* the next row of this level to make
                                 (given overviews of an object: the next
                                 tile to come) */
    /* a share writer (share.c): the rows of this level the share owns
     * [own0, own1); those cf_writer_share_build makes [fed0, own1) (the
     * windows of [own0, fed0) reach into earlier shares: the carry makes
     * them); its first rows (for the next level's rows the carry makes);
     * rows of tiles not made whole by share_build */
    uint32_t own0, own1, fed0;
    uint8_t *head, *mhead;
    w_held held[CF__SHARE_HELD];
} w_level;

#define CF__RING 4

/* A full-resolution tile being encoded outside the writer's lock by one
 * cf_writer_write_tile call: its own encoders (the image's and the
 * mask's: each returns bytes in its own buffer) and pixel buffers.
 * Made on demand, at most CF__WRITER_SLOTS (one per CPU), so that tiles
 * written from several threads are encoded at once. */
#define CF__WRITER_SLOTS 64
typedef struct w_slot {
    cf__encoder *enc, *menc;
    uint8_t *tile, *mtile;
    int busy;
} w_slot;

/* A thread of the overview pass (ov_pass.c): its slot (encoders and a
 * tile's buffers), decoder, a spooled tile read back, and its share of a
 * row's encoded tiles. */
typedef struct w_ovw {
    w_slot s;
    cf__codec_ctx *ctx;
    uint8_t *comp, *out;
    size_t compcap, outlen, outcap;
} w_ovw;
/* Where a row's encoded tile is: worker k's buffer at off, n bytes and
 * then its mask's mn. */
typedef struct w_ovt {
    int k;
    size_t off, n, mn;
} w_ovt;
struct cf_writer {
    pthread_mutex_t mu;
    pthread_cond_t slot_cv;            /* a slot came free */
    pthread_cond_t idle_cv;            /* inflight fell to 0 */
    w_slot slots[CF__WRITER_SLOTS];
    int nslots, maxslots;
    int inflight;                      /* write_tile calls holding a slot:
                                          close and abort wait for them */
    w_state state;
    cf_status fail;
    cf_writer_options o;
    char **desc;
    double *scales, *offsets;
    int epsg, geographic, has_gt;
    cf__geokeys_out *gk;               /* a CRS without an EPSG code */
    double gt[6];
    char *path, *spool_path;
    int spool_fd;
    uint64_t spool_end;
    int nlev;                          /* levels, full resolution first */
    w_level lev[CF__WRITER_MAX_LEVELS];
    cf__codec_params p;                /* one full tile */
    cf__encode_opts eo;
    size_t es, px, tile_bytes;
    cf__codec_params mp;               /* one mask tile (`mask`) */
    size_t mtile_bytes;
    w_slot ov;                         /* the writer's own (under its lock):
                                          a tile given encoded, decoded */
    cf__codec_ctx *ctx;
    /* the overview pass (ov_pass.c): level 0's row of tiles read back,
     * its threads, and where a row's encoded tiles are */
    uint8_t *band, *mband;
    w_ovw *ovw;
    int novw;
    w_ovt *ovt;
    /* object storage */
    cf__wstream *ws;                   /* NULL: a local file */
    uint8_t **pend;                    /* level 0's encoded tiles not yet sent
                                          (the image's bytes, then its mask's) */
    uint8_t *have;                     /* level 0's tiles written (or skipped) */
    uint32_t *row_have;                /* tiles of each level-0 row written */
    uint32_t next_row;                 /* level 0's next row to send */
    /* a share writer (share.c) */
    w_share_step share;
    uint8_t *carry;                    /* the carry out, until close */
    uint8_t *layout_hdr;               /* a layout writer's last header */
};

/* The most encoded bytes a tile (mask: its mask tile) may take, twice a
 * raw one and a little: what a tile given encoded or a size given to a
 * layout is checked against, and what an object's part numbers assume
 * for a level. */
static inline uint64_t cf__w_tile_cap(const cf_writer *w, int mask) {
    return 2 * (uint64_t)(mask ? w->mtile_bytes : w->tile_bytes) + 1024;
}

/* Fail the writer (its first failure stays) and return st. */
static inline cf_status cf__w_fail(cf_writer *w, cf_status st) {
    if (w->state == W_OPEN) {
        w->state = W_FAILED;
        w->fail = st;
    }
    return st;
}

/* CF_E_STATE when an earlier call failed the writer. */
static inline cf_status cf__w_check_open(const cf_writer *w, cf_error *err) {
    if (w->o.layout_only)
        return cf__err(err, CF_E_STATE, "writer: %s: a layout writer (layout_only) takes no "
                       "tile: cf_writer_layout", w->path);
    if (w->state == W_OPEN) return CF_OK;
    return cf__err(err, CF_E_STATE, "writer: %s: an earlier call failed (%s)", w->path,
                   cf_status_name(w->fail));
}

/* Pixel rows of level L's row of tiles ty (tiles of T rows; the last
 * row of tiles ends with the level). */
static inline uint32_t cf__w_tile_rows(const w_level *L, uint32_t ty, uint32_t T) {
    return L->h - ty * T < T ? L->h - ty * T : T;
}

/* ---- slot.c ---- */
/* Wait (w->mu held) until no write_tile call is encoding in a slot:
 * close, abort and a share's build free the slots, and a tile being
 * encoded when they are called is written first, as when calls held the
 * lock throughout. */
void cf__w_wait_idle(cf_writer *w);
/* The write slots freed (no tile comes any more, or the writer goes). */
void cf__w_slots_free(cf_writer *w);
/* A slot's encoders and buffers (with `mask`, the mask's too); CF_E_NOMEM
 * leaves it empty. */
cf_status cf__w_slot_make(const cf_writer *w, w_slot *s);
void cf__w_slot_free(w_slot *s);
/* Encode slot s's tile (pixel-interleaved, full tile) and, with `mask`,
 * its mask tile (s->mtile's bits): *enc, *n and *menc, *mn, in the
 * slot's encoders' buffers until their next use. */
cf_status cf__w_encode_slot(const cf_writer *w, w_slot *s, const uint8_t **enc, size_t *n,
                            const uint8_t **menc, size_t *mn, cf_error *err);
/* npx pixels of dst set to the fill of padding and of tiles never
 * written (the nodata, or 0). */
void cf__w_fill_px(const cf_writer *w, uint8_t *dst, size_t npx);

/* ---- sink.c ---- */
/* All n bytes at `at` of fd written / read; errors name `what`. */
cf_status cf__w_pwrite(int fd, const void *buf, size_t n, uint64_t at, const char *what,
                       cf_error *err);
cf_status cf__w_pread(int fd, void *buf, size_t n, uint64_t at, const char *what,
                      cf_error *err);
/* Keep n encoded bytes of tile i of level l (its mask's when `mask`),
 * right after what came before them: appended to the spool (a local
 * file); for an object, level 0's held until its row is sent (w->pend,
 * the image's bytes then the mask's), an overview's sent (their tiles
 * come in row order). */
cf_status cf__w_keep(cf_writer *w, int l, size_t i, int mask, const uint8_t *enc, size_t n,
                     cf_error *err);

/* ---- ov_pass.c ---- */
/* The overviews' row machinery, one row of level 0 tiles to read back
 * into, and the pass's threads. */
cf_status cf__w_init_overviews(cf_writer *w, cf_error *err);
/* Row ty of level 0's tiles: read back (the spool, or the tiles held for
 * an object, which then go to the stream), decoded and fed to the
 * overviews, with their masks. */
cf_status cf__w_feed_row0(cf_writer *w, uint32_t ty, cf_error *err);
/* A local file: read the full resolution back a row of tiles at a time
 * and build every overview from it. */
cf_status cf__w_build_overviews(cf_writer *w, cf_error *err);
void cf__w_overviews_free(cf_writer *w);

/* Level l's row j is made in its acc (at j's place in its row of tiles):
 * encoded and kept once its row of tiles is whole, or (a share writer)
 * held when rows of it come from elsewhere. */
cf_status cf__w_row_made(cf_writer *w, int l, uint32_t j, cf_error *err);
/* Encode level l's assembled row of tiles (acc_ty, acc_rows rows). */
cf_status cf__w_flush_acc(cf_writer *w, int l, cf_error *err);
/* The overview row j of level l made from rows[0 .. n) of the level above
 * (rows[0] is row ay.x0[j]) and their mask rows into out / mout. */
void cf__w_make_row(cf_writer *w, int l, uint32_t j, const uint8_t *const *rows,
                    const uint8_t *const *mrows, uint8_t *out, uint8_t *mout);

/* ---- share_rows.c: a share writer's kept rows ---- */
/* Row y of level l (and its mask row) made or read back by share_build:
 * kept when it is one of the share's first rows of that level. */
void cf__w_share_head(cf_writer *w, int l, uint32_t y, const uint8_t *row, const uint8_t *mrow);
/* Row j of level l (and its mask row) into its held row of tiles. */
cf_status cf__w_hold_row(cf_writer *w, int l, uint32_t j, const uint8_t *row,
                         const uint8_t *mrow, cf_error *err);
/* Level l's row of tiles in acc (acc_ty; its rows from fed0 to the last
 * made) moved to the held rows of tiles. */
cf_status cf__w_share_hold_acc(cf_writer *w, int l, uint32_t last, cf_error *err);
/* Held row of tiles h of level L: every one of its rows there. */
int cf__w_held_whole(const cf_writer *w, const w_level *L, const w_held *h);
void cf__w_share_free(cf_writer *w);

/* ---- share.c: a share writer's steps and carries ---- */
/* The share's rows of each level (own0, own1, fed0) from the options. */
cf_status cf__w_share_init(cf_writer *w, cf_error *err);
/* close: the rows of tiles the carry made whole, encoded and kept. */
cf_status cf__w_share_close(cf_writer *w, cf_error *err);

/* ---- layout.c ---- */

/* The header (the TIFF header and every directory, each tile's offset
 * placed as the file lays the tiles out: the smallest overview first,
 * the full resolution last, each mask tile after its image tile) for the
 * tiles kept so far: *head bytes at *hdr (the caller frees it); classic
 * TIFF, or BigTIFF when the file would pass 4 GiB. */
cf_status cf__writer_header(cf_writer *w, uint8_t **hdr, uint64_t *head, cf_error *err);

#endif
