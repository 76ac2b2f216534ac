/*
 * Observation of finished operations: traces (WEFT_TRACE, coll/diag/trace.c)
 * and counters (WEFT_STATS, coll/diag/stats.c). Both are off by default.
 *
 * Hooks: the schedule engine calls weft__obs_sched_end once per collective
 * schedule that ran (completed or failed), the shared-memory fast path
 * (coll/select.c) weft__obs_op_end once per operation it ran. Each call
 * site tests weft__obs_flags first, so that with both off an operation
 * costs one load and one never-taken branch at its end, and each task of a
 * schedule one more at its start and one at its end (the task times the
 * trace's step events need, read only when WEFT_TRACE is set).
 *
 * Ownership: a communicator's observation state (comm->obs) is created at
 * its first observed operation and freed with the communicator
 * (weft__obs_comm_release, from weft__comm_put). Communicators split or
 * duplicated from one share its trace (weft__obs_comm_inherit): one file per
 * rank of a job, named after the rank in the communicator the job started
 * with.
 *
 * Threading: a communicator is driven by one thread at a time; a trace
 * shared by several communicators takes a lock per event. weft_stats reads
 * the counters without a lock: call it while no operation of that
 * communicator is running (after a stream synchronize for _enqueue forms).
 */
#ifndef WEFT_COLL_DIAG_OBS_H
#define WEFT_COLL_DIAG_OBS_H

#include "coll/sched.h"
#include "base/config.h"

enum {
    WEFT_OBS_TRACE = 1, /* WEFT_TRACE names a file */
    WEFT_OBS_STATS = 2, /* WEFT_STATS=1 */
};

/* Set by weft__obs_init (weft_init), 0 after weft_finalize. */
extern int weft__obs_flags;

typedef struct weft_obs_config {
    char *trace;         /* WEFT_TRACE: file name pattern ("": off) */
    size_t trace_events; /* WEFT_TRACE_EVENTS: events a rank buffers */
    int stats;           /* WEFT_STATS */
} weft_obs_config_t;

extern weft_obs_config_t weft__obs_config;
extern weft_config_table_t weft__obs_config_table;

/* After the configuration is loaded / before it is released. Finalize
 * writes every trace still open. */
void weft__obs_init(void);
void weft__obs_finalize(void);

/* A collective schedule ended (s's status says how). */
void weft__obs_sched_end(weft_sched_t *s, weft_status_t status);
/* An operation run without a schedule ended: started at t0_ns
 * (weft__time_ns), sequence number seq. */
void weft__obs_op_end(struct weft_comm *comm, const weft_op_desc_t *desc, uint32_t seq, uint64_t t0_ns,
                      weft_status_t status);

/* child was split or duplicated from parent: it writes to parent's trace. */
void weft__obs_comm_inherit(struct weft_comm *child, struct weft_comm *parent);
/* comm failed: write its trace now (it is written again, complete, when
 * the communicator goes or at weft_finalize). */
void weft__obs_comm_failed(struct weft_comm *comm);
/* comm goes: its counters are freed, its trace written once no other
 * communicator shares it. */
void weft__obs_comm_release(struct weft_comm *comm);

/* --- between obs.c, trace.c and stats.c --- */

struct weft_trace;
struct weft_stats_table;

struct weft_obs {
    struct weft_trace *trace;       /* shared with split children; NULL: not traced */
    int trace_comm;                 /* this communicator's number in the trace (its tracks) */
    struct weft_stats_table *stats; /* NULL: not counted */
};

/* One finished operation, as both consumers see it. */
typedef struct weft_obs_op {
    struct weft_comm *comm;
    const weft_op_desc_t *desc;
    weft_sched_t *sched; /* NULL: it ran without a schedule */
    uint32_t seq;
    uint64_t t0_ns;
    uint64_t t1_ns;
    weft_status_t status;
} weft_obs_op_t;

/* trace.c */
struct weft_trace *weft__trace_open(struct weft_comm *comm);
/* A new communicator's number in trace (its tracks). */
int weft__trace_add_comm(struct weft_trace *t, struct weft_comm *comm);
void weft__trace_ref(struct weft_trace *t);
void weft__trace_put(struct weft_trace *t); /* the last reference writes and frees */
void weft__trace_op(struct weft_trace *t, int trace_comm, const weft_obs_op_t *op);
void weft__trace_write(struct weft_trace *t);
/* Write every open trace (weft_finalize). */
void weft__trace_write_all(void);

/* stats.c */
struct weft_stats_table *weft__stats_create(void);
void weft__stats_free(struct weft_stats_table *st);
void weft__stats_op(struct weft_stats_table *st, const weft_obs_op_t *op);

#endif /* WEFT_COLL_DIAG_OBS_H */
