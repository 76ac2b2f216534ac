/*
 * Ring reduce-scatter with per-rank block sizes.
 *
 * Idea: as the ring reduce-scatter (coll/reduce_scatter/ring.c) with block b
 * of counts[b] elements at the sum of the counts before it: at step s rank
 * r sends its partial sum of block (r - s - 1) to r + 1 and receives block
 * (r - s - 2) from r - 1, adding its own input; after p - 1 steps rank r
 * holds block r reduced over all ranks. Partial sums and receives alternate
 * between two scratch buffers of the largest block. Blocks are not cut into
 * fragments. Every rank knows every count, so zero-size blocks are
 * exchanged as empty messages and every rank posts the same messages.
 *
 *   step:     0        1        2          (p = 4, rank r sends -> r+1)
 *   rank 0:  b3 ->    b2 ->    b1 ->    ends with b0
 *   rank 1:  b0 ->    b3 ->    b2 ->    ends with b1
 *
 * Cost (n bytes of input, largest block m bytes): (p-1) alpha +
 * (p-1) m beta + (p-1) m gamma; (p-1)/p n when the blocks are even.
 *
 * Every block is reduced in ring order, the same on every run.
 */
#include "coll/exchange.h"

#include <stdlib.h>

static inline int mod(int x, int p)
{
    return ((x % p) + p) % p;
}

weft_status_t weft__reduce_scatter_v_ring(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t es = a->esize;
    const char *in = a->src;
    size_t *start, maxc = 0;
    char *tmp, *acc;
    int *reduces, *sends;

    if (p == 1) {
        weft__sched_copy(s, a->dst, a->src, a->counts[0] * es);
        return WEFT_OK;
    }
    start = malloc(sizeof(size_t) * (size_t)p);
    reduces = malloc(sizeof(int) * (size_t)p);
    sends = malloc(sizeof(int) * (size_t)p);
    if (start == NULL || reduces == NULL || sends == NULL) {
        weft__sched_fail(s,
                         weft__error(WEFT_ERR_NO_MEMORY, "ring reduce_scatter_v of %d ranks", p));
        goto out;
    }
    for (int b = 0; b < p; b++) {
        start[b] = b == 0 ? 0 : start[b - 1] + a->counts[b - 1];
        maxc = a->counts[b] > maxc ? a->counts[b] : maxc;
    }
    /* [parity 0 | parity 1] receive buffers, then the same for partial sums */
    tmp = weft__sched_scratch(s, 2 * maxc * es);
    acc = weft__sched_scratch(s, 2 * maxc * es);
    if (tmp == NULL || acc == NULL) {
        goto out;
    }
    for (int step = 0; step < p - 1; step++) {
        int sb = mod(r - step - 1, p), rb = mod(r - step - 2, p);
        const char *sendbuf =
            step == 0 ? in + start[sb] * es : acc + (size_t)((step - 1) % 2) * maxc * es;
        char *recvbuf = tmp + (size_t)(step % 2) * maxc * es;
        char *out = acc + (size_t)(step % 2) * maxc * es;
        const void *srcs[2] = {in + start[rb] * es, recvbuf};
        int recv, last = step == p - 2;
        /* the result goes straight to dst unless dst overlaps the input
         * elsewhere than at this rank's block (in place: result at the front) */
        int direct = last && (a->dst != a->src || start[r] == 0);

        if (direct) {
            out = a->dst;
        }
        weft__sched_step(s, "reduce-scatter-v", step);
        sends[step] =
            weft__sched_send(s, mod(r + 1, p), (uint32_t)step, sendbuf, a->counts[sb] * es);
        recv = weft__sched_recv(s, mod(r - 1, p), (uint32_t)step, recvbuf, a->counts[rb] * es);
        reduces[step] = weft__sched_reduce(s, out, srcs, 2, a->counts[rb]);
        weft__sched_dep(s, recv, reduces[step]);
        if (step > 0) {
            /* send what the previous step produced; reductions run in step
             * order; the partial-sum buffer of this parity is free once sent */
            weft__sched_dep(s, reduces[step - 1], sends[step]);
            weft__sched_dep(s, reduces[step - 1], reduces[step]);
            weft__sched_dep(s, sends[step - 1], reduces[step]);
        }
        if (step > 1) {
            /* the receive buffer of this parity is free once reduced */
            weft__sched_dep(s, reduces[step - 2], recv);
        }
        if (last) {
            /* dst may alias the input step 0 sent from */
            weft__sched_dep(s, sends[0], reduces[step]);
            if (!direct) {
                int copy = weft__sched_copy(s, a->dst, out, a->counts[r] * es);

                weft__sched_dep(s, reduces[step], copy);
            }
        }
    }
out:
    free(start);
    free(reduces);
    free(sends);
    return WEFT_OK;
}
