/*
 * The parameters of the CUDA kernels (kernels.cu), shared by the host code that launches them
 * (cuda.c). Plain C, read by nvcc as C++.
 *
 * Kernels, one per (op, dtype) that weft__op_valid_for_dtype accepts (AVG uses SUM's), named by
 * weft__cuda_kernel_name():
 *   weft_reduce_<op>_<dtype>(weft_cuda_reduce_args_t args)
 *       dst[i] = ((srcs[0][i] op srcs[1][i]) op srcs[2][i]) ... for i < count, with the
 *       functions of device/reduce_elem.h; half types accumulate in float and round once.
 *       Every thread reads element i of every input before writing dst[i], so dst may be any
 *       of the inputs. The first WEFT_CUDA_INLINE_SRCS inputs travel in the parameters; the rest
 *       in a device array `more` (more[j] is input WEFT_CUDA_INLINE_SRCS + j).
 *       vector != 0: every pointer is 16-byte aligned and threads move 16 bytes per input.
 *   weft_avg_<dtype>(weft_cuda_avg_args_t args): buf[i] = weft__elem_div_<dtype>(buf[i], divisor)
 */
#ifndef WEFT_DEVICE_CUDA_KERNEL_ARGS_H
#define WEFT_DEVICE_CUDA_KERNEL_ARGS_H

#include <stdint.h>

#define WEFT_CUDA_INLINE_SRCS 32
/* threads per block of every kernel */
#define WEFT_CUDA_THREADS 256
/* bytes one vector load moves */
#define WEFT_CUDA_VECTOR_BYTES 16

typedef struct {
    void *dst;
    const void *srcs[WEFT_CUDA_INLINE_SRCS];
    const void *const *more;
    uint64_t count;
    int32_t nsrcs;
    int32_t vector;
} weft_cuda_reduce_args_t;

typedef struct {
    void *buf;
    uint64_t count;
    uint64_t divisor;
} weft_cuda_avg_args_t;

#endif /* WEFT_DEVICE_CUDA_KERNEL_ARGS_H */
