/* fuzz_codec_ccitt_rle.c - libFuzzer target for CCITT RLE (Modified Huffman)
 * (see fuzz_codec.h). */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return cf_fuzz_codec(data, size, 2);
}
