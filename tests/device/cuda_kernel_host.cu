/*
 * cuda_kernel_host: the CUDA kernels' thread bodies (device/cuda/kernel_body.cuh) run on the
 * CPU, one thread index after another, against an element-by-element fold of the same
 * element functions. What it checks is the kernels' indexing, which no other test reaches on a
 * machine without a GPU: the 16-byte vector path and the tail after it, the scalar path of
 * misaligned buffers, grid-stride loops of 1, 7 and 256 "threads", inputs beyond the
 * WEFT_CUDA_INLINE_SRCS that travel in the parameters, dst aliasing an input, and nothing
 * written outside [0, count). Also avg_body. Exit status 0 when every case matches, 1 otherwise
 * (make check runs it when CUDA is built; compiled by nvcc as host code).
 */
#include "device/cuda/kernel_body.cuh"
#include "tests/harness_rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

using namespace weft_cuda;

static int cases;
static int failures;
static int vector_cases;
static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static void fill(unsigned char *p, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) {
        p[i] = (unsigned char)harness_xorshift(&rng_state);
    }
}

/* Slack before and after each buffer's elements, which must stay as filled. */
#define GUARD 64
#define MAX_SRCS 40

/*
 * The first byte where got and want differ (bytes if none), passing over elements that are a
 * NaN in both: which input's NaN a float sum or product keeps depends on the operand order the
 * compiler chose for the loop (C leaves it open; a GPU gives its canonical NaN), so the sign and
 * payload of a NaN result may differ between the vector and the element-wise code.
 */
template <typename S, typename F>
static size_t first_difference(const unsigned char *got, const unsigned char *want, size_t bytes,
                               size_t count, size_t shift)
{
    const size_t first = GUARD + shift * sizeof(S);

    for (size_t k = 0; k < bytes; k++) {
        if (got[k] == want[k]) {
            continue;
        }
        if (k >= first && (k - first) / sizeof(S) < count) {
            size_t at = first + (k - first) / sizeof(S) * sizeof(S);
            S a;
            S b;

            memcpy(&a, got + at, sizeof(S));
            memcpy(&b, want + at, sizeof(S));
            typename F::compute x = F::load(a);
            typename F::compute y = F::load(b);

            if (x != x && y != y) {
                k = at + sizeof(S) - 1;
                continue;
            }
        }
        return k;
    }
    return bytes;
}

template <typename S, typename F, typename OP>
static void check(const char *name, int nsrcs, size_t count, size_t shift, uint64_t stride,
                  bool in_place)
{
    size_t bytes = GUARD + (count + shift) * sizeof(S) + GUARD;
    unsigned char *in[MAX_SRCS];
    unsigned char *out = (unsigned char *)aligned_alloc(64, bytes);
    unsigned char *want = (unsigned char *)malloc(bytes);
    const void *more[MAX_SRCS];
    weft_cuda_reduce_args_t args;
    uintptr_t align = 0;

    for (int j = 0; j < nsrcs; j++) {
        in[j] = (unsigned char *)aligned_alloc(64, bytes);
        fill(in[j], bytes);
    }
    fill(out, bytes);
    unsigned char *dst = in_place ? in[1] : out;
    const S *src = NULL;
    memcpy(want, dst, bytes);
    for (size_t i = 0; i < count; i++) {
        src = (const S *)(in[0] + GUARD) + shift;
        typename F::compute acc = F::load(src[i]);

        for (int j = 1; j < nsrcs; j++) {
            src = (const S *)(in[j] + GUARD) + shift;
            acc = OP::apply(acc, F::load(src[i]));
        }
        ((S *)(want + GUARD) + shift)[i] = F::store(acc);
    }

    memset(&args, 0, sizeof(args));
    args.dst = (S *)(dst + GUARD) + shift;
    args.count = count;
    args.nsrcs = nsrcs;
    align = (uintptr_t)args.dst;
    for (int j = 0; j < nsrcs; j++) {
        const void *p = (const S *)(in[j] + GUARD) + shift;

        align |= (uintptr_t)p;
        if (j < WEFT_CUDA_INLINE_SRCS) {
            args.srcs[j] = p;
        } else {
            more[j - WEFT_CUDA_INLINE_SRCS] = p;
        }
    }
    args.more = more;
    args.vector = align % WEFT_CUDA_VECTOR_BYTES == 0;
    vector_cases += args.vector;
    for (uint64_t tid = 0; tid < stride; tid++) {
        reduce_body<S, F, OP>(args, tid, stride);
    }
    cases++;
    size_t k = first_difference<S, F>(dst, want, bytes, count, shift);
    if (k < bytes) {
        failures++;
        fprintf(stderr,
                "FAIL %s: %d inputs x %zu, shift %zu, %llu threads%s%s: byte %zd (element %zd) "
                "is 0x%02x, expected 0x%02x\n",
                name, nsrcs, count, shift, (unsigned long long)stride, in_place ? ", in place" : "",
                args.vector ? ", vector" : "", (ssize_t)k - GUARD,
                ((ssize_t)k - GUARD) / (ssize_t)sizeof(S) - (ssize_t)shift, dst[k], want[k]);
    }
    for (int j = 0; j < nsrcs; j++) {
        free(in[j]);
    }
    free(out);
    free(want);
}

template <typename S, typename F, typename OP> static void check_all(const char *name)
{
    static const int nsrcs[] = {1, 2, 3, WEFT_CUDA_INLINE_SRCS, WEFT_CUDA_INLINE_SRCS + 3};
    static const size_t counts[] = {0, 1, 5, 16, 37, 4099};
    static const uint64_t strides[] = {1, 7, 256};

    for (int n : nsrcs) {
        for (size_t count : counts) {
            for (size_t shift = 0; shift < 2; shift++) {
                for (uint64_t stride : strides) {
                    check<S, F, OP>(name, n, count, shift, stride, false);
                    if (n >= 2) {
                        check<S, F, OP>(name, n, count, shift, stride, true);
                    }
                }
            }
        }
    }
}

template <typename S, typename F>
static void check_avg(const char *name, typename F::compute (*div)(typename F::compute, uint64_t))
{
    static const uint64_t divisors[] = {1, 3, 1000};
    size_t count = 1001;

    for (uint64_t d : divisors) {
        S *buf = (S *)malloc((count + 1) * sizeof(S));
        S *want = (S *)malloc((count + 1) * sizeof(S));
        weft_cuda_avg_args_t args = {buf, count, d};

        fill((unsigned char *)buf, (count + 1) * sizeof(S));
        for (size_t i = 0; i <= count; i++) {
            want[i] = i < count ? F::store(div(F::load(buf[i]), d)) : buf[i];
        }
        for (uint64_t tid = 0; tid < 7; tid++) {
            avg_body<S, F>(args, tid, 7, div);
        }
        cases++;
        if (memcmp(buf, want, (count + 1) * sizeof(S)) != 0) {
            failures++;
            fprintf(stderr, "FAIL avg %s / %llu\n", name, (unsigned long long)d);
        }
        free(buf);
        free(want);
    }
}

int main()
{
    check_all<float, plain<float>, sum_f32>("sum float32");
    check_all<float, plain<float>, min_f32>("min float32");
    check_all<double, plain<double>, max_f64>("max float64");
    check_all<double, plain<double>, prod_f64>("prod float64");
    check_all<uint16_t, f16, sum_f32>("sum float16");
    check_all<uint16_t, bf16, max_f32>("max bfloat16");
    check_all<uint8_t, f8e4m3, sum_f32>("sum float8_e4m3");
    check_all<uint8_t, f8e5m2, prod_f32>("prod float8_e5m2");
    check_all<uint8_t, plain<uint8_t>, bxor_u8>("bxor uint8");
    check_all<int8_t, plain<int8_t>, min_i8>("min int8");
    check_all<uint32_t, plain<uint32_t>, prod_u32>("prod int32");
    check_all<uint64_t, plain<uint64_t>, lxor_u64>("lxor uint64");
    check_all<int64_t, plain<int64_t>, max_i64>("max int64");
    check_avg<int32_t, plain<int32_t>>("int32", weft__elem_div_i32);
    check_avg<uint16_t, f16>("float16", weft__elem_div_f32);
    check_avg<uint8_t, f8e4m3>("float8_e4m3", weft__elem_div_f32);
    check_avg<double, plain<double>>("float64", weft__elem_div_f64);
    printf("cuda_kernel_host: %d cases (%d on the vector path), %d failed\n", cases, vector_cases,
           failures);
    return failures == 0 && vector_cases > 0 ? 0 : 1;
}
