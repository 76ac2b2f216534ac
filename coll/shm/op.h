/*
 * One shared-memory operation in progress (coll/shm/ops.c), and what its
 * rounds share with the single-copy rounds (coll/shm/single_copy.c): the
 * flag protocol of coll/shm/shm.h, driven by this rank's op_poll.
 */
#ifndef WEFT_COLL_SHM_OP_H
#define WEFT_COLL_SHM_OP_H

#include "coll/shm/shm.h"

typedef enum {
    OP_ALLREDUCE1,
    OP_ALLREDUCE2,
    OP_ALLREDUCE_CMA,
    OP_ALLREDUCE_IPC,
    OP_REDUCE_SCATTER,
    OP_ALLGATHER,
    OP_BCAST,
    OP_REDUCE1,
    OP_REDUCE2,
    OP_BARRIER,
    OP_IPC_ALLGATHER, /* device memory: read the peers' buffers through IPC */
    OP_IPC_BCAST,
    OP_IPC_REDUCE,
    OP_CMA_ALLGATHER, /* host memory: read the peers' buffers by process_vm_readv */
    OP_CMA_BCAST,
    OP_CMA_ALLTOALL, /* each rank reads its block of every peer's src by process_vm_readv */
    OP_CMA_GATHER,   /* the root reads every peer's block by process_vm_readv */
    OP_CMA_SCATTER,  /* every rank reads its block of the root's src by process_vm_readv */
    OP_GATHER,       /* block `count` per rank: every rank's in its slot, the root copies all out */
    OP_SCATTER,      /* the root's blocks in sub-blocks of its slot, every rank copies its own */
    OP_ALLTOALL,     /* every rank's blocks in sub-blocks of its slot, each copies its sub-blocks */
} op_kind_t;

/* The operations that read the peers' host buffers by process_vm_readv in one round
 * (weft__shm_round_ipc's OP_CMA_* forms). */
static inline int weft__shm_kind_cma(op_kind_t kind)
{
    switch (kind) {
    case OP_CMA_ALLGATHER:
    case OP_CMA_BCAST:
    case OP_CMA_ALLTOALL:
    case OP_CMA_GATHER:
    case OP_CMA_SCATTER:
        return 1;
    default:
        return 0;
    }
}

typedef struct shm_op {
    weft_shm_t *shm;
    op_kind_t kind;
    const char *src;
    char *dst;
    size_t count; /* elements (vector operations) */
    const size_t *boff;
    const size_t *bcnt;
    /* blocks in pieces (weft__shm_allgather_pieces, weft__shm_reduce_scatter_pieces): every
     * local rank's block is pieces of pcount elements, piece j of rank q's at element
     * poff[q * pieces + j] of the user's buffer; pcount 0: each block whole, at boff[q]
     * (weft__shm_op_run) */
    size_t pcount, pieces;
    const size_t *poff;
    size_t esize;
    int root;
    const weft_op_desc_t *desc;
    const weft_device_ops_t *dev;
    size_t chunk; /* elements per round (per block for block operations) */
    uint64_t round0;
    uint64_t nrounds;
    uint64_t r;  /* rounds done */
    int phase;   /* within the current round */
    int waiting; /* first local rank not yet seen ready */
    size_t k;    /* single copy: chunks reduced by this rank */
    size_t kout; /* single copy: chunks whose results this rank has */
    int differs; /* a local rank whose signature differs from ours (-1: none seen) */
    int stream;  /* results copied out with non-temporal stores (WEFT_SHM_STREAM) */
    int release; /* barrier: the others wait for local rank 0's release (round_barrier) */
    /* IPC of buffers the device cannot share (CUDA managed, pool, VMM memory): copies in
     * scratch device memory are shared instead (single_copy.c, stage_unshareable) */
    char *scratch_src; /* holds src's bytes, exported in its place */
    char *scratch_dst; /* allreduce: the result is made here, then copied to user_dst */
    char *user_dst;
} shm_op_t;

/* The run of local rank q's block that starts at its element e0, at most n elements: where it
 * lies in the user's buffer (*at_p, in elements: dst for allgather, src for reduce_scatter), and
 * its length (the block lies whole at boff[q], or in pieces of pcount elements). */
static inline size_t weft__shm_op_run(const shm_op_t *o, int q, size_t e0, size_t n, size_t *at_p)
{
    size_t in;

    if (o->pcount == 0) {
        *at_p = o->boff[q] + e0;
        return n;
    }
    in = e0 % o->pcount;
    *at_p = o->poff[(size_t)q * o->pieces + e0 / o->pcount] + in;
    return n < o->pcount - in ? n : o->pcount - in;
}

static inline uint64_t load(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void store(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

#define SLOT(o, q, R) ((char *)weft__shm_slot((o)->shm, (q), (R)))

/* 1 when every local rank's arrive (or done) counter reached v (0 also
 * when a rank's signature differs: o->differs); *peer_p: one still awaited. */
int weft__shm_op_ready_all(shm_op_t *o, int done, uint64_t v, int *peer_p);
/* Nobody still reads round R - 2, the last user of round R's buffers. */
int weft__shm_op_reusable(shm_op_t *o, uint64_t R, int *peer_p);
/* This rank reached phase ph of round R (the signature travels with phase 1). */
void weft__shm_op_publish(shm_op_t *o, uint64_t R, int ph);
/* dst = srcs[0] op ... op srcs[n-1], in groups the device takes at once. */
weft_status_t weft__shm_op_reduce_many(shm_op_t *o, void *dst, const void **srcs, int n,
                                       size_t count);
/* elems elements of the operation's dtype from src to dst (nothing in place). */
weft_status_t weft__shm_op_copy(shm_op_t *o, void *dst, const void *src, size_t elems);
/* Elements of a vector or a block in round r. */
size_t weft__shm_op_span(size_t total, size_t chunk, uint64_t r);

/* Single-copy rounds (coll/shm/single_copy.c): host allreduce reading the
 * peers' buffers with process_vm_readv, and device allgather, bcast and
 * reduce through IPC handles. Same contract as every round: WEFT_INPROGRESS
 * while waiting for *peer_p, WEFT_OK when round R is done. */
weft_status_t weft__shm_round_cma(shm_op_t *o, uint64_t R, int *peer_p);
weft_status_t weft__shm_round_ipc(shm_op_t *o, uint64_t R, int *peer_p);
/* Returns the scratch of an IPC operation's unshareable buffers (when it
 * ends, whatever way). */
void weft__shm_ipc_release(shm_op_t *o);

#endif /* WEFT_COLL_SHM_OP_H */
