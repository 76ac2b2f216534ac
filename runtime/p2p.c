/*
 * weft_send / weft_recv and their nonblocking forms: one-task schedules on the communicator's transport.
 * Their tags use the sequence number reserved for point-to-point
 * (WEFT_TAG_SEQ_P2P) with the user's tag as the slot, so they never match a
 * collective's messages, and the transport's non-overtaking rule gives MPI's
 * ordering between a pair of ranks.
 */
#include "coll/sched.h"
#include "runtime/enqueue.h"
#include "runtime/init.h"
#include "runtime/p2p.h"
#include "runtime/request.h"

#include <stdint.h>
#include <stdio.h>

_Static_assert(WEFT_ANY_SOURCE == WEFT_P2P_ANY, "the public and the transport's any-source differ");

/* The argument checks of every point-to-point entry point; any_ok: peer may
 * be WEFT_ANY_SOURCE (the receives that report their source). */
static weft_status_t check(const char *call, void *buf, size_t count, weft_dtype_t dtype, int peer,
                           int any_ok, int tag, weft_comm_t handle, struct weft_comm **comm_p)
{
    struct weft_comm *comm;
    char what[40];
    size_t esize = weft_dtype_size(dtype);
    const weft_device_ops_t *dev;
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized(call);
    if (status != WEFT_OK) {
        return status;
    }
    comm = weft__comm_of(handle);
    if (WEFT_UNLIKELY(comm == NULL)) { /* the message names the call (formatted only then) */
        snprintf(what, sizeof(what), "%s: comm", call);
        return weft__comm_check(handle, what, &comm);
    }
    *comm_p = comm;
    if (esize == 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: dtype %d is not a weft_dtype_t", call,
                           (int)dtype);
    }
    if (count > SIZE_MAX / esize) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: count %zu overflows the buffer size", call,
                           count);
    }
    if (count > 0 && buf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: buf is NULL with count %zu", call, count);
    }
    if (peer == WEFT_ANY_SOURCE && !any_ok) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s: peer WEFT_ANY_SOURCE: only weft_recv and weft_irecv take it", call);
    }
    if ((peer < 0 && peer != WEFT_ANY_SOURCE) || peer >= comm->size) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: peer %d is not a rank of a %d-rank comm",
                           call, peer, comm->size);
    }
    if (tag < 0 || tag > WEFT_TAG_UB) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: tag %d is outside 0..%d", call, tag,
                           WEFT_TAG_UB);
    }
    return buf != NULL ? weft__device_check(buf, call, "buf", &dev) : WEFT_OK;
}

weft_status_t weft__p2p_start(const char *call, int is_send, void *buf, size_t count,
                              weft_dtype_t dtype, int peer, int tag, struct weft_comm *comm,
                              weft_sched_t **sched_p)
{
    size_t esize = weft_dtype_size(dtype);
    weft_op_desc_t desc = {.coll = call, .algo = "p2p", .count = count, .dtype = dtype,
                           .p2p = 1};
    weft_sched_t *s;
    weft_status_t status = weft__comm_health(comm);

    if (status == WEFT_OK) {
        status = weft__sched_create(comm, &desc, weft__device_query(buf), &s);
    }
    if (status != WEFT_OK) {
        return status;
    }
    weft__sched_step(s, is_send ? "send" : "recv", 0);
    if (is_send) {
        weft__sched_send(s, peer, (uint32_t)tag, buf, count * esize);
    } else {
        weft__sched_recv(s, peer, (uint32_t)tag, buf, count * esize);
    }
    status = weft__sched_start(s);
    if (status == WEFT_OK) {
        /* posted now, not at the next progress: receives match in the order
         * they were called, and what the transport refuses fails the call
         * itself; what becomes of the message (a size mismatch, a failed
         * peer) is the request's */
        status = weft__sched_post(s);
    }
    if (status != WEFT_OK) {
        weft__sched_destroy(s);
        return status;
    }
    *sched_p = s;
    return WEFT_OK;
}

/* Blocking (req NULL) or started with a request. */
static weft_status_t p2p(const char *call, int is_send, void *buf, size_t count,
                         weft_dtype_t dtype, int peer, int tag, weft_comm_t handle,
                         weft_request_t *req)
{
    struct weft_comm *comm = NULL;
    weft_sched_t *s = NULL;
    weft_status_t status = check(call, buf, count, dtype, peer, !is_send, tag, handle, &comm);

    if (status == WEFT_OK) {
        status = weft__enqueue_comm_drain(comm, call);
    }
    if (status == WEFT_OK) {
        status = weft__p2p_start(call, is_send, buf, count, dtype, peer, tag, comm, &s);
    }
    if (req != NULL) {
        return weft__request_start(status, &s, req);
    }
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__sched_wait(s);
    weft__sched_destroy(s);
    return status;
}

static weft_status_t p2p_enqueue(const char *call, int is_send, void *buf, size_t count,
                                 weft_dtype_t dtype, int peer, int tag, weft_comm_t handle,
                                 weft_stream_t stream)
{
    struct weft_comm *comm = NULL;
    weft_status_t status = check(call, buf, count, dtype, peer, 0, tag, handle, &comm);

    if (status == WEFT_OK) {
        status = weft__enqueue_check(comm, stream, buf, NULL, call);
    }
    if (status != WEFT_OK) {
        return status;
    }
    return weft__enqueue_p2p(comm, is_send, buf, count, dtype, peer, tag, stream, call);
}

WEFT_EXPORT weft_status_t weft_send(const void *buf, size_t count, weft_dtype_t dtype, int peer,
                                    int tag, weft_comm_t comm)
{
    return p2p("weft_send", 1, (void *)buf, count, dtype, peer, tag, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_recv(void *buf, size_t count, weft_dtype_t dtype, int peer,
                                    int tag, weft_comm_t comm)
{
    return p2p("weft_recv", 0, buf, count, dtype, peer, tag, comm, NULL);
}

WEFT_EXPORT weft_status_t weft_isend(const void *buf, size_t count, weft_dtype_t dtype, int peer,
                                     int tag, weft_comm_t comm, weft_request_t *req_p)
{
    if (req_p == NULL) {
        return WEFT_REQ_NULL("weft_isend");
    }
    return p2p("weft_isend", 1, (void *)buf, count, dtype, peer, tag, comm, req_p);
}

WEFT_EXPORT weft_status_t weft_irecv(void *buf, size_t count, weft_dtype_t dtype, int peer,
                                     int tag, weft_comm_t comm, weft_request_t *req_p)
{
    if (req_p == NULL) {
        return WEFT_REQ_NULL("weft_irecv");
    }
    return p2p("weft_irecv", 0, buf, count, dtype, peer, tag, comm, req_p);
}

WEFT_EXPORT weft_status_t weft_send_enqueue(const void *buf, size_t count, weft_dtype_t dtype,
                                            int peer, int tag, weft_comm_t comm,
                                            weft_stream_t stream)
{
    return p2p_enqueue("weft_send_enqueue", 1, (void *)buf, count, dtype, peer, tag, comm,
                       stream);
}

WEFT_EXPORT weft_status_t weft_recv_enqueue(void *buf, size_t count, weft_dtype_t dtype, int peer,
                                            int tag, weft_comm_t comm, weft_stream_t stream)
{
    return p2p_enqueue("weft_recv_enqueue", 0, buf, count, dtype, peer, tag, comm, stream);
}
