/*
 * _upload.c - cogfeed._Upload, the thin binding of cf_upload (one object
 * uploaded by several processes) that python/cogfeed/writer.py's
 * cogfeed.Upload builds on.  The GIL is released while parts are queued
 * and while the upload waits, completes or aborts: whatever serves the
 * requests may need it (a server in this process, sign= callbacks).
 */
#include "pymod.h"

typedef struct {
    PyObject_HEAD cf_upload *u;
    int busy; /* calls inside C without the GIL: ending refuses meanwhile */
} UploadObject;

static PyTypeObject UploadType;

static void upload_free(cf_upload *u) {
    if (!u) return;
    Py_BEGIN_ALLOW_THREADS cf_upload_free(u);
    Py_END_ALLOW_THREADS
}

static void Upload_dealloc(UploadObject *self) {
    upload_free(self->u); /* never completed: aborted, nothing left */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Upload_init(UploadObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"url", "io", "token", NULL};
    const char *url, *token = NULL;
    PyObject *io_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|Oz", kwlist, &url, &io_o, &token)) return -1;
    if (self->u) {
        PyErr_SetString(PyExc_RuntimeError, "_Upload already open");
        return -1;
    }
    cf_io *io = NULL;
    if (io_o != Py_None && !(io = cf__py_io_get(io_o))) return -1;
    cf_status st;
    cf_error err;
    cf_upload *u = NULL;
    Py_BEGIN_ALLOW_THREADS st = token ? cf_upload_join(url, io, token, &u, &err)
                                      : cf_upload_begin(url, io, &u, &err);
    Py_END_ALLOW_THREADS
    if (st) {
        cf__py_raise(st, &err);
        return -1;
    }
    self->u = u;
    return 0;
}

static int need_open(UploadObject *self) {
    if (self->u) return 1;
    PyErr_SetString(PyExc_RuntimeError, "upload ended (completed or freed)");
    return 0;
}

static int not_busy(UploadObject *self) {
    if (!self->busy) return 1;
    PyErr_SetString(PyExc_RuntimeError, "upload in use by another thread (a cf_upload is "
                    "used by one thread at a time)");
    return 0;
}

static PyObject *Upload_put(UploadObject *self, PyObject *args) {
    PyObject *num_o;
    Py_buffer b;
    if (!need_open(self) || !not_busy(self) || !PyArg_ParseTuple(args, "Oy*", &num_o, &b))
        return NULL;
    /* ("I" and "K" would wrap a larger number onto another part) */
    unsigned long long number = PyLong_AsUnsignedLongLong(num_o);
    if (number == (unsigned long long)-1 && PyErr_Occurred()) {
        PyBuffer_Release(&b);
        return NULL;
    }
    if (number > UINT32_MAX) {
        PyBuffer_Release(&b);
        PyErr_Format(PyExc_OverflowError, "part number %llu out of range", number);
        return NULL;
    }
    cf_status st;
    cf_error err;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS st = cf_upload_part(self->u, (uint32_t)number, b.buf, (size_t)b.len,
                                               &err);
    Py_END_ALLOW_THREADS
    self->busy--;
    PyBuffer_Release(&b);
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Upload_receipts(UploadObject *self, PyObject *unused) {
    (void)unused;
    if (!need_open(self) || !not_busy(self)) return NULL;
    const char *r = NULL;
    cf_status st;
    cf_error err;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS st = cf_upload_receipts(self->u, &r, &err);
    Py_END_ALLOW_THREADS
    self->busy--;
    if (st) return cf__py_raise(st, &err);
    return PyUnicode_FromString(r);
}

static PyObject *Upload_complete(UploadObject *self, PyObject *args) {
    PyObject *seq;
    if (!need_open(self) || !not_busy(self) || !PyArg_ParseTuple(args, "O", &seq)) return NULL;
    PyObject *t = cf__py_seq(seq, "complete: receipts must be a sequence of str");
    if (!t) return NULL;
    const Py_ssize_t n = PyTuple_GET_SIZE(t);
    const char **rs = PyMem_Malloc((size_t)n * sizeof *rs + 1);
    if (!rs) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(rs[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, i)))) {
            PyMem_Free(rs);
            Py_DECREF(t);
            return NULL;
        }
    cf_upload *u = self->u;
    self->u = NULL; /* freed by complete whatever the status */
    cf_status st;
    cf_error err;
    Py_BEGIN_ALLOW_THREADS st = cf_upload_complete(u, rs, (size_t)n, &err);
    Py_END_ALLOW_THREADS
    PyMem_Free(rs);
    Py_DECREF(t);
    if (st) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Upload_free(UploadObject *self, PyObject *unused) {
    (void)unused;
    if (!not_busy(self)) return NULL;
    cf_upload *u = self->u;
    self->u = NULL;
    upload_free(u);
    Py_RETURN_NONE;
}

static PyObject *Upload_token(UploadObject *self, void *closure) {
    (void)closure;
    return need_open(self) ? PyUnicode_FromString(cf_upload_token(self->u)) : NULL;
}

static PyObject *Upload_min_part(UploadObject *self, void *closure) {
    (void)closure;
    return need_open(self) ? PyLong_FromUnsignedLongLong(cf_upload_min_part(self->u)) : NULL;
}

static PyMethodDef Upload_methods[] = {
    {"put", (PyCFunction)Upload_put, METH_VARARGS,
     "put(number, data): part `number`'s bytes (copied; sent by the upload's threads)"},
    {"receipts", (PyCFunction)Upload_receipts, METH_NOARGS,
     "receipts(): a joined process's parts' receipts, once every part is sent"},
    {"complete", (PyCFunction)Upload_complete, METH_VARARGS,
     "complete(receipts): the beginning process makes the object with the others' receipts"},
    {"free", (PyCFunction)Upload_free, METH_NOARGS,
     "free(): end without completing (the beginning process's upload is aborted)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Upload_getset[] = {
    {"token", (getter)Upload_token, NULL, "the token other processes join with", NULL},
    {"min_part", (getter)Upload_min_part, NULL, "the smallest part but the last", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject UploadType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed._cogfeed._Upload",
    .tp_basicsize = sizeof(UploadObject),
    .tp_dealloc = (destructor)Upload_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "cf_upload; use cogfeed.Upload",
    .tp_methods = Upload_methods,
    .tp_getset = Upload_getset,
    .tp_init = (initproc)Upload_init,
    .tp_new = PyType_GenericNew,
};

int cf__py_upload_init(PyObject *m) {
    if (PyType_Ready(&UploadType) < 0) return -1;
    Py_INCREF(&UploadType);
    if (PyModule_AddObject(m, "_Upload", (PyObject *)&UploadType) < 0) {
        Py_DECREF(&UploadType);
        return -1;
    }
    return 0;
}
