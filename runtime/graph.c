/*
 * Capture and replay of stream-ordered work (weft_stream_begin_capture,
 * weft_stream_end_capture, weft_graph_launch, weft_graph_destroy).
 *
 * While a stream captures, what weft is asked to queue on it
 * (weft_memcpy_async, every _enqueue collective, weft_send_enqueue and
 * weft_recv_enqueue, a group of them: one step) is checked as usual (a bad argument fails the call
 * and nothing is recorded) and recorded in the stream's graph instead of queued. weft_graph_launch
 * queues the recorded steps on a stream in recorded order, as if each call were made again at the
 * launch: a collective takes its communicator's next sequence number and runs as its enqueue would
 * (a device task inside a node, the progress thread otherwise), so launches and ordinary enqueues
 * interleave on a communicator as long as every rank makes them in the same order, and a graph may
 * hold several communicators. The buffers are the captured ones, read and written when each step
 * runs. A launch first checks every step (its communicator still live, its buffers reachable from
 * the launch stream) and queues nothing when one fails.
 *
 * Emu streams only: weft cannot capture a CUDA stream yet (the flags its
 * progress thread shares with a stream serve one execution: a CUDA graph
 * of weft's work would need flags that count launches).
 */
#include "runtime/graph.h"

#include "base/handle.h"
#include "comm/comm.h"
#include "device/device.h"
#include "runtime/enqueue.h"
#include "runtime/init.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Streams capturing at once (per process). */
#define MAX_CAPTURING 64

typedef enum { STEP_COPY, STEP_COLL, STEP_P2P, STEP_GROUP } step_kind_t;

typedef struct step {
    step_kind_t kind;
    const char *call;
    weft_comm_t comm;      /* collectives, point-to-point */
    weft_coll_args_t args; /* collectives (arrays in `arrays`); point-to-point: count, dtype */
    size_t *arrays;
    void *dst; /* copy */
    const void *src;
    size_t bytes;
    void *buf; /* point-to-point */
    int is_send, peer, tag;
    weft_p2p_part_t *parts; /* a group's */
    int nparts;
} step_t;

struct weft_graph {
    step_t *steps;
    int n, cap;
};

static weft_handle_table_t graphs = WEFT_HANDLE_TABLE_INIT("graph", 0xb0);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *stream;
    struct weft_graph *graph;
} capturing[MAX_CAPTURING];
static atomic_int ncapturing;

static void graph_free(struct weft_graph *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->steps[i].arrays);
        free(g->steps[i].parts);
    }
    free(g->steps);
    free(g);
}

/* The slot of a capturing stream, or -1 (lock held). */
static int slot_of(void *stream)
{
    for (int i = 0; i < atomic_load(&ncapturing); i++) {
        if (capturing[i].stream == stream) {
            return i;
        }
    }
    return -1;
}

/* A new step at the end of stream's graph (lock held), counted; NULL with
 * *status_p set when the stream does not capture (any more) or no memory. */
static step_t *append(void *stream, const char *call, weft_status_t *status_p)
{
    int i = slot_of(stream);
    struct weft_graph *g = i >= 0 ? capturing[i].graph : NULL;

    if (g == NULL) {
        *status_p = weft__error(WEFT_ERR_INVALID_ARG,
                                "%s: stream %p stopped capturing during the call", call, stream);
        return NULL;
    }
    if (g->n == g->cap) {
        int ncap = g->cap ? 2 * g->cap : 16;
        step_t *n = realloc(g->steps, (size_t)ncap * sizeof(*n));

        if (n == NULL) {
            *status_p = weft__error(WEFT_ERR_NO_MEMORY,
                                    "%s: cannot record the step in the stream's graph", call);
            return NULL;
        }
        g->steps = n;
        g->cap = ncap;
    }
    g->steps[g->n] = (step_t){.call = call};
    *status_p = WEFT_OK;
    return &g->steps[g->n++];
}

int weft__graph_capturing(void *stream)
{
    int found;

    if (atomic_load_explicit(&ncapturing, memory_order_acquire) == 0) {
        return 0;
    }
    pthread_mutex_lock(&lock);
    found = slot_of(stream) >= 0;
    pthread_mutex_unlock(&lock);
    return found;
}

/* A copy of step at the end of stream's graph. */
static weft_status_t record(void *stream, const char *call, const step_t *step)
{
    weft_status_t status;
    step_t *s;

    pthread_mutex_lock(&lock);
    s = append(stream, call, &status);
    if (s != NULL) {
        *s = *step;
        s->call = call;
    }
    pthread_mutex_unlock(&lock);
    return status;
}

weft_status_t weft__graph_record_copy(void *stream, void *dst, const void *src, size_t bytes,
                                      const char *call)
{
    return record(stream, call,
                  &(step_t){.kind = STEP_COPY, .dst = dst, .src = src, .bytes = bytes});
}

weft_status_t weft__graph_record_coll(void *stream, struct weft_comm *comm,
                                      const weft_coll_args_t *args, const char *call)
{
    step_t s = {.kind = STEP_COLL, .comm = comm->handle};
    weft_status_t status;

    s.arrays = weft__coll_args_keep(&s.args, args);
    if (s.arrays == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "%s: cannot record the step in the stream's graph",
                           call);
    }
    status = record(stream, call, &s);
    if (status != WEFT_OK) {
        free(s.arrays);
    }
    return status;
}

weft_status_t weft__graph_record_p2p(void *stream, struct weft_comm *comm, int is_send, void *buf,
                                     size_t count, weft_dtype_t dtype, int peer, int tag,
                                     const char *call)
{
    step_t s = {.kind = STEP_P2P,
                .comm = comm->handle,
                .is_send = is_send,
                .buf = buf,
                .peer = peer,
                .tag = tag};

    s.args.count = count;
    s.args.dtype = dtype;
    return record(stream, call, &s);
}

weft_status_t weft__graph_record_group(void *stream, struct weft_comm *comm, weft_p2p_part_t *parts,
                                       int nparts, const char *call)
{
    return record(
        stream, call,
        &(step_t){.kind = STEP_GROUP, .comm = comm->handle, .parts = parts, .nparts = nparts});
}

void weft__graph_stream_gone(void *stream)
{
    struct weft_graph *g = NULL;

    if (atomic_load(&ncapturing) == 0) {
        return;
    }
    pthread_mutex_lock(&lock);
    int i = slot_of(stream);

    if (i >= 0) {
        int last = atomic_load(&ncapturing) - 1;

        g = capturing[i].graph;
        capturing[i] = capturing[last];
        atomic_store(&ncapturing, last);
    }
    pthread_mutex_unlock(&lock);
    if (g != NULL) {
        graph_free(g);
    }
}

WEFT_EXPORT weft_status_t weft_stream_begin_capture(weft_stream_t stream)
{
    const weft_device_ops_t *dev;
    struct weft_graph *g;
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized("weft_stream_begin_capture");
    if (status == WEFT_OK) {
        status = weft__device_stream_check(stream, "weft_stream_begin_capture", &dev);
    }
    if (status != WEFT_OK) {
        return status;
    }
    if (dev->memtype != WEFT_MEM_EMU) {
        return weft__error(WEFT_ERR_UNSUPPORTED,
                           "weft_stream_begin_capture: %s streams cannot capture yet (emu "
                           "streams can)",
                           dev->name);
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "weft_stream_begin_capture: no memory");
    }
    pthread_mutex_lock(&lock);
    if (slot_of(stream) >= 0) {
        status = weft__error(WEFT_ERR_INVALID_ARG,
                             "weft_stream_begin_capture: stream %p is capturing already", stream);
    } else if (atomic_load(&ncapturing) == MAX_CAPTURING) {
        status = weft__error(WEFT_ERR_NO_MEMORY,
                             "weft_stream_begin_capture: %d streams are capturing already",
                             MAX_CAPTURING);
    } else {
        int i = atomic_load(&ncapturing);

        capturing[i].stream = stream;
        capturing[i].graph = g;
        atomic_store_explicit(&ncapturing, i + 1, memory_order_release);
    }
    pthread_mutex_unlock(&lock);
    if (status != WEFT_OK) {
        free(g);
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_stream_end_capture(weft_stream_t stream, weft_graph_t *graph_p)
{
    struct weft_graph *g = NULL;
    weft_status_t status;
    int i;

    weft__error_clear();
    if (graph_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_stream_end_capture: graph_p is NULL");
    }
    pthread_mutex_lock(&lock);
    i = slot_of(stream);
    if (i >= 0) {
        g = capturing[i].graph;
        capturing[i] = capturing[atomic_load(&ncapturing) - 1];
        atomic_fetch_sub(&ncapturing, 1);
    }
    pthread_mutex_unlock(&lock);
    if (g == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_stream_end_capture: stream %p is not capturing", stream);
    }
    status = weft__handle_add(&graphs, g, (void **)graph_p);
    if (status != WEFT_OK) {
        graph_free(g);
    }
    return status;
}

/* Whether step s can be queued on stream now (every step is checked before any is queued). */
static weft_status_t check_step(const step_t *s, void *stream, struct weft_comm **comm_p)
{
    const weft_device_ops_t *sdev;
    char what[96];
    weft_status_t status;

    if (s->kind == STEP_COPY) {
        return weft__memcpy_check(s->dst, s->src, s->bytes, stream, "weft_graph_launch", &sdev);
    }
    snprintf(what, sizeof(what), "weft_graph_launch: the comm of a captured %s", s->call);
    status = weft__comm_check(s->comm, what, comm_p);
    if (status == WEFT_OK && s->kind == STEP_COLL) {
        return weft__enqueue_check(*comm_p, stream, s->args.src, s->args.dst, s->call);
    }
    if (status == WEFT_OK && s->kind == STEP_P2P) {
        return weft__enqueue_check(*comm_p, stream, s->buf, NULL, s->call);
    }
    for (int i = 0; i < s->nparts && status == WEFT_OK; i++) {
        status = weft__enqueue_check(*comm_p, stream, s->parts[i].buf, NULL, s->call);
    }
    return status;
}

/* A recorded group, launched as one (its parts checked already). */
static weft_status_t queue_group(const step_t *s, void *stream, struct weft_comm *comm)
{
    weft_status_t status = weft_group_start(), end;

    for (int i = 0; i < s->nparts && status == WEFT_OK; i++) {
        const weft_p2p_part_t *p = &s->parts[i];

        status = weft__enqueue_p2p(comm, p->is_send, p->buf, p->count, p->dtype, p->peer, p->tag,
                                   stream, p->is_send ? "weft_send_enqueue" : "weft_recv_enqueue");
    }
    end = weft_group_end();
    return status != WEFT_OK ? status : end;
}

static weft_status_t queue_step(const step_t *s, void *stream, struct weft_comm *comm)
{
    switch (s->kind) {
    case STEP_COPY:
        return weft_memcpy_async(s->dst, s->src, s->bytes, stream);
    case STEP_COLL:
        return weft__enqueue_coll(comm, &s->args, stream, s->call);
    case STEP_P2P:
        return weft__enqueue_p2p(comm, s->is_send, s->buf, s->args.count, s->args.dtype, s->peer,
                                 s->tag, stream, s->call);
    case STEP_GROUP:
        return queue_group(s, stream, comm);
    }
    return weft__error(WEFT_ERR_INTERNAL, "weft_graph_launch: step kind %d", (int)s->kind);
}

WEFT_EXPORT weft_status_t weft_graph_launch(weft_graph_t graph, weft_stream_t stream)
{
    struct weft_graph *g;
    struct weft_comm **comms;
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized("weft_graph_launch");
    if (status == WEFT_OK) {
        status = weft__handle_lookup(&graphs, graph, "weft_graph_launch: graph", (void **)&g);
    }
    if (status != WEFT_OK) {
        return status;
    }
    comms = calloc((size_t)g->n + 1, sizeof(*comms));
    if (comms == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "weft_graph_launch: no memory");
    }
    for (int i = 0; i < g->n && status == WEFT_OK; i++) {
        status = check_step(&g->steps[i], stream, &comms[i]);
    }
    for (int i = 0; i < g->n && status == WEFT_OK; i++) {
        status = queue_step(&g->steps[i], stream, comms[i]);
    }
    free(comms);
    return status;
}

WEFT_EXPORT weft_status_t weft_graph_destroy(weft_graph_t graph)
{
    struct weft_graph *g;

    weft__error_clear();
    g = weft__handle_remove(&graphs, graph);
    if (g == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_graph_destroy: %p is not a live graph (destroyed, or never one)",
                           (void *)graph);
    }
    graph_free(g);
    return WEFT_OK;
}
