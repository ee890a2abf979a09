/*
 * cf_test.h - the smallest test harness: CHECK counts passes and failures
 * and prints the failing expression; CF_TEST_END prints the totals and
 * gives the process exit code.
 */
#ifndef CF_TEST_H
#define CF_TEST_H

#include <stdio.h>

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

#define CF_TEST_END()                                                        \
    (printf("%d passed, %d failed\n", cf_test_pass_, cf_test_fail_),         \
     cf_test_fail_ ? 1 : 0)

#endif
