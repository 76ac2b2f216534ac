/*
 * Shared memory between the ranks of one node: one segment per
 * communicator and node, and collective operations that synchronize
 * through flags in it.
 *
 * Segment: created by the node's first rank with mode 0600 under a name
 * made of its pid and 128 random bits, sent to the other local ranks over
 * the communicator; every local rank maps it and answers, and the creator
 * unlinks it at once. A creator killed before it unlinked leaves the name:
 * names are "/weft-<pid>-<start time>-<pid namespace>-<random>" (hex), and
 * every creator first removes the names of its user's processes of its pid
 * namespace that are gone (no such pid, or another process under it). An
 * attaching rank maps only a file of its own user whose header agrees with
 * the file's size and the communicator (weft__shm_attach). Layout:
 *
 *   | header | ctrl[0] ... ctrl[L-1] | slot[0][0] slot[0][1] ... slot[L-1][1] |
 *
 * ctrl[r] holds rank r's arrive counter, the signatures of its last
 * WEFT_SHM_LINE_DEPTH rounds and their data of up to 8 bytes on one cache
 * line, its pid and the full signatures on the next three, its done counter
 * on a fifth, and on four more the wide lines: one-phase data of 9 to 48
 * bytes with a stamp of its own, one line per round R % WEFT_SHM_LINE_DEPTH
 * (weft_shm_wide_t) (only r writes them);
 * slot[r][b] (b = round % 2) is rank r's staging buffer of slot_bytes.
 *
 * Rounds: every shared-memory step of a collective is a round with a
 * number agreed by construction (the local ranks build the same operations
 * in the same order, and every operation reserves its rounds when it is
 * built). Round R's data goes through buffers R % 2. A rank publishes
 * phase ph of round R by storing arrive = 4R + ph (release) and reads a
 * peer's data once the peer's arrive >= 4R + ph (acquire); it stores
 * done = R + 1 when it no longer reads anything of round R. Before writing
 * its buffer for round R a rank waits until every local rank's done >= R - 1
 * (nobody still reads round R - 2, the buffer's last user; a round whose
 * data all fits the control lines, or has none, uses only the line's
 * entries R % WEFT_SHM_LINE_DEPTH and waits for done >= R - 3); a rank whose
 * phase 1 of round R - 1 it saw (it remembers the arrive values it read)
 * passed that already, so in a run of operations a round starts without
 * reading the peers' control lines again. A rank runs its
 * rounds in order: an operation waits until the previous one's rounds ran.
 * No system call in this path: waiting is polling (the schedule engine
 * yields the core between polls when it waits long).
 *
 * Device memory: allreduce, allgather, bcast and reduce of device buffers
 * (emu, cuda) never stage through the host slots: every rank publishes IPC
 * handles of its buffers in its slot, maps its peers' (the device table's
 * ipc_import) and reads them on the device (allreduce: reduces its slice
 * of everyone's input and copies the others' results from their buffers,
 * as the single-copy path below does with process_vm_readv). Every local
 * rank must then pass memory of the same type (the memory type is part of
 * what ranks must agree on).
 *
 * Single copy: where the kernel lets local ranks read each other's memory
 * (process_vm_readv: same user, no ptrace restriction), a large allreduce
 * reads its peers' buffers directly instead of staging through the slots
 * (coll/shm/ops.c); checked at setup, WEFT_SHM_CMA sets from what size.
 *
 * Mismatch: with phase 1 of every round a rank publishes its operation's
 * signature hash (and, on the second line, the signature); every rank that
 * reads a peer's arrive for phase 1 compares the hash with its own, so local
 * ranks that called different collectives, counts, dtypes, ops or roots fail
 * with WEFT_ERR_MISMATCH instead of exchanging wrong data (bcast: non-roots
 * publish too and check the root's; the root reads nobody and learns it from
 * the failure notice, comm/comm.h).
 *
 * Failures: a local rank that dies is noticed by pid (weft__shm_health, at
 * most every 100 ms while waiting); an operation that ends without running
 * its rounds (failure, cancellation) breaks the segment's round order, and
 * every later shared-memory operation of the communicator fails with
 * WEFT_ERR_INTERNAL naming that cause.
 *
 * Threading: driven by the thread that drives the communicator.
 */
#ifndef WEFT_COLL_SHM_H
#define WEFT_COLL_SHM_H

#include "coll/coll.h"
#include "comm/node.h"

#include <sys/types.h>

/* Rounds whose signature and data (up to 8 bytes) a rank's control line holds at once: a
 * round that needs nothing else may start while the peers still read the round
 * LINE_DEPTH - 1 before it. */
#define WEFT_SHM_LINE_DEPTH 4

/* Bytes of a round's data a wide line carries (weft_shm_wide_t). */
#define WEFT_SHM_WIDE_BYTES 48

/* One-phase data of 9 to WEFT_SHM_WIDE_BYTES bytes of host memory, in a line of its own with the
 * flag its readers wait for: round R's in wide[R % LINE_DEPTH]. The owner writes data and sig,
 * then stamp = 4 R + 1 (a release store), then its arrive as for any round; a reader that sees
 * the stamp has the data in the same cache line, one transfer instead of the arrive's and the
 * slot's. */
typedef struct weft_shm_wide {
    uint64_t stamp;
    uint32_t sig; /* the hash of round R's signature */
    uint32_t pad_;
    unsigned char data[WEFT_SHM_WIDE_BYTES];
} weft_shm_wide_t;

typedef struct weft_shm_ctrl {
    /* written by the owner only, read by the others: the first cache line
     * holds what every round's readers poll for */
    uint64_t arrive;
    uint32_t sig[WEFT_SHM_LINE_DEPTH];  /* the hash of round R's operation signature in
                                         * sig[R % LINE_DEPTH] (written before arrive;
                                         * coll/diag/sig.h): readers compare it with theirs */
    uint64_t tiny[WEFT_SHM_LINE_DEPTH]; /* data of up to 8 bytes, round R's in
                                         * tiny[R % LINE_DEPTH]: read with the counters,
                                         * one cache line instead of two */
    uint64_t pad_;
    /* second to fourth lines: the single-copy pointers, read once per operation, and what
     * only liveness checks and the naming of a mismatch read */
    uint64_t src_addr; /* single-copy allreduce: this rank's buffers ... */
    uint64_t dst_addr;
    uint64_t progress; /* ... and how many of its slices are reduced */
    int64_t pid;
    uint64_t start; /* the start time of process pid (base/proc.h), 0: unknown */
    weft_coll_sig_t full[WEFT_SHM_LINE_DEPTH]; /* the signatures whose hashes are in sig */
    uint64_t pad1_[7];
    /* fifth line: done, stored at the end of every round and read only by
     * ranks that did not see the owner's arrive of the round after (the
     * bcast root, single copy): apart from arrive, so that the store does
     * not take the line the peers poll away from them between two arrives */
    uint64_t done;
    uint64_t ping; /* weft__shm_measure_handoff's counter */
    uint64_t pad2_[6];
    /* sixth to ninth lines: the wide lines */
    weft_shm_wide_t wide[WEFT_SHM_LINE_DEPTH];
} weft_shm_ctrl_t;

typedef struct weft_shm {
    void *base;
    size_t bytes;
    int L;  /* local ranks */
    int me; /* this rank's local rank */
    size_t slot_bytes;
    weft_shm_ctrl_t *ctrl;
    char *slots;
    const int *local_ranks; /* communicator ranks (the node map's) */
    uint64_t next_round;    /* first round of the next operation built */
    uint64_t exec_round;    /* next round this rank runs */
    const char *broken;     /* why rounds can no longer be agreed, or NULL */
    uint64_t checked_ns;    /* last liveness check */
    uint64_t health_calls;  /* weft__shm_health's calls at entry (the clock every 64th) */
    double copy_gbs;        /* measured at setup, agreed (the slowest rank's) */
    const void **srcs;      /* [L] reduction inputs (this rank's scratch) */
    uint64_t *seen;         /* [L] the largest arrive read of each local rank (private) */
    /* the hashes this rank last wrote to its control line's sig[] (private: reading the line
     * back would wait for it once a peer polling it took it, weft__shm_op_publish) */
    uint32_t sig_sent[WEFT_SHM_LINE_DEPTH];
    void **peer_src; /* [L] device allreduce: the peers' buffers, mapped (IPC) */
    void **peer_dst;
    int *pidfd;    /* [L] single copy: pidfds of the peers' processes (-1: none) */
    int dead_rank; /* a local rank found dead (-1: none) */
    pid_t dead_pid;
    int cma;             /* every local rank may read the others' memory
                          * (process_vm_readv), checked at setup */
    double cma_gbs;      /* such reads' rate, measured at setup, agreed (the slowest rank's) */
    double cma_copy_gbs; /* copies of the same size, timed in turn with those reads, agreed */
    int cma_fast;        /* cma, and cma_gbs at least half of cma_copy_gbs: one read against two
                          * copies through the segment (the single-copy settings' auto) */
    uint64_t cma_bytes;  /* bytes this rank read that way (what tests check ran) */
} weft_shm_t;

/* The bytes from which the single-copy form of an allgather (its whole result) and of an
 * alltoall (a block) runs on shm's node (WEFT_SHM_CMA_ALLGATHER, WEFT_SHM_CMA_ALLTOALL; SIZE_MAX:
 * never). */
size_t weft__shm_cma_allgather_from(const weft_shm_t *shm);
size_t weft__shm_cma_alltoall_from(const weft_shm_t *shm);

/*
 * Collective over comm (every rank calls it, after comm->node is set):
 * creates and maps this node's segment when WEFT_SHM is on and more than
 * one rank of comm runs on the node, then agrees over the whole
 * communicator whether every node succeeded. comm->shm is set only when all
 * did; a failure to create shared memory is not an error (the collectives
 * then use point-to-point algorithms), a communication failure is.
 */
weft_status_t weft__shm_setup(struct weft_comm *comm);
/* One flag handoff between local ranks 0 and 1, seconds (segment.c): local
 * rank 0's answer, 0 from the others or when the peer did not answer;
 * once per segment (weft__cost_measure_shm_alpha). */
double weft__shm_measure_handoff(weft_shm_t *shm, int oversubscribed);
void weft__shm_release(weft_shm_t *shm);
/* Map the segment at name (shm_open's form, "/weft-...") made for L local
 * ranks; NULL, with nothing mapped and the reason recorded (weft_last_error)
 * and logged, when it is not one: a file of another user or not a regular
 * file, a bad magic, or header fields (local_size, bytes, slot_bytes) that
 * disagree with L or with the file's size. The setup's, and for tests. */
weft_shm_t *weft__shm_attach(int L, const char *name);
/* Remove from /dev/shm the segment names that creators of this user and pid
 * namespace left when they died before unlinking them; returns how many.
 * (The setup's creator calls it first; for tests.) */
int weft__shm_reap(void);
/* WEFT_ERR_PEER_FAILED when a local rank's process is gone (looked for at most every 100 ms;
 * at_entry, a collective's start, reads the clock for that on every 64th call only, a wait every
 * time). */
weft_status_t weft__shm_health(weft_shm_t *shm, int at_entry);

static inline void *weft__shm_slot(const weft_shm_t *shm, int r, uint64_t round)
{
    return shm->slots + ((size_t)r * 2 + (size_t)(round & 1)) * shm->slot_bytes;
}

/*
 * Shared-memory operations as schedule tasks (coll/shm/ops.c). Each returns
 * the task index (-1 once the schedule failed); buffers in elements of the
 * schedule's dtype. Blocks: block q of a local rank's vector starts at
 * element boff[q] and holds bcnt[q] elements (L entries; the arrays must
 * live as long as the schedule).
 *
 *  allreduce: dst = sum over local ranks of src (count elements).
 *  reduce_scatter: dst (bcnt[me] elements) = sum over local ranks of their
 *      block me; src holds every block.
 *  allgather: block q of dst = local rank q's src (bcnt[q] elements).
 *  bcast: dst = local rank root's src (count elements).
 *  reduce: root's dst = sum of src (count elements); dst unused elsewhere.
 *  barrier: every local rank arrived.
 *  gather: block q of root's dst = local rank q's src (count elements each).
 *  scatter: dst = block me of root's src (count elements each).
 *  alltoall: block q of dst = block me of local rank q's src (count each;
 *      src == dst in place).
 */
int weft__shm_allreduce(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst, size_t count,
                        size_t esize);
int weft__shm_reduce_scatter(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                             const size_t *boff, const size_t *bcnt, size_t esize);
int weft__shm_allgather(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                        const size_t *boff, const size_t *bcnt, size_t esize);
/* allgather of host memory whose blocks (bcount elements on every local rank) land in dst in
 * pieces of pcount elements (bcount a multiple of it): piece j of local rank q's block at element
 * poff[q * (bcount / pcount) + j] of dst (the hierarchical allgather puts its rails' blocks in
 * rank order this way, with no copy after). */
int weft__shm_allgather_pieces(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                               size_t bcount, size_t pcount, const size_t *poff, size_t esize);
/* reduce_scatter of host memory whose blocks for local rank q (bcount elements each) are read
 * from src in pieces the same way (the hierarchical reduce_scatter takes each rail's blocks
 * from their ranks' places). */
int weft__shm_reduce_scatter_pieces(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                                    size_t bcount, size_t pcount, const size_t *poff, size_t esize);
int weft__shm_bcast(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                    size_t count, size_t esize);
int weft__shm_reduce(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                     size_t count, size_t esize);
int weft__shm_barrier(weft_sched_t *s, weft_shm_t *shm);
int weft__shm_gather(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                     size_t count, size_t esize);
int weft__shm_scatter(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                      size_t count, size_t esize);
int weft__shm_alltoall(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst, size_t count,
                       size_t esize);

/* Whether the flat shared-memory algorithm (weft__shm_build, coll/shm/algos.c)
 * can run a on comm (one node, every rank in the segment). */
int weft__shm_usable(struct weft_comm *comm, const weft_coll_args_t *a);
/* A blocking operation with nothing else of this thread outstanding,
 * weft__shm_usable for it: run it to completion now (*handled_p = 1, its
 * status returned; *waited_p 0 when it ended within its first 64 polls, all
 * of them busy: a microsecond or two), or *handled_p = 0 for those that
 * need a schedule. */
weft_status_t weft__shm_run(struct weft_comm *comm, const weft_coll_args_t *a,
                            const weft_op_desc_t *desc, const weft_device_ops_t *dev,
                            int *handled_p, int *waited_p);
/* Whether a runs as an allreduce, reduce, bcast, gather or allgather whose data (a rank's block)
 * fits the control line, a wide line or (up to 1 KiB) one round of the slots, a scatter or alltoall
 * whose pieces for the others fit a writer's control line or (blocks up to 1 KiB) one round of its
 * slot, a reduce_scatter of up to 1 KiB blocks in one round of the slots, or a barrier
 * (weft__shm_line_run). */
int weft__shm_line_fits(struct weft_comm *comm, const weft_coll_args_t *a, weft_memtype_t memtype);
/* That collective again, described by desc (the one the last call built; root -1 where it has
 * none): *handled_p 0 when it cannot start at once (an earlier round's lines still read), else
 * as weft__shm_run. */
weft_status_t weft__shm_line_run(struct weft_comm *comm, weft_coll_kind_t kind,
                                 const weft_op_desc_t *desc, const void *src, void *dst,
                                 size_t count, size_t esize, int root, int *handled_p,
                                 int *waited_p);

#endif /* WEFT_COLL_SHM_H */
