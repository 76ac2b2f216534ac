/*
 * The algorithm registry: every algorithm of every collective, one row each
 * (UCC's ucc_tl_ucp_allreduce_algs[] is the model). A row carries what the
 * rest of weft needs to know about the algorithm: its name, its builder, its
 * cost model (coll/cost.c) and that model in words, where the ranks must be
 * for it to run, how it copes with other rank counts and in place, and a
 * one-line description.
 *
 * Readers: selection and the cost model (coll/select.c, coll/cost.c) walk
 * the rows of one collective; WEFT_TUNE names rows; weft_info --explain
 * prints them as candidates and weft_info --algorithms as a table, which
 * tests/coll/test_algorithms_doc.sh compares with docs/algorithms.md.
 *
 * Order: the rows of one collective stay together, in preference order
 * (the first wins a tie of predicted times, and weft_info lists them so).
 */
#include "coll/coll.h"
#include "coll/cost.h"
#include "coll/exchange.h"
#include "coll/rooted.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Notation of the models (docs/algorithms.md): n bytes of one rank's
 * vector, p ranks, p' the largest power of two <= p; shared memory: L ranks
 * per node, N nodes, a_s one flag handoff, c seconds per byte copied,
 * r(x) = max(1, ceil(x / WEFT_SHM_SLOT)) rounds. */

const weft_coll_algo_t weft__coll_algos[] = {
    /* allreduce */
    {.name = "recursive_doubling",
     .kind = WEFT_COLL_ALLREDUCE,
     .build = weft__allreduce_recursive_doubling,
     .cost = weft__cost_allreduce_rd,
     .flags = WEFT_COLL_POW2_FOLD,
     .file = "coll/allreduce/recursive_doubling.c",
     .model = "log2 p' (alpha + n beta + n gamma) (+ 2 alpha + 2 n beta + n gamma to fold p != p')",
     .desc = "whole vectors exchanged with r ^ 2^k: latency-optimal, for small n"},
    {.name = "rabenseifner",
     .kind = WEFT_COLL_ALLREDUCE,
     .build = weft__allreduce_rabenseifner,
     .cost = weft__cost_allreduce_rab,
     .flags = WEFT_COLL_POW2_FOLD,
     .file = "coll/allreduce/rabenseifner.c",
     .model = "2 log2 p' alpha + 2 (p'-1)/p' n beta + (p'-1)/p' n gamma (+ fold)",
     .desc = "recursive-halving reduce-scatter + recursive-doubling allgather: medium, large n"},
    {.name = "ring",
     .kind = WEFT_COLL_ALLREDUCE,
     .build = weft__allreduce_ring,
     .cost = weft__cost_allreduce_ring,
     .file = "coll/allreduce/ring.c",
     .model = "2 (p-1) alpha + (p-1)/p n beta + (p-1)/p n max(beta, gamma)",
     .desc = "ring reduce-scatter + ring allgather, pipelined in fragments: large n"},
    {.name = "shm",
     .kind = WEFT_COLL_ALLREDUCE,
     .build = weft__shm_build,
     .cost = weft__cost_shm_allreduce,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "n <= `WEFT_SHM_SMALL`: r(n) a_s + n c + (L-1) n gamma; above: 2 r(n) a_s + 2 n c + "
              "(L-1)/L n gamma",
     .desc = "through the node's segment: small, every rank reduces all; large, one slice each"},
    {.name = "hier",
     .kind = WEFT_COLL_ALLREDUCE,
     .build = weft__hier_build,
     .cost = weft__cost_hier_allreduce,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "min(shm reduce-scatter + rails(best allreduce of n/L on N ranks) + shm allgather, "
              "shm reduce + best allreduce of n on N ranks + shm bcast); rails(x): x, plus (L-1) "
              "times x for 0 bytes where ranks outnumber cores; in k chunks of m = n/k: node(m) "
              "+ rail(m) + (k-1) max(node(m), rail(m)), k (node(m) + rail(m)) where ranks "
              "outnumber cores",
     .desc = "shm reduce-scatter, allreduce of each slice on its rail (all at once), shm "
             "allgather; small n (WEFT_HIER_LEADER): shm reduce, allreduce on one rail, shm "
             "bcast; large n (WEFT_HIER_PIPELINE): the sliced form in chunks, pipelined"},
    {.name = "ordered",
     .kind = WEFT_COLL_ALLREDUCE,
     .build = weft__ordered_build,
     .cost = weft__cost_ordered_allreduce,
     .flags = WEFT_COLL_ORDERED,
     .file = "coll/ordered/ordered.c",
     .model = "2 (p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma",
     .desc = "blocks to their owners, folded in rank order, sent to all"},

    /* reduce_scatter */
    {.name = "ring",
     .kind = WEFT_COLL_REDUCE_SCATTER,
     .build = weft__reduce_scatter_ring,
     .cost = weft__cost_rs_ring,
     .file = "coll/reduce_scatter/ring.c",
     .model = "(p-1) alpha + (p-1)/p n max(beta, gamma)",
     .desc = "partial sums travel around the ring, pipelined in fragments: large n"},
    {.name = "recursive_halving",
     .kind = WEFT_COLL_REDUCE_SCATTER,
     .build = weft__reduce_scatter_recursive_halving,
     .cost = weft__cost_rs_halving,
     .flags = WEFT_COLL_POW2_ONLY,
     .otherwise = "ring",
     .file = "coll/reduce_scatter/recursive_halving.c",
     .model = "log2 p alpha + (p-1)/p n (beta + gamma) (the ring's on other p)",
     .desc = "the window of blocks halves each step (Rabenseifner's first half): small, medium n"},
    {.name = "shm",
     .kind = WEFT_COLL_REDUCE_SCATTER,
     .build = weft__shm_build,
     .cost = weft__cost_shm_rs,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "r(n) a_s + n c + (L-1)/L n gamma",
     .desc = "every rank copies its blocks in, then reduces its own block of every slot"},
    {.name = "hier",
     .kind = WEFT_COLL_REDUCE_SCATTER,
     .build = weft__hier_build,
     .cost = weft__cost_hier_rs,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "min(shm reduce-scatter + rails(best reduce_scatter of n/L on N ranks), shm "
              "reduce + n c + best reduce_scatter of n on N ranks + shm scatter of n/N); in k "
              "chunks of m = n/k: shm reduce-scatter(m) + rail(m) + (k-1) max(shm "
              "reduce-scatter(m), rail(m)), k times the two where ranks outnumber cores",
     .desc = "shm reduce-scatter of each rail's blocks taken from their ranks' places (device "
             "memory: grouped by a local copy first), reduce_scatter on every rail at once; "
             "small n (WEFT_HIER_LEADER): shm reduce, reduce_scatter of the nodes' blocks on one "
             "rail, shm scatter; large n (WEFT_HIER_PIPELINE): the sliced form in pieces of "
             "every block, pipelined"},
    {.name = "ordered",
     .kind = WEFT_COLL_REDUCE_SCATTER,
     .build = weft__ordered_build,
     .cost = weft__cost_ordered_rs,
     .flags = WEFT_COLL_ORDERED,
     .file = "coll/ordered/ordered.c",
     .model = "(p-1) alpha + (p-1)/p n (beta + gamma)",
     .desc = "blocks to their owners, folded in rank order"},

    /* allgather */
    {.name = "ring",
     .kind = WEFT_COLL_ALLGATHER,
     .build = weft__allgather_ring,
     .cost = weft__cost_ag_ring,
     .file = "coll/allgather/ring.c",
     .model = "(p-1) alpha + (p-1)/p n beta",
     .desc = "blocks forwarded around the ring straight into place: bandwidth-optimal, large n"},
    {.name = "recursive_doubling",
     .kind = WEFT_COLL_ALLGATHER,
     .build = weft__allgather_recursive_doubling,
     .cost = weft__cost_ag_log,
     .flags = WEFT_COLL_POW2_ONLY,
     .otherwise = "bruck",
     .file = "coll/allgather/recursive_doubling.c",
     .model = "ceil(log2 p) alpha + (p-1)/p n beta",
     .desc = "the window of blocks doubles each step, no scratch: small n"},
    {.name = "bruck",
     .kind = WEFT_COLL_ALLGATHER,
     .build = weft__allgather_bruck,
     .cost = weft__cost_ag_bruck,
     .file = "coll/allgather/bruck.c",
     .model = "ceil(log2 p) alpha + (p-1)/p n beta + n beta / 4 (the final rotation)",
     .desc = "log steps on any p into scratch, then a local rotation: small n"},
    {.name = "shm",
     .kind = WEFT_COLL_ALLGATHER,
     .build = weft__shm_build,
     .cost = weft__cost_shm_ag,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "n < `WEFT_SHM_CMA_ALLGATHER`: r(n/L) a_s + (n/L + n) c; above: 2 a_s + n c",
     .desc = "every rank copies its block in, then every slot out; large results read from "
             "the peers' buffers"},
    {.name = "hier",
     .kind = WEFT_COLL_ALLGATHER,
     .build = weft__hier_build,
     .cost = weft__cost_hier_ag,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "min(rails(best allgather of n/L on N ranks) + shm allgather, shm gather of "
              "n/N + best allgather of n on N ranks + n c + shm bcast); in k chunks of m = n/k: "
              "shm allgather(m) + rail(m) + (k-1) max(shm allgather(m), rail(m)), k times the "
              "two where ranks outnumber cores",
     .desc = "allgather on every rail at once, shm allgather with each block copied to its "
             "rank's place (device memory: a local copy into rank order after it); small n "
             "(WEFT_HIER_LEADER): shm gather, allgather on one rail, shm bcast; large n "
             "(WEFT_HIER_PIPELINE): the sliced form in pieces of every block, pipelined"},

    /* bcast */
    {.name = "binomial",
     .kind = WEFT_COLL_BCAST,
     .build = weft__bcast_binomial,
     .cost = weft__cost_bcast_binomial,
     .file = "coll/bcast/binomial.c",
     .model = "ceil(log2 p) (alpha + n beta)",
     .desc = "the whole vector down a binomial tree: latency-optimal, small n"},
    {.name = "scatter_allgather",
     .kind = WEFT_COLL_BCAST,
     .build = weft__bcast_scatter_allgather,
     .cost = weft__cost_bcast_scatter_ag,
     .file = "coll/bcast/scatter_allgather.c",
     .model = "(ceil(log2 p) + p - 1) alpha + 2 (p-1)/p n beta",
     .desc = "binomial scatter + ring allgather (van de Geijn): large n"},
    {.name = "shm",
     .kind = WEFT_COLL_BCAST,
     .build = weft__shm_build,
     .cost = weft__cost_shm_bcast,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "r(n) a_s + 2 n c (the single copy from WEFT_SHM_CMA_COPY is not modelled)",
     .desc = "the root copies in, the others copy out; large vectors read from the root's buffer"},
    {.name = "hier",
     .kind = WEFT_COLL_BCAST,
     .build = weft__hier_build,
     .cost = weft__cost_hier_bcast,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "min(shm bcast + rails(best bcast of n/L on N ranks) + shm allgather, best bcast "
              "of n on N ranks + shm bcast); in k chunks of m = n/k: shm bcast(m) + shm "
              "allgather(m) + rail(m) + (k-1) max(shm bcast(m), shm allgather(m), rail(m)), k "
              "times the first three where ranks outnumber cores",
     .desc = "shm bcast on the root's node, a slice down every rail, shm allgather elsewhere; "
             "small n (WEFT_HIER_LEADER): the root's rail carries it all, then a shm bcast "
             "per node; large n (WEFT_HIER_PIPELINE): the sliced form in chunks, pipelined"},

    /* reduce */
    {.name = "binomial",
     .kind = WEFT_COLL_REDUCE,
     .build = weft__reduce_binomial,
     .cost = weft__cost_reduce_binomial,
     .file = "coll/reduce/binomial.c",
     .model = "ceil(log2 p) (alpha + n beta + n gamma)",
     .desc = "the bcast tree run backwards, combining on the way: latency-optimal, small n"},
    {.name = "reduce_scatter_gather",
     .kind = WEFT_COLL_REDUCE,
     .build = weft__reduce_reduce_scatter_gather,
     .cost = weft__cost_reduce_rs_gather,
     .file = "coll/reduce/reduce_scatter_gather.c",
     .model = "2 (p-1) alpha + (p-1)/p n beta + (p-1)/p n max(beta, gamma)",
     .desc = "ring reduce-scatter + every block straight to the root: large n"},
    {.name = "shm",
     .kind = WEFT_COLL_REDUCE,
     .build = weft__shm_build,
     .cost = weft__cost_shm_allreduce,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "as the shm allreduce",
     .desc = "the shm allreduce's rounds, only the root copies out"},
    {.name = "hier",
     .kind = WEFT_COLL_REDUCE,
     .build = weft__hier_build,
     .cost = weft__cost_hier_reduce,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "min(shm reduce-scatter + rails(best reduce of n/L on N ranks) + shm allgather, "
              "shm reduce + best reduce of n on N ranks); in k chunks: as the hier allreduce",
     .desc = "shm reduce-scatter, each slice reduced on its rail to the root's node (all at "
             "once), shm allgather there; small n (WEFT_HIER_LEADER): shm reduce, reduce on "
             "the root's rail; large n (WEFT_HIER_PIPELINE): the sliced form in chunks, "
             "pipelined"},
    {.name = "ordered",
     .kind = WEFT_COLL_REDUCE,
     .build = weft__ordered_build,
     .cost = weft__cost_ordered_allreduce,
     .flags = WEFT_COLL_ORDERED,
     .file = "coll/ordered/ordered.c",
     .model = "as the ordered allreduce",
     .desc = "the ordered reduce-scatter, then every block to the root"},

    /* gather, scatter */
    {.name = "binomial",
     .kind = WEFT_COLL_GATHER,
     .build = weft__gather_binomial,
     .cost = weft__cost_tree_gather,
     .file = "coll/gather/binomial.c",
     .model = "ceil(log2 p) alpha + (p-1)/p n beta",
     .desc = "each subtree's blocks travel up in one message"},
    {.name = "shm",
     .kind = WEFT_COLL_GATHER,
     .build = weft__shm_build,
     .cost = weft__cost_shm_gather,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "r(n/L) a_s + (n/L + n) c (the single copy from WEFT_SHM_CMA_COPY is not modelled)",
     .desc = "every rank copies its block in, the root copies every slot out; large blocks the "
             "root reads from the ranks' buffers"},
    {.name = "hier",
     .kind = WEFT_COLL_GATHER,
     .build = weft__hier_build,
     .cost = weft__cost_hier_gather,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "n/p <= WEFT_HIER_DIRECT: shm gather of n/N + best gather of n on N ranks; "
              "above: shm gather of n/N + (p-L) alpha + (N-1)/N n beta",
     .desc = "shm gather on every node to its rank of the root's rail, gather of the nodes' "
             "blocks on that rail (put in rank order at the root where the nodes' ranks are not "
             "node by node); large blocks: the root's node's through one shm gather, the others "
             "straight to the root"},
    {.name = "binomial",
     .kind = WEFT_COLL_SCATTER,
     .build = weft__scatter_binomial,
     .cost = weft__cost_tree_gather,
     .file = "coll/scatter/binomial.c",
     .model = "ceil(log2 p) alpha + (p-1)/p n beta",
     .desc = "each subtree's blocks travel down in one message"},
    {.name = "shm",
     .kind = WEFT_COLL_SCATTER,
     .build = weft__shm_build,
     .cost = weft__cost_shm_scatter,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "r(n) a_s + (n + n/L) c (the single copy from WEFT_SHM_CMA_COPY is not modelled)",
     .desc = "the root copies a piece of every block into its slot, each rank copies its own out; "
             "large blocks each rank reads from the root's buffer"},
    {.name = "hier",
     .kind = WEFT_COLL_SCATTER,
     .build = weft__hier_build,
     .cost = weft__cost_hier_scatter,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "n/p <= WEFT_HIER_DIRECT: best scatter of n on N ranks + shm scatter of n/N; "
              "above: shm scatter of n/N + (p-L) alpha + (N-1)/N n beta",
     .desc = "the nodes' blocks down the root's rail (grouped by node first where the nodes' "
             "ranks are not node by node), shm scatter on every node from its rank of that "
             "rail; large blocks: the root's node's through one shm scatter, the others "
             "straight from the root"},

    /* alltoall */
    {.name = "pairwise",
     .kind = WEFT_COLL_ALLTOALL,
     .build = weft__alltoall_pairwise,
     .cost = weft__cost_a2a_pairwise,
     .flags = WEFT_COLL_INPLACE_STAGED,
     .file = "coll/alltoall/pairwise.c",
     .model = "(p-1) alpha + (p-1)/p n beta",
     .desc = "one peer to send to and one to receive from per step: large blocks"},
    {.name = "bruck",
     .kind = WEFT_COLL_ALLTOALL,
     .build = weft__alltoall_bruck,
     .cost = weft__cost_a2a_bruck,
     .file = "coll/alltoall/bruck.c",
     .model = "ceil(log2 p) (alpha + n beta)",
     .desc = "log steps, each moving about half the blocks, packed: small blocks"},
    {.name = "shm",
     .kind = WEFT_COLL_ALLTOALL,
     .build = weft__shm_build,
     .cost = weft__cost_shm_a2a,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "n/p < `WEFT_SHM_CMA_ALLTOALL`: r(n) a_s + 2 n c; above: 2 a_s + n c",
     .desc = "every rank copies a piece of every block into its slot, then its pieces out; "
             "large blocks read from the peers' buffers"},
    {.name = "hier",
     .kind = WEFT_COLL_ALLTOALL,
     .build = weft__hier_build,
     .cost = weft__cost_hier_a2a,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "n <= WEFT_HIER_ALLTOALL: N shm alltoalls of n/N + best alltoall of n on N ranks; "
              "above: shm alltoall of n/N + (p-L) alpha + (N-1)/N n beta",
     .desc = "a shm alltoall per node of the blocks for its ranks, then an alltoall of those "
             "groups on every rail at once (put node by node first and in rank order after "
             "where the nodes' ranks are not node by node); large blocks: the node's through one "
             "shm alltoall, the others straight to their ranks"},

    /* barrier */
    {.name = "dissemination",
     .kind = WEFT_COLL_BARRIER,
     .build = weft__barrier_dissemination,
     .cost = weft__cost_barrier_dissemination,
     .file = "coll/barrier/dissemination.c",
     .model = "ceil(log2 p) alpha",
     .desc = "empty messages to r + 2^k in round k"},
    {.name = "shm",
     .kind = WEFT_COLL_BARRIER,
     .build = weft__shm_build,
     .cost = weft__cost_shm_barrier,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "a_s",
     .desc = "every rank publishes its arrival and waits for all; where ranks outnumber cores "
             "the others wait for local rank 0's release instead, so that it leaves first, "
             "unless the operation before was a barrier"},
    {.name = "hier",
     .kind = WEFT_COLL_BARRIER,
     .build = weft__hier_build,
     .cost = weft__cost_hier_barrier,
     .layout = WEFT_COLL_LAYOUT_NODES,
     .file = "coll/hier/hier.c",
     .model = "2 a_s + best barrier on N ranks",
     .desc = "shm barrier, a barrier among one rank per node, shm barrier"},

    /* the v variants */
    {.name = "ring",
     .kind = WEFT_COLL_ALLGATHERV,
     .build = weft__allgatherv_ring,
     .cost = weft__cost_ag_ring,
     .file = "coll/allgatherv/ring.c",
     .model = "(p-1) alpha + (p-1)/p n beta",
     .desc = "the ring allgather with per-rank blocks; empty blocks are not sent"},
    {.name = "shm",
     .kind = WEFT_COLL_ALLGATHERV,
     .build = weft__shm_build,
     .cost = weft__cost_shm_ag,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "n < `WEFT_SHM_CMA_ALLGATHER`: r(n/L) a_s + (n/L + n) c; above: 2 a_s + n c",
     .desc = "the shm allgather with per-rank blocks"},
    {.name = "pairwise",
     .kind = WEFT_COLL_ALLTOALLV,
     .build = weft__alltoallv_pairwise,
     .cost = weft__cost_a2a_pairwise,
     .flags = WEFT_COLL_INPLACE_STAGED,
     .file = "coll/alltoallv/pairwise.c",
     .model = "(p-1) alpha + (p-1)/p n beta",
     .desc = "the pairwise alltoall with per-peer sizes, an empty message where there is none"},
    {.name = "ring",
     .kind = WEFT_COLL_REDUCE_SCATTER_V,
     .build = weft__reduce_scatter_v_ring,
     .cost = weft__cost_rs_ring,
     .file = "coll/reduce_scatter_v/ring.c",
     .model = "(p-1) alpha + (p-1)/p n max(beta, gamma)",
     .desc = "the ring reduce-scatter with per-rank blocks, not cut into fragments"},
    {.name = "shm",
     .kind = WEFT_COLL_REDUCE_SCATTER_V,
     .build = weft__shm_build,
     .cost = weft__cost_shm_rs,
     .layout = WEFT_COLL_LAYOUT_ONE_NODE,
     .file = "coll/shm/ops.c",
     .model = "r(n) a_s + n c + (L-1)/L n gamma",
     .desc = "the shm reduce-scatter with per-rank blocks"},
    {.name = "ordered",
     .kind = WEFT_COLL_REDUCE_SCATTER_V,
     .build = weft__ordered_build,
     .cost = weft__cost_ordered_rs,
     .flags = WEFT_COLL_ORDERED,
     .file = "coll/ordered/ordered.c",
     .model = "(p-1) alpha + (p-1)/p n (beta + gamma)",
     .desc = "the ordered reduce-scatter with per-rank blocks"},
};

const int weft__coll_nalgos = (int)(sizeof(weft__coll_algos) / sizeof(weft__coll_algos[0]));

static const char *const kind_names[WEFT_COLL_KIND_COUNT] = {
    [WEFT_COLL_ALLREDUCE] = "allreduce", [WEFT_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [WEFT_COLL_ALLGATHER] = "allgather", [WEFT_COLL_BCAST] = "bcast",
    [WEFT_COLL_REDUCE] = "reduce",       [WEFT_COLL_GATHER] = "gather",
    [WEFT_COLL_SCATTER] = "scatter",     [WEFT_COLL_ALLTOALL] = "alltoall",
    [WEFT_COLL_BARRIER] = "barrier",     [WEFT_COLL_ALLGATHERV] = "allgatherv",
    [WEFT_COLL_ALLTOALLV] = "alltoallv", [WEFT_COLL_REDUCE_SCATTER_V] = "reduce_scatter_v",
};

const char *weft__coll_kind_name(weft_coll_kind_t kind)
{
    return (unsigned)kind < WEFT_COLL_KIND_COUNT ? kind_names[kind] : "unknown";
}

int weft__coll_kind_reduces(weft_coll_kind_t kind)
{
    return kind == WEFT_COLL_ALLREDUCE || kind == WEFT_COLL_REDUCE ||
           kind == WEFT_COLL_REDUCE_SCATTER || kind == WEFT_COLL_REDUCE_SCATTER_V;
}

weft_status_t weft__coll_kind_parse(const char *name, weft_coll_kind_t *kind_p)
{
    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        if (strcmp(kind_names[k], name) == 0) {
            *kind_p = (weft_coll_kind_t)k;
            return WEFT_OK;
        }
    }
    return WEFT_ERR_INVALID_ARG;
}

const char *weft__coll_layout_name(weft_coll_layout_t layout)
{
    switch (layout) {
    case WEFT_COLL_LAYOUT_ONE_NODE:
        return "one node with shared memory";
    case WEFT_COLL_LAYOUT_NODES:
        return "several nodes of equal rank counts";
    default:
        return "any ranks";
    }
}

const char *weft__coll_algo_constraints(const weft_coll_algo_t *algo, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    if (algo->layout != WEFT_COLL_LAYOUT_ANY) {
        used +=
            (size_t)snprintf(buf + used, len - used, "%s", weft__coll_layout_name(algo->layout));
    }
    if ((algo->flags & WEFT_COLL_POW2_FOLD) && used < len) {
        used += (size_t)snprintf(buf + used, len - used, "%sp not 2^k: fold", used ? "; " : "");
    }
    if ((algo->flags & WEFT_COLL_POW2_ONLY) && used < len) {
        used += (size_t)snprintf(buf + used, len - used, "%sp not 2^k: runs %s", used ? "; " : "",
                                 algo->otherwise);
    }
    if ((algo->flags & WEFT_COLL_INPLACE_STAGED) && used < len) {
        used += (size_t)snprintf(buf + used, len - used, "%sin place: input staged in scratch",
                                 used ? "; " : "");
    }
    if ((algo->flags & WEFT_COLL_ORDERED) && used < len) {
        used +=
            (size_t)snprintf(buf + used, len - used, "%sWEFT_REPRODUCIBLE only", used ? "; " : "");
    }
    if (used == 0) {
        snprintf(buf, len, "any p");
    }
    return buf;
}

/* Each collective's rows, found once: they are contiguous in the table. */
static struct {
    int first;
    int n;
} by_kind[WEFT_COLL_KIND_COUNT];
static pthread_once_t by_kind_once = PTHREAD_ONCE_INIT;

static void index_algos(void)
{
    for (int i = weft__coll_nalgos - 1; i >= 0; i--) {
        weft_coll_kind_t k = weft__coll_algos[i].kind;

        by_kind[k].first = i;
        by_kind[k].n++;
    }
}

const weft_coll_algo_t *weft__coll_algos_of(weft_coll_kind_t kind, int *count_p)
{
    pthread_once(&by_kind_once, index_algos);
    *count_p = (unsigned)kind < WEFT_COLL_KIND_COUNT ? by_kind[kind].n : 0;
    return *count_p > 0 ? &weft__coll_algos[by_kind[kind].first] : NULL;
}

const weft_coll_algo_t *weft__coll_find(weft_coll_kind_t kind, const char *name)
{
    int n;
    const weft_coll_algo_t *rows = weft__coll_algos_of(kind, &n);

    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].name, name) == 0) {
            return &rows[i];
        }
    }
    return NULL;
}
