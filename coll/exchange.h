/*
 * Builders of the exchange collectives: allgather, allgatherv,
 * reduce_scatter, reduce_scatter_v, alltoall, alltoallv (one file each,
 * registered in coll/registry.c). Each turns validated arguments
 * (coll/coll.h) into a schedule and never blocks; errors stick in the
 * schedule.
 */
#ifndef WEFT_COLL_EXCHANGE_H
#define WEFT_COLL_EXCHANGE_H

#include "coll/coll.h"

weft_status_t weft__allgather_recursive_doubling(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__allgather_bruck(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__allgatherv_ring(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__reduce_scatter_recursive_halving(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__reduce_scatter_v_ring(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__alltoall_pairwise(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__alltoall_bruck(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__alltoallv_pairwise(weft_sched_t *s, const weft_coll_args_t *a);

#endif /* WEFT_COLL_EXCHANGE_H */
