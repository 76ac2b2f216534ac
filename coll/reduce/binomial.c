/*
 * Binomial-tree reduce.
 *
 * Idea: the broadcast tree run backwards on relative ranks (root = 0,
 * coll/rooted.h). Rank v receives the partial result of each child subtree
 * v + m (m = 1, 2, 4, ... below lowbit(v)), combines it into its own, and
 * sends the sum of its subtree to its parent. Children's messages land in
 * separate buffers, so all of them can arrive at once; the combinations run
 * in increasing m.
 *
 *   step:   0                 1              2        (p = 8)
 *           1->0 3->2 5->4 7->6   2->0 6->4    4->0
 *
 * Every partial sum is (lower relative ranks) op (higher relative ranks),
 * combined in the same order on every run for a given p and root.
 *
 * Cost (n bytes): ceil(log2 p) (alpha + n beta + n gamma). Latency-optimal,
 * for small n.
 */
#include "coll/rooted.h"

weft_status_t weft__reduce_binomial(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, v = weft__rel_rank(a->rank, a->root, p);
    const size_t bytes = a->count * a->esize;
    const int span = weft__binomial_span(v, p);
    int nchildren = 0, prev = -1, k = 0;
    const void *acc = a->src; /* this rank's partial result so far */
    void *out;                /* where the partial results are combined */
    char *tmp;

    for (int m = 1; m < span && v + m < p; m *= 2) {
        nchildren++;
    }
    if (nchildren == 0) {
        /* a leaf sends its input as it is; p == 1: the root copies it */
        if (v == 0) {
            weft__sched_step(s, "copy", 0);
            weft__sched_copy(s, a->dst, a->src, bytes);
        } else {
            weft__sched_step(s, "send", 0);
            weft__sched_send(s, weft__abs_rank(v - span, a->root, p), 0, a->src, bytes);
        }
        return WEFT_OK;
    }
    out = v == 0 ? a->dst : weft__sched_scratch(s, bytes);
    tmp = weft__sched_scratch(s, (size_t)nchildren * bytes);
    if (out == NULL || tmp == NULL) {
        return WEFT_OK; /* the schedule has failed; sched_start returns why */
    }
    for (int m = 1; m < span && v + m < p; m *= 2, k++) {
        char *in = tmp + (size_t)k * bytes;
        const void *srcs[2] = {acc, in};
        int recv, reduce;

        weft__sched_step(s, "reduce", k);
        recv = weft__sched_recv(s, weft__abs_rank(v + m, a->root, p), 0, in, bytes);
        reduce = weft__sched_reduce(s, out, srcs, 2, a->count);
        weft__sched_dep(s, recv, reduce);
        weft__sched_dep(s, prev, reduce);
        prev = reduce;
        acc = out;
    }
    if (v != 0) {
        int send;

        weft__sched_step(s, "send", k);
        send = weft__sched_send(s, weft__abs_rank(v - span, a->root, p), 0, acc, bytes);
        weft__sched_dep(s, prev, send);
    }
    return WEFT_OK;
}
