/* Status strings and the thread-local last-error message. */
#include "runtime/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static _Thread_local char last_error[512];

WEFT_EXPORT const char *weft_status_string(weft_status_t status)
{
    switch (status) {
#define WEFT__STATUS_CASE(name, value, desc)                                                       \
    case WEFT_##name:                                                                              \
        return desc;
        WEFT_STATUS_MAP(WEFT__STATUS_CASE)
#undef WEFT__STATUS_CASE
    }
    return "unknown status";
}

WEFT_EXPORT const char *weft_last_error(void)
{
    return last_error;
}

void weft__error_clear(void)
{
    last_error[0] = '\0';
}

weft_status_t weft__error(weft_status_t status, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(last_error, sizeof(last_error), "%s: ", weft_status_string(status));

    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(last_error)) {
        vsnprintf(last_error + n, sizeof(last_error) - (size_t)n, fmt, ap);
    }
    va_end(ap);
    weft__log_debug("%s", last_error);
    return status;
}

uint64_t weft__time_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
