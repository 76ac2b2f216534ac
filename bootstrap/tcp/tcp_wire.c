/*
 * TCP unique-id bootstrap, the wire (layouts in tcp.h): encoding and decoding
 * of ids, their hex strings and frame headers; the socket helpers both sides
 * use (tuning, deadline-bounded waits, sends and receives, sending a frame,
 * starting a thread that takes no signals); and the choice of the address the
 * root listens on. Nothing here keeps state.
 */
#include "bootstrap/tcp/tcp_internal.h"

#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAGIC 0x57465449u    /* "WFTI" */
#define FRAME_MAGIC 0x57465446u /* "WFTF" */
#define PROTO_VERSION 1
#define ID_FAMILY_IPV4 4
#define ID_FAMILY_IPV6 6

/* ---- encoding ---------------------------------------------------------- */

int weft__tcp_token_equal(const unsigned char *a, const unsigned char *b)
{
    unsigned char diff = 0;

    for (int i = 0; i < TOKEN_BYTES; i++) {
        diff |= (unsigned char)(a[i] ^ b[i]);
    }
    return diff == 0;
}

/* A status read off the wire: an error code, else WEFT_ERR_BOOTSTRAP. */
weft_status_t weft__tcp_wire_status(uint32_t v)
{
    int st = (int32_t)v;

    return st < 0 && st >= WEFT_ERR_NOT_INITIALIZED ? (weft_status_t)st : WEFT_ERR_BOOTSTRAP;
}

void weft__tcp_hdr_encode(unsigned char *p, const unsigned char *token, unsigned type, int rank,
                          uint32_t seq, uint64_t len)
{
    weft__tcp_put32(p, FRAME_MAGIC);
    weft__tcp_put16(p + 4, PROTO_VERSION);
    weft__tcp_put16(p + 6, (uint16_t)type);
    weft__tcp_put32(p + 8, (uint32_t)rank);
    weft__tcp_put32(p + 12, seq);
    weft__tcp_put64(p + 16, len);
    memcpy(p + 24, token, TOKEN_BYTES);
}

/* NULL if the header is well formed and carries token, else why not. */
const char *weft__tcp_hdr_decode(const unsigned char *p, const unsigned char *token, frame_t *f)
{
    if (weft__tcp_get32(p) != FRAME_MAGIC) {
        return "not a weft bootstrap message (bad magic)";
    }
    if (weft__tcp_get16(p + 4) != PROTO_VERSION) {
        return "unsupported protocol version";
    }
    if (!weft__tcp_token_equal(p + 24, token)) {
        return "wrong job token";
    }
    f->type = weft__tcp_get16(p + 6);
    f->rank = (int32_t)weft__tcp_get32(p + 8);
    f->seq = weft__tcp_get32(p + 12);
    f->len = weft__tcp_get64(p + 16);
    if (f->len > WEFT_TCP_MAX_PAYLOAD) {
        return "message longer than the 64 MiB limit";
    }
    return NULL;
}

/* ---- ids --------------------------------------------------------------- */

void weft__tcp_sa_name(const struct sockaddr *sa, char *buf, size_t len)
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

void weft__tcp_id_encode(weft_tcp_id_t *id, const struct sockaddr *sa, const unsigned char *token)
{
    unsigned char *p = id->bytes;

    memset(p, 0, WEFT_TCP_ID_BYTES);
    weft__tcp_put32(p, ID_MAGIC);
    weft__tcp_put16(p + 4, PROTO_VERSION);
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

        p[6] = ID_FAMILY_IPV6;
        memcpy(p + 8, &s6->sin6_port, 2); /* both big-endian */
        weft__tcp_put32(p + 12, s6->sin6_scope_id);
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
weft_status_t weft__tcp_id_decode(const weft_tcp_id_t *id, struct sockaddr_storage *ss,
                                  socklen_t *sslen, unsigned char *token)
{
    const unsigned char *p = id->bytes;
    int family = p[6];

    if (weft__tcp_get32(p) != ID_MAGIC) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id: bad magic");
    }
    if (weft__tcp_get16(p + 4) != PROTO_VERSION) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id: version %u, expected %u",
                           (unsigned)weft__tcp_get16(p + 4), PROTO_VERSION);
    }
    if (family != ID_FAMILY_IPV4 && family != ID_FAMILY_IPV6) {
        return weft__error(WEFT_ERR_INVALID_ARG, "tcp bootstrap id: address family %d", family);
    }
    if (weft__tcp_get16(p + 8) == 0) {
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
            s6->sin6_scope_id = weft__tcp_get32(p + 12);
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
    if (weft__tcp_id_decode(&tmp, NULL, NULL, NULL) != WEFT_OK) {
        return WEFT_ERR_INVALID_ARG;
    }
    *id = tmp;
    return WEFT_OK;
}

/* ---- sockets ----------------------------------------------------------- */

/* Best effort: a connection without these still works, only slower to
 * notice a vanished host (keepalive) or slower per message (Nagle). */
void weft__tcp_sock_tune(int fd)
{
    int one = 1, idle = 10, intvl = 5, cnt = 3;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int weft__tcp_timeout_ms(uint64_t deadline_ns)
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
int weft__tcp_wait_fd(int fd, short events, uint64_t deadline_ns)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, weft__tcp_timeout_ms(deadline_ns));

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
        r = weft__tcp_wait_fd(fd, POLLOUT, deadline_ns);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

/* *got tells an end of stream at a message boundary (0) from a truncation. */
int weft__tcp_recv_exact(int fd, void *buf, size_t len, uint64_t deadline_ns, size_t *got)
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
        r = weft__tcp_wait_fd(fd, POLLIN, deadline_ns);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

int weft__tcp_send_frame(int fd, const unsigned char *token, unsigned type, int rank, uint32_t seq,
                         const void *payload, size_t len, uint64_t deadline_ns)
{
    unsigned char hdr[HDR_BYTES];
    int r;

    weft__tcp_hdr_encode(hdr, token, type, rank, seq, len);
    r = send_exact(fd, hdr, HDR_BYTES, len > 0, deadline_ns);
    if (r == 0 && len > 0) {
        r = send_exact(fd, payload, len, 0, deadline_ns);
    }
    return r;
}

/* Threads of this module take no signals: they belong to the application. */
int weft__tcp_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
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

/* 0.0.0.0, ::, or :: with an IPv4 0.0.0.0 mapped into it. */
static int addr_unspecified(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        static const unsigned char mapped_any[16] = {[10] = 0xff, [11] = 0xff};

        return IN6_IS_ADDR_UNSPECIFIED(a) || memcmp(a, mapped_any, 16) == 0;
    }
    return 0;
}

weft_status_t weft__tcp_addr_choose(const char *bind_addr, struct sockaddr_storage *ss)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    struct ifaddrs *ifs = NULL, *v6 = NULL;

    memset(ss, 0, sizeof(*ss));
    if (bind_addr != NULL && getaddrinfo(bind_addr, NULL, &hints, &ai) == 0) {
        memcpy(ss, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        if (addr_unspecified(ss)) {
            /* the id would name no host, and the root would listen on every
             * interface, the untrusted ones too */
            memset(ss, 0, sizeof(*ss));
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "tcp bootstrap: '%s' is the unspecified address, which the other "
                               "ranks cannot connect to: give the address or the interface "
                               "name of the network the ranks share",
                               bind_addr);
        }
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
                char name[NAME_MAX_CHARS];

                memcpy(ss, ifa->ifa_addr, sizeof(struct sockaddr_in));
                weft__tcp_sa_name(ifa->ifa_addr, name, sizeof(name));
                weft__log_info("tcp bootstrap: the root listens on interface %s (%s), the first "
                               "up, non-loopback IPv4 one; WEFT_BOOTSTRAP_ADDR chooses another",
                               ifa->ifa_name, name);
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
    weft__log_info("tcp bootstrap: no up, non-loopback IPv4 interface: the root listens on "
                   "127.0.0.1, which only ranks on this host can reach");
    return WEFT_OK;
}
