/*
 * test_codec_threads.c - decode threads share nothing: several threads,
 * each with its own cf__codec_ctx, decode the same chunks of every codec
 * at once and must all get the single-threaded result.  Run under TSan
 * (-DCF_TSAN=ON) this also checks the libraries behind each codec.
 */
#include "codec/codec.h"
#include "cf_test.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#ifdef CF_HAVE_LERC
#include <Lerc_c_api.h>
#endif
#ifdef CF_HAVE_WEBP
#include <webp/encode.h>
#endif
#ifdef CF_HAVE_JPEG
#include <stdio.h>

#include <jpeglib.h>
#endif

#define W 64
#define H 64
#define NTHREADS 4
#define ITERS 60

typedef struct job {
    cf__codec_params p;
    uint8_t *src;
    size_t src_len;
    uint8_t *want;
    size_t len;
    int free_with_webp;
} job;

static job jobs[8];
static int njobs;
static int thread_fail[NTHREADS];

static void add_job(cf__codec_params p, uint8_t *src, size_t n, int webp) {
    job *j = &jobs[njobs++];
    j->p = p;
    j->src = src;
    j->src_len = n;
    j->len = (size_t)cf__codec_chunk_bytes(&p);
    j->want = malloc(j->len);
    j->free_with_webp = webp;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    cf__codec_ctx *ctx = cf__codec_ctx_new();
    uint8_t *out = malloc(W * H * 16);
    for (int it = 0; it < ITERS; it++) {
        job *j = &jobs[(it + id) % njobs];
        cf_error err;
        if (cf__codec_decode(ctx, &j->p, j->src, j->src_len, out, j->len, &err) ||
            memcmp(out, j->want, j->len))
            thread_fail[id]++;
    }
    free(out);
    cf__codec_ctx_free(ctx);
    return NULL;
}

static cf__codec_params params(uint16_t comp, uint16_t bits, uint16_t sf,
                              uint32_t spp, uint16_t pred) {
    cf__codec_params p;
    memset(&p, 0, sizeof p);
    p.compression = comp;
    p.bits = bits;
    p.sample_format = sf;
    p.samples = spp;
    p.predictor = pred;
    p.width = W;
    p.height = H;
    p.photometric = spp == 3 ? 2 : 1;
    return p;
}

int main(void) {
    size_t raw_len = W * H * 8;
    uint8_t *raw = malloc(raw_len);
    for (size_t i = 0; i < raw_len; i++) raw[i] = (uint8_t)((i * 7) ^ (i >> 5));

    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    uint8_t *d = malloc(raw_len * 2);
    size_t n = libdeflate_zlib_compress(c, raw, W * H * 2, d, raw_len * 2);
    add_job(params(8, 16, 1, 1, 2), d, n, 0);
    libdeflate_free_compressor(c);

    uint8_t *z = malloc(ZSTD_compressBound(raw_len));
    n = ZSTD_compress(z, ZSTD_compressBound(raw_len), raw, W * H * 4, 3);
    add_job(params(50000, 32, 3, 1, 3), z, n, 0);

    uint8_t *r = malloc(W * H);
    memcpy(r, raw, W * H);
    add_job(params(1, 8, 1, 1, 1), r, W * H, 0);
#ifdef CF_HAVE_LERC
    uint8_t *l = malloc(raw_len * 2);
    unsigned nb = 0;
    float *f = malloc(sizeof(float) * W * H);
    for (int i = 0; i < W * H; i++) f[i] = (float)(i % 300) * 0.25f;
    CHECK(lerc_encode(f, 6, 1, W, H, 1, 0, NULL, 0.0, l, (unsigned)raw_len * 2, &nb) == 0);
    add_job(params(34887, 32, 3, 1, 1), l, nb, 0);
    free(f);
#endif
#ifdef CF_HAVE_WEBP
    uint8_t *wp = NULL;
    n = WebPEncodeRGB(raw, W, H, W * 3, 80, &wp);
    CHECK(n > 0);
    add_job(params(50001, 8, 1, 3, 1), wp, n, 1);
#endif
#ifdef CF_HAVE_JPEG
    {
        struct jpeg_compress_struct ci;
        struct jpeg_error_mgr jerr;
        unsigned char *jp = NULL;
        unsigned long jl = 0;
        ci.err = jpeg_std_error(&jerr);
        jpeg_create_compress(&ci);
        ci.image_width = W;
        ci.image_height = H;
        ci.input_components = 3;
        ci.in_color_space = JCS_RGB;
        jpeg_set_defaults(&ci);
        jpeg_mem_dest(&ci, &jp, &jl);
        jpeg_start_compress(&ci, TRUE);
        while (ci.next_scanline < H) {
            JSAMPROW row = raw + (size_t)ci.next_scanline * W * 3;
            jpeg_write_scanlines(&ci, &row, 1);
        }
        jpeg_finish_compress(&ci);
        jpeg_destroy_compress(&ci);
        cf__codec_params p = params(7, 8, 1, 3, 1);
        p.photometric = 6;
        p.ycbcr_sub_h = p.ycbcr_sub_v = 2;
        add_job(p, jp, jl, 0);
    }
#endif
    /* single-threaded reference */
    cf__codec_ctx *ctx = cf__codec_ctx_new();
    for (int i = 0; i < njobs; i++) {
        cf_error err;
        CHECK(cf__codec_decode(ctx, &jobs[i].p, jobs[i].src, jobs[i].src_len, jobs[i].want,
                              jobs[i].len, &err) == CF_OK);
    }
    cf__codec_ctx_free(ctx);

    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++) CHECK(thread_fail[i] == 0);

    for (int i = 0; i < njobs; i++) {
#ifdef CF_HAVE_WEBP
        if (jobs[i].free_with_webp) WebPFree(jobs[i].src);
        else
#endif
            free(jobs[i].src);
        free(jobs[i].want);
    }
    free(raw);
    return CF_TEST_END();
}
