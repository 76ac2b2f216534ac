/*
 * Operation signatures: what every rank of a communicator must agree on for
 * one collective (which collective, count, dtype, op, root, memory type of
 * the buffers). A signature is
 * compared in two ways:
 *  - its 32-bit hash travels in the shared-memory control line with every
 *    round (coll/shm/ops.c), so local ranks that read each other's line
 *    compare it for free; the full signature sits next to it for the
 *    message when the hashes differ;
 *  - with WEFT_CHECK_ARGS=1 every rank sends its full signature to every
 *    other before the operation runs (coll/diag/check.c).
 * Either way a difference fails the operation with WEFT_ERR_MISMATCH and a
 * message naming the first field that differs and which ranks hold which
 * value: "op differs: ranks 0-2 sum, rank 3 max".
 */
#ifndef WEFT_COLL_DIAG_SIG_H
#define WEFT_COLL_DIAG_SIG_H

#include <stddef.h>
#include <stdint.h>

struct weft_coll_args;

/* Fields that do not apply to a collective hold 0 (root of allreduce, op of
 * bcast); v variants hold a hash of the counts every rank must agree on. */
typedef struct weft_coll_sig {
    uint32_t kind; /* weft_coll_kind_t + 1: 0 is "no signature" */
    int32_t dtype;
    int16_t op;
    int16_t mem; /* weft_memtype_t of the buffers: the shared-memory path
                  * reads host data and maps device buffers, so ranks agree */
    int32_t root;
    uint64_t count;
} weft_coll_sig_t;

/* The signature of validated arguments whose buffers are of memory type mem. */
void weft__sig_make(weft_coll_sig_t *sig, const struct weft_coll_args *a, int mem);
/* Its hash: never 0, equal for equal signatures. */
uint32_t weft__sig_hash(const weft_coll_sig_t *sig);
int weft__sig_equal(const weft_coll_sig_t *a, const weft_coll_sig_t *b);

/*
 * Describe how sigs[0..n-1] (those of ranks[0..n-1]; entries whose kind is 0
 * are skipped) disagree: "op differs: ranks 0-2 sum, rank 3 max". Returns
 * the length written into buf (0 when they all agree).
 */
size_t weft__sig_describe(char *buf, size_t len, const weft_coll_sig_t *sigs, const int *ranks,
                          int n);

#endif /* WEFT_COLL_DIAG_SIG_H */
