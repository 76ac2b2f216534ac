/*
 * weft: MPI-compatible, GPU-aware collectives runtime.
 *
 * Public API. Every function returns a weft_status_t; on failure
 * weft_last_error() holds a message naming what was wrong (thread-local,
 * valid until the next failing call on the same thread). Out-parameters are
 * written only on success.
 *
 * Threading: weft_init/weft_finalize may be called from any thread and are
 * reference counted. A communicator may be used by one thread at a time.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0

/*
 * Status codes: one list, used for the enum, weft_status_string() and
 * weft_status_name(). X(name, value, breaks, description); breaks is 1 when
 * an operation that fails with the status leaves its communicator failed
 * (every later call on it returns the same status until it is destroyed)
 * and the other ranks are told, 0 when the call was refused before it
 * started and the communicator goes on.
 */
#define WEFT_STATUS_MAP(X)                                                         \
    X(OK, 0, 0, "success")                                                         \
    X(INPROGRESS, 1, 0, "operation in progress")                                   \
    X(ERR_INVALID_ARG, -1, 0, "invalid argument")                                  \
    X(ERR_NO_MEMORY, -2, 0, "out of memory")                                       \
    X(ERR_UNSUPPORTED, -3, 0, "unsupported operation")                             \
    X(ERR_TRANSPORT, -4, 1, "transport error")                                     \
    X(ERR_TIMEOUT, -5, 1, "operation timed out")                                   \
    X(ERR_PEER_FAILED, -6, 1, "peer process failed")                               \
    X(ERR_ABORTED, -7, 1, "communicator aborted")                                  \
    X(ERR_MISMATCH, -8, 1, "mismatched arguments between ranks")                   \
    X(ERR_BOOTSTRAP, -9, 1, "bootstrap failed")                                    \
    X(ERR_DEVICE, -10, 1, "device error")                                          \
    X(ERR_INTERNAL, -11, 1, "internal error")                                      \
    X(ERR_NOT_INITIALIZED, -12, 0, "weft_init was not called")

typedef enum {
#define WEFT__STATUS_ENUM(name, value, breaks, desc) WEFT_##name = value,
    WEFT_STATUS_MAP(WEFT__STATUS_ENUM)
#undef WEFT__STATUS_ENUM
} weft_status_t;

typedef enum {
    WEFT_INT8,
    WEFT_UINT8,
    WEFT_INT32,
    WEFT_UINT32,
    WEFT_INT64,
    WEFT_UINT64,
    WEFT_FLOAT16,  /* IEEE 754 binary16 */
    WEFT_BFLOAT16, /* bfloat16: the upper half of a binary32 */
    WEFT_FLOAT32,
    WEFT_FLOAT64,
    /* 8-bit floats (OCP 8-bit floating point): reductions widen to float32, combine there and
     * round once to nearest even; the bitwise and logical ops are not defined for them. */
    WEFT_FLOAT8_E4M3, /* 1 sign, 4 exponent, 3 mantissa bits; no inf; results beyond the
                       * largest finite, 448, saturate to it (as torch's float8_e4m3fn) */
    WEFT_FLOAT8_E5M2, /* 1 sign, 5 exponent, 2 mantissa bits; inf and NaN as IEEE 754 */
    WEFT_DTYPE_COUNT
} weft_dtype_t;

typedef enum {
    WEFT_SUM,
    WEFT_PROD,
    WEFT_MIN,
    WEFT_MAX,
    WEFT_AVG, /* sum, divided once by the communicator size at the end */
    WEFT_BAND,
    WEFT_BOR,
    WEFT_BXOR,
    WEFT_LAND,
    WEFT_LOR,
    WEFT_LXOR,
    WEFT_OP_COUNT
} weft_op_t;

/* Handles: opaque values, never pointers to dereference. A destroyed
 * communicator's or freed request's handle stays recognisable (using it
 * returns WEFT_ERR_INVALID_ARG, "... was destroyed") while the memory behind
 * it is reused: a handle carries a generation. NULL is never a handle. */
typedef struct weft_comm_handle *weft_comm_t;
typedef struct weft_request_handle *weft_request_t;

/* Names a job for weft_comm_init_rank: the bootstrap root's address and a
 * random 128-bit job token. Plain bytes: copy it to every rank. */
#define WEFT_UNIQUE_ID_BYTES 128
typedef struct weft_unique_id {
    unsigned char internal[WEFT_UNIQUE_ID_BYTES];
} weft_unique_id_t;
/* Length of the text form made by weft_unique_id_to_string, without the NUL. */
#define WEFT_UNIQUE_ID_STRLEN (2 * WEFT_UNIQUE_ID_BYTES)

/* Pass as sendbuf to request an in-place operation (like MPI_IN_PLACE). */
#define WEFT_IN_PLACE ((const void *)(intptr_t)-1)

/* Library lifetime: reference counted; configuration is read once, by the
 * first weft_init. */
weft_status_t weft_init(void);
weft_status_t weft_finalize(void);
/* The value weft_init read for configuration variable name ("MPI" or
 * "WEFT_MPI"; weft_info -c lists them), NUL-terminated in buf (len bytes);
 * a boolean reads as "1" or "0". For bindings with settings of their own
 * (libweft_mpi.so's WEFT_MPI). WEFT_ERR_NOT_INITIALIZED before weft_init,
 * WEFT_ERR_INVALID_ARG for an unknown name or a value that does not fit. */
weft_status_t weft_config_get(const char *name, char *buf, size_t len);

/* weft_status_string: what the status means ("operation timed out");
 * weft_status_name: its name in this header ("WEFT_ERR_TIMEOUT"), as libuv's
 * uv_err_name. Both are static strings; a value outside the list gives
 * "unknown status" and "unknown" respectively. */
const char *weft_status_string(weft_status_t status);
const char *weft_status_name(weft_status_t status);
const char *weft_last_error(void);

/* Size in bytes of one element; 0 for an unknown dtype. */
size_t weft_dtype_size(weft_dtype_t dtype);
const char *weft_dtype_name(weft_dtype_t dtype);
const char *weft_op_name(weft_op_t op);

/*
 * Communicators. A destroyed communicator's handle stays recognisable, also
 * after weft_finalize: using it returns WEFT_ERR_INVALID_ARG. Its memory is
 * freed when it is destroyed (or, for one that others were split from, when
 * the last of those is destroyed).
 *
 * weft_comm_world: every process of the job, found through PMIx when the
 * process was launched by mpirun or srun; else through a unique id given in
 * the environment (WEFT_UNIQUE_ID, WEFT_RANK, WEFT_NRANKS); else a
 * communicator of this process alone. Collective over the job.
 *
 * weft_get_unique_id starts the bootstrap root in the calling process, which
 * must then join the job with weft_comm_init_rank (normally as rank 0) and
 * stay alive while the job runs. Every rank calls weft_comm_init_rank with
 * the same id and nranks and its own rank.
 *
 * weft_comm_abort may be called from any thread: every pending and later
 * operation on comm returns WEFT_ERR_ABORTED promptly. The communicator
 * must still be destroyed.
 */
weft_status_t weft_comm_world(weft_comm_t *comm_p);
weft_status_t weft_get_unique_id(weft_unique_id_t *id_p);
weft_status_t weft_comm_init_rank(int nranks, const weft_unique_id_t *id, int rank,
                                  weft_comm_t *comm_p);
weft_status_t weft_comm_abort(weft_comm_t comm);
/*
 * Write comm's flight recorder to out: its last WEFT_RECORD_OPS collective
 * operations, oldest first, one line each (rank, sequence number,
 * collective, algorithm, count, dtype, op, root, start time in
 * CLOCK_MONOTONIC seconds, and done / failed with the reason / running with
 * its step and the ranks it waits for). Call it from the thread that drives
 * comm; it also works on a communicator that failed. With WEFT_DUMP_DIR
 * set, it also writes the JSON file tools/weft_doctor reads (a directory
 * that cannot take it is a warning in the log, not an error of this call).
 * WEFT_ERR_INVALID_ARG while enqueued operations of comm run on weft's
 * progress thread (synchronize their streams first, or send SIGUSR1 with
 * WEFT_DUMP_ON_SIGNAL=1, which that thread serves).
 */
weft_status_t weft_comm_dump(weft_comm_t comm, FILE *out);
/*
 * Counters of comm's collectives (WEFT_STATS=1; without it weft_stats
 * reports none), one entry per collective and size bucket that ran:
 *
 * - bytes: the sum of each call's size as nccl-tests counts it: count x
 *   dtype size for allreduce, bcast, reduce; count x size x ranks for
 *   allgather, reduce_scatter, alltoall, gather, scatter (the whole
 *   vector); the sum of the counts x dtype size for the v forms; 0 for
 *   barrier. Buckets are powers of 4 of that size: [0, 1), [1, 4),
 *   [4, 16), ... [bucket_lo, bucket_hi).
 * - seconds: the sum of each call's time, from the start of its schedule
 *   (or shared-memory run) to its completion on this rank. Only calls that
 *   succeeded count; calls of no data that return at once are not counted.
 *   Collectives weft itself runs on comm count too (when it is created,
 *   when it is split): weft_stats_reset after creating it leaves them out.
 * - busbw_gbs: bytes / seconds / 1e9 times nccl-tests' bus factor for comm's
 *   n ranks: 2(n-1)/n for allreduce; (n-1)/n for allgather(v),
 *   reduce_scatter(_v), alltoall(v), gather, scatter; 1 for bcast, reduce.
 *
 * weft_stats writes up to max entries to out (ordered by collective, then
 * size) and the number available to *count_p (out may be NULL with max 0
 * to ask for the number). Call it, weft_stats_print and weft_stats_reset
 * while no operation of comm is running (for _enqueue forms: after the
 * stream is synchronized). weft_stats_print writes a table to out.
 */
typedef struct weft_stats_entry {
    const char *collective; /* "allreduce"; static */
    size_t bucket_lo;       /* bytes, inclusive */
    size_t bucket_hi;       /* bytes, exclusive (SIZE_MAX for the last) */
    uint64_t calls;
    uint64_t bytes;
    double seconds;
    double busbw_gbs;
} weft_stats_entry_t;

weft_status_t weft_stats(weft_comm_t comm, weft_stats_entry_t *out, size_t max, size_t *count_p);
weft_status_t weft_stats_print(weft_comm_t comm, FILE *out);
weft_status_t weft_stats_reset(weft_comm_t comm);
/*
 * weft_comm_split: collective over comm; ranks with the same color form a
 * new communicator, ordered by key then by rank in comm. A negative color
 * joins none (*out_p is set to NULL). weft_comm_dup: the same ranks in the
 * same order, with separate message matching. The new communicator shares
 * comm's transport: drive comm and the communicators made from it from one
 * thread at a time. Each must be destroyed; destroying comm first is safe.
 */
weft_status_t weft_comm_split(weft_comm_t comm, int color, int key, weft_comm_t *out_p);
weft_status_t weft_comm_dup(weft_comm_t comm, weft_comm_t *out_p);
/* Hex text form of an id (for environments and files); buf needs
 * WEFT_UNIQUE_ID_STRLEN + 1 bytes. */
weft_status_t weft_unique_id_to_string(const weft_unique_id_t *id, char *buf, size_t len);
weft_status_t weft_unique_id_from_string(const char *text, weft_unique_id_t *id_p);
weft_status_t weft_comm_rank(weft_comm_t comm, int *rank_p);
weft_status_t weft_comm_size(weft_comm_t comm, int *size_p);
weft_status_t weft_comm_destroy(weft_comm_t comm);
/* The deadline, in seconds, of every wait of comm's operations started from
 * now on (blocking, nonblocking and enqueued collectives; point-to-point
 * waits): 0 restores WEFT_TIMEOUT's, INFINITY (math.h) means none. Split and
 * duplicated communicators start with their parent's. Call it from the
 * thread that drives comm. WEFT_ERR_INVALID_ARG for a negative or NaN value.
 * Frameworks give each group its own timeout this way (torch's
 * init_process_group / new_group timeout, bindings/torch). */
weft_status_t weft_comm_set_timeout(weft_comm_t comm, double seconds);
/* The reproducible mode (WEFT_REPRODUCIBLE, README) for comm's reductions
 * started from now on: 1 on (allreduce, reduce, reduce_scatter and
 * reduce_scatter_v give the same bits whatever the algorithm, placement and
 * nodes, for a given size of comm), 0 off. Every rank of comm must set the
 * same, between the same operations. A communicator starts with
 * WEFT_REPRODUCIBLE's setting; split and duplicated ones with their parent's.
 * WEFT_ERR_INVALID_ARG for another value. Call it from the thread that
 * drives comm. */
weft_status_t weft_comm_set_reproducible(weft_comm_t comm, int on);

/* Blocking collectives with MPI semantics; counts are in elements.
 *
 * In place: pass WEFT_IN_PLACE as sendbuf, or sendbuf == recvbuf.
 *  - allreduce: the input is read from recvbuf.
 *  - allgather: this rank's contribution is read from
 *    recvbuf + rank * sendcount elements. sendbuf == recvbuf + rank * sendcount
 *    (the NCCL convention) is in place too.
 *  - reduce_scatter: the input (size * recvcount elements) is read from
 *    recvbuf and the result is written to its first recvcount elements.
 *    recvbuf == sendbuf + rank * recvcount (the NCCL convention) reads the
 *    input from sendbuf and writes the result into that slot.
 * Any other overlap of sendbuf and recvbuf is WEFT_ERR_INVALID_ARG. */
weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             weft_dtype_t dtype, weft_op_t op, weft_comm_t comm);
weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  weft_dtype_t dtype, weft_op_t op, weft_comm_t comm);
weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                             weft_dtype_t dtype, weft_comm_t comm);

/*
 * Rooted collectives. Buffers marked "root" are read or written on root
 * only (they may be NULL elsewhere). In place on root: reduce with
 * WEFT_IN_PLACE or sendbuf == recvbuf; gather with WEFT_IN_PLACE or
 * sendbuf == recvbuf + root * sendcount (root's block is already there);
 * scatter with recvbuf == sendbuf + root * recvcount (root's block stays).
 */
weft_status_t weft_bcast(void *buf, size_t count, weft_dtype_t dtype, int root, weft_comm_t comm);
weft_status_t weft_reduce(const void *sendbuf, void *recvbuf /* root */, size_t count,
                          weft_dtype_t dtype, weft_op_t op, int root, weft_comm_t comm);
weft_status_t weft_gather(const void *sendbuf, void *recvbuf /* root */, size_t sendcount,
                          weft_dtype_t dtype, int root, weft_comm_t comm);
weft_status_t weft_scatter(const void *sendbuf /* root */, void *recvbuf, size_t recvcount,
                           weft_dtype_t dtype, int root, weft_comm_t comm);
/* Block r of sendbuf (count elements) goes to rank r; WEFT_IN_PLACE or
 * sendbuf == recvbuf exchanges recvbuf in place. */
weft_status_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                            weft_dtype_t dtype, weft_comm_t comm);
weft_status_t weft_barrier(weft_comm_t comm);

/*
 * Nonblocking collectives: weft_i<collective> takes the same arguments plus
 * a trailing weft_request_t *req_p, returns once the operation is started,
 * and leaves the buffers to weft until the request completes. Any number
 * may be outstanding on one communicator; all ranks must start the
 * collectives of a communicator in the same order.
 *
 * weft_test sets *done_p and, once done, returns the operation's status;
 * weft_wait blocks (with WEFT_TIMEOUT) and returns it; weft_waitall waits
 * for n requests and returns the first error. Testing or waiting progresses
 * every unfinished operation of the request's communicator. A request stays
 * valid until weft_request_free; freeing one that is not done lets the
 * operation finish on its own (its buffers stay in use until then). A
 * blocking collective of the communicator started after the free returns
 * only once the freed operation finished on this rank: the buffers are
 * final when it returns.
 */
weft_status_t weft_test(weft_request_t req, int *done_p);
weft_status_t weft_wait(weft_request_t req);
weft_status_t weft_waitall(int n, weft_request_t *reqs);
weft_status_t weft_request_free(weft_request_t req);

weft_status_t weft_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                              weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                              weft_request_t *req_p);
weft_status_t weft_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                   weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                                   weft_request_t *req_p);
weft_status_t weft_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                              weft_dtype_t dtype, weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_ibcast(void *buf, size_t count, weft_dtype_t dtype, int root,
                          weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_ireduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                           weft_op_t op, int root, weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
                           weft_dtype_t dtype, int root, weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                            weft_dtype_t dtype, int root, weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                             weft_dtype_t dtype, weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_iallgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                               const size_t *recvcounts, const size_t *displs,
                               weft_dtype_t dtype, weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_ialltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                              const size_t *sdispls, const size_t *recvcounts,
                              const size_t *rdispls, weft_dtype_t dtype, weft_comm_t comm,
                              weft_request_t *req_p);
weft_status_t weft_ireduce_scatter_v(const void *sendbuf, void *recvbuf,
                                     const size_t *recvcounts, weft_dtype_t dtype, weft_op_t op,
                                     weft_comm_t comm, weft_request_t *req_p);

/*
 * Point-to-point. Tags are 0..WEFT_TAG_UB. Messages between two
 * ranks with the same tag are received in the order they were sent. The
 * receive count must equal the sent count (a different size returns
 * WEFT_ERR_MISMATCH). A send may wait until the receive is posted (large
 * messages), as MPI_Send may.
 *
 * WEFT_ANY_SOURCE as the peer of weft_recv or weft_irecv takes the first
 * message with the tag from any rank (receives match in the order they were
 * posted, whatever their peer); weft_request_source then says who sent it.
 * Messages of any size and memory type: between processes a message larger
 * than one transfer fragment (WEFT_STAGE_FRAG, 1 MiB) is matched by its
 * first fragment, and the rest follows from its sender.
 */
#define WEFT_TAG_UB 65535
#define WEFT_ANY_SOURCE (-1)
weft_status_t weft_send(const void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                        weft_comm_t comm);
weft_status_t weft_recv(void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                        weft_comm_t comm);
/* Nonblocking forms, completed like the collectives' requests. Receives
 * posted for the same peer and tag match messages in posting order. */
weft_status_t weft_isend(const void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                         weft_comm_t comm, weft_request_t *req_p);
weft_status_t weft_irecv(void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                         weft_comm_t comm, weft_request_t *req_p);
/* The rank whose message a receive request got, once weft_test or weft_wait
 * found it complete and successful (the peer it named, or the sender for
 * WEFT_ANY_SOURCE); WEFT_ERR_INVALID_ARG before that, and for a request
 * that is not a receive or that failed. */
weft_status_t weft_request_source(weft_request_t req, int *source_p);
/* Per-rank counts and displacements, in elements, one entry per rank. In
 * place: allgatherv with WEFT_IN_PLACE (this rank's block already at
 * recvbuf + displs[rank]); alltoallv with WEFT_IN_PLACE (sendcounts and
 * sdispls ignored: recvcounts/rdispls describe both); reduce_scatter_v with
 * WEFT_IN_PLACE (the input, blocks packed in rank order, is in recvbuf and
 * the result is written to its front). */
weft_status_t weft_allgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                              const size_t *recvcounts, const size_t *displs,
                              weft_dtype_t dtype, weft_comm_t comm);
weft_status_t weft_alltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                             const size_t *sdispls, const size_t *recvcounts,
                             const size_t *rdispls, weft_dtype_t dtype, weft_comm_t comm);
weft_status_t weft_reduce_scatter_v(const void *sendbuf, void *recvbuf,
                                    const size_t *recvcounts, weft_dtype_t dtype, weft_op_t op,
                                    weft_comm_t comm);

/*
 * Memory types and streams.
 *
 * WEFT_MEM_HOST: ordinary process memory. WEFT_MEM_CUDA: CUDA device
 * memory (cudaMalloc'd or weft_mem_alloc'd); needs a libweft built with
 * CUDA and a GPU. WEFT_MEM_EMU: an accelerator emulated on the CPU, in every
 * build: its memory comes only from weft_mem_alloc, and weft treats it as it
 * treats device memory (transports stage it, reductions run on its stream
 * workers, peers on the node map it through IPC), so every device code path
 * runs on machines without a GPU.
 *
 * Every collective, blocking and nonblocking, accepts device buffers with
 * CUDA-aware MPI semantics: the data is in place when the call (or request)
 * completes. sendbuf and recvbuf must be of the same memory type.
 *
 * weft_mem_type: the type of the memory ptr points into (malloc'd memory and
 * any address weft knows nothing of: HOST). A pointer into emu memory that
 * was freed is WEFT_ERR_INVALID_ARG while the allocation is one of the last
 * 4096 emu allocations freed; every freed range stays reserved and
 * inaccessible (address space only), so a later use faults.
 *
 * Streams: weft_stream_create makes a stream of a device type (a CUDA user
 * may pass its own cudaStream_t instead). An emu stream is a handle like a
 * communicator's: once destroyed, it is refused (WEFT_ERR_INVALID_ARG) and
 * its memory and worker are gone. weft_memcpy_async queues a copy
 * (host <-> device or device <-> device). weft_stream_synchronize waits
 * for everything queued and returns the first error of it, including
 * errors of enqueued collectives (then with weft_last_error's diagnosis).
 */
typedef enum { WEFT_MEM_HOST, WEFT_MEM_CUDA, WEFT_MEM_EMU } weft_memtype_t;
typedef void *weft_stream_t;

weft_status_t weft_mem_alloc(weft_memtype_t type, size_t bytes, void **ptr_p);
weft_status_t weft_mem_free(void *ptr);
weft_status_t weft_mem_type(const void *ptr, weft_memtype_t *type_p);
const char *weft_memtype_name(weft_memtype_t type);
weft_status_t weft_stream_create(weft_memtype_t type, weft_stream_t *stream_p);
weft_status_t weft_stream_destroy(weft_stream_t stream);
weft_status_t weft_stream_synchronize(weft_stream_t stream);
weft_status_t weft_memcpy_async(void *dst, const void *src, size_t bytes, weft_stream_t stream);

/*
 * Capture and replay. Between weft_stream_begin_capture(stream) and
 * weft_stream_end_capture(stream, &graph), what is queued on the stream
 * through weft (weft_memcpy_async, the _enqueue collectives, weft_send_enqueue,
 * weft_recv_enqueue) is checked as usual and recorded in the graph instead of
 * run; weft_stream_synchronize of a capturing stream is WEFT_ERR_INVALID_ARG.
 * weft_graph_launch(graph, stream) queues the recorded steps on a stream (the
 * captured one or another of the same device) in recorded order, as if each
 * call were made again then: every rank launches its graph where it would
 * have made the calls, a collective takes its communicator's next sequence
 * number, and launches interleave with ordinary enqueues. The buffers are
 * the captured ones, read and written when each step runs; a graph may hold
 * several communicators, and is launched any number of times until
 * weft_graph_destroy. A launch whose step cannot run (its communicator
 * destroyed, its buffers not reachable from the stream) fails and queues
 * nothing. Emu streams only for now (a CUDA stream is WEFT_ERR_UNSUPPORTED);
 * destroying a capturing stream drops its capture.
 */
typedef struct weft_graph_handle *weft_graph_t;
weft_status_t weft_stream_begin_capture(weft_stream_t stream);
weft_status_t weft_stream_end_capture(weft_stream_t stream, weft_graph_t *graph_p);
weft_status_t weft_graph_launch(weft_graph_t graph, weft_stream_t stream);
weft_status_t weft_graph_destroy(weft_graph_t graph);

/*
 * Stream-ordered collectives: weft_<collective>_enqueue takes the blocking
 * form's arguments plus a trailing stream, and returns at once, without
 * waiting for peers or for the stream. The operation starts once the work
 * queued on the stream before it is done, and work queued after it waits
 * for it. It runs on weft's progress thread, in enqueue order per
 * communicator. Errors found later (timeout, dead peer, mismatch) are
 * returned by weft_stream_synchronize and by the next call on the
 * communicator. A blocking or nonblocking call on a communicator first
 * waits (with WEFT_TIMEOUT) until its enqueued operations are done, so
 * operations run in program order; enqueueing on a communicator that has
 * unfinished nonblocking requests is WEFT_ERR_INVALID_ARG.
 * Buffers may be host or device memory; argument errors are returned at
 * once and nothing is queued.
 */
weft_status_t weft_allreduce_enqueue(const void *sendbuf, void *recvbuf, size_t count,
                                     weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                                     weft_stream_t stream);
weft_status_t weft_reduce_scatter_enqueue(const void *sendbuf, void *recvbuf, size_t recvcount,
                                          weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                                          weft_stream_t stream);
weft_status_t weft_allgather_enqueue(const void *sendbuf, void *recvbuf, size_t sendcount,
                                     weft_dtype_t dtype, weft_comm_t comm, weft_stream_t stream);
weft_status_t weft_bcast_enqueue(void *buf, size_t count, weft_dtype_t dtype, int root,
                                 weft_comm_t comm, weft_stream_t stream);
weft_status_t weft_reduce_enqueue(const void *sendbuf, void *recvbuf, size_t count,
                                  weft_dtype_t dtype, weft_op_t op, int root, weft_comm_t comm,
                                  weft_stream_t stream);
weft_status_t weft_gather_enqueue(const void *sendbuf, void *recvbuf, size_t sendcount,
                                  weft_dtype_t dtype, int root, weft_comm_t comm,
                                  weft_stream_t stream);
weft_status_t weft_scatter_enqueue(const void *sendbuf, void *recvbuf, size_t recvcount,
                                   weft_dtype_t dtype, int root, weft_comm_t comm,
                                   weft_stream_t stream);
weft_status_t weft_alltoall_enqueue(const void *sendbuf, void *recvbuf, size_t count,
                                    weft_dtype_t dtype, weft_comm_t comm, weft_stream_t stream);
weft_status_t weft_barrier_enqueue(weft_comm_t comm, weft_stream_t stream);
weft_status_t weft_allgatherv_enqueue(const void *sendbuf, void *recvbuf, size_t sendcount,
                                      const size_t *recvcounts, const size_t *displs,
                                      weft_dtype_t dtype, weft_comm_t comm,
                                      weft_stream_t stream);
weft_status_t weft_alltoallv_enqueue(const void *sendbuf, void *recvbuf,
                                     const size_t *sendcounts, const size_t *sdispls,
                                     const size_t *recvcounts, const size_t *rdispls,
                                     weft_dtype_t dtype, weft_comm_t comm, weft_stream_t stream);
weft_status_t weft_reduce_scatter_v_enqueue(const void *sendbuf, void *recvbuf,
                                            const size_t *recvcounts, weft_dtype_t dtype,
                                            weft_op_t op, weft_comm_t comm,
                                            weft_stream_t stream);
weft_status_t weft_send_enqueue(const void *buf, size_t count, weft_dtype_t dtype, int peer,
                                int tag, weft_comm_t comm, weft_stream_t stream);
weft_status_t weft_recv_enqueue(void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                                weft_comm_t comm, weft_stream_t stream);

/*
 * Groups of stream-ordered point-to-point operations. Between
 * weft_group_start() and weft_group_end() (per thread; they nest, and the
 * outermost end counts), weft_send_enqueue and weft_recv_enqueue are checked
 * at the call and held; weft_group_end queues the held operations of each
 * communicator and stream as one operation that posts them all at once and
 * ends when all are done. Ranks that exchange in both directions (a ring, a
 * halo, a pipeline stage's sends and receives) then never wait for each
 * other, as stream-ordered operations one after another would (a large send
 * holds its stream until its receive is posted). A collective enqueued inside
 * a group is WEFT_ERR_INVALID_ARG; blocking and nonblocking calls run at once
 * as usual. On a capturing stream the group is recorded as one step and
 * launched as a group.
 */
weft_status_t weft_group_start(void);
weft_status_t weft_group_end(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_H */
