/*
 * The host device table's reductions, kept in reduce.c. They have exactly the signatures of the
 * reduce and avg_finalize members of weft_device_ops_t and follow the contract in
 * device/device.h; in addition they check what they can cheaply (nsrcs >= 1, an op defined for
 * the dtype, divisor != 0) and return WEFT_ERR_INVALID_ARG through weft__error() otherwise,
 * leaving dst untouched.
 *
 * Both run on the calling thread and have finished when they return; they keep no state and
 * allocate nothing, so any number of threads may call them at once on disjoint buffers.
 */
#ifndef WEFT_DEVICE_HOST_HOST_H
#define WEFT_DEVICE_HOST_HOST_H

#include "device/device.h"

/*
 * dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrcs - 1][i], combined in that order whichever
 * input dst aliases, so float results do not depend on which rank reduces in place. One input is
 * a copy.
 */
weft_status_t weft__host_reduce(void *dst, const void *const *srcs, int nsrcs, size_t count,
                                weft_dtype_t dtype, weft_op_t op);

/* The two loops weft__host_reduce runs for (dtype, op) on a full-width type: *binary_p
 * (d = a op b) and *accumulate_p (d = d op b). Over inputs none of which is dst, binary over the
 * first two and accumulate over each next one in order give weft__host_reduce's bits (the line
 * allreduce, coll/shm/ops.c, skips its dispatch this way). Returns 0, setting nothing, for the
 * narrow float types (reduced through float blocks) and the pairs weft__host_reduce refuses. */
typedef void (*weft_host_binary_fn)(void *restrict d, const void *restrict a,
                                    const void *restrict b, size_t n);
typedef void (*weft_host_accumulate_fn)(void *restrict d, const void *restrict b, size_t n);
int weft__host_reduce_loops(weft_dtype_t dtype, weft_op_t op, weft_host_binary_fn *binary_p,
                            weft_host_accumulate_fn *accumulate_p);

/* buf[i] /= divisor: integers truncate toward zero, floats divide in their own precision, half
 * types divide in float and round once to nearest even. */
weft_status_t weft__host_avg_finalize(void *buf, size_t count, weft_dtype_t dtype, size_t divisor);

/* Calls of weft__host_reduce that went through a buffer because their result trailed an input
 * by a few bytes modulo 4 KiB (reduce.c, ALIAS_WINDOW), since the process started (tests). */
uint64_t weft__host_reduce_staged(void);

/* 0: the half types convert with the portable loops only (tests compare both ways); 1 (the
 * default): with the CPU's instructions where it has them. Returns the previous setting. */
int weft__host_reduce_simd(int on);

/* The array conversions the host reductions use for a narrow float dtype (WEFT_FLOAT16,
 * WEFT_BFLOAT16, WEFT_FLOAT8_E4M3, WEFT_FLOAT8_E5M2; in and out hold elements of that dtype):
 * simd 0 the portable ones, 1 the fastest this CPU has (as weft__host_reduce_simd allows).
 * Returns 1 when CPU-specific code ran, 0 for the portable loops. */
int weft__host_half_widen(weft_dtype_t dtype, float *out, const void *in, size_t n, int simd);
int weft__host_half_narrow(weft_dtype_t dtype, void *out, const float *in, size_t n, int simd);

/* memcpy of host memory, dst == src copying nothing: from WEFT_HOST_COPY bytes (where the CPU has
 * AVX2) a loop of vector loads and stores instead of the C library's memcpy: glibc copies
 * 2 KiB-512 KiB with `rep movsb` on AMD CPUs, which ran at 2-3 GB/s instead of 35-90 wherever
 * dst lay 1-63 bytes ahead of src modulo 4 KiB (the usual case of a malloc'd result buffer, 16
 * bytes past a page, filled from the node segment's page-aligned slots; the loop copies those
 * backward). weft__host_copy_loop(bytes): whether the
 * loop copies that many bytes (tests). */
void weft__host_copy(void *dst, const void *src, size_t bytes);
int weft__host_copy_loop(size_t bytes);

/* 1 in AddressSanitizer and ThreadSanitizer builds, which copy with memcpy whatever the size:
 * their memcpy interceptors check both ranges at once, where the instrumented loop checked every
 * vector and ran several times slower, and the shared-memory rules take their decisions on the
 * copy rates measured at setup (under ASan the slots' line paths went unused: copies measured
 * slow against the kernel's reads). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WEFT_HOST_COPY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WEFT_HOST_COPY_SANITIZED 1
#endif
#endif
#ifndef WEFT_HOST_COPY_SANITIZED
#define WEFT_HOST_COPY_SANITIZED 0
#endif

/* memcpy with non-temporal stores (where the CPU has them): for results nobody reads soon, larger
 * than the caches; dst == src copies nothing. Ordered before later stores of this thread. */
void weft__host_copy_stream(void *dst, const void *src, size_t bytes);

#endif /* WEFT_DEVICE_HOST_HOST_H */
