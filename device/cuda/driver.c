/* dlopen of the CUDA driver: see driver.h. */
#include "device/cuda/driver.h"

#include <dlfcn.h>
#include <stdio.h>

weft__cu_table_t weft__cu;

/* the symbol name cuda.h maps a function to, macros expanded */
#define WEFT__CU_STR(x) #x
#define WEFT__CU_SYMBOL(fn) WEFT__CU_STR(fn)

int weft__cu_open(char *why, size_t len)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL) {
        snprintf(why, len, "cannot load the CUDA driver library libcuda.so.1 (%s)", dlerror());
        return -1;
    }
#define WEFT__CU_LOAD(fn)                                                                          \
    weft__cu.fn = (__typeof__(fn) *)dlsym(lib, WEFT__CU_SYMBOL(fn));                               \
    if (weft__cu.fn == NULL) {                                                                     \
        snprintf(why, len,                                                                         \
                 "the CUDA driver libcuda.so.1 lacks %s: the driver is older than CUDA %d.%d, "    \
                 "which weft was built with",                                                      \
                 WEFT__CU_SYMBOL(fn), CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);              \
        dlclose(lib);                                                                              \
        return -1;                                                                                 \
    }
    WEFT__CU_FUNCTIONS(WEFT__CU_LOAD)
#undef WEFT__CU_LOAD
    /* kept open for the life of the process: the table points into it */
    return 0;
}
