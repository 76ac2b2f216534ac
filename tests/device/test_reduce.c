/*
 * Host reductions against independent scalar references: every dtype x valid op x input count x
 * element count x aliasing of dst; then rounding, wrap-around, NaN and signed-zero edge cases by
 * exact bit pattern; avg_finalize; argument checks; the host ops table.
 *
 * The references share no code with device/host: integers go through 64-bit arithmetic and are
 * truncated at the end; half types are decoded from their bit fields with ldexp, combined in
 * float, and rounded by searching the ordered patterns for the nearest one. The conversions in
 * half.h are checked directly, exhaustively for widening and around every rounding midpoint for
 * narrowing.
 */
#include "base/config.h"
#include "device/device.h"
#include "device/host/half.h"
#include "device/host/host.h"
#include "tests/device/reduce_ref.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SRCS 7
/* bytes after the last element that must stay untouched */
#define GUARD 64

/* ---- every dtype x op against the reference ---- */

enum { DST_DISTINCT = -1 }; /* otherwise the index of the input that dst is */

typedef struct {
    weft_dtype_t dtype;
    weft_op_t op;
} combo_t;

/* A buffer of bytes in raw (malloc'd with 4 KiB more) whose address is `trail` bytes past
 * `after`'s modulo 4 KiB. */
static unsigned char *placed(unsigned char *raw, const void *after, size_t trail)
{
    return raw + (((uintptr_t)after + trail - (uintptr_t)raw) & 4095);
}

/* trail > 0: dst (a distinct one, or srcs[dst_src] for dst_src > 0) sits trail bytes past
 * srcs[0]'s address modulo 4 KiB, which makes weft__host_reduce go through its buffer. */
static void check_case_at(weft_dtype_t dtype, weft_op_t op, int nsrcs, size_t count, int dst_src,
                          size_t trail)
{
    size_t size = weft_dtype_size(dtype);
    size_t bytes = count * size;
    unsigned char *in[MAX_SRCS];
    unsigned char *raw[MAX_SRCS];
    unsigned char *orig[MAX_SRCS];
    const void *srcs[MAX_SRCS];
    unsigned char *own_raw = malloc(bytes + GUARD + 4096);
    unsigned char *own = own_raw;
    unsigned char *dst = NULL;
    unsigned char dst_guard[GUARD];
    uint64_t *expect = malloc(count * sizeof(*expect) + 1);
    char label[160];
    weft_status_t status;
    size_t bad = count;
    uint64_t bad_got = 0;

    snprintf(label, sizeof(label), "%s %s, %d inputs, count %zu, trail %zu, dst ",
             weft_dtype_name(dtype), weft_op_name(op), nsrcs, count, trail);
    if (dst_src == DST_DISTINCT) {
        strcat(label, "distinct");
    } else {
        snprintf(label + strlen(label), sizeof(label) - strlen(label), "= srcs[%d]", dst_src);
    }
    cr_assert(own_raw != NULL && expect != NULL);
    for (int j = 0; j < nsrcs; j++) {
        raw[j] = malloc(bytes + GUARD + 4096);
        in[j] = j > 0 && j == dst_src && trail > 0 ? placed(raw[j], in[0], trail) : raw[j];
        orig[j] = malloc(bytes + GUARD);
        cr_assert(raw[j] != NULL && orig[j] != NULL);
        fill(dtype, in[j], count, (uint64_t)dtype << 40 | (uint64_t)op << 32 | (uint64_t)j);
        memset(in[j] + bytes, 0x5a, GUARD);
        memcpy(orig[j], in[j], bytes + GUARD);
        srcs[j] = in[j];
        if (j == dst_src) {
            dst = in[j];
        }
    }
    if (dst_src == DST_DISTINCT) {
        own = trail > 0 ? placed(own_raw, in[0], trail) : own_raw;
        memset(own, 0xa5, bytes + GUARD);
        dst = own;
    }
    memcpy(dst_guard, dst + bytes, GUARD);
    for (size_t i = 0; i < count; i++) {
        expect[i] = ref_element(dtype, op, in, nsrcs, i);
    }

    status = weft__device_host_ops.reduce(dst, srcs, nsrcs, count, dtype, op);

    cr_assert_eq(status, WEFT_OK, "%s: %s", label, weft_last_error());
    for (size_t i = 0; i < count && bad == count; i++) {
        uint64_t got = load_bits(dtype, dst + i * size);
        int nan_ok = nsrcs > 1 && is_nan_bits(dtype, expect[i]) && is_nan_bits(dtype, got);

        if (got != expect[i] && !nan_ok) {
            bad = i;
            bad_got = got;
        }
    }
    cr_assert(bad == count, "%s: element %zu is 0x%llx, expected 0x%llx", label, bad,
              (unsigned long long)bad_got, (unsigned long long)(bad < count ? expect[bad] : 0));
    cr_assert(memcmp(dst + bytes, dst_guard, GUARD) == 0, "%s: wrote past count", label);
    for (int j = 0; j < nsrcs; j++) {
        cr_assert(in[j] == dst || memcmp(in[j], orig[j], bytes + GUARD) == 0,
                  "%s: input %d was modified", label, j);
    }
    for (int j = 0; j < nsrcs; j++) {
        free(raw[j]);
        free(orig[j]);
    }
    free(expect);
    free(own_raw);
}

static void check_case(weft_dtype_t dtype, weft_op_t op, int nsrcs, size_t count, int dst_src)
{
    check_case_at(dtype, op, nsrcs, count, dst_src, 0);
}

/* Every valid (dtype, op), into combos; returns how many. */
static size_t valid_combos(combo_t *combos)
{
    size_t n = 0;

    for (int d = 0; d < WEFT_DTYPE_COUNT; d++) {
        for (int o = 0; o < WEFT_OP_COUNT; o++) {
            int arithmetic =
                o == WEFT_SUM || o == WEFT_PROD || o == WEFT_MIN || o == WEFT_MAX || o == WEFT_AVG;

            if (arithmetic || !is_float((weft_dtype_t)d)) {
                combos[n++] = (combo_t){.dtype = (weft_dtype_t)d, .op = (weft_op_t)o};
            }
        }
    }
    return n;
}

ParameterizedTestParameters(reduce, matches_reference)
{
    static combo_t combos[WEFT_DTYPE_COUNT * WEFT_OP_COUNT];
    size_t n = valid_combos(combos);

    return cr_make_param_array(combo_t, combos, n);
}

ParameterizedTest(combo_t *c, reduce, matches_reference)
{
    static const int nsrcs_list[] = {1, 2, 3, 7};
    static const size_t counts[] = {0, 1, 17, 1000, 100003};

    for (size_t a = 0; a < sizeof(nsrcs_list) / sizeof(nsrcs_list[0]); a++) {
        for (size_t b = 0; b < sizeof(counts) / sizeof(counts[0]); b++) {
            int nsrcs = nsrcs_list[a];

            check_case(c->dtype, c->op, nsrcs, counts[b], DST_DISTINCT);
            for (int k = 0; k < 3 && k < nsrcs; k++) {
                check_case(c->dtype, c->op, nsrcs, counts[b], k);
            }
        }
    }
}

/* A result that trails an input by a few bytes modulo 4 KiB (numpy's `np.empty_like(a)` next to
 * a): reduced block by block through a buffer, with the same bits as straight into dst. */
ParameterizedTestParameters(reduce, result_trailing_an_input)
{
    static combo_t combos[WEFT_DTYPE_COUNT * WEFT_OP_COUNT];
    size_t n = valid_combos(combos);

    return cr_make_param_array(combo_t, combos, n);
}

ParameterizedTest(combo_t *c, reduce, result_trailing_an_input)
{
    static const size_t trails[] = {16, 64, 120};
    static const int nsrcs_list[] = {2, 3, 7};
    /* several 16 KiB blocks and a partial one, for every size; 256 bytes, the least staged */
    const size_t counts[] = {40009, 256 / weft_dtype_size(c->dtype)};

    for (size_t t = 0; t < sizeof(trails) / sizeof(trails[0]); t++) {
        for (size_t a = 0; a < sizeof(nsrcs_list) / sizeof(nsrcs_list[0]); a++) {
            for (size_t b = 0; b < 2; b++) {
                uint64_t before = weft__host_reduce_staged();

                check_case_at(c->dtype, c->op, nsrcs_list[a], counts[b], DST_DISTINCT, trails[t]);
                cr_assert_eq(weft__host_reduce_staged(), before + 1,
                             "%s %s, count %zu: a result %zu bytes past an input did not go "
                             "through the buffer",
                             weft_dtype_name(c->dtype), weft_op_name(c->op), counts[b], trails[t]);
                check_case_at(c->dtype, c->op, nsrcs_list[a], counts[b], 1, trails[t]);
                cr_assert_eq(weft__host_reduce_staged(), before + 2, "in place");
            }
            /* below 256 bytes: straight into dst */
            {
                uint64_t before = weft__host_reduce_staged();

                check_case_at(c->dtype, c->op, nsrcs_list[a], 255 / weft_dtype_size(c->dtype),
                              DST_DISTINCT, trails[t]);
                cr_assert_eq(weft__host_reduce_staged(), before, "255 bytes were staged");
            }
        }
    }
}

Test(reduce, same_buffer_given_twice)
{
    enum { COUNT = 10007 };
    float *a = malloc(COUNT * sizeof(*a));
    float *b = malloc(COUNT * sizeof(*b));
    float *a0 = malloc(COUNT * sizeof(*a0));
    float *b0 = malloc(COUNT * sizeof(*b0));
    const void *aab[] = {a, a, b};
    const void *abb[] = {a, b, b};

    cr_assert(a && b && a0 && b0);
    fill(WEFT_FLOAT32, (unsigned char *)a0, COUNT, 1);
    fill(WEFT_FLOAT32, (unsigned char *)b0, COUNT, 2);

    memcpy(a, a0, COUNT * sizeof(*a));
    memcpy(b, b0, COUNT * sizeof(*b));
    cr_assert_eq(weft__host_reduce(a, aab, 3, COUNT, WEFT_FLOAT32, WEFT_SUM), WEFT_OK);
    for (size_t i = 0; i < COUNT; i++) {
        float expect = a0[i] + a0[i] + b0[i];

        if (!(bits_of_f32(a[i]) == bits_of_f32(expect) || (isnan(a[i]) && isnan(expect)))) {
            cr_assert_fail("dst = srcs[0] = srcs[1]: element %zu is %a, expected %a", i,
                           (double)a[i], (double)expect);
        }
    }

    memcpy(a, a0, COUNT * sizeof(*a));
    memcpy(b, b0, COUNT * sizeof(*b));
    cr_assert_eq(weft__host_reduce(b, abb, 3, COUNT, WEFT_FLOAT32, WEFT_SUM), WEFT_OK);
    for (size_t i = 0; i < COUNT; i++) {
        float expect = a0[i] + b0[i] + b0[i];

        if (!(bits_of_f32(b[i]) == bits_of_f32(expect) || (isnan(b[i]) && isnan(expect)))) {
            cr_assert_fail("dst = srcs[1] = srcs[2]: element %zu is %a, expected %a", i,
                           (double)b[i], (double)expect);
        }
    }
    cr_assert(memcmp(a, a0, COUNT * sizeof(*a)) == 0, "srcs[0] was modified");
    free(a);
    free(b);
    free(a0);
    free(b0);
}

/* ---- edge cases by bit pattern ---- */

/* The result of reducing one element of each input, as bits. */
static uint64_t reduce_one(weft_dtype_t dtype, weft_op_t op, const uint64_t *in, int n)
{
    unsigned char buf[MAX_SRCS][8];
    unsigned char out[8];
    const void *srcs[MAX_SRCS];

    for (int j = 0; j < n; j++) {
        store_bits(dtype, buf[j], in[j]);
        srcs[j] = buf[j];
    }
    cr_assert_eq(weft__host_reduce(out, srcs, n, 1, dtype, op), WEFT_OK, "%s", weft_last_error());
    return load_bits(dtype, out);
}

typedef struct {
    weft_op_t op;
    int n;
    uint64_t in[3];
    uint64_t expect; /* ANY_NAN for the half types: any NaN */
} edge_t;

static void check_edges(weft_dtype_t dtype, const edge_t *cases, size_t ncases)
{
    for (size_t c = 0; c < ncases; c++) {
        const edge_t *e = &cases[c];
        uint64_t got = reduce_one(dtype, e->op, e->in, e->n);

        if (e->expect == ANY_NAN && is_half(dtype)) {
            cr_assert(is_nan_bits(dtype, got), "%s case %zu: 0x%llx is not a NaN",
                      weft_dtype_name(dtype), c, (unsigned long long)got);
        } else {
            cr_assert_eq(got, e->expect, "%s case %zu: got 0x%llx, expected 0x%llx",
                         weft_dtype_name(dtype), c, (unsigned long long)got,
                         (unsigned long long)e->expect);
        }
    }
}

Test(reduce, float16_rounding_edges)
{
    static const edge_t cases[] = {
        /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even, 1 */
        {WEFT_SUM, 2, {0x3c00, 0x1000}, 0x3c00},
        /* 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: to even, 1 + 2^-9 */
        {WEFT_SUM, 2, {0x3c00, 0x1600}, 0x3c02},
        /* rounded once, not per input: 1 + 2^-11 + 2^-11 = 1 + 2^-10 exactly */
        {WEFT_SUM, 3, {0x3c00, 0x1000, 0x1000}, 0x3c01},
        /* subnormals: smallest, largest, carrying into the smallest normal */
        {WEFT_SUM, 2, {0x0001, 0x0001}, 0x0002},
        {WEFT_SUM, 2, {0x03ff, 0x0001}, 0x0400},
        {WEFT_SUM, 2, {0x0200, 0x0200}, 0x0400},
        {WEFT_SUM, 2, {0x0400, 0x8001}, 0x03ff},
        /* 2^-25 is halfway between 0 and 2^-24: to even, 0; 3 * 2^-25: to 2 * 2^-24 */
        {WEFT_PROD, 2, {0x0001, 0x3800}, 0x0000},
        {WEFT_PROD, 2, {0x0003, 0x3800}, 0x0002},
        {WEFT_PROD, 2, {0x0001, 0xb800}, 0x8000},
        {WEFT_PROD, 2, {0x0001, 0x3a00}, 0x0001},
        /* the largest finite value, 65504; 65520 and above round to inf */
        {WEFT_SUM, 2, {0x7bff, 0x4800}, 0x7bff},
        {WEFT_SUM, 2, {0x7bff, 0x4c00}, 0x7c00},
        {WEFT_SUM, 2, {0xfbff, 0xcc00}, 0xfc00},
        {WEFT_SUM, 2, {0x7bff, 0x7bff}, 0x7c00},
        {WEFT_PROD, 2, {0x7bff, 0x4000}, 0x7c00},
        /* the running sum is a float, so 65504 + 65504 - 65504 does not overflow */
        {WEFT_SUM, 3, {0x7bff, 0x7bff, 0xfbff}, 0x7bff},
        /* inf and NaN */
        {WEFT_SUM, 2, {0x7c00, 0x3c00}, 0x7c00},
        {WEFT_SUM, 2, {0x7c00, 0xfc00}, ANY_NAN},
        {WEFT_PROD, 2, {0x7c00, 0x0000}, ANY_NAN},
        {WEFT_SUM, 2, {0x7e00, 0x3c00}, ANY_NAN},
        {WEFT_SUM, 2, {0x3c00, 0x7c01}, ANY_NAN},
        {WEFT_PROD, 2, {0xfe00, 0x0000}, ANY_NAN},
        {WEFT_MAX, 2, {0x7bff, 0x7e00}, ANY_NAN},
        {WEFT_MIN, 2, {0x7c01, 0xfc00}, ANY_NAN},
        /* signed zeros */
        {WEFT_SUM, 2, {0x8000, 0x8000}, 0x8000},
        {WEFT_SUM, 2, {0x8000, 0x0000}, 0x0000},
        {WEFT_SUM, 2, {0x3c00, 0xbc00}, 0x0000},
        {WEFT_MIN, 2, {0x0000, 0x8000}, 0x8000},
        {WEFT_MAX, 2, {0x8000, 0x0000}, 0x0000},
        {WEFT_MIN, 3, {0x3c00, 0x8001, 0x0001}, 0x8001},
        {WEFT_MAX, 3, {0xfc00, 0xbc00, 0xfbff}, 0xbc00},
    };

    check_edges(WEFT_FLOAT16, cases, sizeof(cases) / sizeof(cases[0]));
}

Test(reduce, bfloat16_rounding_edges)
{
    static const edge_t cases[] = {
        /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even, 1 */
        {WEFT_SUM, 2, {0x3f80, 0x3b80}, 0x3f80},
        /* 1 + 3 * 2^-8: to even, 1 + 2^-6 */
        {WEFT_SUM, 2, {0x3f80, 0x3c40}, 0x3f82},
        /* rounded once: 1 + 2^-8 + 2^-8 = 1 + 2^-7 */
        {WEFT_SUM, 3, {0x3f80, 0x3b80, 0x3b80}, 0x3f81},
        /* the largest finite value plus half its last step: to even, inf */
        {WEFT_SUM, 2, {0x7f7f, 0x7b00}, 0x7f80},
        {WEFT_SUM, 2, {0x7f7f, 0x7a80}, 0x7f7f},
        {WEFT_SUM, 2, {0x7f7f, 0x7f7f}, 0x7f80},
        {WEFT_SUM, 2, {0xff7f, 0xff7f}, 0xff80},
        {WEFT_PROD, 2, {0x7f7f, 0x4000}, 0x7f80},
        /* subnormals */
        {WEFT_SUM, 2, {0x0001, 0x0001}, 0x0002},
        {WEFT_SUM, 2, {0x007f, 0x0001}, 0x0080},
        {WEFT_SUM, 2, {0x0080, 0x8001}, 0x007f},
        {WEFT_PROD, 2, {0x0001, 0x3f00}, 0x0000},
        {WEFT_PROD, 2, {0x0003, 0x3f00}, 0x0002},
        {WEFT_PROD, 2, {0x0001, 0xbf00}, 0x8000},
        /* inf and NaN */
        {WEFT_SUM, 2, {0x7f80, 0x3f80}, 0x7f80},
        {WEFT_SUM, 2, {0x7f80, 0xff80}, ANY_NAN},
        {WEFT_SUM, 2, {0x7fc1, 0x3f80}, ANY_NAN},
        {WEFT_SUM, 2, {0x3f80, 0x7f81}, ANY_NAN},
        {WEFT_PROD, 2, {0xff80, 0x0000}, ANY_NAN},
        {WEFT_MIN, 2, {0x3f80, 0xffc0}, ANY_NAN},
        /* signed zeros */
        {WEFT_SUM, 2, {0x8000, 0x8000}, 0x8000},
        {WEFT_SUM, 2, {0x8000, 0x0000}, 0x0000},
        {WEFT_MIN, 2, {0x0000, 0x8000}, 0x8000},
        {WEFT_MAX, 2, {0x8000, 0x0000}, 0x0000},
    };

    check_edges(WEFT_BFLOAT16, cases, sizeof(cases) / sizeof(cases[0]));
}

Test(reduce, integers_wrap_around)
{
    static const struct {
        weft_dtype_t dtype;
        edge_t e;
    } cases[] = {
        {WEFT_INT8, {WEFT_SUM, 2, {127, 1}, 0x80}},            /* 127 + 1 = -128 */
        {WEFT_INT8, {WEFT_SUM, 2, {0x80, 0xff}, 0x7f}},        /* -128 - 1 = 127 */
        {WEFT_INT8, {WEFT_PROD, 2, {16, 16}, 0}},              /* 256 */
        {WEFT_INT8, {WEFT_PROD, 2, {0x80, 0xff}, 0x80}},       /* -128 * -1 */
        {WEFT_INT8, {WEFT_PROD, 3, {0xfd, 0xfd, 0xfd}, 0xe5}}, /* (-3)^3 = -27 */
        {WEFT_INT8, {WEFT_PROD, 3, {0x7f, 0x7f, 0x7f}, 0x7f}}, /* 2048383 mod 256 */
        {WEFT_UINT8, {WEFT_SUM, 2, {255, 1}, 0}},              /* 256 */
        {WEFT_UINT8, {WEFT_SUM, 3, {200, 100, 50}, 94}},       /* 350 - 256 */
        {WEFT_UINT8, {WEFT_PROD, 2, {16, 17}, 16}},            /* 272 - 256 */
        {WEFT_UINT8, {WEFT_PROD, 3, {255, 255, 255}, 255}},    /* (-1)^3 mod 256 */
        {WEFT_INT32, {WEFT_SUM, 2, {0x7fffffff, 1}, 0x80000000}},
        {WEFT_UINT32, {WEFT_PROD, 2, {0x10000, 0x10001}, 0x10000}},
        {WEFT_INT64, {WEFT_SUM, 2, {0x7fffffffffffffff, 1}, 0x8000000000000000}},
        {WEFT_INT64, {WEFT_PROD, 2, {0x8000000000000000, UINT64_MAX}, 0x8000000000000000}},
        {WEFT_UINT64, {WEFT_SUM, 2, {UINT64_MAX, 2}, 1}},
        {WEFT_UINT64, {WEFT_PROD, 2, {0x100000000, 0x100000000}, 0}},
        /* MIN and MAX see the sign */
        {WEFT_INT8, {WEFT_MIN, 2, {0x80, 0x7f}, 0x80}},
        {WEFT_UINT8, {WEFT_MIN, 2, {0x80, 0x7f}, 0x7f}},
        {WEFT_INT32, {WEFT_MAX, 2, {0xffffffff, 0}, 0}},
        {WEFT_UINT32, {WEFT_MAX, 2, {0xffffffff, 0}, 0xffffffff}},
        {WEFT_INT64, {WEFT_MIN, 2, {1, 0x8000000000000000}, 0x8000000000000000}},
        {WEFT_UINT64, {WEFT_MIN, 2, {1, 0x8000000000000000}, 1}},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        check_edges(cases[c].dtype, &cases[c].e, 1);
    }
}

Test(reduce, logical_ops_give_zero_or_one)
{
    static const struct {
        weft_dtype_t dtype;
        edge_t e;
    } cases[] = {
        {WEFT_UINT8, {WEFT_LAND, 2, {5, 3}, 1}},
        {WEFT_UINT8, {WEFT_LAND, 2, {5, 0}, 0}},
        {WEFT_UINT8, {WEFT_LOR, 2, {0, 0}, 0}},
        {WEFT_UINT8, {WEFT_LOR, 2, {0, 200}, 1}},
        {WEFT_UINT8, {WEFT_LXOR, 2, {5, 3}, 0}},
        {WEFT_UINT8, {WEFT_LXOR, 2, {5, 0}, 1}},
        {WEFT_UINT8, {WEFT_LXOR, 3, {1, 2, 4}, 1}},
        {WEFT_INT8, {WEFT_LAND, 3, {0x80, 0xff, 2}, 1}},
        {WEFT_INT8, {WEFT_LOR, 3, {0, 0, 0x80}, 1}},
        {WEFT_INT32, {WEFT_LAND, 2, {0xffffffff, 0x100}, 1}},
        {WEFT_UINT32, {WEFT_LOR, 2, {0x80000000, 0}, 1}},
        {WEFT_INT64, {WEFT_LXOR, 3, {0xfffffffffffffffb, 0, 7}, 0}},
        {WEFT_UINT64, {WEFT_LAND, 2, {0x100000000, 0x8000000000000000}, 1}},
        {WEFT_UINT64, {WEFT_LXOR, 2, {0x100000000, 0}, 1}},
        /* bitwise ops keep all bits */
        {WEFT_UINT8, {WEFT_BAND, 3, {0xf3, 0x3f, 0xfe}, 0x32}},
        {WEFT_INT32, {WEFT_BOR, 2, {0x80000000, 1}, 0x80000001}},
        {WEFT_UINT64,
         {WEFT_BXOR, 3, {0xff00ff00ff00ff00, 0x0ff00ff00ff00ff0, 1}, 0xf0f0f0f0f0f0f0f1}},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        check_edges(cases[c].dtype, &cases[c].e, 1);
    }
}

/*
 * MIN and MAX over every pair and triple of special values, in every order: the same bits, a NaN
 * when any input is one, -0 below +0.
 */
static void check_minmax_commutes(weft_dtype_t dtype, const uint64_t *v, size_t nv)
{
    static const weft_op_t ops[] = {WEFT_MIN, WEFT_MAX};
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

    for (size_t o = 0; o < 2; o++) {
        for (size_t a = 0; a < nv; a++) {
            for (size_t b = 0; b < nv; b++) {
                uint64_t ab[] = {v[a], v[b]};
                uint64_t ba[] = {v[b], v[a]};
                uint64_t r = reduce_one(dtype, ops[o], ab, 2);
                int any_nan = is_nan_bits(dtype, v[a]) || is_nan_bits(dtype, v[b]);

                cr_assert_eq(r, reduce_one(dtype, ops[o], ba, 2),
                             "%s %s(0x%llx, 0x%llx) depends on the order", weft_dtype_name(dtype),
                             weft_op_name(ops[o]), (unsigned long long)v[a],
                             (unsigned long long)v[b]);
                cr_assert_eq(is_nan_bits(dtype, r), any_nan, "%s %s(0x%llx, 0x%llx) = 0x%llx",
                             weft_dtype_name(dtype), weft_op_name(ops[o]), (unsigned long long)v[a],
                             (unsigned long long)v[b], (unsigned long long)r);
                if (!any_nan) {
                    cr_assert(r == v[a] || r == v[b], "%s %s(0x%llx, 0x%llx) = 0x%llx",
                              weft_dtype_name(dtype), weft_op_name(ops[o]),
                              (unsigned long long)v[a], (unsigned long long)v[b],
                              (unsigned long long)r);
                }
                for (size_t c = 0; c < nv; c++) {
                    uint64_t abc[] = {v[a], v[b], v[c]};
                    uint64_t first = 0;

                    for (int p = 0; p < 6; p++) {
                        uint64_t in[] = {abc[perms[p][0]], abc[perms[p][1]], abc[perms[p][2]]};
                        uint64_t got = reduce_one(dtype, ops[o], in, 3);

                        first = p == 0 ? got : first;
                        cr_assert_eq(got, first, "%s %s of 0x%llx 0x%llx 0x%llx: order matters",
                                     weft_dtype_name(dtype), weft_op_name(ops[o]),
                                     (unsigned long long)v[a], (unsigned long long)v[b],
                                     (unsigned long long)v[c]);
                    }
                }
            }
        }
    }
}

Test(reduce, float_minmax_commute_bitwise)
{
    /* +0 -0 1 -1 inf -inf qNaN -qNaN qNaN+payload sNaN subnormal max */
    static const uint64_t f16[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00,
                                   0x7e00, 0xfe00, 0x7e01, 0x7c01, 0x0001, 0x7bff};
    static const uint64_t bf16[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80,
                                    0x7fc0, 0xffc0, 0x7fc1, 0x7f81, 0x0001, 0x7f7f};
    static const uint64_t f32[] = {0x00000000, 0x80000000, 0x3f800000, 0xbf800000,
                                   0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
                                   0x7fc00001, 0x7f800001, 0x00000001, 0x7f7fffff};
    static const uint64_t f64[] = {0x0000000000000000, 0x8000000000000000, 0x3ff0000000000000,
                                   0xbff0000000000000, 0x7ff0000000000000, 0xfff0000000000000,
                                   0x7ff8000000000000, 0xfff8000000000000, 0x7ff8000000000001,
                                   0x7ff0000000000001, 0x0000000000000001, 0x7fefffffffffffff};

    check_minmax_commutes(WEFT_FLOAT16, f16, 12);
    check_minmax_commutes(WEFT_BFLOAT16, bf16, 12);
    check_minmax_commutes(WEFT_FLOAT32, f32, 12);
    check_minmax_commutes(WEFT_FLOAT64, f64, 12);

    /* the signed zeros exactly */
    cr_assert_eq(reduce_one(WEFT_FLOAT32, WEFT_MIN, (uint64_t[]){0, 0x80000000}, 2), 0x80000000);
    cr_assert_eq(reduce_one(WEFT_FLOAT32, WEFT_MAX, (uint64_t[]){0x80000000, 0}, 2), 0);
    cr_assert_eq(reduce_one(WEFT_FLOAT64, WEFT_MIN, (uint64_t[]){0, 0x8000000000000000}, 2),
                 0x8000000000000000);
    cr_assert_eq(reduce_one(WEFT_FLOAT64, WEFT_MAX, (uint64_t[]){0x8000000000000000, 0}, 2), 0);
}

/* ---- the conversions of half.h ---- */

Test(half, float16_widen_exhaustive)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = weft__f16_to_float((uint16_t)h);
        uint32_t bits = bits_of_f32(f);
        double expect = ref_f16_value((uint16_t)h);

        cr_assert_eq(bits >> 31, h >> 15, "0x%04x: sign lost", h);
        if (isnan(expect)) {
            cr_assert(isnan(f) && (bits & 0x7fffff) == (h & 0x3ff) << 13,
                      "0x%04x: 0x%08x is not the same NaN", h, bits);
        } else {
            cr_assert((double)f == expect, "0x%04x: %a, expected %a", h, (double)f, expect);
        }
    }
}

Test(half, bfloat16_widen_exhaustive)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = weft__bf16_to_float((uint16_t)h);
        double expect = ref_bf16_value((uint16_t)h);

        cr_assert_eq(bits_of_f32(f), h << 16, "0x%04x: 0x%08x", h, bits_of_f32(f));
        cr_assert(isnan(expect) ? isnan(f) : (double)f == expect, "0x%04x: %a, expected %a", h,
                  (double)f, expect);
    }
}

/*
 * Every pair of neighbouring finite halves p, p + 1 (the last with inf above), both signs: p
 * itself, the midpoint (to the even one), and the floats just below and above the midpoint.
 */
static void check_narrow_midpoints(weft_dtype_t dtype, uint16_t (*narrow)(float))
{
    unsigned inf;
    double beyond;
    unsigned sign_bit;

    ref_half_limits(dtype, &inf, &beyond, &sign_bit);
    for (unsigned p = 0; p < inf; p++) {
        double lo = ref_half_value(dtype, p);
        double hi = p + 1 == inf ? beyond : ref_half_value(dtype, p + 1);
        float mid = (float)((lo + hi) / 2);

        cr_assert_eq((double)mid, (lo + hi) / 2, "0x%04x: midpoint is not a float", p);
        for (unsigned sign = 0; sign <= sign_bit; sign += sign_bit) {
            float s = sign ? -1.0f : 1.0f;
            unsigned even = p % 2 == 0 ? p : p + 1;
            /* E4M3 saturates where the next pattern is its NaN */
            unsigned next = dtype == WEFT_FLOAT8_E4M3 && p + 1 == inf ? p : p + 1;

            cr_assert_eq(narrow(s * (float)lo), sign | p, "0x%04x", sign | p);
            cr_assert_eq(narrow(s * mid), sign | even, "midpoint above 0x%04x", sign | p);
            cr_assert_eq(narrow(s * nextafterf(mid, 0)), sign | p, "below midpoint of 0x%04x",
                         sign | p);
            cr_assert_eq(narrow(s * nextafterf(mid, INFINITY)), sign | next,
                         "above midpoint of 0x%04x", sign | p);
        }
    }
}

Test(half, float16_narrow_midpoints)
{
    check_narrow_midpoints(WEFT_FLOAT16, weft__float_to_f16);
}

Test(half, bfloat16_narrow_midpoints)
{
    check_narrow_midpoints(WEFT_BFLOAT16, weft__float_to_bf16);
}

Test(half, narrow_special_patterns)
{
    static const struct {
        uint32_t f;
        uint16_t f16;
        uint16_t bf16;
    } cases[] = {
        {0x3f800000, 0x3c00, 0x3f80}, /* 1 */
        {0x3f801000, 0x3c00, 0x3f80}, /* 1 + 2^-11: FLOAT16 tie to even */
        {0x3f803000, 0x3c02, 0x3f80}, /* 1 + 3 * 2^-11 */
        {0x3f801001, 0x3c01, 0x3f80}, /* just above the tie */
        {0x3f808000, 0x3c04, 0x3f80}, /* 1 + 2^-8: BFLOAT16 tie to even */
        {0x3f818000, 0x3c0c, 0x3f82}, /* 1 + 3 * 2^-8 */
        {0x477fe000, 0x7bff, 0x4780}, /* 65504 */
        {0x477fefff, 0x7bff, 0x4780}, /* just under 65520 */
        {0x477ff000, 0x7c00, 0x4780}, /* 65520: tie at the top, to inf */
        {0x47800000, 0x7c00, 0x4780}, /* 65536 */
        {0x7f7f7fff, 0x7c00, 0x7f7f}, /* under the BFLOAT16 tie at the top */
        {0x7f7f8000, 0x7c00, 0x7f80}, /* BFLOAT16 tie at the top, to inf */
        {0x7f7fffff, 0x7c00, 0x7f80}, /* FLT_MAX */
        {0xff7fffff, 0xfc00, 0xff80}, /* -FLT_MAX */
        {0x7f800000, 0x7c00, 0x7f80}, /* inf */
        {0xff800000, 0xfc00, 0xff80}, /* -inf */
        {0x33800000, 0x0001, 0x3380}, /* 2^-24, the smallest FLOAT16 subnormal */
        {0x33000000, 0x0000, 0x3300}, /* 2^-25: tie, to even 0 */
        {0x33000001, 0x0001, 0x3300}, /* just above */
        {0x33c00000, 0x0002, 0x33c0}, /* 3 * 2^-25: tie, to even 2 */
        {0x387fc000, 0x03ff, 0x3880}, /* the largest FLOAT16 subnormal */
        {0x387fe000, 0x0400, 0x3880}, /* tie between it and the smallest normal */
        {0x38800000, 0x0400, 0x3880}, /* 2^-14 */
        {0x00010000, 0x0000, 0x0001}, /* the smallest BFLOAT16 subnormal */
        {0x00008000, 0x0000, 0x0000}, /* tie, to even 0 */
        {0x00018000, 0x0000, 0x0002}, /* tie, to even 2 */
        {0x007f8000, 0x0000, 0x0080}, /* tie, carries into the smallest normal */
        {0x00000001, 0x0000, 0x0000}, /* the smallest float */
        {0x80000001, 0x8000, 0x8000},
        {0x00000000, 0x0000, 0x0000},
        {0x80000000, 0x8000, 0x8000},
        /* NaN: quiet, signed, the top of the payload; never inf */
        {0x7fc00000, 0x7e00, 0x7fc0},
        {0xffc00000, 0xfe00, 0xffc0},
        {0x7f800001, 0x7e00, 0x7fc0}, /* payload only in the dropped bits */
        {0xff800001, 0xfe00, 0xffc0},
        {0x7fa00000, 0x7f00, 0x7fe0}, /* signalling, payload kept, made quiet */
        {0x7fffffff, 0x7fff, 0x7fff},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        float f = f32_of(cases[c].f);

        cr_assert_eq(weft__float_to_f16(f), cases[c].f16, "0x%08x to float16: 0x%04x", cases[c].f,
                     weft__float_to_f16(f));
        cr_assert_eq(weft__float_to_bf16(f), cases[c].bf16, "0x%08x to bfloat16: 0x%04x",
                     cases[c].f, weft__float_to_bf16(f));
    }
}

/* ---- the 8-bit floats ---- */

static uint16_t narrow_e4m3(float f)
{
    return weft__float_to_f8e4m3(f);
}

static uint16_t narrow_e5m2(float f)
{
    return weft__float_to_f8e5m2(f);
}

Test(float8, widen_exhaustive)
{
    for (unsigned h = 0; h <= 0xff; h++) {
        float e4 = weft__f8e4m3_to_float((uint8_t)h);
        float e5 = weft__f8e5m2_to_float((uint8_t)h);
        double want4 = ref_f8e4m3_value((uint8_t)h);
        double want5 = ref_f8e5m2_value((uint8_t)h);

        cr_assert_eq(bits_of_f32(e4) >> 31, h >> 7, "e4m3 0x%02x: sign lost", h);
        cr_assert_eq(bits_of_f32(e5) >> 31, h >> 7, "e5m2 0x%02x: sign lost", h);
        if (isnan(want4)) {
            cr_assert_eq(bits_of_f32(e4) & 0x7fffffffu, 0x7fc00000u, "e4m3 0x%02x: 0x%08x", h,
                         bits_of_f32(e4));
        } else {
            cr_assert((double)e4 == want4, "e4m3 0x%02x: %a, expected %a", h, (double)e4, want4);
        }
        if (isnan(want5)) { /* the payload kept */
            cr_assert(isnan(e5) && (bits_of_f32(e5) & 0x7fffff) == (h & 0x3u) << 21,
                      "e5m2 0x%02x: 0x%08x is not the same NaN", h, bits_of_f32(e5));
        } else {
            cr_assert((double)e5 == want5, "e5m2 0x%02x: %a, expected %a", h, (double)e5, want5);
        }
    }
    /* the definitions' landmarks */
    cr_assert_eq(ref_f8e4m3_value(0x7e), 448.0);
    cr_assert_eq(ref_f8e4m3_value(0x01), ldexp(1.0, -9));
    cr_assert_eq(ref_f8e4m3_value(0x08), ldexp(1.0, -6));
    cr_assert_eq(ref_f8e5m2_value(0x7b), 57344.0);
    cr_assert_eq(ref_f8e5m2_value(0x01), ldexp(1.0, -16));
    cr_assert(isinf(ref_f8e5m2_value(0x7c)));
}

Test(float8, narrow_midpoints)
{
    check_narrow_midpoints(WEFT_FLOAT8_E4M3, narrow_e4m3);
    check_narrow_midpoints(WEFT_FLOAT8_E5M2, narrow_e5m2);
}

Test(float8, narrow_special_patterns)
{
    static const struct {
        uint32_t f;
        uint8_t e4m3;
        uint8_t e5m2;
    } cases[] = {
        {0x3f800000, 0x38, 0x3c}, /* 1 */
        {0x3f880000, 0x38, 0x3c}, /* 1 + 2^-4: E4M3 tie to even */
        {0x3f880001, 0x39, 0x3c}, /* just above */
        {0x3f980000, 0x3a, 0x3d}, /* 1 + 3 * 2^-4: E4M3 tie, to even 1 + 2^-2 */
        {0x3f900000, 0x39, 0x3c}, /* 1 + 2^-3: E5M2 tie to even */
        {0x3fb00000, 0x3b, 0x3e}, /* 1 + 3 * 2^-3: E5M2 tie, to even 1.5 */
        {0x43e00000, 0x7e, 0x5f}, /* 448, E4M3's largest */
        {0x43e80000, 0x7e, 0x5f}, /* 464: tie between 448 and the NaN pattern, to 448 */
        {0x43e80001, 0x7e, 0x5f}, /* above it: E4M3 saturates */
        {0x43f00000, 0x7e, 0x60}, /* 480 */
        {0x47600000, 0x7e, 0x7b}, /* 57344, E5M2's largest */
        {0x476fffff, 0x7e, 0x7b}, /* just under 61440 */
        {0x47700000, 0x7e, 0x7c}, /* 61440: tie at the top, to inf */
        {0x7f7fffff, 0x7e, 0x7c}, /* FLT_MAX */
        {0xff7fffff, 0xfe, 0xfc}, /* -FLT_MAX */
        {0x7f800000, 0x7e, 0x7c}, /* inf: E4M3 has none, 448 */
        {0xff800000, 0xfe, 0xfc}, /* -inf */
        {0x3b000000, 0x01, 0x18}, /* 2^-9, the smallest E4M3 subnormal */
        {0x3a800000, 0x00, 0x14}, /* 2^-10: tie, to even 0 */
        {0x3a800001, 0x01, 0x14}, /* just above */
        {0x3b400000, 0x02, 0x1a}, /* 3 * 2^-10: tie, to even 2 */
        {0x3c700000, 0x08, 0x24}, /* tie between the largest E4M3 subnormal and 2^-6 */
        {0x37800000, 0x00, 0x01}, /* 2^-16, the smallest E5M2 subnormal */
        {0x37000000, 0x00, 0x00}, /* 2^-17: tie, to even 0 */
        {0x37c00000, 0x00, 0x02}, /* 3 * 2^-17: tie, to even 2 */
        {0x38600000, 0x00, 0x04}, /* tie between the largest E5M2 subnormal and 2^-14 */
        {0x00000001, 0x00, 0x00}, /* the smallest float */
        {0x80000001, 0x80, 0x80},
        {0x00000000, 0x00, 0x00},
        {0x80000000, 0x80, 0x80},
        /* NaN: the format's NaN with the sign */
        {0x7fc00000, 0x7f, 0x7f},
        {0xffc00000, 0xff, 0xff},
        {0x7f800001, 0x7f, 0x7f},
        {0x7fa00000, 0x7f, 0x7f},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        float f = f32_of(cases[c].f);

        cr_assert_eq(weft__float_to_f8e4m3(f), cases[c].e4m3, "0x%08x to e4m3: 0x%02x", cases[c].f,
                     weft__float_to_f8e4m3(f));
        cr_assert_eq(weft__float_to_f8e5m2(f), cases[c].e5m2, "0x%08x to e5m2: 0x%02x", cases[c].f,
                     weft__float_to_f8e5m2(f));
    }
}

/* 2^22 random floats (every bit pattern possible, NaNs left out) and as many of moderate
 * magnitude: the nearest pattern by search over the format's values, ties to even */
Test(float8, narrow_agrees_with_a_nearest_search)
{
    uint64_t x = 0x2545f4914f6cdd1dull;
    const weft_dtype_t dtypes[] = {WEFT_FLOAT8_E4M3, WEFT_FLOAT8_E5M2};

    for (size_t d = 0; d < 2; d++) {
        for (uint32_t i = 0; i < (1u << 23); i++) {
            uint32_t bits;
            float f;
            uint16_t got;

            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bits = (uint32_t)x;
            if (i % 2) { /* exponents of 2^-20 .. 2^20 */
                bits = (bits & 0x807fffffu) | (uint32_t)(107 + (x >> 40) % 41) << 23;
            }
            f = f32_of(bits);
            if (isnan(f)) {
                continue;
            }
            got =
                dtypes[d] == WEFT_FLOAT8_E4M3 ? weft__float_to_f8e4m3(f) : weft__float_to_f8e5m2(f);
            cr_assert_eq(got, ref_half_round(dtypes[d], f), "%s 0x%08x: 0x%02x, expected 0x%02x",
                         weft_dtype_name(dtypes[d]), bits, got, ref_half_round(dtypes[d], f));
        }
    }
}

/* sums accumulate in float and round once; overflow */
Test(reduce, float8_rounding_edges)
{
    static const edge_t e4m3[] = {
        /* 1 + 2^-4 + 2^-4 = 1.125 in float; pairwise rounding would give 1 */
        {WEFT_SUM, 3, {0x38, 0x18, 0x18}, 0x39},
        {WEFT_SUM, 2, {0x38, 0x18}, 0x38},       /* the tie alone: to even 1 */
        {WEFT_SUM, 2, {0x7e, 0x58}, 0x7e},       /* 448 + 16 = 464: tie, to 448 */
        {WEFT_SUM, 2, {0x7e, 0x5c}, 0x7e},       /* 448 + 24: saturates */
        {WEFT_SUM, 2, {0xfe, 0xfe}, 0xfe},       /* -896 too */
        {WEFT_SUM, 3, {0x7e, 0x7e, 0xfe}, 0x7e}, /* 448 + 448 - 448: float holds 896 */
        {WEFT_PROD, 2, {0x01, 0x01}, 0x00},      /* 2^-18 underflows to 0 */
        {WEFT_PROD, 2, {0x81, 0x01}, 0x80},      /* to -0 */
        {WEFT_MAX, 2, {0x7e, 0x7f}, ANY_NAN},
        {WEFT_MIN, 2, {0xff, 0x38}, ANY_NAN},
        {WEFT_SUM, 2, {0x80, 0x80}, 0x80},
        {WEFT_MIN, 2, {0x00, 0x80}, 0x80},
        {WEFT_MAX, 2, {0x80, 0x00}, 0x00},
    };
    static const edge_t e5m2[] = {
        {WEFT_SUM, 3, {0x3c, 0x30, 0x30}, 0x3d}, /* 1 + 2^-3 + 2^-3 = 1.25 */
        {WEFT_SUM, 2, {0x3c, 0x30}, 0x3c},       /* 1 + 2^-3: tie, to even 1 */
        {WEFT_SUM, 2, {0x7b, 0x6c}, 0x7c},       /* 57344 + 4096 = 61440: to inf */
        {WEFT_SUM, 2, {0x7b, 0x68}, 0x7b},       /* 57344 + 2048 */
        {WEFT_SUM, 2, {0x7c, 0xfc}, ANY_NAN},    /* inf - inf */
        {WEFT_PROD, 2, {0x7c, 0x00}, ANY_NAN},   {WEFT_MAX, 2, {0x7b, 0x7c}, 0x7c},
        {WEFT_MIN, 2, {0xfc, 0x7b}, 0xfc},       {WEFT_SUM, 2, {0x3c, 0x7e}, ANY_NAN},
    };

    check_edges(WEFT_FLOAT8_E4M3, e4m3, sizeof(e4m3) / sizeof(e4m3[0]));
    check_edges(WEFT_FLOAT8_E5M2, e5m2, sizeof(e5m2) / sizeof(e5m2[0]));
}

Test(avg_finalize, float8_divides_in_float)
{
    const uint8_t e4[] = {0x38, 0xc8, 0x7e, 0x01, 0x03, 0x7f};
    const uint8_t e5[] = {0x3c, 0xc8, 0x7b, 0x01, 0x03, 0x7c};
    uint8_t b4[sizeof(e4)], b5[sizeof(e5)];

    memcpy(b4, e4, sizeof(e4));
    memcpy(b5, e5, sizeof(e5));
    cr_assert_eq(weft__host_avg_finalize(b4, sizeof(b4), WEFT_FLOAT8_E4M3, 3), WEFT_OK);
    cr_assert_eq(weft__host_avg_finalize(b5, sizeof(b5), WEFT_FLOAT8_E5M2, 3), WEFT_OK);
    for (size_t i = 0; i < sizeof(e4); i++) {
        float q4 = (float)ref_f8e4m3_value(e4[i]) / 3.0f;
        float q5 = (float)ref_f8e5m2_value(e5[i]) / 3.0f;

        cr_assert_eq(b4[i], isnan(q4) ? 0x7f : ref_half_round(WEFT_FLOAT8_E4M3, q4),
                     "e4m3 %zu: 0x%02x", i, b4[i]);
        cr_assert_eq(b5[i], ref_half_round(WEFT_FLOAT8_E5M2, q5), "e5m2 %zu: 0x%02x", i, b5[i]);
    }
    cr_assert_eq(b4[0], 0x2b); /* 1/3: between 0.3125 and 0.34375, nearer 0.34375 */
    cr_assert_eq(b4[2], 0x71); /* 448/3 = 149.33: 144 + 8 */
    cr_assert_eq(b4[3], 0x00); /* 2^-9 / 3 */
    cr_assert_eq(b4[4], 0x01); /* 3 * 2^-9 / 3 */
    cr_assert_eq(b4[5], 0x7f); /* NaN */
    cr_assert_eq(b5[0], 0x35); /* 1/3: 0.3125 */
    cr_assert_eq(b5[5], 0x7c); /* inf */
}

/* ---- avg_finalize ---- */

Test(avg_finalize, integers_truncate_toward_zero)
{
    int8_t i8[] = {-7, 7, -128, 127, -1, 0, -2};
    const int8_t i8_expect[] = {-3, 3, -64, 63, 0, 0, -1};
    uint8_t u8[] = {255, 1, 6};
    const uint8_t u8_expect[] = {127, 0, 3};
    int32_t i32[] = {-7, -9, INT32_MIN, INT32_MAX};
    const int32_t i32_expect[] = {-1, -2, -536870912, 536870911};
    uint32_t u32[] = {UINT32_MAX, 3};
    const uint32_t u32_expect[] = {1073741823, 0};
    int64_t i64[] = {INT64_MIN, -10, 10, INT64_MAX};
    const int64_t i64_expect[] = {-3074457345618258602, -3, 3, 3074457345618258602};
    uint64_t u64[] = {UINT64_MAX, 5};
    const uint64_t u64_expect[] = {6148914691236517205u, 1};
    /* a divisor beyond INT64_MAX: only INT64_MIN is not below it in magnitude */
    int64_t big[] = {INT64_MIN, INT64_MAX, -1};
    const int64_t big_expect[] = {-1, 0, 0};

    cr_assert_eq(weft__host_avg_finalize(i8, 7, WEFT_INT8, 2), WEFT_OK);
    cr_assert_arr_eq(i8, i8_expect, sizeof(i8));
    cr_assert_eq(weft__host_avg_finalize(u8, 3, WEFT_UINT8, 2), WEFT_OK);
    cr_assert_arr_eq(u8, u8_expect, sizeof(u8));
    cr_assert_eq(weft__host_avg_finalize(i32, 4, WEFT_INT32, 4), WEFT_OK);
    cr_assert_arr_eq(i32, i32_expect, sizeof(i32));
    cr_assert_eq(weft__host_avg_finalize(u32, 2, WEFT_UINT32, 4), WEFT_OK);
    cr_assert_arr_eq(u32, u32_expect, sizeof(u32));
    cr_assert_eq(weft__host_avg_finalize(i64, 4, WEFT_INT64, 3), WEFT_OK);
    cr_assert_arr_eq(i64, i64_expect, sizeof(i64));
    cr_assert_eq(weft__host_avg_finalize(u64, 2, WEFT_UINT64, 3), WEFT_OK);
    cr_assert_arr_eq(u64, u64_expect, sizeof(u64));
    cr_assert_eq(weft__host_avg_finalize(big, 3, WEFT_INT64, (size_t)1 << 63), WEFT_OK);
    cr_assert_arr_eq(big, big_expect, sizeof(big));
}

Test(avg_finalize, floats_divide_in_their_precision)
{
    float f32[] = {1.0f, -1.0f, 10.0f, -0.0f, INFINITY};
    double f64[] = {1.0, -1.0, 10.0, -0.0, -INFINITY};
    uint16_t f16[] = {0x3c00, 0xc900, 0x7bff, 0x0001, 0x0003, 0x7c00};
    uint16_t bf16[] = {0x3f80, 0xc120, 0x0001, 0xff80};
    const uint32_t f32_expect[] = {0x3eaaaaab, 0xbeaaaaab, 0x40555555, 0x80000000, 0x7f800000};
    const uint64_t f64_expect[] = {0x3fd5555555555555, 0xbfd5555555555555, 0x400aaaaaaaaaaaab,
                                   0x8000000000000000, 0xfff0000000000000};

    cr_assert_eq(weft__host_avg_finalize(f32, 5, WEFT_FLOAT32, 3), WEFT_OK);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(bits_of_f32(f32[i]), f32_expect[i], "float32 %d: %a", i, (double)f32[i]);
    }
    cr_assert_eq(weft__host_avg_finalize(f64, 5, WEFT_FLOAT64, 3), WEFT_OK);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(bits_of_f64(f64[i]), f64_expect[i], "float64 %d: %a", i, f64[i]);
    }

    /* halves: float(x) / 3 in float, rounded once */
    {
        const uint16_t orig16[] = {0x3c00, 0xc900, 0x7bff, 0x0001, 0x0003, 0x7c00};
        const uint16_t orig_bf[] = {0x3f80, 0xc120, 0x0001, 0xff80};

        cr_assert_eq(weft__host_avg_finalize(f16, 6, WEFT_FLOAT16, 3), WEFT_OK);
        for (int i = 0; i < 6; i++) {
            float q = (float)ref_f16_value(orig16[i]) / 3.0f;

            cr_assert_eq(f16[i], ref_half_round(WEFT_FLOAT16, q), "float16 %d: 0x%04x", i, f16[i]);
        }
        cr_assert_eq(f16[0], 0x3555);
        cr_assert_eq(f16[3], 0x0000); /* 2^-24 / 3 */
        cr_assert_eq(f16[4], 0x0001); /* 3 * 2^-24 / 3 */
        cr_assert_eq(f16[5], 0x7c00);
        cr_assert_eq(weft__host_avg_finalize(bf16, 4, WEFT_BFLOAT16, 3), WEFT_OK);
        for (int i = 0; i < 4; i++) {
            float q = (float)ref_bf16_value(orig_bf[i]) / 3.0f;

            cr_assert_eq(bf16[i], ref_half_round(WEFT_BFLOAT16, q), "bfloat16 %d: 0x%04x", i,
                         bf16[i]);
        }
        cr_assert_eq(bf16[0], 0x3eab);
    }
}

Test(avg_finalize, after_avg_reduce)
{
    int32_t a[] = {1, -7, 100};
    int32_t b[] = {2, 0, 101};
    int32_t c[] = {4, 0, 102};
    const void *srcs[] = {a, b, c};
    int32_t out[3];
    const int32_t expect[] = {2, -2, 101};

    cr_assert_eq(weft__host_reduce(out, srcs, 3, 3, WEFT_INT32, WEFT_AVG), WEFT_OK);
    cr_assert_eq(weft__host_avg_finalize(out, 3, WEFT_INT32, 3), WEFT_OK);
    cr_assert_arr_eq(out, expect, sizeof(out));
}

Test(avg_finalize, rejects_divisor_zero)
{
    float f[] = {1.0f, 2.0f};
    int32_t i[] = {7, -7};

    cr_assert_eq(weft__host_avg_finalize(f, 2, WEFT_FLOAT32, 0), WEFT_ERR_INVALID_ARG);
    cr_assert(strstr(weft_last_error(), "divisor") != NULL, "%s", weft_last_error());
    cr_assert(f[0] == 1.0f && f[1] == 2.0f);
    cr_assert_eq(weft__host_avg_finalize(i, 2, WEFT_INT32, 0), WEFT_ERR_INVALID_ARG);
    cr_assert(i[0] == 7 && i[1] == -7);
    cr_assert_eq(weft__host_avg_finalize(i, 0, WEFT_INT32, 0), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__host_avg_finalize(i, 2, WEFT_DTYPE_COUNT, 2), WEFT_ERR_INVALID_ARG);
    cr_assert(i[0] == 7 && i[1] == -7);
}

/* ---- argument checks ---- */

Test(reduce, bitwise_ops_on_floats_rejected)
{
    static const weft_dtype_t dtypes[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32, WEFT_FLOAT64};
    static const weft_op_t ops[] = {WEFT_BAND, WEFT_BOR, WEFT_BXOR, WEFT_LAND, WEFT_LOR, WEFT_LXOR};
    double a[4] = {1, 2, 3, 4};
    double b[4] = {5, 6, 7, 8};
    const void *srcs[] = {a, b};

    for (size_t d = 0; d < 4; d++) {
        for (size_t o = 0; o < 6; o++) {
            unsigned char dst[sizeof(a)];
            unsigned char untouched[sizeof(a)];

            memset(dst, 0x5a, sizeof(dst));
            memset(untouched, 0x5a, sizeof(untouched));
            weft__error_clear();
            cr_assert_eq(weft__host_reduce(dst, srcs, 2, 2, dtypes[d], ops[o]),
                         WEFT_ERR_INVALID_ARG);
            cr_assert_arr_eq(dst, untouched, sizeof(dst), "%s %s wrote dst",
                             weft_dtype_name(dtypes[d]), weft_op_name(ops[o]));
            cr_assert(strstr(weft_last_error(), weft_op_name(ops[o])) != NULL &&
                          strstr(weft_last_error(), weft_dtype_name(dtypes[d])) != NULL,
                      "message does not name op and dtype: %s", weft_last_error());
            /* in place too: the input that dst is stays as it was */
            srcs[0] = dst;
            cr_assert_eq(weft__host_reduce(dst, srcs, 2, 2, dtypes[d], ops[o]),
                         WEFT_ERR_INVALID_ARG);
            cr_assert_arr_eq(dst, untouched, sizeof(dst));
            srcs[0] = a;
        }
    }
}

Test(reduce, accepts_exactly_the_valid_combinations)
{
    uint64_t a = 3;
    uint64_t b = 5;
    uint64_t out;
    const void *srcs[] = {&a, &b};

    for (int d = 0; d < WEFT_DTYPE_COUNT; d++) {
        for (int o = 0; o < WEFT_OP_COUNT; o++) {
            weft_status_t expect = weft__op_valid_for_dtype((weft_op_t)o, (weft_dtype_t)d)
                                       ? WEFT_OK
                                       : WEFT_ERR_INVALID_ARG;

            cr_assert_eq(weft__host_reduce(&out, srcs, 2, 1, (weft_dtype_t)d, (weft_op_t)o), expect,
                         "%s %s", weft_dtype_name((weft_dtype_t)d), weft_op_name((weft_op_t)o));
        }
    }
    cr_assert_eq(weft__host_reduce(&out, srcs, 2, 1, WEFT_DTYPE_COUNT, WEFT_SUM),
                 WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__host_reduce(&out, srcs, 2, 1, WEFT_INT32, WEFT_OP_COUNT),
                 WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__host_reduce(&out, srcs, 0, 1, WEFT_INT32, WEFT_SUM), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__host_reduce(&out, srcs, -1, 1, WEFT_INT32, WEFT_SUM), WEFT_ERR_INVALID_ARG);
    cr_assert(strstr(weft_last_error(), "-1 inputs") != NULL, "%s", weft_last_error());
}

/* The loops weft__host_reduce_loops hands out, binary over the first two inputs and accumulate
 * over each next one, give weft__host_reduce's bits for every full-width (dtype, op) it defines,
 * on random bit patterns (NaNs and infinities among them) and up to 7 inputs; the narrow float
 * types and the pairs it refuses get none. */
Test(reduce, loops_give_the_reduction_bits)
{
    enum { N = 33 };
    uint64_t in[MAX_SRCS][N], want[N + 1], got[N + 1], x = 0x9e3779b97f4a7c15ull;
    const void *srcs[MAX_SRCS];
    int full = 0;

    for (int j = 0; j < MAX_SRCS; j++) {
        for (int i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            in[j][i] = x;
        }
        srcs[j] = in[j];
    }
    for (int d = 0; d < WEFT_DTYPE_COUNT; d++) {
        for (int o = 0; o < WEFT_OP_COUNT; o++) {
            weft_dtype_t dtype = (weft_dtype_t)d;
            weft_op_t op = (weft_op_t)o;
            weft_host_binary_fn binary = NULL;
            weft_host_accumulate_fn accumulate = NULL;
            size_t size = weft_dtype_size(dtype), count = N * sizeof(uint64_t) / size - 3;
            int narrow = dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16 ||
                         dtype == WEFT_FLOAT8_E4M3 || dtype == WEFT_FLOAT8_E5M2;
            int have = weft__host_reduce_loops(dtype, op, &binary, &accumulate);

            cr_assert_eq(have, !narrow && weft__op_valid_for_dtype(op, dtype), "%s %s: %d",
                         weft_dtype_name(dtype), weft_op_name(op), have);
            if (!have) {
                cr_assert(binary == NULL && accumulate == NULL, "set for a refused pair");
                continue;
            }
            full++;
            for (int n = 2; n <= MAX_SRCS; n++) {
                memset(want, 0xa5, sizeof(want));
                memset(got, 0xa5, sizeof(got));
                cr_assert_eq(weft__host_reduce(want, srcs, n, count, dtype, op), WEFT_OK);
                binary(got, srcs[0], srcs[1], count);
                for (int j = 2; j < n; j++) {
                    accumulate(got, srcs[j], count);
                }
                cr_assert(memcmp(got, want, sizeof(got)) == 0, "%s %s, %d inputs: other bits",
                          weft_dtype_name(dtype), weft_op_name(op), n);
            }
        }
    }
    cr_assert_gt(full, 40, "%d pairs", full);
    cr_assert_eq(weft__host_reduce_loops(WEFT_DTYPE_COUNT, WEFT_SUM, NULL, NULL), 0);
    cr_assert_eq(weft__host_reduce_loops(WEFT_FLOAT32, WEFT_OP_COUNT, NULL, NULL), 0);
}

/* ---- the host table ---- */

Test(host, ops_table)
{
    const weft_device_ops_t *ops = &weft__device_host_ops;
    void *p = NULL;
    void *q = NULL;
    unsigned char pattern[1000];

    cr_assert_str_eq(ops->name, "host");
    cr_assert_eq(ops->memtype, WEFT_MEM_HOST);
    cr_assert(ops->reduce == weft__host_reduce);
    cr_assert(ops->avg_finalize == weft__host_avg_finalize);
    cr_assert(weft__device_query(pattern) == ops);

    cr_assert_eq(ops->alloc(sizeof(pattern), &p), WEFT_OK);
    cr_assert_eq(ops->alloc(3, &q), WEFT_OK);
    cr_assert((uintptr_t)p % 64 == 0 && (uintptr_t)q % 64 == 0, "%p %p not 64-byte aligned", p, q);
    cr_assert_eq(ops->owns(p), 1);
    cr_assert_eq(ops->owns(pattern), 1);
    for (size_t i = 0; i < sizeof(pattern); i++) {
        pattern[i] = (unsigned char)(i * 7);
    }
    cr_assert_eq(ops->copy(p, pattern, sizeof(pattern)), WEFT_OK);
    cr_assert_arr_eq(p, pattern, sizeof(pattern));
    cr_assert_eq(ops->copy(p, p, sizeof(pattern)), WEFT_OK);
    cr_assert_arr_eq(p, pattern, sizeof(pattern));
    cr_assert_eq(ops->copy(q, pattern, 0), WEFT_OK);
    ops->free(p);
    ops->free(q);
    ops->free(NULL);
}

/* weft__host_copy, memcpy and weft's loop alike: every byte of dst copied, none around it
 * touched, for every size up to 600 bytes and sizes around the loop's steps up to 70 KiB, src
 * at every offset in a cache line, dst behind src and up to 300 bytes ahead of it modulo 4 KiB
 * (the backward loop) */
static void copy_check(const unsigned char *a, unsigned char *b, size_t sofs, size_t dofs,
                       size_t bytes)
{
    const size_t guard = 64;

    memset(b + dofs - guard, 0xA5, bytes + 2 * guard);
    weft__host_copy(b + dofs, a + sofs, bytes);
    cr_assert_arr_eq(b + dofs, a + sofs, bytes, "%zu bytes, src offset %zu, dst offset %zu", bytes,
                     sofs, dofs);
    for (size_t i = 0; i < guard; i++) {
        cr_assert(b[dofs - guard + i] == 0xA5 && b[dofs + bytes + i] == 0xA5,
                  "%zu bytes, src offset %zu, dst offset %zu: byte %zu outside dst written", bytes,
                  sofs, dofs, i);
    }
}

Test(host, copy_every_size_and_alignment)
{
    const size_t span = 80 << 10;
    static const size_t sizes[] = {1023, 1024, 1025, 2047, 2048,  2049,  4095,
                                   4096, 4097, 4160, 8191, 65536, 65537, 70001};
    const size_t saved = weft__runtime_config.host_copy;
    unsigned char *a = NULL, *b = NULL;

    cr_assert_eq(posix_memalign((void **)&a, 4096, span + 8192), 0);
    cr_assert_eq(posix_memalign((void **)&b, 4096, span + 8192), 0);
    for (size_t i = 0; i < span + 8192; i++) {
        a[i] = (unsigned char)(i * 131 + (i >> 8));
    }
    for (int loop = 0; loop < 2; loop++) {
        weft__runtime_config.host_copy = loop ? 64 : SIZE_MAX;
        cr_assert_eq(weft__host_copy_loop(4096),
                     loop && __builtin_cpu_supports("avx2") && !WEFT_HOST_COPY_SANITIZED);
        cr_assert_eq(weft__host_copy_loop(63), 0, "the loop needs 64 bytes");
        for (size_t bytes = 0; bytes <= 600; bytes++) {
            for (size_t sofs = 0; sofs < 64; sofs += 7) {
                copy_check(a, b, 1024 + sofs, 1024 + sofs + (bytes % 300), bytes);
                copy_check(a, b, 1024 + sofs, 1024 + (bytes % 17), bytes);
            }
        }
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            for (size_t dofs = 1024 - 64; dofs <= 1024 + 300; dofs += 11) {
                copy_check(a, b, 1024 + k % 5, dofs, sizes[k]);
            }
        }
        copy_check(a, b, 2048, 2048, 0);
        memcpy(b, a, 4096);
        weft__host_copy(b, b, 4096); /* onto itself: nothing changes */
        cr_assert_arr_eq(b, a, 4096);
    }
    weft__runtime_config.host_copy = saved;
    free(a);
    free(b);
}

Test(host, alloc_failure_is_no_memory)
{
    void *p = &p;

    cr_assert_eq(weft__device_host_ops.alloc(SIZE_MAX - 4096, &p), WEFT_ERR_NO_MEMORY);
    cr_assert(p == &p, "out-parameter written on failure");
    cr_assert(strstr(weft_last_error(), "host alloc") != NULL, "%s", weft_last_error());
}

/* ---- the CPU-specific half paths (device/host/reduce.c) against the portable ones ---- */

static float f32_of_bits(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* every half, and 3.1 M floats: every sign, exponent and kept mantissa of a half with the
 * dropped bits that decide the rounding (zero, one, just below, at, just above the midpoint,
 * all ones) for float16's 13 dropped bits and bfloat16's 16 */
Test(half, cpu_conversions_give_the_portable_bits)
{
    static const uint32_t low16[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    static const uint32_t low13[] = {0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff};
    const weft_dtype_t dtypes[] = {WEFT_FLOAT16, WEFT_BFLOAT16};
    size_t n = (size_t)6 << 19;
    uint16_t *h = malloc(65536 * sizeof(*h)), *a16 = malloc(n * sizeof(*a16)),
             *b16 = malloc(n * sizeof(*b16));
    float *fa = malloc(n * sizeof(*fa)), *fb = malloc(n * sizeof(*fb)),
          *in = malloc(n * sizeof(*in));
    int cpu = 0;

    cr_assert(h && a16 && b16 && fa && fb && in);
    for (uint32_t i = 0; i <= 0xffff; i++) {
        h[i] = (uint16_t)i;
    }
    for (int d = 0; d < 2; d++) {
        weft_dtype_t dt = dtypes[d];
        int shift = dt == WEFT_FLOAT16 ? 13 : 16;
        const uint32_t *low = dt == WEFT_FLOAT16 ? low13 : low16;

        /* widening: all 65536 patterns, offset by one element so the tail loop runs too */
        weft__host_half_widen(dt, fa, h, 65536, 0);
        cpu |= weft__host_half_widen(dt, fb, h + 1, 65535, 1);
        for (uint32_t i = 1; i <= 0xffff; i++) {
            cr_assert_eq(bits_of_f32(fb[i - 1]), bits_of_f32(fa[i]), "%s widen 0x%04x",
                         weft_dtype_name(dt), i);
        }
        /* narrowing */
        for (size_t i = 0; i < n; i++) {
            /* float16: 19 kept bits (sign, exponent, 10 of mantissa) above the 13 dropped;
             * bfloat16: its 16 kept bits (i / 6 wraps over them 8 times) */
            uint32_t top = (uint32_t)(i / 6) & ((1u << (32 - shift)) - 1);

            in[i] = f32_of_bits((top << shift) | low[i % 6]);
        }
        weft__host_half_narrow(dt, a16, in, n, 0);
        cpu |= weft__host_half_narrow(dt, b16, in, n - 3, 1);
        for (size_t i = 0; i + 3 < n; i++) {
            cr_assert_eq(b16[i], a16[i], "%s narrow 0x%08x: 0x%04x, portable 0x%04x",
                         weft_dtype_name(dt), bits_of_f32(in[i]), b16[i], a16[i]);
        }
    }
    cr_log_info("half conversions: %s", cpu ? "CPU instructions compared with the portable code"
                                            : "this CPU has none: portable code only");
    free(h);
    free(a16);
    free(b16);
    free(fa);
    free(fb);
    free(in);
}

/* One element of dtype for the both-ways checks: float16/bfloat16 mostly ordinary values and
 * some of every kind; the 8-bit floats any byte. */
static uint64_t both_ways_element(weft_dtype_t dtype, uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    if (weft_dtype_size(dtype) == 1) {
        return *x >> 24 & 0xff;
    }
    return *x % 16 ? (*x & 0x87ff) | 0x3000 : *x >> 20 & 0xffff;
}

/* Whole reductions of random bit patterns (NaN, inf, subnormals included), every float op,
 * 2..7 inputs, counts around the 8-element steps, dst distinct or one of the inputs: the same
 * bits with the CPU's instructions as with the portable loops, except which NaN a sum or
 * product of two NaNs gives: x86 keeps its first operand's, and which operand comes first in
 * the compiled float loop is the compiler's choice (C leaves it open); a NaN either way. MIN
 * and MAX choose between NaNs by rule (device/reduce_elem.h): bitwise equal. */
static void check_both_ways(weft_dtype_t dtype, uint64_t seed)
{
    const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG};
    const size_t counts[] = {1, 7, 8, 9, 31, 2049, 5000};
    const size_t es = weft_dtype_size(dtype);
    enum { MAXN = 5000 };
    unsigned char *src[MAX_SRCS], *d[2] = {malloc(MAXN * es), malloc(MAXN * es)};
    unsigned char *save = malloc(MAXN * es);
    uint64_t x = seed;

    cr_assert(d[0] && d[1] && save);
    for (int j = 0; j < MAX_SRCS; j++) {
        src[j] = malloc(MAXN * es);
        cr_assert(src[j]);
    }
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        for (int nsrcs = 2; nsrcs <= MAX_SRCS; nsrcs++) {
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                for (int alias = -1; alias < nsrcs; alias += nsrcs) {
                    const void *in[MAX_SRCS];
                    size_t n = counts[c];

                    for (int j = 0; j < nsrcs; j++) {
                        for (size_t i = 0; i < n; i++) {
                            store_bits(dtype, src[j] + i * es, both_ways_element(dtype, &x));
                        }
                    }
                    for (int pass = 0; pass < 2; pass++) {
                        for (int j = 0; j < nsrcs; j++) {
                            in[j] = src[j];
                        }
                        if (alias >= 0) { /* dst is the last input: reduce into a copy */
                            memcpy(d[pass], src[nsrcs - 1], n * es);
                            in[nsrcs - 1] = d[pass];
                        }
                        memcpy(save, src[0], n * es);
                        weft__host_reduce_simd(pass);
                        cr_assert_eq(weft__host_reduce(d[pass], in, nsrcs, n, dtype, ops[o]),
                                     WEFT_OK);
                        cr_assert_eq(memcmp(save, src[0], n * es), 0);
                    }
                    weft__host_reduce_simd(1);
                    for (size_t i = 0; i < n; i++) {
                        uint64_t portable = load_bits(dtype, d[0] + i * es);
                        uint64_t cpu = load_bits(dtype, d[1] + i * es);

                        if (ops[o] != WEFT_MIN && ops[o] != WEFT_MAX &&
                            is_nan_bits(dtype, portable) && is_nan_bits(dtype, cpu)) {
                            continue; /* which input's NaN a sum keeps: see above */
                        }
                        cr_assert_eq(cpu, portable,
                                     "%s %s, %d inputs, %zu elements%s: element %zu is 0x%llx, "
                                     "portable 0x%llx",
                                     weft_dtype_name(dtype), weft_op_name(ops[o]), nsrcs, n,
                                     alias >= 0 ? ", dst the last" : "", i, (unsigned long long)cpu,
                                     (unsigned long long)portable);
                    }
                }
            }
        }
    }
    for (int j = 0; j < MAX_SRCS; j++) {
        free(src[j]);
    }
    free(d[0]);
    free(d[1]);
    free(save);
}

Test(reduce, half_types_give_the_same_bits_both_ways)
{
    check_both_ways(WEFT_FLOAT16, 88172645463325252ull);
    check_both_ways(WEFT_BFLOAT16, 88172645463325253ull);
}

/* The 8-bit floats' CPU conversions (AVX2) against the portable ones: every pattern widened
 * (offset by one, so the tail loop runs too); narrowed, every float whose top 16 bits are any
 * and whose low 16 are one of the patterns around a rounding midpoint (the dropped bits of both
 * formats start at bit 19 or 20), and 2^22 random floats. */
Test(float8, cpu_conversions_give_the_portable_bits)
{
    static const uint32_t low16[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    const weft_dtype_t dtypes[] = {WEFT_FLOAT8_E4M3, WEFT_FLOAT8_E5M2};
    const size_t n = (size_t)6 << 16;
    const size_t nr = (size_t)1 << 22;
    uint8_t codes[256], *a8 = malloc(n + nr), *b8 = malloc(n + nr);
    float fa[256], fb[256], *in = malloc((n + nr) * sizeof(*in));
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int cpu = 0;

    cr_assert(a8 && b8 && in);
    for (unsigned i = 0; i < 256; i++) {
        codes[i] = (uint8_t)i;
    }
    for (size_t i = 0; i < n; i++) {
        in[i] = f32_of((uint32_t)(i / 6) << 16 | low16[i % 6]);
    }
    for (size_t i = n; i < n + nr; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        in[i] = f32_of((uint32_t)x);
    }
    for (int d = 0; d < 2; d++) {
        weft_dtype_t dt = dtypes[d];

        weft__host_half_widen(dt, fa, codes, 256, 0);
        cpu |= weft__host_half_widen(dt, fb, codes + 1, 255, 1);
        for (unsigned i = 1; i < 256; i++) {
            cr_assert_eq(bits_of_f32(fb[i - 1]), bits_of_f32(fa[i]), "%s widen 0x%02x: 0x%08x",
                         weft_dtype_name(dt), i, bits_of_f32(fb[i - 1]));
        }
        weft__host_half_narrow(dt, a8, in, n + nr, 0);
        cpu |= weft__host_half_narrow(dt, b8, in, n + nr - 3, 1);
        for (size_t i = 0; i + 3 < n + nr; i++) {
            cr_assert_eq(b8[i], a8[i], "%s narrow 0x%08x: 0x%02x, portable 0x%02x",
                         weft_dtype_name(dt), bits_of_f32(in[i]), b8[i], a8[i]);
        }
    }
    cr_log_info("float8 conversions: %s", cpu ? "CPU instructions compared with the portable code"
                                              : "this CPU has none: portable code only");
    free(a8);
    free(b8);
    free(in);
}

/* The same for the 8-bit floats, on random bytes (NaNs, subnormals, the largest values). */
Test(reduce, float8_gives_the_same_bits_both_ways)
{
    check_both_ways(WEFT_FLOAT8_E4M3, 0x2545f4914f6cdd1dull);
    check_both_ways(WEFT_FLOAT8_E5M2, 0x2545f4914f6cdd1eull);
}
