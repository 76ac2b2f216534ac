/*
 * Processes of this machine, as /proc shows them: what a module needs to
 * tell a process it met (a peer rank, the creator of a shared-memory name)
 * from another that was given its pid later.
 *
 * A pid alone names a process only while it runs: once it exits the kernel
 * may hand the pid to a new process. (pid, start time) names one process for
 * as long as the machine runs (start times are clock ticks after boot, and a
 * pid is not reused within one tick in practice), so a module that keeps a
 * pid keeps its start time beside it and compares both.
 *
 * Threading: any thread; every call reads /proc afresh (an open, a read and
 * a close: not for a hot path).
 */
#ifndef WEFT_BASE_PROC_H
#define WEFT_BASE_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* Start time of a running process (clock ticks after boot); 0 when pid is
 * gone, exiting, a zombie, or /proc cannot tell. */
uint64_t weft__proc_start_time(pid_t pid);

/* 1 when pid with that start time is surely gone: the pid names no process,
 * or one that is exiting or a zombie, or another one (a later start time).
 * 0 when it runs. Where the start time is unknown (start_time 0, or /proc
 * cannot tell this process's own), only a pid that names no process at all
 * is gone: a caller that frees what the process left must not guess. */
int weft__proc_gone(pid_t pid, uint64_t start_time);

#endif /* WEFT_BASE_PROC_H */
