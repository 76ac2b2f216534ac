/* The soak's operations (tests/soak/soak.h): drawing one, filling its
 * input, running it in its form, and checking its result against a
 * reference computed from every rank's deterministic input. */
#include "tests/soak/soak.h"

#include "tests/harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------ elements by dtype */

static void put(weft_dtype_t dt, void *b, size_t i, double v)
{
    switch (dt) {
    case WEFT_INT32:
        ((int32_t *)b)[i] = (int32_t)v;
        break;
    case WEFT_UINT32:
        ((uint32_t *)b)[i] = (uint32_t)v;
        break;
    case WEFT_INT64:
        ((int64_t *)b)[i] = (int64_t)v;
        break;
    case WEFT_UINT64:
        ((uint64_t *)b)[i] = (uint64_t)v;
        break;
    case WEFT_FLOAT32:
        ((float *)b)[i] = (float)v;
        break;
    default:
        ((double *)b)[i] = v;
        break;
    }
}

static double get(weft_dtype_t dt, const void *b, size_t i)
{
    switch (dt) {
    case WEFT_INT32:
        return ((const int32_t *)b)[i];
    case WEFT_UINT32:
        return ((const uint32_t *)b)[i];
    case WEFT_INT64:
        return (double)((const int64_t *)b)[i];
    case WEFT_UINT64:
        return (double)((const uint64_t *)b)[i];
    case WEFT_FLOAT32:
        return ((const float *)b)[i];
    default:
        return ((const double *)b)[i];
    }
}

/* What an element must be after the operation, as the dtype stores it. */
static double as_stored(weft_dtype_t dt, double v)
{
    return dt == WEFT_FLOAT32 ? (double)(float)v : v;
}

static double reduce_ref(uint64_t key, weft_op_t op, int n, size_t j, weft_dtype_t dt)
{
    int64_t acc = val(key, 0, j);

    for (int q = 1; q < n; q++) {
        int64_t v = val(key, q, j);

        switch (op) {
        case WEFT_SUM:
        case WEFT_AVG:
            acc += v;
            break;
        case WEFT_MIN:
            acc = v < acc ? v : acc;
            break;
        case WEFT_MAX:
            acc = v > acc ? v : acc;
            break;
        case WEFT_BAND:
            acc &= v;
            break;
        case WEFT_BOR:
            acc |= v;
            break;
        default:
            acc ^= v;
            break; /* BXOR */
        }
    }
    if (op == WEFT_AVG) {
        return as_stored(dt, (double)acc / n);
    }
    return (double)acc;
}

/* ------------------------------------------------------------ operations */

typedef struct op {
    int coll, form, emu, inplace;
    weft_dtype_t dt;
    weft_op_t rop;
    size_t count;
    int root;
    uint64_t key;
    weft_comm_t comm;
    const char *comm_name;
    int crank, csize;
    /* the v forms, indexed by rank */
    size_t scounts[MAX_RANKS], sdispls[MAX_RANKS], rcounts[MAX_RANKS], rdispls[MAX_RANKS];
    size_t in_elems, out_elems; /* extent of the input and of the result */
} op_t;

static const weft_dtype_t dtypes[] = {WEFT_INT32,  WEFT_UINT32,  WEFT_INT64,
                                      WEFT_UINT64, WEFT_FLOAT32, WEFT_FLOAT64};
static const weft_op_t int_ops[] = {WEFT_SUM, WEFT_MIN, WEFT_MAX, WEFT_BAND, WEFT_BOR, WEFT_BXOR};
static const weft_op_t float_ops[] = {WEFT_SUM, WEFT_MIN, WEFT_MAX, WEFT_AVG};
static const size_t counts[] = {0, 1, 3, 17, 64, 255, 1000, MAXC};

/* Draw operation number r->seq on comm (the same draws on every rank). */
static void draw(rk_t *r, op_t *o, int form, weft_comm_t comm, const char *name)
{
    int isfloat;
    int n;

    memset(o, 0, sizeof(*o));
    o->comm = comm;
    o->comm_name = name;
    CHECK_OK(r, weft_comm_rank(comm, &o->crank));
    CHECK_OK(r, weft_comm_size(comm, &o->csize));
    n = o->csize;
    o->form = form;
    o->coll = (int)(next(r) % C_COUNT);
    o->dt = dtypes[next(r) % (sizeof(dtypes) / sizeof(dtypes[0]))];
    isfloat = o->dt == WEFT_FLOAT32 || o->dt == WEFT_FLOAT64;
    o->rop = isfloat ? float_ops[next(r) % 4] : int_ops[next(r) % 6];
    o->count = counts[next(r) % (sizeof(counts) / sizeof(counts[0]))];
    if (o->coll == C_ALLREDUCE && next(r) % 8 == 0) {
        o->count = BIGC - (size_t)(next(r) % 1000); /* the large-message algorithms */
    }
    o->root = (int)(next(r) % (uint64_t)n);
    o->inplace = o->coll == C_ALLREDUCE && form != F_ENQ && next(r) % 4 == 0;
    o->emu = form == F_ENQ || (form == F_BLOCK && next(r) % 4 == 0);
    if (r->o->without & W_EMU) {
        o->emu = 0; /* the draw above still happened: every rank draws alike */
    }
    o->key = mix64(r->o->seed ^ (r->seq << 8));
    r->seq++;

    size_t c = o->count, off = 0;

    switch (o->coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
    case C_BCAST:
        o->in_elems = o->out_elems = c;
        break;
    case C_ALLGATHER:
    case C_GATHER:
        o->in_elems = c;
        o->out_elems = c * (size_t)n;
        break;
    case C_REDUCE_SCATTER:
    case C_SCATTER:
        o->in_elems = c * (size_t)n;
        o->out_elems = c;
        break;
    case C_ALLTOALL:
        o->in_elems = o->out_elems = c * (size_t)n;
        break;
    case C_BARRIER:
        break;
    case C_ALLGATHERV: /* blocks with a gap of one element between them */
        for (int q = 0; q < n; q++) {
            o->rcounts[q] = vcount(o->key, q, 0, c);
            o->rdispls[q] = off;
            off += o->rcounts[q] + 1;
        }
        o->in_elems = o->rcounts[o->crank];
        o->out_elems = off;
        break;
    case C_ALLTOALLV: /* rank q sends vcount(q, d) elements to rank d */
        for (int d = 0; d < n; d++) {
            o->scounts[d] = vcount(o->key, o->crank, d, c);
            o->sdispls[d] = off;
            off += o->scounts[d];
        }
        o->in_elems = off;
        off = 0;
        for (int q = 0; q < n; q++) {
            o->rcounts[q] = vcount(o->key, q, o->crank, c);
            o->rdispls[q] = off;
            off += o->rcounts[q];
        }
        o->out_elems = off;
        break;
    default: /* C_REDUCE_SCATTER_V: the input is the blocks packed in rank order */
        for (int q = 0; q < n; q++) {
            o->rcounts[q] = vcount(o->key, q, 0, c);
            o->rdispls[q] = off;
            off += o->rcounts[q];
        }
        o->in_elems = off;
        o->out_elems = o->rcounts[o->crank];
        break;
    }
}

/* Element k of this rank's input. */
static double input(const op_t *o, size_t k)
{
    int q = o->crank;

    if (o->coll == C_ALLTOALLV) {
        /* element j of the block for rank d */
        int d = 0;

        while (d + 1 < o->csize && k >= o->sdispls[d + 1]) {
            d++;
        }
        return (double)val(o->key ^ (uint64_t)d << 32, q, k - o->sdispls[d]);
    }
    return (double)val(o->key, q, k);
}

/* Element k of the result on this rank in *v: 1, or 0 when k is a gap
 * that must stay unwritten. */
static int expected(const op_t *o, size_t k, double *v)
{
    int n = o->csize, me = o->crank;
    size_t c = o->count;

    switch (o->coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
        *v = reduce_ref(o->key, o->rop, n, k, o->dt);
        return 1;
    case C_BCAST:
        *v = (double)val(o->key, o->root, k);
        return 1;
    case C_ALLGATHER:
    case C_GATHER:
        *v = (double)val(o->key, (int)(k / c), k % c);
        return 1;
    case C_REDUCE_SCATTER:
        *v = reduce_ref(o->key, o->rop, n, (size_t)me * c + k, o->dt);
        return 1;
    case C_SCATTER:
        *v = (double)val(o->key, o->root, (size_t)me * c + k);
        return 1;
    case C_ALLTOALL: /* block q from rank q: its block for me */
        *v = (double)val(o->key, (int)(k / c), (size_t)me * c + k % c);
        return 1;
    case C_ALLGATHERV:
        for (int q = 0; q < n; q++) {
            if (k >= o->rdispls[q] && k < o->rdispls[q] + o->rcounts[q]) {
                *v = (double)val(o->key, q, k - o->rdispls[q]);
                return 1;
            }
        }
        return 0;
    case C_ALLTOALLV:
        for (int q = 0; q < n; q++) {
            if (k >= o->rdispls[q] && k < o->rdispls[q] + o->rcounts[q]) {
                *v = (double)val(o->key ^ (uint64_t)me << 32, q, k - o->rdispls[q]);
                return 1;
            }
        }
        return 0;
    default: /* C_REDUCE_SCATTER_V */
        *v = reduce_ref(o->key, o->rop, n, o->rdispls[me] + k, o->dt);
        return 1;
    }
}

/* Whether this rank holds a result of o. */
static int has_result(const op_t *o)
{
    if (o->coll == C_BARRIER) {
        return 0;
    }
    if (o->coll == C_REDUCE || o->coll == C_GATHER) {
        return o->crank == o->root;
    }
    return 1;
}

static size_t out_span(const op_t *o)
{
    return (o->out_elems + GUARD) * weft_dtype_size(o->dt);
}

/* Fill the host buffers of slot i for o: the input, and the padding the
 * result must leave alone past its extent. */
static void prepare(rk_t *r, const op_t *o, int i)
{
    unsigned char *in = o->inplace ? r->recv[i] : r->send[i];

    memset(r->recv[i], PAD, out_span(o));
    for (size_t k = 0; k < o->in_elems; k++) {
        put(o->dt, in, k, input(o, k));
    }
    if (o->coll == C_BCAST && o->crank == o->root) {
        for (size_t k = 0; k < o->count; k++) {
            put(o->dt, r->recv[i], k, (double)val(o->key, o->root, k));
        }
    }
}

static void verify(rk_t *r, const op_t *o, int i)
{
    const unsigned char *out = r->recv[i];
    size_t esz = weft_dtype_size(o->dt);

    if (!has_result(o)) {
        return;
    }
    for (size_t k = 0; k < o->out_elems; k++) {
        double want, got;

        if (!expected(o, k, &want)) {
            for (size_t b = 0; b < esz; b++) {
                CHECK(r, out[k * esz + b] == PAD,
                      "%s %s on %s (%s %s, count %zu): gap element "
                      "%zu was written",
                      soak_form_name[o->form], soak_coll_name[o->coll], o->comm_name,
                      weft_dtype_name(o->dt), weft_op_name(o->rop), o->count, k);
            }
            continue;
        }
        got = get(o->dt, out, k);
        CHECK(r, got == want,
              "%s %s%s on %s (%s %s, count %zu, root %d, %d ranks%s): element %zu "
              "is %g, expected %g",
              soak_form_name[o->form], soak_coll_name[o->coll], o->inplace ? " in place" : "",
              o->comm_name, weft_dtype_name(o->dt), weft_op_name(o->rop), o->count, o->root,
              o->csize, o->emu ? ", emu" : "", k, got, want);
    }
    for (size_t b = o->out_elems * esz; b < out_span(o); b++) {
        CHECK(r, out[b] == PAD,
              "%s %s on %s (%s, count %zu): byte %zu past the result was "
              "written",
              soak_form_name[o->form], soak_coll_name[o->coll], o->comm_name,
              weft_dtype_name(o->dt), o->count, b);
    }
    r->s->elements += o->out_elems;
}

/* Start (or run) o with buffers S and R in the form o->form. */
static weft_status_t start(rk_t *r, const op_t *o, const void *S, void *R, weft_request_t *req)
{
    weft_comm_t cm = o->comm;
    weft_stream_t st = r->stream;
    size_t c = o->count;
    int f = o->form, root = o->root, isroot = o->crank == o->root;
    weft_dtype_t dt = o->dt;
    weft_op_t op = o->rop;
    void *rootR = isroot ? R : NULL;
    const void *rootS = isroot ? S : NULL;

#define FORM(blk, nb, enq) (f == F_BLOCK ? (blk) : f == F_NB ? (nb) : (enq))
    switch (o->coll) {
    case C_ALLREDUCE:
        return FORM(weft_allreduce(S, R, c, dt, op, cm), weft_iallreduce(S, R, c, dt, op, cm, req),
                    weft_allreduce_enqueue(S, R, c, dt, op, cm, st));
    case C_REDUCE:
        return FORM(weft_reduce(S, rootR, c, dt, op, root, cm),
                    weft_ireduce(S, rootR, c, dt, op, root, cm, req),
                    weft_reduce_enqueue(S, rootR, c, dt, op, root, cm, st));
    case C_BCAST:
        return FORM(weft_bcast(R, c, dt, root, cm), weft_ibcast(R, c, dt, root, cm, req),
                    weft_bcast_enqueue(R, c, dt, root, cm, st));
    case C_ALLGATHER:
        return FORM(weft_allgather(S, R, c, dt, cm), weft_iallgather(S, R, c, dt, cm, req),
                    weft_allgather_enqueue(S, R, c, dt, cm, st));
    case C_REDUCE_SCATTER:
        return FORM(weft_reduce_scatter(S, R, c, dt, op, cm),
                    weft_ireduce_scatter(S, R, c, dt, op, cm, req),
                    weft_reduce_scatter_enqueue(S, R, c, dt, op, cm, st));
    case C_ALLTOALL:
        return FORM(weft_alltoall(S, R, c, dt, cm), weft_ialltoall(S, R, c, dt, cm, req),
                    weft_alltoall_enqueue(S, R, c, dt, cm, st));
    case C_BARRIER:
        return FORM(weft_barrier(cm), weft_ibarrier(cm, req), weft_barrier_enqueue(cm, st));
    case C_GATHER:
        return FORM(weft_gather(S, rootR, c, dt, root, cm),
                    weft_igather(S, rootR, c, dt, root, cm, req),
                    weft_gather_enqueue(S, rootR, c, dt, root, cm, st));
    case C_SCATTER:
        return FORM(weft_scatter(rootS, R, c, dt, root, cm),
                    weft_iscatter(rootS, R, c, dt, root, cm, req),
                    weft_scatter_enqueue(rootS, R, c, dt, root, cm, st));
    case C_ALLGATHERV: {
        size_t sc = o->rcounts[o->crank];

        return FORM(weft_allgatherv(S, R, sc, o->rcounts, o->rdispls, dt, cm),
                    weft_iallgatherv(S, R, sc, o->rcounts, o->rdispls, dt, cm, req),
                    weft_allgatherv_enqueue(S, R, sc, o->rcounts, o->rdispls, dt, cm, st));
    }
    case C_ALLTOALLV:
        return FORM(
            weft_alltoallv(S, R, o->scounts, o->sdispls, o->rcounts, o->rdispls, dt, cm),
            weft_ialltoallv(S, R, o->scounts, o->sdispls, o->rcounts, o->rdispls, dt, cm, req),
            weft_alltoallv_enqueue(S, R, o->scounts, o->sdispls, o->rcounts, o->rdispls, dt, cm,
                                   st));
    default:
        return FORM(weft_reduce_scatter_v(S, R, o->rcounts, dt, op, cm),
                    weft_ireduce_scatter_v(S, R, o->rcounts, dt, op, cm, req),
                    weft_reduce_scatter_v_enqueue(S, R, o->rcounts, dt, op, cm, st));
    }
#undef FORM
}

static size_t in_bytes(const op_t *o)
{
    return o->in_elems * weft_dtype_size(o->dt);
}

/* A blocking or enqueued operation (slot 0); on emu memory, the input is
 * copied in and the result out on the stream. */
static void run_one(rk_t *r, op_t *o)
{
    const void *S;
    void *R;

    soak_stage(r, "op %" PRIu64 ": %s %s on %s, %s count %zu%s", r->seq - 1,
               soak_form_name[o->form], soak_coll_name[o->coll], o->comm_name,
               weft_dtype_name(o->dt), o->count, o->emu ? " (emu)" : "");
    prepare(r, o, 0);
    if (o->emu) {
        if (in_bytes(o) > 0 && !o->inplace) {
            CHECK_OK(r, weft_memcpy_async(r->dsend, r->send[0], in_bytes(o), r->stream));
        }
        CHECK_OK(r, weft_memcpy_async(r->drecv, r->recv[0], out_span(o), r->stream));
        S = o->inplace ? WEFT_IN_PLACE : r->dsend;
        R = r->drecv;
        if (o->form == F_BLOCK) {
            CHECK_OK(r, weft_stream_synchronize(r->stream));
        }
    } else {
        S = o->inplace ? WEFT_IN_PLACE : r->send[0];
        R = r->recv[0];
    }
    weft_status_t st = start(r, o, S, R, NULL);

    CHECK(r, st == WEFT_OK, "%s returned %s: %s", r->s->stage, weft_status_string(st),
          weft_last_error());
    if (o->emu) {
        CHECK_OK(r, weft_memcpy_async(r->recv[0], r->drecv, out_span(o), r->stream));
        CHECK_OK(r, weft_stream_synchronize(r->stream));
    }
    verify(r, o, 0);
    r->s->ops[o->form]++;
}

/* Up to NSLOTS nonblocking operations on one communicator, completed in
 * one of three ways. */
static void run_batch(rk_t *r, weft_comm_t comm, const char *name)
{
    int k = 1 + (int)(next(r) % NSLOTS), how = (int)(next(r) % 3);
    op_t ops[NSLOTS];
    weft_request_t reqs[NSLOTS];

    for (int i = 0; i < k; i++) {
        draw(r, &ops[i], F_NB, comm, name);
        soak_stage(r, "op %" PRIu64 ": nonblocking %s on %s, %s count %zu", r->seq - 1,
                   soak_coll_name[ops[i].coll], name, weft_dtype_name(ops[i].dt), ops[i].count);
        prepare(r, &ops[i], i);
        weft_status_t st =
            start(r, &ops[i], ops[i].inplace ? WEFT_IN_PLACE : r->send[i], r->recv[i], &reqs[i]);

        CHECK(r, st == WEFT_OK, "%s returned %s: %s", r->s->stage, weft_status_string(st),
              weft_last_error());
    }
    soak_stage(r, "completing %d nonblocking operations on %s (%s)", k, name,
               how == 0   ? "weft_wait"
               : how == 1 ? "weft_test"
                          : "weft_waitall");
    if (how == 2) {
        CHECK_OK(r, weft_waitall(k, reqs));
    } else {
        for (int i = k - 1; i >= 0; i--) {
            if (how == 0) {
                CHECK_OK(r, weft_wait(reqs[i]));
                continue;
            }
            double deadline = harness_now_s() + 120;
            int done = 0;

            while (!done) {
                CHECK_OK(r, weft_test(reqs[i], &done));
                CHECK(r, done || harness_now_s() < deadline, "weft_test not done after 120 s");
            }
        }
    }
    for (int i = 0; i < k; i++) {
        CHECK_OK(r, weft_request_free(reqs[i]));
        verify(r, &ops[i], i);
        r->s->ops[F_NB]++;
    }
}

/* A ring: send to the next rank, receive from the previous one. */
static void run_p2p(rk_t *r, weft_comm_t comm, const char *name)
{
    int me, n;
    size_t c = counts[next(r) % (sizeof(counts) / sizeof(counts[0]))];
    int blocking = next(r) % 2 == 0;
    uint64_t key = mix64(r->o->seed ^ (r->seq << 8) ^ 0x77);
    int tag = (int)(r->seq % WEFT_TAG_UB);

    r->seq++;
    CHECK_OK(r, weft_comm_rank(comm, &me));
    CHECK_OK(r, weft_comm_size(comm, &n));
    int to = (me + 1) % n, from = (me + n - 1) % n;

    soak_stage(r, "p2p %s ring on %s, count %zu", blocking ? "blocking" : "nonblocking", name, c);
    for (size_t k = 0; k < c; k++) {
        ((int64_t *)r->send[0])[k] = val(key, me, k);
    }
    memset(r->recv[0], PAD, (c + GUARD) * 8);
    if (blocking && n % 2 == 0) {
        if (me % 2 == 0) {
            CHECK_OK(r, weft_send(r->send[0], c, WEFT_INT64, to, tag, comm));
            CHECK_OK(r, weft_recv(r->recv[0], c, WEFT_INT64, from, tag, comm));
        } else {
            CHECK_OK(r, weft_recv(r->recv[0], c, WEFT_INT64, from, tag, comm));
            CHECK_OK(r, weft_send(r->send[0], c, WEFT_INT64, to, tag, comm));
        }
    } else {
        weft_request_t req[2];

        CHECK_OK(r, weft_irecv(r->recv[0], c, WEFT_INT64, from, tag, comm, &req[0]));
        CHECK_OK(r, weft_isend(r->send[0], c, WEFT_INT64, to, tag, comm, &req[1]));
        CHECK_OK(r, weft_waitall(2, req));
        CHECK_OK(r, weft_request_free(req[0]));
        CHECK_OK(r, weft_request_free(req[1]));
    }
    for (size_t k = 0; k < c; k++) {
        int64_t got = ((int64_t *)r->recv[0])[k];

        CHECK(r, got == val(key, from, k),
              "p2p on %s: element %zu from rank %d is %" PRId64 ", expected %" PRId64, name, k,
              from, got, val(key, from, k));
    }
    for (size_t b = c * 8; b < (c + GUARD) * 8; b++) {
        CHECK(r, r->recv[0][b] == PAD, "p2p on %s: byte %zu past the message was written", name, b);
    }
    r->s->p2p++;
    r->s->elements += c;
}

/* An allreduce that must succeed and be right: checks a new communicator. */
/* The operations run on the round's communicators, not on world: a
 * communicator keeps the schedule of its last operation with its scratch
 * (emu segments, large blocks), so what a live communicator holds depends
 * on what ran on it last. World only votes, dups and splits, the same
 * every round, so the samples compare like with like. */
void soak_round_ops(rk_t *r, weft_comm_t work, weft_comm_t half)
{
    weft_comm_t comms[2] = {work, half};
    const char *names[2] = {"dup", "split"};

    for (int i = 0; i < OPS_PER_ROUND; i++) {
        int c = (int)(next(r) % 2), kind = (int)(next(r) % 8);
        op_t o;

        if ((kind >= 3 && kind < 5 && (r->o->without & W_NONBLOCKING)) ||
            (kind >= 5 && kind < 7 && (r->o->without & W_EMU)) ||
            (kind == 7 && (r->o->without & W_P2P))) {
            kind = 0; /* left out (--without): a blocking operation instead */
        }
        if (kind < 3) {
            draw(r, &o, F_BLOCK, comms[c], names[c]);
            run_one(r, &o);
        } else if (kind < 5) {
            run_batch(r, comms[c], names[c]);
        } else if (kind < 7) {
            draw(r, &o, F_ENQ, comms[c], names[c]);
            run_one(r, &o);
        } else {
            run_p2p(r, comms[c], names[c]);
        }
    }
}
