/*
 * Reduce as ring reduce-scatter + direct gather (Rabenseifner's reduce, with
 * a ring in place of recursive halving).
 *
 * Idea: the ring reduce-scatter (coll/ring.h) leaves block r of the
 * reduction on rank r; every rank then sends its block, fragment by
 * fragment as it completes, straight to the root, which receives it into
 * its place in the result.
 *
 *   rank:        0     1     2     3          (p = 4, root 0)
 *   after RS:    b0    b1    b2    b3
 *   gather:      b0 <- b1 <- b2 <- b3 (all to 0 at once)
 *
 * Cost (n bytes): reduce-scatter (p-1) alpha + (p-1)/p n (beta + gamma);
 * gather (p-1) alpha at the root + (p-1)/p n beta. About 2 n beta + n gamma
 * in all against log2(p) n (beta + gamma) for the binomial tree: for large n.
 *
 * The ring combines every block in ring order, the same on every run.
 *
 * In place at the root (src == dst) the ring still reads the input blocks
 * until its last reduction of each fragment, so the root's receives of
 * fragment f wait for that reduction.
 *
 * Slots: the ring uses 0 .. (p-1) nfrag - 1, the gather (p-1) nfrag + f.
 */
#include "coll/ring.h"
#include "coll/rooted.h"

#include <stdlib.h>

weft_status_t weft__reduce_reduce_scatter_gather(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t es = a->esize, n = a->count;
    const size_t own = weft__block_count(n, p, r);
    weft_ring_t ring;
    uint32_t base;
    char *out;
    int *last;

    weft__ring_init(&ring, a, n);
    base = (uint32_t)(p - 1) * (uint32_t)ring.nfrag;
    last = malloc(sizeof(int) * (size_t)ring.nfrag);
    if (last == NULL) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "reduce of %d ranks", p));
    }
    if (r == a->root) {
        out = (char *)a->dst + weft__block_start(n, p, r) * es;
    } else {
        out = weft__sched_scratch(s, own * es + 1);
    }
    if (out == NULL) {
        free(last);
        return WEFT_OK; /* the schedule has failed; sched_start returns why */
    }
    weft__ring_reduce_scatter_phase(s, &ring, a->src, NULL, out, last, NULL);

    weft__sched_step(s, "gather", 0);
    if (r != a->root) {
        for (int f = 0; f < ring.nfrag; f++) {
            size_t off = weft__block_start(own, ring.nfrag, f);
            int send = weft__sched_send(s, a->root, base + (uint32_t)f, out + off * es,
                                        weft__block_count(own, ring.nfrag, f) * es);

            weft__sched_dep(s, last[f], send);
        }
    } else {
        for (int b = 0; b < p; b++) {
            size_t start = weft__block_start(n, p, b), cnt = weft__block_count(n, p, b);

            if (b == r) {
                continue;
            }
            for (int f = 0; f < ring.nfrag; f++) {
                size_t off = start + weft__block_start(cnt, ring.nfrag, f);
                int recv = weft__sched_recv(s, b, base + (uint32_t)f, (char *)a->dst + off * es,
                                            weft__block_count(cnt, ring.nfrag, f) * es);

                if (a->src == a->dst) {
                    weft__sched_dep(s, last[f], recv);
                }
            }
        }
    }
    free(last);
    return WEFT_OK;
}
