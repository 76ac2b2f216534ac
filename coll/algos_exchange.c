/* Algorithms of the exchange collectives (registry). */
#include "coll/coll.h"

const weft_coll_algo_t weft__coll_algos_exchange[] = {
    {NULL, WEFT_COLL_KIND_COUNT, NULL},
};
