/*
 * Every collective on emu buffers among in-process ranks, in its three
 * forms: blocking, nonblocking (weft_i<collective> then weft_wait) and
 * stream-ordered (weft_<collective>_enqueue on an emu stream, then
 * weft_stream_synchronize). Rank counts 1..16, counts 0, 1, odd and one
 * larger than a page, in place in
 * every form MPI defines, dtypes and ops rotating over int, float and half
 * classes (tests/coll/device_data.h); some enqueued cases use host buffers
 * on the emu stream. Also with shared memory off (point-to-point
 * algorithms staging through the loop transport's device tables) and on
 * virtual nodes (hierarchical algorithms).
 *
 * Results are checked element by element against references computed by
 * the test; send buffers must be unchanged, gaps between v-collective
 * blocks and guard bytes after every buffer untouched. Ranks keep calling
 * every collective after a failed check (so nobody hangs), record the first
 * failure, and wait for each other before freeing buffers.
 */
#include <criterion/criterion.h>

#include "coll/coll.h"
#include "runtime/config.h"
#include "runtime/thread_world.h"
#include "tests/harness.h"
#include "tests/coll/device_cases.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shared {
    int p;
    const dd_case_t *cases;
    int ncases;
    pthread_barrier_t barrier;
    atomic_long checked;
} shared_t;

static void env_fail(void *ctx, const char *msg)
{
    (void)ctx;
    HARNESS_FAIL("%s", msg);
}

static void env_sync(void *ctx)
{
    pthread_barrier_wait(&((shared_t *)ctx)->barrier);
}

static void rank_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    const dd_env_t env = {.p = sh->p, .fail = env_fail, .sync = env_sync, .ctx = sh};
    weft_stream_t stream = NULL;

    if (weft_stream_create(WEFT_MEM_EMU, &stream) != WEFT_OK) {
        HARNESS_FAIL("rank %d: weft_stream_create: %s", rank, weft_last_error());
    }
    for (int i = 0; i < sh->ncases; i++) {
        if (stream == NULL && sh->cases[i].mode == DD_ENQ) {
            continue;
        }
        if (dd_run_case(&env, comm, rank, stream, &sh->cases[i])) {
            atomic_fetch_add(&sh->checked, 1);
        }
    }
    if (stream != NULL && weft_stream_destroy(stream) != WEFT_OK) {
        HARNESS_FAIL("rank %d: weft_stream_destroy: %s", rank, weft_last_error());
    }
}

static long run_cases(int p, const dd_case_t *cases, int ncases)
{
    shared_t sh = {.p = p, .cases = cases, .ncases = ncases};
    weft_thread_world_opts_t opts = {.nranks = p, .seed = (uint64_t)p * 7919, .max_delay_ns = 0};
    weft_status_t status;

    pthread_barrier_init(&sh.barrier, NULL, (unsigned)p);
    status = weft__thread_world_run(&opts, rank_body, &sh);
    cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
    cr_assert_eq(harness_fail_count(), 0, "%d failure(s) at p=%d; first: %s", harness_fail_count(),
                 p, harness_fail_message(0));
    cr_assert_eq(atomic_load(&sh.checked), (long)sh.ncases * p,
                 "only %ld of %ld rank results were checked", atomic_load(&sh.checked),
                 (long)sh.ncases * p);
    pthread_barrier_destroy(&sh.barrier);
    return (long)sh.ncases;
}

static long run_world(int p, int large)
{
    dd_case_t cases[WEFT_COLL_KIND_COUNT * DD_NMODES * 4];

    return run_cases(p, cases, dd_build_cases(p, large, cases));
}

/* weft_init with a deadline that turns a hang into a failure. */
static void setup(void)
{
    cr_assert_eq(harness_reset_env(NULL), 0, "cannot list the configuration registry");
    setenv("WEFT_LOG_LEVEL", "error", 1);
    setenv("WEFT_TIMEOUT", "60", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
}

static void teardown(void)
{
    weft_finalize();
}

TestSuite(device, .init = setup, .fini = teardown);

static void run_ranks(const int *ps, int nps, const char *what)
{
    long ops = 0;

    for (int i = 0; i < nps; i++) {
        ops += run_world(ps[i], 1);
    }
    fprintf(stderr, "device %s: %ld collectives per rank checked\n", what, ops);
}

Test(device, ranks_1_to_4, .timeout = 240)
{
    const int ps[] = {1, 2, 3, 4};

    run_ranks(ps, 4, "1..4 ranks");
}

Test(device, ranks_5_to_8, .timeout = 240)
{
    const int ps[] = {5, 6, 7, 8};

    run_ranks(ps, 4, "5..8 ranks");
}

Test(device, ranks_9_to_12, .timeout = 240)
{
    const int ps[] = {9, 10, 11, 12};

    run_ranks(ps, 4, "9..12 ranks");
}

Test(device, ranks_13_to_16, .timeout = 240)
{
    const int ps[] = {13, 14, 15, 16};

    run_ranks(ps, 4, "13..16 ranks");
}

/* Point-to-point algorithms only: every byte crosses the loop transport. */
Test(device, without_shared_memory, .timeout = 240)
{
    const int ps[] = {3, 5};

    weft__coll_config.shm = 0;
    run_ranks(ps, 2, "without shared memory");
}

/* Virtual nodes of 2 ranks: the hierarchical algorithms where they apply. */
Test(device, virtual_nodes, .timeout = 240)
{
    const int ps[] = {4, 6};

    weft__runtime_config.ranks_per_node = 2;
    run_ranks(ps, 2, "on virtual nodes of 2 ranks");
}

/* Virtual nodes of 2 ranks, the hierarchical allreduce, bcast, reduce, allgather and
 * reduce_scatter forced in
 * their sliced form and pipelined in chunks of 256 bytes, emu buffers not staged through host
 * memory (WEFT_DEVICE_STAGE=0): they take the pieces through scratch (the allgather's into rank
 * order by a copy per piece, the reduce_scatter's grouped by rail by a copy per piece). */
Test(device, virtual_nodes_pipelined, .timeout = 240)
{
    const int ps[] = {4, 6};
    unsigned long before = weft__hier_pipelined_builds();

    cr_assert_eq(weft__coll_tune_load("allreduce:0-inf:hier,bcast:0-inf:hier,reduce:0-inf:hier,"
                                      "allgather:0-inf:hier,reduce_scatter:0-inf:hier"),
                 WEFT_OK, "%s", weft_last_error());
    weft__coll_config.hier_leader = 0;
    weft__coll_config.hier_pipeline = 256;
    weft__coll_config.device_stage = 0;
    weft__runtime_config.ranks_per_node = 2;
    run_ranks(ps, 2, "on virtual nodes of 2 ranks, pipelined");
    cr_assert_gt(weft__hier_pipelined_builds() - before, 0, "nothing ran pipelined");
}

/* The shared-memory allreduce on device buffers maps the peers' buffers
 * (IPC) and reduces in steps of 2 MiB: counts over several steps, odd, in
 * place, in every form. */
Test(device, shm_allreduce_in_steps, .timeout = 240)
{
    const size_t counts[] = {1, 1000001, 600003};
    dd_case_t cases[DD_NMODES * 3];
    int nc = 0;

    cr_assert_eq(weft__coll_tune_load("allreduce:0-inf:shm"), WEFT_OK, "%s", weft_last_error());
    for (int m = 0; m < DD_NMODES; m++) {
        for (int k = 0; k < 3; k++) {
            cases[nc++] = (dd_case_t){.kind = WEFT_COLL_ALLREDUCE,
                                      .mode = m,
                                      .ci = (m + k) % 3,
                                      .n = counts[k],
                                      .inplace = k == 2};
        }
    }
    for (int p = 2; p <= 4; p++) {
        run_cases(p, cases, nc);
    }
}

/*
 * Ranks passing different memory types (rank 0 host buffers, the others
 * emu), in every form, with the shared-memory algorithms forced where they
 * read the peers' buffers and with the default selection: CUDA-aware MPI
 * accepts it; weft may instead refuse it with WEFT_ERR_MISMATCH on every
 * rank. Either way no rank hangs, crashes, or gets a wrong result.
 */
#define MIXED_CASES (4 * DD_NMODES)

typedef struct mixed {
    shared_t sh;
    int answer[MIXED_CASES][DD_MAX_RANKS]; /* dd_run_case's result per case and rank */
} mixed_t;

static void mixed_body(weft_comm_t comm, int rank, void *arg)
{
    mixed_t *mx = arg;
    shared_t *sh = &mx->sh;
    const dd_env_t env = {.p = sh->p, .fail = env_fail, .sync = env_sync, .ctx = sh};
    weft_stream_t stream = NULL;

    if (weft_stream_create(WEFT_MEM_EMU, &stream) != WEFT_OK) {
        HARNESS_FAIL("rank %d: weft_stream_create: %s", rank, weft_last_error());
        return;
    }
    for (int i = 0; i < sh->ncases; i++) {
        dd_case_t c = sh->cases[i];

        c.host = rank == 0;
        mx->answer[i][rank] = dd_run_case(&env, comm, rank, stream, &c);
    }
    if (weft_stream_destroy(stream) != WEFT_OK) {
        HARNESS_FAIL("rank %d: weft_stream_destroy: %s", rank, weft_last_error());
    }
}

static void run_mixed(const char *tune)
{
    const weft_coll_kind_t kinds[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_ALLGATHER, WEFT_COLL_BCAST,
                                      WEFT_COLL_REDUCE};
    dd_case_t cases[MIXED_CASES];
    int nc = 0;

    weft__runtime_config.timeout = 10; /* a disagreement between ranks fails quickly */
    if (tune != NULL) {
        cr_assert_eq(weft__coll_tune_load(tune), WEFT_OK, "%s", weft_last_error());
    }
    for (int k = 0; k < 4; k++) {
        for (int m = 0; m < DD_NMODES; m++) {
            cases[nc++] = (dd_case_t){.kind = kinds[k],
                                      .mode = m,
                                      .ci = (k + m) % 3,
                                      .n = 1001,
                                      .root = 1,
                                      .mismatch_ok = 1};
        }
    }
    for (int p = 2; p <= 3; p++) {
        mixed_t mx = {.sh = {.p = p, .cases = cases, .ncases = nc}};
        weft_thread_world_opts_t opts = {.nranks = p, .seed = 3};
        weft_status_t status;

        pthread_barrier_init(&mx.sh.barrier, NULL, (unsigned)p);
        status = weft__thread_world_run(&opts, mixed_body, &mx);
        cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
        cr_assert_eq(harness_fail_count(), 0, "%d failure(s) at p=%d; first: %s",
                     harness_fail_count(), p, harness_fail_message(0));
        for (int i = 0; i < nc; i++) {
            for (int r = 1; r < p; r++) {
                cr_assert_eq(mx.answer[i][r], mx.answer[i][0],
                             "p=%d %s case %d: rank %d answered %d, rank 0 %d (1 ok, 2 mismatch)",
                             p, weft__coll_kind_name(cases[i].kind), i, r, mx.answer[i][r],
                             mx.answer[i][0]);
            }
        }
        pthread_barrier_destroy(&mx.sh.barrier);
    }
}

Test(device, mixed_memory_types_default, .timeout = 240)
{
    run_mixed(NULL);
}

Test(device, mixed_memory_types_shm, .timeout = 240)
{
    run_mixed("allreduce:0-inf:shm,allgather:0-inf:shm,bcast:0-inf:shm,reduce:0-inf:shm");
}
