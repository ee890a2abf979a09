/*
 * fuzz_geokeys.c - libFuzzer target for GeoKeys -> CRS (lib/geo/geokeys.c):
 * the keys a hostile file may carry.  Input: a 16-bit count of directory
 * SHORTs, the SHORTs, an 8-bit count of doubles, the doubles, and the rest
 * as GeoAsciiParams.  A CRS that comes out is printed (WKT2, PROJJSON) and
 * compared, so that whatever PROJ was handed is exercised.
 */
#include "geo/geo.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    size_t nd = (size_t)(data[0] | data[1] << 8) % 1024, p = 2;
    if (nd * 2 > size - p) nd = (size - p) / 2;
    uint16_t *dir = malloc(nd * 2 + 2);
    for (size_t i = 0; i < nd; i++) dir[i] = (uint16_t)(data[p + 2 * i] | data[p + 2 * i + 1] << 8);
    p += nd * 2;
    size_t nv = p < size ? data[p++] % 64 : 0;
    if (nv * 8 > size - p) nv = (size - p) / 8;
    double *dbl = malloc(nv * 8 + 8);
    if (nv) memcpy(dbl, data + p, nv * 8);
    p += nv * 8;
    char *ascii = malloc(size - p + 1);
    memcpy(ascii, data + p, size - p);
    ascii[size - p] = 0;
    cf__geokeys k = {dir, nd, dbl, nv, ascii, size - p};
    cf_crs *c = NULL;
    char note[160];
    if (cf__crs_from_geokeys(&k, &c, note, sizeof note) == CF_OK && c) {
        volatile size_t sink = strlen(cf_crs_wkt(c)) + strlen(cf_crs_projjson(c)) +
                               strlen(cf_crs_name(c)) + strlen(cf_crs_to_string(c));
        (void)sink;
        cf_crs *u = NULL;
        if (cf_crs_from_epsg(32633, &u, NULL) == CF_OK) {
            (void)cf_crs_equivalent(c, u);
            cf_crs_free(u);
        }
        cf_crs_free(c);
    }
    free(dir);
    free(dbl);
    free(ascii);
    return 0;
}
