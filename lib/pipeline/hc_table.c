/*
 * hc_table.c - an io's in-memory header cache table made and freed, with
 * its entries and its disk folder.
 */
#include "hc_table.h"
#include "io_state.h"

#include <stdlib.h>
#include <unistd.h>

hc_table *cf__hc_table_new(void) {
    hc_table *t = cf__calloc(1, sizeof *t);
    if (t) {
        pthread_mutex_init(&t->mu, NULL);
        t->pid = getpid();
    }
    return t;
}

void cf__hc_table_free(hc_table *t) {
    for (hc_item *it = t->head, *nx; it; it = nx) {
        nx = it->next;
        cf__hc_entry_free(it->e);
        free(it);
    }
    cf__hc_disk_free(t->disk);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
