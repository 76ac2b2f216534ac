/*
 * The emu accelerator on its own: memory (types, interior pointers, freed
 * and double-freed allocations, zero bytes), streams (argument checks,
 * ordering of many queued copies, errors returned by synchronize), flags
 * through the ops table (a stream held by a wait, written in order, two
 * streams ordered through a flag), IPC between two processes (the parent
 * exports, a forked child that dropped its inherited mapping imports,
 * reads and writes; handles with a size past the allocation, a pid whose
 * start time is not the exporter's, an fd that is no emu memory, a file of
 * another user: refused with nothing mapped), and reductions: every dtype x valid op bit-identical
 * to the host table on the same data, run on a stream worker rather than
 * in the caller (the caller's own CPU time stays a small share of the
 * process's while a large reduction runs).
 *
 * Every wait here has a deadline: flag polls and child reaping give up
 * after DEADLINE_S and fail the test.
 */
#include <criterion/criterion.h>

#include "base/config.h"
#include "base/proc.h"
#include "device/device.h"
#include "device/emu/emu.h"
#include "device/host/host.h"
#include "tests/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_S 20.0

static void setup(void)
{
    setenv("WEFT_LOG_LEVEL", "error", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
}

static void teardown(void)
{
    weft_finalize();
}

static double cpu_s(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *emu_alloc(size_t bytes)
{
    void *p = NULL;

    cr_assert_eq(weft_mem_alloc(WEFT_MEM_EMU, bytes, &p), WEFT_OK, "%s", weft_last_error());
    cr_assert_not_null(p);
    return p;
}

static weft_memtype_t type_of(const void *p)
{
    weft_memtype_t t = (weft_memtype_t)-1;

    cr_assert_eq(weft_mem_type(p, &t), WEFT_OK, "weft_mem_type(%p): %s", p, weft_last_error());
    return t;
}

static void expect_error(weft_status_t got, weft_status_t want, const char *needle,
                         const char *what)
{
    cr_assert_eq(got, want, "%s: got %s, expected %s (%s)", what, weft_status_string(got),
                 weft_status_string(want), weft_last_error());
    if (needle != NULL) {
        cr_assert_not_null(strstr(weft_last_error(), needle),
                           "%s: the message does not name \"%s\": %s", what, needle,
                           weft_last_error());
    }
}

/* ------------------------------------------------------------------ memory */

TestSuite(memory, .init = setup, .fini = teardown);

Test(memory, host_memory_is_host)
{
    char *m = malloc(100);
    int local = 0;

    cr_assert_not_null(m);
    cr_assert_eq(type_of(m), WEFT_MEM_HOST);
    cr_assert_eq(type_of(m + 99), WEFT_MEM_HOST);
    cr_assert_eq(type_of(&local), WEFT_MEM_HOST);
    cr_assert_eq(type_of(NULL), WEFT_MEM_HOST);
    free(m);
}

Test(memory, emu_pointers_and_interior_pointers_are_emu)
{
    const size_t bytes = 3 * 4096 + 17;
    unsigned char *p = emu_alloc(bytes);

    cr_assert_eq(type_of(p), WEFT_MEM_EMU);
    cr_assert_eq(type_of(p + 1), WEFT_MEM_EMU);
    cr_assert_eq(type_of(p + 4096), WEFT_MEM_EMU);
    cr_assert_eq(type_of(p + bytes - 1), WEFT_MEM_EMU);
    /* the process can touch it, and it holds what was written */
    for (size_t i = 0; i < bytes; i++) {
        p[i] = (unsigned char)(i * 7 + 3);
    }
    for (size_t i = 0; i < bytes; i++) {
        cr_assert_eq(p[i], (unsigned char)(i * 7 + 3), "byte %zu", i);
    }
    cr_assert_eq(weft_mem_free(p), WEFT_OK, "%s", weft_last_error());
}

Test(memory, many_allocations_each_known)
{
    enum { N = 48 };
    unsigned char *p[N];
    weft_memtype_t t;

    for (int i = 0; i < N; i++) {
        p[i] = emu_alloc((size_t)(i % 5) * 3000 + 1);
    }
    /* free every third, out of order: the others stay emu, the freed are refused */
    for (int i = N - 1; i >= 0; i -= 3) {
        cr_assert_eq(weft_mem_free(p[i]), WEFT_OK, "%s", weft_last_error());
    }
    for (int i = 0; i < N; i++) {
        int freed = (N - 1 - i) % 3 == 0;

        if (freed) {
            expect_error(weft_mem_type(p[i], &t), WEFT_ERR_INVALID_ARG, "ptr", "freed");
        } else {
            cr_assert_eq(type_of(p[i] + (size_t)(i % 5) * 3000), WEFT_MEM_EMU, "alloc %d", i);
        }
    }
    for (int i = 0; i < N; i++) {
        if ((N - 1 - i) % 3 != 0) {
            cr_assert_eq(weft_mem_free(p[i]), WEFT_OK, "%s", weft_last_error());
        }
    }
}

/* A long job allocates and frees emu memory without end: the table of
 * allocations (and the reserved ranges of freed ones) must stay bounded, while
 * the recently freed are still refused. */
Test(memory, freed_allocations_kept_are_bounded)
{
    const int rounds = 3 * WEFT_EMU_FREED_KEPT;
    int before = weft__emu_table_entries();
    weft_memtype_t t;
    void *p = NULL, *last = NULL;

    for (int i = 0; i < rounds; i++) {
        cr_assert_eq(weft_mem_alloc(WEFT_MEM_EMU, 4096, &p), WEFT_OK, "%s", weft_last_error());
        ((char *)p)[0] = (char)i; /* touched */
        cr_assert_eq(weft_mem_free(p), WEFT_OK, "%s", weft_last_error());
        last = p;
    }
    cr_assert_leq(weft__emu_table_entries(), before + WEFT_EMU_FREED_KEPT,
                  "%d entries after %d allocations freed (kept at most %d)",
                  weft__emu_table_entries(), rounds, WEFT_EMU_FREED_KEPT);
    expect_error(weft_mem_type(last, &t), WEFT_ERR_INVALID_ARG, "ptr",
                 "weft_mem_type of the last freed allocation");
    expect_error(weft_mem_free(last), WEFT_ERR_INVALID_ARG, "freed", "freeing it again");
    /* live allocations are untouched by the turnover */
    cr_assert_eq(weft_mem_alloc(WEFT_MEM_EMU, 100, &p), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_mem_type(p, &t), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(t, WEFT_MEM_EMU);
    cr_assert_eq(weft_mem_free(p), WEFT_OK, "%s", weft_last_error());
}

Test(memory, freed_pointer_is_invalid_arg_naming_it)
{
    unsigned char *p = emu_alloc(10000);
    weft_memtype_t t = WEFT_MEM_CUDA;

    cr_assert_eq(weft_mem_free(p), WEFT_OK, "%s", weft_last_error());
    expect_error(weft_mem_type(p, &t), WEFT_ERR_INVALID_ARG, "ptr", "weft_mem_type of freed");
    cr_assert_not_null(strstr(weft_last_error(), "freed"), "%s", weft_last_error());
    cr_assert_eq(t, WEFT_MEM_CUDA, "the out-parameter was written on failure");
    expect_error(weft_mem_type(p + 5000, &t), WEFT_ERR_INVALID_ARG, "ptr",
                 "weft_mem_type of an interior pointer of a freed allocation");
}

Test(memory, double_free_is_refused)
{
    void *p = emu_alloc(64);

    cr_assert_eq(weft_mem_free(p), WEFT_OK, "%s", weft_last_error());
    expect_error(weft_mem_free(p), WEFT_ERR_INVALID_ARG, "freed", "second weft_mem_free");
}

Test(memory, interior_pointer_free_is_refused_and_changes_nothing)
{
    unsigned char *p = emu_alloc(8192);

    memset(p, 0x3c, 8192);
    expect_error(weft_mem_free(p + 8), WEFT_ERR_INVALID_ARG, NULL, "weft_mem_free(p + 8)");
    cr_assert_eq(type_of(p), WEFT_MEM_EMU);
    for (size_t i = 0; i < 8192; i++) {
        cr_assert_eq(p[i], 0x3c, "byte %zu changed", i);
    }
    cr_assert_eq(weft_mem_free(p), WEFT_OK, "%s", weft_last_error());
}

Test(memory, free_of_host_memory_and_null)
{
    void *h = malloc(256), *a = NULL;

    cr_assert_not_null(h);
    cr_assert_eq(weft_mem_free(NULL), WEFT_OK, "%s", weft_last_error());
    /* host memory belongs to the host table, which frees it as free() does */
    cr_assert_eq(weft_mem_free(h), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_mem_alloc(WEFT_MEM_HOST, 100, &a), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(type_of(a), WEFT_MEM_HOST);
    cr_assert_eq(weft_mem_free(a), WEFT_OK, "%s", weft_last_error());
}

Test(memory, alloc_of_zero_bytes)
{
    void *p = NULL;

    cr_assert_eq(weft_mem_alloc(WEFT_MEM_EMU, 0, &p), WEFT_OK, "%s", weft_last_error());
    cr_assert_not_null(p);
    cr_assert_eq(type_of(p), WEFT_MEM_EMU);
    cr_assert_eq(weft_mem_free(p), WEFT_OK, "%s", weft_last_error());
    expect_error(weft_mem_free(p), WEFT_ERR_INVALID_ARG, NULL, "free of a freed 0-byte alloc");
}

Test(memory, bad_arguments)
{
    void *p = (void *)0x1234;
    weft_memtype_t t;

    expect_error(weft_mem_alloc((weft_memtype_t)7, 10, &p), WEFT_ERR_INVALID_ARG, "type",
                 "alloc of type 7");
    cr_assert_eq(p, (void *)0x1234, "ptr_p written on failure");
    expect_error(weft_mem_alloc(WEFT_MEM_EMU, 10, NULL), WEFT_ERR_INVALID_ARG, "ptr_p",
                 "alloc into NULL");
    expect_error(weft_mem_alloc(WEFT_MEM_EMU, SIZE_MAX, &p), WEFT_ERR_INVALID_ARG, NULL,
                 "alloc of SIZE_MAX");
    expect_error(weft_mem_type(&t, NULL), WEFT_ERR_INVALID_ARG, "type_p", "type into NULL");
    if (weft__device_ops(WEFT_MEM_CUDA) == NULL) {
        expect_error(weft_mem_alloc(WEFT_MEM_CUDA, 10, &p), WEFT_ERR_UNSUPPORTED, "cuda",
                     "cuda alloc without the backend");
    }
}

/* ----------------------------------------------------------------- streams */

TestSuite(stream, .init = setup, .fini = teardown);

static weft_stream_t new_stream(void)
{
    weft_stream_t st = NULL;

    cr_assert_eq(weft_stream_create(WEFT_MEM_EMU, &st), WEFT_OK, "%s", weft_last_error());
    cr_assert_not_null(st);
    return st;
}

static void sync_ok(weft_stream_t st)
{
    weft_status_t s = weft_stream_synchronize(st);

    cr_assert_eq(s, WEFT_OK, "weft_stream_synchronize: %s (%s)", weft_status_string(s),
                 weft_last_error());
}

Test(stream, create_and_destroy_checks)
{
    weft_stream_t st = (weft_stream_t)0x77, emu;
    int local;

    expect_error(weft_stream_create(WEFT_MEM_HOST, &st), WEFT_ERR_INVALID_ARG, "host",
                 "stream of host memory");
    cr_assert_eq(st, (weft_stream_t)0x77, "stream_p written on failure");
    expect_error(weft_stream_create((weft_memtype_t)9, &st), WEFT_ERR_INVALID_ARG, NULL,
                 "stream of type 9");
    expect_error(weft_stream_create(WEFT_MEM_EMU, NULL), WEFT_ERR_INVALID_ARG, "stream_p",
                 "stream into NULL");
    expect_error(weft_stream_destroy(&local), WEFT_ERR_INVALID_ARG, "stream",
                 "destroy of a non-stream");
    expect_error(weft_stream_destroy(NULL), WEFT_ERR_INVALID_ARG, "stream", "destroy of NULL");
    expect_error(weft_stream_synchronize(&local), WEFT_ERR_INVALID_ARG, "stream",
                 "synchronize of a non-stream");
    emu = new_stream();
    sync_ok(emu); /* nothing queued */
    cr_assert_eq(weft_stream_destroy(emu), WEFT_OK, "%s", weft_last_error());
    expect_error(weft_stream_destroy(emu), WEFT_ERR_INVALID_ARG, "stream",
                 "second destroy of a stream");
    expect_error(weft_stream_synchronize(emu), WEFT_ERR_INVALID_ARG, "stream",
                 "synchronize of a destroyed stream");
}

/*
 * K rounds each copy host block k into one emu buffer and then the emu
 * buffer out to host result k, all queued back to back before any runs:
 * result k holds block k only if every copy ran in queue order. A chain of
 * copies between two emu buffers then shifts the data by one byte per step.
 */
Test(stream, many_copies_run_in_order)
{
    enum { K = 200, BYTES = 4099, SHIFTS = 64 };
    weft_stream_t st = new_stream();
    unsigned char *e = emu_alloc(BYTES + SHIFTS), *e2 = emu_alloc(BYTES + SHIFTS);
    unsigned char *blocks = malloc((size_t)K * BYTES), *results = malloc((size_t)K * BYTES);

    cr_assert(blocks != NULL && results != NULL);
    for (size_t i = 0; i < (size_t)K * BYTES; i++) {
        blocks[i] = (unsigned char)((i / BYTES) * 31 + i % 251);
    }
    memset(results, 0, (size_t)K * BYTES);
    for (int k = 0; k < K; k++) {
        cr_assert_eq(weft_memcpy_async(e, blocks + (size_t)k * BYTES, BYTES, st), WEFT_OK, "%s",
                     weft_last_error());
        cr_assert_eq(weft_memcpy_async(results + (size_t)k * BYTES, e, BYTES, st), WEFT_OK, "%s",
                     weft_last_error());
    }
    /* e holds block K-1; each step moves it one byte further: e -> e2 + 1 -> e */
    for (int s = 0; s < SHIFTS / 2; s++) {
        cr_assert_eq(weft_memcpy_async(e2 + 2 * s + 1, e + 2 * s, BYTES, st), WEFT_OK, "%s",
                     weft_last_error());
        cr_assert_eq(weft_memcpy_async(e + 2 * s + 2, e2 + 2 * s + 1, BYTES, st), WEFT_OK, "%s",
                     weft_last_error());
    }
    cr_assert_eq(weft_memcpy_async(e, e, BYTES, st), WEFT_OK, "copy onto itself");
    cr_assert_eq(weft_memcpy_async(e, blocks, 0, st), WEFT_OK, "copy of 0 bytes");
    sync_ok(st);
    for (size_t i = 0; i < (size_t)K * BYTES; i++) {
        cr_assert_eq(results[i], blocks[i], "result %zu byte %zu", i / BYTES, i % BYTES);
    }
    for (size_t i = 0; i < BYTES; i++) {
        cr_assert_eq(e[SHIFTS + i], blocks[(size_t)(K - 1) * BYTES + i], "shifted byte %zu", i);
    }
    cr_assert_eq(weft_stream_destroy(st), WEFT_OK, "%s", weft_last_error());
    weft_mem_free(e);
    weft_mem_free(e2);
    free(blocks);
    free(results);
}

Test(stream, memcpy_async_checks)
{
    weft_stream_t st = new_stream();
    unsigned char *e = emu_alloc(64), *dead = emu_alloc(64);
    unsigned char h[64];
    int local;

    memset(h, 0x11, sizeof(h));
    memset(e, 0x22, 64);
    cr_assert_eq(weft_mem_free(dead), WEFT_OK);
    expect_error(weft_memcpy_async(e, h, 64, &local), WEFT_ERR_INVALID_ARG, "stream",
                 "copy on a non-stream");
    expect_error(weft_memcpy_async(NULL, h, 64, st), WEFT_ERR_INVALID_ARG, "dst", "copy to NULL");
    expect_error(weft_memcpy_async(e, NULL, 64, st), WEFT_ERR_INVALID_ARG, "src", "copy from NULL");
    expect_error(weft_memcpy_async(dead, h, 64, st), WEFT_ERR_INVALID_ARG, "dst",
                 "copy to freed emu memory");
    expect_error(weft_memcpy_async(h, dead, 64, st), WEFT_ERR_INVALID_ARG, "src",
                 "copy from freed emu memory");
    sync_ok(st);
    for (int i = 0; i < 64; i++) {
        cr_assert_eq(e[i], 0x22, "a refused copy wrote byte %d", i);
    }
    cr_assert_eq(weft_stream_destroy(st), WEFT_OK);
    weft_mem_free(e);
}

/* A failing item (a reduction with no inputs) is returned by the next
 * synchronize, once; the items after it still ran. */
Test(stream, synchronize_returns_errors_once)
{
    weft_stream_t st = new_stream();
    unsigned char *e = emu_alloc(256);
    unsigned char h[256];
    const void *none[1] = {NULL};

    for (int i = 0; i < 256; i++) {
        h[i] = (unsigned char)(255 - i);
    }
    memset(e, 0, 256);
    cr_assert_eq(weft__emu_reduce_async(st, e, none, 0, 16, WEFT_INT32, WEFT_SUM), WEFT_OK);
    cr_assert_eq(weft_memcpy_async(e, h, 256, st), WEFT_OK, "%s", weft_last_error());
    expect_error(weft_stream_synchronize(st), WEFT_ERR_INVALID_ARG, NULL,
                 "synchronize after a failed item");
    for (int i = 0; i < 256; i++) {
        cr_assert_eq(e[i], h[i], "the copy after the failure did not run (byte %d)", i);
    }
    sync_ok(st);
    cr_assert_eq(weft_stream_destroy(st), WEFT_OK);
    weft_mem_free(e);
}

/* ------------------------------------------------------------------- flags */

TestSuite(flags, .init = setup, .fini = teardown);

static void wait_flag_host(uint32_t *flag, uint32_t value, const char *what)
{
    double deadline = harness_now_s() + DEADLINE_S;

    while (weft__device_flag_get(flag) < value) {
        cr_assert(harness_now_s() < deadline, "%s: flag still %u after %.0f s (want >= %u)", what,
                  weft__device_flag_get(flag), DEADLINE_S, value);
        harness_sleep_s(0.001);
    }
}

/* A stream held by a flag wait runs nothing queued behind it until the host
 * writes the flag; its own writes land in order. */
Test(flags, wait_holds_the_stream_and_writes_land_in_order)
{
    const weft_device_ops_t *ops = &weft__device_emu_ops;
    weft_stream_t st = new_stream();
    uint32_t *gate, *step;
    unsigned char *e = emu_alloc(1 << 20), *h = malloc(1 << 20);

    cr_assert_not_null(h);
    cr_assert_eq(weft__device_flag_alloc(ops, &gate), WEFT_OK);
    cr_assert_eq(weft__device_flag_alloc(ops, &step), WEFT_OK);
    cr_assert_eq(weft__device_flag_get(gate), 0u, "a new flag is 0");
    memset(e, 0, 1 << 20);
    for (int i = 0; i < (1 << 20); i++) {
        h[i] = (unsigned char)(i % 253 + 1);
    }
    cr_assert_eq(ops->stream_write_flag(st, step, 1), WEFT_OK);
    cr_assert_eq(ops->stream_wait_flag(st, gate, 2), WEFT_OK);
    cr_assert_eq(ops->memcpy_async(e, h, 1 << 20, st), WEFT_OK);
    cr_assert_eq(ops->stream_write_flag(st, step, 2), WEFT_OK);
    cr_assert_eq(ops->stream_wait_flag(st, gate, 3), WEFT_OK);
    cr_assert_eq(ops->stream_write_flag(st, step, 3), WEFT_OK);

    wait_flag_host(step, 1, "the write before the wait");
    weft__device_flag_set(gate, 1); /* below the wait's value: still held */
    harness_sleep_s(0.05);
    cr_assert_eq(weft__device_flag_get(step), 1u, "the stream passed a wait on gate >= 2");
    cr_assert_eq(e[0], 0, "a copy behind the wait ran");
    cr_assert_eq(e[(1 << 20) - 1], 0, "a copy behind the wait ran");
    weft__device_flag_set(gate, 2);
    wait_flag_host(step, 2, "the write after the copy");
    for (int i = 0; i < (1 << 20); i++) {
        cr_assert_eq(e[i], h[i], "byte %d: the flag was written before the copy ended", i);
    }
    harness_sleep_s(0.02);
    cr_assert_eq(weft__device_flag_get(step), 2u, "the stream passed a wait on gate >= 3");
    weft__device_flag_set(gate, 7); /* above the value also releases */
    sync_ok(st);
    cr_assert_eq(weft__device_flag_get(step), 3u);
    cr_assert_eq(weft_stream_destroy(st), WEFT_OK);
    weft__device_flag_free(ops, gate);
    weft__device_flag_free(ops, step);
    weft_mem_free(e);
    free(h);
}

/* Stream A copies, then writes a flag; stream B waits on it, then reads
 * what A wrote. B was queued first and is held until A gets there. */
Test(flags, two_streams_ordered_through_a_flag)
{
    const weft_device_ops_t *ops = &weft__device_emu_ops;
    const size_t bytes = 8u << 20;
    weft_stream_t a = new_stream(), b = new_stream();
    uint32_t *f;
    unsigned char *e = emu_alloc(bytes), *src = malloc(bytes), *out = malloc(bytes);

    cr_assert(src != NULL && out != NULL);
    cr_assert_eq(weft__device_flag_alloc(ops, &f), WEFT_OK);
    for (size_t i = 0; i < bytes; i++) {
        src[i] = (unsigned char)(i * 13 + (i >> 12));
    }
    memset(e, 0xee, bytes);
    memset(out, 0, bytes);
    cr_assert_eq(ops->stream_wait_flag(b, f, 1), WEFT_OK);
    cr_assert_eq(weft_memcpy_async(out, e, bytes, b), WEFT_OK, "%s", weft_last_error());
    harness_sleep_s(0.02);
    cr_assert_eq(out[0], 0, "stream b ran its copy before the flag");
    cr_assert_eq(weft_memcpy_async(e, src, bytes, a), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(ops->stream_write_flag(a, f, 1), WEFT_OK);
    sync_ok(b);
    sync_ok(a);
    for (size_t i = 0; i < bytes; i++) {
        cr_assert_eq(out[i], src[i], "byte %zu: b read before a's copy ended", i);
    }
    cr_assert_eq(weft_stream_destroy(a), WEFT_OK);
    cr_assert_eq(weft_stream_destroy(b), WEFT_OK);
    weft__device_flag_free(ops, f);
    weft_mem_free(e);
    free(src);
    free(out);
}

/*
 * Pinned host memory (device/pinned.c): flags from slabs, bounce buffers
 * reused, and nothing handed back to the driver while a stream waits on a
 * flag (CUDA may deadlock there; emu counts such frees).
 */
Test(flags, pinned_memory_is_not_freed_while_a_stream_waits)
{
    const weft_device_ops_t *ops = &weft__device_emu_ops;
    const size_t keep = weft__runtime_config.pinned_cache;
    const unsigned long bad = weft__emu_frees_while_waiting();
    weft_stream_t st = new_stream();
    weft_pinned_stats_t s0, s;
    uint32_t *gate, *flags[3000];
    void *a, *b, *c;
    double deadline = harness_now_s() + DEADLINE_S;

    weft__device_pinned_stats(ops, &s0);
    cr_assert_eq(weft__device_flag_alloc(ops, &gate), WEFT_OK);
    cr_assert_eq(ops->stream_wait_flag(st, gate, 1), WEFT_OK);
    while (weft__emu_streams_waiting() == 0) {
        cr_assert(harness_now_s() < deadline, "the stream never waited on the gate");
        harness_sleep_s(0.001);
    }

    /* the emulated rule itself: a free now is counted */
    cr_assert_eq(ops->host_alloc(100, &a), WEFT_OK);
    ops->host_free(a);
    cr_assert_eq(weft__emu_frees_while_waiting(), bad + 1, "emu did not see a free while waiting");

    /* flags: 3000 more than fit a slab, each on its own cache line, 0 when handed out */
    for (int i = 0; i < 3000; i++) {
        cr_assert_eq(weft__device_flag_alloc(ops, &flags[i]), WEFT_OK, "%s", weft_last_error());
        cr_assert_eq(weft__device_flag_get(flags[i]), 0u);
        weft__device_flag_set(flags[i], 5);
    }
    for (int i = 1; i < 3000; i++) {
        uintptr_t d = (uintptr_t)flags[i] > (uintptr_t)flags[i - 1]
                          ? (uintptr_t)flags[i] - (uintptr_t)flags[i - 1]
                          : (uintptr_t)flags[i - 1] - (uintptr_t)flags[i];

        cr_assert_geq(d, 64u, "flags %d and %d share a cache line", i - 1, i);
    }
    weft__device_pinned_stats(ops, &s);
    cr_assert_eq(s.flags_in_use, s0.flags_in_use + 3001);
    for (int i = 0; i < 3000; i++) {
        weft__device_flag_free(ops, flags[i]);
    }

    /* bounce buffers: nothing kept beyond the cache (0 here), yet nothing
     * freed while the gate's wait is pending */
    weft__runtime_config.pinned_cache = 0;
    cr_assert_eq(weft__device_bounce_get(ops, 1000000, &a), WEFT_OK);
    cr_assert_eq(weft__device_bounce_get(ops, 1000000, &b), WEFT_OK);
    cr_assert_neq(a, b);
    memset(a, 1, 1000000);
    memset(b, 2, 1000000);
    weft__device_bounce_put(ops, a);
    weft__device_bounce_put(ops, b);
    cr_assert_eq(weft__device_bounce_get(ops, 999999, &c), WEFT_OK);
    cr_assert(c == a || c == b, "a cached buffer of the size class was not reused");
    weft__device_bounce_put(ops, c);
    weft__device_pinned_stats(ops, &s);
    cr_assert_eq(s.buffer_frees, s0.buffer_frees, "freed while a flag was in use");
    cr_assert_geq(s.cached_bytes, 2000000u);
    cr_assert_eq(weft__emu_frees_while_waiting(), bad + 1, "a free while the stream waited");

    /* the wait ends, its flag is freed: now the cache is trimmed */
    weft__device_flag_set(gate, 1);
    sync_ok(st);
    weft__device_flag_free(ops, gate);
    weft__device_pinned_stats(ops, &s);
    cr_assert_eq(s.flags_in_use, s0.flags_in_use);
    cr_assert_eq(s.cached_bytes, 0u, "the cache was not trimmed once no flag was in use");
    cr_assert_eq(s.buffer_frees, s0.buffer_frees + 2);
    cr_assert(s.slabs >= 3 && s.slabs <= s0.slabs + 3, "slabs: %zu (were %zu)", s.slabs, s0.slabs);
    cr_assert_eq(weft__emu_frees_while_waiting(), bad + 1);
    weft__runtime_config.pinned_cache = keep;
    cr_assert_eq(weft_stream_destroy(st), WEFT_OK);
}

/* --------------------------------------------------------------------- IPC */

TestSuite(ipc, .init = setup, .fini = teardown);

#define IPC_BYTES (256 * 1024 + 100)
#define IPC_OFFSET (4096 + 12)

/* Child: the exporter's pages only through the import. Exit codes name the
 * failed step (for the parent's message). */
typedef struct ipc_job {
    unsigned char *inherited;
    const unsigned char *handle;
} ipc_job_t;

static int ipc_child(int rank, void *arg)
{
    unsigned char *inherited = ((ipc_job_t *)arg)->inherited;
    const unsigned char *handle = ((ipc_job_t *)arg)->handle;
    const weft_device_ops_t *ops = &weft__device_emu_ops;
    unsigned char *p = NULL, *again = NULL;
    size_t n = IPC_BYTES - (IPC_OFFSET);

    alarm((unsigned)DEADLINE_S);
    /* drop the mapping fork gave us: what we see now comes through the import */
    if (munmap(inherited, IPC_BYTES) != 0) {
        _exit(10);
    }
    if (weft__emu_ipc_imports_total() != 0 || weft__emu_ipc_imports_open() != 0) {
        _exit(11);
    }
    if (ops->ipc_import(handle, (void **)&p) != WEFT_OK || p == NULL) {
        _exit(12);
    }
    if (weft__emu_ipc_imports_total() != 1 || weft__emu_ipc_imports_open() != 1) {
        _exit(13);
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] != (unsigned char)((i + IPC_OFFSET) * 5 + 1)) {
            _exit(14);
        }
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = (unsigned char)(i * 3 + 7);
    }
    /* a second import of the same allocation is the cached mapping */
    if (ops->ipc_import(handle, (void **)&again) != WEFT_OK || again != p ||
        weft__emu_ipc_imports_open() != 1 || weft__emu_ipc_imports_total() != 1) {
        _exit(15);
    }
    ops->ipc_close(again);
    if (weft__emu_ipc_imports_open() != 1) {
        _exit(16);
    }
    ops->ipc_close(p);
    (void)rank;
    if (weft__emu_ipc_imports_open() != 0) {
        _exit(17);
    }
    return 0;
}

Test(ipc, child_imports_writes_parent_sees)
{
    const weft_device_ops_t *ops = &weft__device_emu_ops;
    unsigned char *e = emu_alloc(IPC_BYTES);
    unsigned char handle[WEFT_DEVICE_IPC_MAX];
    ipc_job_t job = {.inherited = e, .handle = handle};
    harness_procs_t procs;
    int wstatus;

    cr_assert_leq(ops->ipc_handle_size, sizeof(handle));
    for (size_t i = 0; i < IPC_BYTES; i++) {
        e[i] = (unsigned char)(i * 5 + 1);
    }
    cr_assert_eq(ops->ipc_export(e + IPC_OFFSET, handle), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(harness_fork(&procs, 0, 1, ipc_child, &job), 0, "fork: %s", strerror(errno));
    if (harness_reap(&procs, harness_now_s() + DEADLINE_S) > 0) {
        cr_assert_fail("the importing child did not finish within %.0f s", DEADLINE_S);
    }
    wstatus = procs.wstatus[0];
    cr_assert(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0,
              "the importing child failed (exit %d, signal %d): 10 munmap, 11 counters before, "
              "12 import, 13 counters after, 14 data read, 15 second import, 16-17 close",
              WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
              WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
    for (size_t i = 0; i < IPC_OFFSET; i++) {
        cr_assert_eq(e[i], (unsigned char)(i * 5 + 1), "byte %zu before the export changed", i);
    }
    for (size_t i = IPC_OFFSET; i < IPC_BYTES; i++) {
        cr_assert_eq(e[i], (unsigned char)((i - (IPC_OFFSET)) * 3 + 7),
                     "byte %zu: the child's write is not seen", i);
    }
    cr_assert_eq(weft__emu_ipc_imports_total(), 0u, "the parent imported nothing");
    cr_assert_eq(weft_mem_free(e), WEFT_OK);
}

Test(ipc, same_process_and_bad_handles)
{
    const weft_device_ops_t *ops = &weft__device_emu_ops;
    unsigned char *e = emu_alloc(10000), *h = malloc(64);
    unsigned char handle[WEFT_DEVICE_IPC_MAX], junk[WEFT_DEVICE_IPC_MAX];
    void *p = NULL;

    cr_assert_not_null(h);
    cr_assert_eq(ops->ipc_export(e + 100, handle), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(ops->ipc_import(handle, &p), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(p, e + 100, "an import in the exporting process is the pointer itself");
    cr_assert_eq(weft__emu_ipc_imports_total(), 0u, "no mapping is made in the same process");
    expect_error(ops->ipc_export(h, handle), WEFT_ERR_INVALID_ARG, NULL, "export of host memory");
    memset(junk, 0x5a, sizeof(junk));
    p = NULL;
    expect_error(ops->ipc_import(junk, &p), WEFT_ERR_INVALID_ARG, NULL, "import of junk");
    cr_assert_null(p);
    cr_assert_eq(weft_mem_free(e), WEFT_OK);
    expect_error(ops->ipc_import(handle, &p), WEFT_ERR_INVALID_ARG, "freed",
                 "import of a freed allocation");
    expect_error(ops->ipc_export(e, handle), WEFT_ERR_INVALID_ARG, NULL, "export of freed memory");
    free(h);
}

/* A child that holds what it inherited (the parent's memfds among its fds)
 * until it is killed, or its deadline. */
static int holding_child(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    alarm((unsigned)DEADLINE_S);
    pause(); /* the first signal ends it: SIGKILL from the parent, or the alarm */
    return 1;
}

/*
 * Handles read from shared memory are data: the parent imports handles that
 * name its forked child (which holds the same fds) and refuses each
 * corrupted one with a clear error and no mapping made.
 */
Test(ipc, corrupted_handles_refused_nothing_mapped, .timeout = 30)
{
    const weft_device_ops_t *ops = &weft__device_emu_ops;
    unsigned char *e = emu_alloc(3 * 4096), *p;
    weft_emu_ipc_handle_t good, h;
    char tmpl[] = "/tmp/weft-emu-ipc-XXXXXX";
    int other = mkstemp(tmpl);
    harness_procs_t procs;
    uint64_t start;
    void *q;

    cr_assert_geq(other, 0, "mkstemp: %s", strerror(errno));
    unlink(tmpl);
    cr_assert_eq(ftruncate(other, 1 << 20), 0);
    cr_assert_eq(ops->ipc_export(e + 100, &good), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(harness_fork(&procs, 0, 1, holding_child, NULL), 0, "fork: %s", strerror(errno));
    for (int i = 0; i < 1000 && (start = weft__proc_start_time(procs.pid[0])) == 0; i++) {
        usleep(1000);
    }
    cr_assert_neq(start, 0u, "no start time of the child");
    good.pid = procs.pid[0];
    good.start = start;

    /* the well-formed handle of the child's fd maps, and is closed again */
    p = NULL;
    cr_assert_eq(ops->ipc_import(&good, (void **)&p), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft__emu_ipc_imports_open(), 1);
    e[100] = 0x5a;
    cr_assert_eq(p[0], 0x5a, "the import is not the allocation");
    ops->ipc_close(p);
    cr_assert_eq(weft__emu_ipc_imports_open(), 0);

    h = good;
    h.size += 4096;
    q = NULL;
    expect_error(ops->ipc_import(&h, &q), WEFT_ERR_DEVICE, "larger than the allocation",
                 "a size past the allocation");
    cr_assert_null(q);
    h = good;
    h.start = start + 1;
    expect_error(ops->ipc_import(&h, &q), WEFT_ERR_DEVICE, "not the exporter",
                 "a pid of another process than the exporter");
    h = good;
    h.pid = getppid();
    h.start = weft__proc_start_time(getppid());
    expect_error(ops->ipc_import(&h, &q), WEFT_ERR_DEVICE, NULL, "another live process's fd");
    h = good;
    h.fd = other;
    h.size = 4096;
    h.offset = 0;
    expect_error(ops->ipc_import(&h, &q), WEFT_ERR_DEVICE, "not emu memory",
                 "an fd of a plain file");
    h = good;
    h.pid = 0;
    expect_error(ops->ipc_import(&h, &q), WEFT_ERR_INVALID_ARG, NULL, "pid 0");
    if (geteuid() == 0) {
        int fd;
        char path[64];

        snprintf(path, sizeof(path), "/proc/self/fd/%d", good.fd);
        fd = open(path, O_RDWR);
        cr_assert_geq(fd, 0);
        cr_assert_eq(fchown(fd, 65534, 65534), 0, "fchown: %s", strerror(errno));
        close(fd);
        expect_error(ops->ipc_import(&good, &q), WEFT_ERR_DEVICE, "belongs to user",
                     "a file of another user");
    } else {
        cr_log_info("not root: no file of another user to import");
    }
    cr_assert_null(q);
    cr_assert_eq(weft__emu_ipc_imports_open(), 0, "a refused handle left a mapping");
    cr_assert_eq(weft__emu_ipc_imports_total(), 1u, "a refused handle was mapped");
    harness_kill(&procs);
    harness_reap(&procs, harness_now_s() + DEADLINE_S);
    close(other);
    cr_assert_eq(weft_mem_free(e), WEFT_OK);
}

/* ------------------------------------------------------------------ reduce */

TestSuite(reduce, .init = setup, .fini = teardown);

/* Random bits, with a few special patterns in floats (NaN, -0, inf). */
static void fill_random(unsigned char *p, size_t bytes, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < bytes; i++) {
        harness_xorshift(&x);
        p[i] = (unsigned char)(x >> 24);
    }
}

/*
 * Every dtype x op defined for it, 1..4 inputs in emu and host memory, an
 * odd count, out of place and in place on the first input: the emu table's
 * result is bit-identical to the host table's on the same inputs, and
 * avg_finalize too. Random bits cover NaNs, infinities and signed zeros.
 */
Test(reduce, every_dtype_and_op_matches_the_host_table, .timeout = 120)
{
    const size_t count = 1001;
    const weft_device_ops_t *emu = &weft__device_emu_ops;
    int checked = 0;

    for (int dt = 0; dt < WEFT_DTYPE_COUNT; dt++) {
        const size_t bytes = count * weft_dtype_size((weft_dtype_t)dt);

        for (int op = 0; op < WEFT_OP_COUNT; op++) {
            if (!weft__op_valid_for_dtype((weft_op_t)op, (weft_dtype_t)dt)) {
                continue;
            }
            for (int n = 1; n <= 4; n++) {
                for (int inplace = 0; inplace < 2; inplace++) {
                    unsigned char *in[4], *host_in[4], *dst = emu_alloc(bytes);
                    unsigned char *want = malloc(bytes + 1);
                    const void *srcs[4], *hsrcs[4];
                    weft_status_t s;

                    cr_assert_not_null(want);
                    for (int k = 0; k < n; k++) {
                        /* inputs alternate emu and host memory */
                        in[k] = k % 2 == 0 ? emu_alloc(bytes) : malloc(bytes);
                        host_in[k] = malloc(bytes);
                        cr_assert(in[k] != NULL && host_in[k] != NULL);
                        fill_random(in[k], bytes, (uint64_t)(dt * 1000 + op * 10 + k));
                        memcpy(host_in[k], in[k], bytes);
                        srcs[k] = in[k];
                        hsrcs[k] = host_in[k];
                    }
                    memset(dst, 0xcd, bytes);
                    s = weft__host_reduce(want, hsrcs, n, count, (weft_dtype_t)dt, (weft_op_t)op);
                    cr_assert_eq(s, WEFT_OK, "%s", weft_last_error());
                    s = emu->reduce(inplace ? in[0] : dst, srcs, n, count, (weft_dtype_t)dt,
                                    (weft_op_t)op);
                    cr_assert_eq(s, WEFT_OK, "%s", weft_last_error());
                    if (op == WEFT_AVG) {
                        cr_assert_eq(weft__host_avg_finalize(want, count, (weft_dtype_t)dt, 3),
                                     WEFT_OK);
                        cr_assert_eq(
                            emu->avg_finalize(inplace ? in[0] : dst, count, (weft_dtype_t)dt, 3),
                            WEFT_OK, "%s", weft_last_error());
                    }
                    cr_assert_eq(memcmp(inplace ? in[0] : dst, want, bytes), 0,
                                 "%s %s n=%d inplace=%d differs from the host table",
                                 weft_dtype_name((weft_dtype_t)dt), weft_op_name((weft_op_t)op), n,
                                 inplace);
                    for (int k = inplace; k < n; k++) {
                        cr_assert_eq(memcmp(in[k], host_in[k], bytes), 0, "input %d changed", k);
                    }
                    for (int k = 0; k < n; k++) {
                        if (k % 2 == 0) {
                            weft_mem_free(in[k]);
                        } else {
                            free(in[k]);
                        }
                        free(host_in[k]);
                    }
                    weft_mem_free(dst);
                    free(want);
                    checked++;
                }
            }
        }
    }
    cr_assert_gt(checked, 300, "only %d combinations checked", checked);
}

/* A reduction queued behind a held wait has not touched dst; released, it
 * is correct; and the emu table's synchronous reduce runs elsewhere: the
 * calling thread's CPU time stays a small share of the process's. */
Test(reduce, runs_on_a_worker_not_the_caller, .timeout = 120)
{
    const weft_device_ops_t *emu = &weft__device_emu_ops;
    const size_t count = 4u << 20; /* 16 MiB of float per input */
    const size_t bytes = count * sizeof(float);
    float *a = emu_alloc(bytes), *b = emu_alloc(bytes), *d = emu_alloc(bytes);
    const void *srcs[2] = {a, b};
    weft_stream_t st = new_stream();
    uint32_t *gate;
    double caller0, proc0, caller, proc;

    for (size_t i = 0; i < count; i++) {
        a[i] = (float)(i % 1000);
        b[i] = (float)(i % 7) * 0.5f;
        d[i] = -1.0f;
    }
    /* asynchronous on a stream: queued, held, then run */
    cr_assert_eq(weft__device_flag_alloc(emu, &gate), WEFT_OK);
    cr_assert_eq(emu->stream_wait_flag(st, gate, 1), WEFT_OK);
    cr_assert_eq(weft__emu_reduce_async(st, d, srcs, 2, count, WEFT_FLOAT32, WEFT_SUM), WEFT_OK);
    harness_sleep_s(0.03);
    cr_assert_eq(d[0], -1.0f, "the reduction ran before the wait ahead of it");
    cr_assert_eq(d[count - 1], -1.0f, "the reduction ran before the wait ahead of it");
    weft__device_flag_set(gate, 1);
    sync_ok(st);
    for (size_t i = 0; i < count; i++) {
        cr_assert_eq(d[i], (float)(i % 1000) + (float)(i % 7) * 0.5f, "element %zu", i);
    }
    weft__device_flag_free(emu, gate);
    cr_assert_eq(weft_stream_destroy(st), WEFT_OK);

    /* synchronous through the table: the work is done by another thread */
    cr_assert_eq(emu->reduce(d, srcs, 1, 16, WEFT_FLOAT32, WEFT_SUM), WEFT_OK); /* warm up */
    caller0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    proc0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int rep = 0; rep < 8; rep++) {
        cr_assert_eq(emu->reduce(d, srcs, 2, count, WEFT_FLOAT32, WEFT_SUM), WEFT_OK, "%s",
                     weft_last_error());
    }
    caller = cpu_s(CLOCK_THREAD_CPUTIME_ID) - caller0;
    proc = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - proc0;
    cr_assert_gt(proc, 0.005, "8 reductions of 16 MiB took %.4f s of CPU: not measured", proc);
    cr_assert_lt(caller, 0.25 * proc,
                 "the caller spent %.4f s of CPU out of the process's %.4f s: the reduction ran "
                 "in the caller",
                 caller, proc);
    for (size_t i = 0; i < count; i += 4099) {
        cr_assert_eq(d[i], (float)(i % 1000) + (float)(i % 7) * 0.5f, "element %zu", i);
    }
    weft_mem_free(a);
    weft_mem_free(b);
    weft_mem_free(d);
}
