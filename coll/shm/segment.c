/* The node's shared-memory segment of a communicator (coll/shm/shm.h). */
#include "coll/shm/shm.h"
#include "coll/comm_state.h"

_Static_assert(sizeof(weft_shm_ctrl_t) == 128 && offsetof(weft_shm_ctrl_t, pid) == 64,
               "per rank: one hot cache line, one cold");

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SHM_MAGIC 0x7765667473686d31ull /* "weftshm1" */
#define SHM_PAGE 4096
#define SHM_MAX_BYTES ((size_t)64 << 20) /* all slots of a node together */
#define SHM_TAG 2                        /* point-to-point tag of the setup messages */
#define SHM_NAME_LEN 64

typedef struct shm_header {
    uint64_t magic;
    uint64_t local_size;
    uint64_t slot_bytes;
    uint64_t bytes;
} shm_header_t;

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static size_t slot_bytes_for(int L)
{
    size_t slot = weft__coll_config.shm_slot;

    if (slot * 2 * (size_t)L > SHM_MAX_BYTES) {
        slot = SHM_MAX_BYTES / 2 / (size_t)L;
    }
    slot = slot / SHM_PAGE * SHM_PAGE;
    return slot < SHM_PAGE ? SHM_PAGE : slot;
}

static size_t ctrl_bytes(int L)
{
    return round_up((size_t)L * sizeof(weft_shm_ctrl_t), SHM_PAGE);
}

static void layout(weft_shm_t *shm)
{
    shm->ctrl = (weft_shm_ctrl_t *)((char *)shm->base + SHM_PAGE);
    shm->slots = (char *)shm->base + SHM_PAGE + ctrl_bytes(shm->L);
}

void weft__shm_release(weft_shm_t *shm)
{
    if (shm == NULL) {
        return;
    }
    if (shm->base != NULL) {
        munmap(shm->base, shm->bytes);
    }
    free(shm->srcs);
    free(shm->peer_src);
    free(shm->peer_dst);
    free(shm);
}

/* The creator: a new segment under an unguessable name (name[0] = '\0' on
 * failure, with the reason logged). */
static weft_shm_t *create(int L, char *name)
{
    uint64_t rnd[2];
    size_t slot = slot_bytes_for(L);
    size_t bytes = SHM_PAGE + ctrl_bytes(L) + (size_t)L * 2 * slot;
    weft_shm_t *shm = calloc(1, sizeof(*shm));
    shm_header_t *h;
    int fd;

    name[0] = '\0';
    if (shm == NULL) {
        return NULL;
    }
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        weft__log_warn("shared memory: no random name (%s); using point-to-point", strerror(errno));
        free(shm);
        return NULL;
    }
    snprintf(name, SHM_NAME_LEN, "/weft-%ld-%016" PRIx64 "%016" PRIx64, (long)getpid(), rnd[0],
             rnd[1]);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        weft__log_warn("shared memory: cannot create %zu bytes at /dev/shm%s (%s); using "
                       "point-to-point",
                       bytes, name, strerror(errno));
        if (fd >= 0) {
            close(fd);
            shm_unlink(name);
        }
        free(shm);
        name[0] = '\0';
        return NULL;
    }
    shm->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (shm->base == MAP_FAILED) {
        weft__log_warn("shared memory: cannot map %zu bytes (%s)", bytes, strerror(errno));
        shm_unlink(name);
        free(shm);
        name[0] = '\0';
        return NULL;
    }
    shm->bytes = bytes;
    shm->L = L;
    shm->slot_bytes = slot;
    layout(shm);
    h = shm->base;
    h->local_size = (uint64_t)L;
    h->slot_bytes = slot;
    h->bytes = bytes;
    __atomic_store_n(&h->magic, SHM_MAGIC, __ATOMIC_RELEASE);
    return shm;
}

static weft_shm_t *attach(int L, const char *name)
{
    weft_shm_t *shm = calloc(1, sizeof(*shm));
    shm_header_t h;
    struct stat st;
    int fd;

    if (shm == NULL) {
        return NULL;
    }
    fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < SHM_PAGE) {
        weft__log_warn("shared memory: cannot open /dev/shm%s (%s)", name, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        free(shm);
        return NULL;
    }
    shm->base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (shm->base == MAP_FAILED) {
        weft__log_warn("shared memory: cannot map /dev/shm%s (%s)", name, strerror(errno));
        free(shm);
        return NULL;
    }
    shm->bytes = (size_t)st.st_size;
    memcpy(&h, shm->base, sizeof(h));
    if (h.magic != SHM_MAGIC || h.local_size != (uint64_t)L || h.bytes != shm->bytes ||
        SHM_PAGE + ctrl_bytes(L) + (size_t)L * 2 * h.slot_bytes != h.bytes) {
        weft__log_warn("shared memory: /dev/shm%s is not this communicator's segment", name);
        munmap(shm->base, shm->bytes);
        free(shm);
        return NULL;
    }
    shm->L = L;
    shm->slot_bytes = h.slot_bytes;
    layout(shm);
    return shm;
}

/* Can this rank read local rank 0's memory? Rank 0 published the address of
 * its own mapping of the header (in the header's cma_probe); reading it must
 * give the header's magic. */
static int cma_works(weft_shm_t *shm)
{
    uint64_t magic = 0, addr = __atomic_load_n(&shm->ctrl[0].src_addr, __ATOMIC_ACQUIRE);
    pid_t pid = (pid_t)__atomic_load_n(&shm->ctrl[0].pid, __ATOMIC_ACQUIRE);
    struct iovec local = {&magic, sizeof(magic)}, remote = {(void *)(uintptr_t)addr, sizeof(magic)};

    if (shm->me == 0) {
        return 1;
    }
    if (addr == 0 || pid <= 0 ||
        process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(magic)) {
        weft__log_info("shared memory: process_vm_readv from local rank 0 refused (%s); "
                       "allreduce stages every byte through the segment",
                       strerror(errno));
        return 0;
    }
    return magic == SHM_MAGIC;
}

/* Copy bandwidth of this rank through its own slots, seconds per byte. */
static double measure_copy(weft_shm_t *shm)
{
    size_t half = shm->slot_bytes;
    char *a = weft__shm_slot(shm, shm->me, 0), *b = weft__shm_slot(shm, shm->me, 1);
    uint64_t best = UINT64_MAX;

    memset(a, 1, half);
    for (int i = 0; i < 5; i++) {
        uint64_t t0 = weft__time_ns(), t;

        memcpy(b, a, half);
        t = weft__time_ns() - t0;
        best = t < best ? t : best;
    }
    return best > 0 ? (double)best * 1e-9 / (double)half : 1e-10;
}

/*
 * The setup runs while the communicator is created, below the public entry
 * points: its messages are point-to-point schedules (tag SHM_TAG, matched
 * like weft_send/weft_recv), and the agreement is an allreduce of this layer
 * (no segment yet, so a point-to-point algorithm).
 */
static weft_status_t setup_msg(struct weft_comm *comm, int is_send, void *buf, size_t bytes, int peer)
{
    weft_op_desc_t desc = {.coll = is_send ? "shm setup send" : "shm setup recv",
                           .algo = "p2p",
                           .count = bytes,
                           .dtype = WEFT_UINT8,
                           .p2p = 1};
    weft_sched_t *s;
    weft_status_t status = weft__comm_health(comm);

    if (status == WEFT_OK) {
        status = weft__sched_create(comm, &desc, &weft__device_host_ops, &s);
    }
    if (status != WEFT_OK) {
        return status;
    }
    weft__sched_step(s, is_send ? "send" : "recv", 0);
    if (is_send) {
        weft__sched_send(s, peer, SHM_TAG, buf, bytes);
    } else {
        weft__sched_recv(s, peer, SHM_TAG, buf, bytes);
    }
    status = weft__sched_run(s);
    weft__sched_destroy(s);
    return status;
}

/* agree[0..n) = the maximum over every rank of comm. */
static weft_status_t setup_agree(struct weft_comm *comm, double *agree, size_t n)
{
    weft_coll_args_t args = {.kind = WEFT_COLL_ALLREDUCE,
                             .src = agree,
                             .dst = agree,
                             .count = n,
                             .dtype = WEFT_FLOAT64,
                             .op = WEFT_MAX,
                             .esize = sizeof(double),
                             .rank = comm->rank,
                             .size = comm->size};

    return weft__coll_run(comm, &args);
}

weft_status_t weft__shm_setup(struct weft_comm *comm)
{
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, me = m->local_rank;
    char name[SHM_NAME_LEN] = "";
    weft_shm_t *shm = NULL;
    double agree[3] = {0, 0, 0}; /* failed anywhere; slowest copy (s/byte); no CMA anywhere */
    weft_status_t status = WEFT_OK;
    int32_t ack;

    comm->coll->shm = NULL;
    /* every rank decides the same: same settings, same map */
    if (!weft__coll_config.shm || !m->uniform || L < 2) {
        return WEFT_OK;
    }
    if (me == 0) {
        shm = create(L, name);
        if (shm != NULL) {
            /* for the others' single-copy check (cma_works) */
            __atomic_store_n(&shm->ctrl[0].pid, (int64_t)getpid(), __ATOMIC_RELAXED);
            __atomic_store_n(&shm->ctrl[0].src_addr, (uint64_t)(uintptr_t)shm->base,
                             __ATOMIC_RELEASE);
        }
        for (int q = 1; q < L && status == WEFT_OK; q++) {
            status = setup_msg(comm, 1, name, SHM_NAME_LEN, m->local_ranks[q]);
        }
        for (int q = 1; q < L && status == WEFT_OK; q++) {
            status = setup_msg(comm, 0, &ack, sizeof(ack), m->local_ranks[q]);
            agree[0] = ack ? agree[0] : 1;
        }
        if (name[0] != '\0') {
            shm_unlink(name); /* mapped by every local rank (or failed): nothing to leave */
        }
    } else {
        status = setup_msg(comm, 0, name, SHM_NAME_LEN, m->local_ranks[0]);
        name[SHM_NAME_LEN - 1] = '\0';
        if (status == WEFT_OK && name[0] != '\0') {
            shm = attach(L, name);
        }
        ack = shm != NULL;
        if (status == WEFT_OK) {
            status = setup_msg(comm, 1, &ack, sizeof(ack), m->local_ranks[0]);
        }
    }
    if (shm != NULL && ((shm->srcs = calloc((size_t)L, sizeof(*shm->srcs))) == NULL ||
                        (shm->peer_src = calloc((size_t)L, sizeof(void *))) == NULL ||
                        (shm->peer_dst = calloc((size_t)L, sizeof(void *))) == NULL)) {
        weft__shm_release(shm);
        shm = NULL;
    }
    if (shm != NULL) {
        shm->me = me;
        shm->dead_rank = -1;
        shm->local_ranks = m->local_ranks;
        __atomic_store_n(&shm->ctrl[me].pid, (int64_t)getpid(), __ATOMIC_RELAXED);
        agree[1] = measure_copy(shm);
        agree[2] = !cma_works(shm);
    } else {
        agree[0] = 1;
    }
    if (status == WEFT_OK) {
        status = setup_agree(comm, agree, 3);
    }
    if (status != WEFT_OK || agree[0] != 0) {
        weft__shm_release(shm);
        if (status == WEFT_OK) {
            weft__log_info("shared memory not available on every node: point-to-point only");
        }
        return status;
    }
    shm->copy_gbs = 1e-9 / agree[1];
    shm->cma = agree[2] == 0;
    comm->coll->shm = shm;
    weft__log_info("shared memory: %d local ranks, %zu KiB slots, copy %.1f GB/s%s", L,
                   shm->slot_bytes >> 10, shm->copy_gbs, shm->cma ? ", single-copy reads" : "");
    return WEFT_OK;
}

/* Gone or a zombie: the process will never touch the segment again. */
static int pid_dead(pid_t pid)
{
    char path[64], buf[256];
    FILE *f;
    char *close_paren;
    int dead = 0;

    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0; /* no /proc: kill's answer stands */
    }
    if (fgets(buf, sizeof(buf), f) != NULL && (close_paren = strrchr(buf, ')')) != NULL) {
        dead = close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X');
    }
    fclose(f);
    return dead;
}

weft_status_t weft__shm_health(weft_shm_t *shm)
{
    uint64_t now;
    pid_t self;

    if (shm->dead_rank >= 0) { /* once gone, gone: every later call says so */
        return weft__error(WEFT_ERR_PEER_FAILED,
                           "rank %d failed (its process %ld on this node is gone)", shm->dead_rank,
                           (long)shm->dead_pid);
    }
    now = weft__time_ns();
    if (now - shm->checked_ns < 100000000ull) {
        return WEFT_OK;
    }
    self = getpid();
    shm->checked_ns = now;
    for (int q = 0; q < shm->L; q++) {
        pid_t pid = (pid_t)__atomic_load_n(&shm->ctrl[q].pid, __ATOMIC_RELAXED);

        if (pid > 0 && pid != self && pid_dead(pid)) {
            shm->dead_rank = shm->local_ranks[q];
            shm->dead_pid = pid;
            return weft__error(WEFT_ERR_PEER_FAILED,
                               "rank %d failed (its process %ld on this node is gone)",
                               shm->local_ranks[q], (long)pid);
        }
    }
    return WEFT_OK;
}
