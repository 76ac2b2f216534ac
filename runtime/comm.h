/*
 * Communicators as the public API sees them: creation (with the upcalls of
 * the layers above core), the node setup, references between a communicator
 * and those split from it or still holding its memory. The shared state and
 * its health are in comm/comm.h.
 */
#ifndef WEFT_RUNTIME_COMM_H
#define WEFT_RUNTIME_COMM_H

#include "comm/comm.h"
#include "coll/comm_state.h"

/* What runtime/ keeps per communicator (comm->rt): its enqueued operations
 * (runtime/enqueue.c). */
struct weft_runtime_comm {
    atomic_int enq_pending;  /* enqueued operations not finished */
    weft_status_t enq_error; /* the first failure of one, for the next call */
    char enq_msg[512];
};

/* Takes ownership of ep and boot_ctx (released by weft_comm_destroy). */
weft_status_t weft__comm_create(int rank, int size, uint32_t id, const weft_pt2pt_ops_t *p2p,
                                void *p2p_ep, const weft_bootstrap_ops_t *boot, void *boot_ctx,
                                struct weft_comm **comm_p);
/* Collective over comm (every rank calls it once, right after creation):
 * takes ownership of map, then sets up the node's shared memory. */
weft_status_t weft__comm_node_setup(struct weft_comm *comm, weft_node_map_t *map);

/* References held by communicators split or duplicated from comm: its
 * transport and bootstrap stay alive until the last one is dropped. */
void weft__comm_get(struct weft_comm *comm);
void weft__comm_put(struct weft_comm *comm);
/* Pins keep the struct's memory (not its transport) for what outlives the
 * communicator: a request of it whose schedule the application has not
 * settled or freed. The handle and the transport's reference hold one pin
 * together; the memory is freed with the last. */
void weft__comm_pin(struct weft_comm *comm);
void weft__comm_unpin(struct weft_comm *comm);

/* 1 when a communicator of this process has id's tag bits (WEFT_TAG_COMM_BITS:
 * ids wrap there), or one of the last 256 released had: their late messages
 * may still be dropped by the transport (weft_pt2pt_ops_t.discard). */
int weft__comm_id_taken(uint32_t id);
/* The first id from `from` on that no communicator of this process holds or
 * held lately (in the bits a tag carries); `from` when all are. */
uint32_t weft__comm_free_id(uint32_t from);

#endif /* WEFT_RUNTIME_COMM_H */
