/*
 * Capture and replay (weft_stream_begin_capture, weft_stream_end_capture,
 * weft_graph_launch, weft_graph_destroy) among in-process ranks on emu
 * streams:
 *  - replay: copy in, allreduce, copy out captured once (nothing runs while
 *    capturing) and launched 8 times with new inputs, an ordinary enqueued
 *    bcast on the same communicator on another stream between launches;
 *    launched on another stream too;
 *  - two communicators and point-to-point in one graph: a ring of sends and
 *    receives on a duplicate, then an allreduce of what arrived on the
 *    first, launched 3 times; a group (weft_group_start/end) captured as one
 *    step, every rank sending to all before receiving, launched 3 times;
 *  - errors: capture twice, end without capture, a NULL graph_p, synchronize
 *    while capturing, a bad call while capturing (it fails, nothing is
 *    recorded), a launch after a captured communicator was destroyed (it
 *    fails and queues nothing: the copy before it does not run), a
 *    destroyed graph, a stream destroyed while it captures.
 */
#include "tests/coll/device_world.h"

TestSuite(graph, .init = setup, .fini = teardown);

#define LAUNCHES 8

static void replay_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM;
    const size_t n = 20001, bytes = n * 4;
    unsigned char *in = xalloc(w, r, 0, bytes), *out = xalloc(w, r, 0, bytes);
    unsigned char *e = xalloc(w, r, 1, bytes), *res = xalloc(w, r, 1, bytes);
    unsigned char *bc = xalloc(w, r, 1, bytes);
    weft_stream_t s = NULL, t = NULL;
    weft_graph_t g = NULL;

    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &s));
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &t));
    CHECK_OK(weft_stream_begin_capture(s));
    CHECK_OK(weft_memcpy_async(e, in, bytes, s));
    CHECK_OK(weft_allreduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, comm, s));
    CHECK_OK(weft_memcpy_async(out, res, bytes, s));
    CHECK_OK(weft_stream_end_capture(s, &g));
    CHECK_OK(weft_stream_synchronize(s));
    CHECK(dd_check_fill(e, bytes) < 0 && dd_check_fill(res, bytes) < 0 &&
              dd_check_fill(out, bytes) < 0,
          "captured work ran");
    for (int i = 0; i < LAUNCHES; i++) {
        dd_fill(ci, r, 1000 * (size_t)i, n, in);
        CHECK_OK(weft_graph_launch(g, i % 4 == 3 ? t : s));
        if (r == i % p) {
            dd_fill(ci, r, 7 * (size_t)i, n, bc);
        }
        /* an ordinary enqueue between launches, on another stream */
        CHECK_OK(weft_bcast_enqueue(bc, n, WEFT_INT32, i % p, comm, i % 4 == 3 ? s : t));
        CHECK_OK(weft_stream_synchronize(s));
        CHECK_OK(weft_stream_synchronize(t));
        CHECK_DATA(dd_check_reduced(ci, p, 1000 * (size_t)i, n, out), "launch %d", i);
        CHECK_DATA(dd_check_values(ci, i % p, 7 * (size_t)i, n, bc), "bcast after launch %d", i);
    }
    CHECK(dd_guard_ok(out, bytes) && dd_guard_ok(res, bytes), "wrote past a buffer");
    CHECK_OK(weft_graph_destroy(g));
    CHECK_OK(weft_stream_destroy(s));
    CHECK_OK(weft_stream_destroy(t));
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(out);
    dd_free(e);
    dd_free(res);
    dd_free(bc);
    atomic_fetch_add(&w->finished, 1);
}

Test(graph, captured_once_launched_many_times, .timeout = 120)
{
    for (int p = 1; p <= 4; p++) {
        world_t w = {0};

        run_world(p, replay_body, &w);
    }
}

static void two_comms_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM, to = (r + 1) % p, from = (r + p - 1) % p;
    const size_t n = 3001, bytes = n * 4;
    unsigned char *sb = xalloc(w, r, 1, bytes), *rb = xalloc(w, r, 1, bytes);
    unsigned char *res = xalloc(w, r, 1, bytes);
    weft_comm_t dup = NULL;
    weft_stream_t s = NULL;
    weft_graph_t g = NULL;

    CHECK_OK(weft_comm_dup(comm, &dup));
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &s));
    CHECK_OK(weft_stream_begin_capture(s));
    if (r % 2 == 0) {
        CHECK_OK(weft_send_enqueue(sb, n, WEFT_INT32, to, 3, dup, s));
        CHECK_OK(weft_recv_enqueue(rb, n, WEFT_INT32, from, 3, dup, s));
    } else {
        CHECK_OK(weft_recv_enqueue(rb, n, WEFT_INT32, from, 3, dup, s));
        CHECK_OK(weft_send_enqueue(sb, n, WEFT_INT32, to, 3, dup, s));
    }
    CHECK_OK(weft_allreduce_enqueue(rb, res, n, WEFT_INT32, WEFT_SUM, comm, s));
    CHECK_OK(weft_stream_end_capture(s, &g));
    for (int i = 0; i < 3; i++) {
        dd_fill(ci, r, 500 * (size_t)i, n, sb);
        CHECK_OK(weft_graph_launch(g, s));
        CHECK_OK(weft_stream_synchronize(s));
        CHECK_DATA(dd_check_values(ci, from, 500 * (size_t)i, n, rb), "ring, launch %d", i);
        CHECK_DATA(dd_check_reduced(ci, p, 500 * (size_t)i, n, res), "allreduce, launch %d", i);
    }
    CHECK_OK(weft_graph_destroy(g));
    CHECK_OK(weft_stream_destroy(s));
    CHECK_OK(weft_comm_destroy(dup));
    pthread_barrier_wait(&w->barrier);
    dd_free(sb);
    dd_free(rb);
    dd_free(res);
    atomic_fetch_add(&w->finished, 1);
}

Test(graph, two_communicators_and_point_to_point, .timeout = 120)
{
    for (int p = 2; p <= 4; p++) {
        world_t w = {0};

        run_world(p, two_comms_body, &w);
    }
}

/* A group captured (every rank sends to every rank, then receives from each, messages large
 * enough that a send waits for its receive), launched 3 times with new data. */
static void group_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const int p = w->p, ci = CI_INT32_SUM;
    const size_t n = 100001, bytes = n * 4;
    unsigned char *sb = xalloc(w, r, 1, bytes), *rb = xalloc(w, r, 1, bytes * (size_t)p);
    weft_stream_t s = NULL;
    weft_graph_t g = NULL;

    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &s));
    CHECK_OK(weft_stream_begin_capture(s));
    CHECK_OK(weft_group_start());
    for (int q = 0; q < p; q++) {
        CHECK_OK(weft_send_enqueue(sb, n, WEFT_INT32, q, 2, comm, s));
    }
    for (int q = 0; q < p; q++) {
        CHECK_OK(weft_recv_enqueue(rb + (size_t)q * bytes, n, WEFT_INT32, q, 2, comm, s));
    }
    CHECK_OK(weft_group_end());
    CHECK_OK(weft_stream_end_capture(s, &g));
    CHECK(dd_check_fill(rb, bytes * (size_t)p) < 0, "the captured group ran");
    for (int i = 0; i < 3; i++) {
        dd_fill(ci, r, 300 * (size_t)i, n, sb);
        CHECK_OK(weft_graph_launch(g, s));
        CHECK_OK(weft_stream_synchronize(s));
        for (int q = 0; q < p; q++) {
            CHECK_DATA(dd_check_values(ci, q, 300 * (size_t)i, n, rb + (size_t)q * bytes),
                       "launch %d, from rank %d", i, q);
        }
    }
    CHECK_OK(weft_graph_destroy(g));
    CHECK_OK(weft_stream_destroy(s));
    pthread_barrier_wait(&w->barrier);
    dd_free(sb);
    dd_free(rb);
    atomic_fetch_add(&w->finished, 1);
}

Test(graph, a_group_captured_and_launched, .timeout = 120)
{
    for (int p = 1; p <= 3; p++) {
        world_t w = {0};

        run_world(p, group_body, &w);
    }
}

static void errors_body(weft_comm_t comm, int r, void *arg)
{
    world_t *w = arg;
    const size_t n = 100, bytes = n * 4;
    unsigned char *in = xalloc(w, r, 0, bytes), *e = xalloc(w, r, 1, bytes);
    unsigned char *res = xalloc(w, r, 1, bytes);
    weft_comm_t dup = NULL;
    weft_stream_t s = NULL, s2 = NULL;
    weft_graph_t g = NULL, empty = NULL;

    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &s));
    CHECK_ERR(weft_stream_end_capture(s, &g), WEFT_ERR_INVALID_ARG, "is not capturing");
    CHECK_OK(weft_stream_begin_capture(s));
    CHECK_ERR(weft_stream_begin_capture(s), WEFT_ERR_INVALID_ARG, "capturing already");
    CHECK_ERR(weft_stream_synchronize(s), WEFT_ERR_INVALID_ARG, "is capturing");
    CHECK_ERR(weft_allreduce_enqueue(e, res, n, (weft_dtype_t)99, WEFT_SUM, comm, s),
              WEFT_ERR_INVALID_ARG, "dtype");
    CHECK_ERR(weft_stream_end_capture(s, NULL), WEFT_ERR_INVALID_ARG, "graph_p is NULL");
    CHECK_OK(weft_stream_end_capture(s, &empty)); /* the bad call recorded nothing */
    CHECK_OK(weft_graph_launch(empty, s));
    CHECK_OK(weft_stream_synchronize(s));
    CHECK_OK(weft_graph_destroy(empty));
    CHECK_ERR(weft_graph_launch(empty, s), WEFT_ERR_INVALID_ARG, "graph");
    CHECK_ERR(weft_graph_destroy(empty), WEFT_ERR_INVALID_ARG, "not a live graph");

    /* a launch after a captured communicator was destroyed queues nothing */
    CHECK_OK(weft_comm_dup(comm, &dup));
    CHECK_OK(weft_stream_begin_capture(s));
    CHECK_OK(weft_memcpy_async(e, in, bytes, s));
    CHECK_OK(weft_allreduce_enqueue(e, res, n, WEFT_INT32, WEFT_SUM, dup, s));
    CHECK_OK(weft_stream_end_capture(s, &g));
    CHECK_OK(weft_comm_destroy(dup));
    memset(in, 1, bytes);
    CHECK_ERR(weft_graph_launch(g, s), WEFT_ERR_INVALID_ARG, "comm");
    CHECK_OK(weft_stream_synchronize(s));
    CHECK(dd_check_fill(e, bytes) < 0, "a failed launch queued its first step");
    CHECK_OK(weft_graph_destroy(g));

    /* a stream destroyed while it captures: the capture is dropped */
    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &s2));
    CHECK_OK(weft_stream_begin_capture(s2));
    CHECK_OK(weft_memcpy_async(e, in, bytes, s2));
    CHECK_OK(weft_stream_destroy(s2));
    CHECK_ERR(weft_stream_end_capture(s2, &g), WEFT_ERR_INVALID_ARG, "is not capturing");
    CHECK_OK(weft_stream_destroy(s));
    pthread_barrier_wait(&w->barrier);
    dd_free(in);
    dd_free(e);
    dd_free(res);
    atomic_fetch_add(&w->finished, 1);
}

Test(graph, errors_change_nothing, .timeout = 120)
{
    for (int p = 1; p <= 2; p++) {
        world_t w = {0};

        run_world(p, errors_body, &w);
    }
}
