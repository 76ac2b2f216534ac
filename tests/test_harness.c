/*
 * The multi-process harness itself (tests/harness.h): children run with
 * their rank and report their exit status, one that overstays the deadline
 * is killed, the barrier holds every process until the last one arrives,
 * and messages are built without overflowing.
 */
#include <criterion/criterion.h>

#include "tests/harness.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPROCS 4
#define ROUNDS 50

typedef struct area {
    harness_barrier_t barrier;
    atomic_int count[ROUNDS];
    int seen[ROUNDS][NPROCS]; /* what each rank saw after each barrier */
    int ran[NPROCS];
} area_t;

static int exit_rank(int rank, void *arg)
{
    area_t *a = arg;

    a->ran[rank] = 1;
    return 10 + rank;
}

Test(harness, children_run_with_their_rank)
{
    area_t *a = harness_shared(sizeof(*a));
    harness_procs_t p;

    cr_assert_not_null(a, "mmap: %s", strerror(errno));
    cr_assert_eq(harness_fork(&p, 1, NPROCS, exit_rank, a), 0, "fork: %s", strerror(errno));
    cr_assert_eq(p.pid[0], 0, "rank 0 is the test process: not forked");
    cr_assert_eq(harness_reap(&p, harness_now_s() + 20), 0, "no child may be killed");
    cr_assert_eq(a->ran[0], 0);
    for (int r = 1; r < NPROCS; r++) {
        cr_assert_eq(a->ran[r], 1, "rank %d did not run", r);
        cr_assert_eq(p.state[r], HARNESS_EXITED);
        cr_assert(WIFEXITED(p.wstatus[r]) && WEXITSTATUS(p.wstatus[r]) == 10 + r,
                  "rank %d: status 0x%x", r, p.wstatus[r]);
        cr_assert_eq(harness_exited_ok(&p, r), 0, "exit %d is not a success", 10 + r);
    }
    munmap(a, sizeof(*a));
}

static int sleep_forever_but_rank_1(int rank, void *arg)
{
    (void)arg;
    if (rank == 1) {
        return 0;
    }
    for (;;) {
        pause();
    }
}

Test(harness, overstaying_children_are_killed_at_the_deadline)
{
    harness_procs_t p;
    double t0 = harness_now_s(), dt;

    cr_assert_eq(harness_fork(&p, 0, 3, sleep_forever_but_rank_1, NULL), 0);
    cr_assert_eq(harness_reap(&p, t0 + 0.5), 2, "ranks 0 and 2 overstay");
    dt = harness_now_s() - t0;
    cr_assert(dt >= 0.5 && dt < 10, "reaped after %.3f s, deadline 0.5 s", dt);
    cr_assert(harness_exited_ok(&p, 1));
    for (int r = 0; r < 3; r += 2) {
        cr_assert_eq(p.state[r], HARNESS_KILLED, "rank %d", r);
        cr_assert(WIFSIGNALED(p.wstatus[r]) && WTERMSIG(p.wstatus[r]) == SIGKILL);
        cr_assert_eq(kill(p.pid[r], 0), -1, "rank %d was reaped", r);
    }
    cr_assert_eq(harness_poll(&p), 0);
}

/* Each round: add one, wait, read the sum; every rank must see all NPROCS. */
static int barrier_rounds(int rank, void *arg)
{
    area_t *a = arg;

    for (int k = 0; k < ROUNDS; k++) {
        atomic_fetch_add(&a->count[k], 1);
        if (rank == k % NPROCS) {
            harness_sleep_s(0.002); /* a late one each round */
        }
        if (harness_barrier_wait(&a->barrier, harness_now_s() + 20, NULL, NULL) != 0) {
            return 1;
        }
        a->seen[k][rank] = atomic_load(&a->count[k]);
    }
    return 0;
}

Test(harness, barrier_holds_everyone_until_the_last)
{
    area_t *a = harness_shared(sizeof(*a));
    harness_procs_t p;

    cr_assert_not_null(a);
    harness_barrier_init(&a->barrier, NPROCS);
    cr_assert_eq(harness_fork(&p, 1, NPROCS, barrier_rounds, a), 0);
    cr_assert_eq(barrier_rounds(0, a), 0, "rank 0 timed out in a barrier");
    cr_assert_eq(harness_reap(&p, harness_now_s() + 20), 0);
    for (int r = 1; r < NPROCS; r++) {
        cr_assert(harness_exited_ok(&p, r), "rank %d: status 0x%x", r, p.wstatus[r]);
    }
    for (int k = 0; k < ROUNDS; k++) {
        for (int r = 0; r < NPROCS; r++) {
            cr_assert_eq(a->seen[k][r], NPROCS, "round %d: rank %d passed with %d arrived", k, r,
                         a->seen[k][r]);
        }
    }
    munmap(a, sizeof(*a));
}

static int stop_now(void *arg)
{
    return ++*(int *)arg >= 3;
}

Test(harness, barrier_gives_up_at_its_deadline_or_when_told)
{
    harness_barrier_t b;
    int calls = 0;
    double t0;

    harness_barrier_init(&b, 2);
    t0 = harness_now_s();
    cr_assert_eq(harness_barrier_wait(&b, t0 + 0.05, NULL, NULL), -1, "alone among 2");
    cr_assert_geq(harness_now_s() - t0, 0.05);
    harness_barrier_init(&b, 2);
    cr_assert_eq(harness_barrier_wait(&b, harness_now_s() + 20, stop_now, &calls), -1);
    cr_assert_eq(calls, 3);
    harness_barrier_init(&b, 1);
    cr_assert_eq(harness_barrier_wait(&b, harness_now_s(), NULL, NULL), 0, "a quorum of one");
}

Test(harness, append_truncates_and_terminates)
{
    char buf[8];
    size_t len = 0;

    len = harness_append(buf, sizeof(buf), len, "%s", "abc");
    cr_assert_eq(len, 3);
    cr_assert_str_eq(buf, "abc");
    len = harness_append(buf, sizeof(buf), len, "%d", 12345);
    cr_assert_eq(len, 7);
    cr_assert_str_eq(buf, "abc1234");
    len = harness_append(buf, sizeof(buf), len, "more");
    cr_assert_eq(len, 7);
    cr_assert_str_eq(buf, "abc1234");
}

Test(harness, set_env_sets_and_unsets)
{
    cr_assert_eq(harness_set_env("WEFT_HARNESS_TEST", "x y"), 0);
    cr_assert_str_eq(getenv("WEFT_HARNESS_TEST"), "x y");
    cr_assert_eq(harness_set_env("WEFT_HARNESS_TEST", NULL), 0);
    cr_assert_null(getenv("WEFT_HARNESS_TEST"));
}

/* A name of each module's table, one that is not in any, and the file. */
Test(harness, reset_env_unsets_every_registry_name_but_keep)
{
    static const char *const registry[] = {"WEFT_TIMEOUT", "WEFT_SHM", "WEFT_STAGE_FRAG",
                                           "WEFT_STATS", "WEFT_CONFIG_FILE"};

    for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++) {
        cr_assert_eq(setenv(registry[i], "1", 1), 0);
    }
    cr_assert_eq(setenv("WEFT_LOG_LEVEL", "error", 1), 0);
    cr_assert_eq(setenv("WEFT_HARNESS_NOT_A_SETTING", "x", 1), 0);
    cr_assert_eq(harness_reset_env("WEFT_LOG_LEVEL"), 0);
    for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++) {
        cr_assert_null(getenv(registry[i]), "%s is still set", registry[i]);
    }
    cr_assert_str_eq(getenv("WEFT_LOG_LEVEL"), "error", "the kept name was reset");
    cr_assert_str_eq(getenv("WEFT_HARNESS_NOT_A_SETTING"), "x");
    cr_assert_eq(harness_reset_env(NULL), 0);
    cr_assert_null(getenv("WEFT_LOG_LEVEL"));
    unsetenv("WEFT_HARNESS_NOT_A_SETTING");
}

static void *fail_twice(void *arg)
{
    int v = *(int *)arg;

    EXPECT(v == 0, "thread %d: %s", v, "first");
    HARNESS_FAIL("thread %d: second", v);
    return NULL;
}

/* Failures from any thread are counted, the first ones kept with their line. */
Test(harness, failure_log_counts_and_keeps)
{
    pthread_t t[NPROCS];
    int ids[NPROCS];
    char line[32];

    EXPECT(1 + 1 == 2, "never recorded");
    cr_assert_eq(harness_fail_count(), 0);
    for (int i = 0; i < NPROCS; i++) {
        ids[i] = i;
        cr_assert_eq(pthread_create(&t[i], NULL, fail_twice, &ids[i]), 0);
    }
    for (int i = 0; i < NPROCS; i++) {
        pthread_join(t[i], NULL);
    }
    /* thread 0 passes its EXPECT: 2 * NPROCS - 1 failures */
    cr_assert_eq(harness_fail_count(), 2 * NPROCS - 1);
    for (int i = 0; i < 2 * NPROCS - 1; i++) {
        cr_assert(strncmp(harness_fail_message(i), "line ", 5) == 0, "%s", harness_fail_message(i));
        cr_assert_not_null(strstr(harness_fail_message(i), ": thread "), "%s",
                           harness_fail_message(i));
    }
    for (int i = 0; i < HARNESS_FAILS_KEPT * 2; i++) {
        HARNESS_FAIL("filler %d", i);
    }
    cr_assert_eq(harness_fail_count(), 2 * NPROCS - 1 + HARNESS_FAILS_KEPT * 2);
    snprintf(line, sizeof(line), "filler %d", HARNESS_FAILS_KEPT - 2 * NPROCS);
    cr_assert_not_null(strstr(harness_fail_message(HARNESS_FAILS_KEPT - 1), line), "%s",
                       harness_fail_message(HARNESS_FAILS_KEPT - 1));
    cr_assert_str_eq(harness_fail_message(HARNESS_FAILS_KEPT), "");
}

/* The generator's sequence is Marsaglia's xorshift64 (13, 7, 17). */
Test(harness, xorshift_sequence)
{
    uint64_t s = 1, ref = 1;

    for (int i = 0; i < 1000; i++) {
        ref ^= ref << 13;
        ref ^= ref >> 7;
        ref ^= ref << 17;
        cr_assert_eq(harness_xorshift(&s), ref);
        cr_assert_eq(s, ref);
    }
    s = 1;
    cr_assert_eq(harness_xorshift(&s), 0x40822041ull);
}
