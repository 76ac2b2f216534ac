"""weft._core, the compiled path of the blocking calls on numpy arrays:
built and bound when expected, its dtype mapping, the calls it handles
giving the ctypes path's results, and everything it declines
(NotImplemented, nothing sent) left to the ctypes path, which words the
errors. Runs alone and under mpirun; skipped where the package has no
compiled module, unless WEFT_EXPECT_EXTENSION=1 (then that fails).
"""
import os
import time

import numpy as np
import pytest

import weft
from weft import comm as _comm

from conftest import data, expected_reduce, same

core = _comm._core
needs_core = pytest.mark.skipif(core is None, reason="weft was imported without weft._core "
                                "(source tree, or WEFT_PYTHON_EXT=0)")


def test_extension_present_when_expected():
    if os.environ.get("WEFT_EXPECT_EXTENSION") != "1":
        pytest.skip("WEFT_EXPECT_EXTENSION is not 1")
    assert weft.extension is not None and os.path.exists(weft.extension)
    assert core is not None


@needs_core
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
                                np.float16, np.float32, np.float64, np.longlong, np.ulonglong,
                                np.intc, np.uintc], ids=lambda d: np.dtype(d).char)
def test_buffer_formats_map_to_the_weft_dtype(dt):
    view = memoryview(np.zeros(3, dt))
    assert core.dtype_of(view.format, view.itemsize) == int(weft.weft_dtype(dt))


@needs_core
@pytest.mark.parametrize("dt", [np.int16, np.uint16, np.bool_, np.complex64, np.float128],
                         ids=lambda d: np.dtype(d).name)
def test_formats_weft_lacks_are_declined(dt):
    view = memoryview(np.zeros(3, dt))
    assert core.dtype_of(view.format, view.itemsize) == -1
    assert core.dtype_of(">f", 4) == -1 and core.dtype_of("ff", 4) == -1


@needs_core
def test_handled_calls_match_the_ctypes_path(comm):
    """Each call the module takes returns the ctypes path's result."""
    p, me, h = comm.size, comm.rank, comm._handle
    for dt in (np.int32, np.float64, np.uint8, np.float16):
        x = data(dt, 37, me)
        expect = expected_reduce(dt, 37, p, "max")
        out = np.empty_like(x)
        assert core.allreduce(h, x, "max", out) is out
        same(out, expect)
        ref = comm._run(comm._allreduce(x, "max", np.empty_like(x)))
        same(ref, out)
        y = x.copy()
        assert core.allreduce(h, y, weft.Op.MAX, None) is y  # in place, by weft.Op
        same(y, expect)
    x = data(np.int64, 16, me)
    root = p - 1
    r = core.reduce(h, me, p, x, 0, root, np.empty_like(x))  # op by int
    if me == root:
        same(r, expected_reduce(np.int64, 16, p, "sum"))
    else:
        assert r is None
    b = data(np.float32, 9, me) if me == 0 else np.zeros(9, np.float32)
    assert core.bcast(h, me, p, b, 0) is b
    same(b, data(np.float32, 9, 0))
    g = np.empty((p, 5), np.int32)
    assert core.allgather(h, p, data(np.int32, 5, me), g) is g
    same(g, np.stack([data(np.int32, 5, r) for r in range(p)]))
    assert core.barrier(h) is None
    # reduce_scatter, alltoall, gather, scatter with out= given
    rs = np.empty(3, np.int32)
    assert core.reduce_scatter(h, p, data(np.int32, 3 * p, me), "sum", rs) is rs
    same(rs, expected_reduce(np.int32, 3 * p, p, "sum")[3 * me:3 * me + 3])
    same(rs, comm._run(comm._reduce_scatter(data(np.int32, 3 * p, me), "sum",
                                            np.empty(3, np.int32), False)))
    a2a = np.empty(4 * p, np.float64)
    assert core.alltoall(h, p, data(np.float64, 4 * p, me), a2a) is a2a
    same(a2a, np.concatenate([data(np.float64, 4 * p, r)[4 * me:4 * me + 4] for r in range(p)]))
    root = p // 2
    gat = np.empty(6 * p, np.uint8)
    r = core.gather(h, me, p, data(np.uint8, 6, me), root, gat)
    if me == root:
        assert r is gat
        same(gat, np.concatenate([data(np.uint8, 6, q) for q in range(p)]))
    else:
        assert r is None
    sc = np.empty(5, np.float16)
    src = data(np.float16, 5 * p, root) if me == root else None
    assert core.scatter(h, me, p, src, root, sc) is sc
    same(sc, data(np.float16, 5 * p, root)[5 * me:5 * me + 5])
    if p > 1:
        peer = me ^ 1
        if peer < p:
            s, rv = data(np.uint64, 7, me), np.zeros(7, np.uint64)
            if me % 2 == 0:
                assert core.send(h, p, s, peer, 3) is None
                assert core.recv(h, p, rv, peer, 4) is rv
            else:
                assert core.recv(h, p, rv, peer, 3) is rv
                assert core.send(h, p, s, peer, 4) is None
            same(rv, data(np.uint64, 7, peer))
        comm.barrier()


@needs_core
def test_nonblocking_starts_match_the_ctypes_path(comm):
    """iallreduce, isend and irecv started by the module: a request handle
    and the object that keeps the buffers exported until the Request drops
    it; the Requests give the ctypes path's results and senders."""
    p, me, h = comm.size, comm.rank, comm._handle
    for dt in (np.int32, np.float64, np.uint8):
        x = data(dt, 37, me)
        started = core.iallreduce(h, x, "max", np.empty_like(x))
        assert isinstance(started, tuple) and len(started) == 2
        assert isinstance(started[0], int) and type(started[1]).__name__ == "Hold"
        call = _comm._Call("allreduce", (), [started[1]], None)
        _comm.Request(comm, started[0], call).wait()
        out = np.empty_like(x)
        req = comm.iallreduce(x, "max", out=out)
        assert req._keep is not None and type(req._keep[0]).__name__ == "Hold"
        assert req.wait() is out
        assert req._keep is None  # the buffers released once complete
        same(out, expected_reduce(dt, 37, p, "max"))
        same(out, comm._run(comm._allreduce(x, "max", np.empty_like(x))))
        y = x.copy()
        assert comm.iallreduce(y, weft.Op.MAX).wait() is y  # in place
        same(y, out)
    if p > 1:
        # every rank sends to rank 0, which takes them from any source
        if me == 0:
            bufs = [np.zeros(5, np.int64) for _ in range(p - 1)]
            reqs = [comm.irecv(b, weft.ANY_SOURCE, 6) for b in bufs]
            assert all(type(r._keep[0]).__name__ == "Hold" for r in reqs)
            got = {}
            for r, b in zip(reqs, bufs):
                assert r.wait() is b
                got[r.source] = b.copy()
            assert sorted(got) == list(range(1, p))
            for q, b in got.items():
                same(b, data(np.int64, 5, q))
        else:
            req = comm.isend(data(np.int64, 5, me), 0, 6)
            assert type(req._keep[0]).__name__ == "Hold"
            assert req.wait() is None and req.source is None
        comm.barrier()
    x = np.arange(8, dtype=np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    declined = [
        lambda: core.iallreduce(h, np.arange(16, dtype=np.float32)[::2], "sum", None),
        lambda: core.iallreduce(h, ro, "sum", None),
        lambda: core.iallreduce(h, x, "sum", np.empty(7, np.float32)),
        lambda: core.iallreduce(h, x, "nonsense", None),
        lambda: core.iallreduce(None, x, "sum", None),
        lambda: core.isend(h, p, x, p, 0),
        lambda: core.isend(h, p, x, weft.ANY_SOURCE, 0),            # no send to any
        lambda: core.irecv(h, p, x, -2, 0),
        lambda: core.irecv(h, p, ro, 0, 0),                          # read-only receive
        lambda: core.irecv(h, p, x, 0, weft.TAG_UB + 1),
        lambda: core.irecv(h, p, [1.0], 0, 0),
    ]
    for i, call in enumerate(declined):
        assert call() is NotImplemented, "case %d was handled" % i
    comm.barrier()


@needs_core
def test_nonblocking_bcast_allgather_compiled(comm):
    """ibcast and iallgather (out= given) started by the module: the ctypes
    path's results, the Hold released at completion, what it does not take
    declined before anything starts."""
    p, me, h = comm.size, comm.rank, comm._handle
    for dt in (np.int32, np.float32, np.uint64):
        for root in range(p):
            x = data(dt, 29, me)
            started = core.ibcast(h, me, p, x, root)
            assert isinstance(started, tuple) and type(started[1]).__name__ == "Hold"
            _comm.Request(comm, started[0], _comm._Call("bcast", (), [started[1]], None)).wait()
            same(x, data(dt, 29, root))
            y = data(dt, 29, me)
            req = comm.ibcast(y, root)
            assert type(req._keep[0]).__name__ == "Hold"
            assert req.wait() is y and req._keep is None
            same(y, data(dt, 29, root))
        x = data(dt, 13, me)
        out = np.empty((p, 13), dt)
        req = comm.iallgather(x, out=out)
        assert type(req._keep[0]).__name__ == "Hold"
        assert req.wait() is out and req._keep is None
        for q in range(p):
            same(out[q], data(dt, 13, q))
        same(out, comm.allgather(x))  # the blocking path agrees
    x = np.arange(8, dtype=np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    declined = [
        lambda: core.ibcast(h, me, p, x, p),                      # no such root
        lambda: core.ibcast(h, me, p, np.arange(16, dtype=np.float32)[::2], 0),
        lambda: core.ibcast(h, me, p, ro, (me + 1) % p if p > 1 else p),  # read-only receive
        lambda: core.ibcast(None, me, p, x, 0),
        lambda: core.iallgather(h, p, x, np.empty(8 * p + 1, np.float32)),
        lambda: core.iallgather(h, p, x, None),                   # out= not given
        lambda: core.iallgather(h, p, x, np.empty(8 * p, np.float64)),
    ]
    for i, call in enumerate(declined):
        assert call() is NotImplemented, "case %d was handled" % i
    comm.barrier()


class _Sub(np.ndarray):
    pass


@needs_core
def test_declined_arguments_send_nothing(comm):
    """What the module does not take comes back as NotImplemented before
    anything is sent (every rank declines, then one allreduce still
    matches), and the public call then words the error or computes it."""
    p, me, h = comm.size, comm.rank, comm._handle
    x = np.arange(8, dtype=np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    declined = [
        lambda: core.allreduce(h, np.arange(16, dtype=np.float32)[::2], "sum", None),
        lambda: core.allreduce(h, ro, "sum", None),                 # read-only, in place
        lambda: core.allreduce(h, x, "sum", ro),                    # read-only out
        lambda: core.allreduce(h, np.ones(4, np.int16), "sum", None),
        lambda: core.allreduce(h, x, "sum", np.empty(7, np.float32)),
        lambda: core.allreduce(h, x, "sum", np.empty(8, np.float64)),
        lambda: core.allreduce(h, x, "nonsense", None),
        lambda: core.allreduce(h, x, True, None),                   # a bool is not an op
        lambda: core.allreduce(h, x, np.int64(0), None),
        lambda: core.allreduce(h, x.view(_Sub), "sum", None),      # subclass
        lambda: core.allreduce(h, [1.0, 2.0], "sum", None),
        lambda: core.allreduce(None, x, "sum", None),              # destroyed communicator
        lambda: core.reduce(h, me, p, x, "sum", p, None),          # root out of range
        lambda: core.reduce(h, me, p, x, "sum", np.int64(0), None),
        lambda: core.bcast(h, me, p, x, -1),
        lambda: core.allgather(h, p, x, None),
        lambda: core.allgather(h, p, x, np.empty(8 * p + 1, np.float32)),
        lambda: core.send(h, p, x, p, 0),
        lambda: core.send(h, p, x, 0, weft.TAG_UB + 1),
        lambda: core.recv(h, p, ro, 0, 0),                          # read-only receive
        lambda: core.barrier(None),
        lambda: core.reduce_scatter(h, p, x, "sum", None),               # in place
        lambda: core.reduce_scatter(h, p, x, "sum", np.empty(8 * p + 1, np.float32)),
        lambda: core.reduce_scatter(h, p, x, "nonsense", np.empty(8 // p, np.float32)),
        lambda: core.alltoall(h, p, x, None),                             # in place
        lambda: core.alltoall(h, p, np.ones(8 * p + 1, np.float32),
                              np.empty(8 * p + 1, np.float32))
        if p > 1 else NotImplemented,                                     # not p blocks
        lambda: core.alltoall(h, p, x, np.empty(8, np.int32)),            # other dtype
        lambda: core.gather(h, me, p, x, p, np.empty(8 * p, np.float32)),  # root out of range
        lambda: core.gather(h, 0, p, x, 0, None) if me == 0 else NotImplemented,
        lambda: core.scatter(h, me, p, x, 0, None),                       # no out
        lambda: core.scatter(h, me, p, x, 0, ro),                         # read-only out
    ]
    for i, call in enumerate(declined):
        assert call() is NotImplemented, "case %d was handled" % i
    same(x, np.arange(8, dtype=np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        comm.allreduce(np.arange(16, dtype=np.float32)[::2])
    with pytest.raises(ValueError, match="unknown op"):
        comm.allreduce(x, "nonsense")
    # a subclass and a non-contiguous out still work through ctypes
    same(comm.allreduce(x.view(_Sub), "max", out=np.empty(8, np.float32)), x)
    same(comm.allreduce(np.full(3, me, np.int32), "sum"),
         np.full(3, p * (p - 1) // 2, np.int32))


@needs_core
def test_weft_errors_are_raised_with_the_status(comm):
    """A status from libweft (here: op not defined for the dtype, checked
    before anything is sent) is a weft.Error through the compiled path."""
    f = np.ones(8, np.float32)
    with pytest.raises(weft.Error) as e:
        core.allreduce(comm._handle, f, "band", None)
    assert e.value.status == weft.Status.ERR_INVALID_ARG
    assert "not defined for dtype" in str(e.value)
    same(f, np.ones(8, np.float32))


@needs_core
def test_request_test_compiled(comm):
    """Request.test in one C call of the module: False while the operation
    runs, then True with the sender of a receive from any source (the C
    request freed, test() again True); a receive whose message is larger
    raises its mismatch from test(), and again after."""
    p, me = comm.size, comm.rank
    if p < 2:
        pytest.skip("needs two ranks")
    if me == 0:
        b = np.zeros(5, np.int64)
        r = comm.irecv(b, weft.ANY_SOURCE, 9)
        assert not r.done and r._handle is not None
        comm.barrier()  # rank 1 sends only now: the first tests find nothing
        deadline = time.monotonic() + 60
        while not r.test():
            assert time.monotonic() < deadline, "the receive never completed"
        assert r.done and r._handle is None and r.source == 1 and r.test()
        same(b, data(np.int64, 5, 1))
        small = np.full(4, -1, np.int32)
        r = comm.irecv(small, 1, 10)
        deadline = time.monotonic() + 60
        with pytest.raises(weft.Error) as e:
            while not r.test():
                assert time.monotonic() < deadline, "the receive never completed"
        assert e.value.status == weft.Status.ERR_MISMATCH
        assert r.done
        with pytest.raises(weft.Error):
            r.test()
    else:
        comm.barrier()
        if me == 1:
            comm.send(data(np.int64, 5, 1), 0, 9)
            comm.send(np.arange(5, dtype=np.int32), 0, 10)
    comm.barrier()
