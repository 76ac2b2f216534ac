/*
 * test_mpi_coll: an ordinary MPI program (it knows nothing of weft) that
 * uses every collective libweft_mpi interposes, blocking and nonblocking,
 * out of place and in place, odd counts and count 0, several datatypes and
 * ops, on MPI_COMM_WORLD, a dup, a reordered split and MPI_COMM_SELF, and
 * checks every element against values computed here. Then the cases the
 * interposer forwards (a derived datatype, a user op, MAXLOC, an
 * intercommunicator), MPI errors for bad input, and a freed communicator.
 *
 * Rank 0 prints "test_mpi_coll: N checks, F failed" and a digest of every
 * result buffer and return code, so that runs with and
 * without the interposer can be compared; the exit status is 1 on any
 * failure. Run under mpirun -np 1..4, plain or with
 * LD_PRELOAD=libweft_mpi.so; it asks for MPI_THREAD_MULTIPLE, or with the
 * argument --single for MPI_THREAD_SINGLE (the interposer's paths for one
 * thread in MPI: no lock, the last communicator's entry kept); --finalize-late runs
 * only the check of MPI_Finalize's barrier (finalize_late).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int checks, failures, wrank;
static uint64_t digest = 1469598103934665603ull;

static void mix(const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        digest = (digest ^ b[i]) * 1099511628211ull;
    }
}

static void expect(int ok, const char *what, const char *detail, long long index)
{
    checks++;
    if (!ok) {
        failures++;
        if (failures < 20) {
            fprintf(stderr, "rank %d: WRONG %s: %s (element %lld)\n", wrank, what, detail, index);
        }
    }
}

/* ---- typed values: small integers, exact in every type ---- */

typedef enum { K_I8, K_U8, K_I32, K_U32, K_I64, K_U64, K_F32, K_F64 } kind_t;
typedef struct {
    MPI_Datatype dt;
    kind_t k;
    size_t size;
    const char *name;
} type_t;

static long long val(kind_t k, int rank, long long i)
{
    long long v = (rank * 13 + i * 7) % 23;

    return (k == K_U8 || k == K_U32 || k == K_U64) ? v : v - 9;
}

static void put(void *buf, kind_t k, long long i, long long v)
{
    switch (k) {
    case K_I8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case K_U8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case K_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case K_U32:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    case K_I64:
        ((int64_t *)buf)[i] = v;
        break;
    case K_U64:
        ((uint64_t *)buf)[i] = (uint64_t)v;
        break;
    case K_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case K_F64:
        ((double *)buf)[i] = (double)v;
        break;
    }
}

static long long get(const void *buf, kind_t k, long long i)
{
    switch (k) {
    case K_I8:
        return ((const int8_t *)buf)[i];
    case K_U8:
        return ((const uint8_t *)buf)[i];
    case K_I32:
        return ((const int32_t *)buf)[i];
    case K_U32:
        return ((const uint32_t *)buf)[i];
    case K_I64:
        return ((const int64_t *)buf)[i];
    case K_U64:
        return (long long)((const uint64_t *)buf)[i];
    case K_F32:
        return (long long)((const float *)buf)[i];
    case K_F64:
        return (long long)((const double *)buf)[i];
    }
    return 0;
}

/* v as the type holds it */
static long long wrap(kind_t k, long long v)
{
    unsigned char tmp[8];

    put(tmp, k, 0, v);
    return get(tmp, k, 0);
}

static long long apply(MPI_Op op, kind_t k, long long a, long long b)
{
    long long r;

    if (op == MPI_SUM)
        r = a + b;
    else if (op == MPI_PROD)
        r = a * b;
    else if (op == MPI_MIN)
        r = a < b ? a : b;
    else if (op == MPI_MAX)
        r = a > b ? a : b;
    else if (op == MPI_BAND)
        r = a & b;
    else if (op == MPI_BOR)
        r = a | b;
    else if (op == MPI_BXOR)
        r = a ^ b;
    else if (op == MPI_LAND)
        r = a && b;
    else if (op == MPI_LOR)
        r = a || b;
    else
        r = !a != !b;
    return wrap(k, r);
}

/* the reduction over ranks [0, n) of element i, as rank r contributes val(r, i) */
static long long reduced(MPI_Op op, kind_t k, int n, long long i)
{
    long long acc = wrap(k, val(k, 0, i));

    for (int r = 1; r < n; r++) {
        acc = apply(op, k, acc, wrap(k, val(k, r, i)));
    }
    return acc;
}

static void fill(void *buf, kind_t k, int rank, long long n, long long first)
{
    for (long long i = 0; i < n; i++) {
        put(buf, k, i, val(k, rank, first + i));
    }
}

/* ---- completion: blocking, or an I-form completed by a rotating call ---- */

static int rc_of(int rc)
{
    mix(&rc, sizeof(rc));
    return rc;
}

static void finish(MPI_Request *req, const char *what)
{
    static int way;
    MPI_Status st;
    int flag = 0, index, count = -1, cancelled = -1, outcount, idx[1];

    memset(&st, 0, sizeof(st));
    switch (way++ % 5) {
    case 0:
        MPI_Wait(req, &st);
        break;
    case 1:
        while (!flag)
            MPI_Test(req, &flag, &st);
        break;
    case 2:
        MPI_Waitany(1, req, &index, &st);
        break;
    case 3:
        while (!flag)
            MPI_Testall(1, req, &flag, &st);
        break;
    default:
        MPI_Waitsome(1, req, &outcount, idx, &st);
        break;
    }
    expect(*req == MPI_REQUEST_NULL, what, "request not freed by its completion", -1);
    MPI_Get_count(&st, MPI_BYTE, &count);
    MPI_Test_cancelled(&st, &cancelled);
    /* MPI leaves the other fields of a collective's status undefined (Open
     * MPI's own differ between collectives) */
    expect(cancelled == 0, what, "status says cancelled", count);
}

#define RUN(nb, what, blocking, nonblocking)                                                       \
    do {                                                                                           \
        if (nb) {                                                                                  \
            MPI_Request req_;                                                                      \
            expect(rc_of(nonblocking) == MPI_SUCCESS, what, "start failed", -1);                   \
            finish(&req_, what);                                                                   \
        } else {                                                                                   \
            expect(rc_of(blocking) == MPI_SUCCESS, what, "call failed", -1);                       \
        }                                                                                          \
    } while (0)

static const type_t types[] = {
    {0, K_I32, 4, "MPI_INT"},        {0, K_F64, 8, "MPI_DOUBLE"},   {0, K_I64, 8, "MPI_LONG"},
    {0, K_U8, 1, "MPI_UINT8_T"},     {0, K_F32, 4, "MPI_FLOAT"},    {0, K_U64, 8, "MPI_UINT64_T"},
    {0, K_I8, 1, "MPI_SIGNED_CHAR"}, {0, K_U32, 4, "MPI_UNSIGNED"},
};
static MPI_Datatype type_dt[8];

static void setup_types(void)
{
    type_dt[0] = MPI_INT, type_dt[1] = MPI_DOUBLE, type_dt[2] = MPI_LONG;
    type_dt[3] = MPI_UINT8_T, type_dt[4] = MPI_FLOAT, type_dt[5] = MPI_UINT64_T;
    type_dt[6] = MPI_SIGNED_CHAR, type_dt[7] = MPI_UNSIGNED;
}

static int is_float(kind_t k)
{
    return k == K_F32 || k == K_F64;
}

/* ---- reductions ---- */

static void test_allreduce(MPI_Comm comm, int nb, int inplace, int t, MPI_Op op, int count)
{
    int rank, n;
    kind_t k = types[t].k;
    size_t es = types[t].size;
    char *s = malloc(es * (count + 1)), *r = malloc(es * (count + 1));
    char what[96];

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    snprintf(what, sizeof(what), "%sallreduce %s count %d%s", nb ? "i" : "", types[t].name, count,
             inplace ? " in place" : "");
    fill(s, k, rank, count, 0);
    fill(r, k, rank, count, 0);
    RUN(nb, what, MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, count, type_dt[t], op, comm),
        MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, r, count, type_dt[t], op, comm, &req_));
    for (int i = 0; i < count; i++) {
        expect(get(r, k, i) == reduced(op, k, n, i), what, "value", i);
    }
    mix(r, es * count);
    free(s);
    free(r);
}

static void test_reduce(MPI_Comm comm, int nb, int inplace, int count)
{
    int rank, n, root;
    int *s = malloc(sizeof(int) * (count + 1)), *r = malloc(sizeof(int) * (count + 1));

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    root = n - 1;
    fill(s, K_I32, rank, count, 0);
    fill(r, K_I32, rank, count, 0);
    inplace = inplace && rank == root;
    RUN(nb, "reduce",
        MPI_Reduce(inplace ? MPI_IN_PLACE : s, r, count, MPI_INT, MPI_SUM, root, comm),
        MPI_Ireduce(inplace ? MPI_IN_PLACE : s, r, count, MPI_INT, MPI_SUM, root, comm, &req_));
    for (int i = 0; rank == root && i < count; i++) {
        expect(r[i] == reduced(MPI_SUM, K_I32, n, i), "reduce", "value", i);
    }
    if (rank == root) {
        mix(r, sizeof(int) * count);
    }
    free(s);
    free(r);
}

static void test_reduce_scatter(MPI_Comm comm, int nb, int inplace, int block)
{
    int rank, n, total = 0, off = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *counts = malloc(sizeof(int) * n);

    for (int r = 0; r < n; r++) {
        counts[r] = block ? 5 : (r * 3 + 1) % 4; /* odd, some 0 */
        off += r < rank ? counts[r] : 0;
        total += counts[r];
    }
    double *s = malloc(sizeof(double) * (total + 1)), *r = malloc(sizeof(double) * (total + 1));
    fill(s, K_F64, rank, total, 0);
    fill(r, K_F64, rank, total, 0);
    if (block) {
        RUN(nb, "reduce_scatter_block",
            MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : s, r, 5, MPI_DOUBLE, MPI_SUM, comm),
            MPI_Ireduce_scatter_block(inplace ? MPI_IN_PLACE : s, r, 5, MPI_DOUBLE, MPI_SUM, comm,
                                      &req_));
    } else {
        RUN(nb, "reduce_scatter",
            MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : s, r, counts, MPI_DOUBLE, MPI_MAX, comm),
            MPI_Ireduce_scatter(inplace ? MPI_IN_PLACE : s, r, counts, MPI_DOUBLE, MPI_MAX, comm,
                                &req_));
    }
    for (int i = 0; i < counts[rank]; i++) {
        expect(r[i] == reduced(block ? MPI_SUM : MPI_MAX, K_F64, n, off + i),
               block ? "reduce_scatter_block" : "reduce_scatter", "value", i);
    }
    mix(r, sizeof(double) * counts[rank]);
    free(counts);
    free(s);
    free(r);
}

/* ---- data movement: bytes of any predefined type ---- */

static void test_bcast(MPI_Comm comm, int nb, MPI_Datatype dt, int esize, int count, int root)
{
    int rank, n;
    size_t bytes = (size_t)esize * count;
    unsigned char *b = malloc(bytes + 1);

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    root %= n;
    for (size_t i = 0; i < bytes; i++) {
        b[i] = rank == root ? (unsigned char)(i * 5 + 3) : 0;
    }
    RUN(nb, "bcast", MPI_Bcast(b, count, dt, root, comm),
        MPI_Ibcast(b, count, dt, root, comm, &req_));
    for (size_t i = 0; i < bytes; i++) {
        expect(b[i] == (unsigned char)(i * 5 + 3), "bcast", "byte", (long long)i);
    }
    mix(b, bytes);
    free(b);
}

static void test_allgather(MPI_Comm comm, int nb, int inplace, int count)
{
    int rank, n;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *s = malloc(sizeof(int) * (count + 1)), *r = malloc(sizeof(int) * (n * count + 1));
    fill(s, K_I32, rank, count, 0);
    fill(r + rank * count, K_I32, rank, count, 0);
    RUN(nb, "allgather",
        MPI_Allgather(inplace ? MPI_IN_PLACE : s, count, MPI_INT, r, count, MPI_INT, comm),
        MPI_Iallgather(inplace ? MPI_IN_PLACE : s, count, MPI_INT, r, count, MPI_INT, comm, &req_));
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < count; i++) {
            expect(r[p * count + i] == val(K_I32, p, i), "allgather", "value", p * count + i);
        }
    }
    mix(r, sizeof(int) * n * count);
    free(s);
    free(r);
}

static void test_allgatherv(MPI_Comm comm, int nb, int inplace)
{
    int rank, n, extent = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
    for (int p = 0; p < n; p++) {
        counts[p] = (p * 2 + 1) % 5; /* 1 3 0 2 */
        displs[p] = extent + 1;      /* a gap before each block */
        extent = displs[p] + counts[p];
    }
    short *s = malloc(sizeof(short) * 8), *r = calloc(extent + 1, sizeof(short));
    for (int i = 0; i < counts[rank]; i++) {
        s[i] = (short)(rank * 100 + i);
        r[displs[rank] + i] = s[i];
    }
    RUN(nb, "allgatherv",
        MPI_Allgatherv(inplace ? MPI_IN_PLACE : s, counts[rank], MPI_SHORT, r, counts, displs,
                       MPI_SHORT, comm),
        MPI_Iallgatherv(inplace ? MPI_IN_PLACE : s, counts[rank], MPI_SHORT, r, counts, displs,
                        MPI_SHORT, comm, &req_));
    for (int p = 0; p < n; p++) {
        expect(r[displs[p] - 1] == 0, "allgatherv", "gap written", displs[p] - 1);
        for (int i = 0; i < counts[p]; i++) {
            expect(r[displs[p] + i] == p * 100 + i, "allgatherv", "value", displs[p] + i);
        }
    }
    mix(r, sizeof(short) * extent);
    free(counts), free(displs), free(s), free(r);
}

static void test_alltoall(MPI_Comm comm, int nb, int inplace, int count)
{
    int rank, n;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    double _Complex *s = malloc(sizeof(*s) * (n * count + 1)),
                    *r = malloc(sizeof(*r) * (n * count + 1));
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < count; i++) {
            s[p * count + i] = rank * 1000 + p * 10 + i + 0.5 * i * 1.0i;
        }
    }
    if (inplace) {
        memcpy(r, s, sizeof(*s) * n * count);
    }
    RUN(nb, "alltoall",
        MPI_Alltoall(inplace ? MPI_IN_PLACE : s, count, MPI_C_DOUBLE_COMPLEX, r, count,
                     MPI_C_DOUBLE_COMPLEX, comm),
        MPI_Ialltoall(inplace ? MPI_IN_PLACE : s, count, MPI_C_DOUBLE_COMPLEX, r, count,
                      MPI_C_DOUBLE_COMPLEX, comm, &req_));
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < count; i++) {
            expect(r[p * count + i] == p * 1000 + rank * 10 + i + 0.5 * i * 1.0i, "alltoall",
                   "value", p * count + i);
        }
    }
    mix(r, sizeof(*r) * n * count);
    free(s), free(r);
}

static void test_alltoallv(MPI_Comm comm, int nb)
{
    int rank, n, so = 0, ro = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *sc = malloc(sizeof(int) * n * 4), *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    for (int p = 0; p < n; p++) { /* rank a sends (a + 2b) % 3 ints to b */
        sc[p] = (rank + 2 * p) % 3, sd[p] = so, so += sc[p] + 1;
        rc[p] = (p + 2 * rank) % 3, rd[p] = ro, ro += rc[p] + 2;
    }
    int *s = malloc(sizeof(int) * (so + 1)), *r = calloc(ro + 1, sizeof(int));
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < sc[p]; i++) {
            s[sd[p] + i] = rank * 100 + p * 10 + i;
        }
    }
    RUN(nb, "alltoallv", MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm),
        MPI_Ialltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm, &req_));
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < rc[p]; i++) {
            expect(r[rd[p] + i] == p * 100 + rank * 10 + i, "alltoallv", "value", rd[p] + i);
        }
        expect(r[rd[p] + rc[p]] == 0, "alltoallv", "gap written", rd[p] + rc[p]);
    }
    mix(r, sizeof(int) * ro);
    free(sc), free(s), free(r);
}

static void test_gather(MPI_Comm comm, int nb, int inplace, int count)
{
    int rank, n, root = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    float *s = malloc(sizeof(float) * (count + 1)), *r = calloc(n * count + 1, sizeof(float));
    fill(s, K_F32, rank, count, 0);
    inplace = inplace && rank == root;
    if (inplace) {
        fill(r + root * count, K_F32, rank, count, 0);
    }
    RUN(nb, "gather",
        MPI_Gather(inplace ? MPI_IN_PLACE : s, count, MPI_FLOAT, r, count, MPI_FLOAT, root, comm),
        MPI_Igather(inplace ? MPI_IN_PLACE : s, count, MPI_FLOAT, r, count, MPI_FLOAT, root, comm,
                    &req_));
    for (int p = 0; rank == root && p < n; p++) {
        for (int i = 0; i < count; i++) {
            expect(r[p * count + i] == val(K_F32, p, i), "gather", "value", p * count + i);
        }
    }
    if (rank == root) {
        mix(r, sizeof(float) * n * count);
    }
    free(s), free(r);
}

static void test_scatter(MPI_Comm comm, int nb, int inplace, int count)
{
    int rank, n, root;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    root = n - 1;
    int *s = malloc(sizeof(int) * (n * count + 1)), *r = calloc(count + 1, sizeof(int));
    for (int p = 0; p < n; p++) {
        fill(s + p * count, K_I32, p, count, 0);
    }
    inplace = inplace && rank == root;
    RUN(nb, "scatter",
        MPI_Scatter(s, count, MPI_INT, inplace ? MPI_IN_PLACE : r, count, MPI_INT, root, comm),
        MPI_Iscatter(s, count, MPI_INT, inplace ? MPI_IN_PLACE : r, count, MPI_INT, root, comm,
                     &req_));
    const int *got = inplace ? s + root * count : r;
    for (int i = 0; i < count; i++) {
        expect(got[i] == val(K_I32, rank, i), "scatter", "value", i);
    }
    mix(got, sizeof(int) * count);
    free(s), free(r);
}

static void test_comm(MPI_Comm comm)
{
    static const MPI_Op int_ops[] = {MPI_SUM, MPI_PROD, MPI_MIN,  MPI_MAX, MPI_BAND,
                                     MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR};
    static const MPI_Op float_ops[] = {MPI_SUM, MPI_MIN, MPI_MAX, MPI_PROD};
    static const int counts[] = {0, 1, 7, 1001};
    int step = 0;

    for (int nb = 0; nb < 2; nb++) {
        for (int t = 0; t < 8; t++) {
            int nops = is_float(types[t].k) ? 4 : 10;

            for (int o = 0; o < nops; o++, step++) {
                MPI_Op op = is_float(types[t].k) ? float_ops[o] : int_ops[o];

                test_allreduce(comm, nb, step % 2, t, op, counts[step % 4]);
            }
        }
        for (int inplace = 0; inplace < 2; inplace++) {
            test_reduce(comm, nb, inplace, inplace ? 13 : 1000);
            test_reduce_scatter(comm, nb, inplace, 0);
            test_reduce_scatter(comm, nb, inplace, 1);
            test_allgather(comm, nb, inplace, inplace ? 3 : 0);
            test_allgatherv(comm, nb, inplace);
            test_alltoall(comm, nb, inplace, 3);
            test_gather(comm, nb, inplace, 5);
            test_scatter(comm, nb, inplace, 4);
        }
        test_alltoallv(comm, nb);
        test_bcast(comm, nb, MPI_C_DOUBLE_COMPLEX, 16, 5, 100);
        test_bcast(comm, nb, MPI_BYTE, 1, 0, 0);
        test_bcast(comm, nb, MPI_INT, 4, 100000, 1);
        RUN(nb, "barrier", MPI_Barrier(comm), MPI_Ibarrier(comm, &req_));
    }
}

/* Several outstanding at once, completed together with point-to-point
 * requests in the same array. */
static void test_many(MPI_Comm comm)
{
    int rank, n, a[3][4], b[3][4], token = -1, mine, rc, cls = -1;
    MPI_Request reqs[5], freed;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    mine = rank;
    MPI_Irecv(&token, 1, MPI_INT, (rank + n - 1) % n, 7, comm, &reqs[0]);
    for (int j = 0; j < 3; j++) {
        fill(a[j], K_I32, rank, 4, j);
        expect(MPI_Iallreduce(a[j], b[j], 4, MPI_INT, MPI_SUM, comm, &reqs[1 + j]) == MPI_SUCCESS,
               "many", "iallreduce start", j);
    }
    MPI_Isend(&mine, 1, MPI_INT, (rank + 1) % n, 7, comm, &reqs[4]);
    /* Open MPI frees a nonblocking collective's request only once it is done */
    MPI_Ibarrier(comm, &freed);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Request_free(&freed);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Error_class(rc, &cls);
    expect(cls == MPI_SUCCESS ? freed == MPI_REQUEST_NULL
                              : cls == MPI_ERR_REQUEST && freed != MPI_REQUEST_NULL,
           "many", "MPI_Request_free of a collective's request", cls);
    MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE);
    MPI_Wait(&freed, MPI_STATUS_IGNORE);
    expect(token == (rank + n - 1) % n, "many", "point-to-point beside collectives", -1);
    for (int j = 0; j < 3; j++) {
        for (int i = 0; i < 4; i++) {
            expect(b[j][i] == reduced(MPI_SUM, K_I32, n, j + i), "many", "value", j * 4 + i);
        }
    }
    mix(b, sizeof(b));
    MPI_Barrier(comm);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

/* What the interposer forwards must still be right. */
static void test_forwarded(void)
{
    int rank, n, in[6], out[6] = {0}, vec[8];
    MPI_Op op;
    MPI_Datatype strided;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    fill(in, K_I32, rank, 6, 0);
    MPI_Op_create(user_sum, 1, &op);
    expect(rc_of(MPI_Allreduce(in, out, 6, MPI_INT, op, MPI_COMM_WORLD)) == MPI_SUCCESS, "user op",
           "call failed", -1);
    for (int i = 0; i < 6; i++) {
        expect(out[i] == reduced(MPI_SUM, K_I32, n, i), "user op", "value", i);
    }
    MPI_Op_free(&op);

    struct {
        int v, r;
    } loc = {(rank * 7) % 5, rank}, best;
    MPI_Allreduce(&loc, &best, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
    for (int r = 0; r < n; r++) {
        expect(best.v >= (r * 7) % 5, "maxloc", "value", r);
    }
    mix(&best, sizeof(best));

    MPI_Type_vector(4, 1, 2, MPI_INT, &strided); /* every other int */
    MPI_Type_commit(&strided);
    for (int i = 0; i < 8; i++) {
        vec[i] = rank == 0 ? i * 3 : -1;
    }
    MPI_Bcast(vec, 1, strided, 0, MPI_COMM_WORLD);
    for (int i = 0; i < 8; i++) {
        expect(vec[i] == (i % 2 == 0 || rank == 0 ? i * 3 : -1), "derived bcast", "value", i);
    }
    mix(vec, sizeof(vec));
    MPI_Type_free(&strided);

    if (n >= 2) { /* two halves joined by an intercommunicator */
        MPI_Comm half, inter;
        int low = rank < n / 2, x = rank + 1, sum = 0, remote = 0;

        MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? n / 2 : 0, 99, &inter);
        MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, inter);
        for (int r = low ? n / 2 : 0; r < (low ? n : n / 2); r++) {
            remote += r + 1;
        }
        expect(sum == remote, "intercomm allreduce", "the remote group's sum", -1);
        mix(&sum, sizeof(sum));
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
}

/* Bad input: MPI's own error class through the handler, nothing written. */
static void test_errors(void)
{
    int x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8}, rc, cls = -1;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Allreduce(x, y, 4, MPI_INT, MPI_SUM, MPI_COMM_NULL);
    MPI_Error_class(rc, &cls);
    expect(cls == MPI_ERR_COMM, "MPI_COMM_NULL", "error class", cls);
    rc = MPI_Allreduce(x, y, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    expect(cls == MPI_ERR_COUNT, "negative count", "error class", cls);
    rc = MPI_Bcast(x, 4, MPI_INT, 1000, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    expect(cls == MPI_ERR_ROOT, "root out of range", "error class", cls);
    rc = MPI_Allreduce(x, x, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    expect(cls == MPI_ERR_BUFFER, "aliased buffers", "error class", cls);
    for (int i = 0; i < 4; i++) {
        expect(x[i] == i + 1 && y[i] == i + 5, "bad input", "buffer changed", i);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Through the interposer only: the weft communicator of an MPI one. */
static void test_comm_from_mpi(MPI_Comm comm)
{
    int (*from)(MPI_Comm, void **) =
        (int (*)(MPI_Comm, void **))dlsym(RTLD_DEFAULT, "weft_comm_from_mpi");
    int (*wsize)(void *, int *) = (int (*)(void *, int *))dlsym(RTLD_DEFAULT, "weft_comm_size");
    void *wc = NULL;
    int n, ws = -1, ok;

    if (from == NULL || wsize == NULL) {
        return;
    }
    MPI_Comm_size(comm, &n);
    expect(from(MPI_COMM_NULL, &wc) == MPI_ERR_COMM, "weft_comm_from_mpi", "MPI_COMM_NULL", -1);
    if (getenv("WEFT_MPI") != NULL && strcmp(getenv("WEFT_MPI"), "off") == 0) {
        expect(from(comm, &wc) == MPI_ERR_OTHER, "weft_comm_from_mpi", "with WEFT_MPI=off", -1);
        return;
    }
    ok = from(comm, &wc) == MPI_SUCCESS && wsize(wc, &ws) == 0 && ws == n;
    expect(ok, "weft_comm_from_mpi", "size of the weft communicator", ws);
    if (wrank == 0 && ok) {
        printf("test_mpi_coll: weft_comm_from_mpi ok\n");
    }
}

/* MPI_THREAD_MULTIPLE: two threads, each on its own communicator, at once. */
typedef struct {
    MPI_Comm comm;
    int id, wrong;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *t = p;
    int n, rank, x[3], y[3];

    MPI_Comm_size(t->comm, &n);
    MPI_Comm_rank(t->comm, &rank);
    for (int j = 0; j < 300; j++) {
        MPI_Request req;

        for (int i = 0; i < 3; i++) {
            x[i] = rank * (t->id + 1) + i + j;
        }
        if (j % 2) {
            MPI_Iallreduce(x, y, 3, MPI_INT, MPI_SUM, t->comm, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Allreduce(x, y, 3, MPI_INT, MPI_SUM, t->comm);
        }
        for (int i = 0; i < 3; i++) {
            t->wrong += y[i] != (t->id + 1) * n * (n - 1) / 2 + n * (i + j);
        }
    }
    return NULL;
}

static void test_threads(int provided)
{
    thread_arg_t args[2];
    pthread_t threads[2];

    if (provided < MPI_THREAD_MULTIPLE) {
        return;
    }
    for (int i = 0; i < 2; i++) {
        args[i] = (thread_arg_t){.id = i};
        MPI_Comm_dup(MPI_COMM_WORLD, &args[i].comm);
    }
    for (int i = 0; i < 2; i++) {
        pthread_create(&threads[i], NULL, thread_main, &args[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        expect(args[i].wrong == 0, "threads", "allreduce results", args[i].wrong);
        MPI_Comm_free(&args[i].comm);
    }
}

/*
 * --finalize-late: every rank but 0 waits a second before MPI_Finalize, whose barrier (with the
 * interposer, bindings/mpi/state.c: finalize_barrier) rank 0 then waits in; WEFT_MPI_STATS=1
 * prints how long.
 */
static int finalize_late(void)
{
    struct timespec second = {1, 0};

    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (wrank != 0) {
        nanosleep(&second, NULL);
    }
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    int provided, n, all_failures = 0;
    MPI_Comm dup, split, freed;
    uint64_t *digests;

    if (argc > 1 && strcmp(argv[1], "--finalize-late") == 0) {
        MPI_Init(&argc, &argv);
        return finalize_late();
    }
    MPI_Init_thread(&argc, &argv,
                    argc > 1 && strcmp(argv[1], "--single") == 0 ? MPI_THREAD_SINGLE
                                                                 : MPI_THREAD_MULTIPLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    setup_types();

    test_comm(MPI_COMM_WORLD);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    test_comm(dup);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, -wrank, &split); /* reversed order */
    test_comm(split);
    test_comm_from_mpi(split);
    test_comm(MPI_COMM_SELF);
    test_many(MPI_COMM_WORLD);
    test_many(split);
    test_forwarded();
    test_errors();
    test_threads(provided);

    /* communicators freed after use: their weft communicators are released */
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    /* (each in turn a dup and a split of another size and order, so that a
     * handle MPI reuses never stands for the communicator freed before it) */
    for (int j = 0; j < 4; j++) {
        int x, sum = -1, size = 0;

        if (j % 2 == 0) {
            MPI_Comm_dup(MPI_COMM_WORLD, &freed);
        } else {
            MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, -wrank, &freed);
        }
        MPI_Comm_rank(freed, &x);
        MPI_Comm_size(freed, &size);
        MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, freed);
        expect(sum == size * (size - 1) / 2, "freed comm", "sum", j);
        MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, freed);
        expect(x == size - 1, "freed comm", "max rank", j);
        MPI_Comm_free(&freed);
    }

    digests = malloc(sizeof(uint64_t) * n);
    MPI_Gather(&digest, 1, MPI_UINT64_T, digests, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        printf("test_mpi_coll: %d ranks, %d checks on rank 0, %d failed\n", n, checks,
               all_failures);
        printf("test_mpi_coll: digest");
        for (int r = 0; r < n; r++) {
            printf(" %016llx", (unsigned long long)digests[r]);
        }
        printf("\n");
        fflush(stdout);
    }
    free(digests);
    MPI_Bcast(&all_failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return all_failures == 0 ? 0 : 1;
}
