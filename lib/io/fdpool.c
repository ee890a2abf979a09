/*
 * fdpool.c - a bounded pool of open local files.
 *
 * A training set is often tens of thousands of small local COGs, and the
 * process has RLIMIT_NOFILE descriptors (1024 by default on most
 * systems), which sockets, torch and Python also use.  Keeping one
 * descriptor per opened file failed with "Too many open files" past that.
 * So an io keeps at most max_open descriptors of its local files: a file
 * whose descriptor is idle may be closed (least recently used first) and
 * is reopened at its next read, which is checked to be the same file
 * (device, inode, size, modification time) as the one whose header was
 * read.  GDAL does the same with its dataset pool.
 *
 * Descriptors in use by a pread are never closed; if every pooled
 * descriptor is in use the pool goes over max_open for a moment (at most
 * one per reading thread) and closes the excess when they are released.
 * The loader's io loops share one pool (cf__io_share_fdpool).
 */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

struct cf__fdpool {
    pthread_mutex_t mu;
    _Atomic int refs;
    int max_open;
    int nopen;                 /* descriptors open, idle or in use */
    cf_src *idle_head;         /* idle descriptors, most recently used first */
    cf_src *idle_tail;
    _Atomic uint64_t reopens;
};

int cf__fdpool_auto_size(void) {
    /* A quarter of the soft limit: the rest is for sockets (up to a few
     * hundred remote connections), the Python interpreter and torch. */
    struct rlimit rl;
    rlim_t n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) n = rl.rlim_cur;
    n /= 4;
    if (n < 16) n = 16;
    if (n > 1024) n = 1024; /* also RLIM_INFINITY */
    return (int)n;
}

cf__fdpool *cf__fdpool_new(int max_open) {
    cf__fdpool *p = cf__calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->refs, 1);
    atomic_init(&p->reopens, 0);
    p->max_open = max_open > 0 ? max_open : cf__fdpool_auto_size();
    return p;
}

cf__fdpool *cf__fdpool_ref(cf__fdpool *p) {
    if (p) atomic_fetch_add(&p->refs, 1);
    return p;
}

void cf__fdpool_unref(cf__fdpool *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
    /* Every src holds a reference: none is left in the idle list. */
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int cf__fdpool_max_open(const cf__fdpool *p) { return p ? p->max_open : 0; }

uint64_t cf__fdpool_reopens(cf__fdpool *p) {
    return p ? atomic_load(&p->reopens) : 0;
}

/* ---- the idle list (pool lock held) ---------------------------------- */

static void idle_unlink(cf__fdpool *p, cf_src *s) {
    if (s->idle_prev) s->idle_prev->idle_next = s->idle_next;
    else p->idle_head = s->idle_next;
    if (s->idle_next) s->idle_next->idle_prev = s->idle_prev;
    else p->idle_tail = s->idle_prev;
    s->idle_prev = s->idle_next = NULL;
    s->idle = 0;
}

static void idle_push(cf__fdpool *p, cf_src *s) {
    s->idle_prev = NULL;
    s->idle_next = p->idle_head;
    if (p->idle_head) p->idle_head->idle_prev = s;
    else p->idle_tail = s;
    p->idle_head = s;
    s->idle = 1;
}

static void close_idle(cf__fdpool *p, cf_src *s) {
    idle_unlink(p, s);
    close(s->fd);
    s->fd = -1;
    p->nopen--;
}

/* Close least recently used idle descriptors until one more fits. */
static void make_room(cf__fdpool *p) {
    while (p->nopen >= p->max_open && p->idle_tail) close_idle(p, p->idle_tail);
}

/* ---- used by src.c ---------------------------------------------------- */

void cf__fdpool_add(cf__fdpool *p, cf_src *s) {
    pthread_mutex_lock(&p->mu);
    make_room(p);
    p->nopen++;
    idle_push(p, s);
    pthread_mutex_unlock(&p->mu);
}

cf_status cf__fdpool_acquire(cf__fdpool *p, cf_src *s, int *fd, cf_error *err) {
    pthread_mutex_lock(&p->mu);
    if (s->fd >= 0) {
        if (s->idle) idle_unlink(p, s);
        s->fd_users++;
        *fd = s->fd;
        pthread_mutex_unlock(&p->mu);
        return CF_OK;
    }
    /* Reopened under the lock, so that two readers of one file do not
     * both open it; a local open() takes microseconds. */
    make_room(p);
    int f = open(s->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    cf_status rc = CF_OK;
    if (f < 0) {
        int e = errno;
        rc = cf__err(err, e == ENOENT ? CF_E_NOTFOUND : CF_E_IO,
                     "%s: cannot reopen: %s (closed to stay within "
                     "max_open_files=%d)",
                     s->name, strerror(e), p->max_open);
    } else if (fstat(f, &st) != 0 || st.st_dev != s->dev ||
               st.st_ino != s->ino || (uint64_t)st.st_size != s->size ||
               st.st_mtim.tv_sec != s->mtime.tv_sec ||
               st.st_mtim.tv_nsec != s->mtime.tv_nsec) {
        close(f);
        rc = cf__err(err, CF_E_CHANGED,
                     "%s: the file changed since it was opened (it was "
                     "replaced or rewritten); open it again",
                     s->name);
    } else {
        s->fd = f;
        s->fd_users = 1;
        p->nopen++;
        atomic_fetch_add(&p->reopens, 1);
        *fd = f;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void cf__fdpool_release(cf__fdpool *p, cf_src *s) {
    pthread_mutex_lock(&p->mu);
    if (--s->fd_users == 0) {
        idle_push(p, s);
        /* Over the bound while every descriptor was busy: shed it now. */
        if (p->nopen > p->max_open) close_idle(p, p->idle_tail);
    }
    pthread_mutex_unlock(&p->mu);
}

void cf__fdpool_remove(cf__fdpool *p, cf_src *s) {
    pthread_mutex_lock(&p->mu);
    if (s->fd >= 0) {
        if (s->idle) idle_unlink(p, s);
        close(s->fd);
        s->fd = -1;
        p->nopen--;
    }
    pthread_mutex_unlock(&p->mu);
}
