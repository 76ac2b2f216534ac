"""weft_torch's device path (bindings/torch/csrc/device.hpp) without a GPU:
CPU tensors in weft's emulated device memory (weft_torch.emu_empty) take
weft's stream-ordered collectives on the group's emu stream, as CUDA tensors
take them on a stream of the group's. Every result is checked against a
locally computed reference and against gloo on plain CPU copies.

WEFT_TORCH_TEST_DEVICE=cuda runs the same checks on CUDA tensors (each rank
on GPU rank % count; tools/gpu-check.sh does it where torch sees a GPU).

Run by tests/torch/test_torch.sh with the extension on PYTHONPATH.
"""

import os

import pytest
import torch
import torch.distributed as dist

import common
from common import (ALL_DTYPES, ARITH_OPS, BIT_OPS, ReduceOp, gloo_supports, make_input,
                    reference, spawn, valid)

DEVICE = os.environ.get("WEFT_TORCH_TEST_DEVICE", "emu")


def emu(t):
    """A copy of t on the device under test: weft's emu memory (same shape and
    dtype), or the rank's CUDA device."""
    if DEVICE == "cuda":
        return t.to(f"cuda:{torch.cuda.current_device()}")
    import weft_torch

    e = weft_torch.emu_empty(t.shape, t.dtype)
    e.copy_(t)
    return e


def assert_same(got, want, what):
    common.assert_same(got.cpu(), want.cpu(), what)


# ------------------------------------------------------------ the checks


def check_allreduce(rank, size, gloo):
    seed = 0
    for dtype in ALL_DTYPES:
        if dtype == torch.int16:
            continue  # widened for weft: refused on devices (check_refusals)
        for op in ARITH_OPS + BIT_OPS:
            if not valid(dtype, op):
                continue
            for count in (1, 7, 4099):
                seed += 1
                what = f"emu all_reduce {dtype} {op} count {count} np {size}"
                inputs = [make_input(r, seed, dtype, count, op) for r in range(size)]
                t = emu(inputs[rank])
                dist.all_reduce(t, op=op)
                assert_same(t, reference(inputs, op, size), what)
                if gloo_supports(dtype, op):
                    g = inputs[rank].clone()
                    dist.all_reduce(g, op=op, group=gloo)
                    assert_same(t, g, what + " (against gloo)")
    # complex as its real view
    inputs = [torch.complex(make_input(r, 99, torch.float32, 33, ReduceOp.SUM),
                            make_input(r, 98, torch.float32, 33, ReduceOp.SUM))
              for r in range(size)]
    t = emu(inputs[rank])
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), sum(inputs)), "emu all_reduce complex64"
    # an empty tensor
    z = emu(torch.empty(0))
    dist.all_reduce(z)
    assert z.numel() == 0


def check_rooted(rank, size, gloo):
    for root in range(size):
        for dtype in (torch.float32, torch.int64, torch.bool, torch.float16):
            inputs = [make_input(r, 7 + root, dtype, 1001, ReduceOp.SUM) for r in range(size)]
            t = emu(inputs[rank])
            dist.broadcast(t, src=root)
            assert_same(t, inputs[root], f"emu broadcast {dtype} root {root}")
            t = emu(inputs[rank])
            dist.reduce(t, dst=root, op=ReduceOp.MAX)
            if rank == root:
                assert_same(t, reference(inputs, ReduceOp.MAX, size),
                            f"emu reduce {dtype} root {root}")
            else:
                assert_same(t, inputs[rank], f"emu reduce leaves rank {rank}'s input")


def check_gather_scatter(rank, size, gloo):
    for dtype in (torch.float32, torch.int8, torch.bfloat16):
        for count in (1, 5, 3000):
            inputs = [make_input(r, count, dtype, count, ReduceOp.SUM) for r in range(size)]
            out = emu(torch.zeros(size * count, dtype=dtype))
            dist.all_gather_into_tensor(out, emu(inputs[rank]))
            assert_same(out, torch.cat(inputs), f"emu all_gather_into_tensor {dtype} {count}")
            whole = [make_input(r, count + 1, dtype, size * count, ReduceOp.SUM)
                     for r in range(size)]
            part = emu(torch.zeros(count, dtype=dtype))
            dist.reduce_scatter_tensor(part, emu(whole[rank]))
            want = reference(whole, ReduceOp.SUM, size)[rank * count:(rank + 1) * count]
            assert_same(part, want, f"emu reduce_scatter_tensor {dtype} {count}")
            g = torch.zeros(count, dtype=dtype)
            dist.reduce_scatter_tensor(g, whole[rank].clone(), group=gloo)
            assert_same(part, g, f"emu reduce_scatter_tensor {dtype} {count} (against gloo)")


def check_alltoall(rank, size, gloo):
    # equal splits: block d of rank r's rows goes to rank d
    for dtype in (torch.float32, torch.int64, torch.uint8):
        rows = 3 * size
        inputs = [(torch.arange(rows * 2) + 1000 * r).view(rows, 2).to(dtype) for r in range(size)]
        out = emu(torch.zeros(rows, 2, dtype=dtype))
        dist.all_to_all_single(out, emu(inputs[rank]))
        want = torch.cat([inputs[r][3 * rank:3 * rank + 3] for r in range(size)])
        assert_same(out, want, f"emu all_to_all_single {dtype}")
        g = torch.zeros(rows, 2, dtype=dtype)
        dist.all_to_all_single(g, inputs[rank].clone(), group=gloo)
        assert_same(out, g, f"emu all_to_all_single {dtype} (against gloo)")
    # uneven splits: rank r sends r + d + 1 rows to rank d
    sends = [[r + d + 1 for d in range(size)] for r in range(size)]
    inputs = [torch.arange(sum(sends[r]), dtype=torch.float64) + 100 * r for r in range(size)]
    recv = [sends[r][rank] for r in range(size)]
    out = emu(torch.full((sum(recv),), -1.0, dtype=torch.float64))
    dist.all_to_all_single(out, emu(inputs[rank]), output_split_sizes=recv,
                           input_split_sizes=sends[rank])
    want = torch.cat([inputs[r][sum(sends[r][:rank]):sum(sends[r][:rank + 1])]
                      for r in range(size)])
    assert_same(out, want, "emu all_to_all_single with split sizes")


def check_lists(rank, size, gloo):
    """The list forms (all_gather, gather, scatter, reduce_scatter, all_to_all) of device
    tensors: through a flat buffer of the lane's, copied on the stream, against a reference
    and gloo."""
    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.uint8):
        for count in (1, 7, 3000):
            what = f"{dtype} count {count} np {size}"
            inputs = [make_input(r, count + 3, dtype, count, ReduceOp.SUM) for r in range(size)]
            outs = [emu(torch.zeros(count, dtype=dtype)) for _ in range(size)]
            dist.all_gather(outs, emu(inputs[rank]))
            g = [torch.zeros(count, dtype=dtype) for _ in range(size)]
            dist.all_gather(g, inputs[rank].clone(), group=gloo)
            for r in range(size):
                assert_same(outs[r], inputs[r], f"emu all_gather part {r} {what}")
                assert_same(outs[r], g[r], f"emu all_gather part {r} {what} (against gloo)")
            for root in range(size):
                gl = [emu(torch.zeros(count, dtype=dtype)) for _ in range(size)]
                dist.gather(emu(inputs[rank]), gl if rank == root else None, dst=root)
                for r in range(size if rank == root else 0):
                    assert_same(gl[r], inputs[r], f"emu gather to {root} part {r} {what}")
                out = emu(torch.zeros(count, dtype=dtype))
                parts = [emu(make_input(root, 50 + r, dtype, count, ReduceOp.SUM))
                         for r in range(size)]
                dist.scatter(out, parts if rank == root else None, src=root)
                assert_same(out, make_input(root, 50 + rank, dtype, count, ReduceOp.SUM),
                             f"emu scatter from {root} {what}")
            # reduce_scatter: rank r's list, part d to rank d
            lists = [[make_input(r, 80 + d, dtype, count, ReduceOp.SUM) for d in range(size)]
                     for r in range(size)]
            out = emu(torch.zeros(count, dtype=dtype))
            dist.reduce_scatter(out, [emu(t) for t in lists[rank]])
            assert_same(out, reference([lists[r][rank] for r in range(size)], ReduceOp.SUM, size),
                        f"emu reduce_scatter {what}")
            if gloo_supports(dtype, ReduceOp.SUM):
                g = torch.zeros(count, dtype=dtype)
                dist.reduce_scatter(g, [t.clone() for t in lists[rank]], group=gloo)
                assert_same(out, g, f"emu reduce_scatter {what} (against gloo)")
    # all_to_all of parts of different sizes: rank r sends r + d + 1 elements to rank d
    ins = [[torch.arange(r + d + 1, dtype=torch.float64) + 100 * r + 10 * d for d in range(size)]
           for r in range(size)]
    outs = [emu(torch.full((r + rank + 1,), -1.0, dtype=torch.float64)) for r in range(size)]
    dist.all_to_all(outs, [emu(t) for t in ins[rank]])
    for r in range(size):
        assert_same(outs[r], ins[r][rank], f"emu all_to_all part from {r}")
    # lists must be device tensors of one lane, each contiguous
    with pytest.raises(ValueError, match="different devices"):
        dist.all_gather([emu(torch.zeros(2)) for _ in range(size - 1)] + [torch.zeros(2)],
                        emu(torch.zeros(2)))
    with pytest.raises(ValueError, match="non-contiguous device tensor"):
        dist.all_gather([emu(torch.zeros(4)).view(2, 2)[:, 0] for _ in range(size)],
                        emu(torch.zeros(2)))
    with pytest.raises(ValueError, match="different sizes"):
        dist.reduce_scatter(emu(torch.zeros(2)), [emu(torch.zeros(3)) for _ in range(size)])


def check_coalesced(rank, size, gloo):
    """The coalesced forms on device tensors: one collective per tensor, in one turn."""
    from torch.distributed.distributed_c10d import _get_default_group

    pg = _get_default_group()
    # the device path takes them (the CPU path would reduce int16 widened)
    with pytest.raises(ValueError, match="Short device tensors"):
        dist.all_reduce_coalesced([emu(torch.zeros(4, dtype=torch.int16))])
    ins = [make_input(rank, 20 + i, torch.float32, 5 + 40 * i, ReduceOp.SUM) for i in range(3)]
    ts = [emu(t) for t in ins]
    dist.all_reduce_coalesced(ts)
    for i, t in enumerate(ts):
        want = reference([make_input(r, 20 + i, torch.float32, 5 + 40 * i, ReduceOp.SUM)
                          for r in range(size)], ReduceOp.SUM, size)
        assert_same(t, want, f"emu all_reduce_coalesced tensor {i}")
    parts = [emu(make_input(rank, 30 + i, torch.int64, 3 + i, ReduceOp.SUM)) for i in range(2)]
    wholes = [emu(torch.zeros(size * (3 + i), dtype=torch.int64)) for i in range(2)]
    pg.allgather_into_tensor_coalesced(wholes, parts).wait()
    for i, w in enumerate(wholes):
        want = torch.cat([make_input(r, 30 + i, torch.int64, 3 + i, ReduceOp.SUM)
                          for r in range(size)])
        assert_same(w, want, f"emu allgather_into_tensor_coalesced tensor {i}")
    big = [make_input(rank, 40 + i, torch.float64, size * (2 + i), ReduceOp.SUM)
           for i in range(2)]
    outs = [emu(torch.zeros(2 + i, dtype=torch.float64)) for i in range(2)]
    opts = dist.ReduceScatterOptions()
    pg.reduce_scatter_tensor_coalesced(outs, [emu(b) for b in big], opts).wait()
    for i, o in enumerate(outs):
        whole = reference([make_input(r, 40 + i, torch.float64, size * (2 + i), ReduceOp.SUM)
                           for r in range(size)], ReduceOp.SUM, size)
        assert_same(o, whole[rank * (2 + i):(rank + 1) * (2 + i)],
                    f"emu reduce_scatter_tensor_coalesced tensor {i}")
    # all_gather_coalesced (lists): inputs of several shapes (a 0-d one, an
    # empty one) packed into one allgather, cut into every list; dtypes
    # with elements of 1, 2 and 8 bytes (torch wants one dtype per call)
    for dtype in (torch.bool, torch.bfloat16, torch.int64):
        def mine_of(r):
            return [torch.zeros(0, dtype=dtype),
                    make_input(r, 50, dtype, 7, ReduceOp.SUM),
                    make_input(r, 51, dtype, 1, ReduceOp.SUM).reshape(()),
                    make_input(r, 52, dtype, 300, ReduceOp.SUM).reshape(3, 100),
                    make_input(r, 53, dtype, 33, ReduceOp.SUM)]
        lists = [[emu(torch.zeros_like(t)) for t in mine_of(rank)] for _ in range(size)]
        dist.all_gather_coalesced(lists, [emu(t) for t in mine_of(rank)])
        for r in range(size):
            for i, want in enumerate(mine_of(r)):
                got = lists[r][i]
                assert got.shape == want.shape and got.dtype == want.dtype
                assert_same(got, want, f"emu all_gather_coalesced {dtype} rank {r} tensor {i}")
    lists = [[emu(torch.zeros(5)) for _ in range(2)] for _ in range(size)]
    w = dist.all_gather_coalesced(lists, [emu(torch.full((5,), rank + k / 2)) for k in range(2)],
                                  async_op=True)
    w.wait()
    for r in range(size):
        for k in range(2):
            assert_same(lists[r][k], torch.full((5,), r + k / 2), "async all_gather_coalesced")
    with pytest.raises(ValueError, match="different devices"):
        dist.all_gather_coalesced([[emu(torch.zeros(2)), torch.zeros(2)] for _ in range(size)],
                                  [emu(torch.zeros(2)), torch.zeros(2)])
    with pytest.raises(ValueError, match="different sizes"):
        dist.all_gather_coalesced([[emu(torch.zeros(3))] for _ in range(size)],
                                  [emu(torch.zeros(2))])


def check_p2p(rank, size, gloo):
    """send/recv of device tensors (weft's transport carries device memory, staged through
    the host where UCX cannot): a ring, blocking and async, every pair of ranks in turn."""
    right, left = (rank + 1) % size, (rank - 1) % size
    for dtype in (torch.float32, torch.int64, torch.uint8):
        for count in (1, 1000, 300000):
            mine = make_input(rank, count, dtype, count, ReduceOp.SUM)
            got = emu(torch.zeros(count, dtype=dtype))
            if rank % 2 == 0:
                dist.send(emu(mine), dst=right, tag=5)
                dist.recv(got, src=left, tag=5)
            else:
                dist.recv(got, src=left, tag=5)
                dist.send(emu(mine), dst=right, tag=5)
            assert_same(got, make_input(left, count, dtype, count, ReduceOp.SUM),
                        f"device recv from {left} {dtype} {count}")
    ins = [emu(torch.full((777,), float(rank * 10 + k))) for k in range(3)]
    outs = [emu(torch.zeros(777)) for _ in range(3)]
    reqs = [dist.irecv(outs[k], src=left, tag=10 + k) for k in range(3)]
    reqs += [dist.isend(ins[k], dst=right, tag=10 + k) for k in range(3)]
    for r in reqs:
        r.wait()
    for k in range(3):
        assert_same(outs[k], torch.full((777,), float(left * 10 + k)), f"device irecv {k}")
    # a collective after them: the group goes on
    t = emu(torch.ones(4))
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.full((4,), float(size)))


def check_batch(rank, size, gloo):
    """batch_isend_irecv (torch's coalescing: startCoalescing/endCoalescing):
    sends and receives of device tensors are held and queued at the end as
    one weft group on the lane's stream; plain CPU ones run as usual; one
    Work covers the batch either way."""
    right, left = (rank + 1) % size, (rank - 1) % size
    dev = torch.device("cuda") if DEVICE == "cuda" else torch.device("cpu")
    for dtype, count in ((torch.float32, 300000), (torch.int64, 7), (torch.uint8, 0)):
        # both neighbours both ways in one batch: sends first on every rank,
        # large enough that a send would wait for its receive
        mine = [make_input(rank + size * k, count, dtype, count, ReduceOp.SUM) for k in range(2)]
        got = [emu(torch.zeros(count, dtype=dtype)) for _ in range(2)]
        ops = [dist.P2POp(dist.isend, emu(mine[0]), right, tag=1),
               dist.P2POp(dist.isend, emu(mine[1]), left, tag=2),
               dist.P2POp(dist.irecv, got[0], left, tag=1),
               dist.P2POp(dist.irecv, got[1], right, tag=2)]
        works = dist.batch_isend_irecv(ops)
        assert len(works) == 1, f"{len(works)} works for one coalesced batch"
        works[0].wait()
        assert works[0].is_completed()
        assert_same(got[0], make_input(left, count, dtype, count, ReduceOp.SUM),
                    f"batch recv from {left} {dtype} {count}")
        assert_same(got[1], make_input(right + size, count, dtype, count, ReduceOp.SUM),
                    f"batch recv from {right} {dtype} {count}")
        # the future's value: the received tensors
        assert [t.data_ptr() for t in works[0].get_future().value()] == [t.data_ptr() for t in got]
    # an empty tensor among device ones (an empty emu tensor has no memory to tell it from
    # a CPU one): it joins the device batch
    got = emu(torch.zeros(64))
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, emu(torch.zeros(0)), right, tag=3),
                                    dist.P2POp(dist.isend, emu(torch.full((64,), float(rank))),
                                               right, tag=3),
                                    dist.P2POp(dist.irecv, emu(torch.zeros(0)), left, tag=3),
                                    dist.P2POp(dist.irecv, got, left, tag=3)])
    works[0].wait()
    assert torch.equal(got.cpu(), torch.full((64,), float(left)))
    # plain CPU tensors in a batch: posted as usual, one Work for all
    cpu_in, cpu_out = torch.full((1000,), float(rank)), torch.zeros(1000)
    works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, cpu_out, left, tag=4),
                                    dist.P2POp(dist.isend, cpu_in, right, tag=4)])
    assert len(works) == 1
    works[0].wait()
    assert torch.equal(cpu_out, torch.full((1000,), float(left)))
    # a device collective queued right behind a batch, before its wait: the
    # batch is stream-ordered, no request of the group is in flight
    t = emu(torch.full((5,), 1.0))
    got = emu(torch.zeros(64))
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, emu(torch.full((64,), float(rank))),
                                               right, tag=6),
                                    dist.P2POp(dist.irecv, got, left, tag=6)])
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    works[0].wait()
    assert torch.equal(t.cpu(), torch.full((5,), float(size)))
    assert torch.equal(got.cpu(), torch.full((64,), float(left)))
    # torch's fast path inside a coalescing region with a device: the
    # all_reduces become one allreduce_coalesced, covered by the end's Work
    ts = [emu(torch.full((3 + i,), float(rank + i))) for i in range(3)]
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        for x in ts:
            dist.all_reduce(x)
    cm.wait()
    for i, x in enumerate(ts):
        assert torch.equal(x.cpu(), torch.full((3 + i,), float(sum(r + i for r in range(size)))))
    # waiting for a held send inside the region raises; the region goes on
    got = emu(torch.zeros(9))
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        w = dist.isend(emu(torch.full((9,), float(rank))), dst=right, tag=7)
        with pytest.raises(RuntimeError, match="open coalescing region"):
            w.wait()
        dist.irecv(got, src=left, tag=7)
    cm.wait()
    w.wait()
    assert torch.equal(got.cpu(), torch.full((9,), float(left)))
    # refused: a batch of device and CPU tensors; a non-contiguous device
    # tensor; a device receive from any rank: the batch's Work fails, and
    # nothing of the region is sent (on every rank alike), the group goes on
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, emu(torch.ones(4)), right, tag=8),
                                    dist.P2POp(dist.isend, torch.ones(4), right, tag=8)])
    with pytest.raises(ValueError, match="a region takes one device's tensors"):
        works[0].wait()
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(4), right, tag=8),
                                    dist.P2POp(dist.irecv, emu(torch.zeros(4)), left, tag=8)])
    with pytest.raises(ValueError, match="a region takes one device's tensors"):
        works[0].wait()
    works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, emu(torch.zeros(8)).view(4, 2)[:, 0],
                                               left, tag=8)])
    with pytest.raises(ValueError, match="non-contiguous device tensor"):
        works[0].wait()
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        dist.irecv(emu(torch.zeros(4)))
    with pytest.raises(ValueError, match="from any rank"):
        cm.wait()
    t = emu(torch.ones(4))
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.full((4,), float(size)))
    got = emu(torch.zeros(3))
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, emu(torch.full((3,), 2.0)), right),
                                    dist.P2POp(dist.irecv, got, left)])
    works[0].wait()
    assert torch.equal(got.cpu(), torch.full((3,), 2.0))


def check_async(rank, size, gloo):
    # many started at once, a CPU operation between them, then waited for
    # in reverse: each result is its own, in call order
    ts = [emu(torch.full((257,), float(rank + i))) for i in range(12)]
    works = []
    for i, t in enumerate(ts):
        works.append(dist.all_reduce(t, async_op=True))
        if i == 5:
            c = torch.full((3,), float(rank))
            works.append(dist.all_reduce(c, async_op=True))
    futs = [w.get_future() for w in works]
    for w in reversed(works):
        w.wait()
        assert w.is_completed()
    for i, t in enumerate(ts):
        want = float(sum(r + i for r in range(size)))
        assert torch.equal(t.cpu(), torch.full((257,), want)), f"async emu all_reduce {i}"
    assert torch.equal(c, torch.full((3,), float(sum(range(size)))))
    # the future's value is the tensor (DDP's comm hooks read it)
    for f, t in zip(futs, ts[:6] + [c] + ts[6:]):
        assert f.done()
        assert f.value()[0] is t or torch.equal(f.value()[0].cpu(), t.cpu())
    # is_completed() without wait(): completes on its own
    t = emu(torch.ones(64))
    w = dist.all_reduce(t, async_op=True)
    import time
    deadline = time.monotonic() + 60
    while not w.is_completed():
        assert time.monotonic() < deadline, "an unwaited emu all_reduce never completed"
        time.sleep(0.001)
    assert torch.equal(t.cpu(), torch.full((64,), float(size)))


def check_refusals(rank, size, gloo):
    # refused on the caller's thread, nothing sent: the next operation works
    base = emu(torch.zeros(16))
    with pytest.raises(ValueError, match="non-contiguous device tensor"):
        dist.all_reduce(base.view(8, 2)[:, 0])
    with pytest.raises(ValueError, match="PREMUL_SUM of a device tensor"):
        dist.all_reduce(base, op=dist._make_nccl_premul_sum(2.0))
    with pytest.raises(ValueError, match="Short device tensors"):
        dist.all_reduce(emu(torch.zeros(4, dtype=torch.int16)))
    with pytest.raises(ValueError, match="different devices"):
        dist.all_gather_into_tensor(emu(torch.zeros(2 * size)), torch.zeros(2))
    with pytest.raises(ValueError, match="elements, not the group's"):
        dist.all_gather_into_tensor(emu(torch.zeros(2 * size + 1)), emu(torch.zeros(2)))
    t = emu(torch.ones(4))
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.full((4,), float(size)))
    # a receive in flight: a device operation refuses to start (on every
    # rank alike here: nobody sends before all refused), the group goes on
    peer = (rank + 1) % size
    r = dist.irecv(torch.empty(2), src=(rank - 1) % size, tag=3)
    w = dist.all_reduce(emu(torch.ones(2)), async_op=True)
    with pytest.raises(RuntimeError, match="point-to-point operation in flight"):
        w.wait()
    dist.barrier(group=gloo)
    dist.send(torch.ones(2), dst=peer, tag=3)
    r.wait()
    t = emu(torch.ones(4))
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.full((4,), float(size)))


# ----------------------------------------------------------------- tests


def _all_checks(rank, size, gloo):
    if DEVICE == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    for check in (check_allreduce, check_rooted, check_gather_scatter, check_alltoall,
                  check_lists, check_coalesced, check_p2p, check_batch, check_async,
                  check_refusals):
        check(rank, size, gloo)


@pytest.mark.parametrize("size", [2, 3])
def test_emu_tensors(size):
    spawn(_all_checks, size)


def test_emu_empty():
    import weft_torch

    t = weft_torch.emu_empty((3, 4), torch.int32)
    assert t.shape == (3, 4) and t.dtype == torch.int32 and t.device.type == "cpu"
    t.fill_(5)
    assert int(t.sum()) == 60
    with pytest.raises(ValueError, match="negative"):
        weft_torch._C.emu_empty(-1, torch.float32)
