/*
 * weft between real processes, bootstrapped with a unique id (no mpirun).
 *
 * The test process is rank 0: it calls weft_init, forks children for
 * ranks 1..n-1, then calls weft_get_unique_id (which starts the bootstrap
 * root in it), hands the id to the children through the shared mapping and
 * joins with weft_comm_init_rank. No communicator exists before fork, so no
 * UCX state is inherited; the children inherit weft's configuration
 * (WEFT_TIMEOUT, UCX_TLS, ... are set before weft_init). The forks come
 * before the root's thread exists: UCX installs its memory hooks when libucs
 * loads, and they hold a lock around every mmap and munmap; a child forked
 * while another thread of the parent held it would hang in ucp_init.
 *
 * Children never use Criterion. They record where they are and what went
 * wrong in an anonymous shared mapping made before fork, and exit: 0 when
 * every check passed. They die with the parent (PR_SET_PDEATHSIG). The
 * parent records its own failures in the same mapping (a failed check of
 * rank 0 longjmps back to the harness), reaps every child before a
 * deadline, SIGKILLs what is left (a watchdog thread does so too, in case
 * rank 0 itself is stuck in a call) and only then asserts, so nothing
 * survives a test (forking, reaping and killing: tests/harness.h).
 * Latencies are measured with CLOCK_MONOTONIC, which is shared by every
 * process of the machine.
 *
 * Every Criterion test runs in its own process, so each has a fresh weft.
 * WEFT_LOG_LEVEL is left as the caller set it (WEFT_LOG_LEVEL=debug shows
 * the bootstrap and transport at work).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <weft.h>

#include "tests/harness.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4
#define MSG_BYTES 1024
#define NVALS 8
#define GUARD 8 /* elements of canary after every buffer */

/* ------------------------------------------------------------ shared state */

typedef struct rank_slot {
    char stage[128];       /* what the rank is doing (for hangs and crashes) */
    char error[MSG_BYTES]; /* first failed check */
    char note[MSG_BYTES];  /* scenario-specific text, e.g. an error message */
    int finished;          /* reached the end of its body */
    double val[NVALS];     /* scenario measurements */
    int st[NVALS];         /* scenario statuses */
} rank_slot_t;

typedef struct shared {
    atomic_int failed;   /* some rank recorded an error */
    double kill_time;    /* CLOCK_MONOTONIC seconds when a rank killed itself */
    pid_t holder;        /* a process that outlives the killed rank, or 0 (section 7) */
    atomic_int settled;  /* survivors whose call saw the failure (section 7) */
    atomic_int id_ready; /* rank 0 wrote the job's unique id below */
    weft_unique_id_t id;
    char id_text[WEFT_UNIQUE_ID_STRLEN + 1];
    rank_slot_t slot[MAX_RANKS];
} shared_t;

typedef struct rank_ctx rank_ctx_t;
typedef void (*rank_fn)(rank_ctx_t *r);

typedef struct job_opts {
    int nranks;
    const char *timeout; /* WEFT_TIMEOUT */
    const char *ucx_tls; /* UCX_TLS, or NULL for UCX's default */
    const char *tune;    /* WEFT_TUNE, or NULL for none */
    const char *rpn;     /* WEFT_RANKS_PER_NODE, or NULL for real nodes */
    int env_world;       /* children join through the environment and weft_comm_world */
    rank_fn scenario;    /* run by every rank on its communicator */
    rank_fn body;        /* instead of join + scenario + destroy (children still finalize) */
    int expect_killed;   /* rank that must end by SIGKILL, or -1 (0 is never) */
    double limit_s;      /* the whole job, as seen by the parent */
} job_opts_t;

struct rank_ctx {
    shared_t *sh;
    const job_opts_t *o;
    int rank;
    int nranks;
    int is_parent;
    jmp_buf *jb; /* rank 0 only */
    weft_unique_id_t id;
    char id_text[WEFT_UNIQUE_ID_STRLEN + 1];
    weft_comm_t comm;
};

static void stage(rank_ctx_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void stage(rank_ctx_t *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->sh->slot[r->rank].stage, sizeof(r->sh->slot[0].stage), fmt, ap);
    va_end(ap);
}

static void note(rank_ctx_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(rank_ctx_t *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->sh->slot[r->rank].note, sizeof(r->sh->slot[0].note), fmt, ap);
    va_end(ap);
}

static void rank_fail(rank_ctx_t *r, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Record the failure; a child exits, rank 0 jumps back to the harness. */
static void rank_fail(rank_ctx_t *r, int line, const char *fmt, ...)
{
    char *msg = r->sh->slot[r->rank].error;
    size_t cap = sizeof(r->sh->slot[0].error);
    va_list ap;
    int n = snprintf(msg, cap, "line %d: ", line);

    va_start(ap, fmt);
    vsnprintf(msg + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
    atomic_store(&r->sh->failed, 1);
    if (r->is_parent) {
        longjmp(*r->jb, 1);
    }
    _exit(1);
}

#define CHECK(r, cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            rank_fail((r), __LINE__, __VA_ARGS__);                                                 \
        }                                                                                          \
    } while (0)

/* A weft call that must succeed. */
#define CHECK_OK(r, call)                                                                          \
    do {                                                                                           \
        weft_status_t st_ = (call);                                                                \
        CHECK((r), st_ == WEFT_OK, "%s returned %s: %s", #call, weft_status_string(st_),           \
              weft_last_error());                                                                  \
    } while (0)

static void *xmalloc(rank_ctx_t *r, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);

    CHECK(r, p != NULL, "cannot allocate %zu bytes", bytes);
    return p;
}

/* ---------------------------------------------------------- environment */

static void set_env(const char *name, const char *value)
{
    cr_assert_eq(harness_set_env(name, value), 0, "setenv %s", name);
}

/* Everything a caller's shell might have set that changes what is tested;
 * WEFT_LOG_LEVEL stays. */
static void prepare_env(const char *timeout, const char *ucx_tls, const char *tune, const char *rpn)
{
    static const char *const vars[] = {
        "WEFT_CONFIG_FILE",    "WEFT_TUNE",      "WEFT_UNIQUE_ID",
        "WEFT_RANK",           "WEFT_NRANKS",    "WEFT_SHM",
        "WEFT_SHM_SLOT",       "WEFT_SHM_SMALL", "WEFT_RANKS_PER_NODE",
        "WEFT_BOOTSTRAP_ADDR", "PMIX_NAMESPACE", "PMIX_RANK"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
    set_env("WEFT_TIMEOUT", timeout);
    set_env("UCX_TLS", ucx_tls);
    set_env("WEFT_TUNE", tune);
    set_env("WEFT_RANKS_PER_NODE", rpn);
}

/* ------------------------------------------------------------------ job */

typedef struct job {
    const job_opts_t *o;
    shared_t *sh;
    harness_procs_t procs; /* ranks 1..n-1 */
    weft_unique_id_t id;
    char id_text[WEFT_UNIQUE_ID_STRLEN + 1];
    double start;

    pthread_t watchdog;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    atomic_int fired;
    weft_comm_t comm0; /* rank 0's communicator while it exists (under lock) */
} job_t;

/* The running job (one per test process): the watchdog aborts rank 0's
 * communicator through it. */
static job_t *current_job;

static void publish_comm0(weft_comm_t comm)
{
    if (current_job != NULL) {
        pthread_mutex_lock(&current_job->lock);
        current_job->comm0 = comm;
        pthread_mutex_unlock(&current_job->lock);
    }
}

static void join_comm(rank_ctx_t *r)
{
    int rank = -1, size = -1;

    if (r->o->env_world && !r->is_parent) {
        char text[16];

        /* configuration is read by the first weft_init only: drop the count
         * inherited from the parent to 0, so that weft_init reads the
         * environment of this rank */
        stage(r, "weft_finalize of the inherited init");
        CHECK_OK(r, weft_finalize());
        CHECK(r, setenv("WEFT_UNIQUE_ID", r->id_text, 1) == 0, "setenv");
        snprintf(text, sizeof(text), "%d", r->rank);
        CHECK(r, setenv("WEFT_RANK", text, 1) == 0, "setenv");
        snprintf(text, sizeof(text), "%d", r->nranks);
        CHECK(r, setenv("WEFT_NRANKS", text, 1) == 0, "setenv");
        stage(r, "weft_init with WEFT_UNIQUE_ID");
        CHECK_OK(r, weft_init());
        stage(r, "weft_comm_world");
        CHECK_OK(r, weft_comm_world(&r->comm));
    } else {
        stage(r, "weft_comm_init_rank");
        CHECK_OK(r, weft_comm_init_rank(r->nranks, &r->id, r->rank, &r->comm));
    }
    if (r->is_parent) {
        publish_comm0(r->comm);
    }
    CHECK_OK(r, weft_comm_rank(r->comm, &rank));
    CHECK_OK(r, weft_comm_size(r->comm, &size));
    CHECK(r, rank == r->rank && size == r->nranks,
          "communicator says rank %d of %d, expected %d of %d", rank, size, r->rank, r->nranks);
    stage(r, "joined");
}

static void default_body(rank_ctx_t *r)
{
    join_comm(r);
    if (r->o->scenario != NULL) {
        r->o->scenario(r);
    }
    stage(r, "weft_comm_destroy");
    if (r->is_parent) {
        publish_comm0(NULL);
    }
    CHECK_OK(r, weft_comm_destroy(r->comm));
    r->comm = NULL;
}

static int child_main(int rank, void *arg)
{
    job_t *job = arg;
    rank_ctx_t r = {.sh = job->sh, .o = job->o, .rank = rank, .nranks = job->o->nranks};

    stage(&r, "waiting for the unique id from rank 0");
    while (!atomic_load(&job->sh->id_ready)) {
        harness_sleep_s(0.001);
    }
    r.id = job->sh->id;
    memcpy(r.id_text, job->sh->id_text, sizeof(r.id_text));
    (job->o->body != NULL ? job->o->body : default_body)(&r);
    stage(&r, "weft_finalize");
    CHECK_OK(&r, weft_finalize());
    stage(&r, "done");
    job->sh->slot[rank].finished = 1;
    return 0;
}

/* When the job's time is up: say where every rank is, kill the children and
 * abort rank 0's communicator, so that a call stuck in rank 0 returns. */
static void *watchdog_main(void *arg)
{
    job_t *job = arg;
    double deadline = job->start + job->o->limit_s;
    struct timespec ts = {.tv_sec = (time_t)deadline,
                          .tv_nsec = (long)((deadline - (double)(time_t)deadline) * 1e9)};

    pthread_mutex_lock(&job->lock);
    while (!job->stop) {
        if (pthread_cond_timedwait(&job->cond, &job->lock, &ts) == ETIMEDOUT) {
            if (!job->stop) {
                atomic_store(&job->fired, 1);
                for (int r = 0; r < job->o->nranks; r++) {
                    fprintf(stderr, "test_multiproc: watchdog after %.1f s: rank %d is in: %s\n",
                            job->o->limit_s, r, job->sh->slot[r].stage);
                }
                harness_kill(&job->procs);
                if (job->comm0 != NULL) {
                    weft_comm_abort(job->comm0);
                }
            }
            break;
        }
    }
    pthread_mutex_unlock(&job->lock);
    return NULL;
}

static void job_start(job_t *job, const job_opts_t *o)
{
    pthread_condattr_t attr;

    memset(job, 0, sizeof(*job));
    job->o = o;
    cr_assert(o->nranks >= 1 && o->nranks <= MAX_RANKS);
    prepare_env(o->timeout, o->ucx_tls, o->tune, o->rpn);
    cr_assert_eq(weft_init(), WEFT_OK, "weft_init: %s", weft_last_error());
    job->sh = harness_shared(sizeof(shared_t));
    cr_assert_not_null(job->sh, "mmap: %s", strerror(errno));
    job->start = harness_now_s();
    cr_assert_eq(harness_fork(&job->procs, 1, o->nranks, child_main, job), 0, "fork: %s",
                 strerror(errno));
    /* the root's thread starts here, after every fork */
    if (weft_get_unique_id(&job->id) != WEFT_OK ||
        weft_unique_id_to_string(&job->id, job->id_text, sizeof(job->id_text)) != WEFT_OK) {
        char why[MSG_BYTES];

        snprintf(why, sizeof(why), "%s", weft_last_error());
        harness_reap(&job->procs, 0);
        cr_assert_fail("weft_get_unique_id: %s", why);
    }
    job->sh->id = job->id;
    memcpy(job->sh->id_text, job->id_text, sizeof(job->id_text));
    atomic_store(&job->sh->id_ready, 1);
    current_job = job;
    pthread_mutex_init(&job->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&job->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&job->watchdog, NULL, watchdog_main, job) != 0) {
        harness_reap(&job->procs, 0);
        cr_assert_fail("cannot start the watchdog thread");
    }
}

/*
 * Reap the children (every one, whatever happened), stop the watchdog and
 * assert that every rank passed. parent_failed: rank 0 gave up, so the
 * others get only a short grace before they are killed.
 */
static void job_finish(job_t *job, int parent_failed)
{
    const job_opts_t *o = job->o;
    double deadline = parent_failed ? harness_now_s() + 1.0 : job->start + o->limit_s;
    static char msg[8192];
    size_t len = 0;
    int ok = !parent_failed;

    harness_reap(&job->procs, deadline);
    pthread_mutex_lock(&job->lock);
    job->stop = 1;
    pthread_cond_signal(&job->cond);
    pthread_mutex_unlock(&job->lock);
    pthread_join(job->watchdog, NULL);
    current_job = NULL;
    pthread_mutex_destroy(&job->lock);
    pthread_cond_destroy(&job->cond);

    msg[0] = '\0';
    if (parent_failed) {
        len = harness_append(msg, sizeof(msg), len, "rank 0 failed (in %s): %s\n",
                             job->sh->slot[0].stage, job->sh->slot[0].error);
    }
    for (int r = 1; r < o->nranks; r++) {
        const rank_slot_t *s = &job->sh->slot[r];
        int w = job->procs.wstatus[r];

        if (r == o->expect_killed) {
            if (job->procs.state[r] != HARNESS_EXITED || !WIFSIGNALED(w) ||
                WTERMSIG(w) != SIGKILL) {
                ok = 0;
                len = harness_append(msg, sizeof(msg), len,
                                     "rank %d should have killed itself; %s (stage: %s) %s\n", r,
                                     job->procs.state[r] == HARNESS_KILLED
                                         ? "it was still running at the deadline"
                                         : "it ended otherwise",
                                     s->stage, s->error);
            }
            continue;
        }
        if (job->procs.state[r] == HARNESS_KILLED) {
            ok = 0;
            len = harness_append(msg, sizeof(msg), len,
                                 "rank %d was still running %s and was killed; stuck in: %s %s\n",
                                 r, parent_failed ? "after rank 0 failed" : "at the deadline",
                                 s->stage, s->error);
        } else if (WIFSIGNALED(w)) {
            ok = 0;
            len = harness_append(msg, sizeof(msg), len, "rank %d died of signal %d in: %s %s\n", r,
                                 WTERMSIG(w), s->stage, s->error);
        } else if (WEXITSTATUS(w) != 0 || !s->finished) {
            ok = 0;
            len = harness_append(msg, sizeof(msg), len, "rank %d exited with %d in: %s: %s\n", r,
                                 WEXITSTATUS(w), s->stage, s->error[0] ? s->error : "(no message)");
        }
    }
    if (atomic_load(&job->fired)) {
        ok = 0;
        len = harness_append(msg, sizeof(msg), len,
                             "the watchdog killed the children after %.1f s\n", o->limit_s);
    }
    if (!ok) {
        fprintf(stderr, "test_multiproc: job of %d ranks failed:\n%s", o->nranks, msg);
    }
    cr_assert(ok, "job of %d ranks (UCX_TLS=%s) failed:\n%s", o->nranks,
              o->ucx_tls ? o->ucx_tls : "default", msg);
}

/* Run the job; the shared mapping stays for the caller to read (unmapped at exit). */
static shared_t *run_job(const job_opts_t *o)
{
    static job_t job;
    static jmp_buf jb;
    static rank_ctx_t r;
    int failed;

    job_start(&job, o);
    memset(&r, 0, sizeof(r));
    r.sh = job.sh;
    r.o = o;
    r.rank = 0;
    r.nranks = o->nranks;
    r.is_parent = 1;
    r.jb = &jb;
    r.id = job.id;
    memcpy(r.id_text, job.id_text, sizeof(r.id_text));
    failed = setjmp(jb);
    if (!failed) {
        (o->body != NULL ? o->body : default_body)(&r);
        stage(&r, "done");
        job.sh->slot[0].finished = 1;
    }
    job_finish(&job, failed);
    cr_assert_eq(weft_finalize(), WEFT_OK, "weft_finalize: %s", weft_last_error());
    return job.sh;
}

/* ------------------------------------------------------------------ data */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/*
 * Element j of rank q's input of call `seed`. Floats are small integers, so
 * every sum is exact in any order; int64s use the whole range.
 */
static int64_t gen(weft_dtype_t dt, uint64_t seed, int q, size_t j)
{
    uint64_t h = mix64(seed * 0x100000001b3ull ^ ((uint64_t)q << 56) ^ (uint64_t)j);

    if (dt == WEFT_FLOAT32) {
        return (int64_t)(h % 2001) - 1000;
    }
    return (int64_t)h;
}

static int64_t reduce2(weft_op_t op, int64_t a, int64_t b)
{
    return op == WEFT_SUM ? a + b : (a > b ? a : b);
}

/* Reduction over all n ranks of element j. */
static int64_t reduced(weft_dtype_t dt, weft_op_t op, uint64_t seed, int n, size_t j)
{
    int64_t v = gen(dt, seed, 0, j);

    for (int q = 1; q < n; q++) {
        v = reduce2(op, v, gen(dt, seed, q, j));
    }
    return v;
}

static void elem_set(weft_dtype_t dt, void *buf, size_t i, int64_t v)
{
    if (dt == WEFT_FLOAT32) {
        ((float *)buf)[i] = (float)v;
    } else {
        ((int64_t *)buf)[i] = v;
    }
}

/* 1 when element i equals v exactly; else its text in got. */
static int elem_eq(weft_dtype_t dt, const void *buf, size_t i, int64_t v, char *got, size_t cap)
{
    if (dt == WEFT_FLOAT32) {
        float f = ((const float *)buf)[i];

        snprintf(got, cap, "%.9g", (double)f);
        return f == (float)v;
    }
    snprintf(got, cap, "%lld", (long long)((const int64_t *)buf)[i]);
    return ((const int64_t *)buf)[i] == v;
}

typedef enum { ALLREDUCE, REDUCE_SCATTER, ALLGATHER } coll_t;
typedef enum { OUT_OF_PLACE, IN_PLACE, ALIASED } variant_t;

static const char *const coll_names[] = {"allreduce", "reduce_scatter", "allgather"};
static const char *const variant_names[] = {
    "out of place", "in place (WEFT_IN_PLACE)",
    "in place (sendbuf == recvbuf, or the NCCL offset convention)"};

static const unsigned char CANARY = 0xa5, JUNK = 0x5a;

static int bytes_are(const unsigned char *p, size_t n, unsigned char b)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != b) {
            return 0;
        }
    }
    return 1;
}

/* One collective call, checked on this rank: result, guards, untouched input. */
static void coll_case(rank_ctx_t *r, coll_t coll, weft_dtype_t dt, weft_op_t op, size_t count,
                      variant_t v, uint64_t seed)
{
    const int n = r->nranks, me = r->rank;
    const size_t es = weft_dtype_size(dt);
    const size_t nc = (size_t)n * count;
    size_t in_elems = coll == REDUCE_SCATTER ? nc : count; /* this rank's input */
    size_t out_elems = coll == ALLGATHER ? nc : count;     /* this rank's result */
    size_t sbuf_elems = 0, rbuf_elems;
    unsigned char *sbuf = NULL, *rbuf, *res;
    const void *sendarg;
    void *recvarg;
    size_t in_off = 0; /* where this rank's input lies in rbuf (in place) */
    char what[256], got[64];
    weft_status_t st;

    snprintf(what, sizeof(what), "%s %s%s%s count %zu, %s, seed %llu", coll_names[coll],
             weft_dtype_name(dt), coll == ALLGATHER ? "" : " ",
             coll == ALLGATHER ? "" : weft_op_name(op), count, variant_names[v],
             (unsigned long long)seed);
    stage(r, "%s", what);

    /* layout */
    if (v == OUT_OF_PLACE) {
        sbuf_elems = in_elems;
        rbuf_elems = out_elems;
    } else if (coll == ALLGATHER) {
        rbuf_elems = nc;
        in_off = (size_t)me * count;
    } else {
        rbuf_elems = in_elems; /* the input is in recvbuf (or sendbuf aliases it) */
    }
    rbuf = xmalloc(r, (rbuf_elems + GUARD) * es);
    memset(rbuf, JUNK, rbuf_elems * es);
    memset(rbuf + rbuf_elems * es, CANARY, GUARD * es);
    if (v == OUT_OF_PLACE) {
        sbuf = xmalloc(r, (sbuf_elems + GUARD) * es);
        for (size_t j = 0; j < in_elems; j++) {
            elem_set(dt, sbuf, j, gen(dt, seed, me, j));
        }
        memset(sbuf + sbuf_elems * es, CANARY, GUARD * es);
        sendarg = sbuf;
        recvarg = rbuf;
        res = rbuf;
    } else {
        for (size_t j = 0; j < in_elems; j++) {
            elem_set(dt, rbuf + in_off * es, j, gen(dt, seed, me, j));
        }
        if (v == IN_PLACE) {
            sendarg = WEFT_IN_PLACE;
            recvarg = rbuf;
            res = rbuf;
        } else if (coll == ALLREDUCE) {
            sendarg = rbuf;
            recvarg = rbuf;
            res = rbuf;
        } else if (coll == REDUCE_SCATTER) {
            /* NCCL: recvbuf == sendbuf + rank * recvcount */
            sendarg = rbuf;
            recvarg = rbuf + (size_t)me * count * es;
            res = recvarg;
        } else {
            /* NCCL: sendbuf == recvbuf + rank * sendcount */
            sendarg = rbuf + (size_t)me * count * es;
            recvarg = rbuf;
            res = rbuf;
        }
    }

    switch (coll) {
    case ALLREDUCE:
        st = weft_allreduce(sendarg, recvarg, count, dt, op, r->comm);
        break;
    case REDUCE_SCATTER:
        st = weft_reduce_scatter(sendarg, recvarg, count, dt, op, r->comm);
        break;
    default:
        st = weft_allgather(sendarg, recvarg, count, dt, r->comm);
        break;
    }
    CHECK(r, st == WEFT_OK, "%s returned %s: %s", what, weft_status_string(st), weft_last_error());

    /* the result */
    for (size_t i = 0; i < out_elems; i++) {
        int64_t want;

        if (coll == ALLREDUCE) {
            want = reduced(dt, op, seed, n, i);
        } else if (coll == REDUCE_SCATTER) {
            want = reduced(dt, op, seed, n, (size_t)me * count + i);
        } else {
            want = gen(dt, seed, (int)(i / (count ? count : 1)), i % (count ? count : 1));
        }
        if (!elem_eq(dt, res, i, want, got, sizeof(got))) {
            CHECK(r, 0, "%s on rank %d of %d: element %zu is %s, expected %lld", what, me, n, i,
                  got, (long long)want);
        }
    }
    /* nothing written past the buffers, nothing written to the input */
    CHECK(r, bytes_are(rbuf + rbuf_elems * es, GUARD * es, CANARY),
          "%s: recvbuf written past its %zu elements", what, rbuf_elems);
    if (count == 0) {
        CHECK(r, bytes_are(rbuf, rbuf_elems * es, JUNK), "%s: count 0 wrote recvbuf", what);
    }
    if (sbuf != NULL) {
        for (size_t j = 0; j < in_elems; j++) {
            CHECK(r, elem_eq(dt, sbuf, j, gen(dt, seed, me, j), got, sizeof(got)),
                  "%s: sendbuf element %zu changed to %s", what, j, got);
        }
        CHECK(r, bytes_are(sbuf + sbuf_elems * es, GUARD * es, CANARY),
              "%s: sendbuf written past its end", what);
    }
    free(sbuf);
    free(rbuf);
}

static void coll_scenario(rank_ctx_t *r)
{
    static const size_t counts[] = {0, 1, 7, 100003};
    static const struct {
        coll_t coll;
        weft_dtype_t dt;
        weft_op_t op;
    } combos[] = {
        {ALLREDUCE, WEFT_FLOAT32, WEFT_SUM},      {ALLREDUCE, WEFT_INT64, WEFT_MAX},
        {REDUCE_SCATTER, WEFT_FLOAT32, WEFT_SUM}, {REDUCE_SCATTER, WEFT_INT64, WEFT_MAX},
        {ALLGATHER, WEFT_FLOAT32, WEFT_SUM},      {ALLGATHER, WEFT_INT64, WEFT_SUM},
    };
    uint64_t seed = 1;

    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        for (size_t k = 0; k < sizeof(combos) / sizeof(combos[0]); k++) {
            for (int v = OUT_OF_PLACE; v <= ALIASED; v++) {
                coll_case(r, combos[k].coll, combos[k].dt, combos[k].op, counts[c], (variant_t)v,
                          seed++);
            }
        }
    }
}

static void run_coll_job(int nranks, const char *tls)
{
    job_opts_t o = {.nranks = nranks,
                    .timeout = "15",
                    .ucx_tls = tls,
                    .scenario = coll_scenario,
                    .expect_killed = -1,
                    .limit_s = 25};
    double t0 = harness_now_s();

    run_job(&o);
    cr_log_info("%d rank(s), UCX_TLS=%s: 72 collectives per rank checked in %.2f s", nranks,
                tls ? tls : "default", harness_now_s() - t0);
}

/* ------------------------------------------------ 1. correct results */

TestSuite(multiproc, .timeout = 40);

Test(multiproc, colls_1_rank, .timeout = 30)
{
    run_coll_job(1, NULL);
}
Test(multiproc, colls_2_ranks, .timeout = 30)
{
    run_coll_job(2, NULL);
}
Test(multiproc, colls_3_ranks, .timeout = 30)
{
    run_coll_job(3, NULL);
}
Test(multiproc, colls_4_ranks, .timeout = 30)
{
    run_coll_job(4, NULL);
}
Test(multiproc, colls_1_rank_tcp, .timeout = 30)
{
    run_coll_job(1, "tcp");
}
Test(multiproc, colls_2_ranks_tcp, .timeout = 30)
{
    run_coll_job(2, "tcp");
}
Test(multiproc, colls_3_ranks_tcp, .timeout = 30)
{
    run_coll_job(3, "tcp");
}
Test(multiproc, colls_4_ranks_tcp, .timeout = 30)
{
    run_coll_job(4, "tcp");
}

/* ------------------------------------------ 2. unique id in the environment */

/* A float sum allreduce of count elements that must give the exact result. */
static void allreduce_ok(rank_ctx_t *r, size_t count, uint64_t seed)
{
    coll_case(r, ALLREDUCE, WEFT_FLOAT32, WEFT_SUM, count, OUT_OF_PLACE, seed);
}

static void env_world_scenario(rank_ctx_t *r)
{
    allreduce_ok(r, 1000, 11);
    allreduce_ok(r, 100003, 12);
}

Test(multiproc, unique_id_from_environment, .timeout = 30)
{
    job_opts_t o = {.nranks = 3,
                    .timeout = "15",
                    .env_world = 1,
                    .scenario = env_world_scenario,
                    .expect_killed = -1,
                    .limit_s = 20};

    run_job(&o);
}

/* ------------------------------------------------------ 3. killed peer */

#define KILLED_RANK 3

static void peer_killed_scenario(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    size_t count = (size_t)1 << 20;
    float *buf;
    double t0, t1;
    weft_status_t st;

    allreduce_ok(r, 1000, 21);
    if (r->rank == KILLED_RANK) {
        /* let the others get into the next allreduce, then die in the middle of it */
        stage(r, "sleeping, then SIGKILL");
        harness_sleep_s(0.2);
        r->sh->kill_time = harness_now_s();
        raise(SIGKILL);
        _exit(4); /* not reached */
    }
    buf = xmalloc(r, count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        buf[i] = (float)(i % 1000);
    }
    stage(r, "allreduce while rank %d dies", KILLED_RANK);
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    s->st[0] = st;
    s->val[0] = t1 - t0;
    s->val[1] = t1 - r->sh->kill_time;
    note(r, "%s", weft_last_error());
    CHECK(r, st == WEFT_ERR_PEER_FAILED,
          "allreduce with rank %d killed returned %s after %.2f s (expected "
          "WEFT_ERR_PEER_FAILED): %s",
          KILLED_RANK, weft_status_string(st), t1 - t0, weft_last_error());
    CHECK(r, t1 - t0 < 15.0, "peer failure reported only after %.2f s", t1 - t0);

    stage(r, "allreduce after the failure");
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1000, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    s->st[1] = st;
    s->val[2] = t1 - t0;
    CHECK(r, st != WEFT_OK && st != WEFT_ERR_TIMEOUT,
          "allreduce on the communicator that lost rank %d returned %s after %.2f s: %s",
          KILLED_RANK, weft_status_string(st), t1 - t0, weft_last_error());
    CHECK(r, t1 - t0 < 3.0, "allreduce after the failure took %.2f s to return %s", t1 - t0,
          weft_status_string(st));
    free(buf);
}

Test(multiproc, killed_peer_is_reported, .timeout = 30)
{
    job_opts_t o = {.nranks = 4,
                    .timeout = "60",
                    .scenario = peer_killed_scenario,
                    .expect_killed = KILLED_RANK,
                    .limit_s = 20};
    shared_t *sh = run_job(&o);

    for (int q = 0; q < o.nranks; q++) {
        const rank_slot_t *s = &sh->slot[q];

        if (q == KILLED_RANK) {
            continue;
        }
        cr_log_info("rank %d: allreduce returned %s %.3f s after rank %d was killed (%.3f s in "
                    "the call); the next allreduce returned %s in %.3f s; error: %s",
                    q, weft_status_string(s->st[0]), s->val[1], KILLED_RANK, s->val[0],
                    weft_status_string(s->st[1]), s->val[2], s->note);
        fprintf(stderr,
                "test_multiproc: killed peer: rank %d detected it %.3f s after the kill (%.3f s "
                "in the call), next call %.3f s\n",
                q, s->val[1], s->val[0], s->val[2]);
    }
}

/* ------------------------------------------------------ 4. stalled rank */

static void stalled_scenario(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    float buf[1024] = {0};
    const char *err;
    double t0, t1;
    weft_status_t st;

    if (r->rank == 1) {
        stage(r, "sleeping instead of the allreduce");
        harness_sleep_s(4.0);
        return;
    }
    stage(r, "allreduce without rank 1");
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    err = weft_last_error();
    s->st[0] = st;
    s->val[0] = t1 - t0;
    note(r, "%s", err);
    CHECK(r, st == WEFT_ERR_TIMEOUT,
          "allreduce returned %s after %.2f s (expected WEFT_ERR_TIMEOUT): %s",
          weft_status_string(st), t1 - t0, err);
    CHECK(r, t1 - t0 >= 0.9 && t1 - t0 <= 3.0,
          "WEFT_TIMEOUT=1 but the allreduce timed out after %.3f s", t1 - t0);
    CHECK(r, strstr(err, "allreduce") != NULL, "the error does not name the allreduce: %s", err);
    CHECK(r, strstr(err, "step") != NULL, "the error does not name the step: %s", err);
    CHECK(r, strstr(err, "waiting for rank(s) 1") != NULL,
          "the error does not name rank 1 as the one waited for: %s", err);
}

Test(multiproc, stalled_rank_times_out, .timeout = 30)
{
    job_opts_t o = {.nranks = 2,
                    .timeout = "1",
                    .scenario = stalled_scenario,
                    .expect_killed = -1,
                    .limit_s = 15};
    shared_t *sh = run_job(&o);

    cr_log_info("stalled rank: allreduce returned %s after %.3f s: %s",
                weft_status_string(sh->slot[0].st[0]), sh->slot[0].val[0], sh->slot[0].note);
    fprintf(stderr, "test_multiproc: stalled rank: timeout after %.3f s: %s\n", sh->slot[0].val[0],
            sh->slot[0].note);
}

/* ------------------------------------------------ 5. abort from a thread */

typedef struct aborter {
    weft_comm_t comm;
    double at;
    weft_status_t st;
} aborter_t;

static void *aborter_main(void *arg)
{
    aborter_t *a = arg;

    harness_sleep_s(0.2);
    a->at = harness_now_s();
    a->st = weft_comm_abort(a->comm);
    return NULL;
}

static void abort_scenario(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    float buf[1024] = {0};
    aborter_t a = {.comm = r->comm, .st = WEFT_ERR_INTERNAL};
    pthread_t thread;
    double t0, t1;
    weft_status_t st;

    if (r->rank == 1) {
        stage(r, "sleeping instead of the allreduce");
        harness_sleep_s(3.0);
        return;
    }
    CHECK(r, pthread_create(&thread, NULL, aborter_main, &a) == 0, "pthread_create");
    stage(r, "allreduce, aborted from another thread");
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    note(r, "%s", weft_last_error());
    pthread_join(thread, NULL);
    s->st[0] = st;
    s->val[0] = t1 - a.at;
    s->val[1] = t1 - t0;
    CHECK(r, a.st == WEFT_OK, "weft_comm_abort returned %s", weft_status_string(a.st));
    CHECK(r, st == WEFT_ERR_ABORTED,
          "allreduce returned %s after %.2f s (expected WEFT_ERR_ABORTED): %s",
          weft_status_string(st), t1 - t0, r->sh->slot[0].note);
    CHECK(r, t1 - a.at < 1.0 && t1 >= a.at, "allreduce returned %.3f s after the abort", t1 - a.at);

    stage(r, "allreduce after the abort");
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    s->st[1] = st;
    s->val[2] = t1 - t0;
    CHECK(r, st == WEFT_ERR_ABORTED, "allreduce after the abort returned %s: %s",
          weft_status_string(st), weft_last_error());
    CHECK(r, t1 - t0 < 0.1, "allreduce after the abort took %.3f s", t1 - t0);
}

Test(multiproc, abort_from_another_thread, .timeout = 30)
{
    job_opts_t o = {.nranks = 2,
                    .timeout = "10",
                    .scenario = abort_scenario,
                    .expect_killed = -1,
                    .limit_s = 15};
    shared_t *sh = run_job(&o);

    cr_log_info("abort: the allreduce returned %s %.3f s after weft_comm_abort; the next one "
                "returned %s in %.4f s",
                weft_status_string(sh->slot[0].st[0]), sh->slot[0].val[0],
                weft_status_string(sh->slot[0].st[1]), sh->slot[0].val[2]);
    fprintf(stderr, "test_multiproc: abort: returned %.3f s after the abort, next call %.4f s\n",
            sh->slot[0].val[0], sh->slot[0].val[2]);
}

/* -------------------------------------------------- 6. bad bootstrap input */

/* One weft_comm_init_rank that must fail with WEFT_ERR_INVALID_ARG at once
 * and leave *comm alone. */
static void expect_invalid(int nranks, const weft_unique_id_t *id, int rank, const char *what)
{
    weft_comm_t comm = (weft_comm_t)(intptr_t)0x1234;
    double t0 = harness_now_s();
    weft_status_t st = weft_comm_init_rank(nranks, id, rank, &comm);
    double dt = harness_now_s() - t0;

    cr_expect_eq(st, WEFT_ERR_INVALID_ARG, "%s: weft_comm_init_rank returned %s: %s", what,
                 weft_status_string(st), weft_last_error());
    cr_expect(dt < 1.0, "%s: weft_comm_init_rank took %.2f s to fail", what, dt);
    cr_expect_eq(comm, (weft_comm_t)(intptr_t)0x1234, "%s: comm was written on failure", what);
    if (st == WEFT_OK && comm != NULL && comm != (weft_comm_t)(intptr_t)0x1234) {
        weft_comm_destroy(comm);
    }
}

Test(multiproc, bad_bootstrap_arguments, .timeout = 20)
{
    weft_unique_id_t id, garbage, bad_magic, parsed;
    char text[WEFT_UNIQUE_ID_STRLEN + 1], bad[WEFT_UNIQUE_ID_STRLEN + 1];
    weft_comm_t comm = NULL;
    float x = 2.5f;

    prepare_env("5", NULL, NULL, NULL);
    cr_assert_eq(weft_init(), WEFT_OK, "weft_init: %s", weft_last_error());
    cr_assert_eq(weft_get_unique_id(&id), WEFT_OK, "weft_get_unique_id: %s", weft_last_error());

    expect_invalid(2, &id, 2, "rank == nranks");
    expect_invalid(2, &id, 5, "rank > nranks");
    expect_invalid(2, &id, -1, "rank -1");
    expect_invalid(0, &id, 0, "nranks 0");
    expect_invalid(2, NULL, 0, "NULL id");
    for (size_t i = 0; i < sizeof(garbage.internal); i++) {
        garbage.internal[i] = (unsigned char)(mix64(i) >> 17);
    }
    expect_invalid(2, &garbage, 0, "garbage id bytes");
    memset(&garbage, 0, sizeof(garbage));
    expect_invalid(2, &garbage, 0, "all-zero id");
    bad_magic = id;
    bad_magic.internal[0] ^= 0xff;
    expect_invalid(1, &bad_magic, 0, "id with a bad magic");
    bad_magic = id;
    bad_magic.internal[100] = 7;
    expect_invalid(1, &bad_magic, 0, "id with nonzero padding");
    cr_expect_eq(weft_comm_init_rank(1, &id, 0, NULL), WEFT_ERR_INVALID_ARG, "NULL comm");

    /* text form */
    cr_expect_eq(weft_unique_id_from_string("zz", &parsed), WEFT_ERR_INVALID_ARG,
                 "from_string(\"zz\")");
    cr_expect_eq(weft_unique_id_from_string("", &parsed), WEFT_ERR_INVALID_ARG,
                 "from_string(\"\")");
    cr_expect_eq(weft_unique_id_from_string(NULL, &parsed), WEFT_ERR_INVALID_ARG,
                 "from_string(NULL)");
    cr_expect_eq(weft_unique_id_to_string(&id, text, WEFT_UNIQUE_ID_STRLEN), WEFT_ERR_INVALID_ARG,
                 "to_string into a buffer one byte short");
    cr_assert_eq(weft_unique_id_to_string(&id, text, sizeof(text)), WEFT_OK, "to_string: %s",
                 weft_last_error());
    cr_expect_eq(strlen(text), (size_t)WEFT_UNIQUE_ID_STRLEN);
    memcpy(bad, text, sizeof(bad));
    bad[10] = 'g';
    cr_expect_eq(weft_unique_id_from_string(bad, &parsed), WEFT_ERR_INVALID_ARG,
                 "from_string with a non-hex digit");
    bad[WEFT_UNIQUE_ID_STRLEN - 1] = '\0';
    cr_expect_eq(weft_unique_id_from_string(bad, &parsed), WEFT_ERR_INVALID_ARG,
                 "from_string one digit short");
    cr_assert_eq(weft_unique_id_from_string(text, &parsed), WEFT_OK, "from_string: %s",
                 weft_last_error());
    cr_expect_eq(memcmp(&parsed, &id, sizeof(id)), 0, "the text form does not round-trip");

    /* the id still works after all that: a job of one rank */
    cr_assert_eq(weft_comm_init_rank(1, &parsed, 0, &comm), WEFT_OK,
                 "weft_comm_init_rank(1, id, 0) after the bad calls: %s", weft_last_error());
    cr_expect_eq(weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_OK,
                 "allreduce: %s", weft_last_error());
    cr_expect_eq(x, 2.5f);
    cr_expect_eq(weft_comm_destroy(comm), WEFT_OK, "weft_comm_destroy: %s", weft_last_error());
    cr_expect_eq(weft_finalize(), WEFT_OK);
}

/* rank 0 says the job has 2 ranks, rank 1 says 3: both must fail, promptly. */
static void mismatch_body(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    int nranks = r->rank == 0 ? 2 : 3;
    weft_comm_t comm = NULL;
    double t0, t1;
    weft_status_t st;

    stage(r, "weft_comm_init_rank(%d, id, %d)", nranks, r->rank);
    t0 = harness_now_s();
    st = weft_comm_init_rank(nranks, &r->id, r->rank, &comm);
    t1 = harness_now_s();
    s->st[0] = st;
    s->val[0] = t1 - t0;
    note(r, "%s", weft_last_error());
    if (st == WEFT_OK) {
        weft_comm_destroy(comm);
    }
    CHECK(r, st == WEFT_ERR_BOOTSTRAP || st == WEFT_ERR_TIMEOUT,
          "rank %d (nranks %d) joined with %s after %.2f s, expected WEFT_ERR_BOOTSTRAP or "
          "WEFT_ERR_TIMEOUT: %s",
          r->rank, nranks, weft_status_string(st), t1 - t0, r->sh->slot[r->rank].note);
    CHECK(r, t1 - t0 < 6.0, "the mismatch took %.2f s to fail (WEFT_TIMEOUT=2)", t1 - t0);
    stage(r, "failed as expected");
}

Test(multiproc, nranks_mismatch_fails_both, .timeout = 30)
{
    job_opts_t o = {
        .nranks = 2, .timeout = "2", .body = mismatch_body, .expect_killed = -1, .limit_s = 15};
    shared_t *sh = run_job(&o);

    for (int q = 0; q < 2; q++) {
        cr_log_info("nranks mismatch: rank %d got %s after %.3f s: %s", q,
                    weft_status_string(sh->slot[q].st[0]), sh->slot[q].val[0], sh->slot[q].note);
    }
}

/* ------------------------------------------ 7. shared memory between processes */

/*
 * The ranks of these jobs share one machine, so the world has a node
 * segment and WEFT_TUNE=allreduce:0-inf:shm sends every allreduce through
 * it. Each rank checks that it maps the segment, and that the segment's
 * name is gone from /dev/shm (the creator, rank 0, unlinks it once every
 * rank mapped it).
 */
#define SHM_TUNE "allreduce:0-inf:shm"

/* Mappings of weft segments in this process, and how many of them are of
 * files already unlinked. */
static void shm_mappings(rank_ctx_t *r, int *total_p, int *deleted_p)
{
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");

    CHECK(r, f != NULL, "cannot read /proc/self/maps: %s", strerror(errno));
    *total_p = *deleted_p = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *path = strstr(line, "/dev/shm/weft-");

        if (path != NULL) {
            (*total_p)++;
            *deleted_p += strstr(path, " (deleted)") != NULL;
        }
    }
    fclose(f);
}

static void check_shm_mapped(rank_ctx_t *r)
{
    int total, deleted;

    shm_mappings(r, &total, &deleted);
    CHECK(r, total == 1 && deleted == 1,
          "rank %d maps %d weft segment(s), %d of them unlinked; expected one, unlinked", r->rank,
          total, deleted);
}

#define SHM_KILLED_RANK 2
#define SHM_ITERS_BEFORE 90         /* allreduces that all ranks complete */
#define SHM_LARGE ((size_t)1 << 20) /* floats of the allreduce the rank dies in */

/* The allreduce of iteration it, with the default 256 KiB slots and 16 KiB
 * one-phase limit: 1 and 7 elements and 4 KB (one phase, one round), one
 * slot (two phases) and 800 KB (two phases, four rounds); the one a rank
 * dies in has 16 rounds. */
static size_t shm_iter_count(int it)
{
    static const size_t counts[] = {1, 1000, 65536, 7, 200003};

    return it >= SHM_ITERS_BEFORE ? SHM_LARGE : counts[it % 5];
}

static void shm_fill(float *buf, size_t count, int it, int rank)
{
    for (size_t j = 0; j < count; j++) {
        buf[j] = (float)gen(WEFT_FLOAT32, 1000 + (uint64_t)it, rank, j);
    }
}

static void shm_check(rank_ctx_t *r, const float *buf, size_t count, int it)
{
    for (size_t j = 0; j < count; j++) {
        int64_t want = reduced(WEFT_FLOAT32, WEFT_SUM, 1000 + (uint64_t)it, r->nranks, j);

        CHECK(r, buf[j] == (float)want,
              "shm allreduce %d (count %zu) on rank %d: element %zu is "
              "%.9g, expected %lld",
              it, count, r->rank, j, (double)buf[j], (long long)want);
    }
}

/*
 * Rank SHM_KILLED_RANK starts the large allreduce, drives it for a few
 * milliseconds (so that it dies in the middle of its rounds, while the
 * others wait for its flags) and SIGKILLs itself. The others must get
 * WEFT_ERR_PEER_FAILED from that allreduce (or from the next one, where the
 * dead rank had already published its part of every round) within two
 * seconds; WEFT_TIMEOUT is 60 s, so a timeout cannot pass for it.
 *
 * The bootstrap notices a dead rank too, when the kernel closes its
 * connection to the root. With shm_hold_bootstrap the dying rank first
 * forks a process that inherits that connection and keeps it open for a
 * few seconds, so only the shared-memory liveness check (the dead pid) can
 * tell; the error must then be the one that names the process on this
 * node.
 *
 * Then one more allreduce, shm_next_delay seconds later: it must fail at
 * once, and with WEFT_ERR_PEER_FAILED again (the communicator lost a rank;
 * nothing else went wrong).
 */
static int shm_hold_bootstrap;
static double shm_next_delay;

static void shm_peer_killed_scenario(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    float *buf = xmalloc(r, SHM_LARGE * sizeof(float));
    weft_status_t st = WEFT_OK;
    double t0 = 0, t1 = 0;
    char who[32];
    int it;

    check_shm_mapped(r);
    for (it = 0; it < SHM_ITERS_BEFORE; it++) {
        size_t count = shm_iter_count(it);

        stage(r, "shm allreduce %d of %d (count %zu)", it, SHM_ITERS_BEFORE, count);
        shm_fill(buf, count, it, r->rank);
        CHECK_OK(r, weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, r->comm));
        shm_check(r, buf, count, it);
    }
    shm_fill(buf, SHM_LARGE, it, r->rank);
    if (r->rank == SHM_KILLED_RANK) {
        weft_request_t req;
        int done = 0, polls = 0;

        if (shm_hold_bootstrap) {
            pid_t holder;

            stage(r, "fork the holder of the bootstrap connection");
            fflush(stdout);
            fflush(stderr);
            holder = fork();
            if (holder == 0) {
                /* every descriptor of the rank, its bootstrap connection
                 * among them, stays open until this sleep ends */
                harness_sleep_s(3.0);
                _exit(0);
            }
            CHECK(r, holder > 0, "fork: %s", strerror(errno));
            r->sh->holder = holder;
        }
        stage(r, "large shm allreduce, then SIGKILL");
        CHECK_OK(r, weft_iallreduce(WEFT_IN_PLACE, buf, SHM_LARGE, WEFT_FLOAT32, WEFT_SUM, r->comm,
                                    &req));
        t0 = harness_now_s();
        while (!done && harness_now_s() - t0 < 0.003) {
            CHECK_OK(r, weft_test(req, &done));
            polls++;
        }
        note(r, "killed %s the allreduce, after %d polls",
             done ? "after completing" : "in the middle of", polls);
        r->sh->kill_time = harness_now_s();
        raise(SIGKILL);
        _exit(4); /* not reached */
    }
    /* the large one, then one more: the dead rank never starts it */
    for (int extra = 0; extra < 2 && st == WEFT_OK; extra++) {
        size_t count = extra == 0 ? SHM_LARGE : 1000;

        stage(r, "shm allreduce %d while rank %d dies", it + extra, SHM_KILLED_RANK);
        if (extra == 1) {
            shm_fill(buf, count, it + extra, r->rank);
        }
        t0 = harness_now_s();
        st = weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, r->comm);
        t1 = harness_now_s();
        s->st[0] = st;
        s->val[3] = extra;
        if (st == WEFT_OK) {
            shm_check(r, buf, count, it + extra);
        }
    }
    s->val[0] = t1 - t0;
    s->val[1] = t1 - r->sh->kill_time;
    note(r, "%s", weft_last_error());
    /* no survivor leaves (and closes its own bootstrap connection, which
     * the others would hear of) before every survivor saw rank 2's failure */
    atomic_fetch_add(&r->sh->settled, 1);
    for (double until = harness_now_s() + 5.0;
         atomic_load(&r->sh->settled) < r->nranks - 1 && harness_now_s() < until;) {
        harness_sleep_s(0.001);
    }
    CHECK(r, st == WEFT_ERR_PEER_FAILED,
          "shm allreduce with rank %d killed returned %s after %.2f s (expected "
          "WEFT_ERR_PEER_FAILED): %s",
          SHM_KILLED_RANK, weft_status_string(st), t1 - t0, r->sh->slot[r->rank].note);
    CHECK(r, r->sh->kill_time > 0 && t1 - r->sh->kill_time < 2.0,
          "the failure of rank %d was reported %.2f s after it died (%.2f s in the call)",
          SHM_KILLED_RANK, t1 - r->sh->kill_time, t1 - t0);
    /* named by the allreduce that failed, or by the health check at the
     * start of the call when the rank was already gone */
    snprintf(who, sizeof(who), "rank %d failed", SHM_KILLED_RANK);
    CHECK(r, strstr(s->note, who) != NULL, "the error does not name rank %d: %s", SHM_KILLED_RANK,
          s->note);
    CHECK(r, !shm_hold_bootstrap || strstr(s->note, "on this node is gone") != NULL,
          "with the bootstrap connection held open, the failure was not found by the "
          "shared-memory liveness check: %s",
          s->note);

    stage(r, "shm allreduce after the failure");
    harness_sleep_s(shm_next_delay);
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1000, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    s->st[1] = st;
    s->val[2] = t1 - t0;
    snprintf(s->note + strlen(s->note), sizeof(s->note) - strlen(s->note), " | next: %s",
             weft_last_error());
    CHECK(r, st == WEFT_ERR_PEER_FAILED,
          "allreduce %.2f s after the communicator lost rank %d returned %s after %.2f s "
          "(expected WEFT_ERR_PEER_FAILED again): %s",
          shm_next_delay, SHM_KILLED_RANK, weft_status_string(st), t1 - t0, weft_last_error());
    CHECK(r, t1 - t0 < 1.0, "allreduce after the failure took %.2f s to return %s", t1 - t0,
          weft_status_string(st));
    free(buf);
}

static void run_shm_killed(int hold_bootstrap, double next_delay)
{
    job_opts_t o = {.nranks = 4,
                    .timeout = "60",
                    .tune = SHM_TUNE,
                    .scenario = shm_peer_killed_scenario,
                    .expect_killed = SHM_KILLED_RANK,
                    .limit_s = 30};
    shared_t *sh;

    shm_hold_bootstrap = hold_bootstrap;
    shm_next_delay = next_delay;
    sh = run_job(&o);
    if (sh->holder > 0) {
        kill(sh->holder, SIGKILL);
    }
    fprintf(stderr, "test_multiproc: shm killed peer%s: rank %d %s\n",
            hold_bootstrap ? " (bootstrap connection held open)" : "", SHM_KILLED_RANK,
            sh->slot[SHM_KILLED_RANK].note);
    for (int q = 0; q < o.nranks; q++) {
        const rank_slot_t *s = &sh->slot[q];

        if (q == SHM_KILLED_RANK) {
            continue;
        }
        fprintf(stderr,
                "test_multiproc: shm killed peer: rank %d got %s %.3f s after the kill (%.3f s "
                "in the call, %s allreduce), then %s in %.3f s: %s\n",
                q, weft_status_string(s->st[0]), s->val[1], s->val[0],
                s->val[3] == 0 ? "the large" : "the next", weft_status_string(s->st[1]), s->val[2],
                s->note);
    }
}

Test(multiproc, shm_killed_peer_is_reported, .timeout = 40)
{
    run_shm_killed(0, 0);
}

/* The next call after the liveness check's 100 ms period: found again. */
Test(multiproc, shm_killed_peer_found_by_pid, .timeout = 40)
{
    run_shm_killed(1, 0.2);
}

/* The next call at once, within that period. */
Test(multiproc, shm_killed_peer_found_by_pid_next_call_at_once, .timeout = 40)
{
    run_shm_killed(1, 0);
}

/* This process's stderr into a temporary file, for a while. */
typedef struct capture {
    int saved;
    FILE *tmp;
} capture_t;

static void capture_start(rank_ctx_t *r, capture_t *c)
{
    fflush(stderr);
    c->tmp = tmpfile();
    CHECK(r, c->tmp != NULL, "tmpfile: %s", strerror(errno));
    c->saved = dup(STDERR_FILENO);
    CHECK(r, c->saved >= 0 && dup2(fileno(c->tmp), STDERR_FILENO) >= 0, "dup: %s", strerror(errno));
}

/* Restore stderr, pass on what was written and return it in buf. */
static void capture_end(capture_t *c, char *buf, size_t cap)
{
    size_t n;

    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    rewind(c->tmp);
    n = fread(buf, 1, cap - 1, c->tmp);
    buf[n] = '\0';
    fclose(c->tmp);
    fputs(buf, stderr);
}

/*
 * Rank 1 sleeps instead of calling the allreduce; with WEFT_TIMEOUT=1 the
 * others' shared-memory allreduce must end with WEFT_ERR_TIMEOUT after about
 * a second, with an error and a log line that name the operation, its
 * shared-memory step and rank 1 as the one waited for.
 */
static void shm_stalled_scenario(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    float buf[1024];
    char log[4096];
    capture_t cap;
    const char *err;
    double t0, t1;
    weft_status_t st;

    check_shm_mapped(r);
    for (int it = 0; it < 5; it++) {
        shm_fill(buf, 1024, it, r->rank);
        stage(r, "shm allreduce %d before the stall", it);
        CHECK_OK(r, weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm));
        shm_check(r, buf, 1024, it);
    }
    if (r->rank == 1) {
        stage(r, "sleeping instead of the shm allreduce");
        harness_sleep_s(3.0);
        return;
    }
    stage(r, "shm allreduce without rank 1");
    capture_start(r, &cap);
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    err = weft_last_error();
    capture_end(&cap, log, sizeof(log));
    s->st[0] = st;
    s->val[0] = t1 - t0;
    note(r, "%s", err);
    /* stay alive until every waiting rank reached its own deadline: a rank
     * that exits earlier is, rightly, a dead peer to the ones still waiting */
    harness_sleep_s(1.5);
    CHECK(r, st == WEFT_ERR_TIMEOUT,
          "shm allreduce returned %s after %.2f s (expected WEFT_ERR_TIMEOUT): %s",
          weft_status_string(st), t1 - t0, err);
    CHECK(r, t1 - t0 >= 0.9 && t1 - t0 <= 3.0,
          "WEFT_TIMEOUT=1 but the shm allreduce timed out after %.3f s", t1 - t0);
    CHECK(r, strstr(err, "allreduce") != NULL && strstr(err, "(shm)") != NULL,
          "the error does not name the shm allreduce: %s", err);
    CHECK(r, strstr(err, "shared memory step") != NULL,
          "the error does not name the shared-memory step: %s", err);
    CHECK(r, strstr(err, "waiting for rank(s) 1") != NULL,
          "the error does not name rank 1 as the one waited for: %s", err);
    CHECK(r, strstr(log, "timed out") != NULL && strstr(log, "waiting for rank(s) 1") != NULL,
          "rank %d logged no line naming rank 1 as the one waited for; its log: %s", r->rank, log);
}

Test(multiproc, shm_stalled_rank_times_out, .timeout = 30)
{
    job_opts_t o = {.nranks = 4,
                    .timeout = "1",
                    .tune = SHM_TUNE,
                    .scenario = shm_stalled_scenario,
                    .expect_killed = -1,
                    .limit_s = 15};
    shared_t *sh = run_job(&o);

    for (int q = 0; q < o.nranks; q++) {
        if (q != 1) {
            fprintf(stderr,
                    "test_multiproc: shm stalled rank: rank %d timed out after %.3f s: %s\n", q,
                    sh->slot[q].val[0], sh->slot[q].note);
        }
    }
}

/*
 * The correctness scenario of section 1 on 4 processes cut into 2 virtual
 * nodes of 2: the selection's own choice (hierarchical where it wins), and
 * every collective of the scenario forced onto the hierarchical algorithms
 * (shared memory inside each pair of processes, UCX between the pairs).
 * Every process maps exactly one segment: its own node's.
 */
static void nodes_scenario(rank_ctx_t *r)
{
    check_shm_mapped(r);
    coll_scenario(r);
}

static void run_nodes_job(const char *tune)
{
    job_opts_t o = {.nranks = 4,
                    .timeout = "15",
                    .tune = tune,
                    .rpn = "2",
                    .scenario = nodes_scenario,
                    .expect_killed = -1,
                    .limit_s = 25};
    double t0 = harness_now_s();

    run_job(&o);
    fprintf(stderr,
            "test_multiproc: 2 nodes of 2 processes, WEFT_TUNE=%s: 72 collectives per "
            "rank checked in %.2f s\n",
            tune ? tune : "(none)", harness_now_s() - t0);
}

Test(multiproc, colls_2_nodes_of_2, .timeout = 30)
{
    run_nodes_job(NULL);
}

Test(multiproc, colls_2_nodes_of_2_hier, .timeout = 30)
{
    run_nodes_job("allreduce:0-inf:hier,reduce_scatter:0-inf:hier,allgather:0-inf:hier");
}
