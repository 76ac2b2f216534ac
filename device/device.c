/* Memory-type dispatch and the dtype/op rules shared by every device table. */
#include "device/device.h"


#ifdef WEFT_HAVE_CUDA_BACKEND
#include "device/cuda/cuda.h"
#include "device/emu/emu.h"
#endif

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const weft_device_ops_t *cuda_ops; /* set once by weft__device_init */
static char cuda_why[256] = "weft was built without CUDA (configure found no nvcc)";
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void cuda_load(void)
{
#ifdef WEFT_HAVE_CUDA_BACKEND
    cuda_ops = weft__device_cuda_load(cuda_why, sizeof(cuda_why));
#endif
}

void weft__device_init(void)
{
    pthread_once(&cuda_once, cuda_load);
}

const weft_device_ops_t *weft__device_ops(weft_memtype_t type)
{
    switch (type) {
    case WEFT_MEM_HOST:
        return &weft__device_host_ops;
    case WEFT_MEM_EMU:
        return &weft__device_emu_ops;
    case WEFT_MEM_CUDA:
        weft__device_init();
        return cuda_ops;
    }
    return NULL;
}

const char *weft__device_unavailable(weft_memtype_t type)
{
    if (weft__device_ops(type) != NULL) {
        return "";
    }
    return type == WEFT_MEM_CUDA ? cuda_why : "not a weft_memtype_t";
}

/* The table claiming ptr and what it says (1 live, -1 freed). */
static const weft_device_ops_t *claim(const void *ptr, int *how_p)
{
    int how = weft__device_emu_ops.owns(ptr);

    if (how != 0) {
        *how_p = how;
        return &weft__device_emu_ops;
    }
    if (cuda_ops != NULL && (how = cuda_ops->owns(ptr)) != 0) {
        *how_p = how;
        return cuda_ops;
    }
    *how_p = 1;
    return &weft__device_host_ops;
}

const weft_device_ops_t *weft__device_query(const void *ptr)
{
    int how;

    return claim(ptr, &how);
}

weft_status_t weft__device_check(const void *ptr, const char *call, const char *what,
                                 const weft_device_ops_t **dev_p)
{
    int how;
    const weft_device_ops_t *dev = claim(ptr, &how);

    if (how < 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: %s %p points into %s memory that was freed",
                           call, what, ptr, dev->name);
    }
    *dev_p = dev;
    return WEFT_OK;
}

uint64_t weft__device_host_epoch(void)
{
    return cuda_ops != NULL ? 0 : weft__emu_epoch();
}

weft_status_t weft__device_stream_check(void *stream, const char *call,
                                        const weft_device_ops_t **dev_p)
{
    if (stream != NULL && weft__device_emu_ops.stream_owns(stream)) {
        *dev_p = &weft__device_emu_ops;
        return WEFT_OK;
    }
    if (weft__emu_stream_destroyed(stream)) { /* never handed to CUDA to look at */
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: stream %p is an emu stream that was destroyed",
                           call, stream);
    }
    weft__device_init();
    if (cuda_ops != NULL && cuda_ops->stream_owns(stream)) {
        *dev_p = cuda_ops;
        return WEFT_OK;
    }
    if (stream == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s: stream is NULL, and the CUDA default stream needs the CUDA "
                           "backend (%s)",
                           call, cuda_why);
    }
    if (cuda_ops == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s: stream %p is not a weft emu stream, and CUDA streams need the "
                           "CUDA backend (%s)",
                           call, stream, cuda_why);
    }
    return weft__error(WEFT_ERR_INVALID_ARG,
                       "%s: stream %p is neither a weft emu stream nor a CUDA stream", call,
                       stream);
}

void weft__device_flag_set(uint32_t *flag, uint32_t value)
{
    atomic_store_explicit((_Atomic uint32_t *)flag, value, memory_order_release);
    syscall(SYS_futex, flag, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

uint32_t weft__device_flag_get(const uint32_t *flag)
{
    return atomic_load_explicit((_Atomic uint32_t *)flag, memory_order_acquire);
}

/* The doorbell and its sleepers. A ring adds, then looks for sleepers; a sleeper counts itself,
 * then sleeps only while the count is what it read (both sequentially consistent): a ring either
 * sees the sleeper and wakes it, or lands before the futex compares and the sleep does not
 * start. */
static _Atomic uint32_t doorbell;
static atomic_int doorbell_sleepers;

void weft__device_doorbell_ring(void)
{
    atomic_fetch_add(&doorbell, 1);
    if (atomic_load(&doorbell_sleepers) > 0) {
        syscall(SYS_futex, (uint32_t *)&doorbell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    }
}

uint32_t weft__device_doorbell_read(void)
{
    return atomic_load(&doorbell);
}

int weft__device_doorbell_wait(uint32_t seen, long timeout_ns)
{
    struct timespec ts = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};

    atomic_fetch_add(&doorbell_sleepers, 1);
    if (atomic_load(&doorbell) == seen) {
        syscall(SYS_futex, (uint32_t *)&doorbell, FUTEX_WAIT, seen, &ts, NULL, 0);
    }
    atomic_fetch_sub(&doorbell_sleepers, 1);
    return atomic_load(&doorbell) != seen;
}

int weft__op_valid_for_dtype(weft_op_t op, weft_dtype_t dtype)
{
    int is_float = dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16 || dtype == WEFT_FLOAT32 ||
                   dtype == WEFT_FLOAT64 || dtype == WEFT_FLOAT8_E4M3 ||
                   dtype == WEFT_FLOAT8_E5M2;

    if ((unsigned)dtype >= WEFT_DTYPE_COUNT || (unsigned)op >= WEFT_OP_COUNT) {
        return 0;
    }
    switch (op) {
    case WEFT_BAND:
    case WEFT_BOR:
    case WEFT_BXOR:
    case WEFT_LAND:
    case WEFT_LOR:
    case WEFT_LXOR:
        return !is_float;
    default:
        return 1;
    }
}
