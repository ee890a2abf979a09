/*
 * shared_upload.c - cf_upload: one object uploaded by several processes
 * (the ranks of a job), each putting the parts whose bytes it holds; the
 * public face of upload.c's join, receipts and finish.
 *
 * The process that begins the upload is its owner: it alone completes or
 * aborts it, so that a failure anywhere ends in one place (the owner
 * frees its upload without completing: nothing is left).  A joined
 * process's parts are in the owner's object only through its receipts.
 */
#include "upload.h"

#include <stdlib.h>
#include <string.h>

#define SU_INFLIGHT 4 /* parts being sent at once by one process */

struct cf_upload {
    cf__upload *up;
    char token[1024];
    char *receipts; /* a joined process's, once given */
};

static cf_status open_upload(const char *url, cf_io *io, const char *token, cf_upload **out,
                             cf_error *err) {
    if (!out) return cf__err(err, CF_E_ARG, "upload: NULL argument");
    *out = NULL;
    if (!url) return cf__err(err, CF_E_ARG, "upload: no URL");
    cf_upload *u = cf__calloc(1, sizeof *u);
    if (!u) return cf__err(err, CF_E_NOMEM, "upload: out of memory");
    cf_status st = token ? cf__upload_join(io, url, SU_INFLIGHT, token, &u->up, err)
                         : cf__upload_new(io, url, SU_INFLIGHT, &u->up, err);
    if (st) {
        free(u);
        return st;
    }
    cf__upload_token(u->up, u->token, sizeof u->token);
    *out = u;
    return CF_OK;
}

cf_status cf_upload_begin(const char *url, cf_io *io, cf_upload **out, cf_error *err) {
    return open_upload(url, io, NULL, out, err);
}

cf_status cf_upload_join(const char *url, cf_io *io, const char *token, cf_upload **out,
                         cf_error *err) {
    if (!token) return cf__err(err, CF_E_ARG, "upload: no token to join");
    return open_upload(url, io, token, out, err);
}

const char *cf_upload_token(const cf_upload *u) { return u ? u->token : ""; }

uint64_t cf_upload_min_part(const cf_upload *u) { return u ? cf__upload_min_part(u->up) : 0; }

cf_status cf_upload_part(cf_upload *u, uint32_t number, const void *data, size_t len,
                         cf_error *err) {
    if (!u || (!data && len)) return cf__err(err, CF_E_ARG, "upload: NULL argument");
    if (u->receipts)
        return cf__err(err, CF_E_STATE, "%s: part %u after the receipts were given",
                       cf__upload_name(u->up), number);
    uint8_t *copy = cf__malloc(len ? len : 1); /* the sender frees it once sent */
    if (!copy) return cf__err(err, CF_E_NOMEM, "%s: part %u: out of memory (%zu bytes)",
                              cf__upload_name(u->up), number, len);
    if (len) memcpy(copy, data, len);
    return cf__upload_part(u->up, number, copy, len, err);
}

cf_status cf_upload_receipts(cf_upload *u, const char **out, cf_error *err) {
    if (!u || !out) return cf__err(err, CF_E_ARG, "upload: NULL argument");
    *out = NULL;
    if (!cf__upload_joined(u->up))
        return cf__err(err, CF_E_STATE, "%s: the process that began the upload completes it "
                       "(cf_upload_complete): its parts need no receipts",
                       cf__upload_name(u->up));
    if (!u->receipts) CF__TRY(cf__upload_receipts(u->up, &u->receipts, err));
    *out = u->receipts;
    return CF_OK;
}

cf_status cf_upload_complete(cf_upload *u, const char *const *receipts, size_t n,
                             cf_error *err) {
    if (!u) return cf__err(err, CF_E_ARG, "upload: NULL argument");
    cf_status st = CF_OK;
    if (cf__upload_joined(u->up))
        st = cf__err(err, CF_E_STATE, "%s: only the process that began the upload completes "
                     "it (a joined one gives its receipts)", cf__upload_name(u->up));
    else if (n && !receipts)
        st = cf__err(err, CF_E_ARG, "upload: NULL receipts");
    for (size_t i = 0; !st && i < n; i++)
        if (receipts[i]) st = cf__upload_add_receipts(u->up, receipts[i], err);
    if (!st) st = cf__upload_check_whole(u->up, err);
    if (!st) {
        st = cf__upload_finish(u->up, err);
        u->up = NULL; /* gone, made or aborted */
    }
    cf_upload_free(u);
    return st;
}

void cf_upload_free(cf_upload *u) {
    if (!u) return;
    if (u->up) cf__upload_abort(u->up);
    free(u->receipts);
    free(u);
}
