/* The expected results of weft_bench --check (benchmarks/weft_bench.h). */
#include "benchmarks/weft_bench.h"
#include "device/host/half.h"

#include <stdint.h>
#include <string.h>

/* Small integers: exact in every dtype, so checks compare bit for bit. */
int64_t value(int r, size_t i, int iter)
{
    return (int64_t)((r * 7 + (int)(i % 13) + iter * 3) % 5);
}

void store(weft_dtype_t d, void *buf, size_t i, int64_t v)
{
    switch (d) {
    case WEFT_INT8: case WEFT_UINT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case WEFT_INT32: case WEFT_UINT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case WEFT_INT64: case WEFT_UINT64: ((int64_t *)buf)[i] = v; break;
    case WEFT_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case WEFT_FLOAT64: ((double *)buf)[i] = (double)v; break;
    case WEFT_BFLOAT16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
        break;
    }
    case WEFT_FLOAT16: { /* exact for |v| < 2048 */
        uint16_t h = 0, s = v < 0 ? 0x8000 : 0;
        int64_t a = v < 0 ? -v : v;
        int e = 0;
        if (a != 0) {
            while ((a >> e) > 1) {
                e++;
            }
            h = (uint16_t)(((e + 15) << 10) | ((a << (10 - e)) & 0x3ff));
        }
        ((uint16_t *)buf)[i] = (uint16_t)(s | h);
        break;
    }
    case WEFT_FLOAT8_E4M3: /* exact for |v| <= 16 */
        ((uint8_t *)buf)[i] = weft__float_to_f8e4m3((float)v);
        break;
    case WEFT_FLOAT8_E5M2: /* exact for |v| <= 8 */
        ((uint8_t *)buf)[i] = weft__float_to_f8e5m2((float)v);
        break;
    default: break;
    }
}

static int64_t reduce_ref(weft_op_t op, int64_t acc, int64_t v, int first)
{
    if (first) {
        return v;
    }
    switch (op) {
    case WEFT_SUM: case WEFT_AVG: return acc + v;
    case WEFT_PROD: return acc * v;
    case WEFT_MIN: return v < acc ? v : acc;
    case WEFT_MAX: return v > acc ? v : acc;
    case WEFT_BAND: return acc & v;
    case WEFT_BOR: return acc | v;
    case WEFT_BXOR: return acc ^ v;
    case WEFT_LAND: return acc && v;
    case WEFT_LOR: return acc || v;
    case WEFT_LXOR: return !acc != !v;
    default: return acc;
    }
}

/* The v forms run with equal counts: they produce what their plain form does. */
coll_t plain(coll_t c)
{
    return c == COLL_ALLGATHERV     ? COLL_ALLGATHER
           : c == COLL_ALLTOALLV    ? COLL_ALLTOALL
           : c == COLL_REDUCE_SCATTER_V ? COLL_REDUCE_SCATTER
                                        : c;
}

int pingpong_peer(void)
{
    int half = nranks / 2;

    if (half == 0 || rank >= 2 * half) {
        return -1;
    }
    return rank < half ? rank + half : rank - half;
}

/* Expected element i of this rank's result. */
void expected(const options_t *o, size_t i, size_t count, int iter, void *out)
{
    coll_t c = plain(o->coll);
    size_t gi = c == COLL_REDUCE_SCATTER ? (size_t)rank * count + i : i;

    switch (c) {
    case COLL_ALLGATHER:
    case COLL_GATHER:
        store(o->dtype, out, 0, value((int)(gi / count), gi % count, iter));
        return;
    case COLL_BCAST:
        store(o->dtype, out, 0, value(o->root, gi, iter));
        return;
    case COLL_SCATTER:
        store(o->dtype, out, 0, value(o->root, (size_t)rank * count + i, iter));
        return;
    case COLL_PINGPONG: /* the partner's vector */
        store(o->dtype, out, 0, value(pingpong_peer(), i, iter));
        return;
    case COLL_ALLTOALL: /* block j came from rank j's block for us */
        store(o->dtype, out, 0, value((int)(i / count), (size_t)rank * count + i % count, iter));
        return;
    default:
        break;
    }
    int64_t acc = 0;
    for (int r = 0; r < nranks; r++) {
        acc = reduce_ref(o->op, acc, value(r, gi, iter), r == 0);
    }
    if (o->op == WEFT_AVG) {
        double avg = (double)acc / nranks;
        if (o->dtype == WEFT_FLOAT32) {
            float f = (float)acc / (float)nranks;
            memcpy(out, &f, 4);
            return;
        }
        if (o->dtype == WEFT_FLOAT64) {
            memcpy(out, &avg, 8);
            return;
        }
        acc = acc / nranks;
    }
    store(o->dtype, out, 0, acc);
}
