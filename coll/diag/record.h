/*
 * Flight recorder: each communicator keeps its last WEFT_RECORD_OPS
 * collective operations (collective, sequence number, count, dtype, op,
 * root, algorithm, start and end time, state), so that after a hang or a
 * failure every rank can say what it ran, what it is stuck in and since
 * when. Dumped one line per operation by weft_comm_dump, and to the log
 * (error level) when the communicator fails with a timeout or a peer
 * failure (comm/comm.c, through coll/upcalls.c).
 *
 * Times are CLOCK_MONOTONIC_COARSE (the kernel tick, 1-4 ms): cheap to
 * read, and comparable between the processes of one host.
 *
 * Cost: one slot written when an operation starts and when it ends, two
 * reads of the coarse clock (no allocation after the first operation, no
 * lock). Threading: the thread
 * that drives the communicator records and dumps.
 */
#ifndef WEFT_COLL_DIAG_RECORD_H
#define WEFT_COLL_DIAG_RECORD_H

#include "coll/sched.h"

#include <stdio.h>

typedef enum {
    WEFT_RECORD_RUNNING,
    WEFT_RECORD_DONE,
    WEFT_RECORD_FAILED,
} weft_record_state_t;

/* Record the start of an operation of comm described by desc (seq: its
 * sequence number, taken from comm->seq just before or to be taken next;
 * root: -1 unless rooted). Returns a handle for
 * weft__record_end (-1: not recorded). */
long weft__record_start(struct weft_comm *comm, const weft_op_desc_t *desc, uint32_t seq, int root);
/* While it runs on a schedule, s tells where it is (NULL: it runs without
 * one). */
void weft__record_sched(struct weft_comm *comm, long handle, weft_sched_t *s);
/* The operation ended with status (its message in weft_last_error when it
 * failed). A handle whose slot was reused since is ignored. */
void weft__record_end(struct weft_comm *comm, long handle, weft_status_t status);
/* The same for an operation that ended within a microsecond or two of its start, without waiting
 * (weft__shm_run): its end is its start, within the clock's resolution, and the clock is not
 * read again. */
void weft__record_end_quick(struct weft_comm *comm, long handle, weft_status_t status);
/* Forget the last operation recorded (handle), which did not run. */
void weft__record_drop(struct weft_comm *comm, long handle);
/* One line per recorded operation, oldest first; log: through the log at
 * error level instead of to out. */
void weft__record_dump(struct weft_comm *comm, FILE *out, int log);
/* Free comm's recorder. */
void weft__record_release(struct weft_comm *comm);

/* One recorded operation, as the JSON dump (coll/diag/dump.h) reads it.
 * Valid during the weft__record_visit callback only. */
#define WEFT_RECORD_PEERS 64 /* ranks a running operation's "where" names at most */
typedef struct weft_record_view {
    uint32_t seq;    /* the tag's sequence number: it wraps */
    uint64_t serial; /* the operation's number on the communicator: it does not */
    const char *coll;
    const char *algo;
    size_t count;
    weft_dtype_t dtype;
    weft_op_t op;
    int reducing; /* the op is part of the operation */
    int root;     /* -1: not a rooted collective */
    uint64_t start_ns;
    uint64_t end_ns; /* 0 while running */
    weft_record_state_t state;
    weft_status_t status;
    const char *note; /* why it failed ("" otherwise) */
    int has_pos;      /* running on a schedule: pos and peers say where */
    weft_sched_pos_t pos;
    int peers[WEFT_RECORD_PEERS];
    int sending[WEFT_RECORD_PEERS];
} weft_record_view_t;

/* Call fn for every recorded operation of comm, oldest first; returns how
 * many operations were recorded in all (older ones than those visited were
 * overwritten). Same thread as the recording. */
long weft__record_visit(struct weft_comm *comm, void (*fn)(const weft_record_view_t *v, void *arg),
                        void *arg);
/* The recorder's clock (CLOCK_MONOTONIC_COARSE), in nanoseconds. */
uint64_t weft__record_now_ns(void);
/* A word the dump keeps per communicator (the last dump request served,
 * coll/diag/dump.c); NULL when comm has recorded nothing yet. */
unsigned *weft__record_mark(struct weft_comm *comm);
/* SIGUSR1s received so far (coll/diag/dump.c): a new recorder starts from it, and a collective's
 * start polls for a dump at once while it is not 0 (coll/select.c entry_health). */
unsigned weft__dump_requests(void);
/* The reason of a dump to write again once no operation of comm runs
 * (coll/diag/dump.c; weft__record_end calls weft__dump_ended while it is
 * set); NULL when comm has recorded nothing yet. */
const char **weft__record_pending(struct weft_comm *comm);
/* Recorded operations of comm still running. */
int weft__record_running(struct weft_comm *comm);

#endif /* WEFT_COLL_DIAG_RECORD_H */
