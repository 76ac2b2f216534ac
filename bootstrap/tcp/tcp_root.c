/*
 * TCP unique-id bootstrap, the root service (contract in tcp.h, design in
 * tcp.c): weft__tcp_id_create, which starts it; its thread's connections,
 * output queues and poll loop; registration, the allgathers and barriers it
 * serves, failure notices and aborts; and the registry through which the
 * contexts of this process attach to the root they host.
 *
 * While a registration or an op has waited REPORT_AFTER_NS, the root sends
 * the waiting ranks who is missing (at most every REPORT_EVERY_NS), so that a
 * rank whose deadline expires can name the ranks it waited for.
 */
#include "bootstrap/tcp/tcp_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#define HANDSHAKE_NS (10 * SEC_NS) /* an unregistered connection must register by then */
#define REPORT_EVERY_NS (100 * MS_NS)
#define ABORT_LINGER_NS (2 * SEC_NS) /* after an abort, ranks close at once */
#define ACCEPT_PAUSE_NS (100 * MS_NS)

/* ---- the root service --------------------------------------------------- */

typedef struct out_buf {
    unsigned refs;
    size_t len;
    unsigned char data[];
} out_buf_t;

typedef struct out_item {
    struct out_item *next;
    out_buf_t *buf;
    size_t off;
} out_item_t;

typedef struct conn {
    int fd;
    int rank;    /* -1 until registered */
    int closing; /* 1: shut the write side once flushed; 2: shut, wait for end of stream */
    int dead;
    uint64_t hello_deadline_ns;
    char name[NAME_MAX_CHARS];
    unsigned pid;
    char host[HOST_BYTES];
    unsigned char hdr[HDR_BYTES];
    size_t hdr_got;
    frame_t f;
    unsigned char *body;
    size_t body_got;
    out_item_t *out_head, *out_tail;
} conn_t;

enum { RANK_ABSENT, RANK_LIVE, RANK_RELEASED, RANK_FAILED };

struct root {
    struct root *next; /* in the registry */
    pid_t pid;         /* a forked child inherits the registry, not the thread */
    unsigned char token[TOKEN_BYTES];
    char name[NAME_MAX_CHARS];
    int listen_fd, wake_fd;
    pthread_t thread;

    /* Written by this process's contexts under registry_lock. */
    int local_refs;
    int host_rank;
    int host_left;
    weft_status_t host_status;
    char host_msg[MSG_MAX];

    /* Root thread only. */
    conn_t **conns;
    struct pollfd *pfds; /* conns_cap + 2 */
    int nconns, conns_cap;
    int nranks; /* 0 until the first registration */
    int registered, welcomed;
    conn_t **by_rank;
    unsigned char *state;
    int aborted;
    weft_status_t abort_status;
    char abort_msg[MSG_MAX];
    uint32_t seq; /* ops completed; the op in progress is seq + 1 */
    unsigned op_type;
    uint64_t op_bytes;
    int op_arrived, op_first;
    unsigned char *op_buf, *op_have;
    uint64_t wait_since_ns, report_last_ns;
    int report_dirty;
    int host_seen_left;
    uint64_t linger_deadline_ns, accept_paused_until_ns;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static root_t *registry;

static out_buf_t *out_new(const root_t *root, unsigned type, int rank, uint32_t seq, const void *p1,
                          size_t l1, const void *p2, size_t l2)
{
    out_buf_t *b = malloc(sizeof(*b) + HDR_BYTES + l1 + l2);

    if (b == NULL) {
        weft__log_error("tcp bootstrap root %s: out of memory for a message", root->name);
        return NULL;
    }
    b->refs = 0;
    b->len = HDR_BYTES + l1 + l2;
    weft__tcp_hdr_encode(b->data, root->token, type, rank, seq, l1 + l2);
    if (l1 > 0) {
        memcpy(b->data + HDR_BYTES, p1, l1);
    }
    if (l2 > 0) {
        memcpy(b->data + HDR_BYTES + l1, p2, l2);
    }
    return b;
}

static void out_unref(out_buf_t *b)
{
    if (--b->refs == 0) {
        free(b);
    }
}

static void conn_drop(conn_t *c)
{
    if (c->dead) {
        return;
    }
    close(c->fd);
    c->dead = 1;
    while (c->out_head != NULL) {
        out_item_t *it = c->out_head;

        c->out_head = it->next;
        out_unref(it->buf);
        free(it);
    }
    free(c->body);
    c->body = NULL;
}

static void root_abort(root_t *root, weft_status_t status, const char *fmt, ...) WEFT_PRINTF(3, 4);
static void conn_lost(root_t *root, conn_t *c, const char *why);

/* Queue b (NULL: allocation failed) on c, taking a reference. */
static void conn_send(root_t *root, conn_t *c, out_buf_t *b)
{
    out_item_t *it;

    if (c->dead) {
        return;
    }
    it = b != NULL ? malloc(sizeof(*it)) : NULL;
    if (it == NULL) {
        conn_lost(root, c, "out of memory for its output");
        return;
    }
    b->refs++;
    it->next = NULL;
    it->buf = b;
    it->off = 0;
    if (c->out_tail != NULL) {
        c->out_tail->next = it;
    } else {
        c->out_head = it;
    }
    c->out_tail = it;
}

/* Send b to every live rank for which pick(root, rank) holds (NULL: all). */
static void root_broadcast(root_t *root, out_buf_t *b, int (*pick)(const root_t *, int))
{
    if (b == NULL) {
        root_abort(root, WEFT_ERR_NO_MEMORY, "the root is out of memory");
        return;
    }
    b->refs++; /* hold it while queuing */
    for (int r = 0; r < root->nranks; r++) {
        if (root->state[r] == RANK_LIVE && (pick == NULL || pick(root, r))) {
            conn_send(root, root->by_rank[r], b);
        }
    }
    out_unref(b);
}

static void conn_flush(root_t *root, conn_t *c)
{
    while (!c->dead && c->out_head != NULL) {
        out_item_t *it = c->out_head;
        ssize_t n = send(c->fd, it->buf->data + it->off, it->buf->len - it->off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                conn_lost(root, c, strerror(errno));
            }
            return;
        }
        it->off += (size_t)n;
        if (it->off == it->buf->len) {
            c->out_head = it->next;
            if (c->out_head == NULL) {
                c->out_tail = NULL;
            }
            out_unref(it->buf);
            free(it);
        }
    }
    if (!c->dead && c->closing == 1) {
        /* the peer reads what was queued, then sees the end of the stream */
        shutdown(c->fd, SHUT_WR);
        c->closing = 2;
    }
}

static void reply_abort(root_t *root, conn_t *c, weft_status_t status, const char *msg)
{
    unsigned char st[4];

    weft__tcp_put32(st, (uint32_t)status);
    conn_send(root, c, out_new(root, MSG_ABORT, -1, 0, st, 4, msg, strlen(msg)));
    c->closing = 1;
}

static void root_abort(root_t *root, weft_status_t status, const char *fmt, ...)
{
    unsigned char st[4];
    va_list ap;

    if (root->aborted) {
        return;
    }
    root->aborted = 1;
    root->abort_status = status;
    va_start(ap, fmt);
    vsnprintf(root->abort_msg, sizeof(root->abort_msg), fmt, ap);
    va_end(ap);
    weft__log_error("tcp bootstrap root %s: aborting the job: %s", root->name, root->abort_msg);
    weft__tcp_put32(st, (uint32_t)status);
    root_broadcast(root,
                   out_new(root, MSG_ABORT, -1, 0, st, 4, root->abort_msg, strlen(root->abort_msg)),
                   NULL);
    if (root->host_seen_left && root->linger_deadline_ns > weft__time_ns() + ABORT_LINGER_NS) {
        root->linger_deadline_ns = weft__time_ns() + ABORT_LINGER_NS;
    }
}

static void rank_failed(root_t *root, int r, const char *why)
{
    conn_t *c = root->by_rank[r];

    root->state[r] = RANK_FAILED;
    root->by_rank[r] = NULL;
    if (root->aborted) {
        weft__log_debug("tcp bootstrap root %s: rank %d left the aborted job: %s", root->name, r,
                        why);
        return;
    }
    if (!root->welcomed) {
        root_abort(root, WEFT_ERR_PEER_FAILED,
                   "rank %d (pid %u on %s) failed before all ranks registered: %s", r, c->pid,
                   c->host, why);
        return;
    }
    weft__log_warn("tcp bootstrap root %s: rank %d (pid %u on %s) failed: %s", root->name, r,
                   c->pid, c->host, why);
    root_broadcast(root, out_new(root, MSG_FAILED, r, 0, NULL, 0, NULL, 0), NULL);
}

/* c's connection ended or broke: a registered rank that had not released
 * has failed. */
static void conn_lost(root_t *root, conn_t *c, const char *why)
{
    if (c->dead) {
        return;
    }
    if (c->rank >= 0 && root->state[c->rank] == RANK_LIVE && root->by_rank[c->rank] == c) {
        rank_failed(root, c->rank, why);
    } else if (c->closing == 0) {
        weft__log_debug("tcp bootstrap root %s: connection from %s ended: %s", root->name, c->name,
                        why);
    }
    conn_drop(c);
}

/* A message that breaks the protocol: a stranger is dropped, a rank aborts the job. */
static void conn_bad(root_t *root, conn_t *c, const char *why)
{
    if (c->rank < 0) {
        weft__log_warn("tcp bootstrap root %s: dropping the connection from %s: %s", root->name,
                       c->name, why);
        conn_drop(c);
        return;
    }
    root_abort(root, WEFT_ERR_BOOTSTRAP, "rank %d (pid %u on %s) sent a malformed message: %s",
               c->rank, c->pid, c->host, why);
    conn_lost(root, c, why);
}

static int is_live(const root_t *root, int r)
{
    return root->state[r] == RANK_LIVE;
}

static int has_contributed(const root_t *root, int r)
{
    return root->op_have[r];
}

static void root_welcome(root_t *root)
{
    unsigned char p[WELCOME_BYTES];
    int root_rank;

    pthread_mutex_lock(&registry_lock);
    root_rank = root->host_rank >= 0 ? root->host_rank : 0;
    pthread_mutex_unlock(&registry_lock);
    weft__tcp_put32(p, (uint32_t)root->nranks);
    weft__tcp_put32(p + 4, (uint32_t)root_rank);
    root->welcomed = 1;
    root->report_dirty = 0;
    weft__log_debug("tcp bootstrap root %s: all %d ranks registered", root->name, root->nranks);
    root_broadcast(root, out_new(root, MSG_WELCOME, -1, 0, p, WELCOME_BYTES, NULL, 0), NULL);
}

static void root_hello(root_t *root, conn_t *c)
{
    int nranks = (int)weft__tcp_get32(c->body), rank = c->f.rank;
    conn_t *other;
    char msg[MSG_MAX];

    c->pid = weft__tcp_get32(c->body + 4);
    memcpy(c->host, c->body + 8, HOST_BYTES);
    c->host[HOST_BYTES - 1] = '\0';
    if (root->aborted) {
        reply_abort(root, c, root->abort_status, root->abort_msg);
        return;
    }
    if (nranks < 1 || nranks > WEFT_TCP_MAX_RANKS || rank < 0 || rank >= nranks) {
        snprintf(msg, sizeof(msg), "rank %d of %d ranks (pid %u on %s) is out of range", rank,
                 nranks, c->pid, c->host);
        weft__log_warn("tcp bootstrap root %s: %s", root->name, msg);
        reply_abort(root, c, WEFT_ERR_BOOTSTRAP, msg);
        return;
    }
    if (root->welcomed) {
        /* A stray process must not break a job that is running. */
        snprintf(msg, sizeof(msg),
                 "rank %d (pid %u on %s) registered with a job whose %d ranks have all "
                 "registered",
                 rank, c->pid, c->host, root->nranks);
        weft__log_warn("tcp bootstrap root %s: %s", root->name, msg);
        reply_abort(root, c, WEFT_ERR_BOOTSTRAP, msg);
        return;
    }
    if (root->nranks == 0) {
        root->by_rank = calloc((size_t)nranks, sizeof(*root->by_rank));
        root->state = calloc((size_t)nranks, 1);
        root->op_have = calloc((size_t)nranks, 1);
        if (root->by_rank == NULL || root->state == NULL || root->op_have == NULL) {
            free(root->by_rank);
            free(root->state);
            free(root->op_have);
            root->by_rank = NULL;
            root->state = root->op_have = NULL;
            reply_abort(root, c, WEFT_ERR_NO_MEMORY, "the root is out of memory");
            return;
        }
        root->nranks = nranks;
        root->wait_since_ns = weft__time_ns();
    }
    if (nranks != root->nranks) {
        snprintf(msg, sizeof(msg),
                 "rank %d (pid %u on %s) registered with nranks %d, but the ranks before it "
                 "registered with nranks %d",
                 rank, c->pid, c->host, nranks, root->nranks);
        reply_abort(root, c, WEFT_ERR_BOOTSTRAP, msg);
        root_abort(root, WEFT_ERR_BOOTSTRAP, "%s", msg);
        return;
    }
    if (root->state[rank] != RANK_ABSENT) {
        other = root->by_rank[rank];
        snprintf(msg, sizeof(msg), "rank %d registered twice: pid %u on %s, and pid %u on %s", rank,
                 other != NULL ? other->pid : 0, other != NULL ? other->host : "?", c->pid,
                 c->host);
        reply_abort(root, c, WEFT_ERR_BOOTSTRAP, msg);
        root_abort(root, WEFT_ERR_BOOTSTRAP, "%s", msg);
        return;
    }
    c->rank = rank;
    root->by_rank[rank] = c;
    root->state[rank] = RANK_LIVE;
    root->report_dirty = 1;
    weft__log_debug("tcp bootstrap root %s: rank %d of %d registered from %s", root->name, rank,
                    nranks, c->name);
    if (++root->registered == root->nranks) {
        root_welcome(root);
    }
}

static void root_collective(root_t *root, conn_t *c)
{
    const char *what = c->f.type == MSG_BARRIER ? "barrier" : "allgather";
    int r = c->rank;
    out_buf_t *b;

    if (root->aborted) {
        return; /* the rank has the abort notice, or will read it before a result */
    }
    if (!root->welcomed || c->f.seq != root->seq + 1) {
        root_abort(root, WEFT_ERR_BOOTSTRAP, "rank %d sent %s #%u while the job was at op #%u", r,
                   what, c->f.seq, root->seq + 1);
        return;
    }
    if (root->op_type == 0) {
        if ((uint64_t)root->nranks * c->f.len > WEFT_TCP_MAX_PAYLOAD) {
            root_abort(root, WEFT_ERR_BOOTSTRAP,
                       "rank %d: allgather of %d x %llu bytes is over "
                       "the 64 MiB limit",
                       r, root->nranks, (unsigned long long)c->f.len);
            return;
        }
        root->op_buf = malloc((size_t)(root->nranks * c->f.len) + 1);
        if (root->op_buf == NULL) {
            root_abort(root, WEFT_ERR_NO_MEMORY, "the root is out of memory for %s #%u", what,
                       c->f.seq);
            return;
        }
        root->op_type = c->f.type;
        root->op_bytes = c->f.len;
        root->op_first = r;
        root->op_arrived = 0;
        memset(root->op_have, 0, (size_t)root->nranks);
        root->wait_since_ns = weft__time_ns();
    } else if (c->f.type != root->op_type || c->f.len != root->op_bytes) {
        root_abort(root, WEFT_ERR_BOOTSTRAP,
                   "op #%u: rank %d called %s with %llu bytes, rank %d called %s with %llu bytes",
                   c->f.seq, r, what, (unsigned long long)c->f.len, root->op_first,
                   root->op_type == MSG_BARRIER ? "barrier" : "allgather",
                   (unsigned long long)root->op_bytes);
        return;
    }
    if (root->op_have[r]) {
        root_abort(root, WEFT_ERR_BOOTSTRAP, "rank %d sent op #%u twice", r, c->f.seq);
        return;
    }
    if (c->f.len > 0) {
        memcpy(root->op_buf + (size_t)r * c->f.len, c->body, c->f.len);
    }
    root->op_have[r] = 1;
    root->report_dirty = 1;
    if (++root->op_arrived < root->nranks) {
        return;
    }
    b = out_new(root, MSG_RESULT, -1, root->seq + 1, root->op_buf,
                (size_t)root->nranks * root->op_bytes, NULL, 0);
    root->seq++;
    root->op_type = 0;
    free(root->op_buf);
    root->op_buf = NULL;
    root->report_dirty = 0;
    root_broadcast(root, b, NULL);
}

static void root_release(root_t *root, conn_t *c)
{
    weft__log_debug("tcp bootstrap root %s: rank %d released", root->name, c->rank);
    root->state[c->rank] = RANK_RELEASED;
    root->by_rank[c->rank] = NULL;
    conn_drop(c); /* the rank waits for this end of stream */
}

/* A rank gave up (its own deadline passed while it registered): the job
 * cannot complete, and the others learn why rather than that it vanished. */
static void root_giveup(root_t *root, conn_t *c)
{
    root_abort(root, weft__tcp_wire_status(weft__tcp_get32(c->body)),
               "rank %d (pid %u on %s) gave up: %.*s", c->rank, c->pid, c->host,
               (int)(c->f.len - 4), (const char *)c->body + 4);
    root->state[c->rank] = RANK_RELEASED;
    root->by_rank[c->rank] = NULL;
    conn_drop(c);
}

/* Header complete: check it against what this connection may send. */
static int conn_header(root_t *root, conn_t *c)
{
    const char *why = weft__tcp_hdr_decode(c->hdr, root->token, &c->f);
    unsigned t = c->f.type;
    uint64_t len = c->f.len;

    if (why == NULL && c->rank < 0 && (t != MSG_HELLO || len != HELLO_BYTES)) {
        why = "expected a registration";
    }
    if (why == NULL && c->rank >= 0) {
        if (t == MSG_ALLGATHER) {
            why = len > WEFT_TCP_MAX_PAYLOAD / (unsigned)root->nranks
                      ? "allgather larger than the 64 MiB limit"
                      : NULL;
        } else if (t == MSG_BARRIER || t == MSG_RELEASE) {
            why = len != 0 ? "unexpected payload" : NULL;
        } else if (t == MSG_ABORT) {
            why = len < 4 || len > 4 + MSG_MAX ? "malformed abort" : NULL;
        } else {
            why = "unexpected message type";
        }
        if (why == NULL && c->f.rank != c->rank) {
            why = "message with another rank's number";
        }
    }
    if (why == NULL && len > 0 && (c->body = malloc(len)) == NULL) {
        why = "out of memory for its message";
    }
    if (why != NULL) {
        conn_bad(root, c, why);
        return -1;
    }
    c->body_got = 0;
    return 0;
}

static void conn_frame(root_t *root, conn_t *c)
{
    switch (c->f.type) {
    case MSG_HELLO:
        root_hello(root, c);
        break;
    case MSG_ALLGATHER:
    case MSG_BARRIER:
        root_collective(root, c);
        break;
    case MSG_ABORT:
        root_giveup(root, c);
        break;
    default: /* MSG_RELEASE, the only other type conn_header lets through */
        root_release(root, c);
        break;
    }
    if (!c->dead) {
        free(c->body);
        c->body = NULL;
        c->hdr_got = 0;
    }
}

static void conn_read(root_t *root, conn_t *c)
{
    unsigned char scratch[256];

    while (!c->dead) {
        int in_body = c->hdr_got == HDR_BYTES;
        unsigned char *dst = in_body ? c->body + c->body_got : c->hdr + c->hdr_got;
        size_t want = in_body ? c->f.len - c->body_got : HDR_BYTES - c->hdr_got;
        ssize_t n;

        if (c->closing) { /* answered and closing: discard */
            dst = scratch;
            want = sizeof(scratch);
        }
        n = recv(c->fd, dst, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        if (n <= 0) {
            if (n == 0 && (c->hdr_got > 0 || in_body) && !c->closing && c->rank < 0) {
                conn_bad(root, c, "message truncated by the end of the connection");
            } else {
                conn_lost(root, c, n == 0 ? "connection closed" : strerror(errno));
            }
            return;
        }
        if (c->closing) {
            continue;
        }
        if (in_body) {
            c->body_got += (size_t)n;
        } else if ((c->hdr_got += (size_t)n) == HDR_BYTES && conn_header(root, c) != 0) {
            return;
        }
        if (c->hdr_got == HDR_BYTES && c->body_got == c->f.len) {
            conn_frame(root, c);
        }
    }
}

static int root_grow(root_t *root)
{
    int cap = root->conns_cap * 2;
    conn_t **conns = realloc(root->conns, (size_t)cap * sizeof(*conns));
    struct pollfd *pfds;

    if (conns == NULL) {
        return -1;
    }
    root->conns = conns;
    pfds = realloc(root->pfds, (size_t)(cap + 2) * sizeof(*pfds));
    if (pfds == NULL) {
        return -1;
    }
    root->pfds = pfds;
    root->conns_cap = cap;
    return 0;
}

static void root_accept(root_t *root, uint64_t now)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd =
            accept4(root->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        conn_t *c;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                weft__log_warn("tcp bootstrap root %s: accept: %s", root->name, strerror(errno));
                root->accept_paused_until_ns = now + ACCEPT_PAUSE_NS;
            }
            return;
        }
        if (root->nconns == root->conns_cap && root_grow(root) != 0) {
            weft__log_warn("tcp bootstrap root %s: out of memory, refusing a connection",
                           root->name);
            close(fd);
            return;
        }
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            return;
        }
        c->fd = fd;
        c->rank = -1;
        c->hello_deadline_ns = now + HANDSHAKE_NS;
        weft__tcp_sa_name((struct sockaddr *)&ss, c->name, sizeof(c->name));
        strcpy(c->host, "?");
        weft__tcp_sock_tune(fd);
        root->conns[root->nconns++] = c;
    }
}

/* Tell the ranks waiting on a registration or an op who they wait for. */
static void root_report(root_t *root, uint64_t now)
{
    unsigned char p[REPORT_MAX_BYTES];
    int registration = !root->welcomed, listed = 0, arrived = 0;

    for (int r = 0; r < root->nranks; r++) {
        int here = registration ? root->state[r] != RANK_ABSENT : root->op_have[r];

        arrived += here;
        if (!here && listed < REPORT_MAX_LISTED) {
            weft__tcp_put32(p + 8 + 4 * listed++, (uint32_t)r);
        }
    }
    weft__tcp_put32(p, (uint32_t)arrived);
    weft__tcp_put32(p + 4, (uint32_t)listed);
    root_broadcast(root,
                   out_new(root, MSG_PENDING, -1, registration ? 0 : root->seq + 1, p,
                           8 + 4 * (size_t)listed, NULL, 0),
                   registration ? is_live : has_contributed);
    root->report_dirty = 0;
    root->report_last_ns = now;
}

static void root_check_host(root_t *root, uint64_t now)
{
    uint64_t value;
    weft_status_t status;
    char msg[MSG_MAX];
    int left;

    if (read(root->wake_fd, &value, sizeof(value)) < 0) {
        /* EAGAIN: a spurious wake-up; the state below is what counts */
    }
    pthread_mutex_lock(&registry_lock);
    left = root->host_left;
    status = root->host_status;
    memcpy(msg, root->host_msg, sizeof(msg));
    pthread_mutex_unlock(&registry_lock);
    if (status != WEFT_OK) {
        root_abort(root, status, "the process hosting the bootstrap root gave up: %s", msg);
    }
    if (left && !root->host_seen_left) {
        root->host_seen_left = 1;
        root->linger_deadline_ns =
            now + (root->aborted ? ABORT_LINGER_NS : (uint64_t)WEFT_TCP_LINGER_S * SEC_NS);
    }
}

/* Remove dropped connections; expire handshakes. Returns the next timer. */
static uint64_t root_sweep(root_t *root, uint64_t now)
{
    uint64_t next = NEVER;
    int n = 0;

    for (int i = 0; i < root->nconns; i++) {
        conn_t *c = root->conns[i];

        if (!c->dead && c->out_head != NULL) {
            conn_flush(root, c);
        }
        if (!c->dead && c->rank < 0 && now >= c->hello_deadline_ns) {
            if (c->closing == 0) {
                weft__log_warn("tcp bootstrap root %s: dropping the connection from %s: no "
                               "registration within %llu s",
                               root->name, c->name, HANDSHAKE_NS / SEC_NS);
            }
            conn_drop(c);
        }
        if (c->dead) {
            free(c);
            continue;
        }
        if (c->rank < 0 && c->hello_deadline_ns < next) {
            next = c->hello_deadline_ns;
        }
        root->conns[n++] = c;
    }
    root->nconns = n;
    return next;
}

static int root_live_ranks(const root_t *root, char *list, size_t len)
{
    int live = 0;
    size_t off = 0;

    list[0] = '\0';
    for (int r = 0; r < root->nranks; r++) {
        if (root->state[r] == RANK_LIVE) {
            live++;
            if (off < len) {
                off += (size_t)snprintf(list + off, len - off, "%s%d", live > 1 ? ", " : "", r);
            }
        }
    }
    return live;
}

static void *root_main(void *arg)
{
    root_t *root = arg;
    char live_list[256];

    for (;;) {
        uint64_t now = weft__time_ns();
        uint64_t next = root_sweep(root, now);
        int waiting =
            !root->aborted && ((!root->welcomed && root->registered > 0) || root->op_type != 0);
        int npfd = root->nconns + 2, n;

        if (waiting && root->report_dirty) {
            uint64_t due = root->wait_since_ns + REPORT_AFTER_NS;

            if (due < root->report_last_ns + REPORT_EVERY_NS) {
                due = root->report_last_ns + REPORT_EVERY_NS;
            }
            if (now >= due) {
                root_report(root, now);
                continue; /* flush it */
            }
            next = due < next ? due : next;
        }
        if (root->host_seen_left) {
            int live = root_live_ranks(root, live_list, sizeof(live_list));

            if (live == 0) {
                break;
            }
            if (now >= root->linger_deadline_ns) {
                weft__log_warn("tcp bootstrap root %s: closing with ranks %s still connected: "
                               "they did not release in time",
                               root->name, live_list);
                break;
            }
            next = root->linger_deadline_ns < next ? root->linger_deadline_ns : next;
        }
        if (root->accept_paused_until_ns > now && root->accept_paused_until_ns < next) {
            next = root->accept_paused_until_ns;
        }
        root->pfds[0] = (struct pollfd){.fd = root->wake_fd, .events = POLLIN};
        root->pfds[1] = (struct pollfd){
            .fd = root->accept_paused_until_ns > now ? -1 : root->listen_fd, .events = POLLIN};
        for (int i = 0; i < root->nconns; i++) {
            conn_t *c = root->conns[i];

            root->pfds[i + 2] = (struct pollfd){
                .fd = c->fd, .events = (short)(POLLIN | (c->out_head != NULL ? POLLOUT : 0))};
        }
        n = poll(root->pfds, (nfds_t)npfd, weft__tcp_timeout_ms(next));
        if (n < 0 && errno != EINTR) {
            weft__log_error("tcp bootstrap root %s: poll: %s; closing the root", root->name,
                            strerror(errno));
            break;
        }
        if (n <= 0) {
            continue;
        }
        now = weft__time_ns();
        if (root->pfds[0].revents != 0) {
            root_check_host(root, now);
        }
        if (root->pfds[1].revents != 0) {
            root_accept(root, now);
        }
        for (int i = 0; i < npfd - 2; i++) {
            conn_t *c = root->conns[i];
            short ev = root->pfds[i + 2].revents;

            if (ev & POLLOUT) {
                conn_flush(root, c);
            }
            if (ev & (POLLIN | POLLHUP | POLLERR)) {
                conn_read(root, c);
            }
        }
    }
    for (int i = 0; i < root->nconns; i++) {
        conn_drop(root->conns[i]);
        free(root->conns[i]);
    }
    root->nconns = 0;
    return NULL;
}

static void root_free(root_t *root)
{
    close(root->listen_fd);
    close(root->wake_fd);
    free(root->conns);
    free(root->pfds);
    free(root->by_rank);
    free(root->state);
    free(root->op_have);
    free(root->op_buf);
    free(root);
}

weft_status_t weft__tcp_id_create(const char *bind_addr, weft_tcp_id_t *id)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    weft_status_t status;
    root_t *root;
    ssize_t got = 0;

    if (id == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id create: NULL id");
    }
    WEFT_CHECK_GOTO(weft__tcp_addr_choose(bind_addr, &ss), err);
    root = calloc(1, sizeof(*root));
    if (root == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "tcp bootstrap: cannot allocate the root");
    }
    root->pid = getpid();
    root->host_rank = -1;
    root->conns_cap = 8;
    root->conns = calloc((size_t)root->conns_cap, sizeof(*root->conns));
    root->pfds = calloc((size_t)root->conns_cap + 2, sizeof(*root->pfds));
    if (root->conns == NULL || root->pfds == NULL) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "tcp bootstrap: cannot allocate the root");
        goto err_free_root;
    }
    while (got < TOKEN_BYTES) {
        ssize_t n = getrandom(root->token + got, (size_t)(TOKEN_BYTES - got), 0);

        if (n < 0 && errno != EINTR) {
            status =
                weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: getrandom: %s", strerror(errno));
            goto err_free_root;
        }
        got += n > 0 ? n : 0;
    }
    root->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (root->listen_fd < 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: socket: %s", strerror(errno));
        goto err_free_root;
    }
    weft__tcp_sa_name((struct sockaddr *)&ss, root->name, sizeof(root->name));
    if (bind(root->listen_fd, (struct sockaddr *)&ss,
             ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) !=
            0 ||
        listen(root->listen_fd, SOMAXCONN) != 0 ||
        getsockname(root->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: cannot listen on %s: %s",
                             root->name, strerror(errno));
        goto err_close_listen;
    }
    weft__tcp_sa_name((struct sockaddr *)&ss, root->name, sizeof(root->name));
    root->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (root->wake_fd < 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: eventfd: %s", strerror(errno));
        goto err_close_listen;
    }
    if (weft__tcp_thread_start(&root->thread, root_main, root) != 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: cannot start the root thread");
        goto err_close_wake;
    }
    pthread_mutex_lock(&registry_lock);
    root->next = registry;
    registry = root;
    pthread_mutex_unlock(&registry_lock);
    weft__tcp_id_encode(id, (struct sockaddr *)&ss, root->token);
    weft__log_debug("tcp bootstrap: root listening on %s", root->name);
    return WEFT_OK;

err_close_wake:
    close(root->wake_fd);
err_close_listen:
    close(root->listen_fd);
err_free_root:
    free(root->conns);
    free(root->pfds);
    free(root);
err:
    return status;
}

/* The root service of this process for token, with one more local
 * context, or NULL. */
root_t *weft__tcp_root_attach(const unsigned char *token, int rank)
{
    root_t *root;

    pthread_mutex_lock(&registry_lock);
    for (root = registry; root != NULL; root = root->next) {
        if (root->pid == getpid() && weft__tcp_token_equal(root->token, token) &&
            !root->host_left) {
            root->local_refs++;
            if (root->host_rank < 0) {
                root->host_rank = rank;
            }
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return root;
}

/* A local context is done with root (status: why it gave up, or OK). The
 * last one waits for the root thread, which ends when the other ranks have
 * released (WEFT_TCP_LINGER_S at most). */
void weft__tcp_root_detach(root_t *root, weft_status_t status, const char *msg)
{
    uint64_t one = 1;
    int last;

    pthread_mutex_lock(&registry_lock);
    if (status != WEFT_OK && root->host_status == WEFT_OK) {
        root->host_status = status;
        snprintf(root->host_msg, sizeof(root->host_msg), "%s", msg);
    }
    last = --root->local_refs == 0;
    if (last) {
        root_t **pp = &registry;

        while (*pp != root) {
            pp = &(*pp)->next;
        }
        *pp = root->next;
        root->host_left = 1;
    }
    pthread_mutex_unlock(&registry_lock);
    if (write(root->wake_fd, &one, sizeof(one)) < 0) {
        /* cannot fail on an eventfd short of overflow */
    }
    if (last) {
        pthread_join(root->thread, NULL);
        root_free(root);
    }
}
