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

/* The checker's view of device_data.h's inputs (tests/coll/check.h): ctx is {ci, p}. */
static void data_value(const void *ctx, int q, size_t i, void *dst)
{
    dd_fill(*(const int *)ctx, q, i, 1, dst);
}

static void data_reduced(const void *ctx, size_t i, void *dst)
{
    const int *x = ctx;

    dd_expect_reduced(x[0], x[1], i, dst);
}

int dd_run_case(const dd_env_t *env, weft_comm_t comm, int r, weft_stream_t stream,
                const dd_case_t *tc)
{
    const int p = env->p, ci = tc->ci, root = tc->root, emu = !tc->host;
    const weft_dtype_t dt = dd_combos[ci].dtype;
    const size_t es = weft_dtype_size(dt), n = tc->n;
    static const unsigned char fill_elem[8] = {DD_FILL_BYTE, DD_FILL_BYTE, DD_FILL_BYTE,
                                               DD_FILL_BYTE, DD_FILL_BYTE, DD_FILL_BYTE,
                                               DD_FILL_BYTE, DD_FILL_BYTE};
    const int x[2] = {ci, p};
    const check_data_t data = {es, data_value, data_reduced, fill_elem, x};
    size_t counts[DD_MAX_RANKS], displs[DD_MAX_RANKS], scounts[DD_MAX_RANKS], sdispls[DD_MAX_RANKS];
    check_shape_t shape = {.kind = tc->kind,
                           .p = p,
                           .rank = r,
                           .root = root,
                           .n = n,
                           .counts = counts,
                           .displs = displs,
                           .scounts = scounts,
                           .sdispls = sdispls,
                           .stride = n + 1};
    check_shape_t call = shape;
    const int in_place_scatter = tc->kind == WEFT_COLL_SCATTER && r == root && tc->inplace;
    size_t sbytes = 0, rbytes = 0;
    unsigned char *sb = NULL, *rb = NULL;
    const void *sendbuf;
    void *recvbuf;
    weft_status_t s;
    char msg[256];
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

    /* the v layouts: reduce_scatter_v's blocks in rank order; allgatherv's in
     * rank order with one untouched element after each; alltoallv's send
     * blocks in rank order, its receive blocks in reverse order, gaps of one */
    switch (tc->kind) {
    case WEFT_COLL_REDUCE_SCATTER_V:
    case WEFT_COLL_ALLGATHERV:
        for (int b = 0; b < p; b++) {
            counts[b] = vcount(n, b);
            displs[b] = shape.rext;
            shape.rext += counts[b] + (tc->kind == WEFT_COLL_ALLGATHERV);
        }
        break;
    case WEFT_COLL_ALLTOALLV:
        for (int b = 0; b < p; b++) {
            scounts[b] = a2av_count(n, r, b, tc->inplace);
            sdispls[b] = shape.sext;
            shape.sext += scounts[b] + 1;
        }
        for (int b = p - 1; b >= 0; b--) {
            counts[b] = a2av_count(n, b, r, tc->inplace);
            displs[b] = shape.rext;
            shape.rext += counts[b] + 1;
        }
        break;
    default:
        break;
    }
    call = shape;

    /* the buffers MPI gives this rank; bcast has one (the root's data at
     * the root); reduce_scatter(_v) in place takes the input in recvbuf */
    if (check_has(&shape, CHECK_SEND) && tc->kind != WEFT_COLL_BCAST) {
        sbytes = check_extent(&shape, CHECK_SEND) * es;
        ALLOC(sb, sbytes);
        check_image(&shape, CHECK_SEND, &data, sb);
    }
    if (check_has(&shape, CHECK_RECV) && !in_place_scatter) {
        int rs = tc->kind == WEFT_COLL_REDUCE_SCATTER || tc->kind == WEFT_COLL_REDUCE_SCATTER_V;

        rbytes = (rs && tc->inplace ? sbytes : check_extent(&shape, CHECK_RECV) * es);
        ALLOC(rb, rbytes);
        if (tc->kind == WEFT_COLL_BCAST && r == root) {
            check_image(&shape, CHECK_SEND, &data, rb);
        }
    }
    sendbuf = sb;
    recvbuf = in_place_scatter ? sb + (size_t)root * n * es : rb;
    if (tc->inplace && rb != NULL && tc->kind != WEFT_COLL_BCAST && tc->kind != WEFT_COLL_SCATTER) {
        /* the input where the in-place form takes it; WEFT_IN_PLACE, or the
         * aliasing form: sendbuf at this rank's block of recvbuf */
        size_t at = tc->kind == WEFT_COLL_ALLGATHER || tc->kind == WEFT_COLL_GATHER
                        ? (size_t)r * n * es
                        : 0;

        check_image_in_place(&shape, &data, rb);
        sendbuf = tc->inplace == 1 ? WEFT_IN_PLACE : rb + at;
        call.scounts = call.sdispls = NULL; /* alltoallv in place: the receive layout */
    }
    s = check_call(&call, tc->mode, sendbuf, recvbuf, dt, dd_combos[ci].op, comm, stream);
    if (s == WEFT_ERR_MISMATCH && tc->mismatch_ok) {
        ok = 2;
        goto done;
    }
    if (s != WEFT_OK) {
        FAIL("%s (%s)", weft_status_string(s), weft_last_error());
    }
    if (recvbuf != NULL && check_diff(&shape, CHECK_RECV, &data, recvbuf, msg, sizeof(msg)) >= 0) {
        FAIL("%s", msg);
    }
    if (sb != NULL && check_diff(&shape, CHECK_SEND, &data, sb, msg, sizeof(msg)) >= 0) {
        FAIL("sendbuf changed: %s", msg);
    }
    if (!dd_guard_ok(sb, sbytes) || !dd_guard_ok(rb, rbytes)) {
        FAIL("wrote past the end of a buffer");
    }
    ok = 1;
done:
#undef FAIL
#undef ALLOC
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
