/*
 * Selection and the start of an operation. The algorithm is the cheapest of
 * its collective's rows in the registry (coll/registry.c) by the cost model
 * (coll/cost.c); WEFT_TUNE rules, parsed once at weft_init and checked
 * against the registry, take precedence: the first rule whose collective and
 * [lo, hi) byte range match wins. Also the module's configuration table.
 */
#include "coll/coll.h"
#include "coll/comm_state.h"
#include "coll/diag/check.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"
#include "coll/cost.h"
#include "coll/shm/shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

weft_coll_config_t weft__coll_config;

_Static_assert(WEFT_COLL_KIND_COUNT <= sizeof(((struct weft_comm *)0)->coll->last_choice) /
                                           sizeof(((struct weft_comm *)0)->coll->last_choice[0]),
               "a communicator remembers one choice per collective");

/* WEFT_SHM_CMA, WEFT_HIER_LEADER: a size, inf or auto */
static weft_status_t parse_size_auto(const char *text, void *dst)
{
    if (strcmp(text, "auto") == 0) {
        *(size_t *)dst = WEFT_CONFIG_AUTO;
        return WEFT_OK;
    }
    if (weft__config_parse_size_inf(text, dst) != WEFT_OK) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "'%s' is not a size, inf or auto (expected e.g. 1m, inf, auto)", text);
    }
    return WEFT_OK;
}

static const weft_config_entry_t coll_entries[] = {
    {"RING_FRAG_SIZE", "256k",
     "bytes per fragment in ring algorithms: fragments of a block move and reduce "
     "independently, so smaller fragments overlap more but cost more messages",
     weft__config_parse_size, offsetof(weft_coll_config_t, ring_frag_size)},
    {"COST_ALPHA_US", "2",
     "cost model: microseconds per message (alpha), used where it is not measured "
     "(WEFT_COST_MEASURE=no, in-process ranks) and by weft_info --explain",
     weft__config_parse_double, offsetof(weft_coll_config_t, cost_alpha_us)},
    {"COST_BETA_GBS", "8", "cost model: GB/s moved between ranks (1/beta)",
     weft__config_parse_double, offsetof(weft_coll_config_t, cost_beta_gbs)},
    {"COST_GAMMA_GBS", "5", "cost model: GB/s reduced (1/gamma)", weft__config_parse_double,
     offsetof(weft_coll_config_t, cost_gamma_gbs)},
    {"COST_OVERSUB_US", "50",
     "cost model: microseconds added to alpha when this machine runs more ranks of the "
     "communicator than the cores they may run on (a message may wait for its receiver to be "
     "scheduled)",
     weft__config_parse_double, offsetof(weft_coll_config_t, cost_oversub_us)},
    {"COST_OVERSUB_SHM_US", "5",
     "cost model: microseconds added to a shared-memory handoff when a machine of the "
     "communicator runs more of its ranks than the cores they may run on (as "
     "WEFT_COST_OVERSUB_US, for the steps through a node's segment, which wait for a core "
     "less often than a message does: a waiting rank polls the segment; a larger value makes "
     "the hierarchical algorithms win less often on several nodes)",
     weft__config_parse_double, offsetof(weft_coll_config_t, cost_oversub_shm_us)},
    {"COST_MEASURE", "yes",
     "measure alpha, beta and gamma when a communicator between processes is created (a few "
     "ping-pongs and a local reduction; the ranks agree on the largest values)",
     weft__config_parse_bool, offsetof(weft_coll_config_t, cost_measure)},
    {"COST_SHM_ALPHA_US", "0.5",
     "cost model: microseconds for one flag handoff between ranks of a node through shared "
     "memory, where it is not measured (measured with alpha when a communicator between "
     "processes is created, unless WEFT_COST_MEASURE=no)",
     weft__config_parse_double, offsetof(weft_coll_config_t, cost_shm_alpha_us)},
    {"COST_SHM_COPY_GBS", "40",
     "cost model: GB/s copied through shared memory where it is not measured (it is measured "
     "when a communicator's segment is created)",
     weft__config_parse_double, offsetof(weft_coll_config_t, cost_shm_copy_gbs)},
    {"CHECK_ARGS", "no",
     "before every collective, send its signature (collective, count, dtype, op, root) to every "
     "other rank and compare: ranks that disagree all fail with WEFT_ERR_MISMATCH naming the "
     "field, whatever the path; no: only the checks that cost nothing (message sizes, the "
     "shared-memory signature); set it alike on every rank",
     weft__config_parse_bool, offsetof(weft_coll_config_t, check_args)},
    {"RECORD_OPS", "256",
     "operations each communicator's flight recorder keeps (collective, sequence number, "
     "count, dtype, op, root, algorithm, times, state); printed by weft_comm_dump and logged "
     "when the communicator fails with a timeout or a dead peer; 0: none",
     weft__config_parse_size, offsetof(weft_coll_config_t, record_ops)},
    {"DEVICE_TASK", "yes",
     "a collective among the ranks of one node, enqueued on a stream or called blocking on "
     "device buffers, runs as one task on the stream (a blocking call: on the calling "
     "thread's own stream), on the device itself (emu: the stream's worker, which reads and "
     "writes the buffers directly), instead of through weft's progress thread and a device "
     "operation per step; its device buffers then go through the node's slots, not IPC. no: "
     "the progress thread and IPC. Devices that cannot run weft's code on their streams "
     "(CUDA) use the progress thread either way; set it alike on every rank",
     weft__config_parse_bool, offsetof(weft_coll_config_t, device_task)},
    {"DEVICE_STAGE", "256k",
     "an enqueued collective of device buffers across nodes (allreduce, bcast, reduce, "
     "allgather, reduce_scatter, alltoall, gather, scatter) whose vector (one rank's) is up to "
     "this many bytes goes through host memory once: the stream copies the input to pinned "
     "host memory before the operation and the result back after it, and the collective runs "
     "on host memory (no staging copy per message, reductions on the host); 0: never. Set it "
     "alike on every rank",
     weft__config_parse_size, offsetof(weft_coll_config_t, device_stage)},
    {"SHM", "yes",
     "collectives through a shared-memory segment among the ranks of a communicator on one "
     "node (and hierarchical ones across nodes); no: point-to-point only",
     weft__config_parse_bool, offsetof(weft_coll_config_t, shm)},
    {"SHM_SLOT", "1m",
     "bytes each local rank stages per round in the shared-memory segment (two buffers per "
     "rank; capped so that a node's segment stays under 64 MiB)",
     weft__config_parse_size, offsetof(weft_coll_config_t, shm_slot)},
    {"SHM_SMALL", "16k",
     "shared-memory allreduce and reduce up to this many bytes: one phase (every rank "
     "reduces every rank's data); above: each rank reduces one slice, then all copy",
     weft__config_parse_size, offsetof(weft_coll_config_t, shm_small)},
    {"SHM_CMA", "auto",
     "shared-memory allreduce of host buffers from this many bytes up to WEFT_SHM_STREAM "
     "reads the other local ranks' buffers directly (process_vm_readv, one copy instead of "
     "two through the segment) where the kernel allows it; auto: from 1m where the machine "
     "has a core for every rank of the communicator and the node's single-copy reads were "
     "measured at least half as fast as its copies, never elsewhere; inf: never",
     parse_size_auto, offsetof(weft_coll_config_t, shm_cma)},
    {"SHM_CMA_COPY", "auto",
     "shared-memory bcast, scatter and gather of host buffers from this many bytes up (the "
     "vector of bcast, a block of the others): every rank reads the root's buffer where it "
     "is, its block of it (scatter), or the root every rank's block (gather) "
     "(process_vm_readv, one copy instead of two through the segment) where the kernel "
     "allows it; auto: from 32k where the machine has a core for every rank of the "
     "communicator and the node's single-copy reads were measured at least half as fast as "
     "its copies, never elsewhere; inf: never",
     parse_size_auto, offsetof(weft_coll_config_t, shm_cma_copy)},
    {"SHM_CMA_ALLGATHER", "auto",
     "shared-memory allgather (and allgatherv) of host buffers from this many bytes (the "
     "whole result) up: every rank reads the others' blocks where they are "
     "(process_vm_readv, one copy instead of two through the segment) where the kernel "
     "allows it; auto: from 64k where the node's single-copy reads were measured at least "
     "half as fast as its copies, never elsewhere; inf: never",
     parse_size_auto, offsetof(weft_coll_config_t, shm_cma_allgather)},
    {"SHM_CMA_ALLTOALL", "auto",
     "shared-memory alltoall of host buffers (not in place) from blocks of this many bytes "
     "up: every rank reads its block of each other rank's send buffer where it is "
     "(process_vm_readv, one copy instead of two through the segment) where the kernel "
     "allows it; auto: from 16k where the node's single-copy reads were measured at least "
     "half as fast as its copies, never elsewhere; inf: never",
     parse_size_auto, offsetof(weft_coll_config_t, shm_cma_alltoall)},
    {"SHM_STREAM", "8m",
     "shared-memory allreduce of host buffers from this many bytes (the whole vector) writes "
     "its result with non-temporal stores: past the caches, which it would not stay in, "
     "without reading it first, leaving them to the segment's buffers; inf: never",
     weft__config_parse_size_inf, offsetof(weft_coll_config_t, shm_stream)},
    {"HIER_LEADER", "auto",
     "hierarchical allreduce, bcast, allgather, reduce_scatter and reduce (several nodes) of up "
     "to this many bytes: one rail carries the whole vector, one rank per node, which the "
     "node's data reaches and leaves through shared memory (the form for latency); above, "
     "every rail carries a slice (the form for bandwidth); auto: the form the cost model "
     "predicts cheaper; 0: never; inf: always",
     parse_size_auto, offsetof(weft_coll_config_t, hier_leader)},
    {"HIER_PIPELINE", "auto",
     "hierarchical allreduce, bcast, reduce, allgather and reduce_scatter (several nodes, the "
     "sliced form) of vectors larger than this many bytes (an allgather: its result; a "
     "reduce_scatter: its input) run in chunks of it (at "
     "most 64 chunks: larger ones beyond), pipelined: the nodes' reduce-scatter (bcast: the "
     "root's node's bcast) of a chunk overlaps the rails' collective of the one before, whose "
     "allgather overlaps the next rails' collective; auto: the chunks the cost model "
     "predicts fastest (2-64 of at least 64k; none where ranks outnumber cores, as nothing "
     "then runs beside the rails); 0: one piece",
     parse_size_auto, offsetof(weft_coll_config_t, hier_pipeline)},
    {"HIER_ALLTOALL", "128k",
     "hierarchical alltoall (several nodes) of up to this many bytes per rank (the whole send "
     "buffer): each node's blocks for a rail's ranks cross the network together (one message "
     "per node pair and rail: fewer messages, every byte copied once more inside the nodes); "
     "above, only the blocks for the node's own ranks go through shared memory and every other "
     "block straight to its rank (simulated hosts, blocks per destination: the first faster "
     "up to 32k on two hosts of two ranks, at 4k on four of two, slower from 2m and 32k); 0: "
     "always the second; inf: always the first",
     weft__config_parse_size_inf, offsetof(weft_coll_config_t, hier_alltoall)},
    {"HIER_ALLTOALL_AT_ONCE", "1m",
     "the hierarchical alltoall's form for large blocks (above WEFT_HIER_ALLTOALL) sends and "
     "receives the blocks of the other nodes' ranks all at once from blocks of this many bytes "
     "(below, pairwise step after step; simulated hosts: at once faster from 2m, slower at "
     "256k); inf: never",
     weft__config_parse_size_inf, offsetof(weft_coll_config_t, hier_alltoall_at_once)},
    {"HIER_DIRECT", "16k",
     "hierarchical gather and scatter (several nodes) of blocks of more than this many bytes "
     "per rank: the root's node's blocks through shared memory and every other block straight "
     "between its rank and the root, at once, instead of each node's blocks together on the "
     "root's rail and a second hop through that node's shared memory; 0: always direct; inf: "
     "never",
     weft__config_parse_size_inf, offsetof(weft_coll_config_t, hier_direct)},
    {"REPRODUCIBLE", "no",
     "reductions (allreduce, reduce, reduce_scatter, reduce_scatter_v) bitwise reproducible: "
     "every element is combined in rank order, grouped alike, whatever the placement, the "
     "nodes and the ranks per node, for a given communicator size, by the ordered "
     "algorithms only (WEFT_TUNE rules naming others are dropped for them); slower, set it "
     "alike on every rank",
     weft__config_parse_bool, offsetof(weft_coll_config_t, reproducible)},
    {"SPIN_US", "50",
     "microseconds a waiting collective busy-polls before it starts yielding its core between "
     "polls (skipped when this machine runs more ranks of the communicator than the cores they "
     "may run on together, and in device tasks, whose stream's thread shares the cores with the "
     "application's)",
     weft__config_parse_int, offsetof(weft_coll_config_t, spin_us)},
    {"YIELD_US", "2000",
     "microseconds a waiting collective then polls with sched_yield before it lets the "
     "transport sleep until a message arrives",
     weft__config_parse_int, offsetof(weft_coll_config_t, yield_us)},
};

static const char *coll_values[sizeof(coll_entries) / sizeof(coll_entries[0])];

weft_config_table_t weft__coll_config_table = {"coll", coll_entries,
                                               sizeof(coll_entries) / sizeof(coll_entries[0]),
                                               &weft__coll_config, coll_values};

typedef struct tune_rule {
    weft_coll_kind_t kind;
    size_t lo;
    size_t hi; /* exclusive; SIZE_MAX for inf */
    const weft_coll_algo_t *algo;
} tune_rule_t;

static tune_rule_t *rules;
static size_t nrules;

const weft_coll_algo_t *weft__coll_tune_match(weft_coll_kind_t kind, size_t bytes)
{
    for (size_t i = 0; i < nrules; i++) {
        if (rules[i].kind == kind && bytes >= rules[i].lo &&
            (bytes < rules[i].hi || rules[i].hi == SIZE_MAX)) {
            return rules[i].algo;
        }
    }
    return NULL;
}

const weft_coll_algo_t *weft__coll_select(weft_coll_kind_t kind, size_t bytes, int nranks)
{
    weft_cost_params_t params;

    weft__cost_defaults(&params);
    return weft__coll_choose(kind, bytes, nranks, &params, NULL);
}

const weft_coll_algo_t *weft__coll_choose_flat(struct weft_comm *comm, weft_coll_kind_t kind,
                                               size_t bytes, int nranks)
{
    weft_cost_params_t params;

    weft__cost_params(comm, &params);
    params.flat_only = 1;
    return weft__coll_choose(kind, bytes, nranks, &params, NULL);
}

size_t weft__coll_hier_pipeline(struct weft_comm *comm, weft_coll_kind_t kind, size_t bytes)
{
    weft_cost_params_t params;

    weft__cost_params(comm, &params);
    return weft__cost_hier_pipeline(&params, kind, (double)bytes);
}

int weft__coll_hier_leader(struct weft_comm *comm, weft_coll_kind_t kind, size_t bytes)
{
    weft_cost_params_t params;

    weft__cost_params(comm, &params);
    return weft__cost_hier_leader(&params, kind, (double)bytes);
}

void weft__coll_tune_release(void)
{
    free(rules);
    rules = NULL;
    nrules = 0;
}

/* The names of kind's algorithms, ", "-separated, for an error message. */
static const char *algo_names(weft_coll_kind_t kind, char *buf, size_t len)
{
    int n;
    const weft_coll_algo_t *rows = weft__coll_algos_of(kind, &n);
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", rows[i].name);
    }
    return buf;
}

/* The collectives that have algorithms, ", "-separated. */
static const char *kind_list(char *buf, size_t len)
{
    size_t used = 0;
    int n;

    buf[0] = '\0';
    for (int k = 0; k < WEFT_COLL_KIND_COUNT && used < len; k++) {
        if (weft__coll_algos_of((weft_coll_kind_t)k, &n) != NULL) {
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                     weft__coll_kind_name((weft_coll_kind_t)k));
        }
    }
    return buf;
}

static weft_status_t parse_rule(char *text, tune_rule_t *rule)
{
    char *coll = text, *range, *algo, *dash, names[256];
    weft_status_t status;

    range = strchr(coll, ':');
    algo = range ? strchr(range + 1, ':') : NULL;
    if (algo == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "WEFT_TUNE rule '%s': expected collective:lo-hi:algorithm", text);
    }
    *range++ = '\0';
    *algo++ = '\0';
    if (weft__coll_kind_parse(coll, &rule->kind) != WEFT_OK) {
        return weft__error(WEFT_ERR_INVALID_ARG, "WEFT_TUNE: unknown collective '%s' (one of %s)",
                           coll, kind_list(names, sizeof(names)));
    }
    rule->algo = weft__coll_find(rule->kind, algo);
    if (rule->algo == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "WEFT_TUNE: %s has no algorithm '%s' (it has %s)",
                           coll, algo, algo_names(rule->kind, names, sizeof(names)));
    }
    dash = strchr(range, '-');
    if (dash == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "WEFT_TUNE: range '%s' of %s is not lo-hi", range,
                           coll);
    }
    *dash++ = '\0';
    status = weft__parse_size(range, 0, &rule->lo);
    if (status == WEFT_OK) {
        status = weft__parse_size(dash, 1, &rule->hi);
    }
    if (status != WEFT_OK) {
        return weft__error(WEFT_ERR_INVALID_ARG, "WEFT_TUNE: bad range %s-%s for %s", range, dash,
                           coll);
    }
    if (rule->lo >= rule->hi) {
        return weft__error(WEFT_ERR_INVALID_ARG, "WEFT_TUNE: empty range %s-%s for %s", range, dash,
                           coll);
    }
    return WEFT_OK;
}

weft_status_t weft__coll_tune_load(const char *text)
{
    char *copy, *save = NULL;
    weft_status_t status = WEFT_OK;
    size_t n = 1;

    weft__coll_tune_release();
    if (text == NULL || *text == '\0') {
        return WEFT_OK;
    }
    for (const char *c = text; *c; c++) {
        n += *c == ',';
    }
    copy = strdup(text);
    rules = calloc(n, sizeof(*rules));
    if (copy == NULL || rules == NULL) {
        free(copy);
        weft__coll_tune_release();
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot parse WEFT_TUNE");
    }
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        status = parse_rule(tok, &rules[nrules]);
        if (status != WEFT_OK) {
            break;
        }
        nrules++;
    }
    free(copy);
    if (status != WEFT_OK) {
        weft__coll_tune_release();
    }
    return status;
}

size_t weft__coll_bytes(const weft_coll_args_t *a)
{
    size_t n = 0;

    switch (a->kind) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_BCAST:
    case WEFT_COLL_REDUCE:
        return a->count * a->esize;
    case WEFT_COLL_BARRIER:
        return 0;
    case WEFT_COLL_ALLGATHERV:
    case WEFT_COLL_ALLTOALLV:
    case WEFT_COLL_REDUCE_SCATTER_V:
        for (int r = 0; r < a->size; r++) {
            n += a->counts[r];
        }
        return n * a->esize;
    default:
        return a->count * a->esize * (size_t)a->size;
    }
}

static const weft_device_ops_t *device_of(const weft_coll_args_t *args)
{
    if (args->dev != NULL) {
        return args->dev;
    }
    return weft__device_query(args->dst != NULL ? (const void *)args->dst : args->src);
}

/* The health check at a collective's start (the liveness check's clock not every time:
 * coll/shm/shm.h). What a start must see at once it reads every time: a failure this rank knows
 * of, an abort, a dump asked for by signal. The whole poll (a peer's failure notice, a dead peer,
 * through three calls of other layers' tables: 3 % of an 8-byte allreduce at np 2) every 16th
 * start only: a collective that waits for its peers polls all of it while it waits. */
static weft_status_t entry_health(struct weft_comm *comm)
{
    weft_status_t status;

    if (comm->coll->entries++ % 16 != 0 && comm->failed == WEFT_OK &&
        !atomic_load_explicit(&comm->aborted, memory_order_relaxed) && weft__dump_requests() == 0) {
        return WEFT_OK;
    }
    comm->coll->at_entry = 1;
    status = weft__comm_health(comm);
    comm->coll->at_entry = 0;
    return status;
}

/* The end of an operation run on the segment without a schedule: one that did not wait ended
 * within the clock's resolution of its start. */
static void record_end_run(struct weft_comm *comm, long rec, weft_status_t status, int waited)
{
    if (waited || status != WEFT_OK) {
        weft__record_end(comm, rec, status);
    } else {
        weft__record_end_quick(comm, rec, status);
    }
}

/* The algorithm and the operation's description (health checked first). */
static weft_status_t prepare(struct weft_comm *comm, const weft_coll_args_t *args,
                             const weft_coll_algo_t **algo_p, weft_op_desc_t *desc)
{
    weft_cost_params_t params;
    const weft_coll_algo_t *algo;
    size_t bytes = weft__coll_bytes(args);
    struct weft_comm_choice *last = &comm->coll->last_choice[args->kind];
    weft_status_t status = entry_health(comm);

    if (status != WEFT_OK) {
        return status;
    }
    /* the same collective at the same size as last time: the same choice
     * (parameters and rules do not change once measured) */
    if (last->algo != NULL && last->bytes == bytes && last->measured == comm->coll->cost_measured) {
        algo = (const weft_coll_algo_t *)last->algo;
    } else {
        weft__cost_params(comm, &params);
        algo = weft__coll_choose(args->kind, bytes, args->size, &params, NULL);
        last->algo = algo;
        last->bytes = bytes;
        last->measured = comm->coll->cost_measured;
    }
    if (algo == NULL) {
        return weft__error(WEFT_ERR_UNSUPPORTED, "%s: no algorithm is built in",
                           weft__coll_kind_name(args->kind));
    }
    memset(desc, 0, sizeof(*desc));
    desc->coll = weft__coll_kind_name(args->kind);
    desc->count = args->count;
    desc->bytes = bytes;
    desc->dtype = args->dtype;
    desc->op = args->op;
    desc->algo = algo->name;
    weft__sig_make(&desc->sig, args, device_of(args)->memtype);
    if (last->sig_hash != 0 && weft__sig_equal(&desc->sig, &last->sig)) {
        desc->sig_hash = last->sig_hash; /* the last call's arguments again: not hashed again */
    } else {
        desc->sig_hash = last->sig_hash = weft__sig_hash(&desc->sig);
        last->sig = desc->sig;
    }
    desc->form = weft__coll_form != NULL ? weft__coll_form : "call";
    if (args->op == WEFT_AVG && args->dst != NULL) {
        switch (args->kind) {
        case WEFT_COLL_ALLREDUCE:
        case WEFT_COLL_REDUCE_SCATTER:
        case WEFT_COLL_REDUCE:
            desc->avg_buf = args->dst;
            desc->avg_count = args->count;
            break;
        case WEFT_COLL_REDUCE_SCATTER_V:
            desc->avg_buf = args->dst;
            desc->avg_count = args->counts[args->rank];
            break;
        default:
            break;
        }
        desc->avg_divisor = (size_t)args->size;
    }
    *algo_p = algo;
    return WEFT_OK;
}

/* A collective of no data, which the entry points complete at once unless
 * WEFT_CHECK_ARGS=1 (then only the check runs). */
static int empty(const weft_coll_args_t *a)
{
    switch (a->kind) {
    case WEFT_COLL_BARRIER:
    case WEFT_COLL_ALLGATHERV:
    case WEFT_COLL_ALLTOALLV:
    case WEFT_COLL_REDUCE_SCATTER_V:
        return 0;
    default:
        return a->count == 0;
    }
}

/* The operation's tasks, after the argument check when WEFT_CHECK_ARGS=1. */
static weft_status_t build(weft_sched_t *s, const weft_coll_algo_t *algo,
                           const weft_coll_args_t *args)
{
    int check, mark;
    weft_status_t status;

    if (!weft__coll_config.check_args) {
        return algo->build(s, args);
    }
    check = weft__check_build(s);
    if (empty(args)) {
        return WEFT_OK; /* weft__sched_start reports a failure of the check's build */
    }
    mark = weft__sched_mark(s);
    status = algo->build(s, args);
    weft__sched_enclose(s, mark, check);
    return status;
}

/* The root the recorder shows: -1 for collectives without one. */
static int root_of(const weft_coll_args_t *a)
{
    switch (a->kind) {
    case WEFT_COLL_BCAST:
    case WEFT_COLL_REDUCE:
    case WEFT_COLL_GATHER:
    case WEFT_COLL_SCATTER:
        return a->root;
    default:
        return -1;
    }
}

_Thread_local const char *weft__coll_form;
_Thread_local int weft__coll_on_stream;

uint64_t weft__coll_spin_ns(const struct weft_comm *comm)
{
    /* a device task on an emu stream spinning for its peer kept the application's thread, which
     * enqueues the next ones, off the core: a chain of 64 enqueued 8-byte allreduces at np 2 on
     * 2 cores took 7.2-7.6 us each, 1.4 yielding (benchmarks/weft_bench -d emu --chain 64) */
    if (comm->oversubscribed || weft__coll_on_stream) {
        return 0;
    }
    return (uint64_t)weft__coll_config.spin_us * 1000;
}

weft_status_t weft__coll_start(struct weft_comm *comm, const weft_coll_args_t *args,
                               weft_sched_t **sched_p)
{
    return weft__coll_start_staged(comm, args, NULL, sched_p);
}

weft_status_t weft__coll_start_staged(struct weft_comm *comm, const weft_coll_args_t *args,
                                      const weft_coll_stage_t *stage, weft_sched_t **sched_p)
{
    const weft_coll_algo_t *algo;
    weft_op_desc_t desc;
    weft_sched_t *s;
    weft_status_t status = prepare(comm, args, &algo, &desc);
    long rec;

    if (status == WEFT_OK) {
        status = weft__sched_create(comm, &desc, device_of(args), &s);
    }
    if (status != WEFT_OK) {
        if (stage != NULL) {
            weft__device_bounce_put(stage->dev, stage->stage);
        }
        return status;
    }
    if (stage != NULL) { /* the schedule gives it back from here on */
        weft__sched_stage_out(s, stage->dev, stage->stage, stage->dst, stage->from, stage->bytes);
    }
    rec = weft__record_start(comm, &desc, weft__sched_seq(s), root_of(args));
    weft__sched_record(s, rec);
    status = build(s, algo, args);
    if (status == WEFT_OK) {
        status = weft__sched_start(s);
    }
    if (status != WEFT_OK) {
        weft__record_end(comm, rec, status);
        weft__sched_destroy(s);
        return status;
    }
    *sched_p = s;
    return WEFT_OK;
}

_Static_assert(WEFT_COLL_KIND_COUNT <= sizeof(((struct weft_coll_comm *)0)->line) /
                                           sizeof(((struct weft_coll_comm *)0)->line[0]),
               "a line entry per collective");

/* weft__coll_line's run: the call that sendbuf and recvbuf (as the caller passed them) name, at
 * src and dst, is kept for weft__coll_line_again where keep is 1. */
static int line_run(struct weft_comm *comm, weft_coll_kind_t kind, const void *src, void *dst,
                    size_t count, weft_dtype_t dtype, weft_op_t op, int root, size_t esize,
                    const void *const keep[2], weft_status_t *status_p)
{
    struct weft_coll_comm *cc = comm->coll;
    struct weft_coll_line *line = &cc->line[kind];
    weft_op_desc_t *desc = &line->desc;
    const weft_coll_args_t shape = {.kind = kind, .root = root};
    int handled, waited;
    weft_status_t status;
    long rec;

    if (!line->valid || cc->shm == NULL || desc->count != count || desc->dtype != dtype ||
        desc->op != op || (root_of(&shape) >= 0 && desc->sig.root != root) ||
        line->measured != cc->cost_measured || weft__thread_busy() ||
        weft__coll_config.check_args || weft__obs_flags != 0) {
        return 0;
    }
    status = entry_health(comm);
    if (status != WEFT_OK) {
        *status_p = status;
        return 1;
    }
    desc->form = weft__coll_form != NULL ? weft__coll_form : "call";
    rec = weft__record_start(comm, desc, weft__comm_peek_seq(comm), root_of(&shape));
    status = weft__shm_line_run(comm, kind, desc, src, dst, count, esize, root, &handled, &waited);
    if (!handled) {
        weft__record_drop(comm, rec);
        return 0;
    }
    cc->line_runs++;
    line->runs++;
    record_end_run(comm, rec, status, waited);
    if (status != WEFT_OK) {
        line->epoch = 0;
    } else if (keep != NULL) {
        line->sendbuf = keep[0];
        line->recvbuf = keep[1];
        line->src = src;
        line->dst = dst;
        line->esize = esize;
        line->epoch = weft__device_host_epoch();
    }
    *status_p = status == WEFT_OK ? status : weft__comm_fail(comm, status);
    return 1;
}

int weft__coll_line(struct weft_comm *comm, weft_coll_kind_t kind, const void *src, void *dst,
                    size_t count, weft_dtype_t dtype, weft_op_t op, int root, size_t esize,
                    const void *sendbuf, const void *recvbuf, weft_status_t *status_p)
{
    const void *const keep[2] = {sendbuf, recvbuf};

    return line_run(comm, kind, src, dst, count, dtype, op, root, esize, keep, status_p);
}

int weft__coll_line_kept(struct weft_comm *comm, weft_coll_kind_t kind, const void *sendbuf,
                         const void *recvbuf, size_t count, weft_dtype_t dtype, weft_op_t op,
                         int root)
{
    const struct weft_coll_line *line = &comm->coll->line[kind];
    const weft_coll_args_t shape = {.kind = kind, .root = root};

    return line->epoch != 0 && line->sendbuf == sendbuf && line->recvbuf == recvbuf &&
           line->desc.count == count && line->desc.dtype == dtype && line->desc.op == op &&
           (root_of(&shape) < 0 || line->desc.sig.root == root) &&
           line->epoch == weft__device_host_epoch();
}

int weft__coll_line_again(struct weft_comm *comm, weft_coll_kind_t kind, int root,
                          weft_status_t *status_p)
{
    const struct weft_coll_line *line = &comm->coll->line[kind];

    if (!line_run(comm, kind, line->src, line->dst, line->desc.count, line->desc.dtype,
                  line->desc.op, root, line->esize, NULL, status_p)) {
        return 0;
    }
    comm->coll->line_again++;
    return 1;
}

weft_status_t weft__coll_run(struct weft_comm *comm, const weft_coll_args_t *args)
{
    const weft_coll_algo_t *algo;
    weft_op_desc_t desc;
    weft_sched_t *s;
    weft_status_t status = prepare(comm, args, &algo, &desc);
    int handled = 0, waited = 0;
    long rec;

    if (status != WEFT_OK) {
        return status;
    }
    /* nothing else outstanding (on any communicator of this thread: they
     * would not progress meanwhile): a shared-memory operation runs here */
    if (!weft__thread_busy() && !weft__coll_config.check_args && algo->build == weft__shm_build &&
        weft__shm_usable(comm, args)) {
        uint32_t seq = weft__comm_peek_seq(comm);
        uint64_t t0 = WEFT_UNLIKELY(weft__obs_flags != 0) ? weft__time_ns() : 0;

        rec = weft__record_start(comm, &desc, seq, root_of(args));
        status = weft__shm_run(comm, args, &desc, device_of(args), &handled, &waited);
        if (handled) {
            {
                struct weft_coll_line *line = &comm->coll->line[args->kind];

                line->valid = status == WEFT_OK && weft__shm_line_fits(comm, args, desc.sig.mem);
                line->epoch = 0;
                if (line->valid) {
                    line->desc = desc;
                    line->measured = comm->coll->cost_measured;
                }
            }
            record_end_run(comm, rec, status, waited);
            if (WEFT_UNLIKELY(weft__obs_flags != 0)) {
                weft__obs_op_end(comm, &desc, seq, t0, status);
            }
            return status == WEFT_OK ? status : weft__comm_fail(comm, status);
        }
        weft__record_drop(comm, rec); /* it did not run: the schedule below is recorded */
    }
    status = weft__sched_create(comm, &desc, device_of(args), &s);
    if (status != WEFT_OK) {
        return status;
    }
    rec = weft__record_start(comm, &desc, weft__sched_seq(s), root_of(args));
    weft__sched_record(s, rec);
    status = build(s, algo, args);
    if (status == WEFT_OK) {
        status = weft__sched_run(s);
    }
    weft__record_end(comm, rec, status);
    weft__sched_destroy(s);
    if (status == WEFT_OK && comm->coll->active != NULL) {
        /* operations freed unfinished before this one end first, so that
         * a caller that synchronizes through this collective finds their
         * buffers final (a freed request leaves no other way to know) */
        status = weft__sched_wait_freed(comm);
    }
    return status;
}
