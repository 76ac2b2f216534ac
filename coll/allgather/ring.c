/*
 * Ring allgather.
 *
 * Idea: at step s rank r forwards block (r - s) to r + 1 and receives block
 * (r - s - 1) from r - 1, straight into its place in the result. After
 * p - 1 steps every rank has every block. Fragments of a block move
 * independently (fragment f is forwarded as soon as it arrived).
 *
 * Cost (n bytes of result, p ranks): (p-1) alpha + (p-1)/p n beta.
 * Bandwidth-optimal; latency grows linearly with p.
 */
#include "coll/ring.h"

#include <stdlib.h>

static inline int mod(int x, int p)
{
    return ((x % p) + p) % p;
}

void weft__ring_allgather_phase(weft_sched_t *s, const weft_ring_t *ring, void *buf,
                                uint32_t slot_base, const int *own_ready, const int *recv_after)
{
    const int p = ring->size, r = ring->rank, nfrag = ring->nfrag;
    const size_t es = ring->esize;
    char *b = buf;
    int *recv_ids;

    if (p == 1) {
        return;
    }
    recv_ids = malloc(sizeof(int) * (size_t)(p - 1) * (size_t)nfrag);
    if (recv_ids == NULL) {
        weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "ring allgather of %d ranks", p));
        return;
    }
    for (int step = 0; step < p - 1; step++) {
        int sb = mod(r - step, p), rb = mod(r - step - 1, p);
        size_t sb_start = weft__block_start(ring->total, p, sb);
        size_t sb_count = weft__block_count(ring->total, p, sb);
        size_t rb_start = weft__block_start(ring->total, p, rb);
        size_t rb_count = weft__block_count(ring->total, p, rb);

        weft__sched_step(s, "allgather", step);
        for (int f = 0; f < nfrag; f++) {
            int id = step * nfrag + f;
            size_t soff = weft__block_start(sb_count, nfrag, f);
            size_t roff = weft__block_start(rb_count, nfrag, f);
            int send = weft__sched_send(s, mod(r + 1, p), slot_base + (uint32_t)id,
                                        b + (sb_start + soff) * es,
                                        weft__block_count(sb_count, nfrag, f) * es);

            recv_ids[id] = weft__sched_recv(s, mod(r - 1, p), slot_base + (uint32_t)id,
                                            b + (rb_start + roff) * es,
                                            weft__block_count(rb_count, nfrag, f) * es);
            /* forward what the previous step received, or our own block */
            weft__sched_dep(s, step > 0 ? recv_ids[id - nfrag] : own_ready[f], send);
            if (recv_after != NULL) {
                weft__sched_dep(s, recv_after[id], recv_ids[id]);
            }
        }
    }
    free(recv_ids);
}

weft_status_t weft__allgather_ring(weft_sched_t *s, const weft_coll_args_t *a)
{
    weft_ring_t ring;
    size_t es = a->esize;
    char *own = (char *)a->dst + (size_t)a->rank * a->count * es;
    int *ready;

    weft__ring_init(&ring, a, a->count * (size_t)a->size);
    ready = malloc(sizeof(int) * (size_t)ring.nfrag);
    if (ready == NULL) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "ring allgather"));
    }
    weft__sched_step(s, "copy", 0);
    for (int f = 0; f < ring.nfrag; f++) {
        size_t off = weft__block_start(a->count, ring.nfrag, f);

        ready[f] = a->src == own ? -1
                                 : weft__sched_copy(s, own + off * es, (const char *)a->src + off * es,
                                                    weft__block_count(a->count, ring.nfrag, f) * es);
    }
    weft__ring_allgather_phase(s, &ring, a->dst, 0, ready, NULL);
    free(ready);
    return WEFT_OK;
}
