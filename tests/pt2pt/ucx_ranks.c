/* The ranks of test_ucx: forking, barriers, waits, data (tests/pt2pt/ucx_ranks.h). */
#include "tests/pt2pt/ucx_ranks.h"

void child_fail(rank_t *r, int line, const char *fmt, ...)
{
    char *msg = r->sh->error[r->rank];
    va_list ap;
    int n = snprintf(msg, sizeof(r->sh->error[0]), "rank %d, line %d: ", r->rank, line);

    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(r->sh->error[0]) - (size_t)n, fmt, ap);
    va_end(ap);
    atomic_store(&r->sh->failed, 1);
    _exit(1);
}

/* Leave quietly when a sibling failed: the parent reports its message. */
static void bail_if_sibling_failed(rank_t *r)
{
    if (atomic_load(&r->sh->failed)) {
        _exit(2);
    }
}

/* Between polls of a barrier: leave when a sibling failed, progress the
 * transport (a rendezvous may need the waiting side). */
static int barrier_idle(void *arg)
{
    rank_t *r = arg;

    bail_if_sibling_failed(r);
    if (r->ep != NULL) {
        ops->progress(r->ep);
    }
    return 0;
}

/* Barrier of the ranks in the quorum. */
void barrier(rank_t *r)
{
    int st =
        harness_barrier_wait(&r->sh->barrier, harness_now_s() + WAIT_NS * 1e-9, barrier_idle, r);

    CHECK(r, st == 0, "barrier timed out");
}

/* Progress until every request is done (freed, set to NULL); statuses to st. */
void wait_all(rank_t *r, void *ep, weft_p2p_req_t **reqs, weft_status_t *st, int n)
{
    uint64_t deadline = weft__time_ns() + WAIT_NS;
    int left = 0;
    int idle = 0;

    for (int i = 0; i < n; i++) {
        left += reqs[i] != NULL;
    }
    while (left > 0) {
        int events = ops->progress(ep);

        for (int i = 0; i < n; i++) {
            int done = 0;
            weft_status_t s;

            if (reqs[i] == NULL) {
                continue;
            }
            s = ops->test(ep, reqs[i], &done, NULL);
            if (done) {
                reqs[i] = NULL;
                st[i] = s;
                left--;
                events++;
            }
        }
        if (left == 0) {
            break;
        }
        bail_if_sibling_failed(r);
        CHECK(r, weft__time_ns() < deadline, "%d of %d requests never completed", left, n);
        idle = events > 0 ? 0 : idle + 1;
        if (idle > 16) {
            ops->idle_wait(ep, 1000000);
        }
    }
}

weft_status_t wait_one(rank_t *r, void *ep, weft_p2p_req_t *req)
{
    weft_status_t st = WEFT_ERR_INTERNAL;

    wait_all(r, ep, &req, &st, 1);
    return st;
}

weft_p2p_req_t *post_send(rank_t *r, void *ep, int peer, uint64_t tag, const void *buf,
                          size_t bytes)
{
    weft_p2p_req_t *req = NULL;
    weft_status_t st = ops->isend(ep, peer, buf, bytes, WEFT_MEM_HOST, tag, &req);

    CHECK(r, st == WEFT_OK && req != NULL, "isend to %d (%zu bytes): %s", peer, bytes,
          weft_last_error());
    return req;
}

weft_p2p_req_t *post_recv(rank_t *r, void *ep, int peer, uint64_t tag, void *buf, size_t bytes)
{
    weft_p2p_req_t *req = NULL;
    weft_status_t st = ops->irecv(ep, peer, buf, bytes, WEFT_MEM_HOST, tag, &req);

    CHECK(r, st == WEFT_OK && req != NULL, "irecv from %d (%zu bytes): %s", peer, bytes,
          weft_last_error());
    return req;
}

void send_ok(rank_t *r, void *ep, int peer, uint64_t tag, const void *buf, size_t bytes)
{
    weft_status_t st = wait_one(r, ep, post_send(r, ep, peer, tag, buf, bytes));

    CHECK(r, st == WEFT_OK, "send of %zu bytes to %d: %s", bytes, peer, weft_last_error());
}

void recv_ok(rank_t *r, void *ep, int peer, uint64_t tag, void *buf, size_t bytes)
{
    weft_status_t st = wait_one(r, ep, post_recv(r, ep, peer, tag, buf, bytes));

    CHECK(r, st == WEFT_OK, "receive of %zu bytes from %d: %s", bytes, peer, weft_last_error());
}

/* Deterministic bytes for (seed, index). */
void fill(unsigned char *buf, size_t bytes, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < bytes; i++) {
        harness_xorshift(&s);
        buf[i] = (unsigned char)s;
    }
}

/* Index of the first byte that differs from fill(seed), or SIZE_MAX. */
size_t first_diff(const unsigned char *buf, size_t bytes, uint64_t seed)
{
    unsigned char *want = malloc(bytes ? bytes : 1);
    size_t at = SIZE_MAX;

    fill(want, bytes, seed);
    for (size_t i = 0; i < bytes; i++) {
        if (buf[i] != want[i]) {
            at = i;
            break;
        }
    }
    free(want);
    return at;
}

void *xmalloc(rank_t *r, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);

    CHECK(r, p != NULL, "cannot allocate %zu bytes", bytes);
    return p;
}

typedef struct job {
    shared_t *sh;
    const char *tls;
    scenario_fn fn;
} job_t;

static int child_main(int rank, void *arg)
{
    const job_t *job = arg;
    shared_t *sh = job->sh;
    rank_t r = {.sh = sh, .rank = rank, .nranks = sh->nranks};
    const void *addr;
    size_t len;
    weft_status_t st;

    if (job->tls != NULL) {
        setenv("UCX_TLS", job->tls, 1);
    }
    st = weft__ucx_context_get(&r.ctx);
    CHECK(&r, st == WEFT_OK, "context: %s", weft_last_error());
    st = weft__ucx_worker_address(r.ctx, &addr, &len);
    CHECK(&r, st == WEFT_OK && len > 0 && len <= ADDR_MAX, "worker address of %zu bytes: %s", len,
          weft_last_error());
    memcpy(sh->addr[rank], addr, len);
    sh->addr_len[rank] = len;
    barrier(&r);
    st = weft__ucx_ep_create(r.ctx, rank, r.nranks, sh->addr, ADDR_MAX, sh->addr_len, &r.ep);
    CHECK(&r, st == WEFT_OK, "endpoint table: %s", weft_last_error());
    for (double until = harness_now_s() + WAIT_NS * 1e-9; !atomic_load(&sh->pids_ready);) {
        bail_if_sibling_failed(&r);
        CHECK(&r, harness_now_s() < until, "the parent did not publish the ranks' pids");
        usleep(100);
    }
    job->fn(&r);
    barrier(&r); /* nobody tears down while a peer may still need it */
    ops->ep_release(r.ep);
    weft__ucx_context_put(r.ctx);
    return 0;
}

/* ------------------------------------------------------------ parent side */

/* Fork nranks children running fn with UCX_TLS=tls (NULL: UCX's default),
 * wait for them, and assert that each exited cleanly or was killed by the
 * scenario. Returns the mapping (unmap with ranks_done). */
shared_t *run_ranks(int nranks, const char *tls, scenario_fn fn)
{
    shared_t *sh = harness_shared(sizeof(*sh));
    job_t job = {.sh = sh, .tls = tls, .fn = fn};
    harness_procs_t procs;
    int *status = procs.wstatus;

    cr_assert_not_null(sh);
    cr_assert_leq(nranks, MAX_RANKS);
    harness_barrier_init(&sh->barrier, nranks);
    sh->nranks = nranks;
    cr_assert_eq(harness_fork(&procs, 0, nranks, child_main, &job), 0, "fork failed");
    memcpy(sh->pids, procs.pid, sizeof(sh->pids));
    atomic_store(&sh->pids_ready, 1);
    if (harness_reap(&procs, harness_now_s() + CHILDREN_NS * 1e-9) > 0) {
        cr_assert_fail("ranks still running after %.0f s (tls %s): %s %s %s %s", CHILDREN_NS / 1e9,
                       tls ? tls : "default", sh->error[0], sh->error[1], sh->error[2],
                       sh->error[3]);
    }
    for (int r = 0; r < nranks; r++) {
        if (sh->error[r][0] != '\0') {
            cr_log_error("%s", sh->error[r]);
        }
    }
    for (int r = 0; r < nranks; r++) {
        if (sh->killed[r]) {
            cr_assert(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL,
                      "rank %d should have been killed", r);
            continue;
        }
        cr_assert(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0, "rank %d (tls %s) %s %d: %s",
                  r, tls ? tls : "default", WIFEXITED(status[r]) ? "exited with" : "died of signal",
                  WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : WTERMSIG(status[r]),
                  sh->error[r][0] ? sh->error[r] : "(see the errors logged above)");
    }
    return sh;
}

void ranks_done(shared_t *sh)
{
    munmap(sh, sizeof(*sh));
}

void run(int nranks, const char *tls, scenario_fn fn)
{
    ranks_done(run_ranks(nranks, tls, fn));
}
