/*
 * Communicators: a group of ranks with the transport, bootstrap and device
 * tables chosen once at creation. A communicator is driven by one thread at
 * a time.
 */
#ifndef WEFT_RUNTIME_COMM_H
#define WEFT_RUNTIME_COMM_H

#include "bootstrap/bootstrap.h"
#include "pt2pt/pt2pt.h"
#include "runtime/node.h"

#include <stdatomic.h>

#define WEFT_COMM_MAGIC 0x77656674u     /* "weft" */
#define WEFT_COMM_DESTROYED 0x64656164u /* "dead" */
#define WEFT_COMM_NOTICE_TEXT 248       /* bytes of a failure's message kept and forwarded */
/* The sequence number of failure notices (runtime/comm.c): collectives skip it. */
#define WEFT_TAG_SEQ_NOTICE (WEFT_TAG_SEQ_P2P - 1)

struct weft_comm {
    uint32_t magic;
    int rank;
    int size;
    uint32_t id;  /* agreed by every member; part of every tag */
    uint32_t seq; /* next operation sequence number */
    const weft_pt2pt_ops_t *p2p;
    void *p2p_ep;
    const weft_bootstrap_ops_t *boot;
    void *boot_ctx;
    atomic_int aborted;             /* set by weft_comm_abort, from any thread */
    atomic_int refs;                /* the handle's, plus one per child communicator */
    struct weft_sched *sched_cache; /* last finished schedule, reused (coll/sched.c) */
    struct weft_sched *active;      /* started, unfinished schedules (coll/sched.c) */
    int oversubscribed;             /* more ranks on this host than cores: yield, never spin */
    int cost_measured;              /* cost_* hold agreed measurements (coll/cost.h) */
    double cost_alpha;
    double cost_beta;
    double cost_gamma;
    struct weft_comm_choice { /* the last algorithm chosen per collective (coll/select.c) */
        const void *algo;
        size_t bytes;
        int measured;
    } last_choice[16];
    weft_node_map_t *node;            /* where the ranks run (runtime/node.h) */
    struct weft_shm *shm;             /* this node's segment, or NULL (coll/shm/shm.h) */
    struct weft_comm *next_destroyed; /* tombstone list, freed by weft_finalize */
    atomic_int enq_pending;           /* enqueued operations not finished (runtime/enqueue.c) */
    weft_status_t enq_error;          /* the first failure of one, for the next call */
    char enq_msg[512];
    struct weft_recorder *recorder;   /* the last operations (coll/diag/record.h) */
    struct weft_obs *obs;             /* trace and counters (coll/diag/obs.h) */
    /* The first failure that broke the communicator (weft__comm_fail): every
     * later operation returns it. */
    weft_status_t failed;
    char failed_msg[WEFT_COMM_NOTICE_TEXT];
    /* Failure notices: each rank listens to its left neighbour and tells its
     * right one once it fails, so a failure seen by one rank reaches every
     * rank (each forwards once) and no rank waits for the deadline. */
    int notice_posted;
    struct weft_p2p_req *notice_recv;
    struct weft_p2p_req *notice_send;
    struct weft_comm_notice {
        int32_t status;
        int32_t origin; /* the rank that saw the failure first */
        char text[WEFT_COMM_NOTICE_TEXT];
    } notice_in, notice_out;
};

/* Takes ownership of ep and boot_ctx (released by weft_comm_destroy). */
weft_status_t weft__comm_create(int rank, int size, uint32_t id, const weft_pt2pt_ops_t *p2p,
                                void *p2p_ep, const weft_bootstrap_ops_t *boot, void *boot_ctx,
                                weft_comm_t *comm_p);
/* Collective over comm (every rank calls it once, right after creation):
 * takes ownership of map, then sets up the node's shared memory. */
weft_status_t weft__comm_node_setup(weft_comm_t comm, weft_node_map_t *map);

/* WEFT_OK when comm is a live communicator; otherwise an error naming `what`. */
weft_status_t weft__comm_check(weft_comm_t comm, const char *what);
/* References held by communicators split or duplicated from comm: its
 * transport and bootstrap stay alive until the last one is dropped. */
void weft__comm_get(weft_comm_t comm);
void weft__comm_put(weft_comm_t comm);
/* Free destroyed communicators' tombstones (weft_finalize). */
void weft__comm_release_tombstones(void);

/* WEFT_ERR_ABORTED or WEFT_ERR_PEER_FAILED (with the message) when comm can
 * no longer complete operations, the error that broke it when it failed
 * earlier ("communicator failed earlier: ..."), or the error a peer's
 * failure notice carries; WEFT_OK otherwise. Cheap: polled by waits. */
weft_status_t weft__comm_health(weft_comm_t comm);

/*
 * An operation of comm failed with status (its message in weft_last_error):
 * when the status breaks the communicator (timeout, mismatch, peer failed,
 * aborted, transport, internal) the first one is kept, returned by every
 * later operation, and sent on as a failure notice so that the other ranks
 * fail too instead of waiting for their deadline. Other statuses (invalid
 * arguments, no memory) change nothing. Returns status.
 */
weft_status_t weft__comm_fail(weft_comm_t comm, weft_status_t status);

/* Cores this process may run on (its affinity mask). */
int weft__usable_cores(void);

/* Deadline for a wait starting now, from WEFT_TIMEOUT. */
uint64_t weft__deadline_ns(void);

#endif /* WEFT_RUNTIME_COMM_H */
