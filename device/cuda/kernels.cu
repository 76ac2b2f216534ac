/*
 * The CUDA backend's kernels: element-wise reduction of n inputs for every (op, dtype), and
 * avg_finalize's division. The arithmetic is device/reduce_elem.h's, the same functions the
 * host loops run, so a GPU gives the host table's bits (the build passes -fmad=false so that
 * nothing is contracted into an FMA). Kernel parameters and names: kernel_args.h.
 *
 * Cost: one pass reads n inputs and writes dst once, (n + 1) * count * size bytes, so the
 * kernels are bandwidth-bound; each thread moves 16 bytes per input when every pointer is
 * 16-byte aligned (ld.global.v4), in a grid-stride loop over a grid of a few blocks per SM
 * (weft__cuda_grid_blocks), and handles the tail that does not fill a vector one element at a
 * time.
 *
 * The thread bodies are in kernel_body.cuh (shared with a CPU test of their indexing).
 *
 * Compiled to a fatbin (real code for a few architectures plus PTX) that libweft embeds and
 * loads with cuModuleLoadData; extern "C" keeps the names unmangled for cuModuleGetFunction.
 */
#include "device/cuda/kernel_body.cuh"

#include <stdint.h>

#define WEFT_CUDA_TID ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x)
#define WEFT_CUDA_STRIDE ((uint64_t)gridDim.x * blockDim.x)

using namespace weft_cuda;

/* kernel weft_reduce_<op>_<dtype>: storage S, format F, element function OP */
#define WEFT_CUDA_REDUCE(op, dtype, S, F, OP)                                                      \
    extern "C" __global__ void __launch_bounds__(WEFT_CUDA_THREADS)                                \
        weft_reduce_##op##_##dtype(weft_cuda_reduce_args_t args)                                   \
    {                                                                                              \
        reduce_body<S, F, OP>(args, WEFT_CUDA_TID, WEFT_CUDA_STRIDE);                              \
    }

/* Integers: the unsigned type of the width for all but MIN and MAX (u: unsigned, s: own). */
#define WEFT_CUDA_INT_KERNELS(dtype, S, s, U, u)                                                   \
    WEFT_CUDA_REDUCE(sum, dtype, U, plain<U>, sum_##u)                                             \
    WEFT_CUDA_REDUCE(prod, dtype, U, plain<U>, prod_##u)                                           \
    WEFT_CUDA_REDUCE(min, dtype, S, plain<S>, min_##s)                                             \
    WEFT_CUDA_REDUCE(max, dtype, S, plain<S>, max_##s)                                             \
    WEFT_CUDA_REDUCE(band, dtype, U, plain<U>, band_##u)                                           \
    WEFT_CUDA_REDUCE(bor, dtype, U, plain<U>, bor_##u)                                             \
    WEFT_CUDA_REDUCE(bxor, dtype, U, plain<U>, bxor_##u)                                           \
    WEFT_CUDA_REDUCE(land, dtype, U, plain<U>, land_##u)                                           \
    WEFT_CUDA_REDUCE(lor, dtype, U, plain<U>, lor_##u)                                             \
    WEFT_CUDA_REDUCE(lxor, dtype, U, plain<U>, lxor_##u)

/* Floats; half and 8-bit types combine in float (f32) */
#define WEFT_CUDA_FLOAT_KERNELS(dtype, S, F, c)                                                    \
    WEFT_CUDA_REDUCE(sum, dtype, S, F, sum_##c)                                                    \
    WEFT_CUDA_REDUCE(prod, dtype, S, F, prod_##c)                                                  \
    WEFT_CUDA_REDUCE(min, dtype, S, F, min_##c)                                                    \
    WEFT_CUDA_REDUCE(max, dtype, S, F, max_##c)

WEFT_CUDA_INT_KERNELS(int8, int8_t, i8, uint8_t, u8)
WEFT_CUDA_INT_KERNELS(uint8, uint8_t, u8, uint8_t, u8)
WEFT_CUDA_INT_KERNELS(int32, int32_t, i32, uint32_t, u32)
WEFT_CUDA_INT_KERNELS(uint32, uint32_t, u32, uint32_t, u32)
WEFT_CUDA_INT_KERNELS(int64, int64_t, i64, uint64_t, u64)
WEFT_CUDA_INT_KERNELS(uint64, uint64_t, u64, uint64_t, u64)
WEFT_CUDA_FLOAT_KERNELS(float16, uint16_t, f16, f32)
WEFT_CUDA_FLOAT_KERNELS(bfloat16, uint16_t, bf16, f32)
WEFT_CUDA_FLOAT_KERNELS(float32, float, plain<float>, f32)
WEFT_CUDA_FLOAT_KERNELS(float64, double, plain<double>, f64)
WEFT_CUDA_FLOAT_KERNELS(float8_e4m3, uint8_t, f8e4m3, f32)
WEFT_CUDA_FLOAT_KERNELS(float8_e5m2, uint8_t, f8e5m2, f32)

/* kernel weft_avg_<dtype>: buf[i] = DIV(buf[i], divisor), half types in float */
#define WEFT_CUDA_AVG(dtype, S, F, DIV)                                                            \
    extern "C" __global__ void __launch_bounds__(WEFT_CUDA_THREADS)                                \
        weft_avg_##dtype(weft_cuda_avg_args_t args)                                                \
    {                                                                                              \
        avg_body<S, F>(args, WEFT_CUDA_TID, WEFT_CUDA_STRIDE, DIV);                                \
    }

WEFT_CUDA_AVG(int8, int8_t, plain<int8_t>, weft__elem_div_i8)
WEFT_CUDA_AVG(uint8, uint8_t, plain<uint8_t>, weft__elem_div_u8)
WEFT_CUDA_AVG(int32, int32_t, plain<int32_t>, weft__elem_div_i32)
WEFT_CUDA_AVG(uint32, uint32_t, plain<uint32_t>, weft__elem_div_u32)
WEFT_CUDA_AVG(int64, int64_t, plain<int64_t>, weft__elem_div_i64)
WEFT_CUDA_AVG(uint64, uint64_t, plain<uint64_t>, weft__elem_div_u64)
WEFT_CUDA_AVG(float16, uint16_t, f16, weft__elem_div_f32)
WEFT_CUDA_AVG(bfloat16, uint16_t, bf16, weft__elem_div_f32)
WEFT_CUDA_AVG(float32, float, plain<float>, weft__elem_div_f32)
WEFT_CUDA_AVG(float64, double, plain<double>, weft__elem_div_f64)
WEFT_CUDA_AVG(float8_e4m3, uint8_t, f8e4m3, weft__elem_div_f32)
WEFT_CUDA_AVG(float8_e5m2, uint8_t, f8e5m2, weft__elem_div_f32)
