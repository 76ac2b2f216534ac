/*
 * Internal conventions shared by every module: error reporting, logging,
 * check macros, time. No weft logic lives here.
 *
 * Errors: a failure is reported once, where it is first detected, with
 * weft__error(), which records the thread-local message returned by
 * weft_last_error() and logs it at debug level. Callers propagate the
 * status unchanged.
 *
 * Names:
 *  - Functions and variables: public ones weft_<object>_<verb>, declared in
 *    include/; internal ones shared between files weft__<module>_<name>
 *    (libweft.so exports none of them); static ones need no prefix.
 *  - Types, public or internal: weft_<module>_<object>_t (a struct's tag is
 *    the same name without _t; an ops table ends in _ops_t). A type is not
 *    a symbol: the header that declares it (include/ or a module's own)
 *    says whether it is public. Types private to one .c file need no
 *    prefix.
 *  - Out-parameters (a pointer through which a call returns a value it
 *    sets: a handle, a count, a flag) end in _p and come last; they are
 *    written only on success. Buffers the caller hands in to be filled
 *    (recvbuf, an array of entries, a text buffer with its length) are data,
 *    not out-parameters, and keep their names.
 */
#ifndef WEFT_BASE_BASE_H
#define WEFT_BASE_BASE_H

#include <weft.h>

#include <stdint.h>
#include <stddef.h>

#define WEFT_EXPORT __attribute__((visibility("default")))
#define WEFT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define WEFT_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* In a busy-polling loop, between two polls: tells the core the thread
 * spins (x86 PAUSE, Arm YIELD), so that a hyperthread sibling, which may be
 * the very peer being waited for, keeps the core's resources, and the
 * loop's exit is not a memory-order mis-speculation. */
static inline void weft__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Whether an operation that fails with status breaks its communicator: the
 * breaks column of WEFT_STATUS_MAP (weft__comm_fail uses it). */
int weft__status_breaks_comm(weft_status_t status);

/* Record status and message for weft_last_error(); returns status. */
weft_status_t weft__error(weft_status_t status, const char *fmt, ...) WEFT_PRINTF(2, 3);
/* Forget the last error of this thread (used at API entry). */
void weft__error_clear(void);
/* Put back a message weft_last_error returned earlier (saved by the caller:
 * work that must not change what the application sees). */
void weft__error_restore(const char *saved);
/* The last error's message without its status prefix: what a caller that
 * adds context passes on (it may pass it to weft__error directly). */
const char *weft__error_detail(void);

/*
 * Evaluate expr (a weft_status_t expression); on failure store it in the
 * variable `status` and jump to label. Never returns by itself.
 */
#define WEFT_CHECK_GOTO(expr, label)                                                               \
    do {                                                                                           \
        status = (expr);                                                                           \
        if (WEFT_UNLIKELY(status < 0)) {                                                           \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

typedef enum {
    WEFT_LOG_ERROR,
    WEFT_LOG_WARN,
    WEFT_LOG_INFO,
    WEFT_LOG_DEBUG,
    WEFT_LOG_TRACE
} weft_log_level_t;

extern weft_log_level_t weft__log_level;

void weft__log_write(weft_log_level_t level, const char *file, int line, const char *fmt, ...)
    WEFT_PRINTF(4, 5);
/* The rank printed in this thread's log lines (-1: unknown). */
void weft__log_set_rank(int rank);

#define weft__log(level, ...)                                                                      \
    do {                                                                                           \
        if (WEFT_UNLIKELY((level) <= weft__log_level)) {                                           \
            weft__log_write((level), __FILE__, __LINE__, __VA_ARGS__);                             \
        }                                                                                          \
    } while (0)
#define weft__log_error(...) weft__log(WEFT_LOG_ERROR, __VA_ARGS__)
#define weft__log_warn(...) weft__log(WEFT_LOG_WARN, __VA_ARGS__)
#define weft__log_info(...) weft__log(WEFT_LOG_INFO, __VA_ARGS__)
#define weft__log_debug(...) weft__log(WEFT_LOG_DEBUG, __VA_ARGS__)
#define weft__log_trace(...) weft__log(WEFT_LOG_TRACE, __VA_ARGS__)

/* Monotonic clock in nanoseconds. */
uint64_t weft__time_ns(void);
/* The same clock as of the last timer tick (1-4 ms behind, a fifth of the cost): for deadlines
 * and rate limits that need no finer grain. */
uint64_t weft__time_coarse_ns(void);

#endif /* WEFT_BASE_BASE_H */
