/*
 * The communicator core: a group of ranks with the transport and bootstrap
 * tables chosen once at creation, its health (aborted, failed, a peer gone),
 * failure notices between its ranks, and the deadline of every wait. A
 * communicator is driven by one thread at a time.
 *
 * This is the state that the collectives (coll/) and the public entry points
 * (runtime/) share; it sits below both (docs/layers.md). Fields that belong
 * to a layer above are opaque pointers here, and what core needs from those
 * layers (their health, a dump on failure) it reaches through the upcalls
 * table the creator sets (runtime/comm.c), never by name.
 */
#ifndef WEFT_COMM_LAYER_COMM_H
#define WEFT_COMM_LAYER_COMM_H

#include "bootstrap/bootstrap.h"
#include "pt2pt/pt2pt.h"
#include "comm/node.h"
#include "base/handle.h"

#include <stdatomic.h>

#define WEFT_COMM_NOTICE_TEXT 248       /* bytes of a failure's message kept and forwarded */
/* The sequence number of failure notices (comm/comm.c): collectives skip it,
 * and every number from WEFT_TAG_SEQ_RESERVED up (point-to-point messages
 * and their continuation fragments, pt2pt/pt2pt.h). */
#define WEFT_TAG_SEQ_NOTICE (WEFT_TAG_SEQ_P2P - 1)
#define WEFT_TAG_SEQ_RESERVED WEFT_TAG_SEQ_P2P_CONT

struct weft_comm;

/*
 * What core calls in the layers above, set once at creation (NULL: none).
 * poll: first thing in every health check (waits poll it about every
 * millisecond): serve what was asked from outside (a dump on SIGUSR1).
 * health: the state they keep (shared-memory peers) is sound: WEFT_OK or the
 * error, recorded with weft__error. failed: the communicator has just failed
 * with status (its message in weft_last_error), after the failure notice
 * left: dump what it ran. None may block.
 */
typedef struct weft_comm_upcalls {
    void (*poll)(struct weft_comm *comm);
    weft_status_t (*health)(struct weft_comm *comm);
    void (*failed)(struct weft_comm *comm, weft_status_t status);
} weft_comm_upcalls_t;

struct weft_comm {
    weft_comm_t handle; /* what the application holds (base/handle.h); NULL once destroyed */
    int rank;
    int size;
    uint32_t id;  /* agreed by every member; part of every tag */
    uint32_t seq; /* next operation sequence number */
    const weft_pt2pt_ops_t *p2p;
    void *p2p_ep;
    const weft_bootstrap_ops_t *boot;
    void *boot_ctx;
    const weft_comm_upcalls_t *up;
    /* a communicator split from another (runtime/comm_split.c): that one,
     * and each rank of this one there (valid while p2p_ep is); NULL: a root */
    struct weft_comm *parent;
    const int *parent_rank;
    atomic_int aborted;             /* set by weft_comm_abort, from any thread */
    atomic_int refs;                /* the handle's, plus one per child communicator */
    atomic_int pins;                /* the memory's (runtime/comm.h) */
    int oversubscribed;             /* more ranks on this machine than the cores they may run on
                                       (weft__machine_oversubscribed): yield, never spin */
    int oversubscribed_any;         /* so on some machine of the communicator, alike on every
                                       rank: what the cost model assumes (coll/cost.c) */
    double timeout_s;               /* weft_comm_set_timeout's, seconds; 0: WEFT_TIMEOUT's */
    weft_node_map_t *node;          /* where the ranks run (comm/node.h) */
    /* What the layers above keep per communicator, each in a struct only its
     * folder defines and touches: */
    struct weft_coll_comm *coll;    /* coll/comm_state.h */
    struct weft_runtime_comm *rt;   /* runtime/comm.h */
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

/* The communicators the application holds: handles to live ones. */
extern weft_handle_table_t weft__comm_handles;

/* The communicator of a live handle in *comm_p; otherwise WEFT_ERR_INVALID_ARG
 * naming `what` ("comm is NULL", "comm was destroyed", "comm is not a weft
 * communicator"). */
weft_status_t weft__comm_check(weft_comm_t handle, const char *what, struct weft_comm **comm_p);
/* The communicator of a live handle, or NULL. */
static inline struct weft_comm *weft__comm_of(weft_comm_t handle)
{
    return (struct weft_comm *)weft__handle_get(&weft__comm_handles, handle);
}
/* WEFT_ERR_ABORTED or WEFT_ERR_PEER_FAILED (with the message) when comm can
 * no longer complete operations, the error that broke it when it failed
 * earlier ("communicator failed earlier: ..."), or the error a peer's
 * failure notice carries; WEFT_OK otherwise. Cheap: polled by waits. */
weft_status_t weft__comm_health(struct weft_comm *comm);

/*
 * An operation of comm failed with status (its message in weft_last_error):
 * when the status breaks the communicator (weft__status_breaks_comm: the
 * breaks column of WEFT_STATUS_MAP) the first one is kept, returned by every
 * later operation, and sent on as a failure notice so that the other ranks
 * fail too instead of waiting for their deadline. Other statuses (invalid
 * arguments, no memory) change nothing. Returns status.
 */
weft_status_t weft__comm_fail(struct weft_comm *comm, weft_status_t status);
/* Cancel the failure notices in flight (when the communicator goes). */
void weft__comm_notice_release(struct weft_comm *comm);

/* The rank in the root communicator (the one made by weft_comm_world or
 * weft_comm_init_rank that comm was split from) of comm's rank `rank`; -1
 * when comm's transport is released. */
int weft__comm_world_rank(struct weft_comm *comm, int rank);

/* Cores this process may run on (its affinity mask). */
int weft__usable_cores(void);

/* Deadline for a wait starting now, from WEFT_TIMEOUT. */
uint64_t weft__deadline_ns(void);
/* Deadline for a wait of comm's starting now: its weft_comm_set_timeout, else
 * WEFT_TIMEOUT. */
uint64_t weft__comm_deadline_ns(const struct weft_comm *comm);
/* The same, counted from now_ns (of whichever clock the caller compares it with). */
uint64_t weft__comm_deadline_from(const struct weft_comm *comm, uint64_t now_ns);

#endif /* WEFT_COMM_LAYER_COMM_H */
