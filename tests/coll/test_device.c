/*
 * Every collective on emu buffers among in-process ranks, in its three
 * forms: blocking, nonblocking (weft_i<collective> then weft_wait) and
 * stream-ordered (weft_<collective>_enqueue on an emu stream, then
 * weft_stream_synchronize). Rank counts 1..16, counts 0, 1, odd and one
 * larger than a page, in place in
 * every form MPI defines, dtypes and ops rotating over int, float and half
 * classes (tests/coll/device_data.h); some enqueued cases use host buffers
 * on the emu stream. Also with shared memory off (point-to-point
 * algorithms staging through the loop transport's device tables) and on
 * virtual nodes (hierarchical algorithms).
 *
 * Results are checked element by element against references computed by
 * the test; send buffers must be unchanged, gaps between v-collective
 * blocks and guard bytes after every buffer untouched. Ranks keep calling
 * every collective after a failed check (so nobody hangs), record the first
 * failure, and wait for each other before freeing buffers.
 */
#include <criterion/criterion.h>

#include "coll/coll.h"
#include "runtime/config.h"
#include "runtime/thread_world.h"
#include "tests/coll/device_data.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 16
#define LARGE_COUNT 4099

enum { M_BLOCK, M_NB, M_ENQ, M_COUNT };
static const char *const mode_names[] = {"blocking", "nonblocking", "enqueue"};

typedef struct tcase {
    weft_coll_kind_t kind;
    int mode;
    int ci;      /* dd_combos index */
    size_t n;    /* count (per rank block for the per-rank collectives) */
    int inplace; /* 0 no; 1 WEFT_IN_PLACE; 2 the aliasing form (sendbuf == recvbuf ...) */
    int root;
    int host; /* host buffers (on the emu stream when enqueued) */
} tcase_t;

typedef struct shared {
    int p;
    const tcase_t *cases;
    int ncases;
    pthread_barrier_t barrier;
    atomic_int failures;
    atomic_long checked;
    pthread_mutex_t lock;
    char first_failure[768];
} shared_t;

static void fail(shared_t *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(shared_t *sh, const char *fmt, ...)
{
    va_list ap;

    if (atomic_fetch_add(&sh->failures, 1) == 0) {
        pthread_mutex_lock(&sh->lock);
        va_start(ap, fmt);
        vsnprintf(sh->first_failure, sizeof(sh->first_failure), fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&sh->lock);
    }
}

/* Count of rank b's block in the v-collectives (zeros included). */
static size_t vcount(size_t n, int b)
{
    return n == 0 ? 0 : (n + 3 * (size_t)b) % (n + 2);
}

/* alltoallv: elements rank a sends to rank b (symmetric for in place). */
static size_t a2av_count(size_t n, int a, int b, int inplace)
{
    return n == 0 ? 0 : (n + (size_t)a + (inplace ? (size_t)b : 2 * (size_t)b)) % (n + 1);
}

/* Finish what the mode started: wait for the request or the stream. */
static weft_status_t finish(weft_status_t s, int mode, weft_request_t *req, weft_stream_t stream)
{
    if (s != WEFT_OK) {
        return s;
    }
    if (mode == M_NB) {
        s = weft_wait(*req);
        if (weft_request_free(*req) != WEFT_OK && s == WEFT_OK) {
            s = WEFT_ERR_INTERNAL;
        }
    } else if (mode == M_ENQ) {
        s = weft_stream_synchronize(stream);
    }
    return s;
}

/* One collective in the case's form: weft_<fn>, weft_i<fn> or weft_<fn>_enqueue
 * (the request is read through a pointer: it is written by the call). */
#define CALL3(fn, ...)                                                                             \
    finish(tc->mode == M_BLOCK ? weft_##fn(__VA_ARGS__)                                            \
           : tc->mode == M_NB  ? weft_i##fn(__VA_ARGS__, &req)                                     \
                               : weft_##fn##_enqueue(__VA_ARGS__, stream),                         \
           tc->mode, &req, stream)

static void run_case(shared_t *sh, weft_comm_t comm, int r, weft_stream_t stream,
                     const tcase_t *tc)
{
    const int p = sh->p, ci = tc->ci, root = tc->root, emu = !tc->host;
    const weft_dtype_t dt = dd_combos[ci].dtype;
    const weft_op_t op = dd_combos[ci].op;
    const size_t es = weft_dtype_size(dt), n = tc->n;
    size_t counts[MAX_RANKS], displs[MAX_RANKS], scounts[MAX_RANKS], sdispls[MAX_RANKS];
    size_t sbytes = 0, rbytes = 0, total = 0;
    unsigned char *sb = NULL, *rb = NULL;
    const void *sendbuf;
    void *recvbuf;
    weft_request_t req = NULL;
    weft_status_t s = WEFT_OK;
    long bad;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        char msg_[320];                                                                            \
        snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                                 \
        fail(sh, "%s %s p=%d n=%zu %s/%s inplace=%d root=%d %s rank %d: %s",                       \
             weft__coll_kind_name(tc->kind), mode_names[tc->mode], p, n, weft_dtype_name(dt),      \
             weft_op_name(op), tc->inplace, root, emu ? "emu" : "host", r, msg_);                  \
        goto done;                                                                                 \
    } while (0)
#define ALLOC(ptr, bytes)                                                                          \
    do {                                                                                           \
        if (((ptr) = dd_alloc(emu, (bytes))) == NULL) {                                            \
            FAIL("cannot allocate %zu bytes: %s", (size_t)(bytes), weft_last_error());             \
        }                                                                                          \
    } while (0)
#define STATUS_OK()                                                                                \
    do {                                                                                           \
        if (s != WEFT_OK) {                                                                        \
            FAIL("%s (%s)", weft_status_string(s), weft_last_error());                             \
        }                                                                                          \
    } while (0)
#define EXPECT(check, ...)                                                                         \
    do {                                                                                           \
        if ((bad = (check)) >= 0) {                                                                \
            FAIL(__VA_ARGS__);                                                                     \
        }                                                                                          \
    } while (0)

    switch (tc->kind) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE:
        sbytes = rbytes = n * es;
        ALLOC(sb, sbytes);
        dd_fill(ci, r, 0, n, sb);
        recvbuf = NULL;
        if (tc->kind == WEFT_COLL_ALLREDUCE || r == root) {
            ALLOC(rb, rbytes);
            recvbuf = rb;
        }
        sendbuf = sb;
        if (tc->inplace && recvbuf != NULL) {
            memcpy(rb, sb, rbytes);
            sendbuf = tc->inplace == 1 ? WEFT_IN_PLACE : rb;
        }
        if (tc->kind == WEFT_COLL_ALLREDUCE) {
            s = CALL3(allreduce, sendbuf, recvbuf, n, dt, op, comm);
        } else {
            s = CALL3(reduce, sendbuf, recvbuf, n, dt, op, root, comm);
        }
        STATUS_OK();
        if (recvbuf != NULL) {
            EXPECT(dd_check_reduced(ci, p, 0, n, rb), "element %ld differs from the reference",
                   bad);
        }
        EXPECT(dd_check_values(ci, r, 0, n, sb), "sendbuf element %ld changed", bad);
        break;

    case WEFT_COLL_BCAST:
        rbytes = n * es;
        ALLOC(rb, rbytes);
        if (r == root) {
            dd_fill(ci, root, 0, n, rb);
        }
        s = CALL3(bcast, rb, n, dt, root, comm);
        STATUS_OK();
        EXPECT(dd_check_values(ci, root, 0, n, rb), "element %ld differs from root's", bad);
        break;

    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_GATHER:
        sbytes = n * es;
        ALLOC(sb, sbytes);
        dd_fill(ci, r, 0, n, sb);
        sendbuf = sb;
        recvbuf = NULL;
        if (tc->kind == WEFT_COLL_ALLGATHER || r == root) {
            rbytes = (size_t)p * n * es;
            ALLOC(rb, rbytes);
            recvbuf = rb;
            if (tc->inplace) {
                memcpy(rb + (size_t)r * n * es, sb, sbytes);
                sendbuf = tc->inplace == 1 ? WEFT_IN_PLACE : rb + (size_t)r * n * es;
            }
        }
        if (tc->kind == WEFT_COLL_ALLGATHER) {
            s = CALL3(allgather, sendbuf, recvbuf, n, dt, comm);
        } else {
            s = CALL3(gather, sendbuf, recvbuf, n, dt, root, comm);
        }
        STATUS_OK();
        for (int b = 0; b < p && recvbuf != NULL; b++) {
            EXPECT(dd_check_values(ci, b, 0, n, rb + (size_t)b * n * es),
                   "element %ld of rank %d's block differs", bad, b);
        }
        EXPECT(dd_check_values(ci, r, 0, n, sb), "sendbuf element %ld changed", bad);
        break;

    case WEFT_COLL_SCATTER:
        sendbuf = NULL;
        if (r == root) {
            sbytes = (size_t)p * n * es;
            ALLOC(sb, sbytes);
            dd_fill(ci, root, 0, (size_t)p * n, sb);
            sendbuf = sb;
        }
        if (r == root && tc->inplace) {
            recvbuf = sb + (size_t)root * n * es;
        } else {
            rbytes = n * es;
            ALLOC(rb, rbytes);
            recvbuf = rb;
        }
        s = CALL3(scatter, sendbuf, recvbuf, n, dt, root, comm);
        STATUS_OK();
        EXPECT(dd_check_values(ci, root, (size_t)r * n, n, recvbuf),
               "element %ld of the received block differs", bad);
        if (r == root) {
            EXPECT(dd_check_values(ci, root, 0, (size_t)p * n, sb), "sendbuf element %ld changed",
                   bad);
        }
        break;

    case WEFT_COLL_REDUCE_SCATTER:
        sbytes = (size_t)p * n * es;
        ALLOC(sb, sbytes);
        dd_fill(ci, r, 0, (size_t)p * n, sb);
        sendbuf = sb;
        rbytes = tc->inplace ? sbytes : n * es;
        ALLOC(rb, rbytes);
        if (tc->inplace) {
            memcpy(rb, sb, sbytes);
            sendbuf = WEFT_IN_PLACE;
        }
        s = CALL3(reduce_scatter, sendbuf, rb, n, dt, op, comm);
        STATUS_OK();
        EXPECT(dd_check_reduced(ci, p, (size_t)r * n, n, rb),
               "element %ld differs from the reference", bad);
        EXPECT(dd_check_values(ci, r, 0, (size_t)p * n, sb), "sendbuf element %ld changed", bad);
        break;

    case WEFT_COLL_REDUCE_SCATTER_V: {
        size_t off = 0;

        for (int b = 0; b < p; b++) {
            counts[b] = vcount(n, b);
            displs[b] = total;
            total += counts[b];
        }
        off = displs[r];
        sbytes = total * es;
        ALLOC(sb, sbytes);
        dd_fill(ci, r, 0, total, sb);
        sendbuf = sb;
        rbytes = tc->inplace ? sbytes : counts[r] * es;
        ALLOC(rb, rbytes);
        if (tc->inplace) {
            memcpy(rb, sb, sbytes);
            sendbuf = WEFT_IN_PLACE;
        }
        s = CALL3(reduce_scatter_v, sendbuf, rb, counts, dt, op, comm);
        STATUS_OK();
        EXPECT(dd_check_reduced(ci, p, off, counts[r], rb),
               "element %ld differs from the reference", bad);
        EXPECT(dd_check_values(ci, r, 0, total, sb), "sendbuf element %ld changed", bad);
        break;
    }

    case WEFT_COLL_ALLGATHERV:
        /* blocks in rank order, one untouched element after each */
        for (int b = 0; b < p; b++) {
            counts[b] = vcount(n, b);
            displs[b] = total;
            total += counts[b] + 1;
        }
        sbytes = counts[r] * es;
        ALLOC(sb, sbytes);
        dd_fill(ci, r, 0, counts[r], sb);
        rbytes = total * es;
        ALLOC(rb, rbytes);
        sendbuf = sb;
        if (tc->inplace) {
            memcpy(rb + displs[r] * es, sb, sbytes);
            sendbuf = WEFT_IN_PLACE;
        }
        s = CALL3(allgatherv, sendbuf, rb, counts[r], counts, displs, dt, comm);
        STATUS_OK();
        for (int b = 0; b < p; b++) {
            EXPECT(dd_check_values(ci, b, 0, counts[b], rb + displs[b] * es),
                   "element %ld of rank %d's block differs", bad, b);
            EXPECT(dd_check_fill(rb + (displs[b] + counts[b]) * es, es),
                   "the gap after rank %d's block was written", b);
        }
        EXPECT(dd_check_values(ci, r, 0, counts[r], sb), "sendbuf element %ld changed", bad);
        break;

    case WEFT_COLL_ALLTOALL:
        sbytes = rbytes = (size_t)p * n * es;
        ALLOC(sb, sbytes);
        ALLOC(rb, rbytes);
        dd_fill(ci, r, 0, (size_t)p * n, sb); /* block b: elements b*n.., for rank b */
        sendbuf = sb;
        if (tc->inplace) {
            memcpy(rb, sb, sbytes);
            sendbuf = WEFT_IN_PLACE;
        }
        s = CALL3(alltoall, sendbuf, rb, n, dt, comm);
        STATUS_OK();
        for (int b = 0; b < p; b++) {
            EXPECT(dd_check_values(ci, b, (size_t)r * n, n, rb + (size_t)b * n * es),
                   "element %ld of the block from rank %d differs", bad, b);
        }
        EXPECT(dd_check_values(ci, r, 0, (size_t)p * n, sb), "sendbuf element %ld changed", bad);
        break;

    case WEFT_COLL_ALLTOALLV: {
        size_t stotal = 0;

        /* send blocks in rank order, receive blocks in reverse order, gaps of one */
        for (int b = 0; b < p; b++) {
            scounts[b] = a2av_count(n, r, b, tc->inplace);
            sdispls[b] = stotal;
            stotal += scounts[b] + 1;
        }
        for (int b = p - 1; b >= 0; b--) {
            counts[b] = a2av_count(n, b, r, tc->inplace);
            displs[b] = total;
            total += counts[b] + 1;
        }
        sbytes = stotal * es;
        rbytes = total * es;
        ALLOC(sb, sbytes);
        ALLOC(rb, rbytes);
        /* the block for rank b is elements b*(n+1).. of this rank's data */
        for (int b = 0; b < p; b++) {
            dd_fill(ci, r, (size_t)b * (n + 1), scounts[b], sb + sdispls[b] * es);
            if (tc->inplace) {
                dd_fill(ci, r, (size_t)b * (n + 1), counts[b], rb + displs[b] * es);
            }
        }
        if (tc->inplace) {
            s = CALL3(alltoallv, WEFT_IN_PLACE, rb, NULL, NULL, counts, displs, dt, comm);
        } else {
            s = CALL3(alltoallv, sb, rb, scounts, sdispls, counts, displs, dt, comm);
        }
        STATUS_OK();
        for (int b = 0; b < p; b++) {
            EXPECT(dd_check_values(ci, b, (size_t)r * (n + 1), counts[b], rb + displs[b] * es),
                   "element %ld of the block from rank %d differs", bad, b);
            EXPECT(dd_check_fill(rb + (displs[b] + counts[b]) * es, es),
                   "the gap after the block from rank %d was written", b);
        }
        break;
    }

    default: /* barrier */
        s = CALL3(barrier, comm);
        STATUS_OK();
        break;
    }
    if (!dd_guard_ok(sb, sbytes) || !dd_guard_ok(rb, rbytes)) {
        FAIL("wrote past the end of a buffer");
    }
    atomic_fetch_add(&sh->checked, 1);
done:
#undef FAIL
#undef ALLOC
#undef STATUS_OK
#undef EXPECT
    /* no rank frees buffers a late peer could still be reading */
    pthread_barrier_wait(&sh->barrier);
    dd_free(sb);
    dd_free(rb);
}

static void rank_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_stream_t stream = NULL;

    if (weft_stream_create(WEFT_MEM_EMU, &stream) != WEFT_OK) {
        fail(sh, "rank %d: weft_stream_create: %s", rank, weft_last_error());
    }
    for (int i = 0; i < sh->ncases; i++) {
        if (stream == NULL && sh->cases[i].mode == M_ENQ) {
            continue;
        }
        run_case(sh, comm, rank, stream, &sh->cases[i]);
    }
    if (stream != NULL && weft_stream_destroy(stream) != WEFT_OK) {
        fail(sh, "rank %d: weft_stream_destroy: %s", rank, weft_last_error());
    }
}

static int has_inplace2(weft_coll_kind_t kind)
{
    return kind == WEFT_COLL_ALLREDUCE || kind == WEFT_COLL_REDUCE ||
           kind == WEFT_COLL_ALLGATHER || kind == WEFT_COLL_GATHER;
}

/*
 * The cases of a world of p ranks: every collective x form x {count 0 or 1,
 * odd out of place, odd in place} (+ LARGE_COUNT when large), dtype/op,
 * root and in-place form rotating with p so that the run covers each.
 */
static int build_cases(int p, int large, tcase_t *cases)
{
    int nc = 0;

    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        for (int m = 0; m < M_COUNT; m++) {
            int nv = k == WEFT_COLL_BARRIER ? 1 : large ? 4 : 3;

            for (int v = 0; v < nv; v++) {
                tcase_t *tc = &cases[nc++];

                tc->kind = (weft_coll_kind_t)k;
                tc->mode = m;
                tc->ci = (p * 5 + k * 3 + m + v * 7) % dd_ncombos;
                tc->n = v == 0 ? (size_t)((p + k + m) % 2) : v == 3 ? LARGE_COUNT
                                                                    : (size_t)(2 * p + 13);
                tc->inplace = v != 2 || k == WEFT_COLL_BCAST ? 0
                              : has_inplace2(tc->kind)      ? 1 + (p + m) % 2
                                                            : 1;
                tc->root = (p - 1 + v * (p / 2 + 1) + m) % p;
                tc->host = m == M_ENQ && (v == 1 || (v == 0 && (p + k) % 2 == 0));
            }
        }
    }
    return nc;
}

static long run_world(int p, int large)
{
    tcase_t cases[WEFT_COLL_KIND_COUNT * M_COUNT * 4];
    shared_t sh = {.p = p, .cases = cases};
    weft_thread_world_opts_t opts = {.nranks = p, .seed = (uint64_t)p * 7919, .max_delay_ns = 0};
    weft_status_t status;

    sh.ncases = build_cases(p, large, cases);
    pthread_barrier_init(&sh.barrier, NULL, (unsigned)p);
    pthread_mutex_init(&sh.lock, NULL);
    status = weft__thread_world_run(&opts, rank_body, &sh);
    cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
    cr_assert_eq(atomic_load(&sh.failures), 0, "%d failure(s) at p=%d; first: %s",
                 atomic_load(&sh.failures), p, sh.first_failure);
    cr_assert_eq(atomic_load(&sh.checked), (long)sh.ncases * p,
                 "only %ld of %ld rank results were checked", atomic_load(&sh.checked),
                 (long)sh.ncases * p);
    pthread_barrier_destroy(&sh.barrier);
    pthread_mutex_destroy(&sh.lock);
    return (long)sh.ncases;
}

/* weft_init with a deadline that turns a hang into a failure. */
static void setup(void)
{
    setenv("WEFT_LOG_LEVEL", "error", 1);
    setenv("WEFT_TIMEOUT", "60", 1);
    unsetenv("WEFT_TUNE");
    unsetenv("WEFT_SHM");
    unsetenv("WEFT_RANKS_PER_NODE");
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
}

static void teardown(void)
{
    weft_finalize();
}

TestSuite(device, .init = setup, .fini = teardown);

static void run_ranks(const int *ps, int nps, const char *what)
{
    long ops = 0;

    for (int i = 0; i < nps; i++) {
        ops += run_world(ps[i], 1);
    }
    fprintf(stderr, "device %s: %ld collectives per rank checked\n", what, ops);
}

Test(device, ranks_1_to_4, .timeout = 240)
{
    const int ps[] = {1, 2, 3, 4};

    run_ranks(ps, 4, "1..4 ranks");
}

Test(device, ranks_5_to_8, .timeout = 240)
{
    const int ps[] = {5, 6, 7, 8};

    run_ranks(ps, 4, "5..8 ranks");
}

Test(device, ranks_9_to_12, .timeout = 240)
{
    const int ps[] = {9, 10, 11, 12};

    run_ranks(ps, 4, "9..12 ranks");
}

Test(device, ranks_13_to_16, .timeout = 240)
{
    const int ps[] = {13, 14, 15, 16};

    run_ranks(ps, 4, "13..16 ranks");
}

/* Point-to-point algorithms only: every byte crosses the loop transport. */
Test(device, without_shared_memory, .timeout = 240)
{
    const int ps[] = {3, 5};

    weft__coll_config.shm = 0;
    run_ranks(ps, 2, "without shared memory");
}

/* Virtual nodes of 2 ranks: the hierarchical algorithms where they apply. */
Test(device, virtual_nodes, .timeout = 240)
{
    const int ps[] = {4, 6};

    weft__runtime_config.ranks_per_node = 2;
    run_ranks(ps, 2, "on virtual nodes of 2 ranks");
}
