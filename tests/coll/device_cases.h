/*
 * One collective case on device (emu) or host buffers, run and checked by
 * one rank: shared by the in-process tests (test_device.c) and the
 * multi-process one (tests/device/test_emu_procs.c).
 *
 * dd_run_case allocates the case's buffers, fills them with
 * device_data.h's inputs, calls the collective in the case's form
 * (blocking; nonblocking then weft_wait; enqueued on `stream` then
 * weft_stream_synchronize), and checks every element of the result against
 * the reference, that send buffers are unchanged, and that gaps between
 * v-collective blocks and the guard bytes after every buffer are untouched.
 * The first failure is passed to env->fail; the rank still takes part in
 * the collective (so nobody hangs). Before freeing its buffers it calls
 * env->sync (every rank of the case must reach it: peers may still be
 * reading them). Returns 1 when every check passed (2: the collective was
 * refused with WEFT_ERR_MISMATCH, where the case allows it).
 */
#ifndef WEFT_TESTS_DEVICE_CASES_H
#define WEFT_TESTS_DEVICE_CASES_H

#include "coll/coll.h"
#include "tests/coll/check.h"
#include "tests/coll/device_data.h"

#define DD_MAX_RANKS 16
#define DD_LARGE_COUNT 4099 /* larger than a page in every dtype */

/* the forms of a call, as tests/coll/check.h numbers them */
enum { DD_BLOCK = CHECK_BLOCKING, DD_NB = CHECK_NONBLOCKING, DD_ENQ = CHECK_ENQUEUE, DD_NMODES };

typedef struct dd_case {
    weft_coll_kind_t kind;
    int mode;    /* DD_BLOCK, DD_NB or DD_ENQ */
    int ci;      /* dd_combos index */
    size_t n;    /* count (per rank block for the per-rank collectives) */
    int inplace; /* 0 no; 1 WEFT_IN_PLACE; 2 the aliasing form (sendbuf == recvbuf ...) */
    int root;
    int host;        /* host buffers (on the emu stream when enqueued) */
    int mismatch_ok; /* WEFT_ERR_MISMATCH is an answer (then dd_run_case returns 2) */
} dd_case_t;

typedef struct dd_env {
    int p; /* ranks */
    void (*fail)(void *ctx, const char *msg);
    void (*sync)(void *ctx);
    void *ctx;
} dd_env_t;

int dd_run_case(const dd_env_t *env, weft_comm_t comm, int rank, weft_stream_t stream,
                const dd_case_t *tc);

/* The cases of p ranks: every collective x form x {count 0 or 1, odd out
 * of place, odd in place} (+ DD_LARGE_COUNT when large), dtype/op, root and
 * in-place form rotating with p. cases needs room for
 * WEFT_COLL_KIND_COUNT * DD_NMODES * 4. Returns how many. */
int dd_build_cases(int p, int large, dd_case_t *cases);

#endif /* WEFT_TESTS_DEVICE_CASES_H */
