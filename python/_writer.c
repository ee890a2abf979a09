/*
 * _writer.c - cogfeed._Writer and cogfeed._Stitcher, the thin bindings of
 * cf_writer and cf_stitcher that python/cogfeed/writer.py (cogfeed.Writer,
 * cogfeed.Stitcher) builds on: names, defaults and
 * array checks live there; this file converts and calls, with the GIL
 * released while tiles are encoded and the file is laid out.
 */
#include "pymod.h"

/* busy: calls inside the C object with the GIL released; close() and
 * abort() refuse while any is (they free what those calls use). */
typedef struct {
    PyObject_HEAD cf_writer *w;
    int busy;
    size_t px;  /* bytes a pixel: a mask's size is the tile's / px */
} WriterObject;

static PyTypeObject WriterType;

/* Abort with the GIL released: an object's abort waits for the parts in
 * flight and sends the abort request, and whatever serves them may need
 * the GIL (a server in this process, a thread reading the results). */
static void writer_abort(cf_writer *w) {
    if (!w) return;
    Py_BEGIN_ALLOW_THREADS cf_writer_abort(w);
    Py_END_ALLOW_THREADS
}

static void Writer_dealloc(WriterObject *self) {
    /* never closed: nothing is written, the spool goes */
    writer_abort(self->w);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A sequence of n floats (None: *out stays NULL). */
static int floats(PyObject *o, uint32_t n, double **out, const char *what) {
    *out = NULL;
    if (o == Py_None) return 1;
    PyObject *t = cf__py_seq(o, what);
    if (!t) return 0;
    if ((uint32_t)PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %u values needed, one per band", what, n);
        Py_DECREF(t);
        return 0;
    }
    *out = PyMem_Malloc(n * sizeof(double) + 1);
    for (uint32_t i = 0; *out && i < n; i++) {
        (*out)[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(t, i));
        if (PyErr_Occurred()) break;
    }
    Py_DECREF(t);
    if (!*out || PyErr_Occurred()) {
        if (!*out) PyErr_NoMemory();
        PyMem_Free(*out);
        *out = NULL;
        return 0;
    }
    return 1;
}

/* A tile index for "O&": an int in [0, 2**32) ("I" would wrap a larger
 * one onto another tile). */
static int tile_index(PyObject *o, void *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return 0;
    if (v > UINT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "tile index %llu out of range", v);
        return 0;
    }
    *(unsigned int *)out = (unsigned int)v;
    return 1;
}

static int Writer_init(WriterObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "width", "height", "bands", "dtype", "tile_size",
                             "compression", "level", "predictor", "overviews", "resampling",
                             "nodata", "grid", "descriptions", "scales", "offsets",
                             "lerc_layer", "max_error", "quality", "lossless", "photometric",
                             "io", "part_size", "mask", "threads", "share_row0", "share_rows",
                             "overviews_given", "layout_only", NULL};
    PyObject *path_o, *nodata = Py_None, *grid = Py_None, *desc = Py_None;
    PyObject *scales_o = Py_None, *offsets_o = Py_None;
    unsigned int width, height, bands, tile, comp, lerc_layer = 1, photometric = 0;
    int dtype, level, pred, ovr, rs, quality = 0, lossless = 0;
    double max_error = 0;
    PyObject *io_o = Py_None;
    unsigned long long part_size = 0;
    int mask = 0, threads = 0, given = 0, layout_only = 0;
    unsigned int share_row0 = 0, share_rows = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&IIIiIIiiiiOOOOO|IdipIOKpiO&O&pp", kwlist,
                                     PyUnicode_FSConverter, &path_o, &width, &height, &bands,
                                     &dtype, &tile, &comp, &level, &pred, &ovr, &rs, &nodata,
                                     &grid, &desc, &scales_o, &offsets_o, &lerc_layer,
                                     &max_error, &quality, &lossless, &photometric, &io_o,
                                     &part_size, &mask, &threads, tile_index, &share_row0,
                                     tile_index, &share_rows, &given, &layout_only))
        return -1;
    if (self->w) {
        PyErr_SetString(PyExc_RuntimeError, "_Writer already open");
        Py_DECREF(path_o);
        return -1;
    }
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = width;
    o.height = height;
    o.bands = bands;
    o.dtype = (cf_dtype)dtype;
    o.tile_size = tile;
    o.compression = (uint16_t)comp;
    o.level = level;
    o.predictor = pred;
    o.overviews = ovr;
    o.overview_resampling = (cf_resampling)rs;
    o.lerc_layer = (uint16_t)lerc_layer;
    o.max_error = max_error;
    o.quality = quality;
    o.lossless = lossless;
    o.photometric = (uint16_t)photometric;
    o.part_size = part_size;
    o.mask = mask;
    o.threads = threads;
    o.share_row0 = share_row0;
    o.share_rows = share_rows;
    o.overviews_given = given;
    o.layout_only = layout_only;
    self->px = (size_t)bands * cf_dtype_size((cf_dtype)dtype);
    if (io_o != Py_None && !(o.io = cf__py_io_get(io_o))) {
        Py_DECREF(path_o);
        return -1;
    }
    cf_grid g;
    cf_crs *hold = NULL;
    PyObject *dt = NULL;
    const char **dv = NULL;
    double *sc = NULL, *of = NULL;
    int ok = 1;
    if (nodata != Py_None) {
        o.has_nodata = 1;
        o.nodata = PyFloat_AsDouble(nodata);
        ok = !PyErr_Occurred();
    }
    if (ok && grid != Py_None) {
        ok = cf__py_grid_parse(grid, &g, &hold);
        o.grid = &g;
    }
    if (ok && desc != Py_None) {
        dt = cf__py_seq(desc, "descriptions: a sequence of str or None, one per band");
        ok = dt != NULL;
        if (ok && (uint32_t)PyTuple_GET_SIZE(dt) != bands) {
            PyErr_Format(PyExc_ValueError, "descriptions: %u needed, one per band", bands);
            ok = 0;
        }
        if (ok) dv = PyMem_Calloc(bands + 1, sizeof *dv);
        if (ok && !dv) ok = !!PyErr_NoMemory();
        for (uint32_t b = 0; ok && b < bands; b++) {
            PyObject *s = PyTuple_GET_ITEM(dt, b);
            if (s == Py_None) continue;
            dv[b] = PyUnicode_AsUTF8(s);
            ok = dv[b] != NULL;
        }
        o.descriptions = dv;
    }
    if (ok) ok = floats(scales_o, bands, &sc, "scales") && floats(offsets_o, bands, &of, "offsets");
    o.scales = sc;
    o.offsets = of;
    cf_status st = CF_OK;
    cf_error err;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS st = cf_writer_open(PyBytes_AS_STRING(path_o), &o, &self->w, &err);
        Py_END_ALLOW_THREADS
    }
    cf_crs_free(hold);
    Py_XDECREF(dt);
    PyMem_Free(dv);
    PyMem_Free(sc);
    PyMem_Free(of);
    Py_DECREF(path_o);
    if (!ok) return -1;
    if (st) {
        cf__py_raise(st, &err);
        return -1;
    }
    return 0;
}

static int need_open(WriterObject *self) {
    if (self->w) return 1;
    PyErr_SetString(PyExc_ValueError, "the writer is closed");
    return 0;
}

/* An optional plane of a byte a pixel (a mask, a validity): None leaves
 * b->buf NULL; else C-contiguous, 1-byte items, `pixels` of them.  0 with
 * the error set (and nothing held) when it is not. */
static int byte_plane(PyObject *o, Py_buffer *b, size_t pixels, const char *what) {
    memset(b, 0, sizeof *b);
    if (o == Py_None) return 1;
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return 0;
    if (b->itemsize == 1 && (size_t)b->len == pixels) return 1;
    if (b->itemsize != 1)
        PyErr_Format(PyExc_ValueError, "%s of %zd-byte items (a byte a pixel: uint8 or bool)",
                     what, b->itemsize);
    else
        PyErr_Format(PyExc_ValueError, "%s of %zd bytes for %zu pixels (a byte a pixel)", what,
                     b->len, pixels);
    PyBuffer_Release(b);
    b->buf = NULL;
    return 0;
}


static PyObject *Writer_write_tile(WriterObject *self, PyObject *args) {
    unsigned int tx, ty;
    Py_buffer buf, mbuf;
    PyObject *mask_o = Py_None;
    if (!PyArg_ParseTuple(args, "O&O&y*|O", tile_index, &tx, tile_index, &ty, &buf, &mask_o))
        return NULL;
    /* (a data size that is no whole number of pixels fails in C) */
    if (!need_open(self) ||
        !byte_plane(mask_o, &mbuf, (size_t)buf.len / self->px, "write_tile: a mask")) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    cf_status st;
    cf_error err;
    cf_writer *w = self->w;
    const uint8_t *m = mbuf.buf;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS st = m ? cf_writer_write_tile_masked(w, tx, ty, buf.buf,
                                                                (size_t)buf.len, m, &err)
                                  : cf_writer_write_tile(w, tx, ty, buf.buf, (size_t)buf.len,
                                                         &err);
    Py_END_ALLOW_THREADS
    self->busy--;
    PyBuffer_Release(&buf);
    if (mbuf.buf) PyBuffer_Release(&mbuf);
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static int refuse_busy(int busy) {
    if (!busy) return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "close()/abort() while another thread is inside the writer");
    return 1;
}

static PyObject *Writer_write_encoded_tile(WriterObject *self, PyObject *args) {
    unsigned int tx, ty;
    int level = 0;
    Py_buffer buf, mbuf = {0};
    PyObject *mask_o = Py_None;
    if (!PyArg_ParseTuple(args, "O&O&y*|Oi", tile_index, &tx, tile_index, &ty, &buf, &mask_o,
                          &level))
        return NULL;
    /* (b"" for the mask is none, as None) */
    if (mask_o != Py_None && PyObject_GetBuffer(mask_o, &mbuf, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (!need_open(self)) {
        PyBuffer_Release(&buf);
        if (mbuf.obj) PyBuffer_Release(&mbuf);
        return NULL;
    }
    cf_status st;
    cf_error err;
    cf_writer *w = self->w;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS st = cf_writer_write_encoded_tile_at(w, level, tx, ty, buf.buf,
                                                                (size_t)buf.len,
                                                                mbuf.len ? mbuf.buf : NULL,
                                                                (size_t)mbuf.len, &err);
    Py_END_ALLOW_THREADS
    self->busy--;
    PyBuffer_Release(&buf);
    if (mbuf.obj) PyBuffer_Release(&mbuf);
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Writer_close(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (!self->w) Py_RETURN_NONE;
    if (refuse_busy(self->busy)) return NULL;
    cf_writer *w = self->w;
    self->w = NULL;
    cf_status st;
    cf_error err;
    Py_BEGIN_ALLOW_THREADS st = cf_writer_close(w, &err);
    Py_END_ALLOW_THREADS
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Writer_abort(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (refuse_busy(self->busy)) return NULL;
    cf_writer *w = self->w;
    self->w = NULL;
    writer_abort(w);
    Py_RETURN_NONE;
}

static PyObject *Writer_tiles(WriterObject *self, void *closure) {
    (void)closure;
    if (!need_open(self)) return NULL;
    uint32_t tx, ty;
    cf_writer_tiles(self->w, &tx, &ty);
    return Py_BuildValue("(II)", tx, ty);
}

/* ---- a share writer's steps (cf_writer_share_build), for _Writer and
 * _Stitcher alike ---- */

/* (busy: the object's count of calls inside C without the GIL, which
 * close() and abort() refuse to run under) */
static PyObject *share_build(cf_writer *w, int *busy) {
    cf_status st;
    cf_error err;
    (*busy)++;
    Py_BEGIN_ALLOW_THREADS st = cf_writer_share_build(w, &err);
    Py_END_ALLOW_THREADS
    (*busy)--;
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

/* share_carry(carry): the carry of the share before (None for the first)
 * in, this share's out as bytes. */
static PyObject *share_carry(cf_writer *w, int *busy, PyObject *args) {
    PyObject *in_o;
    if (!PyArg_ParseTuple(args, "O", &in_o)) return NULL;
    Py_buffer in = {0};
    if (in_o != Py_None && PyObject_GetBuffer(in_o, &in, PyBUF_SIMPLE) < 0) return NULL;
    const void *out = NULL;
    size_t n = 0;
    cf_status st;
    cf_error err;
    (*busy)++;
    Py_BEGIN_ALLOW_THREADS st = cf_writer_share_carry(w, in.obj ? in.buf : NULL,
                                                      in.obj ? (size_t)in.len : 0, &out, &n,
                                                      &err);
    Py_END_ALLOW_THREADS
    /* (the carry is the writer's until close: copied while close waits) */
    PyObject *r = st ? NULL : PyBytes_FromStringAndSize(out, (Py_ssize_t)n);
    (*busy)--;
    if (in.obj) PyBuffer_Release(&in);
    if (st) return cf__py_raise(st, &err);
    return r;
}

static PyObject *share_tiles(cf_writer *w, PyObject *args) {
    int level;
    if (!PyArg_ParseTuple(args, "i", &level)) return NULL;
    uint32_t a, b;
    cf_error err;
    cf_status st = cf_writer_share_tiles(w, level, &a, &b, &err);
    if (st) return cf__py_raise(st, &err);
    return Py_BuildValue("(II)", a, b);
}

static PyObject *Writer_share_build(WriterObject *self, PyObject *unused) {
    (void)unused;
    return need_open(self) ? share_build(self->w, &self->busy) : NULL;
}

static PyObject *Writer_share_carry(WriterObject *self, PyObject *args) {
    return need_open(self) ? share_carry(self->w, &self->busy, args) : NULL;
}

static PyObject *Writer_share_tiles(WriterObject *self, PyObject *args) {
    return need_open(self) ? share_tiles(self->w, args) : NULL;
}

static PyObject *Writer_levels(WriterObject *self, void *closure) {
    (void)closure;
    return need_open(self) ? PyLong_FromLong(cf_writer_levels(self->w)) : NULL;
}

/* layout(sizes): a layout writer's header (bytes) and each size's
 * offset (a list), from the tiles' encoded sizes (cf_writer_layout). */
static PyObject *Writer_layout(WriterObject *self, PyObject *args) {
    PyObject *sizes_o;
    if (!need_open(self) || !PyArg_ParseTuple(args, "O", &sizes_o)) return NULL;
    PyObject *t = cf__py_seq(sizes_o, "layout: sizes must be a sequence of ints");
    if (!t) return NULL;
    const Py_ssize_t n = PyTuple_GET_SIZE(t);
    uint64_t *sz = PyMem_Malloc(2 * (size_t)n * sizeof *sz + 1);
    if (!sz) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n && !PyErr_Occurred(); i++)
        sz[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, i));
    Py_DECREF(t);
    PyObject *r = NULL;
    if (!PyErr_Occurred()) {
        const void *hdr;
        size_t hn;
        cf_error err;
        cf_status st = cf_writer_layout(self->w, sz, (size_t)n, sz + n, &hdr, &hn, &err);
        PyObject *offs = st ? NULL : PyList_New(n);
        for (Py_ssize_t i = 0; offs && i < n; i++) {
            PyObject *v = PyLong_FromUnsignedLongLong(sz[n + i]);
            if (!v) Py_CLEAR(offs);
            else PyList_SET_ITEM(offs, i, v);
        }
        if (st) cf__py_raise(st, &err);
        else if (offs) r = Py_BuildValue("(y#N)", (const char *)hdr, (Py_ssize_t)hn, offs);
    }
    PyMem_Free(sz);
    return r;
}

#define SHARE_METHODS(T)                                                                       \
    {"share_build", (PyCFunction)T##_share_build, METH_NOARGS,                                 \
     "share_build(): a share writer's overview rows from its own rows"},                        \
        {"share_carry", (PyCFunction)T##_share_carry, METH_VARARGS,                            \
         "share_carry(carry): the rows reaching into the share before, from its carry (None "  \
         "for the first); returns this share's carry"},                                        \
        {"share_tiles", (PyCFunction)T##_share_tiles, METH_VARARGS,                            \
         "share_tiles(level): (first, end) rows of tiles of the level this share makes"},

static PyMethodDef Writer_methods[] = {
    SHARE_METHODS(Writer)
    {"write_encoded_tile", (PyCFunction)Writer_write_encoded_tile, METH_VARARGS,
     "write_encoded_tile(tx, ty, data, mask=None, level=0): tile (tx, ty) of a level as stored "
     "bytes of a writer with the same options (mask: its mask tile's; b'' data: sparse); "
     "levels above 0 with overviews_given"},
    {"write_tile", (PyCFunction)Writer_write_tile, METH_VARARGS,
     "write_tile(tx, ty, data, mask=None): tile (tx, ty), bands x h x w bytes in C "
     "order; mask: h x w bytes (0: not valid), for a writer opened with mask"},
    {"layout", (PyCFunction)Writer_layout, METH_VARARGS,
     "layout(sizes): a layout writer's (header, offsets) from every tile's encoded sizes"},
    {"close", (PyCFunction)Writer_close, METH_NOARGS, "close(): finish the file"},
    {"abort", (PyCFunction)Writer_abort, METH_NOARGS, "abort(): give up, write nothing"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Writer_getset[] = {
    {"tiles", (getter)Writer_tiles, NULL, "(tiles across, tiles down)", NULL},
    {"levels", (getter)Writer_levels, NULL, "levels, the full resolution and its overviews",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed._cogfeed._Writer",
    .tp_basicsize = sizeof(WriterObject),
    .tp_dealloc = (destructor)Writer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "cf_writer; use cogfeed.Writer",
    .tp_methods = Writer_methods,
    .tp_getset = Writer_getset,
    .tp_init = (initproc)Writer_init,
    .tp_new = PyType_GenericNew,
};

/* ---- cogfeed._Stitcher: cf_stitcher ---- */

typedef struct {
    PyObject_HEAD cf_stitcher *st;
    int busy;
    unsigned int channels;
} StitcherObject;

static void stitcher_abort(cf_stitcher *st) { /* as writer_abort */
    if (!st) return;
    Py_BEGIN_ALLOW_THREADS cf_stitcher_abort(st);
    Py_END_ALLOW_THREADS
}

static void Stitcher_dealloc(StitcherObject *self) {
    stitcher_abort(self->st);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Stitcher_init(StitcherObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "width", "height", "tile_size", "compression", "level",
                             "overviews", "grid", "channels", "blend", "overlap", "argmax",
                             "patches", "lerc_layer", "max_error", "io", "part_size", "mask",
                             "threads", "share_row0", "share_rows", NULL};
    PyObject *path_o, *grid = Py_None;
    unsigned int width, height, tile, comp, channels, blend, overlap, lerc_layer = 1;
    int level, ovr, argmax, mask = 0, threads = 0;
    unsigned int share_row0 = 0, share_rows = 0;
    double max_error = 0;
    PyObject *io_o = Py_None;
    unsigned long long part_size = 0;
    Py_buffer pb;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&IIIIiiOIIIpy*|IdOKpiO&O&", kwlist,
                                     PyUnicode_FSConverter, &path_o, &width, &height, &tile,
                                     &comp, &level, &ovr, &grid, &channels, &blend, &overlap,
                                     &argmax, &pb, &lerc_layer, &max_error, &io_o, &part_size,
                                     &mask, &threads, tile_index, &share_row0, tile_index,
                                     &share_rows))
        return -1;
    int ok = 1;
    if (self->st) {
        PyErr_SetString(PyExc_RuntimeError, "_Stitcher already open");
        ok = 0;
    }
    if (ok && (pb.len % (4 * (Py_ssize_t)sizeof(int64_t)))) {
        PyErr_SetString(PyExc_ValueError, "patches: int64 (x, y, w, h) rows");
        ok = 0;
    }
    cf_writer_options o;
    cf_writer_options_init(&o);
    o.width = width;
    o.height = height;
    o.tile_size = tile;
    o.compression = (uint16_t)comp;
    o.level = level;
    o.overviews = ovr;
    o.lerc_layer = (uint16_t)lerc_layer;
    o.max_error = max_error;
    o.part_size = part_size;
    o.mask = mask;
    o.threads = threads;
    o.share_row0 = share_row0;
    o.share_rows = share_rows;
    if (ok && io_o != Py_None && !(o.io = cf__py_io_get(io_o))) ok = 0;
    cf_stitcher_options so;
    cf_stitcher_options_init(&so);
    so.channels = channels;
    so.blend = (cf_blend)blend;
    so.overlap = overlap;
    so.argmax = argmax;
    so.patches = pb.buf;
    so.npatches = (size_t)pb.len / (4 * sizeof(int64_t));
    cf_grid g;
    cf_crs *hold = NULL;
    if (ok && grid != Py_None) {
        ok = cf__py_grid_parse(grid, &g, &hold);
        o.grid = &g;
    }
    cf_status st = CF_OK;
    cf_error err;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS st = cf_stitcher_open(PyBytes_AS_STRING(path_o), &o, &so, &self->st, &err);
        Py_END_ALLOW_THREADS
    }
    cf_crs_free(hold);
    PyBuffer_Release(&pb);
    Py_DECREF(path_o);
    if (!ok) return -1;
    if (st) {
        cf__py_raise(st, &err);
        return -1;
    }
    self->channels = channels;
    return 0;
}

static PyObject *Stitcher_add(StitcherObject *self, PyObject *args) {
    long long x, y;
    unsigned int w, h;
    Py_buffer buf, vbuf;
    PyObject *valid_o = Py_None;
    if (!PyArg_ParseTuple(args, "LLIIy*|O", &x, &y, &w, &h, &buf, &valid_o)) return NULL;
    if (!byte_plane(valid_o, &vbuf, (size_t)w * h, "add: a validity")) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int ok = 1;
    if (!self->st) {
        PyErr_SetString(PyExc_ValueError, "the stitcher is closed");
        ok = 0;
    } else if ((size_t)buf.len != (size_t)self->channels * w * h * sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "add: %u x %u x %u float32 values needed, %zd bytes given",
                     self->channels, h, w, buf.len);
        ok = 0;
    }
    cf_status st = CF_OK;
    cf_error err;
    cf_stitcher *s = self->st;
    const uint8_t *v = vbuf.buf;
    if (ok) {
        self->busy++;
        Py_BEGIN_ALLOW_THREADS st = cf_stitcher_add_masked(s, x, y, w, h, buf.buf, v, &err);
        Py_END_ALLOW_THREADS
        self->busy--;
    }
    PyBuffer_Release(&buf);
    if (vbuf.buf) PyBuffer_Release(&vbuf);
    if (!ok) return NULL;
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Stitcher_close(StitcherObject *self, PyObject *unused) {
    (void)unused;
    if (!self->st) Py_RETURN_NONE;
    if (refuse_busy(self->busy)) return NULL;
    cf_stitcher *s = self->st;
    self->st = NULL;
    cf_status st;
    cf_error err;
    Py_BEGIN_ALLOW_THREADS st = cf_stitcher_close(s, &err);
    Py_END_ALLOW_THREADS
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Stitcher_abort(StitcherObject *self, PyObject *unused) {
    (void)unused;
    if (refuse_busy(self->busy)) return NULL;
    cf_stitcher *st = self->st;
    self->st = NULL;
    stitcher_abort(st);
    Py_RETURN_NONE;
}

static cf_writer *stitcher_writer(StitcherObject *self) {
    if (self->st) return cf_stitcher_writer(self->st);
    PyErr_SetString(PyExc_ValueError, "the stitcher is closed");
    return NULL;
}

static PyObject *Stitcher_share_build(StitcherObject *self, PyObject *unused) {
    (void)unused;
    cf_writer *w = stitcher_writer(self);
    return w ? share_build(w, &self->busy) : NULL;
}

static PyObject *Stitcher_share_carry(StitcherObject *self, PyObject *args) {
    cf_writer *w = stitcher_writer(self);
    return w ? share_carry(w, &self->busy, args) : NULL;
}

static PyObject *Stitcher_share_tiles(StitcherObject *self, PyObject *args) {
    cf_writer *w = stitcher_writer(self);
    return w ? share_tiles(w, args) : NULL;
}

static PyObject *Stitcher_levels(StitcherObject *self, void *closure) {
    (void)closure;
    cf_writer *w = stitcher_writer(self);
    return w ? PyLong_FromLong(cf_writer_levels(w)) : NULL;
}

static PyGetSetDef Stitcher_getset[] = {
    {"levels", (getter)Stitcher_levels, NULL, "levels, the full resolution and its overviews",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Stitcher_methods[] = {
    SHARE_METHODS(Stitcher)
    {"add", (PyCFunction)Stitcher_add, METH_VARARGS,
     "add(x, y, w, h, pred, valid=None): float32 channels x h x w, C order; valid: h x w "
     "bytes, 0 where the input had no data"},
    {"close", (PyCFunction)Stitcher_close, METH_NOARGS, "close(): finish the file"},
    {"abort", (PyCFunction)Stitcher_abort, METH_NOARGS, "abort(): give up, write nothing"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject StitcherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed._cogfeed._Stitcher",
    .tp_basicsize = sizeof(StitcherObject),
    .tp_dealloc = (destructor)Stitcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "cf_stitcher; use cogfeed.Stitcher",
    .tp_methods = Stitcher_methods,
    .tp_getset = Stitcher_getset,
    .tp_init = (initproc)Stitcher_init,
    .tp_new = PyType_GenericNew,
};

int cf__py_writer_init(PyObject *module) {
    if (PyType_Ready(&WriterType) < 0 || PyType_Ready(&StitcherType) < 0) return -1;
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(module, "_Writer", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        return -1;
    }
    Py_INCREF(&StitcherType);
    if (PyModule_AddObject(module, "_Stitcher", (PyObject *)&StitcherType) < 0) {
        Py_DECREF(&StitcherType);
        return -1;
    }
    /* the carry a failed share sends on (cf_writer_share_failed) */
    const void *f;
    size_t fn;
    cf_writer_share_failed(&f, &fn);
    PyObject *fb = PyBytes_FromStringAndSize(f, (Py_ssize_t)fn);
    if (!fb || PyModule_AddObject(module, "SHARE_FAILED_CARRY", fb) < 0) {
        Py_XDECREF(fb);
        return -1;
    }
    return 0;
}
