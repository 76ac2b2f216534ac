/*
 * weft_info: what this build of weft is and how it is configured.
 *   weft_info        version and build configuration
 *   weft_info -c     every configuration variable: default, current value, help
 *   weft_info --explain COLLECTIVE BYTES RANKS [RANKS_PER_NODE]
 *                    every candidate algorithm's predicted time by the cost
 *                    model (configured parameters), and the choice with its reason
 */
#include "weft_config.h"

#include "coll/coll.h"
#include "coll/cost.h"
#include "runtime/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hwloc.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: weft_info [-c] [--explain COLLECTIVE BYTES RANKS [RANKS_PER_NODE]] [-h]\n"
               "  -c         print every configuration variable with its default, value and help\n"
               "  --explain  predicted time of every algorithm of COLLECTIVE for BYTES (one\n"
               "             rank's vector; k/m/g suffixes) on RANKS ranks, and the choice\n");
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

/* Cores, NUMA nodes, GPUs and NICs of this machine (hwloc). */
static void print_topology(void)
{
    hwloc_topology_t topo;
    char host[256] = "?";
    int gpus = 0, nics = 0;

    gethostname(host, sizeof(host) - 1);
    if (hwloc_topology_init(&topo) != 0) {
        printf("topology: hwloc unavailable\n");
        return;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        printf("topology: hwloc could not read this machine\n");
        return;
    }
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo, NULL); o != NULL;
         o = hwloc_get_next_osdev(topo, o)) {
        gpus += o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU ||
                o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC;
        nics += o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
                o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    }
    printf("topology of %s: %d NUMA node(s), %d core(s), %d hardware thread(s), %d GPU(s), "
           "%d NIC(s)\n",
           host, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU), gpus, nics);
    hwloc_topology_destroy(topo);
}

static int explain(int argc, char **argv)
{
    weft_cost_params_t params;
    size_t bytes;
    int kind, ranks, ppn;

    if (argc < 3 || argc > 4) {
        usage(stderr);
        return 2;
    }
    for (kind = 0; kind < WEFT_COLL_KIND_COUNT; kind++) {
        if (strcmp(weft__coll_kind_name((weft_coll_kind_t)kind), argv[0]) == 0) {
            break;
        }
    }
    ranks = atoi(argv[2]);
    ppn = argc == 4 ? atoi(argv[3]) : ranks;
    if (kind == WEFT_COLL_KIND_COUNT || weft__parse_size(argv[1], 0, &bytes) != WEFT_OK ||
        ranks < 1 || ppn < 1 || ppn > ranks) {
        fprintf(stderr, "weft_info --explain: expected a collective (allreduce, reduce_scatter, "
                        "allgather, bcast, reduce, gather, scatter, alltoall, barrier, "
                        "allgatherv, alltoallv, reduce_scatter_v), a size, ranks >= 1 and "
                        "1 <= ranks per node <= ranks\n");
        return 2;
    }
    weft__cost_defaults(&params);
    printf("%s of %zu bytes on %d ranks, %d per node\n", argv[0], bytes, ranks, ppn);
    printf("cost model: alpha %.2f us/message, beta %.2f GB/s, gamma %.2f GB/s "
           "(WEFT_COST_*; measured per communicator at run time)\n",
           params.alpha * 1e6, 1e-9 / params.beta, 1e-9 / params.gamma);
    if (ppn < ranks) {
        printf("ranks per node: hierarchical algorithms are not built yet, so the choice "
               "does not depend on it\n");
    }
    printf("candidates (predicted time):\n");
    weft__coll_choose((weft_coll_kind_t)kind, bytes, ranks, &params, stdout);
    return 0;
}

int main(int argc, char **argv)
{
    int dump_config = 0;
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
        printf("  cuda toolkit: %s (no CUDA device backend is built yet)\n",
               strcmp(WEFT_BUILD_CUDA, "yes") == 0 ? "found" : "not found");
        printf("  ucx headers:  %d.%d (library %s)\n", UCP_API_MAJOR, UCP_API_MINOR,
               ucp_get_version_string());
        printf("  memory types: host\n");
        printf("  weft transports: ucx (between processes), loop (in-process ranks)\n");
        printf("  bootstraps: pmix (mpirun, srun), tcp (unique id), thread (in-process)\n");
        print_ucx_transports();
        printf("  algorithms:  ");
        for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
            printf(" %s", weft__coll_kind_name((weft_coll_kind_t)k));
        }
        printf(" (weft_info --explain shows the choice)\n");
        print_topology();
    }
    weft_finalize();
    return 0;
}
