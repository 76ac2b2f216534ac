/* Status strings and names, which statuses break a communicator, and the
 * thread-local last-error message. */
#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Thread_local char last_error[512];
static _Thread_local int last_detail; /* where the message after "status: " starts */

WEFT_EXPORT const char *weft_status_string(weft_status_t status)
{
    switch (status) {
#define WEFT__STATUS_CASE(name, value, breaks, desc)                                               \
    case WEFT_##name:                                                                              \
        return desc;
        WEFT_STATUS_MAP(WEFT__STATUS_CASE)
#undef WEFT__STATUS_CASE
    }
    return "unknown status";
}

WEFT_EXPORT const char *weft_status_name(weft_status_t status)
{
    switch (status) {
#define WEFT__STATUS_NAME(name, value, breaks, desc)                                               \
    case WEFT_##name:                                                                              \
        return "WEFT_" #name;
        WEFT_STATUS_MAP(WEFT__STATUS_NAME)
#undef WEFT__STATUS_NAME
    }
    return "unknown";
}

int weft__status_breaks_comm(weft_status_t status)
{
    switch (status) {
#define WEFT__STATUS_BREAKS(name, value, breaks, desc)                                             \
    case WEFT_##name:                                                                              \
        return breaks;
        WEFT_STATUS_MAP(WEFT__STATUS_BREAKS)
#undef WEFT__STATUS_BREAKS
    }
    return 0;
}

WEFT_EXPORT const char *weft_last_error(void)
{
    return last_error;
}

void weft__error_clear(void)
{
    last_error[0] = '\0';
    last_detail = 0;
}

void weft__error_restore(const char *saved)
{
    const char *colon = strstr(saved, ": ");

    snprintf(last_error, sizeof(last_error), "%s", saved);
    last_detail = colon != NULL ? (int)(colon - saved) + 2 : 0;
    if ((size_t)last_detail > strlen(last_error)) {
        last_detail = 0;
    }
}

const char *weft__error_detail(void)
{
    return last_error + last_detail;
}

weft_status_t weft__error(weft_status_t status, const char *fmt, ...)
{
    va_list ap;
    char detail[sizeof(last_error)];
    int n;

    /* formatted first: the arguments may be the last message itself (a
     * caller adding context to weft__error_detail()) */
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    n = snprintf(last_error, sizeof(last_error), "%s: ", weft_status_string(status));
    last_detail = n > 0 && (size_t)n < sizeof(last_error) ? n : 0;
    snprintf(last_error + last_detail, sizeof(last_error) - (size_t)last_detail, "%s", detail);
    weft__log_debug("%s", last_error);
    return status;
}

uint64_t weft__time_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t weft__time_coarse_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
