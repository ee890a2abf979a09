/* fuzz_codec_lzma.c - libFuzzer target for LZMA
 * (see fuzz_codec.h). */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return cf_fuzz_codec(data, size, 34925);
}
