/*
 * The CUDA driver API, reached through dlopen("libcuda.so.1") and dlsym, so that a libweft built
 * with CUDA has no link-time dependency on libcuda or libcudart and still runs on a machine with
 * no driver. Types and prototypes come from the toolkit's cuda.h; the symbol each function is
 * looked up under is the name cuda.h maps it to (cuMemAlloc -> cuMemAlloc_v2), which is the ABI
 * the toolkit's headers describe.
 *
 * Calls are written as `weft__cu.cuMemAlloc(...)`: cuda.h's macros rename the member the same
 * way as the function, so the member always has the prototype of the symbol it holds.
 *
 * weft__cu_open is called once (from weft__device_cuda_load, itself under pthread_once); the
 * table is read-only afterwards and safe to use from any thread.
 */
#ifndef WEFT_DEVICE_CUDA_DRIVER_H
#define WEFT_DEVICE_CUDA_DRIVER_H

#include <cuda.h>
#include <stddef.h>

#define WEFT__CU_FUNCTIONS(X)                                                                      \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceGetName)                                                                             \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxPushCurrent)                                                                            \
    X(cuCtxPopCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleGetFunction)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuPointerGetAttributes)                                                                      \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemGetAddressRange)                                                                        \
    X(cuMemcpyAsync)                                                                               \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemHostGetDevicePointer)                                                                   \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamQuery)                                                                               \
    X(cuStreamGetCtx)                                                                              \
    X(cuStreamWriteValue32)                                                                        \
    X(cuStreamWaitValue32)                                                                         \
    X(cuLaunchHostFunc)                                                                            \
    X(cuIpcGetMemHandle)                                                                           \
    X(cuIpcOpenMemHandle)                                                                          \
    X(cuIpcCloseMemHandle)

typedef struct {
#define WEFT__CU_MEMBER(fn) __typeof__(fn) *fn;
    WEFT__CU_FUNCTIONS(WEFT__CU_MEMBER)
#undef WEFT__CU_MEMBER
} weft__cu_table_t;

extern weft__cu_table_t weft__cu;

/* Opens libcuda.so.1 and fills weft__cu. Returns 0, or -1 with the reason in why (the library
 * is missing, or lacks a symbol: a driver older than the toolkit). */
int weft__cu_open(char *why, size_t len);

#endif /* WEFT_DEVICE_CUDA_DRIVER_H */
