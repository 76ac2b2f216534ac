/*
 * The UCX transport (pt2pt/ucx) between real processes: the ranks of
 * test_ucx and the helpers its scenarios use (tests/pt2pt/ucx_ranks.c).
 *
 * Each test forks 2-4 children, the ranks. A child creates its own UCX
 * context after fork (optionally with UCX_TLS=tcp), publishes its worker
 * address in an anonymous shared mapping created before fork, meets the
 * others at a barrier in that mapping, builds its endpoint table and runs a
 * scenario. Children never use Criterion: a failed check writes its message
 * to the mapping and exits, and the parent asserts on exit statuses and
 * messages. Children die with the parent (PR_SET_PDEATHSIG) and the parent
 * kills every child still running when it gives up, so nothing survives a
 * failed or timed-out test.
 *
 * Every test runs twice: with UCX's default transports (shared memory here)
 * and with UCX_TLS=tcp.
 */
#ifndef WEFT_TESTS_PT2PT_UCX_RANKS_H
#define WEFT_TESTS_PT2PT_UCX_RANKS_H

#include <criterion/criterion.h>

#include "pt2pt/ucx/ucx.h"
#include "tests/harness.h"

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
#define ADDR_MAX 4096
#define MiB (1024 * 1024)
#define WAIT_NS 20000000000ull     /* any single wait of a child */
#define CHILDREN_NS 40000000000ull /* the whole test, as seen by the parent */
#define DETECT_LIMIT_S 30.0

static const weft_pt2pt_ops_t *const ops = &weft__ucx_ops;

typedef struct shared {
    harness_barrier_t barrier; /* its quorum: the ranks that still take part in barriers */
    atomic_int failed;
    int nranks;
    pid_t pids[MAX_RANKS];
    atomic_int pids_ready; /* pids[] is written (scenarios kill by pid) */
    int killed[MAX_RANKS];
    double detect_s; /* peer-failure detection, measured by the survivor */
    size_t addr_len[MAX_RANKS];
    unsigned char addr[MAX_RANKS][ADDR_MAX];
    char error[MAX_RANKS][512];
} shared_t;

typedef struct rank {
    shared_t *sh;
    int rank;
    int nranks;
    weft_ucx_context_t *ctx;
    void *ep;
} rank_t;

typedef void (*scenario_fn)(rank_t *r);

#define CHECK(r, cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            child_fail((r), __LINE__, __VA_ARGS__);                                                \
        }                                                                                          \
    } while (0)

/* Barrier of the ranks in the quorum. */
void barrier(rank_t *r);
/* Progress until every request is done (freed, set to NULL); statuses to st. */
void wait_all(rank_t *r, void *ep, weft_p2p_req_t **reqs, weft_status_t *st, int n);
weft_status_t wait_one(rank_t *r, void *ep, weft_p2p_req_t *req);
weft_p2p_req_t *post_send(rank_t *r, void *ep, int peer, uint64_t tag, const void *buf,
                          size_t bytes);
weft_p2p_req_t *post_recv(rank_t *r, void *ep, int peer, uint64_t tag, void *buf, size_t bytes);
void send_ok(rank_t *r, void *ep, int peer, uint64_t tag, const void *buf, size_t bytes);
void recv_ok(rank_t *r, void *ep, int peer, uint64_t tag, void *buf, size_t bytes);
/* Deterministic bytes for (seed, index). */
void fill(unsigned char *buf, size_t bytes, uint64_t seed);
/* Index of the first byte that differs from fill(seed), or SIZE_MAX. */
size_t first_diff(const unsigned char *buf, size_t bytes, uint64_t seed);
void *xmalloc(rank_t *r, size_t bytes);
/* Fork nranks children running fn with UCX_TLS=tls (NULL: UCX's default),
 * wait for them, and assert that each exited cleanly or was killed by the
 * scenario. Returns the mapping (unmap with ranks_done). */
shared_t *run_ranks(int nranks, const char *tls, scenario_fn fn);
void ranks_done(shared_t *sh);
/* run_ranks, then ranks_done. */
void run(int nranks, const char *tls, scenario_fn fn);
/* Record rank r's failed check (at line) for the parent and exit the child. */
void child_fail(rank_t *r, int line, const char *fmt, ...) WEFT_PRINTF(3, 4);

#endif /* WEFT_TESTS_PT2PT_UCX_RANKS_H */
