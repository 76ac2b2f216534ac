/*
 * Scatter-allgather broadcast (van de Geijn).
 *
 * Idea: cut the vector into p blocks, block j for relative rank j (root =
 * 0, coll/rooted.h). A binomial scatter gives every rank v the blocks of its
 * subtree [v, v + subtree(v)) in one message from its parent, so it ends
 * with at least its own block. A ring allgather on relative ranks then
 * circulates the blocks: at step s rank v sends block v - s to v + 1 and
 * receives block v - s - 1 from v - 1. Blocks that the receiver already has
 * from the scatter are neither sent nor received (both sides know the
 * tree), so in particular the root's buffer is never written.
 *
 *   p = 4, blocks b0..b3 of relative ranks 0..3
 *                 rank 0        rank 1   rank 2   rank 3
 *   scatter:      b0 b1 b2 b3   b1       b2 b3    b3
 *   ring step 0:  (3->0 -)      0->1 b0  1->2 b1  2->3 b2
 *   ring step 1:  (3->0 -)      0->1 b3  1->2 b0  2->3 b1
 *   ring step 2:  (3->0 -)      0->1 b2  (1->2 -) 2->3 b0
 *   (-: the receiver already has the block, no message)
 *
 * Cost (n bytes): scatter ceil(log2 p) alpha + (p-1)/p n beta, allgather
 * (p-1) alpha + (p-1)/p n beta; about 2 n beta in all, against
 * log2(p) n beta for the binomial tree, so for large n.
 */
#include "coll/rooted.h"

#include <stdlib.h>

/* Whether relative rank v holds block b after the scatter. */
static int has_block(int v, int b, int p)
{
    return b >= v && b < v + weft__binomial_subtree(v, p);
}

weft_status_t weft__bcast_scatter_allgather(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, v = weft__rel_rank(a->rank, a->root, p);
    const int next = weft__abs_rank((v + 1) % p, a->root, p);
    const int prev = weft__abs_rank((v - 1 + p) % p, a->root, p);
    const size_t es = a->esize, n = a->count;
    char *buf = a->dst;
    int have = -1; /* the task after which this rank holds its subtree's blocks */
    int *recvs;

    if (p == 1) {
        return WEFT_OK;
    }
    recvs = malloc(sizeof(int) * (size_t)p);
    if (recvs == NULL) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "bcast of %d ranks", p));
    }

    /* binomial scatter of the subtrees' blocks, slot 0 */
    weft__sched_step(s, "scatter", 0);
    if (v != 0) {
        size_t lo = weft__block_start(n, p, v);
        size_t hi = weft__block_start(n, p, v + weft__binomial_subtree(v, p));

        have = weft__sched_recv(s, weft__abs_rank(v - weft__binomial_span(v, p), a->root, p), 0,
                                buf + lo * es, (hi - lo) * es);
    }
    for (int m = weft__binomial_span(v, p) / 2; m > 0; m /= 2) {
        if (v + m < p) {
            size_t lo = weft__block_start(n, p, v + m);
            size_t hi = weft__block_start(n, p, v + m + weft__binomial_subtree(v + m, p));
            int send = weft__sched_send(s, weft__abs_rank(v + m, a->root, p), 0, buf + lo * es,
                                        (hi - lo) * es);

            weft__sched_dep(s, have, send);
        }
    }

    /* ring allgather on relative ranks, step st in slot 1 + st */
    for (int st = 0; st < p - 1; st++) {
        int sb = ((v - st) % p + p) % p, rb = ((v - st - 1) % p + p) % p;

        weft__sched_step(s, "allgather", st);
        recvs[st] = -1;
        if (!has_block((v + 1) % p, sb, p)) {
            int send =
                weft__sched_send(s, next, 1 + (uint32_t)st, buf + weft__block_start(n, p, sb) * es,
                                 weft__block_count(n, p, sb) * es);

            /* block sb came from the scatter or from the previous step */
            weft__sched_dep(s, has_block(v, sb, p) ? have : recvs[st - 1], send);
        }
        if (!has_block(v, rb, p)) {
            recvs[st] =
                weft__sched_recv(s, prev, 1 + (uint32_t)st, buf + weft__block_start(n, p, rb) * es,
                                 weft__block_count(n, p, rb) * es);
        }
    }
    free(recvs);
    return WEFT_OK;
}
