/*
 * The schedule engine (coll/sched.c, coll/sched_engine.c) on in-process
 * worlds: dependency order, cross-rank send/recv, reduce tasks, empty and failed schedules,
 * timeouts with their diagnosis, and size mismatches.
 *
 * Schedules are built by hand in rank threads; Criterion asserts only work
 * on the main thread, so rank threads record what they saw in shared state
 * that the test checks after weft__thread_world_run returns.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "coll/sched.h"
#include "runtime/thread_world.h"
#include "tests/harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void setup(void)
{
    cr_assert_eq(harness_reset_env(NULL), 0, "cannot list the configuration registry");
    setenv("WEFT_TIMEOUT", "10", 1); /* a broken schedule fails the test instead of hanging */
}

static void setup_short_timeout(void)
{
    setup();
    setenv("WEFT_TIMEOUT", "0.3", 1);
    cr_redirect_stderr(); /* the timeout log lines are expected */
}

static void run_world(int nranks, uint64_t seed, uint64_t max_delay_ns, weft_thread_rank_fn fn,
                      void *arg)
{
    weft_thread_world_opts_t opts = {.nranks = nranks, .seed = seed, .max_delay_ns = max_delay_ns};

    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft__thread_world_run(&opts, fn, arg), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_finalize(), WEFT_OK);
    HARNESS_ASSERT_NO_FAILURES();
}

static weft_sched_t *make(weft_comm_t comm, const char *coll, weft_dtype_t dtype, weft_op_t op)
{
    weft_op_desc_t desc = {.coll = coll, .algo = "handmade", .count = 0, .dtype = dtype, .op = op};
    weft_sched_t *s = NULL;
    weft_status_t st = weft__sched_create(weft__comm_of(comm), &desc, &weft__device_host_ops, &s);

    EXPECT(st == WEFT_OK && s != NULL, "sched_create: %s", weft_last_error());
    return s;
}

/* --------------------------------------------------------- dependencies */

/*
 * Diamond:      top
 *              /    \
 *           left    right
 *              \    /
 *               nop
 *              /    \
 *          out_l    out_r
 * Data flows along the edges (each copy reads what its predecessor wrote), so
 * a task run too early copies a stale zero. Tasks are built bottom-up so
 * build order is the reverse of dependency order.
 */
static void rank_diamond(weft_comm_t comm, int rank, void *arg)
{
    unsigned char src[4] = {0xa1, 0xb2, 0xc3, (unsigned char)rank};
    unsigned char a[4] = {0}, b[4] = {0}, c[4] = {0}, d[4] = {0}, e[4] = {0};
    weft_sched_t *s = make(comm, "diamond", WEFT_UINT8, WEFT_SUM);
    int out_l, out_r, nop, left, right, top;
    weft_status_t st;

    (void)arg;
    if (s == NULL) {
        return;
    }
    out_l = weft__sched_copy(s, d, b, 4);
    out_r = weft__sched_copy(s, e, c, 4);
    nop = weft__sched_nop(s);
    left = weft__sched_copy(s, b, a, 4);
    right = weft__sched_copy(s, c, a, 4);
    top = weft__sched_copy(s, a, src, 4);
    EXPECT(out_l == 0 && out_r == 1 && nop == 2 && left == 3 && right == 4 && top == 5,
           "task indices %d %d %d %d %d %d", out_l, out_r, nop, left, right, top);
    weft__sched_dep(s, top, left);
    weft__sched_dep(s, top, right);
    weft__sched_dep(s, left, nop);
    weft__sched_dep(s, right, nop);
    weft__sched_dep(s, nop, out_l);
    weft__sched_dep(s, nop, out_r);
    EXPECT(weft__sched_num_tasks(s) == 6, "num_tasks %zu", weft__sched_num_tasks(s));
    st = weft__sched_run(s);
    EXPECT(st == WEFT_OK, "rank %d: run %d: %s", rank, st, weft_last_error());
    EXPECT(memcmp(d, src, 4) == 0, "rank %d: left branch out of order: %02x %02x %02x %02x", rank,
           d[0], d[1], d[2], d[3]);
    EXPECT(memcmp(e, src, 4) == 0, "rank %d: right branch out of order: %02x %02x %02x %02x", rank,
           e[0], e[1], e[2], e[3]);
    weft__sched_destroy(s);
}

Test(sched, diamond_in_dependency_order, .init = setup)
{
    run_world(3, 5, 0, rank_diamond, NULL);
}

/* A chain of copies built in shuffled order: cell[i+1] = cell[i] only after
 * cell[i] was written, so the value reaches the end only in order. */
static void rank_shuffled_chain(weft_comm_t comm, int rank, void *arg)
{
    enum { N = 200 };
    uint64_t cells[N + 1];
    int order[N], id_of[N];
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    weft_sched_t *s = make(comm, "chain", WEFT_UINT64, WEFT_SUM);
    weft_status_t st;

    (void)arg;
    if (s == NULL) {
        return;
    }
    for (int i = 0; i < N; i++) {
        order[i] = i;
    }
    for (int i = N - 1; i > 0; i--) {
        int j;
        int t;

        harness_xorshift(&x);
        j = (int)(x % (uint64_t)(i + 1));
        t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    memset(cells, 0, sizeof(cells));
    cells[0] = 0x0123456789abcdefull + (uint64_t)rank;
    for (int i = 0; i < N; i++) {
        int k = order[i];

        id_of[k] = weft__sched_copy(s, &cells[k + 1], &cells[k], sizeof(uint64_t));
    }
    for (int k = 0; k + 1 < N; k++) {
        weft__sched_dep(s, id_of[k], id_of[k + 1]);
    }
    st = weft__sched_run(s);
    EXPECT(st == WEFT_OK, "run: %s", weft_last_error());
    for (int k = 0; k <= N; k++) {
        EXPECT(cells[k] == cells[0], "rank %d: cell %d = %#llx (a copy ran before its input)", rank,
               k, (unsigned long long)cells[k]);
    }
    weft__sched_destroy(s);
}

Test(sched, shuffled_chain, .init = setup)
{
    run_world(2, 1, 0, rank_shuffled_chain, NULL);
}

/* --------------------------------------------------------- send / recv */

#define RING_RANKS 8
#define LAPS 3

/* A token goes round the ring LAPS times; each rank writes its byte into it
 * (recv -> copy -> send). Rank 0 starts each lap and receives it back. */
static void rank_token_ring(weft_comm_t comm, int rank, void *arg)
{
    const int p = RING_RANKS;
    unsigned char tok[LAPS][RING_RANKS * LAPS];
    unsigned char mark[LAPS];
    weft_sched_t *s = make(comm, "token_ring", WEFT_UINT8, WEFT_SUM);
    int prev = -1;
    weft_status_t st;

    (void)arg;
    if (s == NULL) {
        return;
    }
    memset(tok, 0, sizeof(tok));
    for (int lap = 0; lap < LAPS; lap++) {
        int recv, copy, send;

        mark[lap] = (unsigned char)(0x10 * lap + rank + 1);
        weft__sched_step(s, "lap", lap);
        if (rank == 0) {
            /* start from the previous lap's token */
            int init = lap == 0 ? weft__sched_nop(s)
                                : weft__sched_copy(s, tok[lap], tok[lap - 1], sizeof(tok[0]));

            weft__sched_dep(s, prev, init);
            copy = weft__sched_copy(s, &tok[lap][lap * p + rank], &mark[lap], 1);
            send = weft__sched_send(s, 1, (uint32_t)lap, tok[lap], sizeof(tok[0]));
            /* the final token of this lap comes back into the same buffer row */
            recv = weft__sched_recv(s, p - 1, (uint32_t)lap + 100, tok[lap], sizeof(tok[0]));
            weft__sched_dep(s, init, copy);
            weft__sched_dep(s, copy, send);
            weft__sched_dep(s, send, recv);
            prev = recv;
        } else {
            recv = weft__sched_recv(s, rank - 1, (uint32_t)lap, tok[lap], sizeof(tok[0]));
            copy = weft__sched_copy(s, &tok[lap][lap * p + rank], &mark[lap], 1);
            send = weft__sched_send(s, (rank + 1) % p, (uint32_t)lap + (rank == p - 1 ? 100 : 0),
                                    tok[lap], sizeof(tok[0]));
            weft__sched_dep(s, recv, copy);
            weft__sched_dep(s, copy, send);
        }
    }
    st = weft__sched_run(s);
    EXPECT(st == WEFT_OK, "rank %d: run: %s", rank, weft_last_error());
    for (int lap = 0; lap < LAPS; lap++) {
        /* rank r saw the bytes of laps < lap (all ranks) and of this lap up
         * to itself; rank 0's row holds the full token */
        for (int l = 0; l <= lap; l++) {
            for (int q = 0; q < p; q++) {
                unsigned char want = (unsigned char)(0x10 * l + q + 1);
                int known = l < lap || q <= rank || rank == 0;

                if (known && tok[lap][l * p + q] != want) {
                    harness_fail(__LINE__,
                                 "rank %d lap %d: byte of rank %d lap %d is %#x, "
                                 "expected %#x",
                                 rank, lap, q, l, tok[lap][l * p + q], want);
                }
            }
        }
        for (int l = lap + 1; l < LAPS; l++) {
            for (int q = 0; q < p; q++) {
                EXPECT(tok[lap][l * p + q] == 0, "rank %d lap %d: future byte set", rank, lap);
            }
        }
    }
    weft__sched_destroy(s);
}

Test(sched, token_ring_fifo, .init = setup)
{
    run_world(RING_RANKS, 0, 0, rank_token_ring, NULL);
}

Test(sched, token_ring_random_order_and_delays, .init = setup)
{
    for (uint64_t seed = 1; seed <= 5; seed++) {
        run_world(RING_RANKS, seed, seed % 2 ? 200000 : 0, rank_token_ring, NULL);
    }
}

/* A receive waits for its dependency even when the message is already there:
 * rank 1 must save the old contents of buf before the receive overwrites it. */
static void rank_recv_after_dep(weft_comm_t comm, int rank, void *arg)
{
    uint64_t buf = 0x1111, saved = 0, fresh = 0x2222;
    weft_sched_t *s;
    weft_status_t st;

    (void)arg;
    if (rank == 0) {
        s = make(comm, "recv_dep", WEFT_UINT64, WEFT_SUM);
        weft__sched_send(s, 1, 9, &fresh, sizeof(fresh));
        st = weft__sched_run(s);
        EXPECT(st == WEFT_OK, "rank 0: %s", weft_last_error());
        weft__sched_destroy(s);
    }
    /* the message is in rank 1's mailbox before its schedule exists */
    st = weft__comm_of(comm)->boot->barrier(weft__comm_of(comm)->boot_ctx, weft__time_ns() + 5000000000ull);
    EXPECT(st == WEFT_OK, "barrier: %s", weft_last_error());
    if (rank == 1) {
        int recv, copy;

        weft__comm_of(comm)->p2p->progress(weft__comm_of(comm)->p2p_ep); /* land it as unexpected */
        s = make(comm, "recv_dep", WEFT_UINT64, WEFT_SUM);
        recv = weft__sched_recv(s, 0, 9, &buf, sizeof(buf)); /* built first */
        copy = weft__sched_copy(s, &saved, &buf, sizeof(buf));
        weft__sched_dep(s, copy, recv);
        st = weft__sched_run(s);
        EXPECT(st == WEFT_OK, "rank 1: %s", weft_last_error());
        EXPECT(saved == 0x1111, "copy saw %#llx: the receive ran before its dependency",
               (unsigned long long)saved);
        EXPECT(buf == 0x2222, "received %#llx", (unsigned long long)buf);
        weft__sched_destroy(s);
    }
}

Test(sched, recv_waits_for_dependency, .init = setup)
{
    run_world(2, 3, 0, rank_recv_after_dep, NULL);
}

/* ---------------------------------------------------------------- reduce */

static void rank_reduce(weft_comm_t comm, int rank, void *arg)
{
    enum { N = 33 };
    int64_t mine[N], theirs[N], out[N], acc[N];
    double dv[3][5], dout[5];
    int peer = rank ^ 1;
    weft_sched_t *s;
    weft_status_t st;
    int send, recv, red, red2;
    const void *srcs2[2];
    const void *srcs3[3];

    (void)arg;
    for (int i = 0; i < N; i++) {
        mine[i] = (int64_t)(rank + 2) * (i - 16);
        out[i] = -1;
        acc[i] = 3;
    }
    /* PROD over int64 with the peer's vector, then in place into acc */
    s = make(comm, "reduce_test", WEFT_INT64, WEFT_PROD);
    send = weft__sched_send(s, peer, 1, mine, sizeof(mine));
    recv = weft__sched_recv(s, peer, 1, theirs, sizeof(theirs));
    srcs2[0] = mine;
    srcs2[1] = theirs;
    red = weft__sched_reduce(s, out, srcs2, 2, N);
    srcs2[0] = acc;
    srcs2[1] = out;
    red2 = weft__sched_reduce(s, acc, srcs2, 2, N); /* dst aliases an input */
    weft__sched_dep(s, recv, red);
    weft__sched_dep(s, red, red2);
    (void)send;
    st = weft__sched_run(s);
    EXPECT(st == WEFT_OK, "rank %d: %s", rank, weft_last_error());
    for (int i = 0; i < N; i++) {
        int64_t want = (int64_t)2 * 3 * (i - 16) * (i - 16);

        EXPECT(out[i] == want, "rank %d prod [%d] = %lld, expected %lld", rank, i,
               (long long)out[i], (long long)want);
        EXPECT(acc[i] == 3 * want, "rank %d in-place prod [%d] = %lld", rank, i, (long long)acc[i]);
    }
    weft__sched_destroy(s);

    /* MAX over three float64 inputs, local only */
    for (int i = 0; i < 5; i++) {
        dv[0][i] = i * 1.5;
        dv[1][i] = 4.0 - i;
        dv[2][i] = rank ? -1e9 : 2.25;
        dout[i] = 0;
    }
    s = make(comm, "reduce_test", WEFT_FLOAT64, WEFT_MAX);
    srcs3[0] = dv[0];
    srcs3[1] = dv[1];
    srcs3[2] = dv[2];
    red = weft__sched_reduce(s, dout, srcs3, 3, 5);
    EXPECT(red == 0, "index %d", red);
    st = weft__sched_run(s);
    EXPECT(st == WEFT_OK, "%s", weft_last_error());
    for (int i = 0; i < 5; i++) {
        double want = dv[0][i] > dv[1][i] ? dv[0][i] : dv[1][i];

        want = want > dv[2][i] ? want : dv[2][i];
        EXPECT(dout[i] == want, "rank %d max [%d] = %g, expected %g", rank, i, dout[i], want);
    }
    weft__sched_destroy(s);
}

Test(sched, reduce_uses_schedule_dtype_and_op, .init = setup)
{
    run_world(2, 9, 0, rank_reduce, NULL);
}

static void rank_reduce_inputs(weft_comm_t comm, int rank, void *arg)
{
    int32_t in[WEFT_SCHED_MAX_REDUCE_INPUTS + 1][4], out[4] = {0};
    const void *srcs[WEFT_SCHED_MAX_REDUCE_INPUTS + 1];
    weft_sched_t *s;
    int id;

    (void)arg;
    (void)rank;
    for (int k = 0; k <= WEFT_SCHED_MAX_REDUCE_INPUTS; k++) {
        for (int i = 0; i < 4; i++) {
            in[k][i] = (k + 1) * (i + 1);
        }
        srcs[k] = in[k];
    }
    /* the maximum number of inputs works */
    s = make(comm, "reduce_inputs", WEFT_INT32, WEFT_SUM);
    id = weft__sched_reduce(s, out, srcs, WEFT_SCHED_MAX_REDUCE_INPUTS, 4);
    EXPECT(id == 0, "index %d", id);
    EXPECT(weft__sched_run(s) == WEFT_OK, "%s", weft_last_error());
    for (int i = 0; i < 4; i++) {
        int m = WEFT_SCHED_MAX_REDUCE_INPUTS;

        EXPECT(out[i] == m * (m + 1) / 2 * (i + 1), "sum of %d inputs [%d] = %d", m, i, out[i]);
    }
    weft__sched_destroy(s);
    /* one more, or none, fails the schedule */
    for (int bad = 0; bad < 2; bad++) {
        int n = bad ? 0 : WEFT_SCHED_MAX_REDUCE_INPUTS + 1;

        s = make(comm, "reduce_inputs", WEFT_INT32, WEFT_SUM);
        id = weft__sched_reduce(s, out, srcs, n, 4);
        EXPECT(id == -1, "reduce with %d inputs accepted as task %d", n, id);
        EXPECT(weft__sched_start(s) < 0, "schedule with a bad reduce started");
        weft__sched_destroy(s);
    }
}

Test(sched, reduce_input_limits, .init = setup)
{
    run_world(1, 0, 0, rank_reduce_inputs, NULL);
}

/* -------------------------------------------------- empty, scratch, seq */

static void rank_empty(weft_comm_t comm, int rank, void *arg)
{
    uint32_t seq0 = weft__comm_of(comm)->seq;
    weft_sched_t *s = make(comm, "empty", WEFT_INT32, WEFT_SUM);
    uint64_t t0;
    int done = 0;
    weft_status_t st;

    (void)arg;
    EXPECT(weft__comm_of(comm)->seq == seq0 + 1, "rank %d: create took %u sequence numbers", rank,
           weft__comm_of(comm)->seq - seq0);
    EXPECT(weft__sched_num_tasks(s) == 0, "tasks %zu", weft__sched_num_tasks(s));
    EXPECT(weft__sched_start(s) == WEFT_OK, "start: %s", weft_last_error());
    st = weft__sched_progress(s, &done);
    EXPECT(st == WEFT_OK && done == 1, "empty schedule: progress %d done %d", st, done);
    /* progress after completion is harmless */
    done = 0;
    st = weft__sched_progress(s, &done);
    EXPECT(st == WEFT_OK && done == 1, "second progress %d done %d", st, done);
    weft__sched_destroy(s);

    s = make(comm, "empty", WEFT_INT32, WEFT_SUM);
    t0 = weft__time_ns();
    st = weft__sched_run(s);
    EXPECT(st == WEFT_OK, "run: %s", weft_last_error());
    EXPECT(weft__time_ns() - t0 < 100000000ull, "empty run took %llu ns",
           (unsigned long long)(weft__time_ns() - t0));
    weft__sched_destroy(s);
    weft__sched_destroy(NULL);
}

Test(sched, empty_completes_at_once, .init = setup)
{
    run_world(2, 0, 0, rank_empty, NULL);
}

/* Scratch memory is usable (and aligned) by the schedule's own tasks. */
static void rank_scratch(weft_comm_t comm, int rank, void *arg)
{
    weft_sched_t *s = make(comm, "scratch", WEFT_UINT8, WEFT_SUM);
    char msg[] = "scratch lives as long as the schedule";
    char back[sizeof(msg)] = {0};
    char *tmp = weft__sched_scratch(s, sizeof(msg));
    double *aligned = weft__sched_scratch(s, 3 * sizeof(double));
    int a, b;

    (void)arg;
    (void)rank;
    EXPECT(tmp != NULL && aligned != NULL, "scratch is NULL");
    EXPECT(((uintptr_t)aligned % _Alignof(max_align_t)) == 0, "scratch not aligned");
    if (tmp == NULL) {
        weft__sched_destroy(s);
        return;
    }
    a = weft__sched_copy(s, tmp, msg, sizeof(msg));
    b = weft__sched_copy(s, back, tmp, sizeof(msg));
    weft__sched_dep(s, a, b);
    EXPECT(weft__sched_run(s) == WEFT_OK, "%s", weft_last_error());
    EXPECT(strcmp(back, msg) == 0, "got '%s'", back);
    weft__sched_destroy(s);
}

Test(sched, scratch_memory, .init = setup)
{
    run_world(1, 0, 0, rank_scratch, NULL);
}

/* ------------------------------------------------------- sticky failure */

static void rank_sticky(weft_comm_t comm, int rank, void *arg)
{
    int32_t a = 1, b = 2;
    const void *srcs[1] = {&a};
    weft_sched_t *s = make(comm, "sticky", WEFT_INT32, WEFT_SUM);
    int early, id;
    int done = 0;
    weft_status_t st;

    (void)arg;
    early = weft__sched_copy(s, &b, &a, sizeof(a)); /* built before the failure */
    EXPECT(early == 0, "index %d", early);
    EXPECT(weft__sched_fail(s, WEFT_ERR_DEVICE) == WEFT_ERR_DEVICE, "fail returns its status");
    /* later failures do not replace the first */
    EXPECT(weft__sched_fail(s, WEFT_ERR_NO_MEMORY) == WEFT_ERR_NO_MEMORY,
           "fail returns its status");
    EXPECT((id = weft__sched_copy(s, &b, &a, 4)) == -1, "copy after failure: %d", id);
    EXPECT((id = weft__sched_nop(s)) == -1, "nop after failure: %d", id);
    EXPECT((id = weft__sched_send(s, (rank + 1) % 2, 1, &a, 4)) == -1, "send: %d", id);
    EXPECT((id = weft__sched_recv(s, (rank + 1) % 2, 1, &b, 4)) == -1, "recv: %d", id);
    EXPECT((id = weft__sched_reduce(s, &b, srcs, 1, 1)) == -1, "reduce: %d", id);
    EXPECT(weft__sched_scratch(s, 16) == NULL, "scratch after failure");
    weft__sched_dep(s, early, early);
    weft__sched_dep(s, -1, early);
    EXPECT(weft__sched_num_tasks(s) == 1, "tasks %zu", weft__sched_num_tasks(s));
    st = weft__sched_start(s);
    EXPECT(st == WEFT_ERR_DEVICE, "start returned %d, expected the first error %d", st,
           WEFT_ERR_DEVICE);
    st = weft__sched_progress(s, &done);
    EXPECT(st == WEFT_ERR_DEVICE && done == 1, "progress %d done %d", st, done);
    EXPECT(b == 2, "a task of a failed schedule ran");
    weft__sched_destroy(s);

    s = make(comm, "sticky", WEFT_INT32, WEFT_SUM);
    weft__sched_fail(s, WEFT_ERR_TRANSPORT);
    st = weft__sched_run(s);
    EXPECT(st == WEFT_ERR_TRANSPORT, "run returned %d", st);
    weft__sched_destroy(s);

    /* a message to a rank outside the communicator fails the schedule too */
    s = make(comm, "sticky", WEFT_INT32, WEFT_SUM);
    EXPECT(weft__sched_send(s, 2, 1, &a, 4) == -1, "send to rank 2 of 2 accepted");
    EXPECT(weft__sched_recv(s, -1, 1, &a, 4) == -1, "recv from rank -1 accepted");
    EXPECT(weft__sched_nop(s) == -1, "builder after a bad peer");
    st = weft__sched_start(s);
    EXPECT(st < 0, "start after a bad peer returned %d", st);
    weft__sched_destroy(s);

    s = make(comm, "sticky", WEFT_INT32, WEFT_SUM);
    EXPECT(weft__sched_send(s, 0, WEFT_TAG_MAX_SLOT + 1, &a, 4) == -1, "slot out of range");
    EXPECT(weft__sched_start(s) < 0, "start after a bad slot");
    weft__sched_destroy(s);
}

Test(sched, failure_is_sticky, .init = setup)
{
    run_world(2, 0, 0, rank_sticky, NULL);
}

/* ---------------------------------------- which failures break a comm */

static weft_status_t fail_with(void *state, int *peer_p)
{
    weft_status_t st = *(const weft_status_t *)state;

    *peer_p = -1;
    return weft__error(st, "handmade failure");
}

/*
 * For every error of the status list but ERR_ABORTED (an abort is local:
 * no notice), on a fresh duplicate of a 2-rank world: rank 0's operation
 * fails with it while rank 1 waits for a message from rank 0. A status that
 * breaks the communicator (WEFT_STATUS_MAP's column) reaches rank 1 through
 * the failure notice well before its deadline, and both ranks' communicator
 * stays failed; any other leaves it working: rank 0 then sends the message
 * and rank 1 gets it.
 */
static void rank_breaks(weft_comm_t comm, int rank, void *arg)
{
    static const weft_status_t statuses[] = {
#define STATUS_VALUE(name, value, breaks, desc) WEFT_##name,
        WEFT_STATUS_MAP(STATUS_VALUE)
#undef STATUS_VALUE
    };

    (void)arg;
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        weft_status_t st = statuses[i], want, got;
        int breaks = weft__status_breaks_comm(st);
        int32_t v = 7, w = 0;
        weft_comm_t d = NULL;
        weft_sched_t *s;
        uint64_t t0;

        if (st >= 0 || st == WEFT_ERR_ABORTED) {
            continue;
        }
        if (weft_comm_dup(comm, &d) != WEFT_OK) {
            EXPECT(0, "dup: %s", weft_last_error());
            return;
        }
        want = breaks ? st : WEFT_OK;
        s = make(d, "breaks", WEFT_INT32, WEFT_SUM);
        if (rank == 0) {
            EXPECT(weft__sched_poll(s, fail_with, NULL, &st) >= 0, "poll task");
            got = weft__sched_run(s);
            EXPECT(got == st, "%s: rank 0 got %s", weft_status_name(st), weft_status_name(got));
            weft__sched_destroy(s);
            if (!breaks) {
                s = make(d, "breaks", WEFT_INT32, WEFT_SUM);
                EXPECT(weft__sched_send(s, 1, 1, &v, sizeof(v)) >= 0, "send task");
                got = weft__sched_run(s);
                EXPECT(got == WEFT_OK, "%s: the send after it got %s: %s", weft_status_name(st),
                       weft_status_name(got), weft_last_error());
                weft__sched_destroy(s);
            }
        } else {
            /* the operation rank 0's failed one stands for: tags carry the
             * sequence number, so the receive pairs with rank 0's send */
            EXPECT(weft__sched_nop(s) >= 0, "nop task");
            EXPECT(weft__sched_run(s) == WEFT_OK, "nop: %s", weft_last_error());
            weft__sched_destroy(s);
            s = make(d, "breaks", WEFT_INT32, WEFT_SUM);
            EXPECT(weft__sched_recv(s, 0, 1, &w, sizeof(w)) >= 0, "recv task");
            t0 = weft__time_ns();
            got = weft__sched_run(s);
            EXPECT(got == want, "%s: rank 1 got %s: %s", weft_status_name(st),
                   weft_status_name(got), weft_last_error());
            EXPECT(weft__time_ns() - t0 < 5000000000ull, "%s: rank 1 waited %.1f s",
                   weft_status_name(st), (double)(weft__time_ns() - t0) / 1e9);
            EXPECT(breaks || w == v, "%s: rank 1 received %d", weft_status_name(st), (int)w);
            weft__sched_destroy(s);
        }
        got = weft__comm_health(weft__comm_of(d));
        EXPECT(got == want, "%s: rank %d's communicator reports %s", weft_status_name(st), rank,
               weft_status_name(got));
        weft_comm_destroy(d);
    }
}

Test(sched, failures_that_break_the_communicator, .init = setup)
{
    cr_redirect_stderr(); /* failed communicators log their flight recorders */
    run_world(2, 0, 0, rank_breaks, NULL);
}

/* -------------------------------------------------------------- timeout */

typedef struct timeout_result {
    weft_status_t status;
    double seconds;
    char error[512];
    uint32_t buf_after;
} timeout_result_t;

typedef struct timeout_arg {
    int both_wait; /* 1: both ranks wait for each other; 0: rank 1 just finishes */
    timeout_result_t res[2];
    atomic_int timed_out;
} timeout_arg_t;

static void rank_timeout(weft_comm_t comm, int rank, void *arg_)
{
    timeout_arg_t *arg = arg_;
    timeout_result_t *res = &arg->res[rank];
    uint32_t buf = 0xb0b0b0b0;
    weft_op_desc_t desc = {
        .coll = "stuckcoll", .algo = "handmade", .count = 1, .dtype = WEFT_UINT32, .op = WEFT_SUM};
    weft_sched_t *s = NULL;
    uint64_t t0;

    EXPECT(weft__sched_create(weft__comm_of(comm), &desc, &weft__device_host_ops, &s) == WEFT_OK, "create");
    if (s == NULL) {
        return;
    }
    if (rank == 0 || arg->both_wait) {
        int nop = weft__sched_nop(s), recv;

        weft__sched_step(s, "exchange-phase", 4);
        recv = weft__sched_recv(s, 1 - rank, 3, &buf, sizeof(buf));
        weft__sched_dep(s, nop, recv);
    } else {
        weft__sched_step(s, "idle-phase", 0);
        weft__sched_nop(s);
    }
    t0 = weft__time_ns();
    res->status = weft__sched_run(s);
    res->seconds = (double)(weft__time_ns() - t0) / 1e9;
    snprintf(res->error, sizeof(res->error), "%s", weft_last_error());
    weft__sched_destroy(s);

    /* a message that arrives after the timeout is not written into the
     * cancelled receive's buffer */
    if (rank == 0) {
        atomic_store(&arg->timed_out, 1);
    } else {
        uint32_t late = 0x1a7e1a7e;

        while (!atomic_load(&arg->timed_out)) {
            weft__comm_of(comm)->p2p->idle_wait(weft__comm_of(comm)->p2p_ep, 1000000);
        }
        if (!arg->both_wait) {
            weft_p2p_req_t *req;
            int done;
            uint64_t tag = weft__tag_make(weft__comm_of(comm)->id, 0, 3);

            if (weft__comm_of(comm)->p2p->isend(weft__comm_of(comm)->p2p_ep, 0, &late, sizeof(late), WEFT_MEM_HOST, tag, &req) ==
                WEFT_OK) {
                weft__comm_of(comm)->p2p->test(weft__comm_of(comm)->p2p_ep, req, &done, NULL);
            }
        }
    }
    weft__comm_of(comm)->boot->barrier(weft__comm_of(comm)->boot_ctx, weft__time_ns() + 5000000000ull);
    for (int i = 0; i < 10; i++) {
        weft__comm_of(comm)->p2p->progress(weft__comm_of(comm)->p2p_ep);
    }
    res->buf_after = buf;
}

/* Everything written to the redirected stderr so far (never blocks). */
static size_t read_stderr(char *buf, size_t cap)
{
    int fd = fileno(cr_get_redirected_stderr());
    size_t n = 0;
    ssize_t r;

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0) {
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

static void check_timed_out(const timeout_result_t *r, int rank, int peer)
{
    char want[64];

    cr_assert_eq(r->status, WEFT_ERR_TIMEOUT, "rank %d: status %d (%s): %s", rank, r->status,
                 weft_status_string(r->status), r->error);
    cr_assert_geq(r->seconds, 0.29, "rank %d gave up after %.3f s, before WEFT_TIMEOUT", rank,
                  r->seconds);
    cr_assert_lt(r->seconds, 1.5, "rank %d timed out after %.3f s, expected ~0.3", rank,
                 r->seconds);
    cr_assert_not_null(strstr(r->error, "stuckcoll"), "collective not named: %s", r->error);
    cr_assert_not_null(strstr(r->error, "exchange-phase"), "step label not named: %s", r->error);
    cr_assert_not_null(strstr(r->error, "step 4"), "step number not named: %s", r->error);
    snprintf(want, sizeof(want), "waiting for rank(s) %d", peer);
    cr_assert_not_null(strstr(r->error, want), "'%s' not in: %s", want, r->error);
    cr_assert_eq(r->buf_after, 0xb0b0b0b0, "rank %d: buffer of a timed-out receive written (%#x)",
                 rank, r->buf_after);
}

Test(sched, timeout_names_operation_step_and_peer, .init = setup_short_timeout)
{
    timeout_arg_t arg;

    memset(&arg, 0, sizeof(arg));
    run_world(2, 0, 0, rank_timeout, &arg);
    check_timed_out(&arg.res[0], 0, 1);
    /* the rank that never sends finishes too */
    cr_assert_eq(arg.res[1].status, WEFT_OK, "rank 1: %s", arg.res[1].error);
    cr_assert_lt(arg.res[1].seconds, 0.2);
}

/* The log line of a timeout says what the operation was (kind, sequence
 * number, count, dtype, op, algorithm), where it stopped and whom it waits for. */
Test(sched, timeout_log_line, .init = setup_short_timeout)
{
    timeout_arg_t arg;
    char out[8192];
    const char *line;

    memset(&arg, 0, sizeof(arg));
    run_world(2, 0, 0, rank_timeout, &arg);
    read_stderr(out, sizeof(out));
    line = strstr(out, "stuckcoll");
    cr_assert_not_null(line, "no timeout log line in '%s'", out);
    cr_assert_not_null(strstr(out, "] weft error"), "'%s'", out);
    /* seq 1: the communicator's setup took seq 0 (the ranks agreeing on
     * their node's shared memory) */
    cr_assert_not_null(strstr(out, "stuckcoll seq 1 (handmade, count 1, uint32 sum)"), "'%s'", out);
    cr_assert_not_null(strstr(line, "exchange-phase step 4"), "'%s'", line);
    cr_assert_not_null(strstr(line, "waiting for rank(s) 1"), "'%s'", line);
    cr_assert_null(strstr(line + 1, "stuckcoll"), "one log line per timeout: '%s'", out);
}

Test(sched, timeout_on_both_ranks, .init = setup_short_timeout)
{
    timeout_arg_t arg;

    memset(&arg, 0, sizeof(arg));
    arg.both_wait = 1;
    run_world(2, 0, 0, rank_timeout, &arg);
    check_timed_out(&arg.res[0], 0, 1);
    check_timed_out(&arg.res[1], 1, 0);
}

/* ------------------------------------------------------------- mismatch */

typedef struct mismatch_arg {
    weft_status_t status[2];
    char error[2][512];
    uint64_t buf_after;
} mismatch_arg_t;

static void rank_mismatch(weft_comm_t comm, int rank, void *arg_)
{
    mismatch_arg_t *arg = arg_;
    uint64_t big[2] = {1, 2}, small = 0x5555;
    weft_op_desc_t desc = {
        .coll = "sizecoll", .algo = "handmade", .count = 2, .dtype = WEFT_UINT64, .op = WEFT_SUM};
    weft_sched_t *s = NULL;

    EXPECT(weft__sched_create(weft__comm_of(comm), &desc, &weft__device_host_ops, &s) == WEFT_OK, "create");
    if (s == NULL) {
        return;
    }
    weft__sched_step(s, "size-phase", 2);
    if (rank == 0) {
        weft__sched_send(s, 1, 5, big, sizeof(big));
    } else {
        weft__sched_recv(s, 0, 5, &small, sizeof(small));
    }
    arg->status[rank] = weft__sched_run(s);
    snprintf(arg->error[rank], sizeof(arg->error[rank]), "%s", weft_last_error());
    weft__sched_destroy(s);
    if (rank == 1) {
        arg->buf_after = small;
    }
}

Test(sched, size_mismatch_names_operation, .init = setup)
{
    mismatch_arg_t arg;

    memset(&arg, 0, sizeof(arg));
    arg.status[0] = arg.status[1] = WEFT_ERR_INTERNAL;
    run_world(2, 0, 0, rank_mismatch, &arg);
    cr_assert_eq(arg.status[0], WEFT_OK, "the sender: %s", arg.error[0]);
    cr_assert_eq(arg.status[1], WEFT_ERR_MISMATCH, "the receiver: status %d: %s", arg.status[1],
                 arg.error[1]);
    cr_assert_not_null(strstr(arg.error[1], "sizecoll"), "%s", arg.error[1]);
    cr_assert_not_null(strstr(arg.error[1], "handmade"), "%s", arg.error[1]);
    cr_assert_not_null(strstr(arg.error[1], "size-phase"), "%s", arg.error[1]);
    cr_assert_not_null(strstr(arg.error[1], "rank 0"), "%s", arg.error[1]);
    cr_assert_not_null(strstr(arg.error[1], "16"), "message size: %s", arg.error[1]);
    cr_assert_eq(arg.buf_after, 0x5555, "mismatched message written");
}
