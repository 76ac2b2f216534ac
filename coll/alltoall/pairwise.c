/*
 * Pairwise-exchange alltoall.
 *
 * Idea: p - 1 steps; in step k rank r sends its block for r + k to r + k and
 * receives the block of r - k from r - k, so every rank talks to exactly one
 * sender and one receiver per step and no link is oversubscribed. Steps run
 * one after the other; this rank's own block is a local copy. In place, the
 * input is first staged into scratch.
 *
 *   p = 4    step 1      step 2      step 3
 *   rank 0:  ->1 <-3     ->2 <-2     ->3 <-1
 *
 * Cost (n bytes per rank, p ranks): (p-1) alpha + (p-1)/p n beta.
 * Bandwidth-friendly; for blocks large enough that alpha does not dominate.
 */
#include "coll/exchange.h"

weft_status_t weft__alltoall_pairwise(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t bb = a->count * a->esize;
    const char *src = a->src;
    char *dst = a->dst;
    int prev = -1, own;

    if (a->src == a->dst) {
        char *stage = weft__sched_scratch(s, bb * (size_t)p);

        if (stage == NULL) {
            return WEFT_OK; /* the schedule carries the error */
        }
        weft__sched_step(s, "stage", 0);
        prev = weft__sched_copy(s, stage, src, bb * (size_t)p);
        src = stage;
    }
    weft__sched_step(s, "copy", 0);
    own = weft__sched_copy(s, dst + (size_t)r * bb, src + (size_t)r * bb, bb);
    weft__sched_dep(s, prev, own);
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = (r - k + p) % p;

        weft__sched_step(s, "pairwise", k);
        prev = weft__sched_exchange(s, prev, (uint32_t)k, to, src + (size_t)to * bb, bb, from,
                                    dst + (size_t)from * bb, bb);
    }
    return WEFT_OK;
}
