/*
 * auth_pick.c - the front door of auth: which form a URL has and so which
 * credentials it gets (plain HTTP(S) pass-through, S3 in auth_s3.c, Azure
 * in auth_azure.c, GCS public or OAuth bearer here), signing a request,
 * the service's error codes, and freeing.  The helpers every scheme
 * shares are in auth.c.
 */
#include "auth_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

static const char *env_getenv(const char *name, void *user) {
    (void)user;
    return getenv(name);
}

/* Host ACCOUNT.blob.core.<suffix>: the Azure https form.  The host is the
 * one curl connects to: "https://acct.blob.core.windows.net@evil.example/"
 * is evil.example (user info before the '@').  Whether credentials may go
 * there is decided by auth_azure.c. */
static int is_azure_blob_host(const char *url) {
    char *host = NULL, *path = NULL;
    if (cf__auth_split_http(url, &host, &path, NULL) != 1) return 0;
    const char *dot = strchr(host, '.');
    int yes = dot && dot != host && !strncasecmp(dot, ".blob.core.", 11) &&
              dot[11] && dot[11] != ':';
    free(host);
    free(path);
    return yes;
}

/* gs://bucket/key -> https://storage.googleapis.com/bucket/key, or the
 * emulator given by STORAGE_EMULATOR_HOST (with or without a scheme). */
static cf_status gcs_init(cf__auth *a, const char *url, cf__auth_getenv ge,
                          void *user, cf_error *err) {
    /* GCS: bucket names up to 222 bytes (dotted), objects up to 1024. */
    const char *p, *key;
    size_t blen;
    cf_status st = cf__auth_split_url(url, 222, "-_.", "gs://bucket/object", "bucket",
                                      a->redacted, &p, &blen, &key, err);
    CF__TRY(st);
    const char *emu = ge("STORAGE_EMULATOR_HOST", user);
    cf__sbuf b = {0};
    if (emu && *emu) {
        if (!strstr(emu, "://")) cf__sb_put(&b, "http://");
        cf__sb_put(&b, emu);
        /* The same rule as S3 and Azure endpoints (a query or fragment
         * would swallow the bucket and key). */
        if (!b.oom && !cf__auth_endpoint_ok(b.s)) {
            cf__sb_free(&b);
            return cf__err(err, CF_E_ARG,
                           "%s: STORAGE_EMULATOR_HOST is not a host[:port] "
                           "or http(s) URL", a->redacted);
        }
    } else {
        cf__sb_put(&b, "https://storage.googleapis.com");
    }
    cf__sb_object(&b, p, blen, key);
    a->http_url = cf__sb_take(&b);
    if (!a->http_url) return cf__err(err, CF_E_NOMEM, "%s: out of memory",
                                     a->redacted);
    const char *tok = ge("GOOGLE_OAUTH_ACCESS_TOKEN", user);
    if (tok && *tok) {
        if (strlen(tok) > CF__AUTH_MAX_SECRET || !cf__auth_header_safe(tok))
            return cf__err(err, CF_E_ARG,
                           "%s: GOOGLE_OAUTH_ACCESS_TOKEN holds characters "
                           "not allowed in a header", a->redacted);
        a->bearer = cf__strdup(tok);
        if (!a->bearer)
            return cf__err(err, CF_E_NOMEM, "%s: out of memory", a->redacted);
    }
    return CF_OK;
}

cf_status cf__auth_new_env(const char *url, cf__auth_getenv ge, void *user,
                           cf__auth **out, cf_error *err) {
    *out = NULL;
    if (!url || !*url) return cf__err(err, CF_E_ARG, "empty URL");
    size_t ulen = strlen(url);
    char red[CF__NAME_MAX];
    cf__redact_url(url, red, sizeof red);
    if (ulen > CF__AUTH_MAX_URL)
        return cf__err(err, CF_E_LIMIT, "%s: URL longer than %d bytes",
                       red, CF__AUTH_MAX_URL);
    if (!cf__auth_header_safe(url))
        return cf__err(err, CF_E_ARG, "%s: URL holds control characters",
                       red);
    cf__auth *a = cf__calloc(1, sizeof *a);
    if (!a) return cf__err(err, CF_E_NOMEM, "%s: out of memory", red);
    atomic_init(&a->refs, 1);
    a->redacted = cf__strdup(red);
    if (!a->redacted) {
        free(a);
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", red);
    }
    cf_status st;
    if (!strncasecmp(url, "s3://", 5)) {
        a->kind = CF_AUTH_S3;
        st = cf__auth_s3_init(a, url, ge, user, err);
    } else if (!strncasecmp(url, "az://", 5)) {
        a->kind = CF_AUTH_AZURE;
        st = cf__auth_az_init(a, url, 0, ge, user, err);
    } else if (!strncasecmp(url, "gs://", 5)) {
        a->kind = CF_AUTH_GCS;
        st = gcs_init(a, url, ge, user, err);
    } else if (is_azure_blob_host(url)) {
        a->kind = CF_AUTH_AZURE;
        st = cf__auth_az_init(a, url, 1, ge, user, err);
    } else if (!strncasecmp(url, "http://", 7) ||
               !strncasecmp(url, "https://", 8)) {
        a->kind = CF_AUTH_HTTP;
        a->http_url = cf__strdup(url);
        st = a->http_url ? CF_OK
                         : cf__err(err, CF_E_NOMEM, "%s: out of memory", red);
    } else {
        st = cf__err(err, CF_E_ARG,
                     "%s: unsupported URL scheme (expected http://, https://, "
                     "s3://, az://, gs://)", red);
    }
    if (st == CF_OK) {
        int r = cf__auth_split_http(a->http_url, &a->host, &a->path,
                                    &a->has_query);
        if (r == 0)
            st = cf__err(err, CF_E_ARG, "%s: malformed URL", red);
        else if (r < 0)
            st = cf__err(err, CF_E_NOMEM, "%s: out of memory", red);
    }
    if (st != CF_OK) {
        cf__auth_free(a);
        return st;
    }
    *out = a;
    return CF_OK;
}

cf_status cf__auth_new(const char *url, cf__auth **out, cf_error *err) {
    return cf__auth_new_env(url, env_getenv, NULL, out, err);
}

const char *cf__auth_http_url(const cf__auth *a) { return a->http_url; }
const char *cf__auth_redacted(const cf__auth *a) { return a->redacted; }
cf__auth_kind cf__auth_kind_of(const cf__auth *a) { return a->kind; }

int cf__auth_has_credentials(const cf__auth *a) {
    return a->s3_signed || a->az_shared_key || a->bearer != NULL;
}

/* GCS: the OAuth bearer token, when there is one (reads and writes). */
static cf_status gcs_bearer(cf__auth *a, struct curl_slist **hdrs, cf_error *err) {
    if (a->bearer && !cf__auth_add_hdrf(hdrs, "Authorization: Bearer %s", a->bearer))
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", a->redacted);
    return CF_OK;
}

cf_status cf__auth_sign_at(cf__auth *a, time_t now, const char *method,
                           const char *range, const char *if_match,
                           const char *ius, struct curl_slist **hdrs,
                           cf_error *err) {
    if ((range && !cf__auth_header_safe(range)) ||
        (if_match && !cf__auth_header_safe(if_match)) ||
        (ius && !cf__auth_header_safe(ius)))
        return cf__err(err, CF_E_ARG, "%s: header value with control "
                       "characters", a->redacted);
    switch (a->kind) {
    case CF_AUTH_S3:
        if (a->s3_signed)
            return cf__auth_s3_sign(a, now, method, range, if_match, ius,
                                    hdrs, err);
        return CF_OK;
    case CF_AUTH_AZURE:
        if (a->az_shared_key)
            return cf__auth_az_sign(a, now, method, range, if_match, ius,
                                    hdrs, err);
        return CF_OK;
    case CF_AUTH_GCS:
        return gcs_bearer(a, hdrs, err);
    case CF_AUTH_HTTP:
        return CF_OK;
    }
    return CF_OK;
}

cf_status cf__auth_sign(cf__auth *a, const char *method, const char *range,
                        const char *if_match, const char *ius,
                        struct curl_slist **hdrs, cf_error *err) {
    return cf__auth_sign_at(a, time(NULL), method, range, if_match, ius, hdrs,
                            err);
}

/* Find <tag> in a body that need not be NUL-terminated. */
static const char *find_n(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    if (n > len) return NULL;
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(hay + i, needle, n)) return hay + i;
    return NULL;
}

static void copy_code(const char *s, size_t n, char *out, size_t outlen) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || c == '.' || c == '_' || c == '-') out[o++] = (char)c;
        else break; /* a code is one token; stop at anything else */
    }
    out[o] = 0;
}

void cf__auth_error_code(const cf__auth *a, const char *body, size_t len,
                         const char *ms_error_code, char *out, size_t outlen) {
    (void)a;
    if (!out || !outlen) return;
    out[0] = 0;
    if (ms_error_code) {
        while (*ms_error_code == ' ') ms_error_code++;
        copy_code(ms_error_code, strlen(ms_error_code), out, outlen);
        if (out[0]) return;
    }
    if (!body || !len) return;
    const char *c = find_n(body, len, "<Code>");
    if (!c) return;
    c += 6;
    size_t rest = len - (size_t)(c - body);
    const char *e = find_n(c, rest, "</Code>");
    if (!e) return;
    size_t n = (size_t)(e - c);
    copy_code(c, n, out, outlen);
    /* Truncated or odd code: say nothing rather than something wrong. */
    if (strlen(out) != n) out[0] = 0;
}

static void free_secret(char *s) {
    if (!s) return;
    OPENSSL_cleanse(s, strlen(s));
    free(s);
}

int cf__auth_same_object(const cf__auth *a, const cf__auth *b) {
    size_t sa = strcspn(a->http_url, ":"), sb = strcspn(b->http_url, ":");
    return a->kind == b->kind && sa == sb && !strncasecmp(a->http_url, b->http_url, sa) &&
           !strcasecmp(a->host, b->host) && !strcmp(a->path, b->path);
}

cf__auth *cf__auth_ref(cf__auth *a) {
    if (a) atomic_fetch_add(&a->refs, 1);
    return a;
}

void cf__auth_free(cf__auth *a) {
    if (!a || atomic_fetch_sub(&a->refs, 1) > 1) return;
    free_secret(a->http_url); /* may hold a SAS */
    free(a->redacted);
    free(a->host);
    free(a->path);
    free(a->access_key);
    free_secret(a->secret);
    free_secret(a->token);
    free(a->region);
    free(a->account);
    free_secret(a->bearer);
    OPENSSL_cleanse(a->key, sizeof a->key);
    free(a);
}


char *cf__auth_req_url(const cf__auth *a, const cf__auth_req *r) {
    cf__sbuf u = {0};
    cf__sb_put(&u, a->http_url);
    for (int i = 0; i < r->nparams; i++) {
        cf__sb_put(&u, i == 0 && !a->has_query ? "?" : "&");
        cf__sb_uri(&u, r->names[i], strlen(r->names[i]), 0);
        if (*r->values[i]) {
            cf__sb_put(&u, "=");
            cf__sb_uri(&u, r->values[i], strlen(r->values[i]), 0);
        }
    }
    return cf__sb_take(&u);
}

cf_status cf__auth_sign_req(cf__auth *a, time_t now, const cf__auth_req *r,
                            struct curl_slist **hdrs, cf_error *err) {
    if (r->nparams < 0 || r->nparams > CF__AUTH_MAX_PARAMS)
        return cf__err(err, CF_E_ARG, "%s: %d request parameters", a->redacted, r->nparams);
    for (int i = 0; i < r->nparams; i++)
        if (!cf__auth_header_safe(r->names[i]) || !cf__auth_header_safe(r->values[i]))
            return cf__err(err, CF_E_ARG, "%s: request parameter with control characters",
                           a->redacted);
    switch (a->kind) {
    case CF_AUTH_S3:
        return a->s3_signed ? cf__auth_s3_sign_req(a, now, r, hdrs, err) : CF_OK;
    case CF_AUTH_AZURE:
        return a->az_shared_key ? cf__auth_az_sign_req(a, now, r, hdrs, err) : CF_OK;
    case CF_AUTH_GCS:
        return gcs_bearer(a, hdrs, err);
    case CF_AUTH_HTTP:
        return CF_OK;
    }
    return CF_OK;
}
