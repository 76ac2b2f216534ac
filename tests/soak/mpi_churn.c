/*
 * Communicator churn through MPI (issue 14): for a bounded time, every
 * cycle dups MPI_COMM_WORLD, splits the dup by rank parity, runs a checked
 * MPI_Allreduce on each and frees both. Run under mpirun with
 * LD_PRELOAD=libweft_mpi.so, the allreduces are weft's and every freed
 * communicator releases a weft communicator (tools/soak.sh checks the
 * interposer's statistics for that).
 *
 * Resources are sampled after every cycle: resident memory (VmRSS), open
 * file descriptors and /proc/self/maps lines. The first sample after the
 * warm-up (the first 20% of the time) is the baseline; a rank fails when
 * at the end its resident memory is more than 2 MiB above it, or it has
 * more descriptors or mappings, or a result was wrong. Each rank prints
 * its figures; rank 0 ends with "mpi_churn: PASS" or "mpi_churn: FAIL".
 *
 *   mpirun -np 2 -x LD_PRELOAD=.libs/libweft_mpi.so tests/soak/mpi_churn [SECONDS]
 */
#include <mpi.h>

#include "tests/soak/proc_sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RSS_LIMIT_KIB 2048
#define NVALS 64

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A checked allreduce on comm (n ranks, this one `me`): 0 when right. */
static int check_allreduce(MPI_Comm comm, long cycle, const char *name)
{
    int me, n;
    long in[NVALS], out[NVALS];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int k = 0; k < NVALS; k++) {
        in[k] = (long)(me + 1) * (k + 1) + cycle;
        out[k] = -1;
    }
    if (MPI_Allreduce(in, out, NVALS, MPI_LONG, MPI_SUM, comm) != MPI_SUCCESS) {
        printf("mpi_churn: cycle %ld: MPI_Allreduce on the %s failed\n", cycle, name);
        return 1;
    }
    for (int k = 0; k < NVALS; k++) {
        long want = (long)n * (n + 1) / 2 * (k + 1) + (long)n * cycle;

        if (out[k] != want) {
            printf("mpi_churn: cycle %ld: allreduce on the %s: element %d is %ld, expected %ld\n",
                   cycle, name, k, out[k], want);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 20;
    int rank, size, bad = 0, flags[2], warmed = 0;
    long cycles = 0, cycles_warm = 0;
    sample_t warm = {0}, end = {0};
    double start;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    start = now_s();
    for (;;) {
        MPI_Comm dup, half;

        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_split(dup, rank % 2, size - rank, &half);
        bad |= check_allreduce(dup, cycles, "dup");
        bad |= check_allreduce(half, cycles, "split");
        MPI_Comm_free(&half);
        MPI_Comm_free(&dup);
        cycles++;
        /* rank 0's clock decides for everyone; a failure ends every rank */
        double t = now_s() - start;

        flags[0] = rank == 0 && t >= seconds * 0.2;
        flags[1] = (rank == 0 && t >= seconds) || bad;
        MPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (flags[0] && !warmed) {
            warm = proc_sample();
            warmed = 1;
            cycles_warm = cycles;
        }
        if (warmed) {
            end = proc_sample();
        }
        if (flags[1]) {
            break;
        }
    }
    long drss = end.rss_kib - warm.rss_kib;
    long after = cycles - cycles_warm;

    printf("mpi_churn: rank %d: %ld cycles of 2 communicators (%ld after warm-up); rss %ld KiB "
           "after warm-up, %ld KiB at the end (%+ld KiB): %.1f KiB per 1000 comm cycles; fds %d "
           "-> %d; maps %d -> %d\n",
           rank, cycles, after, warm.rss_kib, end.rss_kib, drss,
           after > 0 ? (double)drss * 1000.0 / (double)(2 * after) : 0.0, warm.fds, end.fds,
           warm.maps, end.maps);
    if (!warmed || warm.rss_kib <= 0 || warm.fds <= 0 || warm.maps <= 0) {
        printf("mpi_churn: rank %d: FAIL: no warm-up sample\n", rank);
        bad = 1;
    }
    if (drss > RSS_LIMIT_KIB) {
        printf("mpi_churn: rank %d: FAIL: resident memory grew by %ld KiB after warm-up (limit "
               "%d KiB)\n",
               rank, drss, RSS_LIMIT_KIB);
        bad = 1;
    }
    if (end.fds > warm.fds) {
        printf("mpi_churn: rank %d: FAIL: %d more open file descriptors than after warm-up\n", rank,
               end.fds - warm.fds);
        bad = 1;
    }
    if (end.maps > warm.maps) {
        printf("mpi_churn: rank %d: FAIL: %d more mappings than after warm-up\n", rank,
               end.maps - warm.maps);
        bad = 1;
    }
    fflush(stdout);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_churn: %s: %ld cycles at %d ranks\n", bad ? "FAIL" : "PASS", cycles, size);
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
