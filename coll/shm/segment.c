/* The node's shared-memory segment of a communicator (coll/shm/shm.h). */
#include "coll/shm/shm.h"
#include "coll/comm_state.h"

#include "base/proc.h"
#include "device/host/host.h"

_Static_assert(sizeof(weft_shm_ctrl_t) == 576 && offsetof(weft_shm_ctrl_t, pad_) == 56 &&
                   offsetof(weft_shm_ctrl_t, src_addr) == 64 &&
                   offsetof(weft_shm_ctrl_t, done) == 256 &&
                   offsetof(weft_shm_ctrl_t, wide) == 320 && sizeof(weft_shm_wide_t) == 64,
               "per rank: the polled cache line, three cold ones, the done counter's, and the "
               "wide lines, one each");

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define SHM_MAGIC 0x7765667473686d31ull /* "weftshm1" */
#define SHM_PAGE 4096
#define SHM_MAX_BYTES ((size_t)64 << 20) /* all slots of a node together */
#define SHM_TAG 2                        /* point-to-point tag of the setup messages */
#define SHM_NAME_LEN 96 /* "/weft-" pid, start time, pid namespace, 32 hex digits */

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

/*
 * pidfds of the peers' processes (open_pidfds below), shared by every
 * segment of this process: one descriptor per peer process, not one per
 * communicator and peer, so splits never eat the application's descriptors.
 */
typedef struct pidfd_entry {
    pid_t pid;
    uint64_t start;
    int fd;
    int refs;
} pidfd_entry_t;

static pthread_mutex_t pidfd_lock = PTHREAD_MUTEX_INITIALIZER;
static pidfd_entry_t *pidfds;
static int npidfds, cap_pidfds;

/* A pidfd of the process (pid, start), -1 where none can be had: the pid
 * is not that process any more, no pidfd_open, out of memory or descriptors. */
static int pidfd_get(pid_t pid, uint64_t start)
{
    int fd = -1;

    pthread_mutex_lock(&pidfd_lock);
    for (int i = 0; i < npidfds; i++) {
        if (pidfds[i].pid == pid && pidfds[i].start == start) {
            pidfds[i].refs++;
            fd = pidfds[i].fd;
            goto out;
        }
    }
#ifdef SYS_pidfd_open
    if (npidfds == cap_pidfds) {
        int ncap = cap_pidfds ? 2 * cap_pidfds : 16;
        pidfd_entry_t *n = realloc(pidfds, (size_t)ncap * sizeof(*n));

        if (n == NULL) {
            goto out;
        }
        pidfds = n;
        cap_pidfds = ncap;
    }
    fd = (int)syscall(SYS_pidfd_open, pid, 0);
    /* the start time read after the open says the pidfd is that process's */
    if (fd >= 0 && weft__proc_start_time(pid) != start) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) {
        pidfds[npidfds++] = (pidfd_entry_t){.pid = pid, .start = start, .fd = fd, .refs = 1};
    }
#else
    (void)pid;
    (void)start;
#endif
out:
    pthread_mutex_unlock(&pidfd_lock);
    return fd;
}

static void pidfd_put(int fd)
{
    if (fd < 0) {
        return;
    }
    pthread_mutex_lock(&pidfd_lock);
    for (int i = 0; i < npidfds; i++) {
        if (pidfds[i].fd == fd) {
            if (--pidfds[i].refs == 0) {
                close(fd);
                pidfds[i] = pidfds[--npidfds];
            }
            break;
        }
    }
    pthread_mutex_unlock(&pidfd_lock);
}

void weft__shm_release(weft_shm_t *shm)
{
    if (shm == NULL) {
        return;
    }
    if (shm->base != NULL) {
        munmap(shm->base, shm->bytes);
    }
    if (shm->pidfd != NULL) {
        for (int q = 0; q < shm->L; q++) {
            pidfd_put(shm->pidfd[q]);
        }
    }
    free(shm->pidfd);
    free(shm->srcs);
    free(shm->seen);
    free(shm->peer_src);
    free(shm->peer_dst);
    free(shm);
}

/* This process's pid namespace (the inode of /proc/self/ns/pid), 0 when
 * unknown: pids in names are judged only by processes of the same one. */
static uint64_t pid_namespace(void)
{
    struct stat st;

    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

int weft__shm_reap(void)
{
    uint64_t ns = pid_namespace();
    DIR *d;
    struct dirent *e;
    int reaped = 0;

    if (ns == 0 || weft__proc_start_time(getpid()) == 0 || (d = opendir("/dev/shm")) == NULL) {
        return 0; /* nothing can be judged here */
    }
    while ((e = readdir(d)) != NULL) {
        long pid;
        unsigned long long start, name_ns;
        char rnd[33], path[2 + sizeof(e->d_name)];
        int end = 0;
        struct stat st;

        if (strncmp(e->d_name, "weft-", 5) != 0 || strlen(e->d_name) >= SHM_NAME_LEN ||
            sscanf(e->d_name, "weft-%ld-%llx-%llx-%32[0-9a-f]%n", &pid, &start, &name_ns, rnd,
                   &end) != 4 ||
            e->d_name[end] != '\0' || strlen(rnd) != 32 || pid <= 0 || name_ns != ns ||
            pid == (long)getpid()) {
            continue; /* not a segment name of this pid namespace, or ours */
        }
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid()) {
            continue; /* another user's: never ours to remove */
        }
        if (!weft__proc_gone((pid_t)pid, (uint64_t)start)) {
            continue; /* its creator runs: it unlinks the name itself */
        }
        snprintf(path, sizeof(path), "/%s", e->d_name);
        if (shm_unlink(path) == 0) {
            reaped++;
            weft__log_info("shared memory: removed /dev/shm%s (%lld bytes), left by process %ld "
                           "that is gone",
                           path, (long long)st.st_size, pid);
        }
    }
    closedir(d);
    return reaped;
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
    weft__shm_reap();
    snprintf(name, SHM_NAME_LEN, "/weft-%ld-%" PRIx64 "-%" PRIx64 "-%016" PRIx64 "%016" PRIx64,
             (long)getpid(), weft__proc_start_time(getpid()), pid_namespace(), rnd[0], rnd[1]);
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

/* NULL after recording and logging why name is not the segment. */
static weft_shm_t *refuse(weft_shm_t *shm, const char *name, const char *why)
{
    weft__error(WEFT_ERR_INTERNAL, "shared memory: /dev/shm%s refused: %s", name, why);
    weft__log_warn("shared memory: /dev/shm%s refused: %s; using point-to-point", name, why);
    if (shm->base != NULL) {
        munmap(shm->base, shm->bytes);
    }
    free(shm);
    return NULL;
}

weft_shm_t *weft__shm_attach(int L, const char *name)
{
    weft_shm_t *shm = calloc(1, sizeof(*shm));
    size_t fixed = SHM_PAGE + ctrl_bytes(L), per_slot = 2 * (size_t)L;
    char why[160];
    shm_header_t h;
    struct stat st;
    int fd;

    if (shm == NULL) {
        return NULL;
    }
    fd = shm_open(name, O_RDWR | O_NOFOLLOW, 0600);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, sizeof(why), "cannot open it (%s)", strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return refuse(shm, name, why);
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size < (off_t)fixed) {
        snprintf(why, sizeof(why), "%s",
                 !S_ISREG(st.st_mode)     ? "not a regular file"
                 : st.st_uid != geteuid() ? "owned by another user"
                                          : "smaller than the header and controls");
        close(fd);
        return refuse(shm, name, why);
    }
    shm->base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (shm->base == MAP_FAILED) {
        snprintf(why, sizeof(why), "cannot map it (%s)", strerror(errno));
        shm->base = NULL;
        return refuse(shm, name, why);
    }
    shm->bytes = (size_t)st.st_size;
    memcpy(&h, shm->base, sizeof(h));
    /* every field checked against what this rank knows, in sizes that
     * cannot overflow: bytes is the file's size, and the slots fill what
     * is left after the header and controls exactly */
    if (h.magic != SHM_MAGIC || h.local_size != (uint64_t)L) {
        snprintf(why, sizeof(why),
                 "not a segment of %d local ranks (magic %#" PRIx64 ", local_size %" PRIu64 ")", L,
                 h.magic, h.local_size);
        return refuse(shm, name, why);
    }
    if (h.bytes != (uint64_t)shm->bytes || h.slot_bytes == 0 || h.slot_bytes % SHM_PAGE != 0 ||
        (shm->bytes - fixed) % per_slot != 0 || (shm->bytes - fixed) / per_slot != h.slot_bytes) {
        snprintf(why, sizeof(why),
                 "header sizes disagree with the file (bytes %" PRIu64 ", slot_bytes %" PRIu64
                 ", file %zu bytes)",
                 h.bytes, h.slot_bytes, shm->bytes);
        return refuse(shm, name, why);
    }
    shm->L = L;
    shm->slot_bytes = (size_t)h.slot_bytes;
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
    uint64_t start = __atomic_load_n(&shm->ctrl[0].start, __ATOMIC_RELAXED);
    struct iovec local = {&magic, sizeof(magic)}, remote = {(void *)(uintptr_t)addr, sizeof(magic)};

    if (shm->me == 0) {
        return 1;
    }
    if (addr == 0 || pid <= 0 || weft__proc_gone(pid, start) ||
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

        weft__host_copy(b, a, half);
        t = weft__time_ns() - t0;
        best = t < best ? t : best;
    }
    return best > 0 ? (double)best * 1e-9 / (double)half : 1e-10;
}

/* Rate of this rank's single-copy reads (process_vm_readv of its own slot into its second one,
 * as a peer's read of a block would run; up to 256 KiB of it: the rate varies little with the
 * size from there, 11-14 GB/s at 256 KiB-4 MiB where copies ran at 43-127 GB/s), seconds per
 * byte, 0 where the kernel refuses; and in *copy_p the rate of copies of the same bytes, timed
 * in turn with the reads (the best of five each). The single-copy rule compares these two: a
 * 1 MiB copy's rate (measure_copy, the cost model's) against a 256 KiB read measured apart
 * moved with the machine's load from job to job (2-vCPU AMD EPYC VM, both ranks at once:
 * reads/copies 0.29-0.54, so the rule flipped between jobs; the same sizes in turn 0.20-0.36). */
static double measure_cma(weft_shm_t *shm, double *copy_p)
{
    size_t half = shm->slot_bytes < ((size_t)256 << 10) ? shm->slot_bytes : (size_t)256 << 10;
    char *from = weft__shm_slot(shm, shm->me, 0), *to = weft__shm_slot(shm, shm->me, 1);
    struct iovec local = {to, half}, remote = {from, half};
    uint64_t best = UINT64_MAX, best_copy = UINT64_MAX;

    for (int i = 0; i < 5; i++) {
        uint64_t t0 = weft__time_ns(), t;

        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)half) {
            return 0;
        }
        t = weft__time_ns() - t0;
        best = t < best ? t : best;
        t0 = weft__time_ns();
        weft__host_copy(to, from, half);
        t = weft__time_ns() - t0;
        best_copy = t < best_copy ? t : best_copy;
    }
    *copy_p = best_copy > 0 ? (double)best_copy * 1e-9 / (double)half : 1e-10;
    return best > 0 ? (double)best * 1e-9 / (double)half : 1e-10;
}

/*
 * One flag handoff between local ranks 0 and 1: they bounce a counter
 * through their control's `ping` (zero in a new segment, so once per
 * segment) HANDOFF_PINGS times, and half the median round trip is local
 * rank 0's answer (the cost measurement's agreement takes the largest).
 * This is what a shared-memory round pays per phase. Ranks that share
 * cores yield between polls, and so measure the descheduling too; so does a
 * wait past HANDOFF_SPINS polls (a loaded machine: its handoffs are slow,
 * and so is the answer). 0 when the peer did not answer within
 * HANDOFF_GIVE_UP_NS.
 */
enum { HANDOFF_PINGS = 101 };
static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}
#define HANDOFF_GIVE_UP_NS 100000000ull
#define HANDOFF_SPINS 4096u

double weft__shm_measure_handoff(weft_shm_t *shm, int oversubscribed)
{
    uint64_t *mine = &shm->ctrl[shm->me].ping;
    const uint64_t *theirs = &shm->ctrl[shm->me ^ 1].ping;
    const uint64_t give_up = weft__time_ns() + HANDOFF_GIVE_UP_NS;
    double rtt[HANDOFF_PINGS];

    if (shm->L < 2 || shm->me > 1) {
        return 0;
    }
    for (uint64_t i = 1; i <= HANDOFF_PINGS; i++) {
        const uint64_t t0 = weft__time_ns();

        if (shm->me == 0) {
            __atomic_store_n(mine, i, __ATOMIC_RELEASE);
        }
        for (unsigned n = 0; __atomic_load_n(theirs, __ATOMIC_ACQUIRE) != i; n++) {
            if (oversubscribed || n >= HANDOFF_SPINS) {
                sched_yield(); /* the peer may need this core */
            } else {
                weft__cpu_relax();
            }
            if (n % 256 == 255 && weft__time_ns() > give_up) {
                return 0;
            }
        }
        if (shm->me == 1) {
            __atomic_store_n(mine, i, __ATOMIC_RELEASE);
        } else {
            rtt[i - 1] = (double)(weft__time_ns() - t0) * 1e-9;
        }
    }
    if (shm->me == 1) {
        return 0;
    }
    qsort(rtt, HANDOFF_PINGS, sizeof(rtt[0]), cmp_double);
    return rtt[HANDOFF_PINGS / 2] / 2;
}

/*
 * The setup runs while the communicator is created, below the public entry
 * points: its messages are point-to-point schedules (tag SHM_TAG, matched
 * like weft_send/weft_recv), and the agreement is an allreduce of this layer
 * (no segment yet, so a point-to-point algorithm).
 */
static weft_status_t setup_msg(struct weft_comm *comm, int is_send, void *buf, size_t bytes,
                               int peer)
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

/*
 * Single copy reads a peer's memory by pid (process_vm_readv), and a pid
 * names the peer only while it runs: the liveness check (weft__shm_health)
 * notices a dead peer within 100 ms, and in between the kernel may have
 * given the pid to another process. So each rank holds a pidfd of every
 * peer's process (shared by the process's segments, pidfd_get), opened while
 * the pid was surely the peer's (the start time in its control matched after
 * the open), and a read counts only if the pidfd says afterwards that the
 * peer has not exited: then the pid was the peer's for the whole read.
 * Without pidfd_open (Linux before 5.3) the reads go by pid alone. -1 when
 * out of memory.
 */
static int open_pidfds(weft_shm_t *shm)
{
    pid_t self = getpid();

    shm->pidfd = malloc((size_t)shm->L * sizeof(int));
    if (shm->pidfd == NULL) {
        return -1;
    }
    for (int q = 0; q < shm->L; q++) {
        pid_t pid = (pid_t)__atomic_load_n(&shm->ctrl[q].pid, __ATOMIC_RELAXED);
        uint64_t start = __atomic_load_n(&shm->ctrl[q].start, __ATOMIC_RELAXED);

        /* none for this process, and none where the start time is unknown */
        shm->pidfd[q] = pid > 0 && pid != self && start != 0 ? pidfd_get(pid, start) : -1;
    }
    return 0;
}

weft_status_t weft__shm_setup(struct weft_comm *comm)
{
    const weft_node_map_t *m = comm->node;
    int L = m->local_size, me = m->local_rank;
    char name[SHM_NAME_LEN] = "";
    weft_shm_t *shm = NULL;
    /* failed anywhere; slowest copy (s/byte); no CMA anywhere; slowest single-copy read and
     * slowest copy of the same size (s/byte) */
    double agree[5] = {0, 0, 0, 0, 0};
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
            shm->ctrl[0].start = weft__proc_start_time(getpid());
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
            shm = weft__shm_attach(L, name);
        }
        ack = shm != NULL;
        if (status == WEFT_OK) {
            status = setup_msg(comm, 1, &ack, sizeof(ack), m->local_ranks[0]);
        }
    }
    if (shm != NULL && ((shm->srcs = calloc((size_t)L, sizeof(*shm->srcs))) == NULL ||
                        (shm->seen = calloc((size_t)L, sizeof(*shm->seen))) == NULL ||
                        (shm->peer_src = calloc((size_t)L, sizeof(void *))) == NULL ||
                        (shm->peer_dst = calloc((size_t)L, sizeof(void *))) == NULL)) {
        weft__shm_release(shm);
        shm = NULL;
    }
    if (shm != NULL) {
        shm->me = me;
        shm->dead_rank = -1;
        shm->local_ranks = m->local_ranks;
        shm->ctrl[me].start = weft__proc_start_time(getpid());
        __atomic_store_n(&shm->ctrl[me].pid, (int64_t)getpid(), __ATOMIC_RELAXED);
        agree[1] = measure_copy(shm);
        if (!cma_works(shm) || (agree[3] = measure_cma(shm, &agree[4])) == 0) {
            agree[2] = 1;
        }
    } else {
        agree[0] = 1;
    }
    if (status == WEFT_OK) {
        status = setup_agree(comm, agree, 5);
    }
    if (status != WEFT_OK || agree[0] != 0) {
        weft__shm_release(shm);
        if (status == WEFT_OK) {
            weft__log_info("shared memory not available on every node: point-to-point only");
        }
        return status;
    }
    shm->copy_gbs = 1e-9 / agree[1];
    shm->cma = agree[2] == 0 && open_pidfds(shm) == 0;
    shm->cma_gbs = shm->cma ? 1e-9 / agree[3] : 0;
    shm->cma_copy_gbs = shm->cma ? 1e-9 / agree[4] : 0;
    shm->cma_fast = shm->cma && 2 * shm->cma_gbs >= shm->cma_copy_gbs;
    comm->coll->shm = shm;
    weft__log_info("shared memory: %d local ranks, %zu KiB slots, copy %.1f GB/s, single-copy "
                   "reads %.1f GB/s against copies of the same size %.1f GB/s%s",
                   L, shm->slot_bytes >> 10, shm->copy_gbs, shm->cma_gbs, shm->cma_copy_gbs,
                   !shm->cma       ? " (refused)"
                   : shm->cma_fast ? ""
                                   : " (slower than two copies: staged where settings are auto)");
    return WEFT_OK;
}

weft_status_t weft__shm_health(weft_shm_t *shm, int at_entry)
{
    uint64_t now;
    pid_t self;

    if (shm->dead_rank >= 0) { /* once gone, gone: every later call says so */
        return weft__error(WEFT_ERR_PEER_FAILED,
                           "rank %d failed (its process %ld on this node is gone)", shm->dead_rank,
                           (long)shm->dead_pid);
    }
    /* every collective asks at its start: the clock only every 64th time there (np 2, 8-byte
     * allreduce: three clock reads a call cost 4-7 % of its time); a wait asks every 64 polls,
     * and looks at the clock each time, so that a dead peer is found within the period however
     * long its yields take */
    if (at_entry && shm->health_calls++ % 64 != 0) {
        return WEFT_OK;
    }
    now = weft__time_coarse_ns();
    if (now - shm->checked_ns < 100000000ull) {
        return WEFT_OK;
    }
    self = getpid();
    shm->checked_ns = now;
    for (int q = 0; q < shm->L; q++) {
        pid_t pid = (pid_t)__atomic_load_n(&shm->ctrl[q].pid, __ATOMIC_RELAXED);
        uint64_t start = __atomic_load_n(&shm->ctrl[q].start, __ATOMIC_RELAXED);

        /* gone, exiting, a zombie, or its pid given to another process */
        if (pid > 0 && pid != self && weft__proc_gone(pid, start)) {
            shm->dead_rank = shm->local_ranks[q];
            shm->dead_pid = pid;
            return weft__error(WEFT_ERR_PEER_FAILED,
                               "rank %d failed (its process %ld on this node is gone)",
                               shm->local_ranks[q], (long)pid);
        }
    }
    return WEFT_OK;
}
