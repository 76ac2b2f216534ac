/* The collective tests' table-driven checker (contract in check.h). */
#include "tests/coll/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 256 /* elements check_diff compares at once */

typedef int (*blocks_fn)(const check_shape_t *s, check_block_t *b, size_t *ext_p);

static int one(check_block_t *b, size_t len, int rank, size_t first, size_t *ext_p)
{
    b[0] = (check_block_t){0, len, rank, first};
    *ext_p = len;
    return 1;
}

static int none(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    (void)s;
    (void)b;
    *ext_p = 0;
    return -1;
}

static int own(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return one(b, s->n, s->rank, 0, ext_p);
}

static int own_blocks(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return one(b, (size_t)s->p * s->n, s->rank, 0, ext_p);
}

static int reduced(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return one(b, s->n, CHECK_REDUCED, 0, ext_p);
}

static int reduced_at_root(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return s->rank == s->root ? reduced(s, b, ext_p) : none(s, b, ext_p);
}

static int roots(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return one(b, s->n, s->root, 0, ext_p);
}

static int roots_at_root(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return s->rank == s->root ? roots(s, b, ext_p) : none(s, b, ext_p);
}

/* block q: rank q's first n elements */
static int gathered(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    for (int q = 0; q < s->p; q++) {
        b[q] = (check_block_t){(size_t)q * s->n, s->n, q, 0};
    }
    *ext_p = (size_t)s->p * s->n;
    return s->p;
}

static int gathered_at_root(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return s->rank == s->root ? gathered(s, b, ext_p) : none(s, b, ext_p);
}

static int scatter_send(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return s->rank == s->root ? one(b, (size_t)s->p * s->n, s->root, 0, ext_p) : none(s, b, ext_p);
}

static int scatter_recv(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return one(b, s->n, s->root, (size_t)s->rank * s->n, ext_p);
}

static int rs_recv(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return one(b, s->n, CHECK_REDUCED, (size_t)s->rank * s->n, ext_p);
}

static int alltoall_recv(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    for (int q = 0; q < s->p; q++) {
        b[q] = (check_block_t){(size_t)q * s->n, s->n, q, (size_t)s->rank * s->n};
    }
    *ext_p = (size_t)s->p * s->n;
    return s->p;
}

static int agv_send(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    return one(b, s->counts[s->rank], s->rank, 0, ext_p);
}

static int agv_recv(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    for (int q = 0; q < s->p; q++) {
        b[q] = (check_block_t){s->displs[q], s->counts[q], q, 0};
    }
    *ext_p = s->rext;
    return s->p;
}

static int rsv_send(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    size_t total = 0;

    for (int q = 0; q < s->p; q++) {
        total += s->counts[q];
    }
    return one(b, total, s->rank, 0, ext_p);
}

static int rsv_recv(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    size_t first = 0;

    for (int q = 0; q < s->rank; q++) {
        first += s->counts[q];
    }
    return one(b, s->counts[s->rank], CHECK_REDUCED, first, ext_p);
}

static int a2av_send(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    for (int q = 0; q < s->p; q++) {
        b[q] = (check_block_t){s->sdispls[q], s->scounts[q], s->rank, (size_t)q * s->stride};
    }
    *ext_p = s->sext;
    return s->p;
}

static int a2av_recv(const check_shape_t *s, check_block_t *b, size_t *ext_p)
{
    for (int q = 0; q < s->p; q++) {
        b[q] = (check_block_t){s->displs[q], s->counts[q], q, (size_t)s->rank * s->stride};
    }
    *ext_p = s->rext;
    return s->p;
}

/* The table: one row per collective kind. */
static const struct {
    blocks_fn send, recv;
} rows[WEFT_COLL_KIND_COUNT] = {
    [WEFT_COLL_ALLREDUCE] = {own, reduced},
    [WEFT_COLL_REDUCE] = {own, reduced_at_root},
    [WEFT_COLL_BCAST] = {roots_at_root, roots},
    [WEFT_COLL_ALLGATHER] = {own, gathered},
    [WEFT_COLL_GATHER] = {own, gathered_at_root},
    [WEFT_COLL_SCATTER] = {scatter_send, scatter_recv},
    [WEFT_COLL_REDUCE_SCATTER] = {own_blocks, rs_recv},
    [WEFT_COLL_ALLTOALL] = {own_blocks, alltoall_recv},
    [WEFT_COLL_BARRIER] = {none, none},
    [WEFT_COLL_ALLGATHERV] = {agv_send, agv_recv},
    [WEFT_COLL_ALLTOALLV] = {a2av_send, a2av_recv},
    [WEFT_COLL_REDUCE_SCATTER_V] = {rsv_send, rsv_recv},
};

int check_blocks(const check_shape_t *s, int side, check_block_t *b, size_t *ext_p)
{
    return (side == CHECK_SEND ? rows[s->kind].send : rows[s->kind].recv)(s, b, ext_p);
}

static check_block_t *blocks_alloc(const check_shape_t *s)
{
    check_block_t *b = malloc(sizeof(*b) * ((size_t)s->p + 1));

    if (b == NULL) {
        fprintf(stderr, "test out of memory\n");
        abort();
    }
    return b;
}

int check_has(const check_shape_t *s, int side)
{
    check_block_t *b = blocks_alloc(s);
    size_t ext;
    int nb = check_blocks(s, side, b, &ext);

    free(b);
    return nb >= 0;
}

size_t check_extent(const check_shape_t *s, int side)
{
    check_block_t *b = blocks_alloc(s);
    size_t ext;

    check_blocks(s, side, b, &ext);
    free(b);
    return ext;
}

static void element(const check_data_t *d, const check_block_t *b, size_t j, void *dst)
{
    if (b->rank == CHECK_REDUCED) {
        d->reduced(d->ctx, b->first + j, dst);
    } else {
        d->value(d->ctx, b->rank, b->first + j, dst);
    }
}

/* dst = elems copies of the fill, doubling what is written */
static void fill(const check_data_t *d, unsigned char *dst, size_t elems)
{
    const size_t bytes = elems * d->es;
    size_t done = d->es;

    if (elems == 0) {
        return;
    }
    memcpy(dst, d->fill, d->es);
    while (done < bytes) {
        size_t more = done < bytes - done ? done : bytes - done;

        memcpy(dst + done, dst, more);
        done += more;
    }
}

static void draw(const check_data_t *d, const check_block_t *b, int nb, size_t ext,
                 unsigned char *dst)
{
    fill(d, dst, ext);
    for (int k = 0; k < nb; k++) { /* nb < 0: no buffer */
        for (size_t j = 0; j < b[k].len; j++) {
            element(d, &b[k], j, dst + (b[k].at + j) * d->es);
        }
    }
}

void check_image(const check_shape_t *s, int side, const check_data_t *d, void *dst)
{
    check_block_t *b = blocks_alloc(s);
    size_t ext;
    int nb = check_blocks(s, side, b, &ext);

    draw(d, b, nb, ext, dst);
    free(b);
}

void check_image_in_place(const check_shape_t *s, const check_data_t *d, void *dst)
{
    check_block_t *b = blocks_alloc(s);
    size_t rext, sext;
    int nb;

    check_blocks(s, CHECK_RECV, b, &rext);
    switch (s->kind) {
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_GATHER:
    case WEFT_COLL_ALLGATHERV:
        /* this rank's own block of the result */
        fill(d, dst, rext);
        for (size_t j = 0; j < b[s->rank].len; j++) {
            element(d, &b[s->rank], j, (unsigned char *)dst + (b[s->rank].at + j) * d->es);
        }
        break;
    case WEFT_COLL_ALLTOALLV:
        /* the send data in the receive layout */
        for (int q = 0; q < s->p; q++) {
            b[q] = (check_block_t){s->displs[q], s->counts[q], s->rank, (size_t)q * s->stride};
        }
        draw(d, b, s->p, rext, dst);
        break;
    default:
        /* the send image at the front */
        nb = check_blocks(s, CHECK_SEND, b, &sext);
        draw(d, b, nb, sext, dst);
        break;
    }
    free(b);
}

static void hex(char *buf, size_t cap, const unsigned char *e, size_t es)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t k = es; k-- > 0 && len + 3 < cap;) {
        len += (size_t)snprintf(buf + len, cap - len, "%02x", e[k]);
    }
}

long check_diff(const check_shape_t *s, int side, const check_data_t *d, const void *got, char *msg,
                size_t cap)
{
    check_block_t *b = blocks_alloc(s);
    const unsigned char *g = got;
    unsigned char want[CHUNK * 16];
    char gh[40], wh[40];
    size_t ext;
    int nb = check_blocks(s, side, b, &ext);
    long at = -1;

    /* the blocks, a chunk of elements at a time (one comparison each unless
     * it differs), then everything else against the fill */
    for (int k = 0; k < nb && at < 0; k++) {
        for (size_t j0 = 0; j0 < b[k].len && at < 0; j0 += CHUNK) {
            size_t m = b[k].len - j0 < CHUNK ? b[k].len - j0 : CHUNK;
            const unsigned char *gj = g + (b[k].at + j0) * d->es;

            for (size_t j = 0; j < m; j++) {
                element(d, &b[k], j0 + j, want + j * d->es);
            }
            if (memcmp(gj, want, m * d->es) == 0) {
                continue;
            }
            for (size_t j = j0; j < j0 + m; j++) {
                const unsigned char *w = want + (j - j0) * d->es;

                if (memcmp(g + (b[k].at + j) * d->es, w, d->es) == 0) {
                    continue;
                }
                at = (long)(b[k].at + j);
                hex(gh, sizeof(gh), g + (size_t)at * d->es, d->es);
                hex(wh, sizeof(wh), w, d->es);
                if (b[k].rank == CHECK_REDUCED) {
                    snprintf(msg, cap,
                             "element %ld (the reduction's element %zu) is 0x%s, want 0x%s", at,
                             b[k].first + j, gh, wh);
                } else {
                    snprintf(msg, cap, "element %ld (rank %d's element %zu) is 0x%s, want 0x%s", at,
                             b[k].rank, b[k].first + j, gh, wh);
                }
                break;
            }
        }
    }
    if (at < 0 && ext > 0) {
        unsigned char *inside = calloc(ext, 1);

        if (inside == NULL) {
            fprintf(stderr, "test out of memory\n");
            abort();
        }
        for (int k = 0; k < nb; k++) {
            memset(inside + b[k].at, 1, b[k].len);
        }
        for (size_t e = 0; e < ext && at < 0; e++) {
            if (!inside[e] && memcmp(g + e * d->es, d->fill, d->es) != 0) {
                at = (long)e;
                hex(gh, sizeof(gh), g + e * d->es, d->es);
                snprintf(msg, cap, "element %ld, in a gap between blocks, was written (0x%s)", at,
                         gh);
            }
        }
        free(inside);
    }
    free(b);
    return at;
}

/* Finish what the form started: wait for the request or the stream. */
static weft_status_t finish(weft_status_t st, int mode, weft_request_t *req, weft_stream_t stream)
{
    if (st != WEFT_OK) {
        return st;
    }
    if (mode == CHECK_NONBLOCKING) {
        st = weft_wait(*req);
        if (weft_request_free(*req) != WEFT_OK && st == WEFT_OK) {
            st = WEFT_ERR_INTERNAL;
        }
    } else if (mode == CHECK_ENQUEUE) {
        st = weft_stream_synchronize(stream);
    }
    return st;
}

/* weft_<fn>, weft_i<fn> or weft_<fn>_enqueue (the request is read through a
 * pointer: it is written by the call) */
#define CALL3(fn, ...)                                                                             \
    finish(mode == CHECK_BLOCKING      ? weft_##fn(__VA_ARGS__)                                    \
           : mode == CHECK_NONBLOCKING ? weft_i##fn(__VA_ARGS__, &req)                             \
                                       : weft_##fn##_enqueue(__VA_ARGS__, stream),                 \
           mode, &req, stream)

weft_status_t check_call(const check_shape_t *s, int mode, const void *sb, void *rb,
                         weft_dtype_t dt, weft_op_t op, weft_comm_t comm, weft_stream_t stream)
{
    weft_request_t req = NULL;
    const size_t n = s->n;
    const int root = s->root;

    switch (s->kind) {
    case WEFT_COLL_ALLREDUCE:
        return CALL3(allreduce, sb, rb, n, dt, op, comm);
    case WEFT_COLL_REDUCE:
        return CALL3(reduce, sb, rb, n, dt, op, root, comm);
    case WEFT_COLL_BCAST:
        return CALL3(bcast, rb, n, dt, root, comm);
    case WEFT_COLL_ALLGATHER:
        return CALL3(allgather, sb, rb, n, dt, comm);
    case WEFT_COLL_GATHER:
        return CALL3(gather, sb, rb, n, dt, root, comm);
    case WEFT_COLL_SCATTER:
        return CALL3(scatter, sb, rb, n, dt, root, comm);
    case WEFT_COLL_REDUCE_SCATTER:
        return CALL3(reduce_scatter, sb, rb, n, dt, op, comm);
    case WEFT_COLL_ALLTOALL:
        return CALL3(alltoall, sb, rb, n, dt, comm);
    case WEFT_COLL_ALLGATHERV:
        return CALL3(allgatherv, sb, rb, s->counts[s->rank], s->counts, s->displs, dt, comm);
    case WEFT_COLL_ALLTOALLV:
        return CALL3(alltoallv, sb, rb, s->scounts, s->sdispls, s->counts, s->displs, dt, comm);
    case WEFT_COLL_REDUCE_SCATTER_V:
        return CALL3(reduce_scatter_v, sb, rb, s->counts, dt, op, comm);
    default:
        return CALL3(barrier, comm);
    }
}

const char *check_force(weft_coll_kind_t kind, const char *algo)
{
    static char why[256];
    const weft_coll_algo_t *row = weft__coll_find(kind, algo);
    char rule[128];

    if (row == NULL) {
        snprintf(why, sizeof(why), "%s/%s is not registered", weft__coll_kind_name(kind), algo);
        return why;
    }
    snprintf(rule, sizeof(rule), "%s:0-inf:%s", weft__coll_kind_name(kind), algo);
    if (weft__coll_tune_load(rule) != WEFT_OK) {
        snprintf(why, sizeof(why), "%s: %s", rule, weft_last_error());
        return why;
    }
    weft__coll_config.reproducible = (row->flags & WEFT_COLL_ORDERED) != 0;
    if (row->layout == WEFT_COLL_LAYOUT_ANY && weft__coll_select(kind, 4096, 4) != row) {
        snprintf(why, sizeof(why), "WEFT_TUNE's %s is not what selection returns", rule);
        return why;
    }
    return NULL;
}

const char *check_hier_leader_builds(unsigned long before, int leader)
{
    static char why[128];
    unsigned long built = weft__hier_leader_builds() - before;

    if (leader && built == 0) {
        return "the leader form never ran";
    }
    if (!leader && built != 0) {
        snprintf(why, sizeof(why), "the leader form ran %lu times with WEFT_HIER_LEADER 0", built);
        return why;
    }
    return NULL;
}

weft_status_t check_split_interleaved(weft_comm_t comm, int rank, int nranks, int rpn,
                                      weft_comm_t *out_p, int *rank_p)
{
    int nodes = (nranks + rpn - 1) / rpn;
    weft_status_t status = weft_comm_split(comm, 0, rank % rpn * nodes + rank / rpn, out_p);

    return status == WEFT_OK ? weft_comm_rank(*out_p, rank_p) : status;
}
