/*
 * Stream-ordered operations: the queue and weft's progress thread
 * (contract in enqueue.h).
 *
 *   user thread                 stream                      progress thread
 *   enqueue(op) ------------->  ... earlier work ...
 *                               write flag = 1  ----------> flag 1 and op is its comm's
 *                                                           next: start (nonblocking)
 *                               wait flag >= 2              test ... test: done
 *                               (later work held)  <------- write flag = 2
 *                               ... later work ...
 *
 * A collective among the ranks of one node, on a stream whose device runs
 * weft's code (emu; WEFT_DEVICE_TASK), is one device task instead: the
 * stream runs it itself, in its order, with no flag and no progress-thread
 * hop, and its copies and reductions are the device's own (inline). The
 * task waits until its communicator's earlier operations have finished and
 * stays in the queue while it runs, so the communicator's operations still
 * run one after another in enqueue order whichever thread runs them.
 *
 * A point-to-point operation is a list of sends and receives posted at once
 * when its stream gets there: one, or those a thread held between
 * weft_group_start and weft_group_end for one communicator and stream.
 */
#include "runtime/enqueue.h"
#include "runtime/comm.h"

#include "coll/coll.h"
#include "comm/comm.h"
#include "device/device.h"
#include "runtime/graph.h"
#include "runtime/init.h"
#include "runtime/p2p.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Sleep of the progress thread between looks at flags that are not set, where some stream
 * cannot ring the doorbell (device.h, stream_ring); and its longest sleep on the doorbell where
 * every stream rings (a bound only: a ring ends it). */
#define FLAG_NAP_NS 20000
#define DOORBELL_SLEEP_NS 1000000
/* Stream errors kept until weft_stream_synchronize takes them. */
#define MAX_STREAM_ERRORS 64

/* OP_TASK: a device task (the stream runs it); the progress thread leaves it alone */
typedef enum { OP_QUEUED, OP_RUNNING, OP_TASK } op_state_t;

/* A send or receive of a point-to-point operation. */
typedef struct p2p_part {
    weft_p2p_part_t p;
    weft_sched_t *sched; /* NULL once done (or for 0 bytes) */
} p2p_part_t;

typedef struct enq_op {
    struct weft_comm *comm;
    void *stream;
    const weft_device_ops_t *sdev; /* the stream's table */
    uint32_t *flag;
    op_state_t state;
    int is_p2p;
    weft_coll_args_t args;
    size_t *arrays;      /* copies of args' count/displacement arrays */
    p2p_part_t *parts;   /* point-to-point: posted together (one, or a group's) */
    int nparts, cap_parts;
    weft_status_t failed; /* point-to-point: the first part that failed */
    void *stage;          /* host-staged (stage_plan): pinned host memory, input then result */
    void *stage_dst;      /* host-staged: the caller's result buffer */
    void *stage_out;      /* host-staged: the result in the stage */
    size_t stage_bytes;   /* host-staged: bytes of the result copied out */
    int stage_queued;     /* the stream may use stage: given back with the flag */
    int rings;            /* the stream rings the doorbell after writing flag 1 */
    const char *call;
    weft_sched_t *sched;
    struct enq_op *next;
} enq_op_t;

typedef struct stream_error {
    void *stream;
    weft_status_t status;
    char msg[512];
} stream_error_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static enq_op_t *head, *tail;
static pthread_t thread;
static int thread_started, stopping;
static stream_error_t errors[MAX_STREAM_ERRORS];
static int nerrors;
static int nhost; /* queued operations the progress thread runs (not tasks) */
static atomic_ulong tasks_run;
static atomic_ulong host_staged_ops;
static atomic_ulong waits_napped, waits_slept, waits_rung;

/* Flags of finished operations, freed once their stream wrote 3 after its
 * wait: before that the stream may still read them. */
typedef struct retired {
    uint32_t *flag;
    const weft_device_ops_t *sdev;
    void *stage; /* a host-staged operation's buffer, given back with the flag */
    struct retired *next;
} retired_t;
static retired_t *retired;

/* The calling thread's open group: its depth, and its held operations, one per communicator
 * and stream, in order of their first part. */
static _Thread_local int group_depth;
static _Thread_local enq_op_t *group_head, *group_tail;

/* Lock held. */
static void reap_flags(void)
{
    for (retired_t **r = &retired; *r != NULL;) {
        retired_t *x = *r;

        if (weft__device_flag_get(x->flag) == 3) {
            *r = x->next;
            weft__device_flag_free(x->sdev, x->flag);
            if (x->stage != NULL) {
                weft__device_bounce_put(x->sdev, x->stage);
            }
            free(x);
        } else {
            r = &x->next;
        }
    }
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};

    nanosleep(&ts, NULL);
}

/* Keep the first error of each stream; the comm keeps its own. Lock held. */
static void record_error(enq_op_t *op, weft_status_t status)
{
    const char *msg = weft_last_error();
    struct weft_comm *comm = op->comm;
    int i;

    for (i = 0; i < nerrors && errors[i].stream != op->stream; i++) {
    }
    if (i == nerrors && nerrors < MAX_STREAM_ERRORS) {
        errors[nerrors++] = (stream_error_t){.stream = op->stream, .status = status};
        snprintf(errors[i].msg, sizeof(errors[i].msg), "%s: %s", op->call, msg);
    }
    if (comm->rt->enq_error == WEFT_OK) {
        comm->rt->enq_error = status;
        snprintf(comm->rt->enq_msg, sizeof(comm->rt->enq_msg), "%s: %s", op->call, msg);
    }
    weft__log_error("%s on stream %p failed: %s", op->call, op->stream, msg);
}

/* The tables whose thread_bind the progress thread called (bits by memtype; its own). */
static unsigned bound;

static weft_status_t op_start(enq_op_t *op)
{
    weft_status_t status;

    /* the progress thread drives the operation (UCX included) with the stream's context
     * current, made so once */
    if (!(bound & (1u << op->sdev->memtype)) && op->sdev->thread_bind != NULL) {
        op->sdev->thread_bind();
        bound |= 1u << op->sdev->memtype;
    }
    if (op->is_p2p) {
        /* every part posted at once: a group's sends and receives never wait for each other */
        status = WEFT_OK;
        for (int i = 0; i < op->nparts && status == WEFT_OK; i++) {
            p2p_part_t *pt = &op->parts[i];

            status = weft__p2p_start(op->call, pt->p.is_send, pt->p.buf, pt->p.count,
                                     pt->p.dtype, pt->p.peer, pt->p.tag, op->comm, &pt->sched);
        }
        if (status != WEFT_OK) {
            for (int i = 0; i < op->nparts; i++) {
                weft__sched_destroy(op->parts[i].sched); /* cancels what was posted */
                op->parts[i].sched = NULL;
            }
        }
        return status;
    }
    weft__coll_form = op->stage != NULL ? "progress thread (host-staged)" : "progress thread";
    status = weft__coll_start(op->comm, &op->args, &op->sched);
    weft__coll_form = NULL;
    return status;
}

/* Point-to-point: 1 when every part is done (the first failure in op->failed). */
static int parts_done(enq_op_t *op)
{
    int done = 1;

    for (int i = 0; i < op->nparts; i++) {
        p2p_part_t *pt = &op->parts[i];
        weft_status_t status;

        if (pt->sched == NULL) {
            continue;
        }
        if (!weft__sched_test(pt->sched, &status)) {
            done = 0;
            continue;
        }
        if (status != WEFT_OK && op->failed == WEFT_OK) {
            op->failed = status;
        }
        weft__sched_destroy(pt->sched);
        pt->sched = NULL;
    }
    return done;
}

/* An operation that was not queued. */
static void op_free(enq_op_t *op)
{
    if (op->stage != NULL && !op->stage_queued) {
        weft__device_bounce_put(op->sdev, op->stage);
    } /* else a stream may still copy into it: left (an error path) */
    free(op->arrays);
    free(op->parts);
    free(op);
}

/* Remove op (lock held), release its stream and its communicator. */
static void op_finish(enq_op_t *prev, enq_op_t *op, weft_status_t status)
{
    retired_t *r;

    if (status != WEFT_OK) {
        record_error(op, status);
    }
    if (op->sched != NULL) {
        weft__sched_destroy(op->sched);
    }
    if (prev != NULL) {
        prev->next = op->next;
    } else {
        head = op->next;
    }
    if (tail == op) {
        tail = prev;
    }
    if (op->state == OP_TASK) {
        if (nhost > 0) {
            weft__device_doorbell_ring(); /* operations of its communicator may start now */
        }
    } else {
        nhost--;
        r = malloc(sizeof(*r));
        if (r != NULL) {
            *r = (retired_t){.flag = op->flag, .sdev = op->sdev, .stage = op->stage,
                             .next = retired};
            retired = r;
        } /* else the flag (and stage) leak, never a stream reading freed memory */
        op->stage = NULL;
        weft__device_flag_set(op->flag, 2);
    }
    /* last: after this the user's thread may drive the communicator again */
    atomic_fetch_sub(&op->comm->rt->enq_pending, 1);
    op_free(op);
}

/* One pass over the queue; returns 1 when something started or ended,
 * and sets *running_p when an operation is in progress, *rung_p when every
 * operation that waits for its stream's flag will hear of it on the doorbell. */
static int pass(int *running_p, int *rung_p)
{
    int moved = 0;
    enq_op_t *prev = NULL, *op = head, *next;

    *running_p = 0;
    *rung_p = 1;
    reap_flags();
    while (op != NULL) {
        weft_status_t status = WEFT_INPROGRESS;
        int blocked = 0;

        next = op->next;
        if (op->state == OP_QUEUED) {
            /* an earlier operation of the communicator that has not started */
            for (enq_op_t *e = head; e != op && !blocked; e = e->next) {
                blocked = e->comm == op->comm && (e->state == OP_QUEUED || e->state == OP_TASK);
            }
            if (!blocked && weft__device_flag_get(op->flag) >= 1) {
                status = op_start(op);
                if (status == WEFT_OK) {
                    op->state = OP_RUNNING;
                    status = WEFT_INPROGRESS;
                    moved = 1;
                }
            } else if (!blocked && !op->rings) {
                *rung_p = 0; /* the blocked ones wait for an earlier operation: rung as it */
            }
        }
        if (op->state == OP_TASK) {
            prev = op; /* its stream runs it */
            op = next;
            continue;
        }
        if (op->state == OP_RUNNING && op->is_p2p) {
            if (parts_done(op)) {
                status = op->failed;
                moved = 1;
            } else {
                *running_p = 1;
            }
        } else if (op->state == OP_RUNNING) {
            if (op->sched == NULL || weft__sched_test(op->sched, &status)) {
                status = op->sched == NULL ? WEFT_OK : status; /* nothing was to be done */
                moved = 1;
            } else {
                *running_p = 1;
            }
        }
        if (status != WEFT_INPROGRESS) {
            op_finish(prev, op, status);
            moved = 1;
        } else {
            prev = op;
        }
        op = next;
    }
    return moved;
}

static void *progress_main(void *arg)
{
    int idle = 0;

    (void)arg;
    pthread_mutex_lock(&lock);
    while (!stopping || nhost > 0) {
        /* read before any flag is looked at: a ring after this ends the sleep below */
        uint32_t seen = weft__device_doorbell_read();
        int running, moved, rung;

        if (nhost == 0 && retired != NULL) {
            reap_flags();
            pthread_mutex_unlock(&lock);
            /* the streams' last writes (3) are not rung: look again soon, or at a ring */
            weft__device_doorbell_wait(seen, FLAG_NAP_NS);
            pthread_mutex_lock(&lock);
            continue;
        }
        if (nhost == 0) { /* nothing, or only device tasks, which their streams run */
            pthread_cond_wait(&work, &lock);
            continue;
        }
        moved = pass(&running, &rung);
        pthread_mutex_unlock(&lock);
        if (moved) {
            idle = 0;
        } else if (running || ++idle < 64) {
            sched_yield();
        } else if (rung) { /* every stream rings once its flag is written */
            atomic_fetch_add(&waits_slept, 1);
            if (weft__device_doorbell_wait(seen, DOORBELL_SLEEP_NS)) {
                atomic_fetch_add(&waits_rung, 1);
            }
        } else {
            atomic_fetch_add(&waits_napped, 1);
            nap(FLAG_NAP_NS);
        }
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Lock held. */
static weft_status_t ensure_thread(void)
{
    int rc;

    if (thread_started) {
        return WEFT_OK;
    }
    bound = 0; /* a new thread: no context made current yet */
    rc = pthread_create(&thread, NULL, progress_main, NULL);
    if (rc != 0) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot start the progress thread: %s",
                           strerror(rc));
    }
    thread_started = 1;
    stopping = 0;
    return WEFT_OK;
}

weft_status_t weft__enqueue_check(struct weft_comm *comm, void *stream, const void *buf1,
                                  const void *buf2, const char *call)
{
    const weft_device_ops_t *sdev, *dev;
    const void *bufs[2] = {buf1, buf2};
    weft_status_t status = weft__device_stream_check(stream, call, &sdev);

    for (int i = 0; i < 2 && status == WEFT_OK; i++) {
        if (bufs[i] == NULL || bufs[i] == WEFT_IN_PLACE) {
            continue;
        }
        status = weft__device_check(bufs[i], call, i == 0 ? "sendbuf" : "recvbuf", &dev);
        if (status == WEFT_OK && dev != sdev && dev->memtype != WEFT_MEM_HOST) {
            status = weft__error(WEFT_ERR_INVALID_ARG,
                                 "%s: %s is %s memory, which a %s stream cannot reach", call,
                                 i == 0 ? "sendbuf" : "recvbuf", dev->name, sdev->name);
        }
    }
    if (status == WEFT_OK && atomic_load(&comm->rt->enq_pending) == 0 && comm->coll->active != NULL) {
        status = weft__error(WEFT_ERR_INVALID_ARG,
                             "%s: comm has unfinished nonblocking requests; complete them before "
                             "enqueueing on it",
                             call);
    }
    return status;
}

/* At the queue's tail, counted in its communicator's pending operations (lock held). */
static void append(enq_op_t *op)
{
    atomic_fetch_add(&op->comm->rt->enq_pending, 1);
    if (tail != NULL) {
        tail->next = op;
    } else {
        head = op;
    }
    tail = op;
}

/* Wait until pending() is 0, with the deadline of a wait. */
static weft_status_t drain(int (*pending)(const void *), const void *what, const char *call)
{
    uint64_t deadline = 0;
    int polls = 0;

    while (pending(what)) {
        if (deadline == 0) {
            deadline = weft__deadline_ns();
        }
        if (weft__time_ns() >= deadline) {
            return weft__error(WEFT_ERR_TIMEOUT,
                               "%s: operations enqueued earlier did not finish within "
                               "WEFT_TIMEOUT (is the work queued before them on their stream "
                               "stuck?)",
                               call);
        }
        if (++polls < 256) {
            sched_yield();
        } else {
            nap(FLAG_NAP_NS);
        }
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------ device tasks */

/* Whether op's communicator has an operation queued before op (lock held). */
static int earlier_of_comm(const enq_op_t *op)
{
    for (const enq_op_t *e = head; e != op; e = e->next) {
        if (e->comm == op->comm) {
            return 1;
        }
    }
    return 0;
}

static enq_op_t *prev_of(const enq_op_t *op)
{
    enq_op_t *prev = NULL;

    for (enq_op_t *e = head; e != op; e = e->next) {
        prev = e;
    }
    return prev;
}

static int earlier_pending(const void *op)
{
    int pending;

    pthread_mutex_lock(&lock);
    pending = earlier_of_comm(op);
    pthread_mutex_unlock(&lock);
    return pending;
}

/* The device task (on the stream, in its order): once the communicator's
 * earlier operations have finished (with the deadline of a wait), the
 * collective runs here as a blocking call, the stream's device doing its
 * copies and reductions itself. */
static void task_run(void *arg)
{
    enq_op_t *op = arg;
    weft_status_t status = drain(earlier_pending, op, op->call);

    if (status == WEFT_OK) {
        weft__coll_form = "device task";
        weft__coll_on_stream = 1;
        status = weft__coll_run(op->comm, &op->args);
        weft__coll_on_stream = 0;
        weft__coll_form = NULL;
        atomic_fetch_add(&tasks_run, 1);
    }
    pthread_mutex_lock(&lock);
    op_finish(prev_of(op), op, status);
    pthread_mutex_unlock(&lock);
}

unsigned long weft__enqueue_tasks_run(void)
{
    return atomic_load(&tasks_run);
}

/* Whether a collective runs as a device task: WEFT_DEVICE_TASK, a stream
 * that runs tasks, every rank on one node. */
static int task_form(const struct weft_comm *comm, const weft_device_ops_t *sdev)
{
    return weft__coll_config.device_task && sdev->stream_task != NULL && comm->node != NULL &&
           comm->node->nnodes == 1;
}

static weft_status_t enqueue_task(enq_op_t *op)
{
    weft_status_t status;

    op->state = OP_TASK;
    pthread_mutex_lock(&lock);
    status = op->sdev->stream_task(op->stream, task_run, op);
    if (status == WEFT_OK) {
        append(op);
    }
    pthread_mutex_unlock(&lock);
    if (status != WEFT_OK) {
        op_free(op);
    }
    return status;
}

/*
 * Host staging. A small collective of device buffers across nodes (no device
 * task there) would stage every message through host memory and reduce on
 * the device, each copy and reduction a hand-off between the progress
 * thread and a stream. Up to WEFT_DEVICE_STAGE bytes (the vector of one
 * rank) it goes through host memory once instead, in the stream's own order:
 *
 *   stream:   copy input -> stage | flag 1 | wait flag 2 | copy stage -> result | flag 3
 *   progress:                       the collective on the stage (host memory) -> flag 2
 *
 * The stage mirrors the bytes the collective reads (src) and writes (dst);
 * where they overlap (in place) it keeps their relative place, so the
 * collective runs in place there too. The rule reads the communicator's
 * layout, the kind, the size and the setting (alike on every rank), and
 * whether the buffers are device memory. The v-forms and barrier stage per
 * message as before.
 */

/* Bytes the collective reads from src and writes to dst on this rank; 0 for
 * kinds that are not staged. A bcast is both (root and others alike). */
static int stage_extents(const weft_coll_args_t *a, size_t *in_p, size_t *out_p)
{
    const size_t n = a->count * a->esize, all = n * (size_t)a->size;
    const int root = a->rank == a->root;

    switch (a->kind) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_BCAST:
        *in_p = n, *out_p = n;
        return 1;
    case WEFT_COLL_REDUCE:
        *in_p = n, *out_p = root ? n : 0;
        return 1;
    case WEFT_COLL_ALLGATHER:
        *in_p = n, *out_p = all;
        return 1;
    case WEFT_COLL_REDUCE_SCATTER:
        *in_p = all, *out_p = n;
        return 1;
    case WEFT_COLL_ALLTOALL:
        *in_p = all, *out_p = all;
        return 1;
    case WEFT_COLL_GATHER:
        *in_p = n, *out_p = root ? all : 0;
        return 1;
    case WEFT_COLL_SCATTER:
        *in_p = root ? all : 0, *out_p = n;
        return 1;
    default:
        return 0;
    }
}

static int device_bytes(const void *p, size_t bytes)
{
    return bytes > 0 && weft__device_query(p)->memtype != WEFT_MEM_HOST;
}

/* The rule, for enqueued and blocking calls alike. */
static int host_staged_rule(const struct weft_comm *comm, const weft_coll_args_t *a, size_t *in_p,
                            size_t *out_p)
{
    const size_t n = a->count * a->esize;

    return n > 0 && n <= weft__coll_config.device_stage && comm->node != NULL &&
           comm->node->nnodes > 1 && stage_extents(a, in_p, out_p) &&
           (device_bytes(a->src, *in_p) || device_bytes(a->dst, *out_p));
}

static int host_staged(const enq_op_t *op, size_t *in_p, size_t *out_p)
{
    return op->sdev->memtype != WEFT_MEM_HOST && host_staged_rule(op->comm, &op->args, in_p, out_p);
}

/* Where the input and the result sit in the stage, and its size. */
static size_t stage_layout(const weft_coll_args_t *a, size_t in, size_t out, size_t *src_off_p,
                           size_t *dst_off_p)
{
    const char *src = a->src, *dst = a->dst;

    if (in > 0 && out > 0 && src < dst + out && dst < src + in) {
        const char *lo = src < dst ? src : dst;
        const char *hi = src + in > dst + out ? src + in : dst + out;

        *src_off_p = (size_t)(src - lo);
        *dst_off_p = (size_t)(dst - lo);
        return (size_t)(hi - lo);
    }
    *src_off_p = 0;
    *dst_off_p = (in + 63) & ~(size_t)63;
    return *dst_off_p + out;
}

/* The stage, its input copy queued, and the operation turned onto it (before its flags are
 * queued). */
static weft_status_t stage_plan(enq_op_t *op, size_t in, size_t out)
{
    weft_coll_args_t *a = &op->args;
    size_t src_off, dst_off;
    const size_t total = stage_layout(a, in, out, &src_off, &dst_off);
    weft_status_t status = weft__device_bounce_get(op->sdev, total, &op->stage);

    if (status != WEFT_OK) {
        op->stage = NULL;
        return status;
    }
    if (in > 0) {
        status = op->sdev->memcpy_async((char *)op->stage + src_off, a->src, in, op->stream);
        op->stage_queued = status == WEFT_OK;
        a->src = (char *)op->stage + src_off;
    }
    op->stage_dst = a->dst;
    op->stage_out = (char *)op->stage + dst_off;
    op->stage_bytes = out;
    if (out > 0) {
        a->dst = op->stage_out;
    }
    if (status == WEFT_OK) {
        atomic_fetch_add(&host_staged_ops, 1);
    }
    return status;
}

/* A blocking or nonblocking call on the calling thread: the rule, the host copy with the input
 * copied in, and a turned onto it. 0 when the rule does not take the call; otherwise 1 with
 * *status_p, and on success the copy (*buf_p) and where the result lands in it. A call the
 * rule takes never stages per message instead: its peers stage it, and the node's
 * shared-memory operation of host memory is not the one of device memory. */
static int stage_in_call(struct weft_comm *comm, const weft_device_ops_t *dev, weft_coll_args_t *a,
                         char **buf_p, size_t *dst_off_p, size_t *out_p, weft_status_t *status_p)
{
    size_t in, src_off, total;
    weft_status_t status;

    if (!host_staged_rule(comm, a, &in, out_p)) {
        return 0;
    }
    atomic_fetch_add(&host_staged_ops, 1);
    total = stage_layout(a, in, *out_p, &src_off, dst_off_p);
    status = weft__device_bounce_get(dev, total, (void **)buf_p);
    if (status == WEFT_OK && in > 0) {
        status = dev->copy(*buf_p + src_off, a->src, in);
        a->src = *buf_p + src_off;
        if (status != WEFT_OK) {
            weft__device_bounce_put(dev, *buf_p);
        }
    }
    if (status == WEFT_OK && *out_p > 0) {
        a->dst = *buf_p + *dst_off_p;
    }
    *status_p = status;
    return 1;
}

int weft__blocking_host_staged(struct weft_comm *comm, const weft_coll_args_t *args,
                               const weft_device_ops_t *dev, weft_status_t *status_p)
{
    weft_coll_args_t a = *args;
    size_t dst_off, out;
    char *stage;

    if (!stage_in_call(comm, dev, &a, &stage, &dst_off, &out, status_p)) {
        return 0;
    }
    if (*status_p == WEFT_OK) {
        weft__coll_form = "call (host-staged)";
        *status_p = weft__coll_run(comm, &a);
        weft__coll_form = NULL;
        if (*status_p == WEFT_OK && out > 0) {
            *status_p = dev->copy(args->dst, stage + dst_off, out);
        }
        weft__device_bounce_put(dev, stage);
    }
    return 1;
}

int weft__nonblocking_host_staged(struct weft_comm *comm, const weft_coll_args_t *args,
                                  const weft_device_ops_t *dev, weft_sched_t **sched_p,
                                  weft_status_t *status_p)
{
    weft_coll_args_t a = *args;
    size_t dst_off, out;
    char *buf;

    if (!stage_in_call(comm, dev, &a, &buf, &dst_off, &out, status_p)) {
        return 0;
    }
    if (*status_p == WEFT_OK) { /* the schedule takes the copy */
        weft_coll_stage_t stage = {
            .dev = dev, .stage = buf, .dst = args->dst, .from = buf + dst_off, .bytes = out};

        weft__coll_form = "call (host-staged)";
        *status_p = weft__coll_start_staged(comm, &a, &stage, sched_p);
        weft__coll_form = NULL;
    }
    return 1;
}

unsigned long weft__enqueue_host_staged(void)
{
    return atomic_load(&host_staged_ops);
}

void weft__enqueue_waits(weft_enqueue_waits_t *waits_p)
{
    *waits_p = (weft_enqueue_waits_t){.naps = atomic_load(&waits_napped),
                                      .sleeps = atomic_load(&waits_slept),
                                      .rung = atomic_load(&waits_rung)};
}

static weft_status_t enqueue(enq_op_t *op, void *stream, const char *call)
{
    weft_status_t status = weft__device_stream_check(stream, call, &op->sdev);
    size_t in, out;

    op->stream = stream;
    op->call = call;
    if (status == WEFT_OK && !op->is_p2p && task_form(op->comm, op->sdev)) {
        return enqueue_task(op);
    }
    if (status == WEFT_OK) {
        status = weft__device_flag_alloc(op->sdev, &op->flag);
    }
    if (status == WEFT_OK && !op->is_p2p && host_staged(op, &in, &out)) {
        status = stage_plan(op, in, out);
    }
    if (status != WEFT_OK) {
        op_free(op);
        return status;
    }
    pthread_mutex_lock(&lock);
    status = ensure_thread();
    if (status == WEFT_OK) {
        status = op->sdev->stream_write_flag(stream, op->flag, 1);
    }
    if (status == WEFT_OK && op->sdev->stream_ring != NULL) {
        /* not an error when it fails: the progress thread then looks at the flag every
         * FLAG_NAP_NS, as for a table that cannot ring */
        op->rings = op->sdev->stream_ring(stream) == WEFT_OK;
    }
    if (status == WEFT_OK) {
        status = op->sdev->stream_wait_flag(stream, op->flag, 2);
        if (status == WEFT_OK && op->stage_bytes > 0) {
            status = op->sdev->memcpy_async(op->stage_dst, op->stage_out, op->stage_bytes, stream);
            op->stage_queued |= status == WEFT_OK;
        }
        if (status == WEFT_OK) {
            status = op->sdev->stream_write_flag(stream, op->flag, 3);
        }
        if (status != WEFT_OK) {
            /* the stream holds a write already: let it run into a finished op */
            weft__device_flag_set(op->flag, 2);
        }
    }
    if (status != WEFT_OK) {
        pthread_mutex_unlock(&lock);
        op_free(op);
        return status;
    }
    nhost++;
    append(op);
    pthread_cond_signal(&work);
    /* a sleep on the doorbell was decided without this operation, whose stream may not ring */
    weft__device_doorbell_ring();
    pthread_mutex_unlock(&lock);
    return WEFT_OK;
}

int weft__enqueue_blocking_task(struct weft_comm *comm, const weft_coll_args_t *args,
                                const weft_device_ops_t *dev, const char *call,
                                weft_status_t *status_p)
{
    weft_status_t status, failed;
    void *stream;

    if (dev->thread_stream == NULL || !task_form(comm, dev) ||
        dev->thread_stream(&stream) != WEFT_OK) {
        return 0;
    }
    status = weft__enqueue_coll(comm, args, stream, call);
    if (status == WEFT_OK) {
        status = dev->stream_sync(stream);
        failed = weft__enqueue_stream_error(stream);
        if (failed != WEFT_OK) {
            status = failed;
            comm->rt->enq_error = WEFT_OK; /* reported here, not again by the next call */
        }
    }
    *status_p = status;
    return 1;
}

static size_t *copy_array(size_t *dst, const size_t *src, int n)
{
    if (src == NULL) {
        return NULL;
    }
    memcpy(dst, src, (size_t)n * sizeof(size_t));
    return dst;
}

size_t *weft__coll_args_keep(weft_coll_args_t *dst, const weft_coll_args_t *src)
{
    int n = src->size;
    size_t *arrays = malloc(4 * (size_t)n * sizeof(size_t) + 1);

    if (arrays != NULL) {
        *dst = *src;
        dst->counts = copy_array(arrays, src->counts, n);
        dst->displs = copy_array(arrays + n, src->displs, n);
        dst->scounts = copy_array(arrays + 2 * n, src->scounts, n);
        dst->sdispls = copy_array(arrays + 3 * n, src->sdispls, n);
    }
    return arrays;
}

weft_status_t weft__enqueue_coll(struct weft_comm *comm, const weft_coll_args_t *args, void *stream,
                                 const char *call)
{
    enq_op_t *op;

    if (group_depth > 0) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s: a collective cannot be enqueued between weft_group_start and "
                           "weft_group_end (groups hold weft_send_enqueue and weft_recv_enqueue)",
                           call);
    }
    if (weft__graph_capturing(stream)) {
        return weft__graph_record_coll(stream, comm, args, call);
    }
    op = calloc(1, sizeof(*op));
    if (op == NULL || (op->arrays = weft__coll_args_keep(&op->args, args)) == NULL) {
        free(op);
        return weft__error(WEFT_ERR_NO_MEMORY, "%s: cannot queue the operation", call);
    }
    op->comm = comm;
    return enqueue(op, stream, call);
}

/* ---------------------------------------------------------------- groups */

static weft_status_t add_part(enq_op_t *op, int is_send, void *buf, size_t count,
                              weft_dtype_t dtype, int peer, int tag, const char *call)
{
    if (op->nparts == op->cap_parts) {
        int ncap = op->cap_parts ? 2 * op->cap_parts : 4;
        p2p_part_t *n = realloc(op->parts, (size_t)ncap * sizeof(*n));

        if (n == NULL) {
            return weft__error(WEFT_ERR_NO_MEMORY, "%s: cannot queue the operation", call);
        }
        op->parts = n;
        op->cap_parts = ncap;
    }
    op->parts[op->nparts++] = (p2p_part_t){.p = {.is_send = is_send, .buf = buf, .count = count,
                                                 .dtype = dtype, .peer = peer, .tag = tag},
                                           .sched = NULL};
    return WEFT_OK;
}

weft_status_t weft__enqueue_p2p(struct weft_comm *comm, int is_send, void *buf, size_t count,
                                weft_dtype_t dtype, int peer, int tag, void *stream,
                                const char *call)
{
    enq_op_t *op = NULL;
    weft_status_t status;

    if (group_depth > 0) {
        for (op = group_head; op != NULL && !(op->comm == comm && op->stream == stream);
             op = op->next) {
        }
    } else if (weft__graph_capturing(stream)) {
        return weft__graph_record_p2p(stream, comm, is_send, buf, count, dtype, peer, tag, call);
    }
    if (op == NULL) {
        op = calloc(1, sizeof(*op));
        if (op == NULL) {
            return weft__error(WEFT_ERR_NO_MEMORY, "%s: cannot queue the operation", call);
        }
        op->comm = comm;
        op->is_p2p = 1;
        op->stream = stream;
        if (group_depth > 0) {
            *(group_tail != NULL ? &group_tail->next : &group_head) = op;
            group_tail = op;
        }
    }
    status = add_part(op, is_send, buf, count, dtype, peer, tag, call);
    if (group_depth > 0) {
        return status; /* held until weft_group_end (a failed part is not recorded) */
    }
    if (status != WEFT_OK) {
        op_free(op);
        return status;
    }
    return enqueue(op, stream, call);
}

/* A group's operation on a capturing stream: recorded as one step, launched as a group. */
static weft_status_t record_group(const enq_op_t *op)
{
    weft_p2p_part_t *parts = malloc((size_t)op->nparts * sizeof(*parts) + 1);
    weft_status_t status;

    if (parts == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "weft_group_end: cannot record the group");
    }
    for (int i = 0; i < op->nparts; i++) {
        parts[i] = op->parts[i].p;
    }
    status = weft__graph_record_group(op->stream, op->comm, parts, op->nparts, "weft_group_end");
    if (status != WEFT_OK) {
        free(parts);
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_group_start(void)
{
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized("weft_group_start");
    if (status == WEFT_OK) {
        group_depth++;
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_group_end(void)
{
    weft_status_t status = WEFT_OK;
    enq_op_t *op, *next;

    weft__error_clear();
    if (group_depth == 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_group_end: no weft_group_start open");
    }
    if (--group_depth > 0) {
        return WEFT_OK; /* the outermost end queues them */
    }
    op = group_head;
    group_head = group_tail = NULL;
    for (; op != NULL; op = next) {
        next = op->next;
        op->next = NULL;
        if (status != WEFT_OK) {
            op_free(op); /* after a failure nothing more is queued */
        } else if (weft__graph_capturing(op->stream)) {
            status = record_group(op);
            op_free(op);
        } else {
            status = enqueue(op, op->stream, "weft_group_end");
        }
    }
    return status;
}

static int comm_pending(const void *comm)
{
    return atomic_load(&((struct weft_comm *)comm)->rt->enq_pending) > 0;
}

weft_status_t weft__enqueue_comm_drain(struct weft_comm *comm, const char *call)
{
    weft_status_t status;

    if (atomic_load(&comm->rt->enq_pending) == 0 && comm->rt->enq_error == WEFT_OK) {
        return WEFT_OK;
    }
    status = drain(comm_pending, comm, call);
    if (status == WEFT_OK && comm->rt->enq_error != WEFT_OK) {
        status = weft__error(comm->rt->enq_error, "%s: an enqueued operation failed: %s", call,
                             comm->rt->enq_msg);
        comm->rt->enq_error = WEFT_OK;
    }
    return status;
}

static int stream_pending(const void *stream)
{
    int found = 0;

    pthread_mutex_lock(&lock);
    for (enq_op_t *op = head; op != NULL && !found; op = op->next) {
        found = op->stream == stream;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

weft_status_t weft__enqueue_stream_drain(void *stream, const char *call)
{
    return drain(stream_pending, stream, call);
}

weft_status_t weft__enqueue_stream_error(void *stream)
{
    weft_status_t status = WEFT_OK;

    pthread_mutex_lock(&lock);
    for (int i = 0; i < nerrors; i++) {
        if (errors[i].stream == stream) {
            status = weft__error(errors[i].status, "%s", errors[i].msg);
            errors[i] = errors[--nerrors];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return status;
}

void weft__enqueue_shutdown(void)
{
    pthread_mutex_lock(&lock);
    if (!thread_started) {
        pthread_mutex_unlock(&lock);
        return;
    }
    stopping = 1;
    pthread_cond_signal(&work);
    weft__device_doorbell_ring(); /* a sleep on it ends too */
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    thread_started = 0;
}
