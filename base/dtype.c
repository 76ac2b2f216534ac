/* Element sizes and names of the public dtypes and ops, names of the memory types. */
#include "base/base.h"

static const size_t dtype_sizes[WEFT_DTYPE_COUNT] = {
    [WEFT_INT8] = 1,    [WEFT_UINT8] = 1,    [WEFT_INT32] = 4,   [WEFT_UINT32] = 4,
    [WEFT_INT64] = 8,   [WEFT_UINT64] = 8,   [WEFT_FLOAT16] = 2, [WEFT_BFLOAT16] = 2,
    [WEFT_FLOAT32] = 4, [WEFT_FLOAT64] = 8,  [WEFT_FLOAT8_E4M3] = 1, [WEFT_FLOAT8_E5M2] = 1,
};

static const char *const dtype_names[WEFT_DTYPE_COUNT] = {
    [WEFT_INT8] = "int8",       [WEFT_UINT8] = "uint8",       [WEFT_INT32] = "int32",
    [WEFT_UINT32] = "uint32",   [WEFT_INT64] = "int64",       [WEFT_UINT64] = "uint64",
    [WEFT_FLOAT16] = "float16", [WEFT_BFLOAT16] = "bfloat16", [WEFT_FLOAT32] = "float32",
    [WEFT_FLOAT64] = "float64", [WEFT_FLOAT8_E4M3] = "float8_e4m3",
    [WEFT_FLOAT8_E5M2] = "float8_e5m2",
};

static const char *const op_names[WEFT_OP_COUNT] = {
    [WEFT_SUM] = "sum",   [WEFT_PROD] = "prod", [WEFT_MIN] = "min",   [WEFT_MAX] = "max",
    [WEFT_AVG] = "avg",   [WEFT_BAND] = "band", [WEFT_BOR] = "bor",   [WEFT_BXOR] = "bxor",
    [WEFT_LAND] = "land", [WEFT_LOR] = "lor",   [WEFT_LXOR] = "lxor",
};

WEFT_EXPORT size_t weft_dtype_size(weft_dtype_t dtype)
{
    return (unsigned)dtype < WEFT_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

WEFT_EXPORT const char *weft_dtype_name(weft_dtype_t dtype)
{
    return (unsigned)dtype < WEFT_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

WEFT_EXPORT const char *weft_op_name(weft_op_t op)
{
    return (unsigned)op < WEFT_OP_COUNT ? op_names[op] : "unknown";
}

WEFT_EXPORT const char *weft_memtype_name(weft_memtype_t type)
{
    switch (type) {
    case WEFT_MEM_HOST:
        return "host";
    case WEFT_MEM_CUDA:
        return "cuda";
    case WEFT_MEM_EMU:
        return "emu";
    }
    return "unknown";
}
