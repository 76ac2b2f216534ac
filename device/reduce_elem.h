/*
 * The per-element arithmetic of reductions, shared by every backend: the host loops
 * (device/host/reduce.c) and the CUDA kernels (device/cuda/kernels.cu) call these same
 * functions, so the CPU tests of the host table check the arithmetic the GPU runs, and the two
 * give the same bits. Each function combines two elements: weft__elem_<op>_<type>(a, b) with a
 * the accumulated value and b the next input, following the rules of device/device.h:
 *
 *  - integers: SUM, PROD and the bitwise and logical ops run on the unsigned type of the same
 *    width (two's complement wrap-around without signed-overflow UB); only MIN and MAX look at
 *    the sign. The logical ops give 0 or 1.
 *  - float SUM and PROD are one IEEE operation in the type's own precision (the CUDA kernels are
 *    compiled with -fmad=false, so nothing contracts them).
 *  - float MIN and MAX give the same bits whichever operand comes first: a NaN wins (of two
 *    NaNs, the larger bit pattern), -0 is below +0, and two equal floats other than -0 and +0
 *    have the same bits. Written as selects over comparisons so that host loops vectorize.
 *  - AVG combines as SUM (there is no weft__elem_avg_*); weft__elem_div_* is avg_finalize's
 *    division: integers truncate toward zero, floats divide in their own precision.
 *  - half types (FLOAT16, BFLOAT16) are combined with the float32 functions on values widened
 *    with device/host/half.h, and narrowed once at the end.
 *
 * Functions are `static inline` and WEFT_HD (__host__ __device__ under nvcc, nothing in C).
 * Pure: thread-safe.
 */
#ifndef WEFT_DEVICE_REDUCE_ELEM_H
#define WEFT_DEVICE_REDUCE_ELEM_H

#ifndef WEFT_HD
#ifdef __CUDACC__
#define WEFT_HD __host__ __device__
#else
#define WEFT_HD
#endif
#endif

#include "device/host/half.h"

#include <stdint.h>
#include <string.h>
#if !defined(__CUDA_ARCH__)
#include <math.h>
#endif

/*
 * Quiet comparisons. On the host they are C99's isless and isunordered, which raise no
 * floating-point exception and so let GCC vectorize the selects; the GPU has no exception
 * flags, and there they are the plain comparisons, which give the same values.
 */
#if defined(__CUDA_ARCH__)
#define WEFT__ELEM_ISLESS(a, b) ((a) < (b))
#define WEFT__ELEM_ISUNORDERED(a, b) ((a) != (a) || (b) != (b))
#define WEFT__ELEM_ISNAN(a) ((a) != (a))
#define WEFT__ELEM_SIGNBIT(a) signbit(a)
#else
#define WEFT__ELEM_ISLESS(a, b) isless((a), (b))
#define WEFT__ELEM_ISUNORDERED(a, b) isunordered((a), (b))
#define WEFT__ELEM_ISNAN(a) isnan(a)
#define WEFT__ELEM_SIGNBIT(a) signbit(a)
#endif

#define WEFT__ELEM_UNSIGNED(sfx, T)                                                                \
    WEFT_HD static inline T weft__elem_sum_##sfx(T a, T b)                                         \
    {                                                                                              \
        return (T)(a + b);                                                                         \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_prod_##sfx(T a, T b)                                        \
    {                                                                                              \
        return (T)(a * b);                                                                         \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_band_##sfx(T a, T b)                                        \
    {                                                                                              \
        return (T)(a & b);                                                                         \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_bor_##sfx(T a, T b)                                         \
    {                                                                                              \
        return (T)(a | b);                                                                         \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_bxor_##sfx(T a, T b)                                        \
    {                                                                                              \
        return (T)(a ^ b);                                                                         \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_land_##sfx(T a, T b)                                        \
    {                                                                                              \
        return (T)((a != 0) & (b != 0));                                                           \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_lor_##sfx(T a, T b)                                         \
    {                                                                                              \
        return (T)((a != 0) | (b != 0));                                                           \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_lxor_##sfx(T a, T b)                                        \
    {                                                                                              \
        return (T)((a != 0) ^ (b != 0));                                                           \
    }

#define WEFT__ELEM_INT_MINMAX(sfx, T)                                                              \
    WEFT_HD static inline T weft__elem_min_##sfx(T a, T b)                                         \
    {                                                                                              \
        return b < a ? b : a;                                                                      \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_max_##sfx(T a, T b)                                         \
    {                                                                                              \
        return a < b ? b : a;                                                                      \
    }

/* uint8_t * uint8_t is computed in int, which holds every product of two bytes */
WEFT__ELEM_UNSIGNED(u8, uint8_t)
WEFT__ELEM_UNSIGNED(u32, uint32_t)
WEFT__ELEM_UNSIGNED(u64, uint64_t)
WEFT__ELEM_INT_MINMAX(i8, int8_t)
WEFT__ELEM_INT_MINMAX(u8, uint8_t)
WEFT__ELEM_INT_MINMAX(i32, int32_t)
WEFT__ELEM_INT_MINMAX(u32, uint32_t)
WEFT__ELEM_INT_MINMAX(i64, int64_t)
WEFT__ELEM_INT_MINMAX(u64, uint64_t)

#define WEFT__ELEM_FLOAT(sfx, T, U)                                                                \
    WEFT_HD static inline T weft__elem_sum_##sfx(T a, T b)                                         \
    {                                                                                              \
        return a + b;                                                                              \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_prod_##sfx(T a, T b)                                        \
    {                                                                                              \
        return a * b;                                                                              \
    }                                                                                              \
    WEFT_HD static inline U weft__elem_bits_##sfx(T x)                                             \
    {                                                                                              \
        U bits;                                                                                    \
                                                                                                   \
        memcpy(&bits, &x, sizeof(bits));                                                           \
        return bits;                                                                               \
    }                                                                                              \
    /* at least one of a and b is a NaN */                                                         \
    WEFT_HD static inline T weft__elem_nan_##sfx(T a, T b)                                         \
    {                                                                                              \
        return WEFT__ELEM_ISNAN(b) && (!WEFT__ELEM_ISNAN(a) ||                                     \
                                       weft__elem_bits_##sfx(b) > weft__elem_bits_##sfx(a))        \
                   ? b                                                                             \
                   : a;                                                                            \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_min_##sfx(T a, T b)                                         \
    {                                                                                              \
        T min = a == b ? (WEFT__ELEM_SIGNBIT(a) ? a : b) : WEFT__ELEM_ISLESS(b, a) ? b : a;        \
                                                                                                   \
        return WEFT__ELEM_ISUNORDERED(a, b) ? weft__elem_nan_##sfx(a, b) : min;                    \
    }                                                                                              \
    WEFT_HD static inline T weft__elem_max_##sfx(T a, T b)                                         \
    {                                                                                              \
        T max = a == b ? (WEFT__ELEM_SIGNBIT(a) ? b : a) : WEFT__ELEM_ISLESS(a, b) ? b : a;        \
                                                                                                   \
        return WEFT__ELEM_ISUNORDERED(a, b) ? weft__elem_nan_##sfx(a, b) : max;                    \
    }

WEFT__ELEM_FLOAT(f32, float, uint32_t)
WEFT__ELEM_FLOAT(f64, double, uint64_t)

/* avg_finalize: x / divisor, truncating toward zero for integers. Only INT64_MIN has a nonzero
 * quotient by a divisor beyond INT64_MAX, which cannot be converted to int64_t. */
WEFT_HD static inline int64_t weft__elem_div_signed(int64_t x, uint64_t divisor)
{
    if (divisor <= (uint64_t)INT64_MAX) {
        return x / (int64_t)divisor;
    }
    return x == INT64_MIN && divisor == (uint64_t)INT64_MAX + 1 ? -1 : 0;
}

WEFT_HD static inline int8_t weft__elem_div_i8(int8_t x, uint64_t d)
{
    return (int8_t)weft__elem_div_signed(x, d);
}
WEFT_HD static inline uint8_t weft__elem_div_u8(uint8_t x, uint64_t d)
{
    return (uint8_t)(x / d);
}
WEFT_HD static inline int32_t weft__elem_div_i32(int32_t x, uint64_t d)
{
    return (int32_t)weft__elem_div_signed(x, d);
}
WEFT_HD static inline uint32_t weft__elem_div_u32(uint32_t x, uint64_t d)
{
    return (uint32_t)(x / d);
}
WEFT_HD static inline int64_t weft__elem_div_i64(int64_t x, uint64_t d)
{
    return weft__elem_div_signed(x, d);
}
WEFT_HD static inline uint64_t weft__elem_div_u64(uint64_t x, uint64_t d)
{
    return x / d;
}
WEFT_HD static inline float weft__elem_div_f32(float x, uint64_t d)
{
    return x / (float)d;
}
WEFT_HD static inline double weft__elem_div_f64(double x, uint64_t d)
{
    return x / (double)d;
}

#endif /* WEFT_DEVICE_REDUCE_ELEM_H */
