/*
 * src_sign.c - remote objects whose URLs are signed before use
 * (cf_io_options.sign: an Azure SAS, presigned URLs, Planetary Computer's
 * tokens): the first signature when the object is opened, its renewal
 * before it expires, and the auth handle each request is sent with
 * (docs/remote.md, "Signed URLs").
 *
 * A src's auth handle is replaced under its lock when the URL is signed
 * again; transfers hold a reference to the handle they were made with
 * and take the latest at each attempt, so a replaced handle lives until
 * its last transfer ends.  One thread signs an object at a time
 * (sign_mu); the signing function never runs on the io loop's thread.
 */
#include "auth_int.h"
#include "io_internal.h"

#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void drop_secret(char *buf, size_t n) {
    OPENSSL_cleanse(buf, n); /* a signed URL is a credential */
    free(buf);
}

static double wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* s's URL signed by the io's function: *out the handle to request it
 * with, *expires_at when its signature expires (0: never), *renew_at when
 * to sign it again.  The signed URL must address the same object as
 * s->url (s->auth, as first made from it); a signature that has expired
 * already, or an expiry that is no time at all, is refused rather than
 * sent.  It is renewed sign_margin_s before it expires, or halfway
 * through its life when that is shorter (a 4-minute token is not signed
 * again at every request). */
cf_status cf__src_sign(cf__src *s, cf__auth **out, double *expires_at, double *renew_at,
                      cf_error *err) {
    const cf_io_options *o = &s->io->opts;
    char *buf = cf__malloc(CF__AUTH_MAX_URL + 1);
    if (!buf) return cf__err(err, CF_E_NOMEM, "%s: out of memory", s->name);
    buf[0] = 0;
    double now = wall_now(), expires = 0;
    cf_error e;
    cf__err_clear(&e);
    cf_status st = o->sign(o->sign_user, s->url, buf, CF__AUTH_MAX_URL + 1, &expires, &e);
    if (st == CF_OK && !memchr(buf, 0, CF__AUTH_MAX_URL + 1))
        st = cf__err(&e, CF_E_LIMIT, "the signed URL is longer than %d bytes",
                     CF__AUTH_MAX_URL);
    if (st != CF_OK) {
        drop_secret(buf, CF__AUTH_MAX_URL + 1);
        if (err) *err = e;
        return cf__err_prefix(err, st, "%s: signing the URL", s->name);
    }
    cf__auth *a = NULL;
    st = cf__auth_new(buf, &a, &e);
    drop_secret(buf, CF__AUTH_MAX_URL + 1);
    if (st == CF_OK && !cf__auth_same_object(a, s->auth))
        st = cf__err(&e, CF_E_AUTH,
                     "the signed URL points to %s: a signature may change the "
                     "query, not the object", cf__auth_redacted(a));
    else if (st == CF_OK && !(expires >= 0 && expires < INFINITY))
        st = cf__err(&e, CF_E_AUTH, "the signature's expiry %g is not a time", expires);
    else if (st == CF_OK && expires > 0 && !(expires > now))
        st = cf__err(&e, CF_E_AUTH,
                     "the signature returned expired %.0f s ago", now - expires);
    if (st != CF_OK) {
        cf__auth_free(a);
        if (err) *err = e;
        return cf__err_prefix(err, st, "%s: signing the URL", s->name);
    }
    double margin = o->sign_margin_s;
    if (expires > 0 && (expires - now) / 2 < margin) margin = (expires - now) / 2;
    *renew_at = expires > 0 ? expires - margin : 0;
    *expires_at = expires;
    *out = a;
    return CF_OK;
}

/* Before a request: s's signature renewed once it is due (one thread
 * signs; the others wait for it and use its signature).  A renewal that
 * fails while the signature in use is still valid (a token service's bad
 * moment) is tried again later, the requests going on with it; only once
 * it has expired does the failure fail the read. */
cf_status cf__src_fresh(cf__src *s, cf_error *err) {
    if (!s->remote || !s->io->opts.sign) return CF_OK;
    pthread_mutex_lock(&s->mu);
    double due = s->renew_at;
    pthread_mutex_unlock(&s->mu);
    if (due == 0 || wall_now() < due) return CF_OK;
    cf_status st = CF_OK;
    pthread_mutex_lock(&s->sign_mu);
    pthread_mutex_lock(&s->mu);
    due = s->renew_at;
    pthread_mutex_unlock(&s->mu);
    double now = wall_now();
    if (due != 0 && now >= due) {
        cf__auth *a, *old;
        double at, exp;
        st = cf__src_sign(s, &a, &exp, &at, err);
        pthread_mutex_lock(&s->mu);
        if (st == CF_OK) {
            old = s->auth;
            s->auth = a;
            s->renew_at = at;
            s->expires = exp;
        } else if (now < s->expires) {
            /* Again in a quarter of what is left, at most 30 s. */
            double left = s->expires - now;
            s->renew_at = now + (left / 4 < 30 ? left / 4 : 30);
            st = CF_OK;
            old = NULL;
        } else {
            old = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        cf__auth_free(old); /* transfers in flight hold their own */
    }
    pthread_mutex_unlock(&s->sign_mu);
    return st;
}

cf__auth *cf__src_auth_now(cf__src *s) {
    pthread_mutex_lock(&s->mu);
    cf__auth *a = cf__auth_ref(s->auth);
    pthread_mutex_unlock(&s->mu);
    return a;
}

void cf__src_auth_latest(cf__src *s, cf__auth **a) {
    if (!s->io || !s->io->opts.sign) return;
    pthread_mutex_lock(&s->mu);
    cf__auth *cur = s->auth, *old = NULL;
    if (cur != *a) {
        old = *a;
        *a = cf__auth_ref(cur);
    }
    pthread_mutex_unlock(&s->mu);
    cf__auth_free(old);
}
