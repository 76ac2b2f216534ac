/*
 * The collective tests' one checker (test_algorithms, test_exchange,
 * test_rooted, test_shm and device_cases): a table with a row per
 * collective kind says, for rank r of p, what its send buffer holds before
 * the call and what its receive buffer must hold after it, as blocks of
 * elements:
 *
 *     element `at + j` of the buffer = element `first + j` of rank `rank`'s
 *                                      data (CHECK_REDUCED: of the reduction
 *                                      over every rank), j < len
 *
 * and every element outside the blocks (gaps between v-blocks) keeps the
 * fill. The test supplies the data (check_data_t: element i of rank q's
 * input, element i of the reduction, the fill) and the shape of the call
 * (check_shape_t: kind, ranks, root, count, the v-collectives' counts and
 * displacements); the table does the rest: buffer lengths, the inputs, the
 * in-place layouts, the call itself, and the comparison.
 *
 *     kind              send blocks (rank r)           receive blocks
 *     allreduce         r[0, n)                        R[0, n)
 *     reduce            r[0, n)                        R[0, n)                 (root)
 *     bcast             root[0, n)             (root)  root[0, n)
 *     allgather(v)      r[0, c_r)                      q[0, c_q) at d_q        (gather: root)
 *     scatter           root[0, p n)           (root)  root[r n, r n + n)
 *     reduce_scatter(v) r[0, sum c)                    R[o_r, o_r + c_r)      o_r = sum of c_q, q <
 * r alltoall(v)       r[q S, q S + s_q) at sd_q      q[r S, r S + c_q) at d_q
 *
 * (c, d: counts and displs, n and q n for the regular kinds; s, sd: the
 * alltoallv send side; S: alltoall n, alltoallv the shape's stride.)
 *
 * Threading: every function may run on any rank thread at once; the data
 * callbacks must allow that.
 */
#ifndef WEFT_TESTS_COLL_CHECK_H
#define WEFT_TESTS_COLL_CHECK_H

#include "coll/coll.h"

#include <stddef.h>
#include <stdint.h>

#define CHECK_REDUCED (-1) /* a block's rank: the reduction over every rank */

/* A 64-bit mixer (MurmurHash3's finalizer): the tests' deterministic data. */
static inline uint64_t check_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

typedef struct check_data {
    size_t es; /* element size */
    /* dst = element i of rank q's data */
    void (*value)(const void *ctx, int q, size_t i, void *dst);
    /* dst = element i of the reduction over every rank (NULL: nothing reduces) */
    void (*reduced)(const void *ctx, size_t i, void *dst);
    const void *fill; /* es bytes that gaps and untouched outputs hold */
    const void *ctx;
} check_data_t;

typedef struct check_shape {
    weft_coll_kind_t kind;
    int p, rank, root;
    size_t n; /* count, per block for the per-rank kinds */
    /* the v-kinds, per peer q: allgatherv's and alltoallv's receive layout,
     * reduce_scatter_v's counts (displs unused); alltoallv's send layout */
    const size_t *counts, *displs;
    const size_t *scounts, *sdispls;
    size_t rext, sext; /* their extents in elements, gaps included */
    size_t stride;     /* alltoallv: rank a's block for rank b is a's elements b * stride + j */
} check_shape_t;

enum { CHECK_SEND, CHECK_RECV };

typedef struct check_block {
    size_t at, len;
    int rank; /* whose data, or CHECK_REDUCED */
    size_t first;
} check_block_t;

/* The blocks of one side into b (room for p + 1); returns how many, and in
 * *ext_p the buffer's elements; -1 (and 0 elements) where MPI gives the rank
 * no such buffer (a non-root's receive buffer of reduce and gather, send
 * buffer of scatter and bcast, both of barrier). */
int check_blocks(const check_shape_t *s, int side, check_block_t *b, size_t *ext_p);
/* Whether the rank has the side's buffer; its elements. */
int check_has(const check_shape_t *s, int side);
size_t check_extent(const check_shape_t *s, int side);

/* dst (check_extent elements) = the side's image: its blocks, fill between. */
void check_image(const check_shape_t *s, int side, const check_data_t *d, void *dst);
/* dst (receive extent) = the receive buffer of an in-place call before it:
 * fill, and this rank's input where MPI's in-place form takes it (its own
 * block of allgather(v)/gather; the whole send image at the front
 * otherwise). */
void check_image_in_place(const check_shape_t *s, const check_data_t *d, void *dst);

/* Where got first differs from the side's image: its element index, or -1.
 * msg (cap bytes) then says which element of whose data, got and want. */
long check_diff(const check_shape_t *s, int side, const check_data_t *d, const void *got, char *msg,
                size_t cap);

enum { CHECK_BLOCKING, CHECK_NONBLOCKING, CHECK_ENQUEUE };

/* Call the shape's collective in one form (blocking; weft_i<fn> then
 * weft_wait; weft_<fn>_enqueue on stream then weft_stream_synchronize);
 * bcast's buffer is recvbuf. */
weft_status_t check_call(const check_shape_t *s, int mode, const void *sendbuf, void *recvbuf,
                         weft_dtype_t dtype, weft_op_t op, weft_comm_t comm, weft_stream_t stream);

/* Force algo for every size of kind (after weft_init): a WEFT_TUNE rule, and
 * the reproducible mode for an ordered row (the only mode it runs in). NULL
 * when done, and when selection then returns the row wherever the row can
 * run anywhere; else what went wrong (a static buffer). */
const char *check_force(weft_coll_kind_t kind, const char *algo);

/* After a run with WEFT_HIER_LEADER inf (leader) or 0: NULL when hierarchical schedules were
 * built in a leader form since weft__hier_leader_builds() returned before (leader), or none
 * were (not); else what went wrong (a static buffer). */
const char *check_hier_leader_builds(unsigned long before, int leader);

/* A split of comm (nranks ranks, this one `rank`, cut into virtual nodes of rpn) whose ranks take
 * the nodes in turn (rank r of the split on node r % N): no node's ranks are consecutive there,
 * so the hierarchical algorithms put blocks in rank order themselves. *out_p and *rank_p: the
 * split and this rank's place in it; the status of the split. */
weft_status_t check_split_interleaved(weft_comm_t comm, int rank, int nranks, int rpn,
                                      weft_comm_t *out_p, int *rank_p);

#endif /* WEFT_TESTS_COLL_CHECK_H */
