/*
 * Running a checked call on weft: one dispatch for the blocking and the
 * nonblocking forms, under weft__mpi_lock where MPI_THREAD_MULTIPLE was
 * provided or a request outlives the call.
 */
#include "bindings/mpi/weft_mpi_internal.h"

#include <sched.h>
#include <stdlib.h>

size_t *weft__mpi_arrays(weft__mpi_call_t *c, int n, int size)
{
    c->arrays = malloc((size_t)n * (size_t)size * sizeof(size_t) + 1);
    return c->arrays;
}

static weft_status_t run(const weft__mpi_call_t *c, weft_comm_t wc)
{
    switch (c->kind) {
    case WEFT__MPI_ALLREDUCE:
        return weft_allreduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, wc);
    case WEFT__MPI_REDUCE:
        return weft_reduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, c->root, wc);
    case WEFT__MPI_BCAST:
        return weft_bcast(c->rbuf, c->count, c->dtype, c->root, wc);
    case WEFT__MPI_ALLGATHER:
        return weft_allgather(c->sbuf, c->rbuf, c->count, c->dtype, wc);
    case WEFT__MPI_ALLGATHERV:
        return weft_allgatherv(c->sbuf, c->rbuf, c->count, c->counts, c->displs, c->dtype, wc);
    case WEFT__MPI_REDUCE_SCATTER_V:
        return weft_reduce_scatter_v(c->sbuf, c->rbuf, c->counts, c->dtype, c->op, wc);
    case WEFT__MPI_REDUCE_SCATTER:
        return weft_reduce_scatter(c->sbuf, c->rbuf, c->count, c->dtype, c->op, wc);
    case WEFT__MPI_ALLTOALL:
        return weft_alltoall(c->sbuf, c->rbuf, c->count, c->dtype, wc);
    case WEFT__MPI_ALLTOALLV:
        return weft_alltoallv(c->sbuf, c->rbuf, c->scounts, c->sdispls, c->counts, c->displs,
                              c->dtype, wc);
    case WEFT__MPI_GATHER:
        return weft_gather(c->sbuf, c->rbuf, c->count, c->dtype, c->root, wc);
    case WEFT__MPI_SCATTER:
        return weft_scatter(c->sbuf, c->rbuf, c->count, c->dtype, c->root, wc);
    case WEFT__MPI_BARRIER:
        return weft_barrier(wc);
    }
    return WEFT_ERR_INTERNAL;
}

static weft_status_t start(const weft__mpi_call_t *c, weft_comm_t wc, weft_request_t *r)
{
    switch (c->kind) {
    case WEFT__MPI_ALLREDUCE:
        return weft_iallreduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, wc, r);
    case WEFT__MPI_REDUCE:
        return weft_ireduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, c->root, wc, r);
    case WEFT__MPI_BCAST:
        return weft_ibcast(c->rbuf, c->count, c->dtype, c->root, wc, r);
    case WEFT__MPI_ALLGATHER:
        return weft_iallgather(c->sbuf, c->rbuf, c->count, c->dtype, wc, r);
    case WEFT__MPI_ALLGATHERV:
        return weft_iallgatherv(c->sbuf, c->rbuf, c->count, c->counts, c->displs, c->dtype, wc, r);
    case WEFT__MPI_REDUCE_SCATTER_V:
        return weft_ireduce_scatter_v(c->sbuf, c->rbuf, c->counts, c->dtype, c->op, wc, r);
    case WEFT__MPI_REDUCE_SCATTER:
        return weft_ireduce_scatter(c->sbuf, c->rbuf, c->count, c->dtype, c->op, wc, r);
    case WEFT__MPI_ALLTOALL:
        return weft_ialltoall(c->sbuf, c->rbuf, c->count, c->dtype, wc, r);
    case WEFT__MPI_ALLTOALLV:
        return weft_ialltoallv(c->sbuf, c->rbuf, c->scounts, c->sdispls, c->counts, c->displs,
                               c->dtype, wc, r);
    case WEFT__MPI_GATHER:
        return weft_igather(c->sbuf, c->rbuf, c->count, c->dtype, c->root, wc, r);
    case WEFT__MPI_SCATTER:
        return weft_iscatter(c->sbuf, c->rbuf, c->count, c->dtype, c->root, wc, r);
    case WEFT__MPI_BARRIER:
        return weft_ibarrier(wc, r);
    }
    return WEFT_ERR_INTERNAL;
}

/* The entry of the call's communicator into *e_p: WEFT__MPI_SERVE, or the reason to forward.
 * *ref_p: whether the caller holds a reference to drop (weft__mpi_comm_put). A reference is
 * taken where the call outlives this function (a request) or another thread may free the
 * communicator meanwhile (MPI_THREAD_MULTIPLE); a blocking call of the only thread in MPI uses
 * the entry its check found as it is (one attribute lookup a call, no atomic). */
static weft__mpi_why_t entry_of(MPI_Comm comm, const weft__mpi_call_t *c, int keep,
                                weft__mpi_comm_t **e_p, int *ref_p)
{
    weft__mpi_why_t why;

    *ref_p = 0;
    if (keep || c->entry == NULL) {
        why = weft__mpi_comm_get(comm, e_p);
        *ref_p = why == WEFT__MPI_SERVE;
        return why;
    }
    if (c->entry->wc == NULL) {
        return WEFT__MPI_WHY_NO_COMM;
    }
    *e_p = c->entry;
    return WEFT__MPI_SERVE;
}

weft__mpi_why_t weft__mpi_serve(MPI_Comm comm, weft__mpi_why_t why, weft__mpi_call_t *c,
                                MPI_Request *req, int *rc_p)
{
    weft__mpi_comm_t *e = NULL;
    weft_request_t wreq = NULL;
    weft_status_t status;
    int ref = 0;

    if (why == WEFT__MPI_SERVE) {
        why = entry_of(comm, c, req != NULL || weft__mpi_multiple, &e, &ref);
    }
    if (why != WEFT__MPI_SERVE) {
        free(c->arrays);
        weft__mpi_count_forward(why);
        return why;
    }
    if (req == NULL && !weft__mpi_multiple) {
        status = run(c, e->wc); /* the only thread in MPI: nothing to exclude */
    } else {
        pthread_mutex_lock(&weft__mpi_lock);
        status = start(c, e->wc, &wreq);
        pthread_mutex_unlock(&weft__mpi_lock);
    }
    if (req == NULL && weft__mpi_multiple && status == WEFT_OK) {
        /* blocking, but other threads' collectives move meanwhile; each
         * test is bounded by the operation's deadline */
        int done = 0;

        while (!done) {
            pthread_mutex_lock(&weft__mpi_lock);
            status = weft_test(wreq, &done);
            if (status != WEFT_OK) {
                done = 1;
            }
            if (done) {
                weft_request_free(wreq);
            }
            pthread_mutex_unlock(&weft__mpi_lock);
            if (!done) {
                sched_yield();
            }
        }
        /* a weft argument error after the start is a failure, not a refusal */
        if (status == WEFT_ERR_INVALID_ARG || status == WEFT_ERR_UNSUPPORTED) {
            status = WEFT_ERR_INTERNAL;
        }
    }
    /* weft checks every argument before it sends anything, identically on
     * every rank: what it refuses, MPI gets instead */
    if (status == WEFT_ERR_INVALID_ARG || status == WEFT_ERR_UNSUPPORTED) {
        /* buffers of two memory types, or freed device memory: counted as such */
        why = weft__mpi_memory(c->sbuf, c->rbuf) == WEFT__MPI_WHY_MEMORY ? WEFT__MPI_WHY_MEMORY
                                                                         : WEFT__MPI_WHY_REJECTED;
        free(c->arrays);
        if (ref) {
            weft__mpi_comm_put(e);
        }
        weft__mpi_count_forward(why);
        return why;
    }
    weft__mpi_count_served();
    if (req == NULL) {
        if (status != WEFT_OK) {
            *rc_p = weft__mpi_raise(e, c->name, status);
        } else {
            *rc_p = MPI_SUCCESS;
        }
        free(c->arrays);
        if (ref) {
            weft__mpi_comm_put(e);
        }
        return WEFT__MPI_SERVE;
    }
    if (status != WEFT_OK) {
        *rc_p = weft__mpi_raise(e, c->name, status);
        free(c->arrays);
        weft__mpi_comm_put(e); /* a request's call always holds one (entry_of) */
        return WEFT__MPI_SERVE;
    }
    /* the request owns the reference on e and the arrays from here */
    *rc_p = weft__mpi_request_start(e, wreq, c, req);
    return WEFT__MPI_SERVE;
}
