/*
 * Argument validation of the public collectives and communicator calls, on a
 * one-rank world (weft_comm_world) and on a 4-rank in-process world.
 *
 * Every bad input must return WEFT_ERR_INVALID_ARG, name the argument in
 * weft_last_error(), send nothing (the communicator's sequence number does
 * not move) and touch no memory: all buffers of a call live in one arena
 * filled with a pattern that is compared byte for byte afterwards.
 *
 * Criterion asserts only work on the test's main thread, so the checks
 * record failures in a shared log that the main thread asserts empty.
 */
#include <criterion/criterion.h>

#include "runtime/comm.h"
#include "runtime/thread_world.h"
#include "tests/harness.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void clean_env(void)
{
    cr_assert_eq(harness_reset_env(NULL), 0, "cannot list the configuration registry");
    setenv("WEFT_TIMEOUT", "10", 1); /* a broken collective fails the test instead of hanging */
}

/* ------------------------------------------------------------ arena */

#define ARENA_BYTES 8192
#define BUF_OFF 1024 /* every test buffer starts at or after this offset */

typedef struct ctx {
    weft_comm_t comm;
    int rank;
    int size;
    unsigned char *arena;
} ctx_t;

static unsigned char pattern(const ctx_t *c, size_t i)
{
    return (unsigned char)(i * 131u + (unsigned)c->rank * 17u + 3u);
}

static void arena_fill(ctx_t *c)
{
    for (size_t i = 0; i < ARENA_BYTES; i++) {
        c->arena[i] = pattern(c, i);
    }
}

/* Offset of the first changed byte, or -1. */
static long arena_changed(const ctx_t *c)
{
    for (size_t i = 0; i < ARENA_BYTES; i++) {
        if (c->arena[i] != pattern(c, i)) {
            return (long)i;
        }
    }
    return -1;
}

static void *at(ctx_t *c, size_t off)
{
    return c->arena + BUF_OFF + off;
}

/* ------------------------------------------------------------ calls */

typedef enum { ALLREDUCE, REDUCE_SCATTER, ALLGATHER } kind_t;

static const char *const kind_names[] = {"allreduce", "reduce_scatter", "allgather"};

static weft_status_t call(kind_t k, const void *s, void *r, size_t count, weft_dtype_t dtype,
                          weft_op_t op, weft_comm_t comm)
{
    switch (k) {
    case ALLREDUCE:
        return weft_allreduce(s, r, count, dtype, op, comm);
    case REDUCE_SCATTER:
        return weft_reduce_scatter(s, r, count, dtype, op, comm);
    case ALLGATHER:
        return weft_allgather(s, r, count, dtype, comm);
    }
    return WEFT_ERR_INTERNAL;
}

/*
 * One bad call: INVALID_ARG, every word of `words` (NULL-terminated) in the
 * message, arena unchanged, no sequence number taken from c->comm.
 */
static void expect_bad_at(int line, ctx_t *c, kind_t k, const void *s, void *r, size_t count,
                          weft_dtype_t dtype, weft_op_t op, weft_comm_t comm,
                          const char *const *words)
{
    uint32_t seq = weft__comm_of(c->comm)->seq;
    weft_status_t st;
    long changed;

    arena_fill(c);
    st = call(k, s, r, count, dtype, op, comm);
    if (st != WEFT_ERR_INVALID_ARG) {
        harness_fail(line,
                     "rank %d/%d %s(count %zu, dtype %d, op %d): status %d (%s), "
                     "expected INVALID_ARG",
                     c->rank, c->size, kind_names[k], count, (int)dtype, (int)op, st,
                     weft_status_string(st));
    }
    for (int i = 0; words[i] != NULL; i++) {
        if (strstr(weft_last_error(), words[i]) == NULL) {
            harness_fail(line, "rank %d/%d %s: message '%s' does not name '%s'", c->rank, c->size,
                         kind_names[k], weft_last_error(), words[i]);
        }
    }
    if (strstr(weft_last_error(), kind_names[k]) == NULL) {
        harness_fail(line, "rank %d/%d: message '%s' does not name the call %s", c->rank, c->size,
                     weft_last_error(), kind_names[k]);
    }
    changed = arena_changed(c);
    if (changed >= 0) {
        harness_fail(line, "rank %d/%d %s: buffer byte %ld changed by a rejected call", c->rank,
                     c->size, kind_names[k], changed - BUF_OFF);
    }
    if (weft__comm_of(c->comm)->seq != seq) {
        harness_fail(line, "rank %d/%d %s: rejected call took sequence number %u", c->rank, c->size,
                     kind_names[k], seq);
    }
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define expect_bad(c, k, s, r, count, dtype, op, comm, ...)                                        \
    expect_bad_at(__LINE__, c, k, s, r, count, dtype, op, comm, WORDS(__VA_ARGS__))

static const weft_dtype_t float_dtypes[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
                                            WEFT_FLOAT64};
static const weft_op_t int_only_ops[] = {WEFT_BAND, WEFT_BOR, WEFT_BXOR,
                                         WEFT_LAND, WEFT_LOR, WEFT_LXOR};

/* Every bad input the API rejects, for the three collectives, on c->comm. */
static void bad_inputs(ctx_t *c)
{
    const int p = c->size, r = c->rank;
    const size_t n = 4;       /* elements per rank block */
    const size_t blk = n * 4; /* bytes of one int32/float32 block */
    const size_t whole = blk * (size_t)p;
    const int other = r + 1 < p ? r + 1 : 1; /* neither this rank nor 0 when p > 2 */
    weft_comm_t dead = NULL;
    weft_status_t st;

    for (int k = ALLREDUCE; k <= ALLGATHER; k++) {
        /* send and recv each big enough for size * n elements */
        void *sbuf = at(c, 0), *rbuf = at(c, 2048);

        /* NULL buffers with count > 0 */
        expect_bad(c, k, sbuf, NULL, n, WEFT_INT32, WEFT_SUM, c->comm, "recvbuf");
        expect_bad(c, k, NULL, rbuf, n, WEFT_INT32, WEFT_SUM, c->comm, "sendbuf");
        expect_bad(c, k, WEFT_IN_PLACE, NULL, n, WEFT_INT32, WEFT_SUM, c->comm, "recvbuf");

        /* count * element size (* ranks) overflows size_t */
        expect_bad(c, k, sbuf, rbuf, SIZE_MAX / 2, WEFT_INT32, WEFT_SUM, c->comm, "count");
        expect_bad(c, k, sbuf, rbuf, SIZE_MAX, WEFT_INT32, WEFT_SUM, c->comm, "count");
        expect_bad(c, k, sbuf, rbuf, SIZE_MAX / 8 + 1, WEFT_FLOAT64, WEFT_SUM, c->comm, "count");
        expect_bad(c, k, sbuf, rbuf, SIZE_MAX / 4 + 1, WEFT_FLOAT32, WEFT_SUM, c->comm, "count");
        if (k != ALLREDUCE && p > 1) {
            /* fits one rank's block, but not size * count elements */
            expect_bad(c, k, sbuf, rbuf, SIZE_MAX / 4 / (size_t)p + 1, WEFT_INT32, WEFT_SUM,
                       c->comm, "count");
        }
        /* the overflow is reported even when the buffers are NULL */
        expect_bad(c, k, NULL, NULL, SIZE_MAX / 2, WEFT_INT64, WEFT_SUM, c->comm, "count");

        /* dtype out of range */
        expect_bad(c, k, sbuf, rbuf, n, WEFT_DTYPE_COUNT, WEFT_SUM, c->comm, "dtype");
        expect_bad(c, k, sbuf, rbuf, n, (weft_dtype_t)-1, WEFT_SUM, c->comm, "dtype");
        expect_bad(c, k, sbuf, rbuf, n, (weft_dtype_t)1000, WEFT_SUM, c->comm, "dtype");
        expect_bad(c, k, NULL, NULL, 0, (weft_dtype_t)-1, WEFT_SUM, c->comm, "dtype");

        /* op out of range, and ops undefined for float types */
        if (k != ALLGATHER) {
            expect_bad(c, k, sbuf, rbuf, n, WEFT_INT32, WEFT_OP_COUNT, c->comm, " op ");
            expect_bad(c, k, sbuf, rbuf, n, WEFT_INT32, (weft_op_t)-1, c->comm, " op ");
            expect_bad(c, k, sbuf, rbuf, n, WEFT_FLOAT32, (weft_op_t)99, c->comm, " op ");
            for (size_t d = 0; d < sizeof(float_dtypes) / sizeof(float_dtypes[0]); d++) {
                for (size_t o = 0; o < sizeof(int_only_ops) / sizeof(int_only_ops[0]); o++) {
                    expect_bad(c, k, sbuf, rbuf, n, float_dtypes[d], int_only_ops[o], c->comm,
                               " op ", weft_op_name(int_only_ops[o]), "dtype",
                               weft_dtype_name(float_dtypes[d]));
                    /* in place and count 0 do not make it valid */
                    expect_bad(c, k, WEFT_IN_PLACE, rbuf, n, float_dtypes[d], int_only_ops[o],
                               c->comm, " op ");
                    expect_bad(c, k, NULL, NULL, 0, float_dtypes[d], int_only_ops[o], c->comm,
                               " op ");
                }
            }
        }

        /* NULL communicator */
        expect_bad(c, k, sbuf, rbuf, n, WEFT_INT32, WEFT_SUM, NULL, "comm", "NULL");
        expect_bad(c, k, NULL, NULL, 0, WEFT_INT32, WEFT_SUM, NULL, "comm");

        /* overlapping buffers that are not one of the in-place forms */
        switch (k) {
        case ALLREDUCE:
            expect_bad(c, k, at(c, 4), at(c, 0), n, WEFT_INT32, WEFT_SUM, c->comm, "overlap");
            expect_bad(c, k, at(c, 0), at(c, 4), n, WEFT_INT32, WEFT_SUM, c->comm, "overlap");
            expect_bad(c, k, at(c, 1), at(c, 0), n, WEFT_INT32, WEFT_SUM, c->comm, "overlap");
            expect_bad(c, k, at(c, 8), at(c, 0), n, WEFT_FLOAT64, WEFT_MAX, c->comm, "overlap");
            break;
        case REDUCE_SCATTER:
            /* send holds p * n elements, recv n */
            expect_bad(c, k, at(c, 4), at(c, 0), n, WEFT_INT32, WEFT_SUM, c->comm, "overlap");
            expect_bad(c, k, at(c, 0), at(c, 4), n, WEFT_INT32, WEFT_SUM, c->comm, "overlap");
            expect_bad(c, k, at(c, 0), at(c, whole - 4), n, WEFT_INT32, WEFT_SUM, c->comm,
                       "overlap");
            if (p > 2) {
                /* another rank's slot of sendbuf (slot 0 would be sendbuf == recvbuf) */
                expect_bad(c, k, at(c, 0), at(c, (size_t)other * blk), n, WEFT_INT32, WEFT_SUM,
                           c->comm, "overlap");
            }
            break;
        case ALLGATHER:
            /* recv holds p * n elements, send n */
            expect_bad(c, k, at(c, 4), at(c, 0), n, WEFT_INT32, WEFT_SUM, c->comm, "overlap");
            expect_bad(c, k, at(c, 0), at(c, 4), n, WEFT_INT32, WEFT_SUM, c->comm, "overlap");
            expect_bad(c, k, at(c, whole - 4), at(c, 0), n, WEFT_INT32, WEFT_SUM, c->comm,
                       "overlap");
            if (p > 2) {
                /* another rank's slot of recvbuf (slot 0 would be sendbuf == recvbuf) */
                expect_bad(c, k, at(c, (size_t)other * blk), at(c, 0), n, WEFT_INT32, WEFT_SUM,
                           c->comm, "overlap");
            }
            break;
        }
    }

    /* a destroyed communicator: a one-rank world made, destroyed, then used */
    st = weft_comm_world(&dead);
    EXPECT(st == WEFT_OK, "rank %d: weft_comm_world: %s", r, weft_last_error());
    if (st == WEFT_OK) {
        int v = -5;

        EXPECT(weft_comm_destroy(dead) == WEFT_OK, "destroy: %s", weft_last_error());
        for (int k = ALLREDUCE; k <= ALLGATHER; k++) {
            expect_bad(c, k, at(c, 0), at(c, 2048), 4, WEFT_INT32, WEFT_SUM, dead, "comm",
                       "destroyed");
        }
        EXPECT(weft_comm_rank(dead, &v) == WEFT_ERR_INVALID_ARG && v == -5,
               "rank of a destroyed comm");
        EXPECT(strstr(weft_last_error(), "destroyed") != NULL, "'%s'", weft_last_error());
        EXPECT(weft_comm_size(dead, &v) == WEFT_ERR_INVALID_ARG && v == -5,
               "size of a destroyed comm");
        EXPECT(weft_comm_destroy(dead) == WEFT_ERR_INVALID_ARG, "destroyed twice");
        EXPECT(strstr(weft_last_error(), "destroyed") != NULL, "'%s'", weft_last_error());
    }
}

/* weft_comm_rank/size/destroy/world with bad arguments. */
static void bad_comm_calls(ctx_t *c)
{
    int v = -7;
    struct weft_comm fake_comm;
    weft_comm_t fake = (weft_comm_t)(void *)&fake_comm; /* a pointer, not a handle */

    memset(&fake_comm, 0, sizeof(fake_comm));
    EXPECT(weft_comm_rank(NULL, &v) == WEFT_ERR_INVALID_ARG && v == -7, "rank(NULL)");
    EXPECT(strstr(weft_last_error(), "comm") != NULL, "'%s'", weft_last_error());
    EXPECT(weft_comm_size(NULL, &v) == WEFT_ERR_INVALID_ARG && v == -7, "size(NULL)");
    EXPECT(strstr(weft_last_error(), "comm") != NULL, "'%s'", weft_last_error());
    EXPECT(weft_comm_rank(c->comm, NULL) == WEFT_ERR_INVALID_ARG, "rank(comm, NULL)");
    EXPECT(strstr(weft_last_error(), "rank") != NULL, "'%s'", weft_last_error());
    EXPECT(weft_comm_size(c->comm, NULL) == WEFT_ERR_INVALID_ARG, "size(comm, NULL)");
    EXPECT(strstr(weft_last_error(), "size") != NULL, "'%s'", weft_last_error());
    EXPECT(weft_comm_destroy(NULL) == WEFT_ERR_INVALID_ARG, "destroy(NULL)");
    EXPECT(strstr(weft_last_error(), "comm") != NULL, "'%s'", weft_last_error());
    EXPECT(weft_comm_world(NULL) == WEFT_ERR_INVALID_ARG, "world(NULL)");
    EXPECT(strstr(weft_last_error(), "comm") != NULL, "'%s'", weft_last_error());
    /* something that is not a communicator at all */
    EXPECT(weft_comm_rank(fake, &v) == WEFT_ERR_INVALID_ARG && v == -7, "rank(fake)");
    EXPECT(strstr(weft_last_error(), "comm") != NULL, "'%s'", weft_last_error());
    EXPECT(weft_allreduce(at(c, 0), at(c, 64), 1, WEFT_INT32, WEFT_SUM, fake) ==
               WEFT_ERR_INVALID_ARG,
           "allreduce(fake)");
    EXPECT(weft_comm_destroy(fake) == WEFT_ERR_INVALID_ARG, "destroy(fake)");
    /* the good calls */
    EXPECT(weft_comm_rank(c->comm, &v) == WEFT_OK && v == c->rank, "rank %d got %d", c->rank, v);
    EXPECT(weft_comm_size(c->comm, &v) == WEFT_OK && v == c->size, "size %d got %d", c->size, v);
}

/* Valid edge cases: count 0 with NULL buffers does nothing and succeeds. */
static void count_zero(ctx_t *c)
{
    for (int k = ALLREDUCE; k <= ALLGATHER; k++) {
        weft_status_t st;

        st = call(k, NULL, NULL, 0, WEFT_FLOAT32, WEFT_SUM, c->comm);
        EXPECT(st == WEFT_OK, "rank %d %s count 0 NULL: %s", c->rank, kind_names[k],
               weft_last_error());
        st = call(k, WEFT_IN_PLACE, NULL, 0, WEFT_INT8, WEFT_BXOR, c->comm);
        EXPECT(st == WEFT_OK, "rank %d %s count 0 in place: %s", c->rank, kind_names[k],
               weft_last_error());
        arena_fill(c);
        st = call(k, at(c, 0), at(c, 0), 0, WEFT_FLOAT64, WEFT_AVG, c->comm);
        EXPECT(st == WEFT_OK, "rank %d %s count 0 same buffer: %s", c->rank, kind_names[k],
               weft_last_error());
        st = call(k, at(c, 0), at(c, 2), 0, WEFT_FLOAT64, WEFT_AVG, c->comm);
        EXPECT(st == WEFT_OK, "rank %d %s count 0 overlapping pointers: %s", c->rank, kind_names[k],
               weft_last_error());
        EXPECT(arena_changed(c) < 0, "count 0 wrote memory");
    }
}

static void rank_bad(weft_comm_t comm, int rank, void *arg)
{
    ctx_t c = {.comm = comm, .rank = rank};
    int size = 0;

    (void)arg;
    EXPECT(weft_comm_size(comm, &size) == WEFT_OK, "size");
    c.size = size;
    c.arena = malloc(ARENA_BYTES);
    if (c.arena == NULL) {
        harness_fail(__LINE__, "malloc");
        return;
    }
    bad_inputs(&c);
    bad_comm_calls(&c);
    count_zero(&c);
    free(c.arena);
}

/* After the rejected calls the world still works: a good allreduce gives the sum. */
static void rank_bad_then_good(weft_comm_t comm, int rank, void *arg)
{
    int32_t v[3] = {rank + 1, 10 * rank, -rank};
    int32_t out[3] = {0};
    int p = 0;

    rank_bad(comm, rank, arg);
    weft_comm_size(comm, &p);
    EXPECT(weft_allreduce(v, out, 3, WEFT_INT32, WEFT_SUM, comm) == WEFT_OK, "rank %d: %s", rank,
           weft_last_error());
    EXPECT(out[0] == p * (p + 1) / 2 && out[1] == 10 * p * (p - 1) / 2 &&
               out[2] == -p * (p - 1) / 2,
           "rank %d: sum after rejected calls = {%d, %d, %d}", rank, out[0], out[1], out[2]);
}

static void run_world(int nranks, weft_thread_rank_fn fn, void *arg)
{
    weft_thread_world_opts_t opts = {.nranks = nranks, .seed = 7};

    cr_assert_eq(weft__thread_world_run(&opts, fn, arg), WEFT_OK, "%s", weft_last_error());
    HARNESS_ASSERT_NO_FAILURES();
}

/* -------------------------------------------------------- tests: bad */

Test(args_one_rank, bad_inputs, .init = clean_env)
{
    weft_comm_t comm;
    int rank = -1;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_rank(comm, &rank), WEFT_OK);
    cr_assert_eq(rank, 0);
    rank_bad_then_good(comm, 0, NULL);
    HARNESS_ASSERT_NO_FAILURES();
    cr_assert_eq(weft_comm_destroy(comm), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

Test(args_four_ranks, bad_inputs, .init = clean_env)
{
    cr_assert_eq(weft_init(), WEFT_OK);
    run_world(4, rank_bad_then_good, NULL);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

Test(args_one_rank, destroyed_world_comm, .init = clean_env)
{
    weft_comm_t comm;
    int32_t x = 5, y = 0;
    int v = 9;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK);
    cr_assert_eq(weft_comm_destroy(comm), WEFT_OK);
    cr_assert_eq(weft_allreduce(&x, &y, 1, WEFT_INT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "comm"), "%s", weft_last_error());
    cr_assert_not_null(strstr(weft_last_error(), "destroyed"), "%s", weft_last_error());
    cr_assert_eq(y, 0);
    cr_assert_eq(weft_reduce_scatter(&x, &y, 1, WEFT_INT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_allgather(&x, &y, 1, WEFT_INT32, comm), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(y, 0);
    cr_assert_eq(weft_comm_rank(comm, &v), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_comm_size(comm, &v), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(v, 9);
    cr_assert_eq(weft_comm_destroy(comm), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "destroyed"), "%s", weft_last_error());
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

Test(args_one_rank, error_cleared_by_next_call, .init = clean_env)
{
    weft_comm_t comm;
    float x = 2.0f, y = 0.0f;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK);
    cr_assert_eq(weft_allreduce(&x, NULL, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "recvbuf"));
    /* a second, different failure replaces the message */
    cr_assert_eq(weft_allreduce(NULL, &y, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "sendbuf"), "%s", weft_last_error());
    cr_assert_null(strstr(weft_last_error(), "recvbuf is NULL"), "%s", weft_last_error());
    cr_assert_eq(weft_allreduce(&x, &y, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_assert_eq(y, 2.0f);
    weft_comm_destroy(comm);
    weft_finalize();
}

/* ------------------------------------------------ tests: one-rank valid */

Test(args_one_rank, count_zero_and_comm_calls, .init = clean_env)
{
    ctx_t c = {.rank = 0, .size = 1};

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&c.comm), WEFT_OK);
    c.arena = malloc(ARENA_BYTES);
    cr_assert_not_null(c.arena);
    count_zero(&c);
    bad_comm_calls(&c);
    HARNESS_ASSERT_NO_FAILURES();
    free(c.arena);
    weft_comm_destroy(c.comm);
    weft_finalize();
}

Test(args_one_rank, in_place_and_copy, .init = clean_env)
{
    weft_comm_t comm;
    int32_t in[37], buf[37], out[37];
    double d[5] = {1.5, -2.25, 3.0, 1e300, -0.0}, dbuf[5];

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK);
    for (int i = 0; i < 37; i++) {
        in[i] = i * 7919 - 100000;
    }
    for (int k = ALLREDUCE; k <= ALLGATHER; k++) {
        /* WEFT_IN_PLACE */
        memcpy(buf, in, sizeof(in));
        cr_assert_eq(call(k, WEFT_IN_PLACE, buf, 37, WEFT_INT32, WEFT_SUM, comm), WEFT_OK, "%s",
                     weft_last_error());
        cr_assert_arr_eq(buf, in, sizeof(in), "%s in place", kind_names[k]);
        /* sendbuf == recvbuf */
        cr_assert_eq(call(k, buf, buf, 37, WEFT_INT32, WEFT_MAX, comm), WEFT_OK);
        cr_assert_arr_eq(buf, in, sizeof(in), "%s sendbuf == recvbuf", kind_names[k]);
        /* separate buffers: a copy */
        memset(out, 0x5a, sizeof(out));
        cr_assert_eq(call(k, in, out, 37, WEFT_INT32, WEFT_BXOR, comm), WEFT_OK, "%s",
                     weft_last_error());
        cr_assert_arr_eq(out, in, sizeof(in), "%s copy", kind_names[k]);
        /* WEFT_AVG over one rank divides by one: bit-exact, -0.0 included */
        memset(dbuf, 0, sizeof(dbuf));
        cr_assert_eq(call(k, d, dbuf, 5, WEFT_FLOAT64, WEFT_AVG, comm), WEFT_OK, "%s",
                     weft_last_error());
        for (int i = 0; i < 5; i++) {
            cr_assert_eq(memcmp(&dbuf[i], &d[i], sizeof(double)), 0, "%s avg of one rank [%d]",
                         kind_names[k], i);
        }
    }
    {
        int32_t two[8] = {1, 2, 3, 4, 5, 6, 7, 8};

        /* [0..4) and [4..8): touching, not overlapping */
        cr_assert_eq(weft_allreduce(two, two + 4, 4, WEFT_INT32, WEFT_SUM, comm), WEFT_OK, "%s",
                     weft_last_error());
        cr_assert_eq(two[4], 1);
        cr_assert_eq(two[7], 4);
    }
    weft_comm_destroy(comm);
    weft_finalize();
}

/* --------------------------------------------- tests: four-rank in place */

#define P 4

typedef struct inplace_arg {
    size_t count;
} inplace_arg_t;

static int32_t ar_in(int rank, size_t i)
{
    return rank * 100 + (int32_t)i + 1;
}

static int32_t ar_sum(size_t i)
{
    int32_t s = 0;

    for (int r = 0; r < P; r++) {
        s += ar_in(r, i);
    }
    return s;
}

/* input element j (of size * count) of reduce_scatter on rank r */
static int32_t rs_in(int rank, size_t j)
{
    return rank * 1000 + (int32_t)(j % 997) - 300;
}

static void check_ar(int rank, const char *what, const int32_t *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (buf[i] != ar_sum(i)) {
            harness_fail(__LINE__, "rank %d %s count %zu: [%zu] = %d, expected %d", rank, what,
                         count, i, buf[i], ar_sum(i));
            return;
        }
    }
}

static void check_rs(int rank, const char *what, const int32_t *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        int32_t want = 0;

        for (int q = 0; q < P; q++) {
            want += rs_in(q, (size_t)rank * count + i);
        }
        if (buf[i] != want) {
            harness_fail(__LINE__, "rank %d %s count %zu: [%zu] = %d, expected %d", rank, what,
                         count, i, buf[i], want);
            return;
        }
    }
}

static void check_ag(int rank, const char *what, const int32_t *buf, size_t count)
{
    for (int q = 0; q < P; q++) {
        for (size_t i = 0; i < count; i++) {
            if (buf[(size_t)q * count + i] != ar_in(q, i)) {
                harness_fail(__LINE__, "rank %d %s count %zu: block %d [%zu] = %d, expected %d",
                             rank, what, count, q, i, buf[(size_t)q * count + i], ar_in(q, i));
                return;
            }
        }
    }
}

static void rank_in_place(weft_comm_t comm, int rank, void *arg_)
{
    const inplace_arg_t *arg = arg_;
    const size_t n = arg->count, total = n * P;
    int32_t *buf = malloc(total * sizeof(int32_t));
    int32_t *in = malloc(total * sizeof(int32_t));
    weft_status_t st;

    if (buf == NULL || in == NULL) {
        harness_fail(__LINE__, "malloc");
        free(buf);
        free(in);
        return;
    }

    /* allreduce: WEFT_IN_PLACE and sendbuf == recvbuf read the input from recvbuf */
    for (size_t i = 0; i < n; i++) {
        buf[i] = ar_in(rank, i);
    }
    st = weft_allreduce(WEFT_IN_PLACE, buf, n, WEFT_INT32, WEFT_SUM, comm);
    EXPECT(st == WEFT_OK, "rank %d allreduce in place: %s", rank, weft_last_error());
    check_ar(rank, "allreduce WEFT_IN_PLACE", buf, n);
    for (size_t i = 0; i < n; i++) {
        buf[i] = ar_in(rank, i);
    }
    st = weft_allreduce(buf, buf, n, WEFT_INT32, WEFT_SUM, comm);
    EXPECT(st == WEFT_OK, "rank %d allreduce sendbuf == recvbuf: %s", rank, weft_last_error());
    check_ar(rank, "allreduce sendbuf == recvbuf", buf, n);

    /* allgather: the contribution is read from recvbuf + rank * count */
    for (int form = 0; form < 3; form++) {
        static const char *const names[] = {"allgather WEFT_IN_PLACE",
                                            "allgather sendbuf == recvbuf",
                                            "allgather sendbuf == recvbuf + rank * count"};
        const void *send = form == 0   ? WEFT_IN_PLACE
                           : form == 1 ? (void *)buf
                                       : (void *)(buf + rank * n);

        for (size_t j = 0; j < total; j++) {
            buf[j] = -12345; /* other ranks' slots hold garbage */
        }
        for (size_t i = 0; i < n; i++) {
            buf[(size_t)rank * n + i] = ar_in(rank, i);
        }
        st = weft_allgather(send, buf, n, WEFT_INT32, comm);
        EXPECT(st == WEFT_OK, "rank %d %s: %s", rank, names[form], weft_last_error());
        check_ag(rank, names[form], buf, n);
    }

    /* reduce_scatter: WEFT_IN_PLACE / sendbuf == recvbuf read size * count from
     * recvbuf and write the result to its first count elements */
    for (int form = 0; form < 2; form++) {
        static const char *const names[] = {"reduce_scatter WEFT_IN_PLACE",
                                            "reduce_scatter sendbuf == recvbuf"};

        for (size_t j = 0; j < total; j++) {
            buf[j] = rs_in(rank, j);
        }
        st = weft_reduce_scatter(form == 0 ? WEFT_IN_PLACE : (const void *)buf, buf, n, WEFT_INT32,
                                 WEFT_SUM, comm);
        EXPECT(st == WEFT_OK, "rank %d %s: %s", rank, names[form], weft_last_error());
        check_rs(rank, names[form], buf, n);
    }
    /* recvbuf == sendbuf + rank * count: the result lands in this rank's slot */
    for (size_t j = 0; j < total; j++) {
        buf[j] = rs_in(rank, j);
    }
    st = weft_reduce_scatter(buf, buf + (size_t)rank * n, n, WEFT_INT32, WEFT_SUM, comm);
    EXPECT(st == WEFT_OK, "rank %d reduce_scatter NCCL in place: %s", rank, weft_last_error());
    check_rs(rank, "reduce_scatter recvbuf == sendbuf + rank * count", buf + (size_t)rank * n, n);

    /* out of place, for reference: the same results */
    for (size_t j = 0; j < total; j++) {
        in[j] = rs_in(rank, j);
    }
    st = weft_reduce_scatter(in, buf, n, WEFT_INT32, WEFT_SUM, comm);
    EXPECT(st == WEFT_OK, "rank %d reduce_scatter: %s", rank, weft_last_error());
    check_rs(rank, "reduce_scatter out of place", buf, n);
    for (size_t j = 0; j < total; j++) {
        EXPECT(in[j] == rs_in(rank, j), "rank %d: reduce_scatter changed its sendbuf", rank);
    }

    free(buf);
    free(in);
}

static void run_in_place(const char *tune)
{
    static const size_t counts[] = {1, 3, 5, 64, 1001};

    if (tune != NULL) {
        setenv("WEFT_TUNE", tune, 1);
    }
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        inplace_arg_t arg = {.count = counts[i]};

        run_world(P, rank_in_place, &arg);
    }
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

Test(args_four_ranks, in_place_default_algorithms, .init = clean_env)
{
    run_in_place(NULL);
}

Test(args_four_ranks, in_place_ring, .init = clean_env)
{
    /* small fragments: several per block */
    setenv("WEFT_RING_FRAG_SIZE", "64", 1);
    run_in_place("allreduce:0-inf:ring");
}

Test(args_four_ranks, in_place_rabenseifner, .init = clean_env)
{
    run_in_place("allreduce:0-inf:rabenseifner");
}

Test(args_four_ranks, in_place_recursive_doubling, .init = clean_env)
{
    run_in_place("allreduce:0-inf:recursive_doubling");
}
