/* The memory-copy bandwidth of weft_bench's %copy column (benchmarks/weft_bench.h). */
#include "benchmarks/weft_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COPY_MIN_BYTES (64 * MIB)
#define COPY_MAX_BYTES (256 * MIB)
#define COPY_NODE_BYTES (4096 * MIB) /* source + destination of a node's ranks, all at once */

/* Through a volatile pointer: nothing reads the destination, and the compiler
 * must not drop the copy for that. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

/* Best of COPY_REPS copies, in GB/s. With sync, every rank starts each copy together. */
static double copy_best(void *dst, const void *src, size_t bytes, int sync)
{
    double best = 0;

    for (int i = 0; i < COPY_REPS; i++) {
        if (sync) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        double t = MPI_Wtime();
        copy_fn(dst, src, bytes);
        t = MPI_Wtime() - t;
        if (t > 0 && (double)bytes / t > best) {
            best = (double)bytes / t;
        }
    }
    return best / 1e9;
}

/* Twice the last-level cache in whole MiB, within [COPY_MIN_BYTES, COPY_MAX_BYTES]: the same
 * on any number of ranks, so that %copy compares runs of different sizes. */
static size_t copy_size(void)
{
    size_t bytes = COPY_MIN_BYTES;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);

    if (llc > 0 && 2 * (size_t)llc > bytes) {
        bytes = (2 * (size_t)llc + MIB - 1) / MIB * MIB;
    }
#endif
    return bytes < COPY_MAX_BYTES ? bytes : COPY_MAX_BYTES;
}

/* Collective: every rank calls it; copy_p->alone is set on rank 0 only. */
void copy_measure(copy_bw_t *copy_p)
{
    MPI_Comm node;
    int node_size, node_rank, leader;
    unsigned long long bytes = copy_size(); /* rank 0's cache decides for all */

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_free(&node);
    leader = node_rank == 0;
    MPI_Allreduce(&node_size, &copy_p->node_ranks, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&leader, &copy_p->nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(&bytes, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    copy_p->alone_bytes = (size_t)bytes;
    copy_p->all_bytes = COPY_NODE_BYTES / 2 / (size_t)copy_p->node_ranks / MIB * MIB;
    if (copy_p->all_bytes > copy_p->alone_bytes || copy_p->all_bytes == 0) {
        copy_p->all_bytes = copy_p->alone_bytes;
    }

    size_t mine = rank == 0 ? copy_p->alone_bytes : copy_p->all_bytes;
    char *src = malloc(mine), *dst = malloc(mine);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "weft_bench: out of memory for the %zu-byte copy\n", mine);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Faulted in before the clock runs; and untouched source pages would all map
     * the zero page, which stays in cache. */
    memset(src, 1, mine);
    memset(dst, 0, mine);
    MPI_Barrier(MPI_COMM_WORLD);
    copy_p->alone = rank == 0 ? copy_best(dst, src, copy_p->alone_bytes, 0) : 0;
    /* the others wait for rank 0 in the first barrier of this call */
    double all = nranks > 1 ? copy_best(dst, src, copy_p->all_bytes, 1) : copy_p->alone;
    MPI_Allreduce(&all, &copy_p->all, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    free(src);
    free(dst);
}

double pct_copy(const copy_bw_t *copy, double busbw)
{
    return copy->alone > 0 ? 100.0 * busbw / copy->alone : 0;
}
