/*
 * photometric.c - colour spaces GDAL does not hand out as stored.
 *
 * GDAL reads 8-bit CMYK, 8-bit CIELab and 8-bit YCbCr that is not JPEG
 * through libtiff's RGBA interface (TIFFReadRGBATile/Strip): the image
 * becomes RGBA (CMYK, CIELab) or RGB (YCbCr), chunk by chunk.  This file
 * decides when (cf__codec_color, following GDAL's and TIFFRGBAImageOK's
 * conditions) and converts one stored chunk the way libtiff's
 * tif_getimage.c and tif_color.c compute it, so that values match bit
 * for bit:
 *  - CMYK: k = 255 - K, R = k (255 - C) / 255 (integer division), same
 *    for G and B, alpha 255; samples after the fourth are ignored.
 *  - CIELab: L*, a*, b* (a* and b* signed) to XYZ against the WhitePoint
 *    tag (D50 by default), then to sRGB through libtiff's display table
 *    (1500 steps, gamma 2.4), all in float as libtiff does; alpha 255.
 *  - YCbCr: chroma replicated over each sub_h x sub_v block (no
 *    interpolation), then libtiff's fixed-point YCbCr to RGB with the
 *    YCbCrCoefficients and ReferenceBlackWhite tables.
 * The raw option skips the conversion (GDAL's GTIFF_RAW:); subsampled
 * YCbCr is still spread to one Y, Cb, Cr per pixel then.
 */
#include "codec_internal.h"

#include <math.h>
#include <pthread.h>

/* ------------------------------------------------------------ choice */

cf_status cf__codec_color(const cf__color_tags *t, int raw, uint16_t *color,
                         cf_error *err) {
    *color = CF_COLOR_RAW;
    int planar2 = t->planar == 2 && t->samples > 1;
    switch (t->photometric) {
    case 5: /* separated */
        if (t->bits != 8 || t->inkset != 1 || t->samples < 4 || raw)
            return CF_OK;
        if (planar2)
            return cf__err(err, CF_E_UNSUPPORTED,
                           "band-interleaved 8-bit CMYK, which GDAL converts "
                           "to RGBA: cogfeed reads it only as stored (the raw "
                           "option, GDAL's GTIFF_RAW:)");
        *color = CF_COLOR_CMYK;
        return CF_OK;
    case 8: /* CIELab */
        if (t->bits != 8 || t->samples != 3 || t->extra_samples || raw)
            return CF_OK;
        if (planar2)
            return cf__err(err, CF_E_UNSUPPORTED,
                           "band-interleaved 8-bit CIELab (GDAL cannot read "
                           "it either; the raw option reads it as stored)");
        *color = CF_COLOR_LAB;
        return CF_OK;
    case 6: /* YCbCr: JPEG converts it itself */
        if (t->compression == 7) return CF_OK;
        if (t->bits != 8)
            return cf__err(err, CF_E_UNSUPPORTED,
                           "YCbCr with %u-bit samples not in JPEG",
                           (unsigned)t->bits);
        if (t->samples != 3)
            return cf__err(err, CF_E_UNSUPPORTED,
                           "YCbCr with %u samples per pixel not in JPEG",
                           (unsigned)t->samples);
        if (planar2) {
            if (raw) return CF_OK;
            return cf__err(err, CF_E_UNSUPPORTED,
                           "band-interleaved YCbCr, which GDAL converts to "
                           "RGB: cogfeed reads it only as stored (the raw "
                           "option, GDAL's GTIFF_RAW:)");
        }
        *color = raw ? CF_COLOR_YCBCR_RAW : CF_COLOR_YCBCR;
        return CF_OK;
    default: return CF_OK;
    }
}

static int sub_ok(unsigned s) { return s == 1 || s == 2 || s == 4; }

cf_status cf__color_check(const cf__codec_params *p, cf_error *err) {
    switch (p->color) {
    case CF_COLOR_RAW: return CF_OK;
    case CF_COLOR_CMYK:
        if (p->bits == 8 && p->samples >= 4) return CF_OK;
        break;
    case CF_COLOR_LAB:
        if (p->bits != 8 || p->samples != 3) break;
        if (!(p->white_point[1] != 0.0f) || !isfinite(p->white_point[0]))
            return cf__err(err, CF_E_FORMAT, "invalid WhitePoint (%g, %g) for "
                           "CIELab (GDAL cannot read it either)",
                           (double)p->white_point[0], (double)p->white_point[1]);
        return CF_OK;
    case CF_COLOR_YCBCR:
    case CF_COLOR_YCBCR_RAW:
        if (p->bits != 8 || p->samples != 3 || !sub_ok(p->ycbcr_sub_h) ||
            !sub_ok(p->ycbcr_sub_v))
            break;
        if (p->color == CF_COLOR_YCBCR_RAW) return CF_OK;
        /* libtiff's checks (initYCbCrConversion) */
        if (isnan(p->ycbcr_coef[0]) || isnan(p->ycbcr_coef[1]) ||
            p->ycbcr_coef[1] == 0.0f || isnan(p->ycbcr_coef[2]))
            return cf__err(err, CF_E_FORMAT, "invalid YCbCrCoefficients "
                           "(GDAL cannot read it either)");
        for (int k = 0; k < 6; k++)
            if (!(p->ref_bw[k] > (float)(-0x7FFFFFFF + 128) &&
                  p->ref_bw[k] < (float)0x7FFFFFFF))
                return cf__err(err, CF_E_FORMAT, "invalid ReferenceBlackWhite "
                               "(GDAL cannot read it either)");
        return CF_OK;
    default: break;
    }
    return cf__err(err, CF_E_UNSUPPORTED,
                   "colour conversion %u of %u samples of %u bits",
                   (unsigned)p->color, (unsigned)p->samples, (unsigned)p->bits);
}

/* ------------------------------------------------------------ CMYK */

static void cmyk(const cf__codec_params *p, const uint8_t *s, uint8_t *d) {
    size_t n = (size_t)p->width * p->height, spp = p->samples;
    for (size_t i = 0; i < n; i++, s += spp, d += 4) {
        unsigned k = 255u - s[3];
        d[0] = (uint8_t)(k * (255u - s[0]) / 255u);
        d[1] = (uint8_t)(k * (255u - s[1]) / 255u);
        d[2] = (uint8_t)(k * (255u - s[2]) / 255u);
        d[3] = 255;
    }
}

/* ---------------------------------------------------------- CIELab */

/* libtiff's sRGB display (tif_getimage.c) and table size (tiffio.h). */
#define LAB_RANGE 1500
static const float srgb_mat[3][3] = {{3.2410F, -1.5374F, -0.4986F},
                                     {-0.9692F, 1.8760F, 0.0416F},
                                     {0.0556F, -0.2040F, 1.0570F}};
static const float srgb_yc = 100.0F, srgb_y0 = 1.0F, srgb_gamma = 2.4F;
static const uint32_t srgb_vrw = 255;

/* Luminance to value, the same for the three guns: built once. */
static float lab_table[LAB_RANGE + 1];
static float lab_step;
static pthread_once_t lab_once = PTHREAD_ONCE_INIT;

static void lab_init(void) {
    double gamma = 1.0 / srgb_gamma;
    lab_step = (srgb_yc - srgb_y0) / LAB_RANGE;
    for (int i = 0; i <= LAB_RANGE; i++)
        lab_table[i] =
            (float)srgb_vrw * ((float)pow((double)i / LAB_RANGE, gamma));
}

static uint32_t lab_gun(float y) {
    y = y > srgb_y0 ? y : srgb_y0;
    y = y < srgb_yc ? y : srgb_yc;
    int i = (int)((y - srgb_y0) / lab_step);
    if (i > LAB_RANGE) i = LAB_RANGE;
    float v = lab_table[i];
    uint32_t r = (uint32_t)(v > 0 ? (v + 0.5) : (v - 0.5));
    return r < srgb_vrw ? r : srgb_vrw;
}

static void lab(const cf__codec_params *p, const uint8_t *s, uint8_t *d) {
    pthread_once(&lab_once, lab_init);
    const float wx = p->white_point[0], wy = p->white_point[1];
    const float y0 = 100.0F;
    const float x0 = wx / wy * y0;
    const float z0 = (1.0F - wx - wy) / wy * y0;
    size_t n = (size_t)p->width * p->height;
    for (size_t i = 0; i < n; i++, s += 3, d += 4) {
        /* TIFFCIELabToXYZ: 8-bit L*, a*, b* scaled to the 16-bit form */
        uint32_t l = (uint32_t)s[0] * 257;
        int32_t a = (int32_t)(int8_t)s[1] * 256, b = (int32_t)(int8_t)s[2] * 256;
        float L = (float)l * 100.0F / 65535.0F;
        float X, Y, Z, cby, tmp;
        if (L < 8.856F) {
            Y = (L * y0) / 903.292F;
            cby = 7.787F * (Y / y0) + 16.0F / 116.0F;
        } else {
            cby = (L + 16.0F) / 116.0F;
            Y = y0 * cby * cby * cby;
        }
        tmp = (float)a / 256.0F / 500.0F + cby;
        if (tmp < 0.2069F) X = x0 * (tmp - 0.13793F) / 7.787F;
        else X = x0 * tmp * tmp * tmp;
        tmp = cby - (float)b / 256.0F / 200.0F;
        if (tmp < 0.2069F) Z = z0 * (tmp - 0.13793F) / 7.787F;
        else Z = z0 * tmp * tmp * tmp;
        /* TIFFXYZToRGB */
        float yr = srgb_mat[0][0] * X + srgb_mat[0][1] * Y + srgb_mat[0][2] * Z;
        float yg = srgb_mat[1][0] * X + srgb_mat[1][1] * Y + srgb_mat[1][2] * Z;
        float yb = srgb_mat[2][0] * X + srgb_mat[2][1] * Y + srgb_mat[2][2] * Z;
        d[0] = (uint8_t)lab_gun(yr);
        d[1] = (uint8_t)lab_gun(yg);
        d[2] = (uint8_t)lab_gun(yb);
        d[3] = 255;
    }
}

/* ----------------------------------------------------------- YCbCr */

#define YC_SHIFT 16
#define YC_HALF ((int32_t)1 << (YC_SHIFT - 1))

typedef struct ycbcr_tab {
    int32_t cr_r[256], cb_b[256], cr_g[256], cb_g[256], y[256];
} ycbcr_tab;

static float clampf(float v, float lo, float hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* libtiff's fixed point: x * 2^16 rounded, x clamped to [0, 2] (a NaN
 * goes to 0, as libtiff's CLAMP sends it to the minimum). */
static int32_t fix(float x) {
    x = !(x >= 0.0F) ? 0.0F : x > 2.0F ? 2.0F : x;
    return (int32_t)(x * (1L << YC_SHIFT) + 0.5);
}

/* Code2V: code c on the scale [rb, rw] mapped to [0, cr]. */
static float code2v(int32_t c, float rb, float rw, float cr) {
    float span = rw - rb != 0 ? rw - rb : 1;
    return ((float)(c - (int32_t)rb) * cr) / span;
}

static void ycbcr_init(const cf__codec_params *p, ycbcr_tab *t) {
    const float *luma = p->ycbcr_coef, *rbw = p->ref_bw;
    float f1 = 2 - 2 * luma[0];
    int32_t d1 = fix(f1);
    float f2 = luma[0] * f1 / luma[1];
    int32_t d2 = -fix(f2);
    float f3 = 2 - 2 * luma[2];
    int32_t d3 = fix(f3);
    float f4 = luma[2] * f3 / luma[1];
    int32_t d4 = -fix(f4);
    for (int i = 0, x = -128; i < 256; i++, x++) {
        int32_t cr = (int32_t)clampf(
            code2v(x, rbw[4] - 128.0F, rbw[5] - 128.0F, 127), -128.0F * 32,
            128.0F * 32);
        int32_t cb = (int32_t)clampf(
            code2v(x, rbw[2] - 128.0F, rbw[3] - 128.0F, 127), -128.0F * 32,
            128.0F * 32);
        t->cr_r[i] = (d1 * cr + YC_HALF) >> YC_SHIFT;
        t->cb_b[i] = (d3 * cb + YC_HALF) >> YC_SHIFT;
        t->cr_g[i] = d2 * cr;
        t->cb_g[i] = d4 * cb + YC_HALF;
        t->y[i] = (int32_t)clampf(code2v(x + 128, rbw[0], rbw[1], 255),
                                  -128.0F * 32, 128.0F * 32);
    }
}

static uint8_t clamp255(int32_t v) {
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* libtiff's RGBA strip reader (gtStripContig) reads rows x its scanline
 * size of a strip, the scanline of subsampled YCbCr being a block row's
 * bytes divided by sub_v, rounded down: when that division is not exact
 * (4x4, 2x4 or 1x4 subsampling with an odd number of blocks across) the
 * strip's last bytes -- the last block's chroma, or more -- are never
 * read and count as 0 (libtiff zeroes its buffer).  GDAL's colours of
 * that block come out so; these do too (bug-compatible). */
static size_t strip_bytes_read(const cf__codec_params *p, size_t across,
                               unsigned unit) {
    unsigned sv = p->ycbcr_sub_v;
    size_t scanline = across * unit / sv;
    size_t rows = ((size_t)p->height + sv - 1) / sv * sv;
    return rows * scanline;
}

static void ycbcr(const cf__codec_params *p, const uint8_t *s, uint8_t *d) {
    ycbcr_tab t;
    int convert = p->color == CF_COLOR_YCBCR;
    if (convert) ycbcr_init(p, &t);
    unsigned sh = p->ycbcr_sub_h, sv = p->ycbcr_sub_v, unit = sh * sv + 2;
    size_t across = (p->width + sh - 1) / sh;
    size_t have = (size_t)-1; /* stored bytes GDAL's reader sees */
    if (convert && p->strip) have = strip_bytes_read(p, across, unit);
    for (uint32_t y = 0; y < p->height; y++) {
        const uint8_t *row = s + (size_t)(y / sv) * across * unit;
        unsigned yo = (y % sv) * sh;
        for (uint32_t x = 0; x < p->width; x++, d += 3) {
            const uint8_t *u = row + (size_t)(x / sh) * unit;
            size_t at = (size_t)(u - s);
            int32_t Y = at + yo + x % sh < have ? u[yo + x % sh] : 0;
            int32_t cb = at + sh * sv < have ? u[sh * sv] : 0;
            int32_t cr = at + sh * sv + 1 < have ? u[sh * sv + 1] : 0;
            if (!convert) {
                d[0] = (uint8_t)Y;
                d[1] = (uint8_t)cb;
                d[2] = (uint8_t)cr;
                continue;
            }
            d[0] = clamp255(t.y[Y] + t.cr_r[cr]);
            d[1] = clamp255(t.y[Y] + ((t.cb_g[cb] + t.cr_g[cr]) >> YC_SHIFT));
            d[2] = clamp255(t.y[Y] + t.cb_b[cb]);
        }
    }
}

void cf__color_convert(const cf__codec_params *p, const uint8_t *src,
                       uint8_t *dst) {
    switch (p->color) {
    case CF_COLOR_CMYK: cmyk(p, src, dst); break;
    case CF_COLOR_LAB: lab(p, src, dst); break;
    case CF_COLOR_YCBCR:
    case CF_COLOR_YCBCR_RAW: ycbcr(p, src, dst); break;
    default: break;
    }
}
