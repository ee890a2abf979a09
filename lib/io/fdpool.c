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
 * read.  GDAL does the same with its dataset pool.  The path reopened is
 * the absolute one at open time (src.c), so a chdir() in between (Hydra
 * and many training scripts do one) does not change which file it is.
 *
 * Descriptors in use by a pread are never closed; if every pooled
 * descriptor is in use the pool goes over max_open for a moment (at most
 * one per reading thread) and closes the excess when they are released.
 * The loader's io loops share one pool (cf__io_share_fdpool).
 *
 * The lock is held only for list and counter updates, never across
 * open() or close(): on NFS or a FUSE mount (gcsfuse, s3fs) an open can
 * take milliseconds, and with more files than max_open most reads
 * reopen, so holding it there would serialise every local read behind
 * the slowest open.  Two readers of one closed file do not both open it:
 * the second waits for the first (`reopening`).
 *
 * After fork() the lock may be held by a parent thread that does not
 * exist in the child, so a child never takes it: it reads through the
 * descriptors it inherited that fstat() shows to be the right file, and
 * opens any other file for that one read.  Files a child opens
 * through an io of its parent stay out of the pool (src.c).
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
    pthread_cond_t reopened;   /* some reopen finished */
    pid_t pid;                 /* creator: a forked child bypasses the pool */
    _Atomic int refs;
    int max_open;
    int nopen;                 /* descriptors open, idle or in use */
    cf__src *idle_head;         /* idle descriptors, most recently used first */
    cf__src *idle_tail;
    _Atomic uint64_t reopens;
};

/* Descriptors one call closes after dropping the lock; any excess left
 * is shed by later releases. */
#define FDPOOL_SHED 4

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
    pthread_cond_init(&p->reopened, NULL);
    p->pid = getpid();
    atomic_init(&p->refs, 1);
    atomic_init(&p->reopens, 0);
    p->max_open = max_open > 0 ? max_open : cf__fdpool_auto_size();
    return p;
}

cf__fdpool *cf__fdpool_ref(cf__fdpool *p) {
    if (p) atomic_fetch_add(&p->refs, 1);
    return p;
}

static int in_child(const cf__fdpool *p) { return p->pid != getpid(); }

void cf__fdpool_unref(cf__fdpool *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
    /* Every src holds a reference: none is left in the idle list.  A
     * child's copy of the lock may be held by a thread it lacks. */
    if (!in_child(p)) {
        pthread_cond_destroy(&p->reopened);
        pthread_mutex_destroy(&p->mu);
    }
    free(p);
}

int cf__fdpool_max_open(const cf__fdpool *p) { return p ? p->max_open : 0; }

uint64_t cf__fdpool_reopens(cf__fdpool *p) {
    return p ? atomic_load(&p->reopens) : 0;
}

/* ---- the idle list (pool lock held) ---------------------------------- */

static void idle_unlink(cf__fdpool *p, cf__src *s) {
    if (s->idle_prev) s->idle_prev->idle_next = s->idle_next;
    else p->idle_head = s->idle_next;
    if (s->idle_next) s->idle_next->idle_prev = s->idle_prev;
    else p->idle_tail = s->idle_prev;
    s->idle_prev = s->idle_next = NULL;
    s->idle = 0;
}

static void idle_push(cf__fdpool *p, cf__src *s) {
    s->idle_prev = NULL;
    s->idle_next = p->idle_head;
    if (p->idle_head) p->idle_head->idle_prev = s;
    else p->idle_tail = s;
    p->idle_head = s;
    s->idle = 1;
}

/* Take least recently used idle descriptors out of the pool while it
 * holds more than `keep`, at most FDPOOL_SHED; the caller closes them
 * once the lock is dropped.  Returns how many went into fds. */
static int shed(cf__fdpool *p, int keep, int *fds) {
    int n = 0;
    while (p->nopen > keep && p->idle_tail && n < FDPOOL_SHED) {
        cf__src *s = p->idle_tail;
        idle_unlink(p, s);
        fds[n++] = s->fd;
        s->fd = -1;
        p->nopen--;
    }
    return n;
}

static void close_all(const int *fds, int n) {
    for (int i = 0; i < n; i++) close(fds[i]);
}

void cf__fdpool_limit_hint(const cf__fdpool *p, int e, cf_error *err) {
    if (e != EMFILE && e != ENFILE) return;
    if (e == ENFILE) {
        cf__err_hint(err, CF_E_IO, "the system's table of open files is full");
        return;
    }
    struct rlimit rl;
    long lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur
                   : -1;
    if (p)
        cf__err_hint(err, CF_E_IO,
                     "the process's limit is %ld descriptors (ulimit -n), "
                     "of which local files keep up to max_open_files=%d; raise "
                     "the limit or lower max_open_files",
                     lim, p->max_open);
    else
        cf__err_hint(err, CF_E_IO,
                     "the process's limit is %ld descriptors (ulimit -n)", lim);
}

/* st is the file whose header was read into s. */
static int same_file(const struct stat *st, const cf__src *s) {
    return st->st_dev == s->dev && st->st_ino == s->ino &&
           (uint64_t)st->st_size == s->size &&
           st->st_mtim.tv_sec == s->mtime.tv_sec &&
           st->st_mtim.tv_nsec == s->mtime.tv_nsec;
}

/* In a forked child: s->fd is open and still the file whose header was
 * read (see cf__fdpool_acquire). */
static int inherited_ok(const cf__src *s) {
    struct stat st;
    return s->fd >= 0 && fstat(s->fd, &st) == 0 && same_file(&st, s);
}

/* Open s->path again and check it is the file whose header was read. */
static cf_status reopen_checked(const cf__fdpool *p, const cf__src *s, int *out,
                                cf_error *err) {
    int f = open(s->path, O_RDONLY | O_CLOEXEC);
    if (f < 0) {
        int e = errno;
        cf_status rc = cf__err(err, e == ENOENT ? CF_E_NOTFOUND : CF_E_IO,
                               "%s: cannot reopen: %s (closed to stay within "
                               "max_open_files=%d)",
                               s->name, strerror(e), p->max_open);
        cf__fdpool_limit_hint(p, e, err);
        return rc;
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return cf__err(err, CF_E_IO, "%s: cannot stat the reopened file: %s",
                       s->name, strerror(e));
    }
    if (!same_file(&st, s)) {
        close(f);
        return cf__err(err, CF_E_CHANGED,
                       "%s: the file changed since it was opened (it was "
                       "replaced or rewritten); open it again",
                       s->name);
    }
    *out = f;
    return CF_OK;
}

/* ---- used by src.c ---------------------------------------------------- */

int cf__fdpool_add(cf__fdpool *p, cf__src *s) {
    if (in_child(p)) return 0;
    int fds[FDPOOL_SHED];
    pthread_mutex_lock(&p->mu);
    p->nopen++;
    idle_push(p, s);
    int n = shed(p, p->max_open, fds);
    pthread_mutex_unlock(&p->mu);
    close_all(fds, n);
    return 1;
}

cf_status cf__fdpool_acquire(cf__fdpool *p, cf__src *s, int *fd, int *owned,
                             cf_error *err) {
    *owned = 0;
    if (in_child(p)) {
        /* Only this process's threads touch s->fd here, and none of them
         * changes it.  But fork() copies the descriptor table before the
         * memory, so a parent thread that closed this file and reopened
         * another under the same number in between left s->fd naming a
         * different file: it is used only if fstat says it is this one. */
        if (inherited_ok(s)) {
            *fd = s->fd;
            return CF_OK;
        }
        cf_status rc = reopen_checked(p, s, fd, err);
        *owned = rc == CF_OK;
        return rc;
    }
    pthread_mutex_lock(&p->mu);
    while (s->fd < 0 && s->reopening) pthread_cond_wait(&p->reopened, &p->mu);
    if (s->fd >= 0) {
        if (s->idle) idle_unlink(p, s);
        s->fd_users++;
        *fd = s->fd;
        pthread_mutex_unlock(&p->mu);
        return CF_OK;
    }
    s->reopening = 1;
    pthread_mutex_unlock(&p->mu);

    int f = -1;
    cf_status rc = reopen_checked(p, s, &f, err);

    int fds[FDPOOL_SHED], n = 0;
    pthread_mutex_lock(&p->mu);
    s->reopening = 0;
    pthread_cond_broadcast(&p->reopened);
    if (rc == CF_OK) {
        /* Room is made only once the open worked: a file that is gone
         * does not cost another file its descriptor at every read. */
        n = shed(p, p->max_open - 1, fds);
        s->fd = f;
        s->fd_users = 1;
        p->nopen++;
        atomic_fetch_add(&p->reopens, 1);
        *fd = f;
    }
    pthread_mutex_unlock(&p->mu);
    close_all(fds, n);
    return rc;
}

void cf__fdpool_release(cf__fdpool *p, cf__src *s, int fd, int owned) {
    if (owned) {
        close(fd);
        return;
    }
    if (in_child(p)) return;
    int fds[FDPOOL_SHED], n = 0;
    pthread_mutex_lock(&p->mu);
    if (--s->fd_users == 0) {
        idle_push(p, s);
        /* Over the bound while every descriptor was busy: shed it now. */
        n = shed(p, p->max_open, fds);
    }
    pthread_mutex_unlock(&p->mu);
    close_all(fds, n);
}

void cf__fdpool_remove(cf__fdpool *p, cf__src *s) {
    if (in_child(p)) {
        /* The child's copy of an inherited descriptor, never the list;
         * when s->fd names another file (see acquire) that one is left
         * open: it may be another src's. */
        if (inherited_ok(s)) close(s->fd);
        s->fd = -1;
        return;
    }
    int fd = -1;
    pthread_mutex_lock(&p->mu);
    if (s->fd >= 0) {
        if (s->idle) idle_unlink(p, s);
        fd = s->fd;
        s->fd = -1;
        p->nopen--;
    }
    pthread_mutex_unlock(&p->mu);
    if (fd >= 0) close(fd);
}
