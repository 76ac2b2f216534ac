/*
 * The exchange algorithms (coll/exchange.h), each forced with WEFT_TUNE:
 * rank counts 1..64 x counts {0, 1, p-1, p+1, large odd} x in place
 * and out of place x a few dtypes, on in-process ranks whose messages land
 * in a seeded random order.
 *
 * Every rank builds the exact image its output buffer must have afterwards
 * (results, untouched gaps between v-blocks, guard bytes after the end) and
 * compares it bytewise; inputs out of place must be unchanged. Reductions
 * use data whose result does not depend on the order of reduction (floats
 * holding small integers or halves, int32 max).
 *
 * The shared-memory algorithms run with one-page slots, so that the larger
 * counts take several rounds through both buffers of every rank; the
 * hierarchical ones on virtual nodes (WEFT_RANKS_PER_NODE), where rank
 * counts that are not a multiple fall back to point-to-point. Every world
 * asserts where its ranks ran: shared memory on every rank wherever the
 * nodes are uniform, several nodes wherever they were cut.
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

#define GUARD 64
#define GUARD_BYTE 0xa5
#define FILL_BYTE 0x5a /* initial content of outputs and of gaps between blocks */

typedef struct combo {
    weft_dtype_t dtype;
    weft_op_t op;
} combo_t;

/* data movement: only the bytes matter */
static const combo_t move_combos[] = {
    {WEFT_UINT8, WEFT_SUM}, {WEFT_INT32, WEFT_SUM}, {WEFT_FLOAT64, WEFT_SUM}};
/* reductions with exact results */
static const combo_t reduce_combos[] = {
    {WEFT_FLOAT32, WEFT_SUM}, {WEFT_INT32, WEFT_MAX}, {WEFT_FLOAT32, WEFT_AVG}};

typedef struct tcase {
    size_t count; /* per block (v variants: the scale of the irregular counts) */
    int combo;
    int inplace; /* 0 out of place, 1 WEFT_IN_PLACE, 2 sendbuf == recvbuf-style alias */
    int id;
} tcase_t;

typedef struct shared {
    weft_coll_kind_t kind;
    const tcase_t *cases;
    int ncases;
    int nranks;
    atomic_long checked;
} shared_t;

static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c)
{
    return check_mix(check_mix(a * 0x9e3779b97f4a7c15ull ^ b) ^ (c << 20) ^ 0x77ull);
}

static int is_reduction(weft_coll_kind_t kind)
{
    return kind == WEFT_COLL_REDUCE_SCATTER || kind == WEFT_COLL_REDUCE_SCATTER_V;
}

/* Element i of rank r's input in case id. */
static void gen(const combo_t *c, int id, int r, size_t i, void *dst, size_t es)
{
    uint64_t h = hash3((uint64_t)r, i, (uint64_t)id);

    if (c->op == WEFT_MAX) {
        int32_t v = (int32_t)(uint32_t)h;
        memcpy(dst, &v, 4);
    } else if (c->dtype == WEFT_FLOAT32) {
        float v = c->op == WEFT_AVG ? (float)(h % 17) : (float)(h % 17) * 0.5f;
        memcpy(dst, &v, 4);
    } else {
        memcpy(dst, &h, es);
    }
}

/* Element i of the reduction over p ranks. */
static void expect_reduced(const combo_t *c, int id, int p, size_t i, void *dst)
{
    if (c->op == WEFT_MAX) {
        int32_t m = INT32_MIN, v;
        for (int r = 0; r < p; r++) {
            gen(c, id, r, i, &v, 4);
            m = v > m ? v : m;
        }
        memcpy(dst, &m, 4);
    } else {
        double acc = 0;
        float v;
        for (int r = 0; r < p; r++) {
            gen(c, id, r, i, &v, 4);
            acc += v;
        }
        v = (float)acc;
        if (c->op == WEFT_AVG) {
            v = v / (float)p;
        }
        memcpy(dst, &v, 4);
    }
}

/* Irregular counts: zeros, small and up to 2n. */
static size_t vcount(size_t n, int id, uint64_t a, uint64_t b)
{
    uint64_t h = hash3(a + 1000, b, (uint64_t)id);

    if (n == 0 || h % 5 == 0) {
        return 0;
    }
    return (size_t)(h >> 8) % (2 * n + 1);
}

/* Displacements with gaps; when `reverse` the blocks are laid out in
 * decreasing rank order. Returns the extent. */
static size_t layout(const size_t *counts, size_t *displs, int p, int id, uint64_t salt,
                     int reverse)
{
    size_t at = hash3(salt, 7, (uint64_t)id) % 3;

    for (int k = 0; k < p; k++) {
        int q = reverse ? p - 1 - k : k;

        displs[q] = at;
        at += counts[q] + hash3(salt, (uint64_t)q, (uint64_t)id) % 3;
    }
    return at;
}

static const char *variant_name(int v)
{
    return v == 0 ? "out-of-place" : v == 1 ? "WEFT_IN_PLACE" : "aliased";
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);

    if (p == NULL) {
        fprintf(stderr, "test out of memory\n");
        abort();
    }
    return p;
}

/* The checker's view of one case's data (tests/coll/check.h). */
typedef struct data_ctx {
    const combo_t *c;
    int id, p;
    size_t es;
} data_ctx_t;

static void data_value(const void *ctx, int q, size_t i, void *dst)
{
    const data_ctx_t *x = ctx;

    gen(x->c, x->id, q, i, dst, x->es);
}

static void data_reduced(const void *ctx, size_t i, void *dst)
{
    const data_ctx_t *x = ctx;

    expect_reduced(x->c, x->id, x->p, i, dst);
}

static int guard_ok(const unsigned char *b)
{
    for (size_t g = 0; g < GUARD; g++) {
        if (b[g] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

static void run_case(shared_t *sh, weft_comm_t comm, int rank, const tcase_t *tc)
{
    const int p = sh->nranks, id = tc->id;
    const combo_t *c = is_reduction(sh->kind) ? &reduce_combos[tc->combo] : &move_combos[tc->combo];
    const size_t es = weft_dtype_size(c->dtype), n = tc->count;
    static const unsigned char fill_elem[8] = {FILL_BYTE, FILL_BYTE, FILL_BYTE, FILL_BYTE,
                                               FILL_BYTE, FILL_BYTE, FILL_BYTE, FILL_BYTE};
    const data_ctx_t x = {c, id, p, es};
    const check_data_t data = {es, data_value, data_reduced, fill_elem, &x};
    size_t *counts = xmalloc(sizeof(size_t) * (size_t)p);
    size_t *displs = xmalloc(sizeof(size_t) * (size_t)p);
    size_t *scounts = xmalloc(sizeof(size_t) * (size_t)p);
    size_t *sdispls = xmalloc(sizeof(size_t) * (size_t)p);
    check_shape_t shape = {.kind = sh->kind,
                           .p = p,
                           .rank = rank,
                           .n = n,
                           .counts = counts,
                           .displs = displs,
                           .scounts = scounts,
                           .sdispls = sdispls,
                           .stride = (size_t)1 << 24};
    size_t in_ext, out_ext, cmp_off = 0; /* elements; where in res the result must appear */
    unsigned char *in, *out;
    unsigned char *res; /* the buffer that holds the result */
    const void *sendbuf;
    void *recvbuf;
    char msg[256];
    long bad;
    weft_status_t status;

    /* the v layouts, the same on every rank */
    switch (sh->kind) {
    case WEFT_COLL_ALLGATHERV:
        for (int q = 0; q < p; q++) {
            counts[q] = vcount(n, id, (uint64_t)q, 0);
        }
        shape.rext = layout(counts, displs, p, id, 1, id % 2);
        break;
    case WEFT_COLL_REDUCE_SCATTER_V:
        for (int q = 0; q < p; q++) {
            counts[q] = vcount(n, id, (uint64_t)q, 0);
        }
        break;
    case WEFT_COLL_ALLTOALLV: /* counts[q] from q, scounts[q] to q; symmetric in place */
        for (int q = 0; q < p; q++) {
            int lo = q < rank ? q : rank, hi = q < rank ? rank : q;

            if (tc->inplace) {
                counts[q] = scounts[q] = vcount(n, id, (uint64_t)lo, (uint64_t)hi);
            } else {
                counts[q] = vcount(n, id, (uint64_t)q, (uint64_t)rank);
                scounts[q] = vcount(n, id, (uint64_t)rank, (uint64_t)q);
            }
        }
        shape.rext = layout(counts, displs, p, id, 100 + (uint64_t)rank, id % 2);
        shape.sext = tc->inplace
                         ? shape.rext
                         : layout(scounts, sdispls, p, id, 200 + (uint64_t)rank, 1 - id % 2);
        if (tc->inplace) {
            memcpy(sdispls, displs, sizeof(size_t) * (size_t)p);
        }
        break;
    default:
        break;
    }

    /* out of place buffers: the input's image, the output filled; guards after both */
    in_ext = check_extent(&shape, CHECK_SEND);
    out_ext = check_extent(&shape, CHECK_RECV);
    in = xmalloc(in_ext * es + GUARD);
    out = xmalloc(out_ext * es + GUARD);
    check_image(&shape, CHECK_SEND, &data, in);
    memset(in + in_ext * es, GUARD_BYTE, GUARD);
    memset(out, FILL_BYTE, out_ext * es);
    memset(out + out_ext * es, GUARD_BYTE, GUARD);

    /* the in-place layouts */
    sendbuf = in;
    recvbuf = out;
    res = out;
    if (tc->inplace) {
        switch (sh->kind) {
        case WEFT_COLL_ALLGATHER:
        case WEFT_COLL_ALLGATHERV:
            check_image_in_place(&shape, &data, out);
            sendbuf = tc->inplace == 1 ? WEFT_IN_PLACE
                                       : out + (sh->kind == WEFT_COLL_ALLGATHER ? (size_t)rank * n
                                                                                : displs[rank]) *
                                                   es;
            break;
        case WEFT_COLL_ALLTOALL:
        case WEFT_COLL_ALLTOALLV:
            check_image_in_place(&shape, &data, out);
            sendbuf = tc->inplace == 1 ? WEFT_IN_PLACE : out;
            break;
        case WEFT_COLL_REDUCE_SCATTER:
            if (tc->inplace == 2) { /* result into this rank's own slot of the input */
                recvbuf = in + (size_t)rank * n * es;
                res = in;
                cmp_off = (size_t)rank * n;
                break;
            }
            /* fall through */
        default: /* reduce_scatter(_v) in place: input in recvbuf, result at the front */
            sendbuf = WEFT_IN_PLACE;
            recvbuf = in;
            res = in;
            break;
        }
    }

    status = check_call(&shape, CHECK_BLOCKING, sendbuf, recvbuf, c->dtype, c->op, comm, NULL);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        char what_[320];                                                                           \
        snprintf(what_, sizeof(what_), __VA_ARGS__);                                               \
        HARNESS_FAIL("%s p=%d count=%zu %s %s %s case %d rank %d: %s",                             \
                     weft__coll_kind_name(sh->kind), p, n, weft_dtype_name(c->dtype),              \
                     weft_op_name(c->op), variant_name(tc->inplace), id, rank, what_);             \
        goto done;                                                                                 \
    } while (0)

    if (status != WEFT_OK) {
        FAIL("%s (%s)", weft_status_string(status), weft_last_error());
    }
    if ((bad = check_diff(&shape, CHECK_RECV, &data, res + cmp_off * es, msg, sizeof(msg))) >= 0) {
        FAIL("result %s", msg);
    }
    if (res == in && !guard_ok(in + in_ext * es)) {
        FAIL("wrote past the input");
    }
    if ((res == out || tc->inplace == 0) && !guard_ok(out + out_ext * es)) {
        FAIL("wrote past the output");
    }
    if (tc->inplace == 0 &&
        ((bad = check_diff(&shape, CHECK_SEND, &data, in, msg, sizeof(msg))) >= 0 ||
         !guard_ok(in + in_ext * es))) {
        FAIL("sendbuf changed: %s", bad >= 0 ? msg : "past its end");
    }
#undef FAIL
    atomic_fetch_add(&sh->checked, 1);
done:
    free(in);
    free(out);
    free(counts);
    free(displs);
    free(scounts);
    free(sdispls);
}

/* ranks that ran with shared memory and with a node map of several nodes */
static atomic_int with_shm, with_nodes, with_cma_reads;

/* Run the cases on a split of the world whose ranks take the virtual nodes in turn (rank r on
 * node r % N), so that no node's ranks are consecutive: the hierarchical alltoall then puts
 * the blocks node by node and back itself. */
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
    atomic_fetch_add(&with_shm, shm != NULL);
    atomic_fetch_add(&with_nodes,
                     weft__comm_of(use)->node != NULL && weft__comm_of(use)->node->nnodes > 1);
    for (int i = 0; i < sh->ncases; i++) {
        run_case(sh, use, rank, &sh->cases[i]);
    }
    atomic_fetch_add(&with_cma_reads, shm != NULL && shm->cma_bytes > 0);
    if (use != comm) {
        weft_comm_destroy(use);
    }
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

/* single-copy shared-memory alltoall from blocks of this many bytes (the
 * matrix's default: never, so the staged rounds are what it tests) */
static size_t matrix_shm_cma_alltoall = SIZE_MAX;

/* the hierarchical alltoall's blocks over the rails together up to this many bytes per rank,
 * the others straight to their ranks above (the matrix's default: its sizes all below) */
static size_t matrix_hier_alltoall = 128 << 10;
/* and in the second form the steps at once from blocks of this many bytes (the matrix's default:
 * never; 0: always) */
static size_t matrix_hier_a2a_at_once = SIZE_MAX;

/* ranks_per_node > 0: virtual nodes of that many ranks. */
static void run_matrix_nodes(weft_coll_kind_t kind, const char *algo, int ranks_per_node)
{
    const char *why;
    long collectives = 0, results = 0;
    int nvariants = kind == WEFT_COLL_REDUCE_SCATTER ? 3 : 2;

    setenv("WEFT_LOG_LEVEL", "error", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    why = check_force(kind, algo);
    cr_assert_null(why, "%s", why);
    weft__coll_config.ring_frag_size = 2048;
    /* one-page slots: the larger counts take several rounds */
    weft__coll_config.shm_slot = 4096;
    weft__coll_config.shm_small = 64;
    weft__coll_config.shm_cma_alltoall = matrix_shm_cma_alltoall;
    weft__coll_config.hier_alltoall = matrix_hier_alltoall;
    weft__coll_config.hier_alltoall_at_once = matrix_hier_a2a_at_once;
    weft__coll_config.shm_cma_allgather = SIZE_MAX; /* tests/coll/test_algorithms.c has it */
    weft__runtime_config.ranks_per_node = ranks_per_node;

    for (int p = 1; p <= 64; p++) {
        size_t large = ((size_t)(kind == WEFT_COLL_ALLTOALL || kind == WEFT_COLL_ALLTOALLV ||
                                         kind == WEFT_COLL_REDUCE_SCATTER
                                     ? 6000
                                     : 12000) /
                        (size_t)p) |
                       1;
        size_t counts[] = {0, 1, (size_t)p - 1, (size_t)p + 1, large};
        tcase_t cases[5 * 3];
        int ncases = 0;
        shared_t sh = {.kind = kind, .nranks = p};

        for (int k = 0; k < 5; k++) {
            for (int v = 0; v < nvariants; v++) {
                cases[ncases] = (tcase_t){counts[k], (p + k + v) % 3, v, p * 100 + ncases};
                ncases++;
            }
        }
        sh.cases = cases;
        sh.ncases = ncases;
        for (int seed = 0; seed < 2; seed++) {
            /* seed 0: FIFO landing; then a random order, with delays at small p */
            weft_thread_world_opts_t opts = {.nranks = p,
                                             .seed = seed ? 0x5eed + (uint64_t)p : 0,
                                             .max_delay_ns = seed && p <= 4 ? 20000 : 0};
            weft_status_t status;

            atomic_store(&sh.checked, 0);
            atomic_store(&with_shm, 0);
            atomic_store(&with_nodes, 0);
            atomic_store(&with_cma_reads, 0);
            status = weft__thread_world_run(&opts, rank_body, &sh);
            cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
            check_placement(p);
            /* the single-copy rounds ran on every rank that has peers, or on none */
            cr_assert_eq(
                atomic_load(&with_cma_reads),
                matrix_shm_cma_alltoall == 0 && p > 1 &&
                        (ranks_per_node == 0 || p % ranks_per_node == 0 || p < ranks_per_node)
                    ? p
                    : 0,
                "%s/%s p=%d: %d ranks read peers' buffers by process_vm_readv",
                weft__coll_kind_name(kind), algo, p, atomic_load(&with_cma_reads));
            cr_assert_eq(harness_fail_count(), 0, "%s/%s: %d failure(s) at p=%d seed %d; first: %s",
                         weft__coll_kind_name(kind), algo, harness_fail_count(), p, seed,
                         harness_fail_message(0));
            cr_assert_eq(atomic_load(&sh.checked), (long)ncases * p,
                         "only %ld of %ld rank results were checked", atomic_load(&sh.checked),
                         (long)ncases * p);
            collectives += ncases;
            results += atomic_load(&sh.checked);
        }
        if (p == 64) {
            break;
        }
    }
    fprintf(stderr,
            "exchange %s/%s (%d ranks per node): 64 rank counts (1..64) x 2 landing orders, %ld "
            "collectives, %ld rank results checked\n",
            weft__coll_kind_name(kind), algo, ranks_per_node, collectives, results);
    weft__coll_tune_release();
    weft_finalize();
}

static void run_matrix(weft_coll_kind_t kind, const char *algo)
{
    run_matrix_nodes(kind, algo, 0);
}

Test(exchange, allgather_recursive_doubling, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLGATHER, "recursive_doubling");
}

Test(exchange, allgather_bruck, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLGATHER, "bruck");
}

Test(exchange, allgatherv_ring, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLGATHERV, "ring");
}

Test(exchange, allgatherv_shm, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLGATHERV, "shm");
}

Test(exchange, reduce_scatter_v_shm, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE_SCATTER_V, "shm");
}

/* reduce_scatter and allgather with the aliased layouts, on nodes of 3
 * (tests/coll/test_algorithms.c runs them on nodes of 4 and 2) */
Test(exchange, reduce_scatter_hier_3_per_node, .timeout = 300)
{
    run_matrix_nodes(WEFT_COLL_REDUCE_SCATTER, "hier", 3);
}

Test(exchange, allgather_hier_3_per_node, .timeout = 300)
{
    run_matrix_nodes(WEFT_COLL_ALLGATHER, "hier", 3);
}

Test(exchange, reduce_scatter_recursive_halving, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE_SCATTER, "recursive_halving");
}

Test(exchange, reduce_scatter_v_ring, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE_SCATTER_V, "ring");
}

Test(exchange, reduce_scatter_v_ordered, .timeout = 300)
{
    run_matrix(WEFT_COLL_REDUCE_SCATTER_V, "ordered");
}

Test(exchange, alltoall_pairwise, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLTOALL, "pairwise");
}

Test(exchange, alltoall_bruck, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLTOALL, "bruck");
}

Test(exchange, alltoall_shm, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLTOALL, "shm");
}

/* every block read from the peers' send buffers by process_vm_readv
 * (in-process ranks read their own process, which the kernel always
 * allows); in place through the slots */
Test(exchange, alltoall_shm_single_copy, .timeout = 300)
{
    matrix_shm_cma_alltoall = 0;
    run_matrix(WEFT_COLL_ALLTOALL, "shm");
}

/* The hierarchical alltoall on virtual nodes of 2 and 3 ranks, node by node (the rails' blocks
 * land in rank order) and taking the nodes in turn (grouped by node and back) */
Test(exchange, alltoall_hier_2_per_node, .timeout = 300)
{
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 2);
}

Test(exchange, alltoall_hier_3_per_node, .timeout = 300)
{
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 3);
}

/* the large-block form: the node's blocks through shared memory, the others straight to their
 * ranks (every size), node by node and taking the nodes in turn */
Test(exchange, alltoall_hier_direct_2_per_node, .timeout = 300)
{
    matrix_hier_alltoall = 0;
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 2);
    matrix_hier_alltoall = 128 << 10;
}

Test(exchange, alltoall_hier_direct_3_per_node_interleaved, .timeout = 300)
{
    matrix_hier_alltoall = 0;
    matrix_interleave = 1;
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 3);
    matrix_interleave = 0;
    matrix_hier_alltoall = 128 << 10;
}

/* the large-block form with its steps at once (in place too: after the staging copy) */
Test(exchange, alltoall_hier_direct_at_once_2_per_node_interleaved, .timeout = 300)
{
    matrix_hier_alltoall = 0;
    matrix_hier_a2a_at_once = 0;
    matrix_interleave = 1;
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 2);
    matrix_interleave = 0;
    matrix_hier_a2a_at_once = SIZE_MAX;
    matrix_hier_alltoall = 128 << 10;
}

Test(exchange, alltoall_hier_direct_at_once_3_per_node, .timeout = 300)
{
    matrix_hier_alltoall = 0;
    matrix_hier_a2a_at_once = 0;
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 3);
    matrix_hier_a2a_at_once = SIZE_MAX;
    matrix_hier_alltoall = 128 << 10;
}

/* the shm steps reading the peers' send buffers where they are */
Test(exchange, alltoall_hier_3_per_node_single_copy, .timeout = 300)
{
    matrix_shm_cma_alltoall = 0;
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 3);
    matrix_shm_cma_alltoall = SIZE_MAX;
}

Test(exchange, alltoall_hier_2_per_node_interleaved, .timeout = 300)
{
    matrix_interleave = 1;
    run_matrix_nodes(WEFT_COLL_ALLTOALL, "hier", 2);
    matrix_interleave = 0;
}

Test(exchange, alltoallv_pairwise, .timeout = 300)
{
    run_matrix(WEFT_COLL_ALLTOALLV, "pairwise");
}
