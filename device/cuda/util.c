/* GPU-free parts of the CUDA backend: see util.h. */
#include "device/cuda/util.h"

#include "device/cuda/kernel_args.h"

#include <cuda.h>

#include <stdio.h>
#include <string.h>

static const unsigned char ipc_magic[4] = {'W', 'F', 'T', 'C'};
#define IPC_VERSION 1u

int weft__cuda_kernel_name(weft_op_t op, weft_dtype_t dtype, char *name, size_t len)
{
    int n;

    if (!weft__op_valid_for_dtype(op, dtype)) {
        return -1;
    }
    n = snprintf(name, len, "weft_reduce_%s_%s", weft_op_name(op == WEFT_AVG ? WEFT_SUM : op),
                 weft_dtype_name(dtype));
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int weft__cuda_avg_kernel_name(weft_dtype_t dtype, char *name, size_t len)
{
    int n;

    if ((unsigned)dtype >= WEFT_DTYPE_COUNT) {
        return -1;
    }
    n = snprintf(name, len, "weft_avg_%s", weft_dtype_name(dtype));
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int weft__cuda_vector_ok(const void *dst, const void *const *srcs, int nsrcs)
{
    uintptr_t bits = (uintptr_t)dst;

    for (int j = 0; j < nsrcs; j++) {
        bits |= (uintptr_t)srcs[j];
    }
    return bits % WEFT_CUDA_VECTOR_BYTES == 0;
}

unsigned weft__cuda_grid_blocks(uint64_t count, size_t elem_size, int vector, int sm_count,
                                int blocks_per_sm)
{
    uint64_t per_thread = vector ? WEFT_CUDA_VECTOR_BYTES / elem_size : 1;
    uint64_t items = (count + per_thread - 1) / per_thread;
    uint64_t blocks = (items + WEFT_CUDA_THREADS - 1) / WEFT_CUDA_THREADS;
    uint64_t most =
        (uint64_t)(sm_count > 0 ? sm_count : 1) * (blocks_per_sm > 0 ? blocks_per_sm : 1);

    if (blocks > most) {
        blocks = most;
    }
    return blocks > 0 ? (unsigned)blocks : 1u;
}

void weft__cuda_ipc_pack(void *handle, const void *raw, uint64_t offset)
{
    unsigned char *p = handle;
    uint32_t version = IPC_VERSION;

    memcpy(p, ipc_magic, 4);
    memcpy(p + 4, &version, 4);
    memcpy(p + 8, raw, WEFT_CUDA_IPC_RAW);
    memcpy(p + 8 + WEFT_CUDA_IPC_RAW, &offset, 8);
}

int weft__cuda_ipc_unpack(const void *handle, void *raw, uint64_t *offset_p)
{
    const unsigned char *p = handle;
    uint32_t version;

    memcpy(&version, p + 4, 4);
    if (memcmp(p, ipc_magic, 4) != 0 || version != IPC_VERSION) {
        return -1;
    }
    memcpy(raw, p + 8, WEFT_CUDA_IPC_RAW);
    memcpy(offset_p, p + 8 + WEFT_CUDA_IPC_RAW, 8);
    return 0;
}

weft_status_t weft__cuda_status(int result, const char *name, const char *text, const char *what)
{
    weft_status_t status;

    switch (result) {
    case CUDA_SUCCESS:
        return WEFT_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
        status = WEFT_ERR_NO_MEMORY;
        break;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_INVALID_HANDLE:
        status = WEFT_ERR_INVALID_ARG;
        break;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NOT_SUPPORTED:
        status = WEFT_ERR_UNSUPPORTED;
        break;
    default:
        status = WEFT_ERR_DEVICE;
        break;
    }
    if (name == NULL) {
        return weft__error(status, "%s: CUresult %d (%s)", what, result,
                           text != NULL ? text : "unknown to this driver");
    }
    return weft__error(status, "%s: %s (%s)", what, name, text != NULL ? text : "no description");
}
