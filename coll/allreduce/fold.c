/* Fold in and out of the power-of-two core (see fold.h). */
#include "coll/allreduce/fold.h"

void weft__fold_init(weft_fold_t *fold, int rank, int size)
{
    int pof2 = 1;

    while (pof2 * 2 <= size) {
        pof2 *= 2;
    }
    fold->rank = rank;
    fold->pof2 = pof2;
    fold->rem = size - pof2;
    if (rank < 2 * fold->rem) {
        fold->newrank = rank % 2 ? rank / 2 : -1;
    } else {
        fold->newrank = rank - fold->rem;
    }
}

int weft__fold_in(weft_sched_t *s, const weft_fold_t *fold, const weft_coll_args_t *a,
                  const void *data, void *tmp, int prev)
{
    const size_t bytes = a->count * a->esize;
    const void *srcs[2] = {data, tmp};
    int send, recv, reduce;

    if (fold->rank >= 2 * fold->rem) {
        return prev;
    }
    weft__sched_step(s, "fold-in", 0);
    if (fold->newrank < 0) {
        send = weft__sched_send(s, fold->rank + 1, 0, data, bytes);
        weft__sched_dep(s, prev, send);
        return send;
    }
    recv = weft__sched_recv(s, fold->rank - 1, 0, tmp, bytes);
    reduce = weft__sched_reduce(s, a->dst, srcs, 2, a->count);
    weft__sched_dep(s, prev, reduce);
    weft__sched_dep(s, recv, reduce);
    return reduce;
}

void weft__fold_out(weft_sched_t *s, const weft_fold_t *fold, void *buf, size_t bytes, int prev)
{
    int task;

    if (fold->rank >= 2 * fold->rem) {
        return;
    }
    weft__sched_step(s, "fold-out", 0);
    if (fold->newrank < 0) {
        task = weft__sched_recv(s, fold->rank + 1, WEFT_FOLD_OUT_SLOT, buf, bytes);
    } else {
        task = weft__sched_send(s, fold->rank - 1, WEFT_FOLD_OUT_SLOT, buf, bytes);
    }
    weft__sched_dep(s, prev, task);
}
