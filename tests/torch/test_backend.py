"""weft_torch, the torch.distributed backend "weft", against gloo and against
a reference computed locally.

Each test spawns a job of N processes (torch.multiprocessing); every process
joins a default group on "weft" and a gloo group over the same ranks, and
runs its checks. Inputs are deterministic functions of (rank, seed, dtype),
so each process also computes the exact expected result itself. Values are
small integers (exact in every float type and free of overflow), so sums
agree bitwise whatever order the backends add in.

Run by tests/torch/test_torch.sh with the extension on PYTHONPATH.
"""

import functools
import os
import tempfile
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from common import (ALL_DTYPES, ARITH_OPS, BIT_OPS, COUNTS, GLOO_BCAST_DTYPES, ReduceOp,
                    assert_same, gloo_supports, make_input, reference, spawn, valid)


# ------------------------------------------------------------ the checks


def check_allreduce(rank, size, gloo):
    seed = 0
    for dtype in ALL_DTYPES:
        for op in ARITH_OPS + BIT_OPS:
            if not valid(dtype, op):
                continue
            for count in COUNTS:
                seed += 1
                what = f"all_reduce {dtype} {op} count {count} np {size}"
                inputs = [make_input(r, seed, dtype, count, op) for r in range(size)]
                want = reference(inputs, op, size)
                t = inputs[rank].clone()
                dist.all_reduce(t, op=op)
                assert_same(t, want, what)
                if gloo_supports(dtype, op) and count <= 1000:
                    g = inputs[rank].clone()
                    dist.all_reduce(g, op=op, group=gloo)
                    assert_same(t, g, what + " (against gloo)")


def check_allreduce_forms(rank, size, gloo):
    # non-contiguous: every other element of a 2-column tensor
    base = torch.full((513, 2), -7.0)
    col = base[:, 0]
    col.copy_(torch.arange(513, dtype=torch.float32) + rank)
    dist.all_reduce(col)
    want = sum(torch.arange(513, dtype=torch.float32) + r for r in range(size))
    assert_same(col.contiguous(), want, "all_reduce of a strided view")
    assert_same(base[:, 1].contiguous(), torch.full((513,), -7.0), "the other column untouched")

    # a 3-d tensor, and a transposed (non-contiguous) one
    x = (torch.arange(60, dtype=torch.float64).reshape(3, 4, 5) + rank).transpose(0, 2)
    dist.all_reduce(x, op=ReduceOp.MAX)
    want = (torch.arange(60, dtype=torch.float64).reshape(3, 4, 5) + size - 1).transpose(0, 2)
    assert_same(x, want, "all_reduce MAX of a transposed tensor")

    # complex tensors reduce as their real views
    z = torch.complex(torch.arange(9.0) + rank, -torch.arange(9.0) * (rank + 1))
    dist.all_reduce(z)
    zg = torch.complex(torch.arange(9.0) + rank, -torch.arange(9.0) * (rank + 1))
    dist.all_reduce(zg, group=gloo)
    assert_same(z, zg, "all_reduce SUM of complex64 against gloo")
    with pytest.raises(ValueError):
        dist.all_reduce(z.clone(), op=ReduceOp.MAX)

    # PREMUL_SUM: each input times the factor, then summed
    for factor in (2.5, torch.tensor([0.5], dtype=torch.float64)):
        p = torch.arange(10, dtype=torch.float32) + rank
        dist.all_reduce(p, op=dist._make_nccl_premul_sum(factor))
        f = float(factor)
        want = sum((torch.arange(10, dtype=torch.float32) + r) * f for r in range(size))
        assert_same(p, want, f"all_reduce PREMUL_SUM x{f}")

    # a scalar (0-d) tensor
    s = torch.tensor(rank + 1, dtype=torch.int64)
    dist.all_reduce(s, op=ReduceOp.PRODUCT)
    assert s.item() == functools.reduce(lambda a, b: a * b, range(1, size + 1))


def check_broadcast(rank, size, gloo):
    seed = 1000
    for dtype in ALL_DTYPES + [torch.complex128]:
        for count in COUNTS:
            for root in range(size):
                seed += 1
                inputs = [make_input(r, seed, dtype if not dtype.is_complex else torch.float64,
                                     count * (2 if dtype.is_complex else 1), ReduceOp.SUM)
                          for r in range(size)]
                if dtype.is_complex:
                    inputs = [torch.view_as_complex(i.reshape(-1, 2)) for i in inputs]
                t = inputs[rank].clone()
                dist.broadcast(t, src=root)
                assert_same(t, inputs[root], f"broadcast {dtype} count {count} root {root}")
                if count == 7 and dtype in GLOO_BCAST_DTYPES:
                    g = inputs[rank].clone()
                    dist.broadcast(g, src=root, group=gloo)
                    assert_same(t, g, f"broadcast {dtype} root {root} against gloo")
    # a strided view: only its own elements change
    base = torch.full((100, 3), float(rank))
    dist.broadcast(base[:, 1], src=size - 1)
    assert torch.all(base[:, 1] == size - 1)
    assert torch.all(base[:, 0] == rank) and torch.all(base[:, 2] == rank)


def check_barrier(rank, size, gloo):
    # ranks other than 0 may not leave the barrier before rank 0 enters it
    dist.barrier()
    if rank == 0:
        time.sleep(1.0)
    start = time.monotonic()
    dist.barrier()
    if rank != 0:
        waited = time.monotonic() - start
        assert waited > 0.5, f"barrier returned after {waited:.3f} s, before rank 0 entered"


def check_async(rank, size, gloo):
    # many works outstanding, completed in order; futures carry the outputs
    tensors = [torch.full((1000 + i,), float(rank + i)) for i in range(32)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    fut = works[-1].get_future()
    chained = fut.then(lambda f: f.value()[0].sum().item())
    for i, w in enumerate(works):
        assert w.wait()
        assert w.is_completed() and w.is_success()
        want = sum(float(r + i) for r in range(size))
        assert torch.all(tensors[i] == want), f"async all_reduce {i}"
    assert chained.wait() == (1031) * sum(float(r + 31) for r in range(size))
    b = torch.full((5,), float(rank))
    wb = dist.broadcast(b, src=0, async_op=True)
    out = wb.get_future().wait()
    assert out[0] is not None and torch.all(out[0] == 0.0)
    dist.barrier(async_op=True).wait()


def check_unwaited(rank, size, gloo):
    # operations nobody waits for still run (the group's worker takes them),
    # and a wait runs what was queued before its operation too
    import datetime

    def poll(work, what):
        deadline = time.monotonic() + 20
        while not work.is_completed():
            assert time.monotonic() < deadline, f"{what} never ran without a wait()"
            time.sleep(0.001)

    # rank 0 never calls wait(): polls is_completed() while the others wait at once
    t = torch.full((64,), float(rank))
    w = dist.all_reduce(t, async_op=True)
    if rank == 0:
        poll(w, "an all_reduce")
    else:
        w.wait()
    assert torch.all(t == sum(range(size)))
    # completed through its future alone (no Work.wait)
    t = torch.full((3,), 1.0)
    assert torch.all(dist.all_reduce(t, async_op=True).get_future().wait()[0] == size)
    # a wait on the second runs the first too, in order
    a, b = torch.full((5,), float(rank)), torch.full((7,), 2.0)
    wa = dist.all_reduce(a, async_op=True)
    dist.all_reduce(b)
    assert wa.is_completed() and torch.all(a == sum(range(size)))
    assert torch.all(b == 2.0 * size)
    # a wait with a timeout leaves the running to the worker
    t = torch.full((9,), 1.0)
    assert dist.all_reduce(t, async_op=True).wait(timeout=datetime.timedelta(seconds=20))
    assert torch.all(t == size)
    # two groups, operations started in different orders: rank 0 starts one
    # on the second group and, before waiting for it, one on the default
    # group, which the others run first; neither may wait for the other
    other = dist.new_group(backend="weft")
    x, y = torch.full((4,), 1.0), torch.full((4,), 3.0)
    if rank == 0:
        wx = dist.all_reduce(x, group=other, async_op=True)
        dist.all_reduce(y)
        wx.wait()
    else:
        dist.all_reduce(y)
        dist.all_reduce(x, group=other)
    assert torch.all(x == size) and torch.all(y == 3.0 * size)
    dist.destroy_process_group(other)


def check_bad_input(rank, size, gloo):
    # refused on the calling thread: nothing queued, nothing sent, the group goes on
    with pytest.raises(ValueError, match="non-integral"):
        dist.all_reduce(torch.ones(4), op=ReduceOp.BAND)
    with pytest.raises(ValueError, match="boolean"):
        dist.all_reduce(torch.ones(4, dtype=torch.bool), op=ReduceOp.AVG)
    with pytest.raises((ValueError, RuntimeError)):
        dist.broadcast(torch.ones(4), src=size + 3)
    t = torch.full((8,), float(rank))
    dist.all_reduce(t)
    assert torch.all(t == sum(range(size))), "the group works after refused calls"


def check_reproducible(rank, size, gloo):
    # weft_torch.set_reproducible: float32 sums of many magnitudes are the
    # rank-order fold, bit for bit (one reduction of up to 8 inputs); a bad
    # group is refused; switched off, the group goes on
    import weft_torch
    gen = torch.Generator().manual_seed(23)
    xs = [torch.randn(3001, generator=gen) * 10.0 ** torch.randint(-3, 4, (3001,), generator=gen)
          for _ in range(size)]
    weft_torch.set_reproducible(True)
    t = xs[rank].clone()
    dist.all_reduce(t)
    want = xs[0].clone()
    for q in range(1, size):
        want = want + xs[q]
    assert torch.equal(t.view(torch.int32), want.view(torch.int32)), \
        "reproducible all_reduce is not the rank-order fold"
    with pytest.raises(ValueError, match="not weft"):
        weft_torch.set_reproducible(True, group=gloo)
    weft_torch.set_reproducible(False)
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.all(t == size)


def check_subgroups(rank, size, gloo):
    # two groups over disjoint halves, each its own communicator
    halves = [list(range(0, size, 2)), list(range(1, size, 2))]
    groups = [dist.new_group(ranks=h, backend="weft") for h in halves]
    mine = halves[rank % 2]
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=groups[rank % 2])
    assert t.item() == float(sum(mine)), f"subgroup {mine} all_reduce"
    b = torch.tensor([float(rank)])
    dist.broadcast(b, src=mine[-1], group=groups[rank % 2])
    assert b.item() == float(mine[-1])
    # the default group still works between them
    d = torch.tensor([1.0])
    dist.all_reduce(d)
    assert d.item() == float(size)


# ----------------------------------------------------------------- tests


@pytest.mark.parametrize("size", [2, 3, 4])
def test_allreduce(size):
    spawn(_all_checks, size)


def _all_checks(rank, size, gloo):
    # one job per size for all of them: a job's start (torch's import in
    # every process) costs more than most checks
    checks = [check_allreduce, check_allreduce_forms, check_broadcast, check_barrier,
              check_async, check_unwaited, check_bad_input, check_reproducible]
    if size >= 3:
        checks.append(check_subgroups)  # halves of more than one rank
    for check in checks:
        check(rank, size, gloo)


def _stalled(rank, size, mode):
    # rank 1 never calls the collective: rank 0's Work fails with weft's
    # timeout, naming the operation, within the group's deadline (torch's
    # timeout, or WEFT_TIMEOUT where the environment sets it), not the 300 s
    # WEFT_TIMEOUT default
    if rank == 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="WEFT_ERR_TIMEOUT") as err:
            dist.all_reduce(torch.ones(16))
        took = time.monotonic() - start
        assert 2.5 < took < 30, f"the timeout took {took:.1f} s"
        assert "allreduce" in str(err.value)
        assert " Timed out " in str(err.value), err.value  # as gloo words it
    else:
        time.sleep(8)


def _stalled_recv(rank, size, mode):
    # a receive nothing matches: the group's timeout ends it and aborts the group
    if rank == 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="recv from rank 1 tag 5"):
            dist.recv(torch.empty(4), src=1, tag=5)
        took = time.monotonic() - start
        assert 2.5 < took < 30, f"the timeout took {took:.1f} s"
        with pytest.raises(dist.DistBackendError):
            dist.all_reduce(torch.ones(2))
    else:
        time.sleep(8)


@pytest.mark.parametrize("scenario", ["collective", "recv"])
@pytest.mark.parametrize("mode", ["torch_timeout", "WEFT_TIMEOUT"])
def test_stalled_rank(mode, scenario):
    if mode == "WEFT_TIMEOUT":
        os.environ["WEFT_TIMEOUT"] = "3"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(_stalled_entry, args=(2, os.path.join(tmp, "store"), mode, scenario),
                     nprocs=2, join=True)
    finally:
        os.environ.pop("WEFT_TIMEOUT", None)


def _stalled_entry(rank, size, store_path, mode, scenario):
    import datetime

    import weft_torch  # noqa: F401

    # with WEFT_TIMEOUT set, the torch timeout (an hour) is not the one that ends it
    timeout = datetime.timedelta(seconds=3 if mode == "torch_timeout" else 3600)
    # both ranks join together: WEFT_TIMEOUT=3 is the bootstrap's deadline too, and on a
    # loaded machine one process's start (torch's import) can lag the other's by more
    pre = dist.FileStore(store_path + ".pre", size)
    pre.add("arrived", 1)
    deadline = time.monotonic() + 120
    while pre.add("arrived", 0) < size:
        assert time.monotonic() < deadline, "the other rank never started"
        time.sleep(0.01)
    dist.init_process_group("weft", init_method="file://" + store_path, rank=rank,
                            world_size=size, timeout=timeout)
    try:
        (_stalled if scenario == "collective" else _stalled_recv)(rank, size, mode)
    finally:
        dist.destroy_process_group()


def test_registered():
    import weft_torch

    assert "weft" in dist.Backend.backend_list
    assert weft_torch.weft_version().count(".") == 2
