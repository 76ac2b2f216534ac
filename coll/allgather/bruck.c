/*
 * Bruck allgather.
 *
 * Idea: work in a scratch vector tmp of p blocks in which block i is the
 * contribution of rank (r + i) mod p. tmp[0] is this rank's own block. In
 * step k (d = 2^k) rank r sends its first min(d, p - d) blocks to r - d and
 * receives as many from r + d into tmp[d ...]; after ceil(log2 p) steps
 * tmp is complete, and two copies rotate it into place (tmp[i] -> block
 * (r + i) mod p of the result). Works for any p.
 *
 *   p = 5, rank 0:  tmp after step 0: [0 1] . . .   (got block 1 from rank 1)
 *                   after step 1:     [0 1 2 3] .   (got 2 3 from rank 2)
 *                   after step 2:     [0 1 2 3 4]   (got 4 from rank 4)
 *
 * Cost (n bytes of result): ceil(log2 p) alpha + (p-1)/p n beta, plus a
 * local copy of n bytes. Latency-optimal for any p; for small n.
 */
#include "coll/exchange.h"

weft_status_t weft__allgather_bruck(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t bb = a->count * a->esize; /* bytes per block */
    char *tmp = weft__sched_scratch(s, bb * (size_t)p);
    char *dst = a->dst;
    int prev, done, step = 0;

    if (tmp == NULL) {
        return WEFT_OK; /* the schedule carries the error */
    }
    weft__sched_step(s, "copy", 0);
    prev = weft__sched_copy(s, tmp, a->src, bb);
    for (int d = 1; d < p; d *= 2, step++) {
        int n = d < p - d ? d : p - d;

        weft__sched_step(s, "bruck", step);
        prev = weft__sched_exchange(s, prev, (uint32_t)step, (r - d + p) % p, tmp,
                                    (size_t)n * bb, (r + d) % p, tmp + (size_t)d * bb,
                                    (size_t)n * bb);
    }
    /* rotate: tmp[0 .. p-r) -> blocks r .. p-1, tmp[p-r .. p) -> blocks 0 .. r-1 */
    weft__sched_step(s, "rotate", 0);
    done = weft__sched_copy(s, dst + (size_t)r * bb, tmp, (size_t)(p - r) * bb);
    weft__sched_dep(s, prev, done);
    done = weft__sched_copy(s, dst, tmp + (size_t)(p - r) * bb, (size_t)r * bb);
    weft__sched_dep(s, prev, done);
    return WEFT_OK;
}
