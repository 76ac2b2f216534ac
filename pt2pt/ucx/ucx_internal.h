/*
 * Private to the UCX transport (contract in ucx.h, design in ucx.c): the
 * published address header, requests, peers and the context, which
 * ucx_context.c and ucx.c both use, and the functions of ucx_context.c that
 * ucx.c calls. "ctx locked": the caller holds ctx->lock.
 */
#ifndef WEFT_PT2PT_UCX_INTERNAL_H
#define WEFT_PT2PT_UCX_INTERNAL_H

#include "pt2pt/ucx/ucx.h"

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <pthread.h>
#include <stdint.h>

/* Longest wait for a forced close to purge the endpoint's requests. */
#define CLOSE_FORCE_WAIT_NS 100000000ull

#define ADDR_MAGIC 0x77656674u /* "weft" */

/* Head of the address a rank publishes; the UCP worker address follows. */
typedef struct ucx_addr_hdr {
    uint32_t magic;
    int32_t pid;
    uint64_t host;       /* boot id, pid namespace, user; 0: unknown, never checked */
    uint64_t start_time; /* of the process, in clock ticks after boot */
} ucx_addr_hdr_t;

typedef struct ucx_peer ucx_peer_t;
typedef struct ucx_stage ucx_stage_t;

struct weft_p2p_req {
    ucx_stage_t *stage;        /* a fragmented or staged message (ucx_stage.c); else NULL */
    struct weft_p2p_req *prev; /* in peer->recvs while posted */
    struct weft_p2p_req *next;
    ucx_peer_t *peer;
    void *ucp_req; /* NULL when UCX completed at once, or once released */
    size_t bytes;
    size_t length; /* received */
    ucs_status_t ucs_status;
    int peer_rank;
    int done; /* own word: read without the lock by ucx_test's fast path */
    unsigned is_recv : 1;
    unsigned linked : 1;
    unsigned peer_failed : 1; /* completed (or abandoned) because the peer failed */
};

struct ucx_peer {
    ucx_peer_t *hash_next;
    ucx_peer_t *failed_next; /* on ctx->failed until its receives are withdrawn */
    weft_ucx_context_t *ctx;
    ucp_ep_h ep;          /* NULL until first used */
    ucs_status_t failure; /* UCS_OK while the peer is usable */
    const char *why;      /* how the failure was found */
    weft_p2p_req_t *recvs;
    size_t nreqs;  /* requests with it that UCX holds */
    /* send_now's sizes (ucx.c): the largest UCX sent at once, the smallest above it that it
     * could not (the sizes from there on go straight to a request) */
    size_t now_ok, now_no;
    int rank_hint; /* its rank in the communicator that first named it, for logs */
    ucx_addr_hdr_t id;
    uint64_t hash;
    size_t addr_len; /* header and worker address */
    unsigned char addr[];
};

struct weft_ucx_context {
    int refs;             /* under weft__ucx_global_lock */
    pthread_mutex_t lock; /* serializes every UCP call and everything below */
    ucp_context_h ucp;
    ucp_worker_h worker;
    unsigned char *address; /* header and worker address */
    size_t address_len;
    int efd;                /* -1: no wakeup support, idle_wait naps */
    uint64_t host;          /* this process's ucx_addr_hdr_t.host */
    uint64_t next_liveness; /* of liveness_check */
    unsigned liveness_tick; /* progress calls since the clock was last read */
    ucx_peer_t **buckets;
    size_t nbuckets;
    size_t npeers;
    size_t neps;
    ucx_peer_t *failed;
    uint64_t cancel_until; /* deadline of the current burst of cancels */
    uint64_t cancel_last;  /* when the last cancel returned */
    unsigned memtypes;     /* bit t: UCX carries weft memory type t itself */
    void *stage_streams[WEFT_MEM_TYPE_COUNT]; /* staging stream per device (ucx_stage.c) */
    weft_p2p_req_t *req_pool; /* finished requests kept for reuse, through ->next (ucx.c) */
    unsigned req_pooled;
};

/* The endpoint table of one communicator (ucx.c). */
typedef struct ucx_comm {
    weft_ucx_context_t *ctx;
    int rank;
    int size;
    ucx_stage_t *held; /* point-to-point receives whose later fragments wait (ucx_stage.c) */
    ucx_peer_t *peers[];
} ucx_comm_t;

/* Guards the context's reference count (ucx_context.c). */
extern pthread_mutex_t weft__ucx_global_lock;

/* ---- ucx_context.c: peers (ctx locked) ----------------------------------- */

weft_status_t weft__ucx_peer_lookup(weft_ucx_context_t *ctx, const void *addr, size_t len, int rank,
                                    ucx_peer_t **peer_p);
void weft__ucx_peer_fail(ucx_peer_t *peer, ucs_status_t status, const char *how);
int weft__ucx_peer_is_gone(const weft_ucx_context_t *ctx, const ucx_peer_t *peer);
weft_status_t weft__ucx_peer_connect(weft_ucx_context_t *ctx, ucx_peer_t *peer, int rank);
void weft__ucx_recv_link(weft_p2p_req_t *req);
void weft__ucx_recv_unlink(weft_p2p_req_t *req);
void weft__ucx_reap_failures(weft_ucx_context_t *ctx);
void weft__ucx_req_pool_free(weft_ucx_context_t *ctx);
unsigned weft__ucx_worker_progress(weft_ucx_context_t *ctx);

/* ---- ucx.c ------------------------------------------------------------- */

/* Post one host-memory message of at most one fragment (the ops' isend and
 * irecv without fragmenting or staging). */
weft_status_t weft__ucx_post(ucx_comm_t *comm, int is_recv, int peer, void *buf, size_t bytes,
                             uint64_t tag, weft_p2p_req_t **req_p);

/* ---- ucx_stage.c: fragments and staging (contract at the top of the file) */

/* 1 when a message of this size and memory type goes through ucx_stage.c. */
int weft__ucx_needs_stage(weft_ucx_context_t *ctx, weft_memtype_t memtype, size_t bytes);
size_t weft__ucx_frag_size(void);
weft_status_t weft__ucx_stage_post(ucx_comm_t *comm, int is_recv, int peer, void *buf,
                                   size_t bytes, weft_memtype_t memtype, uint64_t tag,
                                   weft_p2p_req_t **req_p);
weft_status_t weft__ucx_stage_test(ucx_comm_t *comm, weft_p2p_req_t *req, int *done_p,
                                   int *src_p);
void weft__ucx_stage_cancel(ucx_comm_t *comm, weft_p2p_req_t *req);
/* Forget comm's held receives (the endpoint goes; they no longer refer to it). */
void weft__ucx_stage_detach(ucx_comm_t *comm);
/* Destroy the staging streams (context destruction). */
void weft__ucx_stage_release(weft_ucx_context_t *ctx);

#endif /* WEFT_PT2PT_UCX_INTERNAL_H */
