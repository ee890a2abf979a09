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
 *  - runs of 0 pixels are merged away (a pixel colour change is where a
 *    run of non-zero length starts).
 * A bad code word, data that ends before the chunk's rows, an early end
 * of block, or the T.4 uncompressed mode are errors: libtiff decodes
 * those into a partly filled strip with a warning, which would be a
 * silent partial result here.
 *
 * Decoding is table driven: one lookup of 12 (white), 13 (black) or 7
 * (2-D modes) bits per code, tables built once from the code lists.
 * Every position is bounded by the row width; memory is two rows of run
 * ends in the context.
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

typedef struct line {
    uint32_t *end; /* end[i]: where run i ends; run i is black if i odd */
    uint32_t pos;  /* index of the last run */
    int over;      /* a run went past the row: dropped (libtiff) */
} line;

typedef struct dec {
    reader r;
    uint32_t width;
    line cur, ref;
    cf_error *err;
    uint32_t row;
} dec;

/* Extend the row with a run of `black` colour up to a1: a run of zero
 * pixels adds nothing; one past the row is dropped. */
static void add_run(line *l, uint32_t width, uint64_t a1, int black) {
    if (a1 > width) {
        l->over = 1;
        return;
    }
    if (a1 <= l->end[l->pos]) return;
    if ((l->pos & 1) != (uint32_t)black) l->pos++;
    l->end[l->pos] = (uint32_t)a1;
}

static cf_status bad(dec *d, const char *what) {
    return cf__err(d->err, CF_E_CODEC, "%s at row %u (bit %llu of %llu)",
                   what, (unsigned)d->row, (unsigned long long)d->r.pos,
                   (unsigned long long)d->r.nbits);
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
        if (*run > ((uint64_t)d->width << 1) + 2560)
            return bad(d, "run longer than the row");
        if (e->kind == K_TERM) return CF_OK;
    }
}

/* Close a row as libtiff does: a row that ended early (or lost a run
 * past its end) is completed in white. */
static void finish_row(dec *d, uint64_t a0) {
    if (a0 < d->width || d->cur.over) add_run(&d->cur, d->width, d->width, 0);
}

/* A Modified Huffman (1-D) row.  *eol: it ended at an EOL. */
static cf_status row_1d(dec *d, int *eol) {
    uint64_t a0 = 0;
    int black = 0;
    *eol = 0;
    while (a0 < d->width) {
        uint64_t run;
        cf_status st = read_run(d, black, &run, eol);
        if (st) return st;
        if (*eol) break;
        add_run(&d->cur, d->width, a0 + run, black);
        a0 += run;
        black ^= 1;
    }
    finish_row(d, a0);
    return CF_OK;
}

/* A 2-D row against the reference row.  *eol: it ended at an EOL. */
static cf_status row_2d(dec *d, int *eol) {
    const uint32_t *ref = d->ref.end, w = d->width;
    int64_t a0 = -1; /* before the first pixel */
    int black = 0;
    uint32_t rp = 0; /* ref index; its parity is the colour at a0 */
    *eol = 0;
    while (a0 < (int64_t)w) {
        /* b1: the first change on the reference row right of a0 to the
         * opposite colour (ref[rp], rp of a0's colour parity); b2 the
         * next.  The reference row ends with sentinels at w. */
        while ((int64_t)ref[rp] <= a0 && ref[rp] < w) rp += 2;
        uint32_t b1 = ref[rp], b2 = ref[rp + 1];
        if (at_end(&d->r)) return bad(d, "data ends");
        const ment *m = &mode_tab[peek(&d->r, MBITS)];
        uint64_t start = a0 < 0 ? 0 : (uint64_t)a0;
        switch (m->mode) {
        case M_PASS:
            skip(&d->r, m->len);
            add_run(&d->cur, w, b2, black);
            a0 = b2;
            if (b2 < w) rp += 2;
            break;
        case M_HORIZ: {
            skip(&d->r, m->len);
            uint64_t r1, r2;
            int e1, e2;
            cf_status st = read_run(d, black, &r1, &e1);
            if (!st && e1) st = bad(d, "EOL in a horizontal-mode run");
            if (!st) st = read_run(d, !black, &r2, &e2);
            if (!st && e2) st = bad(d, "EOL in a horizontal-mode run");
            if (st) return st;
            add_run(&d->cur, w, start + r1, black);
            add_run(&d->cur, w, start + r1 + r2, !black);
            a0 = (int64_t)(start + r1 + r2);
            break;
        }
        case M_V: {
            skip(&d->r, m->len);
            int64_t a1 = (int64_t)b1 + m->delta;
            if (a1 < (int64_t)start) return bad(d, "vertical code left of a0");
            add_run(&d->cur, w, (uint64_t)a1, black);
            a0 = a1;
            black ^= 1;
            if (m->delta < 0 && rp > 0) rp--;
            else rp++;
            break;
        }
        case M_EXT: return bad(d, "uncompressed mode (not supported)");
        case M_EOL:
            if (peek(&d->r, 11) != 0) return bad(d, "bad 2-D code");
            skip(&d->r, 11);
            *eol = 1;
            finish_row(d, a0 < 0 ? 0 : (uint64_t)a0);
            return CF_OK;
        default: return bad(d, "bad 2-D code");
        }
    }
    finish_row(d, (uint64_t)a0);
    return CF_OK;
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

static void fill_row(const line *l, uint32_t width, uint8_t *row) {
    memset(row, 0, (width + 7) / 8);
    for (uint32_t i = 1; i <= l->pos; i += 2) {
        uint32_t x0 = l->end[i - 1], x1 = l->end[i];
        if (x1 > width) x1 = width;
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
}

static void reset_line(line *l) {
    l->pos = 0;
    l->end[0] = 0;
    l->over = 0;
}

/* Sentinels at the width after the last run end: b1 stops at the first
 * one of its parity (n+1 or n+2), a vertical code may step one further,
 * and b2 is read one past that, so four are needed. */
static void sentinels(line *l, uint32_t width) {
    for (uint32_t k = 1; k <= 4; k++) l->end[l->pos + k] = width;
}

/* The row just decoded becomes the reference. */
static void swap_lines(dec *d) {
    line t = d->ref;
    d->ref = d->cur;
    d->cur = t;
    sentinels(&d->ref, d->width);
}

cf_status cf__check_ccitt(const cf_codec_params *p, cf_error *err) {
    if (p->bits != 1 || p->samples != 1)
        return cf__err(err, CF_E_UNSUPPORTED,
                       "CCITT compression of %u samples of %u bits (it codes "
                       "1-bit images)",
                       (unsigned)p->samples, (unsigned)p->bits);
    return CF_OK;
}

cf_status cf__decode_ccitt(cf_codec_ctx *ctx, const cf_codec_params *p,
                           const uint8_t *src, size_t src_len, uint8_t *dst,
                           size_t dst_len, cf_error *err) {
    cf_status st = cf__check_ccitt(p, err);
    if (st) return st;
    pthread_once(&tab_once, build_tables);
    uint32_t w = p->width;
    size_t row_bytes = ((size_t)w + 7) / 8;
    if (row_bytes * p->height != dst_len)
        return cf__err(err, CF_E_ARG, "output of %zu bytes", dst_len);
    /* Two rows of run ends, plus 4 sentinels each.  A row has at most
     * w + 1 runs, and every run but the first costs it a code of one bit
     * at least: the input's bits bound them too, so a tiny chunk that
     * claims a huge width asks for little memory. */
    size_t per = (size_t)w + 6;
    if ((uint64_t)src_len * 8 + 8 < per) per = src_len * 8 + 8;
    st = cf__scratch_reserve(&ctx->runs, 2 * per * sizeof(uint32_t), err);
    if (st) return st;
    dec d;
    memset(&d, 0, sizeof d);
    d.r.p = src;
    d.r.n = src_len;
    d.r.nbits = (uint64_t)src_len * 8;
    d.width = w;
    d.err = err;
    d.cur.end = (uint32_t *)ctx->runs.p;
    d.ref.end = d.cur.end + per;
    /* The first reference row is all white. */
    reset_line(&d.ref);
    d.ref.end[0] = w;
    sentinels(&d.ref, w);
    int g3 = p->compression == 3, g4 = p->compression == 4;
    int twod = g3 && (p->t4_options & 1);
    int eol = 0;
    for (d.row = 0; d.row < p->height; d.row++) {
        reset_line(&d.cur);
        if (g3) {
            st = sync_eol(&d, eol);
            if (st) return st;
        }
        int is1d = !g4;
        if (twod) {
            if (at_end(&d.r)) return bad(&d, "data ends");
            is1d = (int)peek(&d.r, 1);
            skip(&d.r, 1);
        }
        st = is1d ? row_1d(&d, &eol) : row_2d(&d, &eol);
        if (st) return st;
        if (g4 && eol) return bad(&d, "end of block before the last row");
        fill_row(&d.cur, w, dst + (size_t)d.row * row_bytes);
        swap_lines(&d);
        if (p->compression == 2) /* RLE: rows start on a byte */
            skip_to(&d.r, (d.r.pos + 7) & ~(uint64_t)7);
        else if (p->compression == 32771) /* RLEW: on a 16-bit word */
            skip_to(&d.r, (d.r.pos + 15) & ~(uint64_t)15);
    }
    return CF_OK;
}
