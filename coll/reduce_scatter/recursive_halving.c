/*
 * Recursive-halving reduce-scatter (the first half of Rabenseifner).
 *
 * Idea: on p = 2^k ranks, block i of the input is rank i's result. In step
 * k (distance p/2, p/4, ..., 1) each rank splits its current window of
 * blocks in two, sends the half its partner r ^ distance owns to it, and
 * adds the partner's copy of the half it keeps; the window halves every
 * step until it is block r alone, fully reduced.
 *
 *   p = 4, blocks 0..3   distance 2        distance 1
 *   rank 0 keeps        [0 1] . .         [0] . . .
 *   rank 1 keeps        [0 1] . .         . [1] . .
 *   rank 3 keeps        . . [2 3]         . . . [3]
 *
 * Cost (n bytes of input): log2 p alpha + (p-1)/p n beta + (p-1)/p n gamma.
 *
 * Rank counts that are not a power of two are handed to the ring
 * (weft__reduce_scatter_ring) inside this builder: folding the extra ranks
 * in would move the whole vector twice more, which is what this algorithm
 * is chosen to avoid.
 *
 * Each block is reduced on the ranks of a fixed tree, the same on every run.
 */
#include "coll/exchange.h"

weft_status_t weft__reduce_scatter_recursive_halving(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t es = a->esize, bb = a->count * es;
    const char *cur = a->src; /* where this rank's partial window lives */
    char *work, *tmp;
    int lo = 0, hi = p, prev = -1, step = 0;

    if ((p & (p - 1)) != 0) {
        return weft__reduce_scatter_ring(s, a);
    }
    if (p == 1) {
        weft__sched_copy(s, a->dst, a->src, bb);
        return WEFT_OK;
    }
    /* partial sums, at the offsets of the input; receive buffer of p/2 blocks */
    work = weft__sched_scratch(s, bb * (size_t)p);
    tmp = weft__sched_scratch(s, bb * (size_t)(p / 2));
    if (work == NULL || tmp == NULL) {
        return WEFT_OK; /* the schedule carries the error */
    }
    for (int mask = p / 2; mask >= 1; mask /= 2, step++) {
        int peer = r ^ mask, mid = lo + (hi - lo) / 2;
        int keep_lo = r & mask ? mid : lo, give_lo = r & mask ? lo : mid;
        size_t half = (size_t)(mid - lo) * bb;
        char *out = mask == 1 ? a->dst : work + (size_t)keep_lo * bb;
        const void *srcs[2] = {cur + (size_t)keep_lo * bb, tmp};
        int send, recv, reduce, done;

        weft__sched_step(s, "recursive-halving", step);
        send = weft__sched_send(s, peer, (uint32_t)step, cur + (size_t)give_lo * bb, half);
        recv = weft__sched_recv(s, peer, (uint32_t)step, tmp, half);
        reduce = weft__sched_reduce(s, out, srcs, 2, (size_t)(mid - lo) * a->count);
        done = weft__sched_nop(s);
        weft__sched_dep(s, prev, send);
        weft__sched_dep(s, prev, recv);
        weft__sched_dep(s, recv, reduce);
        if (mask == 1) {
            /* dst may alias the input this step sends from (in place at the front) */
            weft__sched_dep(s, send, reduce);
        }
        weft__sched_dep(s, send, done);
        weft__sched_dep(s, reduce, done);
        prev = done;
        cur = work;
        hi = keep_lo + (mid - lo);
        lo = keep_lo;
    }
    return WEFT_OK;
}
