/*
 * auth_int.h - what auth.c, auth_s3.c and auth_azure.c share: the cf__auth
 * struct, a growable string, and the crypto helpers (SHA-256, HMAC,
 * base64 over OpenSSL libcrypto).  Private to those files.
 */
#ifndef CF_IO_AUTH_INT_H
#define CF_IO_AUTH_INT_H

#include "auth.h"

#include <stdatomic.h>

/* Caps on what the environment or a URL may hand us; all far above real
 * values, so that a hostile value cannot make us allocate without bound. */
#define CF__AUTH_MAX_URL 8192
#define CF__AUTH_MAX_SECRET 4096

struct cf__auth {
    _Atomic int refs;  /* cf__auth_ref / cf__auth_free */
    cf__auth_kind kind;
    char *http_url;   /* what to GET; may hold a SAS query */
    char *redacted;   /* user's URL form, no query or secrets */
    char *host;       /* Host header exactly as curl sends it */
    char *path;       /* URI-encoded path as sent (canonical for signing) */
    int has_query;    /* http_url carries a query (SAS, or user's own) */

    /* S3 */
    int s3_signed;
    char *access_key, *secret, *token, *region;

    /* Azure */
    int az_shared_key;
    char *account;
    unsigned char key[128];
    size_t key_len;

    /* GCS */
    char *bearer;
};

/* Growable NUL-terminated string; `oom` latches the first failure so that
 * callers check once at the end. */
typedef struct cf__sbuf {
    char *s;
    size_t len, cap;
    int oom;
} cf__sbuf;

void cf__sb_putn(cf__sbuf *b, const char *s, size_t n);
void cf__sb_put(cf__sbuf *b, const char *s);
void cf__sb_printf(cf__sbuf *b, const char *fmt, ...) CF__PRINTF(2, 3);
/* Percent-encode like cf__uri_encode, appending. */
void cf__sb_uri(cf__sbuf *b, const char *in, size_t len, int keep_slash);
/* The path-style object URL after the endpoint already in `b`: its
 * trailing slashes dropped, then "/STORE/" and KEY percent-encoded (S3
 * endpoints, Azure and GCS all address objects this way). */
void cf__sb_object(cf__sbuf *b, const char *store, size_t slen,
                   const char *key);
/* Take ownership of the string (NULL after an allocation failure). */
char *cf__sb_take(cf__sbuf *b);
void cf__sb_free(cf__sbuf *b);

/* Append a formatted "Name: value" line to a curl header list (its
 * formatted copy is wiped); 0 on allocation failure, the list unchanged. */
int cf__auth_add_hdrf(struct curl_slist **hdrs, const char *fmt, ...)
    CF__PRINTF(2, 3);

void cf__hmac_sha256(const void *key, size_t klen, const void *data,
                     size_t dlen, unsigned char out[32]);
void cf__hex(const unsigned char *in, size_t n, char *out);
/* Strict base64 decode; returns the decoded length or -1. */
long cf__b64_decode(const char *in, unsigned char *out, size_t outcap);
/* Base64 encode; out needs 4*ceil(n/3)+1 bytes. */
void cf__b64_encode(const unsigned char *in, size_t n, char *out);

/* True when `v` is safe in an HTTP header value (no controls, no CR/LF). */
int cf__auth_header_safe(const char *v);

/* True when `ep` can serve as a store's endpoint: an http(s):// URL of at
 * most 1024 bytes, without query, fragment or control characters. */
int cf__auth_endpoint_ok(const char *ep);

/* Split "s3://STORE/KEY" (or gs://, az://): STORE non-empty, at most
 * `max_store` bytes of letters, digits and `extra`; KEY non-empty, at most
 * 1024 bytes, without "." or ".." segments (HTTP clients would rewrite
 * them).  `form` names the expected form in the error ("s3://bucket/key"),
 * `what` the store ("bucket"), `name` the redacted URL for messages.
 * On success *store, *store_len and *key are set. */
cf_status cf__auth_split_url(const char *url, size_t max_store, const char *extra,
                             const char *form, const char *what, const char *name,
                             const char **store, size_t *store_len,
                             const char **key, cf_error *err);

/* Backends: fill `a` from the parsed URL and environment. */
cf_status cf__auth_s3_init(cf__auth *a, const char *url, cf__auth_getenv ge,
                           void *user, cf_error *err);
cf_status cf__auth_s3_sign(cf__auth *a, time_t now, const char *method,
                           const char *range, const char *if_match,
                           const char *ius, struct curl_slist **hdrs,
                           cf_error *err);
cf_status cf__auth_s3_sign_req(cf__auth *a, time_t now, const cf__auth_req *r,
                               struct curl_slist **hdrs, cf_error *err);
cf_status cf__auth_az_sign_req(cf__auth *a, time_t now, const cf__auth_req *r,
                               struct curl_slist **hdrs, cf_error *err);
cf_status cf__auth_az_init(cf__auth *a, const char *url, int https_form,
                           cf__auth_getenv ge, void *user, cf_error *err);
cf_status cf__auth_az_sign(cf__auth *a, time_t now, const char *method,
                           const char *range, const char *if_match,
                           const char *ius, struct curl_slist **hdrs,
                           cf_error *err);

/* Split "scheme://authority/rest": host_out gets the Host header value
 * curl would send (userinfo and default port dropped), path_out the path
 * with its leading '/' (or "/" when empty), without query.  Returns 0 on a
 * malformed URL. */
int cf__auth_split_http(const char *url, char **host_out, char **path_out,
                        int *has_query);

#endif
