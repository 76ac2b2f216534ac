/*
 * The ranks of tests/diag/test_doctor.sh, launched by mpirun (weft_comm_world
 * through PMIx). Each scenario makes the last rank misbehave, checks what
 * every rank's calls return and leaves the flight recorder dumps in
 * WEFT_DUMP_DIR for tools/weft_doctor:
 *
 *   hang      5 allreduces of 4 floats; the last rank skips the third, so
 *             the others wait for it in the fifth (seq 4) until WEFT_TIMEOUT
 *             and dump on the timeout; the last rank, done after four
 *             calls, waits until they have given up and calls
 *             weft_comm_dump.
 *   die       an allreduce, then the last rank kills itself (SIGKILL) and
 *             the others get WEFT_ERR_PEER_FAILED from the second and dump
 *             (mpirun --enable-recovery lets them go on).
 *   mismatch  3 allreduces; in the second (seq 1) the last rank uses max,
 *             the others sum: every rank gets WEFT_ERR_MISMATCH and dumps.
 *   split     the world split in two (ranks 0,2 and 1,3; the two get the
 *             same communicator id); in the second, the last rank skips the
 *             second of 3 allreduces: its partner times out, and every rank
 *             calls weft_comm_dump on its half once the partner gave up.
 *   block     2 allreduces, then the ranks but the last enter a third and
 *             write <dir>/ready.<rank> (their pid) first; the last rank
 *             waits for <dir>/go (the script creates it after it has sent
 *             SIGUSR1 to the others and read their dumps), then joins, and
 *             every call succeeds.
 *
 * Every allreduce result is checked element by element. Exit 0 when every
 * check passed; the first failed check is printed.
 */
#include <weft.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COUNT 4

static int rank, size;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "diag_app rank %d: check failed: %s: ", rank, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", weft_last_error());                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* An allreduce of every rank's rank + 1 (sum) with its result checked;
 * returns the call's status. */
static weft_status_t allreduce(weft_comm_t comm, weft_op_t op)
{
    float in[COUNT], out[COUNT];
    weft_status_t st;

    for (int i = 0; i < COUNT; i++) {
        in[i] = (float)(rank + 1);
        out[i] = -1.0f;
    }
    st = weft_allreduce(in, out, COUNT, WEFT_FLOAT32, op, comm);
    for (int i = 0; st == WEFT_OK && i < COUNT; i++) {
        CHECK(out[i] == (float)(size * (size + 1) / 2), "out[%d] = %g", i, (double)out[i]);
    }
    return st;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    nanosleep(&ts, NULL);
}

static void hang(weft_comm_t comm, double timeout)
{
    int last = rank == size - 1;
    int calls = last ? 4 : 5;

    for (int c = 0; c < calls; c++) {
        weft_status_t st = allreduce(comm, WEFT_SUM);

        if (c < 4) {
            CHECK(st == WEFT_OK, "call %d returned %d", c, st);
        } else {
            CHECK(st == WEFT_ERR_TIMEOUT, "call %d returned %d", c, st);
        }
    }
    if (last) {
        /* the others give up after their deadline; then this rank, which
         * never arrived, says what it did */
        sleep_s(timeout + 2.0);
        CHECK(weft_comm_dump(comm, stdout) == WEFT_OK, "weft_comm_dump");
    }
}

static void split(weft_comm_t world, double timeout)
{
    int skipper = rank == size - 1;
    weft_comm_t half;
    int hrank, hsize, world_rank = rank, world_size = size;

    CHECK(size == 4, "split needs 4 ranks, not %d", size);
    CHECK(weft_comm_split(world, rank % 2, rank, &half) == WEFT_OK, "weft_comm_split");
    CHECK(weft_comm_rank(half, &hrank) == WEFT_OK && weft_comm_size(half, &hsize) == WEFT_OK,
          "rank and size of the half");
    rank = hrank; /* allreduce checks the half's sum */
    size = hsize;
    for (int c = 0; c < 3; c++) {
        weft_status_t st;

        if (skipper && c == 1) {
            continue;
        }
        st = allreduce(half, WEFT_SUM);
        if (world_rank % 2 == 1 && c == 2 && !skipper) {
            CHECK(st == WEFT_ERR_TIMEOUT, "half call %d returned %d", c, st);
        } else {
            CHECK(st == WEFT_OK, "half call %d returned %d", c, st);
        }
    }
    if (world_rank % 2 == 0 || skipper) {
        sleep_s(timeout + 2.0); /* the skipper's partner has given up */
        CHECK(weft_comm_dump(half, stdout) == WEFT_OK, "weft_comm_dump");
    }
    rank = world_rank;
    size = world_size;
    weft_comm_destroy(half);
}

static void die(weft_comm_t comm)
{
    CHECK(allreduce(comm, WEFT_SUM) == WEFT_OK, "call 0");
    if (rank == size - 1) {
        raise(SIGKILL);
    }
    CHECK(allreduce(comm, WEFT_SUM) == WEFT_ERR_PEER_FAILED, "call 1");
    /* stay a moment: a survivor that exits before a slower one has seen
     * rank 3 gone is a second dead peer, and the slower one may name it */
    nanosleep(&(struct timespec){0, 500000000}, NULL);
}

static void mismatch(weft_comm_t comm)
{
    int last = rank == size - 1;

    CHECK(allreduce(comm, WEFT_SUM) == WEFT_OK, "call 0");
    CHECK(allreduce(comm, last ? WEFT_MAX : WEFT_SUM) == WEFT_ERR_MISMATCH, "call 1");
    CHECK(allreduce(comm, WEFT_SUM) == WEFT_ERR_MISMATCH, "call 2 (failed communicator)");
}

static void block(weft_comm_t comm, const char *dir)
{
    char path[4096];
    struct stat st;
    FILE *f;

    CHECK(allreduce(comm, WEFT_SUM) == WEFT_OK, "call 0");
    CHECK(allreduce(comm, WEFT_SUM) == WEFT_OK, "call 1");
    if (rank == size - 1) {
        snprintf(path, sizeof(path), "%s/go", dir);
        for (int i = 0; stat(path, &st) != 0; i++) {
            CHECK(i < 600, "no %s after 60 s", path);
            sleep_s(0.1);
        }
    } else {
        char tmp[4096];

        snprintf(tmp, sizeof(tmp), "%s/.ready.%d", dir, rank);
        snprintf(path, sizeof(path), "%s/ready.%d", dir, rank);
        f = fopen(tmp, "w");
        CHECK(f != NULL, "cannot create %s", tmp);
        fprintf(f, "%d\n", (int)getpid());
        CHECK(fclose(f) == 0 && rename(tmp, path) == 0, "cannot write %s", path);
    }
    CHECK(allreduce(comm, WEFT_SUM) == WEFT_OK, "call 2");
}

int main(int argc, char **argv)
{
    const char *dir = getenv("WEFT_DUMP_DIR");
    const char *timeout = getenv("WEFT_TIMEOUT");
    weft_comm_t comm;

    if (argc != 2 || dir == NULL || timeout == NULL) {
        fprintf(stderr,
                "usage: WEFT_DUMP_DIR=dir WEFT_TIMEOUT=s diag_app hang|split|mismatch|block\n");
        return 2;
    }
    CHECK(weft_init() == WEFT_OK, "weft_init");
    CHECK(weft_comm_world(&comm) == WEFT_OK, "weft_comm_world");
    CHECK(weft_comm_rank(comm, &rank) == WEFT_OK && weft_comm_size(comm, &size) == WEFT_OK,
          "rank and size");
    CHECK(size >= 2, "%d ranks (needs 2 or more)", size);
    if (strcmp(argv[1], "hang") == 0) {
        hang(comm, atof(timeout));
    } else if (strcmp(argv[1], "split") == 0) {
        split(comm, atof(timeout));
    } else if (strcmp(argv[1], "die") == 0) {
        die(comm);
    } else if (strcmp(argv[1], "mismatch") == 0) {
        mismatch(comm);
    } else if (strcmp(argv[1], "block") == 0) {
        block(comm, dir);
    } else {
        fprintf(stderr, "diag_app: unknown scenario '%s'\n", argv[1]);
        return 2;
    }
    weft_comm_destroy(comm);
    weft_finalize();
    return 0;
}
