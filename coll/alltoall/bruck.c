/*
 * Bruck alltoall.
 *
 * Idea: rotate the input so that tmp[i] is the block for rank r + i. In step
 * k (d = 2^k) every block whose index has bit d set moves d ranks on: it is
 * packed, sent to r + d, and the blocks received from r - d are unpacked
 * into the same indices. After ceil(log2 p) steps tmp[i] holds the block
 * rank r - i sent to r, and a last pass of copies puts it at block r - i of
 * the result. Blocks with bit d set come in runs of d, packed with one copy
 * per run.
 *
 *   p = 4, rank 0, tmp index:  0  1  2  3
 *   step 0 (d = 1) moves           x     x     to rank 1, from rank 3
 *   step 1 (d = 2) moves              x  x     to rank 2, from rank 2
 *
 * Cost (n bytes per rank, p ranks): ceil(log2 p) alpha + n/2 ceil(log2 p)
 * beta, plus local copies of about (log2 p + 2) n bytes. Few messages at
 * the price of moving every block log p / 2 times: for small blocks.
 * In place needs no extra staging: the rotation already copies the input.
 */
#include "coll/exchange.h"

/* Copy the blocks of tmp whose index has bit d set to or from pack, one task
 * per run; each task depends on `after`, and `join` depends on each. */
static void pack_runs(weft_sched_t *s, char *tmp, char *pack, int p, int d, size_t bb, int unpack,
                      int after, int join)
{
    size_t off = 0;

    for (int i = d; i < p; i += 2 * d) {
        int n = p - i < d ? p - i : d;
        int copy = unpack ? weft__sched_copy(s, tmp + (size_t)i * bb, pack + off, (size_t)n * bb)
                          : weft__sched_copy(s, pack + off, tmp + (size_t)i * bb, (size_t)n * bb);

        weft__sched_dep(s, after, copy);
        weft__sched_dep(s, copy, join);
        off += (size_t)n * bb;
    }
}

static size_t moved_blocks(int p, int d)
{
    size_t n = 0;

    for (int i = d; i < p; i += 2 * d) {
        n += (size_t)(p - i < d ? p - i : d);
    }
    return n;
}

weft_status_t weft__alltoall_bruck(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t bb = a->count * a->esize;
    const char *src = a->src;
    char *dst = a->dst;
    char *tmp = weft__sched_scratch(s, bb * (size_t)p);
    char *sbuf = weft__sched_scratch(s, bb * (size_t)(p / 2 + 1));
    char *rbuf = weft__sched_scratch(s, bb * (size_t)(p / 2 + 1));
    int prev, step = 0;

    if (tmp == NULL || sbuf == NULL || rbuf == NULL) {
        return WEFT_OK; /* the schedule carries the error */
    }
    /* rotate: blocks r .. p-1 -> tmp[0 .. p-r), blocks 0 .. r-1 -> tmp[p-r .. p) */
    weft__sched_step(s, "rotate", 0);
    prev = weft__sched_nop(s);
    weft__sched_dep(s, weft__sched_copy(s, tmp, src + (size_t)r * bb, (size_t)(p - r) * bb), prev);
    weft__sched_dep(s, weft__sched_copy(s, tmp + (size_t)(p - r) * bb, src, (size_t)r * bb), prev);
    for (int d = 1; d < p; d *= 2, step++) {
        size_t bytes = moved_blocks(p, d) * bb;
        int packed, arrived, send, recv, done;

        weft__sched_step(s, "bruck", step);
        packed = weft__sched_nop(s);
        arrived = weft__sched_nop(s);
        done = weft__sched_nop(s);
        pack_runs(s, tmp, sbuf, p, d, bb, 0, prev, packed);
        send = weft__sched_send(s, (r + d) % p, (uint32_t)step, sbuf, bytes);
        recv = weft__sched_recv(s, (r - d + p) % p, (uint32_t)step, rbuf, bytes);
        weft__sched_dep(s, packed, send);
        weft__sched_dep(s, prev, recv);
        weft__sched_dep(s, send, done);
        /* unpacking overwrites what was packed: after the packs and the receive */
        weft__sched_dep(s, packed, arrived);
        weft__sched_dep(s, recv, arrived);
        pack_runs(s, tmp, rbuf, p, d, bb, 1, arrived, done);
        prev = done;
    }
    /* tmp[i] came from rank r - i */
    weft__sched_step(s, "place", 0);
    for (int i = 0; i < p; i++) {
        weft__sched_dep(
            s, prev,
            weft__sched_copy(s, dst + (size_t)((r - i + p) % p) * bb, tmp + (size_t)i * bb, bb));
    }
    return WEFT_OK;
}
