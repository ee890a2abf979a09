/*
 * sockets.c - curl opens and closes its sockets through the loop, and the
 * loop remembers which numbers curl closed since it last watched them.
 */
#include "io_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Which socket numbers curl has closed since it last watched them.  curl
 * can close a socket before it says CURL_POLL_REMOVE for it; by then the
 * number may belong to another thread's new file (seen under TSan: our
 * EPOLL_CTL_DEL on a number the test server had just been given by
 * accept), or to a new socket of this loop that is in the set.  So
 * on_close_socket takes a socket out of the set while it is still curl's
 * and notes it, and the late REMOVE then touches nothing. */
void cf__loop_note_closed(cf__loop *lp, curl_socket_t s, int closed) {
    if (s < 0) return;
    if ((size_t)s >= lp->nclosed) {
        if (!closed) return; /* never noted: nothing to clear */
        size_t n = lp->nclosed ? lp->nclosed : 64;
        while (n <= (size_t)s) n *= 2;
        unsigned char *b = realloc(lp->closed, n);
        /* Without room the REMOVE does its DEL, as it did before. */
        if (!b) return;
        memset(b + lp->nclosed, 0, n - lp->nclosed);
        lp->closed = b;
        lp->nclosed = n;
    }
    lp->closed[s] = (unsigned char)closed;
}

int cf__loop_was_closed(const cf__loop *lp, curl_socket_t s) {
    return s >= 0 && (size_t)s < lp->nclosed && lp->closed[s];
}

static curl_socket_t on_open_socket(void *ud, curlsocktype purpose,
                                    struct curl_sockaddr *a) {
    (void)purpose;
    curl_socket_t s = socket(a->family, a->socktype | SOCK_CLOEXEC,
                             a->protocol);
    if (s < 0) return CURL_SOCKET_BAD;
    cf__loop_note_closed(ud, s, 0);
    return s;
}

static int on_close_socket(void *ud, curl_socket_t s) {
    cf__loop *lp = ud;
    /* ENOENT when curl never asked to watch it. */
    epoll_ctl(lp->ep_fd, EPOLL_CTL_DEL, s, NULL);
    cf__loop_note_closed(lp, s, 1);
    return close(s);
}

void cf__loop_socket_hooks(cf__loop *lp, CURL *e) {
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, lp);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, lp);
}
