/*
 * Requests of the collectives weft serves.
 *
 * Each is an MPI generalized request (a real MPI_Request: MPI_Cancel,
 * MPI_Request_get_status and arrays mixing it with point-to-point requests
 * keep working) mapped to its weft request. MPI never completes one on its
 * own, so the completion calls are interposed: they test the weft requests
 * in their arguments, complete (MPI_Grequest_complete) those weft has
 * finished, and leave the rest to the PMPI_ function. A wait that would
 * block alternates weft's progress (weft_test) with MPI's own (a PMPI test
 * that cannot complete while one of ours is unfinished), so point-to-point
 * traffic the other ranks wait for still moves. Requests of the MPI library
 * pass through untouched, and with none of ours alive a completion call
 * costs one atomic load.
 *
 * Status of a completed collective request, as Open MPI's own
 * nonblocking collectives leave it: MPI_SOURCE MPI_PROC_NULL, MPI_TAG
 * MPI_ANY_TAG, zero elements, not cancelled; MPI_ERROR is set only where
 * MPI sets it (MPI_ERR_IN_STATUS).
 */
#include "bindings/mpi/weft_mpi_internal.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct rec {
    MPI_Request mreq;
    weft_request_t wreq;
    weft__mpi_comm_t *e;
    size_t *arrays;
    const char *name;
    int err;
    struct rec *next;
} rec_t;

#define NBUCKETS 256
static rec_t *buckets[NBUCKETS];
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int live;

static unsigned bucket(MPI_Request r)
{
    uintptr_t x = (uintptr_t)r;

    return (unsigned)((x >> 4) ^ (x >> 12)) & (NBUCKETS - 1);
}

static int query_fn(void *extra, MPI_Status *status)
{
    rec_t *r = extra;

    status->MPI_SOURCE = MPI_PROC_NULL;
    status->MPI_TAG = MPI_ANY_TAG;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    return r->err;
}

static int free_fn(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    /* a collective cannot be cancelled (MPI-3.1 5.12): it runs to the end */
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

int weft__mpi_request_start(weft__mpi_comm_t *e, weft_request_t wreq, weft__mpi_call_t *c,
                            MPI_Request *req)
{
    rec_t *r = calloc(1, sizeof(*r));
    int rc = r == NULL ? MPI_ERR_NO_MEM : PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, req);

    if (rc != MPI_SUCCESS) {
        /* no MPI request to hand back: finish the collective here */
        pthread_mutex_lock(&weft__mpi_lock);
        weft_wait(wreq);
        weft_request_free(wreq);
        pthread_mutex_unlock(&weft__mpi_lock);
        free(r);
        free(c->arrays);
        weft__mpi_comm_put(e);
        if (!atomic_load(&e->mcomm_freed)) {
            PMPI_Comm_call_errhandler(e->mcomm, rc);
        }
        return rc;
    }
    r->mreq = *req;
    r->wreq = wreq;
    r->e = e;
    r->arrays = c->arrays;
    r->name = c->name;
    pthread_mutex_lock(&map_lock);
    r->next = buckets[bucket(r->mreq)];
    buckets[bucket(r->mreq)] = r;
    atomic_fetch_add(&live, 1);
    pthread_mutex_unlock(&map_lock);
    return MPI_SUCCESS;
}

static rec_t *find(MPI_Request mreq, int unlink)
{
    rec_t **p, *r = NULL;

    pthread_mutex_lock(&map_lock);
    for (p = &buckets[bucket(mreq)]; *p != NULL; p = &(*p)->next) {
        if ((*p)->mreq == mreq) {
            r = *p;
            if (unlink) {
                *p = r->next;
                atomic_fetch_sub(&live, 1);
            }
            break;
        }
    }
    pthread_mutex_unlock(&map_lock);
    return r;
}

/* weft finished r (status): hand it to MPI as complete. */
static void complete(rec_t *r, weft_status_t status)
{
    weft__mpi_comm_t *e = r->e;

    find(r->mreq, 1);
    pthread_mutex_lock(&weft__mpi_lock);
    weft_request_free(r->wreq);
    pthread_mutex_unlock(&weft__mpi_lock);
    free(r->arrays);
    r->arrays = NULL;
    if (status != WEFT_OK) {
        r->err = weft__mpi_raise(e, r->name, status);
    }
    weft__mpi_comm_put(e);
    PMPI_Grequest_complete(r->mreq);
}

/* Test ours among reqs; the number still unfinished. */
static int poll(int n, const MPI_Request *reqs)
{
    int pending = 0;

    for (int i = 0; i < n; i++) {
        rec_t *r;
        weft_status_t status;
        int done = 0;

        if (reqs[i] == MPI_REQUEST_NULL || (r = find(reqs[i], 0)) == NULL) {
            continue;
        }
        pthread_mutex_lock(&weft__mpi_lock);
        status = weft_test(r->wreq, &done);
        pthread_mutex_unlock(&weft__mpi_lock);
        if (done || status != WEFT_OK) {
            complete(r, status);
        } else {
            pending++;
        }
    }
    return pending;
}

static int ours_alive(void)
{
    return atomic_load_explicit(&live, memory_order_acquire) > 0;
}

WEFT_MPI_EXPORT int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    int flag;

    if (!ours_alive() || req == NULL) {
        return PMPI_Wait(req, status);
    }
    while (poll(1, req) > 0) {
        PMPI_Test(req, &flag, MPI_STATUS_IGNORE); /* MPI's progress; ours is unfinished */
    }
    return PMPI_Wait(req, status);
}

WEFT_MPI_EXPORT int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    int flag;

    if (!ours_alive() || reqs == NULL || n < 0) {
        return PMPI_Waitall(n, reqs, statuses);
    }
    while (poll(n, reqs) > 0) {
        PMPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE); /* cannot all be complete */
    }
    return PMPI_Waitall(n, reqs, statuses);
}

WEFT_MPI_EXPORT int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    int flag = 0, rc;

    if (!ours_alive() || reqs == NULL || n < 0 || index == NULL) {
        return PMPI_Waitany(n, reqs, index, status);
    }
    for (;;) {
        if (poll(n, reqs) == 0) {
            return PMPI_Waitany(n, reqs, index, status);
        }
        rc = PMPI_Testany(n, reqs, index, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
    }
}

WEFT_MPI_EXPORT int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                                 MPI_Status statuses[])
{
    int rc;

    if (!ours_alive() || reqs == NULL || n < 0 || outcount == NULL) {
        return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
    }
    for (;;) {
        if (poll(n, reqs) == 0) {
            return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
        }
        rc = PMPI_Testsome(n, reqs, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0) {
            return rc;
        }
    }
}

WEFT_MPI_EXPORT int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    if (ours_alive() && req != NULL) {
        poll(1, req);
    }
    return PMPI_Test(req, flag, status);
}

WEFT_MPI_EXPORT int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    if (ours_alive() && reqs != NULL && n > 0) {
        poll(n, reqs);
    }
    return PMPI_Testall(n, reqs, flag, statuses);
}

WEFT_MPI_EXPORT int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag,
                                MPI_Status *status)
{
    if (ours_alive() && reqs != NULL && n > 0) {
        poll(n, reqs);
    }
    return PMPI_Testany(n, reqs, index, flag, status);
}

WEFT_MPI_EXPORT int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                                 MPI_Status statuses[])
{
    if (ours_alive() && reqs != NULL && n > 0) {
        poll(n, reqs);
    }
    return PMPI_Testsome(n, reqs, outcount, indices, statuses);
}

WEFT_MPI_EXPORT int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    if (ours_alive()) {
        poll(1, &req);
    }
    return PMPI_Request_get_status(req, flag, status);
}

/* Open MPI frees a nonblocking collective's request once it is done and
 * refuses an active one (MPI_ERR_REQUEST through MPI_COMM_WORLD's
 * handler): so does this. */
WEFT_MPI_EXPORT int MPI_Request_free(MPI_Request *req)
{
    if (!ours_alive() || req == NULL || find(*req, 0) == NULL || poll(1, req) == 0) {
        return PMPI_Request_free(req);
    }
    PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_REQUEST);
    return MPI_ERR_REQUEST;
}

/* MPI_Finalize: finish what is still running (each weft wait has its
 * deadline), so that no communicator is destroyed under a collective. */
void weft__mpi_request_drain(void)
{
    for (int b = 0; b < NBUCKETS; b++) {
        rec_t *r;

        while ((r = buckets[b]) != NULL) {
            weft_status_t status;

            pthread_mutex_lock(&weft__mpi_lock);
            status = weft_wait(r->wreq);
            pthread_mutex_unlock(&weft__mpi_lock);
            complete(r, status);
        }
    }
}
