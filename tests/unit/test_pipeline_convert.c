/*
 * test_pipeline_convert.c - the Loader's conversion and augmentation on
 * known arrays: every real sample type to float32 with scale/offset and
 * mean/std, and the eight dihedral augmentations against numpy's rot90
 * and flip (written out by hand for one plane, and against a reference
 * built from single quarter turns for all of them).
 */
#include "cf_test.h"
#include "pipeline/convert.h"

#include <math.h>
#include <string.h>

static int close_to(float a, double b) { return fabs((double)a - b) <= 1e-6 * fmax(1, fabs(b)); }

static void test_convert(void) {
    float out[4];
    const uint8_t u8[4] = {0, 1, 2, 255};
    cf__convert_band(u8, CF_DT_U8, 4, 1, 0, 0, 1, out);
    CHECK(out[0] == 0 && out[1] == 1 && out[2] == 2 && out[3] == 255);
    /* ((v * 0.5 + 10) - 1) / 2 */
    const int16_t i16[2] = {-2, 4};
    cf__convert_band((const uint8_t *)i16, CF_DT_I16, 2, 0.5, 10, 1, 2, out);
    CHECK(close_to(out[0], 4) && close_to(out[1], 5.5));
    const uint32_t u32[2] = {4000000000u, 7};
    cf__convert_band((const uint8_t *)u32, CF_DT_U32, 2, 1, 0, 0, 1, out);
    CHECK(close_to(out[0], 4e9) && out[1] == 7);
    const int8_t i8[2] = {-128, 127};
    cf__convert_band((const uint8_t *)i8, CF_DT_I8, 2, 1, 0, -128, 255, out);
    CHECK(close_to(out[0], 0) && close_to(out[1], 1));
    const double f64[2] = {1e-3, -2.5};
    cf__convert_band((const uint8_t *)f64, CF_DT_F64, 2, 1000, 0, 0, 1, out);
    CHECK(close_to(out[0], 1) && close_to(out[1], -2500));
    const float f32[1] = {3};
    cf__convert_band((const uint8_t *)f32, CF_DT_F32, 1, 2, 1, 1, 0.5, out);
    CHECK(close_to(out[0], 12));
    const uint16_t u16[1] = {65535};
    cf__convert_band((const uint8_t *)u16, CF_DT_U16, 1, 1, 0, 0, 65535, out);
    CHECK(close_to(out[0], 1));
    const int64_t i64[1] = {-((int64_t)1 << 40)};
    cf__convert_band((const uint8_t *)i64, CF_DT_I64, 1, 1, 0, 0, 1, out);
    CHECK(close_to(out[0], -1099511627776.0));
}

/* numpy's rot90(a) (one counter-clockwise quarter turn): b[i][j] = a[j][P-1-i]. */
static void rot1(const int *a, int *b, uint32_t P) {
    for (uint32_t i = 0; i < P; i++)
        for (uint32_t j = 0; j < P; j++) b[i * P + j] = a[j * P + (P - 1 - i)];
}

static void reference(const int *a, int *out, uint32_t P, uint32_t aug) {
    int t[64], u[64];
    memcpy(t, a, P * P * sizeof *t);
    for (unsigned k = 0; k < (aug & 3); k++) {
        rot1(t, u, P);
        memcpy(t, u, P * P * sizeof *t);
    }
    for (uint32_t i = 0; i < P; i++)
        for (uint32_t j = 0; j < P; j++)
            out[i * P + j] = aug & 4 ? t[i * P + (P - 1 - j)] : t[i * P + j];
}

static void test_augment(void) {
    /* numpy: rot90([[0,1,2],[3,4,5],[6,7,8]]) = [[2,5,8],[1,4,7],[0,3,6]]. */
    uint8_t p[9], tmp[9];
    for (int i = 0; i < 9; i++) p[i] = (uint8_t)i;
    cf__augment_plane(p, 1, 3, 1, tmp);
    const uint8_t r1[9] = {2, 5, 8, 1, 4, 7, 0, 3, 6};
    CHECK(memcmp(p, r1, 9) == 0);
    /* flip(axis=-1) alone: rows reversed left-right. */
    for (int i = 0; i < 9; i++) p[i] = (uint8_t)i;
    cf__augment_plane(p, 1, 3, 4, tmp);
    const uint8_t f[9] = {2, 1, 0, 5, 4, 3, 8, 7, 6};
    CHECK(memcmp(p, f, 9) == 0);
    /* Every augmentation, 1-, 2-, 4- and 8-byte samples, odd and even P. */
    const size_t sizes[4] = {1, 2, 4, 8};
    for (uint32_t P = 4; P <= 5; P++)
        for (uint32_t aug = 0; aug < 8; aug++)
            for (int s = 0; s < 4; s++) {
                size_t es = sizes[s];
                int a[64], want[64];
                uint8_t plane[64 * 8], scratch[64 * 8];
                for (uint32_t i = 0; i < P * P; i++) {
                    a[i] = (int)(i * 3 + 1);
                    memset(plane + i * es, 0, es);
                    memcpy(plane + i * es, &a[i], 1); /* low byte is enough */
                    plane[i * es + es - 1] ^= (uint8_t)(es > 1 ? 0x80 : 0);
                }
                reference(a, want, P, aug);
                cf__augment_plane(plane, es, P, aug, scratch);
                int ok = 1;
                for (uint32_t i = 0; i < P * P; i++) {
                    ok &= plane[i * es] == (uint8_t)want[i];
                    if (es > 1) ok &= plane[i * es + es - 1] == 0x80;
                }
                CHECK(ok);
            }
}

int main(void) {
    test_convert();
    test_augment();
    return CF_TEST_END();
}
