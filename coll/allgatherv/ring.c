/*
 * Ring allgatherv.
 *
 * Idea: as the ring allgather (coll/allgather/ring.c) with per-rank blocks:
 * at step s rank r forwards block (r - s) to r + 1 and receives block
 * (r - s - 1) from r - 1 straight into dst + displs[b]. Every rank knows
 * every count, so a zero-size block is simply not sent on any rank (the
 * next forward of it waits on nothing).
 *
 *   step:      0         1         2        (p = 4, rank r sends -> r+1)
 *   rank 0:   b0 ->     b3 ->     b2 ->
 *   rank 1:   b1 ->     b0 ->     b3 ->
 *
 * Cost (n bytes of result, p ranks): (p-1) alpha + (n - n_r) beta, where
 * the slowest link carries all blocks but one; latency linear in p.
 */
#include "coll/exchange.h"

weft_status_t weft__allgatherv_ring(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t es = a->esize;
    char *dst = a->dst;
    int prev;

    weft__sched_step(s, "copy", 0);
    prev = weft__sched_copy(s, dst + a->displs[r] * es, a->src, a->counts[r] * es);
    for (int step = 0; step < p - 1; step++) {
        int sb = ((r - step) % p + p) % p, rb = ((r - step - 1) % p + p) % p;
        int send = -1, recv = -1;

        weft__sched_step(s, "allgatherv", step);
        if (a->counts[sb] > 0) {
            send = weft__sched_send(s, (r + 1) % p, (uint32_t)step, dst + a->displs[sb] * es,
                                    a->counts[sb] * es);
            /* forward what the previous step received, or our own block */
            weft__sched_dep(s, prev, send);
        }
        if (a->counts[rb] > 0) {
            recv = weft__sched_recv(s, (r - 1 + p) % p, (uint32_t)step, dst + a->displs[rb] * es,
                                    a->counts[rb] * es);
        }
        prev = recv;
    }
    return WEFT_OK;
}
