/* The cost models of the registry's rows and the cost-based choice (coll/cost.h). */
#include "coll/cost.h"
#include "coll/comm_state.h"
#include "coll/shm/shm.h"

#include <math.h>
#include <string.h>

static int log2_floor(int p)
{
    int l = 0;

    while ((1 << (l + 1)) <= p) {
        l++;
    }
    return l;
}

static int log2_ceil(int p)
{
    int l = log2_floor(p);

    return (1 << l) < p ? l + 1 : l;
}

/* the fold of non-power-of-two rank counts: 2 messages of n, one reduction */
static double fold(const weft_cost_params_t *c, double n, int p)
{
    return (1 << log2_floor(p)) == p ? 0 : 2 * c->alpha + 2 * n * c->beta + n * c->gamma;
}

double weft__cost_allreduce_rd(const weft_cost_params_t *c, double n, int p)
{
    int l = log2_floor(p);

    return l * (c->alpha + n * c->beta + n * c->gamma) + fold(c, n, p);
}

double weft__cost_allreduce_rab(const weft_cost_params_t *c, double n, int p)
{
    int l = log2_floor(p), q = 1 << l;
    double f = (double)(q - 1) / q;

    return 2 * l * c->alpha + 2 * f * n * c->beta + f * n * c->gamma + fold(c, n, p);
}

double weft__cost_rs_ring(const weft_cost_params_t *c, double n, int p)
{
    double f = (double)(p - 1) / p;

    return (p - 1) * c->alpha + f * n * fmax(c->beta, c->gamma);
}

double weft__cost_ag_ring(const weft_cost_params_t *c, double n, int p)
{
    return (p - 1) * c->alpha + (double)(p - 1) / p * n * c->beta;
}

double weft__cost_allreduce_ring(const weft_cost_params_t *c, double n, int p)
{
    return weft__cost_rs_ring(c, n, p) + weft__cost_ag_ring(c, n, p);
}

double weft__cost_rs_halving(const weft_cost_params_t *c, double n, int p)
{
    if ((1 << log2_floor(p)) != p) {
        return weft__cost_rs_ring(c, n, p); /* falls back to the ring */
    }
    return log2_floor(p) * c->alpha + (double)(p - 1) / p * n * (c->beta + c->gamma);
}

double weft__cost_ag_log(const weft_cost_params_t *c, double n, int p)
{
    return log2_ceil(p) * c->alpha + (double)(p - 1) / p * n * c->beta;
}

double weft__cost_ag_bruck(const weft_cost_params_t *c, double n, int p)
{
    /* plus the final rotation, a local copy of the result */
    return weft__cost_ag_log(c, n, p) + n * c->beta / 4;
}

double weft__cost_bcast_binomial(const weft_cost_params_t *c, double n, int p)
{
    return log2_ceil(p) * (c->alpha + n * c->beta);
}

double weft__cost_bcast_scatter_ag(const weft_cost_params_t *c, double n, int p)
{
    return (log2_ceil(p) + p - 1) * c->alpha + 2 * (double)(p - 1) / p * n * c->beta;
}

double weft__cost_reduce_binomial(const weft_cost_params_t *c, double n, int p)
{
    return log2_ceil(p) * (c->alpha + n * c->beta + n * c->gamma);
}

double weft__cost_reduce_rs_gather(const weft_cost_params_t *c, double n, int p)
{
    return weft__cost_rs_ring(c, n, p) + (p - 1) * c->alpha + (double)(p - 1) / p * n * c->beta;
}

double weft__cost_tree_gather(const weft_cost_params_t *c, double n, int p)
{
    return log2_ceil(p) * c->alpha + (double)(p - 1) / p * n * c->beta;
}

double weft__cost_a2a_pairwise(const weft_cost_params_t *c, double n, int p)
{
    return (p - 1) * c->alpha + (double)(p - 1) / p * n * c->beta;
}

double weft__cost_a2a_bruck(const weft_cost_params_t *c, double n, int p)
{
    /* each step moves about half the blocks; packing copies them again */
    return log2_ceil(p) * (c->alpha + n / 2 * 2 * c->beta);
}

double weft__cost_barrier_dissemination(const weft_cost_params_t *c, double n, int p)
{
    (void)n;
    return log2_ceil(p) * c->alpha;
}

/*
 * Shared memory inside one node (coll/shm/ops.c): L ranks, n bytes, rounds
 * of one slot each; every round pays one flag handoff per phase.
 */
static double rounds(double n, double per_round)
{
    double r = ceil(n / per_round);

    return r < 1 ? 1 : r;
}

static double shm_allreduce_in(const weft_cost_params_t *c, double n, int L)
{
    double r = rounds(n, (double)c->shm_slot);

    if (n <= (double)c->shm_small) {
        return r * c->shm_alpha + n * c->shm_copy + (L - 1) * n * c->gamma;
    }
    return 2 * r * c->shm_alpha + 2 * n * c->shm_copy + (double)(L - 1) / L * n * c->gamma;
}

static double shm_rs_in(const weft_cost_params_t *c, double n, int L)
{
    return rounds(n, (double)c->shm_slot) * c->shm_alpha + n * c->shm_copy +
           (double)(L - 1) / L * n * c->gamma;
}

static double shm_ag_in(const weft_cost_params_t *c, double n, int L)
{
    return rounds(n / L, (double)c->shm_slot) * c->shm_alpha + (n / L + n) * c->shm_copy;
}

static double shm_bcast_in(const weft_cost_params_t *c, double n, int L)
{
    (void)L;
    return rounds(n, (double)c->shm_slot) * c->shm_alpha + 2 * n * c->shm_copy;
}

/* Called only on one node of p = L ranks with shared memory (the row's layout). */
double weft__cost_shm_allreduce(const weft_cost_params_t *c, double n, int p)
{
    return shm_allreduce_in(c, n, p);
}

double weft__cost_shm_rs(const weft_cost_params_t *c, double n, int p)
{
    return shm_rs_in(c, n, p);
}

/* allgather: every block in, the whole result out; from shm_cma_ag bytes
 * every rank reads the blocks where they are: n copied once, between two
 * handoffs */
double weft__cost_shm_ag(const weft_cost_params_t *c, double n, int p)
{
    if (n >= (double)c->shm_cma_ag) {
        return 2 * c->shm_alpha + n * c->shm_copy;
    }
    return shm_ag_in(c, n, p);
}

double weft__cost_shm_bcast(const weft_cost_params_t *c, double n, int p)
{
    return shm_bcast_in(c, n, p);
}

/* gather (n: every block) moves what an allgather does: a block in per rank, n out at the root */
double weft__cost_shm_gather(const weft_cost_params_t *c, double n, int p)
{
    return shm_ag_in(c, n, p);
}

/* scatter: n in at the root, a slot's 1/L of every block per round, a block out per rank */
double weft__cost_shm_scatter(const weft_cost_params_t *c, double n, int p)
{
    return rounds(n, (double)c->shm_slot) * c->shm_alpha + (n + n / p) * c->shm_copy;
}

/* alltoall (n: every block of one rank): n in and n out, as a bcast; from
 * blocks of shm_cma_a2a bytes every rank reads its blocks where they are:
 * n copied once, between two handoffs */
double weft__cost_shm_a2a(const weft_cost_params_t *c, double n, int p)
{
    if (n / p >= (double)c->shm_cma_a2a) {
        return 2 * c->shm_alpha + n * c->shm_copy;
    }
    return shm_bcast_in(c, n, p);
}

double weft__cost_shm_barrier(const weft_cost_params_t *c, double n, int p)
{
    (void)n;
    (void)p;
    return c->shm_alpha;
}

/* The cheapest point-to-point algorithm of kind between the nodes: the
 * registry's rows of kind that run anywhere, on nodes ranks. */
static double inner(const weft_cost_params_t *c, weft_coll_kind_t kind, double n, int nodes)
{
    weft_cost_params_t flat = *c;
    double best = -1;
    int count;
    const weft_coll_algo_t *rows = weft__coll_algos_of(kind, &count);

    flat.flat_only = 1;
    for (int i = 0; i < count; i++) {
        if (weft__cost_fits(&rows[i], &flat, nodes)) {
            double t = rows[i].cost(&flat, n, nodes);

            best = t >= 0 && (best < 0 || t < best) ? t : best;
        }
    }
    return best < 0 ? 0 : best;
}

/*
 * Called only on N = c->nodes nodes of L = c->local ranks with shared memory
 * (the row's layout), p = N L.
 *
 * The sliced forms run a phase on every rail at once, each on n/L bytes; where the ranks
 * outnumber the cores (c->oversubscribed) the rails of a node share the cores: their messages
 * wait for each other (the phase's latency, its time for no bytes, counts L times) while their
 * transfers still overlap (measured across two simulated hosts of two ranks on two cores: the
 * leader forms below faster up to 256 KiB, the sliced ones from 4 MiB). Allreduce, bcast,
 * allgather and reduce_scatter also have a leader form for small vectors: the node's data on
 * one rank, the whole vector over one rail, one shm step to give it out (coll/hier/hier.c).
 */
static double rail_phase(const weft_cost_params_t *c, weft_coll_kind_t kind, double n)
{
    int L = c->local;
    double t = inner(c, kind, n / L, c->nodes);

    return c->oversubscribed ? t + (L - 1) * inner(c, kind, 0, c->nodes) : t;
}

/* The collectives whose hierarchical sliced form runs pipelined in chunks (WEFT_HIER_PIPELINE) */
static int has_pipeline(weft_coll_kind_t kind)
{
    return kind == WEFT_COLL_ALLREDUCE || kind == WEFT_COLL_BCAST || kind == WEFT_COLL_REDUCE ||
           kind == WEFT_COLL_ALLGATHER || kind == WEFT_COLL_REDUCE_SCATTER;
}

/*
 * The sliced allreduce, bcast, reduce, allgather or reduce_scatter in k chunks of m = n/k bytes
 * (k = 1: one piece): each chunk's shm phases and its rail phase; pipelined, the nodes' shm work
 * on one chunk runs beside the rails' collective on another, so past the first chunk each costs
 * the longer of the two. A node's shm work per chunk: allreduce and reduce, a reduce-scatter and
 * an allgather on the same cores (a reduce's allgather on the root's node only); bcast, a shm
 * bcast on the root's node and an allgather on the others, each on its own node's cores;
 * allgather, the rails' allgathers of a piece of every block, then a shm allgather of it;
 * reduce_scatter, a shm reduce-scatter of a piece of every block, then the rails' reduce_scatter
 * of it (device memory: an allgather's copies into rank order, a reduce_scatter's grouping
 * copies, not modelled: the choice must not depend on where one rank's buffer is). Where ranks
 * outnumber cores they share them: nothing overlaps, and every chunk pays all (measured across two
 * simulated hosts of two ranks on two cores: 3-8 % slower in 1 MiB chunks on links at memory speed;
 * 25 % faster at 16 MiB on links capped at 10 Gbit/s, where the cores wait for the wire, which the
 * model does not see).
 */
static double hier_chunks(const weft_cost_params_t *c, weft_coll_kind_t kind, double n, double k)
{
    int L = c->local;
    double m = n / k, first, node, rail = rail_phase(c, kind, m);

    if (kind == WEFT_COLL_BCAST) {
        double b = shm_bcast_in(c, m, L), g = shm_ag_in(c, m, L);

        first = b + g;
        node = b > g ? b : g;
    } else if (kind == WEFT_COLL_ALLGATHER) {
        first = node = shm_ag_in(c, m, L);
    } else if (kind == WEFT_COLL_REDUCE_SCATTER) {
        first = node = shm_rs_in(c, m, L);
    } else {
        first = node = shm_rs_in(c, m, L) + shm_ag_in(c, m, L);
    }
    if (c->oversubscribed) {
        return k * (first + rail);
    }
    return first + rail + (k - 1) * (node > rail ? node : rail);
}

/* The chunks of a collective of n bytes (1: one piece) in chunks of chunk bytes */
static double chunks_of(double n, size_t chunk)
{
    return chunk == 0 || n <= (double)chunk ? 1 : ceil(n / (double)chunk);
}

size_t weft__cost_hier_pipeline(const weft_cost_params_t *c, weft_coll_kind_t kind, double n)
{
    size_t chunk = weft__coll_config.hier_pipeline;
    double best, k_best = 1;

    if (!has_pipeline(kind)) {
        return 0;
    }
    if (chunk != WEFT_HIER_PIPELINE_AUTO) {
        /* at most WEFT_HIER_PIPELINE_MAX_CHUNKS: larger chunks beyond */
        double fewest = ceil(n / WEFT_HIER_PIPELINE_MAX_CHUNKS);

        return chunks_of(n, chunk) == 1 ? 0 : (double)chunk > fewest ? chunk : (size_t)fewest;
    }
    best = hier_chunks(c, kind, n, 1);
    for (double k = 2; k <= WEFT_HIER_PIPELINE_MAX_CHUNKS; k *= 2) {
        double t;

        if (n / k < (double)WEFT_HIER_PIPELINE_MIN_CHUNK) {
            break;
        }
        t = hier_chunks(c, kind, n, k);
        if (t < best) {
            best = t;
            k_best = k;
        }
    }
    return k_best > 1 ? (size_t)ceil(n / k_best) : 0;
}

/* The sliced form (allreduce, bcast, reduce, allgather, reduce_scatter), in the chunks
 * WEFT_HIER_PIPELINE gives (hier_chunks) */
static double hier_sliced(const weft_cost_params_t *c, weft_coll_kind_t kind, double n)
{
    return hier_chunks(c, kind, n, chunks_of(n, weft__cost_hier_pipeline(c, kind, n)));
}

static double hier_leader(const weft_cost_params_t *c, weft_coll_kind_t kind, double n)
{
    int L = c->local;

    if (kind == WEFT_COLL_REDUCE) {
        /* shm reduce (modelled as the shm allreduce), reduce on the root's rail */
        return shm_allreduce_in(c, n, L) + inner(c, kind, n, c->nodes);
    }
    if (kind == WEFT_COLL_ALLREDUCE) {
        /* shm reduce (modelled as the shm allreduce), allreduce on rail 0, shm bcast */
        return shm_allreduce_in(c, n, L) + inner(c, kind, n, c->nodes) + shm_bcast_in(c, n, L);
    }
    if (kind == WEFT_COLL_ALLGATHER) {
        /* shm gather of the node's n/N bytes, allgather on rail 0, rank order, shm bcast */
        return shm_ag_in(c, n / c->nodes, L) + inner(c, kind, n, c->nodes) + n * c->shm_copy +
               shm_bcast_in(c, n, L);
    }
    if (kind == WEFT_COLL_REDUCE_SCATTER) {
        /* shm reduce (modelled as the shm allreduce), the node's blocks grouped, reduce_scatter
         * of them on rail 0, shm scatter of the node's n/N bytes (modelled as a bcast of them) */
        return shm_allreduce_in(c, n, L) + n * c->shm_copy + inner(c, kind, n, c->nodes) +
               shm_bcast_in(c, n / c->nodes, L);
    }
    return inner(c, kind, n, c->nodes) + shm_bcast_in(c, n, L);
}

/* The collectives whose hierarchical row has a leader form */
static int has_leader_form(weft_coll_kind_t kind)
{
    return kind == WEFT_COLL_ALLREDUCE || kind == WEFT_COLL_BCAST || kind == WEFT_COLL_ALLGATHER ||
           kind == WEFT_COLL_REDUCE_SCATTER || kind == WEFT_COLL_REDUCE;
}

int weft__cost_hier_leader(const weft_cost_params_t *c, weft_coll_kind_t kind, double n)
{
    size_t upto = weft__coll_config.hier_leader;

    if (!has_leader_form(kind)) {
        return 0;
    }
    if (upto == WEFT_HIER_LEADER_AUTO) {
        return hier_leader(c, kind, n) < hier_sliced(c, kind, n);
    }
    return upto == SIZE_MAX || n <= (double)upto;
}

static double hier_two_forms(const weft_cost_params_t *c, weft_coll_kind_t kind, double n)
{
    return weft__cost_hier_leader(c, kind, n) ? hier_leader(c, kind, n) : hier_sliced(c, kind, n);
}

double weft__cost_hier_allreduce(const weft_cost_params_t *c, double n, int p)
{
    (void)p;
    return hier_two_forms(c, WEFT_COLL_ALLREDUCE, n);
}

double weft__cost_hier_bcast(const weft_cost_params_t *c, double n, int p)
{
    (void)p;
    return hier_two_forms(c, WEFT_COLL_BCAST, n);
}

double weft__cost_hier_reduce(const weft_cost_params_t *c, double n, int p)
{
    (void)p;
    return hier_two_forms(c, WEFT_COLL_REDUCE, n);
}

double weft__cost_hier_rs(const weft_cost_params_t *c, double n, int p)
{
    (void)p;
    return hier_two_forms(c, WEFT_COLL_REDUCE_SCATTER, n);
}

double weft__cost_hier_ag(const weft_cost_params_t *c, double n, int p)
{
    (void)p;
    return hier_two_forms(c, WEFT_COLL_ALLGATHER, n);
}

double weft__cost_hier_barrier(const weft_cost_params_t *c, double n, int p)
{
    (void)n;
    (void)p;
    /* shm barrier, a barrier among rail 0 (one rank per node), shm barrier */
    return 2 * c->shm_alpha + inner(c, WEFT_COLL_BARRIER, 0, c->nodes);
}

/* the direct form of gather and scatter (blocks above WEFT_HIER_DIRECT): the root's node's n/N
 * through shared memory, p - L messages of the other nodes' (N-1)/N n through the root */
static double hier_direct(const weft_cost_params_t *c, double shm, double n, int p)
{
    return shm + (p - c->local) * c->alpha + (double)(c->nodes - 1) / c->nodes * n * c->beta;
}

/* gather (n: every rank's block): shm gather of each node's n/N bytes to the root's rail, a
 * gather of the nodes' blocks on it (the copy into rank order where the nodes' ranks are not node
 * by node is not modelled); larger blocks: the direct form */

double weft__cost_hier_gather(const weft_cost_params_t *c, double n, int p)
{
    double shm = weft__cost_shm_gather(c, n / c->nodes, c->local);

    if (n / p > (double)weft__coll_config.hier_direct) {
        return hier_direct(c, shm, n, p);
    }
    return shm + inner(c, WEFT_COLL_GATHER, n, c->nodes);
}

/* scatter: the gather backwards */
double weft__cost_hier_scatter(const weft_cost_params_t *c, double n, int p)
{
    double shm = weft__cost_shm_scatter(c, n / c->nodes, c->local);

    if (n / p > (double)weft__coll_config.hier_direct) {
        return hier_direct(c, shm, n, p);
    }
    return inner(c, WEFT_COLL_SCATTER, n, c->nodes) + shm;
}

/* alltoall (n: every block of one rank). Up to WEFT_HIER_ALLTOALL bytes: N shm alltoalls of n/N
 * bytes per rank, then every rail at once exchanges the groups, n per rank (no latency added for
 * the rails sharing cores: the flat algorithms' ranks all send at once too); those node steps
 * copy every byte once more, which the model, pricing a flat algorithm's messages inside a node
 * as the network's, does not see (measured: docs/algorithms.md). Above: one shm alltoall of the
 * node's n/N, the other blocks straight to their ranks (p - L messages, (N-1)/N n). */
double weft__cost_hier_a2a(const weft_cost_params_t *c, double n, int p)
{
    int N = c->nodes;

    if (n > (double)weft__coll_config.hier_alltoall) {
        return weft__cost_shm_a2a(c, n / N, c->local) + (p - c->local) * c->alpha +
               (double)(N - 1) / N * n * c->beta;
    }
    return N * weft__cost_shm_a2a(c, n / N, c->local) + inner(c, WEFT_COLL_ALLTOALL, n, N);
}

/* The ordered reductions (coll/ordered/ordered.c): blocks straight to
 * their owners, folded once all arrived; allreduce and reduce then send
 * every folded block on. */
double weft__cost_ordered_rs(const weft_cost_params_t *c, double n, int p)
{
    return (p - 1) * c->alpha + (double)(p - 1) / p * n * (c->beta + c->gamma);
}

double weft__cost_ordered_allreduce(const weft_cost_params_t *c, double n, int p)
{
    return weft__cost_ordered_rs(c, n, p) + (p - 1) * c->alpha + (double)(p - 1) / p * n * c->beta;
}

void weft__cost_defaults(weft_cost_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->alpha = weft__coll_config.cost_alpha_us * 1e-6;
    params->beta = 1.0 / (weft__coll_config.cost_beta_gbs * 1e9);
    params->gamma = 1.0 / (weft__coll_config.cost_gamma_gbs * 1e9);
    params->nodes = 1;
    params->local = 1;
    params->shm_alpha = weft__coll_config.cost_shm_alpha_us * 1e-6;
    params->shm_copy = 1.0 / (weft__coll_config.cost_shm_copy_gbs * 1e9);
    params->shm_slot = weft__coll_config.shm_slot;
    params->shm_small = weft__coll_config.shm_small;
    /* auto without a node's measurement: as where single-copy reads were found fast */
    params->shm_cma_a2a = weft__coll_config.shm_cma_alltoall == WEFT_CONFIG_AUTO
                              ? WEFT_SHM_CMA_ALLTOALL_AUTO_FROM
                              : weft__coll_config.shm_cma_alltoall;
    params->shm_cma_ag = weft__coll_config.shm_cma_allgather == WEFT_CONFIG_AUTO
                             ? WEFT_SHM_CMA_ALLGATHER_AUTO_FROM
                             : weft__coll_config.shm_cma_allgather;
    params->reproducible = weft__coll_config.reproducible;
}

double weft__cost_measure_shm_alpha(struct weft_comm *comm)
{
    return comm->coll->shm != NULL
               ? weft__shm_measure_handoff(comm->coll->shm, comm->oversubscribed)
               : 0;
}

void weft__cost_params(struct weft_comm *comm, weft_cost_params_t *params)
{
    weft__cost_defaults(params);
    params->reproducible = comm->coll->reproducible;
    if (comm->coll->cost_measured) {
        params->alpha = comm->coll->cost_alpha;
        params->beta = comm->coll->cost_beta;
        params->gamma = comm->coll->cost_gamma;
        if (comm->coll->cost_shm_alpha > 0) { /* measured with alpha: the two compare */
            params->shm_alpha = comm->coll->cost_shm_alpha;
        }
    }
    if (comm->oversubscribed_any) {
        /* alike on every rank, so that they choose alike */
        params->oversubscribed = 1;
        /* every message may wait for the receiver to get a core back */
        params->alpha += weft__coll_config.cost_oversub_us * 1e-6;
        params->shm_alpha += weft__coll_config.cost_oversub_shm_us * 1e-6;
    }
    if (comm->node != NULL) {
        params->nodes = comm->node->nnodes;
        params->local = comm->node->uniform ? comm->node->local_size : 1;
    }
    if (comm->coll->shm != NULL) {
        params->shm = 1;
        params->shm_slot = comm->coll->shm->slot_bytes;
        /* SIZE_MAX where the kernel refused process_vm_readv or auto found it slow */
        params->shm_cma_a2a = weft__shm_cma_alltoall_from(comm->coll->shm);
        params->shm_cma_ag = weft__shm_cma_allgather_from(comm->coll->shm);
        if (comm->coll->shm->copy_gbs > 0) {
            params->shm_copy = 1.0 / (comm->coll->shm->copy_gbs * 1e9);
        }
    }
}

/* Whether the row belongs to the mode the parameters are in. */
static int fits_mode(const weft_coll_algo_t *algo, const weft_cost_params_t *c)
{
    if (algo->flags & WEFT_COLL_ORDERED) {
        return c->reproducible;
    }
    return !c->reproducible || !weft__coll_kind_reduces(algo->kind);
}

int weft__cost_fits(const weft_coll_algo_t *algo, const weft_cost_params_t *params, int nranks)
{
    const weft_cost_params_t *c = params;

    if (!fits_mode(algo, c)) {
        return 0;
    }
    switch (algo->layout) {
    case WEFT_COLL_LAYOUT_ONE_NODE:
        return c->shm && !c->flat_only && c->nodes == 1 && c->local == nranks;
    case WEFT_COLL_LAYOUT_NODES:
        return c->shm && !c->flat_only && c->nodes > 1 && c->local > 1 &&
               c->nodes * c->local == nranks;
    default:
        return 1;
    }
}

double weft__cost_predict(const weft_coll_algo_t *algo, const weft_cost_params_t *params,
                          size_t bytes, int nranks)
{
    weft_cost_params_t one_node;

    if (nranks <= 1) {
        return 0;
    }
    if (!weft__cost_fits(algo, params, nranks)) {
        return -1;
    }
    if (algo->layout == WEFT_COLL_LAYOUT_ANY && params->nodes == 1 && params->shm &&
        !params->flat_only) {
        /* Point to point inside one node: every message is copied by its sender into the
         * transport's buffers and out by its receiver, on the cores the ranks run on, where
         * the ping-pong that measured beta overlapped the two copies on two idle cores and
         * ran one direction at a time. Measured at np 2, 64 KiB-4 MiB: the point-to-point
         * forms of alltoall, allgather, allreduce, reduce_scatter, bcast, reduce, gather and
         * scatter took up to 1.3-2.8x their model and lost to the shared-memory forms the
         * model preferred them to. So beta counts twice there. */
        one_node = *params;
        one_node.beta *= 2;
        params = &one_node;
    }
    return algo->cost(params, (double)bytes, nranks);
}

/* weft_info --explain: which form of a hierarchical row the parameters take */
static const char *form_note(const weft_coll_algo_t *a, const weft_cost_params_t *c, size_t bytes)
{
    size_t chunk;

    if (a->layout != WEFT_COLL_LAYOUT_NODES || !has_leader_form(a->kind)) {
        return "";
    }
    if (weft__cost_hier_leader(c, a->kind, (double)bytes)) {
        return "    (leader form: one rail carries it all; WEFT_HIER_LEADER)";
    }
    chunk = weft__cost_hier_pipeline(c, a->kind, (double)bytes);
    if (chunk > 0) {
        static char note[128];

        snprintf(note, sizeof(note),
                 "    (sliced, pipelined in %.0f chunks: a slice on every rail; WEFT_HIER_LEADER, "
                 "WEFT_HIER_PIPELINE)",
                 chunks_of((double)bytes, chunk));
        return note;
    }
    return "    (sliced: a slice on every rail; WEFT_HIER_LEADER)";
}

const weft_coll_algo_t *weft__coll_choose(weft_coll_kind_t kind, size_t bytes, int nranks,
                                          const weft_cost_params_t *params, FILE *explain)
{
    const weft_coll_algo_t *rule = weft__coll_tune_match(kind, bytes);
    const weft_coll_algo_t *best = NULL;
    double best_t = 0;
    int n;
    const weft_coll_algo_t *list;

    if (params->flat_only) {
        rule = NULL; /* a rail inside a hierarchical algorithm: rules name the outer one */
    } else if (rule != NULL && weft__cost_predict(rule, params, bytes, nranks) < 0 && nranks > 1) {
        rule = NULL; /* it needs shared memory or nodes this communicator lacks */
    }
    if (rule != NULL && explain == NULL) {
        return rule;
    }
    list = weft__coll_algos_of(kind, &n);
    for (int i = 0; i < n; i++) {
        const weft_coll_algo_t *a = &list[i];
        double t = weft__cost_predict(a, params, bytes, nranks);

        if (explain != NULL) {
            if (t < 0 && !fits_mode(a, params)) {
                fprintf(explain, "  %-24s %14s    (not here: %s)\n", a->name, "-",
                        params->reproducible ? "WEFT_REPRODUCIBLE=yes takes the ordered rows"
                                             : "only with WEFT_REPRODUCIBLE=yes");
            } else if (t < 0) {
                fprintf(explain, "  %-24s %14s    (not here: needs %s)\n", a->name, "-",
                        weft__coll_layout_name(a->layout));
            } else {
                fprintf(explain, "  %-24s %14.3f us%s\n", a->name, t * 1e6,
                        form_note(a, params, bytes));
            }
        }
        if (t >= 0 && (best == NULL || t < best_t)) {
            best = a;
            best_t = t;
        }
    }
    if (rule != NULL) {
        if (explain != NULL) {
            fprintf(explain, "choice: %s, forced by a WEFT_TUNE rule\n", rule->name);
        }
        return rule;
    }
    if (explain != NULL) {
        if (best != NULL) {
            fprintf(explain, "choice: %s, the lowest predicted time\n", best->name);
        } else {
            fprintf(explain, "choice: none, no algorithm of this collective is built in\n");
        }
    }
    return best;
}
