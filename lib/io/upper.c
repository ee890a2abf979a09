/*
 * upper.c - one slot on each cf_io where the layers above keep per-io
 * state (the reader's header cache), so that nothing lives in globals.
 */
#include "io_internal.h"

#include <stdlib.h>

void *cf__io_upper_state(cf_io *io, void *(*create)(void),
                        void (*destroy)(void *)) {
    void *cur = atomic_load(&io->upper);
    if (cur) return cur;
    void *fresh = create();
    if (!fresh) return NULL;
    void *expected = NULL;
    if (atomic_compare_exchange_strong(&io->upper, &expected, fresh)) {
        io->upper_destroy = destroy;
        return fresh;
    }
    destroy(fresh); /* another thread won the race */
    return expected;
}

void cf__io_upper_free(cf_io *io) {
    void *u = atomic_exchange(&io->upper, NULL);
    if (u && io->upper_destroy) io->upper_destroy(u);
}
