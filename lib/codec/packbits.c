/*
 * packbits.c - Apple PackBits (TIFF 32773).  Bounds-checked on both sides,
 * in libtiff's order: a run past the end of the output is cut there, and
 * decoding stops once the output is full (libtiff does the same, with a
 * warning); a literal run that, so cut, still runs past the end of the
 * input is corrupt data.  Input that ends before the output is full is an
 * error.
 */
#include "codec_internal.h"

cf_status cf__decode_packbits(cf__codec_ctx *ctx, const cf__codec_params *p,
                              const uint8_t *src, size_t src_len,
                              uint8_t *dst, size_t dst_len, cf_error *err) {
    size_t in = 0, out = 0;
    while (out < dst_len && in < src_len) {
        int n = (int8_t)src[in++];
        if (n >= 0) {
            size_t cnt = (size_t)n + 1;
            /* Cut to the output first, as libtiff does: a last run that
             * claims a byte more than the chunk holds (a known writer bug)
             * is fine when the output is full without it. */
            if (cnt > dst_len - out) cnt = dst_len - out;
            if (cnt > src_len - in)
                return cf__err(err, CF_E_CODEC,
                               "literal run of %d bytes at input byte %zu "
                               "runs past the end of the %zu-byte chunk",
                               n + 1, in - 1, src_len);
            /* Runs are at most 128 bytes, where a libc call costs more
             * than the copy: copy whole 16-byte blocks (fixed-size moves;
             * the bytes past the run are overwritten by what follows) when
             * both sides have room for them. */
            size_t up = (cnt + 15) & ~(size_t)15;
            if (up <= src_len - in && up <= dst_len - out) {
                for (size_t k = 0; k < cnt; k += 16)
                    memcpy(dst + out + k, src + in + k, 16);
            } else {
                memcpy(dst + out, src + in, cnt);
            }
            in += cnt;
            out += cnt;
        } else if (n != -128) {
            size_t cnt = (size_t)(1 - n);
            if (in >= src_len)
                return cf__err(err, CF_E_CODEC,
                               "repeat run at input byte %zu has no byte to "
                               "repeat",
                               in - 1);
            if (cnt > dst_len - out) cnt = dst_len - out;
            uint8_t v = src[in++];
            size_t up = (cnt + 15) & ~(size_t)15;
            if (up <= dst_len - out) {
                uint8_t blk[16];
                memset(blk, v, 16);
                for (size_t k = 0; k < cnt; k += 16) memcpy(dst + out + k, blk, 16);
            } else {
                memset(dst + out, v, cnt);
            }
            out += cnt;
        }
    }
    if (out < dst_len)
        return cf__err(err, CF_E_CODEC,
                       "data ends after %zu of %zu decoded bytes", out,
                       dst_len);
    return CF_OK;
}
