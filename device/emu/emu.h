/*
 * The emulated accelerator (device/emu): "device memory" that is process
 * memory allocated through it (a memfd per allocation, so another process
 * of the node can map it), streams that are worker threads running queued
 * work in order, and flags that streams write and wait on.
 *
 * It exists so that every device code path of weft (memory-type dispatch,
 * staging in the transports, IPC between the processes of a node, stream
 * ordering of _enqueue collectives, asynchronous completion) runs in CI on
 * machines without a GPU. Its arithmetic is the host table's
 * (device/host/reduce.c), run on a stream worker, never in the caller.
 *
 * Internal interface between its files (memory.c: allocations, IPC;
 * stream.c: streams; emu.c: the ops table).
 */
#ifndef WEFT_DEVICE_EMU_EMU_H
#define WEFT_DEVICE_EMU_EMU_H

#include "device/device.h"

/* Memory (memory.c). owns: 1 live, -1 freed (one of the last
 * WEFT_EMU_FREED_KEPT freed allocations), 0 not emu memory (or freed longer
 * ago: its range stays reserved and inaccessible, so a use faults). */
#define WEFT_EMU_FREED_KEPT 4096
int weft__emu_owns(const void *ptr);
/* The next allocation's id (ids count the allocations from 1): while it stays, weft__emu_owns
 * stays 0 for a pointer it was 0 for (device/device.h weft__device_host_epoch). */
uint64_t weft__emu_epoch(void);
/* Entries of the allocation table: live allocations plus the freed ones
 * kept (for tests: bounded in a long job). */
int weft__emu_table_entries(void);
weft_status_t weft__emu_alloc(size_t bytes, void **ptr_p);
/* Emu memory that ipc_export refuses (WEFT_ERR_UNSUPPORTED), as CUDA refuses
 * managed, pool (cudaMallocAsync) and VMM memory: for tests of the paths that
 * stage such buffers through shareable memory. */
weft_status_t weft__emu_alloc_unshareable(size_t bytes, void **ptr_p);
/* 1 when ptr is in live emu memory that ipc_export takes. */
int weft__emu_ipc_capable(const void *ptr);
weft_status_t weft__emu_free(void *ptr);
weft_status_t weft__emu_ipc_export(const void *ptr, void *handle);
weft_status_t weft__emu_ipc_import(const void *handle, void **ptr_p);
void weft__emu_ipc_close(void *ptr);
/* An IPC handle: the exporting process (pid and start time, base/proc.h),
 * the memfd of the allocation in that process, the allocation's id and size
 * and the pointer's offset in it. An importer opens /proc/<pid>/fd/<fd> and
 * maps it only when the process is still the exporter (start time), the file
 * is an emu memfd of its own user and at least size bytes long, and offset is
 * inside size: a handle read from shared memory is data, not trusted. */
typedef struct weft_emu_ipc_handle {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    uint32_t pad;
    uint64_t id;
    uint64_t size;
    uint64_t offset;
    uint64_t start;
} weft_emu_ipc_handle_t;
/* Bytes of an IPC handle. */
#define WEFT_EMU_IPC_HANDLE_SIZE 48
/* Mappings of other processes' memory made by ipc_import and still open
 * (for tests: proof that IPC was really used). */
int weft__emu_ipc_imports_open(void);
/* Imports made since the process started. */
uint64_t weft__emu_ipc_imports_total(void);

/* Streams (stream.c). */
typedef struct weft_emu_stream weft_emu_stream_t;
int weft__emu_stream_owns(void *stream);
/* 1 when stream is the handle of an emu stream that was destroyed. */
int weft__emu_stream_destroyed(void *stream);
weft_status_t weft__emu_stream_create(void **stream_p);
weft_status_t weft__emu_stream_destroy(void *stream);
weft_status_t weft__emu_stream_sync(void *stream);
weft_status_t weft__emu_memcpy_async(void *dst, const void *src, size_t bytes, void *stream);
weft_status_t weft__emu_reduce_async(void *stream, void *dst, const void *const *srcs, int nsrcs,
                                     size_t count, weft_dtype_t dtype, weft_op_t op);
weft_status_t weft__emu_avg_async(void *stream, void *buf, size_t count, weft_dtype_t dtype,
                                  size_t divisor);
weft_status_t weft__emu_write_flag(void *stream, uint32_t *flag, uint32_t value);
weft_status_t weft__emu_wait_flag(void *stream, uint32_t *flag, uint32_t value);
/* the doorbell rung in stream order (weft_device_ops_t.stream_ring) */
weft_status_t weft__emu_ring(void *stream);
/* Streams blocked in a flag wait right now. */
int weft__emu_streams_waiting(void);
/* A device task (the table's stream_task): fn(arg) on the stream's worker. */
weft_status_t weft__emu_task_async(void *stream, void (*fn)(void *), void *arg);
/* 1 on a stream's worker thread: the emu device itself, where copies and
 * reductions run inline instead of on another stream. */
int weft__emu_on_device(void);
/* Calls of the table's thread_bind (emu.c). */
unsigned long weft__emu_thread_binds(void);
/* Pinned host memory freed while a stream waited (emu.c; 0 is right). */
unsigned long weft__emu_frees_while_waiting(void);
/* This thread's internal stream (created on first use, destroyed when the
 * thread exits): the synchronous copy/reduce of the table run there. */
weft_status_t weft__emu_thread_stream(void **stream_p);

#endif /* WEFT_DEVICE_EMU_EMU_H */
