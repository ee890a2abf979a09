/*
 * _cogfeed.c - the CPython extension: cogfeed.open(url) -> Cog with .read(),
 * cogfeed.IO (the I/O loop and its options); cogfeed.Error and its
 * classes come from _status.c.  Thin: every byte is moved by the C
 * library, with the GIL released while it works.
 */
#define CF_PY_MAIN
#include "pymod.h"

#include <structmember.h>

#include <limits.h>
#include <math.h>

int cf__py_npy_type(cf_dtype t) {
    switch (t) {
    case CF_DT_U8: return NPY_UINT8;
    case CF_DT_I8: return NPY_INT8;
    case CF_DT_U16: return NPY_UINT16;
    case CF_DT_I16: return NPY_INT16;
    case CF_DT_U32: return NPY_UINT32;
    case CF_DT_I32: return NPY_INT32;
    case CF_DT_U64: return NPY_UINT64;
    case CF_DT_I64: return NPY_INT64;
    case CF_DT_F32: return NPY_FLOAT32;
    case CF_DT_F64: return NPY_FLOAT64;
    /* NumPy has no complex integers: CInt16 and CInt32 come out widened to
     * complex64 / complex128 (exactly), as GDAL's ReadAsArray gives them. */
    case CF_DT_CI16:
    case CF_DT_CF32: return NPY_COMPLEX64;
    case CF_DT_CI32:
    case CF_DT_CF64: return NPY_COMPLEX128;
    default: return -1;
    }
}

/* ------------------------------------------------------------------ IO */

typedef struct {
    PyObject_HEAD cf_io *io;
    PyObject *sign; /* cf_io_options.sign_user: the io calls it */
} IOObject;

static PyTypeObject IOType;
static PyObject *default_io = NULL; /* created on first use */

/* The keywords: every scalar of the C table (cf_io_option_table), each
 * converted and checked by its row (python/_options.c) before it is
 * narrowed into its member; then the two paths. */
static char *io_path_kwlist[] = {"header_cache_dir", "ca_file", "sign", NULL};

/* cf_sign_fn for a Python callable (sign=: a function or a
 * cogfeed.stac.Signer), called from the io's reading threads: the GIL
 * taken, cogfeed.stac._sign_for_io(sign, url) gives (signed URL, expiry
 * or 0.0).  An exception becomes the error, its type and message. */
static _Thread_local int in_sign; /* this thread is inside py_sign */

int cf__py_in_sign(void) { return in_sign; }

static cf_status py_sign(void *user, const char *url, char *out, size_t cap,
                         double *expires, cf_error *err) {
    /* cogfeed.stac._sign_for_io, and StacError (its refusal of a signed
     * URL that moves the href), under the GIL */
    static PyObject *fn, *refusal;
#if PY_VERSION_HEX >= 0x030D0000
    int finalizing = Py_IsFinalizing();
#else
    int finalizing = _Py_IsFinalizing();
#endif
    if (finalizing) {
        err->code = CF_E_STATE;
        err->http_status = 0;
        snprintf(err->msg, sizeof err->msg, "sign: the interpreter is exiting");
        return CF_E_STATE;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    in_sign = 1; /* any allocation below may run the garbage collector */
    cf_status st = CF_OK;
    if (!fn) {
        PyObject *m = PyImport_ImportModule("cogfeed.stac");
        fn = m ? PyObject_GetAttrString(m, "_sign_for_io") : NULL;
        refusal = m ? PyObject_GetAttrString(m, "StacError") : NULL;
        Py_XDECREF(m);
    }
    PyObject *r = fn ? PyObject_CallFunction(fn, "Os", (PyObject *)user, url) : NULL;
    const char *signed_url = NULL;
    double exp = 0;
    if (r && PyArg_ParseTuple(r, "sd", &signed_url, &exp)) {
        size_t n = strlen(signed_url);
        if (n >= cap) {
            st = CF_E_LIMIT;
            snprintf(err->msg, sizeof err->msg, "sign: the signed URL is %zu bytes", n);
        } else {
            memcpy(out, signed_url, n + 1);
            *expires = exp;
        }
    } else {
        /* The user's exception, as "Type: message", then cleared: an I/O
         * error (a token service's failure is transient; the io keeps a
         * signature still valid and tries again); StacError is cogfeed's
         * refusal of what the function returned (a URL moved elsewhere):
         * an authentication error, as C's own check makes it. */
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyObject *text = v ? PyObject_Str(v) : NULL;
        const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
        st = t && refusal && PyErr_GivenExceptionMatches(t, refusal) ? CF_E_AUTH : CF_E_IO;
        snprintf(err->msg, sizeof err->msg, "sign: %s: %s",
                 t ? ((PyTypeObject *)t)->tp_name : "error", msg ? msg : "");
        Py_XDECREF(text);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        PyErr_Clear();
    }
    Py_XDECREF(r);
    in_sign = 0;
    PyGILState_Release(g);
    err->code = st;
    err->http_status = 0;
    return st;
}

int cf__py_io_options(PyObject *args, PyObject *kw, cf_io_options *o, PyObject **keep) {
    *keep = NULL;
    cf_io_options_init(o);
    size_t n;
    const cf_option_info *tab = cf_io_option_table(&n);
    PyObject *rest = kw ? PyDict_Copy(kw) : NULL;
    if (kw && !rest) return 0;
    PyObject *cache = Py_None, *ca = Py_None, *sign = Py_None;
    int ok = cf__py_take_options(rest, tab, n, o) &&
             PyArg_ParseTupleAndKeywords(args, rest, "|$OOO:IO", io_path_kwlist, &cache, &ca,
                                         &sign);
    Py_XDECREF(rest); /* cache, ca and sign stay alive in kw */
    if (!ok) return 0;
    if (sign != Py_None && !PyCallable_Check(sign)) {
        PyErr_SetString(PyExc_TypeError, "sign must be a callable url -> signed url "
                                         "(or (signed url, expiry)), or None");
        return 0;
    }
    /* The path strings live in bytes objects kept in *keep. */
    PyObject *cache_b = NULL, *ca_b = NULL;
    if ((cache != Py_None && !PyUnicode_FSConverter(cache, &cache_b)) ||
        (ca != Py_None && !PyUnicode_FSConverter(ca, &ca_b))) {
        Py_XDECREF(cache_b);
        return 0;
    }
    /* (paths..., sign): the signing function must outlive the io, so its
     * owner takes it from here (cf__py_io_sign). */
    *keep = Py_BuildValue("(OOO)", cache_b ? cache_b : Py_None, ca_b ? ca_b : Py_None, sign);
    if (cache_b) o->header_cache_dir = PyBytes_AS_STRING(cache_b);
    if (ca_b) o->ca_file = PyBytes_AS_STRING(ca_b);
    if (sign != Py_None) {
        o->sign = py_sign;
        o->sign_user = sign;
    }
    Py_XDECREF(cache_b);
    Py_XDECREF(ca_b);
    return *keep != NULL;
}

PyObject *cf__py_io_sign(PyObject *keep) {
    PyObject *s = keep ? PyTuple_GET_ITEM(keep, 2) : Py_None;
    if (s == Py_None) return NULL;
    Py_INCREF(s);
    return s;
}

static int IO_init(IOObject *self, PyObject *args, PyObject *kw) {
    if (self->io) {
        /* Cogs opened with this IO use it: it cannot be replaced. */
        PyErr_SetString(PyExc_RuntimeError, "cogfeed.IO is already initialised");
        return -1;
    }
    cf_io_options o;
    PyObject *keep;
    if (!cf__py_io_options(args, kw, &o, &keep)) return -1;
    cf_error err = {0};
    cf_status st = cf_io_new(&o, &self->io, &err); /* copies the strings */
    if (st == CF_OK) self->sign = cf__py_io_sign(keep);
    Py_DECREF(keep);
    if (st) {
        cf__py_raise(st, &err);
        return -1;
    }
    return 0;
}

static void IO_dealloc(IOObject *self) {
    cf_io *io = self->io;
    self->io = NULL;
    if (io) {
        Py_BEGIN_ALLOW_THREADS cf_io_free(io);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(self->sign); /* after the io: its threads may call it */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *IO_stats(IOObject *self, PyObject *noargs) {
    cf_io_stats s;
    cf_io_get_stats(self->io, &s);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:i,s:i,s:K,s:K,s:i}", "requests",
                         (unsigned long long)s.requests, "retries", (unsigned long long)s.retries,
                         "bytes_fetched", (unsigned long long)s.bytes_fetched,
                         "connect_failures", (unsigned long long)s.connect_failures,
                         "read_failures", (unsigned long long)s.read_failures,
                         "header_cache_hits", (unsigned long long)s.header_cache_hits,
                         "inflight", s.inflight, "max_inflight", s.max_inflight, "hedges",
                         (unsigned long long)s.hedges, "hedge_wins",
                         (unsigned long long)s.hedge_wins, "peak_inflight", s.peak_inflight);
}

static PyObject *IO_set_max_inflight(IOObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > CF_IO_MAX_INFLIGHT)
        return PyErr_Format(PyExc_ValueError, "max_inflight must be in 1..%d", CF_IO_MAX_INFLIGHT);
    cf_io_set_max_inflight(self->io, (int)n);
    Py_RETURN_NONE;
}

/* IO.get(url, max_bytes=64 MiB) -> bytes: cf_io_get, the GIL released. */
static PyObject *IO_get(IOObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"url", "max_bytes", NULL};
    PyObject *url_obj;
    unsigned long long max_bytes = 64ull << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$K:get", kwlist, &url_obj, &max_bytes))
        return NULL;
    if (!self->io) return PyErr_Format(PyExc_ValueError, "cogfeed.IO was not initialised");
    if (max_bytes == 0 || max_bytes > CF_IO_GET_MAX)
        return PyErr_Format(PyExc_ValueError, "max_bytes must be in 1..%llu",
                            (unsigned long long)CF_IO_GET_MAX);
    PyObject *url_b = NULL;
    if (!PyUnicode_FSConverter(url_obj, &url_b)) return NULL;
    const char *url = PyBytes_AS_STRING(url_b);
    if (strlen(url) != (size_t)PyBytes_GET_SIZE(url_b)) {
        Py_DECREF(url_b);
        return PyErr_Format(PyExc_ValueError, "url holds a NUL character");
    }
    void *data = NULL;
    size_t len = 0;
    cf_error err;
    cf_status st;
    Py_BEGIN_ALLOW_THREADS st = cf_io_get(self->io, url, (size_t)max_bytes, &data, &len, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(url_b);
    if (st != CF_OK) return cf__py_raise(st, &err);
    PyObject *out = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
    cf_io_get_free(data);
    return out;
}

static PyMethodDef IO_methods[] = {
    {"stats", (PyCFunction)IO_stats, METH_NOARGS,
     "stats() -> dict: requests, retries, bytes_fetched, connect_failures, read_failures, "
     "header_cache_hits, inflight, max_inflight, hedges, hedge_wins, peak_inflight"},
    {"get", (PyCFunction)(void (*)(void))IO_get, METH_VARARGS | METH_KEYWORDS,
     "get(url, *, max_bytes=67108864) -> bytes: the whole object (a local path, file://, "
     "http(s)://, s3://, az://, gs://), read with this IO's credentials, retries and "
     "redirect rules; cogfeed.Error (LimitError) naming the URL when it is larger than "
     "max_bytes, refused before the rest is fetched"},
    {"set_max_inflight", (PyCFunction)IO_set_max_inflight, METH_O,
     "set_max_inflight(n): change the number of requests kept in flight"},
    {NULL, NULL, 0, NULL}};

/* IOType's tp_doc: "IO(*, NAME=DEFAULT, ..., header_cache_dir=None,
 * ca_file=None)" from the C table (cf_io_option_table), then the prose;
 * built once, before PyType_Ready. */
static char io_doc_buf[4096];

static const char *io_doc(const char *prose) {
    size_t n, k = 0;
    const cf_option_info *t = cf_io_option_table(&n);
    k += (size_t)snprintf(io_doc_buf, sizeof io_doc_buf, "IO(*");
    for (size_t i = 0; i < n && k < sizeof io_doc_buf; i++) {
        char v[64];
        switch (t[i].type) {
        case CF_OPT_UINT: snprintf(v, sizeof v, "%llu", (unsigned long long)t[i].def.u); break;
        case CF_OPT_FLOAT: snprintf(v, sizeof v, "%.17g", t[i].def.d); break;
        case CF_OPT_BOOL: snprintf(v, sizeof v, "%s", t[i].def.i ? "True" : "False"); break;
        default: snprintf(v, sizeof v, "%lld", (long long)t[i].def.i); break;
        }
        k += (size_t)snprintf(io_doc_buf + k, sizeof io_doc_buf - k, ", %s=%s", t[i].name, v);
    }
    if (k < sizeof io_doc_buf)
        snprintf(io_doc_buf + k, sizeof io_doc_buf - k,
                 ", header_cache_dir=None, ca_file=None, sign=None)\n\n%s", prose);
    return io_doc_buf;
}

static PyTypeObject IOType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed.IO",
    .tp_basicsize = sizeof(IOObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    /* Its signature line, with the defaults of the C table, is put in
     * front at module init (io_doc). */
    .tp_doc = "One I/O event loop (libcurl multi) shared by every file opened with it; "
              "its local files keep at most max_open_files descriptors open "
              "(0: a quarter of ulimit -n).  A request with no answer after "
              "hedge_after_ms is sent once more, the first answer wins (0: the 95th "
              "percentile of recent first-byte times or twice their median, at least "
              "100 ms; < 0: never).  header_cache_dir's folder holds at most "
              "header_cache_max_bytes (0: 1 GiB), least recently used entries removed "
              "first; parsing one file's header may take header_memory_max bytes "
              "(0: 256 MiB).  Decoded tiles and strips that windows read only in part "
              "are kept for the next reads of its files within cache_bytes (0: 5% of "
              "the memory, at least 256 MiB, as GDAL_CACHEMAX; -1: none).  sign: a "
              "callable url -> signed url (or (signed url, expiry as a POSIX time)), "
              "or a cogfeed.stac.Signer, for remote URLs that need a signature (SAS, "
              "presigned): called when a file is opened and again sign_margin_s "
              "before the signature expires (docs/remote.md).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)IO_init,
    .tp_dealloc = (destructor)IO_dealloc,
    .tp_methods = IO_methods,
};

cf_io *cf__py_io_get(PyObject *obj) {
    if (!obj || obj == Py_None) {
        if (!default_io) {
            default_io = PyObject_CallObject((PyObject *)&IOType, NULL);
            if (!default_io) return NULL;
        }
        obj = default_io;
    }
    if (!PyObject_TypeCheck(obj, &IOType)) {
        PyErr_SetString(PyExc_TypeError, "io must be a cogfeed.IO or None");
        return NULL;
    }
    cf_io *io = ((IOObject *)obj)->io;
    if (!io) PyErr_SetString(PyExc_ValueError, "cogfeed.IO was not initialised");
    return io;
}

/* ----------------------------------------------------------------- Cog */

typedef struct {
    PyObject_HEAD cf_cog *cog;
    PyObject *io; /* keeps the IO alive while the cog uses it */
    PyObject *crs; /* cogfeed.CRS or None, made at open */
    cf_cog_info info;
    /* Reads running with the GIL released (under the GIL), and a close()
     * asked for meanwhile: the last of those reads closes the file, so
     * that another thread's close() never frees it under a read. */
    int readers, close_pending;
} CogObject;

static PyTypeObject CogType;

/* Close the file (once). */
static void close_cog(CogObject *self) {
    cf_cog *c = self->cog;
    self->cog = NULL;
    self->close_pending = 0;
    if (c) {
        Py_BEGIN_ALLOW_THREADS cf_cog_close(c);
        Py_END_ALLOW_THREADS
    }
}

static void Cog_dealloc(CogObject *self) {
    close_cog(self);
    Py_XDECREF(self->io);
    Py_XDECREF(self->crs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_open(CogObject *self) {
    if (!self->cog || self->close_pending) {
        PyErr_SetString(PyExc_ValueError, "I/O operation on a closed cogfeed file");
        return 0;
    }
    return 1;
}

/* Around every read that releases the GIL (called with it held).  The
 * open check is repeated here, not only at the top of a call: parsing a
 * window or bands (__index__) and allocating arrays (GC) can run Python
 * code, and with it another thread's close(). */
static int reading_begin(CogObject *self) {
    if (!check_open(self)) return 0;
    self->readers++;
    return 1;
}
static void reading_end(CogObject *self) {
    if (--self->readers == 0 && self->close_pending) close_cog(self);
}

PyObject *cf__py_seq(PyObject *obj, const char *msg) {
    PyObject *fast = PySequence_Fast(obj, msg);
    if (!fast || PyTuple_Check(fast)) return fast;
    PyObject *t = PyList_AsTuple(fast);
    Py_DECREF(fast);
    return t;
}

static int parse_window(PyObject *win, long long out[4]) {
    PyObject *seq = cf__py_seq(win, "window must be a sequence (x, y, w, h)");
    if (!seq) return 0;
    if (PySequence_Fast_GET_SIZE(seq) != 4) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "window must be (x, y, w, h)");
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return 0;
        }
    }
    Py_DECREF(seq);
    if (out[2] <= 0 || out[3] <= 0 || out[2] > CF_MAX_DIMENSION || out[3] > CF_MAX_DIMENSION) {
        PyErr_SetString(PyExc_ValueError, "window width and height must be positive");
        return 0;
    }
    return 1;
}

/* The window to read: `win` parsed, or the whole level when it is None. */
static int resolve_window(CogObject *self, PyObject *win, int level, long long wv[4]) {
    if (win != Py_None) return parse_window(win, wv);
    cf_level_info li;
    cf_error err = {0};
    cf_status st = cf_cog_level_info(self->cog, level, &li, &err);
    if (st) {
        cf__py_raise(st, &err);
        return 0;
    }
    wv[0] = wv[1] = 0;
    wv[2] = li.width;
    wv[3] = li.height;
    return 1;
}

int cf__py_parse_bands(PyObject *obj, int **bands, int *nb) {
    *bands = NULL;
    *nb = 0;
    if (obj == Py_None) return 1;
    PyObject *seq = cf__py_seq(obj, "bands must be a sequence of 1-based ints");
    if (!seq) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *b = NULL;
    if (n < 1 || n > CF_MAX_BANDS) {
        PyErr_Format(PyExc_ValueError, "bands: 1 to %d entries", CF_MAX_BANDS);
        goto fail;
    }
    b = PyMem_Malloc((size_t)n * sizeof *b);
    if (!b) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) goto fail;
        b[i] = (int)v;
    }
    Py_DECREF(seq);
    *bands = b;
    *nb = (int)n;
    return 1;
fail:
    PyMem_Free(b);
    Py_DECREF(seq);
    return 0;
}

/* The array a read or a tile decode fills: `out` when it is a writeable,
 * aligned, native-order C-contiguous array of typenum and shape dims (a
 * byte-swapped or misaligned one would get native bytes or typed stores at
 * odd addresses), else a new one (out None); a new reference, or NULL with
 * an exception naming `type`. */
static PyArrayObject *out_array3(PyObject *out, const npy_intp dims[3], int typenum,
                                 const char *type) {
    if (out == Py_None) return (PyArrayObject *)PyArray_SimpleNew(3, (npy_intp *)dims, typenum);
    if (!PyArray_Check(out) || PyArray_NDIM((PyArrayObject *)out) != 3 ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)out) ||
        PyArray_TYPE((PyArrayObject *)out) != typenum ||
        !PyArray_ISBEHAVED((PyArrayObject *)out) || /* aligned, writeable, native order */
        memcmp(PyArray_DIMS((PyArrayObject *)out), dims, 3 * sizeof *dims)) {
        PyErr_Format(PyExc_ValueError,
                     "out must be a writeable, aligned, native-order C-contiguous %s array "
                     "of shape (%lld, %lld, %lld)",
                     type, (long long)dims[0], (long long)dims[1], (long long)dims[2]);
        return NULL;
    }
    Py_INCREF(out);
    return (PyArrayObject *)out;
}

/* The array a read fills: out_array3 of the file's dtype, (count, h, w). */
static PyArrayObject *out_array(CogObject *self, PyObject *out, int count, long long h,
                                long long w) {
    npy_intp dims[3] = {count, (npy_intp)h, (npy_intp)w};
    return out_array3(out, dims, cf__py_npy_type(self->info.dtype),
                      cf_dtype_name(self->info.dtype));
}

/* Optional number arguments of the grid read: None or a float. */
static int opt_number(PyObject *o, const char *what, int *set, double *v) {
    if (o == Py_None) return 1;
    *v = PyFloat_AsDouble(o);
    if (*v == -1.0 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s must be a number or None", what);
        return 0;
    }
    *set = 1;
    return 1;
}

/* The warp options of read(grid=...): resampling, level (None: auto),
 * error_threshold, src_nodata, dst_nodata. */
static int warp_options(PyObject *level_obj, const char *rs, double et, PyObject *src_nd,
                        PyObject *dst_nd, cf_warp_options *o) {
    cf_warp_options_init(o);
    cf_error err = {0};
    if (cf_resampling_from_name(rs, &o->resampling, &err)) {
        PyErr_SetString(PyExc_ValueError, err.msg);
        return 0;
    }
    if (level_obj != Py_None) {
        long l = PyLong_AsLong(level_obj);
        if (l == -1 && PyErr_Occurred()) return 0;
        if (l < 0) {
            PyErr_SetString(PyExc_ValueError, "level must be >= 0 or None (automatic)");
            return 0;
        }
        o->level = (int)l;
    }
    if (!(et >= 0)) {
        PyErr_SetString(PyExc_ValueError, "error_threshold must be >= 0");
        return 0;
    }
    o->error_threshold = et;
    int set = 0;
    if (!opt_number(src_nd, "src_nodata", &set, &o->src_nodata)) return 0;
    if (set) o->src_nodata_set = 1;
    set = 0;
    if (!opt_number(dst_nd, "dst_nodata", &set, &o->dst_nodata)) return 0;
    if (set) o->dst_nodata_set = 1;
    return 1;
}

static PyObject *Cog_read_grid(CogObject *self, PyObject *grid, PyObject *bands_obj,
                               PyObject *out, cf_warp_options *o) {
    cf_grid g;
    cf_crs *hold = NULL;
    if (!cf__py_grid_parse(grid, &g, &hold)) return NULL;
    int nb = 0, *bands = NULL;
    if (!cf__py_parse_bands(bands_obj, &bands, &nb)) {
        cf_crs_free(hold);
        return NULL;
    }
    int count = nb ? nb : (int)self->info.count;
    PyArrayObject *arr = out_array(self, out, count, g.height, g.width);
    if (!arr || !reading_begin(self)) {
        Py_XDECREF(arr);
        PyMem_Free(bands);
        cf_crs_free(hold);
        return NULL;
    }
    cf_error err = {0};
    cf_status st;
    void *dst = PyArray_DATA(arr);
    size_t size = (size_t)PyArray_NBYTES(arr);
    Py_BEGIN_ALLOW_THREADS st = cf_cog_read_grid(self->cog, &g, bands, nb, o, dst, size, &err);
    Py_END_ALLOW_THREADS reading_end(self);
    PyMem_Free(bands);
    cf_crs_free(hold);
    if (st) {
        Py_DECREF(arr);
        return cf__py_raise(st, &err);
    }
    return (PyObject *)arr;
}

static PyObject *Cog_read(CogObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"window", "bands", "level", "out", "grid", "resampling",
                             "error_threshold", "src_nodata", "dst_nodata", NULL};
    PyObject *win = Py_None, *bands_obj = Py_None, *out = Py_None, *level_obj = Py_None;
    PyObject *grid = Py_None, *src_nd = Py_None, *dst_nd = Py_None;
    const char *rs = "nearest";
    double et = 0.125;
    int level = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO$OOsdOO", kwlist, &win, &bands_obj,
                                     &level_obj, &out, &grid, &rs, &et, &src_nd, &dst_nd))
        return NULL;
    if (!check_open(self)) return NULL;
    if (grid != Py_None) {
        if (win != Py_None) {
            PyErr_SetString(PyExc_ValueError, "read(): give a window or a grid, not both");
            return NULL;
        }
        cf_warp_options o;
        if (!warp_options(level_obj, rs, et, src_nd, dst_nd, &o)) return NULL;
        return Cog_read_grid(self, grid, bands_obj, out, &o);
    }
    if (level_obj != Py_None) {
        long l = PyLong_AsLong(level_obj);
        if (l == -1 && PyErr_Occurred()) return NULL;
        if (l < INT_MIN || l > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "level out of range");
            return NULL;
        }
        level = (int)l;
    }
    long long wv[4];
    cf_error err = {0};
    cf_status st;
    if (!resolve_window(self, win, level, wv)) return NULL;
    int nb = 0, *bands = NULL;
    if (!cf__py_parse_bands(bands_obj, &bands, &nb)) return NULL;
    int count = nb ? nb : (int)self->info.count;
    PyArrayObject *arr = out_array(self, out, count, wv[3], wv[2]);
    if (!arr) {
        PyMem_Free(bands);
        return NULL;
    }
    void *dst = PyArray_DATA(arr);
    size_t size = (size_t)PyArray_NBYTES(arr);
    if (!reading_begin(self)) {
        PyMem_Free(bands);
        Py_DECREF(arr);
        return NULL;
    }
    cf_dtype dt = self->info.dtype;
    Py_BEGIN_ALLOW_THREADS st = cf_cog_read(self->cog, level, wv[0], wv[1], (uint32_t)wv[2],
                                            (uint32_t)wv[3], bands, nb, dst, size, &err);
    /* complex integers were read into the first part of the array */
    if (!st) cf_complex_widen(dt, dst, dst, (size_t)PyArray_SIZE(arr));
    Py_END_ALLOW_THREADS reading_end(self);
    PyMem_Free(bands);
    if (st) {
        Py_DECREF(arr);
        return cf__py_raise(st, &err);
    }
    return (PyObject *)arr;
}

static PyObject *Cog_read_mask(CogObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"window", "level", NULL};
    PyObject *win = Py_None;
    int level = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Oi", kwlist, &win, &level)) return NULL;
    if (!check_open(self)) return NULL;
    long long wv[4];
    cf_error err = {0};
    cf_status st;
    if (!resolve_window(self, win, level, wv)) return NULL;
    npy_intp dims[2] = {(npy_intp)wv[3], (npy_intp)wv[2]};
    PyArrayObject *arr = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_UINT8);
    if (!arr) return NULL;
    void *dst = PyArray_DATA(arr);
    size_t size = (size_t)PyArray_NBYTES(arr);
    if (!reading_begin(self)) {
        Py_DECREF(arr);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = cf_cog_read_mask(self->cog, level, wv[0], wv[1], (uint32_t)wv[2],
                                                 (uint32_t)wv[3], dst, size, &err);
    Py_END_ALLOW_THREADS reading_end(self);
    if (st) {
        Py_DECREF(arr);
        return cf__py_raise(st, &err);
    }
    return (PyObject *)arr;
}

/* A level number argument (None: 0). */
static int level_arg(PyObject *o, int *level) {
    *level = 0;
    if (o == Py_None) return 1;
    long l = PyLong_AsLong(o);
    if (l == -1 && PyErr_Occurred()) return 0;
    if (l < INT_MIN || l > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "level out of range");
        return 0;
    }
    *level = (int)l;
    return 1;
}

/* A tile index argument: a non-negative int (OverflowError otherwise). */
static int index_arg(PyObject *o, unsigned long long *index) {
    if (!PyLong_Check(o)) {
        PyObject *i = PyNumber_Index(o);
        if (!i) return 0;
        *index = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
    } else {
        *index = PyLong_AsUnsignedLongLong(o);
    }
    return !(*index == (unsigned long long)-1 && PyErr_Occurred());
}

static PyObject *Cog_tile_info(CogObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"index", "level", "mask", NULL};
    unsigned long long index;
    PyObject *index_obj, *level_obj = Py_None;
    int level, mask = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$p", kwlist, &index_obj, &level_obj, &mask))
        return NULL;
    if (!index_arg(index_obj, &index) || !level_arg(level_obj, &level) || !check_open(self))
        return NULL;
    cf_chunk_info ci;
    cf_error err = {0};
    cf_status st = (mask ? cf_cog_mask_chunk_info : cf_cog_chunk_info)(self->cog, level, index,
                                                                       &ci, &err);
    if (st) return cf__py_raise(st, &err);
    return Py_BuildValue("{s:K,s:K,s:K,s:I,s:I,s:I,s:(III),s:I}", "count",
                         (unsigned long long)ci.count, "offset",
                         (unsigned long long)ci.offset, "byte_count",
                         (unsigned long long)ci.byte_count, "col", ci.col, "row", ci.row,
                         "plane", ci.plane, "shape", ci.height, ci.width, ci.samples, "bits",
                         ci.bits);
}

/* 1-bit rows (packed, MSB first, padded to bytes) -> one 0/1 byte per
 * sample, in place from the end (the packed rows lie at the start). */
static void unpack_bits(uint8_t *buf, size_t rows, size_t per_row) {
    size_t row_bytes = (per_row + 7) / 8;
    for (size_t r = rows; r-- > 0;) {
        const uint8_t *s = buf + r * row_bytes;
        uint8_t *d = buf + r * per_row;
        for (size_t i = per_row; i-- > 0;) d[i] = (uint8_t)((s[i >> 3] >> (7 - (i & 7))) & 1);
    }
}

static PyObject *Cog_decode_tile(CogObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"data", "index", "level", "out", "mask", NULL};
    Py_buffer data;
    unsigned long long index;
    PyObject *index_obj, *level_obj = Py_None, *out = Py_None;
    int level, mask = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*O|O$Op", kwlist, &data, &index_obj,
                                     &level_obj, &out, &mask))
        return NULL;
    PyArrayObject *arr = NULL;
    cf_chunk_info ci;
    cf_error err = {0};
    cf_status st;
    if (!index_arg(index_obj, &index) || !level_arg(level_obj, &level) || !check_open(self))
        goto fail;
    st = (mask ? cf_cog_mask_chunk_info : cf_cog_chunk_info)(self->cog, level, index, &ci,
                                                             &err);
    /* CF_E_FORMAT: the file's range of the tile lies outside the file, but
     * bytes from elsewhere decode all the same (ci is filled) */
    if (st && st != CF_E_FORMAT) {
        cf__py_raise(st, &err);
        goto fail;
    }
    int typenum = cf__py_npy_type(ci.bits == 1 ? CF_DT_U8 : ci.dtype);
    npy_intp dims[3] = {(npy_intp)ci.height, (npy_intp)ci.width, (npy_intp)ci.samples};
    if (typenum < 0) {
        PyErr_Format(PyExc_ValueError, "%s: no NumPy type for %s samples",
                     cf_cog_name(self->cog), cf_dtype_name(ci.dtype));
        goto fail;
    }
    arr = out_array3(out, dims, typenum, ci.bits == 1 ? "uint8" : cf_dtype_name(ci.dtype));
    if (!arr || !reading_begin(self)) goto fail;
    void *dst = PyArray_DATA(arr);
    size_t size = (size_t)PyArray_NBYTES(arr);
    cf_dtype dt = ci.dtype;
    Py_BEGIN_ALLOW_THREADS st = (mask ? cf_cog_decode_mask_chunk : cf_cog_decode_chunk)(
        self->cog, level, index, data.buf, (size_t)data.len, dst, size, &err);
    if (!st && ci.bits == 1) unpack_bits(dst, ci.height, (size_t)ci.width * ci.samples);
    /* a mask as read_mask gives it: a 1-bit mask's 0/1 as 0/255 (an
     * 8-bit mask's bytes as they are) */
    for (size_t i = 0; !st && mask && ci.bits == 1 && i < size; i++)
        ((uint8_t *)dst)[i] = ((uint8_t *)dst)[i] ? 255 : 0;
    /* complex integers were decoded into the first part of the array */
    if (!st && ci.bits != 1) cf_complex_widen(dt, dst, dst, (size_t)PyArray_SIZE(arr));
    Py_END_ALLOW_THREADS reading_end(self);
    PyBuffer_Release(&data);
    if (st) {
        Py_DECREF(arr);
        return cf__py_raise(st, &err);
    }
    return (PyObject *)arr;
fail:
    Py_XDECREF(arr);
    PyBuffer_Release(&data);
    return NULL;
}

static PyObject *Cog_stats(CogObject *self, PyObject *noargs) {
    if (!check_open(self)) return NULL;
    cf_cog_stats s;
    cf_cog_get_stats(self->cog, &s);
    return Py_BuildValue("{sKsKsKsKsK}", "chunks_decoded", (unsigned long long)s.chunks_decoded,
                         "decoded_bytes", (unsigned long long)s.decoded_bytes,
                         "delivered_bytes", (unsigned long long)s.delivered_bytes,
                         "cache_hits", (unsigned long long)s.cache_hits, "cache_misses",
                         (unsigned long long)s.cache_misses);
}

static PyObject *Cog_close(CogObject *self, PyObject *noargs) {
    if (self->readers)
        self->close_pending = 1; /* the last running read closes it */
    else
        close_cog(self);
    Py_RETURN_NONE;
}

static PyObject *Cog_enter(CogObject *self, PyObject *noargs) {
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Cog_exit(CogObject *self, PyObject *args) { return Cog_close(self, NULL); }

static PyObject *Cog_level_shape(CogObject *self, PyObject *arg) {
    if (!check_open(self)) return NULL;
    long level = PyLong_AsLong(arg);
    if (level == -1 && PyErr_Occurred()) return NULL;
    cf_level_info li;
    cf_error err = {0};
    cf_status st = cf_cog_level_info(self->cog, (int)level, &li, &err);
    if (st) return cf__py_raise(st, &err);
    return Py_BuildValue("{s:I,s:I,s:I,s:I,s:O}", "width", li.width, "height", li.height,
                         "tile_width", li.tile_width, "tile_height", li.tile_height, "tiled",
                         li.tiled ? Py_True : Py_False);
}

/* "KEY=VALUE" items as a dict. */
static PyObject *items_dict(const char *const *it) {
    PyObject *d = PyDict_New();
    for (int k = 0; d && it && it[k]; k++) {
        const char *eq = strchr(it[k], '=');
        if (!eq) continue;
        PyObject *key = PyUnicode_DecodeUTF8(it[k], eq - it[k], "replace");
        PyObject *val = PyUnicode_DecodeUTF8(eq + 1, (Py_ssize_t)strlen(eq + 1), "replace");
        if (!key || !val || PyDict_SetItem(d, key, val)) {
            Py_XDECREF(key);
            Py_XDECREF(val);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(val);
    }
    return d;
}

static PyObject *text(const char *s) {
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyObject *Cog_get_metadata(CogObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"band", "domain", NULL};
    int band = 0;
    const char *domain = "";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|is", kwlist, &band, &domain)) return NULL;
    if (!check_open(self)) return NULL;
    if (band < 0 || (uint32_t)band > self->info.count)
        return PyErr_Format(PyExc_ValueError, "band %d does not exist (0: the dataset, 1..%u)",
                            band, self->info.count);
    return items_dict(cf_cog_metadata(self->cog, band, domain));
}

static PyObject *Cog_metadata_domains(CogObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"band", NULL};
    int band = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i", kwlist, &band)) return NULL;
    if (!check_open(self)) return NULL;
    if (band < 0 || (uint32_t)band > self->info.count)
        return PyErr_Format(PyExc_ValueError, "band %d does not exist (0: the dataset, 1..%u)",
                            band, self->info.count);
    const char *const *d = cf_cog_metadata_domains(self->cog, band);
    PyObject *l = PyList_New(0);
    for (int k = 0; l && d && d[k]; k++) {
        PyObject *t = text(d[k]);
        if (!t || PyList_Append(l, t)) {
            Py_XDECREF(t);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(t);
    }
    return l;
}

/* grid(level=0) -> cogfeed.Grid of the file's level. */
static PyObject *Cog_grid(CogObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"level", NULL};
    int level = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i", kwlist, &level)) return NULL;
    if (!check_open(self)) return NULL;
    cf_grid g;
    cf_error err = {0};
    cf_status st = cf_cog_grid(self->cog, level, &g, &err);
    if (st) return cf__py_raise(st, &err);
    PyObject *mod = PyImport_ImportModule("cogfeed.grid");
    if (!mod) return NULL;
    const double *t = g.transform;
    PyObject *gt = Py_BuildValue("(dddddd)", t[0], t[1], t[2], t[3], t[4], t[5]);
    PyObject *r = gt ? PyObject_CallMethod(mod, "_from_cog", "OOII", self->crs, gt, g.width,
                                           g.height)
                     : NULL;
    Py_XDECREF(gt);
    Py_DECREF(mod);
    return r;
}

static PyMethodDef Cog_methods[] = {
    {"read", (PyCFunction)(void (*)(void))Cog_read, METH_VARARGS | METH_KEYWORDS,
     "read(window=None, bands=None, level=0, *, out=None, grid=None, resampling='nearest',\n"
     "     error_threshold=0.125, src_nodata=None, dst_nodata=None) -> ndarray (bands, h, w)\n\n"
     "window=(x, y, w, h) in pixels of the level (None: whole level); bands are 1-based;\n"
     "pixels outside the image are nodata (0 without nodata).\n"
     "grid=cogfeed.Grid: read onto that grid instead (shape (bands, grid.height,\n"
     "grid.width)) with resampling 'nearest' (the default, as gdalwarp's; the Loader's\n"
     "default for images is 'bilinear': pass it for the Loader's array), 'bilinear',\n"
     "'cubic', 'average' or 'mode', as gdalwarp computes it; level None (default) picks an overview as gdalwarp does;\n"
     "another CRS is reprojected within error_threshold source pixels; nodata sources\n"
     "never contribute, pixels without a value are dst_nodata (default: the source's,\n"
     "else 0). The GIL is released."},
    {"grid", (PyCFunction)(void (*)(void))Cog_grid, METH_VARARGS | METH_KEYWORDS,
     "grid(level=0) -> cogfeed.Grid of the file (an overview's for level > 0)"},
    {"read_mask", (PyCFunction)(void (*)(void))Cog_read_mask, METH_VARARGS | METH_KEYWORDS,
     "read_mask(window=None, level=0) -> uint8 ndarray (h, w): 255 valid, 0 invalid"},
    {"tile_info", (PyCFunction)(void (*)(void))Cog_tile_info, METH_VARARGS | METH_KEYWORDS,
     "tile_info(index, level=0, *, mask=False) -> dict(count, offset, byte_count, col, row,\n"
     "plane, shape, bits)\n\n"
     "Where tile (or strip) `index` of a level lies in the file (offset, byte_count; 0: sparse)\n"
     "and what decode_tile gives for it: shape (h, w, samples), the whole tile as stored;\n"
     "count is the number of tiles of the level (all band planes). mask=True: the tile of\n"
     "the level's internal mask (bits 1, or 8 for an 8-bit mask; cogfeed.Error when it has\n"
     "none)."},
    {"decode_tile", (PyCFunction)(void (*)(void))Cog_decode_tile, METH_VARARGS | METH_KEYWORDS,
     "decode_tile(data, index, level=0, *, out=None, mask=False) -> ndarray (h, w, samples)\n\n"
     "Decode the compressed bytes of tile (or strip) `index` that the caller fetched\n"
     "itself (bytes, bytearray, memoryview, ...): the whole tile as stored, pixel-\n"
     "interleaved, the file's dtype, exactly the samples read() cuts its windows from\n"
     "(1-bit samples as 0/1 bytes). Empty data for a sparse tile gives nodata. No I/O;\n"
     "the GIL is released. The bytes are untrusted: bad ones raise cogfeed.Error\n"
     "naming the file, level and tile. out: a C-contiguous array of that shape and dtype\n"
     "to decode into (reused from tile to tile: no allocation, no fresh pages).\n"
     "mask=True: a tile of the level's internal mask, uint8 (h, w, 1), as read_mask gives\n"
     "it (a 1-bit mask 255 where valid; a sparse tile not valid)."},
    {"level_info", (PyCFunction)Cog_level_shape, METH_O,
     "level_info(level) -> dict(width, height, tile_width, tile_height, tiled)"},
    {"get_metadata", (PyCFunction)(void (*)(void))Cog_get_metadata, METH_VARARGS | METH_KEYWORDS,
     "get_metadata(band=0, domain='') -> dict\n\n"
     "Metadata as GDAL's GetMetadata(domain) gives it, of the dataset (band 0) or a band:\n"
     "TIFFTAG_* items, AREA_OR_POINT and the GDAL_METADATA items."},
    {"metadata_domains", (PyCFunction)(void (*)(void))Cog_metadata_domains,
     METH_VARARGS | METH_KEYWORDS,
     "metadata_domains(band=0) -> list of the domains that have items ('' the default)"},
    {"stats", (PyCFunction)Cog_stats, METH_NOARGS,
     "stats() -> dict: chunks_decoded, decoded_bytes (what the tiles and strips read so far\n"
     "decoded to; a strip decoded only down to a window's last rows counts those),\n"
     "delivered_bytes (of the windows read() and read_mask() gave), cache_hits and\n"
     "cache_misses (chunks found, or not, decoded in the IO's cache_bytes)"},
    {"close", (PyCFunction)Cog_close, METH_NOARGS, "close the file"},
    {"__enter__", (PyCFunction)Cog_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Cog_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

#define CF_INFO(field) ((CogObject *)self)->info.field

static PyObject *get_dtype(PyObject *self, void *c) {
    return (PyObject *)PyArray_DescrFromType(cf__py_npy_type(CF_INFO(dtype)));
}
static PyObject *get_overviews(PyObject *self, void *c) {
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    PyObject *l = PyList_New(0);
    for (int i = 1; l && i < o->info.nlevels; i++) {
        cf_level_info li;
        cf_cog_level_info(o->cog, i, &li, NULL);
        PyObject *t = Py_BuildValue("(II)", li.width, li.height);
        if (!t || PyList_Append(l, t)) {
            Py_XDECREF(t);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(t);
    }
    return l;
}
static PyObject *get_geotransform(PyObject *self, void *c) {
    if (!CF_INFO(has_geotransform)) Py_RETURN_NONE;
    const double *g = CF_INFO(geotransform);
    return Py_BuildValue("(dddddd)", g[0], g[1], g[2], g[3], g[4], g[5]);
}
static PyObject *get_crs(PyObject *self, void *c) {
    PyObject *o = ((CogObject *)self)->crs;
    Py_INCREF(o);
    return o;
}
static PyObject *get_epsg(PyObject *self, void *c) {
    if (!CF_INFO(epsg)) Py_RETURN_NONE;
    return PyLong_FromLong(CF_INFO(epsg));
}
/* transform: (a, b, c, d, e, f) as rasterio and the affine package order
 * it (x = a*col + b*row + c); bounds (left, bottom, right, top); res. */
static PyObject *get_georef(PyObject *self, void *which) {
    if (!CF_INFO(has_geotransform)) Py_RETURN_NONE;
    const double *g = CF_INFO(geotransform);
    const char *w = which;
    if (!strcmp(w, "transform"))
        return Py_BuildValue("(dddddd)", g[1], g[2], g[0], g[4], g[5], g[3]);
    if (!strcmp(w, "res")) return Py_BuildValue("(dd)", hypot(g[1], g[4]), hypot(g[2], g[5]));
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    cf_grid grid;
    double b[4];
    cf_cog_grid(o->cog, 0, &grid, NULL);
    cf_grid_bounds(&grid, b);
    return Py_BuildValue("(dddd)", b[0], b[1], b[2], b[3]);
}
static PyObject *get_nodata(PyObject *self, void *c) {
    if (!CF_INFO(has_nodata)) Py_RETURN_NONE;
    return PyFloat_FromDouble(CF_INFO(nodata));
}
static PyObject *get_requests(PyObject *self, void *c) {
    return PyLong_FromUnsignedLongLong(cf_cog_requests(((CogObject *)self)->cog));
}
static PyObject *get_name(PyObject *self, void *c) {
    return PyUnicode_FromString(cf_cog_name(((CogObject *)self)->cog));
}
static PyObject *get_scales(PyObject *self, void *c) {
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    PyObject *l = PyList_New(o->info.count);
    for (uint32_t b = 0; l && b < o->info.count; b++)
        PyList_SET_ITEM(l, b, PyFloat_FromDouble(c ? cf_cog_band_offset(o->cog, (int)b + 1)
                                                   : cf_cog_band_scale(o->cog, (int)b + 1)));
    return l;
}
static PyObject *get_metadata(PyObject *self, void *c) {
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    return items_dict(cf_cog_metadata(o->cog, 0, ""));
}

/* Per-band strings: descriptions (c NULL) or units. */
static PyObject *get_band_text(PyObject *self, void *c) {
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    PyObject *l = PyList_New(o->info.count);
    for (uint32_t b = 0; l && b < o->info.count; b++) {
        const char *s = c ? cf_cog_band_unit(o->cog, (int)b + 1)
                          : cf_cog_band_description(o->cog, (int)b + 1);
        PyObject *t = text(s);
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, b, t);
    }
    return l;
}

static PyObject *get_nodatas(PyObject *self, void *c) {
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    PyObject *l = PyList_New(o->info.count);
    for (uint32_t b = 0; l && b < o->info.count; b++) {
        double v;
        PyObject *t;
        if (cf_cog_band_nodata(o->cog, (int)b + 1, &v)) {
            t = PyFloat_FromDouble(v);
        } else {
            t = Py_None;
            Py_INCREF(t);
        }
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, b, t);
    }
    return l;
}

static PyObject *get_datetime(PyObject *self, void *c) {
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    const char *v = cf_cog_metadata_item(o->cog, 0, "", "TIFFTAG_DATETIME");
    if (!v) Py_RETURN_NONE;
    return text(v);
}

static PyObject *get_warnings(PyObject *self, void *c) {
    CogObject *o = (CogObject *)self;
    if (!check_open(o)) return NULL;
    const char *w = cf_cog_warnings(o->cog);
    PyObject *l = PyList_New(0);
    while (l && w && *w) {
        const char *e = strchr(w, '\n');
        Py_ssize_t n = e ? (Py_ssize_t)(e - w) : (Py_ssize_t)strlen(w);
        PyObject *t = PyUnicode_DecodeUTF8(w, n, "replace");
        if (!t || PyList_Append(l, t)) {
            Py_XDECREF(t);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(t);
        w += n + (e != NULL);
    }
    return l;
}

static PyObject *get_etag(PyObject *self, void *c) {
    if (!CF_INFO(etag)) Py_RETURN_NONE;
    return PyUnicode_FromString(CF_INFO(etag));
}
static PyObject *get_closed(PyObject *self, void *c) {
    const CogObject *o = (const CogObject *)self;
    return PyBool_FromLong(o->cog == NULL || o->close_pending);
}

#define CF_GET_UINT(name, field, doc)                                                  \
    static PyObject *get_##name(PyObject *self, void *c) {                              \
        return PyLong_FromUnsignedLongLong((unsigned long long)CF_INFO(field));        \
    }
CF_GET_UINT(width, width, )
CF_GET_UINT(height, height, )
CF_GET_UINT(count, count, )
CF_GET_UINT(tile_width, tile_width, )
CF_GET_UINT(tile_height, tile_height, )
CF_GET_UINT(predictor, predictor, )
CF_GET_UINT(bits, bits_per_sample, )
CF_GET_UINT(file_size, file_size, )
CF_GET_UINT(header_bytes, header_bytes, )
CF_GET_UINT(header_requests, header_requests, )
static PyObject *get_compression(PyObject *self, void *c) {
    return PyUnicode_FromString(CF_INFO(compression_name));
}
static PyObject *get_interleave(PyObject *self, void *c) {
    return PyUnicode_FromString(CF_INFO(planar) == 2 ? "band" : "pixel");
}
static PyObject *get_flag(PyObject *self, void *c) {
    const char *which = c;
    int v = !strcmp(which, "tiled")    ? CF_INFO(tiled)
            : !strcmp(which, "bigtiff") ? CF_INFO(bigtiff)
            : !strcmp(which, "mask")    ? CF_INFO(has_mask)
                                        : CF_INFO(big_endian);
    return PyBool_FromLong(v);
}

static PyGetSetDef Cog_getset[] = {
    {"width", get_width, NULL, "width in pixels (level 0)", NULL},
    {"height", get_height, NULL, "height in pixels (level 0)", NULL},
    {"count", get_count, NULL, "number of bands", NULL},
    {"dtype", get_dtype, NULL, "numpy dtype of the samples", NULL},
    {"bits_per_sample", get_bits, NULL, "bits per sample (1 for bit masks)", NULL},
    {"tile_width", get_tile_width, NULL, "tile width (strips: image width)", NULL},
    {"tile_height", get_tile_height, NULL, "tile height (strips: rows per strip)", NULL},
    {"tiled", get_flag, NULL, "True when tiled, False when stripped", "tiled"},
    {"bigtiff", get_flag, NULL, "True for BigTIFF", "bigtiff"},
    {"big_endian", get_flag, NULL, "True for big-endian files", "big_endian"},
    {"has_mask", get_flag, NULL, "True when an internal mask is present", "mask"},
    {"compression", get_compression, NULL, "compression name, e.g. 'LERC_ZSTD'", NULL},
    {"predictor", get_predictor, NULL, "TIFF predictor (1 none, 2 horizontal, 3 float)", NULL},
    {"interleave", get_interleave, NULL, "'pixel' or 'band'", NULL},
    {"overviews", get_overviews, NULL, "list of (width, height) of each overview level", NULL},
    {"geotransform", get_geotransform, NULL, "GDAL geotransform tuple or None", NULL},
    {"crs", get_crs, NULL,
     "cogfeed.CRS of the file (== its EPSG code as an int too), or None", NULL},
    {"epsg", get_epsg, NULL, "EPSG code as GDAL resolves it, or None", NULL},
    {"transform", get_georef, NULL,
     "affine transform (a, b, c, d, e, f) in rasterio's order (x = a*col + b*row + c), or None",
     "transform"},
    {"bounds", get_georef, NULL, "(left, bottom, right, top) of level 0, or None", "bounds"},
    {"res", get_georef, NULL, "(x resolution, y resolution) of level 0, or None", "res"},
    {"nodata", get_nodata, NULL, "nodata value (float) or None", NULL},
    {"scales", get_scales, NULL, "per-band scale (GDAL_METADATA), 1.0 when absent", NULL},
    {"nodatas", get_nodatas, NULL, "per-band nodata value (float) or None", NULL},
    {"descriptions", get_band_text, NULL, "per-band description (GDAL_METADATA), '' when none",
     NULL},
    {"units", get_band_text, NULL, "per-band unit (GDAL_METADATA), '' when none", "u"},
    {"metadata", get_metadata, NULL,
     "dataset metadata of the default domain (dict): TIFFTAG_*, AREA_OR_POINT, GDAL_METADATA",
     NULL},
    {"datetime", get_datetime, NULL, "the TIFF DateTime tag (TIFFTAG_DATETIME) or None", NULL},
    {"warnings", get_warnings, NULL,
     "what the open tolerated, as GDAL does (broken IFD chain, truncated file): list of str",
     NULL},
    {"offsets", get_scales, NULL, "per-band offset (GDAL_METADATA), 0.0 when absent", "o"},
    {"file_size", get_file_size, NULL, "file size in bytes", NULL},
    {"header_bytes", get_header_bytes, NULL, "bytes fetched to open the file", NULL},
    {"header_requests", get_header_requests, NULL, "requests made to open (0: header cache hit)", NULL},
    {"requests", get_requests, NULL, "requests sent for this file so far", NULL},
    {"etag", get_etag, NULL, "ETag pinned at open (remote files) or None", NULL},
    {"name", get_name, NULL, "URL without query string or credentials", NULL},
    {"closed", get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyObject *Cog_repr(CogObject *self) {
    if (!self->cog || self->close_pending) return PyUnicode_FromString("<cogfeed.Cog closed>");
    return PyUnicode_FromFormat("<cogfeed.Cog %s %ux%u x%u %s %s>", cf_cog_name(self->cog),
                                self->info.width, self->info.height, self->info.count,
                                cf_dtype_name(self->info.dtype), self->info.compression_name);
}

static PyTypeObject CogType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed.Cog",
    .tp_basicsize = sizeof(CogObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An opened (Geo)TIFF / COG; create with cogfeed.open(url).",
    .tp_dealloc = (destructor)Cog_dealloc,
    .tp_methods = Cog_methods,
    .tp_getset = Cog_getset,
    .tp_repr = (reprfunc)Cog_repr,
};

/* A Cog for an opened file, which it then owns (closed on failure);
 * io_ref: the IO object it was opened with. */
static PyObject *wrap_cog(cf_cog *cog, PyObject *io_ref) {
    CogObject *o = PyObject_New(CogObject, &CogType);
    if (!o) {
        cf_cog_close(cog);
        return NULL;
    }
    o->cog = cog;
    o->readers = o->close_pending = 0; /* PyObject_New does not zero */
    Py_INCREF(io_ref);
    o->io = io_ref;
    o->crs = NULL;
    cf_cog_get_info(cog, &o->info);
    o->crs = cf__py_crs_new(cf_crs_ref(cf_cog_crs(cog)));
    if (!o->crs) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

static PyObject *py_open(PyObject *mod, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"url", "io", "raw_color", NULL};
    PyObject *url_obj, *io_obj = Py_None;
    int raw_color = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$p", kwlist, &url_obj, &io_obj, &raw_color))
        return NULL;
    cf_open_options oo;
    cf_open_options_init(&oo);
    oo.raw_color = raw_color;
    PyObject *url_b;
    if (!PyUnicode_FSConverter(url_obj, &url_b)) return NULL;
    cf_io *io = cf__py_io_get(io_obj);
    if (!io) {
        Py_DECREF(url_b);
        return NULL;
    }
    PyObject *io_ref = io_obj == Py_None ? default_io : io_obj;
    const char *url = PyBytes_AsString(url_b);
    if (!url) {
        Py_DECREF(url_b);
        return NULL;
    }
    cf_error err = {0};
    cf_cog *cog = NULL;
    cf_status st;
    Py_BEGIN_ALLOW_THREADS st = cf_cog_open_ex(io, url, &oo, &cog, &err);
    Py_END_ALLOW_THREADS Py_DECREF(url_b);
    if (st) return cf__py_raise(st, &err);
    return wrap_cog(cog, io_ref);
}

/* open_many(urls, io=None, *, raw_color=False, errors="raise") */
static PyObject *py_open_many(PyObject *mod, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"urls", "io", "raw_color", "errors", NULL};
    PyObject *urls, *io_obj = Py_None;
    int raw_color = 0;
    const char *errors = "raise";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$ps", kwlist, &urls, &io_obj, &raw_color,
                                     &errors))
        return NULL;
    int ret_errors = !strcmp(errors, "return");
    if (!ret_errors && strcmp(errors, "raise"))
        return PyErr_Format(PyExc_ValueError, "errors must be 'raise' or 'return', not '%s'",
                            errors);
    if (PyUnicode_Check(urls) || PyBytes_Check(urls))
        return PyErr_Format(PyExc_TypeError, "urls must be a sequence of URLs, not one URL "
                                             "(use cogfeed.open)");
    cf_open_options oo;
    cf_open_options_init(&oo);
    oo.raw_color = raw_color;
    cf_io *io = cf__py_io_get(io_obj);
    if (!io) return NULL;
    PyObject *io_ref = io_obj == Py_None ? default_io : io_obj;
    PyObject *seq = cf__py_seq(urls, "urls must be a sequence of URLs (str or os.PathLike)");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *names = PyTuple_New(n); /* the URLs as bytes, alive while open */
    cf_open_req *reqs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *reqs);
    cf_error *errs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *errs);
    PyObject *out = NULL, *ret = NULL;
    if (!names || !reqs || !errs) {
        if (names) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b;
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &b)) goto done;
        PyTuple_SET_ITEM(names, i, b);
        reqs[i].url = PyBytes_AS_STRING(b);
        reqs[i].err = &errs[i];
    }
    /* Each req gets its own status: the overall one adds nothing. */
    Py_BEGIN_ALLOW_THREADS(void) cf_cog_open_many(io, reqs, (size_t)n, &oo, NULL);
    Py_END_ALLOW_THREADS

    /* Every opened file is a Cog now (closed by its dealloc if we fail);
     * a failed one is its exception. */
    out = PyList_New(n);
    Py_ssize_t nbad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item;
        if (reqs[i].cog) {
            item = wrap_cog(reqs[i].cog, io_ref);
            reqs[i].cog = NULL;
        } else {
            item = cf__py_error_new(reqs[i].status, &errs[i]);
            nbad++;
        }
        if (!item || !out) {
            Py_XDECREF(item);
            goto done;
        }
        PyList_SET_ITEM(out, i, item);
    }
    if (ret_errors || !nbad) {
        ret = out;
        out = NULL;
        goto done;
    }
    {
        /* One exception, of the first failure's class, naming every file
         * that failed; .errors: per URL, its exception or None. */
        PyObject *first = NULL, *msg = NULL, *lines = PyList_New(0), *errlist = PyList_New(n);
        if (!lines || !errlist) goto fail;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = PyList_GET_ITEM(out, i);
            int bad = !PyObject_TypeCheck(it, &CogType);
            if (bad && !first) first = it;
            PyObject *e = bad ? it : Py_None;
            Py_INCREF(e);
            PyList_SET_ITEM(errlist, i, e);
            if (bad) {
                PyObject *line = PyUnicode_FromFormat("  [%zd] %S", i, it);
                if (!line || PyList_Append(lines, line) < 0) {
                    Py_XDECREF(line);
                    goto fail;
                }
                Py_DECREF(line);
            }
        }
        {
            PyObject *sep = PyUnicode_FromString("\n");
            PyObject *body = sep ? PyUnicode_Join(sep, lines) : NULL;
            Py_XDECREF(sep);
            if (body)
                msg = PyUnicode_FromFormat("%zd of %zd files failed to open:\n%U", nbad, n, body);
            Py_XDECREF(body);
        }
        if (!msg) goto fail;
        {
            PyObject *exc = PyObject_CallFunctionObjArgs((PyObject *)Py_TYPE(first), msg, NULL);
            if (!exc) goto fail;
            static const char *const keep[] = {"code", "name", "http_status"};
            for (size_t j = 0; j < sizeof keep / sizeof keep[0]; j++) {
                PyObject *v = PyObject_GetAttrString(first, keep[j]);
                if (!v || PyObject_SetAttrString(exc, keep[j], v) < 0) PyErr_Clear();
                Py_XDECREF(v);
            }
            if (PyObject_SetAttrString(exc, "errors", errlist) < 0) {
                Py_DECREF(exc);
                goto fail;
            }
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
    fail:
        Py_XDECREF(msg);
        Py_XDECREF(lines);
        Py_XDECREF(errlist);
    }
done:
    /* Files opened but not handed to a Cog (out of memory on the way) */
    for (Py_ssize_t i = 0; reqs && i < n; i++) cf_cog_close(reqs[i].cog);
    Py_XDECREF(out);
    Py_XDECREF(names);
    PyMem_Free(reqs);
    PyMem_Free(errs);
    Py_DECREF(seq);
    return ret;
}

/* grid_level(cog, grid, resampling='nearest') -> the level a read onto
 * grid decodes (tests compare it with gdalwarp's choice). */
static PyObject *py_grid_level(PyObject *mod, PyObject *args) {
    PyObject *cog_obj, *grid;
    const char *rs = "nearest";
    if (!PyArg_ParseTuple(args, "O!O|s", &CogType, &cog_obj, &grid, &rs)) return NULL;
    CogObject *co = (CogObject *)cog_obj;
    if (!check_open(co)) return NULL;
    cf_warp_options o;
    if (!warp_options(Py_None, rs, 0.125, Py_None, Py_None, &o)) return NULL;
    cf_grid g;
    cf_crs *hold;
    if (!cf__py_grid_parse(grid, &g, &hold)) return NULL;
    int level = 0;
    cf_error err = {0};
    cf_status st = cf_cog_grid_level(co->cog, &g, &o, &level, &err);
    cf_crs_free(hold);
    if (st) return cf__py_raise(st, &err);
    return PyLong_FromLong(level);
}

static PyObject *py_default_io(PyObject *mod, PyObject *noargs) {
    if (!cf__py_io_get(Py_None)) return NULL;
    Py_INCREF(default_io);
    return default_io;
}

/* read_many(items, bands=None, level=0, *, threads=0, inflight_bytes=0):
 * items are (Cog, (x, y, w, h)) pairs. */
static PyObject *py_read_many(PyObject *mod, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"items", "bands", "level", "threads", "inflight_bytes", NULL};
    PyObject *items, *bands_obj = Py_None;
    int level = 0, threads = 0;
    Py_ssize_t inflight = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Oi$in", kwlist, &items, &bands_obj, &level,
                                     &threads, &inflight))
        return NULL;
    if (inflight < 0) return PyErr_Format(PyExc_ValueError, "inflight_bytes must be >= 0");
    PyObject *seq = cf__py_seq(items, "items must be a sequence of (Cog, window) pairs");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int nb = 0, *bands = NULL;
    cf_read_req *reqs = NULL;
    PyObject *out = NULL, *ret = NULL;
    Py_ssize_t begun = 0; /* items [0, begun) hold a reader count */
    if (!cf__py_parse_bands(bands_obj, &bands, &nb)) goto done;
    reqs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *reqs);
    out = PyList_New(n);
    if (!reqs || !out) {
        if (!reqs) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *cog_obj, *win;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_Format(PyExc_TypeError, "items[%zd] must be a (Cog, window) pair", i);
            goto done;
        }
        cog_obj = PyTuple_GET_ITEM(it, 0);
        win = PyTuple_GET_ITEM(it, 1);
        if (!PyObject_TypeCheck(cog_obj, &CogType)) {
            PyErr_Format(PyExc_TypeError, "items[%zd][0] must be a cogfeed.Cog", i);
            goto done;
        }
        CogObject *co = (CogObject *)cog_obj;
        /* Counted from here: the window parsing and the array below may
         * run Python code, and another thread's close() then waits. */
        if (!reading_begin(co)) goto done;
        begun++;
        long long wv[4];
        if (!resolve_window(co, win, level, wv)) goto done;
        int count = nb ? nb : (int)co->info.count;
        npy_intp dims[3] = {count, (npy_intp)wv[3], (npy_intp)wv[2]};
        PyObject *arr = PyArray_SimpleNew(3, dims, cf__py_npy_type(co->info.dtype));
        if (!arr) goto done;
        PyList_SET_ITEM(out, i, arr);
        cf_read_req *q = &reqs[i];
        q->cog = co->cog;
        q->level = level;
        q->x = wv[0];
        q->y = wv[1];
        q->w = (uint32_t)wv[2];
        q->h = (uint32_t)wv[3];
        q->bands = bands;
        q->nbands = nb;
        q->dst = PyArray_DATA((PyArrayObject *)arr);
        q->dst_size = (size_t)PyArray_NBYTES((PyArrayObject *)arr);
    }
    {
        /* `seq` (our own tuple) holds the Cog objects alive while the GIL
         * is released, and their reader counts keep another thread's
         * close() from freeing their files meanwhile. */
        cf_error err = {0};
        cf_status st;
        Py_BEGIN_ALLOW_THREADS st = cf_cog_read_many(reqs, (size_t)n, threads, (size_t)inflight,
                                                    &err);
        /* complex integers were read into the first part of each array */
        for (Py_ssize_t i = 0; !st && i < n; i++) {
            cf_cog_info in;
            cf_cog_get_info(reqs[i].cog, &in);
            cf_complex_widen(in.dtype, reqs[i].dst, reqs[i].dst,
                             reqs[i].dst_size / cf_dtype_size(cf_dtype_complex_float(in.dtype)));
        }
        Py_END_ALLOW_THREADS if (st) {
            cf__py_raise(st, &err);
            goto done;
        }
    }
    ret = out;
    out = NULL;
done:
    for (Py_ssize_t i = 0; i < begun; i++)
        reading_end((CogObject *)PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(seq, i), 0));
    Py_XDECREF(out);
    PyMem_Free(reqs);
    PyMem_Free(bands);
    Py_DECREF(seq);
    return ret;
}

static PyMethodDef module_methods[] = {
    {"open", (PyCFunction)(void (*)(void))py_open, METH_VARARGS | METH_KEYWORDS,
     "open(url, io=None, *, raw_color=False) -> Cog\n\nOpen a COG: a path, file://, "
     "http(s)://, s3://, az://, gs:// URL.\nio: a cogfeed.IO (None: the process default).\n"
     "raw_color: CMYK, CIELab and YCbCr (not JPEG) as stored, like GDAL's GTIFF_RAW:\n"
     "prefix, instead of the RGB(A) GDAL reads them as by default."},
    {"open_many", (PyCFunction)(void (*)(void))py_open_many, METH_VARARGS | METH_KEYWORDS,
     "open_many(urls, io=None, *, raw_color=False, errors='raise') -> list of Cog\n\n"
     "Open many COGs at once: every file's header reads run together on the io's\n"
     "loop, so N remote files take about one round trip, not N (docs/reader.md,\n"
     "\"Opening many files\").  The list is in the order of urls.\n"
     "errors='raise': if any file fails, the ones opened are closed and one\n"
     "exception is raised, of the first failure's class (cogfeed.NotFoundError,\n"
     "...), naming every file that failed; its .errors lists, per URL, the\n"
     "exception or None.  errors='return': failures are returned in place, as\n"
     "asyncio.gather(return_exceptions=True) does.  The GIL is released."},
    {"read_many", (PyCFunction)(void (*)(void))py_read_many, METH_VARARGS | METH_KEYWORDS,
     "read_many(items, bands=None, level=0, *, threads=0, inflight_bytes=0) -> list of ndarray\n\n"
     "Read many windows at once: items are (Cog, (x, y, w, h)) pairs (window None: the\n"
     "whole level).  Every window's tiles are requested together and decoded by\n"
     "`threads` threads (0: one per CPU) as they arrive; compressed tiles and decode\n"
     "scratch together stay within inflight_bytes (0: 256 MiB), and a tile that can\n"
     "never fit fails its windows (\"safety limit\", naming file, level and tile).\n"
     "Raises cogfeed.Error for the first window that failed.  The GIL is released."},
    {"grid_level", (PyCFunction)py_grid_level, METH_VARARGS,
     "grid_level(cog, grid, resampling='nearest') -> the level cog.read(grid=grid) decodes"},
    {"default_io", (PyCFunction)py_default_io, METH_NOARGS,
     "default_io() -> IO used when no io is given"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "cogfeed._cogfeed",
                                       "cogfeed's C core.", -1, module_methods,
                                       NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cogfeed(void);
PyMODINIT_FUNC PyInit__cogfeed(void) {
    import_array();
    IOType.tp_doc = io_doc(IOType.tp_doc);
    if (PyType_Ready(&IOType) < 0 || PyType_Ready(&CogType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    if (cf__py_status_init(m) < 0) return NULL;
    Py_INCREF(&IOType);
    PyModule_AddObject(m, "IO", (PyObject *)&IOType);
    Py_INCREF(&CogType);
    PyModule_AddObject(m, "Cog", (PyObject *)&CogType);
    PyModule_AddStringConstant(m, "__version__", CF_VERSION_STRING);
    if (cf__py_loader_init(m) < 0) return NULL;
    if (cf__py_options_init(m) < 0) return NULL;
    if (cf__py_geo_init(m) < 0) return NULL;
    if (cf__py_writer_init(m) < 0) return NULL;
    if (cf__py_upload_init(m) < 0) return NULL;
    if (cf__py_vlabels_init(m) < 0) return NULL;
    if (cf__py_stac_init(m) < 0) return NULL;
    return m;
}
