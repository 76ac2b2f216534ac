/*
 * weft between real processes on one node's shared memory
 * (tests/runtime/multiproc.h explains the job): the segment mapped and
 * unlinked, a killed or stalled peer inside a shared-memory allreduce, and
 * the collectives on two virtual nodes of two processes.
 */
#include "tests/runtime/multiproc.h"
#include "coll/coll.h"

#include <stdio.h>
#include <string.h>

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
/* Counts this rank in *count; where wait, waits until want ranks are counted (at most
 * `seconds`). */
static void arrive(atomic_int *count, int want, int wait, double seconds)
{
    atomic_fetch_add(count, 1);
    for (double until = harness_now_s() + seconds;
         wait && atomic_load(count) < want && harness_now_s() < until;) {
        harness_sleep_s(0.001);
    }
}

/* A survivor of a killed rank waits (5 s at most) until every survivor saw the failure: none
 * leaves before, closing its own connections (its bootstrap one among them), which the others
 * would hear of as another failure. */
static void survivors_settle(rank_ctx_t *r)
{
    arrive(&r->sh->settled, r->nranks - 1, 1, 5.0);
}

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
    survivors_settle(r);
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
 * shared-memory step and rank 1 as the one waited for. The first rank whose
 * deadline passes tells the others (comm/comm.c's notice): a rank that
 * entered the call later may learn of the timeout from that notice before
 * its own deadline, and then its error and its log line carry the other
 * rank's report ("rank 3 reported: ... waiting for rank(s) 1"). At least one
 * rank must have found the timeout itself. With delay_rank >= 0 that rank
 * enters the call half a second after the others, so it is told.
 */
static int stalled_delay_rank = -1;

static void shm_stalled_scenario(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    float buf[1024];
    char log[8192];
    capture_t cap;
    const char *err;
    double t0, t1;
    int told;
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
    if (r->rank == stalled_delay_rank) {
        harness_sleep_s(0.5);
    }
    capture_start(r, &cap);
    t0 = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, 1024, WEFT_FLOAT32, WEFT_SUM, r->comm);
    t1 = harness_now_s();
    err = weft_last_error();
    capture_end(&cap, log, sizeof(log));
    told = strstr(err, " reported: ") != NULL;
    s->st[0] = st;
    s->val[0] = t1 - t0;
    s->val[1] = told;
    note(r, "%s", err);
    /* stay alive until every waiting rank reached its own deadline: a rank
     * that exits earlier is, rightly, a dead peer to the ones still waiting */
    harness_sleep_s(1.5);
    CHECK(r, st == WEFT_ERR_TIMEOUT,
          "shm allreduce returned %s after %.2f s (expected WEFT_ERR_TIMEOUT): %s",
          weft_status_string(st), t1 - t0, err);
    CHECK(r, (told || t1 - t0 >= 0.9) && t1 - t0 <= 3.0,
          "WEFT_TIMEOUT=1 but the shm allreduce timed out after %.3f s (%s)", t1 - t0,
          told ? "told by a peer" : "found here");
    CHECK(r, r->rank != stalled_delay_rank || told,
          "rank %d entered half a second late and was not told by a peer: %s", r->rank, err);
    CHECK(r, strstr(err, "allreduce") != NULL && strstr(err, "(shm)") != NULL,
          "the error does not name the shm allreduce: %s", err);
    CHECK(r, strstr(err, "shared memory step") != NULL,
          "the error does not name the shared-memory step: %s", err);
    CHECK(r, strstr(err, "waiting for rank(s) 1") != NULL,
          "the error does not name rank 1 as the one waited for: %s", err);
    CHECK(r, strstr(log, "timed out") != NULL && strstr(log, "waiting for rank(s) 1") != NULL,
          "rank %d logged no line naming rank 1 as the one waited for; its log: %s", r->rank, log);
}

static void run_shm_stalled(int delay_rank)
{
    job_opts_t o = {.nranks = 4,
                    .timeout = "1",
                    .tune = SHM_TUNE,
                    .scenario = shm_stalled_scenario,
                    .expect_killed = -1,
                    .limit_s = 15};
    shared_t *sh;
    int found = 0;

    stalled_delay_rank = delay_rank; /* the ranks are forked from here */
    sh = run_job(&o);
    for (int q = 0; q < o.nranks; q++) {
        if (q != 1) {
            found += sh->slot[q].val[1] == 0;
            fprintf(stderr,
                    "test_multiproc: shm stalled rank: rank %d timed out after %.3f s (%s): %s\n",
                    q, sh->slot[q].val[0], sh->slot[q].val[1] ? "told" : "found", sh->slot[q].note);
        }
    }
    cr_assert(found >= 1, "no rank found the timeout itself (every one was told by a peer)");
}

Test(multiproc, shm_stalled_rank_times_out, .timeout = 30)
{
    run_shm_stalled(-1);
}

/* rank 0 enters late: the notice of rank 2's or 3's timeout ends its call,
 * and its log says why */
Test(multiproc, shm_stalled_rank_late_rank_is_told, .timeout = 30)
{
    run_shm_stalled(0);
}

/*
 * A nonblocking allreduce whose request is freed unfinished (weft_request_free)
 * finishes on its own; a blocking collective of the same communicator
 * started after it returns only once it finished on this rank, so a caller
 * that synchronizes through that collective finds the freed operation's
 * buffer final. The freed one is large (many rounds through the segment)
 * and the next one small, so without that wait the small one ends first;
 * one rank comes late to each pair, in turn. Rounds alternate a blocking
 * allreduce and a barrier as the collective that follows.
 */
#define FREED_ROUNDS 12
#define FREED_COUNT ((size_t)1 << 20) /* floats: 4 MiB, 16 rounds of the default slots */

static void freed_scenario(rank_ctx_t *r)
{
    float *big = xmalloc(r, FREED_COUNT * sizeof(float));
    float small[3];

    for (int it = 0; it < FREED_ROUNDS; it++) {
        weft_request_t req;

        stage(r, "freed allreduce %d", it);
        shm_fill(big, FREED_COUNT, it, r->rank);
        if (r->rank == it % r->nranks) {
            harness_sleep_s(0.02);
        }
        CHECK_OK(r, weft_iallreduce(WEFT_IN_PLACE, big, FREED_COUNT, WEFT_FLOAT32, WEFT_SUM,
                                    r->comm, &req));
        CHECK_OK(r, weft_request_free(req));
        if (it % 2 == 0) {
            shm_fill(small, 3, 500 + it, r->rank);
            CHECK_OK(r, weft_allreduce(WEFT_IN_PLACE, small, 3, WEFT_FLOAT32, WEFT_SUM, r->comm));
            shm_check(r, small, 3, 500 + it);
        } else {
            CHECK_OK(r, weft_barrier(r->comm));
        }
        shm_check(r, big, FREED_COUNT, it);
    }
    free(big);
}

static void run_freed(const char *tune)
{
    job_opts_t o = {.nranks = 3,
                    .timeout = "20",
                    .tune = tune,
                    .scenario = freed_scenario,
                    .expect_killed = -1,
                    .limit_s = 40};

    run_job(&o);
}

/* through the segment (its rounds keep the order by themselves) */
Test(multiproc, freed_request_final_after_the_next_collective_shm, .timeout = 50)
{
    run_freed(NULL);
}

/* through the transport: the small allreduce and the barrier can end first */
Test(multiproc, freed_request_final_after_the_next_collective, .timeout = 50)
{
    run_freed("allreduce:0-inf:ring,barrier:0-inf:dissemination");
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

/*
 * A rank killed in a pipelined hierarchical allreduce, reduce, allgather or reduce_scatter (2
 * virtual nodes of 2 processes, WEFT_HIER_PIPELINE=64k, WEFT_HIER_LEADER=0: 4 MiB in 64 chunks,
 * each a shm step and a rail collective): one such collective first, right and built pipelined
 * on every rank; then rank PIPE_KILLED_RANK dies 0.2 s into the next (0.2 s after every rank
 * ended the first), and every survivor, on its
 * node and on the other, gets WEFT_ERR_PEER_FAILED from it (each survivor's result needs the dead
 * rank's input: the reduce's root too), long before WEFT_TIMEOUT (60 s).
 */
#define PIPE_KILLED_RANK 3

/* the collective of pipelined_killed_scenario: allreduce, reduce to rank 0, or allgather or
 * reduce_scatter of blocks of SHM_LARGE / nranks floats, all in place */
static weft_coll_kind_t pipe_kind = WEFT_COLL_ALLREDUCE;

static weft_status_t pipe_call(rank_ctx_t *r, float *buf)
{
    size_t block = SHM_LARGE / (size_t)r->nranks;

    switch (pipe_kind) {
    case WEFT_COLL_REDUCE:
        return weft_reduce(r->rank == 0 ? WEFT_IN_PLACE : buf, r->rank == 0 ? buf : NULL, SHM_LARGE,
                           WEFT_FLOAT32, WEFT_SUM, 0, r->comm);
    case WEFT_COLL_ALLGATHER:
        return weft_allgather(WEFT_IN_PLACE, buf, block, WEFT_FLOAT32, r->comm);
    case WEFT_COLL_REDUCE_SCATTER:
        return weft_reduce_scatter(WEFT_IN_PLACE, buf, block, WEFT_FLOAT32, WEFT_SUM, r->comm);
    default:
        return weft_allreduce(WEFT_IN_PLACE, buf, SHM_LARGE, WEFT_FLOAT32, WEFT_SUM, r->comm);
    }
}

/* pipe_call's result with every rank's buffer from shm_fill(.., it, ..) */
static void pipe_check(rank_ctx_t *r, const float *buf, int it)
{
    size_t block = SHM_LARGE / (size_t)r->nranks;

    switch (pipe_kind) {
    case WEFT_COLL_REDUCE:
        if (r->rank == 0) {
            shm_check(r, buf, SHM_LARGE, it);
        }
        return;
    case WEFT_COLL_ALLGATHER: /* block q as rank q filled it */
        for (size_t j = 0; j < block * (size_t)r->nranks; j++) {
            float want = (float)gen(WEFT_FLOAT32, 1000 + (uint64_t)it, (int)(j / block), j);

            CHECK(r, buf[j] == want,
                  "pipelined allgather on rank %d: element %zu is %.9g, not %.9g", r->rank, j,
                  (double)buf[j], (double)want);
        }
        return;
    case WEFT_COLL_REDUCE_SCATTER: /* the sum of this rank's block, at the start */
        for (size_t j = 0; j < block; j++) {
            size_t at = (size_t)r->rank * block + j;
            float want = (float)reduced(WEFT_FLOAT32, WEFT_SUM, 1000 + (uint64_t)it, r->nranks, at);

            CHECK(r, buf[j] == want,
                  "pipelined reduce_scatter on rank %d: element %zu is %.9g, not %.9g", r->rank, j,
                  (double)buf[j], (double)want);
        }
        return;
    default:
        shm_check(r, buf, SHM_LARGE, it);
    }
}

static void pipelined_killed_scenario(rank_ctx_t *r)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    float *buf = xmalloc(r, SHM_LARGE * sizeof(float));
    unsigned long before = weft__hier_pipelined_builds();
    const char *name = weft__coll_kind_name(pipe_kind);
    weft_status_t st;
    double t0, t1;

    stage(r, "pipelined %s, every rank alive", name);
    shm_fill(buf, SHM_LARGE, 0, r->rank);
    CHECK_OK(r, pipe_call(r, buf));
    pipe_check(r, buf, 0);
    CHECK(r, weft__hier_pipelined_builds() > before,
          "rank %d: the hierarchical %s was not built pipelined", r->rank, name);
    /* the killed rank not before every rank ended the first call (a reduce's sender ends before
     * its root): a rank that sees a peer die fails whatever it runs */
    stage(r, "first call ended, waiting for the others' if rank %d", PIPE_KILLED_RANK);
    arrive(&r->sh->arrived, r->nranks, r->rank == PIPE_KILLED_RANK, 20.0);
    if (r->rank == PIPE_KILLED_RANK) {
        stage(r, "sleeping, then SIGKILL");
        harness_sleep_s(0.2);
        r->sh->kill_time = harness_now_s();
        raise(SIGKILL);
        _exit(4); /* not reached */
    }
    shm_fill(buf, SHM_LARGE, 1, r->rank);
    stage(r, "pipelined %s while rank %d dies", name, PIPE_KILLED_RANK);
    t0 = harness_now_s();
    st = pipe_call(r, buf);
    t1 = harness_now_s();
    s->st[0] = st;
    s->val[0] = t1 - t0;
    s->val[1] = t1 - r->sh->kill_time;
    note(r, "%s", weft_last_error());
    survivors_settle(r);
    CHECK(r, st == WEFT_ERR_PEER_FAILED,
          "pipelined %s with rank %d killed returned %s after %.2f s (expected "
          "WEFT_ERR_PEER_FAILED): %s",
          name, PIPE_KILLED_RANK, weft_status_string(st), t1 - t0, s->note);
    CHECK(r, r->sh->kill_time > 0 && t1 - r->sh->kill_time < 15.0,
          "the failure of rank %d was reported %.2f s after it died (%.2f s in the call)",
          PIPE_KILLED_RANK, t1 - r->sh->kill_time, t1 - t0);
    free(buf);
}

static void run_pipelined_killed(weft_coll_kind_t kind, const char *tune)
{
    job_opts_t o = {.nranks = 4,
                    .timeout = "60",
                    .tune = tune,
                    .rpn = "2",
                    /* the sliced form, whatever the model thinks of 64 chunks here */
                    .env = {"WEFT_HIER_PIPELINE", "64k", "WEFT_HIER_LEADER", "0"},
                    .scenario = pipelined_killed_scenario,
                    .expect_killed = PIPE_KILLED_RANK,
                    .limit_s = 30};
    shared_t *sh;

    pipe_kind = kind;
    sh = run_job(&o);
    pipe_kind = WEFT_COLL_ALLREDUCE;
    for (int q = 0; q < o.nranks; q++) {
        if (q != PIPE_KILLED_RANK) {
            fprintf(stderr,
                    "test_multiproc: pipelined hier %s, killed peer: rank %d got %s %.3f s after "
                    "the kill (%.3f s in the call): %s\n",
                    weft__coll_kind_name(kind), q, weft_status_string(sh->slot[q].st[0]),
                    sh->slot[q].val[1], sh->slot[q].val[0], sh->slot[q].note);
        }
    }
}

Test(multiproc, hier_pipelined_killed_peer_is_reported, .timeout = 40)
{
    run_pipelined_killed(WEFT_COLL_ALLREDUCE, "allreduce:0-inf:hier");
}

Test(multiproc, hier_pipelined_reduce_killed_peer_is_reported, .timeout = 40)
{
    run_pipelined_killed(WEFT_COLL_REDUCE, "reduce:0-inf:hier");
}

Test(multiproc, hier_pipelined_allgather_killed_peer_is_reported, .timeout = 40)
{
    run_pipelined_killed(WEFT_COLL_ALLGATHER, "allgather:0-inf:hier");
}

Test(multiproc, hier_pipelined_reduce_scatter_killed_peer_is_reported, .timeout = 40)
{
    run_pipelined_killed(WEFT_COLL_REDUCE_SCATTER, "reduce_scatter:0-inf:hier");
}
