/*
 * cuda_fake_check: the CUDA table's host side against fake_cuda.c, a libcuda.so.1 stand-in that
 * runs on the CPU (test_cuda runs this program with LD_LIBRARY_PATH pointing at it). Checks
 * what weft asks of the driver: allocations and their checks, copies, the staging of host
 * inputs and the kernel parameters of reduce (kernel, inputs, vector flag, grid, inputs beyond
 * the inline ones), avg_finalize, streams, flags, the doorbell rung by a host function, pinned
 * memory (no cuMemFreeHost while a stream waits), the IPC cache and which memory IPC takes, CUDA
 * errors named in weft's messages, and that every call leaves the thread's context stack as it
 * found it. Prints "cuda_fake_check: N checks passed" and exits 0, or names the first failed
 * check and exits 1.
 *
 * cuda_fake_check device [D]: which device weft takes at its first CUDA call (with D, the
 * application made device D's primary context current first): prints "device N, primary
 * retains R" (R: the fake's count for N, the application's retain included).
 * cuda_fake_check fork: weft uses CUDA, the process forks, the child's CUDA call must fail
 * naming the fork; prints "fork: <the child's error>".
 */
#include "base/config.h"
#include "device/cuda/cuda.h"
#include "device/cuda/kernel_args.h"
#include "device/cuda/util.h"
#include "device/device.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: %s: ", __LINE__, #cond);                                         \
            printf(__VA_ARGS__);                                                                   \
            printf(" (last error: %s)\n", weft_last_error());                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int (*fake_launch)(char *name, unsigned *grid_p, void *args, size_t len);
static void (*fake_ipc_counts)(int *opens_p, int *closes_p);
static int (*fake_is)(const void *p, int pinned);
static int (*fake_ctx_get)(void **ctx_p);
static unsigned (*fake_wait_flags)(void);
static int (*fake_host_funcs)(void);
static int (*fake_frees_while_waiting)(void);
static void *(*fake_alloc_kind)(size_t size, int kind);

static int launches(weft_cuda_reduce_args_t *args, char *name, unsigned *grid)
{
    return fake_launch(name, grid, args, sizeof(*args));
}

static void check_reduce(const weft_device_ops_t *cu)
{
    enum { N = 1000, MANY = WEFT_CUDA_INLINE_SRCS + 8 };
    float host[N];
    float *dev[MANY];
    const void *srcs[MANY];
    weft_cuda_reduce_args_t args;
    char name[64];
    unsigned grid;
    int before;

    for (int i = 0; i < N; i++) {
        host[i] = (float)i * 0.5f;
    }
    for (int j = 0; j < MANY; j++) {
        CHECK(cu->alloc(N * sizeof(float), (void **)&dev[j]) == WEFT_OK, "alloc %d", j);
        srcs[j] = dev[j];
    }
    /* input 1 in host memory: staged into device scratch holding its bytes */
    srcs[1] = host;
    before = launches(&args, name, &grid);
    CHECK(cu->reduce(dev[0], srcs, 3, N, WEFT_FLOAT32, WEFT_SUM) == WEFT_OK, "reduce");
    CHECK(launches(&args, name, &grid) == before + 1, "one launch");
    CHECK(strcmp(name, "weft_reduce_sum_float32") == 0, "kernel %s", name);
    CHECK(args.dst == dev[0] && args.srcs[0] == dev[0] && args.srcs[2] == dev[2], "pointers");
    CHECK(args.srcs[1] != host && fake_is(args.srcs[1], 0), "host input staged");
    CHECK(memcmp(args.srcs[1], host, sizeof(host)) == 0, "staged bytes");
    CHECK(args.nsrcs == 3 && args.count == N && args.vector == 1 && args.more == NULL, "args");
    CHECK(grid == weft__cuda_grid_blocks(N, 4, 1, 4, 4), "grid %u", grid);

    /* AVG is SUM's kernel; a misaligned dst takes the scalar path */
    srcs[1] = dev[1];
    CHECK(cu->reduce((float *)dev[0] + 1, srcs, 2, N - 1, WEFT_INT32, WEFT_AVG) == WEFT_OK, "avg");
    launches(&args, name, &grid);
    CHECK(strcmp(name, "weft_reduce_sum_int32") == 0 && args.vector == 0, "%s", name);

    /* inputs beyond the inline ones travel in a device array */
    CHECK(cu->reduce(dev[0], srcs, MANY, N, WEFT_UINT8, WEFT_BXOR) == WEFT_OK, "many");
    launches(&args, name, &grid);
    CHECK(strcmp(name, "weft_reduce_bxor_uint8") == 0 && args.nsrcs == MANY, "%s", name);
    CHECK(args.more != NULL && fake_is(args.more, 0), "more in device memory");
    CHECK(memcmp(args.more, srcs + WEFT_CUDA_INLINE_SRCS, 8 * sizeof(void *)) == 0, "more");

    /* a host dst: computed into device scratch */
    CHECK(cu->reduce(host, srcs, 2, N, WEFT_FLOAT32, WEFT_MAX) == WEFT_OK, "host dst");
    launches(&args, name, &grid);
    CHECK(args.dst != host && fake_is(args.dst, 0), "dst staged");

    /* one input: a copy, no kernel */
    before = launches(&args, name, &grid);
    memset(host, 0, sizeof(host));
    CHECK(cu->copy(dev[5], host, sizeof(host)) == WEFT_OK, "copy");
    srcs[0] = dev[5];
    CHECK(cu->reduce(dev[6], srcs, 1, N, WEFT_FLOAT32, WEFT_PROD) == WEFT_OK, "one input");
    CHECK(launches(&args, name, &grid) == before, "no launch for one input");
    CHECK(memcmp(dev[6], host, sizeof(host)) == 0, "one input copied");

    CHECK(cu->reduce(dev[0], srcs, 2, N, WEFT_FLOAT32, WEFT_BAND) == WEFT_ERR_INVALID_ARG, "band");
    CHECK(cu->reduce(dev[0], srcs, 0, N, WEFT_FLOAT32, WEFT_SUM) == WEFT_ERR_INVALID_ARG, "0");
    for (int j = 0; j < MANY; j++) {
        CHECK(cu->free(dev[j]) == WEFT_OK, "free %d", j);
    }
}

static void check_memory(const weft_device_ops_t *cu)
{
    char host[256];
    char back[256];
    char *dev;

    CHECK(cu->alloc(sizeof(host), (void **)&dev) == WEFT_OK, "alloc");
    CHECK(cu->owns(dev) == 1 && cu->owns(dev + 100) == 1 && cu->owns(host) == 0, "owns");
    for (size_t i = 0; i < sizeof(host); i++) {
        host[i] = (char)(i * 3);
    }
    CHECK(cu->copy(dev, host, sizeof(host)) == WEFT_OK &&
              cu->copy(back, dev, sizeof(back)) == WEFT_OK,
          "copies");
    CHECK(memcmp(host, back, sizeof(host)) == 0, "copied bytes");
    CHECK(cu->free(dev + 1) == WEFT_ERR_INVALID_ARG, "free inside");
    CHECK(strstr(weft_last_error(), "not the start of a live CUDA allocation") != NULL, "msg");
    CHECK(cu->free(host) == WEFT_ERR_INVALID_ARG, "free host");
    CHECK(cu->free(dev) == WEFT_OK && cu->owns(dev) == 0, "free");
    CHECK(cu->alloc((size_t)1 << 41, (void **)&dev) == WEFT_ERR_NO_MEMORY, "huge");
    CHECK(strstr(weft_last_error(), "CUDA_ERROR_OUT_OF_MEMORY (out of memory)") != NULL, "name");
    CHECK(strstr(weft_last_error(), "cuda alloc of 2199023255552 bytes") != NULL, "size");
}

static void check_avg(const weft_device_ops_t *cu)
{
    int32_t host[10] = {7, -7, 10, 0, 3, 4, 5, 6, 8, 9};
    weft_cuda_avg_args_t args;
    char name[64];
    unsigned grid;
    void *dev;
    int before;

    CHECK(cu->alloc(sizeof(host), &dev) == WEFT_OK, "alloc");
    CHECK(cu->avg_finalize(dev, 10, WEFT_INT32, 3) == WEFT_OK, "device avg");
    fake_launch(name, &grid, &args, sizeof(args));
    CHECK(strcmp(name, "weft_avg_int32") == 0 && args.buf == dev && args.count == 10 &&
              args.divisor == 3,
          "%s", name);
    before = fake_launch(name, &grid, &args, sizeof(args));
    CHECK(cu->avg_finalize(host, 10, WEFT_INT32, 3) == WEFT_OK, "host avg");
    CHECK(fake_launch(name, &grid, &args, sizeof(args)) == before, "host buffer: no kernel");
    CHECK(host[0] == 2 && host[1] == -2 && host[2] == 3, "host quotients");
    CHECK(cu->avg_finalize(dev, 10, WEFT_INT32, 0) == WEFT_ERR_INVALID_ARG, "divisor 0");
    CHECK(cu->free(dev) == WEFT_OK, "free");
}

static void check_streams(const weft_device_ops_t *cu)
{
    uint32_t *flag;
    void *stream;
    int not_a_stream;

    CHECK(cu->stream_create(&stream) == WEFT_OK && cu->stream_owns(stream), "create");
    CHECK(cu->stream_owns(NULL) == 1 && cu->stream_owns(&not_a_stream) == 0, "owns");
    CHECK(weft__device_flag_alloc(cu, &flag) == WEFT_OK && *flag == 0, "flag");
    CHECK(cu->stream_write_flag(stream, flag, 5) == WEFT_OK && *flag == 5, "write");
    CHECK(cu->stream_wait_flag(stream, flag, 6) == WEFT_OK, "wait (GEQ on the device pointer)");
    /* FLUSH exactly where the device can flush remote writes (FAKE_CUDA_FLUSH=1) */
    CHECK(fake_wait_flags() ==
              (CU_STREAM_WAIT_VALUE_GEQ |
               (getenv("FAKE_CUDA_FLUSH") != NULL ? CU_STREAM_WAIT_VALUE_FLUSH : 0)),
          "wait flags 0x%x", fake_wait_flags());
    *flag = 6; /* the wait ends (a sync before would wait forever on a GPU) */
    {
        /* the doorbell rung by a host function in stream order (the fake runs it at once) */
        uint32_t bell = weft__device_doorbell_read();
        int funcs = fake_host_funcs();

        CHECK(cu->stream_ring != NULL && cu->stream_ring(stream) == WEFT_OK, "ring");
        CHECK(fake_host_funcs() == funcs + 1 && weft__device_doorbell_read() != bell,
              "the ring's host function ran and rang (%d host functions)", fake_host_funcs());
    }
    CHECK(cu->stream_sync(stream) == WEFT_OK, "sync");
    CHECK(cu->stream_destroy(stream) == WEFT_OK, "destroy");
    CHECK(cu->stream_destroy(NULL) == WEFT_ERR_INVALID_ARG, "destroy default");
    weft__device_flag_free(cu, flag);
}

/* Flags come from slabs and bounce buffers from a cache (device/pinned.c): no cuMemFreeHost
 * while a stream waits on a flag (the fake refuses it and counts), the cache trimmed after. */
static void check_pinned(const weft_device_ops_t *cu)
{
    const size_t keep = weft__runtime_config.pinned_cache;
    weft_pinned_stats_t s0, s;
    uint32_t *gate, *other;
    void *stream, *a, *b;

    weft__device_pinned_stats(cu, &s0);
    CHECK(cu->stream_create(&stream) == WEFT_OK, "create");
    CHECK(weft__device_flag_alloc(cu, &gate) == WEFT_OK &&
              weft__device_flag_alloc(cu, &other) == WEFT_OK,
          "flags");
    CHECK(fake_is(gate, 1) && fake_is(other, 1), "flags in mapped pinned memory");
    CHECK(cu->stream_wait_flag(stream, gate, 2) == WEFT_OK, "wait");
    weft__device_flag_free(cu, other);
    weft__runtime_config.pinned_cache = 0;
    CHECK(weft__device_bounce_get(cu, 3 << 20, &a) == WEFT_OK && fake_is(a, 1), "bounce buffer");
    weft__device_bounce_put(cu, a);
    CHECK(weft__device_bounce_get(cu, 3 << 20, &b) == WEFT_OK && b == a, "reused");
    weft__device_bounce_put(cu, b);
    weft__device_pinned_stats(cu, &s);
    CHECK(fake_frees_while_waiting() == 0, "cuMemFreeHost while a stream waited on a flag");
    CHECK(s.buffer_frees == s0.buffer_frees && fake_is(a, 1), "freed while a flag was in use");
    CHECK(s.slabs == (s0.slabs > 0 ? s0.slabs : 1), "one slab: %zu", s.slabs);
    *gate = 2; /* the stream is past its wait */
    weft__device_flag_free(cu, gate);
    weft__device_pinned_stats(cu, &s);
    CHECK(s.buffer_frees == s0.buffer_frees + 1 && !fake_is(a, 1) && s.cached_bytes == 0,
          "the cache trimmed once no flag was in use: frees %zu->%zu, cached %zu, in use %zu, "
          "refused %d",
          s0.buffer_frees, s.buffer_frees, s.cached_bytes, s.flags_in_use,
          fake_frees_while_waiting());
    CHECK(fake_frees_while_waiting() == 0, "cuMemFreeHost while a stream waited on a flag");
    weft__runtime_config.pinned_cache = keep;
    CHECK(cu->stream_destroy(stream) == WEFT_OK, "destroy");
}

static void check_ipc(const weft_device_ops_t *cu)
{
    unsigned char handle[WEFT_DEVICE_IPC_MAX];
    unsigned char *dev;
    void *p1;
    void *p2;
    int opens;
    int closes;

    CHECK(cu->ipc_handle_size == WEFT_CUDA_IPC_HANDLE_SIZE, "handle size");
    CHECK(cu->alloc(4096, (void **)&dev) == WEFT_OK, "alloc");
    CHECK(cu->ipc_export(dev + 100, handle) == WEFT_OK, "export");
    CHECK(cu->ipc_import(handle, &p1) == WEFT_OK && p1 == dev + 100, "import at the offset");
    CHECK(cu->ipc_import(handle, &p2) == WEFT_OK && p2 == p1, "import again");
    fake_ipc_counts(&opens, &closes);
    CHECK(opens == 1 && closes == 0, "one mapping for two imports");
    cu->ipc_close(p1);
    fake_ipc_counts(&opens, &closes);
    CHECK(closes == 0, "still imported once");
    cu->ipc_close(p2);
    fake_ipc_counts(&opens, &closes);
    CHECK(closes == 1, "unmapped at the last close");
    handle[0] ^= 1;
    CHECK(cu->ipc_import(handle, &p1) == WEFT_ERR_INVALID_ARG, "bad handle");
    /* which buffers IPC takes: cuMemAlloc's (and weft's scratch), not managed, pool or VMM
     * memory (coll/shm/single_copy.c stages those through scratch) */
    CHECK(cu->ipc_capable(dev) == 1 && cu->ipc_capable(dev + 100) == 1, "cuMemAlloc: capable");
    CHECK((p1 = fake_alloc_kind(4096, 1)) != NULL && cu->owns(p1) == 1 &&
              cu->ipc_capable(p1) == 0 && cu->ipc_export(p1, handle) != WEFT_OK,
          "managed memory: not capable");
    CHECK((p2 = fake_alloc_kind(4096, 2)) != NULL && cu->owns(p2) == 1 &&
              cu->ipc_capable(p2) == 0 && cu->ipc_export(p2, handle) != WEFT_OK,
          "pool or VMM memory: not capable");
    CHECK(cu->free(p1) == WEFT_OK && cu->free(p2) == WEFT_OK, "free");
    CHECK(weft__device_scratch_get(cu, 5000, &p1) == WEFT_OK && cu->owns(p1) == 1 &&
              cu->ipc_capable(p1) == 1 && cu->ipc_export(p1, handle) == WEFT_OK,
          "scratch: device memory IPC takes");
    weft__device_scratch_put(cu, p1);
    CHECK(weft__device_scratch_get(cu, 5100, &p2) == WEFT_OK && p2 == p1, "scratch reused");
    weft__device_scratch_put(cu, p2);
    CHECK(cu->free(dev) == WEFT_OK, "free");
}

static void *bind_thread(void *arg)
{
    const weft_device_ops_t *cu = arg;
    void *before = (void *)1, *after = NULL, *again = NULL;

    fake_ctx_get(&before);
    cu->thread_bind();
    fake_ctx_get(&after);
    cu->thread_bind();
    fake_ctx_get(&again);
    return before == NULL && after != NULL && again == after ? after : NULL;
}

/* weft's threads (the progress thread) keep weft's context current once bound */
static void check_thread_bind(const weft_device_ops_t *cu)
{
    pthread_t t;
    void *ctx = NULL;

    CHECK(pthread_create(&t, NULL, bind_thread, (void *)cu) == 0 && pthread_join(t, &ctx) == 0,
          "thread");
    CHECK(ctx != NULL, "a thread without a context has weft's current after thread_bind, and "
                       "keeps it");
}

/* A symbol of the libcuda.so.1 weft loaded (NULL: none loaded, or not the fake). */
static void *fake_sym(const char *name)
{
    void *fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    return fake != NULL ? dlsym(fake, name) : NULL;
}

/* The device weft's first CUDA call takes (app_device >= 0: the application's current context is
 * that device's primary one). */
static int check_device(int app_device)
{
    const weft_device_ops_t *cu;
    int (*retains)(int);
    int (*retain)(void **, int);
    int (*push)(void *);
    void *ctx = NULL;
    void *p = NULL;
    int dev = -1;

    /* weft loads the driver at weft_init and sets CUDA up at its first use */
    CHECK(weft_init() == WEFT_OK && (cu = weft__device_ops(WEFT_MEM_CUDA)) != NULL, "weft_init");
    retains = (int (*)(int))fake_sym("fake_cuda_primary_retains");
    retain = (int (*)(void **, int))fake_sym("cuDevicePrimaryCtxRetain");
    push = (int (*)(void *))fake_sym("cuCtxPushCurrent_v2");
    CHECK(retains != NULL && retain != NULL && push != NULL, "libcuda.so.1 is fake_cuda");
    if (app_device >= 0) {
        CHECK(retain(&ctx, app_device) == 0 && push(ctx) == 0, "the application's context");
    }
    if (cu->alloc(64, &p) != WEFT_OK) {
        printf("device: %s\n", weft_last_error());
        return 0;
    }
    CHECK(weft__cuda_device(&dev) == WEFT_OK, "weft's device");
    cu->free(p);
    printf("device %d, primary retains %d\n", dev, retains(dev));
    return 0;
}

static int check_fork(void)
{
    const weft_device_ops_t *cu;
    void *p = NULL;
    int fds[2];
    char text[400] = "";
    pid_t pid;
    int status = 0;

    CHECK(weft_init() == WEFT_OK, "weft_init");
    cu = weft__device_ops(WEFT_MEM_CUDA);
    CHECK(cu != NULL && cu->alloc(64, &p) == WEFT_OK, "the parent uses CUDA");
    CHECK(pipe(fds) == 0, "pipe");
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        void *q = NULL;
        weft_status_t s = cu->alloc(64, &q);
        int n = snprintf(text, sizeof(text), "%s %s", weft_status_name(s),
                         s == WEFT_OK ? "" : weft_last_error());

        (void)!write(fds[1], text, (size_t)n);
        _exit(0);
    }
    close(fds[1]);
    CHECK(read(fds[0], text, sizeof(text) - 1) > 0, "the child's answer");
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "the child exits");
    CHECK(cu->free(p) == WEFT_OK, "the parent still uses CUDA");
    printf("fork: %s\n", text);
    return 0;
}

int main(int argc, char **argv)
{
    const weft_device_ops_t *cu;
    void *ctx = (void *)1;

    if (argc > 1 && strcmp(argv[1], "device") == 0) {
        return check_device(argc > 2 ? atoi(argv[2]) : -1);
    }
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        return check_fork();
    }
    cu = weft__device_ops(WEFT_MEM_CUDA);
    CHECK(cu != NULL, "the fake driver loads: %s", weft__device_unavailable(WEFT_MEM_CUDA));
    CHECK((fake_launch = fake_sym("fake_cuda_launch")) != NULL &&
              (fake_ipc_counts = fake_sym("fake_cuda_ipc_counts")) != NULL &&
              (fake_is = fake_sym("fake_cuda_is")) != NULL &&
              (fake_ctx_get = fake_sym("cuCtxGetCurrent")) != NULL &&
              (fake_wait_flags = fake_sym("fake_cuda_last_wait_flags")) != NULL &&
              (fake_host_funcs = fake_sym("fake_cuda_host_funcs")) != NULL &&
              (fake_frees_while_waiting = fake_sym("fake_cuda_frees_while_waiting")) != NULL &&
              (fake_alloc_kind = fake_sym("fake_cuda_alloc_kind")) != NULL,
          "libcuda.so.1 is fake_cuda");
    check_memory(cu);
    check_reduce(cu);
    check_avg(cu);
    check_streams(cu);
    check_pinned(cu);
    check_thread_bind(cu);
    check_ipc(cu);
    CHECK(fake_ctx_get(&ctx) == 0 && ctx == NULL, "the thread's context stack left as found");
    printf("cuda_fake_check: %d checks passed\n", checks);
    return 0;
}
