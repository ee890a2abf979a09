/*
 * stream.c - a COG's tile data sent to object storage as it is encoded,
 * its header last, in its place.
 *
 * The file is: header (every directory), then each level's tiles, the
 * smallest overview first and the full resolution last.  Each level's
 * bytes arrive in file order within the level, but the levels arrive
 * together (an overview row is made as the rows above it complete) and the
 * header only at the end.  So each level gets a range of part numbers, in
 * file order: the first number of a range is kept for the part that will
 * hold the level's first bytes, which wait in memory ("head", at least a
 * part's size) until close; the bytes after them go up as parts of
 * `part` bytes each as soon as they are there ("middle" parts); the last
 * bytes of a level, less than a part ("tail"), wait too.
 *
 * At close, walking the levels in file order with a carry that starts as
 * the header: a level with middle parts sends carry + its head as its
 * first part (at least a part's size: S3 wants 5 MiB of every part but
 * the last) and keeps its tail as the new carry; a level without middle
 * parts joins the carry whole.  The last carry is the last part.  S3
 * sorts parts by number and Azure commits blocks in the order listed, so
 * the object is the file.
 *
 * Memory: per level at most a head and a part being filled (each a part
 * plus a tile), plus the parts queued and being sent (upload.c).  Local
 * disk: none.
 */
#include "../io/upload.h"
#include "write_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct s_level {
    uint8_t *head, *buf;
    size_t head_len, head_cap, buf_len, buf_cap;
    int head_done;              /* the head is full: bytes go to buf */
    uint32_t first, next, last; /* part numbers: reserved, next middle, range end */
    int middles;                /* middle parts sent */
} s_level;

struct cf__wstream {
    cf__upload *up;
    uint64_t part;
    int nlev;
    s_level lev[CF__WSTREAM_MAX_LEVELS];
};

cf_status cf__wstream_new(cf_io *io, const char *url, const char *name, uint64_t part_size,
                          int nlev, const uint64_t *bound, cf__wstream **out, cf_error *err) {
    *out = NULL;
    if (nlev < 1 || nlev > CF__WSTREAM_MAX_LEVELS)
        return cf__err(err, CF_E_ARG, "writer: %s: %d levels", name, nlev);
    if (part_size > CF__WSTREAM_MAX_PART)
        return cf__err(err, CF_E_ARG, "writer: %s: part_size %llu above %llu bytes (a "
                       "level's first part carries up to 4 parts' bytes; S3 takes 5 GiB, "
                       "Azure 4000 MiB)", name, (unsigned long long)part_size,
                       (unsigned long long)CF__WSTREAM_MAX_PART);
    cf__wstream *s = cf__calloc(1, sizeof *s);
    if (!s) return cf__err(err, CF_E_NOMEM, "writer: out of memory");
    s->nlev = nlev;
    /* The part size: asked for (at least the store's minimum), raised
     * until every level's worst case fits the 10,000 numbers. */
    uint64_t part = part_size ? part_size : CF__WSTREAM_DEFAULT_PART;
    if (part < CF__UPLOAD_S3_MIN_PART) part = CF__UPLOAD_S3_MIN_PART;
    for (;;) {
        uint64_t n = 0;
        for (int l = 0; l < nlev; l++) n += bound[l] / part + 3;
        if (n <= CF__UPLOAD_MAX_PARTS || part > CF__WSTREAM_MAX_PART) break;
        part += part / 2;
    }
    if (part > CF__WSTREAM_MAX_PART) {
        free(s);
        return cf__err(err, CF_E_LIMIT, "writer: %s: the output may need more than 10,000 "
                       "parts of %llu bytes (its worst case, twice its raw size, is too "
                       "large for one object)", name, (unsigned long long)CF__WSTREAM_MAX_PART);
    }
    s->part = part;
    uint32_t at = 1;
    for (int l = nlev - 1; l >= 0; l--) { /* file order: smallest level first */
        s_level *L = &s->lev[l];
        L->first = at;
        L->next = at + 1;
        L->last = at + (uint32_t)(bound[l] / part) + 2;
        at = L->last + 1;
    }
    cf_status st = cf__upload_new(io, url, CF__WSTREAM_INFLIGHT, &s->up, err);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return CF_OK;
}

uint64_t cf__wstream_part_size(const cf__wstream *s) { return s->part; }

static int grow(uint8_t **b, size_t *cap, size_t need) {
    return cf__grow((void **)b, cap, need, 1, 1 << 16);
}

cf_status cf__wstream_put(cf__wstream *s, int l, const uint8_t *data, size_t n, cf_error *err) {
    s_level *L = &s->lev[l];
    const char *name = cf__upload_name(s->up);
    if (!L->head_done) {
        if (!grow(&L->head, &L->head_cap, L->head_len + n))
            return cf__err(err, CF_E_NOMEM, "writer: %s: out of memory", name);
        memcpy(L->head + L->head_len, data, n);
        L->head_len += n;
        L->head_done = L->head_len >= s->part;
        return CF_OK;
    }
    if (!grow(&L->buf, &L->buf_cap, L->buf_len + n))
        return cf__err(err, CF_E_NOMEM, "writer: %s: out of memory", name);
    memcpy(L->buf + L->buf_len, data, n);
    L->buf_len += n;
    if (L->buf_len < s->part) return CF_OK;
    if (L->next >= L->last) /* the last number stays for the level's end */
        return cf__err(err, CF_E_LIMIT, "writer: %s: level %d passed its %u parts of %llu "
                       "bytes (the encoder's output far above its bound)", name, l,
                       L->last - L->first, (unsigned long long)s->part);
    uint8_t *part = L->buf;
    size_t len = L->buf_len;
    L->buf = NULL;
    L->buf_len = L->buf_cap = 0;
    L->middles++;
    return cf__upload_part(s->up, L->next++, part, len, err);
}

/* carry += b[0, n) */
static int append(uint8_t **carry, size_t *len, size_t *cap, const uint8_t *b, size_t n) {
    if (!n) return 1;
    if (!grow(carry, cap, *len + n)) return 0;
    memcpy(*carry + *len, b, n);
    *len += n;
    return 1;
}

cf_status cf__wstream_finish(cf__wstream *s, const uint8_t *header, size_t hlen,
                             cf_error *err) {
    uint8_t *carry = NULL;
    size_t len = 0, cap = 0;
    cf_status st = CF_OK;
    const char *name = cf__upload_name(s->up);
    int ok = append(&carry, &len, &cap, header, hlen);
    uint32_t last = 1;
    for (int l = s->nlev - 1; ok && !st && l >= 0; l--) {
        s_level *L = &s->lev[l];
        ok = append(&carry, &len, &cap, L->head, L->head_len);
        if (ok && L->middles) {
            st = cf__upload_part(s->up, L->first, carry, len, err);
            carry = NULL;
            len = cap = 0;
        }
        if (ok && !st) ok = append(&carry, &len, &cap, L->buf, L->buf_len);
        last = L->next;
    }
    if (!ok) st = cf__err(err, CF_E_NOMEM, "writer: %s: out of memory", name);
    /* The last part, whatever its size; none when the full resolution
     * ended on a part's end (Azure refuses an empty block). */
    if (!st && len) {
        st = cf__upload_part(s->up, last, carry, len, err);
        carry = NULL;
    }
    free(carry);
    if (!st) {
        st = cf__upload_finish(s->up, err);
        s->up = NULL;
    }
    cf__wstream_abort(s);
    return st;
}

void cf__wstream_abort(cf__wstream *s) {
    if (!s) return;
    if (s->up) cf__upload_abort(s->up);
    for (int l = 0; l < s->nlev; l++) {
        free(s->lev[l].head);
        free(s->lev[l].buf);
    }
    free(s);
}
