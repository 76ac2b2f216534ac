/*
 * Emu collectives between real processes (UCX, unique-id bootstrap, no
 * mpirun): every collective in its three forms on emu buffers
 * (tests/coll/device_cases.h), plus allreduces of several MiB, at 2..4
 * processes,
 *  - on one node with the shared-memory allreduce, allgather, bcast and
 *    reduce forced: the processes map each other's emu buffers, so every
 *    process asserts that its allreduces made IPC imports, and the job that
 *    some process's allgathers, bcasts and reduces did
 *    (weft__emu_ipc_imports_total() before and after each case);
 *  - on virtual nodes of one process each with shared memory off
 *    (WEFT_RANKS_PER_NODE=1, WEFT_SHM=no): every byte goes point to point
 *    over UCX, which cannot reach emu memory, so the transport stages it
 *    through host memory in fragments (WEFT_STAGE_FRAG=64k: a message of
 *    several MiB takes dozens): every process asserts that its transport
 *    made its emu staging stream, and that it imported nothing; enqueued
 *    collectives up to WEFT_DEVICE_STAGE go through host memory once
 *    (counted on every process of a job across nodes; a job with it 0
 *    stages every message);
 *  - on two virtual nodes of two (the hierarchical algorithms: shared
 *    memory inside, UCX between);
 *  - then in every job, point to point: rank 0 receives every other rank's
 *    emu buffer through receives from any source (staged fragments);
 *  - with a peer that dies while the others' enqueued allreduce waits for
 *    it: weft_stream_synchronize and the next call report it.
 *
 * The test process is rank 0. It loads the configuration (weft_init) and
 * forks the other ranks before any weft thread exists (as
 * tests/runtime/test_multiproc.c explains), then starts the bootstrap root
 * (weft_get_unique_id) and hands the id over through a shared mapping. The
 * children never use Criterion: they record their first failure, their
 * count of checked cases and their IPC imports in the mapping and exit;
 * they die with the parent. The parent reaps them before a deadline, kills
 * what is left, then asserts.
 */
#include <criterion/criterion.h>

#include "device/emu/emu.h"
#include "pt2pt/ucx/ucx_internal.h"
#include "runtime/comm.h"
#include "runtime/enqueue.h"
#include "tests/coll/device_cases.h"
#include "tests/harness.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 4
#define JOB_DEADLINE_S 200.0
#define MAX_CASES (WEFT_COLL_KIND_COUNT * DD_NMODES * 4 + 8)
/* the shared-memory forms that map the peers' device buffers, forced */
#define IPC_TUNE "allreduce:0-inf:shm,allgather:0-inf:shm,bcast:0-inf:shm,reduce:0-inf:shm"

typedef struct slot {
    char error[640]; /* first failure */
    int failures;
    int checked;  /* cases whose every check passed */
    int ncases;   /* cases run */
    int finished; /* reached the end */
    uint64_t imports;
    int imports_open; /* mappings of peers' memory still open at the end */
    int staged;       /* the UCX transport made its emu staging stream: it staged emu memory */
    int staged_early; /* ... already before the first collective (it must not have) */
    uint64_t kind_imports[WEFT_COLL_KIND_COUNT]; /* imports made by each collective */
    pid_t pid;
    int maps_checked;          /* peers' maps read at the return of an IPC bcast or allgather */
    unsigned long tasks;       /* enqueued collectives run as device tasks */
    unsigned long host_staged; /* enqueued collectives through host memory once */
} slot_t;

typedef struct area {
    atomic_int id_ready;
    atomic_int enqueued; /* dead-peer job: rank 0's operation is queued */
    int ipc;             /* the job forces the shared-memory forms (job_opts_t.ipc == 1) */
    weft_unique_id_t id;
    slot_t slot[MAX_PROCS];
} area_t;

typedef struct job_opts {
    int nranks;
    const char *rpn;   /* WEFT_RANKS_PER_NODE, or NULL */
    const char *shm;   /* WEFT_SHM, or NULL */
    const char *tune;  /* WEFT_TUNE, or NULL */
    int ipc;           /* 1: every rank must import; 0: none may; -1: not asserted */
    int staged;        /* 1: every rank's UCX transport must have staged emu memory */
    int dead_peer;     /* rank 1 kills itself while the others' enqueued allreduce waits for it */
    const char *task;  /* WEFT_DEVICE_TASK, or NULL (yes); tasks must run on one node unless "no" */
    const char *stage; /* WEFT_DEVICE_STAGE, or NULL (256k); across virtual nodes, small enqueued
                          collectives must go through host memory once unless "0" */
} job_opts_t;

typedef struct rank_ctx {
    slot_t *slot;
    weft_comm_t comm;
} rank_ctx_t;

static void note_failure(slot_t *slot, const char *msg)
{
    if (slot->failures++ == 0) {
        snprintf(slot->error, sizeof(slot->error), "%s", msg);
    }
}

static void env_fail(void *ctx, const char *msg)
{
    note_failure(((rank_ctx_t *)ctx)->slot, msg);
}

/* every rank reaches this once per case: a host barrier on the job */
static void env_sync(void *ctx)
{
    rank_ctx_t *c = ctx;

    if (weft_barrier(c->comm) != WEFT_OK) {
        char msg[600];

        snprintf(msg, sizeof(msg), "weft_barrier between cases: %s", weft_last_error());
        note_failure(c->slot, msg);
    }
}

/* Whether comm's UCX transport staged emu memory through host memory: it
 * creates its staging stream for emu on the first such message. */
static int staged_through_host(weft_comm_t comm)
{
    const ucx_comm_t *uc = weft__comm_of(comm)->p2p_ep;

    return weft__comm_of(comm)->p2p == &weft__ucx_ops &&
           uc->ctx->stage_streams[WEFT_MEM_EMU] != NULL;
}

/* Point to point on emu buffers, received from any source: every rank but
 * 0 sends ANY_N int32 (several 64 KiB fragments, staged through host
 * memory over UCX) to rank 0, whose receives name no sender; each lands
 * whole, from the sender weft_request_source names. 1 when every check
 * passed. */
enum { ANY_N = 300001, ANY_TAG = 7 };

static int any_source_emu(rank_ctx_t *c, int nranks, int rank, weft_stream_t stream)
{
    size_t bytes = ANY_N * sizeof(int32_t);
    int32_t *host = malloc(bytes);
    void *dev[MAX_PROCS] = {0};
    weft_request_t req[MAX_PROCS];
    int seen[MAX_PROCS] = {0}, ok = host != NULL, src = -1;
    char msg[600];

#define ANY_FAIL(...)                                                                              \
    do {                                                                                           \
        snprintf(msg, sizeof(msg), __VA_ARGS__);                                                   \
        note_failure(c->slot, msg);                                                                \
        ok = 0;                                                                                    \
    } while (0)
    for (int q = rank == 0 ? 1 : 0; ok && q < (rank == 0 ? nranks : 1); q++) {
        if (weft_mem_alloc(WEFT_MEM_EMU, bytes, &dev[q]) != WEFT_OK) {
            ANY_FAIL("weft_mem_alloc: %s", weft_last_error());
        }
    }
    if (ok && rank != 0) {
        for (size_t j = 0; j < ANY_N; j++) {
            host[j] = rank * 1000000 + (int32_t)j;
        }
        if (weft_memcpy_async(dev[0], host, bytes, stream) != WEFT_OK ||
            weft_stream_synchronize(stream) != WEFT_OK ||
            weft_send(dev[0], ANY_N, WEFT_INT32, 0, ANY_TAG, c->comm) != WEFT_OK) {
            ANY_FAIL("send of emu memory to rank 0: %s", weft_last_error());
        }
    } else if (ok) {
        for (int q = 1; ok && q < nranks; q++) {
            if (weft_irecv(dev[q], ANY_N, WEFT_INT32, WEFT_ANY_SOURCE, ANY_TAG, c->comm, &req[q]) !=
                WEFT_OK) {
                ANY_FAIL("weft_irecv from any source into emu memory: %s", weft_last_error());
            }
        }
        if (ok && nranks > 1 && weft_waitall(nranks - 1, req + 1) != WEFT_OK) {
            ANY_FAIL("receives from any source into emu memory: %s", weft_last_error());
        }
        for (int q = 1; ok && q < nranks; q++) {
            if (weft_request_source(req[q], &src) != WEFT_OK || src < 1 || src >= nranks) {
                ANY_FAIL("receive %d: source %d (%s)", q, src, weft_last_error());
                break;
            }
            seen[src]++;
            weft_request_free(req[q]);
            if (weft_memcpy_async(host, dev[q], bytes, stream) != WEFT_OK ||
                weft_stream_synchronize(stream) != WEFT_OK) {
                ANY_FAIL("copy out of emu memory: %s", weft_last_error());
            }
            for (size_t j = 0; ok && j < ANY_N; j++) {
                if (host[j] != src * 1000000 + (int32_t)j) {
                    ANY_FAIL("receive %d from rank %d: element %zu is %d", q, src, j, host[j]);
                }
            }
        }
        for (int q = 1; ok && q < nranks; q++) {
            if (seen[q] != 1) {
                ANY_FAIL("%d messages from rank %d, not 1", seen[q], q);
            }
        }
    }
    /* nobody leaves while rank 0 still receives (a rank that is gone fails
     * the receives still waiting for its fragments) */
    if (weft_barrier(c->comm) != WEFT_OK) {
        ANY_FAIL("barrier after the receives from any source: %s", weft_last_error());
    }
#undef ANY_FAIL
    for (int q = 0; q < MAX_PROCS; q++) {
        if (dev[q] != NULL) {
            weft_mem_free(dev[q]);
        }
    }
    free(host);
    return ok;
}

/* The whole life of one rank in the job: join, run every case, leave. */
/* 1 when process pid maps the file of inode ino or ino2 (its /proc/<pid>/maps), -1 when that
 * cannot be read. */
static int maps_inode(pid_t pid, unsigned long ino, unsigned long ino2)
{
    char path[64], line[512];
    FILE *f;
    int found = 0;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return -1;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        unsigned long inode = 0;

        found = sscanf(line, "%*s %*s %*s %*s %lu", &inode) == 1 && (inode == ino || inode == ino2);
    }
    fclose(f);
    return found;
}

/*
 * At the return of a device bcast, allgather or allreduce that read this rank's buffers through
 * IPC, no peer maps them any more: a peer closes its imports before it reports done (CUDA: closing
 * an import after the exporter freed the allocation is undefined, and the exporter may free as soon
 * as its call returns). Read in the peers' /proc/<pid>/maps right after the return, for bcast from
 * every root, allgather and allreduce, 40 rounds. A peer cannot map the buffer again before the
 * check ends: the next round's imports wait for this rank to publish it.
 */
static void imports_closed_at_return(area_t *area, int nranks, int rank, weft_comm_t comm)
{
    slot_t *slot = &area->slot[rank];
    const size_t n = 16384; /* int32: 64 KiB a rank */
    int32_t *src = NULL, *all = NULL;
    weft_emu_ipc_handle_t h, h2;
    struct stat st, st2;
    char msg[600];

    if (weft_barrier(comm) != WEFT_OK || /* every rank's pid is in the area */
        weft_mem_alloc(WEFT_MEM_EMU, n * sizeof(int32_t), (void **)&src) != WEFT_OK ||
        weft_mem_alloc(WEFT_MEM_EMU, n * nranks * sizeof(int32_t), (void **)&all) != WEFT_OK ||
        weft__device_emu_ops.ipc_export(src, &h) != WEFT_OK || fstat(h.fd, &st) != 0 ||
        weft__device_emu_ops.ipc_export(all, &h2) != WEFT_OK || fstat(h2.fd, &st2) != 0) {
        snprintf(msg, sizeof(msg), "imports_closed_at_return: setup: %s", weft_last_error());
        note_failure(slot, msg);
        goto out;
    }
    for (int round = 0; round < 40 && slot->failures == 0; round++) {
        int root = round % nranks, kind = round % 4; /* 0, 1: bcast, 2: allgather, 3: allreduce */
        const char *name = kind < 2 ? "bcast" : kind == 2 ? "allgather" : "allreduce";
        int is_bcast = kind < 2;
        weft_status_t s;

        for (size_t i = 0; i < n; i++) {
            src[i] = (int32_t)(round * 1000003 + rank * 7919 + (int)i);
        }
        s = is_bcast    ? weft_bcast(src, n, WEFT_INT32, root, comm)
            : kind == 2 ? weft_allgather(src, all, n, WEFT_INT32, comm)
                        : weft_allreduce(src, all, n, WEFT_INT32, WEFT_SUM, comm);
        if (s != WEFT_OK) {
            snprintf(msg, sizeof(msg), "round %d: %s: %s", round, name, weft_last_error());
            note_failure(slot, msg);
            break;
        }
        for (int q = 0; q < nranks && (!is_bcast || rank == root); q++) {
            int mapped = q == rank ? 0
                                   : maps_inode(area->slot[q].pid, (unsigned long)st.st_ino,
                                                (unsigned long)st2.st_ino);

            if (mapped != 0) {
                snprintf(msg, sizeof(msg),
                         "round %d: rank %d %s rank %d's emu buffers when its %s returned", round,
                         q, mapped > 0 ? "still mapped" : "(maps unreadable) may map", rank, name);
                note_failure(slot, msg);
            }
            slot->maps_checked += q != rank;
        }
        if (is_bcast && src[n - 1] != (int32_t)(round * 1000003 + root * 7919 + (int)n - 1)) {
            snprintf(msg, sizeof(msg), "round %d: bcast from %d: element %zu is %d", round, root,
                     n - 1, (int)src[n - 1]);
            note_failure(slot, msg);
        }
    }
out:
    weft_mem_free(src);
    weft_mem_free(all);
}

static int32_t unshareable_value(int round, int rank, size_t i)
{
    return (int32_t)(round * 131 + rank * 1009 + (int)(i % 100003));
}

/*
 * Buffers the device cannot share (emu's unshareable allocations, as CUDA's managed, pool and
 * VMM memory): the IPC forms export scratch copies instead. Two layouts: the odd ranks'
 * buffers unshareable, then every rank's. bcast from every root, allgather, reduce to every
 * root, allreduce (separate buffers, and in place) of 1 and 600,001 int32 (more than one IPC
 * chunk), every element checked; IPC still used (imports made), and the scratch reused, not
 * allocated per call.
 */
static void unshareable_buffers(area_t *area, int nranks, int rank, weft_comm_t comm)
{
    slot_t *slot = &area->slot[rank];
    const size_t sizes[2] = {1, 600001};
    weft_pinned_stats_t st0, st;
    uint64_t imports0 = weft__emu_ipc_imports_total();
    char msg[600];

    weft__device_pinned_stats(&weft__device_emu_ops, &st0);
    for (int layout = 0; layout < 2 && slot->failures == 0; layout++) {
        int mine = layout == 1 || rank % 2 == 1; /* this rank's buffers unshareable */

        for (int si = 0; si < 2 && slot->failures == 0; si++) {
            size_t n = sizes[si];
            int32_t *a = NULL, *b = NULL;
            weft_status_t s = mine ? weft__emu_alloc_unshareable(n * nranks * 4, (void **)&a)
                                   : weft_mem_alloc(WEFT_MEM_EMU, n * nranks * 4, (void **)&a);

            if (s == WEFT_OK) {
                s = mine ? weft__emu_alloc_unshareable(n * nranks * 4, (void **)&b)
                         : weft_mem_alloc(WEFT_MEM_EMU, n * nranks * 4, (void **)&b);
            }
            for (int round = 0; round < 2 * nranks + 3 && s == WEFT_OK; round++) {
                /* 0..p-1: bcast from root round; p..2p-1: reduce to root round-p; then
                 * allgather, allreduce, allreduce in place */
                int kind = round < nranks ? 0 : round < 2 * nranks ? 1 : round - 2 * nranks + 2;
                int root = round % nranks;
                const char *name = (const char *[]){"bcast", "reduce", "allgather", "allreduce",
                                                    "allreduce in place"}[kind];

                for (size_t i = 0; i < n; i++) {
                    a[i] = unshareable_value(round, rank, i);
                }
                s = kind == 0   ? weft_bcast(a, n, WEFT_INT32, root, comm)
                    : kind == 1 ? weft_reduce(a, b, n, WEFT_INT32, WEFT_SUM, root, comm)
                    : kind == 2 ? weft_allgather(a, b, n, WEFT_INT32, comm)
                    : kind == 3 ? weft_allreduce(a, b, n, WEFT_INT32, WEFT_SUM, comm)
                                : weft_allreduce(a, a, n, WEFT_INT32, WEFT_SUM, comm);
                if (s != WEFT_OK) {
                    snprintf(msg, sizeof(msg), "unshareable layout %d, %zu: %s: %s", layout, n,
                             name, weft_last_error());
                    note_failure(slot, msg);
                    break;
                }
                for (size_t i = 0; i < n * (kind == 2 ? (size_t)nranks : 1); i++) {
                    int32_t want = 0, got;

                    if (kind == 1 && rank != root) {
                        break;
                    }
                    if (kind == 0) {
                        want = unshareable_value(round, root, i);
                    } else if (kind == 2) {
                        want = unshareable_value(round, (int)(i / n), i % n);
                    } else {
                        for (int q = 0; q < nranks; q++) {
                            want += unshareable_value(round, q, i);
                        }
                    }
                    got = kind == 0 || kind == 4 ? a[i] : b[i];
                    if (got != want) {
                        snprintf(msg, sizeof(msg),
                                 "unshareable layout %d, %zu: %s (root %d): element %zu is %d, "
                                 "want %d",
                                 layout, n, name, root, i, (int)got, (int)want);
                        note_failure(slot, msg);
                        s = WEFT_ERR_INTERNAL;
                        break;
                    }
                }
            }
            weft_mem_free(a);
            weft_mem_free(b);
        }
    }
    weft__device_pinned_stats(&weft__device_emu_ops, &st);
    if (slot->failures == 0 && weft__emu_ipc_imports_total() == imports0) {
        note_failure(slot, "unshareable buffers: no IPC import made (the IPC forms unused)");
    }
    /* one scratch per size class and use (src, dst) at most, whatever the number of calls */
    if (slot->failures == 0 && st.buffer_allocs - st0.buffer_allocs > 4) {
        snprintf(msg, sizeof(msg), "unshareable buffers: %zu scratch buffers allocated",
                 st.buffer_allocs - st0.buffer_allocs);
        note_failure(slot, msg);
    }
}

static void rank_main(area_t *area, int nranks, int rank)
{
    slot_t *slot = &area->slot[rank];
    rank_ctx_t ctx = {.slot = slot};
    const dd_env_t env = {.p = nranks, .fail = env_fail, .sync = env_sync, .ctx = &ctx};
    static dd_case_t cases[MAX_CASES];
    weft_stream_t stream = NULL;
    weft_status_t s;
    int nc;
    char msg[600];

    s = weft_comm_init_rank(nranks, &area->id, rank, &ctx.comm);
    if (s != WEFT_OK) {
        snprintf(msg, sizeof(msg), "weft_comm_init_rank: %s", weft_last_error());
        note_failure(slot, msg);
        return;
    }
    if (weft_stream_create(WEFT_MEM_EMU, &stream) != WEFT_OK) {
        snprintf(msg, sizeof(msg), "weft_stream_create: %s", weft_last_error());
        note_failure(slot, msg);
    }
    slot->staged_early = staged_through_host(ctx.comm);
    slot->pid = getpid();
    nc = dd_build_cases(nranks, 1, cases);
    /* several MiB: many staging fragments, several shared-memory steps */
    for (int m = 0; m < DD_NMODES; m++) {
        cases[nc++] = (dd_case_t){.kind = WEFT_COLL_ALLREDUCE, .mode = m, .ci = m, .n = 1000003};
        cases[nc++] = (dd_case_t){
            .kind = WEFT_COLL_ALLREDUCE, .mode = m, .ci = 1 + m, .n = 600001, .inplace = 1};
    }
    cases[nc++] = (dd_case_t){.kind = WEFT_COLL_ALLGATHER, .mode = DD_ENQ, .ci = 1, .n = 300001};
    cases[nc++] = (dd_case_t){
        .kind = WEFT_COLL_BCAST, .mode = DD_BLOCK, .ci = 5, .n = 400001, .root = nranks - 1};
    slot->ncases = nc;
    for (int i = 0; i < nc && stream != NULL; i++) {
        uint64_t before = weft__emu_ipc_imports_total();

        slot->checked += dd_run_case(&env, ctx.comm, rank, stream, &cases[i]);
        slot->kind_imports[cases[i].kind] += weft__emu_ipc_imports_total() - before;
    }
    if (stream != NULL) {
        slot->ncases++;
        slot->checked += any_source_emu(&ctx, nranks, rank, stream);
    }
    if (area->ipc && nranks > 1) {
        imports_closed_at_return(area, nranks, rank, ctx.comm);
        unshareable_buffers(area, nranks, rank, ctx.comm);
    }
    slot->imports = weft__emu_ipc_imports_total();
    slot->imports_open = weft__emu_ipc_imports_open();
    slot->tasks = weft__enqueue_tasks_run();
    slot->host_staged = weft__enqueue_host_staged();
    slot->staged = staged_through_host(ctx.comm);
    if (stream != NULL && weft_stream_destroy(stream) != WEFT_OK) {
        snprintf(msg, sizeof(msg), "weft_stream_destroy: %s", weft_last_error());
        note_failure(slot, msg);
    }
    if (weft_comm_destroy(ctx.comm) != WEFT_OK) {
        snprintf(msg, sizeof(msg), "weft_comm_destroy: %s", weft_last_error());
        note_failure(slot, msg);
    }
    slot->finished = 1;
}

/*
 * Dead peer: every rank but 1 enqueues an allreduce on emu buffers; rank 1
 * kills itself once rank 0's is queued. The survivors' synchronize returns
 * the failure (the peer's death, or the timeout where the transport does not
 * notice it), naming the enqueued call, and so does their next call on the
 * communicator.
 */
static void rank_main_dead_peer(area_t *area, int nranks, int rank)
{
    slot_t *slot = &area->slot[rank];
    const size_t n = 1000, bytes = n * 4;
    weft_comm_t comm;
    weft_stream_t stream = NULL;
    void *in = NULL, *out = NULL;
    weft_status_t s;
    char msg[600];
    double t0;

#define DEAD_FAIL(...)                                                                             \
    do {                                                                                           \
        snprintf(msg, sizeof(msg), __VA_ARGS__);                                                   \
        note_failure(slot, msg);                                                                   \
        return;                                                                                    \
    } while (0)

    if (weft_comm_init_rank(nranks, &area->id, rank, &comm) != WEFT_OK) {
        DEAD_FAIL("weft_comm_init_rank: %s", weft_last_error());
    }
    if (rank == 1) {
        double until = harness_now_s() + 60.0;

        while (!atomic_load(&area->enqueued) && harness_now_s() < until) {
            harness_sleep_s(0.001);
        }
        kill(getpid(), SIGKILL);
    }
    if (weft_mem_alloc(WEFT_MEM_EMU, bytes, &in) != WEFT_OK ||
        weft_mem_alloc(WEFT_MEM_EMU, bytes, &out) != WEFT_OK ||
        weft_stream_create(WEFT_MEM_EMU, &stream) != WEFT_OK) {
        DEAD_FAIL("setup: %s", weft_last_error());
    }
    memset(in, 1, bytes);
    if (weft_allreduce_enqueue(in, out, n, WEFT_INT32, WEFT_SUM, comm, stream) != WEFT_OK) {
        DEAD_FAIL("weft_allreduce_enqueue: %s", weft_last_error());
    }
    if (rank == 0) {
        atomic_store(&area->enqueued, 1);
    }
    t0 = harness_now_s();
    s = weft_stream_synchronize(stream);
    if (s != WEFT_ERR_PEER_FAILED && s != WEFT_ERR_TIMEOUT) {
        DEAD_FAIL("weft_stream_synchronize returned %s (%s), expected the peer's failure",
                  weft_status_string(s), weft_last_error());
    }
    if (strstr(weft_last_error(), "weft_allreduce_enqueue") == NULL) {
        DEAD_FAIL("the failure does not name the enqueued call: %s", weft_last_error());
    }
    if (harness_now_s() - t0 > 60.0) {
        DEAD_FAIL("the failure was reported after %.0f s (WEFT_TIMEOUT=10)", harness_now_s() - t0);
    }
    snprintf(slot->error, sizeof(slot->error), "%s", weft_status_string(s));
    s = weft_barrier(comm);
    if (s != WEFT_ERR_PEER_FAILED && s != WEFT_ERR_TIMEOUT) {
        DEAD_FAIL("the next call on the communicator returned %s (%s)", weft_status_string(s),
                  weft_last_error());
    }
    weft_stream_destroy(stream);
    weft_mem_free(in);
    weft_mem_free(out);
    weft_comm_destroy(comm); /* may report the dead peer again */
    slot->tasks = weft__enqueue_tasks_run();
    slot->host_staged = weft__enqueue_host_staged();
    slot->finished = 1;
#undef DEAD_FAIL
}

/* Rank 1 died by its own SIGKILL; every other rank saw the failure. */
static void check_dead_peer(const job_opts_t *o, const area_t *area, const int *wstatus)
{
    cr_assert(WIFSIGNALED(wstatus[1]) && WTERMSIG(wstatus[1]) == SIGKILL,
              "rank 1 was to kill itself: status 0x%x (%s)", wstatus[1], area->slot[1].error);
    for (int r = 0; r < o->nranks; r++) {
        const slot_t *sl = &area->slot[r];

        if (r == 1) {
            continue;
        }
        cr_assert_eq(sl->failures, 0, "np=%d: rank %d: %s", o->nranks, r, sl->error);
        cr_assert(sl->finished, "rank %d did not finish", r);
        cr_assert(r == 0 || (WIFEXITED(wstatus[r]) && WEXITSTATUS(wstatus[r]) == 0),
                  "rank %d ended with status 0x%x", r, wstatus[r]);
        /* the form the job meant: a device task on one node unless WEFT_DEVICE_TASK=no */
        cr_assert_eq(sl->tasks, o->rpn == NULL && o->task == NULL ? 1ul : 0ul,
                     "np=%d: rank %d ran %lu device tasks", o->nranks, r, sl->tasks);
        fprintf(stderr, "emu procs np=%d, rank 1 killed: rank %d's synchronize returned %s\n",
                o->nranks, r, sl->error);
    }
}

/* Ranks 1..n-1: wait for rank 0's unique id, run, report by the exit status. */
typedef struct job_ctx {
    const job_opts_t *o;
    area_t *area;
} job_ctx_t;

static int child_rank(int r, void *arg)
{
    const job_opts_t *o = ((const job_ctx_t *)arg)->o;
    area_t *area = ((const job_ctx_t *)arg)->area;
    double until = harness_now_s() + 60.0;

    while (!atomic_load(&area->id_ready) && harness_now_s() < until) {
        harness_sleep_s(0.001);
    }
    if (atomic_load(&area->id_ready)) {
        (o->dead_peer ? rank_main_dead_peer : rank_main)(area, o->nranks, r);
    } else {
        note_failure(&area->slot[r], "no unique id from rank 0 within 60 s");
    }
    weft_finalize();
    return area->slot[r].failures == 0 && area->slot[r].finished ? 0 : 1;
}

static void run_job(const job_opts_t *o)
{
    area_t *area;
    harness_procs_t procs;
    int *wstatus = procs.wstatus;
    job_ctx_t ctx;

    cr_assert(o->nranks >= 1 && o->nranks <= MAX_PROCS);
    cr_assert_eq(harness_reset_env(NULL), 0, "cannot list the configuration registry");
    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_RANK");
    setenv("WEFT_LOG_LEVEL", "error", 1);
    setenv("WEFT_TIMEOUT", o->dead_peer ? "10" : "60", 1);
    setenv("WEFT_STAGE_FRAG", "64k", 1);
    harness_set_env("WEFT_RANKS_PER_NODE", o->rpn);
    harness_set_env("WEFT_SHM", o->shm);
    harness_set_env("WEFT_TUNE", o->tune);
    harness_set_env("WEFT_DEVICE_TASK", o->task);
    harness_set_env("WEFT_DEVICE_STAGE", o->stage);
    cr_assert_eq(weft_init(), WEFT_OK, "weft_init: %s", weft_last_error());
    area = harness_shared(sizeof(*area));
    cr_assert_not_null(area, "mmap: %s", strerror(errno));
    area->ipc = o->ipc == 1;
    ctx = (job_ctx_t){.o = o, .area = area};
    cr_assert_eq(harness_fork(&procs, 1, o->nranks, child_rank, &ctx), 0, "fork: %s",
                 strerror(errno));
    if (weft_get_unique_id(&area->id) != WEFT_OK) {
        note_failure(&area->slot[0], weft_last_error());
        harness_kill(&procs);
    } else {
        atomic_store(&area->id_ready, 1);
        (o->dead_peer ? rank_main_dead_peer : rank_main)(area, o->nranks, 0);
    }
    harness_reap(&procs, harness_now_s() + JOB_DEADLINE_S);
    weft_finalize();
    if (o->dead_peer) {
        check_dead_peer(o, area, wstatus);
        munmap(area, sizeof(*area));
        return;
    }
    for (int r = 0; r < o->nranks; r++) {
        const slot_t *sl = &area->slot[r];

        cr_expect(procs.state[r] != HARNESS_KILLED, "rank %d did not finish within %.0f s", r,
                  JOB_DEADLINE_S);
        cr_expect(r == 0 || (WIFEXITED(wstatus[r]) && WEXITSTATUS(wstatus[r]) == 0) ||
                      sl->failures > 0,
                  "rank %d ended with status 0x%x and no recorded failure", r, wstatus[r]);
        cr_assert_eq(sl->failures, 0, "np=%d: rank %d: %d failure(s); first: %s", o->nranks, r,
                     sl->failures, sl->error);
        cr_assert(sl->finished, "rank %d did not finish", r);
        cr_assert_eq(sl->checked, sl->ncases, "rank %d: %d of %d cases checked", r, sl->checked,
                     sl->ncases);
        cr_assert_eq(sl->imports_open, 0,
                     "np=%d: rank %d still maps %d of its peers' allocations after every "
                     "collective ended",
                     o->nranks, r, sl->imports_open);
        if (o->staged && o->nranks > 1) {
            cr_assert(sl->staged && !sl->staged_early,
                      "np=%d: rank %d's transport never staged emu memory (before the "
                      "collectives: %d, after: %d)",
                      o->nranks, r, sl->staged_early, sl->staged);
        }
        if (o->rpn == NULL && (o->task == NULL || strcmp(o->task, "no") != 0)) {
            cr_assert_gt(sl->tasks, 0, "np=%d: rank %d ran no enqueued collective as a device task",
                         o->nranks, r);
        } else {
            cr_assert_eq(sl->tasks, 0, "np=%d: rank %d ran %lu device tasks", o->nranks, r,
                         sl->tasks);
        }
        if (o->rpn != NULL && o->nranks > atoi(o->rpn) &&
            (o->stage == NULL || strcmp(o->stage, "0") != 0)) {
            cr_assert_gt(sl->host_staged, 0,
                         "np=%d: rank %d: no enqueued collective went through host memory once",
                         o->nranks, r);
        } else {
            cr_assert_eq(sl->host_staged, 0,
                         "np=%d: rank %d: %lu enqueued collectives went through host memory once",
                         o->nranks, r, sl->host_staged);
        }
        if (o->ipc == 1 && o->nranks > 1) {
            cr_assert_gt(sl->maps_checked, 0, "np=%d: rank %d read no peer's maps", o->nranks, r);
            cr_assert_gt(sl->kind_imports[WEFT_COLL_ALLREDUCE], 0,
                         "np=%d: rank %d's allreduces mapped no peer's emu buffer (IPC unused)",
                         o->nranks, r);
        } else if (o->ipc == 0) {
            cr_assert_eq(sl->imports, 0, "np=%d: rank %d made %llu IPC imports", o->nranks, r,
                         (unsigned long long)sl->imports);
        }
    }
    for (int k = 0; k < WEFT_COLL_KIND_COUNT && o->ipc == 1 && o->nranks > 1; k++) {
        uint64_t total = 0;

        for (int r = 0; r < o->nranks; r++) {
            total += area->slot[r].kind_imports[k];
        }
        /* the shared-memory forms that read the peers' device buffers */
        if (k == WEFT_COLL_ALLREDUCE || k == WEFT_COLL_ALLGATHER || k == WEFT_COLL_BCAST ||
            k == WEFT_COLL_REDUCE) {
            cr_assert_gt(total, 0, "np=%d: no rank's %s mapped a peer's emu buffer (IPC unused)",
                         o->nranks, weft__coll_kind_name((weft_coll_kind_t)k));
        }
    }
    fprintf(stderr,
            "emu procs np=%d%s%s: %d cases checked on every rank, IPC imports of rank 0: "
            "%llu\n",
            o->nranks, o->rpn != NULL ? " ranks-per-node=" : "", o->rpn != NULL ? o->rpn : "",
            area->slot[0].ncases, (unsigned long long)area->slot[0].imports);
    munmap(area, sizeof(*area));
}

/* The IPC forms: without device tasks (with them, emu stages through the slots) */
Test(one_node, np2_ipc, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 2, .tune = IPC_TUNE, .ipc = 1, .task = "no"});
}

Test(one_node, np3_ipc, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 3, .tune = IPC_TUNE, .ipc = 1, .task = "no"});
}

Test(one_node, np4_ipc, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 4, .tune = IPC_TUNE, .ipc = 1, .task = "no"});
}

/* Device tasks (the default): the enqueued collectives run on their streams, the shared-memory
 * forms through the slots (no peer's buffer mapped), every form of a call alike */
Test(one_node, np2_device_tasks, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 2, .tune = IPC_TUNE, .ipc = 0});
}

Test(one_node, np3_device_tasks, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 3, .tune = IPC_TUNE, .ipc = 0});
}

Test(one_node, np4_device_tasks, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 4, .tune = IPC_TUNE, .ipc = 0});
}

Test(virtual_nodes, np2_staged, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 2, .rpn = "1", .shm = "no", .ipc = 0, .staged = 1});
}

Test(virtual_nodes, np3_staged, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 3, .rpn = "1", .shm = "no", .ipc = 0, .staged = 1});
}

/* every message of every collective staged by the transport (the host-staged allreduce off) */
Test(virtual_nodes, np2_staged_per_message, .timeout = 300)
{
    run_job(
        &(job_opts_t){.nranks = 2, .rpn = "1", .shm = "no", .ipc = 0, .staged = 1, .stage = "0"});
}

Test(virtual_nodes, np4_two_nodes_of_two, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 4, .rpn = "2", .ipc = -1});
}

/* the hierarchical algorithms on the device buffers themselves (their device forms: the
 * allgather's copy into rank order, the reduce_scatter's grouping copy) */
Test(virtual_nodes, np4_two_nodes_of_two_per_message, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 4, .rpn = "2", .ipc = -1, .stage = "0"});
}

Test(dead_peer, np2_enqueued_allreduce, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 2, .ipc = -1, .dead_peer = 1});
}

Test(dead_peer, np3_enqueued_allreduce, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 3, .ipc = -1, .dead_peer = 1});
}

Test(dead_peer, np2_enqueued_allreduce_progress_thread, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 2, .ipc = -1, .dead_peer = 1, .task = "no"});
}

Test(dead_peer, np2_staged_over_ucx, .timeout = 300)
{
    run_job(&(job_opts_t){.nranks = 2, .rpn = "1", .shm = "no", .ipc = -1, .dead_peer = 1});
}
