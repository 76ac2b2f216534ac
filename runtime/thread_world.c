/* In-process worlds: loop transport + thread bootstrap, one thread per rank. */
#include "runtime/thread_world.h"

#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/init.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct rank_thread {
    pthread_t thread;
    struct weft_comm *comm;
    weft_thread_rank_fn fn;
    void *arg;
    weft_node_map_t *map; /* handed to the communicator by the rank's thread */
} rank_thread_t;

static void *rank_main(void *arg)
{
    rank_thread_t *t = arg;

    weft__log_set_rank(t->comm->rank);
    /* the node's shared memory needs every rank: set it up here, together */
    if (weft__comm_node_setup(t->comm, t->map) != WEFT_OK) {
        weft__log_error("rank %d: node setup failed: %s", t->comm->rank, weft_last_error());
    }
    t->map = NULL;
    t->fn(t->comm->handle, t->comm->rank, t->arg);
    return NULL;
}

/* Every rank is a thread of this process: one real node, cut into virtual
 * ones by WEFT_RANKS_PER_NODE. */
static weft_status_t thread_map(int rank, int size, weft_node_map_t **map_p)
{
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)size);
    weft_status_t status;

    if (keys == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "node map of %d ranks", size);
    }
    for (int r = 0; r < size; r++) {
        keys[r] = 1;
    }
    status = weft__node_map_create(keys, size, rank, weft__runtime_config.ranks_per_node, map_p);
    free(keys);
    return status;
}

weft_status_t weft__thread_world_comm(weft_loop_world_t *lw, weft_thread_boot_world_t *bw, int rank,
                                      int size, struct weft_comm **comm_p)
{
    void *ep = NULL, *boot = NULL;
    weft_status_t status;

    WEFT_CHECK_GOTO(weft__loop_ep_create(lw, rank, &ep), err);
    WEFT_CHECK_GOTO(weft__thread_boot_ctx_create(bw, rank, &boot), err_release_ep);
    WEFT_CHECK_GOTO(
        weft__comm_create(rank, size, 0, &weft__loop_ops, ep, &weft__thread_boot_ops, boot, comm_p),
        err_release_boot);
    /* every rank is a thread of this process */
    (*comm_p)->oversubscribed = size > weft__usable_cores();
    (*comm_p)->oversubscribed_any = (*comm_p)->oversubscribed; /* one machine */
    return WEFT_OK;

err_release_boot:
    weft__thread_boot_ops.release(boot);
err_release_ep:
    weft__loop_ops.ep_release(ep);
err:
    return status;
}

weft_status_t weft__thread_world_run(const weft_thread_world_opts_t *opts, weft_thread_rank_fn fn,
                                     void *arg)
{
    weft_loop_opts_t lopts = {opts->nranks, opts->seed, opts->max_delay_ns};
    weft_loop_world_t *lw;
    weft_thread_boot_world_t *bw;
    rank_thread_t *threads;
    weft_status_t status;
    int made = 0, started = 0;

    WEFT_CHECK_GOTO(weft__check_initialized("weft__thread_world_run"), err);
    WEFT_CHECK_GOTO(weft__loop_world_create(&lopts, &lw), err);
    WEFT_CHECK_GOTO(weft__thread_boot_world_create(opts->nranks, &bw), err_release_loop);
    threads = calloc((size_t)opts->nranks, sizeof(*threads));
    if (threads == NULL) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate %d rank threads", opts->nranks);
        goto err_release_boot;
    }
    for (; made < opts->nranks; made++) {
        WEFT_CHECK_GOTO(thread_map(made, opts->nranks, &threads[made].map), err_destroy_comms);
        status = weft__thread_world_comm(lw, bw, made, opts->nranks, &threads[made].comm);
        if (status != WEFT_OK) {
            weft__node_map_free(threads[made].map);
            goto err_destroy_comms;
        }
        weft__comm_pin(threads[made].comm);
        threads[made].fn = fn;
        threads[made].arg = arg;
    }
    for (; started < opts->nranks; started++) {
        pthread_attr_t attr;
        int rc;

        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        rc = pthread_create(&threads[started].thread, &attr, rank_main, &threads[started]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            /* ranks already running would wait for the missing ones until
             * their deadline; report the failure after they give up */
            status = weft__error(WEFT_ERR_NO_MEMORY, "cannot start rank thread %d of %d", started,
                                 opts->nranks);
            break;
        }
    }
    for (int r = 0; r < started; r++) {
        pthread_join(threads[r].thread, NULL);
    }
    if (started < opts->nranks) {
        goto err_destroy_comms;
    }
    status = WEFT_OK;

err_destroy_comms:
    for (int r = 0; r < made; r++) {
        /* the body may have destroyed it: the pin keeps the struct to ask */
        if (threads[r].comm->handle != NULL) {
            weft_comm_destroy(threads[r].comm->handle);
        }
        weft__comm_unpin(threads[r].comm);
        weft__node_map_free(threads[r].map);
    }
    free(threads);
err_release_boot:
    weft__thread_boot_world_release(bw);
err_release_loop:
    weft__loop_world_release(lw);
err:
    return status;
}
