/* Algorithms of the exchange collectives (registry). */
#include "coll/exchange.h"

const weft_coll_algo_t weft__coll_algos_exchange[] = {
    {"recursive_doubling", WEFT_COLL_ALLGATHER, weft__allgather_recursive_doubling},
    {"bruck", WEFT_COLL_ALLGATHER, weft__allgather_bruck},
    {"ring", WEFT_COLL_ALLGATHERV, weft__allgatherv_ring},
    {"recursive_halving", WEFT_COLL_REDUCE_SCATTER, weft__reduce_scatter_recursive_halving},
    {"ring", WEFT_COLL_REDUCE_SCATTER_V, weft__reduce_scatter_v_ring},
    {"pairwise", WEFT_COLL_ALLTOALL, weft__alltoall_pairwise},
    {"bruck", WEFT_COLL_ALLTOALL, weft__alltoall_bruck},
    {"pairwise", WEFT_COLL_ALLTOALLV, weft__alltoallv_pairwise},
    {NULL, WEFT_COLL_KIND_COUNT, NULL},
};
