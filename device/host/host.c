/*
 * The host device table: plain process memory. Every call has finished when it returns, and
 * none keeps state, so all are thread-safe.
 */
#include "device/host/host.h"

#include <stdlib.h>
#include <string.h>

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
