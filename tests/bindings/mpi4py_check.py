"""An mpi4py program that knows nothing of weft: collectives on numpy
arrays and on Python objects, checked against values computed here.
Run as: mpirun -np N /usr/bin/python3 -m mpi4py mpi4py_check.py
Prints "mpi4py_check: N checks passed" on rank 0; exits 1 on a mismatch."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
checks = 0


def check(got, want, what):
    global checks
    checks += 1
    if not np.array_equal(np.asarray(got), np.asarray(want)):
        print(f"rank {rank}: WRONG {what}: {got!r} != {want!r}", file=sys.stderr)
        comm.Abort(1)


def contrib(r, n, dtype):
    return (np.arange(n) * 7 + r * 13) % 23


for dtype in (np.float64, np.float32, np.int32, np.int64):
    for n in (1, 7, 1001, 100003):
        send = contrib(rank, n, dtype).astype(dtype)
        want = sum(contrib(r, n, dtype) for r in range(size)).astype(dtype)
        recv = np.empty_like(send)
        comm.Allreduce(send, recv, op=MPI.SUM)
        check(recv, want, f"Allreduce {dtype.__name__} {n}")
        buf = send.copy()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.MAX)
        check(buf, np.max([contrib(r, n, dtype) for r in range(size)], axis=0).astype(dtype),
              f"Allreduce in place max {dtype.__name__} {n}")
        req = comm.Iallreduce(send, recv, op=MPI.SUM)
        req.Wait()
        check(recv, want, f"Iallreduce {dtype.__name__} {n}")

buf = np.arange(1000, dtype=np.float64) if rank == size - 1 else np.zeros(1000)
comm.Bcast(buf, root=size - 1)
check(buf, np.arange(1000, dtype=np.float64), "Bcast")

send = np.full(5, rank, dtype=np.int32)
recv = np.empty(5 * size, dtype=np.int32)
comm.Allgather(send, recv)
check(recv, np.repeat(np.arange(size, dtype=np.int32), 5), "Allgather")

send = np.arange(size * 3, dtype=np.int64) + 100 * rank
recv = np.empty(size * 3, dtype=np.int64)
comm.Alltoall(send, recv)
check(recv, np.concatenate([np.arange(3) + 3 * rank + 100 * r for r in range(size)]), "Alltoall")

send = np.ones(size * 4, dtype=np.float64) * (rank + 1)
recv = np.empty(4, dtype=np.float64)
comm.Reduce_scatter_block(send, recv, op=MPI.SUM)
check(recv, np.full(4, size * (size + 1) / 2), "Reduce_scatter_block")

# Python objects (pickled, sent with MPI's collectives underneath)
check(comm.allreduce(rank + 1), size * (size + 1) // 2, "allreduce object")
check(comm.allgather({"r": rank})[size - 1]["r"], size - 1, "allgather object")
check(comm.bcast("hello" if rank == 0 else None, root=0), "hello", "bcast object")

sub = comm.Split(rank % 2, -rank)
x = np.array([rank], dtype=np.int32)
y = np.empty(1, dtype=np.int32)
sub.Allreduce(x, y)
check(y[0], sum(r for r in range(size) if r % 2 == rank % 2), "Allreduce on a split comm")
sub.Free()
comm.Barrier()
if rank == 0:
    print(f"mpi4py_check: {checks} checks passed")
