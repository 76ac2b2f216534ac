/*
 * WEFT_CHECK_ARGS=1: every collective first sends its signature
 * (coll/diag/sig.h) to every other rank and compares what it receives;
 * the operation's own tasks start only when every rank's signature agrees,
 * so a mismatch fails on every rank, at once, with the same message, on
 * any path (point-to-point, shared memory, hierarchical).
 *
 * Cost: one message to and from every other rank per operation (n - 1 each
 * way, 24 bytes), before the operation itself: meant for debugging a
 * program, not for production runs.
 */
#ifndef WEFT_COLL_DIAG_CHECK_H
#define WEFT_COLL_DIAG_CHECK_H

#include "coll/coll.h"

/* Add the exchange and comparison of desc's signature to s (before the
 * operation's tasks): returns the task the operation's tasks must wait for
 * (-1 once the schedule failed). */
int weft__check_build(weft_sched_t *s);

#endif /* WEFT_COLL_DIAG_CHECK_H */
