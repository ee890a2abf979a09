/*
 * error.c - the per-call error struct (status names: status.c).  No global state:
 * every message lives in the caller's cf_error.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

/* Is byte i of m (n bytes) one to escape?  C0 controls and DEL, and both
 * bytes of a C1 control in UTF-8 (U+0080..U+009F, C2 80..C2 9F: CSI is
 * C2 9B), which terminals act on as they do on ESC [. */
static int ctl_at(const unsigned char *m, size_t n, size_t i) {
    unsigned char c = m[i];
    if (c < 0x20 || c == 0x7f) return 1;
    if (c == 0xC2) return i + 1 < n && m[i + 1] >= 0x80 && m[i + 1] <= 0x9F;
    return c >= 0x80 && c <= 0x9F && i > 0 && m[i - 1] == 0xC2;
}

void cf__msg_escape(char *msg, size_t cap) {
    if (!msg || !cap) return;
    const unsigned char *m = (const unsigned char *)msg;
    size_t n0 = strnlen(msg, cap - 1), n = n0, k = 0;
    for (size_t i = 0; i < n; i++) k += ctl_at(m, n0, i);
    if (!k) return;
    /* From the end, each byte to its place; escapes that would pass the
     * end are dropped with what follows them. */
    size_t len = n + 3 * k;
    if (len > cap - 1) {
        /* Keep the longest head whose escaped form fits. */
        size_t used = 0, i = 0;
        while (i < n) {
            size_t w = ctl_at(m, n0, i) ? 4 : 1;
            if (used + w > cap - 1) break;
            used += w;
            i++;
        }
        /* Do not leave a cut UTF-8 sequence (or half a C1 pair) at the end. */
        while (i > 0 && (m[i] & 0xC0) == 0x80) {
            i--;
            used -= ctl_at(m, n0, i) ? 4 : 1;
        }
        n = i;
        len = used;
    }
    /* Widths are decided on the original bytes before any is overwritten:
     * the fill runs from the end, and the escape of byte i lands at or
     * after i, so the bytes still to read (0..i-1) are intact, but byte
     * i+1 (C1's second byte, read by ctl_at for a C2) may not be: keep
     * the decision of the byte to the right. */
    size_t o = len;
    int right_is_c1 = 0; /* byte i+1 was the second byte of a C1 pair */
    for (size_t i = n; i-- > 0;) {
        unsigned char c = m[i];
        int ctl = c < 0x20 || c == 0x7f || (c == 0xC2 && right_is_c1) ||
                  (c >= 0x80 && c <= 0x9F && i > 0 && m[i - 1] == 0xC2);
        right_is_c1 = c >= 0x80 && c <= 0x9F && i > 0 && m[i - 1] == 0xC2;
        if (ctl) {
            static const char hex[] = "0123456789abcdef";
            o -= 4;
            msg[o] = '\\';
            msg[o + 1] = 'x';
            msg[o + 2] = hex[c >> 4];
            msg[o + 3] = hex[c & 15];
        } else {
            msg[--o] = (char)c;
        }
    }
    msg[len] = 0;
}

cf_status cf__err(cf_error *err, cf_status code, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    err->http_status = 0; /* a new failure: the caller's struct may be unset */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    cf__msg_escape(err->msg, sizeof err->msg);
    return code;
}

cf_status cf__err_prefix(cf_error *err, cf_status st, const char *fmt, ...) {
    if (!err) return st;
    char pre[sizeof err->msg], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* Truncation is fine: the message is for people and stays terminated. */
    size_t n = strlen(pre);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, pre, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3, m = strlen(old);
    if (m > room) m = room;
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = 0;
    cf__msg_escape(err->msg, sizeof err->msg);
    return st;
}

cf_status cf__err_hint(cf_error *err, cf_status st, const char *fmt, ...) {
    if (!err) return st;
    size_t n = strlen(err->msg);
    if (n + 2 < sizeof err->msg) {
        memcpy(err->msg + n, "; ", 3);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg + n + 2, sizeof err->msg - n - 2, fmt, ap);
        va_end(ap);
        cf__msg_escape(err->msg, sizeof err->msg);
    }
    return st;
}

void cf__err_clear(cf_error *err) {
    if (!err) return;
    err->code = CF_OK;
    err->http_status = 0;
    err->msg[0] = 0;
}

/* UTF-8 continuation bytes: a cut must not fall before one. */
static int utf8_cont(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

void cf__name_fit(const char *s, size_t n, char *out, size_t outlen) {
    if (!outlen) return;
    if (n < outlen) {
        memcpy(out, s, n);
        out[n] = 0;
        return;
    }
    /* Cut on character boundaries, so that a UTF-8 name stays valid. */
    size_t room = outlen < 8 ? outlen - 1 : outlen - 4;
    size_t head = outlen < 8 ? room : room / 2, tail = room - head;
    while (head && utf8_cont(s[head])) head--;
    while (tail && utf8_cont(s[n - tail])) tail--;
    memcpy(out, s, head);
    if (outlen < 8) { /* no room for head, "..." and tail: the head */
        out[head] = 0;
        return;
    }
    memcpy(out + head, "...", 3);
    memcpy(out + head + 3, s + n - tail, tail);
    out[head + 3 + tail] = 0;
}

char *cf__name_dup(const char *name) {
    char buf[CF__NAME_MAX];
    cf__name_fit(name, strlen(name), buf, sizeof buf);
    return cf__strdup(buf);
}

/* A "://" further on, in a path or a query, is no scheme. */
size_t cf__url_scheme_len_n(const char *url, size_t len) {
    size_t n = 0;
    if (!len || !((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z')))
        return 0;
    while (n < len && ((url[n] >= 'a' && url[n] <= 'z') || (url[n] >= 'A' && url[n] <= 'Z') ||
                       (url[n] >= '0' && url[n] <= '9') || url[n] == '+' || url[n] == '-' ||
                       url[n] == '.'))
        n++;
    return len - n >= 3 && memcmp(url + n, "://", 3) == 0 ? n : 0;
}

size_t cf__url_scheme_len(const char *url) { return cf__url_scheme_len_n(url, strlen(url)); }

void cf__redact_url(const char *url, char *out, size_t outlen) {
    if (!outlen) return;
    out[0] = 0;
    if (!url) return;
    /* Keep "scheme://", drop user info from the authority, cut at the
     * query or fragment.  The authority ends at the first '/', '?' or '#'
     * (RFC 3986), so an '@' in a query or fragment is not user info even
     * when the URL has no path; within the authority the last '@' ends
     * the user info, so that a password holding a raw '@' is dropped
     * whole. */
    size_t o = 0;
    const char *p = url;
    size_t sl = cf__url_scheme_len(url);
    if (sl) {
        const char *host = url + sl + 3;
        size_t alen = strcspn(host, "/?#");
        const char *at = NULL;
        for (size_t i = alen; i-- > 0;)
            if (host[i] == '@') {
                at = host + i;
                break;
            }
        size_t n = sl + 3;
        if (n >= outlen) n = outlen - 1;
        memcpy(out, url, n);
        o = n;
        p = at ? at + 1 : host;
    }
    cf__name_fit(p, strcspn(p, "?#"), out + o, outlen - o);
}

void *cf__malloc(size_t n) { return malloc(n ? n : 1); }
void *cf__calloc(size_t n, size_t sz) { return calloc(n ? n : 1, sz ? sz : 1); }
void *cf__realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
bool cf__grow(void **p, size_t *cap, size_t need, size_t elem, size_t first) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : first ? first : 1, bytes;
    while (n < need) {
        if (n > SIZE_MAX / 2) return false;
        n *= 2;
    }
    if (!cf__mul_size(n, elem, &bytes)) return false;
    void *q = cf__realloc(*p, bytes);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

char *cf__strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}
