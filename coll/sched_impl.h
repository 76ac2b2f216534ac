/*
 * The inside of a schedule, shared by the files of the engine only:
 * coll/sched.c builds the graph (tasks, dependencies, scratch) and keeps the
 * communicator's cache; coll/sched_engine.c starts, progresses, waits and
 * reports. Everything else sees weft_sched_t through coll/sched.h.
 */
#ifndef WEFT_COLL_SCHED_IMPL_H
#define WEFT_COLL_SCHED_IMPL_H

#include "coll/sched.h"

typedef enum { TASK_SEND, TASK_RECV, TASK_REDUCE, TASK_COPY, TASK_NOP, TASK_POLL } task_kind_t;

typedef struct task {
    task_kind_t kind;
    int ndeps;      /* unfinished predecessors */
    int succ_first; /* into sched->succ */
    int succ_count;
    int step;
    const char *phase;
    int peer;
    uint32_t slot;
    int nsrcs;
    void *dst;
    const void *srcs[WEFT_SCHED_MAX_REDUCE_INPUTS];
    size_t size; /* bytes for send/recv/copy, elements for reduce */
    weft_p2p_req_t *req;
    weft_sched_poll_fn poll; /* TASK_POLL: dst is its state */
    void (*poll_cancel)(void *state);
    int completed;
    uint64_t t_start; /* WEFT_TRACE only: when it started and completed (not for nops) */
    uint64_t t_end;
} task_t;

typedef struct edge {
    int before;
    int after;
} edge_t;

typedef struct scratch {
    void *buf;
    size_t cap;
    const weft_device_ops_t *dev; /* buf is memory of this table (the schedule's) */
} scratch_t;

struct weft_sched {
    struct weft_comm *comm;
    const weft_device_ops_t *dev;
    weft_op_desc_t desc;
    uint32_t seq;
    weft_status_t status; /* sticky: first error */
    int started;
    const char *phase;
    int step;

    task_t *tasks;
    int ntasks;
    int cap_tasks;
    edge_t *edges;
    int nedges;
    int cap_edges;
    int *succ;
    int cap_succ;

    int *ready; /* stack of task indices */
    int nready;
    int *active; /* posted send/recv */
    int nactive;
    int cap_index; /* of ready and active */
    int ndone;

    scratch_t *scratch; /* blocks kept across reuse; the first nscratch are in use */
    int nscratch;
    int cap_scratch;

    uint64_t start_ns;    /* weft__time_ns at the start, for the observers (0 when none is on) */
    uint64_t begun_ns;    /* weft__time_coarse_ns at the start: where the deadline counts from */
    uint64_t deadline_ns; /* of weft__time_coarse_ns */
    struct weft_sched *next_active; /* the communicator's started, unfinished schedules */
    int linked;
    int detached; /* nobody waits: destroy on completion */
    int npoll;    /* TASK_POLL tasks in the graph */
    int npoll_active;
    const int *map; /* weft__sched_map */
    int map_size;
    long record; /* flight recorder handle (-1: none) */
    /* a host-staged operation's host copy (weft__sched_stage_out): copied out by stage_dev at
     * completion, then given back; given back unused when it fails or is destroyed first */
    const weft_device_ops_t *stage_dev;
    void *stage;
    void *stage_dst;
    const void *stage_from;
    size_t stage_bytes;
};

/* Take s off its communicator's list of started, unfinished schedules. */
void weft__sched_unlink_active(weft_sched_t *s);
/* Give back a host-staged operation's host copy, if s still holds it (after its copy out, or
 * unused where s failed or ends unfinished). */
static inline void weft__sched_stage_drop(weft_sched_t *s)
{
    if (s->stage != NULL) {
        weft__device_bounce_put(s->stage_dev, s->stage);
        s->stage = NULL;
    }
}
/* Cancel the posted messages of s; function tasks undo what they reserved. */
void weft__sched_cancel_active(weft_sched_t *s);
/* Tell the flight recorder that s ended (once). */
void weft__sched_record_end(weft_sched_t *s);
/* Forget comm in this thread's list of communicators with unfinished operations. */
void weft__sched_busy_remove(struct weft_comm *comm);

#endif /* WEFT_COLL_SCHED_IMPL_H */
