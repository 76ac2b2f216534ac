"""Bad input: every case raises a clear exception before anything is sent
and writes nothing. The bad calls run on rank 0 only; the collective that
follows gives the right result on every rank, which it could not if rank 0
had sent a message or taken an operation's sequence number."""
import numpy as np
import pytest

import weft
from conftest import data, expected_reduce, same


def _bad_calls(comm):
    """(description, callable, exception type, text in the message)"""
    p = comm.size
    f32 = np.arange(4 * p, dtype=np.float32)
    i32 = np.arange(4 * p, dtype=np.int32)
    ro = np.zeros(4 * p, dtype=np.float32)
    ro.flags.writeable = False
    fortran = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    cases = [
        ("out dtype", lambda: comm.allreduce(f32, out=np.zeros(4 * p, np.float64)),
         TypeError, "dtype"),
        ("weft has no int16", lambda: comm.allreduce(np.zeros(4, np.int16)), TypeError,
         "int16"),
        ("bool", lambda: comm.bcast(np.zeros(4, bool)), TypeError, "bool"),
        ("complex", lambda: comm.allgather(np.zeros(4, np.complex64)), TypeError, "complex"),
        ("byte order", lambda: comm.allreduce(np.zeros(4, ">i4")), TypeError, "byte order"),
        ("a list", lambda: comm.allreduce([1, 2, 3]), TypeError, "numpy array"),
        ("None", lambda: comm.allreduce(None), TypeError, "None"),
        ("out size", lambda: comm.allreduce(f32, out=np.zeros(4 * p + 1, np.float32)),
         ValueError, "elements"),
        ("allgather out size", lambda: comm.allgather(f32, out=np.zeros(4 * p * p + 1, np.float32)),
         ValueError, "elements"),
        ("gather out size", lambda: comm.gather(f32, 0, out=np.zeros(1, np.float32)),
         ValueError, "elements") if comm.rank == 0 else None,
        ("reduce_scatter out size",
         lambda: comm.reduce_scatter(f32, out=np.zeros(5, np.float32)), ValueError, "elements"),
        ("counts length", lambda: comm.allgatherv(f32[:1], [1] * (p + 1)), ValueError,
         "entries"),
        ("negative count", lambda: comm.reduce_scatter_v(f32, [-1] + [1] * (p - 1)),
         ValueError, "non-negative"),
        ("counts vs buf", lambda: comm.allgatherv(f32[:3], [2] * p), ValueError, "counts"),
        ("counts sum", lambda: comm.reduce_scatter_v(f32, [1] * p), ValueError, "add up"),
        ("alltoallv in place", lambda: comm.alltoallv(i32, [1] * p, [2] * p), ValueError,
         "in place"),
        ("alltoallv extent", lambda: comm.alltoallv(i32, [5] * p, [5] * p,
                                                    out=np.zeros(5 * p, np.int32)),
         ValueError, "reach"),
        ("strided", lambda: comm.allreduce(f32[::2]), ValueError, "contiguous"),
        ("strided out", lambda: comm.allreduce(f32, out=np.zeros(8 * p, np.float32)[::2]),
         ValueError, "contiguous"),
        ("fortran order", lambda: comm.bcast(fortran), ValueError, "contiguous"),
        ("read-only in place", lambda: comm.allreduce(ro), ValueError, "read-only"),
        ("read-only out", lambda: comm.allreduce(f32, out=ro), ValueError, "read-only"),
        ("root -1", lambda: comm.bcast(f32, root=-1), ValueError, "root"),
        ("root = size", lambda: comm.reduce(f32, root=p), ValueError, "root"),
        ("root not an int", lambda: comm.gather(f32, root="0"), ValueError, "root"),
        ("root bool", lambda: comm.scatter(f32, root=True, out=f32[:4]), ValueError, "root"),
        ("nonblocking root", lambda: comm.ibcast(f32, root=p + 3), ValueError, "root"),
        ("unknown op", lambda: comm.allreduce(f32, op="average"), ValueError, "unknown op"),
        ("op number", lambda: comm.allreduce(i32, op=42), ValueError, "unknown op"),
        ("scatter without out", lambda: comm.scatter(f32, root=p - 1), ValueError, "out=")
        if comm.rank != p - 1 else None,
        ("not divisible", lambda: comm.alltoall(np.zeros(4 * p + 1, np.int8)), ValueError,
         "multiple") if p > 1 else None,
        ("peer", lambda: comm.send(f32, p), ValueError, "peer"),
        ("tag", lambda: comm.isend(f32, 0, tag=weft.TAG_UB + 1), ValueError, "tag"),
        ("negative tag", lambda: comm.recv(f32, 0, tag=-1), ValueError, "tag"),
    ]
    return [c for c in cases if c is not None]


def test_bad_arguments_raise_and_send_nothing(comm):
    p, me = comm.size, comm.rank
    if me == 0:
        for what, call, exc, text in _bad_calls(comm):
            try:
                call()
            except exc as e:
                assert text in str(e), (what, str(e))
            else:
                pytest.fail("%s: no %s raised" % (what, exc.__name__))
    # every rank: the next collectives match up and are right
    x = data(np.int32, 100, me)
    same(comm.allreduce(x), expected_reduce(np.int32, 100, p, "sum"))
    same(comm.bcast(np.full(3, me, np.int64), root=p - 1), np.full(3, p - 1, np.int64))


def test_nothing_written_on_error(comm):
    p = comm.size
    src = np.arange(4 * p, dtype=np.float32)
    out = np.full(4 * p, 5, dtype=np.float64)
    with pytest.raises(TypeError):
        comm.allreduce(src, out=out)
    same(out, np.full(4 * p, 5, dtype=np.float64))
    same(src, np.arange(4 * p, dtype=np.float32))


def test_c_errors_carry_the_status(comm):
    """libweft's own checks (op not defined for the dtype) raise weft.Error
    with the status and weft_last_error's message; nothing is sent."""
    p, me = comm.size, comm.rank
    if me == 0:
        f = np.ones(8, np.float32)
        for call in (lambda: comm.allreduce(f, "band"), lambda: comm.iallreduce(f, "lxor"),
                     lambda: comm.reduce_scatter(np.ones(8 * p, np.float64), "bor")):
            with pytest.raises(weft.Error) as e:
                call()
            assert e.value.status == weft.Status.ERR_INVALID_ARG == -1
            assert e.value.name == "WEFT_ERR_INVALID_ARG"
            assert "not defined for dtype" in str(e.value)
        same(f, np.ones(8, np.float32))
    same(comm.allreduce(np.full(2, 3, np.uint8), "max"), np.full(2, 3, np.uint8))


def test_receive_size_mismatch_is_reported_by_the_request(comm):
    p, me = comm.size, comm.rank
    if p < 2:
        pytest.skip("needs two ranks")
    if me == 0:
        comm.send(np.arange(5, dtype=np.int32), 1, tag=3)
    elif me == 1:
        buf = np.full(4, -1, dtype=np.int32)
        req = comm.irecv(buf, 0, tag=3)
        with pytest.raises(weft.Error) as e:
            req.wait()
        assert e.value.status == weft.Status.ERR_MISMATCH
        assert "larger than the receive" in str(e.value), str(e.value)  # weft's own words
        assert req.done
        with pytest.raises(weft.Error):  # waiting again reports it again
            req.wait()
    comm.barrier()
    same(comm.allreduce(np.ones(3, np.int64)), np.full(3, p, np.int64))
