/*
 * The CUDA device table: loading, memory, copies and reductions (streams, flags and IPC are in
 * stream.c). Contract: device/device.h and device/cuda/cuda.h.
 *
 * weft__device_cuda_load only opens and initialises the driver; the context and the kernels
 * are set up by the first call that needs them (setup), so that a program that never uses CUDA
 * memory gets no CUDA context, and a program that calls cudaSetDevice first gets its device.
 *
 * Blocking members (copy, reduce, avg_finalize) queue their work on the calling thread's
 * internal stream (non-blocking, created on first use, destroyed when the thread exits) and
 * wait for it with WEFT_TIMEOUT as deadline, so threads never wait on each other's work.
 *
 * Reductions: inputs and dst that are not device memory (host memory, pinned or not) are staged
 * through stream-ordered scratch (cuMemAllocAsync), so the kernel only reads device memory;
 * one input is a plain copy. The kernel's arithmetic is device/reduce_elem.h's, shared with
 * the host table, so both give the same bits.
 */
#include "device/cuda/cuda.h"

#include "device/cuda/internal.h"
#include "device/cuda/kernel_args.h"
#include "device/cuda/util.h"
#include "device/host/host.h"
#include "base/config.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the architectures of the embedded fatbin, for messages (set by device/cuda/local.mk) */
#ifndef WEFT_CUDA_ARCHS
#define WEFT_CUDA_ARCHS "unknown architectures"
#endif

/* resident blocks per SM the reduce grid aims at: enough to hide memory latency */
#define BLOCKS_PER_SM 4

weft__cuda_state_t weft__cuda;

weft_status_t weft__cuda_check(CUresult result, const char *what)
{
    const char *name = NULL;
    const char *text = NULL;

    if (result == CUDA_SUCCESS) {
        return WEFT_OK;
    }
    if (weft__cu.cuGetErrorName(result, &name) != CUDA_SUCCESS) {
        name = NULL;
    }
    if (weft__cu.cuGetErrorString(result, &text) != CUDA_SUCCESS) {
        text = NULL;
    }
    return weft__cuda_status((int)result, name, text, what);
}

/* setup(): the context and the kernels, made on the first use of the table */
static void setup(void);
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static weft_status_t setup_status = WEFT_ERR_INTERNAL;
static int setup_done; /* setup finished with WEFT_OK (atomic) */
static char setup_why[256];
/* A child forked after the table was loaded: CUDA's state does not survive fork (the driver
 * answers a child with opaque errors), so every CUDA entry of the child fails, saying why. */
static int forked; /* atomic */

static void in_child(void)
{
    __atomic_store_n(&forked, 1, __ATOMIC_RELAXED);
}

weft_status_t weft__cuda_ready(void)
{
    if (__atomic_load_n(&forked, __ATOMIC_RELAXED)) {
        return WEFT_ERR_DEVICE;
    }
    pthread_once(&setup_once, setup);
    return setup_status;
}

weft_status_t weft__cuda_device(int *dev_p)
{
    int pushed;
    weft_status_t status = weft__cuda_enter(&pushed, "weft__cuda_device");

    if (status == WEFT_OK) {
        *dev_p = (int)weft__cuda.dev;
        weft__cuda_leave(pushed);
    }
    return status;
}

weft_status_t weft__cuda_enter(int *pushed_p, const char *what)
{
    CUcontext current = NULL;

    *pushed_p = 0;
    if (WEFT_UNLIKELY(__atomic_load_n(&forked, __ATOMIC_RELAXED))) {
        return weft__error(WEFT_ERR_DEVICE,
                           "%s: this process was forked after weft loaded CUDA, and a child "
                           "does not inherit the driver's state: use device memory in the "
                           "parent only, fork before weft_init, or exec in the child",
                           what);
    }
    pthread_once(&setup_once, setup);
    if (setup_status != WEFT_OK) {
        return weft__error(setup_status, "%s: CUDA cannot be used: %s", what, setup_why);
    }
    if (weft__cu.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == weft__cuda.ctx) {
        return WEFT_OK;
    }
    if (weft__cu.cuCtxPushCurrent(weft__cuda.ctx) != CUDA_SUCCESS) {
        return weft__error(WEFT_ERR_DEVICE, "%s: cannot make weft's CUDA context current", what);
    }
    *pushed_p = 1;
    return WEFT_OK;
}

void weft__cuda_leave(int pushed)
{
    CUcontext popped;

    if (pushed) {
        weft__cu.cuCtxPopCurrent(&popped);
    }
}

static void destroy_thread_stream(void *stream)
{
    int pushed;

    if (weft__cuda_enter(&pushed, "cuda stream cleanup") == WEFT_OK) {
        weft__cu.cuStreamDestroy((CUstream)stream);
        weft__cuda_leave(pushed);
    }
}

weft_status_t weft__cuda_internal_stream(CUstream *stream_p, const char *what)
{
    CUstream stream = pthread_getspecific(weft__cuda.stream_key);
    weft_status_t status;

    if (stream == NULL) {
        status = weft__cuda_check(weft__cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), what);
        if (status != WEFT_OK) {
            return status;
        }
        if (pthread_setspecific(weft__cuda.stream_key, stream) != 0) {
            weft__cu.cuStreamDestroy(stream);
            return weft__error(WEFT_ERR_NO_MEMORY, "%s: cannot keep a per-thread stream", what);
        }
    }
    *stream_p = stream;
    return WEFT_OK;
}

weft_status_t weft__cuda_wait(CUstream stream, const char *what)
{
    double timeout = weft__runtime_config.timeout > 0 ? weft__runtime_config.timeout : 300;
    uint64_t start = weft__time_ns();
    uint64_t limit = isinf(timeout) ? UINT64_MAX : (uint64_t)(timeout * 1e9);

    for (unsigned polls = 0;; polls++) {
        CUresult result = weft__cu.cuStreamQuery(stream);

        if (result != CUDA_ERROR_NOT_READY) {
            return weft__cuda_check(result, what);
        }
        if (weft__time_ns() - start > limit) {
            return weft__error(WEFT_ERR_TIMEOUT,
                               "%s: the CUDA stream did not finish within %g s (WEFT_TIMEOUT)",
                               what, timeout);
        }
        if (polls > 64) {
            sched_yield();
        }
    }
}

int weft__cuda_is_device(const void *ptr)
{
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    unsigned int type = 0;
    void *data = &type;
    CUresult result;
    int pushed;

    if (ptr == NULL) {
        return 0;
    }
    result = weft__cu.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)ptr);
    /* no context on this thread: retry in weft's if weft made one, but never create one just
     * to look at a pointer (host-only programs must not get a CUDA context) */
    if (result == CUDA_ERROR_INVALID_CONTEXT && __atomic_load_n(&setup_done, __ATOMIC_ACQUIRE) &&
        weft__cuda_enter(&pushed, "cuda owns") == WEFT_OK) {
        result = weft__cu.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)ptr);
        weft__cuda_leave(pushed);
    }
    return result == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE;
}

static int cuda_owns(const void *ptr)
{
    return weft__cuda_is_device(ptr);
}

static void cuda_thread_bind(void)
{
    int pushed;

    if (weft__cuda_enter(&pushed, "cuda thread_bind") == WEFT_OK && pushed) {
        /* not current here yet: the push undone, made the thread's current context for good */
        weft__cuda_leave(pushed);
        weft__cu.cuCtxSetCurrent(weft__cuda.ctx);
    }
}

/* The attributes of ptr in weft's context (the driver writes a boolean into each); 0 when the
 * driver refused the query. */
static int pointer_flags(const void *ptr, CUpointer_attribute *attrs, unsigned int *values, int n)
{
    void *data[2] = {&values[0], &values[1]};
    int pushed, ok = 0;

    values[0] = values[1] = 0;
    if (weft__cuda_enter(&pushed, "cuda ipc_capable") == WEFT_OK) {
        ok = weft__cu.cuPointerGetAttributes((unsigned)n, attrs, data, (CUdeviceptr)ptr) ==
             CUDA_SUCCESS;
        weft__cuda_leave(pushed);
    }
    return ok;
}

/* cuIpcGetMemHandle takes cuMemAlloc'd memory only: not managed memory (which may even report
 * itself as DEVICE), nor pool (cuMemAllocAsync) or VMM (cuMemCreate: torch's expandable
 * segments) allocations, which the driver tells by IS_LEGACY_CUDA_IPC_CAPABLE (CUDA 11.3 on; an
 * older driver answers for managed memory only). */
static int cuda_ipc_capable(const void *ptr)
{
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    unsigned int v[2];

    if (pointer_flags(ptr, attrs, v, 2)) { /* one query for both */
        return !v[0] && v[1];
    }
    return !(pointer_flags(ptr, attrs, v, 1) && v[0]); /* a driver without the second */
}

static weft_status_t cuda_alloc(size_t bytes, void **ptr_p)
{
    CUdeviceptr ptr = 0;
    char what[64];
    weft_status_t status;
    int pushed;

    snprintf(what, sizeof(what), "cuda alloc of %zu bytes", bytes);
    status = weft__cuda_enter(&pushed, what);
    if (status != WEFT_OK) {
        return status;
    }
    /* cuMemAlloc refuses 0 bytes; a 0-byte buffer still needs an address of its own */
    status = weft__cuda_check(weft__cu.cuMemAlloc(&ptr, bytes > 0 ? bytes : 1), what);
    weft__cuda_leave(pushed);
    if (status != WEFT_OK) {
        return status;
    }
    *ptr_p = (void *)ptr;
    return WEFT_OK;
}

static weft_status_t cuda_free(void *ptr)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    weft_status_t status;
    int pushed;

    if (ptr == NULL) {
        return WEFT_OK;
    }
    status = weft__cuda_enter(&pushed, "cuda free");
    if (status != WEFT_OK) {
        return status;
    }
    if (!weft__cuda_is_device(ptr) ||
        weft__cu.cuMemGetAddressRange(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS ||
        base != (CUdeviceptr)ptr) {
        weft__cuda_leave(pushed);
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "cuda free: %p is not the start of a live CUDA allocation", ptr);
    }
    status = weft__cuda_check(weft__cu.cuMemFree((CUdeviceptr)ptr), "cuda free");
    weft__cuda_leave(pushed);
    return status;
}

static weft_status_t cuda_copy(void *dst, const void *src, size_t bytes)
{
    CUstream stream;
    weft_status_t status;
    int pushed;

    if (dst == src || bytes == 0) {
        return WEFT_OK;
    }
    status = weft__cuda_enter(&pushed, "cuda copy");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__cuda_internal_stream(&stream, "cuda copy");
    if (status == WEFT_OK) {
        status = weft__cuda_check(
            weft__cu.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, stream),
            "cuda copy: cuMemcpyAsync");
    }
    if (status == WEFT_OK) {
        status = weft__cuda_wait(stream, "cuda copy");
    }
    weft__cuda_leave(pushed);
    return status;
}

/* What one reduce call allocated, released on the stream whatever happened. */
typedef struct {
    CUdeviceptr *scratch;
    int nscratch;
} scratch_t;

static weft_status_t scratch_alloc(scratch_t *s, size_t bytes, CUstream stream, CUdeviceptr *p)
{
    weft_status_t status =
        weft__cuda_check(weft__cu.cuMemAllocAsync(p, bytes, stream), "cuda reduce: scratch");

    if (status == WEFT_OK) {
        s->scratch[s->nscratch++] = *p;
    }
    return status;
}

static weft_status_t launch_reduce(CUfunction fn, void *dst, const void **srcs, int nsrcs,
                                   size_t count, size_t size, CUstream stream, scratch_t *s)
{
    weft_cuda_reduce_args_t args;
    void *params[] = {&args};
    unsigned blocks;
    weft_status_t status;

    memset(&args, 0, sizeof(args));
    args.dst = dst;
    args.count = count;
    args.nsrcs = nsrcs;
    args.vector = weft__cuda_vector_ok(dst, srcs, nsrcs);
    for (int j = 0; j < nsrcs && j < WEFT_CUDA_INLINE_SRCS; j++) {
        args.srcs[j] = srcs[j];
    }
    if (nsrcs > WEFT_CUDA_INLINE_SRCS) {
        size_t more_bytes = (size_t)(nsrcs - WEFT_CUDA_INLINE_SRCS) * sizeof(void *);
        CUdeviceptr more;

        status = scratch_alloc(s, more_bytes, stream, &more);
        if (status != WEFT_OK) {
            return status;
        }
        /* from pageable memory: returns once srcs has been read */
        status = weft__cuda_check(
            weft__cu.cuMemcpyHtoDAsync(more, srcs + WEFT_CUDA_INLINE_SRCS, more_bytes, stream),
            "cuda reduce: input list");
        if (status != WEFT_OK) {
            return status;
        }
        args.more = (const void *const *)more;
    }
    blocks = weft__cuda_grid_blocks(count, size, args.vector, weft__cuda.sm_count, BLOCKS_PER_SM);
    return weft__cuda_check(
        weft__cu.cuLaunchKernel(fn, blocks, 1, 1, WEFT_CUDA_THREADS, 1, 1, 0, stream, params, NULL),
        "cuda reduce: cuLaunchKernel");
}

/* Stages what is not device memory, launches, copies a host dst back. Runs in the context. */
static weft_status_t reduce_staged(CUfunction fn, void *dst, const void *const *srcs, int nsrcs,
                                   size_t count, size_t size, CUstream stream, scratch_t *s,
                                   const void **dev_srcs)
{
    size_t bytes = count * size;
    void *dev_dst = dst;
    weft_status_t status;

    for (int j = 0; j < nsrcs; j++) {
        CUdeviceptr copy;

        dev_srcs[j] = srcs[j];
        if (weft__cuda_is_device(srcs[j])) {
            continue;
        }
        status = scratch_alloc(s, bytes, stream, &copy);
        if (status != WEFT_OK) {
            return status;
        }
        status = weft__cuda_check(weft__cu.cuMemcpyHtoDAsync(copy, srcs[j], bytes, stream),
                                  "cuda reduce: staging a host input");
        if (status != WEFT_OK) {
            return status;
        }
        dev_srcs[j] = (const void *)copy;
    }
    if (!weft__cuda_is_device(dst)) {
        CUdeviceptr out;

        status = scratch_alloc(s, bytes, stream, &out);
        if (status != WEFT_OK) {
            return status;
        }
        dev_dst = (void *)out;
    }
    status = launch_reduce(fn, dev_dst, dev_srcs, nsrcs, count, size, stream, s);
    if (status == WEFT_OK && dev_dst != dst) {
        status = weft__cuda_check(
            weft__cu.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)dev_dst, bytes, stream),
            "cuda reduce: copying the result to host memory");
    }
    return status;
}

static weft_status_t cuda_reduce(void *dst, const void *const *srcs, int nsrcs, size_t count,
                                 weft_dtype_t dtype, weft_op_t op)
{
    CUfunction fn = NULL;
    scratch_t s = {0};
    const void **dev_srcs = NULL;
    CUstream stream;
    weft_status_t status;
    int pushed;

    if (!weft__op_valid_for_dtype(op, dtype)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "cuda reduce: op %s is not defined for dtype %s",
                           weft_op_name(op), weft_dtype_name(dtype));
    }
    if (nsrcs < 1) {
        return weft__error(WEFT_ERR_INVALID_ARG, "cuda reduce: %d inputs, at least 1 needed",
                           nsrcs);
    }
    if (count == 0) {
        return WEFT_OK;
    }
    if (nsrcs == 1) {
        return cuda_copy(dst, srcs[0], count * weft_dtype_size(dtype));
    }
    /* every input and dst may need scratch, and the input list beyond the inline ones */
    s.scratch = malloc((size_t)(nsrcs + 2) * sizeof(*s.scratch));
    dev_srcs = malloc((size_t)nsrcs * sizeof(*dev_srcs));
    if (s.scratch == NULL || dev_srcs == NULL) {
        free(s.scratch);
        free(dev_srcs);
        return weft__error(WEFT_ERR_NO_MEMORY, "cuda reduce: no memory for %d inputs", nsrcs);
    }
    status = weft__cuda_enter(&pushed, "cuda reduce");
    if (status == WEFT_OK) {
        /* set up by weft__cuda_enter */
        fn = weft__cuda.reduce[dtype][op];
        status = weft__cuda_internal_stream(&stream, "cuda reduce");
        if (status == WEFT_OK) {
            weft_status_t wait;

            status = reduce_staged(fn, dst, srcs, nsrcs, count, weft_dtype_size(dtype), stream, &s,
                                   dev_srcs);
            for (int k = 0; k < s.nscratch; k++) {
                weft__cu.cuMemFreeAsync(s.scratch[k], stream);
            }
            wait = weft__cuda_wait(stream, "cuda reduce");
            status = status != WEFT_OK ? status : wait;
        }
        weft__cuda_leave(pushed);
    }
    free(dev_srcs);
    free(s.scratch);
    return status;
}

static weft_status_t cuda_avg_finalize(void *buf, size_t count, weft_dtype_t dtype, size_t divisor)
{
    weft_cuda_avg_args_t args = {.buf = buf, .count = count, .divisor = divisor};
    void *params[] = {&args};
    CUstream stream;
    weft_status_t status;
    int pushed;

    if ((unsigned)dtype >= WEFT_DTYPE_COUNT) {
        return weft__error(WEFT_ERR_INVALID_ARG, "cuda avg_finalize: unknown dtype %d", (int)dtype);
    }
    if (divisor == 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "cuda avg_finalize: divisor 0");
    }
    if (count == 0) {
        return WEFT_OK;
    }
    status = weft__cuda_enter(&pushed, "cuda avg_finalize");
    if (status != WEFT_OK) {
        return status;
    }
    /* asked in weft's context: this thread may have none */
    if (!weft__cuda_is_device(buf)) {
        weft__cuda_leave(pushed);
        /* the same arithmetic (device/reduce_elem.h) on the host */
        return weft__host_avg_finalize(buf, count, dtype, divisor);
    }
    status = weft__cuda_internal_stream(&stream, "cuda avg_finalize");
    if (status == WEFT_OK) {
        unsigned blocks = weft__cuda_grid_blocks(count, weft_dtype_size(dtype), 0,
                                                 weft__cuda.sm_count, BLOCKS_PER_SM);

        status = weft__cuda_check(weft__cu.cuLaunchKernel(weft__cuda.avg[dtype], blocks, 1, 1,
                                                          WEFT_CUDA_THREADS, 1, 1, 0, stream,
                                                          params, NULL),
                                  "cuda avg_finalize: cuLaunchKernel");
    }
    if (status == WEFT_OK) {
        status = weft__cuda_wait(stream, "cuda avg_finalize");
    }
    weft__cuda_leave(pushed);
    return status;
}

static const weft_device_ops_t cuda_ops = {
    .name = "cuda",
    .memtype = WEFT_MEM_CUDA,
    .owns = cuda_owns,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .reduce = cuda_reduce,
    .avg_finalize = cuda_avg_finalize,
    .stream_owns = weft__cuda_stream_owns,
    .stream_create = weft__cuda_stream_create,
    .stream_destroy = weft__cuda_stream_destroy,
    .stream_sync = weft__cuda_stream_sync,
    .memcpy_async = weft__cuda_memcpy_async,
    .host_alloc = weft__cuda_host_alloc,
    .host_free = weft__cuda_host_free,
    .stream_write_flag = weft__cuda_stream_write_flag,
    .stream_wait_flag = weft__cuda_stream_wait_flag,
    .stream_ring = weft__cuda_stream_ring,
    .thread_bind = cuda_thread_bind,
    .ipc_handle_size = WEFT_CUDA_IPC_HANDLE_SIZE,
    .ipc_capable = cuda_ipc_capable,
    .ipc_export = weft__cuda_ipc_export,
    .ipc_import = weft__cuda_ipc_import,
    .ipc_close = weft__cuda_ipc_close,
};

/* "<what>: <error name> (<text>)" into why; NULL for the caller to return */
static const weft_device_ops_t *load_failed(char *why, size_t len, CUresult result,
                                            const char *what)
{
    const char *name = NULL;
    const char *text = NULL;

    if (weft__cu.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == NULL) {
        snprintf(why, len, "%s: CUresult %d", what, (int)result);
        return NULL;
    }
    if (weft__cu.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == NULL) {
        text = "no description";
    }
    snprintf(why, len, "%s: %s (%s)", what, name, text);
    return NULL;
}

/* 0, or -1 with the reason in why */
static int load_kernels(char *why, size_t len)
{
    char name[64];
    char what[160];
    CUresult result = weft__cu.cuModuleLoadData(&weft__cuda.module, weft__cuda_fatbin);

    if (result != CUDA_SUCCESS) {
        char device[128] = "?";
        int major = 0;
        int minor = 0;

        weft__cu.cuDeviceGetName(device, sizeof(device), weft__cuda.dev);
        weft__cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                      weft__cuda.dev);
        weft__cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                      weft__cuda.dev);
        snprintf(what, sizeof(what), "cannot load weft's CUDA kernels (%s) on %s (sm_%d%d)",
                 WEFT_CUDA_ARCHS, device, major, minor);
        load_failed(why, len, result, what);
        return -1;
    }
    for (int d = 0; d < WEFT_DTYPE_COUNT; d++) {
        for (int o = 0; o < WEFT_OP_COUNT; o++) {
            if (weft__cuda_kernel_name((weft_op_t)o, (weft_dtype_t)d, name, sizeof(name)) != 0) {
                continue;
            }
            result =
                weft__cu.cuModuleGetFunction(&weft__cuda.reduce[d][o], weft__cuda.module, name);
            if (result != CUDA_SUCCESS) {
                snprintf(what, sizeof(what), "weft's CUDA kernel %s is missing", name);
                load_failed(why, len, result, what);
                return -1;
            }
        }
        weft__cuda_avg_kernel_name((weft_dtype_t)d, name, sizeof(name));
        result = weft__cu.cuModuleGetFunction(&weft__cuda.avg[d], weft__cuda.module, name);
        if (result != CUDA_SUCCESS) {
            snprintf(what, sizeof(what), "weft's CUDA kernel %s is missing", name);
            load_failed(why, len, result, what);
            return -1;
        }
    }
    return 0;
}

/* This process's rank among its node's, from the launcher's environment (the first of these
 * set); -1 when none is. */
static int local_rank(void)
{
    static const char *const names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                        "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        char *end;
        long r;

        if (v == NULL || *v == '\0') {
            continue;
        }
        r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0 && r < 1 << 20) {
            return (int)r;
        }
    }
    return -1;
}

/* The device of a thread without a context: WEFT_CUDA_DEVICE, or the local rank modulo the
 * device count (so that the ranks of a node spread over its GPUs), or 0. */
static CUresult choose_device(CUdevice *dev_p)
{
    int count = 0;
    int want = weft__runtime_config.cuda_device;
    CUresult result = weft__cu.cuDeviceGetCount(&count);

    if (result != CUDA_SUCCESS) {
        return result;
    }
    if (want >= count) {
        snprintf(setup_why, sizeof(setup_why),
                 "WEFT_CUDA_DEVICE is %d, but the driver sees %d device(s)", want, count);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if (want < 0) {
        int local = local_rank();

        want = local >= 0 && count > 0 ? local % count : 0;
    }
    return weft__cu.cuDeviceGet(dev_p, want);
}

/* The first use of the table: the context of the calling thread (current after
 * cudaSetDevice) or else a device's primary one (choose_device), its SM count, and the kernels.
 * A primary context is retained, also when it is the current one found (an application's
 * cudaDeviceReset would otherwise destroy it under weft). */
static void setup(void)
{
    CUcontext current = NULL;
    CUcontext popped;
    CUresult result;

    if (weft__cu.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != NULL) {
        CUcontext primary = NULL;

        result = weft__cu.cuCtxGetDevice(&weft__cuda.dev);
        if (result == CUDA_SUCCESS) {
            result = weft__cu.cuDevicePrimaryCtxRetain(&primary, weft__cuda.dev);
        }
        if (result == CUDA_SUCCESS && primary != current) { /* the application's own context */
            weft__cu.cuDevicePrimaryCtxRelease(weft__cuda.dev);
        }
        weft__cuda.ctx = current;
    } else {
        result = choose_device(&weft__cuda.dev);
        if (result == CUDA_SUCCESS) {
            result = weft__cu.cuDevicePrimaryCtxRetain(&weft__cuda.ctx, weft__cuda.dev);
        }
    }
    if (result != CUDA_SUCCESS) {
        if (setup_why[0] == '\0') {
            load_failed(setup_why, sizeof(setup_why), result, "cannot get a CUDA context");
        }
        setup_status = WEFT_ERR_DEVICE;
        return;
    }
    result = weft__cu.cuDeviceGetAttribute(
        &weft__cuda.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, weft__cuda.dev);
    if (result == CUDA_SUCCESS) {
        /* a stream that waits for a flag then reads memory that a NIC may have written (RDMA
         * into device memory) must see those writes: FLUSH where the device supports it */
        int flush = 0;

        weft__cuda.wait_flags = CU_STREAM_WAIT_VALUE_GEQ;
        if (weft__cu.cuDeviceGetAttribute(&flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES,
                                          weft__cuda.dev) == CUDA_SUCCESS &&
            flush) {
            weft__cuda.wait_flags |= CU_STREAM_WAIT_VALUE_FLUSH;
        }
    }
    if (result == CUDA_SUCCESS) {
        result = weft__cu.cuCtxPushCurrent(weft__cuda.ctx);
    }
    if (result != CUDA_SUCCESS) {
        load_failed(setup_why, sizeof(setup_why), result, "cannot use the CUDA context");
        setup_status = WEFT_ERR_DEVICE;
        return;
    }
    setup_status = load_kernels(setup_why, sizeof(setup_why)) == 0 ? WEFT_OK : WEFT_ERR_UNSUPPORTED;
    weft__cu.cuCtxPopCurrent(&popped);
    __atomic_store_n(&setup_done, setup_status == WEFT_OK, __ATOMIC_RELEASE);
}

const weft_device_ops_t *weft__device_cuda_load(char *why, size_t len)
{
    CUresult result;
    int count = 0;
    int version = 0;

    if (weft__cu_open(why, len) != 0) {
        return NULL;
    }
    result = weft__cu.cuInit(0);
    if (result == CUDA_ERROR_STUB_LIBRARY) {
        snprintf(why, len,
                 "cuInit failed: the libcuda.so.1 found is the CUDA toolkit's stub "
                 "library, not a driver");
        return NULL;
    }
    if (result != CUDA_SUCCESS) {
        char what[128];

        if (weft__cu.cuDriverGetVersion(&version) == CUDA_SUCCESS && version > 0) {
            snprintf(what, sizeof(what),
                     "cuInit failed (driver for CUDA %d.%d, weft built with CUDA %d.%d)",
                     version / 1000, version % 1000 / 10, CUDA_VERSION / 1000,
                     CUDA_VERSION % 1000 / 10);
        } else {
            snprintf(what, sizeof(what), "cuInit failed");
        }
        return load_failed(why, len, result, what);
    }
    result = weft__cu.cuDeviceGetCount(&count);
    if (result != CUDA_SUCCESS) {
        return load_failed(why, len, result, "cuDeviceGetCount failed");
    }
    if (count == 0) {
        snprintf(why, len, "the CUDA driver sees no device");
        return NULL;
    }
    if (pthread_key_create(&weft__cuda.stream_key, destroy_thread_stream) != 0) {
        snprintf(why, len, "cannot create the per-thread CUDA stream key");
        return NULL;
    }
    pthread_atfork(NULL, NULL, in_child);
    /* the context and the kernels wait for the first use (setup) */
    return &cuda_ops;
}
