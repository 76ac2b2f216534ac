/*
 * The configuration registry (runtime/config.h, base/config.h): defaults,
 * the environment, a config file and their precedence, bad values named in
 * the error, sizes with suffixes, and the dump of every variable. Part of
 * test_runtime; each Test runs in its own process and sets its environment
 * before weft_init.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "coll/coll.h"
#include "pt2pt/pt2pt.h"
#include "runtime/comm.h"
#include "runtime/config.h"
#include "tests/runtime/runtime_env.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* WEFT_MPI and WEFT_MPI_STATS, libweft_mpi.so's settings, are in the
 * registry like every other: defaults, environment, file, checked values,
 * listed with help, read back through weft_config_get. */
Test(config, mpi_interposer_settings, .init = clean_env_redirect)
{
    char value[16], path[64], *dump = NULL;
    size_t len = 0;
    FILE *f;

    unsetenv("WEFT_MPI");
    unsetenv("WEFT_MPI_STATS");
    cr_assert_eq(weft_config_get("MPI", value, sizeof(value)), WEFT_ERR_NOT_INITIALIZED);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_config_get("MPI", value, sizeof(value)), WEFT_OK, "%s", weft_last_error());
    cr_assert_str_eq(value, "1");
    cr_assert_eq(weft_config_get("WEFT_MPI_STATS", value, sizeof(value)), WEFT_OK);
    cr_assert_str_eq(value, "0");
    cr_assert_eq(weft_config_get("TIMEOUT", value, sizeof(value)), WEFT_OK);
    cr_assert_str_eq(value, "300");
    cr_assert_eq(weft_config_get("NO_SUCH_THING", value, sizeof(value)), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "WEFT_NO_SUCH_THING"), "%s", weft_last_error());
    cr_assert_eq(weft_config_get("TIMEOUT", value, 3), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_config_get(NULL, value, sizeof(value)), WEFT_ERR_INVALID_ARG);
    f = open_memstream(&dump, &len);
    cr_assert_not_null(f);
    weft__config_dump(f);
    fclose(f);
    cr_assert_not_null(strstr(dump, "# module mpi"));
    check_dump_entry(dump, "WEFT_MPI", "yes", "yes");
    check_dump_entry(dump, "WEFT_MPI_STATS", "no", "no");
    free(dump);
    weft_finalize();

    /* every spelling the interposer took before, from the environment */
    const char *const off[] = {"off", "0", "no"}, *const on[] = {"1", "on", "yes"};
    for (size_t i = 0; i < 3; i++) {
        setenv("WEFT_MPI", off[i], 1);
        setenv("WEFT_MPI_STATS", on[i], 1);
        cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
        cr_assert_eq(weft_config_get("MPI", value, sizeof(value)), WEFT_OK);
        cr_assert_str_eq(value, "0", "WEFT_MPI=%s", off[i]);
        cr_assert_eq(weft_config_get("MPI_STATS", value, sizeof(value)), WEFT_OK);
        cr_assert_str_eq(value, "1", "WEFT_MPI_STATS=%s", on[i]);
        weft_finalize();
    }
    unsetenv("WEFT_MPI");
    unsetenv("WEFT_MPI_STATS");

    /* from the file */
    write_temp(path, sizeof(path), "MPI = off\nWEFT_MPI_STATS = yes\n");
    setenv("WEFT_CONFIG_FILE", path, 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_config_get("MPI", value, sizeof(value)), WEFT_OK);
    cr_assert_str_eq(value, "0");
    cr_assert_eq(weft_config_get("MPI_STATS", value, sizeof(value)), WEFT_OK);
    cr_assert_str_eq(value, "1");
    weft_finalize();
    unlink(path);
    unsetenv("WEFT_CONFIG_FILE");

    /* a value that is no boolean fails weft_init naming the variable */
    setenv("WEFT_MPI", "sometimes", 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "WEFT_MPI"), "%s", weft_last_error());
    unsetenv("WEFT_MPI");
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

/* weft_info -c does not print the unique id, which holds the job's token. */
Test(config, dump_masks_the_unique_id, .init = clean_env)
{
    char id[257], *dump = NULL;
    size_t len = 0;
    FILE *f;

    for (int i = 0; i < 256; i++) {
        id[i] = "0123456789abcdef"[(i * 7 + 3) % 16];
    }
    id[256] = '\0';
    setenv("WEFT_UNIQUE_ID", id, 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    f = open_memstream(&dump, &len);
    cr_assert_not_null(f);
    weft__config_dump(f);
    fclose(f);
    cr_expect_null(strstr(dump, id + 64), "the id (its token part) is printed");
    cr_expect_null(strstr(dump, "\nWEFT_UNIQUE_ID="), "the id has a value line");
    cr_expect_not_null(strstr(dump, "# WEFT_UNIQUE_ID is set (256 characters), not shown"), "%s",
                       dump);
    free(dump);
    weft_finalize();
    unsetenv("WEFT_UNIQUE_ID");
}
