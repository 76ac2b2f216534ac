/*
 * weft_comm_split and weft_comm_dup.
 *
 * A child communicator talks through its parent's transport endpoint: its
 * ops translate child ranks into parent ranks and pass everything else
 * through. Messages never cross-match between parent and child because every
 * tag carries the communicator id, which the members agree on during the
 * split: each process proposes the next id it has never used, and the
 * members of a color take the largest proposal among them, so the id is
 * new to every member. The child holds a reference on its parent, so
 * destroying the parent first is safe. Parent and children share one
 * endpoint: drive them from one thread at a time.
 */
#include "runtime/comm.h"
#include "coll/coll.h"
#include "coll/diag/obs.h"
#include "runtime/init.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Children take ids from here up (world communicators from 0 or a unique
 * id's hash, runtime/world.c). */
static atomic_uint next_comm_id = 1;

typedef struct map_ep {
    weft_pt2pt_ops_t ops; /* map_ops, waking up as the parent's transport does */
    struct weft_comm *parent;
    int size;
    int map[]; /* child rank -> parent rank */
} map_ep_t;

/* A send's peer checked: its rank in the parent, or an error. */
static weft_status_t map_send_peer(const map_ep_t *ep, int peer, int *parent_p)
{
    if (peer < 0 || peer >= ep->size) {
        return weft__error(WEFT_ERR_INVALID_ARG, "send to rank %d of %d", peer, ep->size);
    }
    *parent_p = ep->map[peer];
    return WEFT_OK;
}

static weft_status_t map_isend(void *ep_, int peer, const void *buf, size_t bytes,
                               weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p)
{
    map_ep_t *ep = ep_;
    int to = -1;
    weft_status_t status = map_send_peer(ep, peer, &to);

    if (status != WEFT_OK) {
        return status;
    }
    return ep->parent->p2p->isend(ep->parent->p2p_ep, to, buf, bytes, memtype, tag, req_p);
}

static weft_status_t map_send_now(void *ep_, int peer, const void *buf, size_t bytes,
                                  weft_memtype_t memtype, uint64_t tag)
{
    map_ep_t *ep = ep_;
    int to = -1;
    weft_status_t status = map_send_peer(ep, peer, &to);

    if (status != WEFT_OK) {
        return status;
    }
    return ep->parent->p2p->send_now(ep->parent->p2p_ep, to, buf, bytes, memtype, tag);
}

static weft_status_t map_irecv(void *ep_, int peer, void *buf, size_t bytes, weft_memtype_t memtype,
                               uint64_t tag, weft_p2p_req_t **req_p)
{
    map_ep_t *ep = ep_;

    if ((peer < 0 && peer != WEFT_P2P_ANY) || peer >= ep->size) {
        return weft__error(WEFT_ERR_INVALID_ARG, "receive from rank %d of %d", peer, ep->size);
    }
    return ep->parent->p2p->irecv(ep->parent->p2p_ep,
                                  peer == WEFT_P2P_ANY ? WEFT_P2P_ANY : ep->map[peer], buf, bytes,
                                  memtype, tag, req_p);
}

static weft_status_t map_test(void *ep_, weft_p2p_req_t *req, int *done_p, int *src_p)
{
    map_ep_t *ep = ep_;
    int src = -1;
    weft_status_t status = ep->parent->p2p->test(ep->parent->p2p_ep, req, done_p, &src);

    if (*done_p && src_p != NULL) {
        /* the parent's rank back to the child's (tags carry the child's id,
         * so only its members send it messages) */
        *src_p = -1;
        for (int r = 0; r < ep->size && src >= 0; r++) {
            if (ep->map[r] == src) {
                *src_p = r;
                break;
            }
        }
    }
    return status;
}

static void map_cancel(void *ep_, weft_p2p_req_t *req)
{
    map_ep_t *ep = ep_;

    ep->parent->p2p->cancel(ep->parent->p2p_ep, req);
}

static int map_progress(void *ep_)
{
    map_ep_t *ep = ep_;

    return ep->parent->p2p->progress(ep->parent->p2p_ep);
}

static void map_idle_wait(void *ep_, uint64_t max_ns)
{
    map_ep_t *ep = ep_;

    ep->parent->p2p->idle_wait(ep->parent->p2p_ep, max_ns);
}

static void map_discard(void *ep_, const uint32_t *comm_ids, unsigned n)
{
    map_ep_t *ep = ep_;

    if (ep->parent->p2p->discard != NULL) {
        ep->parent->p2p->discard(ep->parent->p2p_ep, comm_ids, n);
    }
}

static void map_ep_release(void *ep_)
{
    map_ep_t *ep = ep_;

    weft__comm_put(ep->parent);
    free(ep);
}

/* The child's table: a copy of this with the parent's prompt_wakeup, and send_now where the
 * parent's table has one. */
static const weft_pt2pt_ops_t map_ops = {
    .name = "split",
    .isend = map_isend,
    .irecv = map_irecv,
    .test = map_test,
    .cancel = map_cancel,
    .progress = map_progress,
    .idle_wait = map_idle_wait,
    .discard = map_discard,
    .ep_release = map_ep_release,
};

/* The child's bootstrap: its own collectives, and the parent's liveness. */
typedef struct child_boot {
    struct weft_comm *self;
    map_ep_t *ep;
} child_boot_t;

static weft_status_t child_allgather(void *ctx_, const void *blob, void *blobs, size_t bytes,
                                     uint64_t deadline_ns)
{
    child_boot_t *ctx = ctx_;

    (void)deadline_ns; /* the collective has WEFT_TIMEOUT itself */
    return weft_allgather(blob, blobs, bytes, WEFT_UINT8, ctx->self->handle);
}

static weft_status_t child_barrier(void *ctx_, uint64_t deadline_ns)
{
    child_boot_t *ctx = ctx_;
    unsigned char one = 1;

    (void)deadline_ns;
    return weft_allreduce(WEFT_IN_PLACE, &one, 1, WEFT_UINT8, WEFT_MAX, ctx->self->handle);
}

static void child_release(void *ctx)
{
    free(ctx);
}

static int child_failed_rank(void *ctx_)
{
    child_boot_t *ctx = ctx_;
    struct weft_comm *parent = ctx->ep->parent;
    int failed;

    if (parent->boot->failed_rank == NULL ||
        (failed = parent->boot->failed_rank(parent->boot_ctx)) < 0) {
        return -1;
    }
    for (int r = 0; r < ctx->ep->size; r++) {
        if (ctx->ep->map[r] == failed) {
            return r;
        }
    }
    return -1;
}

static const weft_bootstrap_ops_t child_boot_ops = {
    .name = "split",
    .allgather = child_allgather,
    .barrier = child_barrier,
    .release = child_release,
    .failed_rank = child_failed_rank,
};

typedef struct member {
    int64_t key;
    int rank;
} member_t;

static int member_cmp(const void *a, const void *b)
{
    const member_t *x = a, *y = b;

    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/*
 * Every rank proposes (color, key, id) with the first id free on it from what
 * its color agreed last (first: this process's next id); a color whose
 * members all proposed one id takes it, which is then free on each of them.
 * Otherwise all ranks go round again from their color's largest proposal, so
 * that the ids of a split never share a tag with a live communicator (ids
 * wrap at 2^16 in tags). all holds the last round, 3 int64 per rank.
 */
static weft_status_t agree_id(weft_comm_t parent, int size, int color, int key, int64_t *all)
{
    uint32_t from = atomic_load(&next_comm_id);

    for (int round = 0; round < 64; round++) {
        int64_t mine[3] = {color, key, weft__comm_free_id(from)};
        weft_status_t status = weft_allgather(mine, all, 3, WEFT_INT64, parent);
        int agreed = 1;

        if (status != WEFT_OK) {
            return status;
        }
        for (int r = 0; r < size; r++) {
            for (int q = r + 1; q < size && agreed; q++) {
                agreed = all[3 * r] < 0 || all[3 * q] != all[3 * r] ||
                         all[3 * q + 2] == all[3 * r + 2];
            }
            if (all[3 * r] == color && (uint32_t)all[3 * r + 2] > from) {
                from = (uint32_t)all[3 * r + 2];
            }
        }
        if (agreed) {
            return WEFT_OK;
        }
    }
    return weft__error(WEFT_ERR_INTERNAL, "weft_comm_split: no communicator id free on every "
                                          "member after 64 rounds");
}

WEFT_EXPORT weft_status_t weft_comm_split(weft_comm_t handle, int color, int key, weft_comm_t *out_p)
{
    struct weft_comm *comm, *child;
    int64_t *all;
    member_t *members;
    map_ep_t *ep;
    child_boot_t *boot;
    int n = 0, newrank = -1;
    weft_node_map_t *nmap = NULL;
    uint32_t id = 0;
    weft_status_t status;

    weft__error_clear();
    status = weft__check_initialized("weft_comm_split");
    if (status != WEFT_OK) {
        return status;
    }
    status = weft__comm_check(handle, "weft_comm_split: comm", &comm);
    if (status != WEFT_OK) {
        return status;
    }
    if (out_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_comm_split: out is NULL");
    }
    all = malloc(sizeof(int64_t) * 3 * (size_t)comm->size);
    members = malloc(sizeof(member_t) * (size_t)comm->size);
    if (all == NULL || members == NULL) {
        free(all);
        free(members);
        return weft__error(WEFT_ERR_NO_MEMORY, "weft_comm_split of %d ranks", comm->size);
    }
    status = agree_id(handle, comm->size, color, key, all);
    if (status != WEFT_OK || color < 0) {
        free(all);
        free(members);
        if (status == WEFT_OK) {
            *out_p = NULL; /* not a member of any new communicator */
        }
        return status;
    }
    for (int r = 0; r < comm->size; r++) {
        if (all[3 * r] == color) {
            members[n].key = all[3 * r + 1];
            members[n].rank = r;
            id = (uint32_t)all[3 * r + 2] > id ? (uint32_t)all[3 * r + 2] : id;
            n++;
        }
    }
    free(all);
    qsort(members, (size_t)n, sizeof(*members), member_cmp);
    /* never hand out this id again in this process */
    for (unsigned cur = atomic_load(&next_comm_id);
         cur <= id && !atomic_compare_exchange_weak(&next_comm_id, &cur, id + 1);) {
    }
    ep = malloc(sizeof(*ep) + sizeof(int) * (size_t)n);
    boot = calloc(1, sizeof(*boot));
    if (ep == NULL || boot == NULL) {
        free(ep);
        free(boot);
        free(members);
        return weft__error(WEFT_ERR_NO_MEMORY, "weft_comm_split of %d ranks", comm->size);
    }
    ep->ops = map_ops;
    ep->ops.prompt_wakeup = comm->p2p->prompt_wakeup;
    ep->ops.send_now = comm->p2p->send_now != NULL ? map_send_now : NULL;
    ep->parent = comm;
    ep->size = n;
    for (int i = 0; i < n; i++) {
        ep->map[i] = members[i].rank;
        newrank = members[i].rank == comm->rank ? i : newrank;
    }
    free(members);
    status = weft__node_map_sub(comm->node, ep->map, n, newrank, &nmap);
    if (status != WEFT_OK) {
        free(ep);
        free(boot);
        return status;
    }
    boot->ep = ep;
    weft__comm_get(comm);
    status = weft__comm_create(newrank, n, id, &ep->ops, ep, &child_boot_ops, boot, &child);
    if (status != WEFT_OK) {
        weft__node_map_free(nmap);
        map_ep_release(ep);
        child_release(boot);
        return status;
    }
    boot->self = child;
    child->parent = comm;
    child->parent_rank = ep->map;
    child->oversubscribed = comm->oversubscribed;
    child->oversubscribed_any = comm->oversubscribed_any; /* agreed in the parent */
    child->timeout_s = comm->timeout_s;
    weft__coll_set_reproducible(child, comm->coll->reproducible);
    child->coll->cost_measured = comm->coll->cost_measured;
    weft__obs_comm_inherit(child, comm); /* one trace per rank of the job */
    child->coll->cost_alpha = comm->coll->cost_alpha;
    child->coll->cost_shm_alpha = comm->coll->cost_shm_alpha;
    child->coll->cost_beta = comm->coll->cost_beta;
    child->coll->cost_gamma = comm->coll->cost_gamma;
    status = weft__comm_node_setup(child, nmap);
    if (status != WEFT_OK) {
        weft_comm_destroy(child->handle);
        *out_p = NULL;
        return status;
    }
    weft__log_debug("split: color %d -> communicator %u, rank %d of %d", color, id, newrank, n);
    *out_p = child->handle;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_comm_dup(weft_comm_t handle, weft_comm_t *out_p)
{
    struct weft_comm *comm;
    weft_status_t status = weft__comm_check(handle, "weft_comm_dup: comm", &comm);

    if (status != WEFT_OK) {
        return status;
    }
    return weft_comm_split(handle, 0, comm->rank, out_p);
}
