/*
 * Emu streams: a worker thread per stream runs queued items in order
 * (copies, reductions, AVG divisions, flag writes, flag waits, device tasks:
 * weft's code run on the device, as a kernel would be). Queueing
 * never blocks. A flag wait spins briefly, then sleeps on the flag word
 * itself (futex), so the host side wakes it with weft__device_flag_set.
 *
 * Errors: the first failure of an item is kept and returned (and cleared)
 * by the next sync; later items still run, so flag writes that other
 * streams or the host wait for are never lost.
 *
 * A stream is known by a handle (base/handle.h), not its address, so that
 * weft__emu_stream_owns tells a live weft emu stream from any other value
 * (a destroyed stream's handle, a CUDA stream) without dereferencing it,
 * and a destroyed stream's memory is freed.
 */
#include "device/emu/emu.h"

#include "base/handle.h"
#include "device/host/host.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A flag wait polls this long before it sleeps on the flag. */
#define WAIT_SPIN_NS 20000ull
/* Longest sleep of a flag wait between checks (a lost wakeup costs this). */
#define WAIT_NAP_NS 1000000ull

typedef enum {
    ITEM_COPY,
    ITEM_REDUCE,
    ITEM_AVG,
    ITEM_WRITE,
    ITEM_RING,
    ITEM_WAIT,
    ITEM_TASK
} item_kind_t;

typedef struct item {
    item_kind_t kind;
    void *dst;
    const void *src;
    size_t bytes; /* copy: bytes; reduce, avg: elements */
    weft_dtype_t dtype;
    weft_op_t op;
    int nsrcs;
    size_t divisor;
    uint32_t *flag;
    uint32_t value;
    void (*fn)(void *); /* a device task */
    void *arg;
    struct item *next;
    const void *srcs[]; /* reduce inputs */
} item_t;

struct weft_emu_stream {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work; /* items queued, or stop */
    pthread_cond_t idle; /* the queue ran empty */
    item_t *head, *tail;
    int running; /* the worker holds an item */
    int stop;
    weft_status_t error;
};

static weft_handle_table_t streams = WEFT_HANDLE_TABLE_INIT("emu stream", 0xe0);

static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static atomic_int waiting; /* workers blocked in wait_flag */

int weft__emu_streams_waiting(void)
{
    return atomic_load(&waiting);
}

static void wait_flag(uint32_t *flag, uint32_t value)
{
    uint64_t start = now_ns();
    _Atomic uint32_t *f = (_Atomic uint32_t *)flag;
    uint32_t seen;

    if (atomic_load_explicit(f, memory_order_acquire) >= value) {
        return;
    }
    atomic_fetch_add(&waiting, 1);
    while ((seen = atomic_load_explicit(f, memory_order_acquire)) < value) {
        if (now_ns() - start < WAIT_SPIN_NS) {
            sched_yield();
        } else {
            struct timespec nap = {0, WAIT_NAP_NS};

            futex(flag, FUTEX_WAIT, seen, &nap);
        }
    }
    atomic_fetch_sub(&waiting, 1);
}

static weft_status_t run_item(const item_t *it)
{
    switch (it->kind) {
    case ITEM_COPY:
        if (it->dst != it->src && it->bytes > 0) {
            memmove(it->dst, it->src, it->bytes);
        }
        return WEFT_OK;
    case ITEM_REDUCE:
        return weft__host_reduce(it->dst, it->srcs, it->nsrcs, it->bytes, it->dtype, it->op);
    case ITEM_AVG:
        return weft__host_avg_finalize(it->dst, it->bytes, it->dtype, it->divisor);
    case ITEM_WRITE:
        weft__device_flag_set(it->flag, it->value);
        return WEFT_OK;
    case ITEM_RING:
        weft__device_doorbell_ring();
        return WEFT_OK;
    case ITEM_WAIT:
        wait_flag(it->flag, it->value);
        return WEFT_OK;
    case ITEM_TASK:
        it->fn(it->arg); /* it reports its own failures (runtime/enqueue.c) */
        return WEFT_OK;
    }
    return weft__error(WEFT_ERR_INTERNAL, "emu stream: unknown item %d", (int)it->kind);
}

/* Set on the workers: the device's own threads. */
static _Thread_local int on_device;

int weft__emu_on_device(void)
{
    return on_device;
}

static void *worker(void *arg)
{
    weft_emu_stream_t *st = arg;

    on_device = 1;
    pthread_mutex_lock(&st->lock);
    for (;;) {
        item_t *it;
        weft_status_t status;

        while (st->head == NULL && !st->stop) {
            pthread_cond_wait(&st->work, &st->lock);
        }
        if (st->head == NULL) {
            break;
        }
        it = st->head;
        st->head = it->next;
        if (st->head == NULL) {
            st->tail = NULL;
        }
        st->running = 1;
        pthread_mutex_unlock(&st->lock);
        status = run_item(it);
        free(it);
        pthread_mutex_lock(&st->lock);
        st->running = 0;
        if (status != WEFT_OK && st->error == WEFT_OK) {
            st->error = status;
        }
        if (st->head == NULL) {
            pthread_cond_broadcast(&st->idle);
        }
    }
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

int weft__emu_stream_owns(void *stream)
{
    return weft__handle_get(&streams, stream) != NULL;
}

int weft__emu_stream_destroyed(void *stream)
{
    return weft__handle_stale(&streams, stream);
}

/* The stream of a handle weft__emu_stream_owns accepted. */
static weft_emu_stream_t *of(void *stream)
{
    return weft__handle_get(&streams, stream);
}

weft_status_t weft__emu_stream_create(void **stream_p)
{
    weft_emu_stream_t *st = calloc(1, sizeof(*st));
    weft_status_t status;
    int rc;

    if (st == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "emu: cannot allocate a stream");
    }
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->work, NULL);
    pthread_cond_init(&st->idle, NULL);
    rc = pthread_create(&st->thread, NULL, worker, st);
    if (rc != 0) {
        free(st);
        return weft__error(WEFT_ERR_NO_MEMORY, "emu: cannot start a stream worker: %s",
                           strerror(rc));
    }
    status = weft__handle_add(&streams, st, stream_p);
    if (status != WEFT_OK) {
        pthread_mutex_lock(&st->lock);
        st->stop = 1;
        pthread_cond_signal(&st->work);
        pthread_mutex_unlock(&st->lock);
        pthread_join(st->thread, NULL);
        free(st);
        return status;
    }
    return WEFT_OK;
}

static void stream_free(weft_emu_stream_t *st)
{
    /* the worker finishes what was queued, then exits */
    pthread_mutex_lock(&st->lock);
    st->stop = 1;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->lock);
    pthread_join(st->thread, NULL);
    pthread_cond_destroy(&st->work);
    pthread_cond_destroy(&st->idle);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

weft_status_t weft__emu_stream_destroy(void *stream)
{
    weft_emu_stream_t *st = weft__handle_remove(&streams, stream);

    if (st == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_stream_destroy: %p is not an emu stream",
                           stream);
    }
    stream_free(st);
    return WEFT_OK;
}

weft_status_t weft__emu_stream_sync(void *stream)
{
    weft_emu_stream_t *st = of(stream);
    weft_status_t status;

    pthread_mutex_lock(&st->lock);
    while (st->head != NULL || st->running) {
        pthread_cond_wait(&st->idle, &st->lock);
    }
    status = st->error;
    st->error = WEFT_OK;
    pthread_mutex_unlock(&st->lock);
    if (status != WEFT_OK) {
        return weft__error(status, "emu stream %p: queued work failed (%s)", stream,
                           weft_status_string(status));
    }
    return WEFT_OK;
}

static weft_status_t push(weft_emu_stream_t *st, item_t *it)
{
    if (it == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "emu: cannot queue work");
    }
    it->next = NULL;
    pthread_mutex_lock(&st->lock);
    if (st->tail != NULL) {
        st->tail->next = it;
    } else {
        st->head = it;
    }
    st->tail = it;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->lock);
    return WEFT_OK;
}

weft_status_t weft__emu_memcpy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    item_t *it = calloc(1, sizeof(*it));

    if (it != NULL) {
        *it = (item_t){.kind = ITEM_COPY, .dst = dst, .src = src, .bytes = bytes};
    }
    return push(of(stream), it);
}

weft_status_t weft__emu_reduce_async(void *stream, void *dst, const void *const *srcs, int nsrcs,
                                     size_t count, weft_dtype_t dtype, weft_op_t op)
{
    item_t *it = calloc(1, sizeof(*it) + (size_t)nsrcs * sizeof(void *));

    if (it != NULL) {
        *it = (item_t){.kind = ITEM_REDUCE, .dst = dst, .bytes = count, .dtype = dtype,
                       .op = op, .nsrcs = nsrcs};
        memcpy(it->srcs, srcs, (size_t)nsrcs * sizeof(void *));
    }
    return push(of(stream), it);
}

weft_status_t weft__emu_avg_async(void *stream, void *buf, size_t count, weft_dtype_t dtype,
                                  size_t divisor)
{
    item_t *it = calloc(1, sizeof(*it));

    if (it != NULL) {
        *it = (item_t){.kind = ITEM_AVG, .dst = buf, .bytes = count, .dtype = dtype,
                       .divisor = divisor};
    }
    return push(of(stream), it);
}

weft_status_t weft__emu_write_flag(void *stream, uint32_t *flag, uint32_t value)
{
    item_t *it = calloc(1, sizeof(*it));

    if (it != NULL) {
        *it = (item_t){.kind = ITEM_WRITE, .flag = flag, .value = value};
    }
    return push(of(stream), it);
}

weft_status_t weft__emu_ring(void *stream)
{
    item_t *it = calloc(1, sizeof(*it));

    if (it != NULL) {
        *it = (item_t){.kind = ITEM_RING};
    }
    return push(of(stream), it);
}

weft_status_t weft__emu_wait_flag(void *stream, uint32_t *flag, uint32_t value)
{
    item_t *it = calloc(1, sizeof(*it));

    if (it != NULL) {
        *it = (item_t){.kind = ITEM_WAIT, .flag = flag, .value = value};
    }
    return push(of(stream), it);
}

weft_status_t weft__emu_task_async(void *stream, void (*fn)(void *), void *arg)
{
    item_t *it = calloc(1, sizeof(*it));

    if (it != NULL) {
        *it = (item_t){.kind = ITEM_TASK, .fn = fn, .arg = arg};
    }
    return push(of(stream), it);
}

static void thread_stream_release(void *stream)
{
    weft_emu_stream_t *st = weft__handle_remove(&streams, stream);

    if (st != NULL) {
        stream_free(st);
    }
}

static void thread_key_create(void)
{
    pthread_key_create(&thread_key, thread_stream_release);
}

weft_status_t weft__emu_thread_stream(void **stream_p)
{
    void *st;
    weft_status_t status;

    pthread_once(&thread_key_once, thread_key_create);
    st = pthread_getspecific(thread_key);
    if (st == NULL) {
        status = weft__emu_stream_create(&st);
        if (status != WEFT_OK) {
            return status;
        }
        pthread_setspecific(thread_key, st);
    }
    *stream_p = st;
    return WEFT_OK;
}
