/*
 * weft between real processes, bootstrapped with a unique id (no mpirun):
 * the job machinery of test_multiproc (tests/runtime/multiproc_job.c) that
 * its scenarios (test_multiproc.c, test_multiproc_shm.c) run on.
 *
 * The test process is rank 0: it calls weft_init, forks children for
 * ranks 1..n-1, then calls weft_get_unique_id (which starts the bootstrap
 * root in it), hands the id to the children through the shared mapping and
 * joins with weft_comm_init_rank. No communicator exists before fork, so no
 * UCX state is inherited; the children inherit weft's configuration
 * (WEFT_TIMEOUT, UCX_TLS, ... are set before weft_init). The forks come
 * before the root's thread exists: UCX installs its memory hooks when libucs
 * loads, and they hold a lock around every mmap and munmap; a child forked
 * while another thread of the parent held it would hang in ucp_init.
 *
 * Children never use Criterion. They record where they are and what went
 * wrong in an anonymous shared mapping made before fork, and exit: 0 when
 * every check passed. They die with the parent (PR_SET_PDEATHSIG). The
 * parent records its own failures in the same mapping (a failed check of
 * rank 0 longjmps back to the harness), reaps every child before a
 * deadline, SIGKILLs what is left (a watchdog thread does so too, in case
 * rank 0 itself is stuck in a call) and only then asserts, so nothing
 * survives a test (forking, reaping and killing: tests/harness.h).
 * Latencies are measured with CLOCK_MONOTONIC, which is shared by every
 * process of the machine.
 *
 * Every Criterion test runs in its own process, so each has a fresh weft.
 * WEFT_LOG_LEVEL is left as the caller set it (WEFT_LOG_LEVEL=debug shows
 * the bootstrap and transport at work).
 */
#ifndef WEFT_TESTS_RUNTIME_MULTIPROC_H
#define WEFT_TESTS_RUNTIME_MULTIPROC_H

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <weft.h>

#include "tests/harness.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4
#define MSG_BYTES 1024
#define NVALS 8
#define GUARD 8 /* elements of canary after every buffer */

/* ------------------------------------------------------------ shared state */

typedef struct rank_slot {
    char stage[128];       /* what the rank is doing (for hangs and crashes) */
    char error[MSG_BYTES]; /* first failed check */
    char note[MSG_BYTES];  /* scenario-specific text, e.g. an error message */
    int finished;          /* reached the end of its body */
    double val[NVALS];     /* scenario measurements */
    int st[NVALS];         /* scenario statuses */
} rank_slot_t;

typedef struct shared {
    atomic_int failed;   /* some rank recorded an error */
    double kill_time;    /* CLOCK_MONOTONIC seconds when a rank killed itself */
    pid_t holder;        /* a process that outlives the killed rank, or 0 (section 7) */
    atomic_int settled;  /* survivors whose call saw the failure (section 7) */
    atomic_int arrived;  /* ranks past a scenario's first phase (a rank that dies waits) */
    atomic_int id_ready; /* rank 0 wrote the job's unique id below */
    weft_unique_id_t id;
    char id_text[WEFT_UNIQUE_ID_STRLEN + 1];
    rank_slot_t slot[MAX_RANKS];
} shared_t;

typedef struct rank_ctx rank_ctx_t;
typedef void (*rank_fn)(rank_ctx_t *r);

typedef struct job_opts {
    int nranks;
    const char *timeout; /* WEFT_TIMEOUT */
    const char *ucx_tls; /* UCX_TLS, or NULL for UCX's default */
    const char *tune;    /* WEFT_TUNE, or NULL for none */
    const char *rpn;     /* WEFT_RANKS_PER_NODE, or NULL for real nodes */
    const char *frag;    /* WEFT_STAGE_FRAG, or NULL for the default */
    const char *env[4];  /* up to two more settings, name and value each, or NULLs */
    int env_world;       /* children join through the environment and weft_comm_world */
    rank_fn scenario;    /* run by every rank on its communicator */
    rank_fn body;        /* instead of join + scenario + destroy (children still finalize) */
    int expect_killed;   /* rank that must end by SIGKILL, or -1 (0 is never) */
    double limit_s;      /* the whole job, as seen by the parent */
} job_opts_t;

struct rank_ctx {
    shared_t *sh;
    const job_opts_t *o;
    int rank;
    int nranks;
    int is_parent;
    jmp_buf *jb; /* rank 0 only */
    weft_unique_id_t id;
    char id_text[WEFT_UNIQUE_ID_STRLEN + 1];
    weft_comm_t comm;
};

/* Where rank r is (for hangs and crashes), and scenario-specific text. */
void stage(rank_ctx_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void note(rank_ctx_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record the failure; a child exits, rank 0 jumps back to the harness. */
void rank_fail(rank_ctx_t *r, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define CHECK(r, cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            rank_fail((r), __LINE__, __VA_ARGS__);                                                 \
        }                                                                                          \
    } while (0)

/* A weft call that must succeed. */
#define CHECK_OK(r, call)                                                                          \
    do {                                                                                           \
        weft_status_t st_ = (call);                                                                \
        CHECK((r), st_ == WEFT_OK, "%s returned %s: %s", #call, weft_status_string(st_),           \
              weft_last_error());                                                                  \
    } while (0)

void *xmalloc(rank_ctx_t *r, size_t bytes);
/* Clear what a caller's shell might have set that changes what is tested
 * (WEFT_LOG_LEVEL stays), then set these (NULL: unset). */
void prepare_env(const char *timeout, const char *ucx_tls, const char *tune, const char *rpn);
/* Run the job; the shared mapping stays for the caller to read (unmapped at exit). */
shared_t *run_job(const job_opts_t *o);

/* test_multiproc.c: the value of element j of rank q's input (seed), the
 * reduction of n ranks' inputs, and the correctness scenario of section 1. */
int64_t gen(weft_dtype_t dt, uint64_t seed, int q, size_t j);
int64_t reduced(weft_dtype_t dt, weft_op_t op, uint64_t seed, int n, size_t j);
void coll_scenario(rank_ctx_t *r);

#endif /* WEFT_TESTS_RUNTIME_MULTIPROC_H */
