/*
 * Errors of stream-ordered collectives among in-process ranks:
 *  - bad input (a stream that is none, mixed memory types, freed emu
 *    buffers, a bad root, op or dtype, unfinished nonblocking requests) is
 *    WEFT_ERR_INVALID_ARG naming the argument, and queues nothing: the
 *    stream then synchronizes clean and the next collective is right;
 *  - a timeout (WEFT_TIMEOUT=1, one rank never calls) is returned by
 *    weft_stream_synchronize, once, only for its stream, and by the next
 *    call on the communicator;
 *  - a blocking call waits for the communicator's enqueued work with the
 *    same deadline.
 */
#include "tests/coll/device_world.h"

TestSuite(enqueue, .init = setup, .fini = teardown);

/*
 * Bad input on every path: each call fails naming the argument and queues
 * nothing; then the stream synchronizes clean and a collective is right.
 */
static void bad_input_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM;
    const size_t n = 64, bytes = n * 4;
    unsigned char *e = xalloc(w, r, 1, bytes), *res = xalloc(w, r, 1, bytes);
    unsigned char *h = xalloc(w, r, 0, bytes), *dead = xalloc(w, r, 1, bytes);
    weft_stream_t st = NULL;
    weft_request_t req = NULL, never = (weft_request_t)&req;
    int local = 0;

    dd_fill(ci, r, 0, n, e);
    dd_fill(ci, r, 0, n, h);
    CHECK_OK(weft_mem_free(dead));
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &st));

    CHECK_ERR(weft_allreduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, comm, &local),
              WEFT_ERR_INVALID_ARG, "stream");
    CHECK_ERR(weft_allreduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, comm, NULL),
              WEFT_ERR_INVALID_ARG, "stream");
    CHECK_ERR(weft_barrier_enqueue(comm, &local), WEFT_ERR_INVALID_ARG, "stream");
    CHECK_ERR(weft_allreduce_enqueue(h, res, n, WEFT_INT32, WEFT_SUM, comm, st),
              WEFT_ERR_INVALID_ARG, "memory type");
    CHECK_ERR(weft_allreduce_enqueue(e, h, n, WEFT_INT32, WEFT_SUM, comm, st), WEFT_ERR_INVALID_ARG,
              "memory type");
    CHECK_ERR(weft_allreduce_enqueue(dead, res, n, WEFT_INT32, WEFT_SUM, comm, st),
              WEFT_ERR_INVALID_ARG, "sendbuf");
    CHECK_ERR(weft_allreduce_enqueue(e, dead, n, WEFT_INT32, WEFT_SUM, comm, st),
              WEFT_ERR_INVALID_ARG, "recvbuf");
    CHECK_ERR(weft_bcast_enqueue(dead, n, WEFT_INT32, 0, comm, st), WEFT_ERR_INVALID_ARG, "freed");
    CHECK_ERR(weft_allgather_enqueue(e, dead, n / (size_t)p, WEFT_INT32, comm, st),
              WEFT_ERR_INVALID_ARG, "recvbuf");
    CHECK_ERR(weft_reduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, p, comm, st),
              WEFT_ERR_INVALID_ARG, "root");
    CHECK_ERR(weft_allreduce_enqueue(e, res, n, WEFT_FLOAT32, WEFT_BXOR, comm, st),
              WEFT_ERR_INVALID_ARG, "op");
    CHECK_ERR(weft_allreduce_enqueue(e, res, n, (weft_dtype_t)99, WEFT_SUM, comm, st),
              WEFT_ERR_INVALID_ARG, "dtype");
    CHECK_ERR(weft_send_enqueue(dead, n, WEFT_INT32, (r + 1) % p, 3, comm, st),
              WEFT_ERR_INVALID_ARG, "buf");
    CHECK_ERR(weft_recv_enqueue(e, n, WEFT_INT32, p, 3, comm, st), WEFT_ERR_INVALID_ARG, "peer");
    /* the blocking and nonblocking forms refuse freed memory the same way */
    CHECK_ERR(weft_allreduce(dead, res, n, WEFT_INT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG,
              "sendbuf");
    req = never;
    CHECK_ERR(weft_iallreduce(e, dead, n, WEFT_INT32, WEFT_SUM, comm, &req), WEFT_ERR_INVALID_ARG,
              "recvbuf");
    CHECK(req == never, "a failed weft_iallreduce wrote its request");
    CHECK_ERR(weft_allreduce(e, h, n, WEFT_INT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG,
              "memory type");
    CHECK(dd_check_fill(res, bytes) < 0, "a refused call wrote recvbuf");

    /* unfinished nonblocking requests: enqueueing is refused until they end */
    CHECK_OK(weft_iallreduce(WEFT_IN_PLACE, h, n, WEFT_INT32, WEFT_SUM, comm, &req));
    CHECK_ERR(weft_allreduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, comm, st),
              WEFT_ERR_INVALID_ARG, "nonblocking");
    CHECK_ERR(weft_send_enqueue(e, n, WEFT_INT32, (r + 1) % p, 3, comm, st), WEFT_ERR_INVALID_ARG,
              "nonblocking");
    CHECK_OK(weft_wait(req));
    CHECK_OK(weft_request_free(req));
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, h), "the nonblocking allreduce");

    /* nothing was queued: the stream is clean, the next collective right */
    CHECK_OK(weft_stream_synchronize(st));
    CHECK(dd_check_fill(res, bytes) < 0, "a refused enqueue wrote recvbuf");
    CHECK_OK(weft_allreduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, comm, st));
    CHECK_OK(weft_stream_synchronize(st));
    CHECK_DATA(dd_check_reduced(ci, p, 0, n, res), "the allreduce after the refused calls");
    CHECK_OK(weft_barrier(comm));
    CHECK_OK(weft_stream_destroy(st));
    pthread_barrier_wait(&w->barrier);
    dd_free(e);
    dd_free(res);
    dd_free(h);
    atomic_fetch_add(&w->finished, 1);
}

Test(enqueue, bad_input_queues_nothing, .timeout = 120)
{
    for (int p = 1; p <= 3; p++) {
        world_t w = {0};

        run_world(p, bad_input_body, &w);
    }
}

/* --------------------------------------------------------------- timeout */

static void timeout_setup(void)
{
    init_with_timeout("1");
}

TestSuite(timeout, .init = timeout_setup, .fini = teardown);

/*
 * Rank 0 enqueues an allreduce that rank 1 never joins: synchronize returns
 * WEFT_ERR_TIMEOUT naming the enqueued call, once; the next call on the
 * communicator returns it too; the stream works afterwards. Rank 1 waits
 * for rank 0 to finish (flag[0]) and calls nothing.
 */
static void timeout_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const size_t n = 100, bytes = n * 4;
    unsigned char *e = xalloc(w, r, 1, bytes), *res = xalloc(w, r, 1, bytes);
    unsigned char *h = xalloc(w, r, 0, bytes);
    weft_stream_t st = NULL, other = NULL;

    if (r == 0) {
        double t0, took;
        weft_status_t s;

        dd_fill(CI_INT32_SUM, 5, 0, n, h);
        CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &st));
        CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &other));
        CHECK_OK(weft_allreduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, comm, st));
        t0 = now_s();
        s = weft_stream_synchronize(st);
        took = now_s() - t0;
        CHECK(s == WEFT_ERR_TIMEOUT,
              "weft_stream_synchronize returned %s (%s), expected a "
              "timeout",
              weft_status_string(s), weft_last_error());
        CHECK(strstr(weft_last_error(), "weft_allreduce_enqueue") != NULL,
              "the timeout does not name the enqueued call: %s", weft_last_error());
        CHECK(took < 20.0, "the timeout of 1 s was reported after %.1f s", took);
        /* the failure belongs to its stream: another one synchronizes clean */
        CHECK_OK(weft_stream_synchronize(other));
        CHECK_OK(weft_stream_destroy(other));
        CHECK_OK(weft_stream_synchronize(st)); /* reported once */
        CHECK_ERR(weft_barrier(comm), WEFT_ERR_TIMEOUT, "weft_allreduce_enqueue");
        /* the stream still runs work */
        CHECK_OK(weft_memcpy_async(e, h, bytes, st));
        CHECK_OK(weft_stream_synchronize(st));
        CHECK_DATA(dd_check_values(CI_INT32_SUM, 5, 0, n, e), "a copy after the timeout");
        CHECK_OK(weft_stream_destroy(st));
        atomic_store(&w->flag[0], 1);
    } else {
        /* absent: rank 0's wait is bounded by WEFT_TIMEOUT */
        CHECK(await(&w->flag[0], 1), "rank 0 did not come back from the timed-out operation");
    }
    pthread_barrier_wait(&w->barrier);
    dd_free(e);
    dd_free(res);
    dd_free(h);
    atomic_fetch_add(&w->finished, 1);
}

Test(timeout, reported_by_synchronize_and_the_next_call, .timeout = 120)
{
    world_t w = {0};

    cr_assert_eq(weft__runtime_config.timeout, 1.0, "WEFT_TIMEOUT=1 was not read");
    run_world(2, timeout_body, &w);
}

/*
 * A blocking call waits for the communicator's enqueued operations, with
 * the deadline: rank 0's allreduce is enqueued on a stream held by a closed
 * gate, so its weft_barrier times out without starting; once the gate opens
 * and rank 1 joins, the allreduce and a barrier complete normally.
 */
static void drain_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const size_t n = 257, bytes = n * 4;
    unsigned char *in = xalloc(w, r, 1, bytes), *out = xalloc(w, r, 1, bytes);
    weft_stream_t st = NULL;

    dd_fill(CI_INT32_SUM, r, 0, n, in);
    if (r == 0) {
        gated_t g;
        double t0;

        gated_create(w, r, &g);
        CHECK_OK(weft_allreduce_enqueue(in, out, n, WEFT_INT32, WEFT_SUM, comm, g.st));
        t0 = now_s();
        CHECK_ERR(weft_barrier(comm), WEFT_ERR_TIMEOUT, "enqueued");
        CHECK(now_s() - t0 < 20.0,
              "the wait for enqueued operations took %.1f s with "
              "WEFT_TIMEOUT=1",
              now_s() - t0);
        gated_open(&g);
        atomic_store(&w->flag[0], 1);
        CHECK_OK(weft_stream_synchronize(g.st));
        gated_destroy(w, r, &g);
    } else {
        CHECK(await(&w->flag[0], 1), "rank 0's barrier did not time out");
        CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &st));
        CHECK_OK(weft_allreduce_enqueue(in, out, n, WEFT_INT32, WEFT_SUM, comm, st));
        CHECK_OK(weft_stream_synchronize(st));
        CHECK_OK(weft_stream_destroy(st));
    }
    CHECK_DATA(dd_check_reduced(CI_INT32_SUM, w->p, 0, n, out), "the allreduce after the gate");
    CHECK_OK(weft_barrier(comm));
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(out);
    atomic_fetch_add(&w->finished, 1);
}

Test(timeout, blocking_call_waits_for_enqueued_work_with_a_deadline, .timeout = 120)
{
    world_t w = {0};

    run_world(2, drain_body, &w);
}
