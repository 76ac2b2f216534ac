/*
 * Communicators as the public API sees them: creation (with the upcalls of
 * the layers above core), the node setup, references between a communicator
 * and those split from it, and tombstones. The shared state and its health
 * are in comm/comm.h.
 */
#ifndef WEFT_RUNTIME_COMM_H
#define WEFT_RUNTIME_COMM_H

#include "comm/comm.h"

/* Takes ownership of ep and boot_ctx (released by weft_comm_destroy). */
weft_status_t weft__comm_create(int rank, int size, uint32_t id, const weft_pt2pt_ops_t *p2p,
                                void *p2p_ep, const weft_bootstrap_ops_t *boot, void *boot_ctx,
                                weft_comm_t *comm_p);
/* Collective over comm (every rank calls it once, right after creation):
 * takes ownership of map, then sets up the node's shared memory. */
weft_status_t weft__comm_node_setup(weft_comm_t comm, weft_node_map_t *map);

/* References held by communicators split or duplicated from comm: its
 * transport and bootstrap stay alive until the last one is dropped. */
void weft__comm_get(weft_comm_t comm);
void weft__comm_put(weft_comm_t comm);
/* Free destroyed communicators' tombstones (weft_finalize). */
void weft__comm_release_tombstones(void);

#endif /* WEFT_RUNTIME_COMM_H */
