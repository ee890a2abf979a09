/*
 * test_tiff_writer.h - a tiny in-memory TIFF / BigTIFF writer for the parser's
 * tests and fuzz seeds.  Tags are written in the order they are added (so
 * tests can make unsorted or duplicate tags); the layout is
 *   header | data area | IFD 0 | its out-of-line data | IFD 1 | ...
 * The data area (tw_reserve) stands in for pixel data whose offsets are
 * known before layout.  After tw_finish, ifd_off[] and tag_pos() let a test
 * patch bytes to make a file malformed.
 */
#ifndef CF_TEST_TIFF_WRITER_H
#define CF_TEST_TIFF_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TW_MAX_IFDS 2048
#define TW_MAX_TAGS 48

typedef struct tw_tag {
    uint16_t tag, type;
    uint64_t count;
    uint8_t *data; /* encoded values */
    size_t len;
    uint64_t entry_pos; /* file offset of the entry, after tw_finish */
} tw_tag;

typedef struct tw_ifd {
    tw_tag t[TW_MAX_TAGS];
    int n;
} tw_ifd;

typedef struct tw {
    bool big, be;
    tw_ifd *ifd;
    int nifd;
    size_t data_len;
    uint8_t *out;
    size_t len, cap;
    uint64_t ifd_off[TW_MAX_IFDS];
} tw;

static inline void tw_init(tw *w, bool big, bool be) {
    memset(w, 0, sizeof *w);
    w->big = big;
    w->be = be;
    w->ifd = calloc(TW_MAX_IFDS, sizeof *w->ifd);
}

static inline void tw_free(tw *w) {
    for (int i = 0; i < w->nifd; i++)
        for (int k = 0; k < w->ifd[i].n; k++) free(w->ifd[i].t[k].data);
    free(w->ifd);
    free(w->out);
}

static inline uint64_t tw_hsize(const tw *w) { return w->big ? 16 : 8; }

/* Reserve `n` bytes of data area; returns its file offset. */
static inline uint64_t tw_reserve(tw *w, size_t n) {
    uint64_t off = tw_hsize(w) + w->data_len;
    w->data_len += n;
    return off;
}

static inline int tw_new_ifd(tw *w) { return w->nifd++; }

static inline unsigned tw_tsize(uint16_t type) {
    switch (type) {
    case 3: case 8: return 2;
    case 4: case 9: case 11: case 13: return 4;
    case 5: case 10: case 12: case 16: case 17: case 18: return 8;
    default: return 1;
    }
}

static inline void tw_put(const tw *w, uint8_t *p, uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        unsigned sh = w->be ? 8 * (n - 1 - i) : 8 * i;
        p[i] = (uint8_t)(v >> sh);
    }
}

static inline tw_tag *tw_add(tw *w, uint16_t tag, uint16_t type, uint64_t count,
                      size_t len) {
    tw_ifd *d = &w->ifd[w->nifd - 1];
    tw_tag *t = &d->t[d->n++];
    t->tag = tag;
    t->type = type;
    t->count = count;
    t->len = len;
    t->data = calloc(len ? len : 1, 1);
    return t;
}

/* Integer tag (BYTE, SHORT, LONG, LONG8 ...). */
static inline void tw_ints(tw *w, uint16_t tag, uint16_t type, uint64_t count,
                    const uint64_t *v) {
    unsigned sz = tw_tsize(type);
    tw_tag *t = tw_add(w, tag, type, count, (size_t)count * sz);
    for (uint64_t i = 0; i < count; i++) tw_put(w, t->data + i * sz, v[i], sz);
}

static inline void tw_int(tw *w, uint16_t tag, uint16_t type, uint64_t v) {
    tw_ints(w, tag, type, 1, &v);
}

/* DOUBLE (12) or RATIONAL (5: value*1000/1000, or den=0 for NaN tests). */
static inline void tw_doubles(tw *w, uint16_t tag, uint64_t count, const double *v) {
    tw_tag *t = tw_add(w, tag, 12, count, (size_t)count * 8);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t u;
        memcpy(&u, &v[i], 8);
        tw_put(w, t->data + i * 8, u, 8);
    }
}

static inline void tw_rational(tw *w, uint16_t tag, uint32_t num, uint32_t den) {
    tw_tag *t = tw_add(w, tag, 5, 1, 8);
    tw_put(w, t->data, num, 4);
    tw_put(w, t->data + 4, den, 4);
}

/* ASCII; with_nul = false leaves the terminator out (malformed). */
static inline void tw_ascii(tw *w, uint16_t tag, const char *s, bool with_nul) {
    size_t n = strlen(s) + (with_nul ? 1 : 0);
    tw_tag *t = tw_add(w, tag, 2, n, n);
    memcpy(t->data, s, n);
}

/* Raw entry with any type code and count (for unknown types, overflows). */
static inline void tw_raw(tw *w, uint16_t tag, uint16_t type, uint64_t count,
                   const void *data, size_t len) {
    tw_tag *t = tw_add(w, tag, type, count, len);
    if (len) memcpy(t->data, data, len);
}

static inline void tw_grow(tw *w, size_t need) {
    if (need <= w->cap) return;
    size_t nc = w->cap ? w->cap : 4096;
    while (nc < need) nc *= 2;
    w->out = realloc(w->out, nc);
    memset(w->out + w->cap, 0, nc - w->cap);
    w->cap = nc;
}

/* Lay the file out.  Raw entries whose data does not match count x size
 * keep their data out of line when it exceeds the inline field. */
static inline const uint8_t *tw_finish(tw *w, size_t *len) {
    unsigned inl = w->big ? 8 : 4, esz = w->big ? 20 : 12;
    unsigned cnt = w->big ? 8 : 2, nxt = w->big ? 8 : 4;
    uint64_t pos = tw_hsize(w) + w->data_len;
    pos += pos & 1;
    tw_grow(w, pos);
    w->len = pos;
    for (int i = 0; i < w->nifd; i++) {
        tw_ifd *d = &w->ifd[i];
        w->ifd_off[i] = pos;
        uint64_t data = pos + cnt + (uint64_t)d->n * esz + nxt;
        uint64_t end = data;
        for (int k = 0; k < d->n; k++)
            if (d->t[k].len > inl) end += d->t[k].len + (d->t[k].len & 1);
        tw_grow(w, end);
        tw_put(w, w->out + pos, (uint64_t)d->n, cnt);
        for (int k = 0; k < d->n; k++) {
            tw_tag *t = &d->t[k];
            uint8_t *e = w->out + pos + cnt + (uint64_t)k * esz;
            t->entry_pos = pos + cnt + (uint64_t)k * esz;
            tw_put(w, e, t->tag, 2);
            tw_put(w, e + 2, t->type, 2);
            tw_put(w, e + 4, t->count, w->big ? 8 : 4);
            uint8_t *val = e + (w->big ? 12 : 8);
            if (t->len <= inl) {
                memcpy(val, t->data, t->len);
            } else {
                tw_put(w, val, data, inl);
                memcpy(w->out + data, t->data, t->len);
                data += t->len + (t->len & 1);
            }
        }
        pos = end;
        w->len = end;
    }
    /* Next-IFD pointers. */
    for (int i = 0; i < w->nifd; i++) {
        uint64_t at = w->ifd_off[i] + cnt + (uint64_t)w->ifd[i].n * esz;
        tw_put(w, w->out + at, i + 1 < w->nifd ? w->ifd_off[i + 1] : 0, nxt);
    }
    /* Header. */
    w->out[0] = w->out[1] = w->be ? 'M' : 'I';
    tw_put(w, w->out + 2, w->big ? 43 : 42, 2);
    if (w->big) {
        tw_put(w, w->out + 4, 8, 2);
        tw_put(w, w->out + 6, 0, 2);
        tw_put(w, w->out + 8, w->nifd ? w->ifd_off[0] : 0, 8);
    } else {
        tw_put(w, w->out + 4, w->nifd ? w->ifd_off[0] : 0, 4);
    }
    *len = w->len;
    return w->out;
}

/* Position of the next-IFD pointer of IFD i (after tw_finish). */
static inline uint64_t tw_next_pos(const tw *w, int i) {
    return w->ifd_off[i] + (w->big ? 8 : 2) +
           (uint64_t)w->ifd[i].n * (w->big ? 20 : 12);
}

/* Overwrite an unsigned value of n bytes at pos in the finished file. */
static inline void tw_patch(tw *w, uint64_t pos, uint64_t v, unsigned n) {
    tw_put(w, w->out + pos, v, n);
}

typedef struct tw_image {
    uint32_t width, height, tw, th; /* tw = 0: stripped, th = rows/strip */
    uint16_t spp, bits, sf, planar, compression, photometric;
    uint32_t subfile;
    int skip_tag; /* leave this tag out (0: none) */
    int64_t chunk_entries; /* override the entry count (-1: correct) */
} tw_image;

static inline tw_image tw_image_default(uint32_t w, uint32_t h) {
    tw_image im = {w, h, 256, 256, 1, 8, 1, 1, 8, 1, 0, 0, -1};
    return im;
}

/* Append one image IFD whose chunks each point at 1 byte of a shared data
 * area.  Offsets are LONG (LONG8 in BigTIFF). */
static inline int tw_image_ifd(tw *w, const tw_image *im) {
    int idx = tw_new_ifd(w);
    uint32_t cw = im->tw ? im->tw : im->width;
    uint32_t ch = im->th ? im->th : im->height;
    if (ch > im->height) ch = im->height;
    uint64_t n = (uint64_t)((im->width + cw - 1) / cw) *
                 ((im->height + ch - 1) / ch);
    if (im->planar == 2) n *= im->spp;
    if (im->chunk_entries >= 0) n = (uint64_t)im->chunk_entries;
    uint64_t base = tw_reserve(w, (size_t)n + 1);
    uint64_t *off = calloc(n ? n : 1, 8), *cnt = calloc(n ? n : 1, 8);
    for (uint64_t k = 0; k < n; k++) {
        off[k] = base + k;
        cnt[k] = 1;
    }
    uint64_t bits[8];
    for (int k = 0; k < 8; k++) bits[k] = im->bits;
    uint16_t at = w->big ? 16 : 4;
    if (im->subfile) tw_int(w, 254, 4, im->subfile);
    if (im->skip_tag != 256) tw_int(w, 256, 4, im->width);
    if (im->skip_tag != 257) tw_int(w, 257, 4, im->height);
    if (im->skip_tag != 258)
        tw_ints(w, 258, 3, im->spp <= 8 ? im->spp : 1, bits);
    tw_int(w, 259, 3, im->compression);
    tw_int(w, 262, 3, im->photometric);
    if (!im->tw && im->skip_tag != 273) tw_ints(w, 273, at, n, off);
    tw_int(w, 277, 3, im->spp);
    if (!im->tw) tw_int(w, 278, 4, ch);
    if (!im->tw && im->skip_tag != 279) tw_ints(w, 279, at, n, cnt);
    tw_int(w, 284, 3, im->planar);
    if (im->tw) {
        tw_int(w, 322, 4, im->tw);
        tw_int(w, 323, 4, im->th);
        if (im->skip_tag != 324) tw_ints(w, 324, at, n, off);
        if (im->skip_tag != 325) tw_ints(w, 325, at, n, cnt);
    }
    if (im->sf != 1) {
        uint64_t sf[8];
        for (int k = 0; k < 8; k++) sf[k] = im->sf;
        tw_ints(w, 339, 3, im->spp <= 8 ? im->spp : 1, sf);
    }
    free(off);
    free(cnt);
    return idx;
}

#endif
