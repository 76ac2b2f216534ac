/*
 * weft_send / weft_recv and their nonblocking forms: one-task schedules on the communicator's transport.
 * Their tags use the sequence number reserved for point-to-point
 * (WEFT_TAG_SEQ_P2P) with the user's tag as the slot, so they never match a
 * collective's messages, and the transport's non-overtaking rule gives MPI's
 * ordering between a pair of ranks.
 */
#include "coll/coll.h"
#include "coll/diag/obs.h"
#include "coll/sched.h"
#include "runtime/enqueue.h"
#include "runtime/init.h"
#include "runtime/p2p.h"
#include "runtime/request.h"

#include <stdint.h>
#include <stdio.h>

_Static_assert(WEFT_ANY_SOURCE == WEFT_P2P_ANY, "the public and the transport's any-source differ");

/* The argument checks of every point-to-point entry point; any_ok: peer may
 * be WEFT_ANY_SOURCE (the receives that report their source). *dev_p: the
 * table that owns buf (host for none). */
static weft_status_t check(const char *call, void *buf, size_t count, weft_dtype_t dtype, int peer,
                           int any_ok, int tag, weft_comm_t handle, struct weft_comm **comm_p,
                           const weft_device_ops_t **dev_p)
{
    struct weft_comm *comm;
    char what[40];
    size_t esize = weft_dtype_size(dtype);
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
    *dev_p = &weft__device_host_ops;
    return buf != NULL ? weft__device_check(buf, call, "buf", dev_p) : WEFT_OK;
}

/* The started schedule of one message, not posted yet. */
static weft_status_t p2p_sched(const char *call, int is_send, void *buf, size_t count,
                               weft_dtype_t dtype, int peer, int tag, struct weft_comm *comm,
                               weft_sched_t **sched_p)
{
    size_t esize = weft_dtype_size(dtype);
    weft_op_desc_t desc = {.coll = call, .algo = "p2p", .count = count, .dtype = dtype,
                           .p2p = 1};
    weft_sched_t *s;
    weft_status_t status = weft__sched_create(comm, &desc, weft__device_query(buf), &s);

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
    if (status != WEFT_OK) {
        weft__sched_destroy(s);
        return status;
    }
    *sched_p = s;
    return WEFT_OK;
}

weft_status_t weft__p2p_start(const char *call, int is_send, void *buf, size_t count,
                              weft_dtype_t dtype, int peer, int tag, struct weft_comm *comm,
                              weft_sched_t **sched_p)
{
    weft_sched_t *s;
    weft_status_t status = weft__comm_health(comm);

    if (status == WEFT_OK) {
        status = p2p_sched(call, is_send, buf, count, dtype, peer, tag, comm, &s);
    }
    if (status != WEFT_OK) {
        return status;
    }
    /* posted now, not at the next progress: receives match in the order
     * they were called, and what the transport refuses fails the call
     * itself; what becomes of the message (a size mismatch, a failed
     * peer) is the request's */
    status = weft__sched_post(s);
    if (status != WEFT_OK) {
        weft__sched_destroy(s);
        return status;
    }
    *sched_p = s;
    return WEFT_OK;
}

/*
 * A blocking send or receive with nothing else of this thread outstanding and no observer on:
 * its message posted on the transport and polled here, without a schedule, for up to 64 polls
 * (busy: a microsecond or two; one where ranks outnumber cores). A longer wait, and a failure,
 * go on in a schedule that adopts the message (weft__sched_adopt), so that the waits (spin,
 * yield, sleep), the deadline, the peers' health and the error messages are the schedule's.
 * np 2 bound, ping-pong against Open MPI (weft_bench --vs-mpi --loop pingpong), three
 * alternating jobs: 8 B 2.46-2.71 of its time -> 2.02-2.16, 512 B 1.79-1.84 -> 1.40-1.44. A
 * send the transport completes at once takes no request at all (send_now); with the UCX
 * transport's request pool, medians of eight alternating jobs: 8 B 2.16 -> 1.77, 64 B 1.92 ->
 * 1.65, 512 B 1.42 -> 1.38.
 */
static weft_status_t p2p_direct(const char *call, int is_send, void *buf, size_t count,
                                weft_dtype_t dtype, int peer, int tag, struct weft_comm *comm,
                                weft_memtype_t memtype)
{
    const size_t bytes = count * weft_dtype_size(dtype);
    const uint64_t t = weft__tag_make(comm->id, WEFT_TAG_SEQ_P2P, (uint32_t)tag);
    const int polls = weft__coll_spin_ns(comm) == 0 ? 1 : 64;
    weft_p2p_req_t *r = NULL;
    weft_sched_t *s;
    weft_status_t status = weft__comm_health(comm), built;
    int done = 0;

    if (status != WEFT_OK) {
        return status;
    }
    if (is_send && comm->p2p->send_now != NULL) { /* sent at once, or a request after all */
        status = comm->p2p->send_now(comm->p2p_ep, peer, buf, bytes, memtype, t);
        if (status != WEFT_INPROGRESS) {
            return status;
        }
    }
    status = is_send ? comm->p2p->isend(comm->p2p_ep, peer, buf, bytes, memtype, t, &r)
                     : comm->p2p->irecv(comm->p2p_ep, peer, buf, bytes, memtype, t, &r);
    done = status != WEFT_OK; /* not posted: fails as the schedule's post would */
    for (int i = 0; i < polls && !done; i++) {
        status = comm->p2p->test(comm->p2p_ep, r, &done, NULL);
        if (!done) {
            comm->p2p->progress(comm->p2p_ep);
            weft__cpu_relax();
        }
    }
    if (done && status == WEFT_OK) {
        return WEFT_OK;
    }
    built = p2p_sched(call, is_send, buf, count, dtype, peer, tag, comm, &s);
    if (built != WEFT_OK) {
        if (!done) {
            comm->p2p->cancel(comm->p2p_ep, r);
        }
        return built;
    }
    status = weft__sched_adopt(s, done ? NULL : r, status);
    if (status == WEFT_OK) {
        status = weft__sched_wait(s);
    }
    weft__sched_destroy(s);
    return status;
}

/* Blocking (req NULL) or started with a request. */
static weft_status_t p2p(const char *call, int is_send, void *buf, size_t count,
                         weft_dtype_t dtype, int peer, int tag, weft_comm_t handle,
                         weft_request_t *req)
{
    struct weft_comm *comm = NULL;
    const weft_device_ops_t *dev = NULL;
    weft_sched_t *s = NULL;
    weft_status_t status =
        check(call, buf, count, dtype, peer, !is_send, tag, handle, &comm, &dev);

    if (status == WEFT_OK) {
        status = weft__enqueue_comm_drain(comm, call);
    }
    if (status == WEFT_OK && req == NULL && !weft__thread_busy() && weft__obs_flags == 0) {
        return p2p_direct(call, is_send, buf, count, dtype, peer, tag, comm, dev->memtype);
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
    const weft_device_ops_t *dev;
    weft_status_t status = check(call, buf, count, dtype, peer, 0, tag, handle, &comm, &dev);

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
