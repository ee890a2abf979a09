/* fuzz_codec_none.c - libFuzzer target for uncompressed chunks: the sample conversions alone (bit
 * unpacking, float16/24, complex swabs, CMYK/CIELab/YCbCr)
 * (see fuzz_codec.h). */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return cf_fuzz_codec(data, size, 1);
}
