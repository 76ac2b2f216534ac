/*
 * The interposed collectives, blocking and nonblocking: each checks its
 * arguments into a weft__mpi_call_t (data movement travels as bytes,
 * reductions in the matching weft dtype), then weft__mpi_serve runs it or
 * names the reason it goes to the PMPI_ function unchanged.
 *
 * Every check uses only what MPI requires to agree across the ranks of a
 * call (datatype signatures, op, counts, root, communicator), so all ranks
 * take the same path; arguments MPI calls erroneous (negative counts, a
 * root out of range, a non-root MPI_IN_PLACE, aliased buffers, NULL
 * buffers with data) are forwarded, so Open MPI reports them as it would.
 */
#include "bindings/mpi/weft_mpi_internal.h"

/* ---- reductions ---- */

static weft__mpi_why_t check_allreduce(weft__mpi_call_t *c, const void *sbuf, void *rbuf, int count,
                                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    int size, rank;
    size_t bytes;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    ARGS_IF(count < 0);
    WHY(weft__mpi_reduction(dt, op, &c->dtype, &c->op));
    bytes = (size_t)count * weft_dtype_size(c->dtype);
    if (sbuf == MPI_IN_PLACE) {
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, bytes));
    } else {
        c->sbuf = sbuf;
        WHY(distinct(sbuf, bytes, rbuf, bytes));
    }
    c->rbuf = rbuf;
    c->count = (size_t)count;
    return WEFT__MPI_SERVE;
}

static int allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                     MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_ALLREDUCE,
                          .name = nb ? "MPI_Iallreduce" : "MPI_Allreduce"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_allreduce(&c, sbuf, rbuf, count, dt, op, comm), comm, &c, req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm, req)
              : PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm);
}

WEFT_MPI_EXPORT int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                                  MPI_Op op, MPI_Comm comm)
{
    return allreduce(sbuf, rbuf, count, dt, op, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                                   MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    return allreduce(sbuf, rbuf, count, dt, op, comm, req, 1);
}

static weft__mpi_why_t check_reduce(weft__mpi_call_t *c, const void *sbuf, void *rbuf, int count,
                                    MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm)
{
    int size, rank;
    size_t bytes;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    ARGS_IF(count < 0);
    WHY(root_ok(root, size));
    WHY(weft__mpi_reduction(dt, op, &c->dtype, &c->op));
    bytes = (size_t)count * weft_dtype_size(c->dtype);
    if (sbuf == MPI_IN_PLACE) {
        ARGS_IF(rank != root);
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, bytes));
    } else {
        c->sbuf = sbuf;
        WHY(distinct(sbuf, bytes, rbuf, rank == root ? bytes : 0));
    }
    c->rbuf = rank == root ? rbuf : NULL;
    c->count = (size_t)count;
    c->root = root;
    return WEFT__MPI_SERVE;
}

static int reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                  MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_REDUCE, .name = nb ? "MPI_Ireduce" : "MPI_Reduce"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_reduce(&c, sbuf, rbuf, count, dt, op, root, comm), comm, &c, req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Ireduce(sbuf, rbuf, count, dt, op, root, comm, req)
              : PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
}

WEFT_MPI_EXPORT int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                               int root, MPI_Comm comm)
{
    return reduce(sbuf, rbuf, count, dt, op, root, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                                int root, MPI_Comm comm, MPI_Request *req)
{
    return reduce(sbuf, rbuf, count, dt, op, root, comm, req, 1);
}

static weft__mpi_why_t check_reduce_scatter(weft__mpi_call_t *c, const void *sbuf, void *rbuf,
                                            const int rcounts[], MPI_Datatype dt, MPI_Op op,
                                            MPI_Comm comm)
{
    int size, rank;
    size_t total = 0, es;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    ARGS_IF(rcounts == NULL);
    WHY(weft__mpi_reduction(dt, op, &c->dtype, &c->op));
    es = weft_dtype_size(c->dtype);
    c->counts = weft__mpi_arrays(c, 1, size);
    ARGS_IF(c->counts == NULL);
    for (int r = 0; r < size; r++) {
        ARGS_IF(rcounts[r] < 0);
        c->counts[r] = (size_t)rcounts[r];
        total += c->counts[r];
    }
    if (sbuf == MPI_IN_PLACE) {
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, total * es));
    } else {
        c->sbuf = sbuf;
        WHY(distinct(sbuf, total * es, rbuf, c->counts[rank] * es));
    }
    c->rbuf = rbuf;
    return WEFT__MPI_SERVE;
}

static int reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt,
                          MPI_Op op, MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_REDUCE_SCATTER_V,
                          .name = nb ? "MPI_Ireduce_scatter" : "MPI_Reduce_scatter"};
    int rc;

    if (weft__mpi_gate() && dispatch(check_reduce_scatter(&c, sbuf, rbuf, rcounts, dt, op, comm),
                                     comm, &c, req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, dt, op, comm, req)
              : PMPI_Reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm);
}

WEFT_MPI_EXPORT int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[],
                                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    return reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Ireduce_scatter(const void *sbuf, void *rbuf, const int rcounts[],
                                        MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    return reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm, req, 1);
}

static weft__mpi_why_t check_reduce_scatter_block(weft__mpi_call_t *c, const void *sbuf, void *rbuf,
                                                  int rcount, MPI_Datatype dt, MPI_Op op,
                                                  MPI_Comm comm)
{
    int size, rank;
    size_t bytes;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    ARGS_IF(rcount < 0);
    WHY(weft__mpi_reduction(dt, op, &c->dtype, &c->op));
    bytes = (size_t)rcount * weft_dtype_size(c->dtype);
    if (sbuf == MPI_IN_PLACE) {
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, bytes * (size_t)size));
    } else {
        c->sbuf = sbuf;
        WHY(distinct(sbuf, bytes * (size_t)size, rbuf, bytes));
    }
    c->rbuf = rbuf;
    c->count = (size_t)rcount;
    return WEFT__MPI_SERVE;
}

static int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                                MPI_Op op, MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_REDUCE_SCATTER,
                          .name = nb ? "MPI_Ireduce_scatter_block" : "MPI_Reduce_scatter_block"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_reduce_scatter_block(&c, sbuf, rbuf, rcount, dt, op, comm), comm, &c, req,
                 nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm, req)
              : PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm);
}

WEFT_MPI_EXPORT int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                             MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    return reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                              MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                              MPI_Request *req)
{
    return reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm, req, 1);
}

/* ---- barrier and bcast ---- */

static int barrier(MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_BARRIER, .name = nb ? "MPI_Ibarrier" : "MPI_Barrier"};
    int rc, size, rank;

    if (weft__mpi_gate() &&
        dispatch(weft__mpi_comm_check(comm, &size, &rank, &c.entry), comm, &c, req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Ibarrier(comm, req) : PMPI_Barrier(comm);
}

WEFT_MPI_EXPORT int MPI_Barrier(MPI_Comm comm)
{
    return barrier(comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    return barrier(comm, req, 1);
}

static weft__mpi_why_t check_bcast(weft__mpi_call_t *c, void *buf, int count, MPI_Datatype dt,
                                   int root, MPI_Comm comm)
{
    int size, rank;
    size_t es;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    ARGS_IF(count < 0);
    WHY(root_ok(root, size));
    WHY(weft__mpi_movable(dt, &es));
    WHY(distinct(NULL, 0, buf, (size_t)count * es));
    c->rbuf = buf;
    c->count = (size_t)count * es;
    c->dtype = WEFT_UINT8;
    c->root = root;
    return WEFT__MPI_SERVE;
}

static int bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req,
                 int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_BCAST, .name = nb ? "MPI_Ibcast" : "MPI_Bcast"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_bcast(&c, buf, count, dt, root, comm), comm, &c, req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Ibcast(buf, count, dt, root, comm, req)
              : PMPI_Bcast(buf, count, dt, root, comm);
}

WEFT_MPI_EXPORT int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    return bcast(buf, count, dt, root, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
                               MPI_Request *req)
{
    return bcast(buf, count, dt, root, comm, req, 1);
}
