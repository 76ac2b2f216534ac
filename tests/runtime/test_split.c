/*
 * weft_comm_split / weft_comm_dup on in-process ranks (random landing
 * order): membership and order, collectives on children give results over
 * exactly their members, parent and children interleave without
 * cross-matching, nested splits, negative colors, destroying the parent
 * first.
 */
#include <criterion/criterion.h>

#include "runtime/comm.h"
#include "runtime/thread_world.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

typedef struct shared {
    atomic_int failures;
    atomic_int checked;
    char first[256];
} shared_t;

static void fail(shared_t *sh, const char *msg, int rank, weft_status_t st)
{
    if (atomic_fetch_add(&sh->failures, 1) == 0) {
        snprintf(sh->first, sizeof(sh->first), "rank %d: %s (%s: %s)", rank, msg,
                 weft_status_string(st), weft_last_error());
    }
}

#define EXPECT(cond, msg)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail(sh, msg, rank, WEFT_OK);                                                          \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define EXPECT_OK(expr, msg)                                                                       \
    do {                                                                                           \
        weft_status_t st_ = (expr);                                                                \
        if (st_ != WEFT_OK) {                                                                      \
            fail(sh, msg, rank, st_);                                                              \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void run(int nranks, uint64_t seed, weft_thread_rank_fn fn, shared_t *sh)
{
    weft_thread_world_opts_t opts = {.nranks = nranks, .seed = seed};

    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft__thread_world_run(&opts, fn, sh), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(atomic_load(&sh->failures), 0, "%d failure(s); first: %s",
                 atomic_load(&sh->failures), sh->first);
    cr_assert_eq(atomic_load(&sh->checked), nranks, "only %d of %d ranks finished their checks",
                 atomic_load(&sh->checked), nranks);
    weft_finalize();
}

/* 7 ranks split by rank % 3, key = -rank (reverse order). */
static void split_body(weft_comm_t world, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_comm_t child;
    int crank, csize, color = rank % 3;
    int64_t v[5], w;

    EXPECT_OK(weft_comm_split(world, color, -rank, &child), "split");
    EXPECT(child != NULL, "split gave no communicator");
    EXPECT_OK(weft_comm_rank(child, &crank), "rank");
    EXPECT_OK(weft_comm_size(child, &csize), "size");
    /* members of color c: c, c+3, c+6 < 7; reversed by key */
    int members = 0, pos = 0;
    for (int r = color; r < 7; r += 3) {
        members++;
    }
    for (int r = color; r < 7; r += 3) {
        pos += r > rank;
    }
    EXPECT(csize == members, "child size");
    EXPECT(crank == pos, "child rank not ordered by key");
    /* interleave: child allreduce, world allreduce, child allgather */
    for (int i = 0; i < 5; i++) {
        v[i] = rank * 10 + i;
    }
    EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, v, 5, WEFT_INT64, WEFT_SUM, child), "child sum");
    w = rank;
    EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, &w, 1, WEFT_INT64, WEFT_SUM, world), "world sum");
    EXPECT(w == 21, "world sum wrong");
    for (int i = 0; i < 5; i++) {
        int64_t want = 0;
        for (int r = color; r < 7; r += 3) {
            want += r * 10 + i;
        }
        EXPECT(v[i] == want, "child sum wrong (over the wrong members?)");
    }
    int64_t mine = rank, gathered[3];
    EXPECT_OK(weft_allgather(&mine, gathered, 1, WEFT_INT64, child), "child allgather");
    for (int i = 0; i < csize; i++) {
        /* child rank i is the i-th largest world rank of the color */
        int want = -1, k = 0;
        for (int r = 6; r >= 0; r--) {
            if (r % 3 == color && k++ == i) {
                want = r;
            }
        }
        EXPECT(gathered[i] == want, "child allgather order");
    }
    EXPECT_OK(weft_comm_destroy(child), "destroy child");
    atomic_fetch_add(&sh->checked, 1);
}

Test(split, colors_keys_and_interleaving)
{
    for (uint64_t seed = 0; seed < 4; seed++) {
        shared_t sh = {0};
        run(7, seed, split_body, &sh);
    }
}

/* dup of dup, nested split, negative color, parent destroyed before child. */
static void nested_body(weft_comm_t world, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_comm_t dup, half, none = (weft_comm_t)0x1, quarter;
    int r, s;
    int32_t x;

    EXPECT_OK(weft_comm_dup(world, &dup), "dup");
    EXPECT_OK(weft_comm_rank(dup, &r), "dup rank");
    EXPECT_OK(weft_comm_size(dup, &s), "dup size");
    EXPECT(r == rank && s == 8, "dup keeps ranks");
    EXPECT_OK(weft_comm_split(dup, rank < 4 ? 0 : 1, rank, &half), "split of dup");
    EXPECT_OK(weft_comm_split(half, rank % 2 ? -1 : 0, 0, &quarter), "split of half");
    if (rank % 2) {
        EXPECT(quarter == NULL, "negative color must give NULL");
    } else {
        EXPECT(quarter != NULL, "member got no communicator");
    }
    EXPECT_OK(weft_comm_split(world, -5, 0, &none), "all-negative split");
    EXPECT(none == NULL, "negative color must give NULL");
    /* destroy the parents first; children keep working */
    EXPECT_OK(weft_comm_destroy(dup), "destroy dup");
    x = rank;
    EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT32, WEFT_MAX, half), "half max");
    EXPECT(x == (rank < 4 ? 3 : 7), "half max wrong");
    EXPECT_OK(weft_comm_destroy(half), "destroy half");
    if (quarter != NULL) {
        x = rank;
        EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT32, WEFT_SUM, quarter), "q sum");
        EXPECT(x == (rank < 4 ? 0 + 2 : 4 + 6), "quarter sum wrong");
        EXPECT_OK(weft_comm_destroy(quarter), "destroy quarter");
    }
    EXPECT(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT32, WEFT_SUM, dup) ==
               WEFT_ERR_INVALID_ARG,
           "destroyed dup accepted");
    atomic_fetch_add(&sh->checked, 1);
}

Test(split, nested_dup_negative_color_parent_first)
{
    for (uint64_t seed = 1; seed < 4; seed++) {
        shared_t sh = {0};
        run(8, seed, nested_body, &sh);
    }
}

/* Many communicators in flight: ids stay distinct, no cross-matching. */
static void many_body(weft_comm_t world, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_comm_t comms[12];
    uint32_t ids[12];

    for (int i = 0; i < 12; i++) {
        EXPECT_OK(weft_comm_split(world, (rank + i) % 2, rank, &comms[i]), "split");
        ids[i] = weft__comm_of(comms[i])->id;
        for (int j = 0; j < i; j++) {
            EXPECT(ids[j] != ids[i], "two live communicators share an id");
        }
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 11; i >= 0; i--) {
            int64_t v = rank + i;
            int64_t want = 0;
            EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_INT64, WEFT_SUM, comms[i]),
                      "allreduce");
            for (int r = 0; r < 6; r++) {
                if ((r + i) % 2 == (rank + i) % 2) {
                    want += r + i;
                }
            }
            EXPECT(v == want, "allreduce over a split gave a wrong sum");
        }
    }
    for (int i = 0; i < 12; i++) {
        EXPECT_OK(weft_comm_destroy(comms[i]), "destroy");
    }
    atomic_fetch_add(&sh->checked, 1);
}

Test(split, many_communicators)
{
    shared_t sh = {0};
    run(6, 11, many_body, &sh);
}

Test(split, bad_arguments)
{
    weft_comm_t world, out = (weft_comm_t)0x1;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_split(NULL, 0, 0, &out), WEFT_ERR_INVALID_ARG);
    cr_assert(strstr(weft_last_error(), "comm") != NULL, "%s", weft_last_error());
    cr_assert_eq(out, (weft_comm_t)0x1, "out written on failure");
    cr_assert_eq(weft_comm_world(&world), WEFT_OK);
    cr_assert_eq(weft_comm_split(world, 0, 0, NULL), WEFT_ERR_INVALID_ARG);
    cr_assert(strstr(weft_last_error(), "out") != NULL, "%s", weft_last_error());
    cr_assert_eq(weft_comm_dup(NULL, &out), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_comm_dup(world, &out), WEFT_OK);
    cr_assert_eq(weft_comm_destroy(world), WEFT_OK);
    cr_assert_eq(weft_comm_split(world, 0, 0, &out), WEFT_ERR_INVALID_ARG);
    cr_assert(strstr(weft_last_error(), "destroyed") != NULL, "%s", weft_last_error());
    cr_assert_eq(weft_comm_destroy(out), WEFT_OK);
    weft_finalize();
}

/*
 * A request outlives its communicator: rank 0 starts a broadcast from rank 1
 * that rank 1 never joins, both destroy the communicator (its memory is
 * freed), and rank 0's wait then reports the cancellation; the request is
 * refused once freed. Under ASan this is where a use after free would show.
 */
static void outlive_body(weft_comm_t world, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_comm_t d, parent_dup;
    weft_request_t req = NULL;
    int32_t v = 7;
    int done = 0;

    EXPECT_OK(weft_comm_dup(world, &d), "dup");
    EXPECT_OK(weft_comm_dup(world, &parent_dup), "second dup");
    if (rank == 0) {
        EXPECT_OK(weft_ibcast(&v, 1, WEFT_INT32, 1, d, &req), "ibcast");
    }
    EXPECT_OK(weft_comm_destroy(d), "destroy with a request outstanding");
    if (rank == 0) {
        weft_status_t st = weft_wait(req);

        EXPECT(st == WEFT_ERR_ABORTED, "wait after destroy is not ABORTED");
        EXPECT(strstr(weft_last_error(), "destroyed") != NULL, "the error does not say why");
        EXPECT(v == 7, "a cancelled broadcast wrote the buffer");
        EXPECT(weft_test(req, &done) == WEFT_ERR_ABORTED && done, "test after wait");
        EXPECT_OK(weft_request_free(req), "free");
        EXPECT(weft_wait(req) == WEFT_ERR_INVALID_ARG, "a freed request accepted");
    }
    /* the other communicators are untouched */
    v = rank;
    EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_INT32, WEFT_SUM, parent_dup), "allreduce");
    EXPECT(v == 1, "allreduce after a destroyed sibling");
    EXPECT_OK(weft_comm_destroy(parent_dup), "destroy");
    atomic_fetch_add(&sh->checked, 1);
}

Test(split, request_outlives_communicator)
{
    shared_t sh = {0};
    run(2, 0, outlive_body, &sh);
}
