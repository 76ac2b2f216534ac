/*
 * Ring phases shared by ring allreduce, ring reduce_scatter and ring
 * allgather. The vector of `total` elements is cut into `size` blocks
 * (weft__block_start), each block into `nfrag` fragments; fragments move
 * independently so reducing fragment f overlaps sending fragment f+1.
 *
 * Tasks of step s, fragment f use message slot slot_base + s * nfrag + f.
 */
#ifndef WEFT_COLL_RING_H
#define WEFT_COLL_RING_H

#include "coll/coll.h"

typedef struct weft_ring {
    int rank;
    int size;
    size_t total; /* elements in all blocks together */
    size_t esize;
    int nfrag;
    size_t frag_stride; /* elements: the largest fragment of any block */
} weft_ring_t;

/* Fragment geometry agreed by every rank (from total, size, esize and
 * WEFT_RING_FRAG_SIZE). */
void weft__ring_init(weft_ring_t *ring, const weft_coll_args_t *a, size_t total);

/*
 * Reduce-scatter phase: block b's input is at in + start(b); after the
 * phase this rank's block, fully reduced, is at out. Partial sums of other
 * blocks go to work + start(b) when work is not NULL (allreduce: the result
 * buffer), else to scratch.
 * last[f] receives the task that completes fragment f of out; sends[s*nfrag+f]
 * (when not NULL) the send task of step s, fragment f.
 */
void weft__ring_reduce_scatter_phase(weft_sched_t *s, const weft_ring_t *ring, const void *in,
                                     void *work, void *out, int *last, int *sends);

/*
 * Allgather phase over buf (total elements), this rank's block already in
 * place or being produced by task own_ready[f] (-1: ready). When
 * recv_after is not NULL, the receive of step s, fragment f waits for task
 * recv_after[s*nfrag+f] (the last reader of that region).
 */
void weft__ring_allgather_phase(weft_sched_t *s, const weft_ring_t *ring, void *buf,
                                uint32_t slot_base, const int *own_ready, const int *recv_after);

#endif /* WEFT_COLL_RING_H */
