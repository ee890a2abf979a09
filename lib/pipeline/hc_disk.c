/*
 * hc_disk.c - the header cache's folder on disk, private to the user.
 *
 * A cache folder is a place where another local user could plant files:
 * symbolic links that make us overwrite something else, or entries with
 * wrong tile offsets that we would trust without a request.  So:
 *   - the folder is created 0700 and used only when it is owned by this
 *     user and writable by nobody else, and every folder above it (and
 *     every link on the way) is the user's or root's; otherwise the disk
 *     cache is off for the io, said once on stderr (cf__hc_disk_why_off
 *     tells the same).  It is opened one name at a time and then once
 *     for all: every file operation is relative to that descriptor, so
 *     renaming the path afterwards changes nothing.
 *   - a store that fails (full disk, read-only folder) is said once; an
 *     unwritable folder is still read;
 *   - an entry is written to an unpredictable temp name created with
 *     O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, then renamed into place (a
 *     reader sees all of it or nothing); read with O_NOFOLLOW, and used
 *     only when it is a regular file owned by this user with one name;
 *   - every entry ends with the SHA-256 of all its other bytes, and names
 *     its key inside: a bit flip, a cut-off write or an entry copied to
 *     another name fails the check and the entry is dropped.  (A checksum
 *     does not stop a forger, who can compute one too; what stops another
 *     user is the ownership check and the 0700 folder.  A keyed hash would
 *     add nothing: the only one able to write there could read the key.)
 *   - the folder's entries are kept under max_bytes by removing the least
 *     recently used first (a hit refreshes the entry's mtime).
 */
#include "header_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Format 3: magic, key(32), size(8), ETag (u32 length + bytes),
 * Last-Modified (u32 length + bytes), nranges(u32), then per range
 * off(8) len(8) bytes, and the SHA-256 of all of that.  (Format 2 had no
 * Last-Modified: such entries fail the magic and are dropped.) */
#define HC_MAGIC "CFHDR003"
#define HC_SUM 32                          /* trailing SHA-256 */
#define HC_FIXED (8 + 32 + 8 + 4 + 4 + 4)  /* magic key size elen lmlen nranges */
#define HC_MAX_ENTRY ((uint64_t)64 << 20)  /* one entry file */
#define HC_MAX_ETAG 1024
#define HC_MAX_LM 128
/* The folder is listed again after this many stores, so that what other
 * processes wrote counts too. */
#define HC_SCAN_EVERY 256
/* Temp files older than this are a crashed writer's: removed. */
#define HC_TMP_STALE_S 3600
/* Eviction goes down to this share of the cap, so that it does not run
 * again at the next store. */
#define HC_EVICT_TO(cap) ((cap) / 10 * 9)
#define HC_MAX_LISTED (1u << 20)

/* UNCHECKED -> READY (entries read and stored) or OFF (refused);
 * READY -> READ_ONLY when the folder cannot be written to (read-only
 * file system, no permission): its entries are still read. */
typedef enum { DISK_UNCHECKED, DISK_READY, DISK_READ_ONLY, DISK_OFF } disk_state;

struct cf__hc_disk {
    pthread_mutex_t mu;
    disk_state state;
    char *dir;
    int fd;              /* the folder, once DISK_READY */
    int store_said;      /* a failed store was reported (once per io) */
    uint64_t max_bytes;
    uint64_t bytes;      /* entries at the last listing + written since */
    unsigned stores;     /* since the last listing */
    int listing;         /* a thread is listing / evicting */
    char why[800];       /* DISK_OFF: the sentence said on stderr */
};

cf__hc_disk *cf__hc_disk_new(const char *dir, uint64_t max_bytes) {
    cf__hc_disk *d = cf__calloc(1, sizeof *d);
    if (!d) return NULL;
    if (!(d->dir = cf__strdup(dir))) {
        free(d);
        return NULL;
    }
    pthread_mutex_init(&d->mu, NULL);
    d->state = DISK_UNCHECKED;
    d->fd = -1;
    d->max_bytes = max_bytes ? max_bytes : CF_HEADER_CACHE_MAX_DEFAULT;
    return d;
}

void cf__hc_disk_free(cf__hc_disk *d) {
    if (!d) return;
    if (d->fd >= 0) close(d->fd);
    pthread_mutex_destroy(&d->mu);
    free(d->dir);
    free(d);
}

/* ------------------------------------------------------------ folder */

static void refuse(cf__hc_disk *d, const char *fmt, ...) CF__PRINTF(2, 3);
static void refuse(cf__hc_disk *d, const char *fmt, ...) {
    char name[CF__NAME_MAX], reason[400];
    cf__name_fit(d->dir, strlen(d->dir), name, sizeof name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    snprintf(d->why, sizeof d->why,
             "header cache folder %s %s: the on-disk header cache is off "
             "for this io", name, reason);
    fprintf(stderr, "cogfeed: %s\n", d->why);
    d->state = DISK_OFF;
}

static void scan(cf__hc_disk *d, int dfd);

/* Check the folder once (d->mu held). */
static void open_folder(cf__hc_disk *d) {
    char why[400];
    int fd = cf__hc_folder_open(d->dir, why, sizeof why);
    if (fd < 0) {
        refuse(d, "%s", why);
        return;
    }
    d->fd = fd;
    d->state = DISK_READY;
}

/* The folder's descriptor, or -1 when the disk cache is off. */
static int ready(cf__hc_disk *d) {
    pthread_mutex_lock(&d->mu);
    int first = d->state == DISK_UNCHECKED;
    if (first) open_folder(d);
    int fd = d->state == DISK_READY || d->state == DISK_READ_ONLY ? d->fd : -1;
    if (first && fd >= 0) d->listing = 1;
    pthread_mutex_unlock(&d->mu);
    /* The first listing learns how full the folder is (and trims it when
     * the cap was lowered since). */
    if (first && fd >= 0) scan(d, fd);
    return fd;
}

const char *cf__hc_disk_why_off(cf__hc_disk *d) {
    pthread_mutex_lock(&d->mu);
    const char *w = d->state == DISK_OFF ? d->why : NULL;
    pthread_mutex_unlock(&d->mu);
    return w;
}

/* ----------------------------------------------------------- entries */

static void hex(const uint8_t *b, size_t n, char *out) {
    static const char h[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = h[b[i] >> 4];
        out[2 * i + 1] = h[b[i] & 15];
    }
    out[2 * n] = 0;
}

/* "<64 hex>.cfh" */
static void entry_name(const cf__hc_key *k, char out[72]) {
    hex(k->b, 32, out);
    memcpy(out + 64, ".cfh", 5);
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A validator (u32 length + bytes, fewer than max) at b + *pos; NULL
 * when it does not fit in body bytes.  *out stays NULL when empty. */
static int get_text(const uint8_t *b, size_t body, size_t *pos, uint32_t max,
                    char **out) {
    *out = NULL;
    if (body - *pos < 4) return 0;
    uint32_t len = cf__rd32(b + *pos, false);
    *pos += 4;
    if (len >= max || len > body - *pos) return 0;
    if (len && !(*out = cf__calloc(1, (size_t)len + 1))) return 0;
    if (len) memcpy(*out, b + *pos, len);
    *pos += len;
    return 1;
}

/* Parse a checked entry file of n bytes; NULL when anything is off. */
static cf__hc_entry *decode(const uint8_t *b, size_t n, const cf__hc_key *k) {
    size_t body = n - HC_SUM, pos = 0;
    if (n < HC_FIXED + HC_SUM || memcmp(b, HC_MAGIC, 8) ||
        memcmp(b + 8, k->b, 32))
        return NULL;
    cf__hc_entry *e = cf__hc_entry_new();
    if (!e) return NULL;
    e->size = cf__rd64(b + 40, false);
    pos = 48;
    /* An entry without a validator could not be checked against the
     * object (If-Match, If-Unmodified-Since): never written, never
     * trusted. */
    int ok = get_text(b, body, &pos, HC_MAX_ETAG, &e->etag) &&
             get_text(b, body, &pos, HC_MAX_LM, &e->last_modified) &&
             (e->etag || e->last_modified) && body - pos >= 4;
    uint32_t nr = ok ? cf__rd32(b + pos, false) : 0;
    pos += 4;
    ok = ok && nr <= HC_MAX_RANGES;
    for (uint32_t i = 0; ok && i < nr; i++) {
        ok = body - pos >= 16;
        if (!ok) break;
        uint64_t off = cf__rd64(b + pos, false), len = cf__rd64(b + pos + 8, false);
        pos += 16;
        ok = len <= body - pos &&
             cf__hc_add_range(e, off, b + pos, (size_t)len) == CF_OK;
        pos += ok ? (size_t)len : 0;
    }
    if (!ok || pos != body || e->incomplete) {
        cf__hc_entry_free(e);
        return NULL;
    }
    return e;
}

static int read_all(int fd, uint8_t *b, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(fd, b + done, n - done, (off_t)done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        done += (size_t)k;
    }
    return 1;
}

cf__hc_entry *cf__hc_disk_load(cf__hc_disk *d, const cf__hc_key *k) {
    int dfd = ready(d);
    if (dfd < 0) return NULL;
    char name[72];
    entry_name(k, name);
    /* O_NOFOLLOW: a symbolic link at the entry's name fails (ELOOP);
     * O_NONBLOCK: a FIFO there cannot make the open wait. */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return NULL;
    struct stat st;
    cf__hc_entry *e = NULL;
    int corrupt = 0;
    /* One name only: a hard link (which O_NOFOLLOW does not see) gives
     * the file a second name the cache does not control. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_nlink == 1 && st.st_size >= HC_FIXED + HC_SUM &&
        (uint64_t)st.st_size <= HC_MAX_ENTRY) {
        size_t n = (size_t)st.st_size;
        uint8_t *b = cf__malloc(n), sum[HC_SUM];
        if (b && read_all(fd, b, n)) {
            SHA256(b, n - HC_SUM, sum);
            if (memcmp(sum, b + n - HC_SUM, HC_SUM) == 0) e = decode(b, n, k);
            corrupt = e == NULL;
        }
        free(b);
        /* The entry's mtime is its last use: eviction removes the oldest. */
        if (e) futimens(fd, NULL);
    }
    close(fd);
    if (corrupt) unlinkat(dfd, name, 0);
    return e;
}

static void account(cf__hc_disk *d, int dfd, uint64_t n);

/* A store failed with errno e: said once per io.  A folder that cannot
 * be written to at all (read-only file system, no permission) is not
 * tried again, and its entries are still read; a full disk or quota may
 * clear, so later stores try again (quietly). */
static void store_failed(cf__hc_disk *d, int e) {
    int for_good = e == EROFS || e == EACCES || e == EPERM;
    pthread_mutex_lock(&d->mu);
    if (for_good && d->state == DISK_READY) d->state = DISK_READ_ONLY;
    int say = !d->store_said;
    d->store_said = 1;
    pthread_mutex_unlock(&d->mu);
    if (!say) return;
    char name[CF__NAME_MAX];
    cf__name_fit(d->dir, strlen(d->dir), name, sizeof name);
    if (for_good)
        fprintf(stderr, "cogfeed: header cache folder %s cannot be written to "
                "(%s): its entries are still read, new ones are kept in "
                "memory only for this io\n", name, strerror(e));
    else
        fprintf(stderr, "cogfeed: header cache folder %s: an entry could not "
                "be stored (%s); headers are kept in memory only while this "
                "lasts\n", name, strerror(e));
}

static void put_text(uint8_t *b, size_t *pos, const char *t, size_t len) {
    put32(b + *pos, (uint32_t)len);
    if (len) memcpy(b + *pos + 4, t, len);
    *pos += 4 + len;
}

void cf__hc_disk_store(cf__hc_disk *d, const cf__hc_key *k, const cf__hc_entry *e) {
    size_t elen = e->etag ? strlen(e->etag) : 0,
           lmlen = e->last_modified ? strlen(e->last_modified) : 0;
    /* Without a validator a later process could not tell a changed
     * object: such entries stay in memory. */
    if ((!elen && !lmlen) || elen >= HC_MAX_ETAG || lmlen >= HC_MAX_LM ||
        e->incomplete)
        return;
    int dfd = ready(d);
    if (dfd < 0) return;
    pthread_mutex_lock(&d->mu);
    int writable = d->state == DISK_READY;
    pthread_mutex_unlock(&d->mu);
    if (!writable) return;
    uint64_t n = HC_FIXED + elen + lmlen + HC_SUM;
    for (size_t i = 0; i < e->nranges; i++) n += 16 + e->ranges[i].len;
    if (n > HC_MAX_ENTRY || n > d->max_bytes) return;
    uint8_t *b = cf__malloc((size_t)n);
    if (!b) return;
    size_t pos = 48;
    memcpy(b, HC_MAGIC, 8);
    memcpy(b + 8, k->b, 32);
    put64(b + 40, e->size);
    put_text(b, &pos, e->etag, elen);
    put_text(b, &pos, e->last_modified, lmlen);
    put32(b + pos, (uint32_t)e->nranges);
    pos += 4;
    for (size_t i = 0; i < e->nranges; i++) {
        put64(b + pos, e->ranges[i].off);
        put64(b + pos + 8, e->ranges[i].len);
        memcpy(b + pos + 16, e->ranges[i].data, e->ranges[i].len);
        pos += 16 + e->ranges[i].len;
    }
    SHA256(b, pos, b + pos);

    char name[72], tmp[100];
    entry_name(k, name);
    int fd = -1, err = 0;
    for (int tries = 0; fd < 0 && tries < 4; tries++) {
        /* Unpredictable, so nobody can have put anything at this name
         * beforehand; O_EXCL|O_NOFOLLOW refuse whatever is there anyway. */
        uint8_t r[8];
        if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                         ((uint64_t)getpid() << 17) ^ (uint64_t)tries;
            put64(r, v);
        }
        char rh[17];
        hex(r, 8, rh);
        snprintf(tmp, sizeof tmp, "%s.%s.tmp", name, rh);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600);
        if (fd < 0) err = errno;
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd >= 0) {
        size_t done = 0;
        while (done < n) {
            ssize_t w = write(fd, b + done, (size_t)n - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                err = w < 0 ? errno : EIO;
                break;
            }
            done += (size_t)w;
        }
        if (close(fd) != 0 && !err) err = errno;
        /* rename() makes the entry appear whole or not at all, and
         * replaces whatever was at its name (a link itself, never what
         * it points to). */
        if (!err && renameat(dfd, tmp, dfd, name) != 0) err = errno;
        if (err) unlinkat(dfd, tmp, 0);
        else account(d, dfd, n);
    }
    if (err) store_failed(d, err);
    free(b);
}

void cf__hc_disk_drop(cf__hc_disk *d, const cf__hc_key *k) {
    int dfd = ready(d);
    if (dfd < 0) return;
    char name[72];
    entry_name(k, name);
    unlinkat(dfd, name, 0);
}

/* ----------------------------------------------------------- eviction */

typedef struct listed {
    uint64_t size;
    struct timespec mtime;
    char name[72];
} listed;

static int older(const void *a, const void *b) {
    const struct timespec *x = &((const listed *)a)->mtime,
                          *y = &((const listed *)b)->mtime;
    if (x->tv_sec != y->tv_sec) return x->tv_sec < y->tv_sec ? -1 : 1;
    return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

static int all_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* 1: an entry ("<64 hex>.cfh"); 2: one to remove: a temp file
 * ("<64 hex>.cfh.<16 hex>.tmp") or an entry of the first format
 * ("<32 hex>.cfh", never read now); 0: not ours, left alone. */
static int kind_of(const char *s) {
    size_t n = strlen(s);
    if (n == 68 && all_hex(s, 64) && !strcmp(s + 64, ".cfh")) return 1;
    if (n == 89 && all_hex(s, 64) && !strncmp(s + 64, ".cfh.", 5) &&
        all_hex(s + 69, 16) && !strcmp(s + 85, ".tmp"))
        return 2;
    if (n == 36 && all_hex(s, 32) && !strcmp(s + 32, ".cfh")) return 2;
    return 0;
}

/* List the folder: count its entries' bytes and, past the cap, remove
 * the least recently used.  Called with d->listing set by the caller. */
static void scan(cf__hc_disk *d, int dfd) {
    uid_t me = geteuid();
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0) close(fd);
        pthread_mutex_lock(&d->mu);
        d->listing = 0;
        pthread_mutex_unlock(&d->mu);
        return;
    }
    listed *v = NULL;
    size_t nv = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    for (struct dirent *de; (de = readdir(dir));) {
        int kind = kind_of(de->d_name);
        struct stat st;
        if (!kind || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != me)
            continue;
        if (kind == 2) {
            if (now - st.st_mtime > HC_TMP_STALE_S || strlen(de->d_name) == 36)
                unlinkat(dfd, de->d_name, 0);
            continue;
        }
        total += (uint64_t)st.st_size;
        if (nv == cap && cap < HC_MAX_LISTED) {
            size_t nc = cap ? cap * 2 : 256;
            listed *nvv = cf__realloc(v, nc * sizeof *v);
            if (nvv) {
                v = nvv;
                cap = nc;
            }
        }
        if (nv < cap) {
            v[nv].size = (uint64_t)st.st_size;
            v[nv].mtime = st.st_mtim;
            memcpy(v[nv].name, de->d_name, 69);
            nv++;
        }
    }
    closedir(dir);
    if (total > d->max_bytes && nv) {
        qsort(v, nv, sizeof *v, older);
        for (size_t i = 0; i < nv && total > HC_EVICT_TO(d->max_bytes); i++)
            if (unlinkat(dfd, v[i].name, 0) == 0 || errno == ENOENT)
                total -= v[i].size;
    }
    free(v);
    pthread_mutex_lock(&d->mu);
    d->bytes = total;
    d->stores = 0;
    d->listing = 0;
    pthread_mutex_unlock(&d->mu);
}

/* n bytes were written: list the folder again when the estimate passes
 * the cap, or every HC_SCAN_EVERY stores (other processes write too). */
static void account(cf__hc_disk *d, int dfd, uint64_t n) {
    pthread_mutex_lock(&d->mu);
    d->bytes += n;
    d->stores++;
    int go = !d->listing && (d->bytes > d->max_bytes || d->stores >= HC_SCAN_EVERY);
    if (go) d->listing = 1;
    pthread_mutex_unlock(&d->mu);
    if (go) scan(d, dfd);
}
