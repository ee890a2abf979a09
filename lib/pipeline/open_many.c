/*
 * open_many.c - reading the headers of files being opened: one state
 * machine per file, all driven by the calling thread (cf_cog_open_many,
 * and cf_cog_open as n = 1).
 *
 * Opening a remote file is a few round trips: the speculative first read
 * of header_bytes, then one more each time the TIFF parser answers
 * CF__NEED_BYTES (IFDs past the first read), with head_ahead.c's guesses
 * alongside.  The parser keeps no suspended state (it restarts from the
 * top over the bytes it has), so a file waiting for bytes is only its
 * parser, its header-cache record and its read-ahead.  Its requests go to
 * the io loop with cf__src_submit; their completion puts the file on the
 * ready list; the calling thread parses each file as its bytes come and
 * sends that file's next round at once.  N files then cost about the
 * round trips of the slowest one, not the sum of all (issue 28: 27 files
 * at 164 ms took 4.5 s one by one).
 *
 * Bounded: at most max_inflight files (and no more first reads than
 * header_memory_max holds) are being opened at once, each in one of
 * `cap` slots allocated up front; the io queues requests beyond its
 * in-flight limit.
 */
#include "cog_internal.h"
#include "head_ahead.h"
#include "header_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct driver driver;

/* One file being opened (a slot, reused for the next file). */
typedef struct opener {
    driver *d;
    cf_open_req *req;
    size_t index;          /* of req, for the first failure */
    cf_cog *cog;
    cf_status st;
    cf_error *err;         /* req->err, or own_err */
    cf_error own_err;
    cf__hc_entry *rec;      /* what goes to the header cache (remote) */
    cf__tiff_parser *p;     /* NULL until the first read came */
    cf__ahead ah;
    uint64_t size;         /* the object's, once the first read came */
    cf__range_req rq[1 + CF__AHEAD_MAX_GUESSES]; /* the round in flight */
    unsigned k;            /* guesses sent with rq[0] */
    uint64_t round_bytes;  /* rq[0] and the guesses */
    uint64_t before;       /* the src's requests when the round was sent */
    int head;              /* the round in flight is the first read */
    size_t pending;        /* completions of the round to come (d->mu) */
    struct opener *next;   /* ready list or free list */
} opener;

struct driver {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    opener *ready, *ready_tail; /* rounds complete, to be parsed (mu) */
};

/* Completion of one request of a round: the io loop thread (remote) or
 * the calling thread inside cf__src_submit (local).  The last one of the
 * round hands the file to the driver; nothing of it is touched after. */
static void round_done(cf__range_req *r, void *user) {
    (void)r;
    opener *o = user;
    driver *d = o->d;
    pthread_mutex_lock(&d->mu);
    if (--o->pending == 0) {
        o->next = NULL;
        if (d->ready_tail) d->ready_tail->next = o;
        else d->ready = o;
        d->ready_tail = o;
        pthread_cond_signal(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

/* Send the first read of o's file.  1: done already (failed). */
static int send_head(opener *o) {
    cf_cog *cog = o->cog;
    const cf_io_options *io = cf__io_opts(cog->io);
    size_t first = io->header_bytes ? io->header_bytes : 65536;
    uint8_t *buf = cf__malloc(first);
    if (!buf) {
        o->st = cf__err(o->err, CF_E_NOMEM, "%s: out of memory", cog->name);
        return 1;
    }
    o->rq[0] = (cf__range_req){.off = 0, .len = first, .dst = buf, .err = o->err};
    o->head = 1;
    o->pending = 1;
    o->st = cf__src_submit_head(cog->src, &o->rq[0], round_done, o, o->err);
    if (o->st) {
        free(buf);
        return 1;
    }
    return 0;
}

/* The first read came: start the parser over its bytes. */
static cf_status took_head(opener *o) {
    cf_cog *cog = o->cog;
    uint8_t *buf = o->rq[0].dst;
    cf_status st = o->rq[0].status;
    size_t got = (size_t)o->rq[0].len;
    o->head = 0;
    if (!st) {
        cog->header_requests = 1;
        cog->header_bytes = got;
        o->size = cf__src_size(cog->src);
        o->p = cf__tiff_parser_new(o->size, cog->name);
        if (!o->p) st = cf__err(o->err, CF_E_NOMEM, "%s: out of memory", cog->name);
    }
    if (!st) {
        const cf_io_options *io = cf__io_opts(cog->io);
        cf__tiff_parser_set_budget(o->p, io->header_memory_max);
        st = cf__tiff_parser_add(o->p, 0, buf, got, o->err);
        /* Recording for the header cache may leave a range out (the entry
         * is then not stored); it never fails the open. */
        if (!st && o->rec) (void)cf__hc_add_range(o->rec, 0, buf, got);
        /* Remote chains of far-apart IFDs are read ahead (head_ahead.h);
         * a round stays within the in-flight limit, so within one wave. */
        int guesses = cf__src_is_remote(cog->src) ? io->max_inflight - 1 : 0;
        cf__ahead_init(&o->ah, o->size, guesses > 0 ? (unsigned)guesses : 0);
    }
    free(buf);
    return st;
}

/* A later round came: hand the range asked for to the parser, keep the
 * guesses that arrived. */
static cf_status took_round(opener *o) {
    cf_cog *cog = o->cog;
    cf__range_req *r = &o->rq[0];
    cf_status st = r->status;
    cog->header_requests += (uint32_t)(cf__src_requests(cog->src) - o->before);
    cog->header_bytes += o->round_bytes;
    if (!st) st = cf__tiff_parser_add(o->p, r->off, r->dst, (size_t)r->len, o->err);
    if (!st && o->rec) (void)cf__hc_add_range(o->rec, r->off, r->dst, (size_t)r->len);
    free(r->dst);
    r->dst = NULL;
    cf__ahead_keep(&o->ah, o->rq + 1, o->k);
    o->k = 0;
    return st;
}

/* Run the parser over what it has until it is done (1) or needs bytes no
 * guess holds: then that round is sent (0). */
static int parse_on(opener *o) {
    cf_cog *cog = o->cog;
    cf_error *err = o->err;
    cf_status st;
    for (;;) {
        uint64_t off = 0, len = 0;
        st = cf__tiff_parser_run(o->p, &cog->tiff, &off, &len, err);
        if (st != CF__NEED_BYTES) break;
        if (off >= o->size) {
            st = cf__err(err, CF_E_FORMAT,
                         "%s: header points past the end of the file "
                         "(offset %llu, size %llu)",
                         cog->name, (unsigned long long)off,
                         (unsigned long long)o->size);
            break;
        }
        cf__ahead_range g;
        if (cf__ahead_take(&o->ah, off, &g)) { /* a guess that held */
            st = cf__tiff_parser_add(o->p, g.off, g.data, g.len, err);
            if (!st && o->rec) (void)cf__hc_add_range(o->rec, g.off, g.data, g.len);
            free(g.data);
            if (st) break;
            continue;
        }
        if (len > o->size - off) len = o->size - off;
        if (cog->header_bytes + len > CF_MAX_HEADER_BYTES) {
            st = cf__err(err, CF_E_LIMIT, "%s: header larger than %llu bytes",
                         cog->name, (unsigned long long)CF_MAX_HEADER_BYTES);
            break;
        }
        uint8_t *more = cf__malloc((size_t)len);
        if (!more) {
            st = cf__err(err, CF_E_NOMEM, "%s: out of memory", cog->name);
            break;
        }
        cf__range_req *rq = o->rq;
        rq[0] = (cf__range_req){.off = off, .len = len, .dst = more, .err = err};
        unsigned k = cf__ahead_plan(&o->ah, off, len, rq + 1);
        uint64_t bytes = len;
        for (unsigned j = 1; j <= k; j++) bytes += rq[j].len;
        while (k && cog->header_bytes + bytes > CF_MAX_HEADER_BYTES) {
            bytes -= rq[k].len;
            free(rq[k--].dst);
        }
        /* Only the range asked for decides: a guess that fails is
         * dropped (its error goes nowhere: err NULL). */
        o->k = k;
        o->round_bytes = bytes;
        o->before = cf__src_requests(cog->src);
        o->pending = 1 + (size_t)k;
        st = cf__src_submit(cog->src, rq, 1 + k, round_done, o, err);
        if (!st) return 0;
        for (unsigned j = 0; j <= k; j++) free(rq[j].dst);
        o->k = 0;
        break;
    }
    o->st = st;
    return 1;
}

/* A round of o came back: 1 when its file is done. */
static int step(opener *o) {
    o->st = o->head ? took_head(o) : took_round(o);
    if (o->st) return 1;
    return parse_on(o);
}

/* o's file is done (o->st): record its header, finish or close the cog,
 * give the req its result. */
static void finish(opener *o) {
    cf_cog *cog = o->cog;
    if (o->p) {
        cf__tiff_parser_free(o->p);
        cf__ahead_free(&o->ah);
        if (!o->st && o->rec) {
            o->rec->size = cf__src_size(cog->src);
            char lm[128];
            cf__src_last_modified(cog->src, lm, sizeof lm);
            if (lm[0] && !(o->rec->last_modified = cf__strdup(lm)))
                o->rec->incomplete = 1; /* no memory: not stored */
            cf__hc_store(cog->io, cog->src, o->rec, cf__src_etag(cog->src));
        }
    }
    cf__hc_entry_free(o->rec);
    if (!o->st) o->st = cf__cog_open_end(cog, o->err);
    if (o->st) {
        cf_cog_close(cog);
        cog = NULL;
    }
    o->req->cog = cog;
    o->req->status = o->st;
}

/* Begin opening req in slot o: 1 when done at once (a header cache hit,
 * or a failure before any request). */
static int begin(opener *o, cf_io *io, const cf_open_options *opt) {
    driver *d = o->d;
    cf_open_req *req = o->req;
    size_t index = o->index;
    memset(o, 0, sizeof *o);
    o->d = d;
    o->req = req;
    o->index = index;
    o->err = req->err ? req->err : &o->own_err;
    cf__err_clear(o->err);
    if (!req->url) {
        o->st = cf__err(o->err, CF_E_ARG, "cf_cog_open_many: a NULL url");
        return 1;
    }
    int fetch = 0;
    o->st = cf__cog_open_begin(io, req->url, opt, &o->cog, &fetch, o->err);
    if (o->st || !fetch) return 1;
    /* No memory for the record: the file opens all the same, uncached. */
    if (cf__src_is_remote(o->cog->src)) o->rec = cf__hc_entry_new();
    return send_head(o);
}

/* Files opened together at most: the io's in-flight limit, and as many
 * first reads as header_memory_max holds. */
static size_t slots(cf_io *io, size_t n) {
    cf_io_options def;
    cf_io_options_init(&def);
    const cf_io_options *o = io ? cf__io_opts(io) : &def;
    uint64_t first = o->header_bytes ? o->header_bytes : 65536;
    uint64_t budget = o->header_memory_max ? o->header_memory_max
                                           : CF_HEADER_MEMORY_DEFAULT;
    uint64_t cap = o->max_inflight > 0 ? (uint64_t)o->max_inflight : 64;
    if (cap > budget / first) cap = budget / first;
    if (cap < 1) cap = 1;
    return cap < n ? (size_t)cap : n;
}

cf_status cf_cog_open_many(cf_io *io, cf_open_req *reqs, size_t n,
                           const cf_open_options *opt, cf_error *err) {
    if (n && !reqs) return cf__err(err, CF_E_ARG, "cf_cog_open_many: NULL reqs");
    for (size_t i = 0; i < n; i++) {
        reqs[i].cog = NULL;
        reqs[i].status = CF_E_STATE;
    }
    if (!n) return CF_OK;
    size_t cap = slots(io, n);
    opener *pool = cf__calloc(cap, sizeof *pool);
    if (!pool) {
        for (size_t i = 0; i < n; i++) {
            reqs[i].status = CF_E_NOMEM;
            if (reqs[i].err) cf__err(reqs[i].err, CF_E_NOMEM, "out of memory");
        }
        return cf__err(err, CF_E_NOMEM, "cf_cog_open_many: out of memory");
    }
    driver d = {.ready = NULL, .ready_tail = NULL};
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    opener *free_slots = NULL;
    for (size_t i = 0; i < cap; i++) {
        pool[i].d = &d;
        pool[i].next = free_slots;
        free_slots = &pool[i];
    }
    size_t next = 0, active = 0, failed = 0, first_bad = n;
    cf_status first_st = CF_OK;
    cf_error first_err;
    cf__err_clear(&first_err);
    while (next < n || active) {
        opener *o = NULL;
        if (next < n && free_slots) {
            o = free_slots;
            free_slots = o->next;
            o->req = &reqs[next];
            o->index = next++;
            active++;
            if (!begin(o, io, opt)) continue; /* sent: wait for it */
        } else {
            pthread_mutex_lock(&d.mu);
            while (!d.ready) pthread_cond_wait(&d.cv, &d.mu);
            o = d.ready;
            d.ready = o->next;
            if (!d.ready) d.ready_tail = NULL;
            pthread_mutex_unlock(&d.mu);
            if (!step(o)) continue; /* its next round is out */
        }
        finish(o);
        if (o->st) {
            failed++;
            if (o->index < first_bad) {
                first_bad = o->index;
                first_st = o->st;
                first_err = *o->err;
            }
        }
        active--;
        o->next = free_slots;
        free_slots = o;
    }
    pthread_cond_destroy(&d.cv);
    pthread_mutex_destroy(&d.mu);
    free(pool);
    if (!failed) return CF_OK;
    if (err) {
        *err = first_err;
        if (n > 1)
            cf__err_prefix(err, first_st, "%zu of %zu files failed to open, "
                                          "the first",
                           failed, n);
    }
    return first_st;
}

/* One file is many files with n = 1: here, not in cog.c, so that cog.c
 * (which this file uses to begin and end each open) does not use this
 * file back. */
cf_status cf_cog_open(cf_io *io, const char *url, cf_cog **out,
                      cf_error *err) {
    return cf_cog_open_ex(io, url, NULL, out, err);
}

cf_status cf_cog_open_ex(cf_io *io, const char *url,
                         const cf_open_options *opt, cf_cog **out,
                         cf_error *err) {
    if (!url || !out) return cf__err(err, CF_E_ARG, "cf_cog_open: NULL argument");
    cf_open_req r = {.url = url, .err = err};
    cf_status st = cf_cog_open_many(io, &r, 1, opt, NULL);
    *out = r.cog;
    return st ? st : r.status;
}
