/*
 * _options.c - the C option tables (cf_loader_option_table,
 * cf_io_option_table: include/cogfeed.h) in the extension: keyword
 * arguments converted and checked row by row (cogfeed.IO, _Loader), and
 * the tables as lists of dicts (cogfeed._cogfeed.loader_options(),
 * io_options()) for cogfeed.Loader's defaults and help, the CLI and the
 * docs.  Only the public header is read: names, types, ranges and
 * defaults come from the library that checks them.
 */
#include "pymod.h"

#include <string.h>

/* One keyword's value as the option's type, checked (cf_option_check)
 * before it is narrowed into the member at base + opt->offset.  The
 * conversions are PyArg's: "L" (__index__; OverflowError past 64 bits),
 * "K" (__index__, modulo 2^64: a negative seed as torch.manual_seed takes
 * it), "d", "p" (truth), and a kernel by name (None: the default). */
static int take_one(PyObject *v, const cf_option_info *opt, void *base) {
    unsigned char *dst = (unsigned char *)base + opt->offset;
    cf_error e;
    double d = 0;
    uint64_t bits = 0; /* integer members: the value, two's complement */
    switch (opt->type) {
    case CF_OPT_INT:
    case CF_OPT_UINT: {
        PyObject *ix = PyNumber_Index(v);
        if (!ix) return 0;
        if (opt->type == CF_OPT_INT) {
            long long x = PyLong_AsLongLong(ix);
            Py_DECREF(ix);
            if (x == -1 && PyErr_Occurred()) return 0;
            d = (double)x;
            bits = (uint64_t)x;
        } else {
            unsigned long long x = PyLong_AsUnsignedLongLongMask(ix);
            Py_DECREF(ix);
            if (x == (unsigned long long)-1 && PyErr_Occurred()) return 0;
            d = (double)x;
            bits = x;
        }
        break;
    }
    case CF_OPT_FLOAT:
        d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) return 0;
        break;
    case CF_OPT_BOOL: {
        int t = PyObject_IsTrue(v);
        if (t < 0) return 0;
        d = t;
        bits = (uint64_t)t;
        break;
    }
    case CF_OPT_KERNEL: {
        if (v == Py_None) return 1;
        const char *name = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        if (!name) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%s must be a kernel name or None, not %.80s",
                             opt->name, Py_TYPE(v)->tp_name);
            return 0;
        }
        cf_resampling r;
        if (cf_resampling_from_name(name, &r, &e) != CF_OK) {
            PyErr_SetString(PyExc_ValueError, e.msg);
            return 0;
        }
        memcpy(dst, &r, sizeof r);
        return 1;
    }
    default:
        PyErr_Format(PyExc_SystemError, "option %s: unknown type %d", opt->name, (int)opt->type);
        return 0;
    }
    if (cf_option_check(opt, d, &e) != CF_OK) {
        PyErr_SetString(PyExc_ValueError, e.msg);
        return 0;
    }
    if (opt->type == CF_OPT_FLOAT && opt->size == sizeof d) {
        memcpy(dst, &d, sizeof d);
    } else if (opt->type != CF_OPT_FLOAT && opt->size == 8) {
        memcpy(dst, &bits, 8);
    } else if (opt->type != CF_OPT_FLOAT && opt->size == 4) {
        uint32_t b = (uint32_t)bits; /* in range: the member's own value */
        memcpy(dst, &b, 4);
    } else {
        PyErr_Format(PyExc_SystemError, "option %s: member of %zu bytes", opt->name, opt->size);
        return 0;
    }
    return 1;
}

int cf__py_take_options(PyObject *kw, const cf_option_info *tab, size_t n, void *base) {
    for (size_t i = 0; kw && i < n; i++) {
        PyObject *v = PyDict_GetItemString(kw, tab[i].name); /* borrowed */
        if (!v) continue;
        Py_INCREF(v);
        int ok = take_one(v, &tab[i], base) && PyDict_DelItemString(kw, tab[i].name) == 0;
        Py_DECREF(v);
        if (!ok) return 0;
    }
    return 1;
}

static PyObject *value(const cf_option_info *o, cf_option_value v) {
    switch (o->type) {
    case CF_OPT_UINT: return PyLong_FromUnsignedLongLong(v.u);
    case CF_OPT_FLOAT: return PyFloat_FromDouble(v.d);
    case CF_OPT_BOOL: return PyBool_FromLong((long)v.i);
    case CF_OPT_KERNEL:
        if (v.i >= 0 && v.i < o->nchoices) return PyUnicode_FromString(o->choices[v.i]);
        return PyLong_FromLongLong(v.i);
    default: return PyLong_FromLongLong(v.i);
    }
}

static const char *type_name(cf_option_type t) {
    switch (t) {
    case CF_OPT_INT: return "int";
    case CF_OPT_UINT: return "uint";
    case CF_OPT_FLOAT: return "float";
    case CF_OPT_BOOL: return "bool";
    case CF_OPT_KERNEL: return "kernel";
    }
    return "?";
}

static PyObject *option_dict(const cf_option_info *o) {
    PyObject *choices = NULL;
    if (o->choices) {
        choices = PyTuple_New(o->nchoices);
        for (int k = 0; choices && k < o->nchoices; k++) {
            PyObject *s = PyUnicode_FromString(o->choices[k]);
            if (!s) Py_CLEAR(choices);
            else PyTuple_SET_ITEM(choices, k, s);
        }
        if (!choices) return NULL;
    } else {
        Py_INCREF(Py_None);
        choices = Py_None;
    }
    PyObject *def = value(o, o->def), *lo = value(o, o->lo), *hi = value(o, o->hi);
    PyObject *d = NULL;
    if (def && lo && hi)
        d = Py_BuildValue("{s:s,s:s,s:i,s:s,s:s,s:O,s:O,s:O,s:s,s:s,s:O,s:O}", "name", o->name,
                          "group", o->group, "id", o->id, "type", type_name(o->type), "ctype",
                          o->ctype, "default", def, "min", lo, "max", hi, "hint", o->hint,
                          "default_doc", o->default_doc, "runtime_default",
                          (o->flags & CF_OPTF_RUNTIME_DEFAULT) ? Py_True : Py_False, "choices",
                          choices);
    Py_XDECREF(def);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_DECREF(choices);
    return d;
}

static PyObject *table_list(const cf_option_info *tab, size_t n) {
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *d = option_dict(&tab[i]);
        if (!d) Py_CLEAR(l);
        else PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    return l;
}

static PyObject *py_loader_options(PyObject *mod, PyObject *noargs) {
    (void)mod;
    (void)noargs;
    size_t n;
    const cf_option_info *t = cf_loader_option_table(&n);
    return table_list(t, n);
}

static PyObject *py_io_options(PyObject *mod, PyObject *noargs) {
    (void)mod;
    (void)noargs;
    size_t n;
    const cf_option_info *t = cf_io_option_table(&n);
    return table_list(t, n);
}

#define TABLE_DOC                                                                          \
    "-> list of dicts: name, group, id, type ('int', 'uint', 'float', 'bool',\n"           \
    "'kernel'), ctype, default, min, max (the accepted range), hint (the special\n"       \
    "values), runtime_default (True: default is this machine's, default_doc says\n"       \
    "how), choices (kernels: the names, by value).  From the C table\n"                   \
    "(include/cogfeed.h, cf_option_info)."

static PyMethodDef option_methods[] = {
    {"loader_options", py_loader_options, METH_NOARGS,
     "loader_options() " TABLE_DOC "\n\nThe scalar options of cf_loader_options (_Loader's "
     "keywords) and its kernels."},
    {"io_options", py_io_options, METH_NOARGS,
     "io_options() " TABLE_DOC "\n\nThe scalar options of cf_io_options (cogfeed.IO's "
     "keywords)."},
    {NULL, NULL, 0, NULL}};

int cf__py_options_init(PyObject *module) {
    return PyModule_AddFunctions(module, option_methods);
}
