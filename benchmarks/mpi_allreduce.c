/*
 * weft_mpi_allreduce: an osu-style MPI collective latency loop, a plain MPI
 * program, to compare Open MPI with and without libweft_mpi.so preloaded
 * (benchmarks/mpi_interpose.sh runs both, alternating).
 *
 *   weft_mpi_allreduce [-c COLL] [-b MIN] [-e MAX] [-i ITERS] [--osu] [--user-op]
 *
 * COLL: allreduce (the default), reduce, bcast, allgather, alltoall, gather,
 * scatter, reduce_scatter (MPI_Reduce_scatter_block), barrier. Sizes in bytes
 * (k/m suffixes), doubling from MIN to MAX, as osu-micro-benchmarks count
 * them: the vector of allreduce, reduce and bcast, one rank's block of the
 * others (reduce_scatter: its result block); float sums, root 0. Each size:
 * warm-up, then the iterations back to back between barriers, or with
 * --osu each call from a barrier (osu-micro-benchmarks' loop); rank 0 prints
 * "bytes,us" with the slowest rank's mean time per call. --user-op sums
 * with an MPI_Op_create op instead of MPI_SUM, which the interposer
 * forwards to MPI: the cost it adds to a forwarded call.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const colls[] = {"allreduce", "reduce", "bcast",   "allgather",
                                    "alltoall",  "gather", "scatter", "reduce_scatter",
                                    "barrier",   NULL};

enum { ALLREDUCE, REDUCE, BCAST, ALLGATHER, ALLTOALL, GATHER, SCATTER, REDUCE_SCATTER, BARRIER };

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

/* One call of coll on count floats (a block of count floats per rank for the block
 * collectives); s and r hold nranks blocks. */
static void call(int coll, float *s, float *r, int count, MPI_Op op)
{
    switch (coll) {
    case ALLREDUCE:
        MPI_Allreduce(s, r, count, MPI_FLOAT, op, MPI_COMM_WORLD);
        break;
    case REDUCE:
        MPI_Reduce(s, r, count, MPI_FLOAT, op, 0, MPI_COMM_WORLD);
        break;
    case BCAST:
        MPI_Bcast(s, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(s, count, MPI_FLOAT, r, count, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case ALLTOALL:
        MPI_Alltoall(s, count, MPI_FLOAT, r, count, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case GATHER:
        MPI_Gather(s, count, MPI_FLOAT, r, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case SCATTER:
        MPI_Scatter(s, count, MPI_FLOAT, r, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(s, r, count, MPI_FLOAT, op, MPI_COMM_WORLD);
        break;
    default:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
}

static void usage(int rank)
{
    if (rank == 0) {
        fprintf(stderr, "usage: weft_mpi_allreduce [-c COLL] [-b MIN] [-e MAX] [-i ITERS] [--osu] "
                        "[--user-op]\n  COLL: allreduce reduce bcast allgather alltoall gather "
                        "scatter reduce_scatter barrier\n");
    }
    MPI_Finalize();
}

int main(int argc, char **argv)
{
    size_t lo = 8, hi = 64 << 20, per;
    int iters = 0, rank, size, user = 0, osu = 0, coll = ALLREDUCE;
    MPI_Op op = MPI_SUM;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-b") == 0 && i + 1 < argc) {
            lo = parse_size(argv[++i]);
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
            hi = parse_size(argv[++i]);
        } else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            for (coll = 0; colls[coll] != NULL && strcmp(colls[coll], argv[i + 1]) != 0; coll++) {
            }
            if (colls[coll] == NULL) {
                usage(rank);
                return 2;
            }
            i++;
        } else if (strcmp(argv[i], "--osu") == 0) {
            osu = 1;
        } else if (strcmp(argv[i], "--user-op") == 0) {
            user = 1;
        } else {
            usage(rank);
            return 2;
        }
    }
    if (lo < 4) {
        lo = 4;
    }
    if (coll == BARRIER) {
        lo = hi = 4; /* one line: no data */
    }
    if (user) {
        MPI_Op_create(user_sum, 1, &op);
    }
    /* blocks of every rank where the collective has them */
    per =
        coll == ALLREDUCE || coll == REDUCE || coll == BCAST || coll == BARRIER ? 1 : (size_t)size;
    float *s = malloc(hi * per), *r = malloc(hi * per);
    if (s == NULL || r == NULL) {
        fprintf(stderr, "weft_mpi_allreduce: no memory for %zu bytes\n", hi * per);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < hi * per / sizeof(float); i++) {
        s[i] = (float)(i % 7);
    }
    if (rank == 0) {
        printf("bytes,us\n");
    }
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
        int count = (int)(bytes / sizeof(float));
        int n = iters > 0 ? iters : bytes <= 65536 ? 1000 : bytes <= (4 << 20) ? 50 : 5;
        double t0, t = 0, tmax;

        for (int i = 0; i < (n < 10 ? 1 : 10); i++) {
            call(coll, s, r, count, op);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (osu) {
            for (int i = 0; i < n; i++) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
                call(coll, s, r, count, op);
                t += MPI_Wtime() - t0;
            }
        } else {
            t0 = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                call(coll, s, r, count, op);
            }
            t = MPI_Wtime() - t0;
        }
        t = t / n * 1e6;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%zu,%.3f\n", bytes, tmax);
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
