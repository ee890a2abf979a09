/*
 * cf_test.h - the smallest test harness: CHECK counts passes and failures
 * and prints the failing expression; CF_TEST_END prints the totals and
 * gives the process exit code; cf_test_slurp reads a fixture file.
 */
#ifndef CF_TEST_H
#define CF_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int cf_test_pass_, cf_test_fail_;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (cond) {                                                          \
            cf_test_pass_++;                                                 \
        } else {                                                             \
            cf_test_fail_++;                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                  \
        }                                                                    \
    } while (0)

/* The whole file at `path`, NUL-terminated (*len excludes the NUL), or
 * NULL (and *len 0) when it cannot be read. */
static inline uint8_t *cf_test_slurp(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    uint8_t *d = NULL;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) d = malloc((size_t)n + 1);
    if (d && fread(d, 1, (size_t)n, f) != (size_t)n) {
        free(d);
        d = NULL;
    }
    if (d) {
        d[n] = 0;
        *len = (size_t)n;
    }
    fclose(f);
    return d;
}

#define CF_TEST_END()                                                        \
    (printf("%d passed, %d failed\n", cf_test_pass_, cf_test_fail_),         \
     cf_test_fail_ ? 1 : 0)

#endif
