/*
 * Device layer: one ops table per memory type (host, emu, cuda). coll/ and
 * pt2pt/ reach memory only through it, so an algorithm never branches on
 * the memory type: the type is data passed down.
 *
 * Contract of every table:
 *  - copy, reduce and avg_finalize have finished when they return (device
 *    tables run them on their own internal stream and wait for it; emu runs
 *    them on a stream worker thread, never in the caller). copy moves bytes
 *    between memory of this type and host memory in either direction, or
 *    within this type; dst == src is a no-op.
 *  - reduce combines n >= 1 inputs element-wise into dst. dst may be the
 *    same pointer as one of the inputs (in-place accumulate); any other
 *    overlap is undefined. Inputs may be memory of this type or host
 *    memory. Half types (FLOAT16, BFLOAT16) are widened to float, combined,
 *    and rounded once to nearest even. WEFT_AVG combines as a sum; the
 *    caller divides once at the end with avg_finalize.
 *  - inputs combine in index order, ((s0 op s1) op s2) ..., wherever dst
 *    points, so results are bit-identical in place or not; every table must
 *    follow the same rules (device/reduce_elem.h holds the per-element
 *    arithmetic every backend shares): float MIN/MAX give NaN if an input
 *    is NaN and order -0 below +0 (the same bits whatever the operand
 *    order); narrowing a NaN to a half type keeps it a quiet NaN with its
 *    sign.
 *  - one input is a plain copy (LAND/LOR/LXOR do not normalise it to 0/1,
 *    as a one-rank MPI reduction does not).
 *  - avg_finalize of half types divides in float and rounds to the half type.
 *  - the caller has validated dtype/op (weft__op_valid_for_dtype).
 *  - every function is thread-safe.
 *
 * Streams (NULL members in the host table): a stream runs its work in the
 * order it was queued. A device table accepts the streams it creates; the
 * cuda table also accepts any cudaStream_t of the current context. Work
 * queued by these functions returns at once (WEFT_OK means queued); the
 * first failure of queued work is returned by stream_sync.
 *
 * Flags are 32-bit words of host memory that a stream can write (after the
 * work queued before) and wait on (work queued after waits until the word
 * is >= the value); the host reads and writes them with atomics. This is
 * how `_enqueue` collectives join a stream without the host ever blocking
 * on it (runtime/enqueue.c), and why the logic is the same for emu and
 * cuda (cuStreamWriteValue32 / cuStreamWaitValue32 there).
 *
 * IPC: ipc_export describes the allocation holding ptr in a handle of at
 * most WEFT_DEVICE_IPC_MAX bytes (plain bytes, sent to another process of
 * the same node); ipc_import in that process maps it and returns the
 * address of the exported pointer; ipc_close unmaps it. Imports may be
 * cached by the table: close each import once.
 */
#ifndef WEFT_DEVICE_H
#define WEFT_DEVICE_H

#include "base/base.h"

#define WEFT_MEM_TYPE_COUNT 3
#define WEFT_DEVICE_IPC_MAX 96

typedef struct weft_device_ops {
    const char *name;
    weft_memtype_t memtype;
    /* 1 when ptr points into live memory of this type; -1 when it points
     * into memory of this type that was freed (tables that can tell); 0
     * otherwise. Cheap for host pointers: it is asked on every call. */
    int (*owns)(const void *ptr);
    weft_status_t (*alloc)(size_t bytes, void **ptr_p);
    /* ptr: the start of an allocation of this table */
    weft_status_t (*free)(void *ptr);
    weft_status_t (*copy)(void *dst, const void *src, size_t bytes);
    weft_status_t (*reduce)(void *dst, const void *const *srcs, int nsrcs, size_t count,
                            weft_dtype_t dtype, weft_op_t op);
    /* buf[i] /= divisor for WEFT_AVG (integers truncate toward zero) */
    weft_status_t (*avg_finalize)(void *buf, size_t count, weft_dtype_t dtype, size_t divisor);

    /* Streams */
    int (*stream_owns)(void *stream);
    weft_status_t (*stream_create)(void **stream_p);
    weft_status_t (*stream_destroy)(void *stream);
    weft_status_t (*stream_sync)(void *stream);
    weft_status_t (*memcpy_async)(void *dst, const void *src, size_t bytes, void *stream);
    weft_status_t (*stream_write_flag)(void *stream, uint32_t *flag, uint32_t value);
    weft_status_t (*stream_wait_flag)(void *stream, uint32_t *flag, uint32_t value);
    /* Queue a ring of weft's doorbell (weft__device_doorbell_ring) in stream
     * order, after a stream_write_flag the progress thread waits for: it then
     * sleeps until a stream rings instead of napping and looking (emu: the
     * worker rings; CUDA: a host function, cuLaunchHostFunc). NULL: the
     * progress thread looks at this table's flags every few microseconds. */
    weft_status_t (*stream_ring)(void *stream);
    /* Queue fn(arg) on the stream as one device task: it runs in stream
     * order on the device itself, and the device's copies and reductions it
     * asks for (this table's copy, reduce, avg_finalize) run inline, as a
     * kernel's own loads and stores would. Tables whose device cannot run
     * weft's code (CUDA: a kernel form is to come) leave it NULL, and their
     * enqueued operations go through weft's progress thread. */
    weft_status_t (*stream_task)(void *stream, void (*fn)(void *), void *arg);
    /* The calling thread's own stream of the device, made at its first use
     * and kept for the thread's life (weft's blocking calls queue their
     * device tasks there); NULL with stream_task. */
    weft_status_t (*thread_stream)(void **stream_p);

    /* Makes the table's context current on the calling thread and leaves it
     * so: weft's own threads (the progress thread) call it before they drive
     * operations on the table's memory, since UCX with CUDA transports needs
     * a current context for device pointers. NULL: nothing to do. */
    void (*thread_bind)(void);

    /* Host memory the device copies to and from fastest and its streams
     * can read and write as flags (pinned and mapped for CUDA); NULL for
     * tables without streams. Only device/pinned.c calls them: everything
     * else takes flags and staging buffers from there (weft__device_flag_alloc,
     * weft__device_bounce_get), which never frees while a stream may wait. */
    weft_status_t (*host_alloc)(size_t bytes, void **ptr_p);
    void (*host_free)(void *ptr);

    /* IPC. ipc_capable: 1 when ipc_export takes ptr (CUDA: not managed,
     * pool or VMM memory); NULL: every pointer of the table. */
    size_t ipc_handle_size;
    int (*ipc_capable)(const void *ptr);
    weft_status_t (*ipc_export)(const void *ptr, void *handle);
    weft_status_t (*ipc_import)(const void *handle, void **ptr_p);
    void (*ipc_close)(void *ptr);
} weft_device_ops_t;

extern const weft_device_ops_t weft__device_host_ops;
extern const weft_device_ops_t weft__device_emu_ops;

/* The table of a memory type, or NULL when that backend is not built or
 * cannot run here (no CUDA driver, no GPU). */
const weft_device_ops_t *weft__device_ops(weft_memtype_t type);
/* Why weft__device_ops(type) is NULL ("" when it is not). */
const char *weft__device_unavailable(weft_memtype_t type);

/* The table that owns ptr (host when no other claims it). */
const weft_device_ops_t *weft__device_query(const void *ptr);
/* The same for a pointer the user passed as argument `what` of `call`:
 * memory freed through weft_mem_free is WEFT_ERR_INVALID_ARG naming it. */
weft_status_t weft__device_check(const void *ptr, const char *call, const char *what,
                                 const weft_device_ops_t **dev_p);
/* While this is the same nonzero value, weft__device_check says of every pointer it found host
 * memory what it said then: it changes when device memory is allocated (an emu allocation may
 * take an address host memory had), and is 0 (never the same) once the CUDA backend is loaded,
 * whose memory weft does not see being allocated. */
uint64_t weft__device_host_epoch(void);
/* The device table whose stream this is, or an error naming the argument
 * (the stream of no built backend: WEFT_ERR_INVALID_ARG). */
weft_status_t weft__device_stream_check(void *stream, const char *call,
                                        const weft_device_ops_t **dev_p);

/* Pinned host memory and device scratch (device/pinned.c). A flag: one 32-bit word, 0 when
 * handed out, on a cache line of its own, that streams of dev write and wait
 * on (stream_write_flag, stream_wait_flag) and the host reads and writes
 * (weft__device_flag_get/set). A bounce buffer: at least bytes of host memory
 * the device copies to and from fastest. Both come from memory that is
 * reused, and handed back to the driver only while no flag of dev is in use
 * (then no stream of weft's waits: CUDA may deadlock freeing pinned memory
 * while a stream waits for the freeing thread); a flag is in use from alloc
 * to free, which its user calls once no stream reads or writes it any more.
 * Tables without host_alloc: WEFT_ERR_UNSUPPORTED. */
weft_status_t weft__device_flag_alloc(const weft_device_ops_t *dev, uint32_t **flag_p);
void weft__device_flag_free(const weft_device_ops_t *dev, uint32_t *flag);
weft_status_t weft__device_bounce_get(const weft_device_ops_t *dev, size_t bytes, void **ptr_p);
void weft__device_bounce_put(const weft_device_ops_t *dev, void *ptr);
/* Device memory of dev's own allocator (alloc: IPC-capable), cached and
 * freed like bounce buffers. */
weft_status_t weft__device_scratch_get(const weft_device_ops_t *dev, size_t bytes, void **ptr_p);
void weft__device_scratch_put(const weft_device_ops_t *dev, void *ptr);

typedef struct weft_pinned_stats {
    size_t flags_in_use;
    size_t slabs;         /* of flags, allocated so far (never freed) */
    size_t buffer_allocs; /* bounce and scratch buffers allocated from the driver */
    size_t buffer_reuses; /* bounce_get and scratch_get served from the cache */
    size_t buffer_frees;  /* handed back to the driver (beyond WEFT_PINNED_CACHE) */
    size_t cached_bytes;  /* bounce and scratch buffers kept for reuse */
} weft_pinned_stats_t;
/* For tests and weft_info. */
void weft__device_pinned_stats(const weft_device_ops_t *dev, weft_pinned_stats_t *stats_p);

/* Host side of flags: an atomic store that also wakes emu workers waiting
 * on the flag, and an atomic load. */
void weft__device_flag_set(uint32_t *flag, uint32_t value);
uint32_t weft__device_flag_get(const uint32_t *flag);

/* weft's doorbell: a process-wide counter that streams ring (stream_ring) after writing a flag
 * weft's progress thread waits for. The waiter reads it (read), looks at its flags, and sleeps
 * until the count differs from what it read or timeout_ns passed (wait: 1 when rung, 0 when the
 * time ran out). A ring costs an atomic add, and a futex wake only while someone sleeps. */
void weft__device_doorbell_ring(void);
uint32_t weft__device_doorbell_read(void);
int weft__device_doorbell_wait(uint32_t seen, long timeout_ns);

/* 1 when op is defined for dtype (bitwise and logical ops are integer-only). */
int weft__op_valid_for_dtype(weft_op_t op, weft_dtype_t dtype);

/* Backend registration of the cuda table (device/cuda), made by
 * weft__device_init when the backend is built and usable. */
void weft__device_init(void);

#endif /* WEFT_DEVICE_H */
