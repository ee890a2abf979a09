/*
 * upload.h - writing one object to object storage in parts: the write
 * side of the io layer (io.h is the read side), for the writer.
 *
 * S3 (s3://): a multipart upload, created by cf__upload_new, its parts
 * put by number (any order, several at once), completed with the parts in
 * number order by cf__upload_finish, aborted on any failure so that no
 * part stays billed and no object appears.  Azure (az://, the
 * blob.core.windows.net form): blocks put by number, committed in number
 * order by one Put Block List; nothing is visible before it, and blocks
 * never committed are dropped by the service.  gs:// and plain http(s)
 * are refused (CF_E_UNSUPPORTED).
 *
 * Credentials, endpoints and their rules are the reader's (auth.h, the
 * environment variables of design.md); timeouts, retries and backoff are
 * the cf_io's options (request_timeout_s per request, max_retries,
 * retry_base_ms / retry_max_ms).  A part that fails with a 5xx, a 429, a
 * 408 or a transport error (a dropped connection) is sent again whole.
 * Requests run on the upload's own threads with their own connections,
 * not on the io's read loop: a part of several MiB would hold a read
 * slot for seconds.  Errors name the redacted URL, never a secret.
 */
#ifndef CF_IO_UPLOAD_H
#define CF_IO_UPLOAD_H

#include "../common/common.h"

typedef struct cf__upload cf__upload;

/* Parts of an S3 multipart upload are at least this large, the last one
 * excepted; Azure blocks may be any size, and this layer asks no more. */
#define CF__UPLOAD_S3_MIN_PART ((uint64_t)5 << 20)
#define CF__UPLOAD_S3_MAX_PART ((uint64_t)5 << 30)
#define CF__UPLOAD_MAX_PARTS 10000u /* S3's; Azure takes 50,000 blocks */

/* Start uploading `url` (io: its options; NULL: cf_io_options' defaults),
 * with at most `inflight` parts (1..64) being sent at once.  For S3 the
 * multipart upload is created here, so that a wrong key or a missing
 * bucket fails now.  CF_E_ARG / CF_E_UNSUPPORTED for a URL that cannot be
 * written; CF_E_AUTH, CF_E_NOTFOUND, CF_E_HTTP, CF_E_IO, CF_E_TIMEOUT as
 * for reads. */
cf_status cf__upload_new(cf_io *io, const char *url, int inflight, cf__upload **out,
                         cf_error *err);
/* Join an upload another process began (cogfeed's ranks: one object,
 * each process putting its own parts): `token` is the beginner's
 * cf__upload_token.  A joined upload puts parts and gives its receipts
 * (cf__upload_receipts); it never completes the object nor aborts the
 * upload: cf__upload_abort only stops its own senders. */
cf_status cf__upload_join(cf_io *io, const char *url, int inflight, const char *token,
                          cf__upload **out, cf_error *err);
/* Whether `up` joined another process's upload.  Roles are its owner's
 * to keep (cf_upload, shared_upload.c): only a beginning process takes
 * receipts and finishes. */
int cf__upload_joined(const cf__upload *up);
/* The upload's token (S3: its upload id; Azure: the block ids' nonce, 8
 * hex digits); no secret.  cap: at least 1024. */
void cf__upload_token(const cf__upload *up, char *out, size_t cap);
/* Wait for this process's parts, then give their receipts (*out, to
 * free(): a line "NUMBER ETAG" a part for S3, "NUMBER" for Azure), or the
 * first failure. */
cf_status cf__upload_receipts(cf__upload *up, char **out, cf_error *err);
/* The beginning process: wait for its own parts (their failure is the
 * status), then take other processes' receipts, so that
 * cf__upload_finish lists their parts too.  Checked before any is taken:
 * CF_E_ARG for a malformed line or a part number already taken. */
cf_status cf__upload_add_receipts(cf__upload *up, const char *text, cf_error *err);
/* Every part 1..N put or received, none after (an object of several
 * processes' parts: a gap is bytes lost); CF_E_ARG naming the first
 * missing one, or when there is none. */
cf_status cf__upload_check_whole(cf__upload *up, cf_error *err);
/* The smallest part (but the last) the store takes. */
uint64_t cf__upload_min_part(const cf__upload *up);
/* The URL for messages (no secrets). */
const char *cf__upload_name(const cf__upload *up);

/* Send part `number` (1..CF__UPLOAD_MAX_PARTS, each once): `data` is
 * taken (freed with free() once sent or refused).  Returns when a sender
 * is free, before the part is sent; the status is the first failure of
 * any part so far (the upload has then failed: finish reports it too). */
cf_status cf__upload_part(cf__upload *up, uint32_t number, uint8_t *data, size_t len,
                          cf_error *err);
/* Wait for every part, then make the object from the parts sent and
 * those of the receipts taken, in number order.  Any failure (of a part or
 * of this) aborts the upload.  Frees `up`.  Not for a joined upload. */
cf_status cf__upload_finish(cf__upload *up, cf_error *err);
/* Give up: wait for the parts in flight, abort the upload (nothing is
 * left), free `up`. */
void cf__upload_abort(cf__upload *up);

/* Requests this upload sent and retried so far (tests, stats). */
void cf__upload_counts(const cf__upload *up, uint64_t *requests, uint64_t *retries);

#endif
