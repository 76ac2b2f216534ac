/*
 * libFuzzer target: weft__coll_tune_load, the WEFT_TUNE rule list
 * ("allreduce:0-4k:recursive_doubling,..."). Every input is loaded, the
 * rules it made are looked up at a few sizes (a refused list must leave no
 * rule behind), then released.
 */
#include "coll/coll.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t sizes[] = {0, 1, 4096, 1u << 20, SIZE_MAX};
    weft_status_t status;
    char *text = malloc(size + 1);

    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    status = weft__coll_tune_load(text);
    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            const weft_coll_algo_t *algo = weft__coll_tune_match((weft_coll_kind_t)k, sizes[s]);

            if (status != WEFT_OK && algo != NULL) {
                abort();
            }
        }
    }
    weft__coll_tune_release();
    free(text);
    return 0;
}
