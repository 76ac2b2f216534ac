/*
 * UCX transport, the process's context (contract in ucx.h, design in ucx.c):
 * its creation (UCX configuration with weft's defaults, UCP context, worker,
 * the address a rank publishes) and destruction; the peer cache, by address;
 * peer failure and liveness; endpoint connect and close; and worker progress,
 * which reaps failed peers.
 *
 * Liveness on this host: UCX 1.13 loses a peer that dies while an endpoint
 * waits for its wireup reply (the first rendezvous send to a peer over
 * shared memory asks it for its endpoint id): neither keepalive nor the error
 * callback ever fire, and every request with that peer hangs. So the address
 * a rank publishes starts with its process identity (host and pid namespace,
 * pid, start time), and once per LIVENESS_INTERVAL_NS progress checks in
 * /proc that the peers on this host with requests outstanding still run.
 */
#include "pt2pt/ucx/ucx_internal.h"

#include "base/proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longest wait for endpoints to flush when the context is destroyed. */
#define CLOSE_WAIT_NS 5000000000ull
/* How often the processes of peers on this host are looked up. */
#define LIVENESS_INTERVAL_NS 500000000ull

pthread_mutex_t weft__ucx_global_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_ucx_context_t *global_ctx;

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

/* Whether the environment sets any of names (NULL-terminated). */
static int env_set(const char *const *names)
{
    for (; *names != NULL; names++) {
        if (getenv(*names) != NULL) {
            return 1;
        }
    }
    return 0;
}

/* Set a UCX variable in config unless the user chose a value in the environment
 * under any of the names that control it; *set_p (unless NULL): whether it did. */
static weft_status_t config_default(ucp_config_t *config, const char *name, const char *value,
                                    const char *const *env_names, int *set_p)
{
    ucs_status_t status;

    if (set_p != NULL) {
        *set_p = 0;
    }
    if (env_set(env_names)) {
        return WEFT_OK;
    }
    status = ucp_config_modify(config, name, value);
    if (status != UCS_OK) {
        return weft__error(WEFT_ERR_TRANSPORT, "cannot set UCX_%s=%s: %s", name, value,
                           ucs_status_string(status));
    }
    if (set_p != NULL) {
        *set_p = 1;
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

/* A network transport of UCX other than TCP (InfiniBand/RoCE verbs, Cray
 * uGNI) can run here: its component has a device, and UCX_TLS, where set,
 * does not leave it out. */
static int rdma_available(void)
{
    static const char *const rdma[] = {"ib", "ugni"};
    static const char *const rdma_tls[] = {"rc", "ud", "dc", "ib", "ugni", "all"};
    const char *tls = getenv("UCX_TLS");
    uct_component_h *comps = NULL;
    unsigned ncomps = 0;
    int found = 0;

    if (tls != NULL && tls[0] != '^') {
        for (size_t i = 0; i < sizeof(rdma_tls) / sizeof(rdma_tls[0]) && !found; i++) {
            found = strstr(tls, rdma_tls[i]) != NULL;
        }
        if (!found) {
            return 0;
        }
    }
    if (uct_query_components(&comps, &ncomps) != UCS_OK) {
        return 1; /* unknown: UCX's own choice stays */
    }
    found = 0;
    for (unsigned i = 0; i < ncomps && !found; i++) {
        uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                                                   UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};

        if (uct_component_query(comps[i], &attr) != UCS_OK) {
            continue;
        }
        for (size_t k = 0; k < sizeof(rdma) / sizeof(rdma[0]); k++) {
            found = found || (strcmp(attr.name, rdma[k]) == 0 && attr.md_resource_count > 0);
        }
    }
    uct_release_component_list(comps);
    return found;
}

static weft_status_t config_create(ucp_config_t **config_p)
{
    static const char *const keepalive_env[] = {"UCX_KEEPALIVE_INTERVAL", NULL};
    static const char *const mm_errh_env[] = {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING",
                                              "UCX_SYSV_ERROR_HANDLING", NULL};
    static const char *const rndv_env[] = {"UCX_RNDV_THRESH", NULL};
    static const char *const rx_seg_env[] = {"UCX_TCP_RX_SEG_SIZE", "UCX_RX_SEG_SIZE", NULL};
    /* where the network is TCP only (ucx.h). UCX applies a name it does not know at the UCP
     * level to every transport's configuration by the field's name without the transport's
     * prefix ("TCP_"): measured, "TCP_RX_SEG_SIZE" changed nothing */
    static const struct {
        const char *name, *value;
        const char *const *env; /* env[0]: the name the log tells the user to set */
    } tcp_only[] = {{"RNDV_THRESH", WEFT_UCX_TCP_RNDV_THRESH, rndv_env},
                    {"RX_SEG_SIZE", WEFT_UCX_TCP_RX_SEG_SIZE, rx_seg_env}};
    ucp_config_t *config = NULL;
    ucs_status_t ucs;
    weft_status_t status;

    ucs = ucp_config_read(NULL, NULL, &config);
    if (ucs != UCS_OK) {
        return weft__error(WEFT_ERR_TRANSPORT, "cannot read the UCX configuration: %s",
                           ucs_status_string(ucs));
    }
    WEFT_CHECK_GOTO(config_default(config, "KEEPALIVE_INTERVAL", WEFT_UCX_KEEPALIVE_INTERVAL,
                                   keepalive_env, NULL),
                    err_release_config);
    /* Shared memory detects a dead peer by keepalive (its pid is gone); UCX
     * 1.13 does not advertise it by default, and then refuses shared memory
     * for endpoints with peer error handling (TCP over loopback instead). */
    if (tls_may_use_shm()) {
        WEFT_CHECK_GOTO(config_default(config, "MM_ERROR_HANDLING", "y", mm_errh_env, NULL),
                        err_release_config);
    }
    /* the query of the transports only where the user left one of them to us */
    if (!(env_set(rndv_env) && env_set(rx_seg_env)) && !rdma_available()) {
        for (size_t i = 0; i < sizeof(tcp_only) / sizeof(tcp_only[0]); i++) {
            int set;

            WEFT_CHECK_GOTO(
                config_default(config, tcp_only[i].name, tcp_only[i].value, tcp_only[i].env, &set),
                err_release_config);
            if (set) {
                weft__log_info("ucx: no network transport but TCP: %s=%s (set %s to choose "
                               "another)",
                               tcp_only[i].env[0], tcp_only[i].value, tcp_only[i].env[0]);
            }
        }
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
    hdr.start_time = weft__proc_start_time(getpid());
    hdr.host = hdr.start_time != 0 ? host_identity() : 0;
    ctx->host = hdr.host;
    memcpy(ctx->address, &hdr, sizeof(hdr));
    memcpy(ctx->address + sizeof(hdr), worker_addr, len);
    ctx->address_len = sizeof(hdr) + len;
    ucp_worker_release_address(ctx->worker, worker_addr);
    return WEFT_OK;
}

/* The weft memory types UCX carries itself (bit per weft_memtype_t). */
static unsigned query_memtypes(ucp_context_h ucp)
{
    ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    unsigned types = 1u << WEFT_MEM_HOST;

    if (ucp_context_query(ucp, &attr) == UCS_OK &&
        (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA))) {
        types |= 1u << WEFT_MEM_CUDA;
    }
    return types;
}

unsigned weft__ucx_context_memtypes(weft_ucx_context_t *ctx)
{
    return ctx->memtypes;
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
    ctx->memtypes = query_memtypes(ctx->ucp);
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
    weft__ucx_stage_release(ctx);
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
    weft__ucx_req_pool_free(ctx);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

weft_status_t weft__ucx_context_get(weft_ucx_context_t **ctx_p)
{
    weft_status_t status = WEFT_OK;

    pthread_mutex_lock(&weft__ucx_global_lock);
    if (global_ctx == NULL) {
        status = context_create(&global_ctx);
    } else {
        global_ctx->refs++;
    }
    if (status == WEFT_OK) {
        *ctx_p = global_ctx;
    }
    pthread_mutex_unlock(&weft__ucx_global_lock);
    return status;
}

void weft__ucx_context_put(weft_ucx_context_t *ctx)
{
    pthread_mutex_lock(&weft__ucx_global_lock);
    if (--ctx->refs == 0) {
        context_destroy(ctx);
        global_ctx = NULL;
    }
    pthread_mutex_unlock(&weft__ucx_global_lock);
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
weft_status_t weft__ucx_peer_lookup(weft_ucx_context_t *ctx, const void *addr, size_t len, int rank,
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

/* Record the failure and queue the peer for weft__ucx_reap_failures. Runs inside UCX
 * too (the error callback), so it only records. */
void weft__ucx_peer_fail(ucx_peer_t *peer, ucs_status_t status, const char *how)
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
    weft__ucx_peer_fail(arg, status != UCS_OK ? status : UCS_ERR_CONNECTION_RESET,
                        "reported by UCX");
}

/* 1 when the peer runs on this host and its process is gone. */
int weft__ucx_peer_is_gone(const weft_ucx_context_t *ctx, const ucx_peer_t *peer)
{
    return ctx->host != 0 && peer->id.host == ctx->host &&
           weft__proc_start_time(peer->id.pid) != peer->id.start_time;
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
            if (peer->nreqs > 0 && peer->failure == UCS_OK && weft__ucx_peer_is_gone(ctx, peer)) {
                weft__ucx_peer_fail(peer, UCS_ERR_ENDPOINT_TIMEOUT, "its process is gone");
            }
        }
    }
}

/* The peer's endpoint, created on first use (ctx locked). */
weft_status_t weft__ucx_peer_connect(weft_ucx_context_t *ctx, ucx_peer_t *peer, int rank)
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

void weft__ucx_recv_link(weft_p2p_req_t *req)
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

void weft__ucx_recv_unlink(weft_p2p_req_t *req)
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
void weft__ucx_reap_failures(weft_ucx_context_t *ctx)
{
    while (ctx->failed != NULL) {
        ucx_peer_t *peer = ctx->failed;

        ctx->failed = peer->failed_next;
        while (peer->recvs != NULL) {
            weft_p2p_req_t *req = peer->recvs;

            weft__ucx_recv_unlink(req);
            req->peer_failed = 1;
            ucp_request_cancel(ctx->worker, req->ucp_req);
        }
        peer_disconnect(ctx, peer);
    }
}

unsigned weft__ucx_worker_progress(weft_ucx_context_t *ctx)
{
    unsigned n = ucp_worker_progress(ctx->worker);

    liveness_check(ctx);
    if (ctx->failed != NULL) {
        weft__ucx_reap_failures(ctx);
    }
    return n;
}
