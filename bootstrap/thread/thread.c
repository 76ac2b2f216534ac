/* Thread bootstrap: a generation-counting barrier and a shared allgather buffer. */
#include "bootstrap/thread/thread.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct weft_thread_boot_world {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    int nranks;
    int arrived;
    uint64_t generation;
    unsigned char *blobs;
    size_t blobs_size;
};

typedef struct boot_ctx {
    weft_thread_boot_world_t *world;
    int rank;
} boot_ctx_t;

weft_status_t weft__thread_boot_world_create(int nranks, weft_thread_boot_world_t **world_p)
{
    weft_thread_boot_world_t *w;
    pthread_condattr_t attr;

    if (nranks < 1) {
        return weft__error(WEFT_ERR_INVALID_ARG, "thread bootstrap of %d ranks", nranks);
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a thread bootstrap");
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &attr);
    pthread_condattr_destroy(&attr);
    w->refs = 1;
    w->nranks = nranks;
    *world_p = w;
    return WEFT_OK;
}

void weft__thread_boot_world_release(weft_thread_boot_world_t *w)
{
    int last;

    pthread_mutex_lock(&w->lock);
    last = --w->refs == 0;
    pthread_mutex_unlock(&w->lock);
    if (!last) {
        return;
    }
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w->blobs);
    free(w);
}

weft_status_t weft__thread_boot_ctx_create(weft_thread_boot_world_t *w, int rank, void **ctx_p)
{
    boot_ctx_t *ctx;

    if (rank < 0 || rank >= w->nranks) {
        return weft__error(WEFT_ERR_INVALID_ARG, "rank %d outside a thread bootstrap of %d ranks",
                           rank, w->nranks);
    }
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a thread bootstrap context");
    }
    pthread_mutex_lock(&w->lock);
    w->refs++;
    pthread_mutex_unlock(&w->lock);
    ctx->world = w;
    ctx->rank = rank;
    *ctx_p = ctx;
    return WEFT_OK;
}

/* Wait for every rank (lock held). A rank that times out leaves the barrier
 * counted: the world is unusable afterwards, as a failed bootstrap is. */
static weft_status_t barrier_locked(weft_thread_boot_world_t *w, uint64_t deadline_ns)
{
    uint64_t gen = w->generation;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};

    if (++w->arrived == w->nranks) {
        w->arrived = 0;
        w->generation++;
        pthread_cond_broadcast(&w->cond);
        return WEFT_OK;
    }
    while (w->generation == gen) {
        if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) != 0 && w->generation == gen &&
            weft__time_ns() >= deadline_ns) {
            return weft__error(WEFT_ERR_TIMEOUT,
                               "thread bootstrap: %d of %d ranks arrived before the deadline",
                               w->arrived, w->nranks);
        }
    }
    return WEFT_OK;
}

static weft_status_t boot_barrier(void *ctx_, uint64_t deadline_ns)
{
    boot_ctx_t *ctx = ctx_;
    weft_status_t status;

    pthread_mutex_lock(&ctx->world->lock);
    status = barrier_locked(ctx->world, deadline_ns);
    pthread_mutex_unlock(&ctx->world->lock);
    return status;
}

static weft_status_t boot_allgather(void *ctx_, const void *blob, void *blobs, size_t bytes,
                                    uint64_t deadline_ns)
{
    boot_ctx_t *ctx = ctx_;
    weft_thread_boot_world_t *w = ctx->world;
    size_t total = bytes * (size_t)w->nranks;
    weft_status_t status;

    pthread_mutex_lock(&w->lock);
    /* first barrier: nobody still reads the previous allgather's buffer */
    status = barrier_locked(w, deadline_ns);
    if (status == WEFT_OK && w->blobs_size < total) {
        unsigned char *p = realloc(w->blobs, total);

        if (p != NULL) {
            w->blobs = p;
            w->blobs_size = total;
        }
    }
    if (status == WEFT_OK && w->blobs_size < total) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "thread bootstrap: cannot allocate %zu bytes",
                             total);
    }
    if (status == WEFT_OK) {
        memcpy(w->blobs + (size_t)ctx->rank * bytes, blob, bytes);
        status = barrier_locked(w, deadline_ns);
    }
    if (status == WEFT_OK) {
        memcpy(blobs, w->blobs, total);
    }
    pthread_mutex_unlock(&w->lock);
    return status;
}

static void boot_release(void *ctx_)
{
    boot_ctx_t *ctx = ctx_;

    weft__thread_boot_world_release(ctx->world);
    free(ctx);
}

const weft_bootstrap_ops_t weft__thread_boot_ops = {
    .name = "thread",
    .allgather = boot_allgather,
    .barrier = boot_barrier,
    .release = boot_release,
};
