/*
 * TCP unique-id bootstrap: one process creates an id (it starts a root
 * service thread listening on a TCP socket), passes the id to the other
 * processes out of band (environment, file, MPI), and every rank connects to
 * the root with it. The root serves the job's allgathers and barriers as a
 * star, and keeps every rank's connection open for the life of the job so
 * that a rank whose process dies is noticed and reported to the others.
 *
 * Contract (besides bootstrap.h):
 *  - The process that called weft__tcp_id_create must also create one of the
 *    job's contexts with that id (normally rank 0, as with NCCL); the root
 *    service lives until every context of this process made from the id has
 *    been released and then, at most WEFT_TCP_LINGER_S seconds more, until
 *    the other ranks have released theirs. Release of the last such context
 *    waits for that.
 *  - An id serves one job. Ids are plain bytes: copy them freely.
 *  - After a bootstrap op returned WEFT_ERR_TIMEOUT the context is unusable:
 *    later ops return WEFT_ERR_BOOTSTRAP. After a peer failure they return
 *    WEFT_ERR_PEER_FAILED. release is always allowed.
 *  - weft__tcp_boot_failed_rank may be called from any thread at any time.
 *  - Anyone who reaches the root's port may connect: the root keeps at most
 *    2 x nranks (at least 64) connections that have not registered, drops
 *    the oldest first, and drops one that has not registered within 3 s; a
 *    rank registers in its first message, right after connecting.
 *
 * Id layout (128 bytes, integers big-endian):
 *    0  u32 magic "WFTI"       4  u16 version (1)    6  u8 family (4 or 6)
 *    7  u8  0                  8  u16 root port     10  u16 0
 *   12  u32 IPv6 scope id     16  16 bytes root address (IPv4: first 4)
 *   32  16 bytes job token    48  zero up to 128
 *
 * Wire format: every message is a 40-byte header, then len payload bytes.
 *    0  u32 magic "WFTF"       4  u16 version (1)    6  u16 type
 *    8  i32 rank              12  u32 op sequence   16  u64 len
 *   24  16 bytes job token
 * Types (rank -> root): 1 HELLO {u32 nranks, u32 pid, 64 bytes host name},
 * 3 ALLGATHER {blob}, 4 BARRIER {}, 9 RELEASE {}, 8 ABORT {i32 status,
 * text} (a rank gives up registering). (root -> rank): 2 WELCOME {u32
 * nranks, i32 rank of the root's process}, 5 RESULT {nranks blobs}, 6
 * PENDING {u32 arrived, u32 k, k x u32 missing rank}, 7 FAILED {} (rank:
 * the failed one), 8 ABORT {i32 status, text}. Payloads are capped at
 * WEFT_TCP_MAX_PAYLOAD; a message that breaks these rules ends the
 * connection (a stranger's) or the job (a rank's, or the root's).
 */
#ifndef WEFT_BOOTSTRAP_TCP_H
#define WEFT_BOOTSTRAP_TCP_H

#include "bootstrap/bootstrap.h"

#define WEFT_TCP_ID_BYTES 128
/* Characters of the hex form of an id, without the terminating NUL. */
#define WEFT_TCP_ID_STRLEN (2 * WEFT_TCP_ID_BYTES)
/* Largest payload of one message, so the largest allgather result. */
#define WEFT_TCP_MAX_PAYLOAD (64u << 20)
/* Most ranks in one job. */
#define WEFT_TCP_MAX_RANKS (1 << 20)
/* How long the root waits for the other ranks to release once every context
 * of its own process has been released. */
#define WEFT_TCP_LINGER_S 30

typedef struct weft_tcp_id {
    unsigned char bytes[WEFT_TCP_ID_BYTES];
} weft_tcp_id_t;

extern const weft_bootstrap_ops_t weft__tcp_boot_ops;

/*
 * Start a root service in this process and describe it in id. bind_addr:
 * NULL for the first up, non-loopback IPv4 interface (127.0.0.1 if none), a
 * literal IPv4 or IPv6 address, or an interface name (its first IPv4
 * address, else its first IPv6 address). The port is chosen by the kernel.
 */
weft_status_t weft__tcp_id_create(const char *bind_addr, weft_tcp_id_t *id);

/*
 * Join the job described by id as rank of nranks: connect to the root
 * (retrying until deadline_ns), register, and wait until all nranks ranks
 * have registered. Registration errors (the rank registered twice, ranks
 * that disagree on nranks) fail the whole job with WEFT_ERR_BOOTSTRAP; a
 * timeout names the ranks that had not registered.
 */
weft_status_t weft__tcp_boot_create(const weft_tcp_id_t *id, int nranks, int rank,
                                    uint64_t deadline_ns, void **ctx_p);

/*
 * Also weft__tcp_boot_ops.failed_rank. A rank of the job whose process
 * failed (its connection to the root closed without a release), or -1. Never
 * blocks: one atomic load. If the root's process fails, this returns the
 * rank that process registered first (the id creator, rank 0 by convention;
 * 0 if the creator registered no rank). The first failure seen is reported;
 * it does not change afterwards.
 */
int weft__tcp_boot_failed_rank(void *ctx);

/* Hex form of id: needs len > WEFT_TCP_ID_STRLEN. */
weft_status_t weft__tcp_id_to_string(const weft_tcp_id_t *id, char *buf, size_t len);
/* Parse the hex form; WEFT_ERR_INVALID_ARG for a bad length, character,
 * magic, version or address family. */
weft_status_t weft__tcp_id_from_string(const char *s, weft_tcp_id_t *id);

#endif /* WEFT_BOOTSTRAP_TCP_H */
