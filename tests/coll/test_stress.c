/*
 * Nonblocking collectives and a seeded randomized stress test on in-process
 * ranks with random landing order.
 *
 * Stress: every rank draws the same sequence of operations from a shared
 * seed: collective, count, dtype/op, root, communicator (the world or one of
 * the two halves of a split), blocking or nonblocking. Nonblocking
 * operations stay outstanding for a few steps and are completed in a
 * shuffled order (wait, test loop, or free followed by a barrier). Every
 * result is checked against a reference computed from the inputs, which
 * are deterministic per (operation, rank, element).
 */
#include <criterion/criterion.h>

#include "runtime/comm.h"
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

#define MAX_OUTSTANDING 6

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
        if (r % 2 == rank % 2) {
            half_members[nhalf++] = r;
        }
    }
    if (weft_comm_split(world, rank % 2, rank, &half) != WEFT_OK) {
        fail(sh, "split failed");
        return;
    }
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
