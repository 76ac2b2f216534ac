/*
 * The bodies of the CUDA kernels (kernels.cu), as __host__ __device__ templates over the thread
 * index, so that tests/device/cuda_kernel_host.cu runs the same code on the CPU, one "thread"
 * after another, and checks its indexing (vector loads, the tail, inputs beyond the inline
 * ones, in place) where no GPU is. Each element is touched by exactly one thread, and each
 * thread reads element i of every input before writing dst[i], so the threads may run in any
 * order. C++ (nvcc) only.
 */
#ifndef WEFT_DEVICE_CUDA_KERNEL_BODY_CUH
#define WEFT_DEVICE_CUDA_KERNEL_BODY_CUH

#include "device/cuda/kernel_args.h"
#include "device/reduce_elem.h"

#include <stdint.h>
#include <vector_types.h>

/* per-element loops of a vector are unrolled on the GPU (host compilers know no such pragma) */
#ifdef __CUDA_ARCH__
#define WEFT_CUDA_UNROLL _Pragma("unroll")
#else
#define WEFT_CUDA_UNROLL
#endif

namespace weft_cuda
{

/* Storage type S, computed in C: identity for all but the half types. */
template <typename S> struct plain {
    typedef S compute;
    WEFT_HD static S load(S x)
    {
        return x;
    }
    WEFT_HD static S store(S x)
    {
        return x;
    }
};
struct f16 {
    typedef float compute;
    WEFT_HD static float load(uint16_t x)
    {
        return weft__f16_to_float(x);
    }
    WEFT_HD static uint16_t store(float x)
    {
        return weft__float_to_f16(x);
    }
};
struct bf16 {
    typedef float compute;
    WEFT_HD static float load(uint16_t x)
    {
        return weft__bf16_to_float(x);
    }
    WEFT_HD static uint16_t store(float x)
    {
        return weft__float_to_bf16(x);
    }
};

struct f8e4m3 {
    typedef float compute;
    WEFT_HD static float load(uint8_t x)
    {
        return weft__f8e4m3_to_float(x);
    }
    WEFT_HD static uint8_t store(float x)
    {
        return weft__float_to_f8e4m3(x);
    }
};
struct f8e5m2 {
    typedef float compute;
    WEFT_HD static float load(uint8_t x)
    {
        return weft__f8e5m2_to_float(x);
    }
    WEFT_HD static uint8_t store(float x)
    {
        return weft__float_to_f8e5m2(x);
    }
};

WEFT_HD inline const void *input(const weft_cuda_reduce_args_t &a, int j)
{
    return j < WEFT_CUDA_INLINE_SRCS ? a.srcs[j] : a.more[j - WEFT_CUDA_INLINE_SRCS];
}

/* dst[i] for one element */
template <typename S, typename F, typename OP>
WEFT_HD inline void reduce_one(const weft_cuda_reduce_args_t &a, uint64_t i)
{
    typename F::compute acc = F::load(static_cast<const S *>(a.srcs[0])[i]);

    for (int j = 1; j < a.nsrcs; j++) {
        acc = OP::apply(acc, F::load(static_cast<const S *>(input(a, j))[i]));
    }
    static_cast<S *>(a.dst)[i] = F::store(acc);
}

/* The work of thread tid of `stride` threads (grid-stride loops): vectors v = tid, tid + stride,
 * ... when a.vector, then the elements past the last whole vector. */
template <typename S, typename F, typename OP>
WEFT_HD inline void reduce_body(const weft_cuda_reduce_args_t &a, uint64_t tid, uint64_t stride)
{
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
            WEFT_CUDA_UNROLL
            for (int k = 0; k < per; k++) {
                acc[k] = F::load(x.e[k]);
            }
            for (int j = 1; j < a.nsrcs; j++) {
                x.v = static_cast<const uint4 *>(input(a, j))[v];
                WEFT_CUDA_UNROLL
                for (int k = 0; k < per; k++) {
                    acc[k] = OP::apply(acc[k], F::load(x.e[k]));
                }
            }
            WEFT_CUDA_UNROLL
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
WEFT_HD inline void avg_body(const weft_cuda_avg_args_t &a, uint64_t tid, uint64_t stride,
                             typename F::compute (*div)(typename F::compute, uint64_t))
{
    S *p = static_cast<S *>(a.buf);

    for (uint64_t i = tid; i < a.count; i += stride) {
        p[i] = F::store(div(F::load(p[i]), a.divisor));
    }
}

} // namespace weft_cuda

/* OP::apply of each element function of reduce_elem.h */
#define WEFT_CUDA_OP(op, sfx, C)                                                                   \
    namespace weft_cuda                                                                            \
    {                                                                                              \
    struct op##_##sfx {                                                                            \
        WEFT_HD static C apply(C a, C b)                                                           \
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

#endif /* WEFT_DEVICE_CUDA_KERNEL_BODY_CUH */
