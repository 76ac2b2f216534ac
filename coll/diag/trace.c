/*
 * WEFT_TRACE: a Chrome / Perfetto trace per rank (Trace Event Format, JSON
 * object form), opened in chrome://tracing or ui.perfetto.dev.
 *
 * - one process per rank: pid = the rank in the communicator the job
 *   started with, named "rank N (host)";
 * - per communicator, tracks (tids) of operations and of steps: one "X"
 *   (complete) event per collective (name: the collective; args: seq,
 *   count, dtype, op, root, algorithm, form, bytes, comm, status; form: who
 *   ran it: "call" (the caller's thread), "device task" (a stream, inside a
 *   node), "progress thread" (an enqueued one), with " (host-staged)" where
 *   device buffers went through host memory once) and one per step
 *   of its schedule (name: "<phase> <step>"; args: seq, phase, step, bytes
 *   sent and received, the peers, tasks). Operations that overlap in time
 *   (nonblocking ones, pipelined steps) go to further tracks of the same
 *   communicator, so that every track nests properly;
 * - timestamps are CLOCK_MONOTONIC in microseconds (ns precision): the
 *   files of the ranks of one host line up when loaded together.
 *
 * Events are buffered (WEFT_TRACE_EVENTS per rank, grown as needed); once
 * full, later events are counted as dropped ("otherData" of the file and
 * one warning). The file is written whole, to a private temporary renamed
 * over the final one (coll/diag/file.h), at weft_finalize, when the last
 * communicator sharing the trace goes, and when one of them fails (again
 * later, complete).
 */
#include "coll/diag/obs.h"

#include "coll/coll.h"
#include "coll/diag/file.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LANES 16        /* tracks per communicator for operations, and for steps */
#define TRACK_STRIDE 64 /* tids: comm * TRACK_STRIDE + 1 + lane (+ LANES for steps) */
#define PEERS 8         /* peers named per step event */

typedef struct trace_event {
    uint64_t t0;
    uint64_t t1;
    const char *name; /* the collective, or the step's phase (static strings) */
    const char *algo;
    const char *form;
    uint32_t seq;
    int tid;
    int comm; /* index into trace->comms */
    int is_step;
    int step;
    int status;
    int dtype;
    int op;   /* -1: not a reduction */
    int root; /* -1: not a rooted collective */
    int ntasks;
    int npeers; /* distinct peers seen; the first PEERS are listed */
    size_t count;
    size_t bytes;      /* op: its size; step: sent + received */
    size_t send_bytes; /* step */
    size_t recv_bytes;
    int peers[PEERS];
} trace_event_t;

typedef struct trace_comm {
    uint32_t id;
    int rank;
    int size;
    uint64_t op_end[LANES]; /* latest end of an event on each track */
    uint64_t step_end[LANES];
    int op_lanes; /* tracks used */
    int step_lanes;
} trace_comm_t;

struct weft_trace {
    pthread_mutex_t lock;
    int refs;
    int rank;
    int size;
    char *path;
    char host[64];
    trace_event_t *ev;
    size_t nev;
    size_t cap;
    size_t max;
    size_t dropped;
    trace_comm_t *comms;
    int ncomms;
    trace_event_t *steps; /* scratch: one operation's steps */
    size_t cap_steps;
    struct weft_trace *next; /* open traces */
};

static pthread_mutex_t traces_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_trace *traces;

/* The pattern with %r, %p, %% replaced; '.<rank>' appended without %r. */
static char *expand(const char *pattern, int rank)
{
    size_t len = strlen(pattern) + 64;
    char *out = malloc(len), *at = out;
    int has_rank = 0;

    if (out == NULL) {
        return NULL;
    }
    for (const char *p = pattern; *p != '\0'; p++) {
        if (*p == '%' && (p[1] == 'r' || p[1] == 'p')) {
            has_rank |= p[1] == 'r';
            at += sprintf(at, "%d", p[1] == 'r' ? rank : (int)getpid());
            p++;
        } else {
            *at++ = *p;
            p += *p == '%'; /* %%: one percent sign (the parser allows nothing else) */
        }
        if ((size_t)(at - out) + 24 > len) {
            char *grown = realloc(out, len *= 2);

            if (grown == NULL) {
                free(out);
                return NULL;
            }
            at = grown + (at - out);
            out = grown;
        }
    }
    *at = '\0';
    if (!has_rank) {
        sprintf(at, ".%d", rank);
    }
    return out;
}

static int path_taken(const char *path)
{
    for (struct weft_trace *t = traces; t != NULL; t = t->next) {
        if (strcmp(t->path, path) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A path no other open trace of this process writes: two jobs with the same
 * rank in one process get "<path>", "<path>.2", "<path>.3"... Under
 * traces_lock; takes path. */
static char *unique_path(char *path)
{
    char *cand = path;

    for (int k = 2; cand != NULL && path_taken(cand); k++) {
        if (cand != path) {
            free(cand);
        }
        if ((cand = malloc(strlen(path) + 16)) != NULL) {
            sprintf(cand, "%s.%d", path, k);
        }
    }
    if (cand != path) {
        free(path);
    }
    return cand;
}

struct weft_trace *weft__trace_open(struct weft_comm *comm)
{
    struct weft_trace *t = calloc(1, sizeof(*t));
    char *path;

    if (t == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&traces_lock);
    path = expand(weft__obs_config.trace, comm->rank);
    path = path != NULL ? unique_path(path) : NULL;
    if (path == NULL) {
        pthread_mutex_unlock(&traces_lock);
        free(t);
        weft__log_warn("WEFT_TRACE: no memory for a trace; rank %d is not traced", comm->rank);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->refs = 1;
    t->rank = comm->rank;
    t->size = comm->size;
    t->path = path;
    t->max = weft__obs_config.trace_events;
    if (gethostname(t->host, sizeof(t->host) - 1) != 0) {
        strcpy(t->host, "?");
    }
    t->next = traces;
    traces = t;
    pthread_mutex_unlock(&traces_lock);
    return t;
}

int weft__trace_add_comm(struct weft_trace *t, struct weft_comm *comm)
{
    trace_comm_t *grown;
    int index;

    pthread_mutex_lock(&t->lock);
    index = t->ncomms;
    grown = realloc(t->comms, (size_t)(index + 1) * sizeof(*grown));
    if (grown != NULL) {
        t->comms = grown;
        memset(&grown[index], 0, sizeof(*grown));
        grown[index].id = comm->id;
        grown[index].rank = comm->rank;
        grown[index].size = comm->size;
        t->ncomms++;
    } else {
        index = -1; /* its operations are not traced */
    }
    pthread_mutex_unlock(&t->lock);
    return index;
}

void weft__trace_ref(struct weft_trace *t)
{
    pthread_mutex_lock(&t->lock);
    t->refs++;
    pthread_mutex_unlock(&t->lock);
}

void weft__trace_put(struct weft_trace *t)
{
    int last;

    pthread_mutex_lock(&t->lock);
    last = --t->refs == 0;
    pthread_mutex_unlock(&t->lock);
    if (!last) {
        return;
    }
    weft__trace_write(t);
    pthread_mutex_lock(&traces_lock);
    for (struct weft_trace **p = &traces; *p != NULL; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            break;
        }
    }
    pthread_mutex_unlock(&traces_lock);
    pthread_mutex_destroy(&t->lock);
    free(t->ev);
    free(t->steps);
    free(t->comms);
    free(t->path);
    free(t);
}

/* Room for one more event (NULL: full, counted as dropped). */
static trace_event_t *event_add(struct weft_trace *t)
{
    if (t->nev == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        trace_event_t *grown;

        cap = cap < t->max ? cap : t->max;
        if (cap <= t->nev || (grown = realloc(t->ev, cap * sizeof(*grown))) == NULL) {
            if (t->dropped++ == 0) {
                weft__log_warn("WEFT_TRACE: rank %d keeps %zu events (WEFT_TRACE_EVENTS); later "
                               "ones are dropped and counted in %s",
                               t->rank, t->nev, t->path);
            }
            return NULL;
        }
        t->ev = grown;
        t->cap = cap;
    }
    memset(&t->ev[t->nev], 0, sizeof(t->ev[0]));
    return &t->ev[t->nev++];
}

/* The first track whose events all ended by t0 (the last one if none). */
static int lane(uint64_t *ends, int *used, uint64_t t0, uint64_t t1)
{
    int k = 0;

    while (k < LANES - 1 && ends[k] > t0) {
        k++;
    }
    ends[k] = ends[k] > t1 ? ends[k] : t1;
    *used = *used > k + 1 ? *used : k + 1;
    return k;
}

static void add_peer(trace_event_t *e, int peer)
{
    int n = e->npeers < PEERS ? e->npeers : PEERS;

    if (peer < 0) {
        return;
    }
    for (int i = 0; i < n; i++) {
        if (e->peers[i] == peer) {
            return;
        }
    }
    if (e->npeers < PEERS) {
        e->peers[e->npeers] = peer;
    }
    e->npeers++; /* past PEERS: counted, not listed (and not deduplicated) */
}

/* The schedule's steps (tasks grouped by their label) into t->steps;
 * returns how many, -1 without memory. A task that started but never
 * completed (the operation failed) counts as running until end_ns. */
static int gather_steps(struct weft_trace *t, weft_sched_t *s, uint64_t end_ns)
{
    int ntasks = (int)weft__sched_num_tasks(s), nsteps = 0, last = 0;

    for (int i = 0; i < ntasks; i++) {
        weft_sched_task_info_t info;
        trace_event_t *e = NULL;

        weft__sched_task_info(s, i, &info);
        if (info.t_start == 0) {
            continue; /* never ran (the operation failed first) */
        }
        if (info.t_end == 0 || info.t_end > end_ns) {
            info.t_end = end_ns;
        }
        /* tasks of a step are mostly added together: try the last one first */
        if (nsteps > 0 && t->steps[last].name == info.phase && t->steps[last].step == info.step) {
            e = &t->steps[last];
        }
        for (int k = nsteps - 1; e == NULL && k >= 0; k--) {
            if (t->steps[k].name == info.phase && t->steps[k].step == info.step) {
                e = &t->steps[last = k];
            }
        }
        if (e == NULL) {
            if ((size_t)nsteps == t->cap_steps) {
                size_t cap = t->cap_steps ? t->cap_steps * 2 : 64;
                trace_event_t *grown = realloc(t->steps, cap * sizeof(*grown));

                if (grown == NULL) {
                    return -1;
                }
                t->steps = grown;
                t->cap_steps = cap;
            }
            e = &t->steps[last = nsteps++];
            memset(e, 0, sizeof(*e));
            e->name = info.phase;
            e->step = info.step;
            e->t0 = info.t_start;
        }
        e->t0 = info.t_start < e->t0 ? info.t_start : e->t0;
        e->t1 = info.t_end > e->t1 ? info.t_end : e->t1;
        e->send_bytes += info.send_bytes;
        e->recv_bytes += info.recv_bytes;
        e->ntasks++;
        add_peer(e, info.peer);
    }
    return nsteps;
}

/* Whether the op / the root of a collective (weft_coll_kind_t) means something. */
static int reduces(uint32_t kind)
{
    return kind == WEFT_COLL_ALLREDUCE || kind == WEFT_COLL_REDUCE ||
           kind == WEFT_COLL_REDUCE_SCATTER || kind == WEFT_COLL_REDUCE_SCATTER_V;
}

static int rooted(uint32_t kind)
{
    return kind == WEFT_COLL_BCAST || kind == WEFT_COLL_REDUCE || kind == WEFT_COLL_GATHER ||
           kind == WEFT_COLL_SCATTER;
}

static int by_start(const void *a, const void *b)
{
    const trace_event_t *x = a, *y = b;

    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

void weft__trace_op(struct weft_trace *t, int trace_comm, const weft_obs_op_t *op)
{
    trace_comm_t *c;
    trace_event_t *e;
    int nsteps = 0;

    if (trace_comm < 0) {
        return;
    }
    pthread_mutex_lock(&t->lock);
    c = &t->comms[trace_comm];
    if ((e = event_add(t)) != NULL) {
        e->t0 = op->t0_ns;
        e->t1 = op->t1_ns;
        e->name = op->desc->coll;
        e->algo = op->desc->algo;
        e->form = op->desc->form;
        e->seq = op->seq;
        e->comm = trace_comm;
        e->tid = trace_comm * TRACK_STRIDE + 1 + lane(c->op_end, &c->op_lanes, e->t0, e->t1);
        e->status = op->status;
        e->dtype = op->desc->dtype;
        e->op = reduces(op->desc->sig.kind - 1) ? (int)op->desc->op : -1;
        e->root = rooted(op->desc->sig.kind - 1) ? op->desc->sig.root : -1;
        e->count = op->desc->count;
        e->bytes = op->desc->bytes;
    }
    if (op->sched != NULL && (nsteps = gather_steps(t, op->sched, op->t1_ns)) > 0) {
        qsort(t->steps, (size_t)nsteps, sizeof(t->steps[0]), by_start);
    }
    for (int k = 0; k < nsteps; k++) {
        trace_event_t *st = &t->steps[k];

        if ((e = event_add(t)) == NULL) {
            t->dropped += (size_t)(nsteps - k - 1);
            break;
        }
        *e = *st;
        e->is_step = 1;
        e->seq = op->seq;
        e->comm = trace_comm;
        e->bytes = st->send_bytes + st->recv_bytes;
        e->tid =
            trace_comm * TRACK_STRIDE + 1 + LANES + lane(c->step_end, &c->step_lanes, e->t0, e->t1);
    }
    pthread_mutex_unlock(&t->lock);
}

static void write_us(FILE *f, const char *key, uint64_t ns)
{
    fprintf(f, "\"%s\":%llu.%03u", key, (unsigned long long)(ns / 1000), (unsigned)(ns % 1000));
}

static void write_event(FILE *f, const struct weft_trace *t, const trace_event_t *e)
{
    const trace_comm_t *c = &t->comms[e->comm];

    if (e->is_step) {
        fprintf(f, "{\"name\":\"%s %d\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,",
                e->name, e->step, t->rank, e->tid);
    } else {
        fprintf(f, "{\"name\":\"%s\",\"cat\":\"op\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,", e->name,
                t->rank, e->tid);
    }
    write_us(f, "ts", e->t0);
    fputc(',', f);
    write_us(f, "dur", e->t1 > e->t0 ? e->t1 - e->t0 : 0);
    fprintf(f, ",\"args\":{\"seq\":%u,\"comm\":\"%08x\",", e->seq, c->id);
    if (e->is_step) {
        fprintf(f,
                "\"phase\":\"%s\",\"step\":%d,\"bytes\":%zu,\"send_bytes\":%zu,"
                "\"recv_bytes\":%zu,\"tasks\":%d,\"npeers\":%d,\"peers\":[",
                e->name, e->step, e->bytes, e->send_bytes, e->recv_bytes, e->ntasks, e->npeers);
        for (int i = 0; i < e->npeers && i < PEERS; i++) {
            fprintf(f, "%s%d", i ? "," : "", e->peers[i]);
        }
        fputs("]}}", f);
        return;
    }
    fprintf(f, "\"count\":%zu,\"dtype\":\"%s\",", e->count,
            weft_dtype_name((weft_dtype_t)e->dtype));
    if (e->op >= 0) {
        fprintf(f, "\"op\":\"%s\",", weft_op_name((weft_op_t)e->op));
    }
    if (e->root >= 0) {
        fprintf(f, "\"root\":%d,", e->root);
    }
    fprintf(f,
            "\"algorithm\":\"%s\",\"form\":\"%s\",\"bytes\":%zu,\"rank\":%d,\"size\":%d,"
            "\"status\":\"%s\"}}",
            e->algo, e->form != NULL ? e->form : "call", e->bytes, c->rank, c->size,
            weft_status_string((weft_status_t)e->status));
}

static void write_tracks(FILE *f, const struct weft_trace *t)
{
    fprintf(f,
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"name\":\"rank %d (%s)\"}},\n"
            "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"sort_index\":%d}}",
            t->rank, t->rank, t->host, t->rank, t->rank);
    for (int i = 0; i < t->ncomms; i++) {
        const trace_comm_t *c = &t->comms[i];

        for (int k = 0; k < c->op_lanes + c->step_lanes; k++) {
            int step = k >= c->op_lanes, lane = step ? k - c->op_lanes : k;
            int tid = i * TRACK_STRIDE + 1 + (step ? LANES : 0) + lane;

            fprintf(f,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":\"comm %08x (rank %d of %d) %s%s%.0d\"}}"
                    ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"sort_index\":%d}}",
                    t->rank, tid, c->id, c->rank, c->size, step ? "steps" : "operations",
                    lane ? " " : "", lane, t->rank, tid, tid);
        }
    }
}

void weft__trace_write(struct weft_trace *t)
{
    size_t len;
    char *tmp;
    FILE *f;

    pthread_mutex_lock(&t->lock);
    len = strlen(t->path) + 32;
    tmp = malloc(len);
    if (tmp == NULL) {
        pthread_mutex_unlock(&t->lock);
        weft__log_error("WEFT_TRACE: no memory to write %s", t->path);
        return;
    }
    if ((f = weft__diag_file_create(t->path, tmp, len)) == NULL) {
        weft__log_error("WEFT_TRACE: cannot create a file next to %s: %s", t->path,
                        strerror(errno));
        pthread_mutex_unlock(&t->lock);
        free(tmp);
        return;
    }
    fprintf(f,
            "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"rank\":%d,\"ranks\":%d,"
            "\"host\":\"%s\",\"pid\":%d,\"events\":%zu,\"dropped_events\":%zu,"
            "\"clock\":\"CLOCK_MONOTONIC\"},\n\"traceEvents\":[\n",
            t->rank, t->size, t->host, (int)getpid(), t->nev, t->dropped);
    write_tracks(f, t);
    for (size_t i = 0; i < t->nev; i++) {
        fputs(",\n", f);
        write_event(f, t, &t->ev[i]);
    }
    fputs("\n]}\n", f);
    if (weft__diag_file_commit(f, tmp, t->path) != 0) {
        weft__log_error("WEFT_TRACE: cannot write %s: %s", t->path, strerror(errno));
    }
    pthread_mutex_unlock(&t->lock);
    free(tmp);
}

void weft__trace_write_all(void)
{
    pthread_mutex_lock(&traces_lock);
    for (struct weft_trace *t = traces; t != NULL; t = t->next) {
        weft__trace_write(t);
    }
    pthread_mutex_unlock(&traces_lock);
}
