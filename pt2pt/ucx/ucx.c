/*
 * UCX transport (contract in ucx.h and pt2pt.h): requests (post, test,
 * cancel), progress and idle wait, and the endpoint tables of communicators
 * with the ops table. The process's context, its peer cache, peer liveness and
 * endpoints are in ucx_context.c; what the two share is in ucx_internal.h.
 *
 * Objects:
 *
 *   context (one per process) --- worker, address, peer cache (hash by address bytes)
 *      |                                 |
 *   comm table (one per communicator)    peer: ucp_ep (lazy), failure status,
 *      peers[rank] ------------------->        posted receives from it (all comms)
 *
 * Requests are ours and point at the UCX request, which UCX completes through
 * a callback during progress. A finished request goes back to its context's
 * pool (up to REQ_POOL_MAX, taken and returned under the lock each post and
 * test already hold) instead of to malloc. Receives are not bound to an
 * endpoint in UCP, so each posted receive also sits on its peer's list: when
 * the endpoint's error callback fires, the receives from that peer are
 * withdrawn (ucp_request_cancel), the endpoint is closed (UCX then completes
 * the sends it held with an error) and everything pending with the peer
 * completes with WEFT_ERR_PEER_FAILED. The error callback only queues the
 * peer; the rest runs after ucp_worker_progress returns, never inside UCX.
 *
 * UCX cannot withdraw a send (ucp_request_cancel only removes receives that
 * are not matched yet) nor a receive already matched to a message in flight.
 * cancel therefore keeps progressing the worker until such a request
 * completes; all cancels of one burst (a failing schedule cancels everything
 * it posted) share one bounded wait. What is still pending then can only be
 * taken back from UCX by force-closing the endpoint, which purges every
 * request on it: the peer is then unusable (WEFT_ERR_TRANSPORT) in every
 * communicator, as after a failure. Leaving the request to UCX instead would
 * let it read or write the buffer later (when the peer matches it), and UCX
 * 1.13 asserts in ucp_worker_destroy on an endpoint that still holds one.
 */
#include "pt2pt/ucx/ucx_internal.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Longest wait of a burst of cancels for requests UCX cannot withdraw. */
#define CANCEL_WAIT_NS 1000000000ull
/* Cancels closer together than this belong to one burst. */
#define CANCEL_BURST_GAP_NS 10000000ull
/* idle_wait never sleeps longer: keepalive runs from ucp_worker_progress. */
#define IDLE_WAIT_MAX_NS 100000000ull
/* Sleep of idle_wait when the worker has no event file descriptor. */
#define IDLE_NAP_NS 100000ull
/* Finished requests a context keeps for reuse. */
#define REQ_POOL_MAX 64u
/* The tag's low bits: the sender's rank (pt2pt.h). */
#define SRC_MASK ((1ull << WEFT_TAG_SRC_BITS) - 1)

/* ------------------------------------------------------------ status */

/* Statuses with which UCX reports that the remote process is gone. */
static int is_peer_failure(ucs_status_t status)
{
    switch (status) {
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
        return 1;
    default:
        return 0;
    }
}

static weft_status_t memtype_to_ucs(weft_memtype_t memtype, ucs_memory_type_t *ucs_p)
{
    switch (memtype) {
    case WEFT_MEM_HOST:
        *ucs_p = UCS_MEMORY_TYPE_HOST;
        return WEFT_OK;
    case WEFT_MEM_CUDA:
        *ucs_p = UCS_MEMORY_TYPE_CUDA;
        return WEFT_OK;
    case WEFT_MEM_EMU:
        break;
    }
    return weft__error(WEFT_ERR_UNSUPPORTED, "memory type %d has no UCX equivalent", (int)memtype);
}

/* ------------------------------------------------------------ requests */

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    weft_p2p_req_t *req = user_data;

    (void)request;
    req->ucs_status = status;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static void recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                    void *user_data)
{
    weft_p2p_req_t *req = user_data;

    (void)request;
    req->ucs_status = status;
    if (status == UCS_OK) {
        req->length = info->length;
        if (req->peer == NULL) { /* from any source: the sender is in the tag */
            req->peer_rank = (int)(info->sender_tag & SRC_MASK);
        }
    }
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
    weft__ucx_recv_unlink(req);
}

/* Hand the UCX request back (ctx locked). Once freed, UCX does not call our
 * callback; an incomplete request is released by UCX when it completes. */
static void req_release(weft_p2p_req_t *req)
{
    if (req->ucp_req != NULL) {
        ucp_request_free(req->ucp_req);
        req->ucp_req = NULL;
        if (req->peer != NULL) {
            req->peer->nreqs--;
        }
    }
    weft__ucx_recv_unlink(req);
}

/* After the peer's endpoint was closed: UCX reports the requests it purged
 * from the next progress on (ctx locked). */
static void req_wait_purged(weft_ucx_context_t *ctx, weft_p2p_req_t *req)
{
    uint64_t deadline = weft__time_ns() + CLOSE_FORCE_WAIT_NS;

    while (!req->done && weft__time_ns() < deadline) {
        ucp_worker_progress(ctx->worker);
    }
}

/* Give up on a request UCX still holds (ctx locked). */
static void req_abandon(weft_p2p_req_t *req, ucs_status_t status)
{
    req_release(req);
    req->ucs_status = status;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

/* Whether the request's peer failed (UCS_OK: not, or a receive from any
 * source, which waits on no peer). */
static ucs_status_t peer_failure(const weft_p2p_req_t *req)
{
    return req->peer != NULL ? __atomic_load_n(&req->peer->failure, __ATOMIC_ACQUIRE) : UCS_OK;
}

/* The weft status of a completed request, reported through weft__error. */
static weft_status_t req_status(const weft_p2p_req_t *req)
{
    const char *what = req->is_recv ? "receive from" : "send to";
    ucs_status_t failure = peer_failure(req);

    if (req->peer_failed || (req->ucs_status != UCS_OK && failure != UCS_OK)) {
        if (failure == UCS_ERR_CANCELED) {
            return weft__error(WEFT_ERR_TRANSPORT, "%s rank %d: the connection is closed (%s)",
                               what, req->peer_rank, req->peer->why);
        }
        return weft__error(WEFT_ERR_PEER_FAILED, "%s rank %d: the peer failed: %s (%s)", what,
                           req->peer_rank, ucs_status_string(failure), req->peer->why);
    }
    if (req->ucs_status == UCS_OK) {
        if (req->is_recv && req->length != req->bytes) {
            return weft__error(WEFT_ERR_MISMATCH,
                               "message of %zu bytes from rank %d for a receive of %zu bytes",
                               req->length, req->peer_rank, req->bytes);
        }
        return WEFT_OK;
    }
    if (req->ucs_status == UCS_ERR_MESSAGE_TRUNCATED) {
        return weft__error(WEFT_ERR_MISMATCH,
                           "message from rank %d is larger than the receive of %zu bytes",
                           req->peer_rank, req->bytes);
    }
    if (is_peer_failure(req->ucs_status)) {
        return weft__error(WEFT_ERR_PEER_FAILED, "%s rank %d: %s", what, req->peer_rank,
                           ucs_status_string(req->ucs_status));
    }
    return weft__error(WEFT_ERR_TRANSPORT, "%s rank %d (%zu bytes): %s", what, req->peer_rank,
                       req->bytes, ucs_status_string(req->ucs_status));
}

/* A cleared request from the context's pool, or malloc's (ctx locked); NULL without memory. */
static weft_p2p_req_t *req_get(weft_ucx_context_t *ctx)
{
    weft_p2p_req_t *req = ctx->req_pool;

    if (req == NULL) {
        return calloc(1, sizeof(*req));
    }
    ctx->req_pool = req->next;
    ctx->req_pooled--;
    memset(req, 0, sizeof(*req));
    return req;
}

/* A finished request back to the pool (ctx locked): released, off every list. */
static void req_put(weft_ucx_context_t *ctx, weft_p2p_req_t *req)
{
    if (ctx->req_pooled >= REQ_POOL_MAX) {
        free(req);
        return;
    }
    req->next = ctx->req_pool;
    ctx->req_pool = req;
    ctx->req_pooled++;
}

void weft__ucx_req_pool_free(weft_ucx_context_t *ctx)
{
    while (ctx->req_pool != NULL) {
        weft_p2p_req_t *next = ctx->req_pool->next;

        free(ctx->req_pool);
        ctx->req_pool = next;
    }
    ctx->req_pooled = 0;
}

/* The arguments of a post: the peer, the tag's free bits, the memory type UCX is told. */
static weft_status_t post_check(const ucx_comm_t *comm, int peer, int is_recv,
                                weft_memtype_t memtype, uint64_t tag, ucs_memory_type_t *mt_p)
{
    const char *what = is_recv ? "receive from" : "send to";

    if ((peer < 0 && !(is_recv && peer == WEFT_P2P_ANY)) || peer >= comm->size) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s rank %d of %d", what, peer, comm->size);
    }
    if (tag & SRC_MASK) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s rank %d: tag %#llx uses the low %d bits, which carry the source",
                           what, peer, (unsigned long long)tag, WEFT_TAG_SRC_BITS);
    }
    return memtype_to_ucs(memtype, mt_p);
}

/* The arguments of a post checked, then a request for it (ctx locked). */
static weft_status_t req_new(ucx_comm_t *comm, int peer, int is_recv, size_t bytes,
                             weft_memtype_t memtype, uint64_t tag, ucs_memory_type_t *mt_p,
                             weft_p2p_req_t **req_p)
{
    weft_p2p_req_t *req;
    weft_status_t status = post_check(comm, peer, is_recv, memtype, tag, mt_p);

    if (status != WEFT_OK) {
        return status;
    }
    req = req_get(comm->ctx);
    if (req == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a UCX request");
    }
    req->peer = peer != WEFT_P2P_ANY ? comm->peers[peer] : NULL; /* NULL: any source */
    req->peer_rank = peer;
    req->bytes = bytes;
    req->is_recv = is_recv != 0;
    *req_p = req;
    return WEFT_OK;
}

/* Before posting req (ctx locked): *post_p = 1 when the endpoint is ready; 0
 * when req is already complete because its peer failed. */
static weft_status_t req_prepare(weft_ucx_context_t *ctx, weft_p2p_req_t *req, int *post_p)
{
    weft_status_t status;

    if (req->peer == NULL) { /* any source: no endpoint to watch */
        *post_p = 1;
        return WEFT_OK;
    }
    if (req->peer->failure == UCS_OK) {
        status = weft__ucx_peer_connect(ctx, req->peer, req->peer_rank);
        if (status == WEFT_OK) {
            *post_p = 1;
            return WEFT_OK;
        }
        if (!weft__ucx_peer_is_gone(ctx, req->peer)) {
            return status;
        }
        weft__ucx_peer_fail(req->peer, UCS_ERR_UNREACHABLE, "cannot connect: its process is gone");
    }
    req->peer_failed = 1;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
    *post_p = 0;
    return WEFT_OK;
}

/* ------------------------------------------------------------ ops */

static weft_status_t post_send(ucx_comm_t *comm, int peer, const void *buf, size_t bytes,
                               weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p)
{
    weft_ucx_context_t *ctx = comm->ctx;
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .cb.send = send_cb,
    };
    weft_p2p_req_t *req;
    weft_status_t status;
    int post = 0;
    void *sp;

    pthread_mutex_lock(&ctx->lock);
    status = req_new(comm, peer, 0, bytes, memtype, tag, &param.memory_type, &req);
    if (status != WEFT_OK) {
        pthread_mutex_unlock(&ctx->lock);
        return status;
    }
    param.user_data = req;
    WEFT_CHECK_GOTO(req_prepare(ctx, req, &post), err_unlock);
    if (post) {
        sp = ucp_tag_send_nbx(req->peer->ep, buf, bytes, tag | (uint64_t)comm->rank, &param);
        if (UCS_PTR_IS_PTR(sp)) {
            req->ucp_req = sp;
            req->peer->nreqs++;
        } else {
            req->ucs_status = UCS_PTR_STATUS(sp);
            __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    *req_p = req;
    return WEFT_OK;

err_unlock:
    req_put(ctx, req);
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

static weft_status_t post_recv(ucx_comm_t *comm, int peer, void *buf, size_t bytes,
                               weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p)
{
    weft_ucx_context_t *ctx = comm->ctx;
    /* UCX 1.13 does not fill recv_info when a receive completes at once, so
     * the size check needs the callback: deny immediate completion (the
     * callback may then run before ucp_tag_recv_nbx returns) */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        .cb.recv = recv_cb,
    };
    weft_p2p_req_t *req;
    weft_status_t status;
    int post = 0;
    void *rp;

    pthread_mutex_lock(&ctx->lock);
    status = req_new(comm, peer, 1, bytes, memtype, tag, &param.memory_type, &req);
    if (status != WEFT_OK) {
        pthread_mutex_unlock(&ctx->lock);
        return status;
    }
    param.user_data = req;
    /* the receive does not need the endpoint, but UCX watches a peer only
     * through one */
    WEFT_CHECK_GOTO(req_prepare(ctx, req, &post), err_unlock);
    if (post) {
        rp = req->peer != NULL ? ucp_tag_recv_nbx(ctx->worker, buf, bytes, tag | (uint64_t)peer,
                                                  UINT64_MAX, &param)
                               : ucp_tag_recv_nbx(ctx->worker, buf, bytes, tag, ~SRC_MASK, &param);
        if (UCS_PTR_IS_PTR(rp)) {
            req->ucp_req = rp;
            if (req->peer != NULL) {
                req->peer->nreqs++;
                if (!req->done) {
                    weft__ucx_recv_link(req);
                }
            }
        } else {
            req->ucs_status = UCS_PTR_STATUS(rp);
            __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    *req_p = req;
    return WEFT_OK;

err_unlock:
    req_put(ctx, req);
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

weft_status_t weft__ucx_post(ucx_comm_t *comm, int is_recv, int peer, void *buf, size_t bytes,
                             uint64_t tag, weft_p2p_req_t **req_p)
{
    return is_recv ? post_recv(comm, peer, buf, bytes, WEFT_MEM_HOST, tag, req_p)
                   : post_send(comm, peer, buf, bytes, WEFT_MEM_HOST, tag, req_p);
}

/* Messages over one fragment, and device memory UCX cannot reach, go
 * through ucx_stage.c; the rest straight to UCX. */
static weft_status_t ucx_isend(void *ep, int peer, const void *buf, size_t bytes,
                               weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p)
{
    ucx_comm_t *comm = ep;

    if (weft__ucx_needs_stage(comm->ctx, memtype, bytes)) {
        return weft__ucx_stage_post(comm, 0, peer, (void *)buf, bytes, memtype, tag, req_p);
    }
    return post_send(comm, peer, buf, bytes, memtype, tag, req_p);
}

/* A send that UCX completes at once (a short message whose endpoint has room): no request, one
 * lock round trip. A peer not connected yet, or failed, and anything UCX cannot send at once
 * take isend's path, which reports their outcome (WEFT_INPROGRESS here). The sizes from the
 * smallest UCX could not send at once above the largest it could (its short-message limit
 * with this peer) skip the try. np 2 bound, ping-pong (weft_bench --vs-mpi --loop pingpong),
 * medians of eight alternating jobs: 8 B 1.83 of Open MPI's time -> 1.77, 64 B 1.75 -> 1.61,
 * 512 B 1.31 -> 1.39 (the noise: 1.04-1.55). */
static weft_status_t ucx_send_now(void *ep, int peer, const void *buf, size_t bytes,
                                  weft_memtype_t memtype, uint64_t tag)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
    };
    weft_status_t status;
    ucx_peer_t *p;
    void *sp;

    if (weft__ucx_needs_stage(ctx, memtype, bytes)) { /* (memory UCX cannot name, too) */
        return WEFT_INPROGRESS;
    }
    status = post_check(comm, peer, 0, memtype, tag, &param.memory_type);
    if (status != WEFT_OK) {
        return status;
    }
    pthread_mutex_lock(&ctx->lock);
    p = comm->peers[peer];
    if (p->ep == NULL || p->failure != UCS_OK || (p->now_no != 0 && bytes >= p->now_no)) {
        pthread_mutex_unlock(&ctx->lock);
        return WEFT_INPROGRESS;
    }
    sp = ucp_tag_send_nbx(p->ep, buf, bytes, tag | (uint64_t)comm->rank, &param);
    status = UCS_PTR_IS_PTR(sp) || UCS_PTR_STATUS(sp) != UCS_OK ? WEFT_INPROGRESS : WEFT_OK;
    if (status == WEFT_OK && bytes > p->now_ok) {
        p->now_ok = bytes;
    } else if (status != WEFT_OK && bytes > p->now_ok && (p->now_no == 0 || bytes < p->now_no)) {
        p->now_no = bytes; /* a full endpoint at a size it sent before changes nothing */
    }
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

static weft_status_t ucx_irecv(void *ep, int peer, void *buf, size_t bytes, weft_memtype_t memtype,
                               uint64_t tag, weft_p2p_req_t **req_p)
{
    ucx_comm_t *comm = ep;

    if (weft__ucx_needs_stage(comm->ctx, memtype, bytes)) {
        return weft__ucx_stage_post(comm, 1, peer, buf, bytes, memtype, tag, req_p);
    }
    return post_recv(comm, peer, buf, bytes, memtype, tag, req_p);
}

static weft_status_t ucx_test(void *ep, weft_p2p_req_t *req, int *done_p, int *src_p)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    weft_status_t status;
    int src;

    if (req->stage != NULL) {
        return weft__ucx_stage_test(comm, req, done_p, src_p);
    }
    /* fast path, no lock: the completion and failure flags are written with
     * release stores under the lock; seeing neither means "not yet" */
    if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE) && peer_failure(req) == UCS_OK) {
        *done_p = 0;
        return WEFT_INPROGRESS;
    }
    pthread_mutex_lock(&ctx->lock);
    if (!req->done && peer_failure(req) != UCS_OK) {
        weft__ucx_reap_failures(ctx);
        req_wait_purged(ctx, req);
        if (!req->done) {
            /* UCX still holds it, though the endpoint is closed: nothing
             * more comes from a dead peer */
            req->peer_failed = 1;
            req_abandon(req, req->peer->failure);
        }
    }
    if (!req->done) {
        pthread_mutex_unlock(&ctx->lock);
        *done_p = 0;
        return WEFT_INPROGRESS;
    }
    req_release(req);
    status = req_status(req);
    src = req->peer_rank;
    req_put(ctx, req);
    pthread_mutex_unlock(&ctx->lock);
    *done_p = 1;
    if (src_p != NULL) {
        *src_p = src;
    }
    return status;
}

/* Deadline for a cancel: one per burst (ctx locked). */
static uint64_t cancel_deadline(weft_ucx_context_t *ctx)
{
    uint64_t now = weft__time_ns();

    if (ctx->cancel_until == 0 || now - ctx->cancel_last > CANCEL_BURST_GAP_NS) {
        ctx->cancel_until = now + CANCEL_WAIT_NS;
    }
    return ctx->cancel_until;
}

static void ucx_cancel(void *ep, weft_p2p_req_t *req)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;

    if (req->stage != NULL) {
        weft__ucx_stage_cancel(comm, req);
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    if (!req->done) {
        /* removes a receive that is not matched yet; completes it at once */
        ucp_request_cancel(ctx->worker, req->ucp_req);
    }
    if (!req->done) {
        uint64_t deadline = cancel_deadline(ctx);

        while (!req->done && peer_failure(req) == UCS_OK && weft__time_ns() < deadline) {
            weft__ucx_worker_progress(ctx);
        }
        if (!req->done && req->peer != NULL && req->peer->failure == UCS_OK) {
            weft__log_warn("ucx: closing the connection to rank %d to withdraw a %zu-byte %s",
                           req->peer_rank, req->bytes, req->is_recv ? "receive" : "send");
            weft__ucx_peer_fail(req->peer, UCS_ERR_CANCELED,
                                "closed to withdraw a request that UCX could not cancel");
        }
        if (!req->done && peer_failure(req) != UCS_OK) {
            weft__ucx_reap_failures(ctx);
            req_wait_purged(ctx, req);
        }
        if (!req->done) {
            weft__log_warn("ucx: UCX still holds a %zu-byte %s rank %d; it may still %s its buffer",
                           req->bytes, req->is_recv ? "receive from" : "send to", req->peer_rank,
                           req->is_recv ? "write" : "read");
        }
        ctx->cancel_last = weft__time_ns();
    }
    req_release(req);
    req_put(ctx, req);
    pthread_mutex_unlock(&ctx->lock);
}

static int ucx_progress(void *ep)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    unsigned n;

    pthread_mutex_lock(&ctx->lock);
    n = weft__ucx_worker_progress(ctx);
    pthread_mutex_unlock(&ctx->lock);
    return (int)n;
}

static void nap(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};

    nanosleep(&ts, NULL);
}

static void ucx_idle_wait(void *ep, uint64_t max_ns)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    struct pollfd pfd = {.fd = ctx->efd, .events = POLLIN};
    struct timespec ts;
    ucs_status_t ucs;

    if (max_ns > IDLE_WAIT_MAX_NS) {
        max_ns = IDLE_WAIT_MAX_NS;
    }
    if (ctx->efd < 0) {
        nap(max_ns < IDLE_NAP_NS ? max_ns : IDLE_NAP_NS);
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    ucs = ucp_worker_arm(ctx->worker);
    pthread_mutex_unlock(&ctx->lock);
    if (ucs == UCS_ERR_BUSY) {
        return; /* events are waiting: the caller progresses */
    }
    if (ucs != UCS_OK) {
        nap(max_ns < IDLE_NAP_NS ? max_ns : IDLE_NAP_NS);
        return;
    }
    ts.tv_sec = (time_t)(max_ns / 1000000000ull);
    ts.tv_nsec = (long)(max_ns % 1000000000ull);
    ppoll(&pfd, 1, &ts, NULL);
}

/* ------------------------------------------------------------ tables */

weft_status_t weft__ucx_ep_create(weft_ucx_context_t *ctx, int rank, int size, const void *addrs,
                                  size_t addr_stride, const size_t *addr_lens, void **ep_p)
{
    ucx_comm_t *comm;
    weft_status_t status = WEFT_OK;

    if (size < 1 || size > (1 << WEFT_TAG_SRC_BITS)) {
        return weft__error(WEFT_ERR_UNSUPPORTED,
                           "UCX communicator of %d ranks: tags carry the source in %d bits", size,
                           WEFT_TAG_SRC_BITS);
    }
    if (rank < 0 || rank >= size || addrs == NULL || addr_lens == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "UCX endpoint table for rank %d of %d%s", rank,
                           size, addrs == NULL || addr_lens == NULL ? " without addresses" : "");
    }
    for (int r = 0; r < size; r++) {
        const char *addr = (const char *)addrs + (size_t)r * addr_stride;
        ucx_addr_hdr_t hdr;

        if (addr_lens[r] <= sizeof(hdr) || (size > 1 && addr_lens[r] > addr_stride)) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "address of rank %d: %zu bytes in slots of %zu", r, addr_lens[r],
                               addr_stride);
        }
        memcpy(&hdr, addr, sizeof(hdr));
        if (hdr.magic != ADDR_MAGIC) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "address of rank %d is not from weft__ucx_worker_address", r);
        }
    }
    comm = calloc(1, sizeof(*comm) + (size_t)size * sizeof(comm->peers[0]));
    if (comm == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a UCX table of %d ranks", size);
    }
    comm->ctx = ctx;
    comm->rank = rank;
    comm->size = size;
    pthread_mutex_lock(&ctx->lock);
    for (int r = 0; r < size && status == WEFT_OK; r++) {
        status = weft__ucx_peer_lookup(ctx, (const char *)addrs + (size_t)r * addr_stride,
                                       addr_lens[r], r, &comm->peers[r]);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (status != WEFT_OK) {
        /* peers already added stay cached: the context owns them */
        free(comm);
        return status;
    }
    pthread_mutex_lock(&weft__ucx_global_lock);
    ctx->refs++;
    pthread_mutex_unlock(&weft__ucx_global_lock);
    *ep_p = comm;
    return WEFT_OK;
}

/*
 * Messages that arrived for a communicator that is gone would stay in UCX's
 * unexpected queue (each holding a receive descriptor) until the worker is
 * destroyed: every abort or failure of a communicator whose peers had sent
 * already leaves some. Take them out of UCX into a scratch buffer and drop
 * them. Communicator ids are not reused while a few dozen later ones exist
 * (runtime/comm_split.c), so the ids of the last ones released are drained
 * again at each release, for messages that were still on their way.
 */
static void drop_unexpected(weft_ucx_context_t *ctx, uint32_t comm_id)
{
    const int shift = WEFT_TAG_SEQ_BITS + WEFT_TAG_SLOT_BITS + WEFT_TAG_SRC_BITS;
    uint64_t tag = weft__tag_make(comm_id, 0, 0);
    uint64_t mask = (uint64_t)((1u << WEFT_TAG_COMM_BITS) - 1) << shift;
    ucp_request_param_t param = {.op_attr_mask = 0};
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;

    for (int n = 0; n < 4096 && (msg = ucp_tag_probe_nb(ctx->worker, tag, mask, 1, &info)); n++) {
        void *buf = malloc(info.length > 0 ? info.length : 1);
        void *rp;

        if (buf == NULL) {
            weft__log_warn("ucx: no memory to drop a %zu-byte message of a released communicator",
                           info.length);
            return; /* the message is UCX's again only at finalize */
        }
        rp = ucp_tag_msg_recv_nbx(ctx->worker, buf, info.length, msg, &param);
        if (UCS_PTR_IS_PTR(rp)) {
            uint64_t deadline = weft__time_ns() + CANCEL_WAIT_NS;

            while (ucp_request_check_status(rp) == UCS_INPROGRESS && weft__time_ns() < deadline) {
                ucp_worker_progress(ctx->worker);
            }
            if (ucp_request_check_status(rp) == UCS_INPROGRESS) {
                /* a rendezvous whose sender stalled: UCX may still write the
                 * buffer, so it is left to UCX (freed with the worker) */
                weft__log_debug("ucx: a %zu-byte message of a released communicator did not "
                                "arrive in time; its buffer stays with UCX",
                                info.length);
                ucp_request_free(rp);
                continue;
            }
            ucp_request_free(rp);
        }
        free(buf);
    }
}

static void ucx_discard(void *ep, const uint32_t *comm_ids, unsigned n)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;

    pthread_mutex_lock(&ctx->lock);
    for (unsigned i = 0; i < n; i++) {
        drop_unexpected(ctx, comm_ids[i]);
    }
    pthread_mutex_unlock(&ctx->lock);
}

static void ucx_ep_release(void *ep)
{
    ucx_comm_t *comm = ep;

    weft__ucx_stage_detach(comm);
    weft__ucx_context_put(comm->ctx);
    free(comm);
}

const weft_pt2pt_ops_t weft__ucx_ops = {
    .name = "ucx",
    .isend = ucx_isend,
    .send_now = ucx_send_now,
    .irecv = ucx_irecv,
    .test = ucx_test,
    .cancel = ucx_cancel,
    .progress = ucx_progress,
    .idle_wait = ucx_idle_wait,
    .discard = ucx_discard,
    .ep_release = ucx_ep_release,
};
