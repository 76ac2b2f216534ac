/*
 * Rooted collectives and barrier on in-process ranks whose messages land in
 * a seeded random order: every algorithm x rank counts 1..64 x counts
 * {0, 1, p-1, p+1, 5001} x roots {0, p/2, p-1} x in place / out of place
 * (where MPI defines it) x dtypes/ops rotating with p.
 *
 * Inputs are deterministic per (rank, element, combination); reductions use
 * data whose result does not depend on the order of combination (floats
 * holding halves of small integers, integer max, xor), so results are
 * compared exactly with a reference computed here. Buffers that the
 * semantics leave alone are NULL (non-root receive buffers of reduce and
 * gather, non-root send buffers of scatter), and guard bytes after every
 * buffer must stay untouched.
 *
 * The shared-memory algorithms run with slots of one page, so that large
 * counts take several rounds through both buffers of every rank, and with
 * the one-phase reduce only up to 64 bytes, so that both forms run; the
 * hierarchical ones on virtual nodes of 2 and 3 ranks (WEFT_RANKS_PER_NODE),
 * where rank counts that are not a multiple fall back to point-to-point.
 * Every world asserts where the ranks ran: shared memory on every rank
 * wherever the nodes are uniform, several nodes wherever they were cut.
 */
#include <criterion/criterion.h>

#include "coll/coll.h"
#include "coll/shm/shm.h"
#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/thread_world.h"
#include "tests/coll/check.h"
#include "tests/harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARD 64 /* bytes after each buffer that must stay untouched */
#define GUARD_BYTE 0xa5
#define FILL_BYTE 0x5a
#define LARGE_COUNT 5001

typedef struct combo {
    weft_dtype_t dtype;
    weft_op_t op; /* reduce only; the other collectives use the dtype */
} combo_t;

static const combo_t combos[] = {
    {WEFT_FLOAT32, WEFT_SUM},
    {WEFT_INT32, WEFT_MAX},
    {WEFT_UINT8, WEFT_BXOR},
    {WEFT_FLOAT32, WEFT_AVG},
};
#define NCOMBOS ((int)(sizeof(combos) / sizeof(combos[0])))

/* inplace: 0 out of place; 1 WEFT_IN_PLACE (reduce, gather) or recvbuf ==
 * sendbuf + root block (scatter); 2 sendbuf == recvbuf (reduce) or sendbuf ==
 * recvbuf + root block (gather) */
typedef struct tcase {
    size_t count;
    int root;
    int combo;
    int inplace;
} tcase_t;

typedef struct shared {
    weft_coll_kind_t kind;
    const tcase_t *cases;
    int ncases;
    int nranks;
    pthread_barrier_t barrier;
    atomic_long checked;
} shared_t;

/* Input element i of rank r for combination ci. */
static void gen(int ci, int r, size_t i, void *dst)
{
    uint64_t h = check_mix(((uint64_t)r << 40) ^ ((uint64_t)i << 8) ^ (uint64_t)ci ^ 0x7654321ull);

    switch (combos[ci].dtype) {
    case WEFT_FLOAT32: {
        float v = (float)(h % 17) * 0.5f; /* sums of up to 64 are exact */
        memcpy(dst, &v, 4);
        break;
    }
    case WEFT_INT32: {
        uint32_t v = (uint32_t)h;
        memcpy(dst, &v, 4);
        break;
    }
    default:
        *(uint8_t *)dst = (uint8_t)h;
        break;
    }
}

/* Expected element i of the reduction over ranks 0..p-1. */
static void expect(int ci, int p, size_t i, void *dst)
{
    unsigned char e[4];

    switch (combos[ci].dtype) {
    case WEFT_FLOAT32: {
        float acc = 0, v;
        for (int r = 0; r < p; r++) {
            gen(ci, r, i, e);
            memcpy(&v, e, 4);
            acc += v;
        }
        if (combos[ci].op == WEFT_AVG) {
            acc = acc / (float)p;
        }
        memcpy(dst, &acc, 4);
        break;
    }
    case WEFT_INT32: {
        int32_t m = INT32_MIN, v;
        for (int r = 0; r < p; r++) {
            gen(ci, r, i, e);
            memcpy(&v, e, 4);
            m = v > m ? v : m;
        }
        memcpy(dst, &m, 4);
        break;
    }
    default: {
        uint8_t acc = 0;
        for (int r = 0; r < p; r++) {
            gen(ci, r, i, e);
            acc ^= e[0];
        }
        *(uint8_t *)dst = acc;
        break;
    }
    }
}

/* A buffer of `bytes` followed by guard bytes, filled with FILL_BYTE. */
static unsigned char *guarded(size_t bytes)
{
    unsigned char *b = malloc(bytes + GUARD);

    if (b == NULL) {
        fprintf(stderr, "test out of memory\n");
        abort();
    }
    memset(b, FILL_BYTE, bytes);
    memset(b + bytes, GUARD_BYTE, GUARD);
    return b;
}

static int guard_ok(const unsigned char *b, size_t bytes)
{
    for (size_t g = 0; g < GUARD; g++) {
        if (b != NULL && b[bytes + g] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

/* The checker's view of the data (tests/coll/check.h): ctx is the combo. */
static void data_value(const void *ctx, int q, size_t i, void *dst)
{
    gen(*(const int *)ctx, q, i, dst);
}

static void data_reduced(const void *ctx, size_t i, void *dst)
{
    const int *x = ctx; /* {combo, p} */

    expect(x[0], x[1], i, dst);
}

static void run_case(shared_t *sh, weft_comm_t comm, int rank, const tcase_t *tc)
{
    const int p = sh->nranks, ci = tc->combo, root = tc->root, is_root = rank == root;
    const weft_dtype_t dt = combos[ci].dtype;
    const size_t es = weft_dtype_size(dt), n = tc->count;
    const char *what = weft__coll_kind_name(sh->kind);
    static const unsigned char fill_elem[4] = {FILL_BYTE, FILL_BYTE, FILL_BYTE, FILL_BYTE};
    const int x[2] = {ci, p};
    const check_data_t data = {es, data_value, data_reduced, fill_elem, x};
    const check_shape_t shape = {.kind = sh->kind, .p = p, .rank = rank, .root = root, .n = n};
    const size_t in_bytes = check_extent(&shape, CHECK_SEND) * es;
    const size_t out_bytes = check_extent(&shape, CHECK_RECV) * es;
    const int in_place_scatter = sh->kind == WEFT_COLL_SCATTER && is_root && tc->inplace;
    unsigned char *in = NULL, *out = NULL;
    weft_status_t status;
    const void *sendbuf;
    void *recvbuf;
    char msg[256];

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        char msg_[320];                                                                            \
        snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                                 \
        HARNESS_FAIL("%s p=%d count=%zu root=%d %s %s inplace=%d rank %d: %s", what, p, n, root,   \
                     weft_dtype_name(dt), weft_op_name(combos[ci].op), tc->inplace, rank, msg_);   \
        goto done;                                                                                 \
    } while (0)

    /* the buffers MPI gives this rank (bcast: one, holding the root's data
     * at the root); scatter's root in place receives into its own block */
    if (check_has(&shape, CHECK_SEND) && sh->kind != WEFT_COLL_BCAST) {
        in = guarded(in_bytes);
        check_image(&shape, CHECK_SEND, &data, in);
    }
    if (check_has(&shape, CHECK_RECV) && !in_place_scatter) {
        out = guarded(out_bytes);
        if (sh->kind == WEFT_COLL_BCAST && is_root) {
            check_image(&shape, CHECK_SEND, &data, out);
        }
    }
    sendbuf = in;
    recvbuf = in_place_scatter ? in + (size_t)root * n * es : out;
    if (tc->inplace && is_root && sh->kind != WEFT_COLL_SCATTER) {
        /* reduce: the input in recvbuf; gather: the root's block in place */
        size_t at = sh->kind == WEFT_COLL_GATHER ? (size_t)root * n * es : 0;

        check_image_in_place(&shape, &data, out);
        sendbuf = tc->inplace == 1 ? WEFT_IN_PLACE : out + at;
    }
    status = check_call(&shape, CHECK_BLOCKING, sendbuf, recvbuf, dt, combos[ci].op, comm, NULL);
    if (status != WEFT_OK) {
        FAIL("%s (%s)", weft_status_string(status), weft_last_error());
    }
    if (recvbuf != NULL && check_diff(&shape, CHECK_RECV, &data, recvbuf, msg, sizeof(msg)) >= 0) {
        FAIL("%s", msg);
    }
    if (in != NULL && check_diff(&shape, CHECK_SEND, &data, in, msg, sizeof(msg)) >= 0) {
        FAIL("sendbuf was modified: %s", msg);
    }
    if (!guard_ok(in, in_bytes) || !guard_ok(out, out_bytes)) {
        FAIL("wrote past the end of a buffer");
    }
    atomic_fetch_add(&sh->checked, 1);
done:
#undef FAIL
    /* no rank frees buffers a late peer could still be reading */
    pthread_barrier_wait(&sh->barrier);
    free(in);
    free(out);
}

/* ranks that ran with shared memory and with a node map of several nodes */
static atomic_int with_shm, with_nodes;
/* ranks that read a peer's buffer by process_vm_readv, over every world of a matrix */
static atomic_long with_cma_reads;

static void count_placement(weft_comm_t comm)
{
    atomic_fetch_add(&with_shm, weft__comm_of(comm)->coll->shm != NULL);
    atomic_fetch_add(&with_nodes,
                     weft__comm_of(comm)->node != NULL && weft__comm_of(comm)->node->nnodes > 1);
}

/*
 * After a world of p ranks: the shared-memory and hierarchical algorithms
 * really had what they need wherever they can run. One node of p ranks
 * (ranks_per_node 0) or uniform virtual nodes of more than one rank: every
 * rank has the segment; nodes cut smaller than p: every rank sees several.
 */
static void check_placement(int p)
{
    int rpn = weft__runtime_config.ranks_per_node;
    int uniform = rpn <= 0 || p % rpn == 0 || p < rpn;

    if (!weft__coll_config.shm || p == 1) {
        return;
    }
    cr_assert_eq(atomic_load(&with_shm), uniform && rpn != 1 ? p : 0,
                 "p=%d, %d ranks per node: %d ranks had shared memory", p, rpn,
                 atomic_load(&with_shm));
    cr_assert_eq(atomic_load(&with_nodes), rpn > 0 && rpn < p ? p : 0,
                 "p=%d, %d ranks per node: %d ranks saw several nodes", p, rpn,
                 atomic_load(&with_nodes));
}

/* Run the cases on a split of the world whose ranks take the virtual nodes in turn (rank r on
 * node r % N), so that no node's ranks are consecutive: the hierarchical gather and scatter
 * then put the blocks in rank order themselves. */
static int matrix_interleave = 0;

static void rank_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    int rpn = weft__runtime_config.ranks_per_node;
    weft_comm_t use = comm;
    const weft_shm_t *shm;

    if (matrix_interleave && rpn > 0) {
        cr_assert_eq(check_split_interleaved(comm, rank, sh->nranks, rpn, &use, &rank), WEFT_OK,
                     "split into interleaved nodes: %s", weft_last_error());
    }
    shm = weft__comm_of(use)->coll->shm;
    count_placement(use);
    for (int i = 0; i < sh->ncases; i++) {
        run_case(sh, use, rank, &sh->cases[i]);
    }
    atomic_fetch_add(&with_cma_reads, shm != NULL && shm->cma_bytes > 0);
    if (use != comm) {
        weft_comm_destroy(use);
    }
}

static void run_world(weft_coll_kind_t kind, int p, uint64_t seed, uint64_t delay_ns,
                      const tcase_t *cases, int ncases, long *checked_p)
{
    shared_t sh = {.kind = kind, .cases = cases, .ncases = ncases, .nranks = p};
    weft_thread_world_opts_t opts = {.nranks = p, .seed = seed, .max_delay_ns = delay_ns};
    weft_status_t status;

    pthread_barrier_init(&sh.barrier, NULL, (unsigned)p);
    atomic_store(&with_shm, 0);
    atomic_store(&with_nodes, 0);
    status = weft__thread_world_run(&opts, rank_body, &sh);
    cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
    check_placement(p);
    cr_assert_eq(harness_fail_count(), 0, "%d failure(s) at p=%d seed=%llu; first: %s",
                 harness_fail_count(), p, (unsigned long long)seed, harness_fail_message(0));
    cr_assert_eq(atomic_load(&sh.checked), (long)ncases * p,
                 "only %ld of %ld rank results were checked", atomic_load(&sh.checked),
                 (long)ncases * p);
    *checked_p += atomic_load(&sh.checked);
    pthread_barrier_destroy(&sh.barrier);
}

/* weft_init, the algorithm forced for every size; ranks_per_node > 0 cuts
 * the process into virtual nodes of that many ranks. */
/* single-copy shared-memory bcast from this many bytes (the matrix's
 * default: never, so the staged rounds are what it tests) */
static size_t matrix_shm_cma_copy = SIZE_MAX;
/* hierarchical bcast in the leader form up to this many bytes (the matrix's default: never;
 * SIZE_MAX: always) */
static size_t matrix_hier_leader = 0;
/* hierarchical gather and scatter in the direct form from blocks of more than this many bytes
 * (the matrix's default: never; 0: always) */
static size_t matrix_hier_direct = SIZE_MAX;
/* hierarchical bcast and reduce (the sliced form) in pipelined chunks of this many bytes (the
 * matrix's default: 0, one piece) */
static size_t matrix_hier_pipeline = 0;

static void force(weft_coll_kind_t kind, const char *algo, int ranks_per_node)
{
    const char *why;

    setenv("WEFT_LOG_LEVEL", "error", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    why = check_force(kind, algo);
    cr_assert_null(why, "%s", why);
    /* one-page slots: LARGE_COUNT takes several rounds; one-phase reduce
     * only up to 64 bytes, so counts p-1 and p+1 take both forms */
    weft__coll_config.shm_slot = 4096;
    weft__coll_config.shm_small = 64;
    weft__coll_config.shm_cma_copy = matrix_shm_cma_copy;
    weft__coll_config.hier_leader = matrix_hier_leader;
    weft__coll_config.hier_direct = matrix_hier_direct;
    weft__coll_config.hier_pipeline = matrix_hier_pipeline;
    weft__runtime_config.ranks_per_node = ranks_per_node;
}

/* p = 1..64; per p every count x root x in-place variant, with the
 * dtype/op rotating so that each meets every count class across p. */
static void run_matrix_nodes(weft_coll_kind_t kind, const char *algo, int ranks_per_node)
{
    const uint64_t seeds[] = {1, 0x5eed};
    long collectives = 0, checked = 0;
    int rank_counts = 0;

    force(kind, algo, ranks_per_node);
    atomic_store(&with_cma_reads, 0);
    /* small fragments so that the ring of reduce_scatter_gather pipelines */
    weft__coll_config.ring_frag_size = 1024;
    for (int p = 1; p <= 64; p++) {
        const size_t counts[] = {0, 1, (size_t)p - 1, (size_t)p + 1, LARGE_COUNT};
        const int roots[] = {0, p / 2, p - 1};
        const int nvariants = kind == WEFT_COLL_BCAST ? 1 : 2;
        tcase_t cases[5 * 3 * 2];
        int ncases = 0;

        for (int k = 0; k < 5; k++) {
            for (int ri = 0; ri < 3; ri++) {
                for (int v = 0; v < nvariants; v++) {
                    int inplace = v == 0 ? 0 : kind == WEFT_COLL_SCATTER ? 1 : 1 + (k + ri + p) % 2;

                    cases[ncases++] = (tcase_t){counts[k], roots[ri],
                                                (p + k + 2 * ri + 3 * v) % NCOMBOS, inplace};
                }
            }
        }
        for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
            /* the second seed adds random delays at small p */
            if (si == 1 && p > 8) {
                continue;
            }
            run_world(kind, p, seeds[si], si == 1 ? 20000 : 0, cases, ncases, &checked);
            collectives += ncases;
        }
        rank_counts++;
        if (p == 64) {
            break;
        }
    }
    fprintf(stderr,
            "rooted %s/%s (%d ranks per node): %d rank counts, %ld collectives, %ld rank results "
            "checked\n",
            weft__coll_kind_name(kind), algo, ranks_per_node, rank_counts, collectives, checked);
    weft_finalize();
}

static void run_matrix(weft_coll_kind_t kind, const char *algo)
{
    run_matrix_nodes(kind, algo, 0);
}

Test(rooted, bcast_binomial, .timeout = 300)
{
    run_matrix(WEFT_COLL_BCAST, "binomial");
}

Test(rooted, bcast_scatter_allgather, .timeout = 300)
{
    run_matrix(WEFT_COLL_BCAST, "scatter_allgather");
}

Test(rooted, reduce_binomial, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE, "binomial");
}

Test(rooted, reduce_reduce_scatter_gather, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE, "reduce_scatter_gather");
}

Test(rooted, reduce_ordered, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE, "ordered");
}

/* every size read from the root's buffer by process_vm_readv (in-process
 * ranks read their own process, which the kernel always allows); the reads
 * counted, and none in the staged matrices */
static void run_single_copy(weft_coll_kind_t kind, int single)
{
    matrix_shm_cma_copy = single ? 0 : SIZE_MAX;
    run_matrix(kind, "shm");
    matrix_shm_cma_copy = SIZE_MAX;
    if (single) {
        cr_assert_gt(atomic_load(&with_cma_reads), 0, "no rank read a peer's buffer");
    } else {
        cr_assert_eq(atomic_load(&with_cma_reads), 0, "%ld ranks read a peer's buffer",
                     atomic_load(&with_cma_reads));
    }
}

Test(rooted, bcast_shm, .timeout = 300)
{
    run_single_copy(WEFT_COLL_BCAST, 0);
}

Test(rooted, bcast_shm_single_copy, .timeout = 300)
{
    run_single_copy(WEFT_COLL_BCAST, 1);
}

Test(rooted, gather_shm_single_copy, .timeout = 300)
{
    run_single_copy(WEFT_COLL_GATHER, 1);
}

Test(rooted, scatter_shm_single_copy, .timeout = 300)
{
    run_single_copy(WEFT_COLL_SCATTER, 1);
}

/* The hierarchical bcast and reduce in their two forms: a slice on every rail (the matrix's
 * default), the whole vector on the root's rail; the builds of the second counted either way. */
static void run_hier_forms(weft_coll_kind_t kind, int ranks_per_node, int leader)
{
    unsigned long before = weft__hier_leader_builds();
    const char *why;

    matrix_hier_leader = leader ? SIZE_MAX : 0;
    run_matrix_nodes(kind, "hier", ranks_per_node);
    matrix_hier_leader = 0;
    why = check_hier_leader_builds(before, leader);
    cr_assert_null(why, "%s", why);
}

static void run_bcast_hier(int ranks_per_node, int leader)
{
    run_hier_forms(WEFT_COLL_BCAST, ranks_per_node, leader);
}

Test(rooted, bcast_hier_2_per_node, .timeout = 300)
{
    run_bcast_hier(2, 0);
}

Test(rooted, bcast_hier_3_per_node, .timeout = 300)
{
    run_bcast_hier(3, 0);
}

Test(rooted, bcast_hier_leader_2_per_node, .timeout = 300)
{
    run_bcast_hier(2, 1);
}

Test(rooted, bcast_hier_leader_3_per_node, .timeout = 300)
{
    run_bcast_hier(3, 1);
}

/* The sliced bcast or reduce in pipelined chunks of 256 bytes: the counts above p + 1 elements of
 * the wider dtypes take a few chunks, the large count the most (WEFT_HIER_PIPELINE_MAX_CHUNKS,
 * chunks grown past 256 bytes), from every root; a rail that carries a chunk out of order, or an
 * allgather of the wrong chunk, fails it. */
static void run_hier_pipelined(weft_coll_kind_t kind, int ranks_per_node, int interleave)
{
    unsigned long before = weft__hier_pipelined_builds();

    matrix_hier_pipeline = 256;
    matrix_interleave = interleave;
    run_hier_forms(kind, ranks_per_node, 0);
    matrix_interleave = 0;
    matrix_hier_pipeline = 0;
    cr_assert_gt(weft__hier_pipelined_builds(), before, "no %s ran pipelined",
                 weft__coll_kind_name(kind));
}

Test(rooted, bcast_hier_pipelined_2_per_node, .timeout = 300)
{
    run_hier_pipelined(WEFT_COLL_BCAST, 2, 0);
}

Test(rooted, bcast_hier_pipelined_3_per_node_interleaved, .timeout = 300)
{
    run_hier_pipelined(WEFT_COLL_BCAST, 3, 1);
}

Test(rooted, reduce_hier_pipelined_2_per_node_interleaved, .timeout = 300)
{
    run_hier_pipelined(WEFT_COLL_REDUCE, 2, 1);
}

Test(rooted, reduce_hier_pipelined_3_per_node, .timeout = 300)
{
    run_hier_pipelined(WEFT_COLL_REDUCE, 3, 0);
}

/* The hierarchical gather and scatter on virtual nodes of 2 and 3 ranks, their ranks node by
 * node (the nodes' blocks travel straight into the result) and taking the nodes in turn (the
 * root puts them in rank order), in the rail form or the direct form (direct: at every size);
 * the direct form's builds counted either way. */
static void run_hier_rooted(weft_coll_kind_t kind, int ranks_per_node, int interleave, int direct)
{
    unsigned long before = weft__hier_direct_builds(), built;

    matrix_interleave = interleave;
    matrix_hier_direct = direct ? 0 : SIZE_MAX;
    run_matrix_nodes(kind, "hier", ranks_per_node);
    matrix_interleave = 0;
    matrix_hier_direct = SIZE_MAX;
    built = weft__hier_direct_builds() - before;
    if (direct) {
        cr_assert_gt(built, 0, "the direct form never ran");
    } else {
        cr_assert_eq(built, 0, "the direct form ran %lu times with WEFT_HIER_DIRECT inf", built);
    }
}

Test(rooted, gather_hier_2_per_node, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_GATHER, 2, 0, 0);
}

Test(rooted, gather_hier_3_per_node_interleaved, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_GATHER, 3, 1, 0);
}

Test(rooted, scatter_hier_3_per_node, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_SCATTER, 3, 0, 0);
}

Test(rooted, scatter_hier_2_per_node_interleaved, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_SCATTER, 2, 1, 0);
}

Test(rooted, gather_hier_direct_3_per_node, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_GATHER, 3, 0, 1);
}

Test(rooted, gather_hier_direct_2_per_node_interleaved, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_GATHER, 2, 1, 1);
}

Test(rooted, scatter_hier_direct_2_per_node, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_SCATTER, 2, 0, 1);
}

Test(rooted, scatter_hier_direct_3_per_node_interleaved, .timeout = 300)
{
    run_hier_rooted(WEFT_COLL_SCATTER, 3, 1, 1);
}

static void run_reduce_hier(int ranks_per_node, int leader)
{
    run_hier_forms(WEFT_COLL_REDUCE, ranks_per_node, leader);
}

Test(rooted, reduce_hier_2_per_node, .timeout = 300)
{
    run_reduce_hier(2, 0);
}

Test(rooted, reduce_hier_3_per_node, .timeout = 300)
{
    run_reduce_hier(3, 0);
}

Test(rooted, reduce_hier_leader_2_per_node, .timeout = 300)
{
    run_reduce_hier(2, 1);
}

Test(rooted, reduce_hier_leader_3_per_node_interleaved, .timeout = 300)
{
    matrix_interleave = 1;
    run_reduce_hier(3, 1);
    matrix_interleave = 0;
}

Test(rooted, reduce_shm, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE, "shm");
}

Test(rooted, gather_binomial, .timeout = 300)
{
    run_matrix(WEFT_COLL_GATHER, "binomial");
}

Test(rooted, scatter_binomial, .timeout = 300)
{
    run_matrix(WEFT_COLL_SCATTER, "binomial");
}

Test(rooted, gather_shm, .timeout = 300)
{
    run_single_copy(WEFT_COLL_GATHER, 0);
}

Test(rooted, scatter_shm, .timeout = 300)
{
    run_single_copy(WEFT_COLL_SCATTER, 0);
}

/* Barrier: in each round one rank arrives 20 ms late (in a few rounds) or
 * not at all late; every rank counts its arrival before entering, and nobody
 * may leave before the count is complete and the late rank's arrival time. */
#define BARRIER_ROUNDS 24
#define BARRIER_SLOW_ROUNDS 3

typedef struct barrier_shared {
    int nranks;
    atomic_int arrived[BARRIER_ROUNDS];
    atomic_llong late_ns[BARRIER_ROUNDS];
    atomic_long checked;
} barrier_shared_t;

static long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void barrier_body(weft_comm_t comm, int rank, void *arg)
{
    barrier_shared_t *sh = arg;
    const int p = sh->nranks;

    count_placement(comm);
    for (int it = 0; it < BARRIER_ROUNDS; it++) {
        int slow = it < BARRIER_SLOW_ROUNDS ? (it * 7 + p / 2) % p : -1;
        weft_status_t status;
        long long left;
        int count;

        if (rank == slow) {
            struct timespec d = {0, 20 * 1000 * 1000};

            nanosleep(&d, NULL);
            atomic_store(&sh->late_ns[it], now_ns());
        }
        atomic_fetch_add(&sh->arrived[it], 1);
        status = weft_barrier(comm);
        left = now_ns();
        count = atomic_load(&sh->arrived[it]);
        if (status != WEFT_OK || count != p ||
            (slow >= 0 &&
             (atomic_load(&sh->late_ns[it]) == 0 || left < atomic_load(&sh->late_ns[it])))) {
            HARNESS_FAIL("p=%d round %d rank %d: status %s, left with %d of %d arrived%s", p, it,
                         rank, weft_status_string(status), count, p,
                         slow >= 0 ? " (one late rank)" : "");
            continue;
        }
        atomic_fetch_add(&sh->checked, 1);
    }
}

static void run_barrier_nodes(const char *algo, int ranks_per_node)
{
    long checked = 0;

    force(WEFT_COLL_BARRIER, algo, ranks_per_node);
    for (int p = 1; p <= 64; p++) {
        barrier_shared_t sh = {.nranks = p};
        weft_thread_world_opts_t opts = {.nranks = p, .seed = (uint64_t)p, .max_delay_ns = 0};
        weft_status_t status;

        atomic_store(&with_shm, 0);
        atomic_store(&with_nodes, 0);
        status = weft__thread_world_run(&opts, barrier_body, &sh);
        cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
        check_placement(p);
        cr_assert_eq(harness_fail_count(), 0, "%d failure(s); first: %s", harness_fail_count(),
                     harness_fail_message(0));
        cr_assert_eq(atomic_load(&sh.checked), (long)BARRIER_ROUNDS * p);
        checked += atomic_load(&sh.checked);
        if (p == 64) {
            break;
        }
    }
    fprintf(stderr, "rooted barrier/%s (%d per node): %ld rank exits checked\n", algo,
            ranks_per_node, checked);
    weft_finalize();
}

static void run_barrier(const char *algo)
{
    run_barrier_nodes(algo, 0);
}

Test(rooted, barrier_dissemination, .timeout = 300)
{
    run_barrier("dissemination");
}

Test(rooted, barrier_shm, .timeout = 300)
{
    run_barrier("shm");
}

/* on virtual nodes of 2 and 3 ranks (where p is not a multiple, the fallback's) */
Test(rooted, barrier_hier, .timeout = 300)
{
    run_barrier_nodes("hier", 2);
    run_barrier_nodes("hier", 3);
}
