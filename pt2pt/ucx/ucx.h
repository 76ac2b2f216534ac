/*
 * UCX transport: ranks in different processes (or on different hosts)
 * exchange tagged messages through UCP.
 *
 * One UCP context and one worker per process, shared by every communicator
 * (created by the first weft__ucx_context_get, destroyed by the last put).
 * Each communicator gets an endpoint table (weft__ucx_ep_create) built from
 * the worker addresses its ranks exchanged through the bootstrap. UCP
 * endpoints are created lazily, on the first send to or receive from a
 * peer, and are cached per process by address: communicators that share a
 * peer share its endpoint, so MPI's non-overtaking order holds across them.
 *
 * Matching: UCP tags have no source field, so the sender puts its rank in the
 * low WEFT_TAG_SRC_BITS of the weft tag (which must be zero on entry) and the
 * receiver matches tag | source with a full mask. Communicators are therefore
 * limited to 2^16 ranks.
 *
 * Failure: endpoints use UCP_ERR_HANDLING_MODE_PEER. When a peer is found
 * dead, every pending and later send to it and receive from it completes
 * with WEFT_ERR_PEER_FAILED, in every communicator; other peers are
 * unaffected. It is found by UCX (connection reset, keepalive) and, for
 * peers on this host, by a look into /proc every 0.5 s while requests with
 * them are outstanding (UCX 1.13 misses a peer that dies before answering
 * the wireup of its first rendezvous). UCX watches a peer only through an
 * endpoint, so the first receive creates one too. Unless the user set them,
 * the context enables keepalive every WEFT_UCX_KEEPALIVE_INTERVAL and lets
 * the shared-memory transports claim peer-failure support
 * (UCX_MM_ERROR_HANDLING=y), which UCX 1.13 leaves off: without it endpoints
 * with error handling use TCP over loopback instead of shared memory.
 *
 * Rendezvous over TCP: where UCX has no network transport but TCP (no
 * InfiniBand/RoCE or Cray device, or UCX_TLS names none), the context sets
 * UCX_RNDV_THRESH=WEFT_UCX_TCP_RNDV_THRESH unless the user set it: UCX's
 * automatic threshold sends messages from a few KiB on with a rendezvous
 * round trip, which over TCP costs more than the copy it saves (measured
 * across two simulated hosts: allgather 1.29 -> 0.96 of Open MPI's time,
 * geomean 4 KiB-16 MiB; a 32 KiB allreduce 1.01 -> 0.55). Shared memory on
 * one host showed no loss from it (its single-copy rendezvous wins only
 * above that size). There it also sets UCX_TCP_RX_SEG_SIZE=WEFT_UCX_TCP_RX_SEG_SIZE
 * unless the user set it: UCX's TCP transport receives into a segment of that
 * size, one read per segment, and where a rank sends and receives at once
 * (allgather, allreduce) the 64 KiB default made weft slower than Open MPI
 * from 1 MiB (one rank per simulated host, allgather 1-16 MiB 1.03-1.25 of
 * Open MPI's time -> 0.96-1.10; two ranks per host allreduce 2-16 MiB
 * 1.00-1.06 -> 0.93-1.03, geomean 8 B-16 MiB 0.94-0.97 -> 0.86-0.87,
 * allgather unchanged within the noise). An endpoint takes a
 * segment from UCX's pool while it receives and gives it back after.
 *
 * Cancel: UCX cannot withdraw a send, nor a receive already matched to a
 * message in flight. cancel waits for them (one bounded wait, about 1 s, for
 * a burst of cancels), then closes the connection to the peer to take the
 * request back: from then on that peer is unusable (WEFT_ERR_TRANSPORT). A
 * receive that is not matched yet is withdrawn at once.
 *
 * Threading: the context serializes every UCP call behind one mutex (the
 * worker runs in UCS_THREAD_MODE_SERIALIZED), so communicators sharing it
 * may be driven by different threads; one endpoint table and its requests
 * still belong to one thread at a time (pt2pt.h). idle_wait sleeps outside
 * the lock.
 *
 * Fork: create the context after fork; a context does not survive into a
 * child process.
 */
#ifndef WEFT_PT2PT_UCX_H
#define WEFT_PT2PT_UCX_H

#include "pt2pt/pt2pt.h"
#include "base/config.h"

/* Keepalive round applied unless UCX_KEEPALIVE_INTERVAL is set (UCX's default
 * is 20 s): UCX notices a dead peer on shared memory within one round. */
#define WEFT_UCX_KEEPALIVE_INTERVAL "1s"
/* UCX_RNDV_THRESH applied where the network is TCP only (above). */
#define WEFT_UCX_TCP_RNDV_THRESH "1m"
/* UCX_TCP_RX_SEG_SIZE applied there too (above; UCX's default is 64k). */
#define WEFT_UCX_TCP_RX_SEG_SIZE "256k"

typedef struct weft_ucx_context weft_ucx_context_t;

extern const weft_pt2pt_ops_t weft__ucx_ops;

/* Take a reference on the process's context, creating it (UCP context,
 * worker, address) on first use. Thread-safe. */
weft_status_t weft__ucx_context_get(weft_ucx_context_t **ctx_p);
/* Drop a reference; the last one closes every endpoint (flushing what was
 * sent, within a bounded time) and destroys the worker and the context. */
void weft__ucx_context_put(weft_ucx_context_t *ctx);

/* This process's address (its identity, then the UCP worker address), to
 * publish through the bootstrap. Owned by the context; valid until its last
 * put. */
weft_status_t weft__ucx_worker_address(weft_ucx_context_t *ctx, const void **addr_p, size_t *len_p);

/*
 * The endpoint table of one communicator, for weft__ucx_ops (released with
 * ops.ep_release). `rank` is this process's rank among `size`; rank r's worker
 * address is addr_lens[r] bytes at (const char *)addrs + r * addr_stride. The
 * addresses are copied. Takes its own reference on ctx. Connects nothing.
 */
weft_status_t weft__ucx_ep_create(weft_ucx_context_t *ctx, int rank, int size, const void *addrs,
                                  size_t addr_stride, const size_t *addr_lens, void **ep_p);

/* UCP endpoints this process has created (one per distinct peer reached). */
size_t weft__ucx_context_num_eps(weft_ucx_context_t *ctx);
/* Bit t set: UCX carries weft memory type t without staging (ucp_context_query). */
unsigned weft__ucx_context_memtypes(weft_ucx_context_t *ctx);

/* The transport's settings (ucx_stage.c). */
typedef struct weft_ucx_config {
    size_t stage_frag; /* bytes per fragment of large messages and of staging */
} weft_ucx_config_t;
extern weft_ucx_config_t weft__ucx_config;
extern weft_config_table_t weft__ucx_config_table;

#endif /* WEFT_PT2PT_UCX_H */
