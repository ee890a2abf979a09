/*
 * _status.c - cogfeed.Error, cogfeed.Status and one exception class per
 * status, all built at import from CF_STATUS_TABLE (cogfeed.h), the table
 * that also gives the C enum, cf_status_name() and cf_strerror(): nothing
 * here restates a status.
 */
#include "pymod.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

PyObject *cf__py_Error = NULL;

/* One row per table entry: its Status member and its exception class
 * (cf__py_Error for the rows without a class of their own). */
#define CF__PY_COUNT_ROW(id, value, text, doc, pyclass, pybase) +1
enum { CF__PY_NSTATUS = 0 CF_STATUS_TABLE(CF__PY_COUNT_ROW) };
#undef CF__PY_COUNT_ROW

typedef struct status_row {
    cf_status code;
    const char *name, *text, *doc, *pyclass, *pybase;
} status_row;

#define CF__PY_ROW(id, value, text, doc, pyclass, pybase) {id, #id, text, doc, pyclass, pybase},
static const status_row rows[CF__PY_NSTATUS] = {CF_STATUS_TABLE(CF__PY_ROW)};
#undef CF__PY_ROW

static PyObject *status_member[CF__PY_NSTATUS]; /* cogfeed.Status members */
static PyObject *status_exc[CF__PY_NSTATUS];    /* the class raised for each */

static int row_of(cf_status code) {
    for (int i = 0; i < CF__PY_NSTATUS; i++)
        if (rows[i].code == code) return i;
    return -1;
}

/* "CF_E_NOTFOUND" -> "NOTFOUND", "CF_OK" -> "OK": Status's member names. */
static const char *short_name(const char *name) {
    if (!strncmp(name, "CF_E_", 5)) return name + 5;
    return name + 3;
}

PyObject *cf__py_error_new(cf_status code, const cf_error *err) {
    const char *msg = err && err->msg[0] ? err->msg : cf_strerror(code);
    /* File names need not be UTF-8 (POSIX paths are bytes), and a message
     * cut at its size may end inside a character: never let decoding it
     * replace the error itself. */
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!text) return NULL;
    int r = row_of(code);
    PyObject *cls = r >= 0 ? status_exc[r] : cf__py_Error;
    PyObject *exc = PyObject_CallFunctionObjArgs(cls, text, NULL);
    Py_DECREF(text);
    if (!exc) return NULL;
    /* .code is the cogfeed.Status member (an int), or a plain int for a
     * value outside the table. */
    PyObject *c = r >= 0 ? (Py_INCREF(status_member[r]), status_member[r]) : PyLong_FromLong((long)code);
    PyObject *n = PyUnicode_FromString(cf_strerror(code));
    PyObject *h = PyLong_FromLong(err ? err->http_status : 0);
    if (c && n && h) {
        PyObject_SetAttrString(exc, "code", c);
        PyObject_SetAttrString(exc, "name", n);
        PyObject_SetAttrString(exc, "http_status", h);
    }
    Py_XDECREF(c);
    Py_XDECREF(n);
    Py_XDECREF(h);
    return exc;
}

PyObject *cf__py_raise(cf_status code, const cf_error *err) {
    PyObject *exc = cf__py_error_new(code, err);
    if (!exc) return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *py_status_table(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    PyObject *t = PyTuple_New(CF__PY_NSTATUS);
    if (!t) return NULL;
    for (int i = 0; i < CF__PY_NSTATUS; i++) {
        const status_row *w = &rows[i];
        PyObject *row = Py_BuildValue("(sisssss)", w->name, (int)w->code, w->text, w->doc,
                                      w->pyclass, w->pybase, short_name(w->name));
        if (!row) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, row);
    }
    return t;
}

static PyObject *py_status_name(PyObject *self, PyObject *arg) {
    (void)self;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    const char *name = v < INT_MIN || v > INT_MAX ? NULL : cf_status_name((cf_status)v);
    if (!name) Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

static PyMethodDef status_methods[] = {
    {"status_table", py_status_table, METH_NOARGS,
     "status_table() -> tuple of (name, code, text, doc, pyclass, pybase, member)\n\n"
     "cogfeed.h's CF_STATUS_TABLE, one row per status: the C enum constant,\n"
     "its value, cf_strerror's text, its meaning, the exception class raised\n"
     "for it ('' for OK and END), the builtin that class also subclasses\n"
     "('' for none but RuntimeError), and its cogfeed.Status member name."},
    {"status_name", py_status_name, METH_O,
     "status_name(code) -> 'CF_E_NOTFOUND', ... (C's cf_status_name), or None\n"
     "for a value that is not a status."},
    {NULL, NULL, 0, NULL}};

/* cogfeed.Status: an IntEnum made with enum's functional API from the
 * table's rows, so .code compares equal to the C value. */
static PyObject *make_status_enum(void) {
    PyObject *enum_mod = PyImport_ImportModule("enum");
    if (!enum_mod) return NULL;
    PyObject *int_enum = PyObject_GetAttrString(enum_mod, "IntEnum");
    Py_DECREF(enum_mod);
    if (!int_enum) return NULL;
    PyObject *members = PyList_New(CF__PY_NSTATUS), *res = NULL;
    if (!members) goto out;
    for (int i = 0; i < CF__PY_NSTATUS; i++) {
        PyObject *pair = Py_BuildValue("(si)", short_name(rows[i].name), (int)rows[i].code);
        if (!pair) goto out;
        PyList_SET_ITEM(members, i, pair);
    }
    PyObject *args = Py_BuildValue("(sO)", "Status", members);
    PyObject *kw = Py_BuildValue("{ss}", "module", "cogfeed");
    if (args && kw) res = PyObject_Call(int_enum, args, kw);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    PyObject *doc = res ? PyUnicode_FromString("cogfeed's status codes: cogfeed.h's cf_status, "
                                               "the same values, names without CF_E_; "
                                               "cogfeed.Error's .code is one.")
                        : NULL;
    if (res && (!doc || PyObject_SetAttrString(res, "__doc__", doc) < 0)) Py_CLEAR(res);
    Py_XDECREF(doc);
out:
    Py_XDECREF(members);
    Py_DECREF(int_enum);
    return res;
}

/* PyModule_AddObjectRef, which Python 3.9 lacks. */
static int add_ref(PyObject *m, const char *name, PyObject *obj) {
    Py_INCREF(obj);
    if (PyModule_AddObject(m, name, obj) == 0) return 0;
    Py_DECREF(obj);
    return -1;
}

int cf__py_status_init(PyObject *m) {
    cf__py_Error = PyErr_NewExceptionWithDoc(
        "cogfeed.Error",
        "Raised for every cogfeed failure, as the subclass of its status\n"
        "(cogfeed.NotFoundError, ...: cogfeed.Status lists them).  Attributes:\n"
        ".code (a cogfeed.Status, an int), .name (its short English text) and\n"
        ".http_status (the last HTTP status involved, 0 if none).",
        PyExc_RuntimeError, NULL);
    if (!cf__py_Error) return -1;
    if (add_ref(m, "Error", cf__py_Error) < 0) return -1;
    PyObject *status = make_status_enum();
    if (!status) return -1;
    int ret = -1;
    PyObject *builtins = PyImport_ImportModule("builtins");
    if (!builtins) goto out;
    for (int i = 0; i < CF__PY_NSTATUS; i++) {
        const status_row *w = &rows[i];
        status_member[i] = PyObject_CallFunction(status, "i", (int)w->code);
        if (!status_member[i]) goto out;
        if (!w->pyclass[0]) {
            Py_INCREF(cf__py_Error);
            status_exc[i] = cf__py_Error;
            continue;
        }
        PyObject *bases = NULL;
        if (w->pybase[0]) {
            PyObject *b = PyObject_GetAttrString(builtins, w->pybase);
            if (!b) goto out;
            bases = PyTuple_Pack(2, cf__py_Error, b);
            Py_DECREF(b);
        } else {
            bases = PyTuple_Pack(1, cf__py_Error);
        }
        /* Class attributes, so that an instance made in Python (a test's
         * double, a re-raise) has them too; cf__py_raise sets its own. */
        PyObject *dict = bases ? Py_BuildValue("{sOsssi}", "code", status_member[i], "name",
                                               w->text, "http_status", 0)
                               : NULL;
        char qual[96], doc[512];
        snprintf(qual, sizeof qual, "cogfeed.%s", w->pyclass);
        snprintf(doc, sizeof doc, "%s (%d): %s.%s%s%s", w->name, (int)w->code, w->doc,
                 w->pybase[0] ? "  Also a " : "", w->pybase, w->pybase[0] ? "." : "");
        status_exc[i] = dict ? PyErr_NewExceptionWithDoc(qual, doc, bases, dict) : NULL;
        Py_XDECREF(bases);
        Py_XDECREF(dict);
        if (!status_exc[i] || add_ref(m, w->pyclass, status_exc[i]) < 0) goto out;
    }
    if (add_ref(m, "Status", status) < 0 ||
        PyModule_AddFunctions(m, status_methods) < 0)
        goto out;
    ret = 0;
out:
    Py_XDECREF(builtins);
    Py_DECREF(status);
    return ret;
}
