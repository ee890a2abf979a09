/*
 * hc_key.c - what a header-cache entry is filed under.
 *
 * The key is the SHA-256 of the request URL (scheme, endpoint, store and
 * object, so an entry learned through one endpoint or bucket is never
 * served for another) and of the credential identity (the S3 access key
 * id, the Azure account and how it signs, a presigned URL's key id; never
 * a secret), so that a user who switches accounts does not get headers
 * read with another one.  The query parameters of a SAS or a presigned
 * URL are left out: they change at every rotation, and keying on them
 * would store the same header again per token (and a token in clear is
 * never written anyway: only the hash is).
 */
#include "header_cache.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

typedef struct qparam {
    const char *name, *value; /* into the query; not NUL-terminated */
    size_t nlen, vlen;
} qparam;

/* Most query parameters looked at: a longer query is kept whole. */
#define QMAX 64

static int is(const qparam *p, const char *name) {
    return p->nlen == strlen(name) && !strncasecmp(p->name, name, p->nlen);
}

static int has(const qparam *q, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (is(&q[i], name)) return 1;
    return 0;
}

static int starts(const qparam *p, const char *prefix) {
    size_t k = strlen(prefix);
    return p->nlen >= k && !strncasecmp(p->name, prefix, k);
}

/* Azure SAS parameters (service, account and user delegation SAS). */
static const char *const sas_params[] = {
    "sv", "ss", "srt", "sp", "se", "st", "spr", "sig", "sr", "si", "sip",
    "skoid", "sktid", "skt", "ske", "sks", "skv", "saoid", "suoid", "scid",
    "sdd", "ses", NULL};
/* Signature V2 of S3 and GCS, and CloudFront signed URLs. */
static const char *const v2_params[] = {
    "Signature", "Expires", "AWSAccessKeyId", "GoogleAccessId", "Policy",
    "Key-Pair-Id", NULL};

static int in(const qparam *p, const char *const *list) {
    for (; *list; list++)
        if (is(p, *list)) return 1;
    return 0;
}

/* Append "tag:VALUE " to who, VALUE up to the first '/' (or %2F): the
 * key id of an X-Amz-Credential "AKID/date/region/s3/aws4_request". */
static void add_who(char *who, size_t n, const char *tag, const qparam *p) {
    size_t len = p->vlen;
    for (size_t i = 0; i < p->vlen; i++)
        if (p->value[i] == '/' ||
            (p->value[i] == '%' && i + 2 < p->vlen && p->value[i + 1] == '2' &&
             (p->value[i + 2] == 'F' || p->value[i + 2] == 'f'))) {
            len = i;
            break;
        }
    size_t used = strlen(who);
    if (used < n)
        snprintf(who + used, n - used, "%s:%.*s ", tag, (int)len, p->value);
}

char *cf__hc_stable_url(const char *url, char *who, size_t n) {
    if (n) who[0] = 0;
    size_t end = strcspn(url, "#");
    const char *qm = memchr(url, '?', end);
    size_t base = qm ? (size_t)(qm - url) : end;
    char *out = cf__malloc(end + 1);
    if (!out) return NULL;
    memcpy(out, url, base);
    out[base] = 0;
    if (!qm) return out;
    qparam q[QMAX];
    size_t nq = 0;
    const char *s = qm + 1, *qend = url + end;
    while (s < qend) {
        const char *amp = memchr(s, '&', (size_t)(qend - s));
        const char *e = amp ? amp : qend;
        if (nq == QMAX) { /* absurd query: keep it whole, drop nothing */
            memcpy(out + base, qm, (size_t)(qend - qm));
            out[end] = 0;
            return out;
        }
        const char *eq = memchr(s, '=', (size_t)(e - s));
        q[nq].name = s;
        q[nq].nlen = (size_t)((eq ? eq : e) - s);
        q[nq].value = eq ? eq + 1 : e;
        q[nq].vlen = (size_t)(e - q[nq].value);
        nq++;
        s = e + 1;
    }
    /* A parameter is dropped only as part of a signing scheme the query
     * really uses, so that a plain server's own "st=" or "sp=" (which may
     * select what it serves) still tells two objects apart. */
    int sas = has(q, nq, "sig") &&
              (has(q, nq, "sv") || has(q, nq, "se") || has(q, nq, "sp"));
    int amz = has(q, nq, "X-Amz-Signature") || has(q, nq, "X-Amz-Credential");
    int goog = has(q, nq, "X-Goog-Signature") || has(q, nq, "X-Goog-Credential");
    int v2 = has(q, nq, "Signature") &&
             (has(q, nq, "Expires") || has(q, nq, "Key-Pair-Id"));
    size_t o = base;
    for (size_t i = 0; i < nq; i++) {
        const qparam *p = &q[i];
        int drop = (sas && in(p, sas_params)) || (amz && starts(p, "X-Amz-")) ||
                   (goog && starts(p, "X-Goog-")) || (v2 && in(p, v2_params));
        if (amz && is(p, "X-Amz-Credential")) add_who(who, n, "amz", p);
        if (goog && is(p, "X-Goog-Credential")) add_who(who, n, "goog", p);
        if (v2 && (is(p, "AWSAccessKeyId") || is(p, "GoogleAccessId") ||
                   is(p, "Key-Pair-Id")))
            add_who(who, n, "v2", p);
        if (sas && is(p, "skoid")) add_who(who, n, "sas-oid", p);
        if (drop) continue;
        out[o] = o == base ? '?' : '&';
        o++;
        memcpy(out + o, p->name, (size_t)(p->value + p->vlen - p->name));
        o += (size_t)(p->value + p->vlen - p->name);
    }
    if (sas) {
        size_t used = strlen(who);
        if (used < n) snprintf(who + used, n - used, "sas ");
    }
    out[o] = 0;
    return out;
}

int cf__hc_key_of(const cf__src *src, cf__hc_key *out) {
    char who[600], qwho[600];
    char *url = cf__src_cache_identity(src, who, sizeof who);
    if (!url) return 0;
    char *stable = cf__hc_stable_url(url, qwho, sizeof qwho);
    free(url);
    if (!stable) return 0;
    /* Fields separated by NUL bytes, which none of them can hold. */
    static const char tag[] = "cogfeed header cache key 2";
    size_t a = sizeof tag, b = strlen(who) + 1, c = strlen(stable) + 1,
           d = strlen(qwho) + 1;
    uint8_t *m = cf__malloc(a + b + c + d);
    if (m) {
        memcpy(m, tag, a);
        memcpy(m + a, who, b);
        memcpy(m + a + b, stable, c);
        memcpy(m + a + b + c, qwho, d);
        SHA256(m, a + b + c + d, out->b);
        free(m);
    }
    free(stable);
    return m != NULL;
}
