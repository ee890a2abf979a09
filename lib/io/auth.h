/*
 * auth.h - remote URL forms and request signing for object storage.
 *
 * A cf__auth turns a user-facing URL (http(s)://, s3://, az://,
 * https://ACCOUNT.blob.core.windows.net/..., gs://) plus credentials read
 * from the environment (names fixed in design.md) into the real HTTP URL to
 * GET and the headers each request needs: AWS SigV4, Azure Shared Key or
 * SAS, GCS OAuth bearer, or nothing for plain HTTP(S).  No I/O happens here;
 * the io loop calls cf__auth_sign once per request and per retry.
 *
 * Secrets (keys, tokens, SAS sig=, X-Amz-* query parameters) are kept only
 * in the handle and in what cf__auth_http_url / cf__auth_sign return; they
 * never reach cf__auth_redacted or an error message.
 *
 * Thread-safety: after cf__auth_new the handle is read-only except for
 * cf__auth_sign, which only writes into its own stack and *hdrs, so many
 * threads may sign with one handle at once.
 */
#ifndef CF_IO_AUTH_H
#define CF_IO_AUTH_H

#include "../common/common.h"

#include <curl/curl.h>
#include <time.h>

typedef struct cf__auth cf__auth;

typedef enum cf__auth_kind {
    CF_AUTH_HTTP = 0, /* plain http(s)://, no signing */
    CF_AUTH_S3 = 1,   /* SigV4, or unsigned */
    CF_AUTH_AZURE = 2,/* Shared Key, SAS, or anonymous */
    CF_AUTH_GCS = 3   /* OAuth bearer, or anonymous */
} cf__auth_kind;

/* Parse a remote URL, read credentials from the environment, compute the
 * real HTTP URL to GET.  CF_E_ARG for a malformed or unsupported URL or
 * inconsistent credentials (message names the redacted URL). */
cf_status cf__auth_new(const char *url, cf__auth **out, cf_error *err);

/* Same, reading variables through `getenv_fn` instead of the process
 * environment (tests; per-handle credentials).  getenv_fn returns NULL for
 * an unset variable. */
typedef const char *(*cf__auth_getenv)(const char *name, void *user);
cf_status cf__auth_new_env(const char *url, cf__auth_getenv getenv_fn,
                           void *user, cf__auth **out, cf_error *err);

/* URL to request (may hold a SAS query: secret, never print it). */
const char *cf__auth_http_url(const cf__auth *a);
/* The user's URL without userinfo, query or secrets: for messages. */
const char *cf__auth_redacted(const cf__auth *a);
cf__auth_kind cf__auth_kind_of(const cf__auth *a);
/* True when cf__auth_sign adds credentials (SigV4, Shared Key, bearer): the
 * io loop must not forward them on a redirect to another host. */
int cf__auth_has_credentials(const cf__auth *a);

/* Append auth headers for one request to *hdrs (curl_slist_append).
 * Called per request and per retry.  `method` is "GET" or "HEAD"; range is
 * the Range header value ("bytes=0-65535") or NULL; if_match the ETag sent
 * as If-Match, ius the date sent as If-Unmodified-Since, each NULL when not
 * sent.  Adds nothing for plain HTTP or anonymous access.  The caller
 * still sends Range and the conditions itself, with exactly these values.
 * CF_E_NOMEM on allocation failure (*hdrs then holds what was appended so
 * far; the caller frees it). */
cf_status cf__auth_sign(cf__auth *a, const char *method, const char *range,
                        const char *if_match, const char *ius,
                        struct curl_slist **hdrs, cf_error *err);
/* Same with an explicit time (tests: published vectors use fixed dates). */
cf_status cf__auth_sign_at(cf__auth *a, time_t now, const char *method,
                           const char *range, const char *if_match,
                           const char *ius, struct curl_slist **hdrs,
                           cf_error *err);

/* Requests that write (the object-storage uploads of upload.c): a
 * method, query parameters (names and values unencoded; at most
 * CF__AUTH_MAX_PARAMS, sorted by name by the caller) and a body of
 * `body_len` bytes whose SHA-256 is `body_sha256` (hex; S3 signs it).
 * Parameters are signed as each service wants them: S3's canonical query,
 * Azure's canonicalized resource. */
#define CF__AUTH_MAX_PARAMS 4
typedef struct cf__auth_req {
    const char *method;                 /* "PUT", "POST", "DELETE" */
    const char *names[CF__AUTH_MAX_PARAMS], *values[CF__AUTH_MAX_PARAMS];
    int nparams;
    uint64_t body_len;
    const char *body_sha256;            /* NULL: the empty body's */
} cf__auth_req;

/* The URL to send `r` to: the object's URL (with its SAS query, if any)
 * and r's parameters percent-encoded ("?uploads" for an empty value, as
 * the AWS SDKs send it).  malloc'ed; it may hold a SAS: never print it. */
char *cf__auth_req_url(const cf__auth *a, const cf__auth_req *r);
/* Append r's auth headers to *hdrs (SigV4 with the body's hash, or Azure
 * Shared Key with its length and parameters; nothing for SAS, anonymous
 * or plain HTTP).  CF_E_NOMEM as cf__auth_sign. */
cf_status cf__auth_sign_req(cf__auth *a, time_t now, const cf__auth_req *r,
                            struct curl_slist **hdrs, cf_error *err);

/* Short service error code for messages, from an error response: S3 XML
 * <Code>, Azure x-ms-error-code header (ms_error_code, may be NULL) or XML
 * <Code>.  Writes "" when none.  Only [A-Za-z0-9._-] characters are kept,
 * so a hostile body cannot inject text into messages. */
void cf__auth_error_code(const cf__auth *a, const char *body, size_t len,
                         const char *ms_error_code, char *out, size_t outlen);

/* Whether a and b address the same object: the same kind, scheme, host
 * and path (the query may differ: a signed URL and the one it signs). */
int cf__auth_same_object(const cf__auth *a, const cf__auth *b);

/* A handle is shared by reference (a re-signed object's requests in
 * flight keep the handle they were signed with): cf__auth_ref takes one
 * more, cf__auth_free drops one and frees the handle with the last. */
cf__auth *cf__auth_ref(cf__auth *a);
void cf__auth_free(cf__auth *a);

/* ---- building blocks, exposed for unit tests against published vectors */

/* AWS SigV4 over one request.  `path` is the already URI-encoded
 * canonical path, `query` the canonical query string ("" if none),
 * `signed_hdrs` the canonical headers block ("host:x\nx-amz-date:y\n",
 * sorted, lowercase names) and `signed_names` their names ("host;x-amz-
 * date").  Writes the hex signature (65 bytes with NUL) to sig_hex. */
cf_status cf__sigv4_signature(const char *secret, const char *date8,
                              const char *amzdate, const char *region,
                              const char *service, const char *method,
                              const char *path, const char *query,
                              const char *signed_hdrs,
                              const char *signed_names,
                              const char *payload_hash, char sig_hex[65]);

/* Hex SHA-256 of data (64 characters and a NUL): SigV4's hashes, and
 * the body hash an upload signs. */
void cf__sha256_hex(const void *data, size_t len, char out[65]);

/* Percent-encode `in` for an AWS canonical URI / Azure / GCS path:
 * unreserved (A-Za-z0-9-._~) kept, '/' kept when keep_slash, everything
 * else %XX (uppercase hex).  Returns a malloc'ed string or NULL. */
char *cf__uri_encode(const char *in, size_t len, int keep_slash);

/* Azure Shared Key signature: base64(HMAC-SHA256(base64decode(key),
 * string_to_sign)).  out must hold at least 45 bytes.  CF_E_ARG for a key
 * that is not valid base64. */
cf_status cf__azure_sign_string(const char *key_b64, const char *sts,
                                char *out, size_t outlen);

/* The Shared Key string-to-sign this handle would use for one request
 * (malloc'ed; tests compare it with an independent implementation). */
char *cf__azure_string_to_sign(const cf__auth *a, const char *method,
                               const char *xms_date, const char *range,
                               const char *if_match, const char *ius);

#endif
