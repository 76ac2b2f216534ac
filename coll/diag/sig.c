/* Operation signatures: building, hashing, and naming a disagreement. */
#include "coll/diag/sig.h"

#include "coll/coll.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static uint64_t mix64(uint64_t h, uint64_t v)
{
    /* splitmix64's finalizer over a running sum: cheap, and every bit of
     * every field reaches every bit of the hash */
    h += v + 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static uint64_t counts_hash(const size_t *counts, int n)
{
    uint64_t h = (uint64_t)n;

    for (int i = 0; i < n; i++) {
        h = mix64(h, counts[i]);
    }
    return h;
}

void weft__sig_make(weft_coll_sig_t *sig, const weft_coll_args_t *a, int mem)
{
    memset(sig, 0, sizeof(*sig));
    sig->kind = (uint32_t)a->kind + 1;
    sig->mem = (int16_t)mem;
    sig->dtype = (int32_t)a->dtype;
    sig->count = a->count;
    switch (a->kind) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE_SCATTER:
        sig->op = (int16_t)a->op;
        break;
    case WEFT_COLL_REDUCE:
        sig->op = (int16_t)a->op;
        sig->root = a->root;
        break;
    case WEFT_COLL_BCAST:
    case WEFT_COLL_GATHER:
    case WEFT_COLL_SCATTER:
        sig->root = a->root;
        break;
    case WEFT_COLL_REDUCE_SCATTER_V:
        sig->op = (int16_t)a->op;
        sig->count = counts_hash(a->counts, a->size);
        break;
    case WEFT_COLL_ALLGATHERV:
        sig->count = counts_hash(a->counts, a->size);
        break;
    case WEFT_COLL_ALLTOALLV: /* every rank's counts are its own */
    case WEFT_COLL_BARRIER:
        sig->count = 0;
        break;
    default:
        break;
    }
}

uint32_t weft__sig_hash(const weft_coll_sig_t *sig)
{
    uint64_t h = mix64(sig->kind, (uint64_t)(uint32_t)sig->dtype << 32 | (uint32_t)sig->op);

    h = mix64(h, (uint64_t)(uint32_t)sig->root << 16 | (uint16_t)sig->mem);
    h = mix64(h, sig->count);
    return (uint32_t)(h ^ (h >> 32)) | 1u;
}

int weft__sig_equal(const weft_coll_sig_t *a, const weft_coll_sig_t *b)
{
    return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
           a->count == b->count && a->mem == b->mem;
}

enum { F_KIND, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_MEM, F_COUNT_OF };

static uint64_t field(const weft_coll_sig_t *s, int f)
{
    switch (f) {
    case F_KIND:
        return s->kind;
    case F_COUNT:
        return s->count;
    case F_DTYPE:
        return (uint32_t)s->dtype;
    case F_OP:
        return (uint16_t)s->op;
    case F_MEM:
        return (uint16_t)s->mem;
    default:
        return (uint32_t)s->root;
    }
}

static int is_v(const weft_coll_sig_t *s)
{
    return s->kind == WEFT_COLL_ALLGATHERV + 1 || s->kind == WEFT_COLL_REDUCE_SCATTER_V + 1;
}

static size_t put(char *buf, size_t len, size_t at, const char *fmt, ...) WEFT_PRINTF(4, 5);

static size_t put(char *buf, size_t len, size_t at, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (at >= len) {
        return at;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
    return n < 0 ? at : (at + (size_t)n < len ? at + (size_t)n : len - 1);
}

static size_t put_value(char *buf, size_t len, size_t at, const weft_coll_sig_t *s, int f)
{
    switch (f) {
    case F_KIND:
        return put(buf, len, at, "%s", weft__coll_kind_name((weft_coll_kind_t)(s->kind - 1)));
    case F_COUNT:
        return is_v(s) ? put(buf, len, at, "#%016llx", (unsigned long long)s->count)
                       : put(buf, len, at, "%llu", (unsigned long long)s->count);
    case F_DTYPE:
        return put(buf, len, at, "%s", weft_dtype_name((weft_dtype_t)s->dtype));
    case F_OP:
        return put(buf, len, at, "%s", weft_op_name((weft_op_t)s->op));
    case F_MEM:
        return put(buf, len, at, "%s", weft_memtype_name((weft_memtype_t)s->mem));
    default:
        return put(buf, len, at, "%d", (int)s->root);
    }
}

static const char *const field_names[F_COUNT_OF] = {"collective", "count", "dtype",
                                                    "op",         "root",  "memory type"};

size_t weft__sig_describe(char *buf, size_t len, const weft_coll_sig_t *sigs, const int *ranks,
                          int n)
{
    int f, first = -1;
    size_t at = 0;

    if (len == 0) {
        return 0;
    }
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (sigs[i].kind != 0) {
            first = i;
            break;
        }
    }
    if (first < 0) {
        return 0;
    }
    for (f = 0; f < F_COUNT_OF; f++) {
        int differs = 0;

        for (int i = first + 1; i < n && !differs; i++) {
            differs = sigs[i].kind != 0 && field(&sigs[i], f) != field(&sigs[first], f);
        }
        if (differs) {
            break;
        }
    }
    if (f == F_COUNT_OF) {
        return 0;
    }
    at =
        put(buf, len, at, "%s %s: ", f == F_COUNT && is_v(&sigs[first]) ? "counts" : field_names[f],
            f == F_COUNT && is_v(&sigs[first]) ? "differ" : "differs");
    /* one group per distinct value, in the order of its first rank */
    for (int i = first, groups = 0; i < n; i++) {
        int members = 0, run_start = -1, prev = -2, seen = 0;

        if (sigs[i].kind == 0) {
            continue;
        }
        for (int j = first; j < i && !seen; j++) {
            seen = sigs[j].kind != 0 && field(&sigs[j], f) == field(&sigs[i], f);
        }
        if (seen) {
            continue;
        }
        for (int j = i; j < n; j++) {
            members += sigs[j].kind != 0 && field(&sigs[j], f) == field(&sigs[i], f);
        }
        at = put(buf, len, at, "%s%s ", groups++ ? ", " : "", members > 1 ? "ranks" : "rank");
        for (int j = i; j <= n; j++) {
            int in = j < n && sigs[j].kind != 0 && field(&sigs[j], f) == field(&sigs[i], f);

            if (in && ranks[j] == prev + 1 && run_start >= 0) {
                prev = ranks[j];
                continue;
            }
            if (run_start >= 0 && (!in || ranks[j] != prev + 1)) {
                at = prev > run_start ? put(buf, len, at, "-%d", prev) : at;
                run_start = -1;
            }
            if (in) {
                at = put(buf, len, at, "%s%d", prev >= 0 ? "," : "", ranks[j]);
                run_start = prev = ranks[j];
            }
        }
        at = put(buf, len, at, " ");
        at = put_value(buf, len, at, &sigs[i], f);
    }
    return at;
}
