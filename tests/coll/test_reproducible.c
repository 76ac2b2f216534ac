/*
 * The reproducible mode (WEFT_REPRODUCIBLE, coll/ordered/ordered.c).
 *
 * Inputs whose reductions round differently in different orders (values
 * of many magnitudes and both signs) go through allreduce, reduce,
 * reduce_scatter and reduce_scatter_v on in-process ranks. In the mode,
 * every result must be, bit for bit, the rank-order fold of the device
 * contract computed here,
 *
 *     acc = x0 op ... op x7     (widened to float, one rounding for halves)
 *     acc = acc op x8 ... op x14, ...
 *
 * whatever WEFT_TUNE forces (the rules name the other algorithms, which the
 * mode drops), with the ranks on one node (shared memory), each alone, or on
 * virtual nodes of 2 and 3 (hierarchical layouts). So the four collectives
 * agree with each other too. And, so that the check can fail: without the
 * mode the same inputs give other bits under some algorithm.
 */
#include <criterion/criterion.h>

#include "coll/coll.h"
#include "device/host/host.h"
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

#define COUNT 517 /* elements of allreduce and reduce; per rank of reduce_scatter: COUNT / p */

typedef struct combo {
    weft_dtype_t dtype;
    weft_op_t op;
} combo_t;

static const combo_t combos[] = {
    {WEFT_FLOAT32, WEFT_SUM},  {WEFT_FLOAT64, WEFT_SUM},  {WEFT_FLOAT16, WEFT_SUM},
    {WEFT_BFLOAT16, WEFT_SUM}, {WEFT_FLOAT32, WEFT_PROD}, {WEFT_FLOAT16, WEFT_AVG},
};
#define NCOMBOS ((int)(sizeof(combos) / sizeof(combos[0])))

static const weft_coll_kind_t kinds[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_REDUCE,
                                         WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_REDUCE_SCATTER_V};
#define NKINDS ((int)(sizeof(kinds) / sizeof(kinds[0])))

/* Element i of rank q's input as a double that the dtype holds exactly. */
static double input(const combo_t *c, int q, size_t i)
{
    uint64_t h = check_mix(((uint64_t)q << 32) ^ i ^ ((uint64_t)c->dtype << 48));
    double m = 1.0 + (double)(h & 0xfffff) / 1048576.0; /* [1, 2) */
    int e;
    float f;
    uint16_t half;

    if (c->op == WEFT_PROD) {
        m = 0.5 + (double)(h & 0xfffff) / 1048576.0 * 1.5; /* products stay finite */
        e = 0;
    } else {
        e = (int)((h >> 20) % 17) - 8; /* halves: well inside float16's range */
    }
    m = ldexp((h >> 40) & 1 ? -m : m, e);
    switch (c->dtype) {
    case WEFT_FLOAT64:
        return m;
    case WEFT_FLOAT32:
        return (double)(float)m;
    default:
        f = (float)m;
        weft__host_half_narrow(c->dtype, &half, &f, 1, 0);
        weft__host_half_widen(c->dtype, &f, &half, 1, 0);
        return f;
    }
}

static void store(const combo_t *c, double v, void *dst)
{
    float f = (float)v;
    uint16_t half;

    switch (c->dtype) {
    case WEFT_FLOAT64:
        memcpy(dst, &v, sizeof(v));
        break;
    case WEFT_FLOAT32:
        memcpy(dst, &f, sizeof(f));
        break;
    default:
        weft__host_half_narrow(c->dtype, &half, &f, 1, 0);
        memcpy(dst, &half, sizeof(half));
        break;
    }
}

/* The fold in rank order, grouped as the ordered algorithms group it. */
static void fold(const combo_t *c, int p, size_t i, void *dst)
{
    double acc64 = 0;
    float acc = 0;
    int q = 0;

    if (c->dtype == WEFT_FLOAT64) {
        for (q = 0; q < p; q++) {
            acc64 = q == 0               ? input(c, 0, i)
                    : c->op == WEFT_PROD ? acc64 * input(c, q, i)
                                         : acc64 + input(c, q, i);
        }
        store(c, acc64, dst);
        return;
    }
    while (q < p) {
        /* one reduction: x0 .. x7 first, then the accumulator and 7 more */
        float sum = q == 0 ? (float)input(c, q++, i) : acc;

        for (int n = 1; q < p && n < WEFT_SCHED_MAX_REDUCE_INPUTS; q++, n++) {
            float x = (float)input(c, q, i);

            sum = c->op == WEFT_PROD ? sum * x : sum + x;
        }
        acc = sum;
        if (c->dtype != WEFT_FLOAT32) { /* one rounding per reduction */
            uint16_t half;

            weft__host_half_narrow(c->dtype, &half, &acc, 1, 0);
            weft__host_half_widen(c->dtype, &acc, &half, 1, 0);
        }
    }
    if (c->op == WEFT_AVG) {
        acc = acc / (float)p;
    }
    store(c, acc, dst);
}

typedef struct data_ctx {
    const combo_t *c;
    int p;
} data_ctx_t;

static void data_value(const void *ctx, int q, size_t i, void *dst)
{
    const data_ctx_t *x = ctx;

    store(x->c, input(x->c, q, i), dst);
}

static void data_reduced(const void *ctx, size_t i, void *dst)
{
    const data_ctx_t *x = ctx;

    fold(x->c, x->p, i, dst);
}

typedef struct shared {
    int nranks;
    int expect_exact; /* 1: every result must be the fold; 0: count the ones that are not */
    int comm_mode;    /* -1: WEFT_REPRODUCIBLE's; 0/1: weft_comm_set_reproducible, then a dup */
    atomic_long checked;
    atomic_long differ;
} shared_t;

static void rank_body(weft_comm_t world, int rank, void *arg)
{
    shared_t *sh = arg;
    const int p = sh->nranks;
    static const unsigned char fill[8] = {0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee};
    size_t counts[64];
    weft_comm_t comm = world;

    if (sh->comm_mode >= 0) {
        /* the switch, and a duplicate that inherits it */
        weft_status_t st = weft_comm_set_reproducible(world, sh->comm_mode);

        if (st == WEFT_OK) {
            st = weft_comm_dup(world, &comm);
        }
        if (st != WEFT_OK) {
            HARNESS_FAIL("rank %d: set the mode and dup: %s (%s)", rank, weft_status_string(st),
                         weft_last_error());
            return;
        }
    }

    for (int q = 0; q < p; q++) {
        counts[q] = (size_t)(q * 7 % 5) * 13 + (size_t)q; /* uneven, some empty */
    }
    for (int k = 0; k < NKINDS; k++) {
        for (int ci = 0; ci < NCOMBOS; ci++) {
            const combo_t *c = &combos[ci];
            const size_t es = weft_dtype_size(c->dtype);
            const data_ctx_t x = {c, p};
            const check_data_t data = {es, data_value, data_reduced, fill, &x};
            check_shape_t shape = {.kind = kinds[k],
                                   .p = p,
                                   .rank = rank,
                                   .root = p / 2,
                                   .n = kinds[k] == WEFT_COLL_REDUCE_SCATTER ? COUNT / (size_t)p
                                                                             : COUNT,
                                   .counts = counts};
            size_t in_ext = check_extent(&shape, CHECK_SEND);
            size_t out_ext = check_extent(&shape, CHECK_RECV);
            unsigned char *in = malloc(in_ext * es + 1), *out = malloc(out_ext * es + 1);
            char msg[256];
            weft_status_t status;

            if (in == NULL || out == NULL) {
                abort();
            }
            check_image(&shape, CHECK_SEND, &data, in);
            memset(out, 0xee, out_ext * es);
            status =
                check_call(&shape, CHECK_BLOCKING, in, check_has(&shape, CHECK_RECV) ? out : NULL,
                           c->dtype, c->op, comm, NULL);
            if (status != WEFT_OK) {
                HARNESS_FAIL("%s %s %s p=%d rank %d: %s (%s)", weft__coll_kind_name(kinds[k]),
                             weft_dtype_name(c->dtype), weft_op_name(c->op), p, rank,
                             weft_status_string(status), weft_last_error());
            } else if (check_has(&shape, CHECK_RECV)) {
                if (check_diff(&shape, CHECK_RECV, &data, out, msg, sizeof(msg)) >= 0) {
                    if (sh->expect_exact) {
                        HARNESS_FAIL("%s %s %s p=%d rank %d: %s", weft__coll_kind_name(kinds[k]),
                                     weft_dtype_name(c->dtype), weft_op_name(c->op), p, rank, msg);
                    }
                    atomic_fetch_add(&sh->differ, 1);
                }
                atomic_fetch_add(&sh->checked, 1);
            }
            free(in);
            free(out);
        }
    }
    if (comm != world) {
        weft_comm_destroy(comm);
    }
}

static const int sizes[] = {1, 2, 3, 5, 8, 9, 13, 16, 17};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

/* Every size under each rule set, WEFT_REPRODUCIBLE set to global_mode and
 * each communicator's to comm_mode (-1: left); returns the results that
 * were not the fold (with expect_exact, each is a failure). */
static long run_modes(const char *const *rules, int nrules, int ranks_per_node, int global_mode,
                      int comm_mode, int expect_exact)
{
    long differ = 0;

    setenv("WEFT_LOG_LEVEL", "error", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    weft__coll_config.shm_slot = 4096; /* several shared-memory rounds */
    weft__runtime_config.ranks_per_node = ranks_per_node;
    weft__coll_config.reproducible = global_mode;
    for (int ri = 0; ri < nrules; ri++) {
        cr_assert_eq(weft__coll_tune_load(rules[ri]), WEFT_OK, "%s: %s", rules[ri],
                     weft_last_error());
        for (int si = 0; si < NSIZES; si++) {
            shared_t sh = {
                .nranks = sizes[si], .expect_exact = expect_exact, .comm_mode = comm_mode};
            weft_thread_world_opts_t opts = {.nranks = sizes[si], .seed = 7 + (uint64_t)si};
            long want = 0;

            for (int k = 0; k < NKINDS; k++) {
                want += kinds[k] == WEFT_COLL_REDUCE ? NCOMBOS : (long)NCOMBOS * sizes[si];
            }
            cr_assert_eq(weft__thread_world_run(&opts, rank_body, &sh), WEFT_OK, "%s",
                         weft_last_error());
            cr_assert_eq(harness_fail_count(), 0, "rules '%s', %d ranks per node: %s", rules[ri],
                         ranks_per_node, harness_fail_message(0));
            cr_assert_eq(atomic_load(&sh.checked), want, "%ld of %ld results checked",
                         atomic_load(&sh.checked), want);
            differ += atomic_load(&sh.differ);
        }
    }
    weft__coll_tune_release();
    weft_finalize();
    return differ;
}

static long run_rules(const char *const *rules, int nrules, int ranks_per_node, int expect_exact)
{
    return run_modes(rules, nrules, ranks_per_node, expect_exact, -1, expect_exact);
}

/* what the rules would force: every other algorithm of the four */
static const char *const rules[] = {
    "",
    "allreduce:0-inf:ring,reduce_scatter:0-inf:ring,reduce:0-inf:binomial,"
    "reduce_scatter_v:0-inf:ring",
    "allreduce:0-inf:recursive_doubling,reduce_scatter:0-inf:recursive_halving,"
    "reduce:0-inf:reduce_scatter_gather",
    "allreduce:0-inf:rabenseifner",
    "allreduce:0-inf:shm,reduce_scatter:0-inf:shm,reduce:0-inf:shm,reduce_scatter_v:0-inf:shm",
    "allreduce:0-inf:hier,reduce_scatter:0-inf:hier",
};
#define NRULES ((int)(sizeof(rules) / sizeof(rules[0])))

Test(reproducible, one_node_every_rule, .timeout = 300)
{
    run_rules(rules, NRULES, 0, 1);
}

Test(reproducible, ranks_alone_every_rule, .timeout = 300)
{
    run_rules(rules, NRULES, 1, 1);
}

Test(reproducible, nodes_of_2_every_rule, .timeout = 300)
{
    run_rules(rules, NRULES, 2, 1);
}

Test(reproducible, nodes_of_3_every_rule, .timeout = 300)
{
    run_rules(rules, NRULES, 3, 1);
}

/* The check can fail: without the mode, the algorithms the rules force
 * combine in other orders, and some results are not the fold. */
Test(reproducible, other_orders_differ_without_the_mode, .timeout = 300)
{
    long differ = run_rules(rules + 1, NRULES - 1, 0, 0);

    cr_log_info("without WEFT_REPRODUCIBLE: %ld results differ from the rank-order fold", differ);
    cr_assert_gt(differ, 0, "every algorithm gave the rank-order fold: the check cannot fail");
}

/* The mode per communicator: on for one communicator (and its duplicate)
 * with WEFT_REPRODUCIBLE off gives the fold under every rule; off for one
 * with WEFT_REPRODUCIBLE on lets the rules' algorithms run again. */
Test(reproducible, per_communicator_on, .timeout = 300)
{
    run_modes(rules, NRULES, 2, 0, 1, 1);
}

Test(reproducible, per_communicator_off, .timeout = 300)
{
    long differ = run_modes(rules + 1, NRULES - 1, 0, 1, 0, 0);

    cr_assert_gt(differ, 0, "switched off, every algorithm still gave the rank-order fold");
}

Test(reproducible, per_communicator_bad_value)
{
    weft_comm_t comm;

    setenv("WEFT_LOG_LEVEL", "error", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_set_reproducible(comm, 2), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "not 1 (on) or 0 (off)"), "%s", weft_last_error());
    cr_assert_eq(weft_comm_set_reproducible(NULL, 1), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_comm_destroy(comm), WEFT_OK);
    weft_finalize();
}
