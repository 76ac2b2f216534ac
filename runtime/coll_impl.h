/*
 * The collectives' checked implementations (runtime/coll_api.c), shared by
 * the entry points of runtime/coll_entry.c: every argument is checked, then
 * the operation runs as `how` says (blocking when NULL, started, or
 * enqueued on a stream).
 */
#ifndef WEFT_RUNTIME_COLL_IMPL_H
#define WEFT_RUNTIME_COLL_IMPL_H

#include "runtime/enqueue.h"

/* The mode of the nonblocking forms (started schedule in *sp) and of the
 * _enqueue forms (call: the entry point's name, for messages). */
#define WEFT_NB(sp) (&(weft_call_mode_t){.started = (sp)})
#define WEFT_EQ(st, name) (&(weft_call_mode_t){.enqueue = 1, .stream = (st), .call = (name)})

weft_status_t weft__allreduce_impl(const void *sendbuf, void *recvbuf, size_t count,
                                   weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                                   const weft_call_mode_t *how);
weft_status_t weft__reduce_scatter_impl(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                                        const weft_call_mode_t *how);
weft_status_t weft__allgather_impl(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   weft_dtype_t dtype, weft_comm_t comm, const weft_call_mode_t *how);
weft_status_t weft__bcast_impl(void *buf, size_t count, weft_dtype_t dtype, int root,
                               weft_comm_t comm, const weft_call_mode_t *how);
weft_status_t weft__reduce_impl(const void *sendbuf, void *recvbuf, size_t count,
                                weft_dtype_t dtype, weft_op_t op, int root, weft_comm_t comm,
                                const weft_call_mode_t *how);
weft_status_t weft__gather_impl(const void *sendbuf, void *recvbuf, size_t sendcount,
                                weft_dtype_t dtype, int root, weft_comm_t comm,
                                const weft_call_mode_t *how);
weft_status_t weft__scatter_impl(const void *sendbuf, void *recvbuf, size_t recvcount,
                                 weft_dtype_t dtype, int root, weft_comm_t comm,
                                 const weft_call_mode_t *how);
weft_status_t weft__alltoall_impl(const void *sendbuf, void *recvbuf, size_t count,
                                  weft_dtype_t dtype, weft_comm_t comm, const weft_call_mode_t *how);
weft_status_t weft__barrier_impl(weft_comm_t comm, const weft_call_mode_t *how);
weft_status_t weft__allgatherv_impl(const void *sendbuf, void *recvbuf, size_t sendcount,
                                    const size_t *recvcounts, const size_t *displs,
                                    weft_dtype_t dtype, weft_comm_t comm, const weft_call_mode_t *how);
weft_status_t weft__alltoallv_impl(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                                   const size_t *sdispls, const size_t *recvcounts,
                                   const size_t *rdispls, weft_dtype_t dtype, weft_comm_t comm,
                                   const weft_call_mode_t *how);
weft_status_t weft__reduce_scatter_v_impl(const void *sendbuf, void *recvbuf,
                                          const size_t *recvcounts, weft_dtype_t dtype,
                                          weft_op_t op, weft_comm_t comm, const weft_call_mode_t *how);

#endif /* WEFT_RUNTIME_COLL_IMPL_H */
