/* Observation of finished operations: configuration and dispatch (coll/diag/obs.h). */
#include "coll/diag/obs.h"
#include "coll/comm_state.h"

#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int weft__obs_flags;
weft_obs_config_t weft__obs_config;

/* A file name pattern: %r, %p and %% are the only substitutions, and its
 * folder must exist (so that a typo fails weft_init, not the last write). */
static weft_status_t parse_trace(const char *text, void *dst)
{
    const char *slash = strrchr(text, '/');
    struct stat st;

    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '%' && p[1] != 'r' && p[1] != 'p' && p[1] != '%') {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "'%s': '%%%.1s' is not a substitution (%%r: rank, %%p: process "
                               "id, %%%%: a percent sign)",
                               text, p + 1);
        }
        p += *p == '%';
    }
    if (*text != '\0' && slash != NULL && slash[1] == '\0') {
        return weft__error(WEFT_ERR_INVALID_ARG, "'%s' names a folder, not a file", text);
    }
    if (slash != NULL && slash != text) {
        char *dir = strndup(text, (size_t)(slash - text));
        int ok = dir != NULL && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);

        if (!ok) {
            weft_status_t status =
                weft__error(WEFT_ERR_INVALID_ARG, "'%s': folder '%s' does not exist", text,
                            dir != NULL ? dir : "?");
            free(dir);
            return status;
        }
        free(dir);
    }
    return weft__config_parse_string(text, dst);
}

static weft_status_t parse_events(const char *text, void *dst)
{
    size_t n;
    weft_status_t status = weft__parse_size(text, 0, &n);

    if (status != WEFT_OK) {
        return status;
    }
    if (n == 0 || n > ((size_t)1 << 30)) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "'%s': expected between 1 and 1g events a rank buffers", text);
    }
    *(size_t *)dst = n;
    return WEFT_OK;
}

static const weft_config_entry_t obs_entries[] = {
    {"TRACE", "",
     "write a Chrome/Perfetto trace (JSON) of every collective and of every step of its "
     "schedule to this file, one per rank: %r is replaced by the rank, %p by the process id; "
     "without %r, '.<rank>' is appended. Written at weft_finalize, when the communicator the "
     "job started with is destroyed, and when a communicator fails; empty: off",
     parse_trace, offsetof(weft_obs_config_t, trace)},
    {"TRACE_EVENTS", "256k",
     "trace events (operations and steps) a rank keeps in memory (144 bytes each, "
     "allocated as they come); once full, later events are dropped and their number is "
     "written in the file",
     parse_events, offsetof(weft_obs_config_t, trace_events)},
    {"STATS", "no",
     "count calls, bytes and time per collective and size bucket on every communicator, for "
     "weft_stats and weft_stats_print",
     weft__config_parse_bool, offsetof(weft_obs_config_t, stats)},
};

static const char *obs_values[sizeof(obs_entries) / sizeof(obs_entries[0])];

weft_config_table_t weft__obs_config_table = {"obs", obs_entries,
                                              sizeof(obs_entries) / sizeof(obs_entries[0]),
                                              &weft__obs_config, obs_values};

void weft__obs_init(void)
{
    int flags = 0;

    if (weft__obs_config.trace != NULL && weft__obs_config.trace[0] != '\0') {
        flags |= WEFT_OBS_TRACE;
    }
    if (weft__obs_config.stats) {
        flags |= WEFT_OBS_STATS;
    }
    weft__obs_flags = flags;
}

void weft__obs_finalize(void)
{
    if (weft__obs_flags & WEFT_OBS_TRACE) {
        weft__trace_write_all();
    }
    weft__obs_flags = 0;
}

/* comm's state, created at its first observed operation (NULL: no memory;
 * the operation goes unobserved). */
static struct weft_obs *obs_of(struct weft_comm *comm)
{
    struct weft_obs *o = comm->coll->obs;

    if (o != NULL) {
        return o;
    }
    if ((o = calloc(1, sizeof(*o))) == NULL) {
        return NULL;
    }
    if (weft__obs_flags & WEFT_OBS_TRACE) {
        o->trace = weft__trace_open(comm); /* a communicator a job started with */
        o->trace_comm = o->trace != NULL ? weft__trace_add_comm(o->trace, comm) : 0;
    }
    comm->coll->obs = o;
    return o;
}

static void observe(const weft_obs_op_t *op)
{
    struct weft_obs *o = obs_of(op->comm);

    if (o == NULL) {
        return;
    }
    if ((weft__obs_flags & WEFT_OBS_STATS) && op->status == WEFT_OK) {
        if (o->stats == NULL) {
            o->stats = weft__stats_create();
        }
        if (o->stats != NULL) {
            weft__stats_op(o->stats, op);
        }
    }
    if ((weft__obs_flags & WEFT_OBS_TRACE) && o->trace != NULL) {
        weft__trace_op(o->trace, o->trace_comm, op);
        if (op->status != WEFT_OK && op->comm->failed != WEFT_OK) {
            /* an operation that ends after its communicator failed (and the
             * trace was written): write it again, with how it ended */
            weft__trace_write(o->trace);
        }
    }
}

void weft__obs_sched_end(weft_sched_t *s, weft_status_t status)
{
    weft_obs_op_t op = {
        .comm = weft__sched_comm(s),
        .desc = weft__sched_desc(s),
        .sched = s,
        .seq = weft__sched_seq(s),
        .t0_ns = weft__sched_start_ns(s),
        .t1_ns = weft__time_ns(),
        .status = status,
    };

    observe(&op);
}

void weft__obs_op_end(struct weft_comm *comm, const weft_op_desc_t *desc, uint32_t seq, uint64_t t0_ns,
                      weft_status_t status)
{
    weft_obs_op_t op = {
        .comm = comm,
        .desc = desc,
        .seq = seq,
        .t0_ns = t0_ns,
        .t1_ns = weft__time_ns(),
        .status = status,
    };

    observe(&op);
}

void weft__obs_comm_inherit(struct weft_comm *child, struct weft_comm *parent)
{
    struct weft_obs *po, *co;

    if (!(weft__obs_flags & WEFT_OBS_TRACE) || (po = obs_of(parent)) == NULL || po->trace == NULL ||
        (co = calloc(1, sizeof(*co))) == NULL) {
        return;
    }
    weft__trace_ref(po->trace);
    co->trace = po->trace;
    co->trace_comm = weft__trace_add_comm(co->trace, child);
    child->coll->obs = co;
}

void weft__obs_comm_failed(struct weft_comm *comm)
{
    struct weft_obs *o = comm->coll->obs;

    if (o != NULL && o->trace != NULL) {
        weft__trace_write(o->trace);
    }
}

void weft__obs_comm_release(struct weft_comm *comm)
{
    struct weft_obs *o = comm->coll->obs;

    if (o == NULL) {
        return;
    }
    if (o->trace != NULL) {
        weft__trace_put(o->trace);
    }
    weft__stats_free(o->stats);
    free(o);
    comm->coll->obs = NULL;
}
