/*
 * Single-copy shared-memory rounds (coll/shm/op.h): instead of staging the
 * data through the segment's slots, a rank reads its peers' buffers where
 * they are, by process_vm_readv (host allreduce) or through IPC handles of
 * device memory (allgather, bcast, reduce). Both publish addresses or
 * handles in the segment and wait, before returning, until every peer is
 * done reading this rank's buffers. A rank closes its imports of the peers'
 * buffers before it says done, so that none is open once a call returned.
 */
#include "coll/shm/op.h"
#include "device/host/host.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

/* 0 once local rank q's process has exited (its pidfd is readable): what a
 * read by its pid returned may come from another process (segment.c,
 * open_pidfds). 1 while it runs, and where there is no pidfd. */
static int peer_ran(const weft_shm_t *shm, int q)
{
    struct pollfd p = {.fd = shm->pidfd != NULL ? shm->pidfd[q] : -1, .events = POLLIN};

    return p.fd < 0 || poll(&p, 1, 0) != 1; /* an error of poll itself says nothing */
}

/* bytes from local rank q's address space at raddr into dst. */
static weft_status_t cma_read(shm_op_t *o, int q, void *dst, uint64_t raddr, size_t bytes)
{
    pid_t pid = (pid_t)o->shm->ctrl[q].pid;

    while (bytes > 0) {
        struct iovec local = {dst, bytes}, remote = {(void *)(uintptr_t)raddr, bytes};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

        if (n <= 0) {
            return weft__error(errno == ESRCH ? WEFT_ERR_PEER_FAILED : WEFT_ERR_TRANSPORT,
                               "reading %zu bytes of rank %d's buffer (process_vm_readv): %s",
                               bytes, o->shm->local_ranks[q], strerror(errno));
        }
        dst = (char *)dst + n;
        raddr += (uint64_t)n;
        bytes -= (size_t)n;
        o->shm->cma_bytes += (uint64_t)n;
    }
    return peer_ran(o->shm, q) ? WEFT_OK
                               : weft__error(WEFT_ERR_PEER_FAILED,
                                             "rank %d failed (its process %ld on this node "
                                             "exited while this rank read its buffer)",
                                             o->shm->local_ranks[q], (long)pid);
}

/* Whether this rank maps local rank q's buffers in an IPC operation: bcast reads the root's,
 * reduce the root reads everyone's, allgather and allreduce every rank reads every other's. */
static int reads_from(const shm_op_t *o, int q)
{
    int me = o->shm->me;

    return q != me && (o->kind == OP_IPC_BCAST    ? q == o->root
                       : o->kind == OP_IPC_REDUCE ? me == o->root
                                                  : 1);
}

/* Whether the peers map this rank's buffers. */
static int read_by_peers(const shm_op_t *o)
{
    int me = o->shm->me;

    return o->shm->L > 1 && (o->kind == OP_IPC_BCAST    ? me == o->root
                             : o->kind == OP_IPC_REDUCE ? me != o->root
                                                        : 1);
}

/* Scratch device memory of the operation holding bytes (none for 0). */
static weft_status_t scratch(shm_op_t *o, size_t bytes, char **p)
{
    return weft__device_scratch_get(o->dev, bytes ? bytes : 1, (void **)p);
}

/*
 * Buffers the device cannot share (ipc_capable 0: CUDA managed memory, pool and VMM
 * allocations; emu's unshareable allocations) go through scratch device memory of weft's, which
 * it can: src is copied there and the copy exported; an allreduce's dst is made there and
 * copied to the caller's at the end (in place: one scratch for both, src's bytes in it, so the
 * in-place rule of weft__shm_round_cma holds there). Each rank decides for its own buffers,
 * nothing to agree on: the peers map whatever handle it publishes. Cost: one device copy of
 * the bytes the peers read (and of the result).
 */
static weft_status_t stage_unshareable(shm_op_t *o)
{
    const int allreduce = o->kind == OP_ALLREDUCE_IPC;
    size_t bytes = (o->kind == OP_IPC_ALLGATHER ? o->bcnt[o->shm->me] : o->count) * o->esize;
    int src_ok, dst_ok;
    weft_status_t status = WEFT_OK;

    if (o->dev->ipc_capable == NULL || !read_by_peers(o)) {
        return WEFT_OK;
    }
    src_ok = o->dev->ipc_capable(o->src);
    dst_ok = !allreduce || o->dev->ipc_capable(o->dst);
    if (src_ok && dst_ok) {
        return WEFT_OK;
    }
    if (allreduce && o->src == o->dst) { /* in place */
        status = scratch(o, bytes, &o->scratch_src);
        if (status == WEFT_OK) {
            status = weft__shm_op_copy(o, o->scratch_src, o->src, o->count);
        }
        o->user_dst = o->dst;
        o->src = o->dst = o->scratch_src;
        return status;
    }
    if (!src_ok) {
        status = scratch(o, bytes, &o->scratch_src);
        if (status == WEFT_OK) {
            status = weft__shm_op_copy(o, o->scratch_src, o->src, bytes / o->esize);
        }
    }
    if (status == WEFT_OK && !dst_ok) {
        status = scratch(o, bytes, &o->scratch_dst);
        o->user_dst = o->dst;
        o->dst = o->scratch_dst;
    }
    return status;
}

void weft__shm_ipc_release(shm_op_t *o)
{
    if (o->user_dst != NULL) {
        o->dst = o->user_dst;
        o->user_dst = NULL;
    }
    weft__device_scratch_put(o->dev, o->scratch_src);
    weft__device_scratch_put(o->dev, o->scratch_dst);
    o->scratch_src = o->scratch_dst = NULL;
}

/* Device memory (IPC): this rank's src and dst handles at the start of its
 * slot of round R, for the peers to map (the scratch copies of unshareable
 * ones). */
static weft_status_t ipc_publish(shm_op_t *o, uint64_t R)
{
    char *slot = SLOT(o, o->shm->me, R);
    weft_status_t status;

    if (!read_by_peers(o)) {
        return WEFT_OK;
    }
    status = stage_unshareable(o);
    if (status == WEFT_OK) {
        status = o->dev->ipc_export(o->scratch_src != NULL ? o->scratch_src : o->src, slot);
    }
    if (status == WEFT_OK && o->kind == OP_ALLREDUCE_IPC) {
        status = o->dev->ipc_export(o->dst, slot + WEFT_DEVICE_IPC_MAX);
    }
    return status;
}

/* Map the src (and dst) of every peer this rank reads (the table caches what it can). */
static weft_status_t ipc_open(shm_op_t *o, uint64_t R)
{
    weft_shm_t *shm = o->shm;
    weft_status_t status = WEFT_OK;

    for (int q = 0; q < shm->L && status == WEFT_OK; q++) {
        const char *slot = SLOT(o, q, R);

        shm->peer_src[q] = shm->peer_dst[q] = NULL;
        if (!reads_from(o, q)) {
            continue;
        }
        status = o->dev->ipc_import(slot, &shm->peer_src[q]);
        if (status == WEFT_OK && o->kind == OP_ALLREDUCE_IPC) {
            status = o->dev->ipc_import(slot + WEFT_DEVICE_IPC_MAX, &shm->peer_dst[q]);
        }
    }
    if (status != WEFT_OK) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", weft_last_error());
        status = weft__error(status, "shared memory: cannot map a local rank's %s buffer: %s",
                             o->dev->name, detail);
    }
    return status;
}

static void ipc_close(shm_op_t *o)
{
    weft_shm_t *shm = o->shm;

    for (int q = 0; q < shm->L; q++) {
        if (shm->peer_src[q] != NULL) {
            o->dev->ipc_close(shm->peer_src[q]);
        }
        if (shm->peer_dst[q] != NULL) {
            o->dev->ipc_close(shm->peer_dst[q]);
        }
        shm->peer_src[q] = shm->peer_dst[q] = NULL;
    }
}

/*
 * Single-copy allreduce (one round R, the vector in chunks of one slot):
 * every rank publishes its src and dst addresses; for chunk k, rank `me`
 * reads slice `me` of every peer's src straight into its own slot (one
 * copy), reduces it with its own src into its dst, and counts the chunk in
 * `progress`; it then reads every peer's reduced slice of chunk k from the
 * peer's dst into its own. Before returning it waits until every rank is
 * done, since peers read its buffers. In place is safe: a rank overwrites
 * slice q of its src only with rank q's result, after rank q counted the
 * chunk, so after rank q read that slice.
 */
static weft_status_t round_cma(shm_op_t *o, uint64_t R, int *peer_p)
{
    weft_shm_t *shm = o->shm;
    weft_shm_ctrl_t *mine = &shm->ctrl[shm->me];
    int L = shm->L, me = shm->me;
    size_t es = o->esize, nchunks = (o->count + o->chunk - 1) / o->chunk;
    uint64_t base = R << 24;
    const void **srcs = shm->srcs;
    weft_status_t status = WEFT_OK;
    int ipc = o->kind == OP_ALLREDUCE_IPC;

    if (o->phase == 0) {
        if (!weft__shm_op_reusable(o, R, peer_p)) { /* the slot is this rank's scratch */
            return WEFT_INPROGRESS;
        }
        if (ipc) {
            status = ipc_publish(o, R);
            if (status != WEFT_OK) {
                return status;
            }
        }
        mine->src_addr = (uint64_t)(uintptr_t)o->src;
        mine->dst_addr = (uint64_t)(uintptr_t)o->dst;
        weft__shm_op_publish(o, R, 1);
        o->phase = 1;
    }
    if (o->phase == 1) {
        if (!weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (ipc) {
            status = ipc_open(o, R);
            if (status != WEFT_OK) {
                return status;
            }
        }
        o->phase = 2;
    }
    while (o->phase == 2 && (o->k < nchunks || o->kout < nchunks)) {
        if (o->k < nchunks && o->k <= o->kout) {
            size_t e0 = o->k * o->chunk, n = weft__shm_op_span(o->count, o->chunk, o->k);
            size_t off = e0 + weft__block_start(n, L, me), cnt = weft__block_count(n, L, me);
            char *tmp = weft__shm_slot(shm, me, R);
            int k = 1;

            srcs[0] = o->src + off * es;
            for (int q = 0; q < L && status == WEFT_OK; q++) {
                if (q != me && cnt > 0 && ipc) {
                    srcs[k++] = (const char *)shm->peer_src[q] + off * es;
                } else if (q != me && cnt > 0) {
                    status = cma_read(o, q, tmp, shm->ctrl[q].src_addr + off * es, cnt * es);
                    srcs[k++] = tmp;
                    tmp += cnt * es;
                }
            }
            if (status == WEFT_OK && cnt > 0) {
                status = weft__shm_op_reduce_many(o, o->dst + off * es, srcs, k, cnt);
            }
            if (status != WEFT_OK) {
                return status;
            }
            o->k++;
            store(&mine->progress, base + o->k);
            continue;
        }
        /* the others' slices of chunk kout, once they reduced them */
        {
            size_t e0 = o->kout * o->chunk, n = weft__shm_op_span(o->count, o->chunk, o->kout);

            for (; o->waiting < L; o->waiting++) {
                int q = o->waiting;
                size_t off = e0 + weft__block_start(n, L, q), cnt = weft__block_count(n, L, q);

                if (q == me || cnt == 0) {
                    continue;
                }
                if (load(&shm->ctrl[q].progress) < base + o->kout + 1) {
                    *peer_p = shm->local_ranks[q];
                    if (o->k < nchunks) {
                        break; /* reduce the next chunk meanwhile */
                    }
                    return WEFT_INPROGRESS;
                }
                status = ipc ? weft__shm_op_copy(o, o->dst + off * es,
                                                 (const char *)shm->peer_dst[q] + off * es, cnt)
                             : cma_read(o, q, o->dst + off * es, shm->ctrl[q].dst_addr + off * es,
                                        cnt * es);
                if (status != WEFT_OK) {
                    return status;
                }
            }
            if (o->waiting == L) {
                o->waiting = 0;
                o->kout++;
            } else if (o->k >= nchunks || o->k > o->kout) {
                return WEFT_INPROGRESS;
            }
        }
    }
    if (o->phase == 2) {
        /* the imports of the peers' buffers closed before saying done: a peer may free its
         * buffers once every rank said so (CUDA: closing after that is undefined) */
        if (ipc) {
            ipc_close(o);
        }
        if (o->user_dst != NULL) { /* the result was made in scratch (stage_unshareable) */
            status = weft__shm_op_copy(o, o->user_dst, o->dst, o->count);
            if (status != WEFT_OK) {
                return status;
            }
        }
        store(&mine->done, R + 1); /* nothing more to read here */
        o->phase = 3;
        o->waiting = 0;
    }
    /* nobody reads this rank's buffers any more */
    if (!weft__shm_op_ready_all(o, 1, R + 1, peer_p)) {
        return WEFT_INPROGRESS;
    }
    return WEFT_OK;
}

weft_status_t weft__shm_round_cma(shm_op_t *o, uint64_t R, int *peer_p)
{
    weft_status_t status = round_cma(o, R, peer_p);

    if (status != WEFT_INPROGRESS && o->kind == OP_ALLREDUCE_IPC) {
        ipc_close(o); /* a failed round leaves no import open */
        weft__shm_ipc_release(o);
    }
    return status;
}

/* The read of a host allgather, bcast, alltoall, gather or scatter (OP_CMA_*): the peers' src,
 * published as addresses, into this rank's dst by process_vm_readv (gather: the root reads
 * everyone's; scatter: every rank its block of the root's). */
static weft_status_t cma_work(shm_op_t *o)
{
    weft_shm_t *shm = o->shm;
    int L = shm->L, me = shm->me;
    size_t es = o->esize;
    weft_status_t status = WEFT_OK;

    if (o->kind == OP_CMA_BCAST) {
        return me == o->root
                   ? WEFT_OK
                   : cma_read(o, o->root, o->dst, shm->ctrl[o->root].src_addr, o->count * es);
    }
    if (o->kind == OP_CMA_SCATTER) { /* block me of the root's src */
        const size_t block = o->count * es;
        const char *own = o->src + (size_t)me * block;

        if (me != o->root) {
            return cma_read(o, o->root, o->dst, shm->ctrl[o->root].src_addr + (uint64_t)me * block,
                            block);
        }
        if (o->dst != own) {
            weft__host_copy(o->dst, own, block);
        }
        return WEFT_OK;
    }
    if (o->kind == OP_CMA_GATHER) { /* the root: block q of dst from q's src */
        const size_t block = o->count * es;

        for (int q = 0; q < L && me == o->root && status == WEFT_OK; q++) {
            char *to = o->dst + (size_t)q * block;

            if (q != me) {
                status = cma_read(o, q, to, shm->ctrl[q].src_addr, block);
            } else if (to != o->src) {
                weft__host_copy(to, o->src, block);
            }
        }
        return status;
    }
    if (o->kind == OP_CMA_ALLTOALL) { /* block q of dst: block me of q's src */
        const size_t block = o->count * es;

        for (int i = 0; i < L && status == WEFT_OK; i++) {
            int q = (me + i) % L; /* each rank starts with its own, then the next ones' */

            if (q == me) {
                weft__host_copy(o->dst + (size_t)me * block, o->src + (size_t)me * block, block);
            } else {
                status = cma_read(o, q, o->dst + (size_t)q * block,
                                  shm->ctrl[q].src_addr + (uint64_t)me * block, block);
            }
        }
        return status;
    }
    for (int q = 0; q < L && status == WEFT_OK; q++) {
        /* the block whole, or piece by piece (weft__shm_allgather_pieces) */
        for (size_t e0 = 0, k; e0 < o->bcnt[q] && status == WEFT_OK; e0 += k) {
            size_t at;
            char *to;

            k = weft__shm_op_run(o, q, e0, o->bcnt[q] - e0, &at);
            to = o->dst + at * es;
            if (q != me) {
                status = cma_read(o, q, to, shm->ctrl[q].src_addr + e0 * es, k * es);
            } else if (to != o->src + e0 * es) {
                weft__host_copy(to, o->src + e0 * es, k * es);
            }
        }
    }
    return status;
}

/* The IPC step of a device allgather, bcast or reduce: read the mapped
 * peers' src into this rank's dst (reduce: on the root only). */
static weft_status_t ipc_work(shm_op_t *o)
{
    weft_shm_t *shm = o->shm;
    int L = shm->L, me = shm->me;
    size_t es = o->esize;
    weft_status_t status = WEFT_OK;

    switch (o->kind) {
    case OP_IPC_ALLGATHER:
        for (int q = 0; q < L && status == WEFT_OK; q++) {
            status = weft__shm_op_copy(o, o->dst + o->boff[q] * es,
                                       q == me ? o->src : shm->peer_src[q], o->bcnt[q]);
        }
        return status;
    case OP_IPC_BCAST:
        return me == o->root ? WEFT_OK
                             : weft__shm_op_copy(o, o->dst, shm->peer_src[o->root], o->count);
    default: /* OP_IPC_REDUCE */
        if (me != o->root) {
            return WEFT_OK;
        }
        for (int q = 0; q < L; q++) {
            shm->srcs[q] = q == me ? o->src : shm->peer_src[q];
        }
        return weft__shm_op_reduce_many(o, o->dst, shm->srcs, L, o->count);
    }
}

/*
 * Device allgather, bcast, reduce (one round R): every rank publishes an IPC
 * handle of its src in its slot, maps the peers' (ipc_open), reads what it
 * needs straight from their buffers on the device, and waits until every
 * rank is done before returning (the peers read its src until then). Host
 * bcast, gather and scatter from WEFT_SHM_CMA_COPY bytes (a block of the
 * latter two), allgather from WEFT_SHM_CMA_ALLGATHER
 * bytes of result and alltoall from WEFT_SHM_CMA_ALLTOALL bytes per block
 * (OP_CMA_*) do the same with src's address in the control line and
 * process_vm_readv: one copy where the slots take two.
 */
weft_status_t weft__shm_round_ipc(shm_op_t *o, uint64_t R, int *peer_p)
{
    const int cma = weft__shm_kind_cma(o->kind);
    weft_status_t status;

    if (o->phase == 0) {
        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (cma) {
            o->shm->ctrl[o->shm->me].src_addr = (uint64_t)(uintptr_t)o->src;
        } else {
            status = ipc_publish(o, R);
            if (status != WEFT_OK) {
                weft__shm_ipc_release(o);
                return status;
            }
        }
        weft__shm_op_publish(o, R, 1);
        o->phase = 1;
    }
    if (o->phase == 1) {
        if (!weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (cma) {
            status = cma_work(o);
        } else {
            status = ipc_open(o, R);
            if (status == WEFT_OK) {
                status = ipc_work(o);
            }
            /* closed before saying done: each peer may free its buffer once every rank
             * said so (CUDA: closing an import after that is undefined) */
            ipc_close(o);
        }
        if (status != WEFT_OK) {
            weft__shm_ipc_release(o);
            return status;
        }
        store(&o->shm->ctrl[o->shm->me].done, R + 1);
        o->phase = 2;
    }
    if (!weft__shm_op_ready_all(o, 1, R + 1, peer_p)) {
        return WEFT_INPROGRESS;
    }
    weft__shm_ipc_release(o); /* nobody reads its scratch any more */
    return WEFT_OK;
}
