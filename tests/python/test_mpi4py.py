"""mpi4py interop: a weft communicator from an mpi4py one, results
identical to mpi4py's own collectives on the same arrays."""
import numpy as np
import pytest
from mpi4py import MPI

import weft
from conftest import data, same


@pytest.fixture(scope="module")
def wcomm():
    c = weft.Comm.from_mpi4py(MPI.COMM_WORLD)
    yield c
    c.destroy()


def test_ranks_match(wcomm, comm):
    w = MPI.COMM_WORLD
    assert (wcomm.rank, wcomm.size) == (w.Get_rank(), w.Get_size())
    # under mpirun weft_comm_world (PMIx) numbers the ranks as MPI does
    assert (comm.rank, comm.size) == (w.Get_rank(), w.Get_size())


CASES = [(np.int32, "sum", MPI.SUM), (np.int64, "prod", MPI.PROD), (np.uint8, "bor", MPI.BOR),
         (np.float64, "max", MPI.MAX), (np.float32, "min", MPI.MIN),
         (np.float32, "sum", MPI.SUM), (np.uint64, "bxor", MPI.BXOR)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%s" % (np.dtype(c[0]).name, c[1]))
def test_allreduce_identical_to_mpi4py(wcomm, case):
    dt, op, mpiop = case
    me = wcomm.rank
    rng = np.random.default_rng(1234 + me)
    for n in [1, 7, 4096, 100003]:
        if dt in (np.float64,) or op in ("min", "max"):
            x = rng.standard_normal(n).astype(dt)  # exact ops on arbitrary values
        else:
            x = data(dt, n, me, op)
        theirs = np.empty_like(x)
        MPI.COMM_WORLD.Allreduce(x, theirs, op=mpiop)
        ours = wcomm.allreduce(x, op, out=np.empty_like(x))
        assert ours.tobytes() == theirs.tobytes()
        wcomm.allreduce(x, op)  # in place
        assert x.tobytes() == theirs.tobytes()


def test_other_collectives_identical_to_mpi4py(wcomm):
    w, p, me = MPI.COMM_WORLD, wcomm.size, wcomm.rank
    x = data(np.int32, 6, me)
    theirs = np.empty(6 * p, np.int32)
    w.Allgather(x, theirs)
    same(wcomm.allgather(x).reshape(-1), theirs)
    y = data(np.float64, 4 * p, me)
    theirs = np.empty(4 * p, np.float64)
    w.Alltoall(y, theirs)
    same(wcomm.alltoall(y.copy()), theirs)
    z = data(np.int64, 3 * p, me)
    theirs = np.empty(3, np.int64)
    w.Reduce_scatter_block(z, theirs, op=MPI.SUM)
    same(wcomm.reduce_scatter(z), theirs)
    b = data(np.uint8, 10, me)
    w.Bcast(b, root=p - 1)
    same(wcomm.bcast(data(np.uint8, 10, me), root=p - 1), b)


def test_from_split_mpi4py_comm():
    w = MPI.COMM_WORLD
    me = w.Get_rank()
    sub = w.Split(color=me % 2, key=-me)
    with weft.Comm.from_mpi4py(sub) as ws:
        assert (ws.rank, ws.size) == (sub.Get_rank(), sub.Get_size())
        x = np.array([me], np.int64)
        theirs = np.empty(ws.size, np.int64)
        sub.Allgather(x, theirs)
        same(ws.allgather(x).reshape(-1), theirs)
    sub.Free()


def test_intercommunicator_is_refused():
    w = MPI.COMM_WORLD
    if w.Get_size() < 2:
        pytest.skip("needs two ranks")
    me = w.Get_rank()
    half = w.Split(color=me % 2, key=me)
    inter = half.Create_intercomm(0, w, 1 - me % 2, tag=11)
    with pytest.raises(TypeError, match="intracommunicator"):
        weft.Comm.from_mpi4py(inter)
    inter.Free()
    half.Free()


def test_weft_and_mpi_interleaved(wcomm):
    """Nonblocking weft operations outstanding across MPI calls."""
    me = wcomm.rank
    req = wcomm.iallreduce(np.full(1000, me, np.int64))
    total = MPI.COMM_WORLD.allreduce(me)
    same(req.wait(), np.full(1000, total, np.int64))
