/*
 * The public collective entry points: blocking, nonblocking ('i') and
 * stream-ordered (_enqueue) forms of every collective, all through the
 * checked implementations of runtime/coll_api.c.
 */
#include "runtime/coll_impl.h"
#include "runtime/request.h"

WEFT_EXPORT weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                         weft_dtype_t dtype, weft_op_t op, weft_comm_t comm)
{
    return weft__allreduce_impl(sendbuf, recvbuf, count, dtype, op, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                          weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                                          weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_iallreduce")
                       : weft__request_start(
                             weft__allreduce_impl(sendbuf, recvbuf, count, dtype, op, comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                              weft_dtype_t dtype, weft_op_t op, weft_comm_t comm)
{
    return weft__reduce_scatter_impl(sendbuf, recvbuf, recvcount, dtype, op, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                               weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                                               weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_ireduce_scatter")
                       : weft__request_start(
                             weft__reduce_scatter_impl(sendbuf, recvbuf, recvcount, dtype, op, comm, WEFT_NB(&s)),
                             &s, req_p);
}

WEFT_EXPORT weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                         weft_dtype_t dtype, weft_comm_t comm)
{
    return weft__allgather_impl(sendbuf, recvbuf, sendcount, dtype, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                          weft_dtype_t dtype, weft_comm_t comm, weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_iallgather")
                       : weft__request_start(
                             weft__allgather_impl(sendbuf, recvbuf, sendcount, dtype, comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_bcast(void *buf, size_t count, weft_dtype_t dtype, int root,
                                     weft_comm_t comm)
{
    return weft__bcast_impl(buf, count, dtype, root, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_ibcast(void *buf, size_t count, weft_dtype_t dtype, int root,
                                      weft_comm_t comm, weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL
               ? WEFT_REQ_NULL("weft_ibcast")
               : weft__request_start(weft__bcast_impl(buf, count, dtype, root, comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                      weft_dtype_t dtype, weft_op_t op, int root, weft_comm_t comm)
{
    return weft__reduce_impl(sendbuf, recvbuf, count, dtype, op, root, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                                       weft_dtype_t dtype, weft_op_t op, int root, weft_comm_t comm,
                                       weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL
               ? WEFT_REQ_NULL("weft_ireduce")
               : weft__request_start(
                     weft__reduce_impl(sendbuf, recvbuf, count, dtype, op, root, comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                      weft_dtype_t dtype, int root, weft_comm_t comm)
{
    return weft__gather_impl(sendbuf, recvbuf, sendcount, dtype, root, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                       weft_dtype_t dtype, int root, weft_comm_t comm,
                                       weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL
               ? WEFT_REQ_NULL("weft_igather")
               : weft__request_start(
                     weft__gather_impl(sendbuf, recvbuf, sendcount, dtype, root, comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                       weft_dtype_t dtype, int root, weft_comm_t comm)
{
    return weft__scatter_impl(sendbuf, recvbuf, recvcount, dtype, root, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        weft_dtype_t dtype, int root, weft_comm_t comm,
                                        weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL
               ? WEFT_REQ_NULL("weft_iscatter")
               : weft__request_start(
                     weft__scatter_impl(sendbuf, recvbuf, recvcount, dtype, root, comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                        weft_dtype_t dtype, weft_comm_t comm)
{
    return weft__alltoall_impl(sendbuf, recvbuf, count, dtype, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                         weft_dtype_t dtype, weft_comm_t comm, weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_ialltoall")
                       : weft__request_start(
                             weft__alltoall_impl(sendbuf, recvbuf, count, dtype, comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_barrier(weft_comm_t comm)
{
    return weft__barrier_impl(comm, NULL);
}

WEFT_EXPORT weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_ibarrier")
                       : weft__request_start(weft__barrier_impl(comm, WEFT_NB(&s)), &s, req_p);
}

WEFT_EXPORT weft_status_t weft_allgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                                          const size_t *recvcounts, const size_t *displs,
                                          weft_dtype_t dtype, weft_comm_t comm)
{
    return weft__allgatherv_impl(sendbuf, recvbuf, sendcount, recvcounts, displs, dtype, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_iallgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                                           const size_t *recvcounts, const size_t *displs,
                                           weft_dtype_t dtype, weft_comm_t comm,
                                           weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_iallgatherv")
                       : weft__request_start(weft__allgatherv_impl(sendbuf, recvbuf, sendcount,
                                                             recvcounts, displs, dtype, comm, WEFT_NB(&s)),
                                             &s, req_p);
}

WEFT_EXPORT weft_status_t weft_alltoallv(const void *sendbuf, void *recvbuf,
                                         const size_t *sendcounts, const size_t *sdispls,
                                         const size_t *recvcounts, const size_t *rdispls,
                                         weft_dtype_t dtype, weft_comm_t comm)
{
    return weft__alltoallv_impl(sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls, dtype, comm,
                          NULL);
}

WEFT_EXPORT weft_status_t weft_ialltoallv(const void *sendbuf, void *recvbuf,
                                          const size_t *sendcounts, const size_t *sdispls,
                                          const size_t *recvcounts, const size_t *rdispls,
                                          weft_dtype_t dtype, weft_comm_t comm, weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_ialltoallv")
                       : weft__request_start(weft__alltoallv_impl(sendbuf, recvbuf, sendcounts, sdispls,
                                                            recvcounts, rdispls, dtype, comm, WEFT_NB(&s)),
                                             &s, req_p);
}

WEFT_EXPORT weft_status_t weft_reduce_scatter_v(const void *sendbuf, void *recvbuf,
                                                const size_t *recvcounts, weft_dtype_t dtype,
                                                weft_op_t op, weft_comm_t comm)
{
    return weft__reduce_scatter_v_impl(sendbuf, recvbuf, recvcounts, dtype, op, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_ireduce_scatter_v(const void *sendbuf, void *recvbuf,
                                                 const size_t *recvcounts, weft_dtype_t dtype,
                                                 weft_op_t op, weft_comm_t comm,
                                                 weft_request_t *req_p)
{
    weft_sched_t *s = NULL;

    return req_p == NULL ? WEFT_REQ_NULL("weft_ireduce_scatter_v")
                       : weft__request_start(weft__reduce_scatter_v_impl(sendbuf, recvbuf, recvcounts,
                                                                   dtype, op, comm, WEFT_NB(&s)),
                                             &s, req_p);
}

/* Stream-ordered forms. */

WEFT_EXPORT weft_status_t weft_allreduce_enqueue(const void *sendbuf, void *recvbuf, size_t count,
                                                 weft_dtype_t dtype, weft_op_t op,
                                                 weft_comm_t comm, weft_stream_t stream)
{
    return weft__allreduce_impl(sendbuf, recvbuf, count, dtype, op, comm,
                                WEFT_EQ(stream, "weft_allreduce_enqueue"));
}

WEFT_EXPORT weft_status_t weft_reduce_scatter_enqueue(const void *sendbuf, void *recvbuf,
                                                      size_t recvcount, weft_dtype_t dtype,
                                                      weft_op_t op, weft_comm_t comm,
                                                      weft_stream_t stream)
{
    return weft__reduce_scatter_impl(sendbuf, recvbuf, recvcount, dtype, op, comm,
                                     WEFT_EQ(stream, "weft_reduce_scatter_enqueue"));
}

WEFT_EXPORT weft_status_t weft_allgather_enqueue(const void *sendbuf, void *recvbuf,
                                                 size_t sendcount, weft_dtype_t dtype,
                                                 weft_comm_t comm, weft_stream_t stream)
{
    return weft__allgather_impl(sendbuf, recvbuf, sendcount, dtype, comm,
                                WEFT_EQ(stream, "weft_allgather_enqueue"));
}

WEFT_EXPORT weft_status_t weft_bcast_enqueue(void *buf, size_t count, weft_dtype_t dtype, int root,
                                             weft_comm_t comm, weft_stream_t stream)
{
    return weft__bcast_impl(buf, count, dtype, root, comm, WEFT_EQ(stream, "weft_bcast_enqueue"));
}

WEFT_EXPORT weft_status_t weft_reduce_enqueue(const void *sendbuf, void *recvbuf, size_t count,
                                              weft_dtype_t dtype, weft_op_t op, int root,
                                              weft_comm_t comm, weft_stream_t stream)
{
    return weft__reduce_impl(sendbuf, recvbuf, count, dtype, op, root, comm,
                             WEFT_EQ(stream, "weft_reduce_enqueue"));
}

WEFT_EXPORT weft_status_t weft_gather_enqueue(const void *sendbuf, void *recvbuf, size_t sendcount,
                                              weft_dtype_t dtype, int root, weft_comm_t comm,
                                              weft_stream_t stream)
{
    return weft__gather_impl(sendbuf, recvbuf, sendcount, dtype, root, comm,
                             WEFT_EQ(stream, "weft_gather_enqueue"));
}

WEFT_EXPORT weft_status_t weft_scatter_enqueue(const void *sendbuf, void *recvbuf,
                                               size_t recvcount, weft_dtype_t dtype, int root,
                                               weft_comm_t comm, weft_stream_t stream)
{
    return weft__scatter_impl(sendbuf, recvbuf, recvcount, dtype, root, comm,
                              WEFT_EQ(stream, "weft_scatter_enqueue"));
}

WEFT_EXPORT weft_status_t weft_alltoall_enqueue(const void *sendbuf, void *recvbuf, size_t count,
                                                weft_dtype_t dtype, weft_comm_t comm,
                                                weft_stream_t stream)
{
    return weft__alltoall_impl(sendbuf, recvbuf, count, dtype, comm,
                               WEFT_EQ(stream, "weft_alltoall_enqueue"));
}

WEFT_EXPORT weft_status_t weft_barrier_enqueue(weft_comm_t comm, weft_stream_t stream)
{
    return weft__barrier_impl(comm, WEFT_EQ(stream, "weft_barrier_enqueue"));
}

WEFT_EXPORT weft_status_t weft_allgatherv_enqueue(const void *sendbuf, void *recvbuf,
                                                  size_t sendcount, const size_t *recvcounts,
                                                  const size_t *displs, weft_dtype_t dtype,
                                                  weft_comm_t comm, weft_stream_t stream)
{
    return weft__allgatherv_impl(sendbuf, recvbuf, sendcount, recvcounts, displs, dtype, comm,
                                 WEFT_EQ(stream, "weft_allgatherv_enqueue"));
}

WEFT_EXPORT weft_status_t weft_alltoallv_enqueue(const void *sendbuf, void *recvbuf,
                                                 const size_t *sendcounts, const size_t *sdispls,
                                                 const size_t *recvcounts, const size_t *rdispls,
                                                 weft_dtype_t dtype, weft_comm_t comm,
                                                 weft_stream_t stream)
{
    return weft__alltoallv_impl(sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls,
                                dtype, comm, WEFT_EQ(stream, "weft_alltoallv_enqueue"));
}

WEFT_EXPORT weft_status_t weft_reduce_scatter_v_enqueue(const void *sendbuf, void *recvbuf,
                                                        const size_t *recvcounts,
                                                        weft_dtype_t dtype, weft_op_t op,
                                                        weft_comm_t comm, weft_stream_t stream)
{
    return weft__reduce_scatter_v_impl(sendbuf, recvbuf, recvcounts, dtype, op, comm,
                                       WEFT_EQ(stream, "weft_reduce_scatter_v_enqueue"));
}
