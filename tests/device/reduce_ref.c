/* References for tests/device/test_reduce.c (reduce_ref.h). */
#include "tests/device/reduce_ref.h"

#include "device/host/half.h"

#include <math.h>
#include <string.h>

int is_float(weft_dtype_t dtype)
{
    return is_half(dtype) || dtype == WEFT_FLOAT32 || dtype == WEFT_FLOAT64;
}

static int is_signed_int(weft_dtype_t dtype)
{
    return dtype == WEFT_INT8 || dtype == WEFT_INT32 || dtype == WEFT_INT64;
}

int is_half(weft_dtype_t dtype)
{
    return dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16 || dtype == WEFT_FLOAT8_E4M3 ||
           dtype == WEFT_FLOAT8_E5M2;
}

/* One element as raw bits, zero-extended; and back, truncated to the element size. */
uint64_t load_bits(weft_dtype_t dtype, const void *p)
{
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;

    switch (weft_dtype_size(dtype)) {
    case 1:
        memcpy(&u8, p, 1);
        return u8;
    case 2:
        memcpy(&u16, p, 2);
        return u16;
    case 4:
        memcpy(&u32, p, 4);
        return u32;
    default:
        memcpy(&u64, p, 8);
        return u64;
    }
}

void store_bits(weft_dtype_t dtype, void *p, uint64_t bits)
{
    uint8_t u8 = (uint8_t)bits;
    uint16_t u16 = (uint16_t)bits;
    uint32_t u32 = (uint32_t)bits;

    switch (weft_dtype_size(dtype)) {
    case 1:
        memcpy(p, &u8, 1);
        break;
    case 2:
        memcpy(p, &u16, 2);
        break;
    case 4:
        memcpy(p, &u32, 4);
        break;
    default:
        memcpy(p, &bits, 8);
        break;
    }
}

int is_nan_bits(weft_dtype_t dtype, uint64_t bits)
{
    switch (dtype) {
    case WEFT_FLOAT16:
        return (bits & 0x7fff) > 0x7c00;
    case WEFT_BFLOAT16:
        return (bits & 0x7fff) > 0x7f80;
    case WEFT_FLOAT32:
        return (bits & 0x7fffffffu) > 0x7f800000u;
    case WEFT_FLOAT64:
        return (bits & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    case WEFT_FLOAT8_E4M3:
        return (bits & 0x7f) == 0x7f;
    case WEFT_FLOAT8_E5M2:
        return (bits & 0x7f) > 0x7c;
    default:
        return 0;
    }
}

float f32_of(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

uint32_t bits_of_f32(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    return bits;
}

static double f64_of(uint64_t bits)
{
    double d;

    memcpy(&d, &bits, sizeof(d));
    return d;
}

uint64_t bits_of_f64(double d)
{
    uint64_t bits;

    memcpy(&bits, &d, sizeof(bits));
    return bits;
}

/* ---- reference half-precision formats, from their definitions ---- */

double ref_f16_value(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    double v;

    if (exponent == 0x1f) {
        v = mantissa ? NAN : INFINITY;
    } else if (exponent == 0) {
        v = ldexp(mantissa, -24);
    } else {
        v = ldexp(1024 + mantissa, exponent - 25);
    }
    return h & 0x8000 ? -v : v;
}

double ref_bf16_value(uint16_t h)
{
    int exponent = (h >> 7) & 0xff;
    int mantissa = h & 0x7f;
    double v;

    if (exponent == 0xff) {
        v = mantissa ? NAN : INFINITY;
    } else if (exponent == 0) {
        v = ldexp(mantissa, -133);
    } else {
        v = ldexp(128 + mantissa, exponent - 134);
    }
    return h & 0x8000 ? -v : v;
}

/* The OCP 8-bit formats: E5M2 as IEEE 754 (bias 15), E4M3 (bias 7) with no inf and only
 * S.1111.111 NaN. */
double ref_f8e5m2_value(uint8_t h)
{
    int exponent = (h >> 2) & 0x1f;
    int mantissa = h & 0x3;
    double v;

    if (exponent == 0x1f) {
        v = mantissa ? NAN : INFINITY;
    } else if (exponent == 0) {
        v = ldexp(mantissa, -16);
    } else {
        v = ldexp(4 + mantissa, exponent - 17);
    }
    return h & 0x80 ? -v : v;
}

double ref_f8e4m3_value(uint8_t h)
{
    int exponent = (h >> 3) & 0xf;
    int mantissa = h & 0x7;
    double v;

    if ((h & 0x7f) == 0x7f) {
        v = NAN;
    } else if (exponent == 0) {
        v = ldexp(mantissa, -9);
    } else {
        v = ldexp(8 + mantissa, exponent - 10);
    }
    return h & 0x80 ? -v : v;
}

double ref_half_value(weft_dtype_t dtype, unsigned h)
{
    switch (dtype) {
    case WEFT_FLOAT16:
        return ref_f16_value((uint16_t)h);
    case WEFT_BFLOAT16:
        return ref_bf16_value((uint16_t)h);
    case WEFT_FLOAT8_E4M3:
        return ref_f8e4m3_value((uint8_t)h);
    default:
        return ref_f8e5m2_value((uint8_t)h);
    }
}

void ref_half_limits(weft_dtype_t dtype, unsigned *top_p, double *beyond_p, unsigned *sign_p)
{
    switch (dtype) {
    case WEFT_FLOAT16:
        *top_p = 0x7c00, *beyond_p = 65536.0, *sign_p = 0x8000;
        break;
    case WEFT_BFLOAT16:
        *top_p = 0x7f80, *beyond_p = ldexp(1.0, 128), *sign_p = 0x8000;
        break;
    case WEFT_FLOAT8_E4M3: /* past 448 (0x7e) the next pattern, 480's, is NaN (saturated) */
        *top_p = 0x7f, *beyond_p = 480.0, *sign_p = 0x80;
        break;
    default:
        *top_p = 0x7c, *beyond_p = 65536.0, *sign_p = 0x80;
        break;
    }
}

/*
 * The pattern nearest to x (not a NaN), ties to the even pattern. Positive patterns are ordered
 * like their values; past the largest finite one the next step would be `beyond` (2^16, 2^128,
 * 480 and 2^16), which decides where the pattern `top` (inf, or E4M3's NaN) starts. E4M3
 * saturates: what would round to its NaN pattern is 448.
 */
uint16_t ref_half_round(weft_dtype_t dtype, double x)
{
    unsigned inf;
    double beyond;
    unsigned sign_bit;

    ref_half_limits(dtype, &inf, &beyond, &sign_bit);
    unsigned sign = signbit(x) ? sign_bit : 0;
    double a = fabs(x);
    unsigned lo = 0;
    unsigned hi = inf - 1;
    double below;
    double above;

    if (a >= beyond) {
        return (uint16_t)(sign | (dtype == WEFT_FLOAT8_E4M3 ? inf - 1 : inf));
    }
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;

        if (ref_half_value(dtype, mid) <= a) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    below = a - ref_half_value(dtype, lo);
    above = (lo + 1 == inf ? beyond : ref_half_value(dtype, lo + 1)) - a;
    if (above < below || (above == below && lo % 2 == 1)) {
        lo++;
    }
    if (dtype == WEFT_FLOAT8_E4M3 && lo == inf) {
        lo = inf - 1;
    }
    return (uint16_t)(sign | lo);
}

/* ---- reference reduction ---- */

static double ref_min(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        return NAN;
    }
    if (a == 0 && b == 0) {
        return signbit(a) || signbit(b) ? -0.0 : 0.0;
    }
    return fmin(a, b);
}

static double ref_max(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        return NAN;
    }
    if (a == 0 && b == 0) {
        return signbit(a) && signbit(b) ? -0.0 : 0.0;
    }
    return fmax(a, b);
}

static uint64_t ref_int_op(weft_op_t op, int is_signed, uint64_t a, uint64_t b)
{
    int less = is_signed ? (int64_t)a < (int64_t)b : a < b;

    switch (op) {
    case WEFT_SUM:
    case WEFT_AVG:
        return a + b;
    case WEFT_PROD:
        return a * b;
    case WEFT_MIN:
        return less ? a : b;
    case WEFT_MAX:
        return less ? b : a;
    case WEFT_BAND:
        return a & b;
    case WEFT_BOR:
        return a | b;
    case WEFT_BXOR:
        return a ^ b;
    case WEFT_LAND:
        return a != 0 && b != 0;
    case WEFT_LOR:
        return a != 0 || b != 0;
    default:
        return (a != 0) != (b != 0);
    }
}

static float ref_f32_op(weft_op_t op, float a, float b)
{
    switch (op) {
    case WEFT_PROD:
        return a * b;
    case WEFT_MIN:
        return (float)ref_min(a, b);
    case WEFT_MAX:
        return (float)ref_max(a, b);
    default:
        return a + b;
    }
}

static double ref_f64_op(weft_op_t op, double a, double b)
{
    switch (op) {
    case WEFT_PROD:
        return a * b;
    case WEFT_MIN:
        return ref_min(a, b);
    case WEFT_MAX:
        return ref_max(a, b);
    default:
        return a + b;
    }
}

/* Element i of in[0] op in[1] op ... in index order; one input is a copy. */
uint64_t ref_element(weft_dtype_t dtype, weft_op_t op, unsigned char *const *in, int n, size_t i)
{
    size_t size = weft_dtype_size(dtype);
    uint64_t bits = load_bits(dtype, in[0] + i * size);

    if (n == 1) {
        return bits;
    }
    if (is_half(dtype)) {
        float acc = (float)ref_half_value(dtype, (unsigned)bits);

        for (int j = 1; j < n; j++) {
            unsigned h = (unsigned)load_bits(dtype, in[j] + i * size);

            acc = ref_f32_op(op, acc, (float)ref_half_value(dtype, h));
        }
        return isnan(acc) ? ANY_NAN : ref_half_round(dtype, acc);
    }
    if (dtype == WEFT_FLOAT32) {
        float acc = f32_of((uint32_t)bits);

        for (int j = 1; j < n; j++) {
            acc = ref_f32_op(op, acc, f32_of((uint32_t)load_bits(dtype, in[j] + i * size)));
        }
        return bits_of_f32(acc);
    }
    if (dtype == WEFT_FLOAT64) {
        double acc = f64_of(bits);

        for (int j = 1; j < n; j++) {
            acc = ref_f64_op(op, acc, f64_of(load_bits(dtype, in[j] + i * size)));
        }
        return bits_of_f64(acc);
    }
    /* integers: sign-extend the signed types, combine in 64 bits, truncate when stored */
    {
        int shift = 64 - 8 * (int)size;
        uint64_t acc = bits;

        if (is_signed_int(dtype)) {
            acc = (uint64_t)((int64_t)(bits << shift) >> shift);
        }
        for (int j = 1; j < n; j++) {
            uint64_t x = load_bits(dtype, in[j] + i * size);

            if (is_signed_int(dtype)) {
                x = (uint64_t)((int64_t)(x << shift) >> shift);
            }
            acc = ref_int_op(op, is_signed_int(dtype), acc, x);
        }
        return acc & (shift == 0 ? UINT64_MAX : (UINT64_C(1) << (64 - shift)) - 1);
    }
}

/* ---- test data ---- */

static uint64_t next_random(uint64_t *state)
{
    /* splitmix64 */
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/*
 * Integers: a quarter zeros (so the logical ops see both truth values), the rest any bits.
 * Floats: mostly values of moderate magnitude with random mantissas (so sums round), and one in
 * sixteen an arbitrary bit pattern: NaN, inf, subnormal, huge.
 */
static uint64_t random_element(weft_dtype_t dtype, uint64_t *state)
{
    uint64_t r = next_random(state);
    uint64_t sign = (r >> 8) & 1;
    uint64_t wild = r % 16 == 0;
    uint64_t e = (r >> 9) % 9; /* exponent offset, -4 .. 4 */

    switch (dtype) {
    case WEFT_FLOAT16:
        return wild ? r >> 48 : sign << 15 | (15 + e - 4) << 10 | (r >> 20 & 0x3ff);
    case WEFT_BFLOAT16:
        return wild ? r >> 48 : sign << 15 | (127 + e - 4) << 7 | (r >> 20 & 0x7f);
    case WEFT_FLOAT8_E4M3:
        return wild ? r >> 56 : sign << 7 | (7 + e - 4) << 3 | (r >> 20 & 0x7);
    case WEFT_FLOAT8_E5M2:
        return wild ? r >> 56 : sign << 7 | (15 + e - 4) << 2 | (r >> 20 & 0x3);
    case WEFT_FLOAT32:
        return wild ? r >> 32 : sign << 31 | (127 + 2 * e - 8) << 23 | (r >> 20 & 0x7fffff);
    case WEFT_FLOAT64:
        return wild ? r : sign << 63 | (1023 + 2 * e - 8) << 52 | (r >> 12 & 0xfffffffffffffu);
    default:
        return r % 4 == 0 ? 0 : r >> 16;
    }
}

void fill(weft_dtype_t dtype, unsigned char *buf, size_t count, uint64_t seed)
{
    size_t size = weft_dtype_size(dtype);

    for (size_t i = 0; i < count; i++) {
        store_bits(dtype, buf + i * size, random_element(dtype, &seed));
    }
}
