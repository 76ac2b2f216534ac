/*
 * Public collective entry points: every argument is checked before anything
 * is sent or written, then the collective layer selects, builds and runs a
 * schedule.
 */
#include "coll/coll.h"
#include "runtime/init.h"


#include <stdint.h>
#include <stdio.h>

typedef struct buf_check {
    const char *call;
    const void *sendbuf;
    void *recvbuf;
    size_t count; /* elements, as passed */
    weft_dtype_t dtype;
    weft_op_t op;
    int has_op;
    int per_rank; /* buffers hold size * count elements (not allreduce) */
    weft_comm_t comm;
} buf_check_t;

static int overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

/* Checks shared by every collective; fills esize and size on success. */
static weft_status_t check_common(const buf_check_t *c, size_t *esize_p, int *size_p)
{
    weft_status_t status = weft__check_initialized(c->call);
    char what[64];
    size_t esize;

    if (status != WEFT_OK) {
        return status;
    }
    if (c->comm == NULL || c->comm->magic != WEFT_COMM_MAGIC) {
        snprintf(what, sizeof(what), "%s: comm", c->call);
        return weft__comm_check(c->comm, what);
    }
    esize = weft_dtype_size(c->dtype);
    if (esize == 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: dtype %d is not a weft_dtype_t", c->call,
                           (int)c->dtype);
    }
    if (c->has_op) {
        if ((unsigned)c->op >= WEFT_OP_COUNT) {
            return weft__error(WEFT_ERR_INVALID_ARG, "%s: op %d is not a weft_op_t", c->call,
                               (int)c->op);
        }
        if (!weft__op_valid_for_dtype(c->op, c->dtype)) {
            return weft__error(WEFT_ERR_INVALID_ARG,
                               "%s: op %s is not defined for dtype %s (bitwise and logical ops "
                               "take integer types)",
                               c->call, weft_op_name(c->op), weft_dtype_name(c->dtype));
        }
    }
    if (c->count > SIZE_MAX / esize / (c->per_rank ? (size_t)c->comm->size : 1)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: count %zu of %s overflows the buffer size%s",
                           c->call, c->count, weft_dtype_name(c->dtype),
                           c->per_rank ? " for this many ranks" : "");
    }
    if (c->count > 0 && c->recvbuf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: recvbuf is NULL with count %zu", c->call,
                           c->count);
    }
    if (c->count > 0 && c->sendbuf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s: sendbuf is NULL with count %zu (use WEFT_IN_PLACE for in place)",
                           c->call, c->count);
    }
    *esize_p = esize;
    *size_p = c->comm->size;
    return WEFT_OK;
}

static weft_status_t overlap_error(const buf_check_t *c)
{
    return weft__error(WEFT_ERR_INVALID_ARG,
                       "%s: sendbuf and recvbuf overlap without being in place (pass "
                       "WEFT_IN_PLACE as sendbuf for an in-place operation)",
                       c->call);
}

static weft_status_t run(weft_coll_kind_t kind, const buf_check_t *c, const void *src, void *dst,
                         size_t esize)
{
    weft_coll_args_t args = {
        .kind = kind,
        .src = src,
        .dst = dst,
        .count = c->count,
        .dtype = c->dtype,
        .op = c->op,
        .esize = esize,
        .rank = c->comm->rank,
        .size = c->comm->size,
    };

    if (c->count == 0) {
        return WEFT_OK;
    }
    return weft__coll_run(c->comm, &args);
}

WEFT_EXPORT weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                         weft_dtype_t dtype, weft_op_t op, weft_comm_t comm)
{
    buf_check_t c = {"weft_allreduce", sendbuf, recvbuf, count, dtype, op, 1, 0, comm};
    size_t esize;
    int size;
    weft_status_t status;

    weft__error_clear();
    status = check_common(&c, &esize, &size);
    if (status != WEFT_OK) {
        return status;
    }
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf) {
        return run(WEFT_COLL_ALLREDUCE, &c, recvbuf, recvbuf, esize);
    }
    if (overlaps(sendbuf, count * esize, recvbuf, count * esize)) {
        return overlap_error(&c);
    }
    return run(WEFT_COLL_ALLREDUCE, &c, sendbuf, recvbuf, esize);
}

WEFT_EXPORT weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf,
                                              size_t recvcount, weft_dtype_t dtype, weft_op_t op,
                                              weft_comm_t comm)
{
    buf_check_t c = {"weft_reduce_scatter", sendbuf, recvbuf, recvcount, dtype, op, 1, 1, comm};
    size_t esize, bytes;
    int size;
    weft_status_t status;

    weft__error_clear();
    status = check_common(&c, &esize, &size);
    if (status != WEFT_OK) {
        return status;
    }
    bytes = recvcount * esize;
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf) {
        return run(WEFT_COLL_REDUCE_SCATTER, &c, recvbuf, recvbuf, esize);
    }
    if ((const char *)recvbuf == (const char *)sendbuf + (size_t)comm->rank * bytes) {
        return run(WEFT_COLL_REDUCE_SCATTER, &c, sendbuf, recvbuf, esize);
    }
    if (overlaps(sendbuf, bytes * (size_t)size, recvbuf, bytes)) {
        return overlap_error(&c);
    }
    return run(WEFT_COLL_REDUCE_SCATTER, &c, sendbuf, recvbuf, esize);
}

WEFT_EXPORT weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                         weft_dtype_t dtype, weft_comm_t comm)
{
    buf_check_t c = {"weft_allgather", sendbuf, recvbuf, sendcount, dtype, WEFT_SUM, 0, 1, comm};
    size_t esize, bytes;
    int size;
    weft_status_t status;
    char *own;

    weft__error_clear();
    status = check_common(&c, &esize, &size);
    if (status != WEFT_OK) {
        return status;
    }
    bytes = sendcount * esize;
    own = (char *)recvbuf + (size_t)comm->rank * bytes;
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf || sendbuf == own) {
        return run(WEFT_COLL_ALLGATHER, &c, own, recvbuf, esize);
    }
    if (overlaps(sendbuf, bytes, recvbuf, bytes * (size_t)size)) {
        return overlap_error(&c);
    }
    return run(WEFT_COLL_ALLGATHER, &c, sendbuf, recvbuf, esize);
}
