/* Algorithms of the rooted collectives and barrier (registry). */
#include "coll/coll.h"

const weft_coll_algo_t weft__coll_algos_rooted[] = {
    {NULL, WEFT_COLL_KIND_COUNT, NULL},
};
