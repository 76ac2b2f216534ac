/*
 * weft_info --stats [ITERATIONS]: a short self-test of the collectives on
 * the world communicator, reported through weft_stats.
 *
 * Run by every rank of a job (mpirun -np N weft_info --stats) or alone (one
 * rank: the table's form, no transport). WEFT_STATS is turned on for this
 * process. Every rank runs allreduce, bcast, reduce_scatter, allgather and
 * alltoall at 8 B, 1 KiB, 64 KiB and 1 MiB (the whole vector, as nccl-tests
 * counts it) once each as warm-up, resets the counters, runs each
 * ITERATIONS times (default 20), then rank 0 prints its weft_stats_print
 * table and every rank's total time in these collectives (a rank much
 * slower than the others shows there). Exit status 0 when every call
 * succeeded on this rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft.h>

int weft_info_stats(int argc, char **argv);

enum { KINDS = 5, SIZES = 4 };

static const size_t sizes[SIZES] = {8, 1024, 64 * 1024, 1024 * 1024};

/* One call of collective k moving `bytes` in all (float32 elements). */
static weft_status_t call(int k, size_t bytes, float *a, float *b, int n, weft_comm_t comm)
{
    size_t all = bytes / sizeof(float), each = all / (size_t)n ? all / (size_t)n : 1;

    switch (k) {
    case 0:
        return weft_allreduce(a, b, all, WEFT_FLOAT32, WEFT_SUM, comm);
    case 1:
        return weft_bcast(a, all, WEFT_FLOAT32, 0, comm);
    case 2:
        return weft_reduce_scatter(a, b, each, WEFT_FLOAT32, WEFT_SUM, comm);
    case 3:
        return weft_allgather(a, b, each, WEFT_FLOAT32, comm);
    default:
        return weft_alltoall(a, b, each, WEFT_FLOAT32, comm);
    }
}

static weft_status_t sweep(weft_comm_t comm, int size, int iterations)
{
    size_t cap = sizes[SIZES - 1] / sizeof(float) * (size_t)size;
    float *a = calloc(cap, sizeof(float)), *b = calloc(cap, sizeof(float));
    weft_status_t status = a != NULL && b != NULL ? WEFT_OK : WEFT_ERR_NO_MEMORY;

    for (int k = 0; k < KINDS && status == WEFT_OK; k++) {
        for (int s = 0; s < SIZES && status == WEFT_OK; s++) {
            status = call(k, sizes[s], a, b, size, comm);
        }
    }
    if (status == WEFT_OK) {
        status = weft_stats_reset(comm); /* the warm-up and the set-up do not count */
    }
    for (int k = 0; k < KINDS && status == WEFT_OK; k++) {
        for (int s = 0; s < SIZES && status == WEFT_OK; s++) {
            for (int i = 0; i < iterations && status == WEFT_OK; i++) {
                status = call(k, sizes[s], a, b, size, comm);
            }
        }
    }
    free(a);
    free(b);
    return status;
}

/* This rank's total seconds in the counted collectives. */
static double total_seconds(weft_comm_t comm)
{
    weft_stats_entry_t e[64];
    size_t n = 0;
    double t = 0;

    if (weft_stats(comm, e, 64, &n) == WEFT_OK) {
        for (size_t i = 0; i < n && i < 64; i++) {
            t += e[i].seconds;
        }
    }
    return t;
}

/* side: a duplicate of comm, whose counters the gathering leaves alone */
static int report(weft_comm_t comm, weft_comm_t side, int rank, int size)
{
    double mine = total_seconds(comm), *all = calloc((size_t)size, sizeof(double));
    weft_status_t status;

    if (all == NULL) {
        fprintf(stderr, "weft_info --stats: rank %d: no memory\n", rank);
        return 1;
    }
    status = weft_allgather(&mine, all, 1, WEFT_FLOAT64, side);
    if (status == WEFT_OK && rank == 0) {
        weft_stats_print(comm, stdout);
        printf("# seconds in these collectives per rank:");
        for (int r = 0; r < size; r++) {
            printf(" %d:%.4f", r, all[r]);
        }
        printf("\n");
        fflush(stdout);
    }
    free(all);
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info --stats: rank %d: %s\n", rank, weft_last_error());
        return 1;
    }
    return 0;
}

int weft_info_stats(int argc, char **argv)
{
    int iterations = 20, rank = 0, size = 1, rc;
    weft_comm_t comm, side = NULL;
    weft_status_t status;
    char *end = NULL;

    if (argc > 1 || (argc == 1 && ((iterations = (int)strtol(argv[0], &end, 10)) < 1 ||
                                   *end != '\0' || iterations > 1000000))) {
        fprintf(stderr, "weft_info --stats: expected at most one argument, the iterations "
                        "(1 to 1000000)\n");
        return 2;
    }
    setenv("WEFT_STATS", "1", 1);
    if (weft_init() != WEFT_OK) {
        fprintf(stderr, "weft_info --stats: weft_init failed: %s\n", weft_last_error());
        return 1;
    }
    status = weft_comm_world(&comm);
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info --stats: weft_comm_world failed: %s\n", weft_last_error());
        weft_finalize();
        return 1;
    }
    weft_comm_rank(comm, &rank);
    weft_comm_size(comm, &size);
    status = weft_comm_dup(comm, &side);
    if (status == WEFT_OK) {
        status = sweep(comm, size, iterations);
    }
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info --stats: rank %d: %s\n", rank, weft_last_error());
        rc = 1;
    } else {
        rc = report(comm, side, rank, size);
    }
    if ((side != NULL && weft_comm_destroy(side) != WEFT_OK) ||
        weft_comm_destroy(comm) != WEFT_OK) {
        fprintf(stderr, "weft_info --stats: rank %d: weft_comm_destroy failed: %s\n", rank,
                weft_last_error());
        rc = 1;
    }
    weft_finalize();
    return rc;
}
