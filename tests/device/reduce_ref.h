/*
 * The independent references of tests/device/test_reduce.c: element bits
 * by dtype, half-precision formats decoded from their definitions, a
 * scalar reduction of any dtype and op, and seeded test data. They share no
 * code with device/host.
 */
#ifndef WEFT_TESTS_DEVICE_REDUCE_REF_H
#define WEFT_TESTS_DEVICE_REDUCE_REF_H

#include "device/device.h"

#include <stddef.h>
#include <stdint.h>

/* expected value of an edge case that may be any NaN (0xffff is a NaN in both half formats) */
#define ANY_NAN 0xffffu

int is_float(weft_dtype_t dtype);
int is_half(weft_dtype_t dtype);
/* One element as raw bits, zero-extended; and back, truncated to the element size. */
uint64_t load_bits(weft_dtype_t dtype, const void *p);
void store_bits(weft_dtype_t dtype, void *p, uint64_t bits);
int is_nan_bits(weft_dtype_t dtype, uint64_t bits);
float f32_of(uint32_t bits);
uint32_t bits_of_f32(float f);
uint64_t bits_of_f64(double d);
double ref_f16_value(uint16_t h);
double ref_bf16_value(uint16_t h);
double ref_f8e4m3_value(uint8_t h);
double ref_f8e5m2_value(uint8_t h);
double ref_half_value(weft_dtype_t dtype, unsigned h);
/* The narrow format's first pattern past the largest finite one (inf; E4M3: its NaN), the value
 * that step would have, and the sign bit. */
void ref_half_limits(weft_dtype_t dtype, unsigned *top_p, double *beyond_p, unsigned *sign_p);
/*
 * The pattern nearest to x (not a NaN), ties to the even pattern. Positive patterns are ordered
 * like their values; past the largest finite one the next step would be `beyond` (2^16 and
 * 2^128), which decides where inf starts.
 */
uint16_t ref_half_round(weft_dtype_t dtype, double x);
/* Element i of in[0] op in[1] op ... in index order; one input is a copy. */
uint64_t ref_element(weft_dtype_t dtype, weft_op_t op, unsigned char *const *in, int n, size_t i);
void fill(weft_dtype_t dtype, unsigned char *buf, size_t count, uint64_t seed);

#endif /* WEFT_TESTS_DEVICE_REDUCE_REF_H */
