/*
 * TCP unique-id bootstrap (contract in tcp.h).
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
 *
 * While a registration or an op has waited REPORT_AFTER_NS, the root sends
 * the waiting ranks who is missing (at most every REPORT_EVERY_NS), so that a
 * rank whose deadline expires can name the ranks it waited for.
 */
#include "bootstrap/tcp/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ID_MAGIC 0x57465449u    /* "WFTI" */
#define FRAME_MAGIC 0x57465446u /* "WFTF" */
#define PROTO_VERSION 1
#define ID_FAMILY_IPV4 4
#define ID_FAMILY_IPV6 6
#define TOKEN_BYTES 16
#define HDR_BYTES 40
#define HOST_BYTES 64
#define HELLO_BYTES (8 + HOST_BYTES)
#define WELCOME_BYTES 8
#define REPORT_MAX_LISTED 16
#define REPORT_MAX_BYTES (8 + 4 * REPORT_MAX_LISTED)
#define MSG_MAX 400 /* text of an ABORT */
#define NAME_MAX_CHARS (INET6_ADDRSTRLEN + 16)

#define MS_NS 1000000ull
#define SEC_NS 1000000000ull
#define NEVER UINT64_MAX
#define HANDSHAKE_NS (10 * SEC_NS) /* an unregistered connection must register by then */
#define REPORT_AFTER_NS (50 * MS_NS)
#define REPORT_EVERY_NS (100 * MS_NS)
#define ABORT_LINGER_NS (2 * SEC_NS) /* after an abort, ranks close at once */
#define RELEASE_WAIT_NS (2 * SEC_NS) /* a releasing rank waits this long for the root's close */
#define ACCEPT_PAUSE_NS (100 * MS_NS)

enum {
    MSG_HELLO = 1,
    MSG_WELCOME,
    MSG_ALLGATHER,
    MSG_BARRIER,
    MSG_RESULT,
    MSG_PENDING,
    MSG_FAILED,
    MSG_ABORT,
    MSG_RELEASE
};

typedef struct frame {
    unsigned type;
    int32_t rank;
    uint32_t seq;
    uint64_t len;
} frame_t;

/* ---- encoding ---------------------------------------------------------- */

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const unsigned char *p)
{
    return ((uint32_t)get16(p) << 16) | get16(p + 2);
}

static uint64_t get64(const unsigned char *p)
{
    return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

static int token_equal(const unsigned char *a, const unsigned char *b)
{
    unsigned char diff = 0;

    for (int i = 0; i < TOKEN_BYTES; i++) {
        diff |= (unsigned char)(a[i] ^ b[i]);
    }
    return diff == 0;
}

/* A status read off the wire: an error code, else WEFT_ERR_BOOTSTRAP. */
static weft_status_t wire_status(uint32_t v)
{
    int st = (int32_t)v;

    return st < 0 && st >= WEFT_ERR_NOT_INITIALIZED ? (weft_status_t)st : WEFT_ERR_BOOTSTRAP;
}

static void hdr_encode(unsigned char *p, const unsigned char *token, unsigned type, int rank,
                       uint32_t seq, uint64_t len)
{
    put32(p, FRAME_MAGIC);
    put16(p + 4, PROTO_VERSION);
    put16(p + 6, (uint16_t)type);
    put32(p + 8, (uint32_t)rank);
    put32(p + 12, seq);
    put64(p + 16, len);
    memcpy(p + 24, token, TOKEN_BYTES);
}

/* NULL if the header is well formed and carries token, else why not. */
static const char *hdr_decode(const unsigned char *p, const unsigned char *token, frame_t *f)
{
    if (get32(p) != FRAME_MAGIC) {
        return "not a weft bootstrap message (bad magic)";
    }
    if (get16(p + 4) != PROTO_VERSION) {
        return "unsupported protocol version";
    }
    if (!token_equal(p + 24, token)) {
        return "wrong job token";
    }
    f->type = get16(p + 6);
    f->rank = (int32_t)get32(p + 8);
    f->seq = get32(p + 12);
    f->len = get64(p + 16);
    if (f->len > WEFT_TCP_MAX_PAYLOAD) {
        return "message longer than the 64 MiB limit";
    }
    return NULL;
}

/* ---- ids --------------------------------------------------------------- */

static void sa_name(const struct sockaddr *sa, char *buf, size_t len)
{
    char addr[INET6_ADDRSTRLEN] = "?";

    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof(addr));
        snprintf(buf, len, "[%s]:%u", addr, (unsigned)ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof(addr));
        snprintf(buf, len, "%s:%u", addr, (unsigned)ntohs(s4->sin_port));
    }
}

static void id_encode(weft_tcp_id_t *id, const struct sockaddr *sa, const unsigned char *token)
{
    unsigned char *p = id->bytes;

    memset(p, 0, WEFT_TCP_ID_BYTES);
    put32(p, ID_MAGIC);
    put16(p + 4, PROTO_VERSION);
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

        p[6] = ID_FAMILY_IPV6;
        memcpy(p + 8, &s6->sin6_port, 2); /* both big-endian */
        put32(p + 12, s6->sin6_scope_id);
        memcpy(p + 16, &s6->sin6_addr, 16);
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

        p[6] = ID_FAMILY_IPV4;
        memcpy(p + 8, &s4->sin_port, 2);
        memcpy(p + 16, &s4->sin_addr, 4);
    }
    memcpy(p + 32, token, TOKEN_BYTES);
}

/* Check an id; fill the root's address and the token when asked. */
static weft_status_t id_decode(const weft_tcp_id_t *id, struct sockaddr_storage *ss,
                               socklen_t *sslen, unsigned char *token)
{
    const unsigned char *p = id->bytes;
    int family = p[6];

    if (get32(p) != ID_MAGIC) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id: bad magic");
    }
    if (get16(p + 4) != PROTO_VERSION) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id: version %u, expected %u",
                           (unsigned)get16(p + 4), PROTO_VERSION);
    }
    if (family != ID_FAMILY_IPV4 && family != ID_FAMILY_IPV6) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id: address family %d", family);
    }
    if (get16(p + 8) == 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id: port 0");
    }
    for (int i = 0; i < WEFT_TCP_ID_BYTES; i++) {
        int reserved = i == 7 || i == 10 || i == 11 || i >= 48 ||
                       (family == ID_FAMILY_IPV4 && ((i >= 12 && i < 16) || (i >= 20 && i < 32)));

        if (reserved && p[i] != 0) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "tcp bootstrap id: reserved byte %d is not zero", i);
        }
    }
    if (ss != NULL) {
        memset(ss, 0, sizeof(*ss));
        if (family == ID_FAMILY_IPV6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

            s6->sin6_family = AF_INET6;
            memcpy(&s6->sin6_port, p + 8, 2);
            s6->sin6_scope_id = get32(p + 12);
            memcpy(&s6->sin6_addr, p + 16, 16);
            *sslen = sizeof(*s6);
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

            s4->sin_family = AF_INET;
            memcpy(&s4->sin_port, p + 8, 2);
            memcpy(&s4->sin_addr, p + 16, 4);
            *sslen = sizeof(*s4);
        }
    }
    if (token != NULL) {
        memcpy(token, p + 32, TOKEN_BYTES);
    }
    return WEFT_OK;
}

weft_status_t weft__tcp_id_to_string(const weft_tcp_id_t *id, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";

    if (id == NULL || buf == NULL || len <= WEFT_TCP_ID_STRLEN) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "tcp bootstrap id to string: need a buffer of %d bytes",
                           WEFT_TCP_ID_STRLEN + 1);
    }
    for (int i = 0; i < WEFT_TCP_ID_BYTES; i++) {
        buf[2 * i] = hex[id->bytes[i] >> 4];
        buf[2 * i + 1] = hex[id->bytes[i] & 15];
    }
    buf[WEFT_TCP_ID_STRLEN] = '\0';
    return WEFT_OK;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

weft_status_t weft__tcp_id_from_string(const char *s, weft_tcp_id_t *id)
{
    weft_tcp_id_t tmp;
    size_t n;

    if (s == NULL || id == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id from string: NULL argument");
    }
    n = strnlen(s, WEFT_TCP_ID_STRLEN + 1);
    if (n != WEFT_TCP_ID_STRLEN) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "tcp bootstrap id string: %s%zu characters, expected %d",
                           n > WEFT_TCP_ID_STRLEN ? "over " : "", n, WEFT_TCP_ID_STRLEN);
    }
    for (int i = 0; i < WEFT_TCP_ID_BYTES; i++) {
        int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "tcp bootstrap id string: not a hex digit at offset %d",
                               hi < 0 ? 2 * i : 2 * i + 1);
        }
        tmp.bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    if (id_decode(&tmp, NULL, NULL, NULL) != WEFT_OK) {
        return WEFT_ERR_INVALID_ARG;
    }
    *id = tmp;
    return WEFT_OK;
}

/* ---- sockets ----------------------------------------------------------- */

/* Best effort: a connection without these still works, only slower to
 * notice a vanished host (keepalive) or slower per message (Nagle). */
static void sock_tune(int fd)
{
    int one = 1, idle = 10, intvl = 5, cnt = 3;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static int timeout_ms(uint64_t deadline_ns)
{
    uint64_t now, ms;

    if (deadline_ns == NEVER) {
        return -1;
    }
    now = weft__time_ns();
    if (now >= deadline_ns) {
        return 0;
    }
    ms = (deadline_ns - now + MS_NS - 1) / MS_NS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Helpers below return 0 when done, -1 on a socket error (errno set), -2
 * when the deadline passed, 1 at end of stream. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, timeout_ms(deadline_ns));

        if (n > 0) {
            return 0;
        }
        if (n == 0 && weft__time_ns() >= deadline_ns) {
            return -2;
        }
        if (n < 0 && errno != EINTR) {
            return -1;
        }
    }
}

static int send_exact(int fd, const void *buf, size_t len, int more, uint64_t deadline_ns)
{
    const unsigned char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
        int r;

        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            return -1;
        }
        r = wait_fd(fd, POLLOUT, deadline_ns);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

/* *got tells an end of stream at a message boundary (0) from a truncation. */
static int recv_exact(int fd, void *buf, size_t len, uint64_t deadline_ns, size_t *got)
{
    unsigned char *p = buf;

    *got = 0;
    while (*got < len) {
        ssize_t n = recv(fd, p + *got, len - *got, MSG_DONTWAIT);
        int r;

        if (n > 0) {
            *got += (size_t)n;
            continue;
        }
        if (n == 0) {
            return 1;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return -1;
        }
        r = wait_fd(fd, POLLIN, deadline_ns);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

static int send_frame(int fd, const unsigned char *token, unsigned type, int rank, uint32_t seq,
                      const void *payload, size_t len, uint64_t deadline_ns)
{
    unsigned char hdr[HDR_BYTES];
    int r;

    hdr_encode(hdr, token, type, rank, seq, len);
    r = send_exact(fd, hdr, HDR_BYTES, len > 0, deadline_ns);
    if (r == 0 && len > 0) {
        r = send_exact(fd, payload, len, 0, deadline_ns);
    }
    return r;
}

/* Threads of this module take no signals: they belong to the application. */
static int thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(thread, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* ---- choosing the root's address --------------------------------------- */

static weft_status_t addr_choose(const char *bind_addr, struct sockaddr_storage *ss)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    struct ifaddrs *ifs = NULL, *v6 = NULL;

    memset(ss, 0, sizeof(*ss));
    if (bind_addr != NULL && getaddrinfo(bind_addr, NULL, &hints, &ai) == 0) {
        memcpy(ss, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        return WEFT_OK;
    }
    if (getifaddrs(&ifs) != 0) {
        return weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: getifaddrs: %s", strerror(errno));
    }
    for (struct ifaddrs *ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
        int family = ifa->ifa_addr != NULL ? ifa->ifa_addr->sa_family : AF_UNSPEC;

        if (bind_addr == NULL) {
            if (family == AF_INET && (ifa->ifa_flags & IFF_UP) &&
                !(ifa->ifa_flags & IFF_LOOPBACK)) {
                memcpy(ss, ifa->ifa_addr, sizeof(struct sockaddr_in));
                break;
            }
        } else if (strcmp(ifa->ifa_name, bind_addr) == 0) {
            if (family == AF_INET) {
                memcpy(ss, ifa->ifa_addr, sizeof(struct sockaddr_in));
                break;
            }
            if (family == AF_INET6 && v6 == NULL) {
                v6 = ifa;
            }
        }
    }
    if (ss->ss_family == AF_UNSPEC && v6 != NULL) {
        memcpy(ss, v6->ifa_addr, sizeof(struct sockaddr_in6));
    }
    freeifaddrs(ifs);
    if (ss->ss_family != AF_UNSPEC) {
        return WEFT_OK;
    }
    if (bind_addr != NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "tcp bootstrap: '%s' is neither an IP address nor an interface with "
                           "an IP address",
                           bind_addr);
    }
    ((struct sockaddr_in *)ss)->sin_family = AF_INET;
    ((struct sockaddr_in *)ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return WEFT_OK;
}

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

typedef struct root {
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
} root_t;

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
    hdr_encode(b->data, root->token, type, rank, seq, l1 + l2);
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

    put32(st, (uint32_t)status);
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
    put32(st, (uint32_t)status);
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
    put32(p, (uint32_t)root->nranks);
    put32(p + 4, (uint32_t)root_rank);
    root->welcomed = 1;
    root->report_dirty = 0;
    weft__log_debug("tcp bootstrap root %s: all %d ranks registered", root->name, root->nranks);
    root_broadcast(root, out_new(root, MSG_WELCOME, -1, 0, p, WELCOME_BYTES, NULL, 0), NULL);
}

static void root_hello(root_t *root, conn_t *c)
{
    int nranks = (int)get32(c->body), rank = c->f.rank;
    conn_t *other;
    char msg[MSG_MAX];

    c->pid = get32(c->body + 4);
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
    root_abort(root, wire_status(get32(c->body)), "rank %d (pid %u on %s) gave up: %.*s", c->rank,
               c->pid, c->host, (int)(c->f.len - 4), (const char *)c->body + 4);
    root->state[c->rank] = RANK_RELEASED;
    root->by_rank[c->rank] = NULL;
    conn_drop(c);
}

/* Header complete: check it against what this connection may send. */
static int conn_header(root_t *root, conn_t *c)
{
    const char *why = hdr_decode(c->hdr, root->token, &c->f);
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
        sa_name((struct sockaddr *)&ss, c->name, sizeof(c->name));
        strcpy(c->host, "?");
        sock_tune(fd);
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
            put32(p + 8 + 4 * listed++, (uint32_t)r);
        }
    }
    put32(p, (uint32_t)arrived);
    put32(p + 4, (uint32_t)listed);
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
        n = poll(root->pfds, (nfds_t)npfd, timeout_ms(next));
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
    WEFT_CHECK_GOTO(addr_choose(bind_addr, &ss), err);
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
    sa_name((struct sockaddr *)&ss, root->name, sizeof(root->name));
    if (bind(root->listen_fd, (struct sockaddr *)&ss,
             ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) !=
            0 ||
        listen(root->listen_fd, SOMAXCONN) != 0 ||
        getsockname(root->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: cannot listen on %s: %s",
                             root->name, strerror(errno));
        goto err_close_listen;
    }
    sa_name((struct sockaddr *)&ss, root->name, sizeof(root->name));
    root->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (root->wake_fd < 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: eventfd: %s", strerror(errno));
        goto err_close_listen;
    }
    if (thread_start(&root->thread, root_main, root) != 0) {
        status = weft__error(WEFT_ERR_BOOTSTRAP, "tcp bootstrap: cannot start the root thread");
        goto err_close_wake;
    }
    pthread_mutex_lock(&registry_lock);
    root->next = registry;
    registry = root;
    pthread_mutex_unlock(&registry_lock);
    id_encode(id, (struct sockaddr *)&ss, root->token);
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
static root_t *root_attach(const unsigned char *token, int rank)
{
    root_t *root;

    pthread_mutex_lock(&registry_lock);
    for (root = registry; root != NULL; root = root->next) {
        if (root->pid == getpid() && token_equal(root->token, token) && !root->host_left) {
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
static void root_detach(root_t *root, weft_status_t status, const char *msg)
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
        ctx->root_rank = (int)get32(body + 4);
        if ((int)get32(body) != ctx->nranks || ctx->root_rank < 0 ||
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
        if (get32(body + 4) != (f->len - 8) / 4) {
            ctx_set_err(ctx, WEFT_ERR_BOOTSTRAP, "malformed report from the root at %s",
                        ctx->root_name);
            return -1;
        }
        ctx->report_seq = f->seq;
        ctx->report_arrived = get32(body);
        ctx->report_listed = get32(body + 4);
        for (uint32_t i = 0; i < ctx->report_listed; i++) {
            ctx->report_missing[i] = get32(body + 8 + 4 * i);
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
        ctx_set_err(ctx, wire_status(get32(body)), "job aborted by the root: %.*s",
                    (int)(f->len - 4), (const char *)body + 4);
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
        int r = recv_exact(ctx->fd, hdr, HDR_BYTES, NEVER, &got), err = errno, used = 0;
        int truncated = r == 1 && got > 0;

        if (r == 0 && (why = hdr_decode(hdr, ctx->token, &f)) == NULL) {
            why = reader_check(&f);
        }
        if (r == 0 && why == NULL && reader_max_len(f.type) > sizeof(small) &&
            (body = malloc(f.len + 1)) == NULL) {
            why = "out of memory for a message";
            body = small;
        }
        if (r == 0 && why == NULL) {
            r = recv_exact(ctx->fd, body, f.len, NEVER, &got);
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
            r = wait_fd(fd, POLLOUT, deadline_ns);
            if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
                err = errno;
            }
        }
        if (r == 0 && err == 0) {
            sock_tune(fd);
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

    put32(hello, (uint32_t)ctx->nranks);
    put32(hello + 4, (uint32_t)getpid());
    gethostname((char *)hello + 8, HOST_BYTES - 1);
    r = send_frame(ctx->fd, ctx->token, MSG_HELLO, ctx->rank, 0, hello, HELLO_BYTES, deadline_ns);
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

        put32(giveup, (uint32_t)status);
        memcpy(giveup + 4, msg, n);
        /* a courtesy on an idle socket: it has room, so this does not block */
        (void)send_frame(ctx->fd, ctx->token, MSG_ABORT, ctx->rank, 0, giveup, 4 + n,
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
    WEFT_CHECK_GOTO(id_decode(id, &ss, &sl, ctx->token), err_free_ctx);
    ctx->rank = rank;
    ctx->nranks = nranks;
    ctx->root_rank = -1;
    atomic_init(&ctx->failed_rank, -1);
    sa_name((struct sockaddr *)&ss, ctx->root_name, sizeof(ctx->root_name));
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&ctx->cond, &attr);
    pthread_condattr_destroy(&attr);
    ctx->hosted = root_attach(ctx->token, rank);

    WEFT_CHECK_GOTO(ctx_connect(ctx, &ss, sl, deadline_ns), err_detach);
    if (thread_start(&ctx->reader, reader_main, ctx) != 0) {
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
        root_detach(ctx->hosted, status, last_error_text(status));
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
    r = send_frame(ctx->fd, ctx->token, type, ctx->rank, seq, blob, bytes, deadline_ns);
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
static void tcp_release(void *ctx_)
{
    tcp_ctx_t *ctx = ctx_;
    uint64_t deadline = weft__time_ns() + RELEASE_WAIT_NS;
    struct timespec ts = {.tv_sec = (time_t)(deadline / SEC_NS),
                          .tv_nsec = (long)(deadline % SEC_NS)};
    int alive;

    pthread_mutex_lock(&ctx->lock);
    ctx->releasing = 1;
    alive = !ctx->reader_done;
    pthread_mutex_unlock(&ctx->lock);
    if (alive &&
        send_frame(ctx->fd, ctx->token, MSG_RELEASE, ctx->rank, 0, NULL, 0, deadline) == 0) {
        pthread_mutex_lock(&ctx->lock);
        while (!ctx->reader_done && weft__time_ns() < deadline) {
            pthread_cond_timedwait(&ctx->cond, &ctx->lock, &ts);
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    ctx_close(ctx);
    if (ctx->hosted != NULL) {
        root_detach(ctx->hosted, WEFT_OK, "");
    }
    ctx_free(ctx);
}

const weft_bootstrap_ops_t weft__tcp_boot_ops = {
    .name = "tcp",
    .allgather = tcp_allgather,
    .barrier = tcp_barrier,
    .release = tcp_release,
    .failed_rank = weft__tcp_boot_failed_rank,
};
