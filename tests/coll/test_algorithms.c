/*
 * Every algorithm x rank counts 1..64 and 128 x counts {0, 1, p-1, p+1,
 * large odd} x in place / out of place x several dtypes and ops, on
 * in-process ranks whose messages land in a seeded random order.
 *
 * Inputs are deterministic per (rank, element, case); expected results are
 * computed independently here, in arithmetic whose result does not depend on
 * the order of reduction (integers modulo 2^n, floats holding small
 * integers), so any correct algorithm must match exactly. One combination
 * uses inexact float data: it is compared with a tolerance against a double
 * reference, and allreduce results must be bitwise equal on every rank.
 */
#include <criterion/criterion.h>
#include "runtime/comm.h"

#include "coll/coll.h"
#include "coll/shm/shm.h"
#include "device/host/half.h"
#include "runtime/config.h"
#include "runtime/thread_world.h"
#include "tests/coll/check.h"
#include "tests/harness.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64 /* bytes after each buffer that must stay untouched */
#define GUARD_BYTE 0xa5

typedef struct combo {
    weft_dtype_t dtype;
    weft_op_t op;
    int inexact; /* float data with rounding: tolerance + cross-rank bitwise check */
} combo_t;

static const combo_t combos[] = {
    {WEFT_FLOAT32, WEFT_SUM, 0}, {WEFT_INT64, WEFT_SUM, 0},       {WEFT_INT32, WEFT_PROD, 0},
    {WEFT_UINT8, WEFT_BXOR, 0},  {WEFT_INT8, WEFT_MAX, 0},        {WEFT_FLOAT64, WEFT_MIN, 0},
    {WEFT_FLOAT16, WEFT_SUM, 0}, {WEFT_BFLOAT16, WEFT_MAX, 0},    {WEFT_FLOAT32, WEFT_AVG, 0},
    {WEFT_INT32, WEFT_AVG, 0},   {WEFT_UINT32, WEFT_BAND, 0},     {WEFT_UINT64, WEFT_LOR, 0},
    {WEFT_FLOAT32, WEFT_SUM, 1}, {WEFT_FLOAT8_E4M3, WEFT_MAX, 0}, {WEFT_FLOAT8_E5M2, WEFT_MIN, 0},
};
#define NCOMBOS ((int)(sizeof(combos) / sizeof(combos[0])))

/* in-place variants: 0 out of place, 1 WEFT_IN_PLACE, 2 NCCL-style offset */
typedef struct tcase {
    weft_coll_kind_t kind;
    size_t count;
    int combo;
    int inplace;
    /* the expected reduced vector and the double reference of inexact sums:
     * computed by the ranks of the first world that runs the case, kept for
     * the next seeds (they depend on the data only); cases_free releases */
    unsigned char *expected;
    double *approx;
    int computed;
} tcase_t;

typedef struct shared {
    weft_coll_kind_t kind;
    tcase_t *cases;
    int ncases;
    int nranks;
    pthread_barrier_t barrier;
    unsigned char **results; /* per rank: copy of its result, for bitwise checks */
    atomic_long checked;
} shared_t;

static uint64_t hash3(int rank, size_t i, int c)
{
    return check_mix(((uint64_t)rank << 40) ^ ((uint64_t)i << 8) ^ (uint64_t)c ^ 0x1234567ull);
}

/* float -> binary16 for small integers only (exact), written independently
 * of the library's conversion */
static uint16_t small_int_to_half(int v)
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    int a = v < 0 ? -v : v, e = 0;

    if (a == 0) {
        return sign;
    }
    while ((a >> e) > 1) {
        e++;
    }
    /* a = 1.m * 2^e, 10 mantissa bits; exact for a < 2048 */
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((a << (10 - e)) & 0x3ff));
}

static uint16_t float_to_bf16_exact(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* Input element i of rank r, written into dst (one element). */
static void gen(const combo_t *c, int ci, int r, size_t i, void *dst)
{
    uint64_t h = hash3(r, i, ci);

    switch (c->dtype) {
    case WEFT_FLOAT32: {
        float v =
            c->inexact ? (float)((double)(h % 2000001) - 1e6) * 1e-6f : (float)(h % 17) * 0.5f;
        memcpy(dst, &v, 4);
        break;
    }
    case WEFT_FLOAT64: {
        double v = (double)(h % 2001) - 1000.0;
        memcpy(dst, &v, 8);
        break;
    }
    case WEFT_FLOAT16: {
        uint16_t v = small_int_to_half((int)(h % 5));
        memcpy(dst, &v, 2);
        break;
    }
    case WEFT_BFLOAT16: {
        uint16_t v = float_to_bf16_exact((float)((int)(h % 200) - 100));
        memcpy(dst, &v, 2);
        break;
    }
    case WEFT_FLOAT8_E4M3: /* integers of magnitude <= 16 are exact */
        *(uint8_t *)dst = weft__float_to_f8e4m3((float)((int)(h % 29) - 14));
        break;
    case WEFT_FLOAT8_E5M2: /* and <= 8 */
        *(uint8_t *)dst = weft__float_to_f8e5m2((float)((int)(h % 17) - 8));
        break;
    case WEFT_INT8:
    case WEFT_UINT8:
        *(uint8_t *)dst = (uint8_t)h;
        break;
    case WEFT_INT32:
    case WEFT_UINT32: {
        uint32_t v = (uint32_t)h;
        if (c->op == WEFT_PROD) {
            v |= 1;
        } else if (c->op == WEFT_AVG) {
            v = (uint32_t)((int32_t)(h % 2001) - 1000);
        } else if (c->op == WEFT_BAND) {
            v |= 0xf0f0f00fu;
        }
        memcpy(dst, &v, 4);
        break;
    }
    case WEFT_INT64:
    case WEFT_UINT64: {
        uint64_t v = c->op == WEFT_LOR ? (h % 7 == 0) : h;
        memcpy(dst, &v, 8);
        break;
    }
    default:
        break;
    }
}

/* Expected element i of the reduction over ranks 0..p-1 (order-free). */
static void expect(const combo_t *c, int ci, int p, size_t i, void *dst, double *approx)
{
    unsigned char e[8];

    *approx = 0;
    switch (c->dtype) {
    case WEFT_FLOAT32: {
        double acc = 0;
        float v;
        for (int r = 0; r < p; r++) {
            gen(c, ci, r, i, e);
            memcpy(&v, e, 4);
            acc += v;
        }
        v = (float)acc;
        if (c->op == WEFT_AVG) {
            v = v / (float)p;
        }
        *approx = acc;
        memcpy(dst, &v, 4);
        break;
    }
    case WEFT_FLOAT64: {
        double m = INFINITY, v;
        for (int r = 0; r < p; r++) {
            gen(c, ci, r, i, e);
            memcpy(&v, e, 8);
            m = v < m ? v : m;
        }
        memcpy(dst, &m, 8);
        break;
    }
    case WEFT_FLOAT16: {
        int acc = 0;
        for (int r = 0; r < p; r++) {
            acc += (int)(hash3(r, i, ci) % 5);
        }
        uint16_t v = small_int_to_half(acc);
        memcpy(dst, &v, 2);
        break;
    }
    case WEFT_BFLOAT16: {
        int m = -1000;
        for (int r = 0; r < p; r++) {
            int v = (int)(hash3(r, i, ci) % 200) - 100;
            m = v > m ? v : m;
        }
        uint16_t v = float_to_bf16_exact((float)m);
        memcpy(dst, &v, 2);
        break;
    }
    case WEFT_FLOAT8_E4M3: { /* MAX */
        int m = -1000;
        for (int r = 0; r < p; r++) {
            int v = (int)(hash3(r, i, ci) % 29) - 14;
            m = v > m ? v : m;
        }
        *(uint8_t *)dst = weft__float_to_f8e4m3((float)m);
        break;
    }
    case WEFT_FLOAT8_E5M2: { /* MIN */
        int m = 1000;
        for (int r = 0; r < p; r++) {
            int v = (int)(hash3(r, i, ci) % 17) - 8;
            m = v < m ? v : m;
        }
        *(uint8_t *)dst = weft__float_to_f8e5m2((float)m);
        break;
    }
    case WEFT_UINT8: { /* BXOR */
        uint8_t acc = 0;
        for (int r = 0; r < p; r++) {
            gen(c, ci, r, i, e);
            acc ^= e[0];
        }
        *(uint8_t *)dst = acc;
        break;
    }
    case WEFT_INT8: { /* MAX */
        int8_t m = INT8_MIN;
        for (int r = 0; r < p; r++) {
            gen(c, ci, r, i, e);
            m = (int8_t)e[0] > m ? (int8_t)e[0] : m;
        }
        *(int8_t *)dst = m;
        break;
    }
    case WEFT_INT32:
    case WEFT_UINT32: {
        uint32_t acc = c->op == WEFT_PROD ? 1 : c->op == WEFT_BAND ? 0xffffffffu : 0;
        int64_t sum = 0;
        for (int r = 0; r < p; r++) {
            uint32_t v;
            gen(c, ci, r, i, e);
            memcpy(&v, e, 4);
            if (c->op == WEFT_PROD) {
                acc *= v;
            } else if (c->op == WEFT_BAND) {
                acc &= v;
            } else {
                sum += (int32_t)v;
            }
        }
        if (c->op == WEFT_AVG) {
            acc = (uint32_t)(int32_t)(sum / p);
        }
        memcpy(dst, &acc, 4);
        break;
    }
    case WEFT_INT64:
    case WEFT_UINT64: {
        uint64_t acc = 0;
        for (int r = 0; r < p; r++) {
            uint64_t v;
            gen(c, ci, r, i, e);
            memcpy(&v, e, 8);
            acc = c->op == WEFT_LOR ? (acc || v) : acc + v;
        }
        memcpy(dst, &acc, 8);
        break;
    }
    default:
        break;
    }
}

static const char *variant_name(int v)
{
    return v == 0 ? "out-of-place" : v == 1 ? "WEFT_IN_PLACE" : "nccl-in-place";
}

/* The checker's view of a case's data (tests/coll/check.h): the inputs,
 * and the reduction the ranks computed together into the case's expected. */
typedef struct data_ctx {
    const tcase_t *tc;
    const combo_t *c;
    int ci;
    size_t es;
} data_ctx_t;

static void data_value(const void *ctx, int q, size_t i, void *dst)
{
    const data_ctx_t *x = ctx;

    gen(x->c, x->ci, q, i, dst);
}

static void data_reduced(const void *ctx, size_t i, void *dst)
{
    const data_ctx_t *x = ctx;

    memcpy(dst, x->tc->expected + i * x->es, x->es);
}

static int guard_ok(const unsigned char *b)
{
    for (int g = 0; g < GUARD; g++) {
        if (b[g] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

static void run_case(shared_t *sh, weft_comm_t comm, int rank, const tcase_t *tc)
{
    const int p = sh->nranks, ci = tc->combo;
    const combo_t *c = &combos[ci];
    const size_t es = weft_dtype_size(c->dtype), n = tc->count;
    static const unsigned char fill_elem[8] = {0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a};
    const data_ctx_t x = {tc, c, ci, es};
    const check_data_t data = {es, data_value, data_reduced, fill_elem, &x};
    const check_shape_t shape = {.kind = tc->kind, .p = p, .rank = rank, .n = n};
    const size_t in_elems = check_extent(&shape, CHECK_SEND);
    /* reduce_scatter in place: the input in recvbuf */
    const size_t out_elems = tc->kind == WEFT_COLL_REDUCE_SCATTER && tc->inplace
                                 ? in_elems
                                 : check_extent(&shape, CHECK_RECV);
    const size_t res_first = tc->kind == WEFT_COLL_REDUCE_SCATTER ? (size_t)rank * n : 0;
    unsigned char *in, *out;
    const void *sendbuf;
    void *recvbuf;
    char msg[256];
    weft_status_t status;

    in = malloc(in_elems * es + GUARD);
    out = malloc(out_elems * es + GUARD);
    if (in == NULL || out == NULL) {
        fprintf(stderr, "test out of memory\n");
        abort();
    }
    check_image(&shape, CHECK_SEND, &data, in);
    memset(in + in_elems * es, GUARD_BYTE, GUARD);
    memset(out, 0x5a, out_elems * es);
    memset(out + out_elems * es, GUARD_BYTE, GUARD);

    /* every rank computes a slice of the expected reduced vector, in the
     * first world that runs the case */
    if (tc->kind != WEFT_COLL_ALLGATHER && !tc->computed) {
        size_t total = tc->kind == WEFT_COLL_ALLREDUCE ? n : n * (size_t)p;
        size_t lo = weft__block_start(total, p, rank), hi = lo + weft__block_count(total, p, rank);

        for (size_t gi = lo; gi < hi; gi++) {
            expect(c, ci, p, gi, tc->expected + gi * es, &tc->approx[gi]);
        }
    }
    pthread_barrier_wait(&sh->barrier);

    /* lay the input out as the in-place convention requires: WEFT_IN_PLACE,
     * or NCCL's offsets (sendbuf at this rank's block of recvbuf; recvbuf at
     * this rank's block of sendbuf for reduce_scatter) */
    sendbuf = in;
    recvbuf = out;
    if (tc->inplace == 2 && tc->kind == WEFT_COLL_REDUCE_SCATTER) {
        recvbuf = in + (size_t)rank * n * es;
    } else if (tc->inplace) {
        check_image_in_place(&shape, &data, out);
        sendbuf = tc->inplace == 1                  ? WEFT_IN_PLACE
                  : tc->kind == WEFT_COLL_ALLGATHER ? out + (size_t)rank * n * es
                                                    : out;
    }
    status = check_call(&shape, CHECK_BLOCKING, sendbuf, recvbuf, c->dtype, c->op, comm, NULL);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        char what_[320];                                                                           \
        snprintf(what_, sizeof(what_), __VA_ARGS__);                                               \
        HARNESS_FAIL("%s p=%d count=%zu %s %s%s %s rank %d: %s", weft__coll_kind_name(tc->kind),   \
                     p, n, weft_dtype_name(c->dtype), weft_op_name(c->op),                         \
                     c->inexact ? " (inexact)" : "", variant_name(tc->inplace), rank, what_);      \
        goto done;                                                                                 \
    } while (0)

    if (status != WEFT_OK) {
        FAIL("%s (%s)", weft_status_string(status), weft_last_error());
    }
    if (c->inexact && tc->kind != WEFT_COLL_ALLGATHER) {
        for (size_t k = 0; k < n; k++) {
            size_t gi = res_first + k;
            double approx = tc->approx[gi];
            float got;

            memcpy(&got, (unsigned char *)recvbuf + k * es, 4);
            if (fabs((double)got - approx) > 1e-5 * p + 1e-6 * fabs(approx)) {
                FAIL("element %zu = %.9g, want %.9g", gi, (double)got, approx);
            }
        }
    } else if (check_diff(&shape, CHECK_RECV, &data, recvbuf, msg, sizeof(msg)) >= 0) {
        FAIL("%s", msg);
    }
    /* nothing outside the result may change */
    if (!guard_ok(in + in_elems * es) || !guard_ok(out + out_elems * es)) {
        FAIL("wrote past the end of a buffer");
    }
    if (tc->inplace == 0 && check_diff(&shape, CHECK_SEND, &data, in, msg, sizeof(msg)) >= 0) {
        FAIL("sendbuf was modified: %s", msg);
    }
#undef FAIL
    atomic_fetch_add(&sh->checked, 1);
    if (tc->kind == WEFT_COLL_ALLREDUCE && c->inexact) {
        memcpy(sh->results[rank], recvbuf, n * es);
    }
done:
    pthread_barrier_wait(&sh->barrier);
    /* allreduce: every rank ends with the same bits */
    if (rank == 0 && tc->kind == WEFT_COLL_ALLREDUCE && c->inexact && status == WEFT_OK) {
        for (int r = 1; r < p; r++) {
            if (memcmp(sh->results[0], sh->results[r], n * es) != 0) {
                HARNESS_FAIL("allreduce p=%d count=%zu inexact float32 sum %s: rank %d's result "
                             "is not bitwise equal to rank 0's",
                             p, n, variant_name(tc->inplace), r);
                break;
            }
        }
    }
    pthread_barrier_wait(&sh->barrier);
    free(in);
    free(out);
}

/* single-copy shared-memory allreduce from this many bytes (the matrix's
 * default: never, so the staged rounds are what it tests) */
static size_t matrix_shm_cma = SIZE_MAX;
static size_t matrix_shm_cma_allgather = SIZE_MAX; /* the same for allgather */
/* hierarchical allreduce and allgather in the leader form up to this many bytes (the matrix's
 * default: never; SIZE_MAX: always) */
static size_t matrix_hier_leader = 0;
/* hierarchical allreduce in pipelined chunks of this many bytes (the matrix's default: 0, one
 * piece) */
static size_t matrix_hier_pipeline = 0;

/* ranks that ran with shared memory and a node map of several nodes; that
 * read peers' buffers by process_vm_readv */
static atomic_int with_shm, with_nodes, with_cma, with_cma_reads;

static void rank_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;

    atomic_fetch_add(&with_shm, weft__comm_of(comm)->coll->shm != NULL);
    atomic_fetch_add(&with_cma,
                     weft__comm_of(comm)->coll->shm != NULL && weft__comm_of(comm)->coll->shm->cma);
    atomic_fetch_add(&with_nodes,
                     weft__comm_of(comm)->node != NULL && weft__comm_of(comm)->node->nnodes > 1);

    for (int i = 0; i < sh->ncases; i++) {
        run_case(sh, comm, rank, &sh->cases[i]);
    }
    atomic_fetch_add(&with_cma_reads, weft__comm_of(comm)->coll->shm != NULL &&
                                          weft__comm_of(comm)->coll->shm->cma_bytes > 0);
}

typedef struct matrix_stats {
    long collectives; /* (case, seed) pairs run */
    long rank_results;
    int rank_counts;
} matrix_stats_t;

/* Run every case for one rank count and seed. */
static void run_world(weft_coll_kind_t kind, int p, uint64_t seed, uint64_t delay_ns,
                      tcase_t *cases, int ncases, matrix_stats_t *st)
{
    shared_t sh = {.kind = kind, .cases = cases, .ncases = ncases, .nranks = p};
    weft_thread_world_opts_t opts = {.nranks = p, .seed = seed, .max_delay_ns = delay_ns};
    size_t maxres = 0;
    weft_status_t status;

    for (int i = 0; i < ncases; i++) {
        size_t b = cases[i].count * 8;
        maxres = b > maxres ? b : maxres;
        if (cases[i].expected == NULL) {
            cases[i].expected = malloc(b * (size_t)p + 1);
            cases[i].approx = calloc(cases[i].count * (size_t)p + 1, sizeof(double));
            cr_assert(cases[i].expected != NULL && cases[i].approx != NULL);
        }
    }
    sh.results = calloc((size_t)p, sizeof(*sh.results));
    cr_assert_not_null(sh.results);
    for (int r = 0; r < p; r++) {
        sh.results[r] = malloc(maxres + 1);
        cr_assert_not_null(sh.results[r]);
    }
    pthread_barrier_init(&sh.barrier, NULL, (unsigned)p);
    atomic_store(&with_shm, 0);
    atomic_store(&with_nodes, 0);
    atomic_store(&with_cma, 0);
    atomic_store(&with_cma_reads, 0);
    status = weft__thread_world_run(&opts, rank_body, &sh);
    if (weft__coll_config.shm && p > 1) {
        /* the shared-memory and hierarchical algorithms really ran where
         * they can: every rank has the segment; nodes as configured */
        int rpn = weft__runtime_config.ranks_per_node;
        int uniform = rpn <= 0 || p % rpn == 0 || p < rpn;

        cr_assert_eq(atomic_load(&with_shm), uniform && rpn != 1 ? p : 0,
                     "p=%d, %d ranks per node: %d ranks had shared memory", p, rpn,
                     atomic_load(&with_shm));
        cr_assert_eq(atomic_load(&with_cma), atomic_load(&with_shm),
                     "p=%d: %d of %d ranks with shared memory may read each other's memory", p,
                     atomic_load(&with_cma), atomic_load(&with_shm));
        cr_assert_eq(atomic_load(&with_nodes), rpn > 0 && rpn < p ? p : 0,
                     "p=%d, %d ranks per node: %d ranks saw several nodes", p, rpn,
                     atomic_load(&with_nodes));
        /* the single-copy rounds ran on every rank where the matrix asks for them, and on
         * none where every threshold says never (default selection: where they pay) */
        if (rpn == 0 &&
            (weft__coll_config.shm_cma_allgather == 0 || weft__coll_config.shm_cma == 0)) {
            cr_assert_eq(atomic_load(&with_cma_reads), p,
                         "p=%d: only %d ranks read peers' buffers by process_vm_readv", p,
                         atomic_load(&with_cma_reads));
        } else if (rpn > 1 && p > rpn && p % rpn == 0 && weft__coll_config.shm_cma_allgather == 0) {
            /* nodes of rpn: the hierarchical allgather's node part (allgather_hier_single_copy) */
            cr_assert_eq(atomic_load(&with_cma_reads), p,
                         "p=%d, %d per node: only %d ranks read peers' buffers by "
                         "process_vm_readv",
                         p, rpn, atomic_load(&with_cma_reads));
        } else if (weft__coll_config.shm_cma_allgather == SIZE_MAX &&
                   weft__coll_config.shm_cma == SIZE_MAX &&
                   weft__coll_config.shm_cma_alltoall == SIZE_MAX &&
                   weft__coll_config.shm_cma_copy == SIZE_MAX) {
            cr_assert_eq(atomic_load(&with_cma_reads), 0,
                         "p=%d: %d ranks read peers' buffers by process_vm_readv", p,
                         atomic_load(&with_cma_reads));
        }
    }
    cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
    cr_assert_eq(harness_fail_count(), 0, "%d failure(s) at p=%d seed=%llu; first: %s",
                 harness_fail_count(), p, (unsigned long long)seed, harness_fail_message(0));
    cr_assert_eq(atomic_load(&sh.checked), (long)ncases * p,
                 "only %ld of %ld rank results were checked", atomic_load(&sh.checked),
                 (long)ncases * p);
    st->collectives += ncases;
    st->rank_results += atomic_load(&sh.checked);
    for (int i = 0; i < ncases; i++) {
        cases[i].computed = 1;
    }
    pthread_barrier_destroy(&sh.barrier);
    for (int r = 0; r < p; r++) {
        free(sh.results[r]);
    }
    free(sh.results);
}

static void cases_free(tcase_t *cases, int ncases)
{
    for (int i = 0; i < ncases; i++) {
        free(cases[i].expected);
        free(cases[i].approx);
    }
}

/*
 * The matrix for one algorithm: p = 1..64 and 128; for each p the five
 * counts, each in-place variant, and combinations rotating through the
 * dtype/op list so every combination meets every count class; seeds vary
 * the landing order (one seed adds random delays at small p).
 */
static void run_matrix_nodes(weft_coll_kind_t kind, const char *algo, int ranks_per_node);

static void run_matrix(weft_coll_kind_t kind, const char *algo)
{
    run_matrix_nodes(kind, algo, 0);
}

/* ranks_per_node > 0: virtual nodes of that many ranks (the last one
 * smaller where p is not a multiple: hierarchical algorithms then fall
 * back, which the matrix checks too). */
static void run_matrix_nodes(weft_coll_kind_t kind, const char *algo, int ranks_per_node)
{
    const char *why;
    matrix_stats_t st = {0};
    const uint64_t seeds[] = {1, 0x5eed};
    int nvariants = kind == WEFT_COLL_ALLREDUCE ? 2 : 3;

    setenv("WEFT_LOG_LEVEL", "error", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    why = check_force(kind, algo);
    cr_assert_null(why, "%s", why);
    /* small fragments so that large counts pipeline several per block;
     * small shared-memory slots so that they take several rounds, and
     * both allreduce forms (one phase up to 64 bytes) */
    weft__coll_config.ring_frag_size = 2048;
    weft__coll_config.shm_slot = 4096;
    weft__coll_config.shm_small = 64;
    weft__coll_config.shm_cma = matrix_shm_cma;
    weft__coll_config.hier_leader = matrix_hier_leader;
    weft__coll_config.hier_pipeline = matrix_hier_pipeline;
    weft__coll_config.shm_cma_allgather = matrix_shm_cma_allgather;
    weft__coll_config.shm_cma_alltoall = SIZE_MAX; /* tests/coll/test_exchange.c has it */
    weft__coll_config.shm_cma_copy = SIZE_MAX;     /* tests/coll/test_rooted.c has it */
    /* allreduce results copied out with non-temporal stores from 16 KiB: the large counts of
     * the wider dtypes, not the small counts */
    weft__coll_config.shm_stream = 16384;
    weft__runtime_config.ranks_per_node = ranks_per_node;

    for (int p = 1; p <= 128; p = p < 64 ? p + 1 : 128) {
        size_t large = kind == WEFT_COLL_ALLREDUCE ? 8191 : ((size_t)(32768 / p) | 1);
        size_t counts[] = {0, 1, (size_t)p - 1, (size_t)p + 1, large};
        int ncounts = p == 128 ? 1 : 5; /* p = 128: one size */
        tcase_t cases[5 * 3 * 4];
        int ncases = 0;

        if (p == 128) {
            counts[0] = (size_t)p + 1;
        }
        for (int k = 0; k < ncounts; k++) {
            for (int v = 0; v < nvariants; v++) {
                /* two combinations per (count, variant), rotating with p */
                for (int j = 0; j < 2; j++) {
                    int ci = (p * 5 + k * 3 + v * 2 + j * 7) % NCOMBOS;
                    cases[ncases++] =
                        (tcase_t){.kind = kind, .count = counts[k], .combo = ci, .inplace = v};
                }
            }
        }
        for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
            uint64_t delay = si == 1 && p <= 8 ? 20000 : 0;
            run_world(kind, p, seeds[si], delay, cases, ncases, &st);
        }
        cases_free(cases, ncases);
        st.rank_counts++;
        if (p == 128) {
            break;
        }
    }
    cr_log_info("%s/%s: %d rank counts (1..64, 128), %ld collectives, %ld rank results checked",
                weft__coll_kind_name(kind), algo, st.rank_counts, st.collectives, st.rank_results);
    fprintf(stderr,
            "matrix %s/%s: %d rank counts (1..64, 128), %ld collectives, %ld rank "
            "results checked\n",
            weft__coll_kind_name(kind), algo, st.rank_counts, st.collectives, st.rank_results);
    weft_finalize();
}

Test(matrix, allreduce_recursive_doubling, .timeout = 900)
{
    run_matrix(WEFT_COLL_ALLREDUCE, "recursive_doubling");
}

Test(matrix, allreduce_rabenseifner, .timeout = 900)
{
    run_matrix(WEFT_COLL_ALLREDUCE, "rabenseifner");
}

Test(matrix, allreduce_ring, .timeout = 900)
{
    run_matrix(WEFT_COLL_ALLREDUCE, "ring");
}

Test(matrix, allreduce_shm, .timeout = 900)
{
    run_matrix(WEFT_COLL_ALLREDUCE, "shm");
}

/* every size through process_vm_readv (in-process ranks read their own
 * process, which the kernel always allows) */
Test(matrix, allreduce_shm_single_copy, .timeout = 900)
{
    matrix_shm_cma = 0;
    run_matrix(WEFT_COLL_ALLREDUCE, "shm");
}

/* The hierarchical allreduce and allgather in their two forms: a slice on every rail (the
 * matrix's default), the whole vector on rail 0; the builds of the second counted either way. */
static void run_hier(weft_coll_kind_t kind, int ranks_per_node, int leader)
{
    unsigned long before = weft__hier_leader_builds();
    const char *why;

    matrix_hier_leader = leader ? SIZE_MAX : 0;
    run_matrix_nodes(kind, "hier", ranks_per_node);
    why = check_hier_leader_builds(before, leader);
    cr_assert_null(why, "%s", why);
}

Test(matrix, allreduce_hier_2_per_node, .timeout = 900)
{
    run_hier(WEFT_COLL_ALLREDUCE, 2, 0);
}

Test(matrix, allreduce_hier_3_per_node, .timeout = 900)
{
    run_hier(WEFT_COLL_ALLREDUCE, 3, 0);
}

Test(matrix, allreduce_hier_leader_2_per_node, .timeout = 900)
{
    run_hier(WEFT_COLL_ALLREDUCE, 2, 1);
}

Test(matrix, allreduce_hier_leader_3_per_node, .timeout = 900)
{
    run_hier(WEFT_COLL_ALLREDUCE, 3, 1);
}

/* The sliced form in pipelined chunks of 256 bytes (an allgather: of its whole result, a
 * reduce_scatter: of its whole input, so every rank's block in pieces of 256 / p bytes or one
 * element): the counts above p + 1 elements of the
 * wider dtypes take a few chunks, the large count the most (WEFT_HIER_PIPELINE_MAX_CHUNKS, chunks
 * grown past 256 bytes); a rail that carries a chunk out of order, or an allgather of the wrong
 * chunk or to the wrong place, fails it. */
static void run_hier_pipelined(weft_coll_kind_t kind, int ranks_per_node)
{
    unsigned long before = weft__hier_pipelined_builds();

    matrix_hier_pipeline = 256;
    run_hier(kind, ranks_per_node, 0);
    matrix_hier_pipeline = 0;
    cr_assert_gt(weft__hier_pipelined_builds(), before, "no %s ran pipelined",
                 weft__coll_kind_name(kind));
}

Test(matrix, allreduce_hier_pipelined_2_per_node, .timeout = 900)
{
    run_hier_pipelined(WEFT_COLL_ALLREDUCE, 2);
}

Test(matrix, allreduce_hier_pipelined_3_per_node, .timeout = 900)
{
    run_hier_pipelined(WEFT_COLL_ALLREDUCE, 3);
}

Test(matrix, reduce_scatter_shm, .timeout = 900)
{
    run_matrix(WEFT_COLL_REDUCE_SCATTER, "shm");
}

Test(matrix, reduce_scatter_hier, .timeout = 900)
{
    run_hier(WEFT_COLL_REDUCE_SCATTER, 4, 0);
}

Test(matrix, reduce_scatter_hier_leader_3_per_node, .timeout = 900)
{
    run_hier(WEFT_COLL_REDUCE_SCATTER, 3, 1);
}

Test(matrix, reduce_scatter_hier_pipelined_2_per_node, .timeout = 900)
{
    run_hier_pipelined(WEFT_COLL_REDUCE_SCATTER, 2);
}

Test(matrix, reduce_scatter_hier_pipelined_3_per_node, .timeout = 900)
{
    run_hier_pipelined(WEFT_COLL_REDUCE_SCATTER, 3);
}

Test(matrix, allgather_shm, .timeout = 900)
{
    run_matrix(WEFT_COLL_ALLGATHER, "shm");
}

Test(matrix, allgather_shm_single_copy, .timeout = 900)
{
    matrix_shm_cma_allgather = 0;
    run_matrix(WEFT_COLL_ALLGATHER, "shm");
}

Test(matrix, allgather_hier, .timeout = 900)
{
    run_hier(WEFT_COLL_ALLGATHER, 2, 0);
}

/* the node's part read by process_vm_readv, each rail's blocks into their ranks' places */
Test(matrix, allgather_hier_single_copy_3_per_node, .timeout = 900)
{
    matrix_shm_cma_allgather = 0;
    run_hier(WEFT_COLL_ALLGATHER, 3, 0);
}

Test(matrix, allgather_hier_leader_3_per_node, .timeout = 900)
{
    run_hier(WEFT_COLL_ALLGATHER, 3, 1);
}

Test(matrix, allgather_hier_pipelined_2_per_node, .timeout = 900)
{
    run_hier_pipelined(WEFT_COLL_ALLGATHER, 2);
}

/* the node's part of each piece read by process_vm_readv */
Test(matrix, allgather_hier_pipelined_single_copy_3_per_node, .timeout = 900)
{
    matrix_shm_cma_allgather = 0;
    run_hier_pipelined(WEFT_COLL_ALLGATHER, 3);
}

Test(matrix, reduce_scatter_ring, .timeout = 900)
{
    run_matrix(WEFT_COLL_REDUCE_SCATTER, "ring");
}

Test(matrix, allreduce_ordered, .timeout = 900)
{
    run_matrix(WEFT_COLL_ALLREDUCE, "ordered");
}

Test(matrix, reduce_scatter_ordered, .timeout = 900)
{
    run_matrix(WEFT_COLL_REDUCE_SCATTER, "ordered");
}

Test(matrix, allgather_ring, .timeout = 900)
{
    run_matrix(WEFT_COLL_ALLGATHER, "ring");
}

/* Every combination on every algorithm at a few rank counts, with the
 * default selection (no WEFT_TUNE) choosing by size. */
Test(matrix, default_selection_all_combos, .timeout = 600)
{
    matrix_stats_t st = {0};
    const int ps[] = {2, 3, 5, 8, 13};

    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
        /* the collectives this file's harness knows; the others have
         * tests/coll/test_rooted.c, test_exchange.c and test_stress.c */
        for (int kind = WEFT_COLL_ALLREDUCE; kind <= WEFT_COLL_ALLGATHER; kind++) {
            tcase_t cases[NCOMBOS * 3];
            int ncases = 0;

            for (int ci = 0; ci < NCOMBOS; ci++) {
                /* sizes that cross the default thresholds: small, medium, large */
                cases[ncases++] =
                    (tcase_t){.kind = (weft_coll_kind_t)kind, .count = 7, .combo = ci};
                cases[ncases++] = (tcase_t){
                    .kind = (weft_coll_kind_t)kind, .count = 3001, .combo = ci, .inplace = 1};
                cases[ncases++] = (tcase_t){.kind = (weft_coll_kind_t)kind,
                                            .count = kind == WEFT_COLL_ALLREDUCE ? 600001 : 40001,
                                            .combo = ci};
            }
            run_world((weft_coll_kind_t)kind, ps[pi], 7, 0, cases, ncases, &st);
            cases_free(cases, ncases);
        }
    }
    cr_log_info("default selection: %ld collectives checked", st.collectives);
    weft_finalize();
}
