/*
 * weft_bench: collective benchmark launched by mpirun (or srun).
 *
 *   mpirun -np 4 weft_bench [options] COLLECTIVE
 *   COLLECTIVE: allreduce allgather reduce_scatter bcast reduce gather scatter alltoall barrier
 *               allgatherv alltoallv reduce_scatter_v (the v forms with equal counts)
 *               pingpong (point-to-point, below)
 *
 *   -b BYTES  smallest message (default 8)      -e BYTES  largest (default 64m)
 *   -f N      size multiplication factor (2)    -n N      timed iterations (default:
 *             1000 up to 64 KiB, 100 up to 4 MiB, 20 above, as OSU does for small/large)
 *   -w N      warm-up iterations (default n/10) -d DTYPE  float32 (default), float64,
 *             int32, int64, int8, uint8, uint32, uint64, float16, bfloat16
 *   -o OP     sum (default), prod, min, max, avg, band, bor, bxor, land, lor, lxor
 *   --algo NAME   force weft's algorithm (sets WEFT_TUNE for this collective; "ordered"
 *                 also sets WEFT_REPRODUCIBLE=yes, the only mode it runs in)
 *   --check       validate every iteration's result (outside the timed region, once every
 *                 rank has left the call)
 *   --in-place    in-place operation (WEFT_IN_PLACE and MPI_IN_PLACE; allreduce,
 *                 allgather, reduce_scatter)
 *   --root R      root of bcast, reduce, gather, scatter (default 0)
 *   --format osu|nccl|csv   output columns (default osu)
 *   --vs-mpi      time the MPI library's own collective on the same buffers,
 *                 alternating with weft, and print both times and weft/MPI
 *   --help        print the options
 *   ... --then [options] COLLECTIVE ...   more runs in the same job, one after the other,
 *                 each with its own options (defaults again) and weft initialised anew
 *                 (so --algo applies to its own run); the exit status is 1 if any was wrong
 *
 * -b and -e are the bytes of one rank's vector (allreduce, bcast, reduce), one
 * rank's block (allgather, gather, scatter, alltoall: per destination) or one
 * rank's result block (reduce_scatter), as in the OSU micro-benchmarks; the osu
 * and csv formats print this size. Times are the mean per iteration of the
 * slowest rank.
 *
 * pingpong: rank r and rank r + n/2 (n ranks; with an odd n the last one
 * idles) exchange -b..-e bytes, the lower one sending first, weft_send and
 * weft_recv against MPI_Send and MPI_Recv; the time is the one-way latency,
 * half the round trip, as OSU's osu_latency gives it. With the ranks of a
 * host numbered together (mpirun's default), the pairs cross hosts.
 *
 * The nccl format prints nccl-tests' columns with nccl-tests' size: the bytes
 * of the vector for allreduce, bcast and reduce, of all ranks' blocks together
 * (n times -b..-e) for the others. algbw = size / time and busbw = algbw times
 * the factor of nccl-tests' PERFORMANCE.md: 2(n-1)/n for allreduce, 1 for
 * bcast and reduce, (n-1)/n for allgather, reduce_scatter, alltoall, gather,
 * scatter and the v forms (barrier moves no data: 0). GB are 10^9 bytes.
 *
 * Copy bandwidth, the hardware reference (nccl and csv formats only: it takes
 * about a second). Before weft starts, the job times memcpy of a buffer twice
 * the last-level cache (at least 64 MiB, at most 256 MiB), large enough that
 * memcpy streams past the cache. The rate is bytes copied per second, best of
 * 3; the memory itself moves twice that, as each byte is read once and written
 * once. It is measured on rank 0 while the other ranks wait, then on every
 * rank at once (the slowest rank's rate; buffers shrink if a node would hold
 * more than 4 GiB of them), since the copies of one node share its memory.
 *
 * The %copy column is busbw as a percentage of the one-rank-alone rate.
 * busbw is what the busiest rank moves per second, and a byte moved between
 * ranks costs a shared-memory transport at least one copy, so what one rank
 * copies alone is the natural reference the hardware sets. It depends on the
 * machine only, not on the number of ranks nor on oversubscription, so %copy
 * compares runs of any size on one machine. When busbw nears the all-ranks
 * rate instead, the shared memory bandwidth, not weft, is the limit. Messages
 * that fit in cache can go past 100%.
 */
#include "benchmarks/weft_bench.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const coll_names[] = {"allreduce", "allgather", "reduce_scatter",
                                         "bcast",     "reduce",    "gather",
                                         "scatter",   "alltoall",  "barrier",
                                         "allgatherv", "alltoallv", "reduce_scatter_v",
                                         "pingpong"};

int rank, nranks;

static void die(const char *fmt, const char *arg)
{
    if (rank == 0) {
        fprintf(stderr, "weft_bench: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n");
    }
    MPI_Finalize();
    exit(2);
}

static size_t parse_bytes(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);

    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end != '\0' || end == s) {
        die("'%s' is not a size", s);
    }
    return (size_t)v;
}

static MPI_Datatype mpi_dtype(weft_dtype_t d)
{
    switch (d) {
    case WEFT_INT8: return MPI_INT8_T;
    case WEFT_UINT8: return MPI_UINT8_T;
    case WEFT_INT32: return MPI_INT32_T;
    case WEFT_UINT32: return MPI_UINT32_T;
    case WEFT_INT64: return MPI_INT64_T;
    case WEFT_UINT64: return MPI_UINT64_T;
    case WEFT_FLOAT32: return MPI_FLOAT;
    case WEFT_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL; /* half types: MPI has none */
    }
}

static MPI_Op mpi_op(weft_op_t o)
{
    switch (o) {
    case WEFT_SUM: return MPI_SUM;
    case WEFT_PROD: return MPI_PROD;
    case WEFT_MIN: return MPI_MIN;
    case WEFT_MAX: return MPI_MAX;
    case WEFT_BAND: return MPI_BAND;
    case WEFT_BOR: return MPI_BOR;
    case WEFT_BXOR: return MPI_BXOR;
    case WEFT_LAND: return MPI_LAND;
    case WEFT_LOR: return MPI_LOR;
    case WEFT_LXOR: return MPI_LXOR;
    default: return MPI_OP_NULL; /* avg */
    }
}

typedef struct bufs {
    void *send, *recv; /* host memory: filled and checked here */
    size_t send_count, recv_count, count; /* count: the collective's count argument */
    void *dsend, *drecv; /* device copies (-d emu|cuda), else send and recv */
    size_t send_bytes, recv_bytes;
} bufs_t;

static weft_stream_t stream; /* -d emu|cuda, --enqueue */

/* The application's work between iterations: a CPU-bound loop over a small
 * array (in cache) for us microseconds. */
volatile double compute_sink; /* keeps the loop's result alive */

static void compute(int us)
{
    double acc[64] = {0};
    double end = MPI_Wtime() + us * 1e-6;

    if (us <= 0) {
        return;
    }
    do {
        for (int k = 0; k < 4096; k++) {
            acc[k & 63] = acc[k & 63] * 0.999 + (double)k;
        }
    } while (MPI_Wtime() < end);
    compute_sink = acc[7];
}

static void weft_check(weft_status_t status, const char *what)
{
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_bench rank %d: %s: %s\n", rank, what, weft_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Host buffers to the device ones (from_host) or back, through the stream. */
static void sync_device(const options_t *o, bufs_t *b, int from_host, int send, int recv)
{
    if (o->mem == WEFT_MEM_HOST) {
        return;
    }
    if (send && b->send_bytes > 0) {
        weft_check(from_host ? weft_memcpy_async(b->dsend, b->send, b->send_bytes, stream)
                             : weft_memcpy_async(b->send, b->dsend, b->send_bytes, stream),
                   "memcpy");
    }
    if (recv && b->recv_bytes > 0) {
        weft_check(from_host ? weft_memcpy_async(b->drecv, b->recv, b->recv_bytes, stream)
                             : weft_memcpy_async(b->recv, b->drecv, b->recv_bytes, stream),
                   "memcpy");
    }
    weft_check(weft_stream_synchronize(stream), "weft_stream_synchronize");
}

/* In place, the input lives in recv: allreduce the vector, allgather this
 * rank's slot, reduce_scatter the whole input (recv is then send-sized). */
static void fill(const options_t *o, bufs_t *b, int iter)
{
    size_t es = weft_dtype_size(o->dtype);

    memset(b->recv, 0, (o->in_place && o->coll == COLL_REDUCE_SCATTER ? b->send_count
                                                                        : b->recv_count) * es);
    for (size_t i = 0; i < b->send_count; i++) {
        store(o->dtype, b->send, i, value(rank, i, iter));
    }
    if (o->coll == COLL_BCAST && rank == o->root) {
        memcpy(b->recv, b->send, b->recv_count * es);
    }
    if (o->in_place) {
        size_t off = o->coll == COLL_ALLGATHER ? (size_t)rank * b->count * es : 0;
        memcpy((char *)b->recv + off, b->send, b->send_count * es);
    }
}

static long check(const options_t *o, const bufs_t *b, int iter)
{
    size_t es = weft_dtype_size(o->dtype);
    unsigned char want[8];
    long wrong = 0;

    for (size_t i = 0; i < b->recv_count; i++) {
        expected(o, i, b->count, iter, want);
        wrong += memcmp((char *)b->recv + i * es, want, es) != 0;
    }
    return wrong;
}

static size_t *vcounts, *vdispls; /* equal counts for the v forms */
static int *mcounts, *mdispls;

static void set_vectors(size_t count)
{
    for (int r = 0; r < nranks; r++) {
        vcounts[r] = count;
        vdispls[r] = (size_t)r * count;
        mcounts[r] = (int)count;
        mdispls[r] = r * (int)count;
    }
}

static weft_status_t run_enqueue(const options_t *o, bufs_t *b, weft_comm_t comm)
{
    const void *send = o->in_place ? WEFT_IN_PLACE : b->dsend;
    void *recv = b->drecv;

    switch (o->coll) {
    case COLL_ALLREDUCE:
        return weft_allreduce_enqueue(send, recv, b->count, o->dtype, o->op, comm, stream);
    case COLL_ALLGATHER:
        return weft_allgather_enqueue(send, recv, b->count, o->dtype, comm, stream);
    case COLL_REDUCE_SCATTER:
        return weft_reduce_scatter_enqueue(send, recv, b->count, o->dtype, o->op, comm, stream);
    case COLL_BCAST:
        return weft_bcast_enqueue(recv, b->count, o->dtype, o->root, comm, stream);
    case COLL_REDUCE:
        return weft_reduce_enqueue(send, recv, b->count, o->dtype, o->op, o->root, comm, stream);
    case COLL_GATHER:
        return weft_gather_enqueue(send, recv, b->count, o->dtype, o->root, comm, stream);
    case COLL_SCATTER:
        return weft_scatter_enqueue(send, recv, b->count, o->dtype, o->root, comm, stream);
    case COLL_ALLTOALL:
        return weft_alltoall_enqueue(send, recv, b->count, o->dtype, comm, stream);
    case COLL_ALLGATHERV:
        return weft_allgatherv_enqueue(send, recv, b->count, vcounts, vdispls, o->dtype, comm,
                                       stream);
    case COLL_ALLTOALLV:
        return weft_alltoallv_enqueue(send, recv, vcounts, vdispls, vcounts, vdispls, o->dtype,
                                      comm, stream);
    case COLL_REDUCE_SCATTER_V:
        return weft_reduce_scatter_v_enqueue(send, recv, vcounts, o->dtype, o->op, comm, stream);
    default:
        return weft_barrier_enqueue(comm, stream);
    }
}

static weft_status_t run_weft(const options_t *o, bufs_t *b, weft_comm_t comm)
{
    const void *send = o->in_place ? WEFT_IN_PLACE : b->dsend;
    weft_status_t status;

    if (o->enqueue) {
        status = WEFT_OK;
        for (int k = 0; k < o->chain && status == WEFT_OK; k++) {
            status = run_enqueue(o, b, comm);
        }
        return status == WEFT_OK ? weft_stream_synchronize(stream) : status;
    }
    b = &(bufs_t){.recv = b->drecv, .count = b->count};
    switch (o->coll) {
    case COLL_ALLREDUCE:
        return weft_allreduce(send, b->recv, b->count, o->dtype, o->op, comm);
    case COLL_ALLGATHER:
        return weft_allgather(send, b->recv, b->count, o->dtype, comm);
    case COLL_REDUCE_SCATTER:
        return weft_reduce_scatter(send, b->recv, b->count, o->dtype, o->op, comm);
    case COLL_BCAST:
        return weft_bcast(b->recv, b->count, o->dtype, o->root, comm);
    case COLL_REDUCE:
        return weft_reduce(send, b->recv, b->count, o->dtype, o->op, o->root, comm);
    case COLL_GATHER:
        return weft_gather(send, b->recv, b->count, o->dtype, o->root, comm);
    case COLL_SCATTER:
        return weft_scatter(send, b->recv, b->count, o->dtype, o->root, comm);
    case COLL_ALLTOALL:
        return weft_alltoall(send, b->recv, b->count, o->dtype, comm);
    case COLL_ALLGATHERV:
        return weft_allgatherv(send, b->recv, b->count, vcounts, vdispls, o->dtype, comm);
    case COLL_ALLTOALLV:
        return weft_alltoallv(send, b->recv, vcounts, vdispls, vcounts, vdispls, o->dtype, comm);
    case COLL_REDUCE_SCATTER_V:
        return weft_reduce_scatter_v(send, b->recv, vcounts, o->dtype, o->op, comm);
    case COLL_PINGPONG: {
        const int peer = pingpong_peer();
        weft_status_t status = WEFT_OK;

        if (peer >= 0 && rank < peer) {
            status = weft_send(send, b->count, o->dtype, peer, 7, comm);
        }
        if (peer >= 0 && status == WEFT_OK) {
            status = weft_recv(b->recv, b->count, o->dtype, peer, 7, comm);
        }
        if (peer >= 0 && rank > peer && status == WEFT_OK) {
            status = weft_send(send, b->count, o->dtype, peer, 7, comm);
        }
        return status;
    }
    default:
        return weft_barrier(comm);
    }
}

static int run_mpi(const options_t *o, bufs_t *b)
{
    MPI_Datatype dt = mpi_dtype(o->dtype);
    const void *send = o->in_place ? MPI_IN_PLACE : b->send;

    switch (o->coll) {
    case COLL_ALLREDUCE:
        return MPI_Allreduce(send, b->recv, (int)b->count, dt, mpi_op(o->op), MPI_COMM_WORLD);
    case COLL_ALLGATHER:
        return MPI_Allgather(send, (int)b->count, dt, b->recv, (int)b->count, dt,
                             MPI_COMM_WORLD);
    case COLL_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(send, b->recv, (int)b->count, dt, mpi_op(o->op),
                                        MPI_COMM_WORLD);
    case COLL_BCAST:
        return MPI_Bcast(b->recv, (int)b->count, dt, o->root, MPI_COMM_WORLD);
    case COLL_REDUCE:
        return MPI_Reduce(send, b->recv, (int)b->count, dt, mpi_op(o->op), o->root,
                          MPI_COMM_WORLD);
    case COLL_GATHER:
        return MPI_Gather(send, (int)b->count, dt, b->recv, (int)b->count, dt, o->root,
                          MPI_COMM_WORLD);
    case COLL_SCATTER:
        return MPI_Scatter(send, (int)b->count, dt, b->recv, (int)b->count, dt, o->root,
                           MPI_COMM_WORLD);
    case COLL_ALLTOALL:
        return MPI_Alltoall(send, (int)b->count, dt, b->recv, (int)b->count, dt, MPI_COMM_WORLD);
    case COLL_ALLGATHERV:
        return MPI_Allgatherv(send, (int)b->count, dt, b->recv, mcounts, mdispls, dt,
                              MPI_COMM_WORLD);
    case COLL_ALLTOALLV:
        return MPI_Alltoallv(send, mcounts, mdispls, dt, b->recv, mcounts, mdispls, dt,
                             MPI_COMM_WORLD);
    case COLL_REDUCE_SCATTER_V:
        return MPI_Reduce_scatter(send, b->recv, mcounts, dt, mpi_op(o->op), MPI_COMM_WORLD);
    case COLL_PINGPONG: {
        const int peer = pingpong_peer();
        int err = MPI_SUCCESS;

        if (peer >= 0 && rank < peer) {
            err = MPI_Send(send, (int)b->count, dt, peer, 7, MPI_COMM_WORLD);
        }
        if (peer >= 0 && err == MPI_SUCCESS) {
            err = MPI_Recv(b->recv, (int)b->count, dt, peer, 7, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
        }
        if (peer >= 0 && rank > peer && err == MPI_SUCCESS) {
            err = MPI_Send(send, (int)b->count, dt, peer, 7, MPI_COMM_WORLD);
        }
        return err;
    }
    default:
        return MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* nccl-tests' bus bandwidth factors (PERFORMANCE.md); the v forms follow their plain form */
static double bus_factor(coll_t c)
{
    switch (c) {
    case COLL_ALLREDUCE:
        return 2.0 * (nranks - 1) / nranks;
    case COLL_BCAST:
    case COLL_REDUCE:
    case COLL_PINGPONG:
        return 1.0;
    case COLL_BARRIER:
        return 0.0;
    default:
        return (double)(nranks - 1) / nranks;
    }
}

static const char *bus_factor_name(coll_t c)
{
    switch (c) {
    case COLL_ALLREDUCE:
        return "2(n-1)/n";
    case COLL_BCAST:
    case COLL_REDUCE:
    case COLL_PINGPONG:
        return "1";
    default:
        return "(n-1)/n";
    }
}

/* nccl-tests' size: the whole vector, or all ranks' blocks together */
static size_t nccl_size(coll_t c, size_t bytes)
{
    return c == COLL_ALLREDUCE || c == COLL_BCAST || c == COLL_REDUCE || c == COLL_PINGPONG
               ? bytes
               : bytes * (size_t)nranks;
}

static const char usage[] =
    "usage: mpirun -np N weft_bench [options] COLLECTIVE\n"
    "  COLLECTIVE: allreduce (default) allgather reduce_scatter bcast reduce gather scatter\n"
    "              alltoall barrier allgatherv alltoallv reduce_scatter_v (v: equal counts)\n"
    "              pingpong (weft_send/weft_recv between ranks r and r + n/2; one-way\n"
    "              latency: half the round trip)\n"
    "  -b BYTES     smallest message, k/m/g suffixes (default 8)\n"
    "  -e BYTES     largest message (default 64m); -b/-e: one rank's vector or block\n"
    "  -f N         size multiplication factor (default 2)\n"
    "  -n N         timed iterations (default 1000 up to 64 KiB, 100 up to 4 MiB, 20 above)\n"
    "  -w N         warm-up iterations (default n/10)\n"
    "  -d DTYPE     float32 (default) float64 int32 int64 int8 uint8 uint32 uint64 float16\n"
    "               bfloat16 float8_e4m3 float8_e5m2 (no --vs-mpi for the 16- and 8-bit floats)\n"
    "  -d MEM       host (default) emu cuda: where weft's buffers live; the MPI side\n"
    "               (--vs-mpi) then copies to host memory, calls MPI and copies back,\n"
    "               as a CUDA-aware MPI without device support does; timed with the copies\n"
    "  --compute-us N  compute N us (a CPU-bound loop) right after every call, weft's\n"
    "               and MPI's alike, as an application does between collectives\n"
    "  --enqueue    time weft's stream-ordered form (_enqueue, then synchronize the stream;\n"
    "               host buffers use an emu stream)\n"
    "  --chain N    with --enqueue: N collectives enqueued back to back on the same buffers,\n"
    "               then one synchronize; the time shown is per collective (default 1)\n"
    "  -o OP        sum (default) prod min max avg band bor bxor land lor lxor\n"
    "  --algo NAME  force weft's algorithm for this collective (ordered: with\n"
    "               WEFT_REPRODUCIBLE=yes, the only mode it runs in)\n"
    "  --check      validate every iteration's result\n"
    "  --in-place   in-place operation (allreduce, allgather, reduce_scatter)\n"
    "  --root R     root of bcast, reduce, gather, scatter (default 0)\n"
    "  --format osu|nccl|csv\n"
    "               osu (default): size, time; nccl: nccl-tests' size, count, type, redop,\n"
    "               root, time, algbw, busbw, %copy, #wrong; csv: one line per size.\n"
    "               nccl and csv first time memcpy on one rank alone and on all ranks at\n"
    "               once (bytes copied per second); %copy is busbw over the one-rank rate\n"
    "  --vs-mpi     also time the MPI library's collective on the same buffers\n"
    "  --loop       time the calls back to back on buffers filled once (5 rounds of the\n"
    "               iterations, weft's and MPI's alternating; the slowest rank's total):\n"
    "               what an application that reuses its buffers sees, each call free to\n"
    "               start before the others' previous one ended. The default times each\n"
    "               call from a barrier on freshly filled buffers (OSU's way). Not with\n"
    "               --check, --in-place, --compute-us\n"
    "  --help       this text\n"
    "  ... --then [options] COLLECTIVE  another run in the same job with its own options\n"
    "               (weft finalised and initialised again between runs)";

static void parse(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        {"algo", required_argument, NULL, 'A'}, {"check", no_argument, NULL, 'C'},
        {"format", required_argument, NULL, 'F'}, {"vs-mpi", no_argument, NULL, 'V'},
        {"in-place", no_argument, NULL, 'I'}, {"root", required_argument, NULL, 'R'},
        {"enqueue", no_argument, NULL, 'Q'}, {"compute-us", required_argument, NULL, 'U'},
        {"loop", no_argument, NULL, 'L'},     {"help", no_argument, NULL, 'h'},
        {"chain", required_argument, NULL, 'N'},
        {NULL, 0, NULL, 0}};
    int c;

    *o = (options_t){COLL_ALLREDUCE, 8, 64u << 20, 2, -1, -1, WEFT_FLOAT32, WEFT_SUM, NULL,
                     0, 0, 0, 0, FORMAT_OSU, WEFT_MEM_HOST, 0, 0, 0, 1};
    while ((c = getopt_long(argc, argv, "b:e:f:n:w:d:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b': o->min_bytes = parse_bytes(optarg); break;
        case 'e': o->max_bytes = parse_bytes(optarg); break;
        case 'f': o->factor = atoi(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'd': {
            int d;
            for (d = 0; d < WEFT_DTYPE_COUNT && strcmp(weft_dtype_name(d), optarg); d++) {
            }
            if (d < WEFT_DTYPE_COUNT) {
                o->dtype = (weft_dtype_t)d;
                break;
            }
            for (d = 0; d <= WEFT_MEM_EMU && strcmp(weft_memtype_name(d), optarg); d++) {
            }
            if (d > WEFT_MEM_EMU) {
                die("unknown dtype or memory type '%s'", optarg);
            }
            o->mem = (weft_memtype_t)d;
            break;
        }
        case 'Q': o->enqueue = 1; break;
        case 'N': o->chain = atoi(optarg); break;
        case 'U': o->compute_us = atoi(optarg); break;
        case 'o': {
            int p;
            for (p = 0; p < WEFT_OP_COUNT && strcmp(weft_op_name(p), optarg); p++) {
            }
            if (p == WEFT_OP_COUNT) {
                die("unknown op '%s'", optarg);
            }
            o->op = (weft_op_t)p;
            break;
        }
        case 'A': o->algo = optarg; break;
        case 'C': o->check = 1; break;
        case 'V': o->vs_mpi = 1; break;
        case 'L': o->loop = 1; break;
        case 'I': o->in_place = 1; break;
        case 'R': o->root = atoi(optarg); break;
        case 'F':
            o->format = !strcmp(optarg, "osu")    ? FORMAT_OSU
                        : !strcmp(optarg, "nccl") ? FORMAT_NCCL
                        : !strcmp(optarg, "csv")  ? FORMAT_CSV
                                                  : (die("unknown format '%s'", optarg), 0);
            break;
        case 'h':
            if (rank == 0) {
                printf("%s\n", usage);
            }
            MPI_Finalize();
            exit(0);
        default:
            die("%s", usage);
        }
    }
    if (optind < argc) {
        int k;
        for (k = 0; k < COLL_COUNT && strcmp(coll_names[k], argv[optind]); k++) {
        }
        if (k == COLL_COUNT) {
            die("unknown collective '%s'", argv[optind]);
        }
        o->coll = (coll_t)k;
    }
    if (o->compute_us < 0) {
        die("%s", "--compute-us takes a number of microseconds >= 0");
    }
    if (o->loop && (o->check || o->in_place || o->compute_us > 0)) {
        die("--loop: %s", "not with --check, --in-place or --compute-us (one fill for every call)");
    }
    if (o->factor < 2 || o->iters == 0 || o->iters < -1 || o->warmup < -1 ||
        o->min_bytes == 0 || o->min_bytes > o->max_bytes) {
        die("%s", "bad -f/-n/-w/-b/-e (-b must be at least 1 byte)");
    }
    if (o->root < 0 || o->root >= nranks) {
        char text[32];

        snprintf(text, sizeof(text), "%d", o->root);
        die("--root %s is not a rank of this job", text);
    }
    if (o->in_place && o->coll > COLL_REDUCE_SCATTER) {
        die("--in-place: only for allreduce, allgather, reduce_scatter (not %s)",
            coll_names[o->coll]);
    }
    if (o->chain < 1 || (o->chain > 1 && !o->enqueue)) {
        die("%s", "--chain takes a number >= 1, and more than 1 only with --enqueue");
    }
    if (o->coll == COLL_PINGPONG && o->enqueue) {
        die("--enqueue: %s", "not for pingpong (weft_send_enqueue is not timed here)");
    }
    if (o->vs_mpi && (mpi_dtype(o->dtype) == MPI_DATATYPE_NULL || mpi_op(o->op) == MPI_OP_NULL)) {
        die("--vs-mpi: MPI has no equivalent of this dtype/op (%s)", "float16, bfloat16, avg");
    }
}

/* One size's results, as rank 0 prints them. */
typedef struct row {
    size_t bytes; /* -b..-e */
    size_t total; /* nccl-tests' size */
    size_t count; /* the collective's count argument */
    double us;    /* weft's time */
    double mus;   /* MPI's time (--vs-mpi) */
    long wrong;   /* elements, summed over ranks; -1 without --check */
} row_t;

static void print_row(const options_t *o, const copy_bw_t *copy, const row_t *r)
{
    size_t es = weft_dtype_size(o->dtype);
    double algbw = r->us > 0 ? (double)r->total / r->us / 1e3 : 0; /* GB/s */
    double busbw = algbw * bus_factor(o->coll);
    double mbusbw = r->mus > 0 ? (double)r->total / r->mus / 1e3 * bus_factor(o->coll) : 0;
    coll_t c = plain(o->coll);
    int reduces = c == COLL_ALLREDUCE || c == COLL_REDUCE_SCATTER || c == COLL_REDUCE;
    int rooted = c == COLL_BCAST || c == COLL_REDUCE || c == COLL_GATHER || c == COLL_SCATTER;

    if (c == COLL_BARRIER) {
        algbw = 0; /* no data moves */
    }
    switch (o->format) {
    case FORMAT_OSU:
        printf("%-14zu %16.2f", r->bytes, r->us);
        if (o->vs_mpi) {
            printf(" %17.2f %10.2f", r->mus, r->us / r->mus);
        }
        if (o->check) {
            printf("   %s", r->wrong ? "WRONG" : "ok");
        }
        printf("\n");
        break;
    case FORMAT_NCCL:
        printf("  %10zu %12zu %8s %6s %5d %10.1f %8.2f %8.2f %6.1f %6ld", r->total, r->total / es,
               weft_dtype_name(o->dtype), reduces ? weft_op_name(o->op) : "none",
               rooted ? o->root : -1, r->us, algbw, busbw, pct_copy(copy, busbw), r->wrong);
        if (o->vs_mpi) {
            printf(" %12.1f %9.2f %9.1f %8.2f", r->mus, mbusbw, pct_copy(copy, mbusbw),
                   r->us / r->mus);
        }
        printf("\n");
        break;
    case FORMAT_CSV:
        printf("%s,%d,%zu,%zu,%s,%s,%.3f,%.4f,%.4f,%ld", coll_names[o->coll], nranks, r->bytes,
               r->count, weft_dtype_name(o->dtype), weft_op_name(o->op), r->us, algbw, busbw,
               r->wrong);
        if (o->vs_mpi) {
            printf(",%.3f,%.4f,%.4f", r->mus, mbusbw, r->us / r->mus);
        }
        printf(",%.4f,%.4f,%.2f", copy->alone, copy->all, pct_copy(copy, busbw));
        if (o->vs_mpi) {
            printf(",%.2f", pct_copy(copy, mbusbw));
        }
        printf("\n");
        break;
    }
}

static void header(const options_t *o, const copy_bw_t *copy)
{
    if (rank != 0) {
        return;
    }
    printf("# weft_bench %s: %d ranks, dtype %s, op %s, iterations %s, warm-up %s%s%s%s",
           coll_names[o->coll], nranks, weft_dtype_name(o->dtype), weft_op_name(o->op),
           o->iters < 0 ? "by size" : "as given", o->warmup < 0 ? "n/10" : "as given",
           o->in_place ? ", in place" : "", o->algo ? ", algorithm " : "", o->algo ? o->algo : "");
    if (o->chain > 1) {
        printf(", %d enqueued per synchronize (time per collective)", o->chain);
    }
    printf("\n");
    if (o->format == FORMAT_NCCL) {
        char nodes[48] = "";

        if (copy->nodes > 1) {
            snprintf(nodes, sizeof(nodes), ", up to %d per node", copy->node_ranks);
        }
        printf("# copy bandwidth (memcpy; bytes copied per second, not read + write traffic; "
               "best of %d): %.2f GB/s (one rank alone, %zu MiB)",
               COPY_REPS, copy->alone, copy->alone_bytes / MIB);
        if (nranks > 1) {
            printf(", %.2f GB/s per rank (all %d ranks at once%s, %zu MiB each)", copy->all, nranks,
                   nodes, copy->all_bytes / MIB);
        }
        if (o->coll == COLL_BARRIER) {
            printf("\n# barrier moves no data: algbw, busbw and %%copy are 0\n");
        } else {
            printf("\n# algbw = size / time, busbw = algbw * %s = algbw * %.2f, "
                   "%%copy = 100 * busbw / %.2f GB/s (the one-rank copy)\n",
                   bus_factor_name(o->coll), bus_factor(o->coll), copy->alone);
        }
    }
    switch (o->format) {
    case FORMAT_OSU:
        printf("# %-12s %16s%s\n", "Size", "Avg Latency(us)",
               o->vs_mpi ? "   MPI Latency(us)   weft/MPI" : "");
        break;
    case FORMAT_NCCL:
        printf("# %10s %12s %8s %6s %5s %10s %8s %8s %6s %6s", "size", "count", "type", "redop",
               "root", "time", "algbw", "busbw", "%copy", "#wrong");
        if (o->vs_mpi) {
            printf(" %12s %9s %9s %8s", "mpi_time", "mpi_busbw", "mpi_%copy", "weft/mpi");
        }
        printf("\n# %10s %12s %8s %6s %5s %10s %8s %8s", "(B)", "(elements)", "", "", "", "(us)",
               "(GB/s)", "(GB/s)");
        if (o->vs_mpi) {
            printf(" %6s %6s %12s %9s %9s %8s", "", "", "(us)", "(GB/s)", "", "(time)");
        }
        printf("\n");
        break;
    case FORMAT_CSV:
        printf("collective,ranks,bytes,count,dtype,op,weft_us,algbw_gbs,busbw_gbs,wrong%s"
               ",copy_alone_gbs,copy_all_gbs,pct_copy%s\n",
               o->vs_mpi ? ",mpi_us,mpi_busbw_gbs,ratio" : "", o->vs_mpi ? ",mpi_pct_copy" : "");
        break;
    }
}

/* The process environment as the job started: a segment's --algo sets
 * WEFT_TUNE (and WEFT_REPRODUCIBLE for "ordered") and the next segment starts
 * from these again. */
static char *env_tune, *env_repro;

static void env_restore(const char *name, const char *value)
{
    if (value != NULL) {
        setenv(name, value, 1);
    } else {
        unsetenv(name);
    }
}

/* One segment: weft initialised with the segment's algorithm, every size run,
 * weft finalised. Returns whether any result was wrong (rank 0 knows). */
/* --loop: rounds of this many back-to-back runs of iterations */
#define LOOP_ROUNDS 5

static void call_weft(const options_t *o, bufs_t *b, weft_comm_t comm)
{
    if (run_weft(o, b, comm) != WEFT_OK) {
        fprintf(stderr, "weft_bench rank %d: %s\n", rank, weft_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* MPI without device support: staged through host memory */
static void call_mpi(const options_t *o, bufs_t *b)
{
    sync_device(o, b, 0, 1, o->in_place || o->coll == COLL_BCAST);
    run_mpi(o, b);
    sync_device(o, b, 1, 0, 1);
}

/* --loop: the buffers filled once, warmup calls, then LOOP_ROUNDS rounds of
 * iters calls back to back, weft's then MPI's, each round from a barrier;
 * adds this rank's mean round time to *t_weft and *t_mpi. */
static void time_loop(const options_t *o, bufs_t *b, weft_comm_t comm, int warmup, int iters,
                      double *t_weft, double *t_mpi)
{
    const double per = o->coll == COLL_PINGPONG ? 2.0 * LOOP_ROUNDS : LOOP_ROUNDS; /* one way */

    fill(o, b, 0);
    sync_device(o, b, 1, 1, 1);
    for (int i = 0; i < warmup; i++) {
        call_weft(o, b, comm);
        if (o->vs_mpi) {
            call_mpi(o, b);
        }
    }
    for (int round = 0; round < LOOP_ROUNDS; round++) {
        double t;

        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            call_weft(o, b, comm);
        }
        *t_weft += (MPI_Wtime() - t) / per;
        if (o->vs_mpi) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                call_mpi(o, b);
            }
            *t_mpi += (MPI_Wtime() - t) / per;
        }
    }
}

/* The default: every call from a barrier on freshly filled buffers (warmup
 * untimed calls first); adds this rank's times to *t_weft and *t_mpi and
 * the wrong elements (--check) to *wrong. */
static void time_each(const options_t *o, bufs_t *b, weft_comm_t comm, int warmup, int iters,
                      double *t_weft, double *t_mpi, long *wrong)
{
    double t;

    for (int it = -warmup; it < iters; it++) {
        /* Each timed call starts together (barrier). The application's
         * work (--compute-us) follows the call at once, as in a program
         * that computes on its result: on a node with more ranks than
         * cores it competes with the ranks still in the call, for weft
         * and MPI alike. The check waits until every rank has left the
         * call (barrier), so that it slows no one's timed call. */
        fill(o, b, it);
        sync_device(o, b, 1, 1, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        call_weft(o, b, comm);
        t = (MPI_Wtime() - t) / (o->coll == COLL_PINGPONG ? 2 : 1); /* one way */
        compute(o->compute_us);
        if (it >= 0) {
            *t_weft += t;
            if (o->check) {
                MPI_Barrier(MPI_COMM_WORLD);
                sync_device(o, b, 0, 0, 1);
                *wrong += check(o, b, it);
            }
        }
        if (o->vs_mpi) {
            fill(o, b, it);
            sync_device(o, b, 1, 1, 1);
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            call_mpi(o, b);
            t = (MPI_Wtime() - t) / (o->coll == COLL_PINGPONG ? 2 : 1);
            compute(o->compute_us);
            if (it >= 0) {
                *t_mpi += t;
            }
        }
    }
}

static int run_segment(const options_t *op)
{
    const options_t o = *op;
    copy_bw_t copy = {0};
    weft_comm_t comm;
    int wsize = 0, failed = 0;

    if (o.format != FORMAT_OSU) {
        copy_measure(&copy); /* before weft starts: nothing else runs yet */
    }
    env_restore("WEFT_TUNE", env_tune);
    env_restore("WEFT_REPRODUCIBLE", env_repro);
    if (o.algo != NULL) {
        char rule[128];
        snprintf(rule, sizeof(rule), "%s:0-inf:%s", coll_names[o.coll], o.algo);
        setenv("WEFT_TUNE", rule, 1);
        if (strcmp(o.algo, "ordered") == 0) {
            setenv("WEFT_REPRODUCIBLE", "yes", 1); /* the only mode it runs in */
        }
    }
    if (weft_init() != WEFT_OK || weft_comm_world(&comm) != WEFT_OK ||
        weft_comm_size(comm, &wsize) != WEFT_OK) {
        fprintf(stderr, "weft_bench rank %d: %s\n", rank, weft_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (wsize != nranks) {
        fprintf(stderr, "weft_bench: weft sees %d ranks, MPI %d\n", wsize, nranks);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (o.mem != WEFT_MEM_HOST || o.enqueue) {
        weft_check(weft_stream_create(o.mem == WEFT_MEM_HOST ? WEFT_MEM_EMU : o.mem, &stream),
                   "weft_stream_create");
    }
    header(&o, &copy);
    size_t es = weft_dtype_size(o.dtype);
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= (size_t)o.factor) {
        int iters = o.iters > 0 ? o.iters : bytes <= (64u << 10) ? 1000 : bytes <= (4u << 20) ? 100 : 20;
        int warmup = o.warmup >= 0 ? o.warmup : iters / 10;
        bufs_t b;
        double t_weft = 0, t_mpi = 0;
        long wrong = 0;

        b.count = bytes / es;
        set_vectors(b.count);
        switch (plain(o.coll)) {
        case COLL_REDUCE_SCATTER:
        case COLL_ALLTOALL:
            b.send_count = b.count * (size_t)nranks;
            break;
        case COLL_SCATTER:
            b.send_count = rank == o.root ? b.count * (size_t)nranks : 0;
            break;
        case COLL_BARRIER:
            b.send_count = 0;
            break;
        default:
            b.send_count = b.count;
        }
        switch (plain(o.coll)) {
        case COLL_ALLGATHER:
        case COLL_ALLTOALL:
            b.recv_count = b.count * (size_t)nranks;
            break;
        case COLL_GATHER:
            b.recv_count = rank == o.root ? b.count * (size_t)nranks : 0;
            break;
        case COLL_REDUCE:
            b.recv_count = rank == o.root ? b.count : 0;
            break;
        case COLL_PINGPONG:
            b.recv_count = pingpong_peer() >= 0 ? b.count : 0;
            break;
        case COLL_BARRIER:
            b.recv_count = 0;
            break;
        default:
            b.recv_count = b.count;
        }
        b.send = malloc(b.send_count * es + 1);
        b.recv = malloc((o.in_place && o.coll == COLL_REDUCE_SCATTER ? b.send_count : b.recv_count) *
                            es + 1);
        if (b.send == NULL || b.recv == NULL) {
            fprintf(stderr, "weft_bench: out of memory at %zu bytes\n", bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        b.send_bytes = b.send_count * es;
        b.recv_bytes = (o.in_place && o.coll == COLL_REDUCE_SCATTER ? b.send_count : b.recv_count) *
                       es;
        b.dsend = b.send;
        b.drecv = b.recv;
        if (o.mem != WEFT_MEM_HOST) {
            weft_check(weft_mem_alloc(o.mem, b.send_bytes + 1, &b.dsend), "weft_mem_alloc");
            weft_check(weft_mem_alloc(o.mem, b.recv_bytes + 1, &b.drecv), "weft_mem_alloc");
        }
        if (o.loop) {
            time_loop(&o, &b, comm, warmup, iters, &t_weft, &t_mpi);
        } else {
            time_each(&o, &b, comm, warmup, iters, &t_weft, &t_mpi, &wrong);
        }
        if (o.mem != WEFT_MEM_HOST) {
            weft_mem_free(b.dsend);
            weft_mem_free(b.drecv);
        }
        free(b.send);
        free(b.recv);
        /* the slowest rank's mean; wrong elements summed over ranks */
        double tw, tm;
        long wrong_all;
        MPI_Reduce(&t_weft, &tw, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t_mpi, &tm, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            row_t row = {.bytes = bytes,
                         .total = nccl_size(plain(o.coll), bytes),
                         .count = b.count,
                         .us = tw / iters / o.chain * 1e6,
                         .mus = tm / iters * 1e6,
                         .wrong = o.check ? wrong_all : -1L};

            failed |= wrong_all != 0;
            print_row(&o, &copy, &row);
            fflush(stdout);
        }
    }
    weft_comm_destroy(comm);
    if (stream != NULL) {
        weft_stream_destroy(stream);
        stream = NULL;
    }
    weft_finalize();
    return failed;
}

int main(int argc, char **argv)
{
    int failed = 0, start = 1, nsegs = 0;
    options_t *segs;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    env_tune = getenv("WEFT_TUNE") ? strdup(getenv("WEFT_TUNE")) : NULL;
    env_repro = getenv("WEFT_REPRODUCIBLE") ? strdup(getenv("WEFT_REPRODUCIBLE")) : NULL;
    vcounts = calloc((size_t)nranks, sizeof(size_t));
    vdispls = calloc((size_t)nranks, sizeof(size_t));
    mcounts = calloc((size_t)nranks, sizeof(int));
    mdispls = calloc((size_t)nranks, sizeof(int));
    if (vcounts == NULL || vdispls == NULL || mcounts == NULL || mdispls == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* segments: the arguments between --then tokens, each a run of its own,
     * all parsed before the first runs (getopt sees one segment at a time,
     * its program name in the slot of the --then before it) */
    segs = calloc((size_t)argc, sizeof(*segs));
    if (segs == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 1; i <= argc; i++) {
        if (i == argc || strcmp(argv[i], "--then") == 0) {
            if (i == start && argc > 1) {
                die("%s", "--then needs a collective's options on both sides");
            }
            argv[i] = NULL;
            argv[start - 1] = argv[0];
            optind = 0; /* GNU getopt: start over */
            parse(i - start + 1, argv + start - 1, &segs[nsegs++]);
            start = i + 1;
        }
    }
    for (int s = 0; s < nsegs; s++) {
        failed |= run_segment(&segs[s]);
    }
    free(segs);
    free(env_tune);
    free(env_repro);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return failed;
}
