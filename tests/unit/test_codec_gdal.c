/*
 * test_codec_gdal.c - bit-exactness against GDAL.  test_codec_gdal_gen.py
 * writes GeoTIFFs with GDAL for a matrix of codecs, sample types, byte
 * orders, predictors and layouts (tiles with edge padding, strips with a
 * short last strip, separate planes, 1-bit), and dumps each chunk's
 * compressed bytes next to GDAL's decoded pixels of its valid region.
 * Every chunk must decode here to exactly those bytes.
 */
#include "codec/codec.h"
#include "cf_test.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint8_t *slurp(const char *dir, const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return cf_test_slurp(path, len);
}

int main(void) {
    const char *srcdir = getenv("CF_SOURCE_DIR");
    const char *data = getenv("CF_TEST_DATA");
    if (!srcdir || !data) {
        fprintf(stderr, "CF_SOURCE_DIR and CF_TEST_DATA must be set (ctest sets them)\n");
        return 1;
    }
    char dir[2048], cmd[8192];
    snprintf(dir, sizeof dir, "%s/codec_gdal", data);
    const char *py = getenv("CF_TEST_PYTHON"); /* the venv's (rasterio) */
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/unit/test_codec_gdal_gen.py' '%s' >/dev/null",
             py && *py ? py : "python3", srcdir, dir);
    int rc = system(cmd);
    CHECK(rc == 0);
    if (rc) return CF_TEST_END();
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/manifest.txt", dir);
    FILE *m = fopen(mpath, "r");
    CHECK(m != NULL);
    if (!m) return CF_TEST_END();

    cf__codec_ctx *ctx = cf__codec_ctx_new();
    char name[256], cfile[512], efile[512], tfile[512], last_bad[256] = "";
    unsigned comp, sub, pred, bits, sf, photo, cw, ch, spp, be, vw, vh, ysh, ysv;
    int chunks = 0, exact = 0, gdal_failed = 0, bad_cases = 0;
    double secs = 0;
    uint64_t bytes_out = 0;
    while (fscanf(m, "%255s %511s %511s %511s %u %u %u %u %u %u %u %u %u %u %u %u %u %u",
                  name, cfile, efile, tfile, &comp, &sub, &pred, &bits, &sf, &photo,
                  &cw, &ch, &spp, &be, &vw, &vh, &ysh, &ysv) == 18) {
        size_t clen = 0, elen = 0, tlen = 0;
        uint8_t *c = slurp(dir, cfile, &clen);
        uint8_t *e = strcmp(efile, "-") ? slurp(dir, efile, &elen) : NULL;
        uint8_t *t = strcmp(tfile, "-") ? slurp(dir, tfile, &tlen) : NULL;
        cf__codec_params p;
        memset(&p, 0, sizeof p);
        p.compression = (uint16_t)comp;
        p.lerc_sub = (uint16_t)sub;
        p.predictor = (uint16_t)pred;
        p.bits = (uint16_t)bits;
        p.sample_format = (uint16_t)sf;
        p.photometric = (uint16_t)photo;
        p.width = cw;
        p.height = ch;
        p.samples = spp;
        p.big_endian = (int)be;
        p.jpeg_tables = t;
        p.jpeg_tables_len = tlen;
        p.ycbcr_sub_h = (uint16_t)ysh;
        p.ycbcr_sub_v = (uint16_t)ysv;
        size_t n = (size_t)cf__codec_chunk_bytes(&p);
        uint8_t *out = malloc(n ? n : 1);
        cf_error err;
        memset(&err, 0, sizeof err);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cf_status st = c ? cf__codec_decode(ctx, &p, c, clen, out, n, &err) : CF_E_IO;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        secs += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        bytes_out += n;
        chunks++;
        if (!e) {
            gdal_failed++; /* GDAL cannot read it either; must not crash */
        } else {
            size_t row = n / ch, vrow = bits == 1 ? (vw + 7) / 8 : (size_t)vw * spp * bits / 8;
            int ok = st == CF_OK && elen == vrow * vh;
            for (unsigned y = 0; ok && y < vh; y++) {
                const uint8_t *a = out + (size_t)y * row, *b = e + (size_t)y * vrow;
                if (bits == 1) {
                    uint8_t mask = (uint8_t)(vw % 8 ? 0xff << (8 - vw % 8) : 0xff);
                    ok = memcmp(a, b, vrow - 1) == 0 &&
                         ((a[vrow - 1] ^ b[vrow - 1]) & mask) == 0;
                } else {
                    ok = memcmp(a, b, vrow) == 0;
                }
            }
            if (ok) {
                exact++;
            } else if (strcmp(last_bad, name)) {
                snprintf(last_bad, sizeof last_bad, "%s", name);
                bad_cases++;
                fprintf(stderr, "MISMATCH %s (%s): status %d %s\n", name, cfile, (int)st,
                        st ? err.msg : "");
            }
        }
        free(out);
        free(c);
        free(e);
        free(t);
    }
    fclose(m);
    cf__codec_ctx_free(ctx);
    printf("%d chunks, %d bit-exact with GDAL, %d unreadable by GDAL, %d cases "
           "differ; %.1f MB decoded in %.3f s\n",
           chunks, exact, gdal_failed, bad_cases, (double)bytes_out / 1e6, secs);
    CHECK(chunks > 1000);
    CHECK(bad_cases == 0);
    CHECK(exact + gdal_failed == chunks);
    /* about 100 MB of fixtures: keep them only when something failed */
    if (bad_cases == 0 && exact + gdal_failed == chunks) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0);
    }
    return CF_TEST_END();
}
