/*
 * auth_s3.c - s3://bucket/key: endpoint choice (virtual-hosted AWS, or
 * path-style on a custom AWS_ENDPOINT_URL for S3-compatible stores) and
 * AWS Signature Version 4 over each GET, with credentials from the standard
 * AWS_* environment variables.
 */
#include "auth_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <openssl/crypto.h>

/* SHA-256 of an empty body: a GET has none, and signing the real hash
 * (rather than UNSIGNED-PAYLOAD) is accepted by every S3 implementation. */
static const char EMPTY_SHA256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

cf_status cf__sigv4_signature(const char *secret, const char *date8,
                              const char *amzdate, const char *region,
                              const char *service, const char *method,
                              const char *path, const char *query,
                              const char *signed_hdrs,
                              const char *signed_names,
                              const char *payload_hash, char sig_hex[65]) {
    cf__sbuf cr = {0}, sts = {0}, k = {0};
    cf__sb_printf(&cr, "%s\n%s\n%s\n%s\n%s\n%s", method, path, query,
                  signed_hdrs, signed_names, payload_hash);
    char cr_hash[65] = "";
    if (!cr.oom) cf__sha256_hex(cr.s, cr.len, cr_hash);
    cf__sb_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
                  amzdate, date8, region, service, cr_hash);
    cf__sb_printf(&k, "AWS4%s", secret);
    cf_status st = CF_E_NOMEM;
    if (!cr.oom && !sts.oom && !k.oom) {
        unsigned char kd[32], kr[32], ks[32], kk[32], sig[32];
        cf__hmac_sha256(k.s, k.len, date8, strlen(date8), kd);
        cf__hmac_sha256(kd, 32, region, strlen(region), kr);
        cf__hmac_sha256(kr, 32, service, strlen(service), ks);
        cf__hmac_sha256(ks, 32, "aws4_request", 12, kk);
        cf__hmac_sha256(kk, 32, sts.s, sts.len, sig);
        cf__hex(sig, 32, sig_hex);
        OPENSSL_cleanse(kd, sizeof kd);
        OPENSSL_cleanse(kr, sizeof kr);
        OPENSSL_cleanse(ks, sizeof ks);
        OPENSSL_cleanse(kk, sizeof kk);
        st = CF_OK;
    }
    if (k.s) OPENSSL_cleanse(k.s, k.len);
    cf__sb_free(&cr);
    cf__sb_free(&sts);
    cf__sb_free(&k);
    return st;
}

static int truthy(const char *v) {
    return v && (!strcasecmp(v, "YES") || !strcasecmp(v, "TRUE") ||
                 !strcmp(v, "1"));
}

static const char *nonempty(const char *v) { return v && *v ? v : NULL; }

cf_status cf__auth_s3_init(cf__auth *a, const char *url, cf__auth_getenv ge,
                           void *user, cf_error *err) {
    const char *name = a->redacted;
    const char *p, *key;
    size_t blen;
    cf_status st = cf__auth_split_url(url, 255, "-_.", "s3://bucket/key", "bucket", name,
                                      &p, &blen, &key, err);
    CF__TRY(st);
    int dotted = memchr(p, '.', blen) != NULL;

    const char *region = nonempty(ge("AWS_REGION", user));
    if (!region) region = nonempty(ge("AWS_DEFAULT_REGION", user));
    if (!region) region = "us-east-1";
    size_t rlen = strlen(region);
    if (rlen > 64 || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
                         rlen)
        return cf__err(err, CF_E_ARG, "%s: AWS_REGION is not a region name",
                       name);
    a->region = cf__strdup(region);

    /* boto3 honours the S3-specific variable before the general one. */
    const char *ep = nonempty(ge("AWS_ENDPOINT_URL_S3", user));
    if (!ep) ep = nonempty(ge("AWS_ENDPOINT_URL", user));
    cf__sbuf u = {0};
    if (ep) {
        if (!cf__auth_endpoint_ok(ep))
            return cf__err(err, CF_E_ARG,
                           "%s: AWS_ENDPOINT_URL must be an http(s):// URL "
                           "without query", name);
        cf__sb_put(&u, ep);
        cf__sb_object(&u, p, blen, key);
    } else if (dotted) {
        /* A dotted bucket breaks the wildcard TLS certificate of the
         * virtual-hosted form: address it path-style instead. */
        cf__sb_printf(&u, "https://s3.%s.amazonaws.com", region);
        cf__sb_object(&u, p, blen, key);
    } else {
        cf__sb_printf(&u, "https://%.*s.s3.%s.amazonaws.com/", (int)blen, p,
                      region);
        cf__sb_uri(&u, key, strlen(key), 1);
    }
    a->http_url = cf__sb_take(&u);
    if (!a->http_url || !a->region)
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", name);

    if (truthy(ge("AWS_NO_SIGN_REQUEST", user))) return CF_OK;
    const char *id = nonempty(ge("AWS_ACCESS_KEY_ID", user));
    const char *secret = nonempty(ge("AWS_SECRET_ACCESS_KEY", user));
    const char *token = nonempty(ge("AWS_SESSION_TOKEN", user));
    if (!id && !secret)
        return cf__err(err, CF_E_AUTH,
                       "%s: no AWS credentials: set AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY, or AWS_NO_SIGN_REQUEST=YES for "
                       "a public bucket", name);
    if (!id || !secret)
        return cf__err(err, CF_E_AUTH, "%s: %s is set but %s is not", name,
                       id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                       id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
    if (strlen(id) > 256 || strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "abcdefghijklmnopqrstuvwxyz0123456789") !=
                                strlen(id))
        return cf__err(err, CF_E_AUTH,
                       "%s: AWS_ACCESS_KEY_ID is not an access key id", name);
    if (strlen(secret) > CF__AUTH_MAX_SECRET || !cf__auth_header_safe(secret))
        return cf__err(err, CF_E_AUTH,
                       "%s: AWS_SECRET_ACCESS_KEY holds control characters "
                       "or is too long", name);
    if (token && (strlen(token) > 4 * CF__AUTH_MAX_SECRET ||
                  !cf__auth_header_safe(token)))
        return cf__err(err, CF_E_AUTH,
                       "%s: AWS_SESSION_TOKEN holds control characters or is "
                       "too long", name);
    a->access_key = cf__strdup(id);
    a->secret = cf__strdup(secret);
    a->token = token ? cf__strdup(token) : NULL;
    if (!a->access_key || !a->secret || (token && !a->token))
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
    a->s3_signed = 1;
    return CF_OK;
}

/* SigV4 over one request: its canonical query and the body's hash. */
static cf_status s3_sign(cf__auth *a, time_t now, const char *method, const char *range,
                         const char *if_match, const char *ius, const char *query,
                         const char *payload, struct curl_slist **hdrs, cf_error *err) {
    struct tm tm;
    gmtime_r(&now, &tm);
    char amzdate[32], date8[16];
    strftime(amzdate, sizeof amzdate, "%Y%m%dT%H%M%SZ", &tm);
    strftime(date8, sizeof date8, "%Y%m%d", &tm);

    /* Canonical headers in sorted name order.  Range and the conditions
     * are signed too, so that a captured request cannot be replayed for
     * other bytes or another version of the object. */
    cf__sbuf ch = {0}, names = {0};
    cf__sb_printf(&ch, "host:%s\n", a->host);
    cf__sb_put(&names, "host");
    if (if_match) {
        cf__sb_printf(&ch, "if-match:%s\n", if_match);
        cf__sb_put(&names, ";if-match");
    }
    if (ius) {
        cf__sb_printf(&ch, "if-unmodified-since:%s\n", ius);
        cf__sb_put(&names, ";if-unmodified-since");
    }
    if (range) {
        cf__sb_printf(&ch, "range:%s\n", range);
        cf__sb_put(&names, ";range");
    }
    cf__sb_printf(&ch, "x-amz-content-sha256:%s\nx-amz-date:%s\n",
                  payload, amzdate);
    cf__sb_put(&names, ";x-amz-content-sha256;x-amz-date");
    if (a->token) {
        cf__sb_printf(&ch, "x-amz-security-token:%s\n", a->token);
        cf__sb_put(&names, ";x-amz-security-token");
    }
    char sig[65];
    cf_status st = CF_E_NOMEM;
    if (!ch.oom && !names.oom &&
        cf__sigv4_signature(a->secret, date8, amzdate, a->region, "s3",
                            method, a->path, query, ch.s, names.s, payload,
                            sig) == CF_OK) {
        int ok = cf__auth_add_hdrf(hdrs, "x-amz-date: %s", amzdate) &&
                 cf__auth_add_hdrf(hdrs, "x-amz-content-sha256: %s",
                                   payload) &&
                 (!a->token || cf__auth_add_hdrf(hdrs,
                                                 "x-amz-security-token: %s",
                                                 a->token)) &&
                 cf__auth_add_hdrf(hdrs,
                                   "Authorization: AWS4-HMAC-SHA256 "
                                   "Credential=%s/%s/%s/s3/aws4_request, "
                                   "SignedHeaders=%s, Signature=%s",
                                   a->access_key, date8, a->region, names.s,
                                   sig);
        if (ok) st = CF_OK;
    }
    if (ch.s) OPENSSL_cleanse(ch.s, ch.len); /* held the session token */
    cf__sb_free(&ch);
    cf__sb_free(&names);
    if (st != CF_OK)
        return cf__err(err, CF_E_NOMEM, "%s: out of memory signing request",
                       a->redacted);
    return CF_OK;
}

cf_status cf__auth_s3_sign(cf__auth *a, time_t now, const char *method,
                           const char *range, const char *if_match,
                           const char *ius, struct curl_slist **hdrs,
                           cf_error *err) {
    return s3_sign(a, now, method, range, if_match, ius, "", EMPTY_SHA256, hdrs, err);
}

cf_status cf__auth_s3_sign_req(cf__auth *a, time_t now, const cf__auth_req *r,
                               struct curl_slist **hdrs, cf_error *err) {
    /* Canonical query: names and values percent-encoded, sorted by name
     * (the caller gives them sorted), "name=" for an empty value. */
    cf__sbuf q = {0};
    for (int i = 0; i < r->nparams; i++) {
        if (i) cf__sb_put(&q, "&");
        cf__sb_uri(&q, r->names[i], strlen(r->names[i]), 0);
        cf__sb_put(&q, "=");
        cf__sb_uri(&q, r->values[i], strlen(r->values[i]), 0);
    }
    cf_status st = q.oom ? cf__err(err, CF_E_NOMEM, "%s: out of memory", a->redacted)
                         : s3_sign(a, now, r->method, NULL, NULL, NULL, q.s ? q.s : "",
                                   r->body_sha256 ? r->body_sha256 : EMPTY_SHA256, hdrs, err);
    cf__sb_free(&q);
    return st;
}
