/*
 * Rabenseifner allreduce = recursive-halving reduce-scatter +
 * recursive-doubling allgather, on p' = 2^k ranks after the standard fold
 * (fold.h) for other rank counts.
 *
 * The vector is cut into p' blocks. Reduce-scatter: in step k (distance
 * p'/2, p'/4, ..., 1) each rank keeps half of its current window of blocks,
 * sends the other half to its partner and adds the partner's copy of the
 * half it keeps; at the end power-of-two rank i owns block i reduced.
 * Allgather: the same exchanges in reverse order double the window back.
 *
 *   p' = 4, blocks 0..3       distance 2        distance 1
 *   rank 0 keeps             [0 1] . .          [0] . . .
 *   rank 1 keeps             [0 1] . .          . [1] . .
 *   rank 2 keeps             . . [2 3]          . . [2] .
 *
 * Cost (n bytes): 2 log2 p' alpha + 2 (p'-1)/p' n beta + (p'-1)/p' n gamma,
 * plus 2 alpha + 2 n beta + n gamma for the fold when p is not a power of two.
 * Fewer messages than ring for the same bandwidth; medium and large n.
 *
 * Each block is reduced on one rank and then copied: bitwise equal results.
 */
#include "coll/allreduce/fold.h"

weft_status_t weft__allreduce_rabenseifner(weft_sched_t *s, const weft_coll_args_t *a)
{
    const size_t es = a->esize, bytes = a->count * es;
    weft_fold_t fold;
    char *tmp = weft__sched_scratch(s, bytes);
    char *dst = a->dst;
    const char *cur = a->src; /* where this rank's partial vector lives */
    uint32_t slot = 1;
    int prev, lo, hi, step = 0;

    if (a->size == 1) {
        weft__sched_copy(s, a->dst, a->src, bytes);
        return WEFT_OK;
    }
    weft__fold_init(&fold, a->rank, a->size);
    prev = weft__fold_in(s, &fold, a, a->src, tmp, -1);
    if (fold.newrank < 0) {
        weft__fold_out(s, &fold, a->dst, bytes, prev);
        return WEFT_OK;
    }
    if (fold.rank < 2 * fold.rem) {
        cur = dst; /* the fold wrote the combined vector there */
    }
    lo = 0;
    hi = fold.pof2;
    for (int mask = fold.pof2 / 2; mask >= 1; mask /= 2, step++, slot++) {
        int peer = weft__fold_real_rank(&fold, fold.newrank ^ mask);
        int mid = lo + (hi - lo) / 2;
        int keep_lo = fold.newrank & mask ? mid : lo, keep_hi = fold.newrank & mask ? hi : mid;
        int give_lo = fold.newrank & mask ? lo : mid, give_hi = fold.newrank & mask ? mid : hi;
        size_t keep_start = weft__block_start(a->count, fold.pof2, keep_lo);
        size_t keep_count = weft__block_start(a->count, fold.pof2, keep_hi) - keep_start;
        size_t give_start = weft__block_start(a->count, fold.pof2, give_lo);
        size_t give_count = weft__block_start(a->count, fold.pof2, give_hi) - give_start;
        const void *srcs[2] = {cur + keep_start * es, tmp};
        int send, recv, reduce, done;

        weft__sched_step(s, "recursive-halving", step);
        send = weft__sched_send(s, peer, slot, cur + give_start * es, give_count * es);
        recv = weft__sched_recv(s, peer, slot, tmp, keep_count * es);
        reduce = weft__sched_reduce(s, dst + keep_start * es, srcs, 2, keep_count);
        done = weft__sched_nop(s);
        weft__sched_dep(s, prev, send);
        weft__sched_dep(s, prev, recv);
        weft__sched_dep(s, recv, reduce);
        weft__sched_dep(s, send, done);
        weft__sched_dep(s, reduce, done);
        prev = done;
        cur = dst;
        lo = keep_lo;
        hi = keep_hi;
    }
    for (int mask = 1; mask < fold.pof2; mask *= 2, step++, slot++) {
        int peer = weft__fold_real_rank(&fold, fold.newrank ^ mask);
        int plo = lo ^ mask, phi = plo + (hi - lo);
        size_t my_start = weft__block_start(a->count, fold.pof2, lo);
        size_t my_count = weft__block_start(a->count, fold.pof2, hi) - my_start;
        size_t peer_start = weft__block_start(a->count, fold.pof2, plo);
        size_t peer_count = weft__block_start(a->count, fold.pof2, phi) - peer_start;

        weft__sched_step(s, "recursive-doubling", step);
        prev = weft__sched_exchange(s, prev, slot, peer, dst + my_start * es, my_count * es, peer,
                                    dst + peer_start * es, peer_count * es);
        lo = lo < plo ? lo : plo;
        hi = lo + 2 * (phi - plo);
    }
    weft__fold_out(s, &fold, a->dst, bytes, prev);
    return WEFT_OK;
}
