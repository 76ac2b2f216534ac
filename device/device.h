/*
 * Device layer: one ops table per memory type (host now; cuda and emu come
 * with the device issues). coll/ and pt2pt/ reach memory only through it, so
 * an algorithm never branches on the memory type: the type is data passed
 * down.
 *
 * Contract of every table:
 *  - copy and reduce may run asynchronously on devices; the host table
 *    completes them before returning.
 *  - reduce combines n >= 1 inputs element-wise into dst. dst may be the
 *    same pointer as one of the inputs (in-place accumulate); any other
 *    overlap is undefined. Half types (FLOAT16, BFLOAT16) are widened to
 *    float, combined, and rounded once to nearest even. WEFT_AVG combines as
 *    a sum; the caller divides once at the end with avg_finalize.
 *  - inputs combine in index order, ((s0 op s1) op s2) ..., wherever dst
 *    points, so results are bit-identical in place or not; every table must
 *    follow the same rules: float MIN/MAX give NaN if an input is NaN and
 *    order -0 below +0 (the same bits whatever the operand order); narrowing
 *    a NaN to a half type keeps it a quiet NaN with its sign.
 *  - one input is a plain copy (LAND/LOR/LXOR do not normalise it to 0/1,
 *    as a one-rank MPI reduction does not).
 *  - avg_finalize of half types divides in float and rounds to the half type.
 *  - the caller has validated dtype/op (weft__op_valid_for_dtype).
 *  - every function is thread-safe.
 */
#ifndef WEFT_DEVICE_H
#define WEFT_DEVICE_H

#include "runtime/base.h"

typedef enum {
    WEFT_MEMTYPE_HOST,
    WEFT_MEMTYPE_COUNT
} weft_memtype_t;

typedef struct weft_device_ops {
    const char *name;
    weft_memtype_t memtype;
    /* 1 when ptr is memory of this type */
    int (*owns)(const void *ptr);
    weft_status_t (*alloc)(size_t bytes, void **ptr_p);
    void (*free)(void *ptr);
    weft_status_t (*copy)(void *dst, const void *src, size_t bytes);
    weft_status_t (*reduce)(void *dst, const void *const *srcs, int nsrcs, size_t count,
                            weft_dtype_t dtype, weft_op_t op);
    /* buf[i] /= divisor for WEFT_AVG (integers truncate toward zero) */
    weft_status_t (*avg_finalize)(void *buf, size_t count, weft_dtype_t dtype, size_t divisor);
} weft_device_ops_t;

extern const weft_device_ops_t weft__device_host_ops;

/* The table that owns ptr (host when no other claims it). */
const weft_device_ops_t *weft__device_query(const void *ptr);

/* 1 when op is defined for dtype (bitwise and logical ops are integer-only). */
int weft__op_valid_for_dtype(weft_op_t op, weft_dtype_t dtype);

#endif /* WEFT_DEVICE_H */
