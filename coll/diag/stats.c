/*
 * WEFT_STATS: counters per collective and size bucket (powers of 4) of each
 * communicator, and the public weft_stats / weft_stats_print /
 * weft_stats_reset (include/weft.h states what they report).
 *
 * Cost when on: one table of 12 x 33 cells (10 KiB) per communicator,
 * allocated at its first counted operation; per operation, a clock read and
 * three additions.
 */
#include "coll/diag/obs.h"
#include "coll/comm_state.h"

#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS 33 /* [0,1), [1,4), [4,16), ... [4^31, inf) */

typedef struct stats_cell {
    uint64_t calls;
    uint64_t bytes;
    uint64_t ns;
} stats_cell_t;

struct weft_stats_table {
    stats_cell_t cell[WEFT_COLL_KIND_COUNT][BUCKETS];
};

static int bucket_of(size_t bytes)
{
    int b = 0;

    if (bytes == 0) {
        return 0;
    }
    for (size_t v = bytes; v >= 4 && b < BUCKETS - 2; v >>= 2) {
        b++;
    }
    return b + 1;
}

static size_t bucket_lo(int b)
{
    return b == 0 ? 0 : (size_t)1 << (2 * (b - 1));
}

static size_t bucket_hi(int b)
{
    return b == BUCKETS - 1 ? SIZE_MAX : (size_t)1 << (2 * b);
}

struct weft_stats_table *weft__stats_create(void)
{
    return calloc(1, sizeof(struct weft_stats_table));
}

void weft__stats_free(struct weft_stats_table *st)
{
    free(st);
}

void weft__stats_op(struct weft_stats_table *st, const weft_obs_op_t *op)
{
    uint32_t kind = op->desc->sig.kind - 1; /* the signature's kind is the collective's + 1 */
    stats_cell_t *c;

    if (kind >= WEFT_COLL_KIND_COUNT) {
        return;
    }
    c = &st->cell[kind][bucket_of(op->desc->bytes)];
    c->calls++;
    c->bytes += op->desc->bytes;
    c->ns += op->t1_ns - op->t0_ns;
}

/* nccl-tests' bus bandwidth factor (its doc/PERFORMANCE.md). */
static double bus_factor(weft_coll_kind_t kind, int n)
{
    switch (kind) {
    case WEFT_COLL_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case WEFT_COLL_BCAST:
    case WEFT_COLL_REDUCE:
        return 1.0;
    case WEFT_COLL_BARRIER:
        return 0.0;
    default:
        return (double)(n - 1) / n;
    }
}

static weft_status_t check(weft_comm_t handle, const char *call, struct weft_comm **comm_p)
{
    char what[64];

    snprintf(what, sizeof(what), "%s: comm", call);
    return weft__comm_check(handle, what, comm_p);
}

static const struct weft_stats_table *table_of(struct weft_comm *comm)
{
    return comm->coll->obs != NULL ? comm->coll->obs->stats : NULL;
}

WEFT_EXPORT weft_status_t weft_stats(weft_comm_t handle, weft_stats_entry_t *out, size_t max,
                                     size_t *count_p)
{
    const struct weft_stats_table *st;
    struct weft_comm *comm;
    weft_status_t status = check(handle, "weft_stats", &comm);
    size_t n = 0;

    if (status != WEFT_OK) {
        return status;
    }
    if (count_p == NULL || (out == NULL && max > 0)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_stats: %s is NULL",
                           count_p == NULL ? "count_p" : "out (with max > 0)");
    }
    if ((st = table_of(comm)) != NULL) {
        for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
            for (int b = 0; b < BUCKETS; b++) {
                const stats_cell_t *c = &st->cell[k][b];
                weft_stats_entry_t *e;

                if (c->calls == 0) {
                    continue;
                }
                if (n++ >= max) {
                    continue;
                }
                e = &out[n - 1];
                e->collective = weft__coll_kind_name((weft_coll_kind_t)k);
                e->bucket_lo = bucket_lo(b);
                e->bucket_hi = bucket_hi(b);
                e->calls = c->calls;
                e->bytes = c->bytes;
                e->seconds = (double)c->ns / 1e9;
                e->busbw_gbs = c->ns == 0 ? 0.0
                                          : (double)c->bytes / (double)c->ns *
                                                bus_factor((weft_coll_kind_t)k, comm->size);
            }
        }
    }
    *count_p = n;
    return WEFT_OK;
}

static void size_text(size_t bytes, char *buf, size_t len)
{
    static const char units[] = "BKMGTPE";
    int u = 0;

    if (bytes == SIZE_MAX) {
        snprintf(buf, len, "inf");
        return;
    }
    while (bytes >= 1024 && bytes % 1024 == 0 && u < 6) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%zu%c", bytes, units[u]);
}

WEFT_EXPORT weft_status_t weft_stats_print(weft_comm_t handle, FILE *out)
{
    weft_stats_entry_t *e;
    struct weft_comm *comm;
    weft_status_t status = check(handle, "weft_stats_print", &comm);
    size_t n = 0;

    if (status != WEFT_OK) {
        return status;
    }
    if (out == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_stats_print: out is NULL");
    }
    weft_stats(handle, NULL, 0, &n);
    e = calloc(n ? n : 1, sizeof(*e));
    if (e == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "weft_stats_print: no memory for %zu entries", n);
    }
    weft_stats(handle, e, n, &n);
    fprintf(out, "# weft stats: rank %d of %d, communicator %08x%s\n", comm->rank, comm->size,
            comm->id, (weft__obs_flags & WEFT_OBS_STATS) ? "" : " (WEFT_STATS is off)");
    fprintf(out, "# %-16s %8s %8s %10s %14s %12s %10s %10s\n", "collective", "from", "to", "calls",
            "bytes", "seconds", "avg_us", "busbw_GB/s");
    for (size_t i = 0; i < n; i++) {
        char lo[24], hi[24];

        size_text(e[i].bucket_lo, lo, sizeof(lo));
        size_text(e[i].bucket_hi, hi, sizeof(hi));
        fprintf(out, "  %-16s %8s %8s %10llu %14llu %12.6f %10.2f %10.3f\n", e[i].collective, lo,
                hi, (unsigned long long)e[i].calls, (unsigned long long)e[i].bytes, e[i].seconds,
                e[i].seconds / (double)e[i].calls * 1e6, e[i].busbw_gbs);
    }
    free(e);
    return fflush(out) == 0 ? WEFT_OK
                            : weft__error(WEFT_ERR_INVALID_ARG, "weft_stats_print: cannot write");
}

WEFT_EXPORT weft_status_t weft_stats_reset(weft_comm_t handle)
{
    struct weft_comm *comm;
    weft_status_t status = check(handle, "weft_stats_reset", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    if (comm->coll->obs != NULL && comm->coll->obs->stats != NULL) {
        memset(comm->coll->obs->stats, 0, sizeof(*comm->coll->obs->stats));
    }
    return WEFT_OK;
}
