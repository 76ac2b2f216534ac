/*
 * Point-to-point interface: an ops table chosen once when a communicator is
 * created: ucx/ connects ranks in different processes (or hosts) through
 * UCP; loop/ connects ranks that are threads of one process.
 *
 * Contract:
 *  - `ep` is the transport's per-communicator-rank context; only the thread
 *    that drives this rank calls these functions (no locking needed by the
 *    caller). Requests belong to that context.
 *  - isend/irecv never block. A message matches a receive with the same
 *    source rank and the same 64-bit tag; two messages with the same source
 *    and tag match receives in the order they were sent (MPI's
 *    non-overtaking rule). The sizes must be equal: a mismatch completes
 *    the receive with WEFT_ERR_MISMATCH.
 *  - irecv's peer WEFT_P2P_ANY matches a message with the tag from any
 *    source; receives match in posting order whatever their source (UCX:
 *    a message of several fragments is matched by its first, see
 *    pt2pt/ucx/ucx_stage.c).
 *  - test returns the request's status once it is done (*done_p = 1) and
 *    frees the request; a request that is not done stays valid. Then, for a
 *    receive, *src_p (when src_p is not NULL) is the rank the message came
 *    from (-1 when it failed before one matched; a send: its peer).
 *  - send_now (optional, NULL where a transport has none) sends a message
 *    that it can complete at once, without a request: WEFT_OK when sent,
 *    WEFT_INPROGRESS when not (nothing sent: post it with isend), or the
 *    error isend would give for the same arguments.
 *  - cancel withdraws a request that is not done and frees it: after it
 *    returns the transport never touches the request's buffer again.
 *  - progress moves messages and returns the number of events handled.
 *  - idle_wait blocks up to max_ns when nothing can progress (it may return
 *    earlier); busy transports may just yield the CPU.
 */
#ifndef WEFT_PT2PT_H
#define WEFT_PT2PT_H

#include "device/device.h"

typedef struct weft_p2p_req weft_p2p_req_t; /* transport-defined */

#define WEFT_P2P_ANY (-1) /* irecv's peer: any source */

typedef struct weft_pt2pt_ops {
    const char *name;
    /* 1 when idle_wait returns as soon as a message arrives: waiting ranks
     * then sleep in it at once instead of first polling with sched_yield */
    int prompt_wakeup;
    weft_status_t (*isend)(void *ep, int peer, const void *buf, size_t bytes,
                           weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p);
    weft_status_t (*irecv)(void *ep, int peer, void *buf, size_t bytes, weft_memtype_t memtype,
                           uint64_t tag, weft_p2p_req_t **req_p);
    weft_status_t (*test)(void *ep, weft_p2p_req_t *req, int *done_p, int *src_p);
    void (*cancel)(void *ep, weft_p2p_req_t *req);
    int (*progress)(void *ep);
    void (*idle_wait)(void *ep, uint64_t max_ns);
    /* A communicator is gone (its receives completed or cancelled): drop
     * the messages that arrived for the n communicator ids given and that
     * nothing will receive. The caller names the gone one and the last few
     * gone before it whose ids no live communicator took again (a peer
     * that had sent before it saw the end). NULL: the transport keeps no
     * unexpected messages beyond the communicator's own table. */
    void (*discard)(void *ep, const uint32_t *comm_ids, unsigned n);
    /* frees the context; pending requests must have been completed or cancelled */
    void (*ep_release)(void *ep);
    weft_status_t (*send_now)(void *ep, int peer, const void *buf, size_t bytes,
                              weft_memtype_t memtype, uint64_t tag);
} weft_pt2pt_ops_t;

/*
 * Tags of collective traffic: (communicator id, operation sequence number,
 * message slot within the operation) in the upper 48 bits. The low 16 bits
 * are zero here: a transport whose matching has no source field (UCX) puts
 * the source rank there. Slots are numbered by each algorithm so that sender
 * and receiver agree without negotiation; sequence numbers wrap, which is
 * harmless while fewer than 2^16 operations of one communicator are in flight.
 */
#define WEFT_TAG_COMM_BITS 16
#define WEFT_TAG_SEQ_BITS 16
#define WEFT_TAG_SLOT_BITS 16
#define WEFT_TAG_SRC_BITS 16
#define WEFT_TAG_MAX_SLOT ((1u << WEFT_TAG_SLOT_BITS) - 1)
/* The sequence number reserved for point-to-point messages (weft_send and
 * weft_recv): their slot is the user's tag. Collectives skip it. */
#define WEFT_TAG_SEQ_P2P ((1u << WEFT_TAG_SEQ_BITS) - 1)
/* The fragments after the first of a point-to-point message that a
 * transport cuts into several (UCX over WEFT_UCX_STAGE_FRAG) travel under
 * this sequence number, so that a receive from any source, which matches
 * WEFT_TAG_SEQ_P2P with any source bits, takes only first fragments.
 * Collectives skip it too (comm/comm.h has the lowest reserved number). */
#define WEFT_TAG_SEQ_P2P_CONT (WEFT_TAG_SEQ_P2P - 2)

static inline uint64_t weft__tag_make(uint32_t comm_id, uint32_t seq, uint32_t slot)
{
    return ((uint64_t)(comm_id & ((1u << WEFT_TAG_COMM_BITS) - 1))
            << (WEFT_TAG_SEQ_BITS + WEFT_TAG_SLOT_BITS + WEFT_TAG_SRC_BITS)) |
           ((uint64_t)(seq & ((1u << WEFT_TAG_SEQ_BITS) - 1))
            << (WEFT_TAG_SLOT_BITS + WEFT_TAG_SRC_BITS)) |
           ((uint64_t)(slot & WEFT_TAG_MAX_SLOT) << WEFT_TAG_SRC_BITS);
}

#endif /* WEFT_PT2PT_H */
