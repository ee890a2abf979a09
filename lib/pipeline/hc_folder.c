/*
 * hc_folder.c - opening the header cache's folder so that what is checked
 * is what is used.
 *
 * The folder must be private to the user (owned by them, writable by
 * nobody else), and so must the way to it: whoever may rename what is in
 * a folder above it, or owns a symbolic link on the way, could swap the
 * cache folder for another of the user's folders, or for one on a file
 * system they mounted (FUSE), where every file may claim to be the
 * user's -- and then have entries with wrong tile offsets trusted.  The
 * path is therefore opened one name at a time from "/", each relative to
 * the folder before it, never by path again; docs/reader.md, "Header
 * cache security", states the rules.
 */
#include "header_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void say(char *out, size_t n, const char *fmt, ...) CF__PRINTF(3, 4);
static void say(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, n, fmt, ap);
    va_end(ap);
}

/* Most symbolic links followed on the way (the kernel's own limit). */
#define HC_MAX_LINKS 40
/* Folders on the way are opened only to look names up in them: O_PATH
 * needs no read permission, as a path lookup needs none. */
#define DIR_FLAGS (O_PATH | O_DIRECTORY | O_CLOEXEC)

/* May anyone but this user (and root) change which file a name in this
 * folder stands for?  Its owner can, and so can whoever may write to it,
 * unless the sticky bit keeps them to their own names (as in /tmp: the
 * names we go through there are checked to be ours, or root's). */
static const char *others_may_rename(const struct stat *st, uid_t me,
                                     char *buf, size_t n) {
    if (st->st_uid != me && st->st_uid != 0) {
        snprintf(buf, n, "is owned by uid %u", (unsigned)st->st_uid);
        return buf;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
        snprintf(buf, n, "%s may write to (mode %04o without the sticky bit)",
                 (st->st_mode & S_IWOTH) ? "every user" : "its group",
                 (unsigned)(st->st_mode & 07777));
        return buf;
    }
    return NULL;
}

/* Open dir one name at a time from "/", each relative to the folder
 * before it and without following links by accident (O_NOFOLLOW), so
 * that what is checked is what is used -- no path is looked up twice.
 * Missing folders are made 0700.  Every folder a name is looked up in
 * must be one only this user or root can change (others_may_rename); a
 * symbolic link is followed only when it is this user's or root's.
 * (Checking the last folder alone, or the path and then opening it,
 * lets whoever controls a folder above swap the cache folder for another
 * of the user's folders, or for one on a file system they mounted, where
 * every file may claim to be the user's.)  An O_PATH descriptor, or -1
 * with out saying why. */
static int walk(const char *dir, uid_t me, char *out, size_t outn) {
    size_t cap = strlen(dir) + 2;
    char *rest = NULL, *where = NULL, *link = NULL;
    int fd = -1, links = 0, ok = 0;
    if (dir[0] != '/') { /* relative: from the working folder's path */
        char *cwd = getcwd(NULL, 0);
        if (!cwd) {
            say(out, outn, "cannot be examined (%s)", strerror(errno));
            return -1;
        }
        cap += strlen(cwd) + 1;
        rest = cf__malloc(cap);
        if (rest) snprintf(rest, cap, "%s/%s", cwd, dir);
        free(cwd);
    } else {
        rest = cf__strdup(dir);
    }
    where = cf__malloc(PATH_MAX + 1);
    link = cf__malloc(PATH_MAX + 1);
    if (!rest || !where || !link) {
        say(out, outn, "cannot be examined (%s)", strerror(ENOMEM));
        goto done;
    }
    where[0] = 0;
    fd = open("/", DIR_FLAGS);
    if (fd < 0) {
        say(out, outn, "cannot be opened (%s)", strerror(errno));
        goto done;
    }
    for (;;) {
        /* The next name of rest. */
        char *s = rest;
        while (*s == '/') s++;
        if (!*s) break; /* fd is the cache folder */
        size_t len = strcspn(s, "/");
        char name[NAME_MAX + 1];
        if (len > NAME_MAX) {
            say(out, outn, "cannot be opened (%s)", strerror(ENAMETOOLONG));
            goto done;
        }
        memcpy(name, s, len);
        name[len] = 0;
        memmove(rest, s + len, strlen(s + len) + 1);
        if (!strcmp(name, ".")) continue;
        char why[160];
        struct stat st;
        if (fstat(fd, &st) != 0) {
            say(out, outn, "cannot be examined (%s)", strerror(errno));
            goto done;
        }
        if (others_may_rename(&st, me, why, sizeof why)) {
            say(out, outn, "is below %s, which %s", where[0] ? where : "/", why);
            goto done;
        }
        int next = openat(fd, name, DIR_FLAGS | O_NOFOLLOW);
        if (next < 0 && errno == ENOENT) {
            if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) {
                say(out, outn, "cannot be created (%s)", strerror(errno));
                goto done;
            }
            next = openat(fd, name, DIR_FLAGS | O_NOFOLLOW);
        }
        int oe = next < 0 ? errno : 0;
        size_t wl = strlen(where);
        if (next < 0 && (oe == ELOOP || oe == ENOTDIR) &&
            fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
            snprintf(where + wl, PATH_MAX + 1 - wl, "/%s", name);
            if (st.st_uid != me && st.st_uid != 0) {
                say(out, outn, "goes through %s, a symbolic link owned by uid %u "
                       "(not by this user, uid %u, nor root)", where,
                       (unsigned)st.st_uid, (unsigned)me);
                goto done;
            }
            ssize_t n = readlinkat(fd, name, link, PATH_MAX);
            if (n <= 0 || ++links > HC_MAX_LINKS ||
                (size_t)n + strlen(rest) + 2 > PATH_MAX) {
                say(out, outn, "cannot be opened (%s)", strerror(n < 0 ? errno : ELOOP));
                goto done;
            }
            /* rest = target + "/" + rest, looked up from "/" or from here. */
            link[n] = 0;
            size_t rl = strlen(rest) + 1;
            char *nr = cf__realloc(rest, (size_t)n + 1 + rl);
            if (!nr) {
                say(out, outn, "cannot be examined (%s)", strerror(ENOMEM));
                goto done;
            }
            rest = nr;
            memmove(rest + n + 1, rest, rl);
            memcpy(rest, link, (size_t)n);
            rest[n] = '/';
            where[wl] = 0;
            if (link[0] == '/') {
                close(fd);
                where[0] = 0;
                if ((fd = open("/", DIR_FLAGS)) < 0) {
                    say(out, outn, "cannot be opened (%s)", strerror(errno));
                    goto done;
                }
            }
            continue;
        }
        if (next < 0) {
            say(out, outn, "cannot be %s (%s)", oe == ENOTDIR ? "created" : "opened",
                   strerror(oe));
            goto done;
        }
        close(fd);
        fd = next;
        if (!strcmp(name, "..")) {
            char *slash = strrchr(where, '/');
            if (slash) *slash = 0;
        } else {
            snprintf(where + wl, PATH_MAX + 1 - wl, "/%s", name);
        }
    }
    ok = 1;
done:
    if (!ok && fd >= 0) {
        close(fd);
        fd = -1;
    }
    free(rest);
    free(where);
    free(link);
    return fd;
}

int cf__hc_folder_open(const char *dir, char *why, size_t n) {
    uid_t me = geteuid();
    int at = walk(dir, me, why, n);
    if (at < 0) return -1;
    /* The folder itself is listed (scan): opened for reading. */
    int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int e = errno;
    close(at);
    struct stat st;
    if (fd < 0) {
        say(why, n, "cannot be opened (%s)", strerror(e));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        say(why, n, "is not a folder");
    } else if (st.st_uid != me) {
        say(why, n, "is owned by uid %u, not by this user (uid %u)",
            (unsigned)st.st_uid, (unsigned)me);
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        say(why, n, "is writable by %s (mode %04o; make it 0700)",
            (st.st_mode & S_IWOTH) ? "every user" : "its group",
            (unsigned)(st.st_mode & 07777));
    } else {
        return fd;
    }
    close(fd);
    return -1;
}
