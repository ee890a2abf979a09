/*
 * lerc2.c - cogfeed's own decoder for the Lerc2 blobs GeoTIFFs carry.
 *
 * Why: on LERC files three quarters of a tile's decode time is spent in
 * liblerc (perf: ReadTile 35%, BitUnStuff 27%, its Fletcher-32 9%, a
 * memset of the whole output), and that is the floor every reader that
 * uses the library shares.  liblerc unpacks each 8x8 block into a
 * std::vector of uint32, then converts every value through double
 * arithmetic into the output; this file unpacks a block with the bit width
 * known at compile time, adds the block offset in integers when the data
 * is lossless integer (the common case: maxZError 0.5), and checks the
 * blob's checksum with SSE2.
 *
 * What it takes: Lerc2 versions 3 to 6 (what liblerc 2.2 and later
 * write; libtiff writes version 4), one band, every data type, any depth,
 * masks, constant images and blocks, raw blocks, bit-stuffed blocks with
 * or without a lookup table, and v5+ blocks coded as a difference to the
 * previous depth.  What it does not take it leaves to liblerc (`*done`
 * stays 0 and the caller calls lerc_decode): Huffman-coded 8-bit images,
 * the v6 lossless float coder, versions 1-2, several bands, v6 no-data
 * values, outputs of 2 GB or more.  A blob it does decode gives exactly liblerc 4.0's values: the
 * same header checks, the same order of the same double operations where
 * the data is lossy or floating point (offset + n * 2 * maxZError, clamped
 * to the depth's maximum), integers where that arithmetic is exact.
 *
 * A malformed blob of the kinds it takes (a bad checksum, a block past the
 * end, a flag out of step, a block with fewer values than valid pixels, a
 * lookup index past its table, a value outside its type) is refused here
 * with CF_E_CODEC and what is wrong, not handed to liblerc: liblerc
 * refuses the same blobs, except those it misreads (reading past its
 * buffers, converting undefinedly), and lerc_decode crashed on such a
 * crafted blob in tests/unit/test_codec_lerc2.c.
 *
 * The format (Esri's LERC specification, Lerc2.cpp): "Lerc2 ", version,
 * checksum (v3+: Fletcher-32 over the rest of the blob), header ints and
 * doubles, an RLE-coded bit mask, per-depth minima and maxima (v4+), then
 * micro blocks of mbSize x mbSize pixels, row by row, each depth in turn:
 * a flag byte (0 raw, 1 bit-stuffed, 2 zero, 3 constant; bits 2-5 a check
 * on the block column, bit 2 the v5 difference flag, bits 6-7 the width of
 * the offset's type), the offset, then the unsigned values bit-stuffed
 * LSB-first in little-endian 32-bit words.
 */
#include "codec_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* An AVX2 unpacker for values of up to 16 bits, chosen at run time. */
#define L2_AVX2 1
#endif

#ifdef CF_HAVE_LERC

#if defined(__GNUC__)
#define L2_INLINE static inline __attribute__((always_inline))
#else
#define L2_INLINE static inline
#endif

/* liblerc's data type numbers. */
enum { DT_CHAR, DT_BYTE, DT_SHORT, DT_USHORT, DT_INT, DT_UINT, DT_FLOAT,
       DT_DOUBLE };

static const unsigned dt_size[8] = {1, 1, 2, 2, 4, 4, 4, 8};

/* The largest block side liblerc accepts (ReadHeader) and the bytes a
 * block's bit-stuffed values can take: 32 * 32 values of 31 bits. */
#define L2_MAX_MB 32
#define L2_MAX_STUFFED ((L2_MAX_MB * L2_MAX_MB * 31 + 7) / 8)

typedef struct l2_header {
    int version;
    uint32_t checksum;
    int rows, cols, depth, nvalid, mbsize, blobsize, dt, blobs_more;
    uint8_t pass_nodata;
    double maxzerr, zmin, zmax;
} l2_header;

typedef struct l2 {
    l2_header h;
    const uint8_t *p, *end; /* read cursor and end of the blob */
    const uint8_t *bits;    /* validity bits, MSB first; NULL: all valid */
    uint8_t *out;
    double *dmin, *dmax;    /* per-depth ranges (v4+), depth each */
    uint32_t vals[L2_MAX_MB * L2_MAX_MB];   /* one block's values */
    uint32_t lut[256];
    uint16_t stage[4 * L2_MAX_MB * L2_MAX_MB]; /* a block's 4 planes */
    uint8_t pad[L2_MAX_STUFFED + 16];       /* stuffed bytes near the end */
#ifdef L2_AVX2
    int avx2;                               /* the CPU has it */
#endif
    cf_error *err;
} l2;

/* Outcome of a step: go on, leave the blob to liblerc, or refuse it. */
enum { L2_OK, L2_DEFER, L2_BAD };

/* A blob liblerc would refuse too (or misread): refused here, by name,
 * rather than handed to liblerc, whose readers are not all safe on
 * crafted blobs (a block past its values crashed lerc_decode in a test). */
static int bad(l2 *s, const char *what) {
    cf__err(s->err, CF_E_CODEC, "blob: %s", what);
    return L2_BAD;
}

static int rd(l2 *s, void *v, size_t n) {
    if ((size_t)(s->end - s->p) < n) return 0;
    memcpy(v, s->p, n);
    s->p += n;
    return 1;
}

static int valid(const l2 *s, size_t k) {
    return !s->bits || (s->bits[k >> 3] & (0x80u >> (k & 7)));
}

/* ---- header: Lerc2::ReadHeader's fields and checks -------------------- */

static int read_header(l2 *s) {
    l2_header *h = &s->h;
    if (s->end - s->p < 6 || memcmp(s->p, "Lerc2 ", 6) != 0) return L2_DEFER;
    s->p += 6;
    if (!rd(s, &h->version, 4)) return bad(s, "header truncated");
    /* versions 1-2 (no checksum, older bit stuffing) and anything newer
     * than liblerc 4.0 knows stay liblerc's */
    if (h->version < 3 || h->version > 6) return L2_DEFER;
    if (!rd(s, &h->checksum, 4)) return bad(s, "header truncated");
    int32_t iv[8] = {0};
    int nints = 6 + (h->version >= 4) + (h->version >= 6);
    if (!rd(s, iv, 4 * (size_t)nints)) return bad(s, "header truncated");
    uint8_t bv[4] = {0};
    if (h->version >= 6 && !rd(s, bv, 4)) return bad(s, "header truncated");
    double dv[5] = {0};
    int ndbl = h->version >= 6 ? 5 : 3;
    if (!rd(s, dv, 8 * (size_t)ndbl)) return bad(s, "header truncated");
    int i = 0;
    h->rows = iv[i++];
    h->cols = iv[i++];
    h->depth = h->version >= 4 ? iv[i++] : 1;
    h->nvalid = iv[i++];
    h->mbsize = iv[i++];
    h->blobsize = iv[i++];
    h->dt = iv[i++];
    h->blobs_more = h->version >= 6 ? iv[i++] : 0;
    h->pass_nodata = bv[0];
    h->maxzerr = dv[0];
    h->zmin = dv[1];
    h->zmax = dv[2];
    if (h->rows <= 0 || h->cols <= 0 || h->depth <= 0 || h->nvalid < 0 ||
        h->mbsize <= 0 || h->blobsize <= 0 || h->dt < DT_CHAR ||
        h->dt > DT_DOUBLE)
        return bad(s, "header has an impossible size, type or block size");
    uint64_t npix = (uint64_t)h->rows * (uint64_t)h->cols;
    uint64_t nbpp = dt_size[h->dt];
    /* outputs of 2 GB and more: liblerc 4.0 has no limit of its own (the
     * reader's chunk limits apply before either decoder); leave them */
    if (npix > INT32_MAX || nbpp * (uint64_t)h->depth * npix > INT32_MAX)
        return L2_DEFER;
    if ((uint64_t)h->nvalid > npix)
        return bad(s, "header counts more valid pixels than pixels");
    /* a block side over 32 is refused only when there are blocks to read
     * (read_tiles_t), as liblerc does: a constant image decodes */
    return L2_OK;
}

/* ---- Fletcher-32, as Lerc2::ComputeChecksumFletcher32 ----------------
 * liblerc adds big-endian 16-bit words w (sum1 += w; sum2 += sum1) and
 * folds both sums to 16 bits after every 359 words.  Within such a run the
 * two sums are plain unsigned 32-bit arithmetic, so the run's effect has a
 * closed form: sum1 += W, sum2 += t * sum1 + V, where W = sum of w_i and
 * V = sum of (t - i) w_i (i from 0).  Computed mod 2^32 as liblerc's are,
 * the result is the same bits.  SSE2 takes 8 words per step. */

static void run_sums(const uint8_t *b, uint32_t t, uint32_t *W, uint32_t *V) {
    uint32_t w = 0, v = 0, i = 0;
#ifdef __SSE2__
    if (t >= 8) {
        /* per 8-word block: S += 8 * (words of earlier blocks) + sum of
         * (8 - k) w_k; words split into high and low bytes so that every
         * product fits pmaddwd's signed 16-bit inputs */
        const __m128i lo8 = _mm_set1_epi16(0xff);
        const __m128i one_hi = _mm_set1_epi16(256), one_lo = _mm_set1_epi16(1);
        const __m128i wt_hi = _mm_setr_epi16(8 * 256, 7 * 256, 6 * 256,
                                             5 * 256, 4 * 256, 3 * 256,
                                             2 * 256, 1 * 256);
        const __m128i wt_lo = _mm_setr_epi16(8, 7, 6, 5, 4, 3, 2, 1);
        __m128i vs = _mm_setzero_si128(), vprev = _mm_setzero_si128(),
                vw = _mm_setzero_si128();
        uint32_t nb = t / 8;
        for (uint32_t j = 0; j < nb; j++) {
            __m128i x = _mm_loadu_si128((const __m128i *)(b + 16 * j));
            __m128i hi = _mm_and_si128(x, lo8);  /* first byte: high */
            __m128i lo = _mm_srli_epi16(x, 8);   /* second byte: low */
            vprev = _mm_add_epi32(vprev, vs);
            vs = _mm_add_epi32(vs, _mm_add_epi32(_mm_madd_epi16(hi, one_hi),
                                                 _mm_madd_epi16(lo, one_lo)));
            vw = _mm_add_epi32(vw, _mm_add_epi32(_mm_madd_epi16(hi, wt_hi),
                                                 _mm_madd_epi16(lo, wt_lo)));
        }
        uint32_t a[4], c[4], d[4];
        _mm_storeu_si128((__m128i *)a, vs);
        _mm_storeu_si128((__m128i *)c, vprev);
        _mm_storeu_si128((__m128i *)d, vw);
        uint32_t sw = a[0] + a[1] + a[2] + a[3];
        uint32_t sp = c[0] + c[1] + c[2] + c[3];
        uint32_t sd = d[0] + d[1] + d[2] + d[3];
        /* weights so far are relative to the 8*nb words: (8nb - i) w_i =
         * 8 * (words before the block) + (8 - k) w_k over the blocks;
         * the rest of the run adds (t - 8nb) to every weight */
        i = 8 * nb;
        w = sw;
        v = 8u * sp + sd + (t - i) * sw;
    }
#endif
    for (; i < t; i++) {
        uint32_t x = ((uint32_t)b[2 * i] << 8) + b[2 * i + 1];
        w += x;
        v += (t - i) * x;
    }
    *W = w;
    *V = v;
}

static uint32_t fletcher32(const uint8_t *b, size_t len) {
    uint32_t s1 = 0xffff, s2 = 0xffff;
    size_t words = len / 2;
    while (words) {
        uint32_t t = words >= 359 ? 359 : (uint32_t)words, W, V;
        run_sums(b, t, &W, &V);
        /* sequentially: s2 gains s1 (as it was) t times, plus V */
        s2 += t * s1 + V;
        s1 += W;
        b += 2 * (size_t)t;
        words -= t;
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    if (len & 1) {
        s1 += (uint32_t)*b << 8;
        s2 += s1;
    }
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    return s2 << 16 | s1;
}

/* ---- mask: Lerc2::ReadMask and RLE::decompress ------------------------ */

static int read_mask(l2 *s, uint8_t *bits, size_t nbytes) {
    int32_t nmask;
    if (!rd(s, &nmask, 4) || nmask < 0)
        return bad(s, "mask size missing or negative");
    int64_t npix = (int64_t)s->h.rows * s->h.cols;
    if ((s->h.nvalid == 0 || s->h.nvalid == npix) && nmask != 0)
        return bad(s, "a mask where every pixel or none is valid");
    if (s->h.nvalid == npix) {
        s->bits = NULL;
        return L2_OK;
    }
    if (s->h.nvalid == 0) {
        memset(bits, 0, nbytes);
        s->bits = bits;
        return L2_OK;
    }
    /* nmask 0 with some pixels invalid means "the previous band's mask":
     * liblerc's fresh decoder has none (it reads uninitialised memory) */
    if (nmask == 0 || (size_t)(s->end - s->p) < (size_t)nmask)
        return bad(s, "mask missing or past the end");
    /* RLE: int16 counts; > 0: that many literal bytes, <= 0: one byte
     * repeated -count times; -32768 ends.  liblerc checks against all the
     * bytes left in the blob, not only nmask. */
    const uint8_t *q = s->p;
    size_t left = (size_t)(s->end - s->p), at = 0;
    if (left < 2) return bad(s, "mask past the end");
    left -= 2;
    for (;;) {
        int16_t cnt;
        memcpy(&cnt, q, 2);
        q += 2;
        if (cnt == -32768) break;
        size_t n = (size_t)(cnt <= 0 ? -(int)cnt : cnt);
        size_t m = cnt <= 0 ? 1 : n;
        if (left < m + 2 || at + n > nbytes)
            return bad(s, "mask runs past the end or the image");
        if (cnt > 0)
            memcpy(bits + at, q, n);
        else
            memset(bits + at, *q, n);
        at += n;
        q += m;
        left -= m + 2;
    }
    /* liblerc leaves bytes past the runs as they were (uninitialised) */
    if (at != nbytes) return bad(s, "mask shorter than the image");
    s->p += nmask;
    s->bits = bits;
    return L2_OK;
}

/* ---- values: read, convert and store one of the 8 types -------------- */

/* ReadVariableDataType: a value of type `dt` as double. */
L2_INLINE double rd_var(const uint8_t *p, int dt) {
    switch (dt) {
    case DT_CHAR: return (int8_t)p[0];
    case DT_BYTE: return p[0];
    case DT_SHORT: { int16_t v; memcpy(&v, p, 2); return v; }
    case DT_USHORT: { uint16_t v; memcpy(&v, p, 2); return v; }
    case DT_INT: { int32_t v; memcpy(&v, p, 4); return v; }
    case DT_UINT: { uint32_t v; memcpy(&v, p, 4); return v; }
    case DT_FLOAT: { float v; memcpy(&v, p, 4); return v; }
    default: { double v; memcpy(&v, p, 8); return v; }
    }
}

/* Lerc2::GetDataTypeUsed: the type of a block's offset; -1 if none. */
L2_INLINE int dt_used(int dt, int tc) {
    int r;
    switch (dt) {
    case DT_SHORT:
    case DT_INT: r = dt - tc; break;
    case DT_USHORT:
    case DT_UINT: r = dt - 2 * tc; break;
    case DT_FLOAT: r = tc == 0 ? dt : tc == 1 ? DT_SHORT : DT_BYTE; break;
    case DT_DOUBLE: r = tc == 0 ? dt : dt - 2 * tc + 1; break;
    default: r = dt;
    }
    return r >= DT_CHAR && r <= DT_DOUBLE ? r : -1;
}

static int is_int_dt(int dt) { return dt < DT_FLOAT; }

static const double dt_lo[6] = {-128.0, 0.0, -32768.0, 0.0, -2147483648.0,
                                0.0};
static const double dt_hi[6] = {127.0, 255.0, 32767.0, 65535.0, 2147483647.0,
                                4294967295.0};

/* The stored value at element m of the output, as double (the previous
 * depth of a difference-coded block). */
L2_INLINE double ld(const uint8_t *o, size_t m, const int dt) {
    return rd_var(o + m * dt_size[dt], dt);
}

/* Store z as type dt, as liblerc's (T)z; an integer z outside the type is
 * undefined there and refused here (returns 0). */
L2_INLINE int st(uint8_t *o, size_t m, double z, const int dt) {
    uint8_t *d = o + m * dt_size[dt];
    if (dt == DT_FLOAT) {
        float f = (float)z;
        memcpy(d, &f, 4);
        return 1;
    }
    if (dt == DT_DOUBLE) {
        memcpy(d, &z, 8);
        return 1;
    }
    /* (T)z truncates toward zero: defined for dt_lo - 1 < z < dt_hi + 1 */
    if (!(z > dt_lo[dt] - 1.0 && z < dt_hi[dt] + 1.0)) return 0;
    switch (dt) {
    case DT_CHAR: { int8_t v = (int8_t)z; memcpy(d, &v, 1); break; }
    case DT_BYTE: { uint8_t v = (uint8_t)z; memcpy(d, &v, 1); break; }
    case DT_SHORT: { int16_t v = (int16_t)z; memcpy(d, &v, 2); break; }
    case DT_USHORT: { uint16_t v = (uint16_t)z; memcpy(d, &v, 2); break; }
    case DT_INT: { int32_t v = (int32_t)z; memcpy(d, &v, 4); break; }
    default: { uint32_t v = (uint32_t)z; memcpy(d, &v, 4); break; }
    }
    return 1;
}

/* Store an integer already known to be inside type dt. */
L2_INLINE void st_int(uint8_t *o, size_t m, int64_t v, const int dt) {
    switch (dt) {
    case DT_CHAR:
    case DT_BYTE: o[m] = (uint8_t)v; break;
    case DT_SHORT:
    case DT_USHORT: { uint16_t x = (uint16_t)v; memcpy(o + 2 * m, &x, 2); break; }
    default: { uint32_t x = (uint32_t)v; memcpy(o + 4 * m, &x, 4); break; }
    }
}

L2_INLINE int64_t ld_int(const uint8_t *o, size_t m, const int dt) {
    switch (dt) {
    case DT_CHAR: return (int8_t)o[m];
    case DT_BYTE: return o[m];
    case DT_SHORT: { int16_t x; memcpy(&x, o + 2 * m, 2); return x; }
    case DT_USHORT: { uint16_t x; memcpy(&x, o + 2 * m, 2); return x; }
    case DT_INT: { int32_t x; memcpy(&x, o + 4 * m, 4); return x; }
    default: { uint32_t x; memcpy(&x, o + 4 * m, 4); return x; }
    }
}

/* ---- bit-stuffed values: BitStuffer2::Decode (v3+) -------------------- */

/* n values of b bits (0 < b < 32), LSB first in a little-endian stream:
 * value i is bits [i*b, i*b + b).  p has at least 8 readable bytes past
 * the last value's first byte.  Inlined with b constant, each case of
 * unstuff() is straight shifts and masks. */
L2_INLINE void unstuff_b(const uint8_t *p, uint32_t *o, unsigned n,
                         const unsigned b) {
    const uint64_t mask = ((uint64_t)1 << b) - 1;
    unsigned i = 0;
    /* 8 values are b whole bytes: constant offsets and shifts inside */
    for (; i + 8 <= n; i += 8, p += b, o += 8)
        for (unsigned k = 0; k < 8; k++) {
            uint64_t w;
            memcpy(&w, p + ((k * b) >> 3), 8);
            o[k] = (uint32_t)((w >> ((k * b) & 7)) & mask);
        }
    for (uint64_t bit = 0; i < n; i++, bit += b, o++) {
        uint64_t w;
        memcpy(&w, p + (bit >> 3), 8);
        *o = (uint32_t)((w >> (bit & 7)) & mask);
    }
}

static void unstuff(const uint8_t *p, uint32_t *o, unsigned n, unsigned b) {
    switch (b) {
#define L2_CASE(B) case B: unstuff_b(p, o, n, B); break;
    L2_CASE(1) L2_CASE(2) L2_CASE(3) L2_CASE(4) L2_CASE(5) L2_CASE(6)
    L2_CASE(7) L2_CASE(8) L2_CASE(9) L2_CASE(10) L2_CASE(11) L2_CASE(12)
    L2_CASE(13) L2_CASE(14) L2_CASE(15) L2_CASE(16) L2_CASE(17) L2_CASE(18)
    L2_CASE(19) L2_CASE(20) L2_CASE(21) L2_CASE(22) L2_CASE(23) L2_CASE(24)
    L2_CASE(25) L2_CASE(26) L2_CASE(27) L2_CASE(28) L2_CASE(29) L2_CASE(30)
#undef L2_CASE
    default: unstuff_b(p, o, n, 31); break;
    }
}

#ifdef L2_AVX2
/* The shuffles for widths 1-16, constant: 8 values of b bits are b bytes
 * (at most 16); value k starts at byte (k*b)/8, bit (k*b)%8, and spans at
 * most 3 bytes, gathered into its 32-bit lane (0x80: a zero byte).  Both
 * 128-bit halves hold the same 16 bytes: values 0-3 are read in the low
 * half, 4-7 in the high one.  Row 0 is unused. */
#define L2_AT8(b, k, c) ((((k) * (b)) >> 3) + (c))
#define L2_SB(b, k, c) (L2_AT8(b, k, c) < 16 ? L2_AT8(b, k, c) : 0x80)
#define L2_SK(b, k) L2_SB(b, k, 0), L2_SB(b, k, 1), L2_SB(b, k, 2), L2_SB(b, k, 3)
#define L2_SROW(b)                                                           \
    {L2_SK(b, 0), L2_SK(b, 1), L2_SK(b, 2), L2_SK(b, 3),                   \
     L2_SK(b, 4), L2_SK(b, 5), L2_SK(b, 6), L2_SK(b, 7)}
#define L2_HROW(b)                                                           \
    {0, (b) & 7, (2 * (b)) & 7, (3 * (b)) & 7, (4 * (b)) & 7, (5 * (b)) & 7, \
     (6 * (b)) & 7, (7 * (b)) & 7}
static const uint8_t l2_shuf[17][32] = {
    L2_SROW(0),  L2_SROW(1),  L2_SROW(2),  L2_SROW(3),  L2_SROW(4),
    L2_SROW(5),  L2_SROW(6),  L2_SROW(7),  L2_SROW(8),  L2_SROW(9),
    L2_SROW(10), L2_SROW(11), L2_SROW(12), L2_SROW(13), L2_SROW(14),
    L2_SROW(15), L2_SROW(16)};
/* each value's bit offset in its lane */
static const uint32_t l2_shift[17][8] = {
    L2_HROW(0),  L2_HROW(1),  L2_HROW(2),  L2_HROW(3),  L2_HROW(4),
    L2_HROW(5),  L2_HROW(6),  L2_HROW(7),  L2_HROW(8),  L2_HROW(9),
    L2_HROW(10), L2_HROW(11), L2_HROW(12), L2_HROW(13), L2_HROW(14),
    L2_HROW(15), L2_HROW(16)};
#undef L2_HROW
#undef L2_SROW
#undef L2_SK
#undef L2_SB
#undef L2_AT8

/* unstuff for b <= 16, 8 values a step; reads 16 bytes at each group of b
 * bytes (the caller guarantees 16 readable bytes past the values). */
__attribute__((target("avx2"))) static void
unstuff_avx2(const uint8_t *p, uint32_t *o, unsigned n, unsigned b,
             const uint8_t *shuf, const uint32_t *shift) {
    const __m256i sh = _mm256_loadu_si256((const __m256i *)(const void *)shuf);
    const __m256i sv = _mm256_loadu_si256((const __m256i *)(const void *)shift);
    const __m256i mask = _mm256_set1_epi32((int)((1u << b) - 1));
    unsigned i = 0;
    for (; i + 8 <= n; i += 8, p += b, o += 8) {
        __m256i y = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(const void *)p));
        y = _mm256_srlv_epi32(_mm256_shuffle_epi8(y, sh), sv);
        _mm256_storeu_si256((__m256i *)(void *)o, _mm256_and_si256(y, mask));
    }
    if (i < n) unstuff(p, o, n - i, b);
}

/* The common block in one pass: 8 rows of 8 values of b <= 16 bits (a row
 * is b bytes), each clamped to lim, plus off, stored as 16 bits in rows
 * `stride` values apart; the caller knows off + lim <= 65535.  Reads 16
 * bytes at each row. */
__attribute__((target("avx2"))) static void
unstuff_u16x8_avx2(const uint8_t *p, unsigned b, const uint8_t *shuf,
                   const uint32_t *shift, uint32_t off, uint32_t lim,
                   uint16_t *o, size_t stride) {
    const __m256i sh = _mm256_loadu_si256((const __m256i *)(const void *)shuf);
    const __m256i sv = _mm256_loadu_si256((const __m256i *)(const void *)shift);
    const __m256i mask = _mm256_set1_epi32((int)((1u << b) - 1));
    const __m256i vlim = _mm256_set1_epi32((int)lim);
    const __m256i voff = _mm256_set1_epi32((int)off);
    for (int i = 0; i < 8; i++, p += b, o += stride) {
        __m256i y = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(const void *)p));
        y = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(y, sh), sv),
                             mask);
        y = _mm256_add_epi32(_mm256_min_epu32(y, vlim), voff);
        __m128i z = _mm_packus_epi32(_mm256_castsi256_si128(y),
                                     _mm256_extracti128_si256(y, 1));
        _mm_storeu_si128((__m128i *)(void *)o, z);
    }
}
#endif

/* The `used` bytes of stuffed values at the cursor, with 16 readable
 * bytes after them (the unpackers read past the last value): the blob
 * itself, or near its end a zero-padded copy.  NULL when the blob ends
 * before them. */
static const uint8_t *stuffed_bytes(l2 *s, size_t used) {
    size_t left = (size_t)(s->end - s->p);
    if (left < used || used > L2_MAX_STUFFED) return NULL;
    if (left >= used + 16) return s->p;
    memcpy(s->pad, s->p, used);
    memset(s->pad + used, 0, 16);
    return s->pad;
}

/* BitUnStuff: n values of b bits from the cursor into o (n >= 1). */
static int bit_unstuff(l2 *s, uint32_t *o, unsigned n, unsigned b) {
    if (n == 0 || b == 0 || b >= 32)
        return bad(s, "block values of an impossible count or width");
    size_t used = ((uint64_t)n * b + 7) / 8;
    const uint8_t *src = stuffed_bytes(s, used);
    if (!src) return bad(s, "block values past the end");
#ifdef L2_AVX2
    if (s->avx2 && b <= 16)
        unstuff_avx2(src, o, n, b, l2_shuf[b], l2_shift[b]);
    else
#endif
        unstuff(src, o, n, b);
    s->p += used;
    return L2_OK;
}

/* BitStuffer2::Decode into s->vals; *count = number of values, *vmax a
 * bound on them. */
/* A block stuffed() may decode straight into 16-bit rows (l2_fuse). */
typedef struct l2_fuse {
    int64_t off, zm;   /* the block offset and the depth's clamp */
    uint16_t *o;       /* its first value's place */
    size_t stride;     /* values between rows */
} l2_fuse;

static int stuffed(l2 *s, unsigned maxcount, unsigned *count,
                   uint32_t *vmax, const l2_fuse *fu, int *fused) {
    uint8_t head;
    if (!rd(s, &head, 1)) return bad(s, "block header past the end");
    int b67 = head >> 6;
    int nb = b67 == 0 ? 4 : 3 - b67;
    int lut = (head >> 5) & 1;
    unsigned bits = head & 31;
    uint32_t n = 0;
    if (nb == 0) return bad(s, "block header past the end");
    uint8_t tmp[4] = {0};
    if (!rd(s, tmp, (size_t)nb)) return bad(s, "block header past the end");
    n = nb == 1 ? tmp[0] : nb == 2 ? (uint32_t)(tmp[0] | tmp[1] << 8)
                                  : (uint32_t)(tmp[0] | tmp[1] << 8 |
                                               tmp[2] << 16 |
                                               (uint32_t)tmp[3] << 24);
    if (n > maxcount) return bad(s, "block with more values than pixels");
    *count = n;
    if (!lut) {
        /* 0 bits: liblerc keeps the previous block's values (stale) */
        if (bits == 0) return bad(s, "block values of width 0");
        *vmax = (uint32_t)(((uint64_t)1 << bits) - 1);
#ifdef L2_AVX2
        /* an 8x8 block of unsigned 16-bit values, all there, every value
         * off + min(v, zhi - off) inside the type: unpack, clamp, add and
         * store in one pass (the values never go through s->vals) */
        if (fu && s->avx2 && n == 64 && bits <= 16) {
            int64_t zhi = fu->off + (int64_t)*vmax;
            zhi = fu->zm < zhi ? fu->zm : zhi;
            size_t used = 8 * (size_t)bits;
            const uint8_t *src = NULL;
            if (fu->off >= 0 && zhi >= fu->off && zhi <= 65535 &&
                (src = stuffed_bytes(s, used)) != NULL) {
                unstuff_u16x8_avx2(src, bits, l2_shuf[bits], l2_shift[bits],
                                   (uint32_t)fu->off,
                                   (uint32_t)(zhi - fu->off), fu->o,
                                   fu->stride);
                s->p += used;
                *fused = 1;
                return L2_OK;
            }
        }
#else
        (void)fu;
        (void)fused;
#endif
        return bit_unstuff(s, s->vals, n, bits);
    }
    if (bits == 0) return bad(s, "block table of width 0");
    uint8_t nlut_byte;
    if (!rd(s, &nlut_byte, 1)) return bad(s, "block header past the end");
    int nlut = nlut_byte - 1;
    if (nlut < 1) return bad(s, "block table of no entries");
    int r = bit_unstuff(s, s->lut + 1, (unsigned)nlut, bits);
    if (r) return r;
    s->lut[0] = 0;
    *vmax = 0;
    for (int i = 1; i <= nlut; i++) *vmax = s->lut[i] > *vmax ? s->lut[i] : *vmax;
    unsigned lbits = 0;
    while ((unsigned)nlut >> lbits) lbits++;
    r = bit_unstuff(s, s->vals, n, lbits);
    if (r) return r;
    for (unsigned i = 0; i < n; i++) {
        /* liblerc reads past its table here (no check from v3 on) */
        if (s->vals[i] > (unsigned)nlut)
            return cf__err(s->err, CF_E_CODEC,
                           "block lookup index %u past a table of %d",
                           s->vals[i], nlut + 1),
                   L2_BAD;
        s->vals[i] = s->lut[s->vals[i]];
    }
    return L2_OK;
}

/* ---- one micro block of one depth: Lerc2::ReadTile -------------------- */

/* Where a block's values go: element m0 (of the block's first pixel, this
 * depth), rows `row` elements apart, pixels `px` apart, the previous depth
 * of a pixel `prev` elements back.  The output itself (px = depth, prev =
 * 1) or a staging plane per depth (px = 1, prev = a plane). */
typedef struct l2_place {
    uint8_t *o;
    size_t m0, row, px, prev;
} l2_place;

/* An h x w block of values v, every one off + v clamped to zc and known to
 * fit type dt, to o at element m0, rows `row` elements apart, depth nd. */
L2_INLINE void put_exact_t(uint8_t *o, size_t m0, size_t row, size_t nd,
                           int h, int w, const uint32_t *v, int64_t off,
                           int64_t zc, const int dt) {
    for (int i = 0; i < h; i++, v += w, m0 += row) {
        size_t m = m0;
        for (int j = 0; j < w; j++, m += nd) {
            int64_t z = off + (int64_t)v[j];
            st_int(o, m, zc < z ? zc : z, dt);
        }
    }
}

#ifdef __SSE2__
/* put_exact_t for 16-bit values stored side by side (a staging plane):
 * z = off + min(v, lim) with lim = zc - off >= 0, which is the clamp to
 * zc for unsigned v; 4 values a vector, packed to 16 bits. */
static void put_u16_sse2(uint16_t *o, size_t row, int h, int w,
                         const uint32_t *v, int64_t off, int64_t zc) {
    const __m128i bias = _mm_set1_epi32((int)0x80000000u);
    const uint32_t lim32 = (uint32_t)(zc - off);
    const __m128i limb = _mm_set1_epi32((int)(lim32 ^ 0x80000000u));
    const __m128i lim = _mm_set1_epi32((int)lim32);
    const __m128i offv = _mm_set1_epi32((int)(off - 32768));
    const __m128i flip = _mm_set1_epi16((short)0x8000);
    for (int i = 0; i < h; i++, v += w, o += row) {
        int j = 0;
        for (; j + 8 <= w; j += 8) {
            __m128i a = _mm_loadu_si128((const __m128i *)(v + j));
            __m128i b = _mm_loadu_si128((const __m128i *)(v + j + 4));
            __m128i ga = _mm_cmpgt_epi32(_mm_xor_si128(a, bias), limb);
            __m128i gb = _mm_cmpgt_epi32(_mm_xor_si128(b, bias), limb);
            a = _mm_or_si128(_mm_and_si128(ga, lim), _mm_andnot_si128(ga, a));
            b = _mm_or_si128(_mm_and_si128(gb, lim), _mm_andnot_si128(gb, b));
            /* off + r - 32768 is in [-32768, 32767]: a signed pack, then
             * the sign bit flipped back */
            __m128i z = _mm_packs_epi32(_mm_add_epi32(a, offv),
                                        _mm_add_epi32(b, offv));
            _mm_storeu_si128((__m128i *)(o + j), _mm_xor_si128(z, flip));
        }
        for (; j < w; j++) {
            uint32_t r = v[j] > lim32 ? lim32 : v[j];
            uint16_t z = (uint16_t)(off + r);
            memcpy(o + j, &z, 2);
        }
    }
}
#endif

/* put_exact_t for any integer type.  zc is the depth's clamp lowered to
 * off + the block's largest possible value: the same clamp for every value
 * of the block, and it says whether every value fits 16 bits. */
static __attribute__((noinline)) void
put_exact(uint8_t *o, size_t m0, size_t row, size_t nd, int h, int w,
          const uint32_t *v, int64_t off, int64_t zc, int dt) {
#ifdef __SSE2__
    if (nd == 1 && dt == DT_USHORT && zc >= off) {
        put_u16_sse2((uint16_t *)(void *)o + m0, row, h, w, v, off, zc);
        return;
    }
#endif
    switch (dt) {
    case DT_CHAR:
    case DT_BYTE: put_exact_t(o, m0, row, nd, h, w, v, off, zc, DT_BYTE); break;
    case DT_SHORT:
    case DT_USHORT:
        put_exact_t(o, m0, row, nd, h, w, v, off, zc, DT_USHORT);
        break;
    default: put_exact_t(o, m0, row, nd, h, w, v, off, zc, DT_UINT); break;
    }
}

static int bad_value(l2 *s, int i0, int j0) {
    cf__err(s->err, CF_E_CODEC,
            "block at row %d, column %d: a value outside its type", i0,
            j0);
    return L2_BAD;
}

L2_INLINE int read_block(l2 *s, int i0, int i1, int j0, int j1, int d,
                         const l2_place *pl, const int dt) {
    const l2_header *h = &s->h;
    const size_t cols = (size_t)h->cols, nd = pl->px;
    uint8_t *o = pl->o;
    const size_t prev = pl->prev;
    /* element of pixel (i, j) of this block and depth */
#define L2_AT(i, j)                                                          \
    (pl->m0 + (size_t)((i) - i0) * pl->row + (size_t)((j) - j0) * nd)
    uint8_t flag;
    if (!rd(s, &flag, 1)) return bad(s, "blocks end early");
    int diff = h->version >= 5 ? (flag & 4) != 0 : 0;
    int pattern = h->version >= 5 ? 14 : 15;
    if (((flag >> 2) & pattern) != ((j0 >> 3) & pattern))
        return bad(s, "block flag of another block column (out of step)");
    if (diff && d == 0) return bad(s, "first depth coded as a difference");
    int b67 = flag >> 6;
    flag &= 3;

    if (flag == 2) { /* every valid pixel 0, or the previous depth */
        for (int i = i0; i < i1; i++) {
            size_t k = (size_t)i * cols + (size_t)j0;
            for (int j = j0; j < j1; j++, k++) {
                if (!valid(s, k)) continue;
                size_t m = L2_AT(i, j);
                if (diff)
                    memcpy(o + m * dt_size[dt], o + (m - prev) * dt_size[dt],
                           dt_size[dt]);
                else
                    memset(o + m * dt_size[dt], 0, dt_size[dt]);
            }
        }
        return L2_OK;
    }
    if (flag == 0) { /* raw values of the valid pixels */
        if (diff) return bad(s, "raw block coded as a difference");
        for (int i = i0; i < i1; i++) {
            size_t k = (size_t)i * cols + (size_t)j0;
            for (int j = j0; j < j1; j++, k++) {
                if (!valid(s, k)) continue;
                if (!rd(s, o + L2_AT(i, j) * dt_size[dt], dt_size[dt]))
                    return bad(s, "raw block past the end");
            }
        }
        return L2_OK;
    }

    int du = dt_used(diff && is_int_dt(dt) ? DT_INT : dt, b67);
    if (du < 0 || (size_t)(s->end - s->p) < dt_size[du])
        return bad(s, "block offset of no type, or past the end");
    double offset = rd_var(s->p, du);
    s->p += dt_size[du];
    double zmax = h->version >= 4 && h->depth > 1 ? s->dmax[d] : h->zmax;

    if (flag == 3) { /* every valid pixel the offset (+ previous depth) */
        for (int i = i0; i < i1; i++) {
            size_t k = (size_t)i * cols + (size_t)j0;
            for (int j = j0; j < j1; j++, k++) {
                if (!valid(s, k)) continue;
                size_t m = L2_AT(i, j);
                double z = offset;
                if (diff) {
                    z = offset + ld(o, m - prev, dt);
                    z = zmax < z ? zmax : z;
                }
                if (!st(o, m, z, dt)) return bad_value(s, i0, j0);
            }
        }
        return L2_OK;
    }

    unsigned maxcount = (unsigned)((i1 - i0) * (j1 - j0)), n;
    uint32_t vmax;
    const double scale = 2 * h->maxzerr;
    /* Integers with maxZError 0.5 (scale 1): offset + v [+ previous] and
     * the clamp are exact in int64, as they are in liblerc's doubles,
     * when the clamp is a whole number. */
    const int exact = is_int_dt(dt) && scale == 1.0 && zmax == floor(zmax) &&
                      zmax > -9.0e15 && zmax < 9.0e15;
    /* unsigned 16-bit, 8 x 8, every pixel valid, rows of side-by-side
     * values: stuffed() may store the block itself */
    l2_fuse fu, *fup = NULL;
    if (dt == DT_USHORT && exact && !diff && !s->bits && nd == 1 &&
        i1 - i0 == 8 && j1 - j0 == 8) {
        fu.off = (int64_t)offset;
        fu.zm = (int64_t)zmax;
        fu.o = (uint16_t *)(void *)o + pl->m0;
        fu.stride = pl->row;
        fup = &fu;
    }
    int fused = 0;
    int r = stuffed(s, maxcount, &n, &vmax, fup, &fused);
    if (r || fused) return r;
    const uint32_t *v = s->vals;
    const int all = n == maxcount; /* liblerc: then every pixel, valid or not */
    unsigned used = 0;
    if (exact && all && !diff) {
        /* the common block: every value is off + v clamped to zm, which
         * lies in [min(off, zm), min(off + vmax, zm)]; when that range
         * fits the type, a loop with nothing else in it */
        const int64_t off = (int64_t)offset, zm = (int64_t)zmax;
        int64_t zlo = off < zm ? off : zm, zhi = off + (int64_t)vmax;
        zhi = zm < zhi ? zm : zhi;
        if (zlo >= (int64_t)dt_lo[dt] && zhi <= (int64_t)dt_hi[dt]) {
            put_exact(o, pl->m0, pl->row, nd, i1 - i0, j1 - j0, v, off, zhi,
                      dt);
            return L2_OK;
        }
    }
    if (exact) {
        const int64_t off = (int64_t)offset, zm = (int64_t)zmax;
        const int64_t lo = (int64_t)dt_lo[dt], hi = (int64_t)dt_hi[dt];
        int64_t zmin_ = INT64_MAX, zmax_ = INT64_MIN;
        for (int i = i0; i < i1; i++) {
            size_t k = (size_t)i * cols + (size_t)j0;
            size_t m = L2_AT(i, j0);
            for (int j = j0; j < j1; j++, k++, m += nd) {
                if (!all && !valid(s, k)) continue;
                if (!all && used == n) goto short_block;
                int64_t z = off + (int64_t)v[used++];
                if (diff) z += ld_int(o, m - prev, dt);
                z = zm < z ? zm : z;
                zmin_ = z < zmin_ ? z : zmin_;
                zmax_ = z > zmax_ ? z : zmax_;
                st_int(o, m, z, dt);
            }
        }
        /* checked once per block: the stores above wrapped if outside */
        if (used && (zmin_ < lo || zmax_ > hi)) return bad_value(s, i0, j0);
        return L2_OK;
    }
    for (int i = i0; i < i1; i++) {
        size_t k = (size_t)i * cols + (size_t)j0;
        size_t m = L2_AT(i, j0);
        for (int j = j0; j < j1; j++, k++, m += nd) {
            if (!all && !valid(s, k)) continue;
            if (!all && used == n) goto short_block;
            double z = offset + v[used++] * scale;
            if (diff) z += ld(o, m - prev, dt);
            z = zmax < z ? zmax : z;
            if (!st(o, m, z, dt)) return bad_value(s, i0, j0);
        }
    }
    return L2_OK;
short_block:
    /* liblerc reads past the block's values here */
    cf__err(s->err, CF_E_CODEC,
            "block at row %d, column %d: %u values for more valid pixels",
            i0, j0, n);
    return L2_BAD;
#undef L2_AT
}

/* Four 16-bit planes of a block (w values a row, L2_PLANE apart) into
 * the output's pixel-interleaved rows: 8 pixels in four 16-byte stores. */
#define L2_PLANE (L2_MAX_MB * L2_MAX_MB)
static void interleave4_u16(uint8_t *out, size_t stride, const uint16_t *pl,
                            int h, int w) {
    for (int i = 0; i < h; i++, out += stride) {
        const uint16_t *a = pl + i * w, *b = a + L2_PLANE, *c = b + L2_PLANE,
                       *e = c + L2_PLANE;
        uint16_t *o = (uint16_t *)(void *)out;
        int j = 0;
#ifdef __SSE2__
        for (; j + 8 <= w; j += 8, o += 32) {
            __m128i va = _mm_loadu_si128((const __m128i *)(a + j));
            __m128i vb = _mm_loadu_si128((const __m128i *)(b + j));
            __m128i vc = _mm_loadu_si128((const __m128i *)(c + j));
            __m128i ve = _mm_loadu_si128((const __m128i *)(e + j));
            __m128i ab0 = _mm_unpacklo_epi16(va, vb),
                    ab1 = _mm_unpackhi_epi16(va, vb);
            __m128i ce0 = _mm_unpacklo_epi16(vc, ve),
                    ce1 = _mm_unpackhi_epi16(vc, ve);
            _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi32(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 8), _mm_unpackhi_epi32(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 16), _mm_unpacklo_epi32(ab1, ce1));
            _mm_storeu_si128((__m128i *)(o + 24), _mm_unpackhi_epi32(ab1, ce1));
        }
#endif
        for (; j < w; j++, o += 4) {
            uint16_t px[4] = {a[j], b[j], c[j], e[j]};
            memcpy(o, px, 8);
        }
    }
}

/* Lerc2::ReadTiles for one data type (inlined with dt constant).  4-band
 * 16-bit pixels with every pixel valid (GDAL's LERC of 4-band uint16)
 * are decoded a block at a time into planes, then interleaved: the
 * depth-strided stores of each value cost more than the decode. */
L2_INLINE int read_tiles_t(l2 *s, const int dt) {
    const l2_header *h = &s->h;
    const size_t cols = (size_t)h->cols, nd = (size_t)h->depth;
    const int staged = dt_size[dt] == 2 && nd == 4 && !s->bits;
    int mb = h->mbsize;
    if (mb > L2_MAX_MB) return bad(s, "blocks larger than 32 pixels");
    int ty = (h->rows + mb - 1) / mb, tx = (h->cols + mb - 1) / mb;
    for (int it = 0; it < ty; it++) {
        int i0 = it * mb, i1 = it == ty - 1 ? h->rows : i0 + mb;
        for (int jt = 0; jt < tx; jt++) {
            int j0 = jt * mb, j1 = jt == tx - 1 ? h->cols : j0 + mb;
            for (int d = 0; d < h->depth; d++) {
                l2_place pl;
                if (staged) {
                    pl.o = (uint8_t *)s->stage;
                    pl.m0 = (size_t)d * L2_PLANE;
                    pl.row = (size_t)(j1 - j0);
                    pl.px = 1;
                    pl.prev = L2_PLANE;
                } else {
                    pl.o = s->out;
                    pl.m0 = ((size_t)i0 * cols + (size_t)j0) * nd + (size_t)d;
                    pl.row = cols * nd;
                    pl.px = nd;
                    pl.prev = 1;
                }
                int r = read_block(s, i0, i1, j0, j1, d, &pl, dt);
                if (r) return r;
            }
            if (staged)
                interleave4_u16(s->out + ((size_t)i0 * cols + (size_t)j0) * 8,
                                cols * 8, s->stage, i1 - i0, j1 - j0);
        }
    }
    return L2_OK;
}

static int read_tiles(l2 *s) {
    switch (s->h.dt) {
    case DT_CHAR: return read_tiles_t(s, DT_CHAR);
    case DT_BYTE: return read_tiles_t(s, DT_BYTE);
    case DT_SHORT: return read_tiles_t(s, DT_SHORT);
    case DT_USHORT: return read_tiles_t(s, DT_USHORT);
    case DT_INT: return read_tiles_t(s, DT_INT);
    case DT_UINT: return read_tiles_t(s, DT_UINT);
    case DT_FLOAT: return read_tiles_t(s, DT_FLOAT);
    default: return read_tiles_t(s, DT_DOUBLE);
    }
}

/* FillConstImage: every depth of every valid pixel its constant. */
static int fill_const(l2 *s, int per_depth) {
    const l2_header *h = &s->h;
    size_t npix = (size_t)h->rows * h->cols, nd = (size_t)h->depth;
    for (size_t k = 0; k < npix; k++) {
        if (!valid(s, k)) continue;
        for (size_t d = 0; d < nd; d++) {
            double z = per_depth && nd > 1 ? s->dmin[d] : h->zmin;
            if (!st(s->out, k * nd + d, z, h->dt))
                return bad_value(s, 0, 0);
        }
    }
    return L2_OK;
}

/* ReadDataOneSweep: the valid pixels' values, uncompressed. */
static int one_sweep(l2 *s) {
    const l2_header *h = &s->h;
    size_t npix = (size_t)h->rows * h->cols;
    size_t len = (size_t)h->depth * dt_size[h->dt], nvalid = 0;
    for (size_t k = 0; k < npix; k++) nvalid += valid(s, k) ? 1 : 0;
    if ((size_t)(s->end - s->p) / len < nvalid)
        return bad(s, "uncompressed values past the end");
    for (size_t k = 0; k < npix; k++) {
        if (!valid(s, k)) continue;
        memcpy(s->out + k * len, s->p, len);
        s->p += len;
    }
    return L2_OK;
}

/* ReadMinMaxRanges: depth minima then maxima, each of the data type. */
static int read_ranges(l2 *s) {
    const l2_header *h = &s->h;
    size_t sz = dt_size[h->dt];
    if ((size_t)(s->end - s->p) / sz / 2 < (size_t)h->depth)
        return bad(s, "depth ranges past the end");
    for (int d = 0; d < h->depth; d++, s->p += sz)
        s->dmin[d] = rd_var(s->p, h->dt);
    for (int d = 0; d < h->depth; d++, s->p += sz)
        s->dmax[d] = rd_var(s->p, h->dt);
    return L2_OK;
}

size_t cf__lerc2_scratch_bytes(uint64_t width, uint64_t height,
                               uint64_t depth) {
    return sizeof(l2) + 16 + (size_t)((width * height + 7) / 8) +
           (size_t)(16 * depth);
}

cf_status cf__lerc2_decode(cf__scratch *scratch, const uint8_t *blob,
                           size_t len, int dt, int depth, int cols, int rows,
                           uint8_t *out, uint8_t *mask, int *done,
                           cf_error *err) {
    *done = 0;
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    /* liblerc reads only on little-endian machines, and so does this */
    (void)scratch; (void)blob; (void)len; (void)dt; (void)depth; (void)cols;
    (void)rows; (void)out; (void)mask; (void)err;
    return CF_OK;
#else
    if (depth <= 0 || cols <= 0 || rows <= 0) return CF_OK;
    size_t npix = (size_t)cols * (size_t)rows;
    size_t mbytes = (npix + 7) / 8;
    CF__TRY(cf__scratch_reserve(
        scratch, cf__lerc2_scratch_bytes((uint64_t)cols, (uint64_t)rows,
                                         (uint64_t)depth),
        err));
    l2 *s = (l2 *)(void *)(((uintptr_t)scratch->p + 15) & ~(uintptr_t)15);
    uint8_t *bits = (uint8_t *)(s + 1);
    double *ranges = (double *)(void *)(bits + ((mbytes + 7) & ~(size_t)7));
    s->p = blob;
    s->end = blob + len;
    s->out = out;
    s->err = err;
    s->bits = NULL;
#ifdef L2_AVX2
    s->avx2 = __builtin_cpu_supports("avx2");
#endif

    int r = read_header(s);
    if (r == L2_BAD) return CF_E_CODEC;
    if (r) return CF_OK;
    const l2_header *h = &s->h;
    /* what lerc_decode would refuse or do differently: another type or
     * size than asked, several bands, v6 no-data values */
    if (h->dt != dt || h->depth != depth || h->cols != cols ||
        h->rows != rows || (size_t)h->blobsize > len || h->blobs_more != 0 ||
        h->pass_nodata)
        return CF_OK;
    if (h->blobsize < 14)
        return cf__err(err, CF_E_CODEC, "blob: header has an impossible size");
    if (fletcher32(blob + 14, (size_t)h->blobsize - 14) != h->checksum)
        return cf__err(err, CF_E_CODEC,
                       "blob: checksum mismatch (corrupt data)");
    /* only this blob: bytes after it belong to nobody (lerc.c checks the
     * blob fills the chunk) */
    s->end = blob + h->blobsize;
    s->dmin = ranges;
    s->dmax = ranges + depth;
    r = read_mask(s, bits, mbytes);
    if (r == L2_BAD) return CF_E_CODEC;
    if (r) return CF_OK;
    /* lerc_decode with no mask asked refuses a blob that has one */
    if (!mask && (s->bits || h->nvalid == 0)) return CF_OK;

    size_t vsize = dt_size[dt];
    size_t total = npix * (size_t)depth * vsize;
    /* liblerc zeroes the output first; every pixel is written below when
     * all are valid, so only a partial mask needs it */
    if (s->bits) memset(out, 0, total);
    if (h->nvalid == 0) {
        r = L2_OK;
    } else if (h->zmin == h->zmax) {
        r = fill_const(s, 0);
    } else {
        r = L2_OK;
        if (h->version >= 4) {
            r = read_ranges(s);
            if (!r && memcmp(s->dmin, s->dmax, (size_t)depth * 8) == 0) {
                r = fill_const(s, 1);
                goto done;
            }
        }
        if (r) goto done;
        uint8_t sweep;
        if (!rd(s, &sweep, 1)) {
            r = bad(s, "data flag past the end");
            goto done;
        }
        if (!sweep) {
            int huff_int = (dt == DT_CHAR || dt == DT_BYTE) &&
                           h->maxzerr == 0.5;
            int huff_flt = h->version >= 6 &&
                           (dt == DT_FLOAT || dt == DT_DOUBLE) &&
                           h->maxzerr == 0;
            if (huff_int || huff_flt) {
                uint8_t mode;
                /* 0 tiling; the Huffman modes (1-2 from v4, 3 from v6)
                 * are liblerc's */
                if (!rd(s, &mode, 1) || mode > 3 ||
                    (mode > 2 && h->version < 6) ||
                    (mode > 1 && h->version < 4)) {
                    r = bad(s, "coding mode past the end or unknown");
                    goto done;
                }
                if (mode != 0) {
                    r = L2_DEFER;
                    goto done;
                }
            }
            r = read_tiles(s);
        } else {
            r = one_sweep(s);
        }
    }
done:
    if (r == L2_BAD) return CF_E_CODEC; /* err filled where it was found */
    if (r == L2_DEFER) return CF_OK;
    if (mask)
        for (size_t k = 0; k < npix; k++) mask[k] = valid(s, k) ? 1 : 0;
    *done = 1;
    return CF_OK;
#endif
}

#else
typedef int cf__lerc2_absent;
#endif
