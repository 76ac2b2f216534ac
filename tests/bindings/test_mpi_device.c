/*
 * MPI collectives on device buffers (weft's emulated accelerator, from
 * weft_mem_alloc): through the interposer they take weft's device path (the
 * CUDA-aware MPI contract); without it Open MPI reads the same memory as
 * host memory. Either way every element is checked here; the interposer
 * test script compares both runs and the interposer's statistics. One
 * allreduce per count has its sendbuf in host memory and its recvbuf in
 * emu memory: weft refuses buffers of two memory types, so the interposer
 * hands exactly those calls to Open MPI (statistics: memory_type).
 * Prints "test_mpi_device: N ranks, C checks, F failed".
 */
#include <mpi.h>
#include <weft.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long checks, failed;

static void expect(int got, int want, const char *what, size_t i)
{
    checks++;
    if (got != want) {
        if (failed++ < 10) {
            fprintf(stderr, "test_mpi_device: %s[%zu] = %d, want %d\n", what, i, got, want);
        }
    }
}

static int *emu(size_t n)
{
    void *p;

    if (weft_mem_alloc(WEFT_MEM_EMU, n * sizeof(int), &p) != WEFT_OK) {
        fprintf(stderr, "test_mpi_device: weft_mem_alloc: %s\n", weft_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

int main(int argc, char **argv)
{
    int rank, size;
    const size_t counts[] = {1, 7, 1001, 300000};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        int *a = emu(n), *b = emu(n * (size_t)size);
        MPI_Request req;
        int sum;

        for (size_t i = 0; i < n; i++) {
            a[i] = rank + (int)(i % 11);
        }
        MPI_Allreduce(a, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++) {
            sum = size * (size - 1) / 2 + size * (int)(i % 11);
            expect(b[i], sum, "allreduce", i);
        }
        MPI_Iallreduce(MPI_IN_PLACE, a, (int)n, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++) {
            expect(a[i], size - 1 + (int)(i % 11), "iallreduce max in place", i);
        }
        for (size_t i = 0; i < n; i++) {
            a[i] = rank == size - 1 ? (int)(i * 3) : -1;
        }
        MPI_Bcast(a, (int)n, MPI_INT, size - 1, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++) {
            expect(a[i], (int)(i * 3), "bcast", i);
        }
        for (size_t i = 0; i < n; i++) {
            a[i] = rank * 1000 + (int)(i % 97);
        }
        MPI_Allgather(a, (int)n, MPI_INT, b, (int)n, MPI_INT, MPI_COMM_WORLD);
        for (size_t i = 0; i < n * (size_t)size; i++) {
            expect(b[i], (int)(i / n) * 1000 + (int)(i % n % 97), "allgather", i);
        }
        MPI_Reduce(a, b, (int)n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        for (size_t i = 0; rank == 0 && i < n; i++) {
            expect(b[i], 1000 * size * (size - 1) / 2 + size * (int)(i % 97), "reduce", i);
        }
        {
            int *h = malloc(n * sizeof(int));

            if (h == NULL) {
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            for (size_t i = 0; i < n; i++) {
                h[i] = rank + (int)(i % 13);
            }
            MPI_Allreduce(h, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            for (size_t i = 0; i < n; i++) {
                expect(b[i], size * (size - 1) / 2 + size * (int)(i % 13), "mixed allreduce", i);
            }
            free(h);
        }
        weft_mem_free(a);
        weft_mem_free(b);
    }
    long all_checks, all_failed;
    MPI_Reduce(&checks, &all_checks, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failed, &all_failed, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("test_mpi_device: %d ranks, %ld checks, %ld failed\n", size, all_checks, all_failed);
    }
    MPI_Finalize();
    return failed != 0;
}
