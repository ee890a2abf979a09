/*
 * test_tiff_gdal.c - the parser against files GDAL writes (gdal_create +
 * gdal_translate: COG, BigTIFF, big-endian, strips, LERC/ZSTD/LZW/JPEG,
 * internal masks, overviews, PixelIsPoint), compared field by field with
 * `gdalinfo -json`.  Files go to $CF_TEST_DATA/tiff_gdal (or /tmp).
 */
#include "tiff/tiff.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cf_test.h"

static char dir[512];

static int sh(const char *fmt, ...) CF__PRINTF(1, 2);
static int sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc;
}

/* Numbers after `"key":[` (or `"key":`) in gdalinfo's JSON. */
static int json_nums(const char *js, const char *key, double *out, int max) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(js, pat);
    if (!p) return 0;
    p += strlen(pat);
    while (*p == ' ' || *p == '[' || *p == '\n') p++;
    int n = 0;
    while (n < max) {
        char *e;
        double v = strtod(p, &e);
        if (e == p) {
            if (!strncmp(p, "\"NaN\"", 5)) { v = NAN; e = (char *)p + 5; }
            else break;
        }
        out[n++] = v;
        p = e;
        while (*p == ',' || *p == ' ' || *p == '\n') p++;
    }
    return n;
}

/* The last EPSG code in the WKT (the CRS's own ID). */
static int json_epsg(const char *js) {
    const char *p = js, *last = NULL;
    while ((p = strstr(p, "EPSG\\\",")) != NULL) last = p++;
    return last ? atoi(last + 7) : 0;
}

typedef struct expect {
    const char *name;
    const char *opts;      /* gdal_translate options */
    const char *comp;      /* expected compression name */
    int bigtiff, be, tiled, min_levels, mask;
} expect;

static void one(const char *src, const expect *x) {
    char path[700], jpath[720];
    snprintf(path, sizeof path, "%s/%s", dir, x->name);
    snprintf(jpath, sizeof jpath, "%s.json", path);
    if (sh("gdal_translate -q %s %s %s", x->opts, src, path) ||
        sh("gdalinfo -json %s > %s", path, jpath)) {
        CHECK(0);
        return;
    }
    size_t len, jlen;
    uint8_t *d = cf_test_slurp(path, &len);
    char *js = (char *)cf_test_slurp(jpath, &jlen);
    CHECK(d && js);
    if (!d || !js) return;
    cf__tiff *t = NULL;
    cf_error err;
    cf_status st = cf__tiff_parse_memory(d, len, x->name, &t, &err);
    CHECK(st == CF_OK);
    if (st != CF_OK) {
        fprintf(stderr, "%s: %s\n", x->name, err.msg);
        free(d);
        free(js);
        return;
    }
    const cf__tiff_ifd *l0 = &t->ifds[t->levels[0]];
    double v[8];
    CHECK(json_nums(js, "size", v, 2) == 2 && v[0] == l0->width &&
          v[1] == l0->height);
    CHECK(json_nums(js, "block", v, 2) == 2 && v[0] == l0->chunk_w &&
          v[1] == l0->chunk_h);
    if (json_nums(js, "geoTransform", v, 6) == 6) {
        CHECK(t->has_geotransform);
        for (int k = 0; k < 6; k++)
            CHECK(fabs(v[k] - t->geotransform[k]) <= 1e-9 * (1 + fabs(v[k])));
    } else {
        CHECK(!t->has_geotransform);
    }
    CHECK(t->epsg == json_epsg(js));
    CHECK(t->pixel_is_point == (strstr(x->name, "point") != NULL));
    if (json_nums(js, "noDataValue", v, 1) == 1) {
        CHECK(t->has_nodata);
        CHECK(isnan(v[0]) ? isnan(t->nodata) : v[0] == t->nodata);
    } else {
        CHECK(!t->has_nodata);
    }
    if (json_nums(js, "scale", v, 1) == 1) CHECK(v[0] == t->scale[0]);
    if (json_nums(js, "offset", v, 1) == 1) CHECK(v[0] == t->offset[0]);
    CHECK(!strcmp(cf__tiff_compression_name(l0), x->comp));
    CHECK(t->bigtiff == x->bigtiff && t->big_endian == x->be);
    CHECK(l0->tiled == x->tiled);
    CHECK(t->nlevels >= x->min_levels);
    for (int l = 1; l < t->nlevels; l++) {
        const cf__tiff_ifd *o = &t->ifds[t->levels[l]];
        /* GDAL rounds overview sizes either way. */
        uint32_t half = l0->width >> l;
        CHECK(o->width == half || o->width == half + 1);
        CHECK(o->samples == l0->samples && o->bits == l0->bits);
    }
    if (x->mask) {
        for (int l = 0; l < t->nlevels; l++) {
            CHECK(t->mask_of_level[l] >= 0);
            if (t->mask_of_level[l] >= 0) {
                const cf__tiff_ifd *m = &t->ifds[t->mask_of_level[l]];
                CHECK(m->width == t->ifds[t->levels[l]].width);
            }
        }
    } else {
        CHECK(t->mask_of_level[0] == -1);
    }
    /* A COG opens with one speculative read of 64 KiB. */
    if (strstr(x->opts, "-of COG") && len > 65536) {
        cf__tiff_parser *p = cf__tiff_parser_new(len, x->name);
        cf__tiff *t2 = NULL;
        uint64_t off, nl;
        CHECK(cf__tiff_parser_add(p, 0, d, 65536, &err) == CF_OK);
        CHECK(cf__tiff_parser_run(p, &t2, &off, &nl, &err) == CF_OK);
        cf__tiff_free(t2);
        cf__tiff_parser_free(p);
    }
    cf__tiff_free(t);
    free(d);
    free(js);
}

int main(void) {
    const char *base = getenv("CF_TEST_DATA");
    snprintf(dir, sizeof dir, "%s/tiff_gdal", base && *base ? base : "/tmp");
    if (base && *base) mkdir(base, 0755);
    mkdir(dir, 0755);
    if (system("gdal_translate --version > /dev/null 2>&1") != 0) {
        fprintf(stderr, "gdal_translate not found: GDAL comparisons skipped\n");
        return 0;
    }
    char src[600], src8[600], srcf[600], srcm[620];
    snprintf(src, sizeof src, "%s/src16.tif", dir);
    snprintf(src8, sizeof src8, "%s/src8.tif", dir);
    snprintf(srcf, sizeof srcf, "%s/srcf.tif", dir);
    snprintf(srcm, sizeof srcm, "%s/srcmask.tif", dir);
    if (sh("gdal_create -q -of GTiff -outsize 1500 1100 -bands 3 -ot UInt16 "
           "-burn 7 -a_srs EPSG:32633 -a_ullr 500000 4100000 515000 4089000 "
           "%s", src) ||
        sh("gdal_create -q -of GTiff -outsize 700 500 -bands 3 -ot Byte "
           "-burn 90 -a_srs EPSG:4326 -a_ullr 10 50 17 45 %s", src8) ||
        sh("gdal_create -q -of GTiff -outsize 300 200 -bands 1 -ot Float32 "
           "-burn 1.5 -a_srs EPSG:3857 -a_ullr 0 2000 3000 0 %s", srcf) ||
        sh("gdal_translate -q --config GDAL_TIFF_INTERNAL_MASK YES -b 1 -b 2 "
           "-b 3 -mask 1 -co TILED=YES %s %s", src8, srcm)) {
        CHECK(0);
        return CF_TEST_END();
    }
    static const expect cases[] = {
        {"cog_deflate.tif", "-of COG -co COMPRESS=DEFLATE -co BLOCKSIZE=256",
         "DEFLATE", 0, 0, 1, 3, 0},
        {"cog_lerc_zstd.tif", "-of COG -co COMPRESS=LERC_ZSTD -a_nodata 0",
         "LERC_ZSTD", 0, 0, 1, 2, 0},
        {"cog_big.tif", "-of COG -co BIGTIFF=YES -co COMPRESS=ZSTD "
         "-co BLOCKSIZE=128 -a_scale 0.5 -a_offset 3", "ZSTD", 1, 0, 1, 4, 0},
        {"be_strips.tif", "-co ENDIANNESS=BIG -co COMPRESS=LZW "
         "-co PREDICTOR=2 -co BLOCKYSIZE=7", "LZW", 0, 1, 0, 1, 0},
        {"bigtiff_be_tiled.tif", "-co BIGTIFF=YES -co ENDIANNESS=BIG "
         "-co TILED=YES -co BLOCKXSIZE=64 -co BLOCKYSIZE=32 "
         "-co INTERLEAVE=BAND", "NONE", 1, 1, 1, 1, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        one(src, &cases[k]);
    static const expect c8[] = {
        {"cog_jpeg.tif", "-of COG -co COMPRESS=JPEG", "JPEG", 0, 0, 1, 2, 0},
        {"point.tif", "-mo AREA_OR_POINT=Point -co TILED=YES", "NONE", 0, 0,
         1, 1, 0},
    };
    for (size_t k = 0; k < sizeof c8 / sizeof c8[0]; k++) one(src8, &c8[k]);
    static const expect cf[] = {
        {"float_nan.tif", "-a_nodata nan -co COMPRESS=DEFLATE -co PREDICTOR=3",
         "DEFLATE", 0, 0, 0, 1, 0},
        {"cog_lzw_nodata.tif", "-of COG -co COMPRESS=LZW -a_nodata -9999",
         "LZW", 0, 0, 1, 1, 0},
    };
    for (size_t k = 0; k < sizeof cf / sizeof cf[0]; k++) one(srcf, &cf[k]);
    static const expect cm[] = {
        {"cog_mask.tif", "-of COG -co COMPRESS=DEFLATE", "DEFLATE", 0, 0, 1, 2,
         1},
    };
    one(srcm, &cm[0]);
    return CF_TEST_END();
}
