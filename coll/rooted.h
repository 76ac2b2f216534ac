/*
 * Rooted collectives (bcast, reduce, gather, scatter) and barrier: the
 * builders, and the binomial tree they share.
 *
 * The binomial tree works on relative ranks v = (rank - root) mod p, so the
 * root is 0. The parent of v != 0 is v with its lowest set bit cleared; the
 * children of v are v + m for the powers of two m below lowbit(v) (below p
 * for the root) with v + m < p. Rank v's subtree is the contiguous range of
 * relative ranks [v, v + weft__binomial_subtree(v, p)).
 *
 *   p = 8:        0
 *             /   |   \
 *            4    2    1
 *           / \   |
 *          6   5  3
 *          |
 *          7
 *
 * Builders only build schedules (coll/sched.h); they never block.
 */
#ifndef WEFT_COLL_ROOTED_H
#define WEFT_COLL_ROOTED_H

#include "coll/coll.h"

static inline int weft__rel_rank(int rank, int root, int p)
{
    return (rank - root + p) % p;
}

static inline int weft__abs_rank(int v, int root, int p)
{
    return (v + root) % p;
}

/* The smallest power of two >= p (the root's "lowest bit"). */
static inline int weft__binomial_span(int v, int p)
{
    int m = 1;

    if (v != 0) {
        return v & -v;
    }
    while (m < p) {
        m <<= 1;
    }
    return m;
}

/* Relative ranks in v's subtree (v included). */
static inline int weft__binomial_subtree(int v, int p)
{
    int span = weft__binomial_span(v, p);

    return span < p - v ? span : p - v;
}

weft_status_t weft__bcast_binomial(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__bcast_scatter_allgather(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__reduce_binomial(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__reduce_reduce_scatter_gather(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__gather_binomial(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__scatter_binomial(weft_sched_t *s, const weft_coll_args_t *a);
weft_status_t weft__barrier_dissemination(weft_sched_t *s, const weft_coll_args_t *a);

#endif /* WEFT_COLL_ROOTED_H */
