/*
 * Stream-ordered operations (weft_<collective>_enqueue): the entry point
 * checks the arguments, then queues the operation here and returns.
 *
 * For each operation the stream gets three items: "write 1 to flag" (the
 * work queued before is done: the inputs are ready), "wait until flag >= 2"
 * (work queued after waits for the result) and "write 3" (the stream is
 * past the flag, which may then be freed). weft's progress thread starts
 * an operation once its flag reads 1 and every earlier operation of its
 * communicator has started (so every rank starts them in program order),
 * drives it with the nonblocking engine, and writes 2 when it ends. The
 * host never blocks on the stream, and the stream never waits on anything
 * but a flag, which is what cuStreamWaitValue32 can do for CUDA streams.
 *
 * A failure (timeout, dead peer, mismatch) is kept for the stream
 * (weft_stream_synchronize returns it, with its message) and for the
 * communicator (its next call returns it); the flag is still written so the
 * stream never hangs.
 *
 * Threading: any thread may enqueue; while a communicator has enqueued
 * operations outstanding only the progress thread drives it, and the
 * other entry points first wait for them (weft__enqueue_comm_drain).
 */
#ifndef WEFT_RUNTIME_ENQUEUE_H
#define WEFT_RUNTIME_ENQUEUE_H

#include "coll/coll.h"

/* How an entry point runs its operation: blocking (NULL), started
 * nonblocking (*started gets the schedule), or enqueued on stream. */
typedef struct weft_call_mode {
    weft_sched_t **started;
    int enqueue;
    void *stream;
    const char *call; /* the entry point, for messages (NULL: the blocking form's name) */
} weft_call_mode_t;

/* Queue a validated collective (arrays of args are copied). */
weft_status_t weft__enqueue_coll(struct weft_comm *comm, const weft_coll_args_t *args, void *stream,
                                 const char *call);
/* Queue a validated point-to-point send or receive. */
weft_status_t weft__enqueue_p2p(struct weft_comm *comm, int is_send, void *buf, size_t count,
                                weft_dtype_t dtype, int peer, int tag, void *stream,
                                const char *call);
/* Checks every enqueue shares: the stream is one of a backend, the buffers'
 * memory can be used on it, and comm has no unfinished nonblocking request. */
weft_status_t weft__enqueue_check(struct weft_comm *comm, void *stream, const void *buf1,
                                  const void *buf2, const char *call);
/* Wait (WEFT_TIMEOUT) until comm has no enqueued operation left; then the
 * error of one that failed since the last call, if any (reported once). */
weft_status_t weft__enqueue_comm_drain(struct weft_comm *comm, const char *call);
/* Wait until no operation enqueued on stream is left. */
weft_status_t weft__enqueue_stream_drain(void *stream, const char *call);
/* The first failure of an operation enqueued on stream since the last call
 * (with its message as the last error), or WEFT_OK. */
weft_status_t weft__enqueue_stream_error(void *stream);
/* A blocking collective on memory of dev (checked), among the ranks of one
 * node, on a device whose streams run device tasks: run as the task an
 * enqueue would make, on the calling thread's own stream of the device, and
 * waited for. 1 when it ran so (its status in *status_p), 0 when it is not
 * such a call. */
struct weft_device_ops;
int weft__enqueue_blocking_task(struct weft_comm *comm, const weft_coll_args_t *args,
                                const struct weft_device_ops *dev, const char *call,
                                weft_status_t *status_p);
/* A send or receive held by a group (weft_group_start/end), as a graph records it. */
typedef struct weft_p2p_part {
    int is_send;
    void *buf;
    size_t count;
    weft_dtype_t dtype;
    int peer, tag;
} weft_p2p_part_t;
/* *dst = *src with its count and displacement arrays copied into one
 * allocation, returned (to free with the copy), or NULL (no memory). */
size_t *weft__coll_args_keep(weft_coll_args_t *dst, const weft_coll_args_t *src);
/* Enqueued collectives run as device tasks so far (for tests). */
unsigned long weft__enqueue_tasks_run(void);
/* A blocking collective of device buffers (dev's) across nodes through host memory once
 * (WEFT_DEVICE_STAGE): the calling thread copies the input in, runs the collective on host
 * memory and copies the result out. 0 when the rule does not take it; 1 with *status_p. */
int weft__blocking_host_staged(struct weft_comm *comm, const weft_coll_args_t *args,
                               const weft_device_ops_t *dev, weft_status_t *status_p);
/* The same for a nonblocking one: the input copied in now, the schedule started on host
 * memory (*sched_p), the result copied out when it completes. */
int weft__nonblocking_host_staged(struct weft_comm *comm, const weft_coll_args_t *args,
                                  const weft_device_ops_t *dev, weft_sched_t **sched_p,
                                  weft_status_t *status_p);
/* Collectives (enqueued, blocking or nonblocking) that went through host memory once
 * (WEFT_DEVICE_STAGE), in this process. */
unsigned long weft__enqueue_host_staged(void);
/* How the progress thread waited while every operation it runs waited for its stream (for
 * tests): naps (looks at the flags every FLAG_NAP_NS: some stream cannot ring), sleeps on the
 * doorbell (every stream rings), and those of the sleeps a ring ended. */
typedef struct weft_enqueue_waits {
    unsigned long naps, sleeps, rung;
} weft_enqueue_waits_t;
void weft__enqueue_waits(weft_enqueue_waits_t *waits_p);
/* Stop the progress thread (weft_finalize, after every communicator). */
void weft__enqueue_shutdown(void);

#endif /* WEFT_RUNTIME_ENQUEUE_H */
