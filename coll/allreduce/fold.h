/*
 * The standard fold of non-power-of-two rank counts, shared by recursive
 * doubling and Rabenseifner: with p' the largest power of two <= p and
 * rem = p - p', even ranks below 2*rem send their whole vector to the odd
 * rank above and sit out; the remaining p' ranks are renumbered 0..p'-1 and
 * run a power-of-two algorithm; at the end the odd ranks send the result
 * back. Slot 0 carries the fold, slot WEFT_FOLD_OUT_SLOT the result.
 */
#ifndef WEFT_COLL_ALLREDUCE_FOLD_H
#define WEFT_COLL_ALLREDUCE_FOLD_H

#include "coll/coll.h"

#define WEFT_FOLD_OUT_SLOT WEFT_TAG_MAX_SLOT

typedef struct weft_fold {
    int rank;
    int pof2;
    int rem;
    int newrank; /* -1 for ranks that sit out */
} weft_fold_t;

void weft__fold_init(weft_fold_t *fold, int rank, int size);

/* Rank in the communicator of power-of-two rank newrank. */
static inline int weft__fold_real_rank(const weft_fold_t *fold, int newrank)
{
    return newrank < fold->rem ? newrank * 2 + 1 : newrank + fold->rem;
}

/*
 * Fold in: an even rank below 2*rem sends `data` (after task prev); an odd
 * one receives into tmp and writes data (or a->src for data) combined with it
 * into a->dst. Returns the task after which a->dst holds this rank's
 * contribution (odd and untouched ranks) or the send (even ranks).
 */
int weft__fold_in(weft_sched_t *s, const weft_fold_t *fold, const weft_coll_args_t *a,
                  const void *data, void *tmp, int prev);

/* Fold out: odd ranks below 2*rem send buf to rank - 1, which receives it
 * into buf; both after task prev. */
void weft__fold_out(weft_sched_t *s, const weft_fold_t *fold, void *buf, size_t bytes, int prev);

#endif /* WEFT_COLL_ALLREDUCE_FOLD_H */
