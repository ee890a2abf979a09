/*
 * _loader.c - cogfeed._cogfeed._Loader: the CPython face of cf_loader.
 * Arguments arrive already normalised by cogfeed/loader.py; this file only
 * converts them, releases the GIL around everything that waits, and hands
 * out numpy arrays that view the ring slots (their base is the _Loader, so
 * the memory outlives every view).
 */
#include "pymod.h"

#include <pthread.h>

typedef struct {
    PyObject_HEAD cf_loader *ld;
    int closed;           /* readers stopped; freed at dealloc */
    PyObject *sign;       /* io_options' sign=: the loader's ios call it */
    cf_loader_layout lay;
    size_t valid_bytes;   /* valid_mask: batch_size x valid_steps x P x P per slot */
    uint32_t valid_steps; /* valid_per_step: T planes per sample, else 1 */
    cf_batch held;        /* the batch the caller holds (slot -1: none) */
    PyObject **buffers;   /* per slot: caller objects kept alive (2 each) */
    Py_buffer *views;     /* their buffer views */
} LoaderObject;

static PyTypeObject LoaderType;

/* Strings of a sequence (or None) as a C array owned by `keep` (a list of
 * the bytes objects) and the array itself (PyMem). */
static const char **str_array(PyObject *seq, Py_ssize_t *n, PyObject *keep,
                              const char *what) {
    *n = 0;
    if (seq == Py_None) return NULL;
    PyObject *fast = cf__py_seq(seq, what);
    if (!fast) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    const char **out = PyMem_Calloc((size_t)(k ? k : 1), sizeof *out);
    if (!out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(fast, i), &b) ||
            PyList_Append(keep, b) < 0) {
            Py_XDECREF(b);
            PyMem_Free(out);
            Py_DECREF(fast);
            return NULL;
        }
        out[i] = PyBytes_AS_STRING(b);
        Py_DECREF(b);
    }
    Py_DECREF(fast);
    *n = k;
    return out;
}

/* A sequence of numbers (or None) as doubles (PyMem). */
static double *num_array(PyObject *seq, Py_ssize_t *n, const char *what) {
    *n = 0;
    if (seq == Py_None) return NULL;
    PyObject *fast = cf__py_seq(seq, what);
    if (!fast) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    double *out = PyMem_Calloc((size_t)(k ? k : 1), sizeof *out);
    if (!out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            PyMem_Free(out);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    *n = k;
    return out;
}

static int sampler_kind(const char *s, cf_sampler_kind *out) {
    if (!strcmp(s, "random")) *out = CF_SAMPLER_RANDOM;
    else if (!strcmp(s, "blocked")) *out = CF_SAMPLER_BLOCKED;
    else if (!strcmp(s, "tile-shuffle") || !strcmp(s, "tile_shuffle"))
        *out = CF_SAMPLER_TILE_SHUFFLE;
    else if (!strcmp(s, "grid")) *out = CF_SAMPLER_GRID;
    else return -1;
    return 0;
}

/* _Loader's keywords: every scalar and kernel of the C table
 * (cf_loader_option_table), converted and checked row by row
 * (python/_options.c), then these, converted by hand below. */
static char *loader_kwlist[] = {
    "images", "masks", "layers", "weights", "bands", "sampler", "flip", "rot90",
    "float32", "mean", "std", "io_options", "grid", "grid_crs", "grid_res",
    "layer_resampling", "scene_masks", "invalid_classes", "roi_xy", "roi_rings", "roi_crs",
    "roi_polys", "labels", "described", NULL};

/* The hand-converted keywords, and what they are converted into: owned
 * here until cf_loader_new has copied it (loader_args_free). */
typedef struct loader_args {
    PyObject *images, *masks, *layers, *weights, *bands, *mean, *std, *io_kw;
    PyObject *grid, *grid_crs, *layer_rs, *scene_masks, *classes, *roi_xy, *roi_rings,
        *roi_crs, *roi_polys, *labels, *described;
    const char *sampler;
    int flip, rot90, f32;
    double grid_res[2];
    PyObject *keep;    /* bytes objects the path arrays point into */
    PyObject *io_keep; /* io_options' paths */
    cf_io_options io_o;
    const char **img, **msk, **lay, **scm;
    Py_ssize_t nimg, nmask, nlay, nw, nmean, nstd, nscm, ncls;
    double *w, *mn, *sd, *cls, *rxy;
    Py_ssize_t nrxy, nrr, nrp;
    uint32_t *rr, *rp;
    cf_crs *rcrs;
    int *bi, nb;
    float *mf, *sf;
    cf_grid tgrid;
    cf_crs *grid_hold, *gcrs;
    cf_resampling *lrs;
    cf_input_desc *desc;
    cf_crs **desc_crs;  /* each description's, held until cf_loader_new */
    Py_ssize_t ndesc;
} loader_args;

static void loader_args_free(loader_args *a) {
    PyMem_Free(a->img);
    PyMem_Free(a->msk);
    PyMem_Free(a->lay);
    PyMem_Free(a->scm);
    PyMem_Free(a->cls);
    PyMem_Free(a->rxy);
    PyMem_Free(a->rr);
    PyMem_Free(a->rp);
    cf_crs_free(a->rcrs);
    PyMem_Free(a->w);
    PyMem_Free(a->bi);
    PyMem_Free(a->mn);
    PyMem_Free(a->sd);
    PyMem_Free(a->mf);
    PyMem_Free(a->sf);
    PyMem_Free(a->lrs);
    cf_crs_free(a->grid_hold);
    cf_crs_free(a->gcrs);
    for (Py_ssize_t i = 0; a->desc_crs && i < a->ndesc; i++) cf_crs_free(a->desc_crs[i]);
    PyMem_Free(a->desc_crs);
    PyMem_Free(a->desc);
    Py_XDECREF(a->keep);
    Py_XDECREF(a->io_keep);
}

/* The keywords: the table's into o (its defaults for those not given,
 * ranges checked before narrowing, so a negative size cannot wrap), the
 * rest into a; the sampler and io_options converted. */
static int parse_keywords(PyObject *args, PyObject *kw, loader_args *a, cf_loader_options *o) {
    size_t n;
    const cf_option_info *tab = cf_loader_option_table(&n);
    PyObject *rest = kw ? PyDict_Copy(kw) : NULL;
    if (kw && !rest) return 0;
    /* Borrowed from rest, whose values kw holds too. */
    int ok = cf__py_take_options(rest, tab, n, o) &&
             PyArg_ParseTupleAndKeywords(args, rest, "O|$OOOOspppOOOOO(dd)OOOOOOOOO",
                                         loader_kwlist, &a->images, &a->masks, &a->layers,
                                         &a->weights, &a->bands, &a->sampler, &a->flip,
                                         &a->rot90, &a->f32, &a->mean, &a->std, &a->io_kw,
                                         &a->grid, &a->grid_crs, &a->grid_res[0],
                                         &a->grid_res[1], &a->layer_rs, &a->scene_masks,
                                         &a->classes, &a->roi_xy, &a->roi_rings, &a->roi_crs,
                                         &a->roi_polys, &a->labels, &a->described);
    Py_XDECREF(rest);
    if (!ok) return 0;
    if (a->io_kw != Py_None && !PyDict_Check(a->io_kw)) {
        PyErr_SetString(PyExc_TypeError,
                        "io_options must be a dict of cogfeed.IO keyword arguments");
        return 0;
    }
    if (sampler_kind(a->sampler, &o->sampler) < 0) {
        PyErr_Format(PyExc_ValueError,
                     "sampler must be 'random', 'blocked', 'tile-shuffle' or "
                     "'grid', not '%s'",
                     a->sampler);
        return 0;
    }
    o->augment = (a->flip ? CF_AUG_FLIP : 0) | (a->rot90 ? CF_AUG_ROT90 : 0);
    o->out_dtype = a->f32 ? CF_DT_F32 : CF_DT_UNKNOWN;
    if (a->io_kw != Py_None) {
        PyObject *none = PyTuple_New(0);
        ok = none && cf__py_io_options(none, a->io_kw, &a->io_o, &a->io_keep);
        Py_XDECREF(none);
        if (!ok) return 0;
        o->io_options = &a->io_o;
    }
    return 1;
}

/* images, masks, layers, weights and bands, their counts checked against
 * time_steps and nlayers. */
static int convert_inputs(loader_args *a, cf_loader_options *o) {
    a->img = str_array(a->images, &a->nimg, a->keep, "images must be a sequence of paths");
    if (!a->img) return 0;
    if (a->masks != Py_None &&
        !(a->msk = str_array(a->masks, &a->nmask, a->keep, "masks must be a sequence")))
        return 0;
    if (a->layers != Py_None &&
        !(a->lay = str_array(a->layers, &a->nlay, a->keep, "layers must be a sequence")))
        return 0;
    if (a->weights != Py_None &&
        !(a->w = num_array(a->weights, &a->nw, "weights must be a sequence")))
        return 0;
    if (a->scene_masks != Py_None &&
        !(a->scm = str_array(a->scene_masks, &a->nscm, a->keep,
                             "scene_masks must be a sequence of paths")))
        return 0;
    if (a->classes != Py_None &&
        !(a->cls = num_array(a->classes, &a->ncls, "invalid_classes must be a sequence")))
        return 0;
    if (!cf__py_parse_bands(a->bands, &a->bi, &a->nb)) return 0;
    if (a->nimg == 0 || a->nimg % o->time_steps) {
        PyErr_SetString(PyExc_ValueError, "images: need a positive multiple of time_steps");
        return 0;
    }
    size_t nfiles = (size_t)(a->nimg / o->time_steps);
    if (a->msk && (size_t)a->nmask != nfiles) {
        PyErr_Format(PyExc_ValueError, "%zd masks for %zu image files", a->nmask, nfiles);
        return 0;
    }
    if (a->scm && a->nscm != a->nimg) {
        PyErr_Format(PyExc_ValueError, "scene_masks: %zd paths for %zd images (one per image)",
                     a->nscm, a->nimg);
        return 0;
    }
    if (a->ncls > 256) {
        PyErr_Format(PyExc_ValueError, "invalid_classes: %zd values (at most 256)", a->ncls);
        return 0;
    }
    o->scene_masks = a->scm;
    o->invalid_classes = a->cls;
    o->ninvalid_classes = (uint32_t)a->ncls;
    if (a->w && (size_t)a->nw != nfiles) {
        PyErr_Format(PyExc_ValueError, "weights: %zd values for %zu image files", a->nw,
                     nfiles);
        return 0;
    }
    /* nlayers per image file, or (layers_per_step) per output step of it:
     * one per step_scenes scenes of a mosaic, else per scene (cogfeed.h) */
    size_t per = (size_t)o->nlayers;
    if (o->layers_per_step && o->time_steps > 0) {
        size_t k = !o->mosaic ? 1 : o->step_scenes ? o->step_scenes : (size_t)o->time_steps;
        per *= (size_t)o->time_steps / k;
    }
    if ((size_t)a->nlay != nfiles * per) {
        PyErr_Format(PyExc_ValueError,
                     "layers: %zd paths for %zu image files of %zu layers each", a->nlay,
                     nfiles, per);
        return 0;
    }
    o->images = a->img;
    o->nfiles = nfiles;
    o->masks = a->msk;
    o->layers = a->lay;
    o->weights = a->w;
    o->bands = a->bi;
    o->nbands = a->nb;
    return 1;
}

/* A dtype by its NumPy name (cf_dtype_name's); CF_DT_UNKNOWN if none. */
static cf_dtype dtype_named(const char *s) {
    for (int t = CF_DT_U8; t <= CF_DT_CF64; t++)
        if (!strcmp(cf_dtype_name((cf_dtype)t), s)) return (cf_dtype)t;
    return CF_DT_UNKNOWN;
}

/* described: None, or one entry per path (images, masks, layers, scene
 * masks, in that order): None (not described) or (Grid, dtype name,
 * bands).  The C loader checks the count against its paths. */
static int convert_described(loader_args *a, cf_loader_options *o) {
    if (a->described == Py_None) return 1;
    PyObject *fast = cf__py_seq(a->described, "described must be a sequence");
    if (!fast) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    a->desc = PyMem_Calloc((size_t)(n ? n : 1), sizeof *a->desc);
    a->desc_crs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *a->desc_crs);
    int ok = a->desc && a->desc_crs;
    if (!ok) PyErr_NoMemory();
    else a->ndesc = n;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(fast, i), *grid;
        const char *dt;
        unsigned long count;
        if (e == Py_None) continue;
        ok = PyTuple_Check(e) && PyArg_ParseTuple(e, "Osk", &grid, &dt, &count);
        if (!ok && !PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "described[%zd]: None or (Grid, dtype, bands)", i);
        if (ok && !(ok = cf__py_grid_parse(grid, &a->desc[i].grid, &a->desc_crs[i])))
            break;
        a->desc[i].dtype = ok ? dtype_named(dt) : CF_DT_UNKNOWN;
        if (ok && (a->desc[i].dtype == CF_DT_UNKNOWN || count < 1 || count > CF_MAX_BANDS)) {
            PyErr_Format(PyExc_ValueError, "described[%zd]: %lu bands of %s: not a dtype "
                         "and band count a file can have", i, count, dt);
            ok = 0;
        }
        if (ok) a->desc[i].count = (uint32_t)count;
    }
    Py_DECREF(fast);
    o->described = a->desc;
    o->ndescribed = (size_t)a->ndesc;
    return ok;
}

/* mean and std, as floats; an empty list is a length (0 channels never
 * match), not "unset". */
static int convert_norm(loader_args *a, cf_loader_options *o) {
    if (a->mean != Py_None &&
        !(a->mn = num_array(a->mean, &a->nmean, "mean must be a sequence")))
        return 0;
    if (a->std != Py_None && !(a->sd = num_array(a->std, &a->nstd, "std must be a sequence")))
        return 0;
    if (a->nmean > CF_MAX_BANDS || a->nstd > CF_MAX_BANDS) {
        PyErr_SetString(PyExc_ValueError, "mean/std: too many values");
        return 0;
    }
    if (a->mn) a->mf = PyMem_Calloc((size_t)(a->nmean ? a->nmean : 1), sizeof *a->mf);
    if (a->sd) a->sf = PyMem_Calloc((size_t)(a->nstd ? a->nstd : 1), sizeof *a->sf);
    if ((a->mn && !a->mf) || (a->sd && !a->sf)) {
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t i = 0; i < a->nmean; i++) a->mf[i] = (float)a->mn[i];
    for (Py_ssize_t i = 0; i < a->nstd; i++) a->sf[i] = (float)a->sd[i];
    o->mean = a->mn ? a->mf : NULL;
    o->std = a->sd ? a->sf : NULL;
    o->nmean = (uint32_t)a->nmean;
    o->nstd = (uint32_t)a->nstd;
    if ((a->mn && !a->nmean) || (a->sd && !a->nstd)) {
        PyErr_SetString(PyExc_ValueError, "mean and std need one value per output channel");
        return 0;
    }
    return 1;
}

/* A sequence of counts as uint32 (PyMem); NULL with an exception. */
static uint32_t *count_array(PyObject *seq, Py_ssize_t *n, const char *what) {
    double *v = num_array(seq, n, what);
    if (!v) return NULL;
    uint32_t *out = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof *out);
    for (Py_ssize_t i = 0; out && i < *n; i++) {
        if (!(v[i] >= 0 && v[i] <= (double)UINT32_MAX && v[i] == (uint32_t)v[i])) {
            PyErr_Format(PyExc_ValueError, "%s", what);
            PyMem_Free(out);
            PyMem_Free(v);
            return NULL;
        }
        out[i] = (uint32_t)v[i];
    }
    PyMem_Free(v);
    if (!out) PyErr_NoMemory();
    return out;
}

/* roi_xy (x, y, x, y, ...), roi_rings (vertices per ring), roi_polys
 * (rings per polygon, or None), roi_crs. */
static int convert_roi(loader_args *a, cf_loader_options *o) {
    if (a->roi_xy == Py_None && a->roi_rings == Py_None) return 1;
    if (!(a->rxy = num_array(a->roi_xy, &a->nrxy, "roi_xy must be a sequence of numbers")) ||
        !(a->rr = count_array(a->roi_rings, &a->nrr, "roi_rings: counts of vertices")))
        return 0;
    if (a->roi_polys != Py_None &&
        !(a->rp = count_array(a->roi_polys, &a->nrp, "roi_polys: counts of rings")))
        return 0;
    uint64_t total = 0;
    for (Py_ssize_t i = 0; i < a->nrr; i++) total += a->rr[i];
    if (!a->nrr || a->nrr > UINT32_MAX || 2 * total != (uint64_t)a->nrxy) {
        PyErr_SetString(PyExc_ValueError, "roi: roi_xy must hold 2 numbers per vertex of "
                                          "roi_rings");
        return 0;
    }
    if (a->roi_crs != Py_None && !cf__py_crs_convert(a->roi_crs, &a->rcrs)) return 0;
    o->roi_xy = a->rxy;
    o->roi_ring_len = a->rr;
    o->roi_nrings = (uint32_t)a->nrr;
    o->roi_poly_rings = a->rp;
    o->roi_npolys = (uint32_t)a->nrp;
    o->roi_crs = a->rcrs;
    return 1;
}

/* layer_resampling: one kernel name per layer. */
static int convert_layer_kernels(loader_args *a, cf_loader_options *o) {
    Py_ssize_t n = 0;
    cf_error e;
    PyObject *names = PyList_New(0);
    const char **nm = names ? str_array(a->layer_rs, &n, names, "layer_resampling must be a "
                                        "sequence of names") : NULL;
    if (nm && n != o->nlayers) {
        PyErr_Format(PyExc_ValueError, "layer_resampling: %zd names for %d layers", n,
                     o->nlayers);
    } else if (nm) {
        a->lrs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *a->lrs);
        if (!a->lrs) PyErr_NoMemory();
        for (Py_ssize_t k = 0; a->lrs && k < n; k++)
            if (cf_resampling_from_name(nm[k], &a->lrs[k], &e) != CF_OK) {
                PyErr_SetString(PyExc_ValueError, e.msg);
                PyMem_Free(a->lrs);
                a->lrs = NULL;
            }
    }
    PyMem_Free(nm);
    Py_XDECREF(names);
    o->layer_resampling = a->lrs;
    return a->lrs != NULL;
}

/* The target grid (a Grid; or a CRS and resolution) and the layers'
 * kernels. */
static int convert_grid(loader_args *a, cf_loader_options *o) {
    if (a->grid != Py_None) {
        if (!cf__py_grid_parse(a->grid, &a->tgrid, &a->grid_hold)) return 0;
        o->grid = &a->tgrid;
    }
    if (!convert_roi(a, o)) return 0;
    /* borrowed: the Python Loader keeps the VectorLabels, and the C
     * loader takes a reference of its own */
    if (a->labels != Py_None && !(o->labels = cf__py_vlabels_get(a->labels))) return 0;
    if (a->grid_crs != Py_None) {
        if (!cf__py_crs_convert(a->grid_crs, &a->gcrs)) return 0;
        o->grid_crs = a->gcrs;
        o->grid_res[0] = a->grid_res[0];
        o->grid_res[1] = a->grid_res[1];
    }
    return a->layer_rs == Py_None || convert_layer_kernels(a, o);
}

/* cf_loader_new (the GIL released: it opens every file), and the slot
 * bookkeeping. */
static int create(LoaderObject *self, const cf_loader_options *o) {
    cf_error e;
    cf_status st;
    cf_loader *ld = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cf_loader_new(o, &ld, &e);
    Py_END_ALLOW_THREADS
    if (st != CF_OK) {
        cf__py_raise(st, &e);
        return 0;
    }
    cf_loader_get_layout(ld, &self->lay);
    self->valid_steps = o->valid_per_step ? self->lay.time_steps : 1;
    self->valid_bytes = o->valid_mask ? (size_t)self->lay.batch_size * self->valid_steps *
                                            self->lay.patch_size * self->lay.patch_size
                                      : 0;
    self->ld = ld;
    self->held.slot = -1;
    self->buffers = PyMem_Calloc((size_t)self->lay.prefetch * 2, sizeof *self->buffers);
    self->views = PyMem_Calloc((size_t)self->lay.prefetch * 2, sizeof *self->views);
    if (!self->buffers || !self->views) {
        PyErr_NoMemory();
        return 0;
    }
    return 1;
}

static int Loader_init(LoaderObject *self, PyObject *args, PyObject *kw) {
    loader_args a = {.masks = Py_None, .layers = Py_None, .weights = Py_None,
                     .bands = Py_None, .mean = Py_None, .std = Py_None, .io_kw = Py_None,
                     .grid = Py_None, .grid_crs = Py_None, .layer_rs = Py_None,
                     .scene_masks = Py_None, .classes = Py_None, .roi_xy = Py_None,
                     .roi_rings = Py_None, .roi_crs = Py_None, .roi_polys = Py_None,
                     .labels = Py_None, .described = Py_None, .sampler = "random"};
    cf_loader_options o;
    cf_loader_options_init(&o);
    if (self->ld) {
        PyErr_SetString(PyExc_RuntimeError, "_Loader already initialised");
        return -1;
    }
    int ok = parse_keywords(args, kw, &a, &o) && (a.keep = PyList_New(0)) != NULL &&
             convert_inputs(&a, &o) && convert_norm(&a, &o) && convert_grid(&a, &o) &&
             convert_described(&a, &o) &&
             create(self, &o);
    if (ok) self->sign = cf__py_io_sign(a.io_keep);
    loader_args_free(&a);
    return ok ? 0 : -1;
}

static void release_held(LoaderObject *self) {
    if (self->ld && self->held.slot >= 0) {
        cf_loader_release(self->ld, &self->held);
        self->held.slot = -1;
    }
}

static void drop_views(PyObject **buffers, Py_buffer *views, int n) {
    for (int i = 0; buffers && i < n; i++) {
        if (buffers[i]) {
            PyBuffer_Release(&views[i]);
            Py_CLEAR(buffers[i]);
        }
    }
}

static void drop_buffers(LoaderObject *self) {
    drop_views(self->buffers, self->views, self->lay.prefetch * 2);
}

/* A loader freed on one of the io's reading threads: the garbage
 * collector can run inside a sign= call (py_sign, python/_cogfeed.c) and
 * collect a Loader whose reader made that call, and freeing it there
 * would join the very thread that frees it.  Its loader, ring buffers
 * and signing function then go to a thread of their own, which frees
 * them once the readers have stopped. */
typedef struct reaper {
    cf_loader *ld;
    PyObject **buffers;
    Py_buffer *views;
    int n;
    PyObject *sign;
} reaper;

static void *reap(void *arg) {
    reaper *r = arg;
    cf_loader_free(r->ld);
    PyGILState_STATE g = PyGILState_Ensure();
    drop_views(r->buffers, r->views, r->n);
    Py_XDECREF(r->sign);
    PyMem_Free(r->buffers);
    PyMem_Free(r->views);
    PyGILState_Release(g);
    PyMem_RawFree(r);
    return NULL;
}

/* Whether self's loader is handed to a reaper (1: self lets go of it). */
static int reaped(LoaderObject *self) {
    if (!self->ld || !cf__py_in_sign()) return 0;
    reaper *r = PyMem_RawMalloc(sizeof *r);
    pthread_attr_t at;
    pthread_t th;
    int started = 0;
    if (r && pthread_attr_init(&at) == 0) {
        *r = (reaper){self->ld, self->buffers, self->views, self->lay.prefetch * 2, self->sign};
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&th, &at, reap, r) == 0;
        pthread_attr_destroy(&at);
    }
    if (!started) PyMem_RawFree(r);
    /* self lets go of all of it: the reaper's now, or, when no thread
     * could be had, leaked with its readers still running (their ring
     * buffers and sign= with them) rather than joined from within. */
    self->ld = NULL;
    self->buffers = NULL;
    self->views = NULL;
    self->sign = NULL;
    return 1;
}

static void Loader_free_impl(LoaderObject *self) {
    if (reaped(self)) return;
    if (self->ld) {
        cf_loader *ld = self->ld;
        self->ld = NULL;
        /* Joins the reader threads (which take the GIL only to call
         * sign=: it is released here). */
        Py_BEGIN_ALLOW_THREADS
        cf_loader_free(ld);
        Py_END_ALLOW_THREADS
    }
    drop_buffers(self);
}

static void Loader_dealloc(LoaderObject *self) {
    Loader_free_impl(self);
    Py_CLEAR(self->sign); /* after the readers: they may call it */
    PyMem_Free(self->buffers);
    PyMem_Free(self->views);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_open(LoaderObject *self) {
    if (!self->ld || self->closed) {
        PyErr_SetString(PyExc_ValueError, "Loader is closed");
        return -1;
    }
    return 0;
}

/* Stops the readers now, cancelling their requests in flight (no wait for
 * round trips or a hung server), and wakes a next() waiting in another
 * thread; the ring and the files are freed with the object, i.e. once no
 * array views the ring any more (each holds a reference), so a batch kept
 * past close() stays valid. */
static PyObject *Loader_close(LoaderObject *self, PyObject *unused) {
    if (!self->ld || self->closed) Py_RETURN_NONE;
    self->closed = 1; /* before the GIL goes: a waiting next() sees it */
    /* Inside a sign= call (a finalizer run by the garbage collector on a
     * reading thread): stopping the readers would join this thread; they
     * stop when the object is freed (reaped). */
    if (cf__py_in_sign()) Py_RETURN_NONE;
    cf_loader *ld = self->ld;
    Py_BEGIN_ALLOW_THREADS
    cf_loader_close(ld);
    Py_END_ALLOW_THREADS
    /* Only now, with the readers stopped: released first, the held slot
     * was free for a reader to fill with a later batch while the user's
     * arrays still viewed it (the batch taken before close() came back
     * with another window's pixels). */
    release_held(self);
    Py_RETURN_NONE;
}

static PyObject *Loader_layout(LoaderObject *self, PyObject *unused) {
    if (check_open(self)) return NULL;
    const cf_loader_layout *L = &self->lay;
    return Py_BuildValue(
        "{sIsIsIsIsssOsssnsnsisKsKsOsn}", "batch_size", L->batch_size,
        "patch_size", L->patch_size, "time_steps", L->time_steps, "channels",
        L->channels, "dtype", cf_dtype_name(L->dtype), "has_mask",
        L->has_mask ? Py_True : Py_False, "mask_dtype",
        L->has_mask ? cf_dtype_name(L->mask_dtype) : "none", "image_bytes",
        (Py_ssize_t)L->image_bytes, "mask_bytes", (Py_ssize_t)L->mask_bytes,
        "prefetch", L->prefetch, "samples", (unsigned long long)L->samples,
        "batches", (unsigned long long)L->batches, "has_valid",
        self->valid_bytes ? Py_True : Py_False, "valid_bytes", (Py_ssize_t)self->valid_bytes);
}

/* A numpy array over loader memory; its base is the _Loader, so the
 * memory stays valid as long as the array lives (the contents only until
 * the next batch is taken). */
static PyObject *view(LoaderObject *self, int nd, npy_intp *dims,
                      cf_dtype dt, void *data) {
    PyObject *a = PyArray_SimpleNewFromData(nd, dims, cf__py_npy_type(dt),
                                            data);
    if (!a) return NULL;
    Py_INCREF(self);
    if (PyArray_SetBaseObject((PyArrayObject *)a, (PyObject *)self) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

/* set_buffers(slot, image, mask=None): caller memory (any writable,
 * C-contiguous buffer, e.g. a pinned torch tensor's numpy view). */
static PyObject *Loader_set_buffers(LoaderObject *self, PyObject *args) {
    int slot;
    PyObject *img, *msk = Py_None;
    if (!PyArg_ParseTuple(args, "iO|O", &slot, &img, &msk) || check_open(self))
        return NULL;
    if (slot < 0 || slot >= self->lay.prefetch) {
        PyErr_SetString(PyExc_IndexError, "slot out of range");
        return NULL;
    }
    Py_buffer vi, vm;
    memset(&vm, 0, sizeof vm);
    if (PyObject_GetBuffer(img, &vi, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    int have_mask = self->lay.has_mask && msk != Py_None;
    if (have_mask &&
        PyObject_GetBuffer(msk, &vm, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&vi);
        return NULL;
    }
    if ((size_t)vi.len < self->lay.image_bytes ||
        (self->lay.has_mask && (!have_mask ||
                                (size_t)vm.len < self->lay.mask_bytes))) {
        PyBuffer_Release(&vi);
        if (have_mask) PyBuffer_Release(&vm);
        PyErr_Format(PyExc_ValueError,
                     "buffers too small: image needs %zu bytes, mask %zu",
                     self->lay.image_bytes, self->lay.mask_bytes);
        return NULL;
    }
    cf_error e;
    cf_status st = cf_loader_set_buffers(self->ld, slot, vi.buf,
                                         have_mask ? vm.buf : NULL, &e);
    if (st != CF_OK) {
        PyBuffer_Release(&vi);
        if (have_mask) PyBuffer_Release(&vm);
        return cf__py_raise(st, &e);
    }
    for (int k = 0; k < 2; k++) {
        int i = slot * 2 + k;
        if (self->buffers[i]) {
            PyBuffer_Release(&self->views[i]);
            Py_CLEAR(self->buffers[i]);
        }
    }
    self->views[slot * 2] = vi;
    self->buffers[slot * 2] = img;
    Py_INCREF(img);
    if (have_mask) {
        self->views[slot * 2 + 1] = vm;
        self->buffers[slot * 2 + 1] = msk;
        Py_INCREF(msk);
    }
    Py_RETURN_NONE;
}

static PyObject *window_tuple(const cf_window *w) {
    return Py_BuildValue("(ILLII)", w->file, (long long)w->x, (long long)w->y,
                         w->w, w->h);
}

/* next() -> (batch_index, image, mask or None, windows, augs, valid or
 * None) or None at the end of the epoch; image is (n, T, C, P, P), mask
 * (n, 1, P, P), valid (n, 1, P, P) or (valid_per_step) (n, T, P, P).
 * Gives back the previously taken batch first. */
static PyObject *Loader_next(LoaderObject *self, PyObject *unused) {
    if (check_open(self)) return NULL;
    release_held(self);
    cf_batch b;
    cf_error e;
    cf_status st;
    /* Wait in short slices so that Ctrl-C works during a data stall. */
    for (;;) {
        int ready;
        Py_BEGIN_ALLOW_THREADS
        ready = cf_loader_wait(self->ld, 0.1);
        Py_END_ALLOW_THREADS
        if (check_open(self)) return NULL; /* closed by another thread */
        if (ready) break;
        if (PyErr_CheckSignals() < 0) return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = cf_loader_next(self->ld, &b, &e);
    Py_END_ALLOW_THREADS
    if (check_open(self)) return NULL;
    if (st == CF_E_END) Py_RETURN_NONE;
    if (st != CF_OK) return cf__py_raise(st, &e);
    self->held = b;
    PyObject *wins = PyList_New(b.n), *augs = PyList_New(b.n);
    if (!wins || !augs) {
        Py_XDECREF(wins);
        Py_XDECREF(augs);
        return NULL;
    }
    for (uint32_t i = 0; i < b.n; i++) {
        PyObject *t = window_tuple(&b.windows[i]);
        PyObject *a = PyLong_FromUnsignedLong(b.windows[i].aug);
        if (!t || !a) {
            Py_XDECREF(t);
            Py_XDECREF(a);
            Py_DECREF(wins);
            Py_DECREF(augs);
            return NULL;
        }
        PyList_SET_ITEM(wins, i, t);
        PyList_SET_ITEM(augs, i, a);
    }
    const cf_loader_layout *L = &self->lay;
    npy_intp dims[5] = {b.n, L->time_steps, L->channels, L->patch_size,
                        L->patch_size};
    PyObject *img = view(self, 5, dims, L->dtype, b.image);
    npy_intp md[4] = {b.n, 1, L->patch_size, L->patch_size};
    PyObject *msk = Py_None, *val = Py_None;
    if (img && L->has_mask) msk = view(self, 4, md, L->mask_dtype, b.mask);
    else Py_INCREF(msk);
    const uint8_t *valid = cf_loader_batch_valid(self->ld, &b);
    npy_intp vd[4] = {b.n, self->valid_steps, L->patch_size, L->patch_size};
    if (img && msk && valid) val = view(self, 4, vd, CF_DT_U8, (void *)valid);
    else Py_INCREF(val);
    if (!img || !msk || !val) {
        Py_XDECREF(img);
        Py_XDECREF(msk);
        Py_XDECREF(val);
        Py_DECREF(wins);
        Py_DECREF(augs);
        return NULL;
    }
    return Py_BuildValue("(KNNNNN)", (unsigned long long)b.index, img, msk,
                         wins, augs, val);
}

static PyObject *Loader_release(LoaderObject *self, PyObject *unused) {
    release_held(self);
    Py_RETURN_NONE;
}

static PyObject *Loader_set_epoch(LoaderObject *self, PyObject *args) {
    /* Signed on purpose: "K" would wrap -1 to 2^64 - 1 without a word. */
    long long epoch, batch = 0;
    if (!PyArg_ParseTuple(args, "L|L", &epoch, &batch) || check_open(self))
        return NULL;
    if (epoch < 0 || batch < 0) {
        PyErr_Format(PyExc_ValueError, "set_epoch: %s %lld is negative",
                     epoch < 0 ? "epoch" : "batch", epoch < 0 ? epoch : batch);
        return NULL;
    }
    release_held(self);
    cf_error e;
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_loader_set_epoch(self->ld, (uint64_t)epoch, (uint64_t)batch, &e);
    Py_END_ALLOW_THREADS
    if (st != CF_OK) return cf__py_raise(st, &e);
    Py_RETURN_NONE;
}

static PyObject *Loader_position(LoaderObject *self, PyObject *unused) {
    if (check_open(self)) return NULL;
    uint64_t ep, nb;
    cf_loader_position(self->ld, &ep, &nb);
    return Py_BuildValue("(KK)", (unsigned long long)ep,
                         (unsigned long long)nb);
}

/* window(j) -> ((file, x, y, w, h), aug) of this rank's sample j. */
static PyObject *Loader_window(LoaderObject *self, PyObject *args) {
    unsigned long long j;
    if (!PyArg_ParseTuple(args, "K", &j) || check_open(self)) return NULL;
    cf_window w;
    cf_error e;
    cf_status st = cf_loader_window(self->ld, j, &w, &e);
    if (st != CF_OK) {
        PyErr_SetString(PyExc_IndexError, e.msg);
        return NULL;
    }
    return Py_BuildValue("(NI)", window_tuple(&w), w.aug);
}

/* window_grid(file, x, y, w, h) -> (crs, geotransform, w, h) of that
 * window of the file's target grid, or None when it has none. */
static PyObject *Loader_window_grid(LoaderObject *self, PyObject *args) {
    cf_window w;
    memset(&w, 0, sizeof w);
    long long x, y;
    if (!PyArg_ParseTuple(args, "ILLII", &w.file, &x, &y, &w.w, &w.h) || check_open(self))
        return NULL;
    w.x = x;
    w.y = y;
    cf_grid g;
    cf_error e;
    cf_status st = cf_loader_window_grid(self->ld, &w, &g, &e);
    if (st == CF_E_STATE) Py_RETURN_NONE;
    if (st != CF_OK) return cf__py_raise(st, &e);
    PyObject *crs = g.crs ? cf__py_crs_new(cf_crs_ref(g.crs)) : (Py_INCREF(Py_None), Py_None);
    if (!crs) return NULL;
    const double *t = g.transform;
    return Py_BuildValue("(N(dddddd)II)", crs, t[0], t[1], t[2], t[3], t[4], t[5], g.width,
                         g.height);
}

static PyObject *Loader_stats(LoaderObject *self, PyObject *unused) {
    if (check_open(self)) return NULL;
    cf_loader_stats s;
    cf_loader_get_stats(self->ld, &s);
    uint64_t lookups = s.cache_hits + s.cache_misses, left_out, redrawn;
    cf_loader_empty(self->ld, &left_out, &redrawn);
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsisisisKsKsdsdsdsdsdsKsKsKsKsKsKsdsKsKsKsK}", "samples",
        (unsigned long long)s.samples, "batches",
        (unsigned long long)s.batches, "skipped",
        (unsigned long long)s.skipped, "bytes_fetched",
        (unsigned long long)s.bytes_fetched, "bytes_decoded",
        (unsigned long long)s.bytes_decoded, "bytes_delivered",
        (unsigned long long)s.bytes_delivered, "requests",
        (unsigned long long)s.requests, "retries",
        (unsigned long long)s.retries, "io_inflight", s.io_inflight,
        "concurrency", s.concurrency, "reading", s.reading, "cache_hits",
        (unsigned long long)s.cache_hits, "cache_misses",
        (unsigned long long)s.cache_misses, "cache_hit_rate",
        lookups ? (double)s.cache_hits / (double)lookups : 0.0, "wait_s",
        s.wait_s, "read_busy_s", s.read_busy_s, "convert_busy_s",
        s.convert_busy_s, "elapsed_s", s.elapsed_s, "hedges",
        (unsigned long long)s.hedges, "hedge_wins",
        (unsigned long long)s.hedge_wins, "memory_budget",
        (unsigned long long)s.memory_budget, "memory_used",
        (unsigned long long)s.memory_used, "memory_peak",
        (unsigned long long)s.memory_peak, "chunk_bytes_decoded",
        (unsigned long long)s.chunk_bytes_decoded, "decoded_per_read",
        s.bytes_decoded ? (double)s.chunk_bytes_decoded / (double)s.bytes_decoded : 0.0,
        "empty_left_out", (unsigned long long)left_out, "empty_redrawn",
        (unsigned long long)redrawn, "read_rounds", (unsigned long long)s.read_rounds,
        "samples_read", (unsigned long long)s.samples_read);
}

static PyObject *Loader_shard_batches(LoaderObject *self, PyObject *args) {
    int rank, world;
    if (!PyArg_ParseTuple(args, "ii", &rank, &world)) return NULL;
    if (check_open(self)) return NULL;
    uint64_t n = 0;
    cf_error err = {0};
    cf_status st = cf_loader_shard_batches(self->ld, rank, world, &n, &err);
    if (st != CF_OK) return cf__py_raise(st, &err);
    return PyLong_FromUnsignedLongLong(n);
}

static PyMethodDef Loader_methods[] = {
    {"shard_batches", (PyCFunction)Loader_shard_batches, METH_VARARGS,
     "shard_batches(rank, world_size) -> int: batches per epoch of that shard."},
    {"layout", (PyCFunction)Loader_layout, METH_NOARGS,
     "layout() -> dict: shapes, dtypes and sizes (fixed for the loader)."},
    {"set_buffers", (PyCFunction)Loader_set_buffers, METH_VARARGS,
     "set_buffers(slot, image, mask=None): use caller memory for a slot."},
    {"next", (PyCFunction)Loader_next, METH_NOARGS,
     "next() -> (index, image, mask, windows, augs, valid) or None at epoch end."},
    {"release", (PyCFunction)Loader_release, METH_NOARGS,
     "release(): give the held batch back."},
    {"set_epoch", (PyCFunction)Loader_set_epoch, METH_VARARGS,
     "set_epoch(epoch, batch=0): start (or resume) an epoch."},
    {"position", (PyCFunction)Loader_position, METH_NOARGS,
     "position() -> (epoch, next_batch)."},
    {"window", (PyCFunction)Loader_window, METH_VARARGS,
     "window(j) -> ((file, x, y, w, h), aug) of this rank's sample j."},
    {"window_grid", (PyCFunction)Loader_window_grid, METH_VARARGS,
     "window_grid(file, x, y, w, h) -> (crs, geotransform, w, h) or None."},
    {"stats", (PyCFunction)Loader_stats, METH_NOARGS,
     "stats() -> dict of counters and busy times."},
    {"close", (PyCFunction)Loader_close, METH_NOARGS,
     "close(): stop the readers (memory goes with the last view)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cogfeed._cogfeed._Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_dealloc = (destructor)Loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Low-level loader; use cogfeed.Loader.",
    .tp_methods = Loader_methods,
    .tp_init = (initproc)Loader_init,
    .tp_new = PyType_GenericNew,
};

int cf__py_loader_init(PyObject *module) {
    if (PyType_Ready(&LoaderType) < 0) return -1;
    Py_INCREF(&LoaderType);
    if (PyModule_AddObject(module, "_Loader", (PyObject *)&LoaderType) < 0) {
        Py_DECREF(&LoaderType);
        return -1;
    }
    return 0;
}
