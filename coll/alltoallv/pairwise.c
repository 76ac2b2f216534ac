/*
 * Pairwise-exchange alltoallv.
 *
 * Idea: as the pairwise alltoall (coll/alltoall/pairwise.c) with per-peer
 * sizes: in step k rank r sends scounts[r+k] elements to r + k and receives
 * counts[r-k] elements from r - k. A rank cannot know what its peers send
 * it beyond its own counts, so every step exchanges a message, possibly
 * empty: every rank posts the same p - 1 sends and p - 1 receives. In
 * place, the input (the extent covered by the blocks) is staged into
 * scratch first.
 *
 * Cost (s bytes sent, r bytes received by one rank): (p-1) alpha +
 * max(s, r) beta, the slowest rank bounding the whole operation.
 */
#include "coll/exchange.h"

weft_status_t weft__alltoallv_pairwise(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    const size_t es = a->esize;
    const char *src = a->src;
    char *dst = a->dst;
    size_t own_bytes = a->counts[r] < a->scounts[r] ? a->counts[r] : a->scounts[r];
    int prev = -1, own;

    if (a->src == a->dst) {
        size_t extent = 0;
        char *stage;

        for (int i = 0; i < p; i++) {
            size_t end = a->sdispls[i] + a->scounts[i];

            extent = end > extent ? end : extent;
        }
        stage = weft__sched_scratch(s, extent * es);
        if (stage == NULL) {
            return WEFT_OK; /* the schedule carries the error */
        }
        weft__sched_step(s, "stage", 0);
        prev = weft__sched_copy(s, stage, src, extent * es);
        src = stage;
    }
    weft__sched_step(s, "copy", 0);
    own = weft__sched_copy(s, dst + a->displs[r] * es, src + a->sdispls[r] * es, own_bytes * es);
    weft__sched_dep(s, prev, own);
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = (r - k + p) % p;

        weft__sched_step(s, "pairwise", k);
        prev = weft__sched_exchange(s, prev, (uint32_t)k, to, src + a->sdispls[to] * es,
                                    a->scounts[to] * es, from, dst + a->displs[from] * es,
                                    a->counts[from] * es);
    }
    return WEFT_OK;
}
