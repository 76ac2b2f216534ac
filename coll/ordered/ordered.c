/*
 * Ordered reductions: the algorithms of the reproducible mode
 * (WEFT_REPRODUCIBLE=1) for allreduce, reduce, reduce_scatter and
 * reduce_scatter_v.
 *
 * Idea: every element is combined on one rank, in rank order, in the same
 * grouping whatever the placement, the transport or the node layout:
 * rank r owns block r of the vector; every rank sends block q of its input
 * straight to rank q, and rank q folds the p blocks it then holds,
 *
 *     ((x0 op x1) op ... op x7) -> acc,  (acc op x8 op ... op x14) -> acc, ...
 *
 * (at most WEFT_SCHED_MAX_REDUCE_INPUTS inputs per reduction; the device
 * contract combines a reduction's inputs in index order, and rounds half
 * types once per reduction, on every memory type). The reduced blocks then
 * go where the collective wants them: to every rank (allreduce), to the root
 * (reduce), nowhere (reduce_scatter).
 *
 *   rank:      0          1          2         (p = 3, allreduce)
 *   input:   a0 a1 a2   b0 b1 b2   c0 c1 c2
 *   blocks:  a0 b0 c0 -> rank 0, a1 b1 c1 -> rank 1, a2 b2 c2 -> rank 2
 *   fold:    ((a0+b0)+c0)  ((a1+b1)+c1)  ((a2+b2)+c2)
 *   then every rank sends its folded block to every other rank
 *
 * Cost (n bytes of one rank's vector): the exchange (p-1) alpha +
 * (p-1)/p n beta and the fold (p-1)/p n gamma, not overlapped (a block is
 * folded once all of it is there); allreduce and reduce add (p-1) alpha +
 * (p-1)/p n beta for the distribution. Every rank sends to every other at
 * once, so it does not pipeline as the ring does: the price of the mode.
 *
 * Determinism: the result depends only on the inputs, the communicator size
 * and the dtype/op, not on the algorithm forced (in this mode only these
 * rows run), the ranks per node or the nodes: that is the point. Selection
 * offers these rows only in the reproducible mode, and only them there
 * (coll/cost.c, weft__cost_fits).
 *
 * In place: the blocks are read from the input while other blocks arrive in
 * the output, so where the two overlap a receive into block q waits until
 * block q was sent, and the fold waits for every send. The own block is
 * copied aside first when the result overlaps it without being it, or is it
 * but comes after the first reduction (rank >= 8), which writes the result.
 *
 * Slots: 0 for the exchange, 1 for the distribution.
 */
#include "coll/coll.h"

#include <stdlib.h>

/* What the exchange and fold leave: per rank, the task that sent it its
 * block (-1: nothing sent), and the task after which this rank's block of
 * the result is in out. */
typedef struct fold {
    int *sent; /* p entries, the caller's */
    int done;
} fold_t;

static int overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
    const char *x = a, *y = b;

    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

/*
 * Exchange the blocks of the input (block q: cnt[q] elements at off[q]; in
 * all, `total` bytes) and fold this rank's block in rank order into out
 * (cnt[rank] elements).
 */
static weft_status_t exchange_and_fold(weft_sched_t *s, const weft_coll_args_t *a,
                                       const size_t *off, const size_t *cnt, size_t total,
                                       char *out, fold_t *f)
{
    const char *in = a->src;
    const int p = a->size, r = a->rank;
    const size_t es = a->esize, mine = cnt[r] * es;
    const char *own = in + off[r] * es;
    /* out is input another rank still needs (out == own is not: it is
     * no one else's, and a reduction may write one of its inputs) */
    const int in_place = out != own && overlaps(out, mine, in, total);
    /* the own block is read where its rank comes in the fold: set aside
     * when out overlaps it and an earlier reduction writes out first */
    const int copy_own =
        out != own ? overlaps(out, mine, own, mine) : r >= WEFT_SCHED_MAX_REDUCE_INPUTS;
    const void *srcs[WEFT_SCHED_MAX_REDUCE_INPUTS];
    int *recvd = f->sent + p;
    int sends, copied = -1, prev = -1;
    char *scratch = weft__sched_scratch(s, mine * (size_t)(p - 1 + copy_own) + 1);

    if (scratch == NULL) {
        return WEFT_OK; /* the schedule has failed; sched_start returns why */
    }
    weft__sched_step(s, "exchange", 0);
    sends = weft__sched_nop(s);
    for (int q = 0; q < p; q++) {
        f->sent[q] = recvd[q] = -1;
    }
    /* staggered, so that the ranks do not all send to rank 0 first */
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = (r - k + p) % p;
        /* the block from rank q sits at scratch slot q (q < r) or q - 1 */
        char *slot = scratch + (size_t)(from < r ? from : from - 1) * mine;

        if (cnt[to] > 0) {
            f->sent[to] = weft__sched_send(s, to, 0, in + off[to] * es, cnt[to] * es);
            weft__sched_dep(s, f->sent[to], sends);
        }
        if (mine > 0) {
            recvd[from] = weft__sched_recv(s, from, 0, slot, mine);
        }
    }
    if (copy_own) {
        char *aside = scratch + (size_t)(p - 1) * mine;

        copied = weft__sched_copy(s, aside, own, mine);
        own = aside;
    }
    weft__sched_step(s, "fold", 0);
    for (int q = 0; q < p;) {
        int n = 0, first = q, t;

        if (prev >= 0) {
            srcs[n++] = out; /* the accumulator so far */
        }
        while (q < p && n < WEFT_SCHED_MAX_REDUCE_INPUTS) {
            srcs[n++] = q == r ? (const void *)own
                               : (const void *)(scratch + (size_t)(q < r ? q : q - 1) * mine);
            q++;
        }
        t = weft__sched_reduce(s, out, srcs, n, cnt[r]);
        for (int k = first; k < q; k++) {
            weft__sched_dep(s, recvd[k], t);
        }
        weft__sched_dep(s, copied, t);
        weft__sched_dep(s, prev, t);
        if (in_place) {
            weft__sched_dep(s, sends, t); /* out is input another rank still needs */
        }
        prev = t;
    }
    f->done = prev;
    return WEFT_OK;
}

/* The blocks of the vector: q of weft__block_count(count, p, q) elements
 * (allreduce, reduce), or of a->count each (reduce_scatter), or counts[q]
 * (reduce_scatter_v): offsets into off, counts into cnt. */
static void blocks(const weft_coll_args_t *a, size_t *off, size_t *cnt)
{
    size_t at = 0;

    for (int q = 0; q < a->size; q++) {
        switch (a->kind) {
        case WEFT_COLL_REDUCE_SCATTER:
            cnt[q] = a->count;
            break;
        case WEFT_COLL_REDUCE_SCATTER_V:
            cnt[q] = a->counts[q];
            break;
        default:
            cnt[q] = weft__block_count(a->count, a->size, q);
            break;
        }
        off[q] = at;
        at += cnt[q];
    }
}

/* allreduce, reduce: the folded blocks to every rank or to the root */
static void distribute(weft_sched_t *s, const weft_coll_args_t *a, const size_t *off,
                       const size_t *cnt, size_t total, char *out, const fold_t *f)
{
    const int p = a->size, r = a->rank;
    const size_t es = a->esize;

    weft__sched_step(s, "distribute", 0);
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = (r - k + p) % p;

        if (cnt[r] > 0 && (a->kind == WEFT_COLL_ALLREDUCE || to == a->root)) {
            weft__sched_dep(s, f->done, weft__sched_send(s, to, 1, out, cnt[r] * es));
        }
        if (cnt[from] > 0 && a->dst != NULL) {
            char *place = (char *)a->dst + off[from] * es;
            int t = weft__sched_recv(s, from, 1, place, cnt[from] * es);

            if (overlaps(place, cnt[from] * es, a->src, total)) {
                /* in place: block `from` of the input went to `from` first */
                weft__sched_dep(s, f->sent[from], t);
            }
        }
    }
}

weft_status_t weft__ordered_build(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t es = a->esize;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    int *tasks = malloc(2 * sizeof(int) * (size_t)p);
    size_t *cnt, total;
    char *out = a->dst;
    fold_t f = {.sent = tasks, .done = -1};
    weft_status_t status = WEFT_OK;

    if (off == NULL || tasks == NULL) {
        free(off);
        free(tasks);
        return weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "ordered %s of %d ranks",
                                               weft__coll_kind_name(a->kind), p));
    }
    cnt = off + p;
    blocks(a, off, cnt);
    total = (off[p - 1] + cnt[p - 1]) * es;
    switch (a->kind) {
    case WEFT_COLL_REDUCE_SCATTER:
    case WEFT_COLL_REDUCE_SCATTER_V:
        status = exchange_and_fold(s, a, off, cnt, total, out, &f);
        break;
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE:
        if (out != NULL) {
            out += off[r] * es;
        } else {
            out = weft__sched_scratch(s, cnt[r] * es + 1); /* reduce, not the root */
        }
        if (out != NULL) {
            status = exchange_and_fold(s, a, off, cnt, total, out, &f);
        }
        if (status == WEFT_OK && f.done >= 0) {
            distribute(s, a, off, cnt, total, out, &f);
        }
        break;
    default:
        status = weft__sched_fail(
            s, weft__error(WEFT_ERR_INTERNAL, "ordered: no %s", weft__coll_kind_name(a->kind)));
        break;
    }
    free(off);
    free(tasks);
    return status;
}
