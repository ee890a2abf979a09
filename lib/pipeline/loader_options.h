/*
 * loader_options.h - the Loader's scalar options, written once.  One row
 * per cf_loader_options member:
 *
 *   X(field, ctype, pytype, fmt, default, lo, hi, hint)
 *
 * field    the member, and the keyword of cogfeed._cogfeed._Loader
 * ctype    its C type
 * pytype   what the extension parses it into, with PyArg format fmt:
 *          integers wide and signed where the field is narrower, so that
 *          -5 is refused by the range check rather than wrapped
 * default  what cf_loader_options_init sets
 * lo, hi   what cf_loader_new accepts: cf__loader_check, the one place
 *          where they are checked (the extension calls it too, before
 *          narrowing)
 * hint     said after a value out of range ("" for none)
 *
 * Flags (p) take any int, as C callers write them: nonzero is yes.
 * seed alone is parsed unsigned (K): a negative seed is taken modulo 2^64,
 * as torch.manual_seed takes it.
 *
 * From it (and CF__LOADER_KERNELS below) come cf_loader_options_init
 * (loader_build.c), the checks of cf_loader_new, and the public table
 * cf_loader_option_table (loader_option_table.c), through which the
 * extension (python/_loader.c), cogfeed.Loader's defaults and help, the
 * CLI's and the docs' option tables (tools/option_docs.py) read it.  The
 * options that are not scalars (inputs, bands, weights, mean/std, the
 * sampler's name, augmentation flags, the output dtype, io, the target
 * grid and its CRS and resolution, the layers' kernels) are converted by
 * hand.
 */
#ifndef CF_LOADER_OPTIONS_H
#define CF_LOADER_OPTIONS_H

#include <float.h>
#include <stdint.h>

#include "cogfeed.h"

#define CF__LD_MAX_THREADS 1024
#define CF__LD_MAX_PREFETCH 64

/* cache_bytes's default, as GDAL_CACHEMAX's: 5% of the usable physical
 * memory (the machine's, or the cgroup's limit where lower), at least
 * 256 MiB.  Users of GDAL expect a reader to keep that much decoded
 * (TorchGeo's workers each get it), and random patches over a dataset
 * that partly fits it meet tiles decoded before; the floor is the old
 * fixed default, which tile-shuffle's groups were tuned on (chunk_cache.c,
 * the cache it sizes). */
size_t cf__ld_default_cache_bytes(void);
/* ... in words: cf_option_info.default_doc of cache_bytes, whose default
 * is flagged CF_OPTF_RUNTIME_DEFAULT (loader_option_table.c). */
#define CF__LD_DEFAULT_CACHE_BYTES_DOC                                                    \
    "5% of the physical memory (or of the cgroup's limit), at least 256 MiB"

/* Scenes a sample file may have (a mosaic's, over all its steps), and the
 * time steps a sample may hold.  A mosaic's scenes cost a footprint test
 * each per sample (only those meeting the patch are read), so a step may
 * be the many scenes of a large region (cogfeed.load). */
#define CF__LD_MAX_SCENES (1 << 20)
#define CF__LD_MAX_STEPS 1024

#define CF__LOADER_SCALARS(X)                                                             \
    X(time_steps, int, long long, "L", 1, 1, CF__LD_MAX_SCENES,                           \
      "a mosaic's scenes; at most 1024 time steps out")                                    \
    X(nlayers, int, long long, "L", 0, 0, 64, "")                                         \
    X(level, int, long long, "L", 0, 0, INT32_MAX,                                        \
      "0 is full resolution, 1 the first overview")                                       \
    X(patch_size, uint32_t, long long, "L", 256, 1, 65536, "")                            \
    X(batch_size, uint32_t, long long, "L", 32, 1, 65536, "")                             \
    X(stride, uint32_t, long long, "L", 0, 0, UINT32_MAX, "0: patch_size")                \
    X(seed, uint64_t, unsigned long long, "K", 0, 0, UINT64_MAX, "")                      \
    X(epoch, uint64_t, long long, "L", 0, 0, INT64_MAX, "")                               \
    X(rank, int, long long, "L", 0, 0, INT32_MAX, "")                                     \
    X(world_size, int, long long, "L", 1, 1, INT32_MAX, "")                               \
    X(epoch_length, uint64_t, long long, "L", 0, 0, INT64_MAX, "")                        \
    X(drop_last, int, int, "p", 0, INT32_MIN, INT32_MAX, "")                              \
    X(apply_scale_offset, int, int, "p", 1, INT32_MIN, INT32_MAX, "")                     \
    X(skip_errors, int, int, "p", 0, INT32_MIN, INT32_MAX, "")                            \
    X(skip_limit, double, double, "d", 0.5, 0, 1, "1: never give up")                     \
    X(prefetch, int, long long, "L", 0, 0, CF__LD_MAX_PREFETCH, "0: auto")                \
    X(threads, int, long long, "L", 0, 0, CF__LD_MAX_THREADS, "0: auto")                  \
    X(concurrency, int, long long, "L", 0, 0, CF__LD_MAX_THREADS, "0: adaptive")          \
    X(inflight_bytes, size_t, long long, "L", 0, 0, INT64_MAX, "0: auto")                 \
    X(cache_bytes, size_t, long long, "L", cf__ld_default_cache_bytes(), 0, INT64_MAX,     \
      "0: none")                                                                          \
    X(reproject, int, int, "p", 1, INT32_MIN, INT32_MAX, "")                              \
    X(ungeoreferenced, int, int, "p", 0, INT32_MIN, INT32_MAX, "")                        \
    X(error_threshold, double, double, "d", 0.125, 0, DBL_MAX,                            \
      "source pixels; 0 transforms every pixel")                                          \
    X(valid_mask, int, int, "p", 0, INT32_MIN, INT32_MAX, "")                             \
    X(mosaic, int, int, "p", 0, INT32_MIN, INT32_MAX, "")                                 \
    X(skip_empty, int, int, "p", 0, INT32_MIN, INT32_MAX, "")                             \
    X(step_scenes, uint32_t, long long, "L", 0, 0, CF__LD_MAX_SCENES,                     \
      "0: all of a file's scenes")                                                        \
    X(valid_per_step, int, int, "p", 0, INT32_MIN, INT32_MAX, "")                         \
    X(layers_per_step, int, int, "p", 0, INT32_MIN, INT32_MAX, "")

/* The resampling kernels (cf_resampling), one row per member:
 *
 *   X(field, default)
 *
 * The extension takes them by name (cf_resampling_from_name; None: the
 * default); cf_loader_new refuses a value that is no kernel. */
#define CF__LOADER_KERNELS(X)                                                             \
    X(resampling, CF_RS_BILINEAR)                                                         \
    X(mask_resampling, CF_RS_NEAREST)

enum {
#define CF__X(f, ...) CF__LDO_##f,
    CF__LOADER_SCALARS(CF__X)
#undef CF__X
    CF__LDO_COUNT
};

/* Whether v is a valid value of scalar option `id` (CF__LDO_*): CF_OK,
 * or CF_E_ARG with "loader: NAME V not in [LO, HI] (HINT)". */
cf_status cf__loader_check(int id, double v, cf_error *err);

#endif
