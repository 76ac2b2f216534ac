/*
 * A stand-in for libcuda.so.1 that runs on the CPU, for cuda_fake_check: "device" memory is
 * process memory the fake keeps a list of, copies are memcpy, streams are tokens whose work is
 * done at once, contexts are a per-thread stack, and kernel launches are recorded instead of
 * run (fake_cuda_launch() gives the last one). A flag wait stays pending until the flag reaches
 * its value, and cuMemFreeHost is refused meanwhile (CUDA may deadlock there). It lets the host
 * side of device/cuda (staging, launch parameters, context push/pop, IPC cache, error translation)
 * run where no GPU is. Not a model of CUDA's asynchrony: only of what weft's calls ask for.
 *
 * Defined under the names cuda.h maps the API to (cuMemAlloc -> cuMemAlloc_v2), as a driver
 * exports them. Not thread-safe beyond what cuda_fake_check needs (one thread).
 */
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct block {
    struct block *next;
    char *base;
    size_t size;
    int pinned; /* host memory of cuMemHostAlloc, else device */
    int kind;   /* device memory: 0 cuMemAlloc, 1 managed, 2 a pool's or VMM (not IPC-capable) */
} block_t;

static block_t *blocks;
/* devices: FAKE_CUDA_DEVICES (default 1, at most 8), each with its primary context */
#define FAKE_MAX_DEVICES 8
static int fake_ctx_object[FAKE_MAX_DEVICES];
static int primary_retains[FAKE_MAX_DEVICES];
static __thread CUcontext ctx_stack[8];
static __thread int ctx_depth;
static char launch_name[64];
static unsigned launch_grid;
static unsigned char launch_args[512];
static int launches;
static int ipc_opens;
static int ipc_closes;
static int stream_tokens[64];
static CUcontext stream_ctx[64]; /* the context current when each was created */
static int nstreams;

EXPORT int fake_cuda_launch(char *name, unsigned *grid_p, void *args, size_t len)
{
    strcpy(name, launch_name);
    *grid_p = launch_grid;
    memcpy(args, launch_args, len < sizeof(launch_args) ? len : sizeof(launch_args));
    return launches;
}

/* cuDevicePrimaryCtxRetain calls minus cuDevicePrimaryCtxRelease calls of device d */
EXPORT int fake_cuda_primary_retains(int d)
{
    return d >= 0 && d < FAKE_MAX_DEVICES ? primary_retains[d] : -1;
}

static int device_count(void)
{
    const char *v = getenv("FAKE_CUDA_DEVICES");
    int n = v != NULL ? atoi(v) : 1;

    return n < 1 ? 1 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}

/* FAKE_CUDA_FLUSH=1: the device can flush remote writes (CAN_FLUSH_REMOTE_WRITES) */
static int can_flush(void)
{
    const char *v = getenv("FAKE_CUDA_FLUSH");

    return v != NULL && strcmp(v, "1") == 0;
}

EXPORT void fake_cuda_ipc_counts(int *opens_p, int *closes_p)
{
    *opens_p = ipc_opens;
    *closes_p = ipc_closes;
}

/* 1 when p is inside live "device" memory (pinned: host memory of cuMemHostAlloc) */
EXPORT int fake_cuda_is(const void *p, int pinned)
{
    for (block_t *b = blocks; b != NULL; b = b->next) {
        if ((const char *)p >= b->base && (const char *)p < b->base + b->size) {
            return b->pinned == pinned;
        }
    }
    return 0;
}

/* Waits queued on flags (cuStreamWaitValue32), pending while the flag is below the value. */
#define FAKE_MAX_WAITS 256
static struct {
    volatile uint32_t *flag;
    uint32_t value;
    CUstream stream;
} waits[FAKE_MAX_WAITS];
static int frees_while_waiting;

/* cuMemFreeHost calls refused because a stream waited on a flag */
EXPORT int fake_cuda_frees_while_waiting(void)
{
    return frees_while_waiting;
}

/* Pending waits (of stream s; any stream: NULL); drops the ones that ended. */
static int waits_pending(CUstream s)
{
    int n = 0;

    for (int i = 0; i < FAKE_MAX_WAITS; i++) {
        if (waits[i].flag != NULL && !fake_cuda_is((const void *)waits[i].flag, 1)) {
            waits[i].flag = NULL; /* its flag was freed (that free was counted if it waited) */
        } else if (waits[i].flag != NULL && *waits[i].flag >= waits[i].value) {
            waits[i].flag = NULL;
        }
        n += waits[i].flag != NULL && (s == NULL || waits[i].stream == s);
    }
    return n;
}

static block_t *find(CUdeviceptr p)
{
    for (block_t *b = blocks; b != NULL; b = b->next) {
        if ((char *)p >= b->base && (char *)p < b->base + b->size) {
            return b;
        }
    }
    return NULL;
}

static CUresult add(size_t size, int pinned, void **p)
{
    block_t *b = calloc(1, sizeof(*b));

    if (b == NULL || posix_memalign((void **)&b->base, 256, size ? size : 1) != 0) {
        free(b);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    b->size = size ? size : 1;
    b->pinned = pinned;
    b->next = blocks;
    blocks = b;
    *p = b->base;
    return CUDA_SUCCESS;
}

static CUresult drop(void *p, int pinned)
{
    for (block_t **link = &blocks; *link != NULL; link = &(*link)->next) {
        block_t *b = *link;

        if (b->base == p && b->pinned == pinned) {
            *link = b->next;
            free(b->base);
            free(b);
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **str)
{
    switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        *str = "CUDA_ERROR_OUT_OF_MEMORY";
        return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE:
        *str = "CUDA_ERROR_INVALID_VALUE";
        return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_HANDLE:
        *str = "CUDA_ERROR_INVALID_HANDLE";
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}
EXPORT CUresult cuGetErrorString(CUresult error, const char **str)
{
    *str = error == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "fake error";
    return CUDA_SUCCESS;
}
EXPORT CUresult cuInit(unsigned int flags)
{
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuDriverGetVersion(int *v)
{
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetCount(int *n)
{
    *n = device_count();
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    *d = ordinal;
    return ordinal >= 0 && ordinal < device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice d)
{
    (void)d;
    *v = attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT       ? 4
         : attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9
         : attr == CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES  ? can_flush()
                                                                : 0;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    (void)d;
    strncpy(name, "fake", (size_t)len);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (d < 0 || d >= device_count()) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *c = (CUcontext)&fake_ctx_object[d];
    primary_retains[d]++;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d)
{
    if (d < 0 || d >= device_count() || primary_retains[d] == 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    primary_retains[d]--;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
    *c = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
    int *c = ctx_depth > 0 ? (int *)ctx_stack[ctx_depth - 1] : NULL;

    if (c == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    /* a primary context names its device; any other context is device 0's */
    *d = c >= fake_ctx_object && c < fake_ctx_object + FAKE_MAX_DEVICES ? (int)(c - fake_ctx_object)
                                                                        : 0;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPushCurrent(CUcontext c)
{
    if (ctx_depth == 8) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}
/* replaces the top of the thread's stack (pushes onto an empty one; NULL pops) */
EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
    if (c == NULL) {
        ctx_depth -= ctx_depth > 0;
    } else if (ctx_depth == 0) {
        ctx_stack[ctx_depth++] = c;
    } else {
        ctx_stack[ctx_depth - 1] = c;
    }
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPopCurrent(CUcontext *c)
{
    if (ctx_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *c = ctx_stack[--ctx_depth];
    return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    *m = (CUmodule)image;
    return image != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
}
EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    (void)m;
    *f = (CUfunction)strdup(name);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                               void **extra)
{
    (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)s, (void)extra;
    if (ctx_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    strncpy(launch_name, (const char *)f, sizeof(launch_name) - 1);
    launch_grid = gx;
    memcpy(launch_args, params[0], sizeof(launch_args));
    launches++;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs, void **data,
                                       CUdeviceptr p)
{
    block_t *b = find(p);

    for (unsigned i = 0; i < n; i++) {
        if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
            *(unsigned *)data[i] = b == NULL   ? 0
                                   : b->pinned ? CU_MEMORYTYPE_HOST
                                               : CU_MEMORYTYPE_DEVICE;
        } else if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED && b != NULL) {
            *(unsigned *)data[i] = b->kind == 1;
        } else if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE && b != NULL) {
            *(unsigned *)data[i] = !b->pinned && b->kind == 0;
        } else if (attrs[i] != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
            return CUDA_ERROR_INVALID_VALUE; /* not a CUDA pointer, or an attribute not modelled */
        }
    }
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t size)
{
    if (ctx_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return size > ((size_t)1 << 40) ? CUDA_ERROR_OUT_OF_MEMORY : add(size, 0, (void **)p);
}
EXPORT CUresult cuMemFree(CUdeviceptr p)
{
    return drop((void *)p, 0);
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t size, CUstream s)
{
    (void)s;
    return add(size, 0, (void **)p);
}
/* kept (not freed) so that the checker can read what was staged; a leak of a test program */
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    (void)s;
    return find(p) != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    block_t *b = find(p);

    if (b == NULL || b->pinned) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (base != NULL) {
        *base = (CUdeviceptr)b->base;
    }
    if (size != NULL) {
        *size = b->size;
    }
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    (void)s;
    memmove((void *)dst, (const void *)src, n);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    (void)s;
    if (find(dst) == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy((void *)dst, src, n);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemHostAlloc(void **p, size_t size, unsigned flags)
{
    return flags & CU_MEMHOSTALLOC_DEVICEMAP ? add(size, 1, p) : CUDA_ERROR_INVALID_VALUE;
}
/* CUDA may block here until the device's streams are idle: a stream that waits on a flag
 * the freeing thread would write never gets there (a deadlock). The fake refuses it. */
EXPORT CUresult cuMemFreeHost(void *p)
{
    if (waits_pending(NULL) > 0) {
        frees_while_waiting++;
        return CUDA_ERROR_NOT_PERMITTED;
    }
    return drop(p, 1);
}
EXPORT CUresult cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned flags)
{
    block_t *b = find((CUdeviceptr)p);

    if (b == NULL || !b->pinned || flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *d = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags)
{
    int i = nstreams++ % 64;

    (void)flags;
    if (ctx_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    stream_ctx[i] = ctx_stack[ctx_depth - 1];
    *s = (CUstream)&stream_tokens[i];
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamDestroy(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}
/* a stream with a pending wait is not done (its flag is checked again at each query) */
EXPORT CUresult cuStreamQuery(CUstream s)
{
    return waits_pending(s) > 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *c)
{
    if ((int *)s < stream_tokens || (int *)s >= stream_tokens + 64) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *c = stream_ctx[(int *)s - stream_tokens];
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned flags)
{
    (void)s, (void)flags;
    *(volatile uint32_t *)addr = v;
    return CUDA_SUCCESS;
}
/* host functions launched (cuLaunchHostFunc) */
static int host_funcs;

EXPORT int fake_cuda_host_funcs(void)
{
    return host_funcs;
}

/* the fake's streams run their work at once: so does a host function */
EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg)
{
    (void)s;
    if (fn == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    host_funcs++;
    fn(arg);
    return CUDA_SUCCESS;
}

/* the work after the wait would run once the flag is >= v: here, only the argument is checked */
static unsigned last_wait_flags;

/* the flags of the last cuStreamWaitValue32 */
EXPORT unsigned fake_cuda_last_wait_flags(void)
{
    return last_wait_flags;
}

/* GEQ, with FLUSH only where the device says it can (CUDA refuses it otherwise); a wait on
 * a flag below v is pending until the flag gets there */
EXPORT CUresult cuStreamWaitValue32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned flags)
{
    (void)s;
    last_wait_flags = flags;
    if (!fake_cuda_is((void *)addr, 1) ||
        !(flags == CU_STREAM_WAIT_VALUE_GEQ ||
          (can_flush() && flags == (CU_STREAM_WAIT_VALUE_GEQ | CU_STREAM_WAIT_VALUE_FLUSH)))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    waits_pending(NULL); /* drops the ones that ended */
    for (int i = 0; i < FAKE_MAX_WAITS && *(volatile uint32_t *)addr < v; i++) {
        if (waits[i].flag == NULL) {
            waits[i].flag = (volatile uint32_t *)addr;
            waits[i].value = v;
            waits[i].stream = s;
            break;
        }
    }
    return CUDA_SUCCESS;
}
/* device memory of another kind than cuMemAlloc's (1 managed, 2 a pool's or VMM), for tests */
EXPORT void *fake_cuda_alloc_kind(size_t size, int kind)
{
    void *p = NULL;

    if (add(size, 0, &p) != CUDA_SUCCESS) {
        return NULL;
    }
    find((CUdeviceptr)p)->kind = kind;
    return p;
}

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
    block_t *b = find(p);

    if (b == NULL || (char *)p != b->base || b->kind != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(h, 0, sizeof(*h));
    memcpy(h->reserved, &p, sizeof(p));
    return CUDA_SUCCESS;
}
/* one process: the "mapping" is the exporter's own address */
EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
    if (flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(p, h.reserved, sizeof(*p));
    ipc_opens++;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p)
{
    (void)p;
    ipc_closes++;
    return CUDA_SUCCESS;
}
