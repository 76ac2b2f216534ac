/*
 * The CUDA table's streams, flags and IPC (device/device.h's contract).
 *
 * Streams: weft's are non-blocking CUDA streams; any stream of weft's context is accepted too
 * (cuStreamGetCtx), as are the default stream (NULL) and the CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD handles. Queued work reports its first error through stream_sync.
 *
 * Flags: one 32-bit word of mapped pinned host memory (host_alloc: cuMemHostAlloc with
 * DEVICEMAP; device/pinned.c hands them out from slabs and frees nothing while one is used), which
 * the host reads and writes with atomics and a stream writes (cuStreamWriteValue32, after the
 * work queued before it, with the default memory barrier) or waits on
 * (cuStreamWaitValue32 GEQ, which compares as (int32_t)(*flag - value) >= 0: the same as >=
 * while flags count up from 0 and stay below 2^31 apart; with FLUSH where the device reports
 * CAN_FLUSH_REMOTE_WRITES, so that remote writes into its memory before the flag are seen).
 *
 * IPC: a handle carries cuIpcGetMemHandle of the allocation holding ptr and ptr's offset in
 * it (util.h). Imports are cached per allocation with a reference count, since CUDA maps an
 * allocation once per process: each ipc_import is matched by one ipc_close, and the last close
 * unmaps it (cuIpcCloseMemHandle).
 */
#include "device/cuda/internal.h"
#include "device/cuda/util.h"

#include <stdlib.h>
#include <string.h>

int weft__cuda_stream_owns(void *stream)
{
    CUcontext ctx = NULL;

    if (stream == NULL || stream == (void *)CU_STREAM_LEGACY ||
        stream == (void *)CU_STREAM_PER_THREAD) {
        return 1;
    }
    /* a user's stream is a use of CUDA: weft's context is set up (from this thread's) */
    return weft__cuda_ready() == WEFT_OK &&
           weft__cu.cuStreamGetCtx((CUstream)stream, &ctx) == CUDA_SUCCESS && ctx == weft__cuda.ctx;
}

weft_status_t weft__cuda_stream_create(void **stream_p)
{
    CUstream stream = NULL;
    weft_status_t status;
    int pushed;

    status = weft__cuda_enter(&pushed, "cuda stream_create");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_check(weft__cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                              "cuda stream_create: cuStreamCreate");
    weft__cuda_leave(pushed);
    if (status == WEFT_OK) {
        *stream_p = stream;
    }
    return status;
}

weft_status_t weft__cuda_stream_destroy(void *stream)
{
    weft_status_t status;
    int pushed;

    if (stream == NULL || stream == (void *)CU_STREAM_LEGACY ||
        stream == (void *)CU_STREAM_PER_THREAD) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "cuda stream_destroy: the default stream cannot be destroyed");
    }
    status = weft__cuda_enter(&pushed, "cuda stream_destroy");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_check(weft__cu.cuStreamDestroy((CUstream)stream),
                              "cuda stream_destroy: cuStreamDestroy");
    weft__cuda_leave(pushed);
    return status;
}

weft_status_t weft__cuda_stream_sync(void *stream)
{
    weft_status_t status;
    int pushed;

    status = weft__cuda_enter(&pushed, "cuda stream_sync");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_wait((CUstream)stream, "cuda stream_sync");
    weft__cuda_leave(pushed);
    return status;
}

weft_status_t weft__cuda_memcpy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    weft_status_t status;
    int pushed;

    if (bytes == 0 || dst == src) {
        return WEFT_OK;
    }
    status = weft__cuda_enter(&pushed, "cuda memcpy_async");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_check(
        weft__cu.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, (CUstream)stream),
        "cuda memcpy_async: cuMemcpyAsync");
    weft__cuda_leave(pushed);
    return status;
}

weft_status_t weft__cuda_host_alloc(size_t bytes, void **ptr_p)
{
    void *p = NULL;
    weft_status_t status;
    int pushed;

    status = weft__cuda_enter(&pushed, "cuda host_alloc");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_check(
        weft__cu.cuMemHostAlloc(&p, bytes ? bytes : 1,
                                CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
                              "cuda host_alloc: cuMemHostAlloc");
    weft__cuda_leave(pushed);
    if (status == WEFT_OK) {
        *ptr_p = p;
    }
    return status;
}

void weft__cuda_host_free(void *ptr)
{
    int pushed;

    if (ptr != NULL && weft__cuda_enter(&pushed, "cuda host_free") == WEFT_OK) {
        weft__cu.cuMemFreeHost(ptr);
        weft__cuda_leave(pushed);
    }
}

/* Queues a write (wait == 0) or a wait on flag; in the context. */
static weft_status_t flag_op(void *stream, uint32_t *flag, uint32_t value, int wait,
                             const char *what)
{
    CUdeviceptr dev = 0;
    weft_status_t status;
    int pushed;

    status = weft__cuda_enter(&pushed, what);
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_check(weft__cu.cuMemHostGetDevicePointer(&dev, flag, 0), what);
    if (status == WEFT_OK && wait) {
        status = weft__cuda_check(
            weft__cu.cuStreamWaitValue32((CUstream)stream, dev, value, weft__cuda.wait_flags),
            what);
    } else if (status == WEFT_OK) {
        status = weft__cuda_check(weft__cu.cuStreamWriteValue32((CUstream)stream, dev, value,
                                                                CU_STREAM_WRITE_VALUE_DEFAULT),
                                  what);
    }
    weft__cuda_leave(pushed);
    return status;
}

weft_status_t weft__cuda_stream_write_flag(void *stream, uint32_t *flag, uint32_t value)
{
    return flag_op(stream, flag, value, 0, "cuda stream_write_flag");
}

weft_status_t weft__cuda_stream_wait_flag(void *stream, uint32_t *flag, uint32_t value)
{
    return flag_op(stream, flag, value, 1, "cuda stream_wait_flag");
}

/* A host function: CUDA runs it on a thread of its own when the stream gets there, and holds
 * the stream's later work until it returns. It makes no CUDA call (none is allowed there). */
static void CUDA_CB ring(void *arg)
{
    (void)arg;
    weft__device_doorbell_ring();
}

weft_status_t weft__cuda_stream_ring(void *stream)
{
    weft_status_t status;
    int pushed;

    status = weft__cuda_enter(&pushed, "cuda stream_ring");
    if (status == WEFT_OK) {
        status = weft__cuda_check(weft__cu.cuLaunchHostFunc((CUstream)stream, ring, NULL),
                                  "cuda stream_ring: cuLaunchHostFunc");
        weft__cuda_leave(pushed);
    }
    return status;
}

weft_status_t weft__cuda_ipc_export(const void *ptr, void *handle)
{
    CUipcMemHandle raw;
    CUdeviceptr base = 0;
    size_t size = 0;
    weft_status_t status;
    int pushed;

    status = weft__cuda_enter(&pushed, "cuda ipc_export");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_check(weft__cu.cuMemGetAddressRange(&base, &size, (CUdeviceptr)ptr),
                              "cuda ipc_export: cuMemGetAddressRange");
    if (status == WEFT_OK) {
        status = weft__cuda_check(weft__cu.cuIpcGetMemHandle(&raw, base),
                                  "cuda ipc_export: cuIpcGetMemHandle");
    }
    weft__cuda_leave(pushed);
    if (status == WEFT_OK) {
        weft__cuda_ipc_pack(handle, raw.reserved, (uint64_t)((CUdeviceptr)ptr - base));
    }
    return status;
}

/* One imported allocation. */
typedef struct import {
    struct import *next;
    unsigned char raw[WEFT_CUDA_IPC_RAW];
    CUdeviceptr base;
    size_t size;
    int refs;
} import_t;

static pthread_mutex_t imports_lock = PTHREAD_MUTEX_INITIALIZER;
static import_t *imports;

/* The cached import of raw, opening it on first use; under imports_lock, in the context. */
static weft_status_t import_get(const unsigned char *raw, import_t **import_p)
{
    CUipcMemHandle handle;
    import_t *im;
    weft_status_t status;

    for (im = imports; im != NULL; im = im->next) {
        if (memcmp(im->raw, raw, WEFT_CUDA_IPC_RAW) == 0) {
            *import_p = im;
            return WEFT_OK;
        }
    }
    im = calloc(1, sizeof(*im));
    if (im == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cuda ipc_import: no memory");
    }
    memcpy(handle.reserved, raw, WEFT_CUDA_IPC_RAW);
    status = weft__cuda_check(
        weft__cu.cuIpcOpenMemHandle(&im->base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
        "cuda ipc_import: cuIpcOpenMemHandle");
    if (status == WEFT_OK) {
        status = weft__cuda_check(weft__cu.cuMemGetAddressRange(NULL, &im->size, im->base),
                                  "cuda ipc_import: cuMemGetAddressRange");
        if (status != WEFT_OK) {
            weft__cu.cuIpcCloseMemHandle(im->base);
        }
    }
    if (status != WEFT_OK) {
        free(im);
        return status;
    }
    memcpy(im->raw, raw, WEFT_CUDA_IPC_RAW);
    im->next = imports;
    imports = im;
    *import_p = im;
    return WEFT_OK;
}

weft_status_t weft__cuda_ipc_import(const void *handle, void **ptr_p)
{
    unsigned char raw[WEFT_CUDA_IPC_RAW];
    uint64_t offset;
    import_t *im = NULL;
    weft_status_t status;
    int pushed;

    if (weft__cuda_ipc_unpack(handle, raw, &offset) != 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "cuda ipc_import: not a weft CUDA IPC handle");
    }
    status = weft__cuda_enter(&pushed, "cuda ipc_import");
    if (status != WEFT_OK) {
        return status;
    }
    pthread_mutex_lock(&imports_lock);
    status = import_get(raw, &im);
    if (status == WEFT_OK && offset >= im->size) {
        status = weft__error(WEFT_ERR_INVALID_ARG,
                             "cuda ipc_import: offset %llu is outside the %zu-byte allocation",
                             (unsigned long long)offset, im->size);
    }
    if (status == WEFT_OK) {
        im->refs++;
        *ptr_p = (void *)(im->base + offset);
    } else if (im != NULL && im->refs == 0) {
        /* opened just now for this call: close it again */
        imports = im->next;
        weft__cu.cuIpcCloseMemHandle(im->base);
        free(im);
    }
    pthread_mutex_unlock(&imports_lock);
    weft__cuda_leave(pushed);
    return status;
}

void weft__cuda_ipc_close(void *ptr)
{
    CUdeviceptr p = (CUdeviceptr)ptr;
    import_t **link;
    int pushed;

    if (weft__cuda_enter(&pushed, "cuda ipc_close") != WEFT_OK) {
        return;
    }
    pthread_mutex_lock(&imports_lock);
    for (link = &imports; *link != NULL; link = &(*link)->next) {
        import_t *im = *link;

        if (p >= im->base && p < im->base + im->size) {
            if (--im->refs == 0) {
                *link = im->next;
                weft__cu.cuIpcCloseMemHandle(im->base);
                free(im);
            }
            break;
        }
    }
    pthread_mutex_unlock(&imports_lock);
    weft__cuda_leave(pushed);
}
