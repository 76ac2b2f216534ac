/*
 * weft_reduce_bench [-d host|emu|cuda] [-p] [bytes] [iterations]: how close a device table's
 * reduction runs to memory bandwidth.
 *
 * Times a copy of `bytes` (default 64 MiB) within the memory type against a 2-input SUM into
 * `bytes` of output through the table's reduce: FLOAT32, then FLOAT16, BFLOAT16 and FLOAT64 for
 * information. host (default) compares weft__host_reduce with memcpy; emu and cuda allocate the
 * three buffers with the table and compare its reduce with its own device-to-device copy (for
 * cuda: cuMemcpy D2D against the reduce kernels; both include the launch and the wait). Each is
 * run once to warm up, then `iterations` times (default 20); the table gives the best and the
 * median run as GB/s (10^9 bytes per second) of output and of memory traffic: a copy reads and
 * writes `bytes` (2x), a 2-input reduce reads two inputs and writes one output (3x). The last
 * column is the reduce's traffic rate over the copy's: near 1 means the reduce is as
 * bandwidth-bound as a copy. Write-allocate traffic is not counted: a plain store loop reads
 * each dst line before writing it, which a large memcpy may avoid (non-temporal stores, rep
 * movsb), so a host loop running at full bandwidth can still show a ratio below 1.
 *
 * -p: the host half types (float16, bfloat16) through the portable conversion loops only, not
 * the CPU's instructions (device/host/reduce.c), for the comparison.
 *
 * -c: host copies instead: weft__host_copy (weft's loop from WEFT_HOST_COPY bytes, 2 KiB, where
 * the CPU has AVX2) against the C library's memcpy, 4 KiB-4 MiB, the destination 0, 16 (as a
 * malloc'd result buffer filled from the node segment's page-aligned slots) and 4080 bytes past
 * the source modulo 4 KiB; GB/s of the best of `iterations` runs (default 20) of 64 MiB each.
 *
 * Sizes accept a k, m or g suffix (powers of 1024). Exit status: 0, 2 on bad arguments, 77 when
 * the memory type cannot be used here (no CUDA driver or GPU: the reason is printed).
 */
#include "device/device.h"
#include "device/host/half.h"
#include "device/host/host.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int is_memcpy;
    weft_dtype_t dtype;
    size_t traffic_factor; /* bytes moved per output byte */
} bench_op_t;

typedef struct {
    const weft_device_ops_t *dev;
    unsigned char *dst;
    unsigned char *a;
    unsigned char *b;
    unsigned char *stage; /* host memory: inputs are written here, then copied to a and b */
    size_t bytes;
} buffers_t;

typedef struct {
    double best_s;
    double median_s;
} timing_t;

/* the copy first: the reductions are compared with it */
static const bench_op_t bench_ops[] = {
    {.name = "copy", .is_memcpy = 1, .dtype = WEFT_UINT8, .traffic_factor = 2},
    {.name = "reduce float32 sum", .dtype = WEFT_FLOAT32, .traffic_factor = 3},
    {.name = "reduce float16 sum", .dtype = WEFT_FLOAT16, .traffic_factor = 3},
    {.name = "reduce bfloat16 sum", .dtype = WEFT_BFLOAT16, .traffic_factor = 3},
    {.name = "reduce float64 sum", .dtype = WEFT_FLOAT64, .traffic_factor = 3},
    {.name = "reduce float8_e4m3 sum", .dtype = WEFT_FLOAT8_E4M3, .traffic_factor = 3},
    {.name = "reduce float8_e5m2 sum", .dtype = WEFT_FLOAT8_E5M2, .traffic_factor = 3},
};

static int parse_size(const char *text, size_t *value_p)
{
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    int shift = 0;

    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        break;
    }
    if (end == text || *end != '\0' || value == 0 || value > (SIZE_MAX >> shift)) {
        return -1;
    }
    *value_p = (size_t)value << shift;
    return 0;
}

/* One input of normal values near 1 (second: another pattern), written as dtype into out, so
 * that no run meets denormals or NaNs. */
static void fill_input(unsigned char *out, size_t bytes, weft_dtype_t dtype, int second)
{
    size_t count = bytes / weft_dtype_size(dtype);

    for (size_t i = 0; i < count; i++) {
        float x = second ? 2.0f - (float)(i % 512) / 512.0f : 1.0f + (float)(i % 1024) / 1024.0f;

        switch (dtype) {
        case WEFT_FLOAT16:
            ((uint16_t *)out)[i] = weft__float_to_f16(x);
            break;
        case WEFT_BFLOAT16:
            ((uint16_t *)out)[i] = weft__float_to_bf16(x);
            break;
        case WEFT_FLOAT64:
            ((double *)out)[i] = x;
            break;
        case WEFT_FLOAT8_E4M3:
            out[i] = weft__float_to_f8e4m3(x);
            break;
        case WEFT_FLOAT8_E5M2:
            out[i] = weft__float_to_f8e5m2(x);
            break;
        default:
            ((float *)out)[i] = x;
            break;
        }
    }
}

static weft_status_t fill_inputs(const buffers_t *buf, weft_dtype_t dtype)
{
    weft_status_t status;

    fill_input(buf->stage, buf->bytes, dtype, 0);
    status = buf->dev->copy(buf->a, buf->stage, buf->bytes);
    if (status == WEFT_OK) {
        fill_input(buf->stage, buf->bytes, dtype, 1);
        status = buf->dev->copy(buf->b, buf->stage, buf->bytes);
    }
    return status;
}

static weft_status_t run_once(const bench_op_t *op, const buffers_t *buf)
{
    const void *srcs[2] = {buf->a, buf->b};

    if (op->is_memcpy && buf->dev->memtype == WEFT_MEM_HOST) {
        memcpy(buf->dst, buf->a, buf->bytes);
        return WEFT_OK;
    }
    if (op->is_memcpy) {
        return buf->dev->copy(buf->dst, buf->a, buf->bytes);
    }
    return buf->dev->reduce(buf->dst, srcs, 2, buf->bytes / weft_dtype_size(op->dtype), op->dtype,
                            WEFT_SUM);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

static weft_status_t measure(const bench_op_t *op, const buffers_t *buf, int iterations,
                             double *times, timing_t *timing)
{
    weft_status_t status = run_once(op, buf);

    for (int i = 0; i < iterations && status == WEFT_OK; i++) {
        uint64_t start = weft__time_ns();

        status = run_once(op, buf);
        times[i] = (double)(weft__time_ns() - start) * 1e-9;
    }
    if (status != WEFT_OK) {
        return status;
    }
    qsort(times, (size_t)iterations, sizeof(*times), compare_double);
    timing->best_s = times[0];
    timing->median_s = iterations % 2 ? times[iterations / 2]
                                      : (times[iterations / 2 - 1] + times[iterations / 2]) / 2;
    return WEFT_OK;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [-d host|emu|cuda] [-p] [bytes[k|m|g]] [iterations]\n"
            "       %s -c [iterations]\n",
            argv0, argv0);
}

/* Seconds of the best of `iterations` runs of 64 MiB of copies of `bytes` (at least one). */
static double best_copy(int loop, void *dst, const void *src, size_t bytes, int iterations)
{
    size_t n = bytes >= ((size_t)64 << 20) ? 1 : ((size_t)64 << 20) / bytes;
    double best = DBL_MAX;

    for (int i = 0; i <= iterations; i++) { /* the first warms up */
        uint64_t start = weft__time_ns();
        double t;

        for (size_t k = 0; k < n; k++) {
            if (loop) {
                weft__host_copy(dst, src, bytes);
            } else {
                memcpy(dst, src, bytes);
            }
            __asm__ volatile("" ::: "memory"); /* every copy is done */
        }
        t = (double)(weft__time_ns() - start) * 1e-9;
        if (i > 0 && t < best) {
            best = t;
        }
    }
    return best / (double)n;
}

/* -c: the table of host copies. */
static int copy_table(int iterations)
{
    static const size_t offsets[] = {0, 16, 4080};
    const size_t max = (size_t)4 << 20;
    unsigned char *src = NULL, *dst = NULL;

    if (posix_memalign((void **)&src, 4096, max) != 0 ||
        posix_memalign((void **)&dst, 4096, max + 4096) != 0) {
        fprintf(stderr, "weft_reduce_bench: cannot allocate 2 x %zu bytes\n", max);
        free(src);
        return 1;
    }
    for (size_t i = 0; i < max; i++) {
        src[i] = (unsigned char)(i * 7 + (i >> 12));
    }
    memset(dst, 2, max + 4096);
    printf("# host copies: weft__host_copy (its loop: %s) against memcpy, GB/s, best of %d runs\n",
           weft__host_copy_loop(4096) ? "from 2 KiB, AVX2" : "not on this CPU: memcpy", iterations);
    printf("%10s %12s %12s %12s %8s\n", "bytes", "dst-src%4K", "memcpy", "weft", "ratio");
    for (size_t bytes = 4096; bytes <= max; bytes *= 4) {
        for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]); k++) {
            double m = best_copy(0, dst + offsets[k], src, bytes, iterations), w;

            memset(dst, 2, max + 4096); /* what memcpy wrote is not taken for weft's copy */
            w = best_copy(1, dst + offsets[k], src, bytes, iterations);

            if (memcmp(dst + offsets[k], src, bytes) != 0) {
                fprintf(stderr,
                        "weft_reduce_bench: weft__host_copy of %zu bytes to %zu past the "
                        "source modulo 4 KiB copied wrong bytes\n",
                        bytes, offsets[k]);
                free(src);
                free(dst);
                return 1;
            }
            printf("%10zu %12zu %12.1f %12.1f %8.2f\n", bytes, offsets[k], (double)bytes / m * 1e-9,
                   (double)bytes / w * 1e-9, m / w);
        }
    }
    free(src);
    free(dst);
    return 0;
}

/* The table of -d's memory type; NULL after printing why (*exit_p: 2 usage, 77 unusable). */
static const weft_device_ops_t *parse_device(const char *name, const char *argv0, int *exit_p)
{
    static const weft_memtype_t types[] = {WEFT_MEM_HOST, WEFT_MEM_EMU, WEFT_MEM_CUDA};
    const weft_device_ops_t *dev;

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strcmp(name, weft_memtype_name(types[i])) != 0) {
            continue;
        }
        dev = weft__device_ops(types[i]);
        if (dev == NULL) {
            fprintf(stderr, "%s: -d %s cannot be used here: %s\n", argv0, name,
                    weft__device_unavailable(types[i]));
            *exit_p = 77;
        }
        return dev;
    }
    usage(argv0);
    *exit_p = 2;
    return NULL;
}

int main(int argc, char **argv)
{
    const weft_device_ops_t *dev = &weft__device_host_ops;
    size_t bytes = (size_t)64 << 20;
    int iterations = 20;
    buffers_t buf = {0};
    double *times = NULL;
    timing_t copy = {0};
    weft_status_t status = WEFT_OK;
    int exit_code = 0;
    int copies = 0;
    int opt;

    while ((opt = getopt(argc, argv, "cd:p")) != -1) {
        if (opt == 'p') {
            weft__host_reduce_simd(0);
            continue;
        }
        if (opt == 'c') {
            copies = 1;
            continue;
        }
        if (opt != 'd') {
            usage(argv[0]);
            return 2;
        }
        dev = parse_device(optarg, argv[0], &exit_code);
        if (dev == NULL) {
            return exit_code;
        }
    }
    argc -= optind - 1;
    argv += optind - 1;
    if (copies) {
        if (argc > 2 || (argc > 1 && (iterations = atoi(argv[1])) < 1)) {
            usage(argv[0]);
            return 2;
        }
        return copy_table(iterations);
    }
    if (argc > 3 || (argc > 1 && parse_size(argv[1], &bytes) != 0) ||
        (argc > 2 && (iterations = atoi(argv[2])) < 1)) {
        usage(argv[0]);
        return 2;
    }
    /* whole elements of every dtype */
    bytes -= bytes % 8;
    if (bytes == 0) {
        fprintf(stderr, "%s: bytes must be at least 8\n", argv[0]);
        return 2;
    }
    buf.dev = dev;
    buf.bytes = bytes;
    times = malloc((size_t)iterations * sizeof(*times));
    buf.stage = calloc(1, bytes);
    if (times == NULL || buf.stage == NULL || dev->alloc(bytes, (void **)&buf.dst) != WEFT_OK ||
        dev->alloc(bytes, (void **)&buf.a) != WEFT_OK ||
        dev->alloc(bytes, (void **)&buf.b) != WEFT_OK) {
        fprintf(stderr, "%s: cannot allocate 3 x %zu bytes of %s memory\n", argv[0], bytes,
                dev->name);
        status = WEFT_ERR_NO_MEMORY;
        goto out;
    }
    /* fault every page in before timing */
    status = dev->copy(buf.dst, buf.stage, bytes);
    if (status != WEFT_OK) {
        fprintf(stderr, "%s: %s copy failed: %s\n", argv[0], dev->name, weft_last_error());
        goto out;
    }

    printf("weft_reduce_bench: %s memory, %zu bytes per buffer, %d iterations after 1 warm-up\n",
           dev->name, bytes, iterations);
    printf("%-20s %12s %19s %19s %15s\n", "operation", "bytes", "out GB/s", "traffic GB/s",
           "vs copy");
    printf("%-20s %12s %19s %19s %15s\n", "", "", "best / median", "best / median",
           "best / median");
    for (size_t k = 0; k < sizeof(bench_ops) / sizeof(bench_ops[0]); k++) {
        const bench_op_t *op = &bench_ops[k];
        timing_t t;
        double traffic = (double)(bytes * op->traffic_factor);

        status = fill_inputs(&buf, op->is_memcpy ? WEFT_FLOAT32 : op->dtype);
        if (status == WEFT_OK) {
            status = measure(op, &buf, iterations, times, &t);
        }
        if (status != WEFT_OK) {
            fprintf(stderr, "%s: %s failed: %s\n", argv[0], op->name, weft_last_error());
            goto out;
        }
        if (op->is_memcpy) {
            copy = t;
        }
        printf("%-20s %12zu %8.2f / %8.2f %8.2f / %8.2f %6.2f / %6.2f\n",
               !op->is_memcpy                  ? op->name
               : dev->memtype == WEFT_MEM_HOST ? "memcpy"
                                               : "copy d2d",
               bytes, (double)bytes / t.best_s * 1e-9, (double)bytes / t.median_s * 1e-9,
               traffic / t.best_s * 1e-9, traffic / t.median_s * 1e-9,
               traffic / t.best_s / ((double)(2 * bytes) / copy.best_s),
               traffic / t.median_s / ((double)(2 * bytes) / copy.median_s));
    }

out:
    if (buf.b != NULL) {
        dev->free(buf.b);
    }
    if (buf.a != NULL) {
        dev->free(buf.a);
    }
    if (buf.dst != NULL) {
        dev->free(buf.dst);
    }
    free(buf.stage);
    free(times);
    return status == WEFT_OK ? 0 : 1;
}
