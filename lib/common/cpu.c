/*
 * cpu.c - clocks, CPU counts and thread names: what the loader's
 * concurrency controller measures itself by, and what top, perf and
 * py-spy show for cogfeed's threads.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "common.h"

#include <sched.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

double cf__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t cf__ncpu(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (size_t)n;
}

size_t cf__ncpu_usable(void) {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n >= 1) return (size_t)n;
    }
#endif
    return cf__ncpu();
}

int cf__cpu_ticks(uint64_t *busy, uint64_t *total) {
    /* First line of /proc/stat: "cpu  user nice system idle iowait irq
     * softirq steal guest guest_nice".  Guest time is already inside user
     * and nice, so only the first eight fields are summed. */
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    uint64_t v[8] = {0};
    int n = fscanf(f, "cpu %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                      " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4) return 0;
    uint64_t t = 0;
    for (int i = 0; i < 8; i++) t += v[i];
    *total = t;
    *busy = t - v[3] - v[4];
    return 1;
}

void cf__thread_name(const char *name) {
#if defined(__linux__)
    /* Linux keeps 15 characters; the names are shorter. */
    pthread_setname_np(pthread_self(), name);
#else
    (void)name;
#endif
}

void cf__run_parts(void *(*fn)(void *), void *parts, size_t size, size_t n) {
    uint8_t *p = parts;
    pthread_t *tid = n > 1 ? calloc(n, sizeof *tid) : NULL;
    uint8_t *started = n > 1 ? calloc(n, 1) : NULL;
    for (size_t k = 1; tid && started && k < n; k++)
        started[k] = pthread_create(&tid[k], NULL, fn, p + k * size) == 0;
    if (n) fn(p);
    for (size_t k = 1; k < n; k++) {
        if (started && started[k]) pthread_join(tid[k], NULL);
        else fn(p + k * size);
    }
    free(tid);
    free(started);
}
