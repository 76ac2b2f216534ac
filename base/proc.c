/* Processes of this machine (base/proc.h). */
#include "base/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The kernel's PF_EXITING task flag (include/linux/sched.h), as
 * /proc/<pid>/stat shows it. */
#define PF_EXITING_FLAG 0x00000004ul

uint64_t weft__proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long start = 0;
    unsigned long flags = 0;
    const char *p;
    char state = 'X';
    size_t n;
    FILE *f;

    if (pid <= 0) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* fields 3 (state), 9 (flags) and 22 (starttime); the name before them
     * may hold ')' */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1,
                            " %c %*d %*d %*d %*d %*d %lu %*u %*u %*u %*u %*u %*u "
                            "%*d %*d %*d %*d %*d %*d %llu",
                            &state, &flags, &start) != 3) {
        return 0;
    }
    /* A process that is exiting (PF_EXITING: set first thing on exit, before
     * its memory, shared-memory segments included, is torn down) is gone
     * already: a peer that finds its segments detached must not take it for
     * a transport error while the kernel is still tearing it down. */
    return state == 'Z' || state == 'X' || (flags & PF_EXITING_FLAG) != 0 ? 0 : start;
}

/* Whether /proc shows this process's start time: 1 yes, -1 no, 0 not asked
 * yet (the answer does not change while the process runs). */
static _Atomic int proc_readable;

int weft__proc_gone(pid_t pid, uint64_t start_time)
{
    int readable = atomic_load_explicit(&proc_readable, memory_order_relaxed);
    uint64_t now;

    if (readable == 0) {
        readable = weft__proc_start_time(getpid()) != 0 ? 1 : -1;
        atomic_store_explicit(&proc_readable, readable, memory_order_relaxed);
    }
    if (pid <= 0) {
        return 0; /* names no process to judge */
    }
    if (start_time == 0 || readable < 0) {
        /* the start time is unknown: only a pid that names nothing is gone */
        return kill(pid, 0) != 0 && errno == ESRCH;
    }
    now = weft__proc_start_time(pid);
    if (now != 0) {
        return now != start_time;
    }
    /* not running: gone, exiting or a zombie (kill still finds the last two) */
    return 1;
}
