/*
 * State and helpers shared by the CUDA backend's files (cuda.c: loading, memory, reductions;
 * stream.c: streams, flags, IPC). Everything here is set once by weft__device_cuda_load and
 * read-only afterwards, except what carries its own lock.
 */
#ifndef WEFT_DEVICE_CUDA_INTERNAL_H
#define WEFT_DEVICE_CUDA_INTERNAL_H

#include "device/cuda/driver.h"
#include "device/device.h"

#include <pthread.h>

typedef struct {
    CUcontext ctx;
    CUdevice dev;
    CUmodule module;
    int sm_count;
    unsigned wait_flags; /* cuStreamWaitValue32's: GEQ, with FLUSH where the device can */
    CUfunction reduce[WEFT_DTYPE_COUNT][WEFT_OP_COUNT];
    CUfunction avg[WEFT_DTYPE_COUNT];
    pthread_key_t stream_key; /* the calling thread's internal stream */
} weft__cuda_state_t;

extern weft__cuda_state_t weft__cuda;

/* The embedded kernel image (generated from kernels.cu at build time). */
extern const unsigned char weft__cuda_fatbin[];
extern const unsigned long weft__cuda_fatbin_size;

/* WEFT_OK for CUDA_SUCCESS; else the weft status, with "<what>: <error name> (<text>)". */
weft_status_t weft__cuda_check(CUresult result, const char *what);

/* Sets up weft's context and kernels on first use; WEFT_OK, or why not (no message). */
weft_status_t weft__cuda_ready(void);

/* Makes weft's context current on this thread; *pushed_p tells weft__cuda_leave to pop it. */
weft_status_t weft__cuda_enter(int *pushed_p, const char *what);
void weft__cuda_leave(int pushed);

/* The calling thread's internal stream (created on first use); call between enter/leave. */
weft_status_t weft__cuda_internal_stream(CUstream *stream_p, const char *what);

/* Waits for stream, polling, until WEFT_TIMEOUT (WEFT_ERR_TIMEOUT) or the stream's error. */
weft_status_t weft__cuda_wait(CUstream stream, const char *what);

/* 1 when ptr is device memory (CU_MEMORYTYPE_DEVICE), 0 otherwise (host, pinned, unknown). */
int weft__cuda_is_device(const void *ptr);

/* stream.c: the stream, flag and IPC members of the table */
int weft__cuda_stream_owns(void *stream);
weft_status_t weft__cuda_stream_create(void **stream_p);
weft_status_t weft__cuda_stream_destroy(void *stream);
weft_status_t weft__cuda_stream_sync(void *stream);
weft_status_t weft__cuda_memcpy_async(void *dst, const void *src, size_t bytes, void *stream);
/* Pinned host memory (staging through the transports). */
weft_status_t weft__cuda_host_alloc(size_t bytes, void **ptr_p);
void weft__cuda_host_free(void *ptr);
weft_status_t weft__cuda_stream_write_flag(void *stream, uint32_t *flag, uint32_t value);
weft_status_t weft__cuda_stream_wait_flag(void *stream, uint32_t *flag, uint32_t value);
weft_status_t weft__cuda_stream_ring(void *stream);
weft_status_t weft__cuda_ipc_export(const void *ptr, void *handle);
weft_status_t weft__cuda_ipc_import(const void *handle, void **ptr_p);
void weft__cuda_ipc_close(void *ptr);

#endif /* WEFT_DEVICE_CUDA_INTERNAL_H */
