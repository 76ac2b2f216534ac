/* The job machinery of the multi-process tests (tests/runtime/multiproc.h). */
#include "tests/runtime/multiproc.h"

void stage(rank_ctx_t *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->sh->slot[r->rank].stage, sizeof(r->sh->slot[0].stage), fmt, ap);
    va_end(ap);
}

void note(rank_ctx_t *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->sh->slot[r->rank].note, sizeof(r->sh->slot[0].note), fmt, ap);
    va_end(ap);
}

/* Record the failure; a child exits, rank 0 jumps back to the harness. */
void rank_fail(rank_ctx_t *r, int line, const char *fmt, ...)
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

void *xmalloc(rank_ctx_t *r, size_t bytes)
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

/* Everything a caller's shell might have set that changes what is tested
 * (every setting of the configuration registry, PMIx's job); WEFT_LOG_LEVEL
 * stays. */
void prepare_env(const char *timeout, const char *ucx_tls, const char *tune, const char *rpn)
{
    cr_assert_eq(harness_reset_env("WEFT_LOG_LEVEL"), 0, "cannot list the configuration registry");
    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_RANK");
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
    for (int i = 0; i < 4 && o->env[i] != NULL; i += 2) {
        set_env(o->env[i], o->env[i + 1]);
    }
    if (o->frag != NULL) {
        set_env("WEFT_STAGE_FRAG", o->frag);
    }
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
shared_t *run_job(const job_opts_t *o)
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
