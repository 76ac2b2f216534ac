/*
 * Test data for the device collective tests (test_device.c,
 * test_device_stream.c): deterministic inputs and references computed here,
 * independently of weft's reduction code.
 *
 * Element i of rank r's data is a small integer (dd_value) chosen so that
 * every reduction over up to 16 ranks is exact in its dtype: sums of half
 * types stay within their integer range, floats hold integers, integer
 * sums and products wrap as the reference's 64-bit arithmetic truncated to
 * the element size does. AVG of floats is the exact sum divided once in the
 * dtype's precision; of integers, truncated toward zero.
 *
 * Buffers come from dd_alloc in emu or host memory with DD_GUARD bytes after
 * them that must stay untouched (dd_guard_ok).
 */
#ifndef WEFT_TESTS_DEVICE_DATA_H
#define WEFT_TESTS_DEVICE_DATA_H

#include <weft.h>

#include <stddef.h>
#include <stdint.h>

#define DD_GUARD 64
#define DD_GUARD_BYTE 0xa5
#define DD_FILL_BYTE 0x5a

typedef struct dd_combo {
    weft_dtype_t dtype;
    weft_op_t op; /* the reductions' op; the other collectives use the dtype only */
} dd_combo_t;

extern const dd_combo_t dd_combos[];
extern const int dd_ncombos;

/* Element i of rank r's data for combination ci, and its encoding. */
int64_t dd_value(int ci, int r, size_t i);
void dd_encode(weft_dtype_t dtype, int64_t v, void *dst);
/* dst[k] = element first + k of rank r, k < n. */
void dd_fill(int ci, int r, size_t first, size_t n, void *dst);
/* Element i of the reduction of ranks 0..p-1 (each contributing element i). */
void dd_expect_reduced(int ci, int p, size_t i, void *dst);
/* Index of the first of n elements of got that is not element first + k of
 * rank r (or of the reduction over p ranks), or -1 when all match. */
long dd_check_values(int ci, int r, size_t first, size_t n, const void *got);
long dd_check_reduced(int ci, int p, size_t first, size_t n, const void *got);
/* Index of the first of n bytes that is not DD_FILL_BYTE, or -1. */
long dd_check_fill(const void *got, size_t bytes);

/* bytes (+ DD_GUARD) of emu memory (emu != 0) or host memory, filled with
 * DD_FILL_BYTE and the guard; NULL on failure (weft_last_error says why). */
void *dd_alloc(int emu, size_t bytes);
void dd_free(void *p);
int dd_guard_ok(const void *p, size_t bytes);

#endif /* WEFT_TESTS_DEVICE_DATA_H */
