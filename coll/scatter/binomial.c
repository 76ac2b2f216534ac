/*
 * Binomial-tree scatter.
 *
 * Idea: the gather tree run forwards on relative ranks (root = 0,
 * coll/rooted.h). The root sends each child v + m the blocks of its subtree
 * [m, m + subtree(m)) in one message, straight from the input unless the
 * subtree wraps past rank p - 1 in communicator order (then it is first
 * packed in scratch). Every other rank receives its subtree's blocks in
 * relative order, keeps the first and forwards each child's range.
 *
 *   p = 8, root 0:  0->4 (4 blocks)   0->2, 4->6 (2 blocks)
 *                   0->1, 2->3, 4->5, 6->7 (1 block)
 *
 * Cost (n bytes per rank): ceil(log2 p) alpha + (p-1) n beta at the root.
 */
#include "coll/rooted.h"

weft_status_t weft__scatter_binomial(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, v = weft__rel_rank(a->rank, a->root, p);
    const size_t bytes = a->count * a->esize;
    const int span = weft__binomial_span(v, p), sub = weft__binomial_subtree(v, p);
    const char *src = a->src;
    char *tmp;
    int recv, copy;

    if (v == 0) {
        weft__sched_step(s, "root", 0);
        weft__sched_copy(s, a->dst, src + (size_t)a->root * bytes, bytes);
        for (int m = span / 2; m > 0; m /= 2) {
            int first = weft__abs_rank(m, a->root, p), n = weft__binomial_subtree(m, p);
            int head, send;

            if (first + n <= p) {
                weft__sched_send(s, first, 0, src + (size_t)first * bytes, (size_t)n * bytes);
                continue;
            }
            /* the subtree wraps: ranks first .. p-1, then 0 .. */
            tmp = weft__sched_scratch(s, (size_t)n * bytes);
            if (tmp == NULL) {
                return WEFT_OK; /* the schedule has failed; sched_start returns why */
            }
            head = p - first;
            send = weft__sched_send(s, first, 0, tmp, (size_t)n * bytes);
            copy = weft__sched_copy(s, tmp, src + (size_t)first * bytes, (size_t)head * bytes);
            weft__sched_dep(s, copy, send);
            copy = weft__sched_copy(s, tmp + (size_t)head * bytes, src, (size_t)(n - head) * bytes);
            weft__sched_dep(s, copy, send);
        }
        return WEFT_OK;
    }

    weft__sched_step(s, "subtree", 0);
    if (sub == 1) {
        weft__sched_recv(s, weft__abs_rank(v - span, a->root, p), 0, a->dst, bytes);
        return WEFT_OK;
    }
    tmp = weft__sched_scratch(s, (size_t)sub * bytes);
    if (tmp == NULL) {
        return WEFT_OK;
    }
    recv = weft__sched_recv(s, weft__abs_rank(v - span, a->root, p), 0, tmp, (size_t)sub * bytes);
    copy = weft__sched_copy(s, a->dst, tmp, bytes);
    weft__sched_dep(s, recv, copy);
    for (int m = span / 2; m > 0; m /= 2) {
        if (v + m < p) {
            int send =
                weft__sched_send(s, weft__abs_rank(v + m, a->root, p), 0, tmp + (size_t)m * bytes,
                                 (size_t)weft__binomial_subtree(v + m, p) * bytes);

            weft__sched_dep(s, recv, send);
        }
    }
    return WEFT_OK;
}
