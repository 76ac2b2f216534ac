/*
 * weft_reduce_bench [bytes] [iterations]: how close the host reduction runs to memory bandwidth.
 *
 * Times memcpy of `bytes` (default 64 MiB) against a 2-input SUM into `bytes` of output through
 * weft__host_reduce: FLOAT32, then FLOAT16 and FLOAT64 for information. Each is run once to warm
 * up, then `iterations` times (default 20); the table gives the best and the median run as GB/s
 * (10^9 bytes per second) of output and of memory traffic: memcpy reads and writes `bytes`
 * (2x), a 2-input reduce reads two inputs and writes one output (3x). The last column is the
 * reduce's traffic rate over memcpy's: near 1 means the loop is as bandwidth-bound as a copy.
 * Write-allocate traffic is not counted: a plain store loop reads each dst line before writing
 * it, which a large memcpy may avoid (non-temporal stores, rep movsb), so a loop running at full
 * bandwidth can still show a ratio below 1.
 *
 * Sizes accept a k, m or g suffix (powers of 1024).
 */
#include "device/device.h"
#include "device/host/half.h"
#include "device/host/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int is_memcpy;
    weft_dtype_t dtype;
    size_t traffic_factor; /* bytes moved per output byte */
} bench_op_t;

typedef struct {
    unsigned char *dst;
    unsigned char *a;
    unsigned char *b;
    size_t bytes;
} buffers_t;

typedef struct {
    double best_s;
    double median_s;
} timing_t;

/* memcpy first: the reductions are compared with it */
static const bench_op_t bench_ops[] = {
    {.name = "memcpy", .is_memcpy = 1, .dtype = WEFT_UINT8, .traffic_factor = 2},
    {.name = "reduce float32 sum", .dtype = WEFT_FLOAT32, .traffic_factor = 3},
    {.name = "reduce float16 sum", .dtype = WEFT_FLOAT16, .traffic_factor = 3},
    {.name = "reduce float64 sum", .dtype = WEFT_FLOAT64, .traffic_factor = 3},
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

/* Inputs of normal values near 1, written as dtype, so that no run meets denormals or NaNs. */
static void fill_inputs(const buffers_t *buf, weft_dtype_t dtype)
{
    size_t count = buf->bytes / weft_dtype_size(dtype);

    for (size_t i = 0; i < count; i++) {
        float x = 1.0f + (float)(i % 1024) / 1024.0f;
        float y = 2.0f - (float)(i % 512) / 512.0f;

        switch (dtype) {
        case WEFT_FLOAT16:
            ((uint16_t *)buf->a)[i] = weft__float_to_f16(x);
            ((uint16_t *)buf->b)[i] = weft__float_to_f16(y);
            break;
        case WEFT_FLOAT64:
            ((double *)buf->a)[i] = x;
            ((double *)buf->b)[i] = y;
            break;
        default:
            ((float *)buf->a)[i] = x;
            ((float *)buf->b)[i] = y;
            break;
        }
    }
}

static weft_status_t run_once(const bench_op_t *op, const buffers_t *buf)
{
    const void *srcs[2] = {buf->a, buf->b};

    if (op->is_memcpy) {
        memcpy(buf->dst, buf->a, buf->bytes);
        return WEFT_OK;
    }
    return weft__host_reduce(buf->dst, srcs, 2, buf->bytes / weft_dtype_size(op->dtype), op->dtype,
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

int main(int argc, char **argv)
{
    const weft_device_ops_t *host = &weft__device_host_ops;
    size_t bytes = (size_t)64 << 20;
    int iterations = 20;
    buffers_t buf = {0};
    double *times = NULL;
    timing_t copy = {0};
    weft_status_t status = WEFT_OK;

    if (argc > 3 || (argc > 1 && parse_size(argv[1], &bytes) != 0) ||
        (argc > 2 && (iterations = atoi(argv[2])) < 1)) {
        fprintf(stderr, "usage: %s [bytes[k|m|g]] [iterations]\n", argv[0]);
        return 2;
    }
    /* whole elements of every dtype */
    bytes -= bytes % 8;
    if (bytes == 0) {
        fprintf(stderr, "%s: bytes must be at least 8\n", argv[0]);
        return 2;
    }
    buf.bytes = bytes;
    times = malloc((size_t)iterations * sizeof(*times));
    if (times == NULL || host->alloc(bytes, (void **)&buf.dst) != WEFT_OK ||
        host->alloc(bytes, (void **)&buf.a) != WEFT_OK ||
        host->alloc(bytes, (void **)&buf.b) != WEFT_OK) {
        fprintf(stderr, "%s: cannot allocate 3 x %zu bytes\n", argv[0], bytes);
        status = WEFT_ERR_NO_MEMORY;
        goto out;
    }
    /* fault every page in before timing */
    memset(buf.dst, 0, bytes);

    printf("weft_reduce_bench: %zu bytes per buffer, %d iterations after 1 warm-up\n", bytes,
           iterations);
    printf("%-20s %12s %19s %19s %15s\n", "operation", "bytes", "out GB/s", "traffic GB/s",
           "vs memcpy");
    printf("%-20s %12s %19s %19s %15s\n", "", "", "best / median", "best / median",
           "best / median");
    for (size_t k = 0; k < sizeof(bench_ops) / sizeof(bench_ops[0]); k++) {
        const bench_op_t *op = &bench_ops[k];
        timing_t t;
        double traffic = (double)(bytes * op->traffic_factor);

        fill_inputs(&buf, op->is_memcpy ? WEFT_FLOAT32 : op->dtype);
        status = measure(op, &buf, iterations, times, &t);
        if (status != WEFT_OK) {
            fprintf(stderr, "%s: %s failed: %s\n", argv[0], op->name, weft_last_error());
            goto out;
        }
        if (op->is_memcpy) {
            copy = t;
        }
        printf("%-20s %12zu %8.2f / %8.2f %8.2f / %8.2f %6.2f / %6.2f\n", op->name, bytes,
               (double)bytes / t.best_s * 1e-9, (double)bytes / t.median_s * 1e-9,
               traffic / t.best_s * 1e-9, traffic / t.median_s * 1e-9,
               traffic / t.best_s / ((double)(2 * bytes) / copy.best_s),
               traffic / t.median_s / ((double)(2 * bytes) / copy.median_s));
    }

out:
    host->free(buf.b);
    host->free(buf.a);
    host->free(buf.dst);
    free(times);
    return status == WEFT_OK ? 0 : 1;
}
