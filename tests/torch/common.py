"""Helpers the weft_torch tests share: spawning a job whose processes join
a "weft" default group and a gloo group over the same ranks, deterministic
inputs, the exact local reference of a reduction, and a bitwise comparison.
"""

import datetime
import functools
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ReduceOp = dist.ReduceOp

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
ALL_DTYPES = FLOATS + INTS + [torch.bool]
ARITH_OPS = [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG]
BIT_OPS = [ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR]
COUNTS = [0, 1, 7, 1000, 65537]


def spawn(fn, nprocs, *args):
    """Runs fn(rank, size, gloo_group, *args) in each of nprocs processes."""
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_entry, args=(fn, nprocs, os.path.join(tmp, "store")) + args, nprocs=nprocs,
                 join=True)


def _entry(rank, fn, size, store_path, *args):
    import weft_torch  # noqa: F401  (registers "weft")

    dist.init_process_group("weft", init_method="file://" + store_path, rank=rank,
                            world_size=size, timeout=datetime.timedelta(seconds=120))
    try:
        gloo = dist.new_group(backend="gloo")
        fn(rank, size, gloo, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def make_input(rank, seed, dtype, count, op):
    """Rank rank's input: small values for arithmetic (no overflow, exact in
    fp16/bf16), the whole range of integer types for bitwise ops."""
    g = torch.Generator().manual_seed(seed * 1009 + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=g).to(torch.bool)
    if op in BIT_OPS or (op in (ReduceOp.MIN, ReduceOp.MAX) and not dtype.is_floating_point):
        info = torch.iinfo(dtype)
        lo, hi = max(info.min, -2**31), min(info.max, 2**31 - 1)
        return torch.randint(lo, hi, (count,), generator=g, dtype=torch.int64).to(dtype)
    if op == ReduceOp.PRODUCT:
        lo = 0 if dtype == torch.uint8 else -2
        vals = torch.randint(lo, 3, (count,), generator=g)
        vals[vals == 0] = 1
        return vals.to(dtype)
    lo = 0 if dtype == torch.uint8 else -4
    return torch.randint(lo, 5, (count,), generator=g).to(dtype)


def reference(inputs, op, size):
    """The exact result of reducing inputs (one per rank) with op."""
    dtype = inputs[0].dtype
    if dtype == torch.bool:
        fn = {ReduceOp.SUM: torch.logical_or, ReduceOp.MAX: torch.logical_or,
              ReduceOp.BOR: torch.logical_or, ReduceOp.PRODUCT: torch.logical_and,
              ReduceOp.MIN: torch.logical_and, ReduceOp.BAND: torch.logical_and,
              ReduceOp.BXOR: torch.logical_xor}[op]
        return functools.reduce(fn, inputs)
    wide = [t.to(torch.float64 if dtype.is_floating_point else torch.int64) for t in inputs]
    if op in (ReduceOp.SUM, ReduceOp.AVG):
        out = functools.reduce(torch.add, wide)
        if op == ReduceOp.AVG:
            out = out / size if dtype.is_floating_point else torch.div(out, size,
                                                                          rounding_mode="trunc")
    else:
        fn = {ReduceOp.PRODUCT: torch.mul, ReduceOp.MIN: torch.minimum,
              ReduceOp.MAX: torch.maximum, ReduceOp.BAND: torch.bitwise_and,
              ReduceOp.BOR: torch.bitwise_or, ReduceOp.BXOR: torch.bitwise_xor}[op]
        out = functools.reduce(fn, wide)
    return out.to(dtype)


def valid(dtype, op):
    if op in BIT_OPS:
        return not dtype.is_floating_point
    if op == ReduceOp.AVG:
        return dtype != torch.bool
    return True


def gloo_supports(dtype, op):
    return op != ReduceOp.AVG and dtype not in (torch.int16,)


# gloo refuses int16 and complex tensors ("Invalid scalar type")
GLOO_BCAST_DTYPES = FLOATS + [torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]


def assert_same(got, want, what):
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    if not torch.equal(got, want):
        bad = (got != want).nonzero()[:5].flatten().tolist()
        raise AssertionError(f"{what}: wrong at {bad}: {got.flatten()[bad].tolist()} "
                             f"expected {want.flatten()[bad].tolist()}")
