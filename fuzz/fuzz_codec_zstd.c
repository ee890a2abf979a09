/* fuzz_codec_zstd.c - libFuzzer target for the ZSTD decoder (see fuzz_codec.h). */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return cf_fuzz_codec(data, size, 50000);
}
