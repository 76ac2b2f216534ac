/*
 * WEFT_TRACE and WEFT_STATS on in-process ranks: every rank's trace file is
 * JSON with one event per operation (names, sequence numbers, counts,
 * bytes), steps inside their operation, proper nesting per track, distinct
 * files per rank (tests/coll/trace_check.py reads them); a full buffer
 * drops and counts; a failure writes the file at once; weft_stats counts
 * exactly the calls made, their bytes, in the right size buckets; bad
 * settings fail weft_init and change nothing; weft_info --stats prints one
 * exact row per collective and size.
 */
#include <criterion/criterion.h>

#include "coll/diag/obs.h"
#include "runtime/comm.h"
#include "runtime/thread_world.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef WEFT_TOP_SRCDIR
#define WEFT_TOP_SRCDIR "."
#endif
#ifndef WEFT_TOP_BUILDDIR
#define WEFT_TOP_BUILDDIR "."
#endif

typedef struct shared {
    atomic_int failures;
    atomic_int checked;
    char first[512];
    char dir[64];
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

static void make_dir(shared_t *sh)
{
    snprintf(sh->dir, sizeof(sh->dir), "/tmp/weft_trace_XXXXXX");
    cr_assert_not_null(mkdtemp(sh->dir));
}

static void remove_dir(const shared_t *sh)
{
    DIR *d = opendir(sh->dir);
    struct dirent *de;
    char path[512];

    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", sh->dir, de->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(sh->dir);
}

static int count_files(const shared_t *sh)
{
    DIR *d = opendir(sh->dir);
    struct dirent *de;
    int n = 0;

    while (d != NULL && (de = readdir(d)) != NULL) {
        n += de->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static int count_hidden(const shared_t *sh)
{
    DIR *d = opendir(sh->dir);
    struct dirent *de;
    int n = 0;

    while (d != NULL && (de = readdir(d)) != NULL) {
        n += de->d_name[0] == '.' && strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static int check_script(const char *args)
{
    char cmd[2048];

    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/coll/trace_check.py %s", WEFT_TOP_SRCDIR,
             args);
    return system(cmd);
}

static void run(int nranks, weft_thread_rank_fn fn, shared_t *sh)
{
    weft_thread_world_opts_t opts = {.nranks = nranks, .seed = 7, .max_delay_ns = 20000};

    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft__thread_world_run(&opts, fn, sh), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(atomic_load(&sh->failures), 0, "%d failure(s); first: %s",
                 atomic_load(&sh->failures), sh->first);
    cr_assert_eq(atomic_load(&sh->checked), nranks, "only %d of %d ranks finished their checks",
                 atomic_load(&sh->checked), nranks);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

static const weft_stats_entry_t *find(const weft_stats_entry_t *e, size_t n, const char *coll,
                                      size_t bytes)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(e[i].collective, coll) == 0 && e[i].bucket_lo <= bytes &&
            bytes < e[i].bucket_hi) {
            return &e[i];
        }
    }
    return NULL;
}

/* One (collective, bucket) entry: calls, bytes, bucket bounds (powers of 4
 * around bytes_each), time and nccl-tests' bus bandwidth. */
static int entry_ok(const weft_stats_entry_t *e, uint64_t calls, uint64_t bytes, double factor)
{
    size_t each = (size_t)(bytes / calls);

    if (e == NULL || e->calls != calls || e->bytes != bytes || e->seconds <= 0) {
        return 0;
    }
    if (e->bucket_hi != e->bucket_lo * 4 || each < e->bucket_lo || each >= e->bucket_hi ||
        (e->bucket_lo & (e->bucket_lo - 1)) != 0) {
        return 0;
    }
    double want = (double)bytes / e->seconds / 1e9 * factor;

    return e->busbw_gbs > want * 0.999999 && e->busbw_gbs < want * 1.000001;
}

static void ops_rank(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    float f[1000];
    int32_t g[40];
    double b[100];
    int64_t x[3], y[3];
    weft_request_t r1, r2;
    weft_comm_t half;
    weft_stats_entry_t e[64];
    size_t n = 0, n2 = 0;

    /* from here on: the communicator's creation ran collectives of its own */
    EXPECT_OK(weft_stats_reset(comm), "reset");
    for (int it = 0; it < 3; it++) {
        for (int i = 0; i < 1000; i++) {
            f[i] = (float)(rank + i);
        }
        EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, f, 1000, WEFT_FLOAT32, WEFT_SUM, comm), "ar");
        for (int i = 0; i < 1000; i++) {
            EXPECT(f[i] == (float)(6 + 4 * i), "allreduce result");
        }
    }
    g[rank * 10] = rank;
    EXPECT_OK(weft_allgather(WEFT_IN_PLACE, g, 10, WEFT_INT32, comm), "allgather");
    for (int i = 0; i < 100; i++) {
        b[i] = rank == 1 ? i : -1;
    }
    EXPECT_OK(weft_bcast(b, 100, WEFT_FLOAT64, 1, comm), "bcast");
    EXPECT(b[99] == 99.0, "bcast result");
    for (int i = 0; i < 3; i++) {
        x[i] = rank;
        y[i] = 10 * rank;
    }
    /* two at once: their events overlap in time and take two tracks */
    EXPECT_OK(weft_iallreduce(WEFT_IN_PLACE, x, 3, WEFT_INT64, WEFT_SUM, comm, &r1), "iar 1");
    EXPECT_OK(weft_iallreduce(WEFT_IN_PLACE, y, 3, WEFT_INT64, WEFT_SUM, comm, &r2), "iar 2");
    EXPECT_OK(weft_wait(r2), "wait 2");
    EXPECT_OK(weft_wait(r1), "wait 1");
    weft_request_free(r1);
    weft_request_free(r2);
    EXPECT(x[2] == 6 && y[0] == 60, "iallreduce results");
    EXPECT_OK(weft_comm_split(comm, rank % 2, rank, &half), "split");
    EXPECT_OK(weft_stats_reset(half), "reset the half after its set-up");
    EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, f, 5, WEFT_FLOAT32, WEFT_SUM, half), "ar half");

    /* the counters: exactly the calls above (the split's own allgather of
     * three int64 per rank included: 96 bytes, in allgather's [64, 256)) */
    EXPECT_OK(weft_stats(comm, e, 64, &n), "weft_stats");
    EXPECT(n == 4, "four (collective, bucket) entries on the world");
    EXPECT(entry_ok(find(e, n, "allreduce", 4000), 3, 12000, 1.5), "allreduce 4000 B x 3");
    EXPECT(entry_ok(find(e, n, "allreduce", 24), 2, 48, 1.5), "allreduce 24 B x 2");
    EXPECT(entry_ok(find(e, n, "allgather", 160), 2, 160 + 96, 0.75), "allgather 160 + 96 B");
    EXPECT(entry_ok(find(e, n, "bcast", 800), 1, 800, 1.0), "bcast 800 B");
    EXPECT(e[0].bucket_lo < e[1].bucket_lo && strcmp(e[0].collective, "allreduce") == 0,
           "ordered by collective, then size");
    EXPECT_OK(weft_stats(comm, e, 1, &n2), "weft_stats, room for one");
    EXPECT(n2 == 4 && e[0].calls == 2 && e[0].bytes == 48, "the first entry, the count of all");
    EXPECT(weft_stats(comm, e, 1, NULL) == WEFT_ERR_INVALID_ARG, "NULL count_p");
    EXPECT(weft_stats(comm, NULL, 3, &n2) == WEFT_ERR_INVALID_ARG, "NULL out with max");
    EXPECT_OK(weft_stats(half, e, 64, &n), "weft_stats on the half");
    EXPECT(entry_ok(find(e, n, "allreduce", 20), 1, 20, 1.0), "half: allreduce 20 B");
    EXPECT_OK(weft_stats_reset(half), "reset");
    EXPECT_OK(weft_stats(half, e, 64, &n), "weft_stats after reset");
    EXPECT(n == 0, "nothing after reset");
    EXPECT_OK(weft_comm_destroy(half), "destroy half");
    EXPECT(weft_stats(half, e, 64, &n) == WEFT_ERR_INVALID_ARG, "destroyed communicator");
    atomic_fetch_add(&sh->checked, 1);
}

Test(trace, ops_steps_stats)
{
    shared_t sh = {0};
    char path[128], args[1024];

    make_dir(&sh);
    snprintf(path, sizeof(path), "%s/t-%%r.json", sh.dir);
    setenv("WEFT_TRACE", path, 1);
    setenv("WEFT_STATS", "1", 1);
    setenv("WEFT_SHM", "no", 1); /* schedules of messages: steps with peers and bytes */
    run(4, ops_rank, &sh);
    cr_expect_eq(count_files(&sh), 4, "one file per rank, no temporary left");
    for (int r = 0; r < 4; r++) {
        snprintf(args, sizeof(args),
                 "%s/t-%d.json %d 4 "
                 "4=allreduce/1000/4000/float32,allreduce/1000/4000/float32,"
                 "allreduce/1000/4000/float32,allgather/10/160/int32,bcast/100/800/float64,"
                 "allreduce/3/24/int64,allreduce/3/24/int64,allgather/3/96/int64 "
                 "2=allreduce/5/20/float32",
                 sh.dir, r, r);
        cr_expect_eq(check_script(args), 0, "rank %d's trace", r);
    }
    /* one timeline of the four ranks; the same rank twice is refused */
    snprintf(args, sizeof(args),
             "/usr/bin/python3 %s/tools/weft_trace_merge.py %s/all.json %s/t-[0-3].json >/dev/null",
             WEFT_TOP_SRCDIR, sh.dir, sh.dir);
    cr_expect_eq(system(args), 0, "%s", args);
    snprintf(args, sizeof(args),
             "--merged %s/all.json %s/t-0.json %s/t-1.json %s/t-2.json "
             "%s/t-3.json",
             sh.dir, sh.dir, sh.dir, sh.dir, sh.dir);
    cr_expect_eq(check_script(args), 0, "the merged trace");
    snprintf(args, sizeof(args),
             "/usr/bin/python3 %s/tools/weft_trace_merge.py %s/twice.json %s/t-1.json "
             "%s/t-1.json 2>/dev/null",
             WEFT_TOP_SRCDIR, sh.dir, sh.dir, sh.dir);
    cr_expect_neq(system(args), 0, "rank 1 twice accepted");
    snprintf(args, sizeof(args), "%s/twice.json", sh.dir);
    cr_expect_eq(access(args, F_OK), -1, "a refused merge writes nothing");
    remove_dir(&sh);
}

/* Who ran each operation (the events' "form"): a blocking allreduce of emu buffers, an
 * enqueued one and a nonblocking one, checked; trace::forms runs it inside a node and across
 * virtual nodes. */
static void forms_rank(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    float h[64], *x;
    weft_stream_t st;
    weft_request_t req;

    for (int i = 0; i < 64; i++) {
        h[i] = (float)(rank + 1 + i);
    }
    EXPECT_OK(weft_mem_alloc(WEFT_MEM_EMU, sizeof(h), (void **)&x), "emu alloc");
    EXPECT_OK(weft_stream_create(WEFT_MEM_EMU, &st), "emu stream");
    EXPECT_OK(weft_memcpy_async(x, h, sizeof(h), st), "copy in");
    EXPECT_OK(weft_stream_synchronize(st), "copy in sync");
    EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, x, 64, WEFT_FLOAT32, WEFT_SUM, comm), "blocking");
    EXPECT_OK(weft_allreduce_enqueue(WEFT_IN_PLACE, x, 64, WEFT_FLOAT32, WEFT_SUM, comm, st),
              "enqueued");
    EXPECT_OK(weft_stream_synchronize(st), "sync");
    EXPECT_OK(weft_iallreduce(WEFT_IN_PLACE, x, 64, WEFT_FLOAT32, WEFT_SUM, comm, &req),
              "nonblocking");
    EXPECT_OK(weft_wait(req), "wait");
    EXPECT_OK(weft_request_free(req), "request free");
    EXPECT_OK(weft_memcpy_async(h, x, sizeof(h), st), "copy out");
    EXPECT_OK(weft_stream_synchronize(st), "sync");
    for (int i = 0; i < 64; i++) {
        EXPECT(h[i] == (float)(4 * (3 + 2 * i)), "the three allreduces' result");
    }
    EXPECT_OK(weft_stream_destroy(st), "stream destroy");
    EXPECT_OK(weft_mem_free(x), "emu free");
    atomic_fetch_add(&sh->checked, 1);
}

/* rpn: WEFT_RANKS_PER_NODE (NULL: one node); stage: WEFT_DEVICE_STAGE (NULL: the default);
 * forms: what rank 0's trace must name the blocking and the enqueued allreduce */
static void forms_job(const char *rpn, const char *stage, const char *blocking,
                      const char *enqueued, const char *nonblocking)
{
    shared_t sh = {0};
    char path[128], args[1024];

    make_dir(&sh);
    snprintf(path, sizeof(path), "%s/t-%%r.json", sh.dir);
    setenv("WEFT_TRACE", path, 1);
    if (rpn != NULL) {
        setenv("WEFT_RANKS_PER_NODE", rpn, 1);
    }
    if (stage != NULL) {
        setenv("WEFT_DEVICE_STAGE", stage, 1);
    }
    run(2, forms_rank, &sh);
    unsetenv("WEFT_RANKS_PER_NODE");
    unsetenv("WEFT_DEVICE_STAGE");
    for (int r = 0; r < 2; r++) {
        snprintf(args, sizeof(args),
                 "%s/t-%d.json %d 2 '2~=allreduce/64/256/float32/%s,allreduce/64/256/float32/%s,"
                 "allreduce/64/256/float32/%s'",
                 sh.dir, r, r, blocking, enqueued, nonblocking);
        cr_expect_eq(check_script(args), 0, "rank %d's trace (%s ranks per node, stage %s)", r,
                     rpn != NULL ? rpn : "all", stage != NULL ? stage : "default");
    }
    remove_dir(&sh);
}

Test(trace, forms)
{
    forms_job(NULL, NULL, "device task", "device task", "call");
    forms_job("1", NULL, "call (host-staged)", "progress thread (host-staged)",
              "call (host-staged)");
    forms_job("1", "0", "call", "progress thread", "call");
}

static void many_rank(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    double v = rank;

    for (int i = 0; i < 10; i++) {
        EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_FLOAT64, WEFT_SUM, comm), "ar");
    }
    atomic_fetch_add(&sh->checked, 1);
}

Test(trace, full_buffer_drops_and_counts)
{
    shared_t sh = {0};
    char path[128], args[256];

    make_dir(&sh);
    snprintf(path, sizeof(path), "%s/small.json", sh.dir); /* no %r: ".<rank>" appended */
    setenv("WEFT_TRACE", path, 1);
    setenv("WEFT_TRACE_EVENTS", "5", 1);
    run(2, many_rank, &sh);
    for (int r = 0; r < 2; r++) {
        snprintf(args, sizeof(args), "--dropped %s/small.json.%d 5", sh.dir, r);
        cr_expect_eq(check_script(args), 0, "rank %d's trace", r);
    }
    remove_dir(&sh);
}

static void timeout_rank(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    char path[256], want[128], *text;
    double v = 1;
    FILE *f;
    long len;

    if (rank == 1) {
        atomic_fetch_add(&sh->checked, 1); /* never joins: rank 0 times out */
        return;
    }
    EXPECT(weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_FLOAT64, WEFT_SUM, comm) == WEFT_ERR_TIMEOUT,
           "allreduce alone times out");
    /* written at the failure, before the communicator goes */
    snprintf(path, sizeof(path), "%s/fail.json.0", sh->dir);
    EXPECT((f = fopen(path, "r")) != NULL, "trace written at the failure");
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    text = calloc(1, (size_t)len + 1);
    EXPECT(text != NULL && fread(text, 1, (size_t)len, f) == (size_t)len, "read the trace");
    fclose(f);
    snprintf(want, sizeof(want), "\"status\":\"%s\"", weft_status_string(WEFT_ERR_TIMEOUT));
    EXPECT(strstr(text, want) != NULL && strstr(text, "\"name\":\"allreduce\"") != NULL,
           "the failed allreduce is in it");
    free(text);
    atomic_fetch_add(&sh->checked, 1);
}

Test(trace, failure_writes_at_once)
{
    shared_t sh = {0};
    char path[128], args[256];

    make_dir(&sh);
    snprintf(path, sizeof(path), "%s/fail.json", sh.dir);
    setenv("WEFT_TRACE", path, 1);
    setenv("WEFT_TIMEOUT", "0.3", 1);
    run(2, timeout_rank, &sh);
    snprintf(args, sizeof(args), "%s/fail.json.0 0 2", sh.dir);
    cr_expect_eq(check_script(args), 0, "rank 0's trace after the failure");
    remove_dir(&sh);
}

static void off_rank(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_stats_entry_t e[4];
    double v = rank;
    size_t n = 99;

    EXPECT_OK(weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_FLOAT64, WEFT_SUM, comm), "ar");
    EXPECT_OK(weft_stats(comm, e, 4, &n), "weft_stats");
    EXPECT(n == 0, "WEFT_STATS off: nothing counted");
    EXPECT(weft__comm_of(comm)->coll->obs == NULL, "off: no observation state at all");
    atomic_fetch_add(&sh->checked, 1);
}

Test(trace, off_by_default)
{
    shared_t sh = {0};

    unsetenv("WEFT_TRACE");
    unsetenv("WEFT_STATS");
    run(2, off_rank, &sh);
    cr_assert_eq(weft__obs_flags, 0);
}

static void bad_setting(const char *name, const char *value, const char *says)
{
    setenv(name, value, 1);
    cr_assert_eq(weft_init(), WEFT_ERR_INVALID_ARG, "%s=%s accepted", name, value);
    cr_expect_not_null(strstr(weft_last_error(), name), "%s", weft_last_error());
    cr_expect_not_null(strstr(weft_last_error(), says), "%s", weft_last_error());
    unsetenv(name);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_expect_eq(weft__obs_flags, 0, "a refused setting changed nothing");
    weft_finalize();
}

Test(trace, bad_settings_refused)
{
    bad_setting("WEFT_TRACE", "/nonexistent-dir/t.json", "does not exist");
    bad_setting("WEFT_TRACE", "/tmp/t-%q.json", "not a substitution");
    bad_setting("WEFT_TRACE", "/tmp/", "names a folder");
    bad_setting("WEFT_TRACE_EVENTS", "0", "between 1 and");
    bad_setting("WEFT_TRACE_EVENTS", "lots", "lots");
    bad_setting("WEFT_STATS", "maybe", "maybe");
}

/* weft_info --stats alone (one rank): every collective at every size, each
 * counted exactly ITERATIONS times with ITERATIONS x its size in bytes. */
Test(trace, weft_info_stats_alone)
{
    static const char *const colls[] = {"allreduce", "reduce_scatter", "allgather", "bcast",
                                        "alltoall"};
    static const char *const lows[] = {"4B", "1K", "64K", "1M"};
    static const unsigned long sizes[] = {8, 1024, 64 * 1024, 1024 * 1024};
    char cmd[512], line[512], coll[64], lo[16], hi[16];
    unsigned long long calls, bytes;
    int seen[5][4] = {{0}}, rows = 0;
    FILE *p;

    unsetenv("WEFT_STATS");
    snprintf(cmd, sizeof(cmd), "%s/tools/weft_info --stats 3", WEFT_TOP_BUILDDIR);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    while (fgets(line, sizeof(line), p) != NULL) {
        if (line[0] == '#') {
            continue;
        }
        cr_assert_eq(sscanf(line, "%63s %15s %15s %llu %llu", coll, lo, hi, &calls, &bytes), 5,
                     "row: %s", line);
        for (int c = 0; c < 5; c++) {
            for (int s = 0; s < 4; s++) {
                if (strcmp(coll, colls[c]) == 0 && strcmp(lo, lows[s]) == 0) {
                    cr_expect_eq(calls, 3, "%s", line);
                    cr_expect_eq(bytes, 3 * sizes[s], "%s", line);
                    seen[c][s]++;
                }
            }
        }
        rows++;
    }
    cr_assert_eq(pclose(p), 0, "weft_info --stats failed");
    cr_expect_eq(rows, 20, "one row per collective and size");
    for (int c = 0; c < 5; c++) {
        for (int s = 0; s < 4; s++) {
            cr_expect_eq(seen[c][s], 1, "%s at %lu B", colls[c], sizes[s]);
        }
    }
}

/* A communicator never destroyed: its trace is written at weft_finalize,
 * not before. */
Test(trace, written_at_finalize)
{
    shared_t sh = {0};
    char pattern[128], path[160], args[256];
    float v[3] = {1, 2, 3};
    weft_comm_t comm;

    make_dir(&sh);
    snprintf(pattern, sizeof(pattern), "%s/w-%%p-%%r.json", sh.dir);
    snprintf(path, sizeof(path), "%s/w-%d-0.json", sh.dir, (int)getpid());
    setenv("WEFT_TRACE", pattern, 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, v, 3, WEFT_FLOAT32, WEFT_MAX, comm), WEFT_OK);
    cr_assert_eq(weft_bcast(v, 2, WEFT_FLOAT32, 0, comm), WEFT_OK);
    cr_expect_eq(access(path, F_OK), -1, "nothing written before weft_finalize");
    cr_assert_eq(weft_finalize(), WEFT_OK);
    snprintf(args, sizeof(args), "%s 0 1 1~=allreduce/3/12/float32,bcast/2/8/float32", path);
    cr_expect_eq(check_script(args), 0, "the trace written at weft_finalize (%s)", path);
    remove_dir(&sh);
}

/* One rank alone (weft_comm_world without a launcher) traces an allreduce to
 * pattern; the trace is written at weft_finalize. */
static void trace_alone(const char *pattern)
{
    float v[3] = {1, 2, 3};
    weft_comm_t comm;

    setenv("WEFT_TRACE", pattern, 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_world(&comm), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_allreduce(WEFT_IN_PLACE, v, 3, WEFT_FLOAT32, WEFT_MAX, comm), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");

    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, mode), 0);
}

static void expect_text(const char *path, const char *text)
{
    char buf[256] = {0};
    FILE *f = fopen(path, "r");

    cr_assert_not_null(f, "%s", path);
    cr_expect_eq(fread(buf, 1, sizeof(buf) - 1, f), strlen(text), "%s was changed", path);
    cr_expect_str_eq(buf, text, "%s was changed", path);
    fclose(f);
}

/* The trace at path is a file of ours, private, and a weft trace. */
static void expect_private_trace(const char *path)
{
    char args[512];
    struct stat st;

    cr_assert_eq(lstat(path, &st), 0, "%s: not written", path);
    cr_expect(S_ISREG(st.st_mode), "%s is not a plain file (mode 0%o)", path, (unsigned)st.st_mode);
    cr_expect_eq(st.st_mode & 07777, 0600, "%s has mode 0%o, not 0600", path,
                 (unsigned)(st.st_mode & 07777));
    cr_expect_eq(st.st_uid, geteuid());
    snprintf(args, sizeof(args), "%s 0 1 1~=allreduce/3/12/float32", path);
    cr_expect_eq(check_script(args), 0, "the trace (%s)", path);
}

/* In a shared sticky folder (a /tmp), names planted in advance by someone
 * else -- at the temporary name a trace used to be written to
 * (FILE.<pid>.tmp) and at FILE itself -- are neither followed nor reused: a
 * link to a file of the user's leaves that file alone, a file planted with
 * mode 0666 does not become the trace. */
Test(trace, planted_names_not_followed)
{
    shared_t sh = {0};
    char victim[160], victim2[160], pattern[160], path[160], planted[192];

    make_dir(&sh);
    cr_assert_eq(chmod(sh.dir, 01777), 0);
    snprintf(victim, sizeof(victim), "%s/victim", sh.dir);
    snprintf(victim2, sizeof(victim2), "%s/victim2", sh.dir);
    write_text(victim, "precious\n", 0644);
    write_text(victim2, "also precious\n", 0644);

    /* links at the temporary name and at the final name */
    snprintf(pattern, sizeof(pattern), "%s/l-%%p-%%r.json", sh.dir);
    snprintf(path, sizeof(path), "%s/l-%d-0.json", sh.dir, (int)getpid());
    snprintf(planted, sizeof(planted), "%s.%d.tmp", path, (int)getpid());
    cr_assert_eq(symlink(victim, planted), 0);
    cr_assert_eq(symlink(victim2, path), 0);
    trace_alone(pattern);
    expect_text(victim, "precious\n");
    expect_text(victim2, "also precious\n");
    expect_private_trace(path);
    unlink(planted);

    /* a world-writable file at the temporary name */
    snprintf(pattern, sizeof(pattern), "%s/f-%%p-%%r.json", sh.dir);
    snprintf(path, sizeof(path), "%s/f-%d-0.json", sh.dir, (int)getpid());
    snprintf(planted, sizeof(planted), "%s.%d.tmp", path, (int)getpid());
    write_text(planted, "planted\n", 0666);
    trace_alone(pattern);
    expect_text(planted, "planted\n");
    expect_private_trace(path);
    unlink(planted);
    cr_expect_eq(count_files(&sh), 4, "the victims and the two traces");
    cr_expect_eq(count_hidden(&sh), 0, "a temporary was left behind");
    remove_dir(&sh);
}
