/*
 * Schedule engine. Tasks live in one growable array; dependencies are
 * collected as (before, after) edges while building and compiled into a
 * successor list (CSR) at start. Ready tasks sit on a stack; posted
 * messages in an active list that progress tests.
 */
#include "coll/sched.h"

#include "coll/coll.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"
#include "coll/shm/shm.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    weft_comm_t comm;
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

    uint64_t start_ns;
    uint64_t deadline_ns;
    struct weft_sched *next_active; /* the communicator's started, unfinished schedules */
    int linked;
    int detached; /* nobody waits: destroy on completion */
    int npoll;    /* TASK_POLL tasks in the graph */
    int npoll_active;
    const int *map; /* weft__sched_map */
    int map_size;
    long record; /* flight recorder handle (-1: none) */
};

/*
 * The communicators this thread has started operations on that are not
 * finished. Waiting for any operation progresses all of them (MPI's
 * progress rule): a peer blocked in one communicator may need this rank's
 * part of an operation of another, and a shared-memory round moves only
 * when its rank polls it. A communicator is driven by one thread at a
 * time, so the list is per thread.
 */
#define BUSY_MAX 64

static _Thread_local struct {
    weft_comm_t comm[BUSY_MAX];
    int n;
} busy;

static void busy_add(weft_comm_t comm)
{
    for (int i = 0; i < busy.n; i++) {
        if (busy.comm[i] == comm) {
            return;
        }
    }
    if (busy.n < BUSY_MAX) {
        busy.comm[busy.n++] = comm;
    }
    /* beyond that many communicators with unfinished operations at once,
     * the others progress when they are waited for themselves */
}

static void busy_remove(weft_comm_t comm)
{
    for (int i = 0; i < busy.n; i++) {
        if (busy.comm[i] == comm) {
            busy.comm[i] = busy.comm[--busy.n];
            return;
        }
    }
}

int weft__thread_busy(void)
{
    return busy.n > 0;
}

/* One round over the unfinished operations of comm and of every other
 * communicator of this thread; returns how many tasks (and operations)
 * completed. */
static int progress_all(weft_comm_t comm)
{
    int completed = weft__comm_progress(comm);

    for (int i = 0; i < busy.n;) {
        weft_comm_t c = busy.comm[i];

        if (c != comm) {
            completed += weft__comm_progress(c);
        }
        if (c->active == NULL) {
            busy.comm[i] = busy.comm[--busy.n];
        } else {
            i++;
        }
    }
    return completed;
}

static void unlink_active(weft_sched_t *s)
{
    if (!s->linked) {
        return;
    }
    for (struct weft_sched **p = &s->comm->active; *p != NULL; p = &(*p)->next_active) {
        if (*p == s) {
            *p = s->next_active;
            break;
        }
    }
    s->linked = 0;
}

static void cancel_active(weft_sched_t *s)
{
    for (int i = 0; i < s->nactive; i++) {
        task_t *t = &s->tasks[s->active[i]];

        if (t->kind != TASK_POLL) {
            s->comm->p2p->cancel(s->comm->p2p_ep, t->req);
        }
        t->req = NULL;
    }
    s->nactive = 0;
    s->npoll_active = 0;
    /* function tasks that will never finish undo what they reserved */
    for (int i = 0; s->npoll > 0 && i < s->ntasks; i++) {
        task_t *t = &s->tasks[i];

        if (t->kind == TASK_POLL && !t->completed && t->poll_cancel != NULL) {
            t->poll_cancel(t->dst);
        }
        t->completed = 1;
    }
}

/*
 * A communicator keeps its last finished schedule (arrays, scratch blocks)
 * for the next operation, so that a small collective allocates nothing.
 */
static void sched_free(weft_sched_t *s)
{
    for (int i = 0; i < s->cap_scratch; i++) {
        if (s->scratch[i].buf != NULL) {
            s->scratch[i].dev->free(s->scratch[i].buf);
        }
    }
    free(s->scratch);
    free(s->tasks);
    free(s->edges);
    free(s->succ);
    free(s->ready);
    free(s->active);
    free(s);
}

void weft__sched_cache_release(weft_comm_t comm)
{
    busy_remove(comm);
    /* operations still unfinished when the communicator goes are cancelled */
    while (comm->active != NULL) {
        weft_sched_t *s = comm->active;

        cancel_active(s);
        s->status = weft__error(WEFT_ERR_ABORTED, "%s seq %u: communicator destroyed", s->desc.coll,
                                s->seq);
        unlink_active(s);
        if (s->detached) {
            sched_free(s);
        }
    }
    if (comm->sched_cache != NULL) {
        sched_free(comm->sched_cache);
        comm->sched_cache = NULL;
    }
}

uint32_t weft__comm_peek_seq(const weft_comm_t comm)
{
    uint32_t seq = comm->seq & WEFT_TAG_SEQ_P2P;

    return seq >= WEFT_TAG_SEQ_NOTICE ? 0 : seq; /* as weft__comm_take_seq skips */
}

uint32_t weft__comm_take_seq(weft_comm_t comm)
{
    uint32_t seq = comm->seq++ & WEFT_TAG_SEQ_P2P;

    while (seq >= WEFT_TAG_SEQ_NOTICE) { /* reserved: failure notices, point-to-point */
        seq = comm->seq++ & WEFT_TAG_SEQ_P2P;
    }
    return seq;
}

weft_status_t weft__sched_create(weft_comm_t comm, const weft_op_desc_t *desc,
                                 const weft_device_ops_t *dev, weft_sched_t **sched_p)
{
    weft_sched_t *s = comm->sched_cache;

    if (s != NULL) {
        comm->sched_cache = NULL;
        s->started = s->linked = s->detached = 0;
        s->ntasks = s->nedges = s->nready = s->nactive = s->ndone = s->nscratch = 0;
        s->npoll = s->npoll_active = 0;
        s->step = 0;
        s->map = NULL;
        s->map_size = 0;
    } else if ((s = calloc(1, sizeof(*s))) == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a schedule");
    }
    s->comm = comm;
    s->dev = dev;
    s->desc = *desc;
    s->seq = desc->p2p ? WEFT_TAG_SEQ_P2P : weft__comm_take_seq(comm);
    s->status = WEFT_OK;
    s->phase = "setup";
    s->record = -1;
    *sched_p = s;
    return WEFT_OK;
}

weft_status_t weft__sched_fail(weft_sched_t *s, weft_status_t status)
{
    if (s->status == WEFT_OK || s->status == WEFT_INPROGRESS) {
        s->status = status;
    }
    return status;
}

void weft__sched_destroy(weft_sched_t *s)
{
    if (s == NULL) {
        return;
    }
    cancel_active(s);
    unlink_active(s);
    if (s->comm->magic == WEFT_COMM_MAGIC && s->comm->sched_cache == NULL) {
        s->comm->sched_cache = s;
        return;
    }
    sched_free(s);
}

void weft__sched_step(weft_sched_t *s, const char *phase, int step)
{
    s->phase = phase;
    s->step = step;
}

static int grow(void **array, int *cap, int need, size_t elem)
{
    void *p;
    int ncap;

    if (need <= *cap) {
        return 0;
    }
    ncap = *cap ? *cap * 2 : 64;
    while (ncap < need) {
        ncap *= 2;
    }
    p = realloc(*array, (size_t)ncap * elem);
    if (p == NULL) {
        return -1;
    }
    *array = p;
    *cap = ncap;
    return 0;
}

static task_t *task_add(weft_sched_t *s, task_kind_t kind, int *index_p)
{
    task_t *t;

    if (s->status != WEFT_OK) {
        return NULL;
    }
    if (s->started) {
        weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "task added to a started schedule"));
        return NULL;
    }
    if (grow((void **)&s->tasks, &s->cap_tasks, s->ntasks + 1, sizeof(task_t)) != 0) {
        weft__sched_fail(
            s, weft__error(WEFT_ERR_NO_MEMORY, "cannot grow a schedule of %d tasks", s->ntasks));
        return NULL;
    }
    t = &s->tasks[s->ntasks];
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    t->phase = s->phase;
    t->step = s->step;
    t->peer = -1;
    *index_p = s->ntasks++;
    return t;
}

static int p2p_add(weft_sched_t *s, task_kind_t kind, int peer, uint32_t slot, const void *buf,
                   size_t bytes)
{
    int index = -1;
    task_t *t;

    if (s->map != NULL && peer >= 0 && peer < s->map_size) {
        peer = s->map[peer];
    } else if (s->map != NULL) {
        peer = -1 - peer; /* out of the group's range: reported below */
    }
    if (s->status == WEFT_OK && (peer < 0 || peer >= s->comm->size || slot > WEFT_TAG_MAX_SLOT)) {
        weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL,
                                        "%s %s: message to rank %d slot %u out of range",
                                        s->desc.coll, s->desc.algo, peer, slot));
        return -1;
    }
    t = task_add(s, kind, &index);
    if (t == NULL) {
        return -1;
    }
    t->peer = peer;
    t->slot = slot;
    t->dst = (void *)buf;
    t->size = bytes;
    return index;
}

int weft__sched_send(weft_sched_t *s, int peer, uint32_t slot, const void *buf, size_t bytes)
{
    return p2p_add(s, TASK_SEND, peer, slot, buf, bytes);
}

int weft__sched_recv(weft_sched_t *s, int peer, uint32_t slot, void *buf, size_t bytes)
{
    return p2p_add(s, TASK_RECV, peer, slot, buf, bytes);
}

int weft__sched_reduce(weft_sched_t *s, void *dst, const void *const *srcs, int nsrcs, size_t count)
{
    int index = -1;
    task_t *t;

    if (s->status == WEFT_OK && (nsrcs < 1 || nsrcs > WEFT_SCHED_MAX_REDUCE_INPUTS)) {
        weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "reduce task with %d inputs", nsrcs));
        return -1;
    }
    t = task_add(s, TASK_REDUCE, &index);
    if (t == NULL) {
        return -1;
    }
    t->dst = dst;
    t->nsrcs = nsrcs;
    memcpy(t->srcs, srcs, (size_t)nsrcs * sizeof(srcs[0]));
    t->size = count;
    return index;
}

int weft__sched_copy(weft_sched_t *s, void *dst, const void *src, size_t bytes)
{
    int index = -1;
    task_t *t = task_add(s, TASK_COPY, &index);

    if (t == NULL) {
        return -1;
    }
    t->dst = dst;
    t->srcs[0] = src;
    t->size = bytes;
    return index;
}

int weft__sched_nop(weft_sched_t *s)
{
    int index = -1;

    task_add(s, TASK_NOP, &index);
    return index;
}

int weft__sched_poll(weft_sched_t *s, weft_sched_poll_fn fn, void (*cancel)(void *state),
                     void *state)
{
    int index = -1;
    task_t *t = task_add(s, TASK_POLL, &index);

    if (t == NULL) {
        return -1;
    }
    t->poll = fn;
    t->poll_cancel = cancel;
    t->dst = state;
    s->npoll++;
    return index;
}

void weft__sched_map(weft_sched_t *s, const int *map, int map_size)
{
    s->map = map;
    s->map_size = map_size;
}

int weft__sched_mark(const weft_sched_t *s)
{
    return s->ntasks;
}

int weft__sched_enclose(weft_sched_t *s, int mark, int after)
{
    int n = s->ntasks - mark, join;
    char *flags; /* bit 0: has a predecessor inside, bit 1: has a successor */

    if (s->status != WEFT_OK) {
        return -1;
    }
    flags = calloc((size_t)(n > 0 ? n : 1), 1);
    if (flags == NULL) {
        weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "cannot enclose %d tasks", n));
        return -1;
    }
    for (int e = 0; e < s->nedges; e++) {
        if (s->edges[e].after >= mark) {
            flags[s->edges[e].after - mark] |= 1;
        }
        if (s->edges[e].before >= mark) {
            flags[s->edges[e].before - mark] |= 2;
        }
    }
    join = weft__sched_nop(s);
    for (int i = 0; i < n; i++) {
        if (!(flags[i] & 1)) {
            weft__sched_dep(s, after, mark + i);
        }
        if (!(flags[i] & 2)) {
            weft__sched_dep(s, mark + i, join);
        }
    }
    free(flags);
    return join;
}

void weft__sched_dep(weft_sched_t *s, int before, int after)
{
    if (before < 0 || after < 0 || s->status != WEFT_OK) {
        return;
    }
    if (grow((void **)&s->edges, &s->cap_edges, s->nedges + 1, sizeof(edge_t)) != 0) {
        weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "cannot grow schedule edges"));
        return;
    }
    s->edges[s->nedges].before = before;
    s->edges[s->nedges].after = after;
    s->nedges++;
}

int weft__sched_exchange(weft_sched_t *s, int after, uint32_t slot, int to, const void *sbuf,
                         size_t sbytes, int from, void *rbuf, size_t rbytes)
{
    int send = weft__sched_send(s, to, slot, sbuf, sbytes);
    int recv = weft__sched_recv(s, from, slot, rbuf, rbytes);
    int done = weft__sched_nop(s);

    weft__sched_dep(s, after, send);
    weft__sched_dep(s, after, recv);
    weft__sched_dep(s, send, done);
    weft__sched_dep(s, recv, done);
    return done;
}

void *weft__sched_scratch(weft_sched_t *s, size_t bytes)
{
    scratch_t *sc;

    if (s->status != WEFT_OK) {
        return NULL;
    }
    if (s->nscratch == s->cap_scratch) {
        scratch_t *p = realloc(s->scratch, (size_t)(s->cap_scratch + 4) * sizeof(*p));

        if (p == NULL) {
            weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "cannot track scratch memory"));
            return NULL;
        }
        for (int i = s->cap_scratch; i < s->cap_scratch + 4; i++) {
            p[i].buf = NULL;
            p[i].cap = 0;
        }
        s->scratch = p;
        s->cap_scratch += 4;
    }
    sc = &s->scratch[s->nscratch];
    /* scratch is memory of the operation's type: device kernels reduce it */
    if (sc->cap < bytes || sc->buf == NULL || sc->dev != s->dev) {
        weft_status_t status;

        if (sc->buf != NULL) {
            sc->dev->free(sc->buf);
        }
        sc->buf = NULL;
        sc->cap = 0;
        status = s->dev->alloc(bytes ? bytes : 1, &sc->buf);
        if (status != WEFT_OK) {
            weft__sched_fail(s, status);
            return NULL;
        }
        sc->dev = s->dev;
        sc->cap = bytes;
    }
    s->nscratch++;
    return sc->buf;
}

size_t weft__sched_num_tasks(const weft_sched_t *s)
{
    return (size_t)s->ntasks;
}

uint32_t weft__sched_seq(const weft_sched_t *s)
{
    return s->seq;
}

void weft__sched_record(weft_sched_t *s, long handle)
{
    s->record = handle;
    weft__record_sched(s->comm, handle, s);
}

static void record_end(weft_sched_t *s)
{
    if (WEFT_UNLIKELY(weft__obs_flags != 0) && !s->desc.p2p) {
        weft__obs_sched_end(s, s->status);
    }
    if (s->record >= 0) {
        weft__record_end(s->comm, s->record, s->status);
        s->record = -1;
    }
}

uint64_t weft__sched_start_ns(const weft_sched_t *s)
{
    return s->start_ns;
}

void weft__sched_task_info(const weft_sched_t *s, int index, weft_sched_task_info_t *info)
{
    const task_t *t = &s->tasks[index];

    info->phase = t->phase;
    info->step = t->step;
    info->peer = t->kind == TASK_SEND || t->kind == TASK_RECV ? t->peer : -1;
    info->send_bytes = t->kind == TASK_SEND ? t->size : 0;
    info->recv_bytes = t->kind == TASK_RECV ? t->size : 0;
    info->t_start = t->t_start;
    info->t_end = t->t_end;
}

weft_comm_t weft__sched_comm(const weft_sched_t *s)
{
    return s->comm;
}

const weft_op_desc_t *weft__sched_desc(const weft_sched_t *s)
{
    return &s->desc;
}

const weft_device_ops_t *weft__sched_dev(const weft_sched_t *s)
{
    return s->dev;
}

/* After the last task: the once-only division of WEFT_AVG. */
static weft_status_t finalize(weft_sched_t *s)
{
    if (s->desc.avg_buf != NULL) {
        return s->dev->avg_finalize(s->desc.avg_buf, s->desc.avg_count, s->desc.dtype,
                                    s->desc.avg_divisor);
    }
    return WEFT_OK;
}

weft_status_t weft__sched_start(weft_sched_t *s)
{
    if (s->status != WEFT_OK) {
        return s->status;
    }
    if (s->nedges > s->cap_succ) {
        free(s->succ);
        s->succ = malloc((size_t)s->nedges * sizeof(int));
        s->cap_succ = s->succ != NULL ? s->nedges : 0;
    }
    if (s->ntasks > s->cap_index) {
        free(s->ready);
        free(s->active);
        s->ready = malloc((size_t)s->ntasks * sizeof(int));
        s->active = malloc((size_t)s->ntasks * sizeof(int));
        s->cap_index = s->ready != NULL && s->active != NULL ? s->ntasks : 0;
    }
    if (s->cap_succ < s->nedges || s->cap_index < s->ntasks) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "cannot start a schedule"));
    }
    for (int e = 0; e < s->nedges; e++) {
        s->tasks[s->edges[e].before].succ_count++;
        s->tasks[s->edges[e].after].ndeps++;
    }
    for (int i = 0, pos = 0; i < s->ntasks; i++) {
        s->tasks[i].succ_first = pos;
        pos += s->tasks[i].succ_count;
        s->tasks[i].succ_count = 0;
    }
    for (int e = 0; e < s->nedges; e++) {
        task_t *b = &s->tasks[s->edges[e].before];

        s->succ[b->succ_first + b->succ_count++] = s->edges[e].after;
    }
    /* push in reverse so that tasks without dependencies start in build order */
    for (int i = s->ntasks - 1; i >= 0; i--) {
        if (s->tasks[i].ndeps == 0) {
            s->ready[s->nready++] = i;
        }
    }
    s->started = 1;
    s->status = s->ntasks > 0 ? WEFT_INPROGRESS : WEFT_OK;
    s->start_ns = weft__time_ns();
    s->deadline_ns = weft__deadline_ns();
    if (s->status == WEFT_INPROGRESS) {
        s->next_active = s->comm->active;
        s->comm->active = s;
        s->linked = 1;
        busy_add(s->comm);
    } else {
        s->status = finalize(s);
        record_end(s);
    }
    return WEFT_OK;
}

static void task_complete(weft_sched_t *s, int index)
{
    task_t *t = &s->tasks[index];

    t->completed = 1;
    if (WEFT_UNLIKELY(weft__obs_flags & WEFT_OBS_TRACE) && t->kind != TASK_NOP) {
        t->t_end = weft__time_ns();
    }
    for (int k = 0; k < t->succ_count; k++) {
        int next = s->succ[t->succ_first + k];

        if (--s->tasks[next].ndeps == 0) {
            s->ready[s->nready++] = next;
        }
    }
    s->ndone++;
}

static weft_status_t task_execute(weft_sched_t *s, int index)
{
    task_t *t = &s->tasks[index];
    weft_comm_t comm = s->comm;
    uint64_t tag;

    switch (t->kind) {
    case TASK_SEND:
    case TASK_RECV:
        tag = weft__tag_make(comm->id, s->seq, t->slot);
        if (t->kind == TASK_SEND) {
            return comm->p2p->isend(comm->p2p_ep, t->peer, t->dst, t->size, s->dev->memtype, tag,
                                    &t->req);
        }
        return comm->p2p->irecv(comm->p2p_ep, t->peer, t->dst, t->size, s->dev->memtype, tag,
                                &t->req);
    case TASK_REDUCE:
        if (t->size == 0) {
            return WEFT_OK;
        }
        return s->dev->reduce(t->dst, t->srcs, t->nsrcs, t->size, s->desc.dtype, s->desc.op);
    case TASK_COPY:
        if (t->size == 0 || t->dst == t->srcs[0]) {
            return WEFT_OK;
        }
        return s->dev->copy(t->dst, t->srcs[0], t->size);
    case TASK_NOP:
        return WEFT_OK;
    case TASK_POLL:
        return t->poll(t->dst, &t->peer);
    }
    return weft__error(WEFT_ERR_INTERNAL, "unknown task kind %d", (int)t->kind);
}

/*
 * Whether a failed schedule breaks its communicator (weft__comm_fail): a
 * collective always does (the ranks can no longer agree on what runs); a
 * point-to-point operation that timed out or met a message of another size
 * fails alone, as MPI's receive does, and the communicator goes on.
 */
static weft_status_t fail_comm(weft_sched_t *s, weft_status_t status)
{
    if (s->desc.p2p && (status == WEFT_ERR_MISMATCH || status == WEFT_ERR_TIMEOUT)) {
        return status;
    }
    return weft__comm_fail(s->comm, status);
}

static weft_status_t fail_now(weft_sched_t *s, weft_status_t status, int index)
{
    const task_t *t = &s->tasks[index];

    if (status == WEFT_ERR_MISMATCH || status == WEFT_ERR_PEER_FAILED ||
        status == WEFT_ERR_TRANSPORT) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", weft__error_detail());
        weft__error(status, "%s seq %u (%s, count %zu, %s %s) %s step %d, rank %d: %s",
                    s->desc.coll, s->seq, s->desc.algo, s->desc.count,
                    weft_dtype_name(s->desc.dtype), weft_op_name(s->desc.op), t->phase, t->step,
                    t->peer, detail);
    }
    cancel_active(s);
    s->status = status;
    unlink_active(s);
    record_end(s);
    return fail_comm(s, status);
}

weft_status_t weft__sched_progress(weft_sched_t *s, int *done_p)
{
    int events = 0;
    weft_comm_t comm = s->comm;

    *done_p = 0;
    if (s->status != WEFT_INPROGRESS) {
        *done_p = 1;
        return s->status;
    }
    for (;;) {
        while (s->nready > 0) {
            int index = s->ready[--s->nready];
            task_t *t = &s->tasks[index];
            weft_status_t status;

            if (WEFT_UNLIKELY(weft__obs_flags & WEFT_OBS_TRACE) && t->kind != TASK_NOP) {
                t->t_start = weft__time_ns(); /* joins take no time: not timed */
            }
            status = task_execute(s, index);

            if (status == WEFT_INPROGRESS && t->kind == TASK_POLL) {
                s->active[s->nactive++] = index;
                s->npoll_active++;
                continue;
            }
            if (status != WEFT_OK) {
                *done_p = 1;
                return fail_now(s, status, index);
            }
            if (t->kind == TASK_SEND || t->kind == TASK_RECV) {
                s->active[s->nactive++] = index;
            } else {
                task_complete(s, index);
            }
            events++;
        }
        if (s->nactive > s->npoll_active) {
            /* messages outstanding: only then is the transport worth a call */
            events += comm->p2p->progress(comm->p2p_ep);
        }
        for (int i = 0; i < s->nactive;) {
            int index = s->active[i];
            task_t *t = &s->tasks[index];
            int done = 0;
            weft_status_t status;

            if (t->kind == TASK_POLL) {
                status = t->poll(t->dst, &t->peer);
                done = status != WEFT_INPROGRESS;
                s->npoll_active -= done;
            } else {
                status = comm->p2p->test(comm->p2p_ep, t->req, &done);
            }
            if (!done) {
                i++;
                continue;
            }
            t->req = NULL;
            s->active[i] = s->active[--s->nactive];
            if (status != WEFT_OK) {
                *done_p = 1;
                return fail_now(s, status, index);
            }
            task_complete(s, index);
            events++;
        }
        if (s->nready == 0) {
            break;
        }
    }
    if (s->ndone == s->ntasks) {
        s->status = finalize(s);
        *done_p = 1;
        unlink_active(s);
        record_end(s);
    }
    (void)events;
    return s->status;
}

void weft__sched_where(const weft_sched_t *s, char *buf, size_t len)
{
    const char *phase = s->phase;
    int step = -1;
    size_t at;

    for (int i = 0; i < s->nactive; i++) {
        const task_t *t = &s->tasks[s->active[i]];

        if (step < 0 || t->step < step) {
            phase = t->phase;
            step = t->step;
        }
    }
    at = (size_t)snprintf(buf, len, "%s step %d, %d of %d tasks done, waiting for rank(s)", phase,
                          step, s->ndone, s->ntasks);
    for (int i = 0, n = 0; i < s->nactive && at < len; i++) {
        const task_t *t = &s->tasks[s->active[i]];

        if (t->peer >= 0) {
            at += (size_t)snprintf(buf + at, len - at, "%s%d%s", n++ ? "," : " ", t->peer,
                                   t->kind == TASK_SEND ? "(send)" : "");
        }
    }
}

/* One line naming the operation, where it is, and whom it waits for. */
static weft_status_t report_timeout(weft_sched_t *s, double seconds)
{
    char peers[256] = "";
    size_t len = 0;
    const char *phase = "?";
    int step = -1;
    int *seen = calloc((size_t)s->comm->size, sizeof(int));

    for (int i = 0; i < s->nactive; i++) {
        const task_t *t = &s->tasks[s->active[i]];

        if (step < 0 || t->step < step) {
            phase = t->phase;
            step = t->step;
        }
        if (seen != NULL && t->peer >= 0 && !seen[t->peer] && len < sizeof(peers) - 16) {
            seen[t->peer] = 1;
            len += (size_t)snprintf(peers + len, sizeof(peers) - len, "%s%d%s", len ? "," : "",
                                    t->peer, t->kind == TASK_SEND ? "(send)" : "");
        }
    }
    free(seen);
    weft__log_error("%s seq %u (%s, count %zu, %s %s) timed out after %.1f s in %s step %d; "
                    "%d of %d tasks done; waiting for rank(s) %s",
                    s->desc.coll, s->seq, s->desc.algo, s->desc.count,
                    weft_dtype_name(s->desc.dtype), weft_op_name(s->desc.op), seconds, phase, step,
                    s->ndone, s->ntasks, len ? peers : "none");
    return weft__error(WEFT_ERR_TIMEOUT,
                       "%s seq %u (%s) timed out after %.1f s in %s step %d waiting for rank(s) %s",
                       s->desc.coll, s->seq, s->desc.algo, seconds, phase, step,
                       len ? peers : "none");
}

/* A schedule that can no longer complete: cancel it, record status. */
static void fail_sched(weft_sched_t *s, weft_status_t status)
{
    cancel_active(s);
    s->status = status;
    unlink_active(s);
    record_end(s);
    fail_comm(s, status);
}

/* Complete a detached schedule: nobody will wait for it. */
static void reap(weft_sched_t *s)
{
    if (s->detached && !s->linked) {
        weft__sched_destroy(s);
    }
}

int weft__comm_progress(weft_comm_t comm)
{
    int completed = 0;
    weft_sched_t *s = comm->active;

    while (s != NULL) {
        weft_sched_t *next = s->next_active;
        int before = s->ndone, done = 0;

        weft__sched_progress(s, &done);
        completed += s->ndone - before;
        if (done) {
            completed++;
            reap(s);
        } else if (s->detached && weft__time_ns() >= s->deadline_ns) {
            fail_sched(s, report_timeout(s, (double)(weft__time_ns() - s->start_ns) / 1e9));
            reap(s);
        }
        s = next;
    }
    return completed;
}

/* The communicator cannot go on (aborted, a peer died): fail every
 * unfinished schedule of it with the reason. */
static void fail_all(weft_comm_t comm, weft_status_t status)
{
    char detail[256];

    snprintf(detail, sizeof(detail), "%s", weft__error_detail());
    while (comm->active != NULL) {
        weft_sched_t *s = comm->active;

        fail_sched(s, weft__error(status, "%s seq %u (%s, count %zu): %s", s->desc.coll, s->seq,
                                  s->desc.algo, s->desc.count, detail));
        weft__log(status == WEFT_ERR_ABORTED ? WEFT_LOG_INFO : WEFT_LOG_ERROR, "%s",
                  weft_last_error());
        reap(s);
    }
}

/*
 * A peer's notice that it timed out, while this operation's own deadline is
 * near (in its last quarter): keep waiting until then, so that every rank
 * stuck in the same operation names the ranks it waits for itself. A rank
 * whose deadline is far (it came late, or waits in another operation)
 * fails at once.
 */
static int own_deadline_near(const weft_sched_t *s, weft_status_t health)
{
    uint64_t now = weft__time_ns();

    return health == WEFT_ERR_TIMEOUT && now < s->deadline_ns &&
           s->deadline_ns - now <= (s->deadline_ns - s->start_ns) / 4;
}

int weft__sched_test(weft_sched_t *s, weft_status_t *status_p)
{
    weft_status_t health;

    if (s->status == WEFT_INPROGRESS) {
        progress_all(s->comm);
    }
    if (s->status == WEFT_INPROGRESS) {
        /* past its own deadline, a rank reports its own timeout (not a
         * peer's notice of the same) */
        if (weft__time_ns() >= s->deadline_ns) {
            fail_sched(s, report_timeout(s, (double)(weft__time_ns() - s->start_ns) / 1e9));
        } else if ((health = weft__comm_health(s->comm)) != WEFT_OK &&
                   !own_deadline_near(s, health)) {
            fail_all(s->comm, health);
        }
    }
    *status_p = s->status;
    return s->status != WEFT_INPROGRESS;
}

void weft__sched_detach(weft_sched_t *s)
{
    s->detached = 1;
    reap(s);
}

/* A function task of the communicator is waiting: no message will wake a
 * sleeper when its condition comes true. */
static int comm_polling(weft_comm_t comm)
{
    for (const weft_sched_t *s = comm->active; s != NULL; s = s->next_active) {
        if (s->npoll_active > 0) {
            return 1;
        }
    }
    return 0;
}

static int polling(weft_comm_t comm)
{
    int any = comm_polling(comm);

    for (int i = 0; i < busy.n && !any; i++) {
        any = comm_polling(busy.comm[i]);
    }
    return any;
}

weft_status_t weft__sched_wait(weft_sched_t *s)
{
    weft_comm_t comm = s->comm;
    uint64_t spin_ns = comm->oversubscribed ? 0 : (uint64_t)weft__coll_config.spin_us * 1000;
    uint64_t yield_ns = comm->p2p->prompt_wakeup ? 0 : (uint64_t)weft__coll_config.yield_us * 1000;
    uint64_t idle_since = 0, idle_ns = 0;
    weft_status_t status;
    int idle = 0;

    while (s->status == WEFT_INPROGRESS) {
        /* every unfinished operation of the communicator moves, not only
         * this one: a peer may need our part of another to reach this one */
        if (progress_all(comm) > 0) {
            idle = 0;
            continue;
        }
        /* Waiting, in three stages: busy-poll (lowest latency while every
         * rank has a core), then poll but yield the core between polls (a
         * rank sharing it runs at once), then let the transport sleep until
         * a message arrives. Ranks that outnumber the cores skip the first;
         * transports that wake a sleeper promptly skip the second. While
         * busy-polling, the clock and the health checks run every 64 polls. */
        if (++idle < 64) {
            continue;
        }
        if (idle == 64) {
            idle_since = weft__time_ns();
            idle_ns = 0;
        } else if (idle_ns < spin_ns && idle % 64 != 0) {
            continue;
        } else {
            idle_ns = weft__time_ns() - idle_since;
        }
        if (weft__time_ns() >= s->deadline_ns) { /* first: see weft__sched_test */
            fail_sched(s, report_timeout(s, (double)(weft__time_ns() - s->start_ns) / 1e9));
            break;
        }
        status = weft__comm_health(comm);
        if (status != WEFT_OK && !own_deadline_near(s, status)) {
            fail_all(comm, status);
            break;
        }
        if (idle_ns >= spin_ns + yield_ns && !polling(comm)) {
            comm->p2p->idle_wait(comm->p2p_ep, 1000000);
        } else if (idle_ns >= spin_ns) {
            sched_yield();
        }
    }
    return s->status;
}

weft_status_t weft__sched_run(weft_sched_t *s)
{
    weft_status_t status = weft__sched_start(s);

    return status != WEFT_OK ? status : weft__sched_wait(s);
}
