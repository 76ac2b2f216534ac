/*
 * A soak of weft between real processes (issue 14): for a bounded time,
 * every rank runs the same seeded random mix of
 *  - the 12 collectives, blocking, nonblocking (up to 3 outstanding on one
 *    communicator, completed by weft_wait, weft_test or weft_waitall) and
 *    stream-ordered on emu device memory (weft_*_enqueue on a
 *    weft_stream_create(WEFT_MEM_EMU) stream, buffers from weft_mem_alloc),
 *    blocking ones on emu memory too;
 *  - point-to-point rings, blocking and nonblocking;
 *  - communicator churn: every round dups and splits the world
 *    communicator, runs its operations on the three, and destroys the two;
 *    one round in eight aborts its dup (weft_comm_abort on every rank, with
 *    an operation pending), checks that the next operation on it fails with
 *    WEFT_ERR_ABORTED, destroys it and replaces it;
 * and checks every element of every result (and that nothing past it was
 * written) against a reference computed from per-rank deterministic data.
 *
 * Resources are sampled after every round, when only the world
 * communicator, the stream and the soak's fixed buffers are alive: resident
 * memory (VmRSS), open file descriptors (/proc/self/fd) and mappings
 * (/proc/self/maps lines), and malloc's bytes in use (mallinfo2: in its
 * arenas and mmapped). The first sample after the warm-up (the first 40% of
 * the run: malloc's arenas fill up with free chunks over the first 40 s or
 * so, about 1 MiB per rank, then stay level; UCX's shared-memory receive
 * pools, which would enter page by page over the first minute, are read
 * whole just before it, touch_sysv) is the baseline, the first after the
 * middle of the rest the halfway mark. A rank fails when, at the end, its
 * resident memory is more than 2 MiB above the baseline, or malloc's bytes
 * in use grew in the second half by more than 128 KiB and more than half of
 * what they grew in the first (a leak grows at a steady rate; caches level
 * off), or it has more descriptors or mappings than the baseline, or a
 * result was wrong.
 * --leak B plants a leak of B bytes per round, so that tools/soak.sh can
 * show that the check catches one.
 *
 * --churn N instead runs N cycles of dup + allreduce + destroy of the world
 * communicator (baseline after the first 20% of them) under the same
 * criteria, and reports the growth per 1000 cycles.
 *
 * Launch: the soak process forks the ranks and never calls weft itself;
 * rank 0 starts the TCP bootstrap root (weft_get_unique_id) and hands the
 * id to the others through a shared mapping. WEFT_RANKS_PER_NODE (--rpn,
 * default 2) splits the machine into virtual nodes, so that with the
 * default 4 ranks both the shared-memory and the UCX paths run. The parent
 * reaps the ranks before a deadline (the run plus 120 s), kills them all
 * when one fails or the deadline passes, and prints each rank's figures.
 * Only weft's public API (weft.h) is used.
 *
 * Exit status: 0 when every rank passed, 1 otherwise, 2 for bad options.
 */
#include "tests/soak/soak.h"

#include "tests/harness.h"

#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void soak_stage(rk_t *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->s->stage, sizeof(r->s->stage), fmt, ap);
    va_end(ap);
}

void soak_fail(rk_t *r, int line, const char *fmt, ...)
{
    va_list ap;
    int k = snprintf(r->s->error, sizeof(r->s->error), "line %d, at %s: ", line, r->s->stage);

    if (k < 0 || (size_t)k >= sizeof(r->s->error)) {
        k = 0;
    }
    va_start(ap, fmt);
    vsnprintf(r->s->error + k, sizeof(r->s->error) - (size_t)k, fmt, ap);
    va_end(ap);
    _exit(1);
}

/* -------------------------------------------------------- sampling /proc */

/* The open descriptors ("fd N: target") and the mappings, one a line, in
 * a malloc'd text (NULL when /proc cannot be read). */
static char *snapshot(void)
{
    char *text = NULL, path[300], target[512], line[1024];
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    FILE *f;

    if (out == NULL) {
        if (d != NULL) {
            closedir(d);
        }
        return NULL;
    }
    while (d != NULL && (e = readdir(d)) != NULL) {
        ssize_t k;

        if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        k = readlink(path, target, sizeof(target) - 1);
        target[k > 0 ? k : 0] = '\0';
        fprintf(out, "fd %s: %s\n", e->d_name, target);
    }
    if (d != NULL) {
        closedir(d);
    }
    f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        fprintf(out, "map %s", line);
    }
    if (f != NULL) {
        fclose(f);
    }
    fclose(out);
    return text;
}

/* The lines of now that are not in then, into buf. */
static void diff_lines(const char *then, const char *now, char *buf, size_t cap)
{
    size_t len = 0;
    int more = 0;

    buf[0] = '\0';
    for (const char *p = now; p != NULL && *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol != NULL ? (size_t)(eol - p) : strlen(p);
        int found = 0;

        for (const char *q = then; q != NULL && *q && !found;) {
            const char *qe = strchr(q, '\n');
            size_t m = qe != NULL ? (size_t)(qe - q) : strlen(q);

            found = m == n && memcmp(p, q, n) == 0;
            q = qe != NULL ? qe + 1 : NULL;
        }
        if (!found) {
            if (len + n + 8 < cap) {
                len += (size_t)snprintf(buf + len, cap - len, "  %.*s\n", (int)n, p);
            } else {
                more++;
            }
        }
        p = eol != NULL ? eol + 1 : NULL;
    }
    if (more > 0 && len + 32 < cap) {
        snprintf(buf + len, cap - len, "  (%d more)\n", more);
    }
}

static sample_t take_sample(rk_t *r)
{
    sample_t s = proc_sample();

    CHECK(r, s.rss_kib > 0 && s.fds > 0 && s.maps > 0, "cannot read /proc/self");
    return s;
}

static char *warm_snapshot; /* what was open and mapped at the baseline */

/* malloc's bytes in use, KiB: in its arenas and in chunks it mmapped */
static long heap_kib(void)
{
    struct mallinfo2 m = mallinfo2();

    return (long)((m.uordblks + m.hblkhd) / 1024);
}

/*
 * Read one byte of every page of the System V shared-memory segments mapped
 * now (UCX's shared-memory transports: their receive pools and the peers'
 * FIFOs, fixed in size and mapped at connection), so that the baseline
 * counts them whole. Without it, their pages enter the resident memory one
 * by one as the pools cycle, over the first minute or so (smaps of a 60 s
 * run: the SYSV mappings +270-500 KiB per rank between 10 and 45 s, level
 * after about 40 s in a 300 s run), which a short run's growth check read
 * as growth. Reading changes nothing in them; a segment mapped later is a
 * new mapping, which the mappings check counts.
 */
static void touch_sysv(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long page = sysconf(_SC_PAGESIZE);
    char line[1024];

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        char perms[8];
        int path = 0;

        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path) != 3 || path == 0 ||
            strncmp(line + path, "/SYSV", 5) != 0 || perms[0] != 'r') {
            continue;
        }
        for (unsigned long a = lo; a < hi; a += (unsigned long)page) {
            (void)*(volatile const char *)a;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

static void note_sample(rk_t *r, int warm_now, int mid_now, int last)
{
    sample_t s;
    /* mallinfo2 walks malloc's arenas: only at the three points the check reads */
    long heap = warm_now || mid_now || last ? heap_kib() : 0;

    if (warm_now) {
        touch_sysv();
        free(warm_snapshot);
        warm_snapshot = snapshot();
    }
    s = take_sample(r);
    if (last && r->s->warmed && (s.fds > r->s->warm.fds || s.maps > r->s->warm.maps)) {
        char *now = snapshot();

        diff_lines(warm_snapshot, now, r->s->grown, sizeof(r->s->grown));
        free(now);
    }
    if (last) {
        free(warm_snapshot);
        warm_snapshot = NULL;
    }
    if (warm_now) {
        r->s->warm = s;
        r->s->max = s;
        r->s->warmed = 1;
        r->s->comm_cycles_warm = r->s->comm_cycles;
        r->s->heap_warm = heap;
    }
    if (mid_now && r->s->warmed && !r->s->halfway) {
        r->s->heap_mid = heap;
        r->s->halfway = 1;
    }
    if (r->s->warmed) {
        r->s->end = s;
        if (last) {
            r->s->heap_end = heap;
        }
        if (s.rss_kib > r->s->max.rss_kib) {
            r->s->max.rss_kib = s.rss_kib;
        }
        if (s.fds > r->s->max.fds) {
            r->s->max.fds = s.fds;
        }
        if (s.maps > r->s->max.maps) {
            r->s->max.maps = s.maps;
        }
    }
}

/* One line of this rank's resident memory now, so that a slope shows over a
 * long run (--every): total, anonymous and shared-memory pages, the change
 * since the warm-up baseline, and malloc's own view (bytes in use against
 * free bytes kept in its arenas: a leak grows the first, fragmentation the
 * second). */
static void print_rss(rk_t *r, double t)
{
    sample_t s = proc_sample();
    char since[64] = "";

    if (r->s->warmed) {
        snprintf(since, sizeof(since), ", %+ld KiB since warm-up", s.rss_kib - r->s->warm.rss_kib);
    }
    struct mallinfo2 m = mallinfo2();

    printf("soak: rank %d: %5.0f s: rss %ld KiB (anon %ld, shmem %ld)%s; malloc: %zu KiB in use, "
           "%zu KiB free in its arenas, %zu KiB mmapped; %" PRIu64 " communicators destroyed\n",
           r->rank, t, s.rss_kib, s.anon_kib, s.shmem_kib, since, m.uordblks / 1024,
           m.fordblks / 1024, m.hblkhd / 1024, r->s->comm_cycles);
    fflush(stdout);
}

static void check_comm(rk_t *r, weft_comm_t comm, const char *name, int want_rank, int want_size)
{
    int me = -1, n = -1;
    int64_t v[4];

    CHECK_OK(r, weft_comm_rank(comm, &me));
    CHECK_OK(r, weft_comm_size(comm, &n));
    CHECK(r, me == want_rank && n == want_size, "%s: rank %d of %d, expected %d of %d", name, me, n,
          want_rank, want_size);
    for (int k = 0; k < 4; k++) {
        v[k] = k + 1;
    }
    CHECK_OK(r, weft_allreduce(WEFT_IN_PLACE, v, 4, WEFT_INT64, WEFT_SUM, comm));
    for (int k = 0; k < 4; k++) {
        CHECK(r, v[k] == (int64_t)n * (k + 1), "%s: allreduce element %d is %" PRId64, name, k,
              v[k]);
    }
}

static void destroy(rk_t *r, weft_comm_t *c)
{
    if (*c != NULL) {
        CHECK_OK(r, weft_comm_destroy(*c));
        *c = NULL;
        r->s->comm_cycles++;
    }
}

/* Abort `work` with an operation pending on it on every rank, check that
 * it fails from then on, destroy it and make a new one. */
static void abort_and_replace(rk_t *r, weft_comm_t *work)
{
    int64_t x[64];
    weft_request_t req;
    weft_status_t st;

    soak_stage(r, "abort of the round's dup");
    for (int k = 0; k < 64; k++) {
        x[k] = r->rank;
    }
    CHECK_OK(r, weft_iallreduce(WEFT_IN_PLACE, x, 64, WEFT_INT64, WEFT_SUM, *work, &req));
    CHECK_OK(r, weft_comm_abort(*work));
    st = weft_wait(req);
    CHECK(r, st == WEFT_OK || st == WEFT_ERR_ABORTED,
          "a pending allreduce on an aborted communicator returned %s: %s", weft_status_string(st),
          weft_last_error());
    if (st == WEFT_OK) {
        for (int k = 0; k < 64; k++) {
            CHECK(r, x[k] == (int64_t)r->n * (r->n - 1) / 2, "allreduce before the abort: %" PRId64,
                  x[k]);
        }
    }
    CHECK_OK(r, weft_request_free(req));
    st = weft_barrier(*work);
    CHECK(r, st == WEFT_ERR_ABORTED, "a barrier on an aborted communicator returned %s",
          weft_status_string(st));
    destroy(r, work);
    r->s->aborts++;
    soak_stage(r, "replacing the aborted dup");
    CHECK_OK(r, weft_comm_dup(r->world, work));
    check_comm(r, *work, "the replacement dup", r->rank, r->n);
}

/* The rank's position in the split by parity, keyed by descending rank. */
static void split_expect(int rank, int n, int *pos, int *size)
{
    *pos = 0;
    *size = 0;
    for (int q = 0; q < n; q++) {
        if (q % 2 == rank % 2) {
            (*size)++;
            *pos += q > rank;
        }
    }
}

/* --leak: memory allocated, touched and never freed */
static void plant_leak(rk_t *r)
{
    if (r->o->leak > 0) {
        void *p = malloc((size_t)r->o->leak);

        CHECK(r, p != NULL, "--leak: malloc failed");
        memset(p, 1, (size_t)r->o->leak);
        __asm__ volatile("" : : "r"(p) : "memory"); /* kept, as far as the compiler knows */
    }
}

static void soak(rk_t *r)
{
    double warm_s = r->o->seconds * 0.4, mid_s = (warm_s + r->o->seconds) / 2,
           next_line = r->o->every;
    int pos, size;

    split_expect(r->rank, r->n, &pos, &size);
    for (uint64_t round = 0;; round++) {
        weft_comm_t work = NULL, half = NULL;
        int32_t flags[3];

        soak_stage(r, "round %" PRIu64 ": dup and split", round);
        CHECK_OK(r, weft_comm_dup(r->world, &work));
        check_comm(r, work, "dup", r->rank, r->n);
        if (r->o->without & W_SPLITS) {
            CHECK_OK(r, weft_comm_dup(r->world, &half)); /* a second dup instead */
            check_comm(r, half, "second dup", r->rank, r->n);
        } else {
            CHECK_OK(r, weft_comm_split(r->world, r->rank % 2, r->n - r->rank, &half));
            check_comm(r, half, "split", pos, size);
        }
        soak_round_ops(r, work, half);
        plant_leak(r);
        if (next(r) % 8 == 0 && !(r->o->without & W_ABORTS)) {
            abort_and_replace(r, &work);
            soak_round_ops(r, work, half);
        }
        soak_stage(r, "round %" PRIu64 ": destroy", round);
        if (next(r) % 2) {
            destroy(r, &work); /* either order */
            destroy(r, &half);
        } else {
            destroy(r, &half);
            destroy(r, &work);
        }
        /* rank 0's clock decides for everyone */
        double t = harness_now_s() - r->start;

        flags[0] = r->rank == 0 && t >= warm_s;
        flags[1] = r->rank == 0 && t >= r->o->seconds;
        flags[2] = r->rank == 0 && t >= mid_s;
        soak_stage(r, "round %" PRIu64 ": vote", round);
        CHECK_OK(r, weft_allreduce(WEFT_IN_PLACE, flags, 3, WEFT_INT32, WEFT_MAX, r->world));
        note_sample(r, flags[0] && !r->s->warmed, flags[2], flags[1]);
        if (r->o->every > 0 && t >= next_line) {
            print_rss(r, t);
            next_line += r->o->every;
        }
        if (flags[1]) {
            CHECK(r, r->s->warmed, "no warm-up sample");
            break;
        }
    }
}

static void churn(rk_t *r)
{
    long n = r->o->churn, warm = n / 5, mid = (warm + n) / 2;

    for (long i = 0; i < n; i++) {
        weft_comm_t c = NULL;
        int64_t v[16];

        if (i == warm) {
            note_sample(r, 1, 0, 0);
        } else if (i == mid) {
            note_sample(r, 0, 1, 0);
        }
        plant_leak(r);
        soak_stage(r, "churn cycle %ld", i);
        CHECK_OK(r, weft_comm_dup(r->world, &c));
        for (int k = 0; k < 16; k++) {
            v[k] = (int64_t)(r->rank + 1) * (k + 1);
        }
        CHECK_OK(r, weft_allreduce(WEFT_IN_PLACE, v, 16, WEFT_INT64, WEFT_SUM, c));
        for (int k = 0; k < 16; k++) {
            CHECK(r, v[k] == (int64_t)r->n * (r->n + 1) / 2 * (k + 1),
                  "churn cycle %ld: "
                  "element %d is %" PRId64,
                  i, k, v[k]);
        }
        destroy(r, &c);
        r->s->ops[F_BLOCK]++;
    }
    CHECK_OK(r, weft_barrier(r->world));
    note_sample(r, 0, 0, 1);
}

static int rank_main(int rank, void *arg)
{
    const opts_t *o = ((void **)arg)[0];
    area_t *a = ((void **)arg)[1];
    rk_t r = {.a = a, .s = &a->slot[rank], .o = o, .rank = rank, .n = o->nranks};
    weft_unique_id_t id;

    r.rng = mix64(o->seed);
    soak_stage(&r, "weft_init");
    CHECK_OK(&r, weft_init());
    if (rank == 0) {
        soak_stage(&r, "weft_get_unique_id");
        CHECK_OK(&r, weft_get_unique_id(&id));
        a->id = id;
        atomic_store(&a->id_ready, 1);
    } else {
        double deadline = harness_now_s() + 120;

        soak_stage(&r, "waiting for the unique id");
        while (!atomic_load(&a->id_ready)) {
            CHECK(&r, harness_now_s() < deadline, "no unique id from rank 0 after 120 s");
            harness_sleep_s(0.001);
        }
        id = a->id;
    }
    soak_stage(&r, "weft_comm_init_rank");
    CHECK_OK(&r, weft_comm_init_rank(o->nranks, &id, rank, &r.world));
    check_comm(&r, r.world, "world", rank, o->nranks);

    r.bytes = ((size_t)o->nranks * (MAXC + 2) + 2 * GUARD) * 8;
    if (r.bytes < ((size_t)BIGC + GUARD) * 8) {
        r.bytes = ((size_t)BIGC + GUARD) * 8;
    }
    for (int i = 0; i < NSLOTS; i++) {
        r.send[i] = malloc(r.bytes);
        r.recv[i] = malloc(r.bytes);
        CHECK(&r, r.send[i] != NULL && r.recv[i] != NULL, "cannot allocate %zu bytes", r.bytes);
        memset(r.send[i], 0, r.bytes);
        memset(r.recv[i], 0, r.bytes);
    }
    soak_stage(&r, "emu stream and memory");
    CHECK_OK(&r, weft_stream_create(WEFT_MEM_EMU, &r.stream));
    CHECK_OK(&r, weft_mem_alloc(WEFT_MEM_EMU, r.bytes, &r.dsend));
    CHECK_OK(&r, weft_mem_alloc(WEFT_MEM_EMU, r.bytes, &r.drecv));
    /* touch every page now, so that the first large operation after the
     * warm-up does not add them to the resident memory */
    CHECK_OK(&r, weft_memcpy_async(r.dsend, r.send[0], r.bytes, r.stream));
    CHECK_OK(&r, weft_memcpy_async(r.drecv, r.recv[0], r.bytes, r.stream));
    CHECK_OK(&r, weft_stream_synchronize(r.stream));
    if (!(o->without & W_EMU)) {
        /* weft keeps the table entries of the last 4096 freed emu
         * allocations (docs/device.md), its own scratch's included: fill
         * that bounded table now, so that the baseline finds it full and
         * the heap checks see what keeps growing, not a cache filling up */
        soak_stage(&r, "filling the emu table of freed allocations");
        for (int i = 0; i < SOAK_EMU_FILL; i++) {
            void *p;

            CHECK_OK(&r, weft_mem_alloc(WEFT_MEM_EMU, 4096, &p));
            CHECK_OK(&r, weft_mem_free(p));
        }
    }

    CHECK_OK(&r, weft_barrier(r.world));
    r.start = harness_now_s();
    if (o->churn > 0) {
        churn(&r);
    } else {
        soak(&r);
    }

    soak_stage(&r, "teardown");
    CHECK_OK(&r, weft_mem_free(r.dsend));
    CHECK_OK(&r, weft_mem_free(r.drecv));
    CHECK_OK(&r, weft_stream_destroy(r.stream));
    for (int i = 0; i < NSLOTS; i++) {
        free(r.send[i]);
        free(r.recv[i]);
    }
    CHECK_OK(&r, weft_barrier(r.world));
    CHECK_OK(&r, weft_comm_destroy(r.world));
    CHECK_OK(&r, weft_finalize());
    soak_stage(&r, "done");
    r.s->finished = 1;
    fflush(NULL);
    exit(0); /* exit, not _exit: a leak checker runs at exit */
}

/* ------------------------------------------------------------ the parent */

/* Print rank q's figures; 0 when it passed. */
static int report(const opts_t *o, const slot_t *s, int q, const harness_procs_t *p)
{
    const char *mode = o->churn > 0 ? "churn" : "soak";
    int bad = 0;

    if (!harness_exited_ok(p, q)) {
        int ws = p->wstatus[q];

        if (p->state[q] == HARNESS_KILLED) {
            printf("%s: rank %d: FAIL: killed, it was in: %s\n", mode, q, s->stage);
        } else if (WIFSIGNALED(ws)) {
            printf("%s: rank %d: FAIL: died of signal %d in: %s\n", mode, q, WTERMSIG(ws),
                   s->stage);
        } else {
            printf("%s: rank %d: FAIL: exit %d: %s\n", mode, q, WEXITSTATUS(ws),
                   s->error[0] ? s->error : s->stage);
        }
        bad = 1;
    }
    if (!s->warmed) {
        return 1;
    }
    long drss = s->end.rss_kib - s->warm.rss_kib;
    uint64_t cycles = s->comm_cycles - s->comm_cycles_warm;
    double per1000 = cycles > 0 ? (double)drss * 1000.0 / (double)cycles : 0;

    if (o->churn > 0) {
        printf("churn: rank %d: %" PRIu64 " dup+allreduce+destroy cycles, %" PRIu64
               " after warm-up\n",
               q, s->comm_cycles, cycles);
    } else {
        printf("soak: rank %d: %" PRIu64 " collectives (%" PRIu64 " blocking, %" PRIu64
               " nonblocking, %" PRIu64 " enqueued on emu), %" PRIu64 " p2p rings, %" PRIu64
               " elements checked; %" PRIu64 " communicators destroyed (%" PRIu64
               " after warm-up), %" PRIu64 " aborted and replaced\n",
               q, s->ops[0] + s->ops[1] + s->ops[2], s->ops[0], s->ops[1], s->ops[2], s->p2p,
               s->elements, s->comm_cycles, cycles, s->aborts);
    }
    printf("%s: rank %d: rss %ld KiB after warm-up, %ld KiB at the end (%+ld KiB, max %ld KiB; "
           "anon %+ld, shmem %+ld): %.1f KiB per 1000 comm cycles; fds %d -> %d; maps %d -> %d\n",
           mode, q, s->warm.rss_kib, s->end.rss_kib, drss, s->max.rss_kib,
           s->end.anon_kib - s->warm.anon_kib, s->end.shmem_kib - s->warm.shmem_kib, per1000,
           s->warm.fds, s->end.fds, s->warm.maps, s->end.maps);
    long first = s->heap_mid - s->heap_warm, second = s->heap_end - s->heap_mid;

    if (s->halfway) {
        printf("%s: rank %d: malloc in use %ld KiB after warm-up, %ld KiB halfway, %ld KiB at the "
               "end: %+ld KiB in the first half, %+ld KiB in the second\n",
               mode, q, s->heap_warm, s->heap_mid, s->heap_end, first, second);
    }
    if (!o->limits) {
        return bad;
    }
    if (!s->halfway) {
        printf("%s: rank %d: FAIL: no sample halfway through the run\n", mode, q);
        bad = 1;
    } else if (second > HEAP_HALF_LIMIT_KIB && 2 * second > first) {
        printf("%s: rank %d: FAIL: malloc's bytes in use grew by %ld KiB in the second half of the "
               "run (limit %d KiB, and half the first half's %+ld KiB): a steady leak\n",
               mode, q, second, HEAP_HALF_LIMIT_KIB, first);
        bad = 1;
    }
    if (drss > RSS_LIMIT_KIB) {
        printf("%s: rank %d: FAIL: resident memory grew by %ld KiB after warm-up (limit %d KiB)\n",
               mode, q, drss, RSS_LIMIT_KIB);
        bad = 1;
    }
    if (s->end.fds > s->warm.fds) {
        printf("%s: rank %d: FAIL: %d more open file descriptors than after warm-up\n", mode, q,
               s->end.fds - s->warm.fds);
        bad = 1;
    }
    if (s->end.maps > s->warm.maps) {
        printf("%s: rank %d: FAIL: %d more mappings than after warm-up\n", mode, q,
               s->end.maps - s->warm.maps);
        bad = 1;
    }
    if (s->grown[0]) {
        printf("%s: rank %d: opened or mapped after warm-up and still there:\n%s", mode, q,
               s->grown);
    }
    return bad;
}

/* --without's comma-separated names into W_* bits; -1 for an unknown one. */
static int parse_without(const char *text, unsigned *bits_p)
{
    static const struct {
        const char *name;
        unsigned bit;
    } parts[] = {{"aborts", W_ABORTS},
                 {"splits", W_SPLITS},
                 {"emu", W_EMU},
                 {"nonblocking", W_NONBLOCKING},
                 {"p2p", W_P2P}};
    char copy[256], *save = NULL;
    unsigned bits = 0;

    snprintf(copy, sizeof(copy), "%s", text);
    for (char *w = strtok_r(copy, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        size_t i;

        for (i = 0; i < sizeof(parts) / sizeof(parts[0]) && strcmp(w, parts[i].name) != 0; i++) {
        }
        if (i == sizeof(parts) / sizeof(parts[0])) {
            fprintf(stderr, "soak: --without: unknown part '%s'\n", w);
            return -1;
        }
        bits |= parts[i].bit;
    }
    *bits_p = bits;
    return 0;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--seconds S] [--ranks N] [--seed X] [--rpn K] [--churn C] [--no-limits]\n"
            "          [--without aborts,splits,emu,nonblocking,p2p] [--every S] [--leak B]\n"
            "  --seconds S   length of the mixed soak (default 60, or $SOAK_SECONDS)\n"
            "  --ranks N     processes, 1..%d (default 4)\n"
            "  --seed X      the operations' random sequence (default 1)\n"
            "  --rpn K       ranks per virtual node, 0 for the real node (default 2)\n"
            "  --churn C     instead: C cycles of dup + allreduce + destroy\n"
            "  --no-limits   report the growth, do not fail on it (under a leak checker,\n"
            "                whose own memory grows)\n"
            "  --without L   leave parts of the mix out (to find what grows): aborts,\n"
            "                splits (a second dup instead), emu (enqueued and emu-memory\n"
            "                operations), nonblocking, p2p; each becomes a blocking op\n"
            "  --every S     each rank prints its resident memory every S seconds\n"
            "                (default 60; 0: never)\n"
            "  --leak B      allocate and keep B bytes per round (or churn cycle) on\n"
            "                every rank: the growth checks must then fail\n",
            prog, MAX_RANKS);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"seconds", required_argument, NULL, 's'},
                                             {"ranks", required_argument, NULL, 'n'},
                                             {"seed", required_argument, NULL, 'x'},
                                             {"rpn", required_argument, NULL, 'k'},
                                             {"churn", required_argument, NULL, 'c'},
                                             {"no-limits", no_argument, NULL, 'L'},
                                             {"without", required_argument, NULL, 'w'},
                                             {"every", required_argument, NULL, 'e'},
                                             {"leak", required_argument, NULL, 'l'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    opts_t o = {.seconds = 60, .nranks = 4, .seed = 1, .rpn = 2, .limits = 1, .every = 60};
    const char *without_text = ""; /* --without's argument, for the first line */
    const char *env = getenv("SOAK_SECONDS");
    int c;

    if (env != NULL && *env) {
        o.seconds = atof(env);
    }
    while ((c = getopt_long(argc, argv, "s:n:x:k:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o.seconds = atof(optarg);
            break;
        case 'n':
            o.nranks = atoi(optarg);
            break;
        case 'x':
            o.seed = strtoull(optarg, NULL, 0);
            break;
        case 'k':
            o.rpn = atoi(optarg);
            break;
        case 'c':
            o.churn = atol(optarg);
            break;
        case 'L':
            o.limits = 0;
            break;
        case 'e':
            o.every = atof(optarg);
            break;
        case 'l':
            o.leak = atol(optarg);
            break;
        case 'w':
            without_text = optarg;
            if (parse_without(optarg, &o.without) != 0) {
                usage(argv[0]);
                return 2;
            }
            break;
        default:
            usage(argv[0]);
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind < argc || o.seconds <= 0 || o.every < 0 || o.leak < 0 || o.nranks < 1 ||
        o.nranks > MAX_RANKS || o.rpn < 0 || o.churn < 0 || (o.churn > 0 && o.churn < 5)) {
        usage(argv[0]);
        return 2;
    }

    char text[16];

    if (o.rpn > 0) {
        snprintf(text, sizeof(text), "%d", o.rpn);
        setenv("WEFT_RANKS_PER_NODE", text, 1);
    }
    setenv("WEFT_TIMEOUT", getenv("WEFT_TIMEOUT") ? getenv("WEFT_TIMEOUT") : "60", 1);
    unsetenv("WEFT_UNIQUE_ID");
    unsetenv("PMIX_NAMESPACE");

    area_t *a = harness_shared(sizeof(area_t));
    harness_procs_t procs;
    void *arg[2] = {&o, a};
    double limit = (o.churn > 0 ? 0 : o.seconds) + 120 + (o.churn > 0 ? (double)o.churn * 0.05 : 0);

    if (a == NULL) {
        perror("soak: mmap");
        return 1;
    }
    if (o.churn > 0) {
        printf("churn: %d ranks (%d per node), %ld cycles, warm-up %ld\n", o.nranks, o.rpn, o.churn,
               o.churn / 5);
    } else {
        printf("soak: %d ranks (%d per node), seed %" PRIu64 ", %.0f s, warm-up %.0f s%s%s\n",
               o.nranks, o.rpn, o.seed, o.seconds, o.seconds * 0.2,
               o.without ? ", without parts of the mix: " : "", o.without ? without_text : "");
    }
    if (o.leak > 0) {
        printf("%s: a planted leak of %ld bytes per %s on every rank (--leak)\n",
               o.churn > 0 ? "churn" : "soak", o.leak, o.churn > 0 ? "cycle" : "round");
    }
    double t0 = harness_now_s(), deadline = t0 + limit;

    if (harness_fork(&procs, 0, o.nranks, rank_main, arg) != 0) {
        perror("soak: fork");
        return 1;
    }
    /* a failed rank leaves its peers waiting: end the job at once */
    while (harness_poll(&procs) > 0 && harness_now_s() < deadline) {
        int failed = 0;

        for (int q = 0; q < o.nranks; q++) {
            failed |= procs.state[q] == HARNESS_EXITED && !harness_exited_ok(&procs, q);
        }
        if (failed) {
            harness_sleep_s(1.0); /* the others may report their own failure first */
            break;
        }
        harness_sleep_s(0.05);
    }
    if (harness_reap(&procs, harness_now_s()) > 0 && harness_now_s() >= deadline) {
        printf("%s: deadline of %.0f s passed: killed the ranks left\n",
               o.churn > 0 ? "churn" : "soak", limit);
    }
    int bad = 0;

    for (int q = 0; q < o.nranks; q++) {
        bad += report(&o, &a->slot[q], q, &procs);
    }
    printf("%s: %s in %.1f s (%d of %d ranks failed)\n", o.churn > 0 ? "churn" : "soak",
           bad ? "FAIL" : "PASS", harness_now_s() - t0, bad, o.nranks);
    return bad ? 1 : 0;
}
