/*
 * Collective layer: the algorithm registry (coll/registry.c), selection by
 * the cost model with the WEFT_TUNE override (coll/select.c, coll/cost.c),
 * and the module's configuration.
 *
 * An algorithm is a builder: it turns validated arguments into a schedule
 * (coll/sched.h) and never runs anything itself. Builders see only the
 * pt2pt/device/bootstrap interfaces through the schedule.
 */
#ifndef WEFT_COLL_H
#define WEFT_COLL_H

#include "coll/sched.h"
#include "base/config.h"

typedef enum {
    WEFT_COLL_ALLREDUCE,
    WEFT_COLL_REDUCE_SCATTER,
    WEFT_COLL_ALLGATHER,
    WEFT_COLL_BCAST,
    WEFT_COLL_REDUCE,
    WEFT_COLL_GATHER,
    WEFT_COLL_SCATTER,
    WEFT_COLL_ALLTOALL,
    WEFT_COLL_BARRIER,
    WEFT_COLL_ALLGATHERV,
    WEFT_COLL_ALLTOALLV,
    WEFT_COLL_REDUCE_SCATTER_V,
    WEFT_COLL_KIND_COUNT
} weft_coll_kind_t;

/*
 * Validated arguments, in-place conventions already resolved:
 *  - allreduce: src and dst hold count elements (src == dst in place).
 *  - reduce_scatter: src holds size * count elements, dst receives count
 *    (dst may be src's own slot rank * count, or src itself).
 *  - allgather: dst holds size * count elements; this rank's contribution is
 *    at src (src == dst + rank * count in place).
 *  - bcast: dst holds count elements on every rank (src == dst); root's are
 *    the input.
 *  - reduce: src holds count elements; dst (count elements) is written on
 *    root only (NULL elsewhere); src == dst at root in place.
 *  - gather: src holds count elements; dst (size * count) on root only;
 *    src == dst + root * count at root in place.
 *  - scatter: src (size * count) on root only; dst holds count elements;
 *    dst == src + root * count at root in place.
 *  - alltoall: src and dst hold size * count elements, block r for rank r;
 *    src == dst in place (the algorithm must stage the input itself).
 *  - barrier: no buffers, count 0.
 *  - allgatherv: src holds counts[rank] elements, dst receives rank r's at
 *    dst + displs[r]; src == dst + displs[rank] in place. count: unused.
 *  - alltoallv: block r of src is scounts[r] elements at src + sdispls[r],
 *    block r of dst counts[r] elements at dst + displs[r]; src == dst in place.
 *  - reduce_scatter_v: src holds the sum of counts, block r (counts[r]
 *    elements) at the sum of the counts before it; dst receives counts[rank];
 *    src == dst in place (result at the front).
 * Arrays have size entries, in elements.
 */
typedef struct weft_coll_args {
    weft_coll_kind_t kind;
    const void *src;
    void *dst;
    size_t count;
    weft_dtype_t dtype;
    weft_op_t op;
    size_t esize; /* bytes per element */
    int rank;
    int size;
    int root;
    const size_t *counts;  /* v variants: receive counts */
    const size_t *displs;  /* v variants: receive displacements (NULL for reduce_scatter_v) */
    const size_t *scounts; /* alltoallv: send counts */
    const size_t *sdispls; /* alltoallv: send displacements */
    /* the buffers' device table, where the caller looked it up already (the entry points'
     * checks); NULL: the collective layer looks it up (dst, or src where dst is NULL) */
    const struct weft_device_ops *dev;
} weft_coll_args_t;

typedef weft_status_t (*weft_coll_build_fn)(weft_sched_t *s, const weft_coll_args_t *args);

/* Predicted seconds for n bytes (one rank's vector) on p > 1 ranks with the
 * parameters c (coll/cost.h); called only where the row's layout holds. */
struct weft_cost_params;
typedef double (*weft_coll_cost_fn)(const struct weft_cost_params *c, double n, int p);

/* Where the ranks must be for an algorithm to run: selection offers it only
 * there (forced by WEFT_TUNE elsewhere, the rule is dropped). */
typedef enum {
    WEFT_COLL_LAYOUT_ANY,      /* any communicator */
    WEFT_COLL_LAYOUT_ONE_NODE, /* every rank on one node, with its shared-memory segment */
    WEFT_COLL_LAYOUT_NODES     /* several nodes, the same number (> 1) of ranks and a
                                * shared-memory segment on each */
} weft_coll_layout_t;

/* How an algorithm copes with its inputs (weft_coll_algo_t.flags). */
enum {
    /* p not a power of two: the extra ranks fold in first (coll/allreduce/fold.h) */
    WEFT_COLL_POW2_FOLD = 1u << 0,
    /* p not a power of two: the builder hands the operation to .otherwise */
    WEFT_COLL_POW2_ONLY = 1u << 1,
    /* in place: the input is first copied to scratch */
    WEFT_COLL_INPLACE_STAGED = 1u << 2,
    /* every element is reduced in rank order, grouped alike whatever the
     * placement (coll/ordered/ordered.c): the rows of the reproducible
     * mode, offered only in it (weft__cost_fits) */
    WEFT_COLL_ORDERED = 1u << 3,
};

/*
 * One algorithm of one collective: a row of the registry
 * (weft__coll_algos[], coll/registry.c). Selection, WEFT_TUNE, weft_info
 * (--explain, --algorithms) and the table of docs/algorithms.md all read
 * these rows (tests/coll/test_algorithms_doc.sh keeps the table equal).
 */
typedef struct weft_coll_algo {
    const char *name; /* what WEFT_TUNE, traces and dumps call it */
    weft_coll_kind_t kind;
    weft_coll_build_fn build;
    weft_coll_cost_fn cost;
    weft_coll_layout_t layout;
    unsigned flags;        /* WEFT_COLL_POW2_*, WEFT_COLL_INPLACE_STAGED */
    const char *otherwise; /* with WEFT_COLL_POW2_ONLY: the algorithm run on other p */
    const char *file;      /* the source whose first comment has its idea and cost */
    const char *model;     /* .cost in words (n, p, alpha, beta, gamma as in the docs) */
    const char *desc;      /* one line: what it is and when it wins */
} weft_coll_algo_t;

/* Every algorithm, the rows of one collective together in preference order
 * (the first wins a tie of predicted times). */
extern const weft_coll_algo_t weft__coll_algos[];
extern const int weft__coll_nalgos;

const char *weft__coll_kind_name(weft_coll_kind_t kind);
/* 1 for the reductions: allreduce, reduce, reduce_scatter, reduce_scatter_v. */
int weft__coll_kind_reduces(weft_coll_kind_t kind);
/* The collective named `name` ("allreduce", ...): WEFT_OK, or
 * WEFT_ERR_INVALID_ARG (no error recorded: the caller names its context). */
weft_status_t weft__coll_kind_parse(const char *name, weft_coll_kind_t *kind_p);
/* What a layout needs, in words ("one node with shared memory", ...). */
const char *weft__coll_layout_name(weft_coll_layout_t layout);
/* The constraints of a row in words ("any p", "p not 2^k: fold", ...), as
 * docs/algorithms.md shows them: its layout, flags and .otherwise; returns
 * buf (truncated to len). */
const char *weft__coll_algo_constraints(const weft_coll_algo_t *algo, char *buf, size_t len);

/* The algorithm for kind at `bytes` (the whole vector of one rank: allreduce
 * count, reduce_scatter size*count, allgather size*count elements): the
 * first WEFT_TUNE rule that matches, else the cheapest by the cost model
 * with the configured parameters (coll/cost.h). NULL when no algorithm of
 * that kind is registered. */
const weft_coll_algo_t *weft__coll_select(weft_coll_kind_t kind, size_t bytes, int nranks);
/* The rows of kind in the registry (*count_p of them, NULL when none), in
 * preference order. Thread-safe. */
const weft_coll_algo_t *weft__coll_algos_of(weft_coll_kind_t kind, int *count_p);
/* The algorithm the first matching WEFT_TUNE rule names, or NULL. */
const weft_coll_algo_t *weft__coll_tune_match(weft_coll_kind_t kind, size_t bytes);
/* The algorithm of that name, or NULL. */
const weft_coll_algo_t *weft__coll_find(weft_coll_kind_t kind, const char *name);

/* Parse WEFT_TUNE rules (NULL or "" means none); errors name the bad rule. */
weft_status_t weft__coll_tune_load(const char *rules);
void weft__coll_tune_release(void);

/* Who runs the collectives the calling thread starts now, and how, as WEFT_TRACE names it:
 * NULL for the caller's own call ("call"); the enqueue machinery sets "device task",
 * "progress thread" or a host-staged form around the collectives it runs. */
extern _Thread_local const char *weft__coll_form;
/* Set by the enqueue machinery around a collective it runs as a device task on a stream's thread
 * (runtime/enqueue.c): its waits yield the core from the first empty poll, as where ranks
 * outnumber cores, since the application's threads, which enqueue meanwhile, share the cores. */
extern _Thread_local int weft__coll_on_stream;
/* Nanoseconds a wait of comm's busy-polls before it yields the core between polls: WEFT_SPIN_US,
 * none where ranks outnumber cores or on a stream's thread (weft__coll_on_stream). */
uint64_t weft__coll_spin_ns(const struct weft_comm *comm);

/* Select, build and start the operation (the caller waits for or detaches
 * the schedule), or build, run and destroy it (blocking). */
weft_status_t weft__coll_start(struct weft_comm *comm, const weft_coll_args_t *args,
                               weft_sched_t **sched_p);
/* The same on a host copy of device buffers, args pointing into it: the result is copied
 * out when the schedule completes (weft__sched_stage_out). Takes stage->stage whatever
 * happens (given back at completion, or at once on a failure). */
typedef struct weft_coll_stage {
    const weft_device_ops_t *dev;
    void *stage; /* weft__device_bounce_get of dev */
    void *dst;   /* the caller's result */
    const void *from;
    size_t bytes;
} weft_coll_stage_t;
weft_status_t weft__coll_start_staged(struct weft_comm *comm, const weft_coll_args_t *args,
                                      const weft_coll_stage_t *stage, weft_sched_t **sched_p);
/* A blocking collective (not a v form) of host buffers whose data fits a shared-memory control or
 * wide line (weft__shm_line_fits), or a barrier, of the same count, dtype, op and root as the last
 * one of its kind, which ran that way: run at once (1, its status in *status_p), or 0 when it takes
 * weft__coll_run's way (arguments checked by the caller; src, dst and root as weft__coll_run
 * takes them). */
int weft__coll_line(struct weft_comm *comm, weft_coll_kind_t kind, const void *src, void *dst,
                    size_t count, weft_dtype_t dtype, weft_op_t op, int root, size_t esize,
                    const void *sendbuf, const void *recvbuf, weft_status_t *status_p);
/* 1 when the call is the last one weft__coll_line ran of this kind (it keeps it): the same
 * sendbuf and recvbuf as the caller passes them (before WEFT_IN_PLACE is resolved), count, dtype,
 * op and root, and no device memory allocated since (weft__device_host_epoch). The caller's
 * checks of its arguments would find what they found then: it may skip them, and run it again
 * with weft__coll_line_again (1, its status in *status_p; 0 when it takes weft__coll_run's way). */
int weft__coll_line_kept(struct weft_comm *comm, weft_coll_kind_t kind, const void *sendbuf,
                         const void *recvbuf, size_t count, weft_dtype_t dtype, weft_op_t op,
                         int root);
int weft__coll_line_again(struct weft_comm *comm, weft_coll_kind_t kind, int root,
                          weft_status_t *status_p);
weft_status_t weft__coll_run(struct weft_comm *comm, const weft_coll_args_t *args);

/* Split count elements into nblocks blocks whose sizes differ by at most one:
 * block i starts at element block_start(i). */
static inline size_t weft__block_start(size_t count, int nblocks, int i)
{
    size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks;

    return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

static inline size_t weft__block_count(size_t count, int nblocks, int i)
{
    return weft__block_start(count, nblocks, i + 1) - weft__block_start(count, nblocks, i);
}

/* A size setting given as "auto" (coll/select.c): the code that reads it decides. */
#define WEFT_CONFIG_AUTO (SIZE_MAX - 1)

/* Every single-copy setting's auto takes its form only where the node's single-copy reads were
 * measured at least half as fast as its copies (one read against two copies through the segment:
 * weft_shm_t.cma_fast, coll/shm/segment.c), never elsewhere. */
/* WEFT_SHM_CMA=auto (weft_coll_config_t.shm_cma): single-copy allreduce from
 * WEFT_SHM_CMA_AUTO_FROM bytes where the ranks have a core each, never where they outnumber
 * the cores (coll/shm/ops.c) */
#define WEFT_SHM_CMA_AUTO WEFT_CONFIG_AUTO
#define WEFT_SHM_CMA_AUTO_FROM ((size_t)1 << 20)
/* WEFT_SHM_CMA_COPY=auto (weft_coll_config_t.shm_cma_copy): a host bcast reads the root's buffer
 * from WEFT_SHM_CMA_COPY_AUTO_FROM bytes where the ranks have a core each, never where they
 * outnumber the cores (the root waits for its readers; coll/shm/ops.c) */
#define WEFT_SHM_CMA_COPY_AUTO WEFT_CONFIG_AUTO
#define WEFT_SHM_CMA_COPY_AUTO_FROM ((size_t)32 << 10)
/* WEFT_SHM_CMA_ALLGATHER=auto, WEFT_SHM_CMA_ALLTOALL=auto: from these bytes (an allgather's whole
 * result, an alltoall's block) */
#define WEFT_SHM_CMA_ALLGATHER_AUTO_FROM ((size_t)64 << 10)
#define WEFT_SHM_CMA_ALLTOALL_AUTO_FROM ((size_t)16 << 10)

/* WEFT_HIER_LEADER=auto (weft_coll_config_t.hier_leader): the hierarchical bcast
 * takes whichever form the cost model predicts cheaper (coll/cost.c) */
#define WEFT_HIER_LEADER_AUTO WEFT_CONFIG_AUTO

/* The collective module's settings. */
typedef struct weft_coll_config {
    size_t ring_frag_size; /* bytes per pipelined fragment of ring algorithms */
    int spin_us;           /* busy-polling before a waiting rank yields its core */
    int yield_us;          /* polling with sched_yield before it sleeps */
    double cost_alpha_us;  /* cost model defaults (coll/cost.h) */
    double cost_beta_gbs;
    double cost_gamma_gbs;
    double cost_oversub_us;     /* added to alpha on oversubscribed nodes */
    double cost_oversub_shm_us; /* added to shm_alpha there */
    int cost_measure;           /* measure them at communicator creation */
    double cost_shm_alpha_us;   /* one flag handoff through shared memory */
    double cost_shm_copy_gbs;   /* copy bandwidth where it is not measured */
    int check_args;             /* exchange every operation's signature first (coll/diag/check.h) */
    size_t record_ops;          /* operations the flight recorder keeps (coll/diag/record.h) */
    int shm;                    /* shared-memory collectives inside a node */
    size_t shm_slot;            /* bytes per rank and round in the segment */
    size_t shm_small;           /* one-phase shared-memory allreduce/reduce up to here */
    int device_task;            /* enqueued collectives inside a node as device tasks */
    size_t device_stage;        /* enqueued device collectives across nodes through host
                                 * memory up to here */
    size_t shm_cma;           /* single-copy shared-memory allreduce from here (SIZE_MAX: never) */
    size_t shm_cma_copy;      /* single-copy shared-memory bcast from here */
    size_t shm_cma_allgather; /* single-copy shared-memory allgather from here (the result) */
    size_t shm_cma_alltoall;  /* single-copy shared-memory alltoall from blocks of this size */
    size_t shm_stream;        /* shared-memory allreduce results from here past the caches */
    size_t hier_leader;       /* hierarchical bcast up to here: the root's rail carries it all */
    size_t hier_pipeline;     /* hierarchical sliced collectives in pipelined chunks of this many
                               * bytes (0: one piece) */
    size_t hier_alltoall;     /* hierarchical alltoall offered up to this many bytes per rank */
    size_t hier_direct;       /* hierarchical gather and scatter of larger blocks: direct form */
    size_t hier_alltoall_at_once; /* its large blocks' pairwise steps at once from this size */
    int reproducible;             /* reductions only by WEFT_COLL_ORDERED rows */
} weft_coll_config_t;

extern weft_coll_config_t weft__coll_config;
extern weft_config_table_t weft__coll_config_table;

/* Builders (one file each). */
weft_status_t weft__allreduce_recursive_doubling(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__allreduce_rabenseifner(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__allreduce_ring(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__reduce_scatter_ring(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__allgather_ring(weft_sched_t *s, const weft_coll_args_t *a);

/* Algorithms that need the node map and shared memory (coll/shm/algos.c,
 * coll/hier/hier.c): the same builder for every collective they have; where
 * they cannot run they build the cheapest point-to-point algorithm. */
weft_status_t weft__shm_build(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__hier_build(weft_sched_t *s, const weft_coll_args_t *a);
/* Hierarchical bcast schedules built in the leader form since the process started (tests). */
unsigned long weft__hier_leader_builds(void);
/* Schedules built in the direct form of hierarchical gather and scatter (tests). */
unsigned long weft__hier_direct_builds(void);
/* Hierarchical allreduce, bcast, reduce, allgather and reduce_scatter schedules built in pipelined
 * chunks (WEFT_HIER_PIPELINE; tests). */
unsigned long weft__hier_pipelined_builds(void);
/* The most chunks a pipelined hierarchical collective takes (larger chunks beyond). */
#define WEFT_HIER_PIPELINE_MAX_CHUNKS 64
/* WEFT_HIER_PIPELINE=auto (weft_coll_config_t.hier_pipeline): the chunks the cost model predicts
 * fastest, none of less than WEFT_HIER_PIPELINE_MIN_CHUNK bytes (coll/cost.c) */
#define WEFT_HIER_PIPELINE_AUTO WEFT_CONFIG_AUTO
#define WEFT_HIER_PIPELINE_MIN_CHUNK ((size_t)64 << 10)
/* The ordered reductions of the reproducible mode (allreduce, reduce,
 * reduce_scatter, reduce_scatter_v; coll/ordered/ordered.c). */
weft_status_t weft__ordered_build(weft_sched_t *s, const weft_coll_args_t *a);

/* Bytes that select an algorithm: one rank's whole vector. */
size_t weft__coll_bytes(const weft_coll_args_t *a);

/* The cheapest point-to-point algorithm of kind for a group of nranks of
 * comm (no WEFT_TUNE rule, no shared memory): what hierarchical algorithms
 * run between nodes, and what shared-memory ones fall back to. */
const weft_coll_algo_t *weft__coll_choose_flat(struct weft_comm *comm, weft_coll_kind_t kind,
                                               size_t bytes, int nranks);
/* Whether the hierarchical allreduce, bcast, allgather, reduce_scatter or reduce of bytes on comm
 * runs its leader form (the whole vector over one rail; coll/cost.c decides, alike on every
 * rank). */
int weft__coll_hier_leader(struct weft_comm *comm, weft_coll_kind_t kind, size_t bytes);
/* Bytes per chunk of the pipelined hierarchical allreduce, bcast, reduce, allgather or
 * reduce_scatter (the sliced form) of bytes (weft__coll_bytes) on comm, 0 for one piece or another
 * collective (WEFT_HIER_PIPELINE; auto: coll/cost.c decides, alike on every rank). */
size_t weft__coll_hier_pipeline(struct weft_comm *comm, weft_coll_kind_t kind, size_t bytes);

/* What core calls back in this layer (comm/comm.h): the health of the
 * node's shared memory, the flight recorder's dump when the communicator
 * fails (coll/upcalls.c). Set on every communicator at creation. */
extern const weft_comm_upcalls_t weft__coll_upcalls;

#endif /* WEFT_COLL_H */
