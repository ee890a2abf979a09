/*
 * test_io_auth.c - URL forms, SigV4 and Azure Shared Key signing, error
 * codes and redaction of lib/io/auth*.c.
 *
 * Expected values come from outside this code: AWS's published SigV4 test
 * suite (get-vanilla, get-vanilla-query-order-key-case, get-utf8) and the
 * S3 documentation's GET Object example; the full-request signatures were
 * computed with botocore's S3SigV4Auth, the Azure ones with Python's
 * hmac/base64 (string-to-sign per Microsoft's "Authorize with Shared Key").
 */
#include "cf_test.h"
#include "io/auth.h"
#include "io/auth_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- a private environment per test ---------------------------------- */

typedef struct env {
    const char *kv[16][2];
} env;

static const char *env_get(const char *name, void *user) {
    env *e = user;
    for (int i = 0; i < 16 && e->kv[i][0]; i++)
        if (!strcmp(e->kv[i][0], name)) return e->kv[i][1];
    return NULL;
}

static cf_status open_env(const char *url, env *e, cf__auth **a,
                          cf_error *err) {
    cf__err_clear(err);
    return cf__auth_new_env(url, env_get, e, a, err);
}

/* Headers of one signed request, joined by '\n'. */
static char *sign_join(cf__auth *a, time_t t, const char *range,
                       const char *if_match) {
    struct curl_slist *h = NULL;
    cf_error err;
    if (cf__auth_sign_at(a, t, "GET", range, if_match, NULL, &h, &err) != CF_OK)
        return NULL;
    size_t n = 1;
    for (struct curl_slist *p = h; p; p = p->next) n += strlen(p->data) + 1;
    char *s = calloc(1, n);
    for (struct curl_slist *p = h; p; p = p->next) {
        strcat(s, p->data);
        strcat(s, "\n");
    }
    curl_slist_free_all(h);
    return s;
}

static int contains(const char *hay, const char *needle) {
    return hay && strstr(hay, needle) != NULL;
}

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/* 2013-05-24T00:00:00Z, the date of the S3 documentation's examples. */
#define T_2013_05_24 ((time_t)1369353600)

/* ---- SigV4 --------------------------------------------------------- */

static void test_sigv4_vectors(void) {
    const char *secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const char *hdrs = "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n";
    char sig[65];
    /* get-vanilla */
    CHECK(cf__sigv4_signature(secret, "20150830", "20150830T123600Z",
                              "us-east-1", "service", "GET", "/", "", hdrs,
                              "host;x-amz-date", EMPTY_SHA, sig) == CF_OK);
    CHECK(!strcmp(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"));
    /* get-vanilla-query-order-key-case (query given sorted) */
    cf__sigv4_signature(secret, "20150830", "20150830T123600Z", "us-east-1",
                        "service", "GET", "/", "Param1=value1&Param2=value2",
                        hdrs, "host;x-amz-date", EMPTY_SHA, sig);
    CHECK(!strcmp(sig, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"));
    /* get-utf8: the path "/\u1234" must be encoded as AWS expects */
    char *path = cf__uri_encode("/\xe1\x88\xb4", 4, 1);
    CHECK(path && !strcmp(path, "/%E1%88%B4"));
    cf__sigv4_signature(secret, "20150830", "20150830T123600Z", "us-east-1",
                        "service", "GET", path ? path : "", "", hdrs,
                        "host;x-amz-date", EMPTY_SHA, sig);
    CHECK(!strcmp(sig, "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"));
    free(path);
    /* S3 documentation, "Example: GET Object" (Range bytes=0-9). */
    cf__sigv4_signature(
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524",
        "20130524T000000Z", "us-east-1", "s3", "GET", "/test.txt", "",
        "host:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:" EMPTY_SHA "\nx-amz-date:20130524T000000Z\n",
        "host;range;x-amz-content-sha256;x-amz-date", EMPTY_SHA, sig);
    CHECK(!strcmp(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"));
}

static void test_uri_encode(void) {
    char *s = cf__uri_encode("dir/a b+c~d/\xc3\xbc.tif", 18, 1);
    CHECK(s && !strcmp(s, "dir/a%20b%2Bc~d/%C3%BC.tif"));
    free(s);
    s = cf__uri_encode("a/b=c&d%", 8, 0);
    CHECK(s && !strcmp(s, "a%2Fb%3Dc%26d%25"));
    free(s);
    s = cf__uri_encode("", 0, 1);
    CHECK(s && !strcmp(s, ""));
    free(s);
}

static void test_s3_request(void) {
    cf__auth *a = NULL;
    cf_error err;
    /* Custom endpoint, key with space, '+', '~' and unicode, session token,
     * Range and If-Match: botocore computes the same signature. */
    env e = {{{"AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"},
              {"AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
              {"AWS_SESSION_TOKEN", "TOKEN123"},
              {"AWS_REGION", "eu-west-1"},
              {"AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"}}};
    CHECK(open_env("s3://bucket/dir/a b+c~d/\xc3\xbc.tif", &e, &a, &err) == CF_OK);
    if (!a) return;
    CHECK(cf__auth_kind_of(a) == CF_AUTH_S3);
    CHECK(cf__auth_has_credentials(a));
    CHECK(!strcmp(cf__auth_http_url(a),
                  "http://127.0.0.1:9000/bucket/dir/a%20b%2Bc~d/%C3%BC.tif"));
    char *h = sign_join(a, T_2013_05_24, "bytes=0-9", "\"abc\"");
    CHECK(contains(h, "x-amz-date: 20130524T000000Z\n"));
    CHECK(contains(h, "x-amz-content-sha256: " EMPTY_SHA "\n"));
    CHECK(contains(h, "x-amz-security-token: TOKEN123\n"));
    CHECK(contains(h, "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"
                      "20130524/eu-west-1/s3/aws4_request, SignedHeaders=host;if-match;"
                      "range;x-amz-content-sha256;x-amz-date;x-amz-security-token, "
                      "Signature=c1471c7c4e38da7835b1b60dfdec8c2835d4ba3e6ace78b71f20b64d47ff5504\n"));
    CHECK(!contains(h, "wJalrXUtnFEMI"));
    free(h);
    /* If-Unmodified-Since (sent without a strong ETag) is signed too:
     * botocore's S3SigV4Auth gives the same signature. */
    struct curl_slist *hl = NULL;
    CHECK(cf__auth_sign_at(a, T_2013_05_24, "GET", "bytes=0-9", NULL,
                           "Mon, 01 Jan 2024 00:00:00 GMT", &hl, &err) == CF_OK);
    int found = 0;
    for (struct curl_slist *p = hl; p; p = p->next)
        found |= contains(p->data, "SignedHeaders=host;if-unmodified-since;range;"
                                   "x-amz-content-sha256;x-amz-date;x-amz-security-token, "
                                   "Signature=323c62f9100c5d565e2ab50e96f080cce417be9913b0"
                                   "1931f231523bdc25db6c");
    CHECK(found);
    curl_slist_free_all(hl);
    CHECK(!strcmp(cf__auth_redacted(a), "s3://bucket/dir/a b+c~d/\xc3\xbc.tif"));
    cf__auth_free(a);

    /* Virtual-hosted AWS form; the port-less Host. */
    env e2 = {{{"AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"},
               {"AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}}};
    CHECK(open_env("s3://examplebucket/test.txt", &e2, &a, &err) == CF_OK);
    if (!a) return;
    CHECK(!strcmp(cf__auth_http_url(a),
                  "https://examplebucket.s3.us-east-1.amazonaws.com/test.txt"));
    h = sign_join(a, T_2013_05_24, NULL, NULL);
    CHECK(contains(h, "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature="
                      "2e46714501b0d9bc603dc14b792d5c58689e101d7de843b268d12fa638eb4bda\n"));
    CHECK(!contains(h, "x-amz-security-token"));
    free(h);
    /* A second signature of the same request is identical (no state). */
    h = sign_join(a, T_2013_05_24, NULL, NULL);
    CHECK(contains(h, "2e46714501b0d9bc603dc14b792d5c58689e101d7de843b268d12fa638eb4bda"));
    free(h);
    cf__auth_free(a);
}

static void test_s3_urls(void) {
    cf__auth *a = NULL;
    cf_error err;
    env creds = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"},
                  {"AWS_DEFAULT_REGION", "ap-south-1"}}};
    CHECK(open_env("s3://my-bucket/a/b.tif", &creds, &a, &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_http_url(a),
                       "https://my-bucket.s3.ap-south-1.amazonaws.com/a/b.tif"));
    cf__auth_free(a);
    /* AWS_REGION wins over AWS_DEFAULT_REGION; dotted bucket goes
     * path-style (wildcard certificates do not cover dots). */
    env c2 = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"},
               {"AWS_REGION", "us-west-2"}, {"AWS_DEFAULT_REGION", "ap-south-1"}}};
    CHECK(open_env("s3://my.bucket/k", &c2, &a, &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_http_url(a),
                       "https://s3.us-west-2.amazonaws.com/my.bucket/k"));
    cf__auth_free(a);

    /* Unsigned: no headers at all. */
    env pub = {{{"AWS_NO_SIGN_REQUEST", "YES"}}};
    CHECK(open_env("s3://bucket/k.tif", &pub, &a, &err) == CF_OK);
    if (a) {
        CHECK(!cf__auth_has_credentials(a));
        struct curl_slist *h = NULL;
        CHECK(cf__auth_sign_at(a, T_2013_05_24, "GET", "bytes=0-1", NULL, NULL, &h,
                               &err) == CF_OK);
        CHECK(h == NULL);
        cf__auth_free(a);
    }
    /* No credentials, or half of them: a clear error at open. */
    env none = {{{NULL, NULL}}};
    CHECK(open_env("s3://bucket/k.tif", &none, &a, &err) == CF_E_AUTH);
    CHECK(a == NULL && contains(err.msg, "AWS_NO_SIGN_REQUEST"));
    env half = {{{"AWS_ACCESS_KEY_ID", "AKID"}}};
    CHECK(open_env("s3://bucket/k.tif", &half, &a, &err) == CF_E_AUTH);
    CHECK(contains(err.msg, "AWS_SECRET_ACCESS_KEY is not"));

    /* Malformed forms. */
    const char *bad[] = {"s3://", "s3://bucket", "s3://bucket/", "s3:///key",
                         "s3://b@d/key", "s3://bucket/a/../b", "s3://bucket/./b",
                         "s3://bucket/a/.."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(open_env(bad[i], &creds, &a, &err) == CF_E_ARG);
        CHECK(a == NULL && err.msg[0]);
        CHECK(!contains(err.msg, "S3CR3T"));
    }
    /* '..' inside a segment name is an ordinary key. */
    CHECK(open_env("s3://bucket/a..b/c", &creds, &a, &err) == CF_OK);
    cf__auth_free(a);
    env badreg = {{{"AWS_NO_SIGN_REQUEST", "YES"}, {"AWS_REGION", "us east\r\n"}}};
    CHECK(open_env("s3://bucket/k", &badreg, &a, &err) == CF_E_ARG);
    env badep = {{{"AWS_NO_SIGN_REQUEST", "YES"}, {"AWS_ENDPOINT_URL", "ftp://x"}}};
    CHECK(open_env("s3://bucket/k", &badep, &a, &err) == CF_E_ARG);
    /* A token with CR/LF would inject headers. */
    env inj = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"},
                {"AWS_SESSION_TOKEN", "tok\r\nX-Evil: 1"}}};
    CHECK(open_env("s3://bucket/k", &inj, &a, &err) == CF_E_AUTH);
    CHECK(!contains(err.msg, "tok") && !contains(err.msg, "S3CR3T"));
}

/* The Host that is signed must be the one curl sends: no port when it is
 * the scheme's default, the port otherwise. */
static void test_s3_host_port(void) {
    const char *eps[][2] = {{"http://h.example", "http://h.example:80"},
                            {"https://h.example", "https://h.example:443/"},
                            {"http://[::1]:9000", "http://[::1]:9000/"}};
    char *sig[2];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 2; j++) {
            env e = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"},
                      {"AWS_ENDPOINT_URL", eps[i][j]}}};
            cf__auth *a = NULL;
            cf_error err;
            sig[j] = NULL;
            CHECK(open_env("s3://b/k", &e, &a, &err) == CF_OK);
            if (a) sig[j] = sign_join(a, T_2013_05_24, NULL, NULL);
            cf__auth_free(a);
        }
        CHECK(sig[0] && sig[1] && !strcmp(sig[0], sig[1]));
        free(sig[0]);
        free(sig[1]);
    }
    /* A different port is a different Host, hence another signature. */
    env e1 = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"},
               {"AWS_ENDPOINT_URL", "http://h.example:8080"}}};
    env e2 = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"},
               {"AWS_ENDPOINT_URL", "http://h.example"}}};
    cf__auth *a1 = NULL, *a2 = NULL;
    cf_error err;
    CHECK(open_env("s3://b/k", &e1, &a1, &err) == CF_OK);
    CHECK(open_env("s3://b/k", &e2, &a2, &err) == CF_OK);
    if (a1 && a2) {
        char *s1 = sign_join(a1, T_2013_05_24, NULL, NULL);
        char *s2 = sign_join(a2, T_2013_05_24, NULL, NULL);
        CHECK(s1 && s2 && strcmp(s1, s2) != 0);
        free(s1);
        free(s2);
    }
    cf__auth_free(a1);
    cf__auth_free(a2);
}

/* ---- Azure --------------------------------------------------------- */

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

static void test_azure_shared_key(void) {
    cf__auth *a = NULL;
    cf_error err;
    env e = {{{"AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true"}}};
    CHECK(open_env("az://mycontainer/dir/a b.tif", &e, &a, &err) == CF_OK);
    if (!a) return;
    CHECK(cf__auth_kind_of(a) == CF_AUTH_AZURE && cf__auth_has_credentials(a));
    CHECK(!strcmp(cf__auth_http_url(a),
                  "http://127.0.0.1:10000/devstoreaccount1/mycontainer/dir/a%20b.tif"));
    char *sts = cf__azure_string_to_sign(a, "GET", "Fri, 24 May 2013 00:00:00 GMT",
                                         "bytes=0-9", "\"0x8D\"", NULL);
    CHECK(sts && !strcmp(sts, "GET\n\n\n\n\n\n\n\n\"0x8D\"\n\n\nbytes=0-9\n"
                              "x-ms-date:Fri, 24 May 2013 00:00:00 GMT\n"
                              "x-ms-version:2021-08-06\n"
                              "/devstoreaccount1/devstoreaccount1/mycontainer/dir/a%20b.tif"));
    char sig[64];
    CHECK(sts && cf__azure_sign_string(DEV_KEY, sts, sig, sizeof sig) == CF_OK);
    CHECK(!strcmp(sig, "M/a2MLIxudkrDrt/Qmn38SMoYbD9sSem1O43oTghDjE="));
    free(sts);
    /* If-Unmodified-Since has its own line, after If-None-Match. */
    sts = cf__azure_string_to_sign(a, "GET", "Fri, 24 May 2013 00:00:00 GMT", "bytes=0-9",
                                   NULL, "Mon, 01 Jan 2024 00:00:00 GMT");
    CHECK(sts && !strcmp(sts, "GET\n\n\n\n\n\n\n\n\n\nMon, 01 Jan 2024 00:00:00 GMT\n"
                              "bytes=0-9\nx-ms-date:Fri, 24 May 2013 00:00:00 GMT\n"
                              "x-ms-version:2021-08-06\n"
                              "/devstoreaccount1/devstoreaccount1/mycontainer/dir/a%20b.tif"));
    free(sts);
    char *h = sign_join(a, T_2013_05_24, "bytes=0-9", "\"0x8D\"");
    CHECK(contains(h, "x-ms-date: Fri, 24 May 2013 00:00:00 GMT\n"));
    CHECK(contains(h, "x-ms-version: 2021-08-06\n"));
    CHECK(contains(h, "Authorization: SharedKey devstoreaccount1:"
                      "M/a2MLIxudkrDrt/Qmn38SMoYbD9sSem1O43oTghDjE=\n"));
    free(h);
    CHECK(!strcmp(cf__auth_redacted(a), "az://mycontainer/dir/a b.tif"));
    cf__auth_free(a);

    /* Account + key variables, the public endpoint. */
    env e2 = {{{"AZURE_STORAGE_ACCOUNT", "myaccount"},
               {"AZURE_STORAGE_ACCESS_KEY", DEV_KEY}}};
    CHECK(open_env("az://mycontainer/x.tif", &e2, &a, &err) == CF_OK);
    if (!a) return;
    CHECK(!strcmp(cf__auth_http_url(a),
                  "https://myaccount.blob.core.windows.net/mycontainer/x.tif"));
    h = sign_join(a, T_2013_05_24, NULL, NULL);
    CHECK(contains(h, "Authorization: SharedKey myaccount:"
                      "SQsKMNNFXCop27sQFD6nY9vxZNBZSvT/FydpgWTpDM4=\n"));
    free(h);
    cf__auth_free(a);

    /* A key that is not base64: error without the key in it. */
    env bad = {{{"AZURE_STORAGE_ACCOUNT", "myaccount"},
                {"AZURE_STORAGE_ACCESS_KEY", "SECRETKEY*notbase64=="}}};
    CHECK(open_env("az://c/x.tif", &bad, &a, &err) == CF_E_AUTH);
    CHECK(contains(err.msg, "base64") && !contains(err.msg, "SECRETKEY"));
    CHECK(cf__azure_sign_string("@@@@", "x", sig, sizeof sig) == CF_E_ARG);
}

/* Where the Azure variables' credentials may go in the https form (issue
 * 15): the clouds' Blob suffixes over https for the configured account, or
 * exactly the endpoint a connection string names; nothing to look-alike
 * hosts, plain http, other ports or other accounts. */
static int az_gets_creds(const char *url, env *e) {
    cf__auth *a = NULL;
    cf_error err;
    if (open_env(url, e, &a, &err) != CF_OK || !a) return -1;
    int got = cf__auth_has_credentials(a) || contains(cf__auth_http_url(a), "SECRETSIG");
    cf__auth_free(a);
    return got;
}

static void test_azure_where_credentials_go(void) {
    env sas = {{{"AZURE_STORAGE_ACCOUNT", "acct"},
                {"AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=SECRETSIG"}}};
    env key = {{{"AZURE_STORAGE_ACCOUNT", "acct"}, {"AZURE_STORAGE_ACCESS_KEY", DEV_KEY}}};
    env *both[] = {&sas, &key};
    const struct { const char *url; int ok; } cases[] = {
        {"https://acct.blob.core.windows.net/c/x.tif", 1},
        {"https://ACCT.Blob.Core.Windows.Net/c/x.tif", 1},
        {"https://acct.blob.core.windows.net:443/c/x.tif", 1},
        {"https://acct.blob.core.usgovcloudapi.net/c/x.tif", 1},
        {"https://acct.blob.core.chinacloudapi.cn/c/x.tif", 1},
        {"http://acct.blob.core.windows.net/c/x.tif", 0},
        {"https://acct.blob.core.windows.net:8443/c/x.tif", 0},
        {"https://acct.blob.core.windows.net.attacker.example/c/x.tif", 0},
        {"https://acct.blob.core.attacker.example/c/x.tif", 0},
        {"http://acct.blob.core.attacker.example/c/x.tif", 0},
        {"https://acct.blob.core.cloudapi.de/c/x.tif", 0},
        {"https://other.blob.core.windows.net/c/x.tif", 0},
        /* user info: the host is attacker.example */
        {"https://acct.blob.core.windows.net@attacker.example/c/x.tif", 0},
        {"https://acct.blob.core.windows.net:x@attacker.example/c/x.tif", 0},
    };
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            int got = az_gets_creds(cases[i].url, both[w]);
            if (got != cases[i].ok) fprintf(stderr, "  %s (%s)\n", cases[i].url, w ? "key" : "sas");
            CHECK(got == cases[i].ok);
        }
    /* Without a configured account, no account is "ours". */
    env anon = {{{"AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=SECRETSIG"},
                 {"AZURE_STORAGE_ACCESS_KEY", DEV_KEY}}};
    CHECK(az_gets_creds("https://evil.blob.core.windows.net/c/x.tif", &anon) == 0);
    /* A connection string that names the cloud or the endpoint: exactly
     * that scheme and host. */
    env china = {{{"AZURE_STORAGE_CONNECTION_STRING",
                   "AccountName=acct;AccountKey=" DEV_KEY ";EndpointSuffix=core.chinacloudapi.cn"}}};
    CHECK(az_gets_creds("https://acct.blob.core.chinacloudapi.cn/c/x.tif", &china) == 1);
    CHECK(az_gets_creds("https://acct.blob.core.windows.net/c/x.tif", &china) == 0);
    env http = {{{"AZURE_STORAGE_CONNECTION_STRING",
                  "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" DEV_KEY}}};
    CHECK(az_gets_creds("http://acct.blob.core.windows.net/c/x.tif", &http) == 1);
    CHECK(az_gets_creds("https://acct.blob.core.windows.net/c/x.tif", &http) == 0);
    env ep = {{{"AZURE_STORAGE_CONNECTION_STRING",
                "BlobEndpoint=https://acct.blob.core.contoso.example/;"
                "SharedAccessSignature=sv=1&sig=SECRETSIG"}}};
    CHECK(az_gets_creds("https://acct.blob.core.contoso.example/c/x.tif", &ep) == 1);
    CHECK(az_gets_creds("http://acct.blob.core.contoso.example/c/x.tif", &ep) == 0);
    CHECK(az_gets_creds("https://acct.blob.core.windows.net/c/x.tif", &ep) == 0);
    /* az:// builds its endpoint from the configuration only: the canonical
     * https one, or the one named. */
    cf__auth *a = NULL;
    cf_error err;
    CHECK(open_env("az://c/x.tif", &sas, &a, &err) == CF_OK);
    CHECK(a && !strncmp(cf__auth_http_url(a), "https://acct.blob.core.windows.net/", 35));
    cf__auth_free(a);
}

static void test_azure_urls(void) {
    cf__auth *a = NULL;
    cf_error err;
    /* SAS with and without the leading '?'. */
    const char *sases[] = {"?sv=2021-08-06&sp=r&sig=SECRETSIG%3D",
                           "sv=2021-08-06&sp=r&sig=SECRETSIG%3D"};
    for (int i = 0; i < 2; i++) {
        env e = {{{"AZURE_STORAGE_ACCOUNT", "acct"},
                  {"AZURE_STORAGE_SAS_TOKEN", sases[i]}}};
        CHECK(open_env("az://c/d/x.tif", &e, &a, &err) == CF_OK);
        if (!a) continue;
        CHECK(!strcmp(cf__auth_http_url(a), "https://acct.blob.core.windows.net/c/d/x.tif"
                                            "?sv=2021-08-06&sp=r&sig=SECRETSIG%3D"));
        CHECK(!cf__auth_has_credentials(a)); /* the SAS is in the URL */
        char *h = sign_join(a, T_2013_05_24, "bytes=0-1", NULL);
        CHECK(h && !strcmp(h, ""));
        free(h);
        CHECK(!contains(cf__auth_redacted(a), "sig"));
        cf__auth_free(a);
    }
    /* Connection string: account, key, protocol, suffix. */
    env cs = {{{"AZURE_STORAGE_CONNECTION_STRING",
                "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" DEV_KEY
                ";EndpointSuffix=core.chinacloudapi.cn"}}};
    CHECK(open_env("az://c/x.tif", &cs, &a, &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_http_url(a),
                       "http://acct.blob.core.chinacloudapi.cn/c/x.tif"));
    CHECK(a && cf__auth_has_credentials(a));
    cf__auth_free(a);
    /* Connection string: BlobEndpoint (path-style) + SAS. */
    env cs2 = {{{"AZURE_STORAGE_CONNECTION_STRING",
                 "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1/;"
                 "SharedAccessSignature=sv=2021-08-06&sig=SECRETSIG"}}};
    CHECK(open_env("az://c/x.tif", &cs2, &a, &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_http_url(a), "http://127.0.0.1:10000/devstoreaccount1/c/x.tif"
                                             "?sv=2021-08-06&sig=SECRETSIG"));
    cf__auth_free(a);
    /* A connection string is complete: the separate variables are not
     * mixed in. */
    env cs3 = {{{"AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct"},
                {"AZURE_STORAGE_ACCESS_KEY", DEV_KEY}}};
    CHECK(open_env("az://c/x.tif", &cs3, &a, &err) == CF_OK);
    CHECK(a && !cf__auth_has_credentials(a));
    cf__auth_free(a);
    env csbad = {{{"AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct;SECRETJUNK"}}};
    CHECK(open_env("az://c/x.tif", &csbad, &a, &err) == CF_E_ARG);
    CHECK(!contains(err.msg, "SECRETJUNK"));

    /* The https form: credentials of the same account are used; a URL
     * that carries its own query, or another account, gets nothing. */
    env e = {{{"AZURE_STORAGE_ACCOUNT", "acct"},
              {"AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=SECRETSIG"}}};
    CHECK(open_env("https://acct.blob.core.windows.net/c/x%20y.tif", &e, &a, &err) == CF_OK);
    CHECK(a && cf__auth_kind_of(a) == CF_AUTH_AZURE);
    CHECK(a && !strcmp(cf__auth_http_url(a),
                       "https://acct.blob.core.windows.net/c/x%20y.tif?sv=1&sig=SECRETSIG"));
    CHECK(a && !strcmp(cf__auth_redacted(a), "https://acct.blob.core.windows.net/c/x%20y.tif"));
    cf__auth_free(a);
    CHECK(open_env("https://other.blob.core.windows.net/c/x.tif", &e, &a, &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_http_url(a), "https://other.blob.core.windows.net/c/x.tif"));
    cf__auth_free(a);
    CHECK(open_env("https://acct.blob.core.windows.net/c/x.tif?sv=2&sig=MINE", &e, &a,
                   &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_http_url(a),
                       "https://acct.blob.core.windows.net/c/x.tif?sv=2&sig=MINE"));
    CHECK(a && !contains(cf__auth_redacted(a), "MINE"));
    cf__auth_free(a);
    /* A key goes to the https form only for the account it belongs to. */
    env k = {{{"AZURE_STORAGE_ACCESS_KEY", DEV_KEY}}};
    CHECK(open_env("https://acct.blob.core.windows.net/c/x.tif", &k, &a, &err) == CF_OK);
    CHECK(a && !cf__auth_has_credentials(a));
    cf__auth_free(a);
    env ka = {{{"AZURE_STORAGE_ACCOUNT", "acct"}, {"AZURE_STORAGE_ACCESS_KEY", DEV_KEY}}};
    CHECK(open_env("https://acct.blob.core.windows.net/c/x.tif", &ka, &a, &err) == CF_OK);
    if (a) {
        char *h = sign_join(a, T_2013_05_24, NULL, NULL);
        CHECK(contains(h, "Authorization: SharedKey acct:"));
        free(h);
        cf__auth_free(a);
    }
    test_azure_where_credentials_go();

    const char *bad[] = {"az://", "az://c", "az://c/", "az://c_d/x",
                         "https://acct.blob.core.windows.net/",
                         "https://a_b.blob.core.windows.net/c/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(open_env(bad[i], &e, &a, &err) == CF_E_ARG);
        CHECK(a == NULL && !contains(err.msg, "SECRETSIG"));
    }
    env badsas = {{{"AZURE_STORAGE_ACCOUNT", "acct"},
                   {"AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=SECRETSIG\r\nX: y"}}};
    CHECK(open_env("az://c/x.tif", &badsas, &a, &err) == CF_E_AUTH);
    CHECK(contains(err.msg, "SAS token is malformed") && !contains(err.msg, "SECRETSIG"));
    env noacct = {{{"AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=SECRETSIG"}}};
    CHECK(open_env("az://c/x.tif", &noacct, &a, &err) == CF_E_ARG);
    CHECK(contains(err.msg, "AZURE_STORAGE_ACCOUNT"));
}

/* ---- GCS and plain HTTP ------------------------------------------- */

static void test_gcs_http(void) {
    cf__auth *a = NULL;
    cf_error err;
    env none = {{{NULL, NULL}}};
    CHECK(open_env("gs://bucket/dir/a b+c.tif", &none, &a, &err) == CF_OK);
    if (a) {
        CHECK(cf__auth_kind_of(a) == CF_AUTH_GCS && !cf__auth_has_credentials(a));
        CHECK(!strcmp(cf__auth_http_url(a),
                      "https://storage.googleapis.com/bucket/dir/a%20b%2Bc.tif"));
        char *h = sign_join(a, 0, NULL, NULL);
        CHECK(h && !strcmp(h, ""));
        free(h);
        cf__auth_free(a);
    }
    env emu = {{{"STORAGE_EMULATOR_HOST", "127.0.0.1:4443"},
                {"GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.SECRETTOKEN"}}};
    CHECK(open_env("gs://bucket/k.tif", &emu, &a, &err) == CF_OK);
    if (a) {
        CHECK(!strcmp(cf__auth_http_url(a), "http://127.0.0.1:4443/bucket/k.tif"));
        CHECK(cf__auth_has_credentials(a));
        char *h = sign_join(a, 0, "bytes=0-1", NULL);
        CHECK(h && !strcmp(h, "Authorization: Bearer ya29.SECRETTOKEN\n"));
        free(h);
        CHECK(!contains(cf__auth_redacted(a), "SECRET"));
        cf__auth_free(a);
    }
    env emu2 = {{{"STORAGE_EMULATOR_HOST", "https://gcs.local:8443/"}}};
    CHECK(open_env("gs://bucket/k.tif", &emu2, &a, &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_http_url(a), "https://gcs.local:8443/bucket/k.tif"));
    cf__auth_free(a);
    /* The emulator is checked like S3 and Azure endpoints. */
    const char *bad_emu[] = {"h:1?x", "h:1#f", "ftp://h:1", "h:1\r\nEvil: 1"};
    for (size_t i = 0; i < sizeof bad_emu / sizeof bad_emu[0]; i++) {
        env be = {{{"STORAGE_EMULATOR_HOST", bad_emu[i]}}};
        CHECK(open_env("gs://bucket/k.tif", &be, &a, &err) == CF_E_ARG && !a);
        CHECK(contains(err.msg, "STORAGE_EMULATOR_HOST") && !contains(err.msg, "Evil"));
    }
    env inj = {{{"GOOGLE_OAUTH_ACCESS_TOKEN", "tok\r\nHost: evil"}}};
    CHECK(open_env("gs://bucket/k.tif", &inj, &a, &err) == CF_E_ARG);
    CHECK(!contains(err.msg, "evil"));
    CHECK(open_env("gs://bucket", &none, &a, &err) == CF_E_ARG);
    CHECK(open_env("gs://b!d/k", &none, &a, &err) == CF_E_ARG);

    /* One rule for every store's URL (cf__auth_split_url): the store name's
     * length and characters, and object names up to 1024 bytes. */
    char longkey[1100], longstore[300];
    memset(longkey, 'k', sizeof longkey);
    memset(longstore, 'b', sizeof longstore);
    const struct { const char *fmt; size_t n; const char *want; } lim[] = {
        {"gs://bucket/%.*s", 1025, "object name longer than 1024"},
        {"s3://bucket/%.*s", 1025, "object name longer than 1024"},
        {"az://c/%.*s", 1025, "object name longer than 1024"},
        {"gs://%.*s/k", 223, "bucket name longer than 222"},
        {"s3://%.*s/k", 256, "bucket name longer than 255"},
        {"az://%.*s/k", 64, "container name longer than 63"},
    };
    env azl = {{{"AZURE_STORAGE_ACCOUNT", "acct"}, {"AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=x"},
                {"AWS_NO_SIGN_REQUEST", "YES"}}};
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        char u[1400];
        const char *fill = strstr(lim[i].fmt, "%.*s/") ? longstore : longkey;
        snprintf(u, sizeof u, lim[i].fmt, (int)lim[i].n, fill);
        CHECK(open_env(u, &azl, &a, &err) == CF_E_ARG && a == NULL);
        CHECK(contains(err.msg, lim[i].want)); /* the URL is cut, not the reason */
        /* one byte shorter is accepted */
        snprintf(u, sizeof u, lim[i].fmt, (int)lim[i].n - 1, fill);
        CHECK(open_env(u, &azl, &a, &err) == CF_OK);
        cf__auth_free(a);
        a = NULL;
    }

    /* Plain HTTP(S) passes through, unsigned, whatever the environment. */
    env aws = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"}}};
    CHECK(open_env("http://127.0.0.1:8080/data/x.tif", &aws, &a, &err) == CF_OK);
    if (a) {
        CHECK(cf__auth_kind_of(a) == CF_AUTH_HTTP && !cf__auth_has_credentials(a));
        CHECK(!strcmp(cf__auth_http_url(a), "http://127.0.0.1:8080/data/x.tif"));
        char *h = sign_join(a, 0, "bytes=0-1", NULL);
        CHECK(h && !strcmp(h, ""));
        free(h);
        cf__auth_free(a);
    }
    CHECK(open_env("ftp://host/x.tif", &none, &a, &err) == CF_E_ARG);
    CHECK(contains(err.msg, "unsupported URL scheme"));
    CHECK(open_env("", &none, &a, &err) == CF_E_ARG);
    CHECK(open_env("http://host/x\r\nEvil: 1", &none, &a, &err) == CF_E_ARG);
}

/* ---- redaction ----------------------------------------------------- */

static void test_redaction(void) {
    cf__auth *a = NULL;
    cf_error err;
    env none = {{{NULL, NULL}}};
    const char *urls[] = {
        "https://bucket.s3.amazonaws.com/k.tif?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIDSECRET%2F20130524&X-Amz-Security-Token=TOKSECRET"
        "&X-Amz-Signature=SIGSECRET",
        "https://acct.blob.core.windows.net/c/k.tif?sv=2021&sig=SIGSECRET",
        "http://127.0.0.1:10000/devstoreaccount1/c/k.tif?sv=2021&sig=SIGSECRET#frag",
        "https://user:PASSSECRET@example.com/k.tif",
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        CHECK(open_env(urls[i], &none, &a, &err) == CF_OK);
        if (!a) continue;
        const char *r = cf__auth_redacted(a);
        CHECK(!contains(r, "SECRET") && !contains(r, "sig=") &&
              !contains(r, "X-Amz") && !contains(r, "?"));
        CHECK(contains(cf__auth_http_url(a), "SECRET")); /* still sent */
        cf__auth_free(a);
    }
    /* URL shapes: an '@' after the authority (in a query or fragment, with
     * or without a path) is no user info; in the authority the last '@'
     * ends it, so a password with a raw '@' goes whole; IPv6 hosts; a
     * "://" inside a local path's query is no scheme. */
    const char *shapes[][2] = {
        {"http://host?sig=A@S3CR3T_at_in_query", "http://host"},
        {"http://host#frag@S3CR3T", "http://host"},
        {"http://host/?sig=A@S3CR3T", "http://host/"},
        {"http://host/x.tif#S3CR3T@y", "http://host/x.tif"},
        {"https://user:pa@ss@S3CR3T@host.example/x.tif", "https://host.example/x.tif"},
        {"https://u:S3CR3T@host.example:8443?sig=S3CR3T", "https://host.example:8443"},
        {"http://[::1]:8080?sig=A@S3CR3T", "http://[::1]:8080"},
        {"http://u:S3CR3T@[::1]:8080/x?sig=S3CR3T", "http://[::1]:8080/x"},
        {"https://h.example/a@b/c.tif?sig=S3CR3T", "https://h.example/a@b/c.tif"},
        {"HTTP://USER:S3CR3T@Host/x", "HTTP://Host/x"},
        {"http://S3CR3T@host", "http://host"},
        {"s3://bucket/k@ey.tif", "s3://bucket/k@ey.tif"},
        {"/data/x.tif?u=http://a@S3CR3T", "/data/x.tif"},
        {"file:///data/x.tif", "file:///data/x.tif"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        char out[CF__NAME_MAX];
        cf__redact_url(shapes[i][0], out, sizeof out);
        if (strcmp(out, shapes[i][1])) fprintf(stderr, "  %s -> %s\n", shapes[i][0], out);
        CHECK(!strcmp(out, shapes[i][1]));
    }
    CHECK(open_env("http://host?sig=A@S3CR3T_at_in_query", &none, &a, &err) == CF_OK);
    CHECK(a && !strcmp(cf__auth_redacted(a), "http://host"));
    cf__auth_free(a);
    /* Errors on URLs with secrets name the URL without them. */
    CHECK(open_env("https://a_b.blob.core.windows.net/c/x?sig=SIGSECRET", &none,
                   &a, &err) == CF_E_ARG);
    CHECK(err.msg[0] && !contains(err.msg, "SECRET"));
    CHECK(open_env("ftp://u:PASSSECRET@h/x?sig=SIGSECRET", &none, &a, &err) == CF_E_ARG);
    CHECK(err.msg[0] && !contains(err.msg, "SECRET"));
    /* Long names keep their head (scheme, host) and tail (file name), so
     * that the reason after them still fits in the message. */
    char fit[16];
    cf__name_fit("abcdefghijklmnopqrstuvwxyz", 26, fit, sizeof fit);
    CHECK(!strcmp(fit, "abcdef...uvwxyz"));
    cf__name_fit("abcdefghijklmno", 15, fit, sizeof fit);
    CHECK(!strcmp(fit, "abcdefghijklmno"));
    cf__name_fit("abcdefghijklmnop", 16, fit, 4);
    CHECK(!strcmp(fit, "abc"));
    /* cut between UTF-8 characters: "a" then 20 two-byte e-acutes */
    char utf[64] = "a";
    for (int i = 0; i < 20; i++) strcat(utf, "\xc3\xa9");
    cf__name_fit(utf, strlen(utf), fit, sizeof fit);
    CHECK(!strcmp(fit, "a\xc3\xa9\xc3\xa9...\xc3\xa9\xc3\xa9\xc3\xa9"));
    cf__name_fit(utf, strlen(utf), fit, 5);
    CHECK(!strcmp(fit, "a\xc3\xa9"));
    /* A hint goes after the message and keeps its code; a full message
     * stays terminated. */
    cf_error e;
    cf__err(&e, CF_E_CHANGED, "x.tif: changed");
    CHECK(cf__err_hint(&e, CF_E_CHANGED, "came from the %s", "cache") == CF_E_CHANGED);
    CHECK(!strcmp(e.msg, "x.tif: changed; came from the cache"));
    cf__err(&e, CF_E_IO, "%0*d", (int)sizeof e.msg - 5, 0);
    cf__err_hint(&e, CF_E_IO, "more");
    CHECK(strlen(e.msg) == sizeof e.msg - 1 && e.code == CF_E_IO);
    cf__err_hint(&e, CF_E_IO, "more");
    CHECK(strlen(e.msg) == sizeof e.msg - 1);
    char longurl[3000], red[CF__NAME_MAX];
    snprintf(longurl, sizeof longurl,
             "https://user:PASSSECRET@host.example/%0*d/scene_42.tif?sig=SIGSECRET",
             2000, 7);
    cf__redact_url(longurl, red, sizeof red);
    CHECK(strlen(red) == CF__NAME_MAX - 1 &&
          !strncmp(red, "https://host.example/000", 24) &&
          contains(red, "...") && contains(red, "7/scene_42.tif") &&
          !contains(red, "SECRET") && !contains(red, "sig"));
    /* ...and a failure on such a URL names it and says why. */
    snprintf(longurl, sizeof longurl, "gs://bucket/%0*d/x/../scene_42.tif?sig=SIGSECRET",
             900, 7);
    CHECK(open_env(longurl, &none, &a, &err) == CF_E_ARG);
    CHECK(contains(err.msg, "gs://bucket/000") && contains(err.msg, "scene_42.tif: object keys") &&
          contains(err.msg, "not supported") && !contains(err.msg, "SECRET"));
    /* Signed headers hold the secret key nowhere, only its HMAC. */
    env s3 = {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "KEYSECRET"}}};
    CHECK(open_env("s3://b/k", &s3, &a, &err) == CF_OK);
    if (a) {
        char *h = sign_join(a, T_2013_05_24, NULL, NULL);
        CHECK(h && !contains(h, "KEYSECRET"));
        CHECK(!contains(cf__auth_redacted(a), "AKID"));
        free(h);
        cf__auth_free(a);
    }
}

/* ---- service error codes ------------------------------------------ */

static void test_error_code(void) {
    char code[64];
    const char s3[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>"
                      "<Code>SignatureDoesNotMatch</Code><Message>The request "
                      "signature we calculated does not match</Message></Error>";
    cf__auth_error_code(NULL, s3, sizeof s3 - 1, NULL, code, sizeof code);
    CHECK(!strcmp(code, "SignatureDoesNotMatch"));
    /* Azure: the header wins over the body. */
    cf__auth_error_code(NULL, s3, sizeof s3 - 1, "AuthenticationFailed", code,
                        sizeof code);
    CHECK(!strcmp(code, "AuthenticationFailed"));
    const char az[] = "\xef\xbb\xbf<?xml version=\"1.0\"?><Error><Code>"
                      "AuthorizationPermissionMismatch</Code></Error>";
    cf__auth_error_code(NULL, az, sizeof az - 1, "", code, sizeof code);
    CHECK(!strcmp(code, "AuthorizationPermissionMismatch"));
    /* Body cut before </Code>: nothing.  Not NUL-terminated: bounded. */
    cf__auth_error_code(NULL, s3, 40, NULL, code, sizeof code);
    CHECK(!strcmp(code, ""));
    /* Hostile code: no text injected. */
    const char evil[] = "<Code>Bad\r\nInjected: yes</Code>";
    cf__auth_error_code(NULL, evil, sizeof evil - 1, NULL, code, sizeof code);
    CHECK(!strcmp(code, ""));
    /* Too long for the buffer: nothing rather than a truncated code. */
    char small[8];
    cf__auth_error_code(NULL, s3, sizeof s3 - 1, NULL, small, sizeof small);
    CHECK(!strcmp(small, ""));
    cf__auth_error_code(NULL, "<html>502</html>", 16, NULL, code, sizeof code);
    CHECK(!strcmp(code, ""));
    cf__auth_error_code(NULL, NULL, 0, NULL, code, sizeof code);
    CHECK(!strcmp(code, ""));
}

/* Mutated URLs and environment values, deterministic: whatever comes in,
 * no crash (the ASan build checks memory), either an error with a message
 * or a handle whose URL is usable and whose name has no query. */
static void test_mutations(void) {
    static const char *seeds[] = {
        "s3://bucket/dir/key.tif", "az://container/dir/blob.tif",
        "gs://bucket/dir/key.tif", "https://acct.blob.core.windows.net/c/b.tif?sv=1&sig=S",
        "http://[::1]:8080/a/b?x=1#f", "https://u:p@host:443/x", "s3://b.c/k?x#y",
    };
    static const char alphabet[] = "/:?#@%.[]=;&+~ aZ9\xc3\xbc";
    env envs[3] = {
        {{{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S3CR3T"},
          {"AWS_ENDPOINT_URL", "http://[::1]:9000/base/"},
          {"AZURE_STORAGE_ACCOUNT", "acct"}, {"AZURE_STORAGE_ACCESS_KEY", DEV_KEY},
          {"GOOGLE_OAUTH_ACCESS_TOKEN", "tok"}}},
        {{{"AWS_NO_SIGN_REQUEST", "yes"},
          {"AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true;AccountKey="},
          {"STORAGE_EMULATOR_HOST", "h:1"}}},
        {{{"AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint=http://h/;SharedAccessSignature=?"},
          {"AWS_ACCESS_KEY_ID", "A"}, {"AWS_SECRET_ACCESS_KEY", "x"}, {"AWS_REGION", ""}}},
    };
    uint64_t r = 0x9e3779b97f4a7c15u;
    int ok = 0, bad = 0;
    for (int it = 0; it < 20000; it++) {
        char u[128];
        snprintf(u, sizeof u, "%s", seeds[it % 7]);
        int nmut = 1 + it % 4;
        for (int m = 0; m < nmut; m++) {
            r = r * 6364136223846793005u + 1442695040888963407u;
            size_t len = strlen(u), pos = (size_t)(r >> 33) % (len + 1);
            char c = alphabet[(r >> 20) % (sizeof alphabet - 1)];
            switch ((r >> 10) % 3) {
            case 0: if (pos < len) u[pos] = c; break;                 /* replace */
            case 1: u[pos] = 0; break;                                 /* cut */
            default:                                                   /* insert */
                if (len + 2 < sizeof u) {
                    memmove(u + pos + 1, u + pos, len - pos + 1);
                    u[pos] = c;
                }
            }
        }
        cf__auth *a = NULL;
        cf_error err;
        cf_status st = open_env(u, &envs[it % 3], &a, &err);
        if (st != CF_OK) {
            bad++;
            if (a || !err.msg[0]) CHECK(!"error without message, or handle");
            continue;
        }
        ok++;
        if (!cf__auth_http_url(a) || strchr(cf__auth_redacted(a), '?') ||
            strchr(cf__auth_redacted(a), '#'))
            CHECK(!"bad handle");
        struct curl_slist *h = NULL;
        if (cf__auth_sign_at(a, T_2013_05_24, "GET", "bytes=0-1", "\"e\"", NULL, &h,
                             &err) != CF_OK)
            CHECK(!"sign failed");
        for (struct curl_slist *p = h; p; p = p->next)
            if (strpbrk(p->data, "\r\n")) CHECK(!"header with CR/LF");
        curl_slist_free_all(h);
        cf__auth_free(a);
    }
    printf("mutations: %d opened, %d refused\n", ok, bad);
    CHECK(ok > 1000 && bad > 1000); /* both paths were exercised */
}

/* ---- base64 (Azure account keys) -------------------------------------- */

static void test_b64_decode(void) {
    unsigned char out[16];
    /* RFC 4648's test vectors, 0, 2 and 1 padding characters */
    CHECK(cf__b64_decode("Zm9vYmFy", out, sizeof out) == 6 && !memcmp(out, "foobar", 6));
    CHECK(cf__b64_decode("Zm9vYg==", out, sizeof out) == 4 && !memcmp(out, "foob", 4));
    CHECK(cf__b64_decode("Zm9vYmE=", out, sizeof out) == 5 && !memcmp(out, "fooba", 5));
    CHECK(cf__b64_decode("//79", out, sizeof out) == 3 && out[0] == 0xff && out[1] == 0xfe &&
          out[2] == 0xfd);
    /* refused: empty, not a multiple of 4, outside the alphabet (URL-safe
     * '-', whitespace that OpenSSL alone would skip), padding inside,
     * three '=', longer than the buffer */
    const char *bad[] = {"", "Zm9", "Zm9v-w==", " Zm9vYmFy", "Zm9vYmFy\n", "Zm=vYmFy",
                         "Zm9vY===", "Zg==Zg=="};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(cf__b64_decode(bad[i], out, sizeof out) == -1);
    CHECK(cf__b64_decode("Zm9vYmFy", out, 5) == -1);
    CHECK(cf__b64_decode("Zm9vYmE=", out, 5) == 5);
}

int main(void) {
    test_b64_decode();
    test_sigv4_vectors();
    test_uri_encode();
    test_s3_request();
    test_s3_urls();
    test_s3_host_port();
    test_azure_shared_key();
    test_azure_urls();
    test_gcs_http();
    test_redaction();
    test_error_code();
    test_mutations();
    return CF_TEST_END();
}
