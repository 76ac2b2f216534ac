/*
 * What the soak's two files share (tests/soak/soak.c: the processes, the
 * rounds, the samples; tests/soak/soak_ops.c: the operations and their
 * references): limits, the shared mapping, one rank's state, the checks.
 * A failed check records its message in the rank's slot and ends the rank
 * (_exit(1)); the parent reports it.
 */
#ifndef WEFT_TESTS_SOAK_SOAK_H
#define WEFT_TESTS_SOAK_SOAK_H

#include <weft.h>
#include "tests/soak/proc_sample.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#define MAX_RANKS 8
#define MAXC 1024      /* elements per rank block */
#define BIGC (1 << 17) /* elements of a large allreduce */
#define NSLOTS 3       /* nonblocking operations outstanding at once */
#define GUARD 64       /* elements after a result that must stay untouched */
#define OPS_PER_ROUND 24
#define RSS_LIMIT_KIB 2048 /* 2 MiB */
/* malloc's bytes in use may grow by this much in the second half of the run
 * after warm-up (or by up to half the first half's growth): a leak grows
 * them at a steady rate, so the second half shows it as much as the first,
 * while caches that fill up level off */
#define HEAP_HALF_LIMIT_KIB 128
/* emu allocations made and freed before the run: more than the 4096 freed
 * ones whose table entries weft keeps (docs/device.md) */
#define SOAK_EMU_FILL 4352
#define PAD 0xA5

enum { F_BLOCK, F_NB, F_ENQ, F_COUNT };
static const char *const soak_form_name[F_COUNT] = {"blocking", "nonblocking", "enqueued"};

enum {
    C_ALLREDUCE,
    C_REDUCE,
    C_BCAST,
    C_ALLGATHER,
    C_REDUCE_SCATTER,
    C_ALLTOALL,
    C_BARRIER,
    C_GATHER,
    C_SCATTER,
    C_ALLGATHERV,
    C_ALLTOALLV,
    C_REDUCE_SCATTER_V,
    C_COUNT
};
static const char *const soak_coll_name[C_COUNT] = {
    "allreduce", "reduce", "bcast",   "allgather",  "reduce_scatter", "alltoall",
    "barrier",   "gather", "scatter", "allgatherv", "alltoallv",      "reduce_scatter_v"};

/* ------------------------------------------------------------ shared state */

typedef struct slot {
    char stage[256];  /* what the rank is doing (for hangs and crashes) */
    char error[1024]; /* first failed check */
    int finished;
    uint64_t ops[F_COUNT], p2p, elements, comm_cycles, comm_cycles_warm, aborts;
    int warmed, halfway;
    sample_t warm, end, max;
    long heap_warm, heap_mid, heap_end; /* malloc's bytes in use (KiB) at those points */
    char grown[2048];                   /* descriptors and mappings that appeared after warm-up */
} slot_t;

typedef struct area {
    atomic_int id_ready;
    weft_unique_id_t id;
    slot_t slot[MAX_RANKS];
} area_t;

typedef struct opts {
    double seconds;
    int nranks;
    uint64_t seed;
    int rpn;          /* WEFT_RANKS_PER_NODE, 0: real nodes */
    long churn;       /* > 0: churn mode with this many cycles */
    int limits;       /* 0: report growth without failing on it (under a leak checker) */
    unsigned without; /* W_* parts of the mix left out (--without), to find what grows */
    double every;     /* seconds between a rank's resident-memory lines (--every; 0: none) */
    long leak;        /* bytes each rank allocates and keeps per round (--leak: the check's test) */
} opts_t;

/* Parts of the mix --without leaves out; each becomes a blocking operation on
 * host memory (or, for splits, the dup serves twice). */
enum { W_ABORTS = 1, W_SPLITS = 2, W_EMU = 4, W_NONBLOCKING = 8, W_P2P = 16 };

/* ------------------------------------------------------------ one rank */

typedef struct rk {
    area_t *a;
    slot_t *s;
    const opts_t *o;
    int rank, n;
    weft_comm_t world;
    weft_stream_t stream;
    void *dsend, *drecv; /* emu */
    unsigned char *send[NSLOTS], *recv[NSLOTS];
    size_t bytes; /* of each buffer */
    uint64_t rng; /* the same on every rank: the sequence of operations */
    uint64_t seq;
    double start;
} rk_t;

void soak_stage(rk_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void soak_fail(rk_t *r, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define CHECK(r, cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            soak_fail((r), __LINE__, __VA_ARGS__);                                                 \
        }                                                                                          \
    } while (0)
#define CHECK_OK(r, call)                                                                          \
    do {                                                                                           \
        weft_status_t st_ = (call);                                                                \
        CHECK((r), st_ == WEFT_OK, "%s returned %s: %s", #call, weft_status_string(st_),           \
              weft_last_error());                                                                  \
    } while (0)

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t next(rk_t *r)
{
    r->rng = mix64(r->rng);
    return r->rng;
}

/* Element j of rank q's input to operation `key`: a small integer, so that
 * sums of every dtype are exact. */
static inline int64_t val(uint64_t key, int q, size_t j)
{
    return (int64_t)(mix64(key ^ ((uint64_t)q << 40) ^ (uint64_t)j * 0x100000001b3ull) & 255);
}

/* A per-rank count in 0..c for the v forms. */
static inline size_t vcount(uint64_t key, int q, int d, size_t c)
{
    return (size_t)(mix64(key ^ 0x5bd1e995ull ^ ((uint64_t)q << 20) ^ (uint64_t)d) % (c + 1));
}

/* The round's operations on its dup (work) and split (half), the same
 * draws on every rank (tests/soak/soak_ops.c). */
void soak_round_ops(rk_t *r, weft_comm_t work, weft_comm_t half);

#endif /* WEFT_TESTS_SOAK_SOAK_H */
