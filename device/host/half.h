/*
 * Conversions between float and the narrow float formats, in portable C (no _Float16, no
 * intrinsics), so that every compiler and CPU gives the same bits:
 *  - FLOAT16, IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits;
 *  - BFLOAT16, the upper half of a binary32: 1 sign, 8 exponent, 7 mantissa bits;
 *  - FLOAT8_E4M3 and FLOAT8_E5M2, the two 8-bit formats of the OCP 8-bit floating point
 *    specification (torch.float8_e4m3fn / float8_e5m2, ml_dtypes, CUDA's __nv_fp8_e4m3 /
 *    __nv_fp8_e5m2); their rules follow the 16-bit ones below.
 *
 * Widening is exact, subnormal halves included. Narrowing rounds to nearest, ties to even; gives
 * subnormal results where they are the nearest value; overflows to +/-inf; keeps inf; keeps a
 * NaN a NaN: quiet, with its sign and the top of its payload (as x86 F16C and Arm do), so a NaN
 * whose payload lies only in the dropped bits cannot turn into inf.
 *
 * Every function computes all cases and picks one with bit masks, without branches, so loops
 * over arrays vectorize. (With ?: gcc moves the float operation of the subnormal case into a
 * branch, because it may raise a floating-point exception, and then gives up on the loop.) The
 * FLOAT16 subnormal cases use one float addition or subtraction, which is exact or rounds to
 * nearest even under the default rounding mode: C starts programs in it and weft never changes
 * it. Flush-to-zero and denormals-are-zero modes leave the results alone: the only float
 * subnormal that can reach that addition is an input far below the smallest FLOAT16 subnormal,
 * which rounds to zero either way.
 *
 * Pure functions: thread-safe. They are WEFT_HD (__host__ __device__ under nvcc), so the CUDA
 * kernels convert with this same code (device/reduce_elem.h).
 */
#ifndef WEFT_DEVICE_HOST_HALF_H
#define WEFT_DEVICE_HOST_HALF_H

#include <stdint.h>
#include <string.h>

#ifndef WEFT_HD
#ifdef __CUDACC__
#define WEFT_HD __host__ __device__
#else
#define WEFT_HD
#endif
#endif

WEFT_HD static inline uint32_t weft__float_bits(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    return bits;
}

WEFT_HD static inline float weft__float_from_bits(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* cond (0 or 1) ? a : b */
WEFT_HD static inline uint32_t weft__select32(uint32_t cond, uint32_t a, uint32_t b)
{
    uint32_t mask = 0u - cond;

    return (a & mask) | (b & ~mask);
}

WEFT_HD static inline float weft__f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    /* exponent and mantissa moved to their float positions */
    uint32_t body = (uint32_t)(h & 0x7fffu) << 13;
    uint32_t exponent = body & 0x0f800000u;
    uint32_t normal = body + ((uint32_t)(127 - 15) << 23);
    /* inf and NaN: the all-ones exponent, the payload kept */
    uint32_t special = body | 0x7f800000u;
    /* subnormal m * 2^-24, computed as (1 + m / 1024) * 2^-14 - 2^-14, which is exact */
    float subnormal = weft__float_from_bits(body + ((uint32_t)(127 - 14) << 23)) - 0x1p-14f;
    uint32_t bits = weft__select32(exponent == 0, weft__float_bits(subnormal), normal);

    bits = weft__select32(exponent == 0x0f800000u, special, bits);
    return weft__float_from_bits(sign | bits);
}

WEFT_HD static inline uint16_t weft__float_to_f16(float f)
{
    uint32_t bits = weft__float_bits(f);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t abs = bits & 0x7fffffffu;
    /* normal result: rebias the exponent, then round the 13 dropped bits to nearest even by
     * adding just under half of the last kept bit, plus one when that bit is odd; a carry out
     * of the mantissa correctly bumps the exponent, up to inf */
    uint32_t normal = (abs - ((uint32_t)(127 - 15) << 23) + 0x0fffu + ((abs >> 13) & 1u)) >> 13;
    /* subnormal result: in 0.5 + |f| the last float mantissa bit is worth 2^-24, the FLOAT16
     * subnormal step, so the float addition itself rounds |f| to that grid, ties to even */
    uint32_t subnormal = weft__float_bits(weft__float_from_bits(abs) + 0.5f) - 0x3f000000u;
    uint32_t nan = 0x7e00u | ((abs >> 13) & 0x3ffu);
    uint32_t half = weft__select32(abs < 0x38800000u, subnormal, normal); /* below 2^-14 */

    half = weft__select32(abs >= 0x47800000u, 0x7c00u, half); /* 65536 and above, inf too */
    half = weft__select32(abs > 0x7f800000u, nan, half);
    return (uint16_t)(sign | half);
}

WEFT_HD static inline float weft__bf16_to_float(uint16_t h)
{
    return weft__float_from_bits((uint32_t)h << 16);
}

WEFT_HD static inline uint16_t weft__float_to_bf16(float f)
{
    uint32_t bits = weft__float_bits(f);
    /* same rounding as the FLOAT16 normal case; bfloat16 shares the float exponent range, so
     * subnormals and the overflow to inf come out of the same carry */
    uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    uint32_t nan = (bits >> 16) | 0x0040u;

    return (uint16_t)weft__select32((bits & 0x7fffffffu) > 0x7f800000u, nan, rounded);
}

/*
 * The 8-bit formats, rounded directly from float (through FLOAT16 would round twice):
 *  - FLOAT8_E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, the top byte of a FLOAT16;
 *    IEEE-like: subnormals, +/-inf, NaNs. Largest finite 57344; magnitudes from 61440 (the
 *    midpoint to 65536, a tie that goes to the even code, inf) overflow to inf.
 *  - FLOAT8_E4M3 (the "fn" variant: finite and NaN only): 1 sign, 4 exponent (bias 7), 3 mantissa
 *    bits; no inf; S.1111.111 is NaN, so the largest finite is 448 (S.1111.110). It saturates:
 *    every magnitude that would round above 448, inf included, gives +/-448, as torch's
 *    conversion to float8_e4m3fn and CUDA's __nv_fp8_e4m3 (__NV_SATFINITE) do.
 * Both round to nearest, ties to even, give subnormals where they are nearest, and turn every
 * NaN into the format's NaN 0x7f with the input's sign (torch gives the same bits). Widening is
 * exact; an E5M2 NaN widens with its payload, an E4M3 NaN to the quiet float NaN.
 *
 * The subnormal case uses the FLOAT16 trick with another constant: in C + |f| with
 * C = 2^23 * step (step the smallest subnormal, 2^-9 for E4M3, 2^-16 for E5M2) the last float
 * mantissa bit is worth one step, so the float addition rounds |f| to the subnormal grid, and
 * bits(C + |f|) - bits(C) is the code, the smallest normal (a carry) included.
 */
WEFT_HD static inline float weft__f8e5m2_to_float(uint8_t h)
{
    return weft__f16_to_float((uint16_t)((uint16_t)h << 8));
}

WEFT_HD static inline uint8_t weft__float_to_f8e5m2(float f)
{
    uint32_t bits = weft__float_bits(f);
    uint32_t sign = (bits >> 24) & 0x80u;
    uint32_t abs = bits & 0x7fffffffu;
    /* rebias (127 -> 15), round the 21 dropped bits to nearest even */
    uint32_t normal = (abs - ((uint32_t)(127 - 15) << 23) + 0x0fffffu + ((abs >> 21) & 1u)) >> 21;
    uint32_t subnormal = weft__float_bits(weft__float_from_bits(abs) + 0x1p7f) - 0x43000000u;
    uint32_t r = weft__select32(abs < 0x38800000u, subnormal, normal); /* below 2^-14 */

    r = weft__select32(abs >= 0x47700000u, 0x7cu, r); /* 61440 and above, inf too */
    r = weft__select32(abs > 0x7f800000u, 0x7fu, r);
    return (uint8_t)(sign | r);
}

WEFT_HD static inline float weft__f8e4m3_to_float(uint8_t h)
{
    uint32_t sign = (uint32_t)(h & 0x80u) << 24;
    uint32_t body = (uint32_t)(h & 0x7fu) << 20;
    uint32_t normal = body + ((uint32_t)(127 - 7) << 23);
    /* subnormal m * 2^-9, computed as (1 + m / 8) * 2^-6 - 2^-6, which is exact */
    float subnormal = weft__float_from_bits(body + ((uint32_t)(127 - 6) << 23)) - 0x1p-6f;
    uint32_t bits = weft__select32((h & 0x78u) == 0, weft__float_bits(subnormal), normal);

    bits = weft__select32((h & 0x7fu) == 0x7fu, 0x7fc00000u, bits);
    return weft__float_from_bits(sign | bits);
}

WEFT_HD static inline uint8_t weft__float_to_f8e4m3(float f)
{
    uint32_t bits = weft__float_bits(f);
    uint32_t sign = (bits >> 24) & 0x80u;
    uint32_t abs = bits & 0x7fffffffu;
    /* rebias (127 -> 7), round the 20 dropped bits to nearest even */
    uint32_t normal = (abs - ((uint32_t)(127 - 7) << 23) + 0x07ffffu + ((abs >> 20) & 1u)) >> 20;
    uint32_t subnormal = weft__float_bits(weft__float_from_bits(abs) + 0x1p14f) - 0x46800000u;
    uint32_t r = weft__select32(abs < 0x3c800000u, subnormal, normal); /* below 2^-6 */

    r = weft__select32(abs > 0x43e80000u, 0x7eu, r); /* above 464 (to 448 even at the tie) */
    r = weft__select32(abs > 0x7f800000u, 0x7fu, r);
    return (uint8_t)(sign | r);
}

#endif /* WEFT_DEVICE_HOST_HALF_H */
