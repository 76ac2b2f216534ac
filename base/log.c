/*
 * Logging: one line per message, prefixed with host, pid and rank, written
 * with a single write(2) so lines of concurrent threads do not interleave.
 */
#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

weft_log_level_t weft__log_level = WEFT_LOG_WARN;

static _Thread_local int log_rank = -1;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

void weft__log_set_rank(int rank)
{
    log_rank = rank;
}

void weft__log_write(weft_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    char host[64] = "?";
    char buf[1024];
    const char *base = strrchr(file, '/');
    va_list ap;
    int n;

    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    n = snprintf(buf, sizeof(buf), "[%s:%d:%d] weft %s %s:%d ", host, (int)getpid(), log_rank,
                 level_names[level], base ? base + 1 : file, line);
    if (n < 0 || (size_t)n >= sizeof(buf)) {
        return;
    }
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if ((size_t)n >= sizeof(buf) - 1) {
        n = (int)sizeof(buf) - 2;
    }
    buf[n++] = '\n';
    if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
        /* nothing sensible to do if stderr is gone */
    }
}
