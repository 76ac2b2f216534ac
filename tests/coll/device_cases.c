/* Every collective in one case, checked (contract in device_cases.h). */
#include "tests/coll/device_cases.h"

#include <stdio.h>
#include <string.h>

static const char *const mode_names[] = {"blocking", "nonblocking", "enqueue"};

static void report(const dd_env_t *env, const dd_case_t *tc, int r, const char *msg)
{
    const weft_dtype_t dt = dd_combos[tc->ci].dtype;
    char line[640];

    snprintf(line, sizeof(line), "%s %s p=%d n=%zu %s/%s inplace=%d root=%d %s rank %d: %s",
             weft__coll_kind_name(tc->kind), mode_names[tc->mode], env->p, tc->n,
             weft_dtype_name(dt), weft_op_name(dd_combos[tc->ci].op), tc->inplace, tc->root,
             tc->host ? "host" : "emu", r, msg);
    env->fail(env->ctx, line);
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
    if (mode == DD_NB) {
        s = weft_wait(*req);
        if (weft_request_free(*req) != WEFT_OK && s == WEFT_OK) {
            s = WEFT_ERR_INTERNAL;
        }
    } else if (mode == DD_ENQ) {
        s = weft_stream_synchronize(stream);
    }
    return s;
}

/* One collective in the case's form: weft_<fn>, weft_i<fn> or weft_<fn>_enqueue
 * (the request is read through a pointer: it is written by the call). */
#define CALL3(fn, ...)                                                                             \
    finish(tc->mode == DD_BLOCK ? weft_##fn(__VA_ARGS__)                                           \
           : tc->mode == DD_NB  ? weft_i##fn(__VA_ARGS__, &req)                                    \
                                : weft_##fn##_enqueue(__VA_ARGS__, stream),                         \
           tc->mode, &req, stream)

int dd_run_case(const dd_env_t *env, weft_comm_t comm, int r, weft_stream_t stream,
                const dd_case_t *tc)
{
    const int p = env->p, ci = tc->ci, root = tc->root, emu = !tc->host;
    const weft_dtype_t dt = dd_combos[ci].dtype;
    const weft_op_t op = dd_combos[ci].op;
    const size_t es = weft_dtype_size(dt), n = tc->n;
    size_t counts[DD_MAX_RANKS], displs[DD_MAX_RANKS], scounts[DD_MAX_RANKS], sdispls[DD_MAX_RANKS];
    size_t sbytes = 0, rbytes = 0, total = 0;
    unsigned char *sb = NULL, *rb = NULL;
    const void *sendbuf;
    void *recvbuf;
    weft_request_t req = NULL;
    weft_status_t s = WEFT_OK;
    long bad;
    int ok = 0;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        char msg_[320];                                                                            \
        snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                                 \
        report(env, tc, r, msg_);                                                                  \
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
        if (s == WEFT_ERR_MISMATCH && tc->mismatch_ok) {                                           \
            ok = 2;                                                                                \
            goto done;                                                                             \
        }                                                                                          \
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
    ok = 1;
done:
#undef FAIL
#undef ALLOC
#undef STATUS_OK
#undef EXPECT
    /* no rank frees buffers a late peer could still be reading */
    env->sync(env->ctx);
    dd_free(sb);
    dd_free(rb);
    return ok;
}

static int has_inplace2(weft_coll_kind_t kind)
{
    return kind == WEFT_COLL_ALLREDUCE || kind == WEFT_COLL_REDUCE || kind == WEFT_COLL_ALLGATHER ||
           kind == WEFT_COLL_GATHER;
}

/*
 * The cases of a world of p ranks: every collective x form x {count 0 or 1,
 * odd out of place, odd in place} (+ DD_LARGE_COUNT when large), dtype/op,
 * root and in-place form rotating with p so that the run covers each.
 */
int dd_build_cases(int p, int large, dd_case_t *cases)
{
    int nc = 0;

    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        for (int m = 0; m < DD_NMODES; m++) {
            int nv = k == WEFT_COLL_BARRIER ? 1 : large ? 4 : 3;

            for (int v = 0; v < nv; v++) {
                dd_case_t *tc = &cases[nc++];

                tc->kind = (weft_coll_kind_t)k;
                tc->mode = m;
                tc->ci = (p * 5 + k * 3 + m + v * 7) % dd_ncombos;
                tc->n = v == 0   ? (size_t)((p + k + m) % 2)
                        : v == 3 ? DD_LARGE_COUNT
                                 : (size_t)(2 * p + 13);
                tc->inplace = v != 2 || k == WEFT_COLL_BCAST ? 0
                              : has_inplace2(tc->kind)       ? 1 + (p + m) % 2
                                                             : 1;
                tc->root = (p - 1 + v * (p / 2 + 1) + m) % p;
                tc->host = m == DD_ENQ && (v == 1 || (v == 0 && (p + k) % 2 == 0));
            }
        }
    }
    return nc;
}
