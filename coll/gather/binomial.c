/*
 * Binomial-tree gather.
 *
 * Idea: on relative ranks (root = 0, coll/rooted.h) rank v collects the
 * blocks of its subtree [v, v + subtree(v)) in relative order: its own
 * first, then each child v + m's subtree at offset m, and sends them to its
 * parent in one message. Leaves send their input as it is. The root
 * receives each child's subtree straight into its place in the result,
 * unless the subtree wraps past rank p - 1 in communicator order; then it
 * lands in scratch and is copied in two pieces.
 *
 *   p = 8, root 0:  7->6, 5->4, 3->2, 1->0 (1 block each)
 *                   6->4, 2->0 (2 blocks)       4->0 (4 blocks)
 *
 * Cost (n bytes per rank): ceil(log2 p) alpha + (p-1) n beta; each block
 * travels once per tree level it climbs, but only the root's link carries
 * (p-1) n. Latency-optimal and bandwidth-optimal at the root.
 */
#include "coll/rooted.h"

weft_status_t weft__gather_binomial(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, v = weft__rel_rank(a->rank, a->root, p);
    const size_t bytes = a->count * a->esize;
    const int span = weft__binomial_span(v, p), sub = weft__binomial_subtree(v, p);
    char *dst = a->dst, *tmp;
    int send, copy;

    if (v == 0) {
        weft__sched_step(s, "root", 0);
        weft__sched_copy(s, dst + (size_t)a->root * bytes, a->src, bytes);
        for (int m = 1; m < p; m *= 2) {
            int first = weft__abs_rank(m, a->root, p), n = weft__binomial_subtree(m, p);
            int recv, head;

            if (first + n <= p) {
                weft__sched_recv(s, first, 0, dst + (size_t)first * bytes, (size_t)n * bytes);
                continue;
            }
            /* the subtree wraps: ranks first .. p-1, then 0 .. */
            tmp = weft__sched_scratch(s, (size_t)n * bytes);
            if (tmp == NULL) {
                return WEFT_OK; /* the schedule has failed; sched_start returns why */
            }
            head = p - first;
            recv = weft__sched_recv(s, first, 0, tmp, (size_t)n * bytes);
            copy = weft__sched_copy(s, dst + (size_t)first * bytes, tmp, (size_t)head * bytes);
            weft__sched_dep(s, recv, copy);
            copy = weft__sched_copy(s, dst, tmp + (size_t)head * bytes, (size_t)(n - head) * bytes);
            weft__sched_dep(s, recv, copy);
        }
        return WEFT_OK;
    }

    weft__sched_step(s, "subtree", 0);
    if (sub == 1) {
        weft__sched_send(s, weft__abs_rank(v - span, a->root, p), 0, a->src, bytes);
        return WEFT_OK;
    }
    tmp = weft__sched_scratch(s, (size_t)sub * bytes);
    if (tmp == NULL) {
        return WEFT_OK;
    }
    send = weft__sched_send(s, weft__abs_rank(v - span, a->root, p), 0, tmp, (size_t)sub * bytes);
    copy = weft__sched_copy(s, tmp, a->src, bytes);
    weft__sched_dep(s, copy, send);
    for (int m = 1; m < span && v + m < p; m *= 2) {
        int recv =
            weft__sched_recv(s, weft__abs_rank(v + m, a->root, p), 0, tmp + (size_t)m * bytes,
                             (size_t)weft__binomial_subtree(v + m, p) * bytes);

        weft__sched_dep(s, recv, send);
    }
    return WEFT_OK;
}
