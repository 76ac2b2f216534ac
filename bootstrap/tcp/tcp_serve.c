/*
 * TCP unique-id bootstrap, what the root serves (tcp_root.h): output queues
 * and frames on each connection, registration, the allgathers and barriers,
 * failure notices and aborts.
 */
#include "bootstrap/tcp/tcp_root.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

out_buf_t *weft__tcp_out_new(const root_t *root, unsigned type, int rank, uint32_t seq,
                             const void *p1, size_t l1, const void *p2, size_t l2)
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

void weft__tcp_conn_drop(conn_t *c)
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
void weft__tcp_root_broadcast(root_t *root, out_buf_t *b, int (*pick)(const root_t *, int))
{
    if (b == NULL) {
        weft__tcp_root_abort(root, WEFT_ERR_NO_MEMORY, "the root is out of memory");
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

void weft__tcp_conn_flush(root_t *root, conn_t *c)
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
    conn_send(root, c, weft__tcp_out_new(root, MSG_ABORT, -1, 0, st, 4, msg, strlen(msg)));
    c->closing = 1;
}

void weft__tcp_root_abort(root_t *root, weft_status_t status, const char *fmt, ...)
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
    weft__tcp_root_broadcast(
        root,
        weft__tcp_out_new(root, MSG_ABORT, -1, 0, st, 4, root->abort_msg, strlen(root->abort_msg)),
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
        weft__tcp_root_abort(root, WEFT_ERR_PEER_FAILED,
                             "rank %d (pid %u on %s) failed before all ranks registered: %s", r,
                             c->pid, c->host, why);
        return;
    }
    weft__log_warn("tcp bootstrap root %s: rank %d (pid %u on %s) failed: %s", root->name, r,
                   c->pid, c->host, why);
    weft__tcp_root_broadcast(root, weft__tcp_out_new(root, MSG_FAILED, r, 0, NULL, 0, NULL, 0),
                             NULL);
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
    weft__tcp_conn_drop(c);
}

/* A message that breaks the protocol: a stranger is dropped, a rank aborts the job. */
static void conn_bad(root_t *root, conn_t *c, const char *why)
{
    if (c->rank < 0) {
        weft__tcp_stranger_dropped(root, c, why);
        return;
    }
    weft__tcp_root_abort(root, WEFT_ERR_BOOTSTRAP,
                         "rank %d (pid %u on %s) sent a malformed message: %s", c->rank, c->pid,
                         c->host, why);
    conn_lost(root, c, why);
}

static void root_welcome(root_t *root)
{
    unsigned char p[WELCOME_BYTES];
    int root_rank;

    pthread_mutex_lock(&weft__tcp_registry_lock);
    root_rank = root->host_rank >= 0 ? root->host_rank : 0;
    pthread_mutex_unlock(&weft__tcp_registry_lock);
    weft__tcp_put32(p, (uint32_t)root->nranks);
    weft__tcp_put32(p + 4, (uint32_t)root_rank);
    root->welcomed = 1;
    root->report_dirty = 0;
    weft__log_debug("tcp bootstrap root %s: all %d ranks registered", root->name, root->nranks);
    weft__tcp_root_broadcast(
        root, weft__tcp_out_new(root, MSG_WELCOME, -1, 0, p, WELCOME_BYTES, NULL, 0), NULL);
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
        weft__tcp_root_abort(root, WEFT_ERR_BOOTSTRAP, "%s", msg);
        return;
    }
    if (root->state[rank] != RANK_ABSENT) {
        other = root->by_rank[rank];
        snprintf(msg, sizeof(msg), "rank %d registered twice: pid %u on %s, and pid %u on %s", rank,
                 other != NULL ? other->pid : 0, other != NULL ? other->host : "?", c->pid,
                 c->host);
        reply_abort(root, c, WEFT_ERR_BOOTSTRAP, msg);
        weft__tcp_root_abort(root, WEFT_ERR_BOOTSTRAP, "%s", msg);
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
        weft__tcp_root_abort(root, WEFT_ERR_BOOTSTRAP,
                             "rank %d sent %s #%u while the job was at op #%u", r, what, c->f.seq,
                             root->seq + 1);
        return;
    }
    if (root->op_type == 0) {
        if ((uint64_t)root->nranks * c->f.len > WEFT_TCP_MAX_PAYLOAD) {
            weft__tcp_root_abort(root, WEFT_ERR_BOOTSTRAP,
                                 "rank %d: allgather of %d x %llu bytes is over "
                                 "the 64 MiB limit",
                                 r, root->nranks, (unsigned long long)c->f.len);
            return;
        }
        root->op_buf = malloc((size_t)(root->nranks * c->f.len) + 1);
        if (root->op_buf == NULL) {
            weft__tcp_root_abort(root, WEFT_ERR_NO_MEMORY, "the root is out of memory for %s #%u",
                                 what, c->f.seq);
            return;
        }
        root->op_type = c->f.type;
        root->op_bytes = c->f.len;
        root->op_first = r;
        root->op_arrived = 0;
        memset(root->op_have, 0, (size_t)root->nranks);
        root->wait_since_ns = weft__time_ns();
    } else if (c->f.type != root->op_type || c->f.len != root->op_bytes) {
        weft__tcp_root_abort(
            root, WEFT_ERR_BOOTSTRAP,
            "op #%u: rank %d called %s with %llu bytes, rank %d called %s with %llu bytes",
            c->f.seq, r, what, (unsigned long long)c->f.len, root->op_first,
            root->op_type == MSG_BARRIER ? "barrier" : "allgather",
            (unsigned long long)root->op_bytes);
        return;
    }
    if (root->op_have[r]) {
        weft__tcp_root_abort(root, WEFT_ERR_BOOTSTRAP, "rank %d sent op #%u twice", r, c->f.seq);
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
    b = weft__tcp_out_new(root, MSG_RESULT, -1, root->seq + 1, root->op_buf,
                          (size_t)root->nranks * root->op_bytes, NULL, 0);
    root->seq++;
    root->op_type = 0;
    free(root->op_buf);
    root->op_buf = NULL;
    root->report_dirty = 0;
    weft__tcp_root_broadcast(root, b, NULL);
}

static void root_release(root_t *root, conn_t *c)
{
    weft__log_debug("tcp bootstrap root %s: rank %d released", root->name, c->rank);
    root->state[c->rank] = RANK_RELEASED;
    root->by_rank[c->rank] = NULL;
    weft__tcp_conn_drop(c); /* the rank waits for this end of stream */
}

/* A rank gave up (its own deadline passed while it registered): the job
 * cannot complete, and the others learn why rather than that it vanished. */
static void root_giveup(root_t *root, conn_t *c)
{
    weft__tcp_root_abort(root, weft__tcp_wire_status(weft__tcp_get32(c->body)),
                         "rank %d (pid %u on %s) gave up: %.*s", c->rank, c->pid, c->host,
                         (int)(c->f.len - 4), (const char *)c->body + 4);
    root->state[c->rank] = RANK_RELEASED;
    root->by_rank[c->rank] = NULL;
    weft__tcp_conn_drop(c);
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

void weft__tcp_conn_read(root_t *root, conn_t *c)
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
