/*
 * sink.c - where a writer's encoded tiles go: the spool beside a local
 * output (read back at close), or, for an object, the stream (stream.c)
 * or, for its full resolution, memory until the tile's row is sent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "writer_state.h"

/* All n bytes at `at`, written (wr) or read back; errors name `what`. */
static cf_status io_all(int fd, void *buf, size_t n, uint64_t at, int wr, const char *what,
                        cf_error *err) {
    uint8_t *p = buf;
    while (n) {
        ssize_t k = wr ? pwrite(fd, p, n, (off_t)at) : pread(fd, p, n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return cf__err(err, CF_E_IO, "writer: %s %s: %s", wr ? "writing" : "reading back",
                           what, k < 0 ? strerror(errno) : wr ? "short write" : "file ended");
        p += k;
        n -= (size_t)k;
        at += (uint64_t)k;
    }
    return CF_OK;
}

cf_status cf__w_pwrite(int fd, const void *buf, size_t n, uint64_t at, const char *what,
                       cf_error *err) {
    return io_all(fd, (void *)(uintptr_t)buf, n, at, 1, what, err);
}

cf_status cf__w_pread(int fd, void *buf, size_t n, uint64_t at, const char *what,
                      cf_error *err) {
    return io_all(fd, buf, n, at, 0, what, err);
}

/* Keep n encoded bytes of tile i of level l (its mask's when `mask`),
 * right after what came before them: appended to the spool (a local
 * file); for an object, level 0's held until its row is sent (*pend, the
 * image's bytes then the mask's), an overview's sent (their tiles come in
 * row order). */
cf_status cf__w_keep(cf_writer *w, int l, size_t i, int mask, const uint8_t *enc, size_t n,
                     cf_error *err) {
    w_level *L = &w->lev[l];
    if (w->ws && l == 0) {
        size_t have = mask ? (size_t)L->len[i] : 0;
        uint8_t *b = cf__realloc(mask ? w->pend[i] : NULL, have + n ? have + n : 1);
        if (!b) return cf__err(err, CF_E_NOMEM, "writer: %s: out of memory", w->path);
        memcpy(b + have, enc, n);
        if (!mask) free(w->pend[i]);
        w->pend[i] = b;
    } else if (w->ws) {
        CF__TRY(cf__wstream_put(w->ws, l, enc, n, err));
    } else {
        CF__TRY(cf__w_pwrite(w->spool_fd, enc, n, w->spool_end, w->spool_path, err));
        (mask ? L->moff : L->off)[i] = w->spool_end;
        w->spool_end += n;
    }
    (mask ? L->mlen : L->len)[i] = n;
    return CF_OK;
}
