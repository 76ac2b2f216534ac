/*
 * The flight recorder as a JSON file per rank and communicator, for
 * tools/weft_doctor, which reads the files of every rank and says which
 * operation is not done everywhere, who is behind, who never arrived and
 * who disagrees on arguments. The format is docs/diagnosis.md's
 * "Dump files"; its "format" and "version" fields name it.
 *
 * When: coll/upcalls.c writes one when a communicator fails with a timeout,
 * a dead peer or a mismatch, when weft_comm_dump is called, and on SIGUSR1
 * (WEFT_DUMP_ON_SIGNAL=1); all only when WEFT_DUMP_DIR is set. A failure
 * found while an operation still runs (a peer's notice, a dead peer seen by
 * a health check) is written at once and again when the operations that
 * were running have ended, so that the file shows how they ended.
 *
 * SIGUSR1: the handler only increments a lock-free atomic counter (the
 * one thing it may do, async-signal-safe). Every wait of weft polls
 * weft__comm_health at least every millisecond, which calls
 * weft__dump_requested: a communicator that has not served the latest
 * request writes its dump there, on the thread that drives it, so the
 * recorder and the running schedule (its step and the ranks it waits for)
 * are read without a lock and without racing the operation. A rank hung in
 * a collective is polling, so it dumps within milliseconds; a rank outside
 * weft (computing, or blocked in something else) dumps at its next weft
 * call that checks the communicator. A dedicated thread would dump a rank
 * outside weft at once, but would have to lock the recorder on every
 * operation and could not read a running schedule safely.
 *
 * Threading: the dump functions run on the thread that drives comm.
 */
#ifndef WEFT_COLL_DIAG_DUMP_H
#define WEFT_COLL_DIAG_DUMP_H

#include "comm/comm.h"

#include <stdio.h>

/* Why a dump was written: the "reason" field. */
#define WEFT_DUMP_TIMEOUT "timeout"
#define WEFT_DUMP_PEER_FAILED "peer_failed"
#define WEFT_DUMP_MISMATCH "mismatch"
#define WEFT_DUMP_SIGNAL "signal"
#define WEFT_DUMP_REQUEST "weft_comm_dump"

/* The reason of the dump a communicator failing with status writes:
 * WEFT_DUMP_TIMEOUT, _PEER_FAILED or _MISMATCH; NULL: none. */
const char *weft__dump_reason(weft_status_t status);

/* The directory of the dumps (WEFT_DUMP_DIR; NULL or "": none), copied;
 * weft_init and weft_finalize set it, under the init lock. */
void weft__dump_configure(const char *dir);

/* Dump comm to the configured directory, if any, for reason. status is
 * the status whose message weft_last_error holds: a dump that cannot be
 * written logs a warning and leaves that message as it was. A failure's
 * dump (timeout, peer_failed, mismatch) while operations of comm run is
 * written again when they have ended (weft__dump_ended). */
void weft__dump_event(struct weft_comm *comm, const char *reason, weft_status_t status);
/* An operation of comm ended with status while a dump is pending
 * (coll/diag/record.c). */
void weft__dump_ended(struct weft_comm *comm, weft_status_t status);

/* comm's recorder as one JSON object (with a final newline) to out.
 * WEFT_ERR_INVALID_ARG when out cannot be written. */
weft_status_t weft__dump_json(struct weft_comm *comm, const char *reason, FILE *out);

/* The dump's file name (no directory): "weft-comm<id>-rank<r>-world<w>.json",
 * r comm's rank, w the rank in the job's root communicator (two
 * communicators split at once may share an id; the world rank keeps their
 * files apart). Truncated to len. */
void weft__dump_name(struct weft_comm *comm, char *buf, size_t len);

/* Write comm's dump to dir/<weft__dump_name> atomically (a temporary file
 * in dir, renamed over the old dump). When dir cannot be written, log a
 * warning naming the path and the reason and return WEFT_ERR_INVALID_ARG
 * (the communicator is not affected). */
weft_status_t weft__dump_write(struct weft_comm *comm, const char *dir, const char *reason);

/* JSON string literal of text (quotes, backslashes and control characters
 * escaped) to out. */
void weft__dump_json_string(FILE *out, const char *text);

/* SIGUSR1 requests a dump (see above). install: keeps the previous action
 * (restored by remove); a SIGUSR1 handler the application installed
 * itself is left alone, with a warning, and install returns
 * WEFT_ERR_UNSUPPORTED. Called under the init lock. */
weft_status_t weft__dump_signal_install(void);
void weft__dump_signal_remove(void);
/* 1 once for every dump request comm has not served yet (cheap: one
 * relaxed load while no signal came). */
int weft__dump_requested(struct weft_comm *comm);

#endif /* WEFT_COLL_DIAG_DUMP_H */
