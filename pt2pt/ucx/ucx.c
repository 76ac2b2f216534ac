/*
 * UCX transport (contract in ucx.h and pt2pt.h).
 *
 * Objects:
 *
 *   context (one per process) --- worker, address, peer cache (hash by address bytes)
 *      |                                 |
 *   comm table (one per communicator)    peer: ucp_ep (lazy), failure status,
 *      peers[rank] ------------------->        posted receives from it (all comms)
 *
 * Requests are ours (malloc'ed) and point at the UCX request, which UCX
 * completes through a callback during progress. Receives are not bound to an
 * endpoint in UCP, so each posted receive also sits on its peer's list: when
 * the endpoint's error callback fires, the receives from that peer are
 * withdrawn (ucp_request_cancel), the endpoint is closed (UCX then completes
 * the sends it held with an error) and everything pending with the peer
 * completes with WEFT_ERR_PEER_FAILED. The error callback only queues the
 * peer; the rest runs after ucp_worker_progress returns, never inside UCX.
 *
 * Liveness on this host: UCX 1.13 loses a peer that dies while an endpoint
 * waits for its wireup reply (the first rendezvous send to a peer over
 * shared memory asks it for its endpoint id): neither keepalive nor the error
 * callback ever fire, and every request with that peer hangs. So the address
 * a rank publishes starts with its process identity (host and pid namespace,
 * pid, start time), and once per LIVENESS_INTERVAL_NS progress checks in
 * /proc that the peers on this host with requests outstanding still run.
 *
 * UCX cannot withdraw a send (ucp_request_cancel only removes receives that
 * are not matched yet) nor a receive already matched to a message in flight.
 * cancel therefore keeps progressing the worker until such a request
 * completes; all cancels of one burst (a failing schedule cancels everything
 * it posted) share one bounded wait. What is still pending then can only be
 * taken back from UCX by force-closing the endpoint, which purges every
 * request on it: the peer is then unusable (WEFT_ERR_TRANSPORT) in every
 * communicator, as after a failure. Leaving the request to UCX instead would
 * let it read or write the buffer later (when the peer matches it), and UCX
 * 1.13 asserts in ucp_worker_destroy on an endpoint that still holds one.
 */
#include "pt2pt/ucx/ucx.h"

#include <ucp/api/ucp.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Longest wait of a burst of cancels for requests UCX cannot withdraw. */
#define CANCEL_WAIT_NS 1000000000ull
/* Cancels closer together than this belong to one burst. */
#define CANCEL_BURST_GAP_NS 10000000ull
/* Longest wait for endpoints to flush when the context is destroyed. */
#define CLOSE_WAIT_NS 5000000000ull
/* Longest wait for a forced close to purge the endpoint's requests. */
#define CLOSE_FORCE_WAIT_NS 100000000ull
/* idle_wait never sleeps longer: keepalive runs from ucp_worker_progress. */
#define IDLE_WAIT_MAX_NS 100000000ull
/* Sleep of idle_wait when the worker has no event file descriptor. */
#define IDLE_NAP_NS 100000ull
/* How often the processes of peers on this host are looked up. */
#define LIVENESS_INTERVAL_NS 500000000ull

#define ADDR_MAGIC 0x77656674u /* "weft" */

/* Head of the address a rank publishes; the UCP worker address follows. */
typedef struct ucx_addr_hdr {
    uint32_t magic;
    int32_t pid;
    uint64_t host;       /* boot id, pid namespace, user; 0: unknown, never checked */
    uint64_t start_time; /* of the process, in clock ticks after boot */
} ucx_addr_hdr_t;

typedef struct ucx_peer ucx_peer_t;

struct weft_p2p_req {
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
    int rank_hint; /* its rank in the communicator that first named it, for logs */
    ucx_addr_hdr_t id;
    uint64_t hash;
    size_t addr_len; /* header and worker address */
    unsigned char addr[];
};

struct weft_ucx_context {
    int refs;             /* under global_lock */
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
};

typedef struct ucx_comm {
    weft_ucx_context_t *ctx;
    int rank;
    int size;
    ucx_peer_t *peers[];
} ucx_comm_t;

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_ucx_context_t *global_ctx;

/* ------------------------------------------------------------ status */

/* Statuses with which UCX reports that the remote process is gone. */
static int is_peer_failure(ucs_status_t status)
{
    switch (status) {
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
        return 1;
    default:
        return 0;
    }
}

static weft_status_t memtype_to_ucs(weft_memtype_t memtype, ucs_memory_type_t *ucs_p)
{
    switch (memtype) {
    case WEFT_MEMTYPE_HOST:
        *ucs_p = UCS_MEMORY_TYPE_HOST;
        return WEFT_OK;
    case WEFT_MEMTYPE_COUNT:
        break;
    }
    return weft__error(WEFT_ERR_UNSUPPORTED, "memory type %d has no UCX equivalent", (int)memtype);
}

/* ------------------------------------------------------------ processes */

static uint64_t fnv1a(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

/* Start time of a running process (clock ticks after boot); 0 when pid is
 * gone or a zombie. */
static uint64_t proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long start = 0;
    const char *p;
    char state = 'X';
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* fields 3 (state) and 22 (starttime); the name before them may hold ')' */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1,
                            " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
                            "%*d %*d %*d %*d %*d %*d %llu",
                            &state, &start) != 2) {
        return 0;
    }
    return state == 'Z' || state == 'X' ? 0 : start;
}

/* This boot of this host, this pid namespace and this user: processes with
 * equal values can look each other up in /proc (a /proc mounted with hidepid
 * hides only other users' processes). 0 when unknown. */
static uint64_t host_identity(void)
{
    char id[64 + 2 * sizeof(uint64_t)];
    uint64_t ns, uid = (uint64_t)getuid();
    struct stat st;
    size_t n;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    if (f == NULL) {
        return 0;
    }
    n = fread(id, 1, 64, f);
    fclose(f);
    if (n == 0 || stat("/proc/self/ns/pid", &st) != 0) {
        return 0;
    }
    ns = (uint64_t)st.st_ino;
    memcpy(id + n, &ns, sizeof(ns));
    memcpy(id + n + sizeof(ns), &uid, sizeof(uid));
    return fnv1a(id, n + 2 * sizeof(uint64_t)) | 1;
}

/* ------------------------------------------------------------ context */

/* Set a UCX variable in config unless the user chose a value in the environment
 * under any of the names that control it. */
static weft_status_t config_default(ucp_config_t *config, const char *name, const char *value,
                                    const char *const *env_names)
{
    ucs_status_t status;

    for (; *env_names != NULL; env_names++) {
        if (getenv(*env_names) != NULL) {
            return WEFT_OK;
        }
    }
    status = ucp_config_modify(config, name, value);
    if (status != UCS_OK) {
        return weft__error(WEFT_ERR_TRANSPORT, "cannot set UCX_%s=%s: %s", name, value,
                           ucs_status_string(status));
    }
    return WEFT_OK;
}

/* Whether UCX_TLS leaves shared memory possible (otherwise UCX warns about a
 * setting of a transport it does not load). */
static int tls_may_use_shm(void)
{
    static const char *const names[] = {"sm", "shm", "posix", "sysv", "mm", "all"};
    const char *tls = getenv("UCX_TLS");

    if (tls == NULL || tls[0] == '^') {
        return 1;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strstr(tls, names[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

static weft_status_t config_create(ucp_config_t **config_p)
{
    static const char *const keepalive_env[] = {"UCX_KEEPALIVE_INTERVAL", NULL};
    static const char *const mm_errh_env[] = {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING",
                                              "UCX_SYSV_ERROR_HANDLING", NULL};
    ucp_config_t *config = NULL;
    ucs_status_t ucs;
    weft_status_t status;

    ucs = ucp_config_read(NULL, NULL, &config);
    if (ucs != UCS_OK) {
        return weft__error(WEFT_ERR_TRANSPORT, "cannot read the UCX configuration: %s",
                           ucs_status_string(ucs));
    }
    WEFT_CHECK_GOTO(
        config_default(config, "KEEPALIVE_INTERVAL", WEFT_UCX_KEEPALIVE_INTERVAL, keepalive_env),
        err_release_config);
    /* Shared memory detects a dead peer by keepalive (its pid is gone); UCX
     * 1.13 does not advertise it by default, and then refuses shared memory
     * for endpoints with peer error handling (TCP over loopback instead). */
    if (tls_may_use_shm()) {
        WEFT_CHECK_GOTO(config_default(config, "MM_ERROR_HANDLING", "y", mm_errh_env),
                        err_release_config);
    }
    *config_p = config;
    return WEFT_OK;

err_release_config:
    ucp_config_release(config);
    return status;
}

/* Our published address: identity header, then the worker address. */
static weft_status_t address_create(weft_ucx_context_t *ctx)
{
    ucx_addr_hdr_t hdr = {.magic = ADDR_MAGIC, .pid = (int32_t)getpid()};
    ucp_address_t *worker_addr;
    size_t len;
    ucs_status_t ucs;

    ucs = ucp_worker_get_address(ctx->worker, &worker_addr, &len);
    if (ucs != UCS_OK) {
        return weft__error(WEFT_ERR_TRANSPORT, "ucp_worker_get_address failed: %s",
                           ucs_status_string(ucs));
    }
    ctx->address = malloc(sizeof(hdr) + len);
    if (ctx->address == NULL) {
        ucp_worker_release_address(ctx->worker, worker_addr);
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a worker address");
    }
    hdr.start_time = proc_start_time(getpid());
    hdr.host = hdr.start_time != 0 ? host_identity() : 0;
    ctx->host = hdr.host;
    memcpy(ctx->address, &hdr, sizeof(hdr));
    memcpy(ctx->address + sizeof(hdr), worker_addr, len);
    ctx->address_len = sizeof(hdr) + len;
    ucp_worker_release_address(ctx->worker, worker_addr);
    return WEFT_OK;
}

static weft_status_t context_create(weft_ucx_context_t **ctx_p)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
        .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
        .name = "weft",
    };
    ucp_worker_params_t wparams = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,
    };
    weft_ucx_context_t *ctx;
    ucp_config_t *config = NULL;
    ucs_status_t ucs;
    weft_status_t status;

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate the UCX context");
    }
    ctx->efd = -1;
    ctx->nbuckets = 64;
    ctx->buckets = calloc(ctx->nbuckets, sizeof(*ctx->buckets));
    if (ctx->buckets == NULL) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate the UCX peer cache");
        goto err_free_ctx;
    }
    WEFT_CHECK_GOTO(config_create(&config), err_free_buckets);
    ucs = ucp_init(&params, config, &ctx->ucp);
    if (ucs != UCS_OK) {
        /* no transport can wake us up: run without, idle_wait naps */
        params.features &= ~(uint64_t)UCP_FEATURE_WAKEUP;
        ucs = ucp_init(&params, config, &ctx->ucp);
    }
    ucp_config_release(config);
    if (ucs != UCS_OK) {
        status = weft__error(WEFT_ERR_TRANSPORT, "ucp_init failed: %s", ucs_status_string(ucs));
        goto err_free_buckets;
    }
    ucs = ucp_worker_create(ctx->ucp, &wparams, &ctx->worker);
    if (ucs != UCS_OK) {
        status =
            weft__error(WEFT_ERR_TRANSPORT, "ucp_worker_create failed: %s", ucs_status_string(ucs));
        goto err_cleanup_ucp;
    }
    WEFT_CHECK_GOTO(address_create(ctx), err_destroy_worker);
    if ((params.features & UCP_FEATURE_WAKEUP) &&
        ucp_worker_get_efd(ctx->worker, &ctx->efd) != UCS_OK) {
        ctx->efd = -1;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->refs = 1;
    weft__log_debug("ucx: context created, address of %zu bytes, %s, %s", ctx->address_len,
                    ctx->efd >= 0 ? "wakeup by event fd" : "no wakeup support",
                    ctx->host != 0 ? "local peers checked in /proc" : "no /proc liveness check");
    *ctx_p = ctx;
    return WEFT_OK;

err_destroy_worker:
    ucp_worker_destroy(ctx->worker);
err_cleanup_ucp:
    ucp_cleanup(ctx->ucp);
err_free_buckets:
    free(ctx->buckets);
err_free_ctx:
    free(ctx);
    return status;
}

/* Close every endpoint: flush those whose peer is alive (what was sent gets
 * there), force the failed ones; wait at most CLOSE_WAIT_NS. */
static void close_endpoints(weft_ucx_context_t *ctx)
{
    void **reqs = calloc(ctx->neps ? ctx->neps : 1, sizeof(*reqs));
    uint64_t deadline = weft__time_ns() + CLOSE_WAIT_NS;
    size_t nreqs = 0, pending;

    for (size_t b = 0; b < ctx->nbuckets; b++) {
        for (ucx_peer_t *peer = ctx->buckets[b]; peer != NULL; peer = peer->hash_next) {
            ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS};
            void *req;

            if (peer->ep == NULL) {
                continue;
            }
            /* without room to track the request, do not wait for it */
            param.flags = peer->failure != UCS_OK || reqs == NULL ? UCP_EP_CLOSE_FLAG_FORCE : 0;
            req = ucp_ep_close_nbx(peer->ep, &param);
            peer->ep = NULL;
            if (UCS_PTR_IS_PTR(req) && reqs != NULL) {
                reqs[nreqs++] = req;
            }
        }
    }
    do {
        ucp_worker_progress(ctx->worker);
        pending = 0;
        for (size_t i = 0; i < nreqs; i++) {
            pending += ucp_request_check_status(reqs[i]) == UCS_INPROGRESS;
        }
    } while (pending > 0 && weft__time_ns() < deadline);
    if (pending > 0) {
        weft__log_warn("ucx: %zu endpoint(s) did not flush within %.0f s; closing anyway", pending,
                       CLOSE_WAIT_NS / 1e9);
    }
    for (size_t i = 0; i < nreqs; i++) {
        ucp_request_free(reqs[i]);
    }
    free(reqs);
}

static void context_destroy(weft_ucx_context_t *ctx)
{
    close_endpoints(ctx);
    ucp_worker_destroy(ctx->worker);
    ucp_cleanup(ctx->ucp);
    for (size_t b = 0; b < ctx->nbuckets; b++) {
        while (ctx->buckets[b] != NULL) {
            ucx_peer_t *next = ctx->buckets[b]->hash_next;

            free(ctx->buckets[b]);
            ctx->buckets[b] = next;
        }
    }
    free(ctx->buckets);
    free(ctx->address);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

weft_status_t weft__ucx_context_get(weft_ucx_context_t **ctx_p)
{
    weft_status_t status = WEFT_OK;

    pthread_mutex_lock(&global_lock);
    if (global_ctx == NULL) {
        status = context_create(&global_ctx);
    } else {
        global_ctx->refs++;
    }
    if (status == WEFT_OK) {
        *ctx_p = global_ctx;
    }
    pthread_mutex_unlock(&global_lock);
    return status;
}

void weft__ucx_context_put(weft_ucx_context_t *ctx)
{
    pthread_mutex_lock(&global_lock);
    if (--ctx->refs == 0) {
        context_destroy(ctx);
        global_ctx = NULL;
    }
    pthread_mutex_unlock(&global_lock);
}

weft_status_t weft__ucx_worker_address(weft_ucx_context_t *ctx, const void **addr_p, size_t *len_p)
{
    *addr_p = ctx->address;
    *len_p = ctx->address_len;
    return WEFT_OK;
}

size_t weft__ucx_context_num_eps(weft_ucx_context_t *ctx)
{
    size_t n;

    pthread_mutex_lock(&ctx->lock);
    n = ctx->neps;
    pthread_mutex_unlock(&ctx->lock);
    return n;
}

/* ------------------------------------------------------------ peers */

static int cache_grow(weft_ucx_context_t *ctx)
{
    size_t nb = ctx->nbuckets * 2;
    ucx_peer_t **buckets = calloc(nb, sizeof(*buckets));

    if (buckets == NULL) {
        return -1;
    }
    for (size_t b = 0; b < ctx->nbuckets; b++) {
        while (ctx->buckets[b] != NULL) {
            ucx_peer_t *peer = ctx->buckets[b];

            ctx->buckets[b] = peer->hash_next;
            peer->hash_next = buckets[peer->hash % nb];
            buckets[peer->hash % nb] = peer;
        }
    }
    free(ctx->buckets);
    ctx->buckets = buckets;
    ctx->nbuckets = nb;
    return 0;
}

/* The cached peer with this address, added if new (ctx locked). */
static weft_status_t peer_lookup(weft_ucx_context_t *ctx, const void *addr, size_t len, int rank,
                                 ucx_peer_t **peer_p)
{
    uint64_t hash = fnv1a(addr, len);
    ucx_peer_t *peer;

    for (peer = ctx->buckets[hash % ctx->nbuckets]; peer != NULL; peer = peer->hash_next) {
        if (peer->hash == hash && peer->addr_len == len && memcmp(peer->addr, addr, len) == 0) {
            *peer_p = peer;
            return WEFT_OK;
        }
    }
    if (ctx->npeers >= ctx->nbuckets && cache_grow(ctx) != 0) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot grow the UCX peer cache of %zu peers",
                           ctx->npeers);
    }
    peer = calloc(1, sizeof(*peer) + len);
    if (peer == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a UCX peer");
    }
    peer->ctx = ctx;
    peer->failure = UCS_OK;
    peer->rank_hint = rank;
    memcpy(&peer->id, addr, sizeof(peer->id));
    peer->hash = hash;
    peer->addr_len = len;
    memcpy(peer->addr, addr, len);
    peer->hash_next = ctx->buckets[hash % ctx->nbuckets];
    ctx->buckets[hash % ctx->nbuckets] = peer;
    ctx->npeers++;
    *peer_p = peer;
    return WEFT_OK;
}

/* Record the failure and queue the peer for reap_failures. Runs inside UCX
 * too (the error callback), so it only records. */
static void peer_fail(ucx_peer_t *peer, ucs_status_t status, const char *how)
{
    if (peer->failure != UCS_OK) {
        return;
    }
    __atomic_store_n(&peer->failure, status, __ATOMIC_RELEASE);
    peer->why = how;
    peer->failed_next = peer->ctx->failed;
    peer->ctx->failed = peer;
    if (status != UCS_ERR_CANCELED) {
        weft__log_warn("ucx: peer failed (pid %d, rank %d of the communicator that first named "
                       "it): %s (%s)",
                       (int)peer->id.pid, peer->rank_hint, ucs_status_string(status), how);
    }
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    peer_fail(arg, status != UCS_OK ? status : UCS_ERR_CONNECTION_RESET, "reported by UCX");
}

/* 1 when the peer runs on this host and its process is gone. */
static int peer_is_gone(const weft_ucx_context_t *ctx, const ucx_peer_t *peer)
{
    return ctx->host != 0 && peer->id.host == ctx->host &&
           proc_start_time(peer->id.pid) != peer->id.start_time;
}

/* Every LIVENESS_INTERVAL_NS: fail the peers on this host whose process is
 * gone while requests with them are outstanding (ctx locked). */
static void liveness_check(weft_ucx_context_t *ctx)
{
    uint64_t now;

    /* reading the clock on every progress call costs more than the rest of
     * a small message's progress; every 256th call is often enough */
    if (ctx->host == 0 || ++ctx->liveness_tick % 256 != 0) {
        return;
    }
    now = weft__time_ns();
    if (now < ctx->next_liveness) {
        return;
    }
    ctx->next_liveness = now + LIVENESS_INTERVAL_NS;
    for (size_t b = 0; b < ctx->nbuckets; b++) {
        for (ucx_peer_t *peer = ctx->buckets[b]; peer != NULL; peer = peer->hash_next) {
            if (peer->nreqs > 0 && peer->failure == UCS_OK && peer_is_gone(ctx, peer)) {
                peer_fail(peer, UCS_ERR_ENDPOINT_TIMEOUT, "its process is gone");
            }
        }
    }
}

/* The peer's endpoint, created on first use (ctx locked). */
static weft_status_t peer_connect(weft_ucx_context_t *ctx, ucx_peer_t *peer, int rank)
{
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)(peer->addr + sizeof(ucx_addr_hdr_t)),
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_error_cb, .arg = peer},
    };
    ucs_status_t ucs;

    if (peer->ep != NULL) {
        return WEFT_OK;
    }
    ucs = ucp_ep_create(ctx->worker, &params, &peer->ep);
    if (ucs != UCS_OK) {
        peer->ep = NULL;
        return weft__error(WEFT_ERR_TRANSPORT, "cannot connect to rank %d: %s", rank,
                           ucs_status_string(ucs));
    }
    ctx->neps++;
    return WEFT_OK;
}

static void recv_link(weft_p2p_req_t *req)
{
    ucx_peer_t *peer = req->peer;

    req->prev = NULL;
    req->next = peer->recvs;
    if (peer->recvs != NULL) {
        peer->recvs->prev = req;
    }
    peer->recvs = req;
    req->linked = 1;
}

static void recv_unlink(weft_p2p_req_t *req)
{
    if (!req->linked) {
        return;
    }
    if (req->prev != NULL) {
        req->prev->next = req->next;
    } else {
        req->peer->recvs = req->next;
    }
    if (req->next != NULL) {
        req->next->prev = req->prev;
    }
    req->linked = 0;
}

/* Close the endpoint at once (ctx locked, not inside UCX): UCX completes the
 * requests it still holds on it with an error. */
static void peer_disconnect(weft_ucx_context_t *ctx, ucx_peer_t *peer)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
    uint64_t deadline = weft__time_ns() + CLOSE_FORCE_WAIT_NS;
    void *req;

    if (peer->ep == NULL) {
        return;
    }
    req = ucp_ep_close_nbx(peer->ep, &param);
    peer->ep = NULL;
    if (!UCS_PTR_IS_PTR(req)) {
        return;
    }
    while (ucp_request_check_status(req) == UCS_INPROGRESS && weft__time_ns() < deadline) {
        ucp_worker_progress(ctx->worker);
    }
    ucp_request_free(req); /* UCX finishes the close by itself if it has to */
}

/* For each peer failed since the last call (ctx locked): withdraw the
 * receives posted from it and close its endpoint, which makes UCX complete
 * the sends (and matched receives) it still holds. What UCX keeps after that
 * is abandoned by test and cancel. */
static void reap_failures(weft_ucx_context_t *ctx)
{
    while (ctx->failed != NULL) {
        ucx_peer_t *peer = ctx->failed;

        ctx->failed = peer->failed_next;
        while (peer->recvs != NULL) {
            weft_p2p_req_t *req = peer->recvs;

            recv_unlink(req);
            req->peer_failed = 1;
            ucp_request_cancel(ctx->worker, req->ucp_req);
        }
        peer_disconnect(ctx, peer);
    }
}

static unsigned worker_progress(weft_ucx_context_t *ctx)
{
    unsigned n = ucp_worker_progress(ctx->worker);

    liveness_check(ctx);
    if (ctx->failed != NULL) {
        reap_failures(ctx);
    }
    return n;
}

/* ------------------------------------------------------------ requests */

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    weft_p2p_req_t *req = user_data;

    (void)request;
    req->ucs_status = status;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static void recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                    void *user_data)
{
    weft_p2p_req_t *req = user_data;

    (void)request;
    req->ucs_status = status;
    if (status == UCS_OK) {
        req->length = info->length;
    }
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
    recv_unlink(req);
}

/* Hand the UCX request back (ctx locked). Once freed, UCX does not call our
 * callback; an incomplete request is released by UCX when it completes. */
static void req_release(weft_p2p_req_t *req)
{
    if (req->ucp_req != NULL) {
        ucp_request_free(req->ucp_req);
        req->ucp_req = NULL;
        req->peer->nreqs--;
    }
    recv_unlink(req);
}

/* After the peer's endpoint was closed: UCX reports the requests it purged
 * from the next progress on (ctx locked). */
static void req_wait_purged(weft_ucx_context_t *ctx, weft_p2p_req_t *req)
{
    uint64_t deadline = weft__time_ns() + CLOSE_FORCE_WAIT_NS;

    while (!req->done && weft__time_ns() < deadline) {
        ucp_worker_progress(ctx->worker);
    }
}

/* Give up on a request UCX still holds (ctx locked). */
static void req_abandon(weft_p2p_req_t *req, ucs_status_t status)
{
    req_release(req);
    req->ucs_status = status;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

/* The weft status of a completed request, reported through weft__error. */
static weft_status_t req_status(const weft_p2p_req_t *req)
{
    const char *what = req->is_recv ? "receive from" : "send to";
    ucs_status_t failure = req->peer->failure;

    if (req->peer_failed || (req->ucs_status != UCS_OK && failure != UCS_OK)) {
        if (failure == UCS_ERR_CANCELED) {
            return weft__error(WEFT_ERR_TRANSPORT, "%s rank %d: the connection is closed (%s)",
                               what, req->peer_rank, req->peer->why);
        }
        return weft__error(WEFT_ERR_PEER_FAILED, "%s rank %d: the peer failed: %s (%s)", what,
                           req->peer_rank, ucs_status_string(failure), req->peer->why);
    }
    if (req->ucs_status == UCS_OK) {
        if (req->is_recv && req->length != req->bytes) {
            return weft__error(WEFT_ERR_MISMATCH,
                               "message of %zu bytes from rank %d for a receive of %zu bytes",
                               req->length, req->peer_rank, req->bytes);
        }
        return WEFT_OK;
    }
    if (req->ucs_status == UCS_ERR_MESSAGE_TRUNCATED) {
        return weft__error(WEFT_ERR_MISMATCH,
                           "message from rank %d is larger than the receive of %zu bytes",
                           req->peer_rank, req->bytes);
    }
    if (is_peer_failure(req->ucs_status)) {
        return weft__error(WEFT_ERR_PEER_FAILED, "%s rank %d: %s", what, req->peer_rank,
                           ucs_status_string(req->ucs_status));
    }
    return weft__error(WEFT_ERR_TRANSPORT, "%s rank %d (%zu bytes): %s", what, req->peer_rank,
                       req->bytes, ucs_status_string(req->ucs_status));
}

static weft_status_t req_new(ucx_comm_t *comm, int peer, int is_recv, size_t bytes,
                             weft_memtype_t memtype, uint64_t tag, ucs_memory_type_t *mt_p,
                             weft_p2p_req_t **req_p)
{
    const char *what = is_recv ? "receive from" : "send to";
    weft_p2p_req_t *req;
    weft_status_t status;

    if (peer < 0 || peer >= comm->size) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s rank %d of %d", what, peer, comm->size);
    }
    if (tag & ((1ull << WEFT_TAG_SRC_BITS) - 1)) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s rank %d: tag %#llx uses the low %d bits, which carry the source",
                           what, peer, (unsigned long long)tag, WEFT_TAG_SRC_BITS);
    }
    status = memtype_to_ucs(memtype, mt_p);
    if (status != WEFT_OK) {
        return status;
    }
    req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a UCX request");
    }
    req->peer = comm->peers[peer];
    req->peer_rank = peer;
    req->bytes = bytes;
    req->is_recv = is_recv != 0;
    *req_p = req;
    return WEFT_OK;
}

/* Before posting req (ctx locked): *post_p = 1 when the endpoint is ready; 0
 * when req is already complete because its peer failed. */
static weft_status_t req_prepare(weft_ucx_context_t *ctx, weft_p2p_req_t *req, int *post_p)
{
    weft_status_t status;

    if (req->peer->failure == UCS_OK) {
        status = peer_connect(ctx, req->peer, req->peer_rank);
        if (status == WEFT_OK) {
            *post_p = 1;
            return WEFT_OK;
        }
        if (!peer_is_gone(ctx, req->peer)) {
            return status;
        }
        peer_fail(req->peer, UCS_ERR_UNREACHABLE, "cannot connect: its process is gone");
    }
    req->peer_failed = 1;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
    *post_p = 0;
    return WEFT_OK;
}

/* ------------------------------------------------------------ ops */

static weft_status_t ucx_isend(void *ep, int peer, const void *buf, size_t bytes,
                               weft_memtype_t memtype, uint64_t tag, weft_p2p_req_t **req_p)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .cb.send = send_cb,
    };
    weft_p2p_req_t *req;
    weft_status_t status;
    int post = 0;
    void *sp;

    status = req_new(comm, peer, 0, bytes, memtype, tag, &param.memory_type, &req);
    if (status != WEFT_OK) {
        return status;
    }
    param.user_data = req;
    pthread_mutex_lock(&ctx->lock);
    WEFT_CHECK_GOTO(req_prepare(ctx, req, &post), err_unlock);
    if (post) {
        sp = ucp_tag_send_nbx(req->peer->ep, buf, bytes, tag | (uint64_t)comm->rank, &param);
        if (UCS_PTR_IS_PTR(sp)) {
            req->ucp_req = sp;
            req->peer->nreqs++;
        } else {
            req->ucs_status = UCS_PTR_STATUS(sp);
            __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    *req_p = req;
    return WEFT_OK;

err_unlock:
    pthread_mutex_unlock(&ctx->lock);
    free(req);
    return status;
}

static weft_status_t ucx_irecv(void *ep, int peer, void *buf, size_t bytes, weft_memtype_t memtype,
                               uint64_t tag, weft_p2p_req_t **req_p)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    /* UCX 1.13 does not fill recv_info when a receive completes at once, so
     * the size check needs the callback: deny immediate completion (the
     * callback may then run before ucp_tag_recv_nbx returns) */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        .cb.recv = recv_cb,
    };
    weft_p2p_req_t *req;
    weft_status_t status;
    int post = 0;
    void *rp;

    status = req_new(comm, peer, 1, bytes, memtype, tag, &param.memory_type, &req);
    if (status != WEFT_OK) {
        return status;
    }
    param.user_data = req;
    pthread_mutex_lock(&ctx->lock);
    /* the receive does not need the endpoint, but UCX watches a peer only
     * through one */
    WEFT_CHECK_GOTO(req_prepare(ctx, req, &post), err_unlock);
    if (post) {
        rp = ucp_tag_recv_nbx(ctx->worker, buf, bytes, tag | (uint64_t)peer, UINT64_MAX, &param);
        if (UCS_PTR_IS_PTR(rp)) {
            req->ucp_req = rp;
            req->peer->nreqs++;
            if (!req->done) {
                recv_link(req);
            }
        } else {
            req->ucs_status = UCS_PTR_STATUS(rp);
            __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    *req_p = req;
    return WEFT_OK;

err_unlock:
    pthread_mutex_unlock(&ctx->lock);
    free(req);
    return status;
}

static weft_status_t ucx_test(void *ep, weft_p2p_req_t *req, int *done_p)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    weft_status_t status;

    /* fast path, no lock: the completion and failure flags are written with
     * release stores under the lock; seeing neither means "not yet" */
    if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&req->peer->failure, __ATOMIC_ACQUIRE) == UCS_OK) {
        *done_p = 0;
        return WEFT_INPROGRESS;
    }
    pthread_mutex_lock(&ctx->lock);
    if (!req->done && req->peer->failure != UCS_OK) {
        reap_failures(ctx);
        req_wait_purged(ctx, req);
        if (!req->done) {
            /* UCX still holds it, though the endpoint is closed: nothing
             * more comes from a dead peer */
            req->peer_failed = 1;
            req_abandon(req, req->peer->failure);
        }
    }
    if (!req->done) {
        pthread_mutex_unlock(&ctx->lock);
        *done_p = 0;
        return WEFT_INPROGRESS;
    }
    req_release(req);
    status = req_status(req);
    pthread_mutex_unlock(&ctx->lock);
    free(req);
    *done_p = 1;
    return status;
}

/* Deadline for a cancel: one per burst (ctx locked). */
static uint64_t cancel_deadline(weft_ucx_context_t *ctx)
{
    uint64_t now = weft__time_ns();

    if (ctx->cancel_until == 0 || now - ctx->cancel_last > CANCEL_BURST_GAP_NS) {
        ctx->cancel_until = now + CANCEL_WAIT_NS;
    }
    return ctx->cancel_until;
}

static void ucx_cancel(void *ep, weft_p2p_req_t *req)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;

    pthread_mutex_lock(&ctx->lock);
    if (!req->done) {
        /* removes a receive that is not matched yet; completes it at once */
        ucp_request_cancel(ctx->worker, req->ucp_req);
    }
    if (!req->done) {
        uint64_t deadline = cancel_deadline(ctx);

        while (!req->done && req->peer->failure == UCS_OK && weft__time_ns() < deadline) {
            worker_progress(ctx);
        }
        if (!req->done && req->peer->failure == UCS_OK) {
            weft__log_warn("ucx: closing the connection to rank %d to withdraw a %zu-byte %s",
                           req->peer_rank, req->bytes, req->is_recv ? "receive" : "send");
            peer_fail(req->peer, UCS_ERR_CANCELED,
                      "closed to withdraw a request that UCX could not cancel");
        }
        if (!req->done && req->peer->failure != UCS_OK) {
            reap_failures(ctx);
            req_wait_purged(ctx, req);
        }
        if (!req->done) {
            weft__log_warn("ucx: UCX still holds a %zu-byte %s rank %d; it may still %s its buffer",
                           req->bytes, req->is_recv ? "receive from" : "send to", req->peer_rank,
                           req->is_recv ? "write" : "read");
        }
        ctx->cancel_last = weft__time_ns();
    }
    req_release(req);
    pthread_mutex_unlock(&ctx->lock);
    free(req);
}

static int ucx_progress(void *ep)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    unsigned n;

    pthread_mutex_lock(&ctx->lock);
    n = worker_progress(ctx);
    pthread_mutex_unlock(&ctx->lock);
    return (int)n;
}

static void nap(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};

    nanosleep(&ts, NULL);
}

static void ucx_idle_wait(void *ep, uint64_t max_ns)
{
    ucx_comm_t *comm = ep;
    weft_ucx_context_t *ctx = comm->ctx;
    struct pollfd pfd = {.fd = ctx->efd, .events = POLLIN};
    struct timespec ts;
    ucs_status_t ucs;

    if (max_ns > IDLE_WAIT_MAX_NS) {
        max_ns = IDLE_WAIT_MAX_NS;
    }
    if (ctx->efd < 0) {
        nap(max_ns < IDLE_NAP_NS ? max_ns : IDLE_NAP_NS);
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    ucs = ucp_worker_arm(ctx->worker);
    pthread_mutex_unlock(&ctx->lock);
    if (ucs == UCS_ERR_BUSY) {
        return; /* events are waiting: the caller progresses */
    }
    if (ucs != UCS_OK) {
        nap(max_ns < IDLE_NAP_NS ? max_ns : IDLE_NAP_NS);
        return;
    }
    ts.tv_sec = (time_t)(max_ns / 1000000000ull);
    ts.tv_nsec = (long)(max_ns % 1000000000ull);
    ppoll(&pfd, 1, &ts, NULL);
}

/* ------------------------------------------------------------ tables */

weft_status_t weft__ucx_ep_create(weft_ucx_context_t *ctx, int rank, int size, const void *addrs,
                                  size_t addr_stride, const size_t *addr_lens, void **ep_p)
{
    ucx_comm_t *comm;
    weft_status_t status = WEFT_OK;

    if (size < 1 || size > (1 << WEFT_TAG_SRC_BITS)) {
        return weft__error(WEFT_ERR_UNSUPPORTED,
                           "UCX communicator of %d ranks: tags carry the source in %d bits", size,
                           WEFT_TAG_SRC_BITS);
    }
    if (rank < 0 || rank >= size || addrs == NULL || addr_lens == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "UCX endpoint table for rank %d of %d%s", rank,
                           size, addrs == NULL || addr_lens == NULL ? " without addresses" : "");
    }
    for (int r = 0; r < size; r++) {
        const char *addr = (const char *)addrs + (size_t)r * addr_stride;
        ucx_addr_hdr_t hdr;

        if (addr_lens[r] <= sizeof(hdr) || (size > 1 && addr_lens[r] > addr_stride)) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "address of rank %d: %zu bytes in slots of %zu", r, addr_lens[r],
                               addr_stride);
        }
        memcpy(&hdr, addr, sizeof(hdr));
        if (hdr.magic != ADDR_MAGIC) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "address of rank %d is not from weft__ucx_worker_address", r);
        }
    }
    comm = calloc(1, sizeof(*comm) + (size_t)size * sizeof(comm->peers[0]));
    if (comm == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a UCX table of %d ranks", size);
    }
    comm->ctx = ctx;
    comm->rank = rank;
    comm->size = size;
    pthread_mutex_lock(&ctx->lock);
    for (int r = 0; r < size && status == WEFT_OK; r++) {
        status = peer_lookup(ctx, (const char *)addrs + (size_t)r * addr_stride, addr_lens[r], r,
                             &comm->peers[r]);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (status != WEFT_OK) {
        /* peers already added stay cached: the context owns them */
        free(comm);
        return status;
    }
    pthread_mutex_lock(&global_lock);
    ctx->refs++;
    pthread_mutex_unlock(&global_lock);
    *ep_p = comm;
    return WEFT_OK;
}

static void ucx_ep_release(void *ep)
{
    ucx_comm_t *comm = ep;

    weft__ucx_context_put(comm->ctx);
    free(comm);
}

const weft_pt2pt_ops_t weft__ucx_ops = {
    .name = "ucx",
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .test = ucx_test,
    .cancel = ucx_cancel,
    .progress = ucx_progress,
    .idle_wait = ucx_idle_wait,
    .ep_release = ucx_ep_release,
};
