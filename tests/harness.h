/*
 * What the tests share: forking ranks that die with the test process,
 * reaping them before a deadline and killing what overstays it, a barrier
 * between processes in a shared mapping, small helpers (clock, sleep,
 * environment, message building), the deferred failure log behind EXPECT,
 * the random generator (tests/harness_rng.h) and the reset of every WEFT_*
 * setting the configuration registry declares.
 *
 * No Criterion in harness.c: children must never use it (they report through
 * the shared mapping and their exit status), and the parent asserts on what
 * these functions return; only HARNESS_ASSERT_NO_FAILURES expands to
 * Criterion assertions, in the test that uses it. Every wait takes a
 * deadline in harness_now_s() seconds (CLOCK_MONOTONIC, the same clock in
 * every process of the machine).
 *
 * Threading: one thread of the test process forks, polls and reaps; any
 * thread may record a failure.
 */
#ifndef WEFT_TESTS_HARNESS_H
#define WEFT_TESTS_HARNESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/harness_rng.h"

#define HARNESS_MAX_PROCS 16

/* CLOCK_MONOTONIC in seconds. */
double harness_now_s(void);
/* Sleep s seconds (through signals). */
void harness_sleep_s(double s);

/* A zeroed anonymous mapping shared with the children forked after it, or
 * NULL (errno set). Unmap with munmap(p, bytes). */
void *harness_shared(size_t bytes);

/* setenv(name, value), or unsetenv(name) when value is NULL; 0 or -1. */
int harness_set_env(const char *name, const char *value);

/*
 * Unset WEFT_CONFIG_FILE and every WEFT_<NAME> of the configuration registry
 * (each module's table, as weft_info -c lists them) except `keep` (a full
 * name such as "WEFT_LOG_LEVEL", or NULL), so that what the caller's shell
 * set changes nothing a test checks; a setting added to a table is reset
 * without a change here. Call it before weft_init, then set what the test
 * needs. Returns 0, or -1 when the registry could not be listed (errno set).
 */
int harness_reset_env(const char *keep);

/* Append printf-style to buf (cap bytes, len used, always terminated);
 * returns the new length, at most cap - 1 once full. */
size_t harness_append(char *buf, size_t cap, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

enum { HARNESS_RUNNING = 0, HARNESS_EXITED = 1, HARNESS_KILLED = 2 };

/* The children of one job: rank r is pid[r] (0 for a rank not forked, such
 * as rank 0 when the test process is it). */
typedef struct harness_procs {
    int n; /* ranks of the job */
    pid_t pid[HARNESS_MAX_PROCS];
    int state[HARNESS_MAX_PROCS];   /* HARNESS_*: EXITED by itself, KILLED by harness_reap */
    int wstatus[HARNESS_MAX_PROCS]; /* waitpid status once not RUNNING */
} harness_procs_t;

/* Runs in the child as rank `rank`; its return value is the child's exit
 * status (it may _exit itself). */
typedef int (*harness_child_fn)(int rank, void *arg);

/*
 * Fork ranks first..n-1 (first is 0, or 1 when the test process is rank 0),
 * after flushing stdio. Each child is killed when the test process dies
 * (PR_SET_PDEATHSIG), exits 3 when its parent is already gone, else runs
 * fn(rank, arg) and exits with its result. Returns 0; on a failed fork, -1
 * (errno set) once the children already forked are killed and reaped.
 * n must be at most HARNESS_MAX_PROCS.
 */
int harness_fork(harness_procs_t *p, int first, int n, harness_child_fn fn, void *arg);
/* Reap the children that ended, without waiting: how many still run. */
int harness_poll(harness_procs_t *p);
/* SIGKILL every child still running (not reaped). */
void harness_kill(harness_procs_t *p);
/* Wait for every child until deadline; SIGKILL and reap the ones left
 * (their state becomes HARNESS_KILLED). Returns how many were killed. */
int harness_reap(harness_procs_t *p, double deadline);

/* Whether rank r ended by exit(0). */
int harness_exited_ok(const harness_procs_t *p, int r);

/* A reusable barrier among `quorum` processes, in a shared mapping. A
 * process that leaves the job lowers quorum (atomic_fetch_sub) after its
 * last barrier. */
typedef struct harness_barrier {
    atomic_int arrived;
    atomic_int generation;
    atomic_int quorum;
} harness_barrier_t;

void harness_barrier_init(harness_barrier_t *b, int quorum);
/* 0 once every process of the quorum arrived; -1 at the deadline or when
 * idle (called between polls, NULL: none; it may progress a transport)
 * returns nonzero. */
int harness_barrier_wait(harness_barrier_t *b, double deadline, int (*idle)(void *arg), void *arg);

/*
 * The deferred failure log of one test process: checks on any thread record
 * what failed and go on; the test's main thread asserts at the end that
 * nothing did. The first HARNESS_FAILS_KEPT messages are kept, each prefixed
 * with the line that recorded it; every failure is counted.
 */
#define HARNESS_FAILS_KEPT 16
#define HARNESS_FAIL_CHARS 768

void harness_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Failures recorded so far. */
int harness_fail_count(void);
/* The i-th kept message (i < HARNESS_FAILS_KEPT); "" when none. */
const char *harness_fail_message(int i);

/* Record a failure unless cond holds (the test goes on). */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            harness_fail(__LINE__, __VA_ARGS__);                                                   \
        }                                                                                          \
    } while (0)
#define HARNESS_FAIL(...) harness_fail(__LINE__, __VA_ARGS__)

/* In a Criterion test's main thread: log every kept message, then fail the
 * test when anything was recorded. */
#define HARNESS_ASSERT_NO_FAILURES()                                                               \
    do {                                                                                           \
        for (int i_ = 0; i_ < harness_fail_count() && i_ < HARNESS_FAILS_KEPT; i_++) {             \
            cr_log_error("%s", harness_fail_message(i_));                                          \
        }                                                                                          \
        cr_assert_eq(harness_fail_count(), 0, "%d check(s) failed; first: %s",                     \
                     harness_fail_count(), harness_fail_message(0));                               \
    } while (0)

#endif /* WEFT_TESTS_HARNESS_H */
