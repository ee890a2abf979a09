/*
 * header_cache.c - see header_cache.h.  The in-memory table is bounded in
 * bytes (oldest entries dropped first); disk entries are named by two
 * hashes of the URL, so no URL (which may hold a SAS token) is written.
 */
#include "header_cache.h"
#include "io_state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define HC_MEM_MAX ((size_t)256 << 20) /* bytes kept in memory per io */
#define HC_MAGIC "CFHDR001"

typedef struct hc_item {
    struct hc_item *next;
    char *url;
    cf_hc_entry *e;
} hc_item;

typedef struct cf_hc_table {
    pthread_mutex_t mu;
    hc_item *head; /* newest first */
    size_t bytes;
} hc_table;

hc_table *cf__hc_table_new(void) {
    hc_table *t = cf__calloc(1, sizeof *t);
    if (t) pthread_mutex_init(&t->mu, NULL);
    return t;
}

void cf__hc_table_free(hc_table *t) {
    for (hc_item *it = t->head, *nx; it; it = nx) {
        nx = it->next;
        free(it->url);
        cf__hc_entry_free(it->e);
        free(it);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

cf_hc_entry *cf__hc_entry_new(void) { return cf__calloc(1, sizeof(cf_hc_entry)); }

void cf__hc_entry_free(cf_hc_entry *e) {
    if (!e) return;
    for (size_t i = 0; i < e->nranges; i++) free(e->ranges[i].data);
    free(e->ranges);
    free(e->etag);
    free(e);
}

cf_status cf__hc_add_range(cf_hc_entry *e, uint64_t off, const uint8_t *data,
                           size_t len) {
    if (e->nranges >= HC_MAX_RANGES) {
        e->incomplete = 1;
        return CF_E_LIMIT;
    }
    if (e->nranges == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 4;
        cf_hc_range *r = cf__realloc(e->ranges, cap * sizeof *r);
        if (!r) {
            e->incomplete = 1;
            return CF_E_NOMEM;
        }
        e->ranges = r;
        e->cap = cap;
    }
    uint8_t *d = cf__malloc(len);
    if (!d) {
        e->incomplete = 1;
        return CF_E_NOMEM;
    }
    memcpy(d, data, len);
    e->ranges[e->nranges++] = (cf_hc_range){off, len, d};
    e->bytes += len;
    return CF_OK;
}

static cf_hc_entry *entry_copy(const cf_hc_entry *e, const char *etag) {
    cf_hc_entry *c = cf__hc_entry_new();
    if (!c) return NULL;
    c->size = e->size;
    if (etag && !(c->etag = cf__strdup(etag))) goto fail;
    for (size_t i = 0; i < e->nranges; i++)
        if (cf__hc_add_range(c, e->ranges[i].off, e->ranges[i].data, e->ranges[i].len))
            goto fail;
    return c;
fail:
    cf__hc_entry_free(c);
    return NULL;
}

/* FNV-1a with two bases: 128 bits of name for a disk entry. */
static uint64_t fnv(const char *s, uint64_t h) {
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static void disk_path(const char *dir, const char *url, char *out, size_t n) {
    snprintf(out, n, "%s/%016llx%016llx.cfh", dir,
             (unsigned long long)fnv(url, 0xcbf29ce484222325ull),
             (unsigned long long)fnv(url, 0x84222325cbf29ce4ull));
}

static void mem_store(cf_io *io, const char *url, const cf_hc_entry *e,
                      const char *etag);
static void mem_drop(cf_io *io, const char *url);

static int rd(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

static cf_hc_entry *disk_load(const char *dir, const char *url) {
    char path[4096];
    disk_path(dir, url, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    cf_hc_entry *e = cf__hc_entry_new();
    char magic[8];
    uint32_t elen = 0, n = 0;
    /* An entry without an ETag (older versions wrote them) could not be
     * checked against the object by If-Match: never trusted. */
    int ok = e && rd(f, magic, 8) && !memcmp(magic, HC_MAGIC, 8) &&
             rd(f, &e->size, 8) && rd(f, &elen, 4) && elen > 0 && elen < 1024;
    if (ok) {
        e->etag = cf__calloc(1, elen + 1);
        ok = e->etag && rd(f, e->etag, elen);
    }
    ok = ok && rd(f, &n, 4) && n <= HC_MAX_RANGES;
    uint64_t total = 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        uint64_t off, len;
        ok = rd(f, &off, 8) && rd(f, &len, 8) && cf__add_u64(total, len, &total) &&
             total <= CF_MAX_HEADER_BYTES;
        uint8_t *d = ok ? cf__malloc((size_t)len) : NULL;
        ok = ok && d && rd(f, d, (size_t)len) &&
             cf__hc_add_range(e, off, d, (size_t)len) == CF_OK;
        free(d);
    }
    fclose(f);
    if (!ok) {
        cf__hc_entry_free(e);
        return NULL;
    }
    return e;
}

static void disk_store(const char *dir, const char *url, const cf_hc_entry *e) {
    char path[4096], tmp[4200];
    disk_path(dir, url, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    mkdir(dir, 0777);
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    uint32_t elen = e->etag ? (uint32_t)strlen(e->etag) : 0;
    uint32_t n = (uint32_t)e->nranges;
    int ok = fwrite(HC_MAGIC, 1, 8, f) == 8 && fwrite(&e->size, 8, 1, f) == 1 &&
             fwrite(&elen, 4, 1, f) == 1 && fwrite(e->etag ? e->etag : "", 1, elen, f) == elen &&
             fwrite(&n, 4, 1, f) == 1;
    for (uint32_t i = 0; ok && i < n; i++) {
        uint64_t off = e->ranges[i].off, len = e->ranges[i].len;
        ok = fwrite(&off, 8, 1, f) == 1 && fwrite(&len, 8, 1, f) == 1 &&
             fwrite(e->ranges[i].data, 1, (size_t)len, f) == len;
    }
    ok = (fclose(f) == 0) && ok;
    /* rename() makes the entry appear whole or not at all. */
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

void cf__hc_forget(cf_io *io, const char *url) {
    mem_drop(io, url);
    const char *dir = cf_io_opts(io)->header_cache_dir;
    if (dir && *dir) {
        char path[4096];
        disk_path(dir, url, path, sizeof path);
        unlink(path);
    }
}

cf_hc_entry *cf__hc_lookup(cf_io *io, const char *url) {
    cf_io_state *state = cf__io_state(io);
    hc_table *t = state ? state->hc : NULL;
    cf_hc_entry *found = NULL;
    if (t) {
        pthread_mutex_lock(&t->mu);
        for (hc_item *it = t->head; it; it = it->next)
            if (!strcmp(it->url, url)) {
                found = entry_copy(it->e, it->e->etag);
                break;
            }
        pthread_mutex_unlock(&t->mu);
    }
    const char *dir = cf_io_opts(io)->header_cache_dir;
    if (!found && dir && *dir) {
        found = disk_load(dir, url);
        if (found) mem_store(io, url, found, found->etag); /* warm memory too */
    }
    return found;
}

void cf__hc_store(cf_io *io, const char *url, const cf_hc_entry *e,
                  const char *etag) {
    const char *dir = cf_io_opts(io)->header_cache_dir;
    if (e->incomplete) {
        cf__hc_forget(io, url);
        return;
    }
    if (dir && *dir && etag) {
        cf_hc_entry *c = entry_copy(e, etag);
        if (c) disk_store(dir, url, c);
        cf__hc_entry_free(c);
    }
    mem_store(io, url, e, etag);
}

/* Remove url's item from t, if any; t->mu held. */
static void unlink_url(hc_table *t, const char *url) {
    for (hc_item **pp = &t->head; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->url, url)) {
            hc_item *old = *pp;
            *pp = old->next;
            t->bytes -= old->e->bytes;
            free(old->url);
            cf__hc_entry_free(old->e);
            free(old);
            return;
        }
}

static void mem_drop(cf_io *io, const char *url) {
    cf_io_state *state = cf__io_state(io);
    hc_table *t = state ? state->hc : NULL;
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    unlink_url(t, url);
    pthread_mutex_unlock(&t->mu);
}

static void mem_store(cf_io *io, const char *url, const cf_hc_entry *e,
                      const char *etag) {
    cf_io_state *state = cf__io_state(io);
    hc_table *t = state ? state->hc : NULL;
    cf_hc_entry *c = entry_copy(e, etag);
    if (!t || !c || c->bytes > HC_MEM_MAX / 4) {
        cf__hc_entry_free(c);
        return;
    }
    hc_item *it = cf__calloc(1, sizeof *it);
    if (!it || !(it->url = cf__strdup(url))) {
        free(it);
        cf__hc_entry_free(c);
        return;
    }
    it->e = c;
    pthread_mutex_lock(&t->mu);
    /* Replace an older entry for the same URL, then trim to the budget. */
    unlink_url(t, url);
    it->next = t->head;
    t->head = it;
    t->bytes += c->bytes;
    while (t->bytes > HC_MEM_MAX) {
        hc_item **pp = &t->head;
        while ((*pp)->next) pp = &(*pp)->next;
        hc_item *last = *pp;
        *pp = NULL;
        t->bytes -= last->e->bytes;
        free(last->url);
        cf__hc_entry_free(last->e);
        free(last);
    }
    pthread_mutex_unlock(&t->mu);
}
