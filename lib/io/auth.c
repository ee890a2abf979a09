/*
 * auth.c - the parts every backend shares: a growable string,
 * percent-encoding, header lines, the crypto helpers over libcrypto, and
 * splitting URLs.  Which backend a URL gets is auth_pick.c's; S3 SigV4
 * lives in auth_s3.c, Azure in auth_azure.c.
 */
#include "auth_int.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

/* ---- growable string ---------------------------------------------- */

static int sb_reserve(cf__sbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + extra + 1) {
        if (cap > ((size_t)1 << 30)) { b->oom = 1; return 0; }
        cap *= 2;
    }
    char *s = cf__realloc(b->s, cap);
    if (!s) { b->oom = 1; return 0; }
    b->s = s;
    b->cap = cap;
    return 1;
}

void cf__sb_putn(cf__sbuf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void cf__sb_put(cf__sbuf *b, const char *s) { cf__sb_putn(b, s, strlen(s)); }

static void sb_vprintf(cf__sbuf *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0 || !sb_reserve(b, (size_t)n)) {
        b->oom = 1;
    } else {
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void cf__sb_printf(cf__sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void cf__sb_uri(cf__sbuf *b, const char *in, size_t len, int keep_slash) {
    static const char hx[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
            (c == '/' && keep_slash)) {
            char ch = (char)c;
            cf__sb_putn(b, &ch, 1);
        } else {
            char e[3] = {'%', hx[c >> 4], hx[c & 15]};
            cf__sb_putn(b, e, 3);
        }
    }
}

void cf__sb_object(cf__sbuf *b, const char *store, size_t slen,
                   const char *key) {
    while (b->len && b->s[b->len - 1] == '/') b->s[--b->len] = 0;
    cf__sb_put(b, "/");
    cf__sb_putn(b, store, slen);
    cf__sb_put(b, "/");
    cf__sb_uri(b, key, strlen(key), 1);
}

char *cf__sb_take(cf__sbuf *b) {
    if (b->oom) { cf__sb_free(b); return NULL; }
    if (!b->s) {
        if (!sb_reserve(b, 0)) return NULL;
        b->s[0] = 0;
    }
    char *s = b->s;
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

void cf__sb_free(cf__sbuf *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

int cf__auth_add_hdrf(struct curl_slist **hdrs, const char *fmt, ...) {
    cf__sbuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    struct curl_slist *l = b.oom ? NULL : curl_slist_append(*hdrs, b.s);
    /* The line may hold a secret (a token, a signature): wipe our copy. */
    if (b.s) OPENSSL_cleanse(b.s, b.cap);
    cf__sb_free(&b);
    if (!l) return 0;
    *hdrs = l;
    return 1;
}

char *cf__uri_encode(const char *in, size_t len, int keep_slash) {
    cf__sbuf b = {0};
    cf__sb_uri(&b, in, len, keep_slash);
    return cf__sb_take(&b);
}

/* ---- crypto -------------------------------------------------------- */

void cf__hex(const unsigned char *in, size_t n, char *out) {
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[in[i] >> 4];
        out[2 * i + 1] = hx[in[i] & 15];
    }
    out[2 * n] = 0;
}

void cf__sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[32];
    SHA256(data, len, md);
    cf__hex(md, 32, out);
}

void cf__hmac_sha256(const void *key, size_t klen, const void *data,
                     size_t dlen, unsigned char out[32]) {
    unsigned int olen = 32;
    HMAC(EVP_sha256(), key, (int)klen, data, dlen, out, &olen);
}

/* Strict base64 (RFC 4648, with padding) through OpenSSL: EVP_DecodeBlock
 * itself skips surrounding whitespace and counts the padding as output
 * bytes, so the alphabet and the padding are checked here first.  The
 * decoded bytes are a secret (an Azure account key): the stack copy is
 * wiped. */
long cf__b64_decode(const char *in, unsigned char *out, size_t outcap) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in);
    if (n == 0 || n % 4 || n > INT_MAX) return -1;
    size_t pad = in[n - 1] == '=' ? (in[n - 2] == '=' ? 2 : 1) : 0;
    if (strspn(in, alphabet) != n - pad) return -1;
    size_t full = n / 4 * 3, outlen = full - pad;
    if (outlen > outcap) return -1;
    /* All but the last quad straight into out; the last (its padding
     * decodes to zero bytes out has no room for) through three bytes on
     * the stack, wiped: no allocation, no failure but bad input. */
    unsigned char last[3];
    int head = n > 4 ? EVP_DecodeBlock(out, (const unsigned char *)in, (int)(n - 4)) : 0;
    int tail = EVP_DecodeBlock(last, (const unsigned char *)in + n - 4, 4);
    if (tail == 3 && head == (int)(full - 3)) memcpy(out + full - 3, last, 3 - pad);
    OPENSSL_cleanse(last, sizeof last);
    return tail == 3 && head == (int)(full - 3) ? (long)outlen : -1;
}

void cf__b64_encode(const unsigned char *in, size_t n, char *out) {
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

int cf__auth_header_safe(const char *v) {
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

/* ---- URL helpers --------------------------------------------------- */

int cf__auth_split_http(const char *url, char **host_out, char **path_out,
                        int *has_query) {
    *host_out = *path_out = NULL;
    int https = !strncasecmp(url, "https://", 8);
    if (!https && strncasecmp(url, "http://", 7)) return 0;
    const char *auth = url + (https ? 8 : 7);
    size_t alen = strcspn(auth, "/?#");
    if (alen == 0) return 0;
    /* Drop userinfo: curl does not send it in Host. */
    const char *at = memchr(auth, '@', alen);
    const char *h = at ? at + 1 : auth;
    size_t hlen = (size_t)(auth + alen - h);
    if (hlen == 0) return 0;
    /* curl leaves the port out of Host when it is the scheme's default. */
    const char *colon = NULL;
    const char *rb = memchr(h, ']', hlen);
    for (const char *p = rb ? rb : h; p < h + hlen; p++)
        if (*p == ':') colon = p;
    if (colon) {
        const char *port = colon + 1;
        size_t plen = (size_t)(h + hlen - port);
        if (plen == 0 || (https && plen == 3 && !memcmp(port, "443", 3)) ||
            (!https && plen == 2 && !memcmp(port, "80", 2)))
            hlen = (size_t)(colon - h);
    }
    const char *path = auth + alen;
    size_t plen = strcspn(path, "?#");
    cf__sbuf hb = {0}, pb = {0};
    cf__sb_putn(&hb, h, hlen);
    if (plen == 0 || path[0] != '/') cf__sb_put(&pb, "/");
    cf__sb_putn(&pb, path, plen);
    *host_out = cf__sb_take(&hb);
    *path_out = cf__sb_take(&pb);
    if (has_query) *has_query = path[plen] == '?';
    if (!*host_out || !*path_out) {
        free(*host_out);
        free(*path_out);
        *host_out = *path_out = NULL;
        return -1;
    }
    return 1;
}

int cf__auth_endpoint_ok(const char *ep) {
    return strlen(ep) <= 1024 && cf__auth_header_safe(ep) &&
           (!strncasecmp(ep, "http://", 7) || !strncasecmp(ep, "https://", 8)) &&
           !strpbrk(ep, "?#");
}

/* Keys with "." or ".." segments would be rewritten by HTTP clients
 * (RFC 3986 dot-segment removal) and so fetch another object than named. */
static int has_dot_segment(const char *key) {
    const char *s = key;
    for (;;) {
        size_t n = strcspn(s, "/");
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 1;
        if (!s[n]) return 0;
        s += n + 1;
    }
}

cf_status cf__auth_split_url(const char *url, size_t max_store, const char *extra,
                             const char *form, const char *what, const char *name,
                             const char **store, size_t *store_len,
                             const char **key, cf_error *err) {
    const char *p = url + 5; /* after "s3://", "gs://", "az://" */
    size_t n = strcspn(p, "/");
    if (n == 0 || p[n] != '/' || !p[n + 1])
        return cf__err(err, CF_E_ARG, "%s: expected %s", name, form);
    if (n > max_store)
        return cf__err(err, CF_E_ARG, "%s: %s name longer than %zu bytes", name, what,
                       max_store);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!isalnum(c) && !strchr(extra, c))
            return cf__err(err, CF_E_ARG, "%s: invalid %s name", name, what);
    }
    if (strlen(p + n + 1) > 1024)
        return cf__err(err, CF_E_ARG, "%s: object name longer than 1024 bytes", name);
    if (has_dot_segment(p + n + 1))
        return cf__err(err, CF_E_ARG,
                       "%s: object keys with '.' or '..' path segments are not "
                       "supported (HTTP clients rewrite them)", name);
    *store = p;
    *store_len = n;
    *key = p + n + 1;
    return CF_OK;
}
