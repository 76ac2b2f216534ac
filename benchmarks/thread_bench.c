/*
 * weft_thread_bench: runs weft's collectives among in-process ranks
 * (threads connected by the loop transport) and prints, for each
 * collective, algorithm and size, the median time and whether every rank's
 * result was correct.
 *
 *   weft_thread_bench [-r ranks] [-b min_bytes] [-e max_bytes] [-n iterations]
 *
 * Times here measure weft's schedules and reductions plus in-process
 * copies; they are not network numbers.
 */
#include "coll/coll.h"
#include "runtime/thread_world.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bench {
    weft_coll_kind_t kind;
    const char *algo;
    size_t bytes; /* per-rank vector (allreduce) or per-rank block (others) */
    int iters;
    int nranks;
    pthread_barrier_t barrier;
    double *times; /* rank 0's per-iteration time */
    atomic_int wrong;
    atomic_int errors;
} bench_t;

static double now_us(void)
{
    return (double)weft__time_ns() / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* float data holding small integers: every correct sum is exact */
static float value(int rank, size_t i)
{
    return (float)((rank * 3 + (int)(i % 11)) % 7);
}

static void rank_body(weft_comm_t comm, int rank, void *arg)
{
    bench_t *b = arg;
    const int p = b->nranks;
    size_t n = b->bytes / sizeof(float);
    size_t in_n = b->kind == WEFT_COLL_REDUCE_SCATTER ? n * (size_t)p : n;
    size_t out_n = b->kind == WEFT_COLL_ALLGATHER ? n * (size_t)p : n;
    float *in = malloc(in_n * sizeof(float) + 1), *out = malloc(out_n * sizeof(float) + 1);

    if (in == NULL || out == NULL) {
        atomic_fetch_add(&b->errors, 1);
        free(in);
        free(out);
        return;
    }
    for (size_t i = 0; i < in_n; i++) {
        in[i] = value(rank, i);
    }
    for (int it = -1; it < b->iters; it++) { /* iteration -1 warms up */
        weft_status_t status;
        double t0;

        memset(out, 0, out_n * sizeof(float));
        pthread_barrier_wait(&b->barrier);
        t0 = now_us();
        if (b->kind == WEFT_COLL_ALLREDUCE) {
            status = weft_allreduce(in, out, n, WEFT_FLOAT32, WEFT_SUM, comm);
        } else if (b->kind == WEFT_COLL_REDUCE_SCATTER) {
            status = weft_reduce_scatter(in, out, n, WEFT_FLOAT32, WEFT_SUM, comm);
        } else {
            status = weft_allgather(in, out, n, WEFT_FLOAT32, comm);
        }
        pthread_barrier_wait(&b->barrier);
        if (rank == 0 && it >= 0) {
            b->times[it] = now_us() - t0;
        }
        if (status != WEFT_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, weft_last_error());
            atomic_fetch_add(&b->errors, 1);
            break;
        }
        for (size_t i = 0; i < out_n; i++) {
            float want = 0;

            if (b->kind == WEFT_COLL_ALLGATHER) {
                want = value((int)(i / n), i % n);
            } else {
                size_t gi = b->kind == WEFT_COLL_REDUCE_SCATTER ? (size_t)rank * n + i : i;
                for (int r = 0; r < p; r++) {
                    want += value(r, gi);
                }
            }
            if (out[i] != want) {
                atomic_fetch_add(&b->wrong, 1);
                break;
            }
        }
    }
    free(in);
    free(out);
}

static int run(weft_coll_kind_t kind, const char *algo, size_t bytes, int nranks, int iters)
{
    char rule[96];
    bench_t b = {.kind = kind, .algo = algo, .bytes = bytes, .iters = iters, .nranks = nranks};
    weft_thread_world_opts_t opts = {.nranks = nranks};
    double median;
    weft_status_t status;

    snprintf(rule, sizeof(rule), "%s:0-inf:%s", weft__coll_kind_name(kind), algo);
    if (weft__coll_tune_load(rule) != WEFT_OK) {
        fprintf(stderr, "%s\n", weft_last_error());
        return 1;
    }
    b.times = calloc((size_t)iters, sizeof(double));
    if (b.times == NULL) {
        return 1;
    }
    pthread_barrier_init(&b.barrier, NULL, (unsigned)nranks);
    status = weft__thread_world_run(&opts, rank_body, &b);
    pthread_barrier_destroy(&b.barrier);
    qsort(b.times, (size_t)iters, sizeof(double), cmp_double);
    median = b.times[iters / 2];
    printf("%-15s %-19s %6d %12zu %12.1f %10.3f  %s\n", weft__coll_kind_name(kind), algo, nranks,
           bytes, median, median > 0 ? (double)bytes / median / 1e3 : 0.0,
           status != WEFT_OK || b.errors ? "ERROR" : b.wrong ? "WRONG" : "ok");
    free(b.times);
    return status != WEFT_OK || b.errors || b.wrong;
}

int main(int argc, char **argv)
{
    static const struct {
        weft_coll_kind_t kind;
        const char *algo;
    } algos[] = {
        {WEFT_COLL_ALLREDUCE, "recursive_doubling"}, {WEFT_COLL_ALLREDUCE, "rabenseifner"},
        {WEFT_COLL_ALLREDUCE, "ring"},               {WEFT_COLL_REDUCE_SCATTER, "ring"},
        {WEFT_COLL_ALLGATHER, "ring"},
    };
    int nranks = 8, iters = 10, opt, bad = 0;
    size_t min_bytes = 8, max_bytes = 4 << 20;

    while ((opt = getopt(argc, argv, "r:b:e:n:h")) != -1) {
        switch (opt) {
        case 'r':
            nranks = atoi(optarg);
            break;
        case 'b':
            bad |= weft__parse_size(optarg, 0, &min_bytes) != WEFT_OK;
            break;
        case 'e':
            bad |= weft__parse_size(optarg, 0, &max_bytes) != WEFT_OK;
            break;
        case 'n':
            iters = atoi(optarg);
            break;
        default:
            bad = 1;
        }
    }
    if (bad || nranks < 1 || iters < 1 || min_bytes < 4 || min_bytes > max_bytes) {
        fprintf(stderr, "usage: weft_thread_bench [-r ranks] [-b min_bytes] [-e max_bytes] "
                        "[-n iterations]\n  sizes take k/m/g suffixes; min_bytes >= 4\n");
        return 2;
    }
    if (weft_init() != WEFT_OK) {
        fprintf(stderr, "weft_init: %s\n", weft_last_error());
        return 1;
    }
    printf("# weft in-process collectives: %d ranks (threads), float32 sum, median of %d\n",
           nranks, iters);
    printf("# bytes: per-rank vector (allreduce) or per-rank block (reduce_scatter, "
           "allgather)\n");
    printf("%-15s %-19s %6s %12s %12s %10s  %s\n", "collective", "algorithm", "ranks", "bytes",
           "time_us", "GB/s", "check");
    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
        for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 8) {
            bad |= run(algos[a].kind, algos[a].algo, bytes, nranks, iters);
        }
    }
    weft_finalize();
    printf("# %s\n", bad ? "some results were WRONG or failed" : "all results correct");
    return bad;
}
