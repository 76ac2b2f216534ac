/* Communicator objects: creation, handles, destruction, the public
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

#define ID_MASK ((1u << WEFT_TAG_COMM_BITS) - 1)
#define IDS_GONE 256 /* ids a new split avoids */
#define IDS_DROP 64  /* the last released ids whose late messages a release drops */

/* Tag ids in use: live communicators per id, and the last ones released. */
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t ids_live[ID_MASK + 1];
static uint32_t ids_gone[IDS_GONE];
static unsigned ngone;

int weft__comm_id_taken(uint32_t id)
{
    int taken;

    pthread_mutex_lock(&ids_lock);
    taken = ids_live[id & ID_MASK] > 0;
    for (unsigned i = 0; i < IDS_GONE && i < ngone && !taken; i++) {
        taken = ids_gone[i] == (id & ID_MASK);
    }
    pthread_mutex_unlock(&ids_lock);
    return taken;
}

uint32_t weft__comm_free_id(uint32_t from)
{
    for (uint32_t i = 0; i < (1u << WEFT_TAG_COMM_BITS); i++) {
        if (!weft__comm_id_taken(from + i)) {
            return from + i;
        }
    }
    return from; /* 65536 live communicators: nothing is free */
}

weft_status_t weft__comm_create(int rank, int size, uint32_t id, const weft_pt2pt_ops_t *p2p,
                                void *p2p_ep, const weft_bootstrap_ops_t *boot, void *boot_ctx,
                                struct weft_comm **comm_p)
{
    struct weft_comm *comm = calloc(1, sizeof(*comm));
    weft_status_t status;

    if (comm == NULL || (comm->rt = calloc(1, sizeof(*comm->rt))) == NULL) {
        free(comm);
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a communicator");
    }
    status = weft__coll_comm_create(comm);
    if (status == WEFT_OK) {
        status = weft__handle_add(&weft__comm_handles, comm, (void **)&comm->handle);
        if (status != WEFT_OK) {
            weft__coll_comm_free(comm);
        }
    }
    if (status != WEFT_OK) {
        free(comm->rt);
        free(comm);
        return status;
    }
    comm->rank = rank;
    comm->size = size;
    comm->id = id;
    comm->p2p = p2p;
    comm->p2p_ep = p2p_ep;
    comm->boot = boot;
    comm->boot_ctx = boot_ctx;
    comm->up = &weft__coll_upcalls;
    pthread_mutex_lock(&ids_lock);
    ids_live[id & ID_MASK]++;
    pthread_mutex_unlock(&ids_lock);
    atomic_init(&comm->refs, 1);
    atomic_init(&comm->pins, 1);
    *comm_p = comm;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_rank(weft_comm_t handle, int *rank_p)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    if (rank_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "rank is NULL");
    }
    *rank_p = comm->rank;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_set_timeout(weft_comm_t handle, double seconds)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    if (!(seconds >= 0)) { /* negative or NaN */
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "timeout %g is not a number of seconds >= 0 (0: WEFT_TIMEOUT, inf: none)",
                           seconds);
    }
    comm->timeout_s = seconds;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_set_reproducible(weft_comm_t handle, int on)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    if (on != 0 && on != 1) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_comm_set_reproducible: on is %d, not 1 (on) or 0 (off)", on);
    }
    weft__coll_set_reproducible(comm, on);
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_size(weft_comm_t handle, int *size_p)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    if (size_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "size is NULL");
    }
    *size_p = comm->size;
    return WEFT_OK;
}

void weft__comm_get(struct weft_comm *comm)
{
    atomic_fetch_add(&comm->refs, 1);
}

void weft__comm_pin(struct weft_comm *comm)
{
    atomic_fetch_add(&comm->pins, 1);
}

void weft__comm_unpin(struct weft_comm *comm)
{
    if (atomic_fetch_sub(&comm->pins, 1) == 1) {
        weft__coll_comm_free(comm);
        free(comm->rt);
        free(comm);
    }
}

/*
 * id is released: it joins the released ids, and drop gets the ids whose
 * unexpected messages the transport drops now: the last IDS_DROP released
 * (id first) that no live communicator holds. New communicators take ids
 * free on every member (weft__comm_free_id), so a live one holds such an id
 * only when none was free; its messages stay then too.
 */
static unsigned released_id(uint32_t id, uint32_t drop[IDS_DROP])
{
    unsigned n = 0;

    pthread_mutex_lock(&ids_lock);
    ids_live[id & ID_MASK]--;
    ids_gone[ngone++ % IDS_GONE] = id & ID_MASK;
    for (unsigned i = 0; i < IDS_DROP && i < ngone; i++) {
        uint32_t gone = ids_gone[(ngone - 1 - i) % IDS_GONE];
        int dup = ids_live[gone] > 0;

        for (unsigned j = 0; j < n && !dup; j++) {
            dup = drop[j] == gone;
        }
        if (!dup) {
            drop[n++] = gone;
        }
    }
    pthread_mutex_unlock(&ids_lock);
    return n;
}

void weft__comm_put(struct weft_comm *comm)
{
    uint32_t drop[IDS_DROP];
    unsigned n;

    if (atomic_fetch_sub(&comm->refs, 1) != 1) {
        return;
    }
    if (comm->handle != NULL) { /* released without weft_comm_destroy: a failed creation */
        weft__handle_remove(&weft__comm_handles, comm->handle);
        comm->handle = NULL;
    }
    weft__coll_comm_release(comm);
    weft__comm_notice_release(comm);
    weft__node_map_free(comm->node);
    comm->node = NULL;
    n = released_id(comm->id, drop);
    if (comm->p2p->discard != NULL) { /* what peers sent that nobody will receive */
        comm->p2p->discard(comm->p2p_ep, drop, n);
    }
    comm->p2p->ep_release(comm->p2p_ep);
    comm->boot->release(comm->boot_ctx);
    comm->p2p_ep = NULL;
    comm->boot_ctx = NULL;
    weft__comm_unpin(comm);
}

/*
 * The handle is refused from now on (its generation is gone, base/handle.h);
 * the memory goes when the last communicator split from this one is
 * destroyed and the last request of it is settled or freed.
 */
WEFT_EXPORT weft_status_t weft_comm_destroy(weft_comm_t handle)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    /* its enqueued operations end first (their failure, if any, was
     * reported to their streams) */
    if (weft__enqueue_comm_drain(comm, "weft_comm_destroy") == WEFT_ERR_TIMEOUT) {
        return WEFT_ERR_TIMEOUT;
    }
    weft__handle_remove(&weft__comm_handles, handle);
    comm->handle = NULL;
    weft__comm_put(comm);
    return WEFT_OK;
}

weft_status_t weft__comm_node_setup(struct weft_comm *comm, weft_node_map_t *map)
{
    comm->node = map;
    return weft__shm_setup(comm);
}

WEFT_EXPORT weft_status_t weft_comm_dump(weft_comm_t handle, FILE *out)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "weft_comm_dump: comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    if (out == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_comm_dump: out is NULL");
    }
    if (atomic_load(&comm->rt->enq_pending) > 0) {
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

WEFT_EXPORT weft_status_t weft_comm_abort(weft_comm_t handle)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "weft_comm_abort: comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    atomic_store(&comm->aborted, 1);
    weft__log_info("communicator %u aborted", comm->id);
    return WEFT_OK;
}
