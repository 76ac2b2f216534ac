/*
 * weft_send / weft_recv on in-process ranks with random landing order:
 * payloads, MPI ordering for one tag, matching by tag, no cross-matching
 * with collectives, receives from any source, argument checks.
 */
#include <criterion/criterion.h>

#include "runtime/thread_world.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shared {
    atomic_int failures;
    atomic_int finished;
    char first[256];
} shared_t;

static void fail(shared_t *sh, int rank, const char *what, weft_status_t st)
{
    if (atomic_fetch_add(&sh->failures, 1) == 0) {
        snprintf(sh->first, sizeof(sh->first), "rank %d: %s (%s: %s)", rank, what,
                 weft_status_string(st), weft_last_error());
    }
}

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail(sh, rank, what, WEFT_OK);                                                         \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define CHECK_OK(expr, what)                                                                       \
    do {                                                                                           \
        weft_status_t st_ = (expr);                                                                \
        if (st_ != WEFT_OK) {                                                                      \
            fail(sh, rank, what, st_);                                                             \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void run(int nranks, uint64_t seed, uint64_t delay, weft_thread_rank_fn fn)
{
    shared_t sh = {0};
    weft_thread_world_opts_t opts = {.nranks = nranks, .seed = seed, .max_delay_ns = delay};

    /* a rank whose check failed leaves the others waiting: they fail by
     * the deadline, not the default one */
    setenv("WEFT_TIMEOUT", "30", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft__thread_world_run(&opts, fn, &sh), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(atomic_load(&sh.failures), 0, "%s", sh.first);
    cr_assert_eq(atomic_load(&sh.finished), nranks, "only %d of %d ranks finished",
                 atomic_load(&sh.finished), nranks);
    weft_finalize();
}

/* Ring exchange of several sizes; same-tag ordering; tags out of order. */
static void exchange_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    int size;
    const size_t counts[] = {0, 1, 1000};

    weft_comm_size(comm, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (size_t k = 0; k < 3; k++) {
        int32_t out[1000], in[1000];
        for (size_t i = 0; i < counts[k]; i++) {
            out[i] = rank * 100000 + (int)(k * 1000 + i);
        }
        CHECK_OK(weft_send(out, counts[k], WEFT_INT32, next, 3, comm), "send");
        CHECK_OK(weft_recv(in, counts[k], WEFT_INT32, prev, 3, comm), "recv");
        for (size_t i = 0; i < counts[k]; i++) {
            CHECK(in[i] == prev * 100000 + (int)(k * 1000 + i), "payload");
        }
    }
    /* 50 messages, one tag: received in send order */
    for (int m = 0; m < 50; m++) {
        int64_t v = rank * 1000 + m;
        CHECK_OK(weft_send(&v, 1, WEFT_INT64, next, 9, comm), "send ordered");
    }
    for (int m = 0; m < 50; m++) {
        int64_t v = -1;
        CHECK_OK(weft_recv(&v, 1, WEFT_INT64, prev, 9, comm), "recv ordered");
        CHECK(v == prev * 1000 + m, "same-tag messages overtook each other");
    }
    /* tag 11 sent before tag 12, received the other way round */
    int a = rank, b = -rank - 1, x = 0, y = 0;
    CHECK_OK(weft_send(&a, 1, WEFT_INT32, next, 11, comm), "send 11");
    CHECK_OK(weft_send(&b, 1, WEFT_INT32, next, 12, comm), "send 12");
    CHECK_OK(weft_recv(&y, 1, WEFT_INT32, prev, 12, comm), "recv 12");
    CHECK_OK(weft_recv(&x, 1, WEFT_INT32, prev, 11, comm), "recv 11");
    CHECK(x == prev && y == -prev - 1, "matching by tag");
    /* a point-to-point message in flight across a collective */
    int z = rank + 7, w = 0;
    int32_t sum = rank;
    CHECK_OK(weft_send(&z, 1, WEFT_INT32, next, 0, comm), "send across");
    CHECK_OK(weft_allreduce(WEFT_IN_PLACE, &sum, 1, WEFT_INT32, WEFT_SUM, comm), "allreduce");
    CHECK(sum == size * (size - 1) / 2, "allreduce result");
    CHECK_OK(weft_recv(&w, 1, WEFT_INT32, prev, 0, comm), "recv across");
    CHECK(w == prev + 7, "point-to-point payload after a collective");
    atomic_fetch_add(&sh->finished, 1);
}

Test(p2p, ring_order_tags_and_collectives)
{
    for (uint64_t seed = 0; seed < 4; seed++) {
        run(5, seed, seed == 3 ? 20000 : 0, exchange_body);
    }
    run(1, 1, 0, exchange_body); /* to oneself */
}

static void bad_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    int32_t v[4] = {1, 2, 3, 4};

    CHECK(weft_send(v, 1, WEFT_INT32, 2, 0, comm) == WEFT_ERR_INVALID_ARG, "peer out of range");
    CHECK(strstr(weft_last_error(), "peer") != NULL, "error names the peer");
    CHECK(weft_send(v, 1, WEFT_INT32, -1, 0, comm) == WEFT_ERR_INVALID_ARG, "negative peer");
    CHECK(weft_send(v, 1, WEFT_INT32, WEFT_ANY_SOURCE, 0, comm) == WEFT_ERR_INVALID_ARG,
          "a send to any source");
    CHECK(weft_recv(v, 1, WEFT_INT32, -2, 0, comm) == WEFT_ERR_INVALID_ARG, "receive from -2");
    CHECK(weft_recv_enqueue(v, 1, WEFT_INT32, WEFT_ANY_SOURCE, 0, comm, NULL) ==
              WEFT_ERR_INVALID_ARG,
          "an enqueued receive from any source");
    CHECK(strstr(weft_last_error(), "WEFT_ANY_SOURCE") != NULL, "error names WEFT_ANY_SOURCE");
    CHECK(weft_send(v, 1, WEFT_INT32, 1 - rank, -1, comm) == WEFT_ERR_INVALID_ARG, "tag -1");
    CHECK(weft_recv(v, 1, WEFT_INT32, 1 - rank, WEFT_TAG_UB + 1, comm) == WEFT_ERR_INVALID_ARG,
          "tag too large");
    CHECK(strstr(weft_last_error(), "tag") != NULL, "error names the tag");
    CHECK(weft_send(NULL, 1, WEFT_INT32, 1 - rank, 0, comm) == WEFT_ERR_INVALID_ARG, "NULL buf");
    CHECK(weft_send(v, 1, WEFT_DTYPE_COUNT, 1 - rank, 0, comm) == WEFT_ERR_INVALID_ARG, "dtype");
    CHECK(weft_send(v, 1, WEFT_INT32, 1 - rank, 0, NULL) == WEFT_ERR_INVALID_ARG, "NULL comm");
    CHECK(strstr(weft_last_error(), "weft_send: comm is NULL") != NULL, "error names the call");
    CHECK(weft_wait(NULL) == WEFT_ERR_INVALID_ARG, "NULL request");
    CHECK(strstr(weft_last_error(), "weft_wait: req is NULL") != NULL, "error names the call");
    CHECK(v[0] == 1 && v[3] == 4, "buffer untouched");
    /* a size mismatch is an error on the receiver, and nothing hangs */
    if (rank == 0) {
        CHECK_OK(weft_send(v, 2, WEFT_INT32, 1, 5, comm), "send 2");
    } else {
        int32_t r[4] = {9, 9, 9, 9};
        CHECK(weft_recv(r, 4, WEFT_INT32, 0, 5, comm) == WEFT_ERR_MISMATCH, "size mismatch");
    }
    atomic_fetch_add(&sh->finished, 1);
}

/* Nonblocking: receives posted first, in reverse tag order, completed in
 * any order; many same-tag messages keep their order. */
static void nonblocking_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    int size;
    enum { N = 40 };
    int64_t in[N], out[N];
    weft_request_t rr[N], sr[N];

    weft_comm_size(comm, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int i = 0; i < N; i++) {
        in[i] = -1;
        /* half on tag 1 (ordered), half on distinct tags 100+i */
        CHECK_OK(weft_irecv(&in[i], 1, WEFT_INT64, prev, i % 2 ? 1 : 100 + i, comm, &rr[i]),
                 "irecv");
    }
    for (int i = N - 1; i >= 0; i--) {
        /* distinct tags go out in decreasing index order; the tag-1 messages
         * (odd j) in increasing order, as their receives were posted */
        int j = i % 2 ? N - i : i;
        out[j] = rank * 1000 + j;
        CHECK_OK(weft_isend(&out[j], 1, WEFT_INT64, next, j % 2 ? 1 : 100 + j, comm, &sr[j]),
                 "isend");
    }
    CHECK_OK(weft_waitall(N, rr), "waitall recv");
    CHECK_OK(weft_waitall(N, sr), "waitall send");
    for (int i = 0; i < N; i++) {
        CHECK(in[i] == prev * 1000 + i, "nonblocking payload or order");
        weft_request_free(rr[i]);
        weft_request_free(sr[i]);
    }
    atomic_fetch_add(&sh->finished, 1);
}

Test(p2p, nonblocking_order_and_tags)
{
    for (uint64_t seed = 0; seed < 4; seed++) {
        run(4, seed, 0, nonblocking_body);
    }
}

Test(p2p, bad_arguments_and_mismatch)
{
    run(2, 3, 0, bad_body);
}

/*
 * Receives from any source: rank 0 takes K messages from every other rank
 * through WEFT_ANY_SOURCE receives, learns each sender, and sees every
 * sender's messages in their send order; a receive posted before another
 * takes the first message both could match, whatever their peers; weft_recv
 * itself takes WEFT_ANY_SOURCE; weft_request_source's errors.
 */
enum { ANY_K = 6 };

static void any_source_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    int size;

    weft_comm_size(comm, &size);
    if (rank != 0) {
        for (int m = 0; m < ANY_K; m++) {
            int64_t v[3] = {rank, m, rank * 1000 + m};
            CHECK_OK(weft_send(v, 3, WEFT_INT64, 0, 4, comm), "send to 0");
        }
        if (rank == 1) {
            int32_t a = 111, b = 222;
            CHECK_OK(weft_send(&a, 1, WEFT_INT32, 0, 6, comm), "send a");
            CHECK_OK(weft_send(&b, 1, WEFT_INT32, 0, 6, comm), "send b");
        }
        if (rank == 1) { /* blocking sends, in order: see the receives below */
            for (int m = 0; m < ANY_K; m++) {
                CHECK_OK(weft_send(&m, 1, WEFT_INT32, 0, 10, comm), "send ordered");
            }
        }
        if (rank == size - 1) {
            int32_t c = 333;
            CHECK_OK(weft_send(&c, 1, WEFT_INT32, 0, 7, comm), "send c");
        }
    } else {
        int n = (size - 1) * ANY_K, next[64] = {0}, src = -5;
        int64_t(*in)[3] = calloc((size_t)n, sizeof(*in));
        weft_request_t *rr = calloc((size_t)n, sizeof(*rr));
        weft_request_t ra, rb, sreq;
        int32_t a = 0, b = 0, c = 0;

        CHECK(in != NULL && rr != NULL && size <= 64, "test setup");
        for (int i = 0; i < n; i++) {
            CHECK_OK(weft_irecv(in[i], 3, WEFT_INT64, WEFT_ANY_SOURCE, 4, comm, &rr[i]),
                     "irecv any");
        }
        CHECK(weft_request_source(rr[0], &src) == WEFT_ERR_INVALID_ARG && src == -5,
              "the source of a receive not yet complete");
        CHECK(strstr(weft_last_error(), "not complete") != NULL, "error says not complete");
        CHECK_OK(weft_waitall(n, rr), "waitall any");
        for (int i = 0; i < n; i++) {
            CHECK_OK(weft_request_source(rr[i], &src), "request source");
            CHECK(src >= 1 && src < size, "source out of range");
            CHECK(in[i][0] == src, "the reported source is not the message's sender");
            CHECK(in[i][1] == next[src] && in[i][2] == src * 1000 + next[src],
                  "one sender's messages overtook each other");
            next[src]++;
            weft_request_free(rr[i]);
        }
        for (int q = 1; q < size; q++) {
            CHECK(next[q] == ANY_K, "not every sender's messages arrived");
        }
        /* posting order: the any-source receive came first, so it takes a */
        CHECK_OK(weft_irecv(&a, 1, WEFT_INT32, WEFT_ANY_SOURCE, 6, comm, &ra), "irecv a");
        CHECK_OK(weft_irecv(&b, 1, WEFT_INT32, 1, 6, comm, &rb), "irecv b");
        CHECK_OK(weft_wait(rb), "wait b");
        CHECK_OK(weft_wait(ra), "wait a");
        CHECK(a == 111 && b == 222, "receives matched out of posting order");
        CHECK_OK(weft_request_source(ra, &src), "source a");
        CHECK(src == 1, "source of a");
        CHECK_OK(weft_request_source(rb, &src), "source b");
        CHECK(src == 1, "a named peer is its own source");
        weft_request_free(ra);
        weft_request_free(rb);
        /* receives from one peer, all posted before any completes, match
         * its blocking sends in the order they were posted */
        int32_t got[ANY_K];
        for (int m = 0; m < ANY_K; m++) {
            CHECK_OK(weft_irecv(&got[m], 1, WEFT_INT32, 1, 10, comm, &rr[m]), "irecv ordered");
        }
        CHECK_OK(weft_waitall(ANY_K, rr), "waitall ordered");
        for (int m = 0; m < ANY_K; m++) {
            CHECK(got[m] == m, "receives matched out of posting order");
            weft_request_free(rr[m]);
        }
        /* blocking */
        CHECK_OK(weft_recv(&c, 1, WEFT_INT32, WEFT_ANY_SOURCE, 7, comm), "recv any");
        CHECK(c == 333, "blocking receive from any source");
        /* a send has no source; a NULL out-parameter */
        CHECK_OK(weft_isend(&c, 1, WEFT_INT32, 0, 8, comm, &sreq), "isend to self");
        CHECK_OK(weft_recv(&a, 1, WEFT_INT32, WEFT_ANY_SOURCE, 8, comm), "recv from self");
        CHECK(a == 333, "a message to oneself from any source");
        CHECK_OK(weft_wait(sreq), "wait send");
        src = -5;
        CHECK(weft_request_source(sreq, &src) == WEFT_ERR_INVALID_ARG && src == -5,
              "a send's source");
        CHECK(weft_request_source(sreq, NULL) == WEFT_ERR_INVALID_ARG, "NULL source");
        weft_request_free(sreq);
        free(in);
        free(rr);
    }
    /* the communicator still runs collectives */
    int32_t sum = rank;
    CHECK_OK(weft_allreduce(WEFT_IN_PLACE, &sum, 1, WEFT_INT32, WEFT_SUM, comm), "allreduce");
    CHECK(sum == size * (size - 1) / 2, "allreduce after receives from any source");
    atomic_fetch_add(&sh->finished, 1);
}

Test(p2p, any_source)
{
    for (uint64_t seed = 0; seed < 4; seed++) {
        run(5, seed, seed == 3 ? 20000 : 0, any_source_body);
    }
    run(2, 1, 0, any_source_body);
}

/* On a split communicator the source is a rank of that communicator. */
static void any_source_split_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_comm_t half;
    int hrank, hsize, src = -1;
    int32_t v = rank;

    /* ranks 1, 3, 5 in one half (ranks 0, 1, 2 of it); the others in the other */
    CHECK_OK(weft_comm_split(comm, rank % 2, -rank, &half), "split");
    weft_comm_rank(half, &hrank);
    weft_comm_size(half, &hsize);
    if (hrank == 0) {
        for (int i = 1; i < hsize; i++) {
            weft_request_t r;
            CHECK_OK(weft_irecv(&v, 1, WEFT_INT32, WEFT_ANY_SOURCE, 2, half, &r), "irecv");
            CHECK_OK(weft_wait(r), "wait");
            CHECK_OK(weft_request_source(r, &src), "source");
            weft_request_free(r);
            CHECK(src >= 1 && src < hsize, "source is not a rank of the split communicator");
            CHECK(v % 2 == rank % 2, "a message from the other half");
            /* keys -rank: this half's ranks in decreasing world rank, this
             * one (its largest) first */
            CHECK(src == (rank - v) / 2, "the source is not the sender's rank in the half");
        }
    } else {
        CHECK_OK(weft_send(&v, 1, WEFT_INT32, 0, 2, half), "send");
    }
    weft_comm_destroy(half);
    atomic_fetch_add(&sh->finished, 1);
}

Test(p2p, any_source_on_a_split_communicator)
{
    run(6, 2, 0, any_source_split_body);
}

/* A receive from any source that nothing matches times out, naming it. */
static void any_source_timeout_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_comm_t dup;
    int32_t v = 0;

    CHECK_OK(weft_comm_dup(comm, &dup), "dup");
    if (rank == 0) {
        CHECK_OK(weft_comm_set_timeout(dup, 0.3), "timeout");
        CHECK(weft_recv(&v, 1, WEFT_INT32, WEFT_ANY_SOURCE, 77, dup) == WEFT_ERR_TIMEOUT,
              "a receive from any source with no message");
        CHECK(strstr(weft_last_error(), "rank(s) any") != NULL, "the timeout names no source");
    }
    weft_comm_destroy(dup);
    atomic_fetch_add(&sh->finished, 1);
}

Test(p2p, any_source_timeout)
{
    run(2, 1, 0, any_source_timeout_body);
}

/*
 * Blocking calls poll their message directly for a moment and hand a longer wait, or a failure,
 * to a schedule (runtime/p2p.c p2p_direct): a receive whose sender comes 50 ms late gets its
 * data; a size mismatch found in the direct polls (the message there first) and one found in the
 * schedule's wait (the message later) both fail the receive alone with the call named, and the
 * communicator goes on.
 */
static void late_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    const struct timespec nap = {0, 50 * 1000 * 1000};
    int32_t v[4] = {5, 6, 7, 8}, r[4] = {0, 0, 0, 0};

    if (rank == 0) {
        nanosleep(&nap, NULL);
        CHECK_OK(weft_send(v, 4, WEFT_INT32, 1, 1, comm), "late send");
        CHECK_OK(weft_send(v, 2, WEFT_INT32, 1, 2, comm), "send 2 of 4 first");
        nanosleep(&nap, NULL);
        CHECK_OK(weft_send(v, 2, WEFT_INT32, 1, 3, comm), "late send 2 of 4");
    } else {
        CHECK_OK(weft_recv(r, 4, WEFT_INT32, 0, 1, comm), "receive a late message");
        CHECK(r[0] == 5 && r[3] == 8, "payload of a late message");
        nanosleep(&nap, NULL);
        CHECK(weft_recv(r, 4, WEFT_INT32, 0, 2, comm) == WEFT_ERR_MISMATCH,
              "size mismatch, message first");
        CHECK(strstr(weft_last_error(), "weft_recv") != NULL, "the error names the call");
        CHECK(weft_recv(r, 4, WEFT_INT32, 0, 3, comm) == WEFT_ERR_MISMATCH,
              "size mismatch, message later");
        CHECK(strstr(weft_last_error(), "weft_recv") != NULL, "the error names the call");
    }
    int32_t sum = rank;
    CHECK_OK(weft_allreduce(WEFT_IN_PLACE, &sum, 1, WEFT_INT32, WEFT_SUM, comm), "allreduce");
    CHECK(sum == 1, "allreduce after the mismatches");
    atomic_fetch_add(&sh->finished, 1);
}

Test(p2p, blocking_calls_past_their_direct_polls)
{
    run(2, 5, 0, late_body);
}
