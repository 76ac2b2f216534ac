/*
 * Large messages and device memory over UCX: fragments and staging.
 *
 * A message larger than WEFT_STAGE_FRAG travels as fragments of that size
 * (the last one shorter), sent and received in order under the message's
 * tag: the rule depends on the size alone, which both sides know (receives
 * are exact-size), so a host buffer on one side and a device buffer on the
 * other still agree. Host memory goes straight from and to the user's
 * buffer, fragment by fragment.
 *
 * Device memory that UCX cannot carry (every memory type but host, unless
 * ucp_context_query lists it: Debian's UCX has no CUDA transport, and no
 * UCX knows emu) is staged through a host bounce buffer
 * (weft__device_bounce_get: reused pinned memory for CUDA) on the context's staging stream of
 * that device, pipelined per fragment:
 *
 *   send  stream:  D2H f0 | D2H f1 | D2H f2 | ...        (queued at once)
 *         UCX:             send f0 | send f1 | send f2    (each once its copy is done)
 *   recv  UCX:     recv f0 | recv f1 | recv f2            (posted at once)
 *         stream:            H2D f0  | H2D f1  | H2D f2   (each once it arrived)
 *
 * so the copy of fragment k+1 overlaps the transfer of fragment k. After
 * each copy the stream writes the number of copies done into the
 * request's flag; the request polls it, with no thread of its own.
 *
 * Point-to-point messages (sequence number WEFT_TAG_SEQ_P2P) send their
 * fragments after the first under WEFT_TAG_SEQ_P2P_CONT, so that a receive
 * from any source, which matches the P2P tag with any source bits, can
 * only take a first fragment. Such a receive posts its first fragment
 * alone; once it landed, its sender is known and the rest is received from
 * that sender. The rest of two messages of one sender and tag is told apart
 * by posting order alone, so a receive posts the rest of its message only
 * after every receive of the same tag posted before it did, where that one
 * might take the same sender's (its sender unknown yet, or the same):
 * until then it waits on the communicator's list of held receives. A
 * receive from a named peer with no such receive before it posts every
 * fragment at once, as before.
 *
 * Threading: as the rest of the transport: one thread drives a request.
 */
#include "pt2pt/ucx/ucx_internal.h"

#include "base/config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

weft_ucx_config_t weft__ucx_config;

static const weft_config_entry_t ucx_entries[] = {
    {"STAGE_FRAG", "1m",
     "bytes per fragment of a large UCX message (0: 1m); device memory that UCX cannot reach "
     "is copied through host memory one fragment at a time, overlapping the copy of the next "
     "fragment with the transfer of this one",
     weft__config_parse_size, offsetof(weft_ucx_config_t, stage_frag)},
};

static const char *ucx_values[sizeof(ucx_entries) / sizeof(ucx_entries[0])];

weft_config_table_t weft__ucx_config_table = {"ucx", ucx_entries,
                                              sizeof(ucx_entries) / sizeof(ucx_entries[0]),
                                              &weft__ucx_config, ucx_values};

struct ucx_stage {
    int is_recv;
    const weft_device_ops_t *dev; /* NULL: host memory, no copies */
    char *user;
    char *bounce; /* host copy of the message (device memory only) */
    size_t bytes;
    size_t frag;
    int nfrag;
    int peer;
    uint64_t tag;
    void *stream;
    uint32_t *flag;         /* copies done, written by the stream */
    weft_p2p_req_t **subs;  /* per fragment; NULL once done (or not posted) */
    unsigned char *landed;  /* recv: fragment arrived (its copy is queued) */
    int nposted;            /* fragments posted (in order) */
    int any;                /* from any source, its first fragment not landed yet */
    ucx_comm_t *comm;       /* while on comm->held */
    ucx_stage_t *held_next; /* the next receive on comm->held */
    int ncopies;            /* recv: copies queued */
    int nsubs_done;
    weft_status_t status;
};

/* Used before the configuration is loaded (transport tests), and for 0. */
#define STAGE_FRAG_DEFAULT (1u << 20)

size_t weft__ucx_frag_size(void)
{
    return weft__ucx_config.stage_frag > 0 ? weft__ucx_config.stage_frag : STAGE_FRAG_DEFAULT;
}

int weft__ucx_needs_stage(weft_ucx_context_t *ctx, weft_memtype_t memtype, size_t bytes)
{
    return bytes > weft__ucx_frag_size() ||
           (memtype != WEFT_MEM_HOST && !(ctx->memtypes & (1u << memtype)));
}

static size_t frag_bytes(const ucx_stage_t *st, int k)
{
    size_t off = (size_t)k * st->frag;

    return st->bytes - off < st->frag ? st->bytes - off : st->frag;
}

/* The context's staging stream for dev (created on first use; ctx locked). */
static weft_status_t stage_stream(weft_ucx_context_t *ctx, const weft_device_ops_t *dev,
                                  void **stream_p)
{
    weft_status_t status = WEFT_OK;

    if (ctx->stage_streams[dev->memtype] == NULL) {
        status = dev->stream_create(&ctx->stage_streams[dev->memtype]);
    }
    if (status == WEFT_OK) {
        *stream_p = ctx->stage_streams[dev->memtype];
    }
    return status;
}

/* The tag of fragment k: a point-to-point message's later fragments under
 * WEFT_TAG_SEQ_P2P_CONT (see the top of the file). */
#define SEQ_SHIFT (WEFT_TAG_SLOT_BITS + WEFT_TAG_SRC_BITS)
#define SEQ_MASK ((uint64_t)((1u << WEFT_TAG_SEQ_BITS) - 1) << SEQ_SHIFT)

static int is_p2p(uint64_t tag)
{
    return ((tag & SEQ_MASK) >> SEQ_SHIFT) == WEFT_TAG_SEQ_P2P;
}

static uint64_t frag_tag(const ucx_stage_t *st, int k)
{
    return k > 0 && is_p2p(st->tag)
               ? (st->tag & ~SEQ_MASK) | ((uint64_t)WEFT_TAG_SEQ_P2P_CONT << SEQ_SHIFT)
               : st->tag;
}

static void held_unlink(ucx_stage_t *st)
{
    if (st->comm != NULL) {
        ucx_stage_t **pp = &st->comm->held;

        while (*pp != NULL && *pp != st) {
            pp = &(*pp)->held_next;
        }
        if (*pp == st) {
            *pp = st->held_next;
        }
        st->comm = NULL;
    }
}

/* Whether a held receive before st (on comm->held) might take the rest of
 * a message of st's sender: the same tag, and its sender unknown yet or
 * the same. peer: st's sender, or WEFT_P2P_ANY when not known. */
static int held_before(const ucx_comm_t *comm, const ucx_stage_t *st, int peer)
{
    for (const ucx_stage_t *e = comm->held; e != NULL && e != st; e = e->held_next) {
        if (e->tag == st->tag && (e->any || peer == WEFT_P2P_ANY || e->peer == peer)) {
            return 1;
        }
    }
    return 0;
}

static void stage_free(ucx_stage_t *st)
{
    held_unlink(st);
    if (st->flag != NULL) {
        weft__device_flag_free(st->dev, st->flag);
    }
    if (st->bounce != NULL) {
        weft__device_bounce_put(st->dev, st->bounce);
    }
    free(st->subs);
    free(st->landed);
    free(st);
}

weft_status_t weft__ucx_stage_post(ucx_comm_t *comm, int is_recv, int peer, void *buf,
                                   size_t bytes, weft_memtype_t memtype, uint64_t tag,
                                   weft_p2p_req_t **req_p)
{
    weft_ucx_context_t *ctx = comm->ctx;
    ucx_stage_t *st = calloc(1, sizeof(*st));
    weft_p2p_req_t *req = calloc(1, sizeof(*req));
    weft_status_t status = WEFT_OK;

    if (st == NULL || req == NULL) {
        free(st);
        free(req);
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a staged UCX request");
    }
    st->is_recv = is_recv;
    st->user = buf;
    st->bytes = bytes;
    st->frag = weft__ucx_frag_size();
    st->nfrag = bytes == 0 ? 1 : (int)((bytes + st->frag - 1) / st->frag);
    st->peer = peer;
    st->tag = tag;
    st->subs = calloc((size_t)st->nfrag, sizeof(*st->subs));
    st->landed = calloc((size_t)st->nfrag, 1);
    if (st->subs == NULL || st->landed == NULL) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a staged UCX request");
        goto err_free;
    }
    if (memtype != WEFT_MEM_HOST && !(ctx->memtypes & (1u << memtype))) {
        st->dev = weft__device_ops(memtype);
        if (st->dev == NULL || st->dev->stream_create == NULL) {
            status = weft__error(WEFT_ERR_UNSUPPORTED,
                                 "ucx: %s memory cannot be staged (no device table)",
                                 weft_memtype_name(memtype));
            goto err_free;
        }
        WEFT_CHECK_GOTO(weft__device_bounce_get(st->dev, bytes, (void **)&st->bounce), err_free);
        pthread_mutex_lock(&ctx->lock);
        status = stage_stream(ctx, st->dev, &st->stream);
        pthread_mutex_unlock(&ctx->lock);
        WEFT_CHECK_GOTO(status, err_free);
        WEFT_CHECK_GOTO(weft__device_flag_alloc(st->dev, &st->flag), err_free);
    }
    if (st->dev != NULL && !is_recv) {
        /* every device-to-host copy at once; each fragment is sent when its own is done */
        for (int k = 0; k < st->nfrag && status == WEFT_OK; k++) {
            size_t off = (size_t)k * st->frag;

            status = st->dev->memcpy_async(st->bounce + off, st->user + off, frag_bytes(st, k),
                                           st->stream);
            if (status == WEFT_OK) {
                status = st->dev->stream_write_flag(st->stream, st->flag, (uint32_t)k + 1);
            }
        }
        if (status != WEFT_OK) {
            st->dev->stream_sync(st->stream);
            goto err_free;
        }
    } else {
        char *base = st->dev != NULL ? st->bounce : st->user;
        /* a receive that must wait before taking the rest: the first
         * fragment now, the rest from stage_advance */
        int hold = is_recv && st->nfrag > 1 && is_p2p(tag) &&
                   (peer == WEFT_P2P_ANY || held_before(comm, st, peer));
        int n = hold ? 1 : st->nfrag;

        for (int k = 0; k < n && status == WEFT_OK; k++) {
            status = weft__ucx_post(comm, is_recv, peer, base + (size_t)k * st->frag,
                                    frag_bytes(st, k), frag_tag(st, k), &st->subs[k]);
            st->nposted += status == WEFT_OK;
        }
        if (status != WEFT_OK) {
            for (int k = 0; k < st->nposted; k++) {
                weft__ucx_ops.cancel(comm, st->subs[k]);
            }
            goto err_free;
        }
        if (hold) {
            ucx_stage_t **pp = &comm->held;

            while (*pp != NULL) {
                pp = &(*pp)->held_next;
            }
            *pp = st;
            st->comm = comm;
            st->any = peer == WEFT_P2P_ANY;
        }
    }
    st->status = WEFT_OK;
    req->stage = st;
    req->peer_rank = peer;
    *req_p = req;
    return WEFT_OK;

err_free:
    stage_free(st);
    free(req);
    return status;
}

/* Withdraw every fragment still outstanding and let the stream finish the
 * copies that use the bounce buffer. */
static void stage_cancel_all(ucx_comm_t *comm, ucx_stage_t *st)
{
    for (int k = 0; k < st->nfrag; k++) {
        if (st->subs[k] != NULL) {
            weft__ucx_ops.cancel(comm, st->subs[k]);
            st->subs[k] = NULL;
        }
    }
    if (st->dev != NULL) {
        st->dev->stream_sync(st->stream);
    }
}

/* Test fragment k of st: once it landed, queue its copy to the device
 * (staged receives) and, for a receive from any source, learn the sender. */
static void frag_test(ucx_comm_t *comm, ucx_stage_t *st, int k)
{
    weft_status_t status;
    int done = 0, src = -1;

    if (st->subs[k] == NULL || st->status != WEFT_OK) {
        return;
    }
    status = weft__ucx_ops.test(comm, st->subs[k], &done, st->any ? &src : NULL);
    if (!done) {
        return;
    }
    st->subs[k] = NULL;
    st->nsubs_done++;
    if (status != WEFT_OK) {
        st->status = status;
        return;
    }
    if (st->any) {
        st->peer = src;
        st->any = 0;
    }
    if (st->dev != NULL && st->is_recv) {
        size_t off = (size_t)k * st->frag;

        st->status =
            st->dev->memcpy_async(st->user + off, st->bounce + off, frag_bytes(st, k), st->stream);
        if (st->status == WEFT_OK) {
            st->status = st->dev->stream_write_flag(st->stream, st->flag, (uint32_t)++st->ncopies);
        }
    }
}

/* Post the rest of every held receive, in posting order, whose first
 * fragment landed and before which no held receive might take the rest of
 * its sender's message; a failed one leaves the list (its test reports). */
static void stage_advance(ucx_comm_t *comm)
{
    ucx_stage_t *st = comm->held, *next;

    for (; st != NULL; st = next) {
        char *base = st->dev != NULL ? st->bounce : st->user;

        next = st->held_next;
        frag_test(comm, st, 0);
        if (st->status != WEFT_OK) {
            held_unlink(st);
            continue;
        }
        if (st->any || held_before(comm, st, st->peer)) {
            continue;
        }
        for (int k = st->nposted; k < st->nfrag && st->status == WEFT_OK; k++) {
            st->status = weft__ucx_post(comm, 1, st->peer, base + (size_t)k * st->frag,
                                        frag_bytes(st, k), frag_tag(st, k), &st->subs[k]);
            st->nposted += st->status == WEFT_OK;
        }
        held_unlink(st);
    }
}

weft_status_t weft__ucx_stage_test(ucx_comm_t *comm, weft_p2p_req_t *req, int *done_p, int *src_p)
{
    ucx_stage_t *st = req->stage;
    weft_status_t status;
    int finished;

    if (st->dev != NULL && !st->is_recv) {
        uint32_t copied = weft__device_flag_get(st->flag);

        while (st->nposted < (int)copied && st->status == WEFT_OK) {
            int k = st->nposted;

            st->status = weft__ucx_post(comm, 0, st->peer, st->bounce + (size_t)k * st->frag,
                                        frag_bytes(st, k), frag_tag(st, k), &st->subs[k]);
            st->nposted++;
        }
    }
    if (st->comm != NULL) {
        stage_advance(comm);
    }
    for (int k = 0; k < st->nposted && st->status == WEFT_OK; k++) {
        frag_test(comm, st, k);
    }
    if (st->status != WEFT_OK) {
        status = st->status;
        stage_cancel_all(comm, st);
        stage_free(st);
        free(req);
        *done_p = 1;
        return status;
    }
    finished = st->nsubs_done == st->nfrag;
    if (finished && st->dev != NULL && st->is_recv) {
        finished = weft__device_flag_get(st->flag) == (uint32_t)st->nfrag;
    }
    if (!finished) {
        *done_p = 0;
        return WEFT_INPROGRESS;
    }
    if (src_p != NULL) {
        *src_p = st->peer;
    }
    stage_free(st);
    free(req);
    *done_p = 1;
    return WEFT_OK;
}

void weft__ucx_stage_detach(ucx_comm_t *comm)
{
    while (comm->held != NULL) {
        held_unlink(comm->held);
    }
}

void weft__ucx_stage_cancel(ucx_comm_t *comm, weft_p2p_req_t *req)
{
    ucx_stage_t *st = req->stage;

    stage_cancel_all(comm, st);
    stage_free(st);
    free(req);
}

void weft__ucx_stage_release(weft_ucx_context_t *ctx)
{
    for (int t = 0; t < WEFT_MEM_TYPE_COUNT; t++) {
        if (ctx->stage_streams[t] != NULL) {
            weft__device_ops((weft_memtype_t)t)->stream_destroy(ctx->stage_streams[t]);
            ctx->stage_streams[t] = NULL;
        }
    }
}
