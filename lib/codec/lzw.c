/*
 * lzw.c - TIFF LZW (MSB-first codes of 9 to 12 bits, CLEAR 256, EOI 257,
 * "early change" widths as libtiff's decoder has them).
 *
 * The whole chunk decodes into one buffer, so a dictionary entry is just a
 * (position, length) pair pointing at bytes already written: entry
 * old+c is "the output of old, plus the byte after it", which is where the
 * output of the next code starts.  Strings then copy with memcpy instead of
 * walking prefix chains.
 *
 * Speed (this decoder is most of the time of an LZW read): codes come from
 * a 64-bit accumulator refilled 7 bytes at a time with one unaligned load;
 * the state "right after CLEAR" has its own path so the per-code loop
 * never asks for it; the length of the previous string is carried instead
 * of looked up; the two bit orders are separate instances of one inlined
 * body.  Callgrind on the 4096 x 4096 uint16 benchmark file: 1566 M
 * instructions before, libtiff's decoder 762 M.
 *
 * Edge cases, decided to match libtiff where it decodes and to fail where
 * it would return garbage:
 *  - end of input without EOI: treated as EOI (libtiff warns);
 *  - bytes after EOI, or after the output is full: ignored;
 *  - dictionary full without CLEAR: the table stops growing (codes are at
 *    most 12 bits, so libtiff's entries past 4095 are unreachable anyway);
 *  - a code beyond the next free entry, or a non-literal first code after
 *    CLEAR: corrupt;
 *  - old-style (pre-TIFF 6) LZW, recognised like libtiff by a stream
 *    starting 0x00 0x01: codes are packed LSB-first and widen one entry
 *    later (libtiff's LZWDecodeCompat); decoded the same way otherwise.
 */
#include "codec_internal.h"

enum { LZW_CLEAR = 256, LZW_EOI = 257, LZW_FIRST = 258, LZW_MAXCODES = 4096 };

/* Dictionary entry i >= LZW_FIRST: string is dst[pos .. pos + len). */
typedef struct lzw_ent {
    uint32_t pos, len;
} lzw_ent;

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

    while (out < dst_len) {
        LZW_GET();
        /* the previous code's string was written right before `out` */
        uint32_t old_pos = (uint32_t)out - prev_len;
        if (code < LZW_CLEAR) {
            if (free_ent < LZW_MAXCODES) {
                tab[free_ent].pos = old_pos;
                tab[free_ent].len = prev_len + 1;
                /* the decoder's table lags the encoder's by one entry, so
                 * a new-style decoder widens one entry "early" */
                if (++free_ent >= widen_at && nbits < 12)
                    widen_at = (1u << ++nbits) - 1 + late;
            }
            dst[out++] = (uint8_t)code;
            prev_len = 1;
            continue;
        }
        if (code < LZW_FIRST) {
            if (code == LZW_CLEAR) goto restart;
            break; /* EOI */
        }
        uint32_t slen, spos;
        if (code < free_ent) {
            slen = tab[code].len;
            spos = tab[code].pos;
        } else if (code == free_ent && free_ent < LZW_MAXCODES) {
            /* KwKwK: the string is old + old's first byte, which starts
             * at old_pos and overlaps what we are about to write */
            slen = prev_len + 1;
            spos = old_pos;
        } else {
            return cf__err(err, CF_E_CODEC,
                           "code %u beyond the table (next free %u) at input "
                           "byte %zu",
                           code, free_ent, in - nbuf / 8);
        }
        if (free_ent < LZW_MAXCODES) {
            tab[free_ent].pos = old_pos;
            tab[free_ent].len = prev_len + 1;
            if (++free_ent >= widen_at && nbits < 12)
                widen_at = (1u << ++nbits) - 1 + late;
        }
        size_t room = dst_len - out;
        if (slen <= 8 && room >= 8 && spos + 8 <= out) {
            /* most strings are short: one fixed-size move (bytes past
             * the string are rewritten by what follows); 8 bytes for the
             * shortest, where a 16-byte load more often straddles the
             * stores of the last few codes and waits (uint16 imagery: 6%
             * faster than 16 for all) */
            memcpy(dst + out, dst + spos, 8);
            out += slen;
        } else if (slen <= 16 && room >= 16 && spos + 16 <= out) {
            memcpy(dst + out, dst + spos, 16);
            out += slen;
        } else {
            size_t n = slen < room ? slen : room;
            if (spos + n <= out) {
                memcpy(dst + out, dst + spos, n);
            } else {
                /* overlapping (KwKwK): forward byte copy repeats the
                 * pattern as intended */
                for (size_t k = 0; k < n; k++) dst[out + k] = dst[spos + k];
            }
            out += n;
        }
        prev_len = slen;
    }
#undef LZW_GET
done:
    if (out < dst_len)
        return cf__err(err, CF_E_CODEC,
                       "data ends after %zu of %zu decoded bytes", out,
                       dst_len);
    return CF_OK;
}

cf_status cf__decode_lzw(cf_codec_ctx *ctx, const cf_codec_params *p,
                         const uint8_t *src, size_t src_len, uint8_t *dst,
                         size_t dst_len, cf_error *err) {
    (void)ctx;
    (void)p;
    if (dst_len > UINT32_MAX)
        return cf__err(err, CF_E_LIMIT, "chunk of %zu bytes too large for LZW",
                       dst_len);
    lzw_ent tab[LZW_MAXCODES];
    /* libtiff's test for the old bit-reversed codes: a new-style stream
     * starts with CLEAR, whose first byte is 0x80 */
    if (src_len >= 2 && src[0] == 0 && (src[1] & 1))
        return lzw_decode(1, tab, src, src_len, dst, dst_len, err);
    return lzw_decode(0, tab, src, src_len, dst, dst_len, err);
}
