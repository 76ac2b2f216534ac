/*
 * The CUDA backend.
 *
 * cuda_pure runs on every machine: kernel names against the embedded fatbin, the vector-width
 * and grid choices, the IPC handle layout, the CUresult translation, and the loader: the backend
 * either loads or says why, and cuda_probe is run against stand-ins for libcuda.so.1 (the
 * toolkit's stub driver, whose cuInit fails; a library that is not a driver; none at all); and
 * cuda_fake_check runs the table's host side against a fake driver (fake_cuda.c).
 *
 * cuda_gpu needs a usable GPU and skips otherwise: every dtype x op reduced on the GPU against
 * the host table on the same inputs (bit for bit; SUM, PROD and AVG may differ only in which
 * NaN they produce, as IEEE arithmetic leaves NaN payloads open), with 2, 3 and more inputs than
 * travel in the kernel parameters, aligned (vector) and misaligned (scalar) buffers, in place and
 * with host inputs; avg_finalize; copies; alloc/free checks; stream ordering through flags; and
 * IPC between two processes (fork before either touches CUDA).
 */
#include "device/cuda/internal.h"
#include "device/cuda/kernel_args.h"
#include "device/cuda/util.h"
#include "device/device.h"
#include "device/host/half.h"
#include "device/host/host.h"
#include "tests/harness.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef WEFT_TEST_CUDA_HOME
#define WEFT_TEST_CUDA_HOME "/usr/local/cuda"
#endif

/* ---------------------------------------------------------------- cuda_pure */

static int in_fatbin(const char *section)
{
    size_t len = strlen(section) + 1; /* with its NUL: a whole name, not a prefix */

    return memmem(weft__cuda_fatbin, weft__cuda_fatbin_size, section, len) != NULL;
}

Test(cuda_pure, kernel_names_match_the_fatbin)
{
    char name[64];
    char section[80];
    int kernels = 0;

    for (int d = 0; d < WEFT_DTYPE_COUNT; d++) {
        for (int o = 0; o < WEFT_OP_COUNT; o++) {
            int valid = weft__op_valid_for_dtype((weft_op_t)o, (weft_dtype_t)d);
            char expected[64];

            cr_assert_eq(weft__cuda_kernel_name((weft_op_t)o, (weft_dtype_t)d, name, sizeof(name)),
                         valid ? 0 : -1, "%s %s", weft_op_name(o), weft_dtype_name(d));
            if (!valid) {
                continue;
            }
            snprintf(expected, sizeof(expected), "weft_reduce_%s_%s",
                     weft_op_name(o == WEFT_AVG ? WEFT_SUM : o), weft_dtype_name(d));
            cr_assert_str_eq(name, expected);
            snprintf(section, sizeof(section), ".text.%s", name);
            cr_assert(in_fatbin(section), "%s is not in the embedded fatbin", name);
            kernels += o != WEFT_AVG;
        }
        cr_assert_eq(weft__cuda_avg_kernel_name((weft_dtype_t)d, name, sizeof(name)), 0);
        snprintf(section, sizeof(section), ".text.%s", name);
        cr_assert(in_fatbin(section), "%s is not in the embedded fatbin", name);
    }
    /* 6 integer types x 10 ops, 6 float types (two of 8 bits) x 4 */
    cr_assert_eq(kernels, 84);
    cr_assert_eq(weft__cuda_kernel_name(WEFT_SUM, WEFT_FLOAT32, name, 8), -1);
    cr_assert_eq(weft__cuda_kernel_name(WEFT_BAND, WEFT_FLOAT32, name, sizeof(name)), -1);
    cr_assert_eq(weft__cuda_kernel_name(WEFT_SUM, WEFT_DTYPE_COUNT, name, sizeof(name)), -1);
    cr_assert_eq(weft__cuda_avg_kernel_name(WEFT_DTYPE_COUNT, name, sizeof(name)), -1);
    cr_assert(!in_fatbin(".text.weft_reduce_band_float32"));
}

Test(cuda_pure, vector_only_when_every_pointer_is_aligned)
{
    _Alignas(16) static char buf[256];
    const void *srcs[3] = {buf + 32, buf + 64, buf + 128};

    cr_assert_eq(weft__cuda_vector_ok(buf, srcs, 3), 1);
    cr_assert_eq(weft__cuda_vector_ok(buf + 4, srcs, 3), 0);
    srcs[2] = buf + 136;
    cr_assert_eq(weft__cuda_vector_ok(buf, srcs, 3), 0);
    cr_assert_eq(weft__cuda_vector_ok(buf, srcs, 2), 1);
    srcs[0] = buf + 1;
    cr_assert_eq(weft__cuda_vector_ok(buf, srcs, 1), 0);
}

Test(cuda_pure, grid_covers_the_work_up_to_a_few_blocks_per_sm)
{
    /* one element per thread: ceil(count / 256) */
    cr_assert_eq(weft__cuda_grid_blocks(1, 4, 0, 132, 4), 1);
    cr_assert_eq(weft__cuda_grid_blocks(256, 4, 0, 132, 4), 1);
    cr_assert_eq(weft__cuda_grid_blocks(257, 4, 0, 132, 4), 2);
    /* 16 bytes per thread: 4 floats, 16 int8, 2 doubles */
    cr_assert_eq(weft__cuda_grid_blocks(1024, 4, 1, 132, 4), 1);
    cr_assert_eq(weft__cuda_grid_blocks(1025, 4, 1, 132, 4), 2);
    cr_assert_eq(weft__cuda_grid_blocks(4096 * 16, 1, 1, 132, 4), 16);
    cr_assert_eq(weft__cuda_grid_blocks(512 * 2, 8, 1, 132, 4), 2);
    /* capped at SMs x blocks per SM; grid-stride loops cover the rest */
    cr_assert_eq(weft__cuda_grid_blocks((uint64_t)1 << 30, 4, 1, 132, 4), 528);
    cr_assert_eq(weft__cuda_grid_blocks((uint64_t)1 << 40, 1, 0, 108, 4), 432);
    /* never 0 blocks, and a bad SM count is taken as 1 */
    cr_assert_eq(weft__cuda_grid_blocks(0, 4, 1, 132, 4), 1);
    cr_assert_eq(weft__cuda_grid_blocks(1 << 20, 4, 0, 0, 4), 4);
}

Test(cuda_pure, ipc_handle_round_trip)
{
    unsigned char raw[WEFT_CUDA_IPC_RAW];
    unsigned char back[WEFT_CUDA_IPC_RAW];
    unsigned char handle[WEFT_DEVICE_IPC_MAX];
    uint64_t offset = 0;

    cr_assert_leq(WEFT_CUDA_IPC_HANDLE_SIZE, WEFT_DEVICE_IPC_MAX);
    for (int i = 0; i < WEFT_CUDA_IPC_RAW; i++) {
        raw[i] = (unsigned char)(i * 37 + 11);
    }
    memset(handle, 0xee, sizeof(handle));
    weft__cuda_ipc_pack(handle, raw, 0x123456789abcULL);
    for (size_t i = WEFT_CUDA_IPC_HANDLE_SIZE; i < sizeof(handle); i++) {
        cr_assert_eq(handle[i], 0xee, "byte %zu past the handle was written", i);
    }
    cr_assert_eq(weft__cuda_ipc_unpack(handle, back, &offset), 0);
    cr_assert_arr_eq(back, raw, sizeof(raw));
    cr_assert_eq(offset, 0x123456789abcULL);
    handle[0] = 'X';
    cr_assert_eq(weft__cuda_ipc_unpack(handle, back, &offset), -1);
    handle[0] = 'W';
    handle[4] ^= 0xff; /* version */
    cr_assert_eq(weft__cuda_ipc_unpack(handle, back, &offset), -1);
}

/* weft_last_error() starts with the status's description */
static int ends_with(const char *text, const char *tail)
{
    size_t n = strlen(text);
    size_t k = strlen(tail);

    return n >= k && strcmp(text + n - k, tail) == 0;
}

Test(cuda_pure, cuda_errors_become_weft_statuses_naming_them)
{
    static const struct {
        CUresult result;
        weft_status_t status;
    } cases[] = {
        {CUDA_ERROR_OUT_OF_MEMORY, WEFT_ERR_NO_MEMORY},
        {CUDA_ERROR_INVALID_VALUE, WEFT_ERR_INVALID_ARG},
        {CUDA_ERROR_INVALID_HANDLE, WEFT_ERR_INVALID_ARG},
        {CUDA_ERROR_NO_DEVICE, WEFT_ERR_UNSUPPORTED},
        {CUDA_ERROR_NO_BINARY_FOR_GPU, WEFT_ERR_UNSUPPORTED},
        {CUDA_ERROR_LAUNCH_FAILED, WEFT_ERR_DEVICE},
        {CUDA_ERROR_ILLEGAL_ADDRESS, WEFT_ERR_DEVICE},
    };

    cr_assert_eq(weft__cuda_status(CUDA_SUCCESS, "CUDA_SUCCESS", "no error", "x"), WEFT_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(weft__cuda_status(cases[i].result, "NAME_OF_IT", "what it means", "cuda op"),
                     cases[i].status, "CUresult %d", (int)cases[i].result);
        cr_assert(ends_with(weft_last_error(), ": cuda op: NAME_OF_IT (what it means)"), "%s",
                  weft_last_error());
    }
    cr_assert_eq(weft__cuda_status(999999, NULL, NULL, "cuda op"), WEFT_ERR_DEVICE);
    cr_assert(ends_with(weft_last_error(), ": cuda op: CUresult 999999 (unknown to this driver)"),
              "%s", weft_last_error());
}

Test(cuda_pure, backend_loads_or_says_why)
{
    const weft_device_ops_t *ops = weft__device_ops(WEFT_MEM_CUDA);
    const char *why = weft__device_unavailable(WEFT_MEM_CUDA);
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

    if (ops == NULL) {
        cr_assert_gt(strlen(why), 10, "no reason given");
        if (driver == NULL) {
            cr_assert(strstr(why, "cannot load the CUDA driver library libcuda.so.1") != NULL, "%s",
                      why);
        }
        return;
    }
    cr_assert_not_null(driver);
    cr_assert_str_eq(why, "");
    cr_assert_str_eq(ops->name, "cuda");
    cr_assert_eq(ops->memtype, WEFT_MEM_CUDA);
    cr_assert_eq(ops->ipc_handle_size, WEFT_CUDA_IPC_HANDLE_SIZE);
    cr_assert(ops->owns && ops->alloc && ops->free && ops->copy && ops->reduce &&
              ops->avg_finalize && ops->stream_owns && ops->stream_create && ops->stream_destroy &&
              ops->stream_sync && ops->memcpy_async && ops->host_alloc && ops->host_free &&
              ops->stream_write_flag && ops->stream_wait_flag && ops->ipc_export &&
              ops->ipc_import && ops->ipc_close);
}

static const char *builddir(void)
{
    const char *dir = getenv("top_builddir");

    return dir != NULL ? dir : ".";
}

/* Runs `env` tests/device/<program> `args` with LD_LIBRARY_PATH=dir; its last output line in
 * out. */
static void run_program_with(const char *env, const char *program, const char *args,
                             const char *dir, char *out, size_t len)
{
    char command[1024];
    char line[512];
    FILE *pipe;

    snprintf(command, sizeof(command), "%s LD_LIBRARY_PATH='%s' '%s/tests/device/%s' %s", env, dir,
             builddir(), program, args);
    pipe = popen(command, "r");
    cr_assert_not_null(pipe);
    out[0] = '\0';
    while (fgets(line, sizeof(line), pipe) != NULL) {
        snprintf(out, len, "%s", line);
    }
    cr_assert_eq(pclose(pipe), 0, "%s: %s", command, out);
    cr_assert_neq(out[0], '\0', "%s printed nothing", command);
}

static void run_program(const char *program, const char *dir, char *out, size_t len)
{
    run_program_with("", program, "", dir, out, len);
}

static void run_probe(const char *dir, char *out, size_t len)
{
    run_program("cuda_probe", dir, out, len);
}

/* A directory holding libcuda.so.1 -> target (target NULL: an empty directory). */
static void stand_in(char *dir, const char *target)
{
    char link[512];

    strcpy(dir, "/tmp/weft_test_cuda_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    if (target != NULL) {
        snprintf(link, sizeof(link), "%s/libcuda.so.1", dir);
        cr_assert_eq(symlink(target, link), 0);
    }
}

static void remove_stand_in(const char *dir)
{
    char link[512];

    snprintf(link, sizeof(link), "%s/libcuda.so.1", dir);
    unlink(link);
    rmdir(dir);
}

Test(cuda_pure, stub_driver_fails_in_cuinit_with_a_reason)
{
    const char *stub = WEFT_TEST_CUDA_HOME "/lib64/stubs/libcuda.so";
    char dir[64];
    char out[512];

    if (access(stub, R_OK) != 0) {
        cr_skip_test("the toolkit has no stub driver at %s", stub);
    }
    stand_in(dir, stub);
    run_probe(dir, out, sizeof(out));
    remove_stand_in(dir);
    /* every symbol resolved (the stub exports the whole API), then cuInit refuses */
    cr_assert_str_eq(out, "unavailable: cuInit failed: the libcuda.so.1 found is the CUDA "
                          "toolkit's stub library, not a driver\n");
}

Test(cuda_pure, library_that_is_not_a_driver_is_named)
{
    void *libm = dlopen("libm.so.6", RTLD_NOW);
    struct link_map *map = NULL;
    char dir[64];
    char out[512];
    char expected[512];

    cr_assert_not_null(libm);
    cr_assert_eq(dlinfo(libm, RTLD_DI_LINKMAP, &map), 0);
    stand_in(dir, map->l_name);
    run_probe(dir, out, sizeof(out));
    remove_stand_in(dir);
    snprintf(expected, sizeof(expected),
             "unavailable: the CUDA driver libcuda.so.1 lacks cuGetErrorName: the driver is "
             "older than CUDA %d.%d, which weft was built with\n",
             CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
    cr_assert_str_eq(out, expected);
}

Test(cuda_pure, no_driver_is_named)
{
    char dir[64];
    char out[512];
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

    if (driver != NULL) {
        cr_skip_test("this machine has a CUDA driver in the loader's default path");
    }
    stand_in(dir, NULL);
    run_probe(dir, out, sizeof(out));
    remove_stand_in(dir);
    cr_assert(strncmp(out, "unavailable: cannot load the CUDA driver library libcuda.so.1 (", 63) ==
                  0,
              "%s", out);
}

/* cuda_fake_check with the fake driver, env settings (none of the launchers' local ranks but
 * those) and args; its last output line in out. */
static void run_fake(const char *env, const char *args, char *out, size_t len)
{
    char fake[512];
    char dir[64];
    char unset[512];

    snprintf(fake, sizeof(fake), "%s/tests/device/.libs/libfake_cuda.so", builddir());
    cr_assert_eq(access(fake, R_OK), 0, "%s is not built", fake);
    stand_in(dir, fake);
    snprintf(unset, sizeof(unset),
             "env -u LOCAL_RANK -u OMPI_COMM_WORLD_LOCAL_RANK -u SLURM_LOCALID -u MPI_LOCALRANKID "
             "-u MV2_COMM_WORLD_LOCAL_RANK -u WEFT_CUDA_DEVICE %s",
             env);
    run_program_with(unset, "cuda_fake_check", args, dir, out, len);
    remove_stand_in(dir);
    out[strcspn(out, "\n")] = '\0';
}

/* The table's host side against fake_cuda.c, a libcuda.so.1 that runs on the CPU
 * (cuda_fake_check says what it checks). */
Test(cuda_pure, host_side_against_a_fake_driver)
{
    char out[512];

    run_fake("", "", out, sizeof(out));
    cr_assert(strstr(out, "checks passed") != NULL, "%s", out);
    /* a device that can flush remote writes: stream waits flush them */
    run_fake("FAKE_CUDA_FLUSH=1", "", out, sizeof(out));
    cr_assert(strstr(out, "checks passed") != NULL, "with FAKE_CUDA_FLUSH=1: %s", out);
}

/* Without a current context, weft takes WEFT_CUDA_DEVICE, else the local rank modulo the
 * devices (the first launcher variable set), else device 0, and retains its primary context;
 * with one, the application's context (its primary context retained once more). */
Test(cuda_pure, device_chosen_by_setting_or_local_rank)
{
    static const struct {
        const char *env;
        const char *args;
        const char *expect;
    } cases[] = {
        {"", "device", "device 0, primary retains 1"},
        {"FAKE_CUDA_DEVICES=4 OMPI_COMM_WORLD_LOCAL_RANK=2", "device",
         "device 2, primary retains 1"},
        {"FAKE_CUDA_DEVICES=4 SLURM_LOCALID=3", "device", "device 3, primary retains 1"},
        {"FAKE_CUDA_DEVICES=4 LOCAL_RANK=5 OMPI_COMM_WORLD_LOCAL_RANK=2", "device",
         "device 1, primary retains 1"},
        {"FAKE_CUDA_DEVICES=4 WEFT_CUDA_DEVICE=3 OMPI_COMM_WORLD_LOCAL_RANK=2", "device",
         "device 3, primary retains 1"},
        {"FAKE_CUDA_DEVICES=4 OMPI_COMM_WORLD_LOCAL_RANK=2", "device 3",
         "device 3, primary retains 2"},
        {"FAKE_CUDA_DEVICES=4 WEFT_CUDA_DEVICE=7", "device",
         "device: device error: cuda alloc of 64 bytes: CUDA cannot be used: WEFT_CUDA_DEVICE is "
         "7, but the driver sees 4 device(s)"},
    };
    char out[512];

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        run_fake(cases[c].env, cases[c].args, out, sizeof(out));
        cr_assert_str_eq(out, cases[c].expect, "%s cuda_fake_check %s", cases[c].env,
                         cases[c].args);
    }
}

/* A child forked after weft set CUDA up: its CUDA calls fail naming the fork (the parent's go
 * on). */
Test(cuda_pure, forked_child_is_told)
{
    char out[512];

    run_fake("", "fork", out, sizeof(out));
    cr_assert(strstr(out, "fork: WEFT_ERR_DEVICE") == out && strstr(out, "was forked after weft") &&
                  strstr(out, "exec in the child"),
              "%s", out);
}

/* ----------------------------------------------------------------- cuda_gpu */

static const weft_device_ops_t *gpu_or_skip(void)
{
    const weft_device_ops_t *cu = weft__device_ops(WEFT_MEM_CUDA);

    if (cu == NULL) {
        cr_skip_test("no usable CUDA GPU: %s", weft__device_unavailable(WEFT_MEM_CUDA));
    }
    return cu;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static int is_float(weft_dtype_t d)
{
    return d == WEFT_FLOAT16 || d == WEFT_BFLOAT16 || d == WEFT_FLOAT32 || d == WEFT_FLOAT64 ||
           d == WEFT_FLOAT8_E4M3 || d == WEFT_FLOAT8_E5M2;
}

/* Integers: random bits. Floats: small values with a few exact sums, and every 61st element a
 * special (NaN, +-inf, +-0, a subnormal). */
static void fill(weft_dtype_t d, void *buf, size_t count)
{
    static const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, 3.0f};

    for (size_t i = 0; i < count; i++) {
        float f = (float)((int64_t)(harness_xorshift(&rng_state) % 4001) - 2000) / 64.0f;
        uint64_t bits = harness_xorshift(&rng_state);

        if (i % 61 == 7) {
            f = specials[harness_xorshift(&rng_state) % 8];
        }
        switch (d) {
        case WEFT_FLOAT16:
            ((uint16_t *)buf)[i] = weft__float_to_f16(f);
            break;
        case WEFT_BFLOAT16:
            ((uint16_t *)buf)[i] = weft__float_to_bf16(f);
            break;
        case WEFT_FLOAT8_E4M3:
            ((uint8_t *)buf)[i] = weft__float_to_f8e4m3(f);
            break;
        case WEFT_FLOAT8_E5M2:
            ((uint8_t *)buf)[i] = weft__float_to_f8e5m2(f);
            break;
        case WEFT_FLOAT32:
            ((float *)buf)[i] = f;
            break;
        case WEFT_FLOAT64:
            ((double *)buf)[i] = i % 61 == 7 ? (double)f : (double)f * (1.0 + 1.0 / 3.0);
            break;
        default:
            memcpy((char *)buf + i * weft_dtype_size(d), &bits, weft_dtype_size(d));
            break;
        }
    }
}

static int is_nan_elem(weft_dtype_t d, const void *p)
{
    uint16_t h;

    switch (d) {
    case WEFT_FLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    case WEFT_BFLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    case WEFT_FLOAT8_E4M3:
        return (*(const uint8_t *)p & 0x7f) == 0x7f;
    case WEFT_FLOAT8_E5M2:
        return (*(const uint8_t *)p & 0x7f) > 0x7c;
    case WEFT_FLOAT32:
        return isnan(*(const float *)p);
    case WEFT_FLOAT64:
        return isnan(*(const double *)p);
    default:
        return 0;
    }
}

/* Bit for bit, except that arithmetic (SUM, PROD, AVG) may produce a different NaN. */
static void assert_same(weft_dtype_t d, weft_op_t op, const void *got, const void *want,
                        size_t count, const char *what)
{
    size_t size = weft_dtype_size(d);
    int any_nan = is_float(d) && (op == WEFT_SUM || op == WEFT_PROD || op == WEFT_AVG);

    for (size_t i = 0; i < count; i++) {
        const char *g = (const char *)got + i * size;
        const char *w = (const char *)want + i * size;

        if (memcmp(g, w, size) == 0 || (any_nan && is_nan_elem(d, g) && is_nan_elem(d, w))) {
            continue;
        }
        cr_assert_fail("%s %s %s: element %zu of %zu differs from the host table", what,
                       weft_op_name(op), weft_dtype_name(d), i, count);
    }
}

/* One reduce of nsrcs inputs of count elements at element offset `shift` (0: aligned,
 * vector path; 1: misaligned, scalar path), on the GPU and on the host. Input 0 stays in host
 * memory when host_input is set; with in_place, dst is input 1. */
static void check_reduce(const weft_device_ops_t *cu, weft_dtype_t d, weft_op_t op, int nsrcs,
                         size_t count, size_t shift, int host_input, int in_place)
{
    size_t size = weft_dtype_size(d);
    size_t bytes = (count + shift) * size;
    void *host_in[40];
    void *dev_in[40];
    const void *srcs[40];
    const void *host_srcs[40];
    void *dev_dst;
    void *want = malloc(bytes);
    void *got = malloc(bytes);
    char what[96];

    cr_assert(nsrcs <= 40 && want != NULL && got != NULL);
    snprintf(what, sizeof(what), "%d inputs x %zu (shift %zu%s%s)", nsrcs, count, shift,
             host_input ? ", host input" : "", in_place ? ", in place" : "");
    for (int j = 0; j < nsrcs; j++) {
        host_in[j] = malloc(bytes);
        cr_assert_not_null(host_in[j]);
        fill(d, host_in[j], count + shift);
        cr_assert_eq(cu->alloc(bytes, &dev_in[j]), WEFT_OK, "%s", weft_last_error());
        cr_assert_eq(cu->copy(dev_in[j], host_in[j], bytes), WEFT_OK, "%s", weft_last_error());
        srcs[j] = (const char *)dev_in[j] + shift * size;
        host_srcs[j] = (const char *)host_in[j] + shift * size;
    }
    if (host_input) {
        srcs[0] = host_srcs[0];
    }
    cr_assert_eq(cu->alloc(bytes, &dev_dst), WEFT_OK);
    if (in_place) {
        cr_assert_eq(
            weft__host_reduce((char *)host_in[1] + shift * size, host_srcs, nsrcs, count, d, op),
            WEFT_OK);
        memcpy(want, host_in[1], bytes);
        cr_assert_eq(cu->reduce((char *)dev_in[1] + shift * size, srcs, nsrcs, count, d, op),
                     WEFT_OK, "%s", weft_last_error());
        cr_assert_eq(cu->copy(got, dev_in[1], bytes), WEFT_OK);
    } else {
        cr_assert_eq(weft__host_reduce((char *)want + shift * size, host_srcs, nsrcs, count, d, op),
                     WEFT_OK);
        cr_assert_eq(cu->reduce((char *)dev_dst + shift * size, srcs, nsrcs, count, d, op), WEFT_OK,
                     "%s", weft_last_error());
        cr_assert_eq(cu->copy(got, dev_dst, bytes), WEFT_OK);
    }
    assert_same(d, op, (char *)got + shift * size, (char *)want + shift * size, count, what);
    for (int j = 0; j < nsrcs; j++) {
        cr_assert_eq(cu->free(dev_in[j]), WEFT_OK);
        free(host_in[j]);
    }
    cr_assert_eq(cu->free(dev_dst), WEFT_OK);
    free(want);
    free(got);
}

Test(cuda_gpu, every_reduce_matches_the_host_table, .timeout = 600)
{
    const weft_device_ops_t *cu = gpu_or_skip();
    static const int nsrcs[] = {2, 3, WEFT_CUDA_INLINE_SRCS + 3};
    static const size_t counts[] = {1, 37, 4096 + 5};

    for (int d = 0; d < WEFT_DTYPE_COUNT; d++) {
        for (int o = 0; o < WEFT_OP_COUNT; o++) {
            if (!weft__op_valid_for_dtype((weft_op_t)o, (weft_dtype_t)d)) {
                continue;
            }
            for (size_t n = 0; n < 3; n++) {
                for (size_t c = 0; c < 3; c++) {
                    for (size_t shift = 0; shift < 2; shift++) {
                        check_reduce(cu, d, o, nsrcs[n], counts[c], shift, 0, 0);
                    }
                }
            }
            check_reduce(cu, d, o, 3, 1000, 0, 1, 0);
            check_reduce(cu, d, o, 3, 1000, 0, 0, 1);
            check_reduce(cu, d, o, 1, 1000, 0, 0, 0);
        }
    }
}

Test(cuda_gpu, avg_finalize_matches_the_host_table)
{
    const weft_device_ops_t *cu = gpu_or_skip();
    static const size_t divisors[] = {1, 3, 7, 1000};
    size_t count = 3001;

    for (int d = 0; d < WEFT_DTYPE_COUNT; d++) {
        size_t bytes = count * weft_dtype_size(d);
        void *want = malloc(bytes);
        void *got = malloc(bytes);
        void *dev;

        cr_assert_eq(cu->alloc(bytes, &dev), WEFT_OK);
        for (size_t k = 0; k < 4; k++) {
            fill(d, want, count);
            cr_assert_eq(cu->copy(dev, want, bytes), WEFT_OK);
            cr_assert_eq(weft__host_avg_finalize(want, count, d, divisors[k]), WEFT_OK);
            cr_assert_eq(cu->avg_finalize(dev, count, d, divisors[k]), WEFT_OK, "%s",
                         weft_last_error());
            cr_assert_eq(cu->copy(got, dev, bytes), WEFT_OK);
            assert_same(d, WEFT_AVG, got, want, count, "avg_finalize");
        }
        cr_assert_eq(cu->avg_finalize(dev, count, d, 0), WEFT_ERR_INVALID_ARG);
        cr_assert_eq(cu->free(dev), WEFT_OK);
        free(want);
        free(got);
    }
}

Test(cuda_gpu, copies_alloc_and_ownership)
{
    const weft_device_ops_t *cu = gpu_or_skip();
    size_t bytes = (1 << 20) + 3;
    unsigned char *host = malloc(bytes);
    unsigned char *back = malloc(bytes);
    unsigned char *a;
    unsigned char *b;

    for (size_t i = 0; i < bytes; i++) {
        host[i] = (unsigned char)(i * 7 + 1);
    }
    cr_assert_eq(cu->alloc(bytes, (void **)&a), WEFT_OK);
    cr_assert_eq(cu->alloc(bytes, (void **)&b), WEFT_OK);
    cr_assert_eq(cu->owns(a), 1);
    cr_assert_eq(cu->owns(a + 100), 1);
    cr_assert_eq(cu->owns(host), 0);
    cr_assert_eq(cu->owns(&bytes), 0);
    cr_assert_eq(cu->copy(a, host, bytes), WEFT_OK);      /* host -> device */
    cr_assert_eq(cu->copy(b + 1, a, bytes - 1), WEFT_OK); /* device -> device */
    cr_assert_eq(cu->copy(b, b, bytes), WEFT_OK);         /* onto itself */
    memset(back, 0, bytes);
    cr_assert_eq(cu->copy(back, b + 1, bytes - 1), WEFT_OK); /* device -> host */
    cr_assert_arr_eq(back, host, bytes - 1);
    cr_assert_eq(cu->free(a + 1), WEFT_ERR_INVALID_ARG);
    cr_assert(strstr(weft_last_error(), "not the start") != NULL, "%s", weft_last_error());
    cr_assert_eq(cu->free(host), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(cu->free(a), WEFT_OK);
    cr_assert_eq(cu->free(b), WEFT_OK);
    cr_assert_eq(cu->owns(a), 0);
    free(host);
    free(back);
}

/* Work queued after a wait on a flag does not run until the host sets it to at least the value;
 * a write queued after a copy lands after the copy. The queued copies are device to device:
 * CUDA may make a copy from pageable host memory wait for the stream, which here waits for the
 * host. */
Test(cuda_gpu, streams_order_work_through_flags, .timeout = 60)
{
    const weft_device_ops_t *cu = gpu_or_skip();
    size_t bytes = 1 << 22;
    unsigned char *host = malloc(bytes);
    unsigned char *back = malloc(bytes);
    uint32_t *go;
    uint32_t *done;
    void *stream;
    void *src;
    void *dst;

    for (size_t i = 0; i < bytes; i++) {
        host[i] = (unsigned char)(i * 13 + 5);
    }
    cr_assert_eq(cu->alloc(bytes, &src), WEFT_OK);
    cr_assert_eq(cu->alloc(bytes, &dst), WEFT_OK);
    cr_assert_eq(cu->copy(src, host, bytes), WEFT_OK);
    memset(back, 0, bytes);
    cr_assert_eq(cu->copy(dst, back, bytes), WEFT_OK);
    cr_assert_eq(cu->stream_create(&stream), WEFT_OK);
    cr_assert_eq(cu->stream_owns(stream), 1);
    cr_assert_eq(cu->stream_owns(NULL), 1);
    cr_assert_eq(weft__device_flag_alloc(cu, &go), WEFT_OK);
    cr_assert_eq(weft__device_flag_alloc(cu, &done), WEFT_OK);
    cr_assert_eq(weft__device_flag_get(go), 0);
    cr_assert_eq(weft__device_flag_get(done), 0);
    cr_assert_eq(cu->stream_wait_flag(stream, go, 2), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(cu->memcpy_async(dst, src, bytes, stream), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(cu->stream_write_flag(stream, done, 7), WEFT_OK, "%s", weft_last_error());
    usleep(100000);
    cr_assert_eq(weft__device_flag_get(done), 0, "ran before the flag was set");
    weft__device_flag_set(go, 1); /* below the value waited for */
    usleep(100000);
    cr_assert_eq(weft__device_flag_get(done), 0, "ran with the flag below 2");
    cr_assert_eq(cu->copy(back, dst, bytes), WEFT_OK); /* another stream: the copy not run yet */
    for (size_t i = 0; i < bytes; i++) {
        cr_assert_eq(back[i], 0, "byte %zu copied before the flag was set", i);
    }
    weft__device_flag_set(go, 3);
    cr_assert_eq(cu->stream_sync(stream), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft__device_flag_get(done), 7);
    cr_assert_eq(cu->copy(back, dst, bytes), WEFT_OK);
    cr_assert_arr_eq(back, host, bytes);
    cr_assert_eq(cu->stream_destroy(stream), WEFT_OK);
    cr_assert_eq(cu->stream_destroy(NULL), WEFT_ERR_INVALID_ARG);
    weft__device_flag_free(cu, go);
    weft__device_flag_free(cu, done);
    cr_assert_eq(cu->free(src), WEFT_OK);
    cr_assert_eq(cu->free(dst), WEFT_OK);
    free(host);
    free(back);
}

/* The parent exports a pointer 4 KiB into an allocation; the child imports it twice (cached),
 * checks the bytes, writes its own, closes both. Both fork before touching CUDA. */
Test(cuda_gpu, ipc_between_two_processes, .timeout = 120)
{
    int to_child[2];
    int to_parent[2];
    pid_t pid;
    int status = 0;

    cr_assert_eq(pipe(to_child), 0);
    cr_assert_eq(pipe(to_parent), 0);
    pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        unsigned char handle[WEFT_DEVICE_IPC_MAX];
        unsigned char data[4096];
        const weft_device_ops_t *cu;
        void *p1 = NULL;
        void *p2 = NULL;
        char verdict = 'x';

        close(to_child[1]);
        close(to_parent[0]);
        if (read(to_child[0], handle, sizeof(handle)) != (ssize_t)sizeof(handle)) {
            _exit(2); /* the parent skipped */
        }
        cu = weft__device_ops(WEFT_MEM_CUDA);
        if (cu != NULL && cu->ipc_import(handle, &p1) == WEFT_OK &&
            cu->ipc_import(handle, &p2) == WEFT_OK && p1 == p2 &&
            cu->copy(data, p1, sizeof(data)) == WEFT_OK) {
            verdict = 'y';
            for (size_t i = 0; i < sizeof(data); i++) {
                verdict = data[i] == (unsigned char)(i ^ 0xa5) ? verdict : 'n';
            }
            memset(data, 0x3c, sizeof(data));
            if (cu->copy(p1, data, sizeof(data)) != WEFT_OK) {
                verdict = 'w';
            }
            cu->ipc_close(p1);
            cu->ipc_close(p2);
        } else if (cu != NULL) {
            fprintf(stderr, "child: %s\n", weft_last_error());
        }
        _exit(write(to_parent[1], &verdict, 1) == 1 ? 0 : 3);
    }
    const weft_device_ops_t *cu = weft__device_ops(WEFT_MEM_CUDA);
    unsigned char handle[WEFT_DEVICE_IPC_MAX] = {0};
    unsigned char data[4096];
    unsigned char *base;
    char verdict = 0;

    close(to_child[0]);
    close(to_parent[1]);
    if (cu == NULL) {
        close(to_child[1]);
        waitpid(pid, &status, 0);
        cr_skip_test("no usable CUDA GPU: %s", weft__device_unavailable(WEFT_MEM_CUDA));
    }
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (unsigned char)(i ^ 0xa5);
    }
    cr_assert_eq(cu->alloc(3 * 4096, (void **)&base), WEFT_OK);
    cr_assert_eq(cu->copy(base + 4096, data, sizeof(data)), WEFT_OK);
    cr_assert_eq(cu->ipc_export(base + 4096, handle), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(write(to_child[1], handle, sizeof(handle)), (ssize_t)sizeof(handle));
    cr_assert_eq(read(to_parent[0], &verdict, 1), 1);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert_eq(verdict, 'y', "child saw verdict %c", verdict);
    cr_assert_eq(cu->copy(data, base + 4096, sizeof(data)), WEFT_OK);
    for (size_t i = 0; i < sizeof(data); i++) {
        cr_assert_eq(data[i], 0x3c, "byte %zu not written by the child", i);
    }
    cr_assert_eq(cu->free(base), WEFT_OK);
}
