/*
 * Private to the TCP unique-id bootstrap (contract in tcp.h, design in tcp.c):
 * what tcp_wire.c (ids, frames, sockets, the root's address), tcp_root.c and
 * tcp_serve.c (the root service, inside: tcp_root.h) and tcp.c (a rank's
 * context) share: message sizes and
 * types, the decoded frame header, the byte-order helpers, and the functions
 * one of them offers the others.
 */
#ifndef WEFT_BOOTSTRAP_TCP_INTERNAL_H
#define WEFT_BOOTSTRAP_TCP_INTERNAL_H

#include "bootstrap/tcp/tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

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
#define REPORT_AFTER_NS (50 * MS_NS)

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

static inline void weft__tcp_put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static inline void weft__tcp_put32(unsigned char *p, uint32_t v)
{
    weft__tcp_put16(p, (uint16_t)(v >> 16));
    weft__tcp_put16(p + 2, (uint16_t)v);
}

static inline void weft__tcp_put64(unsigned char *p, uint64_t v)
{
    weft__tcp_put32(p, (uint32_t)(v >> 32));
    weft__tcp_put32(p + 4, (uint32_t)v);
}

static inline uint16_t weft__tcp_get16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t weft__tcp_get32(const unsigned char *p)
{
    return ((uint32_t)weft__tcp_get16(p) << 16) | weft__tcp_get16(p + 2);
}

static inline uint64_t weft__tcp_get64(const unsigned char *p)
{
    return ((uint64_t)weft__tcp_get32(p) << 32) | weft__tcp_get32(p + 4);
}

/* The root service (tcp_root.c); a rank's context only holds a pointer. */
typedef struct root root_t;

/* ---- tcp_wire.c ---------------------------------------------------------- */

int weft__tcp_token_equal(const unsigned char *a, const unsigned char *b);
weft_status_t weft__tcp_wire_status(uint32_t v);
void weft__tcp_hdr_encode(unsigned char *p, const unsigned char *token, unsigned type, int rank,
                          uint32_t seq, uint64_t len);
const char *weft__tcp_hdr_decode(const unsigned char *p, const unsigned char *token, frame_t *f);
void weft__tcp_sa_name(const struct sockaddr *sa, char *buf, size_t len);
void weft__tcp_id_encode(weft_tcp_id_t *id, const struct sockaddr *sa, const unsigned char *token);
weft_status_t weft__tcp_id_decode(const weft_tcp_id_t *id, struct sockaddr_storage *ss,
                                  socklen_t *sslen, unsigned char *token);
void weft__tcp_sock_tune(int fd);
int weft__tcp_timeout_ms(uint64_t deadline_ns);
/* These three return 0 when done, -1 on a socket error (errno set), -2 when
 * the deadline passed, 1 at end of stream. */
int weft__tcp_wait_fd(int fd, short events, uint64_t deadline_ns);
int weft__tcp_recv_exact(int fd, void *buf, size_t len, uint64_t deadline_ns, size_t *got);
int weft__tcp_send_frame(int fd, const unsigned char *token, unsigned type, int rank, uint32_t seq,
                         const void *payload, size_t len, uint64_t deadline_ns);
int weft__tcp_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);
weft_status_t weft__tcp_addr_choose(const char *bind_addr, struct sockaddr_storage *ss);

/* ---- tcp_root.c ---------------------------------------------------------- */

root_t *weft__tcp_root_attach(const unsigned char *token, int rank);
void weft__tcp_root_detach(root_t *root, weft_status_t status, const char *msg);

#endif /* WEFT_BOOTSTRAP_TCP_INTERNAL_H */
