/*
 * What the files of weft_bench share (benchmarks/weft_bench.c has the
 * options, the timing and the output; bench_check.c the expected results of
 * --check; bench_copy.c the memory-copy bandwidth of the %copy column).
 */
#ifndef WEFT_BENCHMARKS_WEFT_BENCH_H
#define WEFT_BENCHMARKS_WEFT_BENCH_H

#include <weft.h>

#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

typedef enum {
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_BCAST,
    COLL_REDUCE,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_ALLTOALL,
    COLL_BARRIER,
    COLL_ALLGATHERV,
    COLL_ALLTOALLV,
    COLL_REDUCE_SCATTER_V,
    COLL_PINGPONG, /* point-to-point: weft_send/weft_recv between pairs of ranks */
    COLL_COUNT
} coll_t;
typedef enum { FORMAT_OSU, FORMAT_NCCL, FORMAT_CSV } format_t;

typedef struct options {
    coll_t coll;
    size_t min_bytes, max_bytes;
    int factor, iters, warmup;
    weft_dtype_t dtype;
    weft_op_t op;
    const char *algo;
    int check, vs_mpi, in_place;
    int root;
    format_t format;
    weft_memtype_t mem; /* where the buffers live (-d host|emu|cuda) */
    int enqueue;        /* time weft's _enqueue forms on a stream */
    int compute_us;     /* the application's work between two iterations */
    int loop;           /* time the calls back to back on buffers filled once */
    int chain;          /* --enqueue: collectives enqueued per synchronize */
} options_t;

/* This process's rank and the job's size in MPI_COMM_WORLD. */
extern int rank, nranks;

/* bench_check.c. value: element i of rank r's input at iteration iter
 * (small integers, exact in every dtype, so checks compare bit for bit);
 * store: v as element i of buf in dtype d; plain: the v forms run with
 * equal counts, so they produce what their plain form does; expected:
 * element i of this rank's result at iteration iter, into out. */
int64_t value(int r, size_t i, int iter);
void store(weft_dtype_t d, void *buf, size_t i, int64_t v);
coll_t plain(coll_t c);
/* pingpong's partner of this rank: rank + n/2 or rank - n/2; -1 for the
 * last rank of an odd job (it idles) and for a job of one. */
int pingpong_peer(void);
void expected(const options_t *o, size_t i, size_t count, int iter, void *out);

/* bench_copy.c: memory-copy bandwidth, the reference of the %copy column
 * (see weft_bench.c's top comment). */
typedef struct copy_bw {
    double alone;       /* GB/s of rank 0 copying while the other ranks wait (rank 0 only) */
    double all;         /* GB/s of the slowest rank, every rank copying at once */
    size_t alone_bytes; /* of one memcpy alone */
    size_t all_bytes;   /* of one memcpy per rank, all at once */
    int node_ranks;     /* most ranks on one node */
    int nodes;
} copy_bw_t;

enum { COPY_REPS = 3 }; /* copies timed; the best counts */
#define MIB ((size_t)1 << 20)

/* Collective: every rank calls it; copy_p->alone is set on rank 0 only. */
void copy_measure(copy_bw_t *copy_p);
/* busbw as a percentage of the one-rank-alone copy rate (0: not measured). */
double pct_copy(const copy_bw_t *copy, double busbw);

#endif /* WEFT_BENCHMARKS_WEFT_BENCH_H */
