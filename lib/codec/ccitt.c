/*
 * ccitt.c - CCITT (ITU-T T.4 and T.6) bilevel codecs: Modified Huffman
 * "RLE" (TIFF 2, and 32771 with word alignment), Group 3 (TIFF 3, 1-D or
 * 2-D per T4Options) and Group 4 (TIFF 4).  Old scanned maps and masks use
 * them.  Output: 1-bit rows, most significant bit first, white 0 and
 * black 1 whatever the PhotometricInterpretation (as libtiff, so GDAL,
 * hands them out).
 *
 * Written from the T.4/T.6 code tables; where a stream is odd but
 * decodable, what libtiff's decoder does (and so GDAL reads) is followed:
 *  - Group 3 rows are found by their EOL (eleven 0 bits then a 1; fill
 *    bits before it and junk before the first are skipped);
 *  - a row that ends early (an EOL too soon) is filled with white; a run
 *    past the row's end is dropped and the rest filled with white;
 *  - rows are kept as libtiff keeps them, run lengths with their zero
 *    runs, cleaned up at the row's end as libtiff's CLEANUP_RUNS does:
 *    the zero runs are changing elements of the next row's reference, so
 *    a stream coded wider than the file says decodes as in GDAL (found by
 *    differential tests against libtiff 4.5 over random pages and
 *    mutated streams).
 * A bad code word, data that ends before the chunk's rows, an early end
 * of block, or the T.4 uncompressed mode are errors: libtiff decodes
 * those into a partly filled strip with a warning, which would be a
 * silent partial result here.
 *
 * Decoding is table driven: one lookup of 12 (white), 13 (black) or 7
 * (2-D modes) bits per code, tables built once from the code lists.
 * Memory is two rows of run lengths in the context, as many as libtiff
 * holds (a row needing more fails, as in libtiff).
 */
#include "codec_internal.h"

#include <pthread.h>

/* ------------------------------------------------------------ tables */

enum { K_BAD = 0, K_TERM, K_MAKEUP, K_EOL };
enum { M_BAD = 0, M_PASS, M_HORIZ, M_V, M_EXT, M_EOL };

typedef struct code {
    uint16_t run;
    const char *bits;
} code;

/* T.4 Table 2: terminating codes, white and black. */
static const code white_term[64] = {
    {0, "00110101"}, {1, "000111"}, {2, "0111"}, {3, "1000"},
    {4, "1011"}, {5, "1100"}, {6, "1110"}, {7, "1111"},
    {8, "10011"}, {9, "10100"}, {10, "00111"}, {11, "01000"},
    {12, "001000"}, {13, "000011"}, {14, "110100"}, {15, "110101"},
    {16, "101010"}, {17, "101011"}, {18, "0100111"}, {19, "0001100"},
    {20, "0001000"}, {21, "0010111"}, {22, "0000011"}, {23, "0000100"},
    {24, "0101000"}, {25, "0101011"}, {26, "0010011"}, {27, "0100100"},
    {28, "0011000"}, {29, "00000010"}, {30, "00000011"}, {31, "00011010"},
    {32, "00011011"}, {33, "00010010"}, {34, "00010011"}, {35, "00010100"},
    {36, "00010101"}, {37, "00010110"}, {38, "00010111"}, {39, "00101000"},
    {40, "00101001"}, {41, "00101010"}, {42, "00101011"}, {43, "00101100"},
    {44, "00101101"}, {45, "00000100"}, {46, "00000101"}, {47, "00001010"},
    {48, "00001011"}, {49, "01010010"}, {50, "01010011"}, {51, "01010100"},
    {52, "01010101"}, {53, "00100100"}, {54, "00100101"}, {55, "01011000"},
    {56, "01011001"}, {57, "01011010"}, {58, "01011011"}, {59, "01001010"},
    {60, "01001011"}, {61, "00110010"}, {62, "00110011"}, {63, "00110100"},
};
static const code black_term[64] = {
    {0, "0000110111"}, {1, "010"}, {2, "11"}, {3, "10"},
    {4, "011"}, {5, "0011"}, {6, "0010"}, {7, "00011"},
    {8, "000101"}, {9, "000100"}, {10, "0000100"}, {11, "0000101"},
    {12, "0000111"}, {13, "00000100"}, {14, "00000111"}, {15, "000011000"},
    {16, "0000010111"}, {17, "0000011000"}, {18, "0000001000"},
    {19, "00001100111"}, {20, "00001101000"}, {21, "00001101100"},
    {22, "00000110111"}, {23, "00000101000"}, {24, "00000010111"},
    {25, "00000011000"}, {26, "000011001010"}, {27, "000011001011"},
    {28, "000011001100"}, {29, "000011001101"}, {30, "000001101000"},
    {31, "000001101001"}, {32, "000001101010"}, {33, "000001101011"},
    {34, "000011010010"}, {35, "000011010011"}, {36, "000011010100"},
    {37, "000011010101"}, {38, "000011010110"}, {39, "000011010111"},
    {40, "000001101100"}, {41, "000001101101"}, {42, "000011011010"},
    {43, "000011011011"}, {44, "000001010100"}, {45, "000001010101"},
    {46, "000001010110"}, {47, "000001010111"}, {48, "000001100100"},
    {49, "000001100101"}, {50, "000001010010"}, {51, "000001010011"},
    {52, "000000100100"}, {53, "000000110111"}, {54, "000000111000"},
    {55, "000000100111"}, {56, "000000101000"}, {57, "000001011000"},
    {58, "000001011001"}, {59, "000000101011"}, {60, "000000101100"},
    {61, "000001011010"}, {62, "000001100110"}, {63, "000001100111"},
};
/* T.4 Table 3: make-up codes, and the extended ones both colours share. */
static const code white_makeup[27] = {
    {64, "11011"}, {128, "10010"}, {192, "010111"}, {256, "0110111"},
    {320, "00110110"}, {384, "00110111"}, {448, "01100100"},
    {512, "01100101"}, {576, "01101000"}, {640, "01100111"},
    {704, "011001100"}, {768, "011001101"}, {832, "011010010"},
    {896, "011010011"}, {960, "011010100"}, {1024, "011010101"},
    {1088, "011010110"}, {1152, "011010111"}, {1216, "011011000"},
    {1280, "011011001"}, {1344, "011011010"}, {1408, "011011011"},
    {1472, "010011000"}, {1536, "010011001"}, {1600, "010011010"},
    {1664, "011000"}, {1728, "010011011"},
};
static const code black_makeup[27] = {
    {64, "0000001111"}, {128, "000011001000"}, {192, "000011001001"},
    {256, "000001011011"}, {320, "000000110011"}, {384, "000000110100"},
    {448, "000000110101"}, {512, "0000001101100"}, {576, "0000001101101"},
    {640, "0000001001010"}, {704, "0000001001011"}, {768, "0000001001100"},
    {832, "0000001001101"}, {896, "0000001110010"}, {960, "0000001110011"},
    {1024, "0000001110100"}, {1088, "0000001110101"}, {1152, "0000001110110"},
    {1216, "0000001110111"}, {1280, "0000001010010"}, {1344, "0000001010011"},
    {1408, "0000001010100"}, {1472, "0000001010101"}, {1536, "0000001011010"},
    {1600, "0000001011011"}, {1664, "0000001100100"}, {1728, "0000001100101"},
};
static const code ext_makeup[13] = {
    {1792, "00000001000"}, {1856, "00000001100"}, {1920, "00000001101"},
    {1984, "000000010010"}, {2048, "000000010011"}, {2112, "000000010100"},
    {2176, "000000010101"}, {2240, "000000010110"}, {2304, "000000010111"},
    {2368, "000000011100"}, {2432, "000000011101"}, {2496, "000000011110"},
    {2560, "000000011111"},
};
/* T.4 Table 4: 2-D coding modes (vertical codes carry a1 - b1 + 3). */
static const struct {
    uint8_t mode;
    int8_t delta;
    const char *bits;
} modes[] = {
    {M_PASS, 0, "0001"},   {M_HORIZ, 0, "001"},   {M_V, 0, "1"},
    {M_V, 1, "011"},       {M_V, 2, "000011"},    {M_V, 3, "0000011"},
    {M_V, -1, "010"},      {M_V, -2, "000010"},   {M_V, -3, "0000010"},
    {M_EXT, 0, "0000001"}, {M_EOL, 0, "0000000"},
};

typedef struct rent { /* run-length table entry */
    uint16_t run;
    uint8_t len, kind;
} rent;
typedef struct ment { /* mode table entry */
    uint8_t len, mode;
    int8_t delta;
} ment;

#define WBITS 12
#define BBITS 13
#define MBITS 7
static rent white_tab[1 << WBITS], black_tab[1 << BBITS];
static ment mode_tab[1 << MBITS];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static unsigned code_value(const char *b, unsigned *len) {
    unsigned v = 0, n = 0;
    for (; b[n]; n++) v = v << 1 | (unsigned)(b[n] == '1');
    *len = n;
    return v;
}

static void put_run(rent *tab, unsigned tbits, const code *c, size_t n,
                    uint8_t kind) {
    for (size_t i = 0; i < n; i++) {
        unsigned len, v = code_value(c[i].bits, &len);
        unsigned shift = tbits - len;
        for (unsigned s = 0; s < 1u << shift; s++)
            tab[v << shift | s] = (rent){c[i].run, (uint8_t)len, kind};
    }
}

static void build_tables(void) {
    put_run(white_tab, WBITS, white_term, 64, K_TERM);
    put_run(white_tab, WBITS, white_makeup, 27, K_MAKEUP);
    put_run(white_tab, WBITS, ext_makeup, 13, K_MAKEUP);
    put_run(black_tab, BBITS, black_term, 64, K_TERM);
    put_run(black_tab, BBITS, black_makeup, 27, K_MAKEUP);
    put_run(black_tab, BBITS, ext_makeup, 13, K_MAKEUP);
    /* An EOL's eleven 0 bits (its final 1 is left for the row sync). */
    for (unsigned s = 0; s < 1u << (WBITS - 11); s++)
        white_tab[s] = (rent){0, 11, K_EOL};
    for (unsigned s = 0; s < 1u << (BBITS - 11); s++)
        black_tab[s] = (rent){0, 11, K_EOL};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        unsigned len, v = code_value(modes[i].bits, &len);
        unsigned shift = MBITS - len;
        for (unsigned s = 0; s < 1u << shift; s++)
            mode_tab[v << shift | s] =
                (ment){(uint8_t)len, modes[i].mode, modes[i].delta};
    }
}

/* -------------------------------------------------------- bit reader */

/* Bits most significant first, kept left-aligned in a 64-bit word that is
 * topped up a byte at a time; past the input's end it fills with zeros,
 * as libtiff pads (as long as one real bit is left: at_end). */
typedef struct reader {
    const uint8_t *p;
    size_t n, next;      /* input bytes, next byte to load */
    uint64_t buf;        /* unread bits, left-aligned */
    unsigned avail;      /* bits of buf that came from the input or padding */
    uint64_t pos, nbits; /* bits consumed, bits in the input */
} reader;

static inline void refill(reader *r) {
    while (r->avail <= 56) {
        uint64_t b = r->next < r->n ? r->p[r->next] : 0;
        r->next++;
        r->buf |= b << (56 - r->avail);
        r->avail += 8;
    }
}

/* The next n (<= 16) bits. */
static inline unsigned peek(reader *r, unsigned n) {
    if (r->avail < n) refill(r);
    return (unsigned)(r->buf >> (64 - n));
}

static inline void skip(reader *r, unsigned n) {
    if (r->avail < n) refill(r);
    r->buf <<= n;
    r->avail -= n;
    r->pos += n;
}

/* Move to bit position `pos` (forward only; used for row alignment). */
static void skip_to(reader *r, uint64_t pos) {
    while (r->pos < pos) {
        uint64_t k = pos - r->pos;
        skip(r, k > 16 ? 16 : (unsigned)k);
    }
}

static int at_end(const reader *r) { return r->pos >= r->nbits; }

/* ------------------------------------------------------------ decode */

/* Rows are arrays of run lengths, white first, alternating, kept the way
 * libtiff's tif_fax3.h keeps them (and so GDAL decodes): a run of zero
 * pixels is kept, a row that ends off its width is cleaned up as
 * CLEANUP_RUNS does, the filled row clamps its runs to the width, and a
 * zero run is appended for the next row's reference.  The zero runs
 * matter: they are changing elements to the next row's b1, so a stream
 * whose rows end past the width (an encoder's width larger than the
 * file's) decodes as libtiff decodes it only this way. */
typedef struct dec {
    reader r;
    uint32_t width;
    uint32_t *cur, *ref; /* run lengths (libtiff's curruns, refruns) */
    size_t cap;          /* entries each holds */
    size_t lim;          /* runs a row may have (libtiff's nruns) */
    size_t pa;           /* runs in cur so far */
    int64_t a0;          /* pixels so far */
    uint64_t rl;         /* pending run length (make-up and pass codes) */
    cf_error *err;
    uint32_t row;
} dec;

static cf_status bad(dec *d, const char *what) {
    return cf__err(d->err, CF_E_CODEC, "%s at row %u (bit %llu of %llu)",
                   what, (unsigned)d->row, (unsigned long long)d->r.pos,
                   (unsigned long long)d->r.nbits);
}

/* libtiff's SETVALUE: close the pending run plus x pixels. */
static cf_status setvalue(dec *d, uint64_t x) {
    if (d->pa >= d->lim) return bad(d, "more runs than a row holds");
    d->cur[d->pa++] = (uint32_t)(d->rl + x);
    d->a0 += (int64_t)x;
    d->rl = 0;
    return CF_OK;
}

/* One run length of the given colour: make-up codes then a terminating
 * code.  *eol is set when an EOL stands where the run should be. */
static cf_status read_run(dec *d, int black, uint64_t *run, int *eol) {
    *run = 0;
    *eol = 0;
    for (;;) {
        if (at_end(&d->r)) return bad(d, "data ends");
        const rent *e = black ? &black_tab[peek(&d->r, BBITS)]
                              : &white_tab[peek(&d->r, WBITS)];
        if (e->kind == K_BAD)
            return bad(d, black ? "bad black code" : "bad white code");
        skip(&d->r, e->len);
        if (e->kind == K_EOL) {
            *eol = 1;
            return CF_OK;
        }
        *run += e->run;
        /* libtiff takes any run (one past the row is cleaned up); a
         * stream of 2^30 pixel runs is hostile, and runs are 32-bit */
        if (*run > (1u << 30)) return bad(d, "run of more than 2^30 pixels");
        if (e->kind == K_TERM) return CF_OK;
    }
}

/* CLEANUP_RUNS: a row that does not end at its width loses the runs past
 * it and is completed in white (libtiff warns: "line length mismatch"). */
static cf_status cleanup(dec *d) {
    cf_status st = CF_OK;
    int64_t w = d->width;
    if (d->rl) st = setvalue(d, 0);
    if (st || d->a0 == w) return st;
    while (d->a0 > w && d->pa > 0) d->a0 -= d->cur[--d->pa];
    if (d->a0 < w) {
        if (d->a0 < 0) d->a0 = 0;
        if (d->pa & 1) st = setvalue(d, 0);
        if (!st) st = setvalue(d, (uint64_t)(w - d->a0));
    } else if (d->a0 > w) {
        st = setvalue(d, (uint64_t)w);
        if (!st) st = setvalue(d, 0);
    }
    return st;
}

/* A Modified Huffman (1-D) row (EXPAND1D).  *eol: it ended at an EOL. */
static cf_status row_1d(dec *d, int *eol) {
    int64_t w = d->width;
    *eol = 0;
    for (;;) {
        for (int black = 0; black < 2; black++) {
            uint64_t run;
            CF__TRY(read_run(d, black, &run, eol));
            if (*eol) return cleanup(d);
            CF__TRY(setvalue(d, run));
            if (d->a0 >= w) return cleanup(d);
        }
        if (d->cur[d->pa - 1] == 0 && d->cur[d->pa - 2] == 0) d->pa -= 2;
    }
}

/* A 2-D row against the reference row (EXPAND2D).  *eol: it ended at an
 * EOL. */
static cf_status row_2d(dec *d, int *eol) {
    const uint32_t *ref = d->ref;
    const int64_t w = d->width;
    size_t pb = 0;
    int64_t b1 = ref[pb++];
    cf_status st;
    *eol = 0;
/* CHECK_b1: b1 to the first change right of a0 of the other colour
 * (skipped before the row's first run, as libtiff skips it). */
#define CHECK_B1()                                                        \
    do {                                                                  \
        if (d->pa)                                                        \
            while (b1 <= d->a0 && b1 < w) {                               \
                if (pb + 1 >= d->cap) return bad(d, "reference row overrun"); \
                b1 += (int64_t)ref[pb] + ref[pb + 1];                     \
                pb += 2;                                                  \
            }                                                             \
    } while (0)
    while (d->a0 < w) {
        if (d->pa >= d->lim) return bad(d, "more runs than a row holds");
        if (at_end(&d->r)) return bad(d, "data ends");
        const ment *m = &mode_tab[peek(&d->r, MBITS)];
        switch (m->mode) {
        case M_PASS:
            skip(&d->r, m->len);
            CHECK_B1();
            if (pb + 1 >= d->cap) return bad(d, "reference row overrun");
            b1 += ref[pb++];
            d->rl += (uint64_t)(b1 - d->a0);
            d->a0 = b1;
            b1 += ref[pb++];
            break;
        case M_HORIZ: {
            skip(&d->r, m->len);
            int black = (int)(d->pa & 1);
            for (int k = 0; k < 2; k++, black ^= 1) {
                uint64_t run;
                int e;
                st = read_run(d, black, &run, &e);
                if (!st && e) st = bad(d, "EOL in a horizontal-mode run");
                if (!st) st = setvalue(d, run);
                CF__TRY(st);
            }
            CHECK_B1();
            break;
        }
        case M_V:
            skip(&d->r, m->len);
            CHECK_B1();
            if (m->delta < 0 && b1 < d->a0 - m->delta)
                return bad(d, "vertical code left of a0");
            CF__TRY(setvalue(d, (uint64_t)(b1 - d->a0 + m->delta)));
            if (m->delta < 0) {
                if (pb == 0) return bad(d, "reference row overrun");
                b1 -= ref[--pb];
            } else {
                if (pb >= d->cap) return bad(d, "reference row overrun");
                b1 += ref[pb++];
            }
            break;
        case M_EXT: return bad(d, "uncompressed mode (not supported)");
        case M_EOL:
            if (peek(&d->r, 11) != 0) return bad(d, "bad 2-D code");
            skip(&d->r, 11);
            *eol = 1;
            /* libtiff closes the row with its rest, then cleans it up
             * (a0 not moved: the rest is counted twice, and the fill
             * clamps it) */
            if (d->pa >= d->lim) return bad(d, "more runs than a row holds");
            d->cur[d->pa++] = (uint32_t)(d->a0 < w ? w - d->a0 : 0);
            return cleanup(d);
        default: return bad(d, "bad 2-D code");
        }
    }
#undef CHECK_B1
    if (d->rl) {
        CF__TRY(setvalue(d, 0));
    }
    return cleanup(d);
}

/* Group 3: skip to and past the EOL that starts a row (fill bits and, at
 * the start, any junk), unless the last row ended on one. */
static cf_status sync_eol(dec *d, int seen) {
    if (!seen) {
        while (peek(&d->r, 11) != 0) {
            if (at_end(&d->r)) return bad(d, "no EOL: data ends");
            skip(&d->r, 1);
        }
    }
    for (;;) { /* the zeros before the EOL's 1 */
        if (at_end(&d->r)) return bad(d, "data ends in an EOL");
        if (peek(&d->r, 1)) break;
        skip(&d->r, 1);
    }
    skip(&d->r, 1);
    return CF_OK;
}

static void set_bits(uint8_t *row, uint32_t x0, uint32_t x1) {
    while (x0 < x1 && (x0 & 7)) {
        row[x0 >> 3] |= (uint8_t)(0x80 >> (x0 & 7));
        x0++;
    }
    if (x0 + 8 <= x1) {
        memset(row + (x0 >> 3), 0xff, (x1 - x0) >> 3);
        x0 += (x1 - x0) & ~7u;
    }
    for (; x0 < x1; x0++) row[x0 >> 3] |= (uint8_t)(0x80 >> (x0 & 7));
}

/* _TIFFFax3fillruns: paint the row, clamping its runs to the width (the
 * clamped runs are the next row's reference). */
static void fill_row(dec *d, uint8_t *row) {
    uint32_t *runs = d->cur, w = d->width, x = 0;
    size_t n = d->pa;
    memset(row, 0, (w + 7) / 8);
    if (n & 1) runs[n++] = 0;
    for (size_t i = 0; i < n; i += 2) {
        for (int k = 0; k < 2; k++) {
            uint32_t run = runs[i + k];
            if ((uint64_t)x + run > w || run > w) run = runs[i + k] = w - x;
            if (k) set_bits(row, x, x + run);
            x += run;
        }
    }
}

cf_status cf__check_ccitt(const cf__codec_params *p, cf_error *err) {
    if (p->bits != 1 || p->samples != 1)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "CCITT compression of %u samples of %u bits (it codes "
                       "1-bit images)",
                       (unsigned)p->samples, (unsigned)p->bits);
    return CF_OK;
}

cf_status cf__decode_ccitt(cf__codec_ctx *ctx, const cf__codec_params *p,
                           const uint8_t *src, size_t src_len, uint8_t *dst,
                           size_t dst_len, cf_error *err) {
    CF__TRY(cf__check_ccitt(p, err));
    pthread_once(&tab_once, build_tables);
    uint32_t w = p->width;
    size_t row_bytes = ((size_t)w + 7) / 8;
    if (row_bytes * p->height != dst_len)
        return cf__err(err, CF_E_ARG, "output of %zu bytes", dst_len);
    int g3 = p->compression == 3, g4 = p->compression == 4;
    int twod = g4 || (g3 && (p->t4_options & 1));
    /* Two rows of runs.  libtiff holds (w + 1 rounded up to 32) runs a
     * row, twice that with 2-D coding, and fails a row that needs more.
     * Every run but a few a row costs a code of one bit at least, so the
     * input's bits bound them too: a tiny chunk that claims a huge width
     * asks for little memory. */
    size_t lim = ((size_t)w + 1 + 31) / 32 * 32 * (twod ? 2 : 1);
    size_t per = lim + 8;
    if ((uint64_t)src_len * 8 + 64 < per) per = src_len * 8 + 64;
    CF__TRY(cf__scratch_reserve(&ctx->runs, 2 * per * sizeof(uint32_t), err));
    dec d;
    memset(&d, 0, sizeof d);
    d.r.p = src;
    d.r.n = src_len;
    d.r.nbits = (uint64_t)src_len * 8;
    d.width = w;
    d.err = err;
    d.cur = (uint32_t *)ctx->runs.p;
    d.ref = d.cur + per;
    d.cap = per;
    d.lim = lim < per - 4 ? lim : per - 4;
    memset(d.cur, 0, 2 * per * sizeof(uint32_t));
    /* The first reference row is all white (Fax3PreDecode). */
    d.ref[0] = w;
    d.ref[1] = 0;
    int eol = 0;
    for (d.row = 0; d.row < p->height; d.row++) {
        d.pa = 0;
        d.a0 = 0;
        d.rl = 0;
        if (g3) {
            CF__TRY(sync_eol(&d, eol));
        }
        int is1d = !g4;
        if (g3 && twod) {
            if (at_end(&d.r)) return bad(&d, "data ends");
            is1d = (int)peek(&d.r, 1);
            skip(&d.r, 1);
        }
        CF__TRY(is1d ? row_1d(&d, &eol) : row_2d(&d, &eol));
        if (g4 && eol) return bad(&d, "end of block before the last row");
        fill_row(&d, dst + (size_t)d.row * row_bytes);
        /* the imaginary change for reference */
        d.cur[d.pa] = 0;
        uint32_t *t = d.ref;
        d.ref = d.cur;
        d.cur = t;
        if (p->compression == 2) /* RLE: rows start on a byte */
            skip_to(&d.r, (d.r.pos + 7) & ~(uint64_t)7);
        else if (p->compression == 32771) /* RLEW: on a 16-bit word */
            skip_to(&d.r, (d.r.pos + 15) & ~(uint64_t)15);
    }
    return CF_OK;
}
