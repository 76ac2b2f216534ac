/*
 * Public collective entry points: every argument is checked before anything
 * is sent or written, then the collective layer selects, builds and runs a
 * schedule.
 */
#include "coll/coll.h"
#include "runtime/coll_impl.h"
#include "runtime/init.h"
#include "runtime/request.h"

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
    struct weft_comm *comm; /* NULL: handle is not a live communicator */
    weft_comm_t handle;
    int no_send; /* sendbuf not read on this rank (rooted collectives) */
    int no_recv; /* recvbuf not written on this rank */
    const weft_device_ops_t *dev; /* the buffers' table (check_memory); NULL: none checked */
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
    if (c->comm == NULL) {
        struct weft_comm *none;

        snprintf(what, sizeof(what), "%s: comm", c->call);
        return weft__comm_check(c->handle, what, &none);
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
    if (c->count > 0 && !c->no_recv && c->recvbuf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: recvbuf is NULL with count %zu", c->call,
                           c->count);
    }
    if (c->count > 0 && !c->no_send && c->sendbuf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s: sendbuf is NULL with count %zu (use WEFT_IN_PLACE for in place)",
                           c->call, c->count);
    }
    *esize_p = esize;
    *size_p = c->comm->size;
    return WEFT_OK;
}

/* Device buffers: live memory, and sendbuf and recvbuf of one memory type. */
static weft_status_t check_memory(buf_check_t *c)
{
    const weft_device_ops_t *sdev = NULL, *rdev = NULL;
    weft_status_t status = WEFT_OK;

    if (!c->no_send && c->sendbuf != NULL && c->sendbuf != WEFT_IN_PLACE) {
        status = weft__device_check(c->sendbuf, c->call, "sendbuf", &sdev);
    }
    if (status == WEFT_OK && !c->no_recv && c->recvbuf != NULL) {
        status = weft__device_check(c->recvbuf, c->call, "recvbuf", &rdev);
    }
    if (status == WEFT_OK && sdev != NULL && rdev != NULL && sdev != rdev) {
        status = weft__error(WEFT_ERR_INVALID_ARG,
                             "%s: sendbuf is %s memory and recvbuf %s memory: both must be of "
                             "one memory type",
                             c->call, sdev->name, rdev->name);
    }
    c->dev = rdev != NULL ? rdev : sdev;
    return status;
}

static weft_status_t overlap_error(const buf_check_t *c)
{
    return weft__error(WEFT_ERR_INVALID_ARG,
                       "%s: sendbuf and recvbuf overlap without being in place (pass "
                       "WEFT_IN_PLACE as sendbuf for an in-place operation)",
                       c->call);
}

/* Run the collective (started == NULL), or start it and hand its schedule
 * back (the nonblocking forms). */
static weft_status_t run_args(weft_coll_kind_t kind, const buf_check_t *c, const void *src,
                              void *dst, size_t esize, int root, const size_t *counts,
                              const size_t *displs, const size_t *scounts, const size_t *sdispls,
                              const weft_call_mode_t *how)
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
        .root = root,
        .counts = counts,
        .displs = displs,
        .scounts = scounts,
        .sdispls = sdispls,
    };

    if (how == NULL) {
        weft_status_t status;

        /* a small call of host memory that repeats the last one of its kind, which ran in the
         * shared-memory lines: run there at once (coll/select.c weft__coll_line) */
        if (counts == NULL && scounts == NULL &&
            (c->dev != NULL ? c->dev->memtype == WEFT_MEM_HOST : kind == WEFT_COLL_BARRIER) &&
            weft__coll_line(c->comm, kind, src, dst, c->count, c->dtype, c->op, root, esize,
                            c->sendbuf, c->recvbuf, &status)) {
            return status;
        }
        /* device buffers inside a node: the device task an enqueue makes, waited for */
        if (c->dev != NULL && c->dev->memtype != WEFT_MEM_HOST &&
            (weft__enqueue_blocking_task(c->comm, &args, c->dev, c->call, &status) ||
             weft__blocking_host_staged(c->comm, &args, c->dev, &status))) {
            return status;
        }
        args.dev = c->dev; /* the user's buffers' table, looked up by the checks */
        return weft__coll_run(c->comm, &args);
    }
    if (how->enqueue) {
        return weft__enqueue_coll(c->comm, &args, how->stream, c->call);
    }
    if (c->dev != NULL && c->dev->memtype != WEFT_MEM_HOST) {
        weft_status_t status;

        if (weft__nonblocking_host_staged(c->comm, &args, c->dev, how->started, &status)) {
            return status;
        }
    }
    args.dev = c->dev;
    return weft__coll_start(c->comm, &args, how->started);
}

static weft_status_t run(weft_coll_kind_t kind, const buf_check_t *c, const void *src, void *dst,
                         size_t esize, const weft_call_mode_t *how)
{
    if (c->count == 0 && !weft__coll_config.check_args) {
        return WEFT_OK; /* with the check, ranks that pass no data still compare arguments */
    }
    return run_args(kind, c, src, dst, esize, 0, NULL, NULL, NULL, NULL, how);
}

static weft_status_t check_root(const buf_check_t *c, int root)
{
    if (root < 0 || root >= c->comm->size) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: root %d is not a rank of a %d-rank comm",
                           c->call, root, c->comm->size);
    }
    return WEFT_OK;
}

/* Every entry point starts here: forget the last error, check what all
 * collectives share, and the root when there is one (root NULL: none). */
static weft_status_t enter(buf_check_t *c, const int *root, const weft_call_mode_t *how,
                           size_t *esize_p)
{
    int size;
    weft_status_t status;

    weft__error_clear();
    if (how != NULL && how->call != NULL) {
        c->call = how->call;
    }
    status = check_common(c, esize_p, &size);
    if (status == WEFT_OK && root != NULL) {
        status = check_root(c, *root);
    }
    if (status == WEFT_OK) {
        status = check_memory(c);
    }
    if (status != WEFT_OK) {
        return status;
    }
    if (how != NULL && how->enqueue) {
        return weft__enqueue_check(c->comm, how->stream, c->no_send ? NULL : c->sendbuf,
                                   c->no_recv ? NULL : c->recvbuf, c->call);
    }
    /* operations enqueued earlier on comm run first (program order) */
    return weft__enqueue_comm_drain(c->comm, c->call);
}

/* A blocking call that repeats the last one of its kind, buffers and all (weft__coll_line_kept):
 * enter's checks would find what they found then, so only what may have changed since is looked
 * at (weft_init, operations enqueued on comm). 1 when it ran, its status in *status_p; 0 for
 * any other call, before anything is done (enter then checks it first). */
static int again(weft_coll_kind_t kind, const buf_check_t *c, int root,
                 const weft_call_mode_t *how, weft_status_t *status_p)
{
    if (how != NULL || c->comm == NULL ||
        !weft__coll_line_kept(c->comm, kind, c->sendbuf, c->recvbuf, c->count, c->dtype, c->op,
                              root) ||
        weft__check_initialized(c->call) != WEFT_OK) {
        return 0; /* the full path says why */
    }
    weft__error_clear();
    if ((*status_p = weft__enqueue_comm_drain(c->comm, c->call)) != WEFT_OK) {
        return 1;
    }
    return weft__coll_line_again(c->comm, kind, root, status_p);
}

weft_status_t weft__allreduce_impl(const void *sendbuf, void *recvbuf, size_t count,
                                    weft_dtype_t dtype, weft_op_t op, weft_comm_t comm_h,
                                    const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {"weft_allreduce", sendbuf, recvbuf, count, dtype, op, 1, 0,
                     comm, comm_h, 0, 0, NULL};
    size_t esize;
    weft_status_t status;

    if (again(WEFT_COLL_ALLREDUCE, &c, 0, how, &status)) {
        return status;
    }
    status = enter(&c, NULL, how, &esize);
    if (status != WEFT_OK) {
        return status;
    }
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf) {
        sendbuf = recvbuf;
    } else if (overlaps(sendbuf, count * esize, recvbuf, count * esize)) {
        return overlap_error(&c);
    }
    return run(WEFT_COLL_ALLREDUCE, &c, sendbuf, recvbuf, esize, how);
}

weft_status_t weft__reduce_scatter_impl(const void *sendbuf, void *recvbuf, size_t recvcount,
                                         weft_dtype_t dtype, weft_op_t op, weft_comm_t comm_h,
                                         const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {
        "weft_reduce_scatter", sendbuf, recvbuf, recvcount, dtype, op, 1, 1,
        comm, comm_h, 0, 0, NULL};
    size_t esize, bytes;
    weft_status_t status;

    if (again(WEFT_COLL_REDUCE_SCATTER, &c, 0, how, &status)) {
        return status;
    }
    status = enter(&c, NULL, how, &esize);
    if (status != WEFT_OK) {
        return status;
    }
    bytes = recvcount * esize;
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf) {
        return run(WEFT_COLL_REDUCE_SCATTER, &c, recvbuf, recvbuf, esize, how);
    }
    if ((const char *)recvbuf == (const char *)sendbuf + (size_t)comm->rank * bytes) {
        return run(WEFT_COLL_REDUCE_SCATTER, &c, sendbuf, recvbuf, esize, how);
    }
    if (overlaps(sendbuf, bytes * (size_t)comm->size, recvbuf, bytes)) {
        return overlap_error(&c);
    }
    return run(WEFT_COLL_REDUCE_SCATTER, &c, sendbuf, recvbuf, esize, how);
}

weft_status_t weft__allgather_impl(const void *sendbuf, void *recvbuf, size_t sendcount,
                                    weft_dtype_t dtype, weft_comm_t comm_h, const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {
        "weft_allgather", sendbuf, recvbuf, sendcount, dtype, WEFT_SUM, 0, 1,
        comm, comm_h, 0, 0, NULL};
    size_t esize, bytes;
    weft_status_t status;
    char *own;

    if (again(WEFT_COLL_ALLGATHER, &c, 0, how, &status)) {
        return status;
    }
    status = enter(&c, NULL, how, &esize);
    if (status != WEFT_OK) {
        return status;
    }
    bytes = sendcount * esize;
    own = (char *)recvbuf + (size_t)comm->rank * bytes;
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf || sendbuf == own) {
        sendbuf = own;
    } else if (overlaps(sendbuf, bytes, recvbuf, bytes * (size_t)comm->size)) {
        return overlap_error(&c);
    }
    return run(WEFT_COLL_ALLGATHER, &c, sendbuf, recvbuf, esize, how);
}

/* comm is valid when this runs (check_common passed or is about to). */
static int rank_of(struct weft_comm *comm)
{
    return comm != NULL ? comm->rank : -1;
}

weft_status_t weft__bcast_impl(void *buf, size_t count, weft_dtype_t dtype, int root,
                                weft_comm_t comm_h, const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {"weft_bcast", buf, buf, count, dtype, WEFT_SUM, 0, 0,
                     comm, comm_h, 0, 0, NULL};
    size_t esize;
    weft_status_t status;

    if (again(WEFT_COLL_BCAST, &c, root, how, &status)) {
        return status;
    }
    status = enter(&c, &root, how, &esize);
    if (status != WEFT_OK || (count == 0 && !weft__coll_config.check_args)) {
        return status;
    }
    return run_args(WEFT_COLL_BCAST, &c, buf, buf, esize, root, NULL, NULL, NULL, NULL, how);
}

weft_status_t weft__reduce_impl(const void *sendbuf, void *recvbuf, size_t count,
                                 weft_dtype_t dtype, weft_op_t op, int root, weft_comm_t comm_h,
                                 const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    int is_root = rank_of(comm) == root;
    buf_check_t c = {"weft_reduce", sendbuf, recvbuf, count, dtype, op, 1, 0,
                     comm, comm_h, 0, !is_root, NULL};
    size_t esize;
    weft_status_t status;
    const void *src = sendbuf;

    if (again(WEFT_COLL_REDUCE, &c, root, how, &status)) {
        return status;
    }
    status = enter(&c, &root, how, &esize);
    if (status != WEFT_OK || (count == 0 && !weft__coll_config.check_args)) {
        return status;
    }
    if (is_root && (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf)) {
        src = recvbuf;
    } else if (sendbuf == WEFT_IN_PLACE) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_reduce: WEFT_IN_PLACE as sendbuf is for the root only");
    } else if (is_root && overlaps(sendbuf, count * esize, recvbuf, count * esize)) {
        return overlap_error(&c);
    }
    return run_args(WEFT_COLL_REDUCE, &c, src, is_root ? recvbuf : NULL, esize, root, NULL, NULL,
                    NULL, NULL, how);
}

weft_status_t weft__gather_impl(const void *sendbuf, void *recvbuf, size_t sendcount,
                                 weft_dtype_t dtype, int root, weft_comm_t comm_h,
                                 const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    int is_root = rank_of(comm) == root;
    buf_check_t c = {"weft_gather", sendbuf, recvbuf, sendcount, dtype, WEFT_SUM, 0, 1,
                     comm, comm_h,          0,       !is_root, NULL};
    size_t esize, bytes;
    weft_status_t status;
    const void *src = sendbuf;

    if (again(WEFT_COLL_GATHER, &c, root, how, &status)) {
        return status;
    }
    status = enter(&c, &root, how, &esize);
    if (status != WEFT_OK || (sendcount == 0 && !weft__coll_config.check_args)) {
        return status;
    }
    bytes = sendcount * esize;
    if (is_root &&
        (sendbuf == WEFT_IN_PLACE || sendbuf == (const char *)recvbuf + (size_t)root * bytes)) {
        src = (const char *)recvbuf + (size_t)root * bytes;
    } else if (sendbuf == WEFT_IN_PLACE) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_gather: WEFT_IN_PLACE as sendbuf is for the root only");
    } else if (is_root && overlaps(sendbuf, bytes, recvbuf, bytes * (size_t)comm->size)) {
        return overlap_error(&c);
    }
    return run_args(WEFT_COLL_GATHER, &c, src, is_root ? recvbuf : NULL, esize, root, NULL, NULL,
                    NULL, NULL, how);
}

weft_status_t weft__scatter_impl(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  weft_dtype_t dtype, int root, weft_comm_t comm_h,
                                  const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    int is_root = rank_of(comm) == root;
    buf_check_t c = {"weft_scatter", sendbuf,  recvbuf, recvcount, dtype, WEFT_SUM, 0, 1,
                     comm, comm_h,           !is_root, 0, NULL};
    size_t esize, bytes;
    weft_status_t status;

    if (again(WEFT_COLL_SCATTER, &c, root, how, &status)) {
        return status;
    }
    status = enter(&c, &root, how, &esize);
    if (status != WEFT_OK || (recvcount == 0 && !weft__coll_config.check_args)) {
        return status;
    }
    bytes = recvcount * esize;
    if (is_root && recvbuf != (const char *)sendbuf + (size_t)root * bytes &&
        overlaps(sendbuf, bytes * (size_t)comm->size, recvbuf, bytes)) {
        return overlap_error(&c);
    }
    return run_args(WEFT_COLL_SCATTER, &c, is_root ? sendbuf : NULL, recvbuf, esize, root, NULL,
                    NULL, NULL, NULL, how);
}

weft_status_t weft__alltoall_impl(const void *sendbuf, void *recvbuf, size_t count,
                                   weft_dtype_t dtype, weft_comm_t comm_h, const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {"weft_alltoall", sendbuf, recvbuf, count, dtype, WEFT_SUM, 0, 1,
                     comm, comm_h, 0, 0, NULL};
    size_t esize;
    weft_status_t status;

    if (again(WEFT_COLL_ALLTOALL, &c, 0, how, &status)) {
        return status;
    }
    status = enter(&c, NULL, how, &esize);
    if (status != WEFT_OK) {
        return status;
    }
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf) {
        return run(WEFT_COLL_ALLTOALL, &c, recvbuf, recvbuf, esize, how);
    }
    if (overlaps(sendbuf, count * esize * (size_t)comm->size, recvbuf,
                 count * esize * (size_t)comm->size)) {
        return overlap_error(&c);
    }
    return run(WEFT_COLL_ALLTOALL, &c, sendbuf, recvbuf, esize, how);
}

weft_status_t weft__barrier_impl(weft_comm_t comm_h, const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {"weft_barrier", NULL, NULL, 0, WEFT_UINT8, WEFT_SUM, 0, 0,
                     comm, comm_h, 1, 1, NULL};
    size_t esize;
    weft_status_t status;

    if (again(WEFT_COLL_BARRIER, &c, 0, how, &status)) {
        return status;
    }
    status = enter(&c, NULL, how, &esize);
    if (status != WEFT_OK) {
        return status;
    }
    return run_args(WEFT_COLL_BARRIER, &c, NULL, NULL, esize, 0, NULL, NULL, NULL, NULL, how);
}

/* Per-rank count and displacement arrays: present, and every block inside a
 * buffer whose size fits size_t. *total_p: the extent in elements. */
static weft_status_t check_vector(const buf_check_t *c, const char *cname, const size_t *counts,
                                  const char *dname, const size_t *displs, size_t esize,
                                  size_t *total_p)
{
    size_t extent = 0, sum = 0;

    if (counts == NULL || (dname != NULL && displs == NULL)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: %s is NULL", c->call,
                           counts == NULL ? cname : dname);
    }
    for (int r = 0; r < c->comm->size; r++) {
        size_t start = displs != NULL ? displs[r] : sum;

        if (counts[r] > SIZE_MAX / esize || start > SIZE_MAX / esize - counts[r]) {
            return weft__error(WEFT_ERR_INVALID_ARG, "%s: %s[%d] + %s[%d] overflows", c->call,
                               cname, r, dname != NULL ? dname : "offset", r);
        }
        sum += counts[r];
        extent = start + counts[r] > extent ? start + counts[r] : extent;
    }
    *total_p = extent;
    return WEFT_OK;
}

weft_status_t weft__allgatherv_impl(const void *sendbuf, void *recvbuf, size_t sendcount,
                                     const size_t *recvcounts, const size_t *displs,
                                     weft_dtype_t dtype, weft_comm_t comm_h, const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {"weft_allgatherv", sendbuf, recvbuf, 0, dtype, WEFT_SUM, 0, 0,
                     comm, comm_h, 0, 0, NULL};
    size_t esize, total;
    weft_status_t status;
    const void *src = sendbuf;

    status = enter(&c, NULL, how, &esize);
    if (status == WEFT_OK) {
        status = check_vector(&c, "recvcounts", recvcounts, "displs", displs, esize, &total);
    }
    if (status != WEFT_OK) {
        return status;
    }
    if (recvcounts[comm->rank] != sendcount) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_allgatherv: sendcount %zu differs from recvcounts[%d] = %zu",
                           sendcount, comm->rank, recvcounts[comm->rank]);
    }
    if (total > 0 && recvbuf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_allgatherv: recvbuf is NULL");
    }
    if (sendcount > 0 && sendbuf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_allgatherv: sendbuf is NULL");
    }
    if (sendbuf == WEFT_IN_PLACE) {
        src = (const char *)recvbuf + displs[comm->rank] * esize;
    } else if (sendbuf != (const char *)recvbuf + displs[comm->rank] * esize &&
               overlaps(sendbuf, sendcount * esize, recvbuf, total * esize)) {
        return overlap_error(&c);
    }
    if (total == 0) {
        return WEFT_OK;
    }
    c.count = sendcount;
    return run_args(WEFT_COLL_ALLGATHERV, &c, src, recvbuf, esize, 0, recvcounts, displs, NULL,
                    NULL, how);
}

weft_status_t weft__alltoallv_impl(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                                    const size_t *sdispls, const size_t *recvcounts,
                                    const size_t *rdispls, weft_dtype_t dtype, weft_comm_t comm_h,
                                    const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {"weft_alltoallv", sendbuf, recvbuf, 0, dtype, WEFT_SUM, 0, 0,
                     comm, comm_h, 0, 0, NULL};
    size_t esize, stotal = 0, rtotal;
    weft_status_t status;
    int in_place = sendbuf == WEFT_IN_PLACE;

    status = enter(&c, NULL, how, &esize);
    if (status == WEFT_OK) {
        status = check_vector(&c, "recvcounts", recvcounts, "rdispls", rdispls, esize, &rtotal);
    }
    if (status == WEFT_OK && !in_place) {
        status = check_vector(&c, "sendcounts", sendcounts, "sdispls", sdispls, esize, &stotal);
    }
    if (status != WEFT_OK) {
        return status;
    }
    if (in_place) {
        sendbuf = recvbuf;
        sendcounts = recvcounts;
        sdispls = rdispls;
        stotal = rtotal;
    }
    if ((rtotal > 0 && recvbuf == NULL) || (stotal > 0 && sendbuf == NULL)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_alltoallv: %s is NULL",
                           recvbuf == NULL ? "recvbuf" : "sendbuf");
    }
    if (!in_place && overlaps(sendbuf, stotal * esize, recvbuf, rtotal * esize)) {
        return overlap_error(&c);
    }
    /* runs even when this rank moves nothing: its peers' schedules expect it */
    return run_args(WEFT_COLL_ALLTOALLV, &c, sendbuf, recvbuf, esize, 0, recvcounts, rdispls,
                    sendcounts, sdispls, how);
}

weft_status_t weft__reduce_scatter_v_impl(const void *sendbuf, void *recvbuf,
                                           const size_t *recvcounts, weft_dtype_t dtype,
                                           weft_op_t op, weft_comm_t comm_h, const weft_call_mode_t *how)
{
    struct weft_comm *comm = weft__comm_of(comm_h);
    buf_check_t c = {"weft_reduce_scatter_v", sendbuf, recvbuf, 0, dtype, op, 1, 0,
                     comm, comm_h, 0, 0, NULL};
    size_t esize, total;
    weft_status_t status;

    status = enter(&c, NULL, how, &esize);
    if (status == WEFT_OK) {
        status = check_vector(&c, "recvcounts", recvcounts, NULL, NULL, esize, &total);
    }
    if (status != WEFT_OK) {
        return status;
    }
    if (total == 0) {
        return WEFT_OK;
    }
    if (recvbuf == NULL || sendbuf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_reduce_scatter_v: %s is NULL",
                           recvbuf == NULL ? "recvbuf" : "sendbuf");
    }
    if (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf) {
        sendbuf = recvbuf;
    } else if (overlaps(sendbuf, total * esize, recvbuf, recvcounts[comm->rank] * esize)) {
        return overlap_error(&c);
    }
    c.count = recvcounts[comm->rank];
    return run_args(WEFT_COLL_REDUCE_SCATTER_V, &c, sendbuf, recvbuf, esize, 0, recvcounts, NULL,
                    NULL, NULL, how);
}
