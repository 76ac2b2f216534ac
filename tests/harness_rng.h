/*
 * The tests' pseudo-random generator: Marsaglia's xorshift64 (13, 7, 17).
 * Each caller seeds its own state (never 0) and takes what it needs of each
 * output; the same seed gives the same sequence on every machine.
 *
 * Plain C that C++ compiles too (tests/device/cuda_kernel_host.cu includes
 * it); tests/harness.h includes it for the C tests.
 */
#ifndef WEFT_TESTS_HARNESS_RNG_H
#define WEFT_TESTS_HARNESS_RNG_H

#include <stdint.h>

/* Advance *state and return the new value. */
static inline uint64_t harness_xorshift(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

#endif /* WEFT_TESTS_HARNESS_RNG_H */
