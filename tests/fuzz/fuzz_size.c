/*
 * libFuzzer target: weft__parse_size, the size syntax of WEFT_* variables and
 * WEFT_TUNE ranges ("4096", "4k", "1MB", "inf"). The first byte picks
 * allow_inf, the rest is the text. A success must be a number that the
 * digits and suffix give exactly; a failure must leave the output untouched
 * and say why.
 */
#include "runtime/config.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t value = 12345, digits = 0;
    unsigned long long expect;
    weft_status_t status;
    int allow_inf;
    char *text;

    if (size == 0) {
        return 0;
    }
    allow_inf = data[0] & 1;
    text = malloc(size);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    status = weft__parse_size(text, allow_inf, &value);
    if (status != WEFT_OK) {
        if (value != 12345 || weft_last_error()[0] == '\0') {
            abort();
        }
        free(text);
        return 0;
    }
    if (allow_inf && strcasecmp(text, "inf") == 0) {
        if (value != SIZE_MAX) {
            abort();
        }
        free(text);
        return 0;
    }
    /* digits, then at most one of k/m/g, then at most one b */
    expect = 0;
    while (isdigit((unsigned char)text[digits])) {
        expect = expect * 10 + (unsigned long long)(text[digits] - '0');
        digits++;
    }
    switch (tolower((unsigned char)text[digits])) {
    case 'k':
        expect <<= 10;
        break;
    case 'm':
        expect <<= 20;
        break;
    case 'g':
        expect <<= 30;
        break;
    default:
        break;
    }
    if (digits == 0 || value != expect) {
        abort();
    }
    free(text);
    return 0;
}
