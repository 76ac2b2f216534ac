/* The flight recorder's JSON dump (coll/diag/dump.h). */
#include "coll/diag/dump.h"

#include "coll/diag/file.h"
#include "coll/diag/record.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DUMP_FORMAT "weft-flight-recorder"
#define DUMP_VERSION 1

const char *weft__dump_reason(weft_status_t status)
{
    switch (status) {
    case WEFT_ERR_TIMEOUT:
        return WEFT_DUMP_TIMEOUT;
    case WEFT_ERR_PEER_FAILED:
        return WEFT_DUMP_PEER_FAILED;
    case WEFT_ERR_MISMATCH:
        return WEFT_DUMP_MISMATCH;
    default:
        return NULL;
    }
}

static const char *state_name(weft_record_state_t state)
{
    switch (state) {
    case WEFT_RECORD_RUNNING:
        return "running";
    case WEFT_RECORD_DONE:
        return "done";
    default:
        return "failed";
    }
}

void weft__dump_json_string(FILE *out, const char *text)
{
    putc('"', out);
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                fprintf(out, "\\u%04x", *p);
            } else if (*p >= 0x80) {
                /* messages are ASCII; a stray byte must not make the file
                 * invalid UTF-8 */
                fputs("?", out);
            } else {
                putc(*p, out);
            }
            break;
        }
    }
    putc('"', out);
}

typedef struct dump_ctx {
    FILE *out;
    int n;            /* operations written */
    uint64_t mono_ns; /* the recorder's clock when the dump started */
    uint64_t wall_ns; /* CLOCK_REALTIME at the same moment */
} dump_ctx_t;

/* An instant of the recorder's clock on the wall clock (same host: the
 * ranks' anchors agree to the clock tick). */
static uint64_t wall_of(const dump_ctx_t *c, uint64_t mono)
{
    return c->wall_ns - (c->mono_ns - mono);
}

static void peers_array(FILE *out, const weft_record_view_t *v, int sends)
{
    int n = 0;

    putc('[', out);
    for (int i = 0; i < v->pos.npeers; i++) {
        if (v->sending[i] == sends) {
            fprintf(out, "%s%d", n++ ? ", " : "", v->peers[i]);
        }
    }
    putc(']', out);
}

/* One operation: "running step k, waiting for rank(s) X" is in "where",
 * both as fields and as the text a person reads. */
static void op_json(const weft_record_view_t *v, void *arg)
{
    dump_ctx_t *c = arg;
    FILE *out = c->out;
    uint64_t end = v->state == WEFT_RECORD_RUNNING ? c->mono_ns : v->end_ns;

    fprintf(out,
            "%s\n    {\"seq\": %u, \"serial\": %" PRIu64 ", \"collective\": ", c->n++ ? "," : "",
            v->seq, v->serial);
    weft__dump_json_string(out, v->coll);
    fputs(", \"algorithm\": ", out);
    weft__dump_json_string(out, v->algo);
    fprintf(out, ", \"count\": %zu, \"dtype\": \"%s\", \"op\": ", v->count,
            weft_dtype_name(v->dtype));
    if (v->reducing) {
        fprintf(out, "\"%s\"", weft_op_name(v->op));
    } else {
        fputs("null", out);
    }
    if (v->root >= 0) {
        fprintf(out, ", \"root\": %d", v->root);
    } else {
        fputs(", \"root\": null", out);
    }
    fprintf(out, ",\n     \"state\": \"%s\", \"status\": \"%s\", \"error\": ", state_name(v->state),
            weft_status_name(v->state == WEFT_RECORD_RUNNING ? WEFT_INPROGRESS : v->status));
    if (v->state == WEFT_RECORD_FAILED) {
        weft__dump_json_string(out, v->note);
    } else {
        fputs("null", out);
    }
    fprintf(out, ",\n     \"start_mono_ns\": %llu, \"start_wall_ns\": %llu, \"end_mono_ns\": ",
            (unsigned long long)v->start_ns, (unsigned long long)wall_of(c, v->start_ns));
    if (v->state == WEFT_RECORD_RUNNING) {
        fputs("null, \"end_wall_ns\": null", out);
    } else {
        fprintf(out, "%llu, \"end_wall_ns\": %llu", (unsigned long long)v->end_ns,
                (unsigned long long)wall_of(c, v->end_ns));
    }
    /* running: for how long so far */
    fprintf(out, ", \"elapsed_s\": %.6f", (double)(end - v->start_ns) / 1e9);
    if (v->has_pos) {
        fprintf(out, ",\n     \"where\": {\"phase\": ");
        weft__dump_json_string(out, v->pos.phase != NULL ? v->pos.phase : "?");
        fprintf(out,
                ", \"step\": %d, \"tasks_done\": %d, \"tasks\": %d, \"waiting_for\": ", v->pos.step,
                v->pos.ndone, v->pos.ntasks);
        peers_array(out, v, 0);
        fputs(", \"sending_to\": ", out);
        peers_array(out, v, 1);
        putc('}', out);
    } else {
        fputs(",\n     \"where\": null", out);
    }
    putc('}', out);
}

weft_status_t weft__dump_json(struct weft_comm *comm, const char *reason, FILE *out)
{
    dump_ctx_t c = {.out = out};
    struct timespec ts;
    char host[256] = "?";
    long total;

    c.mono_ns = weft__record_now_ns();
    clock_gettime(CLOCK_REALTIME, &ts);
    c.wall_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';

    fprintf(out, "{\"format\": \"%s\", \"version\": %d, \"reason\": ", DUMP_FORMAT, DUMP_VERSION);
    weft__dump_json_string(out, reason);
    fputs(",\n \"host\": ", out);
    weft__dump_json_string(out, host);
    fprintf(out, ", \"pid\": %d, \"world_rank\": %d,\n", (int)getpid(),
            weft__comm_world_rank(comm, comm->rank));
    fprintf(out,
            " \"comm\": {\"id\": %u, \"name\": \"comm%u\", \"rank\": %d, \"size\": %d, "
            "\"next_seq\": %u, \"world_ranks\": [",
            comm->id, comm->id, comm->rank, comm->size, comm->seq);
    for (int r = 0; r < comm->size; r++) {
        fprintf(out, "%s%d", r ? ", " : "", weft__comm_world_rank(comm, r));
    }
    fprintf(out,
            "],\n  \"failed\": %s%s%s, \"failed_error\": ", comm->failed != WEFT_OK ? "\"" : "",
            comm->failed != WEFT_OK ? weft_status_name(comm->failed) : "null",
            comm->failed != WEFT_OK ? "\"" : "");
    if (comm->failed != WEFT_OK) {
        weft__dump_json_string(out, comm->failed_msg);
    } else {
        fputs("null", out);
    }
    fprintf(out,
            "},\n \"clock\": \"CLOCK_MONOTONIC_COARSE\", \"dump_mono_ns\": %llu, "
            "\"dump_wall_ns\": %llu,\n \"ops\": [",
            (unsigned long long)c.mono_ns, (unsigned long long)c.wall_ns);
    total = weft__record_visit(comm, op_json, &c);
    fprintf(out, "%s],\n \"ops_recorded\": %ld, \"ops_kept\": %d}\n", c.n ? "\n " : "", total, c.n);
    if (fflush(out) != 0 || ferror(out)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "cannot write the dump: %s", strerror(errno));
    }
    return WEFT_OK;
}

void weft__dump_name(struct weft_comm *comm, char *buf, size_t len)
{
    snprintf(buf, len, "weft-comm%u-rank%d-world%d.json", comm->id, comm->rank,
             weft__comm_world_rank(comm, comm->rank));
}

weft_status_t weft__dump_write(struct weft_comm *comm, const char *dir, const char *reason)
{
    char name[128], path[4096], tmp[4096 + 32];
    weft_status_t status;
    FILE *f;

    weft__dump_name(comm, name, sizeof(name));
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path)) {
        weft__log_warn("flight recorder dump not written: WEFT_DUMP_DIR '%s' is too long", dir);
        return weft__error(WEFT_ERR_INVALID_ARG, "WEFT_DUMP_DIR is too long");
    }
    /* private and unguessable (coll/diag/file.h): two writers never share a
     * temporary, and nobody else can plant one */
    if ((f = weft__diag_file_create(path, tmp, sizeof(tmp))) == NULL) {
        int err = errno;

        weft__log_warn("flight recorder dump not written: cannot create a file in WEFT_DUMP_DIR "
                       "'%s': %s",
                       dir, strerror(err));
        return weft__error(WEFT_ERR_INVALID_ARG, "cannot create a file in %s: %s", dir,
                           strerror(err));
    }
    status = weft__dump_json(comm, reason, f);
    if (status != WEFT_OK) {
        weft__diag_file_discard(f, tmp);
    } else if (weft__diag_file_commit(f, tmp, path) != 0) {
        status = weft__error(WEFT_ERR_INVALID_ARG, "cannot write %s: %s", path, strerror(errno));
    }
    if (status != WEFT_OK) {
        weft__log_warn("flight recorder dump not written: %s", weft__error_detail());
        return status;
    }
    weft__log_info("flight recorder of communicator %u (%s) written to %s", comm->id, reason, path);
    return WEFT_OK;
}

static char *dump_dir; /* weft__dump_configure */

void weft__dump_configure(const char *dir)
{
    free(dump_dir);
    dump_dir = dir != NULL && *dir != '\0' ? strdup(dir) : NULL;
}

/* Write, keeping the last error (status and its message). */
static void write_keep(struct weft_comm *comm, const char *reason, weft_status_t status)
{
    char saved[512];

    (void)status;
    snprintf(saved, sizeof(saved), "%s", weft_last_error());
    if (weft__dump_write(comm, dump_dir, reason) != WEFT_OK) {
        weft__error_restore(saved);
    }
}

void weft__dump_event(struct weft_comm *comm, const char *reason, weft_status_t status)
{
    const char **pending;

    if (dump_dir == NULL) {
        return;
    }
    write_keep(comm, reason, status);
    pending = weft__record_pending(comm);
    if (pending != NULL && *pending == NULL && strcmp(reason, WEFT_DUMP_SIGNAL) != 0 &&
        strcmp(reason, WEFT_DUMP_REQUEST) != 0 && weft__record_running(comm) > 0) {
        *pending = reason; /* weft__dump_ended writes the operations' end */
    }
}

void weft__dump_ended(struct weft_comm *comm, weft_status_t status)
{
    const char **pending = weft__record_pending(comm);
    const char *reason = *pending;

    if (weft__record_running(comm) > 0) {
        return;
    }
    *pending = NULL;
    if (dump_dir != NULL) {
        write_keep(comm, reason, status);
    }
}

/* ------------------------------------------------------------- SIGUSR1 */

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler needs a lock-free counter");

static atomic_uint requests; /* SIGUSR1s received */
static struct sigaction previous;
static int installed;

static void on_signal(int signo)
{
    (void)signo;
    atomic_fetch_add_explicit(&requests, 1, memory_order_relaxed);
}

weft_status_t weft__dump_signal_install(void)
{
    struct sigaction sa;

    if (installed) {
        return WEFT_OK;
    }
    if (sigaction(SIGUSR1, NULL, &previous) != 0) {
        return weft__error(WEFT_ERR_INTERNAL, "sigaction(SIGUSR1): %s", strerror(errno));
    }
    if ((previous.sa_flags & SA_SIGINFO) ||
        (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN)) {
        weft__log_warn("WEFT_DUMP_ON_SIGNAL: SIGUSR1 already has a handler of the application; "
                       "left alone, no dump on SIGUSR1");
        return weft__error(WEFT_ERR_UNSUPPORTED, "SIGUSR1 already has a handler");
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL) != 0) {
        return weft__error(WEFT_ERR_INTERNAL, "sigaction(SIGUSR1): %s", strerror(errno));
    }
    installed = 1;
    return WEFT_OK;
}

void weft__dump_signal_remove(void)
{
    struct sigaction current;

    if (installed) {
        /* an application that installed its own handler since keeps it */
        if (sigaction(SIGUSR1, NULL, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
            current.sa_handler == on_signal) {
            sigaction(SIGUSR1, &previous, NULL);
        }
        installed = 0;
    }
}

unsigned weft__dump_requests(void)
{
    return atomic_load_explicit(&requests, memory_order_relaxed);
}

int weft__dump_requested(struct weft_comm *comm)
{
    unsigned now = atomic_load_explicit(&requests, memory_order_relaxed);
    unsigned *served;

    if (now == 0) { /* no signal came: the common case */
        return 0;
    }
    served = weft__record_mark(comm);
    if (served == NULL || *served == now) {
        return 0;
    }
    *served = now;
    return 1;
}
