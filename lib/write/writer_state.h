/*
 * writer_state.h - the state of a cf_writer, shared by the two files that
 * make one: writer.c (tiles in, the spool or the stream, the overviews)
 * and layout.c (the header and directories laid out at close).  Nothing
 * else includes it.
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
    uint32_t next_out;        /* the next row of this level to make */
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
                                          overview tiles, level 0 read back */
    /* reading level 0 back for the overviews: one row of tiles */
    uint8_t *band, *mband, *comp;
    size_t compcap;
    cf__codec_ctx *ctx;
    /* object storage */
    cf__wstream *ws;                   /* NULL: a local file */
    uint8_t **pend;                    /* level 0's encoded tiles not yet sent
                                          (the image's bytes, then its mask's) */
    uint8_t *have;                     /* level 0's tiles written (or skipped) */
    uint32_t *row_have;                /* tiles of each level-0 row written */
    uint32_t next_row;                 /* level 0's next row to send */
};

/* ---- layout.c ---- */

/* The header (the TIFF header and every directory, each tile's offset
 * placed as the file lays the tiles out: the smallest overview first,
 * the full resolution last, each mask tile after its image tile) for the
 * tiles kept so far: *head bytes at *hdr (the caller frees it); classic
 * TIFF, or BigTIFF when the file would pass 4 GiB. */
cf_status cf__writer_header(cf_writer *w, uint8_t **hdr, uint64_t *head, cf_error *err);

#endif
