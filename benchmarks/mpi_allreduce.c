/*
 * weft_mpi_allreduce: an osu-style MPI_Allreduce latency loop, a plain MPI
 * program, to compare Open MPI with and without libweft_mpi.so preloaded
 * (benchmarks/mpi_interpose.sh runs both, alternating).
 *
 *   weft_mpi_allreduce [-b MIN] [-e MAX] [-i ITERS] [--user-op]
 *
 * Sizes in bytes (k/m suffixes), doubling from MIN to MAX; float sums.
 * Each size: warm-up, then the iterations between barriers; rank 0 prints
 * "bytes,us" with the slowest rank's mean time per call. --user-op sums
 * with an MPI_Op_create op instead of MPI_SUM, which the interposer
 * forwards to MPI: the cost it adds to a forwarded call.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);

    if (*end == 'k' || *end == 'K') {
        v <<= 10;
    } else if (*end == 'm' || *end == 'M') {
        v <<= 20;
    }
    return v;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) {
        ((float *)inout)[i] += ((float *)in)[i];
    }
}

int main(int argc, char **argv)
{
    size_t lo = 8, hi = 64 << 20;
    int iters = 0, rank, user = 0;
    MPI_Op op = MPI_SUM;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-b") == 0 && i + 1 < argc) {
            lo = parse_size(argv[++i]);
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
            hi = parse_size(argv[++i]);
        } else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--user-op") == 0) {
            user = 1;
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: weft_mpi_allreduce [-b MIN] [-e MAX] [-i ITERS] "
                                "[--user-op]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    if (lo < 4) {
        lo = 4;
    }
    if (user) {
        MPI_Op_create(user_sum, 1, &op);
    }
    float *s = malloc(hi), *r = malloc(hi);
    if (s == NULL || r == NULL) {
        fprintf(stderr, "weft_mpi_allreduce: no memory for %zu bytes\n", hi);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < hi / sizeof(float); i++) {
        s[i] = (float)(i % 7);
    }
    if (rank == 0) {
        printf("bytes,us\n");
    }
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
        int count = (int)(bytes / sizeof(float));
        int n = iters > 0 ? iters : bytes <= 65536 ? 1000 : bytes <= (4 << 20) ? 50 : 5;
        double t0, t, tmax;

        for (int i = 0; i < (n < 10 ? 1 : 10); i++) {
            MPI_Allreduce(s, r, count, MPI_FLOAT, op, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            MPI_Allreduce(s, r, count, MPI_FLOAT, op, MPI_COMM_WORLD);
        }
        t = (MPI_Wtime() - t0) / n * 1e6;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%zu,%.2f\n", bytes, tmax);
            fflush(stdout);
        }
    }
    if (user) {
        MPI_Op_free(&op);
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
