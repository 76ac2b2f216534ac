/*
 * Loop transport: ranks that are threads of one process exchange messages
 * through per-rank mailboxes. Sends copy their payload at once (eager) and
 * complete immediately; the receiver lands arrived messages in a seeded
 * random order, after an optional random delay, so algorithms that depend on
 * an unguaranteed order fail in tests. Messages with the same source and tag
 * still land in send order (non-overtaking).
 *
 * Threading: any thread may send into any mailbox; only the owner rank's
 * thread receives from it, progresses it and tests its requests.
 */
#ifndef WEFT_PT2PT_LOOP_H
#define WEFT_PT2PT_LOOP_H

#include "pt2pt/pt2pt.h"

typedef struct weft_loop_opts {
    int nranks;
    uint64_t seed;         /* random landing order; 0 = FIFO landing */
    uint64_t max_delay_ns; /* each message lands after a random delay below this */
} weft_loop_opts_t;

typedef struct weft_loop_world weft_loop_world_t;

extern const weft_pt2pt_ops_t weft__loop_ops;

weft_status_t weft__loop_world_create(const weft_loop_opts_t *opts, weft_loop_world_t **world_p);
/* Drop the creator's reference; the world lives until its last endpoint is released. */
void weft__loop_world_release(weft_loop_world_t *world);
/* The endpoint of `rank`, for weft__loop_ops (released with ops.ep_release). */
weft_status_t weft__loop_ep_create(weft_loop_world_t *world, int rank, void **ep_p);

#endif /* WEFT_PT2PT_LOOP_H */
