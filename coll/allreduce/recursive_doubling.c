/*
 * Recursive-doubling allreduce.
 *
 * Idea: in step k rank r exchanges its whole vector with r ^ 2^k and both
 * combine, so after log2(p) steps every rank holds the full reduction. For p
 * not a power of two, the first 2*rem ranks (rem = p - p', p' the largest
 * power of two <= p) fold first: each even rank gives its vector to the odd
 * rank above it and sits out; the odd ranks and the ranks >= 2*rem run the
 * power-of-two algorithm; the odd ranks hand the result back at the end.
 *
 * Cost (n bytes): (log2 p' + 2[rem > 0]) alpha + (log2 p' + 2[rem > 0]) n beta
 *                 + (log2 p' + [rem > 0]) n gamma.
 * Latency-optimal; moves the whole vector each step, so for small n only.
 *
 * Results are bitwise equal on every rank: each step combines the same two
 * operands on both partners, and every op here is commutative.
 */
#include "coll/allreduce/fold.h"

weft_status_t weft__allreduce_recursive_doubling(weft_sched_t *s, const weft_coll_args_t *a)
{
    const size_t bytes = a->count * a->esize;
    weft_fold_t fold;
    void *tmp = weft__sched_scratch(s, bytes);
    uint32_t slot = 1;
    int prev, step = 0;

    weft__sched_step(s, "copy", 0);
    prev = weft__sched_copy(s, a->dst, a->src, bytes);
    weft__fold_init(&fold, a->rank, a->size);
    prev = weft__fold_in(s, &fold, a, a->dst, tmp, prev);
    if (fold.newrank >= 0) {
        for (int mask = 1; mask < fold.pof2; mask <<= 1, step++, slot++) {
            int peer = weft__fold_real_rank(&fold, fold.newrank ^ mask);
            const void *srcs[2] = {a->dst, tmp};
            int send, recv, reduce;

            weft__sched_step(s, "recursive-doubling", step);
            send = weft__sched_send(s, peer, slot, a->dst, bytes);
            recv = weft__sched_recv(s, peer, slot, tmp, bytes);
            reduce = weft__sched_reduce(s, a->dst, srcs, 2, a->count);
            weft__sched_dep(s, prev, send);
            weft__sched_dep(s, prev, recv);
            weft__sched_dep(s, send, reduce);
            weft__sched_dep(s, recv, reduce);
            prev = reduce;
        }
    }
    weft__fold_out(s, &fold, a->dst, bytes, prev);
    return WEFT_OK;
}
