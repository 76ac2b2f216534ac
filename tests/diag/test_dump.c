/*
 * The flight recorder's JSON dump (coll/diag/dump.h): what it writes is read
 * back by Python's json module (/usr/bin/python3, as tools/weft_doctor reads
 * it), flattened to "path=value" lines, and every field checked; the file is
 * written where WEFT_DUMP_DIR says, atomically (no temporary left); a
 * directory that cannot take it gives a warning and an error, never a crash;
 * the configuration rejects bad values naming the variable; SIGUSR1 with
 * WEFT_DUMP_ON_SIGNAL=1 makes the next wait dump, and an application's own
 * SIGUSR1 handler is left alone; an operation's serial goes on where its
 * 16-bit seq wraps (and past 32 bits), also for a seq peeked before taken.
 *
 * Every Criterion test runs in its own process, so each has a fresh weft
 * and its own environment. A singleton world (no launcher) serves the
 * single-rank cases; two in-process ranks (thread bootstrap, loop
 * transport) show an operation still running, with the rank it waits for.
 */
#include <criterion/criterion.h>

#include "coll/diag/dump.h"
#include "coll/diag/record.h"
#include "comm/comm.h"
#include "runtime/thread_world.h"
#include <weft.h>

#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

/* The JSON file's leaves as "path=json-value" lines ("ops.2.seq=7",
 * "comm.failed=null", "reason=\"signal\""), or NULL when it does not parse
 * (the reason on stderr). The caller frees the text. */
static char *flatten(const char *file)
{
    static const char script[] =
        "import json, sys\n"
        "def walk(p, v):\n"
        "    if isinstance(v, dict):\n"
        "        for k in v: walk(p + [k], v[k])\n"
        "    elif isinstance(v, list):\n"
        "        print('.'.join(p + ['len']) + '=' + str(len(v)))\n"
        "        for i, x in enumerate(v): walk(p + [str(i)], x)\n"
        "        for i, x in enumerate(v): walk(p + [str(i - len(v))], x)\n"
        "    else:\n"
        "        print('.'.join(p) + '=' + json.dumps(v))\n"
        "walk([], json.load(open(sys.argv[1], encoding='utf-8')))\n";
    char cmd[4096], *text = NULL;
    size_t len = 0;
    FILE *p, *mem = open_memstream(&text, &len);
    int c;

    snprintf(cmd, sizeof(cmd), PY " -c \"$WEFT_TEST_SCRIPT\" '%s'", file);
    setenv("WEFT_TEST_SCRIPT", script, 1);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    while ((c = getc(p)) != EOF) {
        putc(c, mem);
    }
    fclose(mem);
    if (pclose(p) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The value of path in flattened text ("" when absent), copied to buf. */
static const char *field(const char *text, const char *path, char *buf, size_t len)
{
    size_t n = strlen(path);

    buf[0] = '\0';
    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *nl = strchr(l, '\n');

        if (strncmp(l, path, n) == 0 && l[n] == '=') {
            size_t vlen = (nl ? (size_t)(nl - l) : strlen(l)) - n - 1;

            snprintf(buf, len, "%.*s", (int)vlen, l + n + 1);
            break;
        }
        l = nl ? nl + 1 : NULL;
    }
    return buf;
}

#define EXPECT_FIELD(text, path, want)                                                             \
    do {                                                                                           \
        char got_[512];                                                                            \
        cr_expect_str_eq(field(text, path, got_, sizeof(got_)), want, "%s", path);                 \
    } while (0)

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/weft-test-dump.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    setenv("WEFT_DUMP_DIR", dir, 1);
}

/* Files in dir, the ".tmp" ones counted apart. */
static int count_files(int *tmp_p)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    *tmp_p = 0;
    cr_assert_not_null(d);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            n++;
            *tmp_p += strstr(e->d_name, ".tmp") != NULL;
        }
    }
    closedir(d);
    return n;
}

static void remove_dir(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

static weft_comm_t singleton(void)
{
    weft_comm_t comm;

    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK, "%s", weft_last_error());
    return comm;
}

static char *dump_file_text(const char *name)
{
    char path[256];
    char *text;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    cr_assert_eq(access(path, R_OK), 0, "no %s", path);
    text = flatten(path);
    cr_assert_not_null(text, "%s is not valid JSON", path);
    return text;
}

Test(dump, fields_of_a_singleton)
{
    float f[5] = {1, 2, 3, 4, 5};
    int32_t b[3] = {7, 8, 9};
    int64_t m[2] = {-4, 6};
    char want[64], *text, *mem = NULL;
    size_t memlen = 0;
    FILE *out = open_memstream(&mem, &memlen);
    weft_comm_t comm;
    int tmp;

    make_dir();
    comm = singleton();
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, f, 5, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_assert_eq(weft_bcast(b, 3, WEFT_INT32, 0, comm), WEFT_OK);
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, m, 2, WEFT_INT64, WEFT_MAX, comm), WEFT_OK);
    cr_assert_eq(count_files(&tmp), 0, "nothing is dumped before it is asked for");
    cr_assert_eq(weft_comm_dump(comm, out), WEFT_OK, "%s", weft_last_error());
    fclose(out);
    cr_expect_not_null(strstr(mem, "bcast"), "the text lines still go to the stream");
    free(mem);
    cr_expect_eq(count_files(&tmp), 1);
    cr_expect_eq(tmp, 0, "the temporary file was renamed");

    text = dump_file_text("weft-comm0-rank0-world0.json");
    EXPECT_FIELD(text, "format", "\"weft-flight-recorder\"");
    EXPECT_FIELD(text, "version", "1");
    EXPECT_FIELD(text, "reason", "\"weft_comm_dump\"");
    snprintf(want, sizeof(want), "%d", (int)getpid());
    EXPECT_FIELD(text, "pid", want);
    EXPECT_FIELD(text, "world_rank", "0");
    EXPECT_FIELD(text, "comm.id", "0");
    EXPECT_FIELD(text, "comm.name", "\"comm0\"");
    EXPECT_FIELD(text, "comm.rank", "0");
    EXPECT_FIELD(text, "comm.size", "1");
    EXPECT_FIELD(text, "comm.world_ranks.len", "1");
    EXPECT_FIELD(text, "comm.world_ranks.0", "0");
    EXPECT_FIELD(text, "comm.failed", "null");
    EXPECT_FIELD(text, "clock", "\"CLOCK_MONOTONIC_COARSE\"");
    /* the three operations, last first */
    EXPECT_FIELD(text, "ops.-1.collective", "\"allreduce\"");
    EXPECT_FIELD(text, "ops.-1.count", "2");
    EXPECT_FIELD(text, "ops.-1.dtype", "\"int64\"");
    EXPECT_FIELD(text, "ops.-1.op", "\"max\"");
    EXPECT_FIELD(text, "ops.-1.root", "null");
    EXPECT_FIELD(text, "ops.-1.state", "\"done\"");
    EXPECT_FIELD(text, "ops.-1.status", "\"WEFT_OK\"");
    EXPECT_FIELD(text, "ops.-1.error", "null");
    EXPECT_FIELD(text, "ops.-1.where", "null");
    EXPECT_FIELD(text, "ops.-2.collective", "\"bcast\"");
    EXPECT_FIELD(text, "ops.-2.count", "3");
    EXPECT_FIELD(text, "ops.-2.dtype", "\"int32\"");
    EXPECT_FIELD(text, "ops.-2.op", "null");
    EXPECT_FIELD(text, "ops.-2.root", "0");
    EXPECT_FIELD(text, "ops.-3.collective", "\"allreduce\"");
    EXPECT_FIELD(text, "ops.-3.count", "5");
    EXPECT_FIELD(text, "ops.-3.dtype", "\"float32\"");
    EXPECT_FIELD(text, "ops.-3.op", "\"sum\"");
    {
        char a[64], b2[64], c[64], wall[64], mono[64], start[64], sw[64];
        unsigned long long s1, s2, s3;

        s1 = strtoull(field(text, "ops.-3.seq", a, sizeof(a)), NULL, 10);
        s2 = strtoull(field(text, "ops.-2.seq", b2, sizeof(b2)), NULL, 10);
        s3 = strtoull(field(text, "ops.-1.seq", c, sizeof(c)), NULL, 10);
        cr_expect(s2 == s1 + 1 && s3 == s2 + 1, "seqs %llu %llu %llu", s1, s2, s3);
        snprintf(want, sizeof(want), "%llu", s3 + 1);
        EXPECT_FIELD(text, "comm.next_seq", want);
        snprintf(want, sizeof(want), "%llu", s3 + 1);
        EXPECT_FIELD(text, "ops_recorded", want);
        /* the wall-clock anchor: an operation's wall start is the dump's wall
         * time minus how long before the dump it started */
        field(text, "dump_wall_ns", wall, sizeof(wall));
        field(text, "dump_mono_ns", mono, sizeof(mono));
        field(text, "ops.-1.start_mono_ns", start, sizeof(start));
        field(text, "ops.-1.start_wall_ns", sw, sizeof(sw));
        cr_expect_eq(strtoull(wall, NULL, 10) -
                         (strtoull(mono, NULL, 10) - strtoull(start, NULL, 10)),
                     strtoull(sw, NULL, 10));
        cr_expect_geq(strtoull(mono, NULL, 10), strtoull(start, NULL, 10));
    }
    free(text);
    weft_comm_destroy(comm);
    weft_finalize();
    remove_dir();
}

Test(dump, string_escapes)
{
    static const char tricky[] = "a\"b\\c\nd\te\rf\x01g\x1fh/i";
    char path[128], cmd[256], *mem = NULL, out[256] = "";
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len), *p;

    weft__dump_json_string(f, tricky);
    fclose(f);
    snprintf(path, sizeof(path), "/tmp/weft-test-escape.%d.json", (int)getpid());
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(mem, f);
    fclose(f);
    free(mem);
    /* Python decodes it to the same bytes (hex, to compare exactly) */
    snprintf(cmd, sizeof(cmd),
             PY " -c 'import json,sys; print(json.load(open(sys.argv[1])).encode().hex())' %s",
             path);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert_not_null(fgets(out, sizeof(out), p));
    cr_assert_eq(pclose(p), 0);
    unlink(path);
    out[strcspn(out, "\n")] = '\0';
    {
        char want[256] = "";

        for (size_t i = 0; i < strlen(tricky); i++) {
            snprintf(want + 2 * i, sizeof(want) - 2 * i, "%02x", (unsigned char)tricky[i]);
        }
        cr_expect_str_eq(out, want);
    }
}

Test(dump, unwritable_dir_warns)
{
    char file[128], *mem = NULL;
    size_t len = 0;
    FILE *out;
    weft_comm_t comm;
    float x = 1;
    int tmp;

    make_dir();
    /* a regular file where the directory should be: root cannot write there
     * either */
    snprintf(file, sizeof(file), "%s/plain", dir);
    out = fopen(file, "w");
    cr_assert_not_null(out);
    fclose(out);
    setenv("WEFT_DUMP_DIR", file, 1);
    comm = singleton();
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    out = open_memstream(&mem, &len);
    cr_expect_eq(weft_comm_dump(comm, out), WEFT_OK, "the stream part still works");
    fclose(out);
    cr_expect_not_null(strstr(mem, "allreduce"));
    free(mem);
    cr_expect_eq(weft__dump_write(weft__comm_of(comm), file, WEFT_DUMP_REQUEST), WEFT_ERR_INVALID_ARG);
    cr_expect_not_null(strstr(weft_last_error(), file), "%s", weft_last_error());
    cr_expect_not_null(strstr(weft_last_error(), "Not a directory"), "%s", weft_last_error());
    cr_expect_eq(weft__dump_write(weft__comm_of(comm), "/nonexistent/weft", WEFT_DUMP_REQUEST),
                 WEFT_ERR_INVALID_ARG);
    cr_expect_not_null(strstr(weft_last_error(), "No such file"), "%s", weft_last_error());
    cr_expect_eq(count_files(&tmp), 1, "only the plain file");
    /* the communicator goes on */
    cr_expect_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_expect_eq(x, 1.0f);
    weft_comm_destroy(comm);
    weft_finalize();
    remove_dir();
}

Test(dump, bad_config_named)
{
    setenv("WEFT_DUMP_ON_SIGNAL", "maybe", 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG);
    cr_expect_not_null(strstr(weft_last_error(), "WEFT_DUMP_ON_SIGNAL"), "%s", weft_last_error());
    cr_expect_not_null(strstr(weft_last_error(), "not a boolean"), "%s", weft_last_error());
    setenv("WEFT_DUMP_ON_SIGNAL", "yes", 1);
    setenv("WEFT_DUMP_DIR", "/tmp/a\nb", 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG);
    cr_expect_not_null(strstr(weft_last_error(), "WEFT_DUMP_DIR"), "%s", weft_last_error());
    cr_expect_not_null(strstr(weft_last_error(), "control character (byte 10 at offset 6)"), "%s",
                       weft_last_error());
    setenv("WEFT_DUMP_DIR", "", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    weft_finalize();
}

Test(dump, sigusr1_dumps_at_the_next_wait)
{
    struct sigaction now;
    weft_comm_t comm;
    float x = 2;
    char *text;
    int tmp;

    make_dir();
    setenv("WEFT_DUMP_ON_SIGNAL", "1", 1);
    comm = singleton();
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_assert_eq(raise(SIGUSR1), 0); /* the process lives on */
    cr_expect_eq(count_files(&tmp), 0, "the handler itself writes nothing");
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_MAX, comm), WEFT_OK);
    cr_expect_eq(count_files(&tmp), 1);
    text = dump_file_text("weft-comm0-rank0-world0.json");
    EXPECT_FIELD(text, "reason", "\"signal\"");
    EXPECT_FIELD(text, "ops.-1.op", "\"sum\""); /* dumped before the second one started */
    EXPECT_FIELD(text, "ops.-1.state", "\"done\"");
    free(text);
    /* once per signal: the next call does not dump again */
    remove_dir();
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_expect_eq(count_files(&tmp), 0);
    weft_comm_destroy(comm);
    weft_finalize();
    /* the last weft_finalize restores the default action */
    cr_assert_eq(sigaction(SIGUSR1, NULL, &now), 0);
    cr_expect(now.sa_handler == SIG_DFL);
    remove_dir();
}

static atomic_int app_signals;

static void app_handler(int signo)
{
    (void)signo;
    atomic_fetch_add(&app_signals, 1);
}

Test(dump, application_handler_left_alone)
{
    struct sigaction sa = {.sa_handler = app_handler}, now;
    weft_comm_t comm;
    float x = 2;
    int tmp;

    make_dir();
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    setenv("WEFT_DUMP_ON_SIGNAL", "1", 1);
    comm = singleton();
    cr_assert_eq(sigaction(SIGUSR1, NULL, &now), 0);
    cr_expect(now.sa_handler == app_handler, "weft replaced the application's handler");
    raise(SIGUSR1);
    cr_expect_eq(atomic_load(&app_signals), 1);
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_expect_eq(count_files(&tmp), 0);
    weft_comm_destroy(comm);
    weft_finalize();
    cr_assert_eq(sigaction(SIGUSR1, NULL, &now), 0);
    cr_expect(now.sa_handler == app_handler);
    remove_dir();
}

/* Two in-process ranks: rank 0 starts an allreduce rank 1 has not called
 * and dumps while it runs; then rank 1 joins. */
static atomic_int stage;

static void two_ranks(weft_comm_t comm, int rank, void *arg)
{
    float v[3] = {1, 2, 3};
    weft_request_t req;

    (void)arg;
    if (rank == 1) {
        while (atomic_load(&stage) == 0) {
            usleep(1000);
        }
        cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, v, 3, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    } else {
        char path[128], *text;
        FILE *f;
        int done = 0;

        cr_assert_eq(weft_iallreduce(WEFT_IN_PLACE, v, 3, WEFT_FLOAT32, WEFT_SUM, comm, &req),
                     WEFT_OK);
        cr_assert_eq(weft_test(req, &done), WEFT_OK);
        cr_assert_eq(done, 0);
        snprintf(path, sizeof(path), "%s/running.json", dir);
        f = fopen(path, "w");
        cr_assert_not_null(f);
        cr_assert_eq(weft__dump_json(weft__comm_of(comm), "test", f), WEFT_OK);
        fclose(f);
        atomic_store(&stage, 1);
        cr_assert_eq(weft_wait(req), WEFT_OK);
        weft_request_free(req);
        text = flatten(path);
        cr_assert_not_null(text);
        EXPECT_FIELD(text, "comm.size", "2");
        EXPECT_FIELD(text, "comm.world_ranks.len", "2");
        EXPECT_FIELD(text, "ops.-1.state", "\"running\"");
        EXPECT_FIELD(text, "ops.-1.status", "\"WEFT_INPROGRESS\"");
        EXPECT_FIELD(text, "ops.-1.end_mono_ns", "null");
        EXPECT_FIELD(text, "ops.-1.where.step", "0");
        EXPECT_FIELD(text, "ops.-1.where.waiting_for.len", "1");
        EXPECT_FIELD(text, "ops.-1.where.waiting_for.0", "1");
        free(text);
    }
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(v[i], (float)(2 * (i + 1)), "rank %d v[%d] = %g", rank, i, (double)v[i]);
    }
}

Test(dump, earlier_signal_is_not_a_new_communicators)
{
    weft_comm_t comm;
    float x = 2;
    int tmp;

    make_dir();
    setenv("WEFT_DUMP_ON_SIGNAL", "1", 1);
    comm = singleton();
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_assert_eq(raise(SIGUSR1), 0);
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_expect_eq(count_files(&tmp), 1, "the signal is served once");
    weft_comm_destroy(comm);
    weft_finalize();
    remove_dir();
    cr_assert_eq(mkdir(dir, 0700), 0);
    /* a communicator made after the signal (here after weft_finalize and
     * weft_init) has no dump of it to serve */
    comm = singleton();
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    }
    cr_expect_eq(count_files(&tmp), 0, "a dump for a signal that came before the communicator");
    weft_comm_destroy(comm);
    weft_finalize();
    remove_dir();
}

Test(dump, handler_installed_after_init_survives_finalize)
{
    struct sigaction sa = {.sa_handler = app_handler}, now;
    weft_comm_t comm;

    make_dir();
    setenv("WEFT_DUMP_ON_SIGNAL", "1", 1);
    comm = singleton();
    cr_expect_str_eq(weft_last_error(), "", "weft_init succeeded but left: %s",
                     weft_last_error());
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0); /* the application's, after weft_init */
    weft_comm_destroy(comm);
    weft_finalize();
    cr_assert_eq(sigaction(SIGUSR1, NULL, &now), 0);
    cr_expect(now.sa_handler == app_handler, "weft_finalize removed the application's handler");
    raise(SIGUSR1); /* with the default action this would end the test */
    cr_expect_eq(atomic_load(&app_signals), 1);
    remove_dir();
}

Test(dump, running_operation_names_whom_it_waits_for)
{
    weft_thread_world_opts_t opts = {.nranks = 2};

    make_dir();
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft__thread_world_run(&opts, two_ranks, NULL), WEFT_OK, "%s", weft_last_error());
    weft_finalize();
    remove_dir();
}

/* seq, the tags' 16-bit sequence number, wraps after 65532 (65533 to 65535
 * are reserved); serial, the operation's number, goes on: a singleton's
 * operations up to just past the wrap, the last 16 kept, straddle it. */
Test(dump, serial_goes_on_past_the_seq_wrap)
{
    enum { KEPT = 16, END = 65536 + 6 };
    char path[64], got[64], *text, *mem = NULL;
    unsigned long long prev = 0;
    size_t memlen = 0;
    FILE *out;
    weft_comm_t comm;
    int wrapped = 0;

    make_dir();
    setenv("WEFT_RECORD_OPS", "16", 1);
    comm = singleton();
    while (weft__comm_of(comm)->seq < END) {
        uint32_t before = weft__comm_of(comm)->seq;
        int32_t x = (int32_t)before;

        cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT32, WEFT_SUM, comm), WEFT_OK,
                     "%s", weft_last_error());
        cr_assert_eq(x, (int32_t)before, "a singleton's sum is its own value");
        cr_assert_gt(weft__comm_of(comm)->seq, before, "every allreduce takes a sequence number");
    }
    out = open_memstream(&mem, &memlen);
    cr_assert_eq(weft_comm_dump(comm, out), WEFT_OK, "%s", weft_last_error());
    fclose(out);
    free(mem);
    text = dump_file_text("weft-comm0-rank0-world0.json");
    EXPECT_FIELD(text, "ops.len", "16");
    snprintf(got, sizeof(got), "%d", END);
    EXPECT_FIELD(text, "comm.next_seq", got);
    for (int i = 0; i < KEPT; i++) {
        unsigned long long serial, seq;

        snprintf(path, sizeof(path), "ops.%d.serial", i);
        serial = strtoull(field(text, path, got, sizeof(got)), NULL, 10);
        snprintf(path, sizeof(path), "ops.%d.seq", i);
        seq = strtoull(field(text, path, got, sizeof(got)), NULL, 10);
        cr_expect_eq(seq, serial & 0xffff, "op %d: seq %llu, serial %llu", i, seq, serial);
        if (i > 0) {
            /* one more each time, but 65533 to 65535 are skipped */
            cr_expect_eq(serial, prev + (serial == 65536 ? 4 : 1), "op %d: serial %llu after %llu",
                         i, serial, prev);
        }
        wrapped |= serial == 65536;
        prev = serial;
    }
    cr_expect(wrapped, "the kept operations straddle the wrap");
    cr_expect_eq(prev, END - 1, "the last operation's serial");
    free(text);
    weft_comm_destroy(comm);
    weft_finalize();
    remove_dir();
}

/* The shared-memory path records an operation before its schedule takes the
 * sequence number (weft__comm_peek_seq): at 65534, the peeked seq is the 0
 * the take will skip to, and its serial counts the skip. Serial goes on past
 * the 32-bit counter's wrap too. */
Test(dump, serial_of_a_peeked_seq_and_past_32_bits)
{
    weft_op_desc_t desc = {
        .coll = "allreduce", .algo = "shm", .count = 1, .dtype = WEFT_INT32, .op = WEFT_SUM};
    char path[64], got[64], *text, *mem = NULL;
    unsigned long long serial[8], prev;
    size_t memlen = 0;
    weft_comm_t comm;
    FILE *out;
    long rec;
    int n;

    make_dir();
    setenv("WEFT_RECORD_OPS", "64", 1);
    comm = singleton();
    weft__comm_of(comm)->seq = 3u * 65536 + 65534;
    rec = weft__record_start(weft__comm_of(comm), &desc, weft__comm_peek_seq(weft__comm_of(comm)), -1);
    cr_assert_eq(weft__comm_take_seq(weft__comm_of(comm)), 0u);
    weft__record_end(weft__comm_of(comm), rec, WEFT_OK);
    /* to 2^31 and to 2^32 - 16 in steps under 2^31: then across the wrap */
    weft__comm_of(comm)->seq = 0x80000000u;
    cr_assert_eq(weft_barrier(comm), WEFT_OK, "%s", weft_last_error());
    weft__comm_of(comm)->seq = 0xfffffff0u;
    for (int i = 0; i < 32; i++) {
        cr_assert_eq(weft_barrier(comm), WEFT_OK, "%s", weft_last_error());
    }
    out = open_memstream(&mem, &memlen);
    cr_assert_eq(weft_comm_dump(comm, out), WEFT_OK, "%s", weft_last_error());
    fclose(out);
    free(mem);
    text = dump_file_text("weft-comm0-rank0-world0.json");
    n = atoi(field(text, "ops.len", got, sizeof(got)));
    cr_assert_geq(n, 34, "ops.len %d", n);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "ops.%d.serial", n - 34 + i);
        serial[i] = strtoull(field(text, path, got, sizeof(got)), NULL, 10);
    }
    cr_expect_eq(serial[0], 4ull * 65536, "the peeked seq 0 is the one after the skip");
    cr_expect_eq(serial[1], 0x80000000ull);
    cr_expect_eq(serial[2], 0xfffffff0ull);
    prev = serial[2];
    for (int i = n - 31; i < n; i++) {
        unsigned long long s, seq;

        snprintf(path, sizeof(path), "ops.%d.serial", i);
        s = strtoull(field(text, path, got, sizeof(got)), NULL, 10);
        snprintf(path, sizeof(path), "ops.%d.seq", i);
        seq = strtoull(field(text, path, got, sizeof(got)), NULL, 10);
        cr_expect_eq(s, prev + ((s & 0xffff) == 0 ? 4 : 1), "op %d: serial %llu after %llu", i, s,
                     prev);
        cr_expect_eq(seq, s & 0xffff, "op %d: seq %llu, serial %llu", i, seq, s);
        prev = s;
    }
    cr_expect_gt(prev, 0xffffffffull, "past 32 bits: %llu", prev);
    free(text);
    weft_comm_destroy(comm);
    weft_finalize();
    remove_dir();
}

/* In a shared sticky folder, names planted at the temporary names a dump
 * used to take (".<name>.<pid>.<serial>.tmp", predictable) neither stop the
 * dump nor are followed; the dump is readable by its owner only. */
Test(dump, private_file_in_a_shared_dir)
{
    char victim[128], planted[256], path[256];
    struct stat st;
    weft_comm_t comm;
    float x = 1;
    FILE *f;

    make_dir();
    cr_assert_eq(chmod(dir, 01777), 0);
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    f = fopen(victim, "w");
    cr_assert_not_null(f);
    fputs("precious\n", f);
    fclose(f);
    for (unsigned serial = 0; serial < 4; serial++) {
        snprintf(planted, sizeof(planted), "%s/.weft-comm0-rank0-world0.json.%d.%u.tmp", dir,
                 (int)getpid(), serial);
        cr_assert_eq(symlink(victim, planted), 0);
    }
    comm = singleton();
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK);
    cr_expect_eq(weft__dump_write(weft__comm_of(comm), dir, WEFT_DUMP_REQUEST), WEFT_OK, "%s", weft_last_error());
    snprintf(path, sizeof(path), "%s/weft-comm0-rank0-world0.json", dir);
    cr_assert_eq(lstat(path, &st), 0, "no dump written");
    cr_expect(S_ISREG(st.st_mode));
    cr_expect_eq(st.st_mode & 07777, 0600, "the dump has mode 0%o", (unsigned)(st.st_mode & 07777));
    cr_assert_eq(lstat(victim, &st), 0);
    cr_expect_eq(st.st_size, 9, "the file a planted name links to was written");
    weft_comm_destroy(comm);
    weft_finalize();
    remove_dir();
}
