/*
 * Internals of libweft_mpi, the PMPI interposer.
 *
 * Every interposed collective follows one path:
 *   1. gate: served at all (MPI initialised through us, WEFT_MPI not off)?
 *   2. local checks, each a reason to forward: arguments MPI calls
 *      erroneous (then Open MPI reports them exactly as it would), datatype
 *      and op weft lacks, intercommunicator, memory type;
 *   3. the communicator's weft communicator (comm.c: MPI_COMM_WORLD's made
 *      at MPI_Init, every other one split from its parent's when MPI makes
 *      the communicator; one without is forwarded);
 *   4. weft runs (blocking) or starts (I-forms: an MPI generalized request
 *      completed when weft finishes, see request.c) the collective.
 * Anything forwarded goes to the PMPI_ function with the caller's own
 * arguments.
 *
 * Threading: the registry of communicators and the request map have their
 * own locks. Every weft communicator is split from the world's and shares
 * its transport, so weft is driven under one lock, weft__mpi_lock; under
 * MPI_THREAD_MULTIPLE a blocking collective is started and tested with the
 * lock released between tests, so that threads blocked in collectives of
 * different communicators never wait for each other.
 */
#ifndef WEFT_MPI_INTERNAL_H
#define WEFT_MPI_INTERNAL_H

#include "include/weft_mpi.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define WEFT_MPI_EXPORT __attribute__((visibility("default")))

/* Why a call went to the MPI library: one list for the enum and the stats. */
#define WEFT_MPI_REASON_MAP(X)                                                                     \
    X(OFF, "off")                   /* WEFT_MPI=off, or weft did not start */                      \
    X(NOT_INIT, "not_initialized")  /* before MPI_Init or after MPI_Finalize */                    \
    X(ARGS, "args")                 /* arguments MPI calls erroneous */                            \
    X(DTYPE, "dtype")               /* derived, or no weft dtype for this op */                    \
    X(OP, "op")                     /* user op, MAXLOC/MINLOC, op not defined for the dtype */     \
    X(TYPES_DIFFER, "types_differ") /* send and receive type signatures differ */                  \
    X(INTERCOMM, "intercomm")                                                                      \
    X(MEMORY, "memory_type")     /* a buffer weft cannot reach */                                  \
    X(NO_COMM, "no_weft_comm")   /* the weft communicator could not be made */                     \
    X(REJECTED, "weft_rejected") /* weft refused the arguments before sending */

typedef enum {
    WEFT__MPI_SERVE = 0,
#define WEFT__MPI_REASON_ENUM(name, text) WEFT__MPI_WHY_##name,
    WEFT_MPI_REASON_MAP(WEFT__MPI_REASON_ENUM)
#undef WEFT__MPI_REASON_ENUM
        WEFT__MPI_WHY_COUNT
} weft__mpi_why_t;

/* One MPI communicator's weft communicator (the value of its attribute). */
typedef struct weft__mpi_comm {
    weft_comm_t wc;         /* NULL: making it failed on some rank, so never served */
    MPI_Comm mcomm;         /* for the error handler; stale once freed */
    atomic_int refs;        /* the attribute + one per unfinished request */
    atomic_int mcomm_freed; /* the MPI communicator is gone */
    int rank, size;
    struct weft__mpi_comm *next; /* registry (state.c) */
} weft__mpi_comm_t;

typedef enum {
    WEFT__MPI_ALLREDUCE,
    WEFT__MPI_REDUCE,
    WEFT__MPI_BCAST,
    WEFT__MPI_ALLGATHER,
    WEFT__MPI_ALLGATHERV,
    WEFT__MPI_REDUCE_SCATTER_V,
    WEFT__MPI_REDUCE_SCATTER,
    WEFT__MPI_ALLTOALL,
    WEFT__MPI_ALLTOALLV,
    WEFT__MPI_GATHER,
    WEFT__MPI_SCATTER,
    WEFT__MPI_BARRIER,
} weft__mpi_kind_t;

/* A collective as weft will run it. The size_t arrays are owned by the call
 * (one allocation, arrays[0]) and freed when it is done. */
typedef struct weft__mpi_call {
    weft__mpi_kind_t kind;
    const char *name; /* "MPI_Allreduce": for errors */
    const void *sbuf;
    void *rbuf;
    size_t count;
    weft_dtype_t dtype;
    weft_op_t op;
    int root;
    size_t *counts, *displs, *scounts, *sdispls;
    size_t *arrays;
    weft__mpi_comm_t *entry; /* the communicator's, as its check found it (NULL: none) */
} weft__mpi_call_t;

/* state.c */
extern pthread_mutex_t weft__mpi_lock;
extern int weft__mpi_multiple;     /* MPI_THREAD_MULTIPLE was provided */
extern atomic_int weft__mpi_state; /* 0 before MPI_Init, 1 serving, 2 off, 3 finalizing */
int weft__mpi_gate(void);          /* 1: try to serve; else counted as forwarded */
void weft__mpi_count_forward(weft__mpi_why_t why);
void weft__mpi_count_served(void);
/* The communicator's entry: WEFT__MPI_SERVE with *e_p set (a reference for
 * the caller, dropped with weft__mpi_comm_put), or a reason. */
weft__mpi_why_t weft__mpi_comm_get(MPI_Comm comm, weft__mpi_comm_t **e_p);
void weft__mpi_comm_put(weft__mpi_comm_t *e);
/* NULL: MPI_COMM_NULL; else size, rank and whether it is an intercomm; *e_p
 * (unless e_p is NULL): its entry, NULL where it has none (no reference
 * taken: the call's own thread holds the communicator while it runs). */
weft__mpi_why_t weft__mpi_comm_check(MPI_Comm comm, int *size_p, int *rank_p,
                                     weft__mpi_comm_t **e_p);
/* Collective over parent, after MPI made newc from it (MPI_COMM_NULL on
 * ranks outside it): newc's weft communicator, split from parent's. */
void weft__mpi_derive(MPI_Comm parent, MPI_Comm newc);
int weft__mpi_error_class(weft_status_t status);
/* Raise a weft failure through comm's error handler; returns the class. */
int weft__mpi_raise(weft__mpi_comm_t *e, const char *call, weft_status_t status);

/* dtype.c */
void weft__mpi_dtype_setup(void);
/* Reductions: the weft dtype and op, or the reason to forward. */
weft__mpi_why_t weft__mpi_reduction(MPI_Datatype dt, MPI_Op op, weft_dtype_t *dtype_p,
                                    weft_op_t *op_p);
/* Data movement: size in bytes of a contiguous predefined datatype. */
weft__mpi_why_t weft__mpi_movable(MPI_Datatype dt, size_t *size_p);
/* Why weft refused a call's buffers: WEFT__MPI_WHY_MEMORY for two memory types or freed device
 * memory (asked after weft's own check refused the call, not before every call). */
weft__mpi_why_t weft__mpi_memory(const void *a, const void *b);
int weft__mpi_overlap(const void *a, size_t alen, const void *b, size_t blen);

/* serve.c: run (req == NULL) or start the call; WEFT__MPI_SERVE with *rc_p
 * set, or a reason to forward (nothing was sent). Always frees c->arrays. */
weft__mpi_why_t weft__mpi_serve(MPI_Comm comm, weft__mpi_why_t why, weft__mpi_call_t *c,
                                MPI_Request *req, int *rc_p);
size_t *weft__mpi_arrays(weft__mpi_call_t *c, int n, int size);

/* request.c */
int weft__mpi_request_start(weft__mpi_comm_t *e, weft_request_t wreq, weft__mpi_call_t *c,
                            MPI_Request *req);
void weft__mpi_request_drain(void);

/* coll.c, coll_move.c: the checks' shared steps. WHY returns a reason to
 * forward; dispatch serves the call, nonzero when it did (*rc_p set). */
#define WHY(expr)                                                                                  \
    do {                                                                                           \
        weft__mpi_why_t why_ = (expr);                                                             \
        if (why_ != WEFT__MPI_SERVE) {                                                             \
            return why_;                                                                           \
        }                                                                                          \
    } while (0)
#define ARGS_IF(cond) WHY((cond) ? WEFT__MPI_WHY_ARGS : WEFT__MPI_SERVE)

static inline weft__mpi_why_t root_ok(int root, int size)
{
    return root < 0 || root >= size ? WEFT__MPI_WHY_ARGS : WEFT__MPI_SERVE;
}

/* Both buffers given and not aliased, for bytes each. */
static inline weft__mpi_why_t distinct(const void *s, size_t slen, const void *r, size_t rlen)
{
    if ((slen > 0 && s == NULL) || (rlen > 0 && r == NULL) || weft__mpi_overlap(s, slen, r, rlen)) {
        return WEFT__MPI_WHY_ARGS;
    }
    return WEFT__MPI_SERVE;
}

static inline int dispatch(weft__mpi_why_t why, MPI_Comm comm, weft__mpi_call_t *c,
                           MPI_Request *req, int nb, int *rc_p)
{
    if (nb && req == NULL) {
        why = why == WEFT__MPI_SERVE ? WEFT__MPI_WHY_ARGS : why;
    }
    return weft__mpi_serve(comm, why, c, nb ? req : NULL, rc_p) == WEFT__MPI_SERVE;
}

#endif /* WEFT_MPI_INTERNAL_H */
