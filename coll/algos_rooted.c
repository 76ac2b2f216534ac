/* Algorithms of the rooted collectives and barrier (registry). */
#include "coll/rooted.h"

const weft_coll_algo_t weft__coll_algos_rooted[] = {
    {"binomial", WEFT_COLL_BCAST, weft__bcast_binomial},
    {"scatter_allgather", WEFT_COLL_BCAST, weft__bcast_scatter_allgather},
    {"binomial", WEFT_COLL_REDUCE, weft__reduce_binomial},
    {"reduce_scatter_gather", WEFT_COLL_REDUCE, weft__reduce_reduce_scatter_gather},
    {"binomial", WEFT_COLL_GATHER, weft__gather_binomial},
    {"binomial", WEFT_COLL_SCATTER, weft__scatter_binomial},
    {"dissemination", WEFT_COLL_BARRIER, weft__barrier_dissemination},
    {NULL, WEFT_COLL_KIND_COUNT, NULL},
};
