/*
 * Communicators between processes: weft_comm_world (PMIx, else a unique id
 * from the environment, else this process alone), weft_get_unique_id and
 * weft_comm_init_rank. Every rank publishes its UCX worker address through
 * the bootstrap; the UCX endpoint table connects lazily from those.
 */
#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/init.h"
#include "runtime/thread_world.h"

#include "coll/cost.h"

#include "bootstrap/pmix/pmix.h"
#include "bootstrap/tcp/tcp.h"
#include "pt2pt/ucx/ucx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(weft_unique_id_t) == sizeof(weft_tcp_id_t),
               "the public unique id carries a TCP bootstrap id");

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/*
 * Measure the cost model's parameters (coll/cost.h) for a new communicator:
 * pairs of ranks (r, r ^ 1) time 8-byte and 256 KiB ping-pongs (the median
 * of a few rounds after one that connects), local ranks 0 and 1 of each
 * node time a flag handoff through the node's segment (first, while the
 * ranks arrive together), every rank times a local reduction, and all
 * ranks take the largest values, so they select the same algorithms.
 */
static weft_status_t measure_cost(struct weft_comm *comm)
{
    enum { SMALL_ROUNDS = 16, BIG_ROUNDS = 4, BIG = 256 << 10 };
    const weft_device_ops_t *dev = &weft__device_host_ops;
    weft_cost_params_t def;
    double m[4] = {0, 0, 0, 0}; /* alpha, beta, gamma, shm alpha */
    const weft_node_map_t *map = comm->node;
    int partner = comm->rank ^ 1, first;
    float *a = calloc(BIG / sizeof(float), sizeof(float));
    float *b = calloc(BIG / sizeof(float), sizeof(float));
    const void *srcs[2] = {a, b};
    weft_status_t status = WEFT_OK;
    uint64_t t0;

    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return weft__error(WEFT_ERR_NO_MEMORY, "cost measurement buffers");
    }
    m[3] = weft__cost_measure_shm_alpha(comm);
    /* between nodes where there are several: that is where point-to-point
     * algorithms run when a node's ranks share memory */
    if (map != NULL && map->nnodes > 1) {
        int other = map->node ^ 1;

        partner = other < map->nnodes && map->uniform
                      ? map->rank_at[other * map->max_local + map->local_rank]
                      : comm->size;
    }
    first = comm->rank < partner;
    weft__cost_defaults(&def);
    if (partner < comm->size) {
        /* the first round connects the endpoints; then the median round
         * counts: ranks that share cores pay for being descheduled in every
         * collective, so that belongs in alpha */
        for (int phase = 0; phase < 2 && status == WEFT_OK; phase++) {
            size_t count = phase == 0 ? 2 : BIG / sizeof(float);
            int rounds = phase == 0 ? SMALL_ROUNDS : BIG_ROUNDS;
            double times[SMALL_ROUNDS], best;

            for (int i = 0; i <= rounds && status == WEFT_OK; i++) {
                t0 = weft__time_ns();
                status = first ? weft_send(a, count, WEFT_FLOAT32, partner, 1, comm->handle)
                               : weft_recv(a, count, WEFT_FLOAT32, partner, 1, comm->handle);
                if (status == WEFT_OK) {
                    status = first ? weft_recv(a, count, WEFT_FLOAT32, partner, 1, comm->handle)
                                   : weft_send(a, count, WEFT_FLOAT32, partner, 1, comm->handle);
                }
                if (i > 0) {
                    times[i - 1] = (double)(weft__time_ns() - t0) / 1e9 / 2;
                }
            }
            if (status != WEFT_OK) {
                break;
            }
            qsort(times, (size_t)rounds, sizeof(double), cmp_double);
            best = times[rounds / 2];
            if (phase == 0) {
                m[0] = best;
            } else {
                m[1] = fmax(best - m[0], 0) / BIG;
            }
        }
    }
    if (status == WEFT_OK) {
        t0 = weft__time_ns();
        for (int i = 0; i < 4 && status == WEFT_OK; i++) {
            status = dev->reduce(a, srcs, 2, BIG / sizeof(float), WEFT_FLOAT32, WEFT_SUM);
        }
        m[2] = (double)(weft__time_ns() - t0) / 1e9 / 4 / BIG;
        status = weft_allreduce(WEFT_IN_PLACE, m, 4, WEFT_FLOAT64, WEFT_MAX, comm->handle);
    }
    free(a);
    free(b);
    if (status != WEFT_OK) {
        return status;
    }
    comm->coll->cost_alpha = m[0] > 0 ? m[0] : def.alpha;
    comm->coll->cost_beta = m[1] > 0 ? m[1] : def.beta;
    comm->coll->cost_gamma = m[2] > 0 ? m[2] : def.gamma;
    comm->coll->cost_shm_alpha = m[3];
    comm->coll->cost_measured = 1;
    weft__log_info("cost model: alpha %.2f us, beta %.2f GB/s, gamma %.2f GB/s, shared-memory "
                   "handoff %.2f us",
                   comm->coll->cost_alpha * 1e6, 1e-9 / comm->coll->cost_beta,
                   1e-9 / comm->coll->cost_gamma, comm->coll->cost_shm_alpha * 1e6);
    return WEFT_OK;
}

/* What each rank tells the others first: its UCX worker address's length,
 * its node, its machine (comm/node.h) and the communicator id it proposes. */
typedef struct rank_info {
    uint64_t addr_len;
    uint64_t node;
    uint64_t id;
    weft_machine_info_t machine;
} rank_info_t;

/*
 * The communicator's id (part of every tag; ids wrap in WEFT_TAG_COMM_BITS):
 * one that no communicator of any member holds or held lately, since they
 * share each process's UCX worker with this one (two worlds at once, a
 * world made again after one was released, two unique-id jobs between the
 * same processes). Each rank proposed the first id free on it from the
 * job's starting id; while the proposals differ, all go round again from
 * the largest, as weft_comm_split does (runtime/comm_split.c).
 */
static weft_status_t agree_id(const weft_bootstrap_ops_t *boot, void *boot_ctx,
                              const rank_info_t *infos, int size, uint64_t deadline, uint32_t *id_p)
{
    uint64_t top = 0, mine, *ids = NULL;
    int same = 1;
    weft_status_t status = WEFT_OK;

    for (int r = 0; r < size; r++) {
        top = infos[r].id > top ? infos[r].id : top;
        same = same && infos[r].id == infos[0].id;
    }
    for (int round = 0; !same && status == WEFT_OK; round++) {
        if (round == 64) {
            status = weft__error(WEFT_ERR_INTERNAL, "no communicator id free on every rank after "
                                                    "64 rounds");
            break;
        }
        if (ids == NULL && (ids = calloc((size_t)size, sizeof(*ids))) == NULL) {
            status = weft__error(WEFT_ERR_NO_MEMORY, "communicator ids of %d ranks", size);
            break;
        }
        mine = weft__comm_free_id((uint32_t)top);
        status = boot->allgather(boot_ctx, &mine, ids, sizeof(mine), deadline);
        same = 1;
        for (int r = 0; r < size && status == WEFT_OK; r++) {
            top = ids[r] > top ? ids[r] : top;
            same = same && ids[r] == ids[0];
        }
    }
    free(ids);
    *id_p = (uint32_t)top;
    return status;
}

/* Exchange worker addresses and build the communicator (takes boot_ctx); its
 * id is the first free on every rank from id on (agree_id). */
static weft_status_t comm_from_bootstrap(const weft_bootstrap_ops_t *boot, void *boot_ctx,
                                         uint32_t id, int rank, int size, struct weft_comm **comm_p)
{
    uint64_t deadline = weft__deadline_ns();
    weft_ucx_context_t *ucx = NULL;
    const void *addr;
    size_t len, maxlen = 0;
    int local = 0;
    rank_info_t mine, *infos = NULL;
    uint64_t *keys = NULL; /* node keys */
    weft_node_map_t *map = NULL;
    size_t *alens = NULL;
    unsigned char *blob = NULL, *addrs = NULL;
    void *ep = NULL;
    weft_status_t status;

    WEFT_CHECK_GOTO(weft__ucx_context_get(&ucx), err_release_boot);
    WEFT_CHECK_GOTO(weft__ucx_worker_address(ucx, &addr, &len), err_put);
    infos = calloc((size_t)size, sizeof(*infos));
    keys = calloc((size_t)size, sizeof(*keys));
    alens = calloc((size_t)size, sizeof(*alens));
    if (infos == NULL || keys == NULL || alens == NULL) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "address table of %d ranks", size);
        goto err_free;
    }
    memset(&mine, 0, sizeof(mine));
    mine.addr_len = len;
    mine.node = weft__node_key();
    mine.id = weft__comm_free_id(id);
    weft__machine_info(&mine.machine);
    WEFT_CHECK_GOTO(boot->allgather(boot_ctx, &mine, infos, sizeof(mine), deadline), err_free);
    WEFT_CHECK_GOTO(agree_id(boot, boot_ctx, infos, size, deadline, &id), err_free);
    for (int r = 0; r < size; r++) {
        alens[r] = (size_t)infos[r].addr_len;
        maxlen = alens[r] > maxlen ? alens[r] : maxlen;
        local += infos[r].node == mine.node;
        keys[r] = infos[r].node;
    }
    blob = calloc(1, maxlen);
    addrs = calloc((size_t)size, maxlen);
    if (blob == NULL || addrs == NULL) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "address table of %d ranks", size);
        goto err_free;
    }
    memcpy(blob, addr, len);
    WEFT_CHECK_GOTO(boot->allgather(boot_ctx, blob, addrs, maxlen, deadline), err_free);
    WEFT_CHECK_GOTO(weft__ucx_ep_create(ucx, rank, size, addrs, maxlen, alens, &ep), err_free);
    WEFT_CHECK_GOTO(weft__comm_create(rank, size, id, &weft__ucx_ops, ep, boot, boot_ctx, comm_p),
                    err_release_ep);
    (*comm_p)->oversubscribed =
        weft__machine_oversubscribed(&infos[0].machine, sizeof(*infos), size, rank);
    (*comm_p)->oversubscribed_any =
        weft__machines_oversubscribed_any(&infos[0].machine, sizeof(*infos), size);
    status =
        (*comm_p)->oversubscribed_any < 0
            ? weft__error(WEFT_ERR_NO_MEMORY, "machine table of %d ranks", size)
            : weft__node_map_create(keys, size, rank, weft__runtime_config.ranks_per_node, &map);
    if (status == WEFT_OK) {
        status = weft__comm_node_setup(*comm_p, map);
    }
    if (status == WEFT_OK && weft__coll_config.cost_measure && size > 1) {
        status = measure_cost(*comm_p);
    }
    if (status != WEFT_OK) {
        if (boot->fail != NULL) {
            boot->fail(boot_ctx, status, weft__error_detail());
        }
        weft_comm_destroy((*comm_p)->handle);
        goto err_free_only;
    }
    weft__log_set_rank(rank);
    weft__log_info("communicator of %d ranks over %s bootstrap and ucx; %d on this node%s; "
                   "%d node(s)%s, %d rank(s) on this one%s",
                   size, boot->name, local,
                   (*comm_p)->oversubscribed ? ", more ranks on this machine than cores" : "",
                   map->nnodes, weft__runtime_config.ranks_per_node > 0 ? " (virtual)" : "",
                   map->local_size, (*comm_p)->coll->shm != NULL ? ", shared memory" : "");
    free(infos);
    free(keys);
    free(alens);
    free(blob);
    free(addrs);
    weft__ucx_context_put(ucx); /* the endpoint table holds its own reference */
    return WEFT_OK;

err_free_only:
    free(infos);
    free(keys);
    free(alens);
    free(blob);
    free(addrs);
    weft__ucx_context_put(ucx);
    return status;

err_release_ep:
    weft__ucx_ops.ep_release(ep);
err_free:
    free(infos);
    free(keys);
    free(alens);
    free(blob);
    free(addrs);
err_put:
    weft__ucx_context_put(ucx);
err_release_boot:
    if (boot->fail != NULL) {
        /* the others learn it now instead of waiting for this rank until
         * their deadline (and the root, when it lives here, for them) */
        boot->fail(boot_ctx, status, weft__error_detail());
    }
    boot->release(boot_ctx);
    return status;
}

/*
 * Where the id search of a job made from a unique id starts (agree_id):
 * from the id's bytes (its random job token among them), in the upper half
 * of the id space, so that two such jobs between the same processes,
 * created at once by two threads, almost never propose the same id, nor
 * the ids of communicators split or duplicated (from 1 up,
 * runtime/comm_split.c) or of the PMIx world (from 0).
 */
static uint32_t id_comm_id(const weft_tcp_id_t *id)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (size_t i = 0; i < sizeof(id->bytes); i++) {
        h = (h ^ id->bytes[i]) * 16777619u;
    }
    return 0x8000u | ((h ^ (h >> 16)) & 0x7fffu);
}

static weft_status_t comm_from_id(int nranks, const weft_tcp_id_t *id, int rank,
                                  struct weft_comm **comm_p)
{
    void *ctx;
    weft_status_t status = weft__tcp_boot_create(id, nranks, rank, weft__deadline_ns(), &ctx);

    if (status != WEFT_OK) {
        return status;
    }
    return comm_from_bootstrap(&weft__tcp_boot_ops, ctx, id_comm_id(id), rank, nranks, comm_p);
}

static weft_status_t comm_singleton(struct weft_comm **comm_p)
{
    weft_loop_opts_t lopts = {.nranks = 1};
    weft_loop_world_t *lw;
    weft_thread_boot_world_t *bw;
    weft_status_t status;

    WEFT_CHECK_GOTO(weft__loop_world_create(&lopts, &lw), err);
    WEFT_CHECK_GOTO(weft__thread_boot_world_create(1, &bw), err_release_loop);
    status = weft__thread_world_comm(lw, bw, 0, 1, comm_p);
    if (status == WEFT_OK) {
        uint64_t key = weft__node_key();
        weft_node_map_t *map;

        status = weft__node_map_create(&key, 1, 0, 0, &map);
        status = status == WEFT_OK ? weft__comm_node_setup(*comm_p, map) : status;
        if (status != WEFT_OK) {
            weft_comm_destroy((*comm_p)->handle);
        }
    }
    /* on success the communicator holds both worlds */
    weft__thread_boot_world_release(bw);
err_release_loop:
    weft__loop_world_release(lw);
err:
    return status;
}

static weft_status_t comm_world(struct weft_comm **comm)
{
    const weft_runtime_config_t *cfg = &weft__runtime_config;
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized("weft_comm_world");
    if (status != WEFT_OK) {
        return status;
    }
    if (comm == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_comm_world: comm is NULL");
    }
    if (weft__pmix_launched()) {
        void *ctx;
        int rank, size;

        status = weft__pmix_boot_create(&ctx, &rank, &size);
        if (status != WEFT_OK) {
            return status;
        }
        return comm_from_bootstrap(&weft__pmix_boot_ops, ctx, 0, rank, size, comm);
    }
    if (cfg->unique_id[0] != '\0') {
        weft_tcp_id_t id;

        status = weft__tcp_id_from_string(cfg->unique_id, &id);
        if (status != WEFT_OK) {
            return weft__error(status, "weft_comm_world: WEFT_UNIQUE_ID is not a unique id");
        }
        if (cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "weft_comm_world: WEFT_UNIQUE_ID needs WEFT_RANK in "
                               "[0, WEFT_NRANKS) (got rank %d of %d)",
                               cfg->rank, cfg->nranks);
        }
        return comm_from_id(cfg->nranks, &id, cfg->rank, comm);
    }
    return comm_singleton(comm);
}

WEFT_EXPORT weft_status_t weft_get_unique_id(weft_unique_id_t *id_p)
{
    const char *addr = weft__runtime_config.bootstrap_addr;
    weft_tcp_id_t tid;
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized("weft_get_unique_id");
    if (status != WEFT_OK) {
        return status;
    }
    if (id_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_get_unique_id: id is NULL");
    }
    status = weft__tcp_id_create(addr != NULL && addr[0] != '\0' ? addr : NULL, &tid);
    if (status == WEFT_OK) {
        memcpy(id_p->internal, tid.bytes, sizeof(id_p->internal));
    }
    return status;
}

static weft_status_t comm_init_rank(int nranks, const weft_unique_id_t *id, int rank,
                                    struct weft_comm **comm)
{
    weft_tcp_id_t tid;
    char text[WEFT_TCP_ID_STRLEN + 1];
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized("weft_comm_init_rank");
    if (status != WEFT_OK) {
        return status;
    }
    if (id == NULL || comm == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_comm_init_rank: %s is NULL",
                           id == NULL ? "id" : "comm");
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_comm_init_rank: rank %d is not in [0, nranks = %d)", rank, nranks);
    }
    memcpy(tid.bytes, id->internal, sizeof(tid.bytes));
    /* validate the id's header the same way a text id is validated */
    status = weft__tcp_id_to_string(&tid, text, sizeof(text));
    if (status == WEFT_OK) {
        status = weft__tcp_id_from_string(text, &tid);
    }
    if (status != WEFT_OK) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_comm_init_rank: id is not a unique id");
    }
    return comm_from_id(nranks, &tid, rank, comm);
}

WEFT_EXPORT weft_status_t weft_comm_world(weft_comm_t *comm_p)
{
    struct weft_comm *comm;
    weft_status_t status = comm_world(comm_p != NULL ? &comm : NULL);

    if (status == WEFT_OK) {
        *comm_p = comm->handle;
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_comm_init_rank(int nranks, const weft_unique_id_t *id, int rank,
                                              weft_comm_t *comm_p)
{
    struct weft_comm *comm;
    weft_status_t status = comm_init_rank(nranks, id, rank, comm_p != NULL ? &comm : NULL);

    if (status == WEFT_OK) {
        *comm_p = comm->handle;
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_unique_id_to_string(const weft_unique_id_t *id, char *buf,
                                                   size_t len)
{
    weft_tcp_id_t tid;

    if (id == NULL || buf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_unique_id_to_string: %s is NULL",
                           id == NULL ? "id" : "buf");
    }
    memcpy(tid.bytes, id->internal, sizeof(tid.bytes));
    return weft__tcp_id_to_string(&tid, buf, len);
}

WEFT_EXPORT weft_status_t weft_unique_id_from_string(const char *text, weft_unique_id_t *id_p)
{
    weft_tcp_id_t tid;
    weft_status_t status;

    if (text == NULL || id_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_unique_id_from_string: %s is NULL",
                           text == NULL ? "text" : "id");
    }
    status = weft__tcp_id_from_string(text, &tid);
    if (status == WEFT_OK) {
        memcpy(id_p->internal, tid.bytes, sizeof(id_p->internal));
    }
    return status;
}
