/*
 * Host reductions: dst = srcs[0] op srcs[1] op ... op srcs[n - 1], element-wise, for every dtype
 * and op that weft__op_valid_for_dtype() accepts.
 *
 * Cost: this is the gamma term of the collectives' alpha-beta-gamma models. One pass moves
 * (n + 1) * count * size bytes for (n - 1) * count ops, so the loops must run at memory
 * bandwidth. Each (dtype, op) gets two restrict-qualified loops that the compiler vectorizes:
 *     binary      d[i] = a[i] op b[i]
 *     accumulate  d[i] = d[i] op b[i]
 * and n inputs are reduced one block of dst at a time, so that the block stays in L1 while the
 * inputs stream through once:
 *
 *              |<- block ->|<- block ->|
 *     srcs[0]  |...........|...........|...   d = srcs[0] op srcs[1]      (binary)
 *     srcs[1]  |...........|...........|...   d = d op srcs[2]            (accumulate, d in L1)
 *     srcs[2]  |...........|...........|...   ...
 *     dst      |###########|...........|...   then the next block
 *
 * A result that trails an input by a few bytes modulo 4 KiB (ALIAS_WINDOW) is made block by
 * block in a buffer placed apart from every input and copied into dst (reduce_staged): the CPU
 * takes each load of the input that follows a store to dst with the same low address bits for
 * a read of that store and waits for it, up to 4x slower (16x for data in the caches) with
 * huge pages, where numpy puts its large arrays, one after the other 16 bytes apart.
 *
 * Order: inputs are combined in index order, ((s0 op s1) op s2) ..., whichever input dst
 * aliases, because float sums and products round differently in another order and every rank
 * must get the same bits. When dst is a later input, its block is saved before being written.
 *
 * Arithmetic: each element is combined by the functions of device/reduce_elem.h, the ones the
 * CUDA kernels run (integer wrap-around, float MIN/MAX NaN and signed-zero rules are stated
 * there). Half types (and the 8-bit floats) widen each block of every input to a float buffer
 * on the stack, combine there with the float kernels, and round once into dst: float32
 * accumulation for FLOAT8_E4M3 and FLOAT8_E5M2, with their portable conversions.
 *
 * Half conversions at memory speed: the portable conversions (device/host/half.h) run a few
 * dozen integer operations an element. On x86-64 CPUs with F16C and AVX2 (checked at run time)
 * float16 converts with vcvtph2ps / vcvtps2ph, eight elements an instruction, rounding to
 * nearest even as the portable code does (the same bits: tests/device/test_reduce.c compares
 * them on every half and on millions of floats; signaling NaNs keep their payload), and
 * bfloat16 with AVX2 integer operations (a shift to widen, the portable rounding on eight
 * lanes). Sums and products of both go further: one pass widens every input's eight elements,
 * combines them in input order and rounds once (the arithmetic of the block loops). The 8-bit
 * floats the same way with AVX2 (half.h's integer steps on eight lanes).
 * weft__host_reduce_simd(0) keeps to the portable loops (tests).
 */
#include "device/host/host.h"
#include "device/host/half.h"
#include "device/reduce_elem.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HOST_X86 1
#endif

/* Bytes of dst per block: well inside L1d (32-48 KiB), leaving room for the input lines. */
#define BLOCK_BYTES 16384
/* Elements per block of the half types: two float buffers of this size sit on the stack. */
#define HALF_BLOCK 2048
/* A result that trails an input by less than this many bytes modulo 4 KiB goes through a
 * buffer (reduce_staged): measured on a Xeon, a float32 sum of 1 MiB into a result 16 bytes
 * past an input's address modulo 4 KiB ran at 1.7 GB/s (huge pages; 6.8 with 4 KiB pages)
 * against 8.3, 32 bytes 3.3, 64 bytes 6.2, from 128 bytes at full speed; 2-16 KiB in the
 * caches 16x slower (1.6 against 17-30 GB/s). numpy arrays allocated one after the other
 * (`out = np.empty_like(a)`) sit 16 bytes apart so. */
#define ALIAS_WINDOW 128
/* Inputs the staged path takes (more: the direct loops) */
#define STAGED_MAX_INPUTS 64
/* Results from this many bytes take it (2 KiB trailing by 16 bytes: 1.3 us against 0.1) */
#define STAGED_MIN_BYTES 256

static atomic_uint_fast64_t staged_calls;

typedef struct {
    void (*binary)(void *restrict d, const void *restrict a, const void *restrict b, size_t n);
    void (*accumulate)(void *restrict d, const void *restrict b, size_t n);
} kernel_t;

/* A narrow float format (the 16- and 8-bit dtypes): arrays widened to float and rounded back;
 * the CPU-specific formats also sum (mul 0) or multiply (mul 1) nsrcs inputs in one pass. */
typedef struct {
    size_t size; /* bytes per element */
    void (*widen)(float *restrict out, const void *restrict in, size_t n);
    void (*narrow)(void *restrict out, const float *restrict in, size_t n);
    void (*sum_prod)(void *dst, const void *const *srcs, int nsrcs, size_t count, int mul);
} half_format_t;

/* The binary and accumulate loops of one (type, op), and the kernel_t `name` holding them. */
#define KERNEL(name, T, OP)                                                                        \
    static void name##_binary(void *restrict dv, const void *restrict av, const void *restrict bv, \
                              size_t n)                                                            \
    {                                                                                              \
        T *restrict d = dv;                                                                        \
        const T *restrict a = av;                                                                  \
        const T *restrict b = bv;                                                                  \
                                                                                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            d[i] = (T)OP(a[i], b[i]);                                                              \
        }                                                                                          \
    }                                                                                              \
    static void name##_accumulate(void *restrict dv, const void *restrict bv, size_t n)            \
    {                                                                                              \
        T *restrict d = dv;                                                                        \
        const T *restrict b = bv;                                                                  \
                                                                                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            d[i] = (T)OP(d[i], b[i]);                                                              \
        }                                                                                          \
    }                                                                                              \
    static const kernel_t name = {.binary = name##_binary, .accumulate = name##_accumulate};

/* The element functions of device/reduce_elem.h, shared with the CUDA kernels. */
#define UNSIGNED_KERNELS(sfx, T)                                                                   \
    KERNEL(sum_##sfx, T, weft__elem_sum_##sfx)                                                     \
    KERNEL(prod_##sfx, T, weft__elem_prod_##sfx)                                                   \
    KERNEL(band_##sfx, T, weft__elem_band_##sfx)                                                   \
    KERNEL(bor_##sfx, T, weft__elem_bor_##sfx)                                                     \
    KERNEL(bxor_##sfx, T, weft__elem_bxor_##sfx)                                                   \
    KERNEL(land_##sfx, T, weft__elem_land_##sfx)                                                   \
    KERNEL(lor_##sfx, T, weft__elem_lor_##sfx)                                                     \
    KERNEL(lxor_##sfx, T, weft__elem_lxor_##sfx)

#define MINMAX_KERNELS(sfx, T)                                                                     \
    KERNEL(min_##sfx, T, weft__elem_min_##sfx)                                                     \
    KERNEL(max_##sfx, T, weft__elem_max_##sfx)

UNSIGNED_KERNELS(u8, uint8_t)
UNSIGNED_KERNELS(u32, uint32_t)
UNSIGNED_KERNELS(u64, uint64_t)
MINMAX_KERNELS(i8, int8_t)
MINMAX_KERNELS(u8, uint8_t)
MINMAX_KERNELS(i32, int32_t)
MINMAX_KERNELS(u32, uint32_t)
MINMAX_KERNELS(i64, int64_t)
MINMAX_KERNELS(u64, uint64_t)
MINMAX_KERNELS(f32, float)
MINMAX_KERNELS(f64, double)
KERNEL(sum_f32, float, weft__elem_sum_f32)
KERNEL(prod_f32, float, weft__elem_prod_f32)
KERNEL(sum_f64, double, weft__elem_sum_f64)
KERNEL(prod_f64, double, weft__elem_prod_f64)

/* AVG combines as SUM; the caller divides once at the end (avg_finalize). */
#define INT_ROW(s, u)                                                                              \
    {                                                                                              \
        [WEFT_SUM] = &sum_##u, [WEFT_PROD] = &prod_##u, [WEFT_MIN] = &min_##s,                     \
        [WEFT_MAX] = &max_##s, [WEFT_AVG] = &sum_##u, [WEFT_BAND] = &band_##u,                     \
        [WEFT_BOR] = &bor_##u, [WEFT_BXOR] = &bxor_##u, [WEFT_LAND] = &land_##u,                   \
        [WEFT_LOR] = &lor_##u, [WEFT_LXOR] = &lxor_##u,                                            \
    }
#define FLOAT_ROW(f)                                                                               \
    {                                                                                              \
        [WEFT_SUM] = &sum_##f, [WEFT_PROD] = &prod_##f, [WEFT_MIN] = &min_##f,                     \
        [WEFT_MAX] = &max_##f, [WEFT_AVG] = &sum_##f,                                              \
    }

/* NULL where the op is not defined for the dtype. The narrow float types (16 and 8 bits) run the
 * float kernels on widened blocks. */
static const kernel_t *const kernels[WEFT_DTYPE_COUNT][WEFT_OP_COUNT] = {
    [WEFT_INT8] = INT_ROW(i8, u8),       [WEFT_UINT8] = INT_ROW(u8, u8),
    [WEFT_INT32] = INT_ROW(i32, u32),    [WEFT_UINT32] = INT_ROW(u32, u32),
    [WEFT_INT64] = INT_ROW(i64, u64),    [WEFT_UINT64] = INT_ROW(u64, u64),
    [WEFT_FLOAT16] = FLOAT_ROW(f32),     [WEFT_BFLOAT16] = FLOAT_ROW(f32),
    [WEFT_FLOAT32] = FLOAT_ROW(f32),     [WEFT_FLOAT64] = FLOAT_ROW(f64),
    [WEFT_FLOAT8_E4M3] = FLOAT_ROW(f32), [WEFT_FLOAT8_E5M2] = FLOAT_ROW(f32),
};

#define HALF_FORMAT(name, T, to_float, from_float)                                                 \
    static void name##_widen(float *restrict out, const void *restrict inv, size_t n)              \
    {                                                                                              \
        const T *restrict in = inv;                                                                \
                                                                                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            out[i] = to_float(in[i]);                                                              \
        }                                                                                          \
    }                                                                                              \
    static void name##_narrow(void *restrict outv, const float *restrict in, size_t n)             \
    {                                                                                              \
        T *restrict out = outv;                                                                    \
                                                                                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            out[i] = from_float(in[i]);                                                            \
        }                                                                                          \
    }                                                                                              \
    static const half_format_t name = {                                                            \
        .size = sizeof(T), .widen = name##_widen, .narrow = name##_narrow};

HALF_FORMAT(f16_format, uint16_t, weft__f16_to_float, weft__float_to_f16)
HALF_FORMAT(bf16_format, uint16_t, weft__bf16_to_float, weft__float_to_bf16)
HALF_FORMAT(f8e4m3_format, uint8_t, weft__f8e4m3_to_float, weft__float_to_f8e4m3)
HALF_FORMAT(f8e5m2_format, uint8_t, weft__f8e5m2_to_float, weft__float_to_f8e5m2)

static atomic_int simd_allowed = 1;

int weft__host_reduce_simd(int on)
{
    return atomic_exchange(&simd_allowed, on != 0);
}

#ifdef HOST_X86
#define X86_F16 __attribute__((target("avx2,f16c")))
#define X86_AVX2 __attribute__((target("avx2")))

/* Eight float16 widened as weft__f16_to_float does: vcvtph2ps quiets a signaling NaN (sets the
 * top mantissa bit), the portable code keeps the payload as it is, so NaN lanes take the
 * portable bits (sign, all-ones exponent, payload << 13). */
X86_F16 static inline __m256 f16c_to_ps(__m128i h)
{
    __m256 f = _mm256_cvtph_ps(h);
    __m256i w = _mm256_cvtepu16_epi32(h);
    __m256i exponent = _mm256_and_si256(w, _mm256_set1_epi32(0x7c00));
    __m256i payload = _mm256_and_si256(w, _mm256_set1_epi32(0x3ff));
    __m256i nan = _mm256_andnot_si256(_mm256_cmpeq_epi32(payload, _mm256_setzero_si256()),
                                      _mm256_cmpeq_epi32(exponent, _mm256_set1_epi32(0x7c00)));

    if (_mm256_testz_si256(nan, nan)) {
        return f;
    }
    __m256i bits = _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                        _mm256_set1_epi32(0x7f800000)),
        _mm256_slli_epi32(payload, 13));

    return _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
}

X86_F16 static inline __m256 f16c_load8(const uint16_t *p)
{
    return f16c_to_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Eight float16 widened for a sum or product: vcvtph2ps alone. Quieting a signaling NaN here
 * changes nothing, as the arithmetic quiets it anyway and x86 picks the NaN to keep by operand
 * position, not by kind. */
X86_F16 static inline __m256 f16c_load8_arith(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

X86_F16 static inline __m128i f16c_round8(__m256 f)
{
    return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* Eight bfloat16 widened (a shift, as weft__bf16_to_float) and eight floats rounded with
 * weft__float_to_bf16's rounding and NaN rule. */
X86_AVX2 static inline __m256 bf16_load8(const uint16_t *p)
{
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

X86_AVX2 static inline __m128i bf16_round8(__m256 f)
{
    __m256i bits = _mm256_castps_si256(f);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);
    __m256i nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                        _mm256_set1_epi32(0x7f800000));
    __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);

    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/*
 * The array conversions, and the sum (mul 0) or product (mul 1) of nsrcs inputs in one pass:
 * eight elements of every input widened, combined in input order in float, rounded once. The
 * same operations, in the same order, as the block loops (x86 keeps the first operand's NaN
 * either way); every input's eight elements are read before dst's are written, so dst may
 * alias any input. Tails go through the portable conversions.
 */
#define X86_NARROW(name, T, ATTR, LOAD8, ARITH_LOAD8, STORE8, to_float, from_float)                \
    ATTR static void name##_widen(float *restrict out, const void *restrict inv, size_t n)         \
    {                                                                                              \
        const T *restrict in = inv;                                                                \
        size_t i = 0;                                                                              \
                                                                                                   \
        for (; i + 8 <= n; i += 8) {                                                               \
            _mm256_storeu_ps(out + i, LOAD8(in + i));                                              \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            out[i] = to_float(in[i]);                                                              \
        }                                                                                          \
    }                                                                                              \
    ATTR static void name##_narrow(void *restrict outv, const float *restrict in, size_t n)        \
    {                                                                                              \
        T *restrict out = outv;                                                                    \
        size_t i = 0;                                                                              \
                                                                                                   \
        for (; i + 8 <= n; i += 8) {                                                               \
            STORE8(out + i, _mm256_loadu_ps(in + i));                                              \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            out[i] = from_float(in[i]);                                                            \
        }                                                                                          \
    }                                                                                              \
    ATTR static void name##_sum_prod(void *dstv, const void *const *srcs, int nsrcs, size_t count, \
                                     int mul)                                                      \
    {                                                                                              \
        T *dst = dstv;                                                                             \
        size_t i = 0;                                                                              \
                                                                                                   \
        for (; i + 8 <= count; i += 8) {                                                           \
            __m256 acc = ARITH_LOAD8((const T *)srcs[0] + i);                                      \
                                                                                                   \
            for (int j = 1; j < nsrcs; j++) {                                                      \
                __m256 x = ARITH_LOAD8((const T *)srcs[j] + i);                                    \
                                                                                                   \
                acc = mul ? _mm256_mul_ps(acc, x) : _mm256_add_ps(acc, x);                         \
            }                                                                                      \
            STORE8(dst + i, acc);                                                                  \
        }                                                                                          \
        for (; i < count; i++) {                                                                   \
            float acc = to_float(((const T *)srcs[0])[i]);                                         \
                                                                                                   \
            for (int j = 1; j < nsrcs; j++) {                                                      \
                float x = to_float(((const T *)srcs[j])[i]);                                       \
                                                                                                   \
                acc = mul ? acc * x : acc + x;                                                     \
            }                                                                                      \
            dst[i] = from_float(acc);                                                              \
        }                                                                                          \
    }                                                                                              \
    static const half_format_t name = {.size = sizeof(T),                                          \
                                       .widen = name##_widen,                                      \
                                       .narrow = name##_narrow,                                    \
                                       .sum_prod = name##_sum_prod};

/* eight halves rounded and stored */
X86_F16 static inline void f16c_store8(uint16_t *p, __m256 f)
{
    _mm_storeu_si128((__m128i *)p, f16c_round8(f));
}

X86_AVX2 static inline void bf16_store8(uint16_t *p, __m256 f)
{
    _mm_storeu_si128((__m128i *)p, bf16_round8(f));
}

X86_NARROW(f16_x86, uint16_t, X86_F16, f16c_load8, f16c_load8_arith, f16c_store8,
           weft__f16_to_float, weft__float_to_f16)
X86_NARROW(bf16_x86, uint16_t, X86_AVX2, bf16_load8, bf16_load8, bf16_store8, weft__bf16_to_float,
           weft__float_to_bf16)

/*
 * The 8-bit floats with AVX2: the portable conversions of device/host/half.h on eight lanes,
 * the same integer operations and the same float addition for subnormal results, so the same
 * bits (tests/device/test_reduce.c compares them on every pattern and on millions of floats).
 */
X86_AVX2 static inline __m256i f8_lanes(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* cond lanes (all ones or zero) ? a : b */
X86_AVX2 static inline __m256i f8_select(__m256i cond, __m256i a, __m256i b)
{
    return _mm256_blendv_epi8(b, a, cond);
}

X86_AVX2 static inline __m256 f8e4m3_load8(const uint8_t *p)
{
    __m256i h = f8_lanes(p);
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x80)), 24);
    __m256i low = _mm256_and_si256(h, _mm256_set1_epi32(0x7f));
    __m256i body = _mm256_slli_epi32(low, 20);
    __m256i normal = _mm256_add_epi32(body, _mm256_set1_epi32((127 - 7) << 23));
    __m256 sub = _mm256_sub_ps(
        _mm256_castsi256_ps(_mm256_add_epi32(body, _mm256_set1_epi32((127 - 6) << 23))),
        _mm256_set1_ps(0x1p-6f));
    __m256i zero_exponent =
        _mm256_cmpeq_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x78)), _mm256_setzero_si256());
    __m256i bits = f8_select(zero_exponent, _mm256_castps_si256(sub), normal);

    bits = f8_select(_mm256_cmpeq_epi32(low, _mm256_set1_epi32(0x7f)),
                     _mm256_set1_epi32(0x7fc00000), bits);
    return _mm256_castsi256_ps(_mm256_or_si256(sign, bits));
}

X86_AVX2 static inline __m256 f8e5m2_load8(const uint8_t *p)
{
    __m256i h = f8_lanes(p);
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x80)), 24);
    __m256i body = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7f)), 21);
    __m256i exponent = _mm256_and_si256(body, _mm256_set1_epi32(0x0f800000));
    __m256i normal = _mm256_add_epi32(body, _mm256_set1_epi32((127 - 15) << 23));
    __m256i special = _mm256_or_si256(body, _mm256_set1_epi32(0x7f800000));
    __m256 sub = _mm256_sub_ps(
        _mm256_castsi256_ps(_mm256_add_epi32(body, _mm256_set1_epi32((127 - 14) << 23))),
        _mm256_set1_ps(0x1p-14f));
    __m256i bits = f8_select(_mm256_cmpeq_epi32(exponent, _mm256_setzero_si256()),
                             _mm256_castps_si256(sub), normal);

    bits = f8_select(_mm256_cmpeq_epi32(exponent, _mm256_set1_epi32(0x0f800000)), special, bits);
    return _mm256_castsi256_ps(_mm256_or_si256(sign, bits));
}

/* eight lanes of codes (0..255) stored as bytes */
X86_AVX2 static inline void f8_store8(uint8_t *p, __m256i codes)
{
    __m128i words =
        _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));

    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(words, words));
}

/* abs > limit, as signed compares: abs has no sign bit */
#define F8_ABOVE(abs, limit) _mm256_cmpgt_epi32((abs), _mm256_set1_epi32((int)(limit)))

X86_AVX2 static inline void f8e4m3_store8(uint8_t *p, __m256 f)
{
    __m256i bits = _mm256_castps_si256(f);
    __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
    __m256i abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(abs, 20), _mm256_set1_epi32(1));
    __m256i normal = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(abs, _mm256_set1_epi32((127 - 7) << 23)),
                         _mm256_add_epi32(_mm256_set1_epi32(0x07ffff), odd)),
        20);
    __m256i sub = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(0x1p14f))),
        _mm256_set1_epi32(0x46800000));
    __m256i r = f8_select(F8_ABOVE(abs, 0x3c7fffff), normal, sub); /* from 2^-6: normal */

    r = f8_select(F8_ABOVE(abs, 0x43e80000), _mm256_set1_epi32(0x7e), r);
    r = f8_select(F8_ABOVE(abs, 0x7f800000), _mm256_set1_epi32(0x7f), r);
    f8_store8(p, _mm256_or_si256(sign, r));
}

X86_AVX2 static inline void f8e5m2_store8(uint8_t *p, __m256 f)
{
    __m256i bits = _mm256_castps_si256(f);
    __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
    __m256i abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(abs, 21), _mm256_set1_epi32(1));
    __m256i normal = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(abs, _mm256_set1_epi32((127 - 15) << 23)),
                         _mm256_add_epi32(_mm256_set1_epi32(0x0fffff), odd)),
        21);
    __m256i sub = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(0x1p7f))),
        _mm256_set1_epi32(0x43000000));
    __m256i r = f8_select(F8_ABOVE(abs, 0x387fffff), normal, sub); /* from 2^-14: normal */

    r = f8_select(F8_ABOVE(abs, 0x476fffff), _mm256_set1_epi32(0x7c), r); /* 61440 and up */
    r = f8_select(F8_ABOVE(abs, 0x7f800000), _mm256_set1_epi32(0x7f), r);
    f8_store8(p, _mm256_or_si256(sign, r));
}

X86_NARROW(f8e4m3_x86, uint8_t, X86_AVX2, f8e4m3_load8, f8e4m3_load8, f8e4m3_store8,
           weft__f8e4m3_to_float, weft__float_to_f8e4m3)
X86_NARROW(f8e5m2_x86, uint8_t, X86_AVX2, f8e5m2_load8, f8e5m2_load8, f8e5m2_store8,
           weft__f8e5m2_to_float, weft__float_to_f8e5m2)

/* What the CPU has, found once: bit 0 AVX2 (with the OS saving its registers:
 * __builtin_cpu_supports checks that), bit 1 F16C (CPUID leaf 1, ECX bit 29: clang's
 * __builtin_cpu_supports has no "f16c"). CPUID can cost microseconds in a virtual machine, so
 * the reductions do not ask it per call. */
static int x86_features(void)
{
    static atomic_int features = -1;
    int f = atomic_load_explicit(&features, memory_order_relaxed);

    if (f < 0) {
        unsigned a, b, c = 0, d;

        f = __builtin_cpu_supports("avx2") ? 1 : 0;
        if (f && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29))) {
            f |= 2;
        }
        atomic_store_explicit(&features, f, memory_order_relaxed);
    }
    return f;
}
#endif

/* The portable conversions of a narrow dtype (FLOAT16, BFLOAT16, FLOAT8_*), NULL for the others. */
static const half_format_t *portable_format(weft_dtype_t dtype)
{
    switch (dtype) {
    case WEFT_FLOAT16:
        return &f16_format;
    case WEFT_BFLOAT16:
        return &bf16_format;
    case WEFT_FLOAT8_E4M3:
        return &f8e4m3_format;
    case WEFT_FLOAT8_E5M2:
        return &f8e5m2_format;
    default:
        return NULL;
    }
}

/* The conversions of a narrow dtype this CPU runs fastest, or the portable ones; NULL for the
 * other dtypes. */
static const half_format_t *half_format(weft_dtype_t dtype, int simd)
{
#ifdef HOST_X86
    int need = dtype == WEFT_FLOAT16 ? 3 : 1;

    if (simd && atomic_load_explicit(&simd_allowed, memory_order_relaxed) &&
        (x86_features() & need) == need) {
        switch (dtype) {
        case WEFT_FLOAT16:
            return &f16_x86;
        case WEFT_BFLOAT16:
            return &bf16_x86;
        case WEFT_FLOAT8_E4M3:
            return &f8e4m3_x86;
        case WEFT_FLOAT8_E5M2:
            return &f8e5m2_x86;
        default:
            break;
        }
    }
#else
    (void)simd;
#endif
    return portable_format(dtype);
}

int weft__host_half_widen(weft_dtype_t dtype, float *out, const void *in, size_t n, int simd)
{
    const half_format_t *f = half_format(dtype, simd);

    f->widen(out, in, n);
    return f != portable_format(dtype);
}

int weft__host_half_narrow(weft_dtype_t dtype, void *out, const float *in, size_t n, int simd)
{
    const half_format_t *f = half_format(dtype, simd);

    f->narrow(out, in, n);
    return f != portable_format(dtype);
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The block at byte offset `at` of input src, read from the saved copy when src is dst. */
static const void *block_input(const void *src, const void *dst, const void *saved, size_t at)
{
    return src == dst ? saved : (const char *)src + at;
}

static void reduce_full(const kernel_t *k, void *dst, const void *const *srcs, int nsrcs,
                        size_t count, size_t size)
{
    _Alignas(64) unsigned char saved[BLOCK_BYTES];
    size_t block = BLOCK_BYTES / size;
    int dst_is_later_input = 0;

    for (int j = 1; j < nsrcs; j++) {
        dst_is_later_input |= srcs[j] == dst;
    }
    for (size_t off = 0; off < count; off += block) {
        size_t len = min_size(block, count - off);
        size_t at = off * size;
        char *d = (char *)dst + at;
        int j = 1;

        if (dst_is_later_input) {
            memcpy(saved, d, len * size);
        }
        /* when dst is srcs[0] and no other input, d already holds the first operand */
        if (srcs[0] != dst || dst_is_later_input) {
            k->binary(d, block_input(srcs[0], dst, saved, at), block_input(srcs[1], dst, saved, at),
                      len);
            j = 2;
        }
        for (; j < nsrcs; j++) {
            k->accumulate(d, block_input(srcs[j], dst, saved, at), len);
        }
    }
}

/* All inputs of a block are read before its dst is written, so any aliasing is safe here. */
static void reduce_half(const kernel_t *k, const half_format_t *format, void *dst,
                        const void *const *srcs, int nsrcs, size_t count)
{
    float acc[HALF_BLOCK];
    float in[HALF_BLOCK];

    for (size_t off = 0; off < count; off += HALF_BLOCK) {
        size_t len = min_size(HALF_BLOCK, count - off);
        size_t at = off * format->size;

        format->widen(acc, (const char *)srcs[0] + at, len);
        for (int j = 1; j < nsrcs; j++) {
            format->widen(in, (const char *)srcs[j] + at, len);
            k->accumulate(acc, in, len);
        }
        format->narrow((char *)dst + at, acc, len);
    }
}

/* The reduction of count elements into dst by the loops of dtype. */
static void reduce_any(const kernel_t *k, void *dst, const void *const *srcs, int nsrcs,
                       size_t count, weft_dtype_t dtype, weft_op_t op)
{
    switch (dtype) {
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16:
    case WEFT_FLOAT8_E4M3:
    case WEFT_FLOAT8_E5M2: {
        const half_format_t *format = half_format(dtype, 1);

        if (format->sum_prod != NULL && (op == WEFT_SUM || op == WEFT_AVG || op == WEFT_PROD)) {
            format->sum_prod(dst, srcs, nsrcs, count, op == WEFT_PROD);
            break;
        }
        reduce_half(k, format, dst, srcs, nsrcs, count);
        break;
    }
    default:
        reduce_full(k, dst, srcs, nsrcs, count, weft_dtype_size(dtype));
        break;
    }
}

/* (to - from) mod 4 KiB in (0, ALIAS_WINDOW): a store to `to` is followed by loads of `from` a
 * few bytes further that look like reads of what was just stored (the low address bits match),
 * and wait for it. */
static int trailing(const void *to, const void *from)
{
    uintptr_t d = ((uintptr_t)to - (uintptr_t)from) & 4095;

    return d > 0 && d < ALIAS_WINDOW;
}

static int trails(const void *dst, const void *const *srcs, int nsrcs)
{
    for (int j = 0; j < nsrcs; j++) {
        if (trailing(dst, srcs[j])) {
            return 1;
        }
    }
    return 0;
}

/* Block by block into a buffer placed where it trails no input (nor dst: the copy out), then
 * copied into dst. dst may be an input: its block is read before it is written. */
static void reduce_staged(const kernel_t *k, void *dst, const void *const *srcs, int nsrcs,
                          size_t count, weft_dtype_t dtype, weft_op_t op)
{
    _Alignas(64) unsigned char buf[BLOCK_BYTES + 4096];
    static const uintptr_t shifts[] = {2048, 1024, 3072, 512, 1536, 2560, 3584};
    const size_t size = weft_dtype_size(dtype), block = BLOCK_BYTES / size;
    const void *in[STAGED_MAX_INPUTS];
    unsigned char *tmp = buf;

    /* tmp's address mod 4 KiB: dst's shifted by a distance that no input trails it by */
    for (size_t i = 0; i < sizeof(shifts) / sizeof(shifts[0]); i++) {
        tmp = buf + (((uintptr_t)dst + shifts[i] - (uintptr_t)buf) & 4095);
        if (!trails(tmp, srcs, nsrcs) && !trailing(dst, tmp)) {
            break;
        }
    }
    for (size_t off = 0; off < count; off += block) {
        size_t len = min_size(block, count - off);

        for (int j = 0; j < nsrcs; j++) {
            in[j] = (const char *)srcs[j] + off * size;
        }
        reduce_any(k, tmp, in, nsrcs, len, dtype, op);
        memcpy((char *)dst + off * size, tmp, len * size);
    }
    atomic_fetch_add_explicit(&staged_calls, 1, memory_order_relaxed);
}

weft_status_t weft__host_reduce(void *dst, const void *const *srcs, int nsrcs, size_t count,
                                weft_dtype_t dtype, weft_op_t op)
{
    const kernel_t *k = NULL;

    if ((unsigned)dtype < WEFT_DTYPE_COUNT && (unsigned)op < WEFT_OP_COUNT) {
        k = kernels[dtype][op];
    }
    if (k == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "host reduce: op %s is not defined for dtype %s",
                           weft_op_name(op), weft_dtype_name(dtype));
    }
    if (nsrcs < 1) {
        return weft__error(WEFT_ERR_INVALID_ARG, "host reduce: %d inputs, at least 1 needed",
                           nsrcs);
    }
    if (count == 0) {
        return WEFT_OK;
    }
    if (nsrcs == 1) {
        if (dst != srcs[0]) {
            weft__host_copy(dst, srcs[0], count * weft_dtype_size(dtype));
        }
        return WEFT_OK;
    }
    if (nsrcs <= STAGED_MAX_INPUTS && count * weft_dtype_size(dtype) >= STAGED_MIN_BYTES &&
        trails(dst, srcs, nsrcs)) {
        reduce_staged(k, dst, srcs, nsrcs, count, dtype, op);
        return WEFT_OK;
    }
    reduce_any(k, dst, srcs, nsrcs, count, dtype, op);
    return WEFT_OK;
}

int weft__host_reduce_loops(weft_dtype_t dtype, weft_op_t op, weft_host_binary_fn *binary_p,
                            weft_host_accumulate_fn *accumulate_p)
{
    const kernel_t *k;

    if ((unsigned)dtype >= WEFT_DTYPE_COUNT || (unsigned)op >= WEFT_OP_COUNT ||
        portable_format(dtype) != NULL || (k = kernels[dtype][op]) == NULL) {
        return 0;
    }
    *binary_p = k->binary;
    *accumulate_p = k->accumulate;
    return 1;
}

uint64_t weft__host_reduce_staged(void)
{
    return atomic_load_explicit(&staged_calls, memory_order_relaxed);
}

/* avg_finalize's division, weft__elem_div_* of device/reduce_elem.h, over a buffer */
#define DIVIDE(name, T, DIV)                                                                       \
    static void name(void *buf, size_t count, size_t divisor)                                      \
    {                                                                                              \
        T *p = buf;                                                                                \
                                                                                                   \
        for (size_t i = 0; i < count; i++) {                                                       \
            p[i] = DIV(p[i], divisor);                                                             \
        }                                                                                          \
    }

DIVIDE(divide_i8, int8_t, weft__elem_div_i8)
DIVIDE(divide_u8, uint8_t, weft__elem_div_u8)
DIVIDE(divide_i32, int32_t, weft__elem_div_i32)
DIVIDE(divide_u32, uint32_t, weft__elem_div_u32)
DIVIDE(divide_i64, int64_t, weft__elem_div_i64)
DIVIDE(divide_u64, uint64_t, weft__elem_div_u64)
DIVIDE(divide_f32, float, weft__elem_div_f32)
DIVIDE(divide_f64, double, weft__elem_div_f64)

static void divide_half(const half_format_t *format, void *buf, size_t count, size_t divisor)
{
    float tmp[HALF_BLOCK];

    for (size_t off = 0; off < count; off += HALF_BLOCK) {
        size_t len = min_size(HALF_BLOCK, count - off);
        char *at = (char *)buf + off * format->size;

        format->widen(tmp, at, len);
        divide_f32(tmp, len, divisor);
        format->narrow(at, tmp, len);
    }
}

weft_status_t weft__host_avg_finalize(void *buf, size_t count, weft_dtype_t dtype, size_t divisor)
{
    if (divisor == 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "host avg_finalize: divisor 0");
    }
    switch (dtype) {
    case WEFT_INT8:
        divide_i8(buf, count, divisor);
        break;
    case WEFT_UINT8:
        divide_u8(buf, count, divisor);
        break;
    case WEFT_INT32:
        divide_i32(buf, count, divisor);
        break;
    case WEFT_UINT32:
        divide_u32(buf, count, divisor);
        break;
    case WEFT_INT64:
        divide_i64(buf, count, divisor);
        break;
    case WEFT_UINT64:
        divide_u64(buf, count, divisor);
        break;
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16:
    case WEFT_FLOAT8_E4M3:
    case WEFT_FLOAT8_E5M2:
        divide_half(half_format(dtype, 1), buf, count, divisor);
        break;
    case WEFT_FLOAT32:
        divide_f32(buf, count, divisor);
        break;
    case WEFT_FLOAT64:
        divide_f64(buf, count, divisor);
        break;
    default:
        return weft__error(WEFT_ERR_INVALID_ARG, "host avg_finalize: unknown dtype %d", (int)dtype);
    }
    return WEFT_OK;
}
