/*
 * weft_info: what this build of weft is and how it is configured.
 *   weft_info        version, build configuration and this machine's topology
 *   weft_info -c     every configuration variable: default, current value, help
 *   weft_info --explain COLLECTIVE BYTES RANKS [RANKS_PER_NODE]
 *                    every candidate algorithm's predicted time by the cost
 *                    model (configured parameters), and the choice with its reason
 *   weft_info --algorithms
 *                    the algorithm registry, a tab-separated row per algorithm
 *                    (the table of docs/algorithms.md is checked against it)
 *   weft_info --ranks
 *                    every rank of a job launched by mpirun or srun: how the
 *                    ranks map onto nodes, printed by rank 0
 *   weft_info --stats [ITERATIONS]
 *                    every rank of a job (or one alone): a short self-test of
 *                    the collectives, rank 0 prints weft_stats (tools/info_stats.c)
 */
#include "weft_config.h"

#include "coll/coll.h"
#include "coll/cost.h"
#include "runtime/comm.h"
#include "runtime/config.h"
#include "comm/node.h"
#include "runtime/topo.h"
#include "device/device.h"
#include "pt2pt/ucx/ucx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

/* tools/info_stats.c */
int weft_info_stats(int argc, char **argv);

/* Host names as exchanged by --ranks: fixed size, truncated, NUL-terminated. */
#define HOST_LEN 64

static void usage(FILE *f)
{
    fprintf(f, "usage: weft_info [-c] [--explain COLLECTIVE BYTES RANKS [RANKS_PER_NODE]] "
               "[--algorithms] [--ranks] [--stats [ITERATIONS]] [-h]\n"
               "  -c         print every configuration variable with its default, value and help\n"
               "  --explain  predicted time of every algorithm of COLLECTIVE for BYTES (one\n"
               "             rank's vector; k/m/g suffixes) on RANKS ranks, and the choice\n"
               "  --algorithms\n"
               "             every algorithm, one tab-separated line each after a header:\n"
               "             collective, algorithm, file, constraints, cost model, description\n"
               "  --ranks    run by every rank of a job (mpirun, srun): rank 0 prints each\n"
               "             rank's host, node and local rank (WEFT_RANKS_PER_NODE=k cuts\n"
               "             each machine into virtual nodes of k ranks)\n"
               "  --stats    run by every rank of a job, or alone: allreduce, bcast,\n"
               "             reduce_scatter, allgather, alltoall at 8 B, 1 KiB, 64 KiB, 1 MiB,\n"
               "             ITERATIONS (20) times each; rank 0 prints the counters of\n"
               "             weft_stats (calls, bytes, time, busbw) and each rank's total\n");
}

/* The transports (transport/device) UCX finds here, from its own report. */
static void print_ucx_transports(void)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucp_config_t *config;
    ucp_context_h context;
    char *text = NULL;
    size_t len = 0;
    FILE *mem;

    printf("  ucx transports:");
    if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
        printf(" (UCX configuration unreadable)\n");
        return;
    }
    if (ucp_init(&params, config, &context) != UCS_OK) {
        ucp_config_release(config);
        printf(" (UCX could not start)\n");
        return;
    }
    ucp_config_release(config);
    mem = open_memstream(&text, &len);
    if (mem != NULL) {
        ucp_context_print_info(context, mem);
        fclose(mem);
        for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
            char *tl = strstr(line, "flags -- ");
            if (strstr(line, "resource") != NULL && tl != NULL) {
                printf(" %s", tl + 9);
            }
        }
        free(text);
    }
    printf("\n");
    ucp_cleanup(context);
}

/* The device backends that can run here, and what UCX carries itself. */
static void print_devices(void)
{
    weft_ucx_context_t *ctx;

    printf("  device backends:");
    for (int t = WEFT_MEM_HOST; t <= WEFT_MEM_EMU; t++) {
        if (weft__device_ops((weft_memtype_t)t) != NULL) {
            printf(" %s", weft_memtype_name((weft_memtype_t)t));
        }
    }
    printf("\n");
    if (weft__device_ops(WEFT_MEM_CUDA) == NULL) {
        printf("  cuda: not usable: %s\n", weft__device_unavailable(WEFT_MEM_CUDA));
    }
    if (weft__ucx_context_get(&ctx) != WEFT_OK) {
        printf("  ucx memory: (UCX could not start: %s)\n", weft_last_error());
        return;
    }
    printf("  ucx carries cuda memory: %s\n",
           weft__ucx_context_memtypes(ctx) & (1u << WEFT_MEM_CUDA)
               ? "yes (device buffers go to UCX directly)"
               : "no (device buffers are staged through host memory, WEFT_STAGE_FRAG per step)");
    weft__ucx_context_put(ctx);
}

/* Cores, NUMA nodes, GPUs and NICs of this machine; 0, or 1 when hwloc failed. */
static int print_topology(void)
{
    weft_topo_t *topo;

    if (weft__topo_load(&topo) != WEFT_OK) {
        fprintf(stderr, "weft_info: %s\n", weft_last_error());
        return 1;
    }
    weft__topo_print(topo, stdout);
    weft__topo_free(topo);
    return 0;
}

static const char *plural(int n)
{
    return n == 1 ? "" : "s";
}

/* The ranks of one node as ranges: "0-3", "0,2,4". */
static void print_node_ranks(const weft_node_map_t *map, int node)
{
    const char *sep = "";

    for (int r = 0; r < map->size; r++) {
        int last = r;

        if (map->node_of[r] != node) {
            continue;
        }
        while (last + 1 < map->size && map->node_of[last + 1] == node) {
            last++;
        }
        if (last > r) {
            printf("%s%d-%d", sep, r, last);
        } else {
            printf("%s%d", sep, r);
        }
        sep = ",";
        r = last;
    }
}

/* Rank 0's report: a line per rank, then a line per node and the summary. */
static void print_rank_table(const weft_node_map_t *map, const char *hosts)
{
    int min_local = map->size, hosts_seen = 0;

    printf("%6s %6s %6s  %s\n", "rank", "node", "local", "host");
    for (int r = 0; r < map->size; r++) {
        printf("%6d %6d %6d  %s\n", r, map->node_of[r], map->local_of[r], hosts + r * HOST_LEN);
    }
    for (int n = 0; n < map->nnodes; n++) {
        int count = 0, first = -1;

        for (int r = 0; r < map->size; r++) {
            if (map->node_of[r] == n) {
                first = first < 0 ? r : first;
                count++;
            }
        }
        min_local = count < min_local ? count : min_local;
        printf("node %d on %s: %d rank%s: ", n, hosts + first * HOST_LEN, count, plural(count));
        print_node_ranks(map, n);
        printf("\n");
    }
    for (int r = 0; r < map->size; r++) {
        int seen = 0;

        for (int q = 0; q < r && !seen; q++) {
            seen = strcmp(hosts + q * HOST_LEN, hosts + r * HOST_LEN) == 0;
        }
        hosts_seen += !seen;
    }
    printf("%d rank%s on %d node%s ", map->size, plural(map->size), map->nnodes,
           plural(map->nnodes));
    if (map->uniform) {
        printf("(uniform: %d per node)", map->max_local);
    } else {
        printf("(not uniform: %d to %d per node)", min_local, map->max_local);
    }
    printf(", %d host name%s\n", hosts_seen, plural(hosts_seen));
}

/*
 * --ranks: every rank joins the world communicator, the host names are
 * gathered, rank 0 prints them beside the node map the communicator was
 * built with. Every rank destroys the communicator and finalizes, also
 * after a failure.
 */
static int rank_map(void)
{
    char host[HOST_LEN] = "";
    char *hosts = NULL;
    weft_comm_t comm;
    const weft_node_map_t *node;
    weft_status_t status;
    int rank = 0, size = 0, rc = 0;

    if (weft_init() != WEFT_OK) {
        fprintf(stderr, "weft_info --ranks: weft_init failed: %s\n", weft_last_error());
        return 1;
    }
    status = weft_comm_world(&comm);
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info --ranks: weft_comm_world failed: %s (%s)\n",
                weft_status_string(status), weft_last_error());
        weft_finalize();
        return 1;
    }
    weft_comm_rank(comm, &rank);
    weft_comm_size(comm, &size);
    if (gethostname(host, sizeof(host) - 1) != 0) {
        snprintf(host, sizeof(host), "?");
    }
    node = weft__comm_of(comm)->node;
    /* the same on every rank: all of them stop here or none */
    if (node == NULL || node->size != size) {
        fprintf(stderr, "weft_info --ranks: rank %d: the communicator carries no node map\n", rank);
        rc = 1;
        goto out;
    }
    hosts = malloc((size_t)size * HOST_LEN);
    if (hosts == NULL) {
        fprintf(stderr, "weft_info --ranks: rank %d: no memory for %d host names\n", rank, size);
        rc = 1;
        goto out;
    }
    status = weft_allgather(host, hosts, HOST_LEN, WEFT_UINT8, comm);
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info --ranks: rank %d: allgather of host names failed: %s (%s)\n",
                rank, weft_status_string(status), weft_last_error());
        rc = 1;
        goto out;
    }
    if (rank == 0) {
        print_rank_table(node, hosts);
        fflush(stdout);
    }

out:
    free(hosts);
    status = weft_comm_destroy(comm);
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info --ranks: rank %d: weft_comm_destroy failed: %s\n", rank,
                weft_last_error());
        rc = 1;
    }
    weft_finalize();
    return rc;
}

/* The collectives, ", "-separated. */
static void print_kinds(FILE *f)
{
    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        fprintf(f, "%s%s", k ? ", " : "", weft__coll_kind_name((weft_coll_kind_t)k));
    }
}

/* --explain's last line: how device buffers (enqueued, or blocking) take this collective, whose
 * chosen algorithm is algo. */
static void explain_device(weft_coll_kind_t kind, size_t bytes, const weft_cost_params_t *params,
                           const weft_coll_algo_t *algo)
{
    int reduces = kind == WEFT_COLL_ALLREDUCE || kind == WEFT_COLL_REDUCE;
    int shm = algo != NULL && strcmp(algo->name, "shm") == 0;
    /* the shared-memory forms that map the peers' device buffers (docs/device.md) */
    int ipc = shm && (reduces || kind == WEFT_COLL_ALLGATHER || kind == WEFT_COLL_BCAST);
    const char *shape = !shm ? ""
                        : !reduces ? ", through the node's slots"
                        : bytes <= weft__coll_config.shm_small
                            ? ", through the node's slots, one-shot (every rank reduces every "
                              "rank's data)"
                            : ", through the node's slots, two-shot (each rank reduces a slice, "
                              "then all copy)";

    if (params->nodes == 1 && weft__coll_config.device_task) {
        printf("device buffers: emu, enqueued or blocking: %s as one device task on the stream%s "
               "(WEFT_DEVICE_TASK); CUDA: weft's progress thread%s\n",
               algo != NULL ? algo->name : "the algorithm", shape,
               ipc ? ", the peers' buffers mapped through IPC" : "");
    } else if (params->nodes == 1) {
        printf("device buffers: enqueued: weft's progress thread (WEFT_DEVICE_TASK=no)%s\n",
               ipc ? "; the peers' buffers mapped through IPC" : "");
    } else if (kind != WEFT_COLL_BARRIER && kind != WEFT_COLL_ALLGATHERV &&
               kind != WEFT_COLL_ALLTOALLV && kind != WEFT_COLL_REDUCE_SCATTER_V && bytes > 0 &&
               bytes <= weft__coll_config.device_stage) {
        printf("device buffers: through host memory once (WEFT_DEVICE_STAGE): enqueued, the "
               "stream copies the input in and the result out and weft's progress thread runs "
               "it on the host copy; blocking or nonblocking, the calling thread copies in, "
               "and out when it completes\n");
    } else {
        printf("device buffers: enqueued: weft's progress thread drives it, each message "
               "staged (device tasks run only among the ranks of one node)\n");
    }
}

static int explain(int argc, char **argv)
{
    weft_cost_params_t params;
    weft_coll_kind_t kind;
    size_t bytes;
    int ranks, ppn;

    if (argc < 3 || argc > 4) {
        usage(stderr);
        return 2;
    }
    ranks = atoi(argv[2]);
    ppn = argc == 4 ? atoi(argv[3]) : ranks;
    if (weft__coll_kind_parse(argv[0], &kind) != WEFT_OK ||
        weft__parse_size(argv[1], 0, &bytes) != WEFT_OK || ranks < 1 || ppn < 1 || ppn > ranks) {
        fprintf(stderr, "weft_info --explain: expected a collective (");
        print_kinds(stderr);
        fprintf(stderr, "), a size, ranks >= 1 and 1 <= ranks per node <= ranks\n");
        return 2;
    }
    weft__cost_defaults(&params);
    printf("%s of %zu bytes on %d ranks, %d per node\n", argv[0], bytes, ranks, ppn);
    printf("cost model: alpha %.2f us/message, beta %.2f GB/s, gamma %.2f GB/s "
           "(WEFT_COST_*; measured per communicator at run time)\n",
           params.alpha * 1e6, 1e-9 / params.beta, 1e-9 / params.gamma);
    /* nodes of ppn ranks each, with shared memory where a node has several */
    params.local = ranks % ppn == 0 ? ppn : 1;
    params.nodes = (ranks + ppn - 1) / ppn;
    params.shm = ppn > 1 && ranks % ppn == 0 && weft__coll_config.shm;
    printf("shared memory: handoff %.2f us, copy %.2f GB/s, %zu KiB slots (WEFT_COST_SHM_*, "
           "WEFT_SHM_SLOT; handoff and copy measured per communicator at run time); %d node(s)%s\n",
           params.shm_alpha * 1e6, 1e-9 / params.shm_copy, params.shm_slot >> 10, params.nodes,
           params.shm ? "" : ", none shared (one rank per node, unequal nodes or WEFT_SHM=no)");
    printf("candidates (predicted time):\n");
    explain_device(kind, bytes, &params, weft__coll_choose(kind, bytes, ranks, &params, stdout));
    return 0;
}

/* --algorithms: the registry, in its order. Fields hold no tabs. */
static int list_algorithms(void)
{
    char constraints[256];

    printf("collective\talgorithm\tfile\tconstraints\tcost model\tdescription\n");
    for (int i = 0; i < weft__coll_nalgos; i++) {
        const weft_coll_algo_t *a = &weft__coll_algos[i];

        printf("%s\t%s\t%s\t%s\t%s\t%s\n", weft__coll_kind_name(a->kind), a->name, a->file,
               weft__coll_algo_constraints(a, constraints, sizeof(constraints)), a->model, a->desc);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

/* The default report's line per collective: its algorithms by name. */
static void print_algorithm_names(void)
{
    printf("  algorithms (weft_info --algorithms lists them, --explain shows the choice):\n");
    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        int n;
        const weft_coll_algo_t *rows = weft__coll_algos_of((weft_coll_kind_t)k, &n);

        printf("    %-17s", weft__coll_kind_name((weft_coll_kind_t)k));
        for (int i = 0; i < n; i++) {
            printf(" %s", rows[i].name);
        }
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    int dump_config = 0, rc = 0;
    weft_status_t status;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0) {
            dump_config = 1;
        } else if (strcmp(argv[i], "--explain") == 0) {
            int rc;

            if (weft_init() != WEFT_OK) {
                fprintf(stderr, "weft_info: weft_init failed: %s\n", weft_last_error());
                return 1;
            }
            rc = explain(argc - i - 1, argv + i + 1);
            weft_finalize();
            return rc;
        } else if (strcmp(argv[i], "--algorithms") == 0) {
            if (argc != 2) {
                fprintf(stderr, "weft_info: --algorithms takes no other option\n");
                usage(stderr);
                return 2;
            }
            return list_algorithms();
        } else if (strcmp(argv[i], "--ranks") == 0) {
            if (argc != 2) {
                fprintf(stderr, "weft_info: --ranks takes no other option\n");
                usage(stderr);
                return 2;
            }
            return rank_map();
        } else if (strcmp(argv[i], "--stats") == 0) {
            if (i != 1) {
                fprintf(stderr, "weft_info: --stats takes no other option\n");
                usage(stderr);
                return 2;
            }
            return weft_info_stats(argc - 2, argv + 2);
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "weft_info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    status = weft_init();
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info: weft_init failed: %s\n", weft_last_error());
        return 1;
    }
    if (dump_config) {
        weft__config_dump(stdout);
    } else {
        printf("weft %d.%d.%d\n", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
        printf("  cuda toolkit: %s\n",
               strcmp(WEFT_BUILD_CUDA, "yes") == 0 ? "found" : "not found");
        printf("  ucx headers:  %d.%d (library %s)\n", UCP_API_MAJOR, UCP_API_MINOR,
               ucp_get_version_string());
        print_devices();
        printf("  mpi interposer: libweft_mpi %s\n", WEFT_INFO_MPI_BINDINGS);
        printf("  weft transports: ucx (between processes), loop (in-process ranks)\n");
        printf("  bootstraps: pmix (mpirun, srun), tcp (unique id), thread (in-process)\n");
        print_ucx_transports();
        print_algorithm_names();
        rc = print_topology();
    }
    weft_finalize();
    return rc;
}
