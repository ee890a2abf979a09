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

cf_status cf__decode_lzw(cf_codec_ctx *ctx, const cf_codec_params *p,
                         const uint8_t *src, size_t src_len, uint8_t *dst,
                         size_t dst_len, cf_error *err) {
    /* libtiff's test for the old bit-reversed codes: a new-style stream
     * starts with CLEAR, whose first byte is 0x80 */
    const int compat = src_len >= 2 && src[0] == 0 && (src[1] & 1);
    /* the new-style decoder widens when the next free entry reaches
     * 2^nbits - 1, the old-style one at 2^nbits */
    const unsigned late = compat ? 1 : 0;
    /* Entry i >= LZW_FIRST: string is dst[pos[i] .. pos[i] + len[i]). */
    uint32_t pos[LZW_MAXCODES];
    uint32_t len[LZW_MAXCODES];
    if (dst_len > UINT32_MAX)
        return cf__err(err, CF_E_LIMIT, "chunk of %zu bytes too large for LZW",
                       dst_len);

    uint64_t bitbuf = 0; /* unread bits: the low nbuf (new style: read from
                          * the top of those; old style: from bit 0) */
    unsigned nbuf = 0;
    size_t in = 0, out = 0;
    unsigned nbits = 9;
    unsigned free_ent = LZW_FIRST;
    int old = -1; /* previous code; -1 right after CLEAR / at start */

    while (out < dst_len) {
        unsigned code;
        if (!compat) {
            while (nbuf < nbits && in < src_len) {
                bitbuf = (bitbuf << 8) | src[in++];
                nbuf += 8;
            }
            if (nbuf < nbits) break; /* out of input: implicit EOI */
            code = (unsigned)(bitbuf >> (nbuf - nbits)) & ((1u << nbits) - 1);
            nbuf -= nbits;
        } else {
            while (nbuf < nbits && in < src_len) {
                bitbuf |= (uint64_t)src[in++] << nbuf;
                nbuf += 8;
            }
            if (nbuf < nbits) break;
            code = (unsigned)bitbuf & ((1u << nbits) - 1);
            bitbuf >>= nbits;
            nbuf -= nbits;
        }

        if (code == LZW_EOI) break;
        if (code == LZW_CLEAR) {
            nbits = 9;
            free_ent = LZW_FIRST;
            old = -1;
            continue;
        }
        if (old < 0) {
            if (code > 255)
                return cf__err(err, CF_E_CODEC,
                               "code %u right after CLEAR at input byte %zu "
                               "(must be a literal)",
                               code, in);
            dst[out++] = (uint8_t)code;
            old = (int)code;
            continue;
        }
        /* Position of the previous code's string: it was written right
         * before `out`. */
        uint32_t old_len = old < LZW_FIRST ? 1 : len[old];
        uint32_t old_pos = (uint32_t)out - old_len;
        uint32_t slen;
        uint32_t spos;
        if (code < LZW_FIRST) {
            slen = 1;
            spos = 0;
        } else if (code < free_ent) {
            slen = len[code];
            spos = pos[code];
        } else if (code == free_ent && free_ent < LZW_MAXCODES) {
            /* KwKwK: the string is old + old's first byte, which starts at
             * old_pos and overlaps what we are about to write. */
            slen = old_len + 1;
            spos = old_pos;
        } else {
            return cf__err(err, CF_E_CODEC,
                           "code %u beyond the table (next free %u) at input "
                           "byte %zu",
                           code, free_ent, in);
        }
        if (free_ent < LZW_MAXCODES) {
            pos[free_ent] = old_pos;
            len[free_ent] = old_len + 1;
            free_ent++;
            /* the decoder's table lags the encoder's by one entry, so a
             * new-style decoder widens one entry "early" */
            if (free_ent + 1 - late > (1u << nbits) - 1 && nbits < 12) nbits++;
        }
        size_t room = dst_len - out;
        if (code < LZW_FIRST) {
            dst[out++] = (uint8_t)code;
        } else {
            size_t n = slen < room ? slen : room;
            if (n <= 16 && spos + 16 <= out && room >= 16) {
                /* most strings are short: one fixed-size move (bytes past
                 * the string are rewritten by what follows) */
                memcpy(dst + out, dst + spos, 16);
            } else if (spos + n <= out) {
                memcpy(dst + out, dst + spos, n);
            } else {
                /* overlapping (KwKwK): forward byte copy repeats the
                 * pattern as intended */
                for (size_t k = 0; k < n; k++) dst[out + k] = dst[spos + k];
            }
            out += n;
        }
        old = (int)code;
    }
    if (out < dst_len)
        return cf__err(err, CF_E_CODEC,
                       "data ends after %zu of %zu decoded bytes", out,
                       dst_len);
    return CF_OK;
}
