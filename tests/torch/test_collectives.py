"""weft_torch's collectives beyond all_reduce/broadcast/barrier, and
point-to-point, against gloo and an exact local reference (common.py), at 2,
3 and 4 processes: reduce, all_gather (list, into a tensor, coalesced),
reduce_scatter (list, tensor, coalesced), all_to_all (single with and
without split sizes, lists), gather, scatter, send/recv, isend/irecv (also
from any source) and batch_isend_irecv, on every dtype and on strided
tensors; mismatched sizes raise before anything is sent.
"""

import pytest
import torch
import torch.distributed as dist

from common import (ALL_DTYPES, GLOO_BCAST_DTYPES, ReduceOp, assert_same, make_input,
                    reference, spawn, valid)

MOVE_COUNTS = [0, 1, 7, 4099]


def inputs_of(size, seed, dtype, count, op=ReduceOp.SUM):
    """Every rank's input; complex ones from real inputs of twice the count."""
    if dtype.is_complex:
        real = inputs_of(size, seed, dtype.to_real(), 2 * count, op)
        return [torch.view_as_complex(i.reshape(-1, 2)) for i in real]
    return [make_input(r, seed, dtype, count, op) for r in range(size)]


def check_reduce(rank, size, gloo):
    seed = 5000
    for dtype in ALL_DTYPES:
        for op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.PRODUCT, ReduceOp.BXOR, ReduceOp.AVG):
            if not valid(dtype, op):
                continue
            for count in (0, 7, 1000):
                for root in range(size):
                    seed += 1
                    ins = inputs_of(size, seed, dtype, count, op)
                    t = ins[rank].clone()
                    dist.reduce(t, dst=root, op=op)
                    what = f"reduce {dtype} {op} count {count} root {root}"
                    if rank == root:
                        assert_same(t, reference(ins, op, size), what)
                        if op != ReduceOp.AVG and dtype != torch.int16 and count == 7:
                            g = ins[rank].clone()
                            dist.reduce(g, dst=root, op=op, group=gloo)
                            assert_same(t, g, what + " (against gloo)")
                    elif op != ReduceOp.AVG and dtype != torch.int16 and count == 7:
                        dist.reduce(ins[rank].clone(), dst=root, op=op, group=gloo)


def check_allgather(rank, size, gloo):
    seed = 6000
    for dtype in ALL_DTYPES + [torch.complex64]:
        for count in MOVE_COUNTS:
            seed += 1
            ins = inputs_of(size, seed, dtype, count)
            what = f"all_gather {dtype} count {count}"
            outs = [torch.empty_like(ins[0]) for _ in range(size)]
            dist.all_gather(outs, ins[rank])
            for r in range(size):
                assert_same(outs[r], ins[r], f"{what} block {r}")
            flat = torch.empty(size * ins[0].numel(), dtype=dtype)
            dist.all_gather_into_tensor(flat, ins[rank])
            assert_same(flat, torch.cat(ins), what + " into a tensor")
            if count == 7 and dtype in GLOO_BCAST_DTYPES:
                g = [torch.empty_like(ins[0]) for _ in range(size)]
                dist.all_gather(g, ins[rank], group=gloo)
                for r in range(size):
                    assert_same(outs[r], g[r], f"{what} block {r} (against gloo)")
    # 2-d input into a stacked output, and a strided output
    x = torch.arange(12, dtype=torch.float64).reshape(3, 4) + 100 * rank
    out = torch.empty(size * 3, 4, dtype=torch.float64)
    dist.all_gather_into_tensor(out, x)
    want = torch.cat([torch.arange(12, dtype=torch.float64).reshape(3, 4) + 100 * r
                      for r in range(size)])
    assert_same(out, want, "all_gather_into_tensor 2-d")
    wide = torch.full((size * 3 * 4, 2), -1.0, dtype=torch.float64)
    dist.all_gather_into_tensor(wide[:, 0], x.reshape(-1))
    assert_same(wide[:, 0].contiguous(), want.reshape(-1), "all_gather_into_tensor strided")
    assert torch.all(wide[:, 1] == -1.0)
    # the list form with strided outputs
    base = torch.zeros(size, 5, 2, dtype=torch.int32)
    outs = [base[r, :, 1] for r in range(size)]
    dist.all_gather(outs, torch.arange(5, dtype=torch.int32) * (rank + 1))
    for r in range(size):
        assert_same(base[r, :, 1].contiguous(), torch.arange(5, dtype=torch.int32) * (r + 1),
                    f"all_gather strided block {r}")
    assert torch.all(base[:, :, 0] == 0)
    # coalesced: two inputs of different shapes (torch wants one dtype)
    a = torch.arange(3, dtype=torch.float16) + 10 * rank
    b = torch.full((2, 2), float(rank), dtype=torch.float16)
    lists = [[torch.empty_like(a), torch.empty_like(b)] for _ in range(size)]
    dist.all_gather_coalesced(lists, [a, b])
    for r in range(size):
        assert_same(lists[r][0], torch.arange(3, dtype=torch.float16) + 10 * r, "coalesced a")
        assert_same(lists[r][1], torch.full((2, 2), float(r), dtype=torch.float16), "coalesced b")
    # all_gather_into_tensor coalesced through the coalescing manager
    outs = [torch.empty(size * 4), torch.empty(size * 2, dtype=torch.int64)]
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(outs[0], torch.full((4,), float(rank)))
        dist.all_gather_into_tensor(outs[1], torch.tensor([rank, -rank]))
    cm.wait()
    assert_same(outs[0], torch.cat([torch.full((4,), float(r)) for r in range(size)]),
                "coalesced all_gather_into_tensor 0")
    assert_same(outs[1], torch.tensor([v for r in range(size) for v in (r, -r)]),
                "coalesced all_gather_into_tensor 1")


def check_reduce_scatter(rank, size, gloo):
    seed = 7000
    for dtype in ALL_DTYPES:
        for op in (ReduceOp.SUM, ReduceOp.MIN, ReduceOp.BOR, ReduceOp.AVG):
            if not valid(dtype, op):
                continue
            for count in (0, 1, 7, 1000):
                seed += 1
                ins = inputs_of(size, seed, dtype, count * size, op)
                want = reference(ins, op, size).reshape(size, count)[rank]
                what = f"reduce_scatter {dtype} {op} count {count}"
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, ins[rank], op=op)
                assert_same(out, want, what + " (tensor)")
                lst = list(ins[rank].clone().reshape(size, count).unbind(0))
                out2 = torch.empty(count, dtype=dtype)
                dist.reduce_scatter(out2, lst, op=op)
                assert_same(out2, want, what + " (list)")
    # PREMUL_SUM, the input untouched, a strided output
    x = torch.arange(4 * size, dtype=torch.float32) + rank
    keep = x.clone()
    out = torch.zeros(4, 2)
    dist.reduce_scatter_tensor(out[:, 1], x, op=dist._make_nccl_premul_sum(0.5))
    want = sum((torch.arange(4 * size, dtype=torch.float32) + r) * 0.5 for r in range(size))
    assert_same(out[:, 1].contiguous(), want.reshape(size, 4)[rank], "reduce_scatter PREMUL_SUM")
    assert_same(x, keep, "reduce_scatter_tensor leaves its input")
    assert torch.all(out[:, 0] == 0)
    # coalesced
    outs = [torch.empty(3), torch.empty(2, dtype=torch.int32)]
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(outs[0], torch.full((3 * size,), float(rank + 1)))
        dist.reduce_scatter_tensor(outs[1], torch.arange(2 * size, dtype=torch.int32))
    cm.wait()
    assert_same(outs[0], torch.full((3,), float(sum(range(1, size + 1)))), "coalesced rs 0")
    assert_same(outs[1], torch.arange(2 * rank, 2 * rank + 2, dtype=torch.int32) * size,
                "coalesced rs 1")
    # against gloo
    ins = [torch.arange(6 * size, dtype=torch.float32) * (r + 1) for r in range(size)]
    a, b = torch.empty(6), torch.empty(6)
    dist.reduce_scatter_tensor(a, ins[rank])
    dist.reduce_scatter_tensor(b, ins[rank], group=gloo)
    assert_same(a, b, "reduce_scatter_tensor against gloo")


def check_alltoall(rank, size, gloo):
    seed = 8000
    for dtype in ALL_DTYPES:
        for count in (0, 1, 5):
            seed += 1
            ins = inputs_of(size, seed, dtype, count * size)
            out = torch.empty(count * size, dtype=dtype)
            dist.all_to_all_single(out, ins[rank])
            want = torch.cat([ins[r].reshape(size, count)[rank] for r in range(size)])
            assert_same(out, want, f"all_to_all_single {dtype} count {count}")
    # split sizes: rank r sends (r + d + 1) rows of 3 to rank d
    rows_to = [rank + d + 1 for d in range(size)]
    rows_from = [s + rank + 1 for s in range(size)]
    x = torch.cat([torch.full((rows_to[d], 3), float(100 * rank + d)) for d in range(size)])
    out = torch.empty(sum(rows_from), 3)
    dist.all_to_all_single(out, x, output_split_sizes=rows_from, input_split_sizes=rows_to)
    want = torch.cat([torch.full((rows_from[s], 3), float(100 * s + rank)) for s in range(size)])
    assert_same(out, want, "all_to_all_single with split sizes")
    g = torch.empty(sum(rows_from), 3)
    dist.all_to_all_single(g, x, output_split_sizes=rows_from, input_split_sizes=rows_to,
                           group=gloo)
    assert_same(out, g, "all_to_all_single with split sizes (against gloo)")
    # lists of unequal tensors
    ins = [torch.arange(d + 1, dtype=torch.int64) + 1000 * rank for d in range(size)]
    outs = [torch.empty(rank + 1, dtype=torch.int64) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for s in range(size):
        assert_same(outs[s], torch.arange(rank + 1, dtype=torch.int64) + 1000 * s,
                    f"all_to_all from {s}")


def check_gather_scatter(rank, size, gloo):
    seed = 9000
    for dtype in (torch.float32, torch.bfloat16, torch.int16, torch.bool, torch.complex128):
        for count in MOVE_COUNTS:
            for root in range(size):
                seed += 1
                ins = inputs_of(size, seed, dtype, count)
                what = f"gather {dtype} count {count} root {root}"
                outs = [torch.empty_like(ins[0]) for _ in range(size)] if rank == root else None
                dist.gather(ins[rank], gather_list=outs, dst=root)
                if rank == root:
                    for r in range(size):
                        assert_same(outs[r], ins[r], f"{what} block {r}")
                out = torch.empty_like(ins[0])
                dist.scatter(out, scatter_list=ins if rank == root else None, src=root)
                assert_same(out, ins[rank], f"scatter {dtype} count {count} root {root}")
    # against gloo, root size - 1
    root = size - 1
    x = torch.arange(6, dtype=torch.float32) * (rank + 2)
    mine = [torch.empty(6) for _ in range(size)] if rank == root else None
    theirs = [torch.empty(6) for _ in range(size)] if rank == root else None
    dist.gather(x, gather_list=mine, dst=root)
    dist.gather(x, gather_list=theirs, dst=root, group=gloo)
    if rank == root:
        for r in range(size):
            assert_same(mine[r], theirs[r], f"gather block {r} against gloo")


def check_p2p(rank, size, gloo):
    right, left = (rank + 1) % size, (rank - 1) % size
    # a ring exchange large enough for a rendezvous, both directions at once
    for n in (0, 3, 1 << 20):
        x = torch.arange(n, dtype=torch.float32) + rank
        y = torch.empty(n, dtype=torch.float32)
        reqs = [dist.isend(x, right, tag=7), dist.irecv(y, left, tag=7)]
        for r in reqs:
            r.wait()
        assert_same(y, torch.arange(n, dtype=torch.float32) + left, f"ring exchange of {n}")
    # tags keep messages apart; a strided receive
    if rank == 0:
        dist.send(torch.tensor([1, 1, 1]), 1, tag=1)
        dist.send(torch.tensor([2, 2, 2]), 1, tag=2)
    elif rank == 1:
        base = torch.zeros(3, 2, dtype=torch.int64)
        dist.recv(base[:, 1], 0, tag=2)
        b = torch.empty(3, dtype=torch.int64)
        dist.recv(b, 0, tag=1)
        assert base[:, 1].tolist() == [2, 2, 2] and base[:, 0].tolist() == [0, 0, 0]
        assert b.tolist() == [1, 1, 1]
    # batch_isend_irecv: everyone sends its rank to everyone
    got = [torch.full((2,), -1.0) for _ in range(size)]
    ops = []
    for peer in range(size):
        if peer != rank:
            ops.append(dist.P2POp(dist.isend, torch.full((2,), float(rank)), peer))
            ops.append(dist.P2POp(dist.irecv, got[peer], peer))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for peer in range(size):
        if peer != rank:
            assert torch.all(got[peer] == float(peer)), f"batch_isend_irecv from {peer}"
    # receives from any source (src=None): rank 0 takes two messages from
    # every other rank, learns each sender, and gets one sender's messages in
    # their send order; irecv's work names its sender too
    if rank == 0:
        seen = {}
        for _ in range(2 * (size - 1)):
            t = torch.empty(4, dtype=torch.int64)
            src = dist.recv(t, tag=11)
            assert 1 <= src < size, f"recv from any source returned {src}"
            seen.setdefault(src, []).append(t[1].item())
            assert t[0].item() == src, f"recv from any source: {src} is not the sender {t[0]}"
        assert seen == {q: [0, 1] for q in range(1, size)}, f"any-source messages: {seen}"
        t = torch.empty(2)
        work = dist.irecv(t, tag=12)
        work.wait()
        assert work._source_rank() == size - 1 and t.tolist() == [5.0, 5.0]
        # larger than one transfer fragment (1 MiB): matched by its first
        big = torch.empty(300_000, dtype=torch.int64)
        src = dist.recv(big, tag=13)
        assert src == 1 and torch.equal(big, torch.arange(300_000) * 7 + 1), "2.4 MB from any"
    else:
        for m in range(2):
            dist.send(torch.tensor([rank, m, rank, m]), 0, tag=11)
        if rank == size - 1:
            dist.send(torch.full((2,), 5.0), 0, tag=12)
        if rank == 1:
            dist.send(torch.arange(300_000) * 7 + 1, 0, tag=13)
    # a collective right after point-to-point
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.all(t == size)


def check_mismatch_refused(rank, size, gloo):
    with pytest.raises(ValueError):
        dist.all_gather_into_tensor(torch.empty(size * 4 + 1), torch.ones(4))
    with pytest.raises(ValueError):
        dist.reduce_scatter_tensor(torch.empty(3), torch.ones(3 * size + 2))
    with pytest.raises((ValueError, RuntimeError)):
        dist.all_to_all_single(torch.empty(size), torch.ones(size),
                               output_split_sizes=[1] * size, input_split_sizes=[2] * size)
    with pytest.raises(ValueError):
        dist.all_gather([torch.empty(4) for _ in range(size)], torch.ones(4, dtype=torch.int32))
    t = torch.full((4,), float(rank))
    dist.all_reduce(t)
    assert torch.all(t == sum(range(size))), "the group works after refused calls"


FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def same_bits(got, want, what):
    # torch compares no 8-bit floats: compare their bytes
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    assert_same(got.view(torch.uint8), want.view(torch.uint8), what)


def check_float8(rank, size, gloo):
    """8-bit floats (gloo has none): sums of integers every partial sum of which
    is exact (whatever the algorithm), min/max/avg, the rounding and
    saturation of one combination at size 2 against torch's own float
    arithmetic, broadcast and all_gather_into_tensor of any bits."""
    for dtype, top in zip(FLOAT8, (4, 2)):  # |partial sums| <= 16 and 8: exact
        for count in (1, 7, 4099):
            ins = [(torch.randint(-top, top + 1, (count,),
                                  generator=torch.Generator().manual_seed(r * 31 + count)))
                   .to(torch.float32).to(dtype) for r in range(size)]
            wide = torch.stack([t.to(torch.float32) for t in ins])
            for op, want in ((ReduceOp.SUM, wide.sum(0)), (ReduceOp.MAX, wide.max(0).values),
                             (ReduceOp.MIN, wide.min(0).values),
                             (ReduceOp.AVG, wide.sum(0) / size)):
                t = ins[rank].clone()
                dist.all_reduce(t, op=op)
                same_bits(t, want.to(dtype), f"all_reduce {dtype} {op} count {count}")
            out = torch.empty(size * count, dtype=dtype)
            dist.all_gather_into_tensor(out, ins[rank])
            same_bits(out, torch.cat(ins), f"all_gather_into_tensor {dtype} count {count}")
            b = ins[rank].clone()
            dist.broadcast(b, src=size - 1)
            same_bits(b, ins[size - 1], f"broadcast {dtype} count {count}")
        if size == 2:
            # one combination: weft's result is torch's float sum rounded once,
            # saturation (e4m3: 448 + 448 is 448) and inf (e5m2) included
            g = torch.Generator().manual_seed(7)
            big = torch.finfo(dtype).max
            vals = [torch.cat([torch.randn(4096, generator=g) * 8, torch.tensor([big, -big])])
                    .to(dtype) for _ in range(2)]
            t = vals[rank].clone()
            dist.all_reduce(t)
            want = (vals[0].to(torch.float32) + vals[1].to(torch.float32)).to(dtype)
            same_bits(t, want, f"all_reduce {dtype} rounding")
    with pytest.raises(ValueError, match="PREMUL_SUM"):
        dist.all_reduce(torch.ones(4, dtype=torch.float8_e4m3fn),
                        op=dist._make_nccl_premul_sum(2.0))


def _checks(rank, size, gloo):
    for check in (check_reduce, check_allgather, check_reduce_scatter, check_alltoall,
                  check_gather_scatter, check_p2p, check_mismatch_refused, check_float8):
        check(rank, size, gloo)


@pytest.mark.parametrize("size", [2, 3, 4])
def test_collectives(size):
    spawn(_checks, size)
