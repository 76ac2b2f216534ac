/* Parsers of configuration values, and the storage of the runtime module's
 * settings (filled by the registry, runtime/config.c). */
#include "base/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* before weft_init too: the defaults of the settings read there */
weft_runtime_config_t weft__runtime_config = {
    .cuda_device = -1, .pinned_cache = 256u << 20, .host_copy = 2048};

weft_status_t weft__parse_size(const char *text, int allow_inf, size_t *size_p)
{
    char *end;
    unsigned long long v;
    unsigned long long mult = 1;

    if (allow_inf && strcasecmp(text, "inf") == 0) {
        *size_p = SIZE_MAX;
        return WEFT_OK;
    }
    if (!isdigit((unsigned char)text[0])) {
        return weft__error(WEFT_ERR_INVALID_ARG, "'%s' is not a size (expected e.g. 4096, 4k, 1m)",
                           text);
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    switch (tolower((unsigned char)*end)) {
    case 'k':
        mult = 1ull << 10;
        end++;
        break;
    case 'm':
        mult = 1ull << 20;
        end++;
        break;
    case 'g':
        mult = 1ull << 30;
        end++;
        break;
    default:
        break;
    }
    if (tolower((unsigned char)*end) == 'b') {
        end++;
    }
    if (errno != 0 || *end != '\0' || (v != 0 && mult > SIZE_MAX / v)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "'%s' is not a size (expected e.g. 4096, 4k, 1m)",
                           text);
    }
    *size_p = (size_t)(v * mult);
    return WEFT_OK;
}

weft_status_t weft__config_parse_size(const char *text, void *dst)
{
    return weft__parse_size(text, 0, (size_t *)dst);
}

weft_status_t weft__config_parse_size_inf(const char *text, void *dst)
{
    return weft__parse_size(text, 1, (size_t *)dst);
}

weft_status_t weft__config_parse_int(const char *text, void *dst)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0' || v < INT_MIN || v > INT_MAX) {
        return weft__error(WEFT_ERR_INVALID_ARG, "'%s' is not an integer", text);
    }
    *(int *)dst = (int)v;
    return WEFT_OK;
}

weft_status_t weft__config_parse_double(const char *text, void *dst)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || isnan(v) || v <= 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "'%s' is not a positive number", text);
    }
    *(double *)dst = v;
    return WEFT_OK;
}

weft_status_t weft__config_parse_bool(const char *text, void *dst)
{
    static const char *const yes[] = {"1", "yes", "on", "true"};
    static const char *const no[] = {"0", "no", "off", "false"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *(int *)dst = 1;
            return WEFT_OK;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *(int *)dst = 0;
            return WEFT_OK;
        }
    }
    return weft__error(WEFT_ERR_INVALID_ARG, "'%s' is not a boolean (expected yes or no)", text);
}

weft_status_t weft__config_parse_string(const char *text, void *dst)
{
    char *copy = strdup(text);

    if (copy == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot copy configuration string");
    }
    free(*(char **)dst);
    *(char **)dst = copy;
    return WEFT_OK;
}

weft_status_t weft__config_parse_dump_dir(const char *text, void *dst)
{
    /* room for "/.weft-comm<id>-rank<r>-world<w>.json.<pid>.<n>.tmp" in a path */
    if (strlen(text) > 3900) {
        return weft__error(WEFT_ERR_INVALID_ARG, "a directory name of %zu characters is too long",
                           strlen(text));
    }
    for (const char *p = text; *p != '\0'; p++) {
        if (iscntrl((unsigned char)*p)) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "the directory name contains a control character (byte %d at "
                               "offset %zu)",
                               (int)*p, (size_t)(p - text));
        }
    }
    return weft__config_parse_string(text, dst);
}

weft_status_t weft__config_parse_log_level(const char *text, void *dst)
{
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};

    for (int i = 0; i < 5; i++) {
        if (strcasecmp(text, names[i]) == 0) {
            *(int *)dst = i;
            return WEFT_OK;
        }
    }
    return weft__error(WEFT_ERR_INVALID_ARG,
                       "'%s' is not a log level (expected error, warn, info, debug or trace)",
                       text);
}
