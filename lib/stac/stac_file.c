/*
 * stac_file.c - cf_stac_add_file: a local STAC document parsed through a
 * read-only memory map, its pages let go as the parser passes them, so
 * that a collection of hundreds of megabytes costs its index, not its
 * text.
 */
#include "stac.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Let go of parsed pages every 16 MiB. */
#define DROP_EVERY (16u << 20)

cf_status cf_stac_add_file(cf_stac *ix, const char *path, const char *base, const cf_stac_limits *lim,
                           uint64_t max_bytes, int *had_items, cf_error *err) {
    if (!ix || !path || !lim || !had_items) return cf__err(err, CF_E_ARG, "cf_stac_add_file: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return cf__err(err, e == ENOENT || e == ENOTDIR ? CF_E_NOTFOUND : CF_E_IO, "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cf__err(err, CF_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return cf__err(err, CF_E_LIMIT, "%s: %lld bytes, more than the %llu allowed (max_bytes)", path,
                       (long long)st.st_size, (unsigned long long)max_bytes);
    }
    size_t len = (size_t)st.st_size;
    void *map = NULL;
    if (len) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return cf__err(err, e == ENOMEM ? CF_E_NOMEM : CF_E_IO, "%s: mmap: %s", path, strerror(e));
        }
        madvise(map, len, MADV_SEQUENTIAL);
    }
    close(fd);
    cf__stac_doc kind = CF__STAC_OTHER;
    cf_status s = cf__stac_add_mapped(ix, map ? map : "", len, DROP_EVERY, base ? base : path, lim, &kind, err);
    if (map) munmap(map, len);
    *had_items = kind == CF__STAC_ITEMS;
    return s;
}
