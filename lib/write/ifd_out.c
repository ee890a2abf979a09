/*
 * ifd_out.c - a TIFF directory serialised little-endian, classic or
 * BigTIFF: entries sorted by tag, values that do not fit the entry's value
 * field stored right after the directory (each at an even offset), so
 * that a directory and its arrays are one contiguous block the writer
 * places before any tile data (GDAL's COG layout).
 */
#include "write_internal.h"

#include <stdlib.h>

static unsigned type_size(uint16_t t) {
    switch (t) {
    case CF__T_ASCII: return 1;
    case CF__T_SHORT: return 2;
    case CF__T_LONG: return 4;
    default: return 8; /* RATIONAL, DOUBLE, LONG8 */
    }
}

cf_status cf__ifd_add(cf__ifd_out *d, uint16_t tag, uint16_t type, uint64_t count,
                      const void *data, cf_error *err) {
    if (d->n >= CF__MAX_TAGS) return cf__err(err, CF_E_LIMIT, "writer: too many TIFF tags");
    d->tags[d->n++] = (cf__tag){tag, type, count, data};
    return CF_OK;
}

static uint64_t payload(const cf__tag *t) { return t->count * type_size(t->type); }

uint64_t cf__ifd_size(const cf__ifd_out *d, int big) {
    uint64_t inline_max = big ? 8 : 4;
    uint64_t n = big ? 8 + 20 * (uint64_t)d->n + 8 : 2 + 12 * (uint64_t)d->n + 4;
    for (int i = 0; i < d->n; i++) {
        uint64_t b = payload(&d->tags[i]);
        if (b > inline_max) n += (b + 1) & ~(uint64_t)1;
    }
    return n;
}

static void put(uint8_t *p, uint64_t v, unsigned bytes) {
    for (unsigned i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The tag's values, little-endian, at p. */
static void put_values(const cf__tag *t, uint8_t *p) {
    unsigned s = type_size(t->type);
    const uint8_t *src = t->data;
    if (t->type == CF__T_RATIONAL) { /* two LONGs each */
        for (uint64_t i = 0; i < 2 * t->count; i++) {
            uint32_t x;
            memcpy(&x, src + 4 * i, 4);
            put(p + 4 * i, x, 4);
        }
        return;
    }
    for (uint64_t i = 0; i < t->count; i++) {
        uint64_t v = 0;
        switch (s) {
        case 1: v = src[i]; break;
        case 2: {
            uint16_t x;
            memcpy(&x, src + 2 * i, 2);
            v = x;
            break;
        }
        case 4: {
            uint32_t x;
            memcpy(&x, src + 4 * i, 4);
            v = x;
            break;
        }
        default: memcpy(&v, src + 8 * i, 8); /* a double's bits, or a LONG8 */
        }
        put(p + s * i, v, s);
    }
}

static int by_tag(const void *a, const void *b) {
    const cf__tag *x = a, *y = b;
    return (x->tag > y->tag) - (x->tag < y->tag);
}

void cf__ifd_write(const cf__ifd_out *d0, int big, uint64_t at, uint64_t next, uint8_t *out) {
    cf__ifd_out d = *d0;
    qsort(d.tags, (size_t)d.n, sizeof d.tags[0], by_tag);
    uint64_t size = cf__ifd_size(&d, big);
    memset(out, 0, (size_t)size);
    unsigned cnt = big ? 8 : 2, ent = big ? 20 : 12, off = big ? 8 : 4;
    uint64_t inline_max = big ? 8 : 4;
    put(out, (uint64_t)d.n, cnt);
    uint64_t extra = cnt + (uint64_t)ent * d.n + off; /* after the link */
    for (int i = 0; i < d.n; i++) {
        const cf__tag *t = &d.tags[i];
        uint8_t *e = out + cnt + (size_t)ent * i;
        put(e, t->tag, 2);
        put(e + 2, t->type, 2);
        put(e + 4, t->count, big ? 8 : 4);
        uint8_t *val = e + (big ? 12 : 8);
        uint64_t b = payload(t);
        if (b <= inline_max) {
            put_values(t, val);
        } else {
            put(val, at + extra, off);
            put_values(t, out + extra);
            extra += (b + 1) & ~(uint64_t)1;
        }
    }
    put(out + cnt + (size_t)ent * d.n, next, off);
}
