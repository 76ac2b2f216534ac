/* Test data for the device collective tests (contract in device_data.h). */
#include "tests/coll/device_data.h"

#include <string.h>

const dd_combo_t dd_combos[] = {
    {WEFT_INT32, WEFT_SUM},    {WEFT_FLOAT32, WEFT_SUM}, {WEFT_FLOAT16, WEFT_SUM},
    {WEFT_BFLOAT16, WEFT_MAX}, {WEFT_UINT8, WEFT_BXOR},  {WEFT_INT64, WEFT_MIN},
    {WEFT_FLOAT64, WEFT_AVG},  {WEFT_INT8, WEFT_MAX},    {WEFT_FLOAT16, WEFT_MIN},
    {WEFT_UINT32, WEFT_PROD},  {WEFT_FLOAT32, WEFT_AVG}, {WEFT_INT32, WEFT_AVG},
    {WEFT_BFLOAT16, WEFT_SUM}, {WEFT_UINT64, WEFT_BOR},
};
const int dd_ncombos = (int)(sizeof(dd_combos) / sizeof(dd_combos[0]));

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

int64_t dd_value(int ci, int r, size_t i)
{
    uint64_t h = mix(((uint64_t)r << 44) ^ ((uint64_t)i << 6) ^ (uint64_t)ci ^ 0x5eedull);

    switch (dd_combos[ci].dtype) {
    case WEFT_INT8:
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16:
        return (int64_t)(h % 16) - 8;
    case WEFT_UINT8:
        return (int64_t)(h % 256);
    case WEFT_UINT32:
        return (int64_t)(h % 128) * 2 + 1; /* odd: products never collapse to 0 */
    case WEFT_UINT64:
        return (int64_t)(h % (1ull << 40));
    case WEFT_FLOAT32:
        return (int64_t)(h % 1024) - 512;
    case WEFT_FLOAT64:
        return (int64_t)(h % (1ull << 31)) - (1ll << 30);
    default: /* INT32, INT64 */
        return (int64_t)(h % (1ull << 21)) - (1ll << 20);
    }
}

/* binary16 of an integer of magnitude <= 2048 (exact) */
static uint16_t f16_of_int(int64_t v)
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    uint64_t a = (uint64_t)(v < 0 ? -v : v);
    int e = 0;

    if (a == 0) {
        return 0;
    }
    while ((a >> (e + 1)) != 0) {
        e++;
    }
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) |
                      (uint16_t)((e <= 10 ? a << (10 - e) : a >> (e - 10)) & 0x3ff));
}

static void encode_float(weft_dtype_t dtype, double v, void *dst)
{
    float f = (float)v;
    uint32_t bits;
    uint16_t h;

    switch (dtype) {
    case WEFT_FLOAT64:
        memcpy(dst, &v, 8);
        break;
    case WEFT_FLOAT32:
        memcpy(dst, &f, 4);
        break;
    case WEFT_BFLOAT16:
        memcpy(&bits, &f, 4);
        h = (uint16_t)(bits >> 16); /* exact: the test's values fit 8 significant bits */
        memcpy(dst, &h, 2);
        break;
    default:
        h = f16_of_int((int64_t)v);
        memcpy(dst, &h, 2);
        break;
    }
}

void dd_encode(weft_dtype_t dtype, int64_t v, void *dst)
{
    uint64_t u = (uint64_t)v;
    uint8_t u8 = (uint8_t)u;
    uint32_t u32 = (uint32_t)u;

    switch (dtype) {
    case WEFT_INT8:
    case WEFT_UINT8:
        memcpy(dst, &u8, 1);
        break;
    case WEFT_INT32:
    case WEFT_UINT32:
        memcpy(dst, &u32, 4);
        break;
    case WEFT_INT64:
    case WEFT_UINT64:
        memcpy(dst, &u, 8);
        break;
    default:
        encode_float(dtype, (double)v, dst);
        break;
    }
}

void dd_fill(int ci, int r, size_t first, size_t n, void *dst)
{
    const weft_dtype_t dt = dd_combos[ci].dtype;
    const size_t es = weft_dtype_size(dt);

    for (size_t k = 0; k < n; k++) {
        dd_encode(dt, dd_value(ci, r, first + k), (unsigned char *)dst + k * es);
    }
}

void dd_expect_reduced(int ci, int p, size_t i, void *dst)
{
    const weft_dtype_t dt = dd_combos[ci].dtype;
    const weft_op_t op = dd_combos[ci].op;
    uint64_t acc = (uint64_t)dd_value(ci, 0, i);
    int64_t sacc = dd_value(ci, 0, i);

    for (int r = 1; r < p; r++) {
        int64_t v = dd_value(ci, r, i);

        switch (op) {
        case WEFT_PROD:
            acc *= (uint64_t)v;
            break;
        case WEFT_MIN:
            sacc = v < sacc ? v : sacc;
            break;
        case WEFT_MAX:
            sacc = v > sacc ? v : sacc;
            break;
        case WEFT_BXOR:
            acc ^= (uint64_t)v;
            break;
        case WEFT_BOR:
            acc |= (uint64_t)v;
            break;
        default: /* SUM, AVG */
            acc += (uint64_t)v;
            break;
        }
    }
    if (op == WEFT_MIN || op == WEFT_MAX) {
        dd_encode(dt, sacc, dst);
    } else if (op == WEFT_AVG && dt == WEFT_FLOAT32) {
        float f = (float)(int64_t)acc / (float)p;

        memcpy(dst, &f, 4);
    } else if (op == WEFT_AVG && dt == WEFT_FLOAT64) {
        double d = (double)(int64_t)acc / (double)p;

        memcpy(dst, &d, 8);
    } else if (op == WEFT_AVG) {
        dd_encode(dt, (int64_t)acc / p, dst);
    } else {
        dd_encode(dt, (int64_t)acc, dst);
    }
}

long dd_check_values(int ci, int r, size_t first, size_t n, const void *got)
{
    const weft_dtype_t dt = dd_combos[ci].dtype;
    const size_t es = weft_dtype_size(dt);
    unsigned char want[8];

    for (size_t k = 0; k < n; k++) {
        dd_encode(dt, dd_value(ci, r, first + k), want);
        if (memcmp((const unsigned char *)got + k * es, want, es) != 0) {
            return (long)k;
        }
    }
    return -1;
}

long dd_check_reduced(int ci, int p, size_t first, size_t n, const void *got)
{
    const size_t es = weft_dtype_size(dd_combos[ci].dtype);
    unsigned char want[8];

    for (size_t k = 0; k < n; k++) {
        dd_expect_reduced(ci, p, first + k, want);
        if (memcmp((const unsigned char *)got + k * es, want, es) != 0) {
            return (long)k;
        }
    }
    return -1;
}

long dd_check_fill(const void *got, size_t bytes)
{
    for (size_t k = 0; k < bytes; k++) {
        if (((const unsigned char *)got)[k] != DD_FILL_BYTE) {
            return (long)k;
        }
    }
    return -1;
}

void *dd_alloc(int emu, size_t bytes)
{
    void *p = NULL;

    if (weft_mem_alloc(emu ? WEFT_MEM_EMU : WEFT_MEM_HOST, bytes + DD_GUARD, &p) != WEFT_OK) {
        return NULL;
    }
    memset(p, DD_FILL_BYTE, bytes);
    memset((unsigned char *)p + bytes, DD_GUARD_BYTE, DD_GUARD);
    return p;
}

void dd_free(void *p)
{
    weft_mem_free(p);
}

int dd_guard_ok(const void *p, size_t bytes)
{
    for (size_t g = 0; g < DD_GUARD; g++) {
        if (p != NULL && ((const unsigned char *)p)[bytes + g] != DD_GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}
