"""weft against gloo on the same job: python -m weft_torch.bench [options]

Starts NP processes (torch.multiprocessing, a FileStore), each in a "weft"
default group and a gloo group over the same ranks, and times all_reduce,
all_gather_into_tensor and reduce_scatter_tensor on float32 CPU tensors of
each size on both backends, alternating between them: R rounds of N calls
each, the median round per backend. Rank 0 prints one table per collective
with the time of one call (us, the slowest rank's) and weft/gloo.

Size is the largest buffer of the call, as nccl-tests counts it: the tensor
of all_reduce, the output of all_gather_into_tensor, the input of
reduce_scatter_tensor (rounded up to a multiple of NP elements).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

COLLECTIVES = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().rstrip("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def sizes(lo, hi, factor):
    s = lo
    while s <= hi:
        yield s
        s *= factor


def iterations(nbytes, budget):
    # about budget bytes moved per round, between 2 and 200 calls
    return max(2, min(200, budget // max(nbytes, 1)))


def make_call(name, nbytes, np_, group):
    elems = max(np_, (nbytes // 4 + np_ - 1) // np_ * np_)
    if name == "all_reduce":
        t = torch.ones(elems)
        return lambda: dist.all_reduce(t, group=group)
    if name == "all_gather_into_tensor":
        out, inp = torch.empty(elems), torch.ones(elems // np_)
        return lambda: dist.all_gather_into_tensor(out, inp, group=group)
    out, inp = torch.empty(elems // np_), torch.ones(elems)
    return lambda: dist.reduce_scatter_tensor(out, inp, group=group)


def timed(call, n, group):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(n):
        call()
    elapsed = torch.tensor([(time.perf_counter() - start) / n])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
    return elapsed.item()


def run(rank, np_, store, args):
    import weft_torch  # noqa: F401  (registers "weft")

    dist.init_process_group("weft", init_method="file://" + store, rank=rank, world_size=np_)
    gloo = dist.new_group(backend="gloo")
    weft = dist.group.WORLD
    out = sys.stdout
    if rank == 0:
        print(f"# weft_torch.bench: {np_} processes, float32 CPU tensors, {args.rounds} rounds, "
              f"median round per backend; us per call (slowest rank)", file=out)
    for name in args.collectives:
        if rank == 0:
            print(f"\n# {name}\n{'bytes':>10} {'weft_us':>10} {'gloo_us':>10} {'weft/gloo':>9}",
                  file=out, flush=True)
        for nbytes in sizes(args.begin, args.end, args.factor):
            n = iterations(nbytes, args.budget)
            calls = {g: make_call(name, nbytes, np_, g) for g in (weft, gloo)}
            for g in (weft, gloo):  # warm-up
                timed(calls[g], 1, g)
            rounds = {weft: [], gloo: []}
            for _ in range(args.rounds):
                for g in (weft, gloo):
                    rounds[g].append(timed(calls[g], n, g))
            w = statistics.median(rounds[weft]) * 1e6
            g = statistics.median(rounds[gloo]) * 1e6
            if rank == 0:
                print(f"{nbytes:>10} {w:>10.1f} {g:>10.1f} {w / g:>9.2f}", file=out, flush=True)
    dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m weft_torch.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-np", type=int, default=2, help="processes (default 2)")
    p.add_argument("-b", "--begin", type=parse_size, default=8, help="first size (default 8)")
    p.add_argument("-e", "--end", type=parse_size, default=64 << 20,
                   help="last size (default 64M)")
    p.add_argument("-f", "--factor", type=int, default=4, help="size step factor (default 4)")
    p.add_argument("-r", "--rounds", type=int, default=5, help="rounds per backend (default 5)")
    p.add_argument("--budget", type=parse_size, default=64 << 20,
                   help="bytes per round, which sets the calls per round (default 64M)")
    p.add_argument("-c", "--collectives", nargs="+", choices=COLLECTIVES, default=COLLECTIVES)
    args = p.parse_args(argv)
    if args.np < 1 or args.begin < 1 or args.end < args.begin or args.factor < 2 or args.rounds < 1:
        p.error("need np >= 1, 1 <= begin <= end, factor >= 2, rounds >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(run, args=(args.np, os.path.join(tmp, "store"), args), nprocs=args.np)


if __name__ == "__main__":
    main()
