"""Communicators, collectives and requests.

Lifetime: the package holds one weft_init reference, taken on first use and
released at interpreter exit after every live request is freed and every
live communicator destroyed. A destroyed communicator, or one used after
exit started, raises weft.Error(ERR_INVALID_ARG / ERR_NOT_INITIALIZED)
without calling C.

Buffers of an operation (and of a nonblocking one until it completes) are
referenced by its Request. Freeing an unfinished request (Request.free, or
dropping it) calls weft_request_free: the operation finishes on its own, so
its buffers are handed to the communicator's family (the communicators
split or duplicated from one another) and released when all of them are
destroyed, when weft has cancelled whatever was left.

A communicator, like in C, is driven by one thread at a time. The GIL is
released during each call.

The blocking calls on numpy arrays that weft._core (the compiled module,
_core.c) handles -- allreduce, reduce, bcast, barrier, send, recv, and
allgather, reduce_scatter, alltoall, gather and scatter out of place with
out= given -- go through it in one C call, and so do the starts of
iallreduce, ibcast, iallgather (out= given), isend and irecv (the Request
then holds the buffers, exported,
until the operation completes); everything else, and every
argument it does not take (it returns NotImplemented), goes through ctypes
here, which is also where every error is worded. WEFT_PYTHON_EXT=0 in the
environment at import turns the compiled path off.
"""
import atexit
import ctypes
import os
import threading
import weakref

import numpy as np

from . import _lib
from ._buffer import allocate, resolve
from ._lib import IN_PLACE, Error, Op, Status, check, lib

__all__ = ["Comm", "Request", "waitall", "get_unique_id", "parse_op"]

_NULL = None
_state_lock = threading.Lock()
_state = {"initialized": False, "finalized": False}
_live_comms = weakref.WeakSet()
_live_requests = weakref.WeakSet()


def _acquire():
    """weft_init once, on first use; finalized at exit."""
    with _state_lock:
        if _state["finalized"]:
            raise Error(Status.ERR_NOT_INITIALIZED, "weft was finalized (interpreter exit)")
        if not _state["initialized"]:
            check(lib.weft_init(), "weft_init")
            _state["initialized"] = True
            atexit.register(_finalize)


def _finalize():
    with _state_lock:
        if not _state["initialized"] or _state["finalized"]:
            return
        for release in [r.free for r in list(_live_requests)] + \
                [c.destroy for c in list(_live_comms)]:
            try:
                release()
            except Error:  # a handle C no longer knows: nothing left to release
                pass
        _state["finalized"] = True
        lib.weft_finalize()


def _usable():
    return _state["initialized"] and not _state["finalized"]


_OP_NAMES = {}
for _o in Op:
    _OP_NAMES[_o.name] = _OP_NAMES[_o.name.lower()] = _o


def parse_op(op):
    """weft.Op from an Op, its int value, or a name ('sum', 'MAX', ...)."""
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        if op in _OP_NAMES:
            return _OP_NAMES[op]
        try:
            return Op[op.upper()]
        except KeyError:
            pass
    elif isinstance(op, int) and not isinstance(op, bool):
        try:
            return Op(op)
        except ValueError:
            pass
    raise ValueError("weft: unknown op %r (one of %s)"
                     % (op, ", ".join(o.name.lower() for o in Op)))


def get_unique_id():
    """weft_get_unique_id: starts the bootstrap root in this process (which
    must then join with Comm.init_rank and stay alive); returns the id's
    128 bytes, to be given to every rank."""
    _acquire()
    uid = _lib._UniqueId()
    check(lib.weft_get_unique_id(ctypes.byref(uid)), "weft_get_unique_id")
    return bytes(uid.internal)


_CALLS = ["allreduce", "reduce", "bcast", "allgather", "allgatherv", "reduce_scatter",
          "reduce_scatter_v", "alltoall", "alltoallv", "gather", "scatter", "send", "recv"]
_BLOCKING = {name: getattr(lib, "weft_" + name) for name in _CALLS}
_NONBLOCKING = {name: getattr(lib, "weft_i" + name) for name in _CALLS}


def _bind_core():
    """weft._core bound to the functions of the libweft _lib loaded; None
    when it was not built or WEFT_PYTHON_EXT=0."""
    if os.environ.get("WEFT_PYTHON_EXT", "1") == "0":
        return None
    try:
        from . import _core as core
    except ImportError:
        return None
    names = ("allreduce", "reduce", "bcast", "allgather", "barrier", "send", "recv",
             "reduce_scatter", "alltoall", "gather", "scatter", "iallreduce", "isend", "irecv",
             "wait", "request_source", "request_free", "ibcast", "iallgather", "test")
    addresses = {"weft_" + n: ctypes.cast(getattr(lib, "weft_" + n), ctypes.c_void_p).value
                 for n in names}
    ops = {name: int(o) for name, o in _OP_NAMES.items()}
    ops.update({int(o): int(o) for o in Op})
    core.bind(addresses, np.ndarray, ops, check)  # check raises weft.Error for a status
    return core


_core = _bind_core()
extension = None if _core is None else _core.__file__


def _size_array(values, n, what):
    """A C size_t[n] from a sequence of non-negative ints."""
    vals = list(values)
    if len(vals) != n:
        raise ValueError("weft: %s has %d entries, the communicator has %d ranks"
                         % (what, len(vals), n))
    for i, v in enumerate(vals):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError("weft: %s[%d] = %r is not a non-negative integer" % (what, i, v))
    vals = [int(v) for v in vals]
    return (ctypes.c_size_t * n)(*vals), vals


def _packed(counts):
    displs, at = [], 0
    for c in counts:
        displs.append(at)
        at += c
    return displs


def _extent(counts, displs):
    return max([d + c for c, d in zip(counts, displs)] + [0])


def _same_dtype(a, b):
    if a.dtype != b.dtype:
        raise TypeError("weft: out has dtype %s but the input has %s"
                        % (a.dtype.name.lower(), b.dtype.name.lower()))


def _flat_view(buf, n):
    """The first n elements of buf as the result (a view for numpy)."""
    if isinstance(buf.obj, np.ndarray):
        return buf.obj.reshape(-1)[:n]
    return buf.obj


def _block_shape(b, size):
    """Shape of one rank's block of b: split the first axis when it divides."""
    if len(b.shape) >= 1 and b.shape[0] % size == 0:
        return (b.shape[0] // size,) + tuple(b.shape[1:])
    return (b.count // size,)


class _Family:
    """Communicators made from one another share a transport; buffers of
    freed unfinished requests live until all of them are destroyed."""

    def __init__(self):
        self.live = 0
        self.orphans = []

    def enter(self):
        self.live += 1

    def leave(self):
        self.live -= 1
        if self.live == 0:
            self.orphans.clear()


class _Call:
    """A validated operation: the C function's name (without the weft_
    prefix), its arguments, what to keep alive, and the result."""

    __slots__ = ("name", "args", "keep", "result")

    def __init__(self, name, args, keep, result):
        self.name, self.args, self.keep, self.result = name, args, keep, result

    def _retarget(self, name, root):
        """This allreduce call reused for reduce on root: the same buffers
        plus the root argument."""
        return _Call(name, self.args + (root,), self.keep, self.result)


class Request:
    """A started nonblocking operation. wait() returns its result (what the
    blocking form returns) or raises weft.Error; test() returns True once it
    is complete (raising its error, if any). Once complete the C request is
    freed; dropping or free()-ing an unfinished one lets it finish on its
    own (see the module's docstring)."""

    def __init__(self, comm, handle, call):
        self._comm = comm
        self._handle = handle
        self._keep = call.keep
        self._result = call.result
        self._error = None
        self._freed = False
        self._is_recv = call.name == "recv"
        self._source = None
        _live_requests.add(self)

    def _settle(self, status, call):
        if status == Status.OK and self._is_recv and self._handle is not None:
            src = ctypes.c_int(-1)
            check(lib.weft_request_source(self._handle, ctypes.byref(src)),
                  "weft_request_source")
            self._source = src.value
        self._release_handle()
        self._keep = None
        if status != Status.OK:
            try:
                check(status, call)
            except Error as e:
                self._error = e

    def _release_handle(self):
        if self._handle is not None and _usable():
            lib.weft_request_free(self._handle)
        self._handle = None

    @property
    def done(self):
        """True once complete (or freed)."""
        return self._handle is None

    @property
    def source(self):
        """A completed receive: the rank its message came from (the source
        given, or the sender when it was weft.ANY_SOURCE); else None."""
        return self._source

    def _check_not_freed(self):
        if self._freed:
            raise Error(Status.ERR_INVALID_ARG, "the request was freed before it completed")

    def test(self):
        self._check_not_freed()
        if self._handle is not None and _core is not None and _usable():
            # tests, and once done reads the sender and frees, in one C call
            status, done, src = _core.test(self._handle, self._is_recv)
            if not done:
                return False
            self._handle = None
            if status == Status.OK and self._is_recv:
                self._source = src
            self._settle(status, "weft_test")
        elif self._handle is not None:
            flag = ctypes.c_int(0)
            status = lib.weft_test(self._handle, ctypes.byref(flag))
            if not flag.value and status == Status.OK:
                return False
            self._settle(status, "weft_test")
        if self._error is not None:
            raise self._error
        return True

    def wait(self):
        self._check_not_freed()
        if self._handle is not None and _core is not None and _usable():
            # waits, reads the sender and frees the request in one C call
            status, src = _core.wait(self._handle, self._is_recv)
            self._handle = None
            if status == Status.OK and self._is_recv:
                self._source = src
            self._settle(status, "weft_wait")
        elif self._handle is not None:
            self._settle(lib.weft_wait(self._handle), "weft_wait")
        if self._error is not None:
            raise self._error
        return self._result

    def free(self):
        """weft_request_free: an unfinished operation completes on its own;
        its buffers stay referenced by the communicator's family."""
        if self._handle is None:
            return
        if self._keep is not None and self._comm._family is not None:
            self._comm._family.orphans.append(self._keep)
        self._keep = None
        self._freed = True
        self._release_handle()

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter teardown
            pass


def waitall(requests):
    """Wait for every request; the results in order, or the first error
    (raised after all of them have completed)."""
    results, first = [], None
    for r in requests:
        try:
            results.append(r.wait())
        except Error as e:
            first = first or e
            results.append(None)
    if first is not None:
        raise first
    return results


class Comm:
    """A weft communicator. Make one with Comm.world(), Comm.from_mpi4py(),
    Comm.init_rank(), or split()/dup() of another; destroy() it (or use it
    as a context manager). Collectives take numpy arrays (or
    __cuda_array_interface__ / DLPack objects); see README.md for the in
    place and output rules."""

    def __init__(self, handle, family):
        self._handle = handle
        self._family = family
        family.enter()
        rank, size = ctypes.c_int(), ctypes.c_int()
        check(lib.weft_comm_rank(handle, ctypes.byref(rank)), "weft_comm_rank")
        check(lib.weft_comm_size(handle, ctypes.byref(size)), "weft_comm_size")
        self.rank, self.size = rank.value, size.value
        _live_comms.add(self)

    # -- construction ---------------------------------------------------

    @classmethod
    def world(cls):
        """weft_comm_world: the job's processes (PMIx under mpirun/srun, else
        WEFT_UNIQUE_ID/WEFT_RANK/WEFT_NRANKS, else this process alone).
        Collective over the job; each call makes a new communicator."""
        _acquire()
        h = ctypes.c_void_p()
        check(lib.weft_comm_world(ctypes.byref(h)), "weft_comm_world")
        return cls(h.value, _Family())

    @classmethod
    def init_rank(cls, nranks, unique_id, rank):
        """weft_comm_init_rank with the bytes of get_unique_id()."""
        _acquire()
        if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != _lib.UNIQUE_ID_BYTES:
            raise ValueError("weft: unique_id must be the %d bytes of weft.get_unique_id()"
                             % _lib.UNIQUE_ID_BYTES)
        uid = _lib._UniqueId()
        ctypes.memmove(uid.internal, bytes(unique_id), _lib.UNIQUE_ID_BYTES)
        h = ctypes.c_void_p()
        check(lib.weft_comm_init_rank(int(nranks), ctypes.byref(uid), int(rank),
                                      ctypes.byref(h)), "weft_comm_init_rank")
        return cls(h.value, _Family())

    @classmethod
    def from_mpi4py(cls, mpicomm):
        """The ranks of an mpi4py intracommunicator, in its rank order: rank
        0 makes a unique id, mpi4py broadcasts it, every rank joins.
        Collective over mpicomm."""
        if getattr(mpicomm, "Is_inter", lambda: False)():
            raise TypeError("weft: from_mpi4py needs an intracommunicator")
        rank, size = mpicomm.Get_rank(), mpicomm.Get_size()
        uid = None
        if rank == 0:
            try:
                uid = get_unique_id()
            except Error as e:  # the others must not wait for an id forever
                uid = e
        uid = mpicomm.bcast(uid, root=0)
        if isinstance(uid, Error):
            raise Error(uid.status, "rank 0 of the mpi4py communicator: " + uid.message)
        return cls.init_rank(size, uid, rank)

    def split(self, color, key=None):
        """weft_comm_split (collective): ranks with the same color form a new
        communicator ordered by key (default: this rank), then rank. A
        negative color joins none and returns None."""
        h = ctypes.c_void_p()
        key = self.rank if key is None else key
        check(lib.weft_comm_split(self._live(), int(color), int(key), ctypes.byref(h)),
              "weft_comm_split")
        return None if h.value is None else Comm(h.value, self._family)

    def dup(self):
        """weft_comm_dup (collective): same ranks, separate matching."""
        h = ctypes.c_void_p()
        check(lib.weft_comm_dup(self._live(), ctypes.byref(h)), "weft_comm_dup")
        return Comm(h.value, self._family)

    def stats(self):
        """weft_stats: the counters of this communicator's collectives
        (WEFT_STATS=1; empty without it), one dict per collective and size
        bucket: collective, bucket_lo, bucket_hi (bytes, [lo, hi)), calls,
        bytes, seconds, busbw_gbs. Call it while no operation is running."""
        n = ctypes.c_size_t()
        check(lib.weft_stats(self._live(), None, 0, ctypes.byref(n)), "weft_stats")
        entries = (_lib.StatsEntry * max(n.value, 1))()
        check(lib.weft_stats(self._live(), entries, n.value, ctypes.byref(n)), "weft_stats")
        return [{f: (getattr(e, f).decode() if f == "collective" else getattr(e, f))
                 for f, _ in _lib.StatsEntry._fields_} for e in entries[:n.value]]

    def reset_stats(self):
        """weft_stats_reset: start counting again from zero."""
        check(lib.weft_stats_reset(self._live()), "weft_stats_reset")

    def set_timeout(self, seconds):
        """weft_comm_set_timeout: the deadline in seconds of this
        communicator's waits from now on (0: WEFT_TIMEOUT's,
        float("inf"): none)."""
        check(lib.weft_comm_set_timeout(self._live(), float(seconds)), "weft_comm_set_timeout")

    def set_reproducible(self, on):
        """weft_comm_set_reproducible: reductions started from now on give
        the same bits whatever the algorithm and placement (True), or not
        (False); every rank must set the same. Starts as WEFT_REPRODUCIBLE
        says; split and dup communicators start with their parent's."""
        if not isinstance(on, (bool, int, np.integer)) or int(on) not in (0, 1):
            raise ValueError("weft: set_reproducible(%r): True or False" % (on,))
        check(lib.weft_comm_set_reproducible(self._live(), int(on)),
              "weft_comm_set_reproducible")

    def abort(self):
        """weft_comm_abort: pending and later operations fail with
        ERR_ABORTED; the communicator must still be destroyed."""
        check(lib.weft_comm_abort(self._live()), "weft_comm_abort")

    def destroy(self):
        """weft_comm_destroy (local, not collective); idempotent."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        _live_comms.discard(self)
        try:
            if _usable():
                check(lib.weft_comm_destroy(handle), "weft_comm_destroy")
        finally:
            self._family.leave()

    @property
    def destroyed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # interpreter teardown
            pass

    def __repr__(self):
        return "<weft.Comm rank %d of %d%s>" % (self.rank, self.size,
                                               ", destroyed" if self.destroyed else "")

    def _live(self):
        if not _usable():
            raise Error(Status.ERR_NOT_INITIALIZED, "weft was finalized (interpreter exit)")
        if self._handle is None:
            raise Error(Status.ERR_INVALID_ARG, "the communicator was destroyed")
        return self._handle

    # -- running a validated call ---------------------------------------

    def _run(self, call):
        fn = _BLOCKING[call.name]
        status = fn(*call.args, self._live())
        if status:
            check(status, fn.__name__)
        return call.result

    def _start(self, call):
        req = ctypes.c_void_p()
        fn = _NONBLOCKING[call.name]
        status = fn(*call.args, self._live(), ctypes.byref(req))
        if status:
            check(status, fn.__name__)
        return Request(self, req.value, call)

    def _started(self, name, started, result):
        """The Request of an operation weft._core started: (request handle,
        the object that holds its buffers exported until it completes)."""
        handle, hold = started
        return Request(self, handle, _Call(name, (), [hold], result))

    def _root(self, root):
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)) \
                or not 0 <= root < self.size:
            raise ValueError("weft: root %r is not a rank of this communicator (0..%d)"
                             % (root, self.size - 1))
        return int(root)

    def _peer(self, peer, tag, any_ok=False):
        """any_ok: peer may be weft.ANY_SOURCE (the receives)."""
        if isinstance(peer, bool) or not isinstance(peer, (int, np.integer)) \
                or not (0 <= peer < self.size or (any_ok and peer == _lib.ANY_SOURCE)):
            raise ValueError("weft: peer %r is not a rank of this communicator (0..%d)"
                             % (peer, self.size - 1))
        if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) \
                or not 0 <= tag <= _lib.TAG_UB:
            raise ValueError("weft: tag %r is not in 0..%d" % (tag, _lib.TAG_UB))
        return int(peer), int(tag)

    def _divide(self, b, what):
        if b.count % self.size:
            raise ValueError("weft: %s has %d elements, not a multiple of the %d ranks"
                             % (what, b.count, self.size))
        return b.count // self.size

    @staticmethod
    def _out(out, like, count, what="out"):
        o = resolve(out, what, write=True)
        _same_dtype(o, like)
        if o.count != count:
            raise ValueError("weft: %s has %d elements, %d expected" % (what, o.count, count))
        return o

    @staticmethod
    def _device_check(*bufs):
        """Device memory goes to C only when libweft knows it as device memory
        (weft_mem_type: CUDA with the CUDA backend, or emu); otherwise libweft
        would read the pointer as host memory."""
        for b in bufs:
            if b is None or not b.device:
                continue
            if not hasattr(lib, "weft_mem_type"):
                raise Error(Status.ERR_UNSUPPORTED, "device buffers need libweft's device "
                            "layer, which this libweft (%s) does not have" % _lib.library_path)
            mt = ctypes.c_int(0)
            st = lib.weft_mem_type(ctypes.c_void_p(b.ptr), ctypes.byref(mt))
            if st != 0 or mt.value == 0:  # WEFT_MEM_HOST: no backend claims the pointer
                raise Error(Status.ERR_UNSUPPORTED, "device buffer at %#x: no device backend of "
                            "this libweft (%s) knows it (a CUDA buffer needs the CUDA backend "
                            "and a GPU)" % (b.ptr or 0, _lib.library_path))

    # -- collectives: each _x builds the call for x and ix ----------------

    def _allreduce(self, buf, op, out):
        op = parse_op(op)
        if out is None or out is buf:
            b = resolve(buf, "buf", write=True)
            self._device_check(b)
            return _Call("allreduce", (IN_PLACE, b.ptr, b.count, b.dtype, op), [b.keep], buf)
        b = resolve(buf, "buf")
        o = self._out(out, b, b.count)
        self._device_check(b, o)
        return _Call("allreduce", (b.ptr, o.ptr, b.count, b.dtype, op), [b.keep, o.keep], out)

    def _reduce(self, buf, op, root, out):
        op, root = parse_op(op), self._root(root)
        if self.rank != root:
            b = resolve(buf, "buf")
            self._device_check(b)
            return _Call("reduce", (b.ptr, _NULL, b.count, b.dtype, op, root), [b.keep], None)
        return self._allreduce(buf, op, out)._retarget("reduce", root)

    def _bcast(self, buf, root):
        root = self._root(root)
        b = resolve(buf, "buf", write=self.rank != root)
        self._device_check(b)
        return _Call("bcast", (b.ptr, b.count, b.dtype, root), [b.keep], buf)

    def _allgather(self, buf, out, inplace):
        if inplace:
            b = resolve(buf, "buf", write=True)
            n = self._divide(b, "buf (in place: the whole result)")
            self._device_check(b)
            return _Call("allgather", (IN_PLACE, b.ptr, n, b.dtype), [b.keep], buf)
        b = resolve(buf, "buf")
        if out is None:
            out = allocate(b, (self.size,) + tuple(b.shape), "buf")
        o = self._out(out, b, b.count * self.size)
        self._device_check(b, o)
        return _Call("allgather", (b.ptr, o.ptr, b.count, b.dtype), [b.keep, o.keep], out)

    def _allgatherv(self, buf, counts, displs, out, inplace):
        c_counts, counts = _size_array(counts, self.size, "counts")
        if displs is None:
            displs = _packed(counts)
        c_displs, displs = _size_array(displs, self.size, "displs")
        extent = _extent(counts, displs)
        mine = counts[self.rank]
        if inplace:
            b = resolve(buf, "buf", write=True)
            if b.count < extent:
                raise ValueError("weft: buf has %d elements, counts/displs reach %d"
                                 % (b.count, extent))
            self._device_check(b)
            return _Call("allgatherv", (IN_PLACE, b.ptr, mine, c_counts, c_displs, b.dtype),
                         [b.keep, c_counts, c_displs], buf)
        b = resolve(buf, "buf")
        if b.count != mine:
            raise ValueError("weft: buf has %d elements, counts[%d] is %d"
                             % (b.count, self.rank, mine))
        if out is None:
            out = allocate(b, (extent,), "buf")
        o = resolve(out, "out", write=True)
        _same_dtype(o, b)
        if o.count < extent:
            raise ValueError("weft: out has %d elements, counts/displs reach %d"
                             % (o.count, extent))
        self._device_check(b, o)
        return _Call("allgatherv", (b.ptr, o.ptr, mine, c_counts, c_displs, b.dtype),
                     [b.keep, o.keep, c_counts, c_displs], out)

    def _reduce_scatter(self, buf, op, out, inplace):
        op = parse_op(op)
        b = resolve(buf, "buf", write=inplace)
        n = self._divide(b, "buf")
        if inplace:
            self._device_check(b)
            return _Call("reduce_scatter", (IN_PLACE, b.ptr, n, b.dtype, op), [b.keep],
                         _flat_view(b, n))
        if out is None:
            out = allocate(b, _block_shape(b, self.size), "buf")
        o = self._out(out, b, n)
        self._device_check(b, o)
        return _Call("reduce_scatter", (b.ptr, o.ptr, n, b.dtype, op), [b.keep, o.keep], out)

    def _reduce_scatter_v(self, buf, counts, op, out, inplace):
        op = parse_op(op)
        c_counts, counts = _size_array(counts, self.size, "counts")
        total, mine = sum(counts), counts[self.rank]
        b = resolve(buf, "buf", write=inplace)
        if b.count != total:
            raise ValueError("weft: buf has %d elements, the counts add up to %d"
                             % (b.count, total))
        if inplace:
            self._device_check(b)
            return _Call("reduce_scatter_v", (IN_PLACE, b.ptr, c_counts, b.dtype, op),
                         [b.keep, c_counts], _flat_view(b, mine))
        if out is None:
            out = allocate(b, (mine,), "buf")
        o = self._out(out, b, mine)
        self._device_check(b, o)
        return _Call("reduce_scatter_v", (b.ptr, o.ptr, c_counts, b.dtype, op),
                     [b.keep, o.keep, c_counts], out)

    def _alltoall(self, buf, out):
        if out is None or out is buf:
            b = resolve(buf, "buf", write=True)
            n = self._divide(b, "buf")
            self._device_check(b)
            return _Call("alltoall", (IN_PLACE, b.ptr, n, b.dtype), [b.keep], buf)
        b = resolve(buf, "buf")
        n = self._divide(b, "buf")
        o = self._out(out, b, b.count)
        self._device_check(b, o)
        return _Call("alltoall", (b.ptr, o.ptr, n, b.dtype), [b.keep, o.keep], out)

    def _alltoallv(self, buf, sendcounts, recvcounts, sdispls, rdispls, out):
        c_sc, sendcounts = _size_array(sendcounts, self.size, "sendcounts")
        c_rc, recvcounts = _size_array(recvcounts, self.size, "recvcounts")
        c_sd, sdispls = _size_array(_packed(sendcounts) if sdispls is None else sdispls,
                                    self.size, "sdispls")
        c_rd, rdispls = _size_array(_packed(recvcounts) if rdispls is None else rdispls,
                                    self.size, "rdispls")
        if out is None or out is buf:
            if sendcounts != recvcounts or sdispls != rdispls:
                raise ValueError("weft: alltoallv in place (out=None) needs sendcounts == "
                                 "recvcounts and sdispls == rdispls")
            b = resolve(buf, "buf", write=True)
            if b.count < _extent(recvcounts, rdispls):
                raise ValueError("weft: buf has %d elements, recvcounts/rdispls reach %d"
                                 % (b.count, _extent(recvcounts, rdispls)))
            self._device_check(b)
            return _Call("alltoallv", (IN_PLACE, b.ptr, c_sc, c_sd, c_rc, c_rd, b.dtype),
                         [b.keep, c_sc, c_sd, c_rc, c_rd], buf)
        b = resolve(buf, "buf")
        o = resolve(out, "out", write=True)
        _same_dtype(o, b)
        for x, name, counts, displs in ((b, "buf", sendcounts, sdispls),
                                        (o, "out", recvcounts, rdispls)):
            if x.count < _extent(counts, displs):
                raise ValueError("weft: %s has %d elements, its counts/displs reach %d"
                                 % (name, x.count, _extent(counts, displs)))
        self._device_check(b, o)
        return _Call("alltoallv", (b.ptr, o.ptr, c_sc, c_sd, c_rc, c_rd, b.dtype),
                     [b.keep, o.keep, c_sc, c_sd, c_rc, c_rd], out)

    def _gather(self, buf, root, out, inplace):
        root = self._root(root)
        if self.rank != root:
            b = resolve(buf, "buf")
            self._device_check(b)
            return _Call("gather", (b.ptr, _NULL, b.count, b.dtype, root), [b.keep], None)
        if inplace:
            b = resolve(buf, "buf", write=True)
            n = self._divide(b, "buf (in place on root: the whole result)")
            self._device_check(b)
            return _Call("gather", (IN_PLACE, b.ptr, n, b.dtype, root), [b.keep], buf)
        b = resolve(buf, "buf")
        if out is None:
            out = allocate(b, (self.size,) + tuple(b.shape), "buf")
        o = self._out(out, b, b.count * self.size)
        self._device_check(b, o)
        return _Call("gather", (b.ptr, o.ptr, b.count, b.dtype, root), [b.keep, o.keep], out)

    def _scatter(self, buf, root, out, inplace):
        root = self._root(root)
        if self.rank != root:
            if out is None:
                raise ValueError("weft: scatter needs out= on the ranks other than root")
            o = resolve(out, "out", write=True)
            self._device_check(o)
            return _Call("scatter", (_NULL, o.ptr, o.count, o.dtype, root), [o.keep], out)
        b = resolve(buf, "buf")
        n = self._divide(b, "buf")
        if inplace:  # root's block stays where it is
            self._device_check(b)
            view = buf
            if isinstance(buf, np.ndarray):
                view = buf.reshape(-1)[root * n:(root + 1) * n]
            return _Call("scatter", (b.ptr, b.offset(root * n), n, b.dtype, root), [b.keep], view)
        if out is None:
            out = allocate(b, _block_shape(b, self.size), "buf")
        o = self._out(out, b, n)
        self._device_check(b, o)
        return _Call("scatter", (b.ptr, o.ptr, n, b.dtype, root), [b.keep, o.keep], out)

    def _send(self, buf, dest, tag):
        dest, tag = self._peer(dest, tag)
        b = resolve(buf, "buf")
        self._device_check(b)
        return _Call("send", (b.ptr, b.count, b.dtype, dest, tag), [b.keep], None)

    def _recv(self, buf, source, tag):
        source, tag = self._peer(source, tag, any_ok=True)
        b = resolve(buf, "buf", write=True)
        self._device_check(b)
        return _Call("recv", (b.ptr, b.count, b.dtype, source, tag), [b.keep], buf)

    # -- public blocking and nonblocking forms ---------------------------

    def allreduce(self, buf, op="sum", *, out=None):
        """Reduce buf over all ranks; result in out, or in buf (in place)."""
        if _core is not None:
            r = _core.allreduce(self._handle, buf, op, out)
            if r is not NotImplemented:
                return r
        return self._run(self._allreduce(buf, op, out))

    def iallreduce(self, buf, op="sum", *, out=None):
        if _core is not None:
            r = _core.iallreduce(self._handle, buf, op, out)
            if r is not NotImplemented:
                return self._started("allreduce", r, buf if out is None else out)
        return self._start(self._allreduce(buf, op, out))

    def reduce(self, buf, op="sum", root=0, *, out=None):
        """Result on root only (in out, or in place in buf); None elsewhere."""
        if _core is not None:
            r = _core.reduce(self._handle, self.rank, self.size, buf, op, root, out)
            if r is not NotImplemented:
                return r
        return self._run(self._reduce(buf, op, root, out))

    def ireduce(self, buf, op="sum", root=0, *, out=None):
        return self._start(self._reduce(buf, op, root, out))

    def bcast(self, buf, root=0):
        """root's buf into every rank's buf (in place)."""
        if _core is not None:
            r = _core.bcast(self._handle, self.rank, self.size, buf, root)
            if r is not NotImplemented:
                return r
        return self._run(self._bcast(buf, root))

    def ibcast(self, buf, root=0):
        if _core is not None:
            r = _core.ibcast(self._handle, self.rank, self.size, buf, root)
            if r is not NotImplemented:
                return self._started("bcast", r, buf)
        return self._start(self._bcast(buf, root))

    def allgather(self, buf, *, out=None, inplace=False):
        """Every rank's buf, in rank order: out (new (size, *buf.shape) array
        when None); inplace=True: buf is the whole result with this rank's
        block already at rank * (buf.size / size)."""
        if _core is not None and not inplace:
            r = _core.allgather(self._handle, self.size, buf, out)
            if r is not NotImplemented:
                return r
        return self._run(self._allgather(buf, out, inplace))

    def iallgather(self, buf, *, out=None, inplace=False):
        if _core is not None and not inplace:
            r = _core.iallgather(self._handle, self.size, buf, out)
            if r is not NotImplemented:
                return self._started("allgather", r, out)
        return self._start(self._allgather(buf, out, inplace))

    def allgatherv(self, buf, counts, displs=None, *, out=None, inplace=False):
        """Rank r's counts[r] elements land at displs[r] (default: packed)."""
        return self._run(self._allgatherv(buf, counts, displs, out, inplace))

    def iallgatherv(self, buf, counts, displs=None, *, out=None, inplace=False):
        return self._start(self._allgatherv(buf, counts, displs, out, inplace))

    def reduce_scatter(self, buf, op="sum", *, out=None, inplace=False):
        """Block r of the reduction of buf goes to rank r; inplace=True
        writes it to the front of buf and returns that view."""
        if _core is not None and not inplace:
            r = _core.reduce_scatter(self._handle, self.size, buf, op, out)
            if r is not NotImplemented:
                return r
        return self._run(self._reduce_scatter(buf, op, out, inplace))

    def ireduce_scatter(self, buf, op="sum", *, out=None, inplace=False):
        return self._start(self._reduce_scatter(buf, op, out, inplace))

    def reduce_scatter_v(self, buf, counts, op="sum", *, out=None, inplace=False):
        """As reduce_scatter with counts[r] elements for rank r."""
        return self._run(self._reduce_scatter_v(buf, counts, op, out, inplace))

    def ireduce_scatter_v(self, buf, counts, op="sum", *, out=None, inplace=False):
        return self._start(self._reduce_scatter_v(buf, counts, op, out, inplace))

    def alltoall(self, buf, *, out=None):
        """Block r of buf goes to rank r; result in out, or in buf."""
        if _core is not None:
            r = _core.alltoall(self._handle, self.size, buf, out)
            if r is not NotImplemented:
                return r
        return self._run(self._alltoall(buf, out))

    def ialltoall(self, buf, *, out=None):
        return self._start(self._alltoall(buf, out))

    def alltoallv(self, buf, sendcounts, recvcounts, sdispls=None, rdispls=None, *, out=None):
        """Per-rank counts and displacements (default packed); out=None is in
        place and needs sendcounts == recvcounts."""
        return self._run(self._alltoallv(buf, sendcounts, recvcounts, sdispls, rdispls, out))

    def ialltoallv(self, buf, sendcounts, recvcounts, sdispls=None, rdispls=None, *, out=None):
        return self._start(self._alltoallv(buf, sendcounts, recvcounts, sdispls, rdispls, out))

    def gather(self, buf, root=0, *, out=None, inplace=False):
        """Every rank's buf on root (out, or a new (size, *buf.shape) array);
        None elsewhere. inplace=True on root: buf is the whole result."""
        if _core is not None and not inplace:
            r = _core.gather(self._handle, self.rank, self.size, buf, root, out)
            if r is not NotImplemented:
                return r
        return self._run(self._gather(buf, root, out, inplace))

    def igather(self, buf, root=0, *, out=None, inplace=False):
        return self._start(self._gather(buf, root, out, inplace))

    def scatter(self, buf, root=0, *, out=None, inplace=False):
        """Block r of root's buf to rank r's out (required off root; buf is
        ignored there). inplace=True on root: root's block stays in buf."""
        if _core is not None and not inplace:
            r = _core.scatter(self._handle, self.rank, self.size, buf, root, out)
            if r is not NotImplemented:
                return r
        return self._run(self._scatter(buf, root, out, inplace))

    def iscatter(self, buf, root=0, *, out=None, inplace=False):
        return self._start(self._scatter(buf, root, out, inplace))

    def barrier(self):
        if _core is not None and _core.barrier(self._handle) is not NotImplemented:
            return
        check(lib.weft_barrier(self._live()), "weft_barrier")

    def ibarrier(self):
        req = ctypes.c_void_p()
        check(lib.weft_ibarrier(self._live(), ctypes.byref(req)), "weft_ibarrier")
        return Request(self, req.value, _Call("barrier", (), None, None))

    def send(self, buf, dest, tag=0):
        """weft_send; the receiver's buffer must have the same size."""
        if _core is not None:
            r = _core.send(self._handle, self.size, buf, dest, tag)
            if r is not NotImplemented:
                return r
        return self._run(self._send(buf, dest, tag))

    def isend(self, buf, dest, tag=0):
        if _core is not None:
            r = _core.isend(self._handle, self.size, buf, dest, tag)
            if r is not NotImplemented:
                return self._started("send", r, None)
        return self._start(self._send(buf, dest, tag))

    def recv(self, buf, source, tag=0):
        """weft_recv into buf (same element count as the send); returns buf.
        source weft.ANY_SOURCE takes the first message with the tag from any
        rank (irecv's Request.source then says whose)."""
        if _core is not None:
            r = _core.recv(self._handle, self.size, buf, source, tag)
            if r is not NotImplemented:
                return r
        return self._run(self._recv(buf, source, tag))

    def irecv(self, buf, source, tag=0):
        if _core is not None:
            r = _core.irecv(self._handle, self.size, buf, source, tag)
            if r is not NotImplemented:
                return self._started("recv", r, buf)
        return self._start(self._recv(buf, source, tag))

