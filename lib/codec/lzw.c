/*
 * lzw.c - TIFF LZW (MSB-first codes of 9 to 12 bits, CLEAR 256, EOI 257,
 * "early change" widths as libtiff's decoder has them).
 *
 * The whole chunk decodes into one buffer, so a dictionary entry is a
 * (position, length) pair pointing at bytes already written: entry
 * old+c is "the output of old, plus the byte after it", which is where the
 * output of the next code starts.  Long strings then copy with memcpy
 * instead of walking prefix chains.  Each entry also carries its first 8
 * bytes as a number, made from the previous string's number and one byte,
 * so a string of up to 8 bytes is one 8-byte store from the table.
 *
 * Speed (this decoder is most of the time of an LZW read): on imagery
 * that compresses little (uint16 with noise: strings of 2 bytes, a
 * literal every fourth code) the cost is branches, not bytes.  So every
 * code, literal or not, takes the same path: literals are entries 0-255
 * of length 1, the KwKwK case (code == the entry being made) is a select
 * rather than a branch, and only CLEAR, EOI, a bad code and strings over
 * 8 bytes branch away (27% faster than a literal/string branch, which
 * the predictor misses at every switch, a fifth of the codes).  Codes come
 * from a 64-bit accumulator refilled 7 bytes at a time with one unaligned
 * load; the two bit orders are separate instances of one inlined body.
 *
 * Edge cases, decided to match libtiff where it decodes and to fail where
 * it would return garbage:
 *  - end of input without EOI: treated as EOI (libtiff warns);
 *  - bytes after EOI, or after the output is full: ignored;
 *  - dictionary full without CLEAR: the table stops growing and decoding
 *    goes on (libtiff 4.5 refuses such a stream, "Using code not yet in
 *    table"; no encoder we know writes one);
 *  - a code beyond the next free entry, or a non-literal first code after
 *    CLEAR: corrupt;
 *  - old-style (pre-TIFF 6) LZW, recognised like libtiff by a stream
 *    starting 0x00 0x01: codes are packed LSB-first and widen one entry
 *    later (libtiff's LZWDecodeCompat); decoded the same way otherwise.
 */
#include "codec_internal.h"

enum { LZW_CLEAR = 256, LZW_EOI = 257, LZW_FIRST = 258, LZW_MAXCODES = 4096 };

/* Dictionary entry i: its string is dst[pos .. pos + len) (for i >=
 * LZW_FIRST), and its first min(len, 8) bytes are val, first byte lowest
 * (the rest of val is 0).  Entries 0-255 are the literals; LZW_MAXCODES
 * is a slot written, never read, once the table is full. */
typedef struct lzw_ent {
    uint64_t val;
    uint32_t len, pos;
} lzw_ent;

#define LZW_SLOTS (LZW_MAXCODES + 1)

static inline void store_le64(uint8_t *d, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(d, &v, 8);
}

static inline uint64_t load_be64(const uint8_t *s) {
    uint64_t v;
    memcpy(&v, s, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return v;
#else
    return __builtin_bswap64(v);
#endif
}

static inline uint64_t load_le64(const uint8_t *s) {
    uint64_t v;
    memcpy(&v, s, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(v);
#else
    return v;
#endif
}

/* Decode with codes MSB-first (compat 0: the accumulator holds its nbuf
 * unread bits at the top) or LSB-first (compat 1: at the bottom).  A fast
 * refill ORs in a whole 8-byte word but counts only its whole bytes; the
 * bits of the partly taken byte are the stream's own, so the next refill
 * ORs the same values over them. */
static inline __attribute__((always_inline)) cf_status
lzw_decode(const int compat, lzw_ent *tab, const uint8_t *src,
           size_t src_len, uint8_t *dst, size_t dst_len, cf_error *err) {
    /* the new-style decoder widens when the next free entry reaches
     * 2^nbits - 1, the old-style one at 2^nbits */
    const unsigned late = compat ? 1 : 0;
    uint64_t bitbuf = 0;
    unsigned nbuf = 0;
    size_t in = 0, out = 0;
    unsigned nbits = 9, code;
    unsigned free_ent = LZW_FIRST;
    unsigned widen_at = 0;   /* free_ent that makes codes one bit wider */
    uint32_t prev_len = 0;   /* length of the previous code's string */
    uint64_t prev_val = 0;   /* and its first 8 bytes */

/* Next code into `code`; out of input acts as EOI (libtiff warns). */
#define LZW_GET()                                                          \
    do {                                                                   \
        if (nbuf < nbits) {                                                \
            if (in + 8 <= src_len) {                                       \
                if (compat)                                                \
                    bitbuf |= load_le64(src + in) << nbuf;                 \
                else                                                       \
                    bitbuf |= load_be64(src + in) >> nbuf;                 \
                in += (63 - nbuf) >> 3;                                    \
                nbuf |= 56;                                                \
            } else {                                                       \
                while (nbuf < nbits && in < src_len) {                     \
                    if (compat)                                            \
                        bitbuf |= (uint64_t)src[in++] << nbuf;             \
                    else                                                   \
                        bitbuf |= (uint64_t)src[in++] << (56 - nbuf);      \
                    nbuf += 8;                                             \
                }                                                          \
                if (nbuf < nbits) goto done;                               \
            }                                                              \
        }                                                                  \
        if (compat) {                                                      \
            code = (unsigned)bitbuf & ((1u << nbits) - 1);                 \
            bitbuf >>= nbits;                                              \
        } else {                                                           \
            code = (unsigned)(bitbuf >> (64 - nbits));                     \
            bitbuf <<= nbits;                                              \
        }                                                                  \
        nbuf -= nbits;                                                     \
    } while (0)

    /* At the start and after CLEAR the first code must be a literal; it
     * adds no dictionary entry. */
restart:
    nbits = 9;
    widen_at = (1u << nbits) - 1 + late;
    free_ent = LZW_FIRST;
    do {
        LZW_GET();
    } while (code == LZW_CLEAR);
    if (code == LZW_EOI) goto done;
    if (code > 255)
        return cf__err(err, CF_E_CODEC,
                       "code %u right after CLEAR at input byte %zu "
                       "(must be a literal)",
                       code, in - nbuf / 8);
    dst[out++] = (uint8_t)code;
    prev_len = 1;
    prev_val = code;

    while (out < dst_len) {
        LZW_GET();
        if (__builtin_expect(code - LZW_CLEAR < 2u || code > free_ent, 0)) {
            if (code == LZW_CLEAR) goto restart;
            if (code == LZW_EOI) break;
            return cf__err(err, CF_E_CODEC,
                           "code %u beyond the table (next free %u) at input "
                           "byte %zu",
                           code, free_ent, in - nbuf / 8);
        }
        /* The new entry is the previous string plus the first byte of this
         * one.  When code == free_ent (KwKwK) this string is that entry,
         * whose first byte is the previous string's: the slot read here is
         * then stale or not yet written, and the select drops it (reading
         * it anyway keeps the load off the KwKwK test: 20% faster). */
        lzw_ent e = tab[code];
        const int kwk = code == free_ent;
        uint64_t first = (kwk ? prev_val : e.val) & 0xff;
        lzw_ent made = {prev_len < 8 ? prev_val | first << (8 * prev_len) : prev_val,
                        prev_len + 1, (uint32_t)out - prev_len};
        tab[free_ent] = made; /* the spare slot when the table is full */
        if (kwk) e = made;
        /* the decoder's table lags the encoder's by one entry, so a
         * new-style decoder widens one entry "early" */
        if (free_ent < LZW_MAXCODES && ++free_ent >= widen_at && nbits < 12)
            widen_at = (1u << ++nbits) - 1 + late;
        size_t room = dst_len - out;
        if (__builtin_expect(e.len <= 8 && room >= 8, 1)) {
            /* bytes past the string are rewritten by what follows */
            store_le64(dst + out, e.val);
            out += e.len;
        } else if (e.len <= 32 && room >= 32 && e.pos + 32 <= out) {
            /* longer strings (compressible data) are mostly short too: one
             * fixed-size move, not a call */
            memcpy(dst + out, dst + e.pos, 32);
            out += e.len;
        } else {
            size_t n = e.len < room ? e.len : room;
            if (e.len <= 8) {
                uint64_t v = e.val;
                for (size_t k = 0; k < n; k++, v >>= 8) dst[out + k] = (uint8_t)v;
            } else if (e.pos + n <= out) {
                memcpy(dst + out, dst + e.pos, n);
            } else {
                /* overlapping (KwKwK): forward byte copy repeats the
                 * pattern as intended */
                for (size_t k = 0; k < n; k++) dst[out + k] = dst[e.pos + k];
            }
            out += n;
        }
        prev_len = e.len;
        prev_val = e.val;
    }
#undef LZW_GET
done:
    if (out < dst_len)
        return cf__err(err, CF_E_CODEC,
                       "data ends after %zu of %zu decoded bytes", out,
                       dst_len);
    return CF_OK;
}

cf_status cf__decode_lzw(cf__codec_ctx *ctx, const cf__codec_params *p,
                         const uint8_t *src, size_t src_len, uint8_t *dst,
                         size_t dst_len, cf_error *err) {
    (void)ctx;
    (void)p;
    if (dst_len > UINT32_MAX)
        return cf__err(err, CF_E_LIMIT, "chunk of %zu bytes too large for LZW",
                       dst_len);
    /* On the stack (64 KiB), not in the context: addressed from the stack
     * pointer it leaves the loop one more register, which is 7% here.
     * Slots past the literals are written before they are used; the one a
     * KwKwK code reads early is never used (see the select above). */
    lzw_ent tab[LZW_SLOTS];
    for (unsigned i = 0; i < 256; i++) tab[i] = (lzw_ent){i, 1, 0};
    /* libtiff's test for the old bit-reversed codes: a new-style stream
     * starts with CLEAR, whose first byte is 0x80 */
    if (src_len >= 2 && src[0] == 0 && (src[1] & 1))
        return lzw_decode(1, tab, src, src_len, dst, dst_len, err);
    return lzw_decode(0, tab, src, src_len, dst, dst_len, err);
}
