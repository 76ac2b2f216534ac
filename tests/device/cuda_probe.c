/*
 * cuda_probe: loads the CUDA backend the way libweft does and prints "loaded <name>" or
 * "unavailable: <reason>". test_cuda runs it with LD_LIBRARY_PATH pointing at stand-ins for
 * libcuda.so.1 (the toolkit's stub, a library that is not a driver), which must be in place
 * when the process starts.
 */
#include "device/device.h"

#include <stdio.h>

int main(void)
{
    const weft_device_ops_t *ops = weft__device_ops(WEFT_MEM_CUDA);

    if (ops != NULL) {
        printf("loaded %s\n", ops->name);
    } else {
        printf("unavailable: %s\n", weft__device_unavailable(WEFT_MEM_CUDA));
    }
    return 0;
}
