/* Loop transport: in-process mailboxes with seeded random landing order. */
#include "pt2pt/loop/loop.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct loop_msg {
    struct loop_msg *next;
    int src;
    uint64_t tag;
    uint64_t ready_ns;
    size_t bytes;
    unsigned char data[];
} loop_msg_t;

struct weft_p2p_req {
    struct weft_p2p_req *next; /* in the posted list */
    int done; /* written and read by the rank's own thread only (irecv, progress, test) */
    weft_status_t status;
    int src; /* a receive: WEFT_P2P_ANY until a message matched */
    uint64_t tag;
    void *buf;
    size_t bytes;
    const weft_device_ops_t *dev; /* of buf: device memory is reached through its table */
};

typedef struct mailbox {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    loop_msg_t *inflight;   /* sent, not landed; in send order */
    atomic_uint ninflight;  /* its length: progress skips the lock while it is 0 */
    loop_msg_t *unexpected; /* landed, no receive posted yet; in landing order */
    weft_p2p_req_t *posted; /* receives waiting; in posting order */
    uint64_t rng;
} mailbox_t;

struct weft_loop_world {
    atomic_int refs;
    int nranks;
    uint64_t seed;
    uint64_t max_delay_ns;
    mailbox_t *boxes;
};

typedef struct loop_ep {
    weft_loop_world_t *world;
    int rank;
} loop_ep_t;

static uint64_t rng_next(uint64_t *state)
{
    /* splitmix64: good enough to shuffle, cheap, no shared state */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

weft_status_t weft__loop_world_create(const weft_loop_opts_t *opts, weft_loop_world_t **world_p)
{
    weft_loop_world_t *w;
    pthread_condattr_t attr;

    if (opts->nranks < 1) {
        return weft__error(WEFT_ERR_INVALID_ARG, "loop world of %d ranks", opts->nranks);
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL || (w->boxes = calloc((size_t)opts->nranks, sizeof(mailbox_t))) == NULL) {
        free(w);
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a loop world of %d ranks",
                           opts->nranks);
    }
    atomic_init(&w->refs, 1);
    w->nranks = opts->nranks;
    w->seed = opts->seed;
    w->max_delay_ns = opts->max_delay_ns;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    for (int r = 0; r < w->nranks; r++) {
        pthread_mutex_init(&w->boxes[r].lock, NULL);
        pthread_cond_init(&w->boxes[r].cond, &attr);
        atomic_init(&w->boxes[r].ninflight, 0);
        w->boxes[r].rng = opts->seed * 0x2545f4914f6cdd1dull + (uint64_t)r;
    }
    pthread_condattr_destroy(&attr);
    *world_p = w;
    return WEFT_OK;
}

static void msg_list_free(loop_msg_t *m)
{
    while (m != NULL) {
        loop_msg_t *next = m->next;

        free(m);
        m = next;
    }
}

void weft__loop_world_release(weft_loop_world_t *w)
{
    if (atomic_fetch_sub(&w->refs, 1) != 1) {
        return;
    }
    for (int r = 0; r < w->nranks; r++) {
        mailbox_t *box = &w->boxes[r];

        msg_list_free(box->inflight);
        msg_list_free(box->unexpected);
        pthread_mutex_destroy(&box->lock);
        pthread_cond_destroy(&box->cond);
    }
    free(w->boxes);
    free(w);
}

weft_status_t weft__loop_ep_create(weft_loop_world_t *w, int rank, void **ep_p)
{
    loop_ep_t *ep;

    if (rank < 0 || rank >= w->nranks) {
        return weft__error(WEFT_ERR_INVALID_ARG, "rank %d outside a loop world of %d ranks", rank,
                           w->nranks);
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a loop endpoint");
    }
    atomic_fetch_add(&w->refs, 1);
    ep->world = w;
    ep->rank = rank;
    *ep_p = ep;
    return WEFT_OK;
}

static void loop_ep_release(void *ep_)
{
    loop_ep_t *ep = ep_;
    mailbox_t *box = &ep->world->boxes[ep->rank];

    pthread_mutex_lock(&box->lock);
    while (box->posted != NULL) {
        weft_p2p_req_t *next = box->posted->next;

        free(box->posted);
        box->posted = next;
    }
    pthread_mutex_unlock(&box->lock);
    weft__loop_world_release(ep->world);
    free(ep);
}

static weft_p2p_req_t *req_new(int src, uint64_t tag, void *buf, size_t bytes)
{
    weft_p2p_req_t *req = calloc(1, sizeof(*req));

    if (req != NULL) {
        req->src = src;
        req->tag = tag;
        req->buf = buf;
        req->bytes = bytes;
    }
    return req;
}

/* Whether receive req takes message m. */
static int matches(const weft_p2p_req_t *req, const loop_msg_t *m)
{
    return (req->src == m->src || req->src == WEFT_P2P_ANY) && req->tag == m->tag;
}

/* Complete a receive with a landed message (box locked). */
static void deliver(weft_p2p_req_t *req, const loop_msg_t *m)
{
    req->src = m->src;
    if (m->bytes != req->bytes) {
        req->status = weft__error(WEFT_ERR_MISMATCH,
                                  "message of %zu bytes from rank %d for a receive of %zu bytes",
                                  m->bytes, m->src, req->bytes);
    } else {
        req->status = m->bytes > 0 ? req->dev->copy(req->buf, m->data, m->bytes) : WEFT_OK;
    }
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static weft_status_t loop_isend(void *ep_, int peer, const void *buf, size_t bytes,
                                weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p)
{
    loop_ep_t *ep = ep_;
    weft_loop_world_t *w = ep->world;
    mailbox_t *box;
    loop_msg_t *m, **tail;
    weft_p2p_req_t *req;

    const weft_device_ops_t *dev = weft__device_ops(memtype);
    weft_status_t status;

    if (dev == NULL) {
        return weft__error(WEFT_ERR_UNSUPPORTED, "loop: no device table for memory type %d",
                           (int)memtype);
    }
    if (peer < 0 || peer >= w->nranks) {
        return weft__error(WEFT_ERR_INVALID_ARG, "send to rank %d of %d", peer, w->nranks);
    }
    box = &w->boxes[peer];
    m = malloc(sizeof(*m) + bytes);
    req = req_new(peer, tag, NULL, bytes);
    if (m == NULL || req == NULL) {
        free(m);
        free(req);
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot buffer a %zu-byte message", bytes);
    }
    m->next = NULL;
    m->src = ep->rank;
    m->tag = tag;
    m->bytes = bytes;
    if (bytes > 0 && (status = dev->copy(m->data, buf, bytes)) != WEFT_OK) {
        free(m);
        free(req);
        return status;
    }
    req->done = 1;
    req->status = WEFT_OK;

    pthread_mutex_lock(&box->lock);
    m->ready_ns = 0;
    if (w->max_delay_ns > 0) {
        m->ready_ns = weft__time_ns() + rng_next(&box->rng) % w->max_delay_ns;
    }
    for (tail = &box->inflight; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = m;
    atomic_fetch_add_explicit(&box->ninflight, 1, memory_order_release);
    pthread_cond_signal(&box->cond);
    pthread_mutex_unlock(&box->lock);
    *req_p = req;
    return WEFT_OK;
}

static weft_status_t loop_irecv(void *ep_, int peer, void *buf, size_t bytes,
                                weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p)
{
    loop_ep_t *ep = ep_;
    mailbox_t *box = &ep->world->boxes[ep->rank];
    weft_p2p_req_t *req, **tail;
    loop_msg_t **mp;

    if (weft__device_ops(memtype) == NULL) {
        return weft__error(WEFT_ERR_UNSUPPORTED, "loop: no device table for memory type %d",
                           (int)memtype);
    }
    if ((peer < 0 && peer != WEFT_P2P_ANY) || peer >= ep->world->nranks) {
        return weft__error(WEFT_ERR_INVALID_ARG, "receive from rank %d of %d", peer,
                           ep->world->nranks);
    }
    req = req_new(peer, tag, buf, bytes);
    if (req == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a receive");
    }
    req->dev = weft__device_ops(memtype);
    pthread_mutex_lock(&box->lock);
    for (mp = &box->unexpected; *mp != NULL; mp = &(*mp)->next) {
        if (matches(req, *mp)) {
            loop_msg_t *m = *mp;

            *mp = m->next;
            deliver(req, m);
            free(m);
            break;
        }
    }
    if (!req->done) {
        for (tail = &box->posted; *tail != NULL; tail = &(*tail)->next) {
        }
        *tail = req;
    }
    pthread_mutex_unlock(&box->lock);
    *req_p = req;
    return WEFT_OK;
}

/* Land message *mp (box locked): match the oldest posted receive or queue it. */
static void land(mailbox_t *box, loop_msg_t **mp)
{
    loop_msg_t *m = *mp;
    weft_p2p_req_t **rp;
    loop_msg_t **tail;

    *mp = m->next;
    for (rp = &box->posted; *rp != NULL; rp = &(*rp)->next) {
        if (matches(*rp, m)) {
            weft_p2p_req_t *req = *rp;

            *rp = req->next;
            req->next = NULL;
            deliver(req, m);
            free(m);
            return;
        }
    }
    m->next = NULL;
    for (tail = &box->unexpected; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = m;
}

static int loop_progress(void *ep_)
{
    loop_ep_t *ep = ep_;
    weft_loop_world_t *w = ep->world;
    mailbox_t *box = &w->boxes[ep->rank];
    uint64_t now;
    int landed = 0;

    if (atomic_load_explicit(&box->ninflight, memory_order_acquire) == 0) {
        return 0; /* nothing sent to this rank: no need to take the lock */
    }
    now = w->max_delay_ns ? weft__time_ns() : 0;
    pthread_mutex_lock(&box->lock);
    for (;;) {
        loop_msg_t **mp, **pick = NULL;
        size_t nready = 0, choice;

        for (mp = &box->inflight; *mp != NULL; mp = &(*mp)->next) {
            nready += (*mp)->ready_ns <= now;
        }
        if (nready == 0) {
            break;
        }
        choice = w->seed ? rng_next(&box->rng) % nready : 0;
        for (mp = &box->inflight; *mp != NULL; mp = &(*mp)->next) {
            if ((*mp)->ready_ns <= now && choice-- == 0) {
                pick = mp;
                break;
            }
        }
        /* non-overtaking: an older message with the same source and tag lands first */
        for (mp = &box->inflight; mp != pick; mp = &(*mp)->next) {
            if ((*mp)->src == (*pick)->src && (*mp)->tag == (*pick)->tag) {
                pick = mp;
                break;
            }
        }
        land(box, pick);
        atomic_fetch_sub_explicit(&box->ninflight, 1, memory_order_relaxed);
        landed++;
    }
    pthread_mutex_unlock(&box->lock);
    return landed;
}

static weft_status_t loop_test(void *ep_, weft_p2p_req_t *req, int *done_p, int *src_p)
{
    weft_status_t status;
    /* only this rank's thread completes its receives (in irecv and
     * progress): no lock needed to see it */
    int done = __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);

    (void)ep_;
    *done_p = done;
    if (!done) {
        return WEFT_INPROGRESS;
    }
    status = req->status;
    if (src_p != NULL) {
        *src_p = req->src;
    }
    free(req);
    return status;
}

static void loop_cancel(void *ep_, weft_p2p_req_t *req)
{
    loop_ep_t *ep = ep_;
    mailbox_t *box = &ep->world->boxes[ep->rank];
    weft_p2p_req_t **rp;

    pthread_mutex_lock(&box->lock);
    for (rp = &box->posted; *rp != NULL; rp = &(*rp)->next) {
        if (*rp == req) {
            *rp = req->next;
            break;
        }
    }
    pthread_mutex_unlock(&box->lock);
    free(req);
}

static void loop_idle_wait(void *ep_, uint64_t max_ns)
{
    loop_ep_t *ep = ep_;
    mailbox_t *box = &ep->world->boxes[ep->rank];
    uint64_t until = weft__time_ns() + max_ns;
    struct timespec ts;

    pthread_mutex_lock(&box->lock);
    for (loop_msg_t *m = box->inflight; m != NULL; m = m->next) {
        if (m->ready_ns < until) {
            until = m->ready_ns;
        }
    }
    if (until > weft__time_ns()) {
        ts.tv_sec = (time_t)(until / 1000000000ull);
        ts.tv_nsec = (long)(until % 1000000000ull);
        pthread_cond_timedwait(&box->cond, &box->lock, &ts);
    }
    pthread_mutex_unlock(&box->lock);
}

const weft_pt2pt_ops_t weft__loop_ops = {
    .name = "loop",
    .prompt_wakeup = 1,
    .isend = loop_isend,
    .irecv = loop_irecv,
    .test = loop_test,
    .cancel = loop_cancel,
    .progress = loop_progress,
    .idle_wait = loop_idle_wait,
    .ep_release = loop_ep_release,
};
