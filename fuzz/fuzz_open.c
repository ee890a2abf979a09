/*
 * fuzz_open.c - libFuzzer target for the whole read path from memory:
 * cf_cog_open_memory_ex on the input, then metadata queries and a few
 * cf_cog_read / cf_cog_read_mask calls per level (a tile-aligned window, one
 * crossing the far image edge, one partly outside, a single pixel), so the
 * parser, the planner, every codec and the predictor see the same bytes
 * the way a real reader would.  Seeds: fuzz/seeds/open/ (small GDAL files).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CF_STATIC_LINKING_ONLY /* cf_cog_open_memory */
#include "cogfeed.h"

/* Windows are at most this many pixels a side, so the destination buffer
 * stays small whatever the file claims. */
#define WIN 48
/* Bands read per call: the first, the last and one in the middle. */
#define MAX_READ_BANDS 3
/* Skip reading levels whose single decoded tile would exceed this: such
 * files are legal (the library caps at CF_MAX_CHUNK_BYTES), but decoding a
 * 1 GiB tile on every iteration would stall the fuzzer without reaching
 * new code. */
#define MAX_FUZZ_TILE_BYTES (64u << 20)

static void read_level(cf_cog *cog, const cf_cog_info *info, int level,
                       uint8_t *buf, size_t buf_size) {
    cf_level_info li;
    if (cf_cog_level_info(cog, level, &li, NULL) != CF_OK) return;
    size_t ssize = cf_dtype_size(info->dtype);
    if (!ssize) ssize = 1;
    uint64_t tile_bytes = (uint64_t)li.tile_width * li.tile_height *
                          (info->planar == 2 ? 1 : info->count) * ssize;
    if (tile_bytes > MAX_FUZZ_TILE_BYTES) return;

    int bands[MAX_READ_BANDS];
    int nb = 0;
    bands[nb++] = 1;
    if (info->count >= 2) bands[nb++] = (int)info->count;
    if (info->count >= 3) bands[nb++] = (int)(info->count / 2) + 1;

    const int64_t W = li.width, H = li.height;
    const int64_t tw = li.tile_width ? li.tile_width : 1;
    const int64_t th = li.tile_height ? li.tile_height : 1;
    const int64_t wins[][4] = {
        {0, 0, tw < WIN ? tw : WIN, th < WIN ? th : WIN},
        {W - WIN / 2, H - WIN / 3, WIN, WIN},
        {-5, -7, WIN / 2, WIN / 3},
        {W / 2, H / 2, 1, 1},
        {tw - 3, th - 2, 7, 5},
    };
    for (size_t i = 0; i < sizeof wins / sizeof wins[0]; i++) {
        uint32_t w = (uint32_t)wins[i][2], h = (uint32_t)wins[i][3];
        if (w == 0 || h == 0 || w > WIN || h > WIN) continue;
        cf_error err;
        size_t need = (size_t)nb * w * h * ssize;
        if (need > buf_size) continue;
        /* All bands in file order when few, else the chosen subset. */
        if (info->count <= MAX_READ_BANDS &&
            (size_t)info->count * w * h * ssize <= buf_size)
            (void)cf_cog_read(cog, level, wins[i][0], wins[i][1], w, h, NULL, 0,
                              buf, buf_size, &err);
        (void)cf_cog_read(cog, level, wins[i][0], wins[i][1], w, h, bands, nb,
                          buf, buf_size, &err);
        if (info->has_mask)
            (void)cf_cog_read_mask(cog, level, wins[i][0], wins[i][1], w, h,
                                   buf, buf_size, &err);
    }
}

/* Every metadata query on the dataset and its first and last band. */
static size_t walk_metadata(const cf_cog *cog, uint32_t count) {
    size_t n = 0;
    const char *w = cf_cog_warnings(cog);
    if (w) n += strlen(w);
    int bands[3] = {0, 1, (int)count};
    for (int k = 0; k < 3; k++) {
        const char *const *dom = cf_cog_metadata_domains(cog, bands[k]);
        for (int d = 0; dom && dom[d]; d++) {
            const char *const *it = cf_cog_metadata(cog, bands[k], dom[d]);
            for (int i = 0; it && it[i]; i++) n += strlen(it[i]);
        }
        n += strlen(cf_cog_band_description(cog, bands[k]));
        n += strlen(cf_cog_band_unit(cog, bands[k]));
        double nd;
        n += (size_t)cf_cog_band_nodata(cog, bands[k], &nd);
    }
    const char *dt = cf_cog_metadata_item(cog, 0, "", "TIFFTAG_DATETIME");
    if (dt) n += strlen(dt);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cf_cog *cog = NULL;
    cf_error err;
    /* Odd sizes open with raw_color: colour spaces read as stored. */
    cf_open_options opt;
    cf_open_options_init(&opt);
    opt.raw_color = (int)(size & 1);
    if (cf_cog_open_memory_ex(data, size, "fuzz.tif", &opt, &cog, &err) != CF_OK)
        return 0;
    cf_cog_info info;
    cf_cog_get_info(cog, &info);
    (void)cf_cog_band_scale(cog, 1);
    (void)cf_cog_band_offset(cog, (int)info.count);
    (void)cf_cog_name(cog);
    size_t md = walk_metadata(cog, info.count);
    __asm__ volatile("" : : "r"(md)); /* keep the queries */

    /* room for three bands of the widest samples (complex float64) */
    size_t buf_size = (size_t)MAX_READ_BANDS * WIN * WIN * 16;
    uint8_t *buf = malloc(buf_size);
    if (buf) {
        int levels = info.nlevels < 4 ? info.nlevels : 4;
        for (int level = 0; level < levels; level++)
            read_level(cog, &info, level, buf, buf_size);
        /* A level that does not exist must be refused, not read. */
        (void)cf_cog_read(cog, info.nlevels, 0, 0, 1, 1, NULL, 0, buf, buf_size,
                          &err);
        free(buf);
    }
    cf_cog_close(cog);
    return 0;
}
