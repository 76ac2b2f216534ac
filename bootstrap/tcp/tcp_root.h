/*
 * The TCP bootstrap's root service, inside (contract in tcp.h, design in
 * tcp.c): its connections, output queues and per-rank state, shared by the
 * service thread (tcp_root.c: accepting, the poll loop, reports, sweeps, the
 * registry of roots this process hosts) and what it serves (tcp_serve.c:
 * frames, registration, allgathers and barriers, failures and aborts).
 *
 * Threading: everything below "Root thread only" is touched by the root's
 * thread alone; the host_* fields under weft__tcp_registry_lock.
 */
#ifndef WEFT_BOOTSTRAP_TCP_ROOT_H
#define WEFT_BOOTSTRAP_TCP_ROOT_H

#include "bootstrap/tcp/tcp_internal.h"

#include <poll.h>
#include <pthread.h>

#define ABORT_LINGER_NS (2 * SEC_NS) /* after an abort, ranks close at once */

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

    /* Written by this process's contexts under weft__tcp_registry_lock. */
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
    uint64_t drop_log_next_ns; /* strangers' drops: the next line logged */
    unsigned long drops_quiet; /* drops since the last line */
    char drop_last_name[NAME_MAX_CHARS];
    const char *drop_last_why; /* a static string */
};

/* Picks of weft__tcp_root_broadcast: the live ranks; those that have
 * contributed to the op in progress. */
static inline int weft__tcp_is_live(const root_t *root, int r)
{
    return root->state[r] == RANK_LIVE;
}

static inline int weft__tcp_has_contributed(const root_t *root, int r)
{
    return root->op_have[r];
}

/* Guards the registry of roots (tcp_root.c) and every root's host_* fields. */
extern pthread_mutex_t weft__tcp_registry_lock;

/* A frame of type whose payload is p1[l1] then p2[l2], with no reference
 * yet (queuing takes one); NULL when out of memory (logged). */
out_buf_t *weft__tcp_out_new(const root_t *root, unsigned type, int rank, uint32_t seq,
                             const void *p1, size_t l1, const void *p2, size_t l2);
/* Drop c, which has not registered, because of why (a static string),
 * logged at most once per period with a count (tcp_root.c). */
void weft__tcp_stranger_dropped(root_t *root, conn_t *c, const char *why);
/* Close c's socket and free its queue; c stays, marked dead. */
void weft__tcp_conn_drop(conn_t *c);
/* Write what c's queue holds, as far as the socket takes it. */
void weft__tcp_conn_flush(root_t *root, conn_t *c);
/* Read what c's socket holds and serve every complete frame. */
void weft__tcp_conn_read(root_t *root, conn_t *c);
/* End the job: every rank gets the abort with this message. */
void weft__tcp_root_abort(root_t *root, weft_status_t status, const char *fmt, ...)
    WEFT_PRINTF(3, 4);
/* Queue b to the connections of the ranks pick accepts (NULL: all live ones). */
void weft__tcp_root_broadcast(root_t *root, out_buf_t *b, int (*pick)(const root_t *, int));

#endif /* WEFT_BOOTSTRAP_TCP_ROOT_H */
