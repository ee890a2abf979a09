/*
 * _vlabels.c - cogfeed._VLabels, the thin binding of cf_vlabels that
 * python/cogfeed/vector.py (cogfeed.VectorLabels) builds on: reading
 * files, attributes and defaults live there; this file converts WKB and
 * values, and burns with the GIL released.
 */
#include "pymod.h"

typedef struct {
    PyObject_HEAD cf_vlabels *vl;
} VLabelsObject;

static PyTypeObject VLabelsType;

static void VLabels_dealloc(VLabelsObject *self) {
    cf_vlabels_free(self->vl);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _VLabels(wkb, values, crs=None, all_touched=False): wkb a sequence of
 * bytes-like geometries, values one number each. */
static int VLabels_init(VLabelsObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"wkb", "values", "crs", "all_touched", NULL};
    PyObject *wkb_o, *val_o, *crs_o = Py_None;
    int all_touched = 0;
    if (self->vl) {
        PyErr_SetString(PyExc_RuntimeError, "_VLabels already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Op", kwlist, &wkb_o, &val_o, &crs_o,
                                     &all_touched))
        return -1;
    PyObject *g = cf__py_seq(wkb_o, "wkb must be a sequence of WKB geometries (bytes)");
    PyObject *v = g ? cf__py_seq(val_o, "values must be a sequence of numbers") : NULL;
    cf_crs *crs = NULL;
    int ok = v && cf__py_crs_convert(crs_o, &crs);
    Py_ssize_t n = g ? PyTuple_GET_SIZE(g) : 0;
    if (ok && PyTuple_GET_SIZE(v) != n) {
        PyErr_Format(PyExc_ValueError, "vector labels: %zd geometries but %zd values", n,
                     PyTuple_GET_SIZE(v));
        ok = 0;
    }
    const uint8_t **ptr = ok ? PyMem_Calloc((size_t)n + 1, sizeof *ptr) : NULL;
    size_t *len = ok ? PyMem_Calloc((size_t)n + 1, sizeof *len) : NULL;
    double *val = ok ? PyMem_Calloc((size_t)n + 1, sizeof *val) : NULL;
    Py_buffer *views = ok ? PyMem_Calloc((size_t)n + 1, sizeof *views) : NULL;
    Py_ssize_t got = 0;
    if (ok && (!ptr || !len || !val || !views)) {
        PyErr_NoMemory();
        ok = 0;
    }
    for (Py_ssize_t i = 0; ok && i < n; i++, got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(g, i), &views[i], PyBUF_SIMPLE) < 0) {
            PyErr_Format(PyExc_TypeError, "vector labels: geometry %zd is not WKB bytes", i);
            ok = 0;
            break;
        }
        ptr[i] = views[i].buf;
        len[i] = (size_t)views[i].len;
        val[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(v, i));
        if (val[i] == -1.0 && PyErr_Occurred()) ok = 0;
    }
    if (ok) {
        cf_error e;
        cf_status st;
        Py_BEGIN_ALLOW_THREADS
        st = cf_vlabels_new((size_t)n, ptr, len, val, crs, all_touched, &self->vl, &e);
        Py_END_ALLOW_THREADS
        if (st != CF_OK) {
            cf__py_raise(st, &e);
            ok = 0;
        }
    }
    for (Py_ssize_t i = 0; views && i < got; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(ptr);
    PyMem_Free(len);
    PyMem_Free(val);
    cf_crs_free(crs);
    Py_XDECREF(g);
    Py_XDECREF(v);
    return ok ? 0 : -1;
}

static int check(VLabelsObject *self) {
    if (!self->vl) PyErr_SetString(PyExc_ValueError, "_VLabels not initialised");
    return self->vl != NULL;
}

/* rasterize(grid, dtype=None) -> (array (H, W), features selected) */
static PyObject *VLabels_rasterize(VLabelsObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"grid", "dtype", NULL};
    PyObject *grid_o, *dt_o = Py_None;
    if (!check(self) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &grid_o, &dt_o))
        return NULL;
    cf_grid g;
    cf_crs *hold = NULL;
    if (!cf__py_grid_parse(grid_o, &g, &hold)) return NULL;
    cf_dtype dt = cf_vlabels_dtype(self->vl);
    if (dt_o != Py_None) {
        const char *name = PyUnicode_Check(dt_o) ? PyUnicode_AsUTF8(dt_o) : NULL;
        int found = 0;
        for (int t = CF_DT_U8; name && t <= CF_DT_F64; t++)
            if (!strcmp(cf_dtype_name((cf_dtype)t), name)) {
                dt = (cf_dtype)t;
                found = 1;
            }
        if (!found) {
            cf_crs_free(hold);
            PyErr_SetString(PyExc_ValueError, "dtype: a cogfeed dtype name such as 'uint8'");
            return NULL;
        }
    }
    npy_intp dims[2] = {(npy_intp)g.height, (npy_intp)g.width};
    PyObject *arr = PyArray_SimpleNew(2, dims, cf__py_npy_type(dt));
    if (!arr) {
        cf_crs_free(hold);
        return NULL;
    }
    size_t nf = 0;
    cf_error e;
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_vlabels_rasterize(self->vl, &g, dt, PyArray_DATA((PyArrayObject *)arr), &nf, &e);
    Py_END_ALLOW_THREADS
    cf_crs_free(hold);
    if (st != CF_OK) {
        Py_DECREF(arr);
        return cf__py_raise(st, &e);
    }
    return Py_BuildValue("(Nn)", arr, (Py_ssize_t)nf);
}

static PyObject *VLabels_len(VLabelsObject *self, PyObject *unused) {
    (void)unused;
    if (!check(self)) return NULL;
    return PyLong_FromSize_t(cf_vlabels_count(self->vl));
}

static PyObject *VLabels_dtype(VLabelsObject *self, PyObject *unused) {
    (void)unused;
    if (!check(self)) return NULL;
    return PyUnicode_FromString(cf_dtype_name(cf_vlabels_dtype(self->vl)));
}

static PyObject *VLabels_bounds(VLabelsObject *self, PyObject *unused) {
    (void)unused;
    if (!check(self)) return NULL;
    double b[4];
    cf_vlabels_bounds(self->vl, b);
    return Py_BuildValue("(dddd)", b[0], b[1], b[2], b[3]);
}

static PyMethodDef VLabels_methods[] = {
    {"rasterize", (PyCFunction)(void (*)(void))VLabels_rasterize, METH_VARARGS | METH_KEYWORDS,
     "rasterize(grid, dtype=None) -> (array, features selected)"},
    {"count", (PyCFunction)VLabels_len, METH_NOARGS, "number of features"},
    {"dtype", (PyCFunction)VLabels_dtype, METH_NOARGS, "the smallest type holding the values"},
    {"bounds", (PyCFunction)VLabels_bounds, METH_NOARGS, "(x0, y0, x1, y1) in their CRS"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject VLabelsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed._cogfeed._VLabels",
    .tp_basicsize = sizeof(VLabelsObject),
    .tp_dealloc = (destructor)VLabels_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Polygons with class values, indexed (cf_vlabels); see cogfeed.VectorLabels.",
    .tp_methods = VLabels_methods,
    .tp_init = (initproc)VLabels_init,
    .tp_new = PyType_GenericNew,
};

cf_vlabels *cf__py_vlabels_get(PyObject *o) {
    if (!PyObject_TypeCheck(o, &VLabelsType) || !((VLabelsObject *)o)->vl) {
        PyErr_SetString(PyExc_TypeError, "labels must be a cogfeed.VectorLabels");
        return NULL;
    }
    return ((VLabelsObject *)o)->vl;
}

int cf__py_vlabels_init(PyObject *module) {
    if (PyType_Ready(&VLabelsType) < 0) return -1;
    Py_INCREF(&VLabelsType);
    if (PyModule_AddObject(module, "_VLabels", (PyObject *)&VLabelsType) < 0) {
        Py_DECREF(&VLabelsType);
        return -1;
    }
    return 0;
}
