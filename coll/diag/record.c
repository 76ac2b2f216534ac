/* The flight recorder (coll/diag/record.h). */
#include "coll/diag/record.h"
#include "coll/comm_state.h"

#include "coll/coll.h"
#include "coll/diag/dump.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOTE_BYTES 160

typedef struct record {
    long handle; /* the operation's number on this communicator (0: empty) */
    uint32_t seq;
    uint64_t serial;  /* seq unwrapped: it counts on past WEFT_TAG_SEQ_P2P */
    const char *coll; /* static strings (coll/select.c) */
    const char *algo;
    size_t count;
    weft_dtype_t dtype;
    weft_op_t op;
    int root; /* -1: not a rooted collective */
    uint64_t start_ns;
    uint64_t end_ns;
    weft_record_state_t state;
    weft_status_t status;
    weft_sched_t *sched;   /* while it runs on a schedule */
    char note[NOTE_BYTES]; /* why it failed */
} record_t;

struct weft_recorder {
    record_t *ring;
    size_t cap;          /* a power of two */
    long next;           /* handle of the next operation */
    long shown;          /* the last cap handles */
    uint64_t serial;     /* of the last operation recorded */
    unsigned mark;       /* weft__record_mark */
    const char *pending; /* weft__record_pending */
};

/* The kernel's tick clock: a few nanoseconds to read where CLOCK_MONOTONIC
 * takes tens (the recorder runs on every operation, 8-byte ones included),
 * at the tick's resolution (1-4 ms), which is what telling a hang needs. */
uint64_t weft__record_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static record_t *slot(struct weft_comm *comm, long handle)
{
    struct weft_recorder *r = comm->coll->recorder;
    record_t *rec;

    if (r == NULL || handle <= 0) {
        return NULL;
    }
    rec = &r->ring[(size_t)handle & (r->cap - 1)];
    return rec->handle == handle ? rec : NULL;
}

/* The unwrapped number of sequence number seq, one just taken or about to be
 * taken (comm->seq is then a step or two past it, or at it): the value of the
 * 32-bit counter comm->seq nearest to it that masks to seq, widened to 64 bits
 * from the previous operation's (operations are recorded in order, so the two
 * are far closer than 2^31). A point-to-point tag takes no number. */
static uint64_t serial_of(struct weft_comm *comm, uint32_t seq, uint64_t last)
{
    uint32_t d = (seq - comm->seq) & WEFT_TAG_SEQ_P2P;
    uint32_t u = comm->seq + d;

    if (seq == WEFT_TAG_SEQ_P2P) {
        u = comm->seq;
    } else if (d > WEFT_TAG_SEQ_P2P / 2) {
        u -= WEFT_TAG_SEQ_P2P + 1u; /* behind comm->seq: taken already */
    }
    return last + (uint64_t)(int64_t)(int32_t)(u - (uint32_t)last);
}

long weft__record_start(struct weft_comm *comm, const weft_op_desc_t *desc, uint32_t seq, int root)
{
    struct weft_recorder *r = comm->coll->recorder;
    record_t *rec;

    if (r == NULL) {
        size_t cap = 1, want = weft__coll_config.record_ops;

        if (want == 0 || (r = calloc(1, sizeof(*r))) == NULL) {
            return -1;
        }
        while (cap < want && cap < ((size_t)1 << 20)) {
            cap *= 2; /* a mask instead of a division per operation */
        }
        if ((r->ring = calloc(cap, sizeof(*r->ring))) == NULL) {
            free(r);
            return -1;
        }
        r->cap = cap;
        r->shown = (long)(want < cap ? want : cap);
        r->next = 1;
        r->mark = weft__dump_requests(); /* signals before it are not its own */
        comm->coll->recorder = r;
    }
    rec = &r->ring[(size_t)r->next & (r->cap - 1)];
    rec->handle = r->next;
    rec->seq = seq;
    rec->serial = r->serial = serial_of(comm, seq, r->serial);
    rec->coll = desc->coll;
    rec->algo = desc->algo;
    rec->count = desc->count;
    rec->dtype = desc->dtype;
    rec->op = desc->op;
    rec->root = root;
    rec->start_ns = weft__record_now_ns();
    rec->end_ns = 0;
    rec->sched = NULL;
    rec->status = WEFT_OK;
    rec->state = WEFT_RECORD_RUNNING;
    return r->next++;
}

void weft__record_sched(struct weft_comm *comm, long handle, weft_sched_t *s)
{
    record_t *rec = slot(comm, handle);

    if (rec != NULL) {
        rec->sched = s;
        rec->seq = weft__sched_seq(s);
    }
}

static void end(struct weft_comm *comm, long handle, weft_status_t status, int quick)
{
    record_t *rec = slot(comm, handle);

    if (rec == NULL || rec->state != WEFT_RECORD_RUNNING) {
        return;
    }
    /* quick: a coarse clock's tick is milliseconds, the operation took microseconds */
    rec->end_ns = quick ? rec->start_ns : weft__record_now_ns();
    rec->sched = NULL;
    rec->status = status;
    rec->state = status == WEFT_OK ? WEFT_RECORD_DONE : WEFT_RECORD_FAILED;
    if (status != WEFT_OK) {
        snprintf(rec->note, sizeof(rec->note), "%s", weft__error_detail());
    }
    if (WEFT_UNLIKELY(comm->coll->recorder->pending != NULL)) {
        weft__dump_ended(comm, status);
    }
}

void weft__record_end(struct weft_comm *comm, long handle, weft_status_t status)
{
    end(comm, handle, status, 0);
}

void weft__record_end_quick(struct weft_comm *comm, long handle, weft_status_t status)
{
    end(comm, handle, status, 1);
}

void weft__record_drop(struct weft_comm *comm, long handle)
{
    record_t *rec = slot(comm, handle);

    if (rec != NULL && handle == comm->coll->recorder->next - 1) {
        rec->handle = 0;
        comm->coll->recorder->next--;
    }
}

static void line(const record_t *rec, int rank, uint64_t now, char *buf, size_t len)
{
    size_t at;

    at = (size_t)snprintf(buf, len, "weft record rank %d: seq %u %s (%s) count %zu %s", rank,
                          rec->seq, rec->coll, rec->algo, rec->count, weft_dtype_name(rec->dtype));
    if (at < len && strstr(rec->coll, "reduce") != NULL) { /* allreduce, reduce_scatter(_v) */
        at += (size_t)snprintf(buf + at, len - at, " %s", weft_op_name(rec->op));
    }
    if (at < len && rec->root >= 0) {
        at += (size_t)snprintf(buf + at, len - at, " root %d", rec->root);
    }
    if (at < len) {
        at += (size_t)snprintf(buf + at, len - at, " start %.3f", (double)rec->start_ns / 1e9);
    }
    if (at >= len) {
        return;
    }
    switch (rec->state) {
    case WEFT_RECORD_RUNNING:
        snprintf(buf + at, len - at, " running for %.3f s", (double)(now - rec->start_ns) / 1e9);
        at += strlen(buf + at);
        if (rec->sched != NULL && at + 2 < len) {
            buf[at++] = ':';
            buf[at++] = ' ';
            weft__sched_where(rec->sched, buf + at, len - at);
        }
        break;
    case WEFT_RECORD_DONE:
        snprintf(buf + at, len - at, " done in %.3f s",
                 (double)(rec->end_ns - rec->start_ns) / 1e9);
        break;
    default:
        snprintf(buf + at, len - at, " failed after %.3f s: %s",
                 (double)(rec->end_ns - rec->start_ns) / 1e9, rec->note);
        break;
    }
}

void weft__record_dump(struct weft_comm *comm, FILE *out, int log)
{
    struct weft_recorder *r = comm->coll->recorder;
    uint64_t now = weft__record_now_ns();
    char buf[512];
    long first;

    if (r == NULL) {
        return;
    }
    first = r->next - r->shown > 1 ? r->next - r->shown : 1;
    for (long h = first; h < r->next; h++) {
        const record_t *rec = slot(comm, h);

        if (rec == NULL) {
            continue;
        }
        line(rec, comm->rank, now, buf, sizeof(buf));
        if (log) {
            weft__log_error("%s", buf);
        } else {
            fprintf(out, "%s\n", buf);
        }
    }
}

long weft__record_visit(struct weft_comm *comm, void (*fn)(const weft_record_view_t *v, void *arg),
                        void *arg)
{
    struct weft_recorder *r = comm->coll->recorder;
    weft_record_view_t v;
    long first;

    if (r == NULL) {
        return 0;
    }
    first = r->next - r->shown > 1 ? r->next - r->shown : 1;
    for (long h = first; h < r->next; h++) {
        const record_t *rec = slot(comm, h);

        if (rec == NULL) {
            continue;
        }
        v.seq = rec->seq;
        v.serial = rec->serial;
        v.coll = rec->coll;
        v.algo = rec->algo;
        v.count = rec->count;
        v.dtype = rec->dtype;
        v.op = rec->op;
        v.reducing = strstr(rec->coll, "reduce") != NULL; /* allreduce, reduce_scatter(_v) */
        v.root = rec->root;
        v.start_ns = rec->start_ns;
        v.end_ns = rec->end_ns;
        v.state = rec->state;
        v.status = rec->status;
        v.note = rec->state == WEFT_RECORD_FAILED ? rec->note : "";
        v.has_pos = rec->state == WEFT_RECORD_RUNNING && rec->sched != NULL;
        if (v.has_pos) {
            weft__sched_pos(rec->sched, &v.pos, v.peers, v.sending, WEFT_RECORD_PEERS);
        }
        fn(&v, arg);
    }
    return r->next - 1;
}

unsigned *weft__record_mark(struct weft_comm *comm)
{
    return comm->coll->recorder != NULL ? &comm->coll->recorder->mark : NULL;
}

const char **weft__record_pending(struct weft_comm *comm)
{
    return comm->coll->recorder != NULL ? &comm->coll->recorder->pending : NULL;
}

int weft__record_running(struct weft_comm *comm)
{
    struct weft_recorder *r = comm->coll->recorder;
    int n = 0;

    if (r == NULL) {
        return 0;
    }
    for (long h = r->next - r->shown > 1 ? r->next - r->shown : 1; h < r->next; h++) {
        const record_t *rec = slot(comm, h);

        n += rec != NULL && rec->state == WEFT_RECORD_RUNNING;
    }
    return n;
}

void weft__record_release(struct weft_comm *comm)
{
    struct weft_recorder *r = comm->coll->recorder;

    if (r != NULL) {
        free(r->ring);
        free(r);
        comm->coll->recorder = NULL;
    }
}
