/*
 * Bootstrap interface: what ranks need to find each other before the
 * point-to-point layer is connected: pmix/ (processes launched by mpirun or
 * srun), tcp/ (processes given a unique id, with a root rank that listens)
 * and thread/ (ranks that are threads of one process).
 *
 * Contract: collective calls (allgather, barrier) are made by every rank in
 * the same order; each blocks until all ranks have joined or the deadline
 * (absolute, weft__time_ns() clock) passes, which returns WEFT_ERR_TIMEOUT.
 * Only the thread that drives a rank uses its context.
 */
#ifndef WEFT_BOOTSTRAP_H
#define WEFT_BOOTSTRAP_H

#include "base/base.h"

typedef struct weft_bootstrap_ops {
    const char *name;
    /* blobs receives size * bytes: rank r's blob at r * bytes */
    weft_status_t (*allgather)(void *ctx, const void *blob, void *blobs, size_t bytes,
                               uint64_t deadline_ns);
    weft_status_t (*barrier)(void *ctx, uint64_t deadline_ns);
    void (*release)(void *ctx);
    /* Optional (NULL: none). This rank gives up on the job, with status and
     * msg (a communicator could not be built on it): the other ranks' pending
     * and later calls fail at once with them instead of waiting for their
     * deadline, and the release that follows does not wait for them. */
    void (*fail)(void *ctx, weft_status_t status, const char *msg);
    /* A rank whose process is known to have died, or -1. Must not block (it
     * is polled by waiting collectives). NULL when the launcher handles
     * failures itself (mpirun tears the job down). */
    int (*failed_rank)(void *ctx);
} weft_bootstrap_ops_t;

#endif /* WEFT_BOOTSTRAP_H */
