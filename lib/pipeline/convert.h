/*
 * convert.h - the Loader's per-sample arithmetic on decoded pixels: raw
 * samples of any real type to float32 with the file's scale/offset and the
 * channel's mean/std, and the dihedral augmentations (rot90 / flip).
 */
#ifndef CF_CONVERT_H
#define CF_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

/* dst[i] = ((src[i] * scale + offset) - mean) / std for n samples of
 * type dt (complex types give 0: the loader refuses them at open). */
void cf__convert_band(const uint8_t *src, cf_dtype dt, size_t n, double scale,
                      double offset, double mean, double std, float *dst);

/* Rotate a P x P plane of es-byte samples by aug&3 quarter turns
 * counter-clockwise (numpy's rot90), then flip it left-right when aug&4
 * (numpy's flip(axis=-1)).  tmp holds P*P*es bytes. */
void cf__augment_plane(uint8_t *plane, size_t es, uint32_t P, uint32_t aug, uint8_t *tmp);

#endif
