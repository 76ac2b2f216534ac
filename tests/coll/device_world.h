/*
 * Harness of the stream-ordered collective tests (test_device_stream.c,
 * test_device_errors.c): a world of in-process ranks whose bodies record
 * their first failure instead of asserting (a rank that stops would leave
 * its peers waiting), checks that name the line, buffers from device_data.h,
 * and gated streams: an emu stream held by a flag until the host opens it,
 * so that everything queued on it is queued before any of it runs.
 */
#ifndef WEFT_TESTS_DEVICE_WORLD_H
#define WEFT_TESTS_DEVICE_WORLD_H

#include <criterion/criterion.h>

#include "device/device.h"
#include "device/emu/emu.h"
#include "runtime/config.h"
#include "runtime/thread_world.h"
#include "tests/coll/device_data.h"
#include "tests/harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PEER_DEADLINE_S 10.0
#define CI_INT32_SUM 0 /* dd_combos[0] */
#define CI_F16_SUM 2   /* dd_combos[2] */

typedef struct world {
    int p;
    pthread_barrier_t barrier;
    atomic_int failures;
    atomic_int finished; /* ranks that reached the end of their body */
    atomic_int flag[4];  /* scenario signals between ranks */
    int host;            /* scenario's buffers in host memory (on emu streams) */
    pthread_mutex_t lock;
    char first_failure[768];
} world_t;

static inline void fail(world_t *w, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void fail(world_t *w, int rank, const char *fmt, ...)
{
    va_list ap;

    if (atomic_fetch_add(&w->failures, 1) == 0) {
        char msg[640];

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&w->lock);
        snprintf(w->first_failure, sizeof(w->first_failure), "p=%d rank %d: %s", w->p, rank, msg);
        pthread_mutex_unlock(&w->lock);
    }
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail(w, r, __VA_ARGS__);                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        weft_status_t st_ = (call);                                                                \
        CHECK(st_ == WEFT_OK, "line %d: %s: %s (%s)", __LINE__, #call, weft_status_string(st_),    \
              weft_last_error());                                                                  \
    } while (0)
/* A call that must fail with `want` and a message naming `needle`. */
#define CHECK_ERR(call, want, needle)                                                              \
    do {                                                                                           \
        weft_status_t st_ = (call);                                                                \
        CHECK(st_ == (want) && strstr(weft_last_error(), (needle)) != NULL,                        \
              "line %d: %s returned %s (%s), expected %s naming \"%s\"", __LINE__, #call,          \
              weft_status_string(st_), weft_last_error(), weft_status_string(want), (needle));     \
    } while (0)
/* check: the index of the first wrong element, or -1 */
#define CHECK_DATA(check, ...) check_data(w, r, __LINE__, (check), __VA_ARGS__)

static inline void check_data(world_t *w, int r, int line, long bad, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static inline void check_data(world_t *w, int r, int line, long bad, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    if (bad < 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    fail(w, r, "line %d: %s: element %ld differs from the reference", line, what, bad);
}

static inline double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Wait until *f >= value, at most PEER_DEADLINE_S; 0 when it timed out. */
static inline int await(atomic_int *f, int value)
{
    double deadline = now_s() + PEER_DEADLINE_S;

    while (atomic_load(f) < value) {
        if (now_s() > deadline) {
            return 0;
        }
        nap_ms(1);
    }
    return 1;
}

static inline void *xalloc(world_t *w, int r, int emu, size_t bytes)
{
    void *p = dd_alloc(emu, bytes);

    if (p == NULL) {
        fail(w, r, "cannot allocate %zu bytes: %s", bytes, weft_last_error());
        abort();
    }
    return p;
}

static inline void run_world(int p, weft_thread_rank_fn body, world_t *w)
{
    weft_thread_world_opts_t opts = {.nranks = p, .seed = (uint64_t)p * 31 + 1};
    weft_status_t status;

    w->p = p;
    pthread_barrier_init(&w->barrier, NULL, (unsigned)p);
    pthread_mutex_init(&w->lock, NULL);
    status = weft__thread_world_run(&opts, body, w);
    cr_assert_eq(status, WEFT_OK, "thread world of %d ranks: %s", p, weft_last_error());
    cr_assert_eq(atomic_load(&w->failures), 0, "%d failure(s); first: %s",
                 atomic_load(&w->failures), w->first_failure);
    cr_assert_eq(atomic_load(&w->finished), p, "only %d of %d ranks finished",
                 atomic_load(&w->finished), p);
    pthread_barrier_destroy(&w->barrier);
    pthread_mutex_destroy(&w->lock);
}

static inline void init_with_timeout(const char *timeout)
{
    cr_assert_eq(harness_reset_env(NULL), 0, "cannot list the configuration registry");
    setenv("WEFT_LOG_LEVEL", "error", 1);
    setenv("WEFT_TIMEOUT", timeout, 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
}

static inline void setup(void)
{
    init_with_timeout("30");
}

static inline void teardown(void)
{
    weft_finalize();
    /* device/pinned.c freed no pinned memory while a stream waited on a flag */
    cr_expect_eq(weft__emu_frees_while_waiting(), 0ul, "pinned memory freed while a stream waited");
}

/* A stream that runs nothing until open_gate: everything queued on it is
 * queued before any of it runs. */
typedef struct gated {
    weft_stream_t st;
    uint32_t *gate;
} gated_t;

static inline void gated_create(world_t *w, int r, gated_t *g)
{
    const weft_device_ops_t *emu = &weft__device_emu_ops;

    CHECK_OK(weft_stream_create(WEFT_MEM_EMU, &g->st));
    CHECK_OK(weft__device_flag_alloc(emu, &g->gate));
    CHECK_OK(emu->stream_wait_flag(g->st, g->gate, 1));
}

static inline void gated_open(gated_t *g)
{
    weft__device_flag_set(g->gate, 1);
}

static inline void gated_destroy(world_t *w, int r, gated_t *g)
{
    CHECK_OK(weft_stream_destroy(g->st));
    weft__device_flag_free(&weft__device_emu_ops, g->gate);
}

#endif /* WEFT_TESTS_DEVICE_WORLD_H */
