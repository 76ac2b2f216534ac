/*
 * Nonblocking collectives and a seeded randomized stress test on in-process
 * ranks with random landing order.
 *
 * Stress: every rank draws the same sequence of operations from a shared
 * seed: collective, count, dtype/op, root, communicator (the world or one of
 * the two halves of a split), blocking or nonblocking. Nonblocking
 * operations stay outstanding for a few steps and are completed in a
 * shuffled order (wait or test loop). Every result is checked against a
 * reference computed from the inputs, which are deterministic per
 * (operation, rank, element).
 *
 * On virtual nodes (WEFT_RANKS_PER_NODE) the default selection runs the
 * shared-memory algorithms on communicators inside one node and the
 * hierarchical ones on communicators of uniform nodes, so the same random
 * sequences interleave shared-memory rounds, hierarchical operations and
 * point-to-point ones; every run asserts which communicators had shared
 * memory and counts the operations the selection sent through it.
 */
#include <criterion/criterion.h>

#include "coll/cost.h"
#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/thread_world.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shared {
    atomic_int failures;
    atomic_int finished;
    atomic_long checked;
    char first[320];
    uint64_t seed;
    int nops;
    int block_halves;      /* split into ranks [0, p/2) and [p/2, p), not even/odd */
    atomic_int world_shm;  /* ranks whose world communicator has shared memory */
    atomic_int half_shm;   /* ranks whose half has it */
    atomic_long via[2][2]; /* [shm, hier][blocking, nonblocking] operations selected */
} shared_t;

static void fail(shared_t *sh, const char *msg)
{
    if (atomic_fetch_add(&sh->failures, 1) == 0) {
        snprintf(sh->first, sizeof(sh->first), "%s", msg);
    }
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* element i of rank r's input to operation k: small, so sums are exact */
static int32_t val(int k, int r, size_t i)
{
    return (int32_t)(mix(((uint64_t)k << 40) ^ ((uint64_t)r << 24) ^ i) % 19) - 9;
}

typedef enum { K_ALLREDUCE, K_RS, K_AG, K_BCAST, K_REDUCE, K_GATHER, K_SCATTER, K_A2A,
               K_BARRIER, K_COUNT } kind_t;
static const char *const kind_names[] = {"allreduce", "reduce_scatter", "allgather", "bcast",
                                         "reduce",    "gather",         "scatter",   "alltoall",
                                         "barrier"};

typedef struct op {
    int k;        /* sequence number (same on every rank) */
    kind_t kind;
    int comm;     /* 0 world, 1 this rank's half */
    size_t count;
    int root;
    weft_op_t rop; /* sum or max on int32, or sum on float32 */
    int is_float;
    int nonblocking;
    int32_t *in, *out;
    weft_request_t req;
} op_t;

static int32_t combine(weft_op_t op, int32_t a, int32_t b)
{
    return op == WEFT_MAX ? (a > b ? a : b) : a + b;
}

/* members[] of the communicator, in its rank order */
static void check_op(shared_t *sh, const op_t *o, int me, int size, const int *members)
{
    char msg[256];
    size_t n = o->count;
    size_t outn = 0;

    switch (o->kind) {
    case K_ALLREDUCE:
    case K_BCAST:
        outn = n;
        break;
    case K_REDUCE:
        outn = me == o->root ? n : 0;
        break;
    case K_RS:
    case K_SCATTER:
        outn = n;
        break;
    case K_GATHER:
        outn = me == o->root ? n * (size_t)size : 0;
        break;
    case K_AG:
    case K_A2A:
        outn = n * (size_t)size;
        break;
    default:
        break;
    }
    for (size_t i = 0; i < outn; i++) {
        int32_t want = 0, got;

        switch (o->kind) {
        case K_ALLREDUCE:
        case K_REDUCE:
        case K_RS: {
            size_t gi = o->kind == K_RS ? (size_t)me * n + i : i;
            for (int r = 0; r < size; r++) {
                int32_t v = val(o->k, members[r], gi);
                want = r == 0 ? v : combine(o->rop, want, v);
            }
            break;
        }
        case K_BCAST:
            want = val(o->k, members[o->root], i);
            break;
        case K_AG:
        case K_GATHER:
            want = val(o->k, members[i / n], i % n);
            break;
        case K_SCATTER:
            want = val(o->k, members[o->root], (size_t)me * n + i);
            break;
        case K_A2A:
            want = val(o->k, members[i / n], (size_t)me * n + i % n);
            break;
        default:
            break;
        }
        if (o->is_float) {
            float f;
            memcpy(&f, &o->out[i], 4);
            got = (int32_t)f;
            if ((float)got != f) {
                got = INT32_MIN;
            }
        } else {
            got = o->out[i];
        }
        if (got != want) {
            snprintf(msg, sizeof(msg), "op %d %s%s comm %d count %zu root %d rank %d: element %zu "
                     "is %d, want %d", o->k, o->nonblocking ? "i" : "", kind_names[o->kind],
                     o->comm, n, o->root, me, i, got, want);
            fail(sh, msg);
            return;
        }
    }
    atomic_fetch_add(&sh->checked, 1);
}

static void fill_input(op_t *o, int world_rank, int me, int size)
{
    size_t inn;

    switch (o->kind) {
    case K_RS:
    case K_A2A:
        inn = o->count * (size_t)size;
        break;
    case K_SCATTER:
        inn = me == o->root ? o->count * (size_t)size : 0;
        break;
    case K_BARRIER:
        inn = 0;
        break;
    default:
        inn = o->count;
    }
    for (size_t i = 0; i < inn; i++) {
        int32_t v = val(o->k, world_rank, i);
        if (o->is_float) {
            float f = (float)v;
            memcpy(&o->in[i], &f, 4);
        } else {
            o->in[i] = v;
        }
    }
    if (o->kind == K_BCAST) {
        memcpy(o->out, o->in, o->count * 4);
    }
}

static weft_status_t start(op_t *o, weft_comm_t c, weft_request_t *req)
{
    weft_dtype_t dt = o->is_float ? WEFT_FLOAT32 : WEFT_INT32;
    size_t n = o->count;

    switch (o->kind) {
    case K_ALLREDUCE:
        return req ? weft_iallreduce(o->in, o->out, n, dt, o->rop, c, req)
                   : weft_allreduce(o->in, o->out, n, dt, o->rop, c);
    case K_RS:
        return req ? weft_ireduce_scatter(o->in, o->out, n, dt, o->rop, c, req)
                   : weft_reduce_scatter(o->in, o->out, n, dt, o->rop, c);
    case K_AG:
        return req ? weft_iallgather(o->in, o->out, n, dt, c, req)
                   : weft_allgather(o->in, o->out, n, dt, c);
    case K_BCAST:
        return req ? weft_ibcast(o->out, n, dt, o->root, c, req)
                   : weft_bcast(o->out, n, dt, o->root, c);
    case K_REDUCE:
        return req ? weft_ireduce(o->in, o->out, n, dt, o->rop, o->root, c, req)
                   : weft_reduce(o->in, o->out, n, dt, o->rop, o->root, c);
    case K_GATHER:
        return req ? weft_igather(o->in, o->out, n, dt, o->root, c, req)
                   : weft_gather(o->in, o->out, n, dt, o->root, c);
    case K_SCATTER:
        return req ? weft_iscatter(o->in, o->out, n, dt, o->root, c, req)
                   : weft_scatter(o->in, o->out, n, dt, o->root, c);
    case K_A2A:
        return req ? weft_ialltoall(o->in, o->out, n, dt, c, req)
                   : weft_alltoall(o->in, o->out, n, dt, c);
    default:
        return req ? weft_ibarrier(c, req) : weft_barrier(c);
    }
}

static const weft_coll_kind_t coll_kind[] = {
    WEFT_COLL_ALLREDUCE, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_ALLGATHER,
    WEFT_COLL_BCAST,     WEFT_COLL_REDUCE,         WEFT_COLL_GATHER,
    WEFT_COLL_SCATTER,   WEFT_COLL_ALLTOALL,       WEFT_COLL_BARRIER};

/* Count o when the selection sends it through shared memory (the same
 * choice weft__coll_start makes: no WEFT_TUNE rule is loaded here). */
static void tally(shared_t *sh, const op_t *o, weft_comm_t c, int csize)
{
    weft_coll_args_t a = {.kind = coll_kind[o->kind], .count = o->count, .esize = 4, .size = csize};
    weft_cost_params_t params;
    const weft_coll_algo_t *algo;

    if (csize < 2) {
        return;
    }
    weft__cost_params(weft__comm_of(c), &params);
    algo = weft__coll_choose(a.kind, weft__coll_bytes(&a), csize, &params, NULL);
    if (algo != NULL && strcmp(algo->name, "shm") == 0) {
        atomic_fetch_add(&sh->via[0][o->nonblocking], 1);
    } else if (algo != NULL && strcmp(algo->name, "hier") == 0) {
        atomic_fetch_add(&sh->via[1][o->nonblocking], 1);
    }
}

#define MAX_OUTSTANDING 6

static int half_of(const shared_t *sh, int rank, int size)
{
    return sh->block_halves ? rank >= size / 2 : rank % 2;
}

static void stress_body(weft_comm_t world, int rank, void *arg)
{
    shared_t *sh = arg;
    int size;
    weft_comm_t half, comms[2];
    int half_members[64], nhalf = 0, world_members[64];
    op_t pending[MAX_OUTSTANDING];
    int npending = 0;
    uint64_t rng = sh->seed; /* the same stream on every rank */
    char msg[256];

    weft_comm_size(world, &size);
    for (int r = 0; r < size; r++) {
        world_members[r] = r;
        if (half_of(sh, r, size) == half_of(sh, rank, size)) {
            half_members[nhalf++] = r;
        }
    }
    if (weft_comm_split(world, half_of(sh, rank, size), rank, &half) != WEFT_OK) {
        fail(sh, "split failed");
        return;
    }
    atomic_fetch_add(&sh->world_shm, weft__comm_of(world)->coll->shm != NULL);
    atomic_fetch_add(&sh->half_shm, weft__comm_of(half)->coll->shm != NULL);
    comms[0] = world;
    comms[1] = half;
    for (int k = 0; k < sh->nops && atomic_load(&sh->failures) == 0; k++) {
        op_t o = {.k = k};
        uint64_t x = mix(rng += 0x9e3779b97f4a7c15ull);
        int csize, me;

        o.kind = (kind_t)(x % K_COUNT);
        o.comm = (int)((x >> 8) % 3 == 0); /* a third on the halves */
        static const size_t counts[] = {0, 1, 3, 17, 257, 1031, 5003};
        o.count = counts[(x >> 12) % 7];
        o.rop = (x >> 20) % 2 ? WEFT_MAX : WEFT_SUM;
        o.is_float = o.rop == WEFT_SUM && (x >> 21) % 2;
        o.nonblocking = (x >> 22) % 2;
        weft_comm_size(comms[o.comm], &csize);
        weft_comm_rank(comms[o.comm], &me);
        o.root = (int)((x >> 24) % (uint64_t)csize);
        o.in = calloc(o.count * (size_t)csize + 1, 4);
        o.out = calloc(o.count * (size_t)csize + 1, 4);
        fill_input(&o, rank, me, csize);
        tally(sh, &o, comms[o.comm], csize);
        weft_status_t st = start(&o, comms[o.comm], o.nonblocking ? &o.req : NULL);
        if (st != WEFT_OK) {
            snprintf(msg, sizeof(msg), "op %d %s start: %s", k, kind_names[o.kind],
                     weft_last_error());
            fail(sh, msg);
            break;
        }
        if (!o.nonblocking) {
            check_op(sh, &o, me, csize, o.comm ? half_members : world_members);
            free(o.in);
            free(o.out);
        } else {
            pending[npending++] = o;
        }
        /* complete outstanding operations in a shuffled order */
        while (npending == MAX_OUTSTANDING || (npending > 0 && (mix(x) >> 30) % 3 == 0) ||
               (npending > 0 && k == sh->nops - 1)) {
            int pick = (int)(mix(x + (uint64_t)npending) % (uint64_t)npending);
            op_t *p = &pending[pick];
            int pc, pme, done = 0;

            weft_comm_size(comms[p->comm], &pc);
            weft_comm_rank(comms[p->comm], &pme);
            switch ((x >> 40) % 2) {
            case 0:
                st = weft_wait(p->req);
                break;
            default:
                do {
                    st = weft_test(p->req, &done);
                } while (st == WEFT_OK && !done);
                break;
            }
            if (st != WEFT_OK) {
                snprintf(msg, sizeof(msg), "op %d %s completion: %s", p->k, kind_names[p->kind],
                         weft_last_error());
                fail(sh, msg);
                return;
            }
            check_op(sh, p, pme, pc, p->comm ? half_members : world_members);
            weft_request_free(p->req);
            free(p->in);
            free(p->out);
            pending[pick] = pending[--npending];
        }
    }
    weft_comm_destroy(half);
    atomic_fetch_add(&sh->finished, 1);
}

static void run_stress(int nranks, uint64_t seed, int nops, uint64_t delay)
{
    shared_t sh = {.seed = seed, .nops = nops};
    weft_thread_world_opts_t opts = {.nranks = nranks, .seed = seed, .max_delay_ns = delay};

    cr_assert_eq(weft__thread_world_run(&opts, stress_body, &sh), WEFT_OK, "%s",
                 weft_last_error());
    cr_assert_eq(atomic_load(&sh.failures), 0, "seed %llu, %d ranks: %s",
                 (unsigned long long)seed, nranks, sh.first);
    cr_assert_eq(atomic_load(&sh.finished), nranks);
    fprintf(stderr, "stress: %d ranks, seed %llu: %d operations, %ld rank results checked\n",
            nranks, (unsigned long long)seed, nops, atomic_load(&sh.checked));
}

Test(stress, mixed_500_ops_several_seeds, .timeout = 600)
{
    cr_assert_eq(weft_init(), WEFT_OK);
    run_stress(4, 1, 500, 0);
    run_stress(5, 2, 500, 0);
    run_stress(7, 3, 500, 20000);
    run_stress(8, 4, 500, 0);
    run_stress(3, 5, 500, 0);
    weft_finalize();
}

/* One stress run on virtual nodes of rpn ranks; world_shm / half_shm: how
 * many ranks must have shared memory on the world and on their half. */
typedef struct node_run {
    int nranks, rpn, block_halves;
    int world_shm, half_shm;
    uint64_t seed, delay;
} node_run_t;

static void run_stress_nodes(const node_run_t *nr, int nops, long via[2][2])
{
    shared_t sh = {.seed = nr->seed, .nops = nops, .block_halves = nr->block_halves};
    weft_thread_world_opts_t opts = {
        .nranks = nr->nranks, .seed = nr->seed, .max_delay_ns = nr->delay};

    weft__runtime_config.ranks_per_node = nr->rpn;
    cr_assert_eq(weft__thread_world_run(&opts, stress_body, &sh), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(atomic_load(&sh.failures), 0, "seed %llu, %d ranks, %d per node: %s",
                 (unsigned long long)nr->seed, nr->nranks, nr->rpn, sh.first);
    cr_assert_eq(atomic_load(&sh.finished), nr->nranks);
    cr_assert_eq(atomic_load(&sh.world_shm), nr->world_shm,
                 "%d ranks, %d per node: %d ranks had shared memory on the world, want %d",
                 nr->nranks, nr->rpn, atomic_load(&sh.world_shm), nr->world_shm);
    cr_assert_eq(atomic_load(&sh.half_shm), nr->half_shm,
                 "%d ranks, %d per node: %d ranks had shared memory on their half, want %d",
                 nr->nranks, nr->rpn, atomic_load(&sh.half_shm), nr->half_shm);
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 2; b++) {
            via[a][b] += atomic_load(&sh.via[a][b]);
        }
    }
    fprintf(stderr,
            "stress on nodes of %d: %d ranks, seed %llu: %d operations, %ld rank results "
            "checked; shm %ld + %ld nonblocking, hier %ld + %ld nonblocking (rank operations)\n",
            nr->rpn, nr->nranks, (unsigned long long)nr->seed, nops, atomic_load(&sh.checked),
            atomic_load(&sh.via[0][0]), atomic_load(&sh.via[0][1]), atomic_load(&sh.via[1][0]),
            atomic_load(&sh.via[1][1]));
}

/*
 * The random sequences on virtual nodes, two seeds each, with one-page
 * slots so that the larger counts take several rounds:
 *   4 ranks, 2 per node: world 2 x 2 (hier), halves one node each (shm)
 *   6 ranks, 3 per node: world 2 x 3 (hier), halves one node each (shm), delays
 *   8 ranks, 2 per node: world 4 x 2, halves 2 x 2 (hier on both)
 *   6 ranks, 2 per node, even/odd halves: world 3 x 2 (hier), halves one
 *     rank per node (point-to-point only)
 *   5 ranks, 2 per node: nodes 2 + 2 + 1 (world point-to-point only), halves
 *     {0, 1} (shm) and {2, 3, 4} (nodes 2 + 1, point-to-point only)
 */
Test(stress, nodes_shm_and_hier, .timeout = 600)
{
    /* ranks, per node, block halves, ranks with shm on the world, on the halves, seed, delay */
    static const node_run_t runs[] = {
        {4, 2, 1, 4, 4, 11, 0}, {6, 3, 1, 6, 6, 12, 20000}, {8, 2, 1, 8, 8, 13, 0},
        {6, 2, 0, 6, 0, 14, 0}, {5, 2, 1, 0, 2, 15, 0},
    };
    long via[2][2] = {{0, 0}, {0, 0}};

    cr_assert_eq(weft_init(), WEFT_OK);
    weft__coll_config.shm_slot = 4096;
    weft__coll_config.shm_small = 64;
    /* a deadlock fails with what it waited for, long before the test's timeout */
    weft__runtime_config.timeout = 20;
    for (uint64_t salt = 0; salt < 2; salt++) {
        for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
            node_run_t nr = runs[i];

            nr.seed += salt * 100;
            run_stress_nodes(&nr, 800, via);
        }
    }
    cr_assert(via[0][0] > 0 && via[0][1] > 0,
              "the selection sent %ld blocking and %ld nonblocking operations through shared "
              "memory",
              via[0][0], via[0][1]);
    cr_assert(via[1][0] > 0 && via[1][1] > 0,
              "the selection chose %ld blocking and %ld nonblocking hierarchical operations",
              via[1][0], via[1][1]);
    weft_finalize();
}

/* Many operations outstanding, completed in reverse, one freed early. */
static void outstanding_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    enum { N = 24 };
    int32_t bufs[N][64];
    weft_request_t reqs[N];
    int size;

    weft_comm_size(comm, &size);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 64; j++) {
            bufs[i][j] = rank + i * j;
        }
        if (weft_iallreduce(WEFT_IN_PLACE, bufs[i], 64, WEFT_INT32, WEFT_SUM, comm, &reqs[i]) !=
            WEFT_OK) {
            fail(sh, weft_last_error());
            return;
        }
    }
    /* free one before it completes: it finishes on its own */
    weft_request_free(reqs[5]);
    for (int i = N - 1; i >= 0; i--) {
        if (i == 5) {
            continue;
        }
        if (weft_wait(reqs[i]) != WEFT_OK) {
            fail(sh, weft_last_error());
            return;
        }
        weft_request_free(reqs[i]);
    }
    if (weft_barrier(comm) != WEFT_OK) {
        fail(sh, weft_last_error());
        return;
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 64; j++) {
            if (bufs[i][j] != size * (size - 1) / 2 + size * i * j) {
                fail(sh, "outstanding allreduce result wrong");
                return;
            }
        }
    }
    /* a request with nothing to do is complete at once */
    weft_request_t r;
    int done = 0;
    if (weft_iallgather(NULL, NULL, 0, WEFT_INT32, comm, &r) != WEFT_OK ||
        weft_test(r, &done) != WEFT_OK || !done || weft_request_free(r) != WEFT_OK) {
        fail(sh, "count-0 request");
        return;
    }
    if (weft_test(NULL, &done) != WEFT_ERR_INVALID_ARG ||
        weft_iallreduce(bufs[0], bufs[1], 1, WEFT_INT32, WEFT_SUM, comm, NULL) !=
            WEFT_ERR_INVALID_ARG) {
        fail(sh, "NULL request accepted");
        return;
    }
    atomic_fetch_add(&sh->finished, 1);
}

Test(nonblocking, outstanding_reverse_order_and_free)
{
    for (uint64_t seed = 0; seed < 3; seed++) {
        shared_t sh = {0};
        weft_thread_world_opts_t opts = {.nranks = 6, .seed = seed};

        cr_assert_eq(weft_init(), WEFT_OK);
        cr_assert_eq(weft__thread_world_run(&opts, outstanding_body, &sh), WEFT_OK);
        cr_assert_eq(atomic_load(&sh.failures), 0, "%s", sh.first);
        cr_assert_eq(atomic_load(&sh.finished), 6);
        weft_finalize();
    }
}

/*
 * Nonblocking operations completed in an order that differs from rank to
 * rank. A rank runs the shared-memory rounds of a communicator strictly in
 * the order the operations were started, so waiting for the last one
 * started must drive every earlier one, and ranks that wait for different
 * operations first must not block each other. Per round every rank starts
 * a batch on the world and then one on its half (the same draws on every
 * rank), completes the half's batch and then the world's, each in its own
 * order:
 *   rank % 4 == 0: reversed, weft_wait
 *   rank % 4 == 1: a weft_test loop on the last one alone until it is
 *                  done, then the others in order, weft_test loops
 *   rank % 4 == 2: rotated by the rank and the round, weft_wait
 *   rank % 4 == 3: shuffled, weft_waitall
 * Waiting progresses only the request's communicator, so every rank
 * completes the half's batch before the world's.
 */
#define BATCH 10
#define ORDER_ROUNDS 8

static void order_of(int rank, int round, int n, int *order)
{
    uint64_t h = mix(((uint64_t)rank << 32) ^ (uint64_t)round);

    for (int i = 0; i < n; i++) {
        switch (rank % 4) {
        case 0:
            order[i] = n - 1 - i;
            break;
        case 1:
            order[i] = i == 0 ? n - 1 : i - 1;
            break;
        default:
            order[i] = (i + rank + round) % n;
            break;
        }
    }
    if (rank % 4 == 3) {
        for (int i = n - 1; i > 0; i--) {
            int j = (int)((h = mix(h)) % (uint64_t)(i + 1)), t = order[i];

            order[i] = order[j];
            order[j] = t;
        }
    }
}

/* Complete batch[0..n) in this rank's order and check every result. */
static int complete_batch(shared_t *sh, op_t *batch, int n, int rank, int round, weft_comm_t c,
                          const int *members)
{
    int order[BATCH], csize, me, done;
    weft_request_t reqs[BATCH];
    weft_status_t st = WEFT_OK;
    char msg[256];

    weft_comm_size(c, &csize);
    weft_comm_rank(c, &me);
    order_of(rank, round, n, order);
    if (rank % 4 == 3) {
        for (int i = 0; i < n; i++) {
            reqs[i] = batch[order[i]].req;
        }
        st = weft_waitall(n, reqs);
    }
    for (int i = 0; i < n && st == WEFT_OK; i++) {
        op_t *o = &batch[order[i]];

        if (rank % 4 == 1) {
            do {
                st = weft_test(o->req, &done);
            } while (st == WEFT_OK && !done);
        } else if (rank % 4 != 3) {
            st = weft_wait(o->req);
        }
        if (st != WEFT_OK) {
            snprintf(msg, sizeof(msg), "round %d rank %d: i%s (op %d, %zu elements): %s (%s)",
                     round, rank, kind_names[o->kind], o->k, o->count, weft_status_string(st),
                     weft_last_error());
            fail(sh, msg);
        }
    }
    for (int i = 0; i < n; i++) {
        /* after a failure too: no buffer is freed while an operation may use it */
        weft_status_t w = weft_wait(batch[i].req);

        if (st == WEFT_OK && w == WEFT_OK) {
            check_op(sh, &batch[i], me, csize, members);
        }
        weft_request_free(batch[i].req);
        free(batch[i].in);
        free(batch[i].out);
    }
    return st == WEFT_OK ? 0 : -1;
}

/* Start n operations drawn from rng (the same on every rank) on comm c. */
static int start_batch(shared_t *sh, op_t *batch, int n, uint64_t *rng, int *k, int which,
                       weft_comm_t c, int world_rank)
{
    static const kind_t kinds[] = {K_ALLREDUCE, K_RS, K_AG, K_BCAST, K_REDUCE, K_BARRIER, K_GATHER};
    static const size_t counts[] = {1, 3, 17, 1031, 5003};
    int csize, me;
    char msg[256];

    weft_comm_size(c, &csize);
    weft_comm_rank(c, &me);
    for (int i = 0; i < n; i++) {
        uint64_t x = mix(*rng += 0x9e3779b97f4a7c15ull);
        op_t *o = &batch[i];

        memset(o, 0, sizeof(*o));
        o->k = (*k)++;
        o->kind = kinds[x % (sizeof(kinds) / sizeof(kinds[0]))];
        o->comm = which;
        o->count = counts[(x >> 8) % (sizeof(counts) / sizeof(counts[0]))];
        o->root = (int)((x >> 16) % (uint64_t)csize);
        o->rop = (x >> 24) % 2 ? WEFT_MAX : WEFT_SUM;
        o->is_float = o->rop == WEFT_SUM && (x >> 25) % 2;
        o->nonblocking = 1;
        o->in = calloc(o->count * (size_t)csize + 1, 4);
        o->out = calloc(o->count * (size_t)csize + 1, 4);
        fill_input(o, world_rank, me, csize);
        tally(sh, o, c, csize);
        if (start(o, c, &o->req) != WEFT_OK) {
            snprintf(msg, sizeof(msg), "op %d i%s start: %s", o->k, kind_names[o->kind],
                     weft_last_error());
            fail(sh, msg);
            for (int j = 0; j < i; j++) {
                weft_wait(batch[j].req);
                weft_request_free(batch[j].req);
            }
            for (int j = 0; j <= i; j++) {
                free(batch[j].in);
                free(batch[j].out);
            }
            return -1;
        }
    }
    return 0;
}

static void order_body(weft_comm_t world, int rank, void *arg)
{
    shared_t *sh = arg;
    op_t wb[BATCH], hb[BATCH];
    int size, nhalf = 0, world_members[64], half_members[64], k = 0;
    uint64_t rng = sh->seed;
    weft_comm_t half;

    weft_comm_size(world, &size);
    for (int r = 0; r < size; r++) {
        world_members[r] = r;
        if (half_of(sh, r, size) == half_of(sh, rank, size)) {
            half_members[nhalf++] = r;
        }
    }
    if (weft_comm_split(world, half_of(sh, rank, size), rank, &half) != WEFT_OK) {
        fail(sh, "split failed");
        return;
    }
    atomic_fetch_add(&sh->world_shm, weft__comm_of(world)->coll->shm != NULL);
    atomic_fetch_add(&sh->half_shm, weft__comm_of(half)->coll->shm != NULL);
    for (int round = 0; round < ORDER_ROUNDS && atomic_load(&sh->failures) == 0; round++) {
        if (start_batch(sh, wb, BATCH, &rng, &k, 0, world, rank) != 0) {
            break;
        }
        if (start_batch(sh, hb, BATCH, &rng, &k, 1, half, rank) != 0) {
            complete_batch(sh, wb, BATCH, rank, round, world, world_members);
            break;
        }
        if (complete_batch(sh, hb, BATCH, rank, round, half, half_members) != 0 ||
            complete_batch(sh, wb, BATCH, rank, round, world, world_members) != 0) {
            break;
        }
    }
    weft_comm_destroy(half);
    atomic_fetch_add(&sh->finished, 1);
}

Test(nonblocking, shm_completed_in_rank_dependent_orders, .timeout = 300)
{
    /* ranks, per node, block halves, ranks with shm on the world, on the halves, seed, delay */
    static const node_run_t runs[] = {
        {4, 2, 1, 4, 4, 21, 0}, {6, 3, 1, 6, 6, 22, 0},     {6, 0, 1, 6, 6, 23, 0},
        {8, 2, 1, 8, 8, 24, 0}, {8, 0, 0, 8, 8, 25, 20000},
    };
    long via[2] = {0, 0};

    cr_assert_eq(weft_init(), WEFT_OK);
    weft__coll_config.shm_slot = 4096;
    weft__coll_config.shm_small = 64;
    /* a deadlock fails with what it waited for, long before the test's timeout */
    weft__runtime_config.timeout = 20;
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        const node_run_t *nr = &runs[i];
        shared_t sh = {.seed = nr->seed, .block_halves = nr->block_halves};
        weft_thread_world_opts_t opts = {
            .nranks = nr->nranks, .seed = nr->seed, .max_delay_ns = nr->delay};

        weft__runtime_config.ranks_per_node = nr->rpn;
        cr_assert_eq(weft__thread_world_run(&opts, order_body, &sh), WEFT_OK, "%s",
                     weft_last_error());
        cr_assert_eq(atomic_load(&sh.failures), 0, "%d ranks, %d per node: %s", nr->nranks, nr->rpn,
                     sh.first);
        cr_assert_eq(atomic_load(&sh.finished), nr->nranks);
        cr_assert_eq(atomic_load(&sh.checked), (long)ORDER_ROUNDS * 2 * BATCH * nr->nranks,
                     "%ld rank results checked", atomic_load(&sh.checked));
        cr_assert_eq(atomic_load(&sh.world_shm), nr->world_shm);
        cr_assert_eq(atomic_load(&sh.half_shm), nr->half_shm);
        via[0] += atomic_load(&sh.via[0][1]);
        via[1] += atomic_load(&sh.via[1][1]);
    }
    cr_assert(via[0] > 0 && via[1] > 0,
              "only %ld shared-memory and %ld hierarchical operations were selected", via[0],
              via[1]);
    fprintf(stderr, "nonblocking in rank-dependent orders: %ld shm and %ld hier rank operations\n",
            via[0], via[1]);
    weft_finalize();
}
