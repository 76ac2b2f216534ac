/*
 * Ring reduce-scatter.
 *
 * Idea: p blocks travel around the ring; at step s rank r sends its partial
 * sum of block (r - s - 1) to r + 1 and receives block (r - s - 2) from
 * r - 1, adding its own input. After p - 1 steps rank r holds block r
 * reduced over all ranks. Each block is cut into fragments that move
 * independently, so the reduction of one fragment overlaps the transfer of
 * the next.
 *
 *   step:     0        1        2          (p = 4, rank r sends -> r+1)
 *   rank 0:  b3 ->    b2 ->    b1 ->    ends with b0
 *   rank 1:  b0 ->    b3 ->    b2 ->    ends with b1
 *
 * Cost (n bytes, p ranks): (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma.
 * Bandwidth-optimal; latency grows linearly with p.
 *
 * Every block is reduced in ring order, the same on every run.
 */
#include "coll/ring.h"

#include <stdlib.h>

static inline int mod(int x, int p)
{
    return ((x % p) + p) % p;
}

void weft__ring_reduce_scatter_phase(weft_sched_t *s, const weft_ring_t *ring, const void *in,
                                     void *work, void *out, int *last, int *sends)
{
    const int p = ring->size, r = ring->rank, nfrag = ring->nfrag;
    const size_t es = ring->esize, stride = ring->frag_stride * es;
    const char *inb = in;
    char *workb = work, *outb = out;
    char *tmp, *acc = NULL;
    int *reduce_ids, *send_ids;

    if (p == 1) {
        for (int f = 0; f < nfrag; f++) {
            size_t off = weft__block_start(ring->total, nfrag, f);

            last[f] = weft__sched_copy(s, outb + off * es, inb + off * es,
                                       weft__block_count(ring->total, nfrag, f) * es);
        }
        return;
    }
    /* receive buffers, one per step parity, each fragment at a fixed stride */
    tmp = weft__sched_scratch(s, 2 * stride * (size_t)nfrag);
    if (work == NULL) {
        acc = weft__sched_scratch(s, 2 * stride * (size_t)nfrag);
    }
    reduce_ids = malloc(sizeof(int) * (size_t)(p - 1) * (size_t)nfrag);
    send_ids = malloc(sizeof(int) * (size_t)(p - 1) * (size_t)nfrag);
    if (reduce_ids == NULL || send_ids == NULL) {
        weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "ring reduce-scatter of %d ranks", p));
        goto out;
    }
    if (tmp == NULL || (work == NULL && acc == NULL)) {
        goto out;
    }
    for (int step = 0; step < p - 1; step++) {
        int sb = mod(r - step - 1, p), rb = mod(r - step - 2, p);
        size_t sb_start = weft__block_start(ring->total, p, sb);
        size_t sb_count = weft__block_count(ring->total, p, sb);
        size_t rb_start = weft__block_start(ring->total, p, rb);
        size_t rb_count = weft__block_count(ring->total, p, rb);

        weft__sched_step(s, "reduce-scatter", step);
        for (int f = 0; f < nfrag; f++) {
            int id = step * nfrag + f;
            size_t soff = weft__block_start(sb_count, nfrag, f);
            size_t scnt = weft__block_count(sb_count, nfrag, f);
            size_t roff = weft__block_start(rb_count, nfrag, f);
            size_t rcnt = weft__block_count(rb_count, nfrag, f);
            const char *sendbuf;
            char *recvbuf = tmp + ((size_t)(step % 2) * (size_t)nfrag + (size_t)f) * stride;
            char *dst;
            const void *srcs[2];
            int send, recv;

            if (step == 0) {
                sendbuf = inb + (sb_start + soff) * es;
            } else if (work != NULL) {
                sendbuf = workb + (sb_start + soff) * es;
            } else {
                sendbuf = acc + ((size_t)((step - 1) % 2) * (size_t)nfrag + (size_t)f) * stride;
            }
            if (step == p - 2) {
                dst = outb + roff * es;
            } else if (work != NULL) {
                dst = workb + (rb_start + roff) * es;
            } else {
                dst = acc + ((size_t)(step % 2) * (size_t)nfrag + (size_t)f) * stride;
            }
            send = weft__sched_send(s, mod(r + 1, p), (uint32_t)id, sendbuf, scnt * es);
            recv = weft__sched_recv(s, mod(r - 1, p), (uint32_t)id, recvbuf, rcnt * es);
            srcs[0] = inb + (rb_start + roff) * es;
            srcs[1] = recvbuf;
            reduce_ids[id] = weft__sched_reduce(s, dst, srcs, 2, rcnt);
            send_ids[id] = send;
            weft__sched_dep(s, recv, reduce_ids[id]);
            if (step > 0) {
                /* send what the previous step produced */
                weft__sched_dep(s, reduce_ids[id - nfrag], send);
                /* reductions of a fragment run in step order: the last one may
                 * write where an earlier one read its input (MPI in place) */
                weft__sched_dep(s, reduce_ids[id - nfrag], reduce_ids[id]);
                /* scratch accumulator of this parity is free once sent */
                if (work == NULL) {
                    weft__sched_dep(s, send_ids[id - nfrag], reduce_ids[id]);
                }
            }
            if (step > 1) {
                /* the receive buffer of this parity is free once reduced */
                weft__sched_dep(s, reduce_ids[id - 2 * nfrag], recv);
            }
            if (step == p - 2) {
                /* out may alias the input step 0 sent from (reduce_scatter in place) */
                weft__sched_dep(s, send_ids[f], reduce_ids[id]);
                last[f] = reduce_ids[id];
            }
        }
    }
    if (sends != NULL) {
        for (int i = 0; i < (p - 1) * nfrag; i++) {
            sends[i] = send_ids[i];
        }
    }
out:
    free(reduce_ids);
    free(send_ids);
}

weft_status_t weft__reduce_scatter_ring(weft_sched_t *s, const weft_coll_args_t *a)
{
    weft_ring_t ring;
    int *last;

    weft__ring_init(&ring, a, a->count * (size_t)a->size);
    last = malloc(sizeof(int) * (size_t)ring.nfrag);
    if (last == NULL) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "ring reduce-scatter"));
    }
    weft__ring_reduce_scatter_phase(s, &ring, a->src, NULL, a->dst, last, NULL);
    free(last);
    return WEFT_OK;
}
