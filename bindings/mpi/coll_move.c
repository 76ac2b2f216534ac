/*
 * The interposed data-movement collectives (no op): allgather(v),
 * alltoall(v), gather, scatter. Any named datatype whose extent is its
 * size travels as bytes; a send and a receive description must carry the
 * same number of bytes (MPI's matching type signatures), else the call is
 * forwarded. Buffers significant only at the root are not looked at
 * elsewhere.
 */
#include "bindings/mpi/weft_mpi_internal.h"

/* ---- allgather, allgatherv ---- */

static weft__mpi_why_t check_allgather(weft__mpi_call_t *c, const void *sbuf, int scount,
                                       MPI_Datatype stype, void *rbuf, int rcount,
                                       MPI_Datatype rtype, MPI_Comm comm)
{
    int size, rank;
    size_t res, ses, block;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    ARGS_IF(rcount < 0);
    WHY(weft__mpi_movable(rtype, &res));
    block = (size_t)rcount * res;
    if (sbuf == MPI_IN_PLACE) {
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, block * (size_t)size));
    } else {
        ARGS_IF(scount < 0);
        WHY(weft__mpi_movable(stype, &ses));
        WHY((size_t)scount * ses != block ? WEFT__MPI_WHY_TYPES_DIFFER : WEFT__MPI_SERVE);
        c->sbuf = sbuf;
        WHY(distinct(sbuf, block, rbuf, block * (size_t)size));
    }
    c->rbuf = rbuf;
    c->count = block;
    c->dtype = WEFT_UINT8;
    return WEFT__MPI_SERVE;
}

static int allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                     MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_ALLGATHER,
                          .name = nb ? "MPI_Iallgather" : "MPI_Allgather"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_allgather(&c, sbuf, scount, stype, rbuf, rcount, rtype, comm), comm, &c, req,
                 nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
              : PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

WEFT_MPI_EXPORT int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                  int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    return allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                   int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req, 1);
}

/* Byte counts and displacements of a v-form's side; the extent they cover. */
static weft__mpi_why_t to_bytes(const int counts[], const int displs[], size_t es, int size,
                                size_t *bcounts, size_t *bdispls, size_t *extent_p)
{
    size_t extent = 0;

    ARGS_IF(counts == NULL || displs == NULL);
    for (int r = 0; r < size; r++) {
        ARGS_IF(counts[r] < 0 || displs[r] < 0);
        bcounts[r] = (size_t)counts[r] * es;
        bdispls[r] = (size_t)displs[r] * es;
        if (bcounts[r] > 0 && bdispls[r] + bcounts[r] > extent) {
            extent = bdispls[r] + bcounts[r];
        }
    }
    *extent_p = extent;
    return WEFT__MPI_SERVE;
}

static weft__mpi_why_t check_allgatherv(weft__mpi_call_t *c, const void *sbuf, int scount,
                                        MPI_Datatype stype, void *rbuf, const int rcounts[],
                                        const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    int size, rank;
    size_t res, ses, extent;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    WHY(weft__mpi_movable(rtype, &res));
    ARGS_IF(weft__mpi_arrays(c, 2, size) == NULL);
    c->counts = c->arrays;
    c->displs = c->arrays + size;
    WHY(to_bytes(rcounts, displs, res, size, c->counts, c->displs, &extent));
    if (sbuf == MPI_IN_PLACE) {
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, extent));
    } else {
        ARGS_IF(scount < 0);
        WHY(weft__mpi_movable(stype, &ses));
        WHY((size_t)scount * ses != c->counts[rank] ? WEFT__MPI_WHY_TYPES_DIFFER : WEFT__MPI_SERVE);
        c->sbuf = sbuf;
        WHY(distinct(sbuf, c->counts[rank], rbuf, extent));
    }
    c->rbuf = rbuf;
    c->count = c->counts[rank];
    c->dtype = WEFT_UINT8;
    return WEFT__MPI_SERVE;
}

static int allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                      const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm,
                      MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_ALLGATHERV,
                          .name = nb ? "MPI_Iallgatherv" : "MPI_Allgatherv"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_allgatherv(&c, sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm),
                 comm, &c, req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req)
              : PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
}

WEFT_MPI_EXPORT int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                   const int rcounts[], const int displs[], MPI_Datatype rtype,
                                   MPI_Comm comm)
{
    return allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                    const int rcounts[], const int displs[], MPI_Datatype rtype,
                                    MPI_Comm comm, MPI_Request *req)
{
    return allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req, 1);
}

/* ---- alltoall, alltoallv ---- */

static weft__mpi_why_t check_alltoall(weft__mpi_call_t *c, const void *sbuf, int scount,
                                      MPI_Datatype stype, void *rbuf, int rcount,
                                      MPI_Datatype rtype, MPI_Comm comm)
{
    int size, rank;
    size_t res, ses, block;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    ARGS_IF(rcount < 0);
    WHY(weft__mpi_movable(rtype, &res));
    block = (size_t)rcount * res;
    if (sbuf == MPI_IN_PLACE) {
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, block * (size_t)size));
    } else {
        ARGS_IF(scount < 0);
        WHY(weft__mpi_movable(stype, &ses));
        WHY((size_t)scount * ses != block ? WEFT__MPI_WHY_TYPES_DIFFER : WEFT__MPI_SERVE);
        c->sbuf = sbuf;
        WHY(distinct(sbuf, block * (size_t)size, rbuf, block * (size_t)size));
    }
    c->rbuf = rbuf;
    c->count = block;
    c->dtype = WEFT_UINT8;
    return WEFT__MPI_SERVE;
}

static int alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                    MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_ALLTOALL,
                          .name = nb ? "MPI_Ialltoall" : "MPI_Alltoall"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_alltoall(&c, sbuf, scount, stype, rbuf, rcount, rtype, comm), comm, &c, req,
                 nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
              : PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

WEFT_MPI_EXPORT int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                 int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    return alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                  int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req, 1);
}

static weft__mpi_why_t check_alltoallv(weft__mpi_call_t *c, const void *sbuf, const int scounts[],
                                       const int sdispls[], MPI_Datatype stype, void *rbuf,
                                       const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                       MPI_Comm comm)
{
    int size, rank;
    size_t res, ses, rextent, sextent;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    WHY(weft__mpi_movable(rtype, &res));
    ARGS_IF(weft__mpi_arrays(c, 4, size) == NULL);
    c->counts = c->arrays;
    c->displs = c->arrays + size;
    c->scounts = c->arrays + 2 * size;
    c->sdispls = c->arrays + 3 * size;
    WHY(to_bytes(rcounts, rdispls, res, size, c->counts, c->displs, &rextent));
    if (sbuf == MPI_IN_PLACE) {
        /* weft reads only recvcounts and rdispls; the send side mirrors them */
        for (int r = 0; r < size; r++) {
            c->scounts[r] = c->counts[r];
            c->sdispls[r] = c->displs[r];
        }
        c->sbuf = WEFT_IN_PLACE;
        WHY(distinct(NULL, 0, rbuf, rextent));
    } else {
        WHY(weft__mpi_movable(stype, &ses));
        WHY(to_bytes(scounts, sdispls, ses, size, c->scounts, c->sdispls, &sextent));
        c->sbuf = sbuf;
        WHY(distinct(sbuf, sextent, rbuf, rextent));
    }
    c->rbuf = rbuf;
    c->dtype = WEFT_UINT8;
    return WEFT__MPI_SERVE;
}

static int alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                     void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                     MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_ALLTOALLV,
                          .name = nb ? "MPI_Ialltoallv" : "MPI_Alltoallv"};
    int rc;

    if (weft__mpi_gate() && dispatch(check_alltoallv(&c, sbuf, scounts, sdispls, stype, rbuf,
                                                     rcounts, rdispls, rtype, comm),
                                     comm, &c, req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                                req)
              : PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
}

WEFT_MPI_EXPORT int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                                  MPI_Datatype stype, void *rbuf, const int rcounts[],
                                  const int rdispls[], MPI_Datatype rtype, MPI_Comm comm)
{
    return alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Ialltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                                   MPI_Datatype stype, void *rbuf, const int rcounts[],
                                   const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                                   MPI_Request *req)
{
    return alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req, 1);
}

/* ---- gather, scatter ---- */

static weft__mpi_why_t check_gather(weft__mpi_call_t *c, const void *sbuf, int scount,
                                    MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                                    int root, MPI_Comm comm)
{
    int size, rank;
    size_t res, ses, block;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    WHY(root_ok(root, size));
    if (rank == root) {
        ARGS_IF(rcount < 0);
        WHY(weft__mpi_movable(rtype, &res));
        block = (size_t)rcount * res;
        if (sbuf == MPI_IN_PLACE) {
            c->sbuf = WEFT_IN_PLACE;
            WHY(distinct(NULL, 0, rbuf, block * (size_t)size));
        } else {
            ARGS_IF(scount < 0);
            WHY(weft__mpi_movable(stype, &ses));
            WHY((size_t)scount * ses != block ? WEFT__MPI_WHY_TYPES_DIFFER : WEFT__MPI_SERVE);
            c->sbuf = sbuf;
            WHY(distinct(sbuf, block, rbuf, block * (size_t)size));
        }
        c->rbuf = rbuf;
    } else {
        ARGS_IF(sbuf == MPI_IN_PLACE || scount < 0);
        WHY(weft__mpi_movable(stype, &ses));
        block = (size_t)scount * ses;
        WHY(distinct(sbuf, block, NULL, 0));
        c->sbuf = sbuf;
        c->rbuf = NULL;
    }
    c->count = block;
    c->dtype = WEFT_UINT8;
    c->root = root;
    return WEFT__MPI_SERVE;
}

static int gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_GATHER, .name = nb ? "MPI_Igather" : "MPI_Gather"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_gather(&c, sbuf, scount, stype, rbuf, rcount, rtype, root, comm), comm, &c,
                 req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req)
              : PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

WEFT_MPI_EXPORT int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                               int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    return gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                                MPI_Request *req)
{
    return gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req, 1);
}

static weft__mpi_why_t check_scatter(weft__mpi_call_t *c, const void *sbuf, int scount,
                                     MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                                     int root, MPI_Comm comm)
{
    int size, rank;
    size_t res, ses, block;

    WHY(weft__mpi_comm_check(comm, &size, &rank, &c->entry));
    WHY(root_ok(root, size));
    if (rank == root) {
        ARGS_IF(scount < 0);
        WHY(weft__mpi_movable(stype, &ses));
        block = (size_t)scount * ses;
        if (rbuf == MPI_IN_PLACE) {
            /* weft's form: recvbuf is root's own block of sendbuf, which stays */
            WHY(distinct(sbuf, block * (size_t)size, NULL, 0));
            c->rbuf = (char *)sbuf + (size_t)root * block;
        } else {
            ARGS_IF(rcount < 0);
            WHY(weft__mpi_movable(rtype, &res));
            WHY((size_t)rcount * res != block ? WEFT__MPI_WHY_TYPES_DIFFER : WEFT__MPI_SERVE);
            WHY(distinct(sbuf, block * (size_t)size, rbuf, block));
            c->rbuf = rbuf;
        }
        c->sbuf = sbuf;
    } else {
        ARGS_IF(rbuf == MPI_IN_PLACE || rcount < 0);
        WHY(weft__mpi_movable(rtype, &res));
        block = (size_t)rcount * res;
        WHY(distinct(NULL, 0, rbuf, block));
        c->sbuf = NULL;
        c->rbuf = rbuf;
    }
    c->count = block;
    c->dtype = WEFT_UINT8;
    c->root = root;
    return WEFT__MPI_SERVE;
}

static int scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req, int nb)
{
    weft__mpi_call_t c = {.kind = WEFT__MPI_SCATTER, .name = nb ? "MPI_Iscatter" : "MPI_Scatter"};
    int rc;

    if (weft__mpi_gate() &&
        dispatch(check_scatter(&c, sbuf, scount, stype, rbuf, rcount, rtype, root, comm), comm, &c,
                 req, nb, &rc)) {
        return rc;
    }
    return nb ? PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req)
              : PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

WEFT_MPI_EXPORT int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    return scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, NULL, 0);
}

WEFT_MPI_EXPORT int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                 int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                                 MPI_Request *req)
{
    return scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req, 1);
}
