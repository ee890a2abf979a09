/* fuzz_codec_ccitt_g3.c - libFuzzer target for CCITT Group 3 (1-D, or 2-D by header bit)
 * (see fuzz_codec.h). */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return cf_fuzz_codec(data, size, 3);
}
