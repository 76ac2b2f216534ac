/*
 * Schedule engine: starting a built schedule, progressing it (ready tasks
 * sit on a stack; posted messages in an active list that progress tests),
 * waiting with a deadline, and progressing every unfinished operation of
 * this thread while one waits.
 */
#include "coll/sched_impl.h"
#include "coll/comm_state.h"

#include "coll/coll.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    struct weft_comm *comm[BUSY_MAX];
    int n;
} busy;

static void busy_add(struct weft_comm *comm)
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

void weft__sched_busy_remove(struct weft_comm *comm)
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
static int progress_all(struct weft_comm *comm)
{
    int completed = weft__comm_progress(comm);

    for (int i = 0; i < busy.n;) {
        struct weft_comm *c = busy.comm[i];

        if (c != comm) {
            completed += weft__comm_progress(c);
        }
        if (c->coll->active == NULL) {
            busy.comm[i] = busy.comm[--busy.n];
        } else {
            i++;
        }
    }
    return completed;
}

void weft__sched_stage_out(weft_sched_t *s, const weft_device_ops_t *dev, void *stage, void *dst,
                           const void *from, size_t bytes)
{
    s->stage_dev = dev;
    s->stage = stage;
    s->stage_dst = dst;
    s->stage_from = from;
    s->stage_bytes = bytes;
}

/* After the last task: the once-only division of WEFT_AVG, and a host-staged result's copy
 * out. */
static weft_status_t finalize(weft_sched_t *s)
{
    weft_status_t status = WEFT_OK;

    if (s->desc.avg_buf != NULL) {
        status = s->dev->avg_finalize(s->desc.avg_buf, s->desc.avg_count, s->desc.dtype,
                                      s->desc.avg_divisor);
    }
    if (s->stage != NULL && status == WEFT_OK && s->stage_bytes > 0) {
        status = s->stage_dev->copy(s->stage_dst, s->stage_from, s->stage_bytes);
    }
    weft__sched_stage_drop(s);
    return status;
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
    /* the coarse clock for the deadline (a fifth of the fine one's cost, and ms do not matter
     * there); the fine one only for the observers' times */
    s->begun_ns = weft__time_coarse_ns();
    s->deadline_ns = weft__comm_deadline_from(s->comm, s->begun_ns);
    s->start_ns = WEFT_UNLIKELY(weft__obs_flags != 0) ? weft__time_ns() : 0;
    if (s->status == WEFT_INPROGRESS) {
        s->next_active = s->comm->coll->active;
        s->comm->coll->active = s;
        s->linked = 1;
        busy_add(s->comm);
    } else {
        s->status = finalize(s);
        weft__sched_record_end(s);
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
    struct weft_comm *comm = s->comm;
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
    weft__sched_cancel_active(s);
    s->status = status;
    weft__sched_unlink_active(s);
    weft__sched_record_end(s);
    return fail_comm(s, status);
}

/* Execute every ready task: post its message, or run it (a task it
 * completes may make more ready). WEFT_OK, or the failure that failed s. */
static weft_status_t run_ready(weft_sched_t *s, int *events_p)
{
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
            return fail_now(s, status, index);
        }
        if (t->kind == TASK_SEND || t->kind == TASK_RECV) {
            s->active[s->nactive++] = index;
        } else {
            task_complete(s, index);
        }
        (*events_p)++;
    }
    return WEFT_OK;
}

weft_status_t weft__sched_post(weft_sched_t *s)
{
    int events = 0;

    return s->status == WEFT_INPROGRESS ? run_ready(s, &events) : s->status;
}

weft_status_t weft__sched_adopt(weft_sched_t *s, weft_p2p_req_t *req, weft_status_t status)
{
    int index;

    if (s->status != WEFT_INPROGRESS || s->nready != 1 || s->ntasks != 1 ||
        (s->tasks[0].kind != TASK_SEND && s->tasks[0].kind != TASK_RECV)) {
        return weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL,
                                               "%s: only a started one-message schedule adopts its "
                                               "message",
                                               s->desc.coll));
    }
    index = s->ready[--s->nready];
    if (req == NULL) { /* it failed before: as if it had failed here */
        return fail_now(s, status, index);
    }
    s->tasks[index].req = req;
    s->active[s->nactive++] = index;
    return WEFT_OK;
}

weft_status_t weft__sched_progress(weft_sched_t *s, int *done_p)
{
    int events = 0;
    struct weft_comm *comm = s->comm;

    *done_p = 0;
    if (s->status != WEFT_INPROGRESS) {
        *done_p = 1;
        return s->status;
    }
    for (;;) {
        weft_status_t status = run_ready(s, &events);

        if (status != WEFT_OK) {
            *done_p = 1;
            return status;
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
                /* a receive from any source learns who sent it (only then:
                 * a split communicator maps the rank back) */
                int any = t->peer == WEFT_P2P_ANY;

                status = comm->p2p->test(comm->p2p_ep, t->req, &done, any ? &t->peer : NULL);
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
        weft__sched_unlink_active(s);
        weft__sched_record_end(s);
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
        } else if (t->kind == TASK_RECV) {
            at += (size_t)snprintf(buf + at, len - at, "%sany", n++ ? "," : " ");
        }
    }
}

void weft__sched_pos(const weft_sched_t *s, weft_sched_pos_t *pos, int *peers, int *sending,
                     int max_peers)
{
    pos->phase = s->phase;
    pos->step = -1;
    pos->ndone = s->ndone;
    pos->ntasks = s->ntasks;
    pos->npeers = 0;
    for (int i = 0; i < s->nactive; i++) {
        const task_t *t = &s->tasks[s->active[i]];
        int k = 0;

        if (pos->step < 0 || t->step < pos->step) {
            pos->phase = t->phase;
            pos->step = t->step;
        }
        while (k < pos->npeers && peers[k] != t->peer) {
            k++;
        }
        if (t->peer < 0 || (k == pos->npeers && k == max_peers)) {
            continue;
        }
        if (k == pos->npeers) {
            peers[pos->npeers++] = t->peer;
            sending[k] = 1;
        }
        sending[k] &= t->kind == TASK_SEND;
    }
}

/* One line naming the operation, where it is, and whom it waits for; the time is counted on the
 * deadline's clock since s started. */
static weft_status_t report_timeout(weft_sched_t *s)
{
    double seconds = (double)(weft__time_coarse_ns() - s->begun_ns) / 1e9;
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
        } else if (t->peer < 0 && t->kind == TASK_RECV && len < sizeof(peers) - 16) {
            len += (size_t)snprintf(peers + len, sizeof(peers) - len, "%sany", len ? "," : "");
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
    weft__sched_cancel_active(s);
    s->status = status;
    weft__sched_unlink_active(s);
    weft__sched_record_end(s);
    fail_comm(s, status);
}

/* Complete a detached schedule: nobody will wait for it. */
static void reap(weft_sched_t *s)
{
    if (s->detached && !s->linked) {
        weft__sched_destroy(s);
    }
}

int weft__comm_progress(struct weft_comm *comm)
{
    int completed = 0;
    weft_sched_t *s = comm->coll->active;

    while (s != NULL) {
        weft_sched_t *next = s->next_active;
        int before = s->ndone, done = 0;

        weft__sched_progress(s, &done);
        completed += s->ndone - before;
        if (done) {
            completed++;
            reap(s);
        } else if (s->detached && weft__time_coarse_ns() >= s->deadline_ns) {
            fail_sched(s, report_timeout(s));
            reap(s);
        }
        s = next;
    }
    return completed;
}

/* The communicator cannot go on (aborted, a peer died): fail every
 * unfinished schedule of it with the reason. */
static void fail_all(struct weft_comm *comm, weft_status_t status)
{
    char detail[256];

    snprintf(detail, sizeof(detail), "%s", weft__error_detail());
    while (comm->coll->active != NULL) {
        weft_sched_t *s = comm->coll->active;

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
    uint64_t now = weft__time_coarse_ns();

    return health == WEFT_ERR_TIMEOUT && now < s->deadline_ns &&
           s->deadline_ns - now <= (s->deadline_ns - s->begun_ns) / 4;
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
        if (weft__time_coarse_ns() >= s->deadline_ns) {
            fail_sched(s, report_timeout(s));
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
static int comm_polling(struct weft_comm *comm)
{
    for (const weft_sched_t *s = comm->coll->active; s != NULL; s = s->next_active) {
        if (s->npoll_active > 0) {
            return 1;
        }
    }
    return 0;
}

static int polling(struct weft_comm *comm)
{
    int any = comm_polling(comm);

    for (int i = 0; i < busy.n && !any; i++) {
        any = comm_polling(busy.comm[i]);
    }
    return any;
}

weft_status_t weft__sched_wait(weft_sched_t *s)
{
    struct weft_comm *comm = s->comm;
    uint64_t spin_ns, yield_ns, idle_since = 0, idle_ns = 0;
    weft_status_t status;
    int idle = 0;

    if (s->status != WEFT_INPROGRESS) {
        /* finished, or cancelled with its communicator, whose transport
         * (comm->p2p) may be gone: only the schedule is read */
        return s->status;
    }
    spin_ns = weft__coll_spin_ns(comm);
    yield_ns = comm->p2p->prompt_wakeup ? 0 : (uint64_t)weft__coll_config.yield_us * 1000;

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
         * a message arrives. Ranks that outnumber the cores skip the first
         * (from the first poll: the rank it waits for may need this core);
         * transports that wake a sleeper promptly skip the second. The clock
         * and the health checks run every 64 polls. */
        if (++idle < 64) {
            if (spin_ns == 0) {
                sched_yield();
                comm->coll->yield_polls++;
            } else {
                weft__cpu_relax();
                comm->coll->busy_polls++;
            }
            continue;
        }
        if (idle == 64) {
            idle_since = weft__time_ns();
            idle_ns = 0;
        } else if (idle_ns < spin_ns && idle % 64 != 0) {
            weft__cpu_relax();
            comm->coll->busy_polls++;
            continue;
        } else {
            idle_ns = weft__time_ns() - idle_since;
        }
        if (weft__time_coarse_ns() >= s->deadline_ns) { /* first: see weft__sched_test */
            fail_sched(s, report_timeout(s));
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
            comm->coll->yield_polls++;
        }
    }
    return s->status;
}

weft_status_t weft__sched_wait_freed(struct weft_comm *comm)
{
    weft_status_t first = WEFT_OK;
    weft_sched_t *s;

    for (;;) {
        for (s = comm->coll->active; s != NULL && !s->detached; s = s->next_active) {
        }
        if (s == NULL) {
            return first;
        }
        s->detached = 0; /* this wait's now: nobody else holds it */
        if (weft__sched_wait(s) != WEFT_OK && first == WEFT_OK) {
            char detail[256];

            snprintf(detail, sizeof(detail), "%s", weft__error_detail());
            first = weft__error(s->status,
                                "%s seq %u (%s), freed unfinished before this collective, "
                                "failed: %s",
                                s->desc.coll, s->seq, s->desc.algo, detail);
        }
        weft__sched_destroy(s);
    }
}

weft_status_t weft__sched_run(weft_sched_t *s)
{
    weft_status_t status = weft__sched_start(s);

    return status != WEFT_OK ? status : weft__sched_wait(s);
}
