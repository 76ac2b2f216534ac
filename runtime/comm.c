/* Communicator objects: creation, checks, destruction with tombstones. */
#include "runtime/comm.h"
#include "runtime/enqueue.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"
#include "coll/sched.h"
#include "coll/shm/shm.h"
#include "runtime/config.h"
#include "runtime/init.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>

/*
 * Failure notices travel on a sequence number of their own (no collective
 * takes it), from each rank to the next in a ring: rank r listens only to
 * r - 1, and tells r + 1 once, when it fails (by itself or by a notice), so a
 * failure anywhere reaches every rank with one message per rank.
 */
static weft_status_t fail_from(weft_comm_t comm, weft_status_t status, int origin);

static uint64_t notice_tag(weft_comm_t comm)
{
    return weft__tag_make(comm->id, WEFT_TAG_SEQ_NOTICE, 0);
}

static void notice_post(weft_comm_t comm)
{
    if (comm->notice_posted) {
        return; /* posting failed once, or the notice arrived: not again */
    }
    comm->notice_posted = 1;
    if (comm->p2p->irecv(comm->p2p_ep, (comm->rank + comm->size - 1) % comm->size, &comm->notice_in,
                         sizeof(comm->notice_in), WEFT_MEM_HOST, notice_tag(comm),
                         &comm->notice_recv) != WEFT_OK) {
        comm->notice_recv = NULL;
    }
}

/* Record the failure a notice from the left neighbour carries: 1 when one came. */
static int notice_arrived(weft_comm_t comm)
{
    int done = 0;
    weft_status_t status = comm->p2p->test(comm->p2p_ep, comm->notice_recv, &done);
    struct weft_comm_notice *n = &comm->notice_in;

    if (!done) {
        return 0;
    }
    comm->notice_recv = NULL;
    if (status != WEFT_OK || n->status >= 0 || n->origin < 0 || n->origin >= comm->size) {
        return 0; /* the transport failed: its own errors report that */
    }
    n->text[sizeof(n->text) - 1] = '\0';
    weft__error((weft_status_t)n->status, "rank %d reported: %s", (int)n->origin, n->text);
    fail_from(comm, (weft_status_t)n->status, (int)n->origin);
    return 1;
}

static void notice_release(weft_comm_t comm)
{
    int done = 0;

    if (comm->notice_recv != NULL) {
        comm->p2p->cancel(comm->p2p_ep, comm->notice_recv);
        comm->notice_recv = NULL;
    }
    if (comm->notice_send != NULL) {
        /* a notice is a few hundred bytes: give it a moment to leave */
        for (int i = 0; i < 1000 && !done; i++) {
            comm->p2p->progress(comm->p2p_ep);
            if (comm->p2p->test(comm->p2p_ep, comm->notice_send, &done) != WEFT_OK) {
                done = 1;
            }
        }
        if (!done) {
            comm->p2p->cancel(comm->p2p_ep, comm->notice_send);
        }
        comm->notice_send = NULL;
    }
}

static int breaks_comm(weft_status_t status)
{
    switch (status) {
    case WEFT_ERR_TIMEOUT:
    case WEFT_ERR_MISMATCH:
    case WEFT_ERR_PEER_FAILED:
    case WEFT_ERR_ABORTED:
    case WEFT_ERR_TRANSPORT:
    case WEFT_ERR_INTERNAL:
        return 1;
    default:
        return 0;
    }
}

static weft_status_t fail_from(weft_comm_t comm, weft_status_t status, int origin)
{
    int right = (comm->rank + 1) % comm->size;
    struct weft_comm_notice *n = &comm->notice_out;

    if (comm->failed != WEFT_OK || !breaks_comm(status) || comm->magic != WEFT_COMM_MAGIC) {
        return status;
    }
    comm->failed = status;
    snprintf(comm->failed_msg, sizeof(comm->failed_msg), "%s", weft__error_detail());
    /* timeouts and dead peers are logged where they are found */
    weft__log(status == WEFT_ERR_MISMATCH && origin < 0 ? WEFT_LOG_ERROR : WEFT_LOG_INFO,
              "communicator %u failed: %s", comm->id, comm->failed_msg);
    if (status == WEFT_ERR_TIMEOUT || status == WEFT_ERR_PEER_FAILED) {
        /* what this rank ran, and what it is stuck in: put next to the
         * other ranks' dumps, the first operation not done everywhere */
        weft__record_dump(comm, NULL, 1);
    }
    if (status == WEFT_ERR_ABORTED || comm->size == 1 || right == origin) {
        weft__obs_comm_failed(comm); /* its trace, now */
        return status; /* aborting is local; the right neighbour knows already */
    }
    n->status = (int32_t)status;
    n->origin = (int32_t)(origin >= 0 ? origin : comm->rank);
    snprintf(n->text, sizeof(n->text), "%s", origin >= 0 ? comm->notice_in.text : comm->failed_msg);
    if (comm->p2p->isend(comm->p2p_ep, right, n, sizeof(*n), WEFT_MEM_HOST, notice_tag(comm),
                         &comm->notice_send) != WEFT_OK) {
        comm->notice_send = NULL;
    }
    weft__obs_comm_failed(comm); /* its trace, once the notice is on its way */
    return status;
}

weft_status_t weft__comm_fail(weft_comm_t comm, weft_status_t status)
{
    return fail_from(comm, status, -1);
}

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
    atomic_init(&comm->refs, 1);
    *comm_p = comm;
    return WEFT_OK;
}

weft_status_t weft__comm_check(weft_comm_t comm, const char *what)
{
    if (comm == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s is NULL", what);
    }
    if (comm->magic == WEFT_COMM_DESTROYED) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s was destroyed", what);
    }
    if (comm->magic != WEFT_COMM_MAGIC) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s is not a weft communicator", what);
    }
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_rank(weft_comm_t comm, int *rank)
{
    weft_status_t status = weft__comm_check(comm, "comm");

    if (status != WEFT_OK) {
        return status;
    }
    if (rank == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "rank is NULL");
    }
    *rank = comm->rank;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_size(weft_comm_t comm, int *size)
{
    weft_status_t status = weft__comm_check(comm, "comm");

    if (status != WEFT_OK) {
        return status;
    }
    if (size == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "size is NULL");
    }
    *size = comm->size;
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
    notice_release(comm);
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

weft_status_t weft__comm_health(weft_comm_t comm)
{
    int failed;

    if (WEFT_UNLIKELY(comm->failed != WEFT_OK)) {
        return weft__error(comm->failed, "communicator failed earlier: %s", comm->failed_msg);
    }
    if (WEFT_UNLIKELY(comm->notice_recv == NULL) && comm->size > 1) {
        notice_post(comm);
    }
    if (comm->notice_recv != NULL && notice_arrived(comm)) {
        return weft__error(comm->failed, "communicator failed: %s", comm->failed_msg);
    }
    if (atomic_load_explicit(&comm->aborted, memory_order_relaxed)) {
        return weft__error(WEFT_ERR_ABORTED, "communicator aborted by weft_comm_abort");
    }
    if (comm->boot->failed_rank != NULL &&
        (failed = comm->boot->failed_rank(comm->boot_ctx)) >= 0) {
        return weft__error(WEFT_ERR_PEER_FAILED, "rank %d failed (its process is gone)", failed);
    }
    if (comm->shm != NULL) {
        return weft__shm_health(comm->shm);
    }
    return WEFT_OK;
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
    weft__record_dump(comm, out, 0);
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

int weft__usable_cores(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        return CPU_COUNT(&set);
    }
    return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

uint64_t weft__deadline_ns(void)
{
    double t = weft__runtime_config.timeout;

    if (isinf(t) || t > 1e9) {
        return UINT64_MAX;
    }
    return weft__time_ns() + (uint64_t)(t * 1e9);
}
