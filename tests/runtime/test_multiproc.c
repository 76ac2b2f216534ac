/*
 * weft between real processes, bootstrapped with a unique id (no mpirun).
 *
 * The test process is rank 0: it calls weft_init and weft_get_unique_id
 * (which starts the bootstrap root in it), forks children for ranks
 * 1..n-1, and then joins with weft_comm_init_rank. No communicator exists
 * before fork, so no UCX state is inherited; the children inherit weft's
 * configuration (WEFT_TIMEOUT, UCX_TLS, ... are set before weft_init).
 *
 * Children never use Criterion. They record where they are and what went
 * wrong in an anonymous shared mapping made before fork, and exit: 0 when
 * every check passed. They die with the parent (PR_SET_PDEATHSIG). The
 * parent records its own failures in the same mapping (a failed check of
 * rank 0 longjmps back to the harness), reaps every child before a
 * deadline, SIGKILLs what is left (a watchdog thread does so too, in case
 * rank 0 itself is stuck in a call) and only then asserts, so nothing
 * survives a test. Latencies are measured with CLOCK_MONOTONIC, which is
 * shared by every process of the machine.
 *
 * Every Criterion test runs in its own process, so each has a fresh weft.
 * WEFT_LOG_LEVEL is left as the caller set it (WEFT_LOG_LEVEL=debug shows
 * the bootstrap and transport at work).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <weft.h>

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
#include <sys/prctl.h>
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
    atomic_int failed; /* some rank recorded an error */
    double kill_time;  /* CLOCK_MONOTONIC seconds when a rank killed itself */
    rank_slot_t slot[MAX_RANKS];
} shared_t;

typedef struct rank_ctx rank_ctx_t;
typedef void (*rank_fn)(rank_ctx_t *r);

typedef struct job_opts {
    int nranks;
    const char *timeout; /* WEFT_TIMEOUT */
    const char *ucx_tls; /* UCX_TLS, or NULL for UCX's default */
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

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

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
    if (value != NULL) {
        cr_assert_eq(setenv(name, value, 1), 0, "setenv %s", name);
    } else {
        unsetenv(name);
    }
}

/* Everything a caller's shell might have set that changes what is tested;
 * WEFT_LOG_LEVEL stays. */
static void prepare_env(const char *timeout, const char *ucx_tls)
{
    static const char *const vars[] = {"WEFT_CONFIG_FILE", "WEFT_TUNE",   "WEFT_UNIQUE_ID",
                                       "WEFT_RANK",        "WEFT_NRANKS", "WEFT_BOOTSTRAP_ADDR",
                                       "PMIX_NAMESPACE",   "PMIX_RANK"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
    set_env("WEFT_TIMEOUT", timeout);
    set_env("UCX_TLS", ucx_tls);
}

/* ------------------------------------------------------------------ job */

typedef struct job {
    const job_opts_t *o;
    shared_t *sh;
    pid_t pids[MAX_RANKS];
    int reaped[MAX_RANKS];
    int wstatus[MAX_RANKS];
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

static void child_main(job_t *job, int rank, pid_t parent)
{
    rank_ctx_t r = {.sh = job->sh, .o = job->o, .rank = rank, .nranks = job->o->nranks};

    stage(&r, "prctl(PR_SET_PDEATHSIG) after fork");
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        _exit(3);
    }
    r.id = job->id;
    memcpy(r.id_text, job->id_text, sizeof(r.id_text));
    (job->o->body != NULL ? job->o->body : default_body)(&r);
    stage(&r, "weft_finalize");
    CHECK_OK(&r, weft_finalize());
    stage(&r, "done");
    job->sh->slot[rank].finished = 1;
    _exit(0);
}

static void kill_children(job_t *job)
{
    for (int r = 1; r < job->o->nranks; r++) {
        if (job->pids[r] > 0 && !job->reaped[r]) {
            kill(job->pids[r], SIGKILL);
        }
    }
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
                kill_children(job);
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
    pid_t self = getpid();

    memset(job, 0, sizeof(*job));
    job->o = o;
    cr_assert(o->nranks >= 1 && o->nranks <= MAX_RANKS);
    prepare_env(o->timeout, o->ucx_tls);
    cr_assert_eq(weft_init(), WEFT_OK, "weft_init: %s", weft_last_error());
    cr_assert_eq(weft_get_unique_id(&job->id), WEFT_OK, "weft_get_unique_id: %s",
                 weft_last_error());
    cr_assert_eq(weft_unique_id_to_string(&job->id, job->id_text, sizeof(job->id_text)), WEFT_OK,
                 "weft_unique_id_to_string: %s", weft_last_error());
    job->sh =
        mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(job->sh, MAP_FAILED, "mmap: %s", strerror(errno));
    memset(job->sh, 0, sizeof(*job->sh));
    job->start = now_s();
    fflush(stdout);
    fflush(stderr);
    for (int r = 1; r < o->nranks; r++) {
        pid_t pid = fork();

        if (pid == 0) {
            child_main(job, r, self);
        }
        if (pid < 0) {
            kill_children(job);
            for (int k = 1; k < r; k++) {
                waitpid(job->pids[k], NULL, 0);
            }
            cr_assert_fail("fork: %s", strerror(errno));
        }
        job->pids[r] = pid;
    }
    current_job = job;
    pthread_mutex_init(&job->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&job->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&job->watchdog, NULL, watchdog_main, job) != 0) {
        kill_children(job);
        for (int r = 1; r < o->nranks; r++) {
            waitpid(job->pids[r], NULL, 0);
        }
        cr_assert_fail("cannot start the watchdog thread");
    }
}

/* Wait for every child until deadline (absolute, seconds); then kill and reap the rest. */
static void reap_children(job_t *job, double deadline)
{
    int left;

    do {
        left = 0;
        for (int r = 1; r < job->o->nranks; r++) {
            if (job->reaped[r]) {
                continue;
            }
            pid_t p = waitpid(job->pids[r], &job->wstatus[r], WNOHANG);

            if (p == job->pids[r]) {
                job->reaped[r] = 1;
            } else {
                left++;
            }
        }
        if (left > 0) {
            sleep_s(0.005);
        }
    } while (left > 0 && now_s() < deadline);
    if (left > 0) {
        kill_children(job);
        for (int r = 1; r < job->o->nranks; r++) {
            if (!job->reaped[r]) {
                waitpid(job->pids[r], &job->wstatus[r], 0);
                job->reaped[r] = 2; /* killed by us */
            }
        }
    }
}

static size_t append(char *buf, size_t cap, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t append(char *buf, size_t cap, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (len >= cap) {
        return len;
    }
    va_start(ap, fmt);
    len += (size_t)vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    return len < cap ? len : cap;
}

/*
 * Reap the children (every one, whatever happened), stop the watchdog and
 * assert that every rank passed. parent_failed: rank 0 gave up, so the
 * others get only a short grace before they are killed.
 */
static void job_finish(job_t *job, int parent_failed)
{
    const job_opts_t *o = job->o;
    double deadline = parent_failed ? now_s() + 1.0 : job->start + o->limit_s;
    static char msg[8192];
    size_t len = 0;
    int ok = !parent_failed;

    reap_children(job, deadline);
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
        len = append(msg, sizeof(msg), len, "rank 0 failed (in %s): %s\n", job->sh->slot[0].stage,
                     job->sh->slot[0].error);
    }
    for (int r = 1; r < o->nranks; r++) {
        const rank_slot_t *s = &job->sh->slot[r];
        int w = job->wstatus[r];

        if (r == o->expect_killed) {
            if (job->reaped[r] != 1 || !WIFSIGNALED(w) || WTERMSIG(w) != SIGKILL) {
                ok = 0;
                len = append(msg, sizeof(msg), len,
                             "rank %d should have killed itself; %s (stage: %s) %s\n", r,
                             job->reaped[r] == 2 ? "it was still running at the deadline"
                                                 : "it ended otherwise",
                             s->stage, s->error);
            }
            continue;
        }
        if (job->reaped[r] == 2) {
            ok = 0;
            len = append(msg, sizeof(msg), len,
                         "rank %d was still running %s and was killed; stuck in: %s %s\n", r,
                         parent_failed ? "after rank 0 failed" : "at the deadline", s->stage,
                         s->error);
        } else if (WIFSIGNALED(w)) {
            ok = 0;
            len = append(msg, sizeof(msg), len, "rank %d died of signal %d in: %s %s\n", r,
                         WTERMSIG(w), s->stage, s->error);
        } else if (WEXITSTATUS(w) != 0 || !s->finished) {
            ok = 0;
            len = append(msg, sizeof(msg), len, "rank %d exited with %d in: %s: %s\n", r,
                         WEXITSTATUS(w), s->stage, s->error[0] ? s->error : "(no message)");
        }
    }
    if (atomic_load(&job->fired)) {
        ok = 0;
        len = append(msg, sizeof(msg), len, "the watchdog killed the children after %.1f s\n",
                     o->limit_s);
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
    double t0 = now_s();

    run_job(&o);
    cr_log_info("%d rank(s), UCX_TLS=%s: 72 collectives per rank checked in %.2f s", nranks,
                tls ? tls : "default", now_s() - t0);
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
        sleep_s(0.2);
        r->sh->kill_time = now_s();
        raise(SIGKILL);
        _exit(4); /* not reached */
    }
    buf = xmalloc(r, count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        buf[i] = (float)(i % 1000);
    }
    stage(r, "allreduce while rank %d dies", KILLED_RANK);
    t0 = now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = now_s();
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
    t0 = now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1000, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = now_s();
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
        sleep_s(4.0);
        return;
    }
    stage(r, "allreduce without rank 1");
    t0 = now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = now_s();
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

    sleep_s(0.2);
    a->at = now_s();
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
        sleep_s(3.0);
        return;
    }
    CHECK(r, pthread_create(&thread, NULL, aborter_main, &a) == 0, "pthread_create");
    stage(r, "allreduce, aborted from another thread");
    t0 = now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = now_s();
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
    t0 = now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = now_s();
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
    double t0 = now_s();
    weft_status_t st = weft_comm_init_rank(nranks, id, rank, &comm);
    double dt = now_s() - t0;

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

    prepare_env("5", NULL);
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
    t0 = now_s();
    st = weft_comm_init_rank(nranks, &r->id, r->rank, &comm);
    t1 = now_s();
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
