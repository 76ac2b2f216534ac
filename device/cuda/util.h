/*
 * The parts of the CUDA backend that need no GPU, kept apart so that tests run them on any
 * machine: kernel names, launch geometry, the vector-width choice, the IPC handle layout and the
 * translation of CUresult to weft statuses. Pure functions (weft__cuda_status also records the
 * message, like weft__error): thread-safe.
 */
#ifndef WEFT_DEVICE_CUDA_UTIL_H
#define WEFT_DEVICE_CUDA_UTIL_H

#include "device/device.h"

#include <stddef.h>
#include <stdint.h>

/* The reduce kernel of (op, dtype): "weft_reduce_<op>_<dtype>" (AVG: the SUM kernel). Returns
 * 0, or -1 when op is not defined for dtype or the name does not fit in len. */
int weft__cuda_kernel_name(weft_op_t op, weft_dtype_t dtype, char *name, size_t len);
/* The avg_finalize kernel of dtype: "weft_avg_<dtype>"; 0, or -1 (unknown dtype, no room). */
int weft__cuda_avg_kernel_name(weft_dtype_t dtype, char *name, size_t len);

/* 1 when every pointer (dst and the nsrcs inputs) is aligned to WEFT_CUDA_VECTOR_BYTES, so the
 * kernel may move 16 bytes per thread and input; 0 otherwise (one element at a time). */
int weft__cuda_vector_ok(const void *dst, const void *const *srcs, int nsrcs);

/* Blocks of WEFT_CUDA_THREADS threads for `count` elements of elem_size bytes, each thread
 * taking 16 bytes when vector is set (else one element): enough to give every thread one
 * item, but at most blocks_per_sm per SM (grid-stride loops cover the rest), and at least 1. */
unsigned weft__cuda_grid_blocks(uint64_t count, size_t elem_size, int vector, int sm_count,
                                int blocks_per_sm);

/* The IPC handle: "WFTC", version 1, the cuIpcGetMemHandle bytes, and the offset of the
 * exported pointer in its allocation. */
#define WEFT_CUDA_IPC_RAW 64
#define WEFT_CUDA_IPC_HANDLE_SIZE (8 + WEFT_CUDA_IPC_RAW + 8)

void weft__cuda_ipc_pack(void *handle, const void *raw, uint64_t offset);
/* Returns 0, or -1 when handle is not a weft CUDA handle (bad magic or version). */
int weft__cuda_ipc_unpack(const void *handle, void *raw, uint64_t *offset_p);

/* The weft status of a CUresult (given as int: CUDA_SUCCESS is 0), with the message
 * "<what>: <cuGetErrorName> (<cuGetErrorString>)" recorded through weft__error. name and
 * text may be NULL (a code the driver cannot name): then "CUresult <number>" is written. Out of
 * memory -> WEFT_ERR_NO_MEMORY; invalid value, handle or context -> WEFT_ERR_INVALID_ARG; no
 * device, no binary for the GPU, driver mismatch -> WEFT_ERR_UNSUPPORTED; anything else ->
 * WEFT_ERR_DEVICE. */
weft_status_t weft__cuda_status(int result, const char *name, const char *text, const char *what);

#endif /* WEFT_DEVICE_CUDA_UTIL_H */
