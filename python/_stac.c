/*
 * _stac.c - cogfeed._StacIndex, the thin binding of cf_stac that
 * python/cogfeed/stac.py builds its Items on: documents in (parsed with
 * the GIL released), and per item, asset and band the fields it turns
 * into Item / Asset / Band objects when they are asked for; search and
 * asset choice over many items at once as numpy arrays.
 */
#include "pymod.h"

#include <math.h>

typedef struct {
    PyObject_HEAD cf_stac *ix;
} StacObject;

static PyTypeObject StacType;

static void Stac_dealloc(StacObject *self) {
    cf_stac_free(self->ix);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The index is made with the object, so no method meets one without. */
static PyObject *Stac_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "", kwlist)) return NULL;
    StacObject *self = (StacObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    cf_error err = {0};
    cf_status st = cf_stac_new(&self->ix, &err);
    if (st != CF_OK) {
        Py_DECREF(self);
        return cf__py_raise(st, &err);
    }
    return (PyObject *)self;
}

/* limits: (max_items, max_assets, max_bands, max_links, max_nesting, max_side) */
static int limits(PyObject *o, cf_stac_limits *l) {
    unsigned long long a, b, c, d, f;
    int e;
    if (!PyArg_ParseTuple(o, "KKKKiK;limits: 6 numbers", &a, &b, &c, &d, &e, &f)) return 0;
    l->max_items = (size_t)a, l->max_assets = (size_t)b, l->max_bands = (size_t)c;
    l->max_links = (size_t)d, l->max_nesting = e, l->max_side = (int64_t)(f > INT64_MAX ? INT64_MAX : f);
    return 1;
}

/* add(data, base, limits) -> True when the document held items. */
static PyObject *Stac_add(StacObject *self, PyObject *args) {
    Py_buffer buf;
    const char *base;
    PyObject *lim_o;
    cf_stac_limits lim;
    if (!PyArg_ParseTuple(args, "y*zO", &buf, &base, &lim_o)) return NULL;
    if (!limits(lim_o, &lim)) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    cf_error err = {0};
    cf_status st;
    int had = 0;
    Py_BEGIN_ALLOW_THREADS st = cf_stac_add_json(self->ix, buf.buf, (size_t)buf.len, base, &lim, &had, &err);
    Py_END_ALLOW_THREADS PyBuffer_Release(&buf);
    if (st != CF_OK) return cf__py_raise(st, &err);
    return PyBool_FromLong(had);
}

/* add_file(path, base, limits, max_bytes) -> True when it held items. */
static PyObject *Stac_add_file(StacObject *self, PyObject *args) {
    const char *path, *base;
    PyObject *lim_o;
    unsigned long long max_bytes;
    cf_stac_limits lim;
    if (!PyArg_ParseTuple(args, "szOK", &path, &base, &lim_o, &max_bytes)) return NULL;
    if (!limits(lim_o, &lim)) return NULL;
    cf_error err = {0};
    cf_status st;
    int had = 0;
    Py_BEGIN_ALLOW_THREADS st = cf_stac_add_file(self->ix, path, base, &lim, max_bytes, &had, &err);
    Py_END_ALLOW_THREADS if (st != CF_OK) return cf__py_raise(st, &err);
    return PyBool_FromLong(had);
}

/* add_arrow(batch, base, limits): a pyarrow RecordBatch of a STAC
 * GeoParquet table, taken through the Arrow C data interface
 * (RecordBatch._export_to_c), read as its rows' items. */
static PyObject *Stac_add_arrow(StacObject *self, PyObject *args) {
    PyObject *batch, *lim_o;
    const char *base;
    cf_stac_limits lim;
    if (!PyArg_ParseTuple(args, "OzO", &batch, &base, &lim_o) || !limits(lim_o, &lim)) return NULL;
    struct ArrowArray *arr = PyMem_Calloc(1, sizeof *arr);
    struct ArrowSchema *sch = PyMem_Calloc(1, sizeof *sch);
    if (!arr || !sch) {
        PyMem_Free(arr);
        PyMem_Free(sch);
        return PyErr_NoMemory();
    }
    PyObject *r = PyObject_CallMethod(batch, "_export_to_c", "KK", (unsigned long long)(uintptr_t)arr,
                                      (unsigned long long)(uintptr_t)sch);
    cf_status st = CF_OK;
    cf_error err = {0};
    if (r) {
        Py_DECREF(r);
        Py_BEGIN_ALLOW_THREADS st = cf_stac_add_arrow(self->ix, sch, arr, base, &lim, &err);
        Py_END_ALLOW_THREADS
    }
    if (arr->release) arr->release(arr);
    if (sch->release) sch->release(sch);
    PyMem_Free(arr);
    PyMem_Free(sch);
    if (!r) return NULL;
    if (st != CF_OK) return cf__py_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Stac_len(StacObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(cf_stac_count(self->ix));
}

static PyObject *text(cf_stac_text t) {
    if (!t.p) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(t.p, (Py_ssize_t)t.len, NULL);
}

static PyObject *raw(cf_stac_text t) {
    if (!t.p) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(t.p, (Py_ssize_t)t.len);
}

static PyObject *num_or_none(int has, double v) {
    if (!has) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}

static int check_item(StacObject *self, Py_ssize_t i) {
    if (i < 0 || (size_t)i >= cf_stac_count(self->ix)) {
        PyErr_SetString(PyExc_IndexError, "item index out of range");
        return 0;
    }
    return 1;
}

static PyObject *band_tuple(const cf_stac *ix, size_t i, size_t k, size_t b) {
    cf_stac_band_info bi;
    cf_stac_band(ix, i, k, b, &bi);
    return Py_BuildValue("(NNNNNN)", text(bi.name), text(bi.common_name),
                         num_or_none(bi.has_nodata, bi.nodata), num_or_none(bi.has_scale, bi.scale),
                         num_or_none(bi.has_offset, bi.offset), text(bi.data_type));
}

static PyObject *roles_tuple(const cf_stac_asset_info *a) {
    PyObject *t = PyTuple_New((Py_ssize_t)a->nroles);
    const char *p = a->roles.p;
    for (size_t r = 0; t && r < a->nroles; r++) {
        size_t n = strlen(p);
        PyObject *s = PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, NULL);
        if (!s) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)r, s);
        p += n + 1;
    }
    return t;
}

static PyObject *asset_tuple(const cf_stac *ix, size_t i, size_t k) {
    cf_stac_asset_info a;
    cf_stac_asset(ix, i, k, &a);
    PyObject *bands = PyTuple_New((Py_ssize_t)a.nbands);
    for (size_t b = 0; bands && b < a.nbands; b++) {
        PyObject *bt = band_tuple(ix, i, k, b);
        if (!bt) {
            Py_CLEAR(bands);
            break;
        }
        PyTuple_SET_ITEM(bands, (Py_ssize_t)b, bt);
    }
    if (!bands) return NULL;
    PyObject *tr = a.has_transform ? Py_BuildValue("(dddddd)", a.transform[0], a.transform[1], a.transform[2],
                                                   a.transform[3], a.transform[4], a.transform[5])
                                   : Py_NewRef(Py_None);
    PyObject *sh = a.has_shape ? Py_BuildValue("(LL)", (long long)a.shape[0], (long long)a.shape[1])
                               : Py_NewRef(Py_None);
    PyObject *pb = a.has_proj_bbox ? Py_BuildValue("(dddd)", a.proj_bbox[0], a.proj_bbox[1], a.proj_bbox[2],
                                                   a.proj_bbox[3])
                                   : Py_NewRef(Py_None);
    return Py_BuildValue("(NNONNNNNNN)", text(a.key), text(a.href), a.href_relative ? Py_True : Py_False,
                         text(a.type), roles_tuple(&a), text(a.crs), tr, sh, pb, bands);
}

/* item(i) -> (id, collection, properties (bytes), geometry (bytes or
 * None), self_href, (datetime, start, end texts), cloud_cover, bbox,
 * doc, feature, assets: ((key, href, relative, type, roles, crs,
 * transform, shape, proj_bbox, bands: ((name, common_name, nodata,
 * scale, offset, data_type), ...)), ...)) */
static PyObject *Stac_item(StacObject *self, PyObject *args) {
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "n", &i) || !check_item(self, i)) return NULL;
    cf_stac_item_info it;
    cf_stac_item(self->ix, (size_t)i, &it);
    PyObject *assets = PyTuple_New((Py_ssize_t)it.nassets);
    for (size_t k = 0; assets && k < it.nassets; k++) {
        PyObject *a = asset_tuple(self->ix, (size_t)i, k);
        if (!a) {
            Py_CLEAR(assets);
            break;
        }
        PyTuple_SET_ITEM(assets, (Py_ssize_t)k, a);
    }
    if (!assets) return NULL;
    PyObject *bbox;
    if (it.nbbox == 0) {
        bbox = Py_NewRef(Py_None);
    } else {
        bbox = PyTuple_New(it.nbbox);
        for (int b = 0; bbox && b < it.nbbox; b++) PyTuple_SET_ITEM(bbox, b, PyFloat_FromDouble(it.bbox[b]));
    }
    return Py_BuildValue("(NNNNN(NNN)NNIiN)", text(it.id), text(it.collection), raw(it.properties),
                         raw(it.geometry), text(it.self_href), text(it.datetime),
                         text(it.start_datetime), text(it.end_datetime),
                         num_or_none(!isnan(it.cloud_cover), it.cloud_cover), bbox, (unsigned)it.doc,
                         (int)it.feature, assets);
}

/* item_doc(i) -> the number of the document item i came from */
static PyObject *Stac_item_doc(StacObject *self, PyObject *args) {
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "n", &i) || !check_item(self, i)) return NULL;
    cf_stac_item_info it;
    cf_stac_item(self->ix, (size_t)i, &it);
    return PyLong_FromUnsignedLong(it.doc);
}

/* columns() -> (when int64 [n], cloud float64 [n] (NaN: none)) */
static PyObject *Stac_columns(StacObject *self, PyObject *unused) {
    (void)unused;
    npy_intp n = (npy_intp)cf_stac_count(self->ix);
    PyArrayObject *w = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_INT64);
    PyArrayObject *c = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_FLOAT64);
    if (!w || !c) {
        Py_XDECREF(w);
        Py_XDECREF(c);
        return NULL;
    }
    int64_t *wp = PyArray_DATA(w);
    double *cp = PyArray_DATA(c);
    for (npy_intp i = 0; i < n; i++) {
        cf_stac_item_info it;
        cf_stac_item(self->ix, (size_t)i, &it);
        wp[i] = it.when;
        cp[i] = it.cloud_cover;
    }
    return Py_BuildValue("(NN)", w, c);
}

/* match(boxes: ((w, s, e, n), ...), t_lo, t_hi, max_cloud) -> uint8 [n];
 * t_lo / t_hi None or UTC microseconds; max_cloud None or a number. */
static PyObject *Stac_match(StacObject *self, PyObject *args) {
    PyObject *boxes_o, *lo_o, *hi_o, *mc_o;
    if (!PyArg_ParseTuple(args, "OOOO", &boxes_o, &lo_o, &hi_o, &mc_o)) return NULL;
    PyObject *seq = cf__py_seq(boxes_o, "boxes must be a sequence of (west, south, east, north)");
    if (!seq) return NULL;
    Py_ssize_t nb = PyTuple_GET_SIZE(seq);
    double *boxes = PyMem_Malloc(sizeof(double) * 4 * (size_t)(nb ? nb : 1));
    if (!boxes) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < nb; k++) {
        double *b = boxes + 4 * k;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(seq, k), "dddd;a box is 4 numbers", b, b + 1, b + 2, b + 3)) {
            PyMem_Free(boxes);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    int64_t lo = CF_STAC_NO_TIME, hi = CF_STAC_NO_TIME;
    double mc = NAN;
    if (lo_o != Py_None) lo = PyLong_AsLongLong(lo_o);
    if (hi_o != Py_None) hi = PyLong_AsLongLong(hi_o);
    if (mc_o != Py_None) mc = PyFloat_AsDouble(mc_o);
    if (PyErr_Occurred()) {
        PyMem_Free(boxes);
        return NULL;
    }
    npy_intp n = (npy_intp)cf_stac_count(self->ix);
    PyArrayObject *m = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_UINT8);
    if (!m) {
        PyMem_Free(boxes);
        return NULL;
    }
    /* With the GIL held: the first search builds the R-tree, and a
     * cf_stac is read from one thread at a time (100,000 items: 25 ms). */
    cf_error err = {0};
    cf_status st = cf_stac_match(self->ix, boxes, (size_t)nb, lo, hi, mc, PyArray_DATA(m), &err);
    PyMem_Free(boxes);
    if (st != CF_OK) {
        Py_DECREF(m);
        return cf__py_raise(st, &err);
    }
    return (PyObject *)m;
}

/* The rows argument: a 1-D int64 array of item indices, checked. */
static PyArrayObject *rows_of(StacObject *self, PyObject *o) {
    PyArrayObject *r = (PyArrayObject *)PyArray_FROMANY(o, NPY_INT64, 1, 1, NPY_ARRAY_IN_ARRAY);
    if (!r) return NULL;
    const int64_t *p = PyArray_DATA(r);
    size_t n = cf_stac_count(self->ix);
    for (npy_intp i = 0; i < PyArray_DIM(r, 0); i++)
        if (p[i] < 0 || (size_t)p[i] >= n) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_IndexError, "item index out of range");
            return NULL;
        }
    return r;
}

/* The (rows, ks) arguments: item indices and an asset index for each,
 * both checked.  1 with two new references, 0 with an exception set. */
static int rows_ks(StacObject *self, PyObject *args, PyArrayObject **rows, PyArrayObject **ks) {
    PyObject *rows_o, *ks_o;
    if (!PyArg_ParseTuple(args, "OO", &rows_o, &ks_o)) return 0;
    *rows = rows_of(self, rows_o);
    if (!*rows) return 0;
    *ks = (PyArrayObject *)PyArray_FROMANY(ks_o, NPY_INT64, 1, 1, NPY_ARRAY_IN_ARRAY);
    int ok = *ks && PyArray_DIM(*ks, 0) == PyArray_DIM(*rows, 0);
    if (*ks && !ok) PyErr_SetString(PyExc_ValueError, "rows and ks differ in length");
    const int64_t *r = PyArray_DATA(*rows), *k = ok ? PyArray_DATA(*ks) : NULL;
    for (npy_intp i = 0; ok && i < PyArray_DIM(*rows, 0); i++) {
        cf_stac_item_info it;
        cf_stac_item(self->ix, (size_t)r[i], &it);
        if (k[i] < 0 || (size_t)k[i] >= it.nassets) {
            PyErr_SetString(PyExc_IndexError, "asset index out of range");
            ok = 0;
        }
    }
    if (!ok) {
        Py_DECREF(*rows);
        Py_XDECREF(*ks);
    }
    return ok;
}

/* pick(rows, names) -> int64 [len(rows), len(names)]: cf_stac_pick. */
static PyObject *Stac_pick(StacObject *self, PyObject *args) {
    PyObject *rows_o, *names_o;
    if (!PyArg_ParseTuple(args, "OO", &rows_o, &names_o)) return NULL;
    PyArrayObject *rows = rows_of(self, rows_o);
    if (!rows) return NULL;
    PyObject *names = cf__py_seq(names_o, "names must be a sequence of strings");
    if (!names) {
        Py_DECREF(rows);
        return NULL;
    }
    Py_ssize_t nn = PyTuple_GET_SIZE(names);
    npy_intp dims[2] = {PyArray_DIM(rows, 0), nn};
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_INT64);
    const char **cn = PyMem_Malloc(sizeof(char *) * (size_t)(nn ? nn : 1));
    int ok = out && cn;
    for (Py_ssize_t k = 0; ok && k < nn; k++) {
        Py_ssize_t len;
        cn[k] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, k), &len);
        ok = cn[k] != NULL;
        if (ok && strlen(cn[k]) != (size_t)len) cn[k] = NULL; /* a NUL: no key or name holds one */
    }
    if (ok) {
        const int64_t *r = PyArray_DATA(rows);
        int64_t *o = PyArray_DATA(out);
        for (npy_intp i = 0; i < dims[0]; i++)
            for (Py_ssize_t k = 0; k < nn; k++)
                o[i * nn + k] = cn[k] ? cf_stac_pick(self->ix, (size_t)r[i], cn[k]) : -1;
    }
    PyMem_Free(cn);
    Py_DECREF(names);
    Py_DECREF(rows);
    if (!ok) {
        Py_XDECREF(out);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    return (PyObject *)out;
}

/* hrefs(rows, ks) -> (list of str, list of bool: relative) for asset
 * ks[i] of item rows[i]. */
static PyObject *Stac_hrefs(StacObject *self, PyObject *args) {
    PyArrayObject *rows, *ks;
    if (!rows_ks(self, args, &rows, &ks)) return NULL;
    npy_intp n = PyArray_DIM(rows, 0);
    PyObject *hs = PyList_New(n), *rel = PyList_New(n);
    const int64_t *r = PyArray_DATA(rows), *k = PyArray_DATA(ks);
    for (npy_intp i = 0; hs && rel && i < n; i++) {
        cf_stac_asset_info a;
        cf_stac_asset(self->ix, (size_t)r[i], (size_t)k[i], &a);
        PyObject *s = text(a.href);
        if (!s) {
            Py_CLEAR(hs);
            break;
        }
        PyList_SET_ITEM(hs, i, s);
        PyList_SET_ITEM(rel, i, PyBool_FromLong(a.href_relative));
    }
    Py_DECREF(rows);
    Py_DECREF(ks);
    if (!hs || !rel) {
        Py_XDECREF(hs);
        Py_XDECREF(rel);
        return NULL;
    }
    return Py_BuildValue("(NN)", hs, rel);
}

/* grid_fields(rows, ks) -> (ids, keys, crs (str or None each),
 * transform float64 [n, 6], shape int64 [n, 2] (rows, columns)) of asset
 * ks[i] of item rows[i]; a missing transform is NaN, a missing shape 0. */
static PyObject *Stac_grid_fields(StacObject *self, PyObject *args) {
    PyArrayObject *rows, *ks;
    if (!rows_ks(self, args, &rows, &ks)) return NULL;
    npy_intp n = PyArray_DIM(rows, 0), d6[2] = {n, 6}, d2[2] = {n, 2};
    PyObject *ids = PyList_New(n), *keys = PyList_New(n), *crs = PyList_New(n),
             *dts = PyList_New(n);
    PyArrayObject *tr = (PyArrayObject *)PyArray_SimpleNew(2, d6, NPY_FLOAT64);
    PyArrayObject *sh = (PyArrayObject *)PyArray_SimpleNew(2, d2, NPY_INT64);
    int ok = ids && keys && crs && dts && tr && sh;
    const int64_t *r = PyArray_DATA(rows), *k = PyArray_DATA(ks);
    for (npy_intp i = 0; ok && i < n; i++) {
        cf_stac_item_info it;
        cf_stac_item(self->ix, (size_t)r[i], &it);
        cf_stac_asset_info a;
        cf_stac_asset(self->ix, (size_t)r[i], (size_t)k[i], &a);
        PyObject *v[3] = {text(it.id), text(a.key), text(a.crs)};
        if (!v[0] || !v[1] || !v[2]) {
            Py_XDECREF(v[0]);
            Py_XDECREF(v[1]);
            Py_XDECREF(v[2]);
            ok = 0;
            break;
        }
        PyList_SET_ITEM(ids, i, v[0]);
        PyList_SET_ITEM(keys, i, v[1]);
        PyList_SET_ITEM(crs, i, v[2]);
        /* each band's raster data_type (None where it has none) */
        PyObject *d = PyList_New((Py_ssize_t)a.nbands);
        if (!d) {
            ok = 0;
            break;
        }
        PyList_SET_ITEM(dts, i, d);
        for (size_t b = 0; ok && b < a.nbands; b++) {
            cf_stac_band_info bi;
            cf_stac_band(self->ix, (size_t)r[i], (size_t)k[i], b, &bi);
            PyObject *x = text(bi.data_type);
            if (!x) ok = 0;
            else PyList_SET_ITEM(d, (Py_ssize_t)b, x);
        }
        double *t = (double *)PyArray_GETPTR2(tr, i, 0);
        int64_t *s = (int64_t *)PyArray_GETPTR2(sh, i, 0);
        for (int j = 0; j < 6; j++) t[j] = a.has_transform ? a.transform[j] : NAN;
        s[0] = a.has_shape ? a.shape[0] : 0;
        s[1] = a.has_shape ? a.shape[1] : 0;
    }
    Py_DECREF(rows);
    Py_DECREF(ks);
    if (!ok) {
        Py_XDECREF(ids);
        Py_XDECREF(keys);
        Py_XDECREF(crs);
        Py_XDECREF(dts);
        Py_XDECREF(tr);
        Py_XDECREF(sh);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    return Py_BuildValue("(NNNNNN)", ids, keys, crs, tr, sh, dts);
}

static PyMethodDef Stac_methods[] = {
    {"add", (PyCFunction)Stac_add, METH_VARARGS, "add(data, base, limits) -> held items"},
    {"add_file", (PyCFunction)Stac_add_file, METH_VARARGS,
     "add_file(path, base, limits, max_bytes) -> held items"},
    {"add_arrow", (PyCFunction)Stac_add_arrow, METH_VARARGS,
     "add_arrow(record_batch, base, limits): a STAC GeoParquet batch"},
    {"count", (PyCFunction)Stac_len, METH_NOARGS, "number of items"},
    {"item", (PyCFunction)Stac_item, METH_VARARGS, "item(i) -> the item's fields"},
    {"item_doc", (PyCFunction)Stac_item_doc, METH_VARARGS, "item_doc(i) -> its document's number"},
    {"columns", (PyCFunction)Stac_columns, METH_NOARGS, "(when, cloud) arrays"},
    {"match", (PyCFunction)Stac_match, METH_VARARGS, "match(boxes, t_lo, t_hi, max_cloud) -> uint8 array"},
    {"pick", (PyCFunction)Stac_pick, METH_VARARGS, "pick(rows, names) -> asset indices"},
    {"grid_fields", (PyCFunction)Stac_grid_fields, METH_VARARGS,
     "grid_fields(rows, ks) -> (ids, keys, crs, transform, shape, band dtypes)"},
    {"hrefs", (PyCFunction)Stac_hrefs, METH_VARARGS, "hrefs(rows, ks) -> (hrefs, relative)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject StacType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed._cogfeed._StacIndex",
    .tp_basicsize = sizeof(StacObject),
    .tp_dealloc = (destructor)Stac_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "STAC items indexed in C (cf_stac); see cogfeed.stac.",
    .tp_methods = Stac_methods,
    .tp_new = Stac_new,
};

int cf__py_stac_init(PyObject *module) {
    if (PyType_Ready(&StacType) < 0) return -1;
    Py_INCREF(&StacType);
    if (PyModule_AddObject(module, "_StacIndex", (PyObject *)&StacType) < 0) {
        Py_DECREF(&StacType);
        return -1;
    }
    return 0;
}
