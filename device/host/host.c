/*
 * The host device table: plain process memory. Every call has finished when it returns, and
 * none keeps state, so all are thread-safe.
 */
#include "device/host/host.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
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

static weft_status_t host_copy(void *dst, const void *src, size_t bytes)
{
    /* in-place collectives copy a buffer onto itself, which memcpy does not allow */
    if (dst != src && bytes > 0) {
        memcpy(dst, src, bytes);
    }
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
