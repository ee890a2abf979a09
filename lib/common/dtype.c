/* dtype.c - names and sizes of the public sample types. */
#include "common.h"

size_t cf_dtype_size(cf_dtype t) {
    switch (t) {
    case CF_DT_U8: case CF_DT_I8: return 1;
    case CF_DT_U16: case CF_DT_I16: return 2;
    case CF_DT_U32: case CF_DT_I32: case CF_DT_F32: case CF_DT_CI16: return 4;
    case CF_DT_U64: case CF_DT_I64: case CF_DT_F64: case CF_DT_CI32:
    case CF_DT_CF32: return 8;
    case CF_DT_CF64: return 16;
    default: return 0;
    }
}

const char *cf_dtype_name(cf_dtype t) {
    static const char *const names[] = {
        "unknown", "uint8",   "int8",          "uint16",        "int16",
        "uint32",  "int32",   "uint64",        "int64",         "float32",
        "float64", "complex_int16", "complex_int32", "complex64",
        "complex128"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}
