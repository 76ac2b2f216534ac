"""Shared fixtures and reference data for the weft Python tests.

Every rank runs the same tests in the same order (pytest's collection order
is deterministic), so the collectives of a test match across ranks. Data is
a function of (rank, index), so each rank computes the expected result of
any collective with numpy from the other ranks' inputs.
"""
import os

import numpy as np
import pytest

import weft

INT_DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64]
FLOAT_DTYPES = [np.float16, np.float32, np.float64]
DTYPES = INT_DTYPES + FLOAT_DTYPES
try:
    import ml_dtypes

    DTYPES.append(ml_dtypes.bfloat16)
    FLOAT_DTYPES.append(ml_dtypes.bfloat16)
except ImportError:
    pass


@pytest.fixture(scope="session")
def comm():
    """weft_comm_world: PMIx under mpirun, this process alone outside it."""
    c = weft.Comm.world()
    yield c
    c.destroy()


def data(dtype, n, rank, op="sum", salt=0):
    """Rank `rank`'s input: small values whose sums, products and averages
    are exact in every dtype at up to 4 ranks."""
    dt = np.dtype(dtype)
    i = np.arange(n, dtype=np.int64) * 7 + rank * 13 + salt * 5
    if op == "prod":
        v = i % 3 + 1
        return (v / 2 if dt.kind not in "iu" else v).astype(dt)
    v = i % 61
    if dt.kind == "u":
        return v.astype(dt)
    v = v - 30
    return (v / 4 if dt.kind not in "iu" else v).astype(dt)


def expected_reduce(dtype, n, size, op, salt=0):
    """The reduction of every rank's data(), computed with numpy."""
    dt = np.dtype(dtype)
    ins = [data(dt, n, r, op, salt) for r in range(size)]
    if size == 1 and op not in ("avg",):
        return ins[0].copy()
    wide = np.stack([x.astype(np.float64 if dt.kind not in "iu" else np.int64) for x in ins])
    if op == "sum":
        return wide.sum(axis=0).astype(dt)
    if op == "prod":
        return wide.prod(axis=0).astype(dt)
    if op == "min":
        return wide.min(axis=0).astype(dt)
    if op == "max":
        return wide.max(axis=0).astype(dt)
    if op == "avg":
        s = wide.sum(axis=0)
        if dt.kind in "iu":  # truncates toward zero
            return (np.sign(s) * (np.abs(s) // size)).astype(dt)
        if dt.itemsize == 8:
            return (s / size).astype(dt)
        # half and single: divided in single precision, rounded once to dt
        return (s.astype(np.float32) / np.float32(size)).astype(dt)
    stack = np.stack(ins)
    if op in ("band", "bor", "bxor"):
        fn = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
        return fn.reduce(stack, axis=0)
    fn = {"land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[op]
    return fn.reduce(stack != 0, axis=0).astype(dt)


def ops_for(dtype):
    if np.dtype(dtype).kind in "iu":
        return ["sum", "prod", "min", "max", "avg", "band", "bor", "bxor", "land", "lor", "lxor"]
    return ["sum", "prod", "min", "max", "avg"]


def same(actual, expect):
    """Element by element, bit for bit (NaN-free data)."""
    np.testing.assert_array_equal(np.asarray(actual), np.asarray(expect), strict=True)


def _rank_file(kind):
    """tests/python/test_python.sh collects one file per rank of each job."""
    where = os.environ.get("WEFT_PYTEST_RESULTS")
    if not where:
        return None
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMIX_RANK", "0"))
    return os.path.join(where, "%s.%s" % (kind, rank))


def pytest_configure(config):
    path = _rank_file("pid")
    if path:
        with open(path, "w") as f:
            f.write("%d\n" % os.getpid())


def pytest_sessionfinish(session, exitstatus):
    path = _rank_file("rc")
    if path:
        with open(path, "w") as f:
            f.write("%d\n" % int(exitstatus))
