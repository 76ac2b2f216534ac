/*
 * Shared-memory collectives of one node as schedule tasks (coll/shm/shm.h
 * has the segment, the rounds and the flag protocol).
 *
 * Every operation cuts its data into rounds of at most one slot per rank.
 * Per round, L local ranks, n bytes of a vector:
 *
 *   allreduce, small (one phase):   copy in | wait all | reduce all L slots
 *   allreduce, large (two phases):  copy in the others' slices | wait all |
 *       reduce slice `me` of my src and every other slot into my slot |
 *       publish | copy my slice out | wait all | copy the others' slices out
 *
 *        slot 0: [ r0 | s1 ]     rank 0 reduces its s0 and slot 1's s0 into r0,
 *        slot 1: [ s0 | r1 ]     rank 1 its s1 and slot 0's s1 into r1;
 *                                then both copy r0 and r1 out.
 *
 *   reduce_scatter: copy my blocks in | wait all | reduce block `me` of
 *       every slot into dst
 *   allgather: copy mine in | wait all | copy every slot out
 *   bcast: root copies in | the others wait for root and copy out
 *   (one-phase data of up to 8 bytes per rank, in host memory, goes in the
 *   rank's control line instead of its slot: the flag a reader waits for
 *   brings it along; allreduce, reduce, allgather, bcast, gather, and
 *   scatter and alltoall where a writer's pieces for the L - 1 others fit;
 *   9 to 48 bytes of the first five in a wide line, data and stamp in one
 *   cache line: wide_round)
 *   reduce: as allreduce, only root copies out, the others' slices (its own it
 *       reduces into dst; small: root reduces all)
 *   barrier: publish | wait all (where ranks outnumber cores the others wait for
 *       local rank 0's release after that: round_barrier)
 *   gather: copy my block in | root waits all and copies every slot out
 *   scatter: root copies every block's piece into its slot, piece q at
 *       q * chunk | the others wait for root and copy their piece out
 *   alltoall: copy every block's piece in (piece q at q * chunk) | wait all |
 *       copy piece `me` of every slot into block q of dst
 *
 *        slot 0: [ 0->0 | 0->1 ]     rank 1 copies piece 1 of slot 0 into
 *        slot 1: [ 1->0 | 1->1 ]     its block 0 (its own block it copies
 *                                    from src directly)
 *
 *   Scatter and alltoall cut a slot into L pieces: a round carries slot/L
 *   bytes of every block. In place (alltoall src == dst) is safe: round r
 *   writes piece r of dst's blocks only after it copied piece r of src's.
 *
 * Cost per round (a: one flag handoff, c: copy s/byte, g: reduce s/byte):
 * allreduce one phase a + n c + (L-1) n g, two phases 2a + 2 n c + (L-1)/L n g;
 * reduce_scatter a + n c + (L-1)/L n g; allgather a + n c + n c / L;
 * gather (n: all blocks) a + n/L c + n c at the root; scatter the same the
 * other way; alltoall a + 2 n c, with rounds of slot/L per block (see
 * coll/cost.c, which holds the models used for selection). The single-copy
 * rounds (process_vm_readv, device IPC) are in coll/shm/single_copy.c.
 */
#include "coll/shm/op.h"
#include "coll/comm_state.h"
#include "device/host/host.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes per step of a device allreduce through IPC (at least): each step is
 * a reduction and copies on the device, so it should not be short. */
#define IPC_CHUNK (2u << 20)

/* Local rank q published phase 1 of round v / 4 with another signature
 * than ours: recorded in o->differs (op_poll fails the operation). */
static inline int differs(shm_op_t *o, int q, uint64_t v)
{
    if ((v & 3) == 1 &&
        WEFT_UNLIKELY(__atomic_load_n(&o->shm->ctrl[q].sig[(v >> 2) % WEFT_SHM_LINE_DEPTH],
                                      __ATOMIC_RELAXED) != o->desc->sig_hash)) {
        o->differs = q;
        return 1;
    }
    return 0;
}

/* 1 when local rank q's arrive reached v (what was read is remembered in
 * shm->seen, for weft__shm_op_reusable) */
static inline int arrived(weft_shm_t *shm, int q, uint64_t v)
{
    uint64_t a;

    if (shm->seen[q] >= v) {
        return 1;
    }
    a = load(&shm->ctrl[q].arrive);
    if (a > shm->seen[q]) {
        shm->seen[q] = a;
    }
    return a >= v;
}

/* n elements of a one-phase round travel in the sender's control line (DATA1) */
static inline int fits_line(const shm_op_t *o, size_t n)
{
    return n * o->esize <= sizeof(uint64_t) && o->dev->memtype == WEFT_MEM_HOST;
}

/* The elements of round o->r that a rank of a kind that places its data with DATA1 puts there
 * (an allgather's largest block): 1 for those kinds, 0 for the others. */
static int data1_span(const shm_op_t *o, size_t *n_p)
{
    switch (o->kind) {
    case OP_ALLREDUCE1:
    case OP_REDUCE1:
    case OP_BCAST:
    case OP_GATHER:
        *n_p = weft__shm_op_span(o->count, o->chunk, o->r);
        return 1;
    case OP_ALLGATHER:
        *n_p = 0;
        for (int q = 0; q < o->shm->L; q++) {
            size_t b = weft__shm_op_span(o->bcnt[q], o->chunk, o->r);

            *n_p = b > *n_p ? b : *n_p;
        }
        return 1;
    default:
        return 0;
    }
}

/* Whether round o->r of the operation carries its data in the wide lines (weft_shm_wide_t): a
 * one-phase round of host memory whose largest block is 9 to WEFT_SHM_WIDE_BYTES bytes, of the
 * kinds that place it with DATA1. Every local rank decides alike: the signature (count, dtype,
 * memory type) and the round are theirs all. */
static inline int fits_wide(const shm_op_t *o, size_t n)
{
    return n * o->esize > sizeof(uint64_t) && n * o->esize <= WEFT_SHM_WIDE_BYTES &&
           o->dev->memtype == WEFT_MEM_HOST;
}

static int wide_round(const shm_op_t *o)
{
    size_t n;

    return data1_span(o, &n) && fits_wide(o, n);
}

/* Local rank q's phase 1 of wide round v / 4 (v = 4 R + 1): 1 once its stamp says its data is
 * in (remembered in shm->seen as its arrive would be: it started round R); 0 before, and also
 * when its signature differs (o->differs). A peer that published its arrive for the round
 * without the stamp took another form: its call differs, and its line's signature says so. */
static int wide_arrived(shm_op_t *o, int q, uint64_t v)
{
    weft_shm_t *shm = o->shm;
    const weft_shm_wide_t *w = &shm->ctrl[q].wide[(v >> 2) % WEFT_SHM_LINE_DEPTH];

    if (__atomic_load_n(&w->stamp, __ATOMIC_ACQUIRE) != v) {
        if (!arrived(shm, q, v)) {
            return 0;
        }
        /* the stamp is stored before the arrive: read again now that the arrive is seen */
        if (__atomic_load_n(&w->stamp, __ATOMIC_ACQUIRE) != v) {
            differs(o, q, v);
            return 0;
        }
    }
    if (shm->seen[q] < v) {
        shm->seen[q] = v;
    }
    if (WEFT_UNLIKELY(__atomic_load_n(&w->sig, __ATOMIC_RELAXED) != o->desc->sig_hash)) {
        o->differs = q;
        return 0;
    }
    return 1;
}

/* Local rank q published phase v & 3 of round v / 4 with our signature (wide: through its wide
 * line, wide_arrived); 0 before, and when its signature differs (o->differs). */
static inline int peer_ready(shm_op_t *o, int q, uint64_t v, int wide)
{
    return wide ? wide_arrived(o, q, v) : arrived(o->shm, q, v) && !differs(o, q, v);
}

/* 1 when every local rank's arrive (or done) counter reached v (0 also
 * when a rank's signature differs: o->differs). */
int weft__shm_op_ready_all(shm_op_t *o, int done, uint64_t v, int *peer_p)
{
    weft_shm_t *shm = o->shm;
    const int wide = !done && (v & 3) == 1 && wide_round(o);

    for (; o->waiting < shm->L; o->waiting++) {
        if (done ? load(&shm->ctrl[o->waiting].done) < v : !peer_ready(o, o->waiting, v, wide)) {
            *peer_p = shm->local_ranks[o->waiting];
            return 0;
        }
    }
    o->waiting = 0;
    return 1;
}

static int ready_one(shm_op_t *o, int q, uint64_t v, int *peer_p)
{
    if (!peer_ready(o, q, v, (v & 3) == 1 && wide_round(o))) {
        *peer_p = o->shm->local_ranks[q];
        return 0;
    }
    return 1;
}

/* Round o->r of the operation keeps its data in the control lines (up to 8 bytes per rank of
 * host memory, or none) or the wide lines (wide_round): every local rank decides alike, from what
 * all of them know. */
static int line_round(const shm_op_t *o)
{
    size_t n = 0;

    if (data1_span(o, &n)) {
        return fits_line(o, n) || fits_wide(o, n);
    }
    switch (o->kind) {
    case OP_BARRIER:
        return 1;
    case OP_SCATTER:
    case OP_ALLTOALL: /* a writer's pieces for the L - 1 others (pieces_fit_line) */
        n = weft__shm_op_span(o->count, o->chunk, o->r) * (size_t)(o->shm->L - 1);
        break;
    default:
        return 0;
    }
    return fits_line(o, n);
}

/* Where local rank q's piece of round R (n elements) for local rank p lies (scatter, alltoall;
 * p != q): packed in q's control line when its L - 1 pieces fit there (two local ranks up to 8
 * bytes a block, four up to 2), else at p * chunk in q's slot. Writers and readers take the same
 * place: every local rank knows n, L and the memory type alike. */
static inline char *piece_at(const shm_op_t *o, int q, int p, uint64_t R, size_t n)
{
    if (fits_line(o, n * (size_t)(o->shm->L - 1))) {
        return (char *)&o->shm->ctrl[q].tiny[R % WEFT_SHM_LINE_DEPTH] +
               (size_t)(p < q ? p : p - 1) * n * o->esize;
    }
    return SLOT(o, q, R) + (size_t)p * o->chunk * o->esize;
}

/*
 * Round R's buffers are free: nobody still reads round R - 2, their last
 * user (slot R % 2), or for a round that uses only the control lines,
 * round R - WEFT_SHM_LINE_DEPTH (their tiny and sig entries): every local
 * rank's done >= R - 1 (R - LINE_DEPTH + 1). A rank runs its rounds in
 * order and stores done = R' + 1 at the end of round R', so one that
 * published phase 1 of round R' + 1 (arrive >= 4(R' + 1) + 1) is done with
 * round R': most rounds read peers' arrive for the round before, and the
 * value this rank saw then answers without touching their control lines
 * again (no cache-line transfer at the start of a round; their done is
 * read only when it did not see that much). The deeper control lines let a
 * rank that reads nobody's line in its rounds (a bcast root, gather's
 * senders) pass on what it read a few rounds ago.
 */
static int lines_free(shm_op_t *o, uint64_t R, uint64_t back, int *peer_p)
{
    weft_shm_t *shm = o->shm;

    if (R <= back) {
        return 1;
    }
    for (; o->waiting < shm->L; o->waiting++) {
        int q = o->waiting;

        if (!arrived(shm, q, 4 * (R - back) + 1) && load(&shm->ctrl[q].done) < R - back) {
            *peer_p = shm->local_ranks[q];
            return 0;
        }
    }
    o->waiting = 0;
    return 1;
}

int weft__shm_op_reusable(shm_op_t *o, uint64_t R, int *peer_p)
{
    return lines_free(o, R, line_round(o) ? WEFT_SHM_LINE_DEPTH - 1 : 1, peer_p);
}

void weft__shm_op_publish(shm_op_t *o, uint64_t R, int ph)
{
    weft_shm_ctrl_t *c = &o->shm->ctrl[o->shm->me];

    if (ph == 1 && wide_round(o)) { /* its data is in: the stamp, before the arrive */
        weft_shm_wide_t *w = &c->wide[R % WEFT_SHM_LINE_DEPTH];

        __atomic_store_n(&w->sig, o->desc->sig_hash, __ATOMIC_RELAXED);
        __atomic_store_n(&w->stamp, 4 * R + 1, __ATOMIC_RELEASE);
    }
    if (ph == 1 && o->shm->sig_sent[R % WEFT_SHM_LINE_DEPTH] != o->desc->sig_hash) {
        /* the signature travels with phase 1 (the cold line is written only
         * when it changes, so repeated operations leave it in our cache) */
        c->full[R % WEFT_SHM_LINE_DEPTH] = o->desc->sig;
        __atomic_store_n(&c->sig[R % WEFT_SHM_LINE_DEPTH], o->desc->sig_hash, __ATOMIC_RELAXED);
        o->shm->sig_sent[R % WEFT_SHM_LINE_DEPTH] = o->desc->sig_hash;
    }
    store(&c->arrive, 4 * R + (uint64_t)ph);
    /* known here: the waits that count this rank among the local ranks (lines_free, ready_all)
     * need not read its line back from a peer that polls it */
    o->shm->seen[o->shm->me] = 4 * R + (uint64_t)ph;
}

/* dst = srcs[0] op ... op srcs[n-1], in groups the device takes at once. */
weft_status_t weft__shm_op_reduce_many(shm_op_t *o, void *dst, const void **srcs, int n,
                                       size_t count)
{
    weft_status_t status;
    int first = n < WEFT_SCHED_MAX_REDUCE_INPUTS ? n : WEFT_SCHED_MAX_REDUCE_INPUTS;

    if (count == 0) {
        return WEFT_OK;
    }
    status = o->dev->reduce(dst, srcs, first, count, o->desc->dtype, o->desc->op);
    for (int i = first; i < n && status == WEFT_OK;) {
        const void *group[WEFT_SCHED_MAX_REDUCE_INPUTS];
        int g = 1;

        group[0] = dst;
        while (g < WEFT_SCHED_MAX_REDUCE_INPUTS && i < n) {
            group[g++] = srcs[i++];
        }
        status = o->dev->reduce(dst, group, g, count, o->desc->dtype, o->desc->op);
    }
    return status;
}

weft_status_t weft__shm_op_copy(shm_op_t *o, void *dst, const void *src, size_t elems)
{
    if (elems == 0 || dst == src) {
        return WEFT_OK;
    }
    return o->dev->copy(dst, src, elems * o->esize);
}

/* A copy into the caller's result: with non-temporal stores when the operation's result is large
 * (o->stream, WEFT_SHM_STREAM): it would not stay in the caches anyway, and streaming it out
 * saves reading every line of it first and evicting the segment's lines, which the next rounds
 * reuse. */
static weft_status_t copy_out(shm_op_t *o, void *dst, const void *src, size_t elems)
{
    if (o->stream) {
        weft__host_copy_stream(dst, src, elems * o->esize);
        return WEFT_OK;
    }
    return weft__shm_op_copy(o, dst, src, elems);
}

/* Elements of a vector or a block in round r. */
size_t weft__shm_op_span(size_t total, size_t chunk, uint64_t r)
{
    size_t e0 = (size_t)r * chunk;

    return total > e0 ? (total - e0 < chunk ? total - e0 : chunk) : 0;
}

/* one-phase data of n elements: in the wide line of a wide round, else in the control line
 * when it fits */
#define DATA1(o, q, R, n)                                                                          \
    (wide_round(o)         ? (char *)(o)->shm->ctrl[(q)].wide[(R) % WEFT_SHM_LINE_DEPTH].data      \
     : fits_line((o), (n)) ? (char *)&(o)->shm->ctrl[(q)].tiny[(R) % WEFT_SHM_LINE_DEPTH]          \
                           : SLOT((o), (q), (R)))

static weft_status_t round_allreduce(shm_op_t *o, uint64_t R, int *peer_p)
{
    weft_shm_t *shm = o->shm;
    int L = shm->L, me = shm->me;
    size_t e0 = (size_t)o->r * o->chunk, n = weft__shm_op_span(o->count, o->chunk, o->r),
           es = o->esize;
    const void **srcs = shm->srcs;
    weft_status_t status = WEFT_OK;

    switch (o->phase) {
    case 0:
        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (o->kind == OP_ALLREDUCE1 || o->kind == OP_REDUCE1) {
            status = weft__shm_op_copy(o, DATA1(o, me, R, n), o->src + e0 * es, n);
        } else {
            /* two phases: the others need only their slices of my data (my
             * own slice I reduce from src); the gap is my result's place */
            size_t mine = weft__block_start(n, L, me), end = mine + weft__block_count(n, L, me);

            status = weft__shm_op_copy(o, SLOT(o, me, R), o->src + e0 * es, mine);
            if (status == WEFT_OK) {
                status = weft__shm_op_copy(o, SLOT(o, me, R) + end * es, o->src + (e0 + end) * es,
                                           n - end);
            }
        }
        weft__shm_op_publish(o, R, 1);
        o->phase = 1;
        if (o->kind == OP_REDUCE1 && me != o->root) {
            /* its data is out and it reads nobody's: done, as gather's senders (the root
             * compares the signatures; the next rounds' buffers wait for its readers) */
            return status;
        }
        /* fall through */
    case 1:
        if (status != WEFT_OK || !weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p)) {
            return status != WEFT_OK ? status : WEFT_INPROGRESS;
        }
        if (o->kind == OP_ALLREDUCE1 || o->kind == OP_REDUCE1) {
            if (o->kind == OP_ALLREDUCE1 || me == o->root) {
                for (int q = 0; q < L; q++) {
                    srcs[q] = DATA1(o, q, R, n);
                }
                status = weft__shm_op_reduce_many(o, o->dst + e0 * es, srcs, L, n);
            }
            return status;
        }
        {
            size_t off = weft__block_start(n, L, me) * es, cnt = weft__block_count(n, L, me);
            int k = 1;

            srcs[0] = o->src + e0 * es + off;
            for (int q = 0; q < L; q++) {
                if (q != me) {
                    srcs[k++] = SLOT(o, q, R) + off;
                }
            }
            /* a reduce's root reduces its slice straight into its result: nobody reads it */
            status = weft__shm_op_reduce_many(o,
                                              o->kind == OP_REDUCE2 && me == o->root
                                                  ? o->dst + e0 * es + off
                                                  : SLOT(o, me, R) + off,
                                              srcs, L, cnt);
        }
        weft__shm_op_publish(o, R, 2);
        o->phase = 2;
        if (status == WEFT_OK && o->kind == OP_ALLREDUCE2) {
            /* my own slice out at once, while the others may still reduce theirs: that copy
             * leaves the wait (np 2, 512 KiB-2 MiB: 0.91-0.93 of Open MPI's time -> 0.79-0.81) */
            size_t off = weft__block_start(n, L, me);

            status = copy_out(o, o->dst + (e0 + off) * es, SLOT(o, me, R) + off * es,
                              weft__block_count(n, L, me));
        }
        if (o->kind == OP_REDUCE2 && me != o->root) {
            return status;
        }
        /* fall through */
    case 2:
        if (status != WEFT_OK || !weft__shm_op_ready_all(o, 0, 4 * R + 2, peer_p)) {
            return status != WEFT_OK ? status : WEFT_INPROGRESS;
        }
        for (int q = 0; q < L && status == WEFT_OK; q++) {
            size_t off = weft__block_start(n, L, q);

            if (q != me) { /* my slice is in dst already */
                status = copy_out(o, o->dst + (e0 + off) * es, SLOT(o, q, R) + off * es,
                                  weft__block_count(n, L, q));
            }
        }
        return status;
    }
    return WEFT_OK;
}

/* n elements of local rank q's block, from its element e0 on, from `from` to their place in dst
 * (allgather). */
static weft_status_t place(shm_op_t *o, int q, size_t e0, const char *from, size_t n)
{
    weft_status_t status = WEFT_OK;

    while (n > 0 && status == WEFT_OK) {
        size_t at, k = weft__shm_op_run(o, q, e0, n, &at);

        status = weft__shm_op_copy(o, o->dst + at * o->esize, from, k);
        from += k * o->esize;
        e0 += k;
        n -= k;
    }
    return status;
}

/* The other way (reduce_scatter): n elements of the block for local rank q, from its element e0
 * on, from their place in src to `to`. */
static weft_status_t take(shm_op_t *o, int q, size_t e0, char *to, size_t n)
{
    weft_status_t status = WEFT_OK;

    while (n > 0 && status == WEFT_OK) {
        size_t at, k = weft__shm_op_run(o, q, e0, n, &at);

        status = weft__shm_op_copy(o, to, o->src + at * o->esize, k);
        to += k * o->esize;
        e0 += k;
        n -= k;
    }
    return status;
}

static weft_status_t round_blocks(shm_op_t *o, uint64_t R, int *peer_p)
{
    weft_shm_t *shm = o->shm;
    int L = shm->L, me = shm->me;
    size_t e0 = (size_t)o->r * o->chunk, es = o->esize;
    const void **srcs = shm->srcs;
    weft_status_t status = WEFT_OK;

    if (o->phase == 0) {
        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (o->kind == OP_REDUCE_SCATTER) {
            for (int q = 0; q < L && status == WEFT_OK; q++) {
                status = take(o, q, e0, SLOT(o, me, R) + (size_t)q * o->chunk * es,
                              weft__shm_op_span(o->bcnt[q], o->chunk, o->r));
            }
        } else {
            const size_t n = weft__shm_op_span(o->bcnt[me], o->chunk, o->r);

            status = weft__shm_op_copy(o, DATA1(o, me, R, n), o->src + e0 * es, n);
        }
        weft__shm_op_publish(o, R, 1);
        o->phase = 1;
    }
    if (status != WEFT_OK || !weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p)) {
        return status != WEFT_OK ? status : WEFT_INPROGRESS;
    }
    if (o->kind == OP_REDUCE_SCATTER) {
        for (int q = 0; q < L; q++) {
            srcs[q] = SLOT(o, q, R) + (size_t)me * o->chunk * es;
        }
        return weft__shm_op_reduce_many(o, o->dst + e0 * es, srcs, L,
                                        weft__shm_op_span(o->bcnt[me], o->chunk, o->r));
    }
    for (int q = 0; q < L && status == WEFT_OK; q++) {
        const size_t n = weft__shm_op_span(o->bcnt[q], o->chunk, o->r);

        status = place(o, q, e0, q == me ? o->src + e0 * es : DATA1(o, q, R, n), n);
    }
    return status;
}

static weft_status_t round_bcast(shm_op_t *o, uint64_t R, int *peer_p)
{
    size_t e0 = (size_t)o->r * o->chunk, n = weft__shm_op_span(o->count, o->chunk, o->r),
           es = o->esize;

    if (o->shm->me == o->root) {
        weft_status_t status;

        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        status = weft__shm_op_copy(o, DATA1(o, o->root, R, n), o->src + e0 * es, n);
        weft__shm_op_publish(o, R, 1);
        return status;
    }
    if (o->phase == 0) {
        /* only for the signature check: a rank that takes another root
         * for this bcast compares it with ours. Round R's signature slot
         * is free once nobody reads round R - 2 (the root waited for that
         * too before its data of round R, so this costs no time) */
        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        weft__shm_op_publish(o, R, 1);
        o->phase = 1;
    }
    if (!ready_one(o, o->root, 4 * R + 1, peer_p)) {
        return WEFT_INPROGRESS;
    }
    return weft__shm_op_copy(o, o->dst + e0 * es, DATA1(o, o->root, R, n), n);
}

/* Round R of a gather: everyone's piece of its block in its slot (in the
 * control line when it fits), the root copies them all out. */
static weft_status_t round_gather(shm_op_t *o, uint64_t R, int *peer_p)
{
    weft_shm_t *shm = o->shm;
    int L = shm->L, me = shm->me;
    size_t e0 = (size_t)o->r * o->chunk, n = weft__shm_op_span(o->count, o->chunk, o->r),
           es = o->esize;
    weft_status_t status = WEFT_OK;

    if (o->phase == 0) {
        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (me != o->root) {
            status = weft__shm_op_copy(o, DATA1(o, me, R, n), o->src + e0 * es, n);
        }
        weft__shm_op_publish(o, R, 1); /* the root's: for the signature only */
        o->phase = 1;
        if (me != o->root || status != WEFT_OK) {
            return status;
        }
        /* the root's own piece while the others write theirs (np 2, osu's loop, 32 KiB-4 MiB:
         * 0.93-1.11 of Open MPI's time -> 0.48-0.63). Phase 2: copied; a line path that goes
         * on here (line_full) comes in at phase 1, its own piece not copied. */
        status =
            weft__shm_op_copy(o, o->dst + ((size_t)me * o->count + e0) * es, o->src + e0 * es, n);
        if (status != WEFT_OK) {
            return status;
        }
        o->phase = 2;
    }
    if (!weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p)) {
        return WEFT_INPROGRESS;
    }
    for (int q = 0; q < L && status == WEFT_OK; q++) {
        if (q != me || o->phase == 1) {
            status = weft__shm_op_copy(o, o->dst + ((size_t)q * o->count + e0) * es,
                                       q == me ? o->src + e0 * es : DATA1(o, q, R, n), n);
        }
    }
    return status;
}

/* This rank's piece of round R (n elements from e0) of every block of src
 * into its slot, piece q at q * chunk (or into its control line, piece_at);
 * its own block's piece to `own`. */
static weft_status_t pieces_in(shm_op_t *o, uint64_t R, size_t e0, size_t n, char *own)
{
    size_t es = o->esize;
    int me = o->shm->me;
    weft_status_t status = WEFT_OK;

    for (int q = 0; q < o->shm->L && status == WEFT_OK; q++) {
        const char *from = o->src + ((size_t)q * o->count + e0) * es;

        status = weft__shm_op_copy(o, q == me ? own : piece_at(o, me, q, R, n), from, n);
    }
    return status;
}

/* Round R of a scatter: the root's pieces of every block in its slot, each
 * rank copies its own (the root straight from src). */
static weft_status_t round_scatter(shm_op_t *o, uint64_t R, int *peer_p)
{
    int me = o->shm->me;
    size_t e0 = (size_t)o->r * o->chunk, n = weft__shm_op_span(o->count, o->chunk, o->r),
           es = o->esize;
    weft_status_t status = WEFT_OK;

    if (o->phase == 0) {
        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (me == o->root) {
            status = pieces_in(o, R, e0, n, o->dst + e0 * es);
        }
        weft__shm_op_publish(o, R, 1); /* the others': for the signature only */
        o->phase = 1;
        if (me == o->root || status != WEFT_OK) {
            return status;
        }
    }
    if (!ready_one(o, o->root, 4 * R + 1, peer_p)) {
        return WEFT_INPROGRESS;
    }
    return weft__shm_op_copy(o, o->dst + e0 * es, piece_at(o, o->root, me, R, n), n);
}

/* Round R of an alltoall: my pieces for every rank in my slot, then piece
 * `me` of every slot into my blocks (my own block straight from src). */
static weft_status_t round_alltoall(shm_op_t *o, uint64_t R, int *peer_p)
{
    weft_shm_t *shm = o->shm;
    int L = shm->L, me = shm->me;
    size_t e0 = (size_t)o->r * o->chunk, n = weft__shm_op_span(o->count, o->chunk, o->r),
           es = o->esize;
    weft_status_t status = WEFT_OK;

    if (o->phase == 0) {
        if (!weft__shm_op_reusable(o, R, peer_p)) {
            return WEFT_INPROGRESS;
        }
        status = pieces_in(o, R, e0, n, o->dst + ((size_t)me * o->count + e0) * es);
        weft__shm_op_publish(o, R, 1);
        o->phase = 1;
    }
    if (status != WEFT_OK || !weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p)) {
        return status != WEFT_OK ? status : WEFT_INPROGRESS;
    }
    for (int q = 0; q < L && status == WEFT_OK; q++) {
        if (q != me) {
            status = weft__shm_op_copy(o, o->dst + ((size_t)q * o->count + e0) * es,
                                       piece_at(o, q, me, R, n), n);
        }
    }
    return status;
}

/*
 * Barrier: publish | wait for every local rank. Local rank 0 then publishes phase 2, the
 * release, which the others wait for instead where ranks outnumber cores (o->release): it leaves
 * first, ahead of the others, which each leave when they next run, rather than all at once and
 * each next operation waiting for ranks not running. np 4 on 2 cores, the osu loop (every call
 * from a barrier) through the MPI interposer: bcast 8-256 B 2.97-3.25 of Open MPI's time ->
 * 0.21-0.25, scatter 4-9 us -> 0.32-0.44 at 8 B-1 KiB; back-to-back barriers pay local rank 0's
 * turn: 4.9-5.9 us -> 6.0-7.8. So a barrier right after another (the sequence number next to the
 * last barrier's: barrier_release) takes the flat form, as a run of barriers has nothing to gain
 * from the release: np 4, `weft_bench --vs-mpi --loop barrier`, alternating jobs, 3.2-3.7 us
 * (1.01-1.10 of Open MPI's time) -> 2.4-2.6 (0.74-0.78). Local rank 0 always releases, so ranks
 * that disagree on the form still meet; the others check its signature (it checks theirs).
 */
static weft_status_t round_barrier(shm_op_t *o, uint64_t R, int *peer_p)
{
    if (o->phase == 0) {
        if (!weft__shm_op_reusable(o, R, peer_p)) { /* round R's signature slot (see round_bcast) */
            return WEFT_INPROGRESS;
        }
        weft__shm_op_publish(o, R, 1);
        o->phase = 1;
    }
    if (o->release && o->shm->me != 0) {
        if (!ready_one(o, 0, 4 * R + 1, peer_p)) {
            return WEFT_INPROGRESS;
        }
        if (!arrived(o->shm, 0, 4 * R + 2)) {
            *peer_p = o->shm->local_ranks[0];
            return WEFT_INPROGRESS;
        }
        return WEFT_OK;
    }
    if (!weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p)) {
        return WEFT_INPROGRESS;
    }
    if (o->shm->me == 0) {
        weft__shm_op_publish(o, R, 2);
    }
    return WEFT_OK;
}

/* The operation's signature differs from local rank o->differs' in round R:
 * WEFT_ERR_MISMATCH naming the field and the local ranks (those that
 * published round R) that hold each value. */
static weft_status_t mismatch(shm_op_t *o, uint64_t R)
{
    weft_shm_t *shm = o->shm;
    weft_coll_sig_t *sigs = calloc((size_t)shm->L, sizeof(*sigs));
    int *ranks = calloc((size_t)shm->L, sizeof(*ranks));
    char text[256];
    size_t len = 0;

    if (sigs != NULL && ranks != NULL) {
        /* the message names every rank's value: give the others time to
         * publish this round (they may never: then they are left out). A
         * rank that comes later than this sees the failure notice first and
         * never publishes, so on a loaded machine the time must cover a
         * descheduled rank (20 ms did not, in CI); only failures pay it */
        for (uint64_t until = weft__time_ns() + 500000000; weft__time_ns() < until;) {
            int q = 0;

            while (q < shm->L && load(&shm->ctrl[q].arrive) >= 4 * R + 1) {
                q++;
            }
            if (q == shm->L) {
                break;
            }
            sched_yield();
        }
        for (int q = 0; q < shm->L; q++) {
            ranks[q] = shm->local_ranks[q];
            if (q == shm->me) {
                sigs[q] = o->desc->sig;
            } else if (load(&shm->ctrl[q].arrive) >= 4 * R + 1) {
                sigs[q] = shm->ctrl[q].full[R % WEFT_SHM_LINE_DEPTH];
            }
        }
        len = weft__sig_describe(text, sizeof(text), sigs, ranks, shm->L);
    }
    free(sigs);
    free(ranks);
    if (len == 0) { /* hashes differ, signatures agree: only a torn read could do this */
        snprintf(text, sizeof(text), "arguments differ from rank %d's",
                 shm->local_ranks[o->differs]);
    }
    return weft__error(WEFT_ERR_MISMATCH, "%s", text);
}

static weft_status_t op_poll(void *state, int *peer_p)
{
    shm_op_t *o = state;
    weft_shm_t *shm = o->shm;

    while (o->r < o->nrounds) {
        uint64_t R = o->round0 + o->r;
        weft_status_t status;

        if (shm->dead_rank >= 0) {
            return weft__shm_health(shm, 0);
        }
        if (shm->broken != NULL) {
            return weft__error(WEFT_ERR_INTERNAL, "shared-memory collectives unusable: %s",
                               shm->broken);
        }
        if (shm->exec_round != R) {
            *peer_p = -1; /* an earlier operation's rounds run first */
            return WEFT_INPROGRESS;
        }
        switch (o->kind) {
        case OP_REDUCE_SCATTER:
        case OP_ALLGATHER:
            status = round_blocks(o, R, peer_p);
            break;
        case OP_BCAST:
            status = round_bcast(o, R, peer_p);
            break;
        case OP_BARRIER:
            status = round_barrier(o, R, peer_p);
            break;
        case OP_GATHER:
            status = round_gather(o, R, peer_p);
            break;
        case OP_SCATTER:
            status = round_scatter(o, R, peer_p);
            break;
        case OP_ALLTOALL:
            status = round_alltoall(o, R, peer_p);
            break;
        case OP_ALLREDUCE_CMA:
        case OP_ALLREDUCE_IPC:
            status = weft__shm_round_cma(o, R, peer_p);
            break;
        case OP_IPC_ALLGATHER:
        case OP_IPC_BCAST:
        case OP_IPC_REDUCE:
        case OP_CMA_ALLGATHER:
        case OP_CMA_BCAST:
        case OP_CMA_ALLTOALL:
        case OP_CMA_GATHER:
        case OP_CMA_SCATTER:
            status = weft__shm_round_ipc(o, R, peer_p);
            break;
        default:
            status = round_allreduce(o, R, peer_p);
            break;
        }
        if (WEFT_UNLIKELY(o->differs >= 0)) {
            *peer_p = shm->local_ranks[o->differs];
            return mismatch(o, R);
        }
        if (status != WEFT_OK) {
            return status;
        }
        store(&shm->ctrl[shm->me].done, R + 1);
        shm->exec_round++;
        o->r++;
        o->phase = 0;
        o->waiting = 0;
    }
    *peer_p = -1;
    return WEFT_OK;
}

static void op_cancel(void *state)
{
    shm_op_t *o = state;

    weft__shm_ipc_release(o); /* scratch held by an IPC round cut short */
    if (o->r < o->nrounds && o->shm->broken == NULL) {
        o->shm->broken = "an operation ended before its shared-memory rounds ran";
    }
}

static void op_init(shm_op_t *o, weft_shm_t *shm, op_kind_t kind, size_t esize,
                    const weft_op_desc_t *desc, const weft_device_ops_t *dev)
{
    memset(o, 0, sizeof(*o));
    o->shm = shm;
    o->kind = kind;
    o->esize = esize ? esize : 1;
    o->desc = desc;
    o->dev = dev;
    o->chunk = shm->slot_bytes / o->esize;
    if (kind == OP_ALLREDUCE_IPC && shm->slot_bytes < IPC_CHUNK) {
        /* chunks only pace the pipeline between ranks: no slot holds them */
        o->chunk = IPC_CHUNK / o->esize;
    }
    o->differs = -1;
}

static shm_op_t *op_new(weft_sched_t *s, weft_shm_t *shm, op_kind_t kind, size_t esize)
{
    shm_op_t *o = weft__sched_scratch(s, sizeof(*o));

    if (o != NULL) {
        op_init(o, shm, kind, esize, weft__sched_desc(s), weft__sched_dev(s));
    }
    return o;
}

/* The results of host allreduces from WEFT_SHM_STREAM bytes go out with non-temporal stores
 * (copy_out). Not those of allgather and bcast, pure copies: measured slower that way (1.22-1.26x
 * at 8 MiB, 1.04-1.07x at 32 MiB, results reused from the last level cache). */
static void stream_init(shm_op_t *o)
{
    o->stream = o->kind == OP_ALLREDUCE2 && o->dev->memtype == WEFT_MEM_HOST &&
                o->count * o->esize >= weft__coll_config.shm_stream;
}

/* Reserve the operation's rounds (in build order on every local rank). */
static void op_reserve(shm_op_t *o, size_t total)
{
    int single = o->kind == OP_ALLREDUCE_CMA || o->kind == OP_ALLREDUCE_IPC ||
                 o->kind == OP_IPC_ALLGATHER || o->kind == OP_IPC_BCAST ||
                 o->kind == OP_IPC_REDUCE || weft__shm_kind_cma(o->kind);

    o->nrounds =
        o->kind == OP_BARRIER || (single && total > 0) ? 1 : (total + o->chunk - 1) / o->chunk;
    o->round0 = o->shm->next_round;
    o->shm->next_round += o->nrounds;
    stream_init(o);
}

static int op_add(weft_sched_t *s, shm_op_t *o, size_t total)
{
    if (o == NULL) {
        return -1;
    }
    op_reserve(o, total);
    return weft__sched_poll(s, op_poll, op_cancel, o);
}

/* Device memory whose table can map another process's buffers: the
 * operations read the peers' buffers instead of staging through the slots
 * (which must hold the two IPC handles of a rank). Not a device whose streams
 * run weft's device tasks (emu, WEFT_DEVICE_TASK): there the slots' copies are
 * the device's own loads and stores, while an IPC operation maps and unmaps
 * the peers' buffers in every call (np 2, enqueued allreduce, --loop: 8 B
 * 38-68 us by IPC, 6-10 us through the slots; 32 KiB 56-109 against 14-16;
 * 2 MiB 377-1292 against 372-406). The rule asks the table and the setting
 * only, so that every form of a call (enqueued, blocking, nonblocking) on
 * every rank picks alike. */
static int use_ipc(const weft_shm_t *shm, weft_memtype_t memtype)
{
    const weft_device_ops_t *dev = weft__device_ops(memtype);

    return memtype != WEFT_MEM_HOST && dev->ipc_export != NULL &&
           !(dev->stream_task != NULL && weft__coll_config.device_task) &&
           shm->slot_bytes >= 2 * WEFT_DEVICE_IPC_MAX;
}

/* Host memory the peers read where it is, by process_vm_readv, instead of
 * through the slots: a copy instead of two, from `from` bytes. */
static int use_cma_copy(const weft_shm_t *shm, weft_memtype_t memtype, size_t bytes, size_t from)
{
    return shm->cma && memtype == WEFT_MEM_HOST && bytes >= from;
}

/* Bytes from which host buffers are read where they are, for a single-copy setting: auto is
 * auto_from where the node's reads were measured fast enough (shm->cma_fast, coll/coll.h) and,
 * for the settings that say so (WEFT_SHM_CMA, WEFT_SHM_CMA_COPY), every rank has a core; never
 * where ranks outnumber cores there (the readers' peers wait for them). */
static size_t cma_from(const weft_shm_t *shm, size_t setting, size_t auto_from, int oversubscribed)
{
    return setting != WEFT_CONFIG_AUTO        ? setting
           : oversubscribed || !shm->cma_fast ? SIZE_MAX
                                              : auto_from;
}

/* ... for a bcast, scatter or gather (WEFT_SHM_CMA_COPY) */
static size_t cma_copy_from(const weft_shm_t *shm, int oversubscribed)
{
    return cma_from(shm, weft__coll_config.shm_cma_copy, WEFT_SHM_CMA_COPY_AUTO_FROM,
                    oversubscribed);
}

size_t weft__shm_cma_allgather_from(const weft_shm_t *shm)
{
    return shm->cma ? cma_from(shm, weft__coll_config.shm_cma_allgather,
                               WEFT_SHM_CMA_ALLGATHER_AUTO_FROM, 0)
                    : SIZE_MAX;
}

size_t weft__shm_cma_alltoall_from(const weft_shm_t *shm)
{
    return shm->cma ? cma_from(shm, weft__coll_config.shm_cma_alltoall,
                               WEFT_SHM_CMA_ALLTOALL_AUTO_FROM, 0)
                    : SIZE_MAX;
}

/* The operation that serves an allgather of `bytes` (the whole result) on this node. */
static op_kind_t allgather_kind(const weft_shm_t *shm, weft_memtype_t memtype, size_t bytes)
{
    return use_ipc(shm, memtype)                                                  ? OP_IPC_ALLGATHER
           : use_cma_copy(shm, memtype, bytes, weft__shm_cma_allgather_from(shm)) ? OP_CMA_ALLGATHER
                                                                                  : OP_ALLGATHER;
}

/* The operation that serves an alltoall of blocks of `bytes` on this node:
 * the peers' send buffers read where they are, or the slots (in place, the
 * peers would read blocks this rank overwrites). */
static op_kind_t alltoall_kind(const weft_shm_t *shm, weft_memtype_t memtype, const void *src,
                               const void *dst, size_t bytes)
{
    const char *s = src, *d = dst;
    const size_t whole = bytes * (size_t)shm->L;
    const int apart = s + whole <= d || d + whole <= s;

    return apart && bytes > 0 && use_cma_copy(shm, memtype, bytes, weft__shm_cma_alltoall_from(shm))
               ? OP_CMA_ALLTOALL
               : OP_ALLTOALL;
}

/* The operation that serves a vector collective of `bytes` on this node. */
static op_kind_t vector_kind(const weft_shm_t *shm, weft_coll_kind_t kind, size_t bytes,
                             weft_memtype_t memtype, int oversubscribed)
{
    int one = bytes <= weft__coll_config.shm_small;

    switch (kind) {
    case WEFT_COLL_ALLREDUCE:
        /* single copy (WEFT_SHM_CMA): measured at np 2, 1-4 MiB, 0.62-0.91 of Open MPI's time
         * -> 0.48-0.69 for numpy arrays, 0.75-0.80 -> 0.75-0.77 for weft_bench's buffers; with
         * ranks outnumbering cores (np 4 on 2) 0.64-0.69 -> 0.81-0.91: each chunk waits for
         * the peers that reduce it. From WEFT_SHM_STREAM the staged rounds stream the result
         * out and win (16-32 MiB: 0.34-0.36 against 0.47-0.50). */
        if (use_cma_copy(
                shm, memtype, bytes,
                cma_from(shm, weft__coll_config.shm_cma, WEFT_SHM_CMA_AUTO_FROM, oversubscribed)) &&
            bytes < weft__coll_config.shm_stream) {
            return OP_ALLREDUCE_CMA;
        }
        if (use_ipc(shm, memtype)) {
            return OP_ALLREDUCE_IPC; /* peers map each other's device buffers */
        }
        return one ? OP_ALLREDUCE1 : OP_ALLREDUCE2;
    case WEFT_COLL_REDUCE:
        return use_ipc(shm, memtype) ? OP_IPC_REDUCE : one ? OP_REDUCE1 : OP_REDUCE2;
    case WEFT_COLL_BCAST:
        /* single copy (WEFT_SHM_CMA_COPY): measured at np 2 with fresh data in every call,
         * 8-16 KiB 0.72-0.86 of Open MPI's time staged, 0.94-1.06 so; 32-128 KiB even;
         * 512 KiB-2 MiB 1.10-1.19 -> 0.99-1.01; in osu-micro-benchmarks' loop (the same data
         * every call, which the readers still hold) 32 KiB-1 MiB 1.8-3.1 -> 0.9-1.3 */
        if (use_ipc(shm, memtype)) {
            return OP_IPC_BCAST;
        }
        return use_cma_copy(shm, memtype, bytes, cma_copy_from(shm, oversubscribed)) ? OP_CMA_BCAST
                                                                                     : OP_BCAST;
    default:
        return OP_BARRIER;
    }
}

static void vector_init(shm_op_t *o, int root, const void *src, void *dst, size_t count)
{
    o->root = root;
    o->src = src;
    o->dst = dst;
    o->count = count;
}

/* Whether the barrier of sequence number seq on comm waits for local rank 0's release
 * (round_barrier): where ranks outnumber cores, unless the operation before it was a barrier (its
 * sequence number the one before). Every rank sees the same sequence numbers, so they agree. */
static int barrier_release(struct weft_comm *comm, uint32_t seq)
{
    struct weft_coll_comm *cc = comm->coll;
    int run = cc->barrier_seen && seq == cc->barrier_seq + 1;

    cc->barrier_seen = 1;
    cc->barrier_seq = seq;
    return comm->oversubscribed && !run;
}

static int vector_add(weft_sched_t *s, weft_shm_t *shm, weft_coll_kind_t kind, int root,
                      const void *src, void *dst, size_t count, size_t esize)
{
    shm_op_t *o = op_new(s, shm,
                         vector_kind(shm, kind, count * esize, weft__sched_dev(s)->memtype,
                                     weft__sched_comm(s)->oversubscribed),
                         esize);

    if (o != NULL) {
        vector_init(o, root, src, dst, count);
        o->release =
            kind == WEFT_COLL_BARRIER && barrier_release(weft__sched_comm(s), weft__sched_seq(s));
    }
    return op_add(s, o, count);
}

int weft__shm_allreduce(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst, size_t count,
                        size_t esize)
{
    return vector_add(s, shm, WEFT_COLL_ALLREDUCE, 0, src, dst, count, esize);
}

int weft__shm_reduce(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                     size_t count, size_t esize)
{
    return vector_add(s, shm, WEFT_COLL_REDUCE, root, src, dst, count, esize);
}

static size_t max_block(const size_t *bcnt, int L)
{
    size_t m = 0;

    for (int q = 0; q < L; q++) {
        m = bcnt[q] > m ? bcnt[q] : m;
    }
    return m;
}

/* A slot's share per local rank, in elements: where a scatter's or alltoall's piece for a rank,
 * or a reduce_scatter's sub-block, lies in the writer's slot (0: not one element each). */
static size_t slot_share(const weft_shm_t *shm, size_t esize)
{
    return shm->slot_bytes / esize / (size_t)shm->L;
}

/* A block operation (reduce_scatter, allgather): its fields, and the
 * elements of every block its rounds carry (0 when a slot cannot hold one
 * element per rank). */
static size_t blocks_init(shm_op_t *o, const void *src, void *dst, const size_t *boff,
                          const size_t *bcnt)
{
    o->src = src;
    o->dst = dst;
    o->boff = boff;
    o->bcnt = bcnt;
    if (o->kind == OP_REDUCE_SCATTER) {
        o->chunk = slot_share(o->shm, o->esize); /* a sub-block per rank */
    }
    return o->chunk == 0 ? 0 : max_block(bcnt, o->shm->L);
}

/* pcount > 0: the blocks (bcnt[0] elements each) in pieces of pcount elements at poff (boff
 * unused) */
static int blocks_add(weft_sched_t *s, weft_shm_t *shm, op_kind_t kind, const void *src, void *dst,
                      const size_t *boff, const size_t *bcnt, size_t esize, size_t pcount,
                      const size_t *poff)
{
    shm_op_t *o = op_new(s, shm, kind, esize);
    size_t total;

    if (o == NULL) {
        return -1;
    }
    total = blocks_init(o, src, dst, boff, bcnt);
    o->pcount = pcount;
    o->pieces = pcount > 0 ? bcnt[0] / pcount : 0;
    o->poff = poff;
    if (o->chunk == 0) {
        weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "shared-memory slot too small"));
        return -1;
    }
    return op_add(s, o, total);
}

int weft__shm_reduce_scatter(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                             const size_t *boff, const size_t *bcnt, size_t esize)
{
    return blocks_add(s, shm, OP_REDUCE_SCATTER, src, dst, boff, bcnt, esize, 0, NULL);
}

int weft__shm_allgather(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                        const size_t *boff, const size_t *bcnt, size_t esize)
{
    const weft_memtype_t memtype = weft__sched_dev(s)->memtype;
    size_t bytes = 0;

    for (int q = 0; q < shm->L; q++) {
        bytes += bcnt[q] * esize;
    }
    return blocks_add(s, shm, allgather_kind(shm, memtype, bytes), src, dst, boff, bcnt, esize, 0,
                      NULL);
}

/* A block operation whose blocks (bcount elements each) are pieces of pcount elements at poff
 * (weft__shm_allgather_pieces, weft__shm_reduce_scatter_pieces). */
static int pieces_add(weft_sched_t *s, weft_shm_t *shm, weft_coll_kind_t kind, const void *src,
                      void *dst, size_t bcount, size_t pcount, const size_t *poff, size_t esize)
{
    const int L = shm->L;
    size_t *bcnt = weft__sched_scratch(s, sizeof(size_t) * (size_t)L);

    if (bcnt == NULL) {
        weft__sched_fail(s, weft__error(WEFT_ERR_NO_MEMORY, "shared-memory %s: no memory",
                                        weft__coll_kind_name(kind)));
        return -1;
    }
    if (pcount == 0 || bcount % pcount != 0 || weft__sched_dev(s)->memtype != WEFT_MEM_HOST) {
        weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL,
                                        "shared-memory %s in pieces: %zu-element pieces of "
                                        "%zu-element blocks in %s memory",
                                        weft__coll_kind_name(kind), pcount, bcount,
                                        weft__sched_dev(s)->name));
        return -1;
    }
    for (int q = 0; q < L; q++) {
        bcnt[q] = bcount;
    }
    return blocks_add(s, shm,
                      kind == WEFT_COLL_ALLGATHER
                          ? allgather_kind(shm, WEFT_MEM_HOST, bcount * esize * (size_t)L)
                          : OP_REDUCE_SCATTER,
                      src, dst, NULL, bcnt, esize, pcount, poff);
}

int weft__shm_allgather_pieces(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                               size_t bcount, size_t pcount, const size_t *poff, size_t esize)
{
    return pieces_add(s, shm, WEFT_COLL_ALLGATHER, src, dst, bcount, pcount, poff, esize);
}

int weft__shm_reduce_scatter_pieces(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst,
                                    size_t bcount, size_t pcount, const size_t *poff, size_t esize)
{
    return pieces_add(s, shm, WEFT_COLL_REDUCE_SCATTER, src, dst, bcount, pcount, poff, esize);
}

int weft__shm_bcast(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                    size_t count, size_t esize)
{
    return vector_add(s, shm, WEFT_COLL_BCAST, root, src, dst, count, esize);
}

int weft__shm_barrier(weft_sched_t *s, weft_shm_t *shm)
{
    return vector_add(s, shm, WEFT_COLL_BARRIER, 0, NULL, NULL, 0, 1);
}

/* A rooted or all-to-all block operation: count elements per block, and
 * pieces of slot/L per block and round where one slot carries a piece of
 * every block (scatter, alltoall); 0 when a slot cannot hold one element
 * per rank. */
static size_t rooted_init(shm_op_t *o, int root, const void *src, void *dst, size_t count)
{
    vector_init(o, root, src, dst, count);
    if (o->kind != OP_GATHER) {
        o->chunk = slot_share(o->shm, o->esize);
    }
    return count;
}

/* The operation that serves a gather or scatter (staged: OP_GATHER, OP_SCATTER) of blocks of
 * `bytes` on this node: from WEFT_SHM_CMA_COPY bytes a block, the blocks read where they are
 * (scatter: every rank its block of the root's buffer; gather: the root every rank's). */
static op_kind_t rooted_kind(const weft_shm_t *shm, op_kind_t staged, weft_memtype_t memtype,
                             size_t bytes, int oversubscribed)
{
    if (bytes == 0 || !use_cma_copy(shm, memtype, bytes, cma_copy_from(shm, oversubscribed))) {
        return staged;
    }
    return staged == OP_GATHER ? OP_CMA_GATHER : OP_CMA_SCATTER;
}

static int rooted_add(weft_sched_t *s, weft_shm_t *shm, op_kind_t kind, int root, const void *src,
                      void *dst, size_t count, size_t esize)
{
    shm_op_t *o = op_new(s, shm, kind, esize);

    if (o == NULL) {
        return -1;
    }
    rooted_init(o, root, src, dst, count);
    if (o->chunk == 0) {
        weft__sched_fail(s, weft__error(WEFT_ERR_INTERNAL, "shared-memory slot too small"));
        return -1;
    }
    return op_add(s, o, count);
}

int weft__shm_gather(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                     size_t count, size_t esize)
{
    return rooted_add(s, shm,
                      rooted_kind(shm, OP_GATHER, weft__sched_dev(s)->memtype, count * esize,
                                  weft__sched_comm(s)->oversubscribed),
                      root, src, dst, count, esize);
}

int weft__shm_scatter(weft_sched_t *s, weft_shm_t *shm, int root, const void *src, void *dst,
                      size_t count, size_t esize)
{
    return rooted_add(s, shm,
                      rooted_kind(shm, OP_SCATTER, weft__sched_dev(s)->memtype, count * esize,
                                  weft__sched_comm(s)->oversubscribed),
                      root, src, dst, count, esize);
}

int weft__shm_alltoall(weft_sched_t *s, weft_shm_t *shm, const void *src, void *dst, size_t count,
                       size_t esize)
{
    return rooted_add(s, shm,
                      alltoall_kind(shm, weft__sched_dev(s)->memtype, src, dst, count * esize), 0,
                      src, dst, count, esize);
}

/*
 * The blocking path when nothing else of the communicator is outstanding:
 * the same rounds, driven here instead of by a schedule (no task graph to
 * build for a call that is one task). Waits as the schedule engine does:
 * busy-poll WEFT_SPIN_US (not when ranks outnumber cores, nor in a device
 * task: then it yields from the first poll), then yield the core between
 * polls; the deadline and the peers' health every 64 polls once
 * busy-polling is over.
 */
static weft_status_t run_direct(struct weft_comm *comm, shm_op_t *o, uint32_t seq, int *waited_p)
{
    uint64_t spin_ns = weft__coll_spin_ns(comm);
    uint64_t start = 0, deadline = 0;
    weft_status_t status;
    int peer = -1;

    /* no busy-polling (ranks outnumber cores, or WEFT_SPIN_US=0): yield from the first poll,
     * the rank waited for may need this core (np 4 on 2 cores: barrier 8.2 -> 4.4-6.5 us) */
    int yielding = spin_ns == 0;

    for (unsigned idle = 0;; idle++) {
        uint64_t now;

        status = op_poll(o, &peer);
        if (status != WEFT_INPROGRESS) {
            break;
        }
        if (yielding) {
            sched_yield(); /* which may take another process's time slice */
            comm->coll->yield_polls++;
            *waited_p = 1;
        } else {
            weft__cpu_relax();
            comm->coll->busy_polls++;
        }
        if (idle < 64 || idle % 64 != 0) {
            continue;
        }
        now = weft__time_ns();
        if (start == 0) {
            start = now;
            deadline = weft__comm_deadline_ns(comm);
            *waited_p = 1;
        }
        comm->p2p->progress(comm->p2p_ep); /* a peer's failure notice (comm/comm.h) */
        status = now >= deadline ? WEFT_OK : weft__comm_health(comm);
        if (now >= deadline) { /* first: its own timeout, not a peer's notice of the same */
            weft__log_error("%s seq %u (shm, count %zu, %s %s) timed out after %.1f s in shared "
                            "memory step %d of round %llu; waiting for rank(s) %d",
                            o->desc->coll, seq, o->desc->count, weft_dtype_name(o->desc->dtype),
                            weft_op_name(o->desc->op), (double)(now - start) / 1e9, o->phase,
                            (unsigned long long)(o->round0 + o->r), peer);
            status = weft__error(WEFT_ERR_TIMEOUT,
                                 "%s seq %u (shm) timed out after %.1f s in shared memory step %d "
                                 "waiting for rank(s) %d",
                                 o->desc->coll, seq, (double)(now - start) / 1e9, o->phase, peer);
        }
        if (status != WEFT_OK) {
            break;
        }
        yielding = now - start >= spin_ns;
    }
    if (status != WEFT_OK) {
        if (status == WEFT_ERR_MISMATCH) {
            char detail[256];

            snprintf(detail, sizeof(detail), "%s", weft__error_detail());
            weft__error(status, "%s seq %u: %s", o->desc->coll, seq, detail);
        }
        op_cancel(o);
        return status;
    }
    if (o->desc->avg_buf != NULL) {
        return o->dev->avg_finalize(o->desc->avg_buf, o->desc->avg_count, o->desc->dtype,
                                    o->desc->avg_divisor);
    }
    return WEFT_OK;
}

weft_status_t weft__shm_run(struct weft_comm *comm, const weft_coll_args_t *a,
                            const weft_op_desc_t *desc, const weft_device_ops_t *dev,
                            int *handled_p, int *waited_p)
{
    weft_shm_t *shm = comm->coll->shm;
    size_t b[2 * 256], total = a->count;
    shm_op_t o;
    op_kind_t kind;

    *handled_p = 0;
    *waited_p = 0;
    switch (a->kind) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE:
    case WEFT_COLL_BCAST:
    case WEFT_COLL_BARRIER:
        op_init(&o, shm,
                vector_kind(shm, a->kind, a->count * a->esize, dev->memtype, comm->oversubscribed),
                a->esize, desc, dev);
        /* bcast: the root's data is its dst, like everyone's result */
        vector_init(&o, a->root, a->kind == WEFT_COLL_BCAST ? a->dst : a->src, a->dst, a->count);
        o.release =
            a->kind == WEFT_COLL_BARRIER && barrier_release(comm, weft__comm_peek_seq(comm));
        break;
    case WEFT_COLL_REDUCE_SCATTER:
    case WEFT_COLL_ALLGATHER:
        if (shm->L > (int)(sizeof(b) / sizeof(b[0]) / 2)) {
            return WEFT_OK; /* block tables of this many ranks: the schedule's scratch */
        }
        kind = a->kind == WEFT_COLL_REDUCE_SCATTER
                   ? OP_REDUCE_SCATTER
                   : allgather_kind(shm, dev->memtype, a->count * a->esize * (size_t)shm->L);
        op_init(&o, shm, kind, a->esize, desc, dev);
        for (int q = 0; q < shm->L; q++) {
            b[q] = (size_t)q * a->count;
            b[shm->L + q] = a->count;
        }
        total = blocks_init(&o, a->src, a->dst, b, b + shm->L);
        if (o.chunk == 0) {
            return WEFT_OK; /* the schedule reports it */
        }
        break;
    case WEFT_COLL_GATHER:
    case WEFT_COLL_SCATTER:
    case WEFT_COLL_ALLTOALL:
        kind = a->kind == WEFT_COLL_ALLTOALL
                   ? alltoall_kind(shm, dev->memtype, a->src, a->dst, a->count * a->esize)
                   : rooted_kind(shm, a->kind == WEFT_COLL_GATHER ? OP_GATHER : OP_SCATTER,
                                 dev->memtype, a->count * a->esize, comm->oversubscribed);
        op_init(&o, shm, kind, a->esize, desc, dev);
        total = rooted_init(&o, a->root, a->src, a->dst, a->count);
        if (o.chunk == 0) {
            return WEFT_OK; /* the schedule reports it */
        }
        break;
    default:
        return WEFT_OK; /* the v forms take the schedule */
    }
    *handled_p = 1;
    op_reserve(&o, total);
    return run_direct(comm, &o, weft__comm_take_seq(comm), waited_p);
}

/* The line allreduce's reduction of round R's L lines into dst: weft__shm_op_reduce_many's order
 * and bits, for a full-width type straight through the two loops it would reach
 * (device/host/host.h weft__host_reduce_loops), without the four calls and the checks before
 * them: 14 % of an 8-byte call at np 2 in perf, the loop itself 8 %; 0.79-0.83 of Open MPI's
 * time -> 0.79-0.80 (five alternating jobs). A reduce_scatter's inputs are this rank's block in
 * every local rank's slot (round_blocks' places). */
static weft_status_t line_reduce(shm_op_t *o, void *dst, uint64_t R, size_t count)
{
    weft_shm_t *shm = o->shm;
    weft_host_binary_fn binary;
    weft_host_accumulate_fn accumulate;

    for (int q = 0; q < shm->L; q++) { /* the tiny entries, or the wide lines above 8 bytes */
        shm->srcs[q] = o->kind == OP_REDUCE_SCATTER
                           ? SLOT(o, q, R) + (size_t)shm->me * o->chunk * o->esize
                           : DATA1(o, q, R, count);
    }
    if (shm->L >= 2 && weft__host_reduce_loops(o->desc->dtype, o->desc->op, &binary, &accumulate)) {
        binary(dst, shm->srcs[0], shm->srcs[1], count);
        for (int q = 2; q < shm->L; q++) {
            accumulate(dst, shm->srcs[q], count);
        }
        return WEFT_OK;
    }
    return weft__shm_op_reduce_many(o, dst, shm->srcs, shm->L, count);
}

/* The largest block of a line path whose data goes through the slots (where the operation's
 * set-up is still a large part of a call: 1 KiB until gather and allgather at 2 KiB, np 2,
 * measured 0.86-1.24 of Open MPI's time on the full path, 0.61-0.92 on this one). */
#define LINE_SLOT_BYTES 16384

/* Where round R's one-phase data of local rank q lies (DATA1's places, decided once a call):
 * its control line's entry, its wide line, or its slot. */
enum { LINE_TINY, LINE_WIDE, LINE_SLOT };

static inline char *line_data(const shm_op_t *o, int q, uint64_t R, int place)
{
    return place == LINE_WIDE   ? (char *)o->shm->ctrl[q].wide[R % WEFT_SHM_LINE_DEPTH].data
           : place == LINE_TINY ? (char *)&o->shm->ctrl[q].tiny[R % WEFT_SHM_LINE_DEPTH]
                                : SLOT(o, q, R);
}

/* A line path's wait that outlasted its polls, or met another signature: the full operation
 * from its phase 1 (the line path did its phase 0), as weft__shm_run would have built it. */
static weft_status_t line_full(struct weft_comm *comm, weft_coll_kind_t kind, shm_op_t *o,
                               const void *src, void *dst, size_t *b, uint64_t R, uint32_t seq,
                               int *waited_p)
{
    const weft_op_desc_t *desc = o->desc;
    const int root = o->root, release = o->release;
    const size_t count = o->count, esize = o->esize;

    op_init(o, o->shm, o->kind, esize, desc, &weft__device_host_ops);
    o->release = release;
    switch (kind) {
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_REDUCE_SCATTER:
        blocks_init(o, src, dst, b, b + o->shm->L);
        break;
    case WEFT_COLL_BCAST: /* the root's data is its dst, like everyone's result */
        vector_init(o, root, dst, dst, count);
        break;
    case WEFT_COLL_GATHER:
    case WEFT_COLL_SCATTER:
        rooted_init(o, root, src, dst, count);
        break;
    case WEFT_COLL_ALLTOALL:
        rooted_init(o, 0, src, dst, count);
        break;
    case WEFT_COLL_BARRIER:
        vector_init(o, 0, NULL, NULL, 0);
        break;
    default: /* allreduce, reduce */
        vector_init(o, root, src, dst, count);
        break;
    }
    o->nrounds = 1;
    o->round0 = R;
    o->phase = 1;
    return run_direct(comm, o, seq, waited_p);
}

/* Who a line path waits for after it published: nobody, the root, every local rank, or local
 * rank 0's release of a barrier (round_barrier). */
typedef enum { LINE_WAIT_NONE, LINE_WAIT_ROOT, LINE_WAIT_ALL, LINE_WAIT_RELEASE } line_wait_t;

static int line_ready(shm_op_t *o, line_wait_t wait, uint64_t R, int *peer_p)
{
    switch (wait) {
    case LINE_WAIT_NONE:
        return 1;
    case LINE_WAIT_ROOT:
        return ready_one(o, o->root, 4 * R + 1, peer_p);
    case LINE_WAIT_ALL:
        return weft__shm_op_ready_all(o, 0, 4 * R + 1, peer_p);
    default:
        if (!ready_one(o, 0, 4 * R + 1, peer_p)) {
            return 0;
        }
        *peer_p = o->shm->local_ranks[0];
        return arrived(o->shm, 0, 4 * R + 2);
    }
}

/*
 * The line paths: an allreduce, reduce, bcast, gather or allgather whose data (a rank's block) is
 * up to 48 bytes of host memory (one round whose data travels in the control lines, or above 8
 * bytes the wide lines) or up to LINE_SLOT_BYTES in one round of the slots, a scatter or alltoall
 * whose pieces for the others fit a writer's control line or, blocks up to LINE_SLOT_BYTES, one
 * round of its slot (np 2, 16-256 B: alltoall 1.16-1.26 of Open MPI's time -> 0.97-1.08, scatter
 * 1.15-1.38 -> 1.04-1.39), a reduce_scatter of blocks up to
 * LINE_SLOT_BYTES (one round in the slots), and a barrier, run without building the operation, for
 * a call that repeats the last one of its kind (coll/select.c weft__coll_line). Each is its kind's
 * round (round_allreduce's OP_ALLREDUCE1 and OP_REDUCE1, round_bcast, round_gather, round_blocks,
 * round_scatter, round_alltoall, round_barrier) on the same lines, slots and flags, so a rank that
 * takes the full path for the same call meets it: copy into the line (not a bcast's readers, nor a
 * gather's root) | publish | wait (busy, at most 64 polls: for all, or a bcast's reader for its
 * root; a reduce's or gather's senders and a bcast's root read nobody) | reduce the L lines into
 * dst, or copy them out. A longer wait, or a peer whose signature differs, goes on as the full
 * operation from its phase 1 (line_full, run_direct: the yields, the deadline, the peers' health,
 * the mismatch's message). np 2, 8 bytes: allreduce 1.05-1.11 of Open MPI's time -> 0.81-0.86 (the
 * operation's set-up, dispatch and description were 30 % of a call); 8-32 bytes: bcast 1.07-1.53 ->
 * 0.97-1.06 and allgather 1.10-1.56 -> 0.95-1.04 each call from a barrier, 1.77-2.19 -> 1.06-1.43
 * and 1.12-1.34 -> 0.85-0.96 back to back; 4-8 bytes: scatter 1.27-1.35 -> 0.95-1.03 (2.07-2.41 ->
 * 1.50-1.85), alltoall 1.21-1.28 -> 0.93-1.01 (1.01-1.23 -> 0.71-0.86); barrier 1.22-1.28 ->
 * 0.94-0.98 (0.98-1.10 -> 0.74-0.82); reduce_scatter 8-128 B 1.05-1.44 -> 0.90-1.30 (1.02-1.20 ->
 * 0.75-0.84), 512 B 0.75-0.77 -> 0.60-0.62; in the slots, allreduce 1 KiB 0.76-0.82 -> 0.66-0.68,
 * bcast 64-256 B 1.18-1.26 -> 1.07-1.19, allgather 64-256 B 0.96-1.04 -> 0.86-0.94.
 */
weft_status_t weft__shm_line_run(struct weft_comm *comm, weft_coll_kind_t kind,
                                 const weft_op_desc_t *desc, const void *src, void *dst,
                                 size_t count, size_t esize, int root, int *handled_p,
                                 int *waited_p)
{
    weft_shm_t *shm = comm->coll->shm;
    const int L = shm->L, me = shm->me, is_root = me == root;
    const size_t bytes = count * esize;
    uint64_t R = shm->next_round;
    int polls = weft__coll_spin_ns(comm) == 0 ? 1 : 64, peer, place, writes = 1;
    line_wait_t wait = LINE_WAIT_ALL;
    size_t b[2 * 256];
    shm_op_t o;
    uint32_t seq;
    weft_status_t status = WEFT_OK;

    *handled_p = 0;
    *waited_p = 0;
    o.shm = shm;
    o.desc = desc;
    o.dev = &weft__device_host_ops;
    o.waiting = 0;
    o.differs = -1;
    o.count = o.chunk = count;
    o.esize = esize;
    o.r = 0;
    o.root = root;
    o.release = 0;
    o.src = src;
    switch (kind) { /* the kind of its one round, as wide_round and DATA1 read it */
    case WEFT_COLL_ALLREDUCE:
        o.kind = OP_ALLREDUCE1;
        break;
    case WEFT_COLL_REDUCE:
        o.kind = OP_REDUCE1;
        wait = is_root ? LINE_WAIT_ALL : LINE_WAIT_NONE;
        break;
    case WEFT_COLL_BCAST:
        o.kind = OP_BCAST;
        writes = is_root;
        wait = is_root ? LINE_WAIT_NONE : LINE_WAIT_ROOT;
        break;
    case WEFT_COLL_GATHER:
        o.kind = OP_GATHER;
        writes = !is_root;
        wait = is_root ? LINE_WAIT_ALL : LINE_WAIT_NONE;
        break;
    case WEFT_COLL_SCATTER: /* the root's pieces for the others: its control line or slot */
        o.kind = OP_SCATTER;
        o.chunk = slot_share(shm, esize); /* piece_at's place, as rooted_init's */
        writes = is_root;
        wait = is_root ? LINE_WAIT_NONE : LINE_WAIT_ROOT;
        break;
    case WEFT_COLL_ALLTOALL: /* every rank's pieces for the others: its control line or slot */
        o.kind = OP_ALLTOALL;
        o.chunk = slot_share(shm, esize);
        break;
    case WEFT_COLL_BARRIER:
        o.kind = OP_BARRIER;
        writes = 0;
        break;
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_REDUCE_SCATTER:
        if (L > (int)(sizeof(b) / sizeof(b[0]) / 2)) {
            return WEFT_OK;
        }
        o.kind = kind == WEFT_COLL_ALLGATHER ? OP_ALLGATHER : OP_REDUCE_SCATTER;
        for (int q = 0; q < L; q++) {
            b[q] = (size_t)q * count;
            b[L + q] = count;
        }
        o.boff = b;
        o.bcnt = b + L;
        o.pcount = 0;
        if (kind == WEFT_COLL_REDUCE_SCATTER) { /* a sub-block of its slot per rank */
            o.chunk = slot_share(shm, esize);
        }
        break;
    default:
        return WEFT_OK;
    }
    if (shm->exec_round != R || shm->dead_rank >= 0 || shm->broken != NULL ||
        !weft__shm_op_reusable(&o, R, &peer)) {
        return WEFT_OK; /* the full path waits */
    }
    *handled_p = 1;
    shm->next_round = R + 1;
    if (kind == WEFT_COLL_BARRIER) { /* decided as weft__shm_run decides, once a barrier */
        o.release = barrier_release(comm, weft__comm_peek_seq(comm));
        wait = o.release && me != 0 ? LINE_WAIT_RELEASE : LINE_WAIT_ALL;
    }
    seq = weft__comm_take_seq(comm);
    place = fits_wide(&o, count) ? LINE_WIDE : fits_line(&o, count) ? LINE_TINY : LINE_SLOT;
    if (kind == WEFT_COLL_REDUCE_SCATTER) { /* every block to its sub-block of my slot */
        for (int q = 0; q < L; q++) {
            weft__host_copy(SLOT(&o, me, R) + (size_t)q * o.chunk * esize,
                            (const char *)src + (size_t)q * bytes, bytes);
        }
    } else if (writes && (kind == WEFT_COLL_SCATTER || kind == WEFT_COLL_ALLTOALL)) {
        /* its own block straight to dst (an alltoall's is block me of it) */
        status = pieces_in(&o, R, 0, count,
                           (char *)dst + (kind == WEFT_COLL_ALLTOALL ? (size_t)me * bytes : 0));
    } else if (writes) {
        weft__host_copy(line_data(&o, me, R, place), kind == WEFT_COLL_BCAST ? dst : src, bytes);
    }
    weft__shm_op_publish(&o, R, 1);
    for (int i = 0; !line_ready(&o, wait, R, &peer); i++) {
        if (i + 1 >= polls || o.differs >= 0) {
            return line_full(comm, kind, &o, src, dst, b, R, seq, waited_p);
        }
        weft__cpu_relax();
        comm->coll->busy_polls++;
    }
    switch (kind) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE:
    case WEFT_COLL_REDUCE_SCATTER:
        if (wait == LINE_WAIT_ALL) {
            status = line_reduce(&o, dst, R, count);
        }
        break;
    case WEFT_COLL_BCAST:
        if (!is_root) {
            weft__host_copy(dst, line_data(&o, root, R, place), bytes);
        }
        break;
    case WEFT_COLL_SCATTER:
        if (!is_root) {
            weft__host_copy(dst, piece_at(&o, root, me, R, count), bytes);
        }
        break;
    case WEFT_COLL_ALLTOALL:
        for (int q = 0; q < L; q++) {
            if (q != me) {
                weft__host_copy((char *)dst + (size_t)q * bytes, piece_at(&o, q, me, R, count),
                                bytes);
            }
        }
        break;
    case WEFT_COLL_BARRIER: /* local rank 0 releases, whichever form (round_barrier) */
        if (me == 0) {
            weft__shm_op_publish(&o, R, 2);
        }
        break;
    default: /* gather's root, allgather: in place, this rank's block is in dst already */
        for (int q = 0; q < L && wait == LINE_WAIT_ALL; q++) {
            char *to = (char *)dst + (size_t)q * bytes;
            const char *from = q == me ? (const char *)src : line_data(&o, q, R, place);

            if (to != from) {
                weft__host_copy(to, from, bytes);
            }
        }
        break;
    }
    store(&shm->ctrl[me].done, R + 1);
    shm->exec_round++;
    return status;
}

/* A scatter's or alltoall's pieces of count elements take one round: packed in the writer's
 * control line (piece_at), or at most a slot's share per rank (slot_share). */
static int pieces_one_round(const weft_shm_t *shm, size_t count, size_t esize)
{
    return count * esize * (size_t)(shm->L - 1) <= sizeof(uint64_t) ||
           count <= slot_share(shm, esize);
}

int weft__shm_line_fits(struct weft_comm *comm, const weft_coll_args_t *a, weft_memtype_t memtype)
{
    const weft_shm_t *shm = comm->coll->shm;
    const size_t bytes = a->count * a->esize;
    const int ovs = comm->oversubscribed;

    if (a->kind == WEFT_COLL_BARRIER) {
        return 1;
    }
    if (a->kind == WEFT_COLL_REDUCE_SCATTER) { /* in the slots: one round, a sub-block a rank */
        return memtype == WEFT_MEM_HOST && a->op != WEFT_AVG && bytes > 0 &&
               bytes <= LINE_SLOT_BYTES && bytes * (size_t)shm->L <= shm->slot_bytes;
    }
    /* one round of data in the lines, or up to LINE_SLOT_BYTES in the slots */
    if (memtype != WEFT_MEM_HOST || bytes == 0 || bytes > LINE_SLOT_BYTES ||
        bytes > shm->slot_bytes) {
        return 0;
    }
    switch (a->kind) {
    case WEFT_COLL_ALLREDUCE:
    case WEFT_COLL_REDUCE: /* an average divides at the end: the full path's */
        return a->op != WEFT_AVG && vector_kind(shm, a->kind, bytes, memtype, ovs) ==
                                        (a->kind == WEFT_COLL_REDUCE ? OP_REDUCE1 : OP_ALLREDUCE1);
    case WEFT_COLL_BCAST:
        return vector_kind(shm, a->kind, bytes, memtype, ovs) == OP_BCAST;
    case WEFT_COLL_GATHER:
        return rooted_kind(shm, OP_GATHER, memtype, bytes, ovs) == OP_GATHER;
    case WEFT_COLL_SCATTER: /* a writer's pieces for the others: one round (pieces_one_round) */
        return pieces_one_round(shm, a->count, a->esize) &&
               rooted_kind(shm, OP_SCATTER, memtype, bytes, ovs) == OP_SCATTER;
    case WEFT_COLL_ALLTOALL: /* (from 16 KiB blocks apart it reads the peers' buffers) */
        return pieces_one_round(shm, a->count, a->esize) &&
               bytes < weft__shm_cma_alltoall_from(shm);
    case WEFT_COLL_ALLGATHER:
        return allgather_kind(shm, memtype, bytes * (size_t)shm->L) == OP_ALLGATHER;
    default:
        return 0;
    }
}
