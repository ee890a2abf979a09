/*
 * header_cache.c - see header_cache.h.  The in-memory table is bounded in
 * bytes (oldest entries dropped first) and keyed like the disk entries
 * (hc_key.c); the disk folder (hc_disk.c) is set up on first use from the
 * io's options.  The table itself is hc_table.c's, an entry hc_entry.c's.
 */
#include "hc_table.h"
#include "io_state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define HC_MEM_MAX ((size_t)256 << 20) /* bytes kept in memory per io */

static cf__hc_entry *entry_copy(const cf__hc_entry *e, const char *etag) {
    cf__hc_entry *c = cf__hc_entry_new();
    if (!c) return NULL;
    c->size = e->size;
    if (etag && !(c->etag = cf__strdup(etag))) goto fail;
    if (e->last_modified && !(c->last_modified = cf__strdup(e->last_modified)))
        goto fail;
    for (size_t i = 0; i < e->nranges; i++)
        if (cf__hc_add_range(c, e->ranges[i].off, e->ranges[i].data, e->ranges[i].len))
            goto fail;
    return c;
fail:
    cf__hc_entry_free(c);
    return NULL;
}

/* This process's table.  After fork() (a DataLoader's workers) the
 * parent's table may be locked for ever by a thread that does not exist
 * in the child.  So a child takes a table of its own at its first use, as
 * io.c takes its own loop: with the parent's entries when their lock was
 * free at the fork (they are whole then), empty otherwise, and with the
 * folder opened afresh (its lock may be held too).  The parent's table
 * is left as it is in the child: never locked, never freed. */
static hc_table *table(cf_io *io) {
    cf__io_state *state = cf__io_state_of(io);
    if (!state) return NULL;
    pid_t me = getpid();
    for (;;) {
        hc_table *t = atomic_load(&state->hc);
        if (!t || t->pid == me) return t;
        hc_table *nt = cf__hc_table_new();
        if (!nt) return NULL;
        if (pthread_mutex_trylock(&t->mu) == 0) {
            nt->head = t->head;
            nt->bytes = t->bytes;
            t->head = NULL;
            t->bytes = 0;
            pthread_mutex_unlock(&t->mu);
        }
        if (atomic_compare_exchange_strong(&state->hc, &t, nt)) return nt;
        cf__hc_table_free(nt); /* another thread of this child won */
    }
}

/* io's disk folder, NULL when there is none. */
static cf__hc_disk *disk(cf_io *io, hc_table *t) {
    if (!t) return NULL;
    pthread_mutex_lock(&t->mu);
    if (!t->disk_made) {
        const cf_io_options *o = cf__io_opts(io);
        if (o->header_cache_dir && *o->header_cache_dir)
            t->disk = cf__hc_disk_new(o->header_cache_dir, o->header_cache_max_bytes);
        t->disk_made = 1;
    }
    cf__hc_disk *d = t->disk;
    pthread_mutex_unlock(&t->mu);
    return d;
}

static void mem_store(hc_table *t, const cf__hc_key *k, const cf__hc_entry *e,
                      const char *etag);
static void mem_drop(hc_table *t, const cf__hc_key *k);

void cf__hc_forget(cf_io *io, const cf__src *src) {
    cf__hc_key k;
    if (!cf__hc_key_of(src, &k)) return;
    hc_table *t = table(io);
    mem_drop(t, &k);
    cf__hc_disk *d = disk(io, t);
    if (d) cf__hc_disk_drop(d, &k);
}

cf__hc_entry *cf__hc_lookup(cf_io *io, const cf__src *src) {
    cf__hc_key k;
    if (!cf__hc_key_of(src, &k)) return NULL;
    hc_table *t = table(io);
    cf__hc_entry *found = NULL;
    if (t) {
        pthread_mutex_lock(&t->mu);
        for (hc_item *it = t->head; it; it = it->next)
            if (!memcmp(it->key.b, k.b, sizeof k.b)) {
                found = entry_copy(it->e, it->e->etag);
                break;
            }
        pthread_mutex_unlock(&t->mu);
    }
    cf__hc_disk *d = found ? NULL : disk(io, t);
    if (d) {
        found = cf__hc_disk_load(d, &k);
        if (found) mem_store(t, &k, found, found->etag); /* warm memory too */
    }
    return found;
}

void cf__hc_store(cf_io *io, const cf__src *src, const cf__hc_entry *e,
                  const char *etag) {
    if (e->incomplete) {
        cf__hc_forget(io, src);
        return;
    }
    cf__hc_key k;
    if (!cf__hc_key_of(src, &k)) return;
    hc_table *t = table(io);
    cf__hc_disk *d = etag || e->last_modified ? disk(io, t) : NULL;
    if (d) {
        cf__hc_entry *c = entry_copy(e, etag);
        if (c) cf__hc_disk_store(d, &k, c);
        cf__hc_entry_free(c);
    }
    mem_store(t, &k, e, etag);
}

const char *cf__hc_disk_refusal(cf_io *io) {
    hc_table *t = table(io);
    cf__hc_disk *d = NULL;
    if (t) {
        pthread_mutex_lock(&t->mu);
        d = t->disk;
        pthread_mutex_unlock(&t->mu);
    }
    return d ? cf__hc_disk_why_off(d) : NULL;
}

/* Remove k's item from t, if any; t->mu held. */
static void unlink_key(hc_table *t, const cf__hc_key *k) {
    for (hc_item **pp = &t->head; *pp; pp = &(*pp)->next)
        if (!memcmp((*pp)->key.b, k->b, sizeof k->b)) {
            hc_item *old = *pp;
            *pp = old->next;
            t->bytes -= old->e->bytes;
            cf__hc_entry_free(old->e);
            free(old);
            return;
        }
}

static void mem_drop(hc_table *t, const cf__hc_key *k) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    unlink_key(t, k);
    pthread_mutex_unlock(&t->mu);
}

static void mem_store(hc_table *t, const cf__hc_key *k, const cf__hc_entry *e,
                      const char *etag) {
    cf__hc_entry *c = entry_copy(e, etag);
    if (!t || !c || c->bytes > HC_MEM_MAX / 4) {
        cf__hc_entry_free(c);
        return;
    }
    hc_item *it = cf__calloc(1, sizeof *it);
    if (!it) {
        cf__hc_entry_free(c);
        return;
    }
    it->key = *k;
    it->e = c;
    pthread_mutex_lock(&t->mu);
    /* Replace an older entry for the same key, then trim to the budget. */
    unlink_key(t, k);
    it->next = t->head;
    t->head = it;
    t->bytes += c->bytes;
    while (t->bytes > HC_MEM_MAX) {
        hc_item **pp = &t->head;
        while ((*pp)->next) pp = &(*pp)->next;
        hc_item *last = *pp;
        *pp = NULL;
        t->bytes -= last->e->bytes;
        cf__hc_entry_free(last->e);
        free(last);
    }
    pthread_mutex_unlock(&t->mu);
}
