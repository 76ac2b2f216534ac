/*
 * Ring allreduce = ring reduce-scatter + ring allgather
 * (coll/reduce_scatter/ring.c and coll/allgather/ring.c, the same phases).
 *
 * The vector is cut into p blocks; the reduce-scatter leaves block r fully
 * reduced on rank r, the allgather circulates the reduced blocks. Partial
 * sums are written straight into the result buffer, so no scratch but the
 * receive buffers is needed. Fragments pipeline both phases.
 *
 * Cost (n bytes, p ranks): 2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma.
 * Best for large n; its latency term grows linearly with p.
 *
 * Every rank ends with the same bits: each block is reduced once, on one
 * rank, and then copied.
 */
#include "coll/ring.h"

#include <stdlib.h>

weft_status_t weft__allreduce_ring(weft_sched_t *s, const weft_coll_args_t *a)
{
    weft_ring_t ring;
    size_t es = a->esize;
    int *last, *sends;

    weft__ring_init(&ring, a, a->count);
    last = malloc(sizeof(int) * (size_t)ring.nfrag);
    sends = malloc(sizeof(int) * (size_t)ring.nfrag * (size_t)(a->size > 1 ? a->size - 1 : 1));
    if (last == NULL || sends == NULL) {
        free(last);
        free(sends);
        return weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "ring allreduce"));
    }
    for (int i = 0; i < ring.nfrag; i++) {
        last[i] = -1;
    }
    for (int i = 0; i < ring.nfrag * (a->size > 1 ? a->size - 1 : 1); i++) {
        sends[i] = -1;
    }
    weft__ring_reduce_scatter_phase(
        s, &ring, a->src, a->dst,
        (char *)a->dst + weft__block_start(a->count, a->size, a->rank) * es, last, sends);
    /* a block is received in the allgather only after the reduce-scatter
     * sent the partial sum that lived in the same place */
    weft__ring_allgather_phase(s, &ring, a->dst, (uint32_t)((a->size - 1) * ring.nfrag), last,
                               sends);
    free(last);
    free(sends);
    return WEFT_OK;
}
