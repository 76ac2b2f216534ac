/*
 * The TCP unique-id bootstrap (bootstrap/tcp) with real processes on
 * 127.0.0.1: process 0 creates the id (so hosts the root) and is rank 0,
 * the others are forked once the id exists. Children die with the test
 * process (PR_SET_PDEATHSIG) and live in their own process group, which the
 * test kills if they overrun. Results come back through shared memory.
 *
 * Raw clients and a fake root speak the wire format documented in
 * bootstrap/tcp/tcp.h, to check that bad peers are dropped or reported,
 * never crash anything and never hang past a deadline.
 */
#include <criterion/criterion.h>

#include "bootstrap/tcp/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 10
#define SEC 1000000000ull
#define DATA_MISMATCH 1000 /* a result status: wrong data, not an error code */

static const weft_bootstrap_ops_t *const ops = &weft__tcp_boot_ops;

typedef struct result {
    int create_status; /* of weft__tcp_boot_create */
    int status;        /* first failure in the body, or WEFT_OK */
    char msg[512];
    uint64_t create_ns; /* time boot_create took */
    int ready;          /* the body reached its waiting point */
    int done;
    int failed_rank;
    uint64_t failed_seen_ns;
    int after_failure[2]; /* allgather and barrier after a failure */
} result_t;

typedef struct flood_stats {
    int ready;     /* the flood is under way: start the other ranks */
    int checked;   /* the flood is over and was counted */
    int opened;    /* connections made */
    int refused;   /* connections that could not be made */
    int open_left; /* of those, still open at the root once the flood was over */
} flood_stats_t;

typedef struct shared {
    int id_ready;
    flood_stats_t flood;
    uint64_t kill_ns;
    char id[WEFT_TCP_ID_STRLEN + 1];
    result_t res[MAX_PROCS];
} shared_t;

typedef struct job job_t;
typedef void body_fn(const job_t *job, int proc, void *ctx, result_t *res);

struct job {
    const char *bind_addr; /* for process 0's id; NULL: 127.0.0.1 */
    int nranks;
    int nprocs;
    int rank[MAX_PROCS];      /* process p registers as rank[p] */
    int nranks_of[MAX_PROCS]; /* nranks process p claims; 0: nranks */
    int late[MAX_PROCS];      /* start once every other process is ready */
    double deadline_s;        /* of boot_create */
    body_fn *body;
    int (*raw)(const char *id);    /* run by the test between process 0 and the others */
    int kill_proc;                 /* process to SIGKILL once all are ready, or -1 */
    void (*flood)(const char *id); /* run by a process of its own, started after process 0 */
    int root_nofile;               /* process 0's descriptor limit; 0: unchanged */
    const char *root_log;          /* process 0's stderr goes there; NULL: unchanged */
};

static shared_t *sh;

static uint64_t now_ns(void)
{
    return weft__time_ns();
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL);
}

static void fail(result_t *res, int status, const char *msg)
{
    if (res->status == WEFT_OK) {
        res->status = status;
        snprintf(res->msg, sizeof(res->msg), "%s", msg);
    }
}

/* ---- the processes ------------------------------------------------------ */

static void child_start(pid_t parent, pid_t pgid)
{
    setpgid(0, pgid);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(99);
    }
}

static void proc_main(const job_t *job, int proc)
{
    result_t *res = &sh->res[proc];
    int rank = job->rank[proc];
    int nranks = job->nranks_of[proc] ? job->nranks_of[proc] : job->nranks;
    weft_tcp_id_t id;
    void *ctx = NULL;
    uint64_t t0;

    if (proc == 0) {
        const char *addr = job->bind_addr != NULL ? job->bind_addr : "127.0.0.1";

        if (job->root_nofile > 0) {
            struct rlimit rl;

            getrlimit(RLIMIT_NOFILE, &rl);
            rl.rlim_cur = (rlim_t)job->root_nofile;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (job->root_log != NULL) {
            int fd = open(job->root_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

            if (fd >= 0) {
                dup2(fd, STDERR_FILENO);
                close(fd);
            }
        }

        if (weft__tcp_id_create(addr, &id) != WEFT_OK ||
            weft__tcp_id_to_string(&id, sh->id, sizeof(sh->id)) != WEFT_OK) {
            res->create_status = WEFT_ERR_INTERNAL;
            snprintf(res->msg, sizeof(res->msg), "id: %s", weft_last_error());
            __atomic_store_n(&sh->id_ready, -1, __ATOMIC_RELEASE);
            _exit(1);
        }
        __atomic_store_n(&sh->id_ready, 1, __ATOMIC_RELEASE);
    }
    if (weft__tcp_id_from_string(sh->id, &id) != WEFT_OK) {
        res->create_status = WEFT_ERR_INTERNAL;
        _exit(1);
    }
    t0 = now_ns();
    res->create_status =
        weft__tcp_boot_create(&id, nranks, rank, t0 + (uint64_t)(job->deadline_s * SEC), &ctx);
    res->create_ns = now_ns() - t0;
    if (res->create_status != WEFT_OK) {
        snprintf(res->msg, sizeof(res->msg), "%s", weft_last_error());
        __atomic_store_n(&res->done, 1, __ATOMIC_RELEASE);
        _exit(0);
    }
    if (job->body != NULL) {
        job->body(job, proc, ctx, res);
    }
    ops->release(ctx);
    __atomic_store_n(&res->done, 1, __ATOMIC_RELEASE);
    _exit(0);
}

static int all_ready(const job_t *job, int late)
{
    for (int p = 0; p < job->nprocs; p++) {
        if (job->late[p] == late && !__atomic_load_n(&sh->res[p].ready, __ATOMIC_ACQUIRE) &&
            !__atomic_load_n(&sh->res[p].done, __ATOMIC_ACQUIRE)) {
            return 0;
        }
    }
    return 1;
}

static pid_t spawn(const job_t *job, int proc, pid_t pgid)
{
    pid_t parent = getpid(), pid = fork();

    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        child_start(parent, pgid);
        proc_main(job, proc);
    }
    setpgid(pid, pgid != 0 ? pgid : pid);
    return pid;
}

/* Run job; status[p] gets process p's wait status. The whole job must end
 * within 20 s. */
static void run_job(const job_t *job, int *wstatus)
{
    pid_t pid[MAX_PROCS] = {0}, pgid, flooder = 0;
    int left = job->nprocs, raw_ok = 1, started_late = 0, killed = 0;
    uint64_t deadline = now_ns() + 20 * SEC;

    cr_assert_leq(job->nprocs, MAX_PROCS);
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    for (int p = 0; p < job->nprocs; p++) {
        sh->res[p].failed_rank = -2;
    }
    fflush(NULL);
    pgid = pid[0] = spawn(job, 0, 0);
    while (__atomic_load_n(&sh->id_ready, __ATOMIC_ACQUIRE) == 0 && now_ns() < deadline) {
        sleep_ms(1);
    }
    if (__atomic_load_n(&sh->id_ready, __ATOMIC_ACQUIRE) != 1) {
        killpg(pgid, SIGKILL);
        cr_assert_fail("process 0 could not create the id: %s", sh->res[0].msg);
    }
    if (job->raw != NULL) {
        raw_ok = job->raw(sh->id);
    }
    if (job->flood != NULL) {
        pid_t parent = getpid();

        flooder = fork();
        cr_assert_geq(flooder, 0, "fork: %s", strerror(errno));
        if (flooder == 0) {
            child_start(parent, pgid);
            job->flood(sh->id);
            _exit(0);
        }
        setpgid(flooder, pgid);
        while (!__atomic_load_n(&sh->flood.ready, __ATOMIC_ACQUIRE) && now_ns() < deadline &&
               waitpid(flooder, NULL, WNOHANG) == 0) {
            sleep_ms(1);
        }
    }
    for (int p = 1; p < job->nprocs; p++) {
        if (!job->late[p]) {
            pid[p] = spawn(job, p, pgid);
        }
    }
    while (left > 0 && now_ns() < deadline) {
        if (!started_late && all_ready(job, 0)) {
            for (int p = 1; p < job->nprocs; p++) {
                if (job->late[p]) {
                    pid[p] = spawn(job, p, pgid);
                }
            }
            started_late = 1;
        }
        if (!killed && job->kill_proc >= 0 && all_ready(job, 0)) {
            sh->kill_ns = now_ns();
            kill(pid[job->kill_proc], SIGKILL);
            killed = 1;
        }
        for (int p = 0; p < job->nprocs; p++) {
            if (pid[p] > 0 && waitpid(pid[p], &wstatus[p], WNOHANG) == pid[p]) {
                pid[p] = -1;
                left--;
            }
        }
        sleep_ms(2);
    }
    if (left > 0) {
        killpg(pgid, SIGKILL);
        for (int p = 0; p < job->nprocs; p++) {
            if (pid[p] > 0) {
                waitpid(pid[p], &wstatus[p], 0);
            }
        }
        if (flooder > 0) {
            waitpid(flooder, NULL, 0);
        }
        cr_assert_fail("the job did not end within 20 s");
    }
    if (flooder > 0) {
        int fs;

        while (waitpid(flooder, &fs, WNOHANG) == 0 && now_ns() < deadline) {
            sleep_ms(2);
        }
        if (now_ns() >= deadline) {
            killpg(pgid, SIGKILL);
            waitpid(flooder, &fs, 0);
            cr_assert_fail("the flood did not end within 20 s");
        }
    }
    cr_assert(raw_ok, "the raw client's checks failed (see above)");
}

static void expect_clean_exit(const job_t *job, const int *wstatus)
{
    for (int p = 0; p < job->nprocs; p++) {
        if (p == job->kill_proc) {
            cr_expect(WIFSIGNALED(wstatus[p]), "process %d was to be killed", p);
            continue;
        }
        cr_expect(WIFEXITED(wstatus[p]) && WEXITSTATUS(wstatus[p]) == 0,
                  "process %d (rank %d) exited with status 0x%x", p, job->rank[p], wstatus[p]);
        cr_expect(sh->res[p].done, "process %d did not finish", p);
    }
}

static void expect_all_ok(const job_t *job, const int *wstatus)
{
    expect_clean_exit(job, wstatus);
    for (int p = 0; p < job->nprocs; p++) {
        cr_expect_eq(sh->res[p].create_status, WEFT_OK, "rank %d: create: %s", job->rank[p],
                     sh->res[p].msg);
        cr_expect_eq(sh->res[p].status, WEFT_OK, "rank %d: %s", job->rank[p], sh->res[p].msg);
    }
}

/* ---- bodies --------------------------------------------------------------- */

static uint64_t op_deadline(void)
{
    return now_ns() + 10 * SEC;
}

static unsigned char pattern(int rank, int iter, size_t k)
{
    return (unsigned char)(rank * 131 + iter * 7 + (int)(k % 251));
}

/* 50 allgathers of 1 byte and of 100 KiB, checked, then a barrier. */
static void body_allgather(const job_t *job, int proc, void *ctx, result_t *res)
{
    const size_t big = 100 * 1024;
    int n = job->nranks, rank = job->rank[proc];
    unsigned char *blob = malloc(big), *all = malloc(big * (size_t)n);
    char msg[128];

    for (int it = 0; it < 50 && res->status == WEFT_OK; it++) {
        unsigned char one = pattern(rank, it, 0), got[MAX_PROCS];
        int st = ops->allgather(ctx, &one, got, 1, op_deadline());

        if (st != WEFT_OK) {
            fail(res, st, weft_last_error());
        }
        for (int r = 0; r < n && st == WEFT_OK; r++) {
            if (got[r] != pattern(r, it, 0)) {
                snprintf(msg, sizeof(msg), "1-byte allgather %d: slot %d wrong", it, r);
                fail(res, DATA_MISMATCH, msg);
            }
        }
    }
    for (int it = 0; it < 50 && res->status == WEFT_OK; it++) {
        int st;

        for (size_t k = 0; k < big; k++) {
            blob[k] = pattern(rank, it, k);
        }
        memset(all, 0xee, big * (size_t)n);
        st = ops->allgather(ctx, blob, all, big, op_deadline());
        if (st != WEFT_OK) {
            fail(res, st, weft_last_error());
        }
        for (int r = 0; r < n && st == WEFT_OK; r++) {
            for (size_t k = 0; k < big; k++) {
                if (all[(size_t)r * big + k] != pattern(r, it, k)) {
                    snprintf(msg, sizeof(msg), "100 KiB allgather %d: rank %d byte %zu wrong", it,
                             r, k);
                    fail(res, DATA_MISMATCH, msg);
                    break;
                }
            }
        }
    }
    if (res->status == WEFT_OK) {
        int st = ops->barrier(ctx, op_deadline());

        if (st != WEFT_OK) {
            fail(res, st, weft_last_error());
        }
    }
    free(blob);
    free(all);
}

/* A barrier, then: the process to be killed waits for it; the others wait
 * for a failure notice and try an allgather and a barrier. */
static void body_survive(const job_t *job, int proc, void *ctx, result_t *res)
{
    int st = ops->barrier(ctx, op_deadline());
    uint64_t give_up;
    unsigned char one = 1, all[MAX_PROCS];

    if (st != WEFT_OK) {
        fail(res, st, weft_last_error());
    }
    __atomic_store_n(&res->ready, 1, __ATOMIC_RELEASE);
    if (proc == job->kill_proc) {
        for (;;) {
            pause();
        }
    }
    give_up = now_ns() + 5 * SEC;
    while ((res->failed_rank = weft__tcp_boot_failed_rank(ctx)) < 0 && now_ns() < give_up) {
        sleep_ms(1);
    }
    res->failed_seen_ns = now_ns();
    res->after_failure[0] = ops->allgather(ctx, &one, all, 1, op_deadline());
    res->after_failure[1] = ops->barrier(ctx, op_deadline());
}

/* Rank 2 registers and then calls nothing: the others' allgather times out
 * naming it, and their context is unusable afterwards. */
static void body_stall(const job_t *job, int proc, void *ctx, result_t *res)
{
    unsigned char one = 1, all[MAX_PROCS];
    uint64_t give_up = now_ns() + 5 * SEC;

    if (job->rank[proc] == 2) {
        for (int p = 0; p < job->nprocs; p++) {
            while (p != proc && !__atomic_load_n(&sh->res[p].ready, __ATOMIC_ACQUIRE) &&
                   now_ns() < give_up) {
                sleep_ms(1);
            }
        }
        return;
    }
    res->after_failure[0] = ops->allgather(ctx, &one, all, 1, now_ns() + SEC / 2);
    snprintf(res->msg, sizeof(res->msg), "%s", weft_last_error());
    res->after_failure[1] = ops->barrier(ctx, op_deadline());
    __atomic_store_n(&res->ready, 1, __ATOMIC_RELEASE);
}

/* Register, let the late process try, then a barrier. */
static void body_wait_late(const job_t *job, int proc, void *ctx, result_t *res)
{
    uint64_t give_up = now_ns() + 5 * SEC;
    int st;

    __atomic_store_n(&res->ready, 1, __ATOMIC_RELEASE);
    for (int p = 0; p < job->nprocs; p++) {
        while (job->late[p] && !__atomic_load_n(&sh->res[p].done, __ATOMIC_ACQUIRE) &&
               now_ns() < give_up) {
            sleep_ms(1);
        }
    }
    (void)proc;
    st = ops->barrier(ctx, op_deadline());
    if (st != WEFT_OK) {
        fail(res, st, weft_last_error());
    }
}

/* ---- raw clients ------------------------------------------------------------ */

/* The documented frame header. */
static void raw_hdr(unsigned char *p, const unsigned char *token, unsigned type, int rank,
                    uint32_t seq, uint64_t len)
{
    uint32_t w[4] = {htonl(0x57465446u), htonl((1u << 16) | type), htonl((uint32_t)rank),
                     htonl(seq)};

    memcpy(p, w, 16);
    for (int i = 0; i < 8; i++) {
        p[16 + i] = (unsigned char)(len >> (56 - 8 * i));
    }
    memcpy(p + 24, token, 16);
}

static int raw_connect(const char *idstr, unsigned char *token)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    weft_tcp_id_t id;
    int fd;

    cr_assert_eq(weft__tcp_id_from_string(idstr, &id), WEFT_OK);
    memcpy(&sa.sin_port, id.bytes + 8, 2);
    memcpy(&sa.sin_addr, id.bytes + 16, 4);
    memcpy(token, id.bytes + 32, 16);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
                 strerror(errno));
    return fd;
}

static void raw_send(int fd, const void *p, size_t len)
{
    cr_assert_eq(send(fd, p, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* 1 if the peer closes fd within ms (discarding what it sends). */
static int raw_closed_within(int fd, int ms)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000ull;
    char buf[256];

    while (now_ns() < deadline) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, 10) <= 0) {
            continue;
        }
        n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return 1;
        }
    }
    return 0;
}

static int raw_wrong_token(const char *id)
{
    unsigned char token[16], hdr[40], hello[72] = {0};
    int fd = raw_connect(id, token), closed;

    token[3] ^= 0x40;
    hello[3] = 2; /* nranks 2 */
    raw_hdr(hdr, token, 1, 1, 0, sizeof(hello));
    raw_send(fd, hdr, sizeof(hdr));
    raw_send(fd, hello, sizeof(hello));
    closed = raw_closed_within(fd, 3000);
    close(fd);
    cr_expect(closed, "the root kept a connection with a wrong token");
    return closed;
}

static int raw_garbage(const char *id)
{
    unsigned char token[16], hdr[40], junk[100];
    int fd[5], ok = 1;

    memset(junk, 0xa5, sizeof(junk));
    fd[0] = raw_connect(id, token); /* garbage */
    raw_send(fd[0], junk, sizeof(junk));
    fd[1] = raw_connect(id, token); /* truncated registration */
    raw_hdr(hdr, token, 1, 1, 0, 72);
    raw_send(fd[1], hdr, sizeof(hdr));
    raw_send(fd[1], junk, 10);
    shutdown(fd[1], SHUT_WR);
    fd[2] = raw_connect(id, token); /* oversized */
    raw_hdr(hdr, token, 1, 1, 0, 1ull << 30);
    raw_send(fd[2], hdr, sizeof(hdr));
    fd[3] = raw_connect(id, token); /* an allgather without registering */
    raw_hdr(hdr, token, 3, 1, 1, 8);
    raw_send(fd[3], hdr, sizeof(hdr));
    raw_send(fd[3], junk, 8);
    fd[4] = raw_connect(id, token); /* a truncated header */
    raw_send(fd[4], hdr, 20);
    shutdown(fd[4], SHUT_WR);
    for (int i = 0; i < 5; i++) {
        int closed = raw_closed_within(fd[i], 3000);

        cr_expect(closed, "the root kept bad connection %d", i);
        ok &= closed;
        close(fd[i]);
    }
    return ok;
}

/* ---- a connection flood --------------------------------------------------- */

#define FLOOD_CONNS 3000       /* connections made, at most */
#define FLOOD_NS (5 * SEC / 2) /* spread over this long */
#define FLOOD_START 1000       /* the ranks start once this many are made */
#define ROOT_NOFILE 256        /* the root's process may hold this many descriptors */

/* Connections from 127.0.0.1 to the root: two thirds idle, a sixth garbage,
 * a sixth a registration with a wrong token; all kept open by this side.
 * Once made (or FLOOD_NS passed), a moment later, counts how many the root
 * still holds, then closes them all. */
static void flood_main(const char *idstr)
{
    flood_stats_t *fl = &sh->flood;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    unsigned char token[16], hdr[40], hello[72] = {0}, junk[40];
    struct rlimit rl;
    weft_tcp_id_t id;
    uint64_t t0 = now_ns();
    int max, n = 0, *fds;

    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    max = rl.rlim_cur < FLOOD_CONNS + 64 ? (int)rl.rlim_cur - 64 : FLOOD_CONNS;
    fds = calloc((size_t)max, sizeof(*fds));
    if (fds == NULL || weft__tcp_id_from_string(idstr, &id) != WEFT_OK) {
        _exit(2);
    }
    memcpy(&sa.sin_port, id.bytes + 8, 2);
    memcpy(&sa.sin_addr, id.bytes + 16, 4);
    memcpy(token, id.bytes + 32, 16);
    token[0] ^= 1;
    hello[3] = 4;
    memset(junk, 0xa5, sizeof(junk));
    for (int i = 0; i < max && now_ns() < t0 + FLOOD_NS; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        uint64_t due = t0 + (uint64_t)i * (FLOOD_NS / FLOOD_CONNS);

        while (now_ns() < due) {
            sleep_ms(1);
        }
        if (fd < 0) {
            break;
        }
        /* a connect the backlog has no room for gives up at once */
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            fl->refused++;
            close(fd);
            continue;
        }
        if (i % 6 == 1) {
            send(fd, junk, sizeof(junk), MSG_NOSIGNAL | MSG_DONTWAIT);
        } else if (i % 6 == 4) {
            raw_hdr(hdr, token, 1, i % 4, 0, sizeof(hello));
            send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT);
            send(fd, hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        fds[n++] = fd;
        fl->opened = n;
        if (n == FLOOD_START) {
            __atomic_store_n(&fl->ready, 1, __ATOMIC_RELEASE);
        }
    }
    __atomic_store_n(&fl->ready, 1, __ATOMIC_RELEASE);
    sleep_ms(300);
    for (int i = 0; i < n; i++) {
        char buf[64];
        ssize_t r = recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT);

        fl->open_left += r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        close(fds[i]);
    }
    free(fds);
    __atomic_store_n(&fl->checked, 1, __ATOMIC_RELEASE);
}

/* The allgathers while the flood goes on, then stay (the root with them)
 * until it has been counted, and a barrier. */
static void body_flood(const job_t *job, int proc, void *ctx, result_t *res)
{
    uint64_t give_up = now_ns() + 10 * SEC;

    body_allgather(job, proc, ctx, res);
    while (!__atomic_load_n(&sh->flood.checked, __ATOMIC_ACQUIRE) && now_ns() < give_up) {
        sleep_ms(5);
    }
    if (res->status == WEFT_OK) {
        int st = ops->barrier(ctx, op_deadline());

        if (st != WEFT_OK) {
            fail(res, st, weft_last_error());
        }
    }
}

static int count_lines_with(const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    int n = 0;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, what) != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return n;
}

/* ---- tests ------------------------------------------------------------------- */

static job_t job_of(int nranks)
{
    job_t job = {.nranks = nranks, .nprocs = nranks, .deadline_s = 10, .kill_proc = -1};

    for (int p = 0; p < nranks; p++) {
        job.rank[p] = p;
    }
    return job;
}

static void run_allgather(int nranks)
{
    job_t job = job_of(nranks);
    int ws[MAX_PROCS];

    job.body = body_allgather;
    run_job(&job, ws);
    expect_all_ok(&job, ws);
}

TestSuite(bootstrap_tcp, .timeout = 40);

Test(bootstrap_tcp, allgather_1_rank)
{
    run_allgather(1);
}

Test(bootstrap_tcp, allgather_2_ranks)
{
    run_allgather(2);
}

Test(bootstrap_tcp, allgather_4_ranks)
{
    run_allgather(4);
}

Test(bootstrap_tcp, allgather_8_ranks)
{
    run_allgather(8);
}

Test(bootstrap_tcp, ipv6_loopback)
{
    weft_tcp_id_t id;
    job_t job = job_of(2);
    int ws[MAX_PROCS];

    if (weft__tcp_id_create("::1", &id) != WEFT_OK) {
        cr_skip_test("no IPv6 loopback here: %s", weft_last_error());
    }
    cr_assert_eq(id.bytes[6], 6);
    job.bind_addr = "::1";
    job.body = body_allgather;
    run_job(&job, ws);
    expect_all_ok(&job, ws);
}

Test(bootstrap_tcp, wrong_token_dropped)
{
    job_t job = job_of(2);
    int ws[MAX_PROCS];

    job.raw = raw_wrong_token;
    job.body = body_allgather;
    run_job(&job, ws);
    expect_all_ok(&job, ws);
}

Test(bootstrap_tcp, garbage_clients_dropped)
{
    job_t job = job_of(3);
    int ws[MAX_PROCS];

    job.raw = raw_garbage;
    job.body = body_allgather;
    run_job(&job, ws);
    expect_all_ok(&job, ws);
}

Test(bootstrap_tcp, missing_rank_times_out)
{
    job_t job = job_of(4);
    int ws[MAX_PROCS];

    job.nprocs = 3;
    job.rank[2] = 3; /* rank 2 never shows up */
    job.deadline_s = 1;
    run_job(&job, ws);
    expect_clean_exit(&job, ws);
    for (int p = 0; p < 3; p++) {
        result_t *res = &sh->res[p];

        cr_expect_eq(res->create_status, WEFT_ERR_TIMEOUT, "rank %d: %s", job.rank[p], res->msg);
        cr_expect(strstr(res->msg, "missing rank 2") != NULL, "rank %d: %s", job.rank[p], res->msg);
        cr_expect_lt(res->create_ns, 1500000000ull, "rank %d took %llu ns", job.rank[p],
                     (unsigned long long)res->create_ns);
    }
}

Test(bootstrap_tcp, duplicate_rank)
{
    job_t job = job_of(3);
    int ws[MAX_PROCS];

    job.rank[2] = 1; /* two rank 1, no rank 2 */
    job.deadline_s = 5;
    run_job(&job, ws);
    expect_clean_exit(&job, ws);
    for (int p = 0; p < 3; p++) {
        result_t *res = &sh->res[p];

        cr_expect_eq(res->create_status, WEFT_ERR_BOOTSTRAP, "process %d: %s", p, res->msg);
        cr_expect(strstr(res->msg, "rank 1 registered twice") != NULL, "process %d: %s", p,
                  res->msg);
        cr_expect_lt(res->create_ns, 3 * SEC);
    }
}

Test(bootstrap_tcp, duplicate_rank_after_start)
{
    job_t job = job_of(2);
    int ws[MAX_PROCS];

    job.nprocs = 3;
    job.rank[2] = 1;
    job.late[2] = 1;
    job.body = body_wait_late;
    run_job(&job, ws);
    expect_clean_exit(&job, ws);
    for (int p = 0; p < 2; p++) {
        cr_expect_eq(sh->res[p].create_status, WEFT_OK, "rank %d: %s", p, sh->res[p].msg);
        cr_expect_eq(sh->res[p].status, WEFT_OK, "rank %d: %s", p, sh->res[p].msg);
    }
    cr_expect_eq(sh->res[2].create_status, WEFT_ERR_BOOTSTRAP, "%s", sh->res[2].msg);
    cr_expect(strstr(sh->res[2].msg, "have all registered") != NULL, "%s", sh->res[2].msg);
}

Test(bootstrap_tcp, nranks_mismatch)
{
    job_t job = job_of(3);
    int ws[MAX_PROCS];

    job.nprocs = 2;
    job.nranks_of[1] = 2;
    job.deadline_s = 5;
    run_job(&job, ws);
    expect_clean_exit(&job, ws);
    for (int p = 0; p < 2; p++) {
        cr_expect_eq(sh->res[p].create_status, WEFT_ERR_BOOTSTRAP, "rank %d: %s", p,
                     sh->res[p].msg);
        cr_expect(strstr(sh->res[p].msg, "registered with nranks") != NULL, "rank %d: %s", p,
                  sh->res[p].msg);
    }
}

Test(bootstrap_tcp, stalled_rank_times_out)
{
    job_t job = job_of(3);
    int ws[MAX_PROCS];

    job.body = body_stall;
    run_job(&job, ws);
    expect_clean_exit(&job, ws);
    for (int p = 0; p < 2; p++) {
        result_t *res = &sh->res[p];

        cr_expect_eq(res->create_status, WEFT_OK);
        cr_expect_eq(res->after_failure[0], WEFT_ERR_TIMEOUT, "rank %d: %s", p, res->msg);
        cr_expect(strstr(res->msg, "allgather #1 timed out") != NULL, "rank %d: %s", p, res->msg);
        cr_expect(strstr(res->msg, "missing rank 2") != NULL, "rank %d: %s", p, res->msg);
        cr_expect_eq(res->after_failure[1], WEFT_ERR_BOOTSTRAP, "rank %d: barrier gave %d", p,
                     res->after_failure[1]);
    }
}

static void run_kill(int nranks, int victim)
{
    job_t job = job_of(nranks);
    int ws[MAX_PROCS];

    job.body = body_survive;
    job.kill_proc = victim;
    run_job(&job, ws);
    expect_clean_exit(&job, ws);
    for (int p = 0; p < nranks; p++) {
        result_t *res = &sh->res[p];

        if (p == victim) {
            continue;
        }
        cr_expect_eq(res->create_status, WEFT_OK, "rank %d: %s", p, res->msg);
        cr_expect_eq(res->status, WEFT_OK, "rank %d: %s", p, res->msg);
        cr_expect_eq(res->failed_rank, victim, "rank %d saw failed rank %d", p, res->failed_rank);
        cr_expect_lt(res->failed_seen_ns - sh->kill_ns, 2 * SEC,
                     "rank %d saw the failure %llu ms after the kill", p,
                     (unsigned long long)((res->failed_seen_ns - sh->kill_ns) / 1000000));
        cr_expect_eq(res->after_failure[0], WEFT_ERR_PEER_FAILED, "rank %d: allgather gave %d", p,
                     res->after_failure[0]);
        cr_expect_eq(res->after_failure[1], WEFT_ERR_PEER_FAILED, "rank %d: barrier gave %d", p,
                     res->after_failure[1]);
    }
}

Test(bootstrap_tcp, killed_rank_reported)
{
    run_kill(4, 2);
}

Test(bootstrap_tcp, killed_root_reported)
{
    run_kill(3, 0);
}

/* The id creator forks the other rank after creating the id (as Python's
 * multiprocessing does): the child inherits the root's bookkeeping, not its
 * thread, and must still join over TCP. */
Test(bootstrap_tcp, fork_after_create)
{
    pid_t parent = getpid(), pid;
    weft_tcp_id_t id;
    void *ctx = NULL;
    int st, ws = 0;

    cr_assert_eq(weft__tcp_id_create("127.0.0.1", &id), WEFT_OK, "%s", weft_last_error());
    fflush(NULL);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        child_start(parent, 0);
        st = weft__tcp_boot_create(&id, 2, 1, now_ns() + 5 * SEC, &ctx);
        if (st == WEFT_OK) {
            st = ops->barrier(ctx, op_deadline());
            ops->release(ctx);
        }
        _exit(st == WEFT_OK ? 0 : 10 - st);
    }
    st = weft__tcp_boot_create(&id, 2, 0, now_ns() + 5 * SEC, &ctx);
    cr_expect_eq(st, WEFT_OK, "%s", weft_last_error());
    if (st == WEFT_OK) {
        cr_expect_eq(ops->barrier(ctx, op_deadline()), WEFT_OK, "%s", weft_last_error());
        ops->release(ctx);
    }
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "rank 1 ended with 0x%x", ws);
}

/* ---- a fake root that misbehaves ------------------------------------------ */

typedef struct fake_root {
    int listen_fd;
    int mode;
    unsigned char token[16];
} fake_root_t;

static void *fake_root_main(void *arg)
{
    fake_root_t *fr = arg;
    unsigned char hello[40 + 72], hdr[40], junk[64];
    int fd = accept(fr->listen_fd, NULL, NULL);
    size_t got = 0;

    if (fd < 0) {
        return NULL;
    }
    while (got < sizeof(hello)) {
        ssize_t n = recv(fd, hello + got, sizeof(hello) - got, 0);

        if (n <= 0) {
            close(fd);
            return NULL;
        }
        got += (size_t)n;
    }
    memset(junk, 0x5a, sizeof(junk));
    switch (fr->mode) {
    case 0: /* garbage */
        send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
        break;
    case 1: /* a welcome cut short */
        raw_hdr(hdr, fr->token, 2, -1, 0, 8);
        send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL);
        send(fd, junk, 3, MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
        break;
    case 2: /* oversized */
        raw_hdr(hdr, fr->token, 5, -1, 0, 1ull << 30);
        send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL);
        break;
    default: /* another job's token */
        fr->token[0] ^= 1;
        raw_hdr(hdr, fr->token, 2, -1, 0, 8);
        send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL);
        send(fd, junk, 8, MSG_NOSIGNAL);
        break;
    }
    /* the rank must notice without the end of the stream: wait for its close */
    raw_closed_within(fd, 3000);
    close(fd);
    return NULL;
}

static void run_fake_root(int mode, const char *expect)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    fake_root_t fr = {.mode = mode};
    weft_tcp_id_t id = {{0}};
    pthread_t thread;
    void *ctx = NULL;
    uint64_t t0;
    int st;

    fr.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_eq(bind(fr.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fr.listen_fd, 4), 0);
    cr_assert_eq(getsockname(fr.listen_fd, (struct sockaddr *)&sa, &sl), 0);
    for (int i = 0; i < 16; i++) {
        fr.token[i] = (unsigned char)(i * 17 + 3);
    }
    /* the documented id layout */
    memcpy(id.bytes, "WFTI", 4);
    id.bytes[5] = 1;
    id.bytes[6] = 4;
    memcpy(id.bytes + 8, &sa.sin_port, 2);
    memcpy(id.bytes + 16, &sa.sin_addr, 4);
    memcpy(id.bytes + 32, fr.token, 16);
    cr_assert_eq(pthread_create(&thread, NULL, fake_root_main, &fr), 0);
    t0 = now_ns();
    st = weft__tcp_boot_create(&id, 2, 1, t0 + 5 * SEC, &ctx);
    cr_expect_eq(st, WEFT_ERR_BOOTSTRAP, "mode %d: %s", mode, weft_last_error());
    cr_expect(strstr(weft_last_error(), expect) != NULL, "mode %d: %s", mode, weft_last_error());
    cr_expect_lt(now_ns() - t0, 2 * SEC, "mode %d: the rank took too long to notice", mode);
    pthread_join(thread, NULL);
    close(fr.listen_fd);
}

Test(bootstrap_tcp, bad_root_messages)
{
    run_fake_root(0, "bad magic");
    run_fake_root(1, "truncated");
    run_fake_root(2, "64 MiB");
    run_fake_root(3, "wrong job token");
}

/* ---- ids ----------------------------------------------------------------------- */

Test(bootstrap_tcp, id_string_round_trip)
{
    weft_tcp_id_t id, back, lo;
    char s[WEFT_TCP_ID_STRLEN + 1], bad[WEFT_TCP_ID_STRLEN + 2];

    cr_assert_eq(weft__tcp_id_create("127.0.0.1", &id), WEFT_OK, "%s", weft_last_error());
    cr_expect_eq(memcmp(id.bytes, "WFTI", 4), 0);
    cr_expect_eq(id.bytes[6], 4);
    cr_expect_eq(memcmp(id.bytes + 16, "\x7f\0\0\x01", 4), 0);
    cr_assert_eq(weft__tcp_id_to_string(&id, s, sizeof(s)), WEFT_OK);
    cr_expect_eq(strlen(s), WEFT_TCP_ID_STRLEN);
    cr_assert_eq(weft__tcp_id_from_string(s, &back), WEFT_OK, "%s", weft_last_error());
    cr_expect_eq(memcmp(&id, &back, sizeof(id)), 0);

    /* upper case is accepted */
    for (char *c = s; *c; c++) {
        *c = (char)(*c >= 'a' && *c <= 'f' ? *c - 'a' + 'A' : *c);
    }
    cr_expect_eq(weft__tcp_id_from_string(s, &back), WEFT_OK);
    cr_expect_eq(memcmp(&id, &back, sizeof(id)), 0);

    cr_expect_eq(weft__tcp_id_to_string(&id, s, WEFT_TCP_ID_STRLEN), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__tcp_id_to_string(&id, s, sizeof(s)), WEFT_OK);
    memset(&back, 0x77, sizeof(back));
    cr_expect_eq(weft__tcp_id_from_string(NULL, &back), WEFT_ERR_INVALID_ARG);
    cr_expect_eq(weft__tcp_id_from_string("", &back), WEFT_ERR_INVALID_ARG);
    strcpy(bad, s);
    bad[WEFT_TCP_ID_STRLEN - 1] = '\0'; /* too short */
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    strcpy(bad, s);
    strcat(bad, "0"); /* too long */
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    strcpy(bad, s);
    bad[100] = 'g';
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    cr_expect(strstr(weft_last_error(), "offset 100") != NULL, "%s", weft_last_error());
    strcpy(bad, s);
    bad[0] = '0'; /* magic */
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    cr_expect(strstr(weft_last_error(), "magic") != NULL, "%s", weft_last_error());
    strcpy(bad, s);
    bad[11] = '9'; /* version 9 */
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    strcpy(bad, s);
    bad[13] = '5'; /* family 5 */
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    strcpy(bad, s);
    bad[200] = '1'; /* padding */
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    strcpy(bad, s);
    memset(bad + 16, '0', 4); /* port 0 */
    cr_expect_eq(weft__tcp_id_from_string(bad, &back), WEFT_ERR_INVALID_ARG);
    for (size_t i = 0; i < sizeof(back); i++) {
        cr_assert_eq(back.bytes[i], 0x77, "a rejected string wrote the id");
    }

    cr_expect_eq(weft__tcp_id_create("lo", &lo), WEFT_OK, "%s", weft_last_error());
    cr_expect_eq(memcmp(lo.bytes + 16, "\x7f\0\0\x01", 4), 0);
    cr_expect_neq(memcmp(lo.bytes + 32, id.bytes + 32, 16), 0, "two ids share a token");
    cr_expect_eq(weft__tcp_id_create("no-such-interface0", &lo), WEFT_ERR_INVALID_ARG);
}

/* Nobody listens at the id's address: connecting retries until the deadline. */
Test(bootstrap_tcp, unreachable_root_times_out)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    weft_tcp_id_t id = {{0}};
    void *ctx = NULL;
    uint64_t t0, took;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd); /* a port that refuses connections */
    memcpy(id.bytes, "WFTI", 4);
    id.bytes[5] = 1;
    id.bytes[6] = 4;
    memcpy(id.bytes + 8, &sa.sin_port, 2);
    memcpy(id.bytes + 16, &sa.sin_addr, 4);
    t0 = now_ns();
    cr_expect_eq(weft__tcp_boot_create(&id, 2, 1, t0 + SEC / 3, &ctx), WEFT_ERR_TIMEOUT, "%s",
                 weft_last_error());
    took = now_ns() - t0;
    cr_expect(strstr(weft_last_error(), "could not connect") != NULL, "%s", weft_last_error());
    cr_expect_geq(took, SEC / 3);
    cr_expect_lt(took, SEC, "took %llu ms", (unsigned long long)(took / 1000000));
}

Test(bootstrap_tcp, bad_create_arguments)
{
    weft_tcp_id_t id = {{0}};
    void *ctx = NULL;

    cr_expect_eq(weft__tcp_boot_create(&id, 2, 0, now_ns() + SEC, &ctx), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__tcp_id_create("127.0.0.1", &id), WEFT_OK);
    cr_expect_eq(weft__tcp_boot_create(&id, 2, 2, now_ns() + SEC, &ctx), WEFT_ERR_INVALID_ARG);
    cr_expect_eq(weft__tcp_boot_create(&id, 0, 0, now_ns() + SEC, &ctx), WEFT_ERR_INVALID_ARG);
    cr_expect_eq(weft__tcp_boot_create(&id, 2, -1, now_ns() + SEC, &ctx), WEFT_ERR_INVALID_ARG);
    cr_expect_eq(weft__tcp_boot_create(&id, WEFT_TCP_MAX_RANKS + 1, 0, now_ns() + SEC, &ctx),
                 WEFT_ERR_INVALID_ARG);
    cr_expect_null(ctx);
}

/* Thousands of idle and garbage connections from loopback while a job of 4
 * ranks forms and runs its allgathers: the root's process (with a limit of
 * ROOT_NOFILE descriptors, as an application may have) keeps at most 2 x
 * nranks (at least 64) unregistered connections, dropping the oldest; the
 * ranks register well within their deadline; the log says so in a few
 * lines, not one per connection. */
Test(bootstrap_tcp, connection_flood)
{
    job_t job = job_of(4);
    char log[64];
    int ws[MAX_PROCS], fd, lines;

    snprintf(log, sizeof(log), "/tmp/weft-test-flood.XXXXXX");
    fd = mkstemp(log);
    cr_assert_geq(fd, 0);
    close(fd);
    job.flood = flood_main;
    job.root_nofile = ROOT_NOFILE;
    job.root_log = log;
    job.deadline_s = 6;
    job.body = body_flood;
    run_job(&job, ws);
    lines = count_lines_with(log, "dropp");
    expect_all_ok(&job, ws);
    for (int p = 0; p < 4; p++) {
        cr_expect_lt(sh->res[p].create_ns, 3 * SEC, "rank %d took %llu ms to join", p,
                     (unsigned long long)(sh->res[p].create_ns / 1000000));
    }
    cr_expect(sh->flood.checked, "the flood was not counted");
    cr_expect_geq(sh->flood.opened, 2 * ROOT_NOFILE, "only %d connections made (%d refused)",
                  sh->flood.opened, sh->flood.refused);
    cr_expect_leq(sh->flood.open_left, 64 + 32,
                  "the root still held %d of the %d connections once the flood was over",
                  sh->flood.open_left, sh->flood.opened);
    cr_expect_leq(lines, 4, "%d lines about dropped connections in the root's log (%s)", lines,
                  log);
    cr_expect_geq(lines, 1, "the drops were not logged (%s)", log);
    if (lines <= 4 && lines >= 1) {
        unlink(log);
    }
}

/* The unspecified addresses would put no host in the id and listen on every
 * interface: refused, saying why. */
Test(bootstrap_tcp, unspecified_bind_address_refused)
{
    static const char *const any[] = {"0.0.0.0", "::", "0::0", "::ffff:0.0.0.0"};
    weft_tcp_id_t id;

    for (size_t i = 0; i < sizeof(any) / sizeof(any[0]); i++) {
        memset(&id, 0x5a, sizeof(id));
        cr_expect_eq(weft__tcp_id_create(any[i], &id), WEFT_ERR_INVALID_ARG, "%s accepted", any[i]);
        cr_expect(strstr(weft_last_error(), "unspecified address") != NULL, "%s: %s", any[i],
                  weft_last_error());
        cr_expect(strstr(weft_last_error(), any[i]) != NULL, "%s: %s", any[i], weft_last_error());
        cr_expect_eq(id.bytes[0], 0x5a, "%s: the id was written", any[i]);
    }
}

/* Without an address, the interface the root chose is logged (info). */
Test(bootstrap_tcp, default_interface_logged)
{
    char log[64];
    weft_tcp_id_t id;
    int fd, saved = dup(STDERR_FILENO);
    weft_log_level_t level = weft__log_level;

    snprintf(log, sizeof(log), "/tmp/weft-test-iface.XXXXXX");
    fd = mkstemp(log);
    cr_assert_geq(fd, 0);
    dup2(fd, STDERR_FILENO);
    weft__log_level = WEFT_LOG_INFO;
    cr_expect_eq(weft__tcp_id_create(NULL, &id), WEFT_OK, "%s", weft_last_error());
    weft__log_level = level;
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    cr_expect_eq(count_lines_with(log, "the root listens on") +
                     count_lines_with(log, "bootstrap: no up, non-loopback"),
                 1, "the chosen interface was not logged once (%s)", log);
    unlink(log);
}
