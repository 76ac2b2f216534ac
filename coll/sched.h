/*
 * Schedules: an operation is a graph of tasks (send, recv, reduce, copy,
 * nop) with dependency counts; completing a task releases the tasks that
 * wait on it. Algorithms only build graphs; this engine runs them. The
 * engine is re-entrant: weft__sched_progress may be called any number of
 * times and does what can be done without blocking.
 *
 * Building: every builder returns the new task's index, or -1 once the
 * schedule has failed (the first error sticks, later builder calls do
 * nothing, and weft__sched_start returns it). weft__sched_dep ignores -1, so
 * algorithm code needs no error check per call.
 *
 * Buffers named in tasks must stay valid until the schedule completes or is
 * destroyed; scratch memory from weft__sched_scratch lives as long as the
 * schedule. Destroying a schedule cancels its outstanding messages.
 *
 * Threading: one thread builds and drives a schedule.
 */
#ifndef WEFT_COLL_SCHED_H
#define WEFT_COLL_SCHED_H

#include "coll/diag/sig.h"
#include "device/device.h"
#include "comm/comm.h"

#define WEFT_SCHED_MAX_REDUCE_INPUTS 8

/* What the operation is: for tags and for diagnostics. */
typedef struct weft_op_desc {
    const char *coll; /* "allreduce" */
    const char *algo; /* "ring" */
    size_t count;
    size_t bytes; /* the operation's size as nccl-tests counts it (weft__coll_bytes) */
    weft_dtype_t dtype;
    weft_op_t op;
    int p2p;       /* point-to-point: tagged with WEFT_TAG_SEQ_P2P, takes no sequence number */
    void *avg_buf; /* WEFT_AVG: divide these avg_count elements by avg_divisor at the end */
    size_t avg_count;
    size_t avg_divisor;
    weft_coll_sig_t sig; /* what every rank must agree on (kind 0 for point-to-point) */
    uint32_t sig_hash;   /* weft__sig_hash(&sig) */
    const char *form;    /* who runs it, and how (weft__coll_form): "call" when unset */
} weft_op_desc_t;

typedef struct weft_sched weft_sched_t;

/* A collective takes the communicator's next sequence number (all ranks
 * create their collective schedules for one communicator in the same order);
 * a point-to-point schedule uses WEFT_TAG_SEQ_P2P. */
weft_status_t weft__sched_create(struct weft_comm *comm, const weft_op_desc_t *desc,
                                 const weft_device_ops_t *dev, weft_sched_t **sched_p);
/* The next collective sequence number of comm (weft__sched_create takes
 * one; an operation run without a schedule takes one too, so that every
 * rank numbers the same operations alike whichever path they take). */
uint32_t weft__comm_take_seq(struct weft_comm *comm);
/* Cancels what is outstanding; the communicator may keep the memory for its
 * next schedule. */
void weft__sched_destroy(weft_sched_t *s);
/* Free the schedule a communicator keeps (when the communicator goes). */
void weft__sched_cache_release(struct weft_comm *comm);

/* Execute the started schedule's ready tasks now (post their messages)
 * without testing any: WEFT_OK, or the failure to post that failed it. */
weft_status_t weft__sched_post(weft_sched_t *s);
/* Instead of weft__sched_post, for a started schedule of one send or receive whose message the
 * caller posted itself on the communicator's transport (the blocking point-to-point calls'
 * direct path, runtime/p2p.c): req, still in flight, becomes the task's request, waited for as
 * if the schedule had posted it; req NULL: the message failed with status (the transport's
 * error set), which fails the schedule as a failure found by its progress would. */
weft_status_t weft__sched_adopt(weft_sched_t *s, weft_p2p_req_t *req, weft_status_t status);
/* The operation's sequence number (WEFT_TAG_SEQ_P2P for point-to-point). */
uint32_t weft__sched_seq(const weft_sched_t *s);
/* A finished point-to-point receive: the rank its message came from (the
 * peer it was posted for, or the sender when that was WEFT_P2P_ANY); -1 for
 * any other schedule and before a message matched. */
int weft__sched_source(const weft_sched_t *s);
/* The sequence number the next collective of comm will take. */
uint32_t weft__comm_peek_seq(const struct weft_comm *comm);
/* The flight recorder's handle of the operation (coll/diag/record.h): its
 * end is recorded when the schedule completes or fails. */
void weft__sched_record(weft_sched_t *s, long handle);
/* Where an unfinished schedule is: "<phase> step <k>, waiting for rank(s)
 * <list>" into buf. */
void weft__sched_where(const weft_sched_t *s, char *buf, size_t len);
/* The same, as fields (the flight recorder's JSON dump): the earliest step
 * with posted messages, tasks done of all, and up to max_peers distinct
 * ranks it has messages posted to or from (sending[i]: only a send). */
typedef struct weft_sched_pos {
    const char *phase;
    int step;
    int ndone;
    int ntasks;
    int npeers;
} weft_sched_pos_t;
void weft__sched_pos(const weft_sched_t *s, weft_sched_pos_t *pos, int *peers, int *sending,
                     int max_peers);

/* Diagnostic label of the tasks added from now on ("step" of the algorithm). */
void weft__sched_step(weft_sched_t *s, const char *phase, int step);

int weft__sched_send(weft_sched_t *s, int peer, uint32_t slot, const void *buf, size_t bytes);
int weft__sched_recv(weft_sched_t *s, int peer, uint32_t slot, void *buf, size_t bytes);
/* dst = srcs[0] op ... op srcs[n-1] with the schedule's dtype and op. */
int weft__sched_reduce(weft_sched_t *s, void *dst, const void *const *srcs, int nsrcs,
                       size_t count);
int weft__sched_copy(weft_sched_t *s, void *dst, const void *src, size_t bytes);
int weft__sched_nop(weft_sched_t *s);
/*
 * A task driven by a function instead of a message: once its dependencies
 * are done, fn(state, &peer) is called on every progress round until it
 * returns something other than WEFT_INPROGRESS (WEFT_OK: the task is done;
 * an error fails the schedule). It must not block. While it waits it sets
 * *peer_p to the rank it waits for (named in timeout reports). If the
 * schedule ends before the task is done (failure, cancellation), cancel(state)
 * is called once (NULL: nothing to undo). Waiting ranks never sleep in the
 * transport while such a task runs: they poll, yielding the core.
 */
typedef weft_status_t (*weft_sched_poll_fn)(void *state, int *peer_p);
int weft__sched_poll(weft_sched_t *s, weft_sched_poll_fn fn, void (*cancel)(void *state),
                     void *state);
/*
 * Build on a group of the communicator's ranks: while a map is set, the
 * peers of send and receive tasks added are group ranks, translated with
 * map[peer] (the group has map_size ranks). NULL restores communicator
 * ranks. Lets hierarchical algorithms run any algorithm on a rail.
 */
void weft__sched_map(weft_sched_t *s, const int *map, int map_size);
/*
 * Sub-graphs: weft__sched_mark returns where the next task will be; after
 * adding tasks, weft__sched_enclose(s, mark, after) makes every task added
 * since the mark that has no dependency wait for `after` (when >= 0), and
 * returns a task that completes when every task added since the mark has.
 */
int weft__sched_mark(const weft_sched_t *s);
int weft__sched_enclose(weft_sched_t *s, int mark, int after);
/* One exchange step: after task `after`, send sbytes of sbuf to rank `to` and
 * receive rbytes into rbuf from rank `from`, both with `slot`. Returns a
 * task that completes when both have (the next step depends on it). */
int weft__sched_exchange(weft_sched_t *s, int after, uint32_t slot, int to, const void *sbuf,
                         size_t sbytes, int from, void *rbuf, size_t rbytes);
/* `after` starts only once `before` has completed. -1 on either side: no-op. */
void weft__sched_dep(weft_sched_t *s, int before, int after);
/* Scratch memory owned by the schedule (NULL once the schedule has failed). */
void *weft__sched_scratch(weft_sched_t *s, size_t bytes);
/* Record a failure found while building (returns status). */
weft_status_t weft__sched_fail(weft_sched_t *s, weft_status_t status);

weft_status_t weft__sched_start(weft_sched_t *s);
/* Advance; *done_p = 1 once every task completed or the schedule failed.
 * Returns the schedule's status (WEFT_INPROGRESS while running). */
weft_status_t weft__sched_progress(weft_sched_t *s, int *done_p);
/*
 * A started schedule is one of its communicator's unfinished operations
 * until it completes. Waiting for one (wait, test) progresses all of them,
 * and those of every other communicator this thread has unfinished
 * operations on, since a peer may need this rank's part of another
 * operation first.
 *
 * weft__sched_wait: until s completes, fails, or its deadline (WEFT_TIMEOUT
 * from its start) passes: then WEFT_ERR_TIMEOUT, with a log line naming the
 * operation, its step and the peers it still waits for. An aborted
 * communicator or a dead peer fails every unfinished schedule of it.
 * weft__sched_test: the same without blocking; 1 when s is finished.
 * weft__sched_detach: nobody will wait for s; it is destroyed when it
 * finishes (or fails, or its deadline passes during a later progress).
 * weft__comm_progress: one round over the communicator's unfinished
 * schedules; returns how many tasks (and schedules) completed.
 */
weft_status_t weft__sched_wait(weft_sched_t *s);
/* 1 while this thread has started operations that are not finished (on
 * any communicator). */
int weft__thread_busy(void);
int weft__sched_test(weft_sched_t *s, weft_status_t *status_p);
void weft__sched_detach(weft_sched_t *s);
int weft__comm_progress(struct weft_comm *comm);
/* start + wait */
weft_status_t weft__sched_run(weft_sched_t *s);
/* A schedule built on a host copy of device buffers (stage, from
 * weft__device_bounce_get of dev): when it completes, bytes are copied from
 * `from` (in the stage) to dst with dev->copy, then the stage is given back;
 * a schedule that fails, or is destroyed unfinished, gives it back only.
 * Call before weft__sched_start (it may complete at once). */
void weft__sched_stage_out(weft_sched_t *s, const weft_device_ops_t *dev, void *stage, void *dst,
                           const void *from, size_t bytes);
/* Waits for comm's operations whose requests were freed unfinished
 * (detached), as a blocking collective does before it returns: their
 * buffers are final on this rank once it returned. The first failure. */
weft_status_t weft__sched_wait_freed(struct weft_comm *comm);

size_t weft__sched_num_tasks(const weft_sched_t *s);
/* When s started (weft__time_ns; 0 unless an observer was on then), for the tracer. */
uint64_t weft__sched_start_ns(const weft_sched_t *s);
/* Task `index` of s, for the tracer (coll/diag/trace.c): its step label,
 * peer (-1: none), bytes it sends or receives, and when it started and
 * completed (weft__time_ns; 0 unless WEFT_TRACE is set and it did; nops
 * are not timed). */
typedef struct weft_sched_task_info {
    const char *phase;
    int step;
    int peer;
    size_t send_bytes;
    size_t recv_bytes;
    uint64_t t_start;
    uint64_t t_end;
} weft_sched_task_info_t;
void weft__sched_task_info(const weft_sched_t *s, int index, weft_sched_task_info_t *info);
struct weft_comm *weft__sched_comm(const weft_sched_t *s);
/* The schedule's description (dtype, op, algorithm) and device. */
const weft_op_desc_t *weft__sched_desc(const weft_sched_t *s);
const weft_device_ops_t *weft__sched_dev(const weft_sched_t *s);

#endif /* WEFT_COLL_SCHED_H */
