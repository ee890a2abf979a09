/*
 * consumer.c - a program that uses cogfeed the way a C user would: only
 * <cogfeed.h> and the installed library, found with pkg-config or CMake's
 * find_package(cogfeed) (tests/python/test_install.py builds it both ways
 * against an install into a temporary prefix).
 *
 *   consumer FILE X Y W H    prints "WIDTH HEIGHT COUNT DTYPE SUM": the
 *                            file's size and the sum of band 1 over the
 *                            window
 */
#include <cogfeed.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: consumer FILE X Y W H\n");
        return 2;
    }
    cf_io_options o;
    cf_io_options_init(&o);
    cf_error err = {0};
    cf_io *io = NULL;
    cf_cog *cog = NULL;
    cf_status st = cf_io_new(&o, &io, &err);
    if (st == CF_OK) st = cf_cog_open(io, argv[1], &cog, &err);
    if (st != CF_OK) {
        fprintf(stderr, "consumer: %s\n", err.msg[0] ? err.msg : cf_strerror(st));
        cf_io_free(io);
        return 1;
    }
    cf_cog_info in;
    cf_cog_get_info(cog, &in);
    long long x = atoll(argv[2]), y = atoll(argv[3]);
    uint32_t w = (uint32_t)atol(argv[4]), h = (uint32_t)atol(argv[5]);
    int band = 1;
    size_t n = (size_t)w * h * cf_dtype_size(in.dtype);
    unsigned char *buf = malloc(n ? n : 1);
    st = buf ? cf_cog_read(cog, 0, x, y, w, h, &band, 1, buf, n, &err) : CF_E_NOMEM;
    if (st != CF_OK) {
        fprintf(stderr, "consumer: %s\n", err.msg[0] ? err.msg : cf_strerror(st));
        free(buf);
        cf_cog_close(cog);
        cf_io_free(io);
        return 1;
    }
    unsigned long long sum = 0;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        if (in.dtype == CF_DT_U16) sum += ((const uint16_t *)buf)[i];
        else if (in.dtype == CF_DT_U8) sum += buf[i];
    }
    printf("%u %u %u %s %llu\n", in.width, in.height, in.count, cf_dtype_name(in.dtype), sum);
    free(buf);
    cf_cog_close(cog);
    cf_io_free(io);
    return 0;
}
