/*
 * The CUDA device table (device/device.h's contract), built when configure finds nvcc and
 * registered by device/device.c under WEFT_HAVE_CUDA_BACKEND.
 *
 * weft__device_cuda_load opens the driver (dlopen of libcuda.so.1: libweft has no link-time
 * dependency on CUDA) and initialises it. It returns the table, or NULL with the reason written
 * to why (no libcuda.so.1, a driver older than the toolkit, the toolkit's stub library, cuInit
 * failed, no device). Called once (device.c runs it under pthread_once); not thread-safe by
 * itself. It makes no CUDA context: the first member that needs one takes the context current
 * on the calling thread (after cudaSetDevice) or else device 0's primary context, and loads
 * weft's kernels from the fatbin embedded in the library; when that fails (no kernel image for
 * the GPU), every member fails with that reason. owns never makes a context.
 *
 * The table works in that one context: every call makes it current on the calling thread for
 * its duration (pushing it when another is current) and leaves the thread as it found it.
 */
#ifndef WEFT_DEVICE_CUDA_CUDA_H
#define WEFT_DEVICE_CUDA_CUDA_H

#include "device/device.h"

const weft_device_ops_t *weft__device_cuda_load(char *why, size_t len);

/* The ordinal of the device weft's CUDA context belongs to (set up on first use). */
weft_status_t weft__cuda_device(int *dev_p);

#endif /* WEFT_DEVICE_CUDA_CUDA_H */
