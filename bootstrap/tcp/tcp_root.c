/*
 * TCP unique-id bootstrap, the root service (contract in tcp.h, design in
 * tcp.c): weft__tcp_id_create, which starts it; its thread's accepting, poll
 * loop, reports and sweeps; and the registry through which the contexts of
 * this process attach to the root they host. What it serves on each
 * connection (registration, allgathers and barriers, failure notices and
 * aborts) is in tcp_serve.c.
 *
 * While a registration or an op has waited REPORT_AFTER_NS, the root sends
 * the waiting ranks who is missing (at most every REPORT_EVERY_NS), so that a
 * rank whose deadline expires can name the ranks it waited for.
 *
 * Strangers: anyone who can reach the root's port can connect, and the root
 * lives in the application's process (rank 0), so unregistered connections
 * are bounded: at most 2 x nranks of them (STRANGERS_MIN before the first
 * registration tells nranks, and never fewer), each dropped if it has not
 * registered within HANDSHAKE_NS. When a new one would exceed the cap, the
 * oldest goes first, after what it has sent is served (a rank's registration
 * may be waiting in its socket), and the root accepts ACCEPT_BATCH at a time,
 * so a flood of connections costs the root a bounded number of descriptors
 * and cannot starve the ranks' connections, which register in their first
 * round. Drops are logged once per DROP_LOG_EVERY_NS with a count, so that a
 * flood does not flood the log either.
 */
#include "bootstrap/tcp/tcp_root.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#define HANDSHAKE_NS (3 * SEC_NS) /* an unregistered connection must register by then */
#define REPORT_EVERY_NS (100 * MS_NS)
#define ACCEPT_PAUSE_NS (100 * MS_NS)
#define ACCEPT_BATCH 32  /* connections accepted per round of the poll loop */
#define STRANGERS_MIN 64 /* unregistered connections kept: 2 x nranks, at least this */
#define DROP_LOG_EVERY_NS (10 * SEC_NS) /* one line about dropped strangers per period */

pthread_mutex_t weft__tcp_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static root_t *registry;

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

void weft__tcp_stranger_dropped(root_t *root, conn_t *c, const char *why)
{
    uint64_t now = weft__time_ns();

    if (now >= root->drop_log_next_ns) {
        if (root->drops_quiet > 0) {
            weft__log_warn("tcp bootstrap root %s: dropping the connection from %s: %s (and %lu "
                           "more unregistered connections since the last such line)",
                           root->name, c->name, why, root->drops_quiet);
        } else {
            weft__log_warn("tcp bootstrap root %s: dropping the connection from %s: %s", root->name,
                           c->name, why);
        }
        root->drops_quiet = 0;
        root->drop_log_next_ns = now + DROP_LOG_EVERY_NS;
    } else {
        root->drops_quiet++;
        snprintf(root->drop_last_name, sizeof(root->drop_last_name), "%s", c->name);
        root->drop_last_why = why;
    }
    weft__tcp_conn_drop(c);
}

/* The line about the drops that weft__tcp_stranger_dropped kept quiet. */
static void root_log_drops(root_t *root, uint64_t now)
{
    if (root->drops_quiet == 0) {
        return;
    }
    weft__log_warn("tcp bootstrap root %s: dropped %lu more unregistered connections, the "
                   "latest from %s: %s",
                   root->name, root->drops_quiet, root->drop_last_name, root->drop_last_why);
    root->drops_quiet = 0;
    root->drop_log_next_ns = now + DROP_LOG_EVERY_NS;
}

static int root_strangers_cap(const root_t *root)
{
    return root->nranks > STRANGERS_MIN / 2 ? 2 * root->nranks : STRANGERS_MIN;
}

/* Make room for one more unregistered connection (*strangers of them now):
 * serve what the oldest ones have sent, and drop the oldest still
 * unregistered. *oldest: where in conns to look on from. */
static void root_make_room(root_t *root, int *strangers, int *oldest)
{
    while (*strangers >= root_strangers_cap(root) && *oldest < root->nconns) {
        conn_t *c = root->conns[(*oldest)++];

        if (c->dead || c->rank >= 0) {
            continue;
        }
        weft__tcp_conn_read(root, c);
        if (!c->dead && c->rank < 0) {
            weft__tcp_stranger_dropped(root, c,
                                       "too many unregistered connections, the oldest goes first");
        }
        (*strangers)--;
    }
}

static void root_accept(root_t *root, uint64_t now)
{
    int strangers = 0, oldest = 0;

    for (int i = 0; i < root->nconns; i++) {
        strangers += !root->conns[i]->dead && root->conns[i]->rank < 0;
    }
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd;
        conn_t *c;

        root_make_room(root, &strangers, &oldest);
        fd = accept4(root->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
        strangers++;
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
    weft__tcp_root_broadcast(root,
                             weft__tcp_out_new(root, MSG_PENDING, -1,
                                               registration ? 0 : root->seq + 1, p,
                                               8 + 4 * (size_t)listed, NULL, 0),
                             registration ? weft__tcp_is_live : weft__tcp_has_contributed);
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
    pthread_mutex_lock(&weft__tcp_registry_lock);
    left = root->host_left;
    status = root->host_status;
    memcpy(msg, root->host_msg, sizeof(msg));
    pthread_mutex_unlock(&weft__tcp_registry_lock);
    if (status != WEFT_OK) {
        weft__tcp_root_abort(root, status, "the process hosting the bootstrap root gave up: %s",
                             msg);
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
            weft__tcp_conn_flush(root, c);
        }
        if (!c->dead && c->rank < 0 && now >= c->hello_deadline_ns) {
            if (c->closing == 0) {
                weft__tcp_stranger_dropped(root, c, "no registration within the handshake time");
            } else {
                weft__tcp_conn_drop(c);
            }
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
    if (root->drops_quiet > 0) {
        if (now >= root->drop_log_next_ns) {
            root_log_drops(root, now);
        } else if (root->drop_log_next_ns < next) {
            next = root->drop_log_next_ns;
        }
    }
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
                weft__tcp_conn_flush(root, c);
            }
            if (ev & (POLLIN | POLLHUP | POLLERR)) {
                weft__tcp_conn_read(root, c);
            }
        }
    }
    for (int i = 0; i < root->nconns; i++) {
        weft__tcp_conn_drop(root->conns[i]);
        free(root->conns[i]);
    }
    root->nconns = 0;
    root_log_drops(root, weft__time_ns());
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
    pthread_mutex_lock(&weft__tcp_registry_lock);
    root->next = registry;
    registry = root;
    pthread_mutex_unlock(&weft__tcp_registry_lock);
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

    pthread_mutex_lock(&weft__tcp_registry_lock);
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
    pthread_mutex_unlock(&weft__tcp_registry_lock);
    return root;
}

/* A local context is done with root (status: why it gave up, or OK). The
 * last one waits for the root thread, which ends when the other ranks have
 * released (WEFT_TCP_LINGER_S at most). */
void weft__tcp_root_detach(root_t *root, weft_status_t status, const char *msg)
{
    uint64_t one = 1;
    int last;

    pthread_mutex_lock(&weft__tcp_registry_lock);
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
    pthread_mutex_unlock(&weft__tcp_registry_lock);
    if (write(root->wake_fd, &one, sizeof(one)) < 0) {
        /* cannot fail on an eventfd short of overflow */
    }
    if (last) {
        pthread_join(root->thread, NULL);
        root_free(root);
    }
}
