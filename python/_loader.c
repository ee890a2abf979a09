/*
 * _loader.c - cogfeed._cogfeed._Loader: the CPython face of cf_loader.
 * Arguments arrive already normalised by cogfeed/loader.py; this file only
 * converts them, releases the GIL around everything that waits, and hands
 * out numpy arrays that view the ring slots (their base is the _Loader, so
 * the memory outlives every view).
 */
#include "pymod.h"
#include "pipeline/loader_options.h"

typedef struct {
    PyObject_HEAD cf_loader *ld;
    int closed;           /* readers stopped; freed at dealloc */
    cf_loader_layout lay;
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
    PyObject *fast = cf_py_seq(seq, what);
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
    PyObject *fast = cf_py_seq(seq, what);
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

/* The keywords: the inputs and other hand-converted options, then every
 * scalar of the one table (lib/pipeline/loader_options.h), which also
 * gives their parse formats and defaults. */
static char *loader_kwlist[] = {
    "images", "masks", "layers", "weights", "bands", "sampler", "flip", "rot90",
    "float32", "mean", "std", "io_options", "grid", "grid_crs", "grid_res",
    "layer_resampling",
#define X(f, ...) #f,
    CF__LOADER_SCALARS(X) CF__LOADER_KERNELS(X)
#undef X
    NULL};

static int Loader_init(LoaderObject *self, PyObject *args, PyObject *kw) {
    PyObject *images, *masks = Py_None, *layers = Py_None, *weights = Py_None,
                      *bands = Py_None, *mean = Py_None, *std = Py_None,
                      *io_kw = Py_None;
    const char *sampler = "random";
    int flip = 0, rot90 = 0, f32 = 0;
    PyObject *grid = Py_None, *grid_crs = Py_None, *layer_rs = Py_None;
    double grid_xres = 0, grid_yres = 0;
#define X(f, ctype, pytype, fmt, def, lo, hi, hint) pytype f = (pytype)(def);
    CF__LOADER_SCALARS(X)
#undef X
    /* Kernels by name; NULL: cf_loader_options_init's default. */
#define X(f, def) const char *f = NULL;
    CF__LOADER_KERNELS(X)
#undef X
#define X(f, ctype, pytype, fmt, def, lo, hi, hint) fmt
#define K(f, def) "z"
    static const char format[] =
        "O|$OOOOspppOOOOO(dd)O" CF__LOADER_SCALARS(X) CF__LOADER_KERNELS(K);
#undef K
#undef X
#define X(f, ...) , &f
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, loader_kwlist, &images, &masks,
                                     &layers, &weights, &bands, &sampler, &flip, &rot90,
                                     &f32, &mean, &std, &io_kw, &grid, &grid_crs,
                                     &grid_xres, &grid_yres,
                                     &layer_rs CF__LOADER_SCALARS(X) CF__LOADER_KERNELS(X)))
        return -1;
#undef X
    /* Ranges are checked in C, before values are narrowed to their fields
     * (a negative size would wrap). */
    {
        cf_error e;
#define X(f, ...)                                                                          \
    if (cf__loader_check(CF__LDO_##f, (double)f, &e) != CF_OK) {                           \
        PyErr_SetString(PyExc_ValueError, e.msg);                                          \
        return -1;                                                                         \
    }
        CF__LOADER_SCALARS(X)
#undef X
    }
    if (io_kw != Py_None && !PyDict_Check(io_kw)) {
        PyErr_SetString(PyExc_TypeError,
                        "io_options must be a dict of cogfeed.IO keyword arguments");
        return -1;
    }
    if (self->ld) {
        PyErr_SetString(PyExc_RuntimeError, "_Loader already initialised");
        return -1;
    }
    cf_loader_options o;
    cf_loader_options_init(&o);
    cf_error rs_err;
#define X(f, def)                                                                          \
    if (f && cf_resampling_from_name(f, &o.f, &rs_err) != CF_OK) {                         \
        PyErr_SetString(PyExc_ValueError, rs_err.msg);                                     \
        return -1;                                                                         \
    }
    CF__LOADER_KERNELS(X)
#undef X
    if (sampler_kind(sampler, &o.sampler) < 0) {
        PyErr_Format(PyExc_ValueError,
                     "sampler must be 'random', 'blocked', 'tile-shuffle' or "
                     "'grid', not '%s'",
                     sampler);
        return -1;
    }
    cf_io_options io_o;
    PyObject *io_keep = NULL;
    if (io_kw != Py_None) {
        PyObject *none = PyTuple_New(0);
        int ok = none && cf_py_io_options(none, io_kw, &io_o, &io_keep);
        Py_XDECREF(none);
        if (!ok) return -1;
    }
    PyObject *keep = PyList_New(0);
    if (!keep) {
        Py_XDECREF(io_keep);
        return -1;
    }
    Py_ssize_t nimg = 0, nmask = 0, nlay = 0, nw = 0, nmean = 0, nstd = 0;
    cf_grid tgrid;
    cf_crs *grid_hold = NULL, *gcrs = NULL;
    cf_resampling *lrs = NULL;
    int nb = 0;
    const char **img = NULL, **msk = NULL, **lay = NULL;
    double *w = NULL, *mn = NULL, *sd = NULL;
    int *bi = NULL;
    float *mf = NULL, *sf = NULL;
    int rc = -1;
    img = str_array(images, &nimg, keep, "images must be a sequence of paths");
    if (!img) goto done;
    if (masks != Py_None &&
        !(msk = str_array(masks, &nmask, keep, "masks must be a sequence")))
        goto done;
    if (layers != Py_None &&
        !(lay = str_array(layers, &nlay, keep, "layers must be a sequence")))
        goto done;
    if (weights != Py_None &&
        !(w = num_array(weights, &nw, "weights must be a sequence")))
        goto done;
    if (!cf_py_parse_bands(bands, &bi, &nb)) goto done;
    if (mean != Py_None &&
        !(mn = num_array(mean, &nmean, "mean must be a sequence")))
        goto done;
    if (std != Py_None && !(sd = num_array(std, &nstd, "std must be a sequence")))
        goto done;
    if (grid != Py_None) {
        if (!cf_py_grid_parse(grid, &tgrid, &grid_hold)) goto done;
        o.grid = &tgrid;
    }
    if (grid_crs != Py_None) {
        if (!cf_py_crs_convert(grid_crs, &gcrs)) goto done;
        o.grid_crs = gcrs;
        o.grid_res[0] = grid_xres;
        o.grid_res[1] = grid_yres;
    }
    if (layer_rs != Py_None) {
        Py_ssize_t n = 0;
        PyObject *names = PyList_New(0);
        const char **nm = names ? str_array(layer_rs, &n, names, "layer_resampling must be a "
                                            "sequence of names") : NULL;
        if (nm && n != nlayers) {
            PyErr_Format(PyExc_ValueError, "layer_resampling: %zd names for %lld layers", n,
                         nlayers);
        } else if (nm) {
            lrs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *lrs);
            if (!lrs) PyErr_NoMemory();
            for (Py_ssize_t k = 0; lrs && k < n; k++)
                if (cf_resampling_from_name(nm[k], &lrs[k], &rs_err) != CF_OK) {
                    PyErr_SetString(PyExc_ValueError, rs_err.msg);
                    PyMem_Free(lrs);
                    lrs = NULL;
                }
        }
        PyMem_Free(nm);
        Py_XDECREF(names);
        if (!lrs) goto done;
        o.layer_resampling = lrs;
    }
    if (nimg == 0 || nimg % time_steps) {
        PyErr_SetString(PyExc_ValueError,
                        "images: need a positive multiple of time_steps");
        goto done;
    }
    size_t nfiles = (size_t)(nimg / time_steps);
    if (msk && (size_t)nmask != nfiles) {
        PyErr_Format(PyExc_ValueError, "%zd masks for %zu image files", nmask, nfiles);
        goto done;
    }
    if (w && (size_t)nw != nfiles) {
        PyErr_Format(PyExc_ValueError, "weights: %zd values for %zu image files", nw, nfiles);
        goto done;
    }
    if ((size_t)nlay != nfiles * (size_t)nlayers) {
        PyErr_Format(PyExc_ValueError,
                     "layers: %zd paths for %zu image files of %lld layers each", nlay,
                     nfiles, nlayers);
        goto done;
    }
    if (nmean > CF_MAX_BANDS || nstd > CF_MAX_BANDS) {
        PyErr_SetString(PyExc_ValueError, "mean/std: too many values");
        goto done;
    }
    if (mn) mf = PyMem_Calloc((size_t)(nmean ? nmean : 1), sizeof *mf);
    if (sd) sf = PyMem_Calloc((size_t)(nstd ? nstd : 1), sizeof *sf);
    if ((mn && !mf) || (sd && !sf)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nmean; i++) mf[i] = (float)mn[i];
    for (Py_ssize_t i = 0; i < nstd; i++) sf[i] = (float)sd[i];
    o.images = img;
    o.nfiles = nfiles;
    o.masks = msk;
    o.layers = lay;
    o.weights = w;
    o.bands = bi;
    o.nbands = nb;
#define X(f, ctype, ...) o.f = (ctype)f;
    CF__LOADER_SCALARS(X)
#undef X
    o.augment = (flip ? CF_AUG_FLIP : 0) | (rot90 ? CF_AUG_ROT90 : 0);
    o.out_dtype = f32 ? CF_DT_F32 : CF_DT_UNKNOWN;
    /* An empty list is a length (0 channels never match), not "unset". */
    o.mean = mn ? mf : NULL;
    o.std = sd ? sf : NULL;
    o.nmean = (uint32_t)nmean;
    o.nstd = (uint32_t)nstd;
    if ((mn && !nmean) || (sd && !nstd)) {
        PyErr_SetString(PyExc_ValueError, "mean and std need one value per output channel");
        goto done;
    }
    o.io_options = io_keep ? &io_o : NULL;
    cf_error e;
    cf_status st;
    cf_loader *ld = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cf_loader_new(&o, &ld, &e);
    Py_END_ALLOW_THREADS
    if (st != CF_OK) {
        cf_py_raise(st, &e);
        goto done;
    }
    cf_loader_get_layout(ld, &self->lay);
    self->ld = ld;
    self->held.slot = -1;
    self->buffers = PyMem_Calloc((size_t)self->lay.prefetch * 2,
                                 sizeof *self->buffers);
    self->views = PyMem_Calloc((size_t)self->lay.prefetch * 2,
                               sizeof *self->views);
    if (!self->buffers || !self->views) {
        PyErr_NoMemory();
        goto done;
    }
    rc = 0;
done:
    PyMem_Free(img);
    PyMem_Free(msk);
    PyMem_Free(lay);
    PyMem_Free(w);
    PyMem_Free(bi);
    PyMem_Free(mn);
    PyMem_Free(sd);
    PyMem_Free(mf);
    PyMem_Free(sf);
    PyMem_Free(lrs);
    cf_crs_free(grid_hold);
    cf_crs_free(gcrs);
    Py_DECREF(keep);
    Py_XDECREF(io_keep);
    return rc;
}

static void release_held(LoaderObject *self) {
    if (self->ld && self->held.slot >= 0) {
        cf_loader_release(self->ld, &self->held);
        self->held.slot = -1;
    }
}

static void drop_buffers(LoaderObject *self) {
    for (int i = 0; self->buffers && i < self->lay.prefetch * 2; i++) {
        if (self->buffers[i]) {
            PyBuffer_Release(&self->views[i]);
            Py_CLEAR(self->buffers[i]);
        }
    }
}

static void Loader_free_impl(LoaderObject *self) {
    if (self->ld) {
        cf_loader *ld = self->ld;
        self->ld = NULL;
        /* Joins the reader threads, which never take the GIL. */
        Py_BEGIN_ALLOW_THREADS
        cf_loader_free(ld);
        Py_END_ALLOW_THREADS
    }
    drop_buffers(self);
}

static void Loader_dealloc(LoaderObject *self) {
    Loader_free_impl(self);
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
    release_held(self);
    cf_loader *ld = self->ld;
    Py_BEGIN_ALLOW_THREADS
    cf_loader_close(ld);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Loader_layout(LoaderObject *self, PyObject *unused) {
    if (check_open(self)) return NULL;
    const cf_loader_layout *L = &self->lay;
    return Py_BuildValue(
        "{sIsIsIsIsssOsssnsnsisKsK}", "batch_size", L->batch_size,
        "patch_size", L->patch_size, "time_steps", L->time_steps, "channels",
        L->channels, "dtype", cf_dtype_name(L->dtype), "has_mask",
        L->has_mask ? Py_True : Py_False, "mask_dtype",
        L->has_mask ? cf_dtype_name(L->mask_dtype) : "none", "image_bytes",
        (Py_ssize_t)L->image_bytes, "mask_bytes", (Py_ssize_t)L->mask_bytes,
        "prefetch", L->prefetch, "samples", (unsigned long long)L->samples,
        "batches", (unsigned long long)L->batches);
}

/* A numpy array over loader memory; its base is the _Loader, so the
 * memory stays valid as long as the array lives (the contents only until
 * the next batch is taken). */
static PyObject *view(LoaderObject *self, int nd, npy_intp *dims,
                      cf_dtype dt, void *data) {
    PyObject *a = PyArray_SimpleNewFromData(nd, dims, cf_py_npy_type(dt),
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
        return cf_py_raise(st, &e);
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

/* next() -> (batch_index, image, mask or None, windows, augs) or None at
 * the end of the epoch; image is (n, T, C, P, P), mask (n, 1, P, P).
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
    if (st != CF_OK) return cf_py_raise(st, &e);
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
    PyObject *msk = Py_None;
    if (img && L->has_mask) {
        npy_intp md[4] = {b.n, 1, L->patch_size, L->patch_size};
        msk = view(self, 4, md, L->mask_dtype, b.mask);
    } else {
        Py_INCREF(msk);
    }
    if (!img || !msk) {
        Py_XDECREF(img);
        Py_XDECREF(msk);
        Py_DECREF(wins);
        Py_DECREF(augs);
        return NULL;
    }
    return Py_BuildValue("(KNNNN)", (unsigned long long)b.index, img, msk,
                         wins, augs);
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
    if (st != CF_OK) return cf_py_raise(st, &e);
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
    if (st != CF_OK) return cf_py_raise(st, &e);
    PyObject *crs = g.crs ? cf_py_crs_new(cf_crs_ref(g.crs)) : (Py_INCREF(Py_None), Py_None);
    if (!crs) return NULL;
    const double *t = g.transform;
    return Py_BuildValue("(N(dddddd)II)", crs, t[0], t[1], t[2], t[3], t[4], t[5], g.width,
                         g.height);
}

static PyObject *Loader_stats(LoaderObject *self, PyObject *unused) {
    if (check_open(self)) return NULL;
    cf_loader_stats s;
    cf_loader_get_stats(self->ld, &s);
    uint64_t lookups = s.cache_hits + s.cache_misses;
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsisisisKsKsdsdsdsdsdsKsKsKsKsK}", "samples",
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
        (unsigned long long)s.memory_peak);
}

static PyObject *Loader_shard_batches(LoaderObject *self, PyObject *args) {
    int rank, world;
    if (!PyArg_ParseTuple(args, "ii", &rank, &world)) return NULL;
    if (check_open(self)) return NULL;
    uint64_t n = 0;
    cf_error err = {0};
    cf_status st = cf_loader_shard_batches(self->ld, rank, world, &n, &err);
    if (st != CF_OK) return cf_py_raise(st, &err);
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
     "next() -> (index, image, mask, windows, augs) or None at epoch end."},
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

int cf_py_loader_init(PyObject *module) {
    if (PyType_Ready(&LoaderType) < 0) return -1;
    Py_INCREF(&LoaderType);
    if (PyModule_AddObject(module, "_Loader", (PyObject *)&LoaderType) < 0) {
        Py_DECREF(&LoaderType);
        return -1;
    }
    return 0;
}
