/*
 * libFuzzer target: weft_unique_id_from_string, the text form of a unique id
 * that processes receive from outside (WEFT_UNIQUE_ID, a framework's own
 * channel). An accepted text must print back to itself (hex digits compared
 * without case); a refused one must leave the id untouched.
 */
#include "base/base.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    weft_unique_id_t id, before;
    char back[sizeof(id.internal) * 2 + 1];
    char *text = malloc(size + 1);

    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    memset(&id, 0xa5, sizeof(id));
    before = id;
    if (weft_unique_id_from_string(text, &id) != WEFT_OK) {
        if (memcmp(&id, &before, sizeof(id)) != 0) {
            abort();
        }
    } else if (weft_unique_id_to_string(&id, back, sizeof(back)) != WEFT_OK ||
               strcasecmp(back, text) != 0) {
        abort();
    }
    free(text);
    return 0;
}
