/* Memory-type dispatch and the dtype/op rules shared by every device table. */
#include "device/device.h"

const weft_device_ops_t *weft__device_query(const void *ptr)
{
    (void)ptr;
    return &weft__device_host_ops;
}

int weft__op_valid_for_dtype(weft_op_t op, weft_dtype_t dtype)
{
    int is_float = dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16 || dtype == WEFT_FLOAT32 ||
                   dtype == WEFT_FLOAT64;

    if ((unsigned)dtype >= WEFT_DTYPE_COUNT || (unsigned)op >= WEFT_OP_COUNT) {
        return 0;
    }
    switch (op) {
    case WEFT_BAND:
    case WEFT_BOR:
    case WEFT_BXOR:
    case WEFT_LAND:
    case WEFT_LOR:
    case WEFT_LXOR:
        return !is_float;
    default:
        return 1;
    }
}
