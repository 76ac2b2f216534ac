/*
 * Collectives of a communicator that lives on one node, through its
 * shared-memory segment (coll/shm/ops.c has the data movement and its cost).
 * On one node local rank = communicator rank. Where the segment is missing
 * (one rank, or forced by WEFT_TUNE where it cannot run), the cheapest
 * point-to-point algorithm builds the operation instead. One builder for
 * every collective of the "shm" rows of the registry (coll/registry.c).
 */
#include "coll/shm/shm.h"
#include "coll/comm_state.h"

int weft__shm_usable(struct weft_comm *comm, const weft_coll_args_t *a)
{
    return comm->coll->shm != NULL && comm->node->nnodes == 1 && comm->coll->shm->L == a->size;
}

static weft_status_t fallback(weft_sched_t *s, const weft_coll_args_t *a, size_t bytes)
{
    const weft_coll_algo_t *algo =
        weft__coll_choose_flat(weft__sched_comm(s), a->kind, bytes, a->size);

    if (algo == NULL) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "%s: no fallback algorithm",
                                               weft__coll_kind_name(a->kind)));
    }
    return algo->build(s, a);
}

/* Blocks of size equal counts, or the v layout (displs NULL: packed). */
static weft_status_t blocks(weft_sched_t *s, const weft_coll_args_t *a, size_t **boff_p,
                            size_t **bcnt_p)
{
    size_t *b = weft__sched_scratch(s, 2 * sizeof(size_t) * (size_t)a->size), pos = 0;

    if (b == NULL) {
        return WEFT_ERR_NO_MEMORY; /* the schedule has failed with the reason */
    }
    for (int q = 0; q < a->size; q++) {
        size_t n = a->counts != NULL ? a->counts[q] : a->count;

        b[q] = a->displs != NULL ? a->displs[q] : pos;
        b[a->size + q] = n;
        pos += n;
    }
    *boff_p = b;
    *bcnt_p = b + a->size;
    return WEFT_OK;
}

weft_status_t weft__shm_build(weft_sched_t *s, const weft_coll_args_t *a)
{
    struct weft_comm *comm = weft__sched_comm(s);
    weft_shm_t *shm = comm->coll->shm;
    size_t *boff, *bcnt;
    weft_status_t status;

    if (!weft__shm_usable(comm, a)) {
        return fallback(s, a, weft__coll_bytes(a));
    }
    weft__sched_step(s, "shared memory", 0);
    switch (a->kind) {
    case WEFT_COLL_ALLREDUCE:
        weft__shm_allreduce(s, shm, a->src, a->dst, a->count, a->esize);
        break;
    case WEFT_COLL_REDUCE:
        weft__shm_reduce(s, shm, a->root, a->src, a->dst, a->count, a->esize);
        break;
    case WEFT_COLL_BCAST:
        weft__shm_bcast(s, shm, a->root, a->dst, a->dst, a->count, a->esize);
        break;
    case WEFT_COLL_BARRIER:
        weft__shm_barrier(s, shm);
        break;
    case WEFT_COLL_GATHER:
        weft__shm_gather(s, shm, a->root, a->src, a->dst, a->count, a->esize);
        break;
    case WEFT_COLL_SCATTER:
        weft__shm_scatter(s, shm, a->root, a->src, a->dst, a->count, a->esize);
        break;
    case WEFT_COLL_ALLTOALL:
        weft__shm_alltoall(s, shm, a->src, a->dst, a->count, a->esize);
        break;
    case WEFT_COLL_REDUCE_SCATTER:
    case WEFT_COLL_REDUCE_SCATTER_V:
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_ALLGATHERV:
        status = blocks(s, a, &boff, &bcnt);
        if (status != WEFT_OK) {
            return status;
        }
        if (a->kind == WEFT_COLL_ALLGATHER || a->kind == WEFT_COLL_ALLGATHERV) {
            weft__shm_allgather(s, shm, a->src, a->dst, boff, bcnt, a->esize);
        } else {
            weft__shm_reduce_scatter(s, shm, a->src, a->dst, boff, bcnt, a->esize);
        }
        break;
    default:
        return weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "shm: %s not supported",
                                               weft__coll_kind_name(a->kind)));
    }
    return WEFT_OK; /* a failure while building sticks to the schedule */
}
