/*
 * Stream-ordered collectives (weft_<collective>_enqueue) among in-process
 * ranks: what the stream order promises and what returns when (errors are
 * in test_device_errors.c).
 *
 *  - order: a copy queued before a collective is what it reads, a copy
 *    queued after it into its input does not change its result, a copy
 *    queued after it sees its result; 8 collectives queued back to back,
 *    each reading the previous one's output from a buffer that holds
 *    sentinel bytes until then, all with right results; collectives of two
 *    communicators interleaved on one stream; a blocking call made right
 *    after an enqueue runs after it (program order). Each stream starts held
 *    by a flag the host opens only after everything is queued, so the
 *    enqueues are shown to return before any of it ran.
 *  - an enqueue returns while its peers have not called yet: the peers
 *    wait (with a deadline) for rank 0's calls to return before making
 *    theirs, and the results are right after synchronize.
 *  - many operations queued at once; destroying the stream or the
 *    communicator waits for them.
 *  - send/recv enqueued on one stream (ordered so that no rank waits for
 *    itself) and on two, host and emu buffers, 0 bytes, and an enqueued
 *    send matched by a blocking receive.
 */
#include "tests/coll/device_world.h"

#include "coll/coll.h"
#include "coll/comm_state.h"
#include "runtime/comm.h"
#include "runtime/enqueue.h"

/* ------------------------------------------------------------------ order */

TestSuite(order, .init = setup, .fini = teardown);

/*
 * in (host) --copy--> e (emu) --allreduce--> res (emu) --copy--> out (host),
 * then junk --copy--> e after the allreduce: the result is the reduction of
 * in, not of the sentinel bytes before or the junk after. A blocking bcast
 * made right after (no synchronize) runs after the enqueued allreduce.
 */
static void copies_around_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p;

    for (int ci = CI_INT32_SUM; ci <= CI_F16_SUM; ci += CI_F16_SUM - CI_INT32_SUM) {
        const size_t n = 1001, bytes = n * weft_dtype_size(dd_combos[ci].dtype);
        unsigned char *in = xalloc(w, r, 0, bytes), *junk = xalloc(w, r, 0, bytes);
        unsigned char *out = xalloc(w, r, 0, bytes), *e = xalloc(w, r, 1, bytes);
        unsigned char *res = xalloc(w, r, 1, bytes), *bc = xalloc(w, r, 1, bytes);
        gated_t g;

        dd_fill(ci, r, 0, n, in);
        dd_fill(ci, r + 100, 0, n, junk);
        gated_create(w, r, &g);
        CHECK_OK(weft_memcpy_async(e, in, bytes, g.st));
        CHECK_OK(
            weft_allreduce_enqueue(e, res, n, dd_combos[ci].dtype, dd_combos[ci].op, comm, g.st));
        CHECK_OK(weft_memcpy_async(e, junk, bytes, g.st));
        CHECK_OK(weft_memcpy_async(out, res, bytes, g.st));
        nap_ms(10);
        CHECK(dd_check_fill(out, bytes) < 0 && dd_check_fill(res, bytes) < 0,
              "work behind the closed gate ran");
        gated_open(&g);
        /* program order: this waits for the allreduce enqueued above */
        if (r == p - 1) {
            dd_fill(ci, 7, 0, n, bc);
        }
        CHECK_OK(weft_bcast(bc, n, dd_combos[ci].dtype, p - 1, comm));
        CHECK_DATA(dd_check_values(ci, 7, 0, n, bc), "bcast after the enqueue");
        CHECK_OK(weft_stream_synchronize(g.st));
        CHECK_DATA(dd_check_reduced(ci, p, 0, n, res), "%s allreduce result",
                   weft_dtype_name(dd_combos[ci].dtype));
        CHECK_DATA(dd_check_reduced(ci, p, 0, n, out), "the copy queued after the allreduce");
        CHECK_DATA(dd_check_values(ci, r + 100, 0, n, e), "the copy of junk into the input");
        CHECK(dd_guard_ok(res, bytes) && dd_guard_ok(out, bytes), "wrote past a buffer");
        gated_destroy(w, r, &g);
        pthread_barrier_wait(&w->barrier);
        dd_free(in);
        dd_free(junk);
        dd_free(out);
        dd_free(e);
        dd_free(res);
        dd_free(bc);
    }
    atomic_fetch_add(&w->finished, 1);
}

Test(order, copies_before_and_after_a_collective, .timeout = 120)
{
    for (int p = 1; p <= 4; p++) {
        world_t w = {0};

        run_world(p, copies_around_body, &w);
    }
}

/* int64 values of the chain's input: element j of rank b */
static int64_t chain_in(int b, size_t j)
{
    return dd_value(CI_INT32_SUM, b, j);
}

/* B2 of the chain: element j of the allreduce of the alltoall's output. */
static int64_t chain_b2(int p, size_t n, size_t j)
{
    int64_t s = 0;
    size_t blk = j / n, i = j % n;

    for (int r = 0; r < p; r++) {
        s += chain_in((int)blk, (size_t)r * n + i);
    }
    return s;
}

static long check_chain(int p, size_t n, const int64_t *got, size_t first, size_t count,
                        int64_t scale)
{
    for (size_t k = 0; k < count; k++) {
        if (got[k] != scale * chain_b2(p, n, first + k)) {
            return (long)k;
        }
    }
    return -1;
}

/*
 * Eight collectives back to back on one stream, each reading what the one
 * before wrote (B0 -> B1 -> ... -> B7; every B starts as sentinel bytes):
 *   1 alltoall B0 -> B1         5 scatter B4 -> B5 (root 0)
 *   2 allreduce B1 -> B2 (sum)  6 gather B5 -> B6 (root 1)
 *   3 reduce_scatter B2 -> B3   7 bcast B6 (root 1)
 *   4 allgather B3 -> B4        8 reduce B6 -> B7 (root 2, sum)
 * With B2 = the allreduce, B3 = p * B2 (this rank's block), B4..B6 = p * B2
 * and B7 = p * p * B2. In some worlds every B is host memory (on the emu
 * stream).
 */
static void chain_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, root1 = 1 % p, root2 = 2 % p;
    const size_t n = 301, blk = n * 8, all = (size_t)p * blk;
    int64_t *b[8];
    gated_t g;

    for (int k = 0; k < 8; k++) {
        b[k] = xalloc(w, r, !w->host, k == 3 || k == 5 ? blk : all);
    }
    for (size_t j = 0; j < (size_t)p * n; j++) {
        b[0][j] = chain_in(r, j);
    }
    gated_create(w, r, &g);
    CHECK_OK(weft_alltoall_enqueue(b[0], b[1], n, WEFT_INT64, comm, g.st));
    CHECK_OK(weft_allreduce_enqueue(b[1], b[2], (size_t)p * n, WEFT_INT64, WEFT_SUM, comm, g.st));
    CHECK_OK(weft_reduce_scatter_enqueue(b[2], b[3], n, WEFT_INT64, WEFT_SUM, comm, g.st));
    CHECK_OK(weft_allgather_enqueue(b[3], b[4], n, WEFT_INT64, comm, g.st));
    CHECK_OK(weft_scatter_enqueue(b[4], b[5], n, WEFT_INT64, 0, comm, g.st));
    CHECK_OK(weft_gather_enqueue(b[5], b[6], n, WEFT_INT64, root1, comm, g.st));
    CHECK_OK(weft_bcast_enqueue(b[6], (size_t)p * n, WEFT_INT64, root1, comm, g.st));
    CHECK_OK(
        weft_reduce_enqueue(b[6], b[7], (size_t)p * n, WEFT_INT64, WEFT_SUM, root2, comm, g.st));
    nap_ms(10);
    for (int k = 1; k < 8; k++) {
        CHECK(dd_check_fill(b[k], k == 3 || k == 5 ? blk : all) < 0,
              "B%d was written while the stream was held", k);
    }
    gated_open(&g);
    CHECK_OK(weft_stream_synchronize(g.st));
    for (int bb = 0; bb < p; bb++) {
        for (size_t i = 0; i < n; i++) {
            CHECK(b[1][(size_t)bb * n + i] == chain_in(bb, (size_t)r * n + i),
                  "alltoall: block %d element %zu", bb, i);
        }
    }
    CHECK_DATA(check_chain(p, n, b[2], 0, (size_t)p * n, 1), "allreduce (2nd)");
    CHECK_DATA(check_chain(p, n, b[3], (size_t)r * n, n, p), "reduce_scatter (3rd)");
    CHECK_DATA(check_chain(p, n, b[4], 0, (size_t)p * n, p), "allgather (4th)");
    CHECK_DATA(check_chain(p, n, b[5], (size_t)r * n, n, p), "scatter (5th)");
    CHECK_DATA(check_chain(p, n, b[6], 0, (size_t)p * n, p), "gather + bcast (6th, 7th)");
    if (r == root2) {
        CHECK_DATA(check_chain(p, n, b[7], 0, (size_t)p * n, (int64_t)p * p), "reduce (8th)");
    } else {
        CHECK(dd_check_fill(b[7], all) < 0, "reduce wrote a non-root's recvbuf");
    }
    for (int k = 0; k < 8; k++) {
        CHECK(dd_guard_ok(b[k], k == 3 || k == 5 ? blk : all), "wrote past B%d", k);
    }
    gated_destroy(w, r, &g);
    pthread_barrier_wait(&w->barrier);
    for (int k = 0; k < 8; k++) {
        dd_free(b[k]);
    }
    atomic_fetch_add(&w->finished, 1);
}

Test(order, eight_collectives_back_to_back, .timeout = 120)
{
    const int ps[] = {1, 2, 3, 4, 7, 4};

    for (int i = 0; i < 6; i++) {
        world_t w = {.host = i == 5};

        run_world(ps[i], chain_body, &w);
    }
}

/*
 * Two communicators (comm and a duplicate) interleaved on one stream, each
 * operation reading what the one before, on the other communicator, wrote:
 *   allreduce in -> x (comm), allgather x -> y (dup),
 *   reduce_scatter y -> z (comm), alltoall y -> u (dup)
 * so x is the sum, every block of y and u is x, and z is p * x.
 */
static void two_comms_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p;
    const size_t n = 513, bytes = n * 4, all = (size_t)p * bytes;
    int32_t *in = xalloc(w, r, 1, bytes), *x = xalloc(w, r, 1, bytes);
    int32_t *y = xalloc(w, r, 1, all), *z = xalloc(w, r, 1, bytes), *u = xalloc(w, r, 1, all);
    weft_comm_t dup = NULL;
    gated_t g;

    dd_fill(CI_INT32_SUM, r, 0, n, in);
    CHECK_OK(weft_comm_dup(comm, &dup));
    gated_create(w, r, &g);
    CHECK_OK(weft_allreduce_enqueue(in, x, n, WEFT_INT32, WEFT_SUM, comm, g.st));
    CHECK_OK(weft_allgather_enqueue(x, y, n, WEFT_INT32, dup, g.st));
    CHECK_OK(weft_reduce_scatter_enqueue(y, z, n, WEFT_INT32, WEFT_SUM, comm, g.st));
    CHECK_OK(weft_alltoall_enqueue(y, u, n, WEFT_INT32, dup, g.st));
    gated_open(&g);
    CHECK_OK(weft_stream_synchronize(g.st));
    CHECK_DATA(dd_check_reduced(CI_INT32_SUM, p, 0, n, x), "allreduce on comm");
    for (int b = 0; b < p; b++) {
        CHECK_DATA(dd_check_reduced(CI_INT32_SUM, p, 0, n, y + (size_t)b * n),
                   "allgather on dup, block %d", b);
        CHECK_DATA(dd_check_reduced(CI_INT32_SUM, p, 0, n, u + (size_t)b * n),
                   "alltoall on dup, block %d", b);
    }
    for (size_t i = 0; i < n; i++) {
        CHECK(z[i] == p * x[i], "reduce_scatter on comm: element %zu is %d, not %d * %d", i,
              (int)z[i], p, (int)x[i]);
    }
    gated_destroy(w, r, &g);
    CHECK_OK(weft_comm_destroy(dup));
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(x);
    dd_free(y);
    dd_free(z);
    dd_free(u);
    atomic_fetch_add(&w->finished, 1);
}

Test(order, two_communicators_on_one_stream, .timeout = 120)
{
    for (int p = 1; p <= 4; p++) {
        world_t w = {0};

        run_world(p, two_comms_body, &w);
    }
}

/* ---------------------------------------------------------------- enqueue */

/*
 * Device tasks and the progress thread's operations on one communicator: a
 * ring of sends and receives (run by the progress thread) enqueued on a gated
 * stream, then an allreduce (a device task) on a second, open stream, of other
 * buffers: the task waits for the communicator's earlier operations, so its
 * result is not there while the gate is closed; then an allreduce of what the
 * ring received, on the gated stream, and the ring again with that result.
 */
static void mixed_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM, to = (r + 1) % p, from = (r + p - 1) % p;
    const size_t n = 30001, bytes = n * 4;
    unsigned char *sb = xalloc(w, r, 1, bytes), *rb = xalloc(w, r, 1, bytes);
    unsigned char *in2 = xalloc(w, r, 1, bytes), *res2 = xalloc(w, r, 1, bytes);
    unsigned char *res = xalloc(w, r, 1, bytes), *rb2 = xalloc(w, r, 1, bytes);
    weft_stream_t b = NULL;
    gated_t g;

    dd_fill(ci, r, 0, n, sb);
    dd_fill(ci, r, 0, n, in2);
    gated_create(w, r, &g);
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &b));
    for (int k = 0; k < 2; k++) {
        void *send = k == 0 ? sb : res, *recv = k == 0 ? rb : rb2;

        if (r % 2 == 0) {
            CHECK_OK(weft_send_enqueue(send, n, WEFT_INT32, to, 5, comm, g.st));
            CHECK_OK(weft_recv_enqueue(recv, n, WEFT_INT32, from, 5, comm, g.st));
        } else {
            CHECK_OK(weft_recv_enqueue(recv, n, WEFT_INT32, from, 5, comm, g.st));
            CHECK_OK(weft_send_enqueue(send, n, WEFT_INT32, to, 5, comm, g.st));
        }
        if (k == 0) {
            CHECK_OK(weft_allreduce_enqueue(in2, res2, n, WEFT_INT32, WEFT_SUM, comm, b));
            CHECK_OK(weft_allreduce_enqueue(rb, res, n, WEFT_INT32, WEFT_SUM, comm, g.st));
        }
    }
    nap_ms(20);
    CHECK(dd_check_fill(res2, bytes) < 0, "the task ran before the communicator's earlier "
                                          "operations (their stream is held)");
    gated_open(&g);
    CHECK_OK(weft_stream_synchronize(b));
    CHECK_OK(weft_stream_synchronize(g.st));
    CHECK_DATA(dd_check_values(ci, from, 0, n, rb), "ring from rank %d", from);
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, res2), "the task on the open stream");
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, res), "the allreduce of what the ring received");
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, rb2), "the ring of the allreduce's result");
    CHECK_OK(weft_stream_destroy(b));
    gated_destroy(w, r, &g);
    pthread_barrier_wait(&w->barrier);
    dd_free(sb);
    dd_free(rb);
    dd_free(in2);
    dd_free(res2);
    dd_free(res);
    dd_free(rb2);
    atomic_fetch_add(&w->finished, 1);
}

Test(order, device_tasks_after_the_progress_threads_operations, .timeout = 120)
{
    unsigned long tasks0 = weft__enqueue_tasks_run();

    for (int p = 2; p <= 4; p++) {
        world_t w = {0};

        run_world(p, mixed_body, &w);
    }
    /* every rank's two allreduces, the sends and receives not */
    cr_assert_eq(weft__enqueue_tasks_run() - tasks0, 2ul * (2 + 3 + 4), "%lu device tasks",
                 weft__enqueue_tasks_run() - tasks0);
}

/*
 * Blocking calls on emu buffers inside a node run as the device task an
 * enqueue makes (on the thread's own stream), with right results; on host
 * buffers, or with WEFT_DEVICE_TASK=no, they do not.
 */
static void blocking_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM;
    const size_t n = 5001, bytes = n * 4;
    unsigned char *in = xalloc(w, r, 1, bytes), *res = xalloc(w, r, 1, bytes);
    unsigned char *all = xalloc(w, r, 1, bytes * (size_t)p), *h = xalloc(w, r, 0, bytes);

    dd_fill(ci, r, 0, n, in);
    CHECK_OK(weft_allreduce(in, res, n, WEFT_INT32, WEFT_SUM, comm));
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, res), "allreduce");
    CHECK_OK(weft_allgather(in, all, n, WEFT_INT32, comm));
    for (int q = 0; q < p; q++) {
        CHECK_DATA(dd_check_values(ci, q, 0, n, all + (size_t)q * bytes), "allgather block %d", q);
    }
    if (r == p - 1) {
        dd_fill(ci, 3, 0, n, res);
    }
    CHECK_OK(weft_bcast(res, n, WEFT_INT32, p - 1, comm));
    CHECK_DATA(dd_check_values(ci, 3, 0, n, res), "bcast");
    dd_fill(ci, r, 0, n, h);
    CHECK_OK(weft_allreduce(WEFT_IN_PLACE, h, n, WEFT_INT32, WEFT_SUM, comm)); /* host */
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, h), "host allreduce");
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(res);
    dd_free(all);
    dd_free(h);
    atomic_fetch_add(&w->finished, 1);
}

Test(order, blocking_device_calls_run_as_device_tasks, .timeout = 120)
{
    unsigned long tasks0 = weft__enqueue_tasks_run();

    for (int p = 1; p <= 3; p++) {
        world_t w = {0};

        run_world(p, blocking_body, &w);
    }
    /* three calls on emu buffers per rank; the host allreduce is not one */
    cr_assert_eq(weft__enqueue_tasks_run() - tasks0, 3ul * (1 + 2 + 3), "%lu device tasks",
                 weft__enqueue_tasks_run() - tasks0);
    weft__coll_config.device_task = 0;
    for (int p = 2; p <= 3; p++) {
        world_t w = {0};

        run_world(p, blocking_body, &w);
    }
    weft__coll_config.device_task = 1;
    cr_assert_eq(weft__enqueue_tasks_run() - tasks0, 3ul * (1 + 2 + 3),
                 "device tasks with WEFT_DEVICE_TASK=no");
}

/* ------------------------------------------------------------------ group */

TestSuite(group, .init = setup, .fini = teardown);

/*
 * weft_group_start/end: every rank sends to every other rank first and then
 * receives from each, all on one stream, messages large enough that a send
 * waits for its receive: grouped, they are posted together and finish. A
 * nested group queues only at the outermost end; two communicators and two
 * streams in one group; a collective enqueued inside a group and a bad send
 * fail and queue nothing, the rest of the group runs.
 */
static void group_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM;
    const size_t n = 200001, bytes = n * 4;
    unsigned char *sb = xalloc(w, r, 1, bytes), *rb = xalloc(w, r, 1, bytes * (size_t)p);
    unsigned char *h = xalloc(w, r, 0, bytes), *hr = xalloc(w, r, 0, bytes);
    weft_comm_t dup = NULL;
    weft_stream_t a = NULL, b = NULL;

    CHECK_OK(weft_comm_dup(comm, &dup));
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &a));
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &b));
    dd_fill(ci, r, 0, n, sb);
    dd_fill(ci, r + 20, 0, n, h);
    CHECK_OK(weft_group_start());
    CHECK_OK(weft_group_start()); /* nested */
    for (int q = 0; q < p; q++) {
        CHECK_OK(weft_send_enqueue(sb, n, WEFT_INT32, q, 4, comm, a));
    }
    CHECK_OK(weft_group_end());
    CHECK_OK(weft_stream_synchronize(a)); /* the inner end queued nothing */
    for (int q = 0; q < p; q++) {
        CHECK_OK(weft_recv_enqueue(rb + (size_t)q * bytes, n, WEFT_INT32, q, 4, comm, a));
    }
    CHECK_ERR(weft_allreduce_enqueue(sb, rb, n, WEFT_INT32, WEFT_SUM, comm, a),
              WEFT_ERR_INVALID_ARG, "weft_group_start");
    CHECK_ERR(weft_send_enqueue(sb, n, WEFT_INT32, p, 4, comm, a), WEFT_ERR_INVALID_ARG, "peer");
    /* the other communicator, host buffers, on the other stream: a ring */
    CHECK_OK(weft_send_enqueue(h, n, WEFT_INT32, (r + 1) % p, 5, dup, b));
    CHECK_OK(weft_recv_enqueue(hr, n, WEFT_INT32, (r + p - 1) % p, 5, dup, b));
    CHECK(dd_check_fill(rb, bytes * (size_t)p) < 0, "a held receive ran before the group ended");
    CHECK_OK(weft_group_end());
    CHECK_ERR(weft_group_end(), WEFT_ERR_INVALID_ARG, "no weft_group_start");
    CHECK_OK(weft_stream_synchronize(a));
    CHECK_OK(weft_stream_synchronize(b));
    for (int q = 0; q < p; q++) {
        CHECK_DATA(dd_check_values(ci, q, 0, n, rb + (size_t)q * bytes), "from rank %d", q);
    }
    CHECK_DATA(dd_check_values(ci, (r + p - 1) % p + 20, 0, n, hr), "ring on the duplicate");
    /* the communicator still works in order after the group */
    CHECK_OK(weft_allreduce_enqueue(sb, rb, n, WEFT_INT32, WEFT_SUM, comm, a));
    CHECK_OK(weft_stream_synchronize(a));
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, rb), "allreduce after the group");
    CHECK(dd_guard_ok(rb, bytes * (size_t)p) && dd_guard_ok(hr, bytes), "wrote past a buffer");
    CHECK_OK(weft_stream_destroy(a));
    CHECK_OK(weft_stream_destroy(b));
    CHECK_OK(weft_comm_destroy(dup));
    pthread_barrier_wait(&w->barrier);
    dd_free(sb);
    dd_free(rb);
    dd_free(h);
    dd_free(hr);
    atomic_fetch_add(&w->finished, 1);
}

Test(group, everyone_sends_first_and_receives_after, .timeout = 120)
{
    for (int p = 1; p <= 4; p++) {
        world_t w = {0};

        run_world(p, group_body, &w);
    }
}

TestSuite(enqueue, .init = setup, .fini = teardown);

/*
 * Rank 0 enqueues an allreduce and a bcast, then says so (flag[0]); the
 * others wait for that before they call (one blocking, the others
 * enqueued), so rank 0's calls returned while its peers were absent.
 */
static void absent_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_F16_SUM;
    const size_t n = 777, bytes = n * 2;
    unsigned char *in = xalloc(w, r, 1, bytes), *out = xalloc(w, r, 1, bytes);
    unsigned char *bc = xalloc(w, r, 1, bytes);
    weft_stream_t st = NULL;

    dd_fill(ci, r, 0, n, in);
    if (r == p - 1) {
        dd_fill(ci, 42, 0, n, bc);
    }
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &st));
    if (r == 0) {
        CHECK_OK(weft_allreduce_enqueue(in, out, n, WEFT_FLOAT16, WEFT_SUM, comm, st));
        CHECK_OK(weft_bcast_enqueue(bc, n, WEFT_FLOAT16, p - 1, comm, st));
        CHECK(p == 1 || dd_check_fill(out, bytes) < 0, "the result was written before the "
                                                       "peers called");
        atomic_store(&w->flag[0], 1);
    } else {
        CHECK(await(&w->flag[0], 1),
              "rank 0's enqueue had not returned after %.0f s while its peers were absent",
              PEER_DEADLINE_S);
        if (r == 1) {
            CHECK_OK(weft_allreduce(in, out, n, WEFT_FLOAT16, WEFT_SUM, comm));
            CHECK_OK(weft_bcast(bc, n, WEFT_FLOAT16, p - 1, comm));
        } else {
            CHECK_OK(weft_allreduce_enqueue(in, out, n, WEFT_FLOAT16, WEFT_SUM, comm, st));
            CHECK_OK(weft_bcast_enqueue(bc, n, WEFT_FLOAT16, p - 1, comm, st));
        }
    }
    CHECK_OK(weft_stream_synchronize(st));
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, out), "allreduce");
    CHECK_DATA(dd_check_values(ci, 42, 0, n, bc), "bcast");
    CHECK_OK(weft_stream_destroy(st));
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(out);
    dd_free(bc);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, returns_while_peers_are_absent, .timeout = 120)
{
    for (int p = 1; p <= 4; p++) {
        world_t w = {0};

        run_world(p, absent_body, &w);
    }
}

/*
 * A device task waiting for a late peer yields the core from its first empty poll: the
 * application's threads, which enqueue the next operations meanwhile, share the cores with the
 * stream's thread. The same wait in a blocking call on host buffers busy-polls first
 * (WEFT_SPIN_US; the ranks have a core each here). Rank 1 late by 20 ms each time.
 */
typedef struct waits_world {
    world_t w;                   /* first: the body's arg is both */
    uint64_t busy[2], yields[2]; /* rank 0's: [0] the device task, [1] the host call */
} waits_world_t;

static void task_waits_body(weft_comm_t comm, int r, void *arg)
{
    waits_world_t *ww = arg;
    world_t *w = &ww->w;
    struct weft_comm *c = weft__comm_of(comm);
    const size_t n = 16, bytes = n * 4;
    unsigned char *e = xalloc(w, r, 1, bytes), *h = xalloc(w, r, 0, bytes);
    weft_stream_t st = NULL;

    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &st));
    c->oversubscribed = 0;
    for (int form = 0; form < 2; form++) {
        unsigned char *buf = form == 0 ? e : h;
        uint64_t busy0, yields0;

        dd_fill(CI_INT32_SUM, r, 0, n, buf);
        pthread_barrier_wait(&w->barrier);
        busy0 = c->coll->busy_polls;
        yields0 = c->coll->yield_polls;
        if (r == 1) {
            struct timespec late = {0, 20000000};

            nanosleep(&late, NULL);
        }
        if (form == 0) {
            CHECK_OK(weft_allreduce_enqueue(WEFT_IN_PLACE, buf, n, WEFT_INT32, WEFT_SUM, comm, st));
            CHECK_OK(weft_stream_synchronize(st));
        } else {
            CHECK_OK(weft_allreduce(WEFT_IN_PLACE, buf, n, WEFT_INT32, WEFT_SUM, comm));
        }
        CHECK_DATA(dd_check_reduced(CI_INT32_SUM, 2, 0, n, buf), "allreduce (form %d)", form);
        if (r == 0) {
            ww->busy[form] = c->coll->busy_polls - busy0;
            ww->yields[form] = c->coll->yield_polls - yields0;
        }
    }
    CHECK_OK(weft_stream_destroy(st));
    pthread_barrier_wait(&w->barrier);
    dd_free(e);
    dd_free(h);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, device_tasks_yield_from_the_first_poll, .timeout = 120)
{
    unsigned long tasks0 = weft__enqueue_tasks_run();
    waits_world_t ww = {0};

    run_world(2, task_waits_body, &ww.w);
    cr_assert_eq(weft__enqueue_tasks_run() - tasks0, 2ul, "%lu device tasks",
                 weft__enqueue_tasks_run() - tasks0);
    cr_assert_eq(ww.busy[0], 0, "the device task busy-polled %llu times",
                 (unsigned long long)ww.busy[0]);
    cr_assert_gt(ww.yields[0], 0, "the device task never yielded while its peer was late");
    cr_assert_gt(ww.busy[1], 0, "the host call never busy-polled (%llu yields)",
                 (unsigned long long)ww.yields[1]);
}

/*
 * Point-to-point: a ring where even ranks send first and odd ranks receive
 * first, both on one stream (a large message: the send may wait for the
 * receive); all sends on one stream and all receives on another; host
 * buffers on the emu stream; 0 elements; an enqueued send received by a
 * blocking weft_recv.
 */
static void p2p_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM, to = (r + 1) % p, from = (r + p - 1) % p;
    const size_t big = 300001, small = 33;
    unsigned char *sb = xalloc(w, r, 1, big * 4), *rb = xalloc(w, r, 1, big * 4);
    unsigned char *hs = xalloc(w, r, 0, small * 4), *hr = xalloc(w, r, 0, small * 4);
    weft_stream_t a = NULL, b = NULL;

    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &a));
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &b));
    dd_fill(ci, r, 0, big, sb);
    if (p == 1) {
        /* to itself: the receive on its own stream, or the send would wait for it */
        CHECK_OK(weft_recv_enqueue(rb, big, WEFT_INT32, from, 5, comm, b));
        CHECK_OK(weft_send_enqueue(sb, big, WEFT_INT32, to, 5, comm, a));
        CHECK_OK(weft_stream_synchronize(b));
    } else if (r % 2 == 0) {
        /* odd p: rank p-1 (even) sends to rank 0 (even), which receives after its own
         * send; that send is to rank 1, which receives first, so the ring moves */
        CHECK_OK(weft_send_enqueue(sb, big, WEFT_INT32, to, 5, comm, a));
        CHECK_OK(weft_recv_enqueue(rb, big, WEFT_INT32, from, 5, comm, a));
    } else {
        CHECK_OK(weft_recv_enqueue(rb, big, WEFT_INT32, from, 5, comm, a));
        CHECK_OK(weft_send_enqueue(sb, big, WEFT_INT32, to, 5, comm, a));
    }
    CHECK_OK(weft_stream_synchronize(a));
    CHECK_DATA(dd_check_values(ci, from, 0, big, rb), "one-stream ring from rank %d", from);

    /* sends on a, receives on b; host buffers; 0 elements */
    dd_fill(ci, r + 50, 0, small, hs);
    memset(rb, DD_FILL_BYTE, big * 4);
    CHECK_OK(weft_send_enqueue(hs, small, WEFT_INT32, to, 6, comm, a));
    CHECK_OK(weft_send_enqueue(sb, 0, WEFT_INT32, to, 7, comm, a));
    CHECK_OK(weft_recv_enqueue(hr, small, WEFT_INT32, from, 6, comm, b));
    CHECK_OK(weft_recv_enqueue(rb, 0, WEFT_INT32, from, 7, comm, b));
    CHECK_OK(weft_stream_synchronize(a));
    CHECK_OK(weft_stream_synchronize(b));
    CHECK_DATA(dd_check_values(ci, from + 50, 0, small, hr), "two-stream host message");
    CHECK(dd_check_fill(rb, big * 4) < 0, "a receive of 0 elements wrote its buffer");

    /* an enqueued send, a blocking receive */
    if (r == 0) {
        CHECK_OK(weft_send_enqueue(sb, big, WEFT_INT32, p - 1, 8, comm, a));
        CHECK_OK(weft_stream_synchronize(a));
    }
    if (r == p - 1) {
        CHECK_OK(weft_recv(rb, big, WEFT_INT32, 0, 8, comm));
        CHECK_DATA(dd_check_values(ci, 0, 0, big, rb), "blocking receive of an enqueued send");
    }
    CHECK(dd_guard_ok(rb, big * 4) && dd_guard_ok(hr, small * 4), "wrote past a buffer");
    CHECK_OK(weft_stream_destroy(a));
    CHECK_OK(weft_stream_destroy(b));
    pthread_barrier_wait(&w->barrier);
    dd_free(sb);
    dd_free(rb);
    dd_free(hs);
    dd_free(hr);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, send_recv, .timeout = 120)
{
    for (int p = 1; p <= 4; p++) {
        world_t w = {0};

        run_world(p, p2p_body, &w);
    }
}

/*
 * Many operations queued at once on one stream (flags recycled while the
 * queue is long), each on its own buffers, with the stream destroyed right
 * after the last enqueue (it waits for them) on some ranks and synchronized
 * on the others.
 */
#define MANY 150

static void many_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const size_t n = 5;
    const int ci = 1; /* float32 sum */
    unsigned char *in = xalloc(w, r, 1, MANY * n * 4), *out = xalloc(w, r, 1, MANY * n * 4);
    weft_stream_t st = NULL;

    dd_fill(ci, r, 0, MANY * n, in);
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &st));
    for (int k = 0; k < MANY; k++) {
        CHECK_OK(weft_allreduce_enqueue(in + (size_t)k * n * 4, out + (size_t)k * n * 4, n,
                                        WEFT_FLOAT32, WEFT_SUM, comm, st));
    }
    if (r % 2 == 0) {
        CHECK_OK(weft_stream_destroy(st));
    } else {
        CHECK_OK(weft_stream_synchronize(st));
        CHECK_OK(weft_stream_destroy(st));
    }
    CHECK_DATA(dd_check_reduced(ci, w->p, 0, MANY * n, out), "%d allreduces", MANY);
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(out);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, many_queued_and_destroy_waits, .timeout = 120)
{
    unsigned long tasks0 = weft__enqueue_tasks_run();

    /* as device tasks (the default): each stream ran its allreduces itself */
    for (int p = 1; p <= 4; p += 3) {
        world_t w = {0};

        run_world(p, many_body, &w);
    }
    cr_assert_eq(weft__enqueue_tasks_run() - tasks0, 5ul * MANY, "%lu device tasks, not %d",
                 weft__enqueue_tasks_run() - tasks0, 5 * MANY);
    cr_assert_eq(weft__emu_thread_binds(), 0ul, "the progress thread drove device tasks");
    /* through the progress thread (WEFT_DEVICE_TASK=no) */
    weft__coll_config.device_task = 0;
    for (int p = 1; p <= 4; p += 3) {
        world_t w = {0};

        run_world(p, many_body, &w);
    }
    weft__coll_config.device_task = 1;
    cr_assert_eq(weft__enqueue_tasks_run() - tasks0, 5ul * MANY, "device tasks with them off");
    /* the progress thread made the stream's context current before driving them, once */
    cr_assert_eq(weft__emu_thread_binds(), 1ul, "thread_bind called %lu times",
                 weft__emu_thread_binds());
}

/*
 * A duplicated communicator destroyed right after an enqueue (its
 * operation still waiting on the gated stream): the destroy waits for it,
 * the result is right, and the handle is refused afterwards.
 */
static void destroy_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const size_t n = 99, bytes = n * 2;
    unsigned char *in = xalloc(w, r, 1, bytes), *out = xalloc(w, r, 1, bytes);
    weft_comm_t dup = NULL;
    gated_t g;

    dd_fill(CI_F16_SUM, r, 0, n, in);
    CHECK_OK(weft_comm_dup(comm, &dup));
    gated_create(w, r, &g);
    CHECK_OK(weft_allreduce_enqueue(in, out, n, WEFT_FLOAT16, WEFT_SUM, dup, g.st));
    gated_open(&g);
    CHECK_OK(weft_comm_destroy(dup));
    CHECK_DATA(dd_check_reduced(CI_F16_SUM, w->p, 0, n, out), "allreduce on a destroyed dup");
    CHECK_OK(weft_stream_synchronize(g.st));
    CHECK_ERR(weft_allreduce_enqueue(in, out, n, WEFT_FLOAT16, WEFT_SUM, dup, g.st),
              WEFT_ERR_INVALID_ARG, "comm");
    CHECK_ERR(weft_barrier_enqueue(NULL, g.st), WEFT_ERR_INVALID_ARG, "comm");
    CHECK_OK(weft_stream_synchronize(g.st));
    gated_destroy(w, r, &g);
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(out);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, comm_destroy_waits_for_enqueued_work, .timeout = 120)
{
    for (int p = 1; p <= 3; p++) {
        world_t w = {0};

        run_world(p, destroy_body, &w);
    }
}

/*
 * Wait until the progress thread has started a sleep on the doorbell since *w0, at most
 * PEER_DEADLINE_S; 0 when it timed out. Idle, it yields 64 times before its first sleep: on a
 * loaded machine that may take more than the tens of milliseconds a fixed nap would give it.
 */
static int await_sleep(const weft_enqueue_waits_t *w0)
{
    double deadline = now_s() + PEER_DEADLINE_S;
    weft_enqueue_waits_t now = {0};

    for (;;) {
        weft__enqueue_waits(&now);
        if (now.sleeps > w0->sleeps) {
            return 1;
        }
        if (now_s() > deadline) {
            return 0;
        }
        nap_ms(1);
    }
}

/*
 * The progress thread sleeps on the doorbell while the operations it runs wait for their
 * streams, and a ring wakes it (runtime/enqueue.c): a ring of sends and receives queued on
 * gated streams held 30 ms (every stream emu: no nap at all, a sleep a ring ended); then
 * the same queued behind each rank's allreduce, a device task on its gated stream, on an open
 * stream (their flags written before the sleep: only the task's end can ring). Two rounds of
 * each, the counters taken by rank 0 while every rank waits: from the queueing, until the
 * thread has slept and 10 ms more, to the end.
 */
static void doorbell_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM, to = (r + 1) % p, from = (r + p - 1) % p;
    const size_t n = 1001, bytes = n * 4;
    unsigned char *sb = xalloc(w, r, 1, bytes), *rb = xalloc(w, r, 1, bytes);
    unsigned char *res = xalloc(w, r, 1, bytes);
    weft_stream_t open = NULL;

    dd_fill(ci, r, 0, n, sb);
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &open));
    for (int phase = 0; phase < 2; phase++) {
        unsigned long rung = 0;

        for (int round = 0; round < 2; round++) {
            weft_enqueue_waits_t w0 = {0}, w1 = {0};
            weft_stream_t ring_st;
            gated_t g;

            memset(rb, DD_FILL_BYTE, bytes);
            memset(res, DD_FILL_BYTE, bytes);
            gated_create(w, r, &g);
            if (phase == 1) {
                CHECK_OK(weft_allreduce_enqueue(sb, res, n, WEFT_INT32, WEFT_SUM, comm, g.st));
            }
            ring_st = phase == 0 ? g.st : open;
            if (r % 2 == 0) {
                CHECK_OK(weft_send_enqueue(sb, n, WEFT_INT32, to, 9, comm, ring_st));
                CHECK_OK(weft_recv_enqueue(rb, n, WEFT_INT32, from, 9, comm, ring_st));
            } else {
                CHECK_OK(weft_recv_enqueue(rb, n, WEFT_INT32, from, 9, comm, ring_st));
                CHECK_OK(weft_send_enqueue(sb, n, WEFT_INT32, to, 9, comm, ring_st));
            }
            pthread_barrier_wait(&w->barrier);
            if (r == 0) {
                weft__enqueue_waits(&w0);
                CHECK(await_sleep(&w0),
                      "phase %d: the progress thread never slept on the doorbell "
                      "in %.0f s",
                      phase, PEER_DEADLINE_S);
                nap_ms(10); /* asleep a while before the gates open */
            }
            pthread_barrier_wait(&w->barrier);
            CHECK(dd_check_fill(rb, bytes) < 0, "a receive ran behind its closed gate");
            gated_open(&g);
            CHECK_OK(weft_stream_synchronize(g.st));
            CHECK_OK(weft_stream_synchronize(open));
            CHECK_DATA(dd_check_values(ci, from, 0, n, rb), "phase %d: ring from rank %d", phase,
                       from);
            if (phase == 1) {
                CHECK_DATA(dd_check_reduced(ci, p, 0, n, res), "the task's allreduce");
            }
            pthread_barrier_wait(&w->barrier);
            if (r == 0) {
                weft__enqueue_waits(&w1);
                CHECK(w1.naps == w0.naps,
                      "phase %d: the progress thread napped %lu times "
                      "(every stream is emu, and rings)",
                      phase, w1.naps - w0.naps);
                rung += w1.rung - w0.rung;
            }
            gated_destroy(w, r, &g);
        }
        /* a sleep may end by its time limit just as a ring comes: one round of two may miss */
        CHECK(r != 0 || rung > 0, "phase %d: no ring woke the progress thread (%s)", phase,
              phase == 0 ? "the streams' after flag 1" : "the device task's end");
    }
    CHECK_OK(weft_stream_destroy(open));
    pthread_barrier_wait(&w->barrier);
    dd_free(sb);
    dd_free(rb);
    dd_free(res);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, progress_thread_sleeps_until_a_stream_rings, .timeout = 120)
{
    for (int p = 2; p <= 3; p++) {
        world_t w = {0};

        run_world(p, doorbell_body, &w);
    }
}

/*
 * Split communicators (even and odd ranks, in reverse order): an enqueued
 * allreduce and a blocking allgather on emu buffers within each half.
 */
static void split_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const size_t n = 301, bytes = n * 2;
    weft_comm_t half = NULL;
    weft_stream_t st = NULL;
    int hr = -1, hp = 0;
    unsigned char *in = xalloc(w, r, 1, bytes), *out = xalloc(w, r, 1, bytes);
    unsigned char *all = xalloc(w, r, 1, bytes * (size_t)w->p);

    CHECK_OK(weft_comm_split(comm, r % 2, -r, &half));
    CHECK_OK(weft_comm_rank(half, &hr));
    CHECK_OK(weft_comm_size(half, &hp));
    dd_fill(CI_F16_SUM, hr, 0, n, in);
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &st));
    CHECK_OK(weft_allreduce_enqueue(in, out, n, WEFT_FLOAT16, WEFT_SUM, half, st));
    CHECK_OK(weft_stream_synchronize(st));
    CHECK_DATA(dd_check_reduced(CI_F16_SUM, hp, 0, n, out), "allreduce in a half of %d", hp);
    CHECK_OK(weft_allgather(in, all, n, WEFT_FLOAT16, half));
    for (int b = 0; b < hp; b++) {
        CHECK_DATA(dd_check_values(CI_F16_SUM, b, 0, n, all + (size_t)b * bytes),
                   "allgather in a half, block %d", b);
    }
    CHECK_OK(weft_stream_destroy(st));
    CHECK_OK(weft_comm_destroy(half));
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(out);
    dd_free(all);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, split_communicators, .timeout = 120)
{
    for (int p = 2; p <= 5; p++) {
        world_t w = {0};

        run_world(p, split_body, &w);
    }
}
