/*
 * Where the ranks of a communicator run: which ranks share a node (and so
 * can share memory), in what order, and the "rails" that join the ranks
 * with the same local rank across nodes.
 *
 * A node is identified by a 64-bit key per rank (hostname + boot id,
 * exchanged when the communicator is created). WEFT_RANKS_PER_NODE=k cuts
 * every real node into virtual nodes of k consecutive local ranks, so one
 * machine can stand in for several; the keys then name virtual nodes and a
 * communicator split from this one inherits them.
 *
 * Nodes are numbered in the order of their lowest rank; local ranks in
 * communicator order. The map is immutable once built.
 */
#ifndef WEFT_COMM_LAYER_NODE_H
#define WEFT_COMM_LAYER_NODE_H

#include "base/base.h"

typedef struct weft_node_map {
    int size;         /* ranks of the communicator */
    int nnodes;       /* nodes (virtual ones with WEFT_RANKS_PER_NODE) */
    int node;         /* this rank's node */
    int local_rank;   /* this rank's index on its node */
    int local_size;   /* ranks on this rank's node */
    int uniform;      /* every node has local_size ranks */
    int node_major;   /* uniform, and node n's ranks are n local_size .. (n + 1) local_size - 1 */
    int max_local;    /* most ranks on any node */
    int *node_of;     /* [size] node of each rank */
    int *local_of;    /* [size] local rank of each rank */
    int *local_ranks; /* [local_size] the ranks of this node, in local order */
    int *rail;        /* [nnodes] when uniform: the rank with this local rank on each node */
    int *rank_at;     /* [nnodes * max_local] rank_at[n * max_local + q]: local rank q of
                       * node n, -1 where node n has fewer ranks */
    uint64_t *keys;   /* [size] node key of each rank (virtual nodes included) */
} weft_node_map_t;

/* Build the map from every rank's key; ranks_per_node > 0 cuts nodes into
 * virtual nodes of that many ranks. */
weft_status_t weft__node_map_create(const uint64_t *keys, int size, int rank, int ranks_per_node,
                                    weft_node_map_t **map_p);
/* The map of a communicator made of parent ranks members[0..n) (rank: this
 * process's index among them). */
weft_status_t weft__node_map_sub(const weft_node_map_t *parent, const int *members, int n, int rank,
                                 weft_node_map_t **map_p);
void weft__node_map_free(weft_node_map_t *map);

/* This host's key: hostname and boot id, hashed. */
uint64_t weft__node_key(void);

/* What a rank tells the others of the machine it runs on, to find out
 * whether the ranks of one machine outnumber its cores. A machine is a
 * kernel (its boot id): containers and network or UTS namespaces of one
 * machine have hostnames of their own (and so are nodes of their own) but
 * share its cores. */
#define WEFT_CPU_WORDS 16 /* CPUs 0..1023 */
typedef struct weft_machine_info {
    uint64_t key;                  /* the boot id, hashed (the node key without one) */
    uint64_t cpus[WEFT_CPU_WORDS]; /* the CPUs the rank may run on (affinity), a bit each */
} weft_machine_info_t;

void weft__machine_info(weft_machine_info_t *info);

/* Whether the ranks that share rank's machine outnumber the CPUs they may
 * run on together (the union of their affinity masks): ranks bound to a
 * core each are not oversubscribed, ranks of several containers on one
 * machine's cores may be. all: size records, stride bytes apart. */
int weft__machine_oversubscribed(const weft_machine_info_t *all, size_t stride, int size, int rank);
/* Whether that holds on any of the ranks' machines (the same answer on every rank that has the
 * same records): what the cost model assumes, so that the ranks choose alike. -1 on no memory. */
int weft__machines_oversubscribed_any(const weft_machine_info_t *all, size_t stride, int size);

#endif /* WEFT_COMM_LAYER_NODE_H */
