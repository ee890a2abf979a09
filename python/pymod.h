/*
 * pymod.h - what the parts of the _cogfeed extension share: the module's
 * exception type and the helper that turns a cf_error into it.
 * _cogfeed.c owns the module; the other C files of python/ register types
 * through the init functions declared here.
 */
#ifndef CF_PYMOD_H
#define CF_PYMOD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cogfeed.h"

/* One numpy C-API table for the whole extension: _cogfeed.c defines
 * CF_PY_MAIN and calls import_array(); other files only use it. */
#define PY_ARRAY_UNIQUE_SYMBOL cf_py_ARRAY_API
#ifndef CF_PY_MAIN
#define NO_IMPORT_ARRAY
#endif
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

/* cogfeed.Error (subclass of RuntimeError), the base of the class of each
 * status (_status.c); attributes: code (a cogfeed.Status, an int), name
 * (cf_strerror), http_status (int). */
extern PyObject *cf__py_Error;

/* Raise the exception class of `code` (cogfeed.NotFoundError, ...; a
 * cogfeed.Error) from err (or from code when err is NULL/empty); returns
 * NULL for convenience. */
PyObject *cf__py_raise(cf_status code, const cf_error *err);
/* The exception cf__py_raise raises, as a new reference (NULL: a Python
 * error is set). */
PyObject *cf__py_error_new(cf_status code, const cf_error *err);

/* Add Error, Status, the status classes, status_table() and status_name()
 * to the module, from CF_STATUS_TABLE; -1 with an exception set. */
int cf__py_status_init(PyObject *m);

/* numpy dtype number for a cf_dtype (NPY_UINT8, ...). */
int cf__py_npy_type(cf_dtype t);

/* The cf_io behind a cogfeed.IO object (NULL, with TypeError set, if obj
 * is not one).  None gives the process-wide default io. */
cf_io *cf__py_io_get(PyObject *obj);

/* cogfeed.IO's keyword arguments (args: an empty tuple) as cf_io_options;
 * the path options point into *keep (a new reference, to drop once
 * cf_io_new has copied them).  0 with an exception set on error. */
int cf__py_io_options(PyObject *args, PyObject *kw, cf_io_options *o, PyObject **keep);
/* The sign= of those options (a new reference), or NULL: its owner keeps
 * it for as long as the io (or the loader's ios) may call it. */
PyObject *cf__py_io_sign(PyObject *keep);
/* Whether this thread is inside a sign= call (python/_cogfeed.c): code
 * that would join an io's reading threads must not run inline there. */
int cf__py_in_sign(void);

/* obj's items as a new tuple, or NULL with TypeError(msg) when obj is not
 * a sequence (PySequence_Fast, but never the caller's list itself).
 * Converting an item (__index__, __float__, __fspath__) runs Python code,
 * which may change or empty that list: a snapshot keeps every item alive
 * and in place until we are done. */
PyObject *cf__py_seq(PyObject *obj, const char *msg);

/* bands=None or a sequence of 1-based ints: *bands (PyMem_Malloc'd, NULL
 * for None) and *nb (0 for None).  0 with an exception set on error. */
int cf__py_parse_bands(PyObject *obj, int **bands, int *nb);

/* Option tables (python/_options.c).  Each keyword of kw (a dict the
 * caller owns, may be NULL) that names an option of tab is converted by
 * the option's type, checked with cf_option_check (ValueError with the C
 * message) and stored into the options struct at base; it is then
 * removed from kw, which is left with the hand-converted keywords.  0
 * with an exception set on error. */
int cf__py_take_options(PyObject *kw, const cf_option_info *tab, size_t n, void *base);
/* Add loader_options() and io_options() to the module. */
int cf__py_options_init(PyObject *module);

/* Loader bindings (python/_loader.c): add the Loader type to the module. */
int cf__py_loader_init(PyObject *module);

/* Geo bindings (python/_geo.c): cogfeed.CRS and grid_from_bounds. */
int cf__py_geo_init(PyObject *module);
/* A cogfeed.CRS owning crs (a reference is taken over); None for NULL. */
PyObject *cf__py_crs_new(cf_crs *crs);
/* Anything CRS() accepts (None: *out NULL) as a new cf_crs reference;
 * 0 with an exception set on error. */
int cf__py_crs_convert(PyObject *o, cf_crs **out);
/* A cogfeed.Grid (anything with crs, geotransform, width, height) as a
 * cf_grid whose CRS is *hold (a reference the caller frees). */
int cf__py_grid_parse(PyObject *o, cf_grid *g, cf_crs **hold);
/* Writer binding (python/_writer.c): add the _Writer type. */
int cf__py_writer_init(PyObject *module);
/* Upload binding (python/_upload.c): add the _Upload type. */
int cf__py_upload_init(PyObject *module);
/* STAC index binding (python/_stac.c): add the _StacIndex type. */
int cf__py_stac_init(PyObject *module);
/* Vector labels binding (python/_vlabels.c): add the _VLabels type. */
int cf__py_vlabels_init(PyObject *module);
/* The cf_vlabels of a _VLabels (borrowed); NULL with TypeError otherwise. */
cf_vlabels *cf__py_vlabels_get(PyObject *o);

#endif
