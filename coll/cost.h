/*
 * The cost model behind algorithm selection. Each algorithm's predicted time
 * for n bytes (one rank's whole vector) on p ranks, in alpha-beta-gamma
 * terms: alpha seconds per message, beta seconds per byte moved, gamma
 * seconds per byte reduced. The cheapest algorithm wins unless a WEFT_TUNE
 * rule names one. Parameters come from the configuration and, for
 * communicators between processes, from a measurement at creation that all
 * ranks agree on (weft__cost_measure).
 *
 * Each algorithm's model is a field of its registry row (coll/registry.c),
 * which also carries the model in words for docs/algorithms.md; the
 * formulas follow the cost comments at the top of each algorithm's file.
 * Pipelined ring phases overlap reduction with transfer, so they pay
 * max(beta, gamma) per byte instead of beta + gamma.
 */
#ifndef WEFT_COLL_COST_H
#define WEFT_COLL_COST_H

#include "coll/coll.h"

#include <stdio.h>

typedef struct weft_cost_params {
    double alpha; /* s per message */
    double beta;  /* s per byte moved */
    double gamma; /* s per byte reduced */
    /* where the ranks are: algorithms that need a node's shared memory
     * have a model only where it exists (flat_only: never, for the
     * algorithm run on a rail inside a hierarchical one) */
    int nodes; /* nodes of the communicator */
    int local; /* ranks per node (uniform), 1 when ranks are alone or not uniform */
    int shm;   /* the communicator has shared memory on every node */
    int flat_only;
    int oversubscribed; /* this machine runs more of the ranks than the cores they may run on */
    double shm_alpha;   /* s per flag handoff through shared memory */
    double shm_copy;    /* s per byte copied through shared memory */
    size_t shm_slot;    /* bytes per rank and round */
    size_t shm_small;   /* allreduce/reduce up to this many bytes take one phase */
    size_t shm_cma_a2a; /* alltoall blocks from which the ranks of a node read each
                         * other's buffers (WEFT_SHM_CMA_ALLTOALL; SIZE_MAX: never) */
    size_t shm_cma_ag;  /* allgather results from which they do (WEFT_SHM_CMA_ALLGATHER) */
    int reproducible;   /* reductions only by WEFT_COLL_ORDERED rows, and those only then */
} weft_cost_params_t;

/* From WEFT_COST_ALPHA_US, WEFT_COST_BETA_GBS, WEFT_COST_GAMMA_GBS,
 * WEFT_COST_SHM_ALPHA_US, WEFT_COST_SHM_COPY_GBS; one node, no shared memory. */
void weft__cost_defaults(weft_cost_params_t *params);
/* The parameters of comm: measured ones where they were, its node map, the
 * oversubscription penalty. */
void weft__cost_params(struct weft_comm *comm, weft_cost_params_t *params);
/* One flag handoff through comm's shared-memory segment, seconds, measured
 * between its local ranks 0 and 1 (every local rank calls it; local rank 0
 * answers, the others and ranks without a segment answer 0): measured with
 * alpha when a communicator is created (runtime/world.c), so the two
 * compare. */
double weft__cost_measure_shm_alpha(struct weft_comm *comm);

/* Whether the ranks are where algo's layout needs them (with flat_only, only
 * WEFT_COLL_LAYOUT_ANY fits), and whether the row belongs to the mode
 * (WEFT_COLL_ORDERED rows run only in the reproducible mode; in it, the
 * reductions run only on them). */
int weft__cost_fits(const weft_coll_algo_t *algo, const weft_cost_params_t *params, int nranks);

/* Predicted seconds (0 on one rank), or a negative number when the
 * algorithm cannot run with these parameters (weft__cost_fits). */
double weft__cost_predict(const weft_coll_algo_t *algo, const weft_cost_params_t *params,
                          size_t bytes, int nranks);

/* Whether the hierarchical allreduce, bcast, allgather, reduce_scatter or reduce of n bytes runs
 * its leader form (the whole vector over one rail, coll/hier/hier.c; 0 for the other collectives):
 * WEFT_HIER_LEADER, auto: the cheaper form by these parameters (which every rank of a communicator
 * has alike). */
int weft__cost_hier_leader(const weft_cost_params_t *params, weft_coll_kind_t kind, double n);
/* Bytes per chunk of the pipelined hierarchical allreduce, bcast, reduce, allgather or
 * reduce_scatter of n bytes (its sliced form, coll/hier/hier.c; an allgather's n its result, a
 * reduce_scatter's its input), 0 for one piece or another kind: WEFT_HIER_PIPELINE (a size: chunks
 * of it, grown to make at most WEFT_HIER_PIPELINE_MAX_CHUNKS), auto: the chunk count of 2-64
 * (chunks of at least WEFT_HIER_PIPELINE_MIN_CHUNK bytes) these parameters predict fastest, if any
 * beats one piece. */
size_t weft__cost_hier_pipeline(const weft_cost_params_t *params, weft_coll_kind_t kind, double n);

/* The selection: first matching WEFT_TUNE rule, else the cheapest modelled
 * algorithm (the first registered on ties). With explain != NULL, one line
 * per candidate and the reason for the choice are printed there. */
const weft_coll_algo_t *weft__coll_choose(weft_coll_kind_t kind, size_t bytes, int nranks,
                                          const weft_cost_params_t *params, FILE *explain);

/*
 * The models of the registry's rows (weft_coll_cost_fn; p > 1): point to
 * point, then shared memory inside one node (L = p ranks), then the
 * hierarchical ones (N nodes of L ranks; the best point-to-point model of
 * the collective for n/L bytes on N ranks between the nodes).
 */
typedef double weft_cost_model_fn(const weft_cost_params_t *c, double n, int p);

weft_cost_model_fn weft__cost_allreduce_rd, weft__cost_allreduce_rab, weft__cost_allreduce_ring,
    weft__cost_rs_ring, weft__cost_rs_halving, weft__cost_ag_ring, weft__cost_ag_log,
    weft__cost_ag_bruck, weft__cost_bcast_binomial, weft__cost_bcast_scatter_ag,
    weft__cost_reduce_binomial, weft__cost_reduce_rs_gather, weft__cost_tree_gather,
    weft__cost_a2a_pairwise, weft__cost_a2a_bruck, weft__cost_barrier_dissemination;
weft_cost_model_fn weft__cost_shm_allreduce, weft__cost_shm_rs, weft__cost_shm_ag,
    weft__cost_shm_bcast, weft__cost_shm_barrier, weft__cost_shm_gather, weft__cost_shm_scatter,
    weft__cost_shm_a2a;
weft_cost_model_fn weft__cost_ordered_rs, weft__cost_ordered_allreduce;
weft_cost_model_fn weft__cost_hier_allreduce, weft__cost_hier_bcast, weft__cost_hier_rs,
    weft__cost_hier_ag, weft__cost_hier_barrier, weft__cost_hier_gather, weft__cost_hier_scatter,
    weft__cost_hier_a2a, weft__cost_hier_reduce;

#endif /* WEFT_COLL_COST_H */
