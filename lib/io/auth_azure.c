/*
 * auth_azure.c - Azure Blob: az://container/blob and
 * https://ACCOUNT.blob.core.windows.net/... URLs, credentials from
 * AZURE_STORAGE_* (account + SAS token or access key, or a connection
 * string, Azurite's UseDevelopmentStorage=true included), and Shared Key
 * signing of each GET.
 */
#include "auth_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <openssl/crypto.h>

/* A service version every Azure Blob endpoint and Azurite accept. */
#define AZ_VERSION "2021-08-06"

/* Azurite's documented development account (public, not a secret). */
#define DEV_ACCOUNT "devstoreaccount1"
#define DEV_KEY                                                            \
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZ" \
    "FPTOtr/KBHBeksoGMGw=="
#define DEV_BLOB_ENDPOINT "http://127.0.0.1:10000/" DEV_ACCOUNT

/* Parsed connection string; pointers into `buf`. */
typedef struct conn_str {
    char *buf;
    const char *account, *key, *endpoint, *sas, *protocol, *suffix;
    int dev;
} conn_str;

static cf_status parse_conn(const char *s, conn_str *c, const char *name,
                            cf_error *err) {
    memset(c, 0, sizeof *c);
    if (strlen(s) > CF__AUTH_MAX_URL || !cf__auth_header_safe(s))
        return cf__err(err, CF_E_ARG,
                       "%s: AZURE_STORAGE_CONNECTION_STRING is malformed",
                       name);
    c->buf = cf__strdup(s);
    if (!c->buf) return cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
    for (char *tok = c->buf; tok && *tok;) {
        char *next = strchr(tok, ';');
        if (next) *next++ = 0;
        while (*tok == ' ') tok++;
        char *eq = strchr(tok, '=');
        if (*tok && !eq) {
            /* No key=value: name the key only, the token may be secret. */
            return cf__err(err, CF_E_ARG,
                           "%s: AZURE_STORAGE_CONNECTION_STRING has an entry "
                           "without '='", name);
        }
        if (eq) {
            *eq = 0;
            const char *k = tok, *v = eq + 1;
            if (!strcasecmp(k, "AccountName")) c->account = v;
            else if (!strcasecmp(k, "AccountKey")) c->key = v;
            else if (!strcasecmp(k, "BlobEndpoint")) c->endpoint = v;
            else if (!strcasecmp(k, "SharedAccessSignature")) c->sas = v;
            else if (!strcasecmp(k, "DefaultEndpointsProtocol")) c->protocol = v;
            else if (!strcasecmp(k, "EndpointSuffix")) c->suffix = v;
            else if (!strcasecmp(k, "UseDevelopmentStorage"))
                c->dev = !strcasecmp(v, "true");
            /* Other services' endpoints (Queue, Table, File) are ignored. */
        }
        tok = next;
    }
    if (c->dev) {
        if (!c->account) c->account = DEV_ACCOUNT;
        if (!c->key && !c->sas) c->key = DEV_KEY;
        if (!c->endpoint) c->endpoint = DEV_BLOB_ENDPOINT;
    }
    return CF_OK;
}

static int valid_account(const char *s, size_t n) {
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-') return 0;
    return 1;
}

/* The Blob endpoints of the public cloud and of the sovereign clouds
 * (Azure US Government, Azure China): the only hosts that credentials from
 * the variables go to when the configuration names no endpoint. */
static const char *const AZ_CLOUD_SUFFIXES[] = {
    ".blob.core.windows.net", ".blob.core.usgovcloudapi.net",
    ".blob.core.chinacloudapi.cn"};

/* Scheme and Host header (default port dropped) of u equal those of v. */
static int same_origin(const char *u, const char *v) {
    char *hu = NULL, *pu = NULL, *hv = NULL, *pv = NULL;
    int ok = cf__auth_split_http(u, &hu, &pu, NULL) == 1 &&
             cf__auth_split_http(v, &hv, &pv, NULL) == 1 &&
             !strncasecmp(u, v, 5) && !strcasecmp(hu, hv);
    free(hu);
    free(pu);
    free(hv);
    free(pv);
    return ok;
}

/* May credentials for `account` (NULL: none named) go to the
 * https://ACCOUNT.blob.core.<suffix>/... URL `url`?  A URL list may come
 * from someone hostile: a look-alike host (victim.blob.core.evil.example),
 * plain http, or another account's endpoint (an attacker can own a real
 * Azure account and read its logs) would collect a SAS or a Shared Key
 * signature.  So: when the configuration names the endpoint (BlobEndpoint,
 * or DefaultEndpointsProtocol / EndpointSuffix of a connection string),
 * exactly that scheme and host; otherwise https to ACCOUNT plus one of the
 * clouds' suffixes, ACCOUNT being the configured account. */
static int az_url_trusted(const char *url, const char *url_acct, size_t alen,
                          const char *account, const conn_str *cs, int have_cs) {
    if (have_cs && cs->endpoint && *cs->endpoint)
        return same_origin(url, cs->endpoint);
    if (!account || strlen(account) != alen || strncasecmp(account, url_acct, alen))
        return 0;
    if (have_cs && (cs->suffix || cs->protocol)) {
        cf__sbuf ep = {0};
        cf__sb_printf(&ep, "%s://%s.blob.%s", cs->protocol ? cs->protocol : "https",
                      account, cs->suffix ? cs->suffix : "core.windows.net");
        int ok = !ep.oom && same_origin(url, ep.s);
        cf__sb_free(&ep);
        return ok;
    }
    if (strncasecmp(url, "https://", 8)) return 0;
    char *host = NULL, *path = NULL;
    int ok = 0;
    if (cf__auth_split_http(url, &host, &path, NULL) == 1 && strlen(host) > alen &&
        !strncasecmp(host, url_acct, alen))
        for (size_t i = 0; i < sizeof AZ_CLOUD_SUFFIXES / sizeof *AZ_CLOUD_SUFFIXES; i++)
            ok |= !strcasecmp(host + alen, AZ_CLOUD_SUFFIXES[i]);
    free(host);
    free(path);
    return ok;
}

/* The credentials of one URL: a connection string's, or the separate
 * variables'; an empty one counts as unset. */
typedef struct az_creds {
    const char *account, *key, *sas;
} az_creds;

static void az_pick_creds(cf__auth_getenv ge, void *user, const conn_str *cs,
                          int have_cs, az_creds *c) {
    if (have_cs) {
        /* A connection string is complete on its own, as in Azure's SDKs:
         * mixing it with the separate variables would be ambiguous. */
        c->account = cs->account;
        c->key = cs->key;
        c->sas = cs->sas;
    } else {
        c->account = ge("AZURE_STORAGE_ACCOUNT", user);
        c->key = ge("AZURE_STORAGE_ACCESS_KEY", user);
        c->sas = ge("AZURE_STORAGE_SAS_TOKEN", user);
    }
    if (c->account && !*c->account) c->account = NULL;
    if (c->key && !*c->key) c->key = NULL;
    if (c->sas && !*c->sas) c->sas = NULL;
}

/* az://container/blob: the blob's URL on the connection string's
 * BlobEndpoint, or on the account's endpoint. */
static cf_status az_container_url(const char *url, const char *name, const conn_str *cs,
                                  int have_cs, const char *account, cf__sbuf *u,
                                  cf_error *err) {
    /* Container names: up to 63 letters, digits and dashes, or $root. */
    const char *p, *blob;
    size_t clen;
    cf_status st = cf__auth_split_url(url, 63, "-$", "az://container/blob", "container",
                                      name, &p, &clen, &blob, err);
    CF__TRY(st);
    if (account && !valid_account(account, strlen(account)))
        return cf__err(err, CF_E_ARG, "%s: storage account name is not "
                       "valid", name);
    const char *ep = have_cs ? cs->endpoint : NULL;
    if (ep && *ep) {
        if (!cf__auth_endpoint_ok(ep))
            return cf__err(err, CF_E_ARG, "%s: BlobEndpoint must be an "
                           "http(s):// URL without query", name);
        cf__sb_put(u, ep);
    } else if (account) {
        const char *proto = have_cs && cs->protocol ? cs->protocol : "https";
        const char *suffix = have_cs && cs->suffix ? cs->suffix
                                                  : "core.windows.net";
        if ((strcasecmp(proto, "https") && strcasecmp(proto, "http")) ||
            strspn(suffix, "abcdefghijklmnopqrstuvwxyz"
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
                strlen(suffix) || strlen(suffix) > 255)
            return cf__err(err, CF_E_ARG, "%s: connection string has an "
                           "invalid DefaultEndpointsProtocol or "
                           "EndpointSuffix", name);
        cf__sb_printf(u, "%s://%s.blob.%s", proto, account, suffix);
    } else
        return cf__err(err, CF_E_ARG,
                       "%s: no storage account: set AZURE_STORAGE_ACCOUNT "
                       "or AZURE_STORAGE_CONNECTION_STRING", name);
    cf__sb_object(u, p, clen, blob);
    return CF_OK;
}

/* https://ACCOUNT.blob.core.windows.net/container/blob: the URL as given,
 * a->account from its host; the credentials are dropped (c->key, c->sas)
 * unless the URL is where they belong. */
static cf_status az_https_url(cf__auth *a, const char *url, const char *name,
                              const conn_str *cs, int have_cs, az_creds *c,
                              cf__sbuf *u, cf_error *err) {
    /* https://ACCOUNT.blob.core.windows.net/container/blob: the path is
     * already a URL path, used as given. */
    const char *h = strstr(url, "://") + 3;
    size_t alen = strcspn(h, ".");
    const char *path = h + strcspn(h, "/?#");
    if (!valid_account(h, alen) || *path != '/' || !path[1] ||
        path[1] == '/' || path[1] == '?')
        return cf__err(err, CF_E_ARG, "%s: expected https://ACCOUNT.blob."
                       "core.windows.net/container/blob", name);
    int url_has_query = strchr(url, '?') != NULL;
    /* Credentials go only where they belong (az_url_trusted); a query
     * in the URL is the user's own SAS: add nothing. */
    if (url_has_query || !az_url_trusted(url, h, alen, c->account, cs, have_cs))
        c->key = c->sas = NULL;
    c->account = NULL;
    cf__sb_put(u, url);
    cf__sbuf acc = {0};
    cf__sb_putn(&acc, h, alen);
    a->account = cf__sb_take(&acc);
    if (!a->account)
        return cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
    return CF_OK;
}

/* The SAS appended to the URL, or the shared key decoded for signing. */
static cf_status az_add_creds(cf__auth *a, const char *name, const az_creds *c,
                              cf__sbuf *u, cf_error *err) {
    const char *sas = c->sas, *key = c->key;
    if (sas) {
        while (*sas == '?') sas++;
        if (!*sas || strlen(sas) > CF__AUTH_MAX_URL || strpbrk(sas, " #") ||
            !cf__auth_header_safe(sas))
            return cf__err(err, CF_E_AUTH, "%s: SAS token is malformed", name);
        cf__sb_put(u, "?");
        cf__sb_put(u, sas);
    } else if (key) {
        if (!a->account)
            return cf__err(err, CF_E_AUTH, "%s: an access key needs the "
                           "storage account name (AZURE_STORAGE_ACCOUNT or "
                           "AccountName)", name);
        /* cf__b64_decode refuses keys longer than the buffer */
        long n = cf__b64_decode(key, a->key, sizeof a->key);
        if (n <= 0)
            return cf__err(err, CF_E_AUTH, "%s: storage access key is not "
                           "valid base64", name);
        a->key_len = (size_t)n;
        a->az_shared_key = 1;
    }
    return CF_OK;
}

cf_status cf__auth_az_init(cf__auth *a, const char *url, int https_form,
                           cf__auth_getenv ge, void *user, cf_error *err) {
    const char *name = a->redacted;
    const char *cs_env = ge("AZURE_STORAGE_CONNECTION_STRING", user);
    conn_str cs = {0};
    int have_cs = cs_env && *cs_env;
    cf_status st = CF_OK;
    if (have_cs && (st = parse_conn(cs_env, &cs, name, err)) != CF_OK) {
        free(cs.buf);
        return st;
    }
    az_creds c;
    az_pick_creds(ge, user, &cs, have_cs, &c);
    cf__sbuf u = {0};
    st = https_form ? az_https_url(a, url, name, &cs, have_cs, &c, &u, err)
                    : az_container_url(url, name, &cs, have_cs, c.account, &u, err);
    if (st == CF_OK && c.account) {
        a->account = cf__strdup(c.account);
        if (!a->account) st = cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
    }
    if (st == CF_OK) st = az_add_creds(a, name, &c, &u, err);
    if (st == CF_OK) {
        a->http_url = cf__sb_take(&u);
        if (!a->http_url) st = cf__err(err, CF_E_NOMEM, "%s: out of memory", name);
    }
    cf__sb_free(&u);
    if (cs.buf) {
        OPENSSL_cleanse(cs.buf, strlen(cs_env));
        free(cs.buf);
    }
    return st;
}

static void rfc1123(time_t now, char out[40]) {
    static const char *const wd[] = {"Sun", "Mon", "Tue", "Wed",
                                     "Thu", "Fri", "Sat"};
    static const char *const mo[] = {"Jan", "Feb", "Mar", "Apr",
                                     "May", "Jun", "Jul", "Aug",
                                     "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    gmtime_r(&now, &tm);
    /* Not strftime: %a and %b follow the locale, HTTP dates must not. */
    snprintf(out, 40, "%s, %02d %s %04d %02d:%02d:%02d GMT", wd[tm.tm_wday],
             tm.tm_mday, mo[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
             tm.tm_min, tm.tm_sec);
}

/* The string to sign; `length` the Content-Length as signed ("" for
 * none or 0), r (may be NULL) the request's parameters, which join the
 * canonicalized resource as "\nname:value" lines (names lowercase and
 * sorted, values unencoded). */
static void az_sts(cf__sbuf *b, const cf__auth *a, const char *method,
                   const char *xms_date, const char *range,
                   const char *if_match, const char *ius, const char *length,
                   const cf__auth_req *r) {
    /* VERB, Content-Encoding, -Language, -Length, -MD5, -Type, Date,
     * If-Modified-Since, If-Match, If-None-Match, If-Unmodified-Since,
     * Range, then the x-ms- headers and the resource.  The resource of a
     * path-style (Azurite) URL names the account twice: "/account" +
     * "/account/container/blob", as Azure's SDKs and Azurite compute it. */
    cf__sb_printf(b,
                  "%s\n\n\n%s\n\n\n\n\n%s\n\n%s\n%s\n"
                  "x-ms-date:%s\nx-ms-version:" AZ_VERSION "\n/%s%s",
                  method, length, if_match ? if_match : "", ius ? ius : "",
                  range ? range : "", xms_date, a->account, a->path);
    for (int i = 0; r && i < r->nparams; i++)
        cf__sb_printf(b, "\n%s:%s", r->names[i], r->values[i]);
}

char *cf__azure_string_to_sign(const cf__auth *a, const char *method,
                               const char *xms_date, const char *range,
                               const char *if_match, const char *ius) {
    if (!a->account || !a->path) return NULL;
    cf__sbuf b = {0};
    az_sts(&b, a, method, xms_date, range, if_match, ius, "", NULL);
    return cf__sb_take(&b);
}

/* The SharedKey signature: base64(HMAC-SHA256(key, string to sign)). */
static void az_signature(const void *key, size_t klen, const char *sts, size_t len,
                         char out[45]) {
    unsigned char mac[32];
    cf__hmac_sha256(key, klen, sts, len, mac);
    cf__b64_encode(mac, 32, out);
}

cf_status cf__azure_sign_string(const char *key_b64, const char *sts,
                                char *out, size_t outlen) {
    unsigned char key[128];
    if (outlen < 45) return CF_E_ARG;
    long n = cf__b64_decode(key_b64, key, sizeof key);
    if (n <= 0) return CF_E_ARG;
    az_signature(key, (size_t)n, sts, strlen(sts), out);
    OPENSSL_cleanse(key, sizeof key);
    return CF_OK;
}

static cf_status az_sign(cf__auth *a, time_t now, const char *method, const char *range,
                         const char *if_match, const char *ius, const char *length,
                         const cf__auth_req *r, struct curl_slist **hdrs, cf_error *err) {
    char date[40];
    rfc1123(now, date);
    cf__sbuf sts = {0};
    az_sts(&sts, a, method, date, range, if_match, ius, length, r);
    cf_status st = CF_E_NOMEM;
    if (!sts.oom) {
        char sig[48];
        az_signature(a->key, a->key_len, sts.s, sts.len, sig);
        if (cf__auth_add_hdrf(hdrs, "x-ms-date: %s", date) &&
            cf__auth_add_hdrf(hdrs, "x-ms-version: %s", AZ_VERSION) &&
            cf__auth_add_hdrf(hdrs, "Authorization: SharedKey %s:%s",
                              a->account, sig))
            st = CF_OK;
    }
    cf__sb_free(&sts);
    if (st != CF_OK)
        return cf__err(err, CF_E_NOMEM, "%s: out of memory signing request",
                       a->redacted);
    return CF_OK;
}

cf_status cf__auth_az_sign(cf__auth *a, time_t now, const char *method,
                           const char *range, const char *if_match,
                           const char *ius, struct curl_slist **hdrs,
                           cf_error *err) {
    return az_sign(a, now, method, range, if_match, ius, "", NULL, hdrs, err);
}

cf_status cf__auth_az_sign_req(cf__auth *a, time_t now, const cf__auth_req *r,
                               struct curl_slist **hdrs, cf_error *err) {
    char length[24] = "";
    if (r->body_len) snprintf(length, sizeof length, "%llu", (unsigned long long)r->body_len);
    return az_sign(a, now, r->method, NULL, NULL, NULL, length, r, hdrs, err);
}
