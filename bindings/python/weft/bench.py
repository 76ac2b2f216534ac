"""Allreduce through weft vs mpi4py's Allreduce (the MPI library's) on the
same numpy arrays, in one job:

    mpirun -np 4 python3 -m weft.bench [-b 8] [-e 64M] [-f 4] [-d float32] [-o sum]

First a checked pass: at every size both results are compared with each
other and with numpy's, element by element (exit 1 on a mismatch). Then
each size is timed in rounds that alternate weft and MPI (which one goes
first alternates too); a round's time per call is the slowest rank's, and
the table shows the median over rounds and the ratio weft/MPI (below 1:
weft is faster). Python's per-call overhead is in both columns (the
header says whether weft's calls went through the compiled module,
weft._core, or ctypes only).
"""
import argparse
import sys
import time

import numpy as np

from . import Comm, Error, extension, parse_op, weft_dtype

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _bytes(text):
    t = text.strip().lower().rstrip("b")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    return int(float(t[:len(t) - len(unit)]) * _UNITS[unit])


def _human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return str(n)


def _iterations(nbytes):  # OSU's defaults
    return 1000 if nbytes <= 64 << 10 else 100 if nbytes <= 4 << 20 else 20


def _mpi_op(MPI, op):
    return {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX,
            "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR, "land": MPI.LAND,
            "lor": MPI.LOR, "lxor": MPI.LXOR}.get(op)


def _input(dt, n, rank):
    """Small integers: every sum is exact, so results are comparable."""
    return ((np.arange(n, dtype=np.int64) * 7 + rank * 13) % 61 - 30).astype(dt)


def _sizes(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    if out[-1] != hi:
        out.append(hi)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m weft.bench", description=__doc__.split("\n")[0])
    ap.add_argument("-b", "--min", default="8", help="smallest message in bytes (default 8)")
    ap.add_argument("-e", "--max", default="64M", help="largest message (default 64M)")
    ap.add_argument("-f", "--factor", type=int, default=4, help="size step factor (default 4)")
    ap.add_argument("-d", "--dtype", default="float32", help="numpy dtype (default float32)")
    ap.add_argument("-o", "--op", default="sum", help="reduction (default sum)")
    ap.add_argument("-n", "--iterations", type=int, default=0,
                    help="calls per size and library (default: OSU's 1000/100/20)")
    ap.add_argument("-r", "--rounds", type=int, default=5, help="alternating rounds (default 5)")
    ap.add_argument("--world", action="store_true",
                    help="weft.Comm.world() (PMIx) instead of Comm.from_mpi4py(COMM_WORLD)")
    ap.add_argument("--in-place", action="store_true", help="in-place allreduce for both")
    args = ap.parse_args(argv)
    try:
        from mpi4py import MPI
    except ImportError:
        sys.exit("weft.bench compares with mpi4py's Allreduce: install mpi4py "
                 "(Debian: python3-mpi4py)")
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    dt = np.dtype(args.dtype)
    op = parse_op(args.op).name.lower()
    mpiop = _mpi_op(MPI, op)
    weft_dtype(dt)
    if mpiop is None or args.factor < 2 or args.rounds < 1:
        sys.exit("weft.bench: op %s has no MPI counterpart, or bad -f/-r" % op)
    comm = Comm.world() if args.world else Comm.from_mpi4py(world)
    sizes = _sizes(max(_bytes(args.min), dt.itemsize), _bytes(args.max), args.factor)
    say = print if rank == 0 else (lambda *a, **k: None)
    say("# weft.bench: allreduce %s %s, %d ranks, weft vs mpi4py Allreduce (%s)"
        % (dt.name, op, size, MPI.Get_library_version().splitlines()[0].strip()))
    say("# weft calls: %s" % ("compiled module " + extension if extension else
                              "ctypes only (no weft._core: source tree or WEFT_PYTHON_EXT=0)"))

    # checked pass
    wrong = []
    for nbytes in sizes:
        n = nbytes // dt.itemsize
        x = _input(dt, n, rank)
        ours, theirs = np.empty_like(x), np.empty_like(x)
        comm.allreduce(x, op, out=ours)
        world.Allreduce(x, theirs, op=mpiop)
        if op == "sum":
            expect = sum(_input(np.int64, n, r) for r in range(size)).astype(dt)
        else:
            expect = theirs
        bad = not (np.array_equal(ours, theirs) and np.array_equal(ours, expect))
        if world.allreduce(int(bad), op=MPI.SUM):
            wrong.append(nbytes)
    say("# check: %s" % ("every size ok" if not wrong else
                         "WRONG at " + ", ".join(_human(s) for s in wrong)))
    if wrong:
        comm.destroy()
        return 1

    say("%10s %12s %12s %12s %9s" % ("bytes", "count", "weft_us", "mpi_us", "weft/mpi"))
    for nbytes in sizes:
        n = nbytes // dt.itemsize
        src = _input(dt, n, rank)
        dst = np.empty_like(src)
        iters = max(1, (args.iterations or _iterations(nbytes)) // args.rounds)

        def run_weft(k):
            for _ in range(k):
                if args.in_place:
                    comm.allreduce(dst, op)
                else:
                    comm.allreduce(src, op, out=dst)

        def run_mpi(k):
            for _ in range(k):
                world.Allreduce(MPI.IN_PLACE if args.in_place else src, dst, op=mpiop)

        run_weft(min(iters, 10))  # warm-up: connections, caches
        run_mpi(min(iters, 10))
        times = {"weft": [], "mpi": []}
        for rnd in range(args.rounds):
            order = [("weft", run_weft), ("mpi", run_mpi)]
            if rnd % 2:
                order.reverse()
            for name, fn in order:
                world.Barrier()
                t0 = time.perf_counter()
                fn(iters)
                t = (time.perf_counter() - t0) / iters
                times[name].append(world.allreduce(t, op=MPI.MAX))
        w, m = (float(np.median(times[k])) * 1e6 for k in ("weft", "mpi"))
        say("%10d %12d %12.2f %12.2f %9.2f" % (nbytes, n, w, m, w / m))
        sys.stdout.flush()
    comm.destroy()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Error as e:
        sys.exit("weft.bench: %s" % e)
