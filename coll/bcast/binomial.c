/*
 * Binomial-tree broadcast.
 *
 * Idea: on relative ranks (root = 0, coll/rooted.h) each rank receives the
 * whole vector from its parent, then forwards it to its children, farthest
 * subtree first so the largest subtree starts earliest.
 *
 *   step:   0        1        2           (p = 8)
 *           0 -> 4   0 -> 2   0 -> 1
 *                    4 -> 6   2 -> 3, 4 -> 5, 6 -> 7
 *
 * Cost (n bytes): ceil(log2 p) (alpha + n beta). Latency-optimal; every step
 * moves the whole vector, so for small n only.
 */
#include "coll/rooted.h"

weft_status_t weft__bcast_binomial(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, v = weft__rel_rank(a->rank, a->root, p);
    const size_t bytes = a->count * a->esize;
    int have = -1; /* the task after which dst holds the data (-1: root) */

    if (v != 0) {
        weft__sched_step(s, "recv", 0);
        have = weft__sched_recv(s, weft__abs_rank(v - weft__binomial_span(v, p), a->root, p), 0,
                                a->dst, bytes);
    }
    weft__sched_step(s, "send", 0);
    for (int m = weft__binomial_span(v, p) / 2; m > 0; m /= 2) {
        if (v + m < p) {
            int send = weft__sched_send(s, weft__abs_rank(v + m, a->root, p), 0, a->dst, bytes);

            weft__sched_dep(s, have, send);
        }
    }
    return WEFT_OK;
}
