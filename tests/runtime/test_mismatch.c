/*
 * Ranks that disagree on a collective's arguments, between real processes
 * (one node, unique-id bootstrap): every rank must return WEFT_ERR_MISMATCH
 * (or, where a rank's part completes before the difference can be seen, get
 * it from its next call), no rank may wait for its deadline, and a failed
 * communicator keeps returning the error that broke it.
 *
 * The test process forks NRANKS children and uses no weft itself. Each
 * child sets its environment, initializes weft, joins a communicator
 * (rank 0 makes the unique id and hands it over through a shared mapping),
 * runs CALLS calls of the scenario and records each call's status, time
 * and message in the mapping. The parent reaps the children before a
 * deadline (SIGKILL after it) and then asserts. WEFT_TIMEOUT is 30 s, so a
 * call that returns in well under that did not wait for the deadline.
 */
#include <criterion/criterion.h>

#include "coll/coll.h"
#include "coll/diag/sig.h"
#include "tests/harness.h"
#include <weft.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NRANKS 4
#define CALLS 4
#define MSG 512
#define COUNT 2 /* 8 bytes of float: the shared-memory path in the control line */
#define FAST_S 5.0

typedef enum {
    CASE_COUNT,
    CASE_COUNT_WIDE,
    CASE_BCAST_WIDE,
    CASE_DTYPE,
    CASE_DTYPE_SIZE,
    CASE_OP,
    CASE_ROOT,
    CASE_KIND,
    CASE_LINE_ALLGATHER,
    CASE_LINE_BCAST
} case_t;
/* 48 bytes of float: a wide line's data (coll/shm/shm.h), 52 the slots' */
#define COUNT_WIDE 12

typedef struct slot {
    char stage[128];
    int ncalls;
    int st[CALLS];
    double secs[CALLS];
    char msg[CALLS][MSG];
    float out[COUNT * 2];
    char dump[4096]; /* weft_comm_dump at the end of the scenario */
    int finished;
} slot_t;

typedef struct shared {
    atomic_int id_ready;
    atomic_int through; /* ranks done with their scenario */
    weft_unique_id_t id;
    slot_t slot[NRANKS];
} shared_t;

typedef struct job {
    const char *shm;        /* WEFT_SHM */
    const char *check_args; /* WEFT_CHECK_ARGS */
    const char *timeout;    /* WEFT_TIMEOUT */
    int bad_ucx_rank;       /* this rank gets a UCX_TLS that UCX refuses (-1: none) */
    void (*scenario)(weft_comm_t comm, int rank, slot_t *me, int arg);
    int arg;
} job_t;

/* Record one call: its status, how long it took, its message. */
static void record(slot_t *me, weft_status_t st, double t0)
{
    int k = me->ncalls++;

    me->st[k] = st;
    me->secs[k] = harness_now_s() - t0;
    snprintf(me->msg[k], MSG, "%s", st == WEFT_OK ? "" : weft_last_error());
}

typedef struct run_ctx {
    shared_t *sh;
    const job_t *job;
} run_ctx_t;

static int child(int rank, void *arg)
{
    const run_ctx_t *ctx = arg;
    shared_t *sh = ctx->sh;
    const job_t *job = ctx->job;
    slot_t *me = &sh->slot[rank];
    weft_comm_t comm;
    weft_unique_id_t id;
    weft_status_t st;
    double t0;

    if (harness_reset_env("WEFT_LOG_LEVEL") != 0) {
        snprintf(me->stage, sizeof(me->stage), "harness_reset_env: %s", strerror(errno));
        _exit(6);
    }
    setenv("WEFT_SHM", job->shm, 1);
    setenv("WEFT_CHECK_ARGS", job->check_args, 1);
    setenv("WEFT_TIMEOUT", job->timeout, 1);
    if (rank == job->bad_ucx_rank) {
        setenv("UCX_TLS", "no_such_transport", 1);
    }
    snprintf(me->stage, sizeof(me->stage), "weft_init");
    if (weft_init() != WEFT_OK) {
        snprintf(me->stage, sizeof(me->stage), "weft_init: %s", weft_last_error());
        _exit(4);
    }
    if (rank == 0) {
        if (weft_get_unique_id(&sh->id) != WEFT_OK) {
            snprintf(me->stage, sizeof(me->stage), "weft_get_unique_id: %s", weft_last_error());
            _exit(5);
        }
        atomic_store(&sh->id_ready, 1);
    }
    while (!atomic_load(&sh->id_ready)) {
        usleep(1000);
    }
    id = sh->id;
    snprintf(me->stage, sizeof(me->stage), "weft_comm_init_rank");
    t0 = harness_now_s();
    st = weft_comm_init_rank(NRANKS, &id, rank, &comm);
    if (st != WEFT_OK) {
        record(me, st, t0); /* the scenario is that it fails */
        t0 = harness_now_s();
        weft_finalize();
        record(me, WEFT_OK, t0);
        me->finished = 1;
        return 0;
    }
    snprintf(me->stage, sizeof(me->stage), "scenario");
    job->scenario(comm, rank, me, job->arg);
    /* stay alive until every rank is through (a rank that exits is a
     * failed peer, which is not what these tests are about) */
    snprintf(me->stage, sizeof(me->stage), "waiting for the others");
    atomic_fetch_add(&sh->through, 1);
    for (double until = harness_now_s() + 20;
         atomic_load(&sh->through) < NRANKS && harness_now_s() < until;) {
        usleep(1000);
    }
    snprintf(me->stage, sizeof(me->stage), "weft_comm_destroy");
    weft_comm_destroy(comm);
    weft_finalize();
    me->finished = 1;
    return 0;
}

/* Run the job; returns the shared mapping once every child is gone. */
static shared_t *run(const job_t *job)
{
    shared_t *sh = harness_shared(sizeof(shared_t));
    run_ctx_t ctx = {.sh = sh, .job = job};
    harness_procs_t procs;

    cr_assert_not_null(sh, "mmap: %s", strerror(errno));
    cr_assert_eq(harness_fork(&procs, 0, NRANKS, child, &ctx), 0, "fork: %s", strerror(errno));
    harness_reap(&procs, harness_now_s() + 25.0);
    for (int r = 0; r < NRANKS; r++) {
        cr_assert(sh->slot[r].finished, "rank %d did not finish; it was in: %s", r,
                  sh->slot[r].stage);
    }
    return sh;
}

/* ---------------------------------------------------------------- scenarios */

/* A correct allreduce, the mismatched call (rank 3 differs), then two more
 * allreduces: the communicator must stay failed. */
static void mismatch_scenario(weft_comm_t comm, int rank, slot_t *me, int which)
{
    float in[COUNT_WIDE + 1], out[COUNT_WIDE + 1];
    double din[COUNT], dout[COUNT];
    int odd = rank == NRANKS - 1;
    double t0;
    weft_status_t st;

    float all[NRANKS * (COUNT + 1)];

    for (int i = 0; i < COUNT_WIDE + 1; i++) {
        in[i] = (float)(rank + 1);
    }
    /* the line cases: the agreeing shape first (not recorded), so that ranks 0-2 take the line
     * path (weft__shm_line_run) in the mismatched call */
    if (which == CASE_LINE_ALLGATHER) {
        weft_allgather(in, all, COUNT, WEFT_FLOAT32, comm);
    } else if (which == CASE_LINE_BCAST) {
        weft_bcast(in, COUNT, WEFT_FLOAT32, 0, comm);
    }
    t0 = harness_now_s();
    record(me, weft_allreduce(in, out, COUNT, WEFT_FLOAT32, WEFT_SUM, comm), t0);
    t0 = harness_now_s();
    switch ((case_t)which) {
    case CASE_COUNT:
        st = weft_allreduce(in, out, COUNT + odd, WEFT_FLOAT32, WEFT_SUM, comm);
        break;
    case CASE_COUNT_WIDE: /* the others in their wide lines, rank 3 in its slot */
        st = weft_allreduce(in, out, COUNT_WIDE + odd, WEFT_FLOAT32, WEFT_SUM, comm);
        break;
    case CASE_BCAST_WIDE: /* the root, rank 3, in its slot (it reads nobody's line); the others
                           * wait for its wide line */
        st = weft_bcast(in, COUNT_WIDE + odd, WEFT_FLOAT32, NRANKS - 1, comm);
        break;
    case CASE_DTYPE: /* same size: only a signature can tell */
        st = weft_allreduce(in, out, COUNT, odd ? WEFT_INT32 : WEFT_FLOAT32, WEFT_SUM, comm);
        break;
    case CASE_DTYPE_SIZE:
        for (int i = 0; i < COUNT; i++) {
            din[i] = rank + 1;
        }
        st = odd ? weft_allreduce(din, dout, COUNT, WEFT_FLOAT64, WEFT_SUM, comm)
                 : weft_allreduce(in, out, COUNT, WEFT_FLOAT32, WEFT_SUM, comm);
        break;
    case CASE_OP:
        st = weft_allreduce(in, out, COUNT, WEFT_FLOAT32, odd ? WEFT_MAX : WEFT_SUM, comm);
        break;
    case CASE_ROOT:
        st = weft_bcast(in, COUNT, WEFT_FLOAT32, odd ? 1 : 0, comm);
        break;
    case CASE_LINE_ALLGATHER: /* rank 3 in its wide line, the others in their control lines */
        st = weft_allgather(in, all, COUNT + odd, WEFT_FLOAT32, comm);
        break;
    case CASE_LINE_BCAST: /* the root and the ranks that agree with it complete; rank 3 waits for
                           * a wide line the root never writes */
        st = weft_bcast(in, COUNT + odd, WEFT_FLOAT32, 0, comm);
        break;
    default: /* CASE_KIND */
        st = odd ? weft_bcast(in, COUNT, WEFT_FLOAT32, 0, comm)
                 : weft_allreduce(in, out, COUNT, WEFT_FLOAT32, WEFT_SUM, comm);
        break;
    }
    record(me, st, t0);
    memcpy(me->out, out, sizeof(me->out));
    for (int k = 0; k < 2; k++) {
        t0 = harness_now_s();
        record(me, weft_allreduce(in, out, COUNT, WEFT_FLOAT32, WEFT_SUM, comm), t0);
    }
}

static const char *const case_text[] = {
    [CASE_COUNT] = "count differs: ranks 0-2 2, rank 3 3",
    [CASE_COUNT_WIDE] = "count differs: ranks 0-2 12, rank 3 13",
    [CASE_BCAST_WIDE] = "count differs: ranks 0-2 12, rank 3 13",
    [CASE_DTYPE] = "dtype differs: ranks 0-2 float32, rank 3 int32",
    [CASE_DTYPE_SIZE] = "dtype differs: ranks 0-2 float32, rank 3 float64",
    [CASE_OP] = "op differs: ranks 0-2 sum, rank 3 max",
    [CASE_ROOT] = "root differs: ranks 0-2 0, rank 3 1",
    [CASE_KIND] = "collective differs: ranks 0-2 allreduce, rank 3 bcast",
    [CASE_LINE_ALLGATHER] = "count differs: ranks 0-2 2, rank 3 3",
    [CASE_LINE_BCAST] = "count differs: ranks 0-2 2, rank 3 3",
};

static void dump(const shared_t *sh)
{
    for (int r = 0; r < NRANKS; r++) {
        for (int k = 0; k < sh->slot[r].ncalls; k++) {
            cr_log_info("rank %d call %d: %s (%.3f s) %s", r, k,
                        weft_status_string(sh->slot[r].st[k]), sh->slot[r].secs[k],
                        sh->slot[r].msg[k]);
        }
    }
}

/*
 * Every rank: call 0 succeeded; every call returned well before the
 * deadline; the mismatched call failed with WEFT_ERR_MISMATCH on every rank
 * (all_at_once) or at least on the differing rank, the others then failing
 * at their next call; every later call fails with the same status, named
 * as an earlier failure; `text` (when given) is in rank 3's message.
 */
static void expect_mismatch(const shared_t *sh, int all_at_once, const char *text)
{
    /* all_at_once 2: every rank but the differing one at once, which learns it at its next call
     * (and the text is in rank 0's message) */
    const int first = all_at_once == 2 ? 0 : NRANKS - 1;

    dump(sh);
    for (int r = 0; r < NRANKS; r++) {
        const slot_t *s = &sh->slot[r];

        cr_assert_eq(s->ncalls, CALLS, "rank %d made %d calls", r, s->ncalls);
        cr_assert_eq(s->st[0], WEFT_OK, "rank %d call 0: %s", r, s->msg[0]);
        for (int k = 0; k < CALLS; k++) {
            cr_assert_lt(s->secs[k], FAST_S, "rank %d call %d took %.1f s: %s", r, k, s->secs[k],
                         s->msg[k]);
        }
        if (all_at_once == 1 || (all_at_once == 2) == (r != NRANKS - 1)) {
            cr_assert_eq(s->st[1], WEFT_ERR_MISMATCH, "rank %d call 1: %s: %s", r,
                         weft_status_string(s->st[1]), s->msg[1]);
        } else {
            cr_assert(s->st[1] == WEFT_OK || s->st[1] == WEFT_ERR_MISMATCH,
                      "rank %d call 1: %s: %s", r, weft_status_string(s->st[1]), s->msg[1]);
        }
        cr_assert_eq(s->st[2], WEFT_ERR_MISMATCH, "rank %d call 2: %s: %s", r,
                     weft_status_string(s->st[2]), s->msg[2]);
        cr_assert_eq(s->st[3], WEFT_ERR_MISMATCH, "rank %d call 3: %s", r, s->msg[3]);
        cr_assert_not_null(strstr(s->msg[3], "communicator failed earlier: "), "rank %d call 3: %s",
                           r, s->msg[3]);
        if (s->st[1] == WEFT_ERR_MISMATCH) {
            /* the same failure: call 1 reported it first hand (call 3
             * repeats it) or passed on the original (call 3 names that) */
            char head1[64], head3[64];

            snprintf(head1, sizeof(head1), "%s", strstr(s->msg[1], ": ") + 2);
            snprintf(head3, sizeof(head3), "%s", strstr(s->msg[3], "earlier: ") + 9);
            cr_assert(strstr(s->msg[3], head1) != NULL || strstr(s->msg[1], head3) != NULL,
                      "rank %d: call 3 (%s) does not name call 1's failure (%s)", r, s->msg[3],
                      s->msg[1]);
        }
    }
    if (text != NULL) {
        cr_assert_not_null(strstr(sh->slot[first].msg[1], text), "rank %d: \"%s\" lacks \"%s\"",
                           first, sh->slot[first].msg[1], text);
    }
}

static void run_case(const char *shm, const char *check, case_t c, int all_at_once,
                     const char *text)
{
    job_t job = {.shm = shm,
                 .check_args = check,
                 .timeout = "30",
                 .bad_ucx_rank = -1,
                 .scenario = mismatch_scenario,
                 .arg = (int)c};

    expect_mismatch(run(&job), all_at_once, text);
}

TestSuite(mismatch, .timeout = 60);

/* Shared memory, default checks: the signature in the control line. */
Test(mismatch, shm_count)
{
    run_case("yes", "no", CASE_COUNT, 1, case_text[CASE_COUNT]);
}
Test(mismatch, shm_count_wide)
{
    run_case("yes", "no", CASE_COUNT_WIDE, 1, case_text[CASE_COUNT_WIDE]);
}
/* the readers of a wide line find that its writer took another form */
Test(mismatch, shm_bcast_wide)
{
    run_case("yes", "no", CASE_BCAST_WIDE, 2, case_text[CASE_BCAST_WIDE]);
}
Test(mismatch, shm_dtype)
{
    run_case("yes", "no", CASE_DTYPE, 1, case_text[CASE_DTYPE]);
}
Test(mismatch, shm_op)
{
    run_case("yes", "no", CASE_OP, 1, case_text[CASE_OP]);
}
Test(mismatch, shm_kind)
{
    run_case("yes", "no", CASE_KIND, 1, case_text[CASE_KIND]);
}
/* bcast's root reads nobody's line: the ranks whose part completed learn it
 * from the failure notice at their next call */
Test(mismatch, shm_root)
{
    run_case("yes", "no", CASE_ROOT, 0, case_text[CASE_ROOT]);
}
/* the line paths (weft__shm_line_run) of ranks 0-2 meet rank 3's full path */
Test(mismatch, shm_line_allgather)
{
    run_case("yes", "no", CASE_LINE_ALLGATHER, 1, case_text[CASE_LINE_ALLGATHER]);
}
Test(mismatch, shm_line_bcast)
{
    run_case("yes", "no", CASE_LINE_BCAST, 0, case_text[CASE_LINE_BCAST]);
}

/* Point-to-point, default checks: message sizes only (a rank that finds a
 * size difference fails, the failure notice fails the others). */
Test(mismatch, p2p_count)
{
    run_case("no", "no", CASE_COUNT, 0, NULL);
}
Test(mismatch, p2p_dtype_size)
{
    run_case("no", "no", CASE_DTYPE_SIZE, 0, NULL);
}

/* WEFT_CHECK_ARGS=1: every case, every rank at once, the same message. */
Test(mismatch, checked_p2p_count)
{
    run_case("no", "yes", CASE_COUNT, 1, case_text[CASE_COUNT]);
}
Test(mismatch, checked_p2p_dtype)
{
    run_case("no", "yes", CASE_DTYPE, 1, case_text[CASE_DTYPE]);
}
Test(mismatch, checked_p2p_op)
{
    run_case("no", "yes", CASE_OP, 1, case_text[CASE_OP]);
}
Test(mismatch, checked_p2p_root)
{
    run_case("no", "yes", CASE_ROOT, 1, case_text[CASE_ROOT]);
}
Test(mismatch, checked_p2p_kind)
{
    run_case("no", "yes", CASE_KIND, 1, case_text[CASE_KIND]);
}
Test(mismatch, checked_shm_root)
{
    run_case("yes", "yes", CASE_ROOT, 1, case_text[CASE_ROOT]);
}
Test(mismatch, checked_shm_op)
{
    run_case("yes", "yes", CASE_OP, 1, case_text[CASE_OP]);
}

/* --------------------------------------------------------- sticky failures */

/* The flight recorder's lines, through a memory stream. */
static void dump_recorder(weft_comm_t comm, slot_t *me)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL) {
        snprintf(me->dump, sizeof(me->dump), "open_memstream failed");
        return;
    }
    if (weft_comm_dump(comm, f) != WEFT_OK) {
        fprintf(f, "weft_comm_dump: %s", weft_last_error());
    }
    fclose(f);
    /* the last lines: the scenario's calls */
    snprintf(me->dump, sizeof(me->dump), "%s",
             len >= sizeof(me->dump) ? text + len - (sizeof(me->dump) - 1) : text);
    free(text);
}

/* The recorder's line of the scenario's first allreduce (seq `seq`) says it
 * was done, and the line of the call that timed out says why. */
static void expect_recorded(const slot_t *s, int r)
{
    char want[64];
    const char *line;

    cr_assert_null(strstr(s->dump, "weft_comm_dump:"), "rank %d: %s", r, s->dump);
    line = strstr(s->dump, "allreduce (");
    cr_assert_not_null(line, "rank %d: no allreduce in the recorder: %s", r, s->dump);
    cr_assert_not_null(strstr(s->dump, " count 2 float32 sum start "), "rank %d: %s", r, s->dump);
    cr_assert_not_null(strstr(s->dump, " done in "), "rank %d: %s", r, s->dump);
    if (s->st[1] != WEFT_OK) {
        snprintf(want, sizeof(want), "failed after ");
        cr_assert_not_null(strstr(s->dump, want), "rank %d: no failed operation: %s", r, s->dump);
        cr_assert_not_null(strstr(s->dump, "timed out"), "rank %d: %s", r, s->dump);
    }
    snprintf(want, sizeof(want), "weft record rank %d: seq ", r);
    cr_assert_not_null(strstr(s->dump, want), "rank %d: %s", r, s->dump);
}

/* Rank 3 comes late to call 1 (after the others' 2 s deadline): they time
 * out. Rank 3 either completes call 1 with what the others had sent or
 * published before giving up (the right result), or fails it at once from
 * the failure notice; it never waits for its own deadline, and every later
 * call of every rank returns the timeout again. */
static void late_scenario(weft_comm_t comm, int rank, slot_t *me, int unused)
{
    float in[COUNT], out[COUNT];
    double t0;

    (void)unused;
    for (int i = 0; i < COUNT; i++) {
        in[i] = (float)(rank + 1);
    }
    for (int k = 0; k < CALLS; k++) {
        if (k == 1 && rank == NRANKS - 1) {
            usleep(3000000);
        }
        t0 = harness_now_s();
        record(me, weft_allreduce(in, out, COUNT, WEFT_FLOAT32, WEFT_SUM, comm), t0);
        if (k <= 1) {
            memcpy(me->out + k * COUNT, out, sizeof(out));
        }
    }
    dump_recorder(comm, me);
}

static void expect_timeout_sticks(const shared_t *sh)
{
    dump(sh);
    for (int r = 0; r < NRANKS; r++) {
        const slot_t *s = &sh->slot[r];

        cr_assert_eq(s->ncalls, CALLS, "rank %d made %d calls", r, s->ncalls);
        cr_assert_eq(s->st[0], WEFT_OK, "rank %d call 0: %s", r, s->msg[0]);
        for (int i = 0; i < COUNT; i++) {
            cr_assert_eq(s->out[i], 10.0f, "rank %d call 0 element %d: %g", r, i, s->out[i]);
        }
        if (r < NRANKS - 1) {
            cr_assert_eq(s->st[1], WEFT_ERR_TIMEOUT, "rank %d call 1: %s", r, s->msg[1]);
            cr_assert(s->secs[1] > 1.9 && s->secs[1] < FAST_S, "rank %d timed out after %.2f s", r,
                      s->secs[1]);
            cr_assert_not_null(strstr(s->msg[1], "timed out after"), "rank %d: %s", r, s->msg[1]);
        } else if (s->st[1] == WEFT_OK) {
            /* the others' parts of call 1 were all there (sent, or
             * published in shared memory) before they gave up */
            for (int i = 0; i < COUNT; i++) {
                cr_assert_eq(s->out[COUNT + i], 10.0f, "rank 3 call 1 element %d: %g", i,
                             s->out[COUNT + i]);
            }
        } else {
            cr_assert_eq(s->st[1], WEFT_ERR_TIMEOUT, "rank 3 call 1: %s", s->msg[1]);
            cr_assert_lt(s->secs[1], 1.5, "rank 3 waited %.2f s for what the others knew",
                         s->secs[1]);
            cr_assert_not_null(strstr(s->msg[1], "reported"), "rank 3: %s", s->msg[1]);
        }
        for (int k = 2; k < CALLS; k++) {
            cr_assert_eq(s->st[k], WEFT_ERR_TIMEOUT, "rank %d call %d: %s: %s", r, k,
                         weft_status_string(s->st[k]), s->msg[k]);
            cr_assert_lt(s->secs[k], 1.0, "rank %d call %d took %.2f s", r, k, s->secs[k]);
            cr_assert_not_null(strstr(s->msg[k], "timed out after"), "rank %d call %d: %s", r, k,
                               s->msg[k]);
        }
        cr_assert_not_null(strstr(s->msg[CALLS - 1], "communicator failed earlier: "),
                           "rank %d: %s", r, s->msg[CALLS - 1]);
        expect_recorded(s, r);
    }
}

TestSuite(sticky, .timeout = 60);

Test(sticky, timeout_shm)
{
    job_t job = {.shm = "yes",
                 .check_args = "no",
                 .timeout = "2",
                 .bad_ucx_rank = -1,
                 .scenario = late_scenario};

    expect_timeout_sticks(run(&job));
}

Test(sticky, timeout_p2p)
{
    job_t job = {.shm = "no",
                 .check_args = "no",
                 .timeout = "2",
                 .bad_ucx_rank = -1,
                 .scenario = late_scenario};

    expect_timeout_sticks(run(&job));
}

/* ------------------------------------------------ failed communicator setup */

/* Rank 0 (which hosts the TCP bootstrap root) cannot start UCX: it tells the
 * root, which aborts the job; every rank fails at once, and rank 0 does not
 * wait WEFT_TCP_LINGER_S (30 s) for the others before it returns. */
Test(sticky, init_failure_on_rank_0_is_fast)
{
    job_t job = {.shm = "yes",
                 .check_args = "no",
                 .timeout = "30",
                 .bad_ucx_rank = 0,
                 .scenario = late_scenario};
    const shared_t *sh = run(&job);

    dump(sh);
    for (int r = 0; r < NRANKS; r++) {
        const slot_t *s = &sh->slot[r];

        cr_assert_eq(s->ncalls, 2, "rank %d: %d records (its init succeeded?)", r, s->ncalls);
        cr_assert_neq(s->st[0], WEFT_OK, "rank %d: weft_comm_init_rank succeeded", r);
        cr_assert_lt(s->secs[0], FAST_S, "rank %d: weft_comm_init_rank took %.1f s", r, s->secs[0]);
        cr_assert_lt(s->secs[1], FAST_S, "rank %d: weft_finalize took %.1f s", r, s->secs[1]);
        if (r != 0) {
            cr_assert_not_null(strstr(s->msg[0], "rank 0"), "rank %d: %s", r, s->msg[0]);
            cr_assert_not_null(strstr(s->msg[0], "gave up"), "rank %d: %s", r, s->msg[0]);
        }
    }
}

/* ------------------------------------------------------- message wording */

static weft_coll_sig_t sig_of(weft_coll_kind_t kind, size_t count, weft_dtype_t dt, weft_op_t op,
                              int root)
{
    weft_coll_args_t a = {.kind = kind, .count = count, .dtype = dt, .op = op, .root = root};
    weft_coll_sig_t s;

    weft__sig_make(&s, &a, WEFT_MEM_HOST);
    return s;
}

/* Groups in the order of their first rank, runs of ranks collapsed, ranks
 * that did not publish (kind 0) left out; the first differing field wins. */
Test(sig, describe_names_field_and_ranks)
{
    weft_coll_sig_t s[7];
    int ranks[7] = {0, 1, 2, 3, 4, 5, 6};
    char buf[256];

    for (int i = 0; i < 7; i++) {
        s[i] = sig_of(WEFT_COLL_ALLREDUCE, 10, WEFT_FLOAT32, WEFT_SUM, 0);
    }
    cr_assert_eq(weft__sig_describe(buf, sizeof(buf), s, ranks, 7), 0, "%s", buf);
    s[3] = sig_of(WEFT_COLL_ALLREDUCE, 10, WEFT_FLOAT32, WEFT_MAX, 0);
    s[6] = s[3];
    weft__sig_describe(buf, sizeof(buf), s, ranks, 7);
    cr_assert_str_eq(buf, "op differs: ranks 0-2,4-5 sum, ranks 3,6 max");
    s[5].kind = 0; /* not published */
    s[1] = sig_of(WEFT_COLL_ALLREDUCE, 11, WEFT_INT32, WEFT_MAX, 0);
    weft__sig_describe(buf, sizeof(buf), s, ranks, 7);
    cr_assert_str_eq(buf, "count differs: ranks 0,2-4,6 10, rank 1 11");
    /* the root of an allreduce means nothing; of a bcast it does */
    cr_assert(weft__sig_equal(&(weft_coll_sig_t){0}, &(weft_coll_sig_t){0}));
    s[0] = sig_of(WEFT_COLL_ALLREDUCE, 10, WEFT_FLOAT32, WEFT_SUM, 0);
    s[1] = sig_of(WEFT_COLL_ALLREDUCE, 10, WEFT_FLOAT32, WEFT_SUM, 2);
    cr_assert(weft__sig_equal(&s[0], &s[1]));
    cr_assert_eq(weft__sig_hash(&s[0]), weft__sig_hash(&s[1]));
    s[0] = sig_of(WEFT_COLL_BCAST, 10, WEFT_FLOAT32, WEFT_SUM, 0);
    s[1] = sig_of(WEFT_COLL_BCAST, 10, WEFT_FLOAT32, WEFT_MAX, 2);
    weft__sig_describe(buf, sizeof(buf), s, ranks, 2);
    cr_assert_str_eq(buf, "root differs: rank 0 0, rank 1 2");
    cr_assert_neq(weft__sig_hash(&s[0]), weft__sig_hash(&s[1]));
    /* host buffers on one rank, device buffers on another */
    s[0] = sig_of(WEFT_COLL_ALLREDUCE, 10, WEFT_FLOAT32, WEFT_SUM, 0);
    s[1] = s[0];
    s[1].mem = WEFT_MEM_EMU;
    cr_assert_not(weft__sig_equal(&s[0], &s[1]));
    cr_assert_neq(weft__sig_hash(&s[0]), weft__sig_hash(&s[1]));
    weft__sig_describe(buf, sizeof(buf), s, ranks, 2);
    cr_assert_str_eq(buf, "memory type differs: rank 0 host, rank 1 emu");
}
