/*
 * Runtime unit tests: status strings and last-error messages, dtype/op
 * names, the configuration registry (defaults, environment, file, bad
 * values, dump), weft_init/weft_finalize reference counting, WEFT_TUNE
 * selection rules, tag encoding and logging.
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

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const weft_vars[] = {"WEFT_CONFIG_FILE", "WEFT_LOG_LEVEL", "WEFT_TIMEOUT",
                                        "WEFT_TUNE", "WEFT_RING_FRAG_SIZE"};

static void clean_env(void)
{
    for (size_t i = 0; i < sizeof(weft_vars) / sizeof(weft_vars[0]); i++) {
        unsetenv(weft_vars[i]);
    }
}

static void clean_env_redirect(void)
{
    clean_env();
    cr_redirect_stderr();
}

/* Write text to a fresh temporary file; the caller unlinks path. */
static void write_temp(char *path, size_t cap, const char *text)
{
    int fd;
    size_t len = strlen(text);

    snprintf(path, cap, "/tmp/weft_test_config_XXXXXX");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp failed");
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
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

static char init_error[512];

/* Expect weft_init to fail with WEFT_ERR_INVALID_ARG and a message holding `what`;
 * the message stays in init_error. */
static void expect_init_fails(const char *what)
{
    weft_status_t st = weft_init();

    snprintf(init_error, sizeof(init_error), "%s", weft_last_error());
    cr_assert_eq(st, WEFT_ERR_INVALID_ARG, "weft_init returned %d (%s), expected INVALID_ARG", st,
                 weft_status_string(st));
    cr_assert_not_null(strstr(init_error, what), "error '%s' does not name '%s'", init_error, what);
    /* a failed init leaves the library uninitialized */
    cr_assert_eq(weft_finalize(), WEFT_ERR_NOT_INITIALIZED);
}

/* ---------------------------------------------------------------- status */

typedef struct status_entry {
    weft_status_t value;
    const char *desc;
} status_entry_t;

static const status_entry_t all_statuses[] = {
#define STATUS_ENTRY(name, value, desc) {WEFT_##name, desc},
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

Test(status, unknown_values)
{
    cr_assert_str_eq(weft_status_string((weft_status_t)2), "unknown status");
    cr_assert_str_eq(weft_status_string((weft_status_t)-13), "unknown status");
    cr_assert_str_eq(weft_status_string((weft_status_t)-1000), "unknown status");
    cr_assert_str_eq(weft_status_string((weft_status_t)12345), "unknown status");
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
        {WEFT_INT8, 1, "int8"},       {WEFT_UINT8, 1, "uint8"},       {WEFT_INT32, 4, "int32"},
        {WEFT_UINT32, 4, "uint32"},   {WEFT_INT64, 8, "int64"},       {WEFT_UINT64, 8, "uint64"},
        {WEFT_FLOAT16, 2, "float16"}, {WEFT_BFLOAT16, 2, "bfloat16"}, {WEFT_FLOAT32, 4, "float32"},
        {WEFT_FLOAT64, 8, "float64"},
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

/* --------------------------------------------------------------- config */

Test(config, defaults, .init = clean_env)
{
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_float_eq(weft__runtime_config.timeout, 300.0, 1e-9);
    cr_assert_eq(weft__runtime_config.log_level, WEFT_LOG_WARN);
    cr_assert_eq(weft__log_level, WEFT_LOG_WARN);
    cr_assert_not_null(weft__runtime_config.tune);
    cr_assert_str_eq(weft__runtime_config.tune, "");
    cr_assert_eq(weft__coll_config.ring_frag_size, 262144);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

Test(config, environment_overrides, .init = clean_env)
{
    setenv("WEFT_TIMEOUT", "2.5", 1);
    setenv("WEFT_LOG_LEVEL", "ERROR", 1);
    setenv("WEFT_RING_FRAG_SIZE", "64k", 1);
    setenv("WEFT_TUNE", "allgather:0-inf:ring", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_float_eq(weft__runtime_config.timeout, 2.5, 1e-12);
    cr_assert_eq(weft__runtime_config.log_level, WEFT_LOG_ERROR);
    cr_assert_eq(weft__log_level, WEFT_LOG_ERROR);
    cr_assert_eq(weft__coll_config.ring_frag_size, 65536);
    cr_assert_str_eq(weft__runtime_config.tune, "allgather:0-inf:ring");
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

Test(config, timeout_inf_disables_deadline, .init = clean_env)
{
    setenv("WEFT_TIMEOUT", "inf", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert(isinf(weft__runtime_config.timeout));
    cr_assert_eq(weft__deadline_ns(), UINT64_MAX);
    weft_finalize();
}

Test(config, timeout_sets_deadline, .init = clean_env)
{
    uint64_t before, deadline;

    setenv("WEFT_TIMEOUT", "3", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    before = weft__time_ns();
    deadline = weft__deadline_ns();
    cr_assert_geq(deadline, before + 3000000000ull);
    cr_assert_lt(deadline, before + 3500000000ull);
    weft_finalize();
}

Test(config, file_forms_and_comments, .init = clean_env)
{
    char path[64];

    write_temp(path, sizeof(path),
               "# a weft configuration file\n"
               "\n"
               "   # indented comment with = sign\n"
               "TIMEOUT = 12\n"
               "WEFT_RING_FRAG_SIZE=1m\n"
               "  LOG_LEVEL\t=   error   \n"
               "WEFT_TUNE = allreduce:0-1k:ring\n");
    setenv("WEFT_CONFIG_FILE", path, 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    unlink(path);
    cr_assert_float_eq(weft__runtime_config.timeout, 12.0, 1e-12);
    cr_assert_eq(weft__coll_config.ring_frag_size, 1u << 20);
    cr_assert_eq(weft__runtime_config.log_level, WEFT_LOG_ERROR);
    cr_assert_str_eq(weft__runtime_config.tune, "allreduce:0-1k:ring");
    cr_assert_str_eq(weft__coll_select(WEFT_COLL_ALLREDUCE, 100, 4)->name, "ring");
    weft_finalize();
}

Test(config, environment_beats_file, .init = clean_env)
{
    char path[64];

    write_temp(path, sizeof(path), "TIMEOUT = 12\nRING_FRAG_SIZE = 8k\n");
    setenv("WEFT_CONFIG_FILE", path, 1);
    setenv("WEFT_TIMEOUT", "7", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    unlink(path);
    cr_assert_float_eq(weft__runtime_config.timeout, 7.0, 1e-12);
    cr_assert_eq(weft__coll_config.ring_frag_size, 8192, "file value for an unset variable");
    weft_finalize();
}

Test(config, bad_timeout, .init = clean_env_redirect)
{
    setenv("WEFT_TIMEOUT", "abc", 1);
    expect_init_fails("WEFT_TIMEOUT");
    cr_assert_not_null(strstr(init_error, "abc"), "%s", init_error);
}

Test(config, bad_timeout_values, .init = clean_env_redirect)
{
    static const char *const bad[] = {"", "0", "-1", "nan", "5s", "1.5.2"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("WEFT_TIMEOUT", bad[i], 1);
        cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG, "WEFT_TIMEOUT='%s' accepted", bad[i]);
        cr_assert_not_null(strstr(weft_last_error(), "WEFT_TIMEOUT"), "%s", weft_last_error());
    }
}

Test(config, bad_log_level, .init = clean_env_redirect)
{
    setenv("WEFT_LOG_LEVEL", "loud", 1);
    expect_init_fails("WEFT_LOG_LEVEL");
    cr_assert_not_null(strstr(init_error, "loud"), "%s", init_error);
}

Test(config, bad_frag_size, .init = clean_env_redirect)
{
    setenv("WEFT_RING_FRAG_SIZE", "12q", 1);
    expect_init_fails("WEFT_RING_FRAG_SIZE");
    cr_assert_not_null(strstr(init_error, "12q"), "%s", init_error);
}

Test(config, bad_value_in_file_names_variable, .init = clean_env_redirect)
{
    char path[64];

    write_temp(path, sizeof(path), "LOG_LEVEL = loud\n");
    setenv("WEFT_CONFIG_FILE", path, 1);
    expect_init_fails("WEFT_LOG_LEVEL");
    unlink(path);
}

Test(config, unknown_variable_in_file, .init = clean_env_redirect)
{
    char path[64];

    write_temp(path, sizeof(path), "TIMEOUT = 5\nWEFT_NO_SUCH_THING = 1\n");
    setenv("WEFT_CONFIG_FILE", path, 1);
    expect_init_fails("WEFT_NO_SUCH_THING");
    cr_assert_not_null(strstr(init_error, path), "%s", init_error);
    unlink(path);
}

Test(config, line_without_equals_in_file, .init = clean_env_redirect)
{
    char path[64];

    write_temp(path, sizeof(path), "# ok\nTIMEOUT 5\n");
    setenv("WEFT_CONFIG_FILE", path, 1);
    expect_init_fails(path);
    cr_assert_not_null(strstr(init_error, ":2"), "line number: %s", init_error);
    unlink(path);
}

/* A comment longer than the reader's line buffer: its tail must not be read
 * as a setting (here it would set TIMEOUT = 1), and a long line is refused
 * with its number, whatever it holds. */
Test(config, overlong_line_in_file, .init = clean_env_redirect)
{
    static char text[8192];
    char path[64];
    size_t n = 0;

    text[n++] = '#';
    while (n < 4095) {
        text[n++] = 'x';
    }
    snprintf(text + n, sizeof(text) - n, "TIMEOUT = 1\n");
    write_temp(path, sizeof(path), text);
    setenv("WEFT_CONFIG_FILE", path, 1);
    expect_init_fails("line 1 is longer than");
    unlink(path);

    /* a line of exactly the longest length is still read */
    memcpy(text, "TUNE = allreduce:0-1k:ring", 26);
    n = 26;
    while (n < 4095) {
        text[n++] = ' ';
    }
    snprintf(text + n, sizeof(text) - n, "\n");
    write_temp(path, sizeof(path), text);
    setenv("WEFT_CONFIG_FILE", path, 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    unlink(path);
    cr_assert_str_eq(weft__runtime_config.tune, "allreduce:0-1k:ring");
    weft_finalize();
}

Test(config, missing_file, .init = clean_env_redirect)
{
    setenv("WEFT_CONFIG_FILE", "/nonexistent/weft/config.conf", 1);
    expect_init_fails("/nonexistent/weft/config.conf");
    cr_assert_not_null(strstr(init_error, "WEFT_CONFIG_FILE"), "%s", init_error);
}

Test(config, failed_init_can_be_retried, .init = clean_env_redirect)
{
    weft_comm_t comm;

    setenv("WEFT_TIMEOUT", "abc", 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_comm_world(&comm), WEFT_ERR_NOT_INITIALIZED);
    setenv("WEFT_TIMEOUT", "9", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_float_eq(weft__runtime_config.timeout, 9.0, 1e-12);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_ERR_NOT_INITIALIZED);
}

Test(config, parse_size)
{
    static const struct {
        const char *text;
        size_t value;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"4k", 4096},
        {"4K", 4096},
        {"4kb", 4096},
        {"1m", 1u << 20},
        {"3M", 3u << 20},
        {"2g", (size_t)2 << 30},
        {"18446744073709551615", SIZE_MAX},
        {"18014398509481983k", (size_t)18014398509481983ull << 10},
    };
    static const char *const bad[] = {
        "",
        "k",
        "-1",
        "-4k",
        " 4k",
        "4 k",
        "4x",
        "4kk",
        "1.5k",
        "12q",
        "inf",
        /* overflow */
        "18446744073709551616",
        "18014398509481984k",
        "17592186044416m",
        "17179869184g",
        "99999999999999999999999999",
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 12345;

        cr_assert_eq(weft__parse_size(good[i].text, 0, &v), WEFT_OK, "'%s': %s", good[i].text,
                     weft_last_error());
        cr_assert_eq(v, good[i].value, "'%s' -> %zu, expected %zu", good[i].text, v, good[i].value);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 12345;

        cr_assert_eq(weft__parse_size(bad[i], 0, &v), WEFT_ERR_INVALID_ARG, "'%s' accepted as %zu",
                     bad[i], v);
        cr_assert_eq(v, 12345, "'%s': out-parameter written on failure", bad[i]);
        cr_assert_not_null(strstr(weft_last_error(), "size"), "%s", weft_last_error());
    }
}

Test(config, parse_size_inf)
{
    size_t v = 0;

    cr_assert_eq(weft__parse_size("inf", 1, &v), WEFT_OK);
    cr_assert_eq(v, SIZE_MAX);
    v = 0;
    cr_assert_eq(weft__parse_size("INF", 1, &v), WEFT_OK);
    cr_assert_eq(v, SIZE_MAX);
    v = 7;
    cr_assert_eq(weft__parse_size("inf", 0, &v), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(v, 7);
    /* allow_inf still parses plain sizes */
    cr_assert_eq(weft__parse_size("16k", 1, &v), WEFT_OK);
    cr_assert_eq(v, 16384);
}

/* Line `n` lines above the one that starts with `key` in dump (NULL if absent). */
static const char *line_above(const char *dump, const char *key, int n, char *out, size_t cap)
{
    const char *p = dump, *line = NULL;
    const char *starts[8] = {0};
    int k = 0;

    while (*p) {
        starts[k++ % 8] = p;
        if (strncmp(p, key, strlen(key)) == 0) {
            line = p;
            break;
        }
        p = strchr(p, '\n');
        if (p == NULL) {
            break;
        }
        p++;
    }
    if (line == NULL || n >= 8 || k - 1 - n < 0) {
        return NULL;
    }
    line = starts[(k - 1 - n) % 8];
    snprintf(out, cap, "%.*s", (int)strcspn(line, "\n"), line);
    return out;
}

static void check_dump_entry(const char *dump, const char *name, const char *def,
                             const char *current)
{
    char key[64], want[128], line[512];

    snprintf(key, sizeof(key), "%s=", name);
    cr_assert_not_null(line_above(dump, key, 0, line, sizeof(line)), "%s missing from:\n%s", name,
                       dump);
    snprintf(want, sizeof(want), "%s=%s", name, current);
    cr_assert_str_eq(line, want);
    cr_assert_not_null(line_above(dump, key, 1, line, sizeof(line)));
    snprintf(want, sizeof(want), "# default: '%s'", def);
    cr_assert_str_eq(line, want, "default of %s", name);
    cr_assert_not_null(line_above(dump, key, 2, line, sizeof(line)));
    cr_assert_eq(strncmp(line, "# ", 2), 0, "help of %s: '%s'", name, line);
    cr_assert_gt(strlen(line), 12, "help of %s is too short: '%s'", name, line);
}

Test(config, dump_every_variable, .init = clean_env)
{
    char *dump = NULL;
    size_t len = 0;
    FILE *f;

    setenv("WEFT_TIMEOUT", "42", 1);
    setenv("WEFT_TUNE", "allreduce:0-4k:ring", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    f = open_memstream(&dump, &len);
    cr_assert_not_null(f);
    weft__config_dump(f);
    fclose(f);
    check_dump_entry(dump, "WEFT_LOG_LEVEL", "warn", "warn");
    check_dump_entry(dump, "WEFT_TIMEOUT", "300", "42");
    check_dump_entry(dump, "WEFT_TUNE", "", "allreduce:0-4k:ring");
    check_dump_entry(dump, "WEFT_RING_FRAG_SIZE", "256k", "256k");
    cr_assert_not_null(strstr(dump, "# module runtime"));
    cr_assert_not_null(strstr(dump, "# module coll"));
    free(dump);
    weft_finalize();
}

Test(config, dump_before_init_shows_defaults, .init = clean_env)
{
    char *dump = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&dump, &len);

    cr_assert_not_null(f);
    weft__config_dump(f);
    fclose(f);
    check_dump_entry(dump, "WEFT_TIMEOUT", "300", "300");
    check_dump_entry(dump, "WEFT_RING_FRAG_SIZE", "256k", "256k");
    check_dump_entry(dump, "WEFT_LOG_LEVEL", "warn", "warn");
    free(dump);
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

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
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
