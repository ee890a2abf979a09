/*
 * fuzz_stac.c - libFuzzer target for the STAC index (lib/stac/): a
 * document a hostile catalog or search may return.  The first byte picks
 * the document's base (none, a local path, an https URL); the rest is the
 * JSON.  Whatever is added is read back through every accessor, searched
 * and picked from, so that a field the parser got wrong is touched.
 */
#include "stac/stac.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const bases[] = {NULL, "/data/cat/c.json", "https://stac.example.com/c.json"};
    const char *base = bases[data[0] % 3];
    cf_stac_limits lim = {1000, 100, 100, 100, 32, 1 << 20};
    cf_stac *ix = NULL;
    if (cf_stac_new(&ix, NULL) != CF_OK) return 0;
    int had = 0;
    /* Its first half (mostly refused: nothing may stay of it), then the
     * whole twice: documents beside each other, as a catalog walk adds. */
    (void)cf_stac_add_json(ix, (const char *)data + 1, (size - 1) / 2, base, &lim, &had, NULL);
    for (int k = 0; k < 2; k++)
        (void)cf_stac_add_json(ix, (const char *)data + 1, size - 1, base, &lim, &had, NULL);
    volatile size_t sink = 0;
    size_t n = cf_stac_count(ix);
    for (size_t i = 0; i < n; i++) {
        cf_stac_item_info it;
        cf_stac_item(ix, i, &it);
        sink += it.id.len + it.properties.len + it.geometry.len + it.datetime.len;
        for (size_t a = 0; a < it.nassets; a++) {
            cf_stac_asset_info as;
            cf_stac_asset(ix, i, a, &as);
            sink += as.href.len + as.key.len + as.crs.len;
            const char *r = as.roles.p;
            for (size_t q = 0; q < as.nroles; q++) r += strlen(r) + 1;
            for (size_t b = 0; b < as.nbands; b++) {
                cf_stac_band_info bi;
                cf_stac_band(ix, i, a, b, &bi);
                sink += bi.name.len + bi.common_name.len;
            }
        }
        sink += (size_t)(cf_stac_pick(ix, i, "red") + 2);
    }
    uint8_t match[2000];
    double boxes[8] = {-10, -10, 10, 10, 170, -90, 180, 90};
    if (n <= sizeof match) (void)cf_stac_match(ix, boxes, 2, 0, INT64_MAX, 50.0, match, NULL);
    (void)sink;
    cf_stac_free(ix);
    return 0;
}
