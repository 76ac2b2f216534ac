/*
 * What the collective layer keeps per communicator (comm->coll): only coll/
 * reads and writes it (runtime/ sets the cost model's measurements when it
 * makes a communicator). Allocated with the communicator; its contents are
 * released when the communicator's transport goes (weft__coll_comm_release),
 * the struct itself with the communicator's memory (weft__coll_comm_free).
 */
#ifndef WEFT_COLL_COMM_STATE_H
#define WEFT_COLL_COMM_STATE_H

#include "coll/sched.h"
#include "comm/comm.h"

struct weft_coll_comm {
    struct weft_sched *sched_cache; /* last finished schedule, reused (coll/sched.c) */
    struct weft_sched *active;      /* started, unfinished schedules (coll/sched_engine.c) */
    int cost_measured;              /* cost_* hold agreed measurements (coll/cost.h) */
    int reproducible; /* reductions by the ordered rows only: WEFT_REPRODUCIBLE at creation, a
                       * parent's, or weft_comm_set_reproducible (coll/cost.c) */
    double cost_alpha;
    double cost_beta;
    double cost_gamma;
    double cost_shm_alpha;    /* one flag handoff through the segment (0: not measured) */
    struct weft_comm_choice { /* the last algorithm chosen per collective (coll/select.c) */
        const void *algo;
        size_t bytes;
        int measured;
        weft_coll_sig_t sig; /* the last call's signature and its hash (0: none yet) */
        uint32_t sig_hash;
    } last_choice[16];
    /* per collective (weft_coll_kind_t), the blocking call whose data fits the control or wide
     * lines, as the last one of its kind ran that way (coll/select.c weft__coll_line): its
     * description, valid while valid is 1 and cost_measured is measured; line_runs counts the
     * calls that took a line path (for tests) */
    struct weft_coll_line {
        int valid, measured;
        weft_op_desc_t desc;
        uint64_t runs; /* of this kind (for tests) */
        /* the last call that ran here, with its buffers as the caller passed them (sendbuf,
         * recvbuf) and as it ran (src, dst), checked as host memory while the device layer's
         * host epoch was epoch (0: none kept): weft__coll_line_again */
        const void *sendbuf, *recvbuf, *src;
        void *dst;
        size_t esize;
        uint64_t epoch;
    } line[16];
    uint64_t line_runs;
    uint64_t line_again; /* of them, the calls whose checks were skipped (weft__coll_line_again) */
    /* empty polls of this communicator's waits (coll/sched_engine.c, coll/shm/ops.c): spent
     * busy-polling, and followed by a yield of the core (for tests) */
    uint64_t busy_polls, yield_polls;
    int at_entry; /* the health check of a collective's start runs (coll/select.c prepare) */
    uint64_t entries; /* collectives started (coll/select.c entry_health: every 16th polls all) */
    /* the last shared-memory barrier's sequence number, once there was one (coll/shm/ops.c
     * barrier_release) */
    int barrier_seen;
    uint32_t barrier_seq;
    struct weft_shm *shm;           /* this node's segment, or NULL (coll/shm/shm.h) */
    struct weft_recorder *recorder; /* the last operations (coll/diag/record.h) */
    struct weft_obs *obs;           /* trace and counters (coll/diag/obs.h) */
};

/* The reproducible mode of comm's operations started from now on (the last
 * choices, made in the other mode, are forgotten). */
void weft__coll_set_reproducible(struct weft_comm *comm, int on);

/* comm->coll for a new communicator: WEFT_ERR_NO_MEMORY when it cannot. */
weft_status_t weft__coll_comm_create(struct weft_comm *comm);
/* Release what comm->coll holds (schedules, shared memory, recorder, trace). */
void weft__coll_comm_release(struct weft_comm *comm);
/* Free comm->coll (with the communicator's memory). */
void weft__coll_comm_free(struct weft_comm *comm);

#endif /* WEFT_COLL_COMM_STATE_H */
