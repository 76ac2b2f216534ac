/*
 * weft._core: the compiled hot path of the Python bindings.
 *
 * Idea: a blocking collective on numpy arrays costs ~4 us of Python and
 * ctypes work per call (resolving each buffer, parsing the op, building the
 * argument tuple, ctypes' own marshalling), several times weft's own cost
 * at small sizes. Here one C call does it all: the buffer protocol gives the
 * address, length, item size and format; two dict lookups give the op; the
 * weft function runs with the GIL released.
 *
 *   Comm.allreduce(x)  ->  _core.allreduce(handle, x, op, out)
 *                             |  handled: weft_allreduce, result object
 *                             |  weft error: weft.Error (via raise_status)
 *                             '- anything else: NotImplemented
 *                                   -> the Python path (comm.py), which
 *                                      gives the same result or error
 *
 * The calls: allreduce, reduce, bcast, barrier, send, recv, and the
 * out-of-place allgather, reduce_scatter, alltoall, gather and scatter
 * with out= given.
 *
 * Only exact numpy.ndarray objects that are C-contiguous, of a dtype with a
 * buffer format weft maps (int8/uint8/int32/uint32/int64/uint64/float16/
 * float32/float64, native order), with matching counts and dtypes, and an
 * op given as a name or a weft.Op/int are handled; everything else returns
 * NotImplemented so that there is one place (comm.py) that words errors.
 *
 * The weft functions are not linked: bind() receives their addresses from
 * the libweft that weft._lib loaded through ctypes, so the package never has
 * two copies of the library (two copies would each own their communicators).
 *
 * Cost: one call, two GetBuffer/ReleaseBuffer pairs, one dict lookup.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <weft.h>

typedef __typeof__(weft_allreduce) allreduce_fn;
typedef __typeof__(weft_reduce) reduce_fn;
typedef __typeof__(weft_bcast) bcast_fn;
typedef __typeof__(weft_allgather) allgather_fn;
typedef __typeof__(weft_barrier) barrier_fn;
typedef __typeof__(weft_send) send_fn;
typedef __typeof__(weft_recv) recv_fn;
typedef __typeof__(weft_reduce_scatter) reduce_scatter_fn;
typedef __typeof__(weft_alltoall) alltoall_fn;
typedef __typeof__(weft_gather) gather_fn;
typedef __typeof__(weft_scatter) scatter_fn;
typedef __typeof__(weft_iallreduce) iallreduce_fn;
typedef __typeof__(weft_ibcast) ibcast_fn;
typedef __typeof__(weft_iallgather) iallgather_fn;
typedef __typeof__(weft_isend) isend_fn;
typedef __typeof__(weft_irecv) irecv_fn;
typedef __typeof__(weft_wait) wait_fn;
typedef __typeof__(weft_request_source) source_fn;
typedef __typeof__(weft_request_free) free_fn;
typedef __typeof__(weft_test) test_fn;

static struct {
    allreduce_fn *allreduce;
    reduce_fn *reduce;
    bcast_fn *bcast;
    allgather_fn *allgather;
    barrier_fn *barrier;
    send_fn *send;
    recv_fn *recv;
    reduce_scatter_fn *reduce_scatter;
    alltoall_fn *alltoall;
    gather_fn *gather;
    scatter_fn *scatter;
    iallreduce_fn *iallreduce;
    ibcast_fn *ibcast;
    iallgather_fn *iallgather;
    isend_fn *isend;
    irecv_fn *irecv;
    wait_fn *wait;
    source_fn *source;
    free_fn *free;
    test_fn *test;
    PyObject *ndarray;      /* numpy.ndarray: the only type handled */
    PyObject *ops;          /* name or int -> weft_op_t value */
    PyObject *raise_status; /* raise_status(status, function name): raises weft.Error */
    int bound;
} core;

/* One numpy buffer: its view (released by release()) and weft dtype. */
typedef struct {
    Py_buffer view;
    weft_dtype_t dtype;
    size_t count;
    int held;
} buf_t;

/* The weft dtype of a buffer format and item size; -1 if weft has none. */
static int dtype_of(const char *format, Py_ssize_t itemsize)
{
    if (format == NULL)
        return itemsize == 1 ? WEFT_UINT8 : -1;
    if (format[0] == '@' || format[0] == '=')
        format++;
    if (format[0] == '\0' || format[1] != '\0')
        return -1;
    switch (format[0]) {
    case 'b': return itemsize == 1 ? WEFT_INT8 : -1;
    case 'B': return itemsize == 1 ? WEFT_UINT8 : -1;
    case 'i': case 'l': case 'q':
        return itemsize == 4 ? WEFT_INT32 : itemsize == 8 ? WEFT_INT64 : -1;
    case 'I': case 'L': case 'Q':
        return itemsize == 4 ? WEFT_UINT32 : itemsize == 8 ? WEFT_UINT64 : -1;
    case 'e': return itemsize == 2 ? WEFT_FLOAT16 : -1;
    case 'f': return itemsize == 4 ? WEFT_FLOAT32 : -1;
    case 'd': return itemsize == 8 ? WEFT_FLOAT64 : -1;
    default: return -1;
    }
}

static void release(buf_t *b)
{
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

/* Take obj's buffer; 0 when it is not one this module handles (nothing
 * held, no exception set). */
static int take(buf_t *b, PyObject *obj, int write)
{
    b->held = 0;
    if ((PyObject *)Py_TYPE(obj) != core.ndarray)
        return 0;
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (write ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) != 0) {
        PyErr_Clear(); /* read-only, not contiguous: comm.py words it */
        return 0;
    }
    b->held = 1;
    int dt = dtype_of(b->view.format, b->view.itemsize);
    if (dt < 0 || b->view.itemsize <= 0) {
        release(b);
        return 0;
    }
    b->dtype = (weft_dtype_t)dt;
    b->count = (size_t)(b->view.len / b->view.itemsize);
    return 1;
}

/* Both buffers of an out-of-place call: same dtype (format), and counts
 * in the ratio of the call: out's count * in_per = in's count * out_per. */
static int take_ratio(buf_t *in, PyObject *inobj, buf_t *out, PyObject *outobj, size_t out_per,
                      size_t in_per)
{
    if (!take(in, inobj, 0))
        return 0;
    if (!take(out, outobj, 1) || out->dtype != in->dtype ||
        strcmp(out->view.format, in->view.format) != 0 ||
        out->count * in_per != in->count * out_per) {
        release(out);
        release(in);
        return 0;
    }
    return 1;
}

/* out's count = in's count * factor */
static int take_pair(buf_t *in, PyObject *inobj, buf_t *out, PyObject *outobj, size_t factor)
{
    return take_ratio(in, inobj, out, outobj, factor, 1);
}

/* The weft op of a name, a weft.Op or an int (not a bool); -1 if unknown. */
static int op_of(PyObject *op)
{
    if (!(PyUnicode_CheckExact(op) || (PyLong_Check(op) && !PyBool_Check(op))))
        return -1;
    PyObject *v = PyDict_GetItemWithError(core.ops, op); /* borrowed */
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    long r = PyLong_AsLong(v);
    if (r == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return (int)r;
}

/* The communicator handle (an int from ctypes); NULL if none. */
static weft_comm_t comm_of(PyObject *handle)
{
    if (handle == Py_None || !PyLong_Check(handle))
        return NULL;
    void *p = PyLong_AsVoidPtr(handle);
    if (p == NULL)
        PyErr_Clear();
    return (weft_comm_t)p;
}

static int valid_rank(PyObject *obj, int size, int *out)
{
    if (!PyLong_CheckExact(obj))
        return 0;
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (v < 0 || v >= size)
        return 0;
    *out = (int)v;
    return 1;
}

static PyObject *not_handled(void)
{
    Py_RETURN_NOTIMPLEMENTED;
}

/* The result, or weft.Error raised through raise_status. */
static PyObject *finish(weft_status_t st, const char *name, PyObject *result)
{
    if (st != WEFT_OK) {
        PyObject *r = PyObject_CallFunction(core.raise_status, "is", (int)st, name);
        Py_XDECREF(r);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "weft: %s failed with status %d", name, (int)st);
        return NULL;
    }
    Py_INCREF(result);
    return result;
}

#define BOUND_OR_NOT_HANDLED()                                                                     \
    do {                                                                                           \
        if (!core.bound)                                                                           \
            return not_handled();                                                                  \
    } while (0)

/* *v_p = obj as a long; 0 when it is not an int */
static int long_arg(PyObject *obj, long *v_p)
{
    if ((*v_p = PyLong_AsLong(obj)) == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* rank and size from args[i] and args[i + 1]; 0 when they are not ints */
static int rank_size(PyObject *const *args, int i, long *rank_p, long *size_p)
{
    return long_arg(args[i], rank_p) && long_arg(args[i + 1], size_p);
}

/* The communicator and size of an out-of-place call f(handle, size, buf, ...,
 * out) of nargs arguments with out given (not None, not buf) and size >= 1;
 * NULL when it is not one. */
static weft_comm_t out_of_place(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                                long *size_p)
{
    if (nargs != want || args[want - 1] == Py_None || args[want - 1] == args[2] ||
        !long_arg(args[1], size_p) || *size_p < 1)
        return NULL;
    return comm_of(args[0]);
}

/* Both buffers back, then the result (out) or the error. */
static PyObject *finish_pair(weft_status_t st, const char *name, buf_t *in, buf_t *out,
                             PyObject *result)
{
    release(out);
    release(in);
    return finish(st, name, result);
}

static PyObject *started(weft_status_t st, const char *name, weft_request_t req, buf_t *a,
                         buf_t *b);

/* weft_allreduce (root < 0; started: weft_iallreduce, (request, hold)), or
 * weft_reduce on its root: in place when out is None or buf, else into out. */
static PyObject *reduction(weft_comm_t comm, PyObject *bufobj, PyObject *outobj, int op, int root,
                           int start)
{
    int inplace = outobj == Py_None || outobj == bufobj;
    buf_t in, out = {.held = 0};
    weft_status_t st;

    if (inplace ? !take(&in, bufobj, 1) : !take_pair(&in, bufobj, &out, outobj, 1))
        return not_handled();
    const void *send = inplace ? WEFT_IN_PLACE : in.view.buf;
    void *recv = inplace ? in.view.buf : out.view.buf;
    if (start) {
        weft_request_t req = NULL;
        st = core.iallreduce(send, recv, in.count, in.dtype, (weft_op_t)op, comm, &req);
        return started(st, "weft_iallreduce", req, &in, &out);
    }
    Py_BEGIN_ALLOW_THREADS
    if (root < 0)
        st = core.allreduce(send, recv, in.count, in.dtype, (weft_op_t)op, comm);
    else
        st = core.reduce(send, recv, in.count, in.dtype, (weft_op_t)op, root, comm);
    Py_END_ALLOW_THREADS
    return finish_pair(st, root < 0 ? "weft_allreduce" : "weft_reduce", &in, &out,
                       inplace ? bufobj : outobj);
}

/* allreduce(handle, buf, op, out): blocking, or started (iallreduce) */
static PyObject *allreduce_call(PyObject *const *args, Py_ssize_t nargs, int start)
{
    BOUND_OR_NOT_HANDLED();
    if (nargs != 4)
        return not_handled();
    weft_comm_t comm = comm_of(args[0]);
    int op = op_of(args[2]);
    if (comm == NULL || op < 0)
        return not_handled();
    return reduction(comm, args[1], args[3], op, -1, start);
}

/* reduce(handle, rank, size, buf, op, root, out) */
static PyObject *py_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_OR_NOT_HANDLED();
    long rank, size;
    if (nargs != 7 || !rank_size(args, 1, &rank, &size))
        return not_handled();
    weft_comm_t comm = comm_of(args[0]);
    int op = op_of(args[4]), root;
    if (comm == NULL || op < 0 || !valid_rank(args[5], (int)size, &root))
        return not_handled();
    if (rank == root)
        return reduction(comm, args[3], args[6], op, root, 0);
    buf_t in;
    weft_status_t st;
    if (!take(&in, args[3], 0))
        return not_handled();
    Py_BEGIN_ALLOW_THREADS
    st = core.reduce(in.view.buf, NULL, in.count, in.dtype, (weft_op_t)op, root, comm);
    Py_END_ALLOW_THREADS
    release(&in);
    return finish(st, "weft_reduce", Py_None);
}

/* bcast(handle, rank, size, buf, root): blocking (buf) or started (ibcast:
 * (request, hold)); NotImplemented for what it does not take */
static PyObject *bcast_call(PyObject *const *args, Py_ssize_t nargs, int start)
{
    BOUND_OR_NOT_HANDLED();
    long rank, size;
    if (nargs != 5 || !rank_size(args, 1, &rank, &size))
        return not_handled();
    weft_comm_t comm = comm_of(args[0]);
    int root;
    if (comm == NULL || !valid_rank(args[4], (int)size, &root))
        return not_handled();
    buf_t b;
    if (!take(&b, args[3], rank != root))
        return not_handled();
    weft_status_t st;
    if (start) {
        weft_request_t req = NULL;
        st = core.ibcast(b.view.buf, b.count, b.dtype, root, comm, &req);
        return started(st, "weft_ibcast", req, &b, NULL);
    }
    Py_BEGIN_ALLOW_THREADS
    st = core.bcast(b.view.buf, b.count, b.dtype, root, comm);
    Py_END_ALLOW_THREADS
    release(&b);
    return finish(st, "weft_bcast", args[3]);
}

/* allgather(handle, size, buf, out), out given, not in place: blocking (out)
 * or started (iallgather: (request, hold)) */
static PyObject *allgather_call(PyObject *const *args, Py_ssize_t nargs, int start)
{
    BOUND_OR_NOT_HANDLED();
    long size;
    weft_comm_t comm = out_of_place(args, nargs, 4, &size);
    buf_t in, out;
    if (comm == NULL || !take_pair(&in, args[2], &out, args[3], (size_t)size))
        return not_handled();
    weft_status_t st;
    if (start) {
        weft_request_t req = NULL;
        st = core.iallgather(in.view.buf, out.view.buf, in.count, in.dtype, comm, &req);
        return started(st, "weft_iallgather", req, &in, &out);
    }
    Py_BEGIN_ALLOW_THREADS
    st = core.allgather(in.view.buf, out.view.buf, in.count, in.dtype, comm);
    Py_END_ALLOW_THREADS
    return finish_pair(st, "weft_allgather", &in, &out, args[3]);
}

/* barrier(handle) */
static PyObject *py_barrier(PyObject *self, PyObject *handle)
{
    (void)self;
    BOUND_OR_NOT_HANDLED();
    weft_comm_t comm = comm_of(handle);
    if (comm == NULL)
        return not_handled();
    weft_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = core.barrier(comm);
    Py_END_ALLOW_THREADS
    return finish(st, "weft_barrier", Py_None);
}

/* Tag check as comm.py's _peer: an exact int in 0..WEFT_TAG_UB. */
static int valid_tag(PyObject *obj, int *out)
{
    return valid_rank(obj, WEFT_TAG_UB + 1, out);
}

/* The arguments (handle, size, buf, peer, tag) of a send or receive, its
 * blocking or nonblocking form; a receive's peer may be ANY_SOURCE. 0 when
 * they are not ones this module takes (nothing held). */
static int p2p_args(PyObject *const *args, Py_ssize_t nargs, int receive, weft_comm_t *comm_p,
                    int *peer_p, int *tag_p, buf_t *b)
{
    long size, any;
    if (!core.bound || nargs != 5 || !long_arg(args[1], &size))
        return 0;
    if ((*comm_p = comm_of(args[0])) == NULL || !valid_tag(args[4], tag_p))
        return 0;
    if (receive && PyLong_CheckExact(args[3]) && long_arg(args[3], &any) &&
        any == WEFT_ANY_SOURCE)
        *peer_p = WEFT_ANY_SOURCE;
    else if (!valid_rank(args[3], (int)size, peer_p))
        return 0;
    return take(b, args[2], receive);
}

/* reduce_scatter(handle, size, buf, op, out): out given, not in place */
static PyObject *py_reduce_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_OR_NOT_HANDLED();
    long size;
    weft_comm_t comm = out_of_place(args, nargs, 5, &size);
    int op;
    buf_t in, out;
    if (comm == NULL || (op = op_of(args[3])) < 0 ||
        !take_ratio(&in, args[2], &out, args[4], 1, (size_t)size))
        return not_handled();
    weft_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = core.reduce_scatter(in.view.buf, out.view.buf, out.count, in.dtype, (weft_op_t)op,
                             comm);
    Py_END_ALLOW_THREADS
    return finish_pair(st, "weft_reduce_scatter", &in, &out, args[4]);
}

/* alltoall(handle, size, buf, out): out given, not in place */
static PyObject *py_alltoall(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_OR_NOT_HANDLED();
    long size;
    weft_comm_t comm = out_of_place(args, nargs, 4, &size);
    buf_t in, out;
    if (comm == NULL || !take_pair(&in, args[2], &out, args[3], 1))
        return not_handled();
    if (in.count % (size_t)size != 0) {
        release(&out);
        release(&in);
        return not_handled();
    }
    weft_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = core.alltoall(in.view.buf, out.view.buf, in.count / (size_t)size, in.dtype, comm);
    Py_END_ALLOW_THREADS
    return finish_pair(st, "weft_alltoall", &in, &out, args[3]);
}

/* gather(handle, rank, size, buf, root, out): not in place; out given on
 * root (ignored elsewhere, where the result is None) */
static PyObject *py_gather(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_OR_NOT_HANDLED();
    long rank, size;
    int root;
    if (nargs != 6 || !rank_size(args, 1, &rank, &size))
        return not_handled();
    weft_comm_t comm = comm_of(args[0]);
    if (comm == NULL || size < 1 || !valid_rank(args[4], (int)size, &root))
        return not_handled();
    int at_root = rank == root;
    buf_t in, out = {.held = 0};
    if (at_root ? args[5] == Py_None || args[5] == args[3] ||
                      !take_pair(&in, args[3], &out, args[5], (size_t)size)
                : !take(&in, args[3], 0))
        return not_handled();
    weft_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = core.gather(in.view.buf, at_root ? out.view.buf : NULL, in.count, in.dtype, root, comm);
    Py_END_ALLOW_THREADS
    return finish_pair(st, "weft_gather", &in, &out, at_root ? args[5] : Py_None);
}

/* scatter(handle, rank, size, buf, root, out): not in place, out given
 * (buf is ignored off root) */
static PyObject *py_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_OR_NOT_HANDLED();
    long rank, size;
    int root;
    if (nargs != 6 || !rank_size(args, 1, &rank, &size) || args[5] == Py_None ||
        args[5] == args[3])
        return not_handled();
    weft_comm_t comm = comm_of(args[0]);
    if (comm == NULL || size < 1 || !valid_rank(args[4], (int)size, &root))
        return not_handled();
    int at_root = rank == root;
    buf_t in = {.held = 0}, out;
    if (at_root ? !take_ratio(&in, args[3], &out, args[5], 1, (size_t)size)
                : !take(&out, args[5], 1))
        return not_handled();
    weft_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = core.scatter(at_root ? in.view.buf : NULL, out.view.buf, out.count, out.dtype, root,
                      comm);
    Py_END_ALLOW_THREADS
    return finish_pair(st, "weft_scatter", &in, &out, args[5]);
}

/* The address of functions[name], or NULL with an exception set. */
/* ---- nonblocking starts: the request and what holds the buffers ---- */

/* The buffers of a started operation, exported until this object goes (the
 * Python Request drops it once the operation completed, or hands it to the
 * communicator's family when freed unfinished). */
typedef struct {
    PyObject_HEAD
    buf_t bufs[2];
} hold_t;

static void hold_dealloc(PyObject *self)
{
    hold_t *h = (hold_t *)self;
    release(&h->bufs[1]);
    release(&h->bufs[0]);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject hold_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "weft._core.Hold",
    .tp_basicsize = sizeof(hold_t),
    .tp_dealloc = hold_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "the buffers of a started nonblocking operation, exported while it lives",
};

/* (request handle as an int, Hold of the buffers), or weft.Error: the buffers
 * move into the Hold (released at once on an error). */
static PyObject *started(weft_status_t st, const char *name, weft_request_t req, buf_t *a,
                         buf_t *b)
{
    buf_t none = {.held = 0};
    if (b == NULL)
        b = &none;
    if (st != WEFT_OK) {
        release(b);
        release(a);
        return finish(st, name, Py_None);
    }
    hold_t *h = PyObject_New(hold_t, &hold_type);
    PyObject *handle = PyLong_FromVoidPtr(req);
    if (h == NULL || handle == NULL) {
        /* the operation runs on; its buffers stay exported (leaked) rather
         * than be released under it */
        Py_XDECREF((PyObject *)h);
        Py_XDECREF(handle);
        return NULL;
    }
    h->bufs[0] = *a;
    h->bufs[1] = *b;
    return Py_BuildValue("(NN)", handle, (PyObject *)h);
}

/* send(handle, size, buf, dest, tag) and recv(handle, size, buf, source,
 * tag), blocking (None, or buf) or started (isend, irecv: (request, hold));
 * NotImplemented for what p2p_args does not take */
static PyObject *p2p(PyObject *const *args, Py_ssize_t nargs, int receive, int start)
{
    weft_comm_t comm;
    int peer, tag;
    buf_t b;
    if (!p2p_args(args, nargs, receive, &comm, &peer, &tag, &b))
        return not_handled();
    weft_status_t st;
    if (start) {
        weft_request_t req = NULL;
        st = receive ? core.irecv(b.view.buf, b.count, b.dtype, peer, tag, comm, &req)
                     : core.isend(b.view.buf, b.count, b.dtype, peer, tag, comm, &req);
        return started(st, receive ? "weft_irecv" : "weft_isend", req, &b, NULL);
    }
    Py_BEGIN_ALLOW_THREADS
    if (receive)
        st = core.recv(b.view.buf, b.count, b.dtype, peer, tag, comm);
    else
        st = core.send(b.view.buf, b.count, b.dtype, peer, tag, comm);
    Py_END_ALLOW_THREADS
    release(&b);
    return finish(st, receive ? "weft_recv" : "weft_send", receive ? args[2] : Py_None);
}

/* The CPython entry points of the calls above: py_NAME(self, args, nargs)
 * runs CALL with args and nargs. */
#define ENTRY(name, call, ...)                                                                     \
    static PyObject *py_##name(PyObject *self, PyObject *const *args, Py_ssize_t nargs)            \
    {                                                                                              \
        (void)self;                                                                                \
        return call(args, nargs, __VA_ARGS__);                                                     \
    }
ENTRY(allreduce, allreduce_call, 0)
ENTRY(iallreduce, allreduce_call, 1)
ENTRY(bcast, bcast_call, 0)
ENTRY(ibcast, bcast_call, 1)
ENTRY(allgather, allgather_call, 0)
ENTRY(iallgather, allgather_call, 1)
ENTRY(send, p2p, 0, 0)
ENTRY(recv, p2p, 1, 0)
ENTRY(isend, p2p, 0, 1)
ENTRY(irecv, p2p, 1, 1)
#undef ENTRY

/* wait(request, want_source) -> (status, source or -1): weft_wait (the GIL
 * released), the sender of a completed receive when asked, then
 * weft_request_free: the handle is gone afterwards.
 * test(request, want_source) -> (status, done, source or -1): weft_test;
 * once done (or failed) the same as wait, otherwise the handle stays. */
static PyObject *completion(PyObject *const *args, Py_ssize_t nargs, int is_test)
{
    if (!core.bound || nargs != 2) {
        PyErr_Format(PyExc_TypeError, "weft._core.%s(request, want_source): not bound",
                     is_test ? "test" : "wait");
        return NULL;
    }
    weft_request_t req = PyLong_AsVoidPtr(args[0]);
    int want = PyObject_IsTrue(args[1]), src = -1, done = 0;
    if ((req == NULL && PyErr_Occurred()) || want < 0)
        return NULL;
    weft_status_t st;
    if (is_test) {
        st = core.test(req, &done);
        if (!done && st == WEFT_OK)
            return Py_BuildValue("(iii)", 0, 0, -1);
    }
    Py_BEGIN_ALLOW_THREADS
    if (!is_test)
        st = core.wait(req);
    if (st == WEFT_OK && want && core.source(req, &src) != WEFT_OK)
        src = -1;
    core.free(req);
    Py_END_ALLOW_THREADS
    return is_test ? Py_BuildValue("(iii)", (int)st, 1, src) : Py_BuildValue("(ii)", (int)st, src);
}

static PyObject *py_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return completion(args, nargs, 0);
}

static PyObject *py_test(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return completion(args, nargs, 1);
}

static void *address_of(PyObject *functions, const char *name)
{
    PyObject *v = PyDict_GetItemString(functions, name); /* borrowed */
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "weft._core.bind: no address for %s", name);
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(v);
    if (p == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "weft._core.bind: %s has address 0", name);
    return p;
}

/* bind(functions, ndarray, ops, raise_status) */
static PyObject *py_bind(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *functions, *ndarray, *ops, *raise_status;
    if (!PyArg_ParseTuple(args, "O!O!O!O:bind", &PyDict_Type, &functions, &PyType_Type, &ndarray,
                          &PyDict_Type, &ops, &raise_status))
        return NULL;
    if (!PyCallable_Check(raise_status)) {
        PyErr_SetString(PyExc_TypeError, "weft._core.bind: raise_status must be callable");
        return NULL;
    }
    void *p[20];
    static const char *const names[20] = {
        "weft_allreduce", "weft_reduce",         "weft_bcast",        "weft_allgather",
        "weft_barrier",   "weft_send",           "weft_recv",         "weft_reduce_scatter",
        "weft_alltoall",  "weft_gather",         "weft_scatter",      "weft_iallreduce",
        "weft_isend",     "weft_irecv",          "weft_wait",         "weft_request_source",
        "weft_request_free", "weft_ibcast",      "weft_iallgather",   "weft_test"};
    for (int i = 0; i < 20; i++)
        if ((p[i] = address_of(functions, names[i])) == NULL)
            return NULL;
    core.bound = 0;
    Py_XDECREF(core.ndarray);
    Py_XDECREF(core.ops);
    Py_XDECREF(core.raise_status);
    core.allreduce = (allreduce_fn *)p[0];
    core.reduce = (reduce_fn *)p[1];
    core.bcast = (bcast_fn *)p[2];
    core.allgather = (allgather_fn *)p[3];
    core.barrier = (barrier_fn *)p[4];
    core.send = (send_fn *)p[5];
    core.recv = (recv_fn *)p[6];
    core.reduce_scatter = (reduce_scatter_fn *)p[7];
    core.alltoall = (alltoall_fn *)p[8];
    core.gather = (gather_fn *)p[9];
    core.scatter = (scatter_fn *)p[10];
    core.iallreduce = (iallreduce_fn *)p[11];
    core.isend = (isend_fn *)p[12];
    core.irecv = (irecv_fn *)p[13];
    core.wait = (wait_fn *)p[14];
    core.source = (source_fn *)p[15];
    core.free = (free_fn *)p[16];
    core.ibcast = (ibcast_fn *)p[17];
    core.iallgather = (iallgather_fn *)p[18];
    core.test = (test_fn *)p[19];
    Py_INCREF(ndarray);
    Py_INCREF(ops);
    Py_INCREF(raise_status);
    core.ndarray = ndarray;
    core.ops = ops;
    core.raise_status = raise_status;
    core.bound = 1;
    Py_RETURN_NONE;
}

/* dtype_of(format, itemsize): the mapping, for the tests */
static PyObject *py_dtype_of(PyObject *self, PyObject *args)
{
    (void)self;
    const char *format;
    Py_ssize_t itemsize;
    if (!PyArg_ParseTuple(args, "sn:dtype_of", &format, &itemsize))
        return NULL;
    return PyLong_FromLong(dtype_of(format, itemsize));
}

static PyMethodDef methods[] = {
    {"bind", py_bind, METH_VARARGS,
     "bind(functions, ndarray, ops, raise_status): the libweft function addresses "
     "(name -> int), numpy.ndarray, the op table and the error raiser."},
    {"allreduce", (PyCFunction)(void (*)(void))py_allreduce, METH_FASTCALL,
     "allreduce(handle, buf, op, out) -> result or NotImplemented"},
    {"reduce", (PyCFunction)(void (*)(void))py_reduce, METH_FASTCALL,
     "reduce(handle, rank, size, buf, op, root, out) -> result or NotImplemented"},
    {"bcast", (PyCFunction)(void (*)(void))py_bcast, METH_FASTCALL,
     "bcast(handle, rank, size, buf, root) -> buf or NotImplemented"},
    {"allgather", (PyCFunction)(void (*)(void))py_allgather, METH_FASTCALL,
     "allgather(handle, size, buf, out) -> out or NotImplemented"},
    {"barrier", py_barrier, METH_O, "barrier(handle) -> None or NotImplemented"},
    {"send", (PyCFunction)(void (*)(void))py_send, METH_FASTCALL,
     "send(handle, size, buf, dest, tag) -> None or NotImplemented"},
    {"recv", (PyCFunction)(void (*)(void))py_recv, METH_FASTCALL,
     "recv(handle, size, buf, source, tag) -> buf or NotImplemented"},
    {"reduce_scatter", (PyCFunction)(void (*)(void))py_reduce_scatter, METH_FASTCALL,
     "reduce_scatter(handle, size, buf, op, out) -> out or NotImplemented"},
    {"alltoall", (PyCFunction)(void (*)(void))py_alltoall, METH_FASTCALL,
     "alltoall(handle, size, buf, out) -> out or NotImplemented"},
    {"gather", (PyCFunction)(void (*)(void))py_gather, METH_FASTCALL,
     "gather(handle, rank, size, buf, root, out) -> out (root), None, or NotImplemented"},
    {"scatter", (PyCFunction)(void (*)(void))py_scatter, METH_FASTCALL,
     "scatter(handle, rank, size, buf, root, out) -> out or NotImplemented"},
    {"iallreduce", (PyCFunction)(void (*)(void))py_iallreduce, METH_FASTCALL,
     "iallreduce(handle, buf, op, out) -> (request, hold) or NotImplemented"},
    {"ibcast", (PyCFunction)(void (*)(void))py_ibcast, METH_FASTCALL,
     "ibcast(handle, rank, size, buf, root) -> (request, hold) or NotImplemented"},
    {"iallgather", (PyCFunction)(void (*)(void))py_iallgather, METH_FASTCALL,
     "iallgather(handle, size, buf, out) -> (request, hold) or NotImplemented"},
    {"isend", (PyCFunction)(void (*)(void))py_isend, METH_FASTCALL,
     "isend(handle, size, buf, dest, tag) -> (request, hold) or NotImplemented"},
    {"irecv", (PyCFunction)(void (*)(void))py_irecv, METH_FASTCALL,
     "irecv(handle, size, buf, source, tag) -> (request, hold) or NotImplemented"},
    {"wait", (PyCFunction)(void (*)(void))py_wait, METH_FASTCALL,
     "wait(request, want_source) -> (status, source): waits, then frees the request"},
    {"test", (PyCFunction)(void (*)(void))py_test, METH_FASTCALL,
     "test(request, want_source) -> (status, done, source): frees the request once done"},
    {"dtype_of", py_dtype_of, METH_VARARGS,
     "dtype_of(format, itemsize): the weft dtype of a buffer format, -1 if none"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "weft._core",
    .m_doc = "The compiled hot path of weft's blocking calls, and of iallreduce, ibcast, "
             "iallgather, isend and irecv, on numpy arrays (see comm.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__core(void)
{
    if (PyType_Ready(&hold_type) < 0)
        return NULL;
    return PyModule_Create(&module);
}
