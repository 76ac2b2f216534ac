/* Communicator objects: creation, destruction with tombstones, the public
 * rank/size/dump/abort calls (health and failures: comm/comm.c). */
#include "runtime/comm.h"
#include "runtime/enqueue.h"
#include "coll/coll.h"
#include "coll/diag/dump.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"
#include "coll/sched.h"
#include "coll/shm/shm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t tombstone_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_comm *tombstones;

weft_status_t weft__comm_create(int rank, int size, uint32_t id, const weft_pt2pt_ops_t *p2p,
                                void *p2p_ep, const weft_bootstrap_ops_t *boot, void *boot_ctx,
                                weft_comm_t *comm_p)
{
    struct weft_comm *comm = calloc(1, sizeof(*comm));

    if (comm == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a communicator");
    }
    comm->magic = WEFT_COMM_MAGIC;
    comm->rank = rank;
    comm->size = size;
    comm->id = id;
    comm->p2p = p2p;
    comm->p2p_ep = p2p_ep;
    comm->boot = boot;
    comm->boot_ctx = boot_ctx;
    comm->up = &weft__coll_upcalls;
    atomic_init(&comm->refs, 1);
    *comm_p = comm;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_rank(weft_comm_t comm, int *rank_p)
{
    weft_status_t status = weft__comm_check(comm, "comm");

    if (status != WEFT_OK) {
        return status;
    }
    if (rank_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "rank is NULL");
    }
    *rank_p = comm->rank;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_size(weft_comm_t comm, int *size_p)
{
    weft_status_t status = weft__comm_check(comm, "comm");

    if (status != WEFT_OK) {
        return status;
    }
    if (size_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "size is NULL");
    }
    *size_p = comm->size;
    return WEFT_OK;
}

void weft__comm_get(weft_comm_t comm)
{
    atomic_fetch_add(&comm->refs, 1);
}

void weft__comm_put(weft_comm_t comm)
{
    if (atomic_fetch_sub(&comm->refs, 1) != 1) {
        return;
    }
    weft__sched_cache_release(comm);
    weft__comm_notice_release(comm);
    weft__record_release(comm);
    weft__obs_comm_release(comm);
    weft__shm_release(comm->shm);
    comm->shm = NULL;
    weft__node_map_free(comm->node);
    comm->node = NULL;
    comm->p2p->ep_release(comm->p2p_ep);
    comm->boot->release(comm->boot_ctx);
    comm->p2p_ep = NULL;
    comm->boot_ctx = NULL;
}

/*
 * The handle stays allocated as a tombstone until weft_finalize so that a
 * later call with it is reported as "destroyed" instead of reading freed
 * memory. Its transport is released now, or when the last communicator
 * split from it is destroyed.
 */
WEFT_EXPORT weft_status_t weft_comm_destroy(weft_comm_t comm)
{
    weft_status_t status = weft__comm_check(comm, "comm");

    if (status != WEFT_OK) {
        return status;
    }
    /* its enqueued operations end first (their failure, if any, was
     * reported to their streams) */
    if (weft__enqueue_comm_drain(comm, "weft_comm_destroy") == WEFT_ERR_TIMEOUT) {
        return WEFT_ERR_TIMEOUT;
    }
    comm->magic = WEFT_COMM_DESTROYED;
    pthread_mutex_lock(&tombstone_lock);
    comm->next_destroyed = tombstones;
    tombstones = comm;
    pthread_mutex_unlock(&tombstone_lock);
    weft__comm_put(comm);
    return WEFT_OK;
}

void weft__comm_release_tombstones(void)
{
    pthread_mutex_lock(&tombstone_lock);
    struct weft_comm **p = &tombstones;

    while (*p != NULL) {
        struct weft_comm *c = *p;

        if (atomic_load(&c->refs) > 0) {
            /* a child communicator was never destroyed: keep what it uses */
            p = &c->next_destroyed;
            continue;
        }
        *p = c->next_destroyed;
        free(c);
    }
    pthread_mutex_unlock(&tombstone_lock);
}

weft_status_t weft__comm_node_setup(weft_comm_t comm, weft_node_map_t *map)
{
    comm->node = map;
    return weft__shm_setup(comm);
}

WEFT_EXPORT weft_status_t weft_comm_dump(weft_comm_t comm, FILE *out)
{
    weft_status_t status = weft__comm_check(comm, "weft_comm_dump: comm");

    if (status != WEFT_OK) {
        return status;
    }
    if (out == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_comm_dump: out is NULL");
    }
    if (atomic_load(&comm->enq_pending) > 0) {
        /* weft's progress thread drives them: their records are its to read */
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_comm_dump: comm has enqueued operations running on weft's "
                           "progress thread; synchronize their streams first, or dump them with "
                           "SIGUSR1 (WEFT_DUMP_ON_SIGNAL=1)");
    }
    weft__record_dump(comm, out, 0);
    weft__dump_event(comm, WEFT_DUMP_REQUEST, WEFT_OK);
    return fflush(out) == 0 ? WEFT_OK
                            : weft__error(WEFT_ERR_INVALID_ARG, "weft_comm_dump: cannot write");
}

WEFT_EXPORT weft_status_t weft_comm_abort(weft_comm_t comm)
{
    weft_status_t status = weft__comm_check(comm, "weft_comm_abort: comm");

    if (status != WEFT_OK) {
        return status;
    }
    atomic_store(&comm->aborted, 1);
    weft__log_info("communicator %u aborted", comm->id);
    return WEFT_OK;
}
