/*
 * Runtime unit tests: status strings, names and which statuses break a
 * communicator, last-error messages, dtype/op names, weft_init/weft_finalize
 * reference counting, WEFT_TUNE selection rules, tag encoding and logging
 * (the configuration registry: test_runtime_config.c).
 *
 * Criterion runs every Test in its own process, so each test sets the
 * environment it needs before weft_init; clean_env() first removes every
 * WEFT_* variable the caller's shell might have set.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "coll/coll.h"
#include "pt2pt/pt2pt.h"
#include "runtime/comm.h"
#include "runtime/config.h"
#include "tests/harness.h"
#include "tests/runtime/runtime_env.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- status */

typedef struct status_entry {
    weft_status_t value;
    const char *name;
    const char *desc;
} status_entry_t;

static const status_entry_t all_statuses[] = {
#define STATUS_ENTRY(name, value, breaks, desc) {WEFT_##name, "WEFT_" #name, desc},
    WEFT_STATUS_MAP(STATUS_ENTRY)
#undef STATUS_ENTRY
};

#define NUM_STATUSES (sizeof(all_statuses) / sizeof(all_statuses[0]))

Test(status, strings_distinct_and_from_map)
{
    cr_assert_geq(NUM_STATUSES, 14);
    for (size_t i = 0; i < NUM_STATUSES; i++) {
        const char *s = weft_status_string(all_statuses[i].value);

        cr_assert_not_null(s);
        cr_assert_gt(strlen(s), 0, "status %d has an empty string", all_statuses[i].value);
        cr_assert_str_eq(s, all_statuses[i].desc);
        cr_assert_str_neq(s, "unknown status", "status %d", all_statuses[i].value);
        for (size_t j = 0; j < i; j++) {
            cr_assert_neq(all_statuses[i].value, all_statuses[j].value);
            cr_assert_str_neq(s, weft_status_string(all_statuses[j].value),
                              "statuses %d and %d share a string", all_statuses[i].value,
                              all_statuses[j].value);
        }
    }
    cr_assert_eq(WEFT_OK, 0);
    cr_assert_eq(WEFT_INPROGRESS, 1);
    for (size_t i = 0; i < NUM_STATUSES; i++) {
        if (all_statuses[i].value != WEFT_OK && all_statuses[i].value != WEFT_INPROGRESS) {
            cr_assert_lt(all_statuses[i].value, 0, "errors are negative");
        }
    }
}

/* The names, written out: a rename in the map must show up here. */
Test(status, names)
{
    static const struct {
        weft_status_t value;
        const char *name;
    } expected[] = {
        {WEFT_OK, "WEFT_OK"},
        {WEFT_INPROGRESS, "WEFT_INPROGRESS"},
        {WEFT_ERR_INVALID_ARG, "WEFT_ERR_INVALID_ARG"},
        {WEFT_ERR_NO_MEMORY, "WEFT_ERR_NO_MEMORY"},
        {WEFT_ERR_UNSUPPORTED, "WEFT_ERR_UNSUPPORTED"},
        {WEFT_ERR_TRANSPORT, "WEFT_ERR_TRANSPORT"},
        {WEFT_ERR_TIMEOUT, "WEFT_ERR_TIMEOUT"},
        {WEFT_ERR_PEER_FAILED, "WEFT_ERR_PEER_FAILED"},
        {WEFT_ERR_ABORTED, "WEFT_ERR_ABORTED"},
        {WEFT_ERR_MISMATCH, "WEFT_ERR_MISMATCH"},
        {WEFT_ERR_BOOTSTRAP, "WEFT_ERR_BOOTSTRAP"},
        {WEFT_ERR_DEVICE, "WEFT_ERR_DEVICE"},
        {WEFT_ERR_INTERNAL, "WEFT_ERR_INTERNAL"},
        {WEFT_ERR_NOT_INITIALIZED, "WEFT_ERR_NOT_INITIALIZED"},
    };

    cr_assert_eq(sizeof(expected) / sizeof(expected[0]), NUM_STATUSES,
                 "a status was added: name it here");
    for (size_t i = 0; i < NUM_STATUSES; i++) {
        cr_assert_str_eq(weft_status_name(expected[i].value), expected[i].name);
        cr_assert_str_eq(weft_status_name(all_statuses[i].value), all_statuses[i].name);
    }
}

/* Which statuses break a communicator (comm/comm.c's weft__comm_fail): what
 * a running operation can no longer recover from with its peers. A refusal
 * before anything started leaves the communicator usable. */
Test(status, breaks_comm)
{
    static const weft_status_t breaking[] = {
        WEFT_ERR_TRANSPORT, WEFT_ERR_TIMEOUT,   WEFT_ERR_PEER_FAILED, WEFT_ERR_ABORTED,
        WEFT_ERR_MISMATCH,  WEFT_ERR_BOOTSTRAP, WEFT_ERR_DEVICE,      WEFT_ERR_INTERNAL,
    };

    for (size_t i = 0; i < NUM_STATUSES; i++) {
        weft_status_t st = all_statuses[i].value;
        int expect = 0;

        for (size_t k = 0; k < sizeof(breaking) / sizeof(breaking[0]); k++) {
            expect |= breaking[k] == st;
        }
        cr_assert_eq(weft__status_breaks_comm(st), expect, "%s", weft_status_name(st));
    }
    cr_assert_eq(weft__status_breaks_comm((weft_status_t)-13), 0);
    cr_assert_eq(weft__status_breaks_comm((weft_status_t)2), 0);
}

Test(status, unknown_values)
{
    cr_assert_str_eq(weft_status_string((weft_status_t)2), "unknown status");
    cr_assert_str_eq(weft_status_string((weft_status_t)-13), "unknown status");
    cr_assert_str_eq(weft_status_string((weft_status_t)-1000), "unknown status");
    cr_assert_str_eq(weft_status_string((weft_status_t)12345), "unknown status");
    cr_assert_str_eq(weft_status_name((weft_status_t)2), "unknown");
    cr_assert_str_eq(weft_status_name((weft_status_t)-13), "unknown");
    cr_assert_str_eq(weft_status_name((weft_status_t)-1000), "unknown");
    cr_assert_str_eq(weft_status_name((weft_status_t)12345), "unknown");
}

Test(status, last_error_names_the_argument, .init = clean_env)
{
    int rank = 77;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_rank(NULL, &rank), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(rank, 77, "out-parameter written on failure");
    cr_assert_not_null(strstr(weft_last_error(), "comm is NULL"), "got '%s'", weft_last_error());
    /* the message starts with the status string */
    cr_assert_eq(strncmp(weft_last_error(), "invalid argument", 16), 0, "got '%s'",
                 weft_last_error());
    cr_assert_eq(weft_allreduce(NULL, NULL, 1, WEFT_FLOAT32, WEFT_SUM, NULL), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "weft_allreduce"), "got '%s'", weft_last_error());
    cr_assert_not_null(strstr(weft_last_error(), "comm"), "got '%s'", weft_last_error());
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

static void *fail_in_thread(void *arg)
{
    int size;

    (void)arg;
    weft_comm_size(NULL, &size);
    return strstr(weft_last_error(), "comm is NULL") ? (void *)1 : NULL;
}

Test(status, last_error_is_thread_local, .init = clean_env)
{
    pthread_t t;
    void *ret = NULL;
    char mine[512];

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_allreduce(NULL, NULL, 1, (weft_dtype_t)99, WEFT_SUM, NULL),
                 WEFT_ERR_INVALID_ARG);
    snprintf(mine, sizeof(mine), "%s", weft_last_error());
    cr_assert_gt(strlen(mine), 0);
    cr_assert_eq(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
    pthread_join(t, &ret);
    cr_assert_not_null(ret, "the other thread saw its own error");
    cr_assert_str_eq(weft_last_error(), mine, "another thread's failure changed this thread's");
    weft_finalize();
}

/* ---------------------------------------------------------- dtypes, ops */

Test(dtype, sizes_and_names)
{
    static const struct {
        weft_dtype_t dtype;
        size_t size;
        const char *name;
    } expect[] = {
        {WEFT_INT8, 1, "int8"},
        {WEFT_UINT8, 1, "uint8"},
        {WEFT_INT32, 4, "int32"},
        {WEFT_UINT32, 4, "uint32"},
        {WEFT_INT64, 8, "int64"},
        {WEFT_UINT64, 8, "uint64"},
        {WEFT_FLOAT16, 2, "float16"},
        {WEFT_BFLOAT16, 2, "bfloat16"},
        {WEFT_FLOAT32, 4, "float32"},
        {WEFT_FLOAT64, 8, "float64"},
        {WEFT_FLOAT8_E4M3, 1, "float8_e4m3"},
        {WEFT_FLOAT8_E5M2, 1, "float8_e5m2"},
    };

    cr_assert_eq(sizeof(expect) / sizeof(expect[0]), WEFT_DTYPE_COUNT);
    for (size_t i = 0; i < WEFT_DTYPE_COUNT; i++) {
        cr_assert_eq(weft_dtype_size(expect[i].dtype), expect[i].size, "%s", expect[i].name);
        cr_assert_str_eq(weft_dtype_name(expect[i].dtype), expect[i].name);
    }
    cr_assert_eq(weft_dtype_size(WEFT_DTYPE_COUNT), 0);
    cr_assert_eq(weft_dtype_size((weft_dtype_t)-1), 0);
    cr_assert_eq(weft_dtype_size((weft_dtype_t)1000), 0);
    cr_assert_str_eq(weft_dtype_name(WEFT_DTYPE_COUNT), "unknown");
    cr_assert_str_eq(weft_dtype_name((weft_dtype_t)-1), "unknown");
}

Test(op, names)
{
    static const char *const names[] = {"sum", "prod", "min",  "max", "avg", "band",
                                        "bor", "bxor", "land", "lor", "lxor"};

    cr_assert_eq(sizeof(names) / sizeof(names[0]), WEFT_OP_COUNT);
    for (int op = 0; op < WEFT_OP_COUNT; op++) {
        cr_assert_str_eq(weft_op_name((weft_op_t)op), names[op]);
    }
    cr_assert_str_eq(weft_op_name(WEFT_OP_COUNT), "unknown");
    cr_assert_str_eq(weft_op_name((weft_op_t)-1), "unknown");
}

/* ----------------------------------------------------------- lifetime */

Test(init, refcounted, .init = clean_env)
{
    weft_comm_t comm;
    int size = 0;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    /* still initialized after the first finalize */
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_size(comm, &size), WEFT_OK);
    cr_assert_eq(size, 1);
    cr_assert_eq(weft_comm_destroy(comm), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_ERR_NOT_INITIALIZED);
    cr_assert_not_null(strstr(weft_last_error(), "weft_finalize"), "%s", weft_last_error());
}

Test(init, config_read_once, .init = clean_env)
{
    setenv("WEFT_TIMEOUT", "5", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    setenv("WEFT_TIMEOUT", "9", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_float_eq(weft__runtime_config.timeout, 5.0, 1e-12, "second init re-read config");
    /* even a bad value is not looked at by a nested init */
    setenv("WEFT_TIMEOUT", "abc", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    /* a fresh first init reads it again */
    setenv("WEFT_TIMEOUT", "9", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_float_eq(weft__runtime_config.timeout, 9.0, 1e-12);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

Test(init, calls_before_init, .init = clean_env)
{
    weft_comm_t comm = (weft_comm_t)(uintptr_t)0x1234;
    float x[4] = {1, 2, 3, 4}, y[4] = {0};

    cr_assert_eq(weft_comm_world(&comm), WEFT_ERR_NOT_INITIALIZED);
    cr_assert_eq(comm, (weft_comm_t)(uintptr_t)0x1234, "out-parameter written on failure");
    cr_assert_not_null(strstr(weft_last_error(), "weft_comm_world"), "%s", weft_last_error());
    cr_assert_eq(weft_allreduce(x, y, 4, WEFT_FLOAT32, WEFT_SUM, NULL), WEFT_ERR_NOT_INITIALIZED);
    cr_assert_not_null(strstr(weft_last_error(), "weft_allreduce"), "%s", weft_last_error());
    cr_assert_not_null(strstr(weft_last_error(), "weft_init"), "%s", weft_last_error());
    cr_assert_eq(weft_reduce_scatter(x, y, 1, WEFT_FLOAT32, WEFT_SUM, NULL),
                 WEFT_ERR_NOT_INITIALIZED);
    cr_assert_eq(weft_allgather(x, y, 1, WEFT_FLOAT32, NULL), WEFT_ERR_NOT_INITIALIZED);
    cr_assert_eq(y[0], 0.0f);
    cr_assert_eq(weft_finalize(), WEFT_ERR_NOT_INITIALIZED);
}

Test(init, calls_after_finalize, .init = clean_env)
{
    weft_comm_t comm;
    float x = 1, y = 0;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&comm), WEFT_ERR_NOT_INITIALIZED);
    cr_assert_eq(weft_allreduce(&x, &y, 1, WEFT_FLOAT32, WEFT_SUM, NULL), WEFT_ERR_NOT_INITIALIZED);
}

static void *init_finalize_loop(void *arg)
{
    intptr_t bad = 0;

    (void)arg;
    for (int i = 0; i < 200; i++) {
        bad += weft_init() != WEFT_OK;
        bad += weft_finalize() != WEFT_OK;
    }
    return (void *)bad;
}

Test(init, concurrent_init_finalize, .init = clean_env)
{
    pthread_t t[8];
    char *tune;

    setenv("WEFT_TUNE", "allgather:0-inf:ring", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    tune = weft__runtime_config.tune;
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(pthread_create(&t[i], NULL, init_finalize_loop, NULL), 0);
    }
    for (int i = 0; i < 8; i++) {
        void *bad;

        pthread_join(t[i], &bad);
        cr_assert_null(bad, "thread %d: %ld failed calls", i, (long)(intptr_t)bad);
    }
    /* the main thread's reference kept the configuration loaded throughout */
    cr_assert_eq(weft__runtime_config.tune, tune, "configuration reloaded while referenced");
    cr_assert_str_eq(weft__runtime_config.tune, "allgather:0-inf:ring");
    cr_assert_eq(weft_finalize(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_ERR_NOT_INITIALIZED);
}

/* ----------------------------------------------------------- WEFT_TUNE */

static const char *select_name(weft_coll_kind_t kind, size_t bytes, int nranks)
{
    const weft_coll_algo_t *a = weft__coll_select(kind, bytes, nranks);

    cr_assert_not_null(a);
    cr_assert_eq(a->kind, kind);
    return a->name;
}

Test(tune, rules_change_selection, .init = clean_env)
{
    setenv("WEFT_TUNE", "allreduce:0-4k:ring,allreduce:4k-inf:recursive_doubling", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 100, 4), "ring");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 0, 4), "ring");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 4095, 4), "ring");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 4096, 4), "recursive_doubling",
                     "hi is exclusive");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 1 << 20, 4), "recursive_doubling");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, (size_t)1 << 40, 64), "recursive_doubling");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, SIZE_MAX, 64), "recursive_doubling",
                     "inf includes the largest size");
    /* other collectives keep their defaults: the same choice as with no rules */
    const char *rs = select_name(WEFT_COLL_REDUCE_SCATTER, 100, 4);
    const char *ag = select_name(WEFT_COLL_ALLGATHER, 100, 4);
    cr_assert_eq(weft__coll_tune_load(""), WEFT_OK);
    cr_assert_str_eq(select_name(WEFT_COLL_REDUCE_SCATTER, 100, 4), rs);
    cr_assert_str_eq(select_name(WEFT_COLL_ALLGATHER, 100, 4), ag);
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 100, 4), "recursive_doubling",
                     "the rules are gone");
    weft_finalize();
}

Test(tune, first_matching_rule_wins, .init = clean_env)
{
    setenv("WEFT_TUNE", "allreduce:0-1m:ring,allreduce:0-inf:rabenseifner,allreduce:0-inf:ring", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 100, 8), "ring");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, (1 << 20) - 1, 8), "ring");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 1 << 20, 8), "rabenseifner");
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, (size_t)1 << 33, 8), "rabenseifner");
    weft_finalize();
}

Test(tune, range_gap_falls_back_to_default, .init = clean_env)
{
    const weft_coll_algo_t *def_small, *def_mid;

    /* defaults first, with no rules loaded */
    def_small = weft__coll_select(WEFT_COLL_ALLREDUCE, 100, 4);
    def_mid = weft__coll_select(WEFT_COLL_ALLREDUCE, 2048, 4);
    setenv("WEFT_TUNE", "allreduce:1k-2k:rabenseifner", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 1500, 4), "rabenseifner");
    cr_assert_eq(weft__coll_select(WEFT_COLL_ALLREDUCE, 100, 4), def_small);
    cr_assert_eq(weft__coll_select(WEFT_COLL_ALLREDUCE, 2048, 4), def_mid);
    weft_finalize();
}

/* WEFT_SHM_CMA takes a size, inf or auto (the default); anything else is refused by name */
/* A size setting that also takes auto and inf: its default, what each form sets, and a bad
 * value refused with a message naming the variable and the forms. */
static void check_size_auto(const char *var, const size_t *field, size_t def)
{
    static const struct {
        const char *text;
        size_t value;
    } ok[] = {{"auto", WEFT_CONFIG_AUTO}, {"inf", SIZE_MAX}, {"2m", 2u << 20}, {"0", 0}};

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(*field, def, "%s: default %zu, expected %zu", var, *field, def);
    weft_finalize();
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        setenv(var, ok[i].text, 1);
        cr_assert_eq(weft_init(), WEFT_OK, "%s=%s: %s", var, ok[i].text, weft_last_error());
        cr_assert_eq(*field, ok[i].value, "%s=%s", var, ok[i].text);
        weft_finalize();
    }
    setenv(var, "often", 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG, "%s=often accepted", var);
    cr_assert_not_null(strstr(weft_last_error(), var), "%s", weft_last_error());
    cr_assert_not_null(strstr(weft_last_error(), "auto"), "%s", weft_last_error());
    unsetenv(var);
}

Test(config, shm_cma_values, .init = clean_env_redirect)
{
    check_size_auto("WEFT_SHM_CMA", &weft__coll_config.shm_cma, WEFT_SHM_CMA_AUTO);
    check_size_auto("WEFT_SHM_CMA_COPY", &weft__coll_config.shm_cma_copy, WEFT_SHM_CMA_COPY_AUTO);
}

Test(config, hier_pipeline_values, .init = clean_env_redirect)
{
    check_size_auto("WEFT_HIER_PIPELINE", &weft__coll_config.hier_pipeline,
                    WEFT_HIER_PIPELINE_AUTO);
}

Test(config, hier_leader_values, .init = clean_env_redirect)
{
    check_size_auto("WEFT_HIER_LEADER", &weft__coll_config.hier_leader, WEFT_HIER_LEADER_AUTO);
}

Test(tune, finalize_forgets_rules, .init = clean_env)
{
    const weft_coll_algo_t *def = weft__coll_select(WEFT_COLL_ALLREDUCE, 8, 4);

    cr_assert_str_neq(def->name, "ring", "pick a rule that differs from the default");
    setenv("WEFT_TUNE", "allreduce:0-inf:ring", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_str_eq(select_name(WEFT_COLL_ALLREDUCE, 8, 4), "ring");
    cr_assert_eq(weft_finalize(), WEFT_OK);
    unsetenv("WEFT_TUNE");
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft__coll_select(WEFT_COLL_ALLREDUCE, 8, 4), def);
    weft_finalize();
}

static void expect_tune_fails(const char *rules, const char *what)
{
    setenv("WEFT_TUNE", rules, 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG, "WEFT_TUNE='%s' accepted", rules);
    cr_assert_not_null(strstr(weft_last_error(), "WEFT_TUNE"), "'%s': %s", rules,
                       weft_last_error());
    cr_assert_not_null(strstr(weft_last_error(), what), "'%s': error '%s' does not name '%s'",
                       rules, weft_last_error(), what);
    cr_assert_eq(weft_finalize(), WEFT_ERR_NOT_INITIALIZED);
}

Test(tune, unknown_collective, .init = clean_env_redirect)
{
    expect_tune_fails("bcast:0-inf:ring", "bcast");
}

Test(tune, unknown_algorithm, .init = clean_env_redirect)
{
    expect_tune_fails("allreduce:0-inf:bruck", "bruck");
    /* an algorithm of another collective does not count */
    expect_tune_fails("allgather:0-inf:rabenseifner", "rabenseifner");
}

Test(tune, empty_range, .init = clean_env_redirect)
{
    expect_tune_fails("allreduce:8k-4k:ring", "8k");
    expect_tune_fails("allreduce:4k-4k:ring", "4k-4k");
}

Test(tune, missing_fields, .init = clean_env_redirect)
{
    expect_tune_fails("allreduce:ring", "allreduce");
    expect_tune_fails("allreduce", "allreduce");
    expect_tune_fails("allreduce:4k:ring", "4k");
}

Test(tune, bad_size, .init = clean_env_redirect)
{
    expect_tune_fails("allreduce:0-4q:ring", "4q");
    expect_tune_fails("allreduce:x-4k:ring", "x");
    expect_tune_fails("allreduce:inf-inf:ring", "inf");
}

Test(tune, bad_rule_after_good_one, .init = clean_env_redirect)
{
    expect_tune_fails("allreduce:0-4k:ring,reduce_scatter:0-inf:nope", "nope");
}

Test(tune, default_selection_kinds, .init = clean_env)
{
    static const size_t sizes[] = {
        0, 1, 100, 4096, 8192, 65536, 1 << 20, (size_t)4 << 20, (size_t)64 << 20, SIZE_MAX};
    static const int ranks[] = {1, 2, 3, 4, 16, 17, 64, 128};

    cr_assert_eq(weft_init(), WEFT_OK);
    for (int kind = 0; kind < WEFT_COLL_KIND_COUNT; kind++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            for (size_t j = 0; j < sizeof(ranks) / sizeof(ranks[0]); j++) {
                const weft_coll_algo_t *a =
                    weft__coll_select((weft_coll_kind_t)kind, sizes[i], ranks[j]);

                cr_assert_not_null(a, "%s %zu bytes %d ranks", weft__coll_kind_name(kind), sizes[i],
                                   ranks[j]);
                cr_assert_eq(a->kind, (weft_coll_kind_t)kind, "%s got %s",
                             weft__coll_kind_name(kind), a->name);
                cr_assert_not_null(a->build);
                cr_assert_eq(weft__coll_find((weft_coll_kind_t)kind, a->name), a);
            }
        }
    }
    cr_assert_str_eq(weft__coll_kind_name(WEFT_COLL_ALLREDUCE), "allreduce");
    cr_assert_str_eq(weft__coll_kind_name(WEFT_COLL_REDUCE_SCATTER), "reduce_scatter");
    cr_assert_str_eq(weft__coll_kind_name(WEFT_COLL_ALLGATHER), "allgather");
    cr_assert_null(weft__coll_find(WEFT_COLL_ALLREDUCE, "bruck"));
    cr_assert_null(weft__coll_find(WEFT_COLL_ALLGATHER, "rabenseifner"));
    weft_finalize();
}

Test(tune, every_registered_name_selectable, .init = clean_env)
{
    static const struct {
        const char *rule;
        weft_coll_kind_t kind;
        const char *name;
    } cases[] = {
        {"allreduce:0-inf:recursive_doubling", WEFT_COLL_ALLREDUCE, "recursive_doubling"},
        {"allreduce:0-inf:rabenseifner", WEFT_COLL_ALLREDUCE, "rabenseifner"},
        {"allreduce:0-inf:ring", WEFT_COLL_ALLREDUCE, "ring"},
        {"reduce_scatter:0-inf:ring", WEFT_COLL_REDUCE_SCATTER, "ring"},
        {"allgather:0-inf:ring", WEFT_COLL_ALLGATHER, "ring"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(weft__coll_tune_load(cases[i].rule), WEFT_OK, "%s: %s", cases[i].rule,
                     weft_last_error());
        cr_assert_str_eq(select_name(cases[i].kind, 12345, 8), cases[i].name);
        weft__coll_tune_release();
    }
}

/* ---------------------------------------------------------------- tags */

/*
 * The tests take the field widths from pt2pt.h and find each field's position
 * by probing, so they hold for any layout that keeps the fields apart.
 */
#define COMM_MAX ((1u << WEFT_TAG_COMM_BITS) - 1)
#define SEQ_MAX ((1u << WEFT_TAG_SEQ_BITS) - 1)
#define SLOT_MAX WEFT_TAG_MAX_SLOT

static int lowest_bit(uint64_t x)
{
    cr_assert_neq(x, 0);
    return __builtin_ctzll(x);
}

typedef struct tag_layout {
    int comm_shift, seq_shift, slot_shift;
} tag_layout_t;

static tag_layout_t tag_layout(void)
{
    tag_layout_t l = {
        .comm_shift = lowest_bit(weft__tag_make(1, 0, 0)),
        .seq_shift = lowest_bit(weft__tag_make(0, 1, 0)),
        .slot_shift = lowest_bit(weft__tag_make(0, 0, 1)),
    };

    return l;
}

static void tag_split(uint64_t tag, uint32_t *comm, uint32_t *seq, uint32_t *slot)
{
    tag_layout_t l = tag_layout();

    *comm = (uint32_t)(tag >> l.comm_shift) & COMM_MAX;
    *seq = (uint32_t)(tag >> l.seq_shift) & SEQ_MAX;
    *slot = (uint32_t)(tag >> l.slot_shift) & SLOT_MAX;
}

Test(tag, fields_do_not_bleed)
{
    tag_layout_t l = tag_layout();
    uint64_t comm_field = weft__tag_make(COMM_MAX, 0, 0);
    uint64_t seq_field = weft__tag_make(0, SEQ_MAX, 0);
    uint64_t slot_field = weft__tag_make(0, 0, SLOT_MAX);

    cr_assert_geq(WEFT_TAG_COMM_BITS, 8);
    cr_assert_geq(WEFT_TAG_SEQ_BITS, 8);
    cr_assert_geq(WEFT_TAG_SLOT_BITS, 8);
    cr_assert_leq(WEFT_TAG_COMM_BITS + WEFT_TAG_SEQ_BITS + WEFT_TAG_SLOT_BITS, 64);
    cr_assert_eq(weft__tag_make(0, 0, 0), 0);
    /* each field at its maximum is exactly its width of ones at its position */
    cr_assert_eq(comm_field, (uint64_t)COMM_MAX << l.comm_shift);
    cr_assert_eq(seq_field, (uint64_t)SEQ_MAX << l.seq_shift);
    cr_assert_eq(slot_field, (uint64_t)SLOT_MAX << l.slot_shift);
    cr_assert_lt(l.comm_shift + WEFT_TAG_COMM_BITS, 65);
    cr_assert_lt(l.seq_shift + WEFT_TAG_SEQ_BITS, 65);
    cr_assert_lt(l.slot_shift + WEFT_TAG_SLOT_BITS, 65);
    /* no two fields share a bit */
    cr_assert_eq(comm_field & seq_field, 0);
    cr_assert_eq(comm_field & slot_field, 0);
    cr_assert_eq(seq_field & slot_field, 0);
    /* all maxima together are the union of the three fields */
    cr_assert_eq(weft__tag_make(COMM_MAX, SEQ_MAX, SLOT_MAX), comm_field | seq_field | slot_field);
    /* one field at its maximum leaves the others zero */
    cr_assert_eq(weft__tag_make(COMM_MAX, 0, 1), comm_field | weft__tag_make(0, 0, 1));
    cr_assert_eq(weft__tag_make(1, SEQ_MAX, 0), seq_field | weft__tag_make(1, 0, 0));
    cr_assert_eq(weft__tag_make(0, 1, SLOT_MAX), slot_field | weft__tag_make(0, 1, 0));
#ifdef WEFT_TAG_SRC_BITS
    /* the bits a transport may use for the source rank stay zero */
    cr_assert_eq(weft__tag_make(COMM_MAX, SEQ_MAX, SLOT_MAX) & ((1ull << WEFT_TAG_SRC_BITS) - 1),
                 0);
#endif
}

Test(tag, wrap_to_field_width)
{
    /* ids and sequence numbers wrap instead of spilling into the next field */
    cr_assert_eq(weft__tag_make(COMM_MAX + 1, 0, 0), 0);
    cr_assert_eq(weft__tag_make(COMM_MAX + 2, 0, 0), weft__tag_make(1, 0, 0));
    cr_assert_eq(weft__tag_make(0xffffffffu, 0, 0), weft__tag_make(COMM_MAX, 0, 0));
    cr_assert_eq(weft__tag_make(0, SEQ_MAX + 1, 0), 0);
    cr_assert_eq(weft__tag_make(0, SEQ_MAX + 6, 0), weft__tag_make(0, 5, 0));
    cr_assert_eq(weft__tag_make(0, 0xffffffffu, 0), weft__tag_make(0, SEQ_MAX, 0));
    cr_assert_eq(weft__tag_make(0, 0, SLOT_MAX + 1), 0);
    cr_assert_eq(weft__tag_make(3, 0xffffffffu, 0xffffffffu), weft__tag_make(3, SEQ_MAX, SLOT_MAX));
    cr_assert_eq(weft__tag_make(COMM_MAX + 1 + 0x25, 7 * (SEQ_MAX + 1) + 0x31, 9),
                 weft__tag_make(0x25, 0x31, 9));
}

Test(tag, distinct_and_decodable)
{
    const uint32_t comms[] = {0, 1, 2, COMM_MAX / 2 + 1, COMM_MAX - 1, COMM_MAX};
    const uint32_t seqs[] = {0, 1, 2, SEQ_MAX / 2 + 1, SEQ_MAX - 1, SEQ_MAX};
    const uint32_t slots[] = {0, 1, 2, SLOT_MAX / 2 + 1, SLOT_MAX - 1, SLOT_MAX};
    enum { N = 6 * 6 * 6 };
    uint64_t tags[N];
    uint64_t x = 88172645463325252ull;
    int n = 0;

    for (int a = 0; a < 6; a++) {
        for (int b = 0; b < 6; b++) {
            for (int c = 0; c < 6; c++) {
                uint32_t comm, seq, slot;
                uint64_t t = weft__tag_make(comms[a], seqs[b], slots[c]);

                tag_split(t, &comm, &seq, &slot);
                cr_assert_eq(comm, comms[a]);
                cr_assert_eq(seq, seqs[b]);
                cr_assert_eq(slot, slots[c]);
                for (int k = 0; k < n; k++) {
                    cr_assert_neq(tags[k], t, "(%u, %u, %u) collides", comms[a], seqs[b], slots[c]);
                }
                tags[n++] = t;
            }
        }
    }
    /* pseudo-random in-range fields round-trip */
    for (int i = 0; i < 10000; i++) {
        uint32_t comm, seq, slot, c0, s0, l0;

        harness_xorshift(&x);
        c0 = (uint32_t)x & COMM_MAX;
        s0 = (uint32_t)(x >> 20) & SEQ_MAX;
        l0 = (uint32_t)(x >> 40) & SLOT_MAX;
        tag_split(weft__tag_make(c0, s0, l0), &comm, &seq, &slot);
        cr_assert(comm == c0 && seq == s0 && slot == l0, "(%u, %u, %u)", c0, s0, l0);
    }
}

/* ------------------------------------------------------------- logging */

Test(log, debug_level_writes_prefixed_line, .init = clean_env_redirect)
{
    char out[4096], host[64] = "?", prefix[128];
    int rank;

    setenv("WEFT_LOG_LEVEL", "debug", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    read_stderr(out, sizeof(out)); /* drop anything init said */
    cr_assert_eq(weft_comm_rank(NULL, &rank), WEFT_ERR_INVALID_ARG);
    read_stderr(out, sizeof(out));
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    snprintf(prefix, sizeof(prefix), "[%s:%d:", host, (int)getpid());
    cr_assert_eq(strncmp(out, prefix, strlen(prefix)), 0, "line '%s' lacks prefix '%s'", out,
                 prefix);
    cr_assert_not_null(strstr(out, "] weft "), "%s", out);
    cr_assert_not_null(strstr(out, "comm is NULL"), "%s", out);
    cr_assert_eq(out[strlen(out) - 1], '\n');
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line expected: '%s'", out);
    weft_finalize();
}

Test(log, rank_in_prefix, .init = clean_env_redirect)
{
    char out[4096], want[256], host[64] = "?";

    setenv("WEFT_LOG_LEVEL", "debug", 1);
    cr_assert_eq(weft_init(), WEFT_OK);
    weft__log_set_rank(5);
    read_stderr(out, sizeof(out));
    cr_assert_eq(weft_comm_size(NULL, NULL), WEFT_ERR_INVALID_ARG);
    read_stderr(out, sizeof(out));
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    snprintf(want, sizeof(want), "[%s:%d:5] weft", host, (int)getpid());
    cr_assert_eq(strncmp(out, want, strlen(want)), 0, "'%s' does not start with '%s'", out, want);
    weft_finalize();
}

Test(log, default_level_is_quiet_on_bad_argument, .init = clean_env_redirect)
{
    char out[4096];
    int rank;
    float x = 1;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_rank(NULL, &rank), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_BAND, NULL), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(read_stderr(out, sizeof(out)), 0, "unexpected output: '%s'", out);
    weft_finalize();
}

Test(log, error_level_reports_failed_init, .init = clean_env_redirect)
{
    char out[4096];

    setenv("WEFT_LOG_LEVEL", "loud", 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG);
    read_stderr(out, sizeof(out));
    cr_assert_not_null(strstr(out, "] weft error"), "'%s'", out);
    cr_assert_not_null(strstr(out, "WEFT_LOG_LEVEL"), "'%s'", out);
}
