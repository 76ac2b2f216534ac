/*
 * The emu ops table. Its synchronous copy/reduce/avg_finalize queue the work
 * on the calling thread's internal stream and wait for it, so they run on a
 * worker thread as a device's would, never in the caller; called on a
 * worker (by a device task: the device itself) they run inline.
 */
#include "device/emu/emu.h"

#include <stdatomic.h>


#include <stdlib.h>
#include <string.h>

#include "device/host/host.h"

static weft_status_t run_sync(weft_status_t queued, void *stream)
{
    if (queued != WEFT_OK) {
        return queued;
    }
    return weft__emu_stream_sync(stream);
}

static weft_status_t emu_copy(void *dst, const void *src, size_t bytes)
{
    void *st;
    weft_status_t status;

    if (dst == src || bytes == 0) {
        return WEFT_OK;
    }
    if (weft__emu_on_device()) {
        memmove(dst, src, bytes);
        return WEFT_OK;
    }
    status = weft__emu_thread_stream(&st);
    if (status != WEFT_OK) {
        return status;
    }
    return run_sync(weft__emu_memcpy_async(dst, src, bytes, st), st);
}

static weft_status_t emu_reduce(void *dst, const void *const *srcs, int nsrcs, size_t count,
                                weft_dtype_t dtype, weft_op_t op)
{
    void *st;
    weft_status_t status;

    if (weft__emu_on_device()) {
        return weft__host_reduce(dst, srcs, nsrcs, count, dtype, op);
    }
    status = weft__emu_thread_stream(&st);
    if (status != WEFT_OK) {
        return status;
    }
    return run_sync(weft__emu_reduce_async(st, dst, srcs, nsrcs, count, dtype, op), st);
}

static weft_status_t emu_avg_finalize(void *buf, size_t count, weft_dtype_t dtype,
                                      size_t divisor)
{
    void *st;
    weft_status_t status;

    if (weft__emu_on_device()) {
        return weft__host_avg_finalize(buf, count, dtype, divisor);
    }
    status = weft__emu_thread_stream(&st);
    if (status != WEFT_OK) {
        return status;
    }
    return run_sync(weft__emu_avg_async(st, buf, count, dtype, divisor), st);
}

/* Pinned host memory, emulated: a cache line aligned allocation. CUDA's rule
 * comes with it: freeing while a stream waits on a flag is counted and
 * logged (CUDA may deadlock there), so CI sees device/pinned.c keep it. */
static atomic_ulong frees_while_waiting;

static weft_status_t emu_host_alloc(size_t bytes, void **ptr_p)
{
    if (posix_memalign(ptr_p, 64, bytes ? bytes : 1) != 0) {
        return weft__error(WEFT_ERR_NO_MEMORY, "emu: cannot allocate %zu bytes of host memory",
                           bytes);
    }
    return WEFT_OK;
}

static void emu_host_free(void *ptr)
{
    if (weft__emu_streams_waiting() > 0) {
        atomic_fetch_add(&frees_while_waiting, 1);
        weft__log_error("emu: pinned host memory %p freed while a stream waits on a flag (CUDA "
                        "may deadlock there)",
                        ptr);
    }
    free(ptr);
}

/* No context to make current: the calls are counted, for the tests of the threads that must
 * make it (runtime/enqueue.c's progress thread). */
static atomic_ulong thread_binds;

static void emu_thread_bind(void)
{
    atomic_fetch_add(&thread_binds, 1);
}

unsigned long weft__emu_thread_binds(void)
{
    return atomic_load(&thread_binds);
}

unsigned long weft__emu_frees_while_waiting(void)
{
    return atomic_load(&frees_while_waiting);
}

const weft_device_ops_t weft__device_emu_ops = {
    .name = "emu",
    .memtype = WEFT_MEM_EMU,
    .owns = weft__emu_owns,
    .alloc = weft__emu_alloc,
    .free = weft__emu_free,
    .copy = emu_copy,
    .reduce = emu_reduce,
    .avg_finalize = emu_avg_finalize,
    .stream_owns = weft__emu_stream_owns,
    .stream_create = weft__emu_stream_create,
    .stream_destroy = weft__emu_stream_destroy,
    .stream_sync = weft__emu_stream_sync,
    .memcpy_async = weft__emu_memcpy_async,
    .stream_write_flag = weft__emu_write_flag,
    .stream_wait_flag = weft__emu_wait_flag,
    .stream_ring = weft__emu_ring,
    .stream_task = weft__emu_task_async,
    .thread_stream = weft__emu_thread_stream,
    .thread_bind = emu_thread_bind,
    .host_alloc = emu_host_alloc,
    .host_free = emu_host_free,
    .ipc_handle_size = WEFT_EMU_IPC_HANDLE_SIZE,
    .ipc_capable = weft__emu_ipc_capable,
    .ipc_export = weft__emu_ipc_export,
    .ipc_import = weft__emu_ipc_import,
    .ipc_close = weft__emu_ipc_close,
};
