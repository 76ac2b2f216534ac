/*
 * TCP unique-id bootstrap (contract in tcp.h), the rank side: a rank's
 * context (weft__tcp_boot_create), its reader thread, the bootstrap ops and
 * release. The root service is in tcp_root.c and tcp_serve.c; ids, frames
 * and sockets are in tcp_wire.c; what they share is in tcp_internal.h.
 *
 * Idea: a star through a root service thread in the id creator's process.
 *
 *   rank 0 --blob-->\                        /--n blobs--> rank 0
 *   rank 1 --blob--->+--> root: gathers n  -+---n blobs--> rank 1
 *   rank 2 --blob-->/    blobs, by rank      \--n blobs--> rank 2
 *
 * Cost of an allgather of b bytes per rank: 2 alpha + (n b + n^2 b) beta at
 * the root's link. Good for the small blobs a bootstrap exchanges (addresses,
 * node identities), and it gives the root one connection per rank for the
 * life of the job, which is what detects a dead rank: its kernel closes the
 * connection and the root tells everybody else.
 *
 * Root: one thread, nonblocking sockets, one poll loop, incremental frame
 * parsing and per-connection output queues, so a slow or hostile connection
 * never stalls the others. Rank: the calling thread sends and waits on a
 * condition variable; a reader thread per context turns the root's messages
 * into context state, and stores failure notices in the atomic that
 * weft__tcp_boot_failed_rank reads.
 */
#include "bootstrap/tcp/tcp_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RELEASE_WAIT_NS (2 * SEC_NS) /* a releasing rank waits this long for the root's close */

/* ---- a rank's context ---------------------------------------------------- */

typedef struct tcp_ctx {
    int fd;
    int rank, nranks;
    unsigned char token[TOKEN_BYTES];
    char root_name[NAME_MAX_CHARS];
    root_t *hosted; /* the root service, when it lives in this process */
    pthread_t reader;
    _Atomic int failed_rank;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Under lock. seq and releasing: the calling thread; the rest: the reader. */
    uint32_t seq; /* of the op in progress, or the last one */
    int releasing;
    int welcomed, root_rank, reader_done;
    unsigned char *result;
    uint64_t result_len;
    int have_result;
    uint32_t report_seq, report_arrived, report_listed;
    uint32_t report_missing[REPORT_MAX_LISTED];
    int have_report;
    weft_status_t err; /* first error: an abort, a protocol error, an earlier timeout */
    char err_msg[MSG_MAX + 128];
    /* The calling thread's: this rank gave up on the job (tcp_fail), and why. */
    weft_status_t giveup;
    char giveup_msg[MSG_MAX];
} tcp_ctx_t;

static void ctx_set_err(tcp_ctx_t *ctx, weft_status_t status, const char *fmt, ...)
    WEFT_PRINTF(3, 4);

/* Record the first error and wake the calling thread (lock held). */
static void ctx_set_err(tcp_ctx_t *ctx, weft_status_t status, const char *fmt, ...)
{
    va_list ap;

    if (ctx->err == WEFT_OK) {
        ctx->err = status;
        va_start(ap, fmt);
        vsnprintf(ctx->err_msg, sizeof(ctx->err_msg), fmt, ap);
        va_end(ap);
    }
    pthread_cond_broadcast(&ctx->cond);
}

static void ctx_set_failed(tcp_ctx_t *ctx, int rank)
{
    int expected = -1;

    if (atomic_compare_exchange_strong(&ctx->failed_rank, &expected, rank)) {
        if (rank == ctx->root_rank) {
            weft__log_warn("tcp bootstrap: lost the connection to the root at %s (in the process "
                           "of rank %d)",
                           ctx->root_name, rank);
        } else {
            weft__log_warn("tcp bootstrap: rank %d failed", rank);
        }
    }
    pthread_cond_broadcast(&ctx->cond);
}

/* Largest payload the root may send with a message of type; 0 for types it
 * never sends. */
static uint64_t reader_max_len(unsigned type)
{
    switch (type) {
    case MSG_WELCOME:
        return WELCOME_BYTES;
    case MSG_RESULT:
        return WEFT_TCP_MAX_PAYLOAD;
    case MSG_PENDING:
        return REPORT_MAX_BYTES;
    case MSG_ABORT:
        return 4 + MSG_MAX;
    default:
        return 0;
    }
}

static const char *reader_check(const frame_t *f)
{
    int ok;

    switch (f->type) {
    case MSG_WELCOME:
        ok = f->len == WELCOME_BYTES;
        break;
    case MSG_RESULT:
        ok = 1;
        break;
    case MSG_PENDING:
        ok = f->len >= 8 && (f->len - 8) % 4 == 0 && f->len <= REPORT_MAX_BYTES;
        break;
    case MSG_ABORT:
        ok = f->len >= 4 && f->len <= 4 + MSG_MAX;
        break;
    case MSG_FAILED:
        ok = f->len == 0;
        break;
    default:
        return "unexpected message type";
    }
    return ok ? NULL : "message of the wrong length";
}

/* Handle one message from the root (lock held). Returns 1 if it took body,
 * -1 if the connection is unusable, else 0. */
static int reader_frame(tcp_ctx_t *ctx, const frame_t *f, unsigned char *body)
{
    switch (f->type) {
    case MSG_WELCOME:
        ctx->root_rank = (int)weft__tcp_get32(body + 4);
        if ((int)weft__tcp_get32(body) != ctx->nranks || ctx->root_rank < 0 ||
            ctx->root_rank >= ctx->nranks) {
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "malformed welcome from the root at %s",
                        ctx->root_name);
            return -1;
        }
        ctx->welcomed = 1;
        break;
    case MSG_RESULT:
        if (f->seq != ctx->seq || ctx->have_result) {
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "result of op #%u from the root during op #%u",
                        f->seq, ctx->seq);
            return -1;
        }
        ctx->result = body;
        ctx->result_len = f->len;
        ctx->have_result = 1;
        pthread_cond_broadcast(&ctx->cond);
        return 1;
    case MSG_PENDING:
        if (weft__tcp_get32(body + 4) != (f->len - 8) / 4) {
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "malformed report from the root at %s",
                        ctx->root_name);
            return -1;
        }
        ctx->report_seq = f->seq;
        ctx->report_arrived = weft__tcp_get32(body);
        ctx->report_listed = weft__tcp_get32(body + 4);
        for (uint32_t i = 0; i < ctx->report_listed; i++) {
            ctx->report_missing[i] = weft__tcp_get32(body + 8 + 4 * i);
        }
        ctx->have_report = 1;
        return 0;
    case MSG_FAILED:
        if (f->rank < 0 || f->rank >= ctx->nranks) {
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "failure notice for rank %d", (int)f->rank);
            return -1;
        }
        ctx_set_failed(ctx, (int)f->rank);
        return 0;
    default: /* MSG_ABORT */
        ctx_set_err(ctx, weft__tcp_wire_status(weft__tcp_get32(body)),
                    "job aborted by the root: %.*s", (int)(f->len - 4), (const char *)body + 4);
        return -1;
    }
    pthread_cond_broadcast(&ctx->cond);
    return 0;
}

/* The reader ends at the end of the stream or at the first error. While the
 * context is being released it discards messages until the end of stream. */
static void *reader_main(void *arg)
{
    tcp_ctx_t *ctx = arg;
    unsigned char small[4 + MSG_MAX];

    weft__log_set_rank(ctx->rank);
    for (;;) {
        unsigned char hdr[HDR_BYTES], *body = small;
        const char *why = NULL;
        size_t got = 0;
        frame_t f;
        int r = weft__tcp_recv_exact(ctx->fd, hdr, HDR_BYTES, NEVER, &got), err = errno, used = 0;
        int truncated = r == 1 && got > 0;

        if (r == 0 && (why = weft__tcp_hdr_decode(hdr, ctx->token, &f)) == NULL) {
            why = reader_check(&f);
        }
        if (r == 0 && why == NULL && reader_max_len(f.type) > sizeof(small) &&
            (body = malloc(f.len + 1)) == NULL) {
            why = "out of memory for a message";
            body = small;
        }
        if (r == 0 && why == NULL) {
            r = weft__tcp_recv_exact(ctx->fd, body, f.len, NEVER, &got);
            err = errno;
            truncated = r == 1;
        }
        pthread_mutex_lock(&ctx->lock);
        if (ctx->releasing) {
            used = r != 0 ? -1 : 0;
        } else if (truncated || r < 0) {
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "connection to the root at %s: %s", ctx->root_name,
                        truncated ? "message truncated" : strerror(err));
            used = -1;
        } else if (r == 1 && ctx->welcomed) {
            ctx_set_failed(ctx, ctx->root_rank);
            used = -1;
        } else if (r == 1) {
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP,
                        "the root at %s closed the connection before all ranks registered (is "
                        "the id from this job, and is its process alive?)",
                        ctx->root_name);
            used = -1;
        } else if (why != NULL) {
            weft__log_error("tcp bootstrap: bad message from the root at %s: %s", ctx->root_name,
                            why);
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "bad message from the root at %s: %s",
                        ctx->root_name, why);
            used = -1;
        } else {
            used = reader_frame(ctx, &f, body);
        }
        if (used < 0) {
            ctx->reader_done = 1;
            pthread_cond_broadcast(&ctx->cond);
        }
        pthread_mutex_unlock(&ctx->lock);
        if (body != small && used != 1) {
            free(body);
        }
        if (used < 0) {
            return NULL;
        }
    }
}

/* Why the context cannot go on (lock held), recorded with weft__error, or WEFT_OK. */
static weft_status_t ctx_check(tcp_ctx_t *ctx)
{
    int failed = atomic_load(&ctx->failed_rank);

    if (failed >= 0) {
        return weft__error(WEFT_ERR_PEER_FAILED, "tcp bootstrap: rank %d failed%s", failed,
                           failed == ctx->root_rank ? " (its process hosts the bootstrap root)"
                                                    : "");
    }
    if (ctx->err != WEFT_OK) {
        return weft__error(ctx->err, "tcp bootstrap: %s", ctx->err_msg);
    }
    return WEFT_OK;
}

/* Wait (lock held) until *flag is set (WEFT_OK), the context fails (its
 * error), or the deadline passes (WEFT_ERR_TIMEOUT, not recorded: the caller
 * says what it waited for). */
static weft_status_t ctx_wait(tcp_ctx_t *ctx, const int *flag, uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / SEC_NS),
                          .tv_nsec = (long)(deadline_ns % SEC_NS)};

    for (;;) {
        weft_status_t status;

        if (*flag) {
            return WEFT_OK;
        }
        status = ctx_check(ctx);
        if (status != WEFT_OK) {
            return status;
        }
        if (weft__time_ns() >= deadline_ns) {
            return WEFT_ERR_TIMEOUT;
        }
        pthread_cond_timedwait(&ctx->cond, &ctx->lock, &ts);
    }
}

/* "2 of 4 arrived; missing ranks 1, 3" from the root's last report on seq (lock held). */
static void ctx_missing(const tcp_ctx_t *ctx, uint32_t seq, char *buf, size_t len)
{
    int total = ctx->nranks, absent;
    size_t off;

    if (!ctx->have_report || ctx->report_seq != seq) {
        snprintf(buf, len, "no report from the root yet (it reports after %llu ms)",
                 REPORT_AFTER_NS / MS_NS);
        return;
    }
    absent = total - (int)ctx->report_arrived;
    off = (size_t)snprintf(buf, len, "%u of %d arrived; missing rank%s", ctx->report_arrived, total,
                           absent > 1 ? "s" : "");
    for (uint32_t i = 0; i < ctx->report_listed && off < len; i++) {
        off += (size_t)snprintf(buf + off, len - off, "%s %u", i > 0 ? "," : "",
                                ctx->report_missing[i]);
    }
    if (off < len && (int)ctx->report_listed < absent) {
        snprintf(buf + off, len - off, " and %d more", absent - (int)ctx->report_listed);
    }
}

static weft_status_t ctx_connect(tcp_ctx_t *ctx, const struct sockaddr_storage *ss, socklen_t sl,
                                 uint64_t deadline_ns)
{
    uint64_t backoff_ns = 10 * MS_NS;
    int err = ETIMEDOUT;

    for (;;) {
        int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), r = 0;
        socklen_t el = sizeof(err);
        uint64_t now;

        if (fd < 0) {
            return weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: socket: %s", strerror(errno));
        }
        err = 0;
        if (connect(fd, (const struct sockaddr *)ss, sl) != 0 && (err = errno) == EINPROGRESS) {
            err = 0;
            r = weft__tcp_wait_fd(fd, POLLOUT, deadline_ns);
            if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
                err = errno;
            }
        }
        if (r == 0 && err == 0) {
            weft__tcp_sock_tune(fd);
            ctx->fd = fd;
            return WEFT_OK;
        }
        close(fd);
        now = weft__time_ns();
        if (r != 0 || now >= deadline_ns) {
            return weft__error(WEFT_ERR_TIMEOUT,
                               "tcp bootstrap: rank %d could not connect to the root at %s "
                               "before the deadline: %s",
                               ctx->rank, ctx->root_name, r != 0 ? "no answer" : strerror(err));
        }
        if (backoff_ns > deadline_ns - now) {
            backoff_ns = deadline_ns - now;
        }
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = (long)backoff_ns}, NULL);
        backoff_ns = backoff_ns * 2 > 200 * MS_NS ? 200 * MS_NS : backoff_ns * 2;
    }
}

/* Close the connection and stop the reader. */
static void ctx_close(tcp_ctx_t *ctx)
{
    shutdown(ctx->fd, SHUT_RDWR);
    pthread_join(ctx->reader, NULL);
    close(ctx->fd);
}

static void ctx_free(tcp_ctx_t *ctx)
{
    pthread_mutex_destroy(&ctx->lock);
    pthread_cond_destroy(&ctx->cond);
    free(ctx->result);
    free(ctx);
}

/* The text of weft_last_error() without its "status: " prefix. */
static const char *last_error_text(weft_status_t status)
{
    const char *msg = weft_last_error();
    size_t n = strlen(weft_status_string(status));

    return strncmp(msg, weft_status_string(status), n) == 0 && msg[n] == ':' ? msg + n + 2 : msg;
}

/* Register and wait for every rank; on failure tell the root why this rank
 * gives up, so that the others learn it too. */
static weft_status_t ctx_register(tcp_ctx_t *ctx, uint64_t deadline_ns)
{
    unsigned char hello[HELLO_BYTES] = {0}, giveup[4 + MSG_MAX];
    weft_status_t status;
    char missing[256];
    int r, err;

    weft__tcp_put32(hello, (uint32_t)ctx->nranks);
    weft__tcp_put32(hello + 4, (uint32_t)getpid());
    gethostname((char *)hello + 8, HOST_BYTES - 1);
    r = weft__tcp_send_frame(ctx->fd, ctx->token, MSG_HELLO, ctx->rank, 0, hello, HELLO_BYTES,
                             deadline_ns);
    err = errno;
    pthread_mutex_lock(&ctx->lock);
    status = ctx_wait(ctx, &ctx->welcomed, r == 0 ? deadline_ns : 0);
    if (status == WEFT_ERR_TIMEOUT && r == 0) {
        ctx_missing(ctx, 0, missing, sizeof(missing));
        status = weft__error(WEFT_ERR_TIMEOUT,
                             "tcp bootstrap: rank %d timed out waiting for all ranks to register "
                             "with the root at %s: %s",
                             ctx->rank, ctx->root_name, missing);
    } else if (status == WEFT_ERR_TIMEOUT) {
        status = weft__error(r == -2 ? WEFT_ERR_TIMEOUT : WEFT_ERR_BOOTSTRAP,
                             "tcp bootstrap: rank %d could not register with the root at %s: %s",
                             ctx->rank, ctx->root_name, r == -2 ? "send timed out" : strerror(err));
    }
    pthread_mutex_unlock(&ctx->lock);
    if (status == WEFT_ERR_TIMEOUT && r == 0) {
        const char *msg = last_error_text(status);
        size_t n = strnlen(msg, MSG_MAX);

        weft__tcp_put32(giveup, (uint32_t)status);
        memcpy(giveup + 4, msg, n);
        /* a courtesy on an idle socket: it has room, so this does not block */
        (void)weft__tcp_send_frame(ctx->fd, ctx->token, MSG_ABORT, ctx->rank, 0, giveup, 4 + n,
                                   weft__time_ns() + 100 * MS_NS);
    }
    return status;
}

weft_status_t weft__tcp_boot_create(const weft_tcp_id_t *id, int nranks, int rank,
                                    uint64_t deadline_ns, void **ctx_p)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    pthread_condattr_t attr;
    weft_status_t status;
    tcp_ctx_t *ctx;

    if (id == NULL || ctx_p == NULL || nranks < 1 || nranks > WEFT_TCP_MAX_RANKS || rank < 0 ||
        rank >= nranks) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap: rank %d of %d ranks%s", rank,
                           nranks, id == NULL || ctx_p == NULL ? ", NULL argument" : "");
    }
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "tcp bootstrap: cannot allocate a context");
    }
    WEFT_CHECK_GOTO(weft__tcp_id_decode(id, &ss, &sl, ctx->token), err_free_ctx);
    ctx->rank = rank;
    ctx->nranks = nranks;
    ctx->root_rank = -1;
    atomic_init(&ctx->failed_rank, -1);
    weft__tcp_sa_name((struct sockaddr *)&ss, ctx->root_name, sizeof(ctx->root_name));
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&ctx->cond, &attr);
    pthread_condattr_destroy(&attr);
    ctx->hosted = weft__tcp_root_attach(ctx->token, rank);

    WEFT_CHECK_GOTO(ctx_connect(ctx, &ss, sl, deadline_ns), err_detach);
    if (weft__tcp_thread_start(&ctx->reader, reader_main, ctx) != 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: cannot start a reader thread");
        close(ctx->fd);
        goto err_detach;
    }
    WEFT_CHECK_GOTO(ctx_register(ctx, deadline_ns), err_close);
    weft__log_debug("tcp bootstrap: rank %d of %d joined through %s", rank, nranks, ctx->root_name);
    *ctx_p = ctx;
    return WEFT_OK;

err_close:
    ctx_close(ctx);
err_detach:
    if (ctx->hosted != NULL) {
        weft__tcp_root_detach(ctx->hosted, status, last_error_text(status));
    }
    pthread_mutex_destroy(&ctx->lock);
    pthread_cond_destroy(&ctx->cond);
err_free_ctx:
    free(ctx);
    return status;
}

int weft__tcp_boot_failed_rank(void *ctx_)
{
    tcp_ctx_t *ctx = ctx_;

    return atomic_load_explicit(&ctx->failed_rank, memory_order_relaxed);
}

/* Send this rank's part of op seq and wait for the result, whose payload goes to out. */
static weft_status_t tcp_collective(tcp_ctx_t *ctx, unsigned type, const void *blob, size_t bytes,
                                    void *out, uint64_t deadline_ns)
{
    const char *what = type == MSG_BARRIER ? "barrier" : "allgather";
    uint64_t total = (uint64_t)bytes * (uint64_t)ctx->nranks;
    char missing[256];
    weft_status_t status;
    uint32_t seq;
    int r, err;

    if (total > WEFT_TCP_MAX_PAYLOAD || bytes > WEFT_TCP_MAX_PAYLOAD) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "tcp bootstrap: allgather of %d x %zu bytes is over the 64 MiB limit",
                           ctx->nranks, bytes);
    }
    pthread_mutex_lock(&ctx->lock);
    status = ctx_check(ctx);
    seq = ++ctx->seq;
    pthread_mutex_unlock(&ctx->lock);
    if (status != WEFT_OK) {
        return status;
    }
    r = weft__tcp_send_frame(ctx->fd, ctx->token, type, ctx->rank, seq, blob, bytes, deadline_ns);
    err = errno;
    pthread_mutex_lock(&ctx->lock);
    status = ctx_wait(ctx, &ctx->have_result, r == 0 ? deadline_ns : 0);
    if (status == WEFT_ERR_TIMEOUT) {
        if (r == 0) {
            ctx_missing(ctx, seq, missing, sizeof(missing));
        } else {
            snprintf(missing, sizeof(missing), "sending to the root: %s",
                     r == -2 ? "timed out" : strerror(err));
        }
        status = weft__error(r == -1 ? WEFT_ERR_BOOTSTRAP : WEFT_ERR_TIMEOUT,
                             "tcp bootstrap: rank %d: %s #%u %s: %s", ctx->rank, what, seq,
                             r == -1 ? "failed" : "timed out", missing);
        ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "unusable after %s #%u %s", what, seq,
                    r == -1 ? "failed" : "timed out");
    } else if (status == WEFT_OK && ctx->result_len != total) {
        status = weft__error(WEFT_ERR_BOOTSTRAP,
                             "tcp bootstrap: %s #%u: the root sent %llu bytes, expected %llu", what,
                             seq, (unsigned long long)ctx->result_len, (unsigned long long)total);
        ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "unusable after a bad result");
    } else if (status == WEFT_OK && total > 0) {
        memcpy(out, ctx->result, total);
    }
    free(ctx->result);
    ctx->result = NULL;
    ctx->have_result = 0;
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

static weft_status_t tcp_allgather(void *ctx, const void *blob, void *blobs, size_t bytes,
                                   uint64_t deadline_ns)
{
    return tcp_collective(ctx, MSG_ALLGATHER, blob, bytes, blobs, deadline_ns);
}

static weft_status_t tcp_barrier(void *ctx, uint64_t deadline_ns)
{
    return tcp_collective(ctx, MSG_BARRIER, NULL, 0, NULL, deadline_ns);
}

/* Tell the root this is no failure, then wait for it to close, so that
 * nothing it sent is left unread when this side closes. */
/* Remember why this rank gives up: its release then tells the root, which
 * aborts the job (the others' calls fail at once with this message). */
static void tcp_fail(void *ctx_, weft_status_t status, const char *msg)
{
    tcp_ctx_t *ctx = ctx_;

    if (ctx->giveup == WEFT_OK && status != WEFT_OK) {
        ctx->giveup = status;
        snprintf(ctx->giveup_msg, sizeof(ctx->giveup_msg), "%s", msg);
    }
}

static void tcp_release(void *ctx_)
{
    tcp_ctx_t *ctx = ctx_;
    uint64_t deadline = weft__time_ns() + RELEASE_WAIT_NS;
    struct timespec ts = {.tv_sec = (time_t)(deadline / SEC_NS),
                          .tv_nsec = (long)(deadline % SEC_NS)};
    unsigned char giveup[4 + MSG_MAX];
    size_t n = strnlen(ctx->giveup_msg, MSG_MAX - 1);
    int alive, sent;

    pthread_mutex_lock(&ctx->lock);
    ctx->releasing = 1;
    alive = !ctx->reader_done;
    pthread_mutex_unlock(&ctx->lock);
    if (ctx->giveup != WEFT_OK) {
        /* the root aborts the job and closes this connection, as it does
         * after a release */
        weft__tcp_put32(giveup, (uint32_t)ctx->giveup);
        memcpy(giveup + 4, ctx->giveup_msg, n);
        sent = alive && weft__tcp_send_frame(ctx->fd, ctx->token, MSG_ABORT, ctx->rank, 0, giveup,
                                             4 + n, deadline) == 0;
    } else {
        sent = alive && weft__tcp_send_frame(ctx->fd, ctx->token, MSG_RELEASE, ctx->rank, 0, NULL,
                                             0, deadline) == 0;
    }
    if (sent) {
        pthread_mutex_lock(&ctx->lock);
        while (!ctx->reader_done && weft__time_ns() < deadline) {
            pthread_cond_timedwait(&ctx->cond, &ctx->lock, &ts);
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    ctx_close(ctx);
    if (ctx->hosted != NULL) {
        weft__tcp_root_detach(ctx->hosted, ctx->giveup, ctx->giveup_msg);
    }
    ctx_free(ctx);
}

const weft_bootstrap_ops_t weft__tcp_boot_ops = {
    .name = "tcp",
    .allgather = tcp_allgather,
    .barrier = tcp_barrier,
    .release = tcp_release,
    .fail = tcp_fail,
    .failed_rank = weft__tcp_boot_failed_rank,
};
