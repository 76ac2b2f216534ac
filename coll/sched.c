/*
 * Schedules: building the graph. Tasks live in one growable array;
 * dependencies are collected as (before, after) edges while building and
 * compiled into a successor list (CSR) at start (coll/sched_engine.c). A
 * communicator keeps its last finished schedule for the next operation.
 */
#include "coll/sched_impl.h"
#include "coll/comm_state.h"

#include "coll/coll.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void weft__sched_unlink_active(weft_sched_t *s)
{
    if (!s->linked) {
        return;
    }
    for (struct weft_sched **p = &s->comm->coll->active; *p != NULL; p = &(*p)->next_active) {
        if (*p == s) {
            *p = s->next_active;
            break;
        }
    }
    s->linked = 0;
}

void weft__sched_cancel_active(weft_sched_t *s)
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
    weft__sched_stage_drop(s);
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

void weft__sched_cache_release(struct weft_comm *comm)
{
    weft__sched_busy_remove(comm);
    /* operations still unfinished when the communicator goes are cancelled */
    while (comm->coll->active != NULL) {
        weft_sched_t *s = comm->coll->active;

        weft__sched_cancel_active(s);
        s->status = weft__error(WEFT_ERR_ABORTED, "%s seq %u: communicator destroyed", s->desc.coll,
                                s->seq);
        weft__sched_unlink_active(s);
        if (s->detached) {
            sched_free(s);
        }
    }
    if (comm->coll->sched_cache != NULL) {
        sched_free(comm->coll->sched_cache);
        comm->coll->sched_cache = NULL;
    }
}

uint32_t weft__comm_peek_seq(const struct weft_comm *comm)
{
    uint32_t seq = comm->seq & WEFT_TAG_SEQ_P2P;

    return seq >= WEFT_TAG_SEQ_RESERVED ? 0 : seq; /* as weft__comm_take_seq skips */
}

uint32_t weft__comm_take_seq(struct weft_comm *comm)
{
    uint32_t seq = comm->seq++ & WEFT_TAG_SEQ_P2P;

    while (seq >= WEFT_TAG_SEQ_RESERVED) { /* reserved: continuations, notices, point-to-point */
        seq = comm->seq++ & WEFT_TAG_SEQ_P2P;
    }
    return seq;
}

weft_status_t weft__sched_create(struct weft_comm *comm, const weft_op_desc_t *desc,
                                 const weft_device_ops_t *dev, weft_sched_t **sched_p)
{
    weft_sched_t *s = comm->coll->sched_cache;

    if (s != NULL) {
        comm->coll->sched_cache = NULL;
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
    weft__sched_stage_drop(s); /* unfinished: the result is not copied out */
    weft__sched_cancel_active(s);
    weft__sched_unlink_active(s);
    if (s->comm->handle != NULL && s->comm->coll->sched_cache == NULL) {
        s->comm->coll->sched_cache = s;
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
    /* a receive from any source (point-to-point only) names no rank */
    const int any = peer == WEFT_P2P_ANY && kind == TASK_RECV;
    int index = -1;
    task_t *t;

    if (s->map != NULL && !any) {
        peer = peer >= 0 && peer < s->map_size ? s->map[peer]
                                               : -1 - peer; /* out of the group's range */
    }
    if (s->status == WEFT_OK &&
        ((peer < 0 && !any) || peer >= s->comm->size || slot > WEFT_TAG_MAX_SLOT)) {
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

void weft__sched_record_end(weft_sched_t *s)
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

int weft__sched_source(const weft_sched_t *s)
{
    if (!s->desc.p2p || s->ntasks != 1 || s->tasks[0].kind != TASK_RECV) {
        return -1;
    }
    return s->tasks[0].peer; /* WEFT_P2P_ANY (-1) until a message matched */
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

struct weft_comm *weft__sched_comm(const weft_sched_t *s)
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
