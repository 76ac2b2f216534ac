/*
 * Recursive-doubling allgather.
 *
 * Idea: in step k rank r exchanges the window of 2^k blocks it holds
 * (aligned to 2^k, containing block r) with rank r ^ 2^k, whose window is
 * the neighbouring one; the window doubles each step. Blocks land directly
 * in their place in the result, no scratch and no final copy.
 *
 *   p = 4        step 0             step 1
 *   rank 0:  [0] . . .  <-> 1    [0 1] . .  <-> 2   -> [0 1 2 3]
 *   rank 2:  . . [2] .  <-> 3    . . [2 3]  <-> 0   -> [0 1 2 3]
 *
 * Cost (n bytes of result): log2 p alpha + (p-1)/p n beta.
 *
 * Rank counts that are not a power of two are handed to Bruck
 * (weft__allgather_bruck) inside this builder: same latency
 * (ceil(log2 p) messages) and bandwidth, at the price of one local copy.
 */
#include "coll/exchange.h"

weft_status_t weft__allgather_recursive_doubling(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t bb = a->count * a->esize;
    char *dst = a->dst;
    int prev, step = 0;

    if ((p & (p - 1)) != 0) {
        return weft__allgather_bruck(s, a);
    }
    weft__sched_step(s, "copy", 0);
    /* a copy onto itself (in place) is a no-op in the engine */
    prev = weft__sched_copy(s, dst + (size_t)r * bb, a->src, bb);
    for (int mask = 1; mask < p; mask *= 2, step++) {
        int peer = r ^ mask;
        int lo = r & ~(mask - 1), plo = peer & ~(mask - 1);

        weft__sched_step(s, "recursive-doubling", step);
        prev = weft__sched_exchange(s, prev, (uint32_t)step, peer, dst + (size_t)lo * bb,
                                    (size_t)mask * bb, peer, dst + (size_t)plo * bb,
                                    (size_t)mask * bb);
    }
    return WEFT_OK;
}
