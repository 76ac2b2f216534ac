/*
 * Hierarchical collectives: shared memory inside each node, point-to-point
 * between nodes, with every local rank working on its own slice over its
 * own rail (the ranks with the same local rank on every node), so all the
 * rails carry traffic at once. N nodes of L ranks, n bytes:
 *
 *   allreduce:  shm reduce-scatter (slice q to local rank q)
 *               -> allreduce of slice q among rail q (any point-to-point
 *                  algorithm, chosen by the cost model for N ranks, n/L bytes)
 *               -> shm allgather of the slices
 *   bcast:      root's node: shm bcast -> rail q broadcasts slice q from the
 *               root's node -> other nodes: shm allgather of the slices
 *   reduce:     shm reduce-scatter -> reduce of slice q on rail q to the
 *               root's node -> shm allgather there
 *   reduce_scatter: shm reduce-scatter (rail q's blocks, taken from their
 *               ranks' places, to local rank q; device memory: a local copy
 *               grouping them first) -> reduce_scatter among rail q
 *   allgather:  allgather among rail q -> shm allgather, each block to its
 *               rank's place (device memory: then a local copy into rank order)
 *   barrier:    shm barrier -> barrier among rail 0 -> shm barrier
 *   gather:     shm gather to the node's rank of the root's rail (the root's
 *               local rank) -> gather of the nodes' L blocks on that rail
 *               (the root's node's straight to their place) -> rank order at
 *               the root where the nodes' ranks are not node by node
 *   scatter:    the gather backwards (rail scatter, then shm scatter)
 *   alltoall:   a shm alltoall per node n of the blocks for n's ranks (local
 *               rank q gets the node's blocks for rank (n, q)) -> alltoall
 *               of those groups among rail q, straight into rank order where
 *               the nodes' ranks are node by node
 *
 *         node 0          node 1
 *       r0    r1        r2    r3       rails: {r0, r2} and {r1, r3}
 *       |__shm_|        |__shm_|       1. slices s0 -> r0/r2, s1 -> r1/r3
 *       r0 <---- s0 ----> r2           2. both rails at once
 *       r1 <---- s1 ----> r3
 *       |__shm_|        |__shm_|       3. every rank gets s0 and s1
 *
 * Leader forms, for small vectors (WEFT_HIER_LEADER; by default where the
 * cost model predicts them cheaper): one rail carries the whole vector, one
 * message per node instead of L (where ranks outnumber cores the L rails'
 * messages wait for each other's cores):
 *
 *   allreduce:  shm reduce to local rank 0 -> allreduce among rail 0 ->
 *               shm bcast from local rank 0
 *   bcast:      the root's rail broadcasts the whole vector -> shm bcast on
 *               every node from its rank of that rail (on the root's node at
 *               once)
 *   allgather:  shm gather to local rank 0 -> allgather of the nodes' blocks
 *               among rail 0 -> the blocks in rank order -> shm bcast from
 *               local rank 0
 *   reduce:     shm reduce to each node's rank of the root's rail -> reduce
 *               on that rail to the root
 *   reduce_scatter: shm reduce to local rank 0 -> the node's blocks put
 *               together -> reduce_scatter among rail 0 -> shm scatter from
 *               local rank 0
 *
 * Pipelined allreduce, bcast, reduce, allgather and reduce_scatter (WEFT_HIER_PIPELINE; auto: the
 * chunks the cost model predicts fastest, none where ranks outnumber cores): the sliced form in
 * chunks, each chunk's first shm step (reduce-scatter; bcast: the root's node's bcast)
 * overlapping the rails' collective on the chunk before, an allgather's shm allgather of a piece
 * of every block beside the rails' allgather of the next (build_*_pipelined). Measured on two
 * simulated hosts of two ranks with links capped at 10 Gbit/s, 1 MiB chunks: allreduce 16 MiB
 * 23.7-25.1 ms -> 17.9-18.8, 4 MiB 4.4 -> 3.6-4.2; bcast 16 MiB 15.0-15.6 -> 14.0 (the wire
 * alone 13.4); reduce 16 MiB 16.8-18.3 -> 14.4-16.1; allgather of 16 MiB a rank (1 MiB chunks of
 * the result) 49.9-53.1 -> 34.7-35.7; reduce_scatter of 16 MiB a rank (4 MiB chunks of the
 * input) 45.3-45.6 -> 36.1-38.4. With uncapped links (memory speed, ranks outnumbering cores:
 * nothing idle to overlap) allreduce 3-8 % slower, bcast and allgather level, reduce 16 MiB
 * 12.6-13.0 -> 10.5-10.6, reduce_scatter 16 MiB 3-7 % slower.
 *
 * Cost (coll/cost.c): shm phases as in coll/shm/ops.c plus the best
 * point-to-point algorithm for n/L bytes on N ranks, its latency L times
 * where ranks outnumber cores (the leader forms: n bytes on N ranks, once).
 * Determinism: both allreduce forms combine a node's inputs first, then
 * the nodes' over a rail, and every rank gets the same bits; which form
 * runs may change the last bits of a floating-point result (WEFT_REPRODUCIBLE
 * runs the ordered algorithms instead). Needs the same number of ranks on
 * every node (the layout of the "hier" rows of the registry,
 * coll/registry.c); selection offers it only then, and forced where it
 * cannot run it falls back to the cheapest point-to-point algorithm.
 */
#include "coll/shm/shm.h"
#include "coll/comm_state.h"

#include <stdatomic.h>

static int usable(struct weft_comm *comm, const weft_coll_args_t *a)
{
    const weft_node_map_t *m = comm->node;

    return comm->coll->shm != NULL && m->nnodes > 1 && m->uniform && m->local_size > 1 &&
           m->nnodes * m->local_size == a->size;
}

static weft_status_t fallback(weft_sched_t *s, const weft_coll_args_t *a)
{
    const weft_coll_algo_t *algo =
        weft__coll_choose_flat(weft__sched_comm(s), a->kind, weft__coll_bytes(a), a->size);

    if (algo == NULL) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "%s: no fallback algorithm",
                                               weft__coll_kind_name(a->kind)));
    }
    return algo->build(s, a);
}

/* a on this rank's rail (its node's place among the N nodes), for the caller to change what it
 * moves */
static weft_coll_args_t rail_args(weft_sched_t *s, const weft_coll_args_t *a)
{
    const weft_node_map_t *m = weft__sched_comm(s)->node;
    weft_coll_args_t in = *a;

    in.rank = m->node;
    in.size = m->nnodes;
    return in;
}

/* Build `in` (a collective among this rank's rail) after task `after`;
 * returns a task that completes with it. */
static int on_rail(weft_sched_t *s, const weft_coll_args_t *in, int after)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    const weft_coll_algo_t *algo =
        weft__coll_choose_flat(comm, in->kind, weft__coll_bytes(in), in->size);
    int mark = weft__sched_mark(s);
    weft_status_t status;

    if (algo == NULL) {
        weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "hier: no algorithm for the rail"));
        return -1;
    }
    weft__sched_map(s, m->rail, m->nnodes);
    status = algo->build(s, in);
    weft__sched_map(s, NULL, 0);
    if (status != WEFT_OK) {
        weft__sched_fail(s, status);
        return -1;
    }
    return weft__sched_enclose(s, mark, after);
}

/* L slices of count elements: offsets and counts (scratch of the schedule). */
static size_t *slices(weft_sched_t *s, size_t count, int L)
{
    size_t *b = weft__sched_scratch(s, 2 * sizeof(size_t) * (size_t)L);

    for (int q = 0; b != NULL && q < L; q++) {
        b[q] = weft__block_start(count, L, q);
        b[L + q] = weft__block_count(count, L, q);
    }
    return b;
}

/* Slice q of the vector to local rank q (offsets then counts, scratch of
 * the schedule), and the rail collective on this rank's slice, in place:
 * `in` is a with the rail's rank, size and this slice. NULL on no memory. */
static size_t *rail_slice(weft_sched_t *s, const weft_coll_args_t *a, weft_coll_args_t *in)
{
    const weft_node_map_t *m = weft__sched_comm(s)->node;
    int L = m->local_size, me = m->local_rank;
    size_t *b = slices(s, a->count, L);

    if (b != NULL) {
        *in = rail_args(s, a);
        in->src = in->dst = (char *)a->dst + b[me] * a->esize;
        in->count = b[L + me];
    }
    return b;
}

/* Schedules built in a leader form (tests). */
static atomic_ulong leader_builds;

unsigned long weft__hier_leader_builds(void)
{
    return atomic_load(&leader_builds);
}

/* Whether a runs in its leader form (counted): every rank decides alike, from the parameters the
 * ranks agreed on. */
static int leader_form(weft_sched_t *s, const weft_coll_args_t *a)
{
    if (!weft__coll_hier_leader(weft__sched_comm(s), a->kind, weft__coll_bytes(a))) {
        return 0;
    }
    atomic_fetch_add(&leader_builds, 1);
    return 1;
}

/* allreduce, the leader form (small vectors): shm reduce to local rank 0, allreduce of the whole
 * vector among rail 0, shm bcast from local rank 0. */
static weft_status_t build_allreduce_leader(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int t1, t2 = -1;

    weft__sched_step(s, "node reduce", 0);
    t1 = weft__shm_reduce(s, comm->coll->shm, 0, a->src, a->dst, a->count, a->esize);
    if (m->local_rank == 0) {
        weft_coll_args_t in = rail_args(s, a);

        in.src = in.dst = a->dst;
        weft__sched_step(s, "rail allreduce", 1);
        t2 = on_rail(s, &in, t1);
    }
    weft__sched_step(s, "node bcast", 2);
    weft__sched_dep(s, t2,
                    weft__shm_bcast(s, comm->coll->shm, 0, a->dst, a->dst, a->count, a->esize));
    return WEFT_OK;
}

/* Schedules built in pipelined chunks (tests). */
static atomic_ulong pipelined_builds;

unsigned long weft__hier_pipelined_builds(void)
{
    return atomic_load(&pipelined_builds);
}

/* Elements per chunk of a pipelined allreduce, bcast or reduce of a, or of every rank's block of an
 * allgather or reduce_scatter (WEFT_HIER_PIPELINE chunks the whole vector, an allgather's result,
 * a reduce_scatter's input; auto: the cost model's; at most WEFT_HIER_PIPELINE_MAX_CHUNKS chunks),
 * or 0 for one piece: every rank decides alike. */
static size_t pipeline_chunk(weft_sched_t *s, const weft_coll_args_t *a)
{
    size_t bytes = weft__coll_hier_pipeline(weft__sched_comm(s), a->kind, weft__coll_bytes(a));
    size_t per = a->esize * (a->kind == WEFT_COLL_ALLGATHER || a->kind == WEFT_COLL_REDUCE_SCATTER
                                 ? (size_t)a->size
                                 : 1);
    size_t chunk = (bytes + per - 1) / per;

    return chunk == 0 || a->count <= chunk ? 0 : chunk;
}

/* A task that completes after tasks t and u (either -1: none). */
static int after_both(weft_sched_t *s, int t, int u)
{
    int both;

    if (t < 0 || u < 0) {
        return t < 0 ? u : t;
    }
    both = weft__sched_nop(s);
    weft__sched_dep(s, t, both);
    weft__sched_dep(s, u, both);
    return both;
}

/*
 * allreduce, the sliced form in chunks of `chunk` elements, pipelined:
 *
 *   node:  rs0 rs1 rs2 ...              ag0 ag1 ag2 ...   (shared memory, in this order)
 *   rail:      ar0 ar1 ar2 ...                            (one after the other)
 *
 * the shm reduce-scatter of chunk k+1 runs while the rails allreduce chunk k, and the shm
 * allgather of chunk k while they allreduce chunk k+1 and later ones. The rails' collectives
 * run one at a time, each after the one before on this rank: they share message slots, and
 * one sender's messages of a slot match its peers' receives in the order both post them.
 */
static weft_status_t build_allreduce_pipelined(weft_sched_t *s, const weft_coll_args_t *a,
                                               size_t chunk)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, me = m->local_rank;
    size_t nchunks = (a->count + chunk - 1) / chunk, es = a->esize;
    size_t **b = weft__sched_scratch(s, nchunks * sizeof(*b));
    int *rail = weft__sched_scratch(s, nchunks * sizeof(*rail));
    weft_coll_args_t *in = weft__sched_scratch(s, nchunks * sizeof(*in));

    if (b == NULL || rail == NULL || in == NULL) {
        return WEFT_ERR_NO_MEMORY;
    }
    atomic_fetch_add(&pipelined_builds, 1);
    for (size_t k = 0; k < nchunks; k++) {
        size_t e0 = k * chunk, n = a->count - e0 < chunk ? a->count - e0 : chunk;
        int t1;

        b[k] = slices(s, n, L);
        if (b[k] == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
        in[k] = rail_args(s, a);
        in[k].src = in[k].dst = (char *)a->dst + (e0 + b[k][me]) * es;
        in[k].count = b[k][L + me];
        weft__sched_step(s, "node reduce-scatter", 0);
        t1 = weft__shm_reduce_scatter(s, comm->coll->shm, (const char *)a->src + e0 * es, in[k].dst,
                                      b[k], b[k] + L, es);
        weft__sched_step(s, "rail allreduce", 1);
        rail[k] = on_rail(s, &in[k], after_both(s, t1, k > 0 ? rail[k - 1] : -1));
    }
    weft__sched_step(s, "node allgather", 2);
    for (size_t k = 0; k < nchunks; k++) {
        weft__sched_dep(s, rail[k],
                        weft__shm_allgather(s, comm->coll->shm, in[k].dst,
                                            (char *)a->dst + k * chunk * es, b[k], b[k] + L, es));
    }
    return WEFT_OK;
}

static weft_status_t build_allreduce(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    int L = comm->node->local_size;
    weft_coll_args_t in;
    size_t *b, chunk;
    int t1, t2;

    if (leader_form(s, a)) {
        return build_allreduce_leader(s, a);
    }
    chunk = pipeline_chunk(s, a);
    if (chunk > 0) {
        return build_allreduce_pipelined(s, a, chunk);
    }
    b = rail_slice(s, a, &in);
    if (b == NULL) {
        return WEFT_ERR_NO_MEMORY;
    }
    weft__sched_step(s, "node reduce-scatter", 0);
    t1 = weft__shm_reduce_scatter(s, comm->coll->shm, a->src, in.dst, b, b + L, a->esize);
    weft__sched_step(s, "rail allreduce", 1);
    t2 = on_rail(s, &in, t1);
    weft__sched_step(s, "node allgather", 2);
    weft__sched_dep(s, t2,
                    weft__shm_allgather(s, comm->coll->shm, in.dst, a->dst, b, b + L, a->esize));
    return WEFT_OK;
}

/* bcast, the leader form (small vectors): the ranks of the root's rail (its local rank on every
 * node) broadcast the whole vector among themselves, then each node's one broadcasts it in its
 * node; on the root's node the root does both at once. */
static weft_status_t build_bcast_leader(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int leader = m->local_of[a->root], root_node = m->node_of[a->root];
    int t = -1;

    if (m->local_rank == leader) {
        weft_coll_args_t in = rail_args(s, a);

        in.src = in.dst = a->dst;
        in.root = root_node;
        weft__sched_step(s, "rail bcast", 0);
        t = on_rail(s, &in, -1);
    }
    weft__sched_step(s, "node bcast", 1);
    weft__sched_dep(
        s, m->node == root_node ? -1 : t,
        weft__shm_bcast(s, comm->coll->shm, leader, a->dst, a->dst, a->count, a->esize));
    return WEFT_OK;
}

/*
 * bcast, the sliced form in chunks of `chunk` elements, pipelined:
 *
 *   root's node:   bc0 bc1 bc2 ...          (shm bcast of each chunk from the root)
 *   rails:             rb0 rb1 rb2 ...      (each rank's slice of chunk k from the root's node)
 *   other nodes:           ag0 ag1 ag2 ...  (shm allgather of chunk k's slices)
 *
 * the root's node gives out chunk k+1 while the rails carry chunk k, and the other nodes put
 * chunk k together while the rails carry chunk k+1. The rails' bcasts run one at a time, as the
 * pipelined allreduce's do.
 */
static weft_status_t build_bcast_pipelined(weft_sched_t *s, const weft_coll_args_t *a, size_t chunk)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, me = m->local_rank, root_node = m->node_of[a->root];
    int there = m->node == root_node, rail = -1;
    size_t nchunks = (a->count + chunk - 1) / chunk, es = a->esize;

    atomic_fetch_add(&pipelined_builds, 1);
    for (size_t k = 0; k < nchunks; k++) {
        size_t e0 = k * chunk, n = a->count - e0 < chunk ? a->count - e0 : chunk;
        char *at = (char *)a->dst + e0 * es;
        weft_coll_args_t in = rail_args(s, a);
        size_t *b = slices(s, n, L);
        int t1 = -1;

        if (b == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
        if (there) {
            weft__sched_step(s, "node bcast", 0);
            t1 = weft__shm_bcast(s, comm->coll->shm, m->local_of[a->root], at, at, n, es);
        }
        in.src = in.dst = at + b[me] * es;
        in.count = b[L + me];
        in.root = root_node;
        weft__sched_step(s, "rail bcast", 1);
        rail = on_rail(s, &in, after_both(s, t1, rail));
        if (!there) {
            weft__sched_step(s, "node allgather", 2);
            weft__sched_dep(s, rail,
                            weft__shm_allgather(s, comm->coll->shm, in.dst, at, b, b + L, es));
        }
    }
    return WEFT_OK;
}

static weft_status_t build_bcast(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, root_node = m->node_of[a->root];
    weft_coll_args_t in;
    size_t *b;
    size_t chunk;
    int t1 = -1, t2;

    if (leader_form(s, a)) {
        return build_bcast_leader(s, a);
    }
    chunk = pipeline_chunk(s, a);
    if (chunk > 0) {
        return build_bcast_pipelined(s, a, chunk);
    }
    b = rail_slice(s, a, &in);
    if (b == NULL) {
        return WEFT_ERR_NO_MEMORY;
    }
    if (m->node == root_node) {
        weft__sched_step(s, "node bcast", 0);
        t1 = weft__shm_bcast(s, comm->coll->shm, m->local_of[a->root], a->dst, a->dst, a->count,
                             a->esize);
    }
    in.root = root_node;
    weft__sched_step(s, "rail bcast", 1);
    t2 = on_rail(s, &in, t1);
    if (m->node != root_node) {
        weft__sched_step(s, "node allgather", 2);
        weft__sched_dep(
            s, t2, weft__shm_allgather(s, comm->coll->shm, in.dst, a->dst, b, b + L, a->esize));
    }
    return WEFT_OK;
}

/* reduce, the leader form (small vectors): shm reduce to each node's rank of the root's rail,
 * reduce of the nodes' results on that rail to the root. */
static weft_status_t build_reduce_leader(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int leader = m->local_of[a->root], is_root = a->rank == a->root, t;
    char *buf = NULL;

    if (m->local_rank == leader) {
        buf = is_root ? a->dst : weft__sched_scratch(s, a->count * a->esize);
        if (buf == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
    }
    weft__sched_step(s, "node reduce", 0);
    t = weft__shm_reduce(s, comm->coll->shm, leader, a->src, buf, a->count, a->esize);
    if (m->local_rank == leader) {
        weft_coll_args_t in = rail_args(s, a);

        in.src = buf;
        in.dst = is_root ? buf : NULL;
        in.root = m->node_of[a->root];
        weft__sched_step(s, "rail reduce", 1);
        on_rail(s, &in, t);
    }
    return WEFT_OK;
}

/* reduce: shm reduce-scatter (slice q to local rank q), reduce of slice q on rail q to the root's
 * node (every rail at once), shm allgather of the slices there (the root keeps the result). */
/*
 * reduce, the sliced form in chunks of `chunk` elements, pipelined as the allreduce is:
 *
 *   every node:    rs0 rs1 rs2 ...               (shm reduce-scatter of each chunk)
 *   rails:             rr0 rr1 rr2 ...           (each slice of chunk k reduced to the root's node)
 *   root's node:                   ag0 ag1 ...   (shm allgather of chunk k's slices there)
 *
 * A node's shm steps run in the order built, the same on all its ranks: every reduce-scatter,
 * then (on the root's node) every allgather, each after its chunk's rail.
 */
static weft_status_t build_reduce_pipelined(weft_sched_t *s, const weft_coll_args_t *a,
                                            size_t chunk, char *out)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, me = m->local_rank, root_node = m->node_of[a->root];
    int there = m->node == root_node;
    size_t nchunks = (a->count + chunk - 1) / chunk, es = a->esize;
    size_t **b = weft__sched_scratch(s, nchunks * sizeof(*b));
    char **slice = weft__sched_scratch(s, nchunks * sizeof(*slice));
    int *rail = weft__sched_scratch(s, nchunks * sizeof(*rail));

    if (b == NULL || slice == NULL || rail == NULL) {
        return WEFT_ERR_NO_MEMORY;
    }
    atomic_fetch_add(&pipelined_builds, 1);
    for (size_t k = 0; k < nchunks; k++) {
        size_t e0 = k * chunk, n = a->count - e0 < chunk ? a->count - e0 : chunk;
        weft_coll_args_t in = rail_args(s, a);
        int t;

        b[k] = slices(s, n, L);
        slice[k] = b[k] == NULL ? NULL : weft__sched_scratch(s, b[k][L + me] * es + 1);
        if (slice[k] == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
        weft__sched_step(s, "node reduce-scatter", 0);
        t = weft__shm_reduce_scatter(s, comm->coll->shm, (const char *)a->src + e0 * es, slice[k],
                                     b[k], b[k] + L, es);
        in.src = slice[k];
        in.dst = there ? slice[k] : NULL;
        in.count = b[k][L + me];
        in.root = root_node;
        weft__sched_step(s, "rail reduce", 1);
        rail[k] = on_rail(s, &in, after_both(s, t, k > 0 ? rail[k - 1] : -1));
    }
    for (size_t k = 0; there && k < nchunks; k++) {
        weft__sched_step(s, "node allgather", 2);
        weft__sched_dep(s, rail[k],
                        weft__shm_allgather(s, comm->coll->shm, slice[k], out + k * chunk * es,
                                            b[k], b[k] + L, es));
    }
    return WEFT_OK;
}

static weft_status_t build_reduce(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, me = m->local_rank, root_node = m->node_of[a->root];
    int there = m->node == root_node, t;
    size_t *b, es = a->esize, chunk;
    char *slice, *out = NULL;
    weft_coll_args_t in = rail_args(s, a);

    if (leader_form(s, a)) {
        return build_reduce_leader(s, a);
    }
    if (there) {
        out = a->rank == a->root ? a->dst : weft__sched_scratch(s, a->count * es + 1);
        if (out == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
    }
    chunk = pipeline_chunk(s, a);
    if (chunk > 0) {
        return build_reduce_pipelined(s, a, chunk, out);
    }
    b = slices(s, a->count, L);
    if (b == NULL) {
        return WEFT_ERR_NO_MEMORY;
    }
    slice = weft__sched_scratch(s, b[L + me] * es + 1);
    if (slice == NULL) {
        return WEFT_ERR_NO_MEMORY;
    }
    weft__sched_step(s, "node reduce-scatter", 0);
    t = weft__shm_reduce_scatter(s, comm->coll->shm, a->src, slice, b, b + L, es);
    in.src = slice;
    in.dst = there ? slice : NULL;
    in.count = b[L + me];
    in.root = root_node;
    weft__sched_step(s, "rail reduce", 1);
    t = on_rail(s, &in, t);
    if (there) {
        weft__sched_step(s, "node allgather", 2);
        weft__sched_dep(s, t, weft__shm_allgather(s, comm->coll->shm, slice, out, b, b + L, es));
    }
    return WEFT_OK;
}

/* Grouped layouts of a size-block vector: by rail (by_node 0), rail q's N blocks together,
 * group q = blocks of ranks rank_at[n][q] for n = 0..N-1; by node (by_node 1), node n's L blocks
 * together, group n = blocks of ranks rank_at[n][q] for q = 0..L-1. Adds one copy task per
 * block between `grouped` and `plain` (to_grouped: plain -> grouped) after task `after`; returns
 * a task that completes with them. regroup_pieces does it for one piece of every block (the
 * pipelined forms): rank r's `piece` bytes at plain + r * stride, the grouped pieces back to
 * back. */
static int regroup_pieces(weft_sched_t *s, char *grouped, char *plain, size_t stride, size_t piece,
                          int to_grouped, int after, int by_node)
{
    const weft_node_map_t *m = weft__sched_comm(s)->node;
    int L = m->local_size, N = m->nnodes, done = weft__sched_nop(s);

    for (int q = 0; q < L; q++) {
        for (int n = 0; n < N; n++) {
            size_t at = by_node ? (size_t)n * L + q : (size_t)q * N + n;
            char *g = grouped + at * piece;
            char *p = plain + (size_t)m->rank_at[n * m->max_local + q] * stride;
            int t =
                to_grouped ? weft__sched_copy(s, g, p, piece) : weft__sched_copy(s, p, g, piece);

            weft__sched_dep(s, after, t);
            weft__sched_dep(s, t, done);
        }
    }
    return done;
}

static int regroup(weft_sched_t *s, char *grouped, char *plain, size_t block, int to_grouped,
                   int after, int by_node)
{
    return regroup_pieces(s, grouped, plain, block, block, to_grouped, after, by_node);
}

/* The element offsets of the blocks each rail carries, rail by rail: rail q's are those of local
 * rank q on every node, node by node (schedule scratch; NULL on no memory). */
static size_t *rail_pieces(weft_sched_t *s, size_t count)
{
    const weft_node_map_t *m = weft__sched_comm(s)->node;
    int L = m->local_size, N = m->nnodes;
    size_t *poff = weft__sched_scratch(s, sizeof(size_t) * (size_t)L * (size_t)N);

    for (int q = 0; poff != NULL && q < L; q++) {
        for (int n = 0; n < N; n++) {
            poff[(size_t)q * N + n] = (size_t)m->rank_at[n * m->max_local + q] * count;
        }
    }
    return poff;
}

/* The buffers of the sliced reduce_scatter and allgather's node step: `rail`, this rank's N rail
 * blocks; host memory: the offsets of every rail's blocks at their ranks' places (poff), which
 * the shm step reads or writes directly; device memory: `grouped`, the blocks by rail, and its
 * slices (b), through which a copy (regroup) goes instead. WEFT_ERR_NO_MEMORY when short. */
typedef struct rail_bufs {
    char *rail, *grouped;
    size_t *b, *poff;
} rail_bufs_t;

static weft_status_t rail_bufs(weft_sched_t *s, const weft_coll_args_t *a, rail_bufs_t *r)
{
    const weft_node_map_t *m = weft__sched_comm(s)->node;
    size_t block = a->count * a->esize;

    *r = (rail_bufs_t){.rail = weft__sched_scratch(s, block * (size_t)m->nnodes)};
    if (weft__sched_dev(s)->memtype == WEFT_MEM_HOST && a->count > 0) {
        r->poff = rail_pieces(s, a->count);
        return r->rail != NULL && r->poff != NULL ? WEFT_OK : WEFT_ERR_NO_MEMORY;
    }
    r->grouped = weft__sched_scratch(s, block * (size_t)a->size);
    r->b = slices(s, (size_t)a->size * a->count, m->local_size);
    return r->rail != NULL && r->grouped != NULL && r->b != NULL ? WEFT_OK : WEFT_ERR_NO_MEMORY;
}

/* The pipelined allgather and reduce_scatter's chunk k of `chunk` elements, pieces [e0, e0 + n)
 * of every rank's block (rail_bufs for one chunk): `rail`, this rank's rail's N pieces; host
 * memory (poff, rail_pieces' offsets, not NULL): pk, the pieces' places in the ranks' blocks;
 * device memory: `grouped`, every rank's piece by rail, and its slices (b). */
typedef struct chunk_bufs {
    size_t e0, n, *pk, *b;
    char *rail, *grouped;
} chunk_bufs_t;

static weft_status_t chunk_bufs(weft_sched_t *s, const weft_coll_args_t *a, const size_t *poff,
                                size_t chunk, size_t k, chunk_bufs_t *c)
{
    const weft_node_map_t *m = weft__sched_comm(s)->node;
    size_t N = (size_t)m->nnodes, nb = (size_t)m->local_size * N, es = a->esize;

    *c = (chunk_bufs_t){.e0 = k * chunk};
    c->n = a->count - c->e0 < chunk ? a->count - c->e0 : chunk;
    c->rail = weft__sched_scratch(s, c->n * es * N);
    if (poff != NULL) {
        c->pk = weft__sched_scratch(s, nb * sizeof(*c->pk));
        for (size_t i = 0; c->pk != NULL && i < nb; i++) {
            c->pk[i] = poff[i] + c->e0;
        }
        return c->rail != NULL && c->pk != NULL ? WEFT_OK : WEFT_ERR_NO_MEMORY;
    }
    c->grouped = weft__sched_scratch(s, c->n * es * (size_t)a->size);
    c->b = slices(s, (size_t)a->size * c->n, m->local_size);
    return c->rail != NULL && c->grouped != NULL && c->b != NULL ? WEFT_OK : WEFT_ERR_NO_MEMORY;
}

/* rail_pieces for a pipelined allgather or reduce_scatter of host memory (*poff_p NULL for
 * device memory), the build counted. */
static weft_status_t pipelined_pieces(weft_sched_t *s, const weft_coll_args_t *a, size_t **poff_p)
{
    atomic_fetch_add(&pipelined_builds, 1);
    *poff_p = NULL;
    if (weft__sched_dev(s)->memtype != WEFT_MEM_HOST) {
        return WEFT_OK;
    }
    *poff_p = rail_pieces(s, a->count);
    return *poff_p != NULL ? WEFT_OK : WEFT_ERR_NO_MEMORY;
}

/* reduce_scatter, the leader form (small vectors): shm reduce of the whole vector to local rank
 * 0, there the blocks of each node's ranks put together (node by node), reduce_scatter of those
 * among rail 0 (each node gets its ranks' blocks), shm scatter of them from local rank 0. */
static weft_status_t build_reduce_scatter_leader(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, leader = m->local_rank == 0;
    size_t block = a->count * a->esize;
    char *sum = leader ? weft__sched_scratch(s, block * (size_t)a->size) : NULL;
    char *grouped = leader ? weft__sched_scratch(s, block * (size_t)a->size) : NULL;
    char *node = leader ? weft__sched_scratch(s, block * (size_t)L) : NULL;
    int t1, t2 = -1;

    if (leader && (sum == NULL || grouped == NULL || node == NULL)) {
        return WEFT_ERR_NO_MEMORY;
    }
    weft__sched_step(s, "node reduce", 0);
    t1 = weft__shm_reduce(s, comm->coll->shm, 0, a->src, sum, a->count * (size_t)a->size, a->esize);
    if (leader) {
        weft_coll_args_t in = rail_args(s, a);
        int grouped_done;

        weft__sched_step(s, "group by node", 1);
        grouped_done = regroup(s, grouped, sum, block, 1, t1, 1);
        in.src = grouped;
        in.dst = node;
        in.count = a->count * (size_t)L;
        weft__sched_step(s, "rail reduce-scatter", 2);
        t2 = on_rail(s, &in, grouped_done);
    }
    weft__sched_step(s, "node scatter", 3);
    weft__sched_dep(s, t2,
                    weft__shm_scatter(s, comm->coll->shm, 0, node, a->dst, a->count, a->esize));
    return WEFT_OK;
}

/*
 * reduce_scatter, the sliced form in chunks of `chunk` elements of every rank's block, pipelined:
 *
 *   every node:  rs0 rs1 rs2 ...          (shm reduce-scatter of piece k of every block)
 *   rails:           rr0 rr1 rr2 ...      (reduce_scatter of piece k of the rail's blocks)
 *
 * the nodes reduce piece k+1 while the rails reduce-scatter piece k. Host memory: each piece taken
 * where it is (the pieces' offsets those of rail_pieces, moved by the chunk's start); device
 * memory: a copy per piece grouping them by rail first, as the one-piece form. The rails'
 * collectives run one at a time, as the pipelined allreduce's do.
 */
static weft_status_t build_reduce_scatter_pipelined(weft_sched_t *s, const weft_coll_args_t *a,
                                                    size_t chunk)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, N = m->nnodes, rail = -1;
    size_t nchunks = (a->count + chunk - 1) / chunk, es = a->esize, *poff;
    weft_status_t status = pipelined_pieces(s, a, &poff);

    for (size_t k = 0; status == WEFT_OK && k < nchunks; k++) {
        weft_coll_args_t in = rail_args(s, a);
        chunk_bufs_t c;
        int t, grouped;

        status = chunk_bufs(s, a, poff, chunk, k, &c);
        if (status != WEFT_OK) {
            break;
        }
        if (poff != NULL) {
            weft__sched_step(s, "node reduce-scatter", 1);
            t = weft__shm_reduce_scatter_pieces(s, comm->coll->shm, a->src, c.rail, (size_t)N * c.n,
                                                c.n, c.pk, es);
        } else {
            weft__sched_step(s, "group by rail", 0);
            grouped = regroup_pieces(s, c.grouped, (char *)a->src + c.e0 * es, a->count * es,
                                     c.n * es, 1, -1, 0);
            weft__sched_step(s, "node reduce-scatter", 1);
            t = weft__shm_reduce_scatter(s, comm->coll->shm, c.grouped, c.rail, c.b, c.b + L, es);
            weft__sched_dep(s, grouped, t);
        }
        in.src = c.rail;
        in.dst = (char *)a->dst + c.e0 * es;
        in.count = c.n;
        weft__sched_step(s, "rail reduce-scatter", 2);
        rail = on_rail(s, &in, after_both(s, t, rail));
    }
    return status;
}

static weft_status_t build_reduce_scatter(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, N = m->nnodes;
    weft_coll_args_t in = rail_args(s, a);
    rail_bufs_t r;
    weft_status_t status;
    size_t chunk;
    int t1;

    if (leader_form(s, a)) {
        return build_reduce_scatter_leader(s, a);
    }
    chunk = pipeline_chunk(s, a);
    if (chunk > 0) {
        return build_reduce_scatter_pipelined(s, a, chunk);
    }
    status = rail_bufs(s, a, &r);
    if (status != WEFT_OK) {
        return status;
    }
    if (r.poff != NULL) { /* each rail's blocks taken where they are */
        weft__sched_step(s, "node reduce-scatter", 1);
        t1 = weft__shm_reduce_scatter_pieces(s, comm->coll->shm, a->src, r.rail,
                                             (size_t)N * a->count, a->count, r.poff, a->esize);
    } else {
        int t0;

        weft__sched_step(s, "group by rail", 0);
        t0 = regroup(s, r.grouped, (char *)a->src, a->count * a->esize, 1, -1, 0);
        weft__sched_step(s, "node reduce-scatter", 1);
        t1 =
            weft__shm_reduce_scatter(s, comm->coll->shm, r.grouped, r.rail, r.b, r.b + L, a->esize);
        weft__sched_dep(s, t0, t1);
    }
    in.src = r.rail;
    weft__sched_step(s, "rail reduce-scatter", 2);
    on_rail(s, &in, t1);
    return WEFT_OK;
}

/* allgather, the leader form (small vectors): shm gather of the node's blocks to local rank 0,
 * allgather of the nodes' L blocks among rail 0, the blocks put in rank order there, shm bcast of
 * the result from local rank 0. */
static weft_status_t build_allgather_leader(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, leader = m->local_rank == 0;
    size_t block = a->count * a->esize;
    char *node = leader ? weft__sched_scratch(s, block * (size_t)L) : NULL;
    char *all = leader ? weft__sched_scratch(s, block * (size_t)a->size) : NULL;
    int t1, t2 = -1;

    if (leader && (node == NULL || all == NULL)) {
        return WEFT_ERR_NO_MEMORY;
    }
    weft__sched_step(s, "node gather", 0);
    t1 = weft__shm_gather(s, comm->coll->shm, 0, a->src, node, a->count, a->esize);
    if (leader) {
        weft_coll_args_t in = rail_args(s, a);
        int done;

        in.src = node;
        in.dst = all;
        in.count = a->count * (size_t)L;
        weft__sched_step(s, "rail allgather", 1);
        done = on_rail(s, &in, t1);
        /* node n's blocks are ranks rank_at[n][0..L-1] */
        weft__sched_step(s, "rank order", 2);
        t2 = regroup(s, all, a->dst, block, 0, done, 1);
    }
    weft__sched_step(s, "node bcast", 3);
    weft__sched_dep(s, t2,
                    weft__shm_bcast(s, comm->coll->shm, 0, a->dst, a->dst,
                                    a->count * (size_t)a->size, a->esize));
    return WEFT_OK;
}

/*
 * allgather, the sliced form in chunks of `chunk` elements of every rank's block, pipelined:
 *
 *   rails:        ra0 ra1 ra2 ...        (piece k of every rank's block along each rail)
 *   every node:       ag0 ag1 ag2 ...    (shm allgather of piece k of the rails' blocks)
 *
 * the nodes put piece k in place while the rails carry piece k+1. Host memory: each piece straight
 * to its rank's place (the pieces' offsets those of rail_pieces, moved by the chunk's start);
 * device memory: through a grouped copy and one copy per piece into rank order, as the one-piece
 * form. The rails' allgathers run one at a time, as the pipelined allreduce's do.
 */
static weft_status_t build_allgather_pipelined(weft_sched_t *s, const weft_coll_args_t *a,
                                               size_t chunk)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, N = m->nnodes, rail = -1;
    size_t nchunks = (a->count + chunk - 1) / chunk, es = a->esize, *poff;
    weft_status_t status = pipelined_pieces(s, a, &poff);

    for (size_t k = 0; status == WEFT_OK && k < nchunks; k++) {
        weft_coll_args_t in = rail_args(s, a);
        chunk_bufs_t c;
        int t;

        status = chunk_bufs(s, a, poff, chunk, k, &c);
        if (status != WEFT_OK) {
            break;
        }
        in.src = (const char *)a->src + c.e0 * es;
        in.dst = c.rail;
        in.count = c.n;
        weft__sched_step(s, "rail allgather", 0);
        rail = on_rail(s, &in, rail);
        weft__sched_step(s, "node allgather", 1);
        if (poff != NULL) {
            weft__sched_dep(s, rail,
                            weft__shm_allgather_pieces(s, comm->coll->shm, c.rail, a->dst,
                                                       (size_t)N * c.n, c.n, c.pk, es));
            continue;
        }
        t = weft__shm_allgather(s, comm->coll->shm, c.rail, c.grouped, c.b, c.b + L, es);
        weft__sched_dep(s, rail, t);
        weft__sched_step(s, "rank order", 2);
        regroup_pieces(s, c.grouped, (char *)a->dst + c.e0 * es, a->count * es, c.n * es, 0, t, 0);
    }
    return status;
}

static weft_status_t build_allgather(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, N = m->nnodes;
    weft_coll_args_t in = rail_args(s, a);
    rail_bufs_t r;
    weft_status_t status;
    size_t chunk;
    int t1, t2;

    if (leader_form(s, a)) {
        return build_allgather_leader(s, a);
    }
    chunk = pipeline_chunk(s, a);
    if (chunk > 0) {
        return build_allgather_pipelined(s, a, chunk);
    }
    status = rail_bufs(s, a, &r);
    if (status != WEFT_OK) {
        return status;
    }
    in.dst = r.rail;
    weft__sched_step(s, "rail allgather", 0);
    t1 = on_rail(s, &in, -1);
    weft__sched_step(s, "node allgather", 1);
    if (r.poff != NULL) {
        /* each rail's blocks straight to their ranks' places in dst, with no copy into rank
         * order after (two simulated hosts of two ranks, 16 MiB: 62 -> 42 ms) */
        weft__sched_dep(s, t1,
                        weft__shm_allgather_pieces(s, comm->coll->shm, r.rail, a->dst,
                                                   (size_t)N * a->count, a->count, r.poff,
                                                   a->esize));
        return WEFT_OK;
    }
    t2 = weft__shm_allgather(s, comm->coll->shm, r.rail, r.grouped, r.b, r.b + L, a->esize);
    weft__sched_dep(s, t1, t2);
    weft__sched_step(s, "rank order", 2);
    regroup(s, r.grouped, a->dst, a->count * a->esize, 0, t2, 0);
    return WEFT_OK;
}

/* The root's buffer of a gather or scatter with its blocks node by node: the user's where the
 * nodes' ranks are in that order, else scratch (*grouped_p 1; NULL on no memory) */
static char *node_blocks(weft_sched_t *s, const weft_coll_args_t *a, char *user, int *grouped_p)
{
    *grouped_p = !weft__sched_comm(s)->node->node_major;
    return *grouped_p ? weft__sched_scratch(s, a->count * a->esize * (size_t)a->size) : user;
}

/* Schedules built in the direct form of gather and scatter (tests). */
static atomic_ulong direct_builds;

unsigned long weft__hier_direct_builds(void)
{
    return atomic_load(&direct_builds);
}

/* gather of large blocks (above WEFT_HIER_DIRECT bytes per rank): a shm gather of the root's node's
 * blocks to the root, every other rank's block straight to the root, both at once: no second
 * hop through another node's shared memory, whose rail message waits for its whole node's
 * blocks (store and forward). Where the nodes' ranks are not node by node the root's node's
 * blocks are gathered into scratch and put in rank order. */
static weft_status_t build_gather_direct(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, root_node = m->node_of[a->root], t;
    size_t block = a->count * a->esize;
    char *node = NULL;

    if (m->node != root_node) {
        weft__sched_step(s, "to the root", 0);
        weft__sched_send(s, a->root, 0, a->src, block);
        return WEFT_OK;
    }
    if (a->rank == a->root) {
        node = m->node_major ? (char *)a->dst + (size_t)root_node * L * block
                             : weft__sched_scratch(s, block * L);
        if (node == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
        weft__sched_step(s, "from the other nodes", 1);
        for (int r = 0; r < a->size; r++) {
            if (m->node_of[r] != root_node) {
                weft__sched_recv(s, r, 0, (char *)a->dst + (size_t)r * block, block);
            }
        }
    }
    weft__sched_step(s, "node gather", 0);
    t = weft__shm_gather(s, comm->coll->shm, m->local_of[a->root], a->src, node, a->count,
                         a->esize);
    if (a->rank == a->root && !m->node_major) {
        weft__sched_step(s, "rank order", 2);
        for (int q = 0; q < L; q++) {
            weft__sched_dep(s, t,
                            weft__sched_copy(s, (char *)a->dst + (size_t)m->local_ranks[q] * block,
                                             node + (size_t)q * block, block));
        }
    }
    return WEFT_OK;
}

/* scatter of large blocks (above WEFT_HIER_DIRECT bytes per rank): the gather's direct form
 * backwards: every other node's block straight from the root to its rank, and a shm scatter of
 * the root's node's blocks (grouped into scratch first where the nodes' ranks are not node by
 * node), both at once. */
static weft_status_t build_scatter_direct(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, root_node = m->node_of[a->root], t = -1;
    size_t block = a->count * a->esize;
    const char *src = a->src, *node = NULL;

    if (m->node != root_node) {
        weft__sched_step(s, "from the root", 0);
        weft__sched_recv(s, a->root, 0, a->dst, block);
        return WEFT_OK;
    }
    if (a->rank == a->root) {
        weft__sched_step(s, "to the other nodes", 1);
        for (int r = 0; r < a->size; r++) {
            if (m->node_of[r] != root_node) {
                weft__sched_send(s, r, 0, src + (size_t)r * block, block);
            }
        }
        if (m->node_major) {
            node = src + (size_t)root_node * L * block;
        } else {
            char *grouped = weft__sched_scratch(s, block * L);

            if (grouped == NULL) {
                return WEFT_ERR_NO_MEMORY;
            }
            weft__sched_step(s, "group the node's blocks", 0);
            t = weft__sched_nop(s);
            for (int q = 0; q < L; q++) {
                weft__sched_dep(s,
                                weft__sched_copy(s, grouped + (size_t)q * block,
                                                 src + (size_t)m->local_ranks[q] * block, block),
                                t);
            }
            node = grouped;
        }
    }
    weft__sched_step(s, "node scatter", 2);
    weft__sched_dep(s, t,
                    weft__shm_scatter(s, comm->coll->shm, m->local_of[a->root], node, a->dst,
                                      a->count, a->esize));
    return WEFT_OK;
}

/* gather: shm gather of each node's blocks to its rank on the root's rail (on the root's node
 * the root, straight to its node's place in the result), gather of the nodes' L blocks on that
 * rail to the root, rank order there where the nodes' ranks are not node by node. */
static weft_status_t build_gather(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, leader = m->local_of[a->root], root_node = m->node_of[a->root];
    int is_root = a->rank == a->root, grouped = 0, t;
    size_t block = a->count * a->esize;
    char *all, *node = NULL;

    if (block > weft__coll_config.hier_direct) {
        atomic_fetch_add(&direct_builds, 1);
        return build_gather_direct(s, a);
    }
    all = is_root ? node_blocks(s, a, a->dst, &grouped) : NULL;
    if (m->local_rank == leader) {
        node = is_root ? all + (size_t)root_node * L * block : weft__sched_scratch(s, block * L);
        if (node == NULL || (is_root && all == NULL)) {
            return WEFT_ERR_NO_MEMORY;
        }
    }
    weft__sched_step(s, "node gather", 0);
    t = weft__shm_gather(s, comm->coll->shm, leader, a->src, node, a->count, a->esize);
    if (m->local_rank == leader) {
        weft_coll_args_t in = rail_args(s, a);

        in.src = node;
        in.dst = all;
        in.count = a->count * (size_t)L;
        in.root = root_node;
        weft__sched_step(s, "rail gather", 1);
        if (is_root) { /* the other nodes' blocks arrive meanwhile (its own: in place) */
            int rail = on_rail(s, &in, -1), both = weft__sched_nop(s);

            weft__sched_dep(s, t, both);
            weft__sched_dep(s, rail, both);
            t = both;
        } else {
            t = on_rail(s, &in, t);
        }
        if (grouped) {
            weft__sched_step(s, "rank order", 2);
            regroup(s, all, a->dst, block, 0, t, 1);
        }
    }
    return WEFT_OK;
}

/* scatter: the gather backwards: the nodes' blocks (in rank order, or grouped by node first)
 * down the root's rail, then a shm scatter on every node from its rank of that rail. */
static weft_status_t build_scatter(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, leader = m->local_of[a->root], root_node = m->node_of[a->root];
    int is_root = a->rank == a->root, grouped = 0, t = -1, rail;
    size_t block = a->count * a->esize;
    char *all, *node = NULL;

    if (block > weft__coll_config.hier_direct) {
        atomic_fetch_add(&direct_builds, 1);
        return build_scatter_direct(s, a);
    }
    all = is_root ? node_blocks(s, a, (char *)a->src, &grouped) : NULL;
    if (m->local_rank == leader) {
        weft_coll_args_t in = rail_args(s, a);

        node = is_root ? all + (size_t)root_node * L * block : weft__sched_scratch(s, block * L);
        if (node == NULL || (is_root && all == NULL)) {
            return WEFT_ERR_NO_MEMORY;
        }
        if (grouped) {
            weft__sched_step(s, "group by node", 0);
            t = regroup(s, all, (char *)a->src, block, 1, -1, 1);
        }
        in.src = all;
        in.dst = node;
        in.count = a->count * (size_t)L;
        in.root = root_node;
        weft__sched_step(s, "rail scatter", 1);
        rail = on_rail(s, &in, t);
        t = is_root ? t : rail; /* the root's node's blocks are ready: in place */
    }
    weft__sched_step(s, "node scatter", 2);
    weft__sched_dep(
        s, t, weft__shm_scatter(s, comm->coll->shm, leader, node, a->dst, a->count, a->esize));
    return WEFT_OK;
}

/* alltoall of large blocks (above WEFT_HIER_ALLTOALL bytes per rank): the blocks for this node's
 * ranks through one shm alltoall (the node's part of src and dst where the nodes' ranks are node
 * by node, copied out and back otherwise), every other block straight to its rank, pairwise (in
 * step k to rank + k, from rank - k, the steps with a peer on this node left out), both at once;
 * every byte copied as a flat algorithm copies it, and none crosses a node's transport twice.
 * The steps run one after the other, or all at once from blocks of WEFT_HIER_ALLTOALL_AT_ONCE
 * bytes (two hosts of two ranks, five rounds: 2 MiB 1.09-1.35 of Open MPI's time step by step,
 * 1.05-1.11 at once; 16 MiB 1.15-1.27 against 1.00-1.07; 256 KiB 0.60-0.93 against
 * 0.77-1.32). */
static weft_status_t build_alltoall_direct(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, p = a->size, r = a->rank, prev = -1, node;
    size_t block = a->count * a->esize, all = block * (size_t)p;
    int at_once = block >= weft__coll_config.hier_alltoall_at_once;
    const char *src = a->src;
    char *dst = a->dst;

    if (a->src == a->dst) { /* the blocks sent and those received share places: stage the input */
        char *stage = weft__sched_scratch(s, all);

        if (stage == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
        weft__sched_step(s, "stage", 0);
        prev = weft__sched_copy(s, stage, a->src, all);
        src = stage;
    }
    weft__sched_step(s, "node alltoall", 1);
    if (m->node_major) {
        size_t base = (size_t)m->node * L * block;

        node = weft__shm_alltoall(s, comm->coll->shm, src + base, dst + base, a->count, a->esize);
        weft__sched_dep(s, prev, node);
    } else {
        char *in = weft__sched_scratch(s, block * L), *out = weft__sched_scratch(s, block * L);
        int gathered = weft__sched_nop(s), x;

        if (in == NULL || out == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
        node = weft__sched_nop(s);
        for (int q = 0; q < L; q++) {
            int t = weft__sched_copy(s, in + (size_t)q * block,
                                     src + (size_t)m->local_ranks[q] * block, block);

            weft__sched_dep(s, prev, t);
            weft__sched_dep(s, t, gathered);
        }
        x = weft__shm_alltoall(s, comm->coll->shm, in, out, a->count, a->esize);
        weft__sched_dep(s, gathered, x);
        for (int q = 0; q < L; q++) {
            int t = weft__sched_copy(s, dst + (size_t)m->local_ranks[q] * block,
                                     out + (size_t)q * block, block);

            weft__sched_dep(s, x, t);
            weft__sched_dep(s, t, node);
        }
    }
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = (r - k + p) % p, done = weft__sched_nop(s);

        if (m->node_of[to] == m->node && m->node_of[from] == m->node) {
            continue;
        }
        weft__sched_step(s, "pairwise", 2 + k);
        if (m->node_of[to] != m->node) {
            int send = weft__sched_send(s, to, (uint32_t)k, src + (size_t)to * block, block);

            weft__sched_dep(s, prev, send);
            weft__sched_dep(s, send, done);
        }
        if (m->node_of[from] != m->node) {
            int recv = weft__sched_recv(s, from, (uint32_t)k, dst + (size_t)from * block, block);

            weft__sched_dep(s, prev, recv);
            weft__sched_dep(s, recv, done);
        }
        if (!at_once) {
            prev = done; /* the next step after this one (at once: after the staging only) */
        }
    }
    return WEFT_OK;
}

/* alltoall: on every node, one shm alltoall per node n of the blocks for n's ranks (local rank q
 * gets from each local rank q' its block for rank (n, q), the L of them together by n), then an
 * alltoall among rail q of those groups (L blocks from each node to each rank of the rail), which
 * land in rank order where the nodes' ranks are node by node: no copy of the data but the shm
 * steps' own. Otherwise the input is put node by node first and the result into rank order
 * after. In place needs no staging: every shm step has read the input (its readers said done)
 * before the rail writes the result. */
static weft_status_t build_alltoall(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, N = m->nnodes, grouped = !m->node_major;
    size_t block = a->count * a->esize, all = block * (size_t)a->size, group = block * L;
    char *mid, *dst = a->dst;
    const char *src = a->src;
    weft_coll_args_t in = rail_args(s, a);
    int t = -1, node;

    if (all > weft__coll_config.hier_alltoall) {
        return build_alltoall_direct(s, a);
    }
    mid = weft__sched_scratch(s, all);
    node = weft__sched_nop(s);
    if (mid == NULL) {
        return WEFT_ERR_NO_MEMORY;
    }
    if (grouped) {
        char *stage = weft__sched_scratch(s, all);

        dst = weft__sched_scratch(s, all);
        if (stage == NULL || dst == NULL) {
            return WEFT_ERR_NO_MEMORY;
        }
        weft__sched_step(s, "group by node", 0);
        t = regroup(s, stage, (char *)a->src, block, 1, -1, 1);
        src = stage;
    }
    weft__sched_step(s, "node alltoall", 1);
    for (int n = 0; n < N; n++) {
        int x = weft__shm_alltoall(s, comm->coll->shm, src + (size_t)n * group,
                                   mid + (size_t)n * group, a->count, a->esize);

        weft__sched_dep(s, t, x);
        weft__sched_dep(s, x, node);
    }
    in.src = mid;
    in.dst = dst;
    in.count = a->count * (size_t)L;
    weft__sched_step(s, "rail alltoall", 2);
    t = on_rail(s, &in, node);
    if (grouped) {
        weft__sched_step(s, "rank order", 3);
        regroup(s, dst, a->dst, block, 0, t, 1);
    }
    return WEFT_OK;
}

/* barrier: every local rank arrived (shm barrier), local rank 0 of every node meets the others
 * on rail 0, then the node's ranks leave with it (shm barrier): when any rank leaves, its node's
 * ranks and, through rail 0, every node's arrived. */
static weft_status_t build_barrier(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_node_map_t *m = comm->node;
    int t;

    weft__sched_step(s, "node barrier", 0);
    t = weft__shm_barrier(s, comm->coll->shm);
    if (m->local_rank == 0) {
        weft_coll_args_t in = rail_args(s, a);

        weft__sched_step(s, "rail barrier", 1);
        t = on_rail(s, &in, t);
    }
    weft__sched_step(s, "node barrier", 2);
    weft__sched_dep(s, t, weft__shm_barrier(s, comm->coll->shm));
    return WEFT_OK;
}

weft_status_t weft__hier_build(weft_sched_t *s, const weft_coll_args_t *a)
{
    if (!usable(weft__sched_comm(s), a)) {
        return fallback(s, a);
    }
    switch (a->kind) {
    case WEFT_COLL_ALLREDUCE:
        return build_allreduce(s, a);
    case WEFT_COLL_BCAST:
        return build_bcast(s, a);
    case WEFT_COLL_REDUCE:
        return build_reduce(s, a);
    case WEFT_COLL_REDUCE_SCATTER:
        return build_reduce_scatter(s, a);
    case WEFT_COLL_ALLGATHER:
        return build_allgather(s, a);
    case WEFT_COLL_BARRIER:
        return build_barrier(s, a);
    case WEFT_COLL_GATHER:
        return build_gather(s, a);
    case WEFT_COLL_SCATTER:
        return build_scatter(s, a);
    case WEFT_COLL_ALLTOALL:
        return build_alltoall(s, a);
    default:
        return weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "hier: %s not supported",
                                               weft__coll_kind_name(a->kind)));
    }
}
