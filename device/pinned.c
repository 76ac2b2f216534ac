/*
 * Pinned host memory of a device table: flags from slabs, staging buffers
 * from a cache, and no memory handed back to the driver while a stream may
 * wait on a flag (device.h's contract).
 *
 * Why: CUDA's page-locked memory is freed with cuMemFreeHost, and device
 * memory with cuMemFree, which may wait for the device's streams; a stream blocked in cuStreamWaitValue32 on a flag
 * that only weft's progress thread will write never gets there if that thread
 * is the one freeing (the stream memory-operations page warns of deadlocks;
 * NCCL had a thread stuck in cuFreeHost while others waited). So:
 *
 *   flags      slab 0: [flag|flag|flag|...]  (64 bytes each, 1024 a slab)
 *              slab 1: ...                    allocated when all are taken,
 *                                             never freed while the process runs
 *   buffers    live:   handed out by bounce_get (pinned host memory) or
 *                      scratch_get (device memory), back by _put
 *              cached: kept by size class for the next _get; beyond
 *                      WEFT_PINNED_CACHE bytes freed, but only at a moment
 *                      when no flag of the table is in use
 *
 * A flag in use is the mark of a stream operation that may still wait: an
 * enqueued collective holds its flag until the stream wrote its last value,
 * a staged message until its copies are done. With none in use, nothing of
 * weft's waits, and freeing is safe.
 *
 * Cost: a flag or a buffer that is reused costs a lock and a list walk; a new
 * one one driver allocation (cuMemHostAlloc). Memory: the slabs a process
 * needed at its busiest (64 KiB each) and up to WEFT_PINNED_CACHE of buffers.
 */
#include "device/device.h"

#include "base/config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* A cache line per flag: the host and the device poll it. */
#define FLAG_BYTES 64
#define SLAB_FLAGS 1024
/* Buffers are rounded up to one of four sizes per power of two (at most a
 * quarter wasted), from 4 KiB, so that messages of similar sizes share them. */
#define MIN_CLASS 4096

typedef struct slab {
    struct slab *next;
    char *base;
} slab_t;

typedef struct buf {
    struct buf *next;
    void *ptr;
    size_t size;
    int device; /* device memory (scratch), else pinned host memory (bounce) */
    int cached;
} buf_t;

typedef struct pool {
    slab_t *slabs;
    uint32_t **free_flags; /* stack of free slots */
    size_t nfree, free_cap;
    size_t flags_in_use;
    buf_t *bufs; /* live and cached, newest first */
    size_t cached_bytes;
    weft_pinned_stats_t stats;
} pool_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pool_t pools[3]; /* by weft_memtype_t */

static pool_t *pool_of(const weft_device_ops_t *dev)
{
    return &pools[dev->memtype];
}

static weft_status_t no_pinned(const weft_device_ops_t *dev, const char *what)
{
    return weft__error(WEFT_ERR_UNSUPPORTED, "%s: %s memory has no pinned host memory", what,
                       dev->name);
}

/* Lock held. */
static weft_status_t add_slab(const weft_device_ops_t *dev, pool_t *p)
{
    slab_t *s = calloc(1, sizeof(*s));
    uint32_t **stack = realloc(p->free_flags, (p->free_cap + SLAB_FLAGS) * sizeof(*stack));
    weft_status_t status;

    if (stack != NULL) {
        p->free_flags = stack;
        p->free_cap += SLAB_FLAGS;
    }
    if (s == NULL || stack == NULL) {
        free(s);
        return weft__error(WEFT_ERR_NO_MEMORY, "%s flag_alloc: cannot allocate a slab", dev->name);
    }
    status = dev->host_alloc((size_t)SLAB_FLAGS * FLAG_BYTES, (void **)&s->base);
    if (status != WEFT_OK) {
        free(s);
        return status;
    }
    s->next = p->slabs;
    p->slabs = s;
    for (int i = SLAB_FLAGS - 1; i >= 0; i--) {
        p->free_flags[p->nfree++] = (uint32_t *)(s->base + (size_t)i * FLAG_BYTES);
    }
    p->stats.slabs++;
    return WEFT_OK;
}

/* Frees cached buffers beyond the limit while no flag is in use. Lock held. */
static void trim(const weft_device_ops_t *dev, pool_t *p)
{
    size_t limit = weft__runtime_config.pinned_cache;

    for (buf_t **link = &p->bufs;
         *link != NULL && p->cached_bytes > limit && p->flags_in_use == 0;) {
        buf_t *b = *link;

        if (b->cached) {
            *link = b->next;
            p->cached_bytes -= b->size;
            if (b->device) {
                dev->free(b->ptr);
            } else {
                dev->host_free(b->ptr);
            }
            p->stats.buffer_frees++;
            free(b);
        } else {
            link = &b->next;
        }
    }
}

weft_status_t weft__device_flag_alloc(const weft_device_ops_t *dev, uint32_t **flag_p)
{
    pool_t *p;
    weft_status_t status = WEFT_OK;

    if (dev->host_alloc == NULL) {
        return no_pinned(dev, "flag_alloc");
    }
    p = pool_of(dev);
    pthread_mutex_lock(&lock);
    if (p->nfree == 0) {
        status = add_slab(dev, p);
    }
    if (status == WEFT_OK) {
        uint32_t *flag = p->free_flags[--p->nfree];

        atomic_store_explicit((_Atomic uint32_t *)flag, 0, memory_order_release);
        p->flags_in_use++;
        *flag_p = flag;
    }
    pthread_mutex_unlock(&lock);
    return status;
}

void weft__device_flag_free(const weft_device_ops_t *dev, uint32_t *flag)
{
    pool_t *p = pool_of(dev);

    if (flag == NULL) {
        return;
    }
    pthread_mutex_lock(&lock);
    p->free_flags[p->nfree++] = flag;
    p->flags_in_use--;
    trim(dev, p);
    pthread_mutex_unlock(&lock);
}

static size_t size_class(size_t bytes)
{
    size_t pow = MIN_CLASS;

    if (bytes <= MIN_CLASS || bytes > SIZE_MAX / 4) {
        return bytes <= MIN_CLASS ? MIN_CLASS : bytes;
    }
    while (2 * pow < bytes) {
        pow *= 2;
    }
    /* pow < bytes <= 2 pow: the first of pow + pow/4, ..., 2 pow that holds it */
    return pow + (bytes - pow + pow / 4 - 1) / (pow / 4) * (pow / 4);
}

static weft_status_t get(const weft_device_ops_t *dev, size_t bytes, int device, void **ptr_p)
{
    size_t size = size_class(bytes);
    pool_t *p;
    buf_t *b;
    weft_status_t status;

    if (dev->host_alloc == NULL) {
        return no_pinned(dev, device ? "scratch buffer" : "bounce buffer");
    }
    p = pool_of(dev);
    pthread_mutex_lock(&lock);
    for (b = p->bufs; b != NULL && !(b->cached && b->size == size && b->device == device);
         b = b->next) {
    }
    if (b != NULL) {
        b->cached = 0;
        p->cached_bytes -= b->size;
        p->stats.buffer_reuses++;
        *ptr_p = b->ptr;
        pthread_mutex_unlock(&lock);
        return WEFT_OK;
    }
    pthread_mutex_unlock(&lock);

    /* a new one, outside the lock (the driver may take a while) */
    if ((b = calloc(1, sizeof(*b))) == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a buffer's record");
    }
    status = device ? dev->alloc(size, &b->ptr) : dev->host_alloc(size, &b->ptr);
    if (status != WEFT_OK) {
        free(b);
        return status;
    }
    b->size = size;
    b->device = device;
    pthread_mutex_lock(&lock);
    b->next = p->bufs;
    p->bufs = b;
    p->stats.buffer_allocs++;
    pthread_mutex_unlock(&lock);
    *ptr_p = b->ptr;
    return WEFT_OK;
}

static void put(const weft_device_ops_t *dev, void *ptr, const char *what)
{
    pool_t *p = pool_of(dev);
    buf_t *b;

    if (ptr == NULL) {
        return;
    }
    pthread_mutex_lock(&lock);
    for (b = p->bufs; b != NULL && b->ptr != ptr; b = b->next) {
    }
    if (b != NULL && !b->cached) {
        b->cached = 1;
        p->cached_bytes += b->size;
        trim(dev, p);
    } else {
        weft__log_error("%s %s: %p is not one in use (ignored)", dev->name, what, ptr);
    }
    pthread_mutex_unlock(&lock);
}

weft_status_t weft__device_bounce_get(const weft_device_ops_t *dev, size_t bytes, void **ptr_p)
{
    return get(dev, bytes, 0, ptr_p);
}

void weft__device_bounce_put(const weft_device_ops_t *dev, void *ptr)
{
    put(dev, ptr, "bounce_put");
}

weft_status_t weft__device_scratch_get(const weft_device_ops_t *dev, size_t bytes, void **ptr_p)
{
    return get(dev, bytes, 1, ptr_p);
}

void weft__device_scratch_put(const weft_device_ops_t *dev, void *ptr)
{
    put(dev, ptr, "scratch_put");
}

void weft__device_pinned_stats(const weft_device_ops_t *dev, weft_pinned_stats_t *stats_p)
{
    pool_t *p = pool_of(dev);

    pthread_mutex_lock(&lock);
    *stats_p = p->stats;
    stats_p->flags_in_use = p->flags_in_use;
    stats_p->cached_bytes = p->cached_bytes;
    pthread_mutex_unlock(&lock);
}
