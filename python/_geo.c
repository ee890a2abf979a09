/*
 * _geo.c - cogfeed.CRS (a cf_crs) and the grid helpers of the extension.
 * A CRS compares equal to another when PROJ finds them equivalent, and to
 * an int when that is its EPSG code (what Cog.crs used to be); it
 * round-trips through str() ("EPSG:n" or WKT2), to_wkt(), to_json() and
 * pickling.
 */
#include "pymod.h"

typedef struct {
    PyObject_HEAD cf_crs *crs;
} CRSObject;

static PyTypeObject CRSType;

PyObject *cf__py_crs_new(cf_crs *crs) {
    if (!crs) Py_RETURN_NONE;
    CRSObject *o = PyObject_New(CRSObject, &CRSType);
    if (!o) {
        cf_crs_free(crs);
        return NULL;
    }
    o->crs = crs;
    return (PyObject *)o;
}

static int crs_from_text(const char *s, cf_crs **out) {
    cf_error err = {0};
    cf_status st;
    Py_BEGIN_ALLOW_THREADS st = cf_crs_from_string(s, out, &err);
    Py_END_ALLOW_THREADS if (st) {
        cf__py_raise(st, &err);
        return 0;
    }
    return 1;
}

int cf__py_crs_convert(PyObject *o, cf_crs **out) {
    *out = NULL;
    if (!o || o == Py_None) return 1;
    if (PyObject_TypeCheck(o, &CRSType)) {
        *out = cf_crs_ref(((CRSObject *)o)->crs);
        return 1;
    }
    if (PyLong_Check(o)) {
        long code = PyLong_AsLong(o);
        if (code == -1 && PyErr_Occurred()) return 0;
        if (code <= 0 || code > 0x7fffffff) {
            PyErr_Format(PyExc_ValueError, "EPSG code %ld out of range", code);
            return 0;
        }
        cf_error err = {0};
        cf_status st = cf_crs_from_epsg((int)code, out, &err);
        if (st) cf__py_raise(st, &err);
        return st == CF_OK;
    }
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        return s && crs_from_text(s, out);
    }
    PyObject *text = NULL;
    if (PyDict_Check(o)) {
        /* PROJJSON as a dict */
        PyObject *json = PyImport_ImportModule("json");
        if (!json) return 0;
        text = PyObject_CallMethod(json, "dumps", "O", o);
        Py_DECREF(json);
    } else if (PyObject_HasAttrString(o, "to_wkt")) {
        /* rasterio / pyproj CRS objects */
        text = PyObject_CallMethod(o, "to_wkt", NULL);
    } else {
        PyErr_Format(PyExc_TypeError,
                     "a CRS is a cogfeed.CRS, an EPSG code (int), a string (\"EPSG:32633\", "
                     "WKT, PROJJSON, PROJ), a PROJJSON dict or an object with to_wkt(); got %s",
                     Py_TYPE(o)->tp_name);
        return 0;
    }
    if (!text) return 0;
    const char *s = PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : NULL;
    int ok = s && crs_from_text(s, out);
    if (!s && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "to_wkt() did not return str");
    Py_DECREF(text);
    return ok;
}

static PyObject *CRS_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"value", NULL};
    PyObject *v;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:CRS", kwlist, &v)) return NULL;
    if (v == Py_None) {
        PyErr_SetString(PyExc_ValueError, "CRS(None): no CRS given");
        return NULL;
    }
    cf_crs *c;
    if (!cf__py_crs_convert(v, &c)) return NULL;
    CRSObject *o = (CRSObject *)type->tp_alloc(type, 0);
    if (!o) {
        cf_crs_free(c);
        return NULL;
    }
    o->crs = c;
    return (PyObject *)o;
}

static void CRS_dealloc(CRSObject *self) {
    cf_crs_free(self->crs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define CRS_OF(self) (((CRSObject *)(self))->crs)

static PyObject *CRS_to_epsg(PyObject *self, PyObject *noargs) {
    int e = cf_crs_epsg(CRS_OF(self));
    if (!e) Py_RETURN_NONE;
    return PyLong_FromLong(e);
}
static PyObject *CRS_to_wkt(PyObject *self, PyObject *noargs) {
    return PyUnicode_FromString(cf_crs_wkt(CRS_OF(self)));
}
static PyObject *CRS_to_json(PyObject *self, PyObject *noargs) {
    return PyUnicode_FromString(cf_crs_projjson(CRS_OF(self)));
}
static PyObject *CRS_to_string(PyObject *self, PyObject *noargs) {
    return PyUnicode_FromString(cf_crs_to_string(CRS_OF(self)));
}

static PyObject *CRS_equals(PyObject *self, PyObject *other) {
    cf_crs *c;
    if (!cf__py_crs_convert(other, &c)) return NULL;
    int eq;
    Py_BEGIN_ALLOW_THREADS eq = cf_crs_equivalent(CRS_OF(self), c);
    Py_END_ALLOW_THREADS cf_crs_free(c);
    return PyBool_FromLong(eq);
}

static PyObject *CRS_reduce(PyObject *self, PyObject *noargs) {
    /* WKT2 keeps a user-defined CRS whole; an EPSG one goes as its code. */
    return Py_BuildValue("(O(s))", (PyObject *)Py_TYPE(self), cf_crs_to_string(CRS_OF(self)));
}

static PyObject *CRS_richcompare(PyObject *self, PyObject *other, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    int eq;
    if (PyObject_TypeCheck(other, &CRSType)) {
        Py_BEGIN_ALLOW_THREADS eq = cf_crs_equivalent(CRS_OF(self), CRS_OF(other));
        Py_END_ALLOW_THREADS
    } else if (PyLong_Check(other) && !PyBool_Check(other)) {
        /* Cog.crs used to be the EPSG code: keep `cog.crs == 32633`. */
        long v = PyLong_AsLong(other);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            eq = 0;
        } else {
            eq = cf_crs_epsg(CRS_OF(self)) != 0 && cf_crs_epsg(CRS_OF(self)) == v;
        }
    } else if (PyUnicode_Check(other)) {
        cf_crs *c;
        if (!cf__py_crs_convert(other, &c)) {
            PyErr_Clear();
            eq = 0;
        } else {
            eq = cf_crs_equivalent(CRS_OF(self), c);
            cf_crs_free(c);
        }
    } else {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t CRS_hash(PyObject *self) {
    /* Equal CRSs must hash alike: the EPSG code when there is one, else
     * the name (equivalent CRSs of different names collide less well,
     * but never break the rule for CRSs that compare equal by code). */
    int e = cf_crs_epsg(CRS_OF(self));
    if (e) return (Py_hash_t)e;
    PyObject *n = PyUnicode_FromString(cf_crs_name(CRS_OF(self)));
    if (!n) return -1;
    Py_hash_t h = PyObject_Hash(n);
    Py_DECREF(n);
    return h;
}

static PyObject *CRS_repr(PyObject *self) {
    const cf_crs *c = CRS_OF(self);
    if (cf_crs_epsg(c)) return PyUnicode_FromFormat("CRS('EPSG:%d')", cf_crs_epsg(c));
    return PyUnicode_FromFormat("CRS(<user-defined: %s>)", cf_crs_name(c));
}

static PyObject *CRS_str(PyObject *self) { return CRS_to_string(self, NULL); }

static PyObject *get_crs_attr(PyObject *self, void *which) {
    const cf_crs *c = CRS_OF(self);
    const char *w = which;
    if (!strcmp(w, "name")) return PyUnicode_FromString(cf_crs_name(c));
    if (!strcmp(w, "epsg")) return CRS_to_epsg(self, NULL);
    if (!strcmp(w, "epsg_written")) {
        int e = cf_crs_epsg_written(c);
        if (!e) Py_RETURN_NONE;
        return PyLong_FromLong(e);
    }
    if (!strcmp(w, "geographic")) return PyBool_FromLong(cf_crs_kind_of(c) == CF_CRS_GEOGRAPHIC);
    if (!strcmp(w, "projected")) return PyBool_FromLong(cf_crs_kind_of(c) == CF_CRS_PROJECTED);
    if (!strcmp(w, "unit")) {
        double f = cf_crs_linear_unit(c);
        if (!(f > 0)) Py_RETURN_NONE;
        return PyFloat_FromDouble(f);
    }
    Py_RETURN_NONE;
}

static PyObject *CRS_from_epsg(PyObject *cls, PyObject *arg) {
    return PyObject_CallFunctionObjArgs(cls, arg, NULL);
}

static PyMethodDef CRS_methods[] = {
    {"to_epsg", CRS_to_epsg, METH_NOARGS, "to_epsg() -> int or None: the EPSG code"},
    {"to_wkt", CRS_to_wkt, METH_NOARGS, "to_wkt() -> str: WKT2 (2019)"},
    {"to_json", CRS_to_json, METH_NOARGS, "to_json() -> str: PROJJSON"},
    {"to_string", CRS_to_string, METH_NOARGS,
     "to_string() -> 'EPSG:n' when there is a code, else WKT2 (reads back as an equal CRS)"},
    {"equals", CRS_equals, METH_O,
     "equals(other) -> bool: PROJ equivalence (other: anything CRS() accepts)"},
    {"from_epsg", CRS_from_epsg, METH_O | METH_CLASS, "from_epsg(code) -> CRS"},
    {"from_wkt", CRS_from_epsg, METH_O | METH_CLASS, "from_wkt(text) -> CRS"},
    {"from_user_input", CRS_from_epsg, METH_O | METH_CLASS,
     "from_user_input(value) -> CRS (anything CRS() accepts)"},
    {"__reduce__", CRS_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef CRS_getset[] = {
    {"name", get_crs_attr, NULL, "name of the CRS", "name"},
    {"epsg", get_crs_attr, NULL,
     "EPSG code, as GDAL resolves it (a deprecated code replaced), or None", "epsg"},
    {"epsg_written", get_crs_attr, NULL, "EPSG code as written in the file (or given), or None",
     "epsg_written"},
    {"is_geographic", get_crs_attr, NULL, "True for longitude/latitude", "geographic"},
    {"is_projected", get_crs_attr, NULL, "True for a projected CRS", "projected"},
    {"linear_unit", get_crs_attr, NULL, "metres per unit (projected), None when geographic",
     "unit"},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject CRSType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed.CRS",
    .tp_basicsize = sizeof(CRSObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CRS(value)\n\nA coordinate reference system held by PROJ.  value: an EPSG code, "
              "a string PROJ reads (\"EPSG:32633\", WKT1/WKT2, PROJJSON, a PROJ string), a "
              "PROJJSON dict, a CRS, or an object with to_wkt() (rasterio, pyproj).  Two CRSs "
              "are == when PROJ finds them equivalent; a CRS == int compares the EPSG code.  "
              "str() gives 'EPSG:n' or WKT2, either of which reads back to an equal CRS.",
    .tp_new = CRS_new,
    .tp_dealloc = (destructor)CRS_dealloc,
    .tp_methods = CRS_methods,
    .tp_getset = CRS_getset,
    .tp_richcompare = CRS_richcompare,
    .tp_hash = CRS_hash,
    .tp_repr = CRS_repr,
    .tp_str = CRS_str,
};

/* ------------------------------------------------------------ grids */

int cf__py_grid_parse(PyObject *o, cf_grid *g, cf_crs **hold) {
    *hold = NULL;
    PyObject *crs = PyObject_GetAttrString(o, "crs");
    PyObject *gt = crs ? PyObject_GetAttrString(o, "geotransform") : NULL;
    PyObject *w = gt ? PyObject_GetAttrString(o, "width") : NULL;
    PyObject *h = w ? PyObject_GetAttrString(o, "height") : NULL;
    PyObject *seq = NULL;
    int ok = 0;
    if (!h) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
                        "grid must be a cogfeed.Grid (crs, geotransform, width, height)");
        goto done;
    }
    seq = cf__py_seq(gt, "grid.geotransform must be 6 numbers");
    if (!seq) goto done;
    if (PySequence_Fast_GET_SIZE(seq) != 6) {
        PyErr_SetString(PyExc_ValueError, "grid.geotransform must be 6 numbers");
        goto done;
    }
    for (int k = 0; k < 6; k++) {
        g->transform[k] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, k));
        if (PyErr_Occurred()) goto done;
    }
    long long ww = PyLong_AsLongLong(w), hh = PyLong_AsLongLong(h);
    if (PyErr_Occurred()) goto done;
    if (ww < 1 || hh < 1 || ww > CF_MAX_DIMENSION || hh > CF_MAX_DIMENSION) {
        PyErr_Format(PyExc_ValueError, "grid size %lldx%lld out of range", ww, hh);
        goto done;
    }
    g->width = (uint32_t)ww;
    g->height = (uint32_t)hh;
    if (!cf__py_crs_convert(crs, hold)) goto done;
    g->crs = *hold;
    ok = 1;
done:
    Py_XDECREF(seq);
    Py_XDECREF(crs);
    Py_XDECREF(gt);
    Py_XDECREF(w);
    Py_XDECREF(h);
    return ok;
}

/* grid_from_bounds(crs, bounds, xres, yres) -> (geotransform, width,
 * height): cf_grid_from_bounds, for cogfeed.Grid.from_bounds. */
static PyObject *py_grid_from_bounds(PyObject *mod, PyObject *args) {
    PyObject *crs_obj;
    double b[4], xres, yres;
    if (!PyArg_ParseTuple(args, "O(dddd)dd", &crs_obj, &b[0], &b[1], &b[2], &b[3], &xres, &yres))
        return NULL;
    cf_crs *c;
    if (!cf__py_crs_convert(crs_obj, &c)) return NULL;
    cf_grid g;
    cf_error err = {0};
    cf_status st = cf_grid_from_bounds(c, b, xres, yres, &g, &err);
    cf_crs_free(c);
    if (st) {
        PyErr_SetString(PyExc_ValueError, err.msg);
        return NULL;
    }
    const double *t = g.transform;
    return Py_BuildValue("((dddddd)II)", t[0], t[1], t[2], t[3], t[4], t[5], g.width, g.height);
}

static PyMethodDef geo_functions[] = {
    {"grid_from_bounds", py_grid_from_bounds, METH_VARARGS,
     "grid_from_bounds(crs, (xmin, ymin, xmax, ymax), xres, yres) -> (geotransform, w, h)"},
    {NULL, NULL, 0, NULL}};

int cf__py_geo_init(PyObject *m) {
    if (PyType_Ready(&CRSType) < 0) return -1;
    Py_INCREF(&CRSType);
    if (PyModule_AddObject(m, "CRS", (PyObject *)&CRSType) < 0) return -1;
    return PyModule_AddFunctions(m, geo_functions);
}
