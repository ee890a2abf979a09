/*
 * hc_table.h - the in-memory header cache table of one io (one process:
 * a forked child takes its own, header_cache.c), shared by
 * header_cache.c, which uses it, and hc_table.c, which makes and frees it
 * (for io_state.c, which holds it).
 */
#ifndef CF_HC_TABLE_H
#define CF_HC_TABLE_H

#include "header_cache.h"

#include <pthread.h>
#include <sys/types.h>

typedef struct hc_item {
    struct hc_item *next;
    cf__hc_key key;
    cf__hc_entry *e;
} hc_item;

typedef struct cf__hc_table {
    pthread_mutex_t mu;
    pid_t pid;            /* the process that uses it (see table()) */
    hc_item *head; /* newest first */
    size_t bytes;
    int disk_made;        /* disk below was made from the io's options */
    cf__hc_disk *disk;     /* NULL: no header_cache_dir (or no memory) */
} hc_table;

#endif
