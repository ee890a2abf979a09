/*
 * loader.c - the training data pipeline: a sampler hands out windows, a
 * pool of reader threads reads them (cf_cog_read is thread-safe and, for
 * remote files, puts every thread's tile requests on the io's one libcurl
 * multi loop, so N readers = N patches' requests in flight), converts and
 * augments them in C, and fills a ring of batch slots the consumer takes in
 * order.  Memory is bounded by the options, never by the input: the ring
 * and the tile-shuffle cache are sized at creation, and everything else
 * (reader scratch, fetched tiles, decode scratch) comes out of
 * inflight_bytes (budget.h); readers wait for it rather than allocate
 * beyond it.
 *
 * How many patches are read at once adapts to how busy the CPUs are
 * (loader_adapt.c) unless the concurrency option fixes it.
 *
 * This file keeps the ring of batch slots, the reader threads and the
 * consumer's calls; loader_internal.h lists the other pieces.
 */
#include "loader_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* The loader's io counters: the sum over its io loops. */
static void io_stats(cf_loader *ld, cf_io_stats *out) {
    memset(out, 0, sizeof *out);
    if (ld->released) {
        *out = ld->io_final;
        return;
    }
    for (int i = 0; i < ld->nios; i++) {
        cf_io_stats s;
        cf_io_get_stats(ld->ios[i], &s);
        out->requests += s.requests;
        out->retries += s.retries;
        out->hedges += s.hedges;
        out->hedge_wins += s.hedge_wins;
        out->bytes_fetched += s.bytes_fetched;
        out->connect_failures += s.connect_failures;
        out->read_failures += s.read_failures;
        out->header_cache_hits += s.header_cache_hits;
        out->inflight += s.inflight;
        out->max_inflight += s.max_inflight;
    }
}

static double process_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Feed the controller (loader_adapt.c) one window of at least 0.25 s and
 * `conc` samples: how busy the CPUs were, retries, whether the ring was
 * full.  Called under ld->mu after each sample. */
static void adapt(cf_loader *ld) {
    if (ld->o.concurrency) return;
    double now = cf__now();
    int in_window = ld->win_t0 != 0; /* a window is running */
    if (in_window) {
        ld->win_done++;
        if (now - ld->win_t0 < 0.25 || ld->win_done < (uint64_t)ld->ctl.conc)
            return;
    }
    cf_io_stats ios;
    io_stats(ld, &ios);
    double cpu_now = process_cpu_s();
    uint64_t sb = 0, stot = 0;
    int sys = cf__cpu_ticks(&sb, &stot);
    if (in_window) {
        /* Busy: this process's share of all cores, or the whole machine's
         * where /proc/stat tells it (a local server, the training step and
         * other processes use the same cores), whichever is larger. */
        double busy = (cpu_now - ld->win_cpu0) /
                      ((now - ld->win_t0) * (double)cf__ncpu());
        if (sys && ld->win_sys && stot > ld->win_sys_total0) {
            double m = (double)(sb - ld->win_sys_busy0) /
                       (double)(stot - ld->win_sys_total0);
            if (m > busy) busy = m;
        }
        int before = ld->ctl.conc;
        int c = cf__adapt_step(&ld->ctl, busy, ios.retries > ld->win_retries,
                               ld->win_backpressure);
        if (c > before) pthread_cond_broadcast(&ld->work_cv);
        if (ld->own_io && ld->remote) {
            int io_n = c * 4 < 16 ? 16 : c * 4;
            for (int i = 0; i < ld->nios; i++)
                cf_io_set_max_inflight(ld->ios[i], io_n > CF_IO_MAX_INFLIGHT
                                                       ? CF_IO_MAX_INFLIGHT
                                                       : io_n);
        }
    }
    /* The next window starts here. */
    ld->win_t0 = now;
    ld->win_cpu0 = cpu_now;
    ld->win_sys = sys;
    ld->win_sys_busy0 = sb;
    ld->win_sys_total0 = stot;
    ld->win_done = 0;
    ld->win_retries = ios.retries;
    ld->win_backpressure = 0;
}

/* 1: sample next_claim may be read now; 0: wait; -1: epoch done. */
static uint64_t claim_seq(const cf_loader *ld) {
    uint64_t b = ld->next_claim / ld->o.batch_size;
    return ld->seq_base + b +
           (ld->claim_epoch != ld->epoch ? ld->lay_out.batches : 0);
}

static int claimable(cf_loader *ld) {
    if (ld->stop || ld->closed || !ld->total) return -1;
    if (ld->next_claim >= ld->total) {
        /* This epoch is all claimed: go on into the next one, which the
         * consumer starts with cf_loader_set_epoch(epoch + 1, 0); one
         * epoch ahead at most. */
        if (ld->claim_epoch != ld->epoch) return 0;
        ld->claim_epoch = ld->epoch + 1;
        ld->next_claim = 0;
    }
    if (ld->reading >= ld->ctl.conc) return 0;
    uint64_t q = claim_seq(ld);
    ld_slot *s = &ld->slots[q % (uint64_t)ld->o.prefetch];
    if (s->state == SLOT_FILLING && s->batch == q) return 1;
    if (s->state == SLOT_FREE) return 1;
    ld->win_backpressure = 1;
    return 0;
}

/* Failures that are not the sample's fault but the run's: expired or
 * wrong credentials (401/403), a proxy wanting credentials (407), a legal
 * block (451), an object that was readable and is gone (404, 410, a
 * deleted file), a host name that does not resolve, an object replaced while read (ETag, 412, a
 * rewritten file), no memory, a stopped loader.  skip_errors never drops
 * these: the batch fails with them.  Corrupt or oversized tiles, and
 * transport failures after the io layer's retries, are the sample's. */
static int fatal_error(cf_status st) {
    switch (st) {
    case CF_E_AUTH:
    case CF_E_NOTFOUND:
    case CF_E_CHANGED:
    case CF_E_NOMEM:
    case CF_E_STATE:
    case CF_E_ARG: return 1;
    default: return 0;
    }
}

static void *worker_main(void *arg) {
    ld_worker *wk = arg;
    cf__thread_name("cf-reader");
    cf_loader *ld = wk->ld;
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        int c;
        while ((c = claimable(ld)) == 0)
            pthread_cond_wait(&ld->work_cv, &ld->mu);
        if (c < 0) break;
        uint64_t q = claim_seq(ld), ep = ld->claim_epoch;
        uint64_t j = ld->next_claim++;
        uint64_t b = j / ld->o.batch_size;
        uint32_t i = (uint32_t)(j % ld->o.batch_size);
        ld_slot *s = &ld->slots[q % (uint64_t)ld->o.prefetch];
        if (s->state == SLOT_FREE) {
            uint64_t left = ld->total - b * ld->o.batch_size;
            s->state = SLOT_FILLING;
            s->batch = q;
            s->n = left < ld->o.batch_size ? (uint32_t)left : ld->o.batch_size;
            s->done = s->failed = 0;
            s->fatal = 0;
            cf__err_clear(&s->err);
        }
        ld->reading++;
        pthread_mutex_unlock(&ld->mu);

        cf_error e;
        cf__err_clear(&e);
        uint64_t decoded = 0;
        double tr = 0, tc = 0;
        cf_status st = cf__ld_read_sample(ld, wk, s, i, ep, j, &decoded, &tr, &tc, &e);

        pthread_mutex_lock(&ld->mu);
        ld->reading--;
        ld->st_decoded += decoded;
        if (st == CF_OK) /* with the windows they served (a failed sample: neither) */
            ld->st_chunks += wk->chunk_bytes, ld->st_rounds += wk->rounds, ld->st_read_ok++;
        wk->chunk_bytes = wk->rounds = 0;
        ld->st_read += tr;
        ld->st_convert += tc;
        s->ok[i] = st == CF_OK;
        if (st != CF_OK && !s->failed++) s->err = e;
        if (st != CF_OK && !s->fatal && fatal_error(st)) {
            s->fatal = 1;
            s->fatal_err = e;
        }
        if (++s->done == s->n) {
            s->state = SLOT_READY;
            pthread_cond_broadcast(&ld->ready_cv);
        }
        adapt(ld);
        pthread_cond_signal(&ld->work_cv);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

static cf_status start_threads(cf_loader *ld, cf_error *err) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* Readers keep their buffers on the heap: small stacks let many
     * threads wait on the network cheaply. */
    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
    int started = 0;
    for (int t = 0; t < ld->nthreads; t++) {
        ld_worker *wk = &ld->workers[t];
        wk->ld = ld;
        if (!wk->scratch) {
            wk->scratch = cf__malloc(ld->scratch_bytes);
            wk->scratch_bytes = ld->scratch_bytes;
            if (!wk->scratch) break;
        }
        if (pthread_create(&wk->th, &attr, worker_main, wk) != 0) break;
        started++;
    }
    pthread_attr_destroy(&attr);
    ld->running = started;
    if (!started)
        return cf__err(err, CF_E_NOMEM, "loader: cannot start reader threads");
    /* Fewer threads than planned still work: cap the concurrency. */
    if (ld->ctl.max_conc > started) ld->ctl.max_conc = started;
    if (ld->ctl.conc > started) ld->ctl.conc = started;
    return CF_OK;
}

/* Called without ld->mu held.  The caller that sees the threads running
 * joins them (cf_loader_close may race a cf_loader_set_epoch). */
static void stop_threads(cf_loader *ld) {
    pthread_mutex_lock(&ld->mu);
    int n = ld->running;
    ld->running = 0;
    ld->stop = 1;
    pthread_cond_broadcast(&ld->work_cv);
    pthread_mutex_unlock(&ld->mu);
    /* Readers waiting for memory give up their patch (it is dropped). */
    cf__budget_abort(&ld->fetch.b, 1);
    cf__budget_abort(&ld->kits.b, 1);
    cf__budget_abort(&ld->borrow, 1);
    for (int t = 0; t < n; t++) pthread_join(ld->workers[t].th, NULL);
    cf__budget_abort(&ld->fetch.b, 0);
    cf__budget_abort(&ld->kits.b, 0);
    cf__budget_abort(&ld->borrow, 0);
    pthread_mutex_lock(&ld->mu);
    ld->stop = 0; /* a closed loader's readers stop on ld->closed */
    pthread_mutex_unlock(&ld->mu);
}

/* ------------------------------------------------------------------ */
/* consumer                                                             */
/* ------------------------------------------------------------------ */

/* After fork() the child has the loader's memory but not its threads
 * (and maybe a lock held by one of them): refuse to use it there. */
static cf_status check_pid(const cf_loader *ld, cf_error *err) {
    if (getpid() == ld->pid) return CF_OK;
    return cf__err(err, CF_E_STATE,
                   "loader: created in process %d, used in %d after fork(): "
                   "create a loader in each process",
                   (int)ld->pid, (int)getpid());
}

/* Under ld->mu, with skip_errors, for each batch in order: record its
 * samples' outcomes in the window of the last skip_window, and 1 when
 * more than skip_limit of that window failed (samples not seen yet count
 * as read): a run whose reads mostly fail then stops with the cause
 * instead of delivering empty batches. */
static int skip_record(cf_loader *ld, const ld_slot *s) {
    for (uint32_t i = 0; i < s->n; i++) {
        uint8_t *h = &ld->skip_hist[ld->skip_pos];
        ld->skip_dropped -= *h;
        *h = !s->ok[i];
        ld->skip_dropped += *h;
        ld->skip_pos = (ld->skip_pos + 1) % ld->skip_window;
    }
    return (double)ld->skip_dropped > ld->o.skip_limit * ld->skip_window;
}

/* Under ld->mu: slot s holds the consumer's next batch, complete. */
static int slot_ready(const cf_loader *ld, const ld_slot *s) {
    return s->state == SLOT_READY && s->batch == ld->seq_base + ld->next_batch;
}

/* Under ld->mu: 1 when cf_loader_next would return at once (batch ready,
 * end of epoch, or an error), else 0 after starting the readers if
 * needed.  *s receives the slot of the next batch. */
static int next_ready(cf_loader *ld, ld_slot **s, cf_status *st,
                      cf_error *err) {
    *st = CF_OK;
    if (ld->closed) {
        *st = cf__err(err, CF_E_STATE, "loader: closed");
        return 1;
    }
    if (ld->next_batch >= ld->lay_out.batches) {
        *st = cf__err(err, CF_E_END, "loader: end of epoch %llu",
                      (unsigned long long)ld->epoch);
        return 1;
    }
    *s = &ld->slots[(ld->seq_base + ld->next_batch) % (uint64_t)ld->o.prefetch];
    if ((*s)->state == SLOT_HELD) {
        *st = cf__err(err, CF_E_STATE,
                      "loader: all %d ring slots are held: release a batch "
                      "before taking the next",
                      ld->o.prefetch);
        return 1;
    }
    if (!ld->running) {
        if (ld->t_start == 0) ld->t_start = cf__now();
        *st = start_threads(ld, err);
        if (*st != CF_OK) return 1;
    }
    return slot_ready(ld, *s);
}

int cf_loader_wait(cf_loader *ld, double timeout_s) {
    if (getpid() != ld->pid) return 1; /* next() reports the misuse */
    pthread_mutex_lock(&ld->mu);
    ld_slot *s;
    cf_status st;
    int ready = next_ready(ld, &s, &st, NULL);
    if (!ready) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        double t0 = (double)until.tv_sec + until.tv_nsec * 1e-9;
        double end = t0 + (timeout_s > 0 ? timeout_s : 0);
        until.tv_sec = (time_t)end;
        until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
        while (!ready) {
            if (pthread_cond_timedwait(&ld->ready_cv, &ld->mu, &until) ==
                ETIMEDOUT) {
                ready = slot_ready(ld, s) || ld->closed;
                break;
            }
            ready = slot_ready(ld, s) || ld->closed;
        }
        ld->st_wait += cf__now() - t0;
    }
    pthread_mutex_unlock(&ld->mu);
    return ready;
}

cf_status cf_loader_next(cf_loader *ld, cf_batch *out, cf_error *err) {
    memset(out, 0, sizeof *out);
    out->slot = -1;
    if (check_pid(ld, err) != CF_OK) return CF_E_STATE;
    pthread_mutex_lock(&ld->mu);
    ld_slot *s = NULL;
    cf_status st;
    if (!next_ready(ld, &s, &st, err)) {
        double t0 = cf__now();
        while (!slot_ready(ld, s) && !ld->closed)
            pthread_cond_wait(&ld->ready_cv, &ld->mu);
        ld->st_wait += cf__now() - t0;
        if (ld->closed) {
            pthread_mutex_unlock(&ld->mu);
            return cf__err(err, CF_E_STATE, "loader: closed");
        }
    } else if (st != CF_OK) {
        pthread_mutex_unlock(&ld->mu);
        return st;
    }
    uint64_t b = ld->next_batch++;
    const cf_error *fail = NULL;
    cf_error gave_up;
    if (s->failed && (!ld->o.skip_errors || s->fatal))
        fail = s->fatal ? &s->fatal_err : &s->err;
    else if (ld->o.skip_errors && skip_record(ld, s) && s->failed) {
        gave_up = s->err;
        cf__err_hint(&gave_up, gave_up.code,
                     "skip_errors gave up: %u of the last %u samples failed "
                     "(skip_limit %g)",
                     ld->skip_dropped, ld->skip_window, ld->o.skip_limit);
        fail = &gave_up;
    }
    if (fail) {
        if (err) *err = *fail;
        cf_status code = fail->code ? fail->code : CF_E_IO;
        s->state = SLOT_FREE;
        pthread_cond_broadcast(&ld->work_cv);
        pthread_mutex_unlock(&ld->mu);
        return code;
    }
    const size_t img_b =
        (size_t)ld->lay_out.time_steps * ld->lay_out.channels * ld->plane * ld->es;
    const size_t msk_b = ld->plane * ld->mask_es;
    const size_t val_b = s->valid ? ld->valid_steps * ld->plane : 0;
    if (s->failed) {
        /* Drop failed samples, keeping the order of the others. */
        uint32_t k = 0;
        for (uint32_t i = 0; i < s->n; i++) {
            if (!s->ok[i]) continue;
            if (k != i) {
                memmove(s->image + k * img_b, s->image + i * img_b, img_b);
                if (s->mask)
                    memmove(s->mask + k * msk_b, s->mask + i * msk_b, msk_b);
                if (s->valid)
                    memmove(s->valid + k * val_b, s->valid + i * val_b, val_b);
                s->windows[k] = s->windows[i];
            }
            k++;
        }
        ld->st_skipped += s->failed;
        s->n = k;
        s->failed = 0;
    }
    s->state = SLOT_HELD;
    ld->st_batches++;
    ld->st_samples += s->n;
    ld->st_delivered += (uint64_t)s->n * (img_b + msk_b + val_b);
    out->index = b;
    out->seq = s->batch;
    out->n = s->n;
    out->slot = (int)(s - ld->slots);
    out->image = s->image;
    out->mask = s->mask;
    out->windows = s->windows;
    pthread_mutex_unlock(&ld->mu);
    return CF_OK;
}

void cf_loader_empty(cf_loader *ld, uint64_t *left_out, uint64_t *redrawn) {
    uint64_t r = 0;
    if (ld && getpid() == ld->pid) {
        pthread_mutex_lock(&ld->mu);
        r = ld->st_redrawn;
        pthread_mutex_unlock(&ld->mu);
    }
    if (left_out) *left_out = ld ? ld->samp.left_out : 0;
    if (redrawn) *redrawn = r;
}

const uint8_t *cf_loader_batch_valid(const cf_loader *ld, const cf_batch *b) {
    if (!ld || !b || b->slot < 0 || b->slot >= ld->o.prefetch) return NULL;
    return ld->slots[b->slot].valid;
}

void cf_loader_release(cf_loader *ld, const cf_batch *b) {
    if (!ld || !b || b->slot < 0 || b->slot >= ld->o.prefetch) return;
    if (getpid() != ld->pid) return; /* forked child: see check_pid */
    pthread_mutex_lock(&ld->mu);
    ld_slot *s = &ld->slots[b->slot];
    if (s->state == SLOT_HELD && s->batch == b->seq) {
        s->state = SLOT_FREE;
        pthread_cond_broadcast(&ld->work_cv);
    }
    pthread_mutex_unlock(&ld->mu);
}

cf_status cf_loader_set_epoch(cf_loader *ld, uint64_t epoch, uint64_t batch,
                              cf_error *err) {
    if (check_pid(ld, err) != CF_OK) return CF_E_STATE;
    pthread_mutex_lock(&ld->mu);
    if (ld->closed) {
        pthread_mutex_unlock(&ld->mu);
        return cf__err(err, CF_E_STATE, "loader: closed");
    }
    if (ld->running && epoch == ld->epoch + 1 && batch == 0 &&
        ld->next_batch >= ld->lay_out.batches) {
        /* The usual turn of the epoch: every batch of this one was taken,
         * and the readers are already reading the next one.  Keep their
         * work; only the batches still held are given back (their views
         * end here, as documented). */
        for (int i = 0; i < ld->o.prefetch; i++)
            if (ld->slots[i].state == SLOT_HELD) ld->slots[i].state = SLOT_FREE;
        if (ld->claim_epoch != epoch) {
            ld->claim_epoch = epoch;
            ld->next_claim = 0;
        }
        ld->seq_base += ld->lay_out.batches;
        ld->epoch = epoch;
        cf__sampler_set_epoch(&ld->samp, epoch);
        ld->next_batch = 0;
        pthread_cond_broadcast(&ld->work_cv);
        pthread_mutex_unlock(&ld->mu);
        return CF_OK;
    }
    pthread_mutex_unlock(&ld->mu);
    stop_threads(ld);
    pthread_mutex_lock(&ld->mu);
    for (int i = 0; i < ld->o.prefetch; i++) ld->slots[i].state = SLOT_FREE;
    /* Past every sequence number in use (read-ahead reaches two epochs),
     * so that a stale release cannot match a new batch. */
    ld->seq_base += 2 * ld->lay_out.batches + 1;
    ld->epoch = ld->claim_epoch = epoch;
    cf__sampler_set_epoch(&ld->samp, epoch);
    if (batch > ld->lay_out.batches) batch = ld->lay_out.batches;
    ld->next_batch = batch;
    ld->next_claim = batch * ld->o.batch_size;
    if (ld->next_claim > ld->total) ld->next_claim = ld->total;
    ld->win_t0 = 0;
    pthread_mutex_unlock(&ld->mu);
    return CF_OK;
}

void cf_loader_position(const cf_loader *ld, uint64_t *epoch,
                        uint64_t *next_batch) {
    cf_loader *m = (cf_loader *)ld; /* the lock is not part of the value */
    int child = getpid() != ld->pid; /* a copied lock may be held forever */
    if (!child) pthread_mutex_lock(&m->mu);
    if (epoch) *epoch = ld->epoch;
    if (next_batch) *next_batch = ld->next_batch;
    if (!child) pthread_mutex_unlock(&m->mu);
}

cf_status cf_loader_set_buffers(cf_loader *ld, int slot, void *image,
                                void *mask, cf_error *err) {
    if (slot < 0 || slot >= ld->o.prefetch)
        return cf__err(err, CF_E_ARG, "loader: slot %d not in [0, %d)", slot,
                       ld->o.prefetch);
    if (!image || (ld->lay_out.mask_bytes && !mask))
        return cf__err(err, CF_E_ARG, "loader: slot %d: buffer missing", slot);
    pthread_mutex_lock(&ld->mu);
    ld_slot *s = &ld->slots[slot];
    if (ld->running || s->state != SLOT_FREE) {
        pthread_mutex_unlock(&ld->mu);
        return cf__err(err, CF_E_STATE,
                       "loader: buffers can only be set before reading "
                       "starts (or right after set_epoch)");
    }
    if (s->own_buffers) {
        free(s->image);
        free(s->mask);
    }
    s->own_buffers = 0;
    s->image = image;
    s->mask = ld->lay_out.mask_bytes ? mask : NULL;
    pthread_mutex_unlock(&ld->mu);
    return CF_OK;
}

cf_status cf_loader_window(const cf_loader *ld, uint64_t j, cf_window *out,
                           cf_error *err) {
    if (j >= ld->total)
        return cf__err(err, CF_E_ARG, "loader: sample %llu >= %llu",
                       (unsigned long long)j, (unsigned long long)ld->total);
    cf__sampler_window(&ld->samp, j, out);
    return CF_OK;
}

cf_status cf_loader_window_grid(const cf_loader *ld, const cf_window *w, cf_grid *out,
                                cf_error *err) {
    if (!ld || !w || !out) return cf__err(err, CF_E_ARG, "cf_loader_window_grid: NULL argument");
    return cf__sg_window_grid(ld->sg, w->file, w->x, w->y, w->w, w->h, out, err);
}

void cf_loader_get_stats(cf_loader *ld, cf_loader_stats *out) {
    memset(out, 0, sizeof *out);
    if (getpid() != ld->pid) return; /* forked child: see check_pid */
    cf_io_stats ios;
    pthread_mutex_lock(&ld->mu); /* the io loops may be going (close) */
    io_stats(ld, &ios);
    out->bytes_fetched = ios.bytes_fetched;
    out->requests = ios.requests;
    out->retries = ios.retries;
    out->io_inflight = ios.inflight;
    out->hedges = ios.hedges;
    out->hedge_wins = ios.hedge_wins;
    out->samples = ld->st_samples;
    out->batches = ld->st_batches;
    out->skipped = ld->st_skipped;
    out->bytes_decoded = ld->st_decoded;
    out->bytes_delivered = ld->st_delivered;
    out->chunk_bytes_decoded = ld->st_chunks;
    out->read_rounds = ld->st_rounds;
    out->samples_read = ld->st_read_ok;
    out->concurrency = ld->ctl.conc;
    out->reading = ld->reading;
    out->wait_s = ld->st_wait;
    out->read_busy_s = ld->st_read;
    out->convert_busy_s = ld->st_convert;
    out->elapsed_s = ld->t_start ? cf__now() - ld->t_start : 0;
    pthread_mutex_unlock(&ld->mu);
    uint64_t cache_used, cache_peak;
    cf__tcache_usage(&ld->cache, &out->cache_hits, &out->cache_misses, &cache_used,
                     &cache_peak);
    /* The budget (docs/loader.md, "Memory") and what is charged to it;
     * the peak adds the parts' own peaks, so it is an upper bound. */
    uint64_t fu, fp, du, dp, bu, bp;
    cf__budget_usage(&ld->fetch.b, &fu, &fp);
    cf__budget_usage(&ld->kits.b, &du, &dp);
    cf__budget_usage(&ld->borrow, &bu, &bp);
    uint64_t fixed = ld->ring_bytes +
                     (uint64_t)ld->nthreads * ld->scratch_bytes;
    if (ld->cc) {
        /* Decoded chunks of resampled inputs (chunk_cache.h): the same
         * cache_bytes, the same counters. */
        uint64_t h, m;
        size_t u, pk;
        cf__cc_stats(ld->cc, &h, &m, &u, &pk);
        out->cache_hits += h;
        out->cache_misses += m;
        cache_used += u;
        cache_peak += pk;
    }
    out->memory_budget = ld->ring_bytes + ld->o.inflight_bytes +
                         (ld->cache.ents || ld->cc ? ld->o.cache_bytes : 0);
    out->memory_used = fixed + cache_used + fu + du + bu;
    out->memory_peak = fixed + cache_peak + fp + dp + bp;
}

/* Close the files and the loader's own io loops now (their connections,
 * sockets and descriptors), not when the last batch view dies: nothing
 * reads after close.  The io counters are kept for stats; cf_loader_free
 * then finds nothing left to close. */
static void release_inputs(cf_loader *ld) {
    pthread_mutex_lock(&ld->mu);
    io_stats(ld, &ld->io_final);
    ld->io_final.inflight = 0;
    ld->released = 1;
    pthread_mutex_unlock(&ld->mu);
    size_t nimg = ld->o.nfiles * (size_t)ld->o.time_steps;
    for (size_t i = 0; ld->img && i < nimg; i++) {
        cf_cog_close(ld->img[i]);
        ld->img[i] = NULL;
    }
    for (size_t i = 0; ld->msk && i < ld->o.nfiles; i++) {
        cf_cog_close(ld->msk[i]);
        ld->msk[i] = NULL;
    }
    for (size_t i = 0; ld->lay && i < ld->o.nfiles * ld->nlf; i++) {
        cf_cog_close(ld->lay[i]);
        ld->lay[i] = NULL;
    }
    for (size_t i = 0; ld->scm && i < nimg; i++) {
        cf_cog_close(ld->scm[i]);
        ld->scm[i] = NULL;
    }
    for (int i = 0; ld->own_io && i < ld->nios; i++) {
        cf_io_free(ld->ios[i]);
        ld->ios[i] = NULL;
    }
    ld->nios = 0;
    ld->io = NULL;
    /* The readers' memory too (the ring stays: batches may view it). */
    for (int t = 0; ld->workers && t < ld->nthreads; t++) {
        free(ld->workers[t].scratch);
        ld->workers[t].scratch = NULL;
        cf__warp_pos_free(ld->workers[t].pos);
        ld->workers[t].pos = NULL;
        free(ld->workers[t].cov);
        ld->workers[t].cov = NULL;
    }
    if (ld->budgets) {
        cf__budget_trim(&ld->fetch.b);
        cf__budget_trim(&ld->kits.b);
    }
    cf__tcache_clear(&ld->cache);
    if (ld->cc) cf__cc_clear(ld->cc);
}

void cf_loader_close(cf_loader *ld) {
    if (!ld || getpid() != ld->pid) return; /* forked child: no threads */
    pthread_mutex_lock(&ld->mu);
    int was = ld->closed;
    ld->closed = 1;
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->mu);
    if (was) return;
    if (!ld->workers) {
        release_inputs(ld);
        return;
    }
    /* Readers wait on their requests: fail those instead of waiting out
     * round trips or, on a hung server, request_timeout_s.  Not on an io
     * the caller shares with others. */
    for (int i = 0; ld->own_io && i < ld->nios; i++) cf__io_cancel(ld->ios[i], 1);
    stop_threads(ld);
    release_inputs(ld);
}
