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
 * Compiled to a fatbin (real code for a few architectures plus PTX) that libweft embeds and
 * loads with cuModuleLoadData; extern "C" keeps the names unmangled for cuModuleGetFunction.
 */
#include "device/cuda/kernel_args.h"
#include "device/reduce_elem.h"

#include <stdint.h>

namespace
{

/* Storage type S, computed in C: identity for all but the half types. */
template <typename S> struct plain {
    typedef S compute;
    __device__ static S load(S x)
    {
        return x;
    }
    __device__ static S store(S x)
    {
        return x;
    }
};
struct f16 {
    typedef float compute;
    __device__ static float load(uint16_t x)
    {
        return weft__f16_to_float(x);
    }
    __device__ static uint16_t store(float x)
    {
        return weft__float_to_f16(x);
    }
};
struct bf16 {
    typedef float compute;
    __device__ static float load(uint16_t x)
    {
        return weft__bf16_to_float(x);
    }
    __device__ static uint16_t store(float x)
    {
        return weft__float_to_bf16(x);
    }
};

__device__ __forceinline__ const void *input(const weft_cuda_reduce_args_t &a, int j)
{
    return j < WEFT_CUDA_INLINE_SRCS ? a.srcs[j] : a.more[j - WEFT_CUDA_INLINE_SRCS];
}

/* dst[i] for one element */
template <typename S, typename F, typename OP>
__device__ __forceinline__ void reduce_one(const weft_cuda_reduce_args_t &a, uint64_t i)
{
    typename F::compute acc = F::load(static_cast<const S *>(a.srcs[0])[i]);

    for (int j = 1; j < a.nsrcs; j++) {
        acc = OP::apply(acc, F::load(static_cast<const S *>(input(a, j))[i]));
    }
    static_cast<S *>(a.dst)[i] = F::store(acc);
}

template <typename S, typename F, typename OP>
__device__ __forceinline__ void reduce_body(const weft_cuda_reduce_args_t &a)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t done = 0;

    if (a.vector) {
        constexpr int per = WEFT_CUDA_VECTOR_BYTES / sizeof(S);
        union vec {
            uint4 v;
            S e[per];
        };
        const uint64_t nvec = a.count / per;

        for (uint64_t v = tid; v < nvec; v += stride) {
            typename F::compute acc[per];
            vec x;

            x.v = static_cast<const uint4 *>(a.srcs[0])[v];
#pragma unroll
            for (int k = 0; k < per; k++) {
                acc[k] = F::load(x.e[k]);
            }
            for (int j = 1; j < a.nsrcs; j++) {
                x.v = static_cast<const uint4 *>(input(a, j))[v];
#pragma unroll
                for (int k = 0; k < per; k++) {
                    acc[k] = OP::apply(acc[k], F::load(x.e[k]));
                }
            }
#pragma unroll
            for (int k = 0; k < per; k++) {
                x.e[k] = F::store(acc[k]);
            }
            static_cast<uint4 *>(a.dst)[v] = x.v;
        }
        done = nvec * per;
    }
    for (uint64_t i = done + tid; i < a.count; i += stride) {
        reduce_one<S, F, OP>(a, i);
    }
}

template <typename S, typename F>
__device__ __forceinline__ void avg_body(const weft_cuda_avg_args_t &a,
                                         typename F::compute (*div)(typename F::compute, uint64_t))
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    S *p = static_cast<S *>(a.buf);

    for (uint64_t i = tid; i < a.count; i += stride) {
        p[i] = F::store(div(F::load(p[i]), a.divisor));
    }
}

} // namespace

/* OP::apply of each element function of reduce_elem.h */
#define WEFT_CUDA_OP(op, sfx, C)                                                                   \
    namespace                                                                                      \
    {                                                                                              \
    struct op##_##sfx {                                                                            \
        __device__ static C apply(C a, C b)                                                        \
        {                                                                                          \
            return weft__elem_##op##_##sfx(a, b);                                                  \
        }                                                                                          \
    };                                                                                             \
    }

#define WEFT_CUDA_UNSIGNED_OPS(sfx, C)                                                             \
    WEFT_CUDA_OP(sum, sfx, C)                                                                      \
    WEFT_CUDA_OP(prod, sfx, C)                                                                     \
    WEFT_CUDA_OP(band, sfx, C)                                                                     \
    WEFT_CUDA_OP(bor, sfx, C)                                                                      \
    WEFT_CUDA_OP(bxor, sfx, C)                                                                     \
    WEFT_CUDA_OP(land, sfx, C)                                                                     \
    WEFT_CUDA_OP(lor, sfx, C)                                                                      \
    WEFT_CUDA_OP(lxor, sfx, C)
#define WEFT_CUDA_MINMAX_OPS(sfx, C)                                                               \
    WEFT_CUDA_OP(min, sfx, C)                                                                      \
    WEFT_CUDA_OP(max, sfx, C)

WEFT_CUDA_UNSIGNED_OPS(u8, uint8_t)
WEFT_CUDA_UNSIGNED_OPS(u32, uint32_t)
WEFT_CUDA_UNSIGNED_OPS(u64, uint64_t)
WEFT_CUDA_MINMAX_OPS(i8, int8_t)
WEFT_CUDA_MINMAX_OPS(u8, uint8_t)
WEFT_CUDA_MINMAX_OPS(i32, int32_t)
WEFT_CUDA_MINMAX_OPS(u32, uint32_t)
WEFT_CUDA_MINMAX_OPS(i64, int64_t)
WEFT_CUDA_MINMAX_OPS(u64, uint64_t)
WEFT_CUDA_MINMAX_OPS(f32, float)
WEFT_CUDA_MINMAX_OPS(f64, double)
WEFT_CUDA_OP(sum, f32, float)
WEFT_CUDA_OP(prod, f32, float)
WEFT_CUDA_OP(sum, f64, double)
WEFT_CUDA_OP(prod, f64, double)

/* kernel weft_reduce_<op>_<dtype>: storage S, format F, element function OP */
#define WEFT_CUDA_REDUCE(op, dtype, S, F, OP)                                                      \
    extern "C" __global__ void __launch_bounds__(WEFT_CUDA_THREADS)                                \
        weft_reduce_##op##_##dtype(weft_cuda_reduce_args_t args)                                   \
    {                                                                                              \
        reduce_body<S, F, OP>(args);                                                               \
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

/* Floats; half types combine in float (f32) */
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

/* kernel weft_avg_<dtype>: buf[i] = DIV(buf[i], divisor), half types in float */
#define WEFT_CUDA_AVG(dtype, S, F, DIV)                                                            \
    extern "C" __global__ void __launch_bounds__(WEFT_CUDA_THREADS)                                \
        weft_avg_##dtype(weft_cuda_avg_args_t args)                                                \
    {                                                                                              \
        avg_body<S, F>(args, DIV);                                                                 \
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
