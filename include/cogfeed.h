/*
 * cogfeed.h - the one public header of cogfeed.
 *
 * cogfeed streams training patches out of Cloud-Optimized GeoTIFFs (COGs)
 * on local disk or object storage (HTTP(S), S3, Azure Blob, GCS).
 *
 * Conventions used throughout:
 *  - Every function that can fail returns a cf_status and, when `err` is not
 *    NULL, fills it with the code and a message naming the file, tile or URL
 *    (never a secret).  `err` may always be NULL.
 *  - Objects are opaque; each `*_new`/`*_open` has a matching `*_free`/
 *    `*_close` that accepts NULL.
 *  - Options structs start with `struct_size` so they can grow: always call
 *    the matching `*_options_init()` first.
 *  - Thread safety is stated next to each function.
 */
#ifndef COGFEED_H
#define COGFEED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CF_VERSION_MAJOR 0
#define CF_VERSION_MINOR 2
#define CF_VERSION_STRING "0.2.0"

/* CF_API marks what libcogfeed.so exports; the library is built with
 * -fvisibility=hidden, so a function declared here without it is not
 * reachable through the shared library (tests/python/test_symbols.py
 * checks both ways). */
#ifndef CF_API
#if defined(__GNUC__) && __GNUC__ >= 4
#define CF_API __attribute__((visibility("default")))
#else
#define CF_API
#endif
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* The status table: one row per status, and the one place statuses are
 * defined.  It generates the enum below, cf_status_name(), cf_strerror()
 * and the Python module's cogfeed.Status and exception classes, so the
 * four cannot drift apart.  Each row is
 *   X(ID, VALUE, TEXT, DOC, PYCLASS, PYBASE)
 *   ID      the enum constant (CF_OK, CF_E_...); cf_status_name()'s text
 *   VALUE   stable: a value never changes once released
 *   TEXT    cf_strerror()'s short English text
 *   DOC     what the status means
 *   PYCLASS the Python exception raised for it (cogfeed.PYCLASS, a subclass
 *           of cogfeed.Error); "" for the two that are not errors
 *   PYBASE  the builtin exception it also subclasses, so that
 *           `except FileNotFoundError` catches a missing file; "" when
 *           cogfeed.Error (a RuntimeError) alone is the base */
#define CF_STATUS_TABLE(X)                                                              \
    X(CF_OK, 0, "success", "no error", "", "")                                          \
    X(CF_E_ARG, 1, "invalid argument", "invalid argument from the caller",              \
      "ArgumentError", "ValueError")                                                    \
    X(CF_E_NOMEM, 2, "out of memory", "allocation failed", "OutOfMemoryError",          \
      "MemoryError")                                                                    \
    X(CF_E_IO, 3, "I/O error", "local I/O error or network transport failure",          \
      "InputOutputError", "OSError")                                                    \
    X(CF_E_FORMAT, 4, "malformed TIFF", "malformed TIFF / GeoTIFF structure",           \
      "FormatError", "OSError")                                                         \
    X(CF_E_UNSUPPORTED, 5, "unsupported", "valid but unsupported (or codec not built in)", \
      "UnsupportedError", "OSError")                                                    \
    X(CF_E_CODEC, 6, "corrupt compressed data", "corrupt compressed tile data",         \
      "CodecError", "OSError")                                                          \
    X(CF_E_LIMIT, 7, "safety limit exceeded", "a safety cap was hit (size, count, memory)", \
      "LimitError", "")                                                                 \
    X(CF_E_HTTP, 8, "HTTP error", "HTTP error status not covered below", "HTTPError",   \
      "OSError")                                                                        \
    X(CF_E_AUTH, 9, "access denied",                                                    \
      "401/403: missing, wrong or expired credentials; 407 (proxy), 451 (legal "        \
      "block); or the server's TLS certificate did not verify",                         \
      "AccessDeniedError", "PermissionError")                                           \
    X(CF_E_NOTFOUND, 10, "not found",                                                   \
      "file or object does not exist (404, 410, ENOENT), or its host name does not "    \
      "resolve",                                                                        \
      "NotFoundError", "FileNotFoundError")                                             \
    X(CF_E_CHANGED, 11, "object changed while reading",                                 \
      "object changed while reading (ETag, 412)", "ObjectChangedError", "OSError")      \
    X(CF_E_RANGE, 12, "range request failed",                                           \
      "range request failed: 416, no range support, Content-Range mismatch",            \
      "RangeRequestError", "OSError")                                                   \
    X(CF_E_TIMEOUT, 13, "timed out", "deadline, stall or retry budget exhausted",       \
      "TimedOutError", "TimeoutError")                                                  \
    X(CF_E_STATE, 14, "invalid state", "call not valid in the object's current state",  \
      "StateError", "")                                                                 \
    X(CF_E_END, 15, "end of iteration", "iteration finished (not an error)", "", "")

#define CF__STATUS_ENUM_ROW(id, value, text, doc, pyclass, pybase) id = value,

/* Stable status codes (CF_OK, CF_E_ARG, ... CF_E_END: the table above). */
typedef enum cf_status { CF_STATUS_TABLE(CF__STATUS_ENUM_ROW) } cf_status;

/* A short fixed English text for a status ("malformed TIFF", ...), or
 * "unknown error" for a value not in the table.  Never NULL; thread-safe. */
CF_API const char *cf_strerror(cf_status s);

/* The status's enum constant as text ("CF_OK", "CF_E_NOTFOUND", ...), or
 * NULL for a value not in the table.  Thread-safe. */
CF_API const char *cf_status_name(cf_status s);

/* Error detail.  Plain struct so that each call (or work item) can carry its
 * own: there is no global error state. */
typedef struct cf_error {
    cf_status code;
    int http_status; /* last HTTP status involved, 0 if none */
    char msg[768];   /* NUL-terminated, secrets redacted; a file or URL
                        name longer than 199 bytes appears as its head,
                        "..." and its tail, so the reason still fits */
} cf_error;

/* ------------------------------------------------------------------ */
/* Data types                                                          */
/* ------------------------------------------------------------------ */

typedef enum cf_dtype {
    CF_DT_UNKNOWN = 0,
    CF_DT_U8 = 1,
    CF_DT_I8 = 2,
    CF_DT_U16 = 3,
    CF_DT_I16 = 4,
    CF_DT_U32 = 5,
    CF_DT_I32 = 6,
    CF_DT_U64 = 7,
    CF_DT_I64 = 8,
    CF_DT_F32 = 9,
    CF_DT_F64 = 10,
    /* Complex samples, GDAL's complex types: the real part, then the
     * imaginary part, of the size below each. */
    CF_DT_CI16 = 11, /* CInt16 (Sentinel-1 SLC): 2 x int16 */
    CF_DT_CI32 = 12, /* CInt32: 2 x int32 */
    CF_DT_CF32 = 13, /* CFloat32: 2 x float32, NumPy's complex64 */
    CF_DT_CF64 = 14  /* CFloat64: 2 x float64, NumPy's complex128 */
} cf_dtype;

/* Bytes per sample (0 for CF_DT_UNKNOWN); a complex sample counts both
 * parts (CF_DT_CI16: 4). */
CF_API size_t cf_dtype_size(cf_dtype t);
/* NumPy name ("uint8", "float32", "complex64", ...); the complex integers,
 * which NumPy lacks, are "complex_int16" and "complex_int32" (rasterio's
 * names); "unknown" for CF_DT_UNKNOWN. */
CF_API const char *cf_dtype_name(cf_dtype t);
/* 1 for the four complex types. */
CF_API int cf_dtype_is_complex(cf_dtype t);
/* The type a complex integer is widened to where NumPy types are needed
 * (Python, .npy files), exactly as GDAL's ReadAsArray widens it:
 * CF_DT_CF32 for CF_DT_CI16, CF_DT_CF64 for CF_DT_CI32; t for the others. */
CF_API cf_dtype cf_dtype_complex_float(cf_dtype t);
/* Widen n complex integer samples of type t (CF_DT_CI16 or CF_DT_CI32)
 * at src to cf_dtype_complex_float(t) at dst (exact: every int16 is a
 * float32, every int32 a float64).  dst may equal src when the buffer is
 * sized for the result and the input fills its first part (converted from
 * the end).  Other types: nothing is done.  Thread-safe. */
CF_API void cf_complex_widen(cf_dtype t, const void *src, void *dst, size_t n);

/* Safety caps applied to everything read from a file.  Documented here so
 * that users know what a "limit" error means. */
#define CF_MAX_BANDS 4096                 /* SamplesPerPixel */
#define CF_MAX_IFDS 256                   /* IFDs in one chain */
#define CF_MAX_DIMENSION (1u << 24)       /* width or height in pixels */
#define CF_MAX_CHUNK_BYTES (1ull << 30)   /* one decoded tile or strip */
#define CF_MAX_HEADER_BYTES (256ull << 20)/* all header bytes of one file */
#define CF_MAX_CHUNKS (1ull << 26)        /* tiles or strips of one IFD */

/* ------------------------------------------------------------------ */
/* I/O context: the event loop every remote read goes through          */
/* ------------------------------------------------------------------ */

typedef struct cf_io cf_io;

/* Signing hrefs that need it before use (an Azure SAS, a presigned URL,
 * Microsoft Planetary Computer's tokens): called with a remote URL as it
 * was opened, it writes the URL to request into signed_url (cap bytes,
 * NUL-terminated) and the POSIX time its signature expires into *expires
 * (0: never).  The signed URL may add or change the query only: one that
 * points to another scheme, host or path is refused (CF_E_AUTH, naming
 * the unsigned one).  cf_io calls it when an object is opened and again
 * before a request once the signature is within sign_margin_s of
 * expiring (one thread at a time per object; the others wait); never
 * from the io loop's thread.  Errors go into err with their status and
 * fail the open or the read, naming the URL.  The signed URL lives in
 * memory only: the header cache files the object under its URL without
 * the signature. */
typedef cf_status (*cf_sign_fn)(void *user, const char *url, char *signed_url,
                                size_t cap, double *expires, cf_error *err);

typedef struct cf_io_options {
    size_t struct_size;
    int max_inflight;          /* concurrent requests (default 64) */
    size_t header_bytes;       /* speculative first read (default 64 KiB) */
    size_t merge_gap;          /* merge ranges closer than this (default 64 KiB) */
    double request_timeout_s;  /* total deadline per request incl. retries (60) */
    double connect_timeout_s;  /* (10) */
    double low_speed_time_s;   /* stall: below low_speed_bytes/s this long (15) */
    long low_speed_bytes;      /* (1024) */
    int max_retries;           /* per request (6) */
    /* Retry quota shared by all requests of the io (1000): a token bucket
     * of this many retries (a retry after a timeout takes two), refilled
     * from empty in 60 s and by requests that succeed, as the AWS SDKs'
     * retry quota (docs/remote.md).  0: no retries. */
    int retry_budget;
    double retry_base_ms;      /* backoff base (100 ms), jittered, doubling */
    double retry_max_ms;       /* backoff cap (10 s) */
    int verify_tls;            /* 1 (default); 0 only by explicit choice */
    const char *header_cache_dir; /* persist header indexes here (NULL: off) */
    const char *ca_file;       /* CAs to trust, PEM (NULL: the system's); must be readable */
    /* Local files: descriptors kept open at once (0: a quarter of
     * RLIMIT_NOFILE, 16..1024).  Beyond it the least recently read file is
     * closed and reopened at its next read, refused if it changed. */
    int max_open_files;
    /* Hedged requests (docs/remote.md): a request with no response yet
     * after this long is sent once more and the first answer wins, as
     * Amazon advises for S3's slow tail.  0 (default): the 95th
     * percentile of this io's recent first-byte times or twice their
     * median, whichever is longer, at least 100 ms (none before 32 are
     * known); > 0: this many ms; < 0: never.  Hedges are at most a tenth
     * of the requests, and never used for local files. */
    double hedge_after_ms;
    /* On-disk header cache (header_cache_dir): bytes its folder may hold;
     * past it the least recently used entries are removed.  0: default
     * CF_HEADER_CACHE_MAX_DEFAULT.  docs/reader.md, "Header cache
     * security", has the folder and file rules. */
    uint64_t header_cache_max_bytes;
    /* Memory that parsing one file's header may take: the header bytes it
     * holds plus the tile index it builds (16 bytes per tile or strip).
     * A file needing more fails to open with CF_E_LIMIT before anything
     * that large is fetched or allocated.  0: default
     * CF_HEADER_MEMORY_DEFAULT. */
    uint64_t header_memory_max;
    /* Decoded tiles and strips kept for the next window reads of this io's
     * files (cf_cog_read and what reads through it), shared by them and
     * by the threads reading at once (a chunk two reads miss together is
     * decoded once), least recently used out first: a strip or tile that
     * a window needs only part of is decoded once for the windows beside
     * it, as GDAL's block cache does.  0: 5% of the physical memory, at
     * least 256 MiB (GDAL_CACHEMAX's default); < 0: none.  Held lazily:
     * only what reads put there. */
    int64_t cache_bytes;
    /* Remote URLs signed before use (cf_sign_fn; NULL: as given), with
     * sign_user passed back; renewed sign_margin_s (300) before their
     * signatures expire.  The function and sign_user must outlive the
     * io. */
    cf_sign_fn sign;
    void *sign_user;
    double sign_margin_s;
} cf_io_options;

/* 1 GiB of cached headers: some 16,000 files of 64 KiB. */
#define CF_HEADER_CACHE_MAX_DEFAULT (1ull << 30)
/* 256 MiB: a 100k x 100k COG of 256-pixel tiles indexes ~150k tiles per
 * band plane (2.4 MB); 16 million tiles fit. */
#define CF_HEADER_MEMORY_DEFAULT (256ull << 20)

/* I/O statistics (monotonic counters since cf_io_new). */
typedef struct cf_io_stats {
    uint64_t requests;        /* requests sent (incl. retries); local: reads */
    uint64_t retries;
    uint64_t bytes_fetched;   /* body bytes received; local: bytes read */
    uint64_t connect_failures;
    uint64_t read_failures;
    uint64_t header_cache_hits;
    int inflight;             /* requests in flight now */
    int max_inflight;         /* current limit */
    uint64_t hedges;          /* requests sent a second time (hedged) */
    uint64_t hedge_wins;      /* ... whose answer came from the second copy */
    int peak_inflight;        /* most requests in flight at once so far */
} cf_io_stats;

CF_API void cf_io_options_init(cf_io_options *opt);

/* Create an I/O context: starts its loop thread lazily on the first remote
 * request.  Thread-safe to use from many threads at once.  Survives fork():
 * the child detects the pid change and builds a fresh loop. */
CF_API cf_status cf_io_new(const cf_io_options *opt, cf_io **out, cf_error *err);
CF_API void cf_io_free(cf_io *io);
CF_API void cf_io_get_stats(cf_io *io, cf_io_stats *out);
/* Change the in-flight limit (used by the adaptive loader). Thread-safe. */
CF_API void cf_io_set_max_inflight(cf_io *io, int n);
/* Hard ceiling of in-flight requests this io accepts. */
#define CF_IO_MAX_INFLIGHT 1024

/* Read a whole (small) object into memory: a local path, file://, or any
 * remote URL form, through the same path as every read (credentials go
 * only where docs/remote.md says, retries, redirects, the ETag of the
 * first response pinned).  For a catalog's JSON (STAC), a manifest.
 * io may be NULL for a local file only.  The size comes from the first
 * response (a range read of header_bytes); an object larger than
 * max_bytes (1 .. CF_IO_GET_MAX) fails with CF_E_LIMIT naming the URL
 * (redacted) before the rest is fetched or allocated.  A server that
 * ignores Range may send up to max_bytes + 1 bytes before it is refused.
 * On success *data (owned by the caller: cf_io_get_free) holds *len bytes
 * and a NUL after them; on failure *data is NULL.  Thread-safe; blocks. */
#define CF_IO_GET_MAX (1ull << 30)
CF_API cf_status cf_io_get(cf_io *io, const char *url, size_t max_bytes, void **data,
                           size_t *len, cf_error *err);
CF_API void cf_io_get_free(void *data);

/* ------------------------------------------------------------------ */
/* COG: one opened (Geo)TIFF                                           */
/* ------------------------------------------------------------------ */

typedef struct cf_cog cf_cog;

typedef struct cf_level_info {
    uint32_t width, height;
    uint32_t tile_width, tile_height; /* strips: width x rows_per_strip */
    int tiled;
} cf_level_info;

typedef struct cf_cog_info {
    uint32_t width, height, count;
    cf_dtype dtype;
    uint32_t bits_per_sample;  /* 1 for bit masks */
    uint32_t tile_width, tile_height;
    int tiled;                 /* 0: stripped */
    int compression;           /* TIFF code */
    const char *compression_name; /* "DEFLATE", "LERC_ZSTD", ... */
    int predictor;             /* 1, 2 or 3 */
    int planar;                /* 1 pixel-interleaved, 2 band-interleaved */
    int photometric;
    int bigtiff, big_endian;
    int nlevels;               /* 1 + number of overviews */
    int has_mask;              /* internal (NewSubfileType) mask present */
    int has_geotransform;
    double geotransform[6];    /* GDAL order */
    int epsg;                  /* 0 when unknown */
    int has_nodata;
    double nodata;
    uint64_t file_size;
    uint64_t header_bytes;     /* bytes fetched to open */
    uint32_t header_requests;  /* requests made to open (0: cache hit) */
    const char *etag;          /* NULL for local files */
} cf_cog_info;

/* Open a COG (local path, file://, http(s)://, s3://, az://, gs://).
 * `io` may be NULL for local files (a private io is used for remote ones).
 * The cf_cog keeps a reference to `io`: free the cog first.
 * Reads the header with one request of io's header_bytes (more only when the
 * header is larger).
 *
 * Every IFD a read can touch (full resolution, overviews, internal masks)
 * is checked here: a codec, sample format or colour space cogfeed cannot
 * read as GDAL does fails the open with CF_E_UNSUPPORTED and a message
 * naming it ("IFD 2 (overview 1): JBIG (compression 34661) is not
 * supported: ...").  Other pages of a multi-page file are not read and
 * not checked.  What GDAL tolerates opens with a warning
 * (cf_cog_warnings): an IFD chain that loops or breaks after the first
 * IFD (the IFDs before it are read), tiles past the end of a truncated
 * file (reading one fails, naming it). */
CF_API cf_status cf_cog_open(cf_io *io, const char *url, cf_cog **out, cf_error *err);
CF_API void cf_cog_close(cf_cog *cog);

/* Options of cf_cog_open_ex: call cf_open_options_init first. */
typedef struct cf_open_options {
    size_t struct_size;
    /* 0 (default): 8-bit CMYK and CIELab read as RGBA and 8-bit YCbCr
     * that is not JPEG as RGB, as GDAL reads them.  1: the samples as
     * stored, as GDAL's GTIFF_RAW: prefix gives them (CMYK files that
     * carry other bands, e.g. NIR-R-G-B, need this); subsampled YCbCr is
     * then spread to one Y, Cb, Cr per pixel, unconverted.  JPEG's YCbCr
     * is always converted to RGB. */
    int raw_color;
} cf_open_options;

CF_API void cf_open_options_init(cf_open_options *opt);
/* cf_cog_open with options (NULL: the defaults). */
CF_API cf_status cf_cog_open_ex(cf_io *io, const char *url,
                         const cf_open_options *opt, cf_cog **out,
                         cf_error *err);

/* One file of cf_cog_open_many: its URL, and its result. */
typedef struct cf_open_req {
    const char *url;
    cf_cog *cog;               /* out: the opened file; NULL on failure */
    cf_status status;          /* out: this file's result */
    cf_error *err;             /* out, optional: this file's error (its
                                  message names the file) */
} cf_open_req;

/* Open many files at once: each is opened as cf_cog_open_ex opens it
 * (header cache, speculative header_bytes read, more reads as the parser
 * asks), but the opens run together as state machines driven by the
 * calling thread: every file's first request is sent at once, each later
 * round trip (IFDs past header_bytes) as soon as that file's last answer
 * came, so N remote files cost about one round trip of wall time instead
 * of N (the io loop keeps at most max_inflight requests in flight and
 * queues the others).  A header cache hit opens a file with no request,
 * before anything is sent.  Local files are read by the calling thread.
 * At most max_inflight files, and no more than header_memory_max bytes of
 * first reads, are being opened at once; the others wait their turn.
 *
 * Each req gets its own status, and its cog (NULL when it failed): one
 * failing file never loses the others.  Returns CF_OK when every file
 * opened, else the first failure's status (lowest index), with err
 * saying how many failed and that one's message.  The caller closes each
 * req's cog.  io: as cf_cog_open's (NULL: each file gets a private io;
 * pass one io to share its loop).  opt applies to every file (NULL: the
 * defaults).  Thread-safe: calls from many threads run independently. */
CF_API cf_status cf_cog_open_many(cf_io *io, cf_open_req *reqs, size_t n,
                                  const cf_open_options *opt, cf_error *err);

/* Information; strings stay valid until cf_cog_close. Thread-safe. */
CF_API void cf_cog_get_info(const cf_cog *cog, cf_cog_info *out);
/* Level 0 is full resolution; 1.. are overviews. */
CF_API cf_status cf_cog_level_info(const cf_cog *cog, int level, cf_level_info *out,
                                   cf_error *err);
/* Per-band scale/offset from GDAL_METADATA (1 and 0 when absent); band is
 * 1-based. */
CF_API double cf_cog_band_scale(const cf_cog *cog, int band);
CF_API double cf_cog_band_offset(const cf_cog *cog, int band);
/* A band's nodata value: 1 and *value when it has one (a GeoTIFF's
 * GDAL_NODATA applies to every band), 0 when not. */
CF_API int cf_cog_band_nodata(const cf_cog *cog, int band, double *value);
/* A band's description and unit from GDAL_METADATA; "" when none. */
CF_API const char *cf_cog_band_description(const cf_cog *cog, int band);
CF_API const char *cf_cog_band_unit(const cf_cog *cog, int band);
/* Metadata as GDAL's GetMetadata(domain) gives it: "KEY=VALUE" strings of
 * the dataset (band 0) or of a band (1..count), for a domain ("" or NULL:
 * the default one), NULL-terminated; NULL when there are none.  The
 * default domain of the dataset holds the TIFF tags GDAL shows
 * (TIFFTAG_DATETIME, TIFFTAG_SOFTWARE, TIFFTAG_IMAGEDESCRIPTION, ...,
 * TIFFTAG_XRESOLUTION), AREA_OR_POINT, and the items of GDAL_METADATA.
 * Strings stay valid until cf_cog_close.  Thread-safe. */
CF_API const char *const *cf_cog_metadata(const cf_cog *cog, int band,
                                   const char *domain);
/* The domains that have items, "" for the default one; NULL-terminated,
 * NULL when there are none. */
CF_API const char *const *cf_cog_metadata_domains(const cf_cog *cog, int band);
/* One item's value, or NULL. */
CF_API const char *cf_cog_metadata_item(const cf_cog *cog, int band,
                                 const char *domain, const char *key);
/* What the open tolerated as GDAL does, one problem a line (an IFD chain
 * that ends in a loop or a bad IFD, IFDs left out, tiles past the end of
 * the file); NULL when nothing.  Valid until cf_cog_close. */
CF_API const char *cf_cog_warnings(const cf_cog *cog);
/* The URL with any query string and credentials removed (for messages;
 * one longer than 199 bytes keeps its head and tail, see cf_error). */
CF_API const char *cf_cog_name(const cf_cog *cog);

/* Read a window at a level into `dst`: band-sequential (bands, h, w), the
 * file's dtype, native byte order.  `bands` are 1-based (NULL, nbands=0: all
 * bands).  Pixels outside the image are nodata (0 without nodata).  1-bit
 * samples come out as one byte per pixel, 0/1 as GDAL reads them
 * (cf_cog_read_mask gives an internal mask as 0/255).
 * dst_size must be >= nbands*w*h*dtype size.  Thread-safe: many threads may
 * read from one cog at once.  On error the contents of dst are unspecified
 * but never stale heap data of another tile (decoders zero on failure). */
CF_API cf_status cf_cog_read(cf_cog *cog, int level, int64_t x, int64_t y,
                             uint32_t w, uint32_t h, const int *bands, int nbands,
                             void *dst, size_t dst_size, cf_error *err);

/* Read the internal mask (255 valid, 0 invalid) of a window: one byte per
 * pixel.  CF_E_STATE when the file has no internal mask. */
CF_API cf_status cf_cog_read_mask(cf_cog *cog, int level, int64_t x, int64_t y,
                                  uint32_t w, uint32_t h, uint8_t *dst,
                                  size_t dst_size, cf_error *err);

/* One window of cf_cog_read_many: the arguments of cf_cog_read, and its
 * result. */
typedef struct cf_read_req {
    cf_cog *cog;
    int level;
    int64_t x, y;
    uint32_t w, h;
    const int *bands;          /* 1-based; NULL with nbands 0: all */
    int nbands;
    void *dst;
    size_t dst_size;
    cf_status status;          /* out: this window's result */
    cf_error *err;             /* out, optional: this window's error */
} cf_read_req;

/* Read many windows, of one file or many, at once: every window's tiles
 * are requested together (remote ones all in flight on their io loops,
 * local ones read by the calling thread) and decoded by `threads` threads
 * (0: one per CPU) as they arrive, straight into each window's dst.  A
 * tile several windows need (same cog, level and tile) is fetched and
 * decoded once and pasted into each.  Its memory (the decoders' scratch,
 * at most a quarter, and the compressed tiles in flight, the rest) stays
 * within `inflight_bytes` (0: 256 MiB): submission waits for room, and a
 * tile that can never fit fails its windows with
 * CF_E_LIMIT naming the file, level and tile.  Each req gets
 * its own status; returns CF_OK when every window was read, else the first
 * failure (err: its message).  Same output as cf_cog_read per window. */
CF_API cf_status cf_cog_read_many(cf_read_req *reqs, size_t n, int threads,
                           size_t inflight_bytes, cf_error *err);

/* One tile (or strip) of a level, for callers that fetch its compressed
 * bytes themselves -- their own HTTP client, object store or cache -- and
 * decode them with cf_cog_decode_chunk.  Chunks are numbered as the TIFF
 * stores them: row by row across the level (index = row * across + col),
 * and for a band-interleaved file (planar 2) band plane after band plane. */
typedef struct cf_chunk_info {
    uint64_t count;            /* chunks of this level, all planes */
    uint64_t offset;           /* its compressed bytes in the file ... */
    uint64_t byte_count;       /* ... and how many (0: sparse, no data) */
    uint32_t col, row, plane;  /* place in the grid; band plane (planar 2) */
    uint32_t width, height;    /* decoded pixels: the whole tile (edge
                                  tiles keep their stored padding); for a
                                  strip the image width and its rows */
    uint32_t samples;          /* per pixel, interleaved (1 for a plane) */
    uint32_t bits;             /* per decoded sample: the dtype's size * 8,
                                  or 1 for bit masks (packed, MSB first,
                                  rows padded to whole bytes) */
    cf_dtype dtype;            /* of the decoded samples (CF_DT_U8 for 1
                                  bit and colour-converted samples) */
    size_t size;               /* bytes cf_cog_decode_chunk writes */
} cf_chunk_info;

/* Describe chunk `index` of a level.  CF_E_ARG for a level or index that
 * does not exist (the message says how many there are); CF_E_FORMAT when
 * the chunk's offset and byte count lie outside the file (*out is filled
 * all the same: bytes from elsewhere can still be decoded). */
CF_API cf_status cf_cog_chunk_info(const cf_cog *cog, int level, uint64_t index,
                                   cf_chunk_info *out, cf_error *err);

/* Decode the `n` compressed bytes of chunk `index` of a level that the
 * caller already has into dst: the chunk as stored, pixel-interleaved
 * (height, width, samples) rows in native byte order, exactly as
 * cf_cog_read would decode it before cutting its window out (predictor
 * undone, odd depths and float16 widened, CMYK/CIELab/YCbCr converted as
 * the cog was opened), cf_chunk_info's layout and size.  dst_size must be
 * at least that size; only that many bytes are written.  A sparse chunk
 * (byte_count 0) given with n == 0 fills dst with the nodata value (0
 * without one), as cf_cog_read reads it.  The bytes are untrusted:
 * decoding stops at the chunk's size, and short, corrupt or foreign bytes
 * fail with CF_E_CODEC or CF_E_FORMAT and a message naming the file, level
 * and tile; dst is then zeroed.  Thread-safe, and no I/O is done. */
CF_API cf_status cf_cog_decode_chunk(cf_cog *cog, int level, uint64_t index,
                                     const void *src, size_t n, void *dst,
                                     size_t dst_size, cf_error *err);

/* cf_cog_chunk_info and cf_cog_decode_chunk for chunk `index` of a
 * level's internal mask (dtype CF_DT_U8; GDAL's 1 bit a pixel: bits 1,
 * decoded packed, MSB first, 1 where valid; an 8-bit mask: bits 8, non-zero
 * where valid; a sparse chunk decodes as not valid).  CF_E_ARG when the level has no internal mask.  With
 * cf_writer_write_encoded_tile they copy a file's tiles into another
 * without decoding them (docs/writer.md, "Tiles encoded elsewhere"). */
CF_API cf_status cf_cog_mask_chunk_info(const cf_cog *cog, int level, uint64_t index,
                                        cf_chunk_info *out, cf_error *err);
CF_API cf_status cf_cog_decode_mask_chunk(cf_cog *cog, int level, uint64_t index,
                                          const void *src, size_t n, void *dst,
                                          size_t dst_size, cf_error *err);

/* Requests this cog has sent so far (open + reads).  Thread-safe. */
CF_API uint64_t cf_cog_requests(const cf_cog *cog);

/* What the window reads of a cog (cf_cog_read, cf_cog_read_mask and the
 * reads made through them) decoded since it opened.  Thread-safe. */
typedef struct cf_cog_stats {
    uint64_t chunks_decoded;  /* tiles and strips decoded (uncompressed
                                 ones pasted from their bytes are not) */
    uint64_t decoded_bytes;   /* what they decoded to: a strip decoded only
                                 down to a window's last rows counts those */
    uint64_t delivered_bytes; /* bytes of the windows read */
    uint64_t cache_hits;      /* chunks found decoded in the io's cache
                                 (cf_io_options.cache_bytes), or decoded by
                                 another reader that missed them first */
    uint64_t cache_misses;    /* chunks looked for there and not found */
} cf_cog_stats;
CF_API void cf_cog_get_stats(const cf_cog *cog, cf_cog_stats *out);

/* ------------------------------------------------------------------ */
/* Georeferencing: CRSs, grids, reading onto a grid (docs/reader.md)   */
/* ------------------------------------------------------------------ */

/* A coordinate reference system, held by PROJ.  Immutable and reference
 * counted: every function below is thread-safe.  Two CRSs are the same
 * when PROJ says they are equivalent (cf_crs_equivalent), whatever their
 * codes or names.  A file's CRS comes from its GeoKeys, EPSG codes or WKT
 * only (never a PROJ string, nothing naming a file).  PROJ's network
 * access is off in cogfeed's PROJ contexts whatever PROJ_NETWORK says;
 * the environment variable COGFEED_PROJ_NETWORK=ON turns it on. */
typedef struct cf_crs cf_crs;

/* Any CRS PROJ reads: "EPSG:32633" (or just "32633"), "OGC:CRS84",
 * "ESRI:102100", WKT1 or WKT2, PROJJSON, a PROJ string ("+proj=utm
 * +zone=33 +datum=WGS84"; the caller's own text: a PROJ string can name
 * files, so never pass one taken from a file).  A deprecated EPSG code is replaced by its
 * successor, as GDAL does (cf_crs_epsg_written keeps the code as given).
 * CF_E_ARG, naming what PROJ said, when it is not a CRS, and for a
 * projected CRS whose base is not geographic (a projection on a geocentric
 * CRS: PROJ builds one but cannot use it). */
CF_API cf_status cf_crs_from_string(const char *text, cf_crs **out, cf_error *err);
CF_API cf_status cf_crs_from_epsg(int code, cf_crs **out, cf_error *err);
/* Another reference to crs (the same object). */
CF_API cf_crs *cf_crs_ref(const cf_crs *crs);
/* Drop a reference; NULL is fine. */
CF_API void cf_crs_free(cf_crs *crs);

/* The EPSG code of the CRS (after a deprecated code's replacement, as
 * GDAL resolves it: 2143 -> 2948, 3410 -> 6933), or of an equivalent
 * EPSG CRS of the same name; 0 for a user-defined CRS. */
CF_API int cf_crs_epsg(const cf_crs *crs);
/* The EPSG code as written in the file (or given to cf_crs_from_*),
 * deprecated or not; 0 when none was. */
CF_API int cf_crs_epsg_written(const cf_crs *crs);
/* Name ("WGS 84 / UTM zone 33N"), WKT2 (2019) and PROJJSON of the CRS.
 * Strings live as long as the crs; never NULL (empty when PROJ cannot
 * write the form). */
CF_API const char *cf_crs_name(const cf_crs *crs);
CF_API const char *cf_crs_wkt(const cf_crs *crs);
CF_API const char *cf_crs_projjson(const cf_crs *crs);
/* "EPSG:n" when there is an EPSG code, else the WKT2: what
 * cf_crs_from_string reads back to an equivalent CRS. */
CF_API const char *cf_crs_to_string(const cf_crs *crs);

typedef enum cf_crs_kind {
    CF_CRS_OTHER = 0,
    CF_CRS_GEOGRAPHIC = 1,     /* degrees of longitude and latitude */
    CF_CRS_PROJECTED = 2,
    CF_CRS_ENGINEERING = 3     /* local: no link to the Earth */
} cf_crs_kind;
/* Kind of the horizontal part (a compound CRS's first component). */
CF_API cf_crs_kind cf_crs_kind_of(const cf_crs *crs);
/* Linear unit of a projected or engineering CRS in metres per unit (1 for
 * metre; 0 for a geographic CRS). */
CF_API double cf_crs_linear_unit(const cf_crs *crs);

/* 1 when PROJ finds the horizontal parts of a and b equivalent, axis order
 * of geographic CRSs aside (GeoTIFF always stores longitude first): the
 * test that decides between an affine map and a reprojection.  NULL is
 * equivalent only to NULL. */
CF_API int cf_crs_equivalent(const cf_crs *a, const cf_crs *b);

/* The file's CRS (borrowed: lives as long as the cog), or NULL when it has
 * none (no GeoKeys, or keys that describe no CRS PROJ can build;
 * cf_cog_crs_note then says why). */
CF_API const cf_crs *cf_cog_crs(const cf_cog *cog);
CF_API const char *cf_cog_crs_note(const cf_cog *cog);

/* A grid: CRS, affine transform, size.  Pixel-is-area, as GDAL: the
 * transform (GDAL order) maps pixel corners, x = t[0] + col*t[1] +
 * row*t[2], y = t[3] + col*t[4] + row*t[5]; pixel centres are at +0.5.
 * `crs` is borrowed: it must outlive every use of the grid (NULL: no CRS,
 * which only another NULL-CRS grid can be read onto). */
typedef struct cf_grid {
    const cf_crs *crs;
    double transform[6];
    uint32_t width, height;
} cf_grid;

/* The grid of resolution (xres, yres) (> 0, CRS units) covering bounds
 * (xmin, ymin, xmax, ymax) from its top-left corner, north up, with
 * gdalwarp's rule for -te with -tr: width = (int)((xmax - xmin + xres/2)
 * / xres), likewise height.  CF_E_ARG for empty bounds or a size of 0 or
 * above CF_MAX_DIMENSION. */
CF_API cf_status cf_grid_from_bounds(const cf_crs *crs, const double bounds[4],
                              double xres, double yres, cf_grid *out,
                              cf_error *err);
/* The grid of the cog's level (0 full resolution; an overview's transform
 * scaled by the size ratio, as GDAL does): the "like this file" grid.
 * CF_E_STATE when the file has no geotransform. */
CF_API cf_status cf_cog_grid(const cf_cog *cog, int level, cf_grid *out,
                      cf_error *err);
/* The window (x, y, w, h) of g as a grid of its own (a patch). */
CF_API cf_status cf_grid_window(const cf_grid *g, int64_t x, int64_t y, uint32_t w,
                         uint32_t h, cf_grid *out, cf_error *err);
/* (xmin, ymin, xmax, ymax) of the grid's corners. */
CF_API void cf_grid_bounds(const cf_grid *g, double out[4]);

/* Resampling kernels, as GDAL's warper computes them (docs/reader.md):
 * nearest and mode keep values (labels), bilinear and cubic (Catmull-Rom)
 * interpolate and widen their support by the ratio when downsampling,
 * average weighs every source pixel by its overlap. */
typedef enum cf_resampling {
    CF_RS_NEAREST = 0,
    CF_RS_BILINEAR = 1,
    CF_RS_CUBIC = 2,
    CF_RS_AVERAGE = 3,
    CF_RS_MODE = 4
} cf_resampling;
#define CF_RS_COUNT 5
/* "nearest", "bilinear", "cubic", "average", "mode". */
CF_API const char *cf_resampling_name(cf_resampling r);
/* The kernel of that name (also GDAL's "near"); CF_E_ARG otherwise. */
CF_API cf_status cf_resampling_from_name(const char *name, cf_resampling *out,
                                  cf_error *err);

#define CF_LEVEL_AUTO (-1)

typedef struct cf_warp_options {
    size_t struct_size;
    cf_resampling resampling;  /* (CF_RS_NEAREST) */
    /* Source level: CF_LEVEL_AUTO (default) picks an overview as gdalwarp
     * does when the target is coarser; >= 0 reads that level. */
    int level;
    /* Reprojection: the most a source position may be off from the exact
     * transformation, in source pixels (0.125, gdalwarp's -et default); 0:
     * every target pixel goes through PROJ (slow). */
    double error_threshold;
    /* Source nodata: -1 (default) the file's GDAL_NODATA, 0 none, 1 the
     * value src_nodata.  Nodata samples never contribute; a target pixel
     * with no valid source stays dst nodata. */
    int src_nodata_set;
    double src_nodata;
    /* Fill of target pixels without a value: -1 (default) the source's
     * nodata, or 0 when it has none; 0: 0; 1: dst_nodata. */
    int dst_nodata_set;
    double dst_nodata;
    /* Out: the level read (for CF_LEVEL_AUTO). */
    int level_used;
} cf_warp_options;

CF_API void cf_warp_options_init(cf_warp_options *opt);

/* Read the cog onto `grid`: every target pixel gets the `resampling` of
 * the source pixels under it, computed as GDAL's warper does (gdalwarp
 * onto the same grid is the oracle: docs/conformance.md).  Same CRS: an
 * affine map; another CRS: PROJ on a sparse lattice of points, the rest
 * interpolated within opt.error_threshold.  The footprint of the grid plus
 * the kernel's margin is read in one batch through cf_cog_read, from the
 * level opt.level (auto: an overview when the grid is coarser); with an
 * internal mask, masked pixels are invalid.  dst: band-sequential (bands,
 * height, width), the file's dtype, at least nbands*width*height*size
 * bytes.  CF_E_STATE when the file has no geotransform, or its CRS or the
 * grid's is missing while the other is set; CF_E_UNSUPPORTED when PROJ
 * has no transformation between them.  opt may be NULL (defaults).
 * Thread-safe like cf_cog_read. */
CF_API cf_status cf_cog_read_grid(cf_cog *cog, const cf_grid *grid, const int *bands,
                           int nbands, cf_warp_options *opt, void *dst,
                           size_t dst_size, cf_error *err);
/* The level cf_cog_read_grid reads for `grid` with `opt` (NULL: defaults),
 * without reading: the overview GDAL's warper would decode. */
CF_API cf_status cf_cog_grid_level(cf_cog *cog, const cf_grid *grid,
                            const cf_warp_options *opt, int *level,
                            cf_error *err);

/* ------------------------------------------------------------------ */
/* Vector labels: polygons burnt into the label mask of any grid        */
/* ------------------------------------------------------------------ */

/* Polygons with class values (fields, flood outlines, building
 * footprints), burnt into the label mask of a grid with gdal_rasterize's
 * rules: a pixel takes a feature's value when its centre is inside (holes
 * and overlapping parts of one feature by the even-odd rule), or, with
 * all_touched, when the feature's outline passes through it too
 * (gdal_rasterize -at); where features overlap the later one (in the
 * given order) wins; elsewhere 0.  Indexed once (a packed Hilbert R-tree
 * over the features' bounds): a grid reads only the features its bounds
 * select.  Immutable and thread-safe once made. */
typedef struct cf_vlabels cf_vlabels;

/* n features: feature i is wkb[i] (wkb_len[i] bytes of Well-Known Binary,
 * a Polygon or MultiPolygon, either byte order; Z and M are ignored) with
 * class value values[i] (an integer that fits int32).  crs: the features'
 * CRS (NULL: none; their coordinates are then taken to be in each grid's
 * CRS).  Everything is copied.  A malformed geometry fails with
 * CF_E_FORMAT naming the feature; another geometry type with
 * CF_E_UNSUPPORTED; more than 2^28 vertices in all with CF_E_LIMIT. */
CF_API cf_status cf_vlabels_new(size_t n, const uint8_t *const *wkb, const size_t *wkb_len,
                                const double *values, const cf_crs *crs, int all_touched,
                                cf_vlabels **out, cf_error *err);
/* Drop the caller's reference (a Loader keeps its own). */
CF_API void cf_vlabels_free(cf_vlabels *vl);
CF_API size_t cf_vlabels_count(const cf_vlabels *vl);
/* The smallest type holding every value: U8, U16 or I32. */
CF_API cf_dtype cf_vlabels_dtype(const cf_vlabels *vl);
/* The features' bounds (x0, y0, x1, y1) in their CRS. */
CF_API void cf_vlabels_bounds(const cf_vlabels *vl, double b[4]);
/* Burn the features onto `grid`: out holds grid->width x grid->height
 * samples of dtype (U8, U16, I16, U32, I32, F32 or F64; values are cast),
 * row-major, first set to 0.  When the features' CRS and the grid's
 * differ, the grid's outline selects features in the features' CRS and
 * their vertices are transformed with PROJ (not densified, as ogr2ogr
 * then gdal_rasterize); a feature with a vertex PROJ cannot transform is
 * left out.  *nfeatures (may be NULL): the features the grid's bounds
 * selected.  Thread-safe. */
CF_API cf_status cf_vlabels_rasterize(const cf_vlabels *vl, const cf_grid *grid, cf_dtype dtype,
                                      void *out, size_t *nfeatures, cf_error *err);

/* ------------------------------------------------------------------ */
/* STAC items: JSON documents into an index searched in map and time    */
/* ------------------------------------------------------------------ */

/* STAC Items read from their JSON (an Item, or an ItemCollection: a
 * FeatureCollection of items, as a STAC API search or a frozen search
 * returns them) into a compact index: per item its id, dates, cloud
 * cover, bbox and the raw text of its properties and geometry; per asset
 * its href, type, roles, projection-extension grid and bands (eo, raster
 * and STAC 1.1 band fields merged).  A 100,000-item, 200 MB collection is
 * read in about a second into a tenth of the memory its parsed JSON
 * takes.  The rules are those of python/cogfeed/stac.py (docs/datasets.md,
 * "STAC in"), which reads with this index; a document that breaks them,
 * or uses a form left to that reader (proj:projjson, a key given twice,
 * an escaped asset key, a BOM), is refused whole with CF_E_UNSUPPORTED saying
 * why, and adds nothing.  Not thread-safe while items are added; reads
 * (accessors, cf_stac_match, cf_stac_pick) from one thread at a time. */
typedef struct cf_stac cf_stac;

/* Bounds a hostile document may not pass (stac.py's Limits): items in the
 * index, assets of an item, bands of an asset, links of an item looked at
 * for its self link, JSON nesting (at most 900), the largest proj:shape
 * side.  Past one, the document is refused. */
typedef struct cf_stac_limits {
    size_t max_items, max_assets, max_bands, max_links;
    int max_nesting;
    int64_t max_side;
} cf_stac_limits;

/* A string of the index: len bytes at p (not NUL-terminated; UTF-8);
 * p NULL when the field is absent.  Valid until the next cf_stac_add_json
 * or cf_stac_free. */
typedef struct cf_stac_text {
    const char *p;
    size_t len;
} cf_stac_text;

#define CF_STAC_NO_TIME INT64_MIN

/* This struct grows at its end only; build against the library's header. */
typedef struct cf_stac_item_info {
    cf_stac_text id, collection;
    cf_stac_text properties, geometry; /* raw JSON text; geometry p NULL when null */
    cf_stac_text self_href;            /* the base of relative hrefs when the
                                          document had no location (else absent) */
    cf_stac_text datetime, start_datetime, end_datetime; /* RFC 3339, as written */
    int64_t when;   /* datetime, else start_datetime: UTC microseconds */
    int64_t t0, t1; /* [start_datetime or datetime, end_datetime or datetime] */
    double cloud_cover; /* NaN: none */
    double bbox[6];
    int nbbox;          /* 0, 4 or 6 */
    size_t nassets;
    uint32_t doc;       /* the cf_stac_add_json call it came from: 0, 1, ... */
    int32_t feature;    /* its index in that FeatureCollection; -1: an Item */
} cf_stac_item_info;

typedef struct cf_stac_asset_info {
    cf_stac_text key, href, type;
    int href_relative;  /* href is relative to the item's base (the document's
                           location, or its self link): join them */
    cf_stac_text roles; /* nroles NUL-terminated strings, one after another */
    size_t nroles;
    cf_stac_text crs;   /* "EPSG:32633" (from proj:epsg), proj:code, or WKT2 */
    int has_transform, has_shape, has_proj_bbox;
    double transform[6]; /* proj:transform (GDAL's order: a, b, c, d, e, f) */
    int64_t shape[2];    /* proj:shape: rows, columns */
    double proj_bbox[4];
    size_t nbands;
} cf_stac_asset_info;

typedef struct cf_stac_band_info {
    cf_stac_text name, common_name, data_type;
    int has_nodata, has_scale, has_offset;
    double nodata, scale, offset;
} cf_stac_band_info;

CF_API cf_status cf_stac_new(cf_stac **out, cf_error *err);
CF_API void cf_stac_free(cf_stac *ix);
/* Add one document's items.  base: where the document was read from (a
 * path or URL: relative hrefs are joined to it, and a remote document may
 * not name local files, an https one not plain http), or NULL (then an
 * item's absolute self link is its base).  *had_items: 1 when it was an
 * Item or ItemCollection, 0 for any other STAC type (a Catalog or
 * Collection: not read, nothing added).  CF_E_UNSUPPORTED: refused whole
 * (the message says why); CF_E_NOMEM. */
CF_API cf_status cf_stac_add_json(cf_stac *ix, const char *json, size_t len, const char *base,
                                  const cf_stac_limits *lim, int *had_items, cf_error *err);
/* The same for a local file of at most max_bytes, read through a memory
 * map whose pages are let go once parsed: a 300 MB collection does not
 * sit in memory beside its index.  base NULL: the path.  CF_E_NOTFOUND,
 * CF_E_IO naming the path; CF_E_LIMIT past max_bytes. */
CF_API cf_status cf_stac_add_file(cf_stac *ix, const char *path, const char *base,
                                  const cf_stac_limits *lim, uint64_t max_bytes, int *had_items,
                                  cf_error *err);
/* The Arrow C data interface (arrow.apache.org, "The Arrow C data
 * interface"), as the specification has programs declare it. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif
/* Add the items of a record batch of a STAC GeoParquet table (the layout
 * stac-geoparquet writes: one row per item; id, geometry as WKB, bbox as
 * a struct or list, links, assets, collection, and the properties as the
 * other columns), given through the Arrow C data interface as the batch's
 * struct schema and array (neither is released here).  Each row is read
 * as the JSON of its item (nulls dropped, timestamps as RFC 3339 in UTC,
 * WKB Points, Polygons and MultiPolygons as GeoJSON), by the rules of
 * cf_stac_add_json, as one document whose features are the rows.
 * CF_E_UNSUPPORTED: refused (a row the reference must read, or a column
 * of a type JSON does not hold: dictionary, map, binary other than the
 * geometry, NaN, dates). */
CF_API cf_status cf_stac_add_arrow(cf_stac *ix, const struct ArrowSchema *schema,
                                   const struct ArrowArray *batch, const char *base,
                                   const cf_stac_limits *lim, cf_error *err);
CF_API size_t cf_stac_count(const cf_stac *ix);
/* Item i, its asset k, and that asset's band b (indices in range: the
 * caller checks them against the counts). */
CF_API void cf_stac_item(const cf_stac *ix, size_t i, cf_stac_item_info *out);
CF_API void cf_stac_asset(const cf_stac *ix, size_t i, size_t k, cf_stac_asset_info *out);
CF_API void cf_stac_band(const cf_stac *ix, size_t i, size_t k, size_t b, cf_stac_band_info *out);
/* match[i] = 1 for every item meeting the search, else 0: `boxes`, nbox
 * longitude / latitude boxes (west, south, east, north; split one across
 * the antimeridian in two: a box whose west is past its east, or south
 * past its north, meets nothing; NaN is CF_E_ARG), meeting the item's bbox
 * (itself split there; an item without one meets none), looked up in a
 * packed Hilbert R-tree of the bboxes built by the first search; nbox 0:
 * no spatial condition.  [t_lo, t_hi] (UTC microseconds, CF_STAC_NO_TIME
 * for an open end) meeting the item's [t0, t1]; max_cloud (NaN: none):
 * eo:cloud_cover at most that (items without one left out).  match holds
 * cf_stac_count() bytes. */
CF_API cf_status cf_stac_match(cf_stac *ix, const double *boxes, size_t nbox, int64_t t_lo,
                               int64_t t_hi, double max_cloud, uint8_t *match, cf_error *err);
/* The asset of item i named `name`: the asset of that key, else the one
 * asset whose band has that common name ("red", "nir"), else among
 * several the one GeoTIFF, else the one of role "data".  Its index k, -1
 * for none, -2 when several remain (select by key). */
CF_API int64_t cf_stac_pick(const cf_stac *ix, size_t i, const char *name);

/* ------------------------------------------------------------------ */
/* Loader: sampler -> parallel reads -> batch ring                     */
/* ------------------------------------------------------------------ */

typedef struct cf_loader cf_loader;

/* An input as its catalog describes it (cf_loader_options.described):
 * its full-resolution grid (the CRS may be NULL: none), the dtype and the
 * number of bands a read gives. */
typedef struct cf_input_desc {
    cf_grid grid;              /* grid.width 0: not described */
    cf_dtype dtype;
    uint32_t count;
} cf_input_desc;

typedef enum cf_sampler_kind {
    CF_SAMPLER_RANDOM = 0,       /* uniform windows anywhere in the image */
    CF_SAMPLER_BLOCKED = 1,      /* each patch inside one tile (or, when
                                    larger than a tile, aligned to the grid) */
    CF_SAMPLER_TILE_SHUFFLE = 2, /* crops from a shuffle buffer of whole
                                    decoded tiles, mixing many tiles a batch */
    CF_SAMPLER_GRID = 3          /* every patch with a stride, fixed order */
} cf_sampler_kind;

/* Augmentation flags (cf_loader_options.augment). */
#define CF_AUG_FLIP 1u  /* random horizontal / vertical flips */
#define CF_AUG_ROT90 2u /* random rotation by a multiple of 90 degrees */

typedef struct cf_loader_options {
    size_t struct_size;
    /* Inputs.  images[f * time_steps + t] is scene t of sample file f. */
    const char *const *images;
    size_t nfiles;             /* sample files (images has nfiles*time_steps) */
    int time_steps;            /* scenes per sample (1): output [T,C,H,W];
                                  at most 2^20 (a mosaic's many scenes),
                                  at most 1024 steps out */
    const char *const *masks;  /* nfiles entries, aligned; NULL: none */
    const char *const *layers; /* layers[f * nlayers + l], aligned, stacked
                                  as channels after the image bands */
    int nlayers;
    const double *weights;     /* nfiles sampling weights; NULL: by area */
    const int *bands;          /* 1-based image bands; NULL/0: all */
    int nbands;
    int level;                 /* overview level (0 full resolution) */
    /* Sampling. */
    uint32_t patch_size;       /* square patch side in pixels (256) */
    uint32_t batch_size;       /* samples per batch (32) */
    cf_sampler_kind sampler;   /* (CF_SAMPLER_RANDOM) */
    uint32_t stride;           /* grid stride (0: patch_size) */
    uint64_t seed;
    uint64_t epoch;
    int rank, world_size;      /* shard of a distributed epoch (0, 1) */
    uint64_t epoch_length;     /* samples per epoch over all ranks (0:
                                  non-overlapping patches; grid: all) */
    int drop_last;             /* drop a last partial batch, and make every
                                  rank's shard the same length */
    unsigned augment;          /* CF_AUG_* flags (0) */
    /* Output. */
    cf_dtype out_dtype;        /* CF_DT_UNKNOWN: the files' dtype; CF_DT_F32 */
    int apply_scale_offset;    /* float32 only: per-band scale/offset (1) */
    const float *mean, *std;   /* float32 only: per output channel; NULL.
                                  nmean / nstd values (below) */
    int skip_errors;           /* drop and count failed samples (0: fail).
                                  Never dropped, even so: failures of the
                                  run rather than the sample (CF_E_AUTH:
                                  401/403/407/451, TLS; CF_E_NOTFOUND:
                                  404/410, a host that does not resolve;
                                  CF_E_CHANGED, CF_E_NOMEM):
                                  their batch fails.  See skip_limit. */
    /* Resources: every buffer comes out of these, never sized by the
     * input.  The loader's memory is at most
     *   prefetch x (image_bytes + mask_bytes    the ring (and a window
     *      + batch_size x P x P with valid_mask) record per sample)
     *   + cache_bytes                          decoded tiles kept: tile-
     *                                          shuffle; random patches;
     *                                          grid with patches sharing
     *                                          tiles; resampled inputs
     *   + inflight_bytes                       everything else:
     *       readers x one patch of scratch     (at most half of it)
     *       + decode scratch of the kits       (at most a quarter)
     *       + source windows beyond a reader's (an eighth, only when an
     *         scratch                           input is resampled)
     *       + compressed tiles being fetched   (the rest)
     * (cf_loader_stats.memory_budget); readers wait for room rather than
     * allocate past it, and a tile that can never fit (its compressed
     * bytes above the fetch share, or its decode above the decode share)
     * fails its sample with CF_E_LIMIT naming the file, level and tile.
     * Not counted: the files' headers (bounded per file), thread stacks
     * and the io loops' connection buffers. */
    int prefetch;              /* batch slots in the ring (0: auto:
                                  ceil(threads / batch_size) + 2, at least
                                  4, at most 2 x inflight_bytes of slots) */
    int threads;               /* reader threads, each reading and decoding
                                  one patch at a time (0: auto: 2 x cores
                                  + 2 local; remote 128, or 32 per
                                  core where that is more); at least
                                  concurrency */
    union {
        int concurrency;       /* patches read at once; 0: adaptive, up to
                                  the threads and inflight_bytes.  (Not the
                                  io's max_inflight, which counts requests.) */
        int max_inflight;      /* its old name: deprecated, same member */
    };
    size_t inflight_bytes;     /* byte budget of patches being read, as
                                  above (0: auto: 256 MiB, 64 MiB per
                                  core on machines of more than 4 cores,
                                  twice that when a file is remote);
                                  caps the reader threads */
    size_t cache_bytes;        /* decoded tiles kept: tile-shuffle's
                                  buffer; with other samplers the tiles
                                  that patches meet again (random; grid
                                  and blocked patches smaller than tiles;
                                  resampled inputs), shared by readers
                                  that need one at the same time (one
                                  fetch and decode).  Default: 5% of the
                                  physical memory (or of the cgroup's
                                  limit), at least 256 MiB: GDAL_CACHEMAX's
                                  default, which TorchGeo's workers each
                                  get, so that random patches over a
                                  dataset partly in memory hit tiles
                                  decoded before.  0: none */
    cf_io *io;                 /* NULL: the loader makes its own */
    /* With io NULL: the options of the io loops the loader makes (TLS,
     * timeouts, retries, header cache); NULL: defaults.  Read during
     * cf_loader_new only.  Reading remote files with adaptive
     * concurrency, the loader resizes their max_inflight as it goes. */
    const cf_io_options *io_options;
    /* skip_errors gives up (the batch fails with its first failure, the
     * message saying so) when more than this share of the last
     * max(64, 2 x batch_size) samples were dropped, so that a run whose
     * reads mostly fail (a server gone, expired credentials) stops
     * instead of delivering empty batches.  In [0, 1]; 1: never (0.5). */
    double skip_limit;
    /* Values in mean and std: each must be the number of output channels
     * (cf_loader_new fails otherwise).  0 with the array set: one per
     * output channel, unchecked (callers built before these fields). */
    uint32_t nmean, nstd;
    /* Grids (docs/loader.md, "Grids").  Each sample file has a target
     * grid, and every input of its samples (each scene, each layer, the
     * mask) is read onto it: as it is where it lies on the grid (a whole
     * pixel shift is a plain read), resampled where its resolution or
     * origin differs (the overview GDAL would pick when coarser), and
     * reprojected (PROJ, within error_threshold) where its CRS differs. */
    const cf_grid *grid;       /* one target grid for every sample file:
                                  the sampler draws windows of it (its crs
                                  is borrowed during cf_loader_new only);
                                  NULL: see grid_crs */
    const cf_crs *grid_crs;    /* with grid NULL: each file's target is
                                  its image's footprint in this CRS at
                                  grid_res, snapped outwards to multiples
                                  of it (gdalwarp -t_srs -tr -tap); NULL:
                                  the image's own grid at `level` */
    double grid_res[2];        /* x, y resolution (> 0) with grid_crs */
    cf_resampling resampling;  /* images and layers (CF_RS_BILINEAR) */
    cf_resampling mask_resampling;          /* (CF_RS_NEAREST) */
    const cf_resampling *layer_resampling;  /* nlayers kernels; NULL:
                                               `resampling` for all */
    /* An input in another CRS than its target grid (PROJ's equivalence,
     * not code equality): 1 (default) reprojected; 0 refused, naming the
     * file and both CRSs. */
    int reproject;
    /* An input without georeferencing (no geotransform; or no CRS while
     * the target has one), or a stack whose image has none: 0 (default)
     * refused, naming the file; 1 read pixel for pixel, which needs its
     * size at `level` to equal the target's. */
    int ungeoreferenced;
    double error_threshold;    /* reprojection, source pixels (0.125) */
    /* A valid-pixel mask per sample (cf_batch.valid): 1 where every scene
     * and layer of the sample has data, 0 where any has none: outside the
     * file, its nodata value (a pixel is invalid when any band holds it;
     * NaN nodata: NaN), its internal mask, and, resampled, where the warp
     * leaves a band at the nodata or (without a nodata) finds no source
     * pixel valid in every band (gdalwarp -dstalpha's alpha).  The mask
     * file (labels) does not count.  Augmented with the image.  Costs
     * batch_size x P x P bytes per ring slot (0) */
    int valid_mask;
    /* Each sample file's scenes (time_steps of them) make one mosaic
     * instead of a time series: every pixel from the first scene, in the
     * order given, that has data there (valid as valid_mask says it, for
     * all bands at once: a pixel's bands come from one scene), each scene
     * read onto the sample's target grid (its own CRS reprojected).
     * layout.time_steps is 1; layers and the mask are read once.  A scene
     * is read only while pixels of the patch are left without data (with
     * the first scenes when some pixel lies outside the footprints of the
     * scenes before it: it is read then whatever they hold), and neither
     * read nor opened for a patch its footprint misses (a patch costs a
     * footprint test per scene, not a read).  Pixels no
     * scene covers keep the first scene's fill (its nodata, or 0) (0) */
    int mosaic;
    /* Per-scene classification masks (Sentinel-2's SCL, Landsat's QA
     * classes), one per image (scene_masks[f * time_steps + t], as
     * images), or NULL.  Each is read onto the sample's grid with its
     * scene (nearest), and where its value is one of the
     * ninvalid_classes values of invalid_classes (compared as doubles), or
     * where it has no data itself (outside it, its nodata), that scene has
     * no data: those pixels are 0 in the valid mask, and a mosaic takes
     * them from a later scene.  Read only with valid_mask or mosaic. */
    const char *const *scene_masks;
    const double *invalid_classes;
    uint32_t ninvalid_classes;  /* at most 256 */
    /* Patches no scene reaches, known from the scenes' footprints on the
     * target grid (their headers, nothing read): the grid sampler leaves
     * them out of the epoch, random and blocked draw again (up to 32
     * times).  Conservative: a resampled scene's footprint is the bounds
     * of its outline, padded.  Not with tile-shuffle.  Counted by
     * cf_loader_empty (0) */
    int skip_empty;
    /* A region of interest: polygons (rings of roi_ring_len[r] (x, y)
     * vertices each, consecutive in roi_xy; polygon p has the next
     * roi_poly_rings[p] rings, its outer ring and holes filled by the
     * even-odd rule; the region is their union; roi_poly_rings NULL: one
     * polygon of all rings) in roi_crs (NULL: each file's target grid's
     * CRS).  Every patch meets it: the grid sampler keeps the windows that
     * meet it (each of its pixels in a window of the epoch), random draws
     * around it (again where a window misses a concave part or a hole,
     * then around a point of its outline), weighting each file by the
     * region's area in it; files it misses are not drawn.
     * Needs georeferenced targets.  Read during cf_loader_new only;
     * counted in cf_loader_empty's left_out / redrawn.  Not with
     * tile-shuffle (NULL / 0) */
    const double *roi_xy;
    const uint32_t *roi_ring_len;
    uint32_t roi_nrings;
    const cf_crs *roi_crs;
    const uint32_t *roi_poly_rings;
    uint32_t roi_npolys;
    /* Labels from polygons: each sample's mask burnt from these features
     * on the sample's target grid (cf_vlabels_rasterize), of type
     * cf_vlabels_dtype, augmented with the image.  Instead of masks; needs
     * georeferenced targets.  The loader keeps a reference (NULL) */
    const cf_vlabels *labels;
    /* Time series of mosaics (a date made of the scenes of one solar
     * day): with mosaic, each run of step_scenes consecutive scenes makes
     * one output step, a mosaic of its own scenes as `mosaic` says;
     * time_steps must be a multiple of it, and the output has
     * time_steps / step_scenes steps: images[f * time_steps + s *
     * step_scenes + k] is scene k of step s.  Layers are read once per
     * step (as in a series); scene masks go with their scenes.  0: every
     * scene of a sample file in one mosaic, one step out (0) */
    uint32_t step_scenes;
    /* valid_mask: one plane per output step, step s's own validity (its
     * scene or mosaic, its scenes' masks, its layers) rather than one
     * plane for all steps; cf_batch's valid is then n x [T, P, P] (0) */
    int valid_per_step;
    /* Layers per output step instead of per sample file: layers[(f * S +
     * s) * nlayers + l] is layer l of step s of file f (S the output
     * steps), each step stacking its own (another collection's scene
     * matched to the date: SAR beside optical).  Their validity counts in
     * their step's (0) */
    int layers_per_step;
    /* What is known of the inputs before their headers are read (a STAC
     * item's projection and raster extensions): ndescribed entries, one
     * per path in the order images, masks, layers, scene masks (0 / NULL:
     * none).  An entry whose grid.width is 0 is not described.  With a
     * target grid (grid or grid_crs), level 0 and the random or grid
     * sampler, a described input is not opened by cf_loader_new: it is
     * placed from its description, and its header is read by the first
     * sample that may read it, with that sample's other unopened files
     * in one round trip (a mosaic's later scene: the first whose window
     * its footprint, from the description, meets).  That header must
     * agree (size, geotransform, CRS, dtype, bands): a sample reading a
     * file that does not fails with CF_E_FORMAT naming the file and the
     * difference, and so does every later one without a request
     * (skip_errors drops them).  Any other failure to open it fails the
     * samples of its backoff (0.5 s, doubling to 60 s) without a request,
     * then one sample tries again.  Otherwise the descriptions are not
     * used.  Read during cf_loader_new only; each grid.crs is borrowed
     * (NULL / 0) */
    const cf_input_desc *described;
    size_t ndescribed;
} cf_loader_options;

/* One sampled window.  aug: bits 0-1 rotation (x90 degrees counter-
 * clockwise), bit 2 horizontal flip, applied after rotation. */
typedef struct cf_window {
    uint64_t index;            /* global sample index in the epoch */
    uint32_t file;             /* index into the sample files */
    int64_t x, y;
    uint32_t w, h;
    uint32_t aug;
} cf_window;

/* Shape of what the loader delivers (fixed for its lifetime). */
typedef struct cf_loader_layout {
    uint32_t batch_size, patch_size, time_steps, channels;
    cf_dtype dtype;            /* of "image" */
    int has_mask;
    cf_dtype mask_dtype;
    size_t image_bytes;        /* one slot: batch_size*T*C*P*P*dtype size */
    size_t mask_bytes;         /* one slot: batch_size*P*P*mask size (0) */
    int prefetch;
    uint64_t samples;          /* samples of this rank per epoch */
    uint64_t batches;          /* batches of this rank per epoch */
} cf_loader_layout;

/* A batch handed to the consumer; valid until cf_loader_release. */
typedef struct cf_batch {
    uint64_t index;            /* batch number in the epoch */
    uint64_t seq;              /* the loader's own count (for release) */
    uint32_t n;                /* samples (< batch_size: last batch, or
                                  samples dropped by skip_errors) */
    int slot;
    void *image;               /* n x [T, C, P, P], C order */
    void *mask;                /* n x [1, P, P], or NULL */
    const cf_window *windows;  /* n windows */
} cf_batch;

/* Counters of a loader (cf_loader_get_stats).  New counters are added at
 * its end, and cf_loader_get_stats fills the whole struct of the library
 * it runs: before 1.0 (SOVERSION 0) a caller must be built against the
 * header of the library it loads. */
typedef struct cf_loader_stats {
    uint64_t samples, batches, skipped;
    uint64_t bytes_fetched;    /* from the io (shared io: all its users) */
    uint64_t bytes_decoded;    /* raw pixel bytes of the windows read
                                  (before any dtype conversion) */
    uint64_t bytes_delivered;  /* bytes of batches handed out */
    uint64_t requests, retries;
    int io_inflight;           /* io requests in flight now */
    int concurrency;           /* patches allowed to be read at once now */
    int reading;               /* patches being read now */
    uint64_t cache_hits, cache_misses;
    double wait_s;             /* consumer waited for data (data stall) */
    double read_busy_s;        /* summed over threads: reads */
    double convert_busy_s;     /* summed: dtype conversion, augmentation */
    double elapsed_s;          /* since the first cf_loader_next */
    uint64_t hedges, hedge_wins; /* the io's (cf_io_stats) */
    /* Memory (see cf_loader_options): the budget, what its buffers hold
     * now, and the most they held (an upper bound: the sum of each
     * part's own peak). */
    uint64_t memory_budget, memory_used, memory_peak;
    /* What the codecs wrote for those windows: every tile (or strip) a
     * window touches is decoded whole, unless a cache held it.  Over
     * bytes_decoded, the bytes decoded per byte read: about 9 for random
     * 256 px patches on 512 px tiles without cache hits, 1 for
     * tile-aligned ones.  Uncompressed chunks are not decoded (0). */
    uint64_t chunk_bytes_decoded;
    /* Rounds of reads the samples took: each a set of requests sent at
     * once, waited for before the next.  A sample's inputs go in one round
     * (more when they need more than 64 chunk reads); a mosaic's later
     * scenes in rounds of their own, one round for the second scenes of
     * all its steps (as many steps a round as 1/128 of inflight_bytes
     * holds of their blocks), one for the third...  Over samples_read:
     * the round trips a sample waits remotely. */
    uint64_t read_rounds;
    /* Samples the readers read (the ring's and those read ahead, also
     * into the next epoch): what bytes_decoded, chunk_bytes_decoded and
     * read_rounds count, where `samples` counts those handed out. */
    uint64_t samples_read;
} cf_loader_stats;

CF_API void cf_loader_options_init(cf_loader_options *opt);

/* Open every file, place every input on its sample's target grid
 * (refusing, with the file named, what cannot be placed: see `grid`,
 * `reproject`, `ungeoreferenced`) and allocate the ring.  Threads start at the first
 * cf_loader_next.  Strings in opt are copied.  After fork() a loader works
 * only in the process that created it (CF_E_STATE elsewhere; stats read as
 * zero there); cf_loader_free is safe in both. */
CF_API cf_status cf_loader_new(const cf_loader_options *opt, cf_loader **out,
                               cf_error *err);
CF_API void cf_loader_free(cf_loader *ld);
CF_API void cf_loader_get_layout(const cf_loader *ld, cf_loader_layout *out);
/* Batches per epoch that shard (rank, world_size) of this loader's epoch
 * gets (the loader's own shard: layout.batches), without making a loader
 * for it: the shards are a pure function of the options, so a process
 * that hands shards to workers (rank * workers + w of world * workers)
 * knows their lengths.  Thread-safe. */
CF_API cf_status cf_loader_shard_batches(const cf_loader *ld, int rank, int world_size,
                                         uint64_t *batches, cf_error *err);

/* Use caller memory (e.g. pinned) for ring slot `slot`: image of at least
 * layout.image_bytes, mask of layout.mask_bytes (NULL when no masks).  Only
 * before the first cf_loader_next or right after cf_loader_set_epoch; the
 * memory must outlive the loader.  CF_E_STATE otherwise. */
CF_API cf_status cf_loader_set_buffers(cf_loader *ld, int slot, void *image,
                                       void *mask, cf_error *err);

/* Start epoch `epoch` from batch `batch` (resume): stops the readers,
 * drops prefetched batches.  Not while a batch is held. */
CF_API cf_status cf_loader_set_epoch(cf_loader *ld, uint64_t epoch, uint64_t batch,
                                     cf_error *err);
/* Current epoch and the next batch number cf_loader_next will return. */
CF_API void cf_loader_position(const cf_loader *ld, uint64_t *epoch,
                               uint64_t *next_batch);

/* Next batch, in order; blocks.  CF_E_END after the last batch of the
 * epoch.  A failed sample (without skip_errors) fails its batch with the
 * error naming the file and window; the loader then moves past it.  One
 * consumer thread; hold at most prefetch-1 batches at once. */
CF_API cf_status cf_loader_next(cf_loader *ld, cf_batch *out, cf_error *err);
/* Wait at most timeout_s seconds for the next batch: 1 when
 * cf_loader_next would now return without blocking (a batch, the end of
 * the epoch, or an error), 0 on timeout.  Starts the readers like
 * cf_loader_next; waiting counts as data stall.  Lets a caller stay
 * responsive (e.g. to signals) during long stalls. */
CF_API int cf_loader_wait(cf_loader *ld, double timeout_s);
/* The valid-pixel mask of batch b (cf_loader_options.valid_mask): n x
 * [1, P, P] bytes, 1 where every scene and layer has data (valid_per_step:
 * n x [T, P, P], each step's own), valid as long
 * as b; always the loader's own memory (also after cf_loader_set_buffers).
 * NULL without valid_mask.  (A function rather than a cf_batch member, so
 * that callers built against an older cf_batch keep working.) */
CF_API const uint8_t *cf_loader_batch_valid(const cf_loader *ld, const cf_batch *b);
/* Give the slot back to the readers. */
CF_API void cf_loader_release(cf_loader *ld, const cf_batch *b);
/* Stop reading for good, without waiting out the network: requests in
 * flight on the loader's own io loops are cancelled (on an io given in
 * the options they complete), the readers stopped, and a consumer waiting
 * in cf_loader_next / cf_loader_wait (another thread) wakes; from then on
 * cf_loader_next and cf_loader_set_epoch give CF_E_STATE.  The files and
 * the loader's own io loops are closed at once (their sockets and file
 * descriptors), and the readers' buffers freed; stats keep their last
 * values.  Batches handed out (the ring) stay valid until
 * cf_loader_free, which closes first. */
CF_API void cf_loader_close(cf_loader *ld);

/* Windows of this rank's sample j of the current epoch, without reading
 * (the sampler is a pure function of seed, epoch, rank and world size). */
CF_API cf_status cf_loader_window(const cf_loader *ld, uint64_t j, cf_window *out,
                                  cf_error *err);
/* The grid of a sampled window: that window of its sample file's target
 * grid (cf_loader_options.grid), i.e. where the patch lies before
 * augmentation, so that predictions can be written back.  out->crs is
 * borrowed from the loader (valid until cf_loader_free).  CF_E_STATE when
 * the target has no georeferencing (an image without a geotransform, read
 * with ungeoreferenced = 1).  Thread-safe. */
CF_API cf_status cf_loader_window_grid(const cf_loader *ld, const cf_window *w,
                                       cf_grid *out, cf_error *err);
/* Thread-safe. */
CF_API void cf_loader_get_stats(cf_loader *ld, cf_loader_stats *out);
/* skip_empty's counts: grid windows of the epoch (all ranks) left out,
 * and windows of the random or blocked sampler drawn again so far.
 * Thread-safe. */
CF_API void cf_loader_empty(cf_loader *ld, uint64_t *left_out, uint64_t *redrawn);

/* ------------------------------------------------------------------ */
/* Writer: tiled GeoTIFFs in GDAL's COG layout                         */
/* ------------------------------------------------------------------ */

/* Options of cf_writer_open: call cf_writer_options_init first. */
typedef struct cf_writer_options {
    size_t struct_size;
    uint32_t width, height;    /* pixels (1 .. CF_MAX_DIMENSION) */
    uint32_t bands;            /* samples per pixel (1 .. 65535) */
    cf_dtype dtype;            /* U8 .. F64 (not complex) */
    uint32_t tile_size;        /* square tiles, a multiple of 16 (512) */
    uint16_t compression;      /* TIFF code: 1 NONE, 8 DEFLATE, 50000 ZSTD,
                                  34887 LERC (see lerc_layer), 7 JPEG,
                                  50001 WEBP (8) */
    int level;                 /* codec level, 0: GDAL's default (6 for
                                  DEFLATE, 9 for ZSTD); for LERC the
                                  level of its DEFLATE or ZSTD layer; JPEG
                                  and WEBP take `quality` instead */
    int predictor;             /* 0: auto (with DEFLATE or ZSTD 2 for
                                  integers and 3 for floats, else 1);
                                  1, 2 or 3 (2 and 3 with DEFLATE or ZSTD
                                  only: libtiff applies none to LERC,
                                  JPEG or WEBP) */
    int overviews;             /* -1 (default): halve until the level fits
                                  one tile, as GDAL's COG driver; 0: none;
                                  n: that many levels at most */
    cf_resampling overview_resampling; /* CF_RS_AVERAGE (default),
                                  CF_RS_NEAREST or CF_RS_MODE */
    int has_nodata;            /* 1: `nodata` marks missing pixels
                                  (GDAL_NODATA; left out of averages) */
    double nodata;
    const cf_grid *grid;       /* CRS and transform (NULL: no
                                  georeferencing); its width and height are
                                  ignored.  A CRS without an EPSG code is
                                  written as GDAL's user-defined GeoKeys
                                  (its projection method among those of
                                  docs/writer.md).  Copied by
                                  cf_writer_open. */
    const char *const *descriptions; /* NULL, or one per band (NULL
                                  entries: none), as GDAL's band
                                  descriptions; copied */
    const double *scales, *offsets; /* NULL, or one per band; copied */
    /* Codec options, read only when struct_size covers them (a caller
     * built against an older header gets their defaults). */
    uint16_t lerc_layer;       /* LERC's additional compression, as GDAL's
                                  names: 1 none (LERC, the default), 8
                                  DEFLATE (LERC_DEFLATE), 50000 ZSTD
                                  (LERC_ZSTD) */
    double max_error;          /* LERC: the largest difference allowed
                                  between a value and what is read back
                                  (GDAL's MAX_Z_ERROR); 0 (default):
                                  lossless.  Integers are lossless below
                                  0.5 */
    int quality;               /* JPEG, WEBP: 1..100; 0: GDAL's default
                                  75.  WEBP at 100 is lossless (GDAL's
                                  COG driver rule) */
    int lossless;              /* WEBP: 1 for lossless whatever the
                                  quality (GDAL's WEBP_LOSSLESS) */
    uint16_t photometric;      /* PhotometricInterpretation: 0 (default)
                                  picks 6 YCbCr for JPEG of 3 bands (GDAL's
                                  default: RGB samples in, converted and
                                  subsampled 2x2 by the JPEG library, RGB
                                  out), 2 RGB for WEBP, else 1 MinIsBlack;
                                  or 1, 2 (3 bands or more), 6 (JPEG of 3
                                  bands) */
    /* Object storage (a `path` that is an s3://, gs:// or Azure Blob
     * URL), read only when struct_size covers them. */
    cf_io *io;                 /* its options (timeouts, retries, CA file)
                                  serve the upload, copied at open; NULL:
                                  the defaults */
    uint64_t part_size;        /* bytes of each part but the first and
                                  the last (0: 8 MiB; at least 5 MiB, S3's
                                  smallest); raised when the output could
                                  pass S3's 10,000 parts */
    /* Read only when struct_size covers it. */
    int mask;                  /* 1: an internal mask band, GDAL's
                                  per-dataset mask (1 bit a pixel, DEFLATE,
                                  each mask tile right after its image
                                  tile, a mask directory per level), given
                                  per tile by cf_writer_write_tile_masked;
                                  tiles written without one are all valid,
                                  tiles never written are not.  Overviews
                                  of the mask as GDAL makes them: resampled
                                  as the image (average: valid where any
                                  pixel under it is), and an average of
                                  the image leaves masked pixels out */
    /* Read only when struct_size covers it. */
    int threads;               /* 0 (default): one thread per CPU this
                                  process may use (its affinity mask),
                                  within 256 MiB of their buffers; n >= 1:
                                  at most n, for each of the writer's
                                  parallel stages (tiles encoded at once by
                                  cf_writer_write_tile: more callers wait;
                                  the overview pass's workers; a
                                  cf_stitcher's row threads).  Several
                                  writers in one process, or several
                                  processes on one machine (torchrun's
                                  ranks), each take their own: give each
                                  its share of the CPUs.  The bytes
                                  written do not depend on it */
    /* One COG made by several processes (cogfeed.predict's ranks,
     * docs/inference.md, "Several processes or machines"); read only
     * when struct_size covers them.
     * share_rows > 0: a *share writer*.  It takes the full-resolution rows
     * of tiles [share_row0, share_row0 + share_rows) of the image the
     * options describe (others: CF_E_ARG), and makes the overview rows its
     * share owns (an overview row belongs to the share holding the last
     * row of its window in the level above) into a local file whose other
     * tiles are sparse: cf_writer_share_build, cf_writer_share_carry, then
     * cf_writer_close.  A local path only; with `mask` the overviews are
     * average or mode.  0 (default): the whole image. */
    uint32_t share_row0, share_rows;
    int overviews_given;       /* 1: the overviews' tiles are given
                                  encoded (cf_writer_write_encoded_tile_at,
                                  by a share writer's files): none is made,
                                  and no tile is decoded */
    /* Read only when struct_size covers it. */
    int layout_only;           /* 1 (with overviews_given): a *layout
                                  writer*: it opens and writes nothing
                                  (`path` only names it in messages) and
                                  takes no tile; cf_writer_layout gives the
                                  header and every tile's offset of the COG
                                  from its tiles' sizes, for processes that
                                  upload their own tiles' bytes as parts of
                                  one object (cf_upload) */
} cf_writer_options;

CF_API void cf_writer_options_init(cf_writer_options *opt);

typedef struct cf_writer cf_writer;

/* Start writing the GeoTIFF `path`, a local file or an object (s3://,
 * gs:// (Cloud Storage's XML API multipart upload, S3's protocol with a
 * bearer token), az://, https://ACCOUNT.blob.core.windows.net/...;
 * credentials as for reading).  Either way the result is laid out in GDAL's COG layout
 * (header and every directory first, then tile data, smallest overview
 * first, full resolution last, tiles in row order).
 *
 * A local file: tiles are encoded as they come and kept in a spool file
 * beside `path` ("PATH.cogfeed-spool"); cf_writer_close builds the
 * overviews from them and writes the file under a temporary name renamed
 * to `path` at the end: `path` never holds a partial file.  Peak disk:
 * the spool (the full resolution's tile data) plus the output.
 *
 * An object: no local disk.  Rows of tiles go up as S3 multipart parts or
 * Azure blocks as soon as every row above them is complete, the overviews
 * made from them on the way; the header goes up last as the first part
 * (docs/inference.md, "Writing to object storage").  Memory: about two
 * parts per level plus 8 parts being sent, and the encoded tiles of rows
 * that wait for an incomplete row above them.  A tile of a row already
 * sent cannot be written again (CF_E_STATE).  Nothing is visible until
 * close succeeds; a failure or cf_writer_abort aborts the upload, leaving
 * no object and no part behind.
 *
 * CF_E_ARG for options out of range, CF_E_UNSUPPORTED for a CRS whose
 * projection method is not written as GeoKeys or a URL that cannot be
 * written (gs://, http), CF_E_IO when
 * the spool cannot be made (its message names the path), the store's
 * errors (CF_E_AUTH, CF_E_NOTFOUND, ...) when the upload cannot start. */
CF_API cf_status cf_writer_open(const char *path, const cf_writer_options *opt,
                                cf_writer **out, cf_error *err);
/* Write full-resolution tile (tx, ty): `data` holds its pixels band by
 * band, bands x h x w in C order, w and h the tile's size clipped at the
 * image's right and bottom edges (tile_size inside).  Any order; a tile
 * written twice replaces the first.  Tiles never written are sparse (read
 * as nodata, or 0).  Thread-safe: calls from several threads encode their
 * tiles at once (an encoder each, at most one per CPU; the rest wait for
 * one), and keep them one at a time.  CF_E_ARG for a
 * tile outside the grid or a wrong size, CF_E_STATE after a failure or
 * close (the writer's first error stays its state). */
CF_API cf_status cf_writer_write_tile(cf_writer *w, uint32_t tx, uint32_t ty, const void *data,
                                      size_t size, cf_error *err);
/* cf_writer_write_tile with its mask: `mask` holds h x w bytes (the
 * tile's clipped size, C order), 0 where a pixel is not valid, anything
 * else where it is; NULL: all valid.  CF_E_ARG on a writer opened
 * without `mask`. */
CF_API cf_status cf_writer_write_tile_masked(cf_writer *w, uint32_t tx, uint32_t ty,
                                             const void *data, size_t size,
                                             const uint8_t *mask, cf_error *err);
/* Full-resolution tile (tx, ty) given already encoded: `n` bytes as a
 * writer with the same options would have written them (the same dtype,
 * bands, tile size, codec, level, predictor, quality, max_error,
 * photometric), kept as they are.  The way to copy tiles from one COG
 * into another without encoding their pixels again (one COG from several
 * processes: share writers and cf_writer_write_encoded_tile_at below):
 * the copier takes each tile's stored bytes
 * (cf_cog_chunk_info's range; with `mask`, cf_cog_mask_chunk_info's for
 * the mask bytes, mn of them, which must then be given; mn == 0 is no
 * mask) into this call.  n == 0 (and mn == 0): the tile stays sparse.  The bytes are checked:
 * at most twice a raw tile (CF_E_LIMIT), and (unless the writer has
 * overviews_given, which decodes nothing) decoded once with this
 * writer's parameters, for the overviews (a bad tile fails the overview
 * pass, naming it: cf_writer_close for a file; for an object the call
 * that completes the tile's row, and the writer is failed) or, with no
 * overviews, here (CF_E_CODEC / CF_E_FORMAT, the writer goes on).  The
 * same options include the nodata value (edge tiles' padding).
 * Otherwise as cf_writer_write_tile. */
CF_API cf_status cf_writer_write_encoded_tile(cf_writer *w, uint32_t tx, uint32_t ty,
                                              const void *data, size_t n, const void *mask,
                                              size_t mn, cf_error *err);
/* cf_writer_write_encoded_tile of a tile of any level (0 is the full
 * resolution) of a writer with overviews_given, e.g. a share writer's
 * stored bytes (cf_cog_chunk_info's range at that level).  Kept as they
 * are: at most twice a raw tile (CF_E_LIMIT), not decoded.  For an object
 * each overview level's tiles must come in row order (CF_E_STATE
 * otherwise; a level's tiles go up as they come).  CF_E_ARG for a level
 * above 0 on a writer that makes its overviews. */
CF_API cf_status cf_writer_write_encoded_tile_at(cf_writer *w, int level, uint32_t tx,
                                                 uint32_t ty, const void *data, size_t n,
                                                 const void *mask, size_t mn, cf_error *err);
/* Tiles across and down at full resolution. */
CF_API void cf_writer_tiles(const cf_writer *w, uint32_t *tiles_x, uint32_t *tiles_y);
/* Levels (the full resolution and its overviews). */
CF_API int cf_writer_levels(const cf_writer *w);

/* A share writer (share_rows > 0) finishes in three steps, so that the
 * work that costs runs in every process at once and only a few rows pass
 * from one to the next:
 *  1. cf_writer_share_build: the share's tiles read back and decoded, and
 *     every overview row the share owns whose window lies in its own rows
 *     made; a row of tiles made whole is encoded.  No tile may be written
 *     after it (CF_E_STATE).
 *  2. cf_writer_share_carry, in share order: `in` is the carry of the
 *     share before (NULL or n == 0 for the first share); the rows whose windows
 *     reach into earlier shares are made from it, the rows of tiles it
 *     completes kept for close, and *out (*out_n bytes, owned by the
 *     writer until close or abort) is the carry for the next share: the
 *     last rows of each level, and the rows of unfinished rows of
 *     overview tiles (at most a row of tiles a level).  A carry that does
 *     not fit this writer's options (size, tile size, data type, bands,
 *     mask, nodata, overview resampling) or does not end where this share
 *     begins is refused (CF_E_FORMAT), as is one that says a share before
 *     failed (CF_E_STATE); the writer is then failed.
 *  3. cf_writer_close: the tiles of rows completed by the carry encoded;
 *     the file laid out (the share's tiles, others sparse).
 * The output writer (overviews_given) then takes each share's tiles of
 * every level, cf_writer_share_tiles telling which rows of tiles: the
 * file is the one a single writer makes, byte for byte. */
CF_API cf_status cf_writer_share_build(cf_writer *w, cf_error *err);
CF_API cf_status cf_writer_share_carry(cf_writer *w, const void *in, size_t n,
                                       const void **out, size_t *out_n, cf_error *err);
/* The carry to send on when this share failed (any of its steps, or its
 * cf_writer_share_carry refused the carry it got), so that the later
 * shares fail too instead of waiting: their cf_writer_share_carry fails
 * with CF_E_STATE, and their callers send this on in turn.  *out_n
 * bytes, static. */
CF_API void cf_writer_share_failed(const void **out, size_t *out_n);
/* The rows of tiles [*ty0, *ty1) of `level` that share writer w makes
 * (its own full-resolution rows at level 0); [0, 0) when none. */
CF_API cf_status cf_writer_share_tiles(const cf_writer *w, int level, uint32_t *ty0,
                                       uint32_t *ty1, cf_error *err);
/* A layout writer's COG (layout_only) from its tiles' encoded sizes:
 * sizes[n] lists, for each level from 0 (the full resolution) to
 * cf_writer_levels - 1, each tile in row order, its bytes and then, with
 * `mask`, its mask tile's (0 and 0: sparse).  *header (*header_len bytes,
 * owned by the writer until close or abort) is the file's start: every
 * directory, with each tile's offset and size; offsets[k] is where
 * sizes[k]'s bytes go (0 for none).  The file is the header followed by
 * the tiles' bytes in the order of their offsets, header_len + the sum of
 * sizes bytes, the same bytes as a writer given the tiles makes.
 * CF_E_ARG for n other than the writer's count or a mask missing or
 * without its tile, CF_E_LIMIT for a size above twice a raw tile,
 * CF_E_STATE on a writer that is not a layout writer.  May be called
 * again (the last header stays). */
CF_API cf_status cf_writer_layout(cf_writer *w, const uint64_t *sizes, size_t n,
                                  uint64_t *offsets, const void **header, size_t *header_len,
                                  cf_error *err);
/* Finish the file (overviews, layout, rename) and free the writer, which
 * is gone whatever the status; on failure neither `path` nor the spool is
 * left behind.  A tile another thread is still encoding is waited for and
 * written; a call that starts after close (or cf_writer_abort) is the
 * caller's to prevent. */
CF_API cf_status cf_writer_close(cf_writer *w, cf_error *err);
/* Give up: free the writer and remove its spool; `path` is not touched. */
CF_API void cf_writer_abort(cf_writer *w);

/* One object uploaded by several processes: the ranks of a job that each
 * hold some of its bytes (cogfeed.predict's, docs/inference.md, "Several
 * processes or machines", or a loop of one's own).  One process begins the
 * upload and passes its token (no secret) to the others, which join it;
 * each puts the parts whose bytes it holds (by number: the object is the
 * parts in number order; S3 wants every part but the last at least
 * cf_upload_min_part bytes, Azure any size); the joined processes give
 * their receipts to the first, which completes the object with them, or,
 * when any process failed, frees its upload without completing: the
 * upload is aborted and nothing is left (S3: AbortMultipartUpload; Azure:
 * no block list, the blocks are dropped).  s3://, gs:// and Azure Blob
 * URLs; credentials, retries (a failed part is sent again whole) and
 * errors as the writer's, each process with its own credentials.  A
 * cf_upload is used by one thread at a time. */
typedef struct cf_upload cf_upload;
/* Begin uploading `url` (io: its options; NULL: the defaults).  S3
 * creates the multipart upload here: a wrong key or a missing bucket
 * fails now (CF_E_AUTH, CF_E_NOTFOUND, ...). */
CF_API cf_status cf_upload_begin(const char *url, cf_io *io, cf_upload **out, cf_error *err);
/* Join the upload of `url` that another process began: `token` is its
 * cf_upload_token.  CF_E_ARG for a token this store could not have given;
 * a token of no open upload fails the first part (CF_E_NOTFOUND). */
CF_API cf_status cf_upload_join(const char *url, cf_io *io, const char *token,
                                cf_upload **out, cf_error *err);
/* The token the other processes join with: S3's upload id, or Azure's
 * block-id nonce (8 hex digits).  Valid while u is. */
CF_API const char *cf_upload_token(const cf_upload *u);
/* The smallest part but the last the store takes (5 MiB for S3, 1 for
 * Azure). */
CF_API uint64_t cf_upload_min_part(const cf_upload *u);
/* Put part `number` (1..10000, once in the whole job): the `len` bytes
 * are copied and sent by the upload's threads (at most 4 at once, the
 * call waits for one when all are busy).  The status is the first
 * failure of this process's parts so far. */
CF_API cf_status cf_upload_part(cf_upload *u, uint32_t number, const void *data, size_t len,
                                cf_error *err);
/* A joined process: wait for its parts and give their receipts (*out, a
 * line "NUMBER ETAG" a part for S3, "NUMBER" for Azure; owned by u), or
 * the first failure of its parts.  No part may be put after. */
CF_API cf_status cf_upload_receipts(cf_upload *u, const char **out, cf_error *err);
/* The beginning process: wait for its own parts, take the others'
 * receipts (n strings, each checked whole before it is taken: CF_E_ARG
 * for a malformed line or a part put twice), check that the parts are
 * 1..N without a gap (CF_E_ARG otherwise: bytes would be missing from
 * the object), and make the object; any failure aborts the upload
 * (nothing is left).  Frees u whatever the status. */
CF_API cf_status cf_upload_complete(cf_upload *u, const char *const *receipts, size_t n,
                                    cf_error *err);
/* Free u: the beginning process's upload, not completed, is aborted
 * (nothing is left); a joined process's parts in flight are waited for,
 * those still queued dropped. */
CF_API void cf_upload_free(cf_upload *u);

/* Stitcher: predictions of overlapping patches blended into a COG.
 * Each patch's channels are weighted per pixel by a window w(x) w(y)
 * over its width and height n:
 *   CF_BLEND_MEAN:   1 (a plain mean of the patches over a pixel);
 *   CF_BLEND_LINEAR: min(1, (min(i, n-1-i) + 0.5) / overlap), a ramp
 *                    over the overlap (overlap 0: the mean);
 *   CF_BLEND_HANN:   sin^2(pi (i + 0.5) / n), never 0.
 * Sums are kept in double per open row of output tiles; a row of tiles is
 * finished (divided, written) when every listed patch over it has come,
 * so memory is bounded by the rows of tiles patches in flight touch, not
 * by the scene. */
typedef enum cf_blend {
    CF_BLEND_MEAN = 0,
    CF_BLEND_LINEAR = 1,
    CF_BLEND_HANN = 2
} cf_blend;

typedef struct cf_stitcher_options {
    size_t struct_size;
    uint32_t channels;         /* channels of each patch's prediction */
    cf_blend blend;            /* (CF_BLEND_HANN) */
    uint32_t overlap;          /* CF_BLEND_LINEAR's ramp, pixels */
    int argmax;                /* 1: write one uint8 band, the channel
                                  with the largest blended value (the
                                  first on a tie; 255 where no patch
                                  came); 0 (default): the blended channels
                                  as float32 (NaN where no patch came) */
    /* Every patch that will come, (x, y, w, h) each (4 * npatches
     * values): a row of tiles is finished once all of its patches came.
     * Copied. */
    const int64_t *patches;
    size_t npatches;
} cf_stitcher_options;

CF_API void cf_stitcher_options_init(cf_stitcher_options *opt);

typedef struct cf_stitcher cf_stitcher;

/* A stitcher writing `path` through a cf_writer with the options `wo`
 * (size, grid, tiles, compression, overviews; its bands, dtype and
 * nodata are set here: see argmax).  CF_E_ARG for a patch outside the
 * image or empty, or options out of range; the writer's errors. */
CF_API cf_status cf_stitcher_open(const char *path, const cf_writer_options *wo,
                                  const cf_stitcher_options *so, cf_stitcher **out,
                                  cf_error *err);
/* Add the prediction of patch (x, y, w, h), one of the listed patches:
 * `pred` holds channels x h x w float32 values (C order).  Any order,
 * from any thread (calls are serialised).  CF_E_ARG for a patch outside
 * the image, not listed, or that came already. */
CF_API cf_status cf_stitcher_add(cf_stitcher *st, int64_t x, int64_t y, uint32_t w, uint32_t h,
                                 const float *pred, cf_error *err);
/* cf_stitcher_add with the validity of the patch's input: `valid` holds
 * h x w bytes, 0 where the input had no data (the prediction there is
 * left out of the blend; NULL: all valid).  A pixel no patch reached with
 * valid input is written as no patch came (255 or NaN), and with the
 * writer option `mask` (wo->mask) as not valid in the output's internal
 * mask, which holds where some patch came with valid input. */
CF_API cf_status cf_stitcher_add_masked(cf_stitcher *st, int64_t x, int64_t y, uint32_t w,
                                        uint32_t h, const float *pred, const uint8_t *valid,
                                        cf_error *err);
/* Finish: rows of tiles some listed patch never reached are finished
 * with what came; then the writer's close.  Frees the stitcher.  Not
 * while another thread is in cf_stitcher_add or cf_stitcher_add_masked
 * (nor cf_stitcher_abort). */
CF_API cf_status cf_stitcher_close(cf_stitcher *st, cf_error *err);
/* Give up: nothing written. */
CF_API void cf_stitcher_abort(cf_stitcher *st);
/* The stitcher's writer, for a share writer's steps (wo->share_rows):
 * cf_writer_share_build and cf_writer_share_carry once every patch came,
 * before cf_stitcher_close (which then closes it).  A stitcher with a
 * share writes the rows of tiles of its share only: the others, which
 * its patches reach in part, are dropped. */
CF_API cf_writer *cf_stitcher_writer(cf_stitcher *st);

/* ------------------------------------------------------------------ */
/* Option tables: the scalar options, enumerable                       */
/* ------------------------------------------------------------------ */
/* Every scalar member of cf_loader_options and cf_io_options (and the
 * loader's kernels) with its type, default and accepted range, generated
 * from the same rows as cf_*_options_init and the checks of
 * cf_loader_new / cf_io_new, so that bindings, command lines and
 * documents read them instead of restating them (as curl's
 * curl_easy_option_next enumerates curl_easy_setopt's options).  The
 * members that are not scalars (paths, arrays, the sampler, the grid)
 * are not listed. */

typedef enum cf_option_type {
    CF_OPT_INT = 0,   /* a signed integer member: values in .i */
    CF_OPT_UINT = 1,  /* uint64_t: values in .u (the Python binding takes
                         a negative value modulo 2^64, as seed) */
    CF_OPT_FLOAT = 2, /* double: values in .d (NaN is never in range) */
    CF_OPT_BOOL = 3,  /* int flag, nonzero is yes: .i is 0 or 1 */
    CF_OPT_KERNEL = 4 /* cf_resampling: .i, named by `choices` */
} cf_option_type;

typedef union cf_option_value {
    int64_t i;
    uint64_t u;
    double d;
} cf_option_value;

/* def is computed on this machine (the loader's cache_bytes: 5% of the
 * memory); default_doc says how. */
#define CF_OPTF_RUNTIME_DEFAULT 1u

typedef struct cf_option_info {
    const char *name;      /* the member, and the Python keyword */
    const char *group;     /* "loader" (cf_loader_options) or "io" */
    int id;                /* its index in its table */
    cf_option_type type;
    const char *ctype;     /* the member's C type, e.g. "size_t" */
    size_t offset, size;   /* of the member in its options struct */
    cf_option_value def;   /* what cf_*_options_init sets */
    cf_option_value lo, hi;/* what cf_*_new accepts: [lo, hi]; a float lo
                              of DBL_TRUE_MIN means > 0; BOOL: [0, 1],
                              any int being taken */
    const char *hint;      /* the special values ("0: auto"); "" none */
    const char *default_doc; /* CF_OPTF_RUNTIME_DEFAULT: the rule, in
                                words; else "" */
    unsigned flags;        /* CF_OPTF_* */
    const char *const *choices; /* CF_OPT_KERNEL: the names, by value */
    int nchoices;
} cf_option_info;

/* The loader's table (its scalars, then its kernels) and the io's, in
 * the order of their members; *n gets the count.  Static storage, built
 * on the first call; thread-safe. */
CF_API const cf_option_info *cf_loader_option_table(size_t *n);
CF_API const cf_option_info *cf_io_option_table(size_t *n);
/* The entry of `name` in a table; NULL when none. */
CF_API const cf_option_info *cf_option_by_name(const cf_option_info *table, size_t n,
                                               const char *name);
/* Whether v is a value of `opt` that cf_loader_new / cf_io_new accept:
 * CF_OK, or CF_E_ARG with their message ("loader: NAME V not in [LO,
 * HI] (HINT)"), so that a binding can check a wide value before
 * narrowing it into the member.  Kernels: v is the cf_resampling. */
CF_API cf_status cf_option_check(const cf_option_info *opt, double v, cf_error *err);

#ifdef __cplusplus
}
#endif
#endif /* COGFEED_H */

/* ------------------------------------------------------------------ */
/* Static linking only                                                 */
/* ------------------------------------------------------------------ */
/* Functions for tests and fuzzers, with no stability promise: they may
 * change or go in any release, and libcogfeed.so does not export them
 * (link libcogfeed.a).  Define CF_STATIC_LINKING_ONLY before including
 * cogfeed.h to see them, as zstd keeps ZSTD_STATIC_LINKING_ONLY apart. */
#if defined(CF_STATIC_LINKING_ONLY) && !defined(COGFEED_H_STATIC_LINKING_ONLY)
#define COGFEED_H_STATIC_LINKING_ONLY
#ifdef __cplusplus
extern "C" {
#endif

/* Open a TIFF held in memory (no copy is made: `data` must outlive the
 * cog); no io is involved. */
cf_status cf_cog_open_memory(const void *data, size_t size, const char *name,
                             cf_cog **out, cf_error *err);
/* cf_cog_open_memory with options (NULL: the defaults). */
cf_status cf_cog_open_memory_ex(const void *data, size_t size,
                                const char *name, const cf_open_options *opt,
                                cf_cog **out, cf_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CF_STATIC_LINKING_ONLY */
