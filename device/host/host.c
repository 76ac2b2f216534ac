/*
 * The host device table: plain process memory. Every call has finished when it returns, and
 * none keeps state, so all are thread-safe.
 */
#include "device/host/host.h"

#include "base/config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* One cache line, and the widest vector register (AVX-512): the reduce loops never split a
 * vector across two lines of a buffer that comes from here. */
#define HOST_ALIGNMENT 64

static int host_owns(const void *ptr)
{
    /* host is the table of last resort: weft__device_query() asks the others first */
    (void)ptr;
    return 1;
}

static weft_status_t host_alloc(size_t bytes, void **ptr_p)
{
    void *ptr;

    if (posix_memalign(&ptr, HOST_ALIGNMENT, bytes) != 0) {
        return weft__error(WEFT_ERR_NO_MEMORY, "host alloc of %zu bytes failed", bytes);
    }
    *ptr_p = ptr;
    return WEFT_OK;
}

static weft_status_t host_free(void *ptr)
{
    free(ptr);
    return WEFT_OK;
}

#if defined(__x86_64__)
/* Whether the CPU has AVX2 (and the OS saves its registers), asked once. */
static int has_avx2(void)
{
    static atomic_int avx2 = -1;
    int v = atomic_load_explicit(&avx2, memory_order_relaxed);

    if (v < 0) {
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&avx2, v, memory_order_relaxed);
    }
    return v;
}

/* bytes >= 64: 32-byte loads and stores aligned on dst, the unaligned first and last vectors
 * loaded before anything is stored and stored last. Forward, unless dst lies up to 256 bytes
 * ahead of src modulo 4 KiB: a forward loop's next loads would then match the low address bits
 * of stores still in flight, which the CPU takes for a dependency and waits (4K aliasing:
 * 16 KiB, dst 16 bytes ahead, one core of an AMD EPYC: 52 GB/s forward, 89 backward; glibc's
 * `rep movsb` 2.0-2.4); backward then. */
__attribute__((target("avx2"))) static void copy_avx2(char *d, const char *s, size_t bytes)
{
    __m256i first = _mm256_loadu_si256((const __m256i *)s);
    __m256i last = _mm256_loadu_si256((const __m256i *)(s + bytes - 32));

    if ((((uintptr_t)d - (uintptr_t)s) & 4095) >= 256) {
        size_t head = 32 - ((uintptr_t)d & 31), left = bytes - head;
        char *dd = d + head;
        const char *ss = s + head;

        for (; left >= 128; dd += 128, ss += 128, left -= 128) {
            __m256i a = _mm256_loadu_si256((const __m256i *)ss);
            __m256i b = _mm256_loadu_si256((const __m256i *)(ss + 32));
            __m256i c = _mm256_loadu_si256((const __m256i *)(ss + 64));
            __m256i e = _mm256_loadu_si256((const __m256i *)(ss + 96));

            _mm256_store_si256((__m256i *)dd, a);
            _mm256_store_si256((__m256i *)(dd + 32), b);
            _mm256_store_si256((__m256i *)(dd + 64), c);
            _mm256_store_si256((__m256i *)(dd + 96), e);
        }
        for (; left > 32; dd += 32, ss += 32, left -= 32) {
            _mm256_store_si256((__m256i *)dd, _mm256_loadu_si256((const __m256i *)ss));
        }
    } else {
        size_t left = bytes - ((uintptr_t)(d + bytes) & 31); /* d + left is aligned */
        char *dd = d + left;
        const char *ss = s + left;

        for (; left > 128; left -= 128) {
            __m256i a, b, c, e;

            dd -= 128, ss -= 128;
            a = _mm256_loadu_si256((const __m256i *)(ss + 96));
            b = _mm256_loadu_si256((const __m256i *)(ss + 64));
            c = _mm256_loadu_si256((const __m256i *)(ss + 32));
            e = _mm256_loadu_si256((const __m256i *)ss);
            _mm256_store_si256((__m256i *)(dd + 96), a);
            _mm256_store_si256((__m256i *)(dd + 64), b);
            _mm256_store_si256((__m256i *)(dd + 32), c);
            _mm256_store_si256((__m256i *)dd, e);
        }
        for (; left > 32; left -= 32) {
            dd -= 32, ss -= 32;
            _mm256_store_si256((__m256i *)dd, _mm256_loadu_si256((const __m256i *)ss));
        }
    }
    _mm256_storeu_si256((__m256i *)d, first);
    _mm256_storeu_si256((__m256i *)(d + bytes - 32), last);
}
#endif

int weft__host_copy_loop(size_t bytes)
{
#if defined(__x86_64__)
    return !WEFT_HOST_COPY_SANITIZED && bytes >= 64 && bytes >= weft__runtime_config.host_copy &&
           has_avx2();
#else
    (void)bytes;
    return 0;
#endif
}

void weft__host_copy(void *dst, const void *src, size_t bytes)
{
    /* in-place collectives copy a buffer onto itself, which memcpy does not allow */
    if (dst == src || bytes == 0) {
        return;
    }
#if defined(__x86_64__)
    if (weft__host_copy_loop(bytes)) {
        copy_avx2(dst, src, bytes);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

static weft_status_t host_copy(void *dst, const void *src, size_t bytes)
{
    weft__host_copy(dst, src, bytes);
    return WEFT_OK;
}

void weft__host_copy_stream(void *dst, const void *src, size_t bytes)
{
#if defined(__x86_64__)
    char *d = dst;
    const char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 15);

    if (dst == src || bytes == 0) {
        return;
    }
    if (bytes < 256) {
        memcpy(d, s, bytes);
        return;
    }
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, bytes);
    _mm_sfence();
#else
    host_copy(dst, src, bytes);
#endif
}

const weft_device_ops_t weft__device_host_ops = {
    .name = "host",
    .memtype = WEFT_MEM_HOST, /* no streams, no IPC: those members are NULL */
    .owns = host_owns,
    .alloc = host_alloc,
    .free = host_free,
    .copy = host_copy,
    .reduce = weft__host_reduce,
    .avg_finalize = weft__host_avg_finalize,
};
