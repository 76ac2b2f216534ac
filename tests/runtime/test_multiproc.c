/*
 * weft between real processes (tests/runtime/multiproc.h explains the job):
 * correct results at 1..4 ranks over UCX's default and TCP transports, a
 * unique id from the environment, a killed peer, a stalled rank, an abort
 * from another thread, bad bootstrap input. The shared-memory and
 * virtual-node cases are in test_multiproc_shm.c.
 */
#include "tests/runtime/multiproc.h"

#include <math.h>

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
int64_t gen(weft_dtype_t dt, uint64_t seed, int q, size_t j)
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
int64_t reduced(weft_dtype_t dt, weft_op_t op, uint64_t seed, int n, size_t j)
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

void coll_scenario(rank_ctx_t *r)
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

/* ------------------------------------- receives from any source over UCX */

/* Rank 0 takes ANY_K messages from every other rank through
 * WEFT_ANY_SOURCE receives: each reported sender is the message's, and
 * one sender's messages arrive in send order. Then messages of several
 * fragments (WEFT_STAGE_FRAG=64k, set by the test: FRAG_N elements are 4
 * fragments): FRAG_K from every other rank, taken by receives from any
 * source with two receives from named ranks among them (one posted before
 * every receive from any source, one after the first), so that the rest of
 * two messages of one sender must go to the receives whose first fragments
 * they follow. Every element names its sender, message and index. */
enum { ANY_K = 4, ANY_N = 300, FRAG_K = 3, FRAG_N = 200 * 1024 / 8 + 1 };

/* Receives from any source (and from named ranks) in posting order: their
 * senders' messages in send order, each element as sent. */
static void check_any_order(rank_ctx_t *r, const int64_t *in, size_t len, weft_request_t *rr, int n,
                            int k)
{
    int next[MAX_RANKS] = {0}, src;

    for (int i = 0; i < n; i++) {
        const int64_t *v = in + (size_t)i * len;

        CHECK_OK(r, weft_request_source(rr[i], &src));
        CHECK(r, src >= 1 && src < r->nranks, "receive %d: source %d", i, src);
        for (size_t j = 0; j < len; j++) {
            CHECK(r,
                  v[j] == (int64_t)src * 100000000 + (int64_t)next[src] * (int64_t)len + (int64_t)j,
                  "receive %d (source %d): element %zu is %lld, want message %d's", i, src, j,
                  (long long)v[j], next[src]);
        }
        next[src]++;
        weft_request_free(rr[i]);
    }
    for (int q = 1; q < r->nranks; q++) {
        CHECK(r, next[q] == k, "%d of %d messages from rank %d", next[q], k, q);
    }
}

static void any_send(rank_ctx_t *r, int k, size_t len, int tag)
{
    int64_t *v = xmalloc(r, len * sizeof(*v));

    for (int m = 0; m < k; m++) {
        for (size_t j = 0; j < len; j++) {
            v[j] = (int64_t)r->rank * 100000000 + (int64_t)m * (int64_t)len + (int64_t)j;
        }
        stage(r, "send %d of %zu elements (tag %d) to rank 0", m, len, tag);
        CHECK_OK(r, weft_send(v, len, WEFT_INT64, 0, tag, r->comm));
    }
    free(v);
}

static void any_source_scenario(rank_ctx_t *r)
{
    if (r->rank != 0) {
        any_send(r, ANY_K, ANY_N, 21);
        any_send(r, FRAG_K, FRAG_N, 22);
    } else {
        int n = (r->nranks - 1) * ANY_K, nf = (r->nranks - 1) * FRAG_K;
        int64_t *in = xmalloc(r, (size_t)nf * FRAG_N * sizeof(*in));
        weft_request_t *rr = xmalloc(r, (size_t)(n > nf ? n : nf) * sizeof(*rr));

        stage(r, "post %d receives from any source", n);
        for (int i = 0; i < n; i++) {
            CHECK_OK(r, weft_irecv(in + (size_t)i * ANY_N, ANY_N, WEFT_INT64, WEFT_ANY_SOURCE, 21,
                                   r->comm, &rr[i]));
        }
        CHECK_OK(r, weft_waitall(n, rr));
        check_any_order(r, in, ANY_N, rr, n, ANY_K);
        stage(r, "post %d receives of %d elements, from any source and two named ranks", nf,
              FRAG_N);
        for (int i = 0; i < nf; i++) {
            /* receive 0 from rank 1, receive 2 from the last rank */
            int peer = i == 0 ? 1 : i == 2 && r->nranks > 2 ? r->nranks - 1 : WEFT_ANY_SOURCE;

            CHECK_OK(r, weft_irecv(in + (size_t)i * FRAG_N, FRAG_N, WEFT_INT64, peer, 22, r->comm,
                                   &rr[i]));
        }
        CHECK_OK(r, weft_waitall(nf, rr));
        check_any_order(r, in, FRAG_N, rr, nf, FRAG_K);
        free(rr);
        free(in);
    }
    stage(r, "allreduce after");
    allreduce_ok(r, 1000, 31);
}

Test(multiproc, any_source_receives, .timeout = 30)
{
    job_opts_t o = {.nranks = 4,
                    .timeout = "15",
                    .frag = "64k",
                    .scenario = any_source_scenario,
                    .expect_killed = -1,
                    .limit_s = 25};

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

/* An allreduce on comm that rank 1 never joins: its status and time (start and
 * end in *t0_p, *t1_p) in this rank's slot and its message in the note;
 * weft_last_error still holds the message. */
static weft_status_t timed_allreduce(rank_ctx_t *r, weft_comm_t comm, float *buf, size_t n,
                                     double *t0_p, double *t1_p)
{
    rank_slot_t *s = &r->sh->slot[r->rank];
    weft_status_t st;

    *t0_p = harness_now_s();
    st = weft_allreduce(WEFT_IN_PLACE, buf, n, WEFT_FLOAT32, WEFT_SUM, comm);
    *t1_p = harness_now_s();
    s->st[0] = st;
    s->val[0] = *t1_p - *t0_p;
    note(r, "%s", weft_last_error());
    return st;
}

static void stalled_scenario(rank_ctx_t *r)
{
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
    st = timed_allreduce(r, r->comm, buf, 1024, &t0, &t1);
    err = weft_last_error();
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

/* weft_comm_set_timeout: a communicator's own deadline beats WEFT_TIMEOUT (60 s
 * here), a duplicate made after it inherits it, bad values are refused. */
static void comm_timeout_scenario(rank_ctx_t *r)
{
    float buf[16] = {0};
    weft_comm_t dup = NULL;
    const char *err;
    double t0, t1;
    weft_status_t st;

    if (r->rank == 0) {
        CHECK(r, weft_comm_set_timeout(r->comm, -1.0) == WEFT_ERR_INVALID_ARG,
              "a negative timeout was accepted");
        CHECK(r, weft_comm_set_timeout(r->comm, NAN) == WEFT_ERR_INVALID_ARG,
              "a NaN timeout was accepted");
        CHECK(r, weft_comm_set_timeout(NULL, 1.0) == WEFT_ERR_INVALID_ARG,
              "a NULL communicator was accepted");
        CHECK(r, weft_comm_set_timeout(r->comm, 1.0) == WEFT_OK, "set_timeout: %s",
              weft_last_error());
    }
    stage(r, "dup");
    st = weft_comm_dup(r->comm, &dup);
    CHECK(r, st == WEFT_OK, "dup: %s", weft_last_error());
    if (st != WEFT_OK) {
        return;
    }
    if (r->rank == 1) {
        stage(r, "sleeping instead of the allreduce");
        harness_sleep_s(5.0);
        weft_comm_destroy(dup);
        return;
    }
    stage(r, "allreduce on the duplicate without rank 1");
    st = timed_allreduce(r, dup, buf, 16, &t0, &t1);
    err = weft_last_error();
    CHECK(r, st == WEFT_ERR_TIMEOUT, "allreduce returned %s after %.2f s: %s",
          weft_status_string(st), t1 - t0, err);
    CHECK(r, t1 - t0 >= 0.9 && t1 - t0 <= 3.5,
          "the communicator's timeout is 1 s (WEFT_TIMEOUT 60) but the allreduce ended after "
          "%.3f s",
          t1 - t0);
    weft_comm_destroy(dup);
}

Test(multiproc, comm_timeout_overrides_weft_timeout, .timeout = 40)
{
    job_opts_t o = {.nranks = 2,
                    .timeout = "60",
                    .scenario = comm_timeout_scenario,
                    .expect_killed = -1,
                    .limit_s = 25};
    shared_t *sh = run_job(&o);

    cr_log_info("comm timeout: allreduce ended after %.3f s: %s", sh->slot[0].val[0],
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
