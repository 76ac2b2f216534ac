/*
 * In-process worlds: N ranks as threads of one process, connected by the
 * loop transport and the thread bootstrap. Used by the tests and by the
 * in-process benchmark; not part of the public API.
 */
#ifndef WEFT_RUNTIME_THREAD_WORLD_H
#define WEFT_RUNTIME_THREAD_WORLD_H

#include "bootstrap/thread/thread.h"
#include "pt2pt/loop/loop.h"

struct weft_comm;

typedef struct weft_thread_world_opts {
    int nranks;
    uint64_t seed;         /* landing order of messages; 0 = FIFO */
    uint64_t max_delay_ns; /* random delay of each message below this */
} weft_thread_world_opts_t;

/* Body of one rank: runs on its own thread with its own communicator. */
typedef void (*weft_thread_rank_fn)(weft_comm_t comm, int rank, void *arg);

/*
 * Create the world, run fn on opts->nranks threads (rank r gets the
 * communicator of rank r), destroy the communicators and the world.
 * weft_init must have been called. Returns the first error in setting up.
 */
weft_status_t weft__thread_world_run(const weft_thread_world_opts_t *opts, weft_thread_rank_fn fn,
                                     void *arg);

/* The communicator of `rank` in the given worlds (each gains a reference). */
weft_status_t weft__thread_world_comm(weft_loop_world_t *lw, weft_thread_boot_world_t *bw,
                                      int rank, int size, struct weft_comm **comm_p);

#endif /* WEFT_RUNTIME_THREAD_WORLD_H */
